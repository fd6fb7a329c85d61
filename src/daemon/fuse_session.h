/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuse_session.h - the classic FUSE transport: a libfuse low-level session on
 * /dev/fuse (read(2) a request, writev(2) the reply), served by our own
 * multithreaded loop.
 *
 * The session mounts a file system whose operations it is given (struct
 * td_fuse_ops: tagdiskd's disk in frontend.c, or the benchmark's
 * pass-through) and serves it:
 *  - threads are started on demand, up to max_threads, whenever a thread
 *    takes a request while no other is idle; a thread that finds enough
 *    others idle when it is done ends;
 *  - each thread reads into a receive buffer from the pool it was given;
 *    a handler may keep that buffer (td_fuse_steal_recv_buf(), zero copy
 *    for large writes) and the thread takes a fresh one;
 *  - FUSE_INIT: the session sets max_write (a receive buffer's payload),
 *    max_background and the congestion threshold, and turns splicing off
 *    (the data must be in the pool's buffers), then calls ops->ll->init;
 *  - FUSE_OPEN is answered by the loop itself through ops->open, so the
 *    reply can carry open flags that libfuse 3.14's fuse_file_info cannot
 *    express (FOPEN_PARALLEL_DIRECT_WRITES). libfuse keeps no per-open
 *    state, so nothing is lost by bypassing it for this one opcode.
 *
 * FUSE over io_uring (fuse_uring.h) sits beside it, asked for with
 * transport: the rings are made before mounting, the session answers
 * FUSE_INIT with FUSE_OVER_IO_URING when the kernel offers it, and hands each
 * request arriving on a ring to libfuse exactly like one read here, with the
 * same ops; the replies (sent by libfuse through the session's custom I/O
 * hook, on whatever thread) go back to the ring entry they came from.
 * /dev/fuse keeps INIT, FORGET, INTERRUPT and notifications, and everything
 * when the ring is not in use.
 *
 * Lifetime: create (mounts), start (the first loop thread: FUSE_INIT is
 * answered), wait_ready (the transport is settled), run (serves until
 * stopped or unmounted), then unmount and destroy; the ops, their userdata
 * and the pool must outlive the session. LOCKING: internal;
 * td_fuse_session_stop() and td_fuse_session_threads() may be called from
 * any thread.
 */
#ifndef TAGDISK_FUSE_SESSION_H
#define TAGDISK_FUSE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "daemon/bufpool.h"

struct fuse_lowlevel_ops;

/* What the session serves. */
struct td_fuse_ops {
	/*
	 * Every request but FUSE_OPEN, called by libfuse in a loop thread;
	 * fuse_req_userdata() is the session's userdata. Required.
	 */
	const struct fuse_lowlevel_ops *ll;
	/*
	 * FUSE_OPEN of @nodeid with the open(2) @flags, in a loop thread. Return: 0
	 * with the FOPEN_* flags of the reply in *@open_flags, or a positive errno
	 * for the opener. Required.
	 */
	int (*open)(void *userdata, uint64_t nodeid, uint32_t flags, uint32_t *open_flags);
	/*
	 * An open that open() accepted whose reply did not reach the kernel (the
	 * opener is gone): no release will come for it. Optional.
	 */
	void (*open_unsent)(void *userdata, uint64_t nodeid);
};

/* How requests reach the daemon. Zero (classic) is what a zeroed params struct asks for. */
enum td_fuse_transport {
	TD_TRANSPORT_CLASSIC, /* /dev/fuse read(2)/writev(2) only */
	TD_TRANSPORT_AUTO,    /* uring when the kernel offers it, classic otherwise */
	TD_TRANSPORT_URING,   /* FUSE over io_uring; failing to set it up is an error */
};

struct td_fuse_session_params {
	const char *mountpoint;
	const char *fsname;	       /* shown in /proc/mounts */
	const char *subtype;	       /* fuse.SUBTYPE in /proc/mounts */
	bool allow_other;
	const char *const *fuse_opts;  /* -o options, in order */
	size_t nr_fuse_opts;
	unsigned int max_threads;      /* FUSE threads at most (2 at least) */
	unsigned int max_background;   /* the kernel's async request limit (12 at least) */
	const struct td_fuse_ops *ops; /* borrowed */
	void *userdata;		       /* handed to the ops */
	struct td_bufpool *pool;       /* receive buffers, borrowed; must serve td_fuse_recv_size() */
	enum td_fuse_transport transport;
	unsigned int ring_entries;     /* uring: entries per queue (0: from max_background) */
	bool blocking_handlers;	       /* read/write/fsync/fallocate may block for the I/O:
					  uring runs them on helper threads, not the ring's */
	/*
	 * adopt: serve the /dev/fuse connection adopt_fd (mounted at mountpoint by
	 * an earlier daemon) instead of mounting; classic transport only.
	 * adopt_init_in holds the kernel's FUSE_INIT arguments as they came then
	 * (takeover.h).
	 */
	bool adopt;
	int adopt_fd;
	const void *adopt_init_in;
	size_t adopt_init_in_len;
};

/* What the session's transport is doing: for the admin status. */
struct td_fuse_transport_stats {
	const char *name;		 /* "classic" or "uring" (static string) */
	unsigned int nr_queues;		 /* uring: queues (one per CPU); 0 for classic */
	unsigned int entries;		 /* uring: entries per queue */
	unsigned int helpers;		 /* uring: helper loops running */
	uint64_t trims;			 /* uring: entries whose pages an idle loop gave back */
	uint64_t trim_kept;		 /* uring: of those, entries holding a request, kept */
	uint64_t queue_requests[64];	 /* uring: requests each queue received (first 64) */
};

struct td_fuse_session;

/* Return: the bytes a receive buffer holds: libfuse's request size, 1 MiB + a page. */
size_t td_fuse_recv_size(void);

/*
 * Create the session and mount it. Return: the session, or NULL with a message
 * in @err and a negative errno in *@errnum (the mount point is left untouched
 * on failure): -EOPNOTSUPP when transport uring was asked for and cannot be
 * had (checked before mounting).
 */
struct td_fuse_session *td_fuse_session_create(const struct td_fuse_session_params *p, int *errnum,
					       char *err, size_t errlen) td_nonnull(1, 2, 3);

/*
 * Start serving: the first loop thread; an adopted connection first replays
 * its FUSE_INIT to libfuse and takes what the kernel resends. Return: 0 or a
 * negative errno. Idempotent.
 */
int td_fuse_session_start(struct td_fuse_session *s) td_nonnull(1);

/* Return: the requests the kernel resent when the connection was adopted. */
uint64_t td_fuse_session_resent(struct td_fuse_session *s) td_nonnull(1);

/* Return: the /dev/fuse fd (owned by the session). */
int td_fuse_session_fd(struct td_fuse_session *s) td_nonnull(1);

/*
 * After FUSE_INIT: the kernel's INIT arguments and our reply's, as they went
 * (what a successor replays: takeover.h), into the pointers.
 */
void td_fuse_session_init_args(struct td_fuse_session *s, const void **in, size_t *in_len,
			       const void **out, size_t *out_len) td_nonnull(1, 2, 3, 4, 5);

/* Leave the mount in place: unmount and destroy will not take it (a successor will serve it). */
void td_fuse_session_detach(struct td_fuse_session *s) td_nonnull(1);

/*
 * After td_fuse_session_start(): wait until FUSE_INIT has been answered and
 * the transport settled (with io_uring, every ring registered). Return: 0, or
 * a negative errno: -EOPNOTSUPP when transport uring was asked for and the
 * kernel did not give it (the connection is served through /dev/fuse until
 * the caller stops), -ENOTCONN when the loop ended first, or the error INIT
 * was answered with.
 */
int td_fuse_session_wait_ready(struct td_fuse_session *s) td_nonnull(1);

/*
 * Serve (starting first if td_fuse_session_start() was not called) until
 * td_fuse_session_stop() or an unmount. Returns after every loop thread has
 * exited; replies sent later from other threads (completions) still reach
 * the kernel while it is mounted. Return: 0 when stopped, 1 when the file
 * system was unmounted from outside, a negative errno on failure (-EIO: a
 * ring stopped on an error and stopped the session).
 */
int td_fuse_session_run(struct td_fuse_session *s) td_nonnull(1);

/* Ask td_fuse_session_run() to return. Not async-signal-safe; any thread. */
void td_fuse_session_stop(struct td_fuse_session *s) td_nonnull(1);

/* Unmount (lazily, if busy). Idempotent. */
void td_fuse_session_unmount(struct td_fuse_session *s) td_nonnull(1);

/* Unmount if still mounted and free the session; run must have returned. */
void td_fuse_session_destroy(struct td_fuse_session *s) td_nonnull(1);

/* Return: the number of loop threads running now, and in *@peak the most ever running. */
unsigned int td_fuse_session_threads(struct td_fuse_session *s, unsigned int *peak)
	td_nonnull(1);

/* Fill @st with the transport in use and, for uring, the per-queue request counts. */
void td_fuse_session_transport_stats(struct td_fuse_session *s, struct td_fuse_transport_stats *st)
	td_nonnull(1, 2);

/*
 * From an op handler, in the thread that called it: whether [@data, @data +
 * @len) is request data that stays valid until the request's reply (a ring
 * entry's payload), so it need not be copied.
 */
bool td_fuse_recv_data_pinned(const void *data, size_t len);

/*
 * From an op handler, in the thread that called it: memory where a reply's
 * data of @len bytes can be built so that replying copies nothing (a ring
 * entry's payload); valid until the reply. NULL when there is none.
 */
void *td_fuse_reply_space(size_t len);

/*
 * From an op handler, in the loop thread that called it: when [@data, @data +
 * @len) lies in the receive buffer of the request being handled, take that
 * buffer (the thread reads its next request into a fresh one). Return: the
 * buffer, which the caller gives back to the session's pool with
 * td_bufpool_put() when done with the data; NULL when @data is elsewhere
 * (or no buffer is being handled) and nothing changes.
 */
struct td_buf *td_fuse_steal_recv_buf(const void *data, size_t len);

#endif /* TAGDISK_FUSE_SESSION_H */
