// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdiskctl.c - the command-line client of tagdiskd's admin socket.
 *
 *   tagdiskctl [-s SOCKET] [-t SECONDS] [--json] COMMAND [ARGS]
 *
 * Exit status (contract): 0 ok, 1 the daemon said no (or sent a reply that
 * is not a JSON object with "ok"), 2 usage error found here, 3 cannot talk
 * to the daemon (connect failed, no reply in time, connection closed).
 *
 * The protocol is one command line out, one JSON line back, on a connection
 * that stays open for more. Most commands are one round trip; the rest reuse
 * the connection: `top` (and `status -i`) and `stats -i` repeat a command
 * every interval, `iostat` derives iostat -x rows from successive `stats`
 * replies, and `trace` reads event lines until the daemon or the user ends
 * it, or -w SECONDS pass; with --blktrace FILE it writes them as blktrace
 * records (tagdisk/blktrace.h) for blkparse and btt. Local checks stop only
 * what is surely wrong (unknown command, wrong argument count, a newline that
 * would smuggle in a second command); the daemon judges the values.
 *
 * Replies are read into one buffer that grows to REPLY_MAX, since `tags` or
 * `stats` on a deep queue can be large; bytes past the newline stay for the
 * next line, which matters for the trace stream. Every wait is a ppoll() with
 * the reply timeout, except between trace events, which may be far apart.
 *
 * Signals: SIGPIPE is ignored; a closed stdout then shows as EPIPE, which
 * ends the program quietly with status 0 (`tagdiskctl trace | head`). The
 * streaming commands catch SIGINT and SIGTERM, keeping them blocked except
 * while waiting in ppoll(), so Ctrl-C ends a wait with EINTR and the
 * program with status 0; one-shot commands keep the default (killed).
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "common/json.h"
#include "ctl/blktrace.h"
#include "ctl/ctl_format.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

#define DEFAULT_SOCKET	   "/run/tagdisk/disk.sock"
#define DEFAULT_TIMEOUT_MS 10000
/* The daemon's limit on a command line (protocol.md); longer lines are refused here. */
#define CMD_LINE_MAX	   4096
/* Largest reply accepted: `tags` at depth 4096 is well under 1 MiB. */
#define REPLY_MAX	   (16U << 20)
#define READ_CHUNK	   (64U << 10)
/* iostat prints its header again after this many rows. */
#define IOSTAT_HEADER_EVERY 20
/* Longest -t or -i accepted, in seconds: timeouts are kept as an int of milliseconds. */
#define SECONDS_MAX	   2000000.0

enum ctl_status {
	CTL_STOP = -1, /* the user or stdout ended a stream: exit 0 */
	CTL_OK = 0,
	CTL_REFUSED = 1,
	CTL_USAGE = 2,
	CTL_CONNECT = 3,
};

enum read_result {
	READ_LINE,
	READ_EOF,	  /* closed with nothing pending */
	READ_EOF_PARTIAL, /* closed in the middle of a line */
	READ_TIMEOUT,
	READ_ERROR,	  /* errno set */
	READ_TOO_LONG,
	READ_INTERRUPTED, /* stop_requested */
	READ_WATCH_CLOSED, /* the reader of watch_fd went away */
};

struct conn {
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

struct ctl {
	const char *socket;
	int timeout_ms;
	bool json;
	bool stdout_tty;
	double interval_s; /* 0: not given */
	unsigned long count; /* 0: not given (forever) */
	const char *trace_out; /* trace: the blktrace file ("-": stdout), or NULL */
	double trace_wait_s;   /* trace: stop after this long; 0: not given */
	struct conn conn;
};

struct ctl_command {
	const char *name;
	const char *usage;
	unsigned int min_args;
	unsigned int max_args;
	bool repeats; /* takes -i and -n */
	/* Optional: the options a command that does not repeat takes after its word. */
	const char *shortopts;
	const struct option *longopts;
	/* Optional: check and keep the arguments before connecting; CTL_OK or CTL_USAGE. */
	int (*check)(struct ctl *ctl, int argc, char **argv);
	int (*run)(struct ctl *ctl, const struct ctl_command *cmd, int argc, char **argv);
	/* For one-round-trip commands: print an ok reply for people. */
	void (*print)(const struct td_json_value *reply);
};

static volatile sig_atomic_t stop_requested;
/* The signal mask to wait with once catch_stop_signals() blocked SIGINT and SIGTERM. */
static sigset_t wait_mask;
static bool wait_mask_set;

static void usage_hint(void)
{
	fprintf(stderr, "Try 'tagdiskctl --help' for more information.\n");
}

/* ---- time ------------------------------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/*
 * For the streaming commands: let Ctrl-C end them with status 0 instead of
 * killing us. The signals stay blocked except inside wait_for(), so one that
 * arrives just before a wait is taken by that wait and cannot be missed.
 */
static void catch_stop_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigset_t block;

	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &wait_mask);
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGTERM);
	wait_mask_set = true;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * Wait up to @timeout_ms (< 0: no limit) for the @nfds entries of @pfd (0: just sleep).
 * Return: what ppoll() returns; -1 with EINTR once a stop was requested.
 */
static int wait_for(struct pollfd *pfd, nfds_t nfds, int64_t timeout_ms)
{
	struct timespec ts = {
		.tv_sec = (time_t)(timeout_ms / 1000),
		.tv_nsec = (long)(timeout_ms % 1000) * 1000000,
	};

	if (stop_requested) {
		errno = EINTR;
		return -1;
	}
	return ppoll(pfd, nfds, timeout_ms < 0 ? NULL : &ts,
		     wait_mask_set ? &wait_mask : NULL);
}

/* Sleep until @deadline on CLOCK_MONOTONIC. Return: CTL_OK, or CTL_STOP when interrupted. */
static int sleep_until(const struct timespec *deadline)
{
	for (;;) {
		int64_t left = (int64_t)deadline->tv_sec * 1000 + deadline->tv_nsec / 1000000 -
			       now_ms();

		if (stop_requested)
			return CTL_STOP;
		if (left <= 0)
			return CTL_OK;
		wait_for(NULL, 0, left);
	}
}

static void timespec_add(struct timespec *ts, double seconds)
{
	double whole = floor(seconds);

	ts->tv_sec += (time_t)whole;
	ts->tv_nsec += (long)((seconds - whole) * 1e9);
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* ---- stdout ---------------------------------------------------------------------------- */

/*
 * Push what was printed out. Return: CTL_OK; CTL_STOP when the reader went
 * away (EPIPE), which ends the program quietly; CTL_REFUSED on another error.
 */
static int flush_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return CTL_OK;
	if (errno == EPIPE)
		return CTL_STOP;
	fprintf(stderr, "tagdiskctl: cannot write to stdout: %s\n", strerror(errno));
	return CTL_REFUSED;
}

/* ---- connection ------------------------------------------------------------------------ */

static int conn_open(struct conn *c, const char *path, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};
	const char *hint = " (is tagdiskd running? use -s SOCKET)";
	int err;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->watch_fd = -1;
	c->path = path;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr,
			"tagdiskctl: cannot connect to %s: path too long (at most %zu bytes)\n",
			path, sizeof(sa.sun_path) - 1);
		return CTL_CONNECT;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		err = errno;
		goto out_fail;
	}
	/* A daemon whose listen backlog is full would otherwise block connect() for ever. */
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EISCONN)
			break; /* an interrupted connect completed meanwhile */
		err = errno;
		goto out_close_fd;
	}
	return CTL_OK;

out_close_fd:
	close(c->fd);
	c->fd = -1;
out_fail:
	if (err == EACCES || err == EPERM)
		hint = " (run as root or as a member of the socket's group)";
	else if (err == EAGAIN)
		hint = " (timed out: the daemon is not accepting connections)";
	fprintf(stderr, "tagdiskctl: cannot connect to %s: %s%s\n", path, strerror(err), hint);
	return CTL_CONNECT;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
}

/* Send all of @line. Return: 0, or a positive errno. */
static int conn_send(struct conn *c, const char *line, size_t len)
{
	while (len) {
		ssize_t n = send(c->fd, line, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR && !stop_requested)
				continue;
			return errno;
		}
		line += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Make room to read at least one more chunk. Return: 0; -E2BIG when the
 * pending line is already longer than REPLY_MAX; -ENOMEM.
 */
static int conn_make_room(struct conn *c)
{
	const size_t max_cap = REPLY_MAX + READ_CHUNK;
	size_t pending = c->end - c->start;
	size_t cap;
	char *buf;

	if (pending > REPLY_MAX)
		return -E2BIG;
	if (c->start && c->cap - c->end < READ_CHUNK) {
		memmove(c->buf, c->buf + c->start, pending);
		c->end = pending;
		c->start = 0;
	}
	if (c->cap - c->end >= READ_CHUNK)
		return 0;
	/* pending <= REPLY_MAX, so at max_cap a whole chunk always fits. */
	cap = TD_MIN(TD_MAX(c->cap * 2, (size_t)READ_CHUNK), max_cap);
	buf = realloc(c->buf, cap);
	if (!buf)
		return -ENOMEM;
	c->buf = buf;
	c->cap = cap;
	return 0;
}

/*
 * Read the next line; @timeout_ms < 0 waits for ever. On READ_LINE, *@line
 * points at it (NUL-terminated, newline removed) until the next call.
 */
static enum read_result conn_read_line(struct conn *c, int timeout_ms, char **line, size_t *len)
{
	int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;

	for (;;) {
		char *nl = NULL;
		/* poll(2) skips a negative fd; a pipe whose reader closed reports POLLERR. */
		struct pollfd pfd[2] = {
			{ .fd = c->fd, .events = POLLIN },
			{ .fd = c->watch_fd },
		};
		int64_t wait_ms = -1;
		ssize_t n;
		int r;

		if (c->end > c->start + c->scanned)
			nl = memchr(c->buf + c->start + c->scanned, '\n',
				    c->end - c->start - c->scanned);
		if (nl) {
			*nl = '\0';
			*line = c->buf + c->start;
			*len = (size_t)(nl - *line);
			c->start = (size_t)(nl + 1 - c->buf);
			c->scanned = 0;
			return READ_LINE;
		}
		c->scanned = c->end - c->start;
		r = conn_make_room(c);
		if (r == -E2BIG)
			return READ_TOO_LONG;
		if (r) {
			errno = -r;
			return READ_ERROR;
		}
		if (timeout_ms >= 0) {
			int64_t left = deadline - now_ms();

			if (left <= 0)
				return READ_TIMEOUT;
			wait_ms = left;
		}
		n = wait_for(pfd, 2, wait_ms);
		if (n < 0 && errno != EINTR)
			return READ_ERROR;
		if (stop_requested)
			return READ_INTERRUPTED;
		/* Asked for no events, it can only report POLLERR, POLLHUP or POLLNVAL. */
		if (n > 0 && pfd[1].revents)
			return READ_WATCH_CLOSED;
		if (n <= 0)
			continue; /* EINTR, or the timeout: checked at the top */
		n = read(c->fd, c->buf + c->end, c->cap - c->end);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return READ_ERROR;
		}
		if (n == 0)
			return c->end > c->start ? READ_EOF_PARTIAL : READ_EOF;
		c->end += (size_t)n;
	}
}

/* ---- one request ----------------------------------------------------------------------- */

/*
 * Send @command and read its reply. With @echo in --json mode, the reply is
 * printed as received. Return: CTL_OK with the parsed reply in *@reply (the
 * caller frees it); else an exit status after saying why (nothing in
 * *@reply): CTL_REFUSED when the daemon said no or the reply is not a JSON
 * object with "ok", CTL_CONNECT when the connection failed, CTL_STOP when
 * the user interrupted.
 */
static int ctl_call(struct ctl *ctl, const char *command, bool echo,
		    struct td_json_value **reply)
{
	struct conn *c = &ctl->conn;
	struct td_json_value *v;
	const struct td_json_value *ok;
	size_t cmd_len = strlen(command);
	char cmd_line[CMD_LINE_MAX + 1];
	char *line;
	size_t len;
	int send_err;

	*reply = NULL;
	assert(cmd_len <= CMD_LINE_MAX); /* run_simple() refused longer lines */
	memcpy(cmd_line, command, cmd_len);
	cmd_line[cmd_len] = '\n';
	/* A daemon that refuses us writes its reason before closing: read it even if send fails. */
	send_err = conn_send(c, cmd_line, cmd_len + 1);

	switch (conn_read_line(c, ctl->timeout_ms, &line, &len)) {
	case READ_LINE:
		break;
	case READ_INTERRUPTED:
	case READ_WATCH_CLOSED:
		return CTL_STOP;
	case READ_TIMEOUT:
		if (send_err && send_err != EINTR) {
			fprintf(stderr, "tagdiskctl: cannot send to %s: %s\n", c->path,
				strerror(send_err));
			return CTL_CONNECT;
		}
		fprintf(stderr, "tagdiskctl: no reply from the daemon on %s within %g s\n", c->path,
			ctl->timeout_ms / 1000.0);
		return CTL_CONNECT;
	case READ_ERROR:
		if (errno != ECONNRESET) {
			fprintf(stderr, "tagdiskctl: reading from %s: %s\n", c->path,
				strerror(errno));
			return CTL_CONNECT;
		}
		/* Closed with our command unread: the same as closing without a word. */
		__attribute__((fallthrough));
	case READ_EOF:
		/* Whether our send failed too only says when it closed: one message for both. */
		fprintf(stderr, "tagdiskctl: the daemon on %s closed the connection without "
				"replying\n",
			c->path);
		return CTL_CONNECT;
	case READ_EOF_PARTIAL:
		fprintf(stderr, "tagdiskctl: the daemon on %s closed the connection in the middle "
				"of a reply\n",
			c->path);
		return CTL_CONNECT;
	case READ_TOO_LONG:
		fprintf(stderr, "tagdiskctl: bad reply from the daemon (longer than %u MiB)\n",
			REPLY_MAX >> 20);
		return CTL_REFUSED;
	}

	v = td_json_parse(line, len, NULL, 0);
	ok = td_json_get(v, "ok");
	if (!v || v->type != TD_JSON_OBJECT || !ok || ok->type != TD_JSON_BOOL) {
		td_json_value_free(v);
		fprintf(stderr, "tagdiskctl: bad reply from the daemon\n");
		return CTL_REFUSED;
	}
	if (echo && ctl->json) {
		fwrite(line, 1, len, stdout);
		putchar('\n');
	}
	if (!ok->u.boolean) {
		if (!(echo && ctl->json))
			fprintf(stderr, "tagdiskctl: %s\n",
				td_json_as_str(td_json_get(v, "error"), "the daemon refused"));
		td_json_value_free(v);
		return CTL_REFUSED;
	}
	*reply = v;
	return CTL_OK;
}

/* ---- reading replies ------------------------------------------------------------------- */

static uint64_t get_u64(const struct td_json_value *r, const char *path)
{
	return td_json_as_u64(td_json_path(r, path), 0);
}

static double get_double(const struct td_json_value *r, const char *path)
{
	return td_json_as_double(td_json_path(r, path), 0);
}

static const char *get_str(const struct td_json_value *r, const char *path)
{
	return td_json_as_str(td_json_path(r, path), "-");
}

/* The integer at @path in decimal, or "-" when the reply lacks it (an older daemon). */
static const char *get_num(const struct td_json_value *r, const char *path, char *buf,
			   size_t len)
{
	const struct td_json_value *v = td_json_path(r, path);

	if (v && v->type == TD_JSON_NUMBER && v->u.num.has_i64)
		snprintf(buf, len, "%lld", (long long)v->u.num.i64);
	else if (v && v->type == TD_JSON_NUMBER && v->u.num.has_u64)
		snprintf(buf, len, "%llu", (unsigned long long)v->u.num.u64);
	else if (v && v->type == TD_JSON_NUMBER)
		snprintf(buf, len, "%g", v->u.num.d);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* Print @t with @indent and free it. */
static void table_print(struct td_ctl_table *t, const char *indent)
{
	char *text = t ? td_ctl_table_render(t, indent) : NULL;

	if (text)
		fputs(text, stdout);
	else
		fprintf(stderr, "tagdiskctl: out of memory\n");
	free(text);
	td_ctl_table_free(t);
}

/* A two-column table of names and values, with no header. */
static struct td_ctl_table *kv_table(void)
{
	static const struct td_ctl_column cols[] = {
		{ NULL, TD_CTL_LEFT },
		{ NULL, TD_CTL_LEFT },
	};

	return td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
}

static void kv_add(struct td_ctl_table *t, const char *key, const char *value)
{
	if (!t)
		return;
	td_ctl_table_add(t, "%s", key);
	td_ctl_table_add(t, "%s", value);
}

/* ---- printers -------------------------------------------------------------------------- */

static void print_help(const struct td_json_value *r)
{
	/* Commands the client builds from others; the daemon does not know them. */
	static const char *const local[][2] = {
		{ "iostat [INTERVAL [COUNT]]", "iostat -x style rates from stats (tagdiskctl)" },
		{ "top [-i SECONDS] [-n COUNT]", "refresh status every SECONDS (tagdiskctl)" },
		{ "trace [-w SECONDS] [--blktrace FILE]",
		  "stop after SECONDS; write FILE for blkparse and btt (tagdiskctl)" },
	};
	const struct td_json_value *cmds = td_json_get(r, "commands");
	size_t n = td_json_len(cmds);
	const size_t max_width = 32;
	size_t width = 0;
	size_t i;

	for (i = 0; i < n + TD_ARRAY_SIZE(local); i++) {
		const char *usage = i < n ? get_str(td_json_index(cmds, i), "usage")
					  : local[i - n][0];
		size_t w = strlen(usage);

		if (w <= max_width)
			width = TD_MAX(width, w);
	}
	for (i = 0; i < n + TD_ARRAY_SIZE(local); i++) {
		const struct td_json_value *c = td_json_index(cmds, i);
		const char *usage = i < n ? get_str(c, "usage") : local[i - n][0];
		const char *help = i < n ? get_str(c, "help") : local[i - n][1];

		/* A usage too long to align with the others gets its own line. */
		if (strlen(usage) > width)
			printf("  %s\n  %-*s  %s\n", usage, (int)width, "", help);
		else
			printf("  %-*s  %s\n", (int)width, usage, help);
	}
}

static void print_status(const struct td_json_value *r)
{
	struct td_ctl_table *t = kv_table();
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN], c[TD_CTL_FMT_LEN];
	char line[512];
	uint64_t depth = get_u64(r, "depth");
	uint64_t workers;

	kv_add(t, "state", get_str(r, "state"));
	kv_add(t, "image", get_str(r, "image"));
	snprintf(line, sizeof(line), "%s (%s bytes)",
		 td_ctl_fmt_size(get_u64(r, "size"), a, sizeof(a)),
		 get_num(r, "size", b, sizeof(b)));
	kv_add(t, "size", line);
	kv_add(t, "disk", get_str(r, "disk"));
	kv_add(t, "read-only", td_json_as_bool(td_json_get(r, "read_only"), false) ? "yes" : "no");
	kv_add(t, "mode", get_str(r, "mode"));
	kv_add(t, "elevator", get_str(r, "elevator"));
	if (depth)
		snprintf(line, sizeof(line), "%s/%llu", get_num(r, "tags_in_use", a, sizeof(a)),
			 (unsigned long long)depth);
	else
		snprintf(line, sizeof(line), "- (no tags in mode %s)", get_str(r, "mode"));
	kv_add(t, "tags", line);
	kv_add(t, "in flight", get_num(r, "in_flight", a, sizeof(a)));
	kv_add(t, "queued", get_num(r, "queued", a, sizeof(a)));
	snprintf(line, sizeof(line), "%s/%s", get_num(r, "requests_used", a, sizeof(a)),
		 get_num(r, "nr_requests", b, sizeof(b)));
	kv_add(t, "requests", line);
	/* workers 0: the thread that runs the queue executes the commands itself */
	workers = get_u64(r, "workers");
	if (workers == 0)
		snprintf(a, sizeof(a), "inline (no worker threads)");
	else
		snprintf(a, sizeof(a), "%llu worker%s", (unsigned long long)workers,
			 workers == 1 ? "" : "s");
	snprintf(line, sizeof(line), "%s, model %s, write cache %s", a, get_str(r, "model"),
		 get_str(r, "write_cache"));
	kv_add(t, "drive", line);
	snprintf(line, sizeof(line), "%.1f (read %.1f, write %.1f, over %.1f s)",
		 get_double(r, "rate.iops"), get_double(r, "rate.read_iops"),
		 get_double(r, "rate.write_iops"), get_double(r, "rate.interval_s"));
	kv_add(t, "iops", line);
	snprintf(line, sizeof(line), "%s (read %s, write %s)",
		 td_ctl_fmt_rate(get_double(r, "rate.bytes_per_s"), a, sizeof(a)),
		 td_ctl_fmt_rate(get_double(r, "rate.read_bytes_per_s"), b, sizeof(b)),
		 td_ctl_fmt_rate(get_double(r, "rate.write_bytes_per_s"), c, sizeof(c)));
	kv_add(t, "throughput", line);
	kv_add(t, "resets", get_num(r, "resets", a, sizeof(a)));
	kv_add(t, "timeouts", get_num(r, "timeouts", a, sizeof(a)));
	kv_add(t, "errors", get_num(r, "errors", a, sizeof(a)));
	kv_add(t, "uptime", td_ctl_fmt_duration(get_u64(r, "uptime_s"), a, sizeof(a)));
	kv_add(t, "pid", get_num(r, "pid", a, sizeof(a)));
	kv_add(t, "version", get_str(r, "version"));
	table_print(t, "");
}

/* The per-op rows of `stats`: op name, count key, bytes key, merges key (NULL: none). */
static const char *const stats_ops[][4] = {
	{ "read", "reads", "read_bytes", "merges.read" },
	{ "write", "writes", "write_bytes", "merges.write" },
	{ "flush", "flushes", NULL, NULL },
	{ "discard", "discards", "discard_bytes", NULL },
	{ "write_zeroes", "write_zeroes", "write_zeroes_bytes", NULL },
};

/* A size at @path as "1.5 MiB (1572864 bytes)". */
static const char *get_size(const struct td_json_value *r, const char *path, char *buf,
			    size_t len)
{
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];

	snprintf(buf, len, "%s (%s bytes)", td_ctl_fmt_size(get_u64(r, path), a, sizeof(a)),
		 get_num(r, path, b, sizeof(b)));
	return buf;
}

/* The volatile write cache: what it holds now and what it has done, powerfails included. */
static void print_stats_cache(const struct td_json_value *r)
{
	struct td_ctl_table *t = kv_table();
	char a[2 * TD_CTL_FMT_LEN + 16];

	printf("write cache (volatile)\n");
	kv_add(t, "cached", get_size(r, "cache.cached_bytes", a, sizeof(a)));
	kv_add(t, "lines", get_num(r, "cache.lines", a, sizeof(a)));
	kv_add(t, "writes", get_num(r, "cache.writes", a, sizeof(a)));
	kv_add(t, "written back", get_size(r, "cache.written_back_bytes", a, sizeof(a)));
	kv_add(t, "evicted lines", get_num(r, "cache.evicted_lines", a, sizeof(a)));
	kv_add(t, "flushes", get_num(r, "cache.flushes", a, sizeof(a)));
	kv_add(t, "powerfails", get_num(r, "cache.powerfails", a, sizeof(a)));
	kv_add(t, "lost writes", get_num(r, "cache.lost_writes", a, sizeof(a)));
	kv_add(t, "lost sectors", get_num(r, "cache.lost_sectors", a, sizeof(a)));
	table_print(t, "  ");
}

static void print_stats(const struct td_json_value *r)
{
	static const struct td_ctl_column cols[] = {
		{ "OP", TD_CTL_LEFT },	    { "COUNT", TD_CTL_RIGHT }, { "BYTES", TD_CTL_RIGHT },
		{ "MERGES", TD_CTL_RIGHT }, { "MEAN", TD_CTL_RIGHT },  { "P50", TD_CTL_RIGHT },
		{ "P90", TD_CTL_RIGHT },    { "P99", TD_CTL_RIGHT },   { "P999", TD_CTL_RIGHT },
	};
	static const char *const pcts[] = { "mean", "p50", "p90", "p99", "p999" };
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	char a[TD_CTL_FMT_LEN];
	char path[64];
	size_t i, k;

	for (i = 0; t && i < TD_ARRAY_SIZE(stats_ops); i++) {
		const char *const *op = stats_ops[i];
		const struct td_json_value *lat;

		td_ctl_table_add(t, "%s", op[0]);
		td_ctl_table_add(t, "%s", get_num(r, op[1], a, sizeof(a)));
		td_ctl_table_add(t, "%s", op[2] && td_json_get(r, op[2])
						  ? td_ctl_fmt_size(get_u64(r, op[2]), a, sizeof(a))
						  : "-");
		td_ctl_table_add(t, "%s", op[3] ? get_num(r, op[3], a, sizeof(a)) : "-");
		snprintf(path, sizeof(path), "latency.%s", op[0]);
		lat = td_json_path(r, path);
		for (k = 0; k < TD_ARRAY_SIZE(pcts); k++) {
			const struct td_json_value *v = td_json_get(lat, pcts[k]);
			uint64_t us = td_json_as_u64(v, 0);

			/* With no I/O of this kind, a percentile of 0 would be a lie. */
			if (!v || !get_u64(lat, "count"))
				td_ctl_table_add(t, "-");
			else
				td_ctl_table_add(t, "%s", td_ctl_fmt_latency(us, a, sizeof(a)));
		}
	}
	table_print(t, "");

	printf("\nqueue\n");
	t = kv_table();
	kv_add(t, "deferred", get_num(r, "deferred", a, sizeof(a)));
	kv_add(t, "killed", get_num(r, "killed", a, sizeof(a)));
	kv_add(t, "requeued", get_num(r, "requeued", a, sizeof(a)));
	kv_add(t, "resets", get_num(r, "resets", a, sizeof(a)));
	kv_add(t, "timeouts", get_num(r, "timeouts", a, sizeof(a)));
	kv_add(t, "retries exhausted", get_num(r, "retries_exhausted", a, sizeof(a)));
	kv_add(t, "errors", get_num(r, "errors", a, sizeof(a)));
	kv_add(t, "in flight", get_num(r, "in_flight", a, sizeof(a)));
	kv_add(t, "front merges", get_num(r, "front_merges", a, sizeof(a)));
	kv_add(t, "back merges", get_num(r, "back_merges", a, sizeof(a)));
	kv_add(t, "io ticks ms", get_num(r, "io_ticks_ms", a, sizeof(a)));
	kv_add(t, "time in queue ms", get_num(r, "time_in_queue_ms", a, sizeof(a)));
	table_print(t, "  ");

	printf("drive\n");
	t = kv_table();
	kv_add(t, "commands", get_num(r, "drive.commands", a, sizeof(a)));
	kv_add(t, "queued", get_num(r, "drive.queued", a, sizeof(a)));
	kv_add(t, "executing", get_num(r, "drive.executing", a, sizeof(a)));
	kv_add(t, "hung", get_num(r, "drive.hung", a, sizeof(a)));
	kv_add(t, "seeks", get_num(r, "drive.seeks", a, sizeof(a)));
	kv_add(t, "seek distance", get_num(r, "drive.seek_distance", a, sizeof(a)));
	snprintf(a, sizeof(a), "%.1f", get_double(r, "drive.mean_seek_sectors"));
	kv_add(t, "mean seek sectors", a);
	table_print(t, "  ");

	/* Only a drive with write_cache = volatile has one. */
	if (td_json_get(r, "cache"))
		print_stats_cache(r);
}

static void print_tags(const struct td_json_value *r)
{
	static const struct td_ctl_column cols[] = {
		{ "TAG", TD_CTL_RIGHT },     { "OP", TD_CTL_LEFT },  { "SECTOR", TD_CTL_RIGHT },
		{ "SECTORS", TD_CTL_RIGHT }, { "AGE", TD_CTL_RIGHT }, { "RETRIES", TD_CTL_RIGHT },
		{ "PID", TD_CTL_RIGHT },     { "CDB", TD_CTL_LEFT },
	};
	const struct td_json_value *tags = td_json_get(r, "tags");
	size_t n = td_json_len(tags);
	struct td_ctl_table *t;
	char a[TD_CTL_FMT_LEN];
	size_t i;

	if (!n) {
		printf("no outstanding tags (depth %s)\n", get_num(r, "depth", a, sizeof(a)));
		return;
	}
	t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	for (i = 0; t && i < n; i++) {
		const struct td_json_value *e = td_json_index(tags, i);

		td_ctl_table_add(t, "%s", get_num(e, "tag", a, sizeof(a)));
		td_ctl_table_add(t, "%s", get_str(e, "op"));
		td_ctl_table_add(t, "%s", get_num(e, "sector", a, sizeof(a)));
		td_ctl_table_add(t, "%s", get_num(e, "sectors", a, sizeof(a)));
		td_ctl_table_add(t, "%s", td_ctl_fmt_latency(get_u64(e, "age_us"), a, sizeof(a)));
		td_ctl_table_add(t, "%s", get_num(e, "retries", a, sizeof(a)));
		td_ctl_table_add(t, "%s", get_num(e, "pid", a, sizeof(a)));
		td_ctl_table_add(t, "%s", get_str(e, "cdb"));
	}
	table_print(t, "");
}

static void print_reset(const struct td_json_value *r)
{
	char a[TD_CTL_FMT_LEN];

	printf("reset: %s requests requeued\n", get_num(r, "requeued", a, sizeof(a)));
}

static void print_elevator(const struct td_json_value *r)
{
	const struct td_json_value *avail = td_json_get(r, "available");
	size_t i;

	if (td_json_get(r, "previous")) {
		printf("elevator: %s -> %s\n", get_str(r, "previous"), get_str(r, "elevator"));
		return;
	}
	printf("elevator: %s (available: ", get_str(r, "elevator"));
	for (i = 0; i < td_json_len(avail); i++)
		printf("%s%s", i ? ", " : "", td_json_as_str(td_json_index(avail, i), "?"));
	printf(")\n");
}

static void print_depth(const struct td_json_value *r)
{
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];

	if (td_json_get(r, "previous"))
		printf("depth: %s -> %s\n", get_num(r, "previous", a, sizeof(a)),
		       get_num(r, "depth", b, sizeof(b)));
	else
		printf("depth: %s (max %s)\n", get_num(r, "depth", a, sizeof(a)),
		       get_num(r, "max", b, sizeof(b)));
}

static void print_inject(const struct td_json_value *r)
{
	static const struct td_ctl_column cols[] = {
		{ "KIND", TD_CTL_LEFT },	{ "OP", TD_CTL_LEFT },
		{ "SECTOR", TD_CTL_RIGHT },	{ "COUNT", TD_CTL_RIGHT },
		{ "TIMES-LEFT", TD_CTL_RIGHT }, { "FIRED", TD_CTL_RIGHT },
	};
	const struct td_json_value *rules = td_json_get(r, "rules");
	size_t n = td_json_len(rules);
	struct td_ctl_table *t;
	char a[TD_CTL_FMT_LEN];
	char kind[TD_CTL_FMT_LEN * 2];
	size_t i;

	if (!n) {
		printf("no faults armed\n");
	} else {
		t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
		for (i = 0; t && i < n; i++) {
			const struct td_json_value *e = td_json_index(rules, i);
			const struct td_json_value *left = td_json_get(e, "times_left");
			const char *k = get_str(e, "kind");

			/* every and latency carry their one parameter in the kind column. */
			if (strcmp(k, "every") == 0)
				snprintf(kind, sizeof(kind), "every %s",
					 get_num(e, "every", a, sizeof(a)));
			else if (strcmp(k, "latency") == 0)
				snprintf(kind, sizeof(kind), "latency %s",
					 td_ctl_fmt_latency(get_u64(e, "latency_us"), a,
							    sizeof(a)));
			else
				snprintf(kind, sizeof(kind), "%s", k);
			td_ctl_table_add(t, "%s", kind);
			td_ctl_table_add(t, "%s", get_str(e, "op"));
			td_ctl_table_add(t, "%s", get_num(e, "sector", a, sizeof(a)));
			td_ctl_table_add(t, "%s", get_num(e, "count", a, sizeof(a)));
			if (left && left->type == TD_JSON_NULL)
				td_ctl_table_add(t, "forever");
			else
				td_ctl_table_add(t, "%s", get_num(e, "times_left", a, sizeof(a)));
			td_ctl_table_add(t, "%s", get_num(e, "fired", a, sizeof(a)));
		}
		table_print(t, "");
	}
	printf("seed %s\n", get_num(r, "seed", a, sizeof(a)));
}

static void print_powerfail(const struct td_json_value *r)
{
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN], c[TD_CTL_FMT_LEN];

	printf("powerfail: lost %s writes (%s sectors), kept %s writes\n",
	       get_num(r, "lost_writes", a, sizeof(a)), get_num(r, "lost_sectors", b, sizeof(b)),
	       get_num(r, "kept_writes", c, sizeof(c)));
}

/* ---- commands -------------------------------------------------------------------------- */

/* Join @argc words into one command line in @buf. Return: false when over CMD_LINE_MAX. */
static bool join_line(char *buf, size_t len, int argc, char **argv)
{
	size_t o = 0;
	int i;

	for (i = 0; i < argc; i++) {
		size_t n = strlen(argv[i]);

		if (o + (i > 0) + n > CMD_LINE_MAX || o + (i > 0) + n + 1 > len)
			return false;
		if (i)
			buf[o++] = ' ';
		memcpy(buf + o, argv[i], n);
		o += n;
	}
	buf[o] = '\0';
	return true;
}

/* One round trip: send the command line, print the reply. */
static int run_simple(struct ctl *ctl, const struct ctl_command *cmd, int argc, char **argv)
{
	struct td_json_value *reply;
	char line[CMD_LINE_MAX + 1];
	int r;

	if (!join_line(line, sizeof(line), argc, argv)) {
		fprintf(stderr, "tagdiskctl: command too long (over %d bytes)\n", CMD_LINE_MAX);
		return CTL_USAGE;
	}
	r = ctl_call(ctl, line, true, &reply);
	if (r)
		return r;
	if (!ctl->json)
		cmd->print(reply);
	td_json_value_free(reply);
	return flush_stdout();
}

/* `top`, `status -i`: the status block again every interval. */
static int run_top(struct ctl *ctl, const struct ctl_command *cmd, int argc, char **argv)
{
	double interval = ctl->interval_s > 0 ? ctl->interval_s : 1;
	struct timespec next;
	unsigned long i;

	(void)cmd, (void)argc, (void)argv;
	catch_stop_signals();
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 0; !ctl->count || i < ctl->count; i++) {
		struct td_json_value *reply;
		int r;

		if (i) {
			timespec_add(&next, interval);
			if (sleep_until(&next))
				return CTL_STOP;
		}
		r = ctl_call(ctl, "status", true, &reply);
		if (r)
			return r;
		if (!ctl->json) {
			if (ctl->stdout_tty)
				printf("\033[H\033[Jtagdiskctl top: %s every %g s "
				       "(Ctrl-C quits)\n\n",
				       ctl->conn.path, interval);
			else if (i)
				putchar('\n');
			print_status(reply);
		}
		td_json_value_free(reply);
		r = flush_stdout();
		if (r)
			return r;
	}
	return CTL_OK;
}

/* The growth of the counter at @path from @prev (NULL: zero) to @cur; 0 if it went back. */
static double get_delta(const struct td_json_value *cur, const struct td_json_value *prev,
			const char *path)
{
	uint64_t a = get_u64(cur, path);
	uint64_t b = get_u64(prev, path);

	return a >= b ? (double)(a - b) : 0;
}

/* The per-op rates between two stats replies (@prev NULL: since the daemon started). */
static void print_stats_rates(const struct td_json_value *cur, const struct td_json_value *prev)
{
	static const struct td_ctl_column cols[] = {
		{ "OP", TD_CTL_LEFT },
		{ "IOPS", TD_CTL_RIGHT },
		{ "THROUGHPUT", TD_CTL_RIGHT },
		{ "MERGES/S", TD_CTL_RIGHT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	double dt = get_delta(cur, prev, "uptime_us") / 1e6;
	char a[TD_CTL_FMT_LEN];
	size_t k;

	if (dt <= 0)
		dt = INFINITY; /* no time passed: show zeros */
	for (k = 0; t && k < TD_ARRAY_SIZE(stats_ops); k++) {
		const char *const *op = stats_ops[k];

		td_ctl_table_add(t, "%s", op[0]);
		td_ctl_table_add(t, "%.1f", get_delta(cur, prev, op[1]) / dt);
		if (op[2])
			td_ctl_table_add(t, "%s", td_ctl_fmt_rate(get_delta(cur, prev, op[2]) / dt,
								  a, sizeof(a)));
		else
			td_ctl_table_add(t, "-");
		if (op[3])
			td_ctl_table_add(t, "%.1f", get_delta(cur, prev, op[3]) / dt);
		else
			td_ctl_table_add(t, "-");
	}
	table_print(t, "");
}

/* `stats -i`: per-op rates from successive stats replies, the first since the start. */
static int run_stats_rates(struct ctl *ctl)
{
	double interval = ctl->interval_s > 0 ? ctl->interval_s : 1;
	struct td_json_value *prev = NULL;
	struct timespec next;
	unsigned long i;
	int r = CTL_OK;

	catch_stop_signals();
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 0; !ctl->count || i < ctl->count; i++) {
		struct td_json_value *cur;

		if (i) {
			timespec_add(&next, interval);
			r = sleep_until(&next);
			if (r)
				break;
		}
		r = ctl_call(ctl, "stats", true, &cur);
		if (r)
			break;
		if (!ctl->json) {
			if (i)
				putchar('\n');
			print_stats_rates(cur, prev);
		}
		td_json_value_free(prev);
		prev = cur;
		r = flush_stdout();
		if (r)
			break;
	}
	td_json_value_free(prev);
	return r;
}

static int run_status(struct ctl *ctl, const struct ctl_command *cmd, int argc, char **argv)
{
	if (ctl->interval_s > 0 || ctl->count)
		return run_top(ctl, cmd, argc, argv);
	return run_simple(ctl, cmd, argc, argv);
}

static int run_stats(struct ctl *ctl, const struct ctl_command *cmd, int argc, char **argv)
{
	if (ctl->interval_s > 0 || ctl->count)
		return run_stats_rates(ctl);
	return run_simple(ctl, cmd, argc, argv);
}

/* Read a `stats` reply into @s. Return: false when it has no usable sysfs_stat. */
static bool iostat_sample(const struct td_json_value *reply, struct td_ctl_iostat_sample *s)
{
	const struct td_json_value *stat = td_json_get(reply, "sysfs_stat");
	size_t i;

	if (!stat || stat->type != TD_JSON_ARRAY || td_json_len(stat) < TD_CTL_SYSFS_FIELDS)
		return false;
	s->uptime_us = get_u64(reply, "uptime_us");
	for (i = 0; i < TD_CTL_SYSFS_FIELDS; i++)
		s->stat[i] = td_json_as_u64(td_json_index(stat, i), 0);
	return true;
}

static void iostat_print_json(const struct td_ctl_iostat *io, uint64_t tags)
{
	struct td_json j;
	const char *text;

	td_json_init(&j);
	td_json_obj_begin(&j);
	td_json_kv_double(&j, "interval_s", io->interval_s);
	td_json_kv_double(&j, "r_s", io->r_s);
	td_json_kv_double(&j, "w_s", io->w_s);
	td_json_kv_double(&j, "rkB_s", io->rkb_s);
	td_json_kv_double(&j, "wkB_s", io->wkb_s);
	td_json_kv_double(&j, "rrqm_s", io->rrqm_s);
	td_json_kv_double(&j, "wrqm_s", io->wrqm_s);
	td_json_kv_double(&j, "r_await_ms", io->r_await_ms);
	td_json_kv_double(&j, "w_await_ms", io->w_await_ms);
	td_json_kv_double(&j, "aqu_sz", io->aqu_sz);
	td_json_kv_u64(&j, "tags_in_use", tags);
	td_json_kv_double(&j, "util_pct", io->util_pct);
	td_json_obj_end(&j);
	text = td_json_cstr(&j);
	if (text)
		puts(text);
	else
		fprintf(stderr, "tagdiskctl: out of memory\n");
	td_json_free(&j);
}

static void iostat_print_row(const struct td_ctl_iostat *io, uint64_t tags, bool header)
{
	if (header)
		printf("%8s %8s %9s %9s %8s %8s %8s %8s %7s %5s %7s\n", "r/s", "w/s", "rkB/s",
		       "wkB/s", "rrqm/s", "wrqm/s", "r_await", "w_await", "aqu-sz", "tags",
		       "%util");
	printf("%8.2f %8.2f %9.2f %9.2f %8.2f %8.2f %8.2f %8.2f %7.2f %5llu %7.2f\n", io->r_s,
	       io->w_s, io->rkb_s, io->wkb_s, io->rrqm_s, io->wrqm_s, io->r_await_ms,
	       io->w_await_ms, io->aqu_sz, (unsigned long long)tags, io->util_pct);
}

/* Parse a positive number of seconds. Return: false when @s is not one. */
static bool parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || v > SECONDS_MAX)
		return false;
	*out = v;
	return true;
}

static bool parse_count(const char *s, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0)
		return false;
	*out = v;
	return true;
}

/* iostat [INTERVAL [COUNT]]: keep them as the interval and count. Return: CTL_OK or CTL_USAGE. */
static int check_iostat(struct ctl *ctl, int argc, char **argv)
{
	ctl->interval_s = 1;
	if (argc > 1 && !parse_seconds(argv[1], &ctl->interval_s)) {
		fprintf(stderr, "tagdiskctl: iostat: INTERVAL \"%s\" is not a positive number of "
				"seconds\n",
			argv[1]);
		return CTL_USAGE;
	}
	if (argc > 2 && !parse_count(argv[2], &ctl->count)) {
		fprintf(stderr, "tagdiskctl: iostat: COUNT \"%s\" is not a positive integer\n",
			argv[2]);
		return CTL_USAGE;
	}
	return CTL_OK;
}

static int run_iostat(struct ctl *ctl, const struct ctl_command *cmd, int argc, char **argv)
{
	struct td_ctl_iostat_sample samples[2];
	struct td_ctl_iostat_sample *prev = NULL;
	double interval = ctl->interval_s;
	unsigned long count = ctl->count;
	struct timespec next;
	unsigned long i;

	(void)cmd, (void)argc, (void)argv;
	catch_stop_signals();
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 0; !count || i < count; i++) {
		struct td_ctl_iostat_sample *cur = &samples[i % 2];
		struct td_json_value *stats;
		struct td_json_value *status;
		struct td_ctl_iostat io;
		uint64_t tags;
		bool usable;
		int r;

		if (i) {
			timespec_add(&next, interval);
			if (sleep_until(&next))
				return CTL_STOP;
		}
		r = ctl_call(ctl, "stats", false, &stats);
		if (r)
			return r;
		usable = iostat_sample(stats, cur);
		td_json_value_free(stats);
		if (!usable) {
			fprintf(stderr, "tagdiskctl: bad reply from the daemon (stats without "
					"sysfs_stat)\n");
			return CTL_REFUSED;
		}
		r = ctl_call(ctl, "status", false, &status);
		if (r)
			return r;
		tags = get_u64(status, "tags_in_use");
		td_json_value_free(status);

		td_ctl_iostat_compute(prev, cur, &io);
		if (ctl->json)
			iostat_print_json(&io, tags);
		else
			iostat_print_row(&io, tags, i % IOSTAT_HEADER_EVERY == 0);
		r = flush_stdout();
		if (r)
			return r;
		prev = cur;
	}
	return CTL_OK;
}

/*
 * Decode one line of the trace stream. Return: 1 for an event, in @ev (its
 * op points into @v); 0 for a note of events the daemon dropped, their
 * number in *@dropped; -1 for anything else.
 */
static int trace_decode(const struct td_json_value *v, struct td_ctl_event *ev,
			uint64_t *dropped)
{
	const struct td_json_value *d = td_json_get(v, "dropped");
	const char *action;

	if (!v || v->type != TD_JSON_OBJECT)
		return -1;
	if (d) {
		*dropped = td_json_as_u64(d, 0);
		return 0;
	}
	action = td_json_as_str(td_json_get(v, "action"), NULL);
	if (!action || !td_json_get(v, "time_ns"))
		return -1;
	*ev = (struct td_ctl_event){
		.time_ns = get_u64(v, "time_ns"),
		.pid = td_json_as_i64(td_json_get(v, "pid"), 0),
		.action = action[0],
		.op = td_json_as_str(td_json_get(v, "op"), "?"),
		.fua = td_json_as_bool(td_json_get(v, "fua"), false),
		.sector = get_u64(v, "sector"),
		.sectors = get_u64(v, "sectors"),
		.tag = td_json_as_i64(td_json_get(v, "tag"), -1),
		.error = td_json_as_i64(td_json_get(v, "error"), 0),
	};
	return 1;
}

/* Print one trace event line. Return: false when it is not an event. */
static bool trace_print_event(const char *line, size_t len, uint64_t *t0, bool *have_t0)
{
	struct td_json_value *v = td_json_parse(line, len, NULL, 0);
	struct td_ctl_event ev;
	char buf[TD_CTL_EVENT_LEN];
	uint64_t dropped;
	int kind = trace_decode(v, &ev, &dropped);

	if (kind < 0) {
		td_json_value_free(v);
		return false;
	}
	if (kind == 0) {
		printf("  !! %llu events dropped (reader too slow)\n",
		       (unsigned long long)dropped);
	} else {
		if (!*have_t0) {
			*t0 = ev.time_ns;
			*have_t0 = true;
		}
		puts(td_ctl_fmt_event(&ev, *t0, buf, sizeof(buf)));
	}
	td_json_value_free(v);
	return true;
}

/* `trace --blktrace FILE`: the file and what went into it. */
struct trace_file {
	const char *path; /* "-": stdout */
	FILE *f;
	struct td_blktrace *bt;
	uint64_t dropped; /* events the daemon could not send us */
	uint64_t skipped; /* events blktrace has no record for */
};

static bool trace_file_is_stdout(const struct trace_file *tf)
{
	return strcmp(tf->path, "-") == 0;
}

/* Create the file (or take stdout). Return: CTL_OK, or CTL_USAGE after saying why. */
static int trace_file_open(struct trace_file *tf, const char *path)
{
	memset(tf, 0, sizeof(*tf));
	tf->path = path;
	tf->f = trace_file_is_stdout(tf) ? stdout : fopen(path, "we");
	if (!tf->f) {
		fprintf(stderr, "tagdiskctl: trace: cannot create %s: %s\n", path, strerror(errno));
		return CTL_USAGE;
	}
	tf->bt = td_blktrace_create(tf->f, TD_BLKTRACE_DEVICE, td_blktrace_proc_comm, NULL);
	if (!tf->bt) {
		fprintf(stderr, "tagdiskctl: out of memory\n");
		if (!trace_file_is_stdout(tf))
			fclose(tf->f);
		return CTL_REFUSED;
	}
	return CTL_OK;
}

/* Say that writing failed. Return: CTL_STOP when stdout's reader left, else CTL_REFUSED. */
static int trace_file_failed(const struct trace_file *tf, int err)
{
	if (err == -EPIPE && trace_file_is_stdout(tf))
		return CTL_STOP;
	fprintf(stderr, "tagdiskctl: trace: writing %s: %s\n", tf->path, strerror(-err));
	return CTL_REFUSED;
}

/*
 * Add the event on @line to the file; push the file out when @idle (no more
 * events are waiting), so a reader of a pipe sees events as they happen.
 * Return: CTL_OK, CTL_STOP, or CTL_REFUSED after saying why.
 */
static int trace_file_event(struct trace_file *tf, const char *line, size_t len, bool idle)
{
	struct td_json_value *v = td_json_parse(line, len, NULL, 0);
	struct td_ctl_event ev;
	uint64_t dropped = 0;
	int kind = trace_decode(v, &ev, &dropped);
	int r = 0;

	if (kind < 0) {
		td_json_value_free(v);
		fprintf(stderr, "tagdiskctl: bad trace event from the daemon\n");
		return CTL_REFUSED;
	}
	tf->dropped += dropped;
	if (kind > 0)
		r = td_blktrace_add(tf->bt, &ev);
	td_json_value_free(v);
	if (r == -EINVAL) {
		tf->skipped++; /* an action or op newer than this tagdiskctl */
		r = 0;
	}
	if (!r && idle)
		r = td_blktrace_flush(tf->bt);
	return r ? trace_file_failed(tf, r) : CTL_OK;
}

/*
 * Flush and close the file, and say what it holds. Return: @status, or
 * CTL_REFUSED (CTL_STOP for a closed stdout) when the last writes failed.
 */
static int trace_file_close(struct trace_file *tf, int status)
{
	int r = td_blktrace_flush(tf->bt);

	if (!trace_file_is_stdout(tf) && fclose(tf->f) && !r)
		r = -errno;
	if (r) {
		if (status == CTL_OK || status == CTL_STOP)
			status = trace_file_failed(tf, r);
	} else {
		fprintf(stderr, "tagdiskctl: trace: %llu events (%llu bytes) written to %s",
			(unsigned long long)td_blktrace_events(tf->bt),
			(unsigned long long)td_blktrace_bytes(tf->bt), tf->path);
		if (tf->dropped)
			fprintf(stderr, ", %llu dropped by the daemon (reader too slow)",
				(unsigned long long)tf->dropped);
		if (tf->skipped)
			fprintf(stderr, ", %llu unknown to blktrace left out",
				(unsigned long long)tf->skipped);
		fprintf(stderr, "\n");
	}
	td_blktrace_free(tf->bt);
	return status;
}

/*
 * Read events until the stream ends, the user stops it or @deadline_ms (0:
 * none) passes, and print them, or add them to @tf when it is open.
 */
static int trace_stream(struct ctl *ctl, struct trace_file *tf, int64_t deadline_ms)
{
	bool have_t0 = false;
	uint64_t t0 = 0;
	int r;

	for (;;) {
		int timeout_ms = -1;
		char *line;
		size_t len;

		if (deadline_ms) {
			int64_t left = deadline_ms - now_ms();

			timeout_ms = (int)TD_MAX(left, 0);
		}
		switch (conn_read_line(&ctl->conn, timeout_ms, &line, &len)) {
		case READ_LINE:
			break;
		case READ_EOF:
		case READ_EOF_PARTIAL:
		case READ_INTERRUPTED:
		case READ_WATCH_CLOSED:
			return CTL_STOP;
		case READ_TIMEOUT:
			return CTL_OK; /* -w SECONDS have passed */
		case READ_ERROR:
			if (errno == ECONNRESET)
				return CTL_STOP; /* the daemon went away: the stream is over */
			fprintf(stderr, "tagdiskctl: reading from %s: %s\n", ctl->conn.path,
				strerror(errno));
			return CTL_CONNECT;
		case READ_TOO_LONG:
			fprintf(stderr, "tagdiskctl: bad trace event from the daemon\n");
			return CTL_REFUSED;
		}
		if (tf->bt) {
			r = trace_file_event(tf, line, len, ctl->conn.start == ctl->conn.end);
			if (r)
				return r;
			continue;
		}
		if (ctl->json) {
			fwrite(line, 1, len, stdout);
			putchar('\n');
		} else if (!trace_print_event(line, len, &t0, &have_t0)) {
			fprintf(stderr, "tagdiskctl: bad trace event from the daemon\n");
			return CTL_REFUSED;
		}
		/* One line at a time, so `tagdiskctl trace | head` ends promptly. */
		r = flush_stdout();
		if (r)
			return r;
	}
}

static int run_trace(struct ctl *ctl, const struct ctl_command *cmd, int argc, char **argv)
{
	struct trace_file tf = { 0 };
	struct td_json_value *reply;
	int64_t deadline_ms = 0;
	int r;

	(void)cmd, (void)argc, (void)argv;
	catch_stop_signals();
	if (ctl->trace_out) {
		r = trace_file_open(&tf, ctl->trace_out);
		if (r)
			return r;
	}
	/* The binary records may be going to stdout: keep the reply off it. */
	r = ctl_call(ctl, "trace", !tf.bt, &reply);
	if (r)
		goto out_close_file;
	td_json_value_free(reply);
	if (!tf.bt) {
		r = flush_stdout();
		if (r)
			goto out_close_file;
	} else {
		/* Scripts wait for this line: what they do next cannot escape the trace. */
		fprintf(stderr, "tagdiskctl: trace: writing %s (Ctrl-C stops)\n", tf.path);
	}
	if (ctl->trace_wait_s > 0)
		deadline_ms = now_ms() + (int64_t)(ctl->trace_wait_s * 1000);
	/* Events may stop coming: notice a reader that went away (`| head`) without them. */
	if (!tf.bt || trace_file_is_stdout(&tf))
		ctl->conn.watch_fd = STDOUT_FILENO;
	r = trace_stream(ctl, &tf, deadline_ms);

out_close_file:
	if (tf.bt)
		r = trace_file_close(&tf, r);
	return r;
}

/* What may follow `trace`; --blktrace and --output are one option. */
static const struct option trace_options[] = {
	{ "blktrace", required_argument, NULL, 'o' },
	{ "output", required_argument, NULL, 'o' },
	{ "stopwatch", required_argument, NULL, 'w' },
	{ NULL, 0, NULL, 0 },
};

static const struct ctl_command commands[] = {
	{ .name = "help", .usage = "help", .run = run_simple, .print = print_help },
	{ .name = "status", .usage = "status [-i SECONDS] [-n COUNT]", .repeats = true,
	  .run = run_status, .print = print_status },
	{ .name = "stats", .usage = "stats [-i SECONDS] [-n COUNT]", .repeats = true,
	  .run = run_stats, .print = print_stats },
	{ .name = "tags", .usage = "tags", .run = run_simple, .print = print_tags },
	{ .name = "reset", .usage = "reset", .run = run_simple, .print = print_reset },
	{ .name = "elevator", .usage = "elevator [NAME]", .max_args = 1, .run = run_simple,
	  .print = print_elevator },
	{ .name = "depth", .usage = "depth [N]", .max_args = 1, .run = run_simple,
	  .print = print_depth },
	{ .name = "inject",
	  .usage = "inject error op=read|write|any sector=S count=N [times=K] | every N | "
		   "hang [times=K] | latency US | seed N | clear | list",
	  .min_args = 1, .max_args = 5, .run = run_simple, .print = print_inject },
	{ .name = "powerfail", .usage = "powerfail [keep=PCT] [seed=N]", .max_args = 2,
	  .run = run_simple, .print = print_powerfail },
	{ .name = "trace", .usage = "trace", .shortopts = "+:o:w:", .longopts = trace_options,
	  .run = run_trace },
	{ .name = "iostat", .usage = "iostat [INTERVAL [COUNT]]", .max_args = 2,
	  .check = check_iostat, .run = run_iostat },
	{ .name = "top", .usage = "top [-i SECONDS] [-n COUNT]", .repeats = true, .run = run_top },
};

static void usage(void)
{
	size_t i;

	printf("Usage: tagdiskctl [-s SOCKET] [-t SECONDS] [--json] COMMAND [ARGS]\n"
	       "\n"
	       "Show and control a running tagdiskd through its admin socket.\n"
	       "\n"
	       "Options:\n"
	       "  -s, --socket SOCKET     the admin socket (default: $TAGDISK_SOCKET, else\n"
	       "                          " DEFAULT_SOCKET ")\n"
	       "  -t, --timeout SECONDS   wait at most SECONDS for each reply (default %d)\n"
	       "      --json              print the daemon's replies as received\n"
	       "  -i, --interval SECONDS  status, stats, top: repeat every SECONDS (default 1)\n"
	       "  -n, --count COUNT       status, stats, top: stop after COUNT reports\n"
	       "  -h, --help              show this help\n"
	       "  -V, --version           show the version\n"
	       "\n"
	       "Commands:\n",
	       DEFAULT_TIMEOUT_MS / 1000);
	for (i = 0; i < TD_ARRAY_SIZE(commands); i++)
		printf("  %s\n", commands[i].usage);
	printf("\n"
	       "Trace options (after the word trace):\n"
	       "  -o, --blktrace, --output FILE\n"
	       "                          write the events as blktrace binary records to FILE\n"
	       "                          (\"-\": stdout) instead of printing them. blkparse\n"
	       "                          reads only files named NAME.blktrace.CPU: name FILE\n"
	       "                          NAME.blktrace.0 and run `blkparse -i NAME`, or pipe\n"
	       "                          `-o -` into `blkparse -i -`. For btt, dump first:\n"
	       "                          `blkparse -i NAME -d NAME.bin` then `btt -i NAME.bin`.\n"
	       "                          The disk shows as device 259,0\n"
	       "  -w, --stopwatch SECONDS stop tracing after SECONDS (also Ctrl-C or SIGTERM;\n"
	       "                          the file is complete either way)\n");
	printf("\n"
	       "Exit status: 0 ok, 1 the daemon refused, 2 usage error, 3 cannot reach the "
	       "daemon.\n");
}

enum {
	OPT_JSON = 0x100,
};

static const struct option main_options[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "timeout", required_argument, NULL, 't' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "interval", required_argument, NULL, 'i' },
	{ "count", required_argument, NULL, 'n' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* What may follow the word of a repeating command. */
static const struct option repeat_options[] = {
	{ "json", no_argument, NULL, OPT_JSON },
	{ "interval", required_argument, NULL, 'i' },
	{ "count", required_argument, NULL, 'n' },
	{ NULL, 0, NULL, 0 },
};

/* Say that -@opt's value (optarg) is not @what. Return: CTL_USAGE. */
static int bad_value(char opt, const char *what)
{
	fprintf(stderr, "tagdiskctl: -%c: \"%s\" is not %s\n", opt, optarg, what);
	return CTL_USAGE;
}

/*
 * Take the options in @argv[0..@argc) (getopt style: @argv[0] is not one),
 * stopping at the first other word. Return: CTL_OK; CTL_STOP after --help or
 * --version; CTL_USAGE after saying why.
 */
static int parse_options(struct ctl *ctl, int argc, char **argv, const char *shortopts,
			 const struct option *longopts)
{
	int opt;

	optind = 0; /* glibc: start afresh, even on a second call */
	opterr = 0; /* our own messages, which name the program and not its path */
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		double seconds;

		switch (opt) {
		case 's':
			ctl->socket = optarg;
			break;
		case 't':
			if (!parse_seconds(optarg, &seconds))
				return bad_value('t', "a positive number of seconds");
			ctl->timeout_ms = TD_MAX((int)(seconds * 1000), 1);
			break;
		case OPT_JSON:
			ctl->json = true;
			break;
		case 'i':
			if (!parse_seconds(optarg, &ctl->interval_s))
				return bad_value('i', "a positive number of seconds");
			break;
		case 'n':
			if (!parse_count(optarg, &ctl->count))
				return bad_value('n', "a positive integer");
			break;
		case 'o':
			ctl->trace_out = optarg;
			break;
		case 'w':
			if (!parse_seconds(optarg, &ctl->trace_wait_s))
				return bad_value('w', "a positive number of seconds");
			break;
		case 'h':
			usage();
			return CTL_STOP;
		case 'V':
			printf("tagdiskctl %s\n", TD_VERSION);
			return CTL_STOP;
		case ':':
			if (optopt)
				fprintf(stderr, "tagdiskctl: option -%c needs a value\n", optopt);
			else
				fprintf(stderr, "tagdiskctl: option %s needs a value\n",
					argv[optind - 1]);
			return CTL_USAGE;
		default:
			if (optopt)
				fprintf(stderr, "tagdiskctl: unknown option -%c\n", optopt);
			else
				fprintf(stderr, "tagdiskctl: unknown option %s\n",
					argv[optind - 1]);
			return CTL_USAGE;
		}
	}
	return CTL_OK;
}

/*
 * After the command word, only the repeating commands and those with options
 * of their own take options: gather them, keep the other words as arguments.
 * Return: CTL_OK or CTL_USAGE.
 */
static int parse_command_options(struct ctl *ctl, const struct ctl_command *cmd, int *argc,
				 char **argv)
{
	const char *shortopts = cmd->repeats ? "+:i:n:" : cmd->shortopts;
	const struct option *longopts = cmd->repeats ? repeat_options : cmd->longopts;
	int r;

	if (!shortopts)
		return CTL_OK;
	r = parse_options(ctl, *argc, argv, shortopts, longopts);
	if (r)
		return CTL_USAGE;
	/* Leave the command word in front of its arguments. */
	memmove(argv + 1, argv + optind, (size_t)(*argc - optind) * sizeof(*argv));
	*argc -= optind - 1;
	return CTL_OK;
}

static const struct ctl_command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < TD_ARRAY_SIZE(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* Check what can be checked without the daemon. Return: CTL_OK or CTL_USAGE after saying why. */
static int check_command(struct ctl *ctl, const struct ctl_command *cmd, int argc,
			 char **argv)
{
	unsigned int nargs = (unsigned int)argc - 1;
	int i;

	if (nargs < cmd->min_args || nargs > cmd->max_args) {
		fprintf(stderr, "tagdiskctl: usage: %s\n", cmd->usage);
		return CTL_USAGE;
	}
	if ((ctl->interval_s > 0 || ctl->count) && !cmd->repeats) {
		fprintf(stderr, "tagdiskctl: -i and -n apply to status, stats and top, not %s\n",
			cmd->name);
		return CTL_USAGE;
	}
	if (cmd->check && cmd->check(ctl, argc, argv))
		return CTL_USAGE;
	for (i = 1; i < argc; i++) {
		/* A line break would end the command early and start another one. */
		if (strpbrk(argv[i], "\r\n")) {
			fprintf(stderr, "tagdiskctl: %s: an argument holds a line break\n",
				cmd->name);
			return CTL_USAGE;
		}
	}
	return CTL_OK;
}

int main(int argc, char **argv)
{
	struct ctl ctl = { .timeout_ms = DEFAULT_TIMEOUT_MS };
	const struct ctl_command *cmd;
	const char *env;
	int cmd_argc;
	char **cmd_argv;
	int r;

	signal(SIGPIPE, SIG_IGN);
	r = parse_options(&ctl, argc, argv, "+:s:t:i:n:hV", main_options);
	if (r == CTL_STOP)
		return flush_stdout() == CTL_REFUSED ? CTL_REFUSED : CTL_OK;
	if (r) {
		usage_hint();
		return CTL_USAGE;
	}
	if (!ctl.socket) {
		env = getenv("TAGDISK_SOCKET");
		ctl.socket = env && *env ? env : DEFAULT_SOCKET;
	}
	if (optind >= argc) {
		fprintf(stderr, "tagdiskctl: no command given\n");
		usage_hint();
		return CTL_USAGE;
	}
	cmd_argc = argc - optind;
	cmd_argv = argv + optind;
	cmd = find_command(cmd_argv[0]);
	if (!cmd) {
		fprintf(stderr, "tagdiskctl: unknown command \"%s\"\n", cmd_argv[0]);
		usage_hint();
		return CTL_USAGE;
	}
	if (parse_command_options(&ctl, cmd, &cmd_argc, cmd_argv) ||
	    check_command(&ctl, cmd, cmd_argc, cmd_argv)) {
		usage_hint();
		return CTL_USAGE;
	}
	ctl.stdout_tty = isatty(STDOUT_FILENO);

	r = conn_open(&ctl.conn, ctl.socket, ctl.timeout_ms);
	if (r)
		return r;
	r = cmd->run(&ctl, cmd, cmd_argc, cmd_argv);
	conn_close(&ctl.conn);
	if (r == CTL_OK)
		r = flush_stdout();
	return r == CTL_STOP ? CTL_OK : r;
}
