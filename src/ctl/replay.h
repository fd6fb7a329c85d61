/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * replay.h - tagdisk-replay: rebuild a disk from a write log (the format of
 * common/wlog_fmt.h, written by tagdiskd or by Linux's dm-log-writes) as it
 * was at any entry, mark, flush or FUA write, checking states on the way,
 * and crash states inside a flush epoch. Its options are those of xfstests'
 * replay-log (docs/tagdisk-replay.8), plus --crash-states and --seed.
 *
 * The run has two passes. The first reads every entry header of the log and
 * checks the whole request against the log and the target: the log's super
 * block, each entry lying within the file, the marks asked for, the target's
 * size (the disk's own size when the log records it, else large enough for
 * every entry replayed). Any problem is one message and exit status 2, with
 * nothing written to the target. The second pass replays.
 *
 * Replay: entries are applied in order from the start (entry 0, --start-entry
 * or after --start-mark) to the end (the last entry, --limit entries, the
 * entry --end-mark names, the next flush or FUA write); the target must hold
 * the disk as it was when that start entry was logged (for entry 0: when the
 * log started). A write writes its data, a discard writes zeroes (on a regular
 * file it punches a hole), flushes and marks write nothing. --check runs the
 * --fsck command (sh -c) after each flush, FUA write, mark, or every N
 * entries, with the target synced first, and stops at the first that fails,
 * leaving the target in that state. The command sees TD_REPLAY_TARGET,
 * TD_REPLAY_ENTRY (the entry just applied), TD_REPLAY_FLUSHES (flush entries
 * applied so far), TD_REPLAY_MARK (the last mark applied, or "") and
 * TD_REPLAY_STATE ("prefix", or "crash I/K" for a crash state).
 *
 * Crash states (--crash-states K): a flush epoch is the run of entries after
 * a flush (or the start) up to the next flush (or the end); a disk with a
 * volatile cache that loses power inside it may have made durable any subset
 * of the epoch's writes. Before the epoch is replayed, up to K distinct such
 * subsets are built on the target and checked: each picks a crash point in
 * the epoch, keeps every FUA write before it (durable when it completed) and
 * each other write or discard before it with probability 1/2, and applies
 * the kept ones in log order (so of two overlapping writes both kept, the
 * later wins). Its check sees TD_REPLAY_ENTRY = the crash point's entry and
 * TD_REPLAY_MARK = the last mark before it: what that mark vouched for (an
 * fsync had returned) must survive the crash. The target is restored after
 * each state that passes. The
 * choices come from --seed and the epoch's first entry number: the same log
 * and seed give the same states.
 *
 * Exit status: 0 done (every check passed); 1 a check failed (its entry on
 * stderr); 2 bad usage or bad input (log, marks, target); 3 an I/O error
 * while replaying (the target is left part-way).
 *
 * LOCKING: none; one thread.
 */
#ifndef TAGDISK_REPLAY_H
#define TAGDISK_REPLAY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "common/compiler.h"

enum td_replay_check {
	TD_REPLAY_CHECK_NONE,
	TD_REPLAY_CHECK_FLUSH,
	TD_REPLAY_CHECK_FUA,
	TD_REPLAY_CHECK_MARK,
	TD_REPLAY_CHECK_EVERY, /* every check_every entries */
};

enum td_replay_status {
	TD_REPLAY_OK = 0,
	TD_REPLAY_CHECK_FAILED = 1,
	TD_REPLAY_BAD_INPUT = 2,
	TD_REPLAY_IO_ERROR = 3,
};

struct td_replay_opts {
	const char *log;	 /* required */
	const char *target;	 /* NULL: report on the log, replay nothing */
	uint64_t limit;		 /* replay this many entries; 0: no limit */
	uint64_t start_entry;
	const char *start_mark;	 /* start after this mark (then start_entry is ignored) */
	const char *end_mark;	 /* stop after this mark */
	bool next_flush;	 /* stop after the next flush */
	bool next_fua;		 /* stop after the next FUA write */
	bool find;		 /* print where the run would stop ("ENTRY@SECTOR"), replay nothing */
	bool num_entries;	 /* print the number of entries, replay nothing */
	bool no_discard;	 /* skip discards */
	const char *fsck;	 /* the check command */
	enum td_replay_check check;
	uint64_t check_every;
	uint64_t start_sector;	 /* replay only entries that touch [start_sector, end_sector] */
	uint64_t end_sector;	 /* UINT64_MAX: no bound */
	unsigned int crash_states; /* per flush epoch; 0: none */
	uint64_t seed;
	unsigned int verbose;	 /* 1: each entry replayed; 2: skipped ones too */
	FILE *out;		 /* reports (find, num-entries, -v); NULL: stdout */
	FILE *err;		 /* messages; NULL: stderr */
};

/* Fill @o with the defaults (no bounds, seed 1, end_sector UINT64_MAX). */
void td_replay_opts_default(struct td_replay_opts *o) td_nonnull(1);

/* Do what @o asks. Return: an enum td_replay_status, the exit status. */
int td_replay_run(const struct td_replay_opts *o) td_nonnull(1);

#endif /* TAGDISK_REPLAY_H */
