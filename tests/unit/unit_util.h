/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * unit_util.h - helpers shared by the unit tests: time, sleeping, a
 * reproducible random generator, buffer checks, resident pages, a counter of
 * ended bios that a test can wait on, reading a whole file, pass-through calls
 * for a backend that wraps another, and a memory backend that records its
 * writes.
 *
 * Linked into every test binary (build/tests/unit_util.o). Failures inside
 * these helpers fail the calling cmocka test.
 */
#ifndef TAGDISK_TESTS_UNIT_UTIL_H
#define TAGDISK_TESTS_UNIT_UTIL_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "tagdisk/drive.h"

/* Return: CLOCK_MONOTONIC in nanoseconds. */
uint64_t mono_ns(void);

/* Sleep @us microseconds / @ms milliseconds, resuming after signals. */
void sleep_us(uint64_t us);
void sleep_ms(unsigned int ms);

/* Return: true if @flag rose within @timeout_ms (polled every millisecond). */
bool wait_flag(atomic_bool *flag, unsigned int timeout_ms);

/* xorshift64*: each caller owns a state (non-zero), so runs repeat per seed. */
uint64_t rnd_next(uint64_t *s);
/* Return: a number in [lo, hi]. */
uint64_t rnd_range(uint64_t *s, uint64_t lo, uint64_t hi);
/* Fill @p with bytes that depend only on @seed. */
void fill_random(uint8_t *p, size_t len, uint64_t seed);

/* Return: true when every byte of @p is @v. */
bool all_value(const uint8_t *p, size_t len, uint8_t v);

/* Return: @n bytes of heap; fails the test when there are none. */
uint8_t *xmalloc(size_t n);

/* Return: how many pages of [@p, @p + @len) are resident (mincore). */
size_t resident_pages(const void *p, size_t len);

/* Return: the whole file at @path (malloc'd, with a spare byte after it), its length in *@len. */
uint8_t *read_whole_file(const char *path, size_t *len);

/* Counts ended bios; waiters sleep on a CLOCK_MONOTONIC condition variable. */
struct done {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int n;	     /* lock */
	unsigned int errors; /* lock */
};

void done_init(struct done *d);
void done_destroy(struct done *d);
/* Count one end, with its error (0 for success), and wake the waiters. */
void done_add(struct done *d, int err);
unsigned int done_count(struct done *d);
/* Return: true when @n bios have ended within @ms milliseconds. */
bool done_wait(struct done *d, unsigned int n, unsigned int ms);

/*
 * Backend calls that pass through to the backend a test backend wraps: its
 * struct's first member is that struct td_backend. A wrapper sets these in
 * its td_backend_ops for the calls it does not change.
 */
int fwd_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off);
int fwd_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua);
int fwd_flush(void *priv);
int fwd_discard(void *priv, uint64_t off, uint64_t len);
int fwd_write_zeroes(void *priv, uint64_t off, uint64_t len);
void fwd_destroy(void *priv);

/*
 * A memory backend that counts writes (and FUA writes) and can sleep before
 * each write, to widen races. Made by rec_create(); the drive destroys the
 * memory with the backend, the test frees the struct.
 */
struct rec {
	struct td_backend inner; /* the memory backend */
	_Atomic unsigned int writes;
	_Atomic unsigned int fua_writes;
	_Atomic unsigned int write_hold_us; /* sleep before each write; 0: none */
};

extern const struct td_backend_ops rec_ops;

/* Return: a recording backend over @size bytes of zeroed memory; fails the test on error. */
struct rec *rec_create(uint64_t size);

/* Return: the backend to put in td_drive_params for @r. */
static inline struct td_backend rec_backend(struct rec *r)
{
	return (struct td_backend){ .ops = &rec_ops, .priv = r };
}

/*
 * A list of cmocka tests built at run time, so that every row of a table of
 * cases is a test of its own, named by the row (cmocka_unit_test_prestate
 * would name each row after the function). A row is a struct whose first
 * member is `const char *name`; the test gets a pointer to it as its state.
 */
struct test_list {
	struct CMUnitTest *t;
	size_t n;
	size_t cap;
};

void test_list_add(struct test_list *l, const char *name, CMUnitTestFunction fn,
		   CMFixtureFunction setup, CMFixtureFunction teardown, void *state);
/* Run the list as one group and free it. Return: the number of failed tests. */
int test_list_run(struct test_list *l);

#define TL_ADD_TEST(l, fn) test_list_add(l, #fn, fn, NULL, NULL, NULL)
#define TL_ADD_TABLE(l, fn, setup, teardown, table)                                          \
	for (size_t i_ = 0; i_ < sizeof(table) / sizeof((table)[0]); i_++)                    \
	test_list_add(l, (table)[i_].name, fn, setup, teardown, (void *)&(table)[i_])

#endif /* TAGDISK_TESTS_UNIT_UTIL_H */
