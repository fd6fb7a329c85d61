// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_session_adopt.c - serving a FUSE connection another daemon mounted
 * and served (takeover.h says who keeps it open in between).
 *
 * The kernel negotiated FUSE_INIT with the first daemon and will not do it
 * again, while libfuse answers nothing before it has seen an INIT. So the
 * adopting session replays the kernel's recorded INIT arguments to libfuse
 * (with a unique the kernel never uses); libfuse and our session_init() set
 * themselves up exactly as they did then, and the reply is kept instead of
 * written. Then FUSE_NOTIFY_RESEND (Linux 6.9) moves every request the dead
 * daemon had read and not answered back to the head of the pending queue,
 * each with FUSE_UNIQUE_RESEND in its unique (replies keep it, and so the
 * kernel matches them); they are read here, before the loop threads start,
 * so that they can be counted: after the resend the device returns them
 * first, and EAGAIN (non-blocking) or an unmarked request ends them.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/fuse_session_int.h"

/* Replay the recorded INIT to libfuse. Return: 0 or a negative errno. */
static int replay_init(struct td_fuse_session *s)
{
	struct {
		struct fuse_in_header in;
		uint8_t args[TD_INIT_ARGS_MAX];
	} msg;
	struct fuse_buf fbuf = { .mem = &msg };
	int ret;

	memset(&msg, 0, sizeof(msg));
	msg.in.opcode = FUSE_INIT;
	msg.in.unique = TD_SYNTH_INIT_UNIQUE;
	msg.in.len = (uint32_t)(sizeof(msg.in) + s->init_in_len);
	memcpy(msg.args, s->init_in, s->init_in_len);
	fbuf.size = msg.in.len;
	td_session_init_seen(s, &msg.in, msg.in.len);
	fuse_session_process_buf(s->se, &fbuf);
	td_mutex_lock(&s->lock);
	ret = s->init_state == TD_INIT_DONE ? 0 : s->init_err ? s->init_err : -EPROTO;
	td_mutex_unlock(&s->lock);
	return ret;
}

/* Ask the kernel to resend what the previous daemon read and did not answer. */
static int notify_resend(struct td_fuse_session *s)
{
	struct fuse_out_header oh = {
		.len = sizeof(oh),
		.error = TD_FUSE_NOTIFY_RESEND,
		.unique = 0,
	};

	return write(s->fd, &oh, sizeof(oh)) == (ssize_t)sizeof(oh) ? 0 : -errno;
}

/* Read and handle the resent requests (non-blocking); count them in s->resent. */
static int take_resent(struct td_fuse_session *s)
{
	int flags = fcntl(s->fd, F_GETFL);
	struct td_buf *rb = NULL;
	int ret = 0;

	if (flags < 0 || fcntl(s->fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	for (;;) {
		if (!rb)
			rb = td_session_recv_buf(s);
		if (!rb) {
			ret = -ENOMEM;
			break;
		}
		struct fuse_buf fbuf = { .mem = rb->mem, .size = rb->cap };
		int res = fuse_session_receive_buf(s->se, &fbuf);

		if (res == -EINTR)
			continue;
		if (res == -EAGAIN)
			break;
		if (res <= 0) {
			ret = res ? res : -ENOTCONN;
			break;
		}
		const struct fuse_in_header *in = (const void *)fbuf.mem;
		bool resent = in->unique & TD_FUSE_UNIQUE_RESEND;

		if (resent)
			s->resent++;
		td_session_handle_request(s, &rb, &fbuf, (size_t)res);
		if (!resent)
			break; /* the first of the new ones: the rest is the loop's */
	}
	td_bufpool_put(s->pool, rb);
	if (fcntl(s->fd, F_SETFL, flags) < 0 && !ret)
		ret = -errno;
	return ret;
}

int td_session_adopt(struct td_fuse_session *s)
{
	int ret;

	td_session_set_thread(s);
	ret = replay_init(s);
	if (ret) {
		td_err("takeover: libfuse refused the recorded FUSE_INIT: %s", strerror(-ret));
		return ret;
	}
	if (!(s->init_flags & TD_FUSE_HAS_RESEND)) {
		td_warnx("takeover: the kernel did not offer FUSE_HAS_RESEND: requests the previous "
			 "daemon left unanswered wait until unmount");
		return 0;
	}
	ret = notify_resend(s);
	if (!ret)
		ret = take_resent(s);
	if (ret)
		td_err("takeover: resending the unanswered requests: %s", strerror(-ret));
	return ret;
}

void td_session_unmount_adopted(struct td_fuse_session *s)
{
	struct pollfd pfd = { .fd = s->fd };

	/*
	 * A connection the kernel has ended reports POLLERR: unmounted from
	 * outside. The directory may hold someone else's mount by now; leave it
	 * (libfuse checks the same before it unmounts what it mounted).
	 */
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR))
		return;
	if (umount2(s->mountpoint, UMOUNT_NOFOLLOW) == 0)
		return;
	if (errno == EBUSY && umount2(s->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		return;
	td_warn("fuse: unmounting \"%s\"", s->mountpoint);
}
