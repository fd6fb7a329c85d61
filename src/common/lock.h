/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * lock.h - mutexes and condition variables that know their owner.
 *
 * Thin wrappers over pthreads. A failing pthread call is a bug, so the
 * wrappers abort instead of returning errors. Each mutex records the thread
 * that holds it, so functions with the _locked suffix can assert
 * td_lock_held() the way the kernel uses lockdep_assert_held().
 *
 * The global lock order is written once, in tagdisk/queue.h.
 */
#ifndef TAGDISK_LOCK_H
#define TAGDISK_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include "common/compiler.h"

struct td_mutex {
	pthread_mutex_t m;
	_Atomic(unsigned long) owner; /* pthread_self() of the holder, 0 when free */
};

struct td_cond {
	pthread_cond_t c;
};

void td_mutex_init(struct td_mutex *mu) td_nonnull(1);
void td_mutex_destroy(struct td_mutex *mu) td_nonnull(1);
void td_mutex_lock(struct td_mutex *mu) td_nonnull(1);
void td_mutex_unlock(struct td_mutex *mu) td_nonnull(1);
/* Take @mu if it is free, never waiting. Return: true when the caller now holds it. */
bool td_mutex_trylock(struct td_mutex *mu) td_nonnull(1);

/* Return: true when the calling thread holds @mu. */
static inline bool td_lock_held(struct td_mutex *mu)
{
	return atomic_load_explicit(&mu->owner, memory_order_relaxed) ==
	       (unsigned long)pthread_self();
}

/* Condition variables use CLOCK_MONOTONIC, like every timeout in tagdisk. */
void td_cond_init(struct td_cond *c) td_nonnull(1);
void td_cond_destroy(struct td_cond *c) td_nonnull(1);
void td_cond_wait(struct td_cond *c, struct td_mutex *mu) td_nonnull(1, 2);
/* Wait until woken or CLOCK_MONOTONIC reaches @deadline_ns. Return: false on timeout. */
bool td_cond_wait_until(struct td_cond *c, struct td_mutex *mu, uint64_t deadline_ns)
	td_nonnull(1, 2);
void td_cond_signal(struct td_cond *c) td_nonnull(1);
void td_cond_broadcast(struct td_cond *c) td_nonnull(1);

/* Name the calling thread (visible in ps -L, gdb and perf); @name is cut to 15 bytes. */
void td_thread_name(const char *name) td_nonnull(1);

#endif /* TAGDISK_LOCK_H */
