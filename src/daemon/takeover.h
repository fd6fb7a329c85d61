/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * takeover.h - the disk outlives its daemon: a successor takes the FUSE
 * connection over instead of mounting.
 *
 * What survives a daemon is its /dev/fuse file: while some process holds it
 * open, the kernel keeps the connection, the mount, and the requests the
 * daemon had read and not answered (on the fuse device's processing list).
 * A successor that gets the file sends FUSE_NOTIFY_RESEND, which puts those
 * requests back in front of the pending ones, marked FUSE_UNIQUE_RESEND, and
 * serves on: applications see a pause, not an error. What the kernel will not
 * say again goes beside it in a small shared record (a memfd): the
 * negotiated FUSE_INIT (both halves), the mount it serves, the disk's size,
 * the serving pid, the opens of the disk file not yet released.
 *
 * Who holds the files between two daemons:
 *  - a service manager's fd store (systemd's FDSTORE=1 / FDNAME=, given back
 *    as LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES), after a crash or when
 *    SIGTERM came with a restart pending;
 *  - the daemon itself across execve() (td_takeover_exec(): tagdiskctl
 *    restart, SIGUSR2), with the same variables set for its new image.
 * The names are "tagdisk-fuse" and "tagdisk-state".
 *
 * Only FUSE's classic transport survives this way: a ring's commands die
 * with their task, and the kernel (Linux 6.18) neither resends nor lets a new
 * ring fetch the requests a dead ring's entries held. With io_uring the
 * daemon does not offer its fds for takeover.
 *
 * Lifetime: one struct td_takeover per daemon; td_takeover_fini() closes
 * what it holds. Not thread safe except td_takeover_opens() (an atomic in
 * the shared record).
 */
#ifndef TAGDISK_TAKEOVER_H
#define TAGDISK_TAKEOVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/compiler.h"

#define TD_TAKEOVER_FUSE_NAME  "tagdisk-fuse"
#define TD_TAKEOVER_STATE_NAME "tagdisk-state"
#define TD_TAKEOVER_INIT_MAX   256 /* bytes of either half of FUSE_INIT kept */

/* The shared record (in the memfd): version 1. Written by the serving daemon. */
struct td_takeover_record {
	char magic[8];		  /* "tagdisk\0" */
	uint32_t version;	  /* 1 */
	uint32_t record_bytes;	  /* sizeof this struct, as the writer knew it */
	int32_t pid;		  /* the daemon serving the connection */
	uint32_t mnt_major;	  /* the mount's device (mountinfo's maj:min) */
	uint32_t mnt_minor;
	uint32_t logical_block_size;
	uint64_t size_bytes;
	uint64_t takeovers;	  /* successors so far */
	uint32_t init_in_len;	  /* the kernel's FUSE_INIT arguments (no header) */
	uint32_t init_out_len;	  /* our reply's arguments */
	uint8_t init_in[TD_TAKEOVER_INIT_MAX];
	uint8_t init_out[TD_TAKEOVER_INIT_MAX];
	_Atomic uint32_t opens;	  /* opens of the disk file not yet released */
	char mountpoint[4096];
	char name[256];
};

struct td_takeover {
	int fuse_fd;			 /* the connection: adopted, or ours once mounted; -1 */
	int state_fd;			 /* the memfd; -1 */
	struct td_takeover_record *rec;	 /* its mapping; NULL */
	bool adopted;			 /* fuse_fd came from LISTEN_FDS */
	bool in_place;			 /* from our own execve() (same pid) */
	pid_t from_pid;			 /* adopted: who served it before */
	bool stored;			 /* offered to the service manager's fd store */
};

/* An empty takeover (no fds). */
void td_takeover_init(struct td_takeover *t) td_nonnull(1);

/*
 * At start: the fds LISTEN_FDS hands this process (LISTEN_PID must be ours;
 * the variables are removed from the environment either way). Return: 0 and
 * nothing adopted when there is no "tagdisk-fuse" fd; 1 with t->fuse_fd,
 * t->rec set, after checking that the fd is /dev/fuse, the record is ours
 * and names @mountpoint, @name, @size_bytes and @lbs, that the mount is still
 * there with the recorded device, and that its recorded daemon is gone (or is
 * this process, re-executed); or -EINVAL with one clear message in @err
 * (nothing is changed: the caller exits 2).
 */
int td_takeover_from_env(struct td_takeover *t, const char *mountpoint, const char *name,
			 uint64_t size_bytes, uint32_t lbs, char *err, size_t errlen)
	td_nonnull(1, 2, 3, 6);

/*
 * Make the shared record, empty but for its opens counter (nothing to do for
 * an adopted connection, whose record came with it). Return: 0 or a negative
 * errno (message in @err).
 */
int td_takeover_prepare(struct td_takeover *t, char *err, size_t errlen) td_nonnull(1, 2);

/*
 * Once serving: fill (adopted: update) the shared record for the
 * connection @fuse_fd (ours to keep open) mounted at @mountpoint, with the
 * FUSE_INIT halves. Return: 0 or a negative errno (message in @err).
 */
int td_takeover_record(struct td_takeover *t, int fuse_fd, const char *mountpoint,
		       const char *name, uint64_t size_bytes, uint32_t lbs, const void *init_in,
		       size_t init_in_len, const void *init_out, size_t init_out_len, char *err,
		       size_t errlen) td_nonnull(1, 3, 4, 11);

/* Return: the opens counter in the shared record (NULL before td_takeover_prepare()). */
_Atomic uint32_t *td_takeover_opens(struct td_takeover *t) td_nonnull(1);

/*
 * Offer both fds to the service manager's fd store ($NOTIFY_SOCKET; nothing
 * without one). Return: 0 or a negative errno.
 */
int td_takeover_store(struct td_takeover *t) td_nonnull(1);

/* Return: whether a service manager's fd store is there ($NOTIFY_SOCKET). */
bool td_takeover_has_store(void);

/* A stop, not a restart: take both fds out of the store again. */
void td_takeover_unstore(struct td_takeover *t) td_nonnull(1);

/*
 * Whether the service manager will start this unit again right after this
 * SIGTERM (a restart job, not a stop): the fds in its store then go to the
 * successor, and the daemon must leave its mount in place. Asks systemd over
 * D-Bus (when built with libsystemd); false when it cannot tell.
 */
bool td_takeover_restart_pending(void);

/*
 * Re-execute @exe with @argv in this process, handing the connection and the
 * record to the new image (LISTEN_FDS=2 with our pid; @detached: the daemon
 * had gone to the background, so its successor must not fork again).
 * Returns only on failure, with a negative errno.
 */
int td_takeover_exec(struct td_takeover *t, const char *exe, char *const argv[], bool detached)
	td_nonnull(1, 2, 3);

/* Return: whether this process was started by td_takeover_exec() of a detached daemon. */
bool td_takeover_detached(void);

/* Close what @t holds (the record's mapping, the fds). */
void td_takeover_fini(struct td_takeover *t) td_nonnull(1);

#endif /* TAGDISK_TAKEOVER_H */
