// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wcache.c - the volatile write cache.
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
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "common/list.h"
#include "common/lock.h"
#include "common/log.h"
#include "common/random.h"
#include "common/rbtree.h"
#include "tagdisk/types.h"
#include "tagdisk/wcache.h"

#define SECTORS_PER_LINE   (TD_WCACHE_LINE / TD_SECTOR_SIZE)
#define BATCH_LINES	   256 /* lines copied and written back per step without the lock: 1 MiB */
#define LOST_RANGES_LOGGED 32  /* td_wcache_destroy() names this many lost ranges, then counts */

_Static_assert(SECTORS_PER_LINE == 8, "a line's sector mask is one byte");

/* A cache line: every field but the index is guarded by wc->lock. */
struct line {
	struct td_rb_node node; /* wc->lines, by index */
	struct td_list age;	/* wc->age, oldest first */
	uint64_t index;		/* immutable */
	uint64_t seq;		/* last write that touched the line */
	uint8_t valid;		/* sectors held */
	uint8_t redirtied;	/* busy: sectors written since its owner copied or claimed it */
	bool busy;		/* see the top of the file */
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

static unsigned int popcount8(uint8_t mask)
{
	return (unsigned int)__builtin_popcount(mask);
}

/* Return: the sectors of line @index that lie in sectors [@first, @end). */
static uint8_t range_mask(uint64_t index, uint64_t first, uint64_t end)
{
	uint64_t lo = index * SECTORS_PER_LINE;
	uint64_t s = TD_MAX(first, lo);
	uint64_t e = TD_MIN(end, lo + SECTORS_PER_LINE);

	if (s >= e)
		return 0;
	return (uint8_t)(((1U << (e - s)) - 1) << (s - lo));
}

/* Find the run of set bits in @mask at or after bit *@s: [*@s, *@e). Return: false if none. */
static bool next_run(uint8_t mask, unsigned int *s, unsigned int *e)
{
	while (*s < SECTORS_PER_LINE && !(mask & (1U << *s)))
		(*s)++;
	if (*s == SECTORS_PER_LINE)
		return false;
	*e = *s;
	while (*e < SECTORS_PER_LINE && (mask & (1U << *e)))
		(*e)++;
	return true;
}

static struct line *line_of(struct td_rb_node *n)
{
	return n ? td_rb_entry(n, struct line, node) : NULL;
}

/* Return: the line with the smallest index at or above @index, or NULL. */
static struct line *line_ceil_locked(struct td_wcache *wc, uint64_t index)
{
	struct td_rb_node *n = wc->lines.node;
	struct td_rb_node *best = NULL;

	while (n) {
		if (line_of(n)->index >= index) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return line_of(best);
}

static struct line *line_find_locked(struct td_wcache *wc, uint64_t index)
{
	struct line *l = line_ceil_locked(wc, index);

	return l && l->index == index ? l : NULL;
}

static struct line *line_next(struct line *l)
{
	return line_of(td_rb_next(&l->node));
}

/* The lines holding sectors of [first, end), in sector order; the body may free @l. */
#define for_each_line_in(wc, l, nxt, first, end)                                       \
	for (l = line_ceil_locked(wc, (first) / SECTORS_PER_LINE);                      \
	     l && l->index * SECTORS_PER_LINE < (end) && ((nxt = line_next(l)), true); \
	     l = nxt)

static void line_insert_locked(struct td_wcache *wc, struct line *l)
{
	struct td_rb_node **link = &wc->lines.node;
	struct td_rb_node *parent = NULL;

	while (*link) {
		parent = *link;
		link = l->index < line_of(parent)->index ? &parent->left : &parent->right;
	}
	td_rb_insert(&wc->lines, &l->node, parent, link);
	td_list_add_tail(&l->age, &wc->age);
	wc->nr_lines++;
}

static void line_free_locked(struct td_wcache *wc, struct line *l)
{
	assert(!l->busy);
	wc->st.cached_bytes -= (uint64_t)popcount8(l->valid) * TD_SECTOR_SIZE;
	td_rb_erase(&wc->lines, &l->node);
	td_list_del(&l->age);
	wc->nr_lines--;
	free(l);
}

/* Drop the sectors @mask of the idle line @l; free it when it is left empty. */
static void line_clear_locked(struct td_wcache *wc, struct line *l, uint8_t mask)
{
	assert(!l->busy);
	mask &= l->valid;
	wc->st.cached_bytes -= (uint64_t)popcount8(mask) * TD_SECTOR_SIZE;
	l->valid &= (uint8_t)~mask;
	if (!l->valid)
		line_free_locked(wc, l);
}

static void line_claim_locked(struct td_wcache *wc, struct line *l)
{
	assert(!l->busy);
	l->busy = true;
	l->redirtied = 0;
	wc->nr_busy++;
}

static void line_release_locked(struct td_wcache *wc, struct line *l)
{
	assert(l->busy);
	l->busy = false;
	wc->nr_busy--;
}

/*
 * The run of cached sectors that starts at sector *@sp of *@lp (which holds it) may go on into
 * the following lines. Return: the sector just past it; *@lp and *@sp are left at the run's
 * last line and the sector after the run in that line.
 */
static uint64_t run_end_locked(struct line **lp, unsigned int *sp)
{
	struct line *l = *lp;
	unsigned int s = *sp;

	for (;;) {
		while (s < SECTORS_PER_LINE && (l->valid & (1U << s)))
			s++;
		if (s < SECTORS_PER_LINE)
			break;
		struct line *n = line_next(l);

		if (!n || n->index != l->index + 1 || !(n->valid & 1))
			break;
		l = n;
		s = 0;
	}
	*lp = l;
	*sp = s;
	return l->index * SECTORS_PER_LINE + s;
}

/* Return: whether a line holding sectors of [@first, @end) is busy. */
static bool range_busy_locked(struct td_wcache *wc, uint64_t first, uint64_t end)
{
	struct line *l, *nxt;

	for_each_line_in(wc, l, nxt, first, end)
		if (l->busy)
			return true;
	return false;
}

static int line_cmp(const void *a, const void *b)
{
	const struct line *x = *(struct line *const *)a;
	const struct line *y = *(struct line *const *)b;

	return x->index < y->index ? -1 : x->index > y->index;
}

/* ---- write-back ------------------------------------------------------------------------ */

/*
 * Write to the image the copies in @buf of @n busy lines (@lines in index order, slot j of
 * @buf holding @valid[j] of lines[j]), merging runs across adjacent lines. No lock held: only
 * the lines' immutable indices are read. Clears @ok[j] for each line a failed write touched.
 * Return: the first error, or 0; *@written: the bytes written.
 */
static int write_copies(struct td_wcache *wc, struct line *const *lines, const uint8_t *valid,
			uint8_t *buf, size_t n, bool *ok, uint64_t *written)
{
	size_t j = 0;
	unsigned int s = 0;
	int first_err = 0;

	*written = 0;
	while (j < n) {
		if (s == SECTORS_PER_LINE || !(valid[j] & (1U << s))) {
			if (s == SECTORS_PER_LINE) {
				j++;
				s = 0;
			} else {
				s++;
			}
			continue;
		}
		size_t j0 = j;
		unsigned int s0 = s;

		for (;;) {
			s++;
			if (s < SECTORS_PER_LINE) {
				if (!(valid[j] & (1U << s)))
					break;
				continue;
			}
			if (j + 1 == n || lines[j + 1]->index != lines[j]->index + 1 ||
			    !(valid[j + 1] & 1))
				break;
			j++;
			s = 0;
		}
		struct iovec iov = {
			buf + j0 * TD_WCACHE_LINE + s0 * TD_SECTOR_SIZE,
			((j - j0) * SECTORS_PER_LINE + s - s0) * TD_SECTOR_SIZE,
		};
		int err = wc->be.ops->write(wc->be.priv, &iov, 1,
					    lines[j0]->index * TD_WCACHE_LINE + s0 * TD_SECTOR_SIZE,
					    false);

		if (err) {
			if (!first_err)
				first_err = err;
			for (size_t k = j0; k <= j; k++)
				ok[k] = false;
		} else {
			*written += iov.iov_len;
		}
	}
	return first_err;
}

/*
 * Write back @n idle lines (@lines, in index order), BATCH_LINES at a time, each from a copy
 * taken under the lock and written without it. A line that was written back gives up the
 * sectors not written again meanwhile, and is freed when none are left; a line whose write
 * failed stays as it was. Drops and retakes the lock. Return: the first error, or 0;
 * *@freed (if not NULL) counts the lines freed.
 */
static int write_back_locked(struct td_wcache *wc, struct line **lines, size_t n,
			     uint64_t *freed)
{
	uint8_t valid[BATCH_LINES];
	bool ok[BATCH_LINES];
	uint8_t *buf;
	int err = 0;

	assert(td_lock_held(&wc->lock));
	if (!n)
		return 0;
	buf = malloc(TD_MIN(n, (size_t)BATCH_LINES) * TD_WCACHE_LINE);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		line_claim_locked(wc, lines[i]);
	for (size_t start = 0; start < n; start += BATCH_LINES) {
		struct line **b = lines + start;
		size_t cnt = TD_MIN(n - start, (size_t)BATCH_LINES);
		uint64_t written;

		for (size_t j = 0; j < cnt; j++) {
			memcpy(buf + j * TD_WCACHE_LINE, b[j]->data, TD_WCACHE_LINE);
			valid[j] = b[j]->valid;
			b[j]->redirtied = 0;
			ok[j] = true;
		}
		td_mutex_unlock(&wc->lock);
		int e = write_copies(wc, b, valid, buf, cnt, ok, &written);

		td_mutex_lock(&wc->lock);
		if (e && !err)
			err = e;
		wc->st.written_back += written;
		for (size_t j = 0; j < cnt; j++) {
			struct line *l = b[j];

			line_release_locked(wc, l);
			if (!ok[j])
				continue;
			uint8_t done = (uint8_t)(valid[j] & ~l->redirtied);

			if (freed && !(l->valid & (uint8_t)~done))
				(*freed)++;
			line_clear_locked(wc, l, done);
		}
		td_cond_broadcast(&wc->idle);
	}
	free(buf);
	return err;
}

/*
 * Evict old lines until the lines [@lo, @hi] fit (@hi - @lo < max_lines), never evicting one
 * of those. Drops and retakes the lock. Return: 0 with room made, or the error of a failed
 * eviction (whose lines stay cached).
 */
static int make_room_locked(struct td_wcache *wc, uint64_t lo, uint64_t hi)
{
	assert(td_lock_held(&wc->lock));
	for (;;) {
		uint64_t missing = hi - lo + 1;
		struct line *l, *nxt;

		for_each_line_in(wc, l, nxt, lo * SECTORS_PER_LINE, (hi + 1) * SECTORS_PER_LINE)
			missing--;
		if (wc->nr_lines + missing <= wc->max_lines)
			return 0;
		if (wc->pf_waiting) {
			td_cond_wait(&wc->idle, &wc->lock);
			continue;
		}
		uint64_t want = wc->nr_lines + missing - wc->max_lines;
		struct line **victims = malloc(want * sizeof(*victims));
		size_t n = 0;
		struct td_list *pos;

		if (!victims)
			return -ENOMEM;
		td_list_for_each(pos, &wc->age) {
			l = td_list_entry(pos, struct line, age);
			if (!l->busy && (l->index < lo || l->index > hi))
				victims[n++] = l;
			if (n == want)
				break;
		}
		if (!n) {
			/* Every other line is being written back: one will be done soon. */
			free(victims);
			td_cond_wait(&wc->idle, &wc->lock);
			continue;
		}
		qsort(victims, n, sizeof(*victims), line_cmp);
		uint64_t freed = 0;
		int err = write_back_locked(wc, victims, n, &freed);

		free(victims);
		wc->st.evicted_lines += freed;
		if (err)
			return err;
	}
}

/* ---- the operations -------------------------------------------------------------------- */

/* Copy the cached sectors of [@first, @end) into the iovec that starts at sector @first. */
static void overlay_locked(struct td_wcache *wc, const struct iovec *iov, int iovcnt,
			   uint64_t first, uint64_t end)
{
	struct line *l, *nxt;

	assert(td_lock_held(&wc->lock));
	for_each_line_in(wc, l, nxt, first, end) {
		uint8_t m = l->valid & range_mask(l->index, first, end);
		unsigned int s = 0, e;

		for (; next_run(m, &s, &e); s = e)
			iov_copy(iov, iovcnt,
				 (l->index * SECTORS_PER_LINE + s - first) * TD_SECTOR_SIZE,
				 l->data + s * TD_SECTOR_SIZE, (size_t)(e - s) * TD_SECTOR_SIZE, true);
	}
}

int td_wcache_read(struct td_wcache *wc, const struct iovec *iov, int iovcnt, uint64_t off)
{
	uint64_t len = iov_total(iov, iovcnt);
	uint64_t first = off / TD_SECTOR_SIZE;
	uint64_t end = (off + len) / TD_SECTOR_SIZE;
	uint64_t cached = 0;
	struct line *l, *nxt;
	uint64_t *where;
	uint8_t *copy;
	int err;

	if (off % TD_SECTOR_SIZE || len % TD_SECTOR_SIZE)
		return -EINVAL;
	td_mutex_lock(&wc->lock);
	for_each_line_in(wc, l, nxt, first, end)
		cached += popcount8(l->valid & range_mask(l->index, first, end));
	if (!cached) {
		/* Nothing to lay over: the image has the data of every completed write. */
		td_mutex_unlock(&wc->lock);
		return wc->be.ops->read(wc->be.priv, iov, iovcnt, off);
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
		err = wc->be.ops->read(wc->be.priv, iov, iovcnt, off);
		if (!err)
			overlay_locked(wc, iov, iovcnt, first, end);
		td_mutex_unlock(&wc->lock);
		return err;
	}
	uint64_t n = 0;

	for_each_line_in(wc, l, nxt, first, end) {
		uint8_t m = l->valid & range_mask(l->index, first, end);
		unsigned int s = 0, e;

		for (; next_run(m, &s, &e); s = e) {
			memcpy(copy + n * TD_SECTOR_SIZE, l->data + s * TD_SECTOR_SIZE,
			       (size_t)(e - s) * TD_SECTOR_SIZE);
			for (unsigned int i = s; i < e; i++)
				where[n++] = l->index * SECTORS_PER_LINE + i - first;
		}
	}
	assert(n == cached);
	td_mutex_unlock(&wc->lock);

	err = wc->be.ops->read(wc->be.priv, iov, iovcnt, off);
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

/* An operation that goes to the image without being cached. */
struct through {
	enum { THROUGH_WRITE, THROUGH_DISCARD, THROUGH_ZEROES } op;
	const struct iovec *iov; /* THROUGH_WRITE */
	int iovcnt;
	bool fua;
};

/*
 * Apply @t to sectors [@first, @end) of the image, then drop the cached sectors it replaced:
 * those not written again meanwhile. The lines of the range are busy meanwhile, so no older
 * copy of them lands over it, and reads see the cached data until the image has the new.
 * A failed operation leaves the cache as it was.
 */
static int write_through(struct td_wcache *wc, const struct through *t, uint64_t first,
			 uint64_t end)
{
	uint64_t off = first * TD_SECTOR_SIZE;
	uint64_t len = (end - first) * TD_SECTOR_SIZE;
	struct line **mine = NULL;
	struct line *l, *nxt;
	size_t n = 0;
	int err;

	td_mutex_lock(&wc->lock);
	while (wc->pf_waiting || range_busy_locked(wc, first, end))
		td_cond_wait(&wc->idle, &wc->lock);
	for_each_line_in(wc, l, nxt, first, end)
		n++;
	if (n) {
		mine = malloc(n * sizeof(*mine));
		if (!mine) {
			td_mutex_unlock(&wc->lock);
			return -ENOMEM;
		}
		n = 0;
		for_each_line_in(wc, l, nxt, first, end) {
			line_claim_locked(wc, l);
			mine[n++] = l;
		}
	}
	td_mutex_unlock(&wc->lock);

	switch (t->op) {
	case THROUGH_WRITE:
		err = wc->be.ops->write(wc->be.priv, t->iov, t->iovcnt, off, t->fua);
		break;
	case THROUGH_DISCARD:
		err = wc->be.ops->discard(wc->be.priv, off, len);
		break;
	default:
		err = wc->be.ops->write_zeroes(wc->be.priv, off, len);
		break;
	}

	td_mutex_lock(&wc->lock);
	for (size_t i = 0; i < n; i++) {
		l = mine[i];
		line_release_locked(wc, l);
		if (!err)
			line_clear_locked(wc, l,
					  range_mask(l->index, first, end) & (uint8_t)~l->redirtied);
	}
	if (n)
		td_cond_broadcast(&wc->idle);
	td_mutex_unlock(&wc->lock);
	free(mine);
	return err;
}

/* Put [@first, @end) into the cache, all or nothing; room has been made. */
static int apply_write_locked(struct td_wcache *wc, const struct iovec *iov, int iovcnt,
			      uint64_t first, uint64_t end)
{
	struct td_list fresh = TD_LIST_INIT(fresh);
	uint64_t lo = first / SECTORS_PER_LINE;
	uint64_t hi = (end - 1) / SECTORS_PER_LINE;
	uint64_t seq = wc->next_seq + 1;

	assert(td_lock_held(&wc->lock));
	for (uint64_t li = lo; li <= hi; li++) {
		if (line_find_locked(wc, li))
			continue;
		struct line *l = malloc(sizeof(*l));

		if (!l) {
			while (!td_list_empty(&fresh)) {
				l = td_list_first_entry(&fresh, struct line, age);
				td_list_del(&l->age);
				free(l);
			}
			return -ENOMEM;
		}
		td_list_add_tail(&l->age, &fresh);
	}
	wc->next_seq = seq;
	for (uint64_t li = lo; li <= hi; li++) {
		struct line *l = line_find_locked(wc, li);

		if (!l) {
			l = td_list_first_entry(&fresh, struct line, age);
			td_list_del(&l->age);
			l->index = li;
			l->valid = 0;
			l->redirtied = 0;
			l->busy = false;
			line_insert_locked(wc, l);
		}
		uint8_t m = range_mask(li, first, end);
		unsigned int s = 0, e;

		for (; next_run(m, &s, &e); s = e)
			iov_copy(iov, iovcnt, (li * SECTORS_PER_LINE + s - first) * TD_SECTOR_SIZE,
				 l->data + s * TD_SECTOR_SIZE, (size_t)(e - s) * TD_SECTOR_SIZE,
				 false);
		wc->st.cached_bytes += (uint64_t)popcount8(m & (uint8_t)~l->valid) * TD_SECTOR_SIZE;
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
	uint64_t lo = first / SECTORS_PER_LINE;
	uint64_t hi = (end - 1) / SECTORS_PER_LINE;

	/* FUA, or more than the cache holds: to the image, and the cache must not shadow it. */
	if (fua || hi - lo + 1 > wc->max_lines) {
		struct through t = { .op = THROUGH_WRITE, .iov = iov, .iovcnt = iovcnt, .fua = fua };

		return write_through(wc, &t, first, end);
	}
	td_mutex_lock(&wc->lock);
	err = make_room_locked(wc, lo, hi);
	if (!err)
		err = apply_write_locked(wc, iov, iovcnt, first, end);
	td_mutex_unlock(&wc->lock);
	return err;
}

int td_wcache_flush(struct td_wcache *wc)
{
	uint64_t *idx = NULL;
	struct line **batch = NULL;
	struct line *l;
	size_t n = 0;
	int err = 0, e;

	td_mutex_lock(&wc->lock);
	if (wc->nr_lines) {
		idx = malloc(wc->nr_lines * sizeof(*idx));
		batch = malloc(wc->nr_lines * sizeof(*batch));
		if (!idx || !batch) {
			err = -ENOMEM;
			goto out;
		}
		for (l = line_of(td_rb_first(&wc->lines)); l; l = line_next(l))
			idx[n++] = l->index;
	}
	/*
	 * Write back every line that holds data now. A line being written back by someone else
	 * is waited for, then written back if it still holds something (its write failed, or it
	 * was written to again). Lines written to after this point go too, if they are there.
	 */
	while (n) {
		size_t k = 0, busy = 0;

		if (wc->pf_waiting) {
			td_cond_wait(&wc->idle, &wc->lock);
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			l = line_find_locked(wc, idx[i]);
			if (!l)
				continue;
			if (l->busy)
				idx[busy++] = idx[i];
			else
				batch[k++] = l;
		}
		n = busy;
		if (!k) {
			if (n)
				td_cond_wait(&wc->idle, &wc->lock);
			continue;
		}
		e = write_back_locked(wc, batch, k, NULL);
		if (e && !err)
			err = e;
	}
out:
	wc->st.flushes++;
	td_mutex_unlock(&wc->lock);
	free(idx);
	free(batch);
	/* Even after a failed write-back: what did reach the image becomes durable. */
	e = wc->be.ops->flush(wc->be.priv);
	return err ? err : e;
}

static int zero_range(struct td_wcache *wc, uint64_t off, uint64_t len, bool discard)
{
	struct through t = { .op = discard ? THROUGH_DISCARD : THROUGH_ZEROES };

	if (off % TD_SECTOR_SIZE || len % TD_SECTOR_SIZE)
		return -EINVAL;
	if (!len)
		return 0;
	return write_through(wc, &t, off / TD_SECTOR_SIZE, (off + len) / TD_SECTOR_SIZE);
}

int td_wcache_discard(struct td_wcache *wc, uint64_t off, uint64_t len)
{
	return zero_range(wc, off, len, true);
}

int td_wcache_write_zeroes(struct td_wcache *wc, uint64_t off, uint64_t len)
{
	return zero_range(wc, off, len, false);
}

bool td_wcache_next_cached(struct td_wcache *wc, uint64_t off, uint64_t *start, uint64_t *end)
{
	uint64_t sector = off / TD_SECTOR_SIZE;
	bool found = false;
	struct line *l;

	td_mutex_lock(&wc->lock);
	for (l = line_ceil_locked(wc, sector / SECTORS_PER_LINE); l; l = line_next(l)) {
		unsigned int s = 0, e;

		if (!next_run(l->valid & range_mask(l->index, sector, UINT64_MAX), &s, &e))
			continue;
		*start = (l->index * SECTORS_PER_LINE + s) * TD_SECTOR_SIZE;
		*end = run_end_locked(&l, &s) * TD_SECTOR_SIZE;
		found = true;
		break;
	}
	td_mutex_unlock(&wc->lock);
	return found;
}

/* ---- power failure --------------------------------------------------------------------- */

/* Write @l's sectors to the image, in runs, with the lock held (a power failure). */
static int line_write_back_locked(struct td_wcache *wc, const struct line *l)
{
	unsigned int s = 0, e;

	for (; next_run(l->valid, &s, &e); s = e) {
		struct iovec iov = {
			(void *)(l->data + s * TD_SECTOR_SIZE),
			(size_t)(e - s) * TD_SECTOR_SIZE,
		};
		int err = wc->be.ops->write(wc->be.priv, &iov, 1,
					    l->index * TD_WCACHE_LINE + s * TD_SECTOR_SIZE, false);

		if (err)
			return err;
		wc->st.written_back += iov.iov_len;
	}
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Return: the number of distinct values in @v[0..@n) (sorts @v). */
static uint64_t count_distinct(uint64_t *v, uint64_t n)
{
	uint64_t d = 0;

	qsort(v, n, sizeof(*v), u64_cmp);
	for (uint64_t i = 0; i < n; i++)
		if (i == 0 || v[i] != v[i - 1])
			d++;
	return d;
}

/* Return: whether @x occurs in the sorted @v[0..@n). */
static bool contains(const uint64_t *v, uint64_t n, uint64_t x)
{
	return bsearch(&x, v, n, sizeof(*v), u64_cmp) != NULL;
}

int td_wcache_powerfail(struct td_wcache *wc, unsigned int keep_pct, uint64_t seed,
			struct td_powerfail_result *res)
{
	uint64_t rng = seed;
	uint64_t *lost, *kept;
	uint64_t nlost = 0, nkept = 0;
	int err = 0;

	memset(res, 0, sizeof(*res));
	if (keep_pct > 100)
		return -EINVAL;
	td_mutex_lock(&wc->lock);
	/* Let the write-backs in flight land; start no new ones meanwhile. */
	wc->pf_waiting++;
	while (wc->nr_busy)
		td_cond_wait(&wc->idle, &wc->lock);
	wc->pf_waiting--;
	lost = malloc((wc->nr_lines + 1) * sizeof(*lost));
	kept = malloc((wc->nr_lines + 1) * sizeof(*kept));
	if (!lost || !kept) {
		err = -ENOMEM;
		goto out;
	}
	/* Oldest first: a torn cache is most likely to have written back its oldest data. */
	while (!td_list_empty(&wc->age)) {
		struct line *l = td_list_first_entry(&wc->age, struct line, age);
		uint64_t sectors = popcount8(l->valid);

		if (td_splitmix64_next(&rng) % 100 < keep_pct) {
			int e = line_write_back_locked(wc, l);

			if (e && !err)
				err = e;
			kept[nkept++] = l->seq;
			res->kept_sectors += sectors;
		} else {
			lost[nlost++] = l->seq;
			res->lost_sectors += sectors;
		}
		line_free_locked(wc, l);
	}
	res->lost_writes = count_distinct(lost, nlost);
	/* A write is kept when none of its lines were lost. */
	qsort(kept, nkept, sizeof(*kept), u64_cmp);
	for (uint64_t i = 0; i < nkept; i++)
		if ((i == 0 || kept[i] != kept[i - 1]) && !contains(lost, nlost, kept[i]))
			res->kept_writes++;
	wc->st.powerfails++;
	wc->st.lost_writes += res->lost_writes;
	wc->st.lost_sectors += res->lost_sectors;
out:
	free(lost);
	free(kept);
	td_cond_broadcast(&wc->idle);
	td_mutex_unlock(&wc->lock);
	return err;
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
	struct line *l;
	unsigned int s;

	td_mutex_lock(&wc->lock);
	assert(!wc->nr_busy);
	/* Count first, so the summary comes before the ranges. */
	for (l = line_of(td_rb_first(&wc->lines)), s = 0; l;) {
		unsigned int e;

		if (!next_run(l->valid, &s, &e)) {
			l = line_next(l);
			s = 0;
			continue;
		}
		uint64_t start = l->index * SECTORS_PER_LINE + s;

		lost += (run_end_locked(&l, &s) - start) * TD_SECTOR_SIZE;
		ranges++;
	}
	if (lost)
		td_err("write cache: %" PRIu64 " bytes in %" PRIu64
		       " ranges were never written back to the image and are lost",
		       lost, ranges);
	uint64_t logged = 0;

	for (l = line_of(td_rb_first(&wc->lines)), s = 0; l && logged < LOST_RANGES_LOGGED;) {
		unsigned int e;

		if (!next_run(l->valid, &s, &e)) {
			l = line_next(l);
			s = 0;
			continue;
		}
		uint64_t start = (l->index * SECTORS_PER_LINE + s) * TD_SECTOR_SIZE;
		uint64_t end = run_end_locked(&l, &s) * TD_SECTOR_SIZE;

		td_err("write cache: lost bytes %" PRIu64 "-%" PRIu64 " (%" PRIu64 " bytes)",
		       start, end - 1, end - start);
		logged++;
	}
	if (ranges > logged)
		td_err("write cache: and %" PRIu64 " more lost ranges", ranges - logged);
	while (!td_list_empty(&wc->age))
		line_free_locked(wc, td_list_first_entry(&wc->age, struct line, age));
	td_mutex_unlock(&wc->lock);
	td_cond_destroy(&wc->idle);
	td_mutex_destroy(&wc->lock);
	free(wc);
	return lost;
}
