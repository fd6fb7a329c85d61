/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * wlog_fmt.h - the write log's on-disk format: the one Linux's dm-log-writes
 * target writes (version 1) and xfstests' replay-log reads. The daemon writes
 * it (tagdisk/wlog.h) and tagdisk-replay reads it back.
 *
 * The log is a sequence of "sectors" of the logged disk's logical block size
 * (512 or 4096 bytes, the super block says which). Sector 0 holds the super
 * block, zero-padded; entries follow from sector 1, each one sector holding
 * its header (zero-padded), then its data:
 *
 *   super block (sector 0)            entry header (first sector of an entry)
 *   offset size field                 offset size field
 *        0    8 magic                      0    8 sector      first sector written
 *        8    8 version (1)                8    8 nr_sectors  length in sectors
 *       16    8 nr_entries                16    8 flags       TD_WLOG_F_*
 *       24    4 sectorsize                24    8 data_len    bytes of mark text
 *       28    4 zero                      32    - mark text (MARK only), NUL-padded
 *       32    8 "tagdisk1" (extension)
 *       40    8 disk size in bytes
 *
 * Every field is little-endian; sectors in entries count sectorsize units,
 * not 512-byte ones. A write (FUA or not) is followed by nr_sectors sectors of
 * data; a discard (DISCARD) covers nr_sectors but carries none; a flush
 * (FLUSH) and a mark (MARK, its name in the header sector after the 32 bytes
 * of fields, data_len its length) have nr_sectors 0. METADATA is defined for
 * completeness: a disk behind FUSE never learns which writes are metadata.
 *
 * nr_entries counts the entries a reader may trust: those after it may be
 * missing or half written (a log whose writer was killed). The two fields at
 * byte 32 are tagdisk's: they name the size of the logged disk, so a replay
 * onto a disk of another size is refused. Readers of the kernel's format
 * ignore them (replay-log reads the first 32 bytes), and a log without them
 * (one the kernel wrote) is read without the size check.
 *
 * LOCKING: none; these functions have no state.
 */
#ifndef TAGDISK_WLOG_FMT_H
#define TAGDISK_WLOG_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"

#define TD_WLOG_MAGIC	0x6a736677736872ULL
#define TD_WLOG_VERSION 1ULL

/* Entry flags, as dm-log-writes defines them. */
#define TD_WLOG_F_FLUSH	   (1ULL << 0)
#define TD_WLOG_F_FUA	   (1ULL << 1)
#define TD_WLOG_F_DISCARD  (1ULL << 2)
#define TD_WLOG_F_MARK	   (1ULL << 3)
#define TD_WLOG_F_METADATA (1ULL << 4)
#define TD_WLOG_F_ALL	   ((1ULL << 5) - 1)

/* Bytes of an entry header's fields; the rest of its sector is mark text or zeroes. */
#define TD_WLOG_ENTRY_LEN 32
/* Bytes of the super block's fields, tagdisk's extension included. */
#define TD_WLOG_SUPER_LEN 48
/* The extension's tag at byte 32 of the super block: "tagdisk1", little-endian. */
#define TD_WLOG_EXT_MAGIC 0x316b736964676174ULL

/* Return: the longest mark name a log of @sectorsize bytes holds (one byte stays NUL). */
static inline size_t td_wlog_mark_max(uint32_t sectorsize)
{
	return sectorsize - TD_WLOG_ENTRY_LEN - 1;
}

/* Return: true for a sector size a log may have (512 or 4096, as a disk's logical blocks). */
static inline bool td_wlog_sectorsize_valid(uint64_t sectorsize)
{
	return sectorsize == 512 || sectorsize == 4096;
}

struct td_wlog_super {
	uint64_t magic;
	uint64_t version;
	uint64_t nr_entries;
	uint32_t sectorsize;
	uint64_t disk_bytes; /* 0: unknown (no tagdisk extension) */
};

struct td_wlog_entry {
	uint64_t sector;     /* in sectorsize units */
	uint64_t nr_sectors; /* in sectorsize units */
	uint64_t flags;	     /* TD_WLOG_F_* */
	uint64_t data_len;   /* MARK: bytes of its name; else 0 */
};

/*
 * Lay @s out at @out, @len bytes (at least TD_WLOG_SUPER_LEN; the rest is
 * zeroed): the kernel's fields, then the extension when @s->disk_bytes is set.
 */
void td_wlog_encode_super(const struct td_wlog_super *s, uint8_t *out, size_t len)
	td_nonnull(1, 2);

/*
 * Read the super block at @in (at least TD_WLOG_SUPER_LEN bytes).
 * Return: 0; -EINVAL for a wrong magic, -EPROTO for another version,
 * -EBADMSG for a sector size other than 512 or 4096. *@s is filled in any case.
 */
int td_wlog_decode_super(const uint8_t *in, struct td_wlog_super *s) td_nonnull(1, 2);

/* Lay @e out in the TD_WLOG_ENTRY_LEN bytes at @out. */
void td_wlog_encode_entry(const struct td_wlog_entry *e, uint8_t out[TD_WLOG_ENTRY_LEN])
	td_nonnull(1, 2);
/* Read the header at @in into @e. */
void td_wlog_decode_entry(const uint8_t in[TD_WLOG_ENTRY_LEN], struct td_wlog_entry *e)
	td_nonnull(1, 2);

/* Return: the data sectors that follow @e's header sector (a discard carries none). */
static inline uint64_t td_wlog_entry_data_sectors(const struct td_wlog_entry *e)
{
	return (e->flags & TD_WLOG_F_DISCARD) ? 0 : e->nr_sectors;
}

/*
 * Write "FLUSH|FUA" and the like (replay-log's names, "NONE" for no flag,
 * UNKNOWN.0x.. for others) into @buf. Return: @buf.
 */
const char *td_wlog_flags_name(uint64_t flags, char *buf, size_t len) td_nonnull(2);

#endif /* TAGDISK_WLOG_FMT_H */
