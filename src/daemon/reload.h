/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * reload.h - SIGHUP: read the configuration again, apply what can change live.
 *
 * A reload rebuilds the settings exactly as at start (defaults, the -c file,
 * the command line on top), with relative paths of the file resolved against
 * the directory tagdiskd started in (it may have moved to "/" since), and
 * compares them key by key:
 *
 *  - a key that can change live (td_config_keys[].reloadable, and one this
 *    file knows how to apply: elevator, depth, the deadline tunables,
 *    command_timeout_ms, max_retries, shutdown_timeout_ms) is applied when
 *    its value in the file changed since the last load. So a setting made
 *    over the admin socket (elevator, depth) survives a reload that does not
 *    touch that key, and is replaced by one that does;
 *  - any other key is compared with what the daemon runs with, and every one
 *    that differs is named in one warning: "reload: [disk] size, [drive]
 *    workers changed: restart to apply" (again at each reload, until a
 *    restart);
 *  - in mode bio, elevator and depth are not used: a change is noted, not
 *    applied;
 *  - nothing changed: "reload: no change".
 *
 * A file that does not build or check changes nothing: one error line,
 * "reload: <the message a start would print>; keeping the current settings".
 *
 * LOCKING: td_reload_run() takes the config lock (first in the lock order of
 * tagdisk/queue.h) while it compares and applies; the queue calls it makes
 * take the queue's locks after it. One thread reloads at a time (it uses
 * iniparser and getopt, see daemon/config.h).
 */
#ifndef TAGDISK_RELOAD_H
#define TAGDISK_RELOAD_H

#include <pthread.h>
#include "daemon/config.h"

struct td_queue;

struct td_reload {
	const struct td_cmdline *cl; /* borrowed */
	const char *start_dir;	     /* borrowed: where relative paths of the file point */
	struct td_config *running;   /* borrowed, under *lock: what the daemon runs with */
	pthread_mutex_t *lock;
	struct td_queue *q; /* borrowed */
	/* The live keys as the last load set them (other fields unused, never owned). */
	struct td_config loaded;
};

/*
 * Remember @running's live keys as the last load's. @running must be
 * validated (its paths absolute). Allocates nothing.
 */
void td_reload_init(struct td_reload *r, const struct td_cmdline *cl, const char *start_dir,
		    struct td_config *running, pthread_mutex_t *lock, struct td_queue *q)
	td_nonnull(1, 2, 3, 4, 5, 6);

/* Reload (see above), with sd_notify RELOADING=1 before and READY=1 after. */
void td_reload_run(struct td_reload *r) td_nonnull(1);

#endif /* TAGDISK_RELOAD_H */
