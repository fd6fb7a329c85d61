// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_config.c - unit tests for tagdiskd's configuration and command line.
 *
 * Expected values and messages are written out in full. Files are written
 * under a fresh mkdtemp() directory per test and removed afterwards; the
 * example etc/tagdisk.ini is read relative to the repository root, where the
 * tests run.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "daemon/config.h"
#include "tagdisk/backend.h"

#ifndef TD_VERSION
#define TD_VERSION "unknown"
#endif

#define EXAMPLE_INI "etc/tagdisk.ini"

struct tmp {
	char dir[64];
	char err[1024];
	const void *param; /* a table-driven test's case (cmocka prestate) */
};

static int setup_tmp(void **state)
{
	struct tmp *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/tagdisk-config.XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	t->param = *state;
	*state = t;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown_tmp(void **state)
{
	struct tmp *t = *state;

	nftw(t->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(t);
	return 0;
}

/* Return: a static buffer holding @dir/@name (one of four rotating buffers). */
static const char *path_in(const struct tmp *t, const char *name)
{
	static char bufs[4][PATH_MAX];
	static unsigned int next;
	char *buf = bufs[next++ % 4];

	snprintf(buf, PATH_MAX, "%s/%s", t->dir, name);
	return buf;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void make_file_of_size(const char *path, off_t size)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	assert_int_equal(close(fd), 0);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static int nr_entries;

static int count_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)st;
	(void)flag;
	(void)ftw;
	nr_entries++;
	return 0;
}

/* Return: the number of files and directories under @dir, itself included. */
static int count_entries(const char *dir)
{
	nr_entries = 0;
	assert_int_equal(nftw(dir, count_entry, 16, FTW_PHYS), 0);
	return nr_entries;
}

static void assert_str_or_null_equal(const char *a, const char *b)
{
	if (!a || !b)
		assert_ptr_equal(a, b);
	else
		assert_string_equal(a, b);
}

static void assert_config_equal(const struct td_config *a, const struct td_config *b)
{
	assert_str_or_null_equal(a->image, b->image);
	assert_int_equal(a->size_bytes, b->size_bytes);
	assert_str_or_null_equal(a->mountpoint, b->mountpoint);
	assert_string_equal(a->name, b->name);
	assert_int_equal(a->read_only, b->read_only);
	assert_int_equal(a->logical_block_size, b->logical_block_size);
	assert_int_equal(a->allow_other, b->allow_other);
	assert_int_equal(a->recovery, b->recovery);
	assert_int_equal(a->transport, b->transport);
	assert_int_equal(a->mode, b->mode);
	assert_string_equal(a->elevator, b->elevator);
	assert_int_equal(a->nr_requests, b->nr_requests);
	assert_int_equal(a->max_sectors, b->max_sectors);
	assert_int_equal(a->tunables.read_expire_ms, b->tunables.read_expire_ms);
	assert_int_equal(a->tunables.write_expire_ms, b->tunables.write_expire_ms);
	assert_int_equal(a->tunables.fifo_batch, b->tunables.fifo_batch);
	assert_int_equal(a->tunables.writes_starved, b->tunables.writes_starved);
	assert_int_equal(a->depth, b->depth);
	assert_int_equal(a->workers, b->workers);
	assert_int_equal(a->model, b->model);
	assert_int_equal(a->hdd.rpm, b->hdd.rpm);
	assert_int_equal(a->hdd.seek_track_us, b->hdd.seek_track_us);
	assert_int_equal(a->hdd.seek_full_us, b->hdd.seek_full_us);
	assert_int_equal(a->hdd.transfer_mb_s, b->hdd.transfer_mb_s);
	assert_int_equal(a->hdd.overhead_us, b->hdd.overhead_us);
	assert_int_equal(a->hdd.sectors_per_track, b->hdd.sectors_per_track);
	assert_int_equal(a->ssd.latency_us, b->ssd.latency_us);
	assert_int_equal(a->ssd.transfer_mb_s, b->ssd.transfer_mb_s);
	assert_int_equal(a->write_cache, b->write_cache);
	assert_int_equal(a->cache_size, b->cache_size);
	assert_int_equal(a->command_timeout_ms, b->command_timeout_ms);
	assert_int_equal(a->max_retries, b->max_retries);
	assert_int_equal(a->shutdown_timeout_ms, b->shutdown_timeout_ms);
	assert_int_equal(a->seed, b->seed);
	assert_int_equal(a->backend, b->backend);
	/* Unset means the default text: compare what the daemon would use. */
	assert_str_or_null_equal(td_config_str(a, "rbd", "pool"), td_config_str(b, "rbd", "pool"));
	assert_str_or_null_equal(a->rbd_image, b->rbd_image);
	assert_str_or_null_equal(td_config_str(a, "rbd", "conf"), td_config_str(b, "rbd", "conf"));
	assert_str_or_null_equal(td_config_str(a, "rbd", "id"), td_config_str(b, "rbd", "id"));
	assert_str_or_null_equal(a->rbd_keyring, b->rbd_keyring);
	assert_str_or_null_equal(a->nbd_uri, b->nbd_uri);
	assert_int_equal(a->nbd_connections, b->nbd_connections);
	assert_str_or_null_equal(a->socket, b->socket);
	assert_int_equal(a->socket_mode, b->socket_mode);
	assert_str_or_null_equal(a->socket_group, b->socket_group);
	assert_int_equal(a->socket_gid, b->socket_gid);
	assert_int_equal(a->trace_budget, b->trace_budget);
	assert_str_or_null_equal(a->config_file, b->config_file);
	assert_int_equal(a->foreground, b->foreground);
	assert_int_equal(a->verbose, b->verbose);
	assert_int_equal(a->nr_fuse_opts, b->nr_fuse_opts);
	for (size_t i = 0; i < a->nr_fuse_opts; i++)
		assert_string_equal(a->fuse_opts[i], b->fuse_opts[i]);
}

/* ---- defaults and the key table --------------------------------------- */

static void test_config_init_sets_documented_defaults(void **state)
{
	struct td_config c;

	(void)state;
	memset(&c, 0xa5, sizeof(c));
	td_config_init(&c);
	assert_null(c.image);
	assert_int_equal(c.size_bytes, 0);
	assert_null(c.mountpoint);
	assert_string_equal(c.name, "disk");
	assert_false(c.read_only);
	assert_int_equal(c.logical_block_size, 512);
	assert_false(c.allow_other);
	assert_int_equal(c.transport, TD_TRANSPORT_AUTO);
	assert_true(c.recovery);
	assert_int_equal(c.mode, TD_MODE_RQ);
	assert_string_equal(c.elevator, "deadline");
	assert_int_equal(c.nr_requests, 128);
	assert_int_equal(c.max_sectors, 2048);
	assert_int_equal(c.tunables.read_expire_ms, 500);
	assert_int_equal(c.tunables.write_expire_ms, 5000);
	assert_int_equal(c.tunables.fifo_batch, 16);
	assert_int_equal(c.tunables.writes_starved, 2);
	assert_int_equal(c.depth, 32);
	assert_int_equal(c.workers, 0);
	assert_int_equal(c.model, TD_MODEL_NONE);
	assert_int_equal(c.hdd.rpm, 7200);
	assert_int_equal(c.hdd.seek_track_us, 500);
	assert_int_equal(c.hdd.seek_full_us, 12000);
	assert_int_equal(c.hdd.transfer_mb_s, 150);
	assert_int_equal(c.hdd.overhead_us, 50);
	assert_int_equal(c.hdd.sectors_per_track, 2048);
	assert_int_equal(c.ssd.latency_us, 80);
	assert_int_equal(c.ssd.transfer_mb_s, 2000);
	assert_int_equal(c.write_cache, TD_WC_WRITEBACK);
	assert_int_equal(c.cache_size, 64ULL << 20);
	assert_int_equal(c.command_timeout_ms, 30000);
	assert_int_equal(c.max_retries, 5);
	assert_int_equal(c.shutdown_timeout_ms, 30000);
	assert_int_equal(c.seed, 1);
	assert_int_equal(c.backend, TD_CONFIG_BACKEND_FILE);
	assert_null(c.rbd_pool);
	assert_null(c.rbd_image);
	assert_null(c.rbd_conf);
	assert_null(c.rbd_id);
	assert_null(c.rbd_keyring);
	assert_null(c.nbd_uri);
	assert_int_equal(c.nbd_connections, 1);
	assert_null(c.socket);
	assert_int_equal(c.socket_mode, 0660);
	assert_null(c.socket_group);
	assert_int_equal(c.trace_budget, 128ULL << 20);
	assert_int_equal(c.socket_gid, (gid_t)-1);
	assert_null(c.config_file);
	assert_false(c.foreground);
	assert_int_equal(c.verbose, 0);
	assert_null(c.fuse_opts);
	assert_int_equal(c.nr_fuse_opts, 0);
	assert_null(c.origin_file);
	for (size_t i = 0; i < TD_CONFIG_NR_KEYS; i++) {
		assert_null(c.origin[i].option);
		assert_int_equal(c.origin[i].line, 0);
	}
	td_config_free(&c);
}

/* Setting each key to the table's default text changes nothing: table and init agree. */
static void test_config_table_defaults_equal_init(void **state)
{
	struct td_config def, c;
	char err[512];

	(void)state;
	td_config_init(&def);
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		const struct td_config_key *k = &td_config_keys[i];

		if (!k->default_value)
			continue;
		td_config_init(&c);
		assert_int_equal(
		    td_config_set(&c, k->section, k->key, k->default_value, err, sizeof(err)), 0);
		assert_config_equal(&c, &def);
		td_config_free(&c);
	}
	td_config_free(&def);
}

static void test_config_table_lists_each_key_once_with_reload_flags(void **state)
{
	static const char *const reloadable[] = {
	    "queue:elevator",		"tags:depth",	     "queue:read_expire_ms",
	    "queue:write_expire_ms",	"queue:fifo_batch",  "queue:writes_starved",
	    "drive:command_timeout_ms", "drive:max_retries", "drive:shutdown_timeout_ms",
	};
	static const char *const no_default[] = {"disk:image", "disk:mountpoint", "rbd:image",
						 "nbd:uri", "admin:socket"};
	unsigned int nr_reloadable = 0, nr_no_default = 0;

	(void)state;
	assert_int_equal(td_config_nr_keys, 48);
	assert_int_equal(td_config_nr_keys, TD_CONFIG_NR_KEYS);
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		const struct td_config_key *k = &td_config_keys[i];
		char name[64];
		bool listed = false;

		assert_non_null(k->type);
		assert_non_null(k->help);
		assert_true(strlen(k->help) > 10);
		for (size_t j = 0; j < i; j++)
			assert_false(strcmp(td_config_keys[j].section, k->section) == 0 &&
				     strcmp(td_config_keys[j].key, k->key) == 0);
		assert_ptr_equal(td_config_find_key(k->section, k->key), k);
		snprintf(name, sizeof(name), "%s:%s", k->section, k->key);
		for (size_t j = 0; j < TD_ARRAY_SIZE(reloadable); j++)
			listed |= strcmp(reloadable[j], name) == 0;
		assert_int_equal(k->reloadable, listed);
		/* td_config_key_live() answers from the same flag, in any case. */
		assert_int_equal(td_config_key_live(k->section, k->key), listed);
		nr_reloadable += k->reloadable;
		listed = false;
		for (size_t j = 0; j < TD_ARRAY_SIZE(no_default); j++)
			listed |= strcmp(no_default[j], name) == 0;
		assert_int_equal(k->default_value == NULL, listed);
		nr_no_default += !k->default_value;
	}
	assert_int_equal(nr_reloadable, 9);
	assert_int_equal(nr_no_default, 5);
}

static void test_config_find_key_ignores_case_and_rejects_unknown(void **state)
{
	const struct td_config_key *k;

	(void)state;
	k = td_config_find_key("TAGS", "Depth");
	assert_non_null(k);
	assert_string_equal(k->section, "tags");
	assert_string_equal(k->key, "depth");
	assert_null(td_config_find_key("tags", "deep"));
	assert_null(td_config_find_key("tag", "depth"));
	assert_null(td_config_find_key("queue", "depth"));
}

/* ---- td_config_set: values -------------------------------------------- */

struct bad_value {
	const char *section;
	const char *key;
	const char *value;
	const char *message;
};

static void test_config_set_rejects_bad_values_with_exact_message(void **state)
{
	static const struct bad_value cases[] = {
	    /* numbers: syntax */
	    {"queue", "nr_requests", "abc", "[queue] nr_requests = \"abc\": not a number"},
	    {"tags", "depth", "-1", "[tags] depth = \"-1\": not a number"},
	    {"tags", "depth", "+1", "[tags] depth = \"+1\": not a number"},
	    {"queue", "read_expire_ms", "1.5", "[queue] read_expire_ms = \"1.5\": not a number"},
	    {"queue", "fifo_batch", "", "[queue] fifo_batch = \"\": not a number"},
	    {"tags", "depth", "32x", "[tags] depth = \"32x\": not a number"},
	    {"tags", "depth", " 32", "[tags] depth = \" 32\": not a number"},
	    {"drive", "workers", "0x4", "[drive] workers = \"0x4\": not a number"},
	    /* numbers: range, overflow included */
	    {"tags", "depth", "0", "[tags] depth = \"0\": must be between 1 and 4096"},
	    {"tags", "depth", "4097", "[tags] depth = \"4097\": must be between 1 and 4096"},
	    {"queue", "nr_hw_queues", "257",
	     "[queue] nr_hw_queues = \"257\": must be between 0 and 256"},
	    {"drive", "max_retries", "99999999999999999999999",
	     "[drive] max_retries = \"99999999999999999999999\": must be between 0 and 100"},
	    {"queue", "nr_requests", "3",
	     "[queue] nr_requests = \"3\": must be between 4 and 65536"},
	    {"queue", "nr_requests", "65537",
	     "[queue] nr_requests = \"65537\": must be between 4 and 65536"},
	    {"queue", "max_sectors", "7",
	     "[queue] max_sectors = \"7\": must be between 8 and 65536"},
	    {"queue", "read_expire_ms", "0",
	     "[queue] read_expire_ms = \"0\": must be between 1 and 3600000"},
	    {"queue", "write_expire_ms", "3600001",
	     "[queue] write_expire_ms = \"3600001\": must be between 1 and 3600000"},
	    {"queue", "fifo_batch", "4097",
	     "[queue] fifo_batch = \"4097\": must be between 1 and 4096"},
	    {"queue", "writes_starved", "1025",
	     "[queue] writes_starved = \"1025\": must be between 0 and 1024"},
	    {"drive", "workers", "257", "[drive] workers = \"257\": must be between 0 and 256"},
	    {"drive", "hdd_rpm", "999",
	     "[drive] hdd_rpm = \"999\": must be between 1000 and 30000"},
	    {"drive", "hdd_rpm", "30001",
	     "[drive] hdd_rpm = \"30001\": must be between 1000 and 30000"},
	    {"drive", "hdd_seek_track_us", "1000001",
	     "[drive] hdd_seek_track_us = \"1000001\": must be between 0 and 1000000"},
	    {"drive", "hdd_seek_full_us", "10000001",
	     "[drive] hdd_seek_full_us = \"10000001\": must be between 0 and 10000000"},
	    {"drive", "hdd_transfer_mb_s", "0",
	     "[drive] hdd_transfer_mb_s = \"0\": must be between 1 and 100000"},
	    {"drive", "hdd_overhead_us", "1000001",
	     "[drive] hdd_overhead_us = \"1000001\": must be between 0 and 1000000"},
	    {"drive", "hdd_sectors_per_track", "7",
	     "[drive] hdd_sectors_per_track = \"7\": must be between 8 and 1048576"},
	    {"drive", "ssd_latency_us", "10000001",
	     "[drive] ssd_latency_us = \"10000001\": must be between 0 and 10000000"},
	    {"drive", "ssd_transfer_mb_s", "1000001",
	     "[drive] ssd_transfer_mb_s = \"1000001\": must be between 1 and 1000000"},
	    {"drive", "command_timeout_ms", "3600001",
	     "[drive] command_timeout_ms = \"3600001\": must be between 0 and 3600000"},
	    {"drive", "shutdown_timeout_ms", "3600001",
	     "[drive] shutdown_timeout_ms = \"3600001\": must be between 0 and 3600000"},
	    {"drive", "shutdown_timeout_ms", "-1",
	     "[drive] shutdown_timeout_ms = \"-1\": not a number"},
	    /* sizes */
	    {"disk", "size", "1.5G",
	     "[disk] size = \"1.5G\": not a size (a whole number of bytes, or with a K, M, G or"
	     " T suffix)"},
	    {"disk", "size", "-1",
	     "[disk] size = \"-1\": not a size (a whole number of bytes, or with a K, M, G or"
	     " T suffix)"},
	    {"disk", "size", "4KB",
	     "[disk] size = \"4KB\": not a size (a whole number of bytes, or with a K, M, G or"
	     " T suffix)"},
	    {"disk", "size", "",
	     "[disk] size = \"\": not a size (a whole number of bytes, or with a K, M, G or"
	     " T suffix)"},
	    {"disk", "size", "8388608T",
	     "[disk] size = \"8388608T\": must be between 0 and 9223372036854775807"},
	    {"disk", "size", "99999999999999999999",
	     "[disk] size = \"99999999999999999999\": must be between 0 and 9223372036854775807"},
	    {"drive", "cache_size", "1023K",
	     "[drive] cache_size = \"1023K\": must be between 1M and 16G"},
	    {"drive", "cache_size", "17G",
	     "[drive] cache_size = \"17G\": must be between 1M and 16G"},
	    {"admin", "trace_budget", "1023K",
	     "[admin] trace_budget = \"1023K\": must be between 1M and 64G"},
	    {"admin", "trace_budget", "65G",
	     "[admin] trace_budget = \"65G\": must be between 1M and 64G"},
	    {"drive", "cache_size", "64 M",
	     "[drive] cache_size = \"64 M\": not a size (a whole number of bytes, or with a K, M,"
	     " G or T suffix)"},
	    /* booleans */
	    {"disk", "read_only", "maybe",
	     "[disk] read_only = \"maybe\": not a boolean (true/false, yes/no, on/off, 1/0)"},
	    {"disk", "allow_other", "2",
	     "[disk] allow_other = \"2\": not a boolean (true/false, yes/no, on/off, 1/0)"},
	    /* choices */
	    {"disk", "transport", "ring",
	     "[disk] transport = \"ring\": must be auto, uring or classic"},
	    {"disk", "logical_block_size", "1024",
	     "[disk] logical_block_size = \"1024\": must be 512 or 4096"},
	    {"disk", "logical_block_size", "4K",
	     "[disk] logical_block_size = \"4K\": not a number"},
	    {"queue", "mode", "sq", "[queue] mode = \"sq\": must be rq, bio or mq"},
	    {"drive", "model", "tape", "[drive] model = \"tape\": must be none, hdd or ssd"},
	    {"drive", "write_cache", "none",
	     "[drive] write_cache = \"none\": must be writeback, writethrough or volatile"},
	    /* seed */
	    {"drive", "seed", "0x",
	     "[drive] seed = \"0x\": not a number (decimal, or hexadecimal after 0x)"},
	    {"drive", "seed", "0xg1",
	     "[drive] seed = \"0xg1\": not a number (decimal, or hexadecimal after 0x)"},
	    {"drive", "seed", "18446744073709551616",
	     "[drive] seed = \"18446744073709551616\": must be between 0 and 18446744073709551615"},
	    {"drive", "seed", "0x10000000000000000",
	     "[drive] seed = \"0x10000000000000000\": must be between 0 and 18446744073709551615"},
	    /* octal mode */
	    {"admin", "socket_mode", "0778", "[admin] socket_mode = \"0778\": not an octal number"},
	    {"admin", "socket_mode", "rw", "[admin] socket_mode = \"rw\": not an octal number"},
	    {"admin", "socket_mode", "", "[admin] socket_mode = \"\": not an octal number"},
	    {"admin", "socket_mode", "1000",
	     "[admin] socket_mode = \"1000\": must be between 0 and 0777"},
	    /* strings and paths */
	    {"disk", "name", "", "[disk] name = \"\": must not be empty"},
	    {"disk", "name", "a/b", "[disk] name = \"a/b\": must not contain '/'"},
	    {"disk", "name", ".", "[disk] name = \".\": must not be \".\" or \"..\""},
	    {"disk", "name", "..", "[disk] name = \"..\": must not be \".\" or \"..\""},
	    {"disk", "name", "d,allow_other",
	     "[disk] name = \"d,allow_other\": must not contain ',' or '\\' (a mount option"
	     " would read them)"},
	    {"disk", "name", "f,suid,dev",
	     "[disk] name = \"f,suid,dev\": must not contain ',' or '\\' (a mount option"
	     " would read them)"},
	    {"disk", "name", ",",
	     "[disk] name = \",\": must not contain ',' or '\\' (a mount option would read"
	     " them)"},
	    {"disk", "name", "a\\,b",
	     "[disk] name = \"a\\\\,b\": must not contain ',' or '\\' (a mount option"
	     " would read them)"},
	    {"disk", "name", "a\tb",
	     "[disk] name = \"a\\x09b\": must not contain control characters"},
	    {"disk", "name", "say \"hi\"\x7f",
	     "[disk] name = \"say \\\"hi\\\"\\x7f\": must not contain control characters"},
	    {"disk", "image", "", "[disk] image = \"\": must not be empty"},
	    {"disk", "mountpoint", "", "[disk] mountpoint = \"\": must not be empty"},
	    {"admin", "socket", "", "[admin] socket = \"\": must not be empty"},
	    /* backends */
	    {"drive", "backend", "ceph", "[drive] backend = \"ceph\": must be file, rbd or nbd"},
	    {"drive", "backend", "", "[drive] backend = \"\": must be file, rbd or nbd"},
#if !TD_WITH_RBD
    {"drive", "backend", "rbd",
     "[drive] backend = \"rbd\": this tagdiskd was built without it (make WITH_RBD=0); install"
     " librbd-dev and build again"},
#endif
#if !TD_WITH_NBD
    {"drive", "backend", "nbd",
     "[drive] backend = \"nbd\": this tagdiskd was built without it (make WITH_NBD=0); install"
     " libnbd-dev and build again"},
#endif
	    {"rbd", "pool", "", "[rbd] pool = \"\": must not be empty"},
	    {"rbd", "pool", "a/b", "[rbd] pool = \"a/b\": must not contain '/' or '@'"},
	    {"rbd", "image", "vm1@snap", "[rbd] image = \"vm1@snap\": must not contain '/' or '@'"},
	    {"rbd", "image", "", "[rbd] image = \"\": must not be empty"},
	    {"rbd", "id", "a\nb", "[rbd] id = \"a\\x0ab\": must not contain control characters"},
	    {"rbd", "conf", "", "[rbd] conf = \"\": must not be empty"},
	    {"nbd", "connections", "0", "[nbd] connections = \"0\": must be between 1 and 16"},
	    {"nbd", "connections", "17", "[nbd] connections = \"17\": must be between 1 and 16"},
	    {"nbd", "connections", "two", "[nbd] connections = \"two\": not a number"},
	    {"nbd", "uri", "", "[nbd] uri = \"\": must not be empty"},
	    {"nbd", "uri", "http://host/x",
	     "[nbd] uri = \"http://host/x\": not an NBD URI (nbd://HOST[:PORT]/EXPORT or"
	     " nbd+unix:///EXPORT?socket=PATH)"},
	    {"nbd", "uri", "/run/nbd.sock",
	     "[nbd] uri = \"/run/nbd.sock\": not an NBD URI (nbd://HOST[:PORT]/EXPORT or"
	     " nbd+unix:///EXPORT?socket=PATH)"},
	    {"nbd", "uri", "NBD://host/x",
	     "[nbd] uri = \"NBD://host/x\": not an NBD URI (nbd://HOST[:PORT]/EXPORT or"
	     " nbd+unix:///EXPORT?socket=PATH)"},
	    {"nbd", "uri", "nbd://", "[nbd] uri = \"nbd://\": no host after the scheme"},
	    {"nbd", "uri", "nbds://host/x",
	     "[nbd] uri = \"nbds://host/x\": NBD over TLS is not supported (use nbd:// or nbd+unix://)"},
	    {"nbd", "uri", "nbds+unix:///x?socket=/s",
	     "[nbd] uri = \"nbds+unix:///x?socket=/s\": NBD over TLS is not supported (use nbd:// or"
	     " nbd+unix://)"},
	    {"nbd", "uri", "nbd://:10809/x",
	     "[nbd] uri = \"nbd://:10809/x\": no host after the scheme"},
	    {"nbd", "uri", "nbd+unix:///x",
	     "[nbd] uri = \"nbd+unix:///x\": a unix NBD URI needs ?socket=PATH"},
	    {"nbd", "uri", "nbd+unix:///x?socket=",
	     "[nbd] uri = \"nbd+unix:///x?socket=\": a unix NBD URI needs ?socket=PATH"},
	    {"nbd", "uri", "nbd://host/a b",
	     "[nbd] uri = \"nbd://host/a b\": must not contain spaces or control characters"},
	};
	struct td_config def, c;
	struct tmp *t = *state;

	td_config_init(&def);
	for (size_t i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		td_config_init(&c);
		t->err[0] = '\0';
		assert_int_equal(td_config_set(&c, cases[i].section, cases[i].key, cases[i].value,
					       t->err, sizeof(t->err)),
				 -EINVAL);
		assert_string_equal(t->err, cases[i].message);
		assert_config_equal(&c, &def); /* a rejected value changes nothing */
		td_config_free(&c);
	}
	td_config_free(&def);
}

static void test_config_set_rejects_unknown_elevator_listing_known_ones(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char names[256], expect[512];

	td_elv_names(names, sizeof(names));
	assert_non_null(strstr(names, "noop"));
	assert_non_null(strstr(names, "deadline"));
	snprintf(expect, sizeof(expect), "[queue] elevator = \"cfq\": unknown elevator (known: %s)",
		 names);
	td_config_init(&c);
	assert_int_equal(td_config_set(&c, "queue", "elevator", "cfq", t->err, sizeof(t->err)),
			 -EINVAL);
	assert_string_equal(t->err, expect);
	/* Elevator names are exact: the registry knows "noop", not "NOOP". */
	assert_int_equal(td_config_set(&c, "queue", "elevator", "NOOP", t->err, sizeof(t->err)),
			 -EINVAL);
	assert_string_equal(c.elevator, "deadline");
	assert_int_equal(td_config_set(&c, "queue", "elevator", "noop", t->err, sizeof(t->err)), 0);
	assert_string_equal(c.elevator, "noop");
	assert_int_equal(td_config_set(&c, "queue", "elevator", "mq-deadline", t->err,
				       sizeof(t->err)),
			 0);
	assert_string_equal(c.elevator, "mq-deadline");
	td_config_free(&c);
}

static void test_config_set_name_longer_than_255_bytes_is_rejected(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char name[300];
	char expect[600];

	memset(name, 'n', 256);
	name[256] = '\0';
	snprintf(expect, sizeof(expect), "[disk] name = \"%s\": longer than 255 bytes", name);
	td_config_init(&c);
	assert_int_equal(td_config_set(&c, "disk", "name", name, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);
	name[255] = '\0';
	assert_int_equal(td_config_set(&c, "disk", "name", name, t->err, sizeof(t->err)), 0);
	assert_string_equal(c.name, name);
	td_config_free(&c);
}

static void test_config_set_accepts_boundaries_and_alternate_spellings(void **state)
{
	struct tmp *t = *state;
	struct td_config c;

	td_config_init(&c);
#define SET_OK(sec, key, val)                                                                      \
	assert_int_equal(td_config_set(&c, sec, key, val, t->err, sizeof(t->err)), 0)
	SET_OK("tags", "depth", "1");
	assert_int_equal(c.depth, 1);
	SET_OK("tags", "depth", "4096");
	assert_int_equal(c.depth, 4096);
	SET_OK("tags", "depth", "0032");
	assert_int_equal(c.depth, 32);
	SET_OK("queue", "writes_starved", "0");
	assert_int_equal(c.tunables.writes_starved, 0);
	SET_OK("drive", "workers", "0");
	assert_int_equal(c.workers, 0);
	SET_OK("drive", "workers", "256");
	assert_int_equal(c.workers, 256);
	SET_OK("drive", "shutdown_timeout_ms", "0");
	assert_int_equal(c.shutdown_timeout_ms, 0);
	SET_OK("drive", "shutdown_timeout_ms", "3600000");
	assert_int_equal(c.shutdown_timeout_ms, 3600000);
	SET_OK("admin", "socket_mode", "660");
	assert_int_equal(c.socket_mode, 0660);
	SET_OK("admin", "socket_mode", "0600");
	assert_int_equal(c.socket_mode, 0600);
	SET_OK("admin", "socket_mode", "0");
	assert_int_equal(c.socket_mode, 0);
	SET_OK("admin", "socket_mode", "777");
	assert_int_equal(c.socket_mode, 0777);
	SET_OK("drive", "seed", "0xFFFFFFFFFFFFFFFF");
	assert_int_equal(c.seed, UINT64_MAX);
	SET_OK("drive", "seed", "0x2a");
	assert_int_equal(c.seed, 42);
	SET_OK("drive", "seed", "18446744073709551615");
	assert_int_equal(c.seed, UINT64_MAX);
	SET_OK("drive", "seed", "0");
	assert_int_equal(c.seed, 0);
	SET_OK("disk", "logical_block_size", "4096");
	assert_int_equal(c.logical_block_size, 4096);
	SET_OK("queue", "mode", "BIO");
	assert_int_equal(c.mode, TD_MODE_BIO);
	SET_OK("queue", "mode", "mq");
	assert_int_equal(c.mode, TD_MODE_MQ);
	SET_OK("queue", "nr_hw_queues", "0");
	assert_int_equal(c.nr_hw_queues, 0);
	SET_OK("queue", "nr_hw_queues", "256");
	assert_int_equal(c.nr_hw_queues, 256);
	SET_OK("drive", "model", "Ssd");
	assert_int_equal(c.model, TD_MODEL_SSD);
	SET_OK("drive", "write_cache", "WriteThrough");
	assert_int_equal(c.write_cache, TD_WC_WRITETHROUGH);
	SET_OK("drive", "cache_size", "1M");
	assert_int_equal(c.cache_size, 1ULL << 20);
	SET_OK("drive", "cache_size", "16GiB");
	assert_int_equal(c.cache_size, 16ULL << 30);
	SET_OK("disk", "size", "9223372036854775807");
	assert_int_equal(c.size_bytes, 9223372036854775807ULL);
	SET_OK("disk", "read_only", "ON");
	assert_true(c.read_only);
	SET_OK("admin", "socket_group", "wheel");
	assert_string_equal(c.socket_group, "wheel");
	SET_OK("admin", "socket_group", "");
	assert_null(c.socket_group);
	SET_OK("admin", "trace_budget", "1M");
	assert_int_equal(c.trace_budget, 1ULL << 20);
	SET_OK("admin", "trace_budget", "64G");
	assert_int_equal(c.trace_budget, 64ULL << 30);
	SET_OK("disk", "image", "/a/b.img");
	SET_OK("disk", "image", "/c/d.img");
	assert_string_equal(c.image, "/c/d.img");
	SET_OK("disk", "name", "disk 2");
	assert_string_equal(c.name, "disk 2");
	SET_OK("QUEUE", "Nr_Requests", "4");
	assert_int_equal(c.nr_requests, 4);
	if (TD_WITH_RBD) {
		SET_OK("drive", "backend", "RBD");
		assert_int_equal(c.backend, TD_CONFIG_BACKEND_RBD);
	}
	if (TD_WITH_NBD) {
		SET_OK("drive", "backend", "nbd");
		assert_int_equal(c.backend, TD_CONFIG_BACKEND_NBD);
	}
	SET_OK("drive", "backend", "File");
	assert_int_equal(c.backend, TD_CONFIG_BACKEND_FILE);
	SET_OK("nbd", "connections", "1");
	assert_int_equal(c.nbd_connections, 1);
	SET_OK("nbd", "connections", "16");
	assert_int_equal(c.nbd_connections, 16);
	SET_OK("nbd", "uri", "nbd://example.com/vm1");
	SET_OK("nbd", "uri", "nbd://[::1]:10809/vm1");
	SET_OK("nbd", "uri", "nbd+unix:///vm1?socket=/run/nbd.sock");
	assert_string_equal(c.nbd_uri, "nbd+unix:///vm1?socket=/run/nbd.sock");
	SET_OK("rbd", "pool", "rbd.ssd-1");
	assert_string_equal(c.rbd_pool, "rbd.ssd-1");
	SET_OK("rbd", "image", "vm disk 1");
	assert_string_equal(c.rbd_image, "vm disk 1");
	SET_OK("rbd", "keyring", "");
	assert_null(c.rbd_keyring);
	SET_OK("rbd", "keyring", "/etc/ceph/ceph.client.tagdisk.keyring");
	assert_string_equal(c.rbd_keyring, "/etc/ceph/ceph.client.tagdisk.keyring");
#undef SET_OK
	td_config_free(&c);
}

static void test_config_set_rejects_unknown_section_and_key(void **state)
{
	static const struct bad_value cases[] = {
	    {"bogus", "depth", "1",
	     "[bogus] depth = \"1\": unknown section (known: disk, queue, tags, drive, rbd, nbd,"
	     " admin, log)"},
	    {"queue", "foo", "1", "[queue] foo = \"1\": unknown key"},
	    /* A key of another section is unknown here, and its section is named. */
	    {"queue", "depth", "1",
	     "[queue] depth = \"1\": unknown key in [queue] (it belongs in [tags])"},
	    {"Disk", "Elevator", "noop",
	     "[disk] Elevator = \"noop\": unknown key in [disk] (it belongs in [queue])"},
	    {"tags", "say \"hi\"", "a\nb", "[tags] say \\\"hi\\\" = \"a\\x0ab\": unknown key"},
	};
	struct tmp *t = *state;
	struct td_config c, def;

	td_config_init(&def);
	for (size_t i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		td_config_init(&c);
		assert_int_equal(td_config_set(&c, cases[i].section, cases[i].key, cases[i].value,
					       t->err, sizeof(t->err)),
				 -EINVAL);
		assert_string_equal(t->err, cases[i].message);
		assert_config_equal(&c, &def);
		td_config_free(&c);
	}
	td_config_free(&def);
}

static void test_config_error_is_cut_to_errlen(void **state)
{
	struct td_config c;
	char small[12];

	(void)state;
	memset(small, 'x', sizeof(small));
	td_config_init(&c);
	assert_int_equal(td_config_set(&c, "tags", "depth", "0", small, sizeof(small)), -EINVAL);
	assert_string_equal(small, "[tags] dept");
	/* No buffer at all is allowed too. */
	assert_int_equal(td_config_set(&c, "tags", "depth", "0", NULL, 0), -EINVAL);
	td_config_free(&c);
}

/* ---- the INI file ----------------------------------------------------- */

struct kv {
	const char *section;
	const char *key;
	const char *value;
};

/* A value for every key, none of them the default. */
/*
 * A [drive] backend other than the default that this build has (make WITH_NBD=0 or
 * WITH_RBD=0 leave one out); a build with neither has no other value to set.
 */
#if TD_WITH_NBD
#define OTHER_BACKEND	 "nbd"
#define OTHER_BACKEND_ID TD_CONFIG_BACKEND_NBD
#elif TD_WITH_RBD
#define OTHER_BACKEND	 "rbd"
#define OTHER_BACKEND_ID TD_CONFIG_BACKEND_RBD
#else
#define OTHER_BACKEND	 "file"
#define OTHER_BACKEND_ID TD_CONFIG_BACKEND_FILE
#endif

static const struct kv every_key[] = {
    {"disk", "image", "/srv/img/a.img"},
    {"disk", "size", "2G"},
    {"disk", "mountpoint", "/srv/mnt"},
    {"disk", "name", "vol0"},
    {"disk", "read_only", "yes"},
    {"disk", "logical_block_size", "4096"},
    {"disk", "allow_other", "on"},
    {"disk", "transport", "classic"},
    {"disk", "recovery", "no"},
    {"queue", "mode", "bio"},
    {"queue", "elevator", "noop"},
    {"queue", "nr_hw_queues", "3"},
    {"queue", "nr_requests", "64"},
    {"queue", "max_sectors", "1024"},
    {"queue", "read_expire_ms", "250"},
    {"queue", "write_expire_ms", "2500"},
    {"queue", "fifo_batch", "8"},
    {"queue", "writes_starved", "3"},
    {"tags", "depth", "128"},
    {"drive", "backend", OTHER_BACKEND},
    {"drive", "workers", "8"},
    {"drive", "model", "hdd"},
    {"drive", "hdd_rpm", "5400"},
    {"drive", "hdd_seek_track_us", "700"},
    {"drive", "hdd_seek_full_us", "15000"},
    {"drive", "hdd_transfer_mb_s", "120"},
    {"drive", "hdd_overhead_us", "60"},
    {"drive", "hdd_sectors_per_track", "1024"},
    {"drive", "ssd_latency_us", "100"},
    {"drive", "ssd_transfer_mb_s", "3000"},
    {"drive", "write_cache", "volatile"},
    {"drive", "cache_size", "128M"},
    {"drive", "command_timeout_ms", "10000"},
    {"drive", "max_retries", "3"},
    {"drive", "shutdown_timeout_ms", "60000"},
    {"drive", "seed", "0x2a"},
    {"rbd", "pool", "pool0"},
    {"rbd", "image", "vm1"},
    {"rbd", "conf", "/srv/ceph.conf"},
    {"rbd", "id", "tagdisk"},
    {"rbd", "keyring", "/srv/ceph.keyring"},
    {"nbd", "uri", "nbd+unix:///vm1?socket=/run/nbd.sock"},
    {"nbd", "connections", "4"},
    {"admin", "socket", "/srv/tagdisk.sock"},
    {"admin", "socket_mode", "0600"},
    {"admin", "socket_group", "root"},
    {"admin", "trace_budget", "1G"},
    {"log", "path", "/srv/tagdisk.wlog"},
};

/* Write every_key[] as a file; @lines[i] gets the line of every_key[i]. */
static void write_every_key(const char *path, unsigned int *lines)
{
	FILE *f = fopen(path, "w");
	const char *section = "";
	unsigned int line = 0;

	assert_non_null(f);
	for (size_t i = 0; i < TD_ARRAY_SIZE(every_key); i++) {
		if (strcmp(section, every_key[i].section) != 0) {
			section = every_key[i].section;
			fprintf(f, "\n[%s]\n", section);
			line += 2;
		}
		fprintf(f, "%s = %s\n", every_key[i].key, every_key[i].value);
		lines[i] = ++line;
	}
	assert_int_equal(fclose(f), 0);
}

static void test_config_load_file_sets_every_key(void **state)
{
	struct tmp *t = *state;
	const char *path = path_in(t, "every.ini");
	unsigned int lines[TD_ARRAY_SIZE(every_key)];
	struct td_config c;

	/* The file really covers the whole table. */
	assert_int_equal(TD_ARRAY_SIZE(every_key), td_config_nr_keys);
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		size_t found = 0;

		for (size_t j = 0; j < TD_ARRAY_SIZE(every_key); j++)
			found += strcmp(every_key[j].section, td_config_keys[i].section) == 0 &&
				 strcmp(every_key[j].key, td_config_keys[i].key) == 0;
		assert_int_equal(found, 1);
	}
	write_every_key(path, lines);
	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, path, t->err, sizeof(t->err)), 0);
	for (size_t i = 0; i < TD_ARRAY_SIZE(every_key); i++) {
		const struct td_config_key *k =
		    td_config_find_key(every_key[i].section, every_key[i].key);

		assert_int_equal(c.origin[k - td_config_keys].line, lines[i]);
	}
	assert_string_equal(c.image, "/srv/img/a.img");
	assert_int_equal(c.size_bytes, 2ULL << 30);
	assert_string_equal(c.mountpoint, "/srv/mnt");
	assert_string_equal(c.name, "vol0");
	assert_true(c.read_only);
	assert_int_equal(c.logical_block_size, 4096);
	assert_true(c.allow_other);
	assert_false(c.recovery);
	assert_int_equal(c.transport, TD_TRANSPORT_CLASSIC);
	assert_int_equal(c.mode, TD_MODE_BIO);
	assert_string_equal(c.elevator, "noop");
	assert_int_equal(c.nr_hw_queues, 3);
	assert_int_equal(c.nr_requests, 64);
	assert_int_equal(c.max_sectors, 1024);
	assert_int_equal(c.tunables.read_expire_ms, 250);
	assert_int_equal(c.tunables.write_expire_ms, 2500);
	assert_int_equal(c.tunables.fifo_batch, 8);
	assert_int_equal(c.tunables.writes_starved, 3);
	assert_int_equal(c.depth, 128);
	assert_int_equal(c.backend, OTHER_BACKEND_ID);
	assert_int_equal(c.workers, 8);
	assert_int_equal(c.model, TD_MODEL_HDD);
	assert_int_equal(c.hdd.rpm, 5400);
	assert_int_equal(c.hdd.seek_track_us, 700);
	assert_int_equal(c.hdd.seek_full_us, 15000);
	assert_int_equal(c.hdd.transfer_mb_s, 120);
	assert_int_equal(c.hdd.overhead_us, 60);
	assert_int_equal(c.hdd.sectors_per_track, 1024);
	assert_int_equal(c.ssd.latency_us, 100);
	assert_int_equal(c.ssd.transfer_mb_s, 3000);
	assert_int_equal(c.write_cache, TD_WC_VOLATILE);
	assert_int_equal(c.cache_size, 128ULL << 20);
	assert_int_equal(c.command_timeout_ms, 10000);
	assert_int_equal(c.max_retries, 3);
	assert_int_equal(c.shutdown_timeout_ms, 60000);
	assert_int_equal(c.seed, 42);
	assert_string_equal(c.rbd_pool, "pool0");
	assert_string_equal(c.rbd_image, "vm1");
	assert_string_equal(c.rbd_conf, "/srv/ceph.conf");
	assert_string_equal(c.rbd_id, "tagdisk");
	assert_string_equal(c.rbd_keyring, "/srv/ceph.keyring");
	assert_string_equal(c.nbd_uri, "nbd+unix:///vm1?socket=/run/nbd.sock");
	assert_int_equal(c.nbd_connections, 4);
	assert_string_equal(c.socket, "/srv/tagdisk.sock");
	assert_int_equal(c.socket_mode, 0600);
	assert_string_equal(c.socket_group, "root");
	assert_int_equal(c.trace_budget, 1ULL << 30);
	td_config_free(&c);
}

static void test_config_load_file_ignores_case_comments_and_quotes(void **state)
{
	struct tmp *t = *state;
	const char *path = path_in(t, "case.ini");
	struct td_config c;

	write_file(path, "; a comment\n"
			 "# another\n"
			 "[TAGS]\n"
			 "Depth = 64 ; trailing comment\n"
			 "[Disk]\n"
			 "NAME = \"my disk\"\n"
			 "[tags]\n"
			 "depth = 65\n");
	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, path, t->err, sizeof(t->err)), 0);
	assert_int_equal(c.depth, 65); /* the last value of a key given twice */
	assert_string_equal(c.name, "my disk");
	td_config_free(&c);
}

/*
 * A file the loader refuses, and the one message it gives. "FILE" in the
 * message stands for the file's path. Each case is a test of its own.
 */
struct file_case {
	const char *name;
	const char *text;
	const char *message;
};

static const struct file_case file_cases[] = {
    {"quoted spaces are kept, and refused", "[tags]\ndepth = \" 5\"\n",
     "FILE:2: [tags] depth = \" 5\": not a number"},
    {"the first bad value", "[queue]\nnr_requests = abc\nfifo_batch = 0\n",
     "FILE:2: [queue] nr_requests = \"abc\": not a number"},
    {"an unknown key", "[queue]\nmode = rq\nfoo = 1\n", "FILE:3: [queue] foo = \"1\": unknown key"},
    {"a key in the wrong section names its own", "[disk]\nname = a\n[queue]\ndepth = 8\n",
     "FILE:4: [queue] depth = \"8\": unknown key in [queue] (it belongs in [tags])"},
    {"an unknown section", "[tags]\ndepth = 8\n[bogus]\ndepth = 8\n",
     "FILE:3: [bogus]: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)"},
    {"an empty unknown section, lowercased as iniparser does", "[tags]\n[Extra]\n",
     "FILE:2: [extra]: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)"},
    {"a section name with a colon", "[disk]\nname = a\n[disk:x]\nname = b\n",
     "FILE:3: [disk:x]: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)"},
    {"a colon section without its parent", "[Tags:Depth]\nx = 1\n",
     "FILE:1: [tags:depth]: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)"},
    {"an empty section name", "[tags]\ndepth = 8\n[]\ndepth = 9\n",
     "FILE:3: []: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)"},
    {"a blank section name", "[tags]\n[ ]\ndepth = 9\n",
     "FILE:2: []: unknown section (known: disk, queue, tags, drive, rbd, nbd, admin, log)"},
    {"a known key outside any section", "depth = 8\n[tags]\n",
     "FILE:1: depth = \"8\": key outside any section (it belongs in [tags])"},
    {"an unknown key outside any section", "; first\nColour = blue\n[tags]\n",
     "FILE:2: colour = \"blue\": key outside any section"},
    {"a syntax error names its line", "[tags]\ndepth = 8\noops\n[queue\n",
     "FILE:3: syntax error: \"oops\" is not a [section], key = value or comment line"},
    {"a syntax error after a continuation", "[tags]\ndepth = \\\n 8\n  [queue  \n",
     "FILE:4: syntax error: \"[queue\" is not a [section], key = value or comment line"},
    {"a key = value line starting with '='", "[tags]\n= 8\n",
     "FILE:2: syntax error: \"= 8\" is not a [section], key = value or comment line"},
    /* The first bad line of the file, not the first the dictionary holds. */
    {"the first bad line wins", "[tags]\ndepth = 4\n[queue]\nfifo_batch = 0\n[tags]\ndepth = 0\n",
     "FILE:4: [queue] fifo_batch = \"0\": must be between 1 and 4096"},
    {"an unknown key after a bad value", "[tags]\ndepth = 0\n[queue]\ncolour = red\n",
     "FILE:2: [tags] depth = \"0\": must be between 1 and 4096"},
    {"a key given twice: its last line and value", "[tags]\ndepth = 0\ndepth = 5000\n",
     "FILE:3: [tags] depth = \"5000\": must be between 1 and 4096"},
    {"comments and blank lines are counted", "; c\n\n# c\n[TAGS]\n\nDepth = x ; why\n",
     "FILE:6: [tags] depth = \"x\": not a number"},
    {"a continued line is named by its first line", "[tags]\ndepth = \\\n  0\n",
     "FILE:2: [tags] depth = \"0\": must be between 1 and 4096"},
    {"CRLF line ends", "[tags]\r\n\r\nfifo = 1\r\n", "FILE:3: [tags] fifo = \"1\": unknown key"},
    {"a header with blanks inside its brackets", "[ Queue ]\nfifo_batch = 0\n",
     "FILE:2: [queue] fifo_batch = \"0\": must be between 1 and 4096"},
    {"control characters in a value are escaped", "[disk]\nname = a\tb\n",
     "FILE:2: [disk] name = \"a\\x09b\": must not contain control characters"},
    {"an empty value", "[admin]\nsocket =\n", "FILE:2: [admin] socket = \"\": must not be empty"},
};

/* Replace each "FILE" in @fmt by @path. */
static void expand_file(char *buf, size_t len, const char *fmt, const char *path)
{
	const char *p = strstr(fmt, "FILE");

	assert_non_null(p);
	snprintf(buf, len, "%.*s%s%s", (int)(p - fmt), fmt, path, p + 4);
}

static void test_config_load_file_case(void **state)
{
	struct tmp *t = *state;
	const struct file_case *fc = t->param;
	const char *path = path_in(t, "case.ini");
	char expect[PATH_MAX + 1024];
	struct td_config c;

	write_file(path, fc->text);
	expand_file(expect, sizeof(expect), fc->message, path);
	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, path, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);
	td_config_free(&c);
}

/* iniparser reads lines of at most 1022 bytes; the message says so, with the line. */
static void test_config_load_file_line_too_long(void **state)
{
	struct tmp *t = *state;
	const char *path = path_in(t, "long.ini");
	char text[1200], expect[PATH_MAX + 200], err[4096];
	struct td_config c;

	snprintf(text, sizeof(text), "[disk]\n\nname = %01100d\n", 7);
	write_file(path, text);
	snprintf(expect, sizeof(expect),
		 "%s:3: line too long: iniparser reads at most 1022 bytes per line, continuation"
		 " lines included",
		 path);
	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, path, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);
	td_config_free(&c);

	/* 1022 bytes are fine, and the name is checked for its own length. */
	snprintf(text, sizeof(text), "[disk]\nname = %01015d\n", 7);
	assert_int_equal(strlen(text) - strlen("[disk]\n") - 1, 1022);
	write_file(path, text);
	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2: [disk] name = \"0000"));
	assert_non_null(strstr(err, "0007\": longer than 255 bytes"));
	td_config_free(&c);
}

/* Each key's origin is the line that set it; a reload of another file forgets the old lines. */
static void test_config_load_file_records_each_keys_line(void **state)
{
	struct tmp *t = *state;
	const char *a = path_in(t, "a.ini");
	const char *b = path_in(t, "b.ini");
	const struct td_config_key *depth = td_config_find_key("tags", "depth");
	const struct td_config_key *fifo = td_config_find_key("queue", "fifo_batch");
	size_t di = (size_t)(depth - td_config_keys), fi = (size_t)(fifo - td_config_keys);
	struct td_config c;

	write_file(a, "; a\n[tags]\ndepth = 4\n\n[queue]\nfifo_batch = 2\n[tags]\ndepth = 5\n");
	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, a, t->err, sizeof(t->err)), 0);
	assert_string_equal(c.origin_file, a);
	assert_int_equal(c.origin[di].line, 8);
	assert_int_equal(c.origin[fi].line, 6);
	assert_null(c.origin[di].option);
	for (size_t i = 0; i < td_config_nr_keys; i++)
		if (i != di && i != fi)
			assert_int_equal(c.origin[i].line, 0);

	write_file(b, "[queue]\n\n\nfifo_batch = 3\n");
	assert_int_equal(td_config_load_file(&c, b, t->err, sizeof(t->err)), 0);
	assert_string_equal(c.origin_file, b);
	assert_int_equal(c.origin[fi].line, 4);
	assert_int_equal(c.origin[di].line, 0); /* set by a.ini, not b.ini */
	assert_int_equal(c.depth, 5);

	/* td_config_set() takes the key's origin away. */
	assert_int_equal(td_config_set(&c, "queue", "fifo_batch", "9", t->err, sizeof(t->err)), 0);
	assert_int_equal(c.origin[fi].line, 0);
	assert_null(c.origin[fi].option);
	td_config_free(&c);
}

static void test_config_load_file_rejects_missing_file_and_directory(void **state)
{
	struct tmp *t = *state;
	const char *path = path_in(t, "missing.ini");
	struct td_config c;
	char expect[PATH_MAX + 100];

	td_config_init(&c);
	snprintf(expect, sizeof(expect), "config file \"%s\": No such file or directory", path);
	assert_int_equal(td_config_load_file(&c, path, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);

	snprintf(expect, sizeof(expect), "config file \"%s\": not a regular file", t->dir);
	assert_int_equal(td_config_load_file(&c, t->dir, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);
	td_config_free(&c);
}

static void test_config_load_empty_file_keeps_defaults(void **state)
{
	struct tmp *t = *state;
	const char *path = path_in(t, "empty.ini");
	struct td_config c, def;

	write_file(path, "");
	td_config_init(&c);
	td_config_init(&def);
	assert_int_equal(td_config_load_file(&c, path, t->err, sizeof(t->err)), 0);
	assert_config_equal(&c, &def);
	td_config_free(&c);
	td_config_free(&def);
}

/* ---- value parsers ---------------------------------------------------- */

static void test_parse_size_table(void **state)
{
	static const struct {
		const char *s;
		int ret;
		uint64_t value;
	} cases[] = {
	    {"0", 0, 0},
	    {"1", 0, 1},
	    {"512", 0, 512},
	    {"007", 0, 7},
	    {"4k", 0, 4096},
	    {"4K", 0, 4096},
	    {"4KiB", 0, 4096},
	    {"4kib", 0, 4096},
	    {"4KIB", 0, 4096},
	    {"1M", 0, 1ULL << 20},
	    {"1MiB", 0, 1ULL << 20},
	    {"64m", 0, 64ULL << 20},
	    {"3G", 0, 3ULL << 30},
	    {"3GiB", 0, 3ULL << 30},
	    {"2T", 0, 2ULL << 40},
	    {"2tib", 0, 2ULL << 40},
	    {"0T", 0, 0},
	    {"16777215T", 0, 16777215ULL << 40},
	    {"18446744073709551615", 0, UINT64_MAX},
	    {"000000000000000000000000000000001K", 0, 1024},
	    {"", -EINVAL, 0},
	    {"K", -EINVAL, 0},
	    {"iB", -EINVAL, 0},
	    {"1.5G", -EINVAL, 0},
	    {"-1", -EINVAL, 0},
	    {"+1", -EINVAL, 0},
	    {" 1", -EINVAL, 0},
	    {"1 ", -EINVAL, 0},
	    {"1 K", -EINVAL, 0},
	    {"1KB", -EINVAL, 0},
	    {"1kb", -EINVAL, 0},
	    {"1B", -EINVAL, 0},
	    {"1Ki", -EINVAL, 0},
	    {"1KiBx", -EINVAL, 0},
	    {"1KK", -EINVAL, 0},
	    {"1E", -EINVAL, 0},
	    {"1P", -EINVAL, 0},
	    {"0x10", -EINVAL, 0},
	    {"1e3", -EINVAL, 0},
	    {"18446744073709551616", -ERANGE, 0},
	    {"99999999999999999999999", -ERANGE, 0},
	    {"16777216T", -ERANGE, 0},
	    {"17179869184G", -ERANGE, 0},
	    {"18014398509481984K", -ERANGE, 0},
	};

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		uint64_t v = 0xdeadbeef;

		print_message("# size \"%s\"\n", cases[i].s);
		assert_int_equal(td_parse_size(cases[i].s, &v), cases[i].ret);
		assert_int_equal(v, cases[i].ret ? 0xdeadbeef : cases[i].value);
	}
	assert_int_equal(td_parse_size(NULL, &(uint64_t){0}), -EINVAL);
}

static void test_parse_u64_checks_syntax_and_range(void **state)
{
	uint64_t v = 7;

	(void)state;
	assert_int_equal(td_parse_u64("10", 10, 20, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(td_parse_u64("20", 10, 20, &v), 0);
	assert_int_equal(v, 20);
	assert_int_equal(td_parse_u64("0020", 10, 20, &v), 0);
	assert_int_equal(v, 20);
	v = 7;
	assert_int_equal(td_parse_u64("9", 10, 20, &v), -ERANGE);
	assert_int_equal(td_parse_u64("21", 10, 20, &v), -ERANGE);
	assert_int_equal(td_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
	assert_int_equal(td_parse_u64("", 0, 20, &v), -EINVAL);
	assert_int_equal(td_parse_u64("-1", 0, 20, &v), -EINVAL);
	assert_int_equal(td_parse_u64("1x", 0, 20, &v), -EINVAL);
	assert_int_equal(td_parse_u64("0x1", 0, 20, &v), -EINVAL);
	assert_int_equal(td_parse_u64(" 1", 0, 20, &v), -EINVAL);
	assert_int_equal(td_parse_u64(NULL, 0, 20, &v), -EINVAL);
	assert_int_equal(v, 7);
	assert_int_equal(td_parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
	assert_int_equal(v, UINT64_MAX);
}

static void test_parse_bool_table(void **state)
{
	static const char *const yes[] = {"true", "TRUE", "True", "yes", "YES", "on", "On", "1"};
	static const char *const no[] = {"false", "FALSE", "no", "No", "off", "OFF", "0"};
	static const char *const bad[] = {"", "t", "y", "2", "truee", " true", "true ", "enable"};
	bool b;

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(yes); i++) {
		b = false;
		assert_int_equal(td_parse_bool(yes[i], &b), 0);
		assert_true(b);
	}
	for (size_t i = 0; i < TD_ARRAY_SIZE(no); i++) {
		b = true;
		assert_int_equal(td_parse_bool(no[i], &b), 0);
		assert_false(b);
	}
	for (size_t i = 0; i < TD_ARRAY_SIZE(bad); i++) {
		b = true;
		assert_int_equal(td_parse_bool(bad[i], &b), -EINVAL);
		assert_true(b);
	}
	assert_int_equal(td_parse_bool(NULL, &b), -EINVAL);
}

static void test_format_size_is_exact_and_reads_back(void **state)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
	    {0, "0"},
	    {1, "1"},
	    {512, "512"},
	    {1536, "1536"},
	    {4096, "4K"},
	    {1025ULL << 10, "1025K"},
	    {64ULL << 20, "64M"},
	    {3ULL << 30, "3G"},
	    {(3ULL << 30) + 512, "3221225984"},
	    {2ULL << 40, "2T"},
	    {1ULL << 50, "1024T"},
	    {UINT64_MAX, "18446744073709551615"},
	    {UINT64_MAX - 1023, "18014398509481983K"},
	};
	char buf[32];

	(void)state;
	for (size_t i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		uint64_t back = 0;

		assert_int_equal(td_format_size(cases[i].bytes, buf, sizeof(buf)),
				 strlen(cases[i].text));
		assert_string_equal(buf, cases[i].text);
		assert_int_equal(td_parse_size(buf, &back), 0);
		assert_int_equal(back, cases[i].bytes);
	}
	/* Cut like snprintf: the return value still tells the whole length. */
	assert_int_equal(td_format_size(64ULL << 20, buf, 3), 3);
	assert_string_equal(buf, "64");
}

/* ---- command line ----------------------------------------------------- */

static char **argv_dup_ptrs(char **argv, int argc)
{
	char **copy = malloc((size_t)(argc + 1) * sizeof(*copy));

	assert_non_null(copy);
	memcpy(copy, argv, (size_t)(argc + 1) * sizeof(*copy));
	return copy;
}

/* Parse a NULL-terminated argv and check getopt left its order alone. */
static int parse_argv(struct td_cmdline *cl, char **argv, char *err, size_t errlen)
{
	int argc = 0;
	char **before;
	int ret;

	while (argv[argc])
		argc++;
	before = argv_dup_ptrs(argv, argc);
	ret = td_cmdline_parse(cl, argc, argv, err, errlen);
	assert_memory_equal(before, argv, (size_t)argc * sizeof(*argv));
	free(before);
	return ret;
}

#define PARSE(cl, err, ...)                                                                        \
	parse_argv(cl, (char *[]){"tagdiskd", __VA_ARGS__, NULL}, err, sizeof(err))

static void assert_override(const struct td_cmdline *cl, size_t i, const char *option,
			    const char *section, const char *key, const char *value)
{
	assert_true(i < cl->nr_overrides);
	assert_string_equal(cl->overrides[i].option, option);
	assert_string_equal(cl->overrides[i].section, section);
	assert_string_equal(cl->overrides[i].key, key);
	assert_string_equal(cl->overrides[i].value, value);
}

static void test_cmdline_parses_every_option(void **state)
{
	struct tmp *t = *state;
	struct td_cmdline cl;
	struct td_config c;

	assert_int_equal(PARSE(&cl, t->err, "-c", "/etc/tagdisk/a.ini", "-f", "--image", "/i.img",
			       "--size", "1G", "--mount", "/m", "--name", "vol", "--socket",
			       "/s.sock", "--mode", "bio", "--elevator", "noop", "--depth", "7",
			       "--workers", "0", "--read-only", "-o", "ro", "-v", "--verbose",
			       "-vv"),
			 0);
	assert_string_equal(cl.config_file, "/etc/tagdisk/a.ini");
	assert_true(cl.foreground);
	assert_int_equal(cl.verbose, 4);
	assert_int_equal(cl.nr_fuse_opts, 1);
	assert_string_equal(cl.fuse_opts[0], "ro");
	assert_int_equal(cl.nr_overrides, 10);
	assert_override(&cl, 0, "--image", "disk", "image", "/i.img");
	assert_override(&cl, 1, "--size", "disk", "size", "1G");
	assert_override(&cl, 2, "--mount", "disk", "mountpoint", "/m");
	assert_override(&cl, 3, "--name", "disk", "name", "vol");
	assert_override(&cl, 4, "--socket", "admin", "socket", "/s.sock");
	assert_override(&cl, 5, "--mode", "queue", "mode", "bio");
	assert_override(&cl, 6, "--elevator", "queue", "elevator", "noop");
	assert_override(&cl, 7, "--depth", "tags", "depth", "7");
	assert_override(&cl, 8, "--workers", "drive", "workers", "0");
	assert_override(&cl, 9, "--read-only", "disk", "read_only", "true");

	/* Built without its -c file: every override lands in its field. */
	free(cl.config_file);
	cl.config_file = NULL;
	td_config_init(&c);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), 0);
	assert_string_equal(c.image, "/i.img");
	assert_int_equal(c.size_bytes, 1ULL << 30);
	assert_string_equal(c.mountpoint, "/m");
	assert_string_equal(c.name, "vol");
	assert_string_equal(c.socket, "/s.sock");
	assert_int_equal(c.mode, TD_MODE_BIO);
	assert_string_equal(c.elevator, "noop");
	assert_int_equal(c.depth, 7);
	assert_int_equal(c.workers, 0);
	assert_true(c.read_only);
	assert_true(c.foreground);
	assert_int_equal(c.verbose, 4);
	assert_int_equal(c.nr_fuse_opts, 1);
	assert_string_equal(c.fuse_opts[0], "ro");
	assert_null(c.config_file);
	td_config_free(&c);
	td_cmdline_free(&cl);
	assert_int_equal(cl.nr_overrides, 0);
	assert_null(cl.overrides);
}

static void test_cmdline_accepts_opt_equals_value(void **state)
{
	struct tmp *t = *state;
	struct td_cmdline cl;

	assert_int_equal(PARSE(&cl, t->err, "--depth=9", "--image=/x.img", "--mode=rq", "--size=4K",
			       "--name=a=b"),
			 0);
	assert_int_equal(cl.nr_overrides, 5);
	assert_override(&cl, 0, "--depth", "tags", "depth", "9");
	assert_override(&cl, 1, "--image", "disk", "image", "/x.img");
	assert_override(&cl, 2, "--mode", "queue", "mode", "rq");
	assert_override(&cl, 3, "--size", "disk", "size", "4K");
	assert_override(&cl, 4, "--name", "disk", "name", "a=b");
	td_cmdline_free(&cl);

	/* getopt_long's unique abbreviations work and are reported by their full name. */
	assert_int_equal(PARSE(&cl, t->err, "--dep=5", "--read"), 0);
	assert_int_equal(cl.nr_overrides, 2);
	assert_override(&cl, 0, "--depth", "tags", "depth", "5");
	assert_override(&cl, 1, "--read-only", "disk", "read_only", "true");
	td_cmdline_free(&cl);
	assert_int_equal(PARSE(&cl, t->err, "--dep=0"), -EINVAL);
	assert_string_equal(t->err, "--depth \"0\": must be between 1 and 4096");
}

static void test_cmdline_fuse_options_split_and_keep_order(void **state)
{
	struct tmp *t = *state;
	struct td_cmdline cl;

	assert_int_equal(PARSE(&cl, t->err, "-o", "a,b", "-o", "c", "-od=1"), 0);
	assert_int_equal(cl.nr_fuse_opts, 4);
	assert_string_equal(cl.fuse_opts[0], "a");
	assert_string_equal(cl.fuse_opts[1], "b");
	assert_string_equal(cl.fuse_opts[2], "c");
	assert_string_equal(cl.fuse_opts[3], "d=1");
	td_cmdline_free(&cl);

	assert_int_equal(PARSE(&cl, t->err, "-o", "a,,b"), -EINVAL);
	assert_string_equal(t->err, "-o \"a,,b\": empty FUSE option");
	assert_int_equal(cl.nr_fuse_opts, 0);
	assert_null(cl.fuse_opts);
	assert_int_equal(PARSE(&cl, t->err, "-o", "a,"), -EINVAL);
	assert_string_equal(t->err, "-o \"a,\": empty FUSE option");
	assert_int_equal(PARSE(&cl, t->err, "-o", ""), -EINVAL);
	assert_string_equal(t->err, "-o \"\": empty FUSE option");

	/* Only the very words that lift nosuid or nodev are refused. */
	assert_int_equal(PARSE(&cl, t->err, "-o", "nosuid,nodev,suidx,devx,xdev"), 0);
	assert_int_equal(cl.nr_fuse_opts, 5);
	td_cmdline_free(&cl);
	assert_int_equal(PARSE(&cl, t->err, "-o", "ro,suid"), -EINVAL);
	assert_string_equal(t->err,
			    "-o \"ro,suid\": suid is refused: the disk is always mounted nosuid,nodev");
	assert_int_equal(cl.nr_fuse_opts, 0);
}

static void test_cmdline_rejects_unknown_missing_and_positional(void **state)
{
	static const struct {
		const char *arg1;
		const char *arg2;
		const char *message;
	} cases[] = {
	    {"--bogus", NULL, "unknown option --bogus"},
	    {"--bogus=1", NULL, "unknown option --bogus"},
	    {"-x", NULL, "unknown option -x"},
	    {"-fx", NULL, "unknown option -x"},
	    {"--config", "a.ini", "unknown option --config"},
	    {"--ver", NULL, "ambiguous option --ver"},
	    {"-c", NULL, "option -c needs a value"},
	    {"-o", NULL, "option -o needs a value"},
	    {"--depth", NULL, "option --depth needs a value"},
	    {"--image", NULL, "option --image needs a value"},
	    {"--read-only=yes", NULL, "option --read-only takes no value"},
	    {"--help=1", NULL, "option --help takes no value"},
	    {"disk.img", NULL, "unexpected argument \"disk.img\""},
	    {"-f", "extra", "unexpected argument \"extra\""},
	    {"--", "-f", "unexpected argument \"-f\""},
	    {"-", NULL, "unexpected argument \"-\""},
	    {"--depth", "0", "--depth \"0\": must be between 1 and 4096"},
	    {"--depth=abc", NULL, "--depth \"abc\": not a number"},
	    {"--workers", "300", "--workers \"300\": must be between 0 and 256"},
	    {"--size", "1.5G",
	     "--size \"1.5G\": not a size (a whole number of bytes, or with a K, M, G or T"
	     " suffix)"},
	    {"--mode", "sq", "--mode \"sq\": must be rq, bio or mq"},
	    {"--name", "a/b", "--name \"a/b\": must not contain '/'"},
	    {"--name", "d,allow_other",
	     "--name \"d,allow_other\": must not contain ',' or '\\' (a mount option would"
	     " read them)"},
	    {"-o", "allow_other,suid",
	     "-o \"allow_other,suid\": suid is refused: the disk is always mounted nosuid,nodev"},
	    {"-odev", NULL, "-o \"dev\": dev is refused: the disk is always mounted nosuid,nodev"},
	    {"--image", "", "--image \"\": must not be empty"},
	    {"--mount=", NULL, "--mount \"\": must not be empty"},
	    {"-c", "", "-c \"\": must not be empty"},
	    {"--pid-file", NULL, "option --pid-file needs a value"},
	    {"--pid-file=", NULL, "--pid-file \"\": must not be empty"},
	};
	struct tmp *t = *state;
	struct td_cmdline cl;

	for (size_t i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		char *argv[] = {"tagdiskd", "-f", (char *)cases[i].arg1, (char *)cases[i].arg2,
				NULL};

		print_message("# argv: %s %s\n", cases[i].arg1, cases[i].arg2 ? cases[i].arg2 : "");
		t->err[0] = '\0';
		assert_int_equal(parse_argv(&cl, argv, t->err, sizeof(t->err)), -EINVAL);
		assert_string_equal(t->err, cases[i].message);
		/* Left empty on error. */
		assert_null(cl.config_file);
		assert_null(cl.overrides);
		assert_int_equal(cl.nr_overrides, 0);
		assert_false(cl.foreground);
	}
}

static void test_cmdline_elevator_is_checked_against_registry(void **state)
{
	struct tmp *t = *state;
	struct td_cmdline cl;
	char names[256], expect[512];

	td_elv_names(names, sizeof(names));
	snprintf(expect, sizeof(expect), "--elevator \"cfq\": unknown elevator (known: %s)", names);
	assert_int_equal(PARSE(&cl, t->err, "--elevator", "cfq"), -EINVAL);
	assert_string_equal(t->err, expect);
}

/* Run td_cmdline_parse with stdout sent to a file; return what it printed. */
static int parse_capturing_stdout(struct tmp *t, char **argv, char *out, size_t outlen)
{
	struct td_cmdline cl;
	const char *path = path_in(t, "stdout.txt");
	int saved, fd, ret;
	ssize_t n;

	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	assert_true(saved >= 0);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
	ret = parse_argv(&cl, argv, t->err, sizeof(t->err));
	fflush(stdout);
	assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO);
	close(saved);
	n = pread(fd, out, outlen - 1, 0);
	assert_true(n >= 0);
	out[n] = '\0';
	close(fd);
	/* Help and version leave the command line empty. */
	assert_int_equal(cl.nr_overrides, 0);
	assert_false(cl.foreground);
	return ret;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_cmdline_help_prints_usage_and_returns_1(void **state)
{
	struct tmp *t = *state;
	char out[8192];

	assert_int_equal(
	    parse_capturing_stdout(t, (char *[]){"tagdiskd", "-f", "-h", NULL}, out, sizeof(out)),
	    1);
	assert_true(
	    starts_with(out, "Usage: tagdiskd [-c FILE] [-f] [--pid-file PATH] [--image PATH] [--size SIZE]"));
	assert_non_null(strstr(out, "--read-only"));
	assert_non_null(strstr(out, "-o OPT[,OPT...]"));
	assert_non_null(strstr(out, "noop"));

	assert_int_equal(
	    parse_capturing_stdout(t, (char *[]){"tagdiskd", "--help", NULL}, out, sizeof(out)), 1);
	assert_true(starts_with(out, "Usage: tagdiskd "));
}

/* The version, and the backends this build has (make WITH_RBD=0, WITH_NBD=0). */
#if TD_WITH_RBD
#define IF_RBD(s) s
#else
#define IF_RBD(s)
#endif
#if TD_WITH_NBD
#define IF_NBD(s) s
#else
#define IF_NBD(s)
#endif
#define VERSION_LINE "tagdiskd " TD_VERSION " (backends: file" IF_RBD(", rbd") IF_NBD(", nbd") ")\n"

static void test_cmdline_version_prints_name_and_version(void **state)
{
	struct tmp *t = *state;
	char out[256];

	assert_int_equal(
	    parse_capturing_stdout(t, (char *[]){"tagdiskd", "-V", NULL}, out, sizeof(out)), 1);
	assert_string_equal(out, VERSION_LINE);
	assert_int_equal(
	    parse_capturing_stdout(t, (char *[]){"tagdiskd", "--version", NULL}, out, sizeof(out)),
	    1);
	assert_string_equal(out, VERSION_LINE);
}

static void test_cmdline_can_be_parsed_again(void **state)
{
	struct tmp *t = *state;
	struct td_cmdline a, b;

	assert_int_equal(PARSE(&a, t->err, "--depth", "3", "-f"), 0);
	/* A failed parse in between must not disturb the next one. */
	assert_int_equal(PARSE(&b, t->err, "--nope"), -EINVAL);
	assert_int_equal(PARSE(&b, t->err, "--depth", "5"), 0);
	assert_int_equal(a.nr_overrides, 1);
	assert_override(&a, 0, "--depth", "tags", "depth", "3");
	assert_true(a.foreground);
	assert_int_equal(b.nr_overrides, 1);
	assert_override(&b, 0, "--depth", "tags", "depth", "5");
	assert_false(b.foreground);
	td_cmdline_free(&a);
	td_cmdline_free(&b);

	/* No options at all. */
	assert_int_equal(PARSE(&a, t->err, NULL), 0);
	assert_int_equal(a.nr_overrides, 0);
	assert_null(a.config_file);
	td_cmdline_free(&a);
}

static void test_cmdline_makes_paths_absolute(void **state)
{
	struct tmp *t = *state;
	struct td_cmdline cl;
	char cwd[PATH_MAX];

	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(t->dir), 0);
	assert_int_equal(PARSE(&cl, t->err, "-c", "conf.ini", "--image", "img/d.img", "--mount",
			       "mnt/", "--socket", "s.sock", "--name", "n", "--pid-file", "run/td.pid"),
			 0);
	assert_int_equal(chdir(cwd), 0);
	assert_string_equal(cl.config_file, path_in(t, "conf.ini"));
	assert_string_equal(cl.pid_file, path_in(t, "run/td.pid"));
	assert_override(&cl, 0, "--image", "disk", "image", path_in(t, "img/d.img"));
	assert_override(&cl, 1, "--mount", "disk", "mountpoint", path_in(t, "mnt"));
	assert_override(&cl, 2, "--socket", "admin", "socket", path_in(t, "s.sock"));
	assert_override(&cl, 3, "--name", "disk", "name", "n");
	td_cmdline_free(&cl);
}

/* ---- build: precedence ------------------------------------------------ */

static void test_config_build_command_line_beats_file_beats_default(void **state)
{
	struct tmp *t = *state;
	const char *ini = path_in(t, "prec.ini");
	struct td_cmdline cl;
	struct td_config c;
	char *argv[] = {"tagdiskd", "-c", (char *)ini, "--depth", "64", "-o", "ro", NULL};
	const struct td_config_origin *depth;

	write_file(ini, "[tags]\ndepth = 16\n[queue]\nfifo_batch = 4\n");
	assert_int_equal(parse_argv(&cl, argv, t->err, sizeof(t->err)), 0);
	td_config_init(&c);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), 0);
	assert_int_equal(c.depth, 64);			  /* command line over file */
	assert_int_equal(c.tunables.fifo_batch, 4);	  /* file over default */
	assert_int_equal(c.tunables.read_expire_ms, 500); /* default */
	assert_string_equal(c.config_file, ini);
	assert_int_equal(c.nr_fuse_opts, 1);
	/* The option, and the line of the file it replaced (the daemon logs both). */
	depth = &c.origin[td_config_find_key("tags", "depth") - td_config_keys];
	assert_string_equal(depth->option, "--depth");
	assert_int_equal(depth->overridden_line, 2);
	assert_int_equal(c.origin[td_config_find_key("queue", "fifo_batch") - td_config_keys]
				 .overridden_line,
			 0);

	/* SIGHUP: the file changed; build again on the same config. */
	write_file(ini, "[tags]\ndepth = 8\n[queue]\nread_expire_ms = 100\n");
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), 0);
	assert_int_equal(c.depth, 64);			  /* still the command line */
	assert_int_equal(c.tunables.fifo_batch, 16);	  /* gone from the file: default again */
	assert_int_equal(c.tunables.read_expire_ms, 100); /* new in the file */
	assert_int_equal(c.nr_fuse_opts, 1);		  /* copied once, not appended */
	assert_string_equal(c.fuse_opts[0], "ro");
	td_config_free(&c);
	td_cmdline_free(&cl);
}

static void test_config_build_failure_leaves_config_unchanged(void **state)
{
	struct tmp *t = *state;
	const char *ini = path_in(t, "reload.ini");
	char expect[PATH_MAX + 100];
	struct td_cmdline cl;
	struct td_config c, before;
	char *argv[] = {"tagdiskd", "-c", (char *)ini, "--workers", "2", NULL};

	write_file(ini, "[tags]\ndepth = 16\n[disk]\nimage = /a.img\n");
	assert_int_equal(parse_argv(&cl, argv, t->err, sizeof(t->err)), 0);
	td_config_init(&c);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), 0);
	td_config_init(&before);
	assert_int_equal(td_config_build(&before, &cl, t->err, sizeof(t->err)), 0);

	write_file(ini, "[tags]\ndepth = 0\n");
	snprintf(expect, sizeof(expect), "%s:2: [tags] depth = \"0\": must be between 1 and 4096",
		 ini);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);
	assert_config_equal(&c, &before);

	assert_int_equal(unlink(ini), 0);
	snprintf(expect, sizeof(expect), "config file \"%s\": No such file or directory", ini);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);
	assert_config_equal(&c, &before);
	assert_int_equal(c.depth, 16);
	assert_string_equal(c.image, "/a.img");
	td_config_free(&c);
	td_config_free(&before);
	td_cmdline_free(&cl);
}

static void test_config_build_without_file_gives_defaults(void **state)
{
	struct tmp *t = *state;
	struct td_cmdline cl;
	struct td_config c, def;

	assert_int_equal(PARSE(&cl, t->err, NULL), 0);
	td_config_init(&c);
	td_config_init(&def);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), 0);
	assert_config_equal(&c, &def);
	td_config_free(&c);
	td_config_free(&def);
	td_cmdline_free(&cl);
}

/* ---- validate --------------------------------------------------------- */

/* A config that validates: mountpoint <tmp>/mnt, image <tmp>/disk.img (missing), size 1M. */
/* A config that validates, with the socket left to its default. */
static void valid_config_default_socket(struct tmp *t, struct td_config *c)
{
	const char *mnt = path_in(t, "mnt");

	if (!exists(mnt))
		assert_int_equal(mkdir(mnt, 0755), 0);
	td_config_init(c);
	assert_int_equal(td_config_set(c, "disk", "mountpoint", mnt, t->err, sizeof(t->err)), 0);
	assert_int_equal(
	    td_config_set(c, "disk", "image", path_in(t, "disk.img"), t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(c, "disk", "size", "1M", t->err, sizeof(t->err)), 0);
}

/* A config that validates: its socket is not /run/tagdisk/disk.sock, which a daemon may hold. */
static void valid_config(struct tmp *t, struct td_config *c)
{
	valid_config_default_socket(t, c);
	assert_int_equal(
	    td_config_set(c, "admin", "socket", path_in(t, "admin.sock"), t->err, sizeof(t->err)),
	    0);
}

static void expect_invalid(struct td_config *c, struct tmp *t, const char *message)
{
	t->err[0] = '\0';
	assert_int_equal(td_config_validate(c, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, message);
}

static void test_config_validate_new_image_needs_size_and_creates_nothing(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char expect[PATH_MAX + 100];
	int before;

	valid_config(t, &c);
	before = count_entries(t->dir);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_false(exists(c.image));
	assert_int_equal(count_entries(t->dir), before);
	td_config_free(&c);

	valid_config(t, &c);
	assert_int_equal(td_config_set(&c, "disk", "size", "0", t->err, sizeof(t->err)), 0);
	snprintf(expect, sizeof(expect),
		 "[disk] image = \"%s\": does not exist and no size was given",
		 path_in(t, "disk.img"));
	expect_invalid(&c, t, expect);
	assert_false(exists(path_in(t, "disk.img")));
	assert_int_equal(count_entries(t->dir), before);
	td_config_free(&c);
}

static void test_config_validate_new_image_needs_existing_directory(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char expect[3 * PATH_MAX];

	valid_config(t, &c);
	assert_int_equal(td_config_set(&c, "disk", "image", path_in(t, "nodir/disk.img"), t->err,
				       sizeof(t->err)),
			 0);
	snprintf(expect, sizeof(expect), "[disk] image = \"%s\": directory \"%s\" does not exist",
		 path_in(t, "nodir/disk.img"), path_in(t, "nodir"));
	expect_invalid(&c, t, expect);
	assert_false(exists(path_in(t, "nodir")));

	write_file(path_in(t, "plain"), "x");
	assert_int_equal(td_config_set(&c, "disk", "image", path_in(t, "plain/disk.img"), t->err,
				       sizeof(t->err)),
			 0);
	snprintf(expect, sizeof(expect), "[disk] image = \"%s\": Not a directory",
		 path_in(t, "plain/disk.img"));
	expect_invalid(&c, t, expect);
	td_config_free(&c);
}

static void test_config_validate_existing_image_size_checks(void **state)
{
	struct tmp *t = *state;
	const char *img = path_in(t, "disk.img");
	struct td_config c;
	char expect[2 * PATH_MAX];

	/* Not a multiple of the block size. */
	make_file_of_size(img, 1000);
	valid_config(t, &c);
	assert_int_equal(td_config_set(&c, "disk", "size", "0", t->err, sizeof(t->err)), 0);
	snprintf(expect, sizeof(expect),
		 "[disk] image = \"%s\": its size (1000 bytes) is not a nonzero multiple of"
		 " logical_block_size (512)",
		 img);
	expect_invalid(&c, t, expect);

	/* Empty. */
	make_file_of_size(img, 0);
	snprintf(expect, sizeof(expect),
		 "[disk] image = \"%s\": its size (0 bytes) is not a nonzero multiple of"
		 " logical_block_size (512)",
		 img);
	expect_invalid(&c, t, expect);

	/* A multiple of 512 but not of 4096. */
	make_file_of_size(img, 6 * 512);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(
	    td_config_set(&c, "disk", "logical_block_size", "4096", t->err, sizeof(t->err)), 0);
	snprintf(expect, sizeof(expect),
		 "[disk] image = \"%s\": its size (3072 bytes) is not a nonzero multiple of"
		 " logical_block_size (4096)",
		 img);
	expect_invalid(&c, t, expect);

	/* size given and different from the image's. */
	make_file_of_size(img, 1 << 20);
	assert_int_equal(td_config_set(&c, "disk", "size", "2M", t->err, sizeof(t->err)), 0);
	snprintf(expect, sizeof(expect),
		 "[disk] size = \"2M\": the existing image \"%s\" is 1M (1048576 bytes)", img);
	expect_invalid(&c, t, expect);

	/* Equal, or 0: fine, and the image is untouched. */
	assert_int_equal(td_config_set(&c, "disk", "size", "1024K", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&c, "disk", "size", "0", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	{
		struct stat st;

		assert_int_equal(stat(img, &st), 0);
		assert_int_equal(st.st_size, 1 << 20);
	}
	td_config_free(&c);
}

static void test_config_validate_image_must_be_regular_file(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char expect[PATH_MAX + 100];

	valid_config(t, &c);
	assert_int_equal(mkdir(path_in(t, "dir.img"), 0755), 0);
	assert_int_equal(
	    td_config_set(&c, "disk", "image", path_in(t, "dir.img"), t->err, sizeof(t->err)), 0);
	snprintf(expect, sizeof(expect), "[disk] image = \"%s\": not a regular file",
		 path_in(t, "dir.img"));
	expect_invalid(&c, t, expect);
	td_config_free(&c);
}

static void test_config_validate_mountpoint_must_be_directory(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char expect[PATH_MAX + 100];

	valid_config(t, &c);
	assert_int_equal(
	    td_config_set(&c, "disk", "mountpoint", path_in(t, "nomnt"), t->err, sizeof(t->err)),
	    0);
	snprintf(expect, sizeof(expect), "[disk] mountpoint = \"%s\": does not exist",
		 path_in(t, "nomnt"));
	expect_invalid(&c, t, expect);
	assert_false(exists(path_in(t, "nomnt")));

	write_file(path_in(t, "file"), "x");
	assert_int_equal(
	    td_config_set(&c, "disk", "mountpoint", path_in(t, "file"), t->err, sizeof(t->err)), 0);
	snprintf(expect, sizeof(expect), "[disk] mountpoint = \"%s\": not a directory",
		 path_in(t, "file"));
	expect_invalid(&c, t, expect);
	td_config_free(&c);
}

static void test_config_validate_requires_image_and_mountpoint(void **state)
{
	struct tmp *t = *state;
	struct td_config c;

	td_config_init(&c);
	expect_invalid(&c, t,
		       "[disk] image is not set (give it in the config file or with --image)");
	assert_int_equal(td_config_set(&c, "disk", "image", "/x.img", t->err, sizeof(t->err)), 0);
	expect_invalid(&c, t,
		       "[disk] mountpoint is not set (give it in the config file or with --mount)");
	td_config_free(&c);
}

static void test_config_validate_cross_key_checks(void **state)
{
	struct tmp *t = *state;
	struct td_config c;

	/* workers 0 goes with every model: hdd has one actuator, ssd at least one thread. */
	valid_config(t, &c);
	assert_int_equal(td_config_set(&c, "drive", "workers", "0", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&c, "drive", "model", "hdd", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&c, "drive", "model", "ssd", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	td_config_free(&c);

	/* Full-stroke seek shorter than track-to-track. */
	valid_config(t, &c);
	assert_int_equal(
	    td_config_set(&c, "drive", "hdd_seek_track_us", "600", t->err, sizeof(t->err)), 0);
	assert_int_equal(
	    td_config_set(&c, "drive", "hdd_seek_full_us", "599", t->err, sizeof(t->err)), 0);
	expect_invalid(
	    &c, t, "[drive] hdd_seek_full_us = \"599\": must be at least hdd_seek_track_us (600)");
	assert_int_equal(
	    td_config_set(&c, "drive", "hdd_seek_full_us", "600", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	td_config_free(&c);

	/* max_sectors with 4096-byte blocks. */
	valid_config(t, &c);
	assert_int_equal(td_config_set(&c, "queue", "max_sectors", "2052", t->err, sizeof(t->err)),
			 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(
	    td_config_set(&c, "disk", "logical_block_size", "4096", t->err, sizeof(t->err)), 0);
	expect_invalid(&c, t,
		       "[queue] max_sectors = \"2052\": must be a multiple of 8 with"
		       " logical_block_size = 4096");
	assert_int_equal(td_config_set(&c, "queue", "max_sectors", "2056", t->err, sizeof(t->err)),
			 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);

	/* size with 4096-byte blocks. */
	assert_int_equal(td_config_set(&c, "disk", "size", "1049088", t->err, sizeof(t->err)), 0);
	expect_invalid(
	    &c, t, "[disk] size = \"1049088\": must be a multiple of logical_block_size (4096)");
	assert_int_equal(td_config_check(&c, t->err, sizeof(t->err)), -EINVAL);
	td_config_free(&c);
}

static void test_config_validate_socket_group(void **state)
{
	struct tmp *t = *state;
	struct td_config c;

	valid_config(t, &c);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(c.socket_gid, (gid_t)-1);

	assert_int_equal(td_config_set(&c, "admin", "socket_group", "tagdisk-no-such-group", t->err,
				       sizeof(t->err)),
			 0);
	expect_invalid(&c, t, "[admin] socket_group = \"tagdisk-no-such-group\": no such group");
	assert_int_equal(
	    td_config_set(&c, "admin", "socket_group", "4000000000", t->err, sizeof(t->err)), 0);
	expect_invalid(&c, t, "[admin] socket_group = \"4000000000\": no such group");

	assert_int_equal(td_config_set(&c, "admin", "socket_group", "root", t->err, sizeof(t->err)),
			 0);
	c.socket_gid = 1234;
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(c.socket_gid, 0);
	assert_int_equal(td_config_set(&c, "admin", "socket_group", "0", t->err, sizeof(t->err)),
			 0);
	c.socket_gid = 1234;
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_int_equal(c.socket_gid, 0);
	td_config_free(&c);
}

static void test_config_validate_fills_default_socket(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char expect[PATH_MAX];

	valid_config_default_socket(t, &c);
	assert_int_equal(td_config_set(&c, "disk", "name", "vol1", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	if (geteuid() == 0)
		snprintf(expect, sizeof(expect), "/run/tagdisk/vol1.sock");
	else
		snprintf(expect, sizeof(expect), "%s/vol1.sock", t->dir);
	assert_string_equal(c.socket, expect);
	assert_false(exists("/run/tagdisk/vol1.sock"));
	td_config_free(&c);

	/* A socket that is set is kept. */
	valid_config(t, &c);
	assert_int_equal(td_config_set(&c, "admin", "socket", "/x/y.sock", t->err, sizeof(t->err)),
			 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	assert_string_equal(c.socket, "/x/y.sock");
	td_config_free(&c);
}

static void test_config_default_socket_root_and_user(void **state)
{
	struct td_config c;
	char buf[PATH_MAX];

	(void)state;
	td_config_init(&c);
	assert_int_equal(td_config_default_socket(&c, 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/run/tagdisk/disk.sock");
	/* Not root and no mountpoint: nothing to put it beside. */
	assert_int_equal(td_config_default_socket(&c, 1000, buf, sizeof(buf)), -EINVAL);

	c.mountpoint = strdup("/srv/tagdisk/mnt");
	assert_int_equal(td_config_default_socket(&c, 1000, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/srv/tagdisk/disk.sock");
	free(c.mountpoint);
	c.mountpoint = strdup("/srv/tagdisk//mnt//");
	assert_int_equal(td_config_default_socket(&c, 1000, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/srv/tagdisk/disk.sock");
	free(c.mountpoint);
	c.mountpoint = strdup("/mnt");
	assert_int_equal(td_config_default_socket(&c, 1000, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/disk.sock");
	free(c.mountpoint);
	c.mountpoint = strdup("mnt");
	assert_int_equal(td_config_default_socket(&c, 1000, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "./disk.sock");
	snprintf(c.name, sizeof(c.name), "vol");
	assert_int_equal(td_config_default_socket(&c, 1000, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "./vol.sock");
	/* "./vol.sock" needs 11 bytes. */
	assert_int_equal(td_config_default_socket(&c, 1000, buf, 11), 0);
	assert_int_equal(td_config_default_socket(&c, 1000, buf, 10), -ENAMETOOLONG);
	td_config_free(&c);
}

static void test_config_validate_rejects_socket_path_too_long(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char sock[200], expect[400];

	memset(sock, 's', sizeof(sock));
	sock[0] = '/';
	sock[108] = '\0';
	snprintf(expect, sizeof(expect),
		 "[admin] socket = \"%s\": longer than the 107 bytes a Unix socket path may have",
		 sock);
	valid_config(t, &c);
	assert_int_equal(td_config_set(&c, "admin", "socket", sock, t->err, sizeof(t->err)), 0);
	expect_invalid(&c, t, expect);
	sock[107] = '\0';
	assert_int_equal(td_config_set(&c, "admin", "socket", sock, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
	td_config_free(&c);
}

static void test_config_validate_makes_paths_absolute(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char cwd[PATH_MAX];
	int ret;

	assert_int_equal(mkdir(path_in(t, "mnt"), 0755), 0);
	td_config_init(&c);
	assert_int_equal(td_config_set(&c, "disk", "mountpoint", "mnt/", t->err, sizeof(t->err)),
			 0);
	assert_int_equal(td_config_set(&c, "disk", "image", "disk.img", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&c, "disk", "size", "1M", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&c, "admin", "socket", "s.sock", t->err, sizeof(t->err)), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(t->dir), 0);
	ret = td_config_validate(&c, t->err, sizeof(t->err));
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(ret, 0);
	assert_string_equal(c.mountpoint, path_in(t, "mnt"));
	assert_string_equal(c.image, path_in(t, "disk.img"));
	assert_string_equal(c.socket, path_in(t, "s.sock"));
	assert_false(exists(path_in(t, "disk.img")));
	td_config_free(&c);
}

/* ---- network backends ------------------------------------------------- */

static const struct td_config_key *key_of(const char *section, const char *key);

/* Without [disk] image: a network backend's disk is not a local file, and nothing is made. */
/* Return: whether this build has backend @name (make WITH_RBD=0 and WITH_NBD=0 leave them out). */
static bool backend_built(const char *name)
{
	if (strcmp(name, "rbd") == 0)
		return TD_WITH_RBD;
	if (strcmp(name, "nbd") == 0)
		return TD_WITH_NBD;
	return true;
}

static void test_config_validate_network_backends_need_no_image_file(void **state)
{
	static const struct kv cases[][2] = {
	    {{"drive", "backend", "rbd"}, {"rbd", "image", "vm1"}},
	    {{"drive", "backend", "nbd"}, {"nbd", "uri", "nbd+unix:///vm1?socket=/none.sock"}},
	};
	struct tmp *t = *state;
	struct td_config c;
	int before;

	assert_int_equal(mkdir(path_in(t, "mnt"), 0755), 0);
	before = count_entries(t->dir);
	for (size_t i = 0; i < TD_ARRAY_SIZE(cases); i++) {
		if (!backend_built(cases[i][0].value))
			continue;
		td_config_init(&c);
		assert_int_equal(td_config_set(&c, "disk", "mountpoint", path_in(t, "mnt"), t->err,
					       sizeof(t->err)),
				 0);
		for (size_t j = 0; j < 2; j++)
			assert_int_equal(td_config_set(&c, cases[i][j].section, cases[i][j].key,
						       cases[i][j].value, t->err, sizeof(t->err)),
					 0);
		/* Any size: rbd creates with it, nbd compares it with the export's. */
		assert_int_equal(td_config_set(&c, "disk", "size", "3M", t->err, sizeof(t->err)), 0);
		assert_int_equal(td_config_set(&c, "admin", "socket", path_in(t, "admin.sock"),
					       t->err, sizeof(t->err)),
				 0);
		assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
		assert_null(c.image);
		assert_int_equal(td_config_set(&c, "disk", "size", "0", t->err, sizeof(t->err)), 0);
		assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), 0);
		assert_int_equal(count_entries(t->dir), before);
		td_config_free(&c);
	}
}

/* Unset strings read as their defaults; set ones as given; rbd paths become absolute. */
static void test_config_str_defaults_and_resolve_of_rbd_paths(void **state)
{
	struct tmp *t = *state;
	struct td_config c;
	char cwd[PATH_MAX];
	int ret;

	td_config_init(&c);
	assert_string_equal(td_config_str(&c, "rbd", "pool"), "rbd");
	assert_string_equal(td_config_str(&c, "rbd", "conf"), "/etc/ceph/ceph.conf");
	assert_string_equal(td_config_str(&c, "rbd", "id"), "admin");
	assert_null(td_config_str(&c, "rbd", "keyring"));
	assert_null(td_config_str(&c, "rbd", "image"));
	assert_null(td_config_str(&c, "nbd", "uri"));
	assert_null(td_config_str(&c, "disk", "image"));
	assert_string_equal(td_config_backend_name(c.backend), "file");
	assert_string_equal(td_config_backend_name(TD_CONFIG_BACKEND_RBD), "rbd");
	assert_string_equal(td_config_backend_name(TD_CONFIG_BACKEND_NBD), "nbd");

	assert_int_equal(td_config_set(&c, "RBD", "Pool", "ssd", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&c, "rbd", "conf", "ceph.conf", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&c, "rbd", "keyring", "k/", t->err, sizeof(t->err)), 0);
	assert_string_equal(td_config_str(&c, "rbd", "pool"), "ssd");
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(t->dir), 0);
	ret = td_config_resolve(&c, t->err, sizeof(t->err));
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(ret, 0);
	assert_string_equal(c.rbd_conf, path_in(t, "ceph.conf"));
	assert_string_equal(c.rbd_keyring, path_in(t, "k"));
	td_config_free(&c);
}

/* Setting a key to its default text is no change: a reload does not ask for a restart. */
static void test_config_diff_default_text_equals_unset(void **state)
{
	struct tmp *t = *state;
	struct td_config a, b;

	td_config_init(&a);
	td_config_init(&b);
	assert_int_equal(td_config_set(&b, "rbd", "pool", "rbd", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&b, "rbd", "id", "admin", t->err, sizeof(t->err)), 0);
	assert_int_equal(
	    td_config_set(&b, "rbd", "conf", "/etc/ceph/ceph.conf", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&b, "rbd", "keyring", "", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_diff(&a, &b, NULL, 0), 0);
	assert_int_equal(td_config_set(&b, "rbd", "id", "tagdisk", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_diff(&a, &b, NULL, 0), 1);
	td_config_free(&a);
	td_config_free(&b);
}

/*
 * Keys the user gave for a backend that is not the one configured are
 * accepted and listed (the daemon logs them once); keys left at their
 * defaults, or set without an origin, are not.
 */
static void test_config_unused_keys_of_other_backends(void **state)
{
	struct tmp *t = *state;
	const char *ini = path_in(t, "unused.ini");
	const struct td_config_key *unused[8];
	struct td_config c;

	write_file(ini, "[rbd]\npool = ssd\nimage = vm1\n[nbd]\nconnections = 2\n"
			"[drive]\nbackend = file\n");
	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, ini, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_unused_keys(&c, unused, TD_ARRAY_SIZE(unused)), 3);
	assert_ptr_equal(unused[0], key_of("rbd", "pool"));
	assert_ptr_equal(unused[1], key_of("rbd", "image"));
	assert_ptr_equal(unused[2], key_of("nbd", "connections"));
	/* At most @max stored; the count is still all of them. */
	assert_int_equal(td_config_unused_keys(&c, unused, 1), 3);
	assert_int_equal(td_config_unused_keys(&c, NULL, 0), 3);

	c.backend = TD_CONFIG_BACKEND_RBD;
	assert_int_equal(td_config_unused_keys(&c, unused, TD_ARRAY_SIZE(unused)), 1);
	assert_ptr_equal(unused[0], key_of("nbd", "connections"));
	c.backend = TD_CONFIG_BACKEND_NBD;
	assert_int_equal(td_config_unused_keys(&c, unused, TD_ARRAY_SIZE(unused)), 2);
	td_config_free(&c);

	/* No origin (a default, or td_config_set()): nothing the user wrote. */
	td_config_init(&c);
	assert_int_equal(td_config_set(&c, "rbd", "image", "vm1", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_unused_keys(&c, unused, TD_ARRAY_SIZE(unused)), 0);
	td_config_free(&c);
}

/* A backend's size, against [disk] size and the block size, naming where size came from. */
static void test_config_check_backend_size(void **state)
{
	struct tmp *t = *state;
	char *argv[] = {"tagdiskd", "--size", "2M", NULL};
	const char *what = "the NBD export \"nbd://h/x\"";
	struct td_cmdline cl;
	struct td_config c;

	td_config_init(&c);
	assert_int_equal(td_config_check_backend_size(&c, what, 1 << 20, t->err, sizeof(t->err)),
			 0);
	assert_int_equal(td_config_check_backend_size(&c, what, 0, t->err, sizeof(t->err)),
			 -EINVAL);
	assert_string_equal(t->err, "the NBD export \"nbd://h/x\": its size (0 bytes) is not a"
				    " nonzero multiple of logical_block_size (512)");
	assert_int_equal(td_config_check_backend_size(&c, what, 1000, t->err, sizeof(t->err)),
			 -EINVAL);
	assert_string_equal(t->err, "the NBD export \"nbd://h/x\": its size (1000 bytes) is not a"
				    " nonzero multiple of logical_block_size (512)");
	assert_int_equal(td_config_set(&c, "disk", "size", "1M", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_check_backend_size(&c, what, 1 << 20, t->err, sizeof(t->err)),
			 0);
	assert_int_equal(td_config_check_backend_size(&c, what, 2 << 20, t->err, sizeof(t->err)),
			 -EINVAL);
	assert_string_equal(t->err, "[disk] size = \"1M\": the NBD export \"nbd://h/x\" is 2M"
				    " (2097152 bytes)");
	td_config_free(&c);

	assert_int_equal(parse_argv(&cl, argv, t->err, sizeof(t->err)), 0);
	td_config_init(&c);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_check_backend_size(&c, what, 3 << 20, t->err, sizeof(t->err)),
			 -EINVAL);
	assert_string_equal(t->err, "--size \"2M\": the NBD export \"nbd://h/x\" is 3M"
				    " (3145728 bytes)");
	td_config_free(&c);
	td_cmdline_free(&cl);
}

/* ---- messages name where a value came from ---------------------------- */

/*
 * A command line (and a file) that builds but does not validate, and the
 * message: it names the option, or the file and line, that set the value.
 * "DIR" stands for the test's directory (which holds mnt/), "FILE" for the
 * file's path. Each case is a test of its own.
 */
struct origin_case {
	const char *name;
	const char *ini;     /* NULL: no -c */
	off_t image_size;    /* > 0: DIR/disk.img exists with this size */
	const char *args[8]; /* after "tagdiskd" (and -c FILE) */
	const char *message;
};

static const struct origin_case origin_cases[] = {
    {"a missing image named by --image",
     NULL,
     0,
     {"--image", "DIR/disk.img", "--mount", "DIR/mnt"},
     "--image \"DIR/disk.img\": does not exist and no size was given"},
    {"a missing image named by the file",
     "[disk]\nmountpoint = DIR/mnt\nimage = DIR/disk.img\n",
     0,
     {NULL},
     "FILE:3: [disk] image = \"DIR/disk.img\": does not exist and no size was given"},
    {"the command line's image, not the file's",
     "[disk]\nimage = DIR/a.img\nsize = 0\n",
     0,
     {"--mount", "DIR/mnt", "--image", "DIR/b.img"},
     "--image \"DIR/b.img\": does not exist and no size was given"},
    {"a missing mount point named by --mount",
     NULL,
     0,
     {"--image", "DIR/disk.img", "--size", "1M", "--mount", "DIR/nowhere"},
     "--mount \"DIR/nowhere\": does not exist"},
    {"a size that is no multiple of the block size, by --size",
     NULL,
     0,
     {"--image", "DIR/disk.img", "--size", "1000", "--mount", "DIR/mnt"},
     "--size \"1000\": must be a multiple of logical_block_size (512)"},
    {"a size that is no multiple of the block size, by the file",
     "[disk]\nlogical_block_size = 4096\n\nsize = 4608\n",
     0,
     {"--image", "DIR/disk.img", "--mount", "DIR/mnt"},
     "FILE:4: [disk] size = \"4608\": must be a multiple of logical_block_size (4096)"},
    {"a size other than the existing image's",
     NULL,
     1 << 20,
     {"--image", "DIR/disk.img", "--size", "2M", "--mount", "DIR/mnt"},
     "--size \"2M\": the existing image \"DIR/disk.img\" is 1M (1048576 bytes)"},
    {"an existing image of a bad size, named by the file",
     "[disk]\n\nimage = DIR/disk.img\n",
     1000,
     {"--mount", "DIR/mnt"},
     "FILE:3: [disk] image = \"DIR/disk.img\": its size (1000 bytes) is not a nonzero multiple of"
     " logical_block_size (512)"},
    {"max_sectors against logical_block_size",
     "[queue]\nmax_sectors = 2052\n[disk]\nlogical_block_size = 4096\n",
     0,
     {"--image", "DIR/disk.img", "--size", "1M", "--mount", "DIR/mnt"},
     "FILE:2: [queue] max_sectors = \"2052\": must be a multiple of 8 with logical_block_size ="
     " 4096"},
    {"hdd seeks",
     "[drive]\nhdd_seek_track_us = 600\nhdd_seek_full_us = 599\n",
     0,
     {"--image", "DIR/disk.img", "--size", "1M", "--mount", "DIR/mnt"},
     "FILE:3: [drive] hdd_seek_full_us = \"599\": must be at least hdd_seek_track_us (600)"},
    {"a socket group that does not exist",
     "[admin]\nsocket_group = tagdisk-no-such-group\n",
     0,
     {"--image", "DIR/disk.img", "--size", "1M", "--mount", "DIR/mnt"},
     "FILE:2: [admin] socket_group = \"tagdisk-no-such-group\": no such group"},
    {"an image given by --image with backend rbd",
     "[drive]\nbackend = rbd\n[rbd]\nimage = vm1\n",
     0,
     {"--image", "DIR/disk.img", "--mount", "DIR/mnt"},
     "--image \"DIR/disk.img\": conflicts with [drive] backend = rbd (the disk is [rbd]"
     " pool/image; remove [disk] image)"},
    {"an image given in the file with backend nbd",
     "[nbd]\nuri = nbd://localhost/vm1\n[disk]\nmountpoint = DIR/mnt\nimage = DIR/disk.img\n"
     "[drive]\nbackend = nbd\n",
     1 << 20,
     {NULL},
     "FILE:5: [disk] image = \"DIR/disk.img\": conflicts with [drive] backend = nbd (the disk is"
     " [nbd] uri; remove [disk] image)"},
    {"backend rbd without its image",
     "[drive]\nbackend = rbd\n[rbd]\npool = ssd\n",
     0,
     {"--mount", "DIR/mnt"},
     "[rbd] image is not set (required with [drive] backend = rbd)"},
    {"backend nbd without its uri, whatever the other sections hold",
     "[drive]\nbackend = nbd\n[rbd]\nimage = vm1\n",
     0,
     {"--mount", "DIR/mnt", "--size", "1M"},
     "[nbd] uri is not set (required with [drive] backend = nbd)"},
    {"an rbd size that is no multiple of the block size",
     "[drive]\nbackend = rbd\n[rbd]\nimage = vm1\n",
     0,
     {"--mount", "DIR/mnt", "--size", "1000"},
     "--size \"1000\": must be a multiple of logical_block_size (512)"},
};

/* Copy @fmt into @buf with each "DIR" replaced by @dir and each "FILE" by @file. */
static void subst(char *buf, size_t len, const char *fmt, const char *dir, const char *file)
{
	size_t n = 0;

	while (*fmt && n + 1 < len) {
		const char *with = NULL;

		if (strncmp(fmt, "DIR", 3) == 0)
			with = dir;
		else if (strncmp(fmt, "FILE", 4) == 0)
			with = file;
		if (with) {
			n += (size_t)snprintf(buf + n, len - n, "%s", with);
			fmt += with == dir ? 3 : 4;
		} else {
			buf[n++] = *fmt++;
		}
	}
	assert_true(n < len);
	buf[n] = '\0';
}

static void test_config_validate_names_origin_case(void **state)
{
	struct tmp *t = *state;
	const struct origin_case *oc = t->param;
	const char *ini = path_in(t, "origin.ini");
	char args[8][PATH_MAX], text[1024], expect[2 * PATH_MAX];
	char *argv[12];
	struct td_cmdline cl;
	struct td_config c;
	int argc = 0;
	int before;

	assert_int_equal(mkdir(path_in(t, "mnt"), 0755), 0);
	if (oc->image_size)
		make_file_of_size(path_in(t, "disk.img"), oc->image_size);
	argv[argc++] = "tagdiskd";
	if (oc->ini) {
		subst(text, sizeof(text), oc->ini, t->dir, ini);
		write_file(ini, text);
		argv[argc++] = "-c";
		argv[argc++] = (char *)ini;
	}
	for (size_t i = 0; oc->args[i]; i++) {
		subst(args[i], sizeof(args[i]), oc->args[i], t->dir, ini);
		argv[argc++] = args[i];
	}
	argv[argc] = NULL;
	subst(expect, sizeof(expect), oc->message, t->dir, ini);
	/* A case about a backend this build leaves out (make WITH_RBD=0) is not one here. */
	if ((oc->ini && strstr(oc->ini, "backend = rbd") && !backend_built("rbd")) ||
	    (oc->ini && strstr(oc->ini, "backend = nbd") && !backend_built("nbd")))
		skip();

	before = count_entries(t->dir);
	assert_int_equal(parse_argv(&cl, argv, t->err, sizeof(t->err)), 0);
	td_config_init(&c);
	assert_int_equal(td_config_build(&c, &cl, t->err, sizeof(t->err)), 0);
	t->err[0] = '\0';
	assert_int_equal(td_config_validate(&c, t->err, sizeof(t->err)), -EINVAL);
	assert_string_equal(t->err, expect);
	assert_int_equal(count_entries(t->dir), before); /* nothing created */
	td_config_free(&c);
	td_cmdline_free(&cl);
}

/* ---- diff, format, resolve, live -------------------------------------- */

static const struct td_config_key *key_of(const char *section, const char *key)
{
	const struct td_config_key *k = td_config_find_key(section, key);

	assert_non_null(k);
	return k;
}

static void test_config_diff_names_changed_keys_in_table_order(void **state)
{
	struct tmp *t = *state;
	const struct td_config_key *changed[8];
	const struct td_config_key *sentinel = &td_config_keys[0];
	struct td_config a, b;

	td_config_init(&a);
	td_config_init(&b);
	assert_int_equal(td_config_diff(&a, &b, changed, TD_ARRAY_SIZE(changed)), 0);
	assert_int_equal(td_config_diff(&a, &b, NULL, 0), 0);

	assert_int_equal(td_config_set(&b, "admin", "socket", "/x.sock", t->err, sizeof(t->err)),
			 0);
	assert_int_equal(td_config_set(&b, "drive", "workers", "4", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&b, "tags", "depth", "8", t->err, sizeof(t->err)), 0);
	assert_int_equal(
	    td_config_set(&b, "drive", "shutdown_timeout_ms", "0", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&b, "queue", "elevator", "noop", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_diff(&a, &b, changed, TD_ARRAY_SIZE(changed)), 5);
	assert_ptr_equal(changed[0], key_of("queue", "elevator"));
	assert_ptr_equal(changed[1], key_of("tags", "depth"));
	assert_ptr_equal(changed[2], key_of("drive", "workers"));
	assert_ptr_equal(changed[3], key_of("drive", "shutdown_timeout_ms"));
	assert_ptr_equal(changed[4], key_of("admin", "socket"));
	/* The entry says whether the running daemon can apply the change. */
	assert_true(changed[0]->reloadable && changed[1]->reloadable && changed[3]->reloadable);
	assert_false(changed[2]->reloadable || changed[4]->reloadable);
	/* Symmetric. */
	assert_int_equal(td_config_diff(&b, &a, changed, TD_ARRAY_SIZE(changed)), 5);
	assert_ptr_equal(changed[4], key_of("admin", "socket"));

	/* At most @max stored; the count is still every change. */
	changed[2] = sentinel;
	assert_int_equal(td_config_diff(&a, &b, changed, 2), 5);
	assert_ptr_equal(changed[1], key_of("tags", "depth"));
	assert_ptr_equal(changed[2], sentinel);
	assert_int_equal(td_config_diff(&a, &b, NULL, 0), 5);

	/* Equal strings in different buffers are equal; what is not a key does not count. */
	td_config_free(&b);
	td_config_init(&b);
	assert_int_equal(td_config_set(&a, "disk", "image", "/i.img", t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_set(&b, "disk", "image", "/i.img", t->err, sizeof(t->err)), 0);
	b.verbose = 3;
	b.foreground = true;
	b.socket_gid = 0;
	b.origin[0].line = 12;
	assert_int_equal(td_config_diff(&a, &b, changed, TD_ARRAY_SIZE(changed)), 0);
	td_config_free(&a);
	td_config_free(&b);
}

/* Every key is compared: setting any one key to another value is one change, that key. */
static void test_config_diff_sees_every_key(void **state)
{
	struct tmp *t = *state;
	const struct td_config_key *changed[2];
	struct td_config def, c;

	td_config_init(&def);
	for (size_t i = 0; i < TD_ARRAY_SIZE(every_key); i++) {
		print_message("# [%s] %s\n", every_key[i].section, every_key[i].key);
		/* Built without rbd and nbd: backend has no value but its default. */
		if (!TD_WITH_RBD && !TD_WITH_NBD && strcmp(every_key[i].key, "backend") == 0)
			continue;
		td_config_init(&c);
		assert_int_equal(td_config_set(&c, every_key[i].section, every_key[i].key,
					       every_key[i].value, t->err, sizeof(t->err)),
				 0);
		assert_int_equal(td_config_diff(&def, &c, changed, TD_ARRAY_SIZE(changed)), 1);
		assert_ptr_equal(changed[0], key_of(every_key[i].section, every_key[i].key));
		td_config_free(&c);
	}
	td_config_free(&def);
}

static void test_config_format_value_reads_back(void **state)
{
	static const struct kv expect[] = {
	    {"disk", "size", "2G"},
	    {"disk", "read_only", "true"},
	    {"queue", "mode", "bio"},
	    {"drive", "model", "hdd"},
	    {"drive", "write_cache", "volatile"},
	    {"drive", "cache_size", "128M"},
	    {"drive", "seed", "42"},
	    {"admin", "socket_mode", "0600"},
	    {"admin", "socket_group", "root"},
	    {"admin", "trace_budget", "1G"},
	    {"drive", "shutdown_timeout_ms", "60000"},
	};
	struct tmp *t = *state;
	struct td_config def, c, back;
	char buf[PATH_MAX];

	/* Defaults print as the table writes them (keys without one: unset, ""). */
	td_config_init(&def);
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		const struct td_config_key *k = &td_config_keys[i];

		assert_true(td_config_format_value(&def, k, buf, sizeof(buf)) >= 0);
		assert_string_equal(buf, k->default_value ? k->default_value : "");
	}

	/* Any value prints as text that sets the same value again. */
	td_config_init(&c);
	for (size_t i = 0; i < TD_ARRAY_SIZE(every_key); i++)
		assert_int_equal(td_config_set(&c, every_key[i].section, every_key[i].key,
					       every_key[i].value, t->err, sizeof(t->err)),
				 0);
	td_config_init(&back);
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		const struct td_config_key *k = &td_config_keys[i];

		assert_true(td_config_format_value(&c, k, buf, sizeof(buf)) < (int)sizeof(buf));
		assert_int_equal(
		    td_config_set(&back, k->section, k->key, buf, t->err, sizeof(t->err)), 0);
	}
	assert_int_equal(td_config_diff(&c, &back, NULL, 0), 0);
	for (size_t i = 0; i < TD_ARRAY_SIZE(expect); i++) {
		td_config_format_value(&c, key_of(expect[i].section, expect[i].key), buf,
				       sizeof(buf));
		assert_string_equal(buf, expect[i].value);
	}
	/* Cut like snprintf, telling the whole length. */
	assert_int_equal(td_config_format_value(&c, key_of("drive", "write_cache"), buf, 4), 8);
	assert_string_equal(buf, "vol");
	td_config_free(&back);
	td_config_free(&c);
	td_config_free(&def);
}

static void test_config_key_live_matches_reloadable_flag(void **state)
{
	(void)state;
	assert_true(td_config_key_live("drive", "shutdown_timeout_ms"));
	assert_true(td_config_key_live("TAGS", "Depth"));
	assert_true(td_config_key_live("queue", "elevator"));
	assert_false(td_config_key_live("queue", "mode"));
	assert_false(td_config_key_live("drive", "workers"));
	assert_false(td_config_key_live("queue", "depth")); /* wrong section */
	assert_false(td_config_key_live("bogus", "depth"));
	assert_false(td_config_key_live("tags", ""));
}

/*
 * td_config_resolve() is the part of td_config_validate() that looks at no
 * file: after it, a freshly built config compares equal to the validated
 * one made from the same settings, as a reload needs.
 */
static void test_config_resolve_makes_built_equal_to_validated(void **state)
{
	struct tmp *t = *state;
	const char *ini = path_in(t, "resolve.ini");
	const struct td_config_key *changed[4];
	struct td_config running, next;
	struct td_cmdline cl;
	char cwd[PATH_MAX], sock[PATH_MAX], text[PATH_MAX + 64];
	char *argv[] = {"tagdiskd", "-c", (char *)ini, "--size", "1M", NULL};
	int before;

	assert_int_equal(mkdir(path_in(t, "mnt"), 0755), 0);
	/*
	 * Relative paths in the file are taken from the current directory. The
	 * socket is the default of a name no daemon on this machine has.
	 */
	snprintf(text, sizeof(text), "[disk]\nimage = disk.img\nmountpoint = mnt/\nname = unit%d\n",
		 (int)getpid());
	write_file(ini, text);
	assert_int_equal(parse_argv(&cl, argv, t->err, sizeof(t->err)), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(t->dir), 0);
	before = count_entries(".");

	td_config_init(&running);
	assert_int_equal(td_config_build(&running, &cl, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_validate(&running, t->err, sizeof(t->err)), 0);
	td_config_init(&next);
	assert_int_equal(td_config_build(&next, &cl, t->err, sizeof(t->err)), 0);
	/* Built only: relative paths and no socket yet. */
	assert_int_equal(td_config_diff(&running, &next, changed, TD_ARRAY_SIZE(changed)), 3);
	assert_ptr_equal(changed[0], key_of("disk", "image"));
	assert_ptr_equal(changed[1], key_of("disk", "mountpoint"));
	assert_ptr_equal(changed[2], key_of("admin", "socket"));
	assert_int_equal(td_config_resolve(&next, t->err, sizeof(t->err)), 0);
	assert_int_equal(td_config_diff(&running, &next, changed, TD_ARRAY_SIZE(changed)), 0);
	assert_int_equal(count_entries("."), before);
	assert_int_equal(chdir(cwd), 0);

	assert_string_equal(next.image, path_in(t, "disk.img"));
	assert_string_equal(next.mountpoint, path_in(t, "mnt"));
	assert_int_equal(td_config_default_socket(&next, geteuid(), sock, sizeof(sock)), 0);
	assert_string_equal(next.socket, sock);
	/* A socket that is set stays as it is; resolving twice changes nothing. */
	assert_int_equal(td_config_resolve(&next, t->err, sizeof(t->err)), 0);
	assert_string_equal(next.socket, sock);
	td_config_free(&next);
	td_config_free(&running);
	td_cmdline_free(&cl);
}

/* ---- the example file ------------------------------------------------- */

static char *read_example(void)
{
	FILE *f = fopen(EXAMPLE_INI, "r");
	char *text;
	long len;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len > 0);
	rewind(f);
	text = malloc((size_t)len + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
	text[len] = '\0';
	fclose(f);
	return text;
}

/*
 * Return: the line of @text that sets @key in [@section] (";key = ..." or
 * "key = ..."), copied into @line, or NULL.
 */
static const char *find_example_line(const char *text, const char *section, const char *key,
				     char *line, size_t len)
{
	size_t klen = strlen(key);
	char header[64];
	const char *p = text;
	const char *k;
	bool in_section = false;

	snprintf(header, sizeof(header), "[%s]", section);
	while (*p) {
		size_t n = strcspn(p, "\n");
		const char *l = p;

		p += n + (p[n] == '\n');
		if (n && l[0] == '[') {
			in_section = n == strlen(header) && strncmp(l, header, n) == 0;
			continue;
		}
		if (!in_section)
			continue;
		k = l[0] == ';' ? l + 1 : l;
		if (strncmp(k, key, klen) == 0 && k[klen] == ' ' && k[klen + 1] == '=') {
			snprintf(line, len, "%.*s", (int)n, l);
			return line;
		}
	}
	return NULL;
}

static void test_example_ini_documents_every_key_with_its_default(void **state)
{
	char *text = read_example();
	char line[512], expect[512];

	(void)state;
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		const struct td_config_key *k = &td_config_keys[i];

		print_message("# [%s] %s\n", k->section, k->key);
		assert_non_null(find_example_line(text, k->section, k->key, line, sizeof(line)));
		if (strcmp(k->section, "disk") == 0 && strcmp(k->key, "image") == 0)
			assert_string_equal(line, "image = /var/lib/tagdisk/disk.img");
		else if (strcmp(k->section, "rbd") == 0 && strcmp(k->key, "image") == 0)
			assert_string_equal(line, ";image = vm1");
		else if (strcmp(k->section, "nbd") == 0 && strcmp(k->key, "uri") == 0)
			assert_string_equal(line, ";uri = nbd://localhost/vm1");
		else if (strcmp(k->key, "mountpoint") == 0)
			assert_string_equal(line, "mountpoint = /run/tagdisk/disk");
		else if (strcmp(k->key, "socket") == 0)
			assert_string_equal(line, ";socket = /run/tagdisk/disk.sock");
		else {
			snprintf(expect, sizeof(expect), ";%s =%s%s", k->key,
				 *k->default_value ? " " : "", k->default_value);
			assert_string_equal(line, expect);
		}
	}
	free(text);
}

/* The example loads as is, and with every key uncommented gives the defaults. */
static void test_example_ini_loads_and_uncommented_equals_defaults(void **state)
{
	struct tmp *t = *state;
	const char *path = path_in(t, "uncommented.ini");
	char *text = read_example();
	struct td_config c, def;
	FILE *f;

	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, EXAMPLE_INI, t->err, sizeof(t->err)), 0);
	assert_string_equal(c.image, "/var/lib/tagdisk/disk.img");
	assert_string_equal(c.mountpoint, "/run/tagdisk/disk");
	td_config_free(&c);

	f = fopen(path, "w");
	assert_non_null(f);
	for (char *p = text; *p;) {
		size_t n = strcspn(p, "\n");

		/* ";key = value" becomes "key = value"; "; prose" stays a comment. */
		if (p[0] == ';' && p[1] >= 'a' && p[1] <= 'z')
			fprintf(f, "%.*s\n", (int)n - 1, p + 1);
		else
			fprintf(f, "%.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
	assert_int_equal(fclose(f), 0);
	free(text);

	td_config_init(&c);
	assert_int_equal(td_config_load_file(&c, path, t->err, sizeof(t->err)), 0);
	td_config_init(&def);
	def.image = strdup("/var/lib/tagdisk/disk.img");
	def.mountpoint = strdup("/run/tagdisk/disk");
	def.socket = strdup("/run/tagdisk/disk.sock");
	/* The backends' required keys have examples, not defaults; backend stays file. */
	def.rbd_image = strdup("vm1");
	def.nbd_uri = strdup("nbd://localhost/vm1");
	assert_config_equal(&c, &def);
	td_config_free(&c);
	td_config_free(&def);
}

int main(void)
{
	static const struct CMUnitTest fixed[] = {
	    cmocka_unit_test(test_config_init_sets_documented_defaults),
	    cmocka_unit_test(test_config_table_defaults_equal_init),
	    cmocka_unit_test(test_config_table_lists_each_key_once_with_reload_flags),
	    cmocka_unit_test(test_config_find_key_ignores_case_and_rejects_unknown),
	    cmocka_unit_test_setup_teardown(test_config_set_rejects_bad_values_with_exact_message,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(
		test_config_set_rejects_unknown_elevator_listing_known_ones, setup_tmp,
		teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_set_name_longer_than_255_bytes_is_rejected,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(
		test_config_set_accepts_boundaries_and_alternate_spellings, setup_tmp,
		teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_set_rejects_unknown_section_and_key,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test(test_config_error_is_cut_to_errlen),
	    cmocka_unit_test_setup_teardown(test_config_load_file_sets_every_key, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_load_file_ignores_case_comments_and_quotes,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_load_file_line_too_long, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_load_file_records_each_keys_line, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(
		test_config_load_file_rejects_missing_file_and_directory, setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_load_empty_file_keeps_defaults, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test(test_parse_size_table),
	    cmocka_unit_test(test_parse_u64_checks_syntax_and_range),
	    cmocka_unit_test(test_parse_bool_table),
	    cmocka_unit_test(test_format_size_is_exact_and_reads_back),
	    cmocka_unit_test_setup_teardown(test_cmdline_parses_every_option, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_accepts_opt_equals_value, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_fuse_options_split_and_keep_order,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_rejects_unknown_missing_and_positional,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_elevator_is_checked_against_registry,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_help_prints_usage_and_returns_1, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_version_prints_name_and_version, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_can_be_parsed_again, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_cmdline_makes_paths_absolute, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_build_command_line_beats_file_beats_default,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_build_failure_leaves_config_unchanged,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_build_without_file_gives_defaults,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(
		test_config_validate_new_image_needs_size_and_creates_nothing, setup_tmp,
		teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_new_image_needs_existing_directory,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_existing_image_size_checks,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_image_must_be_regular_file,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_mountpoint_must_be_directory,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_requires_image_and_mountpoint,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_cross_key_checks, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_socket_group, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_fills_default_socket, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test(test_config_default_socket_root_and_user),
	    cmocka_unit_test_setup_teardown(test_config_validate_rejects_socket_path_too_long,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_makes_paths_absolute, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_diff_names_changed_keys_in_table_order,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_diff_sees_every_key, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_format_value_reads_back, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test(test_config_key_live_matches_reloadable_flag),
	    cmocka_unit_test_setup_teardown(test_config_resolve_makes_built_equal_to_validated,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_validate_network_backends_need_no_image_file,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_str_defaults_and_resolve_of_rbd_paths,
					    setup_tmp, teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_diff_default_text_equals_unset, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_unused_keys_of_other_backends, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test_setup_teardown(test_config_check_backend_size, setup_tmp,
					    teardown_tmp),
	    cmocka_unit_test(test_example_ini_documents_every_key_with_its_default),
	    cmocka_unit_test_setup_teardown(test_example_ini_loads_and_uncommented_equals_defaults,
					    setup_tmp, teardown_tmp),
	};
	enum { NR_FIXED = TD_ARRAY_SIZE(fixed) };
	enum { NR_FILE = TD_ARRAY_SIZE(file_cases) };
	enum { NR_ORIGIN = TD_ARRAY_SIZE(origin_cases) };
	struct CMUnitTest tests[NR_FIXED + NR_FILE + NR_ORIGIN];
	char names[NR_FILE + NR_ORIGIN][160];
	size_t n = 0;

	for (size_t i = 0; i < NR_FIXED; i++)
		tests[n++] = fixed[i];
	/* One test per table case, named after it, its case as the prestate. */
	for (size_t i = 0; i < NR_FILE; i++) {
		snprintf(names[i], sizeof(names[i]), "test_config_load_file_refuses: %s",
			 file_cases[i].name);
		tests[n++] = (struct CMUnitTest){names[i], test_config_load_file_case, setup_tmp,
						 teardown_tmp, (void *)&file_cases[i]};
	}
	for (size_t i = 0; i < NR_ORIGIN; i++) {
		snprintf(names[NR_FILE + i], sizeof(names[0]),
			 "test_config_validate_names_origin: %s", origin_cases[i].name);
		tests[n++] =
		    (struct CMUnitTest){names[NR_FILE + i], test_config_validate_names_origin_case,
					setup_tmp, teardown_tmp, (void *)&origin_cases[i]};
	}
	return _cmocka_run_group_tests("test_config", tests, n, NULL, NULL);
}
