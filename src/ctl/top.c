// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * top.c - tagdiskctl's repeating commands (ctl_int.h): `top` (and
 * `status -i`) repeat `status`, `stats -i` prints the rates between
 * successive `stats` replies, and `iostat` derives iostat -x rows from them.
 *
 * Each loop keeps its own schedule on CLOCK_MONOTONIC (next += interval), so
 * a slow reply does not push the later ones back, and sleeps with the stop
 * signals open: Ctrl-C between two reports ends the program with status 0.
 */
#include <stdio.h>
#include <time.h>
#include "common/jsonc.h"
#include "ctl/ctl_format.h"
#include "ctl/ctl_int.h"

/* iostat prints its header again after this many rows. */
#define IOSTAT_HEADER_EVERY 20

/* `top`, `status -i`: the status block again every interval. */
int td_ctl_run_top(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	double interval = ctl->interval_s > 0 ? ctl->interval_s : 1;
	struct timespec next;
	unsigned long i;

	(void)cmd, (void)argc, (void)argv;
	td_ctl_catch_stop_signals();
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 0; !ctl->count || i < ctl->count; i++) {
		struct json_object *reply;
		int r;

		if (i) {
			td_ctl_timespec_add(&next, interval);
			if (td_ctl_sleep_until(&next))
				return TD_CTL_STOP;
		}
		r = td_ctl_call(ctl, "status", true, &reply);
		if (r)
			return r;
		if (!ctl->json) {
			if (ctl->stdout_tty)
				printf("\033[H\033[Jtagdiskctl top: %s every %g s "
				       "(Ctrl-C quits)\n\n",
				       ctl->conn.path, interval);
			else if (i)
				putchar('\n');
			td_ctl_print_status(reply);
		}
		json_object_put(reply);
		r = td_ctl_flush_stdout();
		if (r)
			return r;
	}
	return TD_CTL_OK;
}

/* `stats -i`: per-op rates from successive stats replies, the first since the start. */
static int run_stats_rates(struct td_ctl *ctl)
{
	double interval = ctl->interval_s > 0 ? ctl->interval_s : 1;
	struct json_object *prev = NULL;
	struct timespec next;
	unsigned long i;
	int r = TD_CTL_OK;

	td_ctl_catch_stop_signals();
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 0; !ctl->count || i < ctl->count; i++) {
		struct json_object *cur;

		if (i) {
			td_ctl_timespec_add(&next, interval);
			r = td_ctl_sleep_until(&next);
			if (r)
				break;
		}
		r = td_ctl_call(ctl, "stats", true, &cur);
		if (r)
			break;
		if (!ctl->json) {
			if (i)
				putchar('\n');
			td_ctl_print_stats_rates(cur, prev);
		}
		json_object_put(prev);
		prev = cur;
		r = td_ctl_flush_stdout();
		if (r)
			break;
	}
	json_object_put(prev);
	return r;
}

int td_ctl_run_status(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	if (ctl->interval_s > 0 || ctl->count)
		return td_ctl_run_top(ctl, cmd, argc, argv);
	return td_ctl_run_simple(ctl, cmd, argc, argv);
}

int td_ctl_run_stats(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	if (ctl->interval_s > 0 || ctl->count)
		return run_stats_rates(ctl);
	return td_ctl_run_simple(ctl, cmd, argc, argv);
}

/* Read a `stats` reply into @s. Return: false when it has no usable sysfs_stat. */
static bool iostat_sample(struct json_object *reply, struct td_ctl_iostat_sample *s)
{
	struct json_object *stat = td_jsonc_get(reply, "/sysfs_stat");
	size_t i;

	if (!json_object_is_type(stat, json_type_array) ||
	    json_object_array_length(stat) < TD_CTL_SYSFS_FIELDS)
		return false;
	s->uptime_us = td_ctl_get_u64(reply, "/uptime_us");
	for (i = 0; i < TD_CTL_SYSFS_FIELDS; i++)
		s->stat[i] = td_jsonc_as_u64(json_object_array_get_idx(stat, i), 0);
	return true;
}

/*
 * Keep INTERVAL and COUNT as the interval and count. Like iostat(1), no
 * INTERVAL means one report; INTERVAL alone, reports until interrupted.
 * Return: TD_CTL_OK or TD_CTL_USAGE.
 */
int td_ctl_check_iostat(struct td_ctl *ctl, int argc, char **argv)
{
	ctl->interval_s = 1;
	ctl->count = argc > 1 ? 0 : 1;
	if (argc > 1 && !td_ctl_parse_seconds(argv[1], &ctl->interval_s)) {
		fprintf(stderr, "tagdiskctl: iostat: INTERVAL \"%s\" is not a positive number of "
				"seconds\n",
			argv[1]);
		return TD_CTL_USAGE;
	}
	if (argc > 2 && !td_ctl_parse_count(argv[2], &ctl->count)) {
		fprintf(stderr, "tagdiskctl: iostat: COUNT \"%s\" is not a positive integer\n",
			argv[2]);
		return TD_CTL_USAGE;
	}
	return TD_CTL_OK;
}

int td_ctl_run_iostat(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	struct td_ctl_iostat_sample samples[2];
	struct td_ctl_iostat_sample *prev = NULL;
	double interval = ctl->interval_s;
	unsigned long count = ctl->count;
	struct timespec next;
	unsigned long i;

	(void)cmd, (void)argc, (void)argv;
	td_ctl_catch_stop_signals();
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 0; !count || i < count; i++) {
		struct td_ctl_iostat_sample *cur = &samples[i % 2];
		struct json_object *stats;
		struct json_object *status;
		struct td_ctl_iostat io;
		uint64_t tags;
		bool usable;
		int r;

		if (i) {
			td_ctl_timespec_add(&next, interval);
			if (td_ctl_sleep_until(&next))
				return TD_CTL_STOP;
		}
		r = td_ctl_call(ctl, "stats", false, &stats);
		if (r)
			return r;
		usable = iostat_sample(stats, cur);
		json_object_put(stats);
		if (!usable) {
			fprintf(stderr, "tagdiskctl: bad reply from the daemon (stats without "
					"sysfs_stat)\n");
			return TD_CTL_REFUSED;
		}
		r = td_ctl_call(ctl, "status", false, &status);
		if (r)
			return r;
		tags = td_ctl_get_u64(status, "/tags_in_use");
		json_object_put(status);

		td_ctl_iostat_compute(prev, cur, &io);
		if (ctl->json)
			td_ctl_print_iostat_json(&io, tags);
		else
			td_ctl_print_iostat_row(&io, tags, i % IOSTAT_HEADER_EVERY == 0);
		r = td_ctl_flush_stdout();
		if (r)
			return r;
		prev = cur;
	}
	return TD_CTL_OK;
}

