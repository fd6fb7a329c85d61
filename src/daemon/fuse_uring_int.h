/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuse_uring_int.h - what the parts of the FUSE-over-io_uring transport share:
 * the entries, the loops and the rings (fuse_uring.c: setup and teardown;
 * fuse_uring_loop.c: the request loop, replies and commits, the idle trim;
 * fuse_uring_helper.c: helper loops for large I/O).
 *
 * Entry. One anonymous mapping: a page of scratch, then the payload. The
 * scratch page holds the 288-byte ring header at its start; when a request
 * arrives, its fuse_in_header and first argument are copied to the bytes just
 * before the payload, so header, arguments and payload are contiguous as a
 * /dev/fuse read would give them, and a write's data is used in place.
 *
 * Loops. Every thread here runs a loop around its own io_uring: one per
 * queue (pinned to the queue's CPU; it registers the queue's entries) and
 * helpers started on demand. The kernel does not tie an entry to the ring
 * that registered it: a COMMIT_AND_FETCH names the queue and the request,
 * and whichever ring issues it gets the entry's next request. So an entry
 * belongs to the loop that issued its last command, and the kernel's work
 * for it - copying a read's reply into the reader's pages at the commit, the
 * next request into the entry in the fetch or in the task work that hands a
 * request to an armed entry - runs in that loop's thread, and only there.
 *
 * States of an entry, all changed by its owner's thread except PROCESSING ->
 * replied (any thread, through the owner's commit list):
 *
 *   ARMED --CQE res 0--> PROCESSING --reply--> on a commit list --SQE--> ARMED
 *   PROCESSING --hand-over--> PROCESSING in another loop (owner changed)
 *   ARMED --CQE res < 0--> DEAD (unmount: -ENOTCONN; daemon exit: -ECANCELED)
 *   PROCESSING, while held (stopping) --> HELD: never committed; the kernel
 *                                         ends its request when the connection goes
 *
 * ARMED is what user space last did, not what the kernel did since: the
 * kernel may already have written a request into an ARMED entry (header and
 * payload) whose completion the loop has not reaped yet. Nothing may discard
 * an ARMED entry's memory on the belief that it is unused (trim_idle() in
 * fuse_uring_loop.c says how it gives pages back anyway).
 *
 * LOCKING: each loop's mutex guards its commit and work lists and
 * wake_pending; everything else of a loop belongs to its thread, and an entry
 * to the loop owning it. u->helper_lock serialises starting helpers. The
 * counters are relaxed atomics.
 */
#ifndef TAGDISK_FUSE_URING_INT_H
#define TAGDISK_FUSE_URING_INT_H

#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include "common/lock.h"
#include "daemon/fuse_uring.h"
#include "daemon/fuse_uring_abi.h"

#define TD_URING_SCRATCH_BYTES 4096U
#define TD_URING_EFD_USER_DATA 1ULL	    /* the eventfd read's user_data (entries are pointers) */
#define TD_URING_THREAD_STACK  (512U << 10)
#define TD_URING_IDLE_TRIM_S   1	    /* an idle loop gives back its entries' pages after this */
#define TD_URING_OFFLOAD_MIN   (64U << 10) /* I/O this large goes to a helper */

enum td_ring_ent_state {
	TD_ENT_ARMED,
	TD_ENT_PROCESSING,
	TD_ENT_HELD,
	TD_ENT_DEAD,
};

struct td_ring_loop;
struct td_ring_queue;

struct td_ring_ent {
	struct td_ring_queue *q; /* the kernel's queue: its qid goes in every command */
	unsigned int idx;
	/*
	 * The loop whose ring issued the entry's command, or that will commit it:
	 * set by the loop handing it over while PROCESSING (release), read by any
	 * replier and by the owner's idle trim (acquire).
	 */
	struct td_ring_loop *_Atomic owner;
	enum td_ring_ent_state state; /* the owner's thread, except while PROCESSING (the replier) */
	uint64_t unique;	      /* the kernel's, for the commit; 0 before the first request */
	/*
	 * ARMED: the commit_id its ring header shows until the kernel writes a
	 * request into it (the last request's, or 0 for fresh pages).
	 */
	uint64_t armed_id;
	void *map;		      /* TD_URING_SCRATCH_BYTES + payload */
	struct td_fuse_uring_req_header *hdr;
	char *payload;
	struct iovec iov[2];
	struct td_ring_ent *next; /* on a commit, work or to-do list */
	bool dirty;		  /* its mapping holds pages: set before the commit is queued */
	bool loaded;		  /* counted in its owner's load */
	bool passed;		  /* its commit was passed to an idle helper: commit it there */
	size_t work_len;	  /* the rebuilt request, handed between loops */
	char *work_start;
};

/*
 * A thread with its own io_uring: a queue's thread (pinned, registers the
 * queue's entries) or a helper (started on demand).
 */
struct td_ring_loop {
	struct td_fuse_uring *u;
	struct td_ring_queue *home; /* a queue's loop; NULL for a helper */
	struct td_ring_loop *next_helper;
	struct io_uring ring;
	bool ring_ok;
	pthread_t tid;
	bool started;
	int efd;
	uint64_t efd_buf;
	bool maybe_dirty; /* the thread: an entry it owns may hold pages to give back */

	struct td_mutex lock;
	struct td_ring_ent *commit_head; /* lock: replied from other threads */
	struct td_ring_ent *commit_tail; /* lock */
	struct td_ring_ent *work_head;	 /* lock: requests handed to this loop */
	struct td_ring_ent *work_tail;	 /* lock */
	bool wake_pending;		 /* lock: an eventfd write is on its way */

	_Atomic unsigned int load;  /* helpers: requests taken and not yet committed */
	_Atomic unsigned int armed; /* commands this ring holds (entries it owns, armed) */
};

struct td_ring_queue {
	struct td_fuse_uring *u;
	unsigned int qid;
	struct td_ring_loop loop;
	struct td_ring_ent *ents;
	_Atomic unsigned int nr_live; /* entries not DEAD */
	_Atomic uint64_t requests;
};

struct td_fuse_uring {
	struct td_fuse_uring_params p;
	unsigned int nr_queues;
	struct td_ring_queue *queues;
	_Atomic bool holding;
	_Atomic bool exiting;
	_Atomic bool failed; /* a loop stopped on an error it cannot serve through */
	_Atomic uint64_t trims;	    /* entries whose pages an idle loop gave back */
	_Atomic uint64_t trim_kept; /* of those, entries the kernel had written a request into */

	/* Starting: the queue threads wait for td_fuse_uring_start() before registering. */
	struct td_mutex start_lock;
	struct td_cond start_cond;
	bool go;			/* start_lock: register now */
	unsigned int registered;	/* start_lock: queue threads that submitted their entries */
	int start_err;			/* start_lock: the first registration error */

	cpu_set_t cpus;			   /* the process's CPUs, for helpers (started by pinned threads) */
	struct td_mutex helper_lock;	   /* serialises starting helpers */
	struct td_ring_loop *_Atomic helpers; /* pushed at the head, never removed until destroy */
	_Atomic unsigned int nr_helpers;
};

/* fuse_uring.c */
int td_ring_loop_init(struct td_ring_loop *l, unsigned int sqes, char *err, size_t errlen);
void td_ring_loop_fini(struct td_ring_loop *l);
/* Return: the entry a ring tag names, or NULL when it names none. */
struct td_ring_ent *td_ring_tag_ent(struct td_fuse_uring *u, uint64_t tag);
uint64_t td_ring_ent_tag(const struct td_ring_ent *e);

static inline struct td_ring_loop *td_ring_ent_owner(struct td_ring_ent *e)
{
	return atomic_load_explicit(&e->owner, memory_order_acquire);
}

static inline void td_ring_set_owner(struct td_ring_ent *e, struct td_ring_loop *l)
{
	atomic_store_explicit(&e->owner, l, memory_order_release);
}

/* fuse_uring_loop.c: the thread function of every loop, queue or helper. */
void *td_ring_loop_thread(void *arg);
/*
 * Append @e to one of @l's lists (@head/@tail: its commit or work list), under
 * its lock, and wake its thread unless a wake-up is already on its way.
 */
void td_ring_push(struct td_ring_loop *l, struct td_ring_ent **head, struct td_ring_ent **tail,
		  struct td_ring_ent *e);
/* Put the replied @e on @l's commit list (from another thread than @l's). */
void td_ring_push_commit(struct td_ring_loop *l, struct td_ring_ent *e);
/* Wake @l's thread unless a wake-up is already on its way. @l's lock held. */
void td_ring_wake_locked(struct td_ring_loop *l, bool *wake);
/*
 * Give back the pages of the ARMED entries @l owns, keeping whatever request
 * the kernel wrote into any of them, whenever it did: before the pages move
 * (the request is copied back) or after (it is in the fresh pages). In @l's
 * thread, which reaps the entries' completions afterwards. Return: true when
 * some entry still holds pages.
 */
bool td_ring_trim_idle(struct td_ring_loop *l);

/* fuse_uring_helper.c */
/* Return: whether the request @in (rebuilt) should run in a helper. */
bool td_ring_wants_helper(const struct td_fuse_uring *u, const struct fuse_in_header *in);
/* A helper holding no entry and no request other than @self, else a new one, else NULL. */
struct td_ring_loop *td_ring_free_helper(struct td_fuse_uring *u, struct td_ring_loop *self);
/* A helper for one more request, other than @self. Return: NULL when @self should keep it. */
struct td_ring_loop *td_ring_pick_helper(struct td_fuse_uring *u, struct td_ring_loop *self);
/* Hand the request in @e (rebuilt at work_start) to @to's thread. */
void td_ring_hand_over(struct td_ring_loop *to, struct td_ring_ent *e);

#endif /* TAGDISK_FUSE_URING_INT_H */
