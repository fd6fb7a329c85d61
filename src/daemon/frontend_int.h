/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * frontend_int.h - what the front end's two files share: the front end
 * itself, its inode numbers, and the data path's handlers (frontend_io.c)
 * for the operations table (frontend.c).
 *
 * LOCKING: the fields are set at creation and only read afterwards, except
 * the fe_io free lists (each under its own lock) and the open count (atomic).
 */
#ifndef TAGDISK_FRONTEND_INT_H
#define TAGDISK_FRONTEND_INT_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/compiler.h"
#include "common/lock.h"
#include "common/pcpu.h"

#define ROOT_INO 1 /* the mount point */
#define DISK_INO 2 /* the disk file */

struct fe_io;
struct td_bufpool;

/*
 * A free list of fe_io for the threads of one CPU: on a line of its own, so
 * that the ring threads of two CPUs do not pass one lock's line back and
 * forth for every request.
 */
struct fe_io_cache {
	struct td_mutex lock;
	struct fe_io *head; /* lock */
	unsigned int nr;    /* lock */
} td_cacheline_aligned;

struct td_fuse_session;
struct td_queue;

/* One served disk file: made by td_frontend_create(), freed by td_frontend_destroy(). */
struct td_frontend {
	struct td_fuse_session *sess;
	struct td_bufpool *pool;
	struct td_queue *q;
	char *name;
	uint64_t size;
	uint32_t lbs;
	bool read_only;
	bool parallel_direct_writes;
	int image_fd;
	uid_t uid;
	gid_t gid;

	struct fe_io_cache ios[TD_PCPU_SHARDS]; /* by td_pcpu_index() */

	/*
	 * Opens of the disk file not yet released: own_opens, or the counter in
	 * the takeover record (takeover.h), which outlives this daemon.
	 */
	_Atomic uint32_t *opens;
	_Atomic uint32_t own_opens;
};

/* The disk file's read, write, fsync and fallocate operations (struct fuse_lowlevel_ops). */
void td_frontend_io_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi);
void td_frontend_io_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
			  off_t off, struct fuse_file_info *fi);
void td_frontend_io_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			  struct fuse_file_info *fi);
void td_frontend_io_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
			      off_t length, struct fuse_file_info *fi);

/* Free the recycled fe_io structures (at destruction, once no I/O is left). */
void td_frontend_io_free_all(struct td_frontend *fe) td_nonnull(1);

#endif /* TAGDISK_FRONTEND_INT_H */
