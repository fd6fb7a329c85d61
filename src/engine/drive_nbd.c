// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_nbd.c - the NBD backend: an asynchronous backend on libnbd; opening
 * it, and its ops table.
 *
 * The backend holds 1 to 16 connections to one export (more than one only
 * when the server offers multi-conn, so that a flush on one connection covers
 * the writes completed on all). Operations go to the connections in turn,
 * skipping those that are not taking commands; an operation stays with its
 * connection until it completes. Each connection has its own libnbd handle
 * and loop thread (drive_nbd_conn.c); an operation's commands are sent and
 * completed as drive_nbd_op.c says. What the files share is in
 * drive_nbd_int.h.
 *
 * Opening checks what the export offers against what we need (writable
 * unless we serve it read-only, not empty, multi-conn for more than one
 * connection), connects the other connections to the same export, and only
 * then starts the loop threads. The two limits of a lost or silent server
 * (drive_nbd_conn.c) are 60 s each, or what TAGDISK_NBD_ANSWER_LIMIT_MS and
 * TAGDISK_NBD_LOST_LIMIT_MS say (tagdiskd(8)); a bad value fails the open.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "common/log.h"
#include "drive_nbd_int.h"

/* ---- the ops table ---------------------------------------------------------------------- */

/* Return: the connection for the next operation: the next in turn that is up, if any. */
static struct td_nbd_conn *pick_conn(struct td_nbd_backend *nb)
{
	unsigned int first = atomic_fetch_add_explicit(&nb->next, 1, memory_order_relaxed);

	for (unsigned int i = 0; i < nb->nr_conns; i++) {
		struct td_nbd_conn *c = &nb->conns[(first + i) % nb->nr_conns];

		if (atomic_load_explicit(&c->up, memory_order_relaxed))
			return c;
	}
	return &nb->conns[first % nb->nr_conns];
}

static int nbd_submit(void *priv, struct td_backend_io *io)
{
	struct td_nbd_backend *nb = priv;
	uint64_t size = nb->caps.size;
	uint64_t len = io->len;
	struct td_nbd_op *op;
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

	err = td_nbd_conn_send(op->conn, op);
	if (err) {
		/* Accepted all the same: done reports the error. */
		td_nbd_op_finish(op, err);
	}
	return 0;
}

/* Stop the first @started loop threads, close every handle, free the connections' own. */
static void nbd_destroy_conns(struct td_nbd_backend *nb, unsigned int started)
{
	for (unsigned int i = 0; i < nb->nr_conns; i++) {
		struct td_nbd_conn *c = &nb->conns[i];

		if (i < started) {
			td_mutex_lock(&c->lock);
			c->stop = true;
			td_mutex_unlock(&c->lock);
			td_nbd_conn_wake(c);
			pthread_join(c->thread, NULL);
		}
		if (c->h) {
			if (!td_nbd_handle_dead(c->h) && nbd_shutdown(c->h, 0) == -1)
				td_debug("nbd: connection %u: %s", i, nbd_get_error());
			nbd_close(c->h);
		}
		/* Nothing is outstanding: no command of ours is in it any more. */
		if (c->drain)
			nbd_close(c->drain);
		if (c->efd >= 0)
			close(c->efd);
		pthread_rwlock_destroy(&c->hlock);
		td_mutex_destroy(&c->lock);
	}
}

static void nbd_free(struct td_nbd_backend *nb)
{
	td_cond_destroy(&nb->idle);
	td_mutex_destroy(&nb->lock);
	free(nb->zero_buf);
	free(nb->uri);
	free(nb);
}

static void nbd_destroy(void *priv)
{
	struct td_nbd_backend *nb = priv;

	td_mutex_lock(&nb->lock);
	while (nb->outstanding)
		td_cond_wait(&nb->idle, &nb->lock);
	td_mutex_unlock(&nb->lock);
	nbd_destroy_conns(nb, nb->nr_conns);
	nbd_free(nb);
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

/*
 * A limit from the environment variable @name, or @def when it is not set.
 * Return: 0, or -EINVAL with one line in @msg when the value is not a number of
 * milliseconds in range.
 */
static int limit_from_env(const char *name, unsigned int def, unsigned int *ms, char *msg,
			  size_t msglen)
{
	const char *v = getenv(name);
	unsigned long long n;
	char *end;

	*ms = def;
	if (!v)
		return 0;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (*v < '0' || *v > '9' || *end || errno || n < TD_NBD_LIMIT_MIN_MS ||
	    n > TD_NBD_LIMIT_MAX_MS) {
		snprintf(msg, msglen, "nbd: %s='%s' is not a number of milliseconds from %u to %u",
			 name, v, TD_NBD_LIMIT_MIN_MS, TD_NBD_LIMIT_MAX_MS);
		return -EINVAL;
	}
	*ms = (unsigned int)n;
	return 0;
}

/* The first connection: what the export offers, checked against what we need. */
static int open_first(struct td_nbd_backend *nb, bool want_multi, char *msg, size_t msglen)
{
	struct td_nbd_conn *c = &nb->conns[0];
	char why[256];
	int64_t max;

	c->h = td_nbd_handle_connect(nb->uri, TD_NBD_OPEN_TIMEOUT_MS, -1, why, sizeof(why));
	if (!c->h) {
		snprintf(msg, msglen, "nbd: cannot connect to '%s': %s", nb->uri, why);
		return -ECONNREFUSED;
	}
	if (td_nbd_read_caps(c->h, &nb->caps, why, sizeof(why))) {
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
	nb->rw_max = max > 0 ? TD_MIN((uint64_t)max, (uint64_t)TD_NBD_RW_MAX) : TD_NBD_RW_MAX;
	if (!nb->caps.zero) {
		nb->zero_buf = calloc(1, TD_NBD_ZERO_BUF);
		if (!nb->zero_buf) {
			snprintf(msg, msglen, "nbd: out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

/* Connections 1 and up, to the export connection 0 found. */
static int open_others(struct td_nbd_backend *nb, char *msg, size_t msglen)
{
	for (unsigned int i = 1; i < nb->nr_conns; i++) {
		struct td_nbd_conn *c = &nb->conns[i];
		struct td_nbd_caps caps;
		char why[256];

		c->h = td_nbd_handle_connect(nb->uri, TD_NBD_OPEN_TIMEOUT_MS, -1, why, sizeof(why));
		if (!c->h || td_nbd_read_caps(c->h, &caps, why, sizeof(why))) {
			snprintf(msg, msglen, "nbd: connection %u to '%s': %s", i, nb->uri, why);
			return -ECONNREFUSED;
		}
		if (caps.size != nb->caps.size || caps.fua != nb->caps.fua ||
		    caps.flush != nb->caps.flush || caps.zero != nb->caps.zero) {
			snprintf(msg, msglen, "nbd: connection %u to '%s' sees another export than "
				 "connection 0", i, nb->uri);
			return -EIO;
		}
	}
	return 0;
}

/* A backend for @p with its connections' locks and lists, nothing connected. */
static struct td_nbd_backend *nbd_alloc(const struct td_nbd_params *p, bool read_only)
{
	unsigned int n = p->connections;
	struct td_nbd_backend *nb = calloc(1, sizeof(*nb) + n * sizeof(nb->conns[0]));

	if (!nb || !(nb->uri = strdup(p->uri))) {
		free(nb);
		return NULL;
	}
	nb->read_only = read_only;
	nb->nr_conns = n;
	atomic_init(&nb->no_hole, true);
	atomic_init(&nb->next, 0);
	td_mutex_init(&nb->lock);
	td_cond_init(&nb->idle);
	for (unsigned int i = 0; i < n; i++) {
		struct td_nbd_conn *c = &nb->conns[i];
		pthread_rwlockattr_t attr;

		c->nb = nb;
		c->index = i;
		c->efd = -1;
		/* Writers first: taking a handle away must not wait on a stream of submitters. */
		pthread_rwlockattr_init(&attr);
		pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		if (pthread_rwlock_init(&c->hlock, &attr))
			abort();
		pthread_rwlockattr_destroy(&attr);
		td_mutex_init(&c->lock);
		td_list_init(&c->inflight);
		td_list_init(&c->draining);
		td_list_init(&c->ready);
		td_list_init(&c->lost);
	}
	return nb;
}

int td_backend_nbd_open(struct td_backend *be, const struct td_nbd_params *p, bool read_only,
			uint64_t *size, char *msg, size_t msglen)
{
	unsigned int n = p->connections;
	unsigned int answer_ms;
	unsigned int lost_ms;
	unsigned int started = 0;
	struct td_nbd_backend *nb;
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
	if (n < 1 || n > TD_NBD_MAX_CONNECTIONS) {
		snprintf(msg, msglen, "nbd: connections %u is out of range (1..%u)", n,
			 TD_NBD_MAX_CONNECTIONS);
		return -EINVAL;
	}
	err = limit_from_env("TAGDISK_NBD_ANSWER_LIMIT_MS", TD_NBD_ANSWER_LIMIT_MS, &answer_ms,
			     msg, msglen);
	if (!err)
		err = limit_from_env("TAGDISK_NBD_LOST_LIMIT_MS", TD_NBD_LOST_LIMIT_MS, &lost_ms,
				     msg, msglen);
	if (err)
		return err;
	nb = nbd_alloc(p, read_only);
	if (!nb) {
		snprintf(msg, msglen, "nbd: out of memory");
		return -ENOMEM;
	}
	nb->answer_limit_ms = answer_ms;
	nb->lost_limit_ms = lost_ms;
	for (unsigned int i = 0; i < n; i++) {
		nb->conns[i].efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (nb->conns[i].efd < 0) {
			err = -errno;
			snprintf(msg, msglen, "nbd: eventfd: %s", strerror(errno));
			goto out_destroy;
		}
	}

	err = open_first(nb, n > 1, msg, msglen);
	if (!err)
		err = open_others(nb, msg, msglen);
	if (err)
		goto out_destroy;
	for (started = 0; started < n; started++) {
		struct td_nbd_conn *c = &nb->conns[started];

		atomic_store(&c->up, true);
		err = -pthread_create(&c->thread, NULL, td_nbd_conn_loop, c);
		if (err) {
			snprintf(msg, msglen, "nbd: cannot start a thread: %s", strerror(-err));
			goto out_destroy;
		}
	}
	td_info("nbd: '%s': %" PRIu64 " bytes, %u connection(s)%s%s%s%s", nb->uri, nb->caps.size,
		n, nb->caps.flush ? ", flush" : "", nb->caps.fua ? ", FUA" : "",
		nb->caps.zero ? ", write zeroes" : "", nb->caps.multi_conn ? ", multi-conn" : "");
	if (answer_ms != TD_NBD_ANSWER_LIMIT_MS || lost_ms != TD_NBD_LOST_LIMIT_MS)
		td_notice("nbd: '%s': answer limit %u ms, lost limit %u ms (from the environment)",
			  nb->uri, answer_ms, lost_ms);
	be->ops = &nbd_ops;
	be->priv = nb;
	*size = nb->caps.size;
	return 0;

out_destroy:
	nbd_destroy_conns(nb, started);
	nbd_free(nb);
	return err;
}
