// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_drive.c - the drive (src/engine/drive.c, model_hdd.c, model_ssd.c) and
 * its backends (drive_mem.c, drive_null.c, drive_file.c): commands decoded
 * from their bytes, fault injection, the latency models and how many
 * commands they delay at once, quiesce and abandon, synchronous execution
 * and the image file backend.
 *
 * Most cases run the drive behind a queue and corrupt or rewrite the
 * command bytes in a custom prep function after td_prep_default, which is
 * the only way a real request reaches the drive. Quiesce is tested on the
 * drive alone with hand-built requests, since the queue would requeue what
 * the drive drops. Families of cases that differ only in their inputs are
 * tables, each row a cmocka case of its own (see main()).
 */
#include <errno.h>
#include <fcntl.h>
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/log.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "unit_util.h"

#define MIB (1024ULL * 1024ULL)
#define WAIT_MS 10000
#define WATCHDOG_S 900

/* ---- completions ---------------------------------------------------------------------- */

struct tbio {
	struct td_bio bio;
	struct done *done;
	_Atomic int ended;
	_Atomic int err;
	uint64_t end_ns;
};

static void tbio_end(struct td_bio *bio, int err)
{
	struct tbio *t = td_container_of(bio, struct tbio, bio);

	t->end_ns = mono_ns();
	atomic_store(&t->err, err);
	atomic_fetch_add(&t->ended, 1);
	if (t->done)
		done_add(t->done, err);
}

static void tbio_init(struct tbio *t, struct done *d, enum td_op op, uint64_t sector,
		      uint32_t nr, void *data)
{
	memset(t, 0, sizeof(*t));
	td_bio_init(&t->bio, op, sector, nr, data, tbio_end, NULL);
	t->done = d;
}

/* ---- the environment: drive + queue --------------------------------------------------- */

struct env {
	struct td_drive *drive;
	struct td_queue *q;
	struct rec *rec;
	uint8_t *mem;
	uint64_t size;
};

/* A drive over a recording memory backend (@dp's backend is replaced) and a queue over it. */
static void env_create_with(struct env *e, struct td_drive_params *dp, enum td_queue_mode mode,
			    unsigned int depth, const char *elevator)
{
	struct td_queue_params qp;
	int err = 0;

	memset(e, 0, sizeof(*e));
	e->size = dp->capacity_bytes;
	e->rec = rec_create(e->size);
	e->mem = td_backend_mem_data(&e->rec->inner);
	dp->backend = rec_backend(e->rec);
	e->drive = td_drive_create(dp, &err);
	assert_non_null(e->drive);
	assert_int_equal(err, 0);
	td_queue_params_default(&qp);
	qp.mode = mode;
	qp.capacity_sectors = e->size >> TD_SECTOR_SHIFT;
	qp.logical_block_size = dp->logical_block_size;
	qp.depth = depth;
	qp.elevator = elevator;
	qp.command_timeout_ms = 0;
	qp.drive = e->drive;
	e->q = td_queue_create(&qp, &err);
	assert_non_null(e->q);
}

static void env_create(struct env *e, uint64_t size, unsigned int workers)
{
	struct td_drive_params dp;

	td_drive_params_default(&dp);
	dp.capacity_bytes = size;
	dp.workers = workers;
	env_create_with(e, &dp, TD_MODE_RQ, 32, "deadline");
}

static void env_destroy(struct env *e)
{
	td_queue_drain(e->q);
	td_queue_destroy(e->q);
	td_drive_destroy(e->drive);
	free(e->rec);
	memset(e, 0, sizeof(*e));
}

static void env_stats(struct env *e, struct td_stats_snapshot *s)
{
	td_stats_snapshot(td_queue_stats(e->q), s, mono_ns());
}

/* Submit and wait; return the bio's error. */
static int io_sync(struct env *e, enum td_op op, uint64_t sector, uint32_t nr, void *data,
		   unsigned int flags)
{
	struct done d;
	struct tbio t;

	done_init(&d);
	tbio_init(&t, &d, op, sector, nr, data);
	t.bio.flags = flags;
	td_queue_submit(e->q, &t.bio);
	assert_true(done_wait(&d, 1, WAIT_MS));
	done_destroy(&d);
	assert_int_equal(atomic_load(&t.ended), 1);
	return atomic_load(&t.err);
}

/* ---- command bytes: the drive decodes them, not the request --------------------------- */

enum cmd_abuse {
	ABUSE_NONE,
	ABUSE_OPCODE,  /* an opcode the drive does not know */
	ABUSE_LENGTH,  /* READ/WRITE(10) bytes with a 16-byte length */
	ABUSE_NO_NDOB, /* WRITE SAME(16) carrying a data block */
	ABUSE_LBA,     /* a valid command at abuse_lba, abuse_blocks */
	ABUSE_LBA_16,  /* READ/WRITE(16) at LBA 2^63 */
};

static _Atomic int abuse_kind;
static _Atomic uint64_t abuse_lba;
static _Atomic uint32_t abuse_blocks;

static enum td_prep_result abusing_prep(struct td_queue *q, struct td_request *rq)
{
	enum td_prep_result res = td_prep_default(q, rq);
	struct td_cdb_cmd cmd = { .op = rq->op };

	if (res != TD_PREP_OK)
		return res;
	switch (atomic_load(&abuse_kind)) {
	case ABUSE_OPCODE:
		rq->cmd[0] = 0xff;
		break;
	case ABUSE_LENGTH:
		rq->cmd_len = 16;
		break;
	case ABUSE_NO_NDOB:
		rq->cmd[1] &= (uint8_t)~TD_CDB_NDOB;
		break;
	case ABUSE_LBA:
		cmd.lba = atomic_load(&abuse_lba);
		cmd.nr_blocks = atomic_load(&abuse_blocks);
		/* Always encodable here; a failure would show as an unexpected -EIO. */
		rq->cmd_len = (uint8_t)td_cdb_encode(rq->cmd, &cmd);
		break;
	case ABUSE_LBA_16:
		rq->cmd[0] = rq->op == TD_OP_READ ? TD_CDB_READ_16 : TD_CDB_WRITE_16;
		memset(rq->cmd + 1, 0, 15);
		rq->cmd[2] = 0x80; /* LBA 2^63 */
		rq->cmd[13] = 8;
		rq->cmd_len = 16;
		break;
	}
	return TD_PREP_OK;
}

static void test_drive_fails_invalid_command_bytes_with_eio(void **state)
{
	static const int kinds[] = { ABUSE_OPCODE, ABUSE_LENGTH };
	struct env e;
	uint8_t *buf = xmalloc(4096);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	(void)state;
	assert_non_null(s);
	env_create(&e, 1 * MIB, 0);
	td_queue_set_prep(e.q, abusing_prep);
	fill_random(buf, 4096, 1);
	for (size_t i = 0; i < TD_ARRAY_SIZE(kinds); i++) {
		atomic_store(&abuse_kind, kinds[i]);
		assert_int_equal(io_sync(&e, TD_OP_WRITE, 64, 8, buf, 0), -EIO);
		assert_int_equal(io_sync(&e, TD_OP_READ, 64, 8, buf, 0), -EIO);
	}
	atomic_store(&abuse_kind, ABUSE_NO_NDOB);
	memset(e.mem, 0x77, 8192);
	assert_int_equal(io_sync(&e, TD_OP_WRITE_ZEROES, 0, 8, NULL, 0), -EIO);
	assert_int_equal(io_sync(&e, TD_OP_DISCARD, 8, 8, NULL, 0), -EIO);
	assert_true(all_value(e.mem, 8192, 0x77));
	assert_int_equal(atomic_load(&e.rec->writes), 0);
	assert_true(all_value(e.mem + 8192, 1 * MIB - 8192, 0));
	env_stats(&e, s);
	assert_int_equal(s->errors[TD_OP_WRITE], 2);
	assert_int_equal(s->errors[TD_OP_READ], 2);
	assert_int_equal(s->errors[TD_OP_WRITE_ZEROES], 1);
	assert_int_equal(s->errors[TD_OP_DISCARD], 1);
	/* Prep passed them: nothing was killed, the drive refused them. */
	assert_int_equal(s->counters[TD_STAT_KILLED], 0);

	atomic_store(&abuse_kind, ABUSE_NONE);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 64, 8, buf, 0), 0);
	assert_memory_equal(e.mem + 64 * 512, buf, 4096);
	env_destroy(&e);
	free(s);
	free(buf);
}

static void test_invalid_command_does_not_consume_fault_rules(void **state)
{
	struct td_drive_params dp;
	struct env e;
	uint8_t *buf = xmalloc(4096);
	struct td_inject *inj;
	struct td_inject_rule rules[2];

	(void)state;
	td_drive_params_default(&dp);
	dp.capacity_bytes = 1 * MIB;
	dp.workers = 0;
	env_create_with(&e, &dp, TD_MODE_RQ, 32, "noop");
	td_queue_set_prep(e.q, abusing_prep);
	inj = td_drive_inject(e.drive);
	fill_random(buf, 4096, 9);

	/* The pool hands the same request out again: it last addressed sector 0. */
	atomic_store(&abuse_kind, ABUSE_NONE);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), 0);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_WRITE, 0, 8, 1), 0);
	/* An undecodable command addresses nothing: it fails, but no rule matches it. */
	atomic_store(&abuse_kind, ABUSE_OPCODE);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 64, 8, buf, 0), -EIO);
	assert_int_equal(td_inject_list(inj, rules, 2), 1);
	assert_int_equal(rules[0].fired, 0);
	/* So the rule is still armed for the write it was meant for. */
	atomic_store(&abuse_kind, ABUSE_NONE);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), -EIO);
	assert_int_equal(td_inject_list(inj, rules, 2), 1);
	assert_int_equal(rules[0].fired, 1);
	td_inject_clear(inj);
	env_destroy(&e);
	free(buf);
}

static void test_drive_follows_the_command_lba_not_the_request(void **state)
{
	struct env e;
	uint8_t *buf = xmalloc(4096);
	const uint64_t blocks = 1 * MIB / 512;

	(void)state;
	env_create(&e, 1 * MIB, 2);
	td_queue_set_prep(e.q, abusing_prep);
	fill_random(buf, 4096, 2);

	/* A bio at sector 0 whose command says LBA 100: the data lands at 100. */
	atomic_store(&abuse_kind, ABUSE_LBA);
	atomic_store(&abuse_lba, 100);
	atomic_store(&abuse_blocks, 8);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), 0);
	assert_memory_equal(e.mem + 100 * 512, buf, 4096);
	assert_true(all_value(e.mem, 4096, 0));

	/* The last eight blocks are inside; one block further is not. */
	atomic_store(&abuse_lba, blocks - 8);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), 0);
	assert_memory_equal(e.mem + (blocks - 8) * 512, buf, 4096);
	memset(e.mem + (blocks - 8) * 512, 0, 4096);
	atomic_store(&abuse_lba, blocks - 7);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), -EIO);
	atomic_store(&abuse_lba, blocks);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), -EIO);
	assert_int_equal(io_sync(&e, TD_OP_READ, 0, 8, buf, 0), -EIO);
	atomic_store(&abuse_kind, ABUSE_LBA_16);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), -EIO);
	assert_int_equal(io_sync(&e, TD_OP_READ, 0, 8, buf, 0), -EIO);
	assert_true(all_value(e.mem + (blocks - 16) * 512, 16 * 512, 0));
	atomic_store(&abuse_kind, ABUSE_NONE);
	env_destroy(&e);
	free(buf);
}

static void test_drive_fails_data_length_mismatch_with_eio(void **state)
{
	struct env e;
	uint8_t *buf = xmalloc(8192);

	(void)state;
	env_create(&e, 1 * MIB, 0);
	td_queue_set_prep(e.q, abusing_prep);
	fill_random(buf, 8192, 3);
	atomic_store(&abuse_kind, ABUSE_LBA);
	atomic_store(&abuse_lba, 32);
	atomic_store(&abuse_blocks, 16); /* the bio has 8 sectors */
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 32, 8, buf, 0), -EIO);
	assert_int_equal(io_sync(&e, TD_OP_READ, 32, 8, buf, 0), -EIO);
	atomic_store(&abuse_blocks, 4);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 32, 8, buf, 0), -EIO);
	assert_true(all_value(e.mem, 1 * MIB, 0));
	assert_int_equal(atomic_load(&e.rec->writes), 0);
	atomic_store(&abuse_blocks, 8);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 32, 8, buf, 0), 0);
	assert_memory_equal(e.mem + 32 * 512, buf, 4096);
	atomic_store(&abuse_kind, ABUSE_NONE);
	env_destroy(&e);
	free(buf);
}

/* ---- fault injection ------------------------------------------------------------------ */

static void test_injected_error_fails_exactly_the_overlapping_commands(void **state)
{
	struct env e;
	uint8_t *buf = xmalloc(4096);
	uint8_t *rbuf = xmalloc(4096);
	struct td_inject *inj;
	struct td_inject_rule rules[4];

	(void)state;
	env_create(&e, 1 * MIB, 2);
	inj = td_drive_inject(e.drive);
	fill_random(buf, 4096, 4);
	assert_int_equal(td_inject_add_error(inj, TD_INJECT_WRITE, 100, 8, TD_INJECT_FOREVER), 0);

	assert_int_equal(io_sync(&e, TD_OP_WRITE, 92, 8, buf, 0), 0);   /* ends at 100 */
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 96, 8, buf, 0), -EIO); /* 100..103 */
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 107, 1, buf, 0), -EIO);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 108, 8, buf, 0), 0);  /* starts after */
	assert_int_equal(io_sync(&e, TD_OP_READ, 100, 8, rbuf, 0), 0);  /* reads are spared */
	assert_int_equal(io_sync(&e, TD_OP_DISCARD, 104, 8, NULL, 0), -EIO);
	assert_int_equal(io_sync(&e, TD_OP_FLUSH, 0, 0, NULL, 0), 0);

	assert_memory_equal(e.mem + 92 * 512, buf, 4096);
	assert_memory_equal(e.mem + 108 * 512, buf, 4096);
	assert_true(all_value(e.mem + 100 * 512, 8 * 512, 0));
	assert_int_equal(td_inject_list(inj, rules, 4), 1);
	assert_int_equal(rules[0].kind, TD_INJECT_ERROR);
	assert_int_equal(rules[0].fired, 3);
	td_inject_clear(inj);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 96, 8, buf, 0), 0);
	env_destroy(&e);
	free(rbuf);
	free(buf);
}

#define EVERY_IOS 120

/* Run EVERY_IOS reads on a fresh drive seeded @seed failing one in 3; record which failed. */
static unsigned int every_n_run(uint64_t seed, bool *failed)
{
	struct td_drive_params dp;
	struct env e;
	uint8_t buf[512];
	unsigned int n = 0;

	td_drive_params_default(&dp);
	dp.capacity_bytes = 1 * MIB;
	dp.workers = 0;
	dp.seed = seed;
	env_create_with(&e, &dp, TD_MODE_RQ, 32, "noop");
	assert_int_equal(td_inject_seed(td_drive_inject(e.drive)), seed);
	assert_int_equal(td_inject_set_every(td_drive_inject(e.drive), 3), 0);
	for (unsigned int i = 0; i < EVERY_IOS; i++) {
		int err = io_sync(&e, TD_OP_READ, i * 8, 1, buf, 0);

		assert_true(err == 0 || err == -EIO);
		failed[i] = err != 0;
		n += failed[i];
	}
	td_inject_clear(td_drive_inject(e.drive));
	env_destroy(&e);
	return n;
}

static void test_inject_every_n_with_a_seed_repeats_on_a_fresh_drive(void **state)
{
	bool a[EVERY_IOS], b[EVERY_IOS], c[EVERY_IOS];
	unsigned int na, nb, nc;

	(void)state;
	na = every_n_run(42, a);
	nb = every_n_run(42, b);
	nc = every_n_run(43, c);
	assert_true(na > 0 && na < EVERY_IOS);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, sizeof(a));
	assert_true(nc > 0 && nc < EVERY_IOS);
	assert_memory_not_equal(a, c, sizeof(a));
}

static void run_latency(enum td_queue_mode mode, unsigned int workers)
{
	const uint32_t latency_us = 20000;
	struct td_drive_params dp;
	struct env e;
	struct done d;
	struct tbio t;
	uint8_t buf[4096];

	td_drive_params_default(&dp);
	dp.capacity_bytes = 1 * MIB;
	dp.workers = workers;
	env_create_with(&e, &dp, mode, 32, "deadline");
	fill_random(buf, sizeof(buf), 5);
	td_inject_set_latency(td_drive_inject(e.drive), latency_us);
	done_init(&d);
	tbio_init(&t, &d, TD_OP_WRITE, 0, 8, buf);
	uint64_t start = mono_ns();

	td_queue_submit(e.q, &t.bio);
	assert_true(done_wait(&d, 1, WAIT_MS));
	assert_int_equal(atomic_load(&t.err), 0);
	assert_true(t.end_ns - start >= latency_us * 1000ULL);
	assert_memory_equal(e.mem, buf, sizeof(buf));
	td_inject_clear(td_drive_inject(e.drive));
	done_destroy(&d);
	env_destroy(&e);
}

static void test_injected_latency_delays_inline_commands(void **state)
{
	(void)state;
	run_latency(TD_MODE_RQ, 0);
}

static void test_injected_latency_delays_worker_commands(void **state)
{
	(void)state;
	run_latency(TD_MODE_RQ, 2);
}

static void test_injected_latency_delays_bio_mode_commands(void **state)
{
	(void)state;
	run_latency(TD_MODE_BIO, 0);
}

/* ---- latency models ------------------------------------------------------------------- */

#define HDD_READS 256

/* Mean head movement, in sectors, of HDD_READS random reads with @depth tags. */
static uint64_t hdd_mean_seek(unsigned int depth)
{
	struct td_drive_params dp;
	struct env e;
	struct done d;
	struct tbio *t = calloc(HDD_READS, sizeof(*t));
	uint8_t *buf = xmalloc(4096);
	struct td_drive_status st;
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	uint64_t seed = 0x4dd5eedULL;

	assert_non_null(t);
	assert_non_null(s);
	td_drive_params_default(&dp);
	dp.capacity_bytes = 8 * MIB; /* 16384 sectors: 256 tracks of 64 */
	dp.model = TD_MODEL_HDD;
	dp.hdd = (struct td_hdd_params){
		.rpm = 600000, /* a revolution every 100 us */
		.seek_track_us = 1,
		.seek_full_us = 200,
		.transfer_mb_s = 1000,
		.overhead_us = 1,
		.sectors_per_track = 64,
	};
	/* noop: the order the drive sees is the order of submission. */
	env_create_with(&e, &dp, TD_MODE_RQ, depth, "noop");
	done_init(&d);
	for (unsigned int i = 0; i < HDD_READS; i++) {
		uint64_t sector = rnd_next(&seed) % (16384 / 8) * 8;

		tbio_init(&t[i], &d, TD_OP_READ, sector, 8, buf);
		if (i)
			t[i - 1].bio.next = &t[i].bio;
	}
	td_queue_submit_list(e.q, &t[0].bio);
	assert_true(done_wait(&d, HDD_READS, WAIT_MS * 3));
	assert_int_equal(d.errors, 0);
	td_drive_get_status(e.drive, &st);
	env_stats(&e, s);
	assert_int_equal(st.model, TD_MODEL_HDD);
	assert_int_equal(st.workers, 1);
	/* Every request the queue completed was one command (a few neighbours merged). */
	assert_int_equal(st.commands, s->ios[TD_OP_READ]);
	assert_int_equal(s->ios[TD_OP_READ] + s->back_merges[TD_OP_READ], HDD_READS);
	assert_true(st.seeks > 0);
	done_destroy(&d);
	env_destroy(&e);
	free(s);
	free(buf);
	free(t);
	return st.seek_distance / st.seeks;
}

static void test_hdd_with_32_outstanding_seeks_shorter_than_with_1(void **state)
{
	uint64_t one, deep;

	(void)state;
	one = hdd_mean_seek(1);
	deep = hdd_mean_seek(32);
	print_message("hdd mean seek: %llu sectors with 1 outstanding, %llu with 32\n",
		      (unsigned long long)one, (unsigned long long)deep);
	assert_true(deep < one);
}

static void test_ssd_model_completes_after_its_latency(void **state)
{
	struct td_drive_params dp;
	struct env e;
	struct done d;
	struct tbio t[8];
	uint8_t *buf = xmalloc(8 * 4096);
	uint8_t *r = xmalloc(8 * 4096);
	struct td_drive_status st;

	(void)state;
	td_drive_params_default(&dp);
	dp.capacity_bytes = 1 * MIB;
	dp.model = TD_MODEL_SSD;
	dp.workers = 2;
	dp.ssd = (struct td_ssd_params){ .latency_us = 2000, .transfer_mb_s = 2000 };
	env_create_with(&e, &dp, TD_MODE_RQ, 32, "deadline");
	fill_random(buf, 8 * 4096, 6);
	done_init(&d);
	uint64_t start = mono_ns();

	for (int i = 0; i < 8; i++) {
		tbio_init(&t[i], &d, TD_OP_WRITE, (uint64_t)i * 16, 8, buf + i * 4096);
		td_queue_submit(e.q, &t[i].bio);
	}
	assert_true(done_wait(&d, 8, WAIT_MS));
	assert_int_equal(d.errors, 0);
	for (int i = 0; i < 8; i++) {
		assert_true(t[i].end_ns - start >= 2000 * 1000ULL);
		assert_memory_equal(e.mem + i * 16 * 512, buf + i * 4096, 4096);
		assert_int_equal(io_sync(&e, TD_OP_READ, (uint64_t)i * 16, 8, r, 0), 0);
		assert_memory_equal(r, buf + i * 4096, 4096);
	}
	td_drive_get_status(e.drive, &st);
	assert_int_equal(st.model, TD_MODEL_SSD);
	assert_int_equal(st.workers, 2);
	assert_int_equal(st.commands, 16);
	done_destroy(&d);
	env_destroy(&e);
	free(r);
	free(buf);
}

static void test_write_cache_modes_decide_fua_at_the_backend(void **state)
{
	struct td_drive_params dp;
	struct env e;
	uint8_t buf[4096];

	(void)state;
	memset(buf, 0x3c, sizeof(buf));
	td_drive_params_default(&dp);
	dp.capacity_bytes = 1 * MIB;
	dp.workers = 0;
	env_create_with(&e, &dp, TD_MODE_RQ, 32, "deadline");
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), 0);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 0);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 8, 8, buf, TD_BIO_FUA), 0);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 1);
	assert_int_equal(atomic_load(&e.rec->writes), 2);
	env_destroy(&e);

	td_drive_params_default(&dp);
	dp.capacity_bytes = 1 * MIB;
	dp.workers = 0;
	dp.write_cache = TD_WC_WRITETHROUGH;
	env_create_with(&e, &dp, TD_MODE_RQ, 32, "deadline");
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 8, buf, 0), 0);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 8, 8, buf, 0), 0);
	assert_int_equal(atomic_load(&e.rec->writes), 2);
	assert_int_equal(atomic_load(&e.rec->fua_writes), 2);
	env_destroy(&e);
}

/* ---- the drive alone: quiesce and synchronous execution -------------------------------- */

struct hand_rq {
	struct td_request rq;
	struct td_bio bio;
	uint8_t data[4096];
};

/*
 * A memory backend whose writes wait while its latch is closed: a backend
 * call that hangs for as long as the test wants.
 */
struct latch {
	struct td_backend inner;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool closed;	      /* lock */
	unsigned int waiting; /* writes waiting at the latch; lock */
	int32_t tids[8];      /* the threads of the first writes that waited; lock */
	unsigned int nr_tids; /* lock */
};

static int latch_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off)
{
	struct latch *l = priv;

	return l->inner.ops->read(l->inner.priv, iov, iovcnt, off);
}

static int latch_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	struct latch *l = priv;

	pthread_mutex_lock(&l->lock);
	l->waiting++;
	if (l->closed && l->nr_tids < TD_ARRAY_SIZE(l->tids))
		l->tids[l->nr_tids++] = (int32_t)gettid();
	while (l->closed)
		pthread_cond_wait(&l->cond, &l->lock);
	l->waiting--;
	pthread_mutex_unlock(&l->lock);
	return l->inner.ops->write(l->inner.priv, iov, iovcnt, off, fua);
}

static int latch_flush(void *priv)
{
	struct latch *l = priv;

	return l->inner.ops->flush(l->inner.priv);
}

static int latch_discard(void *priv, uint64_t off, uint64_t len)
{
	struct latch *l = priv;

	return l->inner.ops->discard(l->inner.priv, off, len);
}

static int latch_write_zeroes(void *priv, uint64_t off, uint64_t len)
{
	struct latch *l = priv;

	return l->inner.ops->write_zeroes(l->inner.priv, off, len);
}

/* The drive destroys the inner memory; the test frees the latch after the drive. */
static void latch_destroy(void *priv)
{
	struct latch *l = priv;

	l->inner.ops->destroy(l->inner.priv);
}

static const struct td_backend_ops latch_ops = {
	.name = "latch",
	.read = latch_read,
	.write = latch_write,
	.flush = latch_flush,
	.discard = latch_discard,
	.write_zeroes = latch_write_zeroes,
	.destroy = latch_destroy,
};

static void latch_set(struct latch *l, bool closed)
{
	pthread_mutex_lock(&l->lock);
	l->closed = closed;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static unsigned int latch_waiting(struct latch *l)
{
	unsigned int n;

	pthread_mutex_lock(&l->lock);
	n = l->waiting;
	pthread_mutex_unlock(&l->lock);
	return n;
}

/* Return: true when @n writes wait at the latch within WAIT_MS. */
static bool latch_wait_waiting(struct latch *l, unsigned int n)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;

	while (latch_waiting(l) != n) {
		if (mono_ns() > deadline)
			return false;
		sleep_us(200);
	}
	return true;
}

struct hand_drive {
	struct td_drive *d;
	struct td_backend mem;
	struct latch *latch; /* hand_drive_create_with(..., true) */
	uint8_t *disk;
	struct done done;
	struct td_list claimed; /* inline: submitted, for hand_run() */
	int executing_seen;	/* status.executing inside the last completion call */
	_Atomic unsigned int unpinned; /* unpin calls */
};

static void hand_complete(void *ctx, struct td_list *list)
{
	struct hand_drive *h = ctx;
	struct td_list *pos, *n;
	struct td_drive_status st;

	/* What a status request sees the moment the submitter can have its answer. */
	td_drive_get_status(h->d, &st);
	h->executing_seen = (int)st.executing;
	td_list_for_each_safe(pos, n, list) {
		struct td_request *rq = td_list_entry(pos, struct td_request, drive_list);

		td_list_del(&rq->drive_list);
		done_add(&h->done, rq->error);
	}
}

static void hand_unpin(void *ctx, struct td_request *rq)
{
	struct hand_drive *h = ctx;

	/* Cleared before we are told. */
	if (!atomic_load(&rq->pinned))
		atomic_fetch_add(&h->unpinned, 1);
}

/* A drive made from @dp: its backend is 1 MiB of memory, behind a latch when @latched. */
static void hand_drive_create_with(struct hand_drive *h, struct td_drive_params *dp, bool latched)
{
	int err = 0;

	memset(h, 0, sizeof(*h));
	dp->capacity_bytes = 1 * MIB;
	assert_int_equal(td_backend_mem_init(&h->mem, dp->capacity_bytes), 0);
	h->disk = td_backend_mem_data(&h->mem);
	dp->backend = h->mem;
	if (latched) {
		h->latch = calloc(1, sizeof(*h->latch));
		assert_non_null(h->latch);
		h->latch->inner = h->mem;
		pthread_mutex_init(&h->latch->lock, NULL);
		pthread_cond_init(&h->latch->cond, NULL);
		dp->backend = (struct td_backend){ .ops = &latch_ops, .priv = h->latch };
	}
	h->d = td_drive_create(dp, &err);
	assert_non_null(h->d);
	done_init(&h->done);
	td_list_init(&h->claimed);
	td_drive_attach(h->d, hand_complete, hand_unpin, h);
}

static void hand_drive_create(struct hand_drive *h, unsigned int workers)
{
	struct td_drive_params dp;

	td_drive_params_default(&dp);
	dp.workers = workers;
	hand_drive_create_with(h, &dp, false);
}

static void hand_drive_destroy(struct hand_drive *h)
{
	td_drive_destroy(h->d);
	done_destroy(&h->done);
	if (h->latch) {
		pthread_cond_destroy(&h->latch->cond);
		pthread_mutex_destroy(&h->latch->lock);
		free(h->latch);
	}
}

/* A write of 8 sectors at @sector, its command encoded as prep would. */
static void hand_rq_init(struct hand_rq *h, uint64_t sector)
{
	struct td_cdb_cmd cmd = { .op = TD_OP_WRITE, .lba = sector, .nr_blocks = 8 };
	int len;

	memset(h, 0, sizeof(*h));
	td_list_init(&h->rq.queuelist);
	td_list_init(&h->rq.drive_list);
	fill_random(h->data, sizeof(h->data), sector + 1);
	td_bio_init(&h->bio, TD_OP_WRITE, sector, 8, h->data, NULL, NULL);
	h->rq.state = TD_RQ_INFLIGHT;
	h->rq.op = TD_OP_WRITE;
	h->rq.sector = sector;
	h->rq.nr_sectors = 8;
	h->rq.nr_bios = 1;
	h->rq.bio = &h->bio;
	h->rq.biotail = &h->bio;
	h->rq.tag = 0;
	len = td_cdb_encode(h->rq.cmd, &cmd);
	assert_int_equal(len, 10);
	h->rq.cmd_len = (uint8_t)len;
}

static void hand_submit(struct hand_drive *h, struct hand_rq *rqs, unsigned int n)
{
	struct td_list list = TD_LIST_INIT(list);

	for (unsigned int i = 0; i < n; i++)
		td_list_add_tail(&rqs[i].rq.drive_list, &list);
	if (td_drive_submit_locked(h->d, &list))
		td_list_splice_tail_init(&list, &h->claimed); /* inline: ours to run */
	assert_true(td_list_empty(&list));
}

/* Inline drives: run what hand_submit() claimed. */
static unsigned int hand_run(struct hand_drive *h)
{
	return td_drive_run_inline(h->d, &h->claimed);
}

struct quiesce_thread {
	pthread_t tid;
	struct td_drive *d;
	unsigned int dropped;
};

static void *quiesce_main(void *arg)
{
	struct quiesce_thread *t = arg;

	t->dropped = td_drive_quiesce(t->d);
	return NULL;
}

static bool wait_drive(struct td_drive *d, unsigned int hung, unsigned int executing)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	struct td_drive_status st;

	do {
		td_drive_get_status(d, &st);
		if (st.hung == hung && st.executing == executing)
			return true;
		sleep_us(200);
	} while (mono_ns() < deadline);
	return false;
}

static void test_quiesce_drops_pending_and_held_commands_and_counts_them(void **state)
{
	struct hand_drive h;
	struct hand_rq *r = calloc(6, sizeof(*r));
	struct td_drive_status st;

	(void)state;
	assert_non_null(r);
	hand_drive_create(&h, 0);
	assert_true(td_drive_is_inline(h.d));
	for (int i = 0; i < 6; i++)
		hand_rq_init(&r[i], (uint64_t)i * 8);

	/*
	 * Accepted by an inline drive, not yet run: they count as executing, so a
	 * quiesce waits for the runner, which then gives them up unexecuted.
	 */
	struct quiesce_thread qt = { .d = h.d };

	hand_submit(&h, r, 2);
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.executing, 2);
	assert_int_equal(pthread_create(&qt.tid, NULL, quiesce_main, &qt), 0);
	sleep_us(50000);
	assert_int_equal(hand_run(&h), 0);
	assert_int_equal(pthread_join(qt.tid, NULL), 0);
	assert_int_equal(qt.dropped, 0);
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.executing, 0);

	/* Held by a hang: three hung. */
	assert_int_equal(td_inject_add_hang(td_drive_inject(h.d), 3), 0);
	hand_rq_init(&r[0], 0);
	hand_rq_init(&r[1], 8);
	hand_submit(&h, r, 3);
	assert_int_equal(hand_run(&h), 0);
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.hung, 3);
	assert_int_equal(st.queued, 3);
	assert_int_equal(td_drive_quiesce(h.d), 3);
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.hung, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.commands, 0);
	assert_int_equal(done_count(&h.done), 0);
	assert_true(all_value(h.disk, 1 * MIB, 0));

	/* The drive serves again afterwards. */
	hand_submit(&h, &r[3], 1);
	assert_int_equal(hand_run(&h), 1);
	assert_int_equal(done_count(&h.done), 1);
	assert_int_equal(h.done.errors, 0);
	assert_memory_equal(h.disk + 24 * 512, r[3].data, 4096);
	assert_int_equal(td_drive_quiesce(h.d), 0);
	hand_drive_destroy(&h);
	free(r);
}

/*
 * A command handed to the completion is no longer executing: a client that got
 * its answer and asks for the status must not see it (inline and on workers).
 */
static void test_status_does_not_count_commands_being_completed(void **state)
{
	struct hand_rq *r = calloc(4, sizeof(*r));
	struct hand_drive h;

	(void)state;
	assert_non_null(r);
	hand_drive_create(&h, 0);
	for (int i = 0; i < 4; i++)
		hand_rq_init(&r[i], (uint64_t)i * 8);
	h.executing_seen = -1;
	hand_submit(&h, r, 4);
	assert_int_equal(hand_run(&h), 4);
	assert_int_equal(h.executing_seen, 0);
	hand_drive_destroy(&h);

	hand_drive_create(&h, 1);
	for (int i = 0; i < 4; i++) {
		hand_rq_init(&r[i], (uint64_t)i * 8);
		h.executing_seen = -1;
		hand_submit(&h, &r[i], 1);
		assert_true(done_wait(&h.done, (unsigned int)i + 1, WAIT_MS));
		assert_int_equal(h.executing_seen, 0);
	}
	assert_int_equal(h.done.errors, 0);
	hand_drive_destroy(&h);
	free(r);
}

static void test_quiesce_on_workers_drops_hung_and_delayed_commands(void **state)
{
	struct hand_drive h;
	struct hand_rq *r = calloc(4, sizeof(*r));

	(void)state;
	assert_non_null(r);
	hand_drive_create(&h, 2);
	assert_false(td_drive_is_inline(h.d));
	for (int i = 0; i < 4; i++)
		hand_rq_init(&r[i], (uint64_t)i * 8);

	assert_int_equal(td_inject_add_hang(td_drive_inject(h.d), 3), 0);
	hand_submit(&h, r, 3);
	assert_true(wait_drive(h.d, 3, 0));
	assert_int_equal(td_drive_quiesce(h.d), 3);

	/* A command waiting out a long delay is executing: quiesce takes it back uncounted. */
	td_inject_set_latency(td_drive_inject(h.d), 300000);
	hand_submit(&h, &r[3], 1);
	assert_true(wait_drive(h.d, 0, 1));
	assert_int_equal(td_drive_quiesce(h.d), 0);
	assert_true(wait_drive(h.d, 0, 0));
	sleep_us(400000);
	assert_int_equal(done_count(&h.done), 0);
	assert_true(all_value(h.disk, 1 * MIB, 0));
	td_inject_clear(td_drive_inject(h.d));
	hand_drive_destroy(&h);
	free(r);
}

/* Return: true when the drive shows @executing commands, @delayed of them delayed, in WAIT_MS. */
static bool wait_delayed(struct td_drive *d, unsigned int executing, unsigned int delayed)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	struct td_drive_status st;

	do {
		td_drive_get_status(d, &st);
		if (st.executing == executing && st.delayed == delayed)
			return true;
		sleep_us(200);
	} while (mono_ns() < deadline);
	return false;
}

/*
 * A command waiting out a delay must not take the wake-up meant for an idle
 * worker. Four workers; the first command is delayed (a minute), the next
 * three are held by a hang, so their workers wait for work again after the
 * delayed one began to wait. Then three more commands, one submission each:
 * all four workers must be delaying a command at once.
 */
struct parallel_case {
	const char *name;
	enum td_drive_model model;
	bool injected; /* injected latency rather than the model's */
};

static const struct parallel_case parallel_cases[] = {
	{ .name = "parallel: with injected latency, 4 workers delay 4 commands at once",
	  .model = TD_MODEL_NONE, .injected = true },
	{ .name = "parallel: the ssd model on 4 workers delays 4 commands at once",
	  .model = TD_MODEL_SSD },
};

#define PARALLEL_WORKERS 4

static void run_parallel_case(void **state)
{
	const struct parallel_case *c = *state;
	struct hand_rq *r = calloc(2 * PARALLEL_WORKERS, sizeof(*r));
	struct td_drive_params dp;
	struct td_drive_status st;
	struct hand_drive h;

	assert_non_null(r);
	td_drive_params_default(&dp);
	dp.workers = PARALLEL_WORKERS;
	dp.model = c->model;
	dp.ssd = (struct td_ssd_params){ .latency_us = 60000000, .transfer_mb_s = 2000 };
	hand_drive_create_with(&h, &dp, false);
	if (c->injected)
		td_inject_set_latency(td_drive_inject(h.d), 60000000);
	for (int i = 0; i < 2 * PARALLEL_WORKERS; i++)
		hand_rq_init(&r[i], (uint64_t)i * 8);

	hand_submit(&h, &r[0], 1);
	assert_true(wait_delayed(h.d, 1, 1));
	assert_int_equal(td_inject_add_hang(td_drive_inject(h.d), PARALLEL_WORKERS - 1), 0);
	for (unsigned int i = 1; i < PARALLEL_WORKERS; i++) {
		hand_submit(&h, &r[i], 1);
		/* Counted under the drive lock, which its worker holds until it waits again. */
		assert_true(wait_drive(h.d, i, 1));
	}
	for (unsigned int i = PARALLEL_WORKERS; i < 2 * PARALLEL_WORKERS - 1; i++)
		hand_submit(&h, &r[i], 1);
	assert_true(wait_delayed(h.d, PARALLEL_WORKERS, PARALLEL_WORKERS));
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.queued, PARALLEL_WORKERS - 1); /* the held ones */
	assert_int_equal(st.hung, PARALLEL_WORKERS - 1);

	/* A quiesce ends every delay at once; nothing was executed. */
	assert_int_equal(td_drive_quiesce(h.d), PARALLEL_WORKERS - 1);
	assert_true(wait_delayed(h.d, 0, 0));
	assert_int_equal(done_count(&h.done), 0);
	assert_true(all_value(h.disk, 1 * MIB, 0));
	td_inject_clear(td_drive_inject(h.d));
	hand_drive_destroy(&h);
	free(r);
}

/*
 * Commands whose backend call hangs (a closed latch), as a pwrite does on a
 * frozen file system. A quiesce returns while the calls are blocked (on the
 * old drive it waited for them, and a reset with it): each call becomes
 * stale, its request pinned, and status lists it with its thread, op, sector
 * and a growing age. The fence then holds a command submitted meanwhile: it
 * does not start (it would block at the latch too) until every stale call
 * has returned. When they return, their results complete nothing, the pins
 * are cleared and the unpin function told, and the held command runs. An
 * abandon does the same.
 */
struct stuck_case {
	const char *name;
	unsigned int workers;
	bool abandon;	      /* td_drive_abandon() rather than td_drive_quiesce() */
	unsigned int blocked; /* backend calls blocked at the latch */
	unsigned int returns; /* what the quiesce returns */
};

static const struct stuck_case stuck_cases[] = {
	{ .name = "stuck call: a quiesce leaves an inline runner's call behind and fences",
	  .workers = 0, .blocked = 1, .returns = 2 /* its batch */ },
	{ .name = "stuck call: a quiesce leaves two workers' calls behind and fences",
	  .workers = 2, .blocked = 2, .returns = 3 /* and the one pending */ },
	{ .name = "stuck call: an abandon leaves an inline runner's call behind and fences",
	  .workers = 0, .abandon = true, .blocked = 1, .returns = 2 },
	{ .name = "stuck call: an abandon leaves two workers' calls behind and fences",
	  .workers = 2, .abandon = true, .blocked = 2, .returns = 3 },
};

struct runner_thread {
	pthread_t tid;
	struct hand_drive *h;
	enum { RUN_INLINE, RUN_QUIESCE, RUN_ABANDON } what;
	struct td_list batch; /* RUN_INLINE: a batch of its own, off h->claimed */
	unsigned int ret;
	atomic_bool done;
};

static void *runner_main(void *arg)
{
	struct runner_thread *t = arg;

	if (t->what == RUN_QUIESCE)
		t->ret = td_drive_quiesce(t->h->d);
	else if (t->what == RUN_ABANDON)
		t->ret = td_drive_abandon(t->h->d);
	else
		t->ret = td_drive_run_inline(t->h->d, &t->batch);
	atomic_store(&t->done, true);
	return NULL;
}

/* Return: true when the drive lists @n stale calls, the first one at least @age_us old. */
static bool wait_stale(struct td_drive *d, unsigned int n, uint64_t age_us)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;
	struct td_drive_call calls[4];

	do {
		if (td_drive_get_stale_calls(d, calls, 4) == n && (!n || calls[0].age_us >= age_us))
			return true;
		sleep_us(200);
	} while (mono_ns() < deadline);
	return false;
}

static void run_stuck_case(void **state)
{
	const struct stuck_case *c = *state;
	struct hand_rq *r = calloc(4, sizeof(*r));
	struct runner_thread runner = { .what = RUN_INLINE }, quiescer = { 0 };
	struct td_drive_call calls[4];
	struct td_drive_status st;
	struct td_drive_params dp;
	struct hand_drive h;

	assert_non_null(r);
	td_drive_params_default(&dp);
	dp.workers = c->workers;
	hand_drive_create_with(&h, &dp, true);
	for (int i = 0; i < 4; i++)
		hand_rq_init(&r[i], (uint64_t)i * 8);
	latch_set(h.latch, true);
	hand_submit(&h, r, 2);
	if (!c->workers) {
		runner.h = &h;
		td_list_init(&runner.batch);
		td_list_splice_tail_init(&h.claimed, &runner.batch);
		assert_int_equal(pthread_create(&runner.tid, NULL, runner_main, &runner), 0);
	}
	assert_true(latch_wait_waiting(h.latch, c->blocked));
	if (c->workers) {
		/* A third command waits for a worker. */
		hand_submit(&h, &r[2], 1);
		td_drive_get_status(h.d, &st);
		assert_int_equal(st.queued, 1);
	}

	/* It returns, from a thread of its own so that a wait would fail here, not hang. */
	quiescer.h = &h;
	quiescer.what = c->abandon ? RUN_ABANDON : RUN_QUIESCE;
	assert_int_equal(pthread_create(&quiescer.tid, NULL, runner_main, &quiescer), 0);
	bool returned = wait_flag(&quiescer.done, WAIT_MS);
	unsigned int waiting = latch_waiting(h.latch);

	if (!returned)
		latch_set(h.latch, false); /* let it return, to fail cleanly */
	assert_int_equal(pthread_join(quiescer.tid, NULL), 0);
	assert_true(returned);
	assert_int_equal(waiting, c->blocked);
	assert_int_equal(quiescer.ret, c->returns);

	/* Reported: stale, fenced, each call with its thread, op, sector and age. */
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.stale_calls, c->blocked);
	assert_int_equal(st.fences, 1);
	assert_int_equal(st.executing, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(td_drive_get_stale_calls(h.d, calls, 4), c->blocked);
	for (unsigned int i = 0; i < c->blocked; i++) {
		bool known = false;

		assert_int_equal(calls[i].op, TD_OP_WRITE);
		assert_int_equal(calls[i].nr_sectors, 8);
		assert_true(calls[i].sector == 0 || calls[i].sector == 8);
		pthread_mutex_lock(&h.latch->lock);
		for (unsigned int j = 0; j < h.latch->nr_tids; j++)
			known |= h.latch->tids[j] == calls[i].tid;
		pthread_mutex_unlock(&h.latch->lock);
		assert_true(known);
	}
	assert_true(wait_stale(h.d, c->blocked, 20000)); /* its age grows */
	/* Pinned: the calls may still use their buffers. The inline batch's second is not. */
	assert_true(atomic_load(&r[0].rq.pinned));
	assert_int_equal(atomic_load(&r[1].rq.pinned), c->workers > 0);

	/* The fence: a new write neither starts (it would block at the latch) nor is lost. */
	hand_submit(&h, &r[3], 1);
	if (!c->workers)
		assert_int_equal(hand_run(&h), 0);
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.queued, 1);
	assert_int_equal(latch_waiting(h.latch), c->blocked);
	assert_int_equal(done_count(&h.done), 0);

	/* The calls return: nothing of theirs completes; the pins go; the write runs. */
	latch_set(h.latch, false);
	assert_true(done_wait(&h.done, 1, WAIT_MS));
	if (!c->workers) {
		assert_int_equal(pthread_join(runner.tid, NULL), 0);
		assert_int_equal(runner.ret, 0);
	}
	assert_true(wait_drive(h.d, 0, 0));
	assert_true(wait_stale(h.d, 0, 0));
	assert_int_equal(done_count(&h.done), 1);
	assert_int_equal(h.done.errors, 0);
	assert_memory_equal(h.disk + 24 * 512, r[3].data, 4096);
	assert_int_equal(atomic_load(&h.unpinned), c->blocked);
	assert_false(atomic_load(&r[0].rq.pinned));
	assert_false(atomic_load(&r[1].rq.pinned));
	td_drive_get_status(h.d, &st);
	assert_int_equal(st.stale_calls, 0);
	assert_int_equal(st.fences, 1);
	hand_drive_destroy(&h);
	free(r);
}

static void test_execute_sync_decodes_and_applies_errors_but_not_hangs(void **state)
{
	struct hand_drive h;
	uint8_t data[4096];
	uint8_t cdb[16];
	struct td_cdb_cmd cmd = { .op = TD_OP_WRITE, .lba = 16, .nr_blocks = 8 };
	struct td_bio bio;
	int len;

	(void)state;
	hand_drive_create(&h, 0);
	fill_random(data, sizeof(data), 7);
	td_bio_init(&bio, TD_OP_WRITE, 16, 8, data, NULL, NULL);
	len = td_cdb_encode(cdb, &cmd);
	assert_int_equal(len, 10);

	assert_int_equal(td_drive_execute_sync(h.d, cdb, 9, &bio), -EIO); /* wrong length */
	cdb[0] = 0xee;
	assert_int_equal(td_drive_execute_sync(h.d, cdb, 10, &bio), -EIO);
	assert_true(all_value(h.disk, 1 * MIB, 0));
	assert_int_equal(td_cdb_encode(cdb, &cmd), 10);

	assert_int_equal(td_inject_add_hang(td_drive_inject(h.d), 1), 0);
	assert_int_equal(td_drive_execute_sync(h.d, cdb, 10, &bio), 0);
	assert_memory_equal(h.disk + 16 * 512, data, 4096);
	assert_int_equal(td_inject_add_error(td_drive_inject(h.d), TD_INJECT_WRITE, 20, 1, 1), 0);
	memset(h.disk + 16 * 512, 0, 4096);
	assert_int_equal(td_drive_execute_sync(h.d, cdb, 10, &bio), -EIO);
	assert_true(all_value(h.disk + 16 * 512, 4096, 0));
	assert_int_equal(td_drive_execute_sync(h.d, cdb, 10, &bio), 0);

	cmd.lba = 1 * MIB / 512 - 4; /* crosses the end */
	assert_int_equal(td_cdb_encode(cdb, &cmd), 10);
	assert_int_equal(td_drive_execute_sync(h.d, cdb, 10, &bio), -EIO);
	td_inject_clear(td_drive_inject(h.d));
	hand_drive_destroy(&h);
}

static void test_drive_create_rejects_bad_parameters(void **state)
{
	struct td_drive_params dp;
	int err;

	(void)state;
#define EXPECT_REJECT(change, want)                                  \
	do {                                                         \
		td_drive_params_default(&dp);                        \
		dp.capacity_bytes = 1 * MIB;                         \
		td_backend_null_init(&dp.backend);                   \
		change;                                              \
		err = 0;                                             \
		assert_null(td_drive_create(&dp, &err));             \
		assert_int_equal(err, want);                         \
	} while (0)
	EXPECT_REJECT(dp.backend.ops = NULL, -EINVAL);
	EXPECT_REJECT(dp.logical_block_size = 1024, -EINVAL);
	EXPECT_REJECT(dp.capacity_bytes = 0, -EINVAL);
	EXPECT_REJECT(dp.capacity_bytes = 1000, -EINVAL);
	EXPECT_REJECT((dp.logical_block_size = 4096, dp.capacity_bytes = 4096 * 3 + 512), -EINVAL);
	EXPECT_REJECT((dp.model = TD_MODEL_HDD, dp.hdd.rpm = 0), -EINVAL);
	EXPECT_REJECT((dp.model = TD_MODEL_HDD, dp.hdd.sectors_per_track = 0), -EINVAL);
	EXPECT_REJECT((dp.model = TD_MODEL_HDD, dp.hdd.seek_full_us = 1), -EINVAL);
	EXPECT_REJECT((dp.model = TD_MODEL_SSD, dp.ssd.transfer_mb_s = 0), -EINVAL);
#undef EXPECT_REJECT
	assert_string_equal(td_drive_model_name(TD_MODEL_NONE), "none");
	assert_string_equal(td_drive_model_name(TD_MODEL_HDD), "hdd");
	assert_string_equal(td_drive_model_name(TD_MODEL_SSD), "ssd");
	assert_string_equal(td_write_cache_name(TD_WC_WRITEBACK), "writeback");
	assert_string_equal(td_write_cache_name(TD_WC_WRITETHROUGH), "writethrough");
	assert_string_equal(td_write_cache_name(TD_WC_VOLATILE), "volatile");
}

/* ---- the null backend ----------------------------------------------------------------- */

static void test_null_backend_completes_everything_and_stores_nothing(void **state)
{
	struct td_drive_params dp;
	struct td_queue_params qp;
	struct td_drive *d;
	struct td_queue *q;
	struct done done;
	struct tbio t[4];
	uint8_t buf[4096];
	int err = 0;

	(void)state;
	td_drive_params_default(&dp);
	dp.capacity_bytes = 1ULL << 40;
	dp.workers = 2;
	td_backend_null_init(&dp.backend);
	d = td_drive_create(&dp, &err);
	assert_non_null(d);
	td_queue_params_default(&qp);
	qp.capacity_sectors = dp.capacity_bytes >> TD_SECTOR_SHIFT;
	qp.drive = d;
	q = td_queue_create(&qp, &err);
	assert_non_null(q);
	done_init(&done);
	memset(buf, 0x42, sizeof(buf));
	tbio_init(&t[0], &done, TD_OP_WRITE, (1ULL << 31) - 8, 8, buf);
	tbio_init(&t[1], &done, TD_OP_READ, 0, 8, buf);
	tbio_init(&t[2], &done, TD_OP_DISCARD, 4096, 1 << 20, NULL);
	tbio_init(&t[3], &done, TD_OP_FLUSH, 0, 0, NULL);
	for (int i = 0; i < 4; i++)
		td_queue_submit(q, &t[i].bio);
	assert_true(done_wait(&done, 4, WAIT_MS));
	assert_int_equal(done.errors, 0);
	/* Reads leave the buffer as it was. */
	assert_true(all_value(buf, sizeof(buf), 0x42));
	td_queue_drain(q);
	td_queue_destroy(q);
	td_drive_destroy(d);
	done_destroy(&done);
}

/* ---- the image file backend ----------------------------------------------------------- */

static void test_file_backend_write_read_flush_discard_and_write_zeroes(void **state)
{
	char path[] = "/tmp/tagdisk-test-drive-XXXXXX";
	int fd = mkstemp(path);
	struct td_drive_params dp;
	struct td_queue_params qp;
	struct td_drive *d;
	struct td_queue *q;
	uint8_t *w = xmalloc(65536);
	uint8_t *r = xmalloc(65536);
	struct stat sb;
	int err = 0;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, 1 * MIB), 0);
	td_drive_params_default(&dp);
	dp.capacity_bytes = 2 * MIB; /* the file is shorter: its end reads as zeroes */
	dp.workers = 0;
	assert_int_equal(td_backend_file_init(&dp.backend, fd), 0);
	d = td_drive_create(&dp, &err);
	assert_non_null(d);
	td_queue_params_default(&qp);
	qp.capacity_sectors = dp.capacity_bytes >> TD_SECTOR_SHIFT;
	qp.drive = d;
	q = td_queue_create(&qp, &err);
	assert_non_null(q);
	struct env e = { .drive = d, .q = q };

	fill_random(w, 65536, 8);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 0, 128, w, 0), 0);
	assert_int_equal(io_sync(&e, TD_OP_FLUSH, 0, 0, NULL, 0), 0);
	memset(r, 0xee, 65536);
	assert_int_equal(io_sync(&e, TD_OP_READ, 0, 128, r, 0), 0);
	assert_memory_equal(r, w, 65536);
	assert_int_equal(pread(fd, r, 65536, 0), 65536);
	assert_memory_equal(r, w, 65536);
	assert_int_equal(io_sync(&e, TD_OP_WRITE, 128, 128, w, TD_BIO_FUA), 0);
	assert_int_equal(pread(fd, r, 65536, 65536), 65536);
	assert_memory_equal(r, w, 65536);

	/* Discard punches a hole. */
	assert_int_equal(fstat(fd, &sb), 0);
	blkcnt_t blocks = sb.st_blocks;

	assert_int_equal(io_sync(&e, TD_OP_DISCARD, 0, 128, NULL, 0), 0);
	assert_int_equal(lseek(fd, 0, SEEK_HOLE), 0);
	assert_int_equal(lseek(fd, 0, SEEK_DATA), 65536);
	assert_int_equal(fstat(fd, &sb), 0);
	assert_true(sb.st_blocks < blocks);
	memset(r, 0xee, 65536);
	assert_int_equal(io_sync(&e, TD_OP_READ, 0, 128, r, 0), 0);
	assert_true(all_value(r, 65536, 0));

	/* Write zeroes reads back as zeroes and keeps the space. */
	blocks = sb.st_blocks;
	assert_int_equal(io_sync(&e, TD_OP_WRITE_ZEROES, 128, 128, NULL, 0), 0);
	memset(r, 0xee, 65536);
	assert_int_equal(io_sync(&e, TD_OP_READ, 128, 128, r, 0), 0);
	assert_true(all_value(r, 65536, 0));
	assert_int_equal(fstat(fd, &sb), 0);
	assert_true(sb.st_blocks >= blocks);
	assert_int_equal(sb.st_size, 1 * MIB);

	/* Past the end of the file: zeroes; across it: data, then zeroes. */
	assert_int_equal(pwrite(fd, w, 4096, 1 * MIB - 4096), 4096);
	memset(r, 0xee, 65536);
	assert_int_equal(io_sync(&e, TD_OP_READ, 1 * MIB / 512 + 64, 16, r, 0), 0);
	assert_true(all_value(r, 8192, 0));
	memset(r, 0xee, 65536);
	assert_int_equal(io_sync(&e, TD_OP_READ, 1 * MIB / 512 - 8, 16, r, 0), 0);
	assert_memory_equal(r, w, 4096);
	assert_true(all_value(r + 4096, 4096, 0));

	td_queue_drain(q);
	td_queue_destroy(q);
	td_drive_destroy(d);
	close(fd);
	free(r);
	free(w);
}

/* A table's rows as cmocka cases, each with its row as the initial state. */
#define TABLE_CASES(fn, table, out, n)                                                      \
	do {                                                                                \
		for (size_t i_ = 0; i_ < TD_ARRAY_SIZE(table); i_++)                         \
			(out)[(n)++] = (struct CMUnitTest){ .name = (table)[i_].name,        \
							    .test_func = (fn),               \
							    .initial_state = (void *)&(table)[i_] }; \
	} while (0)

int main(void)
{
	static const struct CMUnitTest single[] = {
		cmocka_unit_test(test_drive_fails_invalid_command_bytes_with_eio),
		cmocka_unit_test(test_invalid_command_does_not_consume_fault_rules),
		cmocka_unit_test(test_drive_follows_the_command_lba_not_the_request),
		cmocka_unit_test(test_drive_fails_data_length_mismatch_with_eio),
		cmocka_unit_test(test_injected_error_fails_exactly_the_overlapping_commands),
		cmocka_unit_test(test_inject_every_n_with_a_seed_repeats_on_a_fresh_drive),
		cmocka_unit_test(test_injected_latency_delays_inline_commands),
		cmocka_unit_test(test_injected_latency_delays_worker_commands),
		cmocka_unit_test(test_injected_latency_delays_bio_mode_commands),
		cmocka_unit_test(test_hdd_with_32_outstanding_seeks_shorter_than_with_1),
		cmocka_unit_test(test_ssd_model_completes_after_its_latency),
		cmocka_unit_test(test_write_cache_modes_decide_fua_at_the_backend),
		cmocka_unit_test(test_quiesce_drops_pending_and_held_commands_and_counts_them),
		cmocka_unit_test(test_quiesce_on_workers_drops_hung_and_delayed_commands),
		cmocka_unit_test(test_status_does_not_count_commands_being_completed),
		cmocka_unit_test(test_execute_sync_decodes_and_applies_errors_but_not_hangs),
		cmocka_unit_test(test_drive_create_rejects_bad_parameters),
		cmocka_unit_test(test_null_backend_completes_everything_and_stores_nothing),
		cmocka_unit_test(test_file_backend_write_read_flush_discard_and_write_zeroes),
	};
	struct CMUnitTest tests[TD_ARRAY_SIZE(single) + TD_ARRAY_SIZE(parallel_cases) +
				TD_ARRAY_SIZE(stuck_cases)];
	size_t n = 0;

	for (size_t i = 0; i < TD_ARRAY_SIZE(single); i++)
		tests[n++] = single[i];
	TABLE_CASES(run_parallel_case, parallel_cases, tests, n);
	TABLE_CASES(run_stuck_case, stuck_cases, tests, n);

	td_log_init("test_drive", TD_LOG_ERR);
	alarm(WATCHDOG_S);
	return _cmocka_run_group_tests("test_drive", tests, n, NULL, NULL);
}
