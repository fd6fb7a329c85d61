/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rangelock.h - shared/exclusive locks on ranges of the disk.
 *
 * Makes read-modify-write safe: every write-like byte I/O holds its aligned
 * range shared from submission to completion, and a read-modify-write holds
 * its range exclusively from its read to the end of its write. Shared
 * holders never wait for each other; an exclusive request waits for every
 * overlapping holder, and shared requests overlapping a waiting or holding
 * exclusive one wait behind it (so RMW cannot starve).
 *
 * Shared lock and unlock are O(number of exclusive ranges held or waiting),
 * which is zero unless unaligned writes are running. Unlock may be called
 * from any thread (completion threads release what submitters took).
 *
 * The caller provides the struct td_range, which stays linked in the lock
 * while held and must not move. LOCKING: an internal mutex, taken after the
 * queue lock in the global order (tagdisk/queue.h) but never held across
 * I/O.
 */
#ifndef TAGDISK_RANGELOCK_H
#define TAGDISK_RANGELOCK_H

#include <stdbool.h>
#include <stdint.h>
#include "common/compiler.h"
#include "common/list.h"

struct td_range {
	struct td_list link;
	uint64_t start; /* byte offsets, [start, end) */
	uint64_t end;
	bool exclusive;
	bool granted;
};

struct td_rangelock;

/* Return: a new lock, or NULL (errno set). */
struct td_rangelock *td_rangelock_create(void) td_warn_unused;
/* Destroy @rl; nothing may be held. */
void td_rangelock_destroy(struct td_rangelock *rl) td_nonnull(1);

/* Take [@start, @end) shared or exclusive in @r, waiting for conflicts to clear. */
void td_range_lock(struct td_rangelock *rl, struct td_range *r, uint64_t start, uint64_t end,
		   bool exclusive) td_nonnull(1, 2);
/* Release @r, waking waiters it blocked. */
void td_range_unlock(struct td_rangelock *rl, struct td_range *r) td_nonnull(1, 2);

#endif /* TAGDISK_RANGELOCK_H */
