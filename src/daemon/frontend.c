// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * frontend.c - libfuse low-level operations and the session loop.
 *
 * Inodes: 1 is the mount point's root directory, 2 the disk file. Nothing
 * else exists and nothing can be created.
 *
 * Buffers. Every byte the disk file moves lives in a pool buffer:
 *   - receive buffers (class RECV, libfuse's bufsize: 1 MiB of payload plus a
 *     page of headers), one held by each FUSE thread while it reads;
 *   - data buffers in power-of-two classes from 4 KiB to 1 MiB, for reads
 *     and for writes small enough that copying beats keeping a 1 MiB buffer.
 * A write larger than STEAL_MIN keeps the receive buffer it arrived in:
 * the thread gives up ownership (tl_stolen) and takes a fresh buffer for
 * its next read. Freed buffers go back to their class's free list, which
 * keeps up to POOL_KEEP of them; only beyond that are they freed. So after
 * warm-up the I/O path allocates nothing.
 *
 * Threads. The loop starts with one thread and starts another whenever a
 * thread takes a request while no other is idle, up to max_threads; a
 * thread that finds FE_MAX_IDLE others idle when it finishes a
 * request ends, so a burst does not leave dozens of threads behind (each
 * one more for the kernel to wake). With worker threads in rq mode
 * handlers only block for back-pressure, so few threads run; in bio mode,
 * or with an inline drive, each in-flight I/O occupies a thread.
 *
 * Stopping. td_frontend_stop() sets a flag and interrupts threads blocked in
 * read(2) with SIGUSR1 (installed without SA_RESTART), repeating until every
 * thread has noticed. An unmount makes read(2) fail with ENODEV, which ends
 * the loop the same way.
 */
#define FUSE_USE_VERSION 312
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/list.h"
#include "common/lock.h"
#include "common/log.h"
#include "daemon/frontend.h"
#include "tagdisk/bio.h"
#include "tagdisk/queue.h"

#define ROOT_INO 1
#define DISK_INO 2
#define ATTR_TIMEOUT_S 1.0

#define MIN_CLASS_SHIFT 12 /* 4 KiB */
#define MAX_CLASS_SHIFT 20 /* 1 MiB */
#define NR_DATA_CLASSES (MAX_CLASS_SHIFT - MIN_CLASS_SHIFT + 1)
#define RECV_CLASS	NR_DATA_CLASSES
#define NR_CLASSES	(NR_DATA_CLASSES + 1)
#define POOL_KEEP	256	      /* free buffers kept per class */
#define STEAL_MIN	(64U << 10) /* writes this large keep their receive buffer */
#define THREAD_STACK	(512U << 10)
#define FE_MAX_IDLE	10	    /* idle FUSE threads kept; more of them exit */
/*
 * libfuse reads requests of up to its bufsize: 256 pages of payload plus a
 * page of headers (FUSE_MAX_MAX_PAGES and FUSE_BUFFER_HEADER_SIZE, private
 * to libfuse). Receive buffers must hold that much.
 */
#define LIBFUSE_MAX_PAGES   256
#define LIBFUSE_HEADER_SIZE 4096

/*
 * A pooled buffer. The data starts on a page boundary, so a 4 KiB read is one
 * page for the kernel to pin and copy, not two; this header sits right after
 * the data, in the same allocation.
 */
struct fe_buf {
	struct fe_buf *next_free;
	unsigned int cls;
	size_t cap;
	char *mem; /* cap bytes, page-aligned; free(mem) frees the buffer */
};

struct fe_pool {
	struct td_mutex lock;
	struct fe_buf *free[NR_CLASSES]; /* lock */
	unsigned int nr_free[NR_CLASSES];
	size_t recv_size;
};

enum fe_io_kind {
	FE_READ,
	FE_WRITE,
	FE_FSYNC,
	FE_FALLOCATE,
};

/* One FUSE request in the queue. */
struct fe_io {
	struct td_byte_io io;
	struct fe_io *next_free;
	struct td_frontend *fe;
	fuse_req_t req;
	enum fe_io_kind kind;
	struct fe_buf *buf;
};

struct fe_thread {
	struct td_list link; /* fe->threads, under fe->lock */
	pthread_t tid;
	bool done;
};

struct td_frontend {
	struct fuse_session *se;
	struct td_queue *q;
	char *mountpoint;
	char *name;
	uint64_t size;
	uint32_t lbs;
	bool read_only;
	bool parallel_direct_writes;
	unsigned int max_threads;
	unsigned int max_background;
	int image_fd;
	bool passthrough;
	bool mounted;
	uid_t uid;
	gid_t gid;

	struct fe_pool pool;
	struct td_mutex io_lock;
	struct fe_io *free_ios; /* io_lock */
	unsigned int nr_free_ios;

	struct td_mutex lock;
	struct td_cond exit_cond;
	struct td_list threads; /* lock */
	unsigned int nr_threads;
	unsigned int peak_threads;
	_Atomic unsigned int idle;
	_Atomic bool stopping;
	_Atomic unsigned int opens;
};

/* The receive buffer this thread is processing, and whether a handler kept it. */
static _Thread_local struct fe_buf *tl_rbuf;
static _Thread_local bool tl_stolen;

/* ---- buffer pool ---------------------------------------------------------------------- */

static unsigned int size_class(size_t size)
{
	unsigned int shift = MIN_CLASS_SHIFT;

	while (((size_t)1 << shift) < size)
		shift++;
	assert(shift <= MAX_CLASS_SHIFT);
	return shift - MIN_CLASS_SHIFT;
}

static struct fe_buf *pool_get(struct fe_pool *pool, unsigned int cls)
{
	struct fe_buf *b;

	td_mutex_lock(&pool->lock);
	b = pool->free[cls];
	if (b) {
		pool->free[cls] = b->next_free;
		pool->nr_free[cls]--;
	}
	td_mutex_unlock(&pool->lock);
	if (b)
		return b;

	size_t cap = cls == RECV_CLASS ? pool->recv_size : (size_t)1 << (cls + MIN_CLASS_SHIFT);
	char *mem;

	cap = TD_DIV_ROUND_UP(cap, _Alignof(struct fe_buf)) * _Alignof(struct fe_buf);
	if (posix_memalign((void **)&mem, 4096, cap + sizeof(*b)))
		return NULL;
	b = (struct fe_buf *)(mem + cap);
	b->cls = cls;
	b->cap = cap;
	b->mem = mem;
	return b;
}

static void pool_put(struct fe_pool *pool, struct fe_buf *b)
{
	if (!b)
		return;
	td_mutex_lock(&pool->lock);
	if (pool->nr_free[b->cls] < POOL_KEEP) {
		b->next_free = pool->free[b->cls];
		pool->free[b->cls] = b;
		pool->nr_free[b->cls]++;
		b = NULL;
	}
	td_mutex_unlock(&pool->lock);
	if (b)
		free(b->mem);
}

static void pool_destroy(struct fe_pool *pool)
{
	for (unsigned int c = 0; c < NR_CLASSES; c++) {
		while (pool->free[c]) {
			struct fe_buf *b = pool->free[c];

			pool->free[c] = b->next_free;
			free(b->mem);
		}
	}
	td_mutex_destroy(&pool->lock);
}

static struct fe_io *io_get(struct td_frontend *fe)
{
	struct fe_io *io;

	td_mutex_lock(&fe->io_lock);
	io = fe->free_ios;
	if (io) {
		fe->free_ios = io->next_free;
		fe->nr_free_ios--;
	}
	td_mutex_unlock(&fe->io_lock);
	if (!io)
		io = malloc(sizeof(*io));
	if (io) {
		memset(&io->io, 0, sizeof(io->io));
		io->fe = fe;
		io->buf = NULL;
	}
	return io;
}

static void io_put(struct td_frontend *fe, struct fe_io *io)
{
	pool_put(&fe->pool, io->buf);
	io->buf = NULL;
	td_mutex_lock(&fe->io_lock);
	if (fe->nr_free_ios < POOL_KEEP * 4) {
		io->next_free = fe->free_ios;
		fe->free_ios = io;
		fe->nr_free_ios++;
		io = NULL;
	}
	td_mutex_unlock(&fe->io_lock);
	free(io);
}

/* ---- completions: the replies ---------------------------------------------------------- */

static void fe_io_end(struct td_byte_io *bio_io, int err)
{
	struct fe_io *io = td_container_of(bio_io, struct fe_io, io);
	struct td_frontend *fe = io->fe;

	if (err)
		fuse_reply_err(io->req, -err);
	else if (io->kind == FE_READ)
		fuse_reply_buf(io->req, io->io.data, io->io.len);
	else if (io->kind == FE_WRITE)
		fuse_reply_write(io->req, io->io.len);
	else
		fuse_reply_err(io->req, 0);
	io_put(fe, io);
}

/* Start @io; on a synchronous failure reply with the error. */
static void fe_submit(struct td_frontend *fe, struct fe_io *io)
{
	io->io.end = fe_io_end;
	io->io.pid = (int32_t)fuse_req_ctx(io->req)->pid;
	int err = td_byte_io_submit(fe->q, &io->io);

	if (err) {
		fuse_reply_err(io->req, -err);
		io_put(fe, io);
	}
}

/* ---- attributes and names -------------------------------------------------------------- */

static void fill_attr(struct td_frontend *fe, fuse_ino_t ino, struct stat *st)
{
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

	/* Report the image's real allocation, so discards show up in du. */
	if (fe->image_fd >= 0 && fstat(fe->image_fd, &img) == 0) {
		st->st_blocks = img.st_blocks;
		st->st_atim = img.st_atim;
		st->st_mtim = img.st_mtim;
		st->st_ctim = img.st_ctim;
	}
}

static void fe_init(void *userdata, struct fuse_conn_info *conn)
{
	struct td_frontend *fe = userdata;

	conn->max_write = 1U << 20;
	conn->max_background = fe->max_background;
	conn->congestion_threshold = TD_MAX(fe->max_background * 3 / 4, 1U);
	/* Buffers must be memory we own: no splicing. */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= conn->capable & (FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_ASYNC_DIO |
				       FUSE_CAP_ASYNC_READ);
	td_info("fuse: max_write %u, max_background %u, congestion_threshold %u", conn->max_write,
		conn->max_background, conn->congestion_threshold);
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

/* Opens normally arrive in the session loop (open_direct); this is the fallback. */
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
	atomic_fetch_add(&fe->opens, 1);
	fuse_reply_open(req, fi);
}

static void fe_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);

	(void)ino, (void)fi;
	atomic_fetch_sub(&fe->opens, 1);
	fuse_reply_err(req, 0);
}

/* ---- pass-through: the engine switched off (benchmark ceiling) --------------------------- */

static void pt_read(struct td_frontend *fe, fuse_req_t req, size_t size, uint64_t off)
{
	struct fe_buf *b = pool_get(&fe->pool, size_class(size));
	ssize_t n;

	if (!b) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	do
		n = pread(fe->image_fd, b->mem, size, (off_t)off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, b->mem, (size_t)n);
	pool_put(&fe->pool, b);
}

static void pt_write(struct td_frontend *fe, fuse_req_t req, const char *buf, size_t size,
		     uint64_t off)
{
	ssize_t n;

	do
		n = pwrite(fe->image_fd, buf, size, (off_t)off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

static void fe_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct fe_io *io;

	(void)fi;
	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* Past the end reads nothing; across it reads up to the end. */
	if ((uint64_t)off >= fe->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size = (size_t)TD_MIN((uint64_t)size, fe->size - (uint64_t)off);
	if (fe->passthrough) {
		pt_read(fe, req, size, (uint64_t)off);
		return;
	}
	io = io_get(fe);
	if (!io || !(io->buf = pool_get(&fe->pool, size_class(size)))) {
		if (io)
			io_put(fe, io);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	io->req = req;
	io->kind = FE_READ;
	io->io.op = TD_OP_READ;
	io->io.data = io->buf->mem;
	io->io.len = size;
	io->io.off = (uint64_t)off;
	fe_submit(fe, io);
}

static void fe_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct fe_io *io;

	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (fe->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (size == 0) {
		fuse_reply_write(req, 0);
		return;
	}
	/* Like a block device: no room at the end, and a write across it is cut short. */
	if ((uint64_t)off >= fe->size) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	size = (size_t)TD_MIN((uint64_t)size, fe->size - (uint64_t)off);
	if (fe->passthrough) {
		pt_write(fe, req, buf, size, (uint64_t)off);
		return;
	}
	io = io_get(fe);
	if (!io) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct fe_buf *rb = tl_rbuf;

	if (size >= STEAL_MIN && rb && buf >= rb->mem && buf + size <= rb->mem + rb->cap) {
		/* Zero copy: the request keeps the buffer the data arrived in. */
		io->buf = rb;
		tl_stolen = true;
		io->io.data = (void *)buf;
	} else {
		io->buf = pool_get(&fe->pool, size_class(size));
		if (!io->buf) {
			io_put(fe, io);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(io->buf->mem, buf, size);
		io->io.data = io->buf->mem;
	}
	io->req = req;
	io->kind = FE_WRITE;
	io->io.op = TD_OP_WRITE;
	io->io.len = size;
	io->io.off = (uint64_t)off;
	/* O_SYNC / O_DSYNC writers ask for write-through: FUA. */
	if (fi && (fi->flags & O_DSYNC))
		io->io.flags |= TD_BIO_FUA;
	fe_submit(fe, io);
}

static void fe_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	/* close(2) is not a cache flush for a disk. */
	(void)ino, (void)fi;
	fuse_reply_err(req, 0);
}

static void fe_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	struct fe_io *io;

	(void)datasync, (void)fi;
	if (ino != DISK_INO) {
		fuse_reply_err(req, 0);
		return;
	}
	if (fe->passthrough) {
		fuse_reply_err(req, fdatasync(fe->image_fd) ? errno : 0);
		return;
	}
	io = io_get(fe);
	if (!io) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	io->req = req;
	io->kind = FE_FSYNC;
	io->io.op = TD_OP_FLUSH;
	fe_submit(fe, io);
}

static void fe_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);
	enum td_op op;
	struct fe_io *io;

	(void)fi;
	if (ino != DISK_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (fe->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	uint64_t off = (uint64_t)offset;
	uint64_t len = (uint64_t)length;

	if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)) {
		op = TD_OP_DISCARD;
	} else if ((mode & ~FALLOC_FL_KEEP_SIZE) == FALLOC_FL_ZERO_RANGE) {
		op = TD_OP_WRITE_ZEROES;
	} else if (mode == 0 || mode == FALLOC_FL_KEEP_SIZE) {
		/* Every byte of a disk is already allocated; growing it is not possible. */
		fuse_reply_err(req, off + len > fe->size && mode == 0 ? ENOSPC : 0);
		return;
	} else {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (off >= fe->size) {
		fuse_reply_err(req, (mode & FALLOC_FL_KEEP_SIZE) ? 0 : ENOSPC);
		return;
	}
	if (len > fe->size - off) {
		if (!(mode & FALLOC_FL_KEEP_SIZE)) {
			fuse_reply_err(req, ENOSPC);
			return;
		}
		len = fe->size - off;
	}
	if (fe->passthrough) {
		int m = op == TD_OP_DISCARD ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
					    : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;

		fuse_reply_err(req, fallocate(fe->image_fd, m, (off_t)off, (off_t)len) ? errno : 0);
		return;
	}
	io = io_get(fe);
	if (!io) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	io->req = req;
	io->kind = FE_FALLOCATE;
	io->io.op = op;
	io->io.off = off;
	io->io.len = len;
	fe_submit(fe, io);
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

static void fe_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct td_frontend *fe = fuse_req_userdata(req);

	(void)fi;
	if (ino != DISK_INO || fe->image_fd < 0 || (whence != SEEK_DATA && whence != SEEK_HOLE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* Holes of the disk are holes of the image (what discards made). */
	off_t r = lseek(fe->image_fd, off, whence);

	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, TD_MIN(r, (off_t)fe->size));
}

static const struct fuse_lowlevel_ops fe_ops = {
	.init = fe_init,
	.lookup = fe_lookup,
	.forget = fe_forget,
	.getattr = fe_getattr,
	.setattr = fe_setattr,
	.open = fe_open,
	.read = fe_read,
	.write = fe_write,
	.flush = fe_flush,
	.release = fe_release,
	.fsync = fe_fsync,
	.opendir = fe_opendir,
	.readdir = fe_readdir,
	.releasedir = fe_releasedir,
	.statfs = fe_statfs,
	.fallocate = fe_fallocate,
	.lseek = fe_lseek,
};

/* ---- the session loop ------------------------------------------------------------------ */

/* Write a raw reply to the kernel. Return: 0 or a negative errno. */
static int send_raw(struct td_frontend *fe, uint64_t unique, int error, const void *arg,
		    size_t arg_len)
{
	struct fuse_out_header out = {
		.len = (uint32_t)(sizeof(out) + (error ? 0 : arg_len)),
		.error = -error,
		.unique = unique,
	};
	struct iovec iov[2] = { { &out, sizeof(out) }, { (void *)arg, arg_len } };
	ssize_t n = writev(fuse_session_fd(fe->se), iov, error ? 1 : 2);

	return n < 0 ? -errno : 0;
}

/*
 * Answer FUSE_OPEN ourselves: the reply's open_flags get FOPEN_DIRECT_IO and
 * FOPEN_PARALLEL_DIRECT_WRITES. libfuse keeps no per-open state, so nothing
 * is lost by bypassing it for this one opcode.
 */
static void open_direct(struct td_frontend *fe, const struct fuse_in_header *in, size_t len)
{
	const struct fuse_open_in *arg = (const void *)(in + 1);
	struct fuse_open_out out = { 0 };
	int error = 0;

	if (len < sizeof(*in) + sizeof(*arg))
		error = EIO;
	else if (in->nodeid != DISK_INO)
		error = in->nodeid == ROOT_INO ? EISDIR : ENOENT;
	else if (fe->read_only && (arg->flags & O_ACCMODE) != O_RDONLY)
		error = EROFS;
	if (!error) {
		out.open_flags = FOPEN_DIRECT_IO;
		if (fe->parallel_direct_writes)
			out.open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
		atomic_fetch_add(&fe->opens, 1);
	}
	if (send_raw(fe, in->unique, error, &out, sizeof(out)) && !error)
		atomic_fetch_sub(&fe->opens, 1); /* the opener is gone */
}

static void *loop_thread(void *arg);

/* Start one more thread. Call with fe->lock held. */
static void spawn_thread_locked(struct td_frontend *fe)
{
	struct fe_thread *t = calloc(1, sizeof(*t));
	pthread_attr_t attr;

	if (!t)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	/* Counted idle before it exists: it may take a request before we return. */
	atomic_fetch_add(&fe->idle, 1);
	if (pthread_create(&t->tid, &attr, loop_thread, fe)) {
		atomic_fetch_sub(&fe->idle, 1);
		td_warnx("fuse: cannot start another thread (%u running)", fe->nr_threads);
		free(t);
	} else {
		td_list_add_tail(&t->link, &fe->threads);
		fe->nr_threads++;
		if (fe->nr_threads > fe->peak_threads)
			fe->peak_threads = fe->nr_threads;
	}
	pthread_attr_destroy(&attr);
}

static struct fe_thread *self_locked(struct td_frontend *fe)
{
	struct td_list *pos;

	td_list_for_each(pos, &fe->threads) {
		struct fe_thread *t = td_list_entry(pos, struct fe_thread, link);

		if (pthread_equal(t->tid, pthread_self()))
			return t;
	}
	return NULL;
}

static void *loop_thread(void *arg)
{
	struct td_frontend *fe = arg;
	struct fe_buf *rb = NULL;
	bool counted = true; /* counted in fe->idle (spawn_thread_locked counted us) */
	sigset_t set;

	td_thread_name("td-fuse");
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);

	while (!atomic_load(&fe->stopping) && !fuse_session_exited(fe->se)) {
		if (!rb)
			rb = pool_get(&fe->pool, RECV_CLASS);
		if (!rb) {
			td_err("fuse: out of memory for a receive buffer");
			break;
		}
		struct fuse_buf fbuf = { .mem = rb->mem, .size = rb->cap };
		int res = fuse_session_receive_buf(fe->se, &fbuf);

		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			if (res < 0)
				td_warnx("fuse: reading the device: %s", strerror(-res));
			break;
		}
		/* Busy now: make sure someone else is listening. */
		if (atomic_fetch_sub(&fe->idle, 1) == 1) {
			td_mutex_lock(&fe->lock);
			if (fe->nr_threads < fe->max_threads && !atomic_load(&fe->stopping))
				spawn_thread_locked(fe);
			td_mutex_unlock(&fe->lock);
		}
		const struct fuse_in_header *in = (const void *)fbuf.mem;

		if (in->opcode == FUSE_OPEN) {
			open_direct(fe, in, (size_t)res);
		} else {
			tl_rbuf = rb;
			tl_stolen = false;
			fuse_session_process_buf(fe->se, &fbuf);
			tl_rbuf = NULL;
			if (tl_stolen)
				rb = NULL;
		}
		/*
		 * Idle again, unless FE_MAX_IDLE threads already wait for work: then
		 * this one ends without ever counting as idle (counting it first would
		 * let threads on their way out make others leave too, down to none).
		 */
		unsigned int idle = atomic_load(&fe->idle);

		do {
			if (idle >= FE_MAX_IDLE) {
				counted = false;
				break;
			}
		} while (!atomic_compare_exchange_weak(&fe->idle, &idle, idle + 1));
		if (!counted)
			break;
	}
	pool_put(&fe->pool, rb);

	td_mutex_lock(&fe->lock);
	if (counted)
		atomic_fetch_sub(&fe->idle, 1);
	struct fe_thread *self = self_locked(fe);

	if (self)
		self->done = true;
	td_cond_broadcast(&fe->exit_cond);
	td_mutex_unlock(&fe->lock);
	return NULL;
}

static void sigusr1_handler(int sig)
{
	(void)sig; /* only here to interrupt read(2) */
}

int td_frontend_run(struct td_frontend *fe)
{
	struct sigaction sa = { .sa_handler = sigusr1_handler };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART */

	td_mutex_lock(&fe->lock);
	spawn_thread_locked(fe);
	if (!fe->nr_threads) {
		td_mutex_unlock(&fe->lock);
		return -EAGAIN;
	}
	for (;;) {
		/* Reap finished threads; stop when none is left. */
		struct td_list *pos, *n;

		td_list_for_each_safe(pos, n, &fe->threads) {
			struct fe_thread *t = td_list_entry(pos, struct fe_thread, link);

			if (!t->done)
				continue;
			td_list_del(&t->link);
			fe->nr_threads--;
			td_mutex_unlock(&fe->lock);
			pthread_join(t->tid, NULL);
			free(t);
			td_mutex_lock(&fe->lock);
		}
		if (!fe->nr_threads)
			break;
		bool stopping = atomic_load(&fe->stopping) || fuse_session_exited(fe->se);

		if (stopping) {
			/* Some may have been between the flag check and read(2): keep knocking. */
			td_list_for_each(pos, &fe->threads) {
				struct fe_thread *t = td_list_entry(pos, struct fe_thread, link);

				if (!t->done)
					pthread_kill(t->tid, SIGUSR1);
			}
			td_cond_wait_until(&fe->exit_cond, &fe->lock,
					   td_now_ns() + 20 * TD_NSEC_PER_MSEC);
		} else {
			td_cond_wait(&fe->exit_cond, &fe->lock);
		}
	}
	td_mutex_unlock(&fe->lock);
	return atomic_load(&fe->stopping) ? 0 : 1;
}

void td_frontend_stop(struct td_frontend *fe)
{
	atomic_store(&fe->stopping, true);
	td_mutex_lock(&fe->lock);
	td_cond_broadcast(&fe->exit_cond);
	td_mutex_unlock(&fe->lock);
}

void td_frontend_unmount(struct td_frontend *fe)
{
	if (fe->mounted) {
		fuse_session_unmount(fe->se);
		fe->mounted = false;
	}
}

unsigned int td_frontend_open_count(struct td_frontend *fe)
{
	return atomic_load(&fe->opens);
}

unsigned int td_frontend_threads(struct td_frontend *fe, unsigned int *peak)
{
	td_mutex_lock(&fe->lock);
	unsigned int n = fe->nr_threads;

	if (peak)
		*peak = fe->peak_threads;
	td_mutex_unlock(&fe->lock);
	return n;
}

/* ---- creation -------------------------------------------------------------------------- */

struct td_frontend *td_frontend_create(const struct td_frontend_params *p, char *err,
				       size_t errlen)
{
	struct td_frontend *fe = calloc(1, sizeof(*fe));
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char fsname[300];

	if (!fe) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	fe->q = p->q;
	fe->mountpoint = strdup(p->mountpoint);
	fe->name = strdup(p->name);
	fe->size = p->size_bytes;
	fe->lbs = p->logical_block_size;
	fe->read_only = p->read_only;
	fe->parallel_direct_writes = p->parallel_direct_writes;
	fe->max_threads = TD_MAX(p->max_threads, 2U);
	fe->max_background = TD_MAX(p->max_background, 12U);
	fe->image_fd = p->image_fd;
	fe->passthrough = p->passthrough && p->image_fd >= 0;
	fe->uid = getuid();
	fe->gid = getgid();
	td_mutex_init(&fe->pool.lock);
	fe->pool.recv_size = LIBFUSE_MAX_PAGES * (size_t)getpagesize() + LIBFUSE_HEADER_SIZE;
	td_mutex_init(&fe->io_lock);
	td_mutex_init(&fe->lock);
	td_cond_init(&fe->exit_cond);
	td_list_init(&fe->threads);
	if (!fe->mountpoint || !fe->name) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}

	snprintf(fsname, sizeof(fsname), "-ofsname=tagdisk:%s,subtype=tagdisk,default_permissions",
		 p->name);
	if (fuse_opt_add_arg(&args, "tagdiskd") || fuse_opt_add_arg(&args, fsname) ||
	    (p->allow_other && fuse_opt_add_arg(&args, "-oallow_other"))) {
		snprintf(err, errlen, "out of memory");
		goto out_free_args;
	}
	for (size_t i = 0; i < p->nr_fuse_opts; i++) {
		if (fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, p->fuse_opts[i])) {
			snprintf(err, errlen, "out of memory");
			goto out_free_args;
		}
	}
	fe->se = fuse_session_new(&args, &fe_ops, sizeof(fe_ops), fe);
	if (!fe->se) {
		snprintf(err, errlen, "cannot create the FUSE session (bad -o option?)");
		goto out_free_args;
	}
	if (fuse_session_mount(fe->se, fe->mountpoint)) {
		snprintf(err, errlen, "cannot mount on \"%s\"", fe->mountpoint);
		goto out_destroy_session;
	}
	fe->mounted = true;
	fuse_opt_free_args(&args);
	return fe;

out_destroy_session:
	fuse_session_destroy(fe->se);
out_free_args:
	fuse_opt_free_args(&args);
out_free:
	td_cond_destroy(&fe->exit_cond);
	td_mutex_destroy(&fe->lock);
	td_mutex_destroy(&fe->io_lock);
	td_mutex_destroy(&fe->pool.lock);
	free(fe->mountpoint);
	free(fe->name);
	free(fe);
	return NULL;
}

void td_frontend_destroy(struct td_frontend *fe)
{
	td_frontend_unmount(fe);
	fuse_session_destroy(fe->se);
	while (fe->free_ios) {
		struct fe_io *io = fe->free_ios;

		fe->free_ios = io->next_free;
		free(io);
	}
	pool_destroy(&fe->pool);
	td_cond_destroy(&fe->exit_cond);
	td_mutex_destroy(&fe->lock);
	td_mutex_destroy(&fe->io_lock);
	free(fe->mountpoint);
	free(fe->name);
	free(fe);
}
