// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bufpool.c - page-aligned I/O buffers in size classes, with a bounded reserve.
 *
 * Class c (0-based) holds buffers of 4 KiB << c up to 1 MiB; when max_bytes
 * is larger there is one more class, of exactly max_bytes. Each class has a
 * LIFO free list (the most recently used buffer is the one most likely still
 * in the cache) of at most keep[c] buffers. A buffer is one anonymous mapping
 * of its class size rounded up to the page size; its header, struct td_buf,
 * is a small heap object beside it, so the data mapping holds nothing else
 * and unmapping it returns every page.
 *
 * Invariants, under pool->lock: nr_free[c] <= keep[c], and nr_free[c] is the
 * length of free[c]; nr_out counts buffers between get and put.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common/lock.h"
#include "common/prefault.h"
#include "daemon/bufpool.h"

#define MIN_SHIFT	12 /* 4 KiB */
#define POW2_MAX_SHIFT	20 /* 1 MiB */
#define NR_POW2_CLASSES (POW2_MAX_SHIFT - MIN_SHIFT + 1)
#define MAX_CLASSES	(NR_POW2_CLASSES + 1)
#define MAX_BYTES_LIMIT ((size_t)64 << 20)

struct td_bufpool {
	unsigned int nr_classes;
	size_t size[MAX_CLASSES];     /* what a buffer of the class holds */
	size_t map_bytes[MAX_CLASSES]; /* size rounded up to the page size */
	unsigned int keep[MAX_CLASSES];

	struct td_mutex lock;
	struct td_buf *free[MAX_CLASSES]; /* lock */
	unsigned int nr_free[MAX_CLASSES]; /* lock */
	unsigned int nr_out;		   /* lock */
	size_t out_bytes;		   /* lock */
};

_Static_assert(TD_BUFPOOL_MIN_SIZE == 1U << MIN_SHIFT, "smallest class");
_Static_assert(TD_BUFPOOL_POW2_MAX == 1U << POW2_MAX_SHIFT, "largest power-of-two class");

struct td_bufpool *td_bufpool_create(size_t max_bytes)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct td_bufpool *pool;

	if (max_bytes < TD_BUFPOOL_MIN_SIZE || max_bytes > MAX_BYTES_LIMIT) {
		errno = EINVAL;
		return NULL;
	}
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return NULL;
	for (unsigned int c = 0; c < NR_POW2_CLASSES; c++) {
		pool->size[c] = (size_t)1 << (MIN_SHIFT + c);
		pool->nr_classes = c + 1;
		if (pool->size[c] >= max_bytes)
			break;
	}
	if (pool->size[pool->nr_classes - 1] < max_bytes)
		pool->size[pool->nr_classes++] = max_bytes;
	for (unsigned int c = 0; c < pool->nr_classes; c++) {
		pool->map_bytes[c] = TD_DIV_ROUND_UP(pool->size[c], page) * page;
		pool->keep[c] = TD_MAX(TD_BUFPOOL_KEEP_MIN,
				       (unsigned int)(TD_BUFPOOL_KEEP_BYTES / pool->size[c]));
	}
	td_mutex_init(&pool->lock);
	return pool;
}

/* Return: the class serving @size, or -1 when it is too large. */
static int size_class(const struct td_bufpool *pool, size_t size)
{
	for (unsigned int c = 0; c < pool->nr_classes; c++) {
		if (size <= pool->size[c])
			return (int)c;
	}
	return -1;
}

static void unmap_buf(const struct td_bufpool *pool, struct td_buf *b)
{
	munmap(b->mem, pool->map_bytes[b->cls]);
	free(b);
}

struct td_buf *td_bufpool_get(struct td_bufpool *pool, size_t size)
{
	int cls = size_class(pool, size);
	struct td_buf *b;

	if (cls < 0)
		return NULL;
	td_mutex_lock(&pool->lock);
	b = pool->free[cls];
	if (b) {
		pool->free[cls] = b->next_free;
		pool->nr_free[cls]--;
		pool->nr_out++;
		pool->out_bytes += b->cap;
	}
	td_mutex_unlock(&pool->lock);
	if (b)
		return b;

	void *mem = mmap(NULL, pool->map_bytes[cls], PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (mem == MAP_FAILED)
		return NULL;
	b = malloc(sizeof(*b));
	if (!b) {
		munmap(mem, pool->map_bytes[cls]);
		return NULL;
	}
	b->mem = mem;
	b->cap = pool->size[cls];
	b->resident = false;
	b->cls = (unsigned int)cls;
	b->next_free = NULL;
	td_mutex_lock(&pool->lock);
	pool->nr_out++;
	pool->out_bytes += b->cap;
	td_mutex_unlock(&pool->lock);
	return b;
}

int td_buf_make_resident(struct td_buf *b)
{
	int ret;

	if (b->resident)
		return 0;
	ret = td_prefault(b->mem, b->cap);
	if (ret == 0)
		b->resident = true;
	return ret;
}

void td_bufpool_put(struct td_bufpool *pool, struct td_buf *b)
{
	if (!b)
		return;
	assert(b->cls < pool->nr_classes && b->cap == pool->size[b->cls]);
	td_mutex_lock(&pool->lock);
	assert(pool->nr_out > 0);
	pool->nr_out--;
	pool->out_bytes -= b->cap;
	if (pool->nr_free[b->cls] < pool->keep[b->cls]) {
		b->next_free = pool->free[b->cls];
		pool->free[b->cls] = b;
		pool->nr_free[b->cls]++;
		b = NULL;
	}
	td_mutex_unlock(&pool->lock);
	if (b)
		unmap_buf(pool, b);
}

void td_bufpool_destroy(struct td_bufpool *pool)
{
	for (unsigned int c = 0; c < pool->nr_classes; c++) {
		while (pool->free[c]) {
			struct td_buf *b = pool->free[c];

			pool->free[c] = b->next_free;
			unmap_buf(pool, b);
		}
	}
	td_mutex_destroy(&pool->lock);
	free(pool);
}

unsigned int td_bufpool_keep(const struct td_bufpool *pool, size_t size)
{
	int cls = size_class(pool, size);

	return cls < 0 ? 0 : pool->keep[cls];
}

size_t td_bufpool_reserve_bytes(const struct td_bufpool *pool)
{
	size_t total = 0;

	for (unsigned int c = 0; c < pool->nr_classes; c++)
		total += pool->keep[c] * pool->size[c];
	return total;
}

unsigned int td_bufpool_nr_free(struct td_bufpool *pool, size_t size)
{
	int cls = size_class(pool, size);
	unsigned int n;

	if (cls < 0)
		return 0;
	td_mutex_lock(&pool->lock);
	n = pool->nr_free[cls];
	td_mutex_unlock(&pool->lock);
	return n;
}

void td_bufpool_stats(struct td_bufpool *pool, struct td_bufpool_stats *st)
{
	td_mutex_lock(&pool->lock);
	st->nr_free = 0;
	st->free_bytes = 0;
	for (unsigned int c = 0; c < pool->nr_classes; c++) {
		st->nr_free += pool->nr_free[c];
		st->free_bytes += pool->nr_free[c] * pool->size[c];
	}
	st->nr_out = pool->nr_out;
	st->out_bytes = pool->out_bytes;
	td_mutex_unlock(&pool->lock);
}
