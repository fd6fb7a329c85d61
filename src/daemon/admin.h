/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * admin.h - the admin socket: status, statistics, resets, faults, traces.
 *
 * A Unix stream socket serving the admin protocol (docs/protocol.md):
 * one command per line (at most TD_ADMIN_LINE_MAX bytes), one JSON object
 * per line in reply, any number of commands per connection, many
 * connections at once. One thread runs a poll(2) loop over the listening
 * socket and every connection, so a slow or stuck client never blocks I/O or
 * other clients: replies are buffered per connection and written as the
 * socket accepts them. Commands that wait (reset waits for the drive to
 * return the commands it is executing) run in that thread too; they are
 * short.
 *
 * Access: the socket is created under a tight umask and then given
 * socket_mode and socket_gid. Each connection's peer credentials
 * (SO_PEERCRED) are checked when it connects: root, the daemon's own uid, or
 * a member of the socket's group (primary or supplementary) may talk;
 * anyone else gets one {"ok":false,...} line, a log line, and is closed.
 *
 * The socket path is created safely: an existing path is only replaced when
 * it is a socket nobody listens on (a stale one); anything else is an error.
 * The socket gets its mode and group before it appears at its path, and no
 * path is followed to give them (admin_socket.c). The socket is removed when
 * the admin stops, if the path still names it.
 * A missing directory of the socket (one level: /run/tagdisk when nothing
 * made it) is created, logged, and removed again, if empty, with the socket
 * when the admin stops.
 *
 * `trace` turns a connection into an event stream (tagdisk/trace.h); the
 * poll loop drains its ring every few milliseconds.
 *
 * LOCKING: the admin thread takes the config lock (first in the order of
 * tagdisk/queue.h) around reading the settings it reports.
 */
#ifndef TAGDISK_ADMIN_H
#define TAGDISK_ADMIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/compiler.h"

#define TD_ADMIN_LINE_MAX 4096

struct td_queue;
struct td_drive;
struct td_trace;
struct td_wlog;
struct td_config;
struct td_frontend;
struct td_admin;

struct td_admin_params {
	const char *socket_path;
	mode_t socket_mode;
	gid_t socket_gid; /* (gid_t)-1: the daemon's own group */
	struct td_queue *q;
	struct td_drive *drive;
	struct td_trace *trace;
	unsigned int trace_threads; /* threads that may emit: a trace stream has a ring for each */
	struct td_wlog *wlog;		/* the write log; may be NULL */
	struct td_config *config;	/* read under config_lock */
	pthread_mutex_t *config_lock;
	const char *image;		/* the image path, "rbd:POOL/IMAGE" or the NBD URI */
	uint64_t image_size;
	const char *backend;		/* "file", "rbd" or "nbd" (static); NULL: "file" */
	const char *disk_path;		/* unused; the front end is set later */
	/*
	 * `restart`: re-execute the daemon in place, keeping the mount (the
	 * daemon's, in tagdiskd.c). Called in the admin thread; it starts the
	 * stop and returns at once. Return: 0, or a negative errno with a
	 * message in @err (nothing started). NULL: the command is refused.
	 */
	int (*restart)(void *arg, char *err, size_t errlen);
	void *restart_arg;
};

/*
 * Create the socket and start the admin thread.
 * Return: 0 with *@out set, or a negative errno with a message in @err.
 */
int td_admin_create(struct td_admin **out, const struct td_admin_params *p, char *err,
		    size_t errlen) td_nonnull(1, 2, 3);

/* Tell the admin about the front end (for status), once it exists. */
void td_admin_set_frontend(struct td_admin *a, struct td_frontend *fe, const char *mountpoint,
			   const char *name) td_nonnull(1);

/*
 * Tell the admin whether the mount outlives this daemon (takeover.h:
 * @recovery, the connection survives; @fd_store, a service manager keeps it
 * for a successor after a crash), how many daemons took it over so far and
 * how many requests the last one had resent; once, before serving.
 */
void td_admin_set_takeover(struct td_admin *a, bool recovery, bool fd_store, uint64_t takeovers,
			   uint64_t resent) td_nonnull(1);

/* Stop the thread, close every connection, remove the socket (and its directory if made), free. */
void td_admin_destroy(struct td_admin *a) td_nonnull(1);

/*
 * Remove the socket and a directory made for it, leaving the thread be: for
 * a daemon that exits without stopping the admin (a second SIGTERM).
 */
void td_admin_remove_socket(struct td_admin *a) td_nonnull(1);

#endif /* TAGDISK_ADMIN_H */
