// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lock.c - pthread wrappers that abort on misuse and track the owner.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include "common/clock.h"
#include "common/lock.h"

static td_noreturn void lock_bug(const char *what, int err)
{
	fprintf(stderr, "tagdisk: %s failed: %s\n", what, strerror(err));
	abort();
}

void td_mutex_init(struct td_mutex *mu)
{
	pthread_mutexattr_t attr;

	/*
	 * Adaptive: a contended locker spins briefly before sleeping. Our critical
	 * sections are short, so the holder is usually done before a futex sleep
	 * and wake-up (microseconds) would even start.
	 */
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	int err = pthread_mutex_init(&mu->m, &attr);

	pthread_mutexattr_destroy(&attr);
	if (err)
		lock_bug("pthread_mutex_init", err);
	atomic_init(&mu->owner, 0);
}

void td_mutex_destroy(struct td_mutex *mu)
{
	int err = pthread_mutex_destroy(&mu->m);

	if (err)
		lock_bug("pthread_mutex_destroy", err);
}

/*
 * How long a contended locker spins (trylock, pause) before it sleeps. Our
 * critical sections last up to a few microseconds (a batch through the
 * elevator); sleeping and being woken costs more than that, so a waiter that
 * finds the holder running waits for it on the CPU, as the kernel's
 * optimistic spinning on mutexes does. Bounded, so a preempted holder costs
 * at most this much spinning.
 */
#define TD_MUTEX_SPINS 100

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

void td_mutex_lock(struct td_mutex *mu)
{
	int err = pthread_mutex_trylock(&mu->m);

	for (int i = 0; err == EBUSY && i < TD_MUTEX_SPINS; i++) {
		cpu_relax();
		err = pthread_mutex_trylock(&mu->m);
	}
	if (err == EBUSY)
		err = pthread_mutex_lock(&mu->m);

	if (err)
		lock_bug("pthread_mutex_lock", err);
	atomic_store_explicit(&mu->owner, (unsigned long)pthread_self(), memory_order_relaxed);
}

bool td_mutex_trylock(struct td_mutex *mu)
{
	int err = pthread_mutex_trylock(&mu->m);

	if (err == EBUSY)
		return false;
	if (err)
		lock_bug("pthread_mutex_trylock", err);
	atomic_store_explicit(&mu->owner, (unsigned long)pthread_self(), memory_order_relaxed);
	return true;
}

void td_mutex_unlock(struct td_mutex *mu)
{
	atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
	int err = pthread_mutex_unlock(&mu->m);

	if (err)
		lock_bug("pthread_mutex_unlock", err);
}

void td_cond_init(struct td_cond *c)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	int err = pthread_cond_init(&c->c, &attr);

	pthread_condattr_destroy(&attr);
	if (err)
		lock_bug("pthread_cond_init", err);
}

void td_cond_destroy(struct td_cond *c)
{
	int err = pthread_cond_destroy(&c->c);

	if (err)
		lock_bug("pthread_cond_destroy", err);
}

void td_cond_wait(struct td_cond *c, struct td_mutex *mu)
{
	atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
	int err = pthread_cond_wait(&c->c, &mu->m);

	if (err)
		lock_bug("pthread_cond_wait", err);
	atomic_store_explicit(&mu->owner, (unsigned long)pthread_self(), memory_order_relaxed);
}

bool td_cond_wait_until(struct td_cond *c, struct td_mutex *mu, uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / TD_NSEC_PER_SEC),
		.tv_nsec = (long)(deadline_ns % TD_NSEC_PER_SEC),
	};

	atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
	int err = pthread_cond_timedwait(&c->c, &mu->m, &ts);

	if (err && err != ETIMEDOUT)
		lock_bug("pthread_cond_timedwait", err);
	atomic_store_explicit(&mu->owner, (unsigned long)pthread_self(), memory_order_relaxed);
	return err == 0;
}

void td_cond_signal(struct td_cond *c)
{
	int err = pthread_cond_signal(&c->c);

	if (err)
		lock_bug("pthread_cond_signal", err);
}

void td_cond_broadcast(struct td_cond *c)
{
	int err = pthread_cond_broadcast(&c->c);

	if (err)
		lock_bug("pthread_cond_broadcast", err);
}

void td_thread_name(const char *name)
{
	char buf[16];

	snprintf(buf, sizeof(buf), "%s", name);
	prctl(PR_SET_NAME, buf, 0, 0, 0);
}

void td_sleep_until(uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / TD_NSEC_PER_SEC),
		.tv_nsec = (long)(deadline_ns % TD_NSEC_PER_SEC),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}
