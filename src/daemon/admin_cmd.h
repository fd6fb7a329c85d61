/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * admin_cmd.h - admin command lines: parsing, and the command table.
 *
 * A command line is at most TD_ADMIN_LINE_MAX bytes of UTF-8 without NUL
 * bytes (a trailing "\r" is dropped). It is split into words at spaces and
 * tabs; the first word names the command, the rest are its arguments, some
 * of them key=value pairs. Parsing checks the line, finds the command and
 * its argument count; each handler then checks its arguments' values.
 * Parsing never looks at the daemon: it can be fuzzed on its own.
 *
 * The table lists every command with its usage and one line of help; `help`
 * prints it, the man page is checked against it.
 */
#ifndef TAGDISK_ADMIN_CMD_H
#define TAGDISK_ADMIN_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "daemon/admin.h"

#define TD_ADMIN_MAX_ARGS 16

struct td_admin_command {
	const char *name;
	const char *usage;
	const char *help;
	unsigned int min_args;
	unsigned int max_args;
};

/* Every command, in the order `help` lists them. */
extern const struct td_admin_command td_admin_commands[];
extern const size_t td_admin_nr_commands;

struct td_admin_request {
	const struct td_admin_command *cmd;
	unsigned int argc;		    /* arguments after the command name */
	char *argv[TD_ADMIN_MAX_ARGS];	    /* pointing into buf */
	char buf[TD_ADMIN_LINE_MAX + 1];
};

/*
 * Parse the @len bytes at @line (no newline) into @req.
 * Return: 0, or -EINVAL with one message in @err: line too long, NUL byte,
 * invalid UTF-8, empty, too many words, unknown command, wrong number of
 * arguments.
 */
int td_admin_parse(const char *line, size_t len, struct td_admin_request *req, char *err,
		   size_t errlen) td_nonnull(1, 3, 4);

/*
 * Split the key=value arguments @argv[0..@argc) against the @nr_keys names in
 * @keys, storing each value in @values (NULL when absent).
 * Return: 0, or -EINVAL with a message (no '=', unknown key, key given twice,
 * empty value).
 */
int td_admin_kv(char *const *argv, unsigned int argc, const char *const *keys, size_t nr_keys,
		const char **values, char *err, size_t errlen) td_nonnull(3, 5, 6);

#endif /* TAGDISK_ADMIN_CMD_H */
