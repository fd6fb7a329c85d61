/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * config.h - tagdiskd's settings: defaults, the INI file, the command line.
 *
 * A setting comes from three layers, each overriding the one before:
 * the built-in default (td_config_init), the INI file named by -c
 * (td_config_load_file) and the command line (td_cmdline_parse, then
 * td_config_build). Every key and every command-line option goes through the
 * same parser for its type, so a value means the same thing wherever it is
 * written.
 *
 * Error messages are one line naming where the value is, the key and the
 * value, then why:
 *
 *   /etc/tagdisk/vm1.ini:7: [tags] depth = "0": must be between 1 and 4096
 *   /etc/tagdisk/vm1.ini:3: [queue] depth = "8": unknown key in [queue] (it belongs in [tags])
 *   /etc/tagdisk/vm1.ini:9: [bogus]: unknown section (known: disk, queue, tags, drive, rbd, nbd,
 *   admin, log)
 *   --depth "0": must be between 1 and 4096
 *   [tags] depth = "0": must be between 1 and 4096          (td_config_set, defaults)
 *
 * Line numbers come from a scan of the file beside iniparser (which gives
 * none); a struct td_config remembers where each key's value came from
 * (origin[]), so td_config_validate() names the file and line or the option
 * too ("--image \"/x.img\": does not exist and no size was given").
 *
 * td_config_keys[] lists every key with its type, default and one line of
 * help; it is the single list the docs, the example etc/tagdisk.ini and the
 * tests are checked against. Any section or key not in it is an error.
 *
 * Value syntax:
 *  - sizes: decimal digits with an optional suffix K, M, G or T, which may be
 *    followed by "iB" ("4K", "4KiB", "4k", "4kib"), all powers of 1024. A bare
 *    number is bytes. "KB" and "B" are refused: "KB" means 1000 bytes to some
 *    tools and 1024 to others, so tagdisk does not guess. No sign, fraction,
 *    space or trailing text; a value above 2^64 - 1 is out of range.
 *  - numbers: decimal digits only (leading zeros allowed); [drive] seed also
 *    takes hexadecimal with a "0x" prefix.
 *  - booleans: true/false, yes/no, on/off, 1/0, in any case.
 *  - choices (mode, model, write_cache): the listed words, in any case.
 *    Elevator names must match a registered elevator exactly.
 *  - [admin] socket_mode: octal digits, with or without a leading 0.
 *  - [rbd] pool, image and id: 1..255 bytes, no '/', '@' or control characters.
 *  - [nbd] uri: an NBD URI (nbd://, nbds://, nbd+unix:// or nbds+unix://;
 *    the unix forms need a socket= parameter), no space or control character.
 *  - strings and paths: as iniparser leaves them (trimmed, quotes removed,
 *    cut at an unquoted ';' or '#'). Sections and keys are case-insensitive
 *    (iniparser lowercases them). A key given twice takes its last value.
 *  - a key before the first section, a section header without a known name
 *    ("[bogus]", "[disk:x]", "[]") and a line iniparser cannot read are errors.
 *
 * Lifetime: a struct td_config owns its strings and its FUSE option list;
 * td_config_free() releases them. A struct td_cmdline owns copies of the
 * command line's values (argv may change or go away after parsing);
 * td_cmdline_free() releases them.
 *
 * LOCKING: none inside. A struct td_config is built and validated by one
 * thread (main() at start, the SIGHUP handler's thread on reload); share it
 * read-only afterwards or guard it with the admin/config lock, first in the
 * lock order (tagdisk/queue.h). td_config_load_file() and td_cmdline_parse()
 * use process-wide library state (iniparser's error callback, getopt's
 * optind/opterr), so two threads must not call them at the same time.
 */
#ifndef TAGDISK_CONFIG_H
#define TAGDISK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "common/compiler.h"
#include "daemon/fuse_session.h"
#include "tagdisk/drive.h"
#include "tagdisk/elevator.h"
#include "tagdisk/queue.h"

/* Longest disk name ([disk] name), in bytes. */
#define TD_CONFIG_NAME_MAX 255
/* Room for an elevator name, terminator included. */
#define TD_CONFIG_ELEVATOR_LEN 32
/* Number of keys in td_config_keys[] (td_config_nr_keys, as a constant). */
#define TD_CONFIG_NR_KEYS 48
/* Longest [rbd] pool, image or id, in bytes. */
#define TD_CONFIG_RBD_NAME_MAX 255
/* Most [nbd] connections. */
#define TD_CONFIG_NBD_CONNECTIONS_MAX 16

/* Where the drive keeps the disk's data ([drive] backend). */
enum td_config_backend {
	TD_CONFIG_BACKEND_FILE, /* [disk] image, a local file (default) */
	TD_CONFIG_BACKEND_RBD,	/* [rbd] pool/image, a Ceph RBD image */
	TD_CONFIG_BACKEND_NBD,	/* [nbd] uri, an NBD server's export */
};

/*
 * Where the value of one key came from, for messages only: the command-line
 * option that set it, or its line in struct td_config's origin_file; both
 * unset for a default or a td_config_set().
 */
struct td_config_origin {
	const char *option; /* "--depth" (static), or NULL */
	unsigned int line;  /* 1-based line in origin_file, or 0 */
	/* With an option: the line of origin_file whose value it replaced, or 0. */
	unsigned int overridden_line;
};

/*
 * Every setting, typed. Defaults are those of td_config_keys[]. Strings are
 * owned by the struct; a NULL path means "not set", and for a key with a
 * default text (rbd_pool, rbd_conf, rbd_id) that default: read those with
 * td_config_str().
 */
struct td_config {
	/* [disk] */
	char *image;			   /* required with backend file, refused with the others */
	uint64_t size_bytes;		   /* 0: the existing image's size */
	char *mountpoint;		   /* required */
	char name[TD_CONFIG_NAME_MAX + 1]; /* file name of the disk in the mountpoint */
	bool read_only;
	uint32_t logical_block_size; /* 512 or 4096 */
	bool allow_other;
	enum td_fuse_transport transport; /* auto (default), uring or classic */
	bool recovery;			  /* survive the daemon: fd store, takeover; auto = classic */

	/* [queue] */
	enum td_queue_mode mode;
	char elevator[TD_CONFIG_ELEVATOR_LEN]; /* a registered elevator's name */
	uint32_t nr_hw_queues;		       /* mq: hardware contexts, 0: one per CPU */
	uint32_t nr_requests;
	uint32_t max_sectors;		 /* 512-byte sectors */
	struct td_elv_tunables tunables; /* read/write_expire_ms, fifo_batch, writes_starved */

	/* [tags] */
	unsigned int depth;

	/* [drive] */
	enum td_config_backend backend;
	unsigned int workers; /* 0: commands run in the dispatching thread */
	enum td_drive_model model;
	struct td_hdd_params hdd; /* hdd_* keys */
	struct td_ssd_params ssd; /* ssd_* keys */
	enum td_write_cache write_cache;
	uint64_t cache_size;	     /* bytes, for write_cache = volatile */
	uint32_t command_timeout_ms; /* 0: never */
	uint32_t max_retries;
	uint32_t shutdown_timeout_ms; /* on SIGTERM, wait this long for I/O, then EIO; 0: forever */
	uint64_t seed;

	/* [rbd]: used with backend rbd only */
	char *rbd_pool;	   /* NULL: "rbd" */
	char *rbd_image;   /* required with backend rbd */
	char *rbd_conf;	   /* NULL: "/etc/ceph/ceph.conf" */
	char *rbd_id;	   /* NULL: "admin" */
	char *rbd_keyring; /* NULL: what the Ceph configuration names */

	/* [nbd]: used with backend nbd only */
	char *nbd_uri; /* required with backend nbd */
	uint32_t nbd_connections;

	/* [admin] */
	char *socket;	    /* NULL until set; td_config_validate() fills the default */
	mode_t socket_mode; /* permission bits, 0..0777 */
	char *socket_group; /* NULL: the daemon's own group */
	gid_t socket_gid;   /* set by td_config_validate(); (gid_t)-1 for own group */
	uint64_t trace_budget; /* bytes: every trace stream's buffers together */

	/* [log] */
	char *log_path; /* the write log to record from the start; NULL: none */

	/* Command line only (copied from struct td_cmdline by td_config_build). */
	char *config_file;    /* absolute path of -c FILE, or NULL */
	bool foreground;      /* -f */
	unsigned int verbose; /* number of -v */
	char **fuse_opts;     /* -o options split at commas, in order */
	size_t nr_fuse_opts;

	/*
	 * Where each key's value came from, indexed like td_config_keys[];
	 * kept by the functions below, read by their messages. origin_file
	 * (owned) is the file td_config_load_file() read last.
	 */
	char *origin_file;
	struct td_config_origin origin[TD_CONFIG_NR_KEYS];
};

/* One key of the configuration file, for docs and tests. */
struct td_config_key {
	const char *section;
	const char *key;
	const char *type;	   /* "path", "size", "string", "bool", "number", "choice", ... */
	const char *default_value; /* as it would be written in the file; NULL: none or computed */
	const char *help;	   /* one line: meaning, unit, range */
	bool reloadable;	   /* can change live: SIGHUP applies it without a restart */
};

/* Every key, grouped by section in file order. */
extern const struct td_config_key td_config_keys[];
extern const size_t td_config_nr_keys;

/* Return: the entry for @section/@key (case-insensitive), or NULL. */
const struct td_config_key *td_config_find_key(const char *section, const char *key)
    td_nonnull(1, 2);

/*
 * Return: whether [@section] @key (case-insensitive) can change live, i.e.
 * a SIGHUP applies it to the running daemon (its entry's reloadable flag);
 * false for an unknown key.
 */
bool td_config_key_live(const char *section, const char *key) td_nonnull(1, 2);

/* Return: the name of @b as [drive] backend writes it ("file", "rbd", "nbd"). */
const char *td_config_backend_name(enum td_config_backend b);

/*
 * Return: @c's value of the string key [@section] @key (a path, name or
 * URI), its default text when unset, or NULL when unset without a default.
 * The string is @c's or static: valid while @c is unchanged.
 */
const char *td_config_str(const struct td_config *c, const char *section, const char *key)
    td_nonnull(1, 2, 3);

/*
 * Store in @unused the entries of the keys the user gave (in the file or on
 * the command line) that @c's backend does not use: [rbd] keys unless
 * backend = rbd, [nbd] keys unless backend = nbd (up to @max of them, in
 * table order; @unused may be NULL when @max is 0). Such keys are accepted,
 * so one file can keep every backend's settings; the daemon logs them once.
 * Return: how many there are.
 */
size_t td_config_unused_keys(const struct td_config *c, const struct td_config_key **unused,
			     size_t max) td_nonnull(1);

/*
 * The size a backend reports, @size bytes, checked against @c: a nonzero
 * multiple of logical_block_size, and equal to [disk] size when that is set
 * (for rbd, an image that existed; for nbd, the export). @what names the
 * backend's store in the message ("the RBD image \"rbd/vm1\"").
 * Return: 0 or -EINVAL with one message in @err naming where size came from.
 */
int td_config_check_backend_size(const struct td_config *c, const char *what, uint64_t size,
				 char *err, size_t errlen) td_nonnull(1, 2);

/* Fill @c with the built-in defaults. Allocates nothing; @c's old contents are ignored. */
void td_config_init(struct td_config *c) td_nonnull(1);

/* Release what @c owns and zero it; td_config_init() makes it usable again. */
void td_config_free(struct td_config *c) td_nonnull(1);

/*
 * Set one key from its text form, as the file would give it; its origin
 * becomes "none" (messages name the key without a place).
 * Return: 0; -EINVAL with one message in @err (unknown section, unknown key,
 * bad value); -ENOMEM. @c is unchanged on error.
 */
int td_config_set(struct td_config *c, const char *section, const char *key, const char *value,
		  char *err, size_t errlen) td_nonnull(1, 2, 3, 4);

/*
 * Apply every key of the INI file @path to @c, recording @path as
 * origin_file and each key's line as its origin.
 * Return: 0; -EINVAL with one message in @err when the file is missing,
 * unreadable or not a regular file, has a line iniparser cannot read, a key
 * outside any section, an unknown section or key, or a bad value: the
 * message about the first such line of the file ("PATH:LINE: ..."); -ENOMEM.
 * On error @c may hold some of the file's values (use td_config_build() for
 * all-or-nothing).
 */
int td_config_load_file(struct td_config *c, const char *path, char *err, size_t errlen)
    td_nonnull(1, 2);

/* A value given on the command line for a key: "--depth 8" sets [tags] depth. */
struct td_cmdline_override {
	const char *option;  /* "--depth" (static) */
	const char *section; /* "tags" (static) */
	const char *key;     /* "depth" (static) */
	char *value;	     /* owned */
};

/* The parsed command line. Owns its strings; free with td_cmdline_free(). */
struct td_cmdline {
	char *config_file;    /* -c FILE made absolute, or NULL */
	char *pid_file;	      /* --pid-file PATH made absolute, or NULL */
	bool foreground;      /* -f */
	unsigned int verbose; /* number of -v */
	char **fuse_opts;     /* -o values split at commas, in order (no escaping) */
	size_t nr_fuse_opts;
	struct td_cmdline_override *overrides; /* in command-line order; the last one wins */
	size_t nr_overrides;
};

/*
 * Parse tagdiskd's command line (argv[0] is the program name). Values of
 * options that set keys are checked with the keys' own parsers now, and
 * again by td_config_build(); paths given to -c, --image, --mount and
 * --socket are made absolute against the current directory, so a rebuild
 * after the daemon changed directory reads the same files. Never exits and
 * never reorders @argv; may be called any number of times.
 * Return: 0; 1 when -h or -V printed its text to stdout (the caller exits 0);
 * -EINVAL with one message in @err (unknown option, missing or bad value,
 * positional argument); -ENOMEM. @cl is filled on 0 and left empty otherwise.
 */
int td_cmdline_parse(struct td_cmdline *cl, int argc, char **argv, char *err, size_t errlen)
    td_nonnull(1, 3);

/* Release what @cl owns and zero it. */
void td_cmdline_free(struct td_cmdline *cl) td_nonnull(1);

/*
 * Build the settings: defaults, then the file named by -c (if any), then the
 * command-line overrides, and copy the command-line-only fields. Used at
 * start and again on SIGHUP. Does not run td_config_validate().
 * @c must hold td_config_init() defaults or an earlier build's result.
 * Return: 0 with @c replaced; -EINVAL with one message in @err, or -ENOMEM;
 * @c is unchanged on error.
 */
int td_config_build(struct td_config *c, const struct td_cmdline *cl, char *err, size_t errlen)
    td_nonnull(1, 2);

/*
 * The checks that need nothing but @c: required keys set ([disk] image with
 * backend file, [rbd] image with rbd, [nbd] uri with nbd; [disk] image given
 * with rbd or nbd is an error, as two places for one disk), size a multiple
 * of logical_block_size, hdd_seek_full_us >= hdd_seek_track_us, max_sectors
 * a multiple of logical_block_size / 512. A message names where the value
 * came from (origin[]).
 * Return: 0 or -EINVAL with one message in @err.
 */
int td_config_check(const struct td_config *c, char *err, size_t errlen) td_nonnull(1);

/*
 * Return: whether the daemon keeps its mount across its own crash and restart
 * ([disk] recovery, which an explicit transport uring turns off: the kernel
 * gives back what a dead daemon read from /dev/fuse, not what its rings held).
 */
bool td_config_recovery(const struct td_config *c) td_nonnull(1);

/*
 * Make image, mountpoint, socket, [rbd] conf and keyring absolute (against
 * the current directory) and fill the default socket (td_config_default_socket() with
 * geteuid()) when none is set. Looks at no file. Run it on a freshly built
 * config before comparing it with a validated one (td_config_diff), so that
 * the same settings compare equal.
 * Return: 0; -EINVAL with one message in @err; -ENOMEM.
 */
int td_config_resolve(struct td_config *c, char *err, size_t errlen) td_nonnull(1);

/*
 * td_config_check(), td_config_resolve(), then the checks against the
 * system: the mountpoint is a directory; with backend file, an existing
 * image is a regular file whose size is a nonzero multiple of
 * logical_block_size and equals size when size is set, and a missing image
 * has a size and an existing directory (a network backend's image is
 * checked when the daemon opens it); socket_group exists; the socket path
 * fits a sockaddr_un, its directory exists (or only it is missing: the
 * daemon makes it) and is writable, and nothing but a stale socket is at the
 * path (a listener there: the message says what to add). Fills socket_gid.
 * Creates, opens for writing or changes nothing outside @c.
 * Return: 0; -EINVAL with one message in @err; -ENOMEM.
 */
int td_config_validate(struct td_config *c, char *err, size_t errlen) td_nonnull(1);

/*
 * Compare @a and @b key by key: every key of td_config_keys[] (not the
 * command-line-only fields, socket_gid or origins). Strings compare as
 * text, so compare configs at the same stage (both validated, or both
 * built and td_config_resolve()d). Stores the entries of the keys that
 * differ, in table order, in @changed (up to @max of them; @changed may be
 * NULL when @max is 0); each entry's reloadable flag says whether the
 * running daemon can apply it.
 * Return: the number of keys that differ (may be more than @max).
 */
size_t td_config_diff(const struct td_config *a, const struct td_config *b,
		      const struct td_config_key **changed, size_t max) td_nonnull(1, 2);

/*
 * Write @c's value of key @k (an entry of td_config_keys[]) as the file
 * would give it ("32", "64M", "deadline", "true", "0660"; an unset path or
 * group as ""), for logs such as "reload: [tags] depth 32 -> 8".
 * Return: the length of the whole string, as snprintf(); >= @len means cut.
 */
int td_config_format_value(const struct td_config *c, const struct td_config_key *k, char *buf,
			   size_t len) td_nonnull(1, 2);

/*
 * Write the default admin socket path for a daemon running as @euid into
 * @buf: "/run/tagdisk/<name>.sock" for root, else "<directory containing the
 * mountpoint>/<name>.sock" (the mountpoint should be absolute by then).
 * Return: 0; -EINVAL when the mountpoint is not set; -ENAMETOOLONG when @len
 * is too small.
 */
int td_config_default_socket(const struct td_config *c, uid_t euid, char *buf, size_t len)
    td_nonnull(1, 3);

/*
 * Parse a size (syntax above) into *@out, in bytes.
 * Return: 0; -EINVAL for bad syntax; -ERANGE above 2^64 - 1. *@out is set only on 0.
 */
int td_parse_size(const char *s, uint64_t *out) td_nonnull(2);

/*
 * Parse a decimal number in [@min, @max] into *@out.
 * Return: 0; -EINVAL for bad syntax; -ERANGE outside the range (overflow included).
 */
int td_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out) td_nonnull(4);

/* Parse a boolean (syntax above). Return: 0 or -EINVAL. */
int td_parse_bool(const char *s, bool *out) td_nonnull(2);

/*
 * Format @bytes exactly, in the largest unit that divides it ("64M", "1536",
 * "0"), so td_parse_size() reads back the same number.
 * Return: the length of the whole string, as snprintf(); >= @len means cut.
 */
int td_format_size(uint64_t bytes, char *buf, size_t len);

#endif /* TAGDISK_CONFIG_H */
