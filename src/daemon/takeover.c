// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * takeover.c - handing the FUSE connection from one daemon to the next: the
 * shared record, the service manager's fd store (sd_notify FDSTORE and
 * LISTEN_FDS, spoken without libsystemd), re-executing in place, and asking
 * systemd whether a SIGTERM is a restart.
 *
 * The record lives in a memfd mapped shared: what the serving daemon writes
 * (the opens counter included) is in the file the moment it writes it, so a
 * successor reads it as it was when its predecessor died.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>
#ifdef TD_WITH_SYSTEMD
#include <systemd/sd-bus.h>
#endif
#include "common/log.h"
#include "daemon/daemon.h"
#include "daemon/mounts.h"
#include "daemon/takeover.h"

#define RECORD_MAGIC	"tagdisk"
#define RECORD_VERSION	1
#define FUSE_DEV_MAJOR	10
#define FUSE_DEV_MINOR	229
#define LISTEN_FDS_START 3
#define ENV_DETACHED	"TAGDISKD_DETACHED"

void td_takeover_init(struct td_takeover *t)
{
	*t = (struct td_takeover){ .fuse_fd = -1, .state_fd = -1 };
}

/* ---- adopting ---------------------------------------------------------------------------- */

/* Return: whether process @pid exists and is a tagdiskd. */
static bool is_tagdiskd(pid_t pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	return strncmp(comm, "tagdiskd", 8) == 0;
}

static bool is_fuse_dev(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == FUSE_DEV_MAJOR &&
	       minor(st.st_rdev) == FUSE_DEV_MINOR;
}

/* Map the record behind @fd. Return: it, or NULL with a message in @err. */
static struct td_takeover_record *map_record(int fd, char *err, size_t errlen)
{
	struct td_takeover_record *rec;
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size < sizeof(struct td_takeover_record)) {
		snprintf(err, errlen, "takeover: the \"%s\" fd (LISTEN_FDS) is no tagdisk state "
			 "record", TD_TAKEOVER_STATE_NAME);
		return NULL;
	}
	rec = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (rec == MAP_FAILED) {
		snprintf(err, errlen, "takeover: mapping the state record: %s", strerror(errno));
		return NULL;
	}
	if (memcmp(rec->magic, RECORD_MAGIC, sizeof(RECORD_MAGIC)) != 0 ||
	    rec->version != RECORD_VERSION || rec->record_bytes != sizeof(*rec) ||
	    rec->init_in_len > TD_TAKEOVER_INIT_MAX || rec->init_out_len > TD_TAKEOVER_INIT_MAX ||
	    !memchr(rec->mountpoint, '\0', sizeof(rec->mountpoint)) ||
	    !memchr(rec->name, '\0', sizeof(rec->name))) {
		snprintf(err, errlen, "takeover: the \"%s\" fd (LISTEN_FDS) is no tagdisk state "
			 "record of this version", TD_TAKEOVER_STATE_NAME);
		munmap(rec, sizeof(*rec));
		return NULL;
	}
	return rec;
}

/* Check that the connection in @t (fd and record) is the one @mountpoint needs. */
static int check_adoptable(struct td_takeover *t, const char *mountpoint, const char *name,
			   uint64_t size_bytes, uint32_t lbs, char *err, size_t errlen)
{
	const struct td_takeover_record *rec = t->rec;
	struct td_mount_info mi;

	if (strcmp(rec->mountpoint, mountpoint) != 0 || strcmp(rec->name, name) != 0) {
		snprintf(err, errlen, "takeover: the FUSE connection handed over (LISTEN_FDS) "
			 "serves %s/%s, not %s/%s", rec->mountpoint, rec->name, mountpoint, name);
		return -EINVAL;
	}
	if ((size_bytes && rec->size_bytes != size_bytes) || rec->logical_block_size != lbs) {
		snprintf(err, errlen, "takeover: the disk handed over (LISTEN_FDS) has %llu bytes "
			 "in blocks of %u, this configuration %llu in blocks of %u",
			 (unsigned long long)rec->size_bytes, rec->logical_block_size,
			 (unsigned long long)size_bytes, lbs);
		return -EINVAL;
	}
	if (td_mount_lookup(mountpoint, &mi) || strcmp(mi.fstype, "fuse.tagdisk") != 0 ||
	    mi.major_nr != rec->mnt_major || mi.minor_nr != rec->mnt_minor) {
		snprintf(err, errlen, "takeover: %s is no longer the mount of the FUSE connection "
			 "handed over (LISTEN_FDS)", mountpoint);
		return -EINVAL;
	}
	if (rec->pid != getpid() && is_tagdiskd(rec->pid)) {
		snprintf(err, errlen, "takeover: the FUSE connection of %s is still served by "
			 "process %d", mountpoint, (int)rec->pid);
		return -EINVAL;
	}
	return 0;
}

/* Return: the @i-th name of @names (colon-separated), in @buf; "" past the end. */
static const char *nth_name(const char *names, unsigned int i, char *buf, size_t len)
{
	const char *p = names ? names : "";

	for (; i && p; i--) {
		p = strchr(p, ':');
		if (p)
			p++;
	}
	if (!p)
		p = "";
	snprintf(buf, len, "%.*s", (int)strcspn(p, ":"), p);
	return buf;
}

int td_takeover_from_env(struct td_takeover *t, const char *mountpoint, const char *name,
			 uint64_t size_bytes, uint32_t lbs, char *err, size_t errlen)
{
	const char *pid_text = getenv("LISTEN_PID");
	const char *fds_text = getenv("LISTEN_FDS");
	char *names = getenv("LISTEN_FDNAMES") ? strdup(getenv("LISTEN_FDNAMES")) : NULL;
	long pid = pid_text ? strtol(pid_text, NULL, 10) : 0;
	long n = fds_text ? strtol(fds_text, NULL, 10) : 0;
	int ret = 0;

	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (!fds_text || pid != (long)getpid() || n <= 0 || n > 64)
		goto out;
	for (int fd = LISTEN_FDS_START; fd < LISTEN_FDS_START + n; fd++) {
		char buf[256];
		const char *fd_name = nth_name(names, (unsigned int)(fd - LISTEN_FDS_START), buf,
					       sizeof(buf));

		if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
			continue;
		if (strcmp(fd_name, TD_TAKEOVER_FUSE_NAME) == 0 && t->fuse_fd < 0)
			t->fuse_fd = fd;
		else if (strcmp(fd_name, TD_TAKEOVER_STATE_NAME) == 0 && t->state_fd < 0)
			t->state_fd = fd;
		else
			close(fd); /* not ours: nothing to keep it for */
	}
	if (t->fuse_fd < 0) {
		if (t->state_fd >= 0)
			close(t->state_fd);
		t->state_fd = -1;
		goto out;
	}
	if (!is_fuse_dev(t->fuse_fd)) {
		snprintf(err, errlen, "takeover: the \"%s\" fd (LISTEN_FDS) is not /dev/fuse",
			 TD_TAKEOVER_FUSE_NAME);
		ret = -EINVAL;
		goto out_close;
	}
	if (t->state_fd < 0) {
		snprintf(err, errlen, "takeover: LISTEN_FDS holds \"%s\" but no \"%s\" record",
			 TD_TAKEOVER_FUSE_NAME, TD_TAKEOVER_STATE_NAME);
		ret = -EINVAL;
		goto out_close;
	}
	t->rec = map_record(t->state_fd, err, errlen);
	if (!t->rec) {
		ret = -EINVAL;
		goto out_close;
	}
	ret = check_adoptable(t, mountpoint, name, size_bytes, lbs, err, errlen);
	if (ret)
		goto out_close;
	t->adopted = true;
	t->in_place = t->rec->pid == getpid();
	t->from_pid = t->rec->pid;
	ret = 1;
	goto out;

out_close:
	td_takeover_fini(t);
out:
	free(names);
	return ret;
}

/* ---- the record --------------------------------------------------------------------------- */

int td_takeover_record(struct td_takeover *t, int fuse_fd, const char *mountpoint,
		       const char *name, uint64_t size_bytes, uint32_t lbs, const void *init_in,
		       size_t init_in_len, const void *init_out, size_t init_out_len, char *err,
		       size_t errlen)
{
	struct td_takeover_record *rec = t->rec;
	struct td_mount_info mi;
	int ret;

	if (init_in_len > TD_TAKEOVER_INIT_MAX || init_out_len > TD_TAKEOVER_INIT_MAX ||
	    strlen(mountpoint) >= sizeof(rec->mountpoint) || strlen(name) >= sizeof(rec->name)) {
		snprintf(err, errlen, "takeover: the connection does not fit the state record");
		return -EINVAL;
	}
	ret = td_mount_lookup(mountpoint, &mi);
	if (ret) {
		snprintf(err, errlen, "takeover: %s is not in the mount table", mountpoint);
		return ret;
	}
	if (!rec) {
		snprintf(err, errlen, "takeover: no state record (td_takeover_prepare)");
		return -EINVAL;
	}
	if (t->fuse_fd < 0) {
		t->fuse_fd = fcntl(fuse_fd, F_DUPFD_CLOEXEC, LISTEN_FDS_START);
		if (t->fuse_fd < 0)
			goto out_errno;
	}
	if (t->adopted)
		rec->takeovers++;
	rec->pid = getpid();
	rec->mnt_major = mi.major_nr;
	rec->mnt_minor = mi.minor_nr;
	rec->size_bytes = size_bytes;
	rec->logical_block_size = lbs;
	memcpy(rec->init_in, init_in, init_in_len);
	rec->init_in_len = (uint32_t)init_in_len;
	memcpy(rec->init_out, init_out, init_out_len);
	rec->init_out_len = (uint32_t)init_out_len;
	snprintf(rec->mountpoint, sizeof(rec->mountpoint), "%s", mountpoint);
	snprintf(rec->name, sizeof(rec->name), "%s", name);
	return 0;

out_errno:
	ret = -errno;
	snprintf(err, errlen, "takeover: the state record: %s", strerror(errno));
	return ret;
}

int td_takeover_prepare(struct td_takeover *t, char *err, size_t errlen)
{
	struct td_takeover_record *rec;

	if (t->rec)
		return 0;
	t->state_fd = memfd_create(TD_TAKEOVER_STATE_NAME, MFD_CLOEXEC);
	if (t->state_fd < 0 || ftruncate(t->state_fd, sizeof(*rec)) < 0)
		goto out_errno;
	rec = mmap(NULL, sizeof(*rec), PROT_READ | PROT_WRITE, MAP_SHARED, t->state_fd, 0);
	if (rec == MAP_FAILED)
		goto out_errno;
	t->rec = rec;
	memcpy(rec->magic, RECORD_MAGIC, sizeof(RECORD_MAGIC));
	rec->version = RECORD_VERSION;
	rec->record_bytes = sizeof(*rec);
	rec->pid = getpid();
	return 0;

out_errno:;
	int ret = -errno;

	snprintf(err, errlen, "takeover: the state record: %s", strerror(errno));
	if (t->state_fd >= 0)
		close(t->state_fd);
	t->state_fd = -1;
	return ret;
}

_Atomic uint32_t *td_takeover_opens(struct td_takeover *t)
{
	return t->rec ? &t->rec->opens : NULL;
}

/* ---- the service manager's fd store --------------------------------------------------------- */

bool td_takeover_has_store(void)
{
	const char *path = getenv("NOTIFY_SOCKET");

	return path && *path;
}

int td_takeover_store(struct td_takeover *t)
{
	int ret;

	if (t->fuse_fd < 0 || t->state_fd < 0)
		return -EINVAL;
	if (!td_takeover_has_store())
		return 0;
	ret = td_notify_fd("FDSTORE=1\nFDNAME=" TD_TAKEOVER_STATE_NAME, t->state_fd);
	if (!ret)
		ret = td_notify_fd("FDSTORE=1\nFDNAME=" TD_TAKEOVER_FUSE_NAME, t->fuse_fd);
	if (ret)
		return ret;
	t->stored = true;
	return 0;
}

void td_takeover_unstore(struct td_takeover *t)
{
	if (!t->stored)
		return;
	td_notify("FDSTOREREMOVE=1\nFDNAME=" TD_TAKEOVER_FUSE_NAME);
	td_notify("FDSTOREREMOVE=1\nFDNAME=" TD_TAKEOVER_STATE_NAME);
	t->stored = false;
}

#ifdef TD_WITH_SYSTEMD
bool td_takeover_restart_pending(void)
{
	sd_bus *bus = NULL;
	sd_bus_message *reply = NULL;
	const char *unit = NULL, *type = NULL;
	char *unit_path = NULL, *type_text = NULL;
	uint32_t job_id = 0;
	const char *job_path = NULL;
	bool pending = false;

	if (!getenv("NOTIFY_SOCKET"))
		return false;
	/* systemd's own socket (root, no D-Bus broker needed), else the system bus. */
	if (sd_bus_new(&bus) < 0)
		return false;
	if (sd_bus_set_address(bus, "unix:path=/run/systemd/private") < 0 ||
	    sd_bus_start(bus) < 0) {
		sd_bus_unref(bus);
		bus = NULL;
		if (sd_bus_open_system(&bus) < 0)
			return false;
	}
	if (sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
			       "org.freedesktop.systemd1.Manager", "GetUnitByPID", NULL, &reply,
			       "u", (uint32_t)getpid()) < 0 ||
	    sd_bus_message_read(reply, "o", &unit) < 0 || !(unit_path = strdup(unit)))
		goto out;
	sd_bus_message_unref(reply);
	reply = NULL;
	if (sd_bus_get_property(bus, "org.freedesktop.systemd1", unit_path,
				"org.freedesktop.systemd1.Unit", "Job", NULL, &reply, "(uo)") < 0 ||
	    sd_bus_message_read(reply, "(uo)", &job_id, &job_path) < 0 || !job_id)
		goto out;
	if (sd_bus_get_property_string(bus, "org.freedesktop.systemd1", job_path,
				       "org.freedesktop.systemd1.Job", "JobType", NULL,
				       &type_text) < 0)
		goto out;
	type = type_text;
	/* A restart's stop half; try-restart and reload-or-restart become "restart" when run. */
	pending = strcmp(type, "restart") == 0 || strcmp(type, "try-restart") == 0;
out:
	free(type_text);
	free(unit_path);
	sd_bus_message_unref(reply);
	sd_bus_unref(bus);
	return pending;
}
#else
bool td_takeover_restart_pending(void)
{
	return false;
}
#endif

/* ---- re-executing in place ------------------------------------------------------------------ */

/* A descriptor number the handover takes over (3 or 4), and what was there, kept aside. */
struct saved_fd {
	int fd;
	int flags; /* its descriptor flags; -1: nothing was open there */
	int copy;  /* what was there, duplicated out of the way */
};

/* Return: 0, or a negative errno (nothing changed). */
static int save_fd(struct saved_fd *s, int fd)
{
	s->fd = fd;
	s->copy = -1;
	s->flags = fcntl(fd, F_GETFD);
	if (s->flags >= 0) {
		s->copy = fcntl(fd, F_DUPFD_CLOEXEC, 64);
		if (s->copy < 0)
			return -errno;
	}
	return 0;
}

static void restore_fd(struct saved_fd *s)
{
	if (s->copy < 0) {
		close(s->fd);
		return;
	}
	if (dup2(s->copy, s->fd) >= 0)
		fcntl(s->fd, F_SETFD, s->flags);
	close(s->copy);
}

static void unset_listen_env(void)
{
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	unsetenv(ENV_DETACHED);
}

int td_takeover_exec(struct td_takeover *t, const char *exe, char *const argv[], bool detached)
{
	struct saved_fd saved[2] = { { .copy = -1 }, { .copy = -1 } };
	char pid[24];
	int fuse_fd, state_fd, ret = 0, ret_self;

	if (t->fuse_fd < 0 || t->state_fd < 0)
		return -EINVAL;
	/*
	 * Out of the way of 3 and 4 first, then onto them (dup2 clears
	 * close-on-exec). What was at 3 and 4 (the syslog pipe, say) is kept
	 * aside and put back if no exec succeeds; nothing is logged meanwhile,
	 * since a line could go to whatever sits at its descriptor now.
	 */
	fuse_fd = fcntl(t->fuse_fd, F_DUPFD_CLOEXEC, 64);
	state_fd = fcntl(t->state_fd, F_DUPFD_CLOEXEC, 64);
	if (fuse_fd < 0 || state_fd < 0)
		ret = -errno;
	if (!ret)
		ret = save_fd(&saved[0], LISTEN_FDS_START);
	if (!ret)
		ret = save_fd(&saved[1], LISTEN_FDS_START + 1);
	if (ret) {
		for (int i = 0; i < 2; i++)
			if (saved[i].copy >= 0)
				close(saved[i].copy);
		goto out;
	}
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (dup2(fuse_fd, LISTEN_FDS_START) < 0 || dup2(state_fd, LISTEN_FDS_START + 1) < 0 ||
	    setenv("LISTEN_PID", pid, 1) || setenv("LISTEN_FDS", "2", 1) ||
	    setenv("LISTEN_FDNAMES", TD_TAKEOVER_FUSE_NAME ":" TD_TAKEOVER_STATE_NAME, 1) ||
	    (detached && setenv(ENV_DETACHED, "1", 1))) {
		ret = -errno;
		ret_self = 0;
	} else {
		execv(exe, argv);
		ret = -errno;
		/* The binary at that path could not run (gone mid-upgrade?): the one running now. */
		execv("/proc/self/exe", argv);
		ret_self = -errno;
	}
	unset_listen_env();
	for (int i = 1; i >= 0; i--)
		restore_fd(&saved[i]);
	if (ret_self)
		td_warnx("restart: executing \"%s\": %s; /proc/self/exe: %s", exe, strerror(-ret),
			 strerror(-ret_self));
out:
	if (fuse_fd >= 0)
		close(fuse_fd);
	if (state_fd >= 0)
		close(state_fd);
	return ret;
}

bool td_takeover_detached(void)
{
	const char *v = getenv(ENV_DETACHED);
	bool detached = v && strcmp(v, "1") == 0;

	unsetenv(ENV_DETACHED);
	return detached;
}

void td_takeover_fini(struct td_takeover *t)
{
	if (t->rec)
		munmap(t->rec, sizeof(*t->rec));
	if (t->state_fd >= 0)
		close(t->state_fd);
	if (t->fuse_fd >= 0)
		close(t->fuse_fd);
	td_takeover_init(t);
}
