// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wlog.c - the write log (tagdisk/wlog.h): numbering entries in the order
 * dm-log-writes defines, staging them in memory, writing them behind the
 * data path, and keeping the super block's count on what is safely written.
 *
 * Places. Every entry has its place in the file from the moment it is
 * reserved: entry n starts at byte next_off as it was then, and takes one
 * sector of header plus its data. The staging ring mirrors the file: the
 * bytes of file offset x live at ring[x % ring_size] until written.
 *
 * The data path (td_wlog_write_batch) copies a write's header and data into
 * the ring and goes on: the memcpy is all it pays (writing 4.5 KiB to a tmpfs
 * file costs several times the whole engine's work per I/O, and a writer
 * batching megabytes pays a fraction of it). The writer thread (td-wlog)
 * writes the ring to the file in order, as far as the first entry not yet
 * copied, a few MiB per call, and rewrites the super block. A copy waits only
 * for room in the ring, which the writer makes by writing what came before:
 * entries before it never wait for it, so the wait always ends.
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
 * The super block. Reservations push boundaries (count, end offset) for
 * every flush, FUA write and mark, and every TD_WLOG_SUPER_EVERY entries; the
 * writer rewrites the super block with the last boundary whose bytes are all
 * written and that no held flush precedes. A flush's end, and a mark, wait
 * until the super block counts them: when an fsync returns, the log file
 * already says so.
 *
 * A session is one start-to-stop; slots carry theirs, so a flush reserved
 * before a stop and ended after a new start writes nothing.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/lock.h"
#include "common/log.h"
#include "tagdisk/request.h"
#include "tagdisk/wlog.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* Entries bigger than this bypass the ring (written by their thread, in turn). */
#define DIRECT_MIN (TD_WLOG_RING_BYTES / 4)
/* Most bytes the writer writes in one call. */
#define WRITE_MAX (4U << 20)
/*
 * The writer is woken when this much is staged, or when someone waits for it;
 * otherwise it looks every IDLE_MS. Waking it per entry cost a context switch
 * each: more than the rest of the log's work.
 */
#define WAKE_BYTES (1U << 20)
#define IDLE_MS	   100

/* Header sectors are padded from here. */
static const uint8_t zero_sector[4096];

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

/* ---- helpers --------------------------------------------------------------------------- */

static bool full_write(int fd, struct iovec *iov, int cnt, uint64_t off, int *err)
{
	while (cnt > 0) {
		ssize_t n = pwritev(fd, iov, TD_MIN(cnt, IOV_MAX), (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			*err = -errno;
			return false;
		}
		if (n == 0) {
			*err = -EIO;
			return false;
		}
		off += (uint64_t)n;
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return true;
}

static int td_wlog_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	int err = 0;

	full_write(fd, &iov, 1, off, &err);
	return err;
}

/* Stop recording after @err; entries from @index on are not trusted. */
static void td_wlog_fail_locked(struct td_wlog *wl, uint64_t index, int err, const char *what)
{
	assert(td_lock_held(&wl->lock));
	if (index < wl->fail_index)
		wl->fail_index = index;
	if (wl->state == TD_WLOG_FAILED)
		return;
	wl->state = TD_WLOG_FAILED;
	atomic_store_explicit(&wl->on, false, memory_order_relaxed);
	wl->error = err;
	snprintf(wl->error_text, sizeof(wl->error_text), "%s: %s", what, strerror(-err));
	td_err("write log: \"%s\": %s; recording stopped, the first %llu entries stay valid",
	       wl->path, wl->error_text, (unsigned long long)wl->fail_index);
	td_cond_broadcast(&wl->progress);
}

static void td_wlog_wake_writer_locked(struct td_wlog *wl)
{
	if (wl->writer_sleeping)
		td_cond_signal(&wl->work);
}

static void td_wlog_progress_locked(struct td_wlog *wl)
{
	if (wl->waiters)
		td_cond_broadcast(&wl->progress);
}

/* Wait for the writer (or a slot leaving a list); the writer writes at once for a waiter. */
static void td_wlog_wait_progress_locked(struct td_wlog *wl)
{
	wl->waiters++;
	td_wlog_wake_writer_locked(wl);
	td_cond_wait(&wl->progress, &wl->lock);
	wl->waiters--;
}

/* Return: the end of what the writer may write now: the first pending entry's place. */
static uint64_t avail_locked(struct td_wlog *wl)
{
	return td_list_empty(&wl->pending)
		       ? wl->next_off
		       : td_list_first_entry(&wl->pending, struct td_wlog_slot, node)->off;
}

/* After the staging of an entry: wake the writer when a good chunk waits for it. */
static void td_wlog_staged_locked(struct td_wlog *wl)
{
	if (wl->writer_sleeping && avail_locked(wl) - wl->written_upto >= WAKE_BYTES)
		td_cond_signal(&wl->work);
}

/* Note that the super block may say @count once the file holds @end_off bytes. */
static void td_wlog_push_boundary_locked(struct td_wlog *wl, uint64_t count, uint64_t end_off)
{
	if (wl->bound_tail - wl->bound_head == wl->bound_cap) {
		size_t cap = wl->bound_cap * 2;
		struct td_wlog_boundary *b = malloc(cap * sizeof(*b));

		if (!b) {
			td_wlog_fail_locked(wl, count - 1, -ENOMEM,
					    "recording a super block boundary");
			return;
		}
		for (size_t i = 0; i < wl->bound_cap; i++)
			b[i] = wl->bounds[(wl->bound_head + i) % wl->bound_cap];
		free(wl->bounds);
		wl->bounds = b;
		wl->bound_tail = wl->bound_cap;
		wl->bound_head = 0;
		wl->bound_cap = cap;
	}
	wl->bounds[wl->bound_tail++ % wl->bound_cap] = (struct td_wlog_boundary){ count, end_off };
}

/* Return: what the super block may count now (taking the boundaries passed). */
static uint64_t super_target_locked(struct td_wlog *wl)
{
	uint64_t limit = wl->fail_index;
	uint64_t target = wl->super_count;

	if (!td_list_empty(&wl->held))
		limit = TD_MIN(limit, td_list_first_entry(&wl->held, struct td_wlog_slot, node)->index);
	while (wl->bound_head != wl->bound_tail) {
		const struct td_wlog_boundary *b = &wl->bounds[wl->bound_head % wl->bound_cap];

		if (b->end_off > wl->written_upto || b->count > limit)
			break;
		target = TD_MAX(target, b->count);
		wl->bound_head++;
	}
	return target;
}

static int td_wlog_write_super(struct td_wlog *wl, int fd, uint64_t count)
{
	struct td_wlog_super s = {
		.magic = TD_WLOG_MAGIC,
		.version = TD_WLOG_VERSION,
		.nr_entries = count,
		.sectorsize = wl->sectorsize,
		.disk_bytes = wl->disk_bytes,
	};
	uint8_t buf[TD_WLOG_SUPER_LEN];
	struct iovec iov[2] = {
		{ .iov_base = buf, .iov_len = sizeof(buf) },
		{ .iov_base = (void *)zero_sector, .iov_len = wl->sectorsize - sizeof(buf) },
	};
	int err = 0;

	td_wlog_encode_super(&s, buf, sizeof(buf));
	full_write(fd, iov, 2, 0, &err);
	return err;
}

/* Reserve the next entry, @data_bytes of data after its header. */
static void reserve_locked(struct td_wlog *wl, struct td_wlog_slot *s, uint64_t data_bytes,
			   bool sync_point)
{
	assert(td_lock_held(&wl->lock));
	s->index = wl->next_index++;
	s->off = wl->next_off;
	s->session = wl->session;
	s->data_bytes = data_bytes;
	s->held = false;
	s->orphan = false;
	s->next = NULL;
	wl->next_off += wl->sectorsize + data_bytes;
	if (sync_point || wl->next_index % TD_WLOG_SUPER_EVERY == 0)
		td_wlog_push_boundary_locked(wl, wl->next_index, wl->next_off);
}

/* Lay out a mark entry named @name (NUL-padded) in @sector. */
static void td_wlog_mark_sector(uint8_t *sector, uint32_t sectorsize, const char *name)
{
	struct td_wlog_entry e = { .flags = TD_WLOG_F_MARK, .data_len = strlen(name) };

	memset(sector, 0, sectorsize);
	td_wlog_encode_entry(&e, sector);
	memcpy(sector + TD_WLOG_ENTRY_LEN, name, e.data_len);
}

/* Return: true when entries may be reserved now. */
static bool recording_locked(const struct td_wlog *wl)
{
	return wl->state == TD_WLOG_ON && !wl->stopping;
}

/* ---- the writer ------------------------------------------------------------------------- */

static void td_wlog_ring_put(struct td_wlog *wl, uint64_t off, const void *src, size_t len);

/*
 * The flushes not yet ended whose sectors lie in [@start, @end) (less than a
 * ring apart, so those bytes of the ring are theirs): a stand-in in the ring,
 * which their end overwrites in the file. A crash in between leaves a valid
 * entry there, and nothing of the ring's past.
 */
static void stand_in_held_locked(struct td_wlog *wl, uint64_t start, uint64_t end)
{
	uint8_t sector[4096];
	bool built = false;
	struct td_list *pos;

	td_list_for_each(pos, &wl->held) {
		struct td_wlog_slot *s = td_list_entry(pos, struct td_wlog_slot, node);

		if (s->off < start)
			continue;
		if (s->off >= end)
			break;
		if (!built)
			td_wlog_mark_sector(sector, wl->sectorsize, TD_WLOG_FLUSH_UNFINISHED);
		built = true;
		td_wlog_ring_put(wl, s->off, sector, wl->sectorsize);
	}
}

/* Write file bytes [@start, @end) from the ring. Return: 0 or a negative errno. */
static int write_from_ring(struct td_wlog *wl, int fd, uint64_t start, uint64_t end)
{
	uint64_t at = start % TD_WLOG_RING_BYTES;
	uint64_t len = end - start;
	uint64_t first = TD_MIN(len, TD_WLOG_RING_BYTES - at);
	struct iovec iov[2] = {
		{ .iov_base = wl->ring + at, .iov_len = first },
		{ .iov_base = wl->ring, .iov_len = len - first },
	};
	int err = 0;

	full_write(fd, iov, len > first ? 2 : 1, start, &err);
	return err;
}

static void *td_wlog_writer_main(void *arg)
{
	struct td_wlog *wl = arg;

	bool timed_out = false;

	td_thread_name("td-wlog");
	td_mutex_lock(&wl->lock);
	for (;;) {
		uint64_t avail = avail_locked(wl);
		int fd = wl->fd;
		int err = 0;
		bool now = avail - wl->written_upto >= WAKE_BYTES || wl->waiters || wl->stopping ||
			   wl->writer_stop || timed_out;

		if (avail > wl->written_upto && now) {
			uint64_t start = wl->written_upto;
			uint64_t end = TD_MIN(avail, start + WRITE_MAX);
			/* After a failure nothing more is counted: make room, write nothing. */
			bool skip = wl->state == TD_WLOG_FAILED;
			uint64_t valid = wl->super_count;

			stand_in_held_locked(wl, start, end);
			wl->writer_busy = true;
			td_mutex_unlock(&wl->lock);
			if (!skip)
				err = write_from_ring(wl, fd, start, end);
			td_mutex_lock(&wl->lock);
			wl->writer_busy = false;
			wl->written_upto = end;
			if (err)
				td_wlog_fail_locked(wl, valid, err, "writing entries");
			td_wlog_progress_locked(wl);
			continue;
		}
		uint64_t target = super_target_locked(wl);

		if (target > wl->super_count && wl->state == TD_WLOG_ON) {
			wl->writer_busy = true;
			td_mutex_unlock(&wl->lock);
			err = td_wlog_write_super(wl, fd, target);
			td_mutex_lock(&wl->lock);
			wl->writer_busy = false;
			if (err)
				td_wlog_fail_locked(wl, wl->super_count, err,
						    "writing the super block");
			else
				wl->super_count = target;
			td_wlog_progress_locked(wl);
			continue;
		}
		if (wl->writer_stop)
			break;
		wl->writer_sleeping = true;
		timed_out = !td_cond_wait_until(&wl->work, &wl->lock,
						td_now_ns() + IDLE_MS * TD_NSEC_PER_MSEC);
		wl->writer_sleeping = false;
	}
	td_mutex_unlock(&wl->lock);
	return NULL;
}

/* ---- creation, start, stop ------------------------------------------------------------- */

struct td_wlog *td_wlog_create(uint32_t sectorsize, uint64_t disk_bytes)
{
	struct td_wlog *wl;

	if (!td_wlog_sectorsize_valid(sectorsize) || !disk_bytes || disk_bytes % sectorsize) {
		errno = EINVAL;
		return NULL;
	}
	wl = calloc(1, sizeof(*wl));
	if (!wl)
		return NULL;
	wl->sectorsize = sectorsize;
	wl->per_sector = sectorsize >> TD_SECTOR_SHIFT;
	wl->disk_bytes = disk_bytes;
	wl->fd = -1;
	wl->fail_index = UINT64_MAX;
	td_list_init(&wl->pending);
	td_list_init(&wl->held);
	td_mutex_init(&wl->ctl);
	td_mutex_init(&wl->lock);
	td_cond_init(&wl->progress);
	td_cond_init(&wl->work);
	return wl;
}

void td_wlog_destroy(struct td_wlog *wl)
{
	td_wlog_stop(wl, NULL);
	assert(td_list_empty(&wl->pending) && td_list_empty(&wl->held));
	td_cond_destroy(&wl->work);
	td_cond_destroy(&wl->progress);
	td_mutex_destroy(&wl->lock);
	td_mutex_destroy(&wl->ctl);
	free(wl);
}

int td_wlog_start(struct td_wlog *wl, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;

	td_mutex_lock(&wl->ctl);
	td_mutex_lock(&wl->lock);
	if (wl->state != TD_WLOG_OFF) {
		snprintf(err, errlen, "already recording to \"%s\" (log stop first)", wl->path);
		td_mutex_unlock(&wl->lock);
		ret = -EBUSY;
		goto out_ctl;
	}
	td_mutex_unlock(&wl->lock);

	if (strlen(path) >= sizeof(wl->path)) {
		snprintf(err, errlen, "\"%.64s...\": path too long", path);
		ret = -ENAMETOOLONG;
		goto out_ctl;
	}
	/* Never truncate a device or wait on a FIFO: only a regular file, or a new one. */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "\"%s\": not a regular file", path);
		ret = -EINVAL;
		goto out_ctl;
	}
	wl->ring = malloc(TD_WLOG_RING_BYTES);
	wl->bound_cap = 1024;
	wl->bounds = malloc(wl->bound_cap * sizeof(*wl->bounds));
	if (!wl->ring || !wl->bounds) {
		snprintf(err, errlen, "out of memory for the log's %u MiB buffer",
			 TD_WLOG_RING_BYTES >> 20);
		ret = -ENOMEM;
		goto out_free;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "\"%s\": %s", path, strerror(errno));
		goto out_free;
	}
	ret = td_wlog_write_super(wl, fd, 0);
	if (ret) {
		snprintf(err, errlen, "\"%s\": writing the super block: %s", path, strerror(-ret));
		goto out_close;
	}

	td_mutex_lock(&wl->lock);
	wl->state = TD_WLOG_ON;
	wl->session++;
	wl->fd = fd;
	snprintf(wl->path, sizeof(wl->path), "%s", path);
	wl->next_index = 0;
	wl->next_off = wl->sectorsize;
	wl->written_upto = wl->sectorsize;
	wl->bound_head = wl->bound_tail = 0;
	wl->super_count = 0;
	wl->fail_index = UINT64_MAX;
	wl->error = 0;
	wl->error_text[0] = '\0';
	wl->writes = wl->discards = wl->flushes = wl->fua = wl->marks = 0;
	wl->writer_stop = false;
	ret = -pthread_create(&wl->writer, NULL, td_wlog_writer_main, wl);
	if (ret) {
		wl->state = TD_WLOG_OFF;
		wl->fd = -1;
		td_mutex_unlock(&wl->lock);
		snprintf(err, errlen, "cannot start the log's writer thread: %s", strerror(-ret));
		goto out_close;
	}
	atomic_store_explicit(&wl->on, true, memory_order_relaxed);
	td_mutex_unlock(&wl->lock);
	td_notice("write log: recording to \"%s\"", path);
	td_mutex_unlock(&wl->ctl);
	return 0;

out_close:
	close(fd);
out_free:
	free(wl->ring);
	free(wl->bounds);
	wl->ring = NULL;
	wl->bounds = NULL;
out_ctl:
	td_mutex_unlock(&wl->ctl);
	return ret;
}

static void status_locked(struct td_wlog *wl, struct td_wlog_status *st)
{
	assert(td_lock_held(&wl->lock));
	memset(st, 0, sizeof(*st));
	st->state = wl->state;
	st->sectorsize = wl->sectorsize;
	if (wl->state == TD_WLOG_OFF)
		return;
	snprintf(st->path, sizeof(st->path), "%s", wl->path);
	st->entries = wl->next_index;
	st->entries_valid = wl->super_count;
	st->bytes = wl->next_off;
	st->writes = wl->writes;
	st->discards = wl->discards;
	st->flushes = wl->flushes;
	st->fua = wl->fua;
	st->marks = wl->marks;
	st->error = wl->error;
	snprintf(st->error_text, sizeof(st->error_text), "%s", wl->error_text);
}

int td_wlog_stop(struct td_wlog *wl, struct td_wlog_status *st)
{
	uint8_t sector[4096];
	int fd, ret = 0;

	td_mutex_lock(&wl->ctl);
	td_mutex_lock(&wl->lock);
	if (wl->state == TD_WLOG_OFF) {
		td_mutex_unlock(&wl->lock);
		td_mutex_unlock(&wl->ctl);
		return -ENOENT;
	}
	/* Nothing new is reserved from now on; what was reserved gets written. */
	atomic_store_explicit(&wl->on, false, memory_order_relaxed);
	wl->stopping = true;
	td_wlog_wake_writer_locked(wl);
	td_wlog_progress_locked(wl); /* flushes waiting to be counted give up */
	while (!td_list_empty(&wl->pending) || wl->ending || wl->written_upto < wl->next_off ||
	       wl->writer_busy)
		td_wlog_wait_progress_locked(wl);
	fd = wl->fd;
	/*
	 * Flushes still at the drive: a stand-in each, written here under the
	 * lock (their slots are the queue's, and their end frees them as soon as
	 * they are orphans), and their end writes nothing.
	 */
	td_wlog_mark_sector(sector, wl->sectorsize, TD_WLOG_FLUSH_UNFINISHED);
	while (!td_list_empty(&wl->held)) {
		struct td_wlog_slot *s = td_list_first_entry(&wl->held, struct td_wlog_slot, node);
		int err = 0;

		if (s->index < wl->fail_index)
			err = td_wlog_pwrite(fd, sector, wl->sectorsize, s->off);
		if (err)
			td_wlog_fail_locked(wl, s->index, err, "writing an entry");
		s->orphan = true;
		td_list_del(&s->node);
		wl->flushes--;
		wl->marks++;
	}
	wl->writer_stop = true;
	td_wlog_wake_writer_locked(wl);
	td_mutex_unlock(&wl->lock);
	pthread_join(wl->writer, NULL);

	td_mutex_lock(&wl->lock);
	uint64_t count = TD_MIN(wl->next_index, wl->fail_index);

	td_mutex_unlock(&wl->lock);
	ret = td_wlog_write_super(wl, fd, count);
	if (!ret && fdatasync(fd) < 0 && errno != EINVAL)
		ret = -errno;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	td_mutex_lock(&wl->lock);
	if (ret)
		td_wlog_fail_locked(wl, count, ret, "closing");
	else
		wl->super_count = count;
	if (wl->error)
		ret = -EIO;
	td_notice("write log: stopped \"%s\": %llu entries, %llu bytes%s%s", wl->path,
		  (unsigned long long)wl->super_count, (unsigned long long)wl->next_off,
		  wl->error ? "; failed: " : "", wl->error ? wl->error_text : "");
	wl->fd = -1;
	if (st)
		status_locked(wl, st);
	wl->state = TD_WLOG_OFF;
	wl->stopping = false;
	free(wl->ring);
	free(wl->bounds);
	wl->ring = NULL;
	wl->bounds = NULL;
	td_mutex_unlock(&wl->lock);
	td_mutex_unlock(&wl->ctl);
	return ret;
}

void td_wlog_get_status(struct td_wlog *wl, struct td_wlog_status *st)
{
	td_mutex_lock(&wl->lock);
	status_locked(wl, st);
	td_mutex_unlock(&wl->lock);
}

const char *td_wlog_state_name(enum td_wlog_state s)
{
	switch (s) {
	case TD_WLOG_OFF:
		return "off";
	case TD_WLOG_ON:
		return "on";
	case TD_WLOG_FAILED:
		return "failed";
	}
	return "?";
}

bool td_wlog_on(const struct td_wlog *wl)
{
	return atomic_load_explicit(&wl->on, memory_order_relaxed);
}

/* ---- staging entries -------------------------------------------------------------------- */

/* Copy @len bytes of @src to the ring bytes of file offset @off. */
static void td_wlog_ring_put(struct td_wlog *wl, uint64_t off, const void *src, size_t len)
{
	size_t at = (size_t)(off % TD_WLOG_RING_BYTES);
	size_t first = TD_MIN(len, TD_WLOG_RING_BYTES - at);

	memcpy(wl->ring + at, src, first);
	memcpy(wl->ring, (const uint8_t *)src + first, len - first);
}

static void td_wlog_ring_zero(struct td_wlog *wl, uint64_t off, size_t len)
{
	size_t at = (size_t)(off % TD_WLOG_RING_BYTES);
	size_t first = TD_MIN(len, TD_WLOG_RING_BYTES - at);

	memset(wl->ring + at, 0, first);
	memset(wl->ring, 0, len - first);
}

/*
 * An entry bigger than a quarter of the ring, in its turn: once the writer has
 * written everything before it (it cannot go further: the entry is pending),
 * write it straight to the file and move the writer past it. The data of
 * write zeroes is left a hole, made part of the file by its last byte.
 * Return: 0 or a negative errno.
 */
static int td_wlog_write_direct(struct td_wlog *wl, struct td_wlog_slot *s, int fd)
{
	struct iovec iov[TD_RQ_MAX_BIOS + 2];
	const struct td_bio *bio = s->bio;
	int cnt = 0, err = 0;

	iov[cnt++] = (struct iovec){ s->header, TD_WLOG_ENTRY_LEN };
	iov[cnt++] = (struct iovec){ (void *)zero_sector, wl->sectorsize - TD_WLOG_ENTRY_LEN };
	for (uint32_t k = 0; k < s->nr_bios && cnt < (int)TD_ARRAY_SIZE(iov); k++, bio = bio->next)
		iov[cnt++] = (struct iovec){ bio->data, (size_t)bio->nr_sectors << TD_SECTOR_SHIFT };
	if (!full_write(fd, iov, cnt, s->off, &err))
		return err;
	if (s->zeroes && s->data_bytes)
		err = td_wlog_pwrite(fd, zero_sector, 1,
				     s->off + wl->sectorsize + s->data_bytes - 1);
	return err;
}

/* Put data slot @s (pending) in the ring, or in the file; then it leaves pending. */
static void stage(struct td_wlog *wl, struct td_wlog_slot *s)
{
	uint64_t span = wl->sectorsize + s->data_bytes;
	bool direct = span > DIRECT_MIN;
	int err = 0;

	td_mutex_lock(&wl->lock);
	if (direct) {
		while (wl->written_upto != s->off ||
		       td_list_first_entry(&wl->pending, struct td_wlog_slot, node) != s)
			td_wlog_wait_progress_locked(wl);
	} else {
		while (s->off + span > wl->written_upto + TD_WLOG_RING_BYTES)
			td_wlog_wait_progress_locked(wl);
	}
	int fd = wl->fd;
	bool skip = wl->state == TD_WLOG_FAILED;

	td_mutex_unlock(&wl->lock);

	if (direct) {
		if (!skip)
			err = td_wlog_write_direct(wl, s, fd);
	} else {
		const struct td_bio *bio = s->bio;
		uint64_t at = s->off;

		td_wlog_ring_put(wl, at, s->header, TD_WLOG_ENTRY_LEN);
		td_wlog_ring_zero(wl, at + TD_WLOG_ENTRY_LEN, wl->sectorsize - TD_WLOG_ENTRY_LEN);
		at += wl->sectorsize;
		if (s->zeroes) {
			td_wlog_ring_zero(wl, at, s->data_bytes);
		} else {
			for (uint32_t k = 0; k < s->nr_bios; k++, bio = bio->next) {
				size_t len = (size_t)bio->nr_sectors << TD_SECTOR_SHIFT;

				td_wlog_ring_put(wl, at, bio->data, len);
				at += len;
			}
		}
	}

	td_mutex_lock(&wl->lock);
	bool first = td_list_first_entry(&wl->pending, struct td_wlog_slot, node) == s;

	td_list_del(&s->node);
	if (direct)
		wl->written_upto = s->off + span;
	if (err)
		td_wlog_fail_locked(wl, s->index, err, "writing an entry");
	if (first || direct)
		td_wlog_staged_locked(wl);
	td_wlog_progress_locked(wl);
	td_mutex_unlock(&wl->lock);
}

/*
 * Wait until the super block counts entry @index, unless it cannot yet: the
 * log stops or failed, or an earlier flush is still at the drive (a flush on
 * another hardware queue, hung maybe: the count stops before it, and this
 * entry is counted when it ends).
 */
static void wait_counted_locked(struct td_wlog *wl, uint64_t index)
{
	while (wl->super_count <= index && wl->state == TD_WLOG_ON && !wl->stopping &&
	       index < wl->fail_index &&
	       (td_list_empty(&wl->held) ||
		td_list_first_entry(&wl->held, struct td_wlog_slot, node)->index >= index))
		td_wlog_wait_progress_locked(wl);
}

/*
 * Write the sector of flush slot @s, which ended with s->err: once the writer
 * has gone past it, straight to the file; then wait until the super block
 * counts it. Frees @s.
 */
static void end_flush(struct td_wlog *wl, struct td_wlog_slot *s)
{
	uint8_t sector[4096];
	int err = 0;

	td_mutex_lock(&wl->lock);
	if (s->orphan || s->session != wl->session) {
		/* Stood in for by a stop: the file is closed, or another's. */
		td_mutex_unlock(&wl->lock);
		free(s);
		return;
	}
	/* Still on held (the super block must not count it yet), but no stand-in's. */
	s->held = false;
	wl->ending++;
	td_wlog_wake_writer_locked(wl);
	while (wl->written_upto < s->off + wl->sectorsize)
		td_wlog_wait_progress_locked(wl);
	int fd = wl->fd;
	bool skip = s->index >= wl->fail_index;

	if (s->err) {
		wl->flushes--;
		wl->marks++;
	}
	td_mutex_unlock(&wl->lock);

	if (s->err) {
		td_wlog_mark_sector(sector, wl->sectorsize, TD_WLOG_FLUSH_FAILED);
	} else {
		memset(sector, 0, wl->sectorsize);
		memcpy(sector, s->header, TD_WLOG_ENTRY_LEN);
	}
	if (!skip)
		err = td_wlog_pwrite(fd, sector, wl->sectorsize, s->off);

	td_mutex_lock(&wl->lock);
	td_list_del(&s->node);
	wl->ending--;
	if (err)
		td_wlog_fail_locked(wl, s->index, err, "writing a flush");
	td_wlog_wake_writer_locked(wl);
	td_wlog_progress_locked(wl);
	/* An fsync that returns has its flush counted in the file. */
	wait_counted_locked(wl, s->index);
	td_mutex_unlock(&wl->lock);
	free(s);
}

/* ---- marks ------------------------------------------------------------------------------ */

int td_wlog_mark(struct td_wlog *wl, const char *name, uint64_t *index)
{
	struct td_wlog_slot s;
	size_t len = strlen(name);
	struct td_wlog_entry e = { .flags = TD_WLOG_F_MARK, .data_len = len };
	int ret = 0;

	if (!len || len > td_wlog_mark_max(wl->sectorsize))
		return -EINVAL;
	td_mutex_lock(&wl->ctl);
	td_mutex_lock(&wl->lock);
	if (!recording_locked(wl)) {
		td_mutex_unlock(&wl->lock);
		td_mutex_unlock(&wl->ctl);
		return -ENOENT;
	}
	reserve_locked(wl, &s, 0, true);
	td_list_add_tail(&s.node, &wl->pending);
	wl->marks++;
	td_mutex_unlock(&wl->lock);

	/* The name follows the fields in the header sector: stage it as a whole. */
	uint8_t sector[4096];

	td_wlog_mark_sector(sector, wl->sectorsize, name);
	td_wlog_encode_entry(&e, s.header);
	s.zeroes = false;
	s.err = 0;
	s.bio = NULL;
	s.nr_bios = 0;
	td_mutex_lock(&wl->lock);
	while (s.off + wl->sectorsize > wl->written_upto + TD_WLOG_RING_BYTES)
		td_wlog_wait_progress_locked(wl);
	td_mutex_unlock(&wl->lock);
	td_wlog_ring_put(wl, s.off, sector, wl->sectorsize);

	td_mutex_lock(&wl->lock);
	bool first = td_list_first_entry(&wl->pending, struct td_wlog_slot, node) == &s;

	td_list_del(&s.node);
	if (first)
		td_wlog_wake_writer_locked(wl);
	td_wlog_progress_locked(wl);
	wait_counted_locked(wl, s.index);
	if (s.index >= wl->fail_index || wl->state == TD_WLOG_FAILED)
		ret = -EIO;
	td_mutex_unlock(&wl->lock);
	td_mutex_unlock(&wl->ctl);
	*index = s.index;
	return ret;
}

/* ---- the data path ---------------------------------------------------------------------- */

bool td_wlog_reserve_write(struct td_wlog *wl, struct td_wlog_batch *b, enum td_op op, bool fua,
			   uint64_t sector, uint32_t nr_sectors, const struct td_bio *bio,
			   uint32_t nr_bios)
{
	struct td_wlog_slot *s;
	struct td_wlog_entry e = {
		.sector = sector / wl->per_sector,
		.nr_sectors = nr_sectors / wl->per_sector,
	};
	uint64_t data_bytes = 0;

	assert(td_op_is_write(op) && !td_wlog_batch_full(b));
	assert(sector % wl->per_sector == 0 && nr_sectors % wl->per_sector == 0);
	if (op == TD_OP_DISCARD)
		e.flags = TD_WLOG_F_DISCARD;
	else
		data_bytes = e.nr_sectors * wl->sectorsize;
	if (fua && op == TD_OP_WRITE)
		e.flags |= TD_WLOG_F_FUA;

	td_mutex_lock(&wl->lock);
	if (!recording_locked(wl)) {
		td_mutex_unlock(&wl->lock);
		return false;
	}
	s = &b->slots[b->nr++];
	reserve_locked(wl, s, data_bytes, e.flags & TD_WLOG_F_FUA);
	td_list_add_tail(&s->node, &wl->pending);
	if (op == TD_OP_DISCARD)
		wl->discards++;
	else
		wl->writes++;
	if (e.flags & TD_WLOG_F_FUA)
		wl->fua++;
	td_mutex_unlock(&wl->lock);

	td_wlog_encode_entry(&e, s->header);
	s->zeroes = op == TD_OP_WRITE_ZEROES;
	s->err = 0;
	s->bio = op == TD_OP_WRITE ? bio : NULL;
	s->nr_bios = op == TD_OP_WRITE ? nr_bios : 0;
	return true;
}

struct td_wlog_slot *td_wlog_reserve_flush(struct td_wlog *wl)
{
	struct td_wlog_entry e = { .flags = TD_WLOG_F_FLUSH };
	struct td_wlog_slot *s = malloc(sizeof(*s));

	td_mutex_lock(&wl->lock);
	if (!recording_locked(wl)) {
		td_mutex_unlock(&wl->lock);
		free(s);
		return NULL;
	}
	if (!s) {
		/* Without its flush the log would lie about what is durable: stop here. */
		td_wlog_fail_locked(wl, wl->next_index, -ENOMEM, "recording a flush");
		td_mutex_unlock(&wl->lock);
		return NULL;
	}
	reserve_locked(wl, s, 0, true);
	s->held = true;
	td_list_add_tail(&s->node, &wl->held);
	wl->flushes++;
	td_mutex_unlock(&wl->lock);

	td_wlog_encode_entry(&e, s->header);
	s->zeroes = false;
	s->err = 0;
	s->bio = NULL;
	s->nr_bios = 0;
	return s;
}

void td_wlog_write_flushes(struct td_wlog *wl, struct td_wlog_slot *chain)
{
	while (chain) {
		struct td_wlog_slot *s = chain;

		chain = chain->next;
		end_flush(wl, s);
	}
}

void td_wlog_write_batch(struct td_wlog *wl, struct td_wlog_batch *b)
{
	/* Writes first: a flush waits for the writer, which may wait for them. */
	for (unsigned int i = 0; i < b->nr; i++)
		stage(wl, &b->slots[i]);
	b->nr = 0;
	td_wlog_write_flushes(wl, b->flushes);
	b->flushes = NULL;
}
