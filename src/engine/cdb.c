// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cdb.c - encode and decode tagdisk's SCSI-style command descriptor blocks.
 *
 * Layouts (byte offsets; multi-byte fields big-endian):
 *
 *   READ/WRITE(10)          0 opcode, 1 flags (FUA 0x08), 2-5 LBA, 6 group,
 *   SYNCHRONIZE CACHE(10)   7-8 number of blocks, 9 control
 *   READ/WRITE(16)          0 opcode, 1 flags, 2-9 LBA, 10-13 number of blocks,
 *   SYNCHRONIZE CACHE(16)   14 group, 15 control
 *   WRITE SAME(16)
 *
 * The encoder picks the (10) form whenever the LBA field and the length field
 * can hold the values; the rule is about the fields, so a range starting
 * below 2^32 may end above it and still use READ/WRITE(10). Discard and
 * write zeroes always use WRITE SAME(16) with NDOB set, so no data-out buffer
 * is ever needed for them.
 *
 * The decoder is the drive's only view of a command and is fed arbitrary
 * bytes by the fuzzer, so it never reads past @len and accepts only commands
 * the encoder could have produced, up to bits it does not interpret:
 *   - flag bits other than FUA (READ/WRITE) and UNMAP/NDOB (WRITE SAME), the
 *     group number and the control byte are ignored, as a drive ignores
 *     hints such as DPO;
 *   - FUA on a READ is ignored (fua = false): tagdisk's reads always come
 *     from the image, so forcing media access changes nothing;
 *   - a READ, WRITE or WRITE SAME of 0 blocks is rejected (SBC gives 0 a
 *     special meaning the drive does not implement: no transfer, or up to
 *     the end of the medium for WRITE SAME), as is a range whose end
 *     overflows 64 bits.
 * Hence any command decode accepts can be encoded again, and re-encoding it
 * yields a command that decodes to the same td_cdb_cmd.
 */
#include <errno.h>
#include <string.h>
#include "tagdisk/cdb.h"

#define CDB10_LEN 10
#define CDB16_LEN 16

/* Big-endian fields at any alignment: byte swaps through memcpy compile to a load or store. */
static void put_be16(uint8_t *p, uint16_t v)
{
	v = __builtin_bswap16(v);
	memcpy(p, &v, sizeof(v));
}

static void put_be32(uint8_t *p, uint32_t v)
{
	v = __builtin_bswap32(v);
	memcpy(p, &v, sizeof(v));
}

static void put_be64(uint8_t *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, sizeof(v));
}

static uint16_t get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return __builtin_bswap16(v);
}

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return __builtin_bswap32(v);
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return __builtin_bswap64(v);
}

/* A (10) or (16) command with the common LBA / number-of-blocks layout. */
static int put_rw(uint8_t cdb[16], uint8_t op10, uint8_t op16, uint8_t flags, uint64_t lba,
		  uint32_t nr_blocks)
{
	if (lba <= UINT32_MAX && nr_blocks <= UINT16_MAX) {
		cdb[0] = op10;
		cdb[1] = flags;
		put_be32(cdb + 2, (uint32_t)lba);
		put_be16(cdb + 7, (uint16_t)nr_blocks);
		return CDB10_LEN;
	}
	cdb[0] = op16;
	cdb[1] = flags;
	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, nr_blocks);
	return CDB16_LEN;
}

static bool range_valid(uint64_t lba, uint32_t nr_blocks)
{
	return nr_blocks != 0 && lba <= UINT64_MAX - nr_blocks;
}

int td_cdb_encode(uint8_t cdb[16], const struct td_cdb_cmd *cmd)
{
	uint8_t ws_flags = TD_CDB_NDOB;

	/* Validate everything first: on error @cdb is left as it was. */
	switch (cmd->op) {
	case TD_OP_READ:
	case TD_OP_DISCARD:
	case TD_OP_WRITE_ZEROES:
		if (cmd->fua)
			return -EINVAL;
		/* fall through */
	case TD_OP_WRITE:
		if (!range_valid(cmd->lba, cmd->nr_blocks))
			return -EINVAL;
		break;
	case TD_OP_FLUSH:
		if (cmd->fua || cmd->lba != 0 || cmd->nr_blocks != 0)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}

	memset(cdb, 0, CDB16_LEN);
	switch (cmd->op) {
	case TD_OP_READ:
		return put_rw(cdb, TD_CDB_READ_10, TD_CDB_READ_16, 0, cmd->lba, cmd->nr_blocks);
	case TD_OP_WRITE:
		return put_rw(cdb, TD_CDB_WRITE_10, TD_CDB_WRITE_16, cmd->fua ? TD_CDB_FUA : 0,
			      cmd->lba, cmd->nr_blocks);
	case TD_OP_FLUSH:
		cdb[0] = TD_CDB_SYNC_CACHE_10;
		return CDB10_LEN;
	case TD_OP_DISCARD:
		ws_flags |= TD_CDB_UNMAP;
		/* fall through */
	case TD_OP_WRITE_ZEROES:
		cdb[0] = TD_CDB_WRITE_SAME_16;
		cdb[1] = ws_flags;
		put_be64(cdb + 2, cmd->lba);
		put_be32(cdb + 10, cmd->nr_blocks);
		return CDB16_LEN;
	}
	return -EINVAL; /* not reached: the op was checked above */
}

static int decode_range(struct td_cdb_cmd *cmd, enum td_op op, uint64_t lba, uint32_t nr_blocks,
			bool fua)
{
	if (!range_valid(lba, nr_blocks))
		return -EINVAL;
	cmd->op = op;
	cmd->lba = lba;
	cmd->nr_blocks = nr_blocks;
	cmd->fua = fua;
	return 0;
}

static int decode_flush(struct td_cdb_cmd *cmd, uint64_t lba, uint32_t nr_blocks)
{
	/* Only the whole medium: tagdisk's flush is fdatasync on the image. */
	if (lba != 0 || nr_blocks != 0)
		return -EINVAL;
	cmd->op = TD_OP_FLUSH;
	cmd->lba = 0;
	cmd->nr_blocks = 0;
	cmd->fua = false;
	return 0;
}

int td_cdb_decode(const uint8_t *cdb, size_t len, struct td_cdb_cmd *cmd)
{
	uint8_t opcode;

	if (len == 0)
		return -EINVAL;
	opcode = cdb[0];

	switch (opcode) {
	case TD_CDB_READ_10:
	case TD_CDB_WRITE_10:
	case TD_CDB_SYNC_CACHE_10:
		if (len != CDB10_LEN)
			return -EINVAL;
		break;
	case TD_CDB_READ_16:
	case TD_CDB_WRITE_16:
	case TD_CDB_SYNC_CACHE_16:
	case TD_CDB_WRITE_SAME_16:
		if (len != CDB16_LEN)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}

	/* From here on the length matches the opcode's layout. */
	switch (opcode) {
	case TD_CDB_READ_10:
		return decode_range(cmd, TD_OP_READ, get_be32(cdb + 2), get_be16(cdb + 7), false);
	case TD_CDB_WRITE_10:
		return decode_range(cmd, TD_OP_WRITE, get_be32(cdb + 2), get_be16(cdb + 7),
				    cdb[1] & TD_CDB_FUA);
	case TD_CDB_SYNC_CACHE_10:
		return decode_flush(cmd, get_be32(cdb + 2), get_be16(cdb + 7));
	case TD_CDB_READ_16:
		return decode_range(cmd, TD_OP_READ, get_be64(cdb + 2), get_be32(cdb + 10), false);
	case TD_CDB_WRITE_16:
		return decode_range(cmd, TD_OP_WRITE, get_be64(cdb + 2), get_be32(cdb + 10),
				    cdb[1] & TD_CDB_FUA);
	case TD_CDB_SYNC_CACHE_16:
		return decode_flush(cmd, get_be64(cdb + 2), get_be32(cdb + 10));
	case TD_CDB_WRITE_SAME_16:
		/* Without NDOB the command would carry a data block tagdisk never sends. */
		if (!(cdb[1] & TD_CDB_NDOB))
			return -EINVAL;
		return decode_range(cmd,
				    (cdb[1] & TD_CDB_UNMAP) ? TD_OP_DISCARD : TD_OP_WRITE_ZEROES,
				    get_be64(cdb + 2), get_be32(cdb + 10), false);
	}
	return -EINVAL; /* not reached: the opcode was checked above */
}

size_t td_cdb_format(const uint8_t *cdb, size_t len, char *buf, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	/* "xx" per byte, a space between bytes. */
	size_t full = len ? len * 3 - 1 : 0;
	size_t room;
	size_t pos;

	if (size == 0)
		return full;
	room = TD_MIN(full, size - 1);
	for (pos = 0; pos < room; pos++) {
		uint8_t byte = cdb[pos / 3];

		switch (pos % 3) {
		case 0:
			buf[pos] = hex[byte >> 4];
			break;
		case 1:
			buf[pos] = hex[byte & 0xf];
			break;
		default:
			buf[pos] = ' ';
			break;
		}
	}
	buf[room] = '\0';
	return full;
}

const char *td_cdb_opcode_name(uint8_t opcode)
{
	switch (opcode) {
	case TD_CDB_READ_10:
		return "READ(10)";
	case TD_CDB_WRITE_10:
		return "WRITE(10)";
	case TD_CDB_SYNC_CACHE_10:
		return "SYNCHRONIZE CACHE(10)";
	case TD_CDB_READ_16:
		return "READ(16)";
	case TD_CDB_WRITE_16:
		return "WRITE(16)";
	case TD_CDB_SYNC_CACHE_16:
		return "SYNCHRONIZE CACHE(16)";
	case TD_CDB_WRITE_SAME_16:
		return "WRITE SAME(16)";
	default:
		return "UNKNOWN";
	}
}
