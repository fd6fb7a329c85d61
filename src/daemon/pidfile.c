// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pidfile.c - the --pid-file: written atomically, locked while we run.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "daemon/daemon.h"

/* Return: the pid written in @fd's file, or 0 when it holds none. */
static long read_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	char *end;
	long pid;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	pid = strtol(buf, &end, 10);
	return pid > 0 && (*end == '\n' || *end == '\0') ? pid : 0;
}

/* Return: true when an OFD or process lock is held on @fd's file. */
static bool is_locked(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return false;
	return fl.l_type != F_UNLCK;
}

/* Is @path held by a live daemon? Return: 0, -EBUSY (message in @err), or another -errno. */
static int check_held(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	long pid;
	int ret = 0;

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		ret = -errno;
		snprintf(err, errlen, "--pid-file \"%s\": %s", path, strerror(errno));
		return ret;
	}
	if (is_locked(fd)) {
		pid = read_pid(fd);
		ret = -EBUSY;
		if (pid)
			snprintf(err, errlen, "--pid-file \"%s\" is in use: held by process %ld",
				 path, pid);
		else
			snprintf(err, errlen, "--pid-file \"%s\" is in use: locked by another process",
				 path);
	}
	close(fd);
	return ret;
}

int td_pidfile_check(const char *path, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/');
	struct stat st;
	char *dir;
	int ret;

	if (!slash) {
		snprintf(err, errlen, "--pid-file \"%s\": not an absolute path", path);
		return -EINVAL;
	}
	dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
	if (!dir) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = stat(dir, &st) < 0 ? -errno : 0;
	if (ret || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--pid-file \"%s\": directory \"%s\" %s", path, dir,
			 ret == -ENOENT ? "does not exist"
			 : ret	       ? strerror(-ret)
				       : "is not a directory");
		free(dir);
		return ret ? ret : -ENOTDIR;
	}
	free(dir);
	return check_held(path, err, errlen);
}

int td_pidfile_write(struct td_pidfile *pf, const char *path, char *err, size_t errlen)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	char text[32];
	struct stat st;
	char *tmp;
	int fd, len, ret;

	pf->fd = -1;
	pf->path = NULL;
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "--pid-file \"%s\": cannot create \"%s\": %s", path, tmp,
			 strerror(errno));
		free(tmp);
		return ret;
	}
	len = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
	errno = 0;
	if (fchmod(fd, 0644) < 0 || fcntl(fd, F_OFD_SETLK, &fl) < 0 ||
	    write(fd, text, (size_t)len) != len || fstat(fd, &st) < 0) {
		ret = errno ? -errno : -EIO;
		snprintf(err, errlen, "--pid-file \"%s\": writing \"%s\": %s", path, tmp,
			 strerror(-ret));
		goto out_unlink;
	}
	/* Another daemon may have taken it since td_pidfile_check(). */
	ret = check_held(path, err, errlen);
	if (ret)
		goto out_unlink;
	if (rename(tmp, path) < 0) {
		ret = -errno;
		snprintf(err, errlen, "--pid-file \"%s\": %s", path, strerror(errno));
		goto out_unlink;
	}
	pf->path = strdup(path);
	if (!pf->path) {
		unlink(path);
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_close;
	}
	pf->fd = fd;
	pf->dev = st.st_dev;
	pf->ino = st.st_ino;
	free(tmp);
	return 0;

out_unlink:
	unlink(tmp);
out_close:
	close(fd);
	free(tmp);
	return ret;
}

void td_pidfile_remove(struct td_pidfile *pf)
{
	struct stat st;

	if (pf->fd < 0)
		return;
	/* Someone may have replaced it (a stale-file cleanup by hand, another daemon). */
	if (stat(pf->path, &st) == 0 && st.st_dev == pf->dev && st.st_ino == pf->ino)
		unlink(pf->path);
	close(pf->fd);
	pf->fd = -1;
	free(pf->path);
	pf->path = NULL;
}
