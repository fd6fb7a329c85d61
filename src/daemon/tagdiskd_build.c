// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdiskd_build.c - the pipeline tagdiskd serves, built in order on the
 * store: drive, trace and write-log hubs, queue, then the front end, which
 * mounts or adopts a connection handed over; and, once serving, what a
 * successor needs (tagdiskd_int.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/compiler.h"
#include "common/log.h"
#include "daemon/admin.h"
#include "daemon/frontend.h"
#include "daemon/mounts.h"
#include "daemon/tagdiskd_int.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/trace.h"
#include "tagdisk/wlog.h"

/* How long a tagdisk mount already at the mountpoint may take to answer (stale_mount()). */
#define STALE_PROBE_MS 5000
/* How long a takeover waits for a dead daemon's RBD lock (its watch times out after 30 s). */
#define TAKEOVER_LOCK_WAIT_S 120

int td_daemon_build_engine(struct daemon *d, char *err, size_t errlen)
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
unsigned int td_daemon_trace_threads(const struct td_config *c)
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
int td_daemon_start_log(struct daemon *d, char *err, size_t errlen)
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

/*
 * A tagdisk mount is at our mountpoint already. One whose daemon is gone
 * (its connection aborted) is detached; one that answers, or that nobody
 * answers for (a stopped daemon, a connection a service manager keeps), is
 * another daemon's: refused (-EEXIST with @err), not taken from it.
 */
static int stale_mount(const struct td_config *c, char *err, size_t errlen)
{
	struct td_mount_info mi;
	const char *source = td_mount_lookup(c->mountpoint, &mi) ? "?" : mi.source;
	int ret = td_mount_probe(c->mountpoint, STALE_PROBE_MS);

	if (ret == -ENOTCONN) {
		td_notice("fuse: detaching the mount a stopped tagdiskd left at %s (%s)",
			  c->mountpoint, source);
		if (umount2(c->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			td_warn("fuse: detaching %s", c->mountpoint);
		return 0;
	}
	if (ret == 0)
		snprintf(err, errlen, "[disk] mountpoint \"%s\": another tagdiskd serves a disk "
			 "there (%s); stop it, or choose another mountpoint", c->mountpoint, source);
	else
		snprintf(err, errlen, "[disk] mountpoint \"%s\": a tagdisk mount there (%s) does "
			 "not answer (%s: a stopped daemon, or a connection a service manager "
			 "keeps); unmount it first", c->mountpoint, source, strerror(-ret));
	return -EEXIST;
}

int td_daemon_build_frontend(struct daemon *d, char *err, size_t errlen)
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
		int ret = stale_mount(c, err, errlen);

		if (ret) {
			free(opts);
			return ret;
		}
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

/*
 * Open the image. Taking over from a daemon that died holding an RBD
 * image's exclusive lock, wait for the cluster to let it go (the dead
 * client's watch times out: about 30 s); anyone else is refused at once.
 */
int td_daemon_open_store(struct daemon *d, char *err, size_t errlen)
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
void td_daemon_offer_connection(struct daemon *d)
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

