// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * admin_report.c - the admin commands that only report: status, stats and
 * tags, and the samples of the totals that status turns into rates.
 *
 * Field names and units follow the admin contract (docs/protocol.md): sizes
 * in bytes, sectors of 512 bytes, times in microseconds unless the key ends
 * in _ms or _s. The commands that change something are in admin_cmd.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/log.h"
#include "daemon/admin_int.h"
#include "daemon/config.h"
#include "daemon/frontend.h"
#include "daemon/mounts.h"
#include "tagdisk/cdb.h"
#include "tagdisk/drive.h"
#include "tagdisk/inject.h"
#include "tagdisk/queue.h"
#include "tagdisk/stats.h"
#include "tagdisk/tag.h"
#include "tagdisk/trace.h"
#include "tagdisk/wcache.h"
#include "tagdisk/wlog.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

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

void td_admin_put_wlog(struct td_admin *a, struct td_admin_reply *out, struct json_object *parent,
		       const char *key)
{
	struct td_wlog_status *st = malloc(sizeof(*st));
	struct json_object *o = td_admin_put_object(out, parent, key);

	if (!st) {
		out->failed = true;
		return;
	}
	if (a->p.wlog)
		td_wlog_get_status(a->p.wlog, st);
	else
		memset(st, 0, sizeof(*st));
	td_admin_put_str(out, o, "state", td_wlog_state_name(st->state));
	td_admin_put_str(out, o, "path", st->state == TD_WLOG_OFF ? NULL : st->path);
	td_admin_put_u64(out, o, "entries", st->entries);
	td_admin_put_u64(out, o, "bytes", st->bytes);
	td_admin_put_u64(out, o, "writes", st->writes);
	td_admin_put_u64(out, o, "discards", st->discards);
	td_admin_put_u64(out, o, "flushes", st->flushes);
	td_admin_put_u64(out, o, "fua", st->fua);
	td_admin_put_u64(out, o, "marks", st->marks);
	td_admin_put_u64(out, o, "sector_size", st->sectorsize);
	if (st->state == TD_WLOG_FAILED)
		td_admin_put_str(out, o, "error", st->error_text);
	free(st);
}

/* How many stuck calls status lists: the oldest ones; stale_calls counts them all. */
#define STUCK_CALLS_MAX 32

static int cmp_call_age(const void *a, const void *b)
{
	const struct td_drive_call *x = a;
	const struct td_drive_call *y = b;

	if (x->age_us != y->age_us)
		return x->age_us > y->age_us ? -1 : 1;
	return x->tid - y->tid;
}

/* The "stuck_calls" array of @o: each stale backend call, oldest first. */
static void stuck_calls(struct td_admin *a, struct td_admin_reply *out, struct json_object *o)
{
	struct td_drive_call calls[STUCK_CALLS_MAX];
	unsigned int n = td_drive_get_stale_calls(a->p.drive, calls, STUCK_CALLS_MAX);
	struct json_object *arr = td_admin_put_array(out, o, "stuck_calls");

	n = TD_MIN(n, (unsigned int)STUCK_CALLS_MAX);
	qsort(calls, n, sizeof(calls[0]), cmp_call_age);
	for (unsigned int i = 0; i < n; i++) {
		struct json_object *c = td_admin_append_object(out, arr);

		td_admin_put_i64(out, c, "tid", calls[i].tid);
		td_admin_put_str(out, c, "op", td_op_name(calls[i].op));
		td_admin_put_u64(out, c, "sector", calls[i].sector);
		td_admin_put_u64(out, c, "sectors", calls[i].nr_sectors);
		td_admin_put_u64(out, c, "age_us", calls[i].age_us);
	}
}

/*
 * The FUSE requests that wait in the transport, not yet in the block layer:
 * in the kernel's queues for a FUSE thread, or in an io_uring ring for its
 * thread. That is the kernel's count of requests outstanding on the
 * connection (fusectl's "waiting": queued, being processed or answered)
 * minus the bios the queue holds. Needs fusectl mounted somewhere (systemd
 * mounts it at /sys/fs/fuse/connections). Return: false when unknown.
 */
static bool transport_waiting(struct td_admin *a, uint64_t *out)
{
	char mountpoint[PATH_MAX] = "";
	char ctl[PATH_MAX], path[PATH_MAX + 64];
	struct td_mount_info mi;
	unsigned long long waiting;
	bool ok = false;
	FILE *f;

	pthread_mutex_lock(&a->fe_lock);
	if (a->disk_path)
		snprintf(mountpoint, sizeof(mountpoint), "%s", a->disk_path);
	pthread_mutex_unlock(&a->fe_lock);
	/* The disk file is MOUNTPOINT/NAME. */
	char *slash = strrchr(mountpoint, '/');

	if (!slash)
		return false;
	if (slash == mountpoint)
		slash[1] = '\0'; /* mounted on / */
	else
		*slash = '\0';
	/* From mountinfo: never a look at the disk's own files, which could wait on FUSE. */
	if (td_mount_lookup(mountpoint, &mi) || strncmp(mi.fstype, "fuse", 4) != 0 ||
	    td_mount_find_type("fusectl", ctl, sizeof(ctl)))
		return false;
	/* fusectl names a connection by its device, in the kernel's encoding. */
	snprintf(path, sizeof(path), "%s/%u/waiting", ctl, mi.major_nr << 20 | mi.minor_nr);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fscanf(f, "%llu", &waiting) == 1) {
		uint64_t engine = td_queue_bios_outstanding(a->p.q);

		*out = waiting > engine ? waiting - engine : 0;
		ok = true;
	}
	fclose(f);
	return ok;
}

void td_admin_cmd_status(struct td_admin *a, const struct td_admin_request *req,
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
	td_admin_put_str(out, o, "backend", a->p.backend ? a->p.backend : "file");
	td_admin_put_str(out, o, "backend_target", a->image);
	td_admin_put_u64(out, o, "size", a->p.image_size);
	pthread_mutex_lock(&a->fe_lock);
	td_admin_put_str(out, o, "disk", a->disk_path ? a->disk_path : "");
	unsigned int opens = a->fe ? td_frontend_open_count(a->fe) : 0;
	unsigned int threads = a->fe ? td_frontend_threads(a->fe, NULL) : 0;
	struct td_fuse_transport_stats ts = { .name = "classic" };

	if (a->fe)
		td_frontend_transport_stats(a->fe, &ts);
	bool recovery = a->recovery, fd_store = a->fd_store;
	uint64_t takeovers = a->takeovers, resent = a->resent;

	pthread_mutex_unlock(&a->fe_lock);
	pthread_mutex_lock(a->p.config_lock);
	td_admin_put_bool(out, o, "read_only", c->read_only);
	td_admin_put_u64(out, o, "logical_block_size", c->logical_block_size);
	pthread_mutex_unlock(a->p.config_lock);
	td_admin_put_str(out, o, "mode",
			 qs.mode == TD_MODE_RQ ? "rq" : qs.mode == TD_MODE_MQ ? "mq" : "bio");
	td_admin_put_str(out, o, "elevator", qs.elevator);
	td_admin_put_u64(out, o, "depth", qs.mode != TD_MODE_BIO ? qs.depth : 0);
	td_admin_put_u64(out, o, "tags_in_use", qs.tags_in_use);
	td_admin_put_u64(out, o, "in_flight", qs.mode != TD_MODE_BIO ? qs.in_flight : s->in_flight);
	td_admin_put_u64(out, o, "queued", qs.queued);
	td_admin_put_u64(out, o, "requests_used", qs.requests_used);
	td_admin_put_u64(out, o, "nr_requests", qs.nr_requests);
	td_admin_put_u64(out, o, "max_sectors", qs.max_sectors);
	if (qs.mode == TD_MODE_MQ) {
		td_admin_put_u64(out, o, "nr_hw_queues", qs.nr_hw_queues);
		struct json_object *hw = td_admin_put_array(out, o, "hctx");

		for (unsigned int i = 0; i < qs.nr_hw_queues; i++) {
			struct td_hctx_status hs;

			if (td_queue_get_hctx_status(a->p.q, i, &hs))
				break;
			struct json_object *h = td_admin_append_object(out, hw);

			td_admin_put_u64(out, h, "hctx", i);
			td_admin_put_u64(out, h, "queued", hs.queued);
			td_admin_put_u64(out, h, "in_flight", hs.in_flight);
			td_admin_put_u64(out, h, "dispatched", hs.dispatched);
			td_admin_put_u64(out, h, "ctx_queued", hs.ctx_queued);
		}
	}
	td_admin_put_u64(out, o, "workers", ds.workers);
	if (a->p.backend && strcmp(a->p.backend, "file")) {
		/* An asynchronous backend: what it has outstanding, left stale by a reset. */
		td_admin_put_u64(out, o, "backend_ops", ds.backend_ops);
		td_admin_put_u64(out, o, "stale_ops", ds.stale_ops);
	}
	/* A hung medium: the backend calls a reset left behind, which fence the drive. */
	td_admin_put_u64(out, o, "stale_calls", ds.stale_calls);
	td_admin_put_u64(out, o, "fences", ds.fences);
	stuck_calls(a, out, o);
	td_admin_put_str(out, o, "model", td_drive_model_name(ds.model));
	td_admin_put_str(out, o, "write_cache", td_write_cache_name(ds.write_cache));
	td_admin_put_u64(out, o, "command_timeout_ms", qs.command_timeout_ms);
	td_admin_put_u64(out, o, "max_retries", qs.max_retries);
	td_admin_put_u64(out, o, "opens", opens);
	td_admin_put_u64(out, o, "fuse_threads", threads);
	td_admin_put_str(out, o, "transport", ts.name);
	td_admin_put_bool(out, o, "recovery", recovery);
	td_admin_put_bool(out, o, "fd_store", fd_store);
	td_admin_put_u64(out, o, "takeovers", takeovers);
	td_admin_put_u64(out, o, "resent", resent);
	if (ts.nr_queues) {
		struct json_object *q = td_admin_put_array(out, o, "uring_requests");

		td_admin_put_u64(out, o, "uring_entries", ts.entries);
		td_admin_put_u64(out, o, "uring_helpers", ts.helpers);
		td_admin_put_u64(out, o, "uring_trims", ts.trims);
		td_admin_put_u64(out, o, "uring_trim_kept", ts.trim_kept);
		for (unsigned int i = 0; i < ts.nr_queues && i < TD_ARRAY_SIZE(ts.queue_requests); i++)
			td_admin_append_u64(out, q, ts.queue_requests[i]);
	}
	uint64_t waiting;

	if (transport_waiting(a, &waiting))
		td_admin_put_u64(out, o, "transport_waiting", waiting);
	else
		td_admin_put_null(out, o, "transport_waiting");
	td_admin_put_u64(out, o, "resets", s->counters[TD_STAT_RESETS]);
	td_admin_put_u64(out, o, "timeouts", s->counters[TD_STAT_TIMEOUTS]);
	uint64_t errors = 0;

	for (int op = 0; op < TD_OP_COUNT; op++)
		errors += s->errors[op];
	td_admin_put_u64(out, o, "errors", errors);
	rate_object(a, out, o, s, now);
	td_admin_put_wlog(a, out, o, "log");
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
	td_admin_put_u64(out, l, "p50", td_stats_percentile_max(h, 0.50, s->max_ns[op]) / 1000);
	td_admin_put_u64(out, l, "p90", td_stats_percentile_max(h, 0.90, s->max_ns[op]) / 1000);
	td_admin_put_u64(out, l, "p99", td_stats_percentile_max(h, 0.99, s->max_ns[op]) / 1000);
	td_admin_put_u64(out, l, "p999", td_stats_percentile_max(h, 0.999, s->max_ns[op]) / 1000);
	td_admin_put_u64(out, l, "max_bucket", max_bucket / 1000);
	td_admin_put_u64(out, l, "max", s->max_ns[op] / 1000);
}

void td_admin_cmd_stats(struct td_admin *a, const struct td_admin_request *req,
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
	td_admin_put_u64(out, o, "trace_dropped", a->p.trace ? td_trace_dropped(a->p.trace) : 0);
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

void td_admin_cmd_tags(struct td_admin *a, const struct td_admin_request *req,
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
	td_admin_put_u64(out, o, "depth", td_admin_queued_mode(a) ? depth : 0);
	td_admin_put_u64(out, o, "in_use", n);
	arr = td_admin_put_array(out, o, "tags");
	for (unsigned int i = 0; i < TD_MIN(n, max); i++) {
		struct json_object *t = td_admin_append_object(out, arr);
		char cdb[64];

		td_cdb_format(tags[i].cmd, tags[i].cmd_len, cdb, sizeof(cdb));
		td_admin_put_i64(out, t, "tag", tags[i].tag);
		if (tags[i].hctx >= 0)
			td_admin_put_i64(out, t, "hctx", tags[i].hctx);
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
