// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * replay.c - tagdisk-replay's work (replay.h): read a write log's entry
 * headers into an index, check the request against it and the target, then
 * apply entries, running checks and building crash states.
 *
 * The index holds, per entry, its decoded header and where it sits in the log
 * file; data is read from the log when it is applied, a MiB at a time. A
 * crash state saves what the target held under each write it applies (in
 * memory, in order) and puts it back in reverse order, which undoes
 * overlapping writes exactly.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/random.h"
#include "common/wlog_fmt.h"
#include "ctl/replay.h"

#define TD_REPLAY_CHUNK (1U << 20) /* bytes read from the log at a time */

struct td_replay_ent {
	struct td_wlog_entry e;
	uint64_t off; /* byte offset of the header sector in the log */
	char *mark;   /* MARK: its name */
};

struct undo {
	uint64_t off;
	uint64_t len;
	uint8_t *data;
};

struct td_replay {
	const struct td_replay_opts *o;
	FILE *out;
	FILE *err;
	int lfd;
	uint64_t lsize;
	struct td_wlog_super s;
	uint32_t ss;
	struct td_replay_ent *v;
	uint64_t n;
	uint64_t first; /* entries [first, end) are replayed */
	uint64_t end;
	int tfd;
	bool tregular;
	uint64_t tsize;
	uint8_t *buf; /* TD_REPLAY_CHUNK bytes */
	/* while replaying */
	uint64_t flushes;
	const char *mark;
	uint64_t checks;
	uint64_t crash_checked;
};

static void td_replay_say(struct td_replay *r, const char *fmt, ...) td_printf(2, 3);

static void td_replay_say(struct td_replay *r, const char *fmt, ...)
{
	va_list ap;

	fputs("tagdisk-replay: ", r->err);
	va_start(ap, fmt);
	vfprintf(r->err, fmt, ap);
	va_end(ap);
	fputc('\n', r->err);
}

void td_replay_opts_default(struct td_replay_opts *o)
{
	*o = (struct td_replay_opts){ .end_sector = UINT64_MAX, .seed = 1 };
}

/* ---- the log --------------------------------------------------------------------------- */

/* pread(2) or pwrite(2) of all @len bytes, retried over short counts; errno on failure. */
static bool full_io(int fd, void *buf, size_t len, uint64_t off, bool write)
{
	while (len) {
		ssize_t n = write ? pwrite(fd, buf, len, (off_t)off) : pread(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return false;
		}
		buf = (char *)buf + n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return true;
}

static bool td_replay_pread(int fd, void *buf, size_t len, uint64_t off)
{
	return full_io(fd, buf, len, off, false);
}

static bool td_replay_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	return full_io(fd, (void *)buf, len, off, true);
}

/* Read and check the super block. Return: 0 or TD_REPLAY_BAD_INPUT (said why). */
static int td_replay_read_super(struct td_replay *r)
{
	uint8_t buf[TD_WLOG_SUPER_LEN] = { 0 };
	struct stat st;
	int ret;

	r->lfd = open(r->o->log, O_RDONLY | O_CLOEXEC);
	if (r->lfd < 0) {
		td_replay_say(r, "%s: %s", r->o->log, strerror(errno));
		return TD_REPLAY_BAD_INPUT;
	}
	if (fstat(r->lfd, &st) < 0 || !S_ISREG(st.st_mode)) {
		td_replay_say(r, "%s: not a regular file", r->o->log);
		return TD_REPLAY_BAD_INPUT;
	}
	r->lsize = (uint64_t)st.st_size;
	if (r->lsize < 32) {
		td_replay_say(r, "%s: %" PRIu64 " bytes, too short for a write log's super block",
			      r->o->log, r->lsize);
		return TD_REPLAY_BAD_INPUT;
	}
	if (!td_replay_pread(r->lfd, buf, TD_MIN(sizeof(buf), r->lsize), 0)) {
		td_replay_say(r, "%s: %s", r->o->log, strerror(errno));
		return TD_REPLAY_BAD_INPUT;
	}
	ret = td_wlog_decode_super(buf, &r->s);
	if (ret == -EINVAL) {
		td_replay_say(r, "%s: not a write log (magic 0x%" PRIx64
				 ", a dm-log-writes log has 0x%llx)",
			      r->o->log, r->s.magic, (unsigned long long)TD_WLOG_MAGIC);
		return TD_REPLAY_BAD_INPUT;
	}
	if (ret == -EPROTO) {
		td_replay_say(r, "%s: write log version %" PRIu64 ", this tool reads version %llu",
			      r->o->log, r->s.version, (unsigned long long)TD_WLOG_VERSION);
		return TD_REPLAY_BAD_INPUT;
	}
	if (ret) {
		td_replay_say(r, "%s: sector size %u in the super block (512 or 4096)",
			      r->o->log, r->s.sectorsize);
		return TD_REPLAY_BAD_INPUT;
	}
	r->ss = r->s.sectorsize;
	if (r->lsize < r->ss) {
		td_replay_say(r, "%s is truncated: %" PRIu64
				 " bytes, less than its super block's sector (%u)",
			      r->o->log, r->lsize, r->ss);
		return TD_REPLAY_BAD_INPUT;
	}
	return 0;
}

/* Check entry @i's header @hdr. Return: NULL, or what is wrong with it. */
static const char *entry_problem(const struct td_replay *r, const uint8_t *hdr,
				 const struct td_wlog_entry *e)
{
	if (e->flags & ~TD_WLOG_F_ALL)
		return "unknown flags";
	if (!e->flags && !e->nr_sectors)
		return "an empty entry (no flags, no sectors)";
	if (e->flags & TD_WLOG_F_MARK) {
		if (e->flags != TD_WLOG_F_MARK || e->nr_sectors)
			return "a mark with other flags or sectors";
		if (!e->data_len || e->data_len > td_wlog_mark_max(r->ss))
			return "a mark whose name does not fit its sector";
		if (memchr(hdr + TD_WLOG_ENTRY_LEN, '\0', e->data_len))
			return "a mark whose name holds a NUL byte";
		return NULL;
	}
	if (e->data_len || hdr[TD_WLOG_ENTRY_LEN])
		return "a header not padded with zeroes";
	if (e->sector > UINT64_MAX / r->ss - e->nr_sectors)
		return "sectors beyond any disk";
	return NULL;
}

/* Index every entry the super block counts. Return: 0 or TD_REPLAY_BAD_INPUT. */
static int td_replay_read_entries(struct td_replay *r)
{
	uint8_t *hdr;
	uint64_t off = r->ss;

	/* Each entry takes a sector at least: a count the file cannot hold is a truncation. */
	if (r->s.nr_entries > (r->lsize - r->ss) / r->ss) {
		td_replay_say(r, "%s is truncated: the super block counts %" PRIu64
				 " entries, but the file ends at byte %" PRIu64
				 ", room for %" PRIu64 " at most",
			      r->o->log, r->s.nr_entries, r->lsize, (r->lsize - r->ss) / r->ss);
		return TD_REPLAY_BAD_INPUT;
	}
	hdr = malloc(r->ss);
	r->v = calloc(r->s.nr_entries ? r->s.nr_entries : 1, sizeof(*r->v));
	if (!hdr || !r->v) {
		free(hdr);
		td_replay_say(r, "out of memory for %" PRIu64 " entries", r->s.nr_entries);
		return TD_REPLAY_BAD_INPUT;
	}
	for (r->n = 0; r->n < r->s.nr_entries; r->n++) {
		struct td_replay_ent *x = &r->v[r->n];
		const char *why;

		if (off > r->lsize || r->lsize - off < r->ss) {
			td_replay_say(r, "%s is truncated: the super block counts %" PRIu64
					 " entries, but entry %" PRIu64 " at byte %" PRIu64
					 " needs a %u-byte header and the file ends at "
					 "byte %" PRIu64,
				      r->o->log, r->s.nr_entries, r->n, off, r->ss, r->lsize);
			free(hdr);
			return TD_REPLAY_BAD_INPUT;
		}
		if (!td_replay_pread(r->lfd, hdr, r->ss, off)) {
			td_replay_say(r, "%s: reading entry %" PRIu64 ": %s", r->o->log, r->n,
				      strerror(errno));
			free(hdr);
			return TD_REPLAY_BAD_INPUT;
		}
		td_wlog_decode_entry(hdr, &x->e);
		x->off = off;
		why = entry_problem(r, hdr, &x->e);
		if (why) {
			td_replay_say(r,
				      "%s: entry %" PRIu64 " at byte %" PRIu64 " is malformed: %s",
				      r->o->log, r->n, off, why);
			free(hdr);
			return TD_REPLAY_BAD_INPUT;
		}
		if (x->e.flags & TD_WLOG_F_MARK) {
			x->mark = strndup((const char *)hdr + TD_WLOG_ENTRY_LEN, x->e.data_len);
			if (!x->mark) {
				td_replay_say(r, "out of memory");
				free(hdr);
				return TD_REPLAY_BAD_INPUT;
			}
		}
		uint64_t data = td_wlog_entry_data_sectors(&x->e);

		off += r->ss;
		if (data > (r->lsize - off) / r->ss) {
			td_replay_say(r, "%s is truncated: entry %" PRIu64 " at byte %" PRIu64
					 " has %" PRIu64 " bytes of data and the file ends at "
					 "byte %" PRIu64,
				      r->o->log, r->n, x->off, data * r->ss, r->lsize);
			free(hdr);
			return TD_REPLAY_BAD_INPUT;
		}
		off += data * r->ss;
	}
	free(hdr);
	return 0;
}

static bool is_mark(const struct td_replay_ent *x, const char *name)
{
	return x->mark && strcmp(x->mark, name) == 0;
}

/* Return: true when the run stops after entry @x, the @count'th it replays. */
static bool stops_at(const struct td_replay *r, const struct td_replay_ent *x, uint64_t count)
{
	const struct td_replay_opts *o = r->o;

	return (o->limit && count == o->limit) || (o->next_flush && (x->e.flags & TD_WLOG_F_FLUSH)) ||
	       (o->next_fua && (x->e.flags & TD_WLOG_F_FUA)) ||
	       (o->end_mark && is_mark(x, o->end_mark));
}

/* Settle [first, end). Return: 0 or TD_REPLAY_BAD_INPUT. */
static int td_replay_choose_range(struct td_replay *r)
{
	const struct td_replay_opts *o = r->o;
	bool bounded = o->limit || o->next_flush || o->next_fua || o->end_mark;

	r->first = o->start_entry;
	if (o->start_mark) {
		uint64_t i = 0;

		while (i < r->n && !is_mark(&r->v[i], o->start_mark))
			i++;
		if (i == r->n) {
			td_replay_say(r, "%s: no mark \"%s\" (--start-mark)", o->log,
				      o->start_mark);
			return TD_REPLAY_BAD_INPUT;
		}
		r->first = i + 1;
	} else if (r->first > r->n) {
		td_replay_say(r, "--start-entry %" PRIu64 ": the log has %" PRIu64 " entries",
			      r->first, r->n);
		return TD_REPLAY_BAD_INPUT;
	}
	r->end = r->n;
	if (!bounded)
		return 0;
	for (uint64_t i = r->first; i < r->n; i++) {
		if (stops_at(r, &r->v[i], i - r->first + 1)) {
			r->end = i + 1;
			return 0;
		}
	}
	/* replay-log's --limit replays what there is; the other bounds must be found. */
	if (o->limit && !o->find)
		return 0;
	if (o->end_mark)
		td_replay_say(r, "%s: no mark \"%s\" after entry %" PRIu64 " (--end-mark)", o->log,
			      o->end_mark, r->first);
	else if (o->limit)
		td_replay_say(r, "%s: fewer than %" PRIu64 " entries after entry %" PRIu64
				 " (--limit)",
			      o->log, o->limit, r->first);
	else
		td_replay_say(r, "%s: no %s entry after entry %" PRIu64, o->log,
			      o->next_flush && o->next_fua ? "flush or FUA"
			      : o->next_flush		   ? "flush"
							   : "FUA",
			      r->first);
	return TD_REPLAY_BAD_INPUT;
}

/* Return: the log sector just past entry @x (header and data), as replay-log counts it. */
static uint64_t td_replay_pos_after(const struct td_replay *r, const struct td_replay_ent *x)
{
	return (x->off + r->ss + td_wlog_entry_data_sectors(&x->e) * r->ss) / r->ss;
}

/* ---- the target ------------------------------------------------------------------------ */

static bool skipped(const struct td_replay *r, const struct td_replay_ent *x)
{
	const struct td_wlog_entry *e = &x->e;

	if (!e->nr_sectors)
		return false;
	if ((e->flags & TD_WLOG_F_DISCARD) && r->o->no_discard)
		return true;
	return e->sector + e->nr_sectors <= r->o->start_sector || e->sector > r->o->end_sector;
}

/* Return: true when entry @x changes the target (a write or a discard not skipped). */
static bool td_replay_changes_data(const struct td_replay *r, const struct td_replay_ent *x)
{
	return x->e.nr_sectors && !skipped(r, x);
}

static int open_target(struct td_replay *r)
{
	const struct td_replay_opts *o = r->o;
	struct stat st;

	r->tfd = open(o->target, O_RDWR | O_CLOEXEC);
	if (r->tfd < 0) {
		td_replay_say(r, "%s: %s", o->target, strerror(errno));
		return TD_REPLAY_BAD_INPUT;
	}
	if (fstat(r->tfd, &st) < 0) {
		td_replay_say(r, "%s: %s", o->target, strerror(errno));
		return TD_REPLAY_BAD_INPUT;
	}
	if (S_ISREG(st.st_mode)) {
		r->tregular = true;
		r->tsize = (uint64_t)st.st_size;
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(r->tfd, BLKGETSIZE64, &r->tsize) < 0) {
			td_replay_say(r, "%s: %s", o->target, strerror(errno));
			return TD_REPLAY_BAD_INPUT;
		}
	} else {
		td_replay_say(r, "%s: neither a regular file nor a block device", o->target);
		return TD_REPLAY_BAD_INPUT;
	}
	if (r->s.disk_bytes && r->tsize != r->s.disk_bytes) {
		td_replay_say(r, "%s is %" PRIu64 " bytes, but the log is of a disk of %" PRIu64
				 " bytes",
			      o->target, r->tsize, r->s.disk_bytes);
		return TD_REPLAY_BAD_INPUT;
	}
	for (uint64_t i = r->first; i < r->end; i++) {
		const struct td_replay_ent *x = &r->v[i];

		if (td_replay_changes_data(r, x) &&
		    (x->e.sector + x->e.nr_sectors) > r->tsize / r->ss) {
			td_replay_say(r, "%s is %" PRIu64 " bytes, but entry %" PRIu64
					 " writes up to byte %" PRIu64,
				      o->target, r->tsize, i,
				      (x->e.sector + x->e.nr_sectors) * r->ss);
			return TD_REPLAY_BAD_INPUT;
		}
	}
	return 0;
}

/* Make [@off, +@len) of the target zeroes. Return: false with errno set. */
static bool zero_range(struct td_replay *r, uint64_t off, uint64_t len)
{
	if (r->tregular) {
		if (fallocate(r->tfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			      (off_t)len) == 0)
			return true;
	} else {
		uint64_t range[2] = { off, len };

		if (ioctl(r->tfd, BLKZEROOUT, range) == 0)
			return true;
	}
	memset(r->buf, 0, TD_REPLAY_CHUNK);
	while (len) {
		size_t n = (size_t)TD_MIN(len, (uint64_t)TD_REPLAY_CHUNK);

		if (!td_replay_pwrite(r->tfd, r->buf, n, off))
			return false;
		off += n;
		len -= n;
	}
	return true;
}

/* Apply entry @x to the target. Return: 0 or TD_REPLAY_IO_ERROR (said why). */
static int td_replay_apply(struct td_replay *r, uint64_t i)
{
	const struct td_replay_ent *x = &r->v[i];
	uint64_t off = x->e.sector * r->ss;
	uint64_t len = x->e.nr_sectors * r->ss;
	uint64_t src = x->off + r->ss;

	if (!td_replay_changes_data(r, x))
		return 0;
	if (x->e.flags & TD_WLOG_F_DISCARD) {
		if (!zero_range(r, off, len)) {
			td_replay_say(r, "%s: discarding entry %" PRIu64 ": %s", r->o->target, i,
				      strerror(errno));
			return TD_REPLAY_IO_ERROR;
		}
		return 0;
	}
	while (len) {
		size_t n = (size_t)TD_MIN(len, (uint64_t)TD_REPLAY_CHUNK);

		if (!td_replay_pread(r->lfd, r->buf, n, src)) {
			td_replay_say(r, "%s: reading entry %" PRIu64 ": %s", r->o->log, i,
				      strerror(errno));
			return TD_REPLAY_IO_ERROR;
		}
		if (!td_replay_pwrite(r->tfd, r->buf, n, off)) {
			td_replay_say(r, "%s: writing entry %" PRIu64 ": %s", r->o->target, i,
				      strerror(errno));
			return TD_REPLAY_IO_ERROR;
		}
		src += n;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- checks ---------------------------------------------------------------------------- */

/*
 * Sync the target and run the check command on it, @i being the last entry
 * applied and @state what the target holds. Return: 0 when it passed, else
 * TD_REPLAY_CHECK_FAILED with *@why describing how it failed.
 */
static int td_replay_run_check(struct td_replay *r, uint64_t i, const char *state, char *why,
			       size_t len)
{
	char entry[32], flushes[32];
	int status;
	pid_t pid;

	if (fsync(r->tfd) < 0) {
		td_replay_say(r, "%s: fsync: %s", r->o->target, strerror(errno));
		return TD_REPLAY_IO_ERROR;
	}
	r->checks++;
	snprintf(entry, sizeof(entry), "%" PRIu64, i);
	snprintf(flushes, sizeof(flushes), "%" PRIu64, r->flushes);
	fflush(r->out);
	fflush(r->err);
	pid = fork();
	if (pid < 0) {
		td_replay_say(r, "fork: %s", strerror(errno));
		return TD_REPLAY_IO_ERROR;
	}
	if (pid == 0) {
		setenv("TD_REPLAY_TARGET", r->o->target, 1);
		setenv("TD_REPLAY_ENTRY", entry, 1);
		setenv("TD_REPLAY_FLUSHES", flushes, 1);
		setenv("TD_REPLAY_MARK", r->mark ? r->mark : "", 1);
		setenv("TD_REPLAY_STATE", state, 1);
		execl("/bin/sh", "sh", "-c", r->o->fsck, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			td_replay_say(r, "waitpid: %s", strerror(errno));
			return TD_REPLAY_IO_ERROR;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		snprintf(why, len, "exited with status %d", WEXITSTATUS(status));
	else
		snprintf(why, len, "killed by signal %d", WTERMSIG(status));
	return TD_REPLAY_CHECK_FAILED;
}

/* Return: whether --check asks for a check after entry @x, the @count'th replayed. */
static bool td_replay_check_due(const struct td_replay *r, const struct td_replay_ent *x,
				uint64_t count)
{
	switch (r->o->check) {
	case TD_REPLAY_CHECK_NONE:
		return false;
	case TD_REPLAY_CHECK_FLUSH:
		return x->e.flags & TD_WLOG_F_FLUSH;
	case TD_REPLAY_CHECK_FUA:
		return x->e.flags & TD_WLOG_F_FUA;
	case TD_REPLAY_CHECK_MARK:
		return x->e.flags & TD_WLOG_F_MARK;
	case TD_REPLAY_CHECK_EVERY:
		return count % r->o->check_every == 0;
	}
	return false;
}

/* ---- crash states ----------------------------------------------------------------------- */

static void undo_free(struct undo *u, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(u[k].data);
	free(u);
}

/* Put back what @u[0..@n) saved, last first. Return: 0 or TD_REPLAY_IO_ERROR. */
static int undo_apply(struct td_replay *r, const struct undo *u, size_t n)
{
	while (n--) {
		if (!td_replay_pwrite(r->tfd, u[n].data, u[n].len, u[n].off)) {
			td_replay_say(r, "%s: restoring after a crash state: %s", r->o->target,
				      strerror(errno));
			return TD_REPLAY_IO_ERROR;
		}
	}
	return 0;
}

/*
 * Apply the entries @d[k] with @keep[k] set, saving what they overwrite into
 * *@undo. Return: 0 or an error status.
 */
static int apply_kept(struct td_replay *r, const uint64_t *d, const bool *keep, size_t m,
		      struct undo **undo, size_t *nr_undo)
{
	struct undo *u = calloc(m ? m : 1, sizeof(*u));
	size_t nu = 0;
	int ret = 0;

	if (!u) {
		td_replay_say(r, "out of memory");
		return TD_REPLAY_IO_ERROR;
	}
	for (size_t k = 0; k < m && !ret; k++) {
		const struct td_replay_ent *x = &r->v[d[k]];

		if (!keep[k])
			continue;
		u[nu].off = x->e.sector * r->ss;
		u[nu].len = x->e.nr_sectors * r->ss;
		u[nu].data = malloc(u[nu].len);
		if (!u[nu].data) {
			td_replay_say(r, "out of memory for a crash state (%" PRIu64 " bytes)",
				      u[nu].len);
			ret = TD_REPLAY_IO_ERROR;
			break;
		}
		if (!td_replay_pread(r->tfd, u[nu].data, u[nu].len, u[nu].off)) {
			td_replay_say(r, "%s: reading: %s", r->o->target, strerror(errno));
			free(u[nu].data);
			ret = TD_REPLAY_IO_ERROR;
			break;
		}
		nu++;
		ret = td_replay_apply(r, d[k]);
	}
	*undo = u;
	*nr_undo = nu;
	return ret;
}

/* A short list of entry numbers: "12 14 15 ..." (the first few). */
static void kept_list(const uint64_t *d, const bool *keep, size_t m, char *buf, size_t len)
{
	size_t used = 0, shown = 0;

	buf[0] = '\0';
	for (size_t k = 0; k < m && used < len; k++) {
		if (!keep[k])
			continue;
		if (shown++ == 16) {
			snprintf(buf + used, len - used, " ...");
			return;
		}
		used += (size_t)snprintf(buf + used, len - used, "%s%" PRIu64, used ? " " : "", d[k]);
	}
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	uint64_t s = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));

	return td_splitmix64_next(&s);
}

/*
 * The crash states of the epoch [@es, @ee): the target holds the disk as it
 * was at its start. Return: 0 when every state passed (the target is as it
 * was), else the status (a failed state is left on the target).
 */
static int td_replay_crash_epoch(struct td_replay *r, uint64_t es, uint64_t ee)
{
	unsigned int want = r->o->crash_states;
	uint64_t *d = malloc((ee - es + 1) * sizeof(*d));
	bool *keep = malloc((ee - es + 1) * sizeof(*keep));
	uint64_t *seen = calloc(want, sizeof(*seen));
	uint64_t rng = mix(r->o->seed, es);
	size_t m = 0, nseen = 0;
	int ret = 0;

	if (!d || !keep || !seen) {
		td_replay_say(r, "out of memory");
		ret = TD_REPLAY_IO_ERROR;
		goto out;
	}
	for (uint64_t i = es; i < ee; i++)
		if (td_replay_changes_data(r, &r->v[i]) && !(r->v[i].e.flags & TD_WLOG_F_FLUSH))
			d[m++] = i;
	if (m < 2)
		goto out; /* no state but the epoch's two ends, which are prefixes */
	for (unsigned int attempt = 0; nseen < want && attempt < 8 * want; attempt++) {
		size_t point = 1 + (size_t)(td_splitmix64_next(&rng) % m);
		uint64_t h = 0x5eed;
		size_t kept = 0;

		for (size_t k = 0; k < m; k++) {
			keep[k] = k < point && ((r->v[d[k]].e.flags & TD_WLOG_F_FUA) ||
						(td_splitmix64_next(&rng) & 1));
			if (keep[k]) {
				h = mix(h, d[k]);
				kept++;
			}
		}
		/* Nothing of the epoch, or all of it: the prefixes at its ends. */
		if (!kept || kept == m)
			continue;
		bool dup = false;

		for (size_t k = 0; k < nseen; k++)
			dup |= seen[k] == h;
		if (dup)
			continue;
		seen[nseen++] = h;

		struct undo *u = NULL;
		size_t nu = 0;
		char state[48], why[64], list[256];

		ret = apply_kept(r, d, keep, m, &u, &nu);
		if (!ret) {
			const char *prefix_mark = r->mark;

			/* The marks before the crash point were logged: what they vouch for holds. */
			for (uint64_t i = es; i <= d[point - 1]; i++)
				if (r->v[i].mark)
					r->mark = r->v[i].mark;
			snprintf(state, sizeof(state), "crash %zu/%u", nseen, want);
			r->crash_checked++;
			ret = td_replay_run_check(r, d[point - 1], state, why, sizeof(why));
			r->mark = prefix_mark;
			if (ret == TD_REPLAY_CHECK_FAILED) {
				kept_list(d, keep, m, list, sizeof(list));
				td_replay_say(r, "check failed at entry %" PRIu64
						 ", crash state %zu of the epoch of entries "
						 "%" PRIu64 "..%" PRIu64 " (kept %zu of its %zu "
						 "writes up to entry %" PRIu64 ": %s): \"%s\" %s",
					      d[point - 1], nseen, es, ee - 1, kept, m,
					      d[point - 1], list, r->o->fsck, why);
				undo_free(u, nu);
				goto out;
			}
		}
		if (!ret)
			ret = undo_apply(r, u, nu);
		undo_free(u, nu);
		if (ret)
			goto out;
	}
out:
	free(d);
	free(keep);
	free(seen);
	return ret;
}

/* ---- the run --------------------------------------------------------------------------- */

static void print_entry(struct td_replay *r, uint64_t i, const char *verb)
{
	const struct td_replay_ent *x = &r->v[i];
	char flags[128];

	fprintf(r->out, "%s %" PRIu64 "@%" PRIu64 ": sector %" PRIu64 ", size %" PRIu64
			", flags 0x%" PRIx64 "(%s)%s%s%s\n",
		verb, i, (x->off + r->ss) / r->ss, x->e.sector, x->e.nr_sectors * r->ss, x->e.flags,
		td_wlog_flags_name(x->e.flags, flags, sizeof(flags)), x->mark ? " \"" : "",
		x->mark ? x->mark : "", x->mark ? "\"" : "");
}

static int replay(struct td_replay *r)
{
	const struct td_replay_opts *o = r->o;
	uint64_t epoch = r->first;
	char why[64], flags[64];
	int ret;

	for (uint64_t i = r->first; i < r->end; i++) {
		const struct td_replay_ent *x = &r->v[i];

		if (o->crash_states && i == epoch) {
			uint64_t ee = i;

			while (ee < r->end && !(r->v[ee].e.flags & TD_WLOG_F_FLUSH))
				ee++;
			ret = td_replay_crash_epoch(r, i, TD_MIN(ee + 1, r->end));
			if (ret)
				return ret;
			epoch = ee + 1;
		}
		bool skip = x->e.nr_sectors && skipped(r, x);

		if (o->verbose > 1 || (o->verbose && !skip))
			print_entry(r, i, skip ? "skipping" : "replaying");
		ret = td_replay_apply(r, i);
		if (ret)
			return ret;
		if (x->e.flags & TD_WLOG_F_FLUSH)
			r->flushes++;
		if (x->mark)
			r->mark = x->mark;
		if (td_replay_check_due(r, x, i - r->first + 1)) {
			ret = td_replay_run_check(r, i, "prefix", why, sizeof(why));
			if (ret == TD_REPLAY_CHECK_FAILED)
				td_replay_say(r, "check failed at entry %" PRIu64 " (%s): "
						 "\"%s\" %s", i,
					      td_wlog_flags_name(x->e.flags, flags, sizeof(flags)),
					      o->fsck, why);
			if (ret)
				return ret;
		}
	}
	if (fsync(r->tfd) < 0) {
		td_replay_say(r, "%s: fsync: %s", o->target, strerror(errno));
		return TD_REPLAY_IO_ERROR;
	}
	if (o->check != TD_REPLAY_CHECK_NONE || o->crash_states)
		fprintf(r->out,
			"replayed entries %" PRIu64 "..%" PRIu64 " of %" PRIu64 ": %" PRIu64
			" checks passed (%" PRIu64 " of them crash states)\n",
			r->first, r->end ? r->end - 1 : 0, r->n, r->checks, r->crash_checked);
	return 0;
}

static int usage_problem(struct td_replay *r)
{
	const struct td_replay_opts *o = r->o;

	if (!!o->fsck != (o->check != TD_REPLAY_CHECK_NONE || o->crash_states)) {
		td_replay_say(r,
			      "--fsck CMD goes with --check or --crash-states, and they need it");
		return TD_REPLAY_BAD_INPUT;
	}
	if (o->check == TD_REPLAY_CHECK_EVERY && !o->check_every) {
		td_replay_say(r, "--check N: N must be at least 1");
		return TD_REPLAY_BAD_INPUT;
	}
	if (o->find && !(o->limit || o->next_flush || o->next_fua || o->end_mark)) {
		td_replay_say(r, "--find needs --limit, --end-mark, --next-flush or --next-fua");
		return TD_REPLAY_BAD_INPUT;
	}
	if (o->start_sector > o->end_sector) {
		td_replay_say(r, "--start-sector is past --end-sector");
		return TD_REPLAY_BAD_INPUT;
	}
	return 0;
}

int td_replay_run(const struct td_replay_opts *o)
{
	struct td_replay r = { .o = o, .out = o->out ? o->out : stdout,
			       .err = o->err ? o->err : stderr, .lfd = -1, .tfd = -1 };
	int ret = usage_problem(&r);

	if (!ret)
		ret = td_replay_read_super(&r);
	if (!ret && o->num_entries) {
		fprintf(r.out, "%" PRIu64 "\n", r.s.nr_entries);
		goto out;
	}
	if (!ret)
		ret = td_replay_read_entries(&r);
	if (!ret)
		ret = td_replay_choose_range(&r);
	if (ret)
		goto out;
	if (o->find) {
		fprintf(r.out, "%" PRIu64 "@%" PRIu64 "\n", r.end - 1,
			td_replay_pos_after(&r, &r.v[r.end - 1]));
		goto out;
	}
	if (!o->target) {
		fprintf(r.out, "Log version=%llu, sectorsize=%u, entries=%" PRIu64 "\n",
			(unsigned long long)TD_WLOG_VERSION, r.ss, r.n);
		for (uint64_t i = r.first; o->verbose && i < r.end; i++)
			print_entry(&r, i, "entry");
		goto out;
	}
	ret = open_target(&r);
	if (ret)
		goto out;
	r.buf = malloc(TD_REPLAY_CHUNK);
	if (!r.buf) {
		td_replay_say(&r, "out of memory");
		ret = TD_REPLAY_IO_ERROR;
		goto out;
	}
	ret = replay(&r);
out:
	fflush(r.out);
	if (r.tfd >= 0)
		close(r.tfd);
	if (r.lfd >= 0)
		close(r.lfd);
	for (uint64_t i = 0; r.v && i < r.n; i++)
		free(r.v[i].mark);
	free(r.v);
	free(r.buf);
	return ret;
}
