// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * admin_cmd.c - the admin commands: parsing, the table, dispatch, and the
 * commands that change something (reset, elevator, depth, inject, powerfail,
 * trace). The reports (status, stats, tags) are in admin_report.c.
 *
 * The write log's commands (log, mark) hand the engine's log (tagdisk/wlog.h)
 * its file and its marks; status shows it through td_admin_put_wlog().
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
#include <sys/stat.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/log.h"
#include "common/suggest.h"
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
#include "tagdisk/trace.h"
#include "tagdisk/wcache.h"
#include "tagdisk/wlog.h"

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
	/* The usage stays "trace": clients match the refusal of `trace now` to it. */
	{ "trace", "trace",
	  "turn this connection into a live stream of block-layer events; arguments: "
	  "[blktrace] [buffer_kib=KIB] [buffers=N]",
	  0, 3 },
	{ "restart", "restart",
	  "re-execute the daemon in place (new code included), keeping the mount: drain, write "
	  "back, hand the connection over",
	  0, 0 },
	{ "log", "log [start FILE | stop]",
	  "the write log: show it; start recording every write, discard, flush and FUA into FILE "
	  "(an absolute path) in dm-log-writes' format; stop",
	  0, 2 },
	{ "mark", "mark NAME", "add a mark entry NAME to the write log, as dm-log-writes' mark message",
	  1, 1 },
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
		const char *names[32];
		char near[160];
		size_t n = TD_MIN(td_admin_nr_commands, TD_ARRAY_SIZE(names));

		for (size_t i = 0; i < n; i++)
			names[i] = td_admin_commands[i].name;
		if (td_suggest(name, names, n, near, sizeof(near)))
			snprintf(err, errlen, "unknown command \"%.64s\" (did you mean %s?)", name,
				 near);
		else
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

bool td_admin_queued_mode(struct td_admin *a)
{
	return td_queue_mode(a->p.q) != TD_MODE_BIO;
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

static void cmd_reset(struct td_admin *a, const struct td_admin_request *req,
		      struct td_admin_reply *out)
{
	(void)req;
	if (!td_admin_queued_mode(a)) {
		td_admin_error(out, "reset: mode = bio has no queue or tags to reset");
		return;
	}
	unsigned int n = td_queue_reset(a->p.q, false);

	td_admin_put_u64(out, td_admin_ok(out), "requeued", n);
}

/* The schedulers of @mode's queues (mq: none, mq-deadline; else noop, deadline). */
static void elevator_names(struct td_admin_reply *out, struct json_object *parent,
			   enum td_queue_mode mode)
{
	struct json_object *arr;
	char names[256];
	char *save = NULL;

	td_elv_names_for(names, sizeof(names), mode == TD_MODE_MQ);
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
		elevator_names(out, o, qs.mode);
		return;
	}
	const char *name = req->argv[0];
	char names[256];

	if (!td_admin_queued_mode(a)) {
		td_admin_error(out, "elevator: mode = bio has no elevator");
		return;
	}
	if (!td_elv_find(name)) {
		td_elv_names_for(names, sizeof(names), qs.mode == TD_MODE_MQ);
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
	/* The name in effect: each mode takes the other's names for their counterparts. */
	struct td_queue_status now;

	td_queue_get_status(a->p.q, &now);
	o = td_admin_ok(out);
	td_admin_put_str(out, o, "elevator", now.elevator);
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
		td_admin_put_u64(out, o, "depth", td_admin_queued_mode(a) ? cur : 0);
		td_admin_put_u64(out, o, "max", TD_TAG_DEPTH_MAX);
		return;
	}
	if (!td_admin_queued_mode(a)) {
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

		if (!td_admin_queued_mode(a)) {
			td_admin_error(out, "inject hang: needs mode = rq or mq (a hung bio would block "
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
	/* The log has what the drive acknowledged: say where the disk stopped having it. */
	uint64_t entry;

	if (a->p.wlog && td_wlog_mark(a->p.wlog, TD_ADMIN_POWERFAIL_MARK, &entry) == 0)
		td_admin_put_u64(out, o, "log_entry", entry);
}

/*
 * trace [blktrace] [buffer_kib=KIB] [buffers=N]: like blktrace's -b and -n, each emitting
 * thread gets buffers x buffer_kib of ring, at most 64 MiB asked (the ring holds a power of
 * two events, at most TD_TRACE_RING_EVENTS_MAX). Defaults: blktrace's own, 4 x 512 KiB, for
 * the records, which a client only copies; 2 x 64 KiB (4096 events) for the JSON lines,
 * which are slower to make and read than the disk is to fill: a reader that cannot keep up
 * learns so soon, rather than after 64 MiB per thread. All streams share [admin]
 * trace_budget: sizes asked for are refused when they do not fit, the defaults shrink to
 * fit, down to TRACE_MIN_RING_EVENTS per thread.
 */
#define TRACE_BUFFER_KIB_DEFAULT      512
#define TRACE_BUFFERS_DEFAULT	      4
#define TRACE_JSON_BUFFER_KIB_DEFAULT 64
#define TRACE_JSON_BUFFERS_DEFAULT    2
#define TRACE_RING_KIB_MAX	      (64U << 10)
#define TRACE_MIN_RING_EVENTS	      1024

static void cmd_trace(struct td_admin *a, const struct td_admin_request *req,
		      struct td_admin_reply *out)
{
	static const char *const keys[] = { "buffer_kib", "buffers" };
	const char *val[2];
	char *const *argv = req->argv;
	unsigned int argc = req->argc;
	uint64_t kib = TRACE_BUFFER_KIB_DEFAULT;
	uint64_t nbufs = TRACE_BUFFERS_DEFAULT;
	bool blktrace = false;
	struct json_object *o;
	char err[256];

	if (argc && strcmp(argv[0], "blktrace") == 0) {
		blktrace = true;
		argv++;
		argc--;
	} else {
		kib = TRACE_JSON_BUFFER_KIB_DEFAULT;
		nbufs = TRACE_JSON_BUFFERS_DEFAULT;
	}
	for (unsigned int i = 0; i < argc; i++) {
		if (!strchr(argv[i], '=')) {
			td_admin_error(out, "usage: %s", req->cmd->usage);
			return;
		}
	}
	if (td_admin_kv(argv, argc, keys, 2, val, err, sizeof(err))) {
		td_admin_error(out, "trace: %s", err);
		return;
	}
	if ((val[0] && number_arg(out, "trace: buffer_kib", val[0], 1, TRACE_RING_KIB_MAX, &kib)) ||
	    (val[1] && number_arg(out, "trace: buffers", val[1], 1, 1024, &nbufs)))
		return;
	if (kib * nbufs > TRACE_RING_KIB_MAX) {
		td_admin_error(out, "trace: buffer_kib x buffers is %llu KiB, over %u KiB",
			       (unsigned long long)(kib * nbufs), TRACE_RING_KIB_MAX);
		return;
	}
	a->trace_req = (struct td_admin_trace_req){
		.start = true,
		.blktrace = blktrace,
		/* The JSON stream's reply stays what clients before these arguments know. */
		.details = blktrace || val[0] || val[1],
		.ring_events = (size_t)(kib * nbufs * 1024 / sizeof(struct td_trace_event)),
		.min_ring_events = val[0] || val[1] ? 0 : TRACE_MIN_RING_EVENTS,
	};
	o = td_admin_ok(out);
	td_admin_put_str(out, o, "trace", "started");
	if (a->trace_req.details) {
		td_admin_put_str(out, o, "format", blktrace ? "blktrace" : "json");
		td_admin_put_u64(out, o, "buffer_kib", kib);
		td_admin_put_u64(out, o, "buffers", nbufs);
	}
}

/*
 * Refuse a log file the daemon must not write: on the disk's own mount (each
 * write would wait for itself) or the image. Return: true when refused.
 */
static bool log_path_refused(struct td_admin *a, const char *path, struct td_admin_reply *out)
{
	const char *slash = strrchr(path, '/');
	char *dir = strndup(path, slash > path ? (size_t)(slash - path) : 1);
	struct stat dst, mst, st;
	bool refused = false;

	if (!dir) {
		td_admin_error(out, "out of memory");
		return true;
	}
	pthread_mutex_lock(a->p.config_lock);
	char *mnt = strdup(a->p.config->mountpoint);

	pthread_mutex_unlock(a->p.config_lock);
	if (stat(dir, &dst) < 0) {
		td_admin_error(out, "log start: directory \"%s\": %s", dir, strerror(errno));
		refused = true;
	} else if (mnt && stat(mnt, &mst) == 0 && mst.st_dev == dst.st_dev) {
		td_admin_error(out, "log start: \"%s\" is on the disk's own mount (%s): the log "
				    "would be written through the disk it records", path, mnt);
		refused = true;
	} else if ((!a->p.backend || strcmp(a->p.backend, "file") == 0) && stat(path, &st) == 0 &&
		   stat(a->image, &mst) == 0 && st.st_dev == mst.st_dev && st.st_ino == mst.st_ino) {
		td_admin_error(out, "log start: \"%s\" is the disk's image", path);
		refused = true;
	}
	free(mnt);
	free(dir);
	return refused;
}

static void cmd_log(struct td_admin *a, const struct td_admin_request *req,
		    struct td_admin_reply *out)
{
	struct td_wlog_status *st;
	const char *sub = req->argc ? req->argv[0] : NULL;
	char err[PATH_MAX + 128];
	int r;

	if (!a->p.wlog) {
		td_admin_error(out, "log: this daemon has no write log");
		return;
	}
	if (!sub) {
		td_admin_put_wlog(a, out, td_admin_ok(out), "log");
		return;
	}
	if (strcmp(sub, "start") == 0 && req->argc == 2) {
		const char *path = req->argv[1];

		if (path[0] != '/') {
			td_admin_error(out, "log start: \"%.256s\" is not an absolute path (the daemon "
					    "runs in /)", path);
			return;
		}
		if (log_path_refused(a, path, out))
			return;
		r = td_wlog_start(a->p.wlog, path, err, sizeof(err));
		if (r) {
			td_admin_error(out, "log start: %s", err);
			return;
		}
		td_admin_put_wlog(a, out, td_admin_ok(out), "log");
		return;
	}
	if (strcmp(sub, "stop") != 0 || req->argc != 1) {
		td_admin_error(out, "usage: %s", req->cmd->usage);
		return;
	}
	st = malloc(sizeof(*st));
	if (!st) {
		td_admin_error(out, "out of memory");
		return;
	}
	r = td_wlog_stop(a->p.wlog, st);
	if (r == -ENOENT) {
		td_admin_error(out, "log stop: no write log is recording");
	} else if (r) {
		td_admin_error(out, "log stop: \"%s\" failed: %s; closed, with its first %llu entries "
				    "valid",
			       st->path, st->error_text, (unsigned long long)st->entries_valid);
	} else {
		struct json_object *o = td_admin_ok(out);

		td_admin_put_str(out, o, "path", st->path);
		td_admin_put_u64(out, o, "entries", st->entries_valid);
		td_admin_put_u64(out, o, "bytes", st->bytes);
	}
	free(st);
}

static void cmd_mark(struct td_admin *a, const struct td_admin_request *req,
		     struct td_admin_reply *out)
{
	const char *name = req->argv[0];
	struct td_wlog_status st;
	uint64_t entry;
	int r = a->p.wlog ? td_wlog_mark(a->p.wlog, name, &entry) : -ENOENT;

	if (r == -ENOENT) {
		td_admin_error(out, "mark: no write log is recording (log start FILE first)");
		return;
	}
	if (r == -EINVAL) {
		td_wlog_get_status(a->p.wlog, &st);
		td_admin_error(out, "mark: a name is 1..%zu bytes", td_wlog_mark_max(st.sectorsize));
		return;
	}
	if (r) {
		td_wlog_get_status(a->p.wlog, &st);
		td_admin_error(out, "mark: %s", st.error_text);
		return;
	}
	struct json_object *o = td_admin_ok(out);

	td_admin_put_str(out, o, "mark", name);
	td_admin_put_u64(out, o, "entry", entry);
}

static void cmd_restart(struct td_admin *a, const struct td_admin_request *req,
			struct td_admin_reply *out)
{
	char err[256];
	int ret;

	(void)req;
	if (!a->p.restart) {
		td_admin_error(out, "restart: not available in this process");
		return;
	}
	ret = a->p.restart(a->p.restart_arg, err, sizeof(err));
	if (ret) {
		td_admin_error(out, "%s", err);
		return;
	}
	struct json_object *o = td_admin_ok(out);

	td_admin_put_str(out, o, "restart", "started");
	td_admin_put_u64(out, o, "pid", (uint64_t)getpid());
}

typedef void (*cmd_fn)(struct td_admin *a, const struct td_admin_request *req,
		       struct td_admin_reply *out);

/* Handlers, in the order of td_admin_commands[]. */
static const cmd_fn handlers[] = {
	cmd_help,     td_admin_cmd_status, td_admin_cmd_stats, td_admin_cmd_tags, cmd_reset,
	cmd_elevator, cmd_depth,	   cmd_inject,	       cmd_powerfail,	  cmd_trace,
	cmd_restart,
	cmd_log,      cmd_mark,
};

enum td_admin_result td_admin_execute(struct td_admin *a, const struct td_admin_request *req,
				      struct td_admin_reply *out)
{
	size_t i = (size_t)(req->cmd - td_admin_commands);

	_Static_assert(TD_ARRAY_SIZE(handlers) == TD_ARRAY_SIZE(td_admin_commands),
		       "one handler per command");
	a->trace_req.start = false;
	handlers[i](a, req, out);
	/* A refused `trace` leaves the connection taking commands. */
	return a->trace_req.start ? TD_ADMIN_TRACE : TD_ADMIN_REPLY;
}
