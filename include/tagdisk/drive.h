/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * drive.h - the drive: threads that execute tagged commands on a backend.
 *
 * The queue hands the drive tagged requests; the drive decodes each
 * request's command bytes (tagdisk/cdb.h), never its fields, and performs
 * the transfer on its backend with the request's bios as the scatter/gather
 * list. It may serve outstanding commands in any order and completes them in
 * batches through the completion function the queue attached.
 *
 * Execution:
 *  - workers > 0, model none: that many worker threads take commands in
 *    arrival order.
 *  - workers = 0, model none: whoever runs the queue executes the commands
 *    it dispatched (td_drive_run_inline), as a null_blk in "complete inline"
 *    mode does; except that a thread which must never wait for a backend
 *    call (the queue's td-kblockd) hands them to the drive's own thread
 *    (td_drive_hand_off), and that a command with an injected latency does
 *    not hold the thread that runs it: the drive's thread (td-drive-timer)
 *    executes and completes it when its time comes, as null_blk's timer
 *    completion does (irqmode=2). So the queue depth is never capped by the
 *    number of threads that submit.
 *  - model ssd: workers threads (at least 1), each command costs a fixed
 *    latency plus its transfer time, in real time.
 *  - model hdd: one actuator thread; the drive keeps a head position and,
 *    among its outstanding commands, serves the one with the shortest
 *    positioning time (seek from head distance + rotational latency) first,
 *    then sleeps for seek + rotation + transfer + overhead in real time.
 * With threads (workers, ssd, hdd), submitting never executes anything: the
 * submitter goes on, and every command the queue dispatched waits at the
 * drive, in flight.
 *
 * Write caching: writeback and writethrough go straight to the backend
 * (writethrough makes every write FUA); volatile puts a td_wcache
 * (tagdisk/wcache.h) between the commands and the backend.
 *
 * The latency models are ops tables (src/engine/drive_int.h), one file each
 * (model_hdd.c, model_ssd.c). A command waiting out a modelled or injected
 * delay never takes the wake-up meant for an idle worker: with N threads, N
 * delayed commands are delayed at once.
 *
 * Faults (tagdisk/inject.h) are applied when a command starts: an injected
 * error completes it with -EIO without touching the backend, a hang makes the
 * drive hold it forever (until a reset), latency delays it.
 *
 * Asynchronous backends (rbd, nbd; tagdisk/backend.h): a worker submits the
 * command as one backend operation and goes on; the backend's completion
 * completes it. Reads and writes travel in a bounce buffer the operation
 * owns. workers = 0 becomes one worker. With a volatile cache, or model hdd
 * (one actuator, one command at a time), calls are synchronous instead.
 *
 * Reset support: td_drive_quiesce() drops every command not yet started
 * (held, hung or delayed ones included) and waits until every executor has
 * let go of its commands, but never for a backend call: neither an
 * operation submitted to an asynchronous backend nor a synchronous call in
 * progress (pwrite on a frozen file system, librbd called synchronously)
 * can be taken back, so each becomes stale, its command is the caller's
 * again at once, and the drive starts no command at all until every stale
 * operation and call has returned (the fence), so an old write can never
 * land after a newer one, whatever the overlap. A stale result completes
 * nothing. Fencing everything rather than the overlapping ranges keeps the
 * rule obviously right, and costs little: what a reset leaves behind is
 * usually stalled together. td_drive_get_status() counts stale calls and
 * td_drive_get_stale_calls() lists them.
 *
 * Pins: a stale synchronous call may still read or write its request's data
 * buffers, so until it returns that request carries rq->pinned
 * (tagdisk/request.h), and its owner must not end it (no completion, no
 * error): the buffers would be reused under the call. When the call
 * returns, the drive clears the pin and calls the unpin function.
 * (Asynchronous operations use bounce buffers of their own and pin nothing.)
 *
 * td_drive_abandon() is the same as td_drive_quiesce(), for a bounded drain
 * that fails what it takes back.
 *
 * LOCKING: the drive lock is taken after the queue lock (tagdisk/queue.h).
 * td_drive_submit_locked() is called with the submitting queue's lock held;
 * the completion and unpin functions are called with no drive lock held, and
 * may take the queue lock. td_drive_quiesce() and td_drive_abandon() wait for
 * completion functions to return, so call them with no queue lock held.
 */
#ifndef TAGDISK_DRIVE_H
#define TAGDISK_DRIVE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include "common/compiler.h"
#include "common/list.h"
#include "tagdisk/backend.h"
#include "tagdisk/request.h"
#include "tagdisk/types.h"

enum td_drive_model {
	TD_MODEL_NONE,
	TD_MODEL_HDD,
	TD_MODEL_SSD,
};

enum td_write_cache {
	TD_WC_WRITEBACK,    /* a write completes when the image has it; flush = fdatasync */
	TD_WC_WRITETHROUGH, /* every write is made durable before it completes */
	TD_WC_VOLATILE,	    /* writes complete into the drive's cache; flush writes it back */
};

struct td_hdd_params {
	uint32_t rpm;		    /* spindle speed (default 7200) */
	uint32_t seek_track_us;	    /* track-to-track seek (default 500) */
	uint32_t seek_full_us;	    /* full-stroke seek (default 12000) */
	uint32_t transfer_mb_s;	    /* media rate, 10^6 bytes/s (default 150) */
	uint32_t overhead_us;	    /* per-command controller time (default 50) */
	uint32_t sectors_per_track; /* 512-byte sectors per track (default 2048) */
};

struct td_ssd_params {
	uint32_t latency_us;	/* per command (default 80) */
	uint32_t transfer_mb_s; /* 10^6 bytes/s (default 2000) */
};

struct td_drive_params {
	struct td_backend backend; /* owned by the drive from now on */
	uint32_t logical_block_size;
	uint64_t capacity_bytes;
	unsigned int workers;
	enum td_drive_model model;
	struct td_hdd_params hdd;
	struct td_ssd_params ssd;
	enum td_write_cache write_cache;
	uint64_t cache_size; /* bytes, for TD_WC_VOLATILE */
	uint64_t seed;	     /* fault injection's random generator */
};

/* Fill @p with defaults: 2 workers, model none, writeback, 512-byte blocks. */
void td_drive_params_default(struct td_drive_params *p) td_nonnull(1);

struct td_drive;
struct td_inject;

/*
 * The completion function: @done lists requests (through ->drive_list), each
 * with ->error set. Called with no drive lock held; must unlink every entry,
 * and be done with all of them before it does anything that may execute
 * commands of this drive in the calling thread (run a queue with an inline
 * drive): such a nested run may park in a backend call that a reset leaves
 * behind, and the reset then requeues whatever this call still holds.
 */
typedef void (*td_drive_complete_fn)(void *ctx, struct td_list *done);

/*
 * The unpin function: the stale call that pinned @rq has returned, and the
 * pin is cleared (@rq may be ended now, if its owner was waiting to). Called
 * once per pin, with no drive lock held, from the thread that made the call;
 * @rq may have been requeued, dispatched again or ended meanwhile.
 */
typedef void (*td_drive_unpin_fn)(void *ctx, struct td_request *rq);

/* Return: a started drive, or NULL with a negative errno in *@err. */
struct td_drive *td_drive_create(const struct td_drive_params *p, int *err) td_nonnull(1, 2);
/*
 * Stop the threads and free the drive and its backend. No command may be outstanding.
 * Return: the bytes a volatile cache still held and lost (td_wcache_destroy()), else 0.
 */
uint64_t td_drive_destroy(struct td_drive *d) td_nonnull(1);

/*
 * Attach the queue's completion and unpin functions (@unpin may be NULL);
 * once, before the first submit.
 */
void td_drive_attach(struct td_drive *d, td_drive_complete_fn fn, td_drive_unpin_fn unpin,
		     void *ctx) td_nonnull(1, 2);

/*
 * Hand the requests on @rqs (linked through ->drive_list) to the drive.
 * Called with the submitting queue's lock held. A drive with threads queues
 * them and empties @rqs. An inline drive leaves them on @rqs, counted as
 * executing: the caller must pass @rqs to td_drive_run_inline() as soon as it
 * has dropped its lock.
 * Return: true when the caller must run @rqs inline.
 */
bool td_drive_submit_locked(struct td_drive *d, struct td_list *rqs) td_nonnull(1, 2);

/* Return: true when the drive has no threads (workers = 0, model none). */
bool td_drive_is_inline(const struct td_drive *d) td_nonnull(1);

/*
 * Inline drives: execute and complete the commands td_drive_submit_locked()
 * left on @rqs, in the calling thread; @rqs becomes empty. Commands the
 * fence holds, and those an injected latency delays, go to the drive's own
 * thread instead. Call with no lock held. Return: the number executed (not
 * counting those a reset took back, a hang holds or the drive's thread took).
 */
unsigned int td_drive_run_inline(struct td_drive *d, struct td_list *rqs) td_nonnull(1, 2);

/*
 * Inline drives: give the commands td_drive_submit_locked() left on @rqs to
 * the drive's own thread, which executes them; @rqs becomes empty. For a
 * caller that must never wait for a backend call. Call with no lock held.
 */
void td_drive_hand_off(struct td_drive *d, struct td_list *rqs) td_nonnull(1, 2);

/*
 * Take every command back: drop those not yet started, make the backend
 * operations and calls in progress stale (the fence holds every command from
 * now on until they have returned; their requests are pinned), and wait
 * until every other executor has let go of its commands and every completion
 * call has returned. Never waits for a backend call. The commands are the
 * caller's again, pinned ones included.
 * Call with no lock held. Return: the commands dropped or left in a backend
 * call (with the whole batch their thread held).
 */
unsigned int td_drive_quiesce(struct td_drive *d) td_nonnull(1);

/* The same as td_drive_quiesce(), for a bounded drain. */
unsigned int td_drive_abandon(struct td_drive *d) td_nonnull(1);

/*
 * Execute the @cdb_len command bytes at @cdb synchronously in the calling
 * thread with @bio as the data (bio mode). Faults apply except hangs.
 * Return: 0 or a negative errno.
 */
int td_drive_execute_sync(struct td_drive *d, const uint8_t *cdb, unsigned int cdb_len,
			  struct td_bio *bio) td_nonnull(1, 2, 4);

/* Return: the drive's fault injector. */
struct td_inject *td_drive_inject(struct td_drive *d) td_nonnull(1);

struct td_drive_status {
	enum td_drive_model model;
	enum td_write_cache write_cache;
	unsigned int workers;
	unsigned int queued;	  /* commands waiting at the drive (held ones included) */
	unsigned int executing;	  /* commands being executed */
	unsigned int delayed;	  /* of those, the ones waiting out a modelled or injected delay */
	unsigned int hung;	  /* commands held by an injected hang */
	uint64_t commands;	  /* executed since start */
	unsigned int backend_ops; /* asynchronous backend operations outstanding */
	unsigned int stale_ops;	  /* of those sent before the last reset: fenced */
	unsigned int stale_calls; /* synchronous backend calls a reset left behind: fenced */
	uint64_t fences;	  /* resets that left stale operations or calls behind */
	uint64_t seeks;		  /* hdd: head movements */
	uint64_t seek_distance;	  /* hdd: sum of head movements, in sectors */
	uint64_t head_sector;	  /* hdd: where the head is */
};

/*
 * Snapshot the drive's counters. executing leaves out the commands of threads
 * whose call a reset left behind: they are the queue's again.
 */
void td_drive_get_status(struct td_drive *d, struct td_drive_status *st) td_nonnull(1, 2);

/* A synchronous backend call a reset left behind (a stale call). */
struct td_drive_call {
	int32_t tid;	     /* the thread inside the call */
	enum td_op op;	     /* what the command asked for */
	uint64_t sector;     /* its first sector (512 bytes) */
	uint32_t nr_sectors; /* and its length */
	uint64_t age_us;     /* since the call started (a scheduler tick's resolution) */
};

/*
 * Copy up to @max stale calls into @out (may be NULL when @max is 0).
 * Return: the number of stale calls (may exceed @max).
 */
unsigned int td_drive_get_stale_calls(struct td_drive *d, struct td_drive_call *out,
				      unsigned int max) td_nonnull(1);

struct td_powerfail_result;
struct td_wcache_stats;

/*
 * write_cache = volatile: lose power (see tagdisk/wcache.h), keeping @keep_pct
 * percent of the unflushed cache lines at random (seeded by @seed).
 * Return: 0, -EOPNOTSUPP without a volatile cache, -EINVAL for @keep_pct > 100.
 */
int td_drive_powerfail(struct td_drive *d, unsigned int keep_pct, uint64_t seed,
		       struct td_powerfail_result *res) td_nonnull(1, 4);

/* Copy the volatile cache's counters into @st. Return: false without a volatile cache. */
bool td_drive_cache_stats(struct td_drive *d, struct td_wcache_stats *st) td_nonnull(1, 2);

struct td_wcache;

/* Return: the volatile write cache (tagdisk/wcache.h), NULL without one. */
struct td_wcache *td_drive_wcache(struct td_drive *d) td_nonnull(1);

/* Return: static names ("none", "hdd", "ssd"; "writeback", "writethrough", "volatile"). */
const char *td_drive_model_name(enum td_drive_model m);
const char *td_write_cache_name(enum td_write_cache wc);

#endif /* TAGDISK_DRIVE_H */
