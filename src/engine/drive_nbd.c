// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_nbd.c - the NBD backend: an asynchronous backend on libnbd.
 *
 * The backend holds 1 to 16 connections to one export (more than one only
 * when the server offers multi-conn, so that a flush on one connection covers
 * the writes completed on all). Operations go to the connections in turn.
 * Each connection has its own libnbd handle and one event-loop thread that
 * polls the handle's socket in the direction libnbd asks for and tells libnbd
 * when it can read or write (nbd_aio_notify_read/_write).
 *
 * Submitting: the drive's threads call nbd_aio_pread/pwrite/flush/zero
 * themselves on the connection's handle. When libnbd could not send the whole
 * command at once it now wants to write, which the loop thread, asleep in
 * poll(2) on reads only, would not see: the submitter wakes it through the
 * connection's eventfd.
 *
 * Completing: libnbd calls the completion callback with its handle lock held,
 * where no nbd_* call on that handle is allowed and where io->done, which may
 * submit again, must not run. So the callback only records the result, moves
 * the operation to the connection's ready list and returns 1 (the command is
 * retired at once: nothing calls nbd_aio_command_completed). The loop thread
 * takes the ready list and, holding no lock, either sends the operation's
 * next command or calls io->done.
 *
 * An operation (struct nbd_op, one per td_backend_io) may take several
 * commands, one after the other: a read or write longer than the server's
 * maximum is cut in pieces; a FUA write on a server without FUA is the write
 * and then a flush; discard and write zeroes are NBD_CMD_WRITE_ZEROES pieces
 * of at most NBD_ZERO_MAX bytes. Discard does not use NBD_CMD_TRIM: NBD lets
 * a trimmed range read back as anything, while tagdisk promises zeroes.
 * WRITE_ZEROES without NBD_CMD_FLAG_NO_HOLE is the same promise, and lets the
 * server release the space (nbdkit's file plugin punches a hole); write
 * zeroes sets NO_HOLE, and drops it for good if the server refuses it. On a
 * server without WRITE_ZEROES both write buffers of zeroes.
 *
 * Where an operation is, under its connection's lock:
 *
 *   inflight  a command of it is in libnbd; the completion callback will run
 *   ready     the callback ran; the loop thread has not looked at it yet
 *   lost      waiting for the connection to come back
 *   (none)    a thread is sending its next command or completing it
 *
 * A lost server: when the handle dies (the server closed the socket or was
 * killed), libnbd fails every command it held with ENOTCONN. The loop thread
 * sees the handle dead, closes it and parks every operation that had not
 * finished on the lost list (a command failed with ENOTCONN or ESHUTDOWN, or
 * any failure on a dead handle, is not a result: the command is sent again).
 * It then connects again, at once and then after 100 ms, 200, 400, 800 and
 * every second, checking that the export has the same size and offers what
 * we use, and sends every parked operation again, in order, from the piece
 * that had not completed. Sending a write again is safe: the same data goes
 * to the same place. What the server acknowledged before it went away is
 * trusted to be there still (true of a killed file-backed server: the page
 * cache has it); a server that lost it cannot be told apart, the size check
 * aside. While the connection is down, new operations wait on the lost list
 * too. When it stays down for NBD_LOST_LIMIT_MS (60 s), the parked
 * operations fail with -EIO and new ones fail at once with -EIO until a
 * reconnection succeeds; the thread keeps trying once a second. A server that
 * stops answering without closing the connection (hung, or SIGSTOPped) is
 * taken for lost when a command has had no answer for NBD_ANSWER_LIMIT_MS
 * (60 s): the handle is closed with its commands in it (nbd_close() calls no
 * completion callback; they are moved from inflight to lost) and the above
 * follows, so such a server fails the operations about two minutes after it
 * stopped. Until then the drive's command timeout resets the drive as usual,
 * and the operations it made stale stay outstanding here.
 *
 * Each operation completes exactly once: it is on at most one list, the
 * callback moves it from inflight to ready, a handle is closed only after
 * its commands' callbacks ran (dead handle) or with the operations still on
 * inflight moved to lost (live handle: nbd_close() calls no completion
 * callback), and only the thread that took an operation off a list sends or
 * completes it. The operation is known by the callback's user_data, not by
 * libnbd's cookie: the cookie is returned after the command may already have
 * completed and been freed, so it could not be stored without another lock
 * round trip per command, and nothing needs it.
 *
 * LOCKING, per connection, in this order:
 *   hlock (rwlock)   read: any thread using ->h; write: the loop thread
 *                    replacing or closing it. Held across nbd_aio_* calls.
 *   libnbd's handle lock, inside every nbd_* call and the callbacks.
 *   lock             the three lists, ->failing and ->stop. Never held
 *                    across an nbd_* call (the callback takes it with the
 *                    handle lock held) nor across io->done.
 * The backend's lock (outstanding operations, for destroy) is a leaf.
 */
#include <errno.h>
#include <inttypes.h>
#include <libnbd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/list.h"
#include "common/lock.h"
#include "common/log.h"
#include "tagdisk/backend.h"

#define NBD_MAX_CONNECTIONS 16
/* How long a lost server may stay away before its operations fail with -EIO (README). */
#define NBD_LOST_LIMIT_MS 60000
/* A command unanswered this long: the server is hung, its connection is treated as lost (README). */
#define NBD_ANSWER_LIMIT_MS 60000
/* How often the loop thread looks for such a command (it wakes this often when idle too). */
#define NBD_ANSWER_CHECK_MS 1000
/* Reconnection attempts: one at once, the next this much later, then twice as long each time. */
#define NBD_RETRY_FIRST_MS 100
#define NBD_RETRY_MAX_MS   1000
/* One connection attempt at open, and one reconnection attempt. */
#define NBD_OPEN_TIMEOUT_MS	 30000
#define NBD_RECONNECT_TIMEOUT_MS 5000
/* The longest read or write command (smaller when the server says so). */
#define NBD_RW_MAX (32U << 20)
/* The longest write zeroes command (NBD lengths are 32 bits). */
#define NBD_ZERO_MAX (1U << 30)
/* Zeroes written as data, per command, where the server cannot write zeroes. */
#define NBD_ZERO_BUF (1U << 20)

/* What the export offers, as far as we use it. */
struct nbd_caps {
	uint64_t size;
	bool read_only;
	bool flush;
	bool fua;
	bool zero;
	bool multi_conn;
};

struct nbd_backend;

struct nbd_conn {
	struct nbd_backend *nb;
	unsigned int index;
	pthread_t thread;
	int efd;		  /* wakes the loop thread */
	pthread_rwlock_t hlock;	  /* see LOCKING */
	struct nbd_handle *h;	  /* hlock; NULL while the connection is down */
	atomic_bool up;		  /* a hint for choosing a connection: h != NULL */
	struct td_mutex lock;
	struct td_list inflight;  /* lock: nbd_op, a command of it in libnbd */
	struct td_list ready;	  /* lock: nbd_op, its command's callback ran */
	struct td_list lost;	  /* lock: nbd_op, waiting for the connection */
	bool failing;		  /* lock: down for NBD_LOST_LIMIT_MS: new operations fail */
	bool stop;		  /* lock: destroy: nothing is outstanding, exit */
};

struct nbd_backend {
	char *uri;
	bool read_only;		  /* ours: refuse writes */
	struct nbd_caps caps;	  /* of the first connection; the others must match */
	uint64_t rw_max;	  /* bytes per read or write command */
	atomic_bool no_hole;	  /* write zeroes asks NBD_CMD_FLAG_NO_HOLE */
	void *zero_buf;		  /* NBD_ZERO_BUF zeroes when !caps.zero, else NULL */
	atomic_uint next;	  /* round robin over the connections */
	struct td_mutex lock;
	struct td_cond idle;
	uint64_t outstanding;	  /* lock: accepted operations not yet done */
	unsigned int nr_conns;
	struct nbd_conn conns[];
};

/* One td_backend_io while it is outstanding. */
struct nbd_op {
	struct td_list link;	  /* on a list of conn, or none (see the top) */
	struct td_backend_io *io;
	struct nbd_conn *conn;
	uint64_t len;		  /* io->len, cut at the end of the export */
	uint64_t done;		  /* bytes of the data commands completed */
	uint64_t piece;		  /* bytes of the command in flight; 0 for a flush */
	bool flushing;		  /* in the flush after a FUA write (no FUA on the server) */
	bool used_no_hole;	  /* the command in flight asked NO_HOLE */
	uint64_t sent_ns;	  /* conn->lock: when the command in flight went to libnbd */
	int err;		  /* conn->lock: the command's result, a positive errno */
};

/* The connection whose loop runs on this thread, if any. */
static _Thread_local struct nbd_conn *loop_conn;

static void rwlock_rdlock(pthread_rwlock_t *l)
{
	if (pthread_rwlock_rdlock(l))
		abort();
}

static void rwlock_wrlock(pthread_rwlock_t *l)
{
	if (pthread_rwlock_wrlock(l))
		abort();
}

static void rwlock_unlock(pthread_rwlock_t *l)
{
	if (pthread_rwlock_unlock(l))
		abort();
}

static void conn_wake(struct nbd_conn *c)
{
	uint64_t one = 1;

	/* Fails only when the counter is saturated: the loop will wake anyway. */
	if (write(c->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		td_warn("nbd: connection %u: eventfd", c->index);
}

static bool handle_dead(struct nbd_handle *h)
{
	return !h || nbd_aio_is_dead(h) == 1 || nbd_aio_is_closed(h) == 1;
}

/* ---- completing ------------------------------------------------------------------------- */

/* Call io->done; no lock held. The last use of @op. */
static void op_finish(struct nbd_op *op, int err)
{
	struct nbd_backend *nb = op->conn->nb;
	struct td_backend_io *io = op->io;

	io->bpriv = NULL;
	free(op);
	io->done(io, err);
	td_mutex_lock(&nb->lock);
	if (--nb->outstanding == 0)
		td_cond_broadcast(&nb->idle);
	td_mutex_unlock(&nb->lock);
}

/* libnbd's completion callback: record, hand over to the loop thread, retire. */
static int op_complete(void *user_data, int *error)
{
	struct nbd_op *op = user_data;
	struct nbd_conn *c = op->conn;

	td_mutex_lock(&c->lock);
	op->err = *error;
	td_list_move_tail(&op->link, &c->ready);
	td_mutex_unlock(&c->lock);
	/* Outside the loop thread only when libnbd fails its commands as the connection dies. */
	if (loop_conn != c)
		conn_wake(c);
	return 1;
}

/* ---- sending ---------------------------------------------------------------------------- */

/* Send @op's next command on @h. Return: libnbd's cookie, or -1 (nbd_get_errno() says why). */
static int64_t op_send(struct nbd_backend *nb, struct nbd_handle *h, struct nbd_op *op)
{
	struct td_backend_io *io = op->io;
	nbd_completion_callback cb = { .callback = op_complete, .user_data = op };
	uint64_t off = io->off + op->done;
	uint64_t left = op->len - op->done;
	uint32_t flags = 0;

	op->used_no_hole = false;
	if (op->flushing || io->op == TD_OP_FLUSH) {
		op->piece = 0;
		return nbd_aio_flush(h, cb, 0);
	}
	switch (io->op) {
	case TD_OP_READ:
		op->piece = TD_MIN(left, nb->rw_max);
		return nbd_aio_pread(h, (char *)io->buf + op->done, op->piece, off, cb, 0);
	case TD_OP_WRITE:
		op->piece = TD_MIN(left, nb->rw_max);
		if (io->fua && nb->caps.fua)
			flags = LIBNBD_CMD_FLAG_FUA;
		return nbd_aio_pwrite(h, (char *)io->buf + op->done, op->piece, off, cb, flags);
	case TD_OP_DISCARD:
	case TD_OP_WRITE_ZEROES:
		if (!nb->caps.zero) {
			op->piece = TD_MIN(left, TD_MIN((uint64_t)NBD_ZERO_BUF, nb->rw_max));
			return nbd_aio_pwrite(h, nb->zero_buf, op->piece, off, cb, 0);
		}
		op->piece = TD_MIN(left, (uint64_t)NBD_ZERO_MAX);
		if (io->op == TD_OP_WRITE_ZEROES && atomic_load_explicit(&nb->no_hole,
									memory_order_relaxed)) {
			flags = LIBNBD_CMD_FLAG_NO_HOLE;
			op->used_no_hole = true;
		}
		return nbd_aio_zero(h, op->piece, off, cb, flags);
	case TD_OP_FLUSH:
		break;
	}
	errno = EINVAL;
	return -1;
}

/*
 * Send @op's next command on @c, or park it on the lost list while @c is
 * down. No lock held; @op is on no list.
 * Return: 0 (sent or parked: the loop thread or the callback has it now), or a
 * negative errno with which the caller finishes @op.
 */
static int conn_send(struct nbd_conn *c, struct nbd_op *op)
{
	struct nbd_backend *nb = c->nb;
	bool wake = false;
	int err = 0;

	rwlock_rdlock(&c->hlock);
	td_mutex_lock(&c->lock);
	if (!c->h) {
		if (c->failing)
			err = -EIO;
		else
			td_list_add_tail(&op->link, &c->lost);
		td_mutex_unlock(&c->lock);
		rwlock_unlock(&c->hlock);
		return err;
	}
	op->sent_ns = td_now_ns();
	td_list_add_tail(&op->link, &c->inflight);
	td_mutex_unlock(&c->lock);

	if (op_send(nb, c->h, op) == -1) {
		int nerr = nbd_get_errno();
		bool dead = nerr == ENOTCONN || handle_dead(c->h);

		/* Not queued: libnbd will not call op_complete for it. */
		td_mutex_lock(&c->lock);
		if (dead) {
			td_list_move_tail(&op->link, &c->lost);
			wake = true;
		} else {
			td_list_del(&op->link);
			err = nerr > 0 ? -nerr : -EIO;
		}
		td_mutex_unlock(&c->lock);
		if (err)
			td_debug("nbd: %s", nbd_get_error());
	} else if (loop_conn != c &&
		   (nbd_aio_get_direction(c->h) & LIBNBD_AIO_DIRECTION_WRITE)) {
		/* Part of the command still to send: the loop thread must poll for writing. */
		wake = true;
	}
	rwlock_unlock(&c->hlock);
	if (wake && loop_conn != c)
		conn_wake(c);
	return err;
}

/* ---- the loop thread -------------------------------------------------------------------- */

/* Where a command failed without a result: to be sent again once the connection is back. */
static bool err_is_lost(int err, bool dead)
{
	return dead || err == ENOTCONN || err == ESHUTDOWN;
}

/* Take the ready list: finish operations, send their next command, or park them. */
static void conn_reap(struct nbd_conn *c, bool *broken)
{
	struct nbd_backend *nb = c->nb;
	struct td_list ready;
	bool dead;

	td_list_init(&ready);
	td_mutex_lock(&c->lock);
	td_list_splice_init(&c->ready, &ready);
	td_mutex_unlock(&c->lock);
	if (td_list_empty(&ready))
		return;
	dead = handle_dead(c->h);

	while (!td_list_empty(&ready)) {
		struct nbd_op *op = td_list_first_entry(&ready, struct nbd_op, link);
		int err = 0;

		td_list_del(&op->link);
		if (op->err) {
			if (err_is_lost(op->err, dead)) {
				/* The server went away (ESHUTDOWN: is going): reconnect, send again. */
				*broken = true;
				td_mutex_lock(&c->lock);
				td_list_add_tail(&op->link, &c->lost);
				td_mutex_unlock(&c->lock);
				continue;
			}
			if (op->used_no_hole && (op->err == EINVAL || op->err == ENOTSUP)) {
				if (atomic_exchange(&nb->no_hole, false))
					td_notice("nbd: '%s' refuses write zeroes with NO_HOLE; "
						  "sending it without", nb->uri);
				err = conn_send(c, op);
			} else {
				err = -op->err;
			}
		} else if (op->flushing || op->io->op == TD_OP_FLUSH) {
			op_finish(op, 0);
			continue;
		} else {
			op->done += op->piece;
			if (op->done < op->len) {
				err = conn_send(c, op);
			} else if (op->io->op == TD_OP_WRITE && op->io->fua && !nb->caps.fua &&
				   nb->caps.flush) {
				op->flushing = true;
				err = conn_send(c, op);
			} else {
				op_finish(op, 0);
				continue;
			}
		}
		if (err)
			op_finish(op, err);
	}
}

/* Fail every parked operation with -EIO (the server stayed away too long). */
static void conn_fail_lost(struct nbd_conn *c)
{
	struct td_list lost;

	td_list_init(&lost);
	td_mutex_lock(&c->lock);
	td_list_splice_init(&c->lost, &lost);
	td_mutex_unlock(&c->lock);
	while (!td_list_empty(&lost)) {
		struct nbd_op *op = td_list_first_entry(&lost, struct nbd_op, link);

		td_list_del(&op->link);
		op_finish(op, -EIO);
	}
}

/* Sleep up to @ms or until woken. Return: true when destroy asked the thread to stop. */
static bool conn_sleep(struct nbd_conn *c, unsigned int ms)
{
	struct pollfd p = { .fd = c->efd, .events = POLLIN };
	uint64_t v;
	bool stop;

	if (poll(&p, 1, (int)ms) > 0 && read(c->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		td_warn("nbd: connection %u: eventfd", c->index);
	td_mutex_lock(&c->lock);
	stop = c->stop;
	td_mutex_unlock(&c->lock);
	return stop;
}

/* What the export on @h offers. Return: 0, or -1 with the reason in @msg. */
static int read_caps(struct nbd_handle *h, struct nbd_caps *caps, char *msg, size_t msglen)
{
	int64_t size = nbd_get_size(h);
	int ro = nbd_is_read_only(h);
	int flush = nbd_can_flush(h);
	int fua = nbd_can_fua(h);
	int zero = nbd_can_zero(h);
	int mc = nbd_can_multi_conn(h);

	if (size < 0 || ro < 0 || flush < 0 || fua < 0 || zero < 0 || mc < 0) {
		snprintf(msg, msglen, "%s", nbd_get_error());
		return -1;
	}
	*caps = (struct nbd_caps){ .size = (uint64_t)size, .read_only = ro, .flush = flush,
				   .fua = fua, .zero = zero, .multi_conn = mc };
	return 0;
}

/*
 * A new handle connected to @uri within @timeout_ms (@wake_fd, when not -1,
 * cuts the wait short). Return: the handle, or NULL with the reason in @msg.
 */
static struct nbd_handle *handle_connect(const char *uri, unsigned int timeout_ms, int wake_fd,
					 char *msg, size_t msglen)
{
	uint64_t deadline = td_now_ns() + timeout_ms * TD_NSEC_PER_MSEC;
	struct nbd_handle *h = nbd_create();

	if (!h) {
		snprintf(msg, msglen, "%s", nbd_get_error());
		return NULL;
	}
	/* Our buffers are only read on success: libnbd need not clear them first. */
	if (nbd_set_pread_initialize(h, false) == -1 || nbd_aio_connect_uri(h, uri) == -1)
		goto out_error;
	while (nbd_aio_is_ready(h) != 1) {
		struct pollfd p[2];
		unsigned int dir;
		uint64_t now = td_now_ns();
		int n = 1;
		int r = 0;

		if (handle_dead(h)) {
			snprintf(msg, msglen, "connection closed during the handshake");
			goto out_close;
		}
		if (now >= deadline) {
			snprintf(msg, msglen, "no answer within %u ms", timeout_ms);
			goto out_close;
		}
		dir = nbd_aio_get_direction(h);
		p[0] = (struct pollfd){ .fd = nbd_aio_get_fd(h) };
		if (dir & LIBNBD_AIO_DIRECTION_READ)
			p[0].events |= POLLIN;
		if (dir & LIBNBD_AIO_DIRECTION_WRITE)
			p[0].events |= POLLOUT;
		if (wake_fd != -1)
			p[n++] = (struct pollfd){ .fd = wake_fd, .events = POLLIN };
		if (poll(p, (nfds_t)n, (int)TD_DIV_ROUND_UP(deadline - now, TD_NSEC_PER_MSEC)) < 0) {
			if (errno == EINTR)
				continue;
			snprintf(msg, msglen, "poll: %s", strerror(errno));
			goto out_close;
		}
		if (n == 2 && p[1].revents) {
			snprintf(msg, msglen, "interrupted");
			goto out_close;
		}
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_READ))
			r = nbd_aio_notify_read(h);
		else if (p[0].revents & (POLLOUT | POLLHUP | POLLERR))
			r = nbd_aio_notify_write(h);
		if (r == -1)
			goto out_error;
	}
	return h;

out_error:
	snprintf(msg, msglen, "%s", nbd_get_error());
out_close:
	nbd_close(h);
	return NULL;
}

/*
 * Connect again after a loss: a handle to an export like the first one.
 * Return: the handle, or NULL with the reason in @msg.
 */
static struct nbd_handle *conn_reconnect_once(struct nbd_conn *c, char *msg, size_t msglen)
{
	struct nbd_backend *nb = c->nb;
	struct nbd_handle *h;
	struct nbd_caps caps;

	h = handle_connect(nb->uri, NBD_RECONNECT_TIMEOUT_MS, c->efd, msg, msglen);
	if (!h)
		return NULL;
	if (read_caps(h, &caps, msg, msglen))
		goto out_close;
	if (caps.size != nb->caps.size) {
		snprintf(msg, msglen, "the export is now %" PRIu64 " bytes, not %" PRIu64,
			 caps.size, nb->caps.size);
		goto out_close;
	}
	if ((caps.read_only && !nb->read_only) || (nb->caps.flush && !caps.flush) ||
	    (nb->caps.fua && !caps.fua) || (nb->caps.zero && !caps.zero) ||
	    (nb->nr_conns > 1 && !caps.multi_conn)) {
		snprintf(msg, msglen, "the export no longer offers what it did (%s%s%s%s%s)",
			 caps.read_only ? "read-only; " : "", caps.flush ? "" : "no flush; ",
			 caps.fua ? "" : "no FUA; ", caps.zero ? "" : "no write zeroes; ",
			 caps.multi_conn ? "" : "no multi-conn");
		goto out_close;
	}
	return h;

out_close:
	nbd_close(h);
	return NULL;
}

/*
 * The connection is lost: close the handle, park what was outstanding on it,
 * connect again and send it all again. Returns once connected, or when
 * destroy asks the thread to stop.
 */
static void conn_recover(struct nbd_conn *c)
{
	struct nbd_backend *nb = c->nb;
	uint64_t since = td_now_ns();
	unsigned int delay_ms = NBD_RETRY_FIRST_MS;
	unsigned int attempts = 0;
	struct nbd_handle *old;
	struct nbd_handle *h;
	struct td_list lost;
	char msg[256];
	char last[256] = "";
	bool broken = false;
	unsigned int n = 0;

	rwlock_wrlock(&c->hlock);
	old = c->h;
	c->h = NULL;
	atomic_store_explicit(&c->up, false, memory_order_relaxed);
	rwlock_unlock(&c->hlock);
	if (old)
		nbd_close(old);
	/* A live handle (ESHUTDOWN) was closed with commands in it: no callback will come. */
	td_mutex_lock(&c->lock);
	td_list_splice_init(&c->inflight, &c->lost);
	td_mutex_unlock(&c->lock);
	conn_reap(c, &broken);
	if (old)
		td_warnx("nbd: connection %u to '%s' lost; reconnecting", c->index, nb->uri);

	for (;;) {
		if (conn_sleep(c, attempts ? delay_ms : 0))
			return;
		attempts++;
		h = conn_reconnect_once(c, msg, sizeof(msg));
		if (h)
			break;
		if (strcmp(msg, last)) {
			td_debug("nbd: connection %u to '%s': %s", c->index, nb->uri, msg);
			snprintf(last, sizeof(last), "%s", msg);
		}
		if (td_now_ns() - since >= NBD_LOST_LIMIT_MS * TD_NSEC_PER_MSEC) {
			td_mutex_lock(&c->lock);
			if (!c->failing)
				td_err("nbd: '%s' unreachable for %u s (%s): its operations fail "
				       "until it is back", nb->uri, NBD_LOST_LIMIT_MS / 1000, msg);
			c->failing = true;
			td_mutex_unlock(&c->lock);
			conn_fail_lost(c);
		}
		if (attempts > 1)
			delay_ms = TD_MIN(delay_ms * 2, (unsigned int)NBD_RETRY_MAX_MS);
	}

	td_list_init(&lost);
	rwlock_wrlock(&c->hlock);
	c->h = h;
	atomic_store_explicit(&c->up, true, memory_order_relaxed);
	td_mutex_lock(&c->lock);
	c->failing = false;
	td_list_splice_init(&c->lost, &lost);
	td_mutex_unlock(&c->lock);
	rwlock_unlock(&c->hlock);

	while (!td_list_empty(&lost)) {
		struct nbd_op *op = td_list_first_entry(&lost, struct nbd_op, link);
		int err;

		td_list_del(&op->link);
		n++;
		err = conn_send(c, op);
		if (err)
			op_finish(op, err);
	}
	td_notice("nbd: connection %u to '%s' back after %" PRIu64 " ms; %u operation(s) sent "
		  "again", c->index, nb->uri, (uint64_t)((td_now_ns() - since) / TD_NSEC_PER_MSEC), n);
}

static void *conn_loop(void *arg)
{
	struct nbd_conn *c = arg;
	char name[16];

	loop_conn = c;
	snprintf(name, sizeof(name), "td-nbd%u", c->index);
	td_thread_name(name);
	for (;;) {
		struct pollfd p[2];
		unsigned int dir;
		bool broken = false;
		bool busy;
		bool stop;
		uint64_t age_ns = 0;
		int r = 0;

		td_mutex_lock(&c->lock);
		stop = c->stop;
		td_mutex_unlock(&c->lock);
		if (stop)
			break;
		conn_reap(c, &broken);
		if (broken || handle_dead(c->h)) {
			conn_recover(c);
			continue;
		}
		td_mutex_lock(&c->lock);
		stop = c->stop;
		busy = !td_list_empty(&c->inflight);
		/* The oldest command in flight is the first: commands are appended as sent. */
		if (busy)
			age_ns = td_now_ns() -
				 td_list_first_entry(&c->inflight, struct nbd_op, link)->sent_ns;
		td_mutex_unlock(&c->lock);
		if (stop)
			break;
		if (busy && age_ns >= NBD_ANSWER_LIMIT_MS * TD_NSEC_PER_MSEC) {
			td_warnx("nbd: connection %u to '%s': no answer for %u s", c->index,
				 c->nb->uri, NBD_ANSWER_LIMIT_MS / 1000);
			conn_recover(c);
			continue;
		}

		dir = nbd_aio_get_direction(c->h);
		p[0] = (struct pollfd){ .fd = nbd_aio_get_fd(c->h) };
		if (dir & LIBNBD_AIO_DIRECTION_READ)
			p[0].events |= POLLIN;
		if (dir & LIBNBD_AIO_DIRECTION_WRITE)
			p[0].events |= POLLOUT;
		p[1] = (struct pollfd){ .fd = c->efd, .events = POLLIN };
		/* Never asleep for good: a command may be in flight since before this poll. */
		if (poll(p, 2, NBD_ANSWER_CHECK_MS) < 0) {
			if (errno != EINTR)
				td_warn("nbd: connection %u: poll", c->index);
			continue;
		}
		if (p[1].revents & POLLIN) {
			uint64_t v;

			if (read(c->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				td_warn("nbd: connection %u: eventfd", c->index);
		}
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_READ))
			r = nbd_aio_notify_read(c->h);
		else if ((p[0].revents & (POLLOUT | POLLHUP | POLLERR)) &&
			 (dir & LIBNBD_AIO_DIRECTION_WRITE))
			r = nbd_aio_notify_write(c->h);
		if (r == -1)
			td_debug("nbd: connection %u: %s", c->index, nbd_get_error());
	}
	loop_conn = NULL;
	return NULL;
}

/* ---- the ops table ---------------------------------------------------------------------- */

/* Return: the connection for the next operation: the next in turn that is up, if any. */
static struct nbd_conn *pick_conn(struct nbd_backend *nb)
{
	unsigned int first = atomic_fetch_add_explicit(&nb->next, 1, memory_order_relaxed);

	for (unsigned int i = 0; i < nb->nr_conns; i++) {
		struct nbd_conn *c = &nb->conns[(first + i) % nb->nr_conns];

		if (atomic_load_explicit(&c->up, memory_order_relaxed))
			return c;
	}
	return &nb->conns[first % nb->nr_conns];
}

static int nbd_submit(void *priv, struct td_backend_io *io)
{
	struct nbd_backend *nb = priv;
	uint64_t size = nb->caps.size;
	uint64_t len = io->len;
	struct nbd_op *op;
	int err;

	switch (io->op) {
	case TD_OP_READ:
		if (io->off >= size) {
			memset(io->buf, 0, io->len);
			len = 0;
		} else if (len > size - io->off) {
			/* Past the end of the export: reads as zeroes. */
			len = size - io->off;
			memset((char *)io->buf + len, 0, io->len - len);
		}
		break;
	case TD_OP_WRITE:
	case TD_OP_DISCARD:
	case TD_OP_WRITE_ZEROES:
		if (nb->read_only)
			return -EROFS;
		if (io->off > size || len > size - io->off)
			return -ENOSPC;
		break;
	case TD_OP_FLUSH:
		len = 0;
		break;
	default:
		return -EINVAL;
	}
	if (!len && (io->op != TD_OP_FLUSH || nb->read_only || !nb->caps.flush)) {
		/* Nothing to send (a flush: nothing to write back, or no cache to flush). */
		io->done(io, 0);
		return 0;
	}

	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	td_list_init(&op->link);
	op->io = io;
	op->len = len;
	op->conn = pick_conn(nb);
	io->bpriv = op;
	td_mutex_lock(&nb->lock);
	nb->outstanding++;
	td_mutex_unlock(&nb->lock);

	err = conn_send(op->conn, op);
	if (err) {
		/* Accepted all the same: done reports the error. */
		op_finish(op, err);
	}
	return 0;
}

static void nbd_destroy_conns(struct nbd_backend *nb, unsigned int started)
{
	for (unsigned int i = 0; i < nb->nr_conns; i++) {
		struct nbd_conn *c = &nb->conns[i];

		if (i < started) {
			td_mutex_lock(&c->lock);
			c->stop = true;
			td_mutex_unlock(&c->lock);
			conn_wake(c);
			pthread_join(c->thread, NULL);
		}
		if (c->h) {
			if (!handle_dead(c->h) && nbd_shutdown(c->h, 0) == -1)
				td_debug("nbd: connection %u: %s", i, nbd_get_error());
			nbd_close(c->h);
		}
		if (c->efd >= 0)
			close(c->efd);
		pthread_rwlock_destroy(&c->hlock);
		td_mutex_destroy(&c->lock);
	}
}

static void nbd_destroy(void *priv)
{
	struct nbd_backend *nb = priv;

	td_mutex_lock(&nb->lock);
	while (nb->outstanding)
		td_cond_wait(&nb->idle, &nb->lock);
	td_mutex_unlock(&nb->lock);
	nbd_destroy_conns(nb, nb->nr_conns);
	td_cond_destroy(&nb->idle);
	td_mutex_destroy(&nb->lock);
	free(nb->zero_buf);
	free(nb->uri);
	free(nb);
}

static const struct td_backend_ops nbd_ops = {
	.name = "nbd",
	.submit = nbd_submit,
	.destroy = nbd_destroy,
};

/* ---- opening ---------------------------------------------------------------------------- */

static bool uri_supported(const char *uri)
{
	return !strncmp(uri, "nbd://", 6) || !strncmp(uri, "nbd+unix://", 11);
}

/* The first connection: what the export offers, checked against what we need. */
static int open_first(struct nbd_backend *nb, bool want_multi, char *msg, size_t msglen)
{
	struct nbd_conn *c = &nb->conns[0];
	char why[256];
	int64_t max;

	c->h = handle_connect(nb->uri, NBD_OPEN_TIMEOUT_MS, -1, why, sizeof(why));
	if (!c->h) {
		snprintf(msg, msglen, "nbd: cannot connect to '%s': %s", nb->uri, why);
		return -ECONNREFUSED;
	}
	if (read_caps(c->h, &nb->caps, why, sizeof(why))) {
		snprintf(msg, msglen, "nbd: '%s': %s", nb->uri, why);
		return -EIO;
	}
	if (nb->caps.read_only && !nb->read_only) {
		snprintf(msg, msglen, "nbd: '%s' is a read-only export: serve it read-only "
			 "(read_only = true or --read-only)", nb->uri);
		return -EROFS;
	}
	if (want_multi && !nb->caps.multi_conn) {
		snprintf(msg, msglen, "nbd: '%s' does not allow multi-conn: connections must be 1 "
			 "(with %u, a flush on one would not cover writes on the others)", nb->uri,
			 nb->nr_conns);
		return -EINVAL;
	}
	if (nb->caps.size == 0) {
		snprintf(msg, msglen, "nbd: '%s' is an empty export (0 bytes)", nb->uri);
		return -EINVAL;
	}
	max = nbd_get_block_size(c->h, LIBNBD_SIZE_MAXIMUM);
	nb->rw_max = max > 0 ? TD_MIN((uint64_t)max, (uint64_t)NBD_RW_MAX) : NBD_RW_MAX;
	if (!nb->caps.zero) {
		nb->zero_buf = calloc(1, NBD_ZERO_BUF);
		if (!nb->zero_buf) {
			snprintf(msg, msglen, "nbd: out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

int td_backend_nbd_open(struct td_backend *be, const struct td_nbd_params *p, bool read_only,
			uint64_t *size, char *msg, size_t msglen)
{
	unsigned int n = p->connections;
	unsigned int started = 0;
	struct nbd_backend *nb;
	int err;

	if (!p->uri || !*p->uri) {
		snprintf(msg, msglen, "nbd: no uri (nbd://HOST[:PORT]/EXPORT or "
			 "nbd+unix:///EXPORT?socket=PATH)");
		return -EINVAL;
	}
	if (!uri_supported(p->uri)) {
		snprintf(msg, msglen, "nbd: uri '%s' is not nbd:// or nbd+unix://", p->uri);
		return -EINVAL;
	}
	if (n < 1 || n > NBD_MAX_CONNECTIONS) {
		snprintf(msg, msglen, "nbd: connections %u is out of range (1..%u)", n,
			 NBD_MAX_CONNECTIONS);
		return -EINVAL;
	}
	nb = calloc(1, sizeof(*nb) + n * sizeof(nb->conns[0]));
	if (!nb || !(nb->uri = strdup(p->uri))) {
		free(nb);
		snprintf(msg, msglen, "nbd: out of memory");
		return -ENOMEM;
	}
	nb->read_only = read_only;
	nb->nr_conns = n;
	atomic_init(&nb->no_hole, true);
	atomic_init(&nb->next, 0);
	td_mutex_init(&nb->lock);
	td_cond_init(&nb->idle);
	for (unsigned int i = 0; i < n; i++) {
		struct nbd_conn *c = &nb->conns[i];
		pthread_rwlockattr_t attr;

		c->nb = nb;
		c->index = i;
		c->efd = -1;
		/* Writers first: the loop thread replacing a handle must not wait on a stream of submitters. */
		pthread_rwlockattr_init(&attr);
		pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		if (pthread_rwlock_init(&c->hlock, &attr))
			abort();
		pthread_rwlockattr_destroy(&attr);
		td_mutex_init(&c->lock);
		td_list_init(&c->inflight);
		td_list_init(&c->ready);
		td_list_init(&c->lost);
	}
	for (unsigned int i = 0; i < n; i++) {
		nb->conns[i].efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (nb->conns[i].efd < 0) {
			err = -errno;
			snprintf(msg, msglen, "nbd: eventfd: %s", strerror(errno));
			goto out_destroy;
		}
	}

	err = open_first(nb, n > 1, msg, msglen);
	if (err)
		goto out_destroy;
	for (unsigned int i = 1; i < n; i++) {
		struct nbd_conn *c = &nb->conns[i];
		struct nbd_caps caps;
		char why[256];

		c->h = handle_connect(nb->uri, NBD_OPEN_TIMEOUT_MS, -1, why, sizeof(why));
		if (!c->h || read_caps(c->h, &caps, why, sizeof(why))) {
			snprintf(msg, msglen, "nbd: connection %u to '%s': %s", i, nb->uri, why);
			err = -ECONNREFUSED;
			goto out_destroy;
		}
		if (caps.size != nb->caps.size || caps.fua != nb->caps.fua ||
		    caps.flush != nb->caps.flush || caps.zero != nb->caps.zero) {
			snprintf(msg, msglen, "nbd: connection %u to '%s' sees another export than "
				 "connection 0", i, nb->uri);
			err = -EIO;
			goto out_destroy;
		}
	}
	for (started = 0; started < n; started++) {
		struct nbd_conn *c = &nb->conns[started];

		atomic_store(&c->up, true);
		err = -pthread_create(&c->thread, NULL, conn_loop, c);
		if (err) {
			snprintf(msg, msglen, "nbd: cannot start a thread: %s", strerror(-err));
			goto out_destroy;
		}
	}
	td_info("nbd: '%s': %" PRIu64 " bytes, %u connection(s)%s%s%s%s", nb->uri, nb->caps.size,
		n, nb->caps.flush ? ", flush" : "", nb->caps.fua ? ", FUA" : "",
		nb->caps.zero ? ", write zeroes" : "", nb->caps.multi_conn ? ", multi-conn" : "");
	be->ops = &nbd_ops;
	be->priv = nb;
	*size = nb->caps.size;
	return 0;

out_destroy:
	nbd_destroy_conns(nb, started);
	td_cond_destroy(&nb->idle);
	td_mutex_destroy(&nb->lock);
	free(nb->zero_buf);
	free(nb->uri);
	free(nb);
	return err;
}
