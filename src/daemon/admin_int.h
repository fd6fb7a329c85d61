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
#include <stdint.h>
#include <sys/types.h>
#include "common/json.h"
#include "daemon/admin.h"
#include "daemon/admin_cmd.h"

#define TD_ADMIN_RATE_SAMPLES 8

/* Totals at one moment, for rates. */
struct td_admin_sample {
	uint64_t t_ns;
	uint64_t ios[2];   /* read, write */
	uint64_t bytes[2];
};

struct td_admin {
	struct td_admin_params p;
	char *socket_path;
	char *image;
	uint64_t start_ns;
	int listen_fd;
	dev_t socket_dev; /* the socket file we made, so we only ever remove ours */
	ino_t socket_ino;
	int wake_pipe[2]; /* td_admin_destroy() writes here to stop the thread */
	pthread_t thread;

	pthread_mutex_t fe_lock;
	struct td_frontend *fe; /* fe_lock */
	char *disk_path;	/* fe_lock */

	struct td_admin_sample samples[TD_ADMIN_RATE_SAMPLES]; /* admin thread */
	unsigned int nr_samples;
	unsigned int next_sample;
};

enum td_admin_result {
	TD_ADMIN_REPLY, /* reply written to the buffer */
	TD_ADMIN_TRACE, /* reply written; the connection becomes a trace stream */
};

/* Run the parsed command @req, writing one JSON object into @out. Admin thread only. */
enum td_admin_result td_admin_execute(struct td_admin *a, const struct td_admin_request *req,
				      struct td_json *out);

/* Write {"ok":false,"error":...} into @out (reset first). */
void td_admin_error(struct td_json *out, const char *fmt, ...) td_printf(2, 3);

/* Record a sample of the totals now (called about once a second). */
void td_admin_sample(struct td_admin *a);

#endif /* TAGDISK_ADMIN_INT_H */
