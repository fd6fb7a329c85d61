// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * replay.c - tagdisk-replay's work (replay.h): check the request, read the
 * log (replay_log.c), open the target, then apply entries in order, running
 * checks and building crash states (replay_check.c). What the parts share:
 * replay_int.h.
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
#include <unistd.h>
#include "common/wlog_fmt.h"
#include "ctl/replay.h"
#include "ctl/replay_int.h"

void td_replay_say(struct td_replay *r, const char *fmt, ...)
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

/* ---- I/O -------------------------------------------------------------------------------- */

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

bool td_replay_pread(int fd, void *buf, size_t len, uint64_t off)
{
	return full_io(fd, buf, len, off, false);
}

bool td_replay_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	return full_io(fd, (void *)buf, len, off, true);
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
bool td_replay_changes_data(const struct td_replay *r, const struct td_replay_ent *x)
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
int td_replay_apply(struct td_replay *r, uint64_t i)
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
