// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive.c - the drive: command execution, latency models, fault injection.
 *
 * Commands arrive through td_drive_submit_locked() and wait on d->pending.
 * When the drive accepts a command it decodes the command bytes once
 * (rq->drive_cmd); from then on it never looks at the request's own fields,
 * only at its decode and at the bio chain, which is the data buffer list.
 *
 * Who executes:
 *   inline (workers 0, model none)  the thread that ran the queue, in
 *                                   td_drive_run_inline(), in arrival order;
 *   workers (model none or ssd)     N threads, arrival order, in parallel;
 *   actuator (model hdd)            one thread, shortest positioning time
 *                                   first among everything pending.
 *
 * A command's life in the drive: pending -> executing -> handed to the
 * queue's completion function; or pending -> hung (an injected hang) until a
 * reset. d->executing counts commands taken off pending whose completion has
 * not returned yet; td_drive_quiesce() empties pending and hung and waits for
 * it to reach zero. A command waiting out a delay (latency model or injected
 * latency) notices the quiesce through d->quiesce_seq and gives itself up
 * without completing: the queue requeues it.
 *
 * The hdd model. The disk has capacity / sectors_per_track tracks; the head
 * sits on the track of the last command's end. A seek over d tracks takes
 * seek_track + (seek_full - seek_track) * sqrt(d / tracks) (0 for d = 0).
 * The platter turns at rpm; a sector's angle is its offset within its track,
 * and the rotational wait is the time for that angle to come under the head
 * after the seek. Service time = overhead + seek + rotation + transfer.
 * With several commands pending, the one with the smallest seek + rotation
 * goes first, which is what gives a queued disk its advantage.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/lock.h"
#include "common/log.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/wcache.h"

struct td_drive {
	struct td_mutex lock;
	struct td_cond work_cond; /* commands arrived, or stop */
	struct td_cond idle_cond; /* executing reached zero */

	/* Fixed at creation. */
	struct td_backend be;
	uint32_t lbs;
	uint64_t capacity_bytes;
	unsigned int nr_threads;
	pthread_t *threads;
	enum td_drive_model model;
	struct td_hdd_params hdd;
	struct td_ssd_params ssd;
	enum td_write_cache write_cache;
	uint64_t tracks;
	uint64_t rev_ns;
	struct td_inject *inject;
	struct td_wcache *wc; /* write_cache = volatile only */
	td_drive_complete_fn complete;
	void *complete_ctx;

	/* Guarded by lock. */
	struct td_list pending; /* accepted, not started, arrival order, via ->drive_list */
	struct td_list hung;	/* held by an injected hang */
	unsigned int nr_pending;
	unsigned int nr_hung;
	unsigned int executing;
	/*
	 * Inline commands (no lock): the low 32 bits count those claimed by
	 * inline runners and not yet off the books; the high 32 bits those of
	 * them handed to the queue's completion function, whose submitter may
	 * already have its answer (status does not show them as executing).
	 * One word, so a runner leaves with one atomic operation and status
	 * reads both at once.
	 */
	_Atomic uint64_t inline_cmds;
	/* Worker commands handed to the completion function, still in executing. */
	_Atomic unsigned int completing;
	_Atomic unsigned int quiesce_seq; /* written under lock; read without it by inline runs */
	_Atomic unsigned int quiescing; /* changed under lock */
	bool stop;
	uint64_t head_sector;
	uint64_t seeks;
	uint64_t seek_distance;

	_Atomic uint64_t commands;
};

#define INLINE_COMPLETING_SHIFT 32

/* Return: the inline commands counted in @inline_cmds (claimed, not yet off the books). */
static inline unsigned int inline_claimed(uint64_t inline_cmds)
{
	return (unsigned int)(inline_cmds & 0xffffffffU);
}

void td_drive_params_default(struct td_drive_params *p)
{
	memset(p, 0, sizeof(*p));
	p->logical_block_size = 512;
	p->workers = 2;
	p->model = TD_MODEL_NONE;
	p->hdd = (struct td_hdd_params){
		.rpm = 7200,
		.seek_track_us = 500,
		.seek_full_us = 12000,
		.transfer_mb_s = 150,
		.overhead_us = 50,
		.sectors_per_track = 2048,
	};
	p->ssd = (struct td_ssd_params){ .latency_us = 80, .transfer_mb_s = 2000 };
	p->write_cache = TD_WC_WRITEBACK;
	p->cache_size = 64ULL << 20;
	p->seed = 1;
}

const char *td_drive_model_name(enum td_drive_model m)
{
	switch (m) {
	case TD_MODEL_NONE:
		return "none";
	case TD_MODEL_HDD:
		return "hdd";
	case TD_MODEL_SSD:
		return "ssd";
	}
	return "unknown";
}

const char *td_write_cache_name(enum td_write_cache wc)
{
	switch (wc) {
	case TD_WC_WRITEBACK:
		return "writeback";
	case TD_WC_WRITETHROUGH:
		return "writethrough";
	case TD_WC_VOLATILE:
		return "volatile";
	}
	return "unknown";
}

/* ---- executing one command on the backend --------------------------------------------- */

static int exec_cmd(struct td_drive *d, const struct td_cdb_cmd *c, struct td_bio *bios)
{
	uint64_t off = c->lba * d->lbs;
	uint64_t len = (uint64_t)c->nr_blocks * d->lbs;
	struct iovec iov[TD_RQ_MAX_BIOS];
	int iovcnt = 0;
	uint64_t data = 0;

	if (c->op != TD_OP_FLUSH &&
	    (c->lba > d->capacity_bytes / d->lbs || len > d->capacity_bytes - off))
		return -EIO; /* LBA out of range */

	switch (c->op) {
	case TD_OP_READ:
	case TD_OP_WRITE:
		for (struct td_bio *bio = bios; bio; bio = bio->next) {
			if (iovcnt == TD_RQ_MAX_BIOS)
				return -EIO;
			iov[iovcnt].iov_base = bio->data;
			iov[iovcnt].iov_len = (size_t)bio->nr_sectors << TD_SECTOR_SHIFT;
			data += iov[iovcnt].iov_len;
			iovcnt++;
		}
		if (data != len)
			return -EIO; /* the data-out buffer does not match the command */
		if (d->wc)
			return c->op == TD_OP_READ ? td_wcache_read(d->wc, iov, iovcnt, off)
						   : td_wcache_write(d->wc, iov, iovcnt, off, c->fua);
		if (c->op == TD_OP_READ)
			return d->be.ops->read(d->be.priv, iov, iovcnt, off);
		return d->be.ops->write(d->be.priv, iov, iovcnt, off,
					c->fua || d->write_cache == TD_WC_WRITETHROUGH);
	case TD_OP_FLUSH:
		return d->wc ? td_wcache_flush(d->wc) : d->be.ops->flush(d->be.priv);
	case TD_OP_DISCARD:
		return d->wc ? td_wcache_discard(d->wc, off, len)
			     : d->be.ops->discard(d->be.priv, off, len);
	case TD_OP_WRITE_ZEROES:
		return d->wc ? td_wcache_write_zeroes(d->wc, off, len)
			     : d->be.ops->write_zeroes(d->be.priv, off, len);
	}
	return -EIO;
}

/* ---- latency models ------------------------------------------------------------------- */

static uint64_t transfer_ns(uint64_t bytes, uint32_t mb_s)
{
	/* mb_s is 10^6 bytes per second, so bytes / mb_s is microseconds. */
	return bytes * TD_NSEC_PER_USEC / mb_s;
}

static uint64_t cmd_bytes(const struct td_drive *d, const struct td_cdb_cmd *c)
{
	return td_op_has_data(c->op) ? (uint64_t)c->nr_blocks * d->lbs : 0;
}

static uint64_t cmd_sector(const struct td_drive *d, const struct td_cdb_cmd *c)
{
	return c->lba * (d->lbs >> TD_SECTOR_SHIFT);
}

/* Seek plus rotational wait to reach @sector when starting at @now with the head on @head. */
static uint64_t hdd_position_ns(const struct td_drive *d, uint64_t head, uint64_t sector,
				uint64_t now)
{
	uint64_t spt = d->hdd.sectors_per_track;
	uint64_t from = head / spt;
	uint64_t to = sector / spt;
	uint64_t dist = from > to ? from - to : to - from;
	uint64_t seek = 0;

	if (dist) {
		double frac = sqrt((double)dist / (double)d->tracks);

		seek = (uint64_t)(d->hdd.seek_track_us +
				  (d->hdd.seek_full_us - d->hdd.seek_track_us) * frac) *
		       TD_NSEC_PER_USEC;
	}
	uint64_t arrive = now + seek;
	uint64_t angle_now = arrive % d->rev_ns;
	uint64_t angle_target = (sector % spt) * d->rev_ns / spt;
	uint64_t rot = (angle_target + d->rev_ns - angle_now) % d->rev_ns;

	return seek + rot;
}

/* ---- the command life cycle ----------------------------------------------------------- */

/*
 * Wait until @deadline unless a quiesce starts. Drive lock held.
 * Return: false when the command was given up.
 */
static bool wait_delay_locked(struct td_drive *d, uint64_t deadline, unsigned int seq)
{
	while (d->quiesce_seq == seq && !d->stop) {
		if (!td_cond_wait_until(&d->work_cond, &d->lock, deadline) &&
		    td_now_ns() >= deadline)
			return true;
	}
	return false;
}

/* The command leaves the drive's books (completed, dropped or hung). Drive lock held. */
static void put_executing_locked(struct td_drive *d)
{
	assert(d->executing > 0);
	if (--d->executing == 0 && atomic_load(&d->quiescing))
		td_cond_broadcast(&d->idle_cond);
}

/*
 * Run @rq, which was taken off pending with the lock held (executing counted)
 * at quiesce sequence @seq, with @model_ns of modelled service time. Called
 * and returns with the drive lock held; drops it around delays, I/O and the
 * completion call. Return: true when @rq was completed.
 */
static bool run_command_locked(struct td_drive *d, struct td_request *rq, unsigned int seq,
			       uint64_t model_ns)
{
	struct td_inject_verdict v;
	const struct td_cdb_cmd *c = &rq->drive_cmd;
	int err;

	td_mutex_unlock(&d->lock);
	td_inject_check(d->inject, c->op, cmd_sector(d, c),
			c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT), &v);
	td_mutex_lock(&d->lock);
	if (d->quiesce_seq != seq) {
		/* A reset began while we looked: the command is the queue's again. */
		put_executing_locked(d);
		return false;
	}
	if (v.hang) {
		td_list_add_tail(&rq->drive_list, &d->hung);
		d->nr_hung++;
		put_executing_locked(d);
		return false;
	}
	uint64_t delay = model_ns + (uint64_t)v.latency_us * TD_NSEC_PER_USEC;

	if (delay && !wait_delay_locked(d, td_now_ns() + delay, seq)) {
		put_executing_locked(d);
		return false;
	}
	td_mutex_unlock(&d->lock);

	if (rq->drive_decode_err)
		err = -EIO; /* an invalid command: the drive rejects it */
	else if (v.error)
		err = v.error;
	else
		err = exec_cmd(d, c, rq->bio);
	rq->error = err;
	atomic_fetch_add_explicit(&d->commands, 1, memory_order_relaxed);

	struct td_list done = TD_LIST_INIT(done);

	td_list_add_tail(&rq->drive_list, &done);
	atomic_fetch_add_explicit(&d->completing, 1, memory_order_relaxed);
	d->complete(d->complete_ctx, &done);

	td_mutex_lock(&d->lock);
	put_executing_locked(d);
	atomic_fetch_sub_explicit(&d->completing, 1, memory_order_relaxed);
	return true;
}

static struct td_request *take_first_locked(struct td_drive *d)
{
	struct td_request *rq = td_list_first_entry(&d->pending, struct td_request, drive_list);

	td_list_del(&rq->drive_list);
	d->nr_pending--;
	d->executing++;
	return rq;
}

static void *worker_main(void *arg)
{
	struct td_drive *d = arg;

	td_thread_name(d->model == TD_MODEL_SSD ? "td-ssd" : "td-drive");
	td_mutex_lock(&d->lock);
	while (!d->stop) {
		if (!d->nr_pending) {
			td_cond_wait(&d->work_cond, &d->lock);
			continue;
		}
		struct td_request *rq = take_first_locked(d);
		uint64_t model_ns = 0;

		if (d->model == TD_MODEL_SSD)
			model_ns = (uint64_t)d->ssd.latency_us * TD_NSEC_PER_USEC +
				   transfer_ns(cmd_bytes(d, &rq->drive_cmd), d->ssd.transfer_mb_s);
		run_command_locked(d, rq, d->quiesce_seq, model_ns);
	}
	td_mutex_unlock(&d->lock);
	return NULL;
}

static void *actuator_main(void *arg)
{
	struct td_drive *d = arg;

	td_thread_name("td-actuator");
	td_mutex_lock(&d->lock);
	while (!d->stop) {
		if (!d->nr_pending) {
			td_cond_wait(&d->work_cond, &d->lock);
			continue;
		}
		/* Shortest positioning time first among everything the drive holds. */
		uint64_t now = td_now_ns();
		struct td_request *best = NULL;
		uint64_t best_ns = UINT64_MAX;
		struct td_list *pos;

		td_list_for_each(pos, &d->pending) {
			struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);
			uint64_t t = hdd_position_ns(d, d->head_sector, cmd_sector(d, &rq->drive_cmd),
						     now);

			if (rq->drive_cmd.op == TD_OP_FLUSH)
				t = 0;
			if (t < best_ns) {
				best_ns = t;
				best = rq;
			}
		}
		td_list_del(&best->drive_list);
		d->nr_pending--;
		d->executing++;

		const struct td_cdb_cmd *c = &best->drive_cmd;
		uint64_t model_ns = (uint64_t)d->hdd.overhead_us * TD_NSEC_PER_USEC;

		if (c->op != TD_OP_FLUSH) {
			uint64_t target = cmd_sector(d, c);
			uint64_t moved = target > d->head_sector ? target - d->head_sector
								 : d->head_sector - target;

			model_ns += best_ns + transfer_ns(cmd_bytes(d, c), d->hdd.transfer_mb_s);
			if (moved / d->hdd.sectors_per_track) {
				d->seeks++;
				d->seek_distance += moved;
			}
			d->head_sector = target + (uint64_t)c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT);
		}
		run_command_locked(d, best, d->quiesce_seq, model_ns);
	}
	td_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- the API -------------------------------------------------------------------------- */

void td_drive_attach(struct td_drive *d, td_drive_complete_fn fn, void *ctx)
{
	d->complete = fn;
	d->complete_ctx = ctx;
}

bool td_drive_submit_locked(struct td_drive *d, struct td_list *rqs)
{
	unsigned int seq = atomic_load(&d->quiesce_seq);
	struct td_list *pos;
	unsigned int n = 0;

	td_list_for_each(pos, rqs) {
		struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);

		rq->drive_decode_err = td_cdb_decode(rq->cmd, rq->cmd_len, &rq->drive_cmd);
		/*
		 * A failed decode leaves drive_cmd as the request's last command was.
		 * Rejected commands address nothing: like a flush, no error rule can
		 * match them and the head does not move for them.
		 */
		if (rq->drive_decode_err)
			rq->drive_cmd = (struct td_cdb_cmd){ .op = TD_OP_FLUSH };
		rq->drive_seq = seq;
		n++;
	}
	if (!d->nr_threads) {
		/*
		 * Inline: the caller runs these as soon as it drops its queue lock.
		 * They count as executing from now on, so a reset (which bumps the
		 * queue's generation under that lock before quiescing us) waits for
		 * them; seq_cst pairs with the load in td_drive_quiesce().
		 */
		atomic_fetch_add(&d->inline_cmds, n);
		return true;
	}
	td_mutex_lock(&d->lock);
	td_list_splice_tail_init(rqs, &d->pending);
	d->nr_pending += n;
	if (n > 1)
		td_cond_broadcast(&d->work_cond);
	else
		td_cond_signal(&d->work_cond);
	td_mutex_unlock(&d->lock);
	return false;
}

bool td_drive_is_inline(const struct td_drive *d)
{
	return d->nr_threads == 0;
}

unsigned int td_drive_run_inline(struct td_drive *d, struct td_list *batch)
{
	struct td_list done = TD_LIST_INIT(done);
	unsigned int n = 0, ran = 0;

	while (!td_list_empty(batch)) {
		struct td_request *rq = td_list_first_entry(batch, struct td_request, drive_list);
		const struct td_cdb_cmd *c = &rq->drive_cmd;
		struct td_inject_verdict v;

		td_list_del(&rq->drive_list);
		n++;
		/* A reset began: the command is the queue's again. */
		if (atomic_load(&d->quiesce_seq) != rq->drive_seq)
			continue;
		td_inject_check(d->inject, c->op, cmd_sector(d, c),
				c->nr_blocks * (d->lbs >> TD_SECTOR_SHIFT), &v);
		if (td_unlikely(v.hang || v.latency_us)) {
			bool keep = true;

			td_mutex_lock(&d->lock);
			if (d->quiesce_seq != rq->drive_seq) {
				keep = false;
			} else if (v.hang) {
				td_list_add_tail(&rq->drive_list, &d->hung);
				d->nr_hung++;
				keep = false;
			} else {
				keep = wait_delay_locked(
					d, td_now_ns() + (uint64_t)v.latency_us * TD_NSEC_PER_USEC,
					rq->drive_seq);
			}
			td_mutex_unlock(&d->lock);
			if (!keep)
				continue;
		}
		if (rq->drive_decode_err)
			rq->error = -EIO;
		else
			rq->error = v.error ? v.error : exec_cmd(d, c, rq->bio);
		td_list_add_tail(&rq->drive_list, &done);
		ran++;
	}
	atomic_fetch_add_explicit(&d->commands, ran, memory_order_relaxed);
	uint64_t handed = (uint64_t)ran << INLINE_COMPLETING_SHIFT;

	if (ran) {
		atomic_fetch_add_explicit(&d->inline_cmds, handed, memory_order_relaxed);
		d->complete(d->complete_ctx, &done);
	}
	/* Off the books only after the completions returned (see td_drive_quiesce()). */
	if (inline_claimed(atomic_fetch_sub(&d->inline_cmds, n + handed)) == n &&
	    atomic_load(&d->quiescing)) {
		td_mutex_lock(&d->lock);
		td_cond_broadcast(&d->idle_cond);
		td_mutex_unlock(&d->lock);
	}
	return ran;
}

unsigned int td_drive_quiesce(struct td_drive *d)
{
	unsigned int dropped;

	td_mutex_lock(&d->lock);
	d->quiescing++;
	atomic_fetch_add(&d->quiesce_seq, 1);
	dropped = d->nr_pending + d->nr_hung;
	/* The queue still lists these as in flight and requeues them after the reset. */
	while (!td_list_empty(&d->pending))
		td_list_del(d->pending.next);
	while (!td_list_empty(&d->hung))
		td_list_del(d->hung.next);
	d->nr_pending = 0;
	d->nr_hung = 0;
	td_cond_broadcast(&d->work_cond); /* wake commands waiting out a delay */
	/* Inline runners signal without our lock: look again every millisecond too. */
	while (d->executing || inline_claimed(atomic_load(&d->inline_cmds)))
		td_cond_wait_until(&d->idle_cond, &d->lock, td_now_ns() + TD_NSEC_PER_MSEC);
	d->quiescing--;
	td_mutex_unlock(&d->lock);
	return dropped;
}

int td_drive_execute_sync(struct td_drive *d, const uint8_t *cdb, unsigned int cdb_len,
			  struct td_bio *bio)
{
	struct td_inject_verdict v;
	struct td_cdb_cmd c;

	if (td_cdb_decode(cdb, cdb_len, &c))
		return -EIO;
	td_inject_check(d->inject, c.op, cmd_sector(d, &c),
			c.nr_blocks * (d->lbs >> TD_SECTOR_SHIFT), &v);
	uint64_t delay = (uint64_t)v.latency_us * TD_NSEC_PER_USEC;

	if (d->model == TD_MODEL_SSD)
		delay += (uint64_t)d->ssd.latency_us * TD_NSEC_PER_USEC +
			 transfer_ns(cmd_bytes(d, &c), d->ssd.transfer_mb_s);
	if (delay)
		td_sleep_until(td_now_ns() + delay);
	atomic_fetch_add_explicit(&d->commands, 1, memory_order_relaxed);
	if (v.error)
		return v.error;
	return exec_cmd(d, &c, bio);
}

struct td_inject *td_drive_inject(struct td_drive *d)
{
	return d->inject;
}

void td_drive_get_status(struct td_drive *d, struct td_drive_status *st)
{
	memset(st, 0, sizeof(*st));
	td_mutex_lock(&d->lock);
	st->model = d->model;
	st->write_cache = d->write_cache;
	st->workers = d->nr_threads;
	st->queued = d->nr_pending + d->nr_hung;
	/*
	 * Completing first: a command that finished between the two loads is
	 * then left out (at worst a moment early), never shown as executing
	 * after its submitter had the answer.
	 */
	unsigned int completing = atomic_load(&d->completing);
	uint64_t inl = atomic_load(&d->inline_cmds);
	unsigned int executing = d->executing + inline_claimed(inl) -
				 (unsigned int)(inl >> INLINE_COMPLETING_SHIFT);

	st->executing = executing > completing ? executing - completing : 0;
	st->hung = d->nr_hung;
	st->seeks = d->seeks;
	st->seek_distance = d->seek_distance;
	st->head_sector = d->head_sector;
	td_mutex_unlock(&d->lock);
	st->commands = atomic_load_explicit(&d->commands, memory_order_relaxed);
}

static int check_params(const struct td_drive_params *p)
{
	if (!p->backend.ops || (p->logical_block_size != 512 && p->logical_block_size != 4096))
		return -EINVAL;
	if (!p->capacity_bytes || p->capacity_bytes % p->logical_block_size)
		return -EINVAL;
	if (p->model == TD_MODEL_HDD &&
	    (!p->hdd.rpm || !p->hdd.transfer_mb_s || !p->hdd.sectors_per_track ||
	     p->hdd.seek_full_us < p->hdd.seek_track_us))
		return -EINVAL;
	if (p->model == TD_MODEL_SSD && !p->ssd.transfer_mb_s)
		return -EINVAL;
	if (p->write_cache == TD_WC_VOLATILE && p->cache_size < TD_WCACHE_LINE)
		return -EINVAL;
	return 0;
}

struct td_drive *td_drive_create(const struct td_drive_params *p, int *err)
{
	struct td_drive *d;
	int ret = check_params(p);

	if (ret)
		goto out;
	ret = -ENOMEM;
	d = calloc(1, sizeof(*d));
	if (!d)
		goto out;
	td_mutex_init(&d->lock);
	td_cond_init(&d->work_cond);
	td_cond_init(&d->idle_cond);
	td_list_init(&d->pending);
	td_list_init(&d->hung);
	d->be = p->backend;
	d->lbs = p->logical_block_size;
	d->capacity_bytes = p->capacity_bytes;
	d->model = p->model;
	d->hdd = p->hdd;
	d->ssd = p->ssd;
	d->write_cache = p->write_cache;
	atomic_init(&d->commands, 0);
	if (d->model == TD_MODEL_HDD) {
		uint64_t sectors = d->capacity_bytes >> TD_SECTOR_SHIFT;

		d->tracks = TD_MAX(TD_DIV_ROUND_UP(sectors, d->hdd.sectors_per_track), 1);
		d->rev_ns = 60 * TD_NSEC_PER_SEC / d->hdd.rpm;
		d->nr_threads = 1;
	} else if (d->model == TD_MODEL_SSD) {
		d->nr_threads = TD_MAX(p->workers, 1U);
	} else {
		d->nr_threads = p->workers;
	}
	d->inject = td_inject_create(p->seed);
	if (!d->inject)
		goto out_free;
	if (d->write_cache == TD_WC_VOLATILE) {
		d->wc = td_wcache_create(&d->be, d->capacity_bytes, p->cache_size);
		if (!d->wc)
			goto out_destroy_inject;
	}
	if (d->nr_threads) {
		d->threads = calloc(d->nr_threads, sizeof(*d->threads));
		if (!d->threads)
			goto out_destroy_wcache;
	}
	for (unsigned int i = 0; i < d->nr_threads; i++) {
		int r = pthread_create(&d->threads[i], NULL,
				       d->model == TD_MODEL_HDD ? actuator_main : worker_main, d);

		if (r) {
			ret = -r;
			d->nr_threads = i;
			goto out_stop_threads;
		}
	}
	return d;

out_stop_threads:
	td_mutex_lock(&d->lock);
	d->stop = true;
	td_cond_broadcast(&d->work_cond);
	td_mutex_unlock(&d->lock);
	for (unsigned int i = 0; i < d->nr_threads; i++)
		pthread_join(d->threads[i], NULL);
	free(d->threads);
out_destroy_wcache:
	if (d->wc)
		td_wcache_destroy(d->wc);
out_destroy_inject:
	td_inject_destroy(d->inject);
out_free:
	td_cond_destroy(&d->idle_cond);
	td_cond_destroy(&d->work_cond);
	td_mutex_destroy(&d->lock);
	free(d);
out:
	*err = ret;
	return NULL;
}

void td_drive_destroy(struct td_drive *d)
{
	td_mutex_lock(&d->lock);
	assert(!d->nr_pending);
	/*
	 * The queue's last bio may have ended while its worker is still on its
	 * way out of the completion function: let it get off the books first.
	 */
	d->quiescing++;
	while (d->executing || inline_claimed(atomic_load(&d->inline_cmds)))
		td_cond_wait_until(&d->idle_cond, &d->lock, td_now_ns() + TD_NSEC_PER_MSEC);
	d->quiescing--;
	d->stop = true;
	td_cond_broadcast(&d->work_cond);
	td_mutex_unlock(&d->lock);
	for (unsigned int i = 0; i < d->nr_threads; i++)
		pthread_join(d->threads[i], NULL);
	free(d->threads);
	td_inject_destroy(d->inject);
	if (d->wc)
		td_wcache_destroy(d->wc);
	if (d->be.ops->destroy)
		d->be.ops->destroy(d->be.priv);
	td_cond_destroy(&d->idle_cond);
	td_cond_destroy(&d->work_cond);
	td_mutex_destroy(&d->lock);
	free(d);
}

int td_drive_powerfail(struct td_drive *d, unsigned int keep_pct, uint64_t seed,
		       struct td_powerfail_result *res)
{
	if (!d->wc)
		return -EOPNOTSUPP;
	return td_wcache_powerfail(d->wc, keep_pct, seed, res);
}

bool td_drive_cache_stats(struct td_drive *d, struct td_wcache_stats *st)
{
	if (!d->wc)
		return false;
	td_wcache_get_stats(d->wc, st);
	return true;
}
