/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctl_int.h - what the files of tagdiskctl share.
 *
 *   tagdiskctl.c  main(): options, the command table, dispatch, one-shot commands
 *   conn.c        the connection: waits, signals, reading lines, one request
 *   print.c       reading replies, and printing them for people
 *   top.c         the repeating commands: top, status -i, stats -i, iostat
 *   trace_out.c   the trace stream: printed, or written as blktrace records
 *
 * A struct td_ctl lives on main()'s stack for the whole run and holds the one
 * connection. Replies are json-c trees (common/jsonc.h): td_ctl_call() hands
 * each to its caller, who json_object_put()s it.
 *
 * LOCKING: none; tagdiskctl has one thread. The signal handler only sets
 * td_ctl_stop_requested.
 */
#ifndef TAGDISK_CTL_INT_H
#define TAGDISK_CTL_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <getopt.h>
#include <time.h>
#include <json-c/json_object.h>
#include "common/compiler.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

#define TD_CTL_DEFAULT_SOCKET	  "/run/tagdisk/disk.sock"
#define TD_CTL_DEFAULT_TIMEOUT_MS 10000
/* The daemon's limit on a command line (docs/protocol.md); longer lines are refused here. */
#define TD_CTL_LINE_MAX		  4096

/* Exit statuses (contract), and TD_CTL_STOP for "the user or stdout ended it": exit 0. */
enum td_ctl_status {
	TD_CTL_STOP = -1,
	TD_CTL_OK = 0,
	TD_CTL_REFUSED = 1, /* the daemon said no, or its reply is not one */
	TD_CTL_USAGE = 2,	 /* found here, before connecting */
	TD_CTL_CONNECT = 3, /* cannot talk to the daemon */
};

enum td_ctl_read {
	TD_CTL_READ_LINE,
	TD_CTL_READ_EOF,	  /* closed with nothing pending */
	TD_CTL_READ_EOF_PARTIAL,  /* closed in the middle of a line */
	TD_CTL_READ_TIMEOUT,
	TD_CTL_READ_ERROR,	  /* errno set */
	TD_CTL_READ_TOO_LONG,
	TD_CTL_READ_INTERRUPTED,  /* td_ctl_stop_requested */
	TD_CTL_READ_WATCH_CLOSED, /* the reader of watch_fd went away */
};

/* The connection and its buffer of bytes read but not yet returned as lines. */
struct td_ctl_conn {
	int fd;
	const char *path;
	char *buf;
	size_t cap;
	size_t start;	/* first unread byte */
	size_t scanned; /* bytes from start known to hold no newline */
	size_t end;	/* one past the last byte read */
	/* -1, or an fd whose reader going away ends a wait (stdout, for the trace stream). */
	int watch_fd;
};

/* trace -b: at most this many KiB per buffer (the daemon also bounds -b x -n by it). */
#define TD_CTL_TRACE_KIB_MAX 65536

struct td_ctl {
	const char *socket;
	const char *socket_origin; /* where socket came from, for messages: "given with -s", ... */
	int timeout_ms;
	bool json;
	bool stdout_tty;
	double interval_s;     /* 0: not given */
	unsigned long count;   /* 0: not given (forever) */
	const char *trace_out; /* trace: the blktrace file ("-": stdout), or NULL */
	double trace_wait_s;   /* trace: stop after this long; 0: not given */
	unsigned long trace_buffer_kib; /* trace -b: KiB per buffer; 0: the daemon's default */
	unsigned long trace_buffers;	/* trace -n: buffers per thread; 0: the daemon's default */
	/* A command this tagdiskctl does not know: the known ones near it, for the refusal. */
	char near[160];
	struct td_ctl_conn conn;
};

struct td_ctl_command {
	const char *name;
	const char *usage;   /* the syntax tagdiskctl accepts, after "tagdiskctl [OPTIONS]" */
	const char *help;    /* what it does, one line */
	const char *details; /* optional: what COMMAND --help adds, lines ending in '\n' */
	unsigned int min_args;
	unsigned int max_args;
	bool repeats; /* takes -i and -n */
	/* Optional: the options a command that does not repeat takes after its word. */
	const char *shortopts;
	const struct option *longopts;
	/* Optional: check and keep the arguments before connecting; TD_CTL_OK or TD_CTL_USAGE. */
	int (*check)(struct td_ctl *ctl, int argc, char **argv);
	/* Run with the connection open; argv[0] is the command word. Return: a td_ctl_status. */
	int (*run)(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);
	/* For one-round-trip commands: print an ok reply for people. */
	void (*print)(struct json_object *reply);
};

/* ---- tagdiskctl.c ----------------------------------------------------------------------- */

/* Parse a positive number of seconds (at most 2e6) / a positive integer. Return: false if not. */
bool td_ctl_parse_seconds(const char *s, double *out) td_nonnull(1, 2);
bool td_ctl_parse_count(const char *s, unsigned long *out) td_nonnull(1, 2);
/* One round trip: send the command line made of @argv, print the reply. */
int td_ctl_run_simple(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);
/* help: every command once, in the syntax tagdiskctl accepts; the daemon's only if connected. */
int td_ctl_run_help(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);

/* ---- conn.c ----------------------------------------------------------------------------- */

extern volatile sig_atomic_t td_ctl_stop_requested;

/* Return: CLOCK_MONOTONIC in milliseconds. */
int64_t td_ctl_now_ms(void);
/*
 * For the streaming commands: let SIGINT and SIGTERM end them with status 0
 * instead of killing us. The signals stay blocked except while waiting, so
 * one that arrives just before a wait is taken by that wait.
 */
void td_ctl_catch_stop_signals(void);
/* Sleep until @deadline on CLOCK_MONOTONIC. Return: TD_CTL_OK, or TD_CTL_STOP when interrupted. */
int td_ctl_sleep_until(const struct timespec *deadline) td_nonnull(1);
void td_ctl_timespec_add(struct timespec *ts, double seconds) td_nonnull(1);
/*
 * Push what was printed out. Return: TD_CTL_OK; TD_CTL_STOP when the reader went
 * away (EPIPE), which ends the program quietly; TD_CTL_REFUSED on another error.
 */
int td_ctl_flush_stdout(void);

/*
 * Connect to @path. Return: TD_CTL_OK; TD_CTL_CONNECT when nothing accepts
 * there, TD_CTL_USAGE when @path names something that is not a socket (a
 * file, a directory), each with one line saying why in @why (no newline,
 * nothing printed).
 */
int td_ctl_conn_open(struct td_ctl_conn *c, const char *path, int timeout_ms, char *why,
		     size_t whylen) td_nonnull(1, 2, 4);
void td_ctl_conn_close(struct td_ctl_conn *c) td_nonnull(1);
/*
 * Read the next line; @timeout_ms < 0 waits for ever. On TD_CTL_READ_LINE,
 * *@line points at it (NUL-terminated, newline removed) until the next call.
 */
enum td_ctl_read td_ctl_conn_read_line(struct td_ctl_conn *c, int timeout_ms, char **line,
				       size_t *len) td_nonnull(1, 3, 4);
/*
 * Read what the connection has, after the lines: bytes buffered behind the
 * last line first, else up to @cap bytes from the socket, waiting up to
 * @timeout_ms (< 0: for ever). Return: TD_CTL_READ_LINE with *@got bytes in
 * @buf; otherwise as td_ctl_conn_read_line(), *@got 0.
 */
enum td_ctl_read td_ctl_conn_read_bytes(struct td_ctl_conn *c, int timeout_ms, void *buf,
					size_t cap, size_t *got) td_nonnull(1, 3, 5);
/*
 * Send @command (at most TD_CTL_LINE_MAX bytes, no newline) and read its
 * reply. With @echo in --json mode, the reply is printed as received.
 * Return: TD_CTL_OK with the reply in *@reply (the caller json_object_put()s
 * it); else an exit status after saying why, nothing in *@reply:
 * TD_CTL_REFUSED when the daemon said no or the reply is not a JSON object with
 * a boolean "ok", TD_CTL_CONNECT when the connection failed, TD_CTL_STOP when the
 * user interrupted.
 */
int td_ctl_call(struct td_ctl *ctl, const char *command, bool echo, struct json_object **reply)
	td_nonnull(1, 2, 4);

/* ---- print.c ---------------------------------------------------------------------------- */

/*
 * Values at JSON pointer @path ("/rate/iops") of a reply, with the defaults
 * a table shows: 0, 0, "-". td_ctl_get_num() writes the integer at @path in
 * decimal into @buf, or "-" when the reply lacks it (an older daemon).
 */
uint64_t td_ctl_get_u64(struct json_object *r, const char *path) td_nonnull(2);
double td_ctl_get_double(struct json_object *r, const char *path) td_nonnull(2);
const char *td_ctl_get_str(struct json_object *r, const char *path) td_nonnull(2);
const char *td_ctl_get_num(struct json_object *r, const char *path, char *buf, size_t len)
	td_nonnull(2, 3);

/* The printers of one-shot replies, for struct td_ctl_command.print. */
void td_ctl_print_status(struct json_object *r);
void td_ctl_print_stats(struct json_object *r);
void td_ctl_print_tags(struct json_object *r);
void td_ctl_print_reset(struct json_object *r);
void td_ctl_print_elevator(struct json_object *r);
void td_ctl_print_depth(struct json_object *r);
void td_ctl_print_inject(struct json_object *r);
void td_ctl_print_powerfail(struct json_object *r);
/* A reply to a command this tagdiskctl does not know: each member but "ok" with its value. */
void td_ctl_print_other(struct json_object *r);

/* ---- print_wlog.c ----------------------------------------------------------------------- */

/* The write log object at JSON pointer @at of @r, as one line ("off", "on, /x.log, ..."). */
void td_ctl_wlog_line(struct json_object *r, const char *at, char *buf, size_t len)
	td_nonnull(2, 3);
void td_ctl_print_log(struct json_object *r);
void td_ctl_print_mark(struct json_object *r);
/* log: a relative FILE of `log start` is made absolute (the daemon runs in "/"). */
int td_ctl_run_log(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);

/* The per-op rates between two stats replies (@prev NULL: since the daemon started). */
void td_ctl_print_stats_rates(struct json_object *cur, struct json_object *prev);

struct td_ctl_iostat;
/* One iostat row, under a header when @header; or one JSON object per row. */
void td_ctl_print_iostat_row(const struct td_ctl_iostat *io, uint64_t tags, bool header)
	td_nonnull(1);
void td_ctl_print_iostat_json(const struct td_ctl_iostat *io, uint64_t tags) td_nonnull(1);

/* ---- top.c ------------------------------------------------------------------------------ */

/* status and stats: once, or with -i / -n every interval. */
int td_ctl_run_status(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);
/* restart.c: restart, then wait for the new daemon to answer. */
int td_ctl_run_restart(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);
int td_ctl_run_stats(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);
/* top: the status block every interval. */
int td_ctl_run_top(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);
/* iostat [INTERVAL [COUNT]]: keep them (check), then print the rows (run). */
int td_ctl_check_iostat(struct td_ctl *ctl, int argc, char **argv);
int td_ctl_run_iostat(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);

/* ---- trace_out.c ------------------------------------------------------------------------ */

/* trace [-w SECONDS] [--blktrace FILE]: the event stream until it ends. */
int td_ctl_run_trace(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv);

#endif /* TAGDISK_CTL_INT_H */
