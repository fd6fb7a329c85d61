// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace_out.c - tagdiskctl's `trace` (ctl_int.h): after the daemon's ok, the
 * connection carries one JSON event per line (docs/protocol.md, "trace")
 * until the daemon or the user ends it, or -w SECONDS pass. Each event is
 * printed as a blktrace-style line (ctl_format.c), the legend of its
 * letters first on a terminal, or passed through as received with --json.
 * With --blktrace FILE the daemon sends blktrace records instead (`trace
 * blktrace`), which are copied to FILE for blkparse and btt.
 *
 * A closed stdout ends the stream quietly with status 0 (`tagdiskctl trace |
 * head`): the connection's watch_fd is stdout, so a reader that went away is
 * noticed even while no events come.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "common/jsonc.h"
#include "common/blktrace_fmt.h"
#include "ctl/ctl_format.h"
#include "ctl/ctl_int.h"

/*
 * Decode one line of the trace stream. Return: 1 for an event, in @ev (its
 * op points into @v); 0 for a note of events the daemon dropped, their
 * number in *@dropped; -1 for anything else.
 */
static int trace_decode(struct json_object *v, struct td_ctl_event *ev, uint64_t *dropped)
{
	const char *action;

	if (!json_object_is_type(v, json_type_object))
		return -1;
	if (td_jsonc_has(v, "/dropped")) {
		*dropped = td_ctl_get_u64(v, "/dropped");
		return 0;
	}
	action = td_jsonc_as_str(td_jsonc_get(v, "/action"), NULL);
	if (!action || !td_jsonc_has(v, "/time_ns"))
		return -1;
	*ev = (struct td_ctl_event){
		.time_ns = td_ctl_get_u64(v, "/time_ns"),
		.pid = td_jsonc_as_i64(td_jsonc_get(v, "/pid"), 0),
		.action = action[0],
		.op = td_jsonc_as_str(td_jsonc_get(v, "/op"), "?"),
		.fua = td_jsonc_as_bool(td_jsonc_get(v, "/fua"), false),
		.sector = td_ctl_get_u64(v, "/sector"),
		.sectors = td_ctl_get_u64(v, "/sectors"),
		.tag = td_jsonc_as_i64(td_jsonc_get(v, "/tag"), -1),
		.error = td_jsonc_as_i64(td_jsonc_get(v, "/error"), 0),
	};
	return 1;
}

/* Print one trace event line. Return: false when it is not an event. */
static bool trace_print_event(const char *line, size_t len, uint64_t *t0, bool *have_t0)
{
	struct json_object *v = td_jsonc_parse(line, len);
	struct td_ctl_event ev;
	char buf[TD_CTL_EVENT_LEN];
	uint64_t dropped;
	int kind = trace_decode(v, &ev, &dropped);

	if (kind < 0) {
		json_object_put(v);
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
	json_object_put(v);
	return true;
}

/*
 * `trace --blktrace FILE`: the daemon sends blktrace records (`trace blktrace`,
 * docs/protocol.md) and they go to the file as they come. The copy walks the
 * record headers only to write whole records (a stream cut short leaves no
 * half record behind), to count events, and to add up the daemon's notes of
 * dropped events (TD_BLKTRACE_DROPPED_MSG).
 */
#define COPY_BUF (4U << 20)

struct trace_file {
	const char *path; /* "-": stdout */
	FILE *f;
	int fd;
	unsigned char *buf; /* COPY_BUF bytes: len read, of which the first `whole` are records */
	size_t len;
	size_t whole;
	uint64_t events;  /* I/O records */
	uint64_t bytes;	  /* written, notes included */
	uint64_t dropped; /* events the daemon could not buffer */
};

static bool trace_file_is_stdout(const struct trace_file *tf)
{
	return strcmp(tf->path, "-") == 0;
}

/* Create the file (or take stdout). Return: TD_CTL_OK, or TD_CTL_USAGE after saying why. */
static int trace_file_open(struct trace_file *tf, const char *path)
{
	memset(tf, 0, sizeof(*tf));
	tf->path = path;
	tf->f = trace_file_is_stdout(tf) ? stdout : fopen(path, "we");
	if (!tf->f) {
		fprintf(stderr, "tagdiskctl: trace: cannot create %s: %s\n", path, strerror(errno));
		return TD_CTL_USAGE;
	}
	tf->fd = fileno(tf->f);
	tf->buf = malloc(COPY_BUF);
	if (!tf->buf) {
		fprintf(stderr, "tagdiskctl: out of memory\n");
		if (!trace_file_is_stdout(tf))
			fclose(tf->f);
		return TD_CTL_REFUSED;
	}
	return TD_CTL_OK;
}

/* Say that writing failed. Return: TD_CTL_STOP when stdout's reader left, else TD_CTL_REFUSED. */
static int trace_file_failed(const struct trace_file *tf, int err)
{
	if (err == -EPIPE && trace_file_is_stdout(tf))
		return TD_CTL_STOP;
	fprintf(stderr, "tagdiskctl: trace: writing %s: %s\n", tf->path, strerror(-err));
	return TD_CTL_REFUSED;
}

/* The number in a dropped-events message of @len bytes at @pdu; 0 for another message. */
static uint64_t dropped_note(const unsigned char *pdu, size_t len)
{
	const size_t prefix = sizeof(TD_BLKTRACE_DROPPED_MSG) - 1;
	uint64_t n = 0;

	if (len <= prefix || memcmp(pdu, TD_BLKTRACE_DROPPED_MSG, prefix) != 0)
		return 0;
	for (size_t i = prefix; i < len && pdu[i] >= '0' && pdu[i] <= '9'; i++)
		n = n * 10 + (uint64_t)(pdu[i] - '0');
	return n;
}

/* Find the whole records in what was read. Return: 0, or -EBADMSG on a bad header. */
static int trace_file_scan(struct trace_file *tf)
{
	while (tf->whole + TD_BLKTRACE_RECORD_LEN <= tf->len) {
		struct td_blktrace_record rec;
		const unsigned char *p = tf->buf + tf->whole;

		if (!td_blktrace_decode(p, &rec))
			return -EBADMSG;
		if (tf->whole + TD_BLKTRACE_RECORD_LEN + rec.pdu_len > tf->len)
			break;
		if (rec.action == TD_BLKTRACE_TN_MESSAGE)
			tf->dropped += dropped_note(p + TD_BLKTRACE_RECORD_LEN, rec.pdu_len);
		else if (!(rec.action & (TD_BLKTRACE_CAT_NOTIFY << TD_BLKTRACE_CAT_SHIFT)))
			tf->events++;
		tf->whole += TD_BLKTRACE_RECORD_LEN + rec.pdu_len;
	}
	return 0;
}

/* Write the whole records out and keep the partial one. Return: 0, or a negative errno. */
static int trace_file_write(struct trace_file *tf)
{
	size_t done = 0;

	while (done < tf->whole) {
		ssize_t n = write(tf->fd, tf->buf + done, tf->whole - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	tf->bytes += tf->whole;
	memmove(tf->buf, tf->buf + tf->whole, tf->len - tf->whole);
	tf->len -= tf->whole;
	tf->whole = 0;
	return 0;
}

/* How long a stopped blktrace stream may take to hand over what the daemon still holds. */
#define TRACE_DRAIN_MS 10000

/* The timeout of a read before @deadline_ms (0: none, -1). */
static int read_timeout(int64_t deadline_ms)
{
	return deadline_ms ? (int)TD_MAX(deadline_ms - td_ctl_now_ms(), 0) : -1;
}

/*
 * What a read that brought no data, @r, means for a stream: TD_CTL_STOP (it
 * ended, or the user stopped it), TD_CTL_OK (-w SECONDS have passed), or,
 * after saying why, TD_CTL_CONNECT.
 */
static int stream_end(struct td_ctl *ctl, int r)
{
	switch (r) {
	case TD_CTL_READ_TIMEOUT:
		return TD_CTL_OK;
	case TD_CTL_READ_ERROR:
	case TD_CTL_READ_TOO_LONG:
		if (errno == ECONNRESET)
			return TD_CTL_STOP; /* the daemon went away: the stream is over */
		fprintf(stderr, "tagdiskctl: reading from %s: %s\n", ctl->conn.path,
			strerror(errno));
		return TD_CTL_CONNECT;
	default: /* EOF, a stop asked for, or the reader of our output went away */
		return TD_CTL_STOP;
	}
}

/*
 * Copy records until the stream ends, the user stops it or @deadline_ms (0:
 * none) passes. A stop (Ctrl-C, -w) shuts our sending half down, which asks
 * the daemon for every event up to then, the ones its reorder window still
 * holds (TRACE_DRAIN_MS at most) included, before it closes the stream; a
 * second Ctrl-C stops at once. Return: TD_CTL_OK, TD_CTL_STOP, or an exit
 * status after saying why.
 */
static int trace_file_copy(struct td_ctl *ctl, struct trace_file *tf, int64_t deadline_ms)
{
	int stopped = 0; /* the status of the stop, once it came */

	for (;;) {
		size_t got;
		int r = td_ctl_conn_read_bytes(&ctl->conn, read_timeout(deadline_ms),
					       tf->buf + tf->len, COPY_BUF - tf->len, &got);

		if (r != TD_CTL_READ_LINE) {
			int end = stream_end(ctl, r);

			/* The stream ended, or its reader went away, or a second stop. */
			if (stopped || (r != TD_CTL_READ_INTERRUPTED && r != TD_CTL_READ_TIMEOUT) ||
			    shutdown(ctl->conn.fd, SHUT_WR) < 0)
				return stopped ? stopped : end;
			stopped = end;
			td_ctl_stop_requested = 0;
			deadline_ms = td_ctl_now_ms() + TRACE_DRAIN_MS;
			continue;
		}
		tf->len += got;
		if (trace_file_scan(tf)) {
			fprintf(stderr, "tagdiskctl: bad trace record from the daemon\n");
			return TD_CTL_REFUSED;
		}
		r = trace_file_write(tf);
		if (r)
			return trace_file_failed(tf, r);
	}
}

/*
 * Close the file and say what it holds, and what was lost. Return: @status;
 * TD_CTL_REFUSED when events were dropped or the last writes failed
 * (TD_CTL_STOP for a closed stdout).
 */
static int trace_file_close(struct trace_file *tf, int status)
{
	int r = 0;

	if (!trace_file_is_stdout(tf) && fclose(tf->f))
		r = -errno;
	free(tf->buf);
	if (r) {
		if (status == TD_CTL_OK || status == TD_CTL_STOP)
			status = trace_file_failed(tf, r);
		return status;
	}
	fprintf(stderr, "tagdiskctl: trace: %llu events (%llu bytes) written to %s\n",
		(unsigned long long)tf->events, (unsigned long long)tf->bytes, tf->path);
	if (tf->dropped) {
		fprintf(stderr,
			"tagdiskctl: trace: You have dropped events: %llu lost by the daemon, "
			"noted in the file (consider a larger -b or -n)\n",
			(unsigned long long)tf->dropped);
		if (status == TD_CTL_OK || status == TD_CTL_STOP)
			status = TD_CTL_REFUSED;
	}
	return status;
}

/*
 * Read events until the stream ends, the user stops it or @deadline_ms (0:
 * none) passes, and print them, or add them to @tf when it is open.
 */
static int trace_stream(struct td_ctl *ctl, int64_t deadline_ms)
{
	bool have_t0 = false;
	uint64_t t0 = 0;
	int r;

	for (;;) {
		char *line;
		size_t len;

		r = td_ctl_conn_read_line(&ctl->conn, read_timeout(deadline_ms), &line, &len);
		if (r == TD_CTL_READ_TOO_LONG) {
			fprintf(stderr, "tagdiskctl: bad trace event from the daemon\n");
			return TD_CTL_REFUSED;
		}
		if (r != TD_CTL_READ_LINE)
			return stream_end(ctl, r);
		if (ctl->json) {
			fwrite(line, 1, len, stdout);
			putchar('\n');
		} else if (!trace_print_event(line, len, &t0, &have_t0)) {
			fprintf(stderr, "tagdiskctl: bad trace event from the daemon\n");
			return TD_CTL_REFUSED;
		}
		/* One line at a time, so `tagdiskctl trace | head` ends promptly. */
		r = td_ctl_flush_stdout();
		if (r)
			return r;
	}
}

/* TD_CTL_TRACE_LEGEND, each line behind "# ". */
static void trace_legend(void)
{
	const char *p = TD_CTL_TRACE_LEGEND;

	while (*p) {
		size_t n = strcspn(p, "\n");

		printf("# %.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
}

int td_ctl_run_trace(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	struct trace_file tf = { 0 };
	struct json_object *reply;
	int64_t deadline_ms = 0;
	char line[128];
	int len;
	int r;

	(void)cmd, (void)argc, (void)argv;
	td_ctl_catch_stop_signals();
	if (ctl->trace_out) {
		r = trace_file_open(&tf, ctl->trace_out);
		if (r)
			return r;
	}
	len = snprintf(line, sizeof(line), "trace%s", tf.f ? " blktrace" : "");
	if (ctl->trace_buffer_kib)
		len += snprintf(line + len, sizeof(line) - (size_t)len, " buffer_kib=%lu",
				ctl->trace_buffer_kib);
	if (ctl->trace_buffers)
		snprintf(line + len, sizeof(line) - (size_t)len, " buffers=%lu", ctl->trace_buffers);
	/* The binary records may be going to stdout: keep the reply off it. */
	r = td_ctl_call(ctl, line, !tf.f, &reply);
	if (r)
		goto out_close_file;
	json_object_put(reply);
	/* A person at a terminal gets the legend of the letters first; a pipe gets events only. */
	if (!tf.f && !ctl->json && ctl->stdout_tty)
		trace_legend();
	if (!tf.f) {
		r = td_ctl_flush_stdout();
		if (r)
			goto out_close_file;
	} else {
		/* Scripts wait for this line: what they do next cannot escape the trace. */
		fprintf(stderr, "tagdiskctl: trace: writing %s (Ctrl-C stops)\n", tf.path);
	}
	if (ctl->trace_wait_s > 0)
		deadline_ms = td_ctl_now_ms() + (int64_t)(ctl->trace_wait_s * 1000);
	/* Events may stop coming: notice a reader that went away (`| head`) without them. */
	if (!tf.f || trace_file_is_stdout(&tf))
		ctl->conn.watch_fd = STDOUT_FILENO;
	r = tf.f ? trace_file_copy(ctl, &tf, deadline_ms) : trace_stream(ctl, deadline_ms);

out_close_file:
	if (tf.f)
		r = trace_file_close(&tf, r);
	return r;
}
