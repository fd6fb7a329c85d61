// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * conn.c - tagdiskctl's connection to the admin socket: waits, signals,
 * reading lines, and one request and its reply (ctl_int.h).
 *
 * The protocol is one command line out, one JSON line back, on a connection
 * that stays open for more. Replies are read into one buffer that grows to
 * REPLY_MAX, since `tags` or `stats` on a deep queue can be large; bytes past
 * the newline stay for the next line, which matters for the trace stream.
 * Every wait is a ppoll() with the reply timeout, except between trace
 * events, which may be far apart.
 *
 * Signals: the streaming commands catch SIGINT and SIGTERM, keeping them
 * blocked except while waiting in ppoll(), so Ctrl-C ends a wait with EINTR
 * and the program with status 0; one-shot commands keep the default
 * (killed).
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "common/jsonc.h"
#include "ctl/ctl_int.h"

/* Largest reply accepted: `tags` at depth 4096 is well under 1 MiB. */
#define REPLY_MAX  (16U << 20)
#define READ_CHUNK (64U << 10)

volatile sig_atomic_t td_ctl_stop_requested;
/* The signal mask to wait with once td_ctl_catch_stop_signals() blocked SIGINT and SIGTERM. */
static sigset_t wait_mask;
static bool wait_mask_set;

/* ---- time and signals ------------------------------------------------------------------ */

int64_t td_ctl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_stop_signal(int sig)
{
	(void)sig;
	td_ctl_stop_requested = 1;
}

/* The signals stay blocked except inside wait_for(). */
void td_ctl_catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigset_t block;

	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &wait_mask);
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGTERM);
	wait_mask_set = true;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * Wait up to @timeout_ms (< 0: no limit) for the @nfds entries of @pfd (0: just sleep).
 * Return: what ppoll() returns; -1 with EINTR once a stop was requested.
 */
static int wait_for(struct pollfd *pfd, nfds_t nfds, int64_t timeout_ms)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ms / 1000),
		.tv_nsec = (long)(timeout_ms % 1000) * 1000000,
	};

	if (td_ctl_stop_requested) {
		errno = EINTR;
		return -1;
	}
	return ppoll(pfd, nfds, timeout_ms < 0 ? NULL : &ts,
		     wait_mask_set ? &wait_mask : NULL);
}

int td_ctl_sleep_until(const struct timespec *deadline)
{
	for (;;) {
		int64_t left = (int64_t)deadline->tv_sec * 1000 + deadline->tv_nsec / 1000000 -
			       td_ctl_now_ms();

		if (td_ctl_stop_requested)
			return TD_CTL_STOP;
		if (left <= 0)
			return TD_CTL_OK;
		wait_for(NULL, 0, left);
	}
}

void td_ctl_timespec_add(struct timespec *ts, double seconds)
{
	double whole = floor(seconds);

	ts->tv_sec += (time_t)whole;
	ts->tv_nsec += (long)((seconds - whole) * 1e9);
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* ---- stdout ---------------------------------------------------------------------------- */

int td_ctl_flush_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return TD_CTL_OK;
	if (errno == EPIPE)
		return TD_CTL_STOP;
	fprintf(stderr, "tagdiskctl: cannot write to stdout: %s\n", strerror(errno));
	return TD_CTL_REFUSED;
}

/* ---- connection ------------------------------------------------------------------------ */

/* What a path that is not a socket is, for a message. */
static const char *file_kind(mode_t mode)
{
	if (S_ISREG(mode))
		return "a regular file";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	return "not a socket";
}

int td_ctl_conn_open(struct td_ctl_conn *c, const char *path, int timeout_ms, char *why,
		     size_t whylen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};
	const char *hint = " (is tagdiskd running? use -s SOCKET)";
	struct stat st;
	int err;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->watch_fd = -1;
	c->path = path;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, whylen, "cannot connect to %s: path too long (at most %zu bytes)",
			 path, sizeof(sa.sun_path) - 1);
		return TD_CTL_CONNECT;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		err = errno;
		goto out_fail;
	}
	/* A daemon whose listen backlog is full would otherwise block connect() for ever. */
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EISCONN)
			break; /* an interrupted connect completed meanwhile */
		err = errno;
		goto out_close_fd;
	}
	return TD_CTL_OK;

out_close_fd:
	close(c->fd);
	c->fd = -1;
out_fail:
	/* A file where a socket should be reads as "Connection refused": say what it is. */
	if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		snprintf(why, whylen, "%s is %s, not a socket", path, file_kind(st.st_mode));
		return TD_CTL_USAGE;
	}
	if (err == EACCES || err == EPERM)
		hint = " (run as root or as a member of the socket's group)";
	else if (err == EAGAIN)
		hint = " (timed out: the daemon is not accepting connections)";
	else if (err == ECONNREFUSED)
		hint = " (a socket nobody listens on: its tagdiskd is gone)";
	snprintf(why, whylen, "cannot connect to %s: %s%s", path, strerror(err), hint);
	return TD_CTL_CONNECT;
}

void td_ctl_conn_close(struct td_ctl_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
}

/* Send all of @line. Return: 0, or a positive errno. */
static int conn_send(struct td_ctl_conn *c, const char *line, size_t len)
{
	while (len) {
		ssize_t n = send(c->fd, line, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR && !td_ctl_stop_requested)
				continue;
			return errno;
		}
		line += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Make room to read at least one more chunk. Return: 0; -E2BIG when the
 * pending line is already longer than REPLY_MAX; -ENOMEM.
 */
static int conn_make_room(struct td_ctl_conn *c)
{
	const size_t max_cap = REPLY_MAX + READ_CHUNK;
	size_t pending = c->end - c->start;
	size_t cap;
	char *buf;

	if (pending > REPLY_MAX)
		return -E2BIG;
	if (c->start && c->cap - c->end < READ_CHUNK) {
		memmove(c->buf, c->buf + c->start, pending);
		c->end = pending;
		c->start = 0;
	}
	if (c->cap - c->end >= READ_CHUNK)
		return 0;
	/* pending <= REPLY_MAX, so at max_cap a whole chunk always fits. */
	cap = TD_MIN(TD_MAX(c->cap * 2, (size_t)READ_CHUNK), max_cap);
	buf = realloc(c->buf, cap);
	if (!buf)
		return -ENOMEM;
	c->buf = buf;
	c->cap = cap;
	return 0;
}

/*
 * Wait until the socket can be read (TD_CTL_READ_LINE), @deadline passes
 * (TD_CTL_READ_TIMEOUT; none when @timeout_ms < 0), the user stops us, or
 * the reader of watch_fd goes away.
 */
static enum td_ctl_read conn_wait(struct td_ctl_conn *c, int timeout_ms, int64_t deadline)
{
	for (;;) {
		/* poll(2) skips a negative fd; a pipe whose reader closed reports POLLERR. */
		struct pollfd pfd[2] = {
			{ .fd = c->fd, .events = POLLIN },
			{ .fd = c->watch_fd },
		};
		int64_t wait_ms = -1;
		int n;

		if (timeout_ms >= 0) {
			wait_ms = deadline - td_ctl_now_ms();
			if (wait_ms <= 0)
				return TD_CTL_READ_TIMEOUT;
		}
		n = wait_for(pfd, 2, wait_ms);
		if (n < 0 && errno != EINTR)
			return TD_CTL_READ_ERROR;
		if (td_ctl_stop_requested)
			return TD_CTL_READ_INTERRUPTED;
		/* Asked for no events, it can only report POLLERR, POLLHUP or POLLNVAL. */
		if (n > 0 && pfd[1].revents)
			return TD_CTL_READ_WATCH_CLOSED;
		if (n > 0)
			return TD_CTL_READ_LINE;
		/* EINTR, or the timeout: the top looks at the deadline again. */
	}
}

enum td_ctl_read td_ctl_conn_read_line(struct td_ctl_conn *c, int timeout_ms, char **line,
				       size_t *len)
{
	int64_t deadline = timeout_ms >= 0 ? td_ctl_now_ms() + timeout_ms : 0;

	for (;;) {
		enum td_ctl_read w;
		char *nl = NULL;
		ssize_t n;
		int r;

		if (c->end > c->start + c->scanned)
			nl = memchr(c->buf + c->start + c->scanned, '\n',
				    c->end - c->start - c->scanned);
		if (nl) {
			*nl = '\0';
			*line = c->buf + c->start;
			*len = (size_t)(nl - *line);
			c->start = (size_t)(nl + 1 - c->buf);
			c->scanned = 0;
			return TD_CTL_READ_LINE;
		}
		c->scanned = c->end - c->start;
		r = conn_make_room(c);
		if (r == -E2BIG)
			return TD_CTL_READ_TOO_LONG;
		if (r) {
			errno = -r;
			return TD_CTL_READ_ERROR;
		}
		w = conn_wait(c, timeout_ms, deadline);
		if (w != TD_CTL_READ_LINE)
			return w;
		n = read(c->fd, c->buf + c->end, c->cap - c->end);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return TD_CTL_READ_ERROR;
		}
		if (n == 0)
			return c->end > c->start ? TD_CTL_READ_EOF_PARTIAL : TD_CTL_READ_EOF;
		c->end += (size_t)n;
	}
}

enum td_ctl_read td_ctl_conn_read_bytes(struct td_ctl_conn *c, int timeout_ms, void *buf,
					size_t cap, size_t *got)
{
	int64_t deadline = timeout_ms >= 0 ? td_ctl_now_ms() + timeout_ms : 0;

	*got = 0;
	if (c->end > c->start) {
		/* What came in behind the last line is the start of the bytes. */
		size_t n = TD_MIN(cap, c->end - c->start);

		memcpy(buf, c->buf + c->start, n);
		c->start += n;
		c->scanned = 0;
		*got = n;
		return TD_CTL_READ_LINE;
	}
	for (;;) {
		enum td_ctl_read w = conn_wait(c, timeout_ms, deadline);
		ssize_t n;

		if (w != TD_CTL_READ_LINE)
			return w;
		n = read(c->fd, buf, cap);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return TD_CTL_READ_ERROR;
		}
		if (n == 0)
			return TD_CTL_READ_EOF;
		*got = (size_t)n;
		return TD_CTL_READ_LINE;
	}
}

/* ---- one request ----------------------------------------------------------------------- */

int td_ctl_call(struct td_ctl *ctl, const char *command, bool echo, struct json_object **reply)
{
	struct td_ctl_conn *c = &ctl->conn;
	struct json_object *v;
	struct json_object *ok;
	size_t cmd_len = strlen(command);
	char cmd_line[TD_CTL_LINE_MAX + 1];
	char *line;
	size_t len;
	int send_err;

	*reply = NULL;
	assert(cmd_len <= TD_CTL_LINE_MAX); /* td_ctl_run_simple() refused longer lines */
	memcpy(cmd_line, command, cmd_len);
	cmd_line[cmd_len] = '\n';
	/* A daemon that refuses us writes its reason before closing: read it even if send fails. */
	send_err = conn_send(c, cmd_line, cmd_len + 1);

	switch (td_ctl_conn_read_line(c, ctl->timeout_ms, &line, &len)) {
	case TD_CTL_READ_LINE:
		break;
	case TD_CTL_READ_INTERRUPTED:
	case TD_CTL_READ_WATCH_CLOSED:
		return TD_CTL_STOP;
	case TD_CTL_READ_TIMEOUT:
		if (send_err && send_err != EINTR) {
			fprintf(stderr, "tagdiskctl: cannot send to %s: %s\n", c->path,
				strerror(send_err));
			return TD_CTL_CONNECT;
		}
		fprintf(stderr, "tagdiskctl: no reply from the daemon on %s within %g s\n", c->path,
			ctl->timeout_ms / 1000.0);
		return TD_CTL_CONNECT;
	case TD_CTL_READ_ERROR:
		if (errno != ECONNRESET) {
			fprintf(stderr, "tagdiskctl: reading from %s: %s\n", c->path,
				strerror(errno));
			return TD_CTL_CONNECT;
		}
		/* Closed with our command unread: the same as closing without a word. */
		__attribute__((fallthrough));
	case TD_CTL_READ_EOF:
		/* Whether our send failed too only says when it closed: one message for both. */
		fprintf(stderr, "tagdiskctl: the daemon on %s closed the connection without "
				"replying\n",
			c->path);
		return TD_CTL_CONNECT;
	case TD_CTL_READ_EOF_PARTIAL:
		fprintf(stderr, "tagdiskctl: the daemon on %s closed the connection in the middle "
				"of a reply\n",
			c->path);
		return TD_CTL_CONNECT;
	case TD_CTL_READ_TOO_LONG:
		fprintf(stderr, "tagdiskctl: bad reply from the daemon (longer than %u MiB)\n",
			REPLY_MAX >> 20);
		return TD_CTL_REFUSED;
	}

	v = td_jsonc_parse(line, len);
	ok = td_jsonc_get(v, "/ok");
	if (!json_object_is_type(v, json_type_object) ||
	    !json_object_is_type(ok, json_type_boolean)) {
		json_object_put(v);
		fprintf(stderr, "tagdiskctl: bad reply from the daemon\n");
		return TD_CTL_REFUSED;
	}
	if (echo && ctl->json) {
		fwrite(line, 1, len, stdout);
		putchar('\n');
	}
	if (!json_object_get_boolean(ok)) {
		const char *error =
			td_jsonc_as_str(td_jsonc_get(v, "/error"), "the daemon refused");

		/*
		 * A command neither knows: add the ones tagdiskctl has near it (top,
		 * iostat are its own), unless the daemon named some itself.
		 */
		size_t word_end = strcspn(error, "(");

		while (word_end && error[word_end - 1] == ' ')
			word_end--;
		if (!(echo && ctl->json) && ctl->near[0] &&
		    strncmp(error, "unknown command ", 16) == 0 && !strstr(error, "did you mean"))
			fprintf(stderr, "tagdiskctl: %.*s (did you mean %s?)\n", (int)word_end,
				error, ctl->near);
		else if (!(echo && ctl->json))
			fprintf(stderr, "tagdiskctl: %s\n", error);
		json_object_put(v);
		return TD_CTL_REFUSED;
	}
	*reply = v;
	return TD_CTL_OK;
}
