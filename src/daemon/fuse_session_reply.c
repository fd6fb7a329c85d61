// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_session_reply.c - the classic transport's reply path: libfuse's custom
 * I/O hook, FUSE_INIT, FUSE_OPEN, and the glue to FUSE over io_uring.
 *
 * libfuse 3.14 knows nothing of FUSE over io_uring, so the session installs
 * libfuse's custom I/O hook (fuse_session_custom_io) on the mounted fd: every
 * reply libfuse writes goes through session_send(), which (1) adds
 * FUSE_OVER_IO_URING to the INIT reply when the kernel offered it and the
 * rings are ready (made before mounting, fuse_uring.h), then lets the ring
 * threads register, (2) sends a reply whose unique is a ring tag to its ring
 * entry, and (3) settles the INIT outcome td_fuse_session_wait_ready() waits
 * for. Ring threads hand requests to libfuse (fuse_session_process_buf)
 * exactly as loop threads do, so the ops cannot tell the transports apart.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/fuse_session_int.h"
#include "daemon/fuse_uring_abi.h"

#define MAX_SESSIONS 8 /* sessions the custom I/O hook can map back from their fd */

/*
 * The sessions the custom I/O hook serves (it gets the fd, not the session):
 * a slot is claimed by a compare-and-swap from NULL, and the session's fd
 * is set before it is published there.
 */
static _Atomic(struct td_fuse_session *) sessions[MAX_SESSIONS];

static struct td_fuse_session *session_of_fd(int fd)
{
	for (unsigned int i = 0; i < MAX_SESSIONS; i++) {
		struct td_fuse_session *s = atomic_load(&sessions[i]);

		if (s && s->fd == fd)
			return s;
	}
	return NULL;
}

void td_session_uring_fallback(struct td_fuse_session *s, const char *why)
{
	if (s->transport == TD_TRANSPORT_URING)
		td_err("fuse: transport uring asked for but not available: %s", why);
	else
		td_notice("fuse: transport classic: %s", why);
}

void td_session_init_settle(struct td_fuse_session *s, enum td_init_state state, int err)
{
	td_mutex_lock(&s->lock);
	if (s->init_state == TD_INIT_WAITING) {
		s->init_state = state;
		s->init_err = err;
	}
	td_cond_broadcast(&s->init_cond);
	td_mutex_unlock(&s->lock);
}

/* Keep the arguments of the INIT reply in @iov (@count parts) for a successor. */
static void keep_init_out(struct td_fuse_session *s, const struct iovec *iov, int count)
{
	s->init_out_len = 0;
	for (int i = 1; i < count; i++) {
		size_t n = TD_MIN(iov[i].iov_len, sizeof(s->init_out) - s->init_out_len);

		memcpy(s->init_out + s->init_out_len, iov[i].iov_base, n);
		s->init_out_len += n;
	}
}

/* The rings made before mounting are not to be used: take them down, say why. */
static void drop_rings(struct td_fuse_session *s, const char *why)
{
	if (!s->rings)
		return;
	td_fuse_uring_destroy(s->rings);
	s->rings = NULL;
	td_session_uring_fallback(s, why);
}

/*
 * The INIT reply, when the kernel offered the ring and the rings are made:
 * ask for io_uring in it and, once it is written, let the ring threads
 * register. Return: false when the rings do not fit the reply (dropped; the
 * caller writes it as it is), else true with the writev(2) result in
 * *@written.
 */
static bool init_reply_uring(struct td_fuse_session *s, int fd, struct iovec *iov,
			     ssize_t *written)
{
	struct fuse_init_out out;
	size_t n = iov[1].iov_len;
	size_t page = (size_t)getpagesize();
	struct td_fuse_uring *u = s->rings;
	int ret;

	memset(&out, 0, sizeof(out));
	memcpy(&out, iov[1].iov_base, n);
	/* The rings' payload was sized for the limits session_init() sets. */
	if (out.max_write > td_fuse_uring_payload(u) ||
	    (size_t)out.max_pages * page > td_fuse_uring_payload(u)) {
		drop_rings(s, "the INIT reply's max_write or max_pages exceed the ring buffers");
		return false;
	}
	out.flags |= FUSE_INIT_EXT;
	out.flags2 |= (uint32_t)(TD_FUSE_OVER_IO_URING >> 32);
	struct iovec v[2] = { iov[0], { &out, n } };

	keep_init_out(s, v, 2);
	*written = writev(fd, v, 2);
	if (*written < 0) {
		td_session_init_settle(s, TD_INIT_FAILED, -errno);
		return true;
	}
	/* Published before any ring request comes: their replies look it up. */
	s->rings = NULL;
	atomic_store(&s->uring, u);
	ret = td_fuse_uring_start(u, fd);
	if (!ret) {
		td_notice("fuse: transport uring: %u queues x %u entries, %zu KiB payload each",
			  td_fuse_uring_nr_cpus(), td_fuse_uring_entries(u),
			  td_fuse_uring_payload(u) >> 10);
		td_session_init_settle(s, TD_INIT_DONE, 0);
		return true;
	}
	/*
	 * The kernel serves the connection through /dev/fuse after a refused
	 * REGISTER; the rings stay (a reply to a request one of them got
	 * first still has to reach it) until the session ends.
	 */
	char why[128];

	snprintf(why, sizeof(why), "the kernel refused the ring entries: %s", strerror(-ret));
	td_session_uring_fallback(s, why);
	s->uring_refused = true;
	td_session_init_settle(s, s->transport == TD_TRANSPORT_URING ? TD_INIT_FAILED : TD_INIT_DONE,
			       s->transport == TD_TRANSPORT_URING ? -EOPNOTSUPP : 0);
	return true;
}

/* The reply to FUSE_INIT: io_uring when we can, else as libfuse made it. */
static ssize_t init_reply(struct td_fuse_session *s, int fd, struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	ssize_t ret;

	if (!oh->error && s->rings) {
		if (!s->init_offers_uring)
			drop_rings(s, "the kernel did not offer FUSE_OVER_IO_URING in INIT");
		else if (count != 2 ||
			 iov[1].iov_len < offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t) ||
			 iov[1].iov_len > sizeof(struct fuse_init_out))
			drop_rings(s, "the INIT reply has no room for the io_uring flag");
		else if (init_reply_uring(s, fd, iov, &ret))
			return ret;
	}
	keep_init_out(s, iov, count);
	ret = writev(fd, iov, count);
	if (oh->error)
		td_session_init_settle(s, TD_INIT_FAILED, oh->error);
	else if (ret < 0)
		td_session_init_settle(s, TD_INIT_FAILED, -errno);
	else if (s->transport == TD_TRANSPORT_URING)
		td_session_init_settle(s, TD_INIT_FAILED, -EOPNOTSUPP);
	else
		td_session_init_settle(s, TD_INIT_DONE, 0);
	return ret;
}

/*
 * The reply to the FUSE_INIT an adopting session replays to libfuse: the
 * kernel answered the real one long ago, so it goes nowhere; kept, and the
 * INIT settled. Return: the bytes "written".
 */
static ssize_t replayed_init_reply(struct td_fuse_session *s, struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	ssize_t total = 0;

	atomic_store(&s->init_pending, false);
	keep_init_out(s, iov, count);
	for (int i = 0; i < count; i++)
		total += (ssize_t)iov[i].iov_len;
	td_session_init_settle(s, oh->error ? TD_INIT_FAILED : TD_INIT_DONE, oh->error);
	return total;
}

/* Write a reply: to its ring entry, or to /dev/fuse. Return: as writev(2). */
static ssize_t session_send(struct td_fuse_session *s, int fd, struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;

	if (s && count >= 1 && iov[0].iov_len >= sizeof(*oh)) {
		struct td_fuse_uring *u = atomic_load(&s->uring);

		if (u && td_fuse_uring_owns(oh->unique))
			return td_fuse_uring_reply(u, iov, count);
		if (s->adopted && oh->unique == TD_SYNTH_INIT_UNIQUE)
			return replayed_init_reply(s, iov, count);
		if (atomic_load(&s->init_pending) && oh->unique == s->init_unique) {
			atomic_store(&s->init_pending, false);
			return init_reply(s, fd, iov, count);
		}
	}
	return writev(fd, iov, count);
}

/* libfuse's custom I/O hooks (fuse_session_custom_io). */
static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return session_send(session_of_fd(fd), fd, iov, count);
}

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

int td_session_hook_replies(struct td_fuse_session *s)
{
	const struct fuse_custom_io io = { .writev = hook_writev, .read = hook_read };
	unsigned int i;

	for (i = 0; i < MAX_SESSIONS; i++) {
		struct td_fuse_session *none = NULL;

		if (atomic_compare_exchange_strong(&sessions[i], &none, s))
			break;
	}
	if (i == MAX_SESSIONS)
		return -EMFILE;
	if (fuse_session_custom_io(s->se, &io, s->fd)) {
		atomic_store(&sessions[i], NULL);
		return -EIO;
	}
	return 0;
}

void td_session_unhook(struct td_fuse_session *s)
{
	for (unsigned int i = 0; i < MAX_SESSIONS; i++) {
		struct td_fuse_session *me = s;

		atomic_compare_exchange_strong(&sessions[i], &me, NULL);
	}
}

void td_session_init_seen(struct td_fuse_session *s, const struct fuse_in_header *in, size_t len)
{
	const struct fuse_init_in *arg = (const void *)(in + 1);
	uint64_t flags = 0;

	if (len >= sizeof(*in) + offsetof(struct fuse_init_in, flags2) + sizeof(arg->flags2)) {
		flags = arg->flags;
		if (flags & FUSE_INIT_EXT)
			flags |= (uint64_t)arg->flags2 << 32;
	}
	s->init_offers_uring = (flags & TD_FUSE_OVER_IO_URING) != 0;
	s->init_flags = flags;
	s->init_in_len = TD_MIN(len - sizeof(*in), sizeof(s->init_in));
	memcpy(s->init_in, arg, s->init_in_len);
	s->init_unique = in->unique;
	atomic_store(&s->init_pending, true);
}

/* Write a raw reply to the kernel. Return: 0 or a negative errno. */
static int send_raw(struct td_fuse_session *s, uint64_t unique, int error, const void *arg,
		    size_t arg_len)
{
	struct fuse_out_header out = {
		.len = (uint32_t)(sizeof(out) + (error ? 0 : arg_len)),
		.error = -error,
		.unique = unique,
	};
	struct iovec iov[2] = { { &out, sizeof(out) }, { (void *)arg, arg_len } };
	ssize_t n = session_send(s, s->fd, iov, error ? 1 : 2);

	return n < 0 ? -errno : 0;
}

void td_session_open_raw(struct td_fuse_session *s, const struct fuse_in_header *in, size_t len)
{
	const struct fuse_open_in *arg = (const void *)(in + 1);
	struct fuse_open_out out = { 0 };
	int error;

	if (len < sizeof(*in) + sizeof(*arg))
		error = EIO;
	else
		error = s->ops->open(s->userdata, in->nodeid, arg->flags, &out.open_flags);
	if (send_raw(s, in->unique, error, &out, sizeof(out)) && !error && s->ops->open_unsent)
		s->ops->open_unsent(s->userdata, in->nodeid);
}

void td_session_ring_process(void *arg, void *buf, size_t len)
{
	struct td_fuse_session *s = arg;
	const struct fuse_in_header *in = buf;

	if (in->opcode == FUSE_OPEN) {
		td_session_open_raw(s, in, len);
	} else {
		struct fuse_buf fbuf = { .mem = buf, .size = len };

		fuse_session_process_buf(s->se, &fbuf);
	}
}

void td_session_ring_failed(void *arg)
{
	td_fuse_session_stop(arg);
}
