/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * drive_nbd_int.h - what the NBD backend's files share: the backend, its
 * connections and its operations, and the calls between the files.
 *
 *   drive_nbd.c       opening (the limits, the first connection, the others, the threads),
 *                     the ops table: submit and destroy;
 *   drive_nbd_op.c    operations: sending an operation's commands, libnbd's completion
 *                     callback, and what the loop thread does with a finished command;
 *   drive_nbd_conn.c  a connection's state machine (up, draining, down) and its loop
 *                     thread: polling, draining, reconnecting.
 *
 * The design and its invariants are at the top of drive_nbd_op.c (an operation's life) and
 * drive_nbd_conn.c (a connection's states, and why a command without an answer is never
 * sent again before its connection's fate is known).
 *
 * An operation (struct td_nbd_op, one per accepted td_backend_io) belongs to one connection
 * for its whole life. It is freed by td_nbd_op_finish(), which calls io->done.
 *
 * LOCKING, per connection, in this order:
 *   hlock (rwlock)   read: a thread using ->h; write: the loop thread installing or
 *                    taking away ->h (and ->gen). Held across nbd_aio_* calls on ->h.
 *   libnbd's handle lock, inside every nbd_* call and the completion callbacks.
 *   lock             the four lists, ->failing and ->stop. Never held across an nbd_*
 *                    call (the callback takes it with the handle lock held) nor across
 *                    io->done.
 * ->drain, ->drain_gen and ->down_ns belong to the loop thread (and to destroy, once the
 * thread has been joined). The backend's lock (outstanding operations) is a leaf.
 */
#ifndef TAGDISK_DRIVE_NBD_INT_H
#define TAGDISK_DRIVE_NBD_INT_H

#include <libnbd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "common/list.h"
#include "common/lock.h"
#include "tagdisk/backend.h"

#define TD_NBD_MAX_CONNECTIONS 16
/*
 * A command unanswered this long: the connection takes no more commands and is drained
 * (drive_nbd_conn.c). Default; TAGDISK_NBD_ANSWER_LIMIT_MS overrides it (tagdiskd(8)).
 */
#define TD_NBD_ANSWER_LIMIT_MS 60000
/*
 * A connection not taking commands (draining, or down) this long: the operations waiting
 * for it fail with -EIO, and new ones at once, until it is back. Default;
 * TAGDISK_NBD_LOST_LIMIT_MS overrides it (tagdiskd(8)).
 */
#define TD_NBD_LOST_LIMIT_MS 60000
/* The range both variables accept, in milliseconds. */
#define TD_NBD_LIMIT_MIN_MS 100
#define TD_NBD_LIMIT_MAX_MS 3600000
/* How often the loop thread looks for an unanswered command (at most; it wakes this often). */
#define TD_NBD_ANSWER_CHECK_MS 1000
/* Reconnection attempts: one at once, the next this much later, then twice as long each time. */
#define TD_NBD_RETRY_FIRST_MS 100
#define TD_NBD_RETRY_MAX_MS   1000
/* One connection attempt at open, and one reconnection attempt. */
#define TD_NBD_OPEN_TIMEOUT_MS	    30000
#define TD_NBD_RECONNECT_TIMEOUT_MS 5000
/* The longest read or write command (smaller when the server says so). */
#define TD_NBD_RW_MAX (32U << 20)
/* The longest write zeroes command (NBD lengths are 32 bits). */
#define TD_NBD_ZERO_MAX (1U << 30)
/* Zeroes written as data, per command, where the server cannot write zeroes. */
#define TD_NBD_ZERO_BUF (1U << 20)

/* What the export offers, as far as we use it. */
struct td_nbd_caps {
	uint64_t size;
	bool read_only;
	bool flush;
	bool fua;
	bool zero;
	bool multi_conn;
};

struct td_nbd_backend;

struct td_nbd_conn {
	struct td_nbd_backend *nb;	/* immutable */
	unsigned int index;		/* immutable */
	pthread_t thread;		/* the loop thread */
	int efd;			/* immutable: wakes the loop thread */
	pthread_rwlock_t hlock;		/* see LOCKING */
	struct nbd_handle *h;		/* hlock: the handle taking commands; NULL unless up */
	unsigned int gen;		/* hlock: h's number (every new handle gets the next) */
	atomic_bool up;			/* a hint for choosing a connection: h != NULL */
	struct td_mutex lock;
	struct td_list inflight;	/* lock: td_nbd_op with a command in h */
	struct td_list draining;	/* lock: td_nbd_op with a command in drain */
	struct td_list ready;		/* lock: td_nbd_op whose command's callback ran */
	struct td_list lost;		/* lock: td_nbd_op waiting for the connection */
	bool failing;			/* lock: not taking commands for lost_limit_ms */
	bool stop;			/* lock: destroy: nothing is outstanding, exit */
	struct nbd_handle *drain;	/* loop thread: the handle being drained, or NULL */
	unsigned int drain_gen;		/* loop thread: drain's number */
	uint64_t down_ns;		/* loop thread: when it stopped taking commands */
};

struct td_nbd_backend {
	char *uri;			/* immutable */
	bool read_only;			/* immutable: ours: refuse writes */
	struct td_nbd_caps caps;	/* immutable: of the first connection; the others match */
	uint64_t rw_max;		/* immutable: bytes per read or write command */
	unsigned int answer_limit_ms;	/* immutable: see TD_NBD_ANSWER_LIMIT_MS */
	unsigned int lost_limit_ms;	/* immutable: see TD_NBD_LOST_LIMIT_MS */
	atomic_bool no_hole;		/* write zeroes asks NBD_CMD_FLAG_NO_HOLE */
	void *zero_buf;			/* immutable: TD_NBD_ZERO_BUF zeroes when !caps.zero */
	atomic_uint next;		/* round robin over the connections */
	struct td_mutex lock;
	struct td_cond idle;
	uint64_t outstanding;		/* lock: accepted operations not yet done */
	unsigned int nr_conns;		/* immutable */
	struct td_nbd_conn conns[];
};

/* One td_backend_io while it is outstanding. */
struct td_nbd_op {
	struct td_list link;	/* on a list of conn, or none (see drive_nbd_op.c) */
	struct td_backend_io *io;
	struct td_nbd_conn *conn; /* immutable */
	uint64_t len;		/* io->len, cut at the end of the export */
	uint64_t done;		/* bytes of the data commands completed */
	uint64_t piece;		/* bytes of the command in flight; 0 for a flush */
	bool flushing;		/* in the flush after a FUA write (no FUA on the server) */
	bool used_no_hole;	/* the command in flight asked NO_HOLE */
	unsigned int gen;	/* conn->lock: the handle the command in flight went to */
	uint64_t sent_ns;	/* conn->lock: when the command in flight went to libnbd */
	int err;		/* conn->lock: the command's result, a positive errno */
};

/* Return: true when @h cannot take or answer commands any more (or there is none). */
static inline bool td_nbd_handle_dead(struct nbd_handle *h)
{
	return !h || nbd_aio_is_dead(h) == 1 || nbd_aio_is_closed(h) == 1;
}

/* ---- drive_nbd_op.c ---- */

/*
 * Send @op's next command on @c (the loop thread, or a submitter), or park @op on the lost
 * list while @c takes no commands. No lock held; @op is on no list.
 * Return: 0 (sent or parked: the loop thread or the callback has it now), or a negative
 * errno with which the caller finishes @op (-EIO: @c has not been taking commands for
 * lost_limit_ms; a refusal of libnbd's).
 */
int td_nbd_conn_send(struct td_nbd_conn *c, struct td_nbd_op *op) td_nonnull(1, 2);

/*
 * Loop thread: take @c's ready list and finish each operation, send its next command or
 * park it on the lost list for sending again. *@broken becomes true when a command of a
 * live ->h failed without a result (ESHUTDOWN: the server is going away): ->h is to be
 * drained.
 */
void td_nbd_conn_reap(struct td_nbd_conn *c, bool *broken) td_nonnull(1, 2);

/* Loop thread: finish every operation parked on @c's lost list with -EIO. */
void td_nbd_conn_fail_lost(struct td_nbd_conn *c) td_nonnull(1);

/* Call io->done with @err and free @op, which is on no list. No lock held. */
void td_nbd_op_finish(struct td_nbd_op *op, int err) td_nonnull(1);

/* ---- drive_nbd_conn.c ---- */

/* The loop thread of the connection @arg (pthread_create()). */
void *td_nbd_conn_loop(void *arg) td_nonnull(1);

/* Wake @c's loop thread. */
void td_nbd_conn_wake(struct td_nbd_conn *c) td_nonnull(1);

/* Return: true when the calling thread is @c's loop thread. */
bool td_nbd_on_loop_thread(const struct td_nbd_conn *c) td_nonnull(1);

/*
 * A new handle connected to @uri within @timeout_ms (@wake_fd, when not -1, cuts the wait
 * short). Return: the handle, or NULL with the reason in @msg (@msglen bytes).
 */
struct nbd_handle *td_nbd_handle_connect(const char *uri, unsigned int timeout_ms, int wake_fd,
					 char *msg, size_t msglen) td_nonnull(1, 4);

/* What the export on @h offers, into @caps. Return: 0, or -1 with the reason in @msg. */
int td_nbd_read_caps(struct nbd_handle *h, struct td_nbd_caps *caps, char *msg, size_t msglen)
	td_nonnull(1, 2, 3);

#endif /* TAGDISK_DRIVE_NBD_INT_H */
