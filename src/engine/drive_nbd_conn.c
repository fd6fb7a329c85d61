// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_nbd_conn.c - an NBD connection's state machine and its loop thread.
 *
 * Each connection has its own libnbd handle and one loop thread that polls
 * the handle's socket in the direction libnbd asks for and tells libnbd when
 * it can read or write (nbd_aio_notify_read/_write); the thread also takes
 * the finished commands (td_nbd_conn_reap()), gives up on a silent handle,
 * and connects again. A connection is in one of three states:
 *
 *   up        ->h takes commands.
 *   draining  ->h is NULL; ->drain is the handle given up on, told
 *             NBD_CMD_DISC. The commands still in it wait for their answers
 *             or for the server to close it; new operations wait on the
 *             lost list.
 *   down      ->h and ->drain are NULL: connecting again, at once, then
 *             after 100 ms, 200, 400, 800 and every second, each time to an
 *             export that must have the same size and offer what we use.
 *             Operations wait on the lost list.
 *
 *   up -> draining    a command has had no answer for answer_limit_ms (a
 *                     hung or stopped server), or the server answered
 *                     ESHUTDOWN (NBD asks the client for a soft disconnect)
 *   up -> down        the handle died: the server closed the connection, or
 *                     its process died (libnbd fails what it had: ENOTCONN)
 *   draining -> down  every command of ours in the drained handle has its
 *                     answer, or the server closed it
 *   down -> up        a reconnection; what waited on the lost list is sent
 *                     again, in order, from the piece that had not completed
 *
 * The fate of a command. A command handed to libnbd may be executing in the
 * server until the server answers it. Sending a write again, or completing
 * its operation, while the first send may still execute would let it land
 * after a newer write to the same sectors (the drive lifts its fence and
 * the filesystem moves on as soon as the operation completes). So a handle
 * with commands of ours in it is never closed by us: a silent one is
 * drained instead. NBD_CMD_DISC obliges the server to handle every request
 * outstanding before it closes the connection, so once the server has
 * closed it, nothing sent on it can still land, and what had no answer is
 * sent again; until then the operations stay outstanding, however long that
 * is. No other guarantee exists: a flush on a new connection does not order
 * against another connection's writes in flight, and there is no way to
 * cancel a command. Reads and flushes wait in the drained handle too:
 * libnbd holds their buffers until it calls back (sending them again is
 * harmless anyway: a read changes nothing, and a flush only promises the
 * writes completed before it). A handle the server closed without being
 * asked (killed, or shutting down: NBD asks a server to finish its requests
 * in flight first) is trusted the same way. A connection broken between two
 * live hosts (a network reset), or dropped by libnbd on a protocol error,
 * cannot be told from that, and is trusted too.
 *
 * What the server acknowledged before it went away is trusted to be there
 * still (true of a killed file-backed server: the page cache has it); a
 * server that lost it cannot be told apart, the size check aside.
 *
 * The lost limit. A connection that has not taken commands for
 * lost_limit_ms (draining or down) fails what waits on its lost list with
 * -EIO, and new operations fail at once with -EIO, until it is up again;
 * the thread keeps trying once a second. Nothing on the lost list can still
 * execute in the server (never sent, or sent on a handle the server has
 * closed), so failing it cannot reorder writes. Commands in the handle being
 * drained are not failed: they wait for the server. Until then the drive's command
 * timeout resets the drive as usual, and the operations it made stale keep
 * the drive fenced here.
 *
 * The connection's fields and their locks are in drive_nbd_int.h.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/log.h"
#include "drive_nbd_int.h"

/* The connection whose loop runs on this thread, if any. */
static _Thread_local const struct td_nbd_conn *loop_conn;

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

bool td_nbd_on_loop_thread(const struct td_nbd_conn *c)
{
	return loop_conn == c;
}

void td_nbd_conn_wake(struct td_nbd_conn *c)
{
	uint64_t one = 1;

	/* Fails only when the counter is saturated: the loop will wake anyway. */
	if (write(c->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		td_warn("nbd: connection %u: eventfd", c->index);
}

static void conn_clear_efd(struct td_nbd_conn *c)
{
	uint64_t v;

	if (read(c->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		td_warn("nbd: connection %u: eventfd", c->index);
}

static bool conn_stopping(struct td_nbd_conn *c)
{
	bool stop;

	td_mutex_lock(&c->lock);
	stop = c->stop;
	td_mutex_unlock(&c->lock);
	return stop;
}

/* Sleep up to @ms or until woken. Return: true when destroy asked the thread to stop. */
static bool conn_sleep(struct td_nbd_conn *c, unsigned int ms)
{
	struct pollfd p = { .fd = c->efd, .events = POLLIN };

	if (poll(&p, 1, (int)ms) > 0)
		conn_clear_efd(c);
	return conn_stopping(c);
}

/* Write @ms as "60 s" or "2500 ms" into @buf. Return: @buf. */
static const char *limit_text(unsigned int ms, char *buf, size_t len)
{
	if (ms % 1000 == 0)
		snprintf(buf, len, "%u s", ms / 1000);
	else
		snprintf(buf, len, "%u ms", ms);
	return buf;
}

/* Poll @h (its socket, in the direction libnbd asks for) and @c's eventfd; tell libnbd. */
static void conn_poll(struct td_nbd_conn *c, struct nbd_handle *h, unsigned int timeout_ms)
{
	unsigned int dir = nbd_aio_get_direction(h);
	struct pollfd p[2];
	int r = 0;

	p[0] = (struct pollfd){ .fd = nbd_aio_get_fd(h) };
	if (dir & LIBNBD_AIO_DIRECTION_READ)
		p[0].events |= POLLIN;
	if (dir & LIBNBD_AIO_DIRECTION_WRITE)
		p[0].events |= POLLOUT;
	p[1] = (struct pollfd){ .fd = c->efd, .events = POLLIN };
	if (poll(p, 2, (int)timeout_ms) < 0) {
		if (errno != EINTR)
			td_warn("nbd: connection %u: poll", c->index);
		return;
	}
	if (p[1].revents & POLLIN)
		conn_clear_efd(c);
	if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && (dir & LIBNBD_AIO_DIRECTION_READ))
		r = nbd_aio_notify_read(h);
	else if ((p[0].revents & (POLLOUT | POLLHUP | POLLERR)) &&
		 (dir & LIBNBD_AIO_DIRECTION_WRITE))
		r = nbd_aio_notify_write(h);
	if (r == -1)
		td_debug("nbd: connection %u: %s", c->index, nbd_get_error());
}

/* ---- connecting ------------------------------------------------------------------------- */

int td_nbd_read_caps(struct nbd_handle *h, struct td_nbd_caps *caps, char *msg, size_t msglen)
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
	*caps = (struct td_nbd_caps){ .size = (uint64_t)size, .read_only = ro, .flush = flush,
				      .fua = fua, .zero = zero, .multi_conn = mc };
	return 0;
}

struct nbd_handle *td_nbd_handle_connect(const char *uri, unsigned int timeout_ms, int wake_fd,
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
		int wait_ms;
		int n = 1;
		int r = 0;

		if (td_nbd_handle_dead(h)) {
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
		wait_ms = (int)TD_DIV_ROUND_UP(deadline - now, TD_NSEC_PER_MSEC);
		if (poll(p, (nfds_t)n, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			snprintf(msg, msglen, "poll: %s", strerror(errno));
			goto out_close;
		}
		if (n == 2 && p[1].revents) {
			snprintf(msg, msglen, "interrupted");
			goto out_close;
		}
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    (dir & LIBNBD_AIO_DIRECTION_READ))
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
static struct nbd_handle *conn_reconnect_once(struct td_nbd_conn *c, char *msg, size_t msglen)
{
	struct td_nbd_backend *nb = c->nb;
	struct nbd_handle *h;
	struct td_nbd_caps caps;

	h = td_nbd_handle_connect(nb->uri, TD_NBD_RECONNECT_TIMEOUT_MS, c->efd, msg, msglen);
	if (!h)
		return NULL;
	if (td_nbd_read_caps(h, &caps, msg, msglen))
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
 * Past the lost limit (the connection has not taken commands since ->down_ns): fail what
 * waits on the lost list, and from now on what comes, with -EIO. @why says what is wrong.
 */
static void conn_check_lost_limit(struct td_nbd_conn *c, const char *why)
{
	struct td_nbd_backend *nb = c->nb;
	char limit[32];
	bool first;

	if (td_now_ns() - c->down_ns < nb->lost_limit_ms * TD_NSEC_PER_MSEC)
		return;
	td_mutex_lock(&c->lock);
	first = !c->failing;
	c->failing = true;
	td_mutex_unlock(&c->lock);
	if (first)
		td_err("nbd: '%s' unreachable for %s (%s): its operations fail until it is back",
		       nb->uri, limit_text(nb->lost_limit_ms, limit, sizeof(limit)), why);
	td_nbd_conn_fail_lost(c);
}

/* ---- draining --------------------------------------------------------------------------- */

/*
 * Up -> draining: take ->h away from the submitters, ask the server to disconnect once it
 * has handled what it has (NBD_CMD_DISC), and leave the commands in it where they are.
 */
static void conn_drain_start(struct td_nbd_conn *c, const char *why)
{
	struct nbd_handle *h;
	unsigned int n = 0;
	struct td_list *pos;

	rwlock_wrlock(&c->hlock);
	h = c->h;
	c->h = NULL;
	atomic_store_explicit(&c->up, false, memory_order_relaxed);
	td_mutex_lock(&c->lock);
	td_list_splice_tail_init(&c->inflight, &c->draining);
	for (pos = c->draining.next; pos != &c->draining; pos = pos->next)
		n++;
	td_mutex_unlock(&c->lock);
	rwlock_unlock(&c->hlock);

	c->drain = h;
	c->drain_gen = c->gen;
	c->down_ns = td_now_ns();
	/* On a handle that can no longer send it, the drain ends at once: the server closed it. */
	if (nbd_aio_disconnect(h, 0) == -1)
		td_debug("nbd: connection %u: %s", c->index, nbd_get_error());
	td_warnx("nbd: connection %u to '%s': %s; draining it: %u command(s) stay with the "
		 "server and none is sent again before it answers or closes the connection",
		 c->index, c->nb->uri, why, n);
}

/*
 * Draining: poll the drained handle once. When every command of ours in it has an answer,
 * or the server closed it, close it: the connection is down.
 */
static void conn_drain_step(struct td_nbd_conn *c)
{
	uint64_t ms = (uint64_t)((td_now_ns() - c->down_ns) / TD_NSEC_PER_MSEC);
	bool closed = td_nbd_handle_dead(c->drain);
	bool empty;

	td_mutex_lock(&c->lock);
	empty = td_list_empty(&c->draining);
	td_mutex_unlock(&c->lock);
	/*
	 * The callbacks of the drained handle run only in the nbd_* calls this thread makes on
	 * it, and the ready list was reaped before this call: nothing of it is left anywhere.
	 * (A handle that died has failed what it had: the list is empty then too.)
	 */
	if (closed || empty) {
		td_notice("nbd: connection %u to '%s' drained after %" PRIu64 " ms: %s", c->index,
			  c->nb->uri, ms,
			  closed ? "the server closed it" : "every command has its answer");
		nbd_close(c->drain);
		c->drain = NULL;
		return;
	}
	conn_check_lost_limit(c, "draining");
	conn_poll(c, c->drain,
		  TD_MIN(c->nb->answer_limit_ms, (unsigned int)TD_NBD_ANSWER_CHECK_MS));
}

/* ---- down: connecting again ------------------------------------------------------------- */

/*
 * Down: close a dead ->h (libnbd has failed everything it had), connect again and send
 * again what waits on the lost list. Returns once up, or when destroy asks the thread to
 * stop.
 */
static void conn_recover(struct td_nbd_conn *c)
{
	struct td_nbd_backend *nb = c->nb;
	unsigned int delay_ms = TD_NBD_RETRY_FIRST_MS;
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
	if (old) {
		c->down_ns = td_now_ns();
		nbd_close(old);
		td_warnx("nbd: connection %u to '%s' lost; reconnecting", c->index, nb->uri);
	}
	/* Every command of the dead handle had its callback: the ready list has them all. */
	td_nbd_conn_reap(c, &broken);
	td_mutex_lock(&c->lock);
	assert(td_list_empty(&c->inflight));
	td_mutex_unlock(&c->lock);

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
		conn_check_lost_limit(c, msg);
		if (attempts > 1)
			delay_ms = TD_MIN(delay_ms * 2, (unsigned int)TD_NBD_RETRY_MAX_MS);
	}

	td_list_init(&lost);
	rwlock_wrlock(&c->hlock);
	c->h = h;
	c->gen++;
	atomic_store_explicit(&c->up, true, memory_order_relaxed);
	td_mutex_lock(&c->lock);
	c->failing = false;
	td_list_splice_init(&c->lost, &lost);
	td_mutex_unlock(&c->lock);
	rwlock_unlock(&c->hlock);

	while (!td_list_empty(&lost)) {
		struct td_nbd_op *op = td_list_first_entry(&lost, struct td_nbd_op, link);
		int err;

		td_list_del(&op->link);
		n++;
		err = td_nbd_conn_send(c, op);
		if (err)
			td_nbd_op_finish(op, err);
	}
	td_notice("nbd: connection %u to '%s' back after %" PRIu64 " ms; %u operation(s) sent "
		  "again", c->index, nb->uri,
		  (uint64_t)((td_now_ns() - c->down_ns) / TD_NSEC_PER_MSEC), n);
}

/* ---- the loop --------------------------------------------------------------------------- */

/* Up: the age of the oldest command in ->h, 0 when there is none. */
static uint64_t conn_oldest_ns(struct td_nbd_conn *c)
{
	uint64_t age_ns = 0;

	td_mutex_lock(&c->lock);
	/* The oldest command in flight is the first: commands are appended as sent. */
	if (!td_list_empty(&c->inflight))
		age_ns = td_now_ns() -
			 td_list_first_entry(&c->inflight, struct td_nbd_op, link)->sent_ns;
	td_mutex_unlock(&c->lock);
	return age_ns;
}

void *td_nbd_conn_loop(void *arg)
{
	struct td_nbd_conn *c = arg;
	struct td_nbd_backend *nb = c->nb;
	unsigned int check_ms = TD_MIN(nb->answer_limit_ms, (unsigned int)TD_NBD_ANSWER_CHECK_MS);
	char name[16];

	loop_conn = c;
	snprintf(name, sizeof(name), "td-nbd%u", c->index);
	td_thread_name(name);
	while (!conn_stopping(c)) {
		bool broken = false;
		char why[64];
		char limit[32];

		td_nbd_conn_reap(c, &broken);
		if (c->drain) {
			conn_drain_step(c);
			continue;
		}
		if (td_nbd_handle_dead(c->h)) {
			conn_recover(c);
			continue;
		}
		if (broken) {
			conn_drain_start(c, "the server is shutting down (ESHUTDOWN)");
			continue;
		}
		if (conn_oldest_ns(c) >= nb->answer_limit_ms * TD_NSEC_PER_MSEC) {
			snprintf(why, sizeof(why), "no answer for %s",
				 limit_text(nb->answer_limit_ms, limit, sizeof(limit)));
			conn_drain_start(c, why);
			continue;
		}
		/* Never asleep for good: a command may be in flight since before this poll. */
		conn_poll(c, c->h, check_ms);
	}
	loop_conn = NULL;
	return NULL;
}
