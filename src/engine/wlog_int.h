/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wlog_int.h - what the parts of the write log (tagdisk/wlog.h) share: the
 * log itself, its lists, and the calls between the files.
 *
 *   wlog.c         the log's life: creation, start (a session), stop (the
 *                  stand-ins for running flushes, the last super block),
 *                  status, and failure, which stops recording;
 *   wlog_record.c  the recording path the queue calls: reserving entries in
 *                  dm-log-writes' order, staging them in the ring, ending
 *                  flushes and waiting until they are counted, marks;
 *   wlog_writer.c  the file: the staging ring, the writer thread (td-wlog),
 *                  the super block and its boundaries, the file's I/O.
 *
 * Places. Every entry has its place in the file from the moment it is
 * reserved: entry n starts at byte next_off as it was then, and takes one
 * sector of header plus its data. The staging ring mirrors the file: the
 * bytes of file offset x live at ring[x % ring_size] until written.
 *
 * Lists, under the log lock:
 *
 *   pending  writes, discards and marks reserved and not yet in the ring (or,
 *            for an entry bigger than a quarter of the ring, not yet written
 *            straight to the file); the first one bounds the writer
 *   held     flushes issued and not yet ended. A flush's sector is written by
 *            its end, straight to the file once the writer has gone past it
 *            (whatever the ring held there is overwritten), so a hung flush
 *            never stops the writer; td_wlog_stop() writes a stand-in for one
 *            still held and marks it orphan
 *
 * A session is one start-to-stop; slots carry theirs, so a flush reserved
 * before a stop and ended after a new start writes nothing.
 *
 * LOCKING: ctl serialises start, stop and mark and is taken before lock, the
 * log lock (the order with the queue's locks: tagdisk/wlog.h). lock guards
 * the fields below that say so; a function named _locked expects it held.
 * The ring's bytes are under no lock: an entry's are copied by the thread
 * that reserved it, once the writer is less than a ring behind its end, and
 * the writer reads only bytes below the first pending entry's place.
 */
#ifndef TAGDISK_WLOG_INT_H
#define TAGDISK_WLOG_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/list.h"
#include "common/lock.h"
#include "tagdisk/wlog.h"

struct td_wlog_boundary {
	uint64_t count;	  /* the super block may say this many entries... */
	uint64_t end_off; /* ...once the file holds this many bytes */
};

struct td_wlog {
	/* Fixed at creation. */
	uint32_t sectorsize;
	uint32_t per_sector; /* 512-byte sectors per log sector */
	uint64_t disk_bytes;

	/* Set under lock; read without it as a hint (td_wlog_on). */
	atomic_bool on;

	struct td_mutex ctl; /* start, stop and mark, one at a time; before lock */
	struct td_mutex lock;
	struct td_cond progress; /* the writer wrote, a slot left a list, the super moved */
	struct td_cond work;	 /* wakes the writer */

	/* Guarded by lock. */
	enum td_wlog_state state;
	bool stopping; /* td_wlog_stop() is closing: nothing new is reserved */
	unsigned int session;
	int fd; /* -1 when off */
	char path[PATH_MAX];
	uint8_t *ring;
	uint64_t next_index;
	uint64_t next_off;
	uint64_t written_upto;	/* every byte below is in the file (held flushes' aside) */
	struct td_list pending; /* see the top */
	struct td_list held;
	unsigned int ending;	/* flushes taken off held whose sector is being written */
	struct td_wlog_boundary *bounds; /* a FIFO: [bound_head, bound_tail) of bound_cap */
	size_t bound_head, bound_tail, bound_cap;
	uint64_t super_count;	 /* what the super block in the file says */
	uint64_t fail_index;	 /* entries from here on are not trusted (UINT64_MAX: none) */
	unsigned int waiters;	 /* threads waiting on progress */
	bool writer_busy;	 /* the writer is in a write call */
	bool writer_sleeping;
	bool writer_stop;
	pthread_t writer;
	int error;
	char error_text[128];
	uint64_t writes, discards, flushes, fua, marks;
};

/* wlog.c */
/*
 * Stop recording after @err (what failed: @what): entries from @index on are
 * not trusted, and the log is TD_WLOG_FAILED until td_wlog_stop(). Log lock held.
 */
void td_wlog_fail_locked(struct td_wlog *wl, uint64_t index, int err, const char *what);

/* wlog_writer.c */
/* The writer thread's function (td-wlog), started by td_wlog_start() with @arg the log. */
void *td_wlog_writer_main(void *arg);
/* Write all @len bytes of @buf at @off of @fd. Return: 0 or a negative errno. */
int td_wlog_pwrite(int fd, const void *buf, size_t len, uint64_t off);
/* Write a super block counting @count entries to @fd. Return: 0 or a negative errno. */
int td_wlog_write_super(struct td_wlog *wl, int fd, uint64_t count);
/* Note that the super block may say @count once the file holds @end_off bytes. Log lock held. */
void td_wlog_push_boundary_locked(struct td_wlog *wl, uint64_t count, uint64_t end_off);
/* Lay out a mark entry named @name (NUL-padded) in the @sectorsize bytes of @sector. */
void td_wlog_mark_sector(uint8_t *sector, uint32_t sectorsize, const char *name);
/* Copy @len bytes of @src (or zeroes) to the ring bytes of file offset @off. No lock. */
void td_wlog_ring_put(struct td_wlog *wl, uint64_t off, const void *src, size_t len);
void td_wlog_ring_zero(struct td_wlog *wl, uint64_t off, size_t len);
/*
 * Write the entry of slot @s, bigger than a quarter of the ring, straight to
 * @fd, the writer having written everything before it. No lock.
 * Return: 0 or a negative errno.
 */
int td_wlog_write_direct(struct td_wlog *wl, struct td_wlog_slot *s, int fd);
/* After the staging of an entry: wake the writer when a good chunk waits for it. Log lock held. */
void td_wlog_staged_locked(struct td_wlog *wl);

/* Every part, log lock held: waking the writer, and waiting for it. */

/* Wake the writer if it sleeps. */
static inline void td_wlog_wake_writer_locked(struct td_wlog *wl)
{
	if (wl->writer_sleeping)
		td_cond_signal(&wl->work);
}

/* Wake the threads waiting on progress, if any. */
static inline void td_wlog_progress_locked(struct td_wlog *wl)
{
	if (wl->waiters)
		td_cond_broadcast(&wl->progress);
}

/* Wait for the writer (or a slot leaving a list); the writer writes at once for a waiter. */
static inline void td_wlog_wait_progress_locked(struct td_wlog *wl)
{
	wl->waiters++;
	td_wlog_wake_writer_locked(wl);
	td_cond_wait(&wl->progress, &wl->lock);
	wl->waiters--;
}

#endif /* TAGDISK_WLOG_INT_H */
