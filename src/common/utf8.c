// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * utf8.c - strict UTF-8 checks (utf8.h).
 *
 * The lead byte gives the length; the ranges allowed for the second byte
 * after E0, ED, F0 and F4 exclude the overlong forms, the surrogates and the
 * code points past U+10FFFF (RFC 3629, table 3-7 of the Unicode standard),
 * so no sequence needs decoding to be judged.
 */
#include "common/utf8.h"

size_t td_utf8_seq(const char *s, size_t avail)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned char c = p[0];
	unsigned char lo = 0x80;
	unsigned char hi = 0xbf;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c < 0xc2)
		return 0; /* a continuation byte, or C0/C1: always overlong */
	if (c < 0xe0) {
		n = 2;
	} else if (c < 0xf0) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c < 0xf5) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (avail < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

bool td_utf8_valid(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t n = td_utf8_seq(s + i, len - i);

		if (!n)
			return false;
		i += n;
	}
	return true;
}
