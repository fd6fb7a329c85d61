/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * drive_int.h - what the drive's files share: the drive itself, the executor
 * slots, the model ops table, and the functions the core (drive.c), the
 * executors (drive_run.c), the backend calls (drive_exec.c) and the taking
 * back (drive_quiesce.c) call in one another; and what the latency models
 * (model_hdd.c, model_ssd.c) see.
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
 * d->cmds packs two counts of inline commands into one word, so that one
 * atomic read sees them consistently (status and quiesce read them together):
 *   claimed  inline commands accepted by td_drive_submit_locked() whose
 *            runner has not yet let go of them;
 *   handed   of those, the ones handed to the completion function (their
 *            submitters may already have the answer).
 */
#define TD_DRIVE_CMDS_BITS 32
#define TD_DRIVE_CMDS_MASK ((1ULL << TD_DRIVE_CMDS_BITS) - 1)
#define TD_DRIVE_CLAIMED   1ULL
#define TD_DRIVE_HANDED	   (1ULL << TD_DRIVE_CMDS_BITS)

static inline unsigned int td_drive_cmds_claimed(uint64_t cmds)
{
	return (unsigned int)(cmds & TD_DRIVE_CMDS_MASK);
}

static inline unsigned int td_drive_cmds_handed(uint64_t cmds)
{
	return (unsigned int)((cmds >> TD_DRIVE_CMDS_BITS) & TD_DRIVE_CMDS_MASK);
}

/*
 * An executor's slot (drive_quiesce.c): one per thread that executes
 * commands on the drive (an inline runner, a worker, the inline drive's
 * timer thread), made the first time it does and kept until the drive is
 * destroyed. It says whether the thread is inside a backend call, for which
 * command and since when, and how many commands the thread holds meanwhile,
 * so that a quiesce can leave a call behind instead of waiting for it.
 *
 * The owner writes every field but the last two, with no lock, and the
 * others read them only once they have seen ->parked set (seq_cst, see
 * park()); an owner whose call was left behind takes the drive lock before
 * it changes anything again.
 */
struct td_drive_slot {
	struct td_list link;  /* d->slots; drive lock */
	pthread_t thread;     /* the owner; fixed */
	int32_t tid;	      /* the owner's thread id, for status; fixed */
	unsigned int held;    /* commands the owner holds now, nested runs added up */
	/* The call, while parked. */
	struct td_request *rq;	/* the command whose buffers the call uses */
	unsigned int seq;	/* the quiesce sequence its command was accepted at */
	enum td_op op;
	uint64_t sector;
	uint32_t nr_sectors;
	uint64_t start_ns;	/* CLOCK_MONOTONIC_COARSE */
	_Atomic bool parked;	/* inside a backend call */
	/* Guarded by the drive lock. */
	bool stale;		 /* a quiesce left the call behind: the fence waits for it */
	unsigned int stale_held; /* ->held when it became stale */
};

struct td_drive {
	struct td_mutex lock;
	struct td_cond work_cond;  /* commands arrived, the fence lifted, or stop: idle executors */
	struct td_cond delay_cond; /* quiesce, abandon or stop: delayed commands wait here */
	struct td_cond idle_cond;  /* an executor let go of commands (a quiesce waits) */

	/* Fixed at creation. */
	uint64_t id; /* unique in the process: the key of the executors' slot caches */
	struct td_backend be;
	uint32_t lbs;
	uint64_t capacity_bytes;
	unsigned int nr_threads; /* executor threads: 0 for an inline drive */
	pthread_t *threads;
	pthread_t timer; /* an inline drive's own thread (timer_started) */
	bool timer_started;
	enum td_drive_model model;
	const struct td_drive_model_ops *ops;
	void *model_state; /* the model's own; guarded by lock unless the model says otherwise */
	enum td_write_cache write_cache;
	struct td_inject *inject;
	struct td_wcache *wc; /* write_cache = volatile only */
	td_drive_complete_fn complete;
	td_drive_unpin_fn unpin; /* may be NULL */
	void *complete_ctx;
	/*
	 * Workers submit to an asynchronous backend and go on (drive_exec.c):
	 * the backend is asynchronous, there is no volatile cache and the model
	 * is not the hdd's one actuator. Otherwise every backend call is
	 * synchronous (tagdisk/backend.h's wrappers).
	 */
	bool async;
	/*
	 * Executors park around synchronous backend calls: every backend but
	 * those whose calls only touch memory (a volatile cache may write back
	 * to anything, so with one they park too). Without parking, no slot.
	 */
	bool parks;

	/* Guarded by lock. */
	struct td_list pending; /* accepted, not started, arrival order, via ->drive_list */
	struct td_list hung;	/* held by an injected hang */
	struct td_list timed;	/* inline drive: delayed, by ->drive_due_ns (the timer thread) */
	unsigned int nr_pending;
	unsigned int nr_hung;
	unsigned int nr_timed;
	unsigned int nr_delayed; /* executing commands waiting out a delay */
	unsigned int executing;	 /* executor commands taken off a list, not yet off the books */
	bool stop;
	/*
	 * Asynchronous backend operations outstanding, by the quiesce sequence
	 * they were submitted at. A quiesce makes every current one stale: its
	 * request is the queue's again, but the operation cannot be taken back.
	 */
	unsigned int ops_current;
	unsigned int ops_stale;
	/*
	 * Synchronous backend calls a quiesce left behind (slots marked stale),
	 * and the commands their threads hold (stale_held), which a quiesce does
	 * not wait for.
	 */
	struct td_list slots; /* struct td_drive_slot, via ->link */
	unsigned int calls_stale;
	unsigned int stale_held;
	uint64_t fences; /* quiesces that left stale operations or calls behind */

	/*
	 * Inline claims and hand-overs (see above); no lock. Written by every
	 * inline batch: a line of its own.
	 */
	_Atomic uint64_t cmds td_cacheline_aligned;
	/* Worker commands handed to the completion function, still in executing. */
	_Atomic unsigned int completing;
	/* Read by every command and written only by quiesces: off the cmds line. */
	_Atomic unsigned int quiesce_seq td_cacheline_aligned; /* bumped under lock */
	_Atomic unsigned int quiescing; /* quiesce or abandon waiting; changed under lock */
	/*
	 * The fence: while a stale operation or call is out, the drive starts
	 * no command, so an old write can never land after a newer one. Changed
	 * under lock (fence_update_locked()), read without it by inline runners.
	 */
	atomic_bool fenced;

	/* Commands executed, per CPU: every executor adds, status sums. */
	struct td_pcpu_counter commands;
};

/*
 * Who is executing, for a backend call: the executor's slot (NULL when the
 * drive does not park, or bio mode), the command and the quiesce sequence at
 * which the drive accepted it.
 */
struct td_drive_park {
	struct td_drive_slot *slot;
	struct td_request *rq;
	unsigned int seq;
	bool abandoned; /* out: the commands are the queue's again; touch none of them */
};

/* ---- drive_quiesce.c ------------------------------------------------------------------ */

/* The calling thread's slot on the drive whose id is td_drive_slot_id (a cache). */
extern _Thread_local uint64_t td_drive_slot_id;
extern _Thread_local struct td_drive_slot *td_drive_slot_cached;

/* td_drive_slot_get() past the cache: find or make the slot. */
struct td_drive_slot *td_drive_slot_lookup(struct td_drive *d) td_nonnull(1);

/*
 * Return: the calling thread's slot on @d, made on first use; NULL when the
 * drive does not park or no memory was left (the thread then executes
 * unparked, and a quiesce waits for its calls as for any other step).
 */
static inline struct td_drive_slot *td_drive_slot_get(struct td_drive *d)
{
	if (!d->parks)
		return NULL;
	if (td_likely(td_drive_slot_id == d->id))
		return td_drive_slot_cached;
	return td_drive_slot_lookup(d);
}

/*
 * Park @p's executor before a backend call on command @c.
 * Return: false when the commands were taken back first (no call may be
 * made; p->abandoned is set).
 */
bool td_drive_park(struct td_drive *d, struct td_drive_park *p, const struct td_cdb_cmd *c)
	td_nonnull(1, 2, 3);

/*
 * Unpark after the call. When a quiesce came meanwhile, p->abandoned is set;
 * when it left the call behind, the call's stale mark, pin and share of the
 * fence are released here (the unpin function runs, no lock held).
 */
void td_drive_unpark(struct td_drive *d, struct td_drive_park *p) td_nonnull(1, 2);

/* Set d->fenced from the stale counts; wake the executors when the fence lifts. Lock held. */
void td_drive_fence_update_locked(struct td_drive *d) td_nonnull(1);

/* Executors let go of commands: wake a quiesce that waits for them. Lock held. */
void td_drive_wake_quiesce_locked(struct td_drive *d) td_nonnull(1);

/* Free every slot (td_drive_destroy(), once no thread executes any more). */
void td_drive_slots_free(struct td_drive *d) td_nonnull(1);

/* ---- drive_run.c ---------------------------------------------------------------------- */

/* An executor thread (workers > 0, or a model's): started by td_drive_create(). */
void *td_drive_worker_main(void *arg) td_nonnull(1);
/* An inline drive's own thread: delayed, fenced and handed-off commands. */
void *td_drive_timer_main(void *arg) td_nonnull(1);

/* ---- drive_exec.c --------------------------------------------------------------------- */

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
