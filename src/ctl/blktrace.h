/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blktrace.h - tagdisk trace events written as Linux blktrace binary records,
 * so that blkparse(1) and btt(1) read what `tagdiskctl trace --blktrace`
 * recorded as if blktrace(8) had traced a real disk.
 *
 * The file is what blktrace writes for one CPU of one device: records of a
 * 48-byte header, each followed by pdu_len bytes of payload.
 *
 *   offset size field
 *        0    4 magic     TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION
 *        4    4 sequence  1, 2, 3, ... over the I/O records; 0 on notes
 *        8    8 time      nanoseconds since the first event
 *       16    8 sector    512-byte sectors
 *       24    4 bytes     transfer length
 *       28    4 action    category bits << 16 | action code
 *       32    4 pid       the process that submitted the I/O
 *       36    4 device    major << 20 | minor, the kernel's internal dev_t
 *       40    4 cpu       always 0: the file is the trace of "CPU 0"
 *       44    2 error     positive errno on a failed completion, else 0
 *       46    2 pdu_len   payload bytes that follow
 *
 * Fields are written little-endian whatever the host; blkparse finds the
 * byte order from the magic and swaps when it must.
 *
 * blkparse looks for NAME.blktrace.CPU: name the file NAME.blktrace.0 and
 * run `blkparse -i NAME`. btt reads the single file `blkparse -d FILE`
 * dumps.
 *
 * The first time an event names a pid, a process note (TD_BLKTRACE_TN_PROCESS,
 * payload: the 16-byte NUL-padded command name) goes out before it, so that
 * blkparse prints process names. Names come from a callback, so tests need
 * no /proc.
 *
 * Times are made non-decreasing as they are written: the daemon stamps an
 * event before it queues it to subscribers, so two events from different
 * threads can arrive a few nanoseconds out of order, and blkparse expects a
 * CPU's sequence numbers to follow its clock. An event that arrives early is
 * given the time of the one before it.
 *
 * A struct td_blktrace writes to a stdio stream it borrows; the caller opens
 * and closes the stream and frees the writer.
 *
 * LOCKING: none. A writer belongs to one thread.
 */
#ifndef TAGDISK_BLKTRACE_H
#define TAGDISK_BLKTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "common/compiler.h"
#include "ctl/ctl_format.h"

#define TD_BLKTRACE_MAGIC	0x65617400U
#define TD_BLKTRACE_VERSION	0x07U
/* Size of a record header on disk. */
#define TD_BLKTRACE_RECORD_LEN	48
/* A process note carries the name in this many bytes, NUL-padded, like the kernel's comm. */
#define TD_BLKTRACE_COMM_LEN	16

/* A dev_t as blktrace stores it: 12 bits of major above 20 bits of minor. */
#define TD_BLKTRACE_MKDEV(major, minor) ((uint32_t)(major) << 20 | (uint32_t)(minor))
/* The device tagdiskctl names in its traces: 259:0, the first "blkext" (NVMe-style) disk. */
#define TD_BLKTRACE_DEVICE	TD_BLKTRACE_MKDEV(259, 0)

/* Category bits; the action word holds them shifted up by TD_BLKTRACE_CAT_SHIFT. */
enum td_blktrace_cat {
	TD_BLKTRACE_CAT_READ = 1U << 0,
	TD_BLKTRACE_CAT_WRITE = 1U << 1,
	TD_BLKTRACE_CAT_FLUSH = 1U << 2,
	TD_BLKTRACE_CAT_SYNC = 1U << 3,
	TD_BLKTRACE_CAT_QUEUE = 1U << 4,
	TD_BLKTRACE_CAT_REQUEUE = 1U << 5,
	TD_BLKTRACE_CAT_ISSUE = 1U << 6,
	TD_BLKTRACE_CAT_COMPLETE = 1U << 7,
	TD_BLKTRACE_CAT_NOTIFY = 1U << 10,
	TD_BLKTRACE_CAT_DISCARD = 1U << 13,
	TD_BLKTRACE_CAT_FUA = 1U << 15,
};

#define TD_BLKTRACE_CAT_SHIFT 16

/* Action codes, the low 16 bits of the action word (the ones tagdisk produces). */
enum td_blktrace_act {
	TD_BLKTRACE_ACT_QUEUE = 1,
	TD_BLKTRACE_ACT_BACKMERGE = 2,
	TD_BLKTRACE_ACT_FRONTMERGE = 3,
	TD_BLKTRACE_ACT_GETRQ = 4,
	TD_BLKTRACE_ACT_REQUEUE = 6,
	TD_BLKTRACE_ACT_ISSUE = 7,
	TD_BLKTRACE_ACT_COMPLETE = 8,
	TD_BLKTRACE_ACT_INSERT = 12,
};

/* The note that binds a pid to a process name: action code 0 in the notify category. */
#define TD_BLKTRACE_TN_PROCESS ((uint32_t)TD_BLKTRACE_CAT_NOTIFY << TD_BLKTRACE_CAT_SHIFT)

/* One record header, in host order; td_blktrace_encode() lays it out. */
struct td_blktrace_record {
	uint32_t magic;
	uint32_t sequence;
	uint64_t time_ns;
	uint64_t sector;
	uint32_t bytes;
	uint32_t action;
	uint32_t pid;
	uint32_t device;
	uint32_t cpu;
	uint16_t error;
	uint16_t pdu_len;
};

/*
 * The action word for tagdisk event @action (Q M F G I D C R) on @op
 * ("read", "write", "flush", "discard", "write_zeroes"), FUA when @fua.
 * Reads and flushes are in the read category as in the kernel (a flush alone
 * shows as "FN" in blkparse), writes, write zeroes and discards in the write
 * category. Return: the word, or 0 when @action or @op is not one of those.
 */
uint32_t td_blktrace_action(char action, const char *op, bool fua) td_nonnull(2);

/*
 * Lay @rec out in @out, little-endian, as the header of one record.
 * Return: TD_BLKTRACE_RECORD_LEN.
 */
size_t td_blktrace_encode(const struct td_blktrace_record *rec,
			  unsigned char out[TD_BLKTRACE_RECORD_LEN]) td_nonnull(1, 2);

/*
 * Find the name of process @pid for its process note: write it, NUL-padded,
 * to @comm. @arg is the one given to td_blktrace_create().
 * Return: 0, or a negative errno when there is no name to give (no note is written).
 */
typedef int (*td_blktrace_comm_fn)(int32_t pid, char comm[TD_BLKTRACE_COMM_LEN], void *arg);

/*
 * The name from /proc/@pid/comm (@arg unused), for td_blktrace_create().
 * Return: 0, or a negative errno (-ENOENT once the process has gone).
 */
int td_blktrace_proc_comm(int32_t pid, char comm[TD_BLKTRACE_COMM_LEN], void *arg) td_nonnull(2);

struct td_blktrace;

/*
 * A writer of records to @out (borrowed, kept open by the caller) for
 * device @device (see TD_BLKTRACE_MKDEV), naming processes through @comm
 * (NULL: no process notes) called with @arg.
 * Return: the writer, or NULL when memory runs out.
 */
struct td_blktrace *td_blktrace_create(FILE *out, uint32_t device, td_blktrace_comm_fn comm,
				       void *arg) td_nonnull(1) td_warn_unused;
/* Free @bt without flushing its stream; NULL is allowed. */
void td_blktrace_free(struct td_blktrace *bt);

/*
 * Write the record for @ev, after a process note when its pid is new and
 * positive. The first event fixes time 0.
 * Return: 0; -EINVAL when @ev's action or op has no blktrace equivalent
 * (nothing written); -ENOMEM; or the negative errno of a failed write.
 */
int td_blktrace_add(struct td_blktrace *bt, const struct td_ctl_event *ev) td_nonnull(1, 2);

/* Push buffered records to the stream's file. Return: 0, or a negative errno. */
int td_blktrace_flush(struct td_blktrace *bt) td_nonnull(1);

/* Return: I/O records written so far (process notes not counted). */
uint64_t td_blktrace_events(const struct td_blktrace *bt) td_nonnull(1);
/* Return: bytes written so far, notes and payloads included. */
uint64_t td_blktrace_bytes(const struct td_blktrace *bt) td_nonnull(1);

#endif /* TAGDISK_BLKTRACE_H */
