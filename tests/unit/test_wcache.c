// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_wcache.c - the volatile write cache over a memory backend.
 *
 * The backend's memory is the "image": what it holds is what survives a
 * power failure. Every test compares it, and what reads return, with exact
 * byte patterns. The backend is wrapped by a fake that can fail writes, or
 * hold them on a latch so a test can act while a write-back is in flight.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "tagdisk/drive.h"
#include "tagdisk/wcache.h"
#include "unit_util.h"

#define DISK	(1U << 20)
#define WAIT_MS 30000 /* generous: a deadline for what happens at once, not a timing */

/* The memory backend, with writes that fail or wait on a latch. */
struct fake {
	struct td_backend mem;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool latched;		/* lock: writes wait while set */
	unsigned int held;	/* lock: writes waiting on the latch */
	int write_err;		/* lock: writes fail with it when non-zero */
};

static int fake_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off)
{
	struct fake *fk = priv;

	return fk->mem.ops->read(fk->mem.priv, iov, iovcnt, off);
}

static int fake_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	struct fake *fk = priv;
	int err;

	pthread_mutex_lock(&fk->lock);
	while (fk->latched) {
		fk->held++;
		pthread_cond_broadcast(&fk->cond);
		pthread_cond_wait(&fk->cond, &fk->lock);
		fk->held--;
	}
	err = fk->write_err;
	pthread_mutex_unlock(&fk->lock);
	return err ? err : fk->mem.ops->write(fk->mem.priv, iov, iovcnt, off, fua);
}

static int fake_flush(void *priv)
{
	struct fake *fk = priv;

	return fk->mem.ops->flush(fk->mem.priv);
}

static int fake_discard(void *priv, uint64_t off, uint64_t len)
{
	struct fake *fk = priv;

	return fk->mem.ops->discard(fk->mem.priv, off, len);
}

static int fake_write_zeroes(void *priv, uint64_t off, uint64_t len)
{
	struct fake *fk = priv;

	return fk->mem.ops->write_zeroes(fk->mem.priv, off, len);
}

static const struct td_backend_ops fake_ops = {
	.name = "fake",
	.read = fake_read,
	.write = fake_write,
	.flush = fake_flush,
	.discard = fake_discard,
	.write_zeroes = fake_write_zeroes,
};

static void fake_set_error(struct fake *fk, int err)
{
	pthread_mutex_lock(&fk->lock);
	fk->write_err = err;
	pthread_mutex_unlock(&fk->lock);
}

static void fake_latch(struct fake *fk, bool on)
{
	pthread_mutex_lock(&fk->lock);
	fk->latched = on;
	pthread_cond_broadcast(&fk->cond);
	pthread_mutex_unlock(&fk->lock);
}

/* Return: true once @n writes wait on the latch (within WAIT_MS). */
static bool fake_wait_held(struct fake *fk, unsigned int n)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	bool ok;

	pthread_mutex_lock(&fk->lock);
	while (fk->held < n && mono_ns() < deadline) {
		pthread_mutex_unlock(&fk->lock);
		sleep_ms(1);
		pthread_mutex_lock(&fk->lock);
	}
	ok = fk->held >= n;
	pthread_mutex_unlock(&fk->lock);
	return ok;
}

struct fixture {
	struct fake fake;
	uint8_t *image;
	struct td_wcache *wc;
};

static int setup_cache(void **state, uint64_t cache_size)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct td_backend be = { &fake_ops, NULL };

	assert_non_null(f);
	assert_int_equal(td_backend_mem_init(&f->fake.mem, DISK), 0);
	pthread_mutex_init(&f->fake.lock, NULL);
	pthread_cond_init(&f->fake.cond, NULL);
	f->image = td_backend_mem_data(&f->fake.mem);
	be.priv = &f->fake;
	f->wc = td_wcache_create(&be, DISK, cache_size);
	assert_non_null(f->wc);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_cache(state, 1U << 20);
}

static int setup_small(void **state)
{
	return setup_cache(state, 2 * TD_WCACHE_LINE);
}

static int setup_16_lines(void **state)
{
	return setup_cache(state, 16 * TD_WCACHE_LINE);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	/* Write back what a test left, so destroying it has nothing to report. */
	if (f->wc) {
		fake_set_error(&f->fake, 0);
		assert_int_equal(td_wcache_flush(f->wc), 0);
		assert_int_equal(td_wcache_destroy(f->wc), 0);
	}
	f->fake.mem.ops->destroy(f->fake.mem.priv);
	pthread_cond_destroy(&f->fake.cond);
	pthread_mutex_destroy(&f->fake.lock);
	free(f);
	return 0;
}

static int write_pattern(struct fixture *f, uint64_t off, size_t len, uint8_t byte, bool fua)
{
	uint8_t *buf = malloc(len);
	struct iovec iov = { buf, len };

	memset(buf, byte, len);
	int err = td_wcache_write(f->wc, &iov, 1, off, fua);

	free(buf);
	return err;
}

/* Assert that reading [off, off+len) through the cache gives @byte everywhere. */
static void assert_reads(struct fixture *f, uint64_t off, size_t len, uint8_t byte)
{
	uint8_t *buf = malloc(len);
	struct iovec iov[2] = { { buf, len / 2 }, { buf + len / 2, len - len / 2 } };

	assert_int_equal(td_wcache_read(f->wc, iov, 2, off), 0);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(buf[i], byte);
	free(buf);
}

static void assert_image(struct fixture *f, uint64_t off, size_t len, uint8_t byte)
{
	for (size_t i = 0; i < len; i++)
		assert_int_equal(f->image[off + i], byte);
}

static void test_wcache_write_is_cached_not_on_image_until_flush(void **state)
{
	struct fixture *f = *state;
	struct td_wcache_stats st;

	assert_int_equal(write_pattern(f, 8192, 4096, 0xab, false), 0);
	assert_image(f, 8192, 4096, 0);
	assert_reads(f, 8192, 4096, 0xab);
	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.cached_bytes, 4096);
	assert_int_equal(st.lines, 1);
	assert_int_equal(st.writes, 1);

	assert_int_equal(td_wcache_flush(f->wc), 0);
	assert_image(f, 8192, 4096, 0xab);
	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.cached_bytes, 0);
	assert_int_equal(st.written_back, 4096);
	assert_int_equal(st.flushes, 1);
}

static void test_wcache_read_overlays_cached_sectors_on_image(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[4096];
	struct iovec iov = { buf, sizeof(buf) };

	memset(f->image, 0x11, 4096);
	/* Sectors 2 and 3 of the first line come from the cache. */
	assert_int_equal(write_pattern(f, 1024, 1024, 0x22, false), 0);
	assert_int_equal(td_wcache_read(f->wc, &iov, 1, 0), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], i >= 1024 && i < 2048 ? 0x22 : 0x11);
	/* A read starting mid-line sees the same. */
	assert_reads(f, 1024, 1024, 0x22);
}

static void test_wcache_unaligned_multi_line_write(void **state)
{
	struct fixture *f = *state;

	/* From sector 7 (last of line 0) across line 1 into line 2. */
	assert_int_equal(write_pattern(f, 7 * 512, 10 * 512, 0x33, false), 0);
	assert_reads(f, 7 * 512, 10 * 512, 0x33);
	assert_reads(f, 0, 7 * 512, 0);
	assert_reads(f, 17 * 512, 512, 0);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	assert_image(f, 7 * 512, 10 * 512, 0x33);
	assert_image(f, 0, 7 * 512, 0);
	assert_image(f, 17 * 512, 512, 0);
}

static void test_wcache_rejects_unaligned_offsets(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write_pattern(f, 100, 512, 1, false), -EINVAL);
	assert_int_equal(write_pattern(f, 512, 100, 1, false), -EINVAL);
}

static void test_wcache_fua_write_is_durable_and_shadows_nothing(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write_pattern(f, 0, 4096, 0x44, false), 0);
	/* A FUA write over part of the cached line: image has it, cache loses those sectors. */
	assert_int_equal(write_pattern(f, 0, 2048, 0x55, true), 0);
	assert_image(f, 0, 2048, 0x55);
	assert_image(f, 2048, 2048, 0);
	assert_reads(f, 0, 2048, 0x55);
	assert_reads(f, 2048, 2048, 0x44);

	struct td_wcache_stats st;

	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.cached_bytes, 2048);
}

static void test_wcache_discard_drops_cached_sectors(void **state)
{
	struct fixture *f = *state;

	memset(f->image, 0x66, 16384);
	assert_int_equal(write_pattern(f, 0, 16384, 0x77, false), 0);
	assert_int_equal(td_wcache_discard(f->wc, 4096, 8192), 0);
	assert_reads(f, 0, 4096, 0x77);
	assert_reads(f, 4096, 8192, 0);
	assert_reads(f, 12288, 4096, 0x77);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	/* The discarded data must never be written back over the zeroes. */
	assert_image(f, 4096, 8192, 0);
	assert_image(f, 0, 4096, 0x77);

	assert_int_equal(write_pattern(f, 0, 4096, 0x88, false), 0);
	assert_int_equal(td_wcache_write_zeroes(f->wc, 0, 4096), 0);
	assert_reads(f, 0, 4096, 0);
}

static void test_wcache_full_cache_writes_back_oldest(void **state)
{
	struct fixture *f = *state;
	struct td_wcache_stats st;

	/* Two lines of room: the third write evicts the oldest (line 0). */
	assert_int_equal(write_pattern(f, 0, 4096, 1, false), 0);
	assert_int_equal(write_pattern(f, 4096, 4096, 2, false), 0);
	assert_int_equal(write_pattern(f, 8192, 4096, 3, false), 0);
	assert_image(f, 0, 4096, 1);
	assert_image(f, 4096, 8192, 0);
	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.evicted_lines, 1);
	assert_int_equal(st.lines, 2);

	/* Touching line 1 makes it the newest: next eviction takes line 2. */
	assert_int_equal(write_pattern(f, 4096, 512, 4, false), 0);
	assert_int_equal(write_pattern(f, 12288, 4096, 5, false), 0);
	assert_image(f, 8192, 4096, 3);
	assert_image(f, 4096, 4096, 0);
}

static void test_wcache_powerfail_drops_everything_unflushed(void **state)
{
	struct fixture *f = *state;
	struct td_powerfail_result r;

	assert_int_equal(write_pattern(f, 0, 4096, 0x10, false), 0);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	assert_int_equal(write_pattern(f, 0, 4096, 0x20, false), 0);	  /* write 2: line 0 */
	assert_int_equal(write_pattern(f, 8192, 8192, 0x30, false), 0); /* write 3: lines 2-3 */

	assert_int_equal(td_wcache_powerfail(f->wc, 0, 1, &r), 0);
	assert_int_equal(r.lost_writes, 2);
	assert_int_equal(r.lost_sectors, 24);
	assert_int_equal(r.kept_writes, 0);
	assert_int_equal(r.kept_sectors, 0);
	/* The flushed data survives, the rest never happened. */
	assert_image(f, 0, 4096, 0x10);
	assert_image(f, 8192, 8192, 0);
	assert_reads(f, 0, 4096, 0x10);

	struct td_wcache_stats st;

	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.lines, 0);
	assert_int_equal(st.cached_bytes, 0);
	assert_int_equal(st.powerfails, 1);
	assert_int_equal(st.lost_writes, 2);
}

static void test_wcache_powerfail_keep_100_writes_everything_back(void **state)
{
	struct fixture *f = *state;
	struct td_powerfail_result r;

	assert_int_equal(write_pattern(f, 0, 8192, 0x40, false), 0);
	assert_int_equal(td_wcache_powerfail(f->wc, 100, 7, &r), 0);
	assert_int_equal(r.lost_writes, 0);
	assert_int_equal(r.kept_writes, 1);
	assert_int_equal(r.kept_sectors, 16);
	assert_image(f, 0, 8192, 0x40);
}

static void test_wcache_powerfail_keep_is_reproducible_with_seed(void **state)
{
	struct fixture *f = *state;
	struct td_powerfail_result r1, r2;
	uint8_t *first = malloc(DISK);

	/* 64 single-line writes, keep about half, twice with the same seed. */
	for (int i = 0; i < 64; i++)
		assert_int_equal(write_pattern(f, (uint64_t)i * 4096, 4096, (uint8_t)(i + 1), false),
				 0);
	assert_int_equal(td_wcache_powerfail(f->wc, 50, 1234, &r1), 0);
	memcpy(first, f->image, DISK);
	assert_int_equal(r1.lost_writes + r1.kept_writes, 64);
	assert_true(r1.lost_writes > 10 && r1.kept_writes > 10);
	/* Every line is either fully there or fully zero: lines are never torn. */
	for (int i = 0; i < 64; i++) {
		uint8_t b = first[i * 4096];

		assert_true(b == 0 || b == i + 1);
		for (int k = 0; k < 4096; k++)
			assert_int_equal(first[i * 4096 + k], b);
	}

	memset(f->image, 0, DISK);
	for (int i = 0; i < 64; i++)
		assert_int_equal(write_pattern(f, (uint64_t)i * 4096, 4096, (uint8_t)(i + 1), false),
				 0);
	assert_int_equal(td_wcache_powerfail(f->wc, 50, 1234, &r2), 0);
	assert_int_equal(r1.lost_writes, r2.lost_writes);
	assert_int_equal(r1.kept_sectors, r2.kept_sectors);
	assert_memory_equal(first, f->image, DISK);
	free(first);
}

static void test_wcache_powerfail_counts_a_torn_write_as_lost(void **state)
{
	struct fixture *f = *state;
	struct td_powerfail_result r;
	uint64_t seed;

	/* One write of 16 lines; find a seed that keeps some lines and drops others. */
	for (seed = 1; seed < 1000; seed++) {
		memset(f->image, 0, DISK);
		assert_int_equal(write_pattern(f, 0, 16 * 4096, 0x5a, false), 0);
		assert_int_equal(td_wcache_powerfail(f->wc, 50, seed, &r), 0);
		if (r.kept_sectors && r.lost_sectors)
			break;
	}
	assert_true(seed < 1000);
	assert_int_equal(r.lost_writes, 1);
	assert_int_equal(r.kept_writes, 0);
	assert_int_equal(r.kept_sectors + r.lost_sectors, 128);
}

static void test_wcache_powerfail_rejects_bad_percentage(void **state)
{
	struct fixture *f = *state;
	struct td_powerfail_result r;

	assert_int_equal(td_wcache_powerfail(f->wc, 101, 1, &r), -EINVAL);
}

/* ---- backend I/O without the cache lock ------------------------------------------------ */

/* One call on the cache, in a thread, so the test can wait for it with a deadline. */
struct call {
	pthread_t tid;
	struct fixture *f;
	enum { CALL_READ, CALL_WRITE, CALL_FLUSH } op;
	uint64_t off;
	size_t len;
	uint8_t byte;	 /* CALL_WRITE: the pattern */
	uint8_t *buf;	 /* CALL_READ: what was read */
	int err;
	atomic_bool done;
};

static void *call_main(void *arg)
{
	struct call *c = arg;
	struct iovec iov = { c->buf, c->len };

	switch (c->op) {
	case CALL_READ:
		c->err = td_wcache_read(c->f->wc, &iov, 1, c->off);
		break;
	case CALL_WRITE:
		memset(c->buf, c->byte, c->len);
		c->err = td_wcache_write(c->f->wc, &iov, 1, c->off, false);
		break;
	case CALL_FLUSH:
		c->err = td_wcache_flush(c->f->wc);
		break;
	}
	atomic_store(&c->done, true);
	return NULL;
}

static void call_start(struct call *c, struct fixture *f, int op, uint64_t off, size_t len,
		       uint8_t byte)
{
	memset(c, 0, sizeof(*c));
	c->f = f;
	c->op = op;
	c->off = off;
	c->len = len;
	c->byte = byte;
	c->buf = len ? xmalloc(len) : NULL;
	atomic_init(&c->done, false);
	assert_int_equal(pthread_create(&c->tid, NULL, call_main, c), 0);
}

static void call_join(struct call *c)
{
	assert_int_equal(pthread_join(c->tid, NULL), 0);
}

static void call_free(struct call *c)
{
	free(c->buf);
}

static void test_wcache_read_does_not_wait_for_write_back(void **state)
{
	struct fixture *f = *state;
	struct call flush, uncached, cached, mixed;
	bool flushing, uncached_done, cached_done, mixed_done;

	memset(f->image + 512 * 1024, 0x5e, 8192);
	assert_int_equal(write_pattern(f, 0, 4096, 0x11, false), 0);
	assert_int_equal(write_pattern(f, 65536, 4096, 0x22, false), 0);

	/* The flush writes line 0 back first, and its write waits on the latch. */
	fake_latch(&f->fake, true);
	call_start(&flush, f, CALL_FLUSH, 0, 0, 0);
	flushing = fake_wait_held(&f->fake, 1);
	/* A range the cache does not hold, the line being written back, a range half cached. */
	call_start(&uncached, f, CALL_READ, 512 * 1024, 8192, 0);
	uncached_done = wait_flag(&uncached.done, WAIT_MS);
	call_start(&cached, f, CALL_READ, 0, 4096, 0);
	cached_done = wait_flag(&cached.done, WAIT_MS);
	call_start(&mixed, f, CALL_READ, 61440, 8192, 0);
	mixed_done = wait_flag(&mixed.done, WAIT_MS);
	bool still_flushing = !atomic_load(&flush.done);

	/* Release before asserting, so a failure does not leave threads behind. */
	fake_latch(&f->fake, false);
	call_join(&flush);
	call_join(&uncached);
	call_join(&cached);
	call_join(&mixed);

	assert_true(flushing);
	assert_true(uncached_done);
	assert_true(cached_done);
	assert_true(mixed_done);
	assert_true(still_flushing);
	assert_int_equal(uncached.err, 0);
	assert_true(all_value(uncached.buf, 8192, 0x5e));
	assert_int_equal(cached.err, 0);
	assert_true(all_value(cached.buf, 4096, 0x11));
	assert_int_equal(mixed.err, 0);
	assert_true(all_value(mixed.buf, 4096, 0));
	assert_true(all_value(mixed.buf + 4096, 4096, 0x22));
	assert_int_equal(flush.err, 0);
	assert_image(f, 0, 4096, 0x11);
	assert_image(f, 65536, 4096, 0x22);
	call_free(&flush);
	call_free(&uncached);
	call_free(&cached);
	call_free(&mixed);
}

static void test_wcache_write_during_write_back_stays_cached(void **state)
{
	struct fixture *f = *state;
	struct call flush, write, other;
	bool flushing, write_done, other_done;
	struct td_wcache_stats st;

	assert_int_equal(write_pattern(f, 0, 4096, 0x11, false), 0);
	fake_latch(&f->fake, true);
	call_start(&flush, f, CALL_FLUSH, 0, 0, 0);
	flushing = fake_wait_held(&f->fake, 1);
	/* Half of the line being written back gets newer data; another line gets some too. */
	call_start(&write, f, CALL_WRITE, 2048, 2048, 0x33);
	write_done = wait_flag(&write.done, WAIT_MS);
	call_start(&other, f, CALL_WRITE, 131072, 4096, 0x44);
	other_done = wait_flag(&other.done, WAIT_MS);
	fake_latch(&f->fake, false);
	call_join(&flush);
	call_join(&write);
	call_join(&other);

	assert_true(flushing);
	assert_true(write_done);
	assert_true(other_done);
	assert_int_equal(write.err, 0);
	assert_int_equal(other.err, 0);
	assert_int_equal(flush.err, 0);
	/* The flush wrote what it copied; the newer sectors are still cached, and win. */
	assert_image(f, 0, 4096, 0x11);
	assert_reads(f, 0, 2048, 0x11);
	assert_reads(f, 2048, 2048, 0x33);
	assert_reads(f, 131072, 4096, 0x44);
	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.cached_bytes, 2048 + 4096);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	assert_image(f, 0, 2048, 0x11);
	assert_image(f, 2048, 2048, 0x33);
	assert_image(f, 131072, 4096, 0x44);
	call_free(&flush);
	call_free(&write);
	call_free(&other);
}

/* Several threads, each writing, reading and discarding its own region, flushing all. */
#define STRESS_THREADS	  4
#define STRESS_REGION	  (64 * 1024)
#define STRESS_ITERATIONS 1500

struct stresser {
	pthread_t tid;
	struct fixture *f;
	unsigned int id;
	uint8_t model[STRESS_REGION];
	unsigned int mismatches;
	unsigned int errors;
};

static void *stress_main(void *arg)
{
	struct stresser *t = arg;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (t->id + 1);
	uint64_t base = (uint64_t)t->id * (DISK / STRESS_THREADS);
	uint8_t buf[24 * 512];

	for (unsigned int it = 0; it < STRESS_ITERATIONS; it++) {
		uint64_t sector = rnd_range(&rng, 0, STRESS_REGION / 512 - 1);
		uint64_t count = rnd_range(&rng, 1, TD_MIN(24, STRESS_REGION / 512 - sector));
		size_t off = (size_t)sector * 512, len = (size_t)count * 512;
		struct iovec iov = { buf, len };
		unsigned int op = (unsigned int)rnd_range(&rng, 0, 99);
		int err;

		if (op < 45 || op >= 97) {
			fill_random(buf, len, rnd_next(&rng));
			err = td_wcache_write(t->f->wc, &iov, 1, base + off, op >= 97);
			if (!err)
				memcpy(t->model + off, buf, len);
		} else if (op < 90) {
			err = td_wcache_read(t->f->wc, &iov, 1, base + off);
			if (!err && memcmp(buf, t->model + off, len))
				t->mismatches++;
		} else if (op < 94) {
			err = td_wcache_discard(t->f->wc, base + off, len);
			if (!err)
				memset(t->model + off, 0, len);
		} else {
			err = td_wcache_flush(t->f->wc);
		}
		if (err)
			t->errors++;
	}
	return NULL;
}

/* Reads across every region and asks for cached runs while the stressers run. */
struct observer {
	pthread_t tid;
	struct fixture *f;
	atomic_bool stop;
	unsigned int errors;
};

static void *observe_main(void *arg)
{
	struct observer *o = arg;
	uint64_t rng = 42;
	size_t len = DISK / STRESS_THREADS + 8192; /* always across a region's end */
	uint8_t *buf = malloc(len);

	while (!atomic_load(&o->stop) && buf) {
		uint64_t off = rnd_range(&rng, 0, (DISK - len) / 512) * 512;
		struct iovec iov = { buf, len };
		uint64_t start, end;

		if (td_wcache_read(o->f->wc, &iov, 1, off))
			o->errors++;
		if (td_wcache_next_cached(o->f->wc, off, &start, &end) &&
		    (end <= start || end <= off || start % 512 || end % 512))
			o->errors++;
	}
	free(buf);
	return NULL;
}

static void test_wcache_concurrent_io_loses_no_completed_write(void **state)
{
	struct fixture *f = *state;
	struct stresser *t = calloc(STRESS_THREADS, sizeof(*t));
	struct observer o = { .f = f };

	assert_non_null(t);
	atomic_init(&o.stop, false);
	assert_int_equal(pthread_create(&o.tid, NULL, observe_main, &o), 0);
	for (unsigned int i = 0; i < STRESS_THREADS; i++) {
		t[i].f = f;
		t[i].id = i;
		assert_int_equal(pthread_create(&t[i].tid, NULL, stress_main, &t[i]), 0);
	}
	for (unsigned int i = 0; i < STRESS_THREADS; i++)
		assert_int_equal(pthread_join(t[i].tid, NULL), 0);
	atomic_store(&o.stop, true);
	assert_int_equal(pthread_join(o.tid, NULL), 0);
	assert_int_equal(o.errors, 0);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	for (unsigned int i = 0; i < STRESS_THREADS; i++) {
		assert_int_equal(t[i].errors, 0);
		assert_int_equal(t[i].mismatches, 0);
		assert_memory_equal(f->image + (uint64_t)i * (DISK / STRESS_THREADS), t[i].model,
				    STRESS_REGION);
	}

	struct td_wcache_stats st;

	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.lines, 0);
	assert_int_equal(st.cached_bytes, 0);
	assert_true(st.evicted_lines > 0);
	free(t);
}

/* ---- failures -------------------------------------------------------------------------- */

/* Run td_wcache_destroy() with stderr in a file. Return: what it logged (free it). */
static char *destroy_logged(struct fixture *f, uint64_t *lost)
{
	FILE *tmp = tmpfile();
	int saved = dup(STDERR_FILENO);
	char *text = (char *)xmalloc(65536);
	size_t n;

	assert_non_null(tmp);
	assert_true(saved >= 0);
	fflush(stderr);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	*lost = td_wcache_destroy(f->wc);
	f->wc = NULL;
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	rewind(tmp);
	n = fread(text, 1, 65535, tmp);
	text[n] = 0;
	fclose(tmp);
	return text;
}

static void test_wcache_destroy_reports_lines_a_failed_flush_left(void **state)
{
	struct fixture *f = *state;
	uint64_t lost;
	char *log;

	assert_int_equal(write_pattern(f, 0, 4096, 0x11, false), 0);
	assert_int_equal(write_pattern(f, 8192, 1024, 0x22, false), 0);
	/* Last sector of line 3 and first of line 4: one range. */
	assert_int_equal(write_pattern(f, 15872, 1024, 0x33, false), 0);
	fake_set_error(&f->fake, -EIO);
	assert_int_equal(td_wcache_flush(f->wc), -EIO);
	assert_reads(f, 0, 4096, 0x11);

	log = destroy_logged(f, &lost);
	assert_int_equal(lost, 4096 + 1024 + 1024);
	assert_non_null(strstr(log, "6144 bytes in 3 ranges"));
	assert_non_null(strstr(log, "lost bytes 0-4095 (4096 bytes)"));
	assert_non_null(strstr(log, "lost bytes 8192-9215 (1024 bytes)"));
	assert_non_null(strstr(log, "lost bytes 15872-16895 (1024 bytes)"));
	free(log);
}

static void test_wcache_destroy_after_flush_loses_nothing(void **state)
{
	struct fixture *f = *state;
	uint64_t lost;
	char *log;

	assert_int_equal(write_pattern(f, 0, 4096, 0x11, false), 0);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	log = destroy_logged(f, &lost);
	assert_int_equal(lost, 0);
	assert_string_equal(log, "");
	free(log);
}

static void test_wcache_flush_retries_lines_whose_write_back_failed(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(write_pattern(f, 0, 4096, 0x11, false), 0);
	assert_int_equal(write_pattern(f, 65536, 4096, 0x22, false), 0);
	fake_set_error(&f->fake, -EIO);
	assert_int_equal(td_wcache_flush(f->wc), -EIO);
	assert_reads(f, 0, 4096, 0x11);
	assert_reads(f, 65536, 4096, 0x22);
	fake_set_error(&f->fake, 0);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	assert_image(f, 0, 4096, 0x11);
	assert_image(f, 65536, 4096, 0x22);
}

static void test_wcache_failed_eviction_leaves_cache_as_it_was(void **state)
{
	struct fixture *f = *state;
	struct td_wcache_stats st;

	/* Two lines of room, both used; the write touches line 1 and needs line 2. */
	assert_int_equal(write_pattern(f, 0, 4096, 0x11, false), 0);
	assert_int_equal(write_pattern(f, 4096, 4096, 0x22, false), 0);
	fake_set_error(&f->fake, -EIO);
	assert_int_equal(write_pattern(f, 6144, 4096, 0x33, false), -EIO);
	assert_reads(f, 0, 4096, 0x11);
	assert_reads(f, 4096, 4096, 0x22);
	assert_reads(f, 8192, 4096, 0);
	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.lines, 2);
	assert_int_equal(st.cached_bytes, 8192);
	assert_int_equal(st.writes, 2);
	assert_int_equal(st.evicted_lines, 0);

	/* Once the image takes writes again, the same write goes in whole. */
	fake_set_error(&f->fake, 0);
	assert_int_equal(write_pattern(f, 6144, 4096, 0x33, false), 0);
	assert_reads(f, 0, 4096, 0x11);
	assert_reads(f, 4096, 2048, 0x22);
	assert_reads(f, 6144, 4096, 0x33);
	assert_int_equal(td_wcache_flush(f->wc), 0);
	assert_image(f, 0, 4096, 0x11);
	assert_image(f, 4096, 2048, 0x22);
	assert_image(f, 6144, 4096, 0x33);
	assert_image(f, 10240, 2048, 0);
}

static void test_wcache_write_larger_than_cache_goes_through(void **state)
{
	struct fixture *f = *state;
	struct td_wcache_stats st;

	assert_int_equal(write_pattern(f, 4096, 4096, 0x11, false), 0);
	/* Four lines into a two-line cache: it cannot be cached whole, so it is not cached. */
	fake_set_error(&f->fake, -EIO);
	assert_int_equal(write_pattern(f, 0, 16384, 0x22, false), -EIO);
	assert_reads(f, 4096, 4096, 0x11);
	fake_set_error(&f->fake, 0);
	assert_int_equal(write_pattern(f, 0, 16384, 0x22, false), 0);
	assert_image(f, 0, 16384, 0x22);
	assert_reads(f, 0, 16384, 0x22);
	td_wcache_get_stats(f->wc, &st);
	assert_int_equal(st.cached_bytes, 0);
}

/* ---- what SEEK_DATA sees --------------------------------------------------------------- */

static void test_wcache_next_cached_finds_runs_across_lines(void **state)
{
	struct fixture *f = *state;
	uint64_t start, end;

	assert_false(td_wcache_next_cached(f->wc, 0, &start, &end));
	assert_int_equal(write_pattern(f, 7 * 512, 10 * 512, 0x33, false), 0);
	assert_int_equal(write_pattern(f, 65536 + 1024, 512, 0x44, false), 0);
	assert_true(td_wcache_next_cached(f->wc, 0, &start, &end));
	assert_int_equal(start, 7 * 512);
	assert_int_equal(end, 17 * 512);
	/* From inside the run: it starts in the asked sector. */
	assert_true(td_wcache_next_cached(f->wc, 4096 + 100, &start, &end));
	assert_int_equal(start, 4096);
	assert_int_equal(end, 17 * 512);
	assert_true(td_wcache_next_cached(f->wc, 17 * 512, &start, &end));
	assert_int_equal(start, 65536 + 1024);
	assert_int_equal(end, 65536 + 1536);
	assert_false(td_wcache_next_cached(f->wc, 65536 + 1536, &start, &end));
	assert_int_equal(td_wcache_flush(f->wc), 0);
	assert_false(td_wcache_next_cached(f->wc, 0, &start, &end));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wcache_write_is_cached_not_on_image_until_flush,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_read_overlays_cached_sectors_on_image,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_unaligned_multi_line_write, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wcache_rejects_unaligned_offsets, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wcache_fua_write_is_durable_and_shadows_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_discard_drops_cached_sectors, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wcache_full_cache_writes_back_oldest,
						setup_small, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_powerfail_drops_everything_unflushed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_powerfail_keep_100_writes_everything_back,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_powerfail_keep_is_reproducible_with_seed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_powerfail_counts_a_torn_write_as_lost,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_powerfail_rejects_bad_percentage, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wcache_read_does_not_wait_for_write_back, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wcache_write_during_write_back_stays_cached,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_concurrent_io_loses_no_completed_write,
						setup_16_lines, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_destroy_reports_lines_a_failed_flush_left,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_destroy_after_flush_loses_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wcache_flush_retries_lines_whose_write_back_failed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_failed_eviction_leaves_cache_as_it_was,
						setup_small, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_write_larger_than_cache_goes_through,
						setup_small, teardown),
		cmocka_unit_test_setup_teardown(test_wcache_next_cached_finds_runs_across_lines, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("wcache", tests, NULL, NULL);
}
