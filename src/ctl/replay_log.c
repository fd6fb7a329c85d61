// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * replay_log.c - tagdisk-replay's reading of the log (replay_int.h): the super
 * block, every entry header checked and indexed (nothing of the log is
 * trusted: a bad one is one message and TD_REPLAY_BAD_INPUT), the marks, and
 * the range of entries the options ask for.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common/wlog_fmt.h"
#include "ctl/replay_int.h"

/* Read and check the super block. Return: 0 or TD_REPLAY_BAD_INPUT (said why). */
int td_replay_read_super(struct td_replay *r)
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
	/* In this order, so that nothing wraps: every later sum and product of these fits. */
	if (e->nr_sectors > UINT64_MAX / r->ss || e->sector > UINT64_MAX / r->ss - e->nr_sectors)
		return "sectors beyond any disk";
	return NULL;
}

/* Index every entry the super block counts. Return: 0 or TD_REPLAY_BAD_INPUT. */
int td_replay_read_entries(struct td_replay *r)
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
int td_replay_choose_range(struct td_replay *r)
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
uint64_t td_replay_pos_after(const struct td_replay *r, const struct td_replay_ent *x)
{
	return (x->off + r->ss + td_wlog_entry_data_sectors(&x->e) * r->ss) / r->ss;
}
