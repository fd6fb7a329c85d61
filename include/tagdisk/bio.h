/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bio.h - byte-granular I/O on top of the sector-based queue.
 *
 * td_byte_io turns any byte range into aligned bios (tagdisk/types.h),
 * bouncing unaligned reads and doing read-modify-write for unaligned writes.
 * RMW is safe against concurrent overlapping I/O: every write-like byte I/O
 * holds a shared lock on its aligned range until it completes, and an RMW
 * holds it exclusively from its read to the end of its write (see
 * tagdisk/rangelock.h).
 */
#ifndef TAGDISK_BIO_H
#define TAGDISK_BIO_H

#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "tagdisk/rangelock.h"
#include "tagdisk/types.h"

struct td_queue;
struct td_byte_io;
typedef void (*td_byte_end_fn)(struct td_byte_io *io, int err);

/*
 * A byte-granular I/O. The caller fills the public fields and owns the
 * struct until ->end is called (exactly once, from any thread, no lock held).
 */
struct td_byte_io {
	/* set by the caller */
	enum td_op op;	     /* READ, WRITE, FLUSH, DISCARD or WRITE_ZEROES */
	unsigned int flags;  /* enum td_bio_flags */
	void *data;	     /* @len bytes: filled by READ, taken by WRITE */
	size_t len;	     /* bytes; 0 only for FLUSH */
	uint64_t off;	     /* byte offset on the disk */
	int32_t pid;	     /* submitting process */
	td_byte_end_fn end;
	void *private;
	/* private to bio.c */
	struct td_queue *q;
	struct td_bio bio;	    /* the only bio of an aligned I/O */
	struct td_byte_slow *slow; /* split and unaligned I/O state, or NULL */
	struct td_range range;	    /* held in the queue's range lock by writes */
};

/*
 * Start @io on @q. Aligned I/O that fits in one request goes down as a single
 * bio without allocating; larger I/O is split; unaligned writes, discards and
 * write-zeroes do read-modify-write on their partial blocks (the calling
 * thread waits for the read, so call it from a thread that may block).
 * The range must lie within the disk (the caller enforces end-of-disk
 * semantics).
 * Return: 0 when ->end will be called, or a negative errno (nothing started,
 * ->end not called): -EINVAL for a malformed I/O, -ENOMEM.
 */
int td_byte_io_submit(struct td_queue *q, struct td_byte_io *io) td_nonnull(1, 2) td_warn_unused;

#endif /* TAGDISK_BIO_H */
