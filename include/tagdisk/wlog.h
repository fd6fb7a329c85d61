/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wlog.h - the write log: every write, discard, write zeroes, flush and FUA
 * write the disk acknowledges, with its data, in dm-log-writes' format
 * (common/wlog_fmt.h), so that the disk can be rebuilt as it was at any
 * entry, mark or flush (tagdisk-replay, or xfstests' replay-log).
 *
 * Order (dm-log-writes' rule): a write is logged when it completes, and a
 * flush entry comes after every write that completed before the flush was
 * issued, and before every write that completed after. So entries are
 * reserved at those moments: a write (discard, write zeroes) when it
 * completes successfully, before anyone hears of it; a flush when it is
 * issued to the drive; a mark when it is asked for. Reserving numbers the
 * entry and gives it its place in the file, and costs a short hold of the
 * log's lock (no I/O), so the queue does it under its own lock, where
 * completion and dispatch are ordered. The entry is filled in later, with no
 * lock held: a write's before its bios end (their buffers hold the data), a
 * flush's when the flush ends (a flush that failed leaves a mark named
 * TD_WLOG_FLUSH_FAILED in its place). A write of zeroes is logged as a write
 * whose data is zeroes.
 *
 * Filling in a write copies it into a staging ring of TD_WLOG_RING_BYTES in
 * memory (it waits only when the ring is full); a writer thread, td-wlog,
 * writes the ring to the file in order, in large calls, so the data path
 * pays a memcpy rather than a write to the file. A flush's end, and a mark,
 * wait until the writer has written everything before them and the super
 * block counts them (unless an earlier flush is still at the drive): when an
 * fsync returns, the log file says so.
 *
 * The file is valid at any moment: the super block counts only entries that
 * are in the file, and is rewritten (after the entries it counts) whenever
 * the writer has passed a flush, FUA or mark entry, every TD_WLOG_SUPER_EVERY
 * entries, and when the log stops. A daemon killed at any moment leaves a log
 * that replays correctly up to its last flush at least.
 *
 * When writing the log fails (the file system holding it is full, say), the
 * log stops recording and says why in its status; the entries written before
 * the failure stay valid. A flush still running when the log stops is
 * written as a mark named TD_WLOG_FLUSH_UNFINISHED.
 *
 * Lifetime: the creator owns the log and destroys it once nothing reserves
 * entries any more (after the queue that uses it). Starting and stopping
 * reuse it: each start truncates (or creates) a file and begins a session;
 * an entry reserved in one session is never written in another.
 *
 * LOCKING: an internal mutex, the log lock, guards the session, the
 * numbering, the ring's bookkeeping and the entries reserved and not yet
 * written; it is taken after every queue lock and held across I/O only by
 * td_wlog_stop() (lock order: tagdisk/queue.h). td_wlog_reserve_write() and
 * td_wlog_reserve_flush() may be called with queue locks held;
 * td_wlog_write_batch(), td_wlog_write_flushes(), td_wlog_mark(),
 * td_wlog_start() and td_wlog_stop() wait and do I/O and must be called with
 * no tagdisk lock held, and a thread must fill in the writes it reserved
 * before it ends a flush (td_wlog_write_batch() does, in that order). A
 * second mutex serialises start, stop and mark.
 */
#ifndef TAGDISK_WLOG_H
#define TAGDISK_WLOG_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "common/list.h"
#include "common/wlog_fmt.h"
#include "tagdisk/types.h"

/* The mark written in place of a flush that failed, and of one still running at stop. */
#define TD_WLOG_FLUSH_FAILED	 "tagdisk-flush-failed"
#define TD_WLOG_FLUSH_UNFINISHED "tagdisk-flush-unfinished"
/* The super block is rewritten at least every this many entries. */
#define TD_WLOG_SUPER_EVERY 1024
/* Writes a batch holds (a completion reserves and writes them in chunks of this many). */
#define TD_WLOG_BATCH 32
/* The staging ring's size: memory a recording log holds. */
#define TD_WLOG_RING_BYTES (16U << 20)

struct td_wlog;

/*
 * One reserved entry. The owner provides the memory of a write's slot; a
 * flush's is the log's (td_wlog_reserve_flush). LOCKING: node, held and
 * orphan are guarded by the log lock; the rest is fixed once reserved.
 */
struct td_wlog_slot {
	struct td_list node;	   /* the log's list of reserved entries, by index */
	struct td_wlog_slot *next; /* a batch's chain of flushes */
	uint64_t index;		   /* entry number, from 0 */
	uint64_t off;		   /* byte offset of its header sector in the file */
	unsigned int session;
	bool orphan; /* stood in for by td_wlog_stop(): write nothing */
	bool zeroes; /* write zeroes: its data sectors stay a hole */
	int err;     /* a flush: how it ended (non-zero: written as TD_WLOG_FLUSH_FAILED) */
	uint64_t data_bytes; /* bytes of data after the header sector */
	uint8_t header[TD_WLOG_ENTRY_LEN];
	const struct td_bio *bio; /* a write: its data, nr_bios bios chained through ->next */
	uint32_t nr_bios;
};

/*
 * Entries waiting to be written: up to TD_WLOG_BATCH writes (the slots are
 * the batch's) and any number of flushes. The owner keeps it (on its stack)
 * from the reservations to td_wlog_write_batch(), which empties it.
 */
struct td_wlog_batch {
	unsigned int nr;
	struct td_wlog_slot *flushes;
	struct td_wlog_slot slots[TD_WLOG_BATCH];
};

static inline void td_wlog_batch_init(struct td_wlog_batch *b)
{
	b->nr = 0;
	b->flushes = NULL;
}

static inline bool td_wlog_batch_full(const struct td_wlog_batch *b)
{
	return b->nr == TD_WLOG_BATCH;
}

static inline bool td_wlog_batch_empty(const struct td_wlog_batch *b)
{
	return !b->nr && !b->flushes;
}

enum td_wlog_state {
	TD_WLOG_OFF,
	TD_WLOG_ON,
	TD_WLOG_FAILED, /* stopped recording after an error; td_wlog_stop() closes it */
};

struct td_wlog_status {
	enum td_wlog_state state;
	char path[PATH_MAX];   /* the file, "" when off */
	uint64_t entries;      /* reserved in this session (or the last one, when off) */
	uint64_t entries_valid; /* counted by the super block on disk */
	uint64_t bytes;	       /* size of the log file */
	uint64_t writes;       /* entries of each kind: writes (write zeroes included), */
	uint64_t discards;
	uint64_t flushes;
	uint64_t fua;	       /* of the writes, those with FUA */
	uint64_t marks;	       /* marks (stand-ins for flushes included) */
	uint32_t sectorsize;
	int error;	       /* TD_WLOG_FAILED: the negative errno */
	char error_text[128];  /* TD_WLOG_FAILED: what failed */
};

/*
 * Create a log for a disk of @disk_bytes with @sectorsize-byte logical
 * blocks (512 or 4096), recording nothing until td_wlog_start().
 * Return: the log, or NULL (errno set: EINVAL, ENOMEM).
 */
struct td_wlog *td_wlog_create(uint32_t sectorsize, uint64_t disk_bytes) td_warn_unused;

/* Stop (td_wlog_stop) when recording, and free @wl. Nothing may reserve entries any more. */
void td_wlog_destroy(struct td_wlog *wl) td_nonnull(1);

/*
 * Start recording into @path: create it (mode 0644) or truncate it, and write
 * the super block of an empty log. Entries reserved from now on are recorded.
 * Return: 0; -EBUSY when already recording (or failed and not yet stopped);
 * an errno of open() or write(); each with one line in @err.
 */
int td_wlog_start(struct td_wlog *wl, const char *path, char *err, size_t errlen)
	td_nonnull(1, 2, 3);

/*
 * Stop recording: wait for the entries being written, stand in for flushes
 * still running (TD_WLOG_FLUSH_UNFINISHED), write the final super block,
 * sync and close the file. @st (may be NULL) gets the status just before.
 * Return: 0; -ENOENT when not recording; -EIO when the log had failed or
 * the last writes failed (the file is still closed).
 */
int td_wlog_stop(struct td_wlog *wl, struct td_wlog_status *st) td_nonnull(1);

/*
 * Add a mark entry named @name (1..td_wlog_mark_max() bytes, no NUL) after
 * every entry reserved so far, and wait until it is written and counted as
 * a flush's end does. *@index gets its entry number.
 * Return: 0; -ENOENT when not recording; -EINVAL for a bad name; -EIO when
 * writing failed (the log then fails).
 */
int td_wlog_mark(struct td_wlog *wl, const char *name, uint64_t *index) td_nonnull(1, 2, 3);

/* Snapshot the log's state into @st. */
void td_wlog_get_status(struct td_wlog *wl, struct td_wlog_status *st) td_nonnull(1, 2);

/* Return: a static name: "off", "on", "failed". */
const char *td_wlog_state_name(enum td_wlog_state s);

/*
 * Return: true while recording. A hint without the lock (the reservations
 * check again under it): false lets the data path skip the log in one load.
 */
bool td_wlog_on(const struct td_wlog *wl) td_nonnull(1);

/*
 * A write, discard or write zeroes of @nr_sectors 512-byte sectors at
 * @sector (multiples of the log's sector size) completed: reserve its entry
 * in @b (not full), FUA when @fua, its data (writes) the @nr_bios bios
 * chained from @bio, which must stay as they are until the batch is written.
 * No I/O; any lock may be held.
 * Return: true when reserved; false when not recording.
 */
bool td_wlog_reserve_write(struct td_wlog *wl, struct td_wlog_batch *b, enum td_op op, bool fua,
			   uint64_t sector, uint32_t nr_sectors, const struct td_bio *bio,
			   uint32_t nr_bios) td_nonnull(1, 2);

/*
 * A flush is being issued to the drive: reserve its entry after every entry
 * reserved so far. No I/O; any lock may be held.
 * Return: the slot, to hand to td_wlog_batch_add_flush() when the flush ends;
 * NULL when not recording (or, with the log failed for want of memory).
 */
struct td_wlog_slot *td_wlog_reserve_flush(struct td_wlog *wl) td_nonnull(1);

/* The flush of slot @s ended with @err: queue its entry in @b. */
static inline void td_wlog_batch_add_flush(struct td_wlog_batch *b, struct td_wlog_slot *s,
					   int err)
{
	s->err = err;
	s->next = b->flushes;
	b->flushes = s;
}

/*
 * Fill in every entry of @b and empty it: the writes first (their data is
 * copied from their bios now, waiting for room in the ring if it is full),
 * then the flushes (each waits until the writer has written everything
 * before it, then until the super block counts it). Call with no tagdisk
 * lock held, before the bios of the writes end.
 */
void td_wlog_write_batch(struct td_wlog *wl, struct td_wlog_batch *b) td_nonnull(1, 2);

/*
 * Fill in the entries of the flushes chained from @chain (through ->next,
 * each with its ->err set by td_wlog_batch_add_flush() or by the caller), as
 * td_wlog_write_batch() does, and free them. Call with no tagdisk lock held,
 * holding no write reserved and not yet filled in.
 */
void td_wlog_write_flushes(struct td_wlog *wl, struct td_wlog_slot *chain) td_nonnull(1);

#endif /* TAGDISK_WLOG_H */
