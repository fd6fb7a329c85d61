/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl_format.h - how tagdiskctl shows numbers: sizes, rates, latencies,
 * durations, aligned tables, iostat rows and trace lines.
 *
 * Everything here is a pure function of its arguments (no I/O, no clock), so
 * the exact text tagdiskctl prints can be tested without a daemon. Numbers go
 * through printf in the C locale, which tagdiskctl never changes, so the
 * decimal point is always '.'.
 *
 * The fixed-size formatters write into a caller's buffer like snprintf()
 * (truncating, always NUL-terminated when @len > 0) and return that buffer,
 * so a call can sit directly in a printf argument list. TD_CTL_FMT_LEN bytes
 * are always enough.
 *
 * A struct td_ctl_table is created and freed by its one user; it copies every
 * cell it is given, so the caller's strings may die at once. Running out of
 * memory is sticky: the failing add returns -ENOMEM and the render returns
 * NULL, so a caller may check only once, at the end.
 *
 * LOCKING: none. A table belongs to one thread; the rest keeps no state.
 */
#ifndef TAGDISK_CTL_FORMAT_H
#define TAGDISK_CTL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"

/* Room for any string the td_ctl_fmt_*() formatters produce. */
#define TD_CTL_FMT_LEN 64

/*
 * A byte count in binary units with one decimal: "0 B", "1023 B", "1.0 KiB",
 * "1.5 MiB", "1.0 GiB", up to EiB. A value that would round to 1024.0 of a
 * unit is shown as 1.0 of the next one. Return: @buf.
 */
const char *td_ctl_fmt_size(uint64_t bytes, char *buf, size_t len) td_nonnull(2);

/*
 * A byte rate in binary units, like the sizes, with three significant
 * digits: "0 B/s", "999 B/s", "1023 B/s", "1.00 KiB/s", "12.3 MiB/s", "123
 * MiB/s", "1.23 GiB/s", up to EiB/s; between 999.5 and 1023.5 of a unit four
 * digits ("1000 KiB/s") rather than 0.98 of the next. A negative or
 * non-finite rate (no data) gives "-". Return: @buf.
 */
const char *td_ctl_fmt_rate(double bytes_per_s, char *buf, size_t len) td_nonnull(2);

/*
 * A latency given in microseconds, with three significant digits from 1 ms
 * up: "0 us", "85 us", "999 us", "1.20 ms", "12.3 ms", "123 ms", "1.23 s",
 * "12.3 s", "123 s", "4567 s". Units are ASCII ("us", not the micro sign) so
 * every terminal shows them. Return: @buf.
 */
const char *td_ctl_fmt_latency(uint64_t us, char *buf, size_t len) td_nonnull(2);

/*
 * An elapsed time: "0s", "59s", "1m 00s", "2h 03m 10s", "3d 00h 00m 07s".
 * Return: @buf.
 */
const char *td_ctl_fmt_duration(uint64_t seconds, char *buf, size_t len) td_nonnull(2);

/* ---------------------------------------------------------------- tables */

enum td_ctl_align {
	TD_CTL_LEFT,
	TD_CTL_RIGHT,
};

struct td_ctl_column {
	const char *title;	 /* NULL in every column: the table has no header line */
	enum td_ctl_align align; /* numbers right, words left */
};

struct td_ctl_table;

/*
 * A table with the @nr_cols columns described by @cols (copied, titles
 * included). Return: the table, or NULL when memory runs out or @nr_cols is 0.
 */
struct td_ctl_table *td_ctl_table_create(const struct td_ctl_column *cols, size_t nr_cols)
	td_nonnull(1) td_warn_unused;
/* Free @t and every cell; NULL is allowed. */
void td_ctl_table_free(struct td_ctl_table *t);

/*
 * Append one cell, formatted like printf: to the current row, or to a new
 * row when the current one is full. Return: 0, or -ENOMEM (sticky).
 */
int td_ctl_table_add(struct td_ctl_table *t, const char *fmt, ...) td_nonnull(1, 2)
	td_printf(2, 3);

/* Return: rows added so far (a partly filled row counts). */
size_t td_ctl_table_rows(const struct td_ctl_table *t) td_nonnull(1);

/*
 * Lay the table out as text: the header line (when titles exist), then one
 * line per row, each starting with @indent and ending in '\n'. Each column
 * is as wide as its widest cell or title, counted in UTF-8 characters;
 * columns are separated by two spaces; trailing spaces are dropped. Cells
 * missing from the last row are empty. Return: a new string the caller
 * frees, or NULL when memory ran out at any point in the table's life.
 */
char *td_ctl_table_render(const struct td_ctl_table *t, const char *indent) td_nonnull(1, 2)
	td_warn_unused;

/* ---------------------------------------------------------------- iostat */

/* The fields of /sys/block/<dev>/stat, as in the kernel's admin-guide/iostats.rst. */
enum td_ctl_sysfs_field {
	TD_CTL_READS = 0,
	TD_CTL_READ_MERGES = 1,
	TD_CTL_READ_SECTORS = 2,
	TD_CTL_READ_TICKS_MS = 3,
	TD_CTL_WRITES = 4,
	TD_CTL_WRITE_MERGES = 5,
	TD_CTL_WRITE_SECTORS = 6,
	TD_CTL_WRITE_TICKS_MS = 7,
	TD_CTL_IN_FLIGHT = 8,
	TD_CTL_IO_TICKS_MS = 9,
	TD_CTL_TIME_IN_QUEUE_MS = 10,
	TD_CTL_DISCARDS = 11,
	TD_CTL_DISCARD_MERGES = 12,
	TD_CTL_DISCARD_SECTORS = 13,
	TD_CTL_DISCARD_TICKS_MS = 14,
	TD_CTL_FLUSHES = 15,
	TD_CTL_FLUSH_TICKS_MS = 16,
	TD_CTL_SYSFS_FIELDS = 17,
};

/* One `stats` reply as iostat needs it. */
struct td_ctl_iostat_sample {
	uint64_t uptime_us;			/* the daemon's "uptime_us" */
	uint64_t stat[TD_CTL_SYSFS_FIELDS];	/* its "sysfs_stat" */
};

/* One iostat -x row over an interval; all per second unless named otherwise. */
struct td_ctl_iostat {
	double interval_s;
	double r_s;	   /* reads completed */
	double w_s;	   /* writes completed */
	double rkib_s;	   /* KiB read (1024 bytes) */
	double wkib_s;	   /* KiB written */
	double rrqm_s;	   /* read merges */
	double wrqm_s;	   /* write merges */
	double r_await_ms; /* mean time per read, queue included; 0 without reads */
	double w_await_ms; /* the same for writes */
	double aqu_sz;	   /* mean requests in the queue or the drive */
	double util_pct;   /* share of the interval with I/O in flight, at most 100 */
};

/*
 * Compute the row for the interval from @prev to @cur; a NULL @prev means
 * "since the daemon started" (all counters and the uptime at zero). A counter
 * that went backwards counts as no change; an empty interval gives all zeros.
 */
void td_ctl_iostat_compute(const struct td_ctl_iostat_sample *prev,
			   const struct td_ctl_iostat_sample *cur, struct td_ctl_iostat *out)
	td_nonnull(2, 3);

/* ---------------------------------------------------------------- trace */

/* One trace event, as decoded from the daemon's JSON line. */
struct td_ctl_event {
	uint64_t time_ns; /* CLOCK_MONOTONIC of the daemon */
	int64_t pid;
	char action;	  /* Q M F G I D C R */
	const char *op;	  /* "read", "write", "flush", "discard", "write_zeroes" */
	bool fua;
	uint64_t sector;
	uint64_t sectors;
	int64_t tag;	  /* -1 when none */
	int64_t error;	  /* C: 0 or a negative errno */
};

/*
 * The letters blkparse prints in its RWBS column for the record of an op
 * that tagdiskctl trace -o writes: "R", "W", "WF" (a FUA write: F after W),
 * "FN" (a flush: F before, N for no data), "D" (discard); "Z" for write
 * zeroes, which blkparse shows as W (blktrace has no category for it); "?"
 * for a name this version does not know.
 */
const char *td_ctl_op_letters(const char *op, bool fua) td_nonnull(1);

/*
 * What the columns and letters of a printed trace mean: trace --help, and the
 * first lines of a trace printed on a terminal ('#' lines).
 */
#define TD_CTL_TRACE_LEGEND                                                                        \
	"Each event: TIME (s since the first) PID ACTION RWBS SECTOR + SECTORS [tag N]\n"          \
	"  ACTION  Q queued, M back merge, F front merge, G got a request, I inserted,\n"          \
	"          D dispatched to the drive, C completed (err N: its error), R requeued\n"        \
	"  RWBS    as blkparse prints it: R read, W write, D discard, FN flush (no data),\n"       \
	"          WF a FUA write; Z write zeroes (blkparse: W)\n"                                 \
	"  SECTOR  512-byte sectors, whatever the logical block size\n"

/* The columns of iostat and their units: iostat --help. */
#define TD_CTL_IOSTAT_LEGEND                                                                       \
	"Columns (as iostat -x, KiB = 1024 bytes):\n"                                              \
	"  r/s, w/s          reads, writes completed per second\n"                                 \
	"  rKiB/s, wKiB/s    KiB read, written per second (iostat(1) names them rkB/s, wkB/s)\n"   \
	"  rrqm/s, wrqm/s    read, write merges per second\n"                                      \
	"  r_await(ms)       mean time of a read, queue included, in milliseconds\n"               \
	"  w_await(ms)       the same for writes\n"                                                \
	"  aqu-sz            mean requests in the queue or the drive\n"                            \
	"  tags              tags in use when sampled\n"                                           \
	"  %util             share of the interval with I/O in flight\n"                           \
	"The first report covers the time since the daemon started.\n"

/* Room for any line td_ctl_fmt_event() produces. */
#define TD_CTL_EVENT_LEN 160

/*
 * One line (no newline) for @ev, its time taken relative to @t0_ns:
 * "  1.234567  4321  Q  W  2048 + 8 [tag -]" (RWBS from
 * td_ctl_op_letters()) with "[tag N]" when the event
 * has a tag, and " err N" after it on a C event whose error is not 0.
 * Return: @buf.
 */
const char *td_ctl_fmt_event(const struct td_ctl_event *ev, uint64_t t0_ns, char *buf, size_t len)
	td_nonnull(1, 3);

#endif /* TAGDISK_CTL_FORMAT_H */
