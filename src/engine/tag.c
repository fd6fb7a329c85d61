// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tag.c - tag maps: lock-free tag allocation for tagged command queueing.
 *
 * Data structure
 *
 *   words[64]      TD_TAG_DEPTH_MAX bits, 64 per word, each word alone on a
 *                  cache line. Bit n of word w set: tag w * 64 + n is in use.
 *   rqs[4096]      tag -> request; NULL while the tag is free.
 *   depth          tags [0, depth) may be started; tags above it that were
 *                  started before a shrink stay valid until they end.
 *   starved        a start failed and no end has reported it yet.
 *   users          {kick, user} entries under users_lock; the reference count
 *                  is their number (see "Lifetime" in tagdisk/tag.h).
 *
 * A tag is free, then claimed (its bit set by the winner of an atomic
 * fetch_or), then busy (rqs[tag] set), then releasing (rqs[tag] cleared),
 * then free again (bit cleared). Invariant: rqs[tag] != NULL only while the
 * bit is set, and only the thread that won the bit writes rqs[tag] until it
 * clears the bit again.
 *
 * Word size: a map from td_tag_map_create() uses all 64 bits of a word. One
 * from td_tag_map_create_spread() (an mq tag set) uses fewer, chosen from its
 * depth at creation as sbitmap_calculate_shift() does (the largest power of
 * two of at most 64 bits such that the depth fills four words, 8 at least),
 * so that even a small depth spans several cache lines and submitters on
 * different CPUs rarely touch the same one. Tag t lives in word t >> shift,
 * bit t & (bits - 1), so tags stay [0, depth); a resize keeps the shift.
 *
 * Spreading: every CPU has a home, a point of the map (see tag_home()), and
 * every scan starts at the word of the caller's CPU's home, wrapping, so
 * threads that work on different CPUs at the same time mostly touch
 * different cache lines; CPUs 0 and 1 are half the map apart, as Linux's
 * sbitmap keeps an allocation hint per CPU. The home does not follow the
 * last success: a submitter that takes 16 tags at a time would otherwise
 * creep a word further at every batch, into the next CPU's words, and the
 * two would meet at every lap. (Homes numbered by thread, which came
 * before, put two submitters a quarter of the map apart whenever some
 * other thread had started a tag in between.) Within one go of starts
 * (td_tag_start_at(), one dispatch pass of a queue) the scan resumes at
 * the word the previous start of the go took, so the hundredth start of a
 * deep pass does not reload the words the first ninety-nine filled; the
 * next go begins at the home again, so the cursor cannot creep.
 *
 * Memory ordering of the tag table (each pair named again where it is used):
 *  (a) td_tag_end() clears rqs[tag], then releases the bit (release part of
 *      its fetch_and); td_tag_start() claims the bit with an acquire fetch_or.
 *      So the old holder's NULL store happens before the new holder's store
 *      of its request: it can never land later and hide the new request, and
 *      the new holder starts after the old one finished using the tag.
 *  (b) td_tag_start() publishes the request with a release store of rqs[tag];
 *      td_tag_find() reads it with an acquire load, so a thread that finds
 *      the request also sees what the starter wrote into it. A thread that
 *      learned the tag number from the starter (through the queue lock or
 *      the drive's list) therefore finds the current request, never an
 *      older one: the old NULL store is ordered before the new store by (a).
 *  (c) Starvation is a store-load pattern: a failing start stores starved,
 *      then rescans the bitmap; an end clears its bit, then loads starved.
 *      All four are seq_cst, so one side always sees the other: either the
 *      rescan finds the freed tag or the end reports the starvation. Without
 *      it a start could fail just as the last busy tag ends, and nobody would
 *      ever kick the starved queue.
 *
 * Kicks: td_tag_map_kick() must not hold users_lock while it calls the kick
 * functions (a kick runs the queue, and the queue lock comes before the user
 * lock). It copies a few entries at a time to a local array, pinning each so
 * that td_tag_map_detach() waits for a call in progress before freeing the
 * entry. Each kick pass takes a generation number and marks the entries it
 * takes, so a pass visits an entry at most once however the list changes
 * while it is unlocked; an entry marked by a newer pass is left to that pass.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/list.h"
#include "common/lock.h"
#include "tagdisk/tag.h"

#define TAG_WORD_BITS 64
/* Fewest bits a word of a spread map uses. */
#define TAG_WORD_BITS_MIN 8
#define TAG_WORDS	  (TD_TAG_DEPTH_MAX / TAG_WORD_BITS_MIN)
/* Kick functions called per unlocked round of td_tag_map_kick(). */
#define TAG_KICK_BATCH 8

_Static_assert(TD_TAG_DEPTH_MAX % TAG_WORD_BITS == 0, "whole words of tags");
_Static_assert(TAG_WORD_BITS_MIN <= TAG_WORD_BITS, "a word holds at most 64 tags");
_Static_assert(TD_TAG_DEPTH_MAX <= INT_MAX, "tags are ints");

struct tag_word {
	_Atomic(uint64_t) bits;
} td_cacheline_aligned;

struct tag_user {
	struct td_list link; /* in td_tag_map.users; users_lock */
	td_tag_kick_fn kick; /* set before the entry is linked, then constant */
	void *user;	     /* likewise */
	uint64_t kick_gen;   /* newest kick pass that took this entry; users_lock */
	unsigned int pins;   /* kick passes calling ->kick right now; users_lock */
};

struct td_tag_map {
	struct tag_word words[TAG_WORDS];
	/* log2 of the tags per word (6: 64); fixed at creation, read without a lock. */
	unsigned int shift;
	/* Read by every start, written only by resize: a line of its own. */
	_Atomic(unsigned int) depth td_cacheline_aligned;
	/* Written when a start fails, cleared by an end: kept off the depth line. */
	atomic_bool starved td_cacheline_aligned;
	_Atomic(void *) rqs[TD_TAG_DEPTH_MAX] td_cacheline_aligned;

	struct td_mutex users_lock td_cacheline_aligned;
	struct td_cond unpinned;	/* an entry's pins dropped to 0; users_lock */
	struct td_list users;		/* struct tag_user; users_lock */
	uint64_t kick_gen;		/* last kick pass started; users_lock */
	_Atomic(unsigned int) nr_users; /* written under users_lock, read lock-free */
};

/*
 * Homes are fractions of the map in TAG_HOME_BITS bits (the word is that
 * fraction of the words below the depth). This thread's last CPU and that
 * CPU's home, so the bits are reversed only when the thread moves.
 */
#define TAG_HOME_BITS 16
static _Thread_local int tag_cpu = -1;
static _Thread_local unsigned int tag_cpu_home;

/*
 * The home of the CPU the caller runs on: CPU n gets the n-th point of the
 * van der Corput sequence (n's bits reversed behind the binary point): 0,
 * 1/2, 1/4, 3/4, 1/8, 5/8, ... So the first 2^k CPUs have homes exactly
 * 1/2^k of the map apart, whatever its depth.
 */
static unsigned int tag_home(void)
{
	int cpu = sched_getcpu();

	if (cpu < 0)
		cpu = 0;
	if (td_unlikely(cpu != tag_cpu)) {
		unsigned int home = 0;

		for (unsigned int b = 0; b < TAG_HOME_BITS; b++)
			home |= (((unsigned int)cpu >> b) & 1U) << (TAG_HOME_BITS - 1 - b);
		tag_cpu = cpu;
		tag_cpu_home = home;
	}
	return tag_cpu_home;
}

/* The map whose kick functions this thread is calling, to catch a detach from one. */
static _Thread_local const struct td_tag_map *tag_kicking;

/* Create a map whose words hold 1 << @shift tags. */
static struct td_tag_map *tag_map_create(unsigned int depth, unsigned int shift)
{
	struct td_tag_map *map;

	if (depth < 1 || depth > TD_TAG_DEPTH_MAX) {
		errno = EINVAL;
		return NULL;
	}
	map = aligned_alloc(TD_CACHELINE, sizeof(*map));
	if (!map)
		return NULL;
	memset(map, 0, sizeof(*map));
	map->shift = shift;
	for (unsigned int w = 0; w < TAG_WORDS; w++)
		atomic_init(&map->words[w].bits, 0);
	for (unsigned int t = 0; t < TD_TAG_DEPTH_MAX; t++)
		atomic_init(&map->rqs[t], NULL);
	atomic_init(&map->depth, depth);
	atomic_init(&map->starved, false);
	td_mutex_init(&map->users_lock);
	td_cond_init(&map->unpinned);
	td_list_init(&map->users);
	map->kick_gen = 0;
	atomic_init(&map->nr_users, 0);
	return map;
}

struct td_tag_map *td_tag_map_create(unsigned int depth)
{
	return tag_map_create(depth, 6);
}

struct td_tag_map *td_tag_map_create_spread(unsigned int depth)
{
	unsigned int shift = 6;

	/* sbitmap_calculate_shift(): four words' worth of depth at least, 8 bits at least. */
	while (shift > 3 && (4U << shift) > depth)
		shift--;
	return tag_map_create(depth, shift);
}

static void tag_map_free(struct td_tag_map *map)
{
	assert(td_list_empty(&map->users));
	td_cond_destroy(&map->unpinned);
	td_mutex_destroy(&map->users_lock);
	free(map);
}

void td_tag_map_destroy(struct td_tag_map *map)
{
	assert(atomic_load_explicit(&map->nr_users, memory_order_relaxed) == 0);
	tag_map_free(map);
}

int td_tag_map_attach(struct td_tag_map *map, td_tag_kick_fn kick, void *user)
{
	struct tag_user *u = malloc(sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->kick = kick;
	u->user = user;
	u->pins = 0;

	td_mutex_lock(&map->users_lock);
	/* Kick passes already running owe nothing to a user that was not there. */
	u->kick_gen = map->kick_gen;
	td_list_add_tail(&u->link, &map->users);
	atomic_store_explicit(&map->nr_users,
			      atomic_load_explicit(&map->nr_users, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	td_mutex_unlock(&map->users_lock);
	return 0;
}

static struct tag_user *tag_user_find_locked(struct td_tag_map *map, void *user)
{
	struct td_list *pos;

	assert(td_lock_held(&map->users_lock));
	td_list_for_each(pos, &map->users) {
		struct tag_user *u = td_list_entry(pos, struct tag_user, link);

		if (u->user == user)
			return u;
	}
	return NULL;
}

void td_tag_map_detach(struct td_tag_map *map, void *user)
{
	struct tag_user *u;
	unsigned int left;

	/* It would wait for its own caller's pin forever. */
	assert(tag_kicking != map);

	td_mutex_lock(&map->users_lock);
	u = tag_user_find_locked(map, user);
	assert(u);
	/* Unlinked, no new kick pass can take it; wait out those that did. */
	td_list_del(&u->link);
	while (u->pins)
		td_cond_wait(&map->unpinned, &map->users_lock);
	left = atomic_load_explicit(&map->nr_users, memory_order_relaxed) - 1;
	atomic_store_explicit(&map->nr_users, left, memory_order_relaxed);
	td_mutex_unlock(&map->users_lock);

	free(u);
	if (!left)
		tag_map_free(map);
}

unsigned int td_tag_map_users(const struct td_tag_map *map)
{
	return atomic_load_explicit(&map->nr_users, memory_order_relaxed);
}

/* Take up to TAG_KICK_BATCH entries that pass @gen has not visited yet, pinning them. */
static unsigned int tag_kick_collect_locked(struct td_tag_map *map, uint64_t gen,
					    struct tag_user **batch)
{
	unsigned int n = 0;
	struct td_list *pos;

	assert(td_lock_held(&map->users_lock));
	td_list_for_each(pos, &map->users) {
		struct tag_user *u = td_list_entry(pos, struct tag_user, link);

		if (u->kick_gen >= gen)
			continue;
		u->kick_gen = gen;
		if (!u->kick)
			continue;
		u->pins++;
		batch[n++] = u;
		if (n == TAG_KICK_BATCH)
			break;
	}
	return n;
}

void td_tag_map_kick(struct td_tag_map *map)
{
	const struct td_tag_map *outer = tag_kicking;
	struct tag_user *batch[TAG_KICK_BATCH];
	unsigned int n;
	uint64_t gen;

	td_mutex_lock(&map->users_lock);
	gen = ++map->kick_gen;
	while ((n = tag_kick_collect_locked(map, gen, batch)) > 0) {
		bool wake = false;

		td_mutex_unlock(&map->users_lock);
		tag_kicking = map;
		for (unsigned int i = 0; i < n; i++)
			batch[i]->kick(batch[i]->user);
		tag_kicking = outer;
		td_mutex_lock(&map->users_lock);

		for (unsigned int i = 0; i < n; i++)
			wake |= --batch[i]->pins == 0;
		if (wake)
			td_cond_broadcast(&map->unpinned);
	}
	td_mutex_unlock(&map->users_lock);
}

/* Bits of word @w that hold tags below @depth, in a map of 1 << @shift tags per word. */
static inline uint64_t tag_word_mask(unsigned int w, unsigned int depth, unsigned int shift)
{
	unsigned int bits = TD_MIN(depth - (w << shift), 1U << shift);

	return bits >= TAG_WORD_BITS ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

/*
 * One pass over the words below @depth, starting at word *@cursor, or at
 * the home of this CPU when *@cursor is not a word below @depth; *@cursor is
 * left at the word of the tag claimed. @load_order is seq_cst for the
 * rescan of a starving start (pattern (c)).
 * Return: a claimed tag, or -EBUSY.
 */
static inline int tag_scan(struct td_tag_map *map, unsigned int depth, unsigned int *cursor,
			   memory_order load_order)
{
	unsigned int shift = map->shift;
	unsigned int nr_words = (depth + (1U << shift) - 1) >> shift;
	unsigned int first = *cursor < nr_words
				 ? *cursor
				 : (unsigned int)(((uint64_t)tag_home() * nr_words) >> TAG_HOME_BITS);

	for (unsigned int i = 0; i < nr_words; i++) {
		unsigned int w = first + i < nr_words ? first + i : first + i - nr_words;
		uint64_t valid = tag_word_mask(w, depth, shift);
		uint64_t old = atomic_load_explicit(&map->words[w].bits, load_order);
		uint64_t free_bits;

		while ((free_bits = ~old & valid) != 0) {
			uint64_t bit = UINT64_C(1) << __builtin_ctzll(free_bits);

			/* Acquire: pairs with the release in td_tag_end(), pattern (a). */
			old = atomic_fetch_or_explicit(&map->words[w].bits, bit,
						       memory_order_acquire);
			if (!(old & bit)) {
				*cursor = w;
				return (int)(w << shift) + __builtin_ctzll(bit);
			}
		}
	}
	return -EBUSY;
}

int td_tag_start_at(struct td_tag_map *map, void *rq, unsigned int *cursor)
{
	/* Relaxed: the depth is a bound and publishes nothing. */
	unsigned int depth = atomic_load_explicit(&map->depth, memory_order_relaxed);
	int tag = tag_scan(map, depth, cursor, memory_order_relaxed);

	if (tag < 0) {
		/* Seq_cst store, then seq_cst rescan: pairs with td_tag_end(), pattern (c). */
		atomic_store_explicit(&map->starved, true, memory_order_seq_cst);
		tag = tag_scan(map, depth, cursor, memory_order_seq_cst);
		if (tag < 0)
			return -EBUSY;
	}
	/* Release: pairs with the acquire load in td_tag_find(), pattern (b). */
	atomic_store_explicit(&map->rqs[tag], rq, memory_order_release);
	return tag;
}

int td_tag_start(struct td_tag_map *map, void *rq)
{
	unsigned int cursor = TD_TAG_CURSOR_HOME;

	return td_tag_start_at(map, rq, &cursor);
}

bool td_tag_end(struct td_tag_map *map, int tag)
{
	unsigned int w = (unsigned int)tag >> map->shift;
	uint64_t bit = UINT64_C(1) << ((unsigned int)tag & ((1U << map->shift) - 1));
	void *rq td_unused;
	uint64_t old td_unused;

	assert(tag >= 0 && tag < TD_TAG_DEPTH_MAX);
	/* Before the bit is released, so a new holder's request is never wiped: pattern (a). */
	rq = atomic_exchange_explicit(&map->rqs[tag], NULL, memory_order_relaxed);
	assert(rq);
	/*
	 * Release: pairs with the acquire fetch_or in tag_scan(), pattern (a).
	 * Seq_cst: pairs with the starved store and rescan in td_tag_start(), pattern (c).
	 */
	old = atomic_fetch_and_explicit(&map->words[w].bits, ~bit, memory_order_seq_cst);
	assert(old & bit);

	/* Seq_cst load: the other half of pattern (c). Mostly false, so read before writing. */
	if (!atomic_load_explicit(&map->starved, memory_order_seq_cst))
		return false;
	return atomic_exchange_explicit(&map->starved, false, memory_order_seq_cst);
}

void *td_tag_find(const struct td_tag_map *map, int tag)
{
	if (tag < 0 || tag >= TD_TAG_DEPTH_MAX)
		return NULL;
	/* Acquire: pairs with the release store in td_tag_start(), pattern (b). */
	return atomic_load_explicit(&map->rqs[tag], memory_order_acquire);
}

int td_tag_resize(struct td_tag_map *map, unsigned int depth)
{
	if (depth < 1 || depth > TD_TAG_DEPTH_MAX)
		return -EINVAL;
	/*
	 * Relaxed: a start already past its depth load may still hand out a tag
	 * below the old depth; later starts of this thread see the new one.
	 */
	atomic_store_explicit(&map->depth, depth, memory_order_relaxed);
	return 0;
}

unsigned int td_tag_depth(const struct td_tag_map *map)
{
	return atomic_load_explicit(&map->depth, memory_order_relaxed);
}

unsigned int td_tag_busy(const struct td_tag_map *map)
{
	unsigned int busy = 0;

	for (unsigned int w = 0; w < TAG_WORDS; w++)
		busy += (unsigned int)__builtin_popcountll(
		    atomic_load_explicit(&map->words[w].bits, memory_order_relaxed));
	return busy;
}
