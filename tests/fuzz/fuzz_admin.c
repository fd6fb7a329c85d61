// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_admin.c - the admin command line: td_admin_parse() and td_admin_kv(),
 * and the error line the daemon answers a refused line with.
 *
 * The input is one line as the admin socket hands it over (without the
 * newline). The harness splits it into words itself, by the rules of
 * admin_cmd.h, and holds the parser to them: a line accepted has the words
 * this split finds, its command is a table entry and the argument count is
 * within that entry's bounds; a line over TD_ADMIN_LINE_MAX bytes, with a
 * NUL byte or not valid UTF-8 is refused. Independently of the command,
 * every word after the first goes through td_admin_kv() against the keys the
 * commands use, and an accepted split must give each argument to exactly one
 * key.
 *
 * Every refusal becomes a reply as tagdiskd writes it (admin_reply.c, on
 * json-c): one line, no newline inside, valid UTF-8 even where the message
 * cut a character of the input in two, and it reads back as
 * {"ok":false,"error":MESSAGE} with the message intact when it was valid.
 */
#include <errno.h>
#include <string.h>
#include "common/jsonc.h"
#include "common/utf8.h"
#include "daemon/admin_cmd.h"
#include "daemon/admin_int.h"
#include "fuzz.h"

/* More words than a line may have, so the harness sees what the parser refuses. */
#define MAX_WORDS (TD_ADMIN_MAX_ARGS + 4)

struct words {
	char buf[TD_ADMIN_LINE_MAX + 1];
	char *word[MAX_WORDS];
	unsigned int nr; /* words found, at most MAX_WORDS */
	bool more;	 /* words beyond MAX_WORDS were dropped */
};

/* Split the line as admin_cmd.h describes; @len is at most TD_ADMIN_LINE_MAX. */
static void split_words(const uint8_t *data, size_t len, struct words *w)
{
	char *p;

	if (len && data[len - 1] == '\r')
		len--;
	memcpy(w->buf, data, len);
	w->buf[len] = '\0';
	w->nr = 0;
	w->more = false;
	p = w->buf;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			return;
		if (w->nr == MAX_WORDS) {
			w->more = true;
			return;
		}
		w->word[w->nr++] = p;
		p += strcspn(p, " \t");
		if (*p)
			*p++ = '\0';
	}
}

static void check_parsed(const struct td_admin_request *req, const struct words *w)
{
	const struct td_admin_command *cmd = req->cmd;

	FUZZ_CHECK(cmd >= td_admin_commands && cmd < td_admin_commands + td_admin_nr_commands);
	FUZZ_CHECK(!w->more && w->nr >= 1);
	FUZZ_CHECK(strcmp(cmd->name, w->word[0]) == 0);
	FUZZ_CHECK(req->argc == w->nr - 1);
	FUZZ_CHECK(req->argc >= cmd->min_args && req->argc <= cmd->max_args);
	FUZZ_CHECK(req->argc <= TD_ADMIN_MAX_ARGS);
	for (unsigned int i = 0; i < req->argc; i++) {
		const char *a = req->argv[i];

		FUZZ_CHECK(a > req->buf && a < req->buf + sizeof(req->buf));
		FUZZ_CHECK(memchr(a, '\0', (size_t)(req->buf + sizeof(req->buf) - a)));
		FUZZ_CHECK(strcmp(a, w->word[i + 1]) == 0);
		if (i)
			FUZZ_CHECK(a > req->argv[i - 1]);
	}
}

/* The reply line for a refusal with message @err, checked as a client reads it. */
static void check_error_reply(const char *err)
{
	struct td_admin_reply reply = { 0 };
	struct json_object *back;
	const char *line;
	size_t len;

	td_admin_error(&reply, "%s", err);
	line = td_admin_reply_line(&reply, &len);
	FUZZ_CHECK(line && len == strlen(line));
	FUZZ_CHECK(!memchr(line, '\n', len));
	FUZZ_CHECK(td_utf8_valid(line, len));
	back = td_jsonc_parse(line, len);
	FUZZ_CHECK(json_object_is_type(back, json_type_object));
	FUZZ_CHECK(json_object_object_length(back) == 2);
	FUZZ_CHECK(td_jsonc_as_bool(td_jsonc_get(back, "/ok"), true) == false);
	FUZZ_CHECK(td_jsonc_as_str(td_jsonc_get(back, "/error"), NULL));
	if (td_utf8_valid(err, strlen(err)))
		FUZZ_CHECK(strcmp(td_jsonc_as_str(td_jsonc_get(back, "/error"), ""), err) == 0);
	json_object_put(back);
	td_admin_reply_free(&reply);
}

static void check_kv(char *const *argv, unsigned int argc)
{
	static const char *const keys[] = {"op", "sector", "count", "times", "keep", "seed"};
	const char *values[TD_ARRAY_SIZE(keys)];
	unsigned int set = 0;
	char err[256];
	int ret;

	memset(err, 0x5a, sizeof(err));
	ret = td_admin_kv(argv, argc, keys, TD_ARRAY_SIZE(keys), values, err, sizeof(err));
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL);
		FUZZ_CHECK(fuzz_terminated(err, sizeof(err)) && err[0]);
		check_error_reply(err);
		return;
	}
	for (size_t k = 0; k < TD_ARRAY_SIZE(keys); k++) {
		bool found = false;

		if (!values[k])
			continue;
		set++;
		FUZZ_CHECK(values[k][0]);
		for (unsigned int i = 0; i < argc && !found; i++) {
			size_t klen = strlen(keys[k]);

			found = strncmp(argv[i], keys[k], klen) == 0 && argv[i][klen] == '=' &&
				values[k] == argv[i] + klen + 1;
		}
		FUZZ_CHECK(found);
	}
	FUZZ_CHECK(set == argc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct td_admin_request req;
	static struct words w;
	char err[256];
	int ret;

	memset(err, 0x5a, sizeof(err));
	ret = td_admin_parse((const char *)data, size, &req, err, sizeof(err));
	if (size > TD_ADMIN_LINE_MAX || memchr(data, '\0', size) ||
	    !td_utf8_valid((const char *)data, size)) {
		FUZZ_CHECK(ret == -EINVAL);
		FUZZ_CHECK(fuzz_terminated(err, sizeof(err)) && err[0]);
		check_error_reply(err);
		return 0;
	}
	split_words(data, size, &w);
	if (ret == 0) {
		check_parsed(&req, &w);
	} else {
		FUZZ_CHECK(ret == -EINVAL);
		FUZZ_CHECK(fuzz_terminated(err, sizeof(err)) && err[0]);
		/* "unknown command" quotes up to 64 bytes of the line, maybe half a character. */
		check_error_reply(err);
	}
	if (w.nr > 1 && !w.more)
		check_kv(w.word + 1, w.nr - 1);
	return 0;
}
