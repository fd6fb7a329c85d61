// SPDX-License-Identifier: GPL-2.0-or-later
/* unit_util.c - helpers shared by the unit tests (see unit_util.h). */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <cmocka.h>
#include "unit_util.h"

uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sleep_us(uint64_t us)
{
	struct timespec ts = { .tv_sec = (time_t)(us / 1000000),
			       .tv_nsec = (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

void sleep_ms(unsigned int ms)
{
	sleep_us((uint64_t)ms * 1000);
}

bool wait_flag(atomic_bool *flag, unsigned int timeout_ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)timeout_ms * 1000000ULL;

	while (!atomic_load(flag)) {
		if (mono_ns() > deadline)
			return false;
		sleep_ms(1);
	}
	return true;
}

uint64_t rnd_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint64_t rnd_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + rnd_next(s) % (hi - lo + 1);
}

void fill_random(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(rnd_next(&seed) >> 56);
}

bool all_value(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

uint8_t *xmalloc(size_t n)
{
	uint8_t *p = malloc(n);

	assert_non_null(p);
	return p;
}

size_t resident_pages(const void *p, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t n = (len + page - 1) / page;
	unsigned char *vec = xmalloc(n);
	size_t resident = 0;

	assert_int_equal(mincore((void *)p, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		resident += vec[i] & 1;
	free(vec);
	return resident;
}

void done_init(struct done *d)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_condattr_destroy(&ca);
	d->n = 0;
	d->errors = 0;
}

void done_destroy(struct done *d)
{
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
}

void done_add(struct done *d, int err)
{
	pthread_mutex_lock(&d->lock);
	d->n++;
	if (err)
		d->errors++;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

unsigned int done_count(struct done *d)
{
	unsigned int n;

	pthread_mutex_lock(&d->lock);
	n = d->n;
	pthread_mutex_unlock(&d->lock);
	return n;
}

bool done_wait(struct done *d, unsigned int n, unsigned int ms)
{
	uint64_t deadline = mono_ns() + (uint64_t)ms * 1000000ULL;
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ULL),
			       .tv_nsec = (long)(deadline % 1000000000ULL) };
	bool ok = true;

	pthread_mutex_lock(&d->lock);
	while (d->n < n && ok)
		ok = pthread_cond_timedwait(&d->cond, &d->lock, &ts) != ETIMEDOUT || d->n >= n;
	pthread_mutex_unlock(&d->lock);
	return ok;
}

/* ---- backends that wrap another --------------------------------------------------------- */

/* A wrapping backend's struct starts with the backend it wraps. */
static struct td_backend *inner_of(void *priv)
{
	return (struct td_backend *)priv;
}

int fwd_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off)
{
	struct td_backend *in = inner_of(priv);

	return in->ops->read(in->priv, iov, iovcnt, off);
}

int fwd_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	struct td_backend *in = inner_of(priv);

	return in->ops->write(in->priv, iov, iovcnt, off, fua);
}

int fwd_flush(void *priv)
{
	struct td_backend *in = inner_of(priv);

	return in->ops->flush(in->priv);
}

int fwd_discard(void *priv, uint64_t off, uint64_t len)
{
	struct td_backend *in = inner_of(priv);

	return in->ops->discard(in->priv, off, len);
}

int fwd_write_zeroes(void *priv, uint64_t off, uint64_t len)
{
	struct td_backend *in = inner_of(priv);

	return in->ops->write_zeroes(in->priv, off, len);
}

void fwd_destroy(void *priv)
{
	struct td_backend *in = inner_of(priv);

	in->ops->destroy(in->priv);
}

/* ---- the recording backend -------------------------------------------------------------- */

static int rec_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	struct rec *r = priv;
	unsigned int hold = atomic_load(&r->write_hold_us);

	atomic_fetch_add(&r->writes, 1);
	if (fua)
		atomic_fetch_add(&r->fua_writes, 1);
	if (hold)
		sleep_us(hold);
	return fwd_write(priv, iov, iovcnt, off, fua);
}

const struct td_backend_ops rec_ops = {
	.name = "rec",
	.read = fwd_read,
	.write = rec_write,
	.flush = fwd_flush,
	.discard = fwd_discard,
	.write_zeroes = fwd_write_zeroes,
	.destroy = fwd_destroy,
};

struct rec *rec_create(uint64_t size)
{
	struct rec *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	assert_int_equal(td_backend_mem_init(&r->inner, size), 0);
	return r;
}

uint8_t *read_whole_file(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint8_t *buf;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	buf = xmalloc(*len + 1);
	assert_int_equal(pread(fd, buf, *len, 0), (ssize_t)*len);
	close(fd);
	return buf;
}

void test_list_add(struct test_list *l, const char *name, CMUnitTestFunction fn,
		   CMFixtureFunction setup, CMFixtureFunction teardown, void *state)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->t = realloc(l->t, l->cap * sizeof(*l->t));
		if (!l->t)
			abort();
	}
	l->t[l->n++] = (struct CMUnitTest){ name, fn, setup, teardown, state };
}

int test_list_run(struct test_list *l)
{
	/* cmocka_run_group_tests() wants an array of fixed size; this is the function behind it. */
	int failed = _cmocka_run_group_tests("tests", l->t, l->n, NULL, NULL);

	free(l->t);
	*l = (struct test_list){ 0 };
	return failed;
}
