// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wlog.c - the write log (tagdisk/wlog.h): numbering entries in the order
 * dm-log-writes defines, writing them where their number puts them, and
 * keeping the super block's count on what is safely written.
 *
 * Every entry has its place in the file from the moment it is reserved:
 * entry n starts at byte next_off as it was then, and takes one sector of
 * header plus its data. So entries need not be written in order, and the
 * thread that reserved one writes it itself, with no lock held, straight
 * from the bios (no copy, no writer thread): a completion writes its batch of
 * entries with one pwritev() when their places follow each other, as they do
 * for requests completed together.
 *
 * wl->reserved lists the entries reserved and not yet written, by number.
 * The first of them bounds what the super block may count (the prefix): all
 * entries before it are in the file. States of an entry on that list:
 *
 *   held      a flush issued to the drive and not ended; only it may stay
 *             there long (a hung flush), so td_wlog_stop() writes a stand-in
 *             mark for it and marks it orphan: its end writes nothing
 *   claimed   a write, discard, write zeroes or mark, or an ended flush,
 *             being written by the thread that holds it; td_wlog_stop()
 *             waits for these (they take one write call)
 *
 * The super block is written by one thread at a time (super_busy), always
 * with a count at least as large as the last, after the entries it counts.
 *
 * A session is one start-to-stop; slots carry theirs, so a flush reserved
 * before a stop and ended after a new start writes nothing.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "common/lock.h"
#include "common/log.h"
#include "tagdisk/wlog.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* Header sectors are padded from here. */
static const uint8_t zero_sector[4096];

struct td_wlog {
	/* Fixed at creation. */
	uint32_t sectorsize;
	uint32_t per_sector; /* 512-byte sectors per log sector */
	uint64_t disk_bytes;

	/* Set under lock; read without it as a hint (td_wlog_on). */
	atomic_bool on;

	struct td_mutex ctl; /* start, stop and mark, one at a time; before lock */
	struct td_mutex lock;
	struct td_cond idle; /* an entry or the super block was written: stop looks again */

	/* Guarded by lock. */
	enum td_wlog_state state;
	unsigned int session;
	int fd; /* -1 when off; closed by stop only once nothing is being written */
	char path[PATH_MAX];
	uint64_t next_index;
	uint64_t next_off;
	struct td_list reserved; /* reserved, not yet written, by index */
	uint64_t super_count;	 /* what the super block in the file says */
	uint64_t sync_due;	 /* one past the last flush, FUA or mark entry written */
	bool super_busy;	 /* a thread is writing the super block */
	bool stopping;		 /* td_wlog_stop() is closing: nothing new is reserved */
	uint64_t fail_index;	 /* entries from here on are not trusted (UINT64_MAX: none) */
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

static int write_buf(int fd, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	int err = 0;

	full_write(fd, &iov, 1, off, &err);
	return err;
}

/* Return: the first entry not yet written: the super block may count everything before it. */
static uint64_t prefix_locked(struct td_wlog *wl)
{
	uint64_t p = wl->next_index;

	assert(td_lock_held(&wl->lock));
	if (!td_list_empty(&wl->reserved))
		p = td_list_first_entry(&wl->reserved, struct td_wlog_slot, node)->index;
	return TD_MIN(p, wl->fail_index);
}

/* Stop recording after @err on entry @index (what failed is @what). */
static void fail_locked(struct td_wlog *wl, uint64_t index, int err, const char *what)
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
}

static int write_super(struct td_wlog *wl, int fd, uint64_t count)
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

/*
 * Rewrite the super block when the prefix passed a flush, FUA or mark entry,
 * or TD_WLOG_SUPER_EVERY entries, since it was last written (with @force:
 * whenever it moved). Drops the lock around the write.
 */
static void super_update_locked(struct td_wlog *wl, bool force)
{
	assert(td_lock_held(&wl->lock));
	while (!wl->super_busy && wl->fd >= 0) {
		uint64_t count = prefix_locked(wl);
		int fd = wl->fd;

		if (count <= wl->super_count)
			break;
		if (!force && wl->sync_due <= wl->super_count &&
		    count - wl->super_count < TD_WLOG_SUPER_EVERY)
			break;
		wl->super_busy = true;
		td_mutex_unlock(&wl->lock);
		int err = write_super(wl, fd, count);

		td_mutex_lock(&wl->lock);
		wl->super_busy = false;
		if (err)
			fail_locked(wl, count, err, "writing the super block");
		else if (count > wl->super_count)
			wl->super_count = count;
		td_cond_broadcast(&wl->idle);
	}
}

/* Reserve the next entry, @data_bytes of data after its header. */
static void reserve_locked(struct td_wlog *wl, struct td_wlog_slot *s, uint64_t data_bytes)
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
	td_list_add_tail(&s->node, &wl->reserved);
}

/* The slot's entry has been written (or given up): take it off the list. */
static void written_locked(struct td_wlog *wl, struct td_wlog_slot *s, bool sync_point)
{
	assert(td_lock_held(&wl->lock));
	td_list_del(&s->node);
	if (sync_point && s->index + 1 > wl->sync_due)
		wl->sync_due = s->index + 1;
}

/* Lay out a mark entry named @name (NUL-padded) in @sector. */
static void mark_sector(uint8_t *sector, uint32_t sectorsize, const char *name)
{
	struct td_wlog_entry e = { .flags = TD_WLOG_F_MARK, .data_len = strlen(name) };

	memset(sector, 0, sectorsize);
	td_wlog_encode_entry(&e, sector);
	memcpy(sector + TD_WLOG_ENTRY_LEN, name, e.data_len);
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
	td_list_init(&wl->reserved);
	td_mutex_init(&wl->ctl);
	td_mutex_init(&wl->lock);
	td_cond_init(&wl->idle);
	return wl;
}

void td_wlog_destroy(struct td_wlog *wl)
{
	td_wlog_stop(wl, NULL);
	assert(td_list_empty(&wl->reserved));
	td_cond_destroy(&wl->idle);
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
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "\"%s\": %s", path, strerror(errno));
		goto out_ctl;
	}
	ret = write_super(wl, fd, 0);
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
	wl->super_count = 0;
	wl->sync_due = 0;
	wl->fail_index = UINT64_MAX;
	wl->error = 0;
	wl->error_text[0] = '\0';
	wl->writes = wl->discards = wl->flushes = wl->fua = wl->marks = 0;
	atomic_store_explicit(&wl->on, true, memory_order_relaxed);
	td_mutex_unlock(&wl->lock);
	td_notice("write log: recording to \"%s\"", path);
	td_mutex_unlock(&wl->ctl);
	return 0;

out_close:
	close(fd);
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

/* Return: true while a slot on the list is being written (or the super block is). */
static bool busy_locked(struct td_wlog *wl)
{
	struct td_list *pos;

	if (wl->super_busy)
		return true;
	td_list_for_each(pos, &wl->reserved)
		if (!td_list_entry(pos, struct td_wlog_slot, node)->held)
			return true;
	return false;
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
	/* Nothing new is reserved from now on; what is being written gets written. */
	atomic_store_explicit(&wl->on, false, memory_order_relaxed);
	wl->stopping = true;
	while (busy_locked(wl))
		td_cond_wait(&wl->idle, &wl->lock);
	fd = wl->fd;
	/*
	 * Flushes still at the drive: a stand-in each, written here under the lock
	 * (their slots are the queue's, and their end may free them as soon as
	 * they are orphans), and their end writes nothing.
	 */
	mark_sector(sector, wl->sectorsize, TD_WLOG_FLUSH_UNFINISHED);
	while (!td_list_empty(&wl->reserved)) {
		struct td_wlog_slot *s =
			td_list_first_entry(&wl->reserved, struct td_wlog_slot, node);
		int err = 0;

		assert(s->held);
		if (s->index < wl->fail_index)
			err = write_buf(fd, sector, wl->sectorsize, s->off);
		if (err)
			fail_locked(wl, s->index, err, "writing an entry");
		s->orphan = true;
		td_list_del(&s->node);
		wl->flushes--;
		wl->marks++;
	}
	td_mutex_unlock(&wl->lock);

	td_mutex_lock(&wl->lock);
	uint64_t count = TD_MIN(wl->next_index, wl->fail_index);

	td_mutex_unlock(&wl->lock);
	ret = write_super(wl, fd, count);
	if (!ret && fdatasync(fd) < 0 && errno != EINVAL)
		ret = -errno;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	td_mutex_lock(&wl->lock);
	if (ret)
		fail_locked(wl, count, ret, "closing");
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

/* Return: true when entries may be reserved now. */
static bool recording_locked(const struct td_wlog *wl)
{
	return wl->state == TD_WLOG_ON && !wl->stopping;
}

/* ---- marks ------------------------------------------------------------------------------ */

int td_wlog_mark(struct td_wlog *wl, const char *name, uint64_t *index)
{
	struct td_wlog_slot s;
	uint8_t sector[4096];
	size_t len = strlen(name);
	int fd, err;

	if (!len || len > td_wlog_mark_max(wl->sectorsize))
		return -EINVAL;
	td_mutex_lock(&wl->ctl);
	td_mutex_lock(&wl->lock);
	if (!recording_locked(wl)) {
		td_mutex_unlock(&wl->lock);
		td_mutex_unlock(&wl->ctl);
		return -ENOENT;
	}
	reserve_locked(wl, &s, 0);
	wl->marks++;
	fd = wl->fd;
	td_mutex_unlock(&wl->lock);

	mark_sector(sector, wl->sectorsize, name);
	err = write_buf(fd, sector, wl->sectorsize, s.off);

	td_mutex_lock(&wl->lock);
	written_locked(wl, &s, true);
	if (err)
		fail_locked(wl, s.index, err, "writing a mark");
	super_update_locked(wl, false);
	td_cond_broadcast(&wl->idle);
	td_mutex_unlock(&wl->lock);
	td_mutex_unlock(&wl->ctl);
	*index = s.index;
	return err ? -EIO : 0;
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
	reserve_locked(wl, s, data_bytes);
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
		fail_locked(wl, wl->next_index, -ENOMEM, "recording a flush");
		td_mutex_unlock(&wl->lock);
		return NULL;
	}
	reserve_locked(wl, s, 0);
	s->held = true;
	wl->flushes++;
	td_mutex_unlock(&wl->lock);

	td_wlog_encode_entry(&e, s->header);
	s->zeroes = false;
	s->err = 0;
	s->bio = NULL;
	s->nr_bios = 0;
	return s;
}

/* Entries written by one call of write_slots(). */
#define WRITE_CHUNK (TD_WLOG_BATCH * 2)

/* Return: the iovec entries slot @s takes (header, padding, its data). */
static unsigned int slot_iovs(const struct td_wlog_slot *s)
{
	return 3 + s->nr_bios;
}

/*
 * Write the entries @v[0..@n) (sorted by index, all of this session and
 * claimed): runs of entries whose places follow each other go in one call.
 * Return: 0, or the first error with the index of the entry it hit in *@at.
 */
static int write_runs(struct td_wlog *wl, int fd, struct td_wlog_slot **v, unsigned int n,
		      uint64_t *at)
{
	struct iovec iov[IOV_MAX];
	uint8_t marks[WRITE_CHUNK][TD_WLOG_ENTRY_LEN + sizeof(TD_WLOG_FLUSH_FAILED)];
	unsigned int i = 0;

	while (i < n) {
		uint64_t start = v[i]->off;
		uint64_t end = start;
		int cnt = 0;
		int err = 0;
		unsigned int first = i;

		while (i < n && v[i]->off == end && cnt + slot_iovs(v[i]) <= IOV_MAX) {
			struct td_wlog_slot *s = v[i];
			size_t head = TD_WLOG_ENTRY_LEN;

			if (s->err) {
				/* A failed flush: a mark says so in its place. */
				struct td_wlog_entry e = { .flags = TD_WLOG_F_MARK,
							   .data_len = strlen(TD_WLOG_FLUSH_FAILED) };

				td_wlog_encode_entry(&e, marks[i]);
				memcpy(marks[i] + TD_WLOG_ENTRY_LEN, TD_WLOG_FLUSH_FAILED,
				       e.data_len);
				head += e.data_len;
				iov[cnt++] = (struct iovec){ marks[i], head };
			} else {
				iov[cnt++] = (struct iovec){ s->header, head };
			}
			iov[cnt++] = (struct iovec){ (void *)zero_sector, wl->sectorsize - head };
			const struct td_bio *bio = s->bio;

			for (uint32_t k = 0; k < s->nr_bios; k++, bio = bio->next)
				iov[cnt++] = (struct iovec){ bio->data,
							     (size_t)bio->nr_sectors << TD_SECTOR_SHIFT };
			end += wl->sectorsize;
			i++;
			if (s->zeroes) {
				/* The data is zeroes: a hole, made part of the file by its last byte. */
				end += s->data_bytes;
				break;
			}
			end += s->data_bytes;
		}
		assert(i > first);
		if (!full_write(fd, iov, cnt, start, &err)) {
			*at = v[first]->index;
			return err;
		}
		if (v[i - 1]->zeroes && v[i - 1]->data_bytes &&
		    (err = write_buf(fd, zero_sector, 1, end - 1))) {
			*at = v[i - 1]->index;
			return err;
		}
	}
	return 0;
}

static bool sync_point(const struct td_wlog_slot *s)
{
	struct td_wlog_entry e;

	td_wlog_decode_entry(s->header, &e);
	return s->err || (e.flags & (TD_WLOG_F_FLUSH | TD_WLOG_F_FUA | TD_WLOG_F_MARK));
}

/* Write the @n (at most WRITE_CHUNK) slots @v, then take them off the list. */
static void write_slots(struct td_wlog *wl, struct td_wlog_slot **v, unsigned int n)
{
	struct td_wlog_slot *flushes[WRITE_CHUNK];
	unsigned int nr_flushes = 0;
	unsigned int m = 0;
	uint64_t limit;
	int fd;

	/* Claim: a flush stood in for by a stop, or of another session, writes nothing. */
	td_mutex_lock(&wl->lock);
	for (unsigned int i = 0; i < n; i++) {
		struct td_wlog_slot *s = v[i];
		bool flush = s->held || s->orphan;

		if (flush)
			flushes[nr_flushes++] = s;
		if (s->orphan || s->session != wl->session)
			continue;
		s->held = false;
		if (s->err) {
			wl->flushes--;
			wl->marks++;
		}
		v[m++] = s;
	}
	fd = wl->fd;
	limit = wl->fail_index;
	td_mutex_unlock(&wl->lock);

	/* Sorted by place: a batch is nearly sorted already. */
	for (unsigned int i = 1; i < m; i++) {
		struct td_wlog_slot *s = v[i];
		unsigned int j = i;

		for (; j > 0 && v[j - 1]->index > s->index; j--)
			v[j] = v[j - 1];
		v[j] = s;
	}
	/* Entries past a failure are not counted: do not write them. */
	unsigned int w = 0;

	while (w < m && v[w]->index < limit)
		w++;
	uint64_t at = 0;
	int err = w ? write_runs(wl, fd, v, w, &at) : 0;

	td_mutex_lock(&wl->lock);
	for (unsigned int i = 0; i < m; i++)
		written_locked(wl, v[i], sync_point(v[i]));
	if (err)
		fail_locked(wl, at, err, "writing an entry");
	super_update_locked(wl, false);
	td_cond_broadcast(&wl->idle);
	td_mutex_unlock(&wl->lock);
	for (unsigned int i = 0; i < nr_flushes; i++)
		free(flushes[i]);
}

void td_wlog_write_flushes(struct td_wlog *wl, struct td_wlog_slot *chain)
{
	struct td_wlog_slot *v[WRITE_CHUNK];

	while (chain) {
		unsigned int n = 0;

		for (; chain && n < WRITE_CHUNK; chain = chain->next)
			v[n++] = chain;
		write_slots(wl, v, n);
	}
}

void td_wlog_write_batch(struct td_wlog *wl, struct td_wlog_batch *b)
{
	struct td_wlog_slot *v[WRITE_CHUNK];
	unsigned int n = 0;

	for (unsigned int i = 0; i < b->nr; i++)
		v[n++] = &b->slots[i];
	while (b->flushes || n) {
		while (b->flushes && n < WRITE_CHUNK) {
			v[n++] = b->flushes;
			b->flushes = b->flushes->next;
		}
		write_slots(wl, v, n);
		n = 0;
	}
	b->nr = 0;
}
