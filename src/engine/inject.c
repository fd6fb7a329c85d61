// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inject.c - the fault injector the drive consults before every command.
 *
 * State, all under inj->lock:
 *
 *   rules[]   error and hang rules in the order they were added. A rule whose
 *             times_left reached 0 is spent: it never fires again but stays
 *             listed with its fired count until td_inject_clear(), so
 *             `inject list` can still say what happened. Spent rules keep
 *             their slot, which is why -ENOSPC can come back after a clear.
 *   every     at most one "every N" rule; setting it again replaces it (and
 *             starts its fired count from 0).
 *   latency   at most one latency value; 0 means none.
 *   seed, rng the seed and the generator state derived from it.
 *
 * The generator is splitmix64: one 64-bit word of state, a fixed increment and
 * a mixing function, so a seed fully decides the sequence. It advances exactly
 * once for each read, write, discard or write-zeroes command checked while an
 * every rule is set, whatever the other rules decide for that command: adding
 * an error or hang rule therefore never shifts which commands every N picks.
 * Such a command fails when draw % N == 0. Only td_inject_set_seed() restarts
 * the sequence; td_inject_set_every() and td_inject_clear() leave it where it
 * is.
 *
 * Deciding a command, in this order:
 *   1. latency, when set, applies and counts as fired;
 *   2. the first hang rule with times_left > 0 holds the command (flushes
 *      included). A held command is never also failed: hang wins, no error
 *      rule is consumed and the every rule does not count it as fired;
 *   3. flushes stop here;
 *   4. the first error rule with times_left > 0 that matches the op class and
 *      overlaps the command fails it with -EIO (one error rule per command);
 *   5. otherwise the every rule's draw may fail it.
 *
 * inj->armed is true whenever something can still fire: latency set, an every
 * rule set, or a rule with times_left > 0. It lets td_inject_check() answer
 * "nothing" with one relaxed load. Relaxed is enough because the flag guards
 * no data: every rule is read under the mutex, and a command that races with
 * an add and misses the new rule is no different from one that started a
 * moment earlier.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/lock.h"
#include "common/random.h"
#include "tagdisk/inject.h"

struct td_inject {
	struct td_mutex lock;
	struct td_inject_rule rules[TD_INJECT_MAX_RULES]; /* lock: error and hang rules */
	size_t nr_rules;			/* lock */
	bool has_every;				/* lock */
	struct td_inject_rule every;		/* lock: valid when has_every */
	struct td_inject_rule latency;		/* lock: valid when latency_us != 0 */
	uint64_t seed;				/* lock */
	uint64_t rng;				/* lock: splitmix64 state */
	/*
	 * Written under lock, read without it (relaxed, see top) by every
	 * command: a line of its own, so nothing written nearby evicts it.
	 */
	atomic_bool armed td_cacheline_aligned;
} td_cacheline_aligned;

static bool rule_live(const struct td_inject_rule *rule)
{
	return rule->times_left > 0;
}

static void rule_consume(struct td_inject_rule *rule)
{
	rule->fired++;
	if (rule->times_left != TD_INJECT_FOREVER)
		rule->times_left--;
}

static void update_armed_locked(struct td_inject *inj)
{
	bool armed = inj->has_every || inj->latency.latency_us != 0;

	assert(td_lock_held(&inj->lock));
	for (size_t i = 0; !armed && i < inj->nr_rules; i++)
		armed = rule_live(&inj->rules[i]);
	atomic_store_explicit(&inj->armed, armed, memory_order_relaxed);
}

struct td_inject *td_inject_create(uint64_t seed)
{
	struct td_inject *inj = aligned_alloc(_Alignof(struct td_inject), sizeof(*inj));

	if (!inj)
		return NULL;
	memset(inj, 0, sizeof(*inj));
	td_mutex_init(&inj->lock);
	inj->seed = seed;
	inj->rng = seed;
	inj->every.kind = TD_INJECT_EVERY;
	inj->latency.kind = TD_INJECT_LATENCY;
	atomic_init(&inj->armed, false);
	return inj;
}

void td_inject_destroy(struct td_inject *inj)
{
	td_mutex_destroy(&inj->lock);
	free(inj);
}

static int add_rule(struct td_inject *inj, const struct td_inject_rule *rule)
{
	int ret = 0;

	td_mutex_lock(&inj->lock);
	if (inj->nr_rules == TD_INJECT_MAX_RULES) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	inj->rules[inj->nr_rules++] = *rule;
	update_armed_locked(inj);
out_unlock:
	td_mutex_unlock(&inj->lock);
	return ret;
}

int td_inject_add_error(struct td_inject *inj, enum td_inject_op op, uint64_t sector,
			uint64_t count, uint64_t times)
{
	const struct td_inject_rule rule = {
		.kind = TD_INJECT_ERROR,
		.op = op,
		.sector = sector,
		.count = count,
		.times_left = times,
	};

	if (op != TD_INJECT_READ && op != TD_INJECT_WRITE && op != TD_INJECT_ANY)
		return -EINVAL;
	if (count == 0 || times == 0 || count > UINT64_MAX - sector)
		return -EINVAL;
	return add_rule(inj, &rule);
}

int td_inject_add_hang(struct td_inject *inj, uint64_t times)
{
	const struct td_inject_rule rule = {
		.kind = TD_INJECT_HANG,
		.times_left = times,
	};

	if (times == 0)
		return -EINVAL;
	return add_rule(inj, &rule);
}

int td_inject_set_every(struct td_inject *inj, uint32_t n)
{
	if (n == 0)
		return -EINVAL;
	td_mutex_lock(&inj->lock);
	inj->every = (struct td_inject_rule){ .kind = TD_INJECT_EVERY, .every = n };
	inj->has_every = true;
	update_armed_locked(inj);
	td_mutex_unlock(&inj->lock);
	return 0;
}

void td_inject_set_latency(struct td_inject *inj, uint32_t us)
{
	td_mutex_lock(&inj->lock);
	inj->latency = (struct td_inject_rule){ .kind = TD_INJECT_LATENCY, .latency_us = us };
	update_armed_locked(inj);
	td_mutex_unlock(&inj->lock);
}

void td_inject_set_seed(struct td_inject *inj, uint64_t seed)
{
	td_mutex_lock(&inj->lock);
	inj->seed = seed;
	inj->rng = seed;
	td_mutex_unlock(&inj->lock);
}

uint64_t td_inject_seed(struct td_inject *inj)
{
	uint64_t seed;

	td_mutex_lock(&inj->lock);
	seed = inj->seed;
	td_mutex_unlock(&inj->lock);
	return seed;
}

void td_inject_clear(struct td_inject *inj)
{
	td_mutex_lock(&inj->lock);
	inj->nr_rules = 0;
	inj->has_every = false;
	inj->every = (struct td_inject_rule){ .kind = TD_INJECT_EVERY };
	inj->latency = (struct td_inject_rule){ .kind = TD_INJECT_LATENCY };
	update_armed_locked(inj);
	td_mutex_unlock(&inj->lock);
}

size_t td_inject_list(struct td_inject *inj, struct td_inject_rule *out, size_t max)
{
	size_t n = 0;

	td_mutex_lock(&inj->lock);
	for (size_t i = 0; i < inj->nr_rules; i++, n++) {
		if (n < max)
			out[n] = inj->rules[i];
	}
	if (inj->has_every) {
		if (n < max)
			out[n] = inj->every;
		n++;
	}
	if (inj->latency.latency_us != 0) {
		if (n < max)
			out[n] = inj->latency;
		n++;
	}
	td_mutex_unlock(&inj->lock);
	return n;
}

static bool op_matches(enum td_inject_op cls, enum td_op op)
{
	switch (cls) {
	case TD_INJECT_READ:
		return op == TD_OP_READ;
	case TD_INJECT_WRITE:
		return td_op_is_write(op);
	case TD_INJECT_ANY:
		return op == TD_OP_READ || td_op_is_write(op);
	}
	return false;
}

/* Both ranges are non-empty; written without end offsets so nothing can overflow. */
static bool ranges_overlap(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len)
{
	return a < b ? b - a < a_len : a - b < b_len;
}

static struct td_inject_rule *find_hang_locked(struct td_inject *inj)
{
	for (size_t i = 0; i < inj->nr_rules; i++) {
		struct td_inject_rule *rule = &inj->rules[i];

		if (rule->kind == TD_INJECT_HANG && rule_live(rule))
			return rule;
	}
	return NULL;
}

static struct td_inject_rule *find_error_locked(struct td_inject *inj, enum td_op op,
						uint64_t sector, uint32_t nr_sectors)
{
	if (nr_sectors == 0)
		return NULL;
	for (size_t i = 0; i < inj->nr_rules; i++) {
		struct td_inject_rule *rule = &inj->rules[i];

		if (rule->kind != TD_INJECT_ERROR || !rule_live(rule))
			continue;
		if (op_matches(rule->op, op) &&
		    ranges_overlap(sector, nr_sectors, rule->sector, rule->count))
			return rule;
	}
	return NULL;
}

void td_inject_check(struct td_inject *inj, enum td_op op, uint64_t sector, uint32_t nr_sectors,
		     struct td_inject_verdict *v)
{
	struct td_inject_rule *rule;
	bool every_hit = false;

	assert((unsigned int)op < TD_OP_COUNT);
	*v = (struct td_inject_verdict){ 0 };
	if (td_likely(!atomic_load_explicit(&inj->armed, memory_order_relaxed)))
		return;

	td_mutex_lock(&inj->lock);
	if (inj->latency.latency_us != 0) {
		v->latency_us = inj->latency.latency_us;
		inj->latency.fired++;
	}
	/* Draw before anything can return early, so the sequence never depends on other rules. */
	if (inj->has_every && op != TD_OP_FLUSH)
		every_hit = td_splitmix64_next(&inj->rng) % inj->every.every == 0;

	rule = find_hang_locked(inj);
	if (rule) {
		v->hang = true;
	} else if (op != TD_OP_FLUSH) {
		rule = find_error_locked(inj, op, sector, nr_sectors);
		if (rule || every_hit)
			v->error = -EIO;
		if (!rule && every_hit)
			inj->every.fired++;
	}
	if (rule) {
		rule_consume(rule);
		if (!rule_live(rule))
			update_armed_locked(inj);
	}
	td_mutex_unlock(&inj->lock);
}

const char *td_inject_op_name(enum td_inject_op op)
{
	switch (op) {
	case TD_INJECT_READ:
		return "read";
	case TD_INJECT_WRITE:
		return "write";
	case TD_INJECT_ANY:
		return "any";
	}
	return "unknown";
}

const char *td_inject_kind_name(enum td_inject_kind kind)
{
	switch (kind) {
	case TD_INJECT_ERROR:
		return "error";
	case TD_INJECT_EVERY:
		return "every";
	case TD_INJECT_HANG:
		return "hang";
	case TD_INJECT_LATENCY:
		return "latency";
	}
	return "unknown";
}
