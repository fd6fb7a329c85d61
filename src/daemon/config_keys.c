// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * config_keys.c - every key: its section, type, default, help, whether it
 * can change live, and the rule that parses and stores it.
 *
 * Two tables indexed by enum td_cfg_key describe each key: td_config_keys[]
 * (public: what the docs, the example file and the reload code need) and
 * td_cfg_rules[] (private: value kind, range, field of struct td_config).
 * Both use designated initializers on the same enum, so a key cannot be in
 * one and not the other; rule kinds start at 1 so that a missing rule is
 * caught by an assert rather than silently writing field 0.
 * td_config_init() writes the same defaults as the table's text; a unit test
 * sets each default text and compares.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "config_int.h"
#include "tagdisk/tag.h"

/* depth and workers are unsigned int in the engine; set_value stores them as uint32_t. */
_Static_assert(__builtin_types_compatible_p(unsigned int, uint32_t), "unsigned int is uint32_t");

/* Largest disk size: what off_t can address. */
#define DISK_SIZE_MAX ((uint64_t)INT64_MAX)
#define MIB	      (1ULL << 20)
#define GIB	      (1ULL << 30)

#define K(sec, name, typ, def, reload, text)                                                       \
	{                                                                                          \
		.section = sec, .key = name, .type = typ, .default_value = def, .help = text,      \
		.reloadable = reload                                                               \
	}

const struct td_config_key td_config_keys[NR_KEYS] = {
    [KEY_DISK_IMAGE] =
	K("disk", "image", "path", NULL, false,
	  "disk image file (required with backend file, refused with rbd and nbd);"
	  " created sparse when missing, which needs size"),
    [KEY_DISK_SIZE] = K("disk", "size", "size", "0", false,
			"image size in bytes, K/M/G/T suffixes; 0 = the existing image's size"
			" (rbd: size of an image to create; nbd: must equal the export's)"),
    [KEY_DISK_MOUNTPOINT] = K("disk", "mountpoint", "path", NULL, false,
			      "directory where the disk file appears (required)"),
    [KEY_DISK_NAME] = K("disk", "name", "string", "disk", false,
			"file name of the disk in the mountpoint: 1..255 bytes, no '/', ','"
			" or '\\'"),
    [KEY_DISK_READ_ONLY] =
	K("disk", "read_only", "bool", "false", false, "serve the disk read-only"),
    [KEY_DISK_LOGICAL_BLOCK_SIZE] = K("disk", "logical_block_size", "number", "512", false,
				      "block size the disk reports, in bytes: 512 or 4096"),
    [KEY_DISK_ALLOW_OTHER] =
	K("disk", "allow_other", "bool", "false", false,
	  "let other users than the daemon's open the disk (FUSE allow_other)"),
    [KEY_DISK_TRANSPORT] =
	K("disk", "transport", "choice", "auto", false,
	  "FUSE transport: uring (FUSE over io_uring), classic (/dev/fuse) or auto"),
    [KEY_DISK_RECOVERY] =
	K("disk", "recovery", "bool", "true", false,
	  "keep the mount across a crash or restart of the daemon (the /dev/fuse fd in the"
	  " service manager's store; transport auto then picks classic)"),
    [KEY_QUEUE_MODE] = K("queue", "mode", "choice", "rq", false,
			 "rq: elevator, prep and tags; bio: straight to the drive; "
			 "mq: per-CPU software queues and hardware contexts sharing the tags"),
    [KEY_QUEUE_ELEVATOR] = K("queue", "elevator", "string", "deadline", true,
			     "I/O scheduler: a registered elevator (noop, deadline; mq: none, "
			     "mq-deadline; each mode maps the other's names)"),
    [KEY_QUEUE_NR_HW_QUEUES] =
	K("queue", "nr_hw_queues", "number", "0", false,
	  "mq: hardware dispatch contexts, 1..256; 0 = one per CPU"),
    [KEY_QUEUE_NR_REQUESTS] =
	K("queue", "nr_requests", "number", "128", false,
	  "requests in the pool; submitters wait when all are used: 4..65536"),
    [KEY_QUEUE_MAX_SECTORS] = K("queue", "max_sectors", "number", "2048", false,
				"largest request, in 512-byte sectors: 8..65536"),
    [KEY_QUEUE_READ_EXPIRE_MS] = K("queue", "read_expire_ms", "number", "500", true,
				   "deadline: a read's FIFO deadline, in ms: 1..3600000"),
    [KEY_QUEUE_WRITE_EXPIRE_MS] = K("queue", "write_expire_ms", "number", "5000", true,
				    "deadline: a write's FIFO deadline, in ms: 1..3600000"),
    [KEY_QUEUE_FIFO_BATCH] = K("queue", "fifo_batch", "number", "16", true,
			       "deadline: requests dispatched per sorted batch: 1..4096"),
    [KEY_QUEUE_WRITES_STARVED] = K("queue", "writes_starved", "number", "2", true,
				   "deadline: read batches before writes must go: 0..1024"),
    [KEY_TAGS_DEPTH] = K("tags", "depth", "number", "32", true,
			 "tagged commands outstanding at the drive at once: 1..4096"),
    [KEY_DRIVE_BACKEND] = K("drive", "backend", "choice", "file", false,
			    "where the data lives: file ([disk] image), rbd ([rbd] pool/image)"
			    " or nbd ([nbd] uri)"),
    [KEY_DRIVE_WORKERS] = K("drive", "workers", "number", "0", false,
			    "drive threads: 0..256; 0 runs commands in the dispatching thread"
			    " (hdd always uses one actuator, ssd at least one thread)"),
    [KEY_DRIVE_MODEL] =
	K("drive", "model", "choice", "none", false, "latency model: none, hdd or ssd"),
    [KEY_DRIVE_HDD_RPM] = K("drive", "hdd_rpm", "number", "7200", false,
			    "hdd: spindle speed, in revolutions per minute: 1000..30000"),
    [KEY_DRIVE_HDD_SEEK_TRACK_US] = K("drive", "hdd_seek_track_us", "number", "500", false,
				      "hdd: track-to-track seek, in us: 0..1000000"),
    [KEY_DRIVE_HDD_SEEK_FULL_US] = K("drive", "hdd_seek_full_us", "number", "12000", false,
				     "hdd: full-stroke seek, in us: 0..10000000,"
				     " at least hdd_seek_track_us"),
    [KEY_DRIVE_HDD_TRANSFER_MB_S] = K("drive", "hdd_transfer_mb_s", "number", "150", false,
				      "hdd: media transfer rate, in 10^6 bytes/s: 1..100000"),
    [KEY_DRIVE_HDD_OVERHEAD_US] = K("drive", "hdd_overhead_us", "number", "50", false,
				    "hdd: controller time per command, in us: 0..1000000"),
    [KEY_DRIVE_HDD_SECTORS_PER_TRACK] = K("drive", "hdd_sectors_per_track", "number", "2048", false,
					  "hdd: 512-byte sectors per track: 8..1048576"),
    [KEY_DRIVE_SSD_LATENCY_US] = K("drive", "ssd_latency_us", "number", "80", false,
				   "ssd: time per command, in us: 0..10000000"),
    [KEY_DRIVE_SSD_TRANSFER_MB_S] = K("drive", "ssd_transfer_mb_s", "number", "2000", false,
				      "ssd: transfer rate, in 10^6 bytes/s: 1..1000000"),
    [KEY_DRIVE_WRITE_CACHE] =
	K("drive", "write_cache", "choice", "writeback", false,
	  "writeback, writethrough or volatile (unflushed writes can be lost)"),
    [KEY_DRIVE_CACHE_SIZE] = K("drive", "cache_size", "size", "64M", false,
			       "volatile write cache, in bytes, K/M/G/T suffixes: 1M..16G"),
    [KEY_DRIVE_COMMAND_TIMEOUT_MS] = K("drive", "command_timeout_ms", "number", "30000", true,
				       "reset the drive when a command is older, in ms:"
				       " 0..3600000; 0 = never"),
    [KEY_DRIVE_MAX_RETRIES] = K("drive", "max_retries", "number", "5", true,
				"requeues after resets before a request fails with EIO: 0..100"),
    [KEY_DRIVE_SHUTDOWN_TIMEOUT_MS] = K("drive", "shutdown_timeout_ms", "number", "30000", true,
					"on SIGTERM, wait this long for outstanding I/O, then fail"
					" the rest with EIO, in ms: 0..3600000; 0 = forever"),
    [KEY_DRIVE_SEED] = K("drive", "seed", "number", "1", false,
			 "seed of random fault injection, decimal or 0x hex: 0..2^64-1"),
    [KEY_RBD_POOL] = K("rbd", "pool", "string", "rbd", false,
		       "backend rbd: the Ceph pool holding the image"),
    [KEY_RBD_IMAGE] = K("rbd", "image", "string", NULL, false,
			"backend rbd: the RBD image (required); created when missing, which"
			" needs [disk] size"),
    [KEY_RBD_CONF] = K("rbd", "conf", "path", "/etc/ceph/ceph.conf", false,
		       "backend rbd: the Ceph configuration file"),
    [KEY_RBD_ID] = K("rbd", "id", "string", "admin", false,
		     "backend rbd: the Ceph client name, without \"client.\""),
    [KEY_RBD_KEYRING] = K("rbd", "keyring", "path", "", false,
			  "backend rbd: the keyring file; empty = what the Ceph configuration"
			  " names"),
    [KEY_NBD_URI] = K("nbd", "uri", "string", NULL, false,
		      "backend nbd: the export, nbd://HOST[:PORT]/NAME or"
		      " nbd+unix:///NAME?socket=PATH (required)"),
    [KEY_NBD_CONNECTIONS] = K("nbd", "connections", "number", "1", false,
			      "backend nbd: connections to the server, 1..16 (more than 1"
			      " only when it allows multi-conn)"),
    [KEY_ADMIN_SOCKET] = K("admin", "socket", "path", NULL, false,
			   "admin socket; default /run/tagdisk/<name>.sock as root,"
			   " else beside the mountpoint"),
    [KEY_ADMIN_SOCKET_MODE] = K("admin", "socket_mode", "octal", "0660", false,
				"admin socket permissions, octal: 0..0777"),
    [KEY_ADMIN_SOCKET_GROUP] = K("admin", "socket_group", "group", "", false,
				 "group of the admin socket, name or gid; empty = the daemon's"),
    [KEY_ADMIN_TRACE_BUDGET] = K("admin", "trace_budget", "size", "128M", false,
				 "memory for the buffers of every trace stream together, in bytes,"
				 " K/M/G/T suffixes: 1M..64G"),
    [KEY_LOG_PATH] = K("log", "path", "path", "", false,
		       "write log: record every write, discard, flush and FUA from the start"
		       " into this file, in dm-log-writes' format (tagdisk-replay reads it);"
		       " created or truncated; empty = none"),
};
const size_t td_config_nr_keys = NR_KEYS;

#undef K

#define R(k, lo, hi, field)                                                                        \
	{                                                                                          \
		.kind = k, .min = lo, .max = hi, .offset = offsetof(struct td_config, field)       \
	}

const struct td_cfg_rule td_cfg_rules[NR_KEYS] = {
    [KEY_DISK_IMAGE] = R(KIND_PATH, 0, 0, image),
    [KEY_DISK_SIZE] = R(KIND_SIZE, 0, DISK_SIZE_MAX, size_bytes),
    [KEY_DISK_MOUNTPOINT] = R(KIND_PATH, 0, 0, mountpoint),
    [KEY_DISK_NAME] = R(KIND_NAME, 1, TD_CONFIG_NAME_MAX, name),
    [KEY_DISK_READ_ONLY] = R(KIND_BOOL, 0, 0, read_only),
    [KEY_DISK_LOGICAL_BLOCK_SIZE] = R(KIND_BLOCK_SIZE, 512, 4096, logical_block_size),
    [KEY_DISK_ALLOW_OTHER] = R(KIND_BOOL, 0, 0, allow_other),
    [KEY_DISK_TRANSPORT] = R(KIND_TRANSPORT, 0, 0, transport),
    [KEY_DISK_RECOVERY] = R(KIND_BOOL, 0, 0, recovery),
    [KEY_QUEUE_MODE] = R(KIND_QUEUE_MODE, 0, 0, mode),
    [KEY_QUEUE_ELEVATOR] = R(KIND_ELEVATOR, 0, 0, elevator),
    [KEY_QUEUE_NR_HW_QUEUES] = R(KIND_U32, 0, TD_QUEUE_HW_MAX, nr_hw_queues),
    [KEY_QUEUE_NR_REQUESTS] = R(KIND_U32, 4, 65536, nr_requests),
    [KEY_QUEUE_MAX_SECTORS] = R(KIND_U32, 8, 65536, max_sectors),
    [KEY_QUEUE_READ_EXPIRE_MS] = R(KIND_U32, 1, 3600000, tunables.read_expire_ms),
    [KEY_QUEUE_WRITE_EXPIRE_MS] = R(KIND_U32, 1, 3600000, tunables.write_expire_ms),
    [KEY_QUEUE_FIFO_BATCH] = R(KIND_U32, 1, 4096, tunables.fifo_batch),
    [KEY_QUEUE_WRITES_STARVED] = R(KIND_U32, 0, 1024, tunables.writes_starved),
    [KEY_TAGS_DEPTH] = R(KIND_U32, 1, TD_TAG_DEPTH_MAX, depth),
    [KEY_DRIVE_BACKEND] = R(KIND_BACKEND, 0, 0, backend),
    [KEY_DRIVE_WORKERS] = R(KIND_U32, 0, 256, workers),
    [KEY_DRIVE_MODEL] = R(KIND_MODEL, 0, 0, model),
    [KEY_DRIVE_HDD_RPM] = R(KIND_U32, 1000, 30000, hdd.rpm),
    [KEY_DRIVE_HDD_SEEK_TRACK_US] = R(KIND_U32, 0, 1000000, hdd.seek_track_us),
    [KEY_DRIVE_HDD_SEEK_FULL_US] = R(KIND_U32, 0, 10000000, hdd.seek_full_us),
    [KEY_DRIVE_HDD_TRANSFER_MB_S] = R(KIND_U32, 1, 100000, hdd.transfer_mb_s),
    [KEY_DRIVE_HDD_OVERHEAD_US] = R(KIND_U32, 0, 1000000, hdd.overhead_us),
    [KEY_DRIVE_HDD_SECTORS_PER_TRACK] = R(KIND_U32, 8, 1048576, hdd.sectors_per_track),
    [KEY_DRIVE_SSD_LATENCY_US] = R(KIND_U32, 0, 10000000, ssd.latency_us),
    [KEY_DRIVE_SSD_TRANSFER_MB_S] = R(KIND_U32, 1, 1000000, ssd.transfer_mb_s),
    [KEY_DRIVE_WRITE_CACHE] = R(KIND_WRITE_CACHE, 0, 0, write_cache),
    [KEY_DRIVE_CACHE_SIZE] = R(KIND_SIZE, MIB, 16 * GIB, cache_size),
    [KEY_DRIVE_COMMAND_TIMEOUT_MS] = R(KIND_U32, 0, 3600000, command_timeout_ms),
    [KEY_DRIVE_MAX_RETRIES] = R(KIND_U32, 0, 100, max_retries),
    [KEY_DRIVE_SHUTDOWN_TIMEOUT_MS] = R(KIND_U32, 0, 3600000, shutdown_timeout_ms),
    [KEY_DRIVE_SEED] = R(KIND_SEED, 0, UINT64_MAX, seed),
    [KEY_RBD_POOL] = R(KIND_RBD_NAME, 1, TD_CONFIG_RBD_NAME_MAX, rbd_pool),
    [KEY_RBD_IMAGE] = R(KIND_RBD_NAME, 1, TD_CONFIG_RBD_NAME_MAX, rbd_image),
    [KEY_RBD_CONF] = R(KIND_PATH, 0, 0, rbd_conf),
    [KEY_RBD_ID] = R(KIND_RBD_NAME, 1, TD_CONFIG_RBD_NAME_MAX, rbd_id),
    [KEY_RBD_KEYRING] = R(KIND_OPT_PATH, 0, 0, rbd_keyring),
    [KEY_NBD_URI] = R(KIND_NBD_URI, 0, 0, nbd_uri),
    [KEY_NBD_CONNECTIONS] = R(KIND_U32, 1, TD_CONFIG_NBD_CONNECTIONS_MAX, nbd_connections),
    [KEY_ADMIN_SOCKET] = R(KIND_PATH, 0, 0, socket),
    [KEY_ADMIN_SOCKET_MODE] = R(KIND_OCTAL, 0, 0777, socket_mode),
    [KEY_ADMIN_SOCKET_GROUP] = R(KIND_GROUP, 0, 0, socket_group),
    [KEY_ADMIN_TRACE_BUDGET] = R(KIND_SIZE, MIB, 64 * GIB, trace_budget),
    [KEY_LOG_PATH] = R(KIND_OPT_PATH, 0, 0, log_path),
};

#undef R

const char *const td_cfg_sections[] = {"disk",  "queue", "tags", "drive",
				       "rbd",	"nbd",	 "admin", "log"};
const size_t td_cfg_nr_sections = TD_ARRAY_SIZE(td_cfg_sections);

const char *const td_cfg_queue_mode_names[3] = {
    [TD_MODE_RQ] = "rq", [TD_MODE_BIO] = "bio", [TD_MODE_MQ] = "mq"};
const char *const td_cfg_model_names[3] = {
    [TD_MODEL_NONE] = "none", [TD_MODEL_HDD] = "hdd", [TD_MODEL_SSD] = "ssd"};
const char *const td_cfg_transport_names[3] = {
    [TD_TRANSPORT_CLASSIC] = "classic",
    [TD_TRANSPORT_AUTO] = "auto",
    [TD_TRANSPORT_URING] = "uring",
};
const char *const td_cfg_backend_names[3] = {
    [TD_CONFIG_BACKEND_FILE] = "file",
    [TD_CONFIG_BACKEND_RBD] = "rbd",
    [TD_CONFIG_BACKEND_NBD] = "nbd",
};
const char *const td_cfg_write_cache_names[3] = {
    [TD_WC_WRITEBACK] = "writeback",
    [TD_WC_WRITETHROUGH] = "writethrough",
    [TD_WC_VOLATILE] = "volatile",
};

const char *td_cfg_find_section(const char *s, size_t len)
{
	for (size_t i = 0; i < td_cfg_nr_sections; i++)
		if (strlen(td_cfg_sections[i]) == len &&
		    strncasecmp(td_cfg_sections[i], s, len) == 0)
			return td_cfg_sections[i];
	return NULL;
}

const char *td_cfg_known_sections(char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "(known:");

	for (size_t i = 0; i < td_cfg_nr_sections && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s %s", i ? "," : "",
					 td_cfg_sections[i]);
	if (used < len)
		snprintf(buf + used, len - used, ")");
	return buf;
}

enum td_cfg_key td_cfg_find_key(const char *section, const char *key)
{
	for (unsigned int i = 0; i < NR_KEYS; i++)
		if (strcmp(td_config_keys[i].section, section) == 0 &&
		    strcasecmp(td_config_keys[i].key, key) == 0)
			return (enum td_cfg_key)i;
	return NR_KEYS;
}

size_t td_cfg_key_homes(const char *key, char *buf, size_t len)
{
	size_t n = 0;
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (unsigned int i = 0; i < NR_KEYS; i++) {
		if (strcasecmp(td_config_keys[i].key, key) != 0)
			continue;
		if (used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s[%s]", n ? " or " : "",
						 td_config_keys[i].section);
		n++;
	}
	return n;
}

enum td_cfg_key td_cfg_key_id(const struct td_config_key *k)
{
	assert(k >= td_config_keys && k < td_config_keys + NR_KEYS);
	return (enum td_cfg_key)(k - td_config_keys);
}

const struct td_config_key *td_config_find_key(const char *section, const char *key)
{
	const char *sec = td_cfg_find_section(section, strlen(section));
	enum td_cfg_key id;

	if (!sec)
		return NULL;
	id = td_cfg_find_key(sec, key);
	return id < NR_KEYS ? &td_config_keys[id] : NULL;
}

const char *td_config_backend_name(enum td_config_backend b)
{
	if ((unsigned int)b >= TD_ARRAY_SIZE(td_cfg_backend_names))
		return "?";
	return td_cfg_backend_names[b];
}

const char *td_config_str(const struct td_config *c, const char *section, const char *key)
{
	const struct td_config_key *k = td_config_find_key(section, key);
	const struct td_cfg_rule *r;
	const char *s;

	assert(k);
	r = &td_cfg_rules[td_cfg_key_id(k)];
	assert(r->kind == KIND_PATH || r->kind == KIND_OPT_PATH || r->kind == KIND_GROUP ||
	       r->kind == KIND_RBD_NAME || r->kind == KIND_NBD_URI);
	s = *(char *const *)((const char *)c + r->offset);
	if (s)
		return s;
	return k->default_value && *k->default_value ? k->default_value : NULL;
}

bool td_config_key_live(const char *section, const char *key)
{
	const struct td_config_key *k = td_config_find_key(section, key);

	return k && k->reloadable;
}

void td_config_init(struct td_config *c)
{
	*c = (struct td_config){
	    .size_bytes = 0,
	    .name = "disk",
	    .read_only = false,
	    .logical_block_size = 512,
	    .allow_other = false,
	    .transport = TD_TRANSPORT_AUTO,
	    .recovery = true,
	    .mode = TD_MODE_RQ,
	    .elevator = "deadline",
	    .nr_hw_queues = 0,
	    .nr_requests = 128,
	    .max_sectors = 2048,
	    .tunables = {.read_expire_ms = 500,
			 .write_expire_ms = 5000,
			 .fifo_batch = 16,
			 .writes_starved = 2},
	    .depth = 32,
	    .backend = TD_CONFIG_BACKEND_FILE,
	    .workers = 0,
	    .model = TD_MODEL_NONE,
	    .hdd = {.rpm = 7200,
		    .seek_track_us = 500,
		    .seek_full_us = 12000,
		    .transfer_mb_s = 150,
		    .overhead_us = 50,
		    .sectors_per_track = 2048},
	    .ssd = {.latency_us = 80, .transfer_mb_s = 2000},
	    .write_cache = TD_WC_WRITEBACK,
	    .cache_size = 64 * MIB,
	    .command_timeout_ms = 30000,
	    .max_retries = 5,
	    .shutdown_timeout_ms = 30000,
	    .seed = 1,
	    .nbd_connections = 1,
	    .socket_mode = 0660,
	    .socket_gid = (gid_t)-1,
	    .trace_budget = 128 * MIB,
	};
}
