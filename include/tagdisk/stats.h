/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stats.h - the counters behind `stats`, `status` and `iostat`.
 *
 * Per-operation counts, sectors, merges, total latency and a latency
 * histogram, plus queue events (deferred, killed, requeued, resets,
 * timeouts) and the busy-time integrals of /sys/block/<dev>/stat (io_ticks,
 * time_in_queue).
 *
 * Counters are sharded: each thread adds to one of TD_STATS_SHARDS
 * cache-line-aligned shards with relaxed atomics, so submitters on different
 * CPUs do not bounce one line; a snapshot sums the shards. The in-flight
 * integral is kept under a small spinlock of its own.
 *
 * Per-CPU stats (td_stats_create_percpu(), for mq and bio queues) take no lock at
 * all, like Linux's part_stat since 5.x: each CPU adds to the shard of its
 * CPU, the in-flight count included; time_in_queue is the sum of the
 * completed requests' latencies; and io_ticks is approximated with a stamp
 * that moves at most once per TD_STATS_TICK_NS (Linux: once per jiffy),
 * adding the time since the last stamp when the disk was busy then.
 *
 * The histogram is log-linear: TD_STATS_SUB buckets per power of two of
 * nanoseconds, so a percentile is exact to within 1/TD_STATS_SUB of its value.
 */
#ifndef TAGDISK_STATS_H
#define TAGDISK_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include "common/compiler.h"
#include "tagdisk/types.h"

#define TD_STATS_SHARDS	 8
#define TD_STATS_SUB_BITS 3
#define TD_STATS_SUB	 (1U << TD_STATS_SUB_BITS)
#define TD_STATS_BUCKETS (64U * TD_STATS_SUB)
/* Per-CPU stats: the io_ticks stamp's granularity (1 ms, a jiffy at HZ=1000). */
#define TD_STATS_TICK_NS 1000000ULL

enum td_stats_counter {
	TD_STAT_DEFERRED, /* prep said DEFER */
	TD_STAT_KILLED,	  /* prep said KILL */
	TD_STAT_REQUEUED, /* requests put back by resets */
	TD_STAT_RESETS,
	TD_STAT_TIMEOUTS,
	TD_STAT_RETRIES_EXHAUSTED, /* failed after max_retries */
	TD_STAT_NR_COUNTERS,
};

struct td_stats;

struct td_stats_snapshot {
	uint64_t ios[TD_OP_COUNT];	     /* completed requests */
	uint64_t sectors[TD_OP_COUNT];	     /* 512-byte sectors completed */
	uint64_t errors[TD_OP_COUNT];	     /* completed with an error */
	uint64_t front_merges[TD_OP_COUNT];
	uint64_t back_merges[TD_OP_COUNT];
	uint64_t ticks_ns[TD_OP_COUNT];	     /* sum of latencies */
	uint64_t max_ns[TD_OP_COUNT];	     /* the largest latency */
	uint64_t counters[TD_STAT_NR_COUNTERS];
	uint64_t in_flight;		     /* requests started and not completed */
	uint64_t io_ticks_ns;		     /* time with at least one in flight */
	uint64_t time_in_queue_ns;	     /* integral of in_flight over time */
	uint64_t hist[TD_OP_COUNT][TD_STATS_BUCKETS];
};

/* Return: zeroed stats, or NULL (errno set). */
struct td_stats *td_stats_create(void) td_warn_unused;
/* Return: zeroed per-CPU stats with approximated busy time (see above), or NULL (errno set). */
struct td_stats *td_stats_create_percpu(void) td_warn_unused;
void td_stats_destroy(struct td_stats *st) td_nonnull(1);

/* A request (or bio in bio mode) entered the block layer at @now_ns. */
void td_stats_io_start(struct td_stats *st, uint64_t now_ns) td_nonnull(1);
/*
 * A request finished at @now_ns after @latency_ns; @nr_sectors moved; @error
 * is 0 or a negative errno.
 */
void td_stats_io_done(struct td_stats *st, enum td_op op, uint32_t nr_sectors,
		      uint64_t latency_ns, int error, uint64_t now_ns) td_nonnull(1);
/*
 * The same split for callers that handle requests in batches (the queue):
 * @n requests entered / left at @now_ns, and one request's counters with no
 * busy-time bookkeeping. td_stats_io_done() = td_stats_io_account() +
 * td_stats_io_end_n(1).
 */
void td_stats_io_start_n(struct td_stats *st, uint64_t now_ns, uint64_t n) td_nonnull(1);
void td_stats_io_end_n(struct td_stats *st, uint64_t now_ns, uint64_t n) td_nonnull(1);
void td_stats_io_account(struct td_stats *st, enum td_op op, uint32_t nr_sectors,
			 uint64_t latency_ns, int error) td_nonnull(1);
/* A request that had started was merged into another one: it leaves without an I/O. */
void td_stats_io_cancel(struct td_stats *st, uint64_t now_ns) td_nonnull(1);
/* A bio was merged into a queued request, or a request into its neighbour. */
void td_stats_merge(struct td_stats *st, enum td_op op, bool front) td_nonnull(1);
void td_stats_add(struct td_stats *st, enum td_stats_counter c, uint64_t n) td_nonnull(1);

/* Sum every shard into @out, bringing the busy-time integrals up to @now_ns. */
void td_stats_snapshot(struct td_stats *st, struct td_stats_snapshot *out, uint64_t now_ns)
	td_nonnull(1, 2);

/* Return: the bucket holding @ns, and the midpoint (in ns) of bucket @b. */
unsigned int td_stats_bucket(uint64_t ns);
uint64_t td_stats_bucket_value(unsigned int b);

/*
 * Return: the latency (ns) below which @fraction (0..1) of the samples in
 * @hist fall, or 0 when @hist is empty.
 */
uint64_t td_stats_percentile(const uint64_t hist[TD_STATS_BUCKETS], double fraction) td_nonnull(1);

/*
 * The same, for latencies whose largest is @max_ns: a fraction that falls in
 * the highest bucket in use reads @max_ns itself rather than that bucket's
 * midpoint. So no percentile exceeds the largest sample, p100 is exact, and
 * so is every percentile of a single sample (which then equals the mean).
 * Return: 0 when @hist is empty.
 */
uint64_t td_stats_percentile_max(const uint64_t hist[TD_STATS_BUCKETS], double fraction,
				 uint64_t max_ns) td_nonnull(1);

/* Return: static name of @c ("deferred", "killed", "requeued", "resets", "timeouts", ...). */
const char *td_stats_counter_name(enum td_stats_counter c);

#endif /* TAGDISK_STATS_H */
