// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * restart.c - tagdiskctl restart: ask the daemon to re-execute in place, then
 * wait until the new image answers, and say what it did.
 *
 * The daemon replies before it drains and re-executes; its socket then goes
 * away and comes back. The new image is known by its takeover count, one more
 * than before the request (the pid stays: it is the same process).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "common/jsonc.h"
#include "ctl/ctl_format.h"
#include "ctl/ctl_int.h"

#define RESTART_WAIT_MS 120000 /* draining and writing a volatile cache back take time */

/*
 * One quiet `status` on a fresh connection (the socket may be gone or not
 * yet back). Return: the reply, or NULL.
 */
static struct json_object *quiet_status(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct json_object *reply = NULL;
	char buf[65536];
	size_t have = 0;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return NULL;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, "status\n", 7) != 7)
		goto out;
	while (have < sizeof(buf)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 5000) <= 0)
			goto out;
		n = read(fd, buf + have, sizeof(buf) - have);
		if (n <= 0)
			goto out;
		have += (size_t)n;
		char *nl = memchr(buf, '\n', have);

		if (nl) {
			reply = td_jsonc_parse(buf, (size_t)(nl - buf));
			break;
		}
	}
out:
	close(fd);
	return reply;
}

int td_ctl_run_restart(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	struct json_object *before, *reply, *after = NULL;
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];
	uint64_t takeovers;
	int64_t deadline;
	int r;

	(void)cmd, (void)argc, (void)argv;
	r = td_ctl_call(ctl, "status", false, &before);
	if (r)
		return r;
	takeovers = td_ctl_get_u64(before, "/takeovers");
	json_object_put(before);
	r = td_ctl_call(ctl, "restart", true, &reply);
	if (r)
		return r;
	if (!ctl->json)
		printf("restarting tagdiskd (pid %s): draining, writing back, re-executing\n",
		       td_ctl_get_num(reply, "/pid", a, sizeof(a)));
	json_object_put(reply);
	td_ctl_conn_close(&ctl->conn);
	fflush(stdout);

	deadline = td_ctl_now_ms() + RESTART_WAIT_MS;
	while (td_ctl_now_ms() < deadline) {
		struct timespec ts = { .tv_nsec = 50 * 1000 * 1000 };

		after = quiet_status(ctl->socket);
		if (after && td_ctl_get_u64(after, "/takeovers") > takeovers)
			break;
		json_object_put(after);
		after = NULL;
		nanosleep(&ts, NULL);
	}
	if (!after) {
		fprintf(stderr, "tagdiskctl: restart: no new daemon answered on %s within %d s\n",
			ctl->socket, RESTART_WAIT_MS / 1000);
		return TD_CTL_REFUSED;
	}
	if (ctl->json) {
		size_t len;
		const char *text = td_jsonc_line(after, &len);

		printf("%.*s\n", (int)len, text ? text : "{}");
	} else {
		printf("restarted: pid %s, version %s, %s requests resent\n",
		       td_ctl_get_num(after, "/pid", a, sizeof(a)), td_ctl_get_str(after, "/version"),
		       td_ctl_get_num(after, "/resent", b, sizeof(b)));
	}
	json_object_put(after);
	return td_ctl_flush_stdout();
}
