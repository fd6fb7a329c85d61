// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wcache.c - the volatile write cache.
 *
 * Lines are found through a hash on their index (offset / TD_WCACHE_LINE)
 * and kept on an age list, oldest first: a write that touches a line moves
 * it to the end. Each line holds a bitmask of the 512-byte sectors it has
 * and the sequence number of the last write that touched it, which is how a
 * power failure counts the writes it lost.
 *
 * Data moves between a command's iovec and the lines with a small cursor
 * that walks the iovec by byte offset.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/list.h"
#include "common/lock.h"
#include "common/random.h"
#include "tagdisk/types.h"
#include "tagdisk/wcache.h"

#define SECTORS_PER_LINE (TD_WCACHE_LINE / TD_SECTOR_SIZE)
#define ALL_SECTORS	 ((uint8_t)((1U << SECTORS_PER_LINE) - 1))

_Static_assert(SECTORS_PER_LINE == 8, "a line's sector mask is one byte");

struct line {
	struct td_list hash; /* bucket */
	struct td_list age;  /* wc->age, oldest first */
	uint64_t index;
	uint64_t seq;	     /* last write that touched the line */
	uint8_t valid;	     /* sectors held */
	uint8_t data[TD_WCACHE_LINE];
};

struct td_wcache {
	struct td_mutex lock;
	struct td_backend be;
	uint64_t capacity;
	uint64_t max_lines;
	struct td_list *buckets; /* lock */
	uint64_t nr_buckets;
	struct td_list age;	 /* lock */
	uint64_t nr_lines;	 /* lock */
	uint64_t next_seq;	 /* lock */
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

static struct td_list *bucket(struct td_wcache *wc, uint64_t index)
{
	return &wc->buckets[(index * 0x9e3779b97f4a7c15ULL >> 20) % wc->nr_buckets];
}

static struct line *line_find(struct td_wcache *wc, uint64_t index)
{
	struct td_list *pos;
	struct td_list *b = bucket(wc, index);

	td_list_for_each(pos, b) {
		struct line *l = td_list_entry(pos, struct line, hash);

		if (l->index == index)
			return l;
	}
	return NULL;
}

static void line_free(struct td_wcache *wc, struct line *l)
{
	td_list_del(&l->hash);
	td_list_del(&l->age);
	wc->nr_lines--;
	free(l);
}

/* Write @l's sectors to the image, in runs. */
static int line_write_back(struct td_wcache *wc, const struct line *l)
{
	unsigned int s = 0;

	while (s < SECTORS_PER_LINE) {
		if (!(l->valid & (1U << s))) {
			s++;
			continue;
		}
		unsigned int e = s;

		while (e < SECTORS_PER_LINE && (l->valid & (1U << e)))
			e++;
		struct iovec iov = {
			(void *)(l->data + s * TD_SECTOR_SIZE),
			(size_t)(e - s) * TD_SECTOR_SIZE,
		};
		int err = wc->be.ops->write(wc->be.priv, &iov, 1,
					    l->index * TD_WCACHE_LINE + s * TD_SECTOR_SIZE, false);

		if (err)
			return err;
		wc->st.written_back += iov.iov_len;
		s = e;
	}
	return 0;
}

/* Make room for one more line by writing back the oldest. */
static int evict_locked(struct td_wcache *wc)
{
	while (wc->nr_lines >= wc->max_lines) {
		struct line *old = td_list_first_entry(&wc->age, struct line, age);
		int err = line_write_back(wc, old);

		if (err)
			return err;
		wc->st.evicted_lines++;
		wc->st.cached_bytes -= (uint64_t)__builtin_popcount(old->valid) * TD_SECTOR_SIZE;
		line_free(wc, old);
	}
	return 0;
}

/* Clear sectors [@first, @first + @count) of the cache, freeing emptied lines. */
static void drop_sectors_locked(struct td_wcache *wc, uint64_t first, uint64_t count)
{
	uint64_t end = first + count;
	uint64_t first_line = first / SECTORS_PER_LINE;
	uint64_t last_line = (end - 1) / SECTORS_PER_LINE;

	if (!count || !wc->nr_lines)
		return;
	/* A huge range is cheaper to handle by walking what the cache holds. */
	if (last_line - first_line + 1 > wc->nr_lines) {
		struct td_list *pos, *n;

		td_list_for_each_safe(pos, n, &wc->age) {
			struct line *l = td_list_entry(pos, struct line, age);

			if (l->index < first_line || l->index > last_line)
				continue;
			for (unsigned int s = 0; s < SECTORS_PER_LINE; s++) {
				uint64_t sector = l->index * SECTORS_PER_LINE + s;

				if (sector >= first && sector < end && (l->valid & (1U << s))) {
					l->valid &= (uint8_t)~(1U << s);
					wc->st.cached_bytes -= TD_SECTOR_SIZE;
				}
			}
			if (!l->valid)
				line_free(wc, l);
		}
		return;
	}
	for (uint64_t li = first_line; li <= last_line; li++) {
		struct line *l = line_find(wc, li);

		if (!l)
			continue;
		for (unsigned int s = 0; s < SECTORS_PER_LINE; s++) {
			uint64_t sector = li * SECTORS_PER_LINE + s;

			if (sector >= first && sector < end && (l->valid & (1U << s))) {
				l->valid &= (uint8_t)~(1U << s);
				wc->st.cached_bytes -= TD_SECTOR_SIZE;
			}
		}
		if (!l->valid)
			line_free(wc, l);
	}
}

/* ---- the operations -------------------------------------------------------------------- */

int td_wcache_read(struct td_wcache *wc, const struct iovec *iov, int iovcnt, uint64_t off)
{
	uint64_t len = iov_total(iov, iovcnt);
	int err;

	td_mutex_lock(&wc->lock);
	err = wc->be.ops->read(wc->be.priv, iov, iovcnt, off);
	if (!err && wc->nr_lines && len) {
		uint64_t first = off / TD_SECTOR_SIZE;
		uint64_t end = (off + len) / TD_SECTOR_SIZE;

		for (uint64_t li = first / SECTORS_PER_LINE; li <= (end - 1) / SECTORS_PER_LINE;
		     li++) {
			struct line *l = line_find(wc, li);

			if (!l)
				continue;
			for (unsigned int s = 0; s < SECTORS_PER_LINE; s++) {
				uint64_t sector = li * SECTORS_PER_LINE + s;

				if (sector < first || sector >= end || !(l->valid & (1U << s)))
					continue;
				iov_copy(iov, iovcnt, (sector - first) * TD_SECTOR_SIZE,
					 l->data + s * TD_SECTOR_SIZE, TD_SECTOR_SIZE, true);
			}
		}
	}
	td_mutex_unlock(&wc->lock);
	return err;
}

int td_wcache_write(struct td_wcache *wc, const struct iovec *iov, int iovcnt, uint64_t off,
		    bool fua)
{
	uint64_t len = iov_total(iov, iovcnt);
	uint64_t first = off / TD_SECTOR_SIZE;
	uint64_t count = len / TD_SECTOR_SIZE;
	int err = 0;

	if (off % TD_SECTOR_SIZE || len % TD_SECTOR_SIZE)
		return -EINVAL;
	td_mutex_lock(&wc->lock);
	if (fua) {
		/* Durable now: the image has the newest data, the cache must not shadow it. */
		err = wc->be.ops->write(wc->be.priv, iov, iovcnt, off, true);
		if (!err)
			drop_sectors_locked(wc, first, count);
		goto out;
	}
	uint64_t seq = ++wc->next_seq;

	for (uint64_t sector = first; sector < first + count;) {
		uint64_t li = sector / SECTORS_PER_LINE;
		struct line *l = line_find(wc, li);

		if (!l) {
			err = evict_locked(wc);
			if (err)
				goto out;
			l = malloc(sizeof(*l));
			if (!l) {
				err = -ENOMEM;
				goto out;
			}
			l->index = li;
			l->valid = 0;
			td_list_add(&l->hash, bucket(wc, li));
			td_list_add_tail(&l->age, &wc->age);
			wc->nr_lines++;
		}
		unsigned int s = (unsigned int)(sector % SECTORS_PER_LINE);
		unsigned int n = (unsigned int)TD_MIN((uint64_t)(SECTORS_PER_LINE - s),
						      first + count - sector);

		iov_copy(iov, iovcnt, (sector - first) * TD_SECTOR_SIZE,
			 l->data + s * TD_SECTOR_SIZE, (size_t)n * TD_SECTOR_SIZE, false);
		for (unsigned int i = s; i < s + n; i++) {
			if (!(l->valid & (1U << i)))
				wc->st.cached_bytes += TD_SECTOR_SIZE;
			l->valid |= (uint8_t)(1U << i);
		}
		l->seq = seq;
		td_list_move_tail(&l->age, &wc->age);
		sector += n;
	}
	wc->st.writes++;
out:
	td_mutex_unlock(&wc->lock);
	return err;
}

static int line_cmp(const void *a, const void *b)
{
	const struct line *x = *(struct line *const *)a;
	const struct line *y = *(struct line *const *)b;

	return x->index < y->index ? -1 : x->index > y->index;
}

/* Write everything back in sector order and empty the cache. Lock held. */
static int write_back_all_locked(struct td_wcache *wc)
{
	struct line **lines;
	uint64_t n = 0;
	struct td_list *pos;
	int err = 0;

	if (!wc->nr_lines)
		return 0;
	lines = malloc(wc->nr_lines * sizeof(*lines));
	if (!lines)
		return -ENOMEM;
	td_list_for_each(pos, &wc->age)
		lines[n++] = td_list_entry(pos, struct line, age);
	qsort(lines, n, sizeof(*lines), line_cmp);
	for (uint64_t i = 0; i < n; i++) {
		err = line_write_back(wc, lines[i]);
		if (err)
			break;
		wc->st.cached_bytes -=
			(uint64_t)__builtin_popcount(lines[i]->valid) * TD_SECTOR_SIZE;
		line_free(wc, lines[i]);
	}
	free(lines);
	return err;
}

int td_wcache_flush(struct td_wcache *wc)
{
	int err;

	td_mutex_lock(&wc->lock);
	err = write_back_all_locked(wc);
	if (!err)
		err = wc->be.ops->flush(wc->be.priv);
	wc->st.flushes++;
	td_mutex_unlock(&wc->lock);
	return err;
}

static int zero_range(struct td_wcache *wc, uint64_t off, uint64_t len, bool discard)
{
	int err;

	if (off % TD_SECTOR_SIZE || len % TD_SECTOR_SIZE)
		return -EINVAL;
	td_mutex_lock(&wc->lock);
	drop_sectors_locked(wc, off / TD_SECTOR_SIZE, len / TD_SECTOR_SIZE);
	err = discard ? wc->be.ops->discard(wc->be.priv, off, len)
		      : wc->be.ops->write_zeroes(wc->be.priv, off, len);
	td_mutex_unlock(&wc->lock);
	return err;
}

int td_wcache_discard(struct td_wcache *wc, uint64_t off, uint64_t len)
{
	return zero_range(wc, off, len, true);
}

int td_wcache_write_zeroes(struct td_wcache *wc, uint64_t off, uint64_t len)
{
	return zero_range(wc, off, len, false);
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
	lost = malloc((wc->nr_lines + 1) * sizeof(*lost));
	kept = malloc((wc->nr_lines + 1) * sizeof(*kept));
	if (!lost || !kept) {
		err = -ENOMEM;
		goto out;
	}
	/* Oldest first: a torn cache is most likely to have written back its oldest data. */
	while (!td_list_empty(&wc->age)) {
		struct line *l = td_list_first_entry(&wc->age, struct line, age);
		uint64_t sectors = (uint64_t)__builtin_popcount(l->valid);

		if (td_splitmix64_next(&rng) % 100 < keep_pct) {
			int e = line_write_back(wc, l);

			if (e && !err)
				err = e;
			kept[nkept++] = l->seq;
			res->kept_sectors += sectors;
		} else {
			lost[nlost++] = l->seq;
			res->lost_sectors += sectors;
		}
		wc->st.cached_bytes -= sectors * TD_SECTOR_SIZE;
		line_free(wc, l);
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
	td_mutex_unlock(&wc->lock);
	return err;
}

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
	wc->nr_buckets = 1;
	while (wc->nr_buckets < wc->max_lines && wc->nr_buckets < (1ULL << 22))
		wc->nr_buckets <<= 1;
	wc->buckets = malloc(wc->nr_buckets * sizeof(*wc->buckets));
	if (!wc->buckets) {
		free(wc);
		errno = ENOMEM;
		return NULL;
	}
	for (uint64_t i = 0; i < wc->nr_buckets; i++)
		td_list_init(&wc->buckets[i]);
	td_list_init(&wc->age);
	td_mutex_init(&wc->lock);
	return wc;
}

void td_wcache_destroy(struct td_wcache *wc)
{
	while (!td_list_empty(&wc->age))
		line_free(wc, td_list_first_entry(&wc->age, struct line, age));
	td_mutex_destroy(&wc->lock);
	free(wc->buckets);
	free(wc);
}
