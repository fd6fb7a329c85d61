// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_backend_rbd.c - the Ceph RBD backend (src/engine/drive_rbd.c) against
 * a real cluster: opening (and creating) an image, every operation through
 * the asynchronous submit and through the synchronous td_backend_* calls,
 * with the data checked byte for byte, many submitters at once, destroy
 * waiting for what is outstanding, the exclusive lock refusing a second
 * opener (in this process and in another) and passing to a new opener once
 * its holder is killed, and the messages for what is absent. That last lock
 * case takes the cluster's osd_client_watch_timeout (30 s by default).
 *
 * TD_CEPH_CONF names the cluster's ceph.conf (its keyring is what the file
 * says, or TD_CEPH_KEYRING); TD_CEPH_POOL the pool (default "rbd"), and
 * TD_CEPH_ID the client (default "admin"). Each run works on an image of
 * its own, td-unit-PID, removed at the end. Without TD_CEPH_CONF every case
 * is skipped, after one line saying why.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include "common/log.h"
#include "tagdisk/backend.h"
#include "unit_util.h"

#define MIB		  (1024ULL * 1024ULL)
#define IMAGE_SIZE	  (64 * MIB)
#define OBJECT_SIZE	  (4 * MIB) /* rbd's default object size: ranges below cross one */
#define WAIT_MS		  60000
#define WATCHDOG_S	  600
#define SUBMITTERS	  4
#define OPS_PER_SUBMITTER 64
#define OP_BYTES	  16384
/* A killed holder's lock must be free again within the cluster's watch timeout (30 s). */
#define TAKEOVER_MS 120000

static char image_name[64];

/* Return: the parameters for this run's image, or NULL when no cluster was given. */
static const struct td_rbd_params *params(void)
{
	static struct td_rbd_params p;

	if (!getenv("TD_CEPH_CONF"))
		return NULL;
	p.conf = getenv("TD_CEPH_CONF");
	p.pool = getenv("TD_CEPH_POOL") ? getenv("TD_CEPH_POOL") : "rbd";
	p.id = getenv("TD_CEPH_ID");
	p.keyring = getenv("TD_CEPH_KEYRING");
	p.image = image_name;
	return &p;
}

/* ---- fixtures ------------------------------------------------------------------------- */

struct env {
	struct td_backend be;
	uint64_t size;
};

static int setup_open(void **state)
{
	const struct td_rbd_params *p = params();
	struct env *e;
	char msg[256] = "";
	int err;

	if (!p) {
		*state = NULL;
		return 0;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	err = td_backend_rbd_open(&e->be, p, IMAGE_SIZE, false, &e->size, msg, sizeof(msg));
	if (err) {
		print_error("td_backend_rbd_open: %d: %s\n", err, msg);
		free(e);
		return -1;
	}
	*state = e;
	return 0;
}

static int teardown_close(void **state)
{
	struct env *e = *state;

	if (e) {
		e->be.ops->destroy(e->be.priv);
		free(e);
	}
	return 0;
}

/* Skip the case when no cluster was given; else return its open backend. */
static struct env *env_of(void **state)
{
	if (!*state)
		skip();
	return *state;
}

/* ---- asynchronous operations ---------------------------------------------------------- */

struct aio {
	struct td_backend_io io;
	struct done *done;
	_Atomic int calls; /* how many times done was called: exactly once is right */
	_Atomic int err;
};

static void aio_done(struct td_backend_io *io, int err)
{
	struct aio *a = td_container_of(io, struct aio, io);

	atomic_store(&a->err, err);
	atomic_fetch_add(&a->calls, 1);
	done_add(a->done, err);
}

static void aio_init(struct aio *a, struct done *d, enum td_op op, uint64_t off, uint64_t len,
		     void *buf, bool fua)
{
	memset(a, 0, sizeof(*a));
	a->io.op = op;
	a->io.fua = fua;
	a->io.off = off;
	a->io.len = len;
	a->io.buf = buf;
	a->io.done = aio_done;
	a->done = d;
}

/* Submit one operation and wait for it. Return: its result. */
static int aio_run(struct env *e, enum td_op op, uint64_t off, uint64_t len, void *buf, bool fua)
{
	struct done d;
	struct aio a;
	int err;

	done_init(&d);
	aio_init(&a, &d, op, off, len, buf, fua);
	err = e->be.ops->submit(e->be.priv, &a.io);
	if (!err) {
		assert_true(done_wait(&d, 1, WAIT_MS));
		assert_int_equal(atomic_load(&a.calls), 1);
		err = atomic_load(&a.err);
	}
	done_destroy(&d);
	return err;
}

static void check_bytes(struct env *e, uint64_t off, const uint8_t *want, size_t len)
{
	uint8_t *r = xmalloc(len);

	memset(r, 0xee, len);
	assert_int_equal(aio_run(e, TD_OP_READ, off, len, r, false), 0);
	assert_memory_equal(r, want, len);
	free(r);
}

static void check_zeroes(struct env *e, uint64_t off, size_t len)
{
	uint8_t *r = xmalloc(len);

	memset(r, 0xee, len);
	assert_int_equal(aio_run(e, TD_OP_READ, off, len, r, false), 0);
	assert_true(all_value(r, len, 0));
	free(r);
}

/* ---- cases ---------------------------------------------------------------------------- */

static void test_open_creates_the_image_with_the_size_asked(void **state)
{
	struct env *e = env_of(state);

	assert_int_equal(e->size, IMAGE_SIZE);
	assert_string_equal(e->be.ops->name, "rbd");
	assert_true(td_backend_is_async(&e->be));
}

static void test_async_write_read_fua_flush_discard_and_write_zeroes_keep_exact_data(void **state)
{
	struct env *e = env_of(state);
	const uint64_t off = OBJECT_SIZE - 96 * 1024; /* crosses into the second object */
	const size_t len = 256 * 1024;
	uint8_t *w = xmalloc(len);
	uint8_t *want = xmalloc(len);

	fill_random(w, len, 1);
	assert_int_equal(aio_run(e, TD_OP_WRITE, off, len, w, false), 0);
	check_bytes(e, off, w, len);
	memcpy(want, w, len);

	/* FUA over the middle, then a flush. */
	fill_random(w, 64 * 1024, 2);
	assert_int_equal(aio_run(e, TD_OP_WRITE, off + 64 * 1024, 64 * 1024, w, true), 0);
	memcpy(want + 64 * 1024, w, 64 * 1024);
	check_bytes(e, off, want, len);
	assert_int_equal(aio_run(e, TD_OP_FLUSH, 0, 0, NULL, false), 0);

	/* Discard a sector-aligned range smaller than rbd's discard granularity. */
	assert_int_equal(aio_run(e, TD_OP_DISCARD, off + 512, 3 * 4096, NULL, false), 0);
	memset(want + 512, 0, 3 * 4096);
	check_bytes(e, off, want, len);

	/* Discard across the object boundary, whole 64 KiB pieces included. */
	assert_int_equal(aio_run(e, TD_OP_DISCARD, off + 80 * 1024, 100 * 1024, NULL, false), 0);
	memset(want + 80 * 1024, 0, 100 * 1024);
	check_bytes(e, off, want, len);

	/* Write zeroes over an odd-sized range. */
	assert_int_equal(
	    aio_run(e, TD_OP_WRITE_ZEROES, off + 200 * 1024 + 512, 7 * 512, NULL, false), 0);
	memset(want + 200 * 1024 + 512, 0, 7 * 512);
	check_bytes(e, off, want, len);
	assert_int_equal(aio_run(e, TD_OP_WRITE_ZEROES, off, 64 * 1024, NULL, false), 0);
	memset(want, 0, 64 * 1024);
	check_bytes(e, off, want, len);
	assert_int_equal(aio_run(e, TD_OP_FLUSH, 0, 0, NULL, false), 0);
	free(want);
	free(w);
}

static void test_sync_calls_on_the_async_backend_keep_exact_data(void **state)
{
	struct env *e = env_of(state);
	const uint64_t off = 2 * OBJECT_SIZE - 8192;
	uint8_t *w = xmalloc(3 * 8192);
	uint8_t *r = xmalloc(3 * 8192);
	struct iovec wv[3] = { { w, 8192 }, { w + 8192, 4096 }, { w + 12288, 12288 } };
	struct iovec rv[2] = { { r, 1024 }, { r + 1024, 3 * 8192 - 1024 } };

	fill_random(w, 3 * 8192, 3);
	assert_int_equal(td_backend_write(&e->be, wv, 3, off, false), 0);
	memset(r, 0xee, 3 * 8192);
	assert_int_equal(td_backend_read(&e->be, rv, 2, off), 0);
	assert_memory_equal(r, w, 3 * 8192);

	assert_int_equal(td_backend_write(&e->be, wv, 1, off, true), 0);
	assert_int_equal(td_backend_flush(&e->be), 0);

	assert_int_equal(td_backend_discard(&e->be, off + 4096, 4096), 0);
	memset(w + 4096, 0, 4096);
	assert_int_equal(td_backend_write_zeroes(&e->be, off + 16384, 1536), 0);
	memset(w + 16384, 0, 1536);
	memset(r, 0xee, 3 * 8192);
	assert_int_equal(td_backend_read(&e->be, rv, 2, off), 0);
	assert_memory_equal(r, w, 3 * 8192);
	free(r);
	free(w);
}

static void test_reads_past_the_end_read_zeroes(void **state)
{
	struct env *e = env_of(state);
	uint8_t *w = xmalloc(8192);
	uint8_t *r = xmalloc(16384);
	uint8_t *want = xmalloc(16384);

	fill_random(w, 8192, 4);
	assert_int_equal(aio_run(e, TD_OP_WRITE, e->size - 8192, 8192, w, false), 0);
	memset(want, 0, 16384);
	memcpy(want, w, 8192);
	/* Crossing the end: the image's part, then zeroes. */
	memset(r, 0xee, 16384);
	assert_int_equal(aio_run(e, TD_OP_READ, e->size - 8192, 16384, r, false), 0);
	assert_memory_equal(r, want, 16384);
	/* Wholly past it. */
	check_zeroes(e, e->size, 4096);
	check_zeroes(e, e->size + 10 * MIB, 16384);
	free(want);
	free(r);
	free(w);
}

struct submitter {
	struct env *e;
	unsigned int id;
	struct done done;
	struct aio ops[OPS_PER_SUBMITTER];
	uint8_t *bufs;
};

static uint64_t submitter_off(unsigned int id, unsigned int i)
{
	/* Submitters interleave so that neighbouring ranges belong to different threads. */
	return 8 * MIB + ((uint64_t)i * SUBMITTERS + id) * OP_BYTES;
}

static void *submitter_run(void *arg)
{
	struct submitter *s = arg;

	for (unsigned int i = 0; i < OPS_PER_SUBMITTER; i++) {
		uint8_t *buf = s->bufs + (size_t)i * OP_BYTES;

		fill_random(buf, OP_BYTES, 100 + s->id * OPS_PER_SUBMITTER + i);
		aio_init(&s->ops[i], &s->done, TD_OP_WRITE, submitter_off(s->id, i), OP_BYTES, buf,
			 i % 8 == 0);
		if (s->e->be.ops->submit(s->e->be.priv, &s->ops[i].io))
			done_add(&s->done, -EIO);
	}
	return NULL;
}

static void test_concurrent_submitters_each_get_one_completion_and_their_data(void **state)
{
	struct env *e = env_of(state);
	struct submitter *s = calloc(SUBMITTERS, sizeof(*s));
	pthread_t t[SUBMITTERS];
	uint8_t *want = xmalloc(OP_BYTES);

	assert_non_null(s);
	for (unsigned int i = 0; i < SUBMITTERS; i++) {
		s[i].e = e;
		s[i].id = i;
		s[i].bufs = xmalloc((size_t)OPS_PER_SUBMITTER * OP_BYTES);
		done_init(&s[i].done);
		assert_int_equal(pthread_create(&t[i], NULL, submitter_run, &s[i]), 0);
	}
	for (unsigned int i = 0; i < SUBMITTERS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_true(done_wait(&s[i].done, OPS_PER_SUBMITTER, WAIT_MS));
		assert_int_equal(s[i].done.errors, 0);
		for (unsigned int k = 0; k < OPS_PER_SUBMITTER; k++)
			assert_int_equal(atomic_load(&s[i].ops[k].calls), 1);
	}
	for (unsigned int i = 0; i < SUBMITTERS; i++) {
		for (unsigned int k = 0; k < OPS_PER_SUBMITTER; k++) {
			fill_random(want, OP_BYTES, 100 + i * OPS_PER_SUBMITTER + k);
			check_bytes(e, submitter_off(i, k), want, OP_BYTES);
		}
		done_destroy(&s[i].done);
		free(s[i].bufs);
	}
	free(want);
	free(s);
}

static void test_destroy_waits_for_every_outstanding_operation(void **state)
{
	const struct td_rbd_params *p = params();
	struct env *e = env_of(state);
	struct aio *ops = calloc(32, sizeof(*ops));
	uint8_t *buf = xmalloc(32 * 4096);
	char msg[256] = "";
	struct done d;
	uint64_t size;

	/* This case closes the backend itself: the fixture's is replaced by its own. */
	e->be.ops->destroy(e->be.priv);
	*state = NULL;
	assert_int_equal(td_backend_rbd_open(&e->be, p, 0, false, &size, msg, sizeof(msg)), 0);
	assert_non_null(ops);
	done_init(&d);
	fill_random(buf, 32 * 4096, 5);
	for (unsigned int i = 0; i < 32; i++) {
		aio_init(&ops[i], &d, i % 4 == 3 ? TD_OP_FLUSH : TD_OP_WRITE, 16 * MIB + i * 4096,
			 i % 4 == 3 ? 0 : 4096, buf + i * 4096, i % 2);
		assert_int_equal(e->be.ops->submit(e->be.priv, &ops[i].io), 0);
	}
	e->be.ops->destroy(e->be.priv);
	assert_int_equal(done_count(&d), 32);
	assert_int_equal(d.errors, 0);
	for (unsigned int i = 0; i < 32; i++)
		assert_int_equal(atomic_load(&ops[i].calls), 1);
	done_destroy(&d);
	free(buf);
	free(ops);
	free(e);
}

static void test_second_open_is_refused_busy_naming_the_holder(void **state)
{
	const struct td_rbd_params *p = params();
	struct env *e = env_of(state);
	struct td_backend be2;
	char msg[256] = "";
	char want[128];
	uint64_t size = 0;
	uint8_t *w = xmalloc(4096);
	uint8_t *r = xmalloc(4096);
	struct iovec iov = { r, 4096 };

	assert_int_equal(td_backend_rbd_open(&be2, p, IMAGE_SIZE, false, &size, msg, sizeof(msg)),
			 -EBUSY);
	snprintf(want, sizeof(want), "rbd: image %s/%s is locked by client.", p->pool, p->image);
	assert_non_null(strstr(msg, want));
	assert_null(strchr(msg, '\n'));

	/* The holder kept its lock: it still writes. A FUA write is on the OSDs at once, so
	 * a read-only opener (which takes no lock) sees it without a flush. */
	fill_random(w, 4096, 6);
	assert_int_equal(aio_run(e, TD_OP_WRITE, 20 * MIB, 4096, w, true), 0);
	msg[0] = '\0';
	assert_int_equal(td_backend_rbd_open(&be2, p, 0, true, &size, msg, sizeof(msg)), 0);
	assert_int_equal(size, IMAGE_SIZE);
	memset(r, 0xee, 4096);
	assert_int_equal(td_backend_read(&be2, &iov, 1, 20 * MIB), 0);
	assert_memory_equal(r, w, 4096);
	be2.ops->destroy(be2.priv);
	free(r);
	free(w);
}

static void test_absent_pool_and_image_are_named(void **state)
{
	struct td_backend be;
	struct td_rbd_params p;
	char msg[256] = "";
	char want[128];
	uint64_t size;

	env_of(state);
	p = *params();
	p.pool = "td-unit-no-such-pool";
	assert_int_equal(td_backend_rbd_open(&be, &p, IMAGE_SIZE, false, &size, msg, sizeof(msg)),
			 -ENOENT);
	assert_string_equal(msg, "rbd: pool 'td-unit-no-such-pool' does not exist");

	p = *params();
	p.image = "td-unit-no-such-image";
	assert_int_equal(td_backend_rbd_open(&be, &p, 0, false, &size, msg, sizeof(msg)), -ENOENT);
	snprintf(want, sizeof(want), "rbd: image %s/td-unit-no-such-image does not exist", p.pool);
	assert_string_equal(msg, want);
	assert_int_equal(td_backend_rbd_open(&be, &p, 0, true, &size, msg, sizeof(msg)), -ENOENT);
	assert_string_equal(msg, want);
}

static void test_unreadable_configuration_is_named(void **state)
{
	struct td_backend be;
	struct td_rbd_params p;
	char msg[256] = "";
	uint64_t size;

	env_of(state);
	p = *params();
	p.conf = "/nonexistent/td-unit/ceph.conf";
	assert_true(td_backend_rbd_open(&be, &p, IMAGE_SIZE, false, &size, msg, sizeof(msg)) < 0);
	assert_non_null(strstr(msg, "rbd: cannot read /nonexistent/td-unit/ceph.conf: "));
}

/* ---- another process holding the lock -------------------------------------------------- */

/*
 * Run as "test_backend_rbd --hold-lock IMAGE": open IMAGE, say "locked" on
 * stdout and wait to be killed. Return: the exit status when it cannot.
 */
static int hold_lock(const char *image)
{
	struct td_rbd_params p = *params();
	struct td_backend be;
	char msg[256] = "";
	uint64_t size;

	p.image = image;
	alarm(WATCHDOG_S); /* a holder its test forgot does not outlive it by much */
	if (td_backend_rbd_open(&be, &p, IMAGE_SIZE, false, &size, msg, sizeof(msg))) {
		fprintf(stderr, "%s\n", msg);
		return 1;
	}
	printf("locked\n");
	fflush(stdout);
	for (;;)
		pause();
}

/* Start a process holding this run's image lock. Return: its pid, once it holds it. */
static pid_t start_holder(void)
{
	char line[16] = "";
	struct pollfd pfd;
	int fds[2];
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "test_backend_rbd", "--hold-lock", image_name, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	pfd = (struct pollfd){ .fd = fds[0], .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
	assert_true(read(fds[0], line, sizeof(line) - 1) > 0);
	close(fds[0]);
	assert_string_equal(line, "locked\n");
	return pid;
}

static void test_lock_of_a_killed_holder_is_taken_over(void **state)
{
	const struct td_rbd_params *p = params();
	char msg[256] = "";
	uint64_t size, t0, ms;
	struct td_backend be;
	int status;
	pid_t pid;

	/* The holder is another process: the fixture's backend lets go of the lock first. */
	env_of(state);
	teardown_close(state);
	*state = NULL;
	pid = start_holder();
	assert_int_equal(td_backend_rbd_open(&be, p, IMAGE_SIZE, false, &size, msg, sizeof(msg)),
			 -EBUSY);
	assert_non_null(strstr(msg, "is locked by client."));

	/* Killed, it cannot answer: the open waits for the cluster to drop its watch. */
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	t0 = mono_ns();
	msg[0] = '\0';
	assert_int_equal(td_backend_rbd_open(&be, p, IMAGE_SIZE, false, &size, msg, sizeof(msg)), 0);
	ms = (mono_ns() - t0) / 1000000;
	print_message("# the killed holder's lock was taken over after %llu ms\n",
		      (unsigned long long)ms);
	assert_true(ms < TAKEOVER_MS);
	be.ops->destroy(be.priv);
}

/* ---- the run's image ------------------------------------------------------------------ */

/* Remove this run's image (it may not exist: a case failed before creating it). */
static int remove_image(void **state)
{
	const struct td_rbd_params *p = params();
	rados_t cluster;
	rados_ioctx_t ioctx;
	int err;

	(void)state;
	if (!p || rados_create(&cluster, p->id) < 0)
		return 0;
	if (rados_conf_read_file(cluster, p->conf) == 0 &&
	    (!p->keyring || rados_conf_set(cluster, "keyring", p->keyring) == 0) &&
	    rados_connect(cluster) == 0 && rados_ioctx_create(cluster, p->pool, &ioctx) == 0) {
		err = rbd_remove(ioctx, p->image);
		if (err && err != -ENOENT)
			print_error("rbd_remove %s/%s: %s\n", p->pool, p->image, strerror(-err));
		rados_ioctx_destroy(ioctx);
	}
	rados_shutdown(cluster);
	return 0;
}

/* Every case runs on a backend of its own, opened (the image created) by setup_open. */
#define CASE(fn) cmocka_unit_test_setup_teardown(fn, setup_open, teardown_close)

int main(int argc, char **argv)
{
	static const struct CMUnitTest tests[] = {
		CASE(test_open_creates_the_image_with_the_size_asked),
		CASE(test_async_write_read_fua_flush_discard_and_write_zeroes_keep_exact_data),
		CASE(test_sync_calls_on_the_async_backend_keep_exact_data),
		CASE(test_reads_past_the_end_read_zeroes),
		CASE(test_concurrent_submitters_each_get_one_completion_and_their_data),
		CASE(test_destroy_waits_for_every_outstanding_operation),
		CASE(test_second_open_is_refused_busy_naming_the_holder),
		CASE(test_absent_pool_and_image_are_named),
		CASE(test_unreadable_configuration_is_named),
		CASE(test_lock_of_a_killed_holder_is_taken_over),
	};

	if (argc == 3 && !strcmp(argv[1], "--hold-lock") && params())
		return hold_lock(argv[2]);
	snprintf(image_name, sizeof(image_name), "td-unit-%d", (int)getpid());
	if (!params())
		print_message("# TD_CEPH_CONF is not set: the rbd backend cases need a Ceph "
			      "cluster and are skipped\n");
	td_log_init("test_backend_rbd", TD_LOG_ERR);
	alarm(WATCHDOG_S);
	return cmocka_run_group_tests_name("test_backend_rbd", tests, NULL, remove_image);
}
