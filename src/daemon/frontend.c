// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * frontend.c - the disk file's FUSE operations: tagdiskd's front end.
 *
 * Inodes: 1 is the mount point's root directory, 2 the disk file. Nothing
 * else exists and nothing can be created.
 *
 * Names, attributes, opens and the directory are answered here; read,
 * write, fsync and fallocate become I/O on the queue in frontend_io.c.
 * The session loop, its threads and the raw FUSE_OPEN reply are the
 * transport's (fuse_session.c); this file answers FUSE_OPEN through
 * fe_open_raw(), with FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES.
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "common/lock.h"
#include "daemon/bufpool.h"
#include "daemon/frontend.h"
#include "daemon/fuse_session.h"
#include "frontend_int.h"
#include "tagdisk/drive.h"
#include "tagdisk/queue.h"
#include "tagdisk/wcache.h"

#define ATTR_TIMEOUT_S 1.0

/* ---- attributes and names -------------------------------------------------------------- */

/*
 * The drive's volatile write cache, or NULL. What it holds reads back whatever the image
 * holds there, so SEEK_DATA, SEEK_HOLE and st_blocks count it as data: a sparse-aware copy
 * of the disk (cp --sparse, qemu-img convert) must not skip it. Ask it before the image: a
 * sector leaves the cache only once the image has it.
 */
static struct td_wcache *fe_wcache(struct td_frontend *fe)
{
	return fe->q ? td_drive_wcache(td_queue_drive(fe->q)) : NULL;
}

static void fill_attr(struct td_frontend *fe, fuse_ino_t ino, struct stat *st)
{
	struct td_wcache *wc;
	struct td_wcache_stats cs = { 0 };

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fe->uid;
	st->st_gid = fe->gid;
	if (ino == ROOT_INO) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return;
	}
	st->st_mode = S_IFREG | (fe->read_only ? 0440 : 0660);
	st->st_nlink = 1;
	st->st_size = (off_t)fe->size;
	st->st_blksize = (blksize_t)fe->lbs;
	st->st_blocks = (blkcnt_t)(fe->size >> TD_SECTOR_SHIFT);

	struct stat img;

	wc = fe_wcache(fe);
	if (wc)
		td_wcache_get_stats(wc, &cs);
	/*
	 * Report the image's real allocation, so discards show up in du, plus what the cache
	 * holds (perhaps counted twice, never missed: a copy must not think it sparser).
	 * Without an image file (a network backend) the whole size counts as allocated.
	 */
	if (fe->image_fd >= 0 && fstat(fe->image_fd, &img) == 0) {
		blkcnt_t cached = (blkcnt_t)(cs.cached_bytes >> TD_SECTOR_SHIFT);

		st->st_blocks = TD_MAX(img.st_blocks, TD_MIN(img.st_blocks + cached,
							     (blkcnt_t)(fe->size >> TD_SECTOR_SHIFT)));
		st->st_atim = img.st_atim;
		st->st_mtim = img.st_mtim;
		st->st_ctim = img.st_ctim;
	}
}

static void fe_init(void *userdata, struct fuse_conn_info *conn)
{
	/* The transport set the limits; here: the disk's own wishes. */
	(void)userdata;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= conn->capable & (FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_ASYNC_DIO |
				       FUSE_CAP_ASYNC_READ);
}

static void fe_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct fuse_entry_param e;

	if (parent != ROOT_INO || strcmp(name, fe->name) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = DISK_INO;
	e.attr_timeout = ATTR_TIMEOUT_S;
	e.entry_timeout = ATTR_TIMEOUT_S;
	fill_attr(fe, DISK_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void fe_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino, (void)nlookup;
	fuse_reply_none(req);
}

static void fe_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct stat st;

	(void)fi;
	if (ino != ROOT_INO && ino != DISK_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(fe, ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT_S);
}

static void fe_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct stat st;

	(void)fi;
	if (ino != DISK_INO) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* A disk's size is fixed: truncating to its own size is the only truncate that works. */
	if ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size != fe->size) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* Mode and ownership are the daemon's; times follow the image. Both are accepted and ignored. */
	fill_attr(fe, ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT_S);
}

/* Opens normally arrive through the transport (fe_open_raw); this is the fallback. */
static void fe_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);

	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (fe->read_only && (fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->direct_io = 1;
	fi->keep_cache = 0;
	atomic_fetch_add(fe->opens, 1);
	fuse_reply_open(req, fi);
}

/*
 * One open less. Never below zero: an open made under a daemon that died
 * before recording it may still be released to its successor.
 */
static void release_open(struct td_frontend *fe)
{
	uint32_t n = atomic_load(fe->opens);

	while (n && !atomic_compare_exchange_weak(fe->opens, &n, n - 1))
		;
}

static void fe_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);

	(void)ino, (void)fi;
	release_open(fe);
	fuse_reply_err(req, 0);
}

static void fe_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close(2) is not a cache flush for a disk. */
	(void)ino, (void)fi;
	fuse_reply_err(req, 0);
}

static void fe_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

static void fe_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	char buf[1024];
	size_t used = 0;
	struct stat st;
	const char *names[] = { ".", "..", fe->name };
	const fuse_ino_t inos[] = { ROOT_INO, ROOT_INO, DISK_INO };

	(void)fi;
	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	size = TD_MIN(size, sizeof(buf));
	for (off_t i = off; i < 3; i++) {
		memset(&st, 0, sizeof(st));
		st.st_ino = inos[i];
		st.st_mode = i < 2 ? S_IFDIR : S_IFREG;
		size_t n = fuse_add_direntry(req, buf + used, size - used, names[i], &st, i + 1);

		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

static void fe_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	fuse_reply_err(req, 0);
}

static void fe_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = fe->lbs;
	sv.f_frsize = fe->lbs;
	sv.f_blocks = fe->size / fe->lbs;
	sv.f_files = 1;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

/*
 * SEEK_DATA / SEEK_HOLE on the disk: data is what the image holds (discards punch holes in
 * it) and what the write cache holds (fe_wcache()). Without an image file (a network
 * backend) nothing tells where holes are: the whole disk is data, as on a device without
 * discard tracking. Return: the offset or a negative errno.
 */
static off_t disk_seek(struct td_frontend *fe, off_t off, int whence)
{
	struct td_wcache *wc = fe_wcache(fe);
	off_t size = (off_t)fe->size;
	uint64_t start, end;
	off_t r;

	if (off < 0 || off >= size)
		return -ENXIO;
	if (fe->image_fd < 0)
		return whence == SEEK_DATA ? off : size;
	if (whence == SEEK_DATA) {
		bool cached = wc && td_wcache_next_cached(wc, (uint64_t)off, &start, &end);

		r = lseek(fe->image_fd, off, SEEK_DATA);
		if (r < 0 && errno != ENXIO)
			return -errno;
		if (cached && (r < 0 || TD_MAX((off_t)start, off) < r))
			r = TD_MAX((off_t)start, off);
		return r < 0 || r >= size ? -ENXIO : r;
	}
	/* A hole of the disk is a hole of the image the cache holds nothing of. */
	for (;;) {
		if (wc && td_wcache_next_cached(wc, (uint64_t)off, &start, &end) &&
		    start <= (uint64_t)off) {
			off = (off_t)end;
			if (off >= size)
				return size;
			continue;
		}
		r = lseek(fe->image_fd, off, SEEK_HOLE);
		if (r < 0)
			return errno == ENXIO ? off : -errno;
		if (r >= size)
			return size;
		if (r == off)
			return off;
		off = r;
	}
}

static void fe_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);

	(void)fi;
	if (ino != DISK_INO || (whence != SEEK_DATA && whence != SEEK_HOLE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	off_t r = disk_seek(fe, off, whence);

	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else
		fuse_reply_lseek(req, r);
}

static const struct fuse_lowlevel_ops fe_ops = {
	.init = fe_init,
	.lookup = fe_lookup,
	.forget = fe_forget,
	.getattr = fe_getattr,
	.setattr = fe_setattr,
	.open = fe_open,
	.read = td_frontend_io_read,
	.write = td_frontend_io_write,
	.flush = fe_flush,
	.release = fe_release,
	.fsync = td_frontend_io_fsync,
	.opendir = fe_opendir,
	.readdir = fe_readdir,
	.releasedir = fe_releasedir,
	.statfs = fe_statfs,
	.fallocate = td_frontend_io_fallocate,
	.lseek = fe_lseek,
};

/* ---- FUSE_OPEN, answered through the transport ----------------------------------------- */

/*
 * The reply carries FOPEN_DIRECT_IO (every I/O reaches the queue) and
 * FOPEN_PARALLEL_DIRECT_WRITES (without it the kernel serialises synchronous
 * direct writers on the inode), which fe_open cannot ask libfuse 3.14 for.
 */
static int fe_open_raw(void *userdata, uint64_t nodeid, uint32_t flags, uint32_t *open_flags)
{
	struct td_frontend *fe = userdata;

	if (nodeid != DISK_INO)
		return nodeid == ROOT_INO ? EISDIR : ENOENT;
	if (fe->read_only && (flags & O_ACCMODE) != O_RDONLY)
		return EROFS;
	*open_flags = FOPEN_DIRECT_IO;
	if (fe->parallel_direct_writes)
		*open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
	/* Counted before the reply: the release may follow it at once. */
	atomic_fetch_add(fe->opens, 1);
	return 0;
}

static void fe_open_unsent(void *userdata, uint64_t nodeid)
{
	struct td_frontend *fe = userdata;

	(void)nodeid;
	release_open(fe); /* the opener is gone */
}

static const struct td_fuse_ops fe_fuse_ops = {
	.ll = &fe_ops,
	.open = fe_open_raw,
	.open_unsent = fe_open_unsent,
};

/* ---- the front end's life -------------------------------------------------------------- */

int td_frontend_start(struct td_frontend *fe)
{
	int ret = td_fuse_session_start(fe->sess);

	return ret ? ret : td_fuse_session_wait_ready(fe->sess);
}

int td_frontend_run(struct td_frontend *fe)
{
	return td_fuse_session_run(fe->sess);
}

void td_frontend_stop(struct td_frontend *fe)
{
	td_fuse_session_stop(fe->sess);
}

void td_frontend_unmount(struct td_frontend *fe)
{
	td_fuse_session_unmount(fe->sess);
}

uint64_t td_frontend_resent(struct td_frontend *fe)
{
	return td_fuse_session_resent(fe->sess);
}

void td_frontend_detach(struct td_frontend *fe)
{
	td_fuse_session_detach(fe->sess);
}

struct td_fuse_session *td_frontend_session(struct td_frontend *fe)
{
	return fe->sess;
}

unsigned int td_frontend_open_count(struct td_frontend *fe)
{
	return atomic_load(fe->opens);
}

unsigned int td_frontend_threads(struct td_frontend *fe, unsigned int *peak)
{
	return td_fuse_session_threads(fe->sess, peak);
}

void td_frontend_transport_stats(struct td_frontend *fe, struct td_fuse_transport_stats *st)
{
	td_fuse_session_transport_stats(fe->sess, st);
}

struct td_frontend *td_frontend_create(const struct td_frontend_params *p, int *errnum, char *err,
				       size_t errlen)
{
	/* Aligned: the fe_io free lists are on lines of their own. */
	struct td_frontend *fe = aligned_alloc(_Alignof(struct td_frontend), sizeof(*fe));
	char *fsname = NULL;

	*errnum = -ENOMEM;
	if (!fe) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(fe, 0, sizeof(*fe));
	fe->q = p->q;
	fe->name = strdup(p->name);
	fe->size = p->size_bytes;
	fe->lbs = p->logical_block_size;
	fe->read_only = p->read_only;
	fe->parallel_direct_writes = p->parallel_direct_writes;
	fe->image_fd = p->image_fd;
	fe->opens = p->opens ? p->opens : &fe->own_opens;
	fe->uid = getuid();
	fe->gid = getgid();
	for (unsigned int i = 0; i < TD_PCPU_SHARDS; i++)
		td_mutex_init(&fe->ios[i].lock);
	fe->pool = td_bufpool_create(td_fuse_recv_size());
	if (!fe->name || !fe->pool || asprintf(&fsname, "tagdisk:%s", p->name) < 0) {
		fsname = NULL; /* asprintf leaves it undefined on failure */
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}

	struct td_fuse_session_params sp = {
		.mountpoint = p->mountpoint,
		.fsname = fsname,
		.subtype = "tagdisk",
		.allow_other = p->allow_other,
		.fuse_opts = p->fuse_opts,
		.nr_fuse_opts = p->nr_fuse_opts,
		.max_threads = p->max_threads,
		.max_background = p->max_background,
		.ops = &fe_fuse_ops,
		.userdata = fe,
		.pool = fe->pool,
		.transport = p->transport,
		/* bio mode and an inline drive do the I/O in the handler's thread. */
		.blocking_handlers = p->q && (td_queue_mode(p->q) == TD_MODE_BIO ||
					      td_drive_is_inline(td_queue_drive(p->q))),
		.adopt = p->adopt,
		.adopt_fd = p->adopt_fd,
		.adopt_init_in = p->adopt_init_in,
		.adopt_init_in_len = p->adopt_init_in_len,
	};

	fe->sess = td_fuse_session_create(&sp, errnum, err, errlen);
	if (!fe->sess)
		goto out_free;
	free(fsname);
	return fe;

out_free:
	free(fsname);
	if (fe->pool)
		td_bufpool_destroy(fe->pool);
	for (unsigned int i = 0; i < TD_PCPU_SHARDS; i++)
		td_mutex_destroy(&fe->ios[i].lock);
	free(fe->name);
	free(fe);
	return NULL;
}

void td_frontend_destroy(struct td_frontend *fe)
{
	td_fuse_session_destroy(fe->sess);
	td_frontend_io_free_all(fe);
	td_bufpool_destroy(fe->pool);
	for (unsigned int i = 0; i < TD_PCPU_SHARDS; i++)
		td_mutex_destroy(&fe->ios[i].lock);
	free(fe->name);
	free(fe);
}
