// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * notify.c - the sd_notify(3) datagram protocol, without libsystemd (with an fd
 * attached too, as sd_pid_notify_with_fds() sends FDSTORE=1).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "daemon/daemon.h"

int td_notify_fd(const char *state, int fd)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)state, strlen(state) };
	struct msghdr msg = { .msg_name = &sa, .msg_iov = &iov, .msg_iovlen = 1 };
	size_t len;
	int sock, ret = 0;

	if (!path || !*path)
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	msg.msg_namelen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	if (fd >= 0) {
		/* The fd rides along (SCM_RIGHTS): FDSTORE=1. */
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	if (sendmsg(sock, &msg, MSG_NOSIGNAL) < 0)
		ret = -errno;
	close(sock);
	return ret;
}

int td_notify(const char *state)
{
	return td_notify_fd(state, -1);
}

int td_notifyf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return td_notify(buf);
}
