// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_replay.c - tagdisk-replay's work (src/ctl/replay*.c) on logs built
 * here: replaying to an entry, a mark, a flush; --find and --num-entries;
 * checks that stop at the first failing state; crash states (each one a
 * state a volatile cache could leave, FUA writes before the crash point
 * kept, overlapping writes in their order, the same states for the same
 * seed, the target restored after them); and bad input, each refused with
 * one message and the target untouched.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/wlog_fmt.h"
#include "ctl/replay.h"
#include "unit_util.h"

#define SS	   512
#define DISK	   (1ULL << 20) /* bytes */
#define DISK_SECTS (DISK / SS)

/* ---- building logs ---------------------------------------------------------------------- */

struct lb {
	FILE *f;
	uint64_t n;
	uint64_t disk_bytes; /* 0: no tagdisk extension, as the kernel writes */
};

static void lb_open(struct lb *b, const char *path, uint64_t disk_bytes)
{
	uint8_t sector[SS] = { 0 };

	b->f = fopen(path, "w");
	assert_non_null(b->f);
	b->n = 0;
	b->disk_bytes = disk_bytes;
	assert_int_equal(fwrite(sector, SS, 1, b->f), 1);
}

static void lb_entry(struct lb *b, uint64_t sector, uint64_t nr, uint64_t flags, const char *mark,
		     const uint8_t *data)
{
	struct td_wlog_entry e = { .sector = sector, .nr_sectors = nr, .flags = flags,
				   .data_len = mark ? strlen(mark) : 0 };
	uint8_t hdr[SS] = { 0 };

	td_wlog_encode_entry(&e, hdr);
	if (mark)
		memcpy(hdr + TD_WLOG_ENTRY_LEN, mark, strlen(mark));
	assert_int_equal(fwrite(hdr, SS, 1, b->f), 1);
	if (data)
		assert_int_equal(fwrite(data, SS, nr, b->f), nr);
	b->n++;
}

static void lb_write(struct lb *b, uint64_t sector, uint64_t nr, uint8_t fill, bool fua)
{
	uint8_t *d = xmalloc(nr * SS);

	memset(d, fill, nr * SS);
	lb_entry(b, sector, nr, fua ? TD_WLOG_F_FUA : 0, NULL, d);
	free(d);
}

/* Close the log with a super block counting @count entries (UINT64_MAX: all). */
static void lb_close(struct lb *b, uint64_t count)
{
	struct td_wlog_super s = {
		.magic = TD_WLOG_MAGIC,
		.version = TD_WLOG_VERSION,
		.nr_entries = count == UINT64_MAX ? b->n : count,
		.sectorsize = SS,
		.disk_bytes = b->disk_bytes,
	};
	uint8_t sector[SS];

	td_wlog_encode_super(&s, sector, sizeof(sector));
	assert_int_equal(fseek(b->f, 0, SEEK_SET), 0);
	assert_int_equal(fwrite(sector, SS, 1, b->f), 1);
	assert_int_equal(fclose(b->f), 0);
}

/* ---- a directory with a log and a target ------------------------------------------------ */

struct dir {
	char path[64];
	char log[96];
	char target[96];
	char out_buf[8192];
	char err_buf[8192];
	FILE *out;
	FILE *err;
};

static int dir_setup(void **state)
{
	struct dir *d = calloc(1, sizeof(*d));

	if (!d)
		return -1;
	snprintf(d->path, sizeof(d->path), "/tmp/test_replay.XXXXXX");
	if (!mkdtemp(d->path))
		return -1;
	snprintf(d->log, sizeof(d->log), "%s/log", d->path);
	snprintf(d->target, sizeof(d->target), "%s/target", d->path);
	*state = d;
	return 0;
}

static int dir_teardown(void **state)
{
	struct dir *d = *state;
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
	if (system(cmd) != 0)
		return -1;
	free(d);
	return 0;
}

/* A target of @bytes bytes, every byte @fill. */
static void make_target(struct dir *d, uint64_t bytes, uint8_t fill)
{
	uint8_t *buf = xmalloc(bytes);
	int fd = open(d->target, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	memset(buf, fill, bytes);
	assert_int_equal(write(fd, buf, bytes), (ssize_t)bytes);
	close(fd);
	free(buf);
}

static void opts(struct dir *d, struct td_replay_opts *o)
{
	td_replay_opts_default(o);
	o->log = d->log;
	o->target = d->target;
	d->out = fmemopen(d->out_buf, sizeof(d->out_buf), "w");
	d->err = fmemopen(d->err_buf, sizeof(d->err_buf), "w");
	assert_non_null(d->out);
	assert_non_null(d->err);
	o->out = d->out;
	o->err = d->err;
}

static int run(struct dir *d, struct td_replay_opts *o)
{
	int ret = td_replay_run(o);

	fclose(d->out);
	fclose(d->err);
	return ret;
}

/* Assert the target's sectors [@s, @s + @nr) all hold @fill. */
static void assert_sectors(const uint8_t *t, uint64_t s, uint64_t nr, uint8_t fill)
{
	for (uint64_t i = s * SS; i < (s + nr) * SS; i++)
		if (t[i] != fill)
			fail_msg("byte %llu (sector %llu): 0x%02x, want 0x%02x", (unsigned long long)i,
				 (unsigned long long)(i / SS), t[i], fill);
}

/*
 * The log most cases use: 0 W(0,8)=1, 1 W(16,8)=2, 2 FLUSH, 3 MARK "a",
 * 4 W(0,4)=3 FUA, 5 DISCARD(16,4), 6 FLUSH, 7 W(32,8)=4, 8 MARK "b".
 */
static void basic_log(struct dir *d, uint64_t disk_bytes)
{
	struct lb b;

	lb_open(&b, d->log, disk_bytes);
	lb_write(&b, 0, 8, 1, false);
	lb_write(&b, 16, 8, 2, false);
	lb_entry(&b, 0, 0, TD_WLOG_F_FLUSH, NULL, NULL);
	lb_entry(&b, 0, 0, TD_WLOG_F_MARK, "a", NULL);
	lb_write(&b, 0, 4, 3, true);
	lb_entry(&b, 16, 4, TD_WLOG_F_DISCARD, NULL, NULL);
	lb_entry(&b, 0, 0, TD_WLOG_F_FLUSH, NULL, NULL);
	lb_write(&b, 32, 8, 4, false);
	lb_entry(&b, 0, 0, TD_WLOG_F_MARK, "b", NULL);
	lb_close(&b, UINT64_MAX);
}

/* ---- replaying -------------------------------------------------------------------------- */

static void test_replay_stops_where_asked(void **state)
{
	struct dir *d = *state;
	struct td_replay_opts o;
	uint8_t *t;
	size_t len;

	basic_log(d, DISK);
	/* --limit 2: the two first writes only. */
	make_target(d, DISK, 0xee);
	opts(d, &o);
	o.limit = 2;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	t = read_whole_file(d->target, &len);
	assert_sectors(t, 0, 8, 1);
	assert_sectors(t, 8, 8, 0xee);
	assert_sectors(t, 16, 8, 2);
	free(t);
	/* --end-mark b: everything; the discard left zeroes. */
	make_target(d, DISK, 0xee);
	opts(d, &o);
	o.end_mark = "b";
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	t = read_whole_file(d->target, &len);
	assert_int_equal(len, DISK);
	assert_sectors(t, 0, 4, 3);
	assert_sectors(t, 4, 4, 1);
	assert_sectors(t, 16, 4, 0);
	assert_sectors(t, 20, 4, 2);
	assert_sectors(t, 32, 8, 4);
	free(t);
	/* From mark a to the next flush, --no-discard: only the FUA write. */
	make_target(d, DISK, 0xee);
	opts(d, &o);
	o.start_mark = "a";
	o.next_flush = true;
	o.no_discard = true;
	o.verbose = 2;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	t = read_whole_file(d->target, &len);
	assert_sectors(t, 0, 4, 3);
	assert_sectors(t, 4, DISK_SECTS - 4, 0xee);
	free(t);
	assert_non_null(strstr(d->out_buf, "replaying 4@"));
	assert_non_null(strstr(d->out_buf, "skipping 5@"));
	assert_null(strstr(d->out_buf, " 7@"));
	/* --start-sector: writes that do not touch sector 30.. are skipped. */
	make_target(d, DISK, 0xee);
	opts(d, &o);
	o.start_sector = 30;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	t = read_whole_file(d->target, &len);
	assert_sectors(t, 0, 32, 0xee);
	assert_sectors(t, 32, 8, 4);
	free(t);
}

static void test_replay_find_and_num_entries_as_replay_log(void **state)
{
	struct dir *d = *state;
	struct td_replay_opts o;

	basic_log(d, DISK);
	opts(d, &o);
	o.target = NULL;
	o.find = true;
	o.end_mark = "a";
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	/* Entry 3; the sector after it: 1 + (1 + 8) * 2 + 1 + 1. */
	assert_string_equal(d->out_buf, "3@21\n");
	opts(d, &o);
	o.target = NULL;
	o.find = true;
	o.start_entry = 3;
	o.next_flush = true;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	assert_string_equal(d->out_buf, "6@28\n");
	opts(d, &o);
	o.target = NULL;
	o.num_entries = true;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	assert_string_equal(d->out_buf, "9\n");
	opts(d, &o);
	o.target = NULL;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	assert_string_equal(d->out_buf, "Log version=1, sectorsize=512, entries=9\n");
}

/* --check: the command sees the state's facts, and the first failure stops the run there. */
static void test_replay_check_stops_at_first_failing_state(void **state)
{
	struct dir *d = *state;
	struct td_replay_opts o;
	char cmd[256], seen[128];
	uint8_t *t;
	size_t len;

	basic_log(d, DISK);
	make_target(d, DISK, 0);
	opts(d, &o);
	snprintf(seen, sizeof(seen), "%s/seen", d->path);
	snprintf(cmd, sizeof(cmd),
		 "echo \"$TD_REPLAY_ENTRY $TD_REPLAY_FLUSHES $TD_REPLAY_MARK $TD_REPLAY_STATE\" >>%s; "
		 "[ \"$TD_REPLAY_FLUSHES\" -lt 2 ]",
		 seen);
	o.fsck = cmd;
	o.check = TD_REPLAY_CHECK_FLUSH;
	assert_int_equal(run(d, &o), TD_REPLAY_CHECK_FAILED);
	assert_non_null(strstr(d->err_buf, "check failed at entry 6 (FLUSH)"));
	assert_non_null(strstr(d->err_buf, "exited with status 1"));
	t = read_whole_file(seen, &len);
	t[len] = '\0';
	assert_string_equal((char *)t, "2 1  prefix\n6 2 a prefix\n");
	free(t);
	/* Left in the failing state: entry 7 never written. */
	t = read_whole_file(d->target, &len);
	assert_sectors(t, 32, 8, 0);
	assert_sectors(t, 0, 4, 3);
	free(t);
	/* Every 4 entries and at marks, all passing. */
	make_target(d, DISK, 0);
	opts(d, &o);
	o.fsck = "true";
	o.check = TD_REPLAY_CHECK_EVERY;
	o.check_every = 4;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	assert_non_null(strstr(d->out_buf, "2 checks passed"));
	opts(d, &o);
	o.fsck = "true";
	o.check = TD_REPLAY_CHECK_MARK;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	assert_non_null(strstr(d->out_buf, "2 checks passed"));
}

/* ---- crash states ------------------------------------------------------------------------ */

/*
 * One epoch: W0 (0,8)=1, W1 (4,8)=2 overlapping it, W2 (20,4)=3 FUA,
 * W3 (30,2)=4, W4 (40,2)=5, then a flush, then W (60,1)=6. Each state the
 * check sees is saved, with the crash point's entry.
 */
static void crash_log(struct dir *d)
{
	struct lb b;

	lb_open(&b, d->log, DISK);
	lb_write(&b, 0, 8, 1, false);
	lb_write(&b, 4, 8, 2, false);
	lb_write(&b, 20, 4, 3, true);
	lb_write(&b, 30, 2, 4, false);
	lb_write(&b, 40, 2, 5, false);
	lb_entry(&b, 0, 0, TD_WLOG_F_FLUSH, NULL, NULL);
	lb_write(&b, 60, 1, 6, false);
	lb_close(&b, UINT64_MAX);
}

/* Run the crash states of crash_log(); their contents and points go in @d->path/state.N. */
static unsigned int run_crash(struct dir *d, uint64_t seed, unsigned int k)
{
	struct td_replay_opts o;
	static char cmd[512];
	unsigned int n = 0;

	make_target(d, DISK, 0);
	opts(d, &o);
	snprintf(cmd, sizeof(cmd),
		 "case $TD_REPLAY_STATE in crash*) n=$(ls %s | grep -c '^state') ; "
		 "cp $TD_REPLAY_TARGET %s/state.$n; echo $TD_REPLAY_ENTRY >%s/point.$n;; esac",
		 d->path, d->path, d->path);
	o.fsck = cmd;
	o.crash_states = k;
	o.seed = seed;
	assert_int_equal(run(d, &o), TD_REPLAY_OK);
	for (;; n++) {
		char p[128];

		snprintf(p, sizeof(p), "%s/state.%u", d->path, n);
		if (access(p, F_OK))
			break;
	}
	return n;
}

static void clear_states(struct dir *d)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "rm -f %s/state.* %s/point.*", d->path, d->path);
	assert_int_equal(system(cmd), 0);
}

/* Return: a digest of every state file, in order. */
static uint64_t states_digest(struct dir *d, unsigned int n)
{
	uint64_t h = 1469598103934665603ULL;

	for (unsigned int i = 0; i < n; i++) {
		char p[128];
		size_t len;
		uint8_t *t;

		snprintf(p, sizeof(p), "%s/state.%u", d->path, i);
		t = read_whole_file(p, &len);
		for (size_t k = 0; k < len; k++)
			h = (h ^ t[k]) * 1099511628211ULL;
		free(t);
	}
	return h;
}

static void test_replay_crash_states_are_states_a_cache_could_leave(void **state)
{
	struct dir *d = *state;
	unsigned int n;
	uint8_t *t;
	size_t len;

	crash_log(d);
	n = run_crash(d, 1, 12);
	assert_true(n >= 6);
	assert_true(n <= 12);
	for (unsigned int i = 0; i < n; i++) {
		char p[128];
		uint64_t point;
		FILE *f;

		snprintf(p, sizeof(p), "%s/point.%u", d->path, i);
		f = fopen(p, "r");
		assert_non_null(f);
		assert_int_equal(fscanf(f, "%lu", &point), 1);
		fclose(f);
		assert_true(point <= 4);
		snprintf(p, sizeof(p), "%s/state.%u", d->path, i);
		t = read_whole_file(p, &len);
		/* Nothing after the crash point, nor of the next epoch. */
		assert_sectors(t, 60, 1, 0);
		if (point < 4)
			assert_sectors(t, 40, 2, 0);
		if (point < 3)
			assert_sectors(t, 30, 2, 0);
		/* The FUA write is there once its point is passed, and only then. */
		assert_sectors(t, 20, 4, point >= 2 ? 3 : 0);
		if (point < 1)
			assert_sectors(t, 4, 8, t[0] == 1 ? 1 : 0);
		/* Overlap: where W1 is kept its sectors are its own, never W0's over it. */
		bool w0 = t[0] == 1;
		bool w1 = t[8 * SS] == 2;

		assert_sectors(t, 0, 4, w0 ? 1 : 0);
		assert_sectors(t, 4, 4, w1 ? 2 : w0 ? 1 : 0);
		assert_sectors(t, 8, 4, w1 ? 2 : 0);
		free(t);
	}
	/* The target went back after each state, and ends as the whole log made it. */
	t = read_whole_file(d->target, &len);
	assert_sectors(t, 0, 4, 1);
	assert_sectors(t, 4, 8, 2);
	assert_sectors(t, 20, 4, 3);
	assert_sectors(t, 30, 2, 4);
	assert_sectors(t, 40, 2, 5);
	assert_sectors(t, 60, 1, 6);
	free(t);

	/* The same seed gives the same states; another seed, others. */
	uint64_t first = states_digest(d, n);

	clear_states(d);
	assert_int_equal(run_crash(d, 1, 12), n);
	assert_true(states_digest(d, n) == first);
	clear_states(d);
	unsigned int m = run_crash(d, 99, 12);

	assert_false(m == n && states_digest(d, m) == first);
}

/* A failing crash state: its entry, and the writes kept, are named; it stays on the target. */
static void test_replay_crash_state_failure_names_it(void **state)
{
	struct dir *d = *state;
	struct td_replay_opts o;
	uint8_t *t;
	size_t len;

	crash_log(d);
	make_target(d, DISK, 0);
	opts(d, &o);
	/* "fsck" fails when W1 is there without W0. */
	static char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "a=$(od -An -tu1 -j0 -N1 $TD_REPLAY_TARGET); b=$(od -An -tu1 -j%d -N1 "
		 "$TD_REPLAY_TARGET); ! [ $a -eq 0 -a $b -eq 2 ]",
		 8 * SS);
	o.fsck = cmd;
	o.crash_states = 64;
	assert_int_equal(run(d, &o), TD_REPLAY_CHECK_FAILED);
	assert_non_null(strstr(d->err_buf, "check failed at entry "));
	assert_non_null(strstr(d->err_buf, "of the epoch of entries 0..5"));
	t = read_whole_file(d->target, &len);
	assert_sectors(t, 0, 4, 0);
	assert_sectors(t, 8, 4, 2);
	free(t);
}

/* ---- bad input ---------------------------------------------------------------------------- */

enum bad_kind {
	BAD_TRUNCATED_DATA,
	BAD_TRUNCATED_HEADER,
	BAD_MAGIC,
	BAD_VERSION,
	BAD_SECTORSIZE,
	BAD_DISK_SIZE,
	BAD_TARGET_TOO_SMALL,
	BAD_MALFORMED,
	BAD_NO_MARK,
	BAD_START_ENTRY,
	BAD_CHECK_WITHOUT_FSCK,
	BAD_NO_TARGET_FILE,
	BAD_EMPTY_FILE,
	BAD_HUGE_DISCARD,
};

struct bad_case {
	const char *name;
	enum bad_kind kind;
	const char *message;
};

static void corrupt(const char *path, uint64_t off, const void *bytes, size_t len)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/* Make the case's bad input in @d and set @o for it. */
static void make_bad(struct dir *d, enum bad_kind kind, struct td_replay_opts *o)
{
	static const uint8_t bad_magic[8] = { 'n', 'o', 't', 'a', 'l', 'o', 'g', 0 };
	uint8_t v2[8] = { 2 }, ss[4] = { 0x00, 0x04 }; /* 1024 */
	uint8_t junk = 0x55;
	struct stat st;

	basic_log(d, kind == BAD_TARGET_TOO_SMALL ? 0 : DISK);
	make_target(d, kind == BAD_DISK_SIZE || kind == BAD_TARGET_TOO_SMALL ? 16 * SS : DISK,
		    0xee);
	opts(d, o);
	switch (kind) {
	case BAD_TRUNCATED_DATA:
		assert_int_equal(stat(d->log, &st), 0);
		assert_int_equal(truncate(d->log, st.st_size - 3 * SS), 0);
		break;
	case BAD_TRUNCATED_HEADER:
		assert_int_equal(truncate(d->log, SS + 9 * SS + 100), 0);
		break;
	case BAD_MAGIC:
		corrupt(d->log, 0, bad_magic, sizeof(bad_magic));
		break;
	case BAD_VERSION:
		corrupt(d->log, 8, v2, sizeof(v2));
		break;
	case BAD_SECTORSIZE:
		corrupt(d->log, 24, ss, sizeof(ss));
		break;
	case BAD_DISK_SIZE:
	case BAD_TARGET_TOO_SMALL:
		break;
	case BAD_MALFORMED:
		/* Entry 2 (the flush): a header not padded with zeroes. */
		corrupt(d->log, SS + 2 * 9 * SS + TD_WLOG_ENTRY_LEN, &junk, 1);
		break;
	case BAD_NO_MARK:
		o->end_mark = "c";
		break;
	case BAD_START_ENTRY:
		o->start_entry = 10;
		break;
	case BAD_CHECK_WITHOUT_FSCK:
		o->check = TD_REPLAY_CHECK_FLUSH;
		break;
	case BAD_NO_TARGET_FILE:
		o->target = "/nonexistent/target";
		break;
	case BAD_EMPTY_FILE:
		assert_int_equal(truncate(d->log, 0), 0);
		break;
	case BAD_HUGE_DISCARD: {
		/*
		 * Entry 2 becomes a discard of 2^64 - 1 sectors from sector 2: no
		 * data to be missing, and sector + sectors wraps to 1.
		 */
		uint64_t e[4] = { htole64(2), htole64(UINT64_MAX), htole64(TD_WLOG_F_DISCARD), 0 };

		corrupt(d->log, SS + 2 * 9 * SS, e, sizeof(e));
		break;
	}
	}
}

static void test_replay_bad_input_writes_nothing(void **state)
{
	const struct bad_case *bc = *state;
	struct dir *d;
	struct td_replay_opts o;
	uint8_t *before, *after;
	size_t blen, alen;
	void *ds = NULL;

	assert_int_equal(dir_setup(&ds), 0);
	d = ds;
	make_bad(d, bc->kind, &o);
	before = read_whole_file(d->target, &blen);
	assert_int_equal(run(d, &o), TD_REPLAY_BAD_INPUT);
	print_message("# %s", d->err_buf);
	assert_non_null(strstr(d->err_buf, bc->message));
	/* One message: one line. */
	assert_non_null(strchr(d->err_buf, '\n'));
	assert_string_equal(strchr(d->err_buf, '\n'), "\n");
	after = read_whole_file(d->target, &alen);
	assert_int_equal(alen, blen);
	assert_memory_equal(after, before, blen);
	free(before);
	free(after);
	assert_int_equal(dir_teardown(&ds), 0);
}

int main(void)
{
	static const struct bad_case bad[] = {
		{ "test_replay_refuses_a_log_truncated_in_its_data", BAD_TRUNCATED_DATA,
		  "is truncated: entry 7 at byte 14336 has 4096 bytes of data" },
		{ "test_replay_refuses_a_log_truncated_in_a_header", BAD_TRUNCATED_HEADER,
		  "is truncated: the super block counts 9 entries, but entry 1" },
		{ "test_replay_refuses_a_wrong_magic", BAD_MAGIC, "not a write log (magic" },
		{ "test_replay_refuses_another_version", BAD_VERSION, "write log version 2" },
		{ "test_replay_refuses_a_bad_sector_size", BAD_SECTORSIZE, "sector size 1024" },
		{ "test_replay_refuses_a_log_of_a_disk_of_another_size", BAD_DISK_SIZE,
		  "is 8192 bytes, but the log is of a disk of 1048576 bytes" },
		{ "test_replay_refuses_a_target_smaller_than_the_log_needs", BAD_TARGET_TOO_SMALL,
		  "is 8192 bytes, but entry 1 writes up to byte 12288" },
		{ "test_replay_refuses_a_malformed_entry", BAD_MALFORMED,
		  "entry 2 at byte 9728 is malformed: a header not padded with zeroes" },
		{ "test_replay_refuses_a_missing_mark", BAD_NO_MARK, "no mark \"c\"" },
		{ "test_replay_refuses_a_start_entry_past_the_log", BAD_START_ENTRY,
		  "--start-entry 10: the log has 9 entries" },
		{ "test_replay_refuses_check_without_fsck", BAD_CHECK_WITHOUT_FSCK,
		  "--fsck CMD goes with --check" },
		{ "test_replay_refuses_a_missing_target", BAD_NO_TARGET_FILE,
		  "/nonexistent/target: No such file or directory" },
		{ "test_replay_refuses_an_empty_file", BAD_EMPTY_FILE,
		  "0 bytes, too short for a write log's super block" },
		{ "test_replay_refuses_a_discard_whose_end_wraps", BAD_HUGE_DISCARD,
		  "entry 2 at byte 9728 is malformed: sectors beyond any disk" },
	};
	struct test_list l = { 0 };

	test_list_add(&l, "test_replay_stops_where_asked", test_replay_stops_where_asked, dir_setup,
		      dir_teardown, NULL);
	test_list_add(&l, "test_replay_find_and_num_entries_as_replay_log",
		      test_replay_find_and_num_entries_as_replay_log, dir_setup, dir_teardown, NULL);
	test_list_add(&l, "test_replay_check_stops_at_first_failing_state",
		      test_replay_check_stops_at_first_failing_state, dir_setup, dir_teardown, NULL);
	test_list_add(&l, "test_replay_crash_states_are_states_a_cache_could_leave",
		      test_replay_crash_states_are_states_a_cache_could_leave, dir_setup,
		      dir_teardown, NULL);
	test_list_add(&l, "test_replay_crash_state_failure_names_it",
		      test_replay_crash_state_failure_names_it, dir_setup, dir_teardown, NULL);
	TL_ADD_TABLE(&l, test_replay_bad_input_writes_nothing, NULL, NULL, bad);
	return test_list_run(&l);
}
