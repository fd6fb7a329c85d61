/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz_config.h - what any struct td_config must look like, whatever was fed to it.
 *
 * Every value reaches the config through one parser per type that checks
 * its range, so after any sequence of loads and sets, accepted or refused,
 * each field holds its default or a value within the range config.c
 * documents for its key. Shared by the file and the td_config_set harnesses.
 *
 * LOCKING: none.
 */
#ifndef TAGDISK_FUZZ_CONFIG_H
#define TAGDISK_FUZZ_CONFIG_H

#include <string.h>
#include "daemon/config.h"
#include "fuzz.h"
#include "tagdisk/elevator.h"
#include "tagdisk/tag.h"

#define FUZZ_IN(v, lo, hi) ((v) >= (lo) && (v) <= (hi))

static inline void fuzz_check_name(const char *name)
{
	size_t len = strnlen(name, TD_CONFIG_NAME_MAX + 1);

	FUZZ_CHECK(len >= 1 && len <= TD_CONFIG_NAME_MAX);
	FUZZ_CHECK(!strchr(name, '/'));
	FUZZ_CHECK(strcmp(name, ".") != 0 && strcmp(name, "..") != 0);
	for (const char *p = name; *p; p++)
		FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
}

/* An [rbd] name: unset, or 1..255 bytes without '/', '@' or a control character. */
static inline void fuzz_check_rbd_name(const char *name)
{
	size_t len;

	if (!name)
		return;
	len = strlen(name);
	FUZZ_CHECK(len >= 1 && len <= TD_CONFIG_RBD_NAME_MAX);
	for (const char *p = name; *p; p++)
		FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f && *p != '/' && *p != '@');
}

/* An [nbd] uri: unset, or a known scheme and no blank or control character. */
static inline void fuzz_check_nbd_uri(const char *uri)
{
	if (!uri)
		return;
	FUZZ_CHECK(strncmp(uri, "nbd://", 6) == 0 || strncmp(uri, "nbd+unix://", 11) == 0);
	for (const char *p = uri; *p; p++)
		FUZZ_CHECK((unsigned char)*p > 0x20 && *p != 0x7f);
}

static inline void fuzz_check_config(const struct td_config *c)
{
	char err[512];

	FUZZ_CHECK(!c->image || c->image[0]);
	FUZZ_CHECK(!c->mountpoint || c->mountpoint[0]);
	FUZZ_CHECK(!c->socket || c->socket[0]);
	FUZZ_CHECK(!c->socket_group || c->socket_group[0]);
	FUZZ_CHECK(c->size_bytes <= (uint64_t)INT64_MAX);
	fuzz_check_name(c->name);
	FUZZ_CHECK(c->logical_block_size == 512 || c->logical_block_size == 4096);
	FUZZ_CHECK(c->mode == TD_MODE_RQ || c->mode == TD_MODE_BIO || c->mode == TD_MODE_MQ);
	FUZZ_CHECK(c->nr_hw_queues <= TD_QUEUE_HW_MAX);
	FUZZ_CHECK(memchr(c->elevator, '\0', sizeof(c->elevator)) && td_elv_find(c->elevator));
	FUZZ_CHECK(FUZZ_IN(c->nr_requests, 4, 65536));
	FUZZ_CHECK(FUZZ_IN(c->max_sectors, 8, 65536));
	FUZZ_CHECK(FUZZ_IN(c->tunables.read_expire_ms, 1, 3600000));
	FUZZ_CHECK(FUZZ_IN(c->tunables.write_expire_ms, 1, 3600000));
	FUZZ_CHECK(FUZZ_IN(c->tunables.fifo_batch, 1, 4096));
	FUZZ_CHECK(c->tunables.writes_starved <= 1024);
	FUZZ_CHECK(FUZZ_IN(c->depth, 1, TD_TAG_DEPTH_MAX));
	FUZZ_CHECK(c->workers <= 256);
	FUZZ_CHECK(c->model == TD_MODEL_NONE || c->model == TD_MODEL_HDD ||
		   c->model == TD_MODEL_SSD);
	FUZZ_CHECK(FUZZ_IN(c->hdd.rpm, 1000, 30000));
	FUZZ_CHECK(c->hdd.seek_track_us <= 1000000);
	FUZZ_CHECK(c->hdd.seek_full_us <= 10000000);
	FUZZ_CHECK(FUZZ_IN(c->hdd.transfer_mb_s, 1, 100000));
	FUZZ_CHECK(c->hdd.overhead_us <= 1000000);
	FUZZ_CHECK(FUZZ_IN(c->hdd.sectors_per_track, 8, 1048576));
	FUZZ_CHECK(c->ssd.latency_us <= 10000000);
	FUZZ_CHECK(FUZZ_IN(c->ssd.transfer_mb_s, 1, 1000000));
	FUZZ_CHECK(c->write_cache == TD_WC_WRITEBACK || c->write_cache == TD_WC_WRITETHROUGH ||
		   c->write_cache == TD_WC_VOLATILE);
	FUZZ_CHECK(FUZZ_IN(c->cache_size, 1ULL << 20, 16ULL << 30));
	FUZZ_CHECK(c->command_timeout_ms <= 3600000);
	FUZZ_CHECK(c->max_retries <= 100);
	FUZZ_CHECK(c->shutdown_timeout_ms <= 3600000);
	FUZZ_CHECK(c->socket_mode <= 0777);
	FUZZ_CHECK(c->backend == TD_CONFIG_BACKEND_FILE || c->backend == TD_CONFIG_BACKEND_RBD ||
		   c->backend == TD_CONFIG_BACKEND_NBD);
	fuzz_check_rbd_name(c->rbd_pool);
	fuzz_check_rbd_name(c->rbd_image);
	fuzz_check_rbd_name(c->rbd_id);
	FUZZ_CHECK(!c->rbd_conf || c->rbd_conf[0]);
	FUZZ_CHECK(!c->rbd_keyring || c->rbd_keyring[0]);
	fuzz_check_nbd_uri(c->nbd_uri);
	FUZZ_CHECK(FUZZ_IN(c->nbd_connections, 1, TD_CONFIG_NBD_CONNECTIONS_MAX));

	/* The file-free checks take any such config without tripping. */
	memset(err, 0x5a, sizeof(err));
	if (td_config_check(c, err, sizeof(err)))
		FUZZ_CHECK(fuzz_terminated(err, sizeof(err)) && err[0]);
}

#endif /* TAGDISK_FUZZ_CONFIG_H */
