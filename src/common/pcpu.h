/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pcpu.h - counters that threads on different CPUs bump without sharing a
 * cache line: one shard per CPU (modulo TD_PCPU_SHARDS), summed when read.
 *
 * A shard is picked by the CPU the caller runs on at the moment it adds
 * (sched_getcpu(), which glibc answers from the rseq area without a system
 * call), so an increment and its matching decrement may land in different
 * shards; only the sum means anything. Adds are atomic read-modify-writes,
 * so a thread that migrates between reading its CPU and adding only costs
 * a shared line, never a lost count.
 *
 * The operations are sequentially consistent (on x86 that costs the same as
 * relaxed ones: a locked add and a plain load). That is what lets two
 * monotonic counters answer "did every start end?" while both keep moving:
 * see td_pcpu_pending().
 */
#ifndef TAGDISK_PCPU_H
#define TAGDISK_PCPU_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "common/compiler.h"

#define TD_PCPU_SHARDS 8

struct td_pcpu_shard {
	_Atomic uint64_t v;
} td_cacheline_aligned;

struct td_pcpu_counter {
	struct td_pcpu_shard shard[TD_PCPU_SHARDS];
};

/* Return: the shard index of the CPU this thread runs on now. */
static inline unsigned int td_pcpu_index(void)
{
	int cpu = sched_getcpu();

	return cpu < 0 ? 0 : (unsigned int)cpu % TD_PCPU_SHARDS;
}

static inline void td_pcpu_init(struct td_pcpu_counter *c)
{
	for (unsigned int i = 0; i < TD_PCPU_SHARDS; i++)
		atomic_init(&c->shard[i].v, 0);
}

static inline void td_pcpu_add(struct td_pcpu_counter *c, uint64_t n)
{
	atomic_fetch_add(&c->shard[td_pcpu_index()].v, n);
}

/* Return: the sum of the shards, each read once, in index order. */
static inline uint64_t td_pcpu_sum(struct td_pcpu_counter *c)
{
	uint64_t sum = 0;

	for (unsigned int i = 0; i < TD_PCPU_SHARDS; i++)
		sum += atomic_load(&c->shard[i].v);
	return sum;
}

/*
 * @started and @ended only grow, and every end is added after its start.
 * Return: at least the number started and not ended at one moment during
 * the call, so 0 means that at that moment every start had ended. Ends are
 * summed first: each one counted had its start added before, so the later
 * sum of starts counts that start too, and the difference is never short.
 */
static inline uint64_t td_pcpu_pending(struct td_pcpu_counter *started,
				       struct td_pcpu_counter *ended)
{
	uint64_t e = td_pcpu_sum(ended);

	return td_pcpu_sum(started) - e;
}

#endif /* TAGDISK_PCPU_H */
