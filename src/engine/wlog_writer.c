// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wlog_writer.c - the write log's file (wlog_int.h): the staging ring, the
 * writer thread that writes it to the file, the super block, and the file's
 * I/O.
 *
 * The writer thread (td-wlog) writes the ring to the file in order, as far
 * as the first entry not yet copied, a few MiB per call, and rewrites the
 * super block. It makes the room in the ring that the copies of the
 * recording path (wlog_record.c) wait for.
 *
 * The super block. Reservations push boundaries (count, end offset) for
 * every flush, FUA write and mark, and every TD_WLOG_SUPER_EVERY entries; the
 * writer rewrites the super block with the last boundary whose bytes are all
 * written and that no held flush precedes. A flush's end, and a mark, wait
 * until the super block counts them: when an fsync returns, the log file
 * already says so.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "common/clock.h"
#include "common/lock.h"
#include "tagdisk/request.h"
#include "wlog_int.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

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

/* ---- the file --------------------------------------------------------------------------- */

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

int td_wlog_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	int err = 0;

	full_write(fd, &iov, 1, off, &err);
	return err;
}

int td_wlog_write_super(struct td_wlog *wl, int fd, uint64_t count)
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

/* Lay out a mark entry named @name (NUL-padded) in @sector. */
void td_wlog_mark_sector(uint8_t *sector, uint32_t sectorsize, const char *name)
{
	struct td_wlog_entry e = { .flags = TD_WLOG_F_MARK, .data_len = strlen(name) };

	memset(sector, 0, sectorsize);
	td_wlog_encode_entry(&e, sector);
	memcpy(sector + TD_WLOG_ENTRY_LEN, name, e.data_len);
}

/* ---- the super block -------------------------------------------------------------------- */

/* Note that the super block may say @count once the file holds @end_off bytes. */
void td_wlog_push_boundary_locked(struct td_wlog *wl, uint64_t count, uint64_t end_off)
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

/* ---- the ring --------------------------------------------------------------------------- */

/* Copy @len bytes of @src to the ring bytes of file offset @off. */
void td_wlog_ring_put(struct td_wlog *wl, uint64_t off, const void *src, size_t len)
{
	size_t at = (size_t)(off % TD_WLOG_RING_BYTES);
	size_t first = TD_MIN(len, TD_WLOG_RING_BYTES - at);

	memcpy(wl->ring + at, src, first);
	memcpy(wl->ring, (const uint8_t *)src + first, len - first);
}

void td_wlog_ring_zero(struct td_wlog *wl, uint64_t off, size_t len)
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
int td_wlog_write_direct(struct td_wlog *wl, struct td_wlog_slot *s, int fd)
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

/* ---- the writer ------------------------------------------------------------------------- */

/* Return: the end of what the writer may write now: the first pending entry's place. */
static uint64_t avail_locked(struct td_wlog *wl)
{
	return td_list_empty(&wl->pending)
		       ? wl->next_off
		       : td_list_first_entry(&wl->pending, struct td_wlog_slot, node)->off;
}

/* After the staging of an entry: wake the writer when a good chunk waits for it. */
void td_wlog_staged_locked(struct td_wlog *wl)
{
	if (wl->writer_sleeping && avail_locked(wl) - wl->written_upto >= WAKE_BYTES)
		td_cond_signal(&wl->work);
}

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

void *td_wlog_writer_main(void *arg)
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
