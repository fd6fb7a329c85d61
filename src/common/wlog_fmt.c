// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * wlog_fmt.c - the write log's super block and entry headers, laid out
 * little-endian whatever the host (layout in wlog_fmt.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "common/wlog_fmt.h"

static void put_le(uint8_t *p, uint64_t v, unsigned int bytes)
{
	for (unsigned int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned int bytes)
{
	uint64_t v = 0;

	for (unsigned int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

void td_wlog_encode_super(const struct td_wlog_super *s, uint8_t *out, size_t len)
{
	memset(out, 0, len);
	put_le(out, s->magic, 8);
	put_le(out + 8, s->version, 8);
	put_le(out + 16, s->nr_entries, 8);
	put_le(out + 24, s->sectorsize, 4);
	if (s->disk_bytes) {
		put_le(out + 32, TD_WLOG_EXT_MAGIC, 8);
		put_le(out + 40, s->disk_bytes, 8);
	}
}

int td_wlog_decode_super(const uint8_t *in, struct td_wlog_super *s)
{
	s->magic = get_le(in, 8);
	s->version = get_le(in + 8, 8);
	s->nr_entries = get_le(in + 16, 8);
	s->sectorsize = (uint32_t)get_le(in + 24, 4);
	s->disk_bytes = get_le(in + 32, 8) == TD_WLOG_EXT_MAGIC ? get_le(in + 40, 8) : 0;
	if (s->magic != TD_WLOG_MAGIC)
		return -EINVAL;
	if (s->version != TD_WLOG_VERSION)
		return -EPROTO;
	if (!td_wlog_sectorsize_valid(s->sectorsize))
		return -EBADMSG;
	return 0;
}

void td_wlog_encode_entry(const struct td_wlog_entry *e, uint8_t out[TD_WLOG_ENTRY_LEN])
{
	put_le(out, e->sector, 8);
	put_le(out + 8, e->nr_sectors, 8);
	put_le(out + 16, e->flags, 8);
	put_le(out + 24, e->data_len, 8);
}

void td_wlog_decode_entry(const uint8_t in[TD_WLOG_ENTRY_LEN], struct td_wlog_entry *e)
{
	e->sector = get_le(in, 8);
	e->nr_sectors = get_le(in + 8, 8);
	e->flags = get_le(in + 16, 8);
	e->data_len = get_le(in + 24, 8);
}

const char *td_wlog_flags_name(uint64_t flags, char *buf, size_t len)
{
	static const struct {
		uint64_t flag;
		const char *name;
	} names[] = {
		{ TD_WLOG_F_FLUSH, "FLUSH" },	    { TD_WLOG_F_FUA, "FUA" },
		{ TD_WLOG_F_DISCARD, "DISCARD" },   { TD_WLOG_F_MARK, "MARK" },
		{ TD_WLOG_F_METADATA, "METADATA" },
	};
	size_t used = 0;

	if (!len)
		return buf;
	buf[0] = '\0';
	for (size_t i = 0; i < TD_ARRAY_SIZE(names) && used < len; i++) {
		if (!(flags & names[i].flag))
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? "|" : "",
					 names[i].name);
		flags &= ~names[i].flag;
	}
	if (flags && used < len)
		used += (size_t)snprintf(buf + used, len - used, "%sUNKNOWN.0x%llx", used ? "|" : "",
					 (unsigned long long)flags);
	if (!used)
		snprintf(buf, len, "NONE");
	return buf;
}
