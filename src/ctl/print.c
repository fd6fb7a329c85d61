// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * print.c - tagdiskctl's printers: the daemon's replies as tables and lines
 * for people (ctl_int.h).
 *
 * Each printer takes an ok reply, a json-c tree, and looks values up by JSON
 * pointer ("/rate/iops"). A value the reply lacks (an older daemon, or a
 * drive without a cache) shows as "-" or 0 rather than failing: what the
 * daemon sent is always shown as far as it goes. The exact layouts are what
 * tests/bats/ctl.bats checks; ctl_format.c does the number formats and the
 * column alignment.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json_object_iterator.h>
#include "common/jsonc.h"
#include "ctl/ctl_format.h"
#include "ctl/ctl_int.h"

/* ---- reading replies ------------------------------------------------------------------- */

uint64_t td_ctl_get_u64(struct json_object *r, const char *path)
{
	return td_jsonc_as_u64(td_jsonc_get(r, path), 0);
}

double td_ctl_get_double(struct json_object *r, const char *path)
{
	return td_jsonc_as_double(td_jsonc_get(r, path), 0);
}

const char *td_ctl_get_str(struct json_object *r, const char *path)
{
	return td_jsonc_as_str(td_jsonc_get(r, path), "-");
}

/* The number @v as the daemon wrote it: an integer exactly, a fraction with %g. */
static const char *num_text(const struct json_object *v, char *buf, size_t len)
{
	if (json_object_is_type(v, json_type_int) && json_object_get_int64(v) < 0)
		snprintf(buf, len, "%lld", (long long)json_object_get_int64(v));
	else if (json_object_is_type(v, json_type_int))
		snprintf(buf, len, "%llu", (unsigned long long)json_object_get_uint64(v));
	else if (json_object_is_type(v, json_type_double))
		snprintf(buf, len, "%g", json_object_get_double(v));
	else
		snprintf(buf, len, "-");
	return buf;
}

const char *td_ctl_get_num(struct json_object *r, const char *path, char *buf, size_t len)
{
	return num_text(td_jsonc_get(r, path), buf, len);
}

/* Items of @v when it is an array, else 0. */
static size_t arr_len(struct json_object *v)
{
	return json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
}

/* Item @i of array @v, or NULL. */
static struct json_object *arr_get(struct json_object *v, size_t i)
{
	return i < arr_len(v) ? json_object_array_get_idx(v, i) : NULL;
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

/*
 * The FUSE transport, for the fuse line: "classic, 16 threads on /dev/fuse"
 * or "uring, 2 threads on /dev/fuse" (INIT, interrupts, forgets), and ", N
 * requests waiting in the transport" when N is known and not 0; "-" from a
 * daemon that does not say.
 */
static void status_fuse(struct json_object *r, char *line, size_t len)
{
	char a[TD_CTL_FMT_LEN];
	int off;

	if (!td_jsonc_get(r, "/transport")) {
		snprintf(line, len, "-");
		return;
	}
	off = snprintf(line, len, "%s, %s threads on /dev/fuse", td_ctl_get_str(r, "/transport"),
		       td_ctl_get_num(r, "/fuse_threads", a, sizeof(a)));
	/* Requests that have not reached the queue yet: said only when there are any. */
	if (off > 0 && (size_t)off < len && td_ctl_get_u64(r, "/transport_waiting"))
		snprintf(line + off, len - (size_t)off, ", %s requests waiting in the transport",
			 td_ctl_get_num(r, "/transport_waiting", a, sizeof(a)));
}

/*
 * FUSE over io_uring, two lines: the rings ("2 queues (one per CPU) x 64
 * entries, 1 helper ring (for requests >= 64 KiB)") and the requests
 * each queue received ("7 on queue 0, 334 on queue 1"; with more than four
 * queues their sum, least and most). Nothing with another transport.
 */
static void status_uring(struct json_object *r, struct td_ctl_table *t)
{
	struct json_object *rings = td_jsonc_get(r, "/uring_requests");
	size_t n = arr_len(rings);
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];
	char line[512];
	uint64_t helpers = td_ctl_get_u64(r, "/uring_helpers");
	int off;

	if (!n)
		return;
	off = snprintf(line, sizeof(line), "%zu queue%s (one per CPU) x %s entries", n,
		       n == 1 ? "" : "s", td_ctl_get_num(r, "/uring_entries", a, sizeof(a)));
	if (td_jsonc_get(r, "/uring_helpers"))
		snprintf(line + off, sizeof(line) - (size_t)off,
			 ", %llu helper ring%s (for requests >= 64 KiB)",
			 (unsigned long long)helpers, helpers == 1 ? "" : "s");
	kv_add(t, "uring", line);
	off = 0;
	if (n <= 4) {
		for (size_t i = 0; i < n && (size_t)off < sizeof(line); i++)
			off += snprintf(line + off, sizeof(line) - (size_t)off, "%s%s on queue %zu",
					i ? ", " : "", num_text(arr_get(rings, i), a, sizeof(a)),
					i);
	} else {
		uint64_t sum = 0, lo = UINT64_MAX, hi = 0;
		size_t lo_q = 0, hi_q = 0;

		for (size_t i = 0; i < n; i++) {
			uint64_t v = td_jsonc_as_u64(arr_get(rings, i), 0);

			sum += v;
			if (v < lo) {
				lo = v;
				lo_q = i;
			}
			if (v > hi) {
				hi = v;
				hi_q = i;
			}
		}
		snprintf(a, sizeof(a), "%llu", (unsigned long long)lo);
		snprintf(b, sizeof(b), "%llu", (unsigned long long)hi);
		off = snprintf(line, sizeof(line), "%llu in all; least %s (queue %zu), most %s "
						  "(queue %zu)",
			       (unsigned long long)sum, a, lo_q, b, hi_q);
	}
	if ((size_t)off < sizeof(line))
		snprintf(line + off, sizeof(line) - (size_t)off, " (received since start)");
	kv_add(t, "uring reqs", line);
}

/*
 * A hung medium: the backend calls a reset left behind, one line each, under
 * "stuck calls 2, the drive is fenced: ..."; nothing when there are none.
 */
static void stuck_calls(struct td_ctl_table *t, struct json_object *r)
{
	struct json_object *calls = td_jsonc_get(r, "/stuck_calls");
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];
	char line[256];

	if (!td_ctl_get_u64(r, "/stale_calls"))
		return;
	snprintf(line, sizeof(line), "%s, the drive is fenced: new commands wait until they return",
		 td_ctl_get_num(r, "/stale_calls", a, sizeof(a)));
	kv_add(t, "stuck calls", line);
	for (size_t i = 0; i < arr_len(calls); i++) {
		struct json_object *c = arr_get(calls, i);
		int off = snprintf(line, sizeof(line), "tid %s: %s",
				   td_ctl_get_num(c, "/tid", a, sizeof(a)), td_ctl_get_str(c, "/op"));

		if (td_ctl_get_u64(c, "/sectors") && off > 0 && (size_t)off < sizeof(line))
			off += snprintf(line + off, sizeof(line) - (size_t)off,
					", sector %s (%llu sectors)",
					td_ctl_get_num(c, "/sector", b, sizeof(b)),
					(unsigned long long)td_ctl_get_u64(c, "/sectors"));
		if (off > 0 && (size_t)off < sizeof(line))
			snprintf(line + off, sizeof(line) - (size_t)off, ", for %s",
				 td_ctl_fmt_latency(td_ctl_get_u64(c, "/age_us"), b, sizeof(b)));
		kv_add(t, "", line);
	}
}

void td_ctl_print_status(struct json_object *r)
{
	struct td_ctl_table *t = kv_table();
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN], c[TD_CTL_FMT_LEN];
	char line[512];
	uint64_t depth = td_ctl_get_u64(r, "/depth");
	uint64_t workers;

	kv_add(t, "state", td_ctl_get_str(r, "/state"));
	kv_add(t, "image", td_ctl_get_str(r, "/image"));
	/* A daemon older than the network backends says nothing: its backend is a file. */
	if (td_jsonc_get(r, "/backend")) {
		snprintf(line, sizeof(line), "%s (%s)", td_ctl_get_str(r, "/backend"),
			 td_ctl_get_str(r, "/backend_target"));
		kv_add(t, "backend", line);
	}
	if (td_jsonc_get(r, "/backend_ops")) {
		uint64_t stale = td_ctl_get_u64(r, "/stale_ops");

		snprintf(line, sizeof(line), "%s outstanding, %s stale%s (fenced %s time%s)",
			 td_ctl_get_num(r, "/backend_ops", a, sizeof(a)),
			 td_ctl_get_num(r, "/stale_ops", b, sizeof(b)),
			 stale ? ": new commands wait" : "", td_ctl_get_num(r, "/fences", c, sizeof(c)),
			 td_ctl_get_u64(r, "/fences") == 1 ? "" : "s");
		kv_add(t, "backend io", line);
	}
	snprintf(line, sizeof(line), "%s (%s bytes)",
		 td_ctl_fmt_size(td_ctl_get_u64(r, "/size"), a, sizeof(a)),
		 td_ctl_get_num(r, "/size", b, sizeof(b)));
	kv_add(t, "size", line);
	kv_add(t, "disk", td_ctl_get_str(r, "/disk"));
	kv_add(t, "read-only",
	       td_jsonc_as_bool(td_jsonc_get(r, "/read_only"), false) ? "yes" : "no");
	kv_add(t, "mode", td_ctl_get_str(r, "/mode"));
	kv_add(t, "elevator", td_ctl_get_str(r, "/elevator"));
	if (depth)
		snprintf(line, sizeof(line), "%s/%llu",
			 td_ctl_get_num(r, "/tags_in_use", a, sizeof(a)),
			 (unsigned long long)depth);
	else
		snprintf(line, sizeof(line), "- (no tags in mode %s)", td_ctl_get_str(r, "/mode"));
	kv_add(t, "tags", line);
	kv_add(t, "in flight", td_ctl_get_num(r, "/in_flight", a, sizeof(a)));
	kv_add(t, "queued", td_ctl_get_num(r, "/queued", a, sizeof(a)));
	snprintf(line, sizeof(line), "%s/%s", td_ctl_get_num(r, "/requests_used", a, sizeof(a)),
		 td_ctl_get_num(r, "/nr_requests", b, sizeof(b)));
	kv_add(t, "requests", line);
	/* mode mq: one line per hardware context */
	struct json_object *hw = td_jsonc_get(r, "/hctx");

	for (size_t i = 0; i < arr_len(hw); i++) {
		struct json_object *h = arr_get(hw, i);
		char d[TD_CTL_FMT_LEN], name[32];

		snprintf(name, sizeof(name), "hctx %zu", i);
		snprintf(line, sizeof(line),
			 "queued %s, in flight %s, dispatched %s, from CPU queues %s",
			 td_ctl_get_num(h, "/queued", a, sizeof(a)),
			 td_ctl_get_num(h, "/in_flight", b, sizeof(b)),
			 td_ctl_get_num(h, "/dispatched", c, sizeof(c)),
			 td_ctl_get_num(h, "/ctx_queued", d, sizeof(d)));
		kv_add(t, name, line);
	}
	/* workers 0: the thread that runs the queue executes the commands itself */
	workers = td_ctl_get_u64(r, "/workers");
	if (workers == 0)
		snprintf(a, sizeof(a), "inline (no worker threads)");
	else
		snprintf(a, sizeof(a), "%llu worker%s", (unsigned long long)workers,
			 workers == 1 ? "" : "s");
	snprintf(line, sizeof(line), "%s, model %s, write cache %s", a, td_ctl_get_str(r, "/model"),
		 td_ctl_get_str(r, "/write_cache"));
	kv_add(t, "drive", line);
	stuck_calls(t, r);
	status_fuse(r, line, sizeof(line));
	kv_add(t, "fuse", line);
	status_uring(r, t);
	/* A daemon older than the takeover says nothing. */
	if (td_jsonc_get(r, "/recovery")) {
		if (!td_jsonc_as_bool(td_jsonc_get(r, "/recovery"), false))
			snprintf(line, sizeof(line), "off: a crash of the daemon loses the mount "
				 "(%s takeovers)",
				 td_ctl_get_num(r, "/takeovers", a, sizeof(a)));
		else if (td_jsonc_as_bool(td_jsonc_get(r, "/fd_store"), false))
			snprintf(line, sizeof(line), "on: the mount outlives a crash or restart of "
				 "the daemon (%s takeovers, %s requests resent at the last)",
				 td_ctl_get_num(r, "/takeovers", a, sizeof(a)),
				 td_ctl_get_num(r, "/resent", b, sizeof(b)));
		else
			snprintf(line, sizeof(line), "restart only: no service manager keeps the "
				 "connection, a crash loses the mount (%s takeovers)",
				 td_ctl_get_num(r, "/takeovers", a, sizeof(a)));
		kv_add(t, "recovery", line);
	}
	snprintf(line, sizeof(line), "%.1f (read %.1f, write %.1f, over %.1f s)",
		 td_ctl_get_double(r, "/rate/iops"), td_ctl_get_double(r, "/rate/read_iops"),
		 td_ctl_get_double(r, "/rate/write_iops"),
		 td_ctl_get_double(r, "/rate/interval_s"));
	kv_add(t, "iops", line);
	snprintf(line, sizeof(line), "%s (read %s, write %s)",
		 td_ctl_fmt_rate(td_ctl_get_double(r, "/rate/bytes_per_s"), a, sizeof(a)),
		 td_ctl_fmt_rate(td_ctl_get_double(r, "/rate/read_bytes_per_s"), b, sizeof(b)),
		 td_ctl_fmt_rate(td_ctl_get_double(r, "/rate/write_bytes_per_s"), c, sizeof(c)));
	kv_add(t, "throughput", line);
	kv_add(t, "resets", td_ctl_get_num(r, "/resets", a, sizeof(a)));
	kv_add(t, "timeouts", td_ctl_get_num(r, "/timeouts", a, sizeof(a)));
	kv_add(t, "errors", td_ctl_get_num(r, "/errors", a, sizeof(a)));
	if (td_jsonc_get(r, "/log")) {
		td_ctl_wlog_line(r, "/log", line, sizeof(line));
		kv_add(t, "write log", line);
	}
	kv_add(t, "uptime", td_ctl_fmt_duration(td_ctl_get_u64(r, "/uptime_s"), a, sizeof(a)));
	kv_add(t, "pid", td_ctl_get_num(r, "/pid", a, sizeof(a)));
	kv_add(t, "version", td_ctl_get_str(r, "/version"));
	table_print(t, "");
}

/* The per-op rows of `stats`: op name, count key, bytes key, merges key (NULL: none). */
static const char *const stats_ops[][4] = {
	{ "read", "/reads", "/read_bytes", "/merges/read" },
	{ "write", "/writes", "/write_bytes", "/merges/write" },
	{ "flush", "/flushes", NULL, NULL },
	{ "discard", "/discards", "/discard_bytes", NULL },
	{ "write_zeroes", "/write_zeroes", "/write_zeroes_bytes", NULL },
};

/* A size at @path as "1.5 MiB (1572864 bytes)". */
static const char *get_size(struct json_object *r, const char *path, char *buf,
			    size_t len)
{
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];

	snprintf(buf, len, "%s (%s bytes)", td_ctl_fmt_size(td_ctl_get_u64(r, path), a, sizeof(a)),
		 td_ctl_get_num(r, path, b, sizeof(b)));
	return buf;
}

/* The volatile write cache: what it holds now and what it has done, powerfails included. */
static void stats_cache(struct json_object *r)
{
	struct td_ctl_table *t = kv_table();
	char a[2 * TD_CTL_FMT_LEN + 16];

	printf("write cache (volatile)\n");
	kv_add(t, "cached", get_size(r, "/cache/cached_bytes", a, sizeof(a)));
	kv_add(t, "lines", td_ctl_get_num(r, "/cache/lines", a, sizeof(a)));
	kv_add(t, "writes", td_ctl_get_num(r, "/cache/writes", a, sizeof(a)));
	kv_add(t, "written back", get_size(r, "/cache/written_back_bytes", a, sizeof(a)));
	kv_add(t, "evicted lines", td_ctl_get_num(r, "/cache/evicted_lines", a, sizeof(a)));
	kv_add(t, "flushes", td_ctl_get_num(r, "/cache/flushes", a, sizeof(a)));
	kv_add(t, "powerfails", td_ctl_get_num(r, "/cache/powerfails", a, sizeof(a)));
	kv_add(t, "lost writes", td_ctl_get_num(r, "/cache/lost_writes", a, sizeof(a)));
	kv_add(t, "lost sectors", td_ctl_get_num(r, "/cache/lost_sectors", a, sizeof(a)));
	table_print(t, "  ");
}

/* The latency keys of `stats`, and their column titles ("~": read from the histogram). */
static const char *const stats_latency[][2] = {
	{ "/mean", "MEAN" }, { "/p50", "~P50" },     { "/p90", "~P90" },
	{ "/p99", "~P99" },  { "/p999", "~P99.9" }, { "/max", "MAX" },
};

/*
 * The unit of the latency table, from its largest value (in us): us up to
 * 9999 us, ms up to 9999 ms, else s. Return: its name; *@per_us how many
 * microseconds one of it is.
 */
static const char *latency_unit(struct json_object *r, double *per_us)
{
	uint64_t top = 0;
	char path[64];

	for (size_t i = 0; i < TD_ARRAY_SIZE(stats_ops); i++) {
		for (size_t k = 0; k < TD_ARRAY_SIZE(stats_latency); k++) {
			snprintf(path, sizeof(path), "/latency/%s%s", stats_ops[i][0],
				 stats_latency[k][0]);
			top = TD_MAX(top, td_ctl_get_u64(r, path));
		}
	}
	*per_us = top < 10000 ? 1 : top < 10000000 ? 1e3 : 1e6;
	return top < 10000 ? "us" : top < 10000000 ? "ms" : "s";
}

/*
 * `stats` prints two tables: per operation its count, bytes and merges;
 * then its latencies, in one unit named in the table's first title. The
 * percentiles come from a log-scale histogram (marked ~); MEAN and MAX are
 * exact.
 */
static void stats_latency_table(struct json_object *r)
{
	struct td_ctl_column cols[1 + TD_ARRAY_SIZE(stats_latency)];
	char title[32];
	double per_us;
	const char *unit = latency_unit(r, &per_us);
	struct td_ctl_table *t;
	char path[64];

	snprintf(title, sizeof(title), "LATENCY(%s)", unit);
	cols[0] = (struct td_ctl_column){ title, TD_CTL_LEFT };
	for (size_t k = 0; k < TD_ARRAY_SIZE(stats_latency); k++)
		cols[k + 1] = (struct td_ctl_column){ stats_latency[k][1], TD_CTL_RIGHT };
	t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	for (size_t i = 0; t && i < TD_ARRAY_SIZE(stats_ops); i++) {
		struct json_object *lat;

		snprintf(path, sizeof(path), "/latency/%s", stats_ops[i][0]);
		lat = td_jsonc_get(r, path);
		td_ctl_table_add(t, "%s", stats_ops[i][0]);
		for (size_t k = 0; k < TD_ARRAY_SIZE(stats_latency); k++) {
			struct json_object *v = td_jsonc_get(lat, stats_latency[k][0]);
			double x = (double)td_jsonc_as_u64(v, 0) / per_us;

			/* With no I/O of this kind, a latency of 0 would be a lie. */
			if (!v || !td_ctl_get_u64(lat, "/count"))
				td_ctl_table_add(t, "-");
			else if (per_us == 1)
				td_ctl_table_add(t, "%.0f", x);
			else
				td_ctl_table_add(t, "%.3f", x);
		}
	}
	table_print(t, "");
	printf("~ from a log histogram: within 1/16 of the true value; MEAN, MAX exact\n");
}

void td_ctl_print_stats(struct json_object *r)
{
	static const struct td_ctl_column cols[] = {
		{ "OP", TD_CTL_LEFT },
		{ "COUNT", TD_CTL_RIGHT },
		{ "BYTES", TD_CTL_RIGHT },
		{ "MERGES", TD_CTL_RIGHT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	char a[TD_CTL_FMT_LEN];
	size_t i;

	for (i = 0; t && i < TD_ARRAY_SIZE(stats_ops); i++) {
		const char *const *op = stats_ops[i];

		td_ctl_table_add(t, "%s", op[0]);
		td_ctl_table_add(t, "%s", td_ctl_get_num(r, op[1], a, sizeof(a)));
		td_ctl_table_add(t, "%s",
				 op[2] && td_jsonc_has(r, op[2])
				     ? td_ctl_fmt_size(td_ctl_get_u64(r, op[2]), a, sizeof(a))
				     : "-");
		td_ctl_table_add(t, "%s", op[3] ? td_ctl_get_num(r, op[3], a, sizeof(a)) : "-");
	}
	table_print(t, "");
	printf("\n");
	stats_latency_table(r);

	printf("\nqueue\n");
	t = kv_table();
	kv_add(t, "deferred", td_ctl_get_num(r, "/deferred", a, sizeof(a)));
	kv_add(t, "killed", td_ctl_get_num(r, "/killed", a, sizeof(a)));
	kv_add(t, "requeued", td_ctl_get_num(r, "/requeued", a, sizeof(a)));
	kv_add(t, "resets", td_ctl_get_num(r, "/resets", a, sizeof(a)));
	kv_add(t, "timeouts", td_ctl_get_num(r, "/timeouts", a, sizeof(a)));
	kv_add(t, "retries exhausted", td_ctl_get_num(r, "/retries_exhausted", a, sizeof(a)));
	kv_add(t, "errors", td_ctl_get_num(r, "/errors", a, sizeof(a)));
	kv_add(t, "trace dropped", td_ctl_get_num(r, "/trace_dropped", a, sizeof(a)));
	kv_add(t, "in flight", td_ctl_get_num(r, "/in_flight", a, sizeof(a)));
	kv_add(t, "front merges", td_ctl_get_num(r, "/front_merges", a, sizeof(a)));
	kv_add(t, "back merges", td_ctl_get_num(r, "/back_merges", a, sizeof(a)));
	kv_add(t, "io ticks ms", td_ctl_get_num(r, "/io_ticks_ms", a, sizeof(a)));
	kv_add(t, "time in queue ms", td_ctl_get_num(r, "/time_in_queue_ms", a, sizeof(a)));
	table_print(t, "  ");

	printf("drive\n");
	t = kv_table();
	kv_add(t, "commands", td_ctl_get_num(r, "/drive/commands", a, sizeof(a)));
	kv_add(t, "queued", td_ctl_get_num(r, "/drive/queued", a, sizeof(a)));
	kv_add(t, "executing", td_ctl_get_num(r, "/drive/executing", a, sizeof(a)));
	kv_add(t, "hung", td_ctl_get_num(r, "/drive/hung", a, sizeof(a)));
	kv_add(t, "seeks", td_ctl_get_num(r, "/drive/seeks", a, sizeof(a)));
	kv_add(t, "seek distance", td_ctl_get_num(r, "/drive/seek_distance", a, sizeof(a)));
	snprintf(a, sizeof(a), "%.1f", td_ctl_get_double(r, "/drive/mean_seek_sectors"));
	kv_add(t, "mean seek sectors", a);
	table_print(t, "  ");

	/* Only a drive with write_cache = volatile has one. */
	if (td_jsonc_has(r, "/cache"))
		stats_cache(r);
}

void td_ctl_print_tags(struct json_object *r)
{
	static const struct td_ctl_column cols[] = {
		{ "TAG", TD_CTL_RIGHT },     { "OP", TD_CTL_LEFT },  { "SECTOR", TD_CTL_RIGHT },
		{ "SECTORS", TD_CTL_RIGHT }, { "AGE", TD_CTL_RIGHT }, { "RETRIES", TD_CTL_RIGHT },
		{ "PID", TD_CTL_RIGHT },     { "CDB", TD_CTL_LEFT },
	};
	struct json_object *tags = td_jsonc_get(r, "/tags");
	size_t n = arr_len(tags);
	struct td_ctl_table *t;
	char a[TD_CTL_FMT_LEN];
	size_t i;

	if (!n) {
		printf("no outstanding tags (depth %s)\n",
		       td_ctl_get_num(r, "/depth", a, sizeof(a)));
		return;
	}
	t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	for (i = 0; t && i < n; i++) {
		struct json_object *e = arr_get(tags, i);

		td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/tag", a, sizeof(a)));
		td_ctl_table_add(t, "%s", td_ctl_get_str(e, "/op"));
		td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/sector", a, sizeof(a)));
		td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/sectors", a, sizeof(a)));
		td_ctl_table_add(t, "%s",
				 td_ctl_fmt_latency(td_ctl_get_u64(e, "/age_us"), a, sizeof(a)));
		td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/retries", a, sizeof(a)));
		td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/pid", a, sizeof(a)));
		td_ctl_table_add(t, "%s", td_ctl_get_str(e, "/cdb"));
	}
	table_print(t, "");
}

void td_ctl_print_reset(struct json_object *r)
{
	char a[TD_CTL_FMT_LEN];

	printf("reset: %s requests requeued\n", td_ctl_get_num(r, "/requeued", a, sizeof(a)));
}

void td_ctl_print_elevator(struct json_object *r)
{
	struct json_object *avail = td_jsonc_get(r, "/available");
	size_t i;

	if (td_jsonc_has(r, "/previous")) {
		printf("elevator: %s -> %s\n", td_ctl_get_str(r, "/previous"),
		       td_ctl_get_str(r, "/elevator"));
		return;
	}
	printf("elevator: %s (available: ", td_ctl_get_str(r, "/elevator"));
	for (i = 0; i < arr_len(avail); i++)
		printf("%s%s", i ? ", " : "", td_jsonc_as_str(arr_get(avail, i), "?"));
	printf(")\n");
}

void td_ctl_print_depth(struct json_object *r)
{
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];

	if (td_jsonc_has(r, "/previous"))
		printf("depth: %s -> %s\n", td_ctl_get_num(r, "/previous", a, sizeof(a)),
		       td_ctl_get_num(r, "/depth", b, sizeof(b)));
	else
		printf("depth: %s (max %s)\n", td_ctl_get_num(r, "/depth", a, sizeof(a)),
		       td_ctl_get_num(r, "/max", b, sizeof(b)));
}

void td_ctl_print_inject(struct json_object *r)
{
	static const struct td_ctl_column cols[] = {
		{ "KIND", TD_CTL_LEFT },	{ "OP", TD_CTL_LEFT },
		{ "SECTOR", TD_CTL_RIGHT },	{ "COUNT", TD_CTL_RIGHT },
		{ "TIMES-LEFT", TD_CTL_RIGHT }, { "FIRED", TD_CTL_RIGHT },
	};
	struct json_object *rules = td_jsonc_get(r, "/rules");
	size_t n = arr_len(rules);
	struct td_ctl_table *t;
	char a[TD_CTL_FMT_LEN];
	char kind[TD_CTL_FMT_LEN * 2];
	size_t i;

	if (!n) {
		printf("no faults armed\n");
	} else {
		t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
		for (i = 0; t && i < n; i++) {
			struct json_object *e = arr_get(rules, i);
			const char *k = td_ctl_get_str(e, "/kind");

			/* every and latency carry their one parameter in the kind column. */
			if (strcmp(k, "every") == 0)
				snprintf(kind, sizeof(kind), "every %s",
					 td_ctl_get_num(e, "/every", a, sizeof(a)));
			else if (strcmp(k, "latency") == 0)
				snprintf(kind, sizeof(kind), "latency %s",
					 td_ctl_fmt_latency(td_ctl_get_u64(e, "/latency_us"), a,
							    sizeof(a)));
			else
				snprintf(kind, sizeof(kind), "%s", k);
			td_ctl_table_add(t, "%s", kind);
			td_ctl_table_add(t, "%s", td_ctl_get_str(e, "/op"));
			td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/sector", a, sizeof(a)));
			td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/count", a, sizeof(a)));
			/* null: no count, the rule fires for ever */
			if (td_jsonc_has(e, "/times_left") && !td_jsonc_get(e, "/times_left"))
				td_ctl_table_add(t, "forever");
			else
				td_ctl_table_add(t, "%s",
						 td_ctl_get_num(e, "/times_left", a, sizeof(a)));
			td_ctl_table_add(t, "%s", td_ctl_get_num(e, "/fired", a, sizeof(a)));
		}
		table_print(t, "");
	}
	printf("seed %s\n", td_ctl_get_num(r, "/seed", a, sizeof(a)));
}

void td_ctl_print_powerfail(struct json_object *r)
{
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN], c[TD_CTL_FMT_LEN];

	printf("powerfail: lost %s writes (%s sectors), kept %s writes\n",
	       td_ctl_get_num(r, "/lost_writes", a, sizeof(a)),
	       td_ctl_get_num(r, "/lost_sectors", b, sizeof(b)),
	       td_ctl_get_num(r, "/kept_writes", c, sizeof(c)));
}

void td_ctl_print_other(struct json_object *r)
{
	struct json_object_iterator it = json_object_iter_begin(r);
	struct json_object_iterator end = json_object_iter_end(r);
	struct td_ctl_table *t = kv_table();

	for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
		const char *key = json_object_iter_peek_name(&it);
		struct json_object *v = json_object_iter_peek_value(&it);
		char a[TD_CTL_FMT_LEN];
		const char *text;
		size_t len;

		if (strcmp(key, "ok") == 0)
			continue;
		/* Strings and numbers as the other printers show them; the rest as JSON. */
		if (json_object_is_type(v, json_type_string))
			text = json_object_get_string(v);
		else if (json_object_is_type(v, json_type_int) ||
			 json_object_is_type(v, json_type_double))
			text = num_text(v, a, sizeof(a));
		else
			text = v ? td_jsonc_line(v, &len) : "null";
		kv_add(t, key, text ? text : "?");
	}
	/* Nothing but "ok": nothing to show. */
	if (t && td_ctl_table_rows(t))
		table_print(t, "");
	else
		td_ctl_table_free(t);
}

/* The growth of the counter at @path from @prev (NULL: zero) to @cur; 0 if it went back. */
static double get_delta(struct json_object *cur, struct json_object *prev,
			const char *path)
{
	uint64_t a = td_ctl_get_u64(cur, path);
	uint64_t b = td_ctl_get_u64(prev, path);

	return a >= b ? (double)(a - b) : 0;
}

/* The per-op rates between two stats replies (@prev NULL: since the daemon started). */
void td_ctl_print_stats_rates(struct json_object *cur, struct json_object *prev)
{
	static const struct td_ctl_column cols[] = {
		{ "OP", TD_CTL_LEFT },
		{ "IOPS", TD_CTL_RIGHT },
		{ "THROUGHPUT", TD_CTL_RIGHT },
		{ "MERGES/S", TD_CTL_RIGHT },
	};
	struct td_ctl_table *t = td_ctl_table_create(cols, TD_ARRAY_SIZE(cols));
	double dt = get_delta(cur, prev, "/uptime_us") / 1e6;
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

void td_ctl_print_iostat_json(const struct td_ctl_iostat *io, uint64_t tags)
{
	struct json_object *o = json_object_new_object();
	const char *text = NULL;
	bool ok = true;
	size_t len;

	ok &= td_jsonc_add_double(o, "interval_s", io->interval_s);
	ok &= td_jsonc_add_double(o, "r_s", io->r_s);
	ok &= td_jsonc_add_double(o, "w_s", io->w_s);
	ok &= td_jsonc_add_double(o, "rKiB_s", io->rkib_s);
	ok &= td_jsonc_add_double(o, "wKiB_s", io->wkib_s);
	ok &= td_jsonc_add_double(o, "rrqm_s", io->rrqm_s);
	ok &= td_jsonc_add_double(o, "wrqm_s", io->wrqm_s);
	ok &= td_jsonc_add_double(o, "r_await_ms", io->r_await_ms);
	ok &= td_jsonc_add_double(o, "w_await_ms", io->w_await_ms);
	ok &= td_jsonc_add_double(o, "aqu_sz", io->aqu_sz);
	ok &= td_jsonc_add_u64(o, "tags_in_use", tags);
	ok &= td_jsonc_add_double(o, "util_pct", io->util_pct);
	if (ok)
		text = td_jsonc_line(o, &len);
	if (text)
		printf("%s\n", text);
	else
		fprintf(stderr, "tagdiskctl: out of memory\n");
	json_object_put(o);
}

void td_ctl_print_iostat_row(const struct td_ctl_iostat *io, uint64_t tags, bool header)
{
	/* Column titles as iostat -x, with the units its names leave out (KiB, ms). */
	if (header)
		printf("%8s %8s %9s %9s %8s %8s %11s %11s %7s %5s %7s\n", "r/s", "w/s", "rKiB/s",
		       "wKiB/s", "rrqm/s", "wrqm/s", "r_await(ms)", "w_await(ms)", "aqu-sz", "tags",
		       "%util");
	printf("%8.2f %8.2f %9.2f %9.2f %8.2f %8.2f %11.2f %11.2f %7.2f %5llu %7.2f\n", io->r_s,
	       io->w_s, io->rkib_s, io->wkib_s, io->rrqm_s, io->wrqm_s, io->r_await_ms,
	       io->w_await_ms, io->aqu_sz, (unsigned long long)tags, io->util_pct);
}

