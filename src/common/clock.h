/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * clock.h - the monotonic clock every tagdisk timestamp uses.
 *
 * Modules that make decisions from time (deadline expiry, timeouts, the
 * latency models) take a struct td_clock so tests can substitute a clock they
 * advance by hand. A td_clock with a NULL now_ns reads CLOCK_MONOTONIC.
 */
#ifndef TAGDISK_CLOCK_H
#define TAGDISK_CLOCK_H

#include <stdint.h>
#include <time.h>

#define TD_NSEC_PER_USEC 1000ULL
#define TD_NSEC_PER_MSEC 1000000ULL
#define TD_NSEC_PER_SEC	 1000000000ULL

struct td_clock {
	uint64_t (*now_ns)(void *ctx); /* NULL: CLOCK_MONOTONIC */
	void *ctx;
};

/* Return: CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t td_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * TD_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Return: @clock's time in nanoseconds. */
static inline uint64_t td_clock_now(const struct td_clock *clock)
{
	if (clock && clock->now_ns)
		return clock->now_ns(clock->ctx);
	return td_now_ns();
}

/*
 * Return: @clock's time with the coarse resolution of a scheduler tick (a few
 * milliseconds), at a fraction of the cost: for deadlines measured in
 * milliseconds. A test clock is returned as it is.
 */
static inline uint64_t td_clock_now_coarse(const struct td_clock *clock)
{
	struct timespec ts;

	if (clock && clock->now_ns)
		return clock->now_ns(clock->ctx);
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * TD_NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Sleep until CLOCK_MONOTONIC reaches @deadline_ns (restarts after signals). */
void td_sleep_until(uint64_t deadline_ns);

#endif /* TAGDISK_CLOCK_H */
