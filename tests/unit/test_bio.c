// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_bio.c - byte-granular I/O (src/bio.c): the aligned fast path, splits
 * at max_sectors, bounced unaligned reads, read-modify-write for unaligned
 * writes, discards and write zeroes, FUA, malformed I/O, error paths, and
 * RMW under concurrent overlapping writers.
 *
 * The queue runs over a drive whose backend is a memory disk wrapped in a
 * recorder (it counts writes and FUA writes and can slow writes down), so
 * every test compares the disk with a model byte for byte and counts what
 * reached the drive through the queue's stats.
 */
#include <errno.h>
#include <pthread.h>
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
#include "tagdisk/bio.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/trace.h"
#include "unit_util.h"

#define MIB (1024ULL * 1024ULL)
#define WAIT_MS 10000
#define WATCHDOG_S 900

/* ---- the environment ------------------------------------------------------------------ */

struct env {
	struct td_drive *drive;
	struct td_queue *q;
	struct rec *rec;
	uint8_t *mem;
	uint64_t size;
	struct td_trace *trace;
	struct td_trace_sub *sub;
};

static void env_create(struct env *e, uint64_t size, uint32_t lbs, unsigned int workers,
		       uint32_t max_sectors)
{
	struct td_drive_params dp;
	struct td_queue_params qp;
	int err = 0;

	memset(e, 0, sizeof(*e));
	e->size = size;
	e->rec = rec_create(size);
	e->mem = td_backend_mem_data(&e->rec->inner);
	td_drive_params_default(&dp);
	dp.backend = rec_backend(e->rec);
	dp.logical_block_size = lbs;
	dp.capacity_bytes = size;
	dp.workers = workers;
	e->drive = td_drive_create(&dp, &err);
	assert_non_null(e->drive);

	e->trace = td_trace_create(16U << 20);
	assert_non_null(e->trace);
	e->sub = td_trace_subscribe(e->trace, &(struct td_trace_sub_params){
						      .ring_events = 4096,
						      .nr_rings = 16,
					      });
	assert_non_null(e->sub);
	td_queue_params_default(&qp);
	qp.capacity_sectors = size >> TD_SECTOR_SHIFT;
	qp.logical_block_size = lbs;
	qp.max_sectors = max_sectors;
	qp.command_timeout_ms = 0;
	qp.drive = e->drive;
	qp.trace = e->trace;
	e->q = td_queue_create(&qp, &err);
	assert_non_null(e->q);
}

static void env_destroy(struct env *e)
{
	td_queue_drain(e->q);
	td_queue_destroy(e->q);
	td_drive_destroy(e->drive);
	free(e->rec);
	td_trace_unsubscribe(e->trace, e->sub);
	td_trace_destroy(e->trace);
	memset(e, 0, sizeof(*e));
}

static void env_stats(struct env *e, struct td_stats_snapshot *s)
{
	td_stats_snapshot(td_queue_stats(e->q), s, mono_ns());
}

/* ---- byte I/O that the test waits for ------------------------------------------------- */

struct bwait {
	struct td_byte_io io;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int ended; /* lock */
	int err;   /* lock */
};

static void bwait_end(struct td_byte_io *io, int err)
{
	struct bwait *w = td_container_of(io, struct bwait, io);

	pthread_mutex_lock(&w->lock);
	w->ended++;
	w->err = err;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void bwait_init(struct bwait *w, enum td_op op, uint64_t off, void *data, size_t len,
		       unsigned int flags)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->io.op = op;
	w->io.off = off;
	w->io.data = data;
	w->io.len = len;
	w->io.flags = flags;
	w->io.pid = 77;
	w->io.end = bwait_end;
}

static void bwait_destroy(struct bwait *w)
{
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
}

/*
 * Run one byte I/O to completion. Return: the submit error when it did not
 * start (then ->end must not have run), else the completion error.
 */
static int byte_io(struct env *e, enum td_op op, uint64_t off, void *data, size_t len,
		   unsigned int flags)
{
	struct bwait w;
	int submit_err;
	int err;

	bwait_init(&w, op, off, data, len, flags);
	submit_err = td_byte_io_submit(e->q, &w.io);
	err = submit_err;
	pthread_mutex_lock(&w.lock);
	if (!submit_err) {
		while (!w.ended)
			pthread_cond_wait(&w.cond, &w.lock);
		err = w.err;
	}
	int ended = w.ended;

	pthread_mutex_unlock(&w.lock);
	bwait_destroy(&w);
	/* ->end runs exactly once when submit said 0, never otherwise. */
	assert_int_equal(ended, submit_err ? 0 : 1);
	return err;
}

/* Like byte_io() but expects success. */
static void byte_io_ok(struct env *e, enum td_op op, uint64_t off, void *data, size_t len)
{
	int err = byte_io(e, op, off, data, len, 0);

	if (err)
		fail_msg("%s of %zu bytes at %llu failed: %d", td_op_name(op), len,
			 (unsigned long long)off, err);
}

/* The D events' (sector, nr_sectors) of @op, in order. */
static size_t trace_dispatches(struct env *e, enum td_op op, uint64_t *sector, uint32_t *nr,
			       size_t max)
{
	struct td_trace_event ev[256];
	uint64_t dropped;
	size_t n = td_trace_read(e->trace, e->sub, ev, TD_ARRAY_SIZE(ev), &dropped);
	size_t k = 0;

	assert_int_equal(dropped, 0);
	for (size_t i = 0; i < n; i++) {
		if (ev[i].action != 'D' || ev[i].op != (uint8_t)op)
			continue;
		if (k < max) {
			sector[k] = ev[i].sector;
			nr[k] = ev[i].nr_sectors;
		}
		k++;
	}
	return k;
}

/* ---- aligned I/O ---------------------------------------------------------------------- */

static void test_byte_io_aligned_write_and_read_are_one_request_each(void **state)
{
	struct env e;
	uint8_t *w = xmalloc(8192);
	uint8_t *r = xmalloc(8192);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	env_create(&e, 1 * MIB, 512, 0, 2048);
	fill_random(w, 8192, 1);
	byte_io_ok(&e, TD_OP_WRITE, 4096, w, 8192);
	assert_memory_equal(e.mem + 4096, w, 8192);
	assert_true(all_value(e.mem, 4096, 0));
	assert_true(all_value(e.mem + 4096 + 8192, 4096, 0));
	memset(r, 0xee, 8192);
	byte_io_ok(&e, TD_OP_READ, 4096, r, 8192);
	assert_memory_equal(r, w, 8192);

	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_WRITE], 1);
	assert_int_equal(s->sectors[TD_OP_WRITE], 16);
	assert_int_equal(s->ios[TD_OP_READ], 1);
	assert_int_equal(s->sectors[TD_OP_READ], 16);
	assert_int_equal(atomic_load(&e.rec->writes), 1);

	assert_int_equal(byte_io(&e, TD_OP_FLUSH, 0, NULL, 0, 0), 0);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_FLUSH], 1);
	env_destroy(&e);
	free(s);
	free(r);
	free(w);
}

static void run_split(unsigned int workers)
{
	static const uint64_t want_sector[5] = { 16, 32, 48, 64, 80 };
	static const uint32_t want_nr[5] = { 16, 16, 16, 16, 8 };
	struct env e;
	uint8_t *w = xmalloc(40960);
	uint8_t *r = xmalloc(40960);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	uint64_t sector[8];
	uint32_t nr[8];

	assert_non_null(s);
	env_create(&e, 1 * MIB, 512, workers, 16); /* requests of at most 8 KiB */
	fill_random(w, 40960, 2);

	/* 36 KiB = 72 sectors: four full requests and a half one. */
	byte_io_ok(&e, TD_OP_WRITE, 8192, w, 36864);
	assert_memory_equal(e.mem + 8192, w, 36864);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_WRITE], 5);
	assert_int_equal(s->sectors[TD_OP_WRITE], 72);
	assert_int_equal(s->back_merges[TD_OP_WRITE], 0);
	assert_int_equal(trace_dispatches(&e, TD_OP_WRITE, sector, nr, 8), 5);
	if (!workers) {
		/* Inline, each child is dispatched as it is submitted: in order. */
		for (int i = 0; i < 5; i++) {
			assert_int_equal(sector[i], want_sector[i]);
			assert_int_equal(nr[i], want_nr[i]);
		}
	}

	/* Exactly max_sectors goes down whole. */
	byte_io_ok(&e, TD_OP_READ, 8192, r, 8192);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_READ], 1);
	/* 40 KiB read back in five pieces. */
	byte_io_ok(&e, TD_OP_READ, 8192, r, 40960);
	assert_memory_equal(r, w, 36864);
	assert_true(all_value(r + 36864, 4096, 0));
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_READ], 6);
	assert_int_equal(s->sectors[TD_OP_READ], 16 + 80);
	env_destroy(&e);
	free(s);
	free(r);
	free(w);
}

static void test_byte_io_splits_at_max_sectors_inline(void **state)
{
	(void)state;
	run_split(0);
}

static void test_byte_io_splits_at_max_sectors_with_workers(void **state)
{
	(void)state;
	run_split(2);
}

/* ---- unaligned reads and writes ------------------------------------------------------- */

static void run_unaligned_reads(uint32_t lbs, const uint64_t *offs, size_t nr_offs, size_t step)
{
	struct env e;
	uint8_t *r = xmalloc(9000 + 16);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	uint64_t reads = 0;

	assert_non_null(s);
	env_create(&e, 1 * MIB, lbs, 0, 2048);
	fill_random(e.mem, 64 * 1024, 3);
	for (size_t k = 0; k < nr_offs; k++) {
		for (size_t len = 1; len <= 9000; len += step) {
			memset(r, 0x5a, len + 16);
			byte_io_ok(&e, TD_OP_READ, offs[k], r, len);
			if (memcmp(r, e.mem + offs[k], len) != 0)
				fail_msg("read of %zu bytes at %llu differs", len,
					 (unsigned long long)offs[k]);
			/* Nothing past the asked-for bytes is touched. */
			assert_true(all_value(r + len, 16, 0x5a));
			reads++;
		}
	}
	env_stats(&e, s);
	/* One bounce read each: the extent is far below max_sectors. */
	assert_int_equal(s->ios[TD_OP_READ], reads);
	assert_int_equal(s->ios[TD_OP_WRITE], 0);
	env_destroy(&e);
	free(s);
	free(r);
}

static void test_byte_io_unaligned_reads_return_exactly_the_asked_bytes(void **state)
{
	static const uint64_t offs[] = { 1, 511, 513 };

	(void)state;
	run_unaligned_reads(512, offs, TD_ARRAY_SIZE(offs), 1);
}

static void test_byte_io_unaligned_reads_on_4k_disk(void **state)
{
	static const uint64_t offs[] = { 1, 511, 513, 4095, 4097 };

	(void)state;
	run_unaligned_reads(4096, offs, TD_ARRAY_SIZE(offs), 7);
}

static void run_random_writes(uint32_t lbs)
{
	const size_t region = 64 * 1024;
	struct env e;
	uint8_t *model = calloc(1, region);
	uint8_t *w = xmalloc(3000);
	uint8_t *r = xmalloc(3000);
	uint64_t seed = 0xfeed0000ULL + lbs;

	assert_non_null(model);
	env_create(&e, 1 * MIB, lbs, 0, 2048);
	for (int i = 0; i < 1500; i++) {
		uint64_t off = rnd_range(&seed, 0, region - 1);
		size_t len = (size_t)rnd_range(&seed, 1, TD_MIN(3000, region - off));

		fill_random(w, len, seed);
		byte_io_ok(&e, TD_OP_WRITE, off, w, len);
		memcpy(model + off, w, len);
		if (memcmp(e.mem, model, region) != 0)
			fail_msg("write %d (%zu bytes at %llu) broke the disk", i, len,
				 (unsigned long long)off);
		if (i % 16 == 0) {
			byte_io_ok(&e, TD_OP_READ, off, r, len);
			assert_memory_equal(r, w, len);
		}
	}
	assert_true(all_value(e.mem + region, 64 * 1024, 0));
	env_destroy(&e);
	free(r);
	free(w);
	free(model);
}

static void test_byte_io_random_unaligned_writes_match_a_model(void **state)
{
	(void)state;
	run_random_writes(512);
}

static void test_byte_io_random_unaligned_writes_match_a_model_on_4k_disk(void **state)
{
	(void)state;
	run_random_writes(4096);
}

/* ---- unaligned discard and write zeroes ----------------------------------------------- */

static void run_zeroing(enum td_op op, uint32_t lbs, uint64_t off, size_t len)
{
	const size_t region = 64 * 1024;
	struct env e;
	uint8_t *before = xmalloc(region);

	env_create(&e, 1 * MIB, lbs, 0, 2048);
	fill_random(e.mem, region, 4 + off);
	for (size_t i = 0; i < region; i++)
		e.mem[i] |= 1; /* no zero byte anywhere yet */
	memcpy(before, e.mem, region);
	assert_int_equal(byte_io(&e, op, off, NULL, len, 0), 0);
	if (!all_value(e.mem + off, len, 0))
		fail_msg("%s [%llu, +%zu) left data", td_op_name(op), (unsigned long long)off,
			 len);
	assert_memory_equal(e.mem, before, off);
	assert_memory_equal(e.mem + off + len, before + off + len, region - off - len);
	env_destroy(&e);
	free(before);
}

static void run_zeroing_cases(enum td_op op)
{
	/* Both edges partial, one partial block, aligned start, aligned end, inside one 4k block. */
	run_zeroing(op, 512, 1000, 5000);
	run_zeroing(op, 512, 10, 20);
	run_zeroing(op, 512, 512, 700);
	run_zeroing(op, 512, 300, 724);
	run_zeroing(op, 512, 1024, 4096);
	run_zeroing(op, 4096, 4096 * 3 + 1, 8192);
	run_zeroing(op, 4096, 100, 200);
	run_zeroing(op, 4096, 8192, 5000);
	run_zeroing(op, 4096, 5000, 11384);
}

static void assert_zeroing_requests(enum td_op op)
{
	struct env e;
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	env_create(&e, 1 * MIB, 512, 0, 2048);
	memset(e.mem, 0xa5, 8192);
	/*
	 * [1000, 6000): the blocks at 512 and 5632 are partial (read, patched,
	 * written), the nine whole blocks [1024, 5632) go down as one @op.
	 */
	assert_int_equal(byte_io(&e, op, 1000, NULL, 5000, 0), 0);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_READ], 2);
	assert_int_equal(s->ios[TD_OP_WRITE], 2);
	assert_int_equal(s->sectors[TD_OP_WRITE], 2);
	assert_int_equal(s->ios[op], 1);
	assert_int_equal(s->sectors[op], 9);
	assert_true(all_value(e.mem + 1000, 5000, 0));
	assert_true(all_value(e.mem, 1000, 0xa5));
	assert_true(all_value(e.mem + 6000, 8192 - 6000, 0xa5));
	env_destroy(&e);
	free(s);
}

static void test_byte_io_unaligned_discard_zeroes_exactly_its_range(void **state)
{
	(void)state;
	run_zeroing_cases(TD_OP_DISCARD);
	assert_zeroing_requests(TD_OP_DISCARD);
}

static void test_byte_io_unaligned_write_zeroes_zeroes_exactly_its_range(void **state)
{
	(void)state;
	run_zeroing_cases(TD_OP_WRITE_ZEROES);
	assert_zeroing_requests(TD_OP_WRITE_ZEROES);
}

/* ---- FUA ------------------------------------------------------------------------------ */

static void test_byte_io_fua_reaches_the_backend(void **state)
{
	struct env e;
	uint8_t *w = xmalloc(36864);

	(void)state;
	env_create(&e, 1 * MIB, 512, 0, 16);
	fill_random(w, 36864, 5);

	assert_int_equal(byte_io(&e, TD_OP_WRITE, 0, w, 4096, TD_BIO_FUA), 0);
	assert_int_equal(atomic_load(&e.rec->writes), 1);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 1);

	assert_int_equal(byte_io(&e, TD_OP_WRITE, 4096, w, 4096, 0), 0);
	assert_int_equal(atomic_load(&e.rec->writes), 2);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 1);

	/* A split write: every piece is FUA. */
	assert_int_equal(byte_io(&e, TD_OP_WRITE, 16384, w, 36864, TD_BIO_FUA), 0);
	assert_int_equal(atomic_load(&e.rec->writes), 7);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 6);

	/* Read-modify-write: the write is FUA. */
	assert_int_equal(byte_io(&e, TD_OP_WRITE, 100, w, 1000, TD_BIO_FUA), 0);
	assert_int_equal(atomic_load(&e.rec->writes), 8);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 7);
	assert_memory_equal(e.mem + 100, w, 1000);

	/* Discard with the flag set: no data write, nothing FUA. */
	assert_int_equal(byte_io(&e, TD_OP_DISCARD, 65536, NULL, 4096, TD_BIO_FUA), 0);
	assert_int_equal(atomic_load(&e.rec->writes), 8);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 7);
	env_destroy(&e);
	free(w);
}

/* ---- malformed I/O and errors --------------------------------------------------------- */

static void test_byte_io_rejects_malformed_io_without_calling_end(void **state)
{
	struct env e;
	uint8_t buf[1024];
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_drive_status ds;
	const uint64_t cap = 1 * MIB;

	(void)state;
	assert_non_null(s);
	env_create(&e, cap, 512, 0, 2048);
	memset(buf, 0x11, sizeof(buf));
	/* byte_io() asserts ->end did not run when submit fails. */
	assert_int_equal(byte_io(&e, TD_OP_READ, 0, buf, 0, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_WRITE, 512, buf, 0, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_DISCARD, 512, NULL, 0, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_READ, cap, buf, 1, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_WRITE, cap - 1, buf, 2, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_WRITE, cap - 512, buf, 1024, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_READ, UINT64_MAX, buf, 1, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_READ, cap + 4096, buf, 512, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_READ, 0, NULL, 512, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_WRITE, 3, NULL, 100, 0), -EINVAL);
	assert_int_equal(byte_io(&e, TD_OP_FLUSH, 0, NULL, 512, 0), -EINVAL);
	assert_int_equal(byte_io(&e, (enum td_op)TD_OP_COUNT, 0, buf, 512, 0), -EINVAL);
	env_stats(&e, s);
	for (int op = 0; op < TD_OP_COUNT; op++)
		assert_int_equal(s->ios[op], 0);
	td_drive_get_status(e.drive, &ds);
	assert_int_equal(ds.commands, 0);
	assert_true(all_value(e.mem + cap - 4096, 4096, 0));

	/* The very last byte is fine, and a discard needs no buffer. */
	assert_int_equal(byte_io(&e, TD_OP_WRITE, cap - 1, buf, 1, 0), 0);
	assert_int_equal(e.mem[cap - 1], 0x11);
	assert_int_equal(byte_io(&e, TD_OP_DISCARD, cap - 512, NULL, 512, 0), 0);
	assert_int_equal(e.mem[cap - 1], 0);
	env_destroy(&e);
	free(s);
}

static void test_byte_io_errors_reach_end_and_release_the_range(void **state)
{
	struct env e;
	uint8_t *buf = xmalloc(36864);
	struct td_inject *inj;

	(void)state;
	env_create(&e, 1 * MIB, 512, 0, 16);
	inj = td_drive_inject(e.drive);
	fill_random(buf, 36864, 6);

	/* An unaligned read over a failing sector. */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 10, 1, 1), 0);
	assert_int_equal(byte_io(&e, TD_OP_READ, 5000, buf, 1000, 0), -EIO);
	/* An unaligned write whose first block cannot be read: nothing starts. */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_READ, 9, 1, 1), 0);
	assert_int_equal(byte_io(&e, TD_OP_WRITE, 4700, buf, 400, 0), -EIO);
	assert_true(all_value(e.mem + 4608, 512, 0));
	/* Its range was released: the same write now goes through. */
	assert_int_equal(byte_io(&e, TD_OP_WRITE, 4700, buf, 400, 0), 0);
	assert_memory_equal(e.mem + 4700, buf, 400);

	/* One failing piece of a split write fails the whole I/O, once. */
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_WRITE, 100, 1, 1), 0);
	assert_int_equal(byte_io(&e, TD_OP_WRITE, 32768, buf, 36864, 0), -EIO);
	/* The piece [96, 112) failed; the others were written. */
	assert_memory_equal(e.mem + 32768, buf, 16384);
	assert_true(all_value(e.mem + 32768 + 16384, 8192, 0));
	assert_memory_equal(e.mem + 32768 + 24576, buf + 24576, 36864 - 24576);
	env_destroy(&e);
	free(buf);
}

/* ---- concurrent read-modify-write ----------------------------------------------------- */

/*
 * Two threads share REGION_BLOCKS blocks. Byte ownership:
 *   block b % 4 == 0   every byte belongs to thread 0
 *   block b % 4 == 2   every byte belongs to thread 1
 *   b odd              even bytes thread 0, odd bytes thread 1
 * Each thread writes only bytes it owns, three ways:
 *   one byte in a shared block                      RMW of that block
 *   its whole block plus the single owned byte      RMW of two blocks, one of
 *   of the shared neighbour (513 bytes)             them shared with the other
 *   its whole block                                 aligned, no RMW
 * so both threads read-modify-write the shared blocks all the time. A lost
 * update (an RMW writing back the other thread's stale byte) shows up as a
 * byte differing from its owner's model.
 *
 * A thread keeps up to CONC_WINDOW I/Os in flight and applies each to its
 * model when it submits it. That order is the one the disk sees: an RMW
 * holds its extent exclusively and an aligned write holds it shared until
 * it completes, so any two overlapping I/Os of one thread are ordered by the
 * range lock, except two aligned writes; a thread therefore waits for its
 * aligned write to complete before issuing the next one.
 */
#define REGION_BLOCKS 16
#define CONC_OPS 2000
#define CONC_WINDOW 6

struct conc_slot {
	struct td_byte_io io;
	uint8_t data[4097 + 1];
	bool aligned;
	struct conc_thread *t;
};

struct conc_thread {
	struct env *e;
	unsigned int id;
	uint32_t lbs;
	uint64_t seed;
	uint8_t *model; /* REGION_BLOCKS * lbs bytes; only the owner's bytes matter */
	struct conc_slot slots[CONC_WINDOW];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int free_mask; /* lock: slots not in flight */
	unsigned int aligned_in_flight; /* lock */
	_Atomic unsigned int failures;
};

static unsigned int owner_of(uint64_t x, uint32_t lbs)
{
	uint64_t b = x / lbs;

	if (b % 4 == 0)
		return 0;
	if (b % 4 == 2)
		return 1;
	return (unsigned int)(x % 2);
}

static void conc_end(struct td_byte_io *io, int err)
{
	struct conc_slot *slot = td_container_of(io, struct conc_slot, io);
	struct conc_thread *t = slot->t;

	if (err)
		atomic_fetch_add(&t->failures, 1);
	pthread_mutex_lock(&t->lock);
	t->free_mask |= 1U << (slot - t->slots);
	if (slot->aligned)
		t->aligned_in_flight--;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void *conc_main(void *p)
{
	struct conc_thread *t = p;
	uint32_t lbs = t->lbs;

	for (int i = 0; i < CONC_OPS; i++) {
		unsigned int kind = (unsigned int)rnd_range(&t->seed, 0, 2);
		uint64_t k = rnd_range(&t->seed, 0, REGION_BLOCKS / 4 - 1);
		uint64_t own = (4 * k + 2 * t->id) * lbs; /* the thread's whole block */
		uint64_t off;
		size_t len;

		if (kind == 0) {
			uint64_t shared = (4 * k + 1 + 2 * rnd_range(&t->seed, 0, 1)) * lbs;

			off = shared + 2 * rnd_range(&t->seed, 0, lbs / 2 - 1) + t->id;
			len = 1;
		} else if (kind == 1) {
			/* Thread 0 reaches one byte forward, thread 1 one byte back. */
			off = t->id ? own - 1 : own;
			len = lbs + 1;
		} else {
			off = own;
			len = lbs;
		}

		pthread_mutex_lock(&t->lock);
		while (!t->free_mask || (kind == 2 && t->aligned_in_flight))
			pthread_cond_wait(&t->cond, &t->lock);
		unsigned int n = (unsigned int)__builtin_ctz(t->free_mask);

		t->free_mask &= ~(1U << n);
		if (kind == 2)
			t->aligned_in_flight++;
		pthread_mutex_unlock(&t->lock);

		struct conc_slot *slot = &t->slots[n];

		fill_random(slot->data, len, t->seed);
		for (size_t j = 0; j < len; j++) {
			if (owner_of(off + j, lbs) != t->id)
				atomic_fetch_add(&t->failures, 1); /* the test itself is wrong */
		}
		memcpy(t->model + off, slot->data, len);
		slot->aligned = kind == 2;
		slot->t = t;
		memset(&slot->io, 0, sizeof(slot->io));
		slot->io.op = TD_OP_WRITE;
		slot->io.off = off;
		slot->io.len = len;
		slot->io.data = slot->data;
		slot->io.end = conc_end;
		if (td_byte_io_submit(t->e->q, &slot->io)) {
			atomic_fetch_add(&t->failures, 1);
			conc_end(&slot->io, 0);
		}
	}
	pthread_mutex_lock(&t->lock);
	while (t->free_mask != (1U << CONC_WINDOW) - 1)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

static void run_concurrent_rmw(uint32_t lbs)
{
	const size_t region = (size_t)REGION_BLOCKS * lbs;
	struct env e;
	struct conc_thread *t = calloc(2, sizeof(*t));
	pthread_t th[2];
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	assert_non_null(t);
	assert_non_null(s);
	env_create(&e, 1 * MIB, lbs, 2, 2048);
	atomic_store(&e.rec->write_hold_us, 20);
	for (unsigned int i = 0; i < 2; i++) {
		t[i].e = &e;
		t[i].id = i;
		t[i].lbs = lbs;
		t[i].seed = 0xc0ffee00ULL + i;
		t[i].model = calloc(1, region);
		assert_non_null(t[i].model);
		pthread_mutex_init(&t[i].lock, NULL);
		pthread_cond_init(&t[i].cond, NULL);
		t[i].free_mask = (1U << CONC_WINDOW) - 1;
	}
	for (unsigned int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, conc_main, &t[i]), 0);
	for (unsigned int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	td_queue_drain(e.q);

	for (unsigned int i = 0; i < 2; i++)
		assert_int_equal(atomic_load(&t[i].failures), 0);
	for (size_t x = 0; x < region; x++) {
		uint8_t want = t[owner_of(x, lbs)].model[x];

		if (e.mem[x] != want)
			fail_msg("byte %zu (block %zu, owner %u) is %#x, its owner last wrote %#x",
				 x, x / lbs, owner_of(x, lbs), e.mem[x], want);
	}
	assert_true(all_value(e.mem + region, 4096, 0));
	env_stats(&e, s);
	/* The shared blocks really were read-modify-written by both threads. */
	assert_true(s->ios[TD_OP_READ] > CONC_OPS);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	for (unsigned int i = 0; i < 2; i++) {
		pthread_cond_destroy(&t[i].cond);
		pthread_mutex_destroy(&t[i].lock);
		free(t[i].model);
	}
	env_destroy(&e);
	free(s);
	free(t);
}

static void test_byte_io_concurrent_rmw_keeps_every_owners_last_bytes(void **state)
{
	(void)state;
	run_concurrent_rmw(512);
}

static void test_byte_io_concurrent_rmw_keeps_every_owners_last_bytes_on_4k_disk(void **state)
{
	(void)state;
	run_concurrent_rmw(4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_byte_io_aligned_write_and_read_are_one_request_each),
		cmocka_unit_test(test_byte_io_splits_at_max_sectors_inline),
		cmocka_unit_test(test_byte_io_splits_at_max_sectors_with_workers),
		cmocka_unit_test(test_byte_io_unaligned_reads_return_exactly_the_asked_bytes),
		cmocka_unit_test(test_byte_io_unaligned_reads_on_4k_disk),
		cmocka_unit_test(test_byte_io_random_unaligned_writes_match_a_model),
		cmocka_unit_test(test_byte_io_random_unaligned_writes_match_a_model_on_4k_disk),
		cmocka_unit_test(test_byte_io_unaligned_discard_zeroes_exactly_its_range),
		cmocka_unit_test(test_byte_io_unaligned_write_zeroes_zeroes_exactly_its_range),
		cmocka_unit_test(test_byte_io_fua_reaches_the_backend),
		cmocka_unit_test(test_byte_io_rejects_malformed_io_without_calling_end),
		cmocka_unit_test(test_byte_io_errors_reach_end_and_release_the_range),
		cmocka_unit_test(test_byte_io_concurrent_rmw_keeps_every_owners_last_bytes),
		cmocka_unit_test(test_byte_io_concurrent_rmw_keeps_every_owners_last_bytes_on_4k_disk),
	};

	td_log_init("test_bio", TD_LOG_ERR);
	alarm(WATCHDOG_S);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
