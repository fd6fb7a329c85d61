// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * doc_facts.c - print what the man pages must document, from the tables the
 * programs themselves use, so tests/bats/manpages.bats checks the pages
 * against the code and not against a copy of it.
 *
 *   key SECTION KEY TYPE DEFAULT RELOADABLE    one line per td_config_keys[] entry
 *   command NAME                              one line per td_admin_commands[] entry
 *
 * Fields are separated by one tab. A key without a default prints "-"; an
 * empty default prints "\"\"".
 */
#include <stdio.h>
#include "daemon/admin_cmd.h"
#include "daemon/config.h"

int main(void)
{
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		const struct td_config_key *k = &td_config_keys[i];
		const char *def = k->default_value ? k->default_value : "-";

		if (!*def)
			def = "\"\"";
		printf("key\t%s\t%s\t%s\t%s\t%s\n", k->section, k->key, k->type, def,
		       k->reloadable ? "yes" : "no");
	}
	for (size_t i = 0; i < td_admin_nr_commands; i++)
		printf("command\t%s\n", td_admin_commands[i].name);
	return ferror(stdout) ? 1 : 0;
}
