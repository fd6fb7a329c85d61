// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_cdb.c - unit tests for the command descriptor block encoder/decoder.
 *
 * Expected bytes are written out in full from SBC's layouts rather than
 * computed, so a bug shared by the encoder and a helper here cannot hide.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "tagdisk/cdb.h"

/* Encode @cmd into a buffer pre-filled with garbage, so unzeroed bytes show. */
static int encode_dirty(uint8_t cdb[16], enum td_op op, uint64_t lba, uint32_t nr_blocks, bool fua)
{
	struct td_cdb_cmd cmd = {.op = op, .lba = lba, .nr_blocks = nr_blocks, .fua = fua};

	memset(cdb, 0xa5, 16);
	return td_cdb_encode(cdb, &cmd);
}

static void assert_encodes_to(enum td_op op, uint64_t lba, uint32_t nr_blocks, bool fua,
			      const uint8_t expect[16], int expect_len)
{
	uint8_t cdb[16];

	assert_int_equal(encode_dirty(cdb, op, lba, nr_blocks, fua), expect_len);
	assert_memory_equal(cdb, expect, 16);
}

static void assert_encode_einval(enum td_op op, uint64_t lba, uint32_t nr_blocks, bool fua)
{
	uint8_t cdb[16];

	assert_int_equal(encode_dirty(cdb, op, lba, nr_blocks, fua), -EINVAL);
}

/*
 * Decode exactly @len bytes copied into a heap block of that size, so ASan
 * and valgrind catch any read past @len. A zero length is passed as the end
 * pointer of a live block: any read through it is out of bounds.
 */
static int decode_exact(const uint8_t *bytes, size_t len, struct td_cdb_cmd *cmd)
{
	uint8_t *copy = malloc(len ? len : 1);
	int ret;

	assert_non_null(copy);
	if (len) {
		memcpy(copy, bytes, len);
		ret = td_cdb_decode(copy, len, cmd);
	} else {
		ret = td_cdb_decode(copy + 1, 0, cmd);
	}
	free(copy);
	return ret;
}

static void assert_decodes_to(const uint8_t *bytes, size_t len, enum td_op op, uint64_t lba,
			      uint32_t nr_blocks, bool fua)
{
	struct td_cdb_cmd cmd;

	memset(&cmd, 0xa5, sizeof(cmd));
	assert_int_equal(decode_exact(bytes, len, &cmd), 0);
	assert_int_equal(cmd.op, op);
	assert_int_equal(cmd.lba, lba);
	assert_int_equal(cmd.nr_blocks, nr_blocks);
	assert_int_equal(cmd.fua, fua);
}

static void assert_decode_einval(const uint8_t *bytes, size_t len)
{
	struct td_cdb_cmd cmd;

	assert_int_equal(decode_exact(bytes, len, &cmd), -EINVAL);
}

/* splitmix64: a fixed seed gives the same sequence on every run and machine. */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ---- encode: exact bytes ---- */

static void test_cdb_encode_read_fits_read10(void **state)
{
	static const uint8_t expect[16] = {0x28, 0x00, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x08};

	(void)state;
	assert_encodes_to(TD_OP_READ, 0x12345678, 8, false, expect, 10);
}

static void test_cdb_encode_write_fits_write10(void **state)
{
	static const uint8_t expect[16] = {0x2a, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x08};

	(void)state;
	assert_encodes_to(TD_OP_WRITE, 0x10, 8, false, expect, 10);
}

static void test_cdb_encode_max_lba32_and_len16_stays_10(void **state)
{
	static const uint8_t expect[16] = {0x28, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0xff, 0xff};

	(void)state;
	assert_encodes_to(TD_OP_READ, 0xffffffffULL, 0xffff, false, expect, 10);
}

static void test_cdb_encode_lba_above_32_bits_uses_read16(void **state)
{
	static const uint8_t expect[16] = {0x88, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
					   0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00};

	(void)state;
	assert_encodes_to(TD_OP_READ, 0x100000000ULL, 1, false, expect, 16);
}

static void test_cdb_encode_len_above_16_bits_uses_read16(void **state)
{
	static const uint8_t expect[16] = {0x88, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					   0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00};

	(void)state;
	assert_encodes_to(TD_OP_READ, 0, 0x10000, false, expect, 16);
}

static void test_cdb_encode_range_crossing_2_32_keeps_read10(void **state)
{
	static const uint8_t expect[16] = {0x28, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x02};

	(void)state;
	assert_encodes_to(TD_OP_READ, 0xffffffffULL, 2, false, expect, 10);
}

static void test_cdb_encode_large_write_uses_write16_full_fields(void **state)
{
	static const uint8_t expect[16] = {0x8a, 0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
					   0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x00, 0x00};

	(void)state;
	assert_encodes_to(TD_OP_WRITE, 0x0123456789abcdefULL, 0xfedcba98, false, expect, 16);
}

static void test_cdb_encode_fua_write10_sets_byte1_bit3(void **state)
{
	static const uint8_t expect[16] = {0x2a, 0x08, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x08};

	(void)state;
	assert_encodes_to(TD_OP_WRITE, 0x10, 8, true, expect, 10);
}

static void test_cdb_encode_fua_write16_sets_byte1_bit3(void **state)
{
	static const uint8_t expect[16] = {0x8a, 0x08, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
					   0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00};

	(void)state;
	assert_encodes_to(TD_OP_WRITE, 0x200000000ULL, 4, true, expect, 16);
}

static void test_cdb_encode_flush_is_sync_cache10_all_zero(void **state)
{
	static const uint8_t expect[16] = {0x35};

	(void)state;
	assert_encodes_to(TD_OP_FLUSH, 0, 0, false, expect, 10);
}

static void test_cdb_encode_discard_is_write_same16_unmap_ndob(void **state)
{
	static const uint8_t expect[16] = {0x93, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					   0x10, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00};

	(void)state;
	assert_encodes_to(TD_OP_DISCARD, 0x1000, 0x800, false, expect, 16);
}

static void test_cdb_encode_write_zeroes_is_write_same16_ndob_only(void **state)
{
	static const uint8_t expect[16] = {0x93, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					   0x00, 0x07, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00};

	(void)state;
	assert_encodes_to(TD_OP_WRITE_ZEROES, 7, 1, false, expect, 16);
}

static void test_cdb_encode_range_ending_at_uint64_max_is_valid(void **state)
{
	static const uint8_t expect[16] = {0x88, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					   0xff, 0xfe, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00};

	(void)state;
	assert_encodes_to(TD_OP_READ, UINT64_MAX - 1, 1, false, expect, 16);
}

/* ---- encode: rejections ---- */

static void test_cdb_encode_zero_blocks_returns_einval(void **state)
{
	(void)state;
	assert_encode_einval(TD_OP_READ, 0, 0, false);
	assert_encode_einval(TD_OP_WRITE, 100, 0, false);
	assert_encode_einval(TD_OP_WRITE, 100, 0, true);
	assert_encode_einval(TD_OP_DISCARD, 100, 0, false);
	assert_encode_einval(TD_OP_WRITE_ZEROES, 100, 0, false);
}

static void test_cdb_encode_range_overflowing_64_bits_returns_einval(void **state)
{
	static const enum td_op ops[] = {TD_OP_READ, TD_OP_WRITE, TD_OP_DISCARD,
					 TD_OP_WRITE_ZEROES};

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(ops); i++) {
		assert_encode_einval(ops[i], UINT64_MAX, 1, false);
		assert_encode_einval(ops[i], UINT64_MAX - 1, 2, false);
		assert_encode_einval(ops[i], UINT64_MAX - 0xfffe, UINT32_MAX, false);
	}
}

static void test_cdb_encode_fua_on_non_write_returns_einval(void **state)
{
	(void)state;
	assert_encode_einval(TD_OP_READ, 0, 8, true);
	assert_encode_einval(TD_OP_FLUSH, 0, 0, true);
	assert_encode_einval(TD_OP_DISCARD, 0, 8, true);
	assert_encode_einval(TD_OP_WRITE_ZEROES, 0, 8, true);
}

static void test_cdb_encode_partial_flush_returns_einval(void **state)
{
	(void)state;
	assert_encode_einval(TD_OP_FLUSH, 1, 0, false);
	assert_encode_einval(TD_OP_FLUSH, 0, 1, false);
	assert_encode_einval(TD_OP_FLUSH, 0x100000000ULL, 8, false);
}

static void test_cdb_encode_unknown_op_returns_einval(void **state)
{
	(void)state;
	assert_encode_einval((enum td_op)TD_OP_COUNT, 0, 8, false);
	assert_encode_einval((enum td_op)0x7fffffff, 0, 8, false);
}

static void test_cdb_encode_error_leaves_buffer_untouched(void **state)
{
	struct td_cdb_cmd cmd = {.op = TD_OP_READ, .lba = 0, .nr_blocks = 0};
	uint8_t cdb[16];
	uint8_t before[16];

	(void)state;
	memset(cdb, 0x5a, sizeof(cdb));
	memcpy(before, cdb, sizeof(cdb));
	assert_int_equal(td_cdb_encode(cdb, &cmd), -EINVAL);
	assert_memory_equal(cdb, before, sizeof(cdb));
}

/* ---- decode: exact fields ---- */

static void test_cdb_decode_read10_fields(void **state)
{
	static const uint8_t cdb[10] = {0x28, 0x00, 0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x08};

	(void)state;
	assert_decodes_to(cdb, sizeof(cdb), TD_OP_READ, 0x12345678, 8, false);
}

static void test_cdb_decode_write10_fua(void **state)
{
	static const uint8_t cdb[10] = {0x2a, 0x08, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x08};

	(void)state;
	assert_decodes_to(cdb, sizeof(cdb), TD_OP_WRITE, 0x10, 8, true);
}

static void test_cdb_decode_write16_fields(void **state)
{
	static const uint8_t cdb[16] = {0x8a, 0x08, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
					0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x00, 0x00};

	(void)state;
	assert_decodes_to(cdb, sizeof(cdb), TD_OP_WRITE, 0x0123456789abcdefULL, 0xfedcba98, true);
}

static void test_cdb_decode_read16_fields(void **state)
{
	static const uint8_t cdb[16] = {0x88, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
					0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00};

	(void)state;
	assert_decodes_to(cdb, sizeof(cdb), TD_OP_READ, 0x100000000ULL, 0x10000, false);
}

/* Chosen behaviour: FUA on a READ is ignored, not an error. */
static void test_cdb_decode_read_with_fua_bit_gives_fua_false(void **state)
{
	static const uint8_t cdb10[10] = {0x28, 0x08, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01};
	static const uint8_t cdb16[16] = {0x88, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
					  0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01};

	(void)state;
	assert_decodes_to(cdb10, sizeof(cdb10), TD_OP_READ, 1, 1, false);
	assert_decodes_to(cdb16, sizeof(cdb16), TD_OP_READ, 1, 1, false);
}

static void test_cdb_decode_sync_cache10_and_16_are_flush(void **state)
{
	static const uint8_t cdb10[10] = {0x35};
	static const uint8_t cdb16[16] = {0x91};

	(void)state;
	assert_decodes_to(cdb10, sizeof(cdb10), TD_OP_FLUSH, 0, 0, false);
	assert_decodes_to(cdb16, sizeof(cdb16), TD_OP_FLUSH, 0, 0, false);
}

static void test_cdb_decode_write_same_unmap_selects_discard(void **state)
{
	static const uint8_t discard[16] = {0x93, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					    0x10, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00};
	static const uint8_t zeroes[16] = {0x93, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					   0x10, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00};

	(void)state;
	assert_decodes_to(discard, sizeof(discard), TD_OP_DISCARD, 0x1000, 0x800, false);
	assert_decodes_to(zeroes, sizeof(zeroes), TD_OP_WRITE_ZEROES, 0x1000, 0x800, false);
}

/* Group number, control byte and uninterpreted flag bits (DPO, IMMED) are ignored. */
static void test_cdb_decode_ignores_group_control_and_hint_bits(void **state)
{
	static const uint8_t read10[10] = {0x28, 0x10, 0x00, 0x00, 0x00,
					   0x02, 0x1f, 0x00, 0x03, 0xff};
	static const uint8_t sync10[10] = {0x35, 0x02, 0x00, 0x00, 0x00,
					   0x00, 0x1f, 0x00, 0x00, 0xff};
	static const uint8_t ws16[16] = {0x93, 0xf1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					 0x00, 0x05, 0x00, 0x00, 0x00, 0x06, 0x3f, 0xff};

	(void)state;
	assert_decodes_to(read10, sizeof(read10), TD_OP_READ, 2, 3, false);
	assert_decodes_to(sync10, sizeof(sync10), TD_OP_FLUSH, 0, 0, false);
	assert_decodes_to(ws16, sizeof(ws16), TD_OP_WRITE_ZEROES, 5, 6, false);
}

/* ---- decode: round trip ---- */

static void test_cdb_decode_round_trips_random_encoded_commands(void **state)
{
	uint64_t rng = 0x7461676469736bULL;
	unsigned int seen[TD_OP_COUNT][2] = {{0}};

	(void)state;
	for (int i = 0; i < 5000; i++) {
		uint64_t r = rng_next(&rng);
		struct td_cdb_cmd in = {.op = (enum td_op)(r % TD_OP_COUNT)};
		struct td_cdb_cmd out;
		uint8_t cdb[16];
		int expect_len;
		int len;

		if (in.op != TD_OP_FLUSH) {
			/* Half small values (the (10) form), half spread over the full width. */
			in.lba = rng_next(&rng);
			if (r & 0x100)
				in.lba &= 0xffffffffULL;
			in.nr_blocks = (uint32_t)rng_next(&rng);
			if (r & 0x200)
				in.nr_blocks &= 0xffff;
			if (in.nr_blocks == 0)
				in.nr_blocks = 1;
			if (in.lba > UINT64_MAX - in.nr_blocks)
				in.lba = UINT64_MAX - in.nr_blocks;
			in.fua = in.op == TD_OP_WRITE && (r & 0x400);
		}
		if (in.op == TD_OP_FLUSH)
			expect_len = 10;
		else if (in.op == TD_OP_DISCARD || in.op == TD_OP_WRITE_ZEROES)
			expect_len = 16;
		else
			expect_len = in.lba <= UINT32_MAX && in.nr_blocks <= UINT16_MAX ? 10 : 16;

		len = td_cdb_encode(cdb, &in);
		assert_int_equal(len, expect_len);
		seen[in.op][len == 16]++;

		memset(&out, 0xa5, sizeof(out));
		assert_int_equal(decode_exact(cdb, (size_t)len, &out), 0);
		assert_int_equal(out.op, in.op);
		assert_int_equal(out.lba, in.lba);
		assert_int_equal(out.nr_blocks, in.nr_blocks);
		assert_int_equal(out.fua, in.fua);

		/* The other size is never accepted for the same opcode. */
		assert_decode_einval(cdb, len == 10 ? 16 : 10);
	}
	/* The generator really covered both forms of read and write, and every op. */
	assert_true(seen[TD_OP_READ][0] > 100 && seen[TD_OP_READ][1] > 100);
	assert_true(seen[TD_OP_WRITE][0] > 100 && seen[TD_OP_WRITE][1] > 100);
	assert_true(seen[TD_OP_FLUSH][0] > 100);
	assert_true(seen[TD_OP_DISCARD][1] > 100);
	assert_true(seen[TD_OP_WRITE_ZEROES][1] > 100);
}

/*
 * Random bytes at every length 0..32: decode must return 0 or -EINVAL without
 * reading past @len, and whatever it accepts must encode and decode again to
 * the same command.
 */
static void test_cdb_decode_random_bytes_accepts_only_encodable(void **state)
{
	static const uint8_t opcodes[] = {0x28, 0x2a, 0x35, 0x88, 0x8a, 0x91, 0x93, 0x00, 0x42};
	uint64_t rng = 0xc0ffee;
	unsigned int accepted = 0;

	(void)state;
	for (int i = 0; i < 20000; i++) {
		size_t len = (size_t)(rng_next(&rng) % 33);
		struct td_cdb_cmd cmd;
		struct td_cdb_cmd again;
		uint8_t bytes[32];
		uint8_t cdb[16];
		int ret;

		for (size_t j = 0; j < sizeof(bytes); j++)
			bytes[j] = (uint8_t)rng_next(&rng);
		/* Mostly known opcodes and the matching length, or nothing is accepted. */
		bytes[0] = opcodes[rng_next(&rng) % TD_ARRAY_SIZE(opcodes)];
		if (i % 2)
			len = bytes[0] == 0x28 || bytes[0] == 0x2a || bytes[0] == 0x35 ? 10 : 16;
		/* Clear the length high bytes now and then so zero-length ranges show up. */
		if (i % 3 == 0)
			memset(bytes + 7, 0, 7);

		ret = decode_exact(bytes, len, &cmd);
		if (ret != 0) {
			assert_int_equal(ret, -EINVAL);
			continue;
		}
		accepted++;
		ret = td_cdb_encode(cdb, &cmd);
		assert_true(ret == 10 || ret == 16);
		assert_int_equal(decode_exact(cdb, (size_t)ret, &again), 0);
		assert_int_equal(again.op, cmd.op);
		assert_int_equal(again.lba, cmd.lba);
		assert_int_equal(again.nr_blocks, cmd.nr_blocks);
		assert_int_equal(again.fua, cmd.fua);
	}
	assert_true(accepted > 1000);
}

/* ---- decode: rejections ---- */

static void test_cdb_decode_len_0_returns_einval(void **state)
{
	static const uint8_t cdb[16] = {0x28};

	(void)state;
	assert_decode_einval(cdb, 0);
}

static void test_cdb_decode_unknown_opcode_returns_einval(void **state)
{
	/* INQUIRY, WRITE SAME(10), UNMAP, VERIFY(16) and two unassigned values. */
	static const uint8_t opcodes[] = {0x00, 0x12, 0x41, 0x42, 0x8f, 0xff};
	uint8_t cdb[16] = {0, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(opcodes); i++) {
		cdb[0] = opcodes[i];
		for (size_t len = 1; len <= sizeof(cdb); len++)
			assert_decode_einval(cdb, len);
	}
}

static void test_cdb_decode_wrong_length_returns_einval(void **state)
{
	/* Each command is valid at its own length (checked first) and only there. */
	static const struct {
		uint8_t bytes[32];
		size_t len;
	} cases[] = {
	    {{0x28, 0, 0, 0, 0, 0, 0, 0, 1}, 10},
	    {{0x2a, 0, 0, 0, 0, 0, 0, 0, 1}, 10},
	    {{0x35}, 10},
	    {{0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 16},
	    {{0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 16},
	    {{0x91}, 16},
	    {{0x93, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 16},
	    {{0x93, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 16},
	};
	struct td_cdb_cmd cmd;

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		assert_int_equal(decode_exact(cases[i].bytes, cases[i].len, &cmd), 0);
		for (size_t len = 1; len <= sizeof(cases[i].bytes); len++) {
			if (len != cases[i].len)
				assert_decode_einval(cases[i].bytes, len);
		}
	}
}

static void test_cdb_decode_write_same_without_ndob_returns_einval(void **state)
{
	static const uint8_t unmap_only[16] = {0x93, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const uint8_t no_flags[16] = {0x93, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

	(void)state;
	assert_decode_einval(unmap_only, sizeof(unmap_only));
	assert_decode_einval(no_flags, sizeof(no_flags));
}

static void test_cdb_decode_partial_sync_cache_returns_einval(void **state)
{
	/* LBA and number-of-blocks bytes of each form. */
	static const size_t range10[] = {2, 3, 4, 5, 7, 8};
	uint8_t cdb[16];

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(range10); i++) {
		memset(cdb, 0, sizeof(cdb));
		cdb[0] = 0x35;
		cdb[range10[i]] = 0x01;
		assert_decode_einval(cdb, 10);
	}
	for (size_t pos = 2; pos <= 13; pos++) {
		memset(cdb, 0, sizeof(cdb));
		cdb[0] = 0x91;
		cdb[pos] = 0x80;
		assert_decode_einval(cdb, 16);
	}
}

/* Chosen behaviour: decode accepts only what encode could have produced. */
static void test_cdb_decode_zero_blocks_returns_einval(void **state)
{
	static const uint8_t read10[10] = {0x28, 0, 0, 0, 0, 5};
	static const uint8_t write10[10] = {0x2a, 0x08, 0, 0, 0, 5};
	static const uint8_t read16[16] = {0x88, 0, 0, 0, 0, 0, 0, 0, 0, 5};
	static const uint8_t write16[16] = {0x8a, 0, 0, 0, 0, 0, 0, 0, 0, 5};
	static const uint8_t discard[16] = {0x93, 0x09, 0, 0, 0, 0, 0, 0, 0, 5};
	static const uint8_t zeroes[16] = {0x93, 0x01, 0, 0, 0, 0, 0, 0, 0, 5};

	(void)state;
	assert_decode_einval(read10, sizeof(read10));
	assert_decode_einval(write10, sizeof(write10));
	assert_decode_einval(read16, sizeof(read16));
	assert_decode_einval(write16, sizeof(write16));
	assert_decode_einval(discard, sizeof(discard));
	assert_decode_einval(zeroes, sizeof(zeroes));
}

static void test_cdb_decode_range_overflowing_64_bits_returns_einval(void **state)
{
	static const uint8_t read16[16] = {0x88, 0,    0xff, 0xff, 0xff, 0xff, 0xff,
					   0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01};
	static const uint8_t ws16[16] = {0x93, 0x09, 0xff, 0xff, 0xff, 0xff, 0xff,
					 0xff, 0xff, 0xfe, 0x00, 0x00, 0x00, 0x02};
	static const uint8_t edge[16] = {0x8a, 0,    0xff, 0xff, 0xff, 0xff, 0xff,
					 0xff, 0xff, 0xfe, 0x00, 0x00, 0x00, 0x01};

	(void)state;
	assert_decode_einval(read16, sizeof(read16));
	assert_decode_einval(ws16, sizeof(ws16));
	assert_decodes_to(edge, sizeof(edge), TD_OP_WRITE, UINT64_MAX - 1, 1, false);
}

/* ---- format ---- */

static void test_cdb_format_writes_hex_pairs(void **state)
{
	static const uint8_t cdb[16] = {0x2a, 0x08, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x08};
	static const uint8_t ws[16] = {0x93, 0x09, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45,
				       0x67, 0x89, 0x00, 0x00, 0x00, 0xff, 0x00, 0x00};
	char buf[64];

	(void)state;
	assert_int_equal(td_cdb_format(cdb, 10, buf, sizeof(buf)), 29);
	assert_string_equal(buf, "2a 08 00 00 00 10 00 00 08 00");
	assert_int_equal(td_cdb_format(ws, 16, buf, sizeof(buf)), 47);
	assert_string_equal(buf, "93 09 ab cd ef 01 23 45 67 89 00 00 00 ff 00 00");
	assert_int_equal(td_cdb_format(ws, 1, buf, sizeof(buf)), 2);
	assert_string_equal(buf, "93");
}

static void test_cdb_format_len_0_is_empty_string(void **state)
{
	static const uint8_t cdb[1] = {0x28};
	char buf[8];

	(void)state;
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(td_cdb_format(cdb, 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
}

static void test_cdb_format_truncates_like_snprintf(void **state)
{
	static const uint8_t cdb[10] = {0x2a, 0x08, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x08};
	static const char full[] = "2a 08 00 00 00 10 00 00 08 00";
	char buf[40];

	(void)state;
	for (size_t size = 1; size <= sizeof(full) + 1; size++) {
		size_t used = TD_MIN(size, sizeof(full));

		memset(buf, 'x', sizeof(buf));
		assert_int_equal(td_cdb_format(cdb, 10, buf, size), 29);
		assert_memory_equal(buf, full, used - 1);
		assert_int_equal(buf[used - 1], '\0');
		/* Nothing written past @size. */
		for (size_t j = size; j < sizeof(buf); j++)
			assert_int_equal(buf[j], 'x');
	}
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(td_cdb_format(cdb, 10, buf, 5), 29);
	assert_string_equal(buf, "2a 0");
}

static void test_cdb_format_size_0_writes_nothing(void **state)
{
	static const uint8_t cdb[10] = {0x35};
	char buf[4] = {'x', 'x', 'x', 'x'};

	(void)state;
	assert_int_equal(td_cdb_format(cdb, 10, NULL, 0), 29);
	assert_int_equal(td_cdb_format(cdb, 10, buf, 0), 29);
	assert_memory_equal(buf, "xxxx", 4);
}

/* ---- names ---- */

static void test_cdb_opcode_name_known_and_unknown(void **state)
{
	(void)state;
	assert_string_equal(td_cdb_opcode_name(0x28), "READ(10)");
	assert_string_equal(td_cdb_opcode_name(0x2a), "WRITE(10)");
	assert_string_equal(td_cdb_opcode_name(0x35), "SYNCHRONIZE CACHE(10)");
	assert_string_equal(td_cdb_opcode_name(0x88), "READ(16)");
	assert_string_equal(td_cdb_opcode_name(0x8a), "WRITE(16)");
	assert_string_equal(td_cdb_opcode_name(0x91), "SYNCHRONIZE CACHE(16)");
	assert_string_equal(td_cdb_opcode_name(0x93), "WRITE SAME(16)");
	assert_string_equal(td_cdb_opcode_name(0x00), "UNKNOWN");
	assert_string_equal(td_cdb_opcode_name(0x41), "UNKNOWN");
	assert_string_equal(td_cdb_opcode_name(0x42), "UNKNOWN");
	assert_string_equal(td_cdb_opcode_name(0xff), "UNKNOWN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cdb_encode_read_fits_read10),
	    cmocka_unit_test(test_cdb_encode_write_fits_write10),
	    cmocka_unit_test(test_cdb_encode_max_lba32_and_len16_stays_10),
	    cmocka_unit_test(test_cdb_encode_lba_above_32_bits_uses_read16),
	    cmocka_unit_test(test_cdb_encode_len_above_16_bits_uses_read16),
	    cmocka_unit_test(test_cdb_encode_range_crossing_2_32_keeps_read10),
	    cmocka_unit_test(test_cdb_encode_large_write_uses_write16_full_fields),
	    cmocka_unit_test(test_cdb_encode_fua_write10_sets_byte1_bit3),
	    cmocka_unit_test(test_cdb_encode_fua_write16_sets_byte1_bit3),
	    cmocka_unit_test(test_cdb_encode_flush_is_sync_cache10_all_zero),
	    cmocka_unit_test(test_cdb_encode_discard_is_write_same16_unmap_ndob),
	    cmocka_unit_test(test_cdb_encode_write_zeroes_is_write_same16_ndob_only),
	    cmocka_unit_test(test_cdb_encode_range_ending_at_uint64_max_is_valid),
	    cmocka_unit_test(test_cdb_encode_zero_blocks_returns_einval),
	    cmocka_unit_test(test_cdb_encode_range_overflowing_64_bits_returns_einval),
	    cmocka_unit_test(test_cdb_encode_fua_on_non_write_returns_einval),
	    cmocka_unit_test(test_cdb_encode_partial_flush_returns_einval),
	    cmocka_unit_test(test_cdb_encode_unknown_op_returns_einval),
	    cmocka_unit_test(test_cdb_encode_error_leaves_buffer_untouched),
	    cmocka_unit_test(test_cdb_decode_read10_fields),
	    cmocka_unit_test(test_cdb_decode_write10_fua),
	    cmocka_unit_test(test_cdb_decode_write16_fields),
	    cmocka_unit_test(test_cdb_decode_read16_fields),
	    cmocka_unit_test(test_cdb_decode_read_with_fua_bit_gives_fua_false),
	    cmocka_unit_test(test_cdb_decode_sync_cache10_and_16_are_flush),
	    cmocka_unit_test(test_cdb_decode_write_same_unmap_selects_discard),
	    cmocka_unit_test(test_cdb_decode_ignores_group_control_and_hint_bits),
	    cmocka_unit_test(test_cdb_decode_round_trips_random_encoded_commands),
	    cmocka_unit_test(test_cdb_decode_random_bytes_accepts_only_encodable),
	    cmocka_unit_test(test_cdb_decode_len_0_returns_einval),
	    cmocka_unit_test(test_cdb_decode_unknown_opcode_returns_einval),
	    cmocka_unit_test(test_cdb_decode_wrong_length_returns_einval),
	    cmocka_unit_test(test_cdb_decode_write_same_without_ndob_returns_einval),
	    cmocka_unit_test(test_cdb_decode_partial_sync_cache_returns_einval),
	    cmocka_unit_test(test_cdb_decode_zero_blocks_returns_einval),
	    cmocka_unit_test(test_cdb_decode_range_overflowing_64_bits_returns_einval),
	    cmocka_unit_test(test_cdb_format_writes_hex_pairs),
	    cmocka_unit_test(test_cdb_format_len_0_is_empty_string),
	    cmocka_unit_test(test_cdb_format_truncates_like_snprintf),
	    cmocka_unit_test(test_cdb_format_size_0_writes_nothing),
	    cmocka_unit_test(test_cdb_opcode_name_known_and_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
