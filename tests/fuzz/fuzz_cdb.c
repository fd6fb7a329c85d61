// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_cdb.c - td_cdb_decode() on arbitrary bytes, and the round trip.
 *
 * The input is the CDB, of any length. cdb.h promises that whatever decodes
 * also encodes, so a decoded command must pass td_cdb_encode(), and the
 * encoded CDB must decode to the same command: same op, LBA, block count and
 * FUA. The decoded command itself must be one the encoder accepts (a flush of
 * the whole medium, or a non-empty range below 2^64, FUA only on writes), and
 * the CDB length must be the one its opcode has.
 *
 * The other direction too: the first 14 bytes, read as a command (op, LBA,
 * block count, FUA), either fail to encode or encode to a CDB that decodes
 * back to that very command. td_cdb_format() and td_cdb_opcode_name() see the
 * same bytes, with buffers from empty to roomy.
 */
#include <errno.h>
#include <string.h>
#include "fuzz.h"
#include "tagdisk/cdb.h"

static bool same_cmd(const struct td_cdb_cmd *a, const struct td_cdb_cmd *b)
{
	return a->op == b->op && a->lba == b->lba && a->nr_blocks == b->nr_blocks &&
	       a->fua == b->fua;
}

static bool cmd_well_formed(const struct td_cdb_cmd *c)
{
	switch (c->op) {
	case TD_OP_FLUSH:
		return c->lba == 0 && c->nr_blocks == 0 && !c->fua;
	case TD_OP_WRITE:
		break;
	case TD_OP_READ:
	case TD_OP_DISCARD:
	case TD_OP_WRITE_ZEROES:
		if (c->fua)
			return false;
		break;
	default:
		return false;
	}
	return c->nr_blocks != 0 && c->lba <= UINT64_MAX - c->nr_blocks;
}

static size_t opcode_len(uint8_t opcode)
{
	switch (opcode) {
	case TD_CDB_READ_10:
	case TD_CDB_WRITE_10:
	case TD_CDB_SYNC_CACHE_10:
		return 10;
	case TD_CDB_READ_16:
	case TD_CDB_WRITE_16:
	case TD_CDB_SYNC_CACHE_16:
	case TD_CDB_WRITE_SAME_16:
		return 16;
	default:
		return 0;
	}
}

/* Encode @cmd; when that works, the CDB must decode to @cmd again. */
static void check_encode(const struct td_cdb_cmd *cmd)
{
	struct td_cdb_cmd again;
	uint8_t cdb[16];
	int len;

	memset(cdb, 0xa5, sizeof(cdb));
	len = td_cdb_encode(cdb, cmd);
	if (len < 0) {
		FUZZ_CHECK(len == -EINVAL);
		FUZZ_CHECK(!cmd_well_formed(cmd));
		return;
	}
	FUZZ_CHECK(cmd_well_formed(cmd));
	FUZZ_CHECK(len == 10 || len == 16);
	FUZZ_CHECK(opcode_len(cdb[0]) == (size_t)len);
	for (int i = len; i < 16; i++)
		FUZZ_CHECK(cdb[i] == 0);
	FUZZ_CHECK(td_cdb_decode(cdb, (size_t)len, &again) == 0);
	FUZZ_CHECK(same_cmd(cmd, &again));
}

static void check_format(const uint8_t *data, size_t size)
{
	static const size_t sizes[] = {0, 1, 2, 3, 17, 64};
	size_t n = TD_MIN(size, (size_t)32);
	char buf[128];

	for (size_t i = 0; i < TD_ARRAY_SIZE(sizes); i++) {
		size_t full;

		memset(buf, 0x5a, sizeof(buf));
		full = td_cdb_format(data, n, buf, sizes[i]);
		FUZZ_CHECK(full == (n ? n * 3 - 1 : 0));
		if (sizes[i]) {
			FUZZ_CHECK(strlen(buf) == TD_MIN(full, sizes[i] - 1));
		} else {
			FUZZ_CHECK((unsigned char)buf[0] == 0x5a);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_cdb_cmd cmd;
	uint8_t *copy;
	int ret;

	/* An exact-size copy, so reading past @size is an ASan report, not luck. */
	copy = malloc(size ? size : 1);
	FUZZ_CHECK(copy);
	memcpy(copy, data, size);
	memset(&cmd, 0xa5, sizeof(cmd));
	ret = td_cdb_decode(copy, size, &cmd);
	if (ret == 0) {
		FUZZ_CHECK(opcode_len(copy[0]) == size);
		check_encode(&cmd);
	} else {
		FUZZ_CHECK(ret == -EINVAL);
	}
	if (size)
		FUZZ_CHECK(td_cdb_opcode_name(copy[0]) != NULL);
	check_format(copy, size);
	free(copy);

	if (size >= 14) {
		struct td_cdb_cmd made = {
		    .op = (enum td_op)(data[0] % (TD_OP_COUNT + 1)),
		    .fua = data[1] & 1,
		};

		/* Small values are likelier than whole random words: let byte 1 pick. */
		for (int i = 0; i < 8; i++)
			made.lba = made.lba << 8 | data[2 + i];
		for (int i = 0; i < 4; i++)
			made.nr_blocks = made.nr_blocks << 8 | data[10 + i];
		if (data[1] & 2)
			made.lba >>= 32;
		if (data[1] & 4)
			made.nr_blocks >>= 16;
		check_encode(&made);
	}
	return 0;
}
