/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * request.h - requests: merged bios over contiguous sectors, and their pool.
 *
 * A request is what the elevator sorts, prep turns into a command, a tag
 * names and the drive executes. It carries one or more bios of the same
 * operation over contiguous sectors (at most max_sectors, at most
 * TD_RQ_MAX_BIOS bios), the pregenerated command cmd[16]/cmd_len, its tag,
 * its deadline and its retry count.
 *
 * States (guarded by the queue lock):
 *
 *   FREE --get--> QUEUED (in the elevator) --dispatch--> DISPATCH (on the
 *   queue's dispatch list) --prep OK--> INFLIGHT (tagged, at the drive)
 *   --complete--> FREE;  INFLIGHT --reset--> DISPATCH (requeued at the head);
 *   DISPATCH --prep KILL--> FREE.  Flushes skip the elevator.
 *   INFLIGHT or DISPATCH --abort while pinned--> ABORTED --unpin--> FREE.
 *
 * Pinned: a backend call that a reset left behind (tagdisk/drive.h) may
 * still read or write the request's data buffers. Its owner ends no pinned
 * request, with a result or an error, until the drive unpins it; a bounded
 * drain that fails everything leaves a pinned request ABORTED, to be failed
 * when it is unpinned.
 *
 * Lifetime: requests live in a fixed pool of nr_requests allocated with the
 * queue, so memory is bounded: when the pool is empty, submitters wait
 * (back-pressure). The queue owns every request; bios stay the submitter's.
 *
 * LOCKING: every field is guarded by the owning queue's lock, except what
 * the drive reads while the request is INFLIGHT (cmd, cmd_len, bio chain,
 * tag, gen), which nobody changes then, error, which the drive writes
 * before handing the request back, the drive's own fields (drive lock) and
 * pinned (atomic: set and cleared by the drive, read by the owner).
 */
#ifndef TAGDISK_REQUEST_H
#define TAGDISK_REQUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include "common/compiler.h"
#include "common/list.h"
#include "common/lock.h"
#include "common/rbtree.h"
#include "tagdisk/cdb.h"
#include "tagdisk/types.h"

#define TD_CMD_MAX     16  /* bytes in a pregenerated command */
#define TD_RQ_MAX_BIOS 256 /* bios (segments) merged into one request */
#define TD_TAG_NONE    (-1)

enum td_rq_state {
	TD_RQ_FREE,
	TD_RQ_QUEUED,	/* owned by the elevator */
	TD_RQ_DISPATCH, /* on the queue's dispatch list, waiting for prep */
	TD_RQ_INFLIGHT, /* tagged and handed to the drive */
	TD_RQ_ABORTED,	/* failed by a bounded drain while pinned: ends when unpinned */
};

enum td_rq_flags {
	TD_RQ_FUA = 1U << 0,	   /* from TD_BIO_FUA */
	TD_RQ_WRITE_TREE = 1U << 1, /* linked in the queue's in-flight write tree */
};

struct td_queue;
struct td_wlog_slot;

struct td_request {
	/* Hot while QUEUED: the sort key next to the sort node, one cache line. */
	struct td_rb_node rb_node;    /* elevator sort tree, while QUEUED */
	uint64_t sector;
	uint32_t nr_sectors;
	uint32_t nr_bios;
	enum td_op op;
	unsigned int flags; /* enum td_rq_flags */
	enum td_rq_state state;
	int tag;	    /* TD_TAG_NONE when untagged */

	struct td_list queuelist;     /* free list, dispatch list or in-flight list */
	struct td_list hash;	      /* merge hash on end sector, while QUEUED */
	struct td_list fhash;	      /* merge hash on start sector, while QUEUED */
	struct td_list fifo;	      /* elevator FIFO, while QUEUED */
	struct td_rb_node write_node; /* in-flight write tree, while INFLIGHT */
	struct td_list drive_list;    /* the drive's command lists; drive lock */

	struct td_queue *q;
	struct td_bio *bio; /* first bio; chained through bio->next */
	struct td_bio *biotail;

	uint8_t cmd[TD_CMD_MAX]; /* written by prep */
	uint8_t cmd_len;
	/*
	 * A stale backend call may use the data buffers (see above); the
	 * drive's. Here and below, in what was padding, so that the request
	 * stays five cache lines.
	 */
	atomic_bool pinned;
	/* The drive's decode of cmd (below): 0 or a negative errno; drive lock. */
	int16_t drive_decode_err;
	uint32_t retries;	 /* times requeued by a reset */
	int error;		 /* 0 or negative errno, set when it completes */
	unsigned int gen;	 /* queue reset generation when dispatched */
	void *elv_owner;	 /* elevator instance it was queued under */

	uint64_t seq;		/* submission order, unique per queue */
	int32_t pid;		/* pid of the first bio */
	unsigned int drive_seq; /* the drive's quiesce sequence when it accepted it; drive lock */
	uint64_t start_ns;	/* allocated ("G"), for latency */
	uint64_t fifo_time_ns;	/* elevator deadline (coarse clock) */
	uint64_t dispatch_ns;	/* tag started ("D"), for timeouts */

	/* The drive's own decode of cmd, made when it accepts the command; drive lock. */
	struct td_cdb_cmd drive_cmd;
	uint64_t drive_due_ns;	/* an inline drive's delayed command: when it starts */

	/* A flush: its write log entry, reserved when it is first dispatched (tagdisk/wlog.h). */
	struct td_wlog_slot *wlog_flush;
} td_cacheline_aligned;

/* Return: true while a stale backend call may use @rq's data buffers. */
static inline bool td_rq_pinned(struct td_request *rq)
{
	/* Acquire: pairs with the drive's release when the call has returned. */
	return atomic_load_explicit(&rq->pinned, memory_order_acquire);
}

/* Return: sector just past the end of @rq. */
static inline uint64_t td_rq_end_sector(const struct td_request *rq)
{
	return rq->sector + rq->nr_sectors;
}

/* Return: bytes transferred by @rq (0 for flush, discard, write zeroes). */
static inline uint64_t td_rq_data_bytes(const struct td_request *rq)
{
	return td_op_has_data(rq->op) ? (uint64_t)rq->nr_sectors << TD_SECTOR_SHIFT : 0;
}

/* Reset @rq from FREE to QUEUED holding only @bio. */
void td_rq_init_from_bio(struct td_request *rq, struct td_bio *bio) td_nonnull(1, 2);

/*
 * Return: true when @bio may join @rq: same operation and FUA flag, a
 * read or write, @rq still QUEUED, the result within @max_sectors and
 * TD_RQ_MAX_BIOS. Contiguity is the caller's business.
 */
bool td_rq_bio_mergeable(const struct td_request *rq, const struct td_bio *bio,
			 uint32_t max_sectors) td_nonnull(1, 2);

/* Append @bio (which starts at td_rq_end_sector(@rq)) to @rq. */
void td_rq_back_merge(struct td_request *rq, struct td_bio *bio) td_nonnull(1, 2);
/* Prepend @bio (which ends at @rq->sector) to @rq. */
void td_rq_front_merge(struct td_request *rq, struct td_bio *bio) td_nonnull(1, 2);

/*
 * Return: true when @next may be appended to @rq (both QUEUED, @next starting
 * where @rq ends, same operation and flags, within the limits).
 */
bool td_rq_rq_mergeable(const struct td_request *rq, const struct td_request *next,
			uint32_t max_sectors) td_nonnull(1, 2);
/* Move @next's bios to the end of @rq; @next is left empty for the caller to free. */
void td_rq_merge_requests(struct td_request *rq, struct td_request *next) td_nonnull(1, 2);

/*
 * Fill @iov with @rq's data buffers, one entry per bio.
 * Return: the number of entries (at most TD_RQ_MAX_BIOS).
 */
int td_rq_fill_iov(const struct td_request *rq, struct iovec *iov) td_nonnull(1, 2);

/*
 * The fixed pool of requests of one queue.
 * LOCKING: all functions expect the owning queue's lock (@lock) held.
 */
struct td_rq_pool {
	struct td_request *rqs;
	uint32_t nr;
	uint32_t nr_free;
	uint32_t nr_waiting; /* submitters blocked in td_rq_pool_get_locked() */
	struct td_list free;
	struct td_cond wait;
};

/* Return: 0, or -ENOMEM. */
int td_rq_pool_init(struct td_rq_pool *pool, struct td_queue *q, uint32_t nr) td_nonnull(1);
/* Every request must be free. */
void td_rq_pool_destroy(struct td_rq_pool *pool) td_nonnull(1);
/*
 * Take a free request, waiting (and releasing @lock meanwhile) while there is
 * none. Return: the request, state FREE.
 */
struct td_request *td_rq_pool_get_locked(struct td_rq_pool *pool, struct td_mutex *lock)
	td_nonnull(1, 2);
/* Return @rq to the pool and wake one waiter. */
void td_rq_pool_put_locked(struct td_rq_pool *pool, struct td_request *rq) td_nonnull(1, 2);

#endif /* TAGDISK_REQUEST_H */
