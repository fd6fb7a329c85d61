// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_nbd_op.c - the NBD backend's operations: their commands, their
 * completion, and where they wait.
 *
 * An operation (struct td_nbd_op, one per td_backend_io) may take several
 * commands, one after the other: a read or write longer than the server's
 * maximum is cut in pieces; a FUA write on a server without FUA is the write
 * and then a flush; discard and write zeroes are NBD_CMD_WRITE_ZEROES pieces
 * of at most TD_NBD_ZERO_MAX bytes. Discard does not use NBD_CMD_TRIM: NBD
 * lets a trimmed range read back as anything, while tagdisk promises zeroes.
 * WRITE_ZEROES without NBD_CMD_FLAG_NO_HOLE is the same promise, and lets the
 * server release the space (nbdkit's file plugin punches a hole); write
 * zeroes sets NO_HOLE, and drops it for good if the server refuses it. On a
 * server without WRITE_ZEROES both write buffers of zeroes.
 *
 * Submitting: the drive's threads send an operation's first command
 * themselves, on the connection's handle. When libnbd could not send the
 * whole command at once it now wants to write, which the loop thread, asleep
 * in poll(2) on reads only, would not see: the submitter wakes it.
 *
 * Completing: libnbd calls the completion callback with its handle lock held,
 * where no nbd_* call on that handle is allowed and where io->done, which may
 * submit again, must not run. So the callback only records the result, moves
 * the operation to the connection's ready list and returns 1 (the command is
 * retired at once: nothing calls nbd_aio_command_completed). The loop thread
 * takes the ready list and, holding no lock, sends the operation's next
 * command, parks it, or calls io->done.
 *
 * Where an operation is, under its connection's lock:
 *
 *   inflight  a command of it is in the handle taking commands (conn->h)
 *   draining  a command of it is in the handle being drained (conn->drain)
 *   ready     the callback ran; the loop thread has not looked at it yet
 *   lost      waiting for the connection to take commands again
 *   (none)    a thread is sending its next command or completing it
 *
 * A command that failed without a result (ENOTCONN: libnbd gave up on it as
 * its connection died; ESHUTDOWN: the server is going away; any failure on a
 * handle that is dead or gone) is not a result: the operation goes to the
 * lost list and the command is sent again once the connection is back. By
 * then the server can no longer be executing the first send (see "The fate
 * of a command" in drive_nbd_conn.c: a handle is only ever given up once the
 * server has answered or closed it).
 *
 * Each operation completes exactly once: it is on at most one list, the
 * callback moves it from inflight or draining to ready, a handle is closed
 * only after the callbacks of all its commands ran, and only the thread that
 * took an operation off a list sends or completes it. The operation is known
 * by the callback's user_data, not by libnbd's cookie: the cookie is returned
 * after the command may already have completed and been freed, so it could
 * not be stored without another lock round trip per command, and nothing
 * needs it.
 */
#include <errno.h>
#include <stdlib.h>
#include "common/clock.h"
#include "common/log.h"
#include "drive_nbd_int.h"

static void rwlock_rdlock(pthread_rwlock_t *l)
{
	if (pthread_rwlock_rdlock(l))
		abort();
}

static void rwlock_unlock(pthread_rwlock_t *l)
{
	if (pthread_rwlock_unlock(l))
		abort();
}

/* ---- completing ------------------------------------------------------------------------- */

void td_nbd_op_finish(struct td_nbd_op *op, int err)
{
	struct td_nbd_backend *nb = op->conn->nb;
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
	struct td_nbd_op *op = user_data;
	struct td_nbd_conn *c = op->conn;

	td_mutex_lock(&c->lock);
	op->err = *error;
	td_list_move_tail(&op->link, &c->ready);
	td_mutex_unlock(&c->lock);
	/* Outside the loop thread only when libnbd fails its commands as the connection dies. */
	if (!td_nbd_on_loop_thread(c))
		td_nbd_conn_wake(c);
	return 1;
}

/* ---- sending ---------------------------------------------------------------------------- */

/* Send @op's next command on @h. Return: libnbd's cookie, or -1 (nbd_get_errno() says why). */
static int64_t op_send(struct td_nbd_backend *nb, struct nbd_handle *h, struct td_nbd_op *op)
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
			op->piece = TD_MIN(left, TD_MIN((uint64_t)TD_NBD_ZERO_BUF, nb->rw_max));
			return nbd_aio_pwrite(h, nb->zero_buf, op->piece, off, cb, 0);
		}
		op->piece = TD_MIN(left, (uint64_t)TD_NBD_ZERO_MAX);
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

int td_nbd_conn_send(struct td_nbd_conn *c, struct td_nbd_op *op)
{
	struct td_nbd_backend *nb = c->nb;
	bool on_loop = td_nbd_on_loop_thread(c);
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
	op->gen = c->gen;
	op->sent_ns = td_now_ns();
	td_list_add_tail(&op->link, &c->inflight);
	td_mutex_unlock(&c->lock);

	if (op_send(nb, c->h, op) == -1) {
		int nerr = nbd_get_errno();
		bool dead = nerr == ENOTCONN || td_nbd_handle_dead(c->h);

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
	} else if (!on_loop && (nbd_aio_get_direction(c->h) & LIBNBD_AIO_DIRECTION_WRITE)) {
		/* Part of the command still to send: the loop thread must poll for writing. */
		wake = true;
	}
	rwlock_unlock(&c->hlock);
	if (wake && !on_loop)
		td_nbd_conn_wake(c);
	return err;
}

/* ---- the loop thread's side ------------------------------------------------------------- */

/* Return: the handle @op's command went to, if it is still open, else NULL. Loop thread. */
static struct nbd_handle *op_handle(const struct td_nbd_conn *c, const struct td_nbd_op *op)
{
	if (c->h && op->gen == c->gen)
		return c->h;
	if (c->drain && op->gen == c->drain_gen)
		return c->drain;
	return NULL;
}

/* Park @op on the lost list: its command is to be sent again once the connection is back. */
static void op_park(struct td_nbd_conn *c, struct td_nbd_op *op)
{
	td_mutex_lock(&c->lock);
	td_list_add_tail(&op->link, &c->lost);
	td_mutex_unlock(&c->lock);
}

/*
 * @op's command ended with a result of the server's (op->err 0 or an error it answered).
 * Return: 0 when @op is taken care of (finished, or its next command sent or parked), or
 * the negative errno to finish it with.
 */
static int op_answered(struct td_nbd_conn *c, struct td_nbd_op *op)
{
	struct td_nbd_backend *nb = c->nb;
	struct td_backend_io *io = op->io;

	if (op->err) {
		if (op->used_no_hole && (op->err == EINVAL || op->err == ENOTSUP)) {
			if (atomic_exchange(&nb->no_hole, false))
				td_notice("nbd: '%s' refuses write zeroes with NO_HOLE; sending it "
					  "without", nb->uri);
			return td_nbd_conn_send(c, op);
		}
		return -op->err;
	}
	if (op->flushing || io->op == TD_OP_FLUSH) {
		td_nbd_op_finish(op, 0);
		return 0;
	}
	op->done += op->piece;
	if (op->done < op->len)
		return td_nbd_conn_send(c, op);
	if (io->op == TD_OP_WRITE && io->fua && !nb->caps.fua && nb->caps.flush) {
		op->flushing = true;
		return td_nbd_conn_send(c, op);
	}
	td_nbd_op_finish(op, 0);
	return 0;
}

void td_nbd_conn_reap(struct td_nbd_conn *c, bool *broken)
{
	struct td_list ready;

	td_list_init(&ready);
	td_mutex_lock(&c->lock);
	td_list_splice_init(&c->ready, &ready);
	td_mutex_unlock(&c->lock);

	while (!td_list_empty(&ready)) {
		struct td_nbd_op *op = td_list_first_entry(&ready, struct td_nbd_op, link);
		struct nbd_handle *h = op_handle(c, op);
		int err;

		td_list_del(&op->link);
		if (op->err == ENOTCONN || op->err == ESHUTDOWN ||
		    (op->err && td_nbd_handle_dead(h))) {
			/* No result: the server went away (ESHUTDOWN: is going). Send it again. */
			if (h && h == c->h && !td_nbd_handle_dead(h))
				*broken = true;
			op_park(c, op);
			continue;
		}
		err = op_answered(c, op);
		if (err)
			td_nbd_op_finish(op, err);
	}
}

void td_nbd_conn_fail_lost(struct td_nbd_conn *c)
{
	struct td_list lost;

	td_list_init(&lost);
	td_mutex_lock(&c->lock);
	td_list_splice_init(&c->lost, &lost);
	td_mutex_unlock(&c->lock);
	while (!td_list_empty(&lost)) {
		struct td_nbd_op *op = td_list_first_entry(&lost, struct td_nbd_op, link);

		td_list_del(&op->link);
		td_nbd_op_finish(op, -EIO);
	}
}
