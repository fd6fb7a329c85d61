/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wcache_int.h - what the write cache's files share: the cache, its lines, and the helpers that
 * find, walk and drop lines (the design, states and invariants are at the top of wcache.c).
 *
 *   wcache.c            the line tree, read, the cached write, SEEK_DATA, create and destroy;
 *   wcache_writeback.c  backend writes that pin lines busy: write-back (eviction and flush)
 *                       and write-through (FUA and oversized writes, discard, write zeroes);
 *   wcache_powerfail.c  the power failure and its counts of lost and kept writes.
 *
 * Names here start with td_wc_, apart from the public td_wcache_ ones.
 *
 * LOCKING: wc->lock guards every field not marked immutable. Functions named _locked expect it
 * held (and return with it held, even those that drop it for a while); the others take it.
 */
#ifndef TAGDISK_WCACHE_INT_H
#define TAGDISK_WCACHE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include "common/compiler.h"
#include "common/list.h"
#include "common/lock.h"
#include "common/rbtree.h"
#include "tagdisk/drive.h"
#include "tagdisk/types.h"
#include "tagdisk/wcache.h"

#define TD_WC_LINE_SECTORS (TD_WCACHE_LINE / TD_SECTOR_SIZE)

_Static_assert(TD_WC_LINE_SECTORS == 8, "a line's sector mask is one byte");

/* A cache line: every field but the index is guarded by wc->lock. */
struct td_wc_line {
	struct td_rb_node node; /* wc->lines, by index */
	struct td_list age;	/* wc->age, oldest first */
	uint64_t index;		/* immutable */
	uint64_t seq;		/* last write that touched the line */
	uint8_t valid;		/* sectors held */
	uint8_t redirtied;	/* busy: sectors written since its owner copied or claimed it */
	bool busy;		/* see the top of wcache.c */
	uint8_t data[TD_WCACHE_LINE];
};

struct td_wcache {
	struct td_mutex lock;
	struct td_cond idle; /* a line stopped being busy, or a power failure ended */
	struct td_backend be;
	uint64_t capacity;	   /* immutable */
	uint64_t max_lines;	   /* immutable */
	struct td_rb_root lines;   /* lock */
	struct td_list age;	   /* lock */
	uint64_t nr_lines;	   /* lock */
	uint64_t nr_busy;	   /* lock */
	unsigned int pf_waiting;   /* lock: power failures waiting for nr_busy to reach 0 */
	uint64_t next_seq;	   /* lock */
	struct td_wcache_stats st; /* lock */
};

/* Return: how many sectors @mask holds. */
static inline unsigned int td_wc_popcount8(uint8_t mask)
{
	return (unsigned int)__builtin_popcount(mask);
}

/* Return: the sectors of line @index that lie in sectors [@first, @end). */
static inline uint8_t td_wc_range_mask(uint64_t index, uint64_t first, uint64_t end)
{
	uint64_t lo = index * TD_WC_LINE_SECTORS;
	uint64_t s = TD_MAX(first, lo);
	uint64_t e = TD_MIN(end, lo + TD_WC_LINE_SECTORS);

	if (s >= e)
		return 0;
	return (uint8_t)(((1U << (e - s)) - 1) << (s - lo));
}

/* Find the run of set bits in @mask at or after bit *@s: [*@s, *@e). Return: false if none. */
static inline bool td_wc_next_run(uint8_t mask, unsigned int *s, unsigned int *e)
{
	while (*s < TD_WC_LINE_SECTORS && !(mask & (1U << *s)))
		(*s)++;
	if (*s == TD_WC_LINE_SECTORS)
		return false;
	*e = *s;
	while (*e < TD_WC_LINE_SECTORS && (mask & (1U << *e)))
		(*e)++;
	return true;
}

/* Return: the line of tree node @n, or NULL for NULL. */
static inline struct td_wc_line *td_wc_line_of(struct td_rb_node *n)
{
	return n ? td_rb_entry(n, struct td_wc_line, node) : NULL;
}

/* Return: the line after @l in index order, or NULL. wc->lock held. */
static inline struct td_wc_line *td_wc_line_next(struct td_wc_line *l)
{
	return td_wc_line_of(td_rb_next(&l->node));
}

/* wcache.c */

/* Return: the line with the smallest index at or above @index, or NULL. wc->lock held. */
struct td_wc_line *td_wc_line_ceil_locked(struct td_wcache *wc, uint64_t index) td_nonnull(1);

/* Return: the line of index @index, or NULL. wc->lock held. */
struct td_wc_line *td_wc_line_find_locked(struct td_wcache *wc, uint64_t index) td_nonnull(1);

/* The lines holding sectors of [first, end), in sector order; the body may free @l. Lock held. */
#define td_wc_for_each_line_in(wc, l, nxt, first, end)                                         \
	for (l = td_wc_line_ceil_locked(wc, (first) / TD_WC_LINE_SECTORS);                     \
	     l && l->index * TD_WC_LINE_SECTORS < (end) && ((nxt = td_wc_line_next(l)), true); \
	     l = nxt)

/* Unlink and free the idle line @l, taking its sectors off the stats. wc->lock held. */
void td_wc_line_free_locked(struct td_wcache *wc, struct td_wc_line *l) td_nonnull(1, 2);

/* Drop the sectors @mask of the idle line @l; free it when it is left empty. wc->lock held. */
void td_wc_line_clear_locked(struct td_wcache *wc, struct td_wc_line *l, uint8_t mask)
	td_nonnull(1, 2);

/* wcache_writeback.c */

/*
 * Evict old lines until the lines [@lo, @hi] fit (@hi - @lo < max_lines), never evicting one
 * of those. wc->lock held; drops and retakes it. Return: 0 with room made, or the error of a
 * failed eviction (whose lines stay cached).
 */
int td_wc_make_room_locked(struct td_wcache *wc, uint64_t lo, uint64_t hi) td_nonnull(1);

/* An operation that goes to the image without being cached. */
struct td_wc_through {
	enum { TD_WC_THROUGH_WRITE, TD_WC_THROUGH_DISCARD, TD_WC_THROUGH_ZEROES } op;
	const struct iovec *iov; /* TD_WC_THROUGH_WRITE */
	int iovcnt;
	bool fua;
};

/*
 * Apply @t to sectors [@first, @end) of the image, then drop the cached sectors it replaced
 * (those not written again meanwhile). Takes wc->lock; call without it. Return: 0, or a
 * negative errno with the cache as it was.
 */
int td_wc_write_through(struct td_wcache *wc, const struct td_wc_through *t, uint64_t first,
			uint64_t end) td_nonnull(1, 2);

#endif /* TAGDISK_WCACHE_INT_H */
