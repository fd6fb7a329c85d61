/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blktrace_writer.h - a stream of trace events written as Linux blktrace
 * binary records (common/blktrace_fmt.h), so that blkparse(1), btt(1) and
 * iowatcher(1) read it as if blktrace(8) had traced a real disk. The daemon
 * writes one per `trace blktrace` connection (docs/protocol.md); tagdiskctl
 * only copies its bytes to NAME.blktrace.0.
 *
 * The first time an event names a pid, a process note (TD_BLKTRACE_TN_PROCESS,
 * payload: the 16-byte NUL-padded command name) goes out before it, so that
 * blkparse prints process names. Names come from a callback, so tests need
 * no /proc.
 *
 * Times are the events' own, relative to the first event written, and the
 * records go out in time order: blkparse takes a file's records in the order
 * they come (it merges per-CPU files by time, not records within one), and
 * btt subtracts the times of an I/O's steps, so a record that went back in
 * time would give it a negative interval. Events reach the writer a little
 * out of order (the trace merges its threads' buffers by time, but a thread
 * can publish an event later than another stamped after it), so the writer
 * holds each event reorder_ns (by the events' clock) and writes them sorted.
 * An event older than one already written (later than the window) is not
 * given a false time: it is dropped and said like any lost event.
 *
 * Lost events are said twice, the way blkparse can see them: a message
 * record ("tagdisk: dropped events: N", an "m" line in blkparse) and a gap of
 * N in the sequence numbers, which blkparse counts per CPU.
 *
 * Bytes go out through an emit callback (a stdio stream, a socket buffer).
 *
 * LOCKING: none. A writer belongs to one thread.
 */
#ifndef TAGDISK_BLKTRACE_WRITER_H
#define TAGDISK_BLKTRACE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/blktrace_fmt.h"
#include "common/compiler.h"

/* One trace event, as tagdisk names it (tagdisk/trace.h, docs/protocol.md). */
struct td_blktrace_event {
	uint64_t time_ns; /* any clock; the first event is time 0 */
	int64_t pid;	  /* the submitter; 0 or less: none */
	char action;	  /* Q M F G I D C R */
	const char *op;	  /* "read", "write", "flush", "discard", "write_zeroes" */
	bool fua;
	uint64_t sector;  /* 512-byte sectors */
	uint64_t sectors;
	int64_t error;	  /* an errno (either sign) on a failed completion, else 0 */
};

/* Write @len bytes of @buf. Return: 0, or a negative errno (the writer passes it on). */
typedef int (*td_blktrace_emit_fn)(void *arg, const void *buf, size_t len);

/*
 * Find the name of process @pid for its process note: write it, NUL-padded,
 * to @comm. Return: 0, or a negative errno when there is no name to give (no
 * note is written). td_blktrace_proc_comm() reads /proc.
 */
typedef int (*td_blktrace_comm_fn)(int32_t pid, char comm[TD_BLKTRACE_COMM_LEN], void *arg);

struct td_blktrace_writer_params {
	td_blktrace_emit_fn emit;
	void *emit_arg;
	uint32_t device;	  /* see TD_BLKTRACE_MKDEV */
	td_blktrace_comm_fn comm; /* NULL: no process notes */
	void *comm_arg;
	/*
	 * How far behind the newest event added one may arrive and still go out
	 * in its place, in the events' nanoseconds. 0: each event is written as
	 * it is added.
	 */
	uint64_t reorder_ns;
	/* Most events held for it; when full, the oldest goes out. 0: TD_BLKTRACE_REORDER_MAX. */
	size_t reorder_max;
};

#define TD_BLKTRACE_REORDER_MAX 65536

struct td_blktrace;

/* Return: a writer, or NULL when memory runs out. */
struct td_blktrace *td_blktrace_create(const struct td_blktrace_writer_params *p)
	td_nonnull(1) td_warn_unused;
/* Free @bt; NULL is allowed. */
void td_blktrace_free(struct td_blktrace *bt);
/* Return: the most memory the reorder window of a writer made with @p ever takes. */
size_t td_blktrace_window_bytes(const struct td_blktrace_writer_params *p) td_nonnull(1);

/*
 * Add @ev: it is written (after a process note when its pid is new and
 * positive) once the events added are reorder_ns newer than it, or the window
 * is full, or td_blktrace_flush() reaches it, every record in time order
 * (equal times: in the order added). The first event written fixes time 0.
 * An event older than the last one written is dropped, counted in
 * td_blktrace_late() and said as td_blktrace_dropped() says it.
 * Return: 0; -EINVAL when @ev's action or op has no blktrace equivalent
 * (nothing kept); -ENOMEM; or the emit callback's error.
 */
int td_blktrace_add(struct td_blktrace *bt, const struct td_blktrace_event *ev) td_nonnull(1, 2);

/*
 * Write the events held that are stamped at or before @until_ns, oldest first
 * (UINT64_MAX: all of them). Return: 0, -ENOMEM or the emit callback's error.
 */
int td_blktrace_flush(struct td_blktrace *bt, uint64_t until_ns) td_nonnull(1);

/*
 * Say that @n events were lost here: a message record at the last time
 * written, and a gap of @n in the sequence. Return: 0, or the emit callback's error.
 */
int td_blktrace_dropped(struct td_blktrace *bt, uint64_t n) td_nonnull(1);

/* Return: I/O records written so far (process notes and messages not counted). */
uint64_t td_blktrace_events(const struct td_blktrace *bt) td_nonnull(1);
/* Return: bytes written so far, notes, messages and payloads included. */
uint64_t td_blktrace_bytes(const struct td_blktrace *bt) td_nonnull(1);
/* Return: events said lost, through td_blktrace_dropped() or as late. */
uint64_t td_blktrace_lost(const struct td_blktrace *bt) td_nonnull(1);
/* Return: events dropped because they came after a newer one was written. */
uint64_t td_blktrace_late(const struct td_blktrace *bt) td_nonnull(1);

#endif /* TAGDISK_BLKTRACE_WRITER_H */
