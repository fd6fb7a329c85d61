// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * tagdiskctl.c - the command-line client of tagdiskd's admin socket: its
 * options, its command table, and main().
 *
 *   tagdiskctl [-s SOCKET] [-t SECONDS] [--json] COMMAND [ARGS]
 *
 * Exit status (contract): 0 ok, 1 the daemon said no (or sent a reply that
 * is not a JSON object with "ok"), 2 usage error found here, 3 cannot talk
 * to the daemon (connect failed, no reply in time, connection closed).
 *
 * Most commands are one round trip: the words are joined into one command
 * line and the reply is printed (print.c). The rest reuse the connection
 * (top.c, trace_out.c). A command this tagdiskctl does not know is sent to
 * the daemon as it is, since a newer daemon may know it: the daemon's
 * refusal is then exit 1 with its reason, like any other. Local checks stop
 * only what is surely wrong (wrong argument count for a known command, an
 * option here that is not one, a newline that would smuggle in a second
 * command); the daemon judges the values.
 *
 * Help needs no daemon: COMMAND -h|--help and help COMMAND print the
 * command's usage and details from the table below; help lists the table,
 * then the commands only the daemon's help names. An unknown command gets
 * the commands near it (common/suggest.h); with no daemon to ask, it is a
 * usage error rather than a connection failure.
 *
 * SIGPIPE is ignored; a closed stdout then shows as EPIPE, which ends the
 * program quietly with status 0 (`tagdiskctl trace | head`).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/jsonc.h"
#include "common/suggest.h"
#include "ctl/ctl_format.h"
#include "ctl/ctl_int.h"

/* Longest -t or -i accepted, in seconds: timeouts are kept as an int of milliseconds. */
#define SECONDS_MAX 2000000.0

#define EXIT_STATUS_TEXT                                                                           \
	"Exit status: 0 ok, 1 the daemon refused, 2 usage error, 3 cannot reach the daemon.\n"

static void usage_hint(void)
{
	fprintf(stderr, "Try 'tagdiskctl --help' for more information.\n");
}

bool td_ctl_parse_seconds(const char *s, double *out)
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

bool td_ctl_parse_count(const char *s, unsigned long *out)
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

/* Join @argc words into one command line in @buf. Return: false when over TD_CTL_LINE_MAX. */
static bool join_line(char *buf, size_t len, int argc, char **argv)
{
	size_t o = 0;
	int i;

	for (i = 0; i < argc; i++) {
		size_t n = strlen(argv[i]);

		if (o + (i > 0) + n > TD_CTL_LINE_MAX || o + (i > 0) + n + 1 > len)
			return false;
		if (i)
			buf[o++] = ' ';
		memcpy(buf + o, argv[i], n);
		o += n;
	}
	buf[o] = '\0';
	return true;
}

int td_ctl_run_simple(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	struct json_object *reply;
	char line[TD_CTL_LINE_MAX + 1];
	int r;

	if (!join_line(line, sizeof(line), argc, argv)) {
		fprintf(stderr, "tagdiskctl: command too long (over %d bytes)\n", TD_CTL_LINE_MAX);
		return TD_CTL_USAGE;
	}
	r = td_ctl_call(ctl, line, true, &reply);
	if (r)
		return r;
	if (!ctl->json)
		cmd->print(reply);
	json_object_put(reply);
	return td_ctl_flush_stdout();
}

/* What may follow `trace`; --blktrace and --output are one option. */
static const struct option trace_options[] = {
	{ "blktrace", required_argument, NULL, 'o' },
	{ "output", required_argument, NULL, 'o' },
	{ "stopwatch", required_argument, NULL, 'w' },
	{ "buffer-size", required_argument, NULL, 'b' },
	{ "num-sub-buffers", required_argument, NULL, 'n' },
	{ NULL, 0, NULL, 0 },
};

/* What trace --help and --help say of trace's options, and the letters it prints. */
#define TRACE_OPTIONS                                                                              \
	"  -o, --blktrace, --output FILE\n"                                                        \
	"                          write the events as blktrace binary records to FILE\n"          \
	"                          (\"-\": stdout) instead of printing them. blkparse\n"           \
	"                          reads only files named NAME.blktrace.CPU: name FILE\n"          \
	"                          NAME.blktrace.0 and run `blkparse -i NAME`, or pipe\n"          \
	"                          `-o -` into `blkparse -i -`. For btt, dump first:\n"            \
	"                          `blkparse -i NAME -d NAME.bin` then `btt -i NAME.bin`.\n"       \
	"                          The disk shows as device 259,0\n"                               \
	"  -w, --stopwatch SECONDS stop tracing after SECONDS (also Ctrl-C or SIGTERM;\n"          \
	"                          the file is complete either way)\n"                             \
	"  -b, --buffer-size KIB   the daemon buffers events in COUNT buffers of KIB KiB\n"        \
	"  -n, --num-sub-buffers COUNT\n"                                                          \
	"                          per emitting thread, like blktrace -b and -n\n"                 \
	"                          (default 512 and 4 with -o, else 64 and 2; at most\n"           \
	"                          65536 KiB in all)\n"                                            \
	"With -o, events the daemon lost are counted in the file (blkparse: a\n"                   \
	"message and Skips) and on stderr, and the exit status is 1.\n"

#define REPEAT_OPTIONS                                                                             \
	"  -i, --interval SECONDS  repeat every SECONDS (default 1)\n"                             \
	"  -n, --count COUNT       stop after COUNT reports (default: until Ctrl-C)\n"

static const struct td_ctl_command commands[] = {
	{ .name = "help", .usage = "help [COMMAND]", .max_args = 1,
	  .help = "list the commands, or show one's usage",
	  .details = "Lists the commands of tagdiskctl and of the daemon, each once. Without a\n"
		     "daemon to ask, tagdiskctl's own list (and a note on stderr).\n",
	  .run = td_ctl_run_help },
	{ .name = "status", .usage = "status [-i SECONDS] [-n COUNT]", .repeats = true,
	  .help = "the disk at a glance (-i: again every SECONDS)",
	  .details = REPEAT_OPTIONS, .run = td_ctl_run_status, .print = td_ctl_print_status },
	{ .name = "stats", .usage = "stats [-i SECONDS] [-n COUNT]", .repeats = true,
	  .help = "counters, latencies (-i: rates per interval)",
	  .details = REPEAT_OPTIONS, .run = td_ctl_run_stats, .print = td_ctl_print_stats },
	{ .name = "tags", .usage = "tags", .help = "the outstanding tagged commands, oldest first",
	  .run = td_ctl_run_simple, .print = td_ctl_print_tags },
	{ .name = "reset", .usage = "reset",
	  .help = "invalidate every tag and requeue its request",
	  .run = td_ctl_run_simple, .print = td_ctl_print_reset },
	{ .name = "elevator", .usage = "elevator [NAME]", .max_args = 1,
	  .help = "show the elevator, or drain and switch to NAME",
	  .run = td_ctl_run_simple, .print = td_ctl_print_elevator },
	{ .name = "depth", .usage = "depth [N]", .max_args = 1,
	  .help = "show the tag depth, or resize the tag map",
	  .run = td_ctl_run_simple, .print = td_ctl_print_depth },
	{ .name = "inject",
	  .usage = "inject error op=read|write|any sector=S count=N [times=K] | every N | "
		   "hang [times=K] | latency US | seed N | clear | list",
	  .help = "arm, clear or list faults of the drive",
	  .details = "  error op=read|write|any sector=S count=N [times=K]\n"
		     "                 fail with EIO the next K commands of that kind (every one\n"
		     "                 without times) overlapping the N sectors from S; write\n"
		     "                 covers discard and write zeroes\n"
		     "  every N        fail each command with probability 1/N (seeded: repeatable)\n"
		     "  hang [times=K] the drive holds the next K commands (default 1); mode rq\n"
		     "  latency US     delay every command by US microseconds (0 to 60000000)\n"
		     "  seed N         seed the generator\n"
		     "  clear          disarm everything\n"
		     "  list           show the rules, what fired, and the seed\n",
	  .min_args = 1, .max_args = 5, .run = td_ctl_run_simple, .print = td_ctl_print_inject },
	{ .name = "powerfail", .usage = "powerfail [keep=PCT] [seed=N]", .max_args = 2,
	  .help = "drop unflushed writes (write_cache = volatile)",
	  .run = td_ctl_run_simple, .print = td_ctl_print_powerfail },
	{ .name = "trace", .usage = "trace [-w SECONDS] [-o FILE] [-b KIB] [-n COUNT]",
	  .help = "live block-layer events (-o: for blkparse)",
	  .details = TRACE_OPTIONS "\n" TD_CTL_TRACE_LEGEND,
	  .shortopts = "+:o:w:b:n:", .longopts = trace_options, .run = td_ctl_run_trace },
	{ .name = "iostat", .usage = "iostat [INTERVAL [COUNT]]", .max_args = 2,
	  .help = "iostat -x style rows, once or every INTERVAL",
	  .details = TD_CTL_IOSTAT_LEGEND,
	  .check = td_ctl_check_iostat, .run = td_ctl_run_iostat },
	{ .name = "top", .usage = "top [-i SECONDS] [-n COUNT]", .repeats = true,
	  .help = "the status, refreshed every SECONDS",
	  .details = REPEAT_OPTIONS, .run = td_ctl_run_top },
	{ .name = "restart", .usage = "restart",
	  .help = "re-execute the daemon in place, keeping the mount; wait for the new one",
	  .details = "  The daemon drains, writes back and executes its binary again (new code\n"
		     "  included) with the FUSE connection; prints the new image's pid, version\n"
		     "  and the requests the kernel resent to it. Refused over FUSE io_uring.\n",
	  .run = td_ctl_run_restart },
	{ .name = "log", .usage = "log [start FILE | stop]", .max_args = 2,
	  .help = "the write log: show it, start one into FILE, stop it",
	  .details = "  FILE is an absolute path; the log is in dm-log-writes' format, read by\n"
		     "  tagdisk-replay(8). It records every write, discard, flush and FUA write\n"
		     "  the disk acknowledges from the moment it starts.\n",
	  .run = td_ctl_run_log, .print = td_ctl_print_log },
	{ .name = "mark", .usage = "mark NAME", .min_args = 1, .max_args = 1,
	  .help = "add a mark NAME to the write log; prints its entry number",
	  .run = td_ctl_run_simple, .print = td_ctl_print_mark },
};

/*
 * Any other command: sent as it is, with every word after it as an
 * argument, since a newer daemon may know it; an ok reply is shown member by
 * member, a refusal is exit 1 like any other.
 */
static const struct td_ctl_command other_command = {
	.max_args = UINT_MAX,
	.run = td_ctl_run_simple,
	.print = td_ctl_print_other,
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
	       "                          " TD_CTL_DEFAULT_SOCKET ")\n"
	       "  -t, --timeout SECONDS   wait at most SECONDS for each reply (default %d)\n"
	       "      --json              print the daemon's replies as received\n"
	       "  -i, --interval SECONDS  status, stats, top: repeat every SECONDS (default 1)\n"
	       "  -n, --count COUNT       status, stats, top: stop after COUNT reports\n"
	       "  -h, --help              show this help\n"
	       "  -V, --version           show the version\n"
	       "\n"
	       "Commands:\n",
	       TD_CTL_DEFAULT_TIMEOUT_MS / 1000);
	for (i = 0; i < TD_ARRAY_SIZE(commands); i++)
		printf("  %s\n", commands[i].usage);
	printf("\n"
	       "'tagdiskctl COMMAND --help' shows what COMMAND does, without the daemon.\n"
	       "Any other COMMAND is sent to the daemon as it is (a newer daemon may know it).\n");
	printf("\nTrace options (after the word trace):\n" TRACE_OPTIONS);
	printf("\n" EXIT_STATUS_TEXT);
}

/* COMMAND --help (or help COMMAND): its usage and what it does, without the daemon. */
static void command_usage(const struct td_ctl_command *cmd)
{
	printf("Usage: tagdiskctl [-s SOCKET] [-t SECONDS] [--json] %s\n", cmd->usage);
	if (cmd->help && cmd->help[0])
		printf("%c%s.\n", toupper((unsigned char)cmd->help[0]), cmd->help + 1);
	if (cmd->details)
		printf("\n%s", cmd->details);
	printf("\n" EXIT_STATUS_TEXT);
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

/* Say that -@opt's value (optarg) is not @what. Return: TD_CTL_USAGE. */
static int bad_value(char opt, const char *what)
{
	fprintf(stderr, "tagdiskctl: -%c: \"%s\" is not %s\n", opt, optarg, what);
	return TD_CTL_USAGE;
}

/*
 * Take the options in @argv[0..@argc) (getopt style: @argv[0] is not one),
 * stopping at the first other word. Return: TD_CTL_OK; TD_CTL_STOP after --help or
 * --version; TD_CTL_USAGE after saying why.
 */
static int parse_options(struct td_ctl *ctl, int argc, char **argv, const char *shortopts,
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
			if (!td_ctl_parse_seconds(optarg, &seconds))
				return bad_value('t', "a positive number of seconds");
			ctl->timeout_ms = TD_MAX((int)(seconds * 1000), 1);
			break;
		case OPT_JSON:
			ctl->json = true;
			break;
		case 'i':
			if (!td_ctl_parse_seconds(optarg, &ctl->interval_s))
				return bad_value('i', "a positive number of seconds");
			break;
		case 'n':
			if (!td_ctl_parse_count(optarg, &ctl->count))
				return bad_value('n', "a positive integer");
			break;
		case 'o':
			ctl->trace_out = optarg;
			break;
		case 'w':
			if (!td_ctl_parse_seconds(optarg, &ctl->trace_wait_s))
				return bad_value('w', "a positive number of seconds");
			break;
		case 'b':
			if (!td_ctl_parse_count(optarg, &ctl->trace_buffer_kib) ||
			    ctl->trace_buffer_kib > TD_CTL_TRACE_KIB_MAX)
				return bad_value('b', "a number of KiB from 1 to 65536");
			break;
		case 'h':
			usage();
			return TD_CTL_STOP;
		case 'V':
			printf("tagdiskctl %s\n", TD_VERSION);
			return TD_CTL_STOP;
		case ':':
			if (optopt)
				fprintf(stderr, "tagdiskctl: option -%c needs a value\n", optopt);
			else
				fprintf(stderr, "tagdiskctl: option %s needs a value\n",
					argv[optind - 1]);
			return TD_CTL_USAGE;
		default:
			if (optopt)
				fprintf(stderr, "tagdiskctl: unknown option -%c\n", optopt);
			else
				fprintf(stderr, "tagdiskctl: unknown option %s\n",
					argv[optind - 1]);
			return TD_CTL_USAGE;
		}
	}
	return TD_CTL_OK;
}

/*
 * After the command word, only the repeating commands and those with options
 * of their own take options: gather them, keep the other words as arguments.
 * Return: TD_CTL_OK or TD_CTL_USAGE.
 */
static int parse_command_options(struct td_ctl *ctl, const struct td_ctl_command *cmd, int *argc,
				 char **argv)
{
	const char *shortopts = cmd->repeats ? "+:i:n:" : cmd->shortopts;
	const struct option *longopts = cmd->repeats ? repeat_options : cmd->longopts;
	int r;

	if (!shortopts)
		return TD_CTL_OK;
	unsigned long count = ctl->count;

	r = parse_options(ctl, *argc, argv, shortopts, longopts);
	if (r)
		return TD_CTL_USAGE;
	/* After trace, -n COUNT is the number of buffers (blktrace's -n), not of reports. */
	if (!cmd->repeats && ctl->count != count) {
		ctl->trace_buffers = ctl->count;
		ctl->count = count;
		if (ctl->trace_buffers > 1024) {
			fprintf(stderr, "tagdiskctl: -n: \"%lu\" is not a number of buffers from "
					"1 to 1024\n", ctl->trace_buffers);
			return TD_CTL_USAGE;
		}
	}
	/* Leave the command word in front of its arguments. */
	memmove(argv + 1, argv + optind, (size_t)(*argc - optind) * sizeof(*argv));
	*argc -= optind - 1;
	return TD_CTL_OK;
}

static const struct td_ctl_command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < TD_ARRAY_SIZE(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return &other_command;
}

/* The commands near @word ("\"stats\" or \"status\"") in @buf. Return: how many. */
static size_t suggest_command(const char *word, char *buf, size_t len)
{
	const char *names[TD_ARRAY_SIZE(commands)];
	size_t i;

	for (i = 0; i < TD_ARRAY_SIZE(commands); i++)
		names[i] = commands[i].name;
	return td_suggest(word, names, TD_ARRAY_SIZE(names), buf, len);
}

/* "unknown command "WORD"", with the known ones near it, for a message. */
static void unknown_command(const char *word, char *buf, size_t len)
{
	char near[160];

	if (suggest_command(word, near, sizeof(near)))
		snprintf(buf, len, "unknown command \"%.64s\" (did you mean %s?)", word, near);
	else
		snprintf(buf, len, "unknown command \"%.64s\" (try \"tagdiskctl help\")", word);
}

/* Return: whether @argv[1..@argc) asks for help: a word "-h" or "--help". */
static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return true;
	return false;
}

/* One line of `help`: USAGE and HELP, aligned to @width; a longer usage on a line of its own. */
static void help_line(const char *usage, const char *help, size_t width)
{
	if (strlen(usage) > width)
		printf("  %s\n  %-*s  %s\n", usage, (int)width, "", help);
	else
		printf("  %-*s  %s\n", (int)width, usage, help);
}

/*
 * help: tagdiskctl's commands in the syntax it accepts, each once, then those
 * only the daemon knows (a newer daemon's), which go to it as they are.
 * Without a daemon, tagdiskctl's own list and a note on stderr.
 */
int td_ctl_run_help(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	struct json_object *reply = NULL;
	struct json_object *theirs;
	const size_t width = 30;
	size_t i, n;
	int r = TD_CTL_OK;

	(void)cmd, (void)argc, (void)argv;
	if (ctl->conn.fd >= 0) {
		r = td_ctl_call(ctl, "help", true, &reply);
		if (r || ctl->json) {
			json_object_put(reply);
			return r;
		}
	}
	for (i = 0; i < TD_ARRAY_SIZE(commands); i++)
		help_line(commands[i].usage, commands[i].help ? commands[i].help : "", width);
	theirs = td_jsonc_get(reply, "/commands");
	n = json_object_is_type(theirs, json_type_array) ? json_object_array_length(theirs) : 0;
	for (i = 0; i < n; i++) {
		struct json_object *c = json_object_array_get_idx(theirs, i);
		const char *name = td_jsonc_as_str(td_jsonc_get(c, "/name"), "");

		if (find_command(name) != &other_command)
			continue;
		help_line(td_jsonc_as_str(td_jsonc_get(c, "/usage"), name),
			  td_jsonc_as_str(td_jsonc_get(c, "/help"), ""), width);
	}
	printf("\n'tagdiskctl COMMAND --help' says more of one.\n");
	json_object_put(reply);
	return r;
}

/*
 * Check what can be checked without the daemon.
 * Return: TD_CTL_OK, or TD_CTL_USAGE after saying why.
 */
static int check_command(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc,
			 char **argv)
{
	unsigned int nargs = (unsigned int)argc - 1;
	size_t line_len = 0;
	int i;

	if (nargs < cmd->min_args || nargs > cmd->max_args) {
		fprintf(stderr, "tagdiskctl: usage: %s\n", cmd->usage);
		return TD_CTL_USAGE;
	}
	if ((ctl->interval_s > 0 || ctl->count) && !cmd->repeats) {
		fprintf(stderr, "tagdiskctl: -i and -n apply to status, stats and top, not %s\n",
			argv[0]);
		return TD_CTL_USAGE;
	}
	if (cmd->check && cmd->check(ctl, argc, argv))
		return TD_CTL_USAGE;
	for (i = 0; i < argc; i++) {
		line_len += (i > 0) + strlen(argv[i]);
		/* A line break would end the command early and start another one. */
		if (!strpbrk(argv[i], "\r\n"))
			continue;
		if (i == 0)
			fprintf(stderr, "tagdiskctl: the command word holds a line break\n");
		else
			fprintf(stderr, "tagdiskctl: %s: an argument holds a line break\n",
				argv[0]);
		return TD_CTL_USAGE;
	}
	/* The daemon would refuse it whole: say so without asking. */
	if (line_len > TD_CTL_LINE_MAX) {
		fprintf(stderr, "tagdiskctl: command too long (over %d bytes)\n", TD_CTL_LINE_MAX);
		return TD_CTL_USAGE;
	}
	return TD_CTL_OK;
}

int main(int argc, char **argv)
{
	struct td_ctl ctl = { .timeout_ms = TD_CTL_DEFAULT_TIMEOUT_MS };
	const struct td_ctl_command *cmd;
	char why[512];
	const char *env;
	int cmd_argc;
	char **cmd_argv;
	int r;

	signal(SIGPIPE, SIG_IGN);
	r = parse_options(&ctl, argc, argv, "+:s:t:i:n:hV", main_options);
	if (r == TD_CTL_STOP)
		return td_ctl_flush_stdout() == TD_CTL_REFUSED ? TD_CTL_REFUSED : TD_CTL_OK;
	if (r) {
		usage_hint();
		return TD_CTL_USAGE;
	}
	ctl.socket_origin = "given with -s";
	if (!ctl.socket) {
		env = getenv("TAGDISK_SOCKET");
		ctl.socket = env && *env ? env : TD_CTL_DEFAULT_SOCKET;
		ctl.socket_origin = env && *env ? "from $TAGDISK_SOCKET" : "the default socket";
	}
	if (optind >= argc) {
		fprintf(stderr, "tagdiskctl: no command given\n");
		usage_hint();
		return TD_CTL_USAGE;
	}
	cmd_argc = argc - optind;
	cmd_argv = argv + optind;
	cmd = find_command(cmd_argv[0]);
	/* COMMAND --help and help COMMAND need no daemon. */
	if (cmd != &other_command && wants_help(cmd_argc, cmd_argv)) {
		command_usage(cmd);
		return td_ctl_flush_stdout() == TD_CTL_REFUSED ? TD_CTL_REFUSED : TD_CTL_OK;
	}
	if (cmd->run == td_ctl_run_help && cmd_argc == 2) {
		const struct td_ctl_command *about = find_command(cmd_argv[1]);

		if (about == &other_command) {
			unknown_command(cmd_argv[1], why, sizeof(why));
			fprintf(stderr, "tagdiskctl: help: %s\n", why);
			return TD_CTL_USAGE;
		}
		command_usage(about);
		return td_ctl_flush_stdout() == TD_CTL_REFUSED ? TD_CTL_REFUSED : TD_CTL_OK;
	}
	if (parse_command_options(&ctl, cmd, &cmd_argc, cmd_argv) ||
	    check_command(&ctl, cmd, cmd_argc, cmd_argv)) {
		usage_hint();
		return TD_CTL_USAGE;
	}
	ctl.stdout_tty = isatty(STDOUT_FILENO);

	r = td_ctl_conn_open(&ctl.conn, ctl.socket, ctl.timeout_ms, why, sizeof(why));
	if (r && cmd == &other_command) {
		/* A typo must not read as a connection failure: the word is the news. */
		char unknown[256];

		unknown_command(cmd_argv[0], unknown, sizeof(unknown));
		fprintf(stderr, "tagdiskctl: %s; no daemon to ask whether it knows it: %s\n",
			unknown, why);
		return TD_CTL_USAGE;
	}
	if (r && cmd->run == td_ctl_run_help && !ctl.json && r == TD_CTL_CONNECT) {
		fprintf(stderr, "tagdiskctl: %s; tagdiskctl's own commands only:\n", why);
		r = td_ctl_run_help(&ctl, cmd, cmd_argc, cmd_argv);
		return r == TD_CTL_OK ? td_ctl_flush_stdout() : r;
	}
	if (r == TD_CTL_USAGE) {
		fprintf(stderr, "tagdiskctl: %s (%s): -s SOCKET names the admin socket of tagdiskd "
				"(its [admin] socket or --socket)\n",
			why, ctl.socket_origin);
		return r;
	}
	if (r) {
		fprintf(stderr, "tagdiskctl: %s\n", why);
		return r;
	}
	if (cmd == &other_command)
		suggest_command(cmd_argv[0], ctl.near, sizeof(ctl.near));
	r = cmd->run(&ctl, cmd, cmd_argc, cmd_argv);
	td_ctl_conn_close(&ctl.conn);
	if (r == TD_CTL_OK)
		r = td_ctl_flush_stdout();
	return r == TD_CTL_STOP ? TD_CTL_OK : r;
}
