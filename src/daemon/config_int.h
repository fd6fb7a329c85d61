/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config_int.h - what the config_*.c files share behind config.h.
 *
 *   config_keys.c     the key table, its parsing rules, the defaults, lookups
 *   config_values.c   one parser per value type; set_value() stores a key's value
 *   config_msg.c      how an error is worded: where (file:line or option), key, value
 *   config_file.c     the INI file: iniparser's dictionary plus a scan for line numbers
 *   config_cmdline.c  getopt_long() and the overrides it collects
 *   config_check.c    cross-key checks, paths, the image, the admin socket and group
 *   config.c          set, build (defaults < file < command line), free, diff
 *
 * Keys are named by enum td_cfg_key everywhere inside; td_config_keys[] and
 * td_cfg_rules[] are both indexed by it.
 *
 * LOCKING: none, as config.h.
 */
#ifndef TAGDISK_CONFIG_INT_H
#define TAGDISK_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "common/compiler.h"
#include "daemon/config.h"

enum td_cfg_key {
	KEY_DISK_IMAGE,
	KEY_DISK_SIZE,
	KEY_DISK_MOUNTPOINT,
	KEY_DISK_NAME,
	KEY_DISK_READ_ONLY,
	KEY_DISK_LOGICAL_BLOCK_SIZE,
	KEY_DISK_ALLOW_OTHER,
	KEY_DISK_TRANSPORT,
	KEY_DISK_RECOVERY,
	KEY_QUEUE_MODE,
	KEY_QUEUE_ELEVATOR,
	KEY_QUEUE_NR_HW_QUEUES,
	KEY_QUEUE_NR_REQUESTS,
	KEY_QUEUE_MAX_SECTORS,
	KEY_QUEUE_READ_EXPIRE_MS,
	KEY_QUEUE_WRITE_EXPIRE_MS,
	KEY_QUEUE_FIFO_BATCH,
	KEY_QUEUE_WRITES_STARVED,
	KEY_TAGS_DEPTH,
	KEY_DRIVE_BACKEND,
	KEY_DRIVE_WORKERS,
	KEY_DRIVE_MODEL,
	KEY_DRIVE_HDD_RPM,
	KEY_DRIVE_HDD_SEEK_TRACK_US,
	KEY_DRIVE_HDD_SEEK_FULL_US,
	KEY_DRIVE_HDD_TRANSFER_MB_S,
	KEY_DRIVE_HDD_OVERHEAD_US,
	KEY_DRIVE_HDD_SECTORS_PER_TRACK,
	KEY_DRIVE_SSD_LATENCY_US,
	KEY_DRIVE_SSD_TRANSFER_MB_S,
	KEY_DRIVE_WRITE_CACHE,
	KEY_DRIVE_CACHE_SIZE,
	KEY_DRIVE_COMMAND_TIMEOUT_MS,
	KEY_DRIVE_MAX_RETRIES,
	KEY_DRIVE_SHUTDOWN_TIMEOUT_MS,
	KEY_DRIVE_SEED,
	KEY_RBD_POOL,
	KEY_RBD_IMAGE,
	KEY_RBD_CONF,
	KEY_RBD_ID,
	KEY_RBD_KEYRING,
	KEY_NBD_URI,
	KEY_NBD_CONNECTIONS,
	KEY_ADMIN_SOCKET,
	KEY_ADMIN_SOCKET_MODE,
	KEY_ADMIN_SOCKET_GROUP,
	KEY_ADMIN_TRACE_BUDGET,
	KEY_LOG_PATH,
	NR_KEYS
};

_Static_assert(NR_KEYS == TD_CONFIG_NR_KEYS, "TD_CONFIG_NR_KEYS counts enum td_cfg_key");

/* How a key's value is parsed and where it is stored. */
enum td_cfg_kind {
	KIND_INVALID = 0, /* a key without a rule: caught by an assert */
	KIND_PATH,	  /* char *, non-empty; NULL = the key's default text, if any */
	KIND_OPT_PATH,	  /* char *, empty = NULL */
	KIND_GROUP,	  /* char *, empty = NULL */
	KIND_RBD_NAME,	  /* char *, 1..255 bytes, no '/', '@' or control character */
	KIND_NBD_URI,	  /* char *, an NBD URI */
	KIND_BACKEND,	  /* enum td_config_backend */
	KIND_NAME,	  /* the disk name, char[] */
	KIND_ELEVATOR,	  /* a registered elevator's name, char[] */
	KIND_SIZE,	  /* uint64_t bytes in [min, max] */
	KIND_U32,	  /* uint32_t in [min, max] */
	KIND_SEED,	  /* uint64_t, decimal or 0x hex */
	KIND_BOOL,	  /* bool */
	KIND_BLOCK_SIZE,  /* uint32_t, 512 or 4096 */
	KIND_QUEUE_MODE,  /* enum td_queue_mode */
	KIND_MODEL,	  /* enum td_drive_model */
	KIND_WRITE_CACHE, /* enum td_write_cache */
	KIND_TRANSPORT,	  /* enum td_fuse_transport */
	KIND_OCTAL,	  /* mode_t, 0..0777 */
};

struct td_cfg_rule {
	enum td_cfg_kind kind;
	uint64_t min;
	uint64_t max;
	size_t offset; /* of the field in struct td_config */
};

/* Indexed by enum td_cfg_key. */
extern const struct td_cfg_rule td_cfg_rules[NR_KEYS];

/* The sections, in file order. */
extern const char *const td_cfg_sections[];
extern const size_t td_cfg_nr_sections;

/* Names of the choices, indexed by their enum. */
extern const char *const td_cfg_queue_mode_names[3];
extern const char *const td_cfg_model_names[3];
extern const char *const td_cfg_write_cache_names[3];
extern const char *const td_cfg_transport_names[3];
extern const char *const td_cfg_backend_names[3];

/* ---- config_keys.c ---------------------------------------------------- */

/* Return: the known section spelled by the @len bytes at @s (any case), or NULL. */
const char *td_cfg_find_section(const char *s, size_t len) td_nonnull(1);

/* Write "(known: disk, queue, tags, drive, rbd, nbd, admin, log)" into @buf. Return: @buf. */
const char *td_cfg_known_sections(char *buf, size_t len) td_nonnull(1);

/* Return: the id of @key (any case) in @section as td_cfg_find_section() returned it, or NR_KEYS.
 */
enum td_cfg_key td_cfg_find_key(const char *section, const char *key) td_nonnull(1, 2);

/*
 * Write into @buf the sections that hold a key named @key (any case), as
 * "[tags]" or "[disk] or [rbd]". Return: how many there are (0: @buf is "").
 */
size_t td_cfg_key_homes(const char *key, char *buf, size_t len) td_nonnull(1, 2);

/* Return: the id of @k, an entry of td_config_keys[]. */
enum td_cfg_key td_cfg_key_id(const struct td_config_key *k) td_nonnull(1);

/* ---- config_msg.c ----------------------------------------------------- */

/* Values quoted in messages are cut here: a message is one line, not a file. */
#define TD_CFG_QUOTE_MAX 1024

/*
 * Where a value came from, for its message: the command-line @option
 * ("--depth"), or line @line of @file (line 0: somewhere in @file), or
 * neither (a default, or td_config_set()).
 */
struct td_cfg_where {
	const char *option;
	const char *file;
	unsigned int line;
};

/*
 * Copy @s into @buf (@len > 8) for a message: quotes, backslashes and
 * control bytes escaped, so a value cannot break the line or fake the
 * closing quote; cut with "..." when too long. Return: @buf.
 */
const char *td_cfg_escape(const char *s, char *buf, size_t len) td_nonnull(1, 2);

/* Write one message into @err (if any). Return: -EINVAL. */
int td_cfg_fail(char *err, size_t errlen, const char *fmt, ...) td_printf(3, 4);

/* Write "out of memory" into @err. Return: -ENOMEM. */
int td_cfg_nomem(char *err, size_t errlen);

/*
 * One message about @value (NULL: not known) of key @id from @w (NULL: no
 * origin): `--depth "0": why`, `FILE:LINE: [tags] depth = "0": why` or
 * `[tags] depth = "0": why`. Return: -EINVAL.
 */
int td_cfg_bad_value(enum td_cfg_key id, const struct td_cfg_where *w, const char *value, char *err,
		     size_t errlen, const char *fmt, ...) td_printf(6, 7);

/*
 * Like td_cfg_bad_value() for what is not a known key: @subject is written
 * as it is after "FILE:LINE: " ("[queue] colour", "[bogus]", "depth"),
 * followed by ` = "value"` when @value is set. Return: -EINVAL.
 */
int td_cfg_bad_entry(const struct td_cfg_where *w, const char *subject, const char *value,
		     char *err, size_t errlen, const char *fmt, ...) td_printf(6, 7);

/* Fill @w with where @c's value of key @id came from (see struct td_config_origin). */
void td_cfg_where_of(const struct td_config *c, enum td_cfg_key id, struct td_cfg_where *w)
    td_nonnull(1, 3);

/* ---- config_values.c -------------------------------------------------- */

/*
 * Parse @value for key @id and store it in @c, recording @w (NULL: no
 * origin) as where it came from. The only place a value is parsed.
 * Return: 0; -EINVAL or -ENOMEM with the message in @err; @c unchanged on error.
 */
int td_cfg_set_value(struct td_config *c, enum td_cfg_key id, const char *value,
		     const struct td_cfg_where *w, char *err, size_t errlen) td_nonnull(1, 3);

/* Return: whether @a and @b hold the same value for key @id. */
bool td_cfg_value_equal(const struct td_config *a, const struct td_config *b, enum td_cfg_key id)
    td_nonnull(1, 2);

/* ---- config_cmdline.c ------------------------------------------------- */

/*
 * Return: a malloc'ed absolute form of @path (relative to the current
 * directory, trailing slashes dropped), or NULL with errno set.
 */
char *td_cfg_absolute_path(const char *path) td_nonnull(1);

/* Append a copy of the @len bytes at @s to the list *@v of *@n strings. Return: 0 or -ENOMEM. */
int td_cfg_strv_push(char ***v, size_t *n, const char *s, size_t len) td_nonnull(1, 2, 3);

/* Free a list of @n strings and the list. */
void td_cfg_strv_free(char **v, size_t n);

/* Return: whether key @id was given (in the file or on the command line), not defaulted. */
bool td_config_is_set(const struct td_config *c, enum td_cfg_key id) td_nonnull(1);

#endif /* TAGDISK_CONFIG_INT_H */
