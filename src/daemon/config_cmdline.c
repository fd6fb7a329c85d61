// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config_cmdline.c - tagdiskd's command line.
 *
 * getopt_long() with "+" (never permute argv) and ":" (report missing
 * values as ':'), opterr cleared so it prints nothing; our messages name
 * the option. An option that sets a key is checked against a scratch
 * config at once and stored as text, then applied again by
 * td_config_build(), so a reload on SIGHUP re-reads the file and keeps the
 * command line on top. Paths are made absolute here, against the directory
 * the daemon started in.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config_int.h"
#include "tagdisk/backend.h"
#include "tagdisk/tag.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

enum {
	OPT_IMAGE = 256,
	OPT_SIZE,
	OPT_MOUNT,
	OPT_NAME,
	OPT_SOCKET,
	OPT_MODE,
	OPT_TRANSPORT,
	OPT_ELEVATOR,
	OPT_DEPTH,
	OPT_WORKERS,
	OPT_READ_ONLY,
	OPT_PID_FILE,
};

static const struct option long_options[] = {
    {"image", required_argument, NULL, OPT_IMAGE},
    {"size", required_argument, NULL, OPT_SIZE},
    {"mount", required_argument, NULL, OPT_MOUNT},
    {"name", required_argument, NULL, OPT_NAME},
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"mode", required_argument, NULL, OPT_MODE},
    {"transport", required_argument, NULL, OPT_TRANSPORT},
    {"elevator", required_argument, NULL, OPT_ELEVATOR},
    {"depth", required_argument, NULL, OPT_DEPTH},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"read-only", no_argument, NULL, OPT_READ_ONLY},
    {"pid-file", required_argument, NULL, OPT_PID_FILE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"verbose", no_argument, NULL, 'v'},
    {NULL, 0, NULL, 0},
};

/* "+": stop at the first non-option, never permute argv; ":": report missing values. */
static const char short_options[] = "+:c:fo:hVv";

/* Options that set a key. */
struct option_key {
	int val;
	const char *option;
	enum td_cfg_key id;
	const char *fixed_value; /* for flags: the value they set */
	bool path;		 /* made absolute when parsed */
};

static const struct option_key option_keys[] = {
    {OPT_IMAGE, "--image", KEY_DISK_IMAGE, NULL, true},
    {OPT_SIZE, "--size", KEY_DISK_SIZE, NULL, false},
    {OPT_MOUNT, "--mount", KEY_DISK_MOUNTPOINT, NULL, true},
    {OPT_NAME, "--name", KEY_DISK_NAME, NULL, false},
    {OPT_SOCKET, "--socket", KEY_ADMIN_SOCKET, NULL, true},
    {OPT_MODE, "--mode", KEY_QUEUE_MODE, NULL, false},
    {OPT_TRANSPORT, "--transport", KEY_DISK_TRANSPORT, NULL, false},
    {OPT_ELEVATOR, "--elevator", KEY_QUEUE_ELEVATOR, NULL, false},
    {OPT_DEPTH, "--depth", KEY_TAGS_DEPTH, NULL, false},
    {OPT_WORKERS, "--workers", KEY_DRIVE_WORKERS, NULL, false},
    {OPT_READ_ONLY, "--read-only", KEY_DISK_READ_ONLY, "true", false},
};

static const struct option_key *find_option_key(int val)
{
	for (size_t i = 0; i < TD_ARRAY_SIZE(option_keys); i++)
		if (option_keys[i].val == val)
			return &option_keys[i];
	return NULL;
}

/* Return: how the user spells the option whose getopt value is @val. */
static const char *option_name(int val, char *buf, size_t len)
{
	for (const struct option *o = long_options; o->name; o++)
		if (o->val == val && val >= 256) {
			snprintf(buf, len, "--%s", o->name);
			return buf;
		}
	if (val > 0x20 && val < 0x7f)
		snprintf(buf, len, "-%c", val);
	else
		snprintf(buf, len, "-\\x%02x", (unsigned int)val & 0xff);
	return buf;
}

char *td_cfg_absolute_path(const char *path)
{
	char *cwd = NULL;
	char *abs;
	size_t len;

	if (path[0] == '/') {
		abs = strdup(path);
	} else {
		cwd = getcwd(NULL, 0);
		if (!cwd)
			return NULL;
		if (asprintf(&abs, "%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", path) < 0)
			abs = NULL;
		free(cwd);
	}
	if (!abs)
		return NULL;
	len = strlen(abs);
	while (len > 1 && abs[len - 1] == '/')
		abs[--len] = '\0';
	return abs;
}

int td_cfg_strv_push(char ***v, size_t *n, const char *s, size_t len)
{
	char **grown = realloc(*v, (*n + 1) * sizeof(**v));

	if (!grown)
		return -ENOMEM;
	*v = grown;
	grown[*n] = strndup(s, len);
	if (!grown[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

void td_cfg_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/*
 * Split a -o value at commas onto the list (FUSE's own syntax, without escapes).
 * The disk's mount always carries nosuid and nodev (a disk file is neither a
 * program nor a device): the options that would lift them are refused.
 */
static int add_fuse_opts(struct td_cmdline *cl, const char *arg, char *err, size_t errlen)
{
	char quoted[TD_CFG_QUOTE_MAX];
	const char *p = arg;

	for (;;) {
		size_t len = strcspn(p, ",");

		if (len == 0)
			return td_cfg_fail(err, errlen, "-o \"%s\": empty FUSE option",
					   td_cfg_escape(arg, quoted, sizeof(quoted)));
		if ((len == 4 && strncmp(p, "suid", 4) == 0) || (len == 3 && strncmp(p, "dev", 3) == 0))
			return td_cfg_fail(err, errlen,
					   "-o \"%s\": %.*s is refused: the disk is always mounted"
					   " nosuid,nodev",
					   td_cfg_escape(arg, quoted, sizeof(quoted)), (int)len, p);
		if (td_cfg_strv_push(&cl->fuse_opts, &cl->nr_fuse_opts, p, len))
			return td_cfg_nomem(err, errlen);
		if (!p[len])
			return 0;
		p += len + 1;
	}
}

static int add_override(struct td_cmdline *cl, const struct option_key *ok, const char *arg,
			char *err, size_t errlen)
{
	const char *value = ok->fixed_value ? ok->fixed_value : arg;
	const struct td_cfg_where where = {.option = ok->option};
	struct td_cmdline_override *grown;
	struct td_config scratch;
	char quoted[TD_CFG_QUOTE_MAX];
	char *copy;
	int ret;

	/* Check now, so the message names the option before any file is read. */
	td_config_init(&scratch);
	ret = td_cfg_set_value(&scratch, ok->id, value, &where, err, errlen);
	td_config_free(&scratch);
	if (ret)
		return ret;

	copy = ok->path ? td_cfg_absolute_path(value) : strdup(value);
	if (!copy) {
		if (errno == ENOMEM)
			return td_cfg_nomem(err, errlen);
		return td_cfg_fail(err, errlen, "%s \"%s\": %s", ok->option,
				   td_cfg_escape(value, quoted, sizeof(quoted)), strerror(errno));
	}
	grown = realloc(cl->overrides, (cl->nr_overrides + 1) * sizeof(*grown));
	if (!grown) {
		free(copy);
		return td_cfg_nomem(err, errlen);
	}
	cl->overrides = grown;
	grown[cl->nr_overrides++] = (struct td_cmdline_override){
	    .option = ok->option,
	    .section = td_config_keys[ok->id].section,
	    .key = td_config_keys[ok->id].key,
	    .value = copy,
	};
	return 0;
}

static void print_usage(FILE *f)
{
	char names[256];
	char depth[64];

	td_elv_names(names, sizeof(names));
	snprintf(depth, sizeof(depth), "tags at the drive, 1..%d (32)", TD_TAG_DEPTH_MAX);
	fprintf(f,
		"Usage: tagdiskd [-c FILE] [-f] [--pid-file PATH] [--image PATH] [--size SIZE] [--mount DIR]\n"
		"                [--name NAME] [--socket PATH] [--mode rq|bio|mq]\n"
		"                [--transport auto|uring|classic] [--elevator NAME]\n"
		"                [--depth N] [--workers N] [--read-only] [-o FUSE_OPTION]...\n"
		"Serve a disk image as a file through FUSE, behind a queued block layer.\n"
		"\n"
		"  -c FILE            read settings from the INI file FILE\n"
		"  -f                 stay in the foreground\n"
		"  --pid-file PATH    write the daemon's pid to PATH once it serves\n"
		"  --image PATH       the disk image                     [disk] image\n"
		"  --size SIZE        image size, K/M/G/T suffixes;      [disk] size\n"
		"                     a missing image is created sparse\n"
		"  --mount DIR        where the disk file appears        [disk] mountpoint\n"
		"  --name NAME        the disk file's name (disk)        [disk] name\n"
		"  --socket PATH      the admin socket                   [admin] socket\n"
		"  --mode rq|bio|mq   queued, direct or multi-queue (rq) [queue] mode\n"
		"  --transport T      FUSE transport: auto|uring|classic [disk] transport\n"
		"                     (auto: uring when the kernel has it)\n"
		"  --elevator NAME    %-33s  [queue] elevator\n"
		"  --depth N          %-33s  [tags] depth\n"
		"  --workers N        drive threads, 0..256 (0)          [drive] workers\n"
		"  --read-only        serve the disk read-only           [disk] read_only\n"
		"  -o OPT[,OPT...]    FUSE mount options (repeatable)\n"
		"  -v, --verbose      log more (repeatable)\n"
		"  -h, --help         print this help and exit\n"
		"  -V, --version      print the version and exit\n"
		"\n"
		"The command line overrides the file, which overrides the defaults.\n",
		names, depth);
}

/*
 * getopt_long() returned '?' with @arg the word it stopped at. glibc sets
 * optopt to 0 for an unknown or ambiguous long option (and has moved past
 * it), to the option's value for "--flag=value" given to a flag, and to the
 * character for an unknown short option.
 */
static int unknown_option(const char *arg, char *err, size_t errlen)
{
	char quoted[TD_CFG_QUOTE_MAX];
	char name[64];

	if (optopt == 0) {
		size_t len = strcspn(arg, "=");
		unsigned int matches = 0;

		td_cfg_escape(arg, quoted, sizeof(quoted));
		quoted[strcspn(quoted, "=")] = '\0';
		/* getopt_long() takes unique abbreviations; say so when one was not. */
		for (const struct option *o = long_options; len > 2 && o->name; o++)
			matches += strncmp(o->name, arg + 2, len - 2) == 0;
		if (matches > 1)
			return td_cfg_fail(err, errlen, "ambiguous option %s", quoted);
		return td_cfg_fail(err, errlen, "unknown option %s", quoted);
	}
	if (strncmp(arg, "--", 2) == 0 && strchr(arg, '=')) {
		for (const struct option *o = long_options; o->name; o++)
			if (o->val == optopt && o->has_arg == no_argument)
				return td_cfg_fail(err, errlen, "option --%s takes no value",
						   o->name);
	}
	return td_cfg_fail(err, errlen, "unknown option %s",
			   option_name(optopt, name, sizeof(name)));
}

/*
 * A path option that sets no key (-c, --pid-file): made absolute now, so a
 * daemon that changed directory still finds the same file.
 * Return: 0; -EINVAL or -ENOMEM with one message in @err.
 */
static int set_path(char **dst, const char *opt, const char *arg, char *err, size_t errlen)
{
	char quoted[TD_CFG_QUOTE_MAX];

	if (!*arg)
		return td_cfg_fail(err, errlen, "%s \"\": must not be empty", opt);
	free(*dst);
	*dst = td_cfg_absolute_path(arg);
	if (*dst)
		return 0;
	if (errno == ENOMEM)
		return td_cfg_nomem(err, errlen);
	return td_cfg_fail(err, errlen, "%s \"%s\": %s", opt,
			   td_cfg_escape(arg, quoted, sizeof(quoted)), strerror(errno));
}

void td_cmdline_free(struct td_cmdline *cl)
{
	free(cl->config_file);
	free(cl->pid_file);
	td_cfg_strv_free(cl->fuse_opts, cl->nr_fuse_opts);
	for (size_t i = 0; i < cl->nr_overrides; i++)
		free(cl->overrides[i].value);
	free(cl->overrides);
	memset(cl, 0, sizeof(*cl));
}

int td_cmdline_parse(struct td_cmdline *cl, int argc, char **argv, char *err, size_t errlen)
{
	const struct option_key *ok;
	int saved_opterr = opterr;
	char name[64];
	char quoted[TD_CFG_QUOTE_MAX];
	int ret = 0;
	int ch;

	memset(cl, 0, sizeof(*cl));
	opterr = 0;
	optind = 0; /* glibc: 0 restarts the scan from scratch */
	while (ret == 0 &&
	       (ch = getopt_long(argc, argv, short_options, long_options, NULL)) != -1) {
		switch (ch) {
		case 'c':
			ret = set_path(&cl->config_file, "-c", optarg, err, errlen);
			break;
		case 'f':
			cl->foreground = true;
			break;
		case OPT_PID_FILE:
			ret = set_path(&cl->pid_file, "--pid-file", optarg, err, errlen);
			break;
		case 'o':
			ret = add_fuse_opts(cl, optarg, err, errlen);
			break;
		case 'v':
			cl->verbose++;
			break;
		case 'h':
			print_usage(stdout);
			fflush(stdout);
			ret = 1;
			break;
		case 'V':
			/* What this build serves from: WITH_RBD=0 or WITH_NBD=0 leave one out. */
			printf("tagdiskd %s (backends: file%s%s)\n", TD_VERSION,
			       TD_WITH_RBD ? ", rbd" : "", TD_WITH_NBD ? ", nbd" : "");
			fflush(stdout);
			ret = 1;
			break;
		case ':':
			ret = td_cfg_fail(err, errlen, "option %s needs a value",
					  option_name(optopt, name, sizeof(name)));
			break;
		case '?':
			ret = unknown_option(argv[optind - 1], err, errlen);
			break;
		default:
			ok = find_option_key(ch);
			assert(ok);
			ret = add_override(cl, ok, optarg, err, errlen);
			break;
		}
	}
	if (ret == 0 && optind < argc)
		ret = td_cfg_fail(err, errlen, "unexpected argument \"%s\"",
				  td_cfg_escape(argv[optind], quoted, sizeof(quoted)));
	opterr = saved_opterr;
	if (ret)
		td_cmdline_free(cl);
	return ret;
}
