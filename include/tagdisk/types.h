/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * types.h - what every stage of the engine shares: operations, sector units
 * and the bio, the unit of I/O that enters the block layer (Linux keeps the
 * same split: blk_types.h for the types, bio.c for the code that builds bios).
 *
 * A bio is one contiguous, sector-aligned transfer (or a flush, a discard, a
 * write-zeroes) with a completion callback. Sectors are always 512 bytes,
 * whatever the disk's logical block size; a bio's start and length must be
 * multiples of the logical block size (the queue kills it otherwise).
 *
 * Lifetime: the submitter owns the bio and its data buffer. From
 * td_queue_submit() until its end_io callback has been called, the block
 * layer may link the bio (->next) into a request and read or write its data;
 * end_io is called exactly once, from any thread, with no tagdisk lock held.
 */
#ifndef TAGDISK_TYPES_H
#define TAGDISK_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"

#define TD_SECTOR_SHIFT 9
#define TD_SECTOR_SIZE	(1U << TD_SECTOR_SHIFT)

enum td_op {
	TD_OP_READ = 0,
	TD_OP_WRITE = 1,
	TD_OP_FLUSH = 2,	/* write back the drive's cache; a barrier in the queue */
	TD_OP_DISCARD = 3,	/* the range reads back as zeroes; space may be released */
	TD_OP_WRITE_ZEROES = 4, /* the range reads back as zeroes; space stays allocated */
};
#define TD_OP_COUNT 5

enum td_bio_flags {
	TD_BIO_FUA = 1U << 0, /* write through to stable storage before completing */
};

struct td_bio;
/* Completion: @err is 0 or a negative errno (-EIO for a failed or killed request). */
typedef void (*td_bio_end_fn)(struct td_bio *bio, int err);

struct td_bio {
	struct td_bio *next; /* chain: in a request, or in a td_queue_submit_list() batch */
	enum td_op op;
	unsigned int flags;   /* enum td_bio_flags */
	uint64_t sector;      /* first 512-byte sector */
	uint32_t nr_sectors;  /* length in 512-byte sectors; 0 for a flush */
	int32_t pid;	      /* submitting process, for traces; 0 when unknown */
	void *data;	      /* nr_sectors * 512 bytes for READ and WRITE, else NULL */
	td_bio_end_fn end_io; /* required */
	void *private;	      /* the submitter's */
	int error;	      /* set by the block layer just before end_io */
};

/* Return: a static lowercase name ("read", "write", "flush", "discard", "write_zeroes"). */
const char *td_op_name(enum td_op op);

/* Return: true for operations that change the medium (write, discard, write zeroes). */
static inline bool td_op_is_write(enum td_op op)
{
	return op == TD_OP_WRITE || op == TD_OP_DISCARD || op == TD_OP_WRITE_ZEROES;
}

/* Return: true for operations that transfer data (read, write). */
static inline bool td_op_has_data(enum td_op op)
{
	return op == TD_OP_READ || op == TD_OP_WRITE;
}

/* Fill in a bio; ->next is cleared. */
static inline void td_bio_init(struct td_bio *bio, enum td_op op, uint64_t sector,
			       uint32_t nr_sectors, void *data, td_bio_end_fn end_io, void *private)
{
	bio->next = NULL;
	bio->op = op;
	bio->flags = 0;
	bio->sector = sector;
	bio->nr_sectors = nr_sectors;
	bio->pid = 0;
	bio->data = data;
	bio->end_io = end_io;
	bio->private = private;
	bio->error = 0;
}

#endif /* TAGDISK_TYPES_H */
