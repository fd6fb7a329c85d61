/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wcache.h - a volatile write cache, for crash-consistency testing.
 *
 * With write_cache = volatile the drive completes writes as soon as their
 * data sits in this cache, in memory; only a flush (or the cache filling up)
 * writes them to the image. A power failure (td_wcache_powerfail) throws
 * away what was never written back, optionally keeping a random share of it
 * as a cache that was half way through writing back would, so users can see
 * exactly what their filesystem or database does with a disk that lies
 * about completion the way real drives with write caches do.
 *
 *  - Writes are cached in lines of TD_WCACHE_LINE bytes, each with a bit per
 *    512-byte sector saying which sectors it holds. A line remembers the
 *    last write that touched it.
 *  - Reads come from the image, with cached sectors laid over them (a read
 *    the cache holds whole does not reach the image).
 *  - When the cache holds cache_size bytes, the oldest lines are written
 *    back (and leave the cache) before new data goes in. A write is applied
 *    whole or not at all: when making room for it fails, it fails with that
 *    error and the cache is as it was (what was written back reads the same).
 *  - FUA writes, and writes larger than the whole cache, go through to the
 *    image (FUA ones durable before completing) and take their sectors out
 *    of the cache.
 *  - Discard and write zeroes act on the image at once, then drop the cached
 *    sectors of their range (a failed one leaves the cache as it was).
 *  - Flush writes every line back in sector order, then flushes the image;
 *    it returns once everything written before it started is durable. Lines
 *    whose write-back fails stay cached (a later flush retries them) and the
 *    flush returns the error.
 *
 * LOCKING: one mutex guards the lines and the counters; it is never held
 * across backend I/O, except by td_wcache_powerfail() (the drive is dead
 * while the power fails). Write-back copies a line under the mutex, writes
 * the copy without it and marks the line busy meanwhile; a read copies what
 * the cache holds of its range under the mutex and reads the rest from the
 * image without it, so reads never wait for a write-back. Writes wait only
 * for room in a full cache; FUA writes, discards and write zeroes wait for
 * the write-back of lines in their range. Every function may be called from
 * several threads at once, except td_wcache_destroy().
 * Last in the lock order of tagdisk/queue.h.
 */
#ifndef TAGDISK_WCACHE_H
#define TAGDISK_WCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include "common/compiler.h"
#include "tagdisk/drive.h"

#define TD_WCACHE_LINE 4096

struct td_wcache;

struct td_wcache_stats {
	uint64_t cached_bytes;	    /* sectors held now, in bytes */
	uint64_t lines;		    /* lines held now */
	uint64_t writes;	    /* writes that completed into the cache */
	uint64_t written_back;	    /* bytes written back to the image (flush or eviction) */
	uint64_t evicted_lines;	    /* lines written back because the cache was full */
	uint64_t flushes;
	uint64_t powerfails;
	uint64_t lost_writes;	    /* summed over every powerfail */
	uint64_t lost_sectors;
};

struct td_powerfail_result {
	uint64_t lost_writes;  /* distinct writes that lost at least one sector */
	uint64_t lost_sectors;
	uint64_t kept_writes;  /* distinct writes whose cached sectors all survived */
	uint64_t kept_sectors; /* written back as the power failed */
};

/*
 * Create a cache of @cache_size bytes in front of @be (borrowed) for a disk
 * of @capacity bytes. Return: the cache, or NULL (errno set).
 */
struct td_wcache *td_wcache_create(const struct td_backend *be, uint64_t capacity,
				   uint64_t cache_size) td_nonnull(1) td_warn_unused;
/*
 * Free the cache, dropping what it still holds (flush first to keep it): the
 * data of writes that completed but never reached the image, for instance
 * because the last flush failed. Each lost byte range is logged (at error
 * level: a summary, then the first ranges). No other call may be running.
 * Return: the number of bytes lost, 0 when the cache was empty.
 */
uint64_t td_wcache_destroy(struct td_wcache *wc) td_nonnull(1);

/*
 * The backend operations, cached. Offsets and lengths are multiples of 512
 * bytes (-EINVAL otherwise). Each returns 0 or a negative errno.
 */
int td_wcache_read(struct td_wcache *wc, const struct iovec *iov, int iovcnt, uint64_t off)
	td_nonnull(1, 2);
int td_wcache_write(struct td_wcache *wc, const struct iovec *iov, int iovcnt, uint64_t off,
		    bool fua) td_nonnull(1, 2);
int td_wcache_flush(struct td_wcache *wc) td_nonnull(1);
int td_wcache_discard(struct td_wcache *wc, uint64_t off, uint64_t len) td_nonnull(1);
int td_wcache_write_zeroes(struct td_wcache *wc, uint64_t off, uint64_t len) td_nonnull(1);

/*
 * Lose power: write back a random @keep_pct percent (0..100) of the cached
 * lines, chosen with a generator seeded by @seed, and drop the rest.
 * Return: 0, or a negative errno when writing back failed (the cache is
 * emptied anyway).
 */
int td_wcache_powerfail(struct td_wcache *wc, unsigned int keep_pct, uint64_t seed,
			struct td_powerfail_result *res) td_nonnull(1, 4);

void td_wcache_get_stats(struct td_wcache *wc, struct td_wcache_stats *st) td_nonnull(1, 2);

/*
 * The first run of cached sectors that ends after byte @off: [*@start, *@end)
 * in bytes (*@start may lie before @off, in @off's sector). Those bytes read
 * back from the cache whatever the image holds there: SEEK_DATA, SEEK_HOLE
 * and st_blocks on the disk must count them as data. A sector leaves the
 * cache only once the image has it, so asking the cache first and the image
 * second never misses data written before the question.
 * Return: false when nothing at or after @off is cached.
 */
bool td_wcache_next_cached(struct td_wcache *wc, uint64_t off, uint64_t *start, uint64_t *end)
	td_nonnull(1, 3, 4);

#endif /* TAGDISK_WCACHE_H */
