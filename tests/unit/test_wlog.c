// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_wlog.c - the write log (src/engine/wlog*.c, src/common/wlog_fmt.c)
 * and where the queue takes its entries (queue.c, queue_bio.c).
 *
 *  - the format, byte for byte: a known sequence (writes, a discard, a write
 *    of zeroes, a flush, a FUA write, a mark) written through the log's own
 *    calls, compared with bytes laid out here by hand from the layout of
 *    dm-log-writes (not through wlog_fmt.c), for both sector sizes;
 *  - the super block counts only what is written, at any moment;
 *  - errors: bad marks, starting twice, stopping when off, a full file;
 *  - the queue in rq, mq and bio mode: what the disk acknowledged is in the
 *    log, in dm-log-writes' order, and replaying the log onto zeroes gives
 *    the memory disk byte for byte;
 *  - a flush's place is where it was issued (bio mode: a write that
 *    completes while the flush runs comes after it), a flush that fails
 *    becomes a mark, and one still running at stop gets a stand-in.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/wlog_fmt.h"
#include "tagdisk/backend.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/wlog.h"
#include "unit_util.h"

#define DISK_BYTES (4ULL << 20)
#define WAIT_MS	   10000

/* ---- a log file in a temporary directory ---------------------------------------------- */

struct tmp {
	char dir[64];
	char path[96];
};

static void tmp_make(struct tmp *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/test_wlog.XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/log", t->dir);
}

static void tmp_remove(struct tmp *t)
{
	unlink(t->path);
	rmdir(t->dir);
}

/* ---- the format, byte for byte ---------------------------------------------------------- */

static void le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Append an entry header sector at *@off of @exp, as dm-log-writes lays it out. */
static void exp_entry(uint8_t *exp, size_t *off, uint32_t ss, uint64_t sector, uint64_t nr,
		      uint64_t flags, const char *mark)
{
	uint8_t *p = exp + *off;

	le(p, sector, 8);
	le(p + 8, nr, 8);
	le(p + 16, flags, 8);
	le(p + 24, mark ? strlen(mark) : 0, 8);
	if (mark)
		memcpy(p + 32, mark, strlen(mark));
	*off += ss;
}

static void write_bio(struct td_bio *bio, uint64_t sector, uint32_t nr, uint8_t *data)
{
	td_bio_init(bio, TD_OP_WRITE, sector, nr, data, NULL, NULL);
}

struct format_case {
	const char *name;
	uint32_t sectorsize;
};

static void test_wlog_format_byte_for_byte(void **state)
{
	const struct format_case *fc = *state;
	uint32_t ss = fc->sectorsize;
	uint32_t per = ss / 512;
	struct td_wlog *wl = td_wlog_create(ss, DISK_BYTES);
	struct td_wlog_batch *b = (void *)xmalloc(sizeof(*b));
	struct td_wlog_status st;
	struct tmp t;
	char err[256];
	uint8_t *a = xmalloc(2 * ss), *c = xmalloc(ss);
	struct td_bio ba[2], bc;
	uint64_t mark_index = 0;

	assert_non_null(wl);
	tmp_make(&t);
	fill_random(a, 2 * ss, 1);
	fill_random(c, ss, 2);
	assert_int_equal(td_wlog_start(wl, t.path, err, sizeof(err)), 0);
	assert_true(td_wlog_on(wl));

	/* 0: a write of two blocks at block 3, in two bios. */
	write_bio(&ba[0], 3 * per, per, a);
	write_bio(&ba[1], 4 * per, per, a + ss);
	ba[0].next = &ba[1];
	td_wlog_batch_init(b);
	assert_true(td_wlog_reserve_write(wl, b, TD_OP_WRITE, false, 3 * per, 2 * per, &ba[0], 2));
	/* 1: a discard of 16 blocks at block 64; 2: write zeroes of 4 blocks at block 100. */
	assert_true(td_wlog_reserve_write(wl, b, TD_OP_DISCARD, false, 64 * per, 16 * per, NULL, 0));
	assert_true(td_wlog_reserve_write(wl, b, TD_OP_WRITE_ZEROES, false, 100 * per, 4 * per,
					  NULL, 0));
	td_wlog_write_batch(wl, b);
	/* 3: a flush. */
	struct td_wlog_slot *f = td_wlog_reserve_flush(wl);

	assert_non_null(f);
	td_wlog_batch_add_flush(b, f, 0);
	td_wlog_write_batch(wl, b);
	/* 4: a FUA write of one block at block 0; 5: a mark. */
	write_bio(&bc, 0, per, c);
	assert_true(td_wlog_reserve_write(wl, b, TD_OP_WRITE, true, 0, per, &bc, 1));
	td_wlog_write_batch(wl, b);
	assert_int_equal(td_wlog_mark(wl, "fsync-1", &mark_index), 0);
	assert_int_equal(mark_index, 5);
	/* 6: write zeroes last, so the file ends in a hole. */
	assert_true(td_wlog_reserve_write(wl, b, TD_OP_WRITE_ZEROES, false, 8 * per, 2 * per, NULL,
					  0));
	td_wlog_write_batch(wl, b);
	assert_int_equal(td_wlog_stop(wl, &st), 0);
	assert_false(td_wlog_on(wl));
	assert_int_equal(st.entries, 7);
	assert_int_equal(st.writes, 4);
	assert_int_equal(st.discards, 1);
	assert_int_equal(st.flushes, 1);
	assert_int_equal(st.fua, 1);
	assert_int_equal(st.marks, 1);
	assert_string_equal(st.path, t.path);

	/* The expected file, laid out by hand. */
	size_t exp_len = (size_t)ss * (1 + (1 + 2) + 1 + (1 + 4) + 1 + (1 + 1) + 1 + (1 + 2));
	uint8_t *exp = calloc(1, exp_len);
	size_t off = 0;

	assert_non_null(exp);
	le(exp, 0x6a736677736872ULL, 8); /* magic */
	le(exp + 8, 1, 8);		 /* version */
	le(exp + 16, 7, 8);		 /* entries */
	le(exp + 24, ss, 4);		 /* sector size */
	memcpy(exp + 32, "tagdisk1", 8); /* tagdisk's extension: the disk's size */
	le(exp + 40, DISK_BYTES, 8);
	off = ss;
	exp_entry(exp, &off, ss, 3, 2, 0, NULL);
	memcpy(exp + off, a, 2 * ss);
	off += 2 * ss;
	exp_entry(exp, &off, ss, 64, 16, 1 << 2, NULL); /* DISCARD: no data */
	exp_entry(exp, &off, ss, 100, 4, 0, NULL);	/* zeroes: 4 sectors of 0 */
	off += 4 * ss;
	exp_entry(exp, &off, ss, 0, 0, 1 << 0, NULL); /* FLUSH */
	exp_entry(exp, &off, ss, 0, 1, 1 << 1, NULL); /* FUA */
	memcpy(exp + off, c, ss);
	off += ss;
	exp_entry(exp, &off, ss, 0, 0, 1 << 3, "fsync-1"); /* MARK, its name inline */
	exp_entry(exp, &off, ss, 8, 2, 0, NULL);
	off += 2 * ss;
	assert_int_equal(off, exp_len);

	size_t len;
	uint8_t *got = read_whole_file(t.path, &len);

	assert_int_equal(len, exp_len);
	for (size_t i = 0; i < len; i++)
		if (got[i] != exp[i])
			fail_msg("byte %zu (sector %zu + %zu): got 0x%02x, want 0x%02x", i, i / ss,
				 i % ss, got[i], exp[i]);
	free(got);
	free(exp);
	free(a);
	free(c);
	free(b);
	td_wlog_destroy(wl);
	tmp_remove(&t);
}

/* ---- the super block -------------------------------------------------------------------- */

static uint64_t super_entries(const char *path)
{
	uint8_t buf[TD_WLOG_SUPER_LEN];
	struct td_wlog_super s;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	close(fd);
	assert_int_equal(td_wlog_decode_super(buf, &s), 0);
	return s.nr_entries;
}

struct end_flush_arg {
	struct td_wlog *wl;
	struct td_wlog_slot *f;
	atomic_bool done;
};

static void *end_flush_main(void *arg)
{
	struct end_flush_arg *a = arg;

	td_wlog_write_flushes(a->wl, a->f);
	atomic_store(&a->done, true);
	return NULL;
}

/*
 * A flush whose end comes before the write reserved ahead of it is filled in:
 * its end waits, and nothing is counted, until that write is; then both are,
 * before the flush's end returns.
 */
static void test_wlog_super_counts_only_written_prefix(void **state)
{
	struct td_wlog *wl = td_wlog_create(512, DISK_BYTES);
	struct td_wlog_batch *early = (void *)xmalloc(sizeof(*early));
	struct end_flush_arg fa = { .wl = wl };
	struct td_bio bio;
	uint8_t data[512] = { 1 };
	pthread_t th;
	struct tmp t;
	char err[256];

	(void)state;
	tmp_make(&t);
	assert_int_equal(td_wlog_start(wl, t.path, err, sizeof(err)), 0);
	assert_int_equal(super_entries(t.path), 0);
	td_wlog_batch_init(early);
	write_bio(&bio, 0, 1, data);
	assert_true(td_wlog_reserve_write(wl, early, TD_OP_WRITE, false, 0, 1, &bio, 1)); /* 0 */
	fa.f = td_wlog_reserve_flush(wl);						    /* 1 */
	fa.f->err = 0;
	fa.f->next = NULL;
	assert_int_equal(pthread_create(&th, NULL, end_flush_main, &fa), 0);
	/* Held up by entry 0: a while later, still waiting, and nothing counted. */
	sleep_ms(50);
	assert_false(atomic_load(&fa.done));
	assert_int_equal(super_entries(t.path), 0);
	td_wlog_write_batch(wl, early);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(super_entries(t.path), 2);
	/* Plain writes alone do not rewrite it (until TD_WLOG_SUPER_EVERY of them)... */
	assert_true(td_wlog_reserve_write(wl, early, TD_OP_WRITE, false, 0, 1, &bio, 1));
	td_wlog_write_batch(wl, early);
	/* ...a mark does, once written: it waits for that. */
	uint64_t index;

	assert_int_equal(td_wlog_mark(wl, "m", &index), 0);
	assert_int_equal(index, 3);
	assert_int_equal(super_entries(t.path), 4);
	for (int i = 0; i < TD_WLOG_SUPER_EVERY; i++) {
		assert_true(td_wlog_reserve_write(wl, early, TD_OP_WRITE, false, 0, 1, &bio, 1));
		td_wlog_write_batch(wl, early);
	}
	/* Entry 1023 was a boundary: the writer counts it, in its own time. */
	for (int i = 0; i < 10000 && super_entries(t.path) < TD_WLOG_SUPER_EVERY; i++)
		sleep_ms(1);
	assert_int_equal(super_entries(t.path), TD_WLOG_SUPER_EVERY);
	assert_int_equal(td_wlog_stop(wl, NULL), 0);
	assert_int_equal(super_entries(t.path), 4 + TD_WLOG_SUPER_EVERY);
	free(early);
	td_wlog_destroy(wl);
	tmp_remove(&t);
}

/* ---- errors ----------------------------------------------------------------------------- */

static void test_wlog_bad_calls_are_refused(void **state)
{
	struct td_wlog *wl = td_wlog_create(512, DISK_BYTES);
	struct td_wlog_batch *b = (void *)xmalloc(sizeof(*b));
	char name[600];
	uint64_t index = 99;
	struct tmp t;
	char err[256];

	(void)state;
	assert_null(td_wlog_create(1024, DISK_BYTES));
	assert_null(td_wlog_create(4096, 4096 * 3 + 512));
	tmp_make(&t);
	/* Not recording: marks, stop and reservations are refused. */
	assert_int_equal(td_wlog_mark(wl, "x", &index), -ENOENT);
	assert_int_equal(td_wlog_stop(wl, NULL), -ENOENT);
	td_wlog_batch_init(b);
	assert_false(td_wlog_reserve_write(wl, b, TD_OP_DISCARD, false, 0, 1, NULL, 0));
	assert_null(td_wlog_reserve_flush(wl));
	/* A directory, and a path whose directory does not exist. */
	assert_int_equal(td_wlog_start(wl, t.dir, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	snprintf(name, sizeof(name), "%s/no/such/dir", t.dir);
	assert_int_equal(td_wlog_start(wl, name, err, sizeof(err)), -ENOENT);
	assert_int_equal(td_wlog_start(wl, t.path, err, sizeof(err)), 0);
	assert_int_equal(td_wlog_start(wl, t.path, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "already recording"));
	/* Marks: empty, and longer than a 512-byte sector holds after the entry. */
	assert_int_equal(td_wlog_mark(wl, "", &index), -EINVAL);
	memset(name, 'm', sizeof(name));
	name[td_wlog_mark_max(512) + 1] = '\0';
	assert_int_equal(td_wlog_mark(wl, name, &index), -EINVAL);
	name[td_wlog_mark_max(512)] = '\0';
	assert_int_equal(td_wlog_mark(wl, name, &index), 0);
	assert_int_equal(index, 0);
	assert_int_equal(td_wlog_stop(wl, NULL), 0);
	assert_int_equal(super_entries(t.path), 1);
	free(b);
	td_wlog_destroy(wl);
	tmp_remove(&t);
}

/* A log that cannot grow (RLIMIT_FSIZE) fails: what came before stays valid and counted. */
static void test_wlog_write_error_stops_recording(void **state)
{
	struct td_wlog *wl = td_wlog_create(512, DISK_BYTES);
	struct td_wlog_batch *b = (void *)xmalloc(sizeof(*b));
	struct rlimit old, lim;
	struct td_wlog_status st;
	uint8_t *data = xmalloc(64 * 1024);
	struct td_bio bio;
	uint64_t index;
	struct tmp t;
	char err[256];

	(void)state;
	memset(data, 0x5a, 64 * 1024);
	tmp_make(&t);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 100 * 1024;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(td_wlog_start(wl, t.path, err, sizeof(err)), 0);
	td_wlog_batch_init(b);
	write_bio(&bio, 0, 128, data);
	assert_true(td_wlog_reserve_write(wl, b, TD_OP_WRITE, false, 0, 128, &bio, 1));
	td_wlog_write_batch(wl, b);
	assert_int_equal(td_wlog_mark(wl, "before", &index), 0);
	assert_true(td_wlog_reserve_write(wl, b, TD_OP_WRITE, false, 0, 128, &bio, 1));
	td_wlog_write_batch(wl, b);
	/* Staged; the mark waits for the writer, whose write fails. */
	assert_int_equal(td_wlog_mark(wl, "fails", &index), -EIO);
	assert_int_equal(index, 3);
	td_wlog_get_status(wl, &st);
	assert_int_equal(st.state, TD_WLOG_FAILED);
	assert_int_equal(st.error, -EFBIG);
	assert_non_null(strstr(st.error_text, "writing entries: File too large"));
	assert_false(td_wlog_on(wl));
	assert_false(td_wlog_reserve_write(wl, b, TD_OP_WRITE, false, 0, 128, &bio, 1));
	assert_int_equal(td_wlog_mark(wl, "after", &index), -ENOENT);
	assert_int_equal(td_wlog_stop(wl, NULL), -EIO);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(super_entries(t.path), 2);
	/* Stopped, it starts again afresh. */
	assert_int_equal(td_wlog_start(wl, t.path, err, sizeof(err)), 0);
	td_wlog_get_status(wl, &st);
	assert_int_equal(st.state, TD_WLOG_ON);
	assert_int_equal(st.error, 0);
	assert_int_equal(td_wlog_stop(wl, NULL), 0);
	assert_int_equal(super_entries(t.path), 0);
	free(data);
	free(b);
	td_wlog_destroy(wl);
	tmp_remove(&t);
}

/* ---- reading a log back ----------------------------------------------------------------- */

struct entry {
	struct td_wlog_entry e;
	const uint8_t *data; /* into the file's buffer */
	char mark[64];
};

struct parsed {
	uint8_t *buf;
	size_t len;
	struct td_wlog_super s;
	struct entry *v;
	size_t n;
};

static void parse_log(const char *path, struct parsed *p)
{
	size_t off;

	p->buf = read_whole_file(path, &p->len);
	assert_true(p->len >= 512);
	assert_int_equal(td_wlog_decode_super(p->buf, &p->s), 0);
	p->v = calloc(p->s.nr_entries + 1, sizeof(*p->v));
	assert_non_null(p->v);
	off = p->s.sectorsize;
	for (p->n = 0; p->n < p->s.nr_entries; p->n++) {
		struct entry *e = &p->v[p->n];

		assert_true(off + p->s.sectorsize <= p->len);
		td_wlog_decode_entry(p->buf + off, &e->e);
		if (e->e.flags & TD_WLOG_F_MARK)
			snprintf(e->mark, sizeof(e->mark), "%.*s", (int)e->e.data_len,
				 (const char *)p->buf + off + TD_WLOG_ENTRY_LEN);
		off += p->s.sectorsize;
		e->data = p->buf + off;
		off += td_wlog_entry_data_sectors(&e->e) * p->s.sectorsize;
		assert_true(off <= p->len);
	}
}

/* Apply entries [0, @upto) to @disk (zeroed by the caller). */
static void replay(const struct parsed *p, uint8_t *disk, size_t upto)
{
	uint32_t ss = p->s.sectorsize;

	for (size_t i = 0; i < upto; i++) {
		const struct td_wlog_entry *e = &p->v[i].e;

		if (e->flags & TD_WLOG_F_DISCARD)
			memset(disk + e->sector * ss, 0, e->nr_sectors * ss);
		else if (e->nr_sectors)
			memcpy(disk + e->sector * ss, p->v[i].data, e->nr_sectors * ss);
	}
}

static void parsed_free(struct parsed *p)
{
	free(p->buf);
	free(p->v);
}

/* ---- through the queue ------------------------------------------------------------------ */

/*
 * A memory disk whose flushes can be held on a semaphore and made to fail,
 * to pin a flush at the drive while the test looks.
 */
struct gate {
	struct td_backend inner; /* first: the fwd_* calls find it there */
	atomic_bool hold_flush;
	atomic_bool fail_flush;
	atomic_bool flush_entered;
	sem_t release;
};

static int gate_flush(void *priv)
{
	struct gate *g = priv;

	if (atomic_load(&g->hold_flush)) {
		atomic_store(&g->flush_entered, true);
		while (sem_wait(&g->release) < 0)
			;
	}
	if (atomic_load(&g->fail_flush))
		return -EIO;
	return g->inner.ops->flush(g->inner.priv);
}

static const struct td_backend_ops gate_ops = {
	.name = "gate",
	.read = fwd_read,
	.write = fwd_write,
	.flush = gate_flush,
	.discard = fwd_discard,
	.write_zeroes = fwd_write_zeroes,
	.destroy = fwd_destroy,
};

struct env {
	struct gate *g;
	struct td_drive *drive;
	struct td_queue *q;
	struct td_wlog *wl;
	struct tmp t;
	uint32_t lbs;
};

static void env_create(struct env *env, enum td_queue_mode mode, unsigned int workers,
		       uint32_t lbs)
{
	struct td_drive_params dp;
	struct td_queue_params qp;
	char err[256];
	int ret;

	memset(env, 0, sizeof(*env));
	env->lbs = lbs;
	env->g = calloc(1, sizeof(*env->g));
	assert_non_null(env->g);
	assert_int_equal(td_backend_mem_init(&env->g->inner, DISK_BYTES), 0);
	sem_init(&env->g->release, 0, 0);
	td_drive_params_default(&dp);
	dp.backend = (struct td_backend){ .ops = &gate_ops, .priv = env->g };
	dp.logical_block_size = lbs;
	dp.capacity_bytes = DISK_BYTES;
	dp.workers = workers;
	env->drive = td_drive_create(&dp, &ret);
	assert_non_null(env->drive);
	env->wl = td_wlog_create(lbs, DISK_BYTES);
	assert_non_null(env->wl);
	td_queue_params_default(&qp);
	qp.mode = mode;
	qp.capacity_sectors = DISK_BYTES / 512;
	qp.logical_block_size = lbs;
	qp.nr_hw_queues = mode == TD_MODE_MQ ? 2 : 0;
	qp.elevator = mode == TD_MODE_MQ ? "mq-deadline" : "deadline";
	qp.drive = env->drive;
	qp.wlog = env->wl;
	env->q = td_queue_create(&qp, &ret);
	assert_non_null(env->q);
	tmp_make(&env->t);
	assert_int_equal(td_wlog_start(env->wl, env->t.path, err, sizeof(err)), 0);
}

static void env_destroy(struct env *env)
{
	td_queue_drain(env->q);
	td_queue_destroy(env->q);
	td_wlog_destroy(env->wl);
	td_drive_destroy(env->drive);
	sem_destroy(&env->g->release);
	free(env->g);
	tmp_remove(&env->t);
}

static void bio_done(struct td_bio *bio, int err)
{
	done_add(bio->private, err);
}

/* Submit @op on [@sector, +@nr) and wait for it; return its error. */
static int io(struct env *env, enum td_op op, unsigned int flags, uint64_t sector, uint32_t nr,
	      void *data)
{
	struct td_bio bio;
	struct done d;

	done_init(&d);
	td_bio_init(&bio, op, sector, nr, data, bio_done, &d);
	bio.flags = flags;
	td_queue_submit(env->q, &bio);
	assert_true(done_wait(&d, 1, WAIT_MS));
	done_destroy(&d);
	return bio.error;
}

struct mode_case {
	const char *name;
	enum td_queue_mode mode;
	unsigned int workers;
	uint32_t lbs;
};

/*
 * Writes, a discard, write zeroes, flushes, FUA writes and marks through the
 * queue: each acknowledged one is in the log in order, and the log replayed
 * onto zeroes is the disk.
 */
static void test_wlog_queue_logs_what_the_disk_acknowledged(void **state)
{
	const struct mode_case *mc = *state;
	struct env env;
	uint32_t per = mc->lbs / 512;
	uint8_t *buf = xmalloc(256 * 1024);
	uint64_t seed = 7, idx;
	struct parsed p;

	env_create(&env, mc->mode, mc->workers, mc->lbs);
	fill_random(buf, 256 * 1024, 3);
	/* Plugged: two adjacent writes submitted as one batch may merge into one entry. */
	assert_int_equal(io(&env, TD_OP_WRITE, 0, 0, 8 * per, buf), 0);
	assert_int_equal(io(&env, TD_OP_WRITE, 0, 64 * per, 16 * per, buf + 4096), 0);
	assert_int_equal(io(&env, TD_OP_FLUSH, 0, 0, 0, NULL), 0);
	assert_int_equal(td_wlog_mark(env.wl, "one", &idx), 0);
	assert_int_equal(idx, 3);
	assert_int_equal(io(&env, TD_OP_WRITE, TD_BIO_FUA, 4 * per, 4 * per, buf + 8192), 0);
	assert_int_equal(io(&env, TD_OP_DISCARD, 0, 64 * per, 8 * per, NULL), 0);
	assert_int_equal(io(&env, TD_OP_WRITE_ZEROES, 0, 0, 2 * per, NULL), 0);
	for (int i = 0; i < 40; i++) {
		uint64_t s = rnd_range(&seed, 0, DISK_BYTES / mc->lbs - 16) * per;

		assert_int_equal(io(&env, TD_OP_WRITE, 0, s, (uint32_t)rnd_range(&seed, 1, 16) * per,
				    buf + rnd_range(&seed, 0, 32) * 512),
				 0);
		if (i % 10 == 9)
			assert_int_equal(io(&env, TD_OP_FLUSH, 0, 0, 0, NULL), 0);
	}
	/* A write that fails is not logged. */
	assert_int_equal(io(&env, TD_OP_WRITE, 0, DISK_BYTES / 512, per, buf), -EIO);
	assert_int_equal(td_wlog_stop(env.wl, NULL), 0);

	parse_log(env.t.path, &p);
	assert_int_equal(p.s.sectorsize, mc->lbs);
	assert_int_equal(p.s.disk_bytes, DISK_BYTES);
	assert_int_equal(p.n, 7 + 40 + 4);
	assert_int_equal(p.v[0].e.sector, 0);
	assert_int_equal(p.v[0].e.nr_sectors, 8);
	assert_memory_equal(p.v[0].data, buf, 8 * mc->lbs);
	assert_int_equal(p.v[1].e.sector, 64);
	assert_int_equal(p.v[2].e.flags, TD_WLOG_F_FLUSH);
	assert_int_equal(p.v[3].e.flags, TD_WLOG_F_MARK);
	assert_string_equal(p.v[3].mark, "one");
	assert_int_equal(p.v[4].e.flags, TD_WLOG_F_FUA);
	assert_int_equal(p.v[4].e.sector, 4);
	assert_int_equal(p.v[5].e.flags, TD_WLOG_F_DISCARD);
	assert_int_equal(p.v[5].e.nr_sectors, 8);
	assert_int_equal(p.v[6].e.flags, 0);
	assert_int_equal(p.v[6].e.nr_sectors, 2);
	assert_true(all_value(p.v[6].data, 2 * mc->lbs, 0));
	for (size_t i = 7, f = 0; i < p.n; i++)
		if (p.v[i].e.flags == TD_WLOG_F_FLUSH)
			assert_int_equal(i, 7 + 11 * f++ + 10);

	uint8_t *disk = calloc(1, DISK_BYTES);

	assert_non_null(disk);
	replay(&p, disk, p.n);
	assert_memory_equal(disk, td_backend_mem_data(&env.g->inner), DISK_BYTES);
	free(disk);
	parsed_free(&p);
	free(buf);
	env_destroy(&env);
}

struct flush_thread {
	struct env *env;
	int err;
};

static void *flush_main(void *arg)
{
	struct flush_thread *ft = arg;

	ft->err = io(ft->env, TD_OP_FLUSH, 0, 0, 0, NULL);
	return NULL;
}

/*
 * dm-log-writes' rule: a flush entry comes after the writes that completed
 * before it was issued and before those that completed after. In bio mode
 * nothing holds writes back while a flush runs: a write that completes then
 * must follow the flush in the log, though the flush ends after it.
 */
static void test_wlog_write_completing_during_flush_follows_it(void **state)
{
	struct env env;
	struct flush_thread ft = { .env = &env };
	uint8_t buf[4096];
	pthread_t th;
	struct parsed p;

	(void)state;
	env_create(&env, TD_MODE_BIO, 0, 512);
	memset(buf, 0xab, sizeof(buf));
	assert_int_equal(io(&env, TD_OP_WRITE, 0, 0, 8, buf), 0);
	atomic_store(&env.g->hold_flush, true);
	assert_int_equal(pthread_create(&th, NULL, flush_main, &ft), 0);
	assert_true(wait_flag(&env.g->flush_entered, WAIT_MS));
	assert_int_equal(io(&env, TD_OP_WRITE, 0, 8, 8, buf), 0);
	sem_post(&env.g->release);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(ft.err, 0);
	assert_int_equal(td_wlog_stop(env.wl, NULL), 0);

	parse_log(env.t.path, &p);
	assert_int_equal(p.n, 3);
	assert_int_equal(p.v[0].e.sector, 0);
	assert_int_equal(p.v[1].e.flags, TD_WLOG_F_FLUSH);
	assert_int_equal(p.v[2].e.sector, 8);
	parsed_free(&p);
	env_destroy(&env);
}

/* A flush that fails is no durability point: a mark says so in its place. */
static void test_wlog_failed_flush_becomes_mark(void **state)
{
	const struct mode_case *mc = *state;
	struct env env;
	uint8_t buf[4096] = { 0 };
	struct parsed p;

	env_create(&env, mc->mode, mc->workers, 512);
	assert_int_equal(io(&env, TD_OP_WRITE, 0, 0, 8, buf), 0);
	atomic_store(&env.g->fail_flush, true);
	assert_int_equal(io(&env, TD_OP_FLUSH, 0, 0, 0, NULL), -EIO);
	atomic_store(&env.g->fail_flush, false);
	assert_int_equal(io(&env, TD_OP_FLUSH, 0, 0, 0, NULL), 0);
	assert_int_equal(td_wlog_stop(env.wl, NULL), 0);
	parse_log(env.t.path, &p);
	assert_int_equal(p.n, 3);
	assert_int_equal(p.v[1].e.flags, TD_WLOG_F_MARK);
	assert_string_equal(p.v[1].mark, TD_WLOG_FLUSH_FAILED);
	assert_int_equal(p.v[2].e.flags, TD_WLOG_F_FLUSH);
	parsed_free(&p);
	env_destroy(&env);
}

/*
 * A flush still at the drive when the log stops: a stand-in mark takes its
 * place, and its end, after the stop (and after a new start), writes nothing.
 */
static void test_wlog_stop_stands_in_for_running_flush(void **state)
{
	struct env env;
	struct flush_thread ft = { .env = &env };
	uint8_t buf[4096] = { 0 };
	struct td_wlog_status st;
	char err[256];
	pthread_t th;
	struct parsed p;

	(void)state;
	env_create(&env, TD_MODE_RQ, 1, 512);
	assert_int_equal(io(&env, TD_OP_WRITE, 0, 0, 8, buf), 0);
	atomic_store(&env.g->hold_flush, true);
	assert_int_equal(pthread_create(&th, NULL, flush_main, &ft), 0);
	assert_true(wait_flag(&env.g->flush_entered, WAIT_MS));
	assert_int_equal(td_wlog_stop(env.wl, &st), 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.marks, 1);
	assert_int_equal(st.flushes, 0);
	/* A new session in the same file: the old flush must not land in it. */
	assert_int_equal(td_wlog_start(env.wl, env.t.path, err, sizeof(err)), 0);
	sem_post(&env.g->release);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(ft.err, 0);
	td_wlog_get_status(env.wl, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(td_wlog_stop(env.wl, NULL), 0);
	parse_log(env.t.path, &p);
	assert_int_equal(p.n, 0);
	assert_int_equal(p.len, 512);
	parsed_free(&p);
	env_destroy(&env);
}

int main(void)
{
	static const struct format_case formats[] = {
		{ "test_wlog_format_byte_for_byte_512", 512 },
		{ "test_wlog_format_byte_for_byte_4096", 4096 },
	};
	static const struct mode_case modes[] = {
		{ "test_wlog_queue_logs_what_the_disk_acknowledged_rq_inline", TD_MODE_RQ, 0, 512 },
		{ "test_wlog_queue_logs_what_the_disk_acknowledged_rq_workers", TD_MODE_RQ, 2, 512 },
		{ "test_wlog_queue_logs_what_the_disk_acknowledged_mq", TD_MODE_MQ, 2, 512 },
		{ "test_wlog_queue_logs_what_the_disk_acknowledged_bio", TD_MODE_BIO, 0, 512 },
		{ "test_wlog_queue_logs_what_the_disk_acknowledged_rq_4k", TD_MODE_RQ, 2, 4096 },
	};
	static const struct mode_case flush_modes[] = {
		{ "test_wlog_failed_flush_becomes_mark_rq", TD_MODE_RQ, 1, 512 },
		{ "test_wlog_failed_flush_becomes_mark_bio", TD_MODE_BIO, 0, 512 },
	};
	struct test_list l = { 0 };

	TL_ADD_TABLE(&l, test_wlog_format_byte_for_byte, NULL, NULL, formats);
	TL_ADD_TEST(&l, test_wlog_super_counts_only_written_prefix);
	TL_ADD_TEST(&l, test_wlog_bad_calls_are_refused);
	TL_ADD_TEST(&l, test_wlog_write_error_stops_recording);
	TL_ADD_TABLE(&l, test_wlog_queue_logs_what_the_disk_acknowledged, NULL, NULL, modes);
	TL_ADD_TEST(&l, test_wlog_write_completing_during_flush_follows_it);
	TL_ADD_TABLE(&l, test_wlog_failed_flush_becomes_mark, NULL, NULL, flush_modes);
	TL_ADD_TEST(&l, test_wlog_stop_stands_in_for_running_flush);
	return test_list_run(&l);
}
