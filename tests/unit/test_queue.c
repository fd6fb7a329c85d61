// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_queue.c - the request queue (src/engine/queue.c, timeout.c,
 * queue_setup.c) end to end: prep and the command bytes, DEFER and KILL, tags,
 * resets and retries, barriers, the overlapping-write rule, run-time switches,
 * timeouts, which threads execute I/O, bounded drains, bio mode, windows and
 * plugging, and a stress test that resets the drive under load.
 *
 * Each case builds a queue over a drive whose backend is a memory disk, so
 * what reached the "medium" can be compared byte for byte. Two ways to make
 * timing deterministic:
 *  - workers = 0: the thread that runs the queue executes the commands, so
 *    a submit returns with its bio ended, unless an injected hang holds it;
 *  - the gate backend below: reads and/or writes wait on a semaphore the
 *    test posts, so commands are provably executing while the test looks.
 * Resets, timeouts and setting changes leave the dispatch of what they
 * requeue to the queue's td-kblockd thread, so after one the tests wait for
 * the outcome (a count, an ended bio) with a generous deadline.
 * cmocka may only fail in the thread running the test: helper threads count
 * problems in atomics and the test asserts on them after joining.
 * Families of cases that differ only in their inputs are tables, each row a
 * cmocka case of its own (see main()).
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/log.h"
#include "engine/queue_int.h" /* td_queue_inline_depth() */
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"
#include "tagdisk/trace.h"
#include "unit_util.h"

/*
 * test_queue_mq.c builds this file again with TEST_QUEUE_MODE = TD_MODE_MQ:
 * every queued-mode case then runs against an mq queue of TEST_QUEUE_NR_HW
 * hardware contexts, and that file adds the mq-only cases and its own main().
 */
#ifndef TEST_QUEUE_MODE
#define TEST_QUEUE_MODE TD_MODE_RQ
#define TEST_QUEUE_NR_HW 0
#endif
/* Hardware contexts of the queues env_create() builds in mq mode; a case may change it. */
static unsigned int test_nr_hw = TEST_QUEUE_NR_HW;

#define MIB (1024ULL * 1024ULL)
/* Longest a test waits for something that should happen at once; reaching it fails the test. */
#define WAIT_MS 10000
/* Generous for valgrind; a deadlock must fail the run, not hang it. */
#define WATCHDOG_S 900
#define TRACE_EVENTS 65536
/* The test's threads, the drive's workers, kblockd and the timer, with room to spare. */
#define TRACE_THREADS 16
#define TRACE_BUDGET  (64U << 20)

/* ---- small utilities ------------------------------------------------------------------ */

/* Deterministic bytes for sector @sector written with @stamp: every sector differs. */
static void fill_sector(uint8_t *p, uint64_t sector, uint64_t stamp)
{
	uint64_t s = (sector + 1) * 0x9e3779b97f4a7c15ULL ^ (stamp + 1) * 0xbf58476d1ce4e5b9ULL;

	for (unsigned int i = 0; i < TD_SECTOR_SIZE; i += 8) {
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		memcpy(p + i, &s, 8);
	}
}

static void fill_range(uint8_t *p, uint64_t sector, uint32_t nr, uint64_t stamp)
{
	for (uint32_t i = 0; i < nr; i++)
		fill_sector(p + (size_t)i * TD_SECTOR_SIZE, sector + i, stamp);
}

/* ---- completions ---------------------------------------------------------------------- */

/* A bio with what the test wants to know about its end. */
struct tbio {
	struct td_bio bio;
	struct done *done;
	_Atomic int ended; /* times end_io ran: must end at 1 */
	_Atomic int err;
	int tag;	   /* the tag its request got, recorded by the recording prep */
	void *found_at_end; /* td_tag_find(map, tag) inside end_io */
	unsigned int busy_at_end;
	struct td_tag_map *map; /* when set, end_io samples the map */
};

static struct tbio *tbio_of(struct td_bio *bio)
{
	return td_container_of(bio, struct tbio, bio);
}

static void tbio_end(struct td_bio *bio, int err)
{
	struct tbio *t = tbio_of(bio);

	if (t->map) {
		t->found_at_end = td_tag_find(t->map, t->tag);
		t->busy_at_end = td_tag_busy(t->map);
	}
	atomic_store(&t->err, err);
	atomic_fetch_add(&t->ended, 1);
	if (t->done)
		done_add(t->done, err);
}

static void tbio_init(struct tbio *t, struct done *d, enum td_op op, uint64_t sector,
		      uint32_t nr_sectors, void *data)
{
	memset(t, 0, sizeof(*t));
	td_bio_init(&t->bio, op, sector, nr_sectors, data, tbio_end, NULL);
	t->done = d;
	t->tag = TD_TAG_NONE;
}

/* ---- a memory backend with a gate, a FUA log and an overlap detector ------------------ */

#define GATE_MAX_ACTIVE 64
#define GATE_MAX_CALLERS 8

struct gate {
	struct td_backend inner; /* a memory backend holds the data */
	sem_t sem;		 /* gated calls wait for a post each */
	atomic_bool block_reads;
	atomic_bool block_writes;
	_Atomic unsigned int waiting; /* calls waiting at the gate now */
	uint32_t write_hold_us;	      /* a write stays active this long (overlap detection) */
	pthread_mutex_t lock;	      /* guards the active table and the maxima */
	uint64_t active_off[GATE_MAX_ACTIVE];
	uint64_t active_len[GATE_MAX_ACTIVE]; /* 0: free slot */
	unsigned int nr_active;
	unsigned int max_active;
	unsigned int overlaps; /* writes that started while an overlapping one was active */
	_Atomic unsigned int writes;
	_Atomic unsigned int fua_writes;
	/* The distinct names of the threads that called read or write; lock. */
	char callers[GATE_MAX_CALLERS][16];
	unsigned int nr_callers;
	/* Most queue runs seen on the stack of a thread calling read or write; lock. */
	unsigned int max_inline_depth;
};

/*
 * Remember which thread called the backend (by name: td-kblockd, td-timer, ...), and
 * how many queue runs it had on its stack.
 */
static void gate_record_caller(struct gate *g)
{
	char name[16] = "";

	pthread_getname_np(pthread_self(), name, sizeof(name));
	pthread_mutex_lock(&g->lock);
	g->max_inline_depth = TD_MAX(g->max_inline_depth, td_queue_inline_depth());
	bool known = false;

	for (unsigned int i = 0; i < g->nr_callers; i++)
		known |= strcmp(g->callers[i], name) == 0;
	if (!known && g->nr_callers < GATE_MAX_CALLERS)
		memcpy(g->callers[g->nr_callers++], name, sizeof(name));
	pthread_mutex_unlock(&g->lock);
}

/* Return: true when a thread named @name called the backend. */
static bool gate_called_by(struct gate *g, const char *name)
{
	bool found = false;

	pthread_mutex_lock(&g->lock);
	for (unsigned int i = 0; i < g->nr_callers; i++)
		found |= strcmp(g->callers[i], name) == 0;
	pthread_mutex_unlock(&g->lock);
	return found;
}

static void gate_pass(struct gate *g, atomic_bool *flag)
{
	if (!atomic_load(flag))
		return;
	atomic_fetch_add(&g->waiting, 1);
	while (sem_wait(&g->sem) == -1 && errno == EINTR)
		;
	atomic_fetch_sub(&g->waiting, 1);
}

static int gate_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off)
{
	struct gate *g = priv;

	gate_record_caller(g);
	gate_pass(g, &g->block_reads);
	return g->inner.ops->read(g->inner.priv, iov, iovcnt, off);
}

static int gate_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	struct gate *g = priv;
	uint64_t len = 0;
	int slot = -1;
	int err;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	gate_record_caller(g);
	atomic_fetch_add(&g->writes, 1);
	if (fua)
		atomic_fetch_add(&g->fua_writes, 1);
	gate_pass(g, &g->block_writes);

	pthread_mutex_lock(&g->lock);
	for (int i = 0; i < GATE_MAX_ACTIVE; i++) {
		if (!g->active_len[i]) {
			if (slot < 0)
				slot = i;
			continue;
		}
		if (off < g->active_off[i] + g->active_len[i] && g->active_off[i] < off + len)
			g->overlaps++;
	}
	if (slot >= 0) {
		g->active_off[slot] = off;
		g->active_len[slot] = len;
	}
	g->nr_active++;
	if (g->nr_active > g->max_active)
		g->max_active = g->nr_active;
	pthread_mutex_unlock(&g->lock);

	if (g->write_hold_us)
		sleep_us(g->write_hold_us);
	err = g->inner.ops->write(g->inner.priv, iov, iovcnt, off, fua);

	pthread_mutex_lock(&g->lock);
	if (slot >= 0)
		g->active_len[slot] = 0;
	g->nr_active--;
	pthread_mutex_unlock(&g->lock);
	return err;
}

static int gate_flush(void *priv)
{
	struct gate *g = priv;

	return g->inner.ops->flush(g->inner.priv);
}

static int gate_discard(void *priv, uint64_t off, uint64_t len)
{
	struct gate *g = priv;

	return g->inner.ops->discard(g->inner.priv, off, len);
}

static int gate_write_zeroes(void *priv, uint64_t off, uint64_t len)
{
	struct gate *g = priv;

	return g->inner.ops->write_zeroes(g->inner.priv, off, len);
}

/* The drive destroys the inner memory; the test frees the gate itself after the drive. */
static void gate_destroy(void *priv)
{
	struct gate *g = priv;

	g->inner.ops->destroy(g->inner.priv);
}

static const struct td_backend_ops gate_ops = {
	.name = "gate",
	.read = gate_read,
	.write = gate_write,
	.flush = gate_flush,
	.discard = gate_discard,
	.write_zeroes = gate_write_zeroes,
	.destroy = gate_destroy,
};

/* Wait until @n calls are blocked at @g's gate. */
static bool gate_wait_waiting(struct gate *g, unsigned int n)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;

	while (atomic_load(&g->waiting) != n) {
		if (mono_ns() > deadline)
			return false;
		sleep_us(200);
	}
	return true;
}

static void gate_release(struct gate *g, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		sem_post(&g->sem);
}

/* ---- the environment: drive + queue (+ trace) ------------------------------------------ */

struct env_opts {
	enum td_queue_mode mode;
	uint64_t size_bytes;
	uint32_t lbs;
	unsigned int workers;
	unsigned int depth;
	uint32_t nr_requests;
	uint32_t max_sectors;
	uint32_t timeout_ms;
	uint32_t max_retries;
	const char *elevator;
	unsigned int nr_hw_queues; /* mq */
	enum td_drive_model model;
	uint32_t model_us; /* ssd: its latency; hdd: its per-command overhead */
	bool gate;	   /* wrap the memory in a gate */
	bool null_backend; /* no memory at all */
	bool trace;
	struct td_clock clock;
};

static void env_opts_default(struct env_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mode = TEST_QUEUE_MODE;
	o->nr_hw_queues = test_nr_hw;
	o->size_bytes = 4 * MIB;
	o->lbs = 512;
	o->workers = 0;
	o->depth = 32;
	o->nr_requests = 128;
	o->max_sectors = 2048;
	o->timeout_ms = 0;
	o->max_retries = 5;
	o->elevator = "deadline";
}

struct env {
	struct td_drive *drive;
	struct td_queue *q;
	struct gate *gate;
	uint8_t *mem; /* the disk, NULL with the null backend */
	uint64_t sectors;
	struct td_trace *trace;
	struct td_trace_sub *sub;
};

static void env_create(struct env *e, const struct env_opts *o)
{
	struct td_drive_params dp;
	struct td_queue_params qp;
	struct td_backend mem;
	int err = 0;

	memset(e, 0, sizeof(*e));
	td_drive_params_default(&dp);
	dp.logical_block_size = o->lbs;
	dp.capacity_bytes = o->size_bytes;
	dp.workers = o->workers;
	dp.model = o->model;
	if (o->model == TD_MODEL_SSD && o->model_us)
		dp.ssd.latency_us = o->model_us;
	if (o->model == TD_MODEL_HDD && o->model_us)
		dp.hdd.overhead_us = o->model_us;
	if (o->null_backend) {
		td_backend_null_init(&dp.backend);
	} else {
		assert_int_equal(td_backend_mem_init(&mem, o->size_bytes), 0);
		/* A copy of the backend struct stays usable for td_backend_mem_data(). */
		e->mem = td_backend_mem_data(&mem);
		dp.backend = mem;
		if (o->gate) {
			e->gate = calloc(1, sizeof(*e->gate));
			assert_non_null(e->gate);
			e->gate->inner = mem;
			sem_init(&e->gate->sem, 0, 0);
			pthread_mutex_init(&e->gate->lock, NULL);
			dp.backend.ops = &gate_ops;
			dp.backend.priv = e->gate;
		}
	}
	e->drive = td_drive_create(&dp, &err);
	assert_non_null(e->drive);
	assert_int_equal(err, 0);

	if (o->trace) {
		e->trace = td_trace_create(TRACE_BUDGET);
		assert_non_null(e->trace);
		e->sub = td_trace_subscribe(e->trace, &(struct td_trace_sub_params){
							      .ring_events = TRACE_EVENTS,
							      .nr_rings = TRACE_THREADS,
						      });
		assert_non_null(e->sub);
	}
	td_queue_params_default(&qp);
	qp.mode = o->mode;
	qp.capacity_sectors = o->size_bytes >> TD_SECTOR_SHIFT;
	qp.logical_block_size = o->lbs;
	qp.max_sectors = o->max_sectors;
	qp.nr_requests = o->nr_requests;
	qp.elevator = o->elevator;
	qp.nr_hw_queues = o->nr_hw_queues;
	qp.depth = o->depth;
	qp.command_timeout_ms = o->timeout_ms;
	qp.max_retries = o->max_retries;
	qp.drive = e->drive;
	qp.trace = e->trace;
	qp.clock = o->clock;
	e->q = td_queue_create(&qp, &err);
	assert_non_null(e->q);
	assert_int_equal(err, 0);
	e->sectors = qp.capacity_sectors;
}

static void env_destroy(struct env *e)
{
	td_queue_drain(e->q);
	td_queue_destroy(e->q);
	td_drive_destroy(e->drive);
	if (e->gate) {
		sem_destroy(&e->gate->sem);
		pthread_mutex_destroy(&e->gate->lock);
		free(e->gate);
	}
	if (e->trace) {
		td_trace_unsubscribe(e->trace, e->sub);
		td_trace_destroy(e->trace);
	}
	memset(e, 0, sizeof(*e));
}

static void env_stats(struct env *e, struct td_stats_snapshot *s)
{
	td_stats_snapshot(td_queue_stats(e->q), s, mono_ns());
}

static struct td_queue_status env_status(struct env *e)
{
	struct td_queue_status st;

	td_queue_get_status(e->q, &st);
	return st;
}

static uint8_t *env_disk(struct env *e, uint64_t sector)
{
	return e->mem + (sector << TD_SECTOR_SHIFT);
}

/* Submit one bio and, with an inline drive, expect it ended by the time submit returns. */
static void submit_sync(struct env *e, struct tbio *t, enum td_op op, uint64_t sector,
			uint32_t nr, void *data)
{
	tbio_init(t, NULL, op, sector, nr, data);
	td_queue_submit(e->q, &t->bio);
	assert_int_equal(atomic_load(&t->ended), 1);
}

/* Submit one bio and wait for it to end (any drive). */
static void submit_sync_wait(struct env *e, struct tbio *t, enum td_op op, uint64_t sector,
			     uint32_t nr, void *data)
{
	struct done d;

	done_init(&d);
	tbio_init(t, &d, op, sector, nr, data);
	td_queue_submit(e->q, &t->bio);
	assert_true(done_wait(&d, 1, WAIT_MS));
	done_destroy(&d);
	assert_int_equal(atomic_load(&t->ended), 1);
}

/* Return: true when @t ended within WAIT_MS (whichever thread ended it). */
static bool wait_ended(struct tbio *t)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;

	while (!atomic_load(&t->ended)) {
		if (mono_ns() > deadline)
			return false;
		sleep_us(200);
	}
	return true;
}

/* Return: true when the drive holds @hung commands (an injected hang) within WAIT_MS. */
static bool wait_hung(struct env *e, unsigned int hung)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	struct td_drive_status ds;

	for (;;) {
		td_drive_get_status(e->drive, &ds);
		if (ds.hung == hung)
			return true;
		if (mono_ns() > deadline)
			return false;
		sleep_us(200);
	}
}

/* Return: true when the drive executes nothing within WAIT_MS. */
static bool wait_drive_idle(struct env *e)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	struct td_drive_status ds;

	for (;;) {
		td_drive_get_status(e->drive, &ds);
		if (!ds.executing)
			return true;
		if (mono_ns() > deadline)
			return false;
		sleep_us(200);
	}
}

/* Return: true when the stats counter @c reached @min within WAIT_MS. */
static bool wait_counter(struct env *e, enum td_stats_counter c, uint64_t min)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	bool ok = false;

	if (!s)
		return false;
	for (;;) {
		env_stats(e, s);
		if (s->counters[c] >= min) {
			ok = true;
			break;
		}
		if (mono_ns() > deadline)
			break;
		sleep_us(200);
	}
	free(s);
	return ok;
}

/* ---- trace helpers -------------------------------------------------------------------- */

struct trace_log {
	struct td_trace_event ev[TRACE_EVENTS];
	size_t n;
};

static struct trace_log *trace_collect(struct env *e)
{
	struct trace_log *log = calloc(1, sizeof(*log));
	uint64_t dropped = 0;

	assert_non_null(log);
	log->n = td_trace_read(e->trace, e->sub, log->ev, TRACE_EVENTS, &dropped);
	assert_int_equal(dropped, 0);
	return log;
}

/* Return: the index of the first @action event for @op at @sector from @from on, or -1. */
static long trace_find(const struct trace_log *log, size_t from, char action, enum td_op op,
		       uint64_t sector)
{
	for (size_t i = from; i < log->n; i++) {
		const struct td_trace_event *ev = &log->ev[i];

		if (ev->action == (uint8_t)action && ev->op == (uint8_t)op && ev->sector == sector)
			return (long)i;
	}
	return -1;
}

static size_t trace_count(const struct trace_log *log, char action)
{
	size_t n = 0;

	for (size_t i = 0; i < log->n; i++)
		n += log->ev[i].action == (uint8_t)action;
	return n;
}

/* ---- prep functions that record what td_prep_default did ------------------------------ */

struct prep_record {
	uint8_t cmd[TD_CMD_MAX];
	uint8_t cmd_len;
	int tag;
	struct td_request *rq;
	uint32_t retries;
	unsigned int calls;
};

/* Prep functions have no context pointer: the records are per test file. */
static struct prep_record prep_rec[TD_OP_COUNT];
static pthread_mutex_t prep_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool prep_allow = true;

static void prep_reset(void)
{
	pthread_mutex_lock(&prep_lock);
	memset(prep_rec, 0, sizeof(prep_rec));
	pthread_mutex_unlock(&prep_lock);
	atomic_store(&prep_allow, true);
}

static enum td_prep_result recording_prep(struct td_queue *q, struct td_request *rq)
{
	enum td_prep_result res = td_prep_default(q, rq);

	if (res != TD_PREP_OK)
		return res;
	pthread_mutex_lock(&prep_lock);
	struct prep_record *r = &prep_rec[rq->op];

	memcpy(r->cmd, rq->cmd, sizeof(r->cmd));
	r->cmd_len = rq->cmd_len;
	r->tag = rq->tag;
	r->rq = rq;
	r->retries = rq->retries;
	r->calls++;
	pthread_mutex_unlock(&prep_lock);
	/* Every bio of the request learns its tag (all bios in this file are tbios). */
	for (struct td_bio *bio = rq->bio; bio; bio = bio->next)
		tbio_of(bio)->tag = rq->tag;
	return res;
}

/* Defers every request until prep_allow is set. */
static enum td_prep_result gated_prep(struct td_queue *q, struct td_request *rq)
{
	if (!atomic_load(&prep_allow))
		return TD_PREP_DEFER;
	return recording_prep(q, rq);
}

static struct prep_record prep_get(enum td_op op)
{
	struct prep_record r;

	pthread_mutex_lock(&prep_lock);
	r = prep_rec[op];
	pthread_mutex_unlock(&prep_lock);
	return r;
}

/* ---- prep and the command bytes ------------------------------------------------------- */

static void assert_cmd(enum td_op op, const uint8_t *want, uint8_t want_len)
{
	struct prep_record r = prep_get(op);

	assert_int_equal(r.cmd_len, want_len);
	assert_memory_equal(r.cmd, want, want_len);
	/* Bytes past the command are zero. */
	for (unsigned int i = want_len; i < TD_CMD_MAX; i++)
		assert_int_equal(r.cmd[i], 0);
}

/*
 * One command through td_prep_default: the bytes it pregenerates, and what the
 * drive did with them. Data commands are checked on the disk (a read reads
 * back a pattern); discard and write zeroes zero exactly their range.
 */
struct prep_case {
	const char *name;
	uint32_t lbs;
	uint64_t size_bytes;
	bool null_backend; /* 4 TiB disks have no memory behind them */
	enum td_op op;
	uint64_t sector;
	uint32_t nr_sectors;
	bool fua;
	uint8_t cdb[TD_CMD_MAX]; /* the command prep must build */
	uint8_t cdb_len;
};

static const struct prep_case prep_cases[] = {
	{
		.name = "prep: WRITE(10) names LBA and blocks",
		.lbs = 512, .size_bytes = 4 * MIB, .op = TD_OP_WRITE, .sector = 8, .nr_sectors = 8,
		.cdb = { 0x2a, 0, 0, 0, 0, 0x08, 0, 0, 0x08, 0 }, .cdb_len = 10,
	},
	{
		.name = "prep: a FUA write sets the FUA bit of WRITE(10)",
		.lbs = 512, .size_bytes = 4 * MIB, .op = TD_OP_WRITE, .sector = 16, .nr_sectors = 8,
		.fua = true,
		.cdb = { 0x2a, 0x08, 0, 0, 0, 0x10, 0, 0, 0x08, 0 }, .cdb_len = 10,
	},
	{
		.name = "prep: READ(10)",
		.lbs = 512, .size_bytes = 4 * MIB, .op = TD_OP_READ, .sector = 0x1234,
		.nr_sectors = 16,
		.cdb = { 0x28, 0, 0, 0, 0x12, 0x34, 0, 0, 0x10, 0 }, .cdb_len = 10,
	},
	{
		.name = "prep: a flush is SYNCHRONIZE CACHE(10)",
		.lbs = 512, .size_bytes = 4 * MIB, .op = TD_OP_FLUSH,
		.cdb = { 0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, .cdb_len = 10,
	},
	{
		.name = "prep: discard is WRITE SAME(16) with UNMAP",
		.lbs = 512, .size_bytes = 4 * MIB, .op = TD_OP_DISCARD, .sector = 32, .nr_sectors = 16,
		.cdb = { 0x93, 0x09, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0x10, 0, 0 }, .cdb_len = 16,
	},
	{
		.name = "prep: write zeroes is WRITE SAME(16) without data",
		.lbs = 512, .size_bytes = 4 * MIB, .op = TD_OP_WRITE_ZEROES, .sector = 64,
		.nr_sectors = 8,
		.cdb = { 0x93, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0x08, 0, 0 }, .cdb_len = 16,
	},
	{
		.name = "prep: a 4 KiB-block disk counts logical blocks",
		.lbs = 4096, .size_bytes = 4 * MIB, .op = TD_OP_WRITE, .sector = 8, .nr_sectors = 8,
		.cdb = { 0x2a, 0, 0, 0, 0, 0x01, 0, 0, 0x01, 0 }, .cdb_len = 10,
	},
	{
		.name = "prep: WRITE(16) beyond a 32-bit LBA",
		.lbs = 512, .size_bytes = 4ULL << 40, .null_backend = true, .op = TD_OP_WRITE,
		.sector = 1ULL << 32, .nr_sectors = 8,
		.cdb = { 0x8a, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x08, 0, 0 }, .cdb_len = 16,
	},
};

static void run_prep_case(void **state)
{
	const struct prep_case *c = *state;
	size_t len = (size_t)c->nr_sectors * TD_SECTOR_SIZE;
	uint8_t *buf = xmalloc(TD_MAX(len, (size_t)1));
	struct env_opts o;
	struct env e;
	struct tbio t;

	prep_reset();
	env_opts_default(&o);
	o.lbs = c->lbs;
	o.size_bytes = c->size_bytes;
	o.null_backend = c->null_backend;
	env_create(&e, &o);
	td_queue_set_prep(e.q, recording_prep);
	if (e.mem) {
		/* A pattern around the command's range, to see exactly what it touched. */
		fill_range(e.mem, 0, 256, 90);
		if (c->op == TD_OP_READ)
			fill_range(env_disk(&e, c->sector), c->sector, c->nr_sectors, 91);
	}
	if (c->op == TD_OP_WRITE)
		fill_range(buf, c->sector, c->nr_sectors, 92);
	else
		memset(buf, 0xee, TD_MAX(len, (size_t)1));

	tbio_init(&t, NULL, c->op, c->sector, c->nr_sectors, td_op_has_data(c->op) ? buf : NULL);
	t.bio.flags = c->fua ? TD_BIO_FUA : 0;
	td_queue_submit(e.q, &t.bio);
	assert_int_equal(atomic_load(&t.ended), 1); /* an inline drive: done when submit returns */
	assert_int_equal(atomic_load(&t.err), 0);
	assert_cmd(c->op, c->cdb, c->cdb_len);

	if (e.mem && c->op != TD_OP_FLUSH) {
		uint8_t *before = env_disk(&e, c->sector) - 1;
		uint8_t *after = env_disk(&e, c->sector + c->nr_sectors);
		uint8_t want_before[1], want_after[1];
		uint8_t ref[TD_SECTOR_SIZE];

		if (c->op == TD_OP_WRITE)
			assert_memory_equal(env_disk(&e, c->sector), buf, len);
		else if (c->op == TD_OP_READ)
			assert_memory_equal(buf, env_disk(&e, c->sector), len);
		else
			assert_true(all_value(env_disk(&e, c->sector), len, 0));
		/* Nothing outside the range changed (the bytes next to it hold the pattern). */
		if (c->sector < 256 && c->op != TD_OP_READ) {
			fill_sector(ref, c->sector - 1, 90);
			want_before[0] = ref[TD_SECTOR_SIZE - 1];
			fill_sector(ref, c->sector + c->nr_sectors, 90);
			want_after[0] = ref[0];
			assert_int_equal(before[0], want_before[0]);
			assert_int_equal(after[0], want_after[0]);
		}
	}
	env_destroy(&e);
	free(buf);
}

/* ---- DEFER ---------------------------------------------------------------------------- */

static void test_third_read_deferred_while_two_tags_busy_then_completes(void **state)
{
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t[3];
	uint8_t *buf = xmalloc(3 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_queue_status st;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.workers = 2;
	o.depth = 2;
	o.gate = true;
	o.elevator = "noop";
	env_create(&e, &o);
	fill_range(e.mem, 0, 512, 7);
	atomic_store(&e.gate->block_reads, true);
	done_init(&d);

	for (int i = 0; i < 3; i++) {
		tbio_init(&t[i], &d, TD_OP_READ, (uint64_t)i * 100, 8, buf + i * 8 * TD_SECTOR_SIZE);
		td_queue_submit(e.q, &t[i].bio);
	}
	/* Prep runs inside submit: the third request found no tag before submit returned. */
	st = env_status(&e);
	assert_int_equal(st.depth, 2);
	assert_int_equal(st.tags_in_use, 2);
	assert_int_equal(st.in_flight, 2);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.requests_used, 3);
	env_stats(&e, s);
	assert_true(s->counters[TD_STAT_DEFERRED] > 0);
	assert_true(gate_wait_waiting(e.gate, 2));
	assert_int_equal(done_count(&d), 0);

	gate_release(e.gate, 1);
	assert_true(done_wait(&d, 1, WAIT_MS));
	/* The freed tag went to the deferred read, which now waits at the gate too. */
	assert_true(gate_wait_waiting(e.gate, 2));
	st = env_status(&e);
	assert_int_equal(st.in_flight, 2);
	assert_int_equal(st.queued, 0);
	assert_int_equal(done_count(&d), 1);

	gate_release(e.gate, 2);
	assert_true(done_wait(&d, 3, WAIT_MS));
	assert_int_equal(d.errors, 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&t[i].ended), 1);
		assert_memory_equal(buf + i * 8 * TD_SECTOR_SIZE, env_disk(&e, (uint64_t)i * 100),
				    8 * TD_SECTOR_SIZE);
	}
	st = env_status(&e);
	assert_int_equal(st.tags_in_use, 0);
	assert_int_equal(st.requests_used, 0);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_READ], 3);
	env_destroy(&e);
	done_destroy(&d);
	free(s);
	free(buf);
}

static void test_prep_defer_retried_by_timer_until_resource_frees(void **state)
{
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t;
	uint8_t buf[8 * TD_SECTOR_SIZE];
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_queue_status st;

	(void)state;
	assert_non_null(s);
	prep_reset();
	env_opts_default(&o);
	env_create(&e, &o);
	td_queue_set_prep(e.q, gated_prep);
	atomic_store(&prep_allow, false);
	done_init(&d);
	fill_range(buf, 40, 8, 3);

	tbio_init(&t, &d, TD_OP_WRITE, 40, 8, buf);
	td_queue_submit(e.q, &t.bio);
	sleep_us(30000);
	assert_int_equal(atomic_load(&t.ended), 0);
	st = env_status(&e);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.tags_in_use, 0);
	env_stats(&e, s);
	/* Nothing in flight would run the queue again: the timer retried it. */
	assert_true(s->counters[TD_STAT_DEFERRED] >= 2);

	atomic_store(&prep_allow, true);
	assert_true(done_wait(&d, 1, WAIT_MS));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 40), buf, sizeof(buf));
	env_destroy(&e);
	done_destroy(&d);
	free(s);
}

/* ---- KILL ----------------------------------------------------------------------------- */

/*
 * A bio prep must KILL: it fails with -EIO before the drive, takes no tag and
 * writes nothing; then a neighbouring valid bio of the same disk succeeds.
 */
struct kill_case {
	const char *name;
	uint32_t lbs;
	uint64_t size_bytes;
	enum td_op op; /* the bio killed */
	uint64_t sector;
	uint32_t nr_sectors;
	uint64_t good_sector; /* a write that is fine */
	uint32_t good_nr_sectors;
};

static const struct kill_case kill_cases[] = {
	{
		.name = "kill: a write across the end of the disk",
		.lbs = 512, .size_bytes = 1 * MIB, /* 2048 sectors */
		.op = TD_OP_WRITE, .sector = 2040, .nr_sectors = 16,
		.good_sector = 2047, .good_nr_sectors = 1, /* the last sector itself is fine */
	},
	{
		.name = "kill: a write not aligned to a 4 KiB block",
		.lbs = 4096, .size_bytes = 4 * MIB,
		.op = TD_OP_WRITE, .sector = 1, .nr_sectors = 8,
		.good_sector = 8, .good_nr_sectors = 8,
	},
	{
		.name = "kill: a read of half a 4 KiB block",
		.lbs = 4096, .size_bytes = 4 * MIB,
		.op = TD_OP_READ, .sector = 8, .nr_sectors = 4,
		.good_sector = 8, .good_nr_sectors = 8,
	},
};

static void run_kill_case(void **state)
{
	const struct kill_case *c = *state;
	uint32_t most = TD_MAX(c->nr_sectors, c->good_nr_sectors);
	uint8_t *buf = xmalloc((size_t)most * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_drive_status ds;
	struct env_opts o;
	struct env e;
	struct tbio t;

	assert_non_null(s);
	env_opts_default(&o);
	o.lbs = c->lbs;
	o.size_bytes = c->size_bytes;
	env_create(&e, &o);
	fill_range(buf, c->sector, most, 4);

	submit_sync(&e, &t, c->op, c->sector, c->nr_sectors, buf);
	assert_int_equal(atomic_load(&t.err), -EIO);
	assert_int_equal(t.bio.error, -EIO);
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_KILLED], 1);
	assert_int_equal(s->errors[c->op], 1);
	/* Killed before the drive: nothing written, no command, no tag taken. */
	assert_true(all_value(e.mem, c->size_bytes, 0));
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.commands, 0);
	assert_int_equal(td_tag_busy(td_queue_tag_map(e.q)), 0);

	fill_range(buf, c->good_sector, c->good_nr_sectors, 5);
	submit_sync(&e, &t, TD_OP_WRITE, c->good_sector, c->good_nr_sectors, buf);
	assert_int_equal(atomic_load(&t.err), 0);
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_KILLED], 1);
	assert_memory_equal(env_disk(&e, c->good_sector), buf,
			    (size_t)c->good_nr_sectors * TD_SECTOR_SIZE);
	env_destroy(&e);
	free(s);
	free(buf);
}

/* ---- tags ----------------------------------------------------------------------------- */

static void test_get_tags_lists_blocked_commands_oldest_first(void **state)
{
	static const uint8_t read10[] = { 0x28, 0, 0, 0, 0, 0x40, 0, 0, 0x10, 0 };
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t[2];
	uint8_t *buf = xmalloc(2 * 16 * TD_SECTOR_SIZE);
	struct td_tag_info info[4];
	struct td_tag_map *map;

	(void)state;
	prep_reset();
	env_opts_default(&o);
	o.workers = 2;
	o.gate = true;
	o.elevator = "noop";
	env_create(&e, &o);
	td_queue_set_prep(e.q, recording_prep);
	map = td_queue_tag_map(e.q);
	atomic_store(&e.gate->block_reads, true);
	done_init(&d);

	tbio_init(&t[0], &d, TD_OP_READ, 64, 16, buf);
	t[0].bio.pid = 4242;
	td_queue_submit(e.q, &t[0].bio);
	assert_true(gate_wait_waiting(e.gate, 1));
	struct prep_record r = prep_get(TD_OP_READ);

	tbio_init(&t[1], &d, TD_OP_READ, 300, 8, buf + 16 * TD_SECTOR_SIZE);
	td_queue_submit(e.q, &t[1].bio);
	assert_true(gate_wait_waiting(e.gate, 2));

	assert_int_equal(td_queue_get_tags(e.q, NULL, 0), 2);
	memset(info, 0xee, sizeof(info));
	assert_int_equal(td_queue_get_tags(e.q, info, 4), 2);
	assert_int_equal(info[0].tag, r.tag);
	assert_int_equal(info[0].tag, t[0].tag);
	assert_int_equal(info[0].op, TD_OP_READ);
	assert_int_equal(info[0].sector, 64);
	assert_int_equal(info[0].nr_sectors, 16);
	assert_int_equal(info[0].retries, 0);
	assert_int_equal(info[0].pid, 4242);
	assert_int_equal(info[0].cmd_len, sizeof(read10));
	assert_memory_equal(info[0].cmd, read10, sizeof(read10));
	assert_int_equal(info[1].tag, t[1].tag);
	assert_int_equal(info[1].sector, 300);
	assert_int_equal(info[1].nr_sectors, 8);
	assert_int_not_equal(info[0].tag, info[1].tag);
	/* The map agrees: each tag names its request. */
	assert_ptr_equal(td_tag_find(map, r.tag), r.rq);
	assert_int_equal(td_tag_busy(map), 2);
	/* A short buffer still reports the full count. */
	assert_int_equal(td_queue_get_tags(e.q, info, 1), 2);

	gate_release(e.gate, 2);
	assert_true(done_wait(&d, 2, WAIT_MS));
	assert_int_equal(d.errors, 0);
	assert_int_equal(td_queue_get_tags(e.q, info, 4), 0);
	assert_null(td_tag_find(map, r.tag));
	assert_int_equal(td_tag_busy(map), 0);
	env_destroy(&e);
	done_destroy(&d);
	free(buf);
}

static void run_tag_end_before_end_io(unsigned int workers)
{
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t[4];
	uint8_t *buf = xmalloc(8 * TD_SECTOR_SIZE);

	prep_reset();
	env_opts_default(&o);
	o.workers = workers;
	env_create(&e, &o);
	td_queue_set_prep(e.q, recording_prep);
	done_init(&d);
	fill_range(buf, 0, 8, 6);

	for (int i = 0; i < 4; i++) {
		enum td_op op = i % 2 ? TD_OP_READ : TD_OP_WRITE;

		tbio_init(&t[i], &d, op, (uint64_t)i * 64, 8, buf);
		t[i].map = td_queue_tag_map(e.q);
		t[i].found_at_end = &t[i]; /* anything but NULL */
		t[i].busy_at_end = 99;
		td_queue_submit(e.q, &t[i].bio);
		assert_true(done_wait(&d, (unsigned int)i + 1, WAIT_MS));
		assert_true(t[i].tag >= 0);
		assert_null(t[i].found_at_end);
		assert_int_equal(t[i].busy_at_end, 0);
		assert_int_equal(atomic_load(&t[i].err), 0);
	}
	env_destroy(&e);
	done_destroy(&d);
	free(buf);
}

static void test_tag_is_free_when_end_io_runs_inline(void **state)
{
	(void)state;
	run_tag_end_before_end_io(0);
}

static void test_tag_is_free_when_end_io_runs_on_worker(void **state)
{
	(void)state;
	run_tag_end_before_end_io(2);
}

/* ---- reset, invalidate and retries ---------------------------------------------------- */

struct expect_ev {
	char action;
	uint64_t sector;
};

/* The D, R and C events of @log must be exactly @want, in order. */
static void assert_drc_sequence(const struct trace_log *log, const struct expect_ev *want,
				size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < log->n; i++) {
		const struct td_trace_event *ev = &log->ev[i];

		if (ev->action != 'D' && ev->action != 'R' && ev->action != 'C')
			continue;
		assert_true(k < n);
		if (ev->action != (uint8_t)want[k].action || ev->sector != want[k].sector)
			fail_msg("event %zu: %c %llu, want %c %llu", k, ev->action,
				 (unsigned long long)ev->sector, want[k].action,
				 (unsigned long long)want[k].sector);
		k++;
	}
	assert_int_equal(k, n);
}

static void test_reset_requeues_held_writes_in_dispatch_order(void **state)
{
	static const uint64_t sectors[4] = { 300, 100, 200, 500 };
	static const struct expect_ev want[] = {
		{ 'D', 300 }, { 'D', 100 }, { 'D', 200 }, /* held; 500 waits for a tag */
		{ 'R', 300 }, { 'R', 100 }, { 'R', 200 }, /* reset 1: back ahead of 500 */
		{ 'D', 300 }, { 'D', 100 }, { 'D', 200 }, /* held again */
		{ 'R', 300 }, { 'R', 100 }, { 'R', 200 }, /* reset 2 */
		{ 'D', 300 }, { 'D', 100 }, { 'D', 200 }, { 'C', 300 }, { 'C', 100 }, { 'C', 200 },
		{ 'D', 500 }, { 'C', 500 },
	};
	struct env_opts o;
	struct env e;
	struct tbio t[4];
	uint8_t *buf = xmalloc(4 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_tag_info info[4];
	struct td_drive_status ds;
	struct td_queue_status st;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.trace = true;
	o.depth = 3;
	o.elevator = "noop";
	env_create(&e, &o);
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), 6), 0);

	for (int i = 0; i < 4; i++) {
		uint8_t *p = buf + i * 8 * TD_SECTOR_SIZE;

		fill_range(p, sectors[i], 8, 10);
		tbio_init(&t[i], NULL, TD_OP_WRITE, sectors[i], 8, p);
		td_queue_submit(e.q, &t[i].bio);
		assert_int_equal(atomic_load(&t[i].ended), 0);
	}
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.hung, 3);
	st = env_status(&e);
	assert_int_equal(st.in_flight, 3);
	assert_int_equal(st.queued, 1);

	/* The reply counts the requeued commands, not the one that never had a tag. */
	assert_int_equal(td_queue_reset(e.q, false), 3);
	/*
	 * td-kblockd dispatches them again and the drive holds them again, in
	 * the original order; a user's reset charged them no retry.
	 */
	assert_true(wait_hung(&e, 3));
	assert_int_equal(td_queue_get_tags(e.q, info, 4), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(info[i].sector, sectors[i]);
		assert_int_equal(info[i].retries, 0);
	}
	for (int i = 0; i < 4; i++)
		assert_int_equal(atomic_load(&t[i].ended), 0);

	assert_int_equal(td_queue_reset(e.q, false), 3);
	for (int i = 0; i < 4; i++) {
		assert_true(wait_ended(&t[i]));
		assert_int_equal(atomic_load(&t[i].ended), 1);
		assert_int_equal(atomic_load(&t[i].err), 0);
		assert_memory_equal(env_disk(&e, sectors[i]), buf + i * 8 * TD_SECTOR_SIZE,
				    8 * TD_SECTOR_SIZE);
	}

	struct trace_log *log = trace_collect(&e);

	assert_drc_sequence(log, want, TD_ARRAY_SIZE(want));
	/* Each R names the tag its request held when it was dispatched. */
	for (size_t i = 0; i < log->n; i++) {
		if (log->ev[i].action != 'R')
			continue;
		long d = -1;

		for (size_t j = 0; j < i; j++)
			if (log->ev[j].action == 'D' && log->ev[j].sector == log->ev[i].sector)
				d = (long)j;
		assert_true(d >= 0);
		assert_true(log->ev[i].tag >= 0);
		assert_int_equal(log->ev[i].tag, log->ev[d].tag);
	}
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], 6);
	assert_int_equal(s->counters[TD_STAT_RESETS], 2);
	assert_int_equal(s->counters[TD_STAT_RETRIES_EXHAUSTED], 0);
	assert_int_equal(s->counters[TD_STAT_TIMEOUTS], 0);
	assert_int_equal(s->ios[TD_OP_WRITE], 4);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	assert_int_equal(td_tag_busy(td_queue_tag_map(e.q)), 0);
	free(log);
	env_destroy(&e);
	free(s);
	free(buf);
}

/*
 * A user's reset charges no retry: ten of them in a row, with max_retries 5,
 * and the command held each time still completes with its data.
 */
static void test_user_resets_requeue_without_using_retries(void **state)
{
	struct env_opts o;
	struct env e;
	struct tbio t;
	uint8_t buf[8 * TD_SECTOR_SIZE];
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_tag_info info;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.max_retries = 5;
	env_create(&e, &o);
	/* Held at its first eleven dispatches: the ten resets requeue it each time. */
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), 11), 0);
	fill_range(buf, 120, 8, 12);
	tbio_init(&t, NULL, TD_OP_WRITE, 120, 8, buf);
	td_queue_submit(e.q, &t.bio);
	assert_true(wait_hung(&e, 1));
	for (int i = 0; i < 10; i++) {
		assert_int_equal(td_queue_reset(e.q, false), 1);
		assert_true(wait_hung(&e, 1)); /* dispatched again, and held */
		assert_int_equal(td_queue_get_tags(e.q, &info, 1), 1);
		assert_int_equal(info.retries, 0);
		assert_int_equal(atomic_load(&t.ended), 0);
	}
	assert_int_equal(td_queue_reset(e.q, false), 1);
	assert_true(wait_ended(&t));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 120), buf, sizeof(buf));
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_RESETS], 11);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], 11);
	assert_int_equal(s->counters[TD_STAT_RETRIES_EXHAUSTED], 0);
	assert_int_equal(s->counters[TD_STAT_TIMEOUTS], 0);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	env_destroy(&e);
	free(s);
}

/*
 * A command that times out again and again uses a retry each time, and fails
 * with EIO once it has used more than max_retries: three timeouts with
 * max_retries 2, two requeues, then EIO; the disk never sees the write.
 */
static void test_command_timing_out_repeatedly_fails_with_eio_after_max_retries(void **state)
{
	struct env_opts o;
	struct env e;
	struct tbio t;
	uint8_t *buf = xmalloc(8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_drive_status ds;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.trace = true;
	o.max_retries = 2;
	o.timeout_ms = 20;
	env_create(&e, &o);
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), TD_INJECT_FOREVER), 0);
	fill_range(buf, 0, 8, 11);

	tbio_init(&t, NULL, TD_OP_WRITE, 400, 8, buf);
	td_queue_submit(e.q, &t.bio);
	assert_true(wait_ended(&t));
	assert_int_equal(atomic_load(&t.err), -EIO);
	assert_true(all_value(env_disk(&e, 400), 8 * TD_SECTOR_SIZE, 0));
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_TIMEOUTS], 3);
	assert_int_equal(s->counters[TD_STAT_RESETS], 3);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], 2);
	assert_int_equal(s->counters[TD_STAT_RETRIES_EXHAUSTED], 1);
	assert_int_equal(s->ios[TD_OP_WRITE], 1);
	assert_int_equal(s->errors[TD_OP_WRITE], 1);
	assert_int_equal(env_status(&e).in_flight, 0);
	assert_int_equal(td_tag_busy(td_queue_tag_map(e.q)), 0);
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.hung, 0);

	struct trace_log *log = trace_collect(&e);

	assert_int_equal(trace_count(log, 'R'), 3);
	assert_int_equal(trace_count(log, 'D'), 3);
	assert_int_equal(trace_count(log, 'C'), 1);
	for (size_t i = 0; i < log->n; i++)
		if (log->ev[i].action == 'C')
			assert_int_equal(log->ev[i].error, -EIO);
	free(log);
	td_inject_clear(td_drive_inject(e.drive));
	env_destroy(&e);
	free(s);
	free(buf);
}

static _Atomic uint64_t fake_ns;

static uint64_t fake_now(void *ctx)
{
	(void)ctx;
	return atomic_load(&fake_ns);
}

/*
 * A timeout charges a retry to the commands that timed out, not to the
 * younger ones it requeues along with them. On the queue's own clock: A is
 * dispatched at 0, B at 30 ms, the timeout is 50 ms; at 51 ms only A has
 * timed out.
 */
static void test_timeout_charges_a_retry_only_to_the_timed_out_command(void **state)
{
	struct env_opts o;
	struct env e;
	struct tbio t[2];
	uint8_t *buf = xmalloc(2 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_tag_info info[2];

	(void)state;
	assert_non_null(s);
	atomic_store(&fake_ns, 2000 * TD_NSEC_PER_SEC);
	env_opts_default(&o);
	o.timeout_ms = 50;
	o.elevator = "noop";
	o.clock = (struct td_clock){ .now_ns = fake_now };
	env_create(&e, &o);
	/* Both held at their first dispatch and again at the one after the timeout. */
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), 4), 0);
	for (int i = 0; i < 2; i++)
		fill_range(buf + i * 8 * TD_SECTOR_SIZE, (uint64_t)i * 64, 8, 13);

	tbio_init(&t[0], NULL, TD_OP_WRITE, 0, 8, buf);
	td_queue_submit(e.q, &t[0].bio);
	atomic_fetch_add(&fake_ns, 30 * TD_NSEC_PER_MSEC);
	tbio_init(&t[1], NULL, TD_OP_WRITE, 64, 8, buf + 8 * TD_SECTOR_SIZE);
	td_queue_submit(e.q, &t[1].bio);
	assert_true(wait_hung(&e, 2));

	atomic_fetch_add(&fake_ns, 21 * TD_NSEC_PER_MSEC);
	assert_true(wait_counter(&e, TD_STAT_TIMEOUTS, 1));
	assert_true(wait_hung(&e, 2)); /* both dispatched again, and held */
	assert_int_equal(td_queue_get_tags(e.q, info, 2), 2);
	assert_int_equal(info[0].sector, 0);
	assert_int_equal(info[0].retries, 1);
	assert_int_equal(info[1].sector, 64);
	assert_int_equal(info[1].retries, 0);

	/* The clock stands still: no second timeout. A user's reset lets both go. */
	assert_int_equal(td_queue_reset(e.q, false), 2);
	for (int i = 0; i < 2; i++) {
		assert_true(wait_ended(&t[i]));
		assert_int_equal(atomic_load(&t[i].err), 0);
		assert_memory_equal(env_disk(&e, (uint64_t)i * 64), buf + i * 8 * TD_SECTOR_SIZE,
				    8 * TD_SECTOR_SIZE);
	}
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_TIMEOUTS], 1);
	assert_int_equal(s->counters[TD_STAT_RESETS], 2);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], 4);
	assert_int_equal(s->counters[TD_STAT_RETRIES_EXHAUSTED], 0);
	env_destroy(&e);
	free(s);
	free(buf);
}

/* ---- barriers ------------------------------------------------------------------------- */

static void assert_barrier_order(const struct trace_log *log)
{
	long c1 = trace_find(log, 0, 'C', TD_OP_WRITE, 100);
	long c2 = trace_find(log, 0, 'C', TD_OP_WRITE, 8);
	long df = trace_find(log, 0, 'D', TD_OP_FLUSH, 0);
	long cf = trace_find(log, 0, 'C', TD_OP_FLUSH, 0);
	long d3 = trace_find(log, 0, 'D', TD_OP_WRITE, 16);

	assert_true(c1 >= 0 && c2 >= 0 && df >= 0 && cf >= 0 && d3 >= 0);
	assert_true(df > c1);
	assert_true(df > c2);
	assert_true(d3 > cf);
	/* W3 continues W2 on the disk, but never joined it across the barrier. */
	assert_int_equal(trace_count(log, 'M'), 0);
	assert_int_equal(trace_count(log, 'F'), 0);
	assert_int_equal(log->ev[d3].nr_sectors, 8);
}

static void test_flush_in_a_batch_orders_writes_and_blocks_merging(void **state)
{
	struct env_opts o;
	struct env e;
	struct tbio t[4];
	uint8_t *buf = xmalloc(3 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.trace = true;
	env_create(&e, &o);
	tbio_init(&t[0], NULL, TD_OP_WRITE, 100, 8, buf);
	tbio_init(&t[1], NULL, TD_OP_WRITE, 8, 8, buf + 8 * TD_SECTOR_SIZE);
	tbio_init(&t[2], NULL, TD_OP_FLUSH, 0, 0, NULL);
	tbio_init(&t[3], NULL, TD_OP_WRITE, 16, 8, buf + 16 * TD_SECTOR_SIZE);
	fill_range(buf, 100, 8, 1);
	fill_range(buf + 8 * TD_SECTOR_SIZE, 8, 16, 1);
	for (int i = 0; i < 3; i++)
		t[i].bio.next = &t[i + 1].bio;

	td_queue_submit_list(e.q, &t[0].bio);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(atomic_load(&t[i].ended), 1);
		assert_int_equal(atomic_load(&t[i].err), 0);
	}
	struct trace_log *log = trace_collect(&e);

	assert_barrier_order(log);
	env_stats(&e, s);
	assert_int_equal(s->back_merges[TD_OP_WRITE], 0);
	assert_int_equal(s->front_merges[TD_OP_WRITE], 0);
	assert_int_equal(s->ios[TD_OP_WRITE], 3);
	assert_int_equal(s->ios[TD_OP_FLUSH], 1);
	assert_memory_equal(env_disk(&e, 100), buf, 8 * TD_SECTOR_SIZE);
	assert_memory_equal(env_disk(&e, 8), buf + 8 * TD_SECTOR_SIZE, 16 * TD_SECTOR_SIZE);
	free(log);
	env_destroy(&e);
	free(s);
	free(buf);
}

static void test_flush_waits_for_writes_in_flight_and_holds_later_writes(void **state)
{
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t[4];
	uint8_t *buf = xmalloc(3 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_queue_status st;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.workers = 2;
	o.gate = true;
	o.trace = true;
	env_create(&e, &o);
	atomic_store(&e.gate->block_writes, true);
	done_init(&d);
	fill_range(buf, 100, 8, 2);
	fill_range(buf + 8 * TD_SECTOR_SIZE, 8, 16, 2);

	tbio_init(&t[0], &d, TD_OP_WRITE, 100, 8, buf);
	tbio_init(&t[1], &d, TD_OP_WRITE, 8, 8, buf + 8 * TD_SECTOR_SIZE);
	tbio_init(&t[2], &d, TD_OP_FLUSH, 0, 0, NULL);
	tbio_init(&t[3], &d, TD_OP_WRITE, 16, 8, buf + 16 * TD_SECTOR_SIZE);
	td_queue_submit(e.q, &t[0].bio);
	td_queue_submit(e.q, &t[1].bio);
	assert_true(gate_wait_waiting(e.gate, 2));
	td_queue_submit(e.q, &t[2].bio);
	td_queue_submit(e.q, &t[3].bio);
	st = env_status(&e);
	assert_true(st.barrier_pending);
	assert_int_equal(st.in_flight, 2);
	assert_int_equal(st.queued, 2);
	assert_int_equal(done_count(&d), 0);

	atomic_store(&e.gate->block_writes, false);
	gate_release(e.gate, 2);
	assert_true(done_wait(&d, 4, WAIT_MS));
	assert_int_equal(d.errors, 0);
	struct trace_log *log = trace_collect(&e);

	assert_barrier_order(log);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_WRITE], 3);
	assert_int_equal(s->ios[TD_OP_FLUSH], 1);
	assert_false(env_status(&e).barrier_pending);
	assert_memory_equal(env_disk(&e, 8), buf + 8 * TD_SECTOR_SIZE, 16 * TD_SECTOR_SIZE);
	free(log);
	env_destroy(&e);
	done_destroy(&d);
	free(s);
	free(buf);
}

/* ---- overlapping writes --------------------------------------------------------------- */

#define OVL_THREADS 2
#define OVL_WRITES 150

struct ovl_arg {
	struct env *e;
	uint64_t seed;
	unsigned int id;
	_Atomic unsigned int failures;
};

static void *ovl_thread(void *p)
{
	struct ovl_arg *a = p;
	struct tbio *t = calloc(OVL_WRITES, sizeof(*t));
	uint8_t *buf = malloc(16 * TD_SECTOR_SIZE);
	struct done d;

	if (!t || !buf) {
		atomic_fetch_add(&a->failures, 1);
		goto out_free;
	}
	fill_range(buf, 0, 16, a->id);
	done_init(&d);
	for (unsigned int i = 0; i < OVL_WRITES; i++) {
		uint64_t sector;
		uint32_t nr;

		if (i % 4 == 3) {
			/* Disjoint from everything: proves the drive does run writes in parallel. */
			sector = 8192 + a->id * 2048 + i * 16;
			nr = 8;
		} else {
			sector = rnd_range(&a->seed, 0, 56);
			nr = (uint32_t)rnd_range(&a->seed, 1, 8);
		}
		tbio_init(&t[i], &d, TD_OP_WRITE, sector, nr, buf);
		td_queue_submit(a->e->q, &t[i].bio);
	}
	if (!done_wait(&d, OVL_WRITES, WAIT_MS * 3) || d.errors)
		atomic_fetch_add(&a->failures, 1);
	done_destroy(&d);
out_free:
	free(buf);
	free(t);
	return NULL;
}

static void test_overlapping_writes_never_in_flight_together(void **state)
{
	struct env_opts o;
	struct env e;
	struct ovl_arg a[OVL_THREADS];
	pthread_t th[OVL_THREADS];

	(void)state;
	env_opts_default(&o);
	o.workers = 4;
	o.gate = true;
	o.size_bytes = 8 * MIB;
	env_create(&e, &o);
	e.gate->write_hold_us = 300;
	td_inject_set_latency(td_drive_inject(e.drive), 200);

	for (unsigned int i = 0; i < OVL_THREADS; i++) {
		a[i] = (struct ovl_arg){ .e = &e, .seed = 0x1234567ULL + i * 977, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, ovl_thread, &a[i]), 0);
	}
	for (unsigned int i = 0; i < OVL_THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(atomic_load(&a[i].failures), 0);
	}
	td_queue_drain(e.q);
	pthread_mutex_lock(&e.gate->lock);
	unsigned int overlaps = e.gate->overlaps;
	unsigned int max_active = e.gate->max_active;

	pthread_mutex_unlock(&e.gate->lock);
	assert_int_equal(overlaps, 0);
	assert_true(max_active >= 2);
	assert_true(atomic_load(&e.gate->writes) > 0);
	td_inject_clear(td_drive_inject(e.drive));
	env_destroy(&e);
}

/* ---- run-time changes: elevator and depth --------------------------------------------- */

#define SW_THREADS 2
#define SW_ROUNDS 60
#define SW_BATCH 8
#define SW_BLOCKS 256 /* 4 KiB blocks per thread */

struct sw_arg {
	struct env *e;
	unsigned int id;
	uint64_t seed;
	uint8_t *model; /* what the thread's region must hold */
	_Atomic unsigned int failures;
	atomic_bool *running;
};

static void *sw_thread(void *p)
{
	struct sw_arg *a = p;
	uint64_t base = (uint64_t)a->id * SW_BLOCKS * 8;
	uint8_t *buf = malloc(SW_BATCH * 4096);
	uint8_t *rbuf = malloc(4096);
	struct tbio t[SW_BATCH];
	struct done d;

	if (!buf || !rbuf) {
		atomic_fetch_add(&a->failures, 1);
		goto out_free;
	}
	done_init(&d);
	for (unsigned int round = 0; round < SW_ROUNDS; round++) {
		uint64_t blocks[SW_BATCH];
		unsigned int target = (round + 1) * (SW_BATCH + 1);

		for (unsigned int i = 0; i < SW_BATCH; i++) {
			bool dup;

			do {
				blocks[i] = rnd_range(&a->seed, 0, SW_BLOCKS - 1);
				dup = false;
				for (unsigned int j = 0; j < i; j++)
					dup |= blocks[j] == blocks[i];
			} while (dup);
			uint64_t sector = base + blocks[i] * 8;

			fill_range(buf + i * 4096, sector, 8, round * 16 + a->id + 1);
			tbio_init(&t[i], &d, TD_OP_WRITE, sector, 8, buf + i * 4096);
			td_queue_submit(a->e->q, &t[i].bio);
		}
		if (!done_wait(&d, target - 1, WAIT_MS) || d.errors) {
			atomic_fetch_add(&a->failures, 1);
			break;
		}
		for (unsigned int i = 0; i < SW_BATCH; i++)
			memcpy(a->model + blocks[i] * 4096, buf + i * 4096, 4096);
		/* Read one block back through the queue while the elevator keeps changing. */
		uint64_t b = blocks[rnd_range(&a->seed, 0, SW_BATCH - 1)];

		tbio_init(&t[0], &d, TD_OP_READ, base + b * 8, 8, rbuf);
		td_queue_submit(a->e->q, &t[0].bio);
		if (!done_wait(&d, target, WAIT_MS) || d.errors ||
		    memcmp(rbuf, a->model + b * 4096, 4096) != 0) {
			atomic_fetch_add(&a->failures, 1);
			break;
		}
	}
	done_destroy(&d);
out_free:
	free(rbuf);
	free(buf);
	atomic_store(a->running, false);
	return NULL;
}

static void test_elevator_switch_under_load_loses_no_write(void **state)
{
	static const char *const names[2] = { "noop", "deadline" };
	struct env_opts o;
	struct env e;
	struct sw_arg a[SW_THREADS];
	pthread_t th[SW_THREADS];
	atomic_bool running[SW_THREADS];
	unsigned int switches = 0;
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.workers = 2;
	env_create(&e, &o);
	td_inject_set_latency(td_drive_inject(e.drive), 100);
	for (unsigned int i = 0; i < SW_THREADS; i++) {
		atomic_init(&running[i], true);
		a[i] = (struct sw_arg){ .e = &e, .id = i, .seed = 0xabcdefULL * (i + 1),
					.running = &running[i] };
		a[i].model = calloc(SW_BLOCKS, 4096);
		assert_non_null(a[i].model);
		assert_int_equal(pthread_create(&th[i], NULL, sw_thread, &a[i]), 0);
	}
	while (atomic_load(&running[0]) || atomic_load(&running[1])) {
		assert_int_equal(td_queue_set_elevator(e.q, names[switches % 2]), 0);
		switches++;
		sleep_us(300);
	}
	for (unsigned int i = 0; i < SW_THREADS; i++)
		pthread_join(th[i], NULL);
	td_queue_drain(e.q);
	assert_true(switches > 10);
	assert_int_equal(td_queue_set_elevator(e.q, "no-such-elevator"), -EINVAL);
	for (unsigned int i = 0; i < SW_THREADS; i++) {
		assert_int_equal(atomic_load(&a[i].failures), 0);
		assert_memory_equal(env_disk(&e, (uint64_t)i * SW_BLOCKS * 8), a[i].model,
				    SW_BLOCKS * 4096);
		free(a[i].model);
	}
	env_stats(&e, s);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	assert_int_equal(s->errors[TD_OP_READ], 0);
	assert_int_equal(s->ios[TD_OP_READ], SW_THREADS * SW_ROUNDS);
	td_inject_clear(td_drive_inject(e.drive));
	env_destroy(&e);
	free(s);
}

static void test_depth_resize_from_4_to_1_and_back_with_commands_held(void **state)
{
	struct env_opts o;
	struct env e;
	struct tbio t[5];
	uint8_t *buf = xmalloc(5 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_queue_status st;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.depth = 4;
	o.elevator = "noop";
	env_create(&e, &o);
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), 4), 0);
	for (int i = 0; i < 5; i++) {
		fill_range(buf + i * 8 * TD_SECTOR_SIZE, (uint64_t)i * 100, 8, 20);
		tbio_init(&t[i], NULL, TD_OP_WRITE, (uint64_t)i * 100, 8,
			  buf + i * 8 * TD_SECTOR_SIZE);
	}
	for (int i = 0; i < 4; i++)
		td_queue_submit(e.q, &t[i].bio);
	st = env_status(&e);
	assert_int_equal(st.depth, 4);
	assert_int_equal(st.tags_in_use, 4);

	assert_int_equal(td_queue_set_depth(e.q, 1), 0);
	st = env_status(&e);
	assert_int_equal(st.depth, 1);
	assert_int_equal(st.tags_in_use, 4); /* shrinking ends no command */
	td_queue_submit(e.q, &t[4].bio);
	assert_int_equal(atomic_load(&t[4].ended), 0);
	st = env_status(&e);
	assert_int_equal(st.queued, 1);
	env_stats(&e, s);
	assert_true(s->counters[TD_STAT_DEFERRED] >= 1);

	/*
	 * Back to 4: still all four busy, so the fifth keeps waiting. The run the
	 * change asked td-kblockd for has happened once prep deferred again.
	 */
	uint64_t deferred = s->counters[TD_STAT_DEFERRED];

	assert_int_equal(td_queue_set_depth(e.q, 4), 0);
	assert_true(wait_counter(&e, TD_STAT_DEFERRED, deferred + 1));
	assert_int_equal(atomic_load(&t[4].ended), 0);
	assert_int_equal(env_status(&e).queued, 1);
	/* One more tag lets it go; the hang is spent, so it completes at once. */
	assert_int_equal(td_queue_set_depth(e.q, 5), 0);
	assert_true(wait_ended(&t[4]));
	assert_int_equal(atomic_load(&t[4].ended), 1);
	assert_int_equal(atomic_load(&t[4].err), 0);
	st = env_status(&e);
	assert_int_equal(st.tags_in_use, 4);
	assert_int_equal(st.queued, 0);

	/* Requeue the four held ones through a single tag. */
	assert_int_equal(td_queue_set_depth(e.q, 1), 0);
	assert_int_equal(td_queue_reset(e.q, false), 4);
	for (int i = 0; i < 5; i++) {
		assert_true(wait_ended(&t[i]));
		assert_int_equal(atomic_load(&t[i].ended), 1);
		assert_int_equal(atomic_load(&t[i].err), 0);
		assert_memory_equal(env_disk(&e, (uint64_t)i * 100), buf + i * 8 * TD_SECTOR_SIZE,
				    8 * TD_SECTOR_SIZE);
	}
	assert_int_equal(td_queue_set_depth(e.q, 4), 0);
	st = env_status(&e);
	assert_int_equal(st.depth, 4);
	assert_int_equal(st.tags_in_use, 0);
	assert_int_equal(td_queue_set_depth(e.q, 0), -EINVAL);
	assert_int_equal(td_queue_set_depth(e.q, TD_TAG_DEPTH_MAX + 1), -EINVAL);
	assert_int_equal(env_status(&e).depth, 4);
	env_destroy(&e);
	free(s);
	free(buf);
}

/* ---- timeouts ------------------------------------------------------------------------- */

static void test_command_timeout_resets_and_hung_write_completes(void **state)
{
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t;
	uint8_t buf[8 * TD_SECTOR_SIZE];
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.workers = 2;
	o.timeout_ms = 50;
	env_create(&e, &o);
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), 1), 0);
	done_init(&d);
	fill_range(buf, 72, 8, 30);

	tbio_init(&t, &d, TD_OP_WRITE, 72, 8, buf);
	td_queue_submit(e.q, &t.bio);
	assert_true(done_wait(&d, 1, WAIT_MS));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 72), buf, sizeof(buf));
	env_stats(&e, s);
	assert_true(s->counters[TD_STAT_TIMEOUTS] >= 1);
	assert_true(s->counters[TD_STAT_RESETS] >= s->counters[TD_STAT_TIMEOUTS]);
	assert_true(s->counters[TD_STAT_REQUEUED] >= 1);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	env_destroy(&e);
	done_destroy(&d);
	free(s);
}

static void test_command_timeout_is_measured_on_the_queue_clock(void **state)
{
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t;
	uint8_t buf[8 * TD_SECTOR_SIZE];
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	atomic_store(&fake_ns, 1000 * TD_NSEC_PER_SEC);
	env_opts_default(&o);
	o.workers = 2;
	o.timeout_ms = 50;
	o.clock = (struct td_clock){ .now_ns = fake_now };
	env_create(&e, &o);
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), 1), 0);
	done_init(&d);
	fill_range(buf, 80, 8, 31);

	tbio_init(&t, &d, TD_OP_WRITE, 80, 8, buf);
	td_queue_submit(e.q, &t.bio);
	/* Real time passes, the queue's clock does not: no timeout. */
	sleep_us(200000);
	assert_int_equal(done_count(&d), 0);
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_TIMEOUTS], 0);
	assert_int_equal(td_queue_get_tags(e.q, NULL, 0), 1);

	atomic_fetch_add(&fake_ns, 51 * TD_NSEC_PER_MSEC);
	assert_true(done_wait(&d, 1, WAIT_MS));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 80), buf, sizeof(buf));
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_TIMEOUTS], 1);
	assert_int_equal(s->counters[TD_STAT_RESETS], 1);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], 1);
	env_destroy(&e);
	done_destroy(&d);
	free(s);
}

/* ---- who executes I/O: submitters and td-kblockd, never resets or the timer ----------- */

/*
 * An inline drive executes commands in whatever thread runs the queue. A
 * write is held by the drive (an injected hang) and the gate is closed; then
 * a reset takes it back, asked for by another thread (row 1) or by the timer
 * on a command timeout (row 2). td-kblockd dispatches the requeued write and
 * hands it to the drive's own thread: the write must reach the backend
 * there, and neither the thread that reset, nor the timer, nor td-kblockd
 * may be the one stuck at the gate (the gate records the name of every
 * thread that calls the backend).
 */
struct kick_case {
	const char *name;
	bool timeout; /* the timer resets, not a thread of ours */
};

static const struct kick_case kick_cases[] = {
	{ .name = "kblockd: a reset returns while the write it requeued is blocked in the backend" },
	{ .name = "kblockd: a timeout's reset leaves the requeued write to the drive's thread",
	  .timeout = true },
};

struct admin_thread {
	pthread_t tid;
	struct td_queue *q;
	unsigned int requeued;
	atomic_bool done;
};

static void *admin_reset_main(void *arg)
{
	struct admin_thread *a = arg;

	pthread_setname_np(pthread_self(), "test-admin");
	a->requeued = td_queue_reset(a->q, false);
	atomic_store(&a->done, true);
	return NULL;
}

static void run_kick_case(void **state)
{
	const struct kick_case *c = *state;
	struct admin_thread a = { 0 };
	uint8_t buf[8 * TD_SECTOR_SIZE];
	struct env_opts o;
	struct env e;
	struct tbio t;
	bool returned = true, blocked, timed_out = true;

	env_opts_default(&o);
	o.workers = 0;
	o.gate = true;
	o.timeout_ms = c->timeout ? 50 : 0;
	o.max_retries = 100; /* the write may time out again while the gate holds it */
	env_create(&e, &o);
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), 1), 0);
	fill_range(buf, 200, 8, 14);
	tbio_init(&t, NULL, TD_OP_WRITE, 200, 8, buf);
	td_queue_submit(e.q, &t.bio);
	assert_true(wait_hung(&e, 1));
	atomic_store(&e.gate->block_writes, true);

	if (!c->timeout) {
		a.q = e.q;
		assert_int_equal(pthread_create(&a.tid, NULL, admin_reset_main, &a), 0);
		returned = wait_flag(&a.done, WAIT_MS);
	} else {
		timed_out = wait_counter(&e, TD_STAT_TIMEOUTS, 1);
	}
	/* Still at the gate after the reset returned: it returned while the write was blocked. */
	blocked = gate_wait_waiting(e.gate, 1);
	atomic_store(&e.gate->block_writes, false);
	gate_release(e.gate, 1);
	if (!c->timeout)
		assert_int_equal(pthread_join(a.tid, NULL), 0);

	assert_true(returned);
	assert_true(timed_out);
	assert_true(blocked);
	if (!c->timeout)
		assert_int_equal(a.requeued, 1);
	assert_true(wait_ended(&t));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 200), buf, sizeof(buf));
	assert_true(gate_called_by(e.gate, "td-drive-timer"));
	assert_false(gate_called_by(e.gate, "td-kblockd"));
	assert_false(gate_called_by(e.gate, "test-admin"));
	assert_false(gate_called_by(e.gate, "td-timer"));
	env_destroy(&e);
}

/* ---- bounded drain -------------------------------------------------------------------- */

/*
 * td_queue_drain_timeout() with writes blocked in the backend (the gate stays
 * closed): after the bound, every request fails with EIO, except the ones in
 * the backend, whose buffers the blocked calls may still use: they are
 * counted as failed but end (with EIO) only when their calls return; the
 * queue is dead (a new bio fails at once); when the calls return, their
 * results are dropped (nothing ends twice). The last row drains in time: 0,
 * and the queue keeps serving.
 */
struct drain_case {
	const char *name;
	unsigned int workers;
	bool blocked;		  /* close the gate */
	unsigned int in_backend;  /* writes blocked in the backend */
	unsigned int failed;	  /* what the drain reports */
};

static const struct drain_case drain_cases[] = {
	{ .name = "bounded drain: inline drive, the submitter blocked in the backend",
	  .workers = 0, .blocked = true, .in_backend = 1, .failed = 3 },
	{ .name = "bounded drain: two workers blocked in the backend",
	  .workers = 2, .blocked = true, .in_backend = 2, .failed = 4 },
	{ .name = "bounded drain: everything completes in time", .workers = 2 },
};

struct submitter {
	pthread_t tid;
	struct td_queue *q;
	struct tbio *t;
};

static void *submit_main(void *arg)
{
	struct submitter *sm = arg;

	td_queue_submit(sm->q, &sm->t->bio);
	return NULL;
}

static void run_drain_case(void **state)
{
	const struct drain_case *c = *state;
	uint8_t *buf = xmalloc(4 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_queue_status st;
	struct submitter sm;
	struct env_opts o;
	struct env e;
	struct tbio t[5];
	unsigned int nr = 0;

	assert_non_null(s);
	env_opts_default(&o);
	o.workers = c->workers;
	o.gate = true;
	o.elevator = "noop";
	env_create(&e, &o);
	atomic_store(&e.gate->block_writes, c->blocked);
	for (int i = 0; i < 4; i++)
		fill_range(buf + i * 8 * TD_SECTOR_SIZE, (uint64_t)i * 64, 8, 15);

	/* W0 from a thread of its own: with an inline drive it is the one blocked. */
	tbio_init(&t[nr], NULL, TD_OP_WRITE, 0, 8, buf);
	sm = (struct submitter){ .q = e.q, .t = &t[nr++] };
	assert_int_equal(pthread_create(&sm.tid, NULL, submit_main, &sm), 0);
	if (c->blocked)
		assert_true(gate_wait_waiting(e.gate, 1));
	if (c->workers) {
		tbio_init(&t[nr], NULL, TD_OP_WRITE, 64, 8, buf + 8 * TD_SECTOR_SIZE);
		td_queue_submit(e.q, &t[nr++].bio);
		if (c->blocked)
			assert_true(gate_wait_waiting(e.gate, 2));
	}
	/* A flush waits for them, and a write waits behind the flush. */
	tbio_init(&t[nr], NULL, TD_OP_FLUSH, 0, 0, NULL);
	td_queue_submit(e.q, &t[nr++].bio);
	tbio_init(&t[nr], NULL, TD_OP_WRITE, 128, 8, buf + 2 * 8 * TD_SECTOR_SIZE);
	td_queue_submit(e.q, &t[nr++].bio);

	if (!c->blocked) {
		/* Nothing blocks: W0's submitter returns; only then is W0 surely counted. */
		assert_int_equal(pthread_join(sm.tid, NULL), 0);
		assert_int_equal(td_queue_drain_timeout(e.q, WAIT_MS), 0);
		for (unsigned int i = 0; i < nr; i++) {
			assert_int_equal(atomic_load(&t[i].ended), 1);
			assert_int_equal(atomic_load(&t[i].err), 0);
		}
		/* Not dead: it serves on. */
		submit_sync_wait(&e, &t[nr], TD_OP_WRITE, 192, 8, buf + 3 * 8 * TD_SECTOR_SIZE);
		assert_int_equal(atomic_load(&t[nr].err), 0);
		assert_memory_equal(env_disk(&e, 192), buf + 3 * 8 * TD_SECTOR_SIZE,
				    8 * TD_SECTOR_SIZE);
		env_destroy(&e);
		free(s);
		free(buf);
		return;
	}

	assert_int_equal(td_queue_drain_timeout(e.q, 20), (int)c->failed);
	/* The first in_backend writes are pinned by their blocked calls; the rest failed. */
	for (unsigned int i = 0; i < nr; i++) {
		assert_int_equal(atomic_load(&t[i].ended), i >= c->in_backend);
		if (i >= c->in_backend)
			assert_int_equal(atomic_load(&t[i].err), -EIO);
	}
	/* Failed while the backend calls are still blocked. */
	assert_int_equal(atomic_load(&e.gate->waiting), c->in_backend);
	st = env_status(&e);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.requests_used, c->in_backend);
	assert_int_equal(st.tags_in_use, 0);
	env_stats(&e, s);
	assert_int_equal(s->errors[TD_OP_WRITE], nr - 1 - c->in_backend);
	assert_int_equal(s->errors[TD_OP_FLUSH], 1);
	/* Dead: a new bio fails at once, and a second drain fails nothing more. */
	submit_sync(&e, &t[nr], TD_OP_WRITE, 192, 8, buf + 3 * 8 * TD_SECTOR_SIZE);
	assert_int_equal(atomic_load(&t[nr].err), -EIO);
	assert_int_equal(td_queue_drain_timeout(e.q, 0), 0);

	/* The calls return: their requests fail now, their results dropped; nothing ends twice. */
	atomic_store(&e.gate->block_writes, false);
	gate_release(e.gate, c->in_backend);
	assert_int_equal(pthread_join(sm.tid, NULL), 0);
	for (unsigned int i = 0; i < c->in_backend; i++) {
		assert_true(wait_ended(&t[i]));
		assert_int_equal(atomic_load(&t[i].err), -EIO);
	}
	assert_true(wait_drive_idle(&e));
	for (unsigned int i = 0; i <= nr; i++)
		assert_int_equal(atomic_load(&t[i].ended), 1);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_WRITE], nr - 1);
	assert_int_equal(s->errors[TD_OP_WRITE], nr - 1);
	assert_int_equal(env_status(&e).requests_used, 0);
	env_destroy(&e);
	free(s);
	free(buf);
}

/* ---- a hung medium: backend calls that do not return -------------------------------------- */

/*
 * A write whose backend call hangs (the gate stays closed, as pwrite does on
 * a frozen file system) times out again and again: each reset leaves the
 * call behind (stale, the drive fenced) instead of waiting for it, so the
 * timeouts keep firing and being counted, each charging retries. The write
 * is pinned by its call, which may still read its buffer, so it is never
 * failed, even long past max_retries; a second write, submitted behind the
 * fence, is not pinned and fails with EIO once it has used its retries.
 * When the call returns, the pinned write's retry runs and completes with
 * its data.
 */
static void test_pinned_write_is_not_failed_past_max_retries_while_its_call_hangs(void **state)
{
	uint8_t *buf = xmalloc(2 * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_drive_status ds;
	struct submitter sm;
	struct env_opts o;
	struct env e;
	struct tbio t[2];

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.gate = true;
	o.elevator = "noop";
	o.timeout_ms = 20;
	o.max_retries = 1;
	env_create(&e, &o);
	fill_range(buf, 0, 8, 31);
	fill_range(buf + 8 * TD_SECTOR_SIZE, 64, 8, 31);
	atomic_store(&e.gate->block_writes, true);

	/* W0 from a thread of its own: with an inline drive, that thread is stuck in the call. */
	tbio_init(&t[0], NULL, TD_OP_WRITE, 0, 8, buf);
	sm = (struct submitter){ .q = e.q, .t = &t[0] };
	assert_int_equal(pthread_create(&sm.tid, NULL, submit_main, &sm), 0);
	assert_true(gate_wait_waiting(e.gate, 1));
	assert_true(wait_counter(&e, TD_STAT_TIMEOUTS, 1));

	/* W1 waits behind the fence without holding us, times out and fails. */
	tbio_init(&t[1], NULL, TD_OP_WRITE, 64, 8, buf + 8 * TD_SECTOR_SIZE);
	td_queue_submit(e.q, &t[1].bio);
	assert_true(wait_ended(&t[1]));
	assert_int_equal(atomic_load(&t[1].err), -EIO);
	/*
	 * W0, older, was charged at every timeout W1 was: it has used its retries
	 * too, but its call still holds its buffer, so it waits; and the
	 * timeouts go on.
	 */
	assert_int_equal(atomic_load(&t[0].ended), 0);
	assert_true(wait_counter(&e, TD_STAT_TIMEOUTS, 8));
	assert_int_equal(atomic_load(&t[0].ended), 0);
	assert_int_equal(atomic_load(&e.gate->waiting), 1);
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.stale_calls, 1);
	assert_int_equal(td_drive_get_stale_calls(e.drive, NULL, 0), 1);
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_RETRIES_EXHAUSTED], 1);

	/* No more timeouts, then the call returns: the retry runs and completes. */
	assert_int_equal(td_queue_set_timeout(e.q, 0, 1), 0);
	atomic_store(&e.gate->block_writes, false);
	gate_release(e.gate, 1);
	assert_true(wait_ended(&t[0]));
	assert_int_equal(pthread_join(sm.tid, NULL), 0);
	assert_int_equal(atomic_load(&t[0].err), 0);
	assert_int_equal(atomic_load(&t[0].ended), 1);
	assert_memory_equal(env_disk(&e, 0), buf, 8 * TD_SECTOR_SIZE);
	assert_true(all_value(env_disk(&e, 64), 8 * TD_SECTOR_SIZE, 0));
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.stale_calls, 0);
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_RETRIES_EXHAUSTED], 1);
	assert_int_equal(s->errors[TD_OP_WRITE], 1);
	assert_int_equal(s->ios[TD_OP_WRITE], 2);
	assert_true(s->counters[TD_STAT_TIMEOUTS] >= 8);
	env_destroy(&e);
	free(s);
	free(buf);
}

/* ---- modelled latency never caps the queue --------------------------------------------- */

/*
 * With a latency that outlasts the test (injected, or the ssd or hdd
 * model's), 32 reads submitted one at a time by one thread all go in flight
 * at once on 32 tags, and the submitter is never held: each submit returns
 * with its read still delayed. With an inline drive (workers = 0, the
 * default) the delay waits on the drive's timer, not in the thread that runs
 * the queue, as null_blk's timer completion does. A reset takes the delayed
 * reads back, requeues them, and they go in flight again; a bounded drain
 * then fails them all.
 */
struct depth_case {
	const char *name;
	unsigned int workers;
	enum td_drive_model model;
	bool inject; /* injected latency, not the model's */
};

static const struct depth_case depth_cases[] = {
	{ .name = "latency: injected, inline drive: 32 reads in flight, the submitter not held",
	  .workers = 0, .inject = true },
	{ .name = "latency: injected, two workers: 32 reads in flight", .workers = 2, .inject = true },
	{ .name = "latency: ssd model, workers 0: 32 reads in flight", .model = TD_MODEL_SSD },
	{ .name = "latency: hdd model: 32 reads in flight", .model = TD_MODEL_HDD },
};

#define DEPTH_READS 32
#define LONG_US 600000000U /* ten minutes: never runs out in a test */

/*
 * Return: true when the queue has @n requests in flight on @n tags, the drive
 * all of them, and at least @delayed of them waiting out their latency.
 */
static bool wait_depth_in_flight(struct env *e, unsigned int n, unsigned int delayed)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	struct td_drive_status ds;
	struct td_queue_status st;

	for (;;) {
		st = env_status(e);
		td_drive_get_status(e->drive, &ds);
		if (st.in_flight == n && st.tags_in_use == n && ds.executing + ds.queued == n &&
		    ds.delayed >= delayed)
			return true;
		if (mono_ns() > deadline) {
			print_message("in flight %u, tags %u, drive executing %u queued %u delayed %u\n",
				      st.in_flight, st.tags_in_use, ds.executing, ds.queued,
				      ds.delayed);
			return false;
		}
		sleep_us(200);
	}
}

/* One thread submitting DEPTH_READS reads one at a time, as a FUSE thread would. */
struct depth_submitter {
	pthread_t tid;
	struct env *e;
	struct tbio *t;
	uint8_t *buf;
	unsigned int ended_at_return; /* reads already ended when their submit returned */
	atomic_bool done;
};

static void *depth_submit_main(void *arg)
{
	struct depth_submitter *ds = arg;

	for (unsigned int i = 0; i < DEPTH_READS; i++) {
		/* Apart, so that no two merge: one request each. */
		tbio_init(&ds->t[i], NULL, TD_OP_READ, (uint64_t)i * 16, 8,
			  ds->buf + i * 8 * TD_SECTOR_SIZE);
		td_queue_submit(ds->e->q, &ds->t[i].bio);
		ds->ended_at_return += atomic_load(&ds->t[i].ended);
	}
	atomic_store(&ds->done, true);
	return NULL;
}

static void run_depth_case(void **state)
{
	const struct depth_case *c = *state;
	uint8_t *buf = xmalloc(DEPTH_READS * 8 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_drive_status ds;
	struct tbio *t = calloc(DEPTH_READS, sizeof(*t));
	struct depth_submitter sub = { 0 };
	struct env_opts o;
	struct env e;
	bool not_held;

	assert_non_null(s);
	assert_non_null(t);
	env_opts_default(&o);
	o.workers = c->workers;
	o.model = c->model;
	o.model_us = LONG_US;
	o.depth = DEPTH_READS;
	o.elevator = "noop";
	env_create(&e, &o);
	if (c->inject)
		td_inject_set_latency(td_drive_inject(e.drive), LONG_US);
	sub = (struct depth_submitter){ .e = &e, .t = t, .buf = buf };
	assert_int_equal(pthread_create(&sub.tid, NULL, depth_submit_main, &sub), 0);
	/* Every submit returns at once, none with its read done. */
	not_held = wait_flag(&sub.done, WAIT_MS);
	if (!not_held) {
		/* The submitter sits out the delay: free it (a reset ends a delay) to fail cleanly. */
		td_inject_clear(td_drive_inject(e.drive));
		while (!atomic_load(&sub.done)) {
			td_queue_reset(e.q, false);
			sleep_us(1000);
		}
	}
	assert_int_equal(pthread_join(sub.tid, NULL), 0);
	assert_true(not_held);
	assert_int_equal(sub.ended_at_return, 0);
	/* With an inline drive all of them wait at once, on the timer; else one per thread. */
	unsigned int delayed = c->model ? 1 : c->workers ? c->workers : DEPTH_READS;

	assert_true(wait_depth_in_flight(&e, DEPTH_READS, delayed));
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.delayed, delayed);

	/* A reset takes them back and requeues them; they go in flight again. */
	assert_int_equal(td_queue_reset(e.q, false), DEPTH_READS);
	assert_true(wait_depth_in_flight(&e, DEPTH_READS, delayed));
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], DEPTH_READS);
	assert_int_equal(s->ios[TD_OP_READ], 0);

	assert_int_equal(td_queue_drain_timeout(e.q, 1), DEPTH_READS);
	for (unsigned int i = 0; i < DEPTH_READS; i++) {
		assert_int_equal(atomic_load(&t[i].ended), 1);
		assert_int_equal(atomic_load(&t[i].err), -EIO);
	}
	td_inject_clear(td_drive_inject(e.drive));
	env_destroy(&e);
	free(t);
	free(s);
	free(buf);
}

/* ---- bio mode and windows ------------------------------------------------------------- */

struct reader_arg {
	struct env *e;
	struct tbio t;
	uint8_t *buf;
};

static void *reader_thread(void *p)
{
	struct reader_arg *a = p;

	tbio_init(&a->t, NULL, TD_OP_READ, 256, 8, a->buf);
	td_queue_submit(a->e->q, &a->t.bio);
	return NULL;
}

static void test_bio_mode_goes_straight_to_the_drive_without_requests(void **state)
{
	struct env_opts o;
	struct env e;
	struct tbio t;
	uint8_t *wbuf = xmalloc(8 * TD_SECTOR_SIZE);
	struct reader_arg ra = { .e = &e, .buf = xmalloc(8 * TD_SECTOR_SIZE) };
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_queue_status st;
	struct td_drive_status ds;
	pthread_t th;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.mode = TD_MODE_BIO;
	o.gate = true;
	o.size_bytes = 1 * MIB;
	env_create(&e, &o);
	assert_int_equal(td_queue_mode(e.q), TD_MODE_BIO);
	fill_range(wbuf, 256, 8, 40);

	/* Synchronous: the bio has ended when submit returns. */
	submit_sync(&e, &t, TD_OP_WRITE, 256, 8, wbuf);
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 256), wbuf, 8 * TD_SECTOR_SIZE);

	atomic_store(&e.gate->block_reads, true);
	assert_int_equal(pthread_create(&th, NULL, reader_thread, &ra), 0);
	assert_true(gate_wait_waiting(e.gate, 1));
	st = env_status(&e);
	assert_int_equal(st.mode, TD_MODE_BIO);
	assert_string_equal(st.elevator, "none");
	assert_int_equal(st.requests_used, 0);
	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.tags_in_use, 0);
	gate_release(e.gate, 1);
	pthread_join(th, NULL);
	assert_int_equal(atomic_load(&ra.t.ended), 1);
	assert_int_equal(atomic_load(&ra.t.err), 0);
	assert_memory_equal(ra.buf, wbuf, 8 * TD_SECTOR_SIZE);
	atomic_store(&e.gate->block_reads, false);

	/* Past the end: killed, and the drive never sees it. */
	td_drive_get_status(e.drive, &ds);
	uint64_t commands = ds.commands;

	submit_sync(&e, &t, TD_OP_WRITE, 2044, 8, wbuf);
	assert_int_equal(atomic_load(&t.err), -EIO);
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.commands, commands);
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_KILLED], 1);
	assert_int_equal(s->ios[TD_OP_READ], 1);
	assert_int_equal(s->ios[TD_OP_WRITE], 2);
	assert_int_equal(s->errors[TD_OP_WRITE], 1);
	assert_true(all_value(env_disk(&e, 2044), 4 * TD_SECTOR_SIZE, 0));
	/* Reset has nothing to do in bio mode. */
	assert_int_equal(td_queue_reset(e.q, false), 0);
	env_destroy(&e);
	free(s);
	free(ra.buf);
	free(wbuf);
}

static void run_window(enum td_queue_mode mode)
{
	struct env_opts o;
	struct env e;
	struct tbio t;
	uint8_t *buf = xmalloc(16 * TD_SECTOR_SIZE);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_stats_snapshot *s2 = calloc(1, sizeof(*s2));
	struct td_drive_status ds, ds2;

	assert_non_null(s);
	assert_non_null(s2);
	env_opts_default(&o);
	o.mode = mode;
	o.size_bytes = 8 * MIB; /* 16384 sectors */
	env_create(&e, &o);
	assert_int_equal(td_queue_set_window(e.q, 0, 0), -EINVAL);
	assert_int_equal(td_queue_set_window(e.q, 16384, 8), -EINVAL);
	assert_int_equal(td_queue_set_window(e.q, 16000, 400), -EINVAL);
	assert_int_equal(td_queue_capacity(e.q), 16384);
	assert_int_equal(td_queue_set_window(e.q, 2048, 4096), 0);
	assert_int_equal(td_queue_capacity(e.q), 4096);
	assert_int_equal(td_queue_physical_capacity(e.q), 16384);

	fill_range(buf, 0, 8, 50);
	submit_sync(&e, &t, TD_OP_WRITE, 0, 8, buf);
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 2048), buf, 8 * TD_SECTOR_SIZE);
	assert_true(all_value(e.mem, 2048 * TD_SECTOR_SIZE, 0));
	fill_range(buf, 4088, 8, 51);
	submit_sync(&e, &t, TD_OP_WRITE, 4088, 8, buf); /* the window's last 8 sectors */
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(env_disk(&e, 2048 + 4088), buf, 8 * TD_SECTOR_SIZE);
	submit_sync(&e, &t, TD_OP_READ, 4088, 8, buf + 8 * TD_SECTOR_SIZE);
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(buf + 8 * TD_SECTOR_SIZE, buf, 8 * TD_SECTOR_SIZE);

	env_stats(&e, s);
	td_drive_get_status(e.drive, &ds);
	submit_sync(&e, &t, TD_OP_WRITE, 4096, 8, buf);
	assert_int_equal(atomic_load(&t.err), -EIO);
	submit_sync(&e, &t, TD_OP_READ, 4092, 8, buf);
	assert_int_equal(atomic_load(&t.err), -EIO);
	env_stats(&e, s2);
	td_drive_get_status(e.drive, &ds2);
	/* Refused by the window: no I/O counted, nothing reached the drive or the disk. */
	assert_int_equal(ds2.commands, ds.commands);
	assert_memory_equal(s2->ios, s->ios, sizeof(s->ios));
	assert_memory_equal(s2->errors, s->errors, sizeof(s->errors));
	assert_int_equal(s2->counters[TD_STAT_KILLED], 0);
	assert_true(all_value(env_disk(&e, 2048 + 4096), 8 * TD_SECTOR_SIZE, 0));
	td_queue_drain(e.q);
	env_destroy(&e);
	free(s2);
	free(s);
	free(buf);
}

static void test_window_remaps_sectors_in_bio_mode(void **state)
{
	(void)state;
	run_window(TD_MODE_BIO);
}

static void test_window_remaps_sectors_in_rq_mode(void **state)
{
	(void)state;
	run_window(TD_MODE_RQ);
}

/* ---- plugging ------------------------------------------------------------------------- */

static void test_submit_list_back_merges_contiguous_writes_up_to_max_sectors(void **state)
{
	struct env_opts o;
	struct env e;
	struct tbio *t = calloc(64, sizeof(*t));
	uint8_t *buf = xmalloc(64 * 4096);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(t);
	assert_non_null(s);
	env_opts_default(&o);
	o.depth = 1;
	o.max_sectors = 128; /* 16 bios of 4 KiB per request */
	o.trace = true;
	env_create(&e, &o);
	fill_range(buf, 0, 512, 60);
	for (int i = 0; i < 64; i++) {
		tbio_init(&t[i], NULL, TD_OP_WRITE, (uint64_t)i * 8, 8, buf + i * 4096);
		if (i)
			t[i - 1].bio.next = &t[i].bio;
	}
	td_queue_submit_list(e.q, &t[0].bio);
	for (int i = 0; i < 64; i++) {
		assert_int_equal(atomic_load(&t[i].ended), 1);
		assert_int_equal(atomic_load(&t[i].err), 0);
	}
	env_stats(&e, s);
	assert_int_equal(s->back_merges[TD_OP_WRITE], 60);
	assert_int_equal(s->front_merges[TD_OP_WRITE], 0);
	assert_int_equal(s->ios[TD_OP_WRITE], 4);
	assert_int_equal(s->sectors[TD_OP_WRITE], 512);
	assert_memory_equal(e.mem, buf, 64 * 4096);

	struct trace_log *log = trace_collect(&e);
	size_t nd = 0;

	for (size_t i = 0; i < log->n; i++) {
		if (log->ev[i].action != 'D')
			continue;
		assert_int_equal(log->ev[i].sector, nd * 128);
		assert_int_equal(log->ev[i].nr_sectors, 128);
		nd++;
	}
	assert_int_equal(nd, 4);
	assert_int_equal(trace_count(log, 'M'), 60);
	assert_int_equal(trace_count(log, 'Q'), 64);
	assert_int_equal(trace_count(log, 'G'), 4);
	free(log);
	env_destroy(&e);
	free(s);
	free(buf);
	free(t);
}

/*
 * A bio that fills the gap between two queued requests back-merges into the
 * first, which then swallows the second: one request completes, and both
 * merges are counted, so requests + merges still equals the bios submitted.
 */
static void test_merge_that_joins_two_requests_counts_both_merges(void **state)
{
	static const uint64_t sectors[3] = { 0, 16, 8 };
	struct env_opts o;
	struct env e;
	struct tbio t[3];
	uint8_t *buf = xmalloc(3 * 4096);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.depth = 1;
	o.elevator = "deadline";
	o.trace = true;
	env_create(&e, &o);
	fill_range(buf, 0, 24, 61);
	for (int i = 0; i < 3; i++) {
		tbio_init(&t[i], NULL, TD_OP_WRITE, sectors[i], 8, buf + sectors[i] * 512);
		if (i)
			t[i - 1].bio.next = &t[i].bio;
	}
	td_queue_submit_list(e.q, &t[0].bio);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&t[i].ended), 1);
		assert_int_equal(atomic_load(&t[i].err), 0);
	}
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_WRITE], 1);
	assert_int_equal(s->sectors[TD_OP_WRITE], 24);
	assert_int_equal(s->back_merges[TD_OP_WRITE], 2);
	assert_int_equal(s->front_merges[TD_OP_WRITE], 0);
	assert_memory_equal(e.mem, buf, 3 * 4096);

	struct trace_log *log = trace_collect(&e);

	assert_int_equal(trace_count(log, 'Q'), 3);
	assert_int_equal(trace_count(log, 'G'), 2);
	assert_int_equal(trace_count(log, 'M'), 1);
	assert_int_equal(trace_count(log, 'D'), 1);
	free(log);
	env_destroy(&e);
	free(s);
	free(buf);
}

static void run_submit_list_beyond_pool(unsigned int workers)
{
	struct env_opts o;
	struct env e;
	struct done d;
	struct tbio t[16];
	uint8_t *buf = xmalloc(16 * 4096);

	env_opts_default(&o);
	o.nr_requests = 4;
	o.workers = workers;
	env_create(&e, &o);
	done_init(&d);
	/* Every other block: nothing merges, so the batch needs 16 requests from a pool of 4. */
	for (int i = 0; i < 16; i++) {
		fill_range(buf + i * 4096, (uint64_t)i * 16, 8, 61);
		tbio_init(&t[i], &d, TD_OP_WRITE, (uint64_t)i * 16, 8, buf + i * 4096);
		if (i)
			t[i - 1].bio.next = &t[i].bio;
	}
	td_queue_submit_list(e.q, &t[0].bio);
	assert_true(done_wait(&d, 16, WAIT_MS));
	assert_int_equal(d.errors, 0);
	for (int i = 0; i < 16; i++)
		assert_memory_equal(env_disk(&e, (uint64_t)i * 16), buf + i * 4096, 4096);
	env_destroy(&e);
	done_destroy(&d);
	free(buf);
}

static void test_submit_list_larger_than_request_pool_completes_inline(void **state)
{
	(void)state;
	run_submit_list_beyond_pool(0);
}

static void test_submit_list_larger_than_request_pool_completes_threaded(void **state)
{
	(void)state;
	run_submit_list_beyond_pool(2);
}

/* ---- lifetime ------------------------------------------------------------------------- */

static void test_destroy_right_after_drain_is_safe(void **state)
{
	uint8_t *buf = xmalloc(4 * 4096);

	(void)state;
	fill_range(buf, 0, 32, 70);
	for (int round = 0; round < 100; round++) {
		struct env_opts o;
		struct env e;
		struct tbio t[4];

		env_opts_default(&o);
		o.workers = 2;
		o.size_bytes = 1 * MIB;
		env_create(&e, &o);
		for (int i = 0; i < 4; i++) {
			tbio_init(&t[i], NULL, TD_OP_WRITE, (uint64_t)i * 16, 8, buf + i * 4096);
			td_queue_submit(e.q, &t[i].bio);
		}
		env_destroy(&e); /* drains, then destroys at once */
		for (int i = 0; i < 4; i++)
			assert_int_equal(atomic_load(&t[i].ended), 1);
	}
	free(buf);
}

/* ---- the stress test ------------------------------------------------------------------ */

/*
 * Four writer threads and a chaos thread on a 16 MiB memory disk (4096 blocks
 * of 4 KiB), two drive workers and injected latency, for STRESS_MS.
 *
 * Why the expected contents are exact: the disk is cut into units of two
 * blocks, unit u belongs to writer u % 4, and only its owner ever writes it.
 * A write is a run of 1-8 of the owner's units (u, u + 4, u + 8, ...), one
 * 4 KiB bio per block, submitted together (as a plugged list or one by one):
 * the two bios of a unit merge, and bios of neighbouring units of different
 * writers sit side by side in the queue and merge into shared requests. The
 * owner waits
 * for every bio of a write before recording it in its model and issuing the
 * next, so for each block the model is the last completed write, and nothing
 * the queue may legally do (reorder, merge, requeue after a reset, retry)
 * can change the final contents. Anything else fails: a requeued write
 * landing after a newer one, a write lost or doubled by a reset, data from
 * a wrong buffer, a stale command executed after its tag was invalidated.
 * Writers also read back some of their blocks mid-run and compare them with
 * the model at that moment, which catches a late overwrite that a later
 * write would hide again.
 *
 * Every sector is stamped with (thread, sequence, sector), so a mismatch
 * names what was found. The chaos thread resets the drive every 0.2-2 ms
 * and now and then switches the elevator or changes the depth, so resets
 * hit commands queued, held in latency, executing and completing.
 */
#define STRESS_WRITERS 4
#define STRESS_BLOCKS 4096 /* 16 MiB of 4 KiB blocks */
#define STRESS_UNIT 2	   /* blocks per unit of ownership */
#define STRESS_UNITS (STRESS_BLOCKS / STRESS_UNIT)
#define STRESS_RUN_MAX 8   /* units per write */
#define STRESS_BIOS_MAX (STRESS_RUN_MAX * STRESS_UNIT)
#define STRESS_MS_DEFAULT 3000

struct stress {
	struct env *e;
	atomic_bool stop;
	uint64_t *model; /* per block: the stamp of its last completed write, 0 = never */
	_Atomic unsigned int failures;
	_Atomic unsigned int verify_failures;
	_Atomic uint64_t writes;
	_Atomic uint64_t reads;
	_Atomic uint64_t resets;
	_Atomic uint64_t switches;
};

struct stress_writer {
	struct stress *s;
	unsigned int id;
	uint64_t seed;
};

static uint64_t stress_stamp(unsigned int id, uint64_t seq)
{
	return ((uint64_t)(id + 1) << 56) | seq;
}

/* Block @i of writer @id's run starting at its @first-th unit. */
static uint64_t stress_block(unsigned int id, uint64_t first, unsigned int i)
{
	uint64_t unit = (first + i / STRESS_UNIT) * STRESS_WRITERS + id;

	return unit * STRESS_UNIT + i % STRESS_UNIT;
}

static void *stress_writer_main(void *p)
{
	struct stress_writer *w = p;
	struct stress *s = w->s;
	struct tbio *t = calloc(STRESS_BIOS_MAX, sizeof(*t));
	uint8_t *buf = malloc(STRESS_BIOS_MAX * 4096);
	uint8_t *want = malloc(4096);
	struct done d;
	unsigned int expect = 0;
	uint64_t seq = 0;

	if (!t || !buf || !want) {
		atomic_fetch_add(&s->failures, 1);
		goto out_free;
	}
	done_init(&d);
	while (!atomic_load(&s->stop)) {
		uint64_t first = rnd_range(&w->seed, 0, STRESS_UNITS / STRESS_WRITERS - 1);
		unsigned int units = (unsigned int)rnd_range(&w->seed, 1, STRESS_RUN_MAX);
		uint64_t stamp = stress_stamp(w->id, ++seq);
		bool verify = rnd_range(&w->seed, 0, 3) == 0;
		enum td_op op = verify ? TD_OP_READ : TD_OP_WRITE;
		unsigned int n;

		if (first + units > STRESS_UNITS / STRESS_WRITERS)
			units = (unsigned int)(STRESS_UNITS / STRESS_WRITERS - first);
		n = units * STRESS_UNIT;
		for (unsigned int i = 0; i < n; i++) {
			uint64_t block = stress_block(w->id, first, i);

			if (op == TD_OP_WRITE)
				fill_range(buf + i * 4096, block * 8, 8, stamp);
			tbio_init(&t[i], &d, op, block * 8, 8, buf + i * 4096);
			if (i)
				t[i - 1].bio.next = &t[i].bio;
		}
		if (rnd_range(&w->seed, 0, 1)) {
			td_queue_submit_list(s->e->q, &t[0].bio);
		} else {
			for (unsigned int i = 0; i < n; i++) {
				t[i].bio.next = NULL;
				td_queue_submit(s->e->q, &t[i].bio);
			}
		}
		expect += n;
		if (!done_wait(&d, expect, WAIT_MS * 3) || d.errors) {
			atomic_fetch_add(&s->failures, 1);
			break;
		}
		for (unsigned int i = 0; i < n; i++) {
			uint64_t block = stress_block(w->id, first, i);

			if (atomic_load(&t[i].ended) != 1)
				atomic_fetch_add(&s->failures, 1);
			if (op == TD_OP_WRITE) {
				s->model[block] = stamp; /* only this thread touches @block */
				continue;
			}
			if (s->model[block])
				fill_range(want, block * 8, 8, s->model[block]);
			else
				memset(want, 0, 4096);
			if (memcmp(want, buf + i * 4096, 4096) != 0)
				atomic_fetch_add(&s->verify_failures, 1);
		}
		atomic_fetch_add(op == TD_OP_WRITE ? &s->writes : &s->reads, 1);
	}
	done_destroy(&d);
out_free:
	free(want);
	free(buf);
	free(t);
	return NULL;
}

static void *stress_chaos_main(void *p)
{
	static const char *const names[2] = { "noop", "deadline" };
	struct stress *s = p;
	uint64_t seed = 0x5eed5eedULL;
	unsigned int round = 0;

	while (!atomic_load(&s->stop)) {
		sleep_us(rnd_range(&seed, 200, 2000));
		td_queue_reset(s->e->q, false);
		atomic_fetch_add(&s->resets, 1);
		if (++round % 5 == 0) {
			if (td_queue_set_elevator(s->e->q, names[round / 5 % 2]))
				atomic_fetch_add(&s->failures, 1);
			atomic_fetch_add(&s->switches, 1);
		}
		if (round % 3 == 0 &&
		    td_queue_set_depth(s->e->q, (unsigned int)rnd_range(&seed, 1, 8)))
			atomic_fetch_add(&s->failures, 1);
	}
	return NULL;
}

static void test_stress_resets_under_load_keep_every_completed_write(void **state)
{
	struct env_opts o;
	struct env e;
	struct stress s;
	struct stress_writer w[STRESS_WRITERS];
	pthread_t th[STRESS_WRITERS + 1];
	struct td_stats_snapshot *snap = calloc(1, sizeof(*snap));
	const char *ms_env = getenv("TD_STRESS_MS");
	unsigned int run_ms = ms_env ? (unsigned int)atoi(ms_env) : STRESS_MS_DEFAULT;
	uint8_t *want = xmalloc(4096);

	(void)state;
	assert_non_null(snap);
	env_opts_default(&o);
	o.size_bytes = 16 * MIB;
	o.workers = 2;
	o.depth = 8;
	o.max_retries = 1000000; /* resets are the point here, not failing requests */
	env_create(&e, &o);
	td_inject_set_latency(td_drive_inject(e.drive), 300);

	memset(&s, 0, sizeof(s));
	s.e = &e;
	s.model = calloc(STRESS_BLOCKS, sizeof(*s.model));
	assert_non_null(s.model);
	for (unsigned int i = 0; i < STRESS_WRITERS; i++) {
		w[i] = (struct stress_writer){ .s = &s, .id = i, .seed = 0x9e3779b9ULL * (i + 3) };
		assert_int_equal(pthread_create(&th[i], NULL, stress_writer_main, &w[i]), 0);
	}
	assert_int_equal(pthread_create(&th[STRESS_WRITERS], NULL, stress_chaos_main, &s), 0);
	sleep_us((uint64_t)run_ms * 1000);
	atomic_store(&s.stop, true);
	for (unsigned int i = 0; i <= STRESS_WRITERS; i++)
		pthread_join(th[i], NULL);
	/* Before draining: a queue that lost a bio would never drain. */
	assert_int_equal(atomic_load(&s.failures), 0);
	assert_int_equal(atomic_load(&s.verify_failures), 0);
	td_queue_drain(e.q);

	for (uint64_t b = 0; b < STRESS_BLOCKS; b++) {
		if (s.model[b])
			fill_range(want, b * 8, 8, s.model[b]);
		else
			memset(want, 0, 4096);
		if (memcmp(env_disk(&e, b * 8), want, 4096) != 0)
			fail_msg("block %llu differs from its last completed write %llx",
				 (unsigned long long)b, (unsigned long long)s.model[b]);
	}
	env_stats(&e, snap);
	assert_true(snap->counters[TD_STAT_RESETS] > 10);
	assert_int_equal(snap->counters[TD_STAT_RESETS], atomic_load(&s.resets));
	assert_true(snap->counters[TD_STAT_REQUEUED] > 0);
	assert_int_equal(snap->counters[TD_STAT_RETRIES_EXHAUSTED], 0);
	assert_int_equal(snap->errors[TD_OP_WRITE], 0);
	assert_int_equal(snap->errors[TD_OP_READ], 0);
	assert_true(atomic_load(&s.writes) > 100);
	assert_true(atomic_load(&s.reads) > 10);
	assert_true(atomic_load(&s.switches) > 2);
	assert_true(snap->back_merges[TD_OP_WRITE] + snap->front_merges[TD_OP_WRITE] > 0);
	assert_int_equal(td_tag_busy(td_queue_tag_map(e.q)), 0);
	struct td_queue_status st = env_status(&e);

	assert_int_equal(st.in_flight, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.requests_used, 0);
	print_message("stress: %llu writes, %llu reads, %llu resets, %llu requeued, %llu merges\n",
		      (unsigned long long)atomic_load(&s.writes),
		      (unsigned long long)atomic_load(&s.reads),
		      (unsigned long long)snap->counters[TD_STAT_RESETS],
		      (unsigned long long)snap->counters[TD_STAT_REQUEUED],
		      (unsigned long long)(snap->back_merges[TD_OP_WRITE] +
					   snap->front_merges[TD_OP_WRITE]));
	td_inject_clear(td_drive_inject(e.drive));
	env_destroy(&e);
	free(s.model);
	free(snap);
	free(want);
}

/* A table's rows as cmocka cases, each with its row as the initial state. */
#define TABLE_CASES(fn, table, out, n)                                                   \
	do {                                                                             \
		for (size_t i_ = 0; i_ < TD_ARRAY_SIZE(table); i_++)                      \
			(out)[(n)++] = (struct CMUnitTest){ .name = (table)[i_].name,     \
							    .test_func = (fn),            \
							    .initial_state = (void *)&(table)[i_] }; \
	} while (0)

/* The cases that run on every queue mode under test (test_queue_mq.c runs them in mq). */
#define QUEUE_SHARED_CASES \
	cmocka_unit_test(test_third_read_deferred_while_two_tags_busy_then_completes), \
	cmocka_unit_test(test_prep_defer_retried_by_timer_until_resource_frees), \
	cmocka_unit_test(test_get_tags_lists_blocked_commands_oldest_first), \
	cmocka_unit_test(test_tag_is_free_when_end_io_runs_inline), \
	cmocka_unit_test(test_tag_is_free_when_end_io_runs_on_worker), \
	cmocka_unit_test(test_reset_requeues_held_writes_in_dispatch_order), \
	cmocka_unit_test(test_user_resets_requeue_without_using_retries), \
	cmocka_unit_test(test_command_timing_out_repeatedly_fails_with_eio_after_max_retries), \
	cmocka_unit_test(test_timeout_charges_a_retry_only_to_the_timed_out_command), \
	cmocka_unit_test(test_flush_in_a_batch_orders_writes_and_blocks_merging), \
	cmocka_unit_test(test_flush_waits_for_writes_in_flight_and_holds_later_writes), \
	cmocka_unit_test(test_overlapping_writes_never_in_flight_together), \
	cmocka_unit_test(test_elevator_switch_under_load_loses_no_write), \
	cmocka_unit_test(test_depth_resize_from_4_to_1_and_back_with_commands_held), \
	cmocka_unit_test(test_command_timeout_resets_and_hung_write_completes), \
	cmocka_unit_test(test_command_timeout_is_measured_on_the_queue_clock), \
	cmocka_unit_test(test_bio_mode_goes_straight_to_the_drive_without_requests), \
	cmocka_unit_test(test_window_remaps_sectors_in_bio_mode), \
	cmocka_unit_test(test_window_remaps_sectors_in_rq_mode), \
	cmocka_unit_test(test_submit_list_back_merges_contiguous_writes_up_to_max_sectors), \
	cmocka_unit_test(test_merge_that_joins_two_requests_counts_both_merges), \
	cmocka_unit_test(test_submit_list_larger_than_request_pool_completes_inline), \
	cmocka_unit_test(test_submit_list_larger_than_request_pool_completes_threaded), \
	cmocka_unit_test(test_destroy_right_after_drain_is_safe), \
	cmocka_unit_test(test_pinned_write_is_not_failed_past_max_retries_while_its_call_hangs), \
	cmocka_unit_test(test_stress_resets_under_load_keep_every_completed_write),

#ifndef TEST_QUEUE_NO_MAIN
int main(void)
{
	static const struct CMUnitTest single[] = {
		QUEUE_SHARED_CASES
	};
	struct CMUnitTest tests[TD_ARRAY_SIZE(single) + TD_ARRAY_SIZE(prep_cases) +
			       TD_ARRAY_SIZE(kill_cases) + TD_ARRAY_SIZE(kick_cases) +
			       TD_ARRAY_SIZE(drain_cases) + TD_ARRAY_SIZE(depth_cases)];
	size_t n = 0;

	TABLE_CASES(run_prep_case, prep_cases, tests, n);
	TABLE_CASES(run_kill_case, kill_cases, tests, n);
	for (size_t i = 0; i < TD_ARRAY_SIZE(single); i++)
		tests[n++] = single[i];
	TABLE_CASES(run_kick_case, kick_cases, tests, n);
	TABLE_CASES(run_drain_case, drain_cases, tests, n);
	TABLE_CASES(run_depth_case, depth_cases, tests, n);

	/* Resets and timeouts are logged; the tests check them through the stats. */
	td_log_init("test_queue", TD_LOG_ERR);
	alarm(WATCHDOG_S);
	return _cmocka_run_group_tests("test_queue", tests, n, NULL, NULL);
}
#endif /* TEST_QUEUE_NO_MAIN */
