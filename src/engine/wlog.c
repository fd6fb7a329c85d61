// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wlog.c - the write log (tagdisk/wlog.h): creating it, starting and stopping
 * a session, its status, and failing. The recording path is wlog_record.c,
 * the file and its writer wlog_writer.c; what they share, wlog_int.h.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/lock.h"
#include "common/log.h"
#include "wlog_int.h"

/* Stop recording after @err; entries from @index on are not trusted. */
void td_wlog_fail_locked(struct td_wlog *wl, uint64_t index, int err, const char *what)
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
