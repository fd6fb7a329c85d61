/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * random.h - the deterministic generator behind every seeded choice.
 *
 * splitmix64: one 64-bit word of state, advanced by a fixed odd increment and
 * mixed. The same seed gives the same sequence on every machine, which is
 * what makes injected faults and power failures reproducible. Not for
 * anything secret. No locking: the caller owns the state.
 */
#ifndef TAGDISK_RANDOM_H
#define TAGDISK_RANDOM_H

#include <stdint.h>

/* Advance *@state and return the next number of its sequence. */
static inline uint64_t td_splitmix64_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#endif /* TAGDISK_RANDOM_H */
