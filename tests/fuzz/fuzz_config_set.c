// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_config_set.c - td_config_set(), one key at a time.
 *
 * The first byte picks the form of the rest. Below 0x80 it names a key of
 * td_config_keys[] (modulo their number) and the rest, up to a NUL, is the
 * value: every value parser gets the whole input. Otherwise the rest is
 * "section\0key\0value", so unknown and oddly spelled sections and keys are
 * tried too. Each value is set twice on the same config, as a file giving a
 * key twice would.
 *
 * Checked: the result is 0, -EINVAL or -ENOMEM; a refused value leaves the
 * config byte for byte as it was and writes one message, which for a known
 * key names it as "[section] key = \"..."; the config passes
 * fuzz_check_config() after every call.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "fuzz_config.h"

static void set_checked(struct td_config *c, const char *section, const char *key,
			const char *value, const struct td_config_key *known)
{
	struct td_config before = *c;
	char prefix[128];
	char err[512];
	int ret;

	memset(err, 0x5a, sizeof(err));
	ret = td_config_set(c, section, key, value, err, sizeof(err));
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL || ret == -ENOMEM);
		FUZZ_CHECK(memcmp(&before, c, sizeof(*c)) == 0);
		FUZZ_CHECK(fuzz_terminated(err, sizeof(err)) && err[0]);
		if (known && ret == -EINVAL) {
			snprintf(prefix, sizeof(prefix), "[%s] %s = \"", known->section,
				 known->key);
			FUZZ_CHECK(strncmp(err, prefix, strlen(prefix)) == 0);
		}
	}
	fuzz_check_config(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct td_config_key *known = NULL;
	const char *section, *key, *value;
	struct td_config c;
	char *text;

	if (size == 0)
		return 0;
	/* Two spare NULs so that "section\0key\0value" always has its three parts. */
	text = calloc(1, size + 2);
	FUZZ_CHECK(text);
	memcpy(text, data + 1, size - 1);
	if (data[0] < 0x80) {
		known = &td_config_keys[data[0] % td_config_nr_keys];
		section = known->section;
		key = known->key;
		value = text;
	} else {
		section = text;
		key = section + strlen(section) + 1;
		value = key + strlen(key) + 1;
		known = td_config_find_key(section, key);
	}

	td_config_init(&c);
	set_checked(&c, section, key, value, known);
	set_checked(&c, section, key, value, known);
	td_config_free(&c);
	free(text);
	return 0;
}
