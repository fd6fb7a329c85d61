// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_drive_async.c - the drive on an asynchronous backend (drive_exec.c):
 * one command is one backend operation, completed from the backend's own
 * thread; reads and writes go through the operation's bounce buffer; a
 * reset makes outstanding operations stale, requeues their requests and
 * fences the drive (nothing starts) until every stale operation has
 * returned; a stale completion completes nothing.
 *
 * The backend here is memory with a completer thread that can hold
 * operations until the test releases them, which is how a cluster that
 * stopped answering looks to the drive.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "unit_util.h"

#define SIZE	(4ULL << 20)
#define WAIT_MS 10000
#define MAX_OPS 256

/* ---- an asynchronous memory backend that can hold its operations ---------------------- */

struct abe {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint8_t *mem;
	struct td_backend_io *ops[MAX_OPS]; /* submitted, not completed, in order */
	unsigned int nr_ops;
	bool hold;		/* operations wait for abe_release() */
	unsigned int released;	/* how many held ones may complete */
	unsigned int submitted; /* since creation */
	unsigned int fua_writes;
	unsigned int poison;	/* the next N reads return 0xEE instead of the data */
	int refuse;		/* submit returns this when not 0 */
	bool stop;
	pthread_t thread;
};

static void abe_apply(struct abe *b, struct td_backend_io *io, bool poison)
{
	switch (io->op) {
	case TD_OP_READ:
		if (poison)
			memset(io->buf, 0xEE, io->len);
		else
			memcpy(io->buf, b->mem + io->off, io->len);
		break;
	case TD_OP_WRITE:
		memcpy(b->mem + io->off, io->buf, io->len);
		break;
	case TD_OP_DISCARD:
	case TD_OP_WRITE_ZEROES:
		memset(b->mem + io->off, 0, io->len);
		break;
	case TD_OP_FLUSH:
		break;
	}
}

static void *abe_main(void *arg)
{
	struct abe *b = arg;

	pthread_mutex_lock(&b->lock);
	for (;;) {
		while (!b->stop && (!b->nr_ops || (b->hold && !b->released)))
			pthread_cond_wait(&b->cond, &b->lock);
		if (!b->nr_ops && b->stop)
			break;
		if (!b->nr_ops || (b->hold && !b->released))
			continue;
		struct td_backend_io *io = b->ops[0];
		bool poison = io->op == TD_OP_READ && b->poison;

		if (poison)
			b->poison--;
		memmove(b->ops, b->ops + 1, --b->nr_ops * sizeof(b->ops[0]));
		if (b->hold)
			b->released--;
		abe_apply(b, io, poison);
		pthread_cond_broadcast(&b->cond);
		pthread_mutex_unlock(&b->lock);
		io->done(io, 0);
		pthread_mutex_lock(&b->lock);
	}
	pthread_mutex_unlock(&b->lock);
	return NULL;
}

static int abe_submit(void *priv, struct td_backend_io *io)
{
	struct abe *b = priv;
	int err = 0;

	pthread_mutex_lock(&b->lock);
	if (b->refuse) {
		err = b->refuse;
	} else {
		assert_true(b->nr_ops < MAX_OPS);
		b->ops[b->nr_ops++] = io;
		b->submitted++;
		if (io->op == TD_OP_WRITE && io->fua)
			b->fua_writes++;
		pthread_cond_broadcast(&b->cond);
	}
	pthread_mutex_unlock(&b->lock);
	return err;
}

/* The drive destroys the backend: stop the completer once everything returned. */
static void abe_destroy(void *priv)
{
	struct abe *b = priv;

	pthread_mutex_lock(&b->lock);
	b->stop = true;
	b->hold = false;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	pthread_join(b->thread, NULL);
}

static const struct td_backend_ops abe_ops = {
	.name = "held-memory",
	.submit = abe_submit,
	.destroy = abe_destroy,
};

static struct abe *abe_create(void)
{
	struct abe *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	b->mem = calloc(1, SIZE);
	assert_non_null(b->mem);
	pthread_mutex_init(&b->lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	assert_int_equal(pthread_create(&b->thread, NULL, abe_main, b), 0);
	return b;
}

static void abe_free(struct abe *b)
{
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	free(b->mem);
	free(b);
}

static void abe_set_hold(struct abe *b, bool hold)
{
	pthread_mutex_lock(&b->lock);
	b->hold = hold;
	b->released = 0;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static void abe_release(struct abe *b, unsigned int n)
{
	pthread_mutex_lock(&b->lock);
	b->released += n;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

static unsigned int abe_submitted(struct abe *b)
{
	pthread_mutex_lock(&b->lock);
	unsigned int n = b->submitted;

	pthread_mutex_unlock(&b->lock);
	return n;
}

/* Wait until @n operations are outstanding at the backend. */
static bool abe_wait_outstanding(struct abe *b, unsigned int n)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000;
	bool ok;

	pthread_mutex_lock(&b->lock);
	while (!(ok = b->nr_ops == n) && mono_ns() < deadline) {
		pthread_mutex_unlock(&b->lock);
		sleep_ms(1);
		pthread_mutex_lock(&b->lock);
	}
	pthread_mutex_unlock(&b->lock);
	return ok;
}

/* ---- drive + queue -------------------------------------------------------------------- */

struct env {
	struct abe *b;
	struct td_drive *d;
	struct td_queue *q;
};

static void env_create(struct env *e, unsigned int workers, enum td_write_cache wc,
		       uint32_t timeout_ms)
{
	struct td_drive_params dp;
	struct td_queue_params qp;
	int err = 0;

	e->b = abe_create();
	td_drive_params_default(&dp);
	dp.capacity_bytes = SIZE;
	dp.workers = workers;
	dp.write_cache = wc;
	dp.backend = (struct td_backend){ .ops = &abe_ops, .priv = e->b };
	e->d = td_drive_create(&dp, &err);
	assert_non_null(e->d);
	td_queue_params_default(&qp);
	qp.mode = TD_MODE_RQ;
	qp.capacity_sectors = SIZE >> TD_SECTOR_SHIFT;
	qp.depth = 32;
	qp.elevator = "noop";
	qp.command_timeout_ms = timeout_ms;
	qp.max_retries = 100;
	qp.drive = e->d;
	e->q = td_queue_create(&qp, &err);
	assert_non_null(e->q);
}

static void env_destroy(struct env *e)
{
	td_queue_drain(e->q);
	td_queue_destroy(e->q);
	td_drive_destroy(e->d);
	abe_free(e->b);
}

struct tbio {
	struct td_bio bio;
	struct done *done;
	_Atomic int ended;
	_Atomic int err;
};

static void tbio_end(struct td_bio *bio, int err)
{
	struct tbio *t = td_container_of(bio, struct tbio, bio);

	atomic_store(&t->err, err);
	atomic_fetch_add(&t->ended, 1);
	done_add(t->done, err);
}

static void submit(struct env *e, struct tbio *t, struct done *d, enum td_op op, uint64_t sector,
		   uint32_t nr, void *data)
{
	memset(t, 0, sizeof(*t));
	td_bio_init(&t->bio, op, sector, nr, data, tbio_end, NULL);
	t->done = d;
	td_queue_submit(e->q, &t->bio);
}

static int io_sync(struct env *e, enum td_op op, uint64_t sector, uint32_t nr, void *data)
{
	struct done d;
	struct tbio t;

	done_init(&d);
	submit(e, &t, &d, op, sector, nr, data);
	assert_true(done_wait(&d, 1, WAIT_MS));
	done_destroy(&d);
	assert_int_equal(atomic_load(&t.ended), 1);
	return atomic_load(&t.err);
}

static void drive_status(struct env *e, struct td_drive_status *st)
{
	td_drive_get_status(e->d, st);
}

/* Wait until the drive holds @n commands that have not started (fenced ones). */
static bool wait_drive_queued(struct env *e, unsigned int n)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000;
	struct td_drive_status st;

	do {
		drive_status(e, &st);
		if (st.queued == n)
			return true;
		sleep_ms(1);
	} while (mono_ns() < deadline);
	return false;
}

/* ---- cases ---------------------------------------------------------------------------- */

/* Every operation kind reaches the backend and the data is exact, inline drives included. */
static void run_data_case(unsigned int workers)
{
	struct env e;
	uint8_t *buf = xmalloc(256 * 1024), *back = xmalloc(256 * 1024);
	struct td_drive_status st;

	env_create(&e, workers, TD_WC_WRITEBACK, 0);
	fill_random(buf, 256 * 1024, 7);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 8, 512, buf), 0);
	assert_memory_equal(e.b->mem + 8 * 512, buf, 256 * 1024);
	assert_int_equal(io_sync(&e, TD_OP_READ, 8, 512, back), 0);
	assert_memory_equal(back, buf, 256 * 1024);
	assert_int_equal(io_sync(&e, TD_OP_FLUSH, 0, 0, NULL), 0);
	assert_int_equal(io_sync(&e, TD_OP_DISCARD, 8, 8, NULL), 0);
	assert_true(all_value(e.b->mem + 8 * 512, 4096, 0));
	assert_int_equal(io_sync(&e, TD_OP_WRITE_ZEROES, 16, 8, NULL), 0);
	assert_true(all_value(e.b->mem + 16 * 512, 4096, 0));
	assert_memory_equal(e.b->mem + 24 * 512, buf + 16 * 512, 256 * 1024 - 16 * 512);
	drive_status(&e, &st);
	assert_true(st.workers >= 1);
	assert_int_equal(st.backend_ops, 0);
	assert_int_equal(st.stale_ops, 0);
	assert_int_equal(abe_submitted(e.b), 5); /* write, read, flush, discard, write zeroes */
	env_destroy(&e);
	free(buf);
	free(back);
}

static void test_async_backend_moves_exact_data(void **state)
{
	(void)state;
	run_data_case(2);
}

static void test_async_backend_with_no_workers_gets_one(void **state)
{
	(void)state;
	run_data_case(0);
}

static void test_async_writethrough_makes_every_write_fua(void **state)
{
	struct env e;
	uint8_t buf[4096] = { 1 };

	(void)state;
	env_create(&e, 2, TD_WC_WRITETHROUGH, 0);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf), 0);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 64, 8, buf), 0);
	assert_int_equal(e.b->fua_writes, 2);
	env_destroy(&e);
}

static void test_async_volatile_cache_sits_on_top(void **state)
{
	struct env e;
	uint8_t *buf = xmalloc(65536), *back = xmalloc(65536);

	(void)state;
	env_create(&e, 2, TD_WC_VOLATILE, 0);
	fill_random(buf, 65536, 3);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 128, buf), 0);
	assert_int_equal(io_sync(&e, TD_OP_READ, 0, 128, back), 0);
	assert_memory_equal(back, buf, 65536);
	/* The flush writes the cache back through the backend's operations. */
	assert_int_equal(io_sync(&e, TD_OP_FLUSH, 0, 0, NULL), 0);
	assert_memory_equal(e.b->mem, buf, 65536);
	env_destroy(&e);
	free(buf);
	free(back);
}

static void test_async_refused_submit_fails_the_request(void **state)
{
	struct env e;
	uint8_t buf[4096] = { 0 };

	(void)state;
	env_create(&e, 2, TD_WC_WRITEBACK, 0);
	e.b->refuse = -ENOTCONN;
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf), -ENOTCONN);
	e.b->refuse = 0;
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf), 0);
	env_destroy(&e);
}

/*
 * A write outstanding at a reset: its request is requeued, but nothing is
 * submitted until the stale operation has returned; then the request is
 * submitted again and ends once, with success.
 */
static void test_reset_fences_until_stale_write_returns(void **state)
{
	struct env e;
	struct done d;
	struct tbio t;
	struct td_drive_status st;
	uint8_t *a = xmalloc(4096);

	(void)state;
	env_create(&e, 2, TD_WC_WRITEBACK, 0);
	fill_random(a, 4096, 11);
	abe_set_hold(e.b, true);
	done_init(&d);
	submit(&e, &t, &d, TD_OP_WRITE, 0, 8, a);
	assert_true(abe_wait_outstanding(e.b, 1));

	assert_int_equal(td_queue_reset(e.q, false), 1);
	/* Requeued and dispatched again, but the drive does not start it. */
	assert_true(wait_drive_queued(&e, 1));
	drive_status(&e, &st);
	assert_int_equal(st.stale_ops, 1);
	assert_int_equal(st.backend_ops, 0);
	assert_int_equal(st.fences, 1);
	assert_int_equal(abe_submitted(e.b), 1);
	assert_int_equal(atomic_load(&t.ended), 0);

	/* The stale write lands; its completion completes nothing; the fence lifts. */
	abe_set_hold(e.b, false);
	assert_true(done_wait(&d, 1, WAIT_MS));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_int_equal(abe_submitted(e.b), 2);
	assert_memory_equal(e.b->mem, a, 4096);
	drive_status(&e, &st);
	assert_int_equal(st.stale_ops, 0);
	env_destroy(&e);
	assert_int_equal(atomic_load(&t.ended), 1);
	done_destroy(&d);
	free(a);
}

/* A stale read's data never reaches the request: the retried read returns the real data. */
static void test_stale_read_data_is_dropped(void **state)
{
	struct env e;
	struct done d;
	struct tbio t;
	uint8_t *a = xmalloc(8192), *back = xmalloc(8192);

	(void)state;
	env_create(&e, 2, TD_WC_WRITEBACK, 0);
	fill_random(a, 8192, 5);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 32, 16, a), 0);
	memset(back, 0x11, 8192);
	abe_set_hold(e.b, true);
	e.b->poison = 1;
	done_init(&d);
	submit(&e, &t, &d, TD_OP_READ, 32, 16, back);
	assert_true(abe_wait_outstanding(e.b, 1));
	assert_int_equal(td_queue_reset(e.q, false), 1);
	assert_true(wait_drive_queued(&e, 1));
	/* The stale read completes with 0xEE in its bounce buffer, not in @back. */
	abe_release(e.b, 1);
	assert_true(abe_wait_outstanding(e.b, 1)); /* the retry, now submitted */
	assert_true(all_value(back, 8192, 0x11));
	abe_set_hold(e.b, false);
	assert_true(done_wait(&d, 1, WAIT_MS));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_memory_equal(back, a, 8192);
	env_destroy(&e);
	assert_int_equal(atomic_load(&t.ended), 1);
	done_destroy(&d);
	free(a);
	free(back);
}

/*
 * A backend that stops answering for longer than command_timeout_ms: the
 * timer resets again and again while the fence holds (each reset charging
 * a retry), and when the backend answers again every request completes,
 * with the data written once per retry and exact.
 */
static void test_timeouts_while_backend_is_stalled_lose_nothing(void **state)
{
	struct env e;
	struct done d;
	struct tbio t[8];
	uint8_t *buf = xmalloc(8 * 4096), *back = xmalloc(8 * 4096);
	struct td_stats_snapshot s;
	uint64_t deadline;

	(void)state;
	env_create(&e, 2, TD_WC_WRITEBACK, 20);
	fill_random(buf, 8 * 4096, 9);
	abe_set_hold(e.b, true);
	done_init(&d);
	for (int i = 0; i < 8; i++)
		submit(&e, &t[i], &d, TD_OP_WRITE, (uint64_t)i * 64, 8, buf + i * 4096);
	assert_true(abe_wait_outstanding(e.b, 8));
	deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000;
	do {
		td_stats_snapshot(td_queue_stats(e.q), &s, mono_ns());
		if (s.counters[TD_STAT_TIMEOUTS] >= 3)
			break;
		sleep_ms(2);
	} while (mono_ns() < deadline);
	assert_true(s.counters[TD_STAT_TIMEOUTS] >= 3);
	/* Nothing new was submitted while the first eight were out. */
	assert_int_equal(abe_submitted(e.b), 8);
	assert_int_equal(done_count(&d), 0);
	abe_set_hold(e.b, false);
	assert_true(done_wait(&d, 8, WAIT_MS));
	for (int i = 0; i < 8; i++) {
		assert_int_equal(atomic_load(&t[i].err), 0);
		assert_memory_equal(e.b->mem + (uint64_t)i * 64 * 512, buf + i * 4096, 4096);
	}
	for (int i = 0; i < 8; i++)
		assert_int_equal(io_sync(&e, TD_OP_READ, (uint64_t)i * 64, 8, back + i * 4096), 0);
	assert_memory_equal(back, buf, 8 * 4096);
	env_destroy(&e);
	for (int i = 0; i < 8; i++)
		assert_int_equal(atomic_load(&t[i].ended), 1);
	done_destroy(&d);
	free(buf);
	free(back);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_async_backend_moves_exact_data),
		cmocka_unit_test(test_async_backend_with_no_workers_gets_one),
		cmocka_unit_test(test_async_writethrough_makes_every_write_fua),
		cmocka_unit_test(test_async_volatile_cache_sits_on_top),
		cmocka_unit_test(test_async_refused_submit_fails_the_request),
		cmocka_unit_test(test_reset_fences_until_stale_write_returns),
		cmocka_unit_test(test_stale_read_data_is_dropped),
		cmocka_unit_test(test_timeouts_while_backend_is_stalled_lose_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
