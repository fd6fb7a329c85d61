/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * queue.h - the request queue: where bios become requests and reach the drive.
 *
 * Three modes: two as in the 2.6 block layer, and the multi-queue one Linux
 * grew from them:
 *
 *  - rq:  td_queue_submit() merges the bio into a queued request or gets a
 *         new one from the pool (waiting when all nr_requests are in use),
 *         and inserts it into the elevator; the queue is then run: requests
 *         move from the elevator to the dispatch list, prep turns the head of
 *         the dispatch list into a tagged command, and the drive gets it.
 *         The drive's completion ends the tag, then ends the bios.
 *  - bio: td_queue_submit() calls the make_request function, which sends the
 *         bio straight to the drive in the caller's thread: no elevator, no
 *         requests, no tags (the ramdisk path).
 *  - mq:  td_queue_submit() puts the bio on the software queue of the CPU
 *         the submitter runs on (one per possible CPU, each with its own
 *         lock) and runs the hardware context that CPU maps to. A hardware
 *         context (hctx, nr_hw_queues of them) is a dispatch queue of its
 *         own: its lock, request pool, scheduler ("none" or "mq-deadline"),
 *         dispatch and in-flight lists and td-kblockd/td-timer threads. All
 *         hctxs draw from one tag map, the tag set, and share the drive; a
 *         completion takes only the lock of its request's hctx. The rules
 *         below hold per hctx; a flush orders the requests of its hctx (as
 *         in Linux, it makes durable what completed before it was issued),
 *         and a reset, a timeout, a depth or scheduler change or a bounded
 *         drain acts on the whole tag set at once (see queue_mq.c).
 *
 * In both modes a make_request function set with td_queue_set_make_request()
 * sees each bio first; it may complete it itself (return 0) or change it
 * (for example remap its sector) and pass it on (return 1), like a stacking
 * driver. td_queue_set_window() installs one that exposes a window of the
 * disk.
 *
 * Ordering rules the queue enforces:
 *  - A flush is a barrier: when it arrives, every request queued before it
 *    moves to the dispatch list ahead of it; it is dispatched once nothing is
 *    in flight, and nothing is dispatched while it is in flight.
 *  - Two writes (write, discard, write zeroes) whose ranges overlap are never
 *    in flight at the same time; the later one waits at the head of the
 *    dispatch list. So a request requeued by a reset can never overwrite an
 *    acknowledged newer write.
 *  - A reset (td_queue_reset) stops dispatching, takes every command back
 *    from the drive (the results of those executing are discarded; a backend
 *    call in progress is not waited for but left behind, stale, and fences
 *    the drive until it returns: tagdisk/drive.h), invalidates every tag and
 *    puts each in-flight request back at the head of the dispatch list in
 *    its dispatch order. Then dispatching resumes, in td-kblockd.
 *  - Retries: only a command's own timeout uses one of its max_retries. A
 *    reset after a command timeout charges a retry to each command older than
 *    command_timeout_ms (the oldest at least); one that has used more than
 *    max_retries fails with -EIO instead of being requeued. The other
 *    commands, and every command of a reset asked for with td_queue_reset(q,
 *    false), are requeued without charge.
 *  - A request pinned by a stale backend call (tagdisk/request.h) is never
 *    ended while pinned: not at max_retries (it is requeued), not by a
 *    bounded drain (it is failed once unpinned). So a hung medium makes
 *    reads and writes wait, as a real disk's would, while the command
 *    timeouts keep firing and being counted.
 *
 * Threads. In rq mode the queue has two of its own: td-timer (command
 * timeouts) and td-kblockd, which runs the queue for callers that must not
 * execute I/O. With an inline drive (tagdisk/drive.h) whoever runs the queue
 * executes the commands it dispatches, so only submitters (td_queue_submit*,
 * td_queue_run) and the drive's completion path run it in their own thread;
 * resets, timeouts, elevator and depth changes hand the run to td-kblockd
 * (td_queue_kick), which hands what it dispatches to the drive's own thread
 * (td_drive_hand_off). The admin socket, the timer and td-kblockd never wait
 * for a command, nor for a backend call. A run asked for by a completion
 * inside such a run (a freed tag kicking the other hctxs, say) is done by
 * that thread once its current run ends, never nested in it; so an end_io
 * must not wait for other I/O.
 *
 * LOCK ORDER (the whole program's; other headers refer here):
 *     admin / config  ->  queue reset_lock  ->  queue lock  ->  drive lock
 *     ->  inject lock, trace lock, tag map user lock, write log lock.
 * In mq mode "queue lock" is an hctx's lock; a thread holding several takes
 * them in hctx index order (only resets and aborts do). After an hctx lock
 * and before the drive lock come a software queue's lock and the mq queue's
 * write lock (the writes in flight of every hctx), never both at once.
 * The range lock (tagdisk/rangelock.h) is taken and released with none of
 * these held, and a thread holds at most one range at a time.
 * Stats counters and the tag bitmap are lock-free atomics. Nothing replies to
 * FUSE, blocks on I/O or writes a socket with the queue lock held: bio
 * completions run with no tagdisk lock held.
 *
 * Lifetime: the creator owns the queue and destroys it after td_queue_drain()
 * or td_queue_drain_timeout(). The queue holds a reference on its tag map and
 * borrows the drive, which must outlive it.
 */
#ifndef TAGDISK_QUEUE_H
#define TAGDISK_QUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include "common/clock.h"
#include "common/compiler.h"
#include "tagdisk/elevator.h"
#include "tagdisk/prep.h"
#include "tagdisk/request.h"
#include "tagdisk/types.h"

struct td_drive;
struct td_tag_map;
struct td_stats;
struct td_trace;
struct td_rangelock;
struct td_wlog;

enum td_queue_mode {
	TD_MODE_RQ,
	TD_MODE_BIO,
	TD_MODE_MQ,
};

/* Most hardware contexts an mq queue may have. */
#define TD_QUEUE_HW_MAX 256

struct td_queue_params {
	enum td_queue_mode mode;
	uint64_t capacity_sectors;   /* size of the disk in 512-byte sectors */
	uint32_t logical_block_size; /* 512 or 4096 */
	uint32_t max_sectors;	     /* largest request, in sectors (default 2048) */
	uint32_t nr_requests;	     /* request pool size (default 128) */
	const char *elevator;	     /* "noop", "deadline" (default); mq: "none", "mq-deadline" */
	unsigned int nr_hw_queues;   /* mq: hardware contexts, 0 (default): one per CPU */
	struct td_elv_tunables tunables;
	unsigned int depth;	      /* tags when @tags is NULL (default 32) */
	struct td_tag_map *tags;      /* share this map (a reference is taken), or NULL */
	uint32_t command_timeout_ms;  /* reset when a command is older; 0: never */
	uint32_t max_retries;	      /* requeues before -EIO (default 5) */
	struct td_drive *drive;	      /* borrowed; required */
	struct td_trace *trace;	      /* borrowed; may be NULL */
	struct td_wlog *wlog;	      /* the write log (tagdisk/wlog.h); borrowed; may be NULL */
	struct td_clock clock;	      /* zeroed: CLOCK_MONOTONIC */
};

/* Fill @p with the defaults above (mode rq, deadline, depth 32, ...). */
void td_queue_params_default(struct td_queue_params *p) td_nonnull(1);

struct td_queue;
/* A stacking make_request function. Return: 0 when it ended the bio, 1 to pass it on. */
typedef int (*td_make_request_fn)(struct td_queue *q, struct td_bio *bio, void *data);

/*
 * Create a queue. In rq mode starts its threads, td-timer and td-kblockd.
 * Return: the queue, or NULL with a negative errno in *@err (-EINVAL for bad
 * parameters, -ENOMEM, or pthread_create()'s error).
 */
struct td_queue *td_queue_create(const struct td_queue_params *p, int *err) td_nonnull(1, 2);

/*
 * Stop @q's threads and destroy it; it must be drained (no bio outstanding).
 * After td_queue_drain_timeout() abandoned commands with an inline drive,
 * td-kblockd may still be in a backend call: this waits for it to return.
 */
void td_queue_destroy(struct td_queue *q) td_nonnull(1);

/*
 * Submit one bio. In rq mode may block while the request pool is empty.
 * Call with no tagdisk lock held; end_io may run before this returns.
 */
void td_queue_submit(struct td_queue *q, struct td_bio *bio) td_nonnull(1, 2);

/*
 * Submit the bios chained through ->next as one batch (plugging): they are
 * merged and inserted under one hold of the queue lock, then the queue runs
 * once. Same blocking rules as td_queue_submit().
 */
void td_queue_submit_list(struct td_queue *q, struct td_bio *list) td_nonnull(1, 2);

/*
 * Dispatch whatever can be dispatched now. With an inline drive the commands
 * dispatched are executed in the calling thread before it returns: for
 * submitters only. Called from a completion of such a command (an end_io, or
 * a tag map kick), it returns at once and the run happens when the run that
 * is executing the command has finished, in the same thread: runs never nest.
 * Call with no tagdisk lock held.
 */
void td_queue_run(struct td_queue *q) td_nonnull(1);

/*
 * Have td-kblockd run @q soon, and return at once: for threads that must not
 * execute I/O (admin commands, timers). Several kicks before the run make one
 * run. No-op in bio mode. Takes the queue lock: call with no tagdisk lock held.
 */
void td_queue_kick(struct td_queue *q) td_nonnull(1);

/* Wait until every submitted bio has completed. Other threads may keep submitting. */
void td_queue_drain(struct td_queue *q) td_nonnull(1);

/*
 * Wait up to @timeout_ms (CLOCK_MONOTONIC) for every submitted bio to
 * complete. When the bound passes first (rq mode), fail every request still
 * queued or at the drive with -EIO: their tags are ended and their bios end
 * with -EIO in this thread; the drive abandons the commands it holds
 * (td_drive_abandon): a backend call in progress is left to return on its
 * own and its result is dropped, as a reset drops late results. A request
 * whose buffers such a call may still use (pinned) is counted as failed but
 * ends, with -EIO, only when the call returns, in the thread that made it.
 * One line is logged with the number failed. The queue is then dead for
 * good: nothing is dispatched, and every bio submitted later (a final flush,
 * say) fails at once with -EIO, so nothing can wait behind an abandoned
 * command. In bio mode the bios in progress belong to their submitters'
 * threads and cannot be failed: the queue only turns dead.
 *
 * A backend call still running keeps its executor and its pinned request:
 * td_drive_destroy() waits for it, and td_queue_destroy() needs every bio
 * ended, so a daemon that must exit anyway may skip them.
 *
 * LOCKING: call with no tagdisk lock held, from the queue's owner (not from a
 * completion: it waits for completion calls in progress to return). Takes the
 * queue lock and then the drive lock, never both at once; it does not take
 * the reset lock.
 * Return: 0 when everything completed in time; else the number of requests
 * failed; -ETIMEDOUT in bio mode when the bound passed.
 */
int td_queue_drain_timeout(struct td_queue *q, uint32_t timeout_ms) td_nonnull(1);

/*
 * Reset the drive and requeue (see above); td-kblockd dispatches the requeued
 * requests, this thread executes none of them. @timeout treats it as a
 * command timeout: it counts in the stats and charges a retry to the timed
 * out commands (with command_timeout_ms 0, to the oldest). Waits for
 * completion calls in progress, never for a backend call.
 * Return: the number of requests requeued (not counting those failed for
 * exceeding max_retries).
 */
unsigned int td_queue_reset(struct td_queue *q, bool timeout) td_nonnull(1);

/*
 * Return every tag of @q to the map and put the requests back at the head of
 * the dispatch list in dispatch order, as td_queue_reset() does after
 * quiescing the drive. It charges no retry (a timeout charges before calling
 * it). Call with the queue lock held and the drive quiesced.
 * Return: the number requeued; requests that have used more than max_retries
 * retries are moved to @failed (-EIO in ->error) instead.
 */
unsigned int td_queue_invalidate_tags_locked(struct td_queue *q, struct td_list *failed)
	td_nonnull(1, 2);

/*
 * Switch the elevator: drain the old one to the dispatch list, then install
 * @name; td-kblockd runs the queue afterwards. Call with no tagdisk lock held.
 * The names of the other mode map to their counterparts (rq: none -> noop,
 * mq-deadline -> deadline; mq: noop -> none, deadline -> mq-deadline), so a
 * configuration works in both. In mq mode every hctx switches.
 * Return: 0, -EINVAL for an unknown name (nothing changes), -ENOMEM.
 */
int td_queue_set_elevator(struct td_queue *q, const char *name) td_nonnull(1, 2);

/*
 * Resize the tag map to @depth; td-kblockd then runs every user of the map.
 * Call with no tagdisk lock held. Return: 0 or -EINVAL (1..TD_TAG_DEPTH_MAX).
 */
int td_queue_set_depth(struct td_queue *q, unsigned int depth) td_nonnull(1);

/* Replace the elevator tunables (read at every decision). */
void td_queue_set_tunables(struct td_queue *q, const struct td_elv_tunables *t) td_nonnull(1, 2);

/* Change the command timeout and retry limit; starts the timeout thread if needed. */
int td_queue_set_timeout(struct td_queue *q, uint32_t command_timeout_ms, uint32_t max_retries)
	td_nonnull(1);

/* Replace the prep function (NULL restores td_prep_default). Call before any I/O. */
void td_queue_set_prep(struct td_queue *q, td_prep_fn prep) td_nonnull(1);

/* Install a stacking make_request function (NULL removes it). Call before any I/O. */
void td_queue_set_make_request(struct td_queue *q, td_make_request_fn fn, void *data)
	td_nonnull(1);

/*
 * Expose only [@start, @start + @nr_sectors) of the disk, as sectors
 * [0, @nr_sectors): a make_request function that remaps each bio and passes
 * it on, failing bios outside the window with -EIO. Call before any I/O.
 * Return: 0, or -EINVAL when the window is not inside the disk or misaligned.
 */
int td_queue_set_window(struct td_queue *q, uint64_t start, uint64_t nr_sectors) td_nonnull(1);

/*
 * Start a tag for @rq (the 2.6 blk_queue_start_tag, usable from prep).
 * Queue lock held. Return: 0, or -EBUSY when no tag is free.
 */
int td_queue_start_tag(struct td_queue *q, struct td_request *rq) td_nonnull(1, 2);

/* Accessors for prep functions and the front end. */
/* Return: the size the queue exposes, in sectors (the window's, when one is set). */
uint64_t td_queue_capacity(const struct td_queue *q) td_nonnull(1);
/* Return: the size of the whole disk behind the queue, in sectors. */
uint64_t td_queue_physical_capacity(const struct td_queue *q) td_nonnull(1);
uint32_t td_queue_logical_block_size(const struct td_queue *q) td_nonnull(1);
uint32_t td_queue_max_sectors(const struct td_queue *q) td_nonnull(1);
enum td_queue_mode td_queue_mode(const struct td_queue *q) td_nonnull(1);
struct td_stats *td_queue_stats(struct td_queue *q) td_nonnull(1);
struct td_tag_map *td_queue_tag_map(struct td_queue *q) td_nonnull(1);
struct td_rangelock *td_queue_rangelock(struct td_queue *q) td_nonnull(1);
struct td_drive *td_queue_drive(struct td_queue *q) td_nonnull(1);

struct td_queue_status {
	enum td_queue_mode mode;
	char elevator[16];
	unsigned int depth;
	unsigned int tags_in_use;
	unsigned int in_flight;	   /* requests at the drive */
	unsigned int queued;	   /* requests in the elevator and on the dispatch list */
	unsigned int requests_used; /* requests taken from the pool */
	unsigned int nr_requests;
	uint32_t max_sectors;
	uint32_t command_timeout_ms;
	uint32_t max_retries;
	bool barrier_pending;	   /* a flush is waiting for, or holding, the queue */
	unsigned int nr_hw_queues; /* mq: hardware contexts; else 0 */
	struct td_elv_tunables tunables;
};

/* One hardware context of an mq queue. */
struct td_hctx_status {
	unsigned int queued;	/* requests in its scheduler and on its dispatch list */
	unsigned int in_flight; /* requests it has at the drive */
	uint64_t dispatched;	/* requests it sent to the drive since creation */
	uint64_t ctx_queued;	/* bios submitted on its CPUs since creation, queued or direct */
};

/*
 * Snapshot hardware context @index of @q (mq mode).
 * Return: 0, or -EINVAL when @q is not in mq mode or @index is out of range.
 */
int td_queue_get_hctx_status(struct td_queue *q, unsigned int index, struct td_hctx_status *st)
	td_nonnull(1, 3);

/* Take a consistent snapshot of @q's state. */
void td_queue_get_status(struct td_queue *q, struct td_queue_status *st) td_nonnull(1, 2);

/*
 * Return: the bios submitted to @q and not ended yet, wherever they are
 * (queued, at the drive, held back by a fence); an upper bound while they
 * move. No lock taken.
 */
uint64_t td_queue_bios_outstanding(struct td_queue *q) td_nonnull(1);

struct td_tag_info {
	int tag;
	int hctx; /* mq: the hardware context that dispatched it; else -1 */
	enum td_op op;
	uint64_t sector;
	uint32_t nr_sectors;
	uint64_t age_us; /* since dispatch */
	uint32_t retries;
	int32_t pid;
	uint8_t cmd[TD_CMD_MAX];
	uint8_t cmd_len;
};

/*
 * Copy up to @max outstanding tagged commands, oldest first, into @out.
 * Return: the number of outstanding commands (may exceed @max).
 */
unsigned int td_queue_get_tags(struct td_queue *q, struct td_tag_info *out, unsigned int max)
	td_nonnull(1);

#endif /* TAGDISK_QUEUE_H */
