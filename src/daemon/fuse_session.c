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
 * pool) while it reads. A handler that steals it (td_fuse_steal_recv_buf)
 * owns it from then on; the thread takes another from the pool for its next
 * read. A thread gives its buffer back when it ends.
 *
 * Stopping. td_fuse_session_stop() sets a flag and wakes run, which
 * interrupts threads blocked in read(2) with SIGUSR1 (installed without
 * SA_RESTART), repeating until every thread has noticed. An unmount makes
 * read(2) fail with ENODEV, which ends the loop the same way.
 *
 * FUSE over io_uring (transport auto or uring). Before mounting, the fuse
 * module must offer it (enable_uring Y, which we set when we may). libfuse
 * 3.14 knows nothing of it, so the session installs libfuse's custom I/O
 * hook (fuse_session_custom_io) on the mounted fd: every reply libfuse
 * writes goes through session_send(), which (1) adds FUSE_OVER_IO_URING to
 * the INIT reply when the kernel offered it, after setting up the rings
 * (fuse_uring.c) and before starting their threads, and (2) sends a reply
 * whose unique is a ring tag to its ring entry. Ring threads hand requests
 * to libfuse (fuse_session_process_buf) exactly as loop threads do, so the
 * ops cannot tell the transports apart. Stopping holds new ring requests;
 * destroying closes the rings before the device (their commands pin it).
 */
#define FUSE_USE_VERSION 312
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/list.h"
#include "common/lock.h"
#include "common/log.h"
#include "daemon/fuse_session.h"
#include "daemon/fuse_uring.h"
#include "daemon/fuse_uring_abi.h"

#define THREAD_STACK (512U << 10)
#define MAX_IDLE     10 /* idle loop threads kept; more of them exit */
/*
 * libfuse reads requests of up to its bufsize: 256 pages of payload plus a
 * page of headers (FUSE_MAX_MAX_PAGES and FUSE_BUFFER_HEADER_SIZE, private
 * to libfuse). Receive buffers must hold that much.
 */
#define LIBFUSE_MAX_PAGES   256
#define LIBFUSE_HEADER_SIZE 4096
#define MAX_WRITE	    (1U << 20)
#define ENABLE_URING	    "/sys/module/fuse/parameters/enable_uring"
#define RING_ENTRIES_MAX    64U
#define MAX_SESSIONS	    8 /* sessions whose fd the custom I/O hook can map back */

struct loop_thread {
	struct td_list link; /* s->threads, under s->lock */
	pthread_t tid;
	bool done;	     /* s->lock */
};

struct td_fuse_session {
	struct fuse_session *se;
	struct fuse_lowlevel_ops ll; /* the caller's, with init wrapped */
	const struct td_fuse_ops *ops;
	void *userdata;
	struct td_bufpool *pool;
	char *mountpoint;
	bool mounted;
	unsigned int max_threads;
	unsigned int max_background;

	struct td_mutex lock;
	struct td_cond exit_cond;	/* a thread is done, or stop was asked */
	struct td_list threads;		/* lock */
	unsigned int nr_threads;	/* lock */
	unsigned int peak_threads;	/* lock */
	_Atomic unsigned int idle;
	_Atomic bool stopping;

	/* FUSE over io_uring */
	enum td_fuse_transport transport; /* as asked for */
	bool uring_wanted;		   /* the module offers it: ask in INIT */
	unsigned int ring_entries;
	bool blocking_handlers;
	_Atomic bool init_pending;	   /* INIT seen, reply not yet written */
	uint64_t init_unique;		   /* written before init_pending */
	_Atomic(struct td_fuse_uring *) uring; /* set once the INIT reply asked for it */
};

/* The sessions the custom I/O hook serves, by fd (it gets the fd, not the session). */
static struct {
	_Atomic int fd;
	_Atomic(struct td_fuse_session *) s;
} sessions[MAX_SESSIONS];

/* The session this loop thread serves; the receive buffer it is handling, if a handler kept it. */
static _Thread_local struct td_fuse_session *tl_session;
static _Thread_local struct td_buf *tl_rbuf;
static _Thread_local bool tl_stolen;

size_t td_fuse_recv_size(void)
{
	return LIBFUSE_MAX_PAGES * (size_t)getpagesize() + LIBFUSE_HEADER_SIZE;
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

/* FUSE_INIT: the limits that follow from our buffers, then the file system's own wishes. */
static void session_init(void *userdata, struct fuse_conn_info *conn)
{
	struct td_fuse_session *s = tl_session;

	conn->max_write = MAX_WRITE;
	conn->max_background = s->max_background;
	conn->congestion_threshold = TD_MAX(s->max_background * 3 / 4, 1U);
	/* Buffers must be memory we own: no splicing. */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (s->ops->ll->init)
		s->ops->ll->init(userdata, conn);
	td_info("fuse: max_write %u, max_background %u, congestion_threshold %u", conn->max_write,
		conn->max_background, conn->congestion_threshold);
}

/* ---- FUSE over io_uring: the reply path and INIT ---------------------------------------- */

/* Log, once per session, why the ring is not used. */
static void uring_fallback(struct td_fuse_session *s, const char *why)
{
	if (s->transport == TD_TRANSPORT_URING)
		td_err("fuse: transport uring asked for but not available: %s; serving through "
		       "/dev/fuse",
		       why);
	else
		td_notice("fuse: transport classic: %s", why);
}

/* Return: 0 when the module offers FUSE over io_uring (setting enable_uring if we may), else -1. */
static int uring_probe(char *why, size_t len)
{
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

static struct td_fuse_session *session_of_fd(int fd)
{
	for (unsigned int i = 0; i < MAX_SESSIONS; i++)
		if (atomic_load(&sessions[i].s) && atomic_load(&sessions[i].fd) == fd)
			return atomic_load(&sessions[i].s);
	return NULL;
}

static void ring_process(void *arg, void *buf, size_t len);

static unsigned int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned int)n : 1;
}

/*
 * The INIT reply, when the kernel offered the ring: set the rings up for the
 * sizes the reply gives, ask for io_uring in it, and once it is written start
 * the ring threads. Anything failing before the write leaves the reply as
 * libfuse made it (classic).
 */
static ssize_t init_reply(struct td_fuse_session *s, int fd, struct iovec *iov, int count)
{
	struct fuse_init_out out;
	size_t n = iov[1].iov_len;
	char err[256];
	long page = getpagesize();

	if (count != 2 || n < offsetof(struct fuse_init_out, flags2) + sizeof(out.flags2) ||
	    n > sizeof(out)) {
		uring_fallback(s, "the INIT reply has no room for the io_uring flag");
		return writev(fd, iov, count);
	}
	memset(&out, 0, sizeof(out));
	memcpy(&out, iov[1].iov_base, n);

	size_t payload = TD_MAX((size_t)8192, (size_t)out.max_write);

	payload = TD_MAX(payload, (size_t)out.max_pages * (size_t)page);
	struct td_fuse_uring_params up = {
		.fuse_fd = fd,
		.nr_entries = s->ring_entries,
		.payload_bytes = payload,
		.process = ring_process,
		.arg = s,
		/*
		 * Handlers that return at once (drive workers) leave the copies to the
		 * drive's workers and the commits to the queue's thread: measured,
		 * helpers committing there made 1 MiB reads slower (0.59x).
		 * Blocking ones get two helpers per CPU: measured on 2 CPUs, 128
		 * allowed made 1 MiB writes 0.88x classic and 4 made them 1.12x
		 * (more threads only spin on the image's inode lock).
		 */
		.helpers = s->blocking_handlers
				   ? TD_MIN(s->max_threads, TD_MAX(4U, 2 * online_cpus()))
				   : 0,
		.blocking = s->blocking_handlers,
	};
	struct td_fuse_uring *u = td_fuse_uring_create(&up, err, sizeof(err));

	if (!u) {
		uring_fallback(s, err);
		return writev(fd, iov, count);
	}
	out.flags |= FUSE_INIT_EXT;
	out.flags2 |= (uint32_t)(TD_FUSE_OVER_IO_URING >> 32);
	struct iovec v[2] = { iov[0], { &out, n } };
	ssize_t ret = writev(fd, v, 2);

	if (ret < 0) {
		int e = errno;

		td_fuse_uring_destroy(u);
		errno = e;
		return ret;
	}
	/* Published before any ring thread runs: their replies look it up. */
	atomic_store(&s->uring, u);
	if (td_fuse_uring_start(u))
		td_err("fuse: a ring queue has no thread: requests on its CPU wait until unmount");
	td_notice("fuse: transport uring: %u queues x %u entries, %zu KiB payload each",
		  td_fuse_uring_nr_cpus(), td_fuse_uring_entries(u), payload >> 10);
	return ret;
}

/* Write a reply: to its ring entry, or to /dev/fuse. Return: as writev(2). */
static ssize_t session_send(struct td_fuse_session *s, int fd, struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;

	if (s && count >= 1 && iov[0].iov_len >= sizeof(*oh)) {
		struct td_fuse_uring *u = atomic_load(&s->uring);

		if (u && td_fuse_uring_owns(oh->unique))
			return td_fuse_uring_reply(u, iov, count);
		if (atomic_load(&s->init_pending) && oh->unique == s->init_unique) {
			atomic_store(&s->init_pending, false);
			if (!oh->error)
				return init_reply(s, fd, iov, count);
		}
	}
	return writev(fd, iov, count);
}

/* libfuse's custom I/O hooks (fuse_session_custom_io). */
static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	return session_send(session_of_fd(fd), fd, iov, count);
}

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

/* In a loop thread, before libfuse sees it: does the kernel offer the ring? */
static void init_seen(struct td_fuse_session *s, const struct fuse_in_header *in, size_t len)
{
	const struct fuse_init_in *arg = (const void *)(in + 1);
	uint64_t flags;

	if (len < sizeof(*in) + offsetof(struct fuse_init_in, flags2) + sizeof(arg->flags2)) {
		uring_fallback(s, "the kernel's INIT is too old for io_uring");
		return;
	}
	flags = arg->flags;
	if (flags & FUSE_INIT_EXT)
		flags |= (uint64_t)arg->flags2 << 32;
	if (!(flags & TD_FUSE_OVER_IO_URING)) {
		uring_fallback(s, "the kernel did not offer FUSE_OVER_IO_URING in INIT");
		return;
	}
	s->init_unique = in->unique;
	atomic_store(&s->init_pending, true);
}


/* Write a raw reply to the kernel. Return: 0 or a negative errno. */
static int send_raw(struct td_fuse_session *s, uint64_t unique, int error, const void *arg,
		    size_t arg_len)
{
	struct fuse_out_header out = {
		.len = (uint32_t)(sizeof(out) + (error ? 0 : arg_len)),
		.error = -error,
		.unique = unique,
	};
	struct iovec iov[2] = { { &out, sizeof(out) }, { (void *)arg, arg_len } };
	ssize_t n = session_send(s, fuse_session_fd(s->se), iov, error ? 1 : 2);

	return n < 0 ? -errno : 0;
}

/* Answer FUSE_OPEN ourselves, with the open flags ops->open chose. */
static void open_raw(struct td_fuse_session *s, const struct fuse_in_header *in, size_t len)
{
	const struct fuse_open_in *arg = (const void *)(in + 1);
	struct fuse_open_out out = { 0 };
	int error;

	if (len < sizeof(*in) + sizeof(*arg))
		error = EIO;
	else
		error = s->ops->open(s->userdata, in->nodeid, arg->flags, &out.open_flags);
	if (send_raw(s, in->unique, error, &out, sizeof(out)) && !error && s->ops->open_unsent)
		s->ops->open_unsent(s->userdata, in->nodeid);
}

/* A request that arrived on a ring, in its queue's thread: as a loop thread would. */
static void ring_process(void *arg, void *buf, size_t len)
{
	struct td_fuse_session *s = arg;
	const struct fuse_in_header *in = buf;

	if (in->opcode == FUSE_OPEN) {
		open_raw(s, in, len);
	} else {
		struct fuse_buf fbuf = { .mem = buf, .size = len };

		fuse_session_process_buf(s->se, &fbuf);
	}
}

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

static void *loop_thread(void *arg)
{
	struct td_fuse_session *s = arg;
	size_t recv_size = td_fuse_recv_size();
	struct td_buf *rb = NULL;
	bool counted = true; /* counted in s->idle (spawn_thread_locked counted us) */
	sigset_t set;

	td_thread_name("td-fuse");
	tl_session = s;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	while (!atomic_load(&s->stopping) && !fuse_session_exited(s->se)) {
		if (!rb)
			rb = td_bufpool_get(s->pool, recv_size);
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
		const struct fuse_in_header *in = (const void *)fbuf.mem;

		if (in->opcode == FUSE_INIT && s->uring_wanted)
			init_seen(s, in, (size_t)res);
		if (in->opcode == FUSE_INTERRUPT && atomic_load(&s->uring)) {
			/*
			 * It names the kernel's unique, which libfuse never saw for a
			 * ring request: unmatched, libfuse would keep it and answer
			 * EAGAIN later, making the kernel resend it. No handler looks
			 * at interruptions, and an interrupt needs no reply: drop it.
			 */
		} else if (in->opcode == FUSE_OPEN) {
			open_raw(s, in, (size_t)res);
		} else {
			tl_rbuf = rb;
			tl_stolen = false;
			fuse_session_process_buf(s->se, &fbuf);
			tl_rbuf = NULL;
			if (tl_stolen)
				rb = NULL;
		}
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

int td_fuse_session_run(struct td_fuse_session *s)
{
	struct sigaction sa = { .sa_handler = sigusr1_handler };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART */

	td_mutex_lock(&s->lock);
	spawn_thread_locked(s);
	if (!s->nr_threads) {
		td_mutex_unlock(&s->lock);
		return -EAGAIN;
	}
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
	if (s->mounted) {
		fuse_session_unmount(s->se);
		s->mounted = false;
	}
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
	st->name = u ? "uring" : "classic";
	if (u) {
		st->nr_queues = td_fuse_uring_counts(u, st->queue_requests,
						     TD_ARRAY_SIZE(st->queue_requests));
		st->entries = td_fuse_uring_entries(u);
		st->helpers = td_fuse_uring_helpers(u);
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

struct td_fuse_session *td_fuse_session_create(const struct td_fuse_session_params *p, char *err,
					       size_t errlen)
{
	struct td_fuse_session *s = calloc(1, sizeof(*s));
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->ll = *p->ops->ll;
	s->ll.init = session_init;
	s->ops = p->ops;
	s->userdata = p->userdata;
	s->pool = p->pool;
	s->max_threads = TD_MAX(p->max_threads, 2U);
	s->max_background = TD_MAX(p->max_background, 12U);
	s->mountpoint = strdup(p->mountpoint);
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
	if (s->transport != TD_TRANSPORT_CLASSIC) {
		char why[256];

		if (uring_probe(why, sizeof(why)) == 0) {
			s->uring_wanted = true;
		} else if (s->transport == TD_TRANSPORT_URING) {
			snprintf(err, errlen, "transport uring: %s", why);
			free(s->mountpoint);
			free(s);
			return NULL;
		} else {
			uring_fallback(s, why);
		}
	}
	td_mutex_init(&s->lock);
	td_cond_init(&s->exit_cond);
	td_list_init(&s->threads);
	if (!s->mountpoint || build_args(&args, p)) {
		snprintf(err, errlen, "out of memory");
		goto out_free_args;
	}
	s->se = fuse_session_new(&args, &s->ll, sizeof(s->ll), p->userdata);
	if (!s->se) {
		snprintf(err, errlen, "cannot create the FUSE session (bad -o option?)");
		goto out_free_args;
	}
	if (fuse_session_mount(s->se, s->mountpoint)) {
		snprintf(err, errlen, "cannot mount on \"%s\"", s->mountpoint);
		goto out_destroy_session;
	}
	s->mounted = true;
	if (s->uring_wanted) {
		/* Replies go through session_send(): the INIT flag, and ring replies. */
		const struct fuse_custom_io io = { .writev = hook_writev, .read = hook_read };
		unsigned int i;
		int fd = fuse_session_fd(s->se);

		for (i = 0; i < MAX_SESSIONS; i++) {
			struct td_fuse_session *none = NULL;

			atomic_store(&sessions[i].fd, fd);
			if (atomic_compare_exchange_strong(&sessions[i].s, &none, s))
				break;
		}
		if (i == MAX_SESSIONS || fuse_session_custom_io(s->se, &io, fd)) {
			if (i < MAX_SESSIONS)
				atomic_store(&sessions[i].s, NULL);
			s->uring_wanted = false;
			uring_fallback(s, "cannot hook libfuse's replies");
		}
	}
	fuse_opt_free_args(&args);
	return s;

out_destroy_session:
	fuse_session_destroy(s->se);
out_free_args:
	fuse_opt_free_args(&args);
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
	for (unsigned int i = 0; i < MAX_SESSIONS; i++)
		if (atomic_load(&sessions[i].s) == s)
			atomic_store(&sessions[i].s, NULL);
	fuse_session_destroy(s->se);
	td_cond_destroy(&s->exit_cond);
	td_mutex_destroy(&s->lock);
	free(s->mountpoint);
	free(s);
}
