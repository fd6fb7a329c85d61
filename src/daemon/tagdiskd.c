// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdiskd.c - main(): parse, build the pipeline, serve, unwind.
 *
 *   image file -> drive -> queue -> front end (FUSE)   and the admin socket
 *
 * Exit status: 0 after a clean stop (SIGTERM, SIGINT, or the file system
 * unmounted from outside), 1 when something failed at run time, 2 for a bad
 * command line or configuration, an image locked by another process, or an
 * admin socket path that is taken.
 *
 * Signals are blocked in every thread and taken by one thread with
 * sigwait(): SIGTERM and SIGINT stop the front end, SIGHUP reloads the
 * settings that can change live. Shutdown: stop receiving FUSE requests,
 * drain the queue, flush the drive, unmount, free everything.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/admin.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/frontend.h"
#include "tagdisk/bio.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/trace.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

#define EXIT_USAGE 2

struct daemon {
	struct td_cmdline cl;
	struct td_config cfg; /* guarded by cfg_lock once threads run */
	pthread_mutex_t cfg_lock;
	struct td_image img;
	struct td_drive *drive;
	struct td_queue *q;
	struct td_trace *trace;
	struct td_frontend *fe;
	struct td_admin *admin;
	pthread_t sig_thread;
	bool sig_thread_started;
};

/* ---- reload ---------------------------------------------------------------------------- */

static void warn_if_changed(const char *what, bool changed)
{
	if (changed)
		td_warnx("reload: %s changed in the configuration; it takes effect on restart", what);
}

/* SIGHUP: apply the settings that can change live; keep everything on any error. */
static void reload(struct daemon *d)
{
	struct td_config next;
	char err[512];

	td_notify("RELOADING=1\nSTATUS=reloading the configuration");
	td_config_init(&next);
	if (td_config_build(&next, &d->cl, err, sizeof(err)) ||
	    td_config_check(&next, err, sizeof(err))) {
		td_err("reload: %s; keeping the current settings", err);
		td_config_free(&next);
		td_notify("READY=1\nSTATUS=serving (reload failed, see the log)");
		return;
	}
	pthread_mutex_lock(&d->cfg_lock);
	struct td_config *cur = &d->cfg;

	if (strcmp(next.elevator, cur->elevator) != 0 && cur->mode == TD_MODE_RQ) {
		int r = td_queue_set_elevator(d->q, next.elevator);

		if (r)
			td_err("reload: [queue] elevator = \"%s\": %s", next.elevator, strerror(-r));
		else
			td_notice("reload: elevator %s -> %s", cur->elevator, next.elevator);
		if (!r)
			snprintf(cur->elevator, sizeof(cur->elevator), "%s", next.elevator);
	}
	/* bio mode has neither elevator nor tags: nothing to resize. */
	if (next.depth != cur->depth && cur->mode == TD_MODE_RQ) {
		int r = td_queue_set_depth(d->q, next.depth);

		if (r) {
			td_err("reload: [tags] depth = %u: %s", next.depth, strerror(-r));
		} else {
			td_notice("reload: depth %u -> %u", cur->depth, next.depth);
			cur->depth = next.depth;
		}
	}
	if (memcmp(&next.tunables, &cur->tunables, sizeof(next.tunables)) != 0) {
		td_queue_set_tunables(d->q, &next.tunables);
		cur->tunables = next.tunables;
		td_notice("reload: deadline tunables read_expire_ms %u, write_expire_ms %u, "
			  "fifo_batch %u, writes_starved %u",
			  next.tunables.read_expire_ms, next.tunables.write_expire_ms,
			  next.tunables.fifo_batch, next.tunables.writes_starved);
	}
	if (next.command_timeout_ms != cur->command_timeout_ms ||
	    next.max_retries != cur->max_retries) {
		td_queue_set_timeout(d->q, next.command_timeout_ms, next.max_retries);
		cur->command_timeout_ms = next.command_timeout_ms;
		cur->max_retries = next.max_retries;
		td_notice("reload: command_timeout_ms %u, max_retries %u", next.command_timeout_ms,
			  next.max_retries);
	}
	warn_if_changed("[queue] mode", next.mode != cur->mode);
	warn_if_changed("[queue] nr_requests", next.nr_requests != cur->nr_requests);
	warn_if_changed("[queue] max_sectors", next.max_sectors != cur->max_sectors);
	warn_if_changed("[drive] workers", next.workers != cur->workers);
	warn_if_changed("[drive] model", next.model != cur->model);
	warn_if_changed("[drive] write_cache", next.write_cache != cur->write_cache);
	warn_if_changed("[disk] image", strcmp(next.image ? next.image : "",
					       cur->image ? cur->image : "") != 0 &&
						next.image && next.image[0] != '/');
	pthread_mutex_unlock(&d->cfg_lock);
	td_config_free(&next);
	td_notify("READY=1\nSTATUS=serving (configuration reloaded)");
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
	for (;;) {
		if (sigwait(&set, &sig))
			continue;
		if (sig == SIGHUP) {
			td_notice("signal: SIGHUP, reloading %s",
				  d->cl.config_file ? d->cl.config_file : "(no config file)");
			reload(d);
			continue;
		}
		td_notice("signal: %s, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
		td_frontend_stop(d->fe);
		return NULL;
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
	ret = td_backend_file_init(&dp.backend, d->img.fd);
	if (ret) {
		snprintf(err, errlen, "out of memory");
		return ret;
	}
	dp.logical_block_size = c->logical_block_size;
	dp.capacity_bytes = d->img.size;
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
	qp.capacity_sectors = d->img.size >> TD_SECTOR_SHIFT;
	qp.logical_block_size = c->logical_block_size;
	qp.max_sectors = c->max_sectors;
	qp.nr_requests = c->nr_requests;
	qp.elevator = c->elevator;
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
		.size_bytes = d->img.size,
		.logical_block_size = c->logical_block_size,
		.read_only = c->read_only,
		.allow_other = c->allow_other,
		.parallel_direct_writes = true,
		.image_fd = d->img.fd,
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
	if (c->mode == TD_MODE_RQ && (c->workers || c->model != TD_MODEL_NONE)) {
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

struct flush_wait {
	sem_t done;
	int err;
};

static void flush_end(struct td_byte_io *io, int err)
{
	struct flush_wait *w = io->private;

	w->err = err;
	sem_post(&w->done);
}

/* Make everything written so far durable. Return: 0 or a negative errno. */
static int flush_disk(struct td_queue *q)
{
	struct flush_wait w = { .err = 0 };
	struct td_byte_io io = { .op = TD_OP_FLUSH, .end = flush_end, .private = &w };
	int ret;

	sem_init(&w.done, 0, 0);
	ret = td_byte_io_submit(q, &io);
	if (!ret) {
		while (sem_wait(&w.done) && errno == EINTR)
			;
		ret = w.err;
		/* The queue counts the flush ended only after flush_end() returns. */
		td_queue_drain(q);
	}
	sem_destroy(&w.done);
	return ret;
}

static void teardown(struct daemon *d, bool remove_created_image)
{
	if (d->admin)
		td_admin_destroy(d->admin);
	if (d->fe)
		td_frontend_destroy(d->fe);
	if (d->q)
		td_queue_destroy(d->q);
	if (d->trace)
		td_trace_destroy(d->trace);
	if (d->drive)
		td_drive_destroy(d->drive);
	td_image_close(&d->img, remove_created_image);
	td_config_free(&d->cfg);
	td_cmdline_free(&d->cl);
	pthread_mutex_destroy(&d->cfg_lock);
}

/* Guard against the loop-on-FUSE deadlock: our allocations must never wait for our own I/O. */
static void protect_memory(void)
{
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0)
		td_warn("PR_SET_IO_FLUSHER (a loop device on this disk may deadlock under "
			"memory pressure)");
	if (mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0)
		td_warn("mlockall (daemon memory may be swapped out)");
}

int main(int argc, char **argv)
{
	struct daemon d = { .img = { .fd = -1 } };
	char err[1024];
	sigset_t set;
	int ret;

	td_log_init("tagdiskd", TD_LOG_INFO);
	pthread_mutex_init(&d.cfg_lock, NULL);
	ret = td_cmdline_parse(&d.cl, argc, argv, err, sizeof(err));
	if (ret == 1)
		return 0;
	if (ret < 0) {
		/* One line, like every other configuration error. */
		fprintf(stderr, "tagdiskd: %s (try 'tagdiskd --help')\n", err);
		return EXIT_USAGE;
	}
	td_config_init(&d.cfg);
	if (td_config_build(&d.cfg, &d.cl, err, sizeof(err)) ||
	    td_config_validate(&d.cfg, err, sizeof(err))) {
		fprintf(stderr, "tagdiskd: %s\n", err);
		td_config_free(&d.cfg);
		td_cmdline_free(&d.cl);
		return EXIT_USAGE;
	}
	if (d.cfg.verbose)
		td_log_set_level(TD_LOG_DEBUG);

	/* Every thread inherits this mask; the signal thread takes them with sigwait(). */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	ret = td_image_open(&d.img, d.cfg.image, d.cfg.size_bytes, d.cfg.read_only, err,
			    sizeof(err));
	if (ret) {
		td_err("%s", err);
		teardown(&d, true);
		return ret == -EBUSY ? EXIT_USAGE : 1;
	}
	if (d.img.created)
		td_notice("image \"%s\": created, %llu bytes, sparse", d.cfg.image,
			  (unsigned long long)d.img.size);
	if (!d.img.size || d.img.size % d.cfg.logical_block_size) {
		td_err("image \"%s\": size %llu is not a multiple of the logical block size %u",
		       d.cfg.image, (unsigned long long)d.img.size, d.cfg.logical_block_size);
		teardown(&d, true);
		return EXIT_USAGE;
	}

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
						       .image = d.cfg.image,
						       .image_size = d.img.size,
						       .disk_path = NULL,
					       },
					       err, sizeof(err))) ||
	    build_frontend(&d, err, sizeof(err))) {
		td_err("%s", err);
		teardown(&d, true);
		/* Something else is at the socket path: a conflict, like a locked image. */
		return ret == -EEXIST || ret == -EADDRINUSE ? EXIT_USAGE : 1;
	}
	td_admin_set_frontend(d.admin, d.fe, d.cfg.mountpoint, d.cfg.name);

	ret = pthread_create(&d.sig_thread, NULL, signal_main, &d);
	if (ret) {
		td_err("cannot start the signal thread: %s", strerror(ret));
		teardown(&d, true);
		return 1;
	}
	d.sig_thread_started = true;

	char size_text[32];

	td_format_size(d.img.size, size_text, sizeof(size_text));
	/* The admin socket is up: a client may already be switching the elevator or depth. */
	pthread_mutex_lock(&d.cfg_lock);
	td_notice("serving \"%s\" (%s) at %s/%s: mode %s, elevator %s, depth %u, workers %u, "
		  "admin socket %s",
		  d.cfg.image, size_text, d.cfg.mountpoint, d.cfg.name,
		  d.cfg.mode == TD_MODE_RQ ? "rq" : "bio",
		  d.cfg.mode == TD_MODE_RQ ? d.cfg.elevator : "none", d.cfg.depth, d.cfg.workers,
		  d.cfg.socket);
	td_notifyf("READY=1\nSTATUS=serving %s at %s/%s (%s, %s, depth %u)", d.cfg.image,
		   d.cfg.mountpoint, d.cfg.name, d.cfg.mode == TD_MODE_RQ ? "rq" : "bio",
		   d.cfg.mode == TD_MODE_RQ ? d.cfg.elevator : "no elevator", d.cfg.depth);
	pthread_mutex_unlock(&d.cfg_lock);

	ret = td_frontend_run(d.fe);
	if (ret == 1)
		td_notice("fuse: %s was unmounted, stopping", d.cfg.mountpoint);
	else if (ret < 0)
		td_err("fuse: the session loop failed: %s", strerror(-ret));
	td_notify("STOPPING=1\nSTATUS=draining the queue");

	/* The signal thread may still be waiting: wake it so it can end. */
	pthread_kill(d.sig_thread, SIGTERM);
	pthread_join(d.sig_thread, NULL);

	td_queue_drain(d.q);
	int flush_err = d.cfg.read_only ? 0 : flush_disk(d.q);

	if (flush_err)
		td_err("final flush failed: %s", strerror(-flush_err));
	if (td_frontend_open_count(d.fe))
		td_warnx("fuse: the disk is still open %u time(s) (a loop device?); unmounting "
			 "lazily",
			 td_frontend_open_count(d.fe));
	td_frontend_unmount(d.fe);
	td_notice("stopped: queue drained%s, unmounted", flush_err ? "" : ", flushed");
	teardown(&d, false);
	return ret < 0 || flush_err ? 1 : 0;
}
