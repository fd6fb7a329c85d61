// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wlog_record.c - the write log's recording path (tagdisk/wlog.h, wlog_int.h):
 * numbering entries in the order dm-log-writes defines as the queue reserves
 * them, staging them in the ring, ending flushes and marks.
 *
 * The data path (td_wlog_write_batch) copies a write's header and data into
 * the ring and goes on: the memcpy is all it pays (writing 4.5 KiB to a tmpfs
 * file costs several times the whole engine's work per I/O, and a writer
 * batching megabytes pays a fraction of it). The writer thread
 * (wlog_writer.c) writes the ring to the file. A copy waits only for room in
 * the ring, which the writer makes by writing what came before: entries
 * before it never wait for it, so the wait always ends. A flush's end, and a
 * mark, wait until the super block counts them (wlog_writer.c).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/lock.h"
#include "tagdisk/request.h"
#include "wlog_int.h"

/* Entries bigger than this bypass the ring (written by their thread, in turn). */
#define DIRECT_MIN (TD_WLOG_RING_BYTES / 4)

/* ---- reserving entries ------------------------------------------------------------------ */

/* Reserve the next entry, @data_bytes of data after its header. */
static void reserve_locked(struct td_wlog *wl, struct td_wlog_slot *s, uint64_t data_bytes,
			   bool sync_point)
{
	assert(td_lock_held(&wl->lock));
	s->index = wl->next_index++;
	s->off = wl->next_off;
	s->session = wl->session;
	s->data_bytes = data_bytes;
	s->orphan = false;
	s->next = NULL;
	wl->next_off += wl->sectorsize + data_bytes;
	if (sync_point || wl->next_index % TD_WLOG_SUPER_EVERY == 0)
		td_wlog_push_boundary_locked(wl, wl->next_index, wl->next_off);
}

/* Return: true when entries may be reserved now. */
static bool recording_locked(const struct td_wlog *wl)
{
	return wl->state == TD_WLOG_ON && !wl->stopping;
}

/* ---- staging entries -------------------------------------------------------------------- */

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
	/*
	 * Still on held (the super block must not count it yet); td_wlog_stop()
	 * waits for the flushes being ended (ending) rather than stand in for them.
	 */
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
