// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdiskd_stop.c - tagdiskd's stop: stop taking FUSE requests (done by the
 * caller), drain the queue and flush the drive, both within [drive]
 * shutdown_timeout_ms counted from the stop (what is left then fails with
 * EIO), unmount or leave the connection to the next daemon, free everything
 * (tagdiskd_int.h).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/compiler.h"
#include "common/lock.h"
#include "common/log.h"
#include "daemon/admin.h"
#include "daemon/frontend.h"
#include "daemon/tagdiskd_int.h"
#include "tagdisk/bio.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/trace.h"
#include "tagdisk/wlog.h"

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
uint64_t td_daemon_teardown(struct daemon *d, bool remove_created_image, bool leave_engine)
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
 * The stop, once the front end has returned: drain and flush within
 * shutdown_timeout_ms of the stop's start, unmount, free.
 * Return: the exit status.
 */
int td_daemon_stop(struct daemon *d, int run_ret)
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
	/*
	 * A thread still inside a backend call (a hung medium) would hold up
	 * execve(), which must end every other thread first: the daemon would
	 * hang half-executed, holding the mount. Stop instead.
	 */
	bool exec_refused = d->end == END_EXEC && leave_engine;

	if (exec_refused)
		d->end = END_UNMOUNT;
	pthread_mutex_unlock(&d->stop_lock);
	if (exec_refused) {
		td_err("restart: backend calls are still running; stopping and unmounting instead "
		       "of executing again");
		td_notify("STOPPING=1\nSTATUS=stopping: backend calls still running");
	}

	if (d->end != END_UNMOUNT) {
		/* The next daemon serves it: the connection stays, with what the kernel queued. */
		td_frontend_detach(d->fe);
		/*
		 * Restarting in place: the new image parses our command line again, so
		 * its relative paths must mean what they meant here. It starts where we
		 * were started (a detached daemon sits in "/"; it goes back there once it
		 * has parsed them); td_daemon_teardown() below frees start_dir.
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

	lost = td_daemon_teardown(d, false, leave_engine);

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

