/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * frontend.h - the FUSE front end: the disk file, served through the queue.
 *
 * The mount point holds one regular file, <mountpoint>/<name>, whose size is
 * the disk's. Every read, write, fsync and fallocate on it becomes a byte I/O
 * (tagdisk/bio.h) on the queue, and the FUSE reply is sent from the I/O's
 * completion, so the handlers return at once and the queue depth the engine
 * sees is the kernel's, not the number of FUSE threads.
 *
 * The disk file behaves like a block device: O_TRUNC is ignored, truncating
 * to another size fails with EPERM, writes at or past the end fail with
 * ENOSPC (a write crossing the end is cut short), reads past the end return
 * 0 bytes, fsync is a FLUSH (a barrier), close is not a flush, punching a
 * hole is a discard and zeroing a range is a write-zeroes. In read-only mode
 * opening for writing fails with EROFS.
 *
 * The operations are served by the classic transport (fuse_session.h: our
 * own multithreaded loop on libfuse's low-level API, which answers FUSE_OPEN
 * itself so the reply carries FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES)
 * or by FUSE over io_uring beside it (fuse_uring.h), with the same handlers
 * and move their data in buffers of a pool (bufpool.h: at most 28 MiB of
 * free buffers are kept after a burst; the rest is unmapped).
 *
 * Lifetime: create (mounts), start (INIT answered), run (serves until
 * stopped or unmounted), then the owner drains the queue, unmounts and
 * destroys.
 * LOCKING: internal; td_frontend_stop() may be called from any thread.
 */
#ifndef TAGDISK_FRONTEND_H
#define TAGDISK_FRONTEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/compiler.h"
#include "daemon/fuse_session.h"

struct td_queue;

struct td_frontend_params {
	struct td_queue *q;	       /* borrowed */
	const char *mountpoint;
	const char *name;	       /* the disk file's name */
	uint64_t size_bytes;
	uint32_t logical_block_size;
	bool read_only;
	bool allow_other;
	bool parallel_direct_writes;   /* set FOPEN_PARALLEL_DIRECT_WRITES (default true) */
	unsigned int max_threads;      /* FUSE threads at most */
	unsigned int max_background;   /* the kernel's async request limit */
	int image_fd;		       /* st_blocks, SEEK_DATA/HOLE; -1: none, all data */
	const char *const *fuse_opts;  /* -o options, in order */
	size_t nr_fuse_opts;
	enum td_fuse_transport transport; /* [disk] transport; zero: classic */
	_Atomic uint32_t *opens;	  /* counter of the disk file's opens; NULL: the front end's */
	bool adopt;			  /* serve adopt_fd, mounted before (fuse_session.h) */
	int adopt_fd;
	const void *adopt_init_in;
	size_t adopt_init_in_len;
};

struct td_frontend;

/*
 * Create the session and mount it. Return: the front end, or NULL with a
 * message in @err and a negative errno in *@errnum (the mount point is left
 * untouched on failure; -EOPNOTSUPP: transport uring cannot be had).
 */
struct td_frontend *td_frontend_create(const struct td_frontend_params *p, int *errnum, char *err,
				       size_t errlen) td_nonnull(1, 2, 3);

/*
 * Start serving and wait until FUSE_INIT is answered and the transport
 * settled. Return: 0, or a negative errno (-EOPNOTSUPP: transport uring was
 * asked for and the kernel did not give it); then stop and run to unwind.
 */
int td_frontend_start(struct td_frontend *fe) td_nonnull(1);

/*
 * Serve until td_frontend_stop() or an unmount. Returns after every FUSE
 * thread has exited; requests already handed to the queue may still be
 * completing. Return: 0 when stopped, 1 when the file system was unmounted
 * from outside, a negative errno on failure.
 */
int td_frontend_run(struct td_frontend *fe) td_nonnull(1);

/* Ask td_frontend_run() to stop receiving requests. Async-signal-unsafe; any thread. */
void td_frontend_stop(struct td_frontend *fe) td_nonnull(1);

/* Unmount (lazily, if busy). Idempotent. */
void td_frontend_unmount(struct td_frontend *fe) td_nonnull(1);

/* Free everything; the queue must be drained and the session unmounted. */
void td_frontend_destroy(struct td_frontend *fe) td_nonnull(1);

/* Return: the requests the kernel resent when the connection was adopted. */
uint64_t td_frontend_resent(struct td_frontend *fe) td_nonnull(1);

/* Leave the mount to a successor: unmount and destroy will not take it. */
void td_frontend_detach(struct td_frontend *fe) td_nonnull(1);

/* Return: the FUSE session (its fd and INIT for a successor: fuse_session.h). */
struct td_fuse_session *td_frontend_session(struct td_frontend *fe) td_nonnull(1);

/* Return: how many opens of the disk file are not yet released. */
unsigned int td_frontend_open_count(struct td_frontend *fe) td_nonnull(1);

/* Return: the number of FUSE threads running now, and the most ever running. */
unsigned int td_frontend_threads(struct td_frontend *fe, unsigned int *peak) td_nonnull(1);

/* Fill @st with the FUSE transport in use and, for uring, the requests each queue received. */
void td_frontend_transport_stats(struct td_frontend *fe, struct td_fuse_transport_stats *st)
	td_nonnull(1, 2);

#endif /* TAGDISK_FRONTEND_H */
