// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * passthrough.c - tagdisk's FUSE transport with the engine switched off.
 *
 * The ceiling `make bench` measures tagdisk against: the same session loop
 * and threads (daemon/fuse_session.h), buffer pool, INIT settings and open
 * flags (FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES) as tagdiskd, and a
 * disk file of the image's size, but its own operations: every request is
 * served by pread/pwrite/fdatasync/fallocate on the image in the FUSE thread
 * that received it, and answered at once. Only what fio on the disk file
 * needs is here (no read-only mode, no size checks beyond the end of the
 * disk). Not installed; benchmarks only.
 *
 *   tagdisk-passthrough -f --image IMAGE --mount DIR [--socket IGNORED] [-o OPT]...
 */
#define FUSE_USE_VERSION 312
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/bufpool.h"
#include "daemon/fuse_session.h"

#define ROOT_INO       1
#define DISK_INO       2
#define ATTR_TIMEOUT_S 1.0
#define DISK_NAME      "disk"
#define MAX_FUSE_OPTS  16

struct pt {
	int fd;
	uint64_t size;
	struct td_bufpool *pool;
};

static void pt_fill_attr(struct pt *pt, fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	if (ino == ROOT_INO) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return;
	}
	st->st_mode = S_IFREG | 0660;
	st->st_nlink = 1;
	st->st_size = (off_t)pt->size;
	st->st_blksize = 512;
	st->st_blocks = (blkcnt_t)(pt->size / 512);
}

static void pt_init(void *userdata, struct fuse_conn_info *conn)
{
	/* As tagdiskd's front end asks (the transport set the limits). */
	(void)userdata;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want |= conn->capable & (FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_ASYNC_DIO |
				       FUSE_CAP_ASYNC_READ);
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .ino = DISK_INO };

	if (parent != ROOT_INO || strcmp(name, DISK_NAME) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.attr_timeout = ATTR_TIMEOUT_S;
	e.entry_timeout = ATTR_TIMEOUT_S;
	pt_fill_attr(fuse_req_userdata(req), DISK_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino, (void)nlookup;
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	if (ino != ROOT_INO && ino != DISK_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	pt_fill_attr(fuse_req_userdata(req), ino, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT_S);
}

/* Truncates and time changes are accepted and change nothing, as on the disk file. */
static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)attr, (void)to_set;
	pt_getattr(req, ino, fi);
}

static void pt_reply_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	fuse_reply_err(req, 0);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct pt *pt = fuse_req_userdata(req);
	struct td_buf *b;
	ssize_t n;

	(void)ino, (void)fi;
	if ((uint64_t)off >= pt->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* Over io_uring, straight into the ring entry: the reply copies nothing. */
	void *mem = td_fuse_reply_space(size);

	b = mem ? NULL : td_bufpool_get(pt->pool, size);
	if (!mem && !b) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (b)
		mem = b->mem;
	do
		n = pread(pt->fd, mem, size, off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, mem, (size_t)n);
	if (b)
		td_bufpool_put(pt->pool, b);
}

static void pt_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct pt *pt = fuse_req_userdata(req);
	ssize_t n;

	(void)ino, (void)fi;
	if ((uint64_t)off >= pt->size) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	size = (size_t)TD_MIN((uint64_t)size, pt->size - (uint64_t)off); /* the image never grows */
	do
		n = pwrite(pt->fd, buf, size, off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct pt *pt = fuse_req_userdata(req);

	(void)ino, (void)datasync, (void)fi;
	fuse_reply_err(req, fdatasync(pt->fd) ? errno : 0);
}

static void pt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	struct pt *pt = fuse_req_userdata(req);

	(void)ino, (void)fi;
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		fuse_reply_err(req, 0); /* every byte of a disk is allocated already */
		return;
	}
	fuse_reply_err(req, fallocate(pt->fd, mode | FALLOC_FL_KEEP_SIZE, offset, length) ? errno
											: 0);
}

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != ROOT_INO)
		fuse_reply_err(req, ENOTDIR);
	else
		fuse_reply_open(req, fi);
}

static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	const char *names[] = { ".", "..", DISK_NAME };
	const fuse_ino_t inos[] = { ROOT_INO, ROOT_INO, DISK_INO };
	char buf[1024];
	size_t used = 0;
	struct stat st;

	(void)ino, (void)fi;
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

static const struct fuse_lowlevel_ops pt_ll_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.read = pt_read,
	.write = pt_write,
	.flush = pt_reply_ok,
	.release = pt_reply_ok,
	.fsync = pt_fsync,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_reply_ok,
	.fallocate = pt_fallocate,
};

static int pt_open(void *userdata, uint64_t nodeid, uint32_t flags, uint32_t *open_flags)
{
	(void)userdata, (void)flags;
	if (nodeid != DISK_INO)
		return nodeid == ROOT_INO ? EISDIR : ENOENT;
	*open_flags = FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;
	return 0;
}

static const struct td_fuse_ops pt_ops = {
	.ll = &pt_ll_ops,
	.open = pt_open,
};

static struct td_fuse_session *sess;

static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	int sig;

	sigwait(set, &sig);
	td_fuse_session_stop(sess);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "mount", required_argument, NULL, 'm' },
		{ "socket", required_argument, NULL, 's' },
		{ "transport", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	const char *image = NULL, *mount = NULL;
	enum td_fuse_transport transport = TD_TRANSPORT_CLASSIC;
	const char *fuse_opts[MAX_FUSE_OPTS];
	size_t nr_opts = 0;
	struct pt pt = { .fd = -1 };
	char err[256];
	struct stat st;
	sigset_t set;
	pthread_t sig_thread;
	int c, ret = 1;

	td_log_init("tagdisk-passthrough", TD_LOG_NOTICE);
	while ((c = getopt_long(argc, argv, "fo:", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
		case 's':
			break;
		case 'i':
			image = optarg;
			break;
		case 'm':
			mount = optarg;
			break;
		case 't':
			if (strcmp(optarg, "classic") == 0)
				transport = TD_TRANSPORT_CLASSIC;
			else if (strcmp(optarg, "uring") == 0)
				transport = TD_TRANSPORT_URING;
			else if (strcmp(optarg, "auto") == 0)
				transport = TD_TRANSPORT_AUTO;
			else
				return 2;
			break;
		case 'o':
			if (nr_opts < MAX_FUSE_OPTS)
				fuse_opts[nr_opts++] = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!image || !mount) {
		fprintf(stderr, "usage: tagdisk-passthrough -f --image IMAGE --mount DIR "
				"[--transport classic|uring|auto]\n");
		return 2;
	}
	pt.fd = open(image, O_RDWR | O_CLOEXEC);
	if (pt.fd < 0 || fstat(pt.fd, &st) < 0) {
		fprintf(stderr, "tagdisk-passthrough: %s: %s\n", image, strerror(errno));
		return 1;
	}
	pt.size = (uint64_t)st.st_size;
	pt.pool = td_bufpool_create(td_fuse_recv_size());
	if (!pt.pool) {
		fprintf(stderr, "tagdisk-passthrough: out of memory\n");
		goto out_close;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sigdelset(&set, SIGUSR1);

	struct td_fuse_session_params p = {
		.mountpoint = mount,
		.fsname = "tagdisk-passthrough:" DISK_NAME,
		.subtype = "tagdisk-passthrough",
		.fuse_opts = fuse_opts,
		.nr_fuse_opts = nr_opts,
		.max_threads = 128,
		.max_background = 128,
		.ops = &pt_ops,
		.userdata = &pt,
		.pool = pt.pool,
		.transport = transport,
		.blocking_handlers = true, /* pread/pwrite in the handler */
	};

	int errnum;

	sess = td_fuse_session_create(&p, &errnum, err, sizeof(err));
	if (!sess) {
		fprintf(stderr, "tagdisk-passthrough: %s\n", err);
		goto out_destroy_pool;
	}
	pthread_create(&sig_thread, NULL, signal_main, &set);
	ret = td_fuse_session_run(sess) < 0;

	pthread_kill(sig_thread, SIGTERM);
	pthread_join(sig_thread, NULL);
	td_fuse_session_destroy(sess);
out_destroy_pool:
	td_bufpool_destroy(pt.pool);
out_close:
	close(pt.fd);
	return ret;
}
