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
 * (reload.h), SIGUSR2 restarts in place (as `tagdiskctl restart`). Shutdown: stop receiving FUSE requests, drain the queue and
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
#include <sys/mount.h>
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
#include "daemon/mounts.h"
#include "daemon/reload.h"
#include "daemon/takeover.h"
#include "tagdisk/bio.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/trace.h"
#include "tagdisk/wlog.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

#define EXIT_USAGE     2
#define EXIT_DATA_LOST 3
/* How long a takeover waits for a dead daemon's RBD lock (its watch times out after 30 s). */
#define TAKEOVER_LOCK_WAIT_S 120
/* main()'s wake-up of the signal thread (SIGUSR1 interrupts FUSE reads, SIGUSR2 restarts). */
#define SIG_WAKE (SIGRTMIN + 1)

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

/*
 * How a stop ends, once the queue is drained and the disk flushed (takeover.h):
 * unmount (a stop), leave the mount to the service manager's fd store for
 * the next daemon (SIGTERM with a restart pending), or re-execute in place
 * with the connection (tagdiskctl restart, SIGUSR2).
 */
enum stop_end {
	END_UNMOUNT,
	END_HANDOVER,
	END_EXEC,
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
	struct td_wlog *wlog;
	struct td_frontend *fe;
	struct td_admin *admin;
	pthread_t sig_thread;
	struct td_takeover takeover;
	char **argv;	/* as started: what a restart executes again */
	char *exe;	/* the binary's path at start (a restart runs what is there then) */
	bool detached;	/* in the background (here, or before a restart in place) */

	/* Guards the fields below. Held with no other lock, except by abandon(). */
	pthread_mutex_t stop_lock;
	enum stop_phase phase;
	uint64_t stop_start_ns;	   /* when the stop began (the shutdown_timeout_ms clock) */
	unsigned int stop_signals; /* SIGTERM/SIGINT received */
	enum stop_end end;
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
	td_admin_remove_socket(d->admin);
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

/*
 * tagdiskctl restart, SIGUSR2: stop receiving, drain, write back, and
 * re-execute with the connection (stop()). Only the classic transport's
 * requests survive a handover. Return: 0, or -EBUSY/-EOPNOTSUPP with @err.
 */
static int request_restart(struct daemon *d, char *err, size_t errlen)
{
	struct td_fuse_transport_stats ts;

	td_frontend_transport_stats(d->fe, &ts);
	if (strcmp(ts.name, "classic") != 0) {
		snprintf(err, errlen, "restart: the disk is served over %s, whose requests cannot "
			 "be handed to a new daemon; only transport classic restarts in place",
			 ts.name);
		return -EOPNOTSUPP;
	}
	pthread_mutex_lock(&d->stop_lock);
	if (d->phase != STOP_NONE) {
		pthread_mutex_unlock(&d->stop_lock);
		snprintf(err, errlen, "restart: the daemon is already stopping");
		return -EBUSY;
	}
	d->phase = STOP_DRAINING;
	d->stop_start_ns = td_now_ns();
	d->end = END_EXEC;
	pthread_mutex_unlock(&d->stop_lock);
	td_notice("restart: draining, writing back, then executing \"%s\" with the connection",
		  d->exe);
	td_frontend_stop(d->fe);
	return 0;
}

static int admin_restart(void *arg, char *err, size_t errlen)
{
	return request_restart(arg, err, errlen);
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
	sigaddset(&set, SIG_WAKE);
	for (;;) {
		if (sigwait(&set, &sig))
			continue;
		pthread_mutex_lock(&d->stop_lock);
		enum stop_phase phase = d->phase;

		if (phase == STOP_DONE) {
			pthread_mutex_unlock(&d->stop_lock);
			return NULL;
		}
		if (sig == SIG_WAKE) { /* main()'s wake-up: nothing to do */
			pthread_mutex_unlock(&d->stop_lock);
			continue;
		}
		if (sig == SIGUSR2) {
			char err[256];

			pthread_mutex_unlock(&d->stop_lock);
			td_notice("signal: SIGUSR2, restarting in place");
			if (request_restart(d, err, sizeof(err)))
				td_warnx("signal: SIGUSR2: %s", err);
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
			/* A restart of the unit, not a stop: the store hands the mount on. */
			if (d->takeover.stored && td_takeover_restart_pending())
				d->end = END_HANDOVER;
			pthread_mutex_unlock(&d->stop_lock);
			if (d->end == END_HANDOVER)
				td_notice("signal: %s, with a restart of the unit pending: draining, then "
					  "leaving the mount to the next tagdiskd",
					  name);
			else
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

	d->trace = td_trace_create(c->trace_budget);
	d->wlog = td_wlog_create(c->logical_block_size, d->store.size);
	if (!d->trace || !d->wlog) {
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
	qp.wlog = d->wlog;
	d->q = td_queue_create(&qp, &ret);
	if (!d->q) {
		snprintf(err, errlen, "cannot create the queue: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

/* The FUSE threads the front end may run at once. */
static unsigned int fuse_max_threads(const struct td_config *c)
{
	/* Handlers return at once; threads only wait for back-pressure or RMW. */
	if (c->mode != TD_MODE_BIO && (c->workers || c->model != TD_MODEL_NONE))
		return 16;
	/* Each I/O in flight holds a thread (bio mode, or an inline drive). */
	return TD_MAX(c->nr_requests, 16U);
}

/*
 * The threads that may emit trace events at once; a trace stream takes a
 * buffer for each when it starts (tagdisk/trace.h): the FUSE threads at most,
 * the uring transport's (a ring thread per CPU, at most max(4, 2 per CPU)
 * helpers), the drive's workers, and 8 for kblockd, the timer, the admin
 * thread and a network backend's threads.
 */
static unsigned int trace_threads(const struct td_config *c)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int n;

	if (cpus < 1)
		cpus = 1;
	n = fuse_max_threads(c) + (unsigned int)cpus + TD_MAX(4U, 2 * (unsigned int)cpus) +
	    c->workers + 8;
	return TD_MIN(n, (unsigned int)TD_TRACE_MAX_THREADS);
}

/* [log] path: record from the start, before the disk file exists. */
static int start_log(struct daemon *d, char *err, size_t errlen)
{
	static const char what[] = "[log] path: ";
	size_t n = strlen(what);

	if (!d->cfg.log_path)
		return 0;
	if (errlen <= n)
		return -EINVAL;
	memcpy(err, what, n);
	return td_wlog_start(d->wlog, d->cfg.log_path, err + n, errlen - n);
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
		.opens = td_takeover_opens(&d->takeover),
		.adopt = d->takeover.adopted,
		.adopt_fd = d->takeover.fuse_fd,
		.adopt_init_in = d->takeover.rec ? d->takeover.rec->init_in : NULL,
		.adopt_init_in_len = d->takeover.rec ? d->takeover.rec->init_in_len : 0,
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
	if (!d->takeover.adopted && c->transport == TD_TRANSPORT_AUTO && td_config_recovery(c)) {
		fp.transport = TD_TRANSPORT_CLASSIC;
		td_notice("fuse: transport classic: [disk] recovery keeps the mount across a crash "
			  "of the daemon, which FUSE over io_uring cannot (recovery = false for the "
			  "ring)");
	} else if (c->transport == TD_TRANSPORT_URING && c->recovery) {
		td_notice("fuse: transport uring: the mount does not outlive a crash of the daemon "
			  "([disk] recovery needs transport classic)");
	}
	if (!d->takeover.adopted && td_mount_is_tagdisk(c->mountpoint)) {
		/* Its daemon is gone (another one would hold the image or the socket). */
		td_notice("fuse: detaching the mount a stopped tagdiskd left at %s", c->mountpoint);
		if (umount2(c->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			td_warn("fuse: detaching %s", c->mountpoint);
	}
	fp.max_threads = fuse_max_threads(c);
	if (c->mode != TD_MODE_BIO && (c->workers || c->model != TD_MODEL_NONE))
		fp.max_background = TD_MAX(c->nr_requests, c->depth);
	else
		fp.max_background = c->nr_requests;
	int ret;

	d->fe = td_frontend_create(&fp, &ret, err, errlen);
	free(opts);
	return d->fe ? 0 : ret;
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
	/* After the last flush: the log ends with what the disk made durable. */
	if (d->wlog && leave_engine)
		td_wlog_stop(d->wlog, NULL);
	else if (d->wlog)
		td_wlog_destroy(d->wlog);
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
 * A command-line option replaces a value of the config file without a
 * word otherwise; say so (the unit's --socket beats [admin] socket).
 */
static void log_overridden_keys(const struct td_config *c)
{
	for (size_t i = 0; i < TD_CONFIG_NR_KEYS; i++) {
		const struct td_config_origin *o = &c->origin[i];

		if (o->option && o->overridden_line)
			td_notice("config: %s replaces [%s] %s of %s:%u", o->option,
				  td_config_keys[i].section, td_config_keys[i].key, c->origin_file,
				  o->overridden_line);
	}
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

/*
 * Start failed (the reason is logged): clean up, and tell a waiting parent,
 * which exits 1, or 2 for a transport this machine cannot give (@unservable).
 */
static int fail_start_as(struct daemon *d, int status, bool unservable)
{
	/* An image this start created goes again, and not without a word. */
	if (d->store.img.created)
		td_notice("image \"%s\": removed again (this start created it)", d->cfg.image);
	/* An adopted connection a service manager keeps: leave it for another attempt. */
	if (d->fe && d->takeover.adopted && td_takeover_has_store())
		td_frontend_detach(d->fe);
	teardown(d, true, false);
	td_takeover_fini(&d->takeover);
	/* Not teardown()'s: a restart in place executes it after the stop's teardown. */
	free(d->exe);
	d->exe = NULL;
	td_daemonize_failed(unservable);
	return status;
}

static int fail_start(struct daemon *d, int status)
{
	return fail_start_as(d, status, false);
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
		/* Stale asynchronous operations (rbd, nbd) were sent and cannot be taken back. */
		leave_engine = ds.executing > 0 || ds.stale_ops > 0;
		if (leave_engine)
			td_warnx("stop: %u backend call(s) still running; not waiting for them",
				 ds.executing + ds.stale_ops);
	}

	pthread_mutex_lock(&d->stop_lock);
	d->phase = STOP_CLOSING;
	pthread_mutex_unlock(&d->stop_lock);

	if (d->end != END_UNMOUNT) {
		/* The next daemon serves it: the connection stays, with what the kernel queued. */
		td_frontend_detach(d->fe);
		/*
		 * Restarting in place: the new image parses our command line again, so
		 * its relative paths must mean what they meant here. It starts where we
		 * were started (a detached daemon sits in "/"; it goes back there once it
		 * has parsed them); teardown() below frees start_dir.
		 */
		if (d->end == END_EXEC && chdir(d->start_dir) < 0)
			td_warn("restart: back to \"%s\", where relative paths point: %s",
				d->start_dir, strerror(errno));
	} else {
		/* A stop: the service manager forgets the connection before it goes. */
		td_takeover_unstore(&d->takeover);
		if (td_frontend_open_count(d->fe))
			td_warnx("fuse: the disk is still open %u time(s) (a loop device?); "
				 "unmounting lazily",
				 td_frontend_open_count(d->fe));
		td_frontend_unmount(d->fe);
	}

	/* The signal thread ends at its next wake-up. */
	pthread_mutex_lock(&d->stop_lock);
	d->phase = STOP_DONE;
	pthread_mutex_unlock(&d->stop_lock);
	pthread_kill(d->sig_thread, SIG_WAKE);
	pthread_join(d->sig_thread, NULL);

	lost = teardown(d, false, leave_engine);

	char failed_text[64] = "";
	char lost_text[96] = "";
	bool data_lost = failed || flush_err || lost;
	const char *unmounted = d->end == END_UNMOUNT ? "unmounted"
				: d->end == END_HANDOVER ? "the mount left to the next tagdiskd"
							 : "restarting in place";

	if (failed > 0)
		snprintf(failed_text, sizeof(failed_text), " by failing %d request%s", failed,
			 failed == 1 ? "" : "s");
	else if (failed < 0)
		snprintf(failed_text, sizeof(failed_text), " by giving up");
	if (lost)
		snprintf(lost_text, sizeof(lost_text), ", the volatile write cache lost %llu bytes",
			 (unsigned long long)lost);
	if (data_lost) {
		td_notice("stopped: queue drained%s, %s, %s%s; exit status %d: data may be lost",
			  failed_text, flushed, unmounted, lost_text, EXIT_DATA_LOST);
		return EXIT_DATA_LOST;
	}
	td_notice("stopped: queue drained, %s, %s", flushed, unmounted);
	return run_ret < 0 ? 1 : 0;
}

/*
 * Open the image. Taking over from a daemon that died holding an RBD
 * image's exclusive lock, wait for the cluster to let it go (the dead
 * client's watch times out: about 30 s); anyone else is refused at once.
 */
static int open_store(struct daemon *d, char *err, size_t errlen)
{
	uint64_t deadline = td_now_ns() + TAKEOVER_LOCK_WAIT_S * TD_NSEC_PER_SEC;
	bool said = false;
	int ret;

	for (;;) {
		ret = td_store_open(&d->store, &d->cfg, err, errlen);
		if (ret != -EBUSY || !d->takeover.adopted || d->cfg.backend != TD_CONFIG_BACKEND_RBD ||
		    td_now_ns() >= deadline)
			return ret;
		if (!said)
			td_notice("takeover: %s; waiting (up to %d s) for the cluster to release the "
				  "lock the dead daemon (pid %d) held",
				  err, TAKEOVER_LOCK_WAIT_S, (int)d->takeover.from_pid);
		said = true;
		td_sleep_until(td_now_ns() + TD_NSEC_PER_SEC);
	}
}

/*
 * Serving: keep what a successor needs in the shared record and, when the
 * disk is to survive its daemon ([disk] recovery, transport classic), give
 * the connection to the service manager's fd store.
 */
static void offer_connection(struct daemon *d)
{
	struct td_fuse_session *s = td_frontend_session(d->fe);
	struct td_fuse_transport_stats ts;
	const void *in, *out;
	size_t in_len, out_len;
	char err[256];
	int ret;

	td_fuse_session_init_args(s, &in, &in_len, &out, &out_len);
	ret = td_takeover_record(&d->takeover, td_fuse_session_fd(s), d->cfg.mountpoint,
				 d->cfg.name, d->store.size, d->cfg.logical_block_size, in, in_len,
				 out, out_len, err, sizeof(err));
	if (ret) {
		td_warnx("%s: the disk will not survive a restart of this daemon", err);
		return;
	}
	td_frontend_transport_stats(d->fe, &ts);
	if (!td_config_recovery(&d->cfg) || strcmp(ts.name, "classic") != 0) {
		td_admin_set_takeover(d->admin, false, false, d->takeover.rec->takeovers, 0);
		return;
	}
	ret = td_takeover_store(&d->takeover);
	if (ret)
		td_warnx("takeover: offering the connection to the service manager: %s",
			 strerror(-ret));
	td_admin_set_takeover(d->admin, true, d->takeover.stored, d->takeover.rec->takeovers,
			      td_frontend_resent(d->fe));
}

int main(int argc, char **argv)
{
	struct daemon d = { .store = { .img = { .fd = -1 } }, .pidfile = { .fd = -1 }, .argv = argv };
	char err[1024];
	sigset_t set;
	int ret;

	td_takeover_init(&d.takeover);
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
	/* A connection handed over (LISTEN_FDS): adopt it, if it is this disk's. */
	ret = td_takeover_from_env(&d.takeover, d.cfg.mountpoint, d.cfg.name, d.cfg.size_bytes,
				   d.cfg.logical_block_size, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "tagdiskd: %s\n", err);
		teardown(&d, false, false);
		return EXIT_USAGE;
	}
	/* What a restart in place executes: the binary at this path, new code included. */
	d.exe = realpath("/proc/self/exe", NULL);

	/* Everything checked that can be: from here a failure means "could not serve". */
	if (d.takeover.in_place) {
		/* Our own restart: already in the background, or in the foreground, as before. */
		d.detached = td_takeover_detached();
		if (d.detached)
			td_daemonize_resume();
	} else if (!d.cfg.foreground) {
		if (td_daemonize(err, sizeof(err))) {
			td_err("%s", err);
			return fail_start(&d, 1);
		}
		d.detached = true;
	}

	/* Every thread inherits this mask; the signal thread takes them with sigwait(). */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIG_WAKE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	log_overridden_keys(&d.cfg);
	log_unused_keys(&d.cfg);
	ret = open_store(&d, err, sizeof(err));
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
	ret = td_takeover_prepare(&d.takeover, err, sizeof(err));
	if (ret) {
		td_err("%s", err);
		return fail_start(&d, 1);
	}
	if (build_engine(&d, err, sizeof(err)) ||
	    (ret = td_admin_create(&d.admin, &(struct td_admin_params){
						       .socket_path = d.cfg.socket,
						       .socket_mode = d.cfg.socket_mode,
						       .socket_gid = d.cfg.socket_gid,
						       .q = d.q,
						       .drive = d.drive,
						       .trace = d.trace,
						       .trace_threads = trace_threads(&d.cfg),
						       .wlog = d.wlog,
						       .config = &d.cfg,
						       .config_lock = &d.cfg_lock,
						       .image = d.store.target,
						       .image_size = d.store.size,
						       .backend = d.store.kind,
						       .disk_path = NULL,
						       .restart = admin_restart,
						       .restart_arg = &d,
					       },
					       err, sizeof(err))) ||
	    (ret = start_log(&d, err, sizeof(err))) ||
	    (ret = build_frontend(&d, err, sizeof(err)))) {
		td_err("%s", err);
		/*
		 * Something else is at the socket path: a conflict, like a locked
		 * image; an explicit transport uring the kernel cannot give: a
		 * configuration this machine cannot serve.
		 */
		if (ret == -EOPNOTSUPP)
			return fail_start_as(&d, EXIT_USAGE, true);
		return fail_start(&d, ret == -EEXIST || ret == -EADDRINUSE ? EXIT_USAGE : 1);
	}
	/* FUSE_INIT answered and the transport settled before anyone is told we are ready. */
	ret = td_frontend_start(d.fe);
	if (ret) {
		if (ret == -EOPNOTSUPP)
			td_err("fuse: transport uring asked for, but the kernel serves this mount "
			       "through /dev/fuse; stopping");
		else
			td_err("fuse: the mount did not come up: %s", strerror(-ret));
		td_frontend_stop(d.fe);
		td_frontend_run(d.fe);
		return fail_start_as(&d, ret == -EOPNOTSUPP ? EXIT_USAGE : 1, ret == -EOPNOTSUPP);
	}
	offer_connection(&d);
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
		pthread_kill(d.sig_thread, SIG_WAKE);
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

	if (d.takeover.adopted)
		td_notice("took over %s/%s from pid %d: %llu requests resent", d.cfg.mountpoint,
			  d.cfg.name, (int)d.takeover.from_pid,
			  (unsigned long long)td_frontend_resent(d.fe));

	ret = td_frontend_run(d.fe);
	/* Unmounted from outside (or the loop failed): the stop starts now. */
	if (ret < 0)
		td_err("fuse: the session loop failed: %s", strerror(-ret));
	if (begin_stop(&d) && ret == 1)
		td_notice("fuse: %s was unmounted, stopping", d.cfg.mountpoint);
	td_notify("STOPPING=1\nSTATUS=draining the queue");
	ret = stop(&d, ret);
	td_daemonize_end();
	if (d.end == END_EXEC) {
		ret = td_takeover_exec(&d.takeover, d.exe ? d.exe : "/proc/self/exe", d.argv,
				       d.detached);
		td_err("restart: cannot execute \"%s\": %s; the disk is lost with this process",
		       d.exe ? d.exe : "/proc/self/exe", strerror(-ret));
		ret = 1;
	}
	td_takeover_fini(&d.takeover);
	free(d.exe);
	return ret;
}
