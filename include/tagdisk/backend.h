/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend.h - where the drive keeps its data: an ops table per backend.
 *
 * Two kinds of backend:
 *
 *  - synchronous (file, memory, null): read, write, flush, discard and
 *    write_zeroes are all set; each returns once the transfer is done. The
 *    drive's executor threads call them; a call cannot be taken back.
 *
 *  - asynchronous (rbd, nbd): submit is set and the synchronous members are
 *    NULL. One tagged command is one outstanding backend operation: the
 *    drive fills a struct td_backend_io, submits it and goes on; the backend
 *    calls io->done exactly once when the operation has finished. An
 *    operation already sent cannot be taken back either: after a reset the
 *    drive keeps such "stale" operations fenced (see tagdisk/drive.h).
 *
 * td_backend_read() and friends call either kind synchronously (for the
 * volatile write cache, bio mode and the hdd model): on an asynchronous
 * backend they submit and wait.
 *
 * Every member may be called from several threads at once. Errors are
 * negative errnos. Transfers are exact: short transfers are retried inside
 * the backend, reads past the end of the backing store read as zeroes.
 */
#ifndef TAGDISK_BACKEND_H
#define TAGDISK_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include "common/compiler.h"
#include "tagdisk/types.h"

struct td_backend_io;

/*
 * Called exactly once per accepted operation, from any thread (a library's
 * own, or the submitter's before submit returns), with no backend lock the
 * callee could need held; @err is 0 or a negative errno. The callee may
 * free @io.
 */
typedef void (*td_backend_done_fn)(struct td_backend_io *io, int err);

/* One asynchronous backend operation. The submitter owns it and its buffer. */
struct td_backend_io {
	enum td_op op;	 /* read, write, flush, discard or write zeroes */
	bool fua;	 /* write: stable on the backend before done is called */
	uint64_t off;	 /* bytes; 0 for flush */
	uint64_t len;	 /* bytes; 0 for flush */
	void *buf;	 /* read and write: @len bytes, valid until done is called */
	td_backend_done_fn done;
	void *owner;	 /* the submitter's */
	void *bpriv;	 /* the backend's own, while the operation is outstanding */
};

struct td_backend_ops {
	const char *name; /* "file", "mem", "null", "rbd", "nbd" */
	/*
	 * Synchronous backends whose calls only touch memory (mem, null): no
	 * call can be left waiting on a device or a server, so the drive skips
	 * the bookkeeping that lets a bounded drain abandon one (see "Giving
	 * commands back" in src/engine/drive.c).
	 */
	bool memory_only;
	/* Synchronous backends: all five; asynchronous ones: none. */
	int (*read)(void *priv, const struct iovec *iov, int iovcnt, uint64_t off);
	int (*write)(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua);
	int (*flush)(void *priv);
	/* Make [off, off + len) read as zeroes, releasing space where possible. */
	int (*discard)(void *priv, uint64_t off, uint64_t len);
	/* Make [off, off + len) read as zeroes, keeping space allocated. */
	int (*write_zeroes)(void *priv, uint64_t off, uint64_t len);
	/*
	 * Asynchronous backends: start @io. Return 0 when accepted (io->done
	 * will be called, possibly before submit returns), or a negative errno
	 * when not (io->done is not called).
	 */
	int (*submit)(void *priv, struct td_backend_io *io);
	/*
	 * Optional: free @priv. Waits until every accepted operation has called
	 * io->done.
	 */
	void (*destroy)(void *priv);
};

struct td_backend {
	const struct td_backend_ops *ops;
	void *priv;
};

/* Return: true when @be is asynchronous (has submit). */
static inline bool td_backend_is_async(const struct td_backend *be)
{
	return be->ops->submit != NULL;
}

/* Synchronous calls on either kind of backend (asynchronous: submit and wait). */
int td_backend_read(const struct td_backend *be, const struct iovec *iov, int iovcnt, uint64_t off)
	td_nonnull(1);
int td_backend_write(const struct td_backend *be, const struct iovec *iov, int iovcnt, uint64_t off,
		     bool fua) td_nonnull(1);
int td_backend_flush(const struct td_backend *be) td_nonnull(1);
int td_backend_discard(const struct td_backend *be, uint64_t off, uint64_t len) td_nonnull(1);
int td_backend_write_zeroes(const struct td_backend *be, uint64_t off, uint64_t len) td_nonnull(1);

/* The image file open on @fd (borrowed: the caller closes it after the drive). Return: 0. */
int td_backend_file_init(struct td_backend *be, int fd) td_nonnull(1);
/* A backend that stores nothing and reads zeroes: for tests and benchmarks. */
void td_backend_null_init(struct td_backend *be) td_nonnull(1);
/* A zero-filled memory backend of @size bytes. Return: 0 or -ENOMEM. */
int td_backend_mem_init(struct td_backend *be, uint64_t size) td_nonnull(1);
/* Return: the memory of a backend made by td_backend_mem_init(). */
uint8_t *td_backend_mem_data(const struct td_backend *be) td_nonnull(1);

/*
 * The network backends are optional: `make WITH_RBD=0` or `WITH_NBD=0` builds
 * without librbd or libnbd, and TD_WITH_RBD / TD_WITH_NBD are then 0. Their
 * open functions stay, from drive_absent.c, and fail with -ENOTSUP and a
 * message saying how to build them in; the config refuses such a backend
 * before that (config_values.c).
 */
#ifndef TD_WITH_RBD
#define TD_WITH_RBD 1
#endif
#ifndef TD_WITH_NBD
#define TD_WITH_NBD 1
#endif

/* Ceph RBD through librbd (drive_rbd.c). */
struct td_rbd_params {
	const char *pool;
	const char *image;
	const char *conf;    /* ceph.conf; NULL: /etc/ceph/ceph.conf */
	const char *id;	     /* client name without "client."; NULL: admin */
	const char *keyring; /* NULL: what the configuration names */
};

/*
 * Connect, open @p->image (creating it with @create_size bytes when it does
 * not exist and @create_size is not 0) and take its exclusive lock, so that a
 * second daemon on the same image is refused. A holder that died keeps the
 * lock until the cluster drops its watch (osd_client_watch_timeout, 30 s by
 * default): the open waits that long, then breaks the lock and takes it.
 * Connecting gives up after 30 s unless ceph.conf bounds it otherwise. A
 * write completes once the OSDs have it: librbd's cache is off unless
 * ceph.conf chooses an rbd_cache_policy.
 * @read_only opens without the lock. *@size is the image's size.
 * Return: 0; -EBUSY when another client holds the lock; another negative
 * errno. On error @msg (of @msglen bytes) says what went wrong in one line,
 * naming the lock's holder when Ceph says who it is.
 */
int td_backend_rbd_open(struct td_backend *be, const struct td_rbd_params *p, uint64_t create_size,
			bool read_only, uint64_t *size, char *msg, size_t msglen) td_nonnull(1, 2, 5, 6);

/* NBD through libnbd (drive_nbd.c). */
struct td_nbd_params {
	const char *uri;	  /* nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH */
	unsigned int connections; /* 1..16; more than 1 only when the server allows multi-conn */
};

/*
 * Connect to @p->uri. *@size is the export's size. FUA is used when the
 * server offers it, else a FUA write is followed by a flush.
 * Return: 0 or a negative errno, with one line in @msg on error.
 */
int td_backend_nbd_open(struct td_backend *be, const struct td_nbd_params *p, bool read_only,
			uint64_t *size, char *msg, size_t msglen) td_nonnull(1, 2, 4, 5);

#endif /* TAGDISK_BACKEND_H */
