// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wcache.c - the volatile write cache: its lines, read, cached write, SEEK_DATA, life cycle.
 *
 * Lines sit in a red-black tree by index (offset / TD_WCACHE_LINE), so range operations, flush
 * and SEEK_DATA walk them in sector order, and on an age list, oldest first: a write that
 * touches a line moves it to the end. Each line holds a bitmask of the 512-byte sectors it has
 * and the sequence number of the last write that touched it, which is how a power failure
 * counts the writes it lost.
 *
 * Backend I/O runs without the cache lock, so that a read never waits for a write-back it has
 * nothing to do with. A line is in one of two states:
 *
 *   idle   anyone holding the lock may write into it, write it back, drop its sectors or free it;
 *   busy   one owner has backend I/O in flight that depends on it: a write-back of a copy of
 *          its data, or a write-through over its sectors. Writes still go into it and mark what
 *          they touch in ->redirtied; reads copy from it; only the owner writes it back, drops
 *          its sectors or frees it. Whoever else needs that waits on wc->idle.
 *
 * Invariants, with the lock held:
 *  - Every sector a completed write put in the cache is in the cache or on the image: a line
 *    gives up sectors only once the backend acknowledged them. Writing back copies the line
 *    (redirtied = 0), writes the copy, then drops the sectors not redirtied meanwhile. So a
 *    read that copies the cached sectors of its range under the lock, then reads the image
 *    without it, sees every write that completed before it.
 *  - One backend write at most depends on a line at a time (busy), so two copies of a line
 *    never land in the wrong order, and a discard or write-through never lands under an
 *    older copy that is still in flight: they wait until no line of their range is busy.
 *  - Nobody waits while owning a busy line, so nobody deadlocks on them.
 *  - A write goes into the lines in one go, under the lock, after room was made for it and
 *    its new lines were allocated: it is applied whole or not at all.
 *  - A power failure happens while no line is busy (it waits, and holds back new write-backs
 *    meanwhile), and holds the lock throughout: the drive is dead while it happens.
 *
 * Data moves between a command's iovec and the lines with a small cursor that walks the
 * iovec by byte offset.
 *
 * Where the parts live: this file has the line tree, read, the cached write, SEEK_DATA and the
 * life cycle; wcache_writeback.c the busy lines' owners, write-back (eviction and flush) and
 * write-through (FUA and oversized writes, discard, write zeroes); wcache_powerfail.c the power
 * failure and its counts of lost and kept writes. wcache_int.h holds the cache, its lines and
 * the helpers those files share.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "common/list.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/rbtree.h"
#include "tagdisk/types.h"
#include "tagdisk/wcache.h"
#include "wcache_int.h"

#define LOST_RANGES_LOGGED 32 /* td_wcache_destroy() names this many lost ranges, then counts */

/* ---- iovec cursor ---------------------------------------------------------------------- */

/* Copy @n bytes between @buf and the iovec at byte @off (to the iovec when @to_iov). */
static void iov_copy(const struct iovec *iov, int iovcnt, uint64_t off, void *buf, size_t n,
		     bool to_iov)
{
	uint8_t *p = buf;

	for (int i = 0; i < iovcnt && n; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t chunk = TD_MIN(n, iov[i].iov_len - (size_t)off);
		uint8_t *base = (uint8_t *)iov[i].iov_base + off;

		if (to_iov)
			memcpy(base, p, chunk);
		else
			memcpy(p, base, chunk);
		p += chunk;
		n -= chunk;
		off = 0;
	}
	assert(n == 0);
}

static uint64_t iov_total(const struct iovec *iov, int iovcnt)
{
	uint64_t len = 0;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	return len;
}

/* ---- lines ----------------------------------------------------------------------------- */

/* Return: the line with the smallest index at or above @index, or NULL. */
struct td_wc_line *td_wc_line_ceil_locked(struct td_wcache *wc, uint64_t index)
{
	struct td_rb_node *n = wc->lines.node;
	struct td_rb_node *best = NULL;

	while (n) {
		if (td_wc_line_of(n)->index >= index) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return td_wc_line_of(best);
}

struct td_wc_line *td_wc_line_find_locked(struct td_wcache *wc, uint64_t index)
{
	struct td_wc_line *l = td_wc_line_ceil_locked(wc, index);

	return l && l->index == index ? l : NULL;
}

static void line_insert_locked(struct td_wcache *wc, struct td_wc_line *l)
{
	struct td_rb_node **link = &wc->lines.node;
	struct td_rb_node *parent = NULL;

	while (*link) {
		parent = *link;
		link = l->index < td_wc_line_of(parent)->index ? &parent->left : &parent->right;
	}
	td_rb_insert(&wc->lines, &l->node, parent, link);
	td_list_add_tail(&l->age, &wc->age);
	wc->nr_lines++;
}

void td_wc_line_free_locked(struct td_wcache *wc, struct td_wc_line *l)
{
	assert(!l->busy);
	wc->st.cached_bytes -= (uint64_t)td_wc_popcount8(l->valid) * TD_SECTOR_SIZE;
	td_rb_erase(&wc->lines, &l->node);
	td_list_del(&l->age);
	wc->nr_lines--;
	free(l);
}

/* Drop the sectors @mask of the idle line @l; free it when it is left empty. */
void td_wc_line_clear_locked(struct td_wcache *wc, struct td_wc_line *l, uint8_t mask)
{
	assert(!l->busy);
	mask &= l->valid;
	wc->st.cached_bytes -= (uint64_t)td_wc_popcount8(mask) * TD_SECTOR_SIZE;
	l->valid &= (uint8_t)~mask;
	if (!l->valid)
		td_wc_line_free_locked(wc, l);
}

/*
 * The run of cached sectors that starts at sector *@sp of *@lp (which holds it) may go on into
 * the following lines. Return: the sector just past it; *@lp and *@sp are left at the run's
 * last line and the sector after the run in that line.
 */
static uint64_t run_end_locked(struct td_wc_line **lp, unsigned int *sp)
{
	struct td_wc_line *l = *lp;
	unsigned int s = *sp;

	for (;;) {
		while (s < TD_WC_LINE_SECTORS && (l->valid & (1U << s)))
			s++;
		if (s < TD_WC_LINE_SECTORS)
			break;
		struct td_wc_line *n = td_wc_line_next(l);

		if (!n || n->index != l->index + 1 || !(n->valid & 1))
			break;
		l = n;
		s = 0;
	}
	*lp = l;
	*sp = s;
	return l->index * TD_WC_LINE_SECTORS + s;
}

/* ---- the operations -------------------------------------------------------------------- */

/* Copy the cached sectors of [@first, @end) into the iovec that starts at sector @first. */
static void overlay_locked(struct td_wcache *wc, const struct iovec *iov, int iovcnt,
			   uint64_t first, uint64_t end)
{
	struct td_wc_line *l, *nxt;

	assert(td_lock_held(&wc->lock));
	td_wc_for_each_line_in(wc, l, nxt, first, end) {
		uint8_t m = l->valid & td_wc_range_mask(l->index, first, end);
		unsigned int s = 0, e;

		for (; td_wc_next_run(m, &s, &e); s = e)
			iov_copy(iov, iovcnt,
				 (l->index * TD_WC_LINE_SECTORS + s - first) * TD_SECTOR_SIZE,
				 l->data + s * TD_SECTOR_SIZE, (size_t)(e - s) * TD_SECTOR_SIZE,
				 true);
	}
}

int td_wcache_read(struct td_wcache *wc, const struct iovec *iov, int iovcnt, uint64_t off)
{
	uint64_t len = iov_total(iov, iovcnt);
	uint64_t first = off / TD_SECTOR_SIZE;
	uint64_t end = (off + len) / TD_SECTOR_SIZE;
	uint64_t cached = 0;
	struct td_wc_line *l, *nxt;
	uint64_t *where;
	uint8_t *copy;
	int err;

	if (off % TD_SECTOR_SIZE || len % TD_SECTOR_SIZE)
		return -EINVAL;
	td_mutex_lock(&wc->lock);
	td_wc_for_each_line_in(wc, l, nxt, first, end)
		cached += td_wc_popcount8(l->valid & td_wc_range_mask(l->index, first, end));
	if (!cached) {
		/* Nothing to lay over: the image has the data of every completed write. */
		td_mutex_unlock(&wc->lock);
		return td_backend_read(&wc->be, iov, iovcnt, off);
	}
	if (cached == end - first) {
		overlay_locked(wc, iov, iovcnt, first, end);
		td_mutex_unlock(&wc->lock);
		return 0;
	}
	/* Copy the cached sectors now, read the rest of the range without the lock. */
	copy = malloc(cached * TD_SECTOR_SIZE);
	where = malloc(cached * sizeof(*where));
	if (!copy || !where) {
		free(copy);
		free(where);
		err = td_backend_read(&wc->be, iov, iovcnt, off);
		if (!err)
			overlay_locked(wc, iov, iovcnt, first, end);
		td_mutex_unlock(&wc->lock);
		return err;
	}
	uint64_t n = 0;

	td_wc_for_each_line_in(wc, l, nxt, first, end) {
		uint8_t m = l->valid & td_wc_range_mask(l->index, first, end);
		unsigned int s = 0, e;

		for (; td_wc_next_run(m, &s, &e); s = e) {
			memcpy(copy + n * TD_SECTOR_SIZE, l->data + s * TD_SECTOR_SIZE,
			       (size_t)(e - s) * TD_SECTOR_SIZE);
			for (unsigned int i = s; i < e; i++)
				where[n++] = l->index * TD_WC_LINE_SECTORS + i - first;
		}
	}
	assert(n == cached);
	td_mutex_unlock(&wc->lock);

	err = td_backend_read(&wc->be, iov, iovcnt, off);
	for (uint64_t i = 0; !err && i < n;) {
		uint64_t k = 1;

		while (i + k < n && where[i + k] == where[i] + k)
			k++;
		iov_copy(iov, iovcnt, where[i] * TD_SECTOR_SIZE, copy + i * TD_SECTOR_SIZE,
			 k * TD_SECTOR_SIZE, true);
		i += k;
	}
	free(copy);
	free(where);
	return err;
}

/* Put [@first, @end) into the cache, all or nothing; room has been made. */
static int apply_write_locked(struct td_wcache *wc, const struct iovec *iov, int iovcnt,
			      uint64_t first, uint64_t end)
{
	struct td_list fresh = TD_LIST_INIT(fresh);
	uint64_t lo = first / TD_WC_LINE_SECTORS;
	uint64_t hi = (end - 1) / TD_WC_LINE_SECTORS;
	uint64_t seq = wc->next_seq + 1;

	assert(td_lock_held(&wc->lock));
	for (uint64_t li = lo; li <= hi; li++) {
		if (td_wc_line_find_locked(wc, li))
			continue;
		struct td_wc_line *l = malloc(sizeof(*l));

		if (!l) {
			while (!td_list_empty(&fresh)) {
				l = td_list_first_entry(&fresh, struct td_wc_line, age);
				td_list_del(&l->age);
				free(l);
			}
			return -ENOMEM;
		}
		td_list_add_tail(&l->age, &fresh);
	}
	wc->next_seq = seq;
	for (uint64_t li = lo; li <= hi; li++) {
		struct td_wc_line *l = td_wc_line_find_locked(wc, li);

		if (!l) {
			l = td_list_first_entry(&fresh, struct td_wc_line, age);
			td_list_del(&l->age);
			l->index = li;
			l->valid = 0;
			l->redirtied = 0;
			l->busy = false;
			line_insert_locked(wc, l);
		}
		uint8_t m = td_wc_range_mask(li, first, end);
		unsigned int s = 0, e;

		for (; td_wc_next_run(m, &s, &e); s = e)
			iov_copy(iov, iovcnt,
				 (li * TD_WC_LINE_SECTORS + s - first) * TD_SECTOR_SIZE,
				 l->data + s * TD_SECTOR_SIZE, (size_t)(e - s) * TD_SECTOR_SIZE,
				 false);
		wc->st.cached_bytes +=
			(uint64_t)td_wc_popcount8(m & (uint8_t)~l->valid) * TD_SECTOR_SIZE;
		l->valid |= m;
		if (l->busy)
			l->redirtied |= m;
		l->seq = seq;
		td_list_move_tail(&l->age, &wc->age);
	}
	assert(td_list_empty(&fresh));
	wc->st.writes++;
	return 0;
}

int td_wcache_write(struct td_wcache *wc, const struct iovec *iov, int iovcnt, uint64_t off,
		    bool fua)
{
	uint64_t len = iov_total(iov, iovcnt);
	uint64_t first = off / TD_SECTOR_SIZE;
	uint64_t end = first + len / TD_SECTOR_SIZE;
	int err;

	if (off % TD_SECTOR_SIZE || len % TD_SECTOR_SIZE)
		return -EINVAL;
	if (!len)
		return 0;
	uint64_t lo = first / TD_WC_LINE_SECTORS;
	uint64_t hi = (end - 1) / TD_WC_LINE_SECTORS;

	/* FUA, or more than the cache holds: to the image, and the cache must not shadow it. */
	if (fua || hi - lo + 1 > wc->max_lines) {
		struct td_wc_through t = {
			.op = TD_WC_THROUGH_WRITE, .iov = iov, .iovcnt = iovcnt, .fua = fua
		};

		return td_wc_write_through(wc, &t, first, end);
	}
	td_mutex_lock(&wc->lock);
	err = td_wc_make_room_locked(wc, lo, hi);
	if (!err)
		err = apply_write_locked(wc, iov, iovcnt, first, end);
	td_mutex_unlock(&wc->lock);
	return err;
}

bool td_wcache_next_cached(struct td_wcache *wc, uint64_t off, uint64_t *start, uint64_t *end)
{
	uint64_t sector = off / TD_SECTOR_SIZE;
	bool found = false;
	struct td_wc_line *l;

	td_mutex_lock(&wc->lock);
	for (l = td_wc_line_ceil_locked(wc, sector / TD_WC_LINE_SECTORS); l;
	     l = td_wc_line_next(l)) {
		uint8_t m = l->valid & td_wc_range_mask(l->index, sector, UINT64_MAX);
		unsigned int s = 0, e;

		if (!td_wc_next_run(m, &s, &e))
			continue;
		*start = (l->index * TD_WC_LINE_SECTORS + s) * TD_SECTOR_SIZE;
		*end = run_end_locked(&l, &s) * TD_SECTOR_SIZE;
		found = true;
		break;
	}
	td_mutex_unlock(&wc->lock);
	return found;
}

/* ---- life cycle ------------------------------------------------------------------------ */

void td_wcache_get_stats(struct td_wcache *wc, struct td_wcache_stats *st)
{
	td_mutex_lock(&wc->lock);
	*st = wc->st;
	st->lines = wc->nr_lines;
	td_mutex_unlock(&wc->lock);
}

struct td_wcache *td_wcache_create(const struct td_backend *be, uint64_t capacity,
				   uint64_t cache_size)
{
	struct td_wcache *wc = calloc(1, sizeof(*wc));

	if (!wc)
		return NULL;
	wc->be = *be;
	wc->capacity = capacity;
	wc->max_lines = TD_MAX(cache_size / TD_WCACHE_LINE, 1);
	wc->lines = (struct td_rb_root)TD_RB_ROOT_INIT;
	td_list_init(&wc->age);
	td_mutex_init(&wc->lock);
	td_cond_init(&wc->idle);
	return wc;
}

uint64_t td_wcache_destroy(struct td_wcache *wc)
{
	uint64_t lost = 0, ranges = 0;
	struct td_wc_line *l;
	unsigned int s;

	td_mutex_lock(&wc->lock);
	assert(!wc->nr_busy);
	/* Count first, so the summary comes before the ranges. */
	for (l = td_wc_line_of(td_rb_first(&wc->lines)), s = 0; l;) {
		unsigned int e;

		if (!td_wc_next_run(l->valid, &s, &e)) {
			l = td_wc_line_next(l);
			s = 0;
			continue;
		}
		uint64_t start = l->index * TD_WC_LINE_SECTORS + s;

		lost += (run_end_locked(&l, &s) - start) * TD_SECTOR_SIZE;
		ranges++;
	}
	if (lost)
		td_err("write cache: %" PRIu64 " bytes in %" PRIu64
		       " ranges were never written back to the image and are lost",
		       lost, ranges);
	uint64_t logged = 0;

	for (l = td_wc_line_of(td_rb_first(&wc->lines)), s = 0; l && logged < LOST_RANGES_LOGGED;) {
		unsigned int e;

		if (!td_wc_next_run(l->valid, &s, &e)) {
			l = td_wc_line_next(l);
			s = 0;
			continue;
		}
		uint64_t start = (l->index * TD_WC_LINE_SECTORS + s) * TD_SECTOR_SIZE;
		uint64_t end = run_end_locked(&l, &s) * TD_SECTOR_SIZE;

		td_err("write cache: lost bytes %" PRIu64 "-%" PRIu64 " (%" PRIu64 " bytes)",
		       start, end - 1, end - start);
		logged++;
	}
	if (ranges > logged)
		td_err("write cache: and %" PRIu64 " more lost ranges", ranges - logged);
	while (!td_list_empty(&wc->age))
		td_wc_line_free_locked(wc, td_list_first_entry(&wc->age, struct td_wc_line, age));
	td_mutex_unlock(&wc->lock);
	td_cond_destroy(&wc->idle);
	td_mutex_destroy(&wc->lock);
	free(wc);
	return lost;
}
