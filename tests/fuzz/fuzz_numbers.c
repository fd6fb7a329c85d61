// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_numbers.c - td_parse_size(), td_parse_u64(), td_parse_bool(), td_format_size().
 *
 * The input, cut at its first NUL, is a value as a config file or a command
 * line would give it. Each parser is compared with a second, deliberately
 * plain reading of the grammar in config.h, written here from the header
 * alone: same verdict (0, -EINVAL or -ERANGE), same number, and the output
 * untouched on error. A size read back through td_format_size() and
 * td_parse_size() is the same number, and so is any 64-bit value taken from
 * the input's first bytes.
 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include "daemon/config.h"
#include "fuzz.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aULL

/* Decimal digits, at least one; -ERANGE past 2^64 - 1. */
static int ref_digits(const char *s, size_t n, uint64_t *out)
{
	unsigned __int128 v = 0;
	bool big = false;

	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned int)(s[i] - '0');
		if (v > UINT64_MAX) {
			big = true;
			v = 0;
		}
	}
	if (big)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

static int ref_size(const char *s, uint64_t *out)
{
	size_t n = strspn(s, "0123456789");
	const char *rest = s + n;
	unsigned int shift = 0;
	uint64_t v;
	int ret;

	if (n == 0)
		return -EINVAL;
	if (*rest) {
		const char *units = "KMGT";
		const char *u = memchr(units, toupper((unsigned char)*rest), 4);

		if (!u)
			return -EINVAL;
		shift = 10 * (unsigned int)(u - units + 1);
		rest++;
		if (*rest && strcasecmp(rest, "ib") != 0)
			return -EINVAL;
	}
	ret = ref_digits(s, n, &v);
	if (ret)
		return ret;
	if (shift && (v >> (64 - shift)) != 0)
		return -ERANGE;
	*out = v << shift;
	return 0;
}

static int ref_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	int ret = ref_digits(s, strlen(s), &v);

	if (ret)
		return ret;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

static int ref_bool(const char *s, bool *out)
{
	static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "1", "0"};

	for (size_t i = 0; i < TD_ARRAY_SIZE(words); i++) {
		if (strcasecmp(s, words[i]) == 0) {
			*out = i % 2 == 0;
			return 0;
		}
	}
	return -EINVAL;
}

static void check_format(uint64_t v)
{
	char buf[32];
	uint64_t back = SENTINEL;
	int n = td_format_size(v, buf, sizeof(buf));

	FUZZ_CHECK(n > 0 && (size_t)n < sizeof(buf));
	FUZZ_CHECK(strlen(buf) == (size_t)n);
	FUZZ_CHECK(td_parse_size(buf, &back) == 0);
	FUZZ_CHECK(back == v);
}

static void check_size(const char *s)
{
	uint64_t got = SENTINEL;
	uint64_t want = SENTINEL;
	int ret = td_parse_size(s, &got);
	int ref = ref_size(s, &want);

	if (ret != ref)
		fprintf(stderr, "td_parse_size(\"%s\") = %d, expected %d\n", s, ret, ref);
	FUZZ_CHECK(ret == ref);
	FUZZ_CHECK(got == want);
	if (ret == 0)
		check_format(got);
}

static void check_u64(const char *s)
{
	static const uint64_t ranges[][2] = {
	    {0, UINT64_MAX}, {1, 4096}, {4, 65536}, {0, 0}, {UINT64_MAX, UINT64_MAX},
	};

	for (size_t i = 0; i < TD_ARRAY_SIZE(ranges); i++) {
		uint64_t got = SENTINEL;
		uint64_t want = SENTINEL;
		int ret = td_parse_u64(s, ranges[i][0], ranges[i][1], &got);
		int ref = ref_u64(s, ranges[i][0], ranges[i][1], &want);

		FUZZ_CHECK(ret == ref);
		FUZZ_CHECK(got == want);
	}
}

static void check_bool(const char *s)
{
	bool got = false;
	bool want = false;
	int ret = td_parse_bool(s, &got);

	FUZZ_CHECK(ret == ref_bool(s, &want));
	FUZZ_CHECK(got == want);
	got = true;
	want = true;
	td_parse_bool(s, &got);
	ref_bool(s, &want);
	FUZZ_CHECK(got == want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	uint64_t v = 0;

	FUZZ_CHECK(s);
	memcpy(s, data, size);
	s[size] = '\0';
	check_size(s);
	check_u64(s);
	check_bool(s);
	for (size_t i = 0; i < size && i < 8; i++)
		v = v << 8 | data[i];
	check_format(v);
	free(s);
	return 0;
}
