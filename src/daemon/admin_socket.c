// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * admin_socket.c - the admin socket's file: made with its mode and group
 * before anyone can see it, and removed only while it is still ours.
 *
 * The socket's directory may be writable by others (a group's directory, a
 * sticky /tmp). Binding at the final path and then calling chmod() and
 * chown() on that path would act on whatever the path names by then:
 * someone who swaps it for a symlink in between has the daemon (often root)
 * change the mode and group of the symlink's target. So the socket is bound
 * in a directory of its own, made with mkdtemp() (mode 0700, a name nobody
 * could have taken) beside the final path, given its mode and group there
 * relative to that directory's descriptor, and moved to the final path with
 * renameat2(RENAME_NOREPLACE): it appears there whole, mode and group
 * included, and never over something that appeared meanwhile. Its device and
 * inode, taken in the private directory, identify it when it is removed.
 *
 * When the private directory's path does not fit in a sockaddr_un, the bind
 * goes through /proc/self/fd/N, the directory's descriptor.
 *
 * LOCKING: none; called by the thread that creates or destroys the admin.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/admin_int.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/* Remove @path if it is a socket nobody listens on. Return: 0, or -errno with a message. */
static int clear_stale_socket(const char *path, char *err, size_t errlen)
{
	struct stat st;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, ret;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen,
			 "admin socket \"%s\": exists and is not a socket; refusing to replace it",
			 path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ret = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (ret == 0) {
		snprintf(err, errlen, "admin socket \"%s\": another process is listening on it",
			 path);
		return -EADDRINUSE;
	}
	if (errno != ECONNREFUSED) {
		snprintf(err, errlen, "admin socket \"%s\": %s", path, strerror(errno));
		return -errno;
	}
	td_info("admin: removing the stale socket \"%s\"", path);
	if (unlink(path) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "admin socket \"%s\": cannot remove it: %s", path,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

/* The name of the socket inside the private directory. */
#define PRIVATE_NAME "s"

/*
 * Bind @fd to PRIVATE_NAME in the private directory @dir (open as @dirfd).
 * Return: 0, or -errno.
 */
static int bind_private(int fd, const char *dir, int dirfd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" PRIVATE_NAME, dir);

	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" PRIVATE_NAME,
			 dirfd);
	return bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
}

/*
 * Give the socket PRIVATE_NAME in @dirfd the name @path, unless @path exists.
 * Where the file system has no RENAME_NOREPLACE, a hard link does the same.
 * Return: 0, or -errno (-EEXIST: @path exists).
 */
static int move_into_place(int dirfd, const char *path)
{
	if (renameat2(dirfd, PRIVATE_NAME, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(dirfd, PRIVATE_NAME, AT_FDCWD, path, 0) < 0)
		return -errno;
	unlinkat(dirfd, PRIVATE_NAME, 0);
	return 0;
}

int td_admin_socket_open(struct td_admin_socket *s, const char *path, mode_t mode, gid_t gid,
			 char *err, size_t errlen)
{
	struct sockaddr_un sa;
	char dir[sizeof(sa.sun_path)];
	char tmp[sizeof(sa.sun_path) + 32];
	const char *what = "";
	struct stat st;
	char *slash;
	int dirfd;
	int fd;
	int ret;

	s->fd = -1;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "admin socket \"%s\": path too long", path);
		return -ENAMETOOLONG;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	/* The default directory for root; systemd's RuntimeDirectory makes it too. */
	if (slash && slash != dir && mkdir(dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "admin socket directory \"%s\": %s", dir, strerror(errno));
		return -errno;
	}
	ret = clear_stale_socket(path, err, errlen);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "admin socket \"%s\": %s", path, strerror(-ret));
		return ret;
	}

	snprintf(tmp, sizeof(tmp), "%s/.tagdiskd.XXXXXX", dir);
	if (!mkdtemp(tmp)) {
		ret = -errno;
		what = "cannot make a private directory beside it";
		goto out_error;
	}
	dirfd = open(tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		ret = -errno;
		goto out_rmdir;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		goto out_close_dir;
	}
	/* Only the directory keeps others out; the umask keeps the socket ours until chmod. */
	mode_t old = umask(0177);

	ret = bind_private(fd, tmp, dirfd);
	umask(old);
	if (ret)
		goto out_close_socket;
	if (fchmodat(dirfd, PRIVATE_NAME, mode, 0) < 0 ||
	    (gid != (gid_t)-1 && fchownat(dirfd, PRIVATE_NAME, (uid_t)-1, gid, 0) < 0) ||
	    fstatat(dirfd, PRIVATE_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0 || listen(fd, 128) < 0) {
		ret = -errno;
		goto out_unlink;
	}
	ret = move_into_place(dirfd, path);
	if (ret) {
		if (ret == -EEXIST)
			what = "something else appeared at this path while the socket was made;"
			       " refusing to replace it";
		goto out_unlink;
	}
	close(dirfd);
	if (rmdir(tmp) < 0)
		td_warn("admin: cannot remove \"%s\"", tmp);
	s->fd = fd;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	return 0;

out_unlink:
	unlinkat(dirfd, PRIVATE_NAME, 0);
out_close_socket:
	close(fd);
out_close_dir:
	close(dirfd);
out_rmdir:
	rmdir(tmp);
out_error:
	snprintf(err, errlen, "admin socket \"%s\": %s", path, *what ? what : strerror(-ret));
	return ret;
}

void td_admin_socket_remove(const struct td_admin_socket *s, const char *path)
{
	struct stat st;

	/* Only if the path still names our socket: another may have taken its place. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == s->dev &&
	    st.st_ino == s->ino)
		unlink(path);
}
