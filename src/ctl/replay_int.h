/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * replay_int.h - what the parts of tagdisk-replay's work (replay.h) share:
 * the run, the index of the log's entries, and the calls between the files.
 *
 *   replay.c        td_replay_run(): the usage checks, the target (opening
 *                   it, applying an entry), the replay loop, messages;
 *   replay_log.c    the log: its super block, the index of its entries, the
 *                   marks, and the range of entries a run replays;
 *   replay_check.c  checks: running the --fsck command, when one is due,
 *                   and the crash states of a flush epoch.
 *
 * The index holds, per entry, its decoded header and where it sits in the log
 * file; data is read from the log when it is applied, a MiB at a time.
 *
 * LOCKING: none; one thread (replay.h).
 */
#ifndef TAGDISK_REPLAY_INT_H
#define TAGDISK_REPLAY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/compiler.h"
#include "common/wlog_fmt.h"
#include "ctl/replay.h"

#define TD_REPLAY_CHUNK (1U << 20) /* bytes read from the log at a time */

struct td_replay_ent {
	struct td_wlog_entry e;
	uint64_t off; /* byte offset of the header sector in the log */
	char *mark;   /* MARK: its name */
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

/* replay.c */
/* Print "tagdisk-replay: " and the message to the run's error stream. */
void td_replay_say(struct td_replay *r, const char *fmt, ...) td_printf(2, 3);
/* pread(2) or pwrite(2) of all @len bytes, retried over short counts. Return: false, errno set. */
bool td_replay_pread(int fd, void *buf, size_t len, uint64_t off);
bool td_replay_pwrite(int fd, const void *buf, size_t len, uint64_t off);
/* Return: true when entry @x changes the target (a write or a discard not skipped). */
bool td_replay_changes_data(const struct td_replay *r, const struct td_replay_ent *x);
/* Apply entry @i to the target. Return: 0 or TD_REPLAY_IO_ERROR (said why). */
int td_replay_apply(struct td_replay *r, uint64_t i);

/* replay_log.c: each Return: 0 or TD_REPLAY_BAD_INPUT (said why). */
/* Open the log and check its super block. */
int td_replay_read_super(struct td_replay *r);
/* Index every entry the super block counts. */
int td_replay_read_entries(struct td_replay *r);
/* Settle [first, end) from the options. */
int td_replay_choose_range(struct td_replay *r);
/* Return: the log sector just past entry @x (header and data), as replay-log counts it. */
uint64_t td_replay_pos_after(const struct td_replay *r, const struct td_replay_ent *x);

/* replay_check.c */
/*
 * Sync the target and run the check command on it, @i being the last entry
 * applied and @state what the target holds. Return: 0 when it passed,
 * TD_REPLAY_CHECK_FAILED with *@why saying how it failed, or TD_REPLAY_IO_ERROR.
 */
int td_replay_run_check(struct td_replay *r, uint64_t i, const char *state, char *why,
			size_t len);
/* Return: whether --check asks for a check after entry @x, the @count'th replayed. */
bool td_replay_check_due(const struct td_replay *r, const struct td_replay_ent *x,
			 uint64_t count);
/*
 * Build and check the crash states of the epoch [@es, @ee), the target holding
 * the disk as it was at its start. Return: 0 when every state passed (the
 * target as it was), else the status (a failed state is left on the target).
 */
int td_replay_crash_epoch(struct td_replay *r, uint64_t es, uint64_t ee);

#endif /* TAGDISK_REPLAY_INT_H */
