// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * print_wlog.c - the write log in tagdiskctl: `log` (its relative FILE made
 * absolute here, since the daemon runs in "/"), `mark`, and the log's line
 * in `status` (docs/protocol.md, "log").
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/jsonc.h"
#include "ctl/ctl_format.h"
#include "ctl/ctl_int.h"

void td_ctl_wlog_line(struct json_object *r, const char *at, char *buf, size_t len)
{
	char a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN], c[TD_CTL_FMT_LEN];
	char d[TD_CTL_FMT_LEN], e[TD_CTL_FMT_LEN], f[TD_CTL_FMT_LEN], g[TD_CTL_FMT_LEN];
	struct json_object *o = td_jsonc_get(r, at);
	const char *state;

	if (!o) {
		snprintf(buf, len, "-");
		return;
	}
	state = td_ctl_get_str(o, "/state");
	if (strcmp(state, "off") == 0) {
		snprintf(buf, len, "off");
		return;
	}
	snprintf(buf, len,
		 "%s%s%s, %s, %s entries (%s writes, %s discards, %s flushes, %s FUA, %s marks), %s",
		 state, strcmp(state, "failed") == 0 ? ": " : "",
		 strcmp(state, "failed") == 0 ? td_ctl_get_str(o, "/error") : "",
		 td_ctl_get_str(o, "/path"), td_ctl_get_num(o, "/entries", a, sizeof(a)),
		 td_ctl_get_num(o, "/writes", b, sizeof(b)),
		 td_ctl_get_num(o, "/discards", c, sizeof(c)),
		 td_ctl_get_num(o, "/flushes", d, sizeof(d)), td_ctl_get_num(o, "/fua", e, sizeof(e)),
		 td_ctl_get_num(o, "/marks", f, sizeof(f)),
		 td_ctl_fmt_size(td_ctl_get_u64(o, "/bytes"), g, sizeof(g)));
}

void td_ctl_print_log(struct json_object *r)
{
	char line[PATH_MAX + 256], a[TD_CTL_FMT_LEN], b[TD_CTL_FMT_LEN];

	if (td_jsonc_get(r, "/log")) {
		td_ctl_wlog_line(r, "/log", line, sizeof(line));
		printf("log: %s\n", line);
		return;
	}
	/* log stop */
	printf("log: stopped %s: %s entries, %s\n", td_ctl_get_str(r, "/path"),
	       td_ctl_get_num(r, "/entries", a, sizeof(a)),
	       td_ctl_fmt_size(td_ctl_get_u64(r, "/bytes"), b, sizeof(b)));
}

void td_ctl_print_mark(struct json_object *r)
{
	char a[TD_CTL_FMT_LEN];

	printf("mark %s: entry %s\n", td_ctl_get_str(r, "/mark"),
	       td_ctl_get_num(r, "/entry", a, sizeof(a)));
}

int td_ctl_run_log(struct td_ctl *ctl, const struct td_ctl_command *cmd, int argc, char **argv)
{
	char *args[3];
	char *abs = NULL;
	int ret;

	if (argc != 3 || strcmp(argv[1], "start") != 0 || argv[2][0] == '/')
		return td_ctl_run_simple(ctl, cmd, argc, argv);
	/* The daemon resolves nothing against our directory: send it an absolute path. */
	char *cwd = getcwd(NULL, 0);

	if (!cwd || asprintf(&abs, "%s/%s", strcmp(cwd, "/") ? cwd : "", argv[2]) < 0) {
		fprintf(stderr, "tagdiskctl: log start: %s\n", strerror(errno));
		free(cwd);
		return TD_CTL_USAGE;
	}
	free(cwd);
	args[0] = argv[0];
	args[1] = argv[1];
	args[2] = abs;
	ret = td_ctl_run_simple(ctl, cmd, 3, args);
	free(abs);
	return ret;
}
