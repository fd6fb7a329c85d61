/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * admin_int.h - what admin.c (the socket) and admin_cmd.c (the commands) share.
 *
 * LOCKING: everything here belongs to the admin thread, except the fields
 * the main thread sets before the admin thread starts or through
 * td_admin_set_frontend() (fe_lock).
 */
#ifndef TAGDISK_ADMIN_INT_H
#define TAGDISK_ADMIN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <json-c/json_object.h>
#include "common/compiler.h"
#include "daemon/admin.h"
#include "daemon/admin_cmd.h"

#define TD_ADMIN_RATE_SAMPLES 8

/* Totals at one moment, for rates. */
struct td_admin_sample {
	uint64_t t_ns;
	uint64_t ios[2];   /* read, write */
	uint64_t bytes[2];
};

/*
 * What the last `trace` command asked for (docs/protocol.md, "trace"): set by
 * its handler, read by admin.c when it turns the connection into a stream.
 */
struct td_admin_trace_req {
	bool start;		/* the command was valid: the connection becomes a stream */
	bool blktrace;		/* binary blktrace records instead of JSON lines */
	bool details;		/* the reply names the format and the buffers */
	size_t ring_events;	/* per emitting thread */
	size_t min_ring_events; /* 0: ring_events or refused; else smaller if need be, to this */
};

/* The listening socket and the file that names it (admin_socket.c). */
struct td_admin_socket {
	int fd;	   /* listening, non-blocking; -1 when not open */
	dev_t dev; /* the socket file's device and inode, to remove only ours */
	ino_t ino;
};

/*
 * Create the listening socket at @path with @mode and group @gid ((gid_t)-1:
 * the daemon's): bound out of sight, given its mode and group, then moved to
 * @path, never following a symlink or replacing what appeared there meanwhile.
 * A stale socket at @path (nobody listening) is removed first; anything else
 * there is an error.
 * Return: 0 with @s filled, or a negative errno with a message in @err
 * (-EEXIST or -EADDRINUSE: something else is at @path).
 */
int td_admin_socket_open(struct td_admin_socket *s, const char *path, mode_t mode, gid_t gid,
			 char *err, size_t errlen) td_nonnull(1, 2, 5);

/* Remove @path if it still names @s's socket file. @s->fd is not closed. */
void td_admin_socket_remove(const struct td_admin_socket *s, const char *path) td_nonnull(1, 2);

struct td_admin {
	struct td_admin_params p;
	struct td_admin_trace_req trace_req; /* admin thread */
	char *socket_path;
	char *image;
	uint64_t start_ns;
	struct td_admin_socket sock;
	char *made_dir; /* the socket's directory when we made it (removed again), or NULL */
	int wake_pipe[2]; /* td_admin_destroy() writes here to stop the thread */
	pthread_t thread;

	pthread_mutex_t fe_lock;
	struct td_frontend *fe; /* fe_lock */
	char *disk_path;	/* fe_lock */
	/* Set once, once mounted, while status may be asked (td_admin_set_takeover()). */
	bool recovery;	    /* fe_lock */
	bool fd_store;	    /* fe_lock */
	uint64_t takeovers; /* fe_lock */
	uint64_t resent;    /* fe_lock */

	struct td_admin_sample samples[TD_ADMIN_RATE_SAMPLES]; /* admin thread */
	unsigned int nr_samples;
	unsigned int next_sample;
};

/*
 * One reply being built (admin_reply.c): a json-c object that becomes one
 * line (common/jsonc.h writes it). A handler starts it with td_admin_ok(),
 * or replaces whatever it holds with td_admin_error(); the td_admin_put_*()
 * helpers add members and remember a failed allocation, which turns the
 * whole reply into {"ok":false,"error":"out of memory"} when it is written,
 * so handlers need no check after each member. The owner (the admin thread)
 * zero-initialises it and frees it with td_admin_reply_free().
 */
struct td_admin_reply {
	struct json_object *root; /* the reply object; NULL before the first start */
	bool failed;		  /* an allocation failed since the reply started */
};

enum td_admin_result {
	TD_ADMIN_REPLY, /* reply built */
	TD_ADMIN_TRACE, /* reply built; the connection becomes a trace stream */
};

/* Run the parsed command @req, building one JSON object in @out. Admin thread only. */
enum td_admin_result td_admin_execute(struct td_admin *a, const struct td_admin_request *req,
				      struct td_admin_reply *out);

/* Start @out afresh as {"ok":true}. Return: the object to add to; NULL when memory ran out. */
struct json_object *td_admin_ok(struct td_admin_reply *out) td_nonnull(1);
/* Start @out afresh as {"ok":false,"error":MESSAGE}. */
void td_admin_error(struct td_admin_reply *out, const char *fmt, ...) td_printf(2, 3)
	td_nonnull(1, 2);

/*
 * Add member @key to @obj, a container of @out (NULL: its creation failed,
 * and so does this). td_admin_put_str() writes NULL @s as null,
 * td_admin_put_double() a non-finite @v as null (common/jsonc.h has the
 * number and string forms).
 */
void td_admin_put_u64(struct td_admin_reply *out, struct json_object *obj, const char *key,
		      uint64_t v) td_nonnull(1, 3);
void td_admin_put_i64(struct td_admin_reply *out, struct json_object *obj, const char *key,
		      int64_t v) td_nonnull(1, 3);
void td_admin_put_bool(struct td_admin_reply *out, struct json_object *obj, const char *key,
		       bool v) td_nonnull(1, 3);
void td_admin_put_str(struct td_admin_reply *out, struct json_object *obj, const char *key,
		      const char *s) td_nonnull(1, 3);
void td_admin_put_double(struct td_admin_reply *out, struct json_object *obj, const char *key,
			 double v) td_nonnull(1, 3);
void td_admin_put_null(struct td_admin_reply *out, struct json_object *obj, const char *key)
	td_nonnull(1, 3);
/* Add an empty object or array as @key of @obj. Return: it (owned by @obj), or NULL. */
struct json_object *td_admin_put_object(struct td_admin_reply *out, struct json_object *obj,
					const char *key) td_nonnull(1, 3);
struct json_object *td_admin_put_array(struct td_admin_reply *out, struct json_object *obj,
				       const char *key) td_nonnull(1, 3);
/* Append to array @arr (NULL: its creation failed, and so does this). */
void td_admin_append_u64(struct td_admin_reply *out, struct json_object *arr, uint64_t v)
	td_nonnull(1);
void td_admin_append_str(struct td_admin_reply *out, struct json_object *arr, const char *s)
	td_nonnull(1, 3);
/* Append an empty object. Return: it (owned by @arr), or NULL. */
struct json_object *td_admin_append_object(struct td_admin_reply *out, struct json_object *arr)
	td_nonnull(1);

/*
 * Return: the reply as one line (no newline) and its length in *@len, owned
 * by @out until it is started again or freed; when building or writing it
 * failed, the constant line {"ok":false,"error":"out of memory"}.
 */
const char *td_admin_reply_line(struct td_admin_reply *out, size_t *len) td_nonnull(1, 2);
/* Free what @out holds; it may be started again. */
void td_admin_reply_free(struct td_admin_reply *out) td_nonnull(1);

/* Record a sample of the totals now (called about once a second). */
void td_admin_sample(struct td_admin *a);

/* The mark a powerfail adds to a recording write log: the disk lost what followed its flush. */
#define TD_ADMIN_POWERFAIL_MARK "tagdisk-powerfail"

/*
 * Add object @key to @parent: the write log's state, path, entries, bytes and
 * counts (docs/protocol.md, "log").
 */
void td_admin_put_wlog(struct td_admin *a, struct td_admin_reply *out, struct json_object *parent,
		       const char *key) td_nonnull(1, 2, 4);

/* Return: whether the queue runs in rq or mq mode (tags, depth and elevators exist). */
bool td_admin_queued_mode(struct td_admin *a);

/* The reports (admin_report.c), in the shape of every handler. */
void td_admin_cmd_status(struct td_admin *a, const struct td_admin_request *req,
			 struct td_admin_reply *out);
void td_admin_cmd_stats(struct td_admin *a, const struct td_admin_request *req,
			struct td_admin_reply *out);
void td_admin_cmd_tags(struct td_admin *a, const struct td_admin_request *req,
		       struct td_admin_reply *out);

#endif /* TAGDISK_ADMIN_INT_H */
