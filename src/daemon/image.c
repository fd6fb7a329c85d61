// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * image.c - opening, creating and locking the disk image, or connecting to
 * the network backend that holds it instead ([drive] backend).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "daemon/config.h"
#include "daemon/daemon.h"

/* Return: true when an fdinfo "lock:" line is an OFD lock on (@dev, @ino). */
static bool lock_line_matches(const char *line, dev_t dev, ino_t ino)
{
	unsigned int maj, min;
	unsigned long long i;
	const char *p = strstr(line, "OFDLCK");

	if (!p)
		return false;
	/* "... OFDLCK ADVISORY  WRITE -1 fe:00:10954072 0 EOF": find the maj:min:ino field. */
	for (p = strchr(p, ' '); p && *p; p = strchr(p + 1, ' ')) {
		if (sscanf(p, " %x:%x:%llu", &maj, &min, &i) == 3)
			return maj == major(dev) && min == minor(dev) && i == (unsigned long long)ino;
	}
	return false;
}

static bool pid_holds_lock(const char *pid, dev_t dev, ino_t ino)
{
	char path[64];
	DIR *dir;
	struct dirent *de;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%s/fdinfo", pid);
	dir = opendir(path);
	if (!dir)
		return false;
	while (!found && (de = readdir(dir))) {
		char file[320];
		char line[256];
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		f = fopen(file, "re");
		if (!f)
			continue;
		while (!found && fgets(line, sizeof(line), f))
			found = strncmp(line, "lock:", 5) == 0 && lock_line_matches(line, dev, ino);
		fclose(f);
	}
	closedir(dir);
	return found;
}

pid_t td_image_lock_holder(dev_t dev, ino_t ino)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid();
	pid_t holder = 0;

	if (!proc)
		return 0;
	while (!holder && (de = readdir(proc))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0 || pid == self)
			continue;
		if (pid_holds_lock(de->d_name, dev, ino))
			holder = (pid_t)pid;
	}
	closedir(proc);
	return holder;
}

int td_image_open(struct td_image *img, const char *path, uint64_t create_size, bool read_only,
		  char *err, size_t errlen)
{
	struct flock fl = { .l_type = read_only ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET };
	struct stat st;
	int ret;

	memset(img, 0, sizeof(*img));
	img->fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (img->fd < 0 && errno == ENOENT && create_size) {
		img->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (img->fd >= 0) {
			img->created = true;
			if (ftruncate(img->fd, (off_t)create_size) < 0) {
				ret = -errno;
				snprintf(err, errlen, "image \"%s\": cannot set its size: %s", path,
					 strerror(errno));
				goto out_close;
			}
		}
	}
	if (img->fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "image \"%s\": %s", path, strerror(errno));
		return ret;
	}
	if (fcntl(img->fd, F_OFD_SETLK, &fl) < 0) {
		ret = -errno;
		if (errno == EAGAIN || errno == EACCES) {
			pid_t pid = 0;

			if (fstat(img->fd, &st) == 0)
				pid = td_image_lock_holder(st.st_dev, st.st_ino);
			ret = -EBUSY;
			if (pid)
				snprintf(err, errlen, "image \"%s\" is in use: locked by process %d",
					 path, (int)pid);
			else
				snprintf(err, errlen, "image \"%s\" is in use: locked by another process",
					 path);
		} else {
			snprintf(err, errlen, "image \"%s\": cannot lock it: %s", path,
				 strerror(errno));
		}
		goto out_close;
	}
	if (fstat(img->fd, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "image \"%s\": %s", path, strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		snprintf(err, errlen, "image \"%s\": not a regular file", path);
		goto out_close;
	}
	img->size = (uint64_t)st.st_size;
	img->path = strdup(path);
	if (!img->path) {
		ret = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_close;
	}
	return 0;

out_close:
	close(img->fd);
	if (img->created)
		unlink(path);
	img->fd = -1;
	return ret;
}

void td_image_close(struct td_image *img, bool remove_if_created)
{
	if (img->fd >= 0)
		close(img->fd);
	img->fd = -1;
	if (remove_if_created && img->created && img->path)
		unlink(img->path);
	free(img->path);
	img->path = NULL;
}

/* The image file: today's path, OFD lock included. */
static int store_open_file(struct td_store *s, const struct td_config *c, char *err,
			   size_t errlen)
{
	int ret;

	ret = td_image_open(&s->img, c->image, c->size_bytes, c->read_only, err, errlen);
	if (ret)
		return ret;
	s->size = s->img.size;
	s->target = strdup(c->image);
	if (!s->target) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return td_backend_file_init(&s->be, s->img.fd);
}

static int store_open_rbd(struct td_store *s, const struct td_config *c, char *err,
			  size_t errlen)
{
	const struct td_rbd_params p = {
		.pool = td_config_str(c, "rbd", "pool"),
		.image = c->rbd_image,
		.conf = td_config_str(c, "rbd", "conf"),
		.id = td_config_str(c, "rbd", "id"),
		.keyring = c->rbd_keyring,
	};
	char msg[512] = "";
	int ret;

	if (asprintf(&s->target, "rbd:%s/%s", p.pool, p.image) < 0) {
		s->target = NULL;
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = td_backend_rbd_open(&s->be, &p, c->size_bytes, c->read_only, &s->size, msg,
				  sizeof(msg));
	if (ret) {
		s->be.ops = NULL;
		/* Say how to create it, as for a missing image file. */
		snprintf(err, errlen, "RBD image \"%s/%s\": %s%s", p.pool, p.image,
			 msg[0] ? msg : strerror(-ret),
			 ret == -ENOENT && !c->size_bytes ? " (no size was given to create it)" : "");
	}
	return ret;
}

static int store_open_nbd(struct td_store *s, const struct td_config *c, char *err,
			  size_t errlen)
{
	const struct td_nbd_params p = {
		.uri = c->nbd_uri,
		.connections = c->nbd_connections,
	};
	char msg[512] = "";
	int ret;

	s->target = strdup(c->nbd_uri);
	if (!s->target) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = td_backend_nbd_open(&s->be, &p, c->read_only, &s->size, msg, sizeof(msg));
	if (ret) {
		s->be.ops = NULL;
		snprintf(err, errlen, "NBD export \"%s\": %s", c->nbd_uri,
			 msg[0] ? msg : strerror(-ret));
	}
	return ret;
}

int td_store_open(struct td_store *s, const struct td_config *c, char *err, size_t errlen)
{
	char what[1024];
	int ret;

	memset(s, 0, sizeof(*s));
	s->img.fd = -1;
	s->kind = td_config_backend_name(c->backend);
	switch (c->backend) {
	case TD_CONFIG_BACKEND_FILE:
		ret = store_open_file(s, c, err, errlen);
		snprintf(what, sizeof(what), "the image \"%s\"", s->target ? s->target : "");
		break;
	case TD_CONFIG_BACKEND_RBD:
		ret = store_open_rbd(s, c, err, errlen);
		snprintf(what, sizeof(what), "the RBD image \"%s/%s\"",
			 td_config_str(c, "rbd", "pool"), c->rbd_image);
		break;
	case TD_CONFIG_BACKEND_NBD:
		ret = store_open_nbd(s, c, err, errlen);
		snprintf(what, sizeof(what), "the NBD export \"%s\"", c->nbd_uri);
		break;
	default:
		snprintf(err, errlen, "[drive] backend: unknown backend %d", (int)c->backend);
		ret = -EINVAL;
		break;
	}
	if (!ret)
		ret = td_config_check_backend_size(c, what, s->size, err, errlen);
	if (ret) {
		td_store_close(s, true);
		return ret;
	}
	s->ref = s->be;
	return 0;
}

struct td_backend td_store_take_backend(struct td_store *s)
{
	struct td_backend be = s->be;

	s->be.ops = NULL;
	s->be.priv = NULL;
	return be;
}

void td_store_close(struct td_store *s, bool remove_if_created)
{
	if (s->be.ops && s->be.ops->destroy)
		s->be.ops->destroy(s->be.priv);
	s->be.ops = NULL;
	s->be.priv = NULL;
	s->ref = s->be;
	td_image_close(&s->img, remove_if_created);
	free(s->target);
	s->target = NULL;
}
