// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace_out.c - tagdiskctl's `trace` (ctl_int.h): after the daemon's ok, the
 * connection carries one JSON event per line (docs/protocol.md, "trace")
 * until the daemon or the user ends it, or -w SECONDS pass. Each event is
 * printed as a blktrace-style line (ctl_format.c), passed through as
 * received with --json, or, with --blktrace FILE, written as a blktrace
 * record (blktrace.c) for blkparse and btt.
 *
 * A closed stdout ends the stream quietly with status 0 (`tagdiskctl trace |
 * head`): the connection's watch_fd is stdout, so a reader that went away is
 * noticed even while no events come.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/jsonc.h"
#include "ctl/blktrace.h"
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
	tf->bt = td_blktrace_create(tf->f, TD_BLKTRACE_DEVICE, td_blktrace_proc_comm, NULL);
	if (!tf->bt) {
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

/*
 * Add the event on @line to the file; push the file out when @idle (no more
 * events are waiting), so a reader of a pipe sees events as they happen.
 * Return: TD_CTL_OK, TD_CTL_STOP, or TD_CTL_REFUSED after saying why.
 */
static int trace_file_event(struct trace_file *tf, const char *line, size_t len, bool idle)
{
	struct json_object *v = td_jsonc_parse(line, len);
	struct td_ctl_event ev;
	uint64_t dropped = 0;
	int kind = trace_decode(v, &ev, &dropped);
	int r = 0;

	if (kind < 0) {
		json_object_put(v);
		fprintf(stderr, "tagdiskctl: bad trace event from the daemon\n");
		return TD_CTL_REFUSED;
	}
	tf->dropped += dropped;
	if (kind > 0)
		r = td_blktrace_add(tf->bt, &ev);
	json_object_put(v);
	if (r == -EINVAL) {
		tf->skipped++; /* an action or op newer than this tagdiskctl */
		r = 0;
	}
	if (!r && idle)
		r = td_blktrace_flush(tf->bt);
	return r ? trace_file_failed(tf, r) : TD_CTL_OK;
}

/*
 * Flush and close the file, and say what it holds. Return: @status, or
 * TD_CTL_REFUSED (TD_CTL_STOP for a closed stdout) when the last writes failed.
 */
static int trace_file_close(struct trace_file *tf, int status)
{
	int r = td_blktrace_flush(tf->bt);

	if (!trace_file_is_stdout(tf) && fclose(tf->f) && !r)
		r = -errno;
	if (r) {
		if (status == TD_CTL_OK || status == TD_CTL_STOP)
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
static int trace_stream(struct td_ctl *ctl, struct trace_file *tf, int64_t deadline_ms)
{
	bool have_t0 = false;
	uint64_t t0 = 0;
	int r;

	for (;;) {
		int timeout_ms = -1;
		char *line;
		size_t len;

		if (deadline_ms) {
			int64_t left = deadline_ms - td_ctl_now_ms();

			timeout_ms = (int)TD_MAX(left, 0);
		}
		switch (td_ctl_conn_read_line(&ctl->conn, timeout_ms, &line, &len)) {
		case TD_CTL_READ_LINE:
			break;
		case TD_CTL_READ_EOF:
		case TD_CTL_READ_EOF_PARTIAL:
		case TD_CTL_READ_INTERRUPTED:
		case TD_CTL_READ_WATCH_CLOSED:
			return TD_CTL_STOP;
		case TD_CTL_READ_TIMEOUT:
			return TD_CTL_OK; /* -w SECONDS have passed */
		case TD_CTL_READ_ERROR:
			if (errno == ECONNRESET)
				return TD_CTL_STOP; /* the daemon went away: the stream is over */
			fprintf(stderr, "tagdiskctl: reading from %s: %s\n", ctl->conn.path,
				strerror(errno));
			return TD_CTL_CONNECT;
		case TD_CTL_READ_TOO_LONG:
			fprintf(stderr, "tagdiskctl: bad trace event from the daemon\n");
			return TD_CTL_REFUSED;
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
			return TD_CTL_REFUSED;
		}
		/* One line at a time, so `tagdiskctl trace | head` ends promptly. */
		r = td_ctl_flush_stdout();
		if (r)
			return r;
	}
}

int td_ctl_run_trace(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	struct trace_file tf = { 0 };
	struct json_object *reply;
	int64_t deadline_ms = 0;
	int r;

	(void)cmd, (void)argc, (void)argv;
	td_ctl_catch_stop_signals();
	if (ctl->trace_out) {
		r = trace_file_open(&tf, ctl->trace_out);
		if (r)
			return r;
	}
	/* The binary records may be going to stdout: keep the reply off it. */
	r = td_ctl_call(ctl, "trace", !tf.bt, &reply);
	if (r)
		goto out_close_file;
	json_object_put(reply);
	if (!tf.bt) {
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
	if (!tf.bt || trace_file_is_stdout(&tf))
		ctl->conn.watch_fd = STDOUT_FILENO;
	r = trace_stream(ctl, &tf, deadline_ms);

out_close_file:
	if (tf.bt)
		r = trace_file_close(&tf, r);
	return r;
}
