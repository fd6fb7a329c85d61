/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blktrace_fmt.h - the Linux blktrace binary record (struct blk_io_trace),
 * which the daemon streams to `tagdiskctl trace --blktrace` (docs/protocol.md,
 * "trace blktrace"; common/blktrace_writer.h builds the stream) and which
 * tagdiskctl reads back to count what the file holds.
 *
 * A record is a 48-byte header, followed by pdu_len bytes of payload:
 *
 *   offset size field
 *        0    4 magic     TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION
 *        4    4 sequence  1, 2, 3, ... over the I/O records of a CPU; 0 on notes
 *        8    8 time      nanoseconds since the first event
 *       16    8 sector    512-byte sectors
 *       24    4 bytes     transfer length
 *       28    4 action    category bits << 16 | action code
 *       32    4 pid       the process that submitted the I/O
 *       36    4 device    major << 20 | minor, the kernel's internal dev_t
 *       40    4 cpu       always 0: a tagdisk trace is the trace of "CPU 0"
 *       44    2 error     positive errno on a failed completion, else 0
 *       46    2 pdu_len   payload bytes that follow
 *
 * Fields are written little-endian whatever the host; blkparse finds the
 * byte order from the magic and swaps when it must.
 *
 * Two kinds of note carry no I/O: a process note (TD_BLKTRACE_TN_PROCESS,
 * payload the 16-byte NUL-padded command name of pid) and a message
 * (TD_BLKTRACE_TN_MESSAGE, payload text, which blkparse prints as an "m"
 * line), which tagdisk uses to say that events were dropped.
 *
 * LOCKING: none; these functions have no state.
 */
#ifndef TAGDISK_BLKTRACE_FMT_H
#define TAGDISK_BLKTRACE_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"

#define TD_BLKTRACE_MAGIC	0x65617400U
#define TD_BLKTRACE_VERSION	0x07U
/* Size of a record header on disk. */
#define TD_BLKTRACE_RECORD_LEN	48
/* A process note carries the name in this many bytes, NUL-padded, like the kernel's comm. */
#define TD_BLKTRACE_COMM_LEN	16

/* A dev_t as blktrace stores it: 12 bits of major above 20 bits of minor. */
#define TD_BLKTRACE_MKDEV(major, minor) ((uint32_t)(major) << 20 | (uint32_t)(minor))
/* The device tagdisk names in its traces: 259:0, the first "blkext" (NVMe-style) disk. */
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
/* A text message (the kernel's BLK_TN_MESSAGE): action code 2 in the notify category. */
#define TD_BLKTRACE_TN_MESSAGE (TD_BLKTRACE_TN_PROCESS | 2U)
/* The message tagdisk writes when events were lost, followed by their number. */
#define TD_BLKTRACE_DROPPED_MSG "tagdisk: dropped events: "

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
 * Read the header at @in (TD_BLKTRACE_RECORD_LEN bytes, little-endian) into @rec.
 * Return: true when its magic is a blktrace record of TD_BLKTRACE_VERSION.
 */
bool td_blktrace_decode(const unsigned char in[TD_BLKTRACE_RECORD_LEN],
			struct td_blktrace_record *rec) td_nonnull(1, 2);

/*
 * The name from /proc/@pid/comm, NUL-padded into @comm (@arg unused).
 * Return: 0, or a negative errno (-ENOENT once the process has gone).
 */
int td_blktrace_proc_comm(int32_t pid, char comm[TD_BLKTRACE_COMM_LEN], void *arg) td_nonnull(2);

#endif /* TAGDISK_BLKTRACE_FMT_H */
