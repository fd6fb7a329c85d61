// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * stats.c - sharded I/O counters, busy-time integrals and latency histograms.
 *
 * Data structure
 *
 *   struct td_stats holds TD_STATS_SHARDS shards and one busy-time record.
 *   A shard is a block of relaxed atomic counters (per-op sectors, errors,
 *   merges, summed latency, histogram; the queue-event counters; the number
 *   of I/Os is the histogram's total, so it costs no counter of its own),
 *   aligned to a cache line so two shards never share one. Each thread picks
 *   its shard once, round-robin from a global counter, and keeps the index in
 *   a thread-local variable; the index is the same for every td_stats object,
 *   which is fine because any thread may add to any shard. More threads than
 *   shards simply share shards: the counters are atomic read-modify-writes,
 *   so sharing costs cache traffic, never correctness.
 *
 *   The busy-time record {in_flight, last_change_ns, io_ticks_ns,
 *   time_in_queue_ns} changes as a whole at every start and end, so it
 *   sits under a spinlock (an atomic_flag) instead of being sharded; the
 *   critical section is a handful of arithmetic instructions.
 *
 * Busy-time integrals (as in /sys/block/<dev>/stat)
 *
 *   in_flight goes up at td_stats_io_start() and down at td_stats_io_done(),
 *   or at td_stats_io_cancel() for a request merged into another one (it
 *   leaves without being counted as an I/O). At each change of in_flight at
 *   time now, the interval since the last change is closed:
 *   time_in_queue += (now - last) * in_flight, and io_ticks += (now - last)
 *   when in_flight > 0. Timestamps are taken by the callers before they
 *   reach the lock, so two racing callers can arrive out of order; an
 *   interval that would be negative is counted as zero and last_change_ns
 *   never moves backwards. A snapshot closes the open interval into its
 *   output only and leaves the record alone.
 *
 * Histogram (log-linear, TD_STATS_SUB = 2^TD_STATS_SUB_BITS sub-buckets)
 *
 *   A latency v (ns) below TD_STATS_SUB has bucket v: those are exact. Above,
 *   with e = floor(log2 v), the range [2^e, 2^(e+1)) is cut into TD_STATS_SUB
 *   equal slices of width 2^(e - SUB_BITS), and v goes to
 *
 *       (e - SUB_BITS + 1) * SUB  +  ((v >> (e - SUB_BITS)) & (SUB - 1))
 *
 *   i.e. group g = e - SUB_BITS + 1 (group 0 being the exact buckets) and the
 *   SUB_BITS bits after the leading one. The index grows with v, and
 *   UINT64_MAX (e = 63) lands in bucket (64 - SUB_BITS) * SUB + SUB - 1, which
 *   is below TD_STATS_BUCKETS; the buckets past it are never used.
 *
 *   td_stats_bucket_value() returns the midpoint low + width / 2 of a bucket
 *   (the value itself for width 1). Error bound: a value v >= 2^e is at most
 *   width / 2 = 2^(e - SUB_BITS - 1) away from its bucket's midpoint, so a
 *   percentile read from the histogram is within v / (2 * TD_STATS_SUB) of
 *   the true sample (1/16 with 8 sub-buckets), and exact below TD_STATS_SUB.
 *
 * Per-CPU mode (td_stats_create_percpu)
 *
 *   The shard is the one of the CPU the caller runs on (sched_getcpu(),
 *   modulo TD_STATS_SHARDS), and the busy-time record is not used: each
 *   shard also counts starts minus ends (in_flight, which may go negative in
 *   one shard when a request ends on another CPU; the sum cannot), the
 *   snapshot's time_in_queue is the sum of the latencies, and io_ticks works
 *   as Linux's update_io_ticks(): now is rounded down to a tick; when it is
 *   past the stamp, the caller that moves the stamp (compare-and-swap) adds
 *   the time since the old stamp, if a request ended then or any was in
 *   flight (summed over the shards, once per tick at most). Starts update
 *   the stamp before they count themselves in flight, as Linux does.
 *
 * Snapshots sum the shards with relaxed loads while other threads keep
 * adding, so a snapshot is not one instant: each counter is exact as of some
 * moment during the call, and never goes backwards between two snapshots.
 */
#include <assert.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "tagdisk/stats.h"

/* Bucket of UINT64_MAX: the last one td_stats_bucket() can return. */
#define STATS_LAST_BUCKET ((64U - TD_STATS_SUB_BITS) * TD_STATS_SUB + TD_STATS_SUB - 1)

_Static_assert(STATS_LAST_BUCKET < TD_STATS_BUCKETS, "histogram too small for 64-bit latencies");
_Static_assert(TD_STATS_SUB_BITS >= 1 && TD_STATS_SUB_BITS < 32, "bad TD_STATS_SUB_BITS");

/* Spins before a waiter on the busy lock yields; the holder may have been preempted. */
#define STATS_SPINS_BEFORE_YIELD 64

struct td_stats_shard {
	_Atomic uint64_t sectors[TD_OP_COUNT];
	_Atomic uint64_t errors[TD_OP_COUNT];
	_Atomic uint64_t front_merges[TD_OP_COUNT];
	_Atomic uint64_t back_merges[TD_OP_COUNT];
	_Atomic uint64_t ticks_ns[TD_OP_COUNT];
	_Atomic uint64_t max_ns[TD_OP_COUNT]; /* only grows; the snapshot takes the largest */
	_Atomic uint64_t counters[TD_STAT_NR_COUNTERS];
	_Atomic uint64_t hist[TD_OP_COUNT][TD_STATS_BUCKETS];
	_Atomic int64_t in_flight; /* per-CPU mode: starts minus ends on this shard */
} td_cacheline_aligned;

struct td_stats_busy {
	atomic_flag lock;
	uint64_t in_flight;	   /* guarded by lock */
	uint64_t last_change_ns;   /* guarded by lock: end of the last closed interval */
	uint64_t io_ticks_ns;	   /* guarded by lock */
	uint64_t time_in_queue_ns; /* guarded by lock */
} td_cacheline_aligned;

/* Per-CPU mode's io_ticks: written at most once per tick, so one line does. */
struct td_stats_ticks {
	_Atomic uint64_t stamp_ns; /* the last tick accounted */
	_Atomic uint64_t io_ticks_ns;
} td_cacheline_aligned;

struct td_stats {
	struct td_stats_shard shards[TD_STATS_SHARDS];
	struct td_stats_busy busy;
	struct td_stats_ticks ticks;
	bool percpu; /* fixed at creation */
};

static const char *const counter_names[TD_STAT_NR_COUNTERS] = {
	[TD_STAT_DEFERRED] = "deferred",
	[TD_STAT_KILLED] = "killed",
	[TD_STAT_REQUEUED] = "requeued",
	[TD_STAT_RESETS] = "resets",
	[TD_STAT_TIMEOUTS] = "timeouts",
	[TD_STAT_RETRIES_EXHAUSTED] = "retries_exhausted",
};

/* Hands out shard indexes round-robin; only its own value matters, hence relaxed. */
static atomic_uint stats_next_shard;
/* This thread's shard index plus one; 0 until the thread first counts something. */
static _Thread_local unsigned int stats_shard_plus1;

static struct td_stats_shard *stats_shard(struct td_stats *st)
{
	unsigned int i = stats_shard_plus1;

	if (st->percpu) {
		int cpu = sched_getcpu();

		return &st->shards[cpu < 0 ? 0 : (unsigned int)cpu % TD_STATS_SHARDS];
	}

	if (td_unlikely(!i)) {
		i = atomic_fetch_add_explicit(&stats_next_shard, 1, memory_order_relaxed);
		i = i % TD_STATS_SHARDS + 1;
		stats_shard_plus1 = i;
	}
	return &st->shards[i - 1];
}

static inline void stats_inc(_Atomic uint64_t *ctr, uint64_t n)
{
	atomic_fetch_add_explicit(ctr, n, memory_order_relaxed);
}

/* Raise *@ctr to @v if it is below. Relaxed: the maximum orders nothing else. */
static inline void stats_max(_Atomic uint64_t *ctr, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(ctr, memory_order_relaxed);

	while (cur < v &&
	       !atomic_compare_exchange_weak_explicit(ctr, &cur, v, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

static void busy_lock(struct td_stats_busy *b)
{
	unsigned int spins = 0;

	/* Acquire pairs with the release in busy_unlock(): we see the last holder's writes. */
	while (atomic_flag_test_and_set_explicit(&b->lock, memory_order_acquire)) {
		if (++spins % STATS_SPINS_BEFORE_YIELD == 0)
			sched_yield();
		else
			cpu_relax();
	}
}

static void busy_unlock(struct td_stats_busy *b)
{
	/* Release pairs with the acquire in busy_lock(). */
	atomic_flag_clear_explicit(&b->lock, memory_order_release);
}

/* Close the interval [last_change_ns, now_ns) into the integrals. Busy lock held. */
static void busy_advance_locked(struct td_stats_busy *b, uint64_t now_ns)
{
	if (now_ns <= b->last_change_ns)
		return;
	uint64_t delta = now_ns - b->last_change_ns;

	if (b->in_flight) {
		b->io_ticks_ns += delta;
		b->time_in_queue_ns += delta * b->in_flight;
	}
	b->last_change_ns = now_ns;
}

/* @n requests stopped being in flight at @now_ns (completed, or merged away). */
static void busy_end(struct td_stats_busy *b, uint64_t now_ns, uint64_t n)
{
	busy_lock(b);
	assert(b->in_flight >= n);
	busy_advance_locked(b, now_ns);
	b->in_flight -= n;
	busy_unlock(b);
}

struct td_stats *td_stats_create(void)
{
	struct td_stats *st = aligned_alloc(TD_CACHELINE, sizeof(*st));

	if (!st)
		return NULL;
	/* All-zero bytes are zero for the lock-free 64-bit atomics of every target we build on. */
	memset(st, 0, sizeof(*st));
	atomic_flag_clear_explicit(&st->busy.lock, memory_order_relaxed);
	return st;
}

struct td_stats *td_stats_create_percpu(void)
{
	struct td_stats *st = td_stats_create();

	if (st)
		st->percpu = true;
	return st;
}

/* Per-CPU mode: requests in flight, summed over the shards. */
static uint64_t percpu_in_flight(struct td_stats *st)
{
	int64_t n = 0;

	for (unsigned int s = 0; s < TD_STATS_SHARDS; s++)
		n += atomic_load_explicit(&st->shards[s].in_flight, memory_order_relaxed);
	return n > 0 ? (uint64_t)n : 0;
}

/* Per-CPU mode: Linux's update_io_ticks() (see the top of the file). */
static void percpu_update_ticks(struct td_stats *st, uint64_t now_ns, bool end)
{
	uint64_t now = now_ns - now_ns % TD_STATS_TICK_NS;
	uint64_t stamp = atomic_load_explicit(&st->ticks.stamp_ns, memory_order_relaxed);

	if (td_likely(now <= stamp))
		return;
	/* Relaxed: the stamp only elects who accounts this tick; it publishes nothing. */
	if (!atomic_compare_exchange_strong_explicit(&st->ticks.stamp_ns, &stamp, now,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	if (end || percpu_in_flight(st))
		atomic_fetch_add_explicit(&st->ticks.io_ticks_ns, now - stamp, memory_order_relaxed);
}

static void percpu_start(struct td_stats *st, uint64_t now_ns, uint64_t n)
{
	percpu_update_ticks(st, now_ns, false);
	atomic_fetch_add_explicit(&stats_shard(st)->in_flight, (int64_t)n, memory_order_relaxed);
}

static void percpu_end(struct td_stats *st, uint64_t now_ns, uint64_t n)
{
	percpu_update_ticks(st, now_ns, true);
	atomic_fetch_sub_explicit(&stats_shard(st)->in_flight, (int64_t)n, memory_order_relaxed);
}

void td_stats_destroy(struct td_stats *st)
{
	free(st);
}

void td_stats_io_start_n(struct td_stats *st, uint64_t now_ns, uint64_t n)
{
	struct td_stats_busy *b = &st->busy;

	if (st->percpu) {
		percpu_start(st, now_ns, n);
		return;
	}
	busy_lock(b);
	busy_advance_locked(b, now_ns);
	b->in_flight += n;
	busy_unlock(b);
}

void td_stats_io_start(struct td_stats *st, uint64_t now_ns)
{
	td_stats_io_start_n(st, now_ns, 1);
}

void td_stats_io_end_n(struct td_stats *st, uint64_t now_ns, uint64_t n)
{
	if (st->percpu)
		percpu_end(st, now_ns, n);
	else
		busy_end(&st->busy, now_ns, n);
}

void td_stats_io_account(struct td_stats *st, enum td_op op, uint32_t nr_sectors,
			 uint64_t latency_ns, int error)
{
	struct td_stats_shard *sh = stats_shard(st);

	assert((unsigned int)op < TD_OP_COUNT);
	stats_inc(&sh->sectors[op], nr_sectors);
	if (error)
		stats_inc(&sh->errors[op], 1);
	stats_inc(&sh->ticks_ns[op], latency_ns);
	stats_max(&sh->max_ns[op], latency_ns);
	stats_inc(&sh->hist[op][td_stats_bucket(latency_ns)], 1);
}

void td_stats_io_done(struct td_stats *st, enum td_op op, uint32_t nr_sectors,
		      uint64_t latency_ns, int error, uint64_t now_ns)
{
	struct td_stats_shard *sh = stats_shard(st);

	assert((unsigned int)op < TD_OP_COUNT);
	stats_inc(&sh->sectors[op], nr_sectors);
	if (error)
		stats_inc(&sh->errors[op], 1);
	stats_inc(&sh->ticks_ns[op], latency_ns);
	stats_max(&sh->max_ns[op], latency_ns);
	stats_inc(&sh->hist[op][td_stats_bucket(latency_ns)], 1);
	td_stats_io_end_n(st, now_ns, 1);
}

void td_stats_io_cancel(struct td_stats *st, uint64_t now_ns)
{
	td_stats_io_end_n(st, now_ns, 1);
}

void td_stats_merge(struct td_stats *st, enum td_op op, bool front)
{
	struct td_stats_shard *sh = stats_shard(st);

	assert((unsigned int)op < TD_OP_COUNT);
	if (front)
		stats_inc(&sh->front_merges[op], 1);
	else
		stats_inc(&sh->back_merges[op], 1);
}

void td_stats_add(struct td_stats *st, enum td_stats_counter c, uint64_t n)
{
	assert((unsigned int)c < TD_STAT_NR_COUNTERS);
	stats_inc(&stats_shard(st)->counters[c], n);
}

static inline uint64_t stats_load(_Atomic uint64_t *ctr)
{
	return atomic_load_explicit(ctr, memory_order_relaxed);
}

void td_stats_snapshot(struct td_stats *st, struct td_stats_snapshot *out, uint64_t now_ns)
{
	struct td_stats_busy *b = &st->busy;

	memset(out, 0, sizeof(*out));
	for (unsigned int s = 0; s < TD_STATS_SHARDS; s++) {
		struct td_stats_shard *sh = &st->shards[s];

		for (unsigned int op = 0; op < TD_OP_COUNT; op++) {
			out->sectors[op] += stats_load(&sh->sectors[op]);
			out->errors[op] += stats_load(&sh->errors[op]);
			out->front_merges[op] += stats_load(&sh->front_merges[op]);
			out->back_merges[op] += stats_load(&sh->back_merges[op]);
			out->ticks_ns[op] += stats_load(&sh->ticks_ns[op]);
			out->max_ns[op] = TD_MAX(out->max_ns[op], stats_load(&sh->max_ns[op]));
			for (unsigned int i = 0; i < TD_STATS_BUCKETS; i++)
				out->hist[op][i] += stats_load(&sh->hist[op][i]);
		}
		for (unsigned int c = 0; c < TD_STAT_NR_COUNTERS; c++)
			out->counters[c] += stats_load(&sh->counters[c]);
	}
	/* Every completed I/O lands in exactly one bucket: the histogram counts them. */
	for (unsigned int op = 0; op < TD_OP_COUNT; op++)
		for (unsigned int i = 0; i < TD_STATS_BUCKETS; i++)
			out->ios[op] += out->hist[op][i];

	if (st->percpu) {
		uint64_t stamp = atomic_load_explicit(&st->ticks.stamp_ns, memory_order_relaxed);

		out->in_flight = percpu_in_flight(st);
		out->io_ticks_ns =
			atomic_load_explicit(&st->ticks.io_ticks_ns, memory_order_relaxed);
		/* The open interval, as the next update would count it. */
		if (out->in_flight && now_ns > stamp)
			out->io_ticks_ns += now_ns - now_ns % TD_STATS_TICK_NS - stamp;
		for (unsigned int op = 0; op < TD_OP_COUNT; op++)
			out->time_in_queue_ns += out->ticks_ns[op];
		return;
	}
	busy_lock(b);
	out->in_flight = b->in_flight;
	out->io_ticks_ns = b->io_ticks_ns;
	out->time_in_queue_ns = b->time_in_queue_ns;
	if (b->in_flight && now_ns > b->last_change_ns) {
		out->io_ticks_ns += now_ns - b->last_change_ns;
		out->time_in_queue_ns += (now_ns - b->last_change_ns) * b->in_flight;
	}
	busy_unlock(b);
}

unsigned int td_stats_bucket(uint64_t ns)
{
	if (ns < TD_STATS_SUB)
		return (unsigned int)ns;
	unsigned int e = 63U - (unsigned int)__builtin_clzll(ns);
	unsigned int shift = e - TD_STATS_SUB_BITS;

	return (e - TD_STATS_SUB_BITS + 1) * TD_STATS_SUB +
	       (unsigned int)((ns >> shift) & (TD_STATS_SUB - 1));
}

uint64_t td_stats_bucket_value(unsigned int b)
{
	if (b < TD_STATS_SUB)
		return b;
	/* Buckets past the last reachable one hold nothing; answer for the last. */
	if (b > STATS_LAST_BUCKET)
		b = STATS_LAST_BUCKET;
	unsigned int group = b / TD_STATS_SUB;
	unsigned int sub = b % TD_STATS_SUB;
	unsigned int shift = group - 1; /* log2 of the bucket's width */
	uint64_t low = (uint64_t)(TD_STATS_SUB + sub) << shift;

	return low + ((1ULL << shift) >> 1);
}

uint64_t td_stats_percentile(const uint64_t hist[TD_STATS_BUCKETS], double fraction)
{
	uint64_t total = 0;

	for (unsigned int i = 0; i < TD_STATS_BUCKETS; i++)
		total += hist[i];
	if (!total)
		return 0;

	/* Written so that NaN, like anything not above 0, means the first sample. */
	if (!(fraction > 0.0))
		fraction = 0.0;
	if (fraction > 1.0)
		fraction = 1.0;

	/*
	 * rank = ceil(fraction * total), without libm. A fraction such as 0.99
	 * is not exact in binary, and the product may land a hair above the
	 * integer it stands for; shave a relative 1e-12 off first so that
	 * p99 of 1000 samples is the 990th, not the 991st.
	 */
	double x = fraction * (double)total;
	uint64_t rank;

	x -= x * 1e-12;
	if (x >= (double)total) {
		rank = total; /* also keeps the conversion below in range */
	} else {
		rank = (uint64_t)x;
		if ((double)rank < x)
			rank++;
		rank = TD_MAX(rank, 1);
		rank = TD_MIN(rank, total);
	}

	uint64_t seen = 0;

	for (unsigned int i = 0; i < TD_STATS_BUCKETS; i++) {
		seen += hist[i];
		if (seen >= rank)
			return td_stats_bucket_value(i);
	}
	/* Not reached: seen ends at total >= rank. */
	assert(0);
	return 0;
}

uint64_t td_stats_percentile_max(const uint64_t hist[TD_STATS_BUCKETS], double fraction,
				 uint64_t max_ns)
{
	uint64_t p = td_stats_percentile(hist, fraction);
	unsigned int top = TD_STATS_BUCKETS;

	while (top > 0 && !hist[top - 1])
		top--;
	/* Empty, or a maximum that does not belong to this histogram: the bucket's value. */
	if (!top || td_stats_bucket(max_ns) != top - 1)
		return p;
	return td_stats_bucket(p) == top - 1 ? max_ns : p;
}

const char *td_stats_counter_name(enum td_stats_counter c)
{
	if ((unsigned int)c >= TD_STAT_NR_COUNTERS)
		return NULL;
	return counter_names[c];
}
