/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cdb.h - SCSI-style 16-byte command descriptor blocks.
 *
 * Prep encodes each request into a CDB; the drive decodes the CDB (never the
 * request's fields) to learn what to do. Addresses are logical block
 * addresses in units of the disk's logical block size. Multi-byte fields are
 * big-endian, as in SBC.
 *
 *   read          READ(10)  0x28 when the LBA fits 32 bits and the length 16
 *                 bits, else READ(16) 0x88
 *   write         WRITE(10) 0x2a / WRITE(16) 0x8a, FUA bit (byte 1, bit 3)
 *   flush         SYNCHRONIZE CACHE(10) 0x35, LBA 0 and 0 blocks: the whole
 *                 medium (SYNCHRONIZE CACHE(16) 0x91 is decoded too)
 *   discard       WRITE SAME(16) 0x93 with UNMAP (byte 1, bit 3) and NDOB
 *                 (byte 1, bit 0): no data-out buffer
 *   write zeroes  WRITE SAME(16) 0x93 with NDOB only
 *
 * Pure functions, no state, thread safe.
 */
#ifndef TAGDISK_CDB_H
#define TAGDISK_CDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "tagdisk/types.h"

#define TD_CDB_READ_10		 0x28
#define TD_CDB_WRITE_10		 0x2a
#define TD_CDB_SYNC_CACHE_10	 0x35
#define TD_CDB_READ_16		 0x88
#define TD_CDB_WRITE_16		 0x8a
#define TD_CDB_SYNC_CACHE_16	 0x91
#define TD_CDB_WRITE_SAME_16	 0x93

#define TD_CDB_FUA   0x08 /* byte 1 of READ/WRITE(10/16) */
#define TD_CDB_UNMAP 0x08 /* byte 1 of WRITE SAME(16) */
#define TD_CDB_NDOB  0x01 /* byte 1 of WRITE SAME(16) */

/* What a command asks for, in logical blocks. */
struct td_cdb_cmd {
	enum td_op op;
	uint64_t lba;
	uint32_t nr_blocks; /* 0 for flush (whole medium) */
	bool fua;	    /* writes only */
};

/*
 * Encode @cmd into @cdb (16 bytes, unused bytes zeroed).
 * Return: the CDB length (10 or 16), or -EINVAL when @cmd cannot be expressed:
 * a read, write, discard or write-zeroes of 0 blocks, an LBA range that
 * overflows 64 bits, or FUA on anything but a write.
 */
int td_cdb_encode(uint8_t cdb[16], const struct td_cdb_cmd *cmd) td_nonnull(1, 2);

/*
 * Decode the @len bytes at @cdb into @cmd.
 * Return: 0, or -EINVAL for an unknown opcode, a length that does not match
 * the opcode (10 or 16 bytes), a WRITE SAME without NDOB, a
 * SYNCHRONIZE CACHE of a partial range, a READ, WRITE or WRITE SAME of 0
 * blocks, or a range past 2^64: whatever decodes also encodes. Bits tagdisk
 * does not use (group, control, DPO, FUA on a read) are ignored.
 * @cmd is undefined on error.
 */
int td_cdb_decode(const uint8_t *cdb, size_t len, struct td_cdb_cmd *cmd) td_nonnull(1, 3);

/*
 * Format @len bytes of @cdb as lowercase hex pairs separated by spaces into
 * @buf ("2a 00 00 00 00 08 00 00 08 00"), always NUL-terminated when @size > 0.
 * Return: the length of the full string (as snprintf).
 */
size_t td_cdb_format(const uint8_t *cdb, size_t len, char *buf, size_t size) td_nonnull(1);

/* Return: the SCSI name of @opcode ("READ(10)", ...), or "UNKNOWN". */
const char *td_cdb_opcode_name(uint8_t opcode);

#endif /* TAGDISK_CDB_H */
