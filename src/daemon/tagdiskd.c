// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdiskd.c - main(): parse, build the pipeline, serve, unwind.
 *
 *   store (image file, RBD image or NBD export) -> drive -> queue -> front end (FUSE)
 *   and the admin socket
 *
 * Exit status (docs/tagdiskd.8, EXIT STATUS):
 *   0  a clean stop: SIGTERM, SIGINT, or the file system unmounted from outside;
 *   1  a failure at run time (without -f: the daemon could not start serving);
 *   2  a bad command line or configuration, a pid file a running daemon holds,
 *      or, with -f, an image locked by another process (an RBD image another
 *      client holds), a network image missing or of another size than
 *      [disk] size, or an admin socket path that is taken;
 *   3  stopped, but data may be lost: requests were failed with EIO at the
 *      shutdown_timeout_ms bound or abandoned by a second SIGTERM/SIGINT, the
 *      final flush failed, or a volatile write cache still held data.
 *
 * Signals are blocked in every thread and taken by one thread with
 * sigwait(): SIGTERM and SIGINT stop the front end, SIGHUP reloads
 * (reload.h). Shutdown: stop receiving FUSE requests, drain the queue and
 * flush the drive, both within [drive] shutdown_timeout_ms counted from the
 * stop (what is left then fails with EIO), unmount, free everything. A
 * second SIGTERM or SIGINT while draining or flushing gives up at once: the
 * signal thread unmounts, removes the socket and the pid file, and exits 3.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/lock.h"
#include "common/log.h"
#include "daemon/admin.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/frontend.h"
#include "daemon/reload.h"
#include "tagdisk/bio.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/trace.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

#define EXIT_USAGE     2
#define EXIT_DATA_LOST 3

/*
 * Where a stop stands. STOP_DRAINING covers the front end's last requests,
 * the drain and the final flush: a second SIGTERM/SIGINT abandons them.
 * From STOP_CLOSING on (unmount, free) it only logs.
 */
enum stop_phase {
	STOP_NONE,
	STOP_DRAINING,
	STOP_CLOSING,
	STOP_DONE, /* main() is past the signal thread: it ends at its next wake-up */
};

struct daemon {
	struct td_cmdline cl;
	struct td_config cfg; /* guarded by cfg_lock once threads run */
	pthread_mutex_t cfg_lock;
	char *start_dir;      /* the current directory at start (relative paths of reloads) */
	char *pid_file;	      /* --pid-file, absolute, or NULL */
	struct td_pidfile pidfile;
	struct td_reload reload;
	struct td_store store;
	struct td_drive *drive;
	struct td_queue *q;
	struct td_trace *trace;
	struct td_frontend *fe;
	struct td_admin *admin;
	pthread_t sig_thread;

	/* Guards the fields below. Held with no other lock, except by abandon(). */
	pthread_mutex_t stop_lock;
	enum stop_phase phase;
	uint64_t stop_start_ns;	   /* when the stop began (the shutdown_timeout_ms clock) */
	unsigned int stop_signals; /* SIGTERM/SIGINT received */
};

/* ---- signals --------------------------------------------------------------------------- */

/*
 * A second SIGTERM/SIGINT while draining or flushing: give up on the I/O
 * still outstanding and leave at once, with the mount, the socket and the
 * pid file cleaned up. Called by the signal thread with stop_lock held, so
 * main() cannot be unmounting or freeing meanwhile.
 */
static void __attribute__((noreturn)) abandon(struct daemon *d, int sig)
{
	struct td_queue_status qs;

	td_queue_get_status(d->q, &qs);
	td_err("signal: second %s: stopping now without draining (in flight %u, queued %u); "
	       "data may be lost",
	       sig == SIGINT ? "SIGINT" : "SIGTERM", qs.in_flight, qs.queued);
	td_notify("STOPPING=1\nSTATUS=stopping now, without draining");
	td_frontend_unmount(d->fe);
	/* The admin thread may be blocked in a command: remove its socket, leave it be. */
	unlink(d->cfg.socket);
	td_pidfile_remove(&d->pidfile);
	td_notice("stopped: abandoned, unmounted; exit status %d: data may be lost",
		  EXIT_DATA_LOST);
	td_daemonize_end();
	_exit(EXIT_DATA_LOST);
}

/* Start a stop now, unless one has started. Return: true when this call started it. */
static bool begin_stop(struct daemon *d)
{
	bool first;

	pthread_mutex_lock(&d->stop_lock);
	first = d->phase == STOP_NONE;
	if (first) {
		d->phase = STOP_DRAINING;
		d->stop_start_ns = td_now_ns();
	}
	pthread_mutex_unlock(&d->stop_lock);
	return first;
}

static void *signal_main(void *arg)
{
	struct daemon *d = arg;
	sigset_t set;
	int sig;

	td_thread_name("td-signal");
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR2);
	for (;;) {
		if (sigwait(&set, &sig))
			continue;
		pthread_mutex_lock(&d->stop_lock);
		enum stop_phase phase = d->phase;

		if (phase == STOP_DONE) {
			pthread_mutex_unlock(&d->stop_lock);
			return NULL;
		}
		if (sig == SIGUSR2) { /* main()'s wake-up, or someone else's: nothing to do */
			pthread_mutex_unlock(&d->stop_lock);
			continue;
		}
		if (sig == SIGHUP) {
			pthread_mutex_unlock(&d->stop_lock);
			if (phase != STOP_NONE) {
				td_notice("signal: SIGHUP ignored: stopping");
				continue;
			}
			td_notice("signal: SIGHUP, reloading %s",
				  d->cl.config_file ? d->cl.config_file : "(no config file)");
			td_reload_run(&d->reload);
			continue;
		}
		const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";

		d->stop_signals++;
		if (phase == STOP_NONE) {
			d->phase = STOP_DRAINING;
			d->stop_start_ns = td_now_ns();
			pthread_mutex_unlock(&d->stop_lock);
			td_notice("signal: %s, stopping", name);
			td_frontend_stop(d->fe);
			continue;
		}
		/*
		 * A stop a signal began: the second signal abandons it. One that an
		 * unmount from outside began: the first signal only says so.
		 */
		if (phase == STOP_DRAINING && d->stop_signals >= 2)
			abandon(d, sig);
		pthread_mutex_unlock(&d->stop_lock);
		if (phase == STOP_DRAINING)
			td_notice("signal: %s: already stopping; another one stops at once, "
				  "without draining",
				  name);
		else
			td_notice("signal: %s: already unmounting", name);
	}
}

/* ---- building and tearing down --------------------------------------------------------- */

static int build_engine(struct daemon *d, char *err, size_t errlen)
{
	struct td_config *c = &d->cfg;
	struct td_drive_params dp;
	struct td_queue_params qp;
	int ret;

	td_drive_params_default(&dp);
	dp.backend = td_store_take_backend(&d->store);
	dp.logical_block_size = c->logical_block_size;
	dp.capacity_bytes = d->store.size;
	dp.workers = c->workers;
	dp.model = c->model;
	dp.hdd = c->hdd;
	dp.ssd = c->ssd;
	dp.write_cache = c->write_cache;
	dp.cache_size = c->cache_size;
	dp.seed = c->seed;
	d->drive = td_drive_create(&dp, &ret);
	if (!d->drive) {
		if (dp.backend.ops->destroy)
			dp.backend.ops->destroy(dp.backend.priv);
		snprintf(err, errlen, "cannot start the drive: %s", strerror(-ret));
		return ret;
	}

	d->trace = td_trace_create();
	if (!d->trace) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	td_queue_params_default(&qp);
	qp.mode = c->mode;
	qp.capacity_sectors = d->store.size >> TD_SECTOR_SHIFT;
	qp.logical_block_size = c->logical_block_size;
	qp.max_sectors = c->max_sectors;
	qp.nr_requests = c->nr_requests;
	qp.elevator = c->elevator;
	qp.nr_hw_queues = c->nr_hw_queues;
	qp.tunables = c->tunables;
	qp.depth = c->depth;
	qp.command_timeout_ms = c->command_timeout_ms;
	qp.max_retries = c->max_retries;
	qp.drive = d->drive;
	qp.trace = d->trace;
	d->q = td_queue_create(&qp, &ret);
	if (!d->q) {
		snprintf(err, errlen, "cannot create the queue: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

static int build_frontend(struct daemon *d, char *err, size_t errlen)
{
	struct td_config *c = &d->cfg;
	struct td_frontend_params fp = {
		.q = d->q,
		.mountpoint = c->mountpoint,
		.name = c->name,
		.size_bytes = d->store.size,
		.logical_block_size = c->logical_block_size,
		.read_only = c->read_only,
		.allow_other = c->allow_other,
		.parallel_direct_writes = true,
		.image_fd = d->store.img.fd, /* -1 with a network backend */
		.transport = c->transport,
	};
	size_t n = 0;
	const char **opts = calloc(c->nr_fuse_opts + 1, sizeof(*opts));

	if (!opts) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Our own -o option: compare with the kernel's default of serialised direct writers. */
	for (size_t i = 0; i < c->nr_fuse_opts; i++) {
		if (strcmp(c->fuse_opts[i], "no_parallel_direct_writes") == 0)
			fp.parallel_direct_writes = false;
		else
			opts[n++] = c->fuse_opts[i];
	}
	fp.fuse_opts = opts;
	fp.nr_fuse_opts = n;
	if (c->mode != TD_MODE_BIO && (c->workers || c->model != TD_MODEL_NONE)) {
		/* Handlers return at once; threads only wait for back-pressure or RMW. */
		fp.max_threads = 16;
		fp.max_background = TD_MAX(c->nr_requests, c->depth);
	} else {
		/* Each I/O in flight holds a thread (bio mode, or an inline drive). */
		fp.max_threads = TD_MAX(c->nr_requests, 16U);
		fp.max_background = c->nr_requests;
	}
	d->fe = td_frontend_create(&fp, err, errlen);
	free(opts);
	return d->fe ? 0 : -EIO;
}

/* A mutex and a condition variable rather than a semaphore: ThreadSanitizer sees them. */
struct flush_wait {
	struct td_mutex lock;
	struct td_cond cond;
	bool done; /* lock */
	int err;   /* lock */
};

static void flush_end(struct td_byte_io *io, int err)
{
	struct flush_wait *w = io->private;

	td_mutex_lock(&w->lock);
	w->err = err;
	w->done = true;
	td_cond_signal(&w->cond);
	td_mutex_unlock(&w->lock);
}

/* Return: true once the flush has ended, false when @deadline_ns (0: none) passed first. */
static bool flush_wait_until(struct flush_wait *w, uint64_t deadline_ns)
{
	bool done;

	td_mutex_lock(&w->lock);
	while (!w->done) {
		if (!deadline_ns)
			td_cond_wait(&w->cond, &w->lock);
		else if (!td_cond_wait_until(&w->cond, &w->lock, deadline_ns))
			break;
	}
	done = w->done;
	td_mutex_unlock(&w->lock);
	return done;
}

/*
 * Wait for the queue to empty, until @deadline_ns (CLOCK_MONOTONIC; 0: no
 * bound). At the bound what is left fails with EIO and the queue is dead:
 * whatever is submitted later fails at once (tagdisk/queue.h).
 * Return: the number of requests failed, or a negative errno.
 */
static int drain_until(struct td_queue *q, uint64_t deadline_ns)
{
	uint64_t now = td_now_ns();
	uint64_t ms;

	if (!deadline_ns) {
		td_queue_drain(q);
		return 0;
	}
	ms = deadline_ns > now ? (deadline_ns - now + TD_NSEC_PER_MSEC - 1) / TD_NSEC_PER_MSEC : 1;
	return td_queue_drain_timeout(q, (uint32_t)TD_MIN(ms, (uint64_t)UINT32_MAX));
}

/*
 * Make everything written so far durable, by @deadline_ns (0: no bound); a
 * flush still outstanding then fails with EIO, with whatever else is left,
 * and *@failed counts them. Return: 0 or a negative errno.
 */
static int flush_disk(struct td_queue *q, uint64_t deadline_ns, int *failed)
{
	struct flush_wait w = { .err = 0 };
	struct td_byte_io io = { .op = TD_OP_FLUSH, .end = flush_end, .private = &w };
	int ret;

	td_mutex_init(&w.lock);
	td_cond_init(&w.cond);
	ret = td_byte_io_submit(q, &io);
	if (!ret) {
		if (deadline_ns && !flush_wait_until(&w, deadline_ns)) {
			int n = drain_until(q, 1);

			if (n > 0)
				*failed += n;
		}
		flush_wait_until(&w, 0);
		td_mutex_lock(&w.lock);
		ret = w.err;
		td_mutex_unlock(&w.lock);
		/* The queue counts the flush ended only after flush_end() returns. */
		td_queue_drain(q);
	}
	td_cond_destroy(&w.cond);
	td_mutex_destroy(&w.lock);
	return ret;
}

/*
 * Free everything. With @leave_engine (a backend call abandoned at the
 * shutdown bound is still running: destroying the queue and the drive would
 * wait for it) they and the image are left to the exit.
 * Return: the bytes a volatile write cache still held and lost.
 */
static uint64_t teardown(struct daemon *d, bool remove_created_image, bool leave_engine)
{
	uint64_t lost = 0;

	if (d->admin)
		td_admin_destroy(d->admin);
	if (d->fe)
		td_frontend_destroy(d->fe);
	if (d->q && !leave_engine)
		td_queue_destroy(d->q);
	if (d->trace && !leave_engine)
		td_trace_destroy(d->trace);
	if (d->drive && !leave_engine)
		lost = td_drive_destroy(d->drive);
	/* An abandoned backend call may still use the image's descriptor: leave it to the exit. */
	if (!leave_engine)
		td_store_close(&d->store, remove_created_image);
	td_pidfile_remove(&d->pidfile);
	td_config_free(&d->cfg);
	td_cmdline_free(&d->cl);
	free(d->pid_file);
	free(d->start_dir);
	pthread_mutex_destroy(&d->cfg_lock);
	pthread_mutex_destroy(&d->stop_lock);
	return lost;
}

/*
 * Keys of a backend's section that the configured backend does not use are
 * accepted (one file may keep every backend's settings): say so once.
 */
static void log_unused_keys(const struct td_config *c)
{
	const struct td_config_key *unused[TD_CONFIG_NR_KEYS];
	size_t n = TD_MIN(td_config_unused_keys(c, unused, TD_CONFIG_NR_KEYS),
			  (size_t)TD_CONFIG_NR_KEYS);
	char list[512] = "";
	size_t len = 0;

	for (size_t i = 0; i < n && len < sizeof(list); i++) {
		int w = snprintf(list + len, sizeof(list) - len, "%s[%s] %s", i ? ", " : "",
				 unused[i]->section, unused[i]->key);

		len = w < 0 ? sizeof(list) : TD_MIN(len + (size_t)w, sizeof(list));
	}
	if (n)
		td_notice("config: %s not used with [drive] backend = %s", list,
			  td_config_backend_name(c->backend));
}

/*
 * The exit status for td_store_open()'s @err: held by another daemon
 * (-EBUSY), or not what the configuration says (-EINVAL: its size; -ENOENT
 * with rbd: no such image or pool) is a conflict or a configuration error,
 * like a locked image file; anything else (a server or cluster out of
 * reach) a failure at run time.
 */
static int store_error_status(const struct td_config *c, int err)
{
	if (err == -EBUSY || err == -EINVAL)
		return EXIT_USAGE;
	if (err == -ENOENT && c->backend == TD_CONFIG_BACKEND_RBD)
		return EXIT_USAGE;
	return 1;
}

/* Start failed (the reason is logged): clean up, and tell a waiting parent. */
static int fail_start(struct daemon *d, int status)
{
	teardown(d, true, false);
	td_daemonize_failed();
	return status;
}

/* Guard against the loop-on-FUSE deadlock: our allocations must never wait for our own I/O. */
static void protect_memory(void)
{
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0)
		td_warn("PR_SET_IO_FLUSHER (a loop device on this disk may deadlock under "
			"memory pressure)");
	/*
	 * glibc gives each busy thread an arena of 64 MiB of address space (up to
	 * 8 per CPU); under MCL_FUTURE every one of them counts as locked. Two
	 * arenas are plenty: the hot path allocates from the buffer pool.
	 */
	mallopt(M_ARENA_MAX, 2);
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0)
		td_warn("mlockall (daemon memory may be swapped out)");
}

/*
 * The stop, once the front end has returned: drain and flush within
 * shutdown_timeout_ms of the stop's start, unmount, free.
 * Return: the exit status.
 */
static int stop(struct daemon *d, int run_ret)
{
	uint32_t timeout_ms;
	uint64_t deadline = 0;
	int failed, flush_err = 0, flush_failed = 0;
	bool leave_engine = false;
	const char *flushed = "flushed";
	uint64_t lost;

	pthread_mutex_lock(&d->cfg_lock);
	timeout_ms = d->cfg.shutdown_timeout_ms;
	pthread_mutex_unlock(&d->cfg_lock);
	pthread_mutex_lock(&d->stop_lock);
	if (timeout_ms)
		deadline = d->stop_start_ns + timeout_ms * TD_NSEC_PER_MSEC;
	pthread_mutex_unlock(&d->stop_lock);

	failed = drain_until(d->q, deadline);
	if (failed < 0)
		td_err("stop: the queue did not drain within shutdown_timeout_ms (%u ms): %s",
		       timeout_ms, strerror(-failed));
	else if (failed)
		td_err("stop: the queue did not drain within shutdown_timeout_ms (%u ms): "
		       "%d request%s failed with EIO",
		       timeout_ms, failed, failed == 1 ? "" : "s");
	if (d->cfg.read_only) {
		flushed = "nothing to flush (read-only)";
	} else if (failed) {
		/*
		 * The queue is dead: a flush through it would fail at once. Completed
		 * writes are in the image (a volatile cache's excepted, which the
		 * drive reports lost below): sync it directly, the file or the
		 * network backend, which takes calls from any thread.
		 */
		flushed = "image synced";
		if (d->store.img.fd >= 0) {
			if (fdatasync(d->store.img.fd) < 0) {
				flush_err = -errno;
				td_err_errno("stop: syncing the image");
			}
		} else if (d->store.ref.ops) {
			flush_err = td_backend_flush(&d->store.ref);
			if (flush_err)
				td_err("stop: flushing %s: %s", d->store.target,
				       strerror(-flush_err));
		}
	} else {
		flush_err = flush_disk(d->q, deadline, &flush_failed);
		if (flush_failed)
			td_err("stop: the final flush did not complete within shutdown_timeout_ms "
			       "(%u ms): failed with EIO",
			       timeout_ms);
		else if (flush_err)
			td_err("stop: the final flush failed: %s", strerror(-flush_err));
	}
	if (flush_err)
		flushed = "flush failed";
	if (failed || flush_failed) {
		struct td_drive_status ds;

		td_drive_get_status(d->drive, &ds);
		/*
		 * Stale asynchronous operations (rbd, nbd) and synchronous calls (a
		 * hung image file) were started and cannot be taken back.
		 */
		leave_engine = ds.executing > 0 || ds.stale_ops > 0 || ds.stale_calls > 0;
		if (leave_engine)
			td_warnx("stop: %u backend call(s) still running; not waiting for them",
				 ds.executing + ds.stale_ops + ds.stale_calls);
	}

	pthread_mutex_lock(&d->stop_lock);
	d->phase = STOP_CLOSING;
	pthread_mutex_unlock(&d->stop_lock);

	if (td_frontend_open_count(d->fe))
		td_warnx("fuse: the disk is still open %u time(s) (a loop device?); unmounting "
			 "lazily",
			 td_frontend_open_count(d->fe));
	td_frontend_unmount(d->fe);

	/* The signal thread ends at its next wake-up. */
	pthread_mutex_lock(&d->stop_lock);
	d->phase = STOP_DONE;
	pthread_mutex_unlock(&d->stop_lock);
	pthread_kill(d->sig_thread, SIGUSR2);
	pthread_join(d->sig_thread, NULL);

	lost = teardown(d, false, leave_engine);

	char failed_text[64] = "";
	char lost_text[96] = "";
	bool data_lost = failed || flush_err || lost;

	if (failed > 0)
		snprintf(failed_text, sizeof(failed_text), " by failing %d request%s", failed,
			 failed == 1 ? "" : "s");
	else if (failed < 0)
		snprintf(failed_text, sizeof(failed_text), " by giving up");
	if (lost)
		snprintf(lost_text, sizeof(lost_text), ", the volatile write cache lost %llu bytes",
			 (unsigned long long)lost);
	if (data_lost) {
		td_notice("stopped: queue drained%s, %s, unmounted%s; exit status %d: data may be "
			  "lost",
			  failed_text, flushed, lost_text, EXIT_DATA_LOST);
		return EXIT_DATA_LOST;
	}
	td_notice("stopped: queue drained, %s, unmounted", flushed);
	return run_ret < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct daemon d = { .store = { .img = { .fd = -1 } }, .pidfile = { .fd = -1 } };
	char err[1024];
	sigset_t set;
	int ret;

	td_log_init("tagdiskd", TD_LOG_INFO);
	pthread_mutex_init(&d.cfg_lock, NULL);
	pthread_mutex_init(&d.stop_lock, NULL);
	/* Relative paths are resolved against it, now and on every reload, wherever we are then. */
	d.start_dir = getcwd(NULL, 0);
	if (!d.start_dir) {
		fprintf(stderr, "tagdiskd: the current directory: %s\n", strerror(errno));
		return 1;
	}
	ret = td_cmdline_parse(&d.cl, argc, argv, err, sizeof(err));
	if (ret == 1) {
		teardown(&d, false, false);
		return 0;
	}
	if (ret < 0) {
		/* One line, like every other configuration error. */
		fprintf(stderr, "tagdiskd: %s (try 'tagdiskd --help')\n", err);
		teardown(&d, false, false);
		return EXIT_USAGE;
	}
	if (d.cl.pid_file && !(d.pid_file = strdup(d.cl.pid_file))) {
		fprintf(stderr, "tagdiskd: out of memory\n");
		teardown(&d, false, false);
		return 1;
	}
	td_config_init(&d.cfg);
	if (td_config_build(&d.cfg, &d.cl, err, sizeof(err)) ||
	    td_config_validate(&d.cfg, err, sizeof(err)) ||
	    (d.pid_file && td_pidfile_check(d.pid_file, err, sizeof(err)))) {
		fprintf(stderr, "tagdiskd: %s\n", err);
		teardown(&d, false, false);
		return EXIT_USAGE;
	}
	if (d.cfg.verbose)
		td_log_set_level(TD_LOG_DEBUG);

	/* Everything checked that can be: from here a failure means "could not serve". */
	if (!d.cfg.foreground && td_daemonize(err, sizeof(err))) {
		td_err("%s", err);
		return fail_start(&d, 1);
	}

	/* Every thread inherits this mask; the signal thread takes them with sigwait(). */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	log_unused_keys(&d.cfg);
	ret = td_store_open(&d.store, &d.cfg, err, sizeof(err));
	if (ret) {
		td_err("%s", err);
		return fail_start(&d, store_error_status(&d.cfg, ret));
	}
	if (d.store.img.created)
		td_notice("image \"%s\": created, %llu bytes, sparse", d.cfg.image,
			  (unsigned long long)d.store.size);
	if (d.cfg.backend != TD_CONFIG_BACKEND_FILE)
		td_notice("backend %s: %s, %llu bytes", d.store.kind, d.store.target,
			  (unsigned long long)d.store.size);

	protect_memory();
	ret = 0;
	if (build_engine(&d, err, sizeof(err)) ||
	    (ret = td_admin_create(&d.admin, &(struct td_admin_params){
						       .socket_path = d.cfg.socket,
						       .socket_mode = d.cfg.socket_mode,
						       .socket_gid = d.cfg.socket_gid,
						       .q = d.q,
						       .drive = d.drive,
						       .trace = d.trace,
						       .config = &d.cfg,
						       .config_lock = &d.cfg_lock,
						       .image = d.store.target,
						       .image_size = d.store.size,
						       .backend = d.store.kind,
						       .disk_path = NULL,
					       },
					       err, sizeof(err))) ||
	    build_frontend(&d, err, sizeof(err))) {
		td_err("%s", err);
		/* Something else is at the socket path: a conflict, like a locked image. */
		return fail_start(&d, ret == -EEXIST || ret == -EADDRINUSE ? EXIT_USAGE : 1);
	}
	td_admin_set_frontend(d.admin, d.fe, d.cfg.mountpoint, d.cfg.name);
	td_reload_init(&d.reload, &d.cl, d.start_dir, &d.cfg, &d.cfg_lock, d.q);

	ret = pthread_create(&d.sig_thread, NULL, signal_main, &d);
	if (ret) {
		td_err("cannot start the signal thread: %s", strerror(ret));
		return fail_start(&d, 1);
	}
	if (d.pid_file && td_pidfile_write(&d.pidfile, d.pid_file, err, sizeof(err))) {
		td_err("%s", err);
		td_frontend_stop(d.fe);
		pthread_mutex_lock(&d.stop_lock);
		d.phase = STOP_DONE;
		pthread_mutex_unlock(&d.stop_lock);
		pthread_kill(d.sig_thread, SIGUSR2);
		pthread_join(d.sig_thread, NULL);
		return fail_start(&d, 1);
	}
	/* Serving: a parent waiting for us exits 0 now; from here we log to syslog. */
	td_daemonize_ready();

	char size_text[32];

	td_format_size(d.store.size, size_text, sizeof(size_text));
	/* The admin socket is up: a client may already be switching the elevator or depth. */
	struct td_queue_status qs;
	const char *mode_name = d.cfg.mode == TD_MODE_RQ ? "rq" : d.cfg.mode == TD_MODE_MQ ? "mq" : "bio";

	pthread_mutex_lock(&d.cfg_lock);
	td_queue_get_status(d.q, &qs);
	td_notice("serving \"%s\" (%s) at %s/%s: mode %s, elevator %s, depth %u, workers %u, "
		  "admin socket %s",
		  d.store.target, size_text, d.cfg.mountpoint, d.cfg.name,
		  mode_name, qs.elevator, d.cfg.depth, d.cfg.workers,
		  d.cfg.socket);
	td_notifyf("READY=1\nSTATUS=serving %s at %s/%s (%s, %s, depth %u)", d.store.target,
		   d.cfg.mountpoint, d.cfg.name, mode_name,
		   d.cfg.mode == TD_MODE_BIO ? "no elevator" : qs.elevator, d.cfg.depth);
	pthread_mutex_unlock(&d.cfg_lock);

	ret = td_frontend_run(d.fe);
	/* Unmounted from outside (or the loop failed): the stop starts now. */
	if (ret < 0)
		td_err("fuse: the session loop failed: %s", strerror(-ret));
	if (begin_stop(&d) && ret == 1)
		td_notice("fuse: %s was unmounted, stopping", d.cfg.mountpoint);
	td_notify("STOPPING=1\nSTATUS=draining the queue");
	ret = stop(&d, ret);
	td_daemonize_end();
	return ret;
}
