// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_session.c - the classic FUSE transport: libfuse's low-level session,
 * our own loop and threads.
 *
 * Threads. The loop starts with one thread and starts another whenever a
 * thread takes a request while no other is idle, up to max_threads; a thread
 * that finds MAX_IDLE others idle when it finishes a request ends, so a burst
 * does not leave dozens of threads behind (each one more for the kernel to
 * wake, each holding a receive buffer). `idle` counts the threads between
 * requests, including one being started (it may take a request before
 * pthread_create() returns). Whether many threads run depends on the ops:
 * tagdiskd's handlers in rq mode with drive workers only block for
 * back-pressure; in bio mode, or with an inline drive, each I/O in flight
 * occupies a thread.
 *
 * Receive buffers. Each thread holds one (class td_fuse_recv_size() of the
 * pool, every page resident: td_session_recv_buf() says why) while it reads.
 * A handler that steals it (td_fuse_steal_recv_buf) owns it from then on; the
 * thread takes another from the pool for its next read. A thread gives its
 * buffer back when it ends.
 *
 * Starting. The rings of FUSE over io_uring (transport auto or uring) are
 * made before mounting, so that an explicit uring that cannot have them
 * fails before anything is mounted; the fuse module must offer the ring
 * (enable_uring Y, which we set when we may). Every reply goes through
 * fuse_session_reply.c's hook, which settles the FUSE_INIT exchange that
 * td_fuse_session_wait_ready() waits for: the transport in use is known
 * before the daemon says it is ready.
 *
 * Stopping. td_fuse_session_stop() sets a flag and wakes run, which
 * interrupts threads blocked in read(2) with SIGUSR1 (installed without
 * SA_RESTART), repeating until every thread has noticed. An unmount makes
 * read(2) fail with ENODEV, which ends the loop the same way. Stopping holds
 * new ring requests; destroying closes the rings before the device (their
 * commands pin it).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define TD_HAVE_VALGRIND_H 1
#endif
#endif
#include "common/clock.h"
#include "common/log.h"
#include "daemon/fuse_session_int.h"

#define THREAD_STACK	 (512U << 10)
#define MAX_IDLE	 10 /* idle loop threads kept; more of them exit */
#define ENABLE_URING	 "/sys/module/fuse/parameters/enable_uring"
#define RING_ENTRIES_MAX 64U

struct loop_thread {
	struct td_list link; /* s->threads, under s->lock */
	pthread_t tid;
	bool done;	     /* s->lock */
};

/* The session this loop thread serves; the receive buffer it is handling, if a handler kept it. */
static _Thread_local struct td_fuse_session *tl_session;
static _Thread_local struct td_buf *tl_rbuf;
static _Thread_local bool tl_stolen;

void td_session_set_thread(struct td_fuse_session *s)
{
	tl_session = s;
}

size_t td_fuse_recv_size(void)
{
	return TD_LIBFUSE_MAX_PAGES * (size_t)getpagesize() + TD_LIBFUSE_HEADER_SIZE;
}

struct td_buf *td_fuse_steal_recv_buf(const void *data, size_t len)
{
	struct td_buf *rb = tl_rbuf;
	const char *p = data;

	if (!rb || p < (const char *)rb->mem || len > rb->cap ||
	    (size_t)(p - (const char *)rb->mem) > rb->cap - len)
		return NULL;
	tl_rbuf = NULL;
	tl_stolen = true;
	return rb;
}

struct td_buf *td_session_recv_buf(struct td_fuse_session *s)
{
	struct td_buf *rb = td_bufpool_get(s->pool, td_fuse_recv_size());

	if (rb && td_buf_make_resident(rb)) {
		td_bufpool_put(s->pool, rb);
		return NULL;
	}
	return rb;
}

/* FUSE_INIT: the limits that follow from our buffers, then the file system's own wishes. */
static void session_init(void *userdata, struct fuse_conn_info *conn)
{
	struct td_fuse_session *s = tl_session;

	conn->max_write = TD_FUSE_MAX_WRITE;
	conn->max_background = s->max_background;
	conn->congestion_threshold = TD_MAX(s->max_background * 3 / 4, 1U);
	/* Buffers must be memory we own: no splicing. */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (s->ops->ll->init)
		s->ops->ll->init(userdata, conn);
	td_info("fuse: max_write %u, max_background %u, congestion_threshold %u", conn->max_write,
		conn->max_background, conn->congestion_threshold);
}

/* ---- FUSE over io_uring: probing and the rings -------------------------------------- */

/* Return: whether this process runs under valgrind. */
static bool under_valgrind(void)
{
#ifdef TD_HAVE_VALGRIND_H
	if (RUNNING_ON_VALGRIND)
		return true;
#endif
	/* Without the header: valgrind preloads its vgpreload_*.so into the client. */
	const char *preload = getenv("LD_PRELOAD");

	return preload && strstr(preload, "vgpreload");
}

/* Return: 0 when the module offers FUSE over io_uring (setting enable_uring if we may), else -1. */
static int uring_probe(char *why, size_t len)
{
	if (under_valgrind()) {
		/*
		 * Its scheduler runs one thread at a time and does not see a thread
		 * waiting in io_uring_enter() as blocked: the rings would stall the
		 * whole daemon.
		 */
		snprintf(why, len, "the daemon runs under valgrind, which cannot run io_uring "
			 "rings beside other threads");
		return -1;
	}
	int fd = open(ENABLE_URING, O_RDWR | O_CLOEXEC);
	bool writable = fd >= 0;
	char c = 0;
	struct io_uring ring;
	struct io_uring_params params = { .flags = IORING_SETUP_SQE128 };
	int ret;

	if (fd < 0)
		fd = open(ENABLE_URING, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, len, "the kernel has no FUSE over io_uring (%s: %s)", ENABLE_URING,
			 strerror(errno));
		return -1;
	}
	if (pread(fd, &c, 1, 0) != 1)
		c = 0;
	if (c != 'Y') {
		if (!writable || pwrite(fd, "Y", 1, 0) != 1) {
			snprintf(why, len, "%s is N and cannot be set (%s)", ENABLE_URING,
				 strerror(writable ? errno : EACCES));
			close(fd);
			return -1;
		}
		td_notice("fuse: set %s to Y (FUSE over io_uring was off)", ENABLE_URING);
	}
	close(fd);
	ret = io_uring_queue_init_params(2, &ring, &params);
	if (ret < 0) {
		snprintf(why, len, "io_uring with 128-byte SQEs is not available: %s",
			 strerror(-ret));
		return -1;
	}
	io_uring_queue_exit(&ring);
	return 0;
}

static unsigned int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned int)n : 1;
}

/*
 * Transport auto or uring: make the rings, before mounting, for the limits
 * session_init() will set. Return: 0 (rings made, or classic with a log line
 * for auto), or -EOPNOTSUPP with a message in @err for an explicit uring.
 */
static int make_rings(struct td_fuse_session *s, char *err, size_t errlen)
{
	char why[256];
	size_t payload = TD_MAX((size_t)8192, (size_t)TD_FUSE_MAX_WRITE);

	if (s->transport == TD_TRANSPORT_CLASSIC)
		return 0;
	payload = TD_MAX(payload, (size_t)TD_LIBFUSE_MAX_PAGES * (size_t)getpagesize());
	if (uring_probe(why, sizeof(why)) == 0) {
		struct td_fuse_uring_params up = {
			.fuse_fd = -1,
			.nr_entries = s->ring_entries,
			.payload_bytes = payload,
			.process = td_session_ring_process,
			.failed = td_session_ring_failed,
			.arg = s,
			/*
			 * Handlers that return at once (drive workers) leave the copies
			 * to the drive's workers and the commits to the queue's thread.
			 * Blocking ones get two helpers per CPU, at least 4: more threads
			 * would only contend on the image's inode lock.
			 */
			.helpers = s->blocking_handlers
					   ? TD_MIN(s->max_threads, TD_MAX(4U, 2 * online_cpus()))
					   : 0,
			.blocking = s->blocking_handlers,
		};

		s->rings = td_fuse_uring_create(&up, why, sizeof(why));
		if (s->rings)
			return 0;
	}
	if (s->transport == TD_TRANSPORT_URING) {
		snprintf(err, errlen, "transport uring: %s", why);
		return -EOPNOTSUPP;
	}
	td_session_uring_fallback(s, why);
	return 0;
}

/* ---- the loop ------------------------------------------------------------------------ */

static void *loop_thread(void *arg);

/* Start one more thread. */
static void spawn_thread_locked(struct td_fuse_session *s)
{
	struct loop_thread *t = calloc(1, sizeof(*t));
	pthread_attr_t attr;

	assert(td_lock_held(&s->lock));
	if (!t)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	/* Counted idle before it exists: it may take a request before we return. */
	atomic_fetch_add(&s->idle, 1);
	if (pthread_create(&t->tid, &attr, loop_thread, s)) {
		atomic_fetch_sub(&s->idle, 1);
		td_warnx("fuse: cannot start another thread (%u running)", s->nr_threads);
		free(t);
	} else {
		td_list_add_tail(&t->link, &s->threads);
		s->nr_threads++;
		if (s->nr_threads > s->peak_threads)
			s->peak_threads = s->nr_threads;
	}
	pthread_attr_destroy(&attr);
}

static struct loop_thread *self_locked(struct td_fuse_session *s)
{
	struct td_list *pos;

	assert(td_lock_held(&s->lock));
	td_list_for_each(pos, &s->threads) {
		struct loop_thread *t = td_list_entry(pos, struct loop_thread, link);

		if (pthread_equal(t->tid, pthread_self()))
			return t;
	}
	return NULL;
}

/*
 * One request read into *@rb (@fbuf, @len bytes), in a loop thread (or the
 * thread adopting a connection): to libfuse, or answered here. A handler that
 * keeps the receive buffer leaves *@rb NULL.
 */
void td_session_handle_request(struct td_fuse_session *s, struct td_buf **rb,
			       struct fuse_buf *fbuf, size_t len)
{
	const struct fuse_in_header *in = (const void *)fbuf->mem;

	if (in->opcode == FUSE_INIT)
		td_session_init_seen(s, in, len);
	if (in->opcode == FUSE_INTERRUPT && atomic_load(&s->uring)) {
		/*
		 * It names the kernel's unique, which libfuse never saw for a
		 * ring request: unmatched, libfuse would keep it and answer
		 * EAGAIN later, making the kernel resend it. No handler looks
		 * at interruptions, and an interrupt needs no reply: drop it.
		 */
	} else if (in->opcode == FUSE_OPEN) {
		td_session_open_raw(s, in, len);
	} else {
		tl_rbuf = *rb;
		tl_stolen = false;
		fuse_session_process_buf(s->se, fbuf);
		tl_rbuf = NULL;
		if (tl_stolen)
			*rb = NULL;
	}
}

static void *loop_thread(void *arg)
{
	struct td_fuse_session *s = arg;
	struct td_buf *rb = NULL;
	bool counted = true; /* counted in s->idle (spawn_thread_locked counted us) */
	sigset_t set;

	td_thread_name("td-fuse");
	td_session_set_thread(s);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	while (!atomic_load(&s->stopping) && !fuse_session_exited(s->se)) {
		if (!rb)
			rb = td_session_recv_buf(s);
		if (!rb) {
			td_err("fuse: out of memory for a receive buffer");
			break;
		}
		struct fuse_buf fbuf = { .mem = rb->mem, .size = rb->cap };
		int res = fuse_session_receive_buf(s->se, &fbuf);

		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			if (res < 0)
				td_warnx("fuse: reading the device: %s", strerror(-res));
			break;
		}
		/* Busy now: make sure someone else is listening. */
		if (atomic_fetch_sub(&s->idle, 1) == 1) {
			td_mutex_lock(&s->lock);
			if (s->nr_threads < s->max_threads && !atomic_load(&s->stopping))
				spawn_thread_locked(s);
			td_mutex_unlock(&s->lock);
		}
		td_session_handle_request(s, &rb, &fbuf, (size_t)res);
		/*
		 * Idle again, unless MAX_IDLE threads already wait for work: then
		 * this one ends without ever counting as idle (counting it first would
		 * let threads on their way out make others leave too, down to none).
		 */
		unsigned int idle = atomic_load(&s->idle);

		do {
			if (idle >= MAX_IDLE) {
				counted = false;
				break;
			}
		} while (!atomic_compare_exchange_weak(&s->idle, &idle, idle + 1));
		if (!counted)
			break;
	}
	td_bufpool_put(s->pool, rb);

	td_mutex_lock(&s->lock);
	if (counted)
		atomic_fetch_sub(&s->idle, 1);
	struct loop_thread *self = self_locked(s);

	if (self)
		self->done = true;
	td_cond_broadcast(&s->exit_cond);
	td_mutex_unlock(&s->lock);
	return NULL;
}

static void sigusr1_handler(int sig)
{
	(void)sig; /* only here to interrupt read(2) */
}

int td_fuse_session_start(struct td_fuse_session *s)
{
	struct sigaction sa = { .sa_handler = sigusr1_handler };
	int ret = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART */

	if (s->adopted && !s->started) {
		ret = td_session_adopt(s);
		if (ret)
			return ret;
	}
	td_mutex_lock(&s->lock);
	if (!s->started) {
		spawn_thread_locked(s);
		s->started = s->nr_threads > 0;
		ret = s->started ? 0 : -EAGAIN;
	}
	td_mutex_unlock(&s->lock);
	return ret;
}

int td_fuse_session_wait_ready(struct td_fuse_session *s)
{
	int ret;

	td_mutex_lock(&s->lock);
	while (s->init_state == TD_INIT_WAITING) {
		/* The loop ended (an unmount, a read error) before INIT was answered. */
		if (!s->nr_threads || atomic_load(&s->stopping) || fuse_session_exited(s->se)) {
			s->init_state = TD_INIT_FAILED;
			s->init_err = -ENOTCONN;
			break;
		}
		td_cond_wait_until(&s->init_cond, &s->lock, td_now_ns() + 100 * TD_NSEC_PER_MSEC);
	}
	ret = s->init_state == TD_INIT_FAILED ? s->init_err : 0;
	td_mutex_unlock(&s->lock);
	return ret;
}

int td_fuse_session_run(struct td_fuse_session *s)
{
	struct td_fuse_uring *u;
	int ret = td_fuse_session_start(s);

	if (ret)
		return ret;
	td_mutex_lock(&s->lock);
	for (;;) {
		/* Reap finished threads; stop when none is left. */
		struct td_list *pos, *n;

		td_list_for_each_safe(pos, n, &s->threads) {
			struct loop_thread *t = td_list_entry(pos, struct loop_thread, link);

			if (!t->done)
				continue;
			td_list_del(&t->link);
			s->nr_threads--;
			td_mutex_unlock(&s->lock);
			pthread_join(t->tid, NULL);
			free(t);
			td_mutex_lock(&s->lock);
		}
		if (!s->nr_threads)
			break;
		bool stopping = atomic_load(&s->stopping) || fuse_session_exited(s->se);

		if (stopping) {
			/* Some may have been between the flag check and read(2): keep knocking. */
			td_list_for_each(pos, &s->threads) {
				struct loop_thread *t = td_list_entry(pos, struct loop_thread, link);

				if (!t->done)
					pthread_kill(t->tid, SIGUSR1);
			}
			td_cond_wait_until(&s->exit_cond, &s->lock,
					   td_now_ns() + 20 * TD_NSEC_PER_MSEC);
		} else {
			td_cond_wait(&s->exit_cond, &s->lock);
		}
	}
	td_mutex_unlock(&s->lock);
	u = atomic_load(&s->uring);
	if (u && td_fuse_uring_failed(u))
		return -EIO;
	return atomic_load(&s->stopping) ? 0 : 1;
}

void td_fuse_session_stop(struct td_fuse_session *s)
{
	struct td_fuse_uring *u = atomic_load(&s->uring);

	if (u)
		td_fuse_uring_hold(u);
	atomic_store(&s->stopping, true);
	td_mutex_lock(&s->lock);
	td_cond_broadcast(&s->exit_cond);
	td_mutex_unlock(&s->lock);
}

void td_fuse_session_unmount(struct td_fuse_session *s)
{
	if (s->mounted && !s->detached) {
		if (s->adopted)
			td_session_unmount_adopted(s);
		else
			fuse_session_unmount(s->se);
	}
	s->mounted = false;
}

void td_fuse_session_detach(struct td_fuse_session *s)
{
	s->detached = true;
}

uint64_t td_fuse_session_resent(struct td_fuse_session *s)
{
	return s->resent;
}

int td_fuse_session_fd(struct td_fuse_session *s)
{
	return s->fd;
}

void td_fuse_session_init_args(struct td_fuse_session *s, const void **in, size_t *in_len,
			       const void **out, size_t *out_len)
{
	*in = s->init_in;
	*in_len = s->init_in_len;
	*out = s->init_out;
	*out_len = s->init_out_len;
}

unsigned int td_fuse_session_threads(struct td_fuse_session *s, unsigned int *peak)
{
	td_mutex_lock(&s->lock);
	unsigned int n = s->nr_threads;

	if (peak)
		*peak = s->peak_threads;
	td_mutex_unlock(&s->lock);
	return n;
}

void td_fuse_session_transport_stats(struct td_fuse_session *s, struct td_fuse_transport_stats *st)
{
	struct td_fuse_uring *u = atomic_load(&s->uring);

	memset(st, 0, sizeof(*st));
	if (u && s->uring_refused)
		u = NULL;
	st->name = u ? "uring" : "classic";
	if (u) {
		st->nr_queues = td_fuse_uring_counts(u, st->queue_requests,
						     TD_ARRAY_SIZE(st->queue_requests));
		st->entries = td_fuse_uring_entries(u);
		st->helpers = td_fuse_uring_helpers(u);
		td_fuse_uring_trims(u, &st->trims, &st->trim_kept);
	}
}

bool td_fuse_recv_data_pinned(const void *data, size_t len)
{
	return td_fuse_uring_data_pinned(data, len);
}

void *td_fuse_reply_space(size_t len)
{
	return td_fuse_uring_reply_space(len);
}

/* ---- creation -------------------------------------------------------------------------- */

/*
 * Give libfuse a copy of the adopted connection @fd: "/dev/fd/N" as the mount
 * point makes it take N as its device and mount nothing (and unmount nothing:
 * td_session_unmount_adopted() does). Return: 0 or a negative errno.
 */
static int adopt_fd(struct td_fuse_session *s, int fd, char *err, size_t errlen)
{
	char path[32];
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);

	if (copy < 0) {
		snprintf(err, errlen, "takeover: %s", strerror(errno));
		return -errno;
	}
	snprintf(path, sizeof(path), "/dev/fd/%d", copy);
	if (fuse_session_mount(s->se, path)) {
		close(copy);
		snprintf(err, errlen, "takeover: libfuse refused the adopted connection");
		return -EIO;
	}
	return 0;
}

/* Return: 0, or -ENOMEM with @args partly built. */
static int build_args(struct fuse_args *args, const struct td_fuse_session_params *p)
{
	char *opt;
	int ret;

	if (asprintf(&opt, "-ofsname=%s,subtype=%s,default_permissions", p->fsname,
		     p->subtype) < 0)
		return -ENOMEM;
	ret = fuse_opt_add_arg(args, "tagdiskd") || fuse_opt_add_arg(args, opt) ||
	      (p->allow_other && fuse_opt_add_arg(args, "-oallow_other"));
	free(opt);
	if (ret)
		return -ENOMEM;
	for (size_t i = 0; i < p->nr_fuse_opts; i++) {
		if (fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, p->fuse_opts[i]))
			return -ENOMEM;
	}
	/* Last, so that no option before can lift them (libfuse's default, said here). */
	if (fuse_opt_add_arg(args, "-onosuid,nodev"))
		return -ENOMEM;
	return 0;
}

struct td_fuse_session *td_fuse_session_create(const struct td_fuse_session_params *p, int *errnum,
					       char *err, size_t errlen)
{
	struct td_fuse_session *s = calloc(1, sizeof(*s));
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	int ret;

	*errnum = -ENOMEM;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->ll = *p->ops->ll;
	s->ll.init = session_init;
	s->ops = p->ops;
	s->userdata = p->userdata;
	s->pool = p->pool;
	s->fd = -1;
	s->max_threads = TD_MAX(p->max_threads, 2U);
	s->max_background = TD_MAX(p->max_background, 12U);
	s->transport = p->transport;
	s->ring_entries = p->ring_entries;
	s->blocking_handlers = p->blocking_handlers;
	if (!s->ring_entries) {
		/*
		 * The async requests the kernel may send, spread over the queues; at
		 * most 64 (each entry is a 1 MiB payload, though only the pages a
		 * request touches are ever faulted in).
		 */
		unsigned int cpus = td_fuse_uring_nr_cpus();

		s->ring_entries = TD_MIN(TD_MAX((s->max_background + cpus - 1) / cpus, 2U),
					 RING_ENTRIES_MAX);
	}
	td_mutex_init(&s->lock);
	td_cond_init(&s->exit_cond);
	td_cond_init(&s->init_cond);
	td_list_init(&s->threads);
	s->mountpoint = strdup(p->mountpoint);
	if (!s->mountpoint || build_args(&args, p)) {
		snprintf(err, errlen, "out of memory");
		goto out_free_args;
	}
	if (p->adopt) {
		/* A ring's requests do not survive their daemon: adopted connections are classic. */
		s->transport = TD_TRANSPORT_CLASSIC;
		s->adopted = true;
		s->init_in_len = TD_MIN(p->adopt_init_in_len, sizeof(s->init_in));
		memcpy(s->init_in, p->adopt_init_in, s->init_in_len);
	}
	ret = make_rings(s, err, errlen);
	if (ret) {
		*errnum = ret;
		goto out_free_args;
	}
	s->se = fuse_session_new(&args, &s->ll, sizeof(s->ll), p->userdata);
	if (!s->se) {
		snprintf(err, errlen, "cannot create the FUSE session (bad -o option?)");
		*errnum = -EINVAL;
		goto out_free_rings;
	}
	if (s->adopted)
		ret = adopt_fd(s, p->adopt_fd, err, errlen);
	else if (fuse_session_mount(s->se, s->mountpoint)) {
		snprintf(err, errlen, "cannot mount on \"%s\"", s->mountpoint);
		ret = -EIO;
	}
	if (ret) {
		*errnum = ret;
		goto out_destroy_session;
	}
	s->mounted = true;
	s->fd = fuse_session_fd(s->se);
	/* Replies go through fuse_session_reply.c: INIT, and ring replies. */
	ret = td_session_hook_replies(s);
	if (ret) {
		snprintf(err, errlen, "cannot hook libfuse's replies: %s", strerror(-ret));
		*errnum = ret;
		goto out_unmount;
	}
	fuse_opt_free_args(&args);
	*errnum = 0;
	return s;

out_unmount:
	fuse_session_unmount(s->se);
out_destroy_session:
	fuse_session_destroy(s->se);
out_free_rings:
	if (s->rings)
		td_fuse_uring_destroy(s->rings);
out_free_args:
	fuse_opt_free_args(&args);
	td_cond_destroy(&s->init_cond);
	td_cond_destroy(&s->exit_cond);
	td_mutex_destroy(&s->lock);
	free(s->mountpoint);
	free(s);
	return NULL;
}

void td_fuse_session_destroy(struct td_fuse_session *s)
{
	struct td_fuse_uring *u = atomic_load(&s->uring);

	td_fuse_session_unmount(s);
	/* The rings' commands hold /dev/fuse open: close them first. */
	if (u) {
		atomic_store(&s->uring, NULL);
		td_fuse_uring_destroy(u);
	}
	if (s->rings)
		td_fuse_uring_destroy(s->rings);
	td_session_unhook(s);
	fuse_session_destroy(s->se);
	td_cond_destroy(&s->init_cond);
	td_cond_destroy(&s->exit_cond);
	td_mutex_destroy(&s->lock);
	free(s->mountpoint);
	free(s);
}
