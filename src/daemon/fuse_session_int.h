/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuse_session_int.h - what the classic transport's parts share: the session
 * (fuse_session.c: mounting, the loop threads, stopping) and its reply path
 * (fuse_session_reply.c: every reply libfuse writes goes through our hook,
 * which answers FUSE_INIT's part that is ours, asks for io_uring and sends
 * ring replies to their entries).
 *
 * LOCKING: s->lock guards the thread list and counts and the INIT outcome
 * (init_state, init_err, with init_cond); the rest is set before the loop
 * threads start, or atomic.
 */
#ifndef TAGDISK_FUSE_SESSION_INT_H
#define TAGDISK_FUSE_SESSION_INT_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include "common/list.h"
#include "common/lock.h"
#include "daemon/fuse_session.h"
#include "daemon/fuse_uring.h"

#define TD_FUSE_MAX_WRITE (1U << 20)
/*
 * libfuse reads requests of up to its bufsize: 256 pages of payload plus a
 * page of headers (FUSE_MAX_MAX_PAGES and FUSE_BUFFER_HEADER_SIZE, private
 * to libfuse). Receive buffers must hold that much.
 */
#define TD_LIBFUSE_MAX_PAGES   256
#define TD_LIBFUSE_HEADER_SIZE 4096

/* Linux 6.9's FUSE_NOTIFY_RESEND (protocol 7.40), which Debian 12's <linux/fuse.h> lacks. */
#define TD_FUSE_NOTIFY_RESEND 7
#define TD_FUSE_UNIQUE_RESEND (1ULL << 63) /* marks a resent request's unique */
#define TD_FUSE_HAS_RESEND    (1ULL << 39) /* INIT flag: the kernel resends on request */
/* The unique of the FUSE_INIT an adopting session replays to libfuse: odd, never the kernel's. */
#define TD_SYNTH_INIT_UNIQUE 1
#define TD_INIT_ARGS_MAX     256 /* bytes of either half of FUSE_INIT kept */

/* Where FUSE_INIT stands; td_fuse_session_wait_ready() waits for a final state. */
enum td_init_state {
	TD_INIT_WAITING, /* no INIT answered yet */
	TD_INIT_DONE,	 /* answered: the transport is settled */
	TD_INIT_FAILED,	 /* answered, but not as asked (init_err), or never (the loop ended) */
};

struct td_fuse_session {
	struct fuse_session *se;
	struct fuse_lowlevel_ops ll; /* the caller's, with init wrapped */
	const struct td_fuse_ops *ops;
	void *userdata;
	struct td_bufpool *pool;
	char *mountpoint;
	int fd; /* /dev/fuse, once mounted */
	bool mounted;
	unsigned int max_threads;
	unsigned int max_background;

	struct td_mutex lock;
	struct td_cond exit_cond;	/* a thread is done, or stop was asked */
	struct td_list threads;		/* lock */
	unsigned int nr_threads;	/* lock */
	unsigned int peak_threads;	/* lock */
	bool started;			/* lock: the first loop thread was started */
	_Atomic unsigned int idle;
	_Atomic bool stopping;

	struct td_cond init_cond;	/* lock: init_state changed */
	enum td_init_state init_state;	/* lock */
	int init_err;			/* lock: TD_INIT_FAILED's negative errno */
	_Atomic bool init_pending;	/* INIT seen, reply not yet written */
	uint64_t init_unique;		/* written before init_pending */
	bool init_offers_uring;		/* the kernel's INIT offered FUSE_OVER_IO_URING */
	uint8_t init_in[TD_INIT_ARGS_MAX];  /* the kernel's INIT arguments, as they came */
	size_t init_in_len;
	uint8_t init_out[TD_INIT_ARGS_MAX]; /* our reply's, as written */
	size_t init_out_len;

	/* Adopting a connection another daemon served (fuse_session_adopt.c) */
	bool adopted;			/* not mounted by us: unmount with umount2() */
	bool detached;			/* leave the mount to a successor: never unmount */
	uint64_t init_flags;		/* the kernel's INIT flags, both words */
	uint64_t resent;		/* requests the kernel resent at the takeover */

	/* FUSE over io_uring */
	enum td_fuse_transport transport; /* as asked for */
	unsigned int ring_entries;
	bool blocking_handlers;
	struct td_fuse_uring *rings;	     /* made before mounting; used if INIT allows */
	_Atomic(struct td_fuse_uring *) uring; /* set once the INIT reply asked for it */
	bool uring_refused;		     /* the kernel refused its entries: classic after all */
};

/* fuse_session.c */

/* Make @s the session the calling thread serves (session_init() finds it so). */
void td_session_set_thread(struct td_fuse_session *s);
/*
 * Return: a receive buffer of @s's pool with every page resident, or NULL (no
 * memory). The kernel copies a request into the reader's buffer through
 * get_user_pages(), which faults a missing page in, except when the reader has
 * been sent SIGKILL: then the copy fails and the kernel ends the request with
 * EIO. A kill -9 that a successor takes over must cost no request, so the
 * pages are there before the read.
 */
struct td_buf *td_session_recv_buf(struct td_fuse_session *s);
/*
 * Hand one request read into *@rb (@fbuf, @len bytes) to libfuse, or answer
 * it here; a handler that keeps the receive buffer leaves *@rb NULL.
 */
void td_session_handle_request(struct td_fuse_session *s, struct td_buf **rb,
			       struct fuse_buf *fbuf, size_t len);

/* fuse_session_adopt.c */

/*
 * An adopted connection, before the loop threads start: replay the recorded
 * FUSE_INIT to libfuse (its reply goes nowhere), have the kernel resend what
 * the previous daemon left unanswered, and hand those requests to libfuse.
 * Return: 0 or a negative errno.
 */
int td_session_adopt(struct td_fuse_session *s);
/* Unmount an adopted connection's mount (libfuse did not mount it). */
void td_session_unmount_adopted(struct td_fuse_session *s);

/* fuse_session_reply.c */

/* Install the reply hook on @s (mounted). Return: 0 or a negative errno. */
int td_session_hook_replies(struct td_fuse_session *s);
/* Forget @s in the hook's table (before freeing it). */
void td_session_unhook(struct td_fuse_session *s);
/* Before libfuse sees it: FUSE_INIT of @len bytes arrived (or is replayed at a takeover). */
void td_session_init_seen(struct td_fuse_session *s, const struct fuse_in_header *in, size_t len);
/* Answer FUSE_OPEN ourselves, with the open flags ops->open chose. */
void td_session_open_raw(struct td_fuse_session *s, const struct fuse_in_header *in, size_t len);
/* The rings' process callback: a request that arrived on a ring, as a loop thread would. */
void td_session_ring_process(void *arg, void *buf, size_t len);
/* The rings' failed callback: a ring loop cannot go on; stop the session. */
void td_session_ring_failed(void *arg);
/* Settle INIT: @state with @err (0 unless failed). Takes s->lock. */
void td_session_init_settle(struct td_fuse_session *s, enum td_init_state state, int err);
/* Log, once, why the ring is not used (an error when it was asked for). */
void td_session_uring_fallback(struct td_fuse_session *s, const char *why);

#endif /* TAGDISK_FUSE_SESSION_INT_H */
