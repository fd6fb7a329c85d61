// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * admin_cmd.c - the admin commands: parsing, the table, the handlers.
 *
 * Every handler builds exactly one JSON object (struct td_admin_reply,
 * admin_reply.c). Field names and units follow the admin contract
 * (docs/protocol.md): sizes in bytes, sectors of 512 bytes, times in
 * microseconds unless the key ends in _ms or _s.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/log.h"
#include "common/utf8.h"
#include "daemon/admin_int.h"
#include "daemon/config.h"
#include "daemon/frontend.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"
#include "tagdisk/wcache.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

const struct td_admin_command td_admin_commands[] = {
	{ "help", "help", "list the commands", 0, 0 },
	{ "status", "status", "state, image, size, mode, elevator, depth, tags, queue, rates", 0,
	  0 },
	{ "stats", "stats", "counters, merges, errors, resets, latency percentiles per op", 0, 0 },
	{ "tags", "tags", "the outstanding tagged commands, oldest first", 0, 0 },
	{ "reset", "reset", "reset the drive: invalidate every tag and requeue its request", 0, 0 },
	{ "elevator", "elevator [NAME]", "show the elevator, or switch to NAME (drain, switch)",
	  0, 1 },
	{ "depth", "depth [N]", "show the tag depth, or resize the tag map to N", 0, 1 },
	{ "inject",
	  "inject error op=read|write|any sector=S count=N [times=K] | every N | hang [times=K] | "
	  "latency US | seed N | clear | list",
	  "arm, clear or list faults", 1, 5 },
	{ "powerfail", "powerfail [keep=PCT] [seed=N]",
	  "write_cache = volatile: drop unflushed writes (keeping PCT % at random)", 0, 2 },
	{ "trace", "trace", "turn this connection into a live stream of block-layer events", 0,
	  0 },
};
const size_t td_admin_nr_commands = TD_ARRAY_SIZE(td_admin_commands);

/* ---- parsing --------------------------------------------------------------------------- */

int td_admin_parse(const char *line, size_t len, struct td_admin_request *req, char *err,
		   size_t errlen)
{
	char *p, *save = NULL;

	memset(req, 0, offsetof(struct td_admin_request, buf));
	if (len > TD_ADMIN_LINE_MAX) {
		snprintf(err, errlen, "line too long (over %d bytes)", TD_ADMIN_LINE_MAX);
		return -EINVAL;
	}
	if (memchr(line, '\0', len)) {
		snprintf(err, errlen, "line contains a NUL byte");
		return -EINVAL;
	}
	if (!td_utf8_valid(line, len)) {
		snprintf(err, errlen, "line is not valid UTF-8");
		return -EINVAL;
	}
	if (len && line[len - 1] == '\r')
		len--;
	memcpy(req->buf, line, len);
	req->buf[len] = '\0';

	char *name = strtok_r(req->buf, " \t", &save);

	if (!name) {
		snprintf(err, errlen, "empty command (try \"help\")");
		return -EINVAL;
	}
	while ((p = strtok_r(NULL, " \t", &save))) {
		if (req->argc == TD_ADMIN_MAX_ARGS) {
			snprintf(err, errlen, "too many arguments (at most %d)", TD_ADMIN_MAX_ARGS);
			return -EINVAL;
		}
		req->argv[req->argc++] = p;
	}
	for (size_t i = 0; i < td_admin_nr_commands; i++) {
		if (strcmp(td_admin_commands[i].name, name) == 0) {
			req->cmd = &td_admin_commands[i];
			break;
		}
	}
	if (!req->cmd) {
		snprintf(err, errlen, "unknown command \"%.64s\" (try \"help\")", name);
		return -EINVAL;
	}
	if (req->argc < req->cmd->min_args || req->argc > req->cmd->max_args) {
		snprintf(err, errlen, "usage: %s", req->cmd->usage);
		return -EINVAL;
	}
	return 0;
}

int td_admin_kv(char *const *argv, unsigned int argc, const char *const *keys, size_t nr_keys,
		const char **values, char *err, size_t errlen)
{
	for (size_t k = 0; k < nr_keys; k++)
		values[k] = NULL;
	for (unsigned int i = 0; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		size_t klen;
		size_t k;

		if (!eq) {
			snprintf(err, errlen, "argument \"%.64s\" is not key=value", argv[i]);
			return -EINVAL;
		}
		klen = (size_t)(eq - argv[i]);
		for (k = 0; k < nr_keys; k++)
			if (strlen(keys[k]) == klen && strncmp(keys[k], argv[i], klen) == 0)
				break;
		if (k == nr_keys) {
			snprintf(err, errlen, "unknown argument \"%.*s\"", (int)TD_MIN(klen, 64),
				 argv[i]);
			return -EINVAL;
		}
		if (values[k]) {
			snprintf(err, errlen, "argument \"%s\" given twice", keys[k]);
			return -EINVAL;
		}
		if (!eq[1]) {
			snprintf(err, errlen, "argument \"%s\" has no value", keys[k]);
			return -EINVAL;
		}
		values[k] = eq + 1;
	}
	return 0;
}

/* ---- helpers --------------------------------------------------------------------------- */

/* Parse a number argument, replying with an error that names @what. Return: 0 or -EINVAL. */
static int number_arg(struct td_admin_reply *out, const char *what, const char *s, uint64_t min,
		      uint64_t max, uint64_t *v)
{
	int r = td_parse_u64(s, min, max, v);

	if (r == -EINVAL)
		td_admin_error(out, "%s: \"%.64s\" is not a number", what, s);
	else if (r)
		td_admin_error(out, "%s: %.64s is out of range (%llu..%llu)", what, s,
			       (unsigned long long)min, (unsigned long long)max);
	return r ? -EINVAL : 0;
}

static bool rq_mode(struct td_admin *a)
{
	return td_queue_mode(a->p.q) == TD_MODE_RQ;
}

/* The rate figures of snapshot @s, taken at @now. */
static void sample_from(struct td_admin_sample *smp, const struct td_stats_snapshot *s,
			uint64_t now)
{
	smp->t_ns = now;
	smp->ios[0] = s->ios[TD_OP_READ];
	smp->ios[1] = s->ios[TD_OP_WRITE] + s->ios[TD_OP_WRITE_ZEROES];
	smp->bytes[0] = s->sectors[TD_OP_READ] << TD_SECTOR_SHIFT;
	smp->bytes[1] = s->sectors[TD_OP_WRITE] << TD_SECTOR_SHIFT;
}

void td_admin_sample(struct td_admin *a)
{
	struct td_stats_snapshot *s = malloc(sizeof(*s));
	uint64_t now = td_now_ns();

	if (!s)
		return;
	td_stats_snapshot(td_queue_stats(a->p.q), s, now);
	sample_from(&a->samples[a->next_sample], s, now);
	a->next_sample = (a->next_sample + 1) % TD_ADMIN_RATE_SAMPLES;
	if (a->nr_samples < TD_ADMIN_RATE_SAMPLES)
		a->nr_samples++;
	free(s);
}

/* ---- commands --------------------------------------------------------------------------- */

static void cmd_help(struct td_admin *a, const struct td_admin_request *req,
		     struct td_admin_reply *out)
{
	struct json_object *cmds;

	(void)a, (void)req;
	cmds = td_admin_put_array(out, td_admin_ok(out), "commands");
	for (size_t i = 0; i < td_admin_nr_commands; i++) {
		struct json_object *c = td_admin_append_object(out, cmds);

		td_admin_put_str(out, c, "name", td_admin_commands[i].name);
		td_admin_put_str(out, c, "usage", td_admin_commands[i].usage);
		td_admin_put_str(out, c, "help", td_admin_commands[i].help);
	}
}

/*
 * The "rate" object of @parent: from the oldest sample of the last seconds
 * to now, "now" being snapshot @cur taken at @now (the caller's, so that a
 * status request reads the sharded counters once).
 */
static void rate_object(struct td_admin *a, struct td_admin_reply *out,
			struct json_object *parent, const struct td_stats_snapshot *cur,
			uint64_t now)
{
	struct td_admin_sample now_s;
	const struct td_admin_sample *old = NULL;
	struct json_object *rate;

	/* The oldest sample within the last 5 seconds (or the oldest there is). */
	for (unsigned int i = 0; i < a->nr_samples; i++) {
		const struct td_admin_sample *s = &a->samples[i];

		if (now - s->t_ns > 6 * TD_NSEC_PER_SEC)
			continue;
		if (!old || s->t_ns < old->t_ns)
			old = s;
	}
	rate = td_admin_put_object(out, parent, "rate");
	if (!old) {
		td_admin_put_double(out, rate, "interval_s", 0);
		for (const char *const *k = (const char *const[]){ "read_iops", "write_iops", "iops",
								    "read_bytes_per_s",
								    "write_bytes_per_s",
								    "bytes_per_s", NULL };
		     *k; k++)
			td_admin_put_double(out, rate, *k, 0);
		return;
	}
	sample_from(&now_s, cur, now);

	double dt = (double)(now_s.t_ns - old->t_ns) / 1e9;

	if (dt <= 0)
		dt = 1e-9;
	double r_iops = (double)(now_s.ios[0] - old->ios[0]) / dt;
	double w_iops = (double)(now_s.ios[1] - old->ios[1]) / dt;
	double r_bps = (double)(now_s.bytes[0] - old->bytes[0]) / dt;
	double w_bps = (double)(now_s.bytes[1] - old->bytes[1]) / dt;

	td_admin_put_double(out, rate, "interval_s", dt);
	td_admin_put_double(out, rate, "read_iops", r_iops);
	td_admin_put_double(out, rate, "write_iops", w_iops);
	td_admin_put_double(out, rate, "iops", r_iops + w_iops);
	td_admin_put_double(out, rate, "read_bytes_per_s", r_bps);
	td_admin_put_double(out, rate, "write_bytes_per_s", w_bps);
	td_admin_put_double(out, rate, "bytes_per_s", r_bps + w_bps);
}

static void cmd_status(struct td_admin *a, const struct td_admin_request *req,
		       struct td_admin_reply *out)
{
	struct json_object *o;
	struct td_queue_status qs;
	struct td_drive_status ds;
	struct td_stats_snapshot *s = malloc(sizeof(*s));
	struct td_config *c = a->p.config;

	(void)req;
	if (!s) {
		td_admin_error(out, "out of memory");
		return;
	}
	uint64_t now = td_now_ns();

	td_queue_get_status(a->p.q, &qs);
	td_drive_get_status(a->p.drive, &ds);
	td_stats_snapshot(td_queue_stats(a->p.q), s, now);

	o = td_admin_ok(out);
	td_admin_put_str(out, o, "state", "running");
	td_admin_put_str(out, o, "version", TD_VERSION);
	td_admin_put_i64(out, o, "pid", getpid());
	td_admin_put_u64(out, o, "uptime_s", (td_now_ns() - a->start_ns) / TD_NSEC_PER_SEC);
	td_admin_put_str(out, o, "image", a->image);
	td_admin_put_u64(out, o, "size", a->p.image_size);
	pthread_mutex_lock(&a->fe_lock);
	td_admin_put_str(out, o, "disk", a->disk_path ? a->disk_path : "");
	unsigned int opens = a->fe ? td_frontend_open_count(a->fe) : 0;
	unsigned int threads = a->fe ? td_frontend_threads(a->fe, NULL) : 0;

	pthread_mutex_unlock(&a->fe_lock);
	pthread_mutex_lock(a->p.config_lock);
	td_admin_put_bool(out, o, "read_only", c->read_only);
	td_admin_put_u64(out, o, "logical_block_size", c->logical_block_size);
	pthread_mutex_unlock(a->p.config_lock);
	td_admin_put_str(out, o, "mode", qs.mode == TD_MODE_RQ ? "rq" : "bio");
	td_admin_put_str(out, o, "elevator", qs.elevator);
	td_admin_put_u64(out, o, "depth", qs.mode == TD_MODE_RQ ? qs.depth : 0);
	td_admin_put_u64(out, o, "tags_in_use", qs.tags_in_use);
	td_admin_put_u64(out, o, "in_flight", qs.mode == TD_MODE_RQ ? qs.in_flight : s->in_flight);
	td_admin_put_u64(out, o, "queued", qs.queued);
	td_admin_put_u64(out, o, "requests_used", qs.requests_used);
	td_admin_put_u64(out, o, "nr_requests", qs.nr_requests);
	td_admin_put_u64(out, o, "max_sectors", qs.max_sectors);
	td_admin_put_u64(out, o, "workers", ds.workers);
	td_admin_put_str(out, o, "model", td_drive_model_name(ds.model));
	td_admin_put_str(out, o, "write_cache", td_write_cache_name(ds.write_cache));
	td_admin_put_u64(out, o, "command_timeout_ms", qs.command_timeout_ms);
	td_admin_put_u64(out, o, "max_retries", qs.max_retries);
	td_admin_put_u64(out, o, "opens", opens);
	td_admin_put_u64(out, o, "fuse_threads", threads);
	td_admin_put_u64(out, o, "resets", s->counters[TD_STAT_RESETS]);
	td_admin_put_u64(out, o, "timeouts", s->counters[TD_STAT_TIMEOUTS]);
	uint64_t errors = 0;

	for (int op = 0; op < TD_OP_COUNT; op++)
		errors += s->errors[op];
	td_admin_put_u64(out, o, "errors", errors);
	rate_object(a, out, o, s, now);
	free(s);
}

static void latency_object(struct td_admin_reply *out, struct json_object *parent,
			   const char *name, const struct td_stats_snapshot *s, enum td_op op)
{
	const uint64_t *h = s->hist[op];
	uint64_t max_bucket = 0;
	struct json_object *l;

	for (unsigned int b = 0; b < TD_STATS_BUCKETS; b++)
		if (h[b])
			max_bucket = td_stats_bucket_value(b);
	l = td_admin_put_object(out, parent, name);
	td_admin_put_u64(out, l, "count", s->ios[op]);
	td_admin_put_u64(out, l, "mean", s->ios[op] ? s->ticks_ns[op] / s->ios[op] / 1000 : 0);
	td_admin_put_u64(out, l, "p50", td_stats_percentile(h, 0.50) / 1000);
	td_admin_put_u64(out, l, "p90", td_stats_percentile(h, 0.90) / 1000);
	td_admin_put_u64(out, l, "p99", td_stats_percentile(h, 0.99) / 1000);
	td_admin_put_u64(out, l, "p999", td_stats_percentile(h, 0.999) / 1000);
	td_admin_put_u64(out, l, "max_bucket", max_bucket / 1000);
}

static void cmd_stats(struct td_admin *a, const struct td_admin_request *req,
		      struct td_admin_reply *out)
{
	struct json_object *o, *merges, *latency, *drive, *cache, *sysfs_stat;
	struct td_stats_snapshot *s = malloc(sizeof(*s));
	struct td_drive_status ds;
	uint64_t now = td_now_ns();

	(void)req;
	if (!s) {
		td_admin_error(out, "out of memory");
		return;
	}
	td_stats_snapshot(td_queue_stats(a->p.q), s, now);
	td_drive_get_status(a->p.drive, &ds);

	uint64_t errors = 0;

	for (int op = 0; op < TD_OP_COUNT; op++)
		errors += s->errors[op];
	o = td_admin_ok(out);
	td_admin_put_u64(out, o, "uptime_us", (now - a->start_ns) / 1000);
	td_admin_put_u64(out, o, "reads", s->ios[TD_OP_READ]);
	td_admin_put_u64(out, o, "writes", s->ios[TD_OP_WRITE]);
	td_admin_put_u64(out, o, "flushes", s->ios[TD_OP_FLUSH]);
	td_admin_put_u64(out, o, "discards", s->ios[TD_OP_DISCARD]);
	td_admin_put_u64(out, o, "write_zeroes", s->ios[TD_OP_WRITE_ZEROES]);
	td_admin_put_u64(out, o, "read_bytes", s->sectors[TD_OP_READ] << TD_SECTOR_SHIFT);
	td_admin_put_u64(out, o, "write_bytes", s->sectors[TD_OP_WRITE] << TD_SECTOR_SHIFT);
	td_admin_put_u64(out, o, "discard_bytes", s->sectors[TD_OP_DISCARD] << TD_SECTOR_SHIFT);
	td_admin_put_u64(out, o, "write_zeroes_bytes",
			 s->sectors[TD_OP_WRITE_ZEROES] << TD_SECTOR_SHIFT);
	uint64_t front = 0, back = 0;

	for (int op = 0; op < TD_OP_COUNT; op++) {
		front += s->front_merges[op];
		back += s->back_merges[op];
	}
	td_admin_put_u64(out, o, "front_merges", front);
	td_admin_put_u64(out, o, "back_merges", back);
	merges = td_admin_put_object(out, o, "merges");
	td_admin_put_u64(out, merges, "read",
			 s->front_merges[TD_OP_READ] + s->back_merges[TD_OP_READ]);
	td_admin_put_u64(out, merges, "write",
			 s->front_merges[TD_OP_WRITE] + s->back_merges[TD_OP_WRITE]);
	td_admin_put_u64(out, o, "deferred", s->counters[TD_STAT_DEFERRED]);
	td_admin_put_u64(out, o, "killed", s->counters[TD_STAT_KILLED]);
	td_admin_put_u64(out, o, "errors", errors);
	td_admin_put_u64(out, o, "requeued", s->counters[TD_STAT_REQUEUED]);
	td_admin_put_u64(out, o, "resets", s->counters[TD_STAT_RESETS]);
	td_admin_put_u64(out, o, "timeouts", s->counters[TD_STAT_TIMEOUTS]);
	td_admin_put_u64(out, o, "retries_exhausted", s->counters[TD_STAT_RETRIES_EXHAUSTED]);
	td_admin_put_u64(out, o, "in_flight", s->in_flight);
	td_admin_put_u64(out, o, "io_ticks_ms", s->io_ticks_ns / TD_NSEC_PER_MSEC);
	td_admin_put_u64(out, o, "time_in_queue_ms", s->time_in_queue_ns / TD_NSEC_PER_MSEC);

	latency = td_admin_put_object(out, o, "latency");
	for (int op = 0; op < TD_OP_COUNT; op++)
		latency_object(out, latency, td_op_name((enum td_op)op), s, (enum td_op)op);

	drive = td_admin_put_object(out, o, "drive");
	td_admin_put_u64(out, drive, "commands", ds.commands);
	td_admin_put_u64(out, drive, "queued", ds.queued);
	td_admin_put_u64(out, drive, "executing", ds.executing);
	td_admin_put_u64(out, drive, "hung", ds.hung);
	td_admin_put_u64(out, drive, "seeks", ds.seeks);
	td_admin_put_u64(out, drive, "seek_distance", ds.seek_distance);
	td_admin_put_double(out, drive, "mean_seek_sectors",
			    ds.seeks ? (double)ds.seek_distance / (double)ds.seeks : 0.0);

	struct td_wcache_stats cs;

	if (td_drive_cache_stats(a->p.drive, &cs)) {
		cache = td_admin_put_object(out, o, "cache");
		td_admin_put_u64(out, cache, "cached_bytes", cs.cached_bytes);
		td_admin_put_u64(out, cache, "lines", cs.lines);
		td_admin_put_u64(out, cache, "writes", cs.writes);
		td_admin_put_u64(out, cache, "written_back_bytes", cs.written_back);
		td_admin_put_u64(out, cache, "evicted_lines", cs.evicted_lines);
		td_admin_put_u64(out, cache, "flushes", cs.flushes);
		td_admin_put_u64(out, cache, "powerfails", cs.powerfails);
		td_admin_put_u64(out, cache, "lost_writes", cs.lost_writes);
		td_admin_put_u64(out, cache, "lost_sectors", cs.lost_sectors);
	}

	/* The 17 fields of /sys/block/<dev>/stat (Documentation/admin-guide/iostats.rst). */
	const uint64_t ms = TD_NSEC_PER_MSEC;
	uint64_t sysfs[17] = {
		s->ios[TD_OP_READ],
		s->front_merges[TD_OP_READ] + s->back_merges[TD_OP_READ],
		s->sectors[TD_OP_READ],
		s->ticks_ns[TD_OP_READ] / ms,
		s->ios[TD_OP_WRITE] + s->ios[TD_OP_WRITE_ZEROES],
		s->front_merges[TD_OP_WRITE] + s->back_merges[TD_OP_WRITE],
		s->sectors[TD_OP_WRITE] + s->sectors[TD_OP_WRITE_ZEROES],
		(s->ticks_ns[TD_OP_WRITE] + s->ticks_ns[TD_OP_WRITE_ZEROES]) / ms,
		s->in_flight,
		s->io_ticks_ns / ms,
		s->time_in_queue_ns / ms,
		s->ios[TD_OP_DISCARD],
		s->front_merges[TD_OP_DISCARD] + s->back_merges[TD_OP_DISCARD],
		s->sectors[TD_OP_DISCARD],
		s->ticks_ns[TD_OP_DISCARD] / ms,
		s->ios[TD_OP_FLUSH],
		s->ticks_ns[TD_OP_FLUSH] / ms,
	};

	sysfs_stat = td_admin_put_array(out, o, "sysfs_stat");
	for (size_t i = 0; i < TD_ARRAY_SIZE(sysfs); i++)
		td_admin_append_u64(out, sysfs_stat, sysfs[i]);
	free(s);
}

static void cmd_tags(struct td_admin *a, const struct td_admin_request *req,
		     struct td_admin_reply *out)
{
	struct json_object *o, *arr;
	struct td_tag_info *tags = NULL;
	unsigned int depth = td_tag_depth(td_queue_tag_map(a->p.q));
	unsigned int max = TD_TAG_DEPTH_MAX;
	unsigned int n;

	(void)req;
	tags = calloc(max, sizeof(*tags));
	if (!tags) {
		td_admin_error(out, "out of memory");
		return;
	}
	n = td_queue_get_tags(a->p.q, tags, max);
	o = td_admin_ok(out);
	td_admin_put_u64(out, o, "depth", rq_mode(a) ? depth : 0);
	td_admin_put_u64(out, o, "in_use", n);
	arr = td_admin_put_array(out, o, "tags");
	for (unsigned int i = 0; i < TD_MIN(n, max); i++) {
		struct json_object *t = td_admin_append_object(out, arr);
		char cdb[64];

		td_cdb_format(tags[i].cmd, tags[i].cmd_len, cdb, sizeof(cdb));
		td_admin_put_i64(out, t, "tag", tags[i].tag);
		td_admin_put_str(out, t, "op", td_op_name(tags[i].op));
		td_admin_put_u64(out, t, "sector", tags[i].sector);
		td_admin_put_u64(out, t, "sectors", tags[i].nr_sectors);
		td_admin_put_u64(out, t, "age_us", tags[i].age_us);
		td_admin_put_u64(out, t, "retries", tags[i].retries);
		td_admin_put_i64(out, t, "pid", tags[i].pid);
		td_admin_put_str(out, t, "cdb", cdb);
	}
	free(tags);
}

static void cmd_reset(struct td_admin *a, const struct td_admin_request *req,
		      struct td_admin_reply *out)
{
	(void)req;
	if (!rq_mode(a)) {
		td_admin_error(out, "reset: mode = bio has no queue or tags to reset");
		return;
	}
	unsigned int n = td_queue_reset(a->p.q, false);

	td_admin_put_u64(out, td_admin_ok(out), "requeued", n);
}

static void elevator_names(struct td_admin_reply *out, struct json_object *parent)
{
	struct json_object *arr;
	char names[256];
	char *save = NULL;

	td_elv_names(names, sizeof(names));
	arr = td_admin_put_array(out, parent, "available");
	for (char *p = strtok_r(names, ", ", &save); p; p = strtok_r(NULL, ", ", &save))
		td_admin_append_str(out, arr, p);
}

static void cmd_elevator(struct td_admin *a, const struct td_admin_request *req,
			 struct td_admin_reply *out)
{
	struct json_object *o;
	struct td_queue_status qs;

	td_queue_get_status(a->p.q, &qs);
	if (req->argc == 0) {
		o = td_admin_ok(out);
		td_admin_put_str(out, o, "elevator", qs.elevator);
		elevator_names(out, o);
		return;
	}
	const char *name = req->argv[0];
	char names[256];

	if (!rq_mode(a)) {
		td_admin_error(out, "elevator: mode = bio has no elevator");
		return;
	}
	if (!td_elv_find(name)) {
		td_elv_names(names, sizeof(names));
		td_admin_error(out, "elevator: unknown elevator \"%.64s\" (available: %s)", name,
			       names);
		return;
	}
	pthread_mutex_lock(a->p.config_lock);
	int r = td_queue_set_elevator(a->p.q, name);

	if (!r)
		snprintf(a->p.config->elevator, sizeof(a->p.config->elevator), "%s", name);
	pthread_mutex_unlock(a->p.config_lock);
	if (r) {
		td_admin_error(out, "elevator: cannot switch to \"%s\": %s", name, strerror(-r));
		return;
	}
	o = td_admin_ok(out);
	td_admin_put_str(out, o, "elevator", name);
	td_admin_put_str(out, o, "previous", qs.elevator);
}

static void cmd_depth(struct td_admin *a, const struct td_admin_request *req,
		      struct td_admin_reply *out)
{
	struct json_object *o;
	unsigned int cur = td_tag_depth(td_queue_tag_map(a->p.q));
	uint64_t v;

	if (req->argc == 0) {
		o = td_admin_ok(out);
		td_admin_put_u64(out, o, "depth", rq_mode(a) ? cur : 0);
		td_admin_put_u64(out, o, "max", TD_TAG_DEPTH_MAX);
		return;
	}
	if (!rq_mode(a)) {
		td_admin_error(out, "depth: mode = bio has no tags");
		return;
	}
	if (number_arg(out, "depth", req->argv[0], 1, TD_TAG_DEPTH_MAX, &v))
		return;
	pthread_mutex_lock(a->p.config_lock);
	int r = td_queue_set_depth(a->p.q, (unsigned int)v);

	if (!r)
		a->p.config->depth = (unsigned int)v;
	pthread_mutex_unlock(a->p.config_lock);
	if (r) {
		td_admin_error(out, "depth: %s", strerror(-r));
		return;
	}
	o = td_admin_ok(out);
	td_admin_put_u64(out, o, "depth", v);
	td_admin_put_u64(out, o, "previous", cur);
}

static void inject_rules(struct td_admin_reply *out, struct json_object *parent,
			 struct td_inject *inj)
{
	struct td_inject_rule rules[TD_INJECT_MAX_RULES + 2];
	size_t n = td_inject_list(inj, rules, TD_ARRAY_SIZE(rules));
	struct json_object *arr;

	td_admin_put_u64(out, parent, "seed", td_inject_seed(inj));
	arr = td_admin_put_array(out, parent, "rules");
	for (size_t i = 0; i < TD_MIN(n, TD_ARRAY_SIZE(rules)); i++) {
		const struct td_inject_rule *r = &rules[i];
		struct json_object *o = td_admin_append_object(out, arr);

		td_admin_put_str(out, o, "kind", td_inject_kind_name(r->kind));
		switch (r->kind) {
		case TD_INJECT_ERROR:
			td_admin_put_str(out, o, "op", td_inject_op_name(r->op));
			td_admin_put_u64(out, o, "sector", r->sector);
			td_admin_put_u64(out, o, "count", r->count);
			__attribute__((fallthrough)); /* errors and hangs both count down */
		case TD_INJECT_HANG:
			if (r->times_left == TD_INJECT_FOREVER)
				td_admin_put_null(out, o, "times_left");
			else
				td_admin_put_u64(out, o, "times_left", r->times_left);
			break;
		case TD_INJECT_EVERY:
			td_admin_put_u64(out, o, "every", r->every);
			break;
		case TD_INJECT_LATENCY:
			td_admin_put_u64(out, o, "latency_us", r->latency_us);
			break;
		}
		td_admin_put_u64(out, o, "fired", r->fired);
	}
}

static void cmd_inject(struct td_admin *a, const struct td_admin_request *req,
		       struct td_admin_reply *out)
{
	struct td_inject *inj = td_drive_inject(a->p.drive);
	const char *sub = req->argv[0];
	char *const *args = req->argv + 1;
	unsigned int nargs = req->argc - 1;
	char err[256];
	uint64_t v;
	int r = 0;

	if (strcmp(sub, "error") == 0) {
		static const char *const keys[] = { "op", "sector", "count", "times" };
		const char *val[4];
		enum td_inject_op op;
		uint64_t sector, count, times = TD_INJECT_FOREVER;

		if (td_admin_kv(args, nargs, keys, 4, val, err, sizeof(err))) {
			td_admin_error(out, "inject error: %s", err);
			return;
		}
		if (!val[0] || !val[1] || !val[2]) {
			td_admin_error(out, "usage: inject error op=read|write|any sector=S count=N "
					    "[times=K]");
			return;
		}
		if (strcmp(val[0], "read") == 0) {
			op = TD_INJECT_READ;
		} else if (strcmp(val[0], "write") == 0) {
			op = TD_INJECT_WRITE;
		} else if (strcmp(val[0], "any") == 0) {
			op = TD_INJECT_ANY;
		} else {
			td_admin_error(out, "inject error: op=\"%.32s\" is not read, write or any",
				       val[0]);
			return;
		}
		if (number_arg(out, "inject error: sector", val[1], 0, UINT64_MAX - 1, &sector) ||
		    number_arg(out, "inject error: count", val[2], 1, UINT64_MAX, &count) ||
		    (val[3] && number_arg(out, "inject error: times", val[3], 1, UINT64_MAX - 1,
					  &times)))
			return;
		r = td_inject_add_error(inj, op, sector, count, times);
	} else if (strcmp(sub, "every") == 0) {
		if (nargs != 1) {
			td_admin_error(out, "usage: inject every N");
			return;
		}
		if (number_arg(out, "inject every", args[0], 1, UINT32_MAX, &v))
			return;
		r = td_inject_set_every(inj, (uint32_t)v);
	} else if (strcmp(sub, "hang") == 0) {
		static const char *const keys[] = { "times" };
		const char *val[1];
		uint64_t times = 1;

		if (!rq_mode(a)) {
			td_admin_error(out, "inject hang: needs mode = rq (a hung bio would block "
					    "its caller forever)");
			return;
		}
		if (td_admin_kv(args, nargs, keys, 1, val, err, sizeof(err))) {
			td_admin_error(out, "inject hang: %s", err);
			return;
		}
		if (val[0] && number_arg(out, "inject hang: times", val[0], 1, UINT64_MAX - 1,
					 &times))
			return;
		r = td_inject_add_hang(inj, times);
	} else if (strcmp(sub, "latency") == 0) {
		if (nargs != 1) {
			td_admin_error(out, "usage: inject latency US");
			return;
		}
		if (number_arg(out, "inject latency", args[0], 0, 60000000, &v))
			return;
		td_inject_set_latency(inj, (uint32_t)v);
	} else if (strcmp(sub, "seed") == 0) {
		if (nargs != 1) {
			td_admin_error(out, "usage: inject seed N");
			return;
		}
		if (number_arg(out, "inject seed", args[0], 0, UINT64_MAX, &v))
			return;
		td_inject_set_seed(inj, v);
	} else if (strcmp(sub, "clear") == 0 || strcmp(sub, "list") == 0) {
		if (nargs) {
			td_admin_error(out, "usage: inject %s", sub);
			return;
		}
		if (sub[0] == 'c')
			td_inject_clear(inj);
	} else {
		td_admin_error(out, "inject: unknown fault \"%.32s\" (error, every, hang, latency, "
				    "seed, clear, list)",
			       sub);
		return;
	}
	if (r == -ENOSPC) {
		td_admin_error(out, "inject: too many rules (at most %d; inject clear)",
			       TD_INJECT_MAX_RULES);
		return;
	}
	if (r) {
		td_admin_error(out, "inject %s: %s", sub, strerror(-r));
		return;
	}
	inject_rules(out, td_admin_ok(out), inj);
}

static void cmd_powerfail(struct td_admin *a, const struct td_admin_request *req,
			  struct td_admin_reply *out)
{
	struct json_object *o;
	static const char *const keys[] = { "keep", "seed" };
	const char *val[2];
	struct td_powerfail_result r;
	struct td_drive_status ds;
	uint64_t keep = 0;
	uint64_t seed = td_inject_seed(td_drive_inject(a->p.drive));
	char err[256];

	if (td_admin_kv(req->argv, req->argc, keys, 2, val, err, sizeof(err))) {
		td_admin_error(out, "powerfail: %s", err);
		return;
	}
	if ((val[0] && number_arg(out, "powerfail: keep", val[0], 0, 100, &keep)) ||
	    (val[1] && number_arg(out, "powerfail: seed", val[1], 0, UINT64_MAX, &seed)))
		return;
	int ret = td_drive_powerfail(a->p.drive, (unsigned int)keep, seed, &r);

	if (ret == -EOPNOTSUPP) {
		td_drive_get_status(a->p.drive, &ds);
		td_admin_error(out, "powerfail: needs write_cache = volatile (this drive is %s)",
			       td_write_cache_name(ds.write_cache));
		return;
	}
	if (ret) {
		td_admin_error(out, "powerfail: %s", strerror(-ret));
		return;
	}
	td_notice("powerfail: lost %llu writes (%llu sectors), kept %llu writes (%llu sectors), "
		  "keep=%llu%% seed=%llu",
		  (unsigned long long)r.lost_writes, (unsigned long long)r.lost_sectors,
		  (unsigned long long)r.kept_writes, (unsigned long long)r.kept_sectors,
		  (unsigned long long)keep, (unsigned long long)seed);
	o = td_admin_ok(out);
	td_admin_put_u64(out, o, "lost_writes", r.lost_writes);
	td_admin_put_u64(out, o, "lost_sectors", r.lost_sectors);
	td_admin_put_u64(out, o, "kept_writes", r.kept_writes);
	td_admin_put_u64(out, o, "kept_sectors", r.kept_sectors);
	td_admin_put_u64(out, o, "keep", keep);
	td_admin_put_u64(out, o, "seed", seed);
}

static void cmd_trace(struct td_admin *a, const struct td_admin_request *req,
		      struct td_admin_reply *out)
{
	(void)a, (void)req;
	td_admin_put_str(out, td_admin_ok(out), "trace", "started");
}

typedef void (*cmd_fn)(struct td_admin *a, const struct td_admin_request *req,
		       struct td_admin_reply *out);

/* Handlers, in the order of td_admin_commands[]. */
static const cmd_fn handlers[] = {
	cmd_help,     cmd_status, cmd_stats,  cmd_tags,	    cmd_reset,
	cmd_elevator, cmd_depth,  cmd_inject, cmd_powerfail, cmd_trace,
};

enum td_admin_result td_admin_execute(struct td_admin *a, const struct td_admin_request *req,
				      struct td_admin_reply *out)
{
	size_t i = (size_t)(req->cmd - td_admin_commands);

	_Static_assert(TD_ARRAY_SIZE(handlers) == TD_ARRAY_SIZE(td_admin_commands),
		       "one handler per command");
	handlers[i](a, req, out);
	return handlers[i] == cmd_trace ? TD_ADMIN_TRACE : TD_ADMIN_REPLY;
}
