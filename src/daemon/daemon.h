/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.h - what tagdiskd needs besides the engine: the image file and
 * service-manager notification.
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
 */
#ifndef TAGDISK_DAEMON_H
#define TAGDISK_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/compiler.h"

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

/* Send @state (e.g. "READY=1\nSTATUS=serving") to the service manager. Return: 0 or -errno. */
int td_notify(const char *state) td_nonnull(1);
/* printf-style td_notify(). */
int td_notifyf(const char *fmt, ...) td_printf(1, 2);

#endif /* TAGDISK_DAEMON_H */
