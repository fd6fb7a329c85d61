// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * suggest.c - "did you mean" (suggest.h).
 *
 * The distance is computed with the classic dynamic programme over a
 * (word + 1) x (name + 1) table, with the transposition step of the optimal
 * string alignment variant (Damerau's swaps, each substring edited once).
 * Words and names are short (commands), so the table lives on the stack.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "common/suggest.h"

#define COLS (TD_SUGGEST_WORD_MAX + 1)

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;

	return m < c ? m : c;
}

static bool same(char a, char b)
{
	return tolower((unsigned char)a) == tolower((unsigned char)b);
}

/* Return: the OSA distance of @a and @b (each at most TD_SUGGEST_WORD_MAX bytes). */
static size_t distance(const char *a, size_t la, const char *b, size_t lb)
{
	size_t d[COLS][COLS];
	size_t i, j;

	for (i = 0; i <= la; i++)
		d[i][0] = i;
	for (j = 0; j <= lb; j++)
		d[0][j] = j;
	for (i = 1; i <= la; i++) {
		for (j = 1; j <= lb; j++) {
			size_t cost = same(a[i - 1], b[j - 1]) ? 0 : 1;

			d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
			/* Two neighbours swapped. */
			if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) &&
			    same(a[i - 2], b[j - 1]) && d[i - 2][j - 2] + 1 < d[i][j])
				d[i][j] = d[i - 2][j - 2] + 1;
		}
	}
	return d[la][lb];
}

/* Return: how near @name is to @word (lower is nearer), or SIZE_MAX when it is not. */
static size_t nearness(const char *word, size_t lw, const char *name)
{
	size_t ln = strlen(name);
	size_t limit = lw <= 4 ? 1 : 2;
	size_t d;

	if (ln > TD_SUGGEST_WORD_MAX)
		return SIZE_MAX;
	if (lw >= 2 && lw < ln && strncasecmp(word, name, lw) == 0)
		return ln - lw;
	d = distance(word, lw, name, ln);
	return d <= limit ? d : SIZE_MAX;
}

size_t td_suggest(const char *word, const char *const *names, size_t nr, char *buf, size_t len)
{
	size_t best[TD_SUGGEST_MAX];
	size_t score[TD_SUGGEST_MAX];
	size_t lw = strlen(word);
	size_t n = 0;
	size_t i, k, off = 0;

	if (len)
		buf[0] = '\0';
	if (lw == 0 || lw > TD_SUGGEST_WORD_MAX)
		return 0;
	for (i = 0; i < nr; i++) {
		size_t s = nearness(word, lw, names[i]);

		if (s == SIZE_MAX)
			continue;
		/* Insert in order of nearness, after the equally near ones; drop the farthest. */
		for (k = n; k > 0 && score[k - 1] > s; k--) {
			if (k < TD_SUGGEST_MAX) {
				best[k] = best[k - 1];
				score[k] = score[k - 1];
			}
		}
		if (k < TD_SUGGEST_MAX) {
			best[k] = i;
			score[k] = s;
			if (n < TD_SUGGEST_MAX)
				n++;
		}
	}
	for (k = 0; k < n && off < len; k++) {
		int w = snprintf(buf + off, len - off, "%s\"%s\"",
				 k == 0 ? "" : k + 1 == n ? " or " : ", ", names[best[k]]);

		if (w < 0)
			break;
		off += (size_t)w;
	}
	return n;
}
