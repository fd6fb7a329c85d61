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
 *  - Reads come from the image, with cached sectors laid over them.
 *  - When the cache holds cache_size bytes, the oldest lines are written
 *    back (and leave the cache) before new data goes in.
 *  - FUA writes go through to the image (durable before completing) and
 *    take their sectors out of the cache.
 *  - Discard and write zeroes act on the image at once and drop the cached
 *    sectors of their range.
 *  - Flush writes every line back in sector order, then flushes the image.
 *
 * LOCKING: one mutex, held across the backend I/O it does, so the cache's
 * view and the image's stay consistent; in volatile mode the drive's
 * commands are serialised through it (it is a testing mode, not a fast one).
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
/* Free the cache, dropping what it holds (flush first to keep it). */
void td_wcache_destroy(struct td_wcache *wc) td_nonnull(1);

/* The backend operations, cached. Each returns 0 or a negative errno. */
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

#endif /* TAGDISK_WCACHE_H */
