// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_backend_nbd.c - the NBD backend against a real nbdkit.
 *
 * Each test starts its own nbdkit (memory or file plugin, with filters that
 * take away FUA, write zeroes or multi-conn, log the commands, fail writes or
 * slow them down; or a shell plugin that holds one write until the test
 * lets it go) in the foreground on a Unix socket in a temporary directory,
 * and kills it at the end. Data is checked byte for byte, through submit
 * with many operations outstanding from two threads and through
 * td_backend_read()/td_backend_write(). The backend's log lines go to a file
 * of the test's (copied to stderr at the end), so that a test can wait for
 * what the backend says it did. Without nbdkit every test that needs it
 * skips, after one line saying so.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "tagdisk/backend.h"
#include "unit_util.h"

#define DISK	 (64ULL << 20)
#define WAIT_MS	 60000 /* generous: a deadline for what happens at once, not a timing */
#define MAX_ARGS 24

static bool have_nbdkit;

/* One nbdkit, foreground, on DIR/nbd.sock. */
struct server {
	char dir[64];
	char sock[128];
	char uri[192];
	char log[128];	/* the log filter's file, when a test asks for it */
	char image[128]; /* the file plugin's file */
	char blog[128];	/* the backend's log lines (stderr), while captured */
	int saved_stderr; /* -1 unless stderr is going to blog */
	pid_t pid;
};

static bool in_path(const char *cmd)
{
	const char *path = getenv("PATH");
	char buf[512];

	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, cmd);
		if (access(buf, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

static bool socket_accepts(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static void server_init(struct server *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/td-nbd.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	snprintf(s->sock, sizeof(s->sock), "%s/nbd.sock", s->dir);
	snprintf(s->uri, sizeof(s->uri), "nbd+unix:///?socket=%s", s->sock);
	snprintf(s->log, sizeof(s->log), "%s/commands.log", s->dir);
	snprintf(s->image, sizeof(s->image), "%s/image", s->dir);
	snprintf(s->blog, sizeof(s->blog), "%s/backend.log", s->dir);
	s->saved_stderr = -1;
}

/*
 * Start nbdkit with @args (filters, plugin, its parameters; NULL-terminated)
 * and wait until its socket accepts connections.
 */
static void server_start_argv(struct server *s, const char *const *args)
{
	const char *argv[MAX_ARGS];
	char errpath[160];
	uint64_t deadline = mono_ns() + WAIT_MS * 1000000ULL;
	int n = 0;

	argv[n++] = "nbdkit";
	argv[n++] = "-f";
	argv[n++] = "--exit-with-parent";
	argv[n++] = "-U";
	argv[n++] = s->sock;
	while (*args) {
		assert_true(n < MAX_ARGS - 1);
		argv[n++] = *args++;
	}
	argv[n] = NULL;
	/* A killed nbdkit leaves its socket behind, and a new one would not bind. */
	unlink(s->sock);
	snprintf(errpath, sizeof(errpath), "%s/nbdkit.err", s->dir);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp("nbdkit", (char *const *)argv);
		_exit(127);
	}
	while (!socket_accepts(s->sock)) {
		int status;

		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = 0;
			fail_msg("nbdkit exited before serving (status %d); see %s", status, errpath);
		}
		if (mono_ns() > deadline)
			fail_msg("nbdkit did not serve %s within %d ms", s->sock, WAIT_MS);
		sleep_ms(5);
	}
}

#define server_start(s, ...) server_start_argv(s, (const char *const[]){ __VA_ARGS__, NULL })

static void server_kill(struct server *s, int sig)
{
	if (s->pid > 0) {
		kill(s->pid, sig);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}

/* From now on the backend's log lines (stderr) go to s->blog too. */
static void log_capture(struct server *s)
{
	int fd = open(s->blog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	fflush(stderr);
	s->saved_stderr = dup(2);
	assert_true(s->saved_stderr >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	close(fd);
}

/* Give stderr back, and copy what was captured to it. */
static void log_release(struct server *s)
{
	char line[1024];
	FILE *f;

	if (s->saved_stderr < 0)
		return;
	fflush(stderr);
	dup2(s->saved_stderr, 2);
	close(s->saved_stderr);
	s->saved_stderr = -1;
	f = fopen(s->blog, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

/* Return: true when the captured log has a line containing @needle. */
static bool log_has(const struct server *s, const char *needle)
{
	FILE *f = fopen(s->blog, "r");
	char line[1024];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* Wait until the captured log has a line containing @needle; fail after WAIT_MS. */
static void wait_log(const struct server *s, const char *needle)
{
	uint64_t deadline = mono_ns() + WAIT_MS * 1000000ULL;

	while (!log_has(s, needle)) {
		if (mono_ns() > deadline)
			fail_msg("no log line with '%s' within %d ms (see the log below)", needle,
				 WAIT_MS);
		sleep_ms(5);
	}
}

/* Wait until the file DIR/@name exists; fail after WAIT_MS. */
static void wait_path(const struct server *s, const char *name)
{
	uint64_t deadline = mono_ns() + WAIT_MS * 1000000ULL;
	char path[192];

	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	while (access(path, F_OK)) {
		if (mono_ns() > deadline)
			fail_msg("%s did not appear within %d ms", path, WAIT_MS);
		sleep_ms(5);
	}
}

static void server_cleanup(struct server *s)
{
	char cmd[128];

	log_release(s);
	server_kill(s, SIGKILL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
	if (system(cmd) != 0)
		print_message("# could not remove %s\n", s->dir);
}

/* Return: how many lines of the log filter's file contain @needle. */
static unsigned int log_count(const struct server *s, const char *needle)
{
	FILE *f = fopen(s->log, "r");
	char line[1024];
	unsigned int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/* The log filter's file has @n lines containing @needle; else print the file and fail. */
static void expect_log(const struct server *s, const char *needle, unsigned int n)
{
	unsigned int got = log_count(s, needle);
	char cmd[192];

	if (got == n)
		return;
	snprintf(cmd, sizeof(cmd), "sed 's/^/# /' '%s'", s->log);
	if (system(cmd) != 0)
		print_message("# cannot print %s\n", s->log);
	fail_msg("%u lines with '%s' in the command log, not %u", got, needle, n);
}

static int nbd_open(struct td_backend *be, const struct server *s, unsigned int conns,
		    bool read_only, uint64_t *size, char *msg, size_t msglen)
{
	struct td_nbd_params p = { .uri = s->uri, .connections = conns };

	msg[0] = '\0';
	return td_backend_nbd_open(be, &p, read_only, size, msg, msglen);
}

static void open_ok(struct td_backend *be, const struct server *s, unsigned int conns)
{
	char msg[256];
	uint64_t size = 0;
	int err = nbd_open(be, s, conns, false, &size, msg, sizeof(msg));

	if (err)
		fail_msg("open %s: %d: %s", s->uri, err, msg);
	assert_int_equal(size, DISK);
	assert_true(td_backend_is_async(be));
	assert_string_equal(be->ops->name, "nbd");
}

static void backend_close(struct td_backend *be)
{
	be->ops->destroy(be->priv);
}

static int setup_server(void **state)
{
	struct server *s;

	if (!have_nbdkit)
		return 0;
	s = calloc(1, sizeof(*s));
	assert_non_null(s);
	server_init(s);
	*state = s;
	return 0;
}

static int teardown_server(void **state)
{
	struct server *s = *state;

	if (s) {
		server_cleanup(s);
		free(s);
	}
	return 0;
}

#define NEED_NBDKIT()                \
	do {                         \
		if (!have_nbdkit)    \
			skip();      \
	} while (0)

/* ---- synchronous helpers -------------------------------------------------------------- */

static void write_seed(const struct td_backend *be, uint64_t off, size_t len, uint64_t seed,
		       bool fua)
{
	uint8_t *b = xmalloc(len);
	struct iovec iov = { b, len };

	fill_random(b, len, seed);
	assert_int_equal(td_backend_write(be, &iov, 1, off, fua), 0);
	free(b);
}

/* Read [off, off + len) as two iovecs and compare with @seed's bytes (or zeroes: seed 0). */
static void expect_seed(const struct td_backend *be, uint64_t off, size_t len, uint64_t seed)
{
	uint8_t *got = xmalloc(len);
	uint8_t *want = xmalloc(len);
	struct iovec iov[2] = { { got, len / 3 }, { got + len / 3, len - len / 3 } };

	if (seed)
		fill_random(want, len, seed);
	else
		memset(want, 0, len);
	memset(got, 0xa5, len);
	assert_int_equal(td_backend_read(be, iov, 2, off), 0);
	assert_memory_equal(got, want, len);
	free(got);
	free(want);
}

/* ---- many outstanding operations from two threads ------------------------------------- */

struct tio {
	struct td_backend_io io;
	struct done *d;
	_Atomic unsigned int calls; /* io->done calls: must end at exactly 1 */
	int err;
};

static void tio_done(struct td_backend_io *io, int err)
{
	struct tio *t = td_container_of(io, struct tio, io);

	t->err = err;
	atomic_fetch_add(&t->calls, 1);
	done_add(t->d, err);
}

#define SLOT	   (64U << 10)
#define HALF_SLOTS 128 /* per thread: 8 MiB of 64 KiB slots */

/* One submitter: every slot of its half, in a shuffled order, all outstanding at once. */
struct submitter {
	const struct td_backend *be;
	unsigned int half;
	enum td_op op;
	bool fua;
	uint64_t base;	     /* byte offset of slot 0 of half 0 */
	struct tio *tios;    /* HALF_SLOTS */
	uint8_t *bufs;	     /* HALF_SLOTS * SLOT */
	struct done *d;
	int submit_errors;
};

static uint64_t slot_seed(unsigned int half, unsigned int i, unsigned int round)
{
	return 1 + half * 100003ULL + i * 7919ULL + round * 1000000007ULL;
}

static void *submitter_run(void *arg)
{
	struct submitter *sm = arg;
	unsigned int order[HALF_SLOTS];
	uint64_t rnd = 99 + sm->half;

	for (unsigned int i = 0; i < HALF_SLOTS; i++)
		order[i] = i;
	for (unsigned int i = HALF_SLOTS - 1; i > 0; i--) {
		unsigned int j = (unsigned int)rnd_range(&rnd, 0, i);
		unsigned int t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (unsigned int k = 0; k < HALF_SLOTS; k++) {
		unsigned int i = order[k];
		struct tio *t = &sm->tios[i];

		t->d = sm->d;
		t->io = (struct td_backend_io){
			.op = sm->op,
			.fua = sm->fua,
			.off = sm->base + ((uint64_t)sm->half * HALF_SLOTS + i) * SLOT,
			.len = SLOT,
			.buf = sm->bufs + (size_t)i * SLOT,
			.done = tio_done,
		};
		if (sm->be->ops->submit(sm->be->priv, &t->io))
			sm->submit_errors++;
	}
	return NULL;
}

struct run2 {
	struct submitter sm[2];
	struct tio tios[2][HALF_SLOTS];
	struct done d;
};

/* Prepare two submitters over [base, base + 16 MiB); writes get seed @round's data. */
static struct run2 *run2_new(const struct td_backend *be, enum td_op op, bool fua,
			     uint64_t base, unsigned int round)
{
	struct run2 *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	done_init(&r->d);
	for (unsigned int h = 0; h < 2; h++) {
		struct submitter *sm = &r->sm[h];

		*sm = (struct submitter){ .be = be, .half = h, .op = op, .fua = fua, .base = base,
					  .tios = r->tios[h], .d = &r->d };
		sm->bufs = xmalloc((size_t)HALF_SLOTS * SLOT);
		for (unsigned int i = 0; i < HALF_SLOTS; i++) {
			if (op == TD_OP_WRITE)
				fill_random(sm->bufs + (size_t)i * SLOT, SLOT,
					    slot_seed(h, i, round));
			else
				memset(sm->bufs + (size_t)i * SLOT, 0xa5, SLOT);
		}
	}
	return r;
}

static void run2_start(struct run2 *r, pthread_t th[2])
{
	for (unsigned int h = 0; h < 2; h++)
		assert_int_equal(pthread_create(&th[h], NULL, submitter_run, &r->sm[h]), 0);
}

static void run2_join(struct run2 *r, pthread_t th[2])
{
	for (unsigned int h = 0; h < 2; h++) {
		pthread_join(th[h], NULL);
		assert_int_equal(r->sm[h].submit_errors, 0);
	}
}

/* Wait for every operation; each was done exactly once, without error. */
static void run2_wait_ok(struct run2 *r)
{
	if (!done_wait(&r->d, 2 * HALF_SLOTS, WAIT_MS))
		fail_msg("%u of %u operations done", done_count(&r->d), 2 * HALF_SLOTS);
	for (unsigned int h = 0; h < 2; h++)
		for (unsigned int i = 0; i < HALF_SLOTS; i++) {
			assert_int_equal(atomic_load(&r->tios[h][i].calls), 1);
			assert_int_equal(r->tios[h][i].err, 0);
		}
	assert_int_equal(r->d.errors, 0);
}

static void run2(const struct td_backend *be, enum td_op op, bool fua, uint64_t base,
		 unsigned int round, bool check)
{
	struct run2 *r = run2_new(be, op, fua, base, round);
	pthread_t th[2];

	run2_start(r, th);
	run2_join(r, th);
	run2_wait_ok(r);
	if (check) {
		uint8_t *want = xmalloc(SLOT);

		for (unsigned int h = 0; h < 2; h++)
			for (unsigned int i = 0; i < HALF_SLOTS; i++) {
				fill_random(want, SLOT, slot_seed(h, i, round));
				assert_memory_equal(r->sm[h].bufs + (size_t)i * SLOT, want, SLOT);
			}
		free(want);
	}
	for (unsigned int h = 0; h < 2; h++)
		free(r->sm[h].bufs);
	/* No operation may come late: the counter stays where it is. */
	assert_int_equal(done_count(&r->d), 2 * HALF_SLOTS);
	done_destroy(&r->d);
	free(r);
}

/* ---- the tests ------------------------------------------------------------------------ */

struct bad_open {
	const char *name;
	const char *uri;
	unsigned int connections;
	int err;
	const char *msg_has;
};

static const struct bad_open bad_opens[] = {
	{ "test_nbd_open_without_uri_says_what_a_uri_looks_like", NULL, 1, -EINVAL, "nbd://" },
	{ "test_nbd_open_rejects_an_http_uri", "http://localhost/x", 1, -EINVAL, "nbd+unix://" },
	{ "test_nbd_open_rejects_a_tls_uri", "nbds://localhost/x", 1, -EINVAL, "'nbds://" },
	{ "test_nbd_open_rejects_0_connections", "nbd://localhost/", 0, -EINVAL, "1..16" },
	{ "test_nbd_open_rejects_17_connections", "nbd://localhost/", 17, -EINVAL, "1..16" },
	{ "test_nbd_open_names_the_uri_it_cannot_reach",
	  "nbd+unix:///?socket=/nonexistent/td-nbd.sock", 1, -ECONNREFUSED,
	  "cannot connect to 'nbd+unix:///?socket=/nonexistent/td-nbd.sock'" },
};

static void test_bad_open(void **state)
{
	const struct bad_open *b = *state;
	struct td_nbd_params p = { .uri = b->uri, .connections = b->connections };
	struct td_backend be = { 0 };
	uint64_t size = 0;
	char msg[256] = "";

	assert_int_equal(td_backend_nbd_open(&be, &p, false, &size, msg, sizeof(msg)), b->err);
	if (!strstr(msg, b->msg_has))
		fail_msg("message '%s' lacks '%s'", msg, b->msg_has);
	assert_null(strchr(msg, '\n'));
	assert_null(be.ops);
}

static void test_nbd_writes_and_reads_exact_with_many_outstanding_from_two_threads(void **state)
{
	struct server *s = *state;
	struct td_backend be;

	NEED_NBDKIT();
	server_start(s, "memory", "64M");
	open_ok(&be, s, 1);
	run2(&be, TD_OP_WRITE, false, 0, 1, false);
	run2(&be, TD_OP_READ, false, 0, 1, true);
	/* The same ranges again, now FUA, read back synchronously. */
	run2(&be, TD_OP_WRITE, true, 0, 2, false);
	for (unsigned int i = 0; i < HALF_SLOTS; i += 17)
		expect_seed(&be, (uint64_t)i * SLOT, SLOT, slot_seed(0, i, 2));
	/* Unaligned, synchronous, across the end of one slot into the next. */
	write_seed(&be, SLOT - 1000, 3001, 77, false);
	expect_seed(&be, SLOT - 1000, 3001, 77);
	assert_int_equal(td_backend_flush(&be), 0);
	backend_close(&be);
}

static void test_nbd_reads_past_the_end_read_zeroes_and_writes_fail(void **state)
{
	struct server *s = *state;
	struct td_backend be;
	uint8_t b[8192];
	struct iovec iov = { b, sizeof(b) };

	NEED_NBDKIT();
	server_start(s, "memory", "64M");
	open_ok(&be, s, 1);
	write_seed(&be, DISK - 4096, 4096, 5, false);
	memset(b, 0xa5, sizeof(b));
	assert_int_equal(td_backend_read(&be, &iov, 1, DISK - 4096), 0);
	assert_true(all_value(b + 4096, 4096, 0));
	expect_seed(&be, DISK - 4096, 4096, 5);
	assert_int_equal(td_backend_write(&be, &iov, 1, DISK - 4096, false), -ENOSPC);
	backend_close(&be);
}

static void test_nbd_fua_is_native_when_the_server_offers_it(void **state)
{
	struct server *s = *state;
	char logarg[160];
	struct td_backend be;

	NEED_NBDKIT();
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	server_start(s, "--filter=log", "memory", "64M", logarg);
	open_ok(&be, s, 1);
	write_seed(&be, 4096, 8192, 11, true);
	expect_seed(&be, 4096, 8192, 11);
	backend_close(&be);
	expect_log(s, " Write id=", 1);
	expect_log(s, "fua=1", 1);
	expect_log(s, " Flush id=", 0);
}

static void test_nbd_fua_write_on_a_server_without_fua_is_write_then_flush(void **state)
{
	struct server *s = *state;
	char logarg[160];
	struct td_backend be;

	NEED_NBDKIT();
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	server_start(s, "--filter=log", "--filter=fua", "memory", "64M", logarg);
	open_ok(&be, s, 1);
	write_seed(&be, 4096, 8192, 12, true);
	expect_log(s, " Write id=", 1);
	expect_log(s, "fua=1", 0);
	expect_log(s, " Flush id=", 1);
	write_seed(&be, 65536, 4096, 13, false);
	expect_log(s, " Flush id=", 1);
	assert_int_equal(td_backend_flush(&be), 0);
	expect_log(s, " Flush id=", 2);
	expect_seed(&be, 4096, 8192, 12);
	expect_seed(&be, 65536, 4096, 13);
	backend_close(&be);
}

/* Discard and write zeroes on @s (already serving): both read back as zeroes. */
static void discard_and_zero_read_back_zeroes(const struct server *s)
{
	struct td_backend be;

	open_ok(&be, s, 1);
	write_seed(&be, 0, 4U << 20, 21, false);
	assert_int_equal(td_backend_discard(&be, 1U << 20, 1U << 20), 0);
	assert_int_equal(td_backend_write_zeroes(&be, 3U << 20, 512 * 1024), 0);
	expect_seed(&be, 0, 1U << 20, 21);
	expect_seed(&be, 1U << 20, 1U << 20, 0);
	expect_seed(&be, 3U << 20, 512 * 1024, 0);
	{
		/* What lies between and after is untouched. */
		uint8_t *all = xmalloc(4U << 20);
		uint8_t *want = xmalloc(4U << 20);
		struct iovec iov = { all, 4U << 20 };

		fill_random(want, 4U << 20, 21);
		memset(want + (1U << 20), 0, 1U << 20);
		memset(want + (3U << 20), 0, 512 * 1024);
		assert_int_equal(td_backend_read(&be, &iov, 1, 0), 0);
		assert_memory_equal(all, want, 4U << 20);
		free(all);
		free(want);
	}
	backend_close(&be);
}

static void test_nbd_discard_and_write_zeroes_read_back_zeroes(void **state)
{
	struct server *s = *state;
	char logarg[160];
	char filearg[160];
	struct stat st;
	int fd;

	NEED_NBDKIT();
	fd = open(s->image, O_RDWR | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)DISK), 0);
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	snprintf(filearg, sizeof(filearg), "file=%s", s->image);
	server_start(s, "--filter=log", "file", filearg, logarg);
	discard_and_zero_read_back_zeroes(s);
	/* Discard may release space (no NO_HOLE), write zeroes keeps it (NO_HOLE). */
	expect_log(s, " Trim id=", 0);
	expect_log(s, " Zero id=", 2);
	expect_log(s, " trim=1 fua=", 1);
	expect_log(s, " trim=0 fua=", 1);
	/* The discarded MiB is a hole in the served file again (4 MiB were written). */
	assert_int_equal(fstat(fd, &st), 0);
	assert_true((uint64_t)st.st_blocks * 512 <= (3U << 20) + (512U << 10));
	close(fd);
}

static void test_nbd_discard_on_a_server_without_write_zeroes_writes_zeroes(void **state)
{
	struct server *s = *state;
	char logarg[160];

	NEED_NBDKIT();
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	server_start(s, "--filter=log", "--filter=nozero", "memory", "64M", logarg,
		     "zeromode=none");
	discard_and_zero_read_back_zeroes(s);
	expect_log(s, " Zero id=", 0);
	expect_log(s, " Trim id=", 0);
}

static void test_nbd_cuts_reads_and_writes_at_the_server_maximum(void **state)
{
	struct server *s = *state;
	char logarg[160];
	struct td_backend be;

	NEED_NBDKIT();
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	/* Larger requests than 64 KiB would fail with EINVAL. */
	server_start(s, "--filter=log", "--filter=blocksize-policy", "memory", "64M", logarg,
		     "blocksize-maximum=64K", "blocksize-error-policy=error");
	open_ok(&be, s, 1);
	write_seed(&be, 12345 * 512, 1U << 20, 41, true);
	expect_seed(&be, 12345 * 512, 1U << 20, 41);
	backend_close(&be);
	expect_log(s, " Write id=", 16);
	expect_log(s, "fua=1", 16);
	/* expect_seed reads it once as one iovec list: 16 reads. */
	expect_log(s, " Read id=", 16);
}

static void test_nbd_cuts_write_zeroes_at_one_gib(void **state)
{
	struct server *s = *state;
	struct td_nbd_params p = { .uri = s->uri, .connections = 1 };
	char logarg[160];
	struct td_backend be;
	uint64_t size;
	char msg[256];

	NEED_NBDKIT();
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	server_start(s, "--filter=log", "memory", "3G", logarg);
	assert_int_equal(td_backend_nbd_open(&be, &p, false, &size, msg, sizeof(msg)), 0);
	assert_int_equal(size, 3ULL << 30);
	/* Both pieces reach their ends: zeroes up to 1.5 GiB + 4 KiB, data after. */
	write_seed(&be, (3ULL << 29) - 4096, 8192, 51, false);
	write_seed(&be, (3ULL << 29) + 4096, 4096, 52, false);
	assert_int_equal(td_backend_discard(&be, 4096, 3ULL << 29), 0);
	expect_seed(&be, (3ULL << 29) - 4096, 8192, 0);
	expect_seed(&be, (3ULL << 29) + 4096, 4096, 52);
	backend_close(&be);
	expect_log(s, " Zero id=", 2);
	expect_log(s, "count=0x40000000 trim=1", 1);
	expect_log(s, "count=0x20000000 trim=1", 1);
}

static void test_nbd_four_connections_on_a_multi_conn_server(void **state)
{
	struct server *s = *state;
	char logarg[160];
	struct td_backend be;

	NEED_NBDKIT();
	snprintf(logarg, sizeof(logarg), "logfile=%s", s->log);
	server_start(s, "--filter=log", "memory", "64M", logarg);
	open_ok(&be, s, 4);
	run2(&be, TD_OP_WRITE, false, 16U << 20, 3, false);
	run2(&be, TD_OP_READ, false, 16U << 20, 3, true);
	assert_int_equal(td_backend_flush(&be), 0);
	backend_close(&be);
	expect_log(s, "Connect export=", 4);
	/* Round robin: every connection carried writes. */
	for (unsigned int i = 1; i <= 4; i++) {
		char needle[64];

		snprintf(needle, sizeof(needle), "connection=%u Write id=", i);
		assert_true(log_count(s, needle) >= 2 * HALF_SLOTS / 4 - 1);
	}
}

static void test_nbd_refuses_connections_without_multi_conn(void **state)
{
	struct server *s = *state;
	struct td_backend be = { 0 };
	char msg[256];
	uint64_t size;

	NEED_NBDKIT();
	server_start(s, "--filter=multi-conn", "memory", "64M", "multi-conn-mode=disable");
	assert_int_equal(nbd_open(&be, s, 4, false, &size, msg, sizeof(msg)), -EINVAL);
	if (!strstr(msg, "multi-conn") || !strstr(msg, s->uri))
		fail_msg("message: %s", msg);
	assert_int_equal(nbd_open(&be, s, 1, false, &size, msg, sizeof(msg)), 0);
	backend_close(&be);
}

static void test_nbd_read_only_export_needs_read_only(void **state)
{
	struct server *s = *state;
	struct td_backend be = { 0 };
	uint8_t b[4096];
	struct iovec iov = { b, sizeof(b) };
	char msg[256];
	uint64_t size;

	NEED_NBDKIT();
	server_start(s, "-r", "memory", "64M");
	assert_int_equal(nbd_open(&be, s, 1, false, &size, msg, sizeof(msg)), -EROFS);
	if (!strstr(msg, "read-only"))
		fail_msg("message: %s", msg);
	assert_int_equal(nbd_open(&be, s, 1, true, &size, msg, sizeof(msg)), 0);
	memset(b, 0xa5, sizeof(b));
	assert_int_equal(td_backend_read(&be, &iov, 1, 0), 0);
	assert_true(all_value(b, sizeof(b), 0));
	assert_int_equal(td_backend_write(&be, &iov, 1, 0, false), -EROFS);
	assert_int_equal(td_backend_discard(&be, 0, 4096), -EROFS);
	assert_int_equal(td_backend_flush(&be), 0);
	backend_close(&be);
}

static void test_nbd_server_errors_reach_done_and_are_not_retried(void **state)
{
	struct server *s = *state;
	struct td_backend be;
	uint8_t b[4096];
	struct iovec iov = { b, sizeof(b) };

	NEED_NBDKIT();
	server_start(s, "--filter=error", "memory", "64M", "error-pwrite=ENOSPC",
		     "error-pwrite-rate=100%");
	open_ok(&be, s, 1);
	memset(b, 1, sizeof(b));
	assert_int_equal(td_backend_write(&be, &iov, 1, 0, false), -ENOSPC);
	assert_int_equal(td_backend_read(&be, &iov, 1, 0), 0);
	assert_true(all_value(b, sizeof(b), 0));
	backend_close(&be);
}

/*
 * Kill the server with @sig while writes are outstanding on two connections,
 * submit more while it is away, start it again: every operation completes
 * once, without error, and the data is in the served file.
 */
static void server_lost_and_back(struct server *s, int sig)
{
	char filearg[160];
	struct td_backend be;
	struct run2 *r;
	pthread_t th[2];
	struct tio late[8];
	uint8_t *late_buf = xmalloc(8 * 4096);
	uint8_t *want = xmalloc(SLOT);
	uint8_t *got = xmalloc(SLOT);
	unsigned int seen;
	int fd;

	fd = open(s->image, O_RDWR | O_CREAT, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)DISK), 0);
	snprintf(filearg, sizeof(filearg), "file=%s", s->image);
	/* Slow writes, so that many are outstanding when the server dies. */
	server_start(s, "--filter=delay", "file", filearg, "wdelay=20ms");
	open_ok(&be, s, 2);

	r = run2_new(&be, TD_OP_WRITE, false, 0, 4);
	run2_start(r, th);
	run2_join(r, th);
	assert_true(done_wait(&r->d, 16, WAIT_MS));
	server_kill(s, sig);
	seen = done_count(&r->d);
	print_message("# nbdkit stopped by signal %d with %u of %u writes done\n", sig, seen,
		      2 * HALF_SLOTS);
	assert_true(seen < 2 * HALF_SLOTS);

	/* Operations submitted while the server is away wait for it too. */
	for (unsigned int i = 0; i < 8; i++) {
		fill_random(late_buf + i * 4096, 4096, 500 + i);
		late[i] = (struct tio){ .d = &r->d };
		late[i].io = (struct td_backend_io){ .op = TD_OP_WRITE, .off = (32ULL << 20) + i * 4096,
						     .len = 4096, .buf = late_buf + i * 4096,
						     .done = tio_done };
		assert_int_equal(be.ops->submit(be.priv, &late[i].io), 0);
	}
	server_start(s, "file", filearg);

	if (!done_wait(&r->d, 2 * HALF_SLOTS + 8, WAIT_MS))
		fail_msg("%u operations done", done_count(&r->d));
	run2_wait_ok(r);
	for (unsigned int i = 0; i < 8; i++) {
		assert_int_equal(atomic_load(&late[i].calls), 1);
		assert_int_equal(late[i].err, 0);
	}
	assert_int_equal(done_count(&r->d), 2 * HALF_SLOTS + 8);

	/* Every write is there: through the backend and in the served file. */
	for (unsigned int h = 0; h < 2; h++)
		for (unsigned int i = 0; i < HALF_SLOTS; i++) {
			uint64_t off = ((uint64_t)h * HALF_SLOTS + i) * SLOT;

			fill_random(want, SLOT, slot_seed(h, i, 4));
			expect_seed(&be, off, SLOT, slot_seed(h, i, 4));
			assert_int_equal(pread(fd, got, SLOT, (off_t)off), SLOT);
			assert_memory_equal(got, want, SLOT);
		}
	assert_int_equal(td_backend_flush(&be), 0);
	assert_int_equal(pread(fd, got, 8 * 4096, 32LL << 20), 8 * 4096);
	assert_memory_equal(got, late_buf, 8 * 4096);
	backend_close(&be);

	for (unsigned int h = 0; h < 2; h++)
		free(r->sm[h].bufs);
	done_destroy(&r->d);
	free(r);
	free(late_buf);
	free(want);
	free(got);
	close(fd);
}

static void test_nbd_reconnects_and_sends_again_after_the_server_is_killed(void **state)
{
	NEED_NBDKIT();
	server_lost_and_back(*state, SIGKILL);
}

/* nbdkit answers ESHUTDOWN to what comes after SIGTERM: sent again, too. */
static void test_nbd_reconnects_and_sends_again_after_the_server_is_stopped(void **state)
{
	NEED_NBDKIT();
	server_lost_and_back(*state, SIGTERM);
}

static void test_nbd_destroy_returns_while_the_server_is_away(void **state)
{
	struct server *s = *state;
	struct td_backend be;

	NEED_NBDKIT();
	server_start(s, "memory", "64M");
	open_ok(&be, s, 2);
	write_seed(&be, 0, 4096, 31, false);
	server_kill(s, SIGKILL);
	backend_close(&be);
}

/* ---- a server that holds one write ------------------------------------------------------ */

static const char hold_plugin[] =
	"#!/bin/bash\n"
	"# Serves DIR/image. Holds the first write whose data starts with HOLD: makes\n"
	"# DIR/held, waits for DIR/release (or for nbdkit to go), then writes. Each write\n"
	"# that reached the image is a line 'OFFSET FIRST-4-BYTES' of DIR/pwrites.\n"
	"dir='%s'\n"
	"case \"$1\" in\n"
	"thread_model) echo parallel ;;\n"
	"get_size) stat -L -c %%s \"$dir/image\" ;;\n"
	"can_write|can_flush|can_multi_conn) ;;\n"
	"pread) exec dd if=\"$dir/image\" iflag=skip_bytes,count_bytes skip=\"$4\" count=\"$3\" "
	"status=none ;;\n"
	"pwrite)\n"
	"\ttmp=$(mktemp \"$dir/w.XXXXXX\") || exit 1\n"
	"\tcat >\"$tmp\"\n"
	"\tif [ \"$(head -c 4 \"$tmp\")\" = HOLD ] && mkdir \"$dir/held\" 2>/dev/null; then\n"
	"\t\twhile [ ! -e \"$dir/release\" ] && kill -0 $PPID 2>/dev/null; do sleep 0.01; done\n"
	"\tfi\n"
	"\tdd if=\"$tmp\" of=\"$dir/image\" oflag=seek_bytes conv=notrunc seek=\"$4\" "
	"status=none || exit 1\n"
	"\techo \"$4 $(head -c 4 \"$tmp\")\" >>\"$dir/pwrites\"\n"
	"\trm -f \"$tmp\" ;;\n"
	"flush) ;;\n"
	"*) exit 2 ;;\n"
	"esac\n";

/* Serve a 64 MiB s->image through hold_plugin. */
static void server_start_holding(struct server *s)
{
	char script[160];
	FILE *f;
	int fd;

	fd = open(s->image, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)DISK), 0);
	close(fd);
	snprintf(script, sizeof(script), "%s/hold.sh", s->dir);
	f = fopen(script, "w");
	assert_non_null(f);
	fprintf(f, hold_plugin, s->dir);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(script, 0755), 0);
	server_start(s, "sh", script);
}

/* Let the held write go. */
static void server_release(const struct server *s)
{
	char path[192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/release", s->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

/* Return: the lines of DIR/pwrites, joined with '|' into @buf. */
static const char *server_pwrites(const struct server *s, char *buf, size_t len)
{
	char path[192];
	char line[128];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/pwrites", s->dir);
	buf[0] = '\0';
	f = fopen(path, "r");
	if (!f)
		return buf;
	while (fgets(line, sizeof(line), f) && n < len) {
		line[strcspn(line, "\n")] = '\0';
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "", line);
	}
	fclose(f);
	return buf;
}

/* A 4 KiB write of @tag (4 bytes) and then @seed's bytes, at @off, through submit. */
static void submit_tagged_write(const struct td_backend *be, struct tio *t, uint8_t *buf,
				uint64_t off, const char *tag, uint64_t seed, struct done *d)
{
	fill_random(buf, 4096, seed);
	memcpy(buf, tag, 4);
	*t = (struct tio){ .d = d };
	t->io = (struct td_backend_io){ .op = TD_OP_WRITE, .off = off, .len = 4096, .buf = buf,
					.done = tio_done };
	assert_int_equal(be->ops->submit(be->priv, &t->io), 0);
}

/*
 * The server holds a write past the answer limit. The backend gives up on the connection,
 * but neither sends the write again nor completes it while the server may still execute
 * it: the first send lands, answered, and a newer write to the same place, submitted
 * meanwhile, lands after it.
 */
static void test_nbd_a_write_held_past_the_answer_limit_is_not_sent_again_nor_done(void **state)
{
	struct server *s = *state;
	uint8_t *bufs = xmalloc(3 * 4096);
	uint8_t got[4096];
	char pw[256];
	struct td_backend be;
	struct tio t[3];
	struct done d;
	uint64_t deadline;
	int fd;

	NEED_NBDKIT();
	done_init(&d);
	server_start_holding(s);
	log_capture(s);
	setenv("TAGDISK_NBD_ANSWER_LIMIT_MS", "500", 1);
	open_ok(&be, s, 1);
	unsetenv("TAGDISK_NBD_ANSWER_LIMIT_MS");

	submit_tagged_write(&be, &t[0], bufs, 1U << 20, "HOLD", 61, &d);
	wait_path(s, "held");
	wait_log(s, "no answer for 500 ms");
	/* What the backend does next: send it again (and complete it), or drain. */
	deadline = mono_ns() + WAIT_MS * 1000000ULL;
	while (!done_count(&d) && !log_has(s, "draining it")) {
		if (mono_ns() > deadline)
			fail_msg("neither completed nor drained within %d ms", WAIT_MS);
		sleep_ms(5);
	}
	if (done_count(&d))
		fail_msg("the write completed (error %d) while its first send was still held by "
			 "the server; the server's writes so far: %s", t[0].err,
			 server_pwrites(s, pw, sizeof(pw)));

	/* A newer write to the same place, and one elsewhere: they wait for the connection. */
	submit_tagged_write(&be, &t[1], bufs + 4096, 1U << 20, "NEWW", 62, &d);
	submit_tagged_write(&be, &t[2], bufs + 8192, 2U << 20, "ELSE", 63, &d);
	server_release(s);
	if (!done_wait(&d, 3, WAIT_MS))
		fail_msg("%u of 3 writes done", done_count(&d));
	for (unsigned int i = 0; i < 3; i++) {
		assert_int_equal(atomic_load(&t[i].calls), 1);
		assert_int_equal(t[i].err, 0);
	}
	/* The held write reached the image once, before the newer one. */
	server_pwrites(s, pw, sizeof(pw));
	if (strncmp(pw, "1048576 HOLD|", 13) || strstr(pw + 13, "HOLD") ||
	    !strstr(pw, "1048576 NEWW") || !strstr(pw, "2097152 ELSE"))
		fail_msg("the server's writes, in order: %s", pw);
	fd = open(s->image, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, sizeof(got), 1 << 20), sizeof(got));
	assert_memory_equal(got, bufs + 4096, sizeof(got));
	close(fd);
	wait_log(s, "drained after");
	wait_log(s, "back after");
	backend_close(&be);
	done_destroy(&d);
	free(bufs);
}

/*
 * A server stopped with writes in flight: the connection is drained; killed meanwhile, it
 * closes the drained connection, which ends the drain, and the writes go again to the
 * server started in its place.
 */
static void test_nbd_a_drained_connection_closed_by_the_server_sends_its_writes_again(
	void **state)
{
	struct server *s = *state;
	uint8_t *bufs = xmalloc(8 * 4096);
	uint8_t *got = xmalloc(8 * 4096);
	char filearg[160];
	struct td_backend be;
	struct tio t[8];
	struct done d;
	int status;
	int fd;

	NEED_NBDKIT();
	done_init(&d);
	fd = open(s->image, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)DISK), 0);
	snprintf(filearg, sizeof(filearg), "file=%s", s->image);
	server_start(s, "file", filearg);
	log_capture(s);
	setenv("TAGDISK_NBD_ANSWER_LIMIT_MS", "500", 1);
	open_ok(&be, s, 1);
	unsetenv("TAGDISK_NBD_ANSWER_LIMIT_MS");

	/* Stopped for good before the writes: none of them can be answered. */
	assert_int_equal(kill(s->pid, SIGSTOP), 0);
	assert_int_equal(waitpid(s->pid, &status, WUNTRACED), s->pid);
	assert_true(WIFSTOPPED(status));
	for (unsigned int i = 0; i < 8; i++)
		submit_tagged_write(&be, &t[i], bufs + i * 4096, (5ULL << 20) + i * 4096, "DATA",
				    70 + i, &d);
	wait_log(s, "draining it: 8 command(s)");
	assert_int_equal(done_count(&d), 0);
	server_kill(s, SIGKILL);
	wait_log(s, "drained after");
	server_start(s, "file", filearg);
	if (!done_wait(&d, 8, WAIT_MS))
		fail_msg("%u of 8 writes done", done_count(&d));
	for (unsigned int i = 0; i < 8; i++) {
		assert_int_equal(atomic_load(&t[i].calls), 1);
		assert_int_equal(t[i].err, 0);
	}
	assert_int_equal(pread(fd, got, 8 * 4096, 5LL << 20), 8 * 4096);
	assert_memory_equal(got, bufs, 8 * 4096);
	backend_close(&be);
	done_destroy(&d);
	close(fd);
	free(bufs);
	free(got);
}

struct bad_limit {
	const char *name;
	const char *var;
	const char *value;
};

static const struct bad_limit bad_limits[] = {
	{ "test_nbd_open_refuses_an_answer_limit_that_is_not_a_number",
	  "TAGDISK_NBD_ANSWER_LIMIT_MS", "5s" },
	{ "test_nbd_open_refuses_an_empty_answer_limit", "TAGDISK_NBD_ANSWER_LIMIT_MS", "" },
	{ "test_nbd_open_refuses_a_negative_lost_limit", "TAGDISK_NBD_LOST_LIMIT_MS", "-1000" },
	{ "test_nbd_open_refuses_a_lost_limit_under_100_ms", "TAGDISK_NBD_LOST_LIMIT_MS", "99" },
	{ "test_nbd_open_refuses_a_lost_limit_over_an_hour", "TAGDISK_NBD_LOST_LIMIT_MS",
	  "3600001" },
};

/* A bad limit in the environment: the open fails before connecting, naming the variable. */
static void test_bad_limit(void **state)
{
	const struct bad_limit *b = *state;
	struct td_nbd_params p = { .uri = "nbd+unix:///?socket=/nonexistent/td-nbd.sock",
				   .connections = 1 };
	struct td_backend be = { 0 };
	char want[128];
	char msg[256] = "";
	uint64_t size = 0;
	int err;

	setenv(b->var, b->value, 1);
	err = td_backend_nbd_open(&be, &p, false, &size, msg, sizeof(msg));
	unsetenv(b->var);
	assert_int_equal(err, -EINVAL);
	snprintf(want, sizeof(want), "%s='%s'", b->var, b->value);
	if (!strstr(msg, want) || !strstr(msg, "100 to 3600000"))
		fail_msg("message '%s' lacks '%s' or the range", msg, want);
	assert_null(be.ops);
}

int main(void)
{
	struct test_list l = { 0 };

	have_nbdkit = in_path("nbdkit");
	if (!have_nbdkit)
		print_message("# nbdkit is not installed: the tests that need a server skip\n");
	/* A killed server must not kill us through a write on its socket. */
	signal(SIGPIPE, SIG_IGN);
	TL_ADD_TABLE(&l, test_bad_open, NULL, NULL, bad_opens);
	TL_ADD_TABLE(&l, test_bad_limit, NULL, NULL, bad_limits);
#define T(fn) test_list_add(&l, #fn, fn, setup_server, teardown_server, NULL)
	T(test_nbd_writes_and_reads_exact_with_many_outstanding_from_two_threads);
	T(test_nbd_reads_past_the_end_read_zeroes_and_writes_fail);
	T(test_nbd_fua_is_native_when_the_server_offers_it);
	T(test_nbd_fua_write_on_a_server_without_fua_is_write_then_flush);
	T(test_nbd_discard_and_write_zeroes_read_back_zeroes);
	T(test_nbd_discard_on_a_server_without_write_zeroes_writes_zeroes);
	T(test_nbd_cuts_reads_and_writes_at_the_server_maximum);
	T(test_nbd_cuts_write_zeroes_at_one_gib);
	T(test_nbd_four_connections_on_a_multi_conn_server);
	T(test_nbd_refuses_connections_without_multi_conn);
	T(test_nbd_read_only_export_needs_read_only);
	T(test_nbd_server_errors_reach_done_and_are_not_retried);
	T(test_nbd_reconnects_and_sends_again_after_the_server_is_killed);
	T(test_nbd_reconnects_and_sends_again_after_the_server_is_stopped);
	T(test_nbd_destroy_returns_while_the_server_is_away);
	T(test_nbd_a_write_held_past_the_answer_limit_is_not_sent_again_nor_done);
	T(test_nbd_a_drained_connection_closed_by_the_server_sends_its_writes_again);
#undef T
	return test_list_run(&l);
}
