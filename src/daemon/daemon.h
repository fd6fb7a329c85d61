/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.h - what tagdiskd needs besides the engine: the image file,
 * service-manager notification, going to the background and the pid file.
 *
 * The image is locked with an open file description (OFD) lock for as long as
 * it is served: a write lock, or a read lock in read-only mode, so two
 * writers (or a writer and readers) never serve the same image. OFD locks do
 * not record a pid; the holder is found through /proc/<pid>/fdinfo, which
 * lists each descriptor's locks.
 *
 * Notification follows the sd_notify(3) protocol: datagrams on the socket
 * named by $NOTIFY_SOCKET ("READY=1", "STATUS=...", "STOPPING=1",
 * "RELOADING=1"); without $NOTIFY_SOCKET it does nothing.
 *
 * Going to the background (daemonize.c), as nbdkit and qemu-nbd do: the
 * process forks once its configuration has been checked. The parent waits
 * on a pipe: it exits 0 when the child reports that it serves, or 1 when the
 * child reports that it could not (the child has already written why to the
 * stderr they share) or dies first, and in both cases only once the child has
 * exited. The child starts a session of its own and moves to "/" (every path
 * it will use is absolute by then); stdin is /dev/null at once, stdout and
 * stderr once it serves. From then on each line the log module writes to
 * stderr goes to syslog(3), facility daemon, at its level: a thread reads
 * them from a pipe, so logging never needs more than the write(2) it does in
 * the foreground (a full pipe drops lines rather than block a caller).
 *
 * The pid file (pidfile.c) is written once the daemon serves, atomically (a
 * temporary file renamed over the path), and stays locked with an OFD write
 * lock while the daemon runs: a file nobody locks is stale and replaced; one
 * that is locked belongs to a live daemon and is refused. It is removed on
 * exit, unless another process has replaced it meanwhile.
 *
 * LOCKING: none; the daemonize and pid file calls belong to main() (and to
 * the signal thread's last-resort exit, see tagdiskd.c).
 */
#ifndef TAGDISK_DAEMON_H
#define TAGDISK_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/compiler.h"
#include "tagdisk/backend.h"

struct td_config;

struct td_image {
	int fd;
	uint64_t size;
	bool created; /* this process created the file */
	char *path;
};

/*
 * Open @path (read-only when @read_only), creating a sparse file of
 * @create_size bytes when it does not exist and @create_size is non-zero,
 * then lock it. Return: 0, or a negative errno with a message in @err
 * (-EBUSY when another process holds the lock: the message names its pid).
 * On failure nothing is left behind: a file created here is removed.
 */
int td_image_open(struct td_image *img, const char *path, uint64_t create_size, bool read_only,
		  char *err, size_t errlen) td_nonnull(1, 2, 5);

/* Close (and so unlock) the image. With @remove_if_created, remove a file this process created. */
void td_image_close(struct td_image *img, bool remove_if_created) td_nonnull(1);

/* Return: the pid of a process holding an OFD lock on (@dev, @ino), other than us, or 0. */
pid_t td_image_lock_holder(dev_t dev, ino_t ino);

/*
 * Where the disk's data lives, open: [drive] backend's store. With backend
 * file that is the image file, opened and locked by td_image_open(); with
 * rbd or nbd a network backend, whose open takes its own exclusive lock
 * (rbd) or connection (nbd), and img.fd is -1.
 */
struct td_store {
	struct td_image img;	/* backend file; fd -1 otherwise */
	struct td_backend be;	/* ops NULL once td_store_take_backend() gave it away */
	struct td_backend ref;	/* the same, borrowed: for a last flush while the drive owns it */
	uint64_t size;		/* bytes, as the backend says */
	const char *kind;	/* "file", "rbd" or "nbd" (static) */
	char *target;		/* the image path, "rbd:POOL/IMAGE" or the NBD URI */
};

/*
 * Open @c's backend: the image file (created sparse with [disk] size when
 * missing), a Ceph RBD image (created with [disk] size when missing) or an
 * NBD export; then check the size it reports against [disk] size and
 * logical_block_size (td_config_check_backend_size()).
 * Return: 0; or a negative errno with one line in @err, nothing left open
 * and an image file created here removed: -EBUSY when another process or
 * client holds the image; -EINVAL when its size does not fit the
 * configuration; -ENOENT when an RBD image, pool or file named by the
 * configuration does not exist; another errno otherwise.
 */
int td_store_open(struct td_store *s, const struct td_config *c, char *err, size_t errlen)
	td_nonnull(1, 2, 3);

/* Return: the backend, for struct td_drive_params; the drive owns it from now on. */
struct td_backend td_store_take_backend(struct td_store *s) td_nonnull(1);

/*
 * Close what td_store_open() opened and the drive did not take. With
 * @remove_if_created, remove an image file this process created.
 */
void td_store_close(struct td_store *s, bool remove_if_created) td_nonnull(1);

/* Send @state (e.g. "READY=1\nSTATUS=serving") to the service manager. Return: 0 or -errno. */
int td_notify(const char *state) td_nonnull(1);
/* td_notify() with @fd attached (SCM_RIGHTS; -1: none), for FDSTORE=1. */
int td_notify_fd(const char *state, int fd) td_nonnull(1);
/* printf-style td_notify(). */
int td_notifyf(const char *fmt, ...) td_printf(1, 2);

/*
 * Fork into the background. Call before starting any thread. The parent
 * never returns: it exits 0 or 1 as described above. In the child: a new
 * session, the current directory "/", stdin /dev/null.
 * Return (child): 0; or a negative errno with a message in @err when the
 * fork itself failed (nothing has happened: the caller exits).
 */
int td_daemonize(char *err, size_t errlen) td_nonnull(1);

/*
 * The child serves: point stdout at /dev/null and stderr at syslog, then
 * let the parent exit 0. Does nothing in a process that did not daemonize.
 */
void td_daemonize_ready(void);

/*
 * A daemon that had gone to the background re-executed itself in place
 * (takeover.h), from the directory it was first started in: go back to "/"
 * and log to syslog again, as td_daemonize() and td_daemonize_ready() had.
 */
void td_daemonize_resume(void);

/*
 * The child could not serve (it has logged why): the parent will exit 1 once
 * this process has exited, or 2 when @unservable (the configuration asks for
 * what this machine cannot give: an explicit transport uring). Does nothing
 * in a process that did not daemonize.
 */
void td_daemonize_failed(bool unservable);

/* Before exiting: pass the last log lines to syslog and stop forwarding. */
void td_daemonize_end(void);

struct td_pidfile {
	int fd;		/* the locked file, or -1 */
	char *path;
	dev_t dev;	/* what we renamed to path, to remove only our own */
	ino_t ino;
};

/*
 * Before starting: is @path free to use? It may be missing or stale; it is
 * not when a live process holds its lock, or when its directory is missing.
 * Return: 0, or a negative errno with a message in @err (-EBUSY: held; the
 * message names the pid written in it).
 */
int td_pidfile_check(const char *path, char *err, size_t errlen) td_nonnull(1, 2);

/*
 * Write this process's pid to @path atomically and keep it locked.
 * Return: 0, or a negative errno with a message in @err.
 */
int td_pidfile_write(struct td_pidfile *pf, const char *path, char *err, size_t errlen)
	td_nonnull(1, 2, 3);

/* Remove the pid file if it is still the one we wrote; close it. Idempotent. */
void td_pidfile_remove(struct td_pidfile *pf) td_nonnull(1);

#endif /* TAGDISK_DAEMON_H */
