// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_file.c - the image file backend.
 *
 * pread/pwrite (preadv/pwritev for several buffers) on the image descriptor,
 * retried until the whole transfer is done (a short transfer is not an error;
 * end of file reads as zeroes).
 * FUA writes use RWF_DSYNC; flush is fdatasync. Discard punches a hole;
 * write zeroes asks for FALLOC_FL_ZERO_RANGE. Where the filesystem under the
 * image cannot do either, zeroes are written instead, so the disk's promise
 * (the range reads back as zeroes) holds everywhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "tagdisk/drive.h"

#define ZERO_CHUNK (1U << 20)

struct file_backend {
	int fd;
};

/* Advance @iov/@iovcnt past @done bytes. */
static void iov_advance(struct iovec **iov, int *iovcnt, size_t done)
{
	while (done && *iovcnt) {
		if (done >= (*iov)->iov_len) {
			done -= (*iov)->iov_len;
			(*iov)++;
			(*iovcnt)--;
		} else {
			(*iov)->iov_base = (char *)(*iov)->iov_base + done;
			(*iov)->iov_len -= done;
			done = 0;
		}
	}
}

/*
 * One transfer. A single buffer (most requests) goes by pread/pwrite, which
 * spare the kernel copying an iovec in.
 */
static ssize_t file_rw_once(int fd, const struct iovec *iov, int iovcnt, uint64_t off, bool write,
			    int flags)
{
	if (iovcnt == 1 && !flags)
		return write ? pwrite(fd, iov->iov_base, iov->iov_len, (off_t)off)
			     : pread(fd, iov->iov_base, iov->iov_len, (off_t)off);
	return write ? pwritev2(fd, iov, iovcnt, (off_t)off, flags)
		     : preadv(fd, iov, iovcnt, (off_t)off);
}

static int file_rw(struct file_backend *fb, const struct iovec *iov_in, int iovcnt, uint64_t off,
		   bool write, int flags)
{
	struct iovec local[TD_RQ_MAX_BIOS];
	struct iovec *iov = local;

	if (iovcnt > TD_RQ_MAX_BIOS)
		return -EINVAL;
	memcpy(local, iov_in, (size_t)iovcnt * sizeof(*iov));
	while (iovcnt) {
		ssize_t n = file_rw_once(fb->fd, iov, iovcnt, off, write, flags);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0) {
			if (write)
				return -EIO;
			/* Past the end of the file: the rest reads as zeroes. */
			for (int i = 0; i < iovcnt; i++)
				memset(iov[i].iov_base, 0, iov[i].iov_len);
			return 0;
		}
		off += (uint64_t)n;
		iov_advance(&iov, &iovcnt, (size_t)n);
	}
	return 0;
}

static int file_read(void *priv, const struct iovec *iov, int iovcnt, uint64_t off)
{
	return file_rw(priv, iov, iovcnt, off, false, 0);
}

static int file_write(void *priv, const struct iovec *iov, int iovcnt, uint64_t off, bool fua)
{
	return file_rw(priv, iov, iovcnt, off, true, fua ? RWF_DSYNC : 0);
}

static int file_flush(void *priv)
{
	struct file_backend *fb = priv;

	return fdatasync(fb->fd) ? -errno : 0;
}

static int write_zero_bytes(struct file_backend *fb, uint64_t off, uint64_t len)
{
	void *zero = calloc(1, ZERO_CHUNK);
	int err = 0;

	if (!zero)
		return -ENOMEM;
	while (len && !err) {
		struct iovec iov = { zero, (size_t)TD_MIN(len, (uint64_t)ZERO_CHUNK) };

		err = file_rw(fb, &iov, 1, off, true, 0);
		off += iov.iov_len;
		len -= iov.iov_len;
	}
	free(zero);
	return err;
}

static int file_fallocate(struct file_backend *fb, int mode, uint64_t off, uint64_t len)
{
	if (fallocate(fb->fd, mode, (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno == EOPNOTSUPP || errno == ENOSYS)
		return write_zero_bytes(fb, off, len);
	return -errno;
}

static int file_discard(void *priv, uint64_t off, uint64_t len)
{
	return file_fallocate(priv, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
}

static int file_write_zeroes(void *priv, uint64_t off, uint64_t len)
{
	return file_fallocate(priv, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, len);
}

static void file_destroy(void *priv)
{
	free(priv);
}

static const struct td_backend_ops file_ops = {
	.name = "file",
	.read = file_read,
	.write = file_write,
	.flush = file_flush,
	.discard = file_discard,
	.write_zeroes = file_write_zeroes,
	.destroy = file_destroy,
};

int td_backend_file_init(struct td_backend *be, int fd)
{
	struct file_backend *fb = malloc(sizeof(*fb));

	if (!fb)
		return -ENOMEM;
	fb->fd = fd;
	be->ops = &file_ops;
	be->priv = fb;
	return 0;
}
