// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdiskd.c - main(): parse, build the pipeline (tagdiskd_build.c), serve,
 * stop (tagdiskd_stop.c); the signal thread and restarts in place.
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
 * (reload.h), SIGUSR2 restarts in place (as `tagdiskctl restart`). A
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
#include <unistd.h>
#include "common/clock.h"
#include "common/log.h"
#include "daemon/admin.h"
#include "daemon/frontend.h"
#include "daemon/tagdiskd_int.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

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
 * re-execute with the connection (td_daemon_stop()). Only the classic
 * transport's requests survive a handover, and only a daemon whose backend
 * calls have all returned can execute again. Return: 0, or
 * -EAGAIN/-EBUSY/-EOPNOTSUPP with @err.
 */
static int request_restart(struct daemon *d, char *err, size_t errlen)
{
	struct td_fuse_transport_stats ts;
	struct td_drive_status ds;

	/* d->fe is main()'s until it serves: the admin socket is up before the mount. */
	pthread_mutex_lock(&d->stop_lock);
	bool serving = d->serving;
	bool stopping = d->phase != STOP_NONE;

	pthread_mutex_unlock(&d->stop_lock);
	if (!serving) {
		snprintf(err, errlen, "restart: the daemon is still starting");
		return -EAGAIN;
	}
	if (stopping) {
		snprintf(err, errlen, "restart: the daemon is already stopping");
		return -EBUSY;
	}
	td_frontend_transport_stats(d->fe, &ts);
	if (strcmp(ts.name, "classic") != 0) {
		snprintf(err, errlen, "restart: the disk is served over %s, whose requests cannot "
			 "be handed to a new daemon; only transport classic restarts in place",
			 ts.name);
		return -EOPNOTSUPP;
	}
	td_drive_get_status(d->drive, &ds);
	if (ds.stale_calls || ds.stale_ops) {
		snprintf(err, errlen, "restart: %u backend call(s) left behind by a reset have not "
			 "returned (a hung medium?); the new image could not start until they do",
			 ds.stale_calls + ds.stale_ops);
		return -EBUSY;
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
		/*
		 * Asked of the service manager over D-Bus, which may take a while:
		 * not under stop_lock. d->takeover.stored was set before this thread.
		 */
		bool restart_pending = (sig == SIGTERM || sig == SIGINT) && d->takeover.stored &&
				       td_takeover_restart_pending();

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
			if (restart_pending)
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
	td_daemon_teardown(d, true, false);
	td_takeover_fini(&d->takeover);
	/* Not td_daemon_teardown()'s: a restart in place executes it after the stop's teardown. */
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
		td_daemon_teardown(&d, false, false);
		return 0;
	}
	if (ret < 0) {
		/* One line, like every other configuration error. */
		fprintf(stderr, "tagdiskd: %s (try 'tagdiskd --help')\n", err);
		td_daemon_teardown(&d, false, false);
		return EXIT_USAGE;
	}
	if (d.cl.pid_file && !(d.pid_file = strdup(d.cl.pid_file))) {
		fprintf(stderr, "tagdiskd: out of memory\n");
		td_daemon_teardown(&d, false, false);
		return 1;
	}
	td_config_init(&d.cfg);
	if (td_config_build(&d.cfg, &d.cl, err, sizeof(err)) ||
	    td_config_validate(&d.cfg, err, sizeof(err)) ||
	    (d.pid_file && td_pidfile_check(d.pid_file, err, sizeof(err)))) {
		fprintf(stderr, "tagdiskd: %s\n", err);
		td_daemon_teardown(&d, false, false);
		return EXIT_USAGE;
	}
	if (d.cfg.verbose)
		td_log_set_level(TD_LOG_DEBUG);
	/* A connection handed over (LISTEN_FDS): adopt it, if it is this disk's. */
	ret = td_takeover_from_env(&d.takeover, d.cfg.mountpoint, d.cfg.name, d.cfg.size_bytes,
				   d.cfg.logical_block_size, err, sizeof(err));
	if (ret < 0) {
		fprintf(stderr, "tagdiskd: %s\n", err);
		td_daemon_teardown(&d, false, false);
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
	ret = td_daemon_open_store(&d, err, sizeof(err));
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
	if (td_daemon_build_engine(&d, err, sizeof(err)) ||
	    (ret = td_admin_create(&d.admin, &(struct td_admin_params){
						       .socket_path = d.cfg.socket,
						       .socket_mode = d.cfg.socket_mode,
						       .socket_gid = d.cfg.socket_gid,
						       .q = d.q,
						       .drive = d.drive,
						       .trace = d.trace,
						       .trace_threads = td_daemon_trace_threads(&d.cfg),
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
	    (ret = td_daemon_start_log(&d, err, sizeof(err))) ||
	    (ret = td_daemon_build_frontend(&d, err, sizeof(err)))) {
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
	td_daemon_offer_connection(&d);
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
	pthread_mutex_lock(&d.stop_lock);
	d.serving = true;
	pthread_mutex_unlock(&d.stop_lock);
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
	pthread_mutex_lock(&d.stop_lock);
	enum stop_end end = d.end;
	pthread_mutex_unlock(&d.stop_lock);
	/*
	 * A restart in place is this service going on, not stopping: STOPPING=1
	 * would leave the unit deactivating, deaf to the new image's READY=1,
	 * until TimeoutStopSec killed it. RELOADING=1 is ended by that READY=1.
	 */
	if (end == END_EXEC)
		td_notify("RELOADING=1\nSTATUS=restarting in place: draining the queue");
	else
		td_notify("STOPPING=1\nSTATUS=draining the queue");
	ret = td_daemon_stop(&d, ret);
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
