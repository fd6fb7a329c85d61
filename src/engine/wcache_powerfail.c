// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wcache_powerfail.c - the write cache loses power: it writes back a random share of its lines,
 * oldest first, drops the rest, and counts the writes that lost sectors and those kept whole.
 * It waits until no line is busy and holds the lock throughout (see the top of wcache.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/list.h"
#include "common/lock.h"
#include "common/random.h"
#include "tagdisk/types.h"
#include "tagdisk/wcache.h"
#include "wcache_int.h"

/* Write @l's sectors to the image, in runs, with the lock held (a power failure). */
static int line_write_back_locked(struct td_wcache *wc, const struct td_wc_line *l)
{
	unsigned int s = 0, e;

	for (; td_wc_next_run(l->valid, &s, &e); s = e) {
		struct iovec iov = {
			(void *)(l->data + s * TD_SECTOR_SIZE),
			(size_t)(e - s) * TD_SECTOR_SIZE,
		};
		int err = td_backend_write(&wc->be, &iov, 1,
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
		struct td_wc_line *l = td_list_first_entry(&wc->age, struct td_wc_line, age);
		uint64_t sectors = td_wc_popcount8(l->valid);

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
		td_wc_line_free_locked(wc, l);
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
