// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wcache_writeback.c - the write cache's backend writes that pin lines busy: write-back of
 * cached lines (eviction when the cache is full, flush) and write-through (FUA and oversized
 * writes, discard, write zeroes). Each claims the lines it depends on under the lock, does its
 * I/O without the lock, then releases them and wakes whoever waits on wc->idle (see the top of
 * wcache.c for the busy state and its invariants).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/list.h"
#include "common/lock.h"
#include "common/rbtree.h"
#include "tagdisk/types.h"
#include "tagdisk/wcache.h"
#include "wcache_int.h"

#define BATCH_LINES 256 /* lines copied and written back per step without the lock: 1 MiB */

/* ---- busy lines ------------------------------------------------------------------------ */

static void line_claim_locked(struct td_wcache *wc, struct td_wc_line *l)
{
	assert(!l->busy);
	l->busy = true;
	l->redirtied = 0;
	wc->nr_busy++;
}

static void line_release_locked(struct td_wcache *wc, struct td_wc_line *l)
{
	assert(l->busy);
	l->busy = false;
	wc->nr_busy--;
}

/* Return: whether a line holding sectors of [@first, @end) is busy. */
static bool range_busy_locked(struct td_wcache *wc, uint64_t first, uint64_t end)
{
	struct td_wc_line *l, *nxt;

	td_wc_for_each_line_in(wc, l, nxt, first, end)
		if (l->busy)
			return true;
	return false;
}

static int line_cmp(const void *a, const void *b)
{
	const struct td_wc_line *x = *(struct td_wc_line *const *)a;
	const struct td_wc_line *y = *(struct td_wc_line *const *)b;

	return x->index < y->index ? -1 : x->index > y->index;
}

/* ---- write-back ------------------------------------------------------------------------ */

/*
 * Write to the image the copies in @buf of @n busy lines (@lines in index order, slot j of
 * @buf holding @valid[j] of lines[j]), merging runs across adjacent lines. No lock held: only
 * the lines' immutable indices are read. Clears @ok[j] for each line a failed write touched.
 * Return: the first error, or 0; *@written: the bytes written.
 */
static int write_copies(struct td_wcache *wc, struct td_wc_line *const *lines, const uint8_t *valid,
			uint8_t *buf, size_t n, bool *ok, uint64_t *written)
{
	size_t j = 0;
	unsigned int s = 0;
	int first_err = 0;

	*written = 0;
	while (j < n) {
		if (s == TD_WC_LINE_SECTORS || !(valid[j] & (1U << s))) {
			if (s == TD_WC_LINE_SECTORS) {
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
			if (s < TD_WC_LINE_SECTORS) {
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
			((j - j0) * TD_WC_LINE_SECTORS + s - s0) * TD_SECTOR_SIZE,
		};
		int err = td_backend_write(&wc->be, &iov, 1,
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
static int write_back_locked(struct td_wcache *wc, struct td_wc_line **lines, size_t n,
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
		struct td_wc_line **b = lines + start;
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
			struct td_wc_line *l = b[j];

			line_release_locked(wc, l);
			if (!ok[j])
				continue;
			uint8_t done = (uint8_t)(valid[j] & ~l->redirtied);

			if (freed && !(l->valid & (uint8_t)~done))
				(*freed)++;
			td_wc_line_clear_locked(wc, l, done);
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
int td_wc_make_room_locked(struct td_wcache *wc, uint64_t lo, uint64_t hi)
{
	assert(td_lock_held(&wc->lock));
	for (;;) {
		uint64_t missing = hi - lo + 1;
		struct td_wc_line *l, *nxt;

		td_wc_for_each_line_in(wc, l, nxt, lo * TD_WC_LINE_SECTORS,
				       (hi + 1) * TD_WC_LINE_SECTORS)
			missing--;
		if (wc->nr_lines + missing <= wc->max_lines)
			return 0;
		if (wc->pf_waiting) {
			td_cond_wait(&wc->idle, &wc->lock);
			continue;
		}
		uint64_t want = wc->nr_lines + missing - wc->max_lines;
		struct td_wc_line **victims = malloc(want * sizeof(*victims));
		size_t n = 0;
		struct td_list *pos;

		if (!victims)
			return -ENOMEM;
		td_list_for_each(pos, &wc->age) {
			l = td_list_entry(pos, struct td_wc_line, age);
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

/* ---- write-through --------------------------------------------------------------------- */

/*
 * Apply @t to sectors [@first, @end) of the image, then drop the cached sectors it replaced:
 * those not written again meanwhile. The lines of the range are busy meanwhile, so no older
 * copy of them lands over it, and reads see the cached data until the image has the new.
 * A failed operation leaves the cache as it was.
 */
int td_wc_write_through(struct td_wcache *wc, const struct td_wc_through *t, uint64_t first,
			uint64_t end)
{
	uint64_t off = first * TD_SECTOR_SIZE;
	uint64_t len = (end - first) * TD_SECTOR_SIZE;
	struct td_wc_line **mine = NULL;
	struct td_wc_line *l, *nxt;
	size_t n = 0;
	int err;

	td_mutex_lock(&wc->lock);
	while (wc->pf_waiting || range_busy_locked(wc, first, end))
		td_cond_wait(&wc->idle, &wc->lock);
	td_wc_for_each_line_in(wc, l, nxt, first, end)
		n++;
	if (n) {
		mine = malloc(n * sizeof(*mine));
		if (!mine) {
			td_mutex_unlock(&wc->lock);
			return -ENOMEM;
		}
		n = 0;
		td_wc_for_each_line_in(wc, l, nxt, first, end) {
			line_claim_locked(wc, l);
			mine[n++] = l;
		}
	}
	td_mutex_unlock(&wc->lock);

	switch (t->op) {
	case TD_WC_THROUGH_WRITE:
		err = td_backend_write(&wc->be, t->iov, t->iovcnt, off, t->fua);
		break;
	case TD_WC_THROUGH_DISCARD:
		err = td_backend_discard(&wc->be, off, len);
		break;
	default:
		err = td_backend_write_zeroes(&wc->be, off, len);
		break;
	}

	td_mutex_lock(&wc->lock);
	for (size_t i = 0; i < n; i++) {
		l = mine[i];
		line_release_locked(wc, l);
		if (!err)
			td_wc_line_clear_locked(wc, l, td_wc_range_mask(l->index, first, end) &
							       (uint8_t)~l->redirtied);
	}
	if (n)
		td_cond_broadcast(&wc->idle);
	td_mutex_unlock(&wc->lock);
	free(mine);
	return err;
}

static int zero_range(struct td_wcache *wc, uint64_t off, uint64_t len, bool discard)
{
	struct td_wc_through t = { .op = discard ? TD_WC_THROUGH_DISCARD : TD_WC_THROUGH_ZEROES };

	if (off % TD_SECTOR_SIZE || len % TD_SECTOR_SIZE)
		return -EINVAL;
	if (!len)
		return 0;
	return td_wc_write_through(wc, &t, off / TD_SECTOR_SIZE, (off + len) / TD_SECTOR_SIZE);
}

int td_wcache_discard(struct td_wcache *wc, uint64_t off, uint64_t len)
{
	return zero_range(wc, off, len, true);
}

int td_wcache_write_zeroes(struct td_wcache *wc, uint64_t off, uint64_t len)
{
	return zero_range(wc, off, len, false);
}

/* ---- flush ----------------------------------------------------------------------------- */

int td_wcache_flush(struct td_wcache *wc)
{
	uint64_t *idx = NULL;
	struct td_wc_line **batch = NULL;
	struct td_wc_line *l;
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
		for (l = td_wc_line_of(td_rb_first(&wc->lines)); l; l = td_wc_line_next(l))
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
			l = td_wc_line_find_locked(wc, idx[i]);
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
	e = td_backend_flush(&wc->be);
	return err ? err : e;
}
