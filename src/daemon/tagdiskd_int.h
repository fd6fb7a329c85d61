/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tagdiskd_int.h - the daemon's own state, shared by the three parts of
 * tagdiskd:
 *
 *   tagdiskd.c        main(): parse, start, serve; the signal thread; restarts
 *   tagdiskd_build.c  opening the store and building the pipeline on it
 *                     (drive, queue, trace, write log, front end); offering
 *                     the connection to a successor once serving
 *   tagdiskd_stop.c   the stop: drain and flush within shutdown_timeout_ms,
 *                     unmount or hand over, and freeing everything
 *
 * LOCKING: cfg_lock guards cfg once threads run (the admin thread and
 * reloads change it); stop_lock guards the stop's fields, as marked. The
 * build and teardown calls belong to main(), before the signal thread
 * starts or after it has ended.
 */
#ifndef TAGDISK_DAEMON_TAGDISKD_INT_H
#define TAGDISK_DAEMON_TAGDISKD_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/reload.h"
#include "daemon/takeover.h"

struct td_admin;
struct td_drive;
struct td_frontend;
struct td_queue;
struct td_trace;
struct td_wlog;

#define EXIT_USAGE     2
#define EXIT_DATA_LOST 3
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
	bool serving;		   /* mounted and ready: d->fe is set (restart may go) */
	enum stop_end end;
};

/* ---- tagdiskd_build.c ---------------------------------------------------------------- */

/*
 * Open the image (file, RBD or NBD) into d->store. Taking over from a daemon
 * that died holding an RBD image's exclusive lock, wait for the cluster to
 * release it. Return: 0, or a negative errno with @err.
 */
int td_daemon_open_store(struct daemon *d, char *err, size_t errlen);

/* The drive on the store, the trace and write-log hubs, the queue. Return: 0 or -errno. */
int td_daemon_build_engine(struct daemon *d, char *err, size_t errlen);

/* [log] path: start the write log, before the disk file exists. Return: 0 or -errno. */
int td_daemon_start_log(struct daemon *d, char *err, size_t errlen);

/*
 * The front end: mount (or adopt the connection handed over), with the
 * transport the config and [disk] recovery choose. Return: 0, or -errno
 * with @err (-EOPNOTSUPP: a transport this machine cannot give).
 */
int td_daemon_build_frontend(struct daemon *d, char *err, size_t errlen);

/* Return: the threads that may emit trace events at once (a trace stream's buffers). */
unsigned int td_daemon_trace_threads(const struct td_config *c);

/*
 * Serving: record what a successor needs and, with [disk] recovery over the
 * classic transport, give the connection to the service manager's fd store.
 */
void td_daemon_offer_connection(struct daemon *d);

/* ---- tagdiskd_stop.c ----------------------------------------------------------------- */

/*
 * The stop, once the front end has returned (@run_ret: its result): drain
 * and flush within shutdown_timeout_ms of the stop's start, unmount or leave
 * the connection to the next daemon (d->end), end the signal thread, free.
 * Return: the exit status.
 */
int td_daemon_stop(struct daemon *d, int run_ret);

/*
 * Free everything built so far. With @leave_engine (a backend call is still
 * running) the queue, the drive and the image are left to the exit.
 * Return: the bytes a volatile write cache still held and lost.
 */
uint64_t td_daemon_teardown(struct daemon *d, bool remove_created_image, bool leave_engine);

#endif /* TAGDISK_DAEMON_TAGDISKD_INT_H */
