/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bufpool.h - page-aligned I/O buffers in size classes, with a bounded reserve.
 *
 * The front end moves every byte of the disk file through these buffers:
 * FUSE receive buffers and the data of reads and copied writes. Classes are
 * the powers of two from 4 KiB to 1 MiB, plus one class of exactly
 * max_bytes when that is larger (libfuse's receive buffer: 1 MiB of payload
 * and a page of headers). A buffer's data starts on a page boundary, so a
 * 4 KiB reply is one page for the kernel to pin and copy, not two.
 *
 * Memory bound. Buffers in use are bounded by the I/O in flight. A returned
 * buffer is kept for reuse while its class holds fewer than
 *
 *     keep(class) = max(TD_BUFPOOL_KEEP_MIN, TD_BUFPOOL_KEEP_BYTES / class size)
 *
 * free buffers (4 KiB: 256; 64 KiB: 16; 128 KiB and up: 8), and unmapped at
 * once beyond that. Each buffer is its own anonymous mapping, so unmapping
 * gives it back to the kernel and, under tagdiskd's mlockall(), unlocks it
 * (free() would keep it, locked, in malloc's arenas). With the classes
 * tagdiskd uses (4 KiB to 1 MiB, and 1 MiB + 4 KiB) the free buffers hold at
 * most 28 MiB + 32 KiB, whatever burst came before: td_bufpool_reserve_bytes().
 *
 * Lifetime: the owner creates the pool, and destroys it once every buffer has
 * come back (buffers still out at that point are leaked, not freed).
 * LOCKING: one mutex per pool guards the free lists and the counters, held
 * only to push or pop (never across mmap/munmap). Every function may be
 * called from any thread.
 */
#ifndef TAGDISK_BUFPOOL_H
#define TAGDISK_BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include "common/compiler.h"

#define TD_BUFPOOL_MIN_SIZE   (4096U)	  /* smallest class */
#define TD_BUFPOOL_POW2_MAX   (1U << 20) /* largest power-of-two class */
#define TD_BUFPOOL_KEEP_MIN   8U	  /* free buffers every class may keep */
#define TD_BUFPOOL_KEEP_BYTES (1U << 20) /* small classes keep up to this many bytes */

struct td_bufpool;

/* One buffer. The pool owns it between td_bufpool_put() and the next get. */
struct td_buf {
	void *mem;     /* cap bytes, page-aligned */
	size_t cap;    /* the class's size: at least what was asked for */
	bool resident; /* every page is there and writable (td_buf_make_resident()) */
	/* private to the pool */
	struct td_buf *next_free;
	unsigned int cls;
};

/* What the pool holds now (one consistent snapshot). */
struct td_bufpool_stats {
	unsigned int nr_free; /* buffers kept for reuse */
	size_t free_bytes;
	unsigned int nr_out; /* buffers handed out and not yet returned */
	size_t out_bytes;
};

/*
 * Make a pool whose largest buffer holds @max_bytes (at least 4 KiB, at most
 * 64 MiB). Return: the pool, or NULL (errno EINVAL or ENOMEM).
 */
struct td_bufpool *td_bufpool_create(size_t max_bytes) td_warn_unused;

/* Unmap every free buffer and free the pool. */
void td_bufpool_destroy(struct td_bufpool *pool) td_nonnull(1);

/*
 * Return: a buffer of at least @size bytes (contents undefined), or NULL when
 * @size is above the pool's largest class or memory is short.
 */
struct td_buf *td_bufpool_get(struct td_bufpool *pool, size_t size) td_nonnull(1);

/*
 * Make every page of @b resident and writable, once: the flag stays with the
 * buffer, and a buffer the pool keeps stays mapped (and, under mlockall(),
 * locked). Return: 0, or -ENOMEM (the flag stays clear).
 */
int td_buf_make_resident(struct td_buf *b) td_nonnull(1);

/* Give @b back: kept for reuse within the class's reserve, else unmapped. NULL: no-op. */
void td_bufpool_put(struct td_bufpool *pool, struct td_buf *b) td_nonnull(1);

/* Return: how many free buffers the class serving @size keeps (0 if @size is too large). */
unsigned int td_bufpool_keep(const struct td_bufpool *pool, size_t size) td_nonnull(1);

/* Return: the bound on free_bytes: the sum over classes of keep x class size. */
size_t td_bufpool_reserve_bytes(const struct td_bufpool *pool) td_nonnull(1);

/* Return: the free buffers of the class serving @size. */
unsigned int td_bufpool_nr_free(struct td_bufpool *pool, size_t size) td_nonnull(1);

/* Fill @st with the pool's counters. */
void td_bufpool_stats(struct td_bufpool *pool, struct td_bufpool_stats *st) td_nonnull(1, 2);

#endif /* TAGDISK_BUFPOOL_H */
