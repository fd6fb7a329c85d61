// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_wcache.c - the volatile write cache over a memory backend.
 *
 * The backend's memory is the "image": what it holds is what survives a
 * power failure. Every test compares it, and what reads return, with exact
 * byte patterns.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tagdisk/drive.h"
#include "tagdisk/wcache.h"

#define DISK (1U << 20)

struct fixture {
	struct td_backend be;
	uint8_t *image;
	struct td_wcache *wc;
};

static int setup_cache(void **state, uint64_t cache_size)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(td_backend_mem_init(&f->be, DISK), 0);
	f->image = td_backend_mem_data(&f->be);
	f->wc = td_wcache_create(&f->be, DISK, cache_size);
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

static int teardown(void **state)
{
	struct fixture *f = *state;

	td_wcache_destroy(f->wc);
	f->be.ops->destroy(f->be.priv);
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
	};

	return cmocka_run_group_tests_name("wcache", tests, NULL, NULL);
}
