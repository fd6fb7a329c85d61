// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_cmdline.c - td_cmdline_parse() and td_config_build() on arbitrary argument lists.
 *
 * The input is the arguments after "tagdiskd", separated by NUL bytes (at
 * most MAX_ARGS of them). stdout goes to /dev/null once at start, since -h
 * and -V print there.
 *
 * Checked, from config.h: the result is 0, 1 (-h/-V), -EINVAL with a message
 * or -ENOMEM; argv is neither reordered nor changed; on anything but 0 the
 * struct is left empty; a second parse of the same list gives the same
 * answer and the same values. On 0: -c is absolute, every FUSE option is
 * non-empty and holds no comma, every override names a known key, path
 * overrides are absolute. Since each value was checked when parsed, building
 * a config from the overrides cannot fail; that build is done whenever -c is
 * absent (with -c it would read whatever file the input names) and its
 * result must pass fuzz_check_config() and carry the command-line fields.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include "fuzz_config.h"

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	(void)argc, (void)argv;
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
	close(fd);
	return 0;
}

static bool same_cmdline(const struct td_cmdline *a, const struct td_cmdline *b)
{
	if (!a->config_file != !b->config_file ||
	    (a->config_file && strcmp(a->config_file, b->config_file) != 0))
		return false;
	if (a->foreground != b->foreground || a->verbose != b->verbose ||
	    a->nr_fuse_opts != b->nr_fuse_opts || a->nr_overrides != b->nr_overrides)
		return false;
	for (size_t i = 0; i < a->nr_fuse_opts; i++)
		if (strcmp(a->fuse_opts[i], b->fuse_opts[i]) != 0)
			return false;
	for (size_t i = 0; i < a->nr_overrides; i++)
		if (a->overrides[i].option != b->overrides[i].option ||
		    strcmp(a->overrides[i].value, b->overrides[i].value) != 0)
			return false;
	return true;
}

static void check_build(const struct td_cmdline *cl)
{
	struct td_config c;
	char err[512];

	td_config_init(&c);
	err[0] = '\0';
	if (td_config_build(&c, cl, err, sizeof(err)) != 0)
		fprintf(stderr, "td_config_build: %s\n", err);
	FUZZ_CHECK(err[0] == '\0');
	fuzz_check_config(&c);
	FUZZ_CHECK(c.foreground == cl->foreground && c.verbose == cl->verbose);
	FUZZ_CHECK(c.nr_fuse_opts == cl->nr_fuse_opts);
	for (size_t i = 0; i < c.nr_fuse_opts; i++)
		FUZZ_CHECK(strcmp(c.fuse_opts[i], cl->fuse_opts[i]) == 0);
	FUZZ_CHECK(!c.config_file);
	td_config_free(&c);
}

static void check_parsed(const struct td_cmdline *cl)
{
	static const char *const path_options[] = {"--image", "--mount", "--socket"};

	FUZZ_CHECK(!cl->config_file || cl->config_file[0] == '/');
	for (size_t i = 0; i < cl->nr_fuse_opts; i++)
		FUZZ_CHECK(cl->fuse_opts[i][0] && !strchr(cl->fuse_opts[i], ','));
	for (size_t i = 0; i < cl->nr_overrides; i++) {
		const struct td_cmdline_override *o = &cl->overrides[i];

		FUZZ_CHECK(td_config_find_key(o->section, o->key));
		FUZZ_CHECK(o->option && o->option[0] == '-' && o->value);
		for (size_t k = 0; k < TD_ARRAY_SIZE(path_options); k++)
			if (strcmp(o->option, path_options[k]) == 0)
				FUZZ_CHECK(o->value[0] == '/');
	}
	if (!cl->config_file)
		check_build(cl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct td_cmdline empty;
	char *argv[MAX_ARGS + 2];
	char *saved[MAX_ARGS + 2];
	struct td_cmdline cl, cl2;
	char err[512], err2[512];
	char *text;
	int argc = 1;
	int ret, ret2;

	text = malloc(size + 1);
	FUZZ_CHECK(text);
	memcpy(text, data, size);
	text[size] = '\0';
	argv[0] = "tagdiskd";
	for (char *p = text; p <= text + size && argc <= MAX_ARGS; p += strlen(p) + 1)
		argv[argc++] = p;
	if (size == 0)
		argc = 1;
	argv[argc] = NULL;
	memcpy(saved, argv, sizeof(argv));

	memset(err, 0x5a, sizeof(err));
	ret = td_cmdline_parse(&cl, argc, argv, err, sizeof(err));
	FUZZ_CHECK(memcmp(saved, argv, sizeof(*argv) * (size_t)(argc + 1)) == 0);
	FUZZ_CHECK(memcmp(text, data, size) == 0);
	FUZZ_CHECK(ret == 0 || ret == 1 || ret == -EINVAL || ret == -ENOMEM);
	if (ret) {
		FUZZ_CHECK(memcmp(&cl, &empty, sizeof(cl)) == 0);
		if (ret < 0)
			FUZZ_CHECK(fuzz_terminated(err, sizeof(err)) && err[0]);
	}

	memset(err2, 0x5a, sizeof(err2));
	ret2 = td_cmdline_parse(&cl2, argc, argv, err2, sizeof(err2));
	FUZZ_CHECK(ret2 == ret);
	if (ret < 0)
		FUZZ_CHECK(strcmp(err, err2) == 0);
	if (ret == 0) {
		FUZZ_CHECK(same_cmdline(&cl, &cl2));
		check_parsed(&cl);
	}
	td_cmdline_free(&cl);
	td_cmdline_free(&cl2);
	free(text);
	return 0;
}
