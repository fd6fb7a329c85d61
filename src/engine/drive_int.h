/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * drive_int.h - what the drive core (drive.c) shares with its latency models
 * (model_hdd.c, model_ssd.c): the drive itself and the model ops table.
 *
 * A latency model decides two things for the drive's executor threads: which
 * pending command goes next, and how long it takes. It never executes I/O
 * and never sleeps; the core waits out the time it returns (interruptibly, so
 * a reset takes delayed commands back) and then executes the command.
 *
 * LOCKING: see the fields of struct td_drive; the lock order is written in
 * tagdisk/queue.h (the drive lock comes after the queue lock).
 */
#ifndef TAGDISK_DRIVE_INT_H
#define TAGDISK_DRIVE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "common/clock.h"
#include "common/compiler.h"
#include "common/list.h"
#include "common/lock.h"
#include "common/pcpu.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"

struct td_drive;
struct td_inject;
struct td_wcache;

/*
 * A latency model. Members are called through the wrappers in drive.c, which
 * check what they return. A NULL optional member means: no delay, oldest
 * command first, nothing to check, set up or report.
 */
struct td_drive_model_ops {
	const char *name;	 /* as in the configuration: "hdd" */
	const char *thread_name; /* the executor threads' name (at most 15 bytes) */
	/*
	 * Optional: check the model's parameters in @p before anything is made.
	 * Return: 0 or -EINVAL.
	 */
	int (*check)(const struct td_drive_params *p);
	/* Required: how many executor threads @p asks for (0: commands run inline). */
	unsigned int (*nr_threads)(const struct td_drive_params *p);
	/*
	 * Optional: set up the model's state (d->model_state) from @p, once, before
	 * any thread starts. Return: 0 or -ENOMEM. exit() undoes it.
	 */
	int (*init)(struct td_drive *d, const struct td_drive_params *p);
	void (*exit)(struct td_drive *d);
	/*
	 * Optional: choose the next command among d->pending (never empty) and set
	 * *@service_ns to its modelled service time. Drive lock held; must not
	 * sleep. The core unlinks the command. Return: an entry of d->pending.
	 */
	struct td_request *(*next_locked)(struct td_drive *d, uint64_t *service_ns);
	/* Optional: modelled service time of @c executed synchronously (bio mode). */
	uint64_t (*sync_ns)(const struct td_drive *d, const struct td_cdb_cmd *c);
	/* Optional: add the model's own figures to @st. Drive lock held. */
	void (*status_locked)(const struct td_drive *d, struct td_drive_status *st);
};

extern const struct td_drive_model_ops td_model_hdd;
extern const struct td_drive_model_ops td_model_ssd;

/*
 * d->cmds packs three counts of commands into one word, so that one atomic
 * read sees them consistently (status, quiesce and abandon read them
 * together):
 *   claimed  inline commands accepted by td_drive_submit_locked() whose
 *            runner has not yet let go of them;
 *   handed   of those, the ones handed to the completion function (their
 *            submitters may already have the answer);
 *   parked   commands whose executor is inside a backend call: a worker's
 *            one command, or an inline runner's whole batch (it holds them
 *            all while it waits).
 * An executor touches none of its commands after a parked stretch during
 * which the quiesce sequence moved (td_drive_abandon() may have given them
 * back to the queue).
 */
#define TD_DRIVE_CMDS_BITS 21
#define TD_DRIVE_CMDS_MASK ((1ULL << TD_DRIVE_CMDS_BITS) - 1)
#define TD_DRIVE_CLAIMED   1ULL
#define TD_DRIVE_HANDED	   (1ULL << TD_DRIVE_CMDS_BITS)
#define TD_DRIVE_PARKED	   (1ULL << (2 * TD_DRIVE_CMDS_BITS))

static inline unsigned int td_drive_cmds_claimed(uint64_t cmds)
{
	return (unsigned int)(cmds & TD_DRIVE_CMDS_MASK);
}

static inline unsigned int td_drive_cmds_handed(uint64_t cmds)
{
	return (unsigned int)((cmds >> TD_DRIVE_CMDS_BITS) & TD_DRIVE_CMDS_MASK);
}

static inline unsigned int td_drive_cmds_parked(uint64_t cmds)
{
	return (unsigned int)((cmds >> (2 * TD_DRIVE_CMDS_BITS)) & TD_DRIVE_CMDS_MASK);
}

struct td_drive {
	struct td_mutex lock;
	struct td_cond work_cond;  /* commands arrived, or stop: idle workers wait here */
	struct td_cond delay_cond; /* quiesce, abandon or stop: delayed commands wait here */
	struct td_cond idle_cond;  /* executing reached zero (or everything left is parked) */

	/* Fixed at creation. */
	struct td_backend be;
	uint32_t lbs;
	uint64_t capacity_bytes;
	unsigned int nr_threads;
	pthread_t *threads;
	enum td_drive_model model;
	const struct td_drive_model_ops *ops;
	void *model_state; /* the model's own; guarded by lock unless the model says otherwise */
	enum td_write_cache write_cache;
	struct td_inject *inject;
	struct td_wcache *wc; /* write_cache = volatile only */
	td_drive_complete_fn complete;
	void *complete_ctx;
	/*
	 * Workers submit to an asynchronous backend and go on (drive_exec.c):
	 * the backend is asynchronous, there is no volatile cache and the model
	 * is not the hdd's one actuator. Otherwise every backend call is
	 * synchronous (tagdisk/backend.h's wrappers).
	 */
	bool async;

	/* Guarded by lock. */
	struct td_list pending; /* accepted, not started, arrival order, via ->drive_list */
	struct td_list hung;	/* held by an injected hang */
	unsigned int nr_pending;
	unsigned int nr_hung;
	unsigned int nr_delayed; /* executing commands waiting out a delay */
	unsigned int executing;	 /* worker commands taken off pending, not yet off the books */
	bool stop;
	/*
	 * Asynchronous backend operations outstanding, by the quiesce sequence
	 * they were submitted at. A quiesce makes every current one stale: its
	 * request is the queue's again, but the operation cannot be taken back.
	 * While any is stale, workers start nothing (the fence).
	 */
	unsigned int ops_current;
	unsigned int ops_stale;
	uint64_t fences; /* quiesces that left stale operations behind */

	/*
	 * Inline claims, hand-overs and parked executors (see above); no lock.
	 * Written by every inline batch: a line of its own.
	 */
	_Atomic uint64_t cmds td_cacheline_aligned;
	/* Worker commands handed to the completion function, still in executing. */
	_Atomic unsigned int completing;
	/* Read by every command and written only by quiesces: off the cmds line. */
	_Atomic unsigned int quiesce_seq td_cacheline_aligned; /* bumped under lock */
	_Atomic unsigned int quiescing; /* quiesce or abandon waiting; changed under lock */

	/* Commands executed, per CPU: every executor adds, status sums. */
	struct td_pcpu_counter commands;
};

/*
 * Who is executing, for a backend call: the @nr commands the executor holds
 * (its one command, or an inline runner's batch) and the quiesce sequence at
 * which the drive accepted them.
 */
struct td_drive_park {
	unsigned int nr;
	unsigned int seq;
	bool abandoned; /* out: the commands are the queue's again; touch none of them */
};

/*
 * drive_exec.c: execute @c with @bios as the data, in the calling thread, with
 * no drive lock held. With @park (NULL for bio mode, which nothing takes
 * back), the executor is parked for the backend call only, everything it
 * needs from the request being read before; when park->abandoned is set on
 * return, no call was made or its result is void, and the caller must not
 * touch the commands it held again.
 * Return: 0 or a negative errno.
 */
int td_drive_exec(struct td_drive *d, const struct td_cdb_cmd *c, struct td_bio *bios,
		  struct td_drive_park *park) td_nonnull(1, 2);

/*
 * drive_exec.c, asynchronous backends: submit @rq's command, taken off
 * pending at quiesce sequence @seq and still counted in d->executing, as one
 * backend operation, with no drive lock held. Reads and writes go through a
 * bounce buffer the operation owns, so a stale operation never touches the
 * request's buffers. The operation's completion completes @rq through the
 * queue's completion function, or, when a quiesce came in between, is
 * dropped as stale.
 * Return: true when @rq now belongs to the operation (submitted, or
 * completed with an error), false when a quiesce took it back first.
 */
bool td_drive_exec_async(struct td_drive *d, struct td_request *rq, unsigned int seq)
	td_nonnull(1, 2);

/* Return: the first sector @c addresses. */
static inline uint64_t td_drive_cmd_sector(const struct td_drive *d, const struct td_cdb_cmd *c)
{
	return c->lba * (d->lbs >> TD_SECTOR_SHIFT);
}

/* Return: the bytes @c transfers (0 for flush, discard and write zeroes). */
static inline uint64_t td_drive_cmd_bytes(const struct td_drive *d, const struct td_cdb_cmd *c)
{
	return td_op_has_data(c->op) ? (uint64_t)c->nr_blocks * d->lbs : 0;
}

/* Return: how long @bytes take at @mb_s (10^6 bytes per second), in nanoseconds. */
static inline uint64_t td_drive_transfer_ns(uint64_t bytes, uint32_t mb_s)
{
	return bytes * TD_NSEC_PER_USEC / mb_s;
}

#endif /* TAGDISK_DRIVE_INT_H */
