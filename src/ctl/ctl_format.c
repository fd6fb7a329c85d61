// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ctl_format.c - number formatting, table layout, iostat arithmetic and
 * trace lines for tagdiskctl.
 *
 * Units follow one rule (tagdiskctl.8, OUTPUT): bytes are counted in binary
 * units, sizes and rates alike (KiB = 1024 bytes; never kB), and times in
 * us, ms and s. Latencies and rates show three significant digits once a
 * value leaves its base unit, the unit picked after rounding, so a value
 * just below a boundary reads "1.00 ms" and never "1000 us" or "1000 ms".
 * Sizes show one decimal, as ls -h and lsblk print them, because image
 * sizes are powers of two and "1.0 GiB" says so.
 *
 * A table keeps its cells in one flat array in row order; cell i belongs to
 * row i / nr_cols and column i % nr_cols. Widths are measured only when
 * rendering, so rows can be added in any number before the layout is known.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctl/ctl_format.h"

/* Rounded to three significant digits, a value this large shows as 1000: use the next unit. */
#define SIG3_LIMIT 999.5

/* Write @v (0 <= v < SIG3_LIMIT) with three significant digits, then @unit. */
static void fmt_sig3(double v, const char *unit, char *buf, size_t len)
{
	int decimals = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;

	snprintf(buf, len, "%.*f %s", decimals, v, unit);
}

const char *td_ctl_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	size_t i = 0;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024 && i < TD_ARRAY_SIZE(units) - 1) {
		v /= 1024;
		i++;
	}
	/* "%.1f" would print 1023.95 and up as "1024.0". */
	if (v >= 1023.95 && i < TD_ARRAY_SIZE(units) - 1) {
		v /= 1024;
		i++;
	}
	snprintf(buf, len, "%.1f %s", v, units[i]);
	return buf;
}

const char *td_ctl_fmt_rate(double bytes_per_s, char *buf, size_t len)
{
	static const char *const units[] = { "B/s",   "KiB/s", "MiB/s", "GiB/s",
					     "TiB/s", "PiB/s", "EiB/s" };
	double v = bytes_per_s;
	size_t i = 0;

	if (!isfinite(v) || v < 0) {
		snprintf(buf, len, "-");
		return buf;
	}
	/* Rounded to a whole number, 1023.5 and up would read 1024 of a unit. */
	while (v >= 1023.5 && i < TD_ARRAY_SIZE(units) - 1) {
		v /= 1024;
		i++;
	}
	if (i == 0 || v >= SIG3_LIMIT)
		snprintf(buf, len, "%.0f %s", v, units[i]);
	else
		fmt_sig3(v, units[i], buf, len);
	return buf;
}

const char *td_ctl_fmt_latency(uint64_t us, char *buf, size_t len)
{
	double ms = (double)us / 1e3;
	double s = (double)us / 1e6;

	if (us < 1000)
		snprintf(buf, len, "%llu us", (unsigned long long)us);
	else if (ms < SIG3_LIMIT)
		fmt_sig3(ms, "ms", buf, len);
	else if (s < SIG3_LIMIT)
		fmt_sig3(s, "s", buf, len);
	else
		snprintf(buf, len, "%.0f s", s);
	return buf;
}

const char *td_ctl_fmt_duration(uint64_t seconds, char *buf, size_t len)
{
	unsigned long long d = seconds / 86400;
	unsigned int h = (unsigned int)(seconds / 3600 % 24);
	unsigned int m = (unsigned int)(seconds / 60 % 60);
	unsigned int s = (unsigned int)(seconds % 60);

	if (d)
		snprintf(buf, len, "%llud %02uh %02um %02us", d, h, m, s);
	else if (h)
		snprintf(buf, len, "%uh %02um %02us", h, m, s);
	else if (m)
		snprintf(buf, len, "%um %02us", m, s);
	else
		snprintf(buf, len, "%us", s);
	return buf;
}

/* ---------------------------------------------------------------- tables */

struct td_ctl_table {
	struct td_ctl_column *cols; /* titles are our copies */
	size_t nr_cols;
	bool has_header;
	char **cells; /* row-major, nr_cells of them */
	size_t nr_cells;
	size_t cap;
	bool failed; /* sticky: an allocation failed */
};

struct td_ctl_table *td_ctl_table_create(const struct td_ctl_column *cols, size_t nr_cols)
{
	struct td_ctl_table *t;
	size_t i;

	if (!nr_cols)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->cols = calloc(nr_cols, sizeof(*t->cols));
	if (!t->cols)
		goto out_free_table;
	t->nr_cols = nr_cols;
	for (i = 0; i < nr_cols; i++) {
		t->cols[i].align = cols[i].align;
		if (!cols[i].title)
			continue;
		t->has_header = true;
		t->cols[i].title = strdup(cols[i].title);
		if (!t->cols[i].title)
			goto out_free_titles;
	}
	return t;

out_free_titles:
	while (i--)
		free((char *)t->cols[i].title);
	free(t->cols);
out_free_table:
	free(t);
	return NULL;
}

void td_ctl_table_free(struct td_ctl_table *t)
{
	size_t i;

	if (!t)
		return;
	for (i = 0; i < t->nr_cells; i++)
		free(t->cells[i]);
	free(t->cells);
	for (i = 0; i < t->nr_cols; i++)
		free((char *)t->cols[i].title);
	free(t->cols);
	free(t);
}

int td_ctl_table_add(struct td_ctl_table *t, const char *fmt, ...)
{
	va_list ap;
	char *cell;
	int n;

	if (t->failed)
		return -ENOMEM;
	if (t->nr_cells == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4 * t->nr_cols;
		char **cells = reallocarray(t->cells, cap, sizeof(*cells));

		if (!cells)
			goto out_failed;
		t->cells = cells;
		t->cap = cap;
	}
	va_start(ap, fmt);
	n = vasprintf(&cell, fmt, ap);
	va_end(ap);
	if (n < 0)
		goto out_failed;
	t->cells[t->nr_cells++] = cell;
	return 0;

out_failed:
	t->failed = true;
	return -ENOMEM;
}

size_t td_ctl_table_rows(const struct td_ctl_table *t)
{
	return TD_DIV_ROUND_UP(t->nr_cells, t->nr_cols);
}

/* Characters in the UTF-8 text @s: every byte that does not continue a sequence. */
static size_t utf8_width(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

/* A growing output string; @failed once an allocation fails. */
struct outbuf {
	char *s;
	size_t len;
	size_t cap;
	bool failed;
};

static void out_put(struct outbuf *o, const char *s, size_t n)
{
	if (o->failed)
		return;
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap ? o->cap : 256;
		char *p;

		while (cap < o->len + n + 1)
			cap *= 2;
		p = realloc(o->s, cap);
		if (!p) {
			o->failed = true;
			return;
		}
		o->s = p;
		o->cap = cap;
	}
	memcpy(o->s + o->len, s, n);
	o->len += n;
	o->s[o->len] = '\0';
}

static void out_pad(struct outbuf *o, size_t n)
{
	static const char spaces[] = "                                ";

	while (n) {
		size_t k = TD_MIN(n, sizeof(spaces) - 1);

		out_put(o, spaces, k);
		n -= k;
	}
}

/* One line: @indent, then @cells[0..nr_cols) laid out to @widths, trailing spaces dropped. */
static void render_line(struct outbuf *o, const struct td_ctl_table *t, const char *indent,
			const char *const *cells, const size_t *widths)
{
	size_t start = o->len;
	size_t c;

	out_put(o, indent, strlen(indent));
	for (c = 0; c < t->nr_cols; c++) {
		const char *cell = cells[c] ? cells[c] : "";
		size_t pad = widths[c] - utf8_width(cell);

		if (c)
			out_pad(o, 2);
		if (t->cols[c].align == TD_CTL_RIGHT)
			out_pad(o, pad);
		out_put(o, cell, strlen(cell));
		if (t->cols[c].align == TD_CTL_LEFT)
			out_pad(o, pad);
	}
	if (o->failed)
		return;
	while (o->len > start && o->s[o->len - 1] == ' ')
		o->len--;
	out_put(o, "\n", 1);
}

char *td_ctl_table_render(const struct td_ctl_table *t, const char *indent)
{
	struct outbuf o = { 0 };
	const char **row;
	size_t *widths;
	size_t nr_rows = td_ctl_table_rows(t);
	size_t r;
	size_t c;

	if (t->failed)
		return NULL;
	widths = calloc(t->nr_cols, sizeof(*widths));
	row = calloc(t->nr_cols, sizeof(*row));
	if (!widths || !row)
		goto out_free;
	for (c = 0; c < t->nr_cols; c++)
		if (t->cols[c].title)
			widths[c] = utf8_width(t->cols[c].title);
	for (r = 0; r < t->nr_cells; r++) {
		size_t w = utf8_width(t->cells[r]);

		c = r % t->nr_cols;
		widths[c] = TD_MAX(widths[c], w);
	}
	if (t->has_header) {
		for (c = 0; c < t->nr_cols; c++)
			row[c] = t->cols[c].title;
		render_line(&o, t, indent, row, widths);
	}
	for (r = 0; r < nr_rows; r++) {
		for (c = 0; c < t->nr_cols; c++) {
			size_t i = r * t->nr_cols + c;

			row[c] = i < t->nr_cells ? t->cells[i] : NULL;
		}
		render_line(&o, t, indent, row, widths);
	}
	if (o.failed) {
		free(o.s);
		o.s = NULL;
	} else if (!o.s) {
		o.s = strdup(""); /* no header and no rows: empty text, not a failure */
	}
out_free:
	free(row);
	free(widths);
	return o.s;
}

/* ---------------------------------------------------------------- iostat */

void td_ctl_iostat_compute(const struct td_ctl_iostat_sample *prev,
			   const struct td_ctl_iostat_sample *cur, struct td_ctl_iostat *out)
{
	static const struct td_ctl_iostat_sample zero;
	uint64_t d[TD_CTL_SYSFS_FIELDS];
	double dt_s;
	double dt_ms;
	size_t i;

	if (!prev)
		prev = &zero;
	memset(out, 0, sizeof(*out));
	if (cur->uptime_us <= prev->uptime_us)
		return;
	for (i = 0; i < TD_CTL_SYSFS_FIELDS; i++)
		d[i] = cur->stat[i] >= prev->stat[i] ? cur->stat[i] - prev->stat[i] : 0;
	dt_s = (double)(cur->uptime_us - prev->uptime_us) / 1e6;
	dt_ms = dt_s * 1e3;

	out->interval_s = dt_s;
	out->r_s = (double)d[TD_CTL_READS] / dt_s;
	out->w_s = (double)d[TD_CTL_WRITES] / dt_s;
	/* Two 512-byte sectors to the KiB. */
	out->rkib_s = (double)d[TD_CTL_READ_SECTORS] / 2 / dt_s;
	out->wkib_s = (double)d[TD_CTL_WRITE_SECTORS] / 2 / dt_s;
	out->rrqm_s = (double)d[TD_CTL_READ_MERGES] / dt_s;
	out->wrqm_s = (double)d[TD_CTL_WRITE_MERGES] / dt_s;
	if (d[TD_CTL_READS])
		out->r_await_ms = (double)d[TD_CTL_READ_TICKS_MS] / (double)d[TD_CTL_READS];
	if (d[TD_CTL_WRITES])
		out->w_await_ms = (double)d[TD_CTL_WRITE_TICKS_MS] / (double)d[TD_CTL_WRITES];
	out->aqu_sz = (double)d[TD_CTL_TIME_IN_QUEUE_MS] / dt_ms;
	/* io_ticks is sampled on the daemon's clock, ours on its uptime: clamp the skew. */
	out->util_pct = TD_MIN((double)d[TD_CTL_IO_TICKS_MS] / dt_ms * 100, 100.0);
}

/* ---------------------------------------------------------------- trace */

const char *td_ctl_op_letters(const char *op, bool fua)
{
	if (strcmp(op, "read") == 0)
		return "R";
	if (strcmp(op, "write") == 0)
		return fua ? "WF" : "W";
	if (strcmp(op, "flush") == 0)
		return "FN";
	if (strcmp(op, "discard") == 0)
		return "D";
	if (strcmp(op, "write_zeroes") == 0)
		return "Z";
	return "?";
}

const char *td_ctl_fmt_event(const struct td_ctl_event *ev, uint64_t t0_ns, char *buf, size_t len)
{
	bool before = ev->time_ns < t0_ns;
	uint64_t rel = before ? t0_ns - ev->time_ns : ev->time_ns - t0_ns;
	char action = ev->action > ' ' && ev->action < 0x7f ? ev->action : '?';
	char when[32];
	char tag[24];
	char err[32] = "";

	snprintf(when, sizeof(when), "%s%llu.%06llu", before ? "-" : "",
		 (unsigned long long)(rel / 1000000000),
		 (unsigned long long)(rel % 1000000000 / 1000));
	if (ev->tag >= 0)
		snprintf(tag, sizeof(tag), "%lld", (long long)ev->tag);
	else
		snprintf(tag, sizeof(tag), "-");
	if (action == 'C' && ev->error)
		snprintf(err, sizeof(err), " err %lld", (long long)ev->error);
	snprintf(buf, len, "%10s %5lld  %c  %-2s %llu + %llu [tag %s]%s", when, (long long)ev->pid,
		 action, td_ctl_op_letters(ev->op, ev->fua), (unsigned long long)ev->sector,
		 (unsigned long long)ev->sectors, tag, err);
	return buf;
}
