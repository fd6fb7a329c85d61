/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * utf8.h - strict UTF-8 checks: the admin command line, and the strings the
 * admin protocol writes.
 *
 * Strict means RFC 3629: no overlong forms, no surrogates (U+D800..DFFF),
 * nothing above U+10FFFF. NUL is a valid character here; callers that refuse
 * it check for it themselves.
 *
 * LOCKING: none; no state.
 */
#ifndef TAGDISK_UTF8_H
#define TAGDISK_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include "common/compiler.h"

/*
 * Return: the length (1 to 4) of the valid UTF-8 sequence that starts at @s,
 * of which @avail (at least 1) bytes may be read; 0 when none starts there.
 */
size_t td_utf8_seq(const char *s, size_t avail) td_nonnull(1);

/* Return: true when the @len bytes at @s are valid UTF-8 (true for @len 0). */
bool td_utf8_valid(const char *s, size_t len);

#endif /* TAGDISK_UTF8_H */
