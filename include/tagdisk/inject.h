/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inject.h - fault injection: errors, hangs and latency, reproducibly.
 *
 * The drive asks the injector about every command as it starts
 * (td_inject_check). Rules:
 *
 *   error   fail commands of an op class (read, write or any; write covers
 *           discard and write zeroes) that overlap [sector, sector + count)
 *           with -EIO, the next @times of them or every one;
 *   every N fail each read, write, discard or write zeroes with probability 1/N, drawn
 *           from a generator seeded with the seed: the same seed and the same
 *           order of commands fail the same commands;
 *   hang    the next @times commands are held by the drive and never
 *           completed (only a reset, or a command timeout, gets them back);
 *   latency delay every command by a fixed time before it starts.
 *
 * Each rule counts how many times it fired. Rules are checked in the order
 * they were added; the first error that fires decides.
 *
 * LOCKING: an internal mutex (last in the global order, tagdisk/queue.h).
 * td_inject_check() costs one relaxed atomic load when nothing is armed.
 */
#ifndef TAGDISK_INJECT_H
#define TAGDISK_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "tagdisk/types.h"

#define TD_INJECT_MAX_RULES 64
#define TD_INJECT_FOREVER   UINT64_MAX /* @times for "every matching command" */

enum td_inject_op {
	TD_INJECT_READ,
	TD_INJECT_WRITE,
	TD_INJECT_ANY,
};

enum td_inject_kind {
	TD_INJECT_ERROR,
	TD_INJECT_EVERY,
	TD_INJECT_HANG,
	TD_INJECT_LATENCY,
};

struct td_inject_rule {
	enum td_inject_kind kind;
	enum td_inject_op op; /* error */
	uint64_t sector;      /* error */
	uint64_t count;	      /* error: sectors */
	uint64_t times_left;  /* error, hang: TD_INJECT_FOREVER or remaining */
	uint32_t every;	      /* every */
	uint32_t latency_us;  /* latency */
	uint64_t fired;
};

struct td_inject_verdict {
	int error;	     /* 0 or -EIO */
	bool hang;
	uint32_t latency_us; /* delay before starting */
};

struct td_inject;

/* Return: an injector with nothing armed, or NULL (errno set). */
struct td_inject *td_inject_create(uint64_t seed) td_warn_unused;
void td_inject_destroy(struct td_inject *inj) td_nonnull(1);

/*
 * Arm an error rule.
 * Return: 0, -EINVAL (@count or @times 0, unknown @op, range overflow), -ENOSPC (too many rules).
 */
int td_inject_add_error(struct td_inject *inj, enum td_inject_op op, uint64_t sector,
			uint64_t count, uint64_t times) td_nonnull(1);
/* Fail one command in @n at random (@n >= 1; replaces an earlier every rule). Return: 0 or -EINVAL. */
int td_inject_set_every(struct td_inject *inj, uint32_t n) td_nonnull(1);
/* Hold the next @times commands (>= 1). Return: 0, -EINVAL, -ENOSPC. */
int td_inject_add_hang(struct td_inject *inj, uint64_t times) td_nonnull(1);
/* Delay every command by @us microseconds (0 removes it). */
void td_inject_set_latency(struct td_inject *inj, uint32_t us) td_nonnull(1);
/* Restart the random generator from @seed. */
void td_inject_set_seed(struct td_inject *inj, uint64_t seed) td_nonnull(1);
/* Return: the current seed. */
uint64_t td_inject_seed(struct td_inject *inj) td_nonnull(1);
/* Disarm every rule (the seed stays). */
void td_inject_clear(struct td_inject *inj) td_nonnull(1);

/*
 * Copy up to @max rules (armed ones, and spent ones with their fired count)
 * into @out, errors and hangs in the order added, then every, then latency.
 * Return: the number of rules, which may exceed @max (then only @max were copied).
 */
size_t td_inject_list(struct td_inject *inj, struct td_inject_rule *out, size_t max)
	td_nonnull(1);

/*
 * Decide what happens to a command starting now. Flushes only match hang and
 * latency. Hang wins: a held command is not also failed (no error rule is spent on it).
 */
void td_inject_check(struct td_inject *inj, enum td_op op, uint64_t sector, uint32_t nr_sectors,
		     struct td_inject_verdict *v) td_nonnull(1, 5);

/* Return: static names ("read", "write", "any"; "error", "every", "hang", "latency"). */
const char *td_inject_op_name(enum td_inject_op op);
const char *td_inject_kind_name(enum td_inject_kind kind);

#endif /* TAGDISK_INJECT_H */
