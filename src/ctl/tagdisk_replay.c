// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdisk_replay.c - tagdisk-replay's main(): the options, which are those of
 * xfstests' replay-log plus --crash-states and --seed (docs/tagdisk-replay.8);
 * the work is in replay.c and its parts (replay_int.h).
 *
 * Exit status: 0 done, 1 a check failed, 2 bad usage or input (nothing
 * written to the target), 3 an I/O error while replaying.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctl/replay.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

enum {
	OPT_LOG = 0x100,
	OPT_REPLAY,
	OPT_LIMIT,
	OPT_START_ENTRY,
	OPT_START_MARK,
	OPT_END_MARK,
	OPT_NEXT_FLUSH,
	OPT_NEXT_FUA,
	OPT_FIND,
	OPT_NUM_ENTRIES,
	OPT_NO_DISCARD,
	OPT_FSCK,
	OPT_CHECK,
	OPT_START_SECTOR,
	OPT_END_SECTOR,
	OPT_CRASH_STATES,
	OPT_SEED,
};

static const struct option options[] = {
	{ "log", required_argument, NULL, OPT_LOG },
	{ "replay", required_argument, NULL, OPT_REPLAY },
	{ "to", required_argument, NULL, OPT_REPLAY },
	{ "limit", required_argument, NULL, OPT_LIMIT },
	{ "start-entry", required_argument, NULL, OPT_START_ENTRY },
	{ "start-mark", required_argument, NULL, OPT_START_MARK },
	{ "end-mark", required_argument, NULL, OPT_END_MARK },
	{ "next-flush", no_argument, NULL, OPT_NEXT_FLUSH },
	{ "next-fua", no_argument, NULL, OPT_NEXT_FUA },
	{ "find", no_argument, NULL, OPT_FIND },
	{ "num-entries", no_argument, NULL, OPT_NUM_ENTRIES },
	{ "no-discard", no_argument, NULL, OPT_NO_DISCARD },
	{ "fsck", required_argument, NULL, OPT_FSCK },
	{ "check", required_argument, NULL, OPT_CHECK },
	{ "start-sector", required_argument, NULL, OPT_START_SECTOR },
	{ "end-sector", required_argument, NULL, OPT_END_SECTOR },
	{ "crash-states", required_argument, NULL, OPT_CRASH_STATES },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void usage(void)
{
	printf("Usage: tagdisk-replay --log FILE [--replay TARGET] [OPTIONS]\n"
	       "\n"
	       "Rebuild a disk from a write log (tagdiskd's, or dm-log-writes') as it was at\n"
	       "any entry, mark, flush or FUA write, checking each state on the way, and crash\n"
	       "states inside a flush epoch. The options are xfstests' replay-log's.\n"
	       "\n"
	       "  --log FILE             the write log (required)\n"
	       "  --replay, --to TARGET  the image file or block device to replay onto; it must\n"
	       "                         hold the disk as it was when the first entry replayed\n"
	       "                         was logged. Without it: the log's summary (-v: entries)\n"
	       "  --limit N              replay N entries\n"
	       "  --start-entry N        start at entry N (the first is 0)\n"
	       "  --start-mark NAME      start after mark NAME\n"
	       "  --end-mark NAME        replay up to and including mark NAME\n"
	       "  --next-flush           replay up to and including the next flush\n"
	       "  --next-fua             replay up to and including the next FUA write\n"
	       "  --find                 print ENTRY@SECTOR of the entry the bounds above stop at\n"
	       "  --num-entries          print the number of entries in the log\n"
	       "  --no-discard           do not replay discards\n"
	       "  --fsck CMD             the check command, run by sh -c on each state checked\n"
	       "  --check flush|fua|mark|N\n"
	       "                         check after each flush, FUA write or mark, or every N\n"
	       "                         entries; stop at the first state that fails\n"
	       "  --crash-states K       check up to K crash states in each flush epoch: subsets\n"
	       "                         of its writes a volatile cache may have kept\n"
	       "  --seed N               seed of the crash states' choices (default 1)\n"
	       "  --start-sector S, --end-sector S\n"
	       "                         replay only entries touching sectors S..E\n"
	       "  -v, --verbose          print each entry replayed (twice: skipped ones too)\n"
	       "  -h, --help             show this help\n"
	       "  -V, --version          show the version\n"
	       "\n"
	       "The check command sees TD_REPLAY_TARGET, TD_REPLAY_ENTRY, TD_REPLAY_FLUSHES,\n"
	       "TD_REPLAY_MARK and TD_REPLAY_STATE in its environment.\n"
	       "\n"
	       "Exit status: 0 done, 1 a check failed, 2 bad usage or input (nothing written),\n"
	       "3 an I/O error while replaying.\n");
}

/* A number as replay-log takes one (decimal, 0x hex or 0 octal), whole. */
static bool number(const char *opt, const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	if (*s == '-' || *s == '+' || !*s)
		goto bad;
	*v = strtoull(s, &end, 0);
	if (errno || *end)
		goto bad;
	return true;
bad:
	fprintf(stderr, "tagdisk-replay: %s \"%s\": not a number\n", opt, s);
	return false;
}

int main(int argc, char **argv)
{
	struct td_replay_opts o;
	uint64_t v;
	int c;

	td_replay_opts_default(&o);
	while ((c = getopt_long(argc, argv, "vhV", options, NULL)) != -1) {
		switch (c) {
		case OPT_LOG:
			o.log = optarg;
			break;
		case OPT_REPLAY:
			o.target = optarg;
			break;
		case OPT_LIMIT:
			if (!number("--limit", optarg, &o.limit))
				return TD_REPLAY_BAD_INPUT;
			break;
		case OPT_START_ENTRY:
			if (!number("--start-entry", optarg, &o.start_entry))
				return TD_REPLAY_BAD_INPUT;
			break;
		case OPT_START_MARK:
			o.start_mark = optarg;
			break;
		case OPT_END_MARK:
			o.end_mark = optarg;
			break;
		case OPT_NEXT_FLUSH:
			o.next_flush = true;
			break;
		case OPT_NEXT_FUA:
			o.next_fua = true;
			break;
		case OPT_FIND:
			o.find = true;
			break;
		case OPT_NUM_ENTRIES:
			o.num_entries = true;
			break;
		case OPT_NO_DISCARD:
			o.no_discard = true;
			break;
		case OPT_FSCK:
			o.fsck = optarg;
			break;
		case OPT_CHECK:
			if (strcmp(optarg, "flush") == 0) {
				o.check = TD_REPLAY_CHECK_FLUSH;
			} else if (strcmp(optarg, "fua") == 0) {
				o.check = TD_REPLAY_CHECK_FUA;
			} else if (strcmp(optarg, "mark") == 0) {
				o.check = TD_REPLAY_CHECK_MARK;
			} else {
				if (!number("--check", optarg, &o.check_every))
					return TD_REPLAY_BAD_INPUT;
				o.check = TD_REPLAY_CHECK_EVERY;
			}
			break;
		case OPT_START_SECTOR:
			if (!number("--start-sector", optarg, &o.start_sector))
				return TD_REPLAY_BAD_INPUT;
			break;
		case OPT_END_SECTOR:
			if (!number("--end-sector", optarg, &o.end_sector))
				return TD_REPLAY_BAD_INPUT;
			break;
		case OPT_CRASH_STATES:
			if (!number("--crash-states", optarg, &v))
				return TD_REPLAY_BAD_INPUT;
			if (v < 1 || v > 1000000) {
				fprintf(stderr, "tagdisk-replay: --crash-states %s: 1..1000000\n", optarg);
				return TD_REPLAY_BAD_INPUT;
			}
			o.crash_states = (unsigned int)v;
			break;
		case OPT_SEED:
			if (!number("--seed", optarg, &o.seed))
				return TD_REPLAY_BAD_INPUT;
			break;
		case 'v':
			o.verbose++;
			break;
		case 'h':
			usage();
			return 0;
		case 'V':
			printf("tagdisk-replay %s\n", TD_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try 'tagdisk-replay --help' for more information.\n");
			return TD_REPLAY_BAD_INPUT;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tagdisk-replay: unexpected argument \"%s\"\n", argv[optind]);
		return TD_REPLAY_BAD_INPUT;
	}
	if (!o.log) {
		fprintf(stderr, "tagdisk-replay: --log FILE is required (try --help)\n");
		return TD_REPLAY_BAD_INPUT;
	}
	return td_replay_run(&o);
}
