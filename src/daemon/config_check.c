// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config_check.c - the checks a whole config must pass before the daemon
 * uses it: between keys (td_config_check), paths made absolute and the
 * default socket filled (td_config_resolve), then against the system: the
 * mountpoint, the image, the socket's group, path, directory and whether
 * another daemon holds it, the write log (td_config_validate).
 *
 * Nothing here creates, opens for writing or changes a file. A message names
 * where the value it is about came from (the option, or file:line), from
 * the config's origin[].
 */
#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "config_int.h"
#include "daemon/mounts.h"

static int bad(const struct td_config *c, enum td_cfg_key id, const char *value, char *err,
	       size_t errlen, const char *fmt, ...) td_printf(6, 7);

/* A message about @c's value @value of key @id, naming where it came from. Return: -EINVAL. */
static int bad(const struct td_config *c, enum td_cfg_key id, const char *value, char *err,
	       size_t errlen, const char *fmt, ...)
{
	char why[TD_CFG_QUOTE_MAX + 128];
	struct td_cfg_where w;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	td_cfg_where_of(c, id, &w);
	return td_cfg_bad_value(id, &w, value, err, errlen, "%s", why);
}

/* Return: whether the user gave key @id (in the file or on the command line). */
static bool given(const struct td_config *c, enum td_cfg_key id)
{
	return c->origin[id].option || c->origin[id].line;
}

/* The keys that say where the disk lives, for @c's backend. */
static int check_backend(const struct td_config *c, char *err, size_t errlen)
{
	const char *name = td_config_backend_name(c->backend);

	switch (c->backend) {
	case TD_CONFIG_BACKEND_FILE:
		if (!c->image)
			return td_cfg_fail(err, errlen,
					   "[disk] image is not set (give it in the config file or"
					   " with --image)");
		return 0;
	case TD_CONFIG_BACKEND_RBD:
		if (!c->rbd_image)
			return td_cfg_fail(err, errlen,
					   "[rbd] image is not set (required with [drive] backend ="
					   " rbd)");
		break;
	case TD_CONFIG_BACKEND_NBD:
		if (!c->nbd_uri)
			return td_cfg_fail(err, errlen,
					   "[nbd] uri is not set (required with [drive] backend ="
					   " nbd)");
		break;
	}
	/* Two places for one disk: refuse rather than guess which one is meant. */
	if (c->image)
		return bad(c, KEY_DISK_IMAGE, c->image, err, errlen,
			   "conflicts with [drive] backend = %s (the disk is %s; remove"
			   " [disk] image)",
			   name,
			   c->backend == TD_CONFIG_BACKEND_RBD ? "[rbd] pool/image" : "[nbd] uri");
	return 0;
}

int td_config_check(const struct td_config *c, char *err, size_t errlen)
{
	char value[32];
	int ret;

	ret = check_backend(c, err, errlen);
	if (ret)
		return ret;
	if (!c->mountpoint)
		return td_cfg_fail(err, errlen,
				   "[disk] mountpoint is not set (give it in the config file or"
				   " with --mount)");
	if (c->size_bytes % c->logical_block_size) {
		td_format_size(c->size_bytes, value, sizeof(value));
		return bad(c, KEY_DISK_SIZE, value, err, errlen,
			   "must be a multiple of logical_block_size (%u)", c->logical_block_size);
	}
	if (c->max_sectors % (c->logical_block_size / 512)) {
		snprintf(value, sizeof(value), "%u", c->max_sectors);
		return bad(c, KEY_QUEUE_MAX_SECTORS, value, err, errlen,
			   "must be a multiple of %u with logical_block_size = %u",
			   c->logical_block_size / 512, c->logical_block_size);
	}
	if (c->hdd.seek_full_us < c->hdd.seek_track_us) {
		snprintf(value, sizeof(value), "%u", c->hdd.seek_full_us);
		return bad(c, KEY_DRIVE_HDD_SEEK_FULL_US, value, err, errlen,
			   "must be at least hdd_seek_track_us (%u)", c->hdd.seek_track_us);
	}
	/*
	 * Both asked for in so many words: the kernel gives back what a dead
	 * daemon had read from /dev/fuse, not what its rings held. An explicit
	 * uring alone turns recovery off (td_config_recovery()).
	 */
	/*
	 * fusermount3's auto_unmount unmounts when the daemon dies: exactly what
	 * recovery is there to avoid.
	 */
	for (size_t i = 0; i < c->nr_fuse_opts && td_config_recovery(c); i++)
		if (strcmp(c->fuse_opts[i], "auto_unmount") == 0)
			return td_cfg_fail(err, errlen,
					   "-o auto_unmount: the mount would go with a crash of the "
					   "daemon, which [disk] recovery keeps it through; set "
					   "recovery = false to use it");
	if (c->transport == TD_TRANSPORT_URING && c->recovery && td_config_is_set(c, KEY_DISK_RECOVERY))
		return bad(c, KEY_DISK_TRANSPORT, "uring", err, errlen,
			   "cannot keep the mount across a crash of the daemon ([disk] recovery ="
			   " true): the kernel does not resend what a dead ring held; use"
			   " transport classic or auto, or set recovery = false");
	return 0;
}

bool td_config_recovery(const struct td_config *c)
{
	return c->recovery && c->transport != TD_TRANSPORT_URING;
}

bool td_config_is_set(const struct td_config *c, enum td_cfg_key id)
{
	return c->origin[id].option || c->origin[id].line;
}

int td_config_default_socket(const struct td_config *c, uid_t euid, char *buf, size_t len)
{
	const char *dir = "/run/tagdisk";
	size_t dir_len = strlen(dir);
	int n;

	if (euid != 0) {
		const char *slash;

		if (!c->mountpoint)
			return -EINVAL;
		dir = c->mountpoint;
		dir_len = strlen(dir);
		while (dir_len > 1 && dir[dir_len - 1] == '/')
			dir_len--;
		slash = memrchr(dir, '/', dir_len);
		if (!slash) {
			dir = ".";
			dir_len = 1;
		} else {
			/* "/mnt" lives in "/": keep that slash, drop every other trailing one. */
			dir_len = (size_t)(slash - dir);
			while (dir_len > 1 && dir[dir_len - 1] == '/')
				dir_len--;
			if (dir_len == 0)
				dir_len = 1;
		}
	}
	n = snprintf(buf, len, "%.*s%s%s.sock", (int)dir_len, dir,
		     dir_len == 1 && dir[0] == '/' ? "" : "/", c->name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/* Look @name up as a group name, or as a gid when it is all digits. Return: 0 or -errno. */
static int resolve_group(const char *name, gid_t *gid)
{
	struct group grp;
	struct group *res = NULL;
	size_t buflen = 4096;
	char *buf = NULL;
	uint64_t num;
	bool numeric = td_parse_u64(name, 0, (gid_t)-2, &num) == 0;
	int ret;

	for (;;) {
		char *grown = realloc(buf, buflen);

		if (!grown) {
			free(buf);
			return -ENOMEM;
		}
		buf = grown;
		if (numeric)
			ret = getgrgid_r((gid_t)num, &grp, buf, buflen, &res);
		else
			ret = getgrnam_r(name, &grp, buf, buflen, &res);
		if (ret != ERANGE || buflen >= (1U << 20))
			break;
		buflen *= 2;
	}
	if (ret == 0 && res)
		*gid = res->gr_gid;
	free(buf);
	if (ret)
		return -ret;
	return res ? 0 : -ENOENT;
}

/* Make @c's path of key @id absolute (see td_cfg_absolute_path). Return: 0 or a message. */
static int make_absolute(struct td_config *c, enum td_cfg_key id, char *err, size_t errlen)
{
	char **path = (char **)((char *)c + td_cfg_rules[id].offset);
	size_t len = strlen(*path);
	char *abs;

	assert(td_cfg_rules[id].kind == KIND_PATH || td_cfg_rules[id].kind == KIND_OPT_PATH);
	if ((*path)[0] == '/' && (len == 1 || (*path)[len - 1] != '/'))
		return 0;
	abs = td_cfg_absolute_path(*path);
	if (!abs) {
		if (errno == ENOMEM)
			return td_cfg_nomem(err, errlen);
		return bad(c, id, *path, err, errlen, "%s", strerror(errno));
	}
	free(*path);
	*path = abs;
	return 0;
}

int td_config_resolve(struct td_config *c, char *err, size_t errlen)
{
	char sock[PATH_MAX];
	int ret = 0;

	if (c->image)
		ret = make_absolute(c, KEY_DISK_IMAGE, err, errlen);
	if (!ret && c->rbd_conf)
		ret = make_absolute(c, KEY_RBD_CONF, err, errlen);
	if (!ret && c->rbd_keyring)
		ret = make_absolute(c, KEY_RBD_KEYRING, err, errlen);
	if (!ret && c->mountpoint)
		ret = make_absolute(c, KEY_DISK_MOUNTPOINT, err, errlen);
	if (!ret && c->socket)
		ret = make_absolute(c, KEY_ADMIN_SOCKET, err, errlen);
	if (!ret && c->log_path)
		ret = make_absolute(c, KEY_LOG_PATH, err, errlen);
	if (ret || c->socket || !c->mountpoint)
		return ret;
	if (td_config_default_socket(c, geteuid(), sock, sizeof(sock)))
		return td_cfg_fail(err, errlen, "[admin] socket: the default path is too long");
	c->socket = strdup(sock);
	if (!c->socket)
		return td_cfg_nomem(err, errlen);
	return 0;
}

/* The image exists: it must be usable as the disk as it is. */
static int check_existing_image(const struct td_config *c, const struct stat *st, char *err,
				size_t errlen)
{
	char have[32], want[32], quoted[TD_CFG_QUOTE_MAX];
	uint64_t bytes = (uint64_t)st->st_size;

	if (!S_ISREG(st->st_mode))
		return bad(c, KEY_DISK_IMAGE, c->image, err, errlen, "not a regular file");
	if (bytes == 0 || bytes % c->logical_block_size)
		return bad(
		    c, KEY_DISK_IMAGE, c->image, err, errlen,
		    "its size (%llu bytes) is not a nonzero multiple of logical_block_size (%u)",
		    (unsigned long long)bytes, c->logical_block_size);
	if (c->size_bytes && c->size_bytes != bytes) {
		td_format_size(c->size_bytes, want, sizeof(want));
		td_format_size(bytes, have, sizeof(have));
		return bad(c, KEY_DISK_SIZE, want, err, errlen,
			   "the existing image \"%s\" is %s (%llu bytes)",
			   td_cfg_escape(c->image, quoted, sizeof(quoted)), have,
			   (unsigned long long)bytes);
	}
	return 0;
}

/* The image is missing: the daemon will create it, which needs a size and a directory. */
static int check_new_image(const struct td_config *c, char *err, size_t errlen)
{
	char quoted[TD_CFG_QUOTE_MAX];
	const char *slash = strrchr(c->image, '/');
	size_t dir_len = (size_t)(slash - c->image);
	struct stat st;
	char *dir;
	int ret = 0;

	assert(slash); /* made absolute before */
	if (c->size_bytes == 0)
		return bad(c, KEY_DISK_IMAGE, c->image, err, errlen,
			   "does not exist and no size was given");
	dir = strndup(c->image, dir_len ? dir_len : 1);
	if (!dir)
		return td_cfg_nomem(err, errlen);
	td_cfg_escape(dir, quoted, sizeof(quoted));
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT)
			ret = bad(c, KEY_DISK_IMAGE, c->image, err, errlen,
				  "directory \"%s\" does not exist", quoted);
		else
			ret = bad(c, KEY_DISK_IMAGE, c->image, err, errlen, "directory \"%s\": %s",
				  quoted, strerror(errno));
	} else if (!S_ISDIR(st.st_mode)) {
		ret = bad(c, KEY_DISK_IMAGE, c->image, err, errlen, "\"%s\" is not a directory",
			  quoted);
	}
	free(dir);
	return ret;
}

/*
 * The admin socket's place, before anything is created (the image
 * included): nothing but a socket nobody listens on may be at the path
 * (another tagdiskd on the default socket, named after [disk] name, is the
 * usual case: say what to add), and its directory must exist or be one
 * level the daemon can make (it then removes it again on exit).
 */
static int check_socket(const struct td_config *c, char *err, size_t errlen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char quoted[TD_CFG_QUOTE_MAX], dir_q[TD_CFG_QUOTE_MAX];
	const char *slash = strrchr(c->socket, '/');
	char dir[sizeof(addr.sun_path)];
	char *parent_end;
	struct stat st;
	int fd, ret;

	assert(slash); /* made absolute before */
	snprintf(dir, sizeof(dir), "%.*s", slash == c->socket ? 1 : (int)(slash - c->socket),
		 c->socket);
	td_cfg_escape(dir, dir_q, sizeof(dir_q));
	if (stat(dir, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen,
				   "\"%s\" is not a directory", dir_q);
		if (access(dir, W_OK | X_OK) < 0)
			return bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen,
				   "directory \"%s\": %s", dir_q, strerror(errno));
	} else if (errno != ENOENT) {
		return bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen, "directory \"%s\": %s",
			   dir_q, strerror(errno));
	} else {
		/* One missing level is made at start; two are a mistake. */
		parent_end = strrchr(dir, '/');
		if (parent_end)
			*parent_end = '\0';
		if (!parent_end || stat(dir[0] ? dir : "/", &st) < 0 || !S_ISDIR(st.st_mode))
			return bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen,
				   "directory \"%s\" does not exist, nor \"%s\" (create them, or"
				   " choose another socket)",
				   dir_q, dir[0] ? dir : "/");
		return 0;
	}

	if (lstat(c->socket, &st) < 0)
		return errno == ENOENT ? 0
				       : bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen, "%s",
					     strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen,
			   "exists and is not a socket; refusing to replace it");
	/* A socket: stale (removed at start) unless someone answers there. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	memcpy(addr.sun_path, c->socket, strlen(c->socket) + 1);
	ret = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
	close(fd);
	if (ret < 0)
		return 0;
	if (given(c, KEY_ADMIN_SOCKET))
		return bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen,
			   "another process is listening on it (another tagdiskd?)");
	return td_cfg_fail(err, errlen,
			   "the default admin socket \"%s\" is taken: another process (a tagdiskd"
			   " of a disk also named \"%s\"?) is listening on it; give this disk"
			   " another name (--name NAME or [disk] name) or its own socket"
			   " (--socket PATH or [admin] socket)",
			   td_cfg_escape(c->socket, quoted, sizeof(quoted)), c->name);
}

/*
 * [log] path: a regular file or a new one in a directory that exists, neither
 * the image nor under the mountpoint (the log would be written through the
 * disk it records, and the mount hides the directory anyway).
 */
static int check_log_path(const struct td_config *c, char *err, size_t errlen)
{
	char quoted[TD_CFG_QUOTE_MAX];
	size_t mlen = strlen(c->mountpoint);
	const char *slash = strrchr(c->log_path, '/');
	struct stat st, img;
	char *dir;
	int ret = 0;

	assert(slash); /* made absolute before */
	if (strncmp(c->log_path, c->mountpoint, mlen) == 0 &&
	    (c->log_path[mlen] == '/' || (mlen == 1 && c->mountpoint[0] == '/')))
		return bad(c, KEY_LOG_PATH, c->log_path, err, errlen,
			   "inside the mountpoint: the log would be written to the disk it records");
	if (stat(c->log_path, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			return bad(c, KEY_LOG_PATH, c->log_path, err, errlen, "not a regular file");
		if (c->image && stat(c->image, &img) == 0 && img.st_dev == st.st_dev &&
		    img.st_ino == st.st_ino)
			return bad(c, KEY_LOG_PATH, c->log_path, err, errlen, "is the disk's image");
		return 0;
	}
	if (errno != ENOENT)
		return bad(c, KEY_LOG_PATH, c->log_path, err, errlen, "%s", strerror(errno));
	dir = strndup(c->log_path, slash > c->log_path ? (size_t)(slash - c->log_path) : 1);
	if (!dir)
		return td_cfg_nomem(err, errlen);
	td_cfg_escape(dir, quoted, sizeof(quoted));
	if (stat(dir, &st) < 0 && errno == ENOENT)
		ret = bad(c, KEY_LOG_PATH, c->log_path, err, errlen,
			  "directory \"%s\" does not exist", quoted);
	else if (stat(dir, &st) < 0)
		ret = bad(c, KEY_LOG_PATH, c->log_path, err, errlen, "directory \"%s\": %s", quoted,
			  strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		ret = bad(c, KEY_LOG_PATH, c->log_path, err, errlen, "\"%s\" is not a directory",
			  quoted);
	free(dir);
	return ret;
}

int td_config_validate(struct td_config *c, char *err, size_t errlen)
{
	struct sockaddr_un addr;
	struct stat st;
	int ret;

	ret = td_config_check(c, err, errlen);
	if (!ret)
		ret = td_config_resolve(c, err, errlen);
	if (ret)
		return ret;

	/*
	 * A tagdisk mount is there already (a daemon before us, dead or being
	 * replaced): its root is a directory, and a stat(2) of it would wait
	 * for a daemon to serve it - perhaps this one.
	 */
	if (!td_mount_is_tagdisk(c->mountpoint)) {
		if (stat(c->mountpoint, &st) < 0)
			return bad(c, KEY_DISK_MOUNTPOINT, c->mountpoint, err, errlen, "%s",
				   errno == ENOENT ? "does not exist" : strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return bad(c, KEY_DISK_MOUNTPOINT, c->mountpoint, err, errlen,
				   "not a directory");
	}

	/* A network backend's image is there to see only once connected (td_store_open()). */
	if (c->backend != TD_CONFIG_BACKEND_FILE)
		ret = 0;
	else if (stat(c->image, &st) == 0)
		ret = check_existing_image(c, &st, err, errlen);
	else if (errno == ENOENT)
		ret = check_new_image(c, err, errlen);
	else
		ret = bad(c, KEY_DISK_IMAGE, c->image, err, errlen, "%s", strerror(errno));
	if (ret)
		return ret;

	c->socket_gid = (gid_t)-1;
	if (c->socket_group) {
		ret = resolve_group(c->socket_group, &c->socket_gid);
		if (ret == -ENOMEM)
			return td_cfg_nomem(err, errlen);
		if (ret)
			return bad(c, KEY_ADMIN_SOCKET_GROUP, c->socket_group, err, errlen, "%s",
				   ret == -ENOENT ? "no such group" : strerror(-ret));
	}

	if (strlen(c->socket) >= sizeof(addr.sun_path))
		return bad(c, KEY_ADMIN_SOCKET, c->socket, err, errlen,
			   "longer than the %zu bytes a Unix socket path may have",
			   sizeof(addr.sun_path) - 1);
	ret = check_socket(c, err, errlen);
	if (ret || !c->log_path)
		return ret;
	return check_log_path(c, err, errlen);
}

size_t td_config_unused_keys(const struct td_config *c, const struct td_config_key **unused,
			     size_t max)
{
	size_t n = 0;

	for (unsigned int i = 0; i < NR_KEYS; i++) {
		const char *section = td_config_keys[i].section;
		bool used;

		if (strcmp(section, "rbd") == 0)
			used = c->backend == TD_CONFIG_BACKEND_RBD;
		else if (strcmp(section, "nbd") == 0)
			used = c->backend == TD_CONFIG_BACKEND_NBD;
		else
			continue;
		if (used || !given(c, (enum td_cfg_key)i))
			continue;
		if (n < max)
			unused[n] = &td_config_keys[i];
		n++;
	}
	return n;
}

int td_config_check_backend_size(const struct td_config *c, const char *what, uint64_t size,
				 char *err, size_t errlen)
{
	char have[32], want[32];

	if (size == 0 || size % c->logical_block_size)
		return td_cfg_fail(err, errlen,
				   "%s: its size (%llu bytes) is not a nonzero multiple of"
				   " logical_block_size (%u)",
				   what, (unsigned long long)size, c->logical_block_size);
	if (c->size_bytes && c->size_bytes != size) {
		td_format_size(c->size_bytes, want, sizeof(want));
		td_format_size(size, have, sizeof(have));
		return bad(c, KEY_DISK_SIZE, want, err, errlen, "%s is %s (%llu bytes)", what, have,
			   (unsigned long long)size);
	}
	return 0;
}
