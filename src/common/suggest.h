/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * suggest.h - "did you mean": the known names nearest to a mistyped word,
 * for the admin commands (the daemon) and tagdiskctl's commands.
 *
 * A name is near a word when the word is a prefix of it ("stat" of
 * "status"), or when the two are a small edit distance apart: the optimal
 * string alignment distance, in which inserting, deleting or changing one
 * character, or swapping two neighbours ("tpo" for "top"), costs 1. Small is
 * at most 1 for a word of up to 4 characters and 2 for a longer one. Case is
 * ignored; a word of more than TD_SUGGEST_WORD_MAX bytes is near nothing.
 * Nearer names come first (a prefix counts as the characters it lacks), ties
 * in the order of the table.
 *
 * LOCKING: none; no state.
 */
#ifndef TAGDISK_SUGGEST_H
#define TAGDISK_SUGGEST_H

#include <stddef.h>
#include "common/compiler.h"

#define TD_SUGGEST_WORD_MAX 64
/* At most this many names are suggested. */
#define TD_SUGGEST_MAX 3

/*
 * Write into @buf the names of @names[0..@nr) near @word, quoted and joined
 * for a sentence: "\"a\"", "\"a\" or \"b\"", "\"a\", \"b\" or \"c\"" (at
 * most TD_SUGGEST_MAX); "" when none is near. Truncates like snprintf().
 * Return: how many names were written.
 */
size_t td_suggest(const char *word, const char *const *names, size_t nr, char *buf, size_t len)
	td_nonnull(1, 4);

#endif /* TAGDISK_SUGGEST_H */
