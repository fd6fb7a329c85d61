// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * drive_rbd.c - the Ceph RBD backend: an asynchronous backend on librbd.
 *
 * Open: one cluster handle (rados_t) per backend, one I/O context on the
 * pool, one open image. A dead cluster must not hang the daemon's start, so
 * connecting and the monitor commands behind it are bounded (30 s, unless the
 * configuration file sets its own client_mount_timeout / rados_mon_op_timeout).
 * I/O to the OSDs is not bounded: an operation waits for the cluster to come
 * back, as a real disk's would, and the drive's command timeout decides what
 * to do meanwhile. An image that does not exist is created when a size is
 * given, with the default features, exclusive-lock among them.
 *
 * Cache: librbd's default write-around cache completes a write before the
 * OSDs have it (once the first flush has been seen), so a write the drive
 * completed could die with the daemon. The backend is the medium, not a
 * cache (the drive models a volatile cache of its own: write_cache =
 * volatile), so rbd_cache is turned off unless the configuration file
 * chooses an rbd_cache_policy: then a completed write is on the OSDs, a
 * flush only waits for what is in flight, and FUA costs nothing more.
 *
 * Lock: a read-write open takes the image's exclusive lock with
 * rbd_lock_acquire(). That also switches librbd from its default,
 * cooperative policy (a peer that asks for the lock is handed it) to the
 * "managed" one, where the holder refuses every peer's request. A second
 * daemon asks the holder, is refused at once (-EROFS from librbd) and fails
 * to start with -EBUSY, its message naming the holder (rbd_lock_get_owners()
 * gives its address, rbd_list_lockers() the client name at that address).
 * A holder that died (SIGKILL) cannot answer: the opener's acquisition waits
 * until the OSD drops the dead holder's watch on the image header
 * (osd_client_watch_timeout, 30 s by default; measured: 27-30 s after the
 * kill), then librbd blocklists the holder and breaks its lock
 * (rbd_blocklist_on_break_lock), and the open succeeds. So a restart after a
 * crash simply takes that long; nothing needs breaking by hand. A holder
 * that was only frozen (SIGSTOP) is treated the same way and, once thawed,
 * gets -ESHUTDOWN from every write: the blocklist fences it. We never break
 * a lock ourselves: whether its holder is dead is the cluster's call, and
 * breaking a live holder's lock would let two daemons write the image. A
 * read-only open takes no lock and is not refused.
 *
 * I/O: one td_backend_io is one librbd completion, whose argument is the io;
 * io->bpriv points back to the backend. Read, write, flush map one to one.
 * A FUA write carries LIBRADOS_OP_FLAG_FADVISE_FUA, which makes the
 * write-around cache (when chosen) send it through and complete it only once
 * the OSDs have it. With the ObjectCacher (rbd_cache_policy = writeback) the
 * flag is not relied on: there a FUA write is the write followed by a
 * flush, chained in the write's completion. Discard is rbd_aio_write_zeroes()
 * without flags: whole objects are removed, partial ones truncated or
 * zeroed, so the range always reads back as zeroes (rbd_aio_discard() skips
 * pieces smaller than rbd_discard_granularity_bytes and would leave them as
 * they were). Write zeroes asks for thick provisioning, which writes the
 * zeroes and keeps the space allocated. Reads wholly past the end of the
 * image are zero-filled here; librbd shortens reads that cross it, and the
 * rest of the buffer is zero-filled on completion.
 *
 * Completion runs on a librbd thread: it reads the result, releases the
 * completion, calls io->done with no lock of ours held, and only then drops
 * the count of outstanding operations, so destroy() (which waits for that
 * count to reach zero) never frees the backend under a callback.
 *
 * LOCKING: rbd_backend.lock guards in_flight only; it is never held across
 * a librbd call or io->done. librbd's own calls are thread-safe on one image.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include "common/lock.h"
#include "common/log.h"
#include "tagdisk/backend.h"

#define RBD_DEFAULT_CONF "/etc/ceph/ceph.conf"
#define RBD_DEFAULT_ID	 "admin"
/* Bound on connecting and on monitor commands, in seconds (see rbd_defaults). */
#define RBD_CONNECT_TIMEOUT_S "30"
/* rbd's default features; exclusive-lock is the one the daemon relies on. */
#define RBD_CREATE_FEATURES                                                                        \
	(RBD_FEATURE_LAYERING | RBD_FEATURE_EXCLUSIVE_LOCK | RBD_FEATURE_OBJECT_MAP |              \
	 RBD_FEATURE_FAST_DIFF | RBD_FEATURE_DEEP_FLATTEN)
/* At most this many lock owners are named in a message (an exclusive lock has one). */
#define RBD_MAX_OWNERS 4
/* Room for each NUL-separated list rbd_list_lockers() returns. */
#define RBD_LOCKERS_BYTES 1024
/* Acquisition attempts when the lock is refused but its owner has gone by the time we ask. */
#define RBD_LOCK_ATTEMPTS 3

struct rbd_backend {
	rados_t cluster;
	rados_ioctx_t ioctx;
	rbd_image_t image;
	uint64_t size;	    /* bytes, at open */
	bool locked;	    /* we hold the exclusive lock */
	bool fua_flush;	    /* a FUA write is a write then a flush (writeback cache) */
	atomic_bool fenced; /* an operation failed because this client was blocklisted */
	char name[256];	    /* "pool/image", for messages */
	struct td_mutex lock;
	struct td_cond idle;	/* signalled when in_flight drops to 0 */
	unsigned int in_flight; /* lock: accepted operations not yet finished */
};

/* ---- I/O ---------------------------------------------------------------------------- */

static void in_flight_get(struct rbd_backend *rb)
{
	td_mutex_lock(&rb->lock);
	rb->in_flight++;
	td_mutex_unlock(&rb->lock);
}

static void in_flight_put(struct rbd_backend *rb)
{
	td_mutex_lock(&rb->lock);
	if (--rb->in_flight == 0)
		td_cond_broadcast(&rb->idle);
	td_mutex_unlock(&rb->lock);
}

/* End @io with @err. @io may be freed by its done callback: @rb is taken first. */
static void rbd_finish(struct td_backend_io *io, int err)
{
	struct rbd_backend *rb = io->bpriv;

	io->done(io, err);
	in_flight_put(rb);
}

/* Return: librbd's result for @io as 0 or a negative errno; zero-fills the end of a short read. */
static int rbd_result(struct td_backend_io *io, ssize_t r)
{
	struct rbd_backend *rb = io->bpriv;

	/* Relaxed: the flag only keeps the message to one line per backend. */
	if (r == -ESHUTDOWN && !atomic_exchange_explicit(&rb->fenced, true, memory_order_relaxed))
		td_err("rbd: image %s: this client is blocklisted (another client broke its "
		       "lock): every operation fails",
		       rb->name);
	if (r < 0)
		return (int)r;
	if (io->op == TD_OP_READ && (uint64_t)r < io->len)
		memset((char *)io->buf + r, 0, io->len - (uint64_t)r);
	return 0;
}

static void rbd_io_done(rbd_completion_t c, void *arg)
{
	struct td_backend_io *io = arg;
	ssize_t r = rbd_aio_get_return_value(c);

	rbd_aio_release(c);
	rbd_finish(io, rbd_result(io, r));
}

/* A FUA write on a writeback cache has reached librbd: now flush it to the OSDs. */
static void rbd_fua_write_done(rbd_completion_t c, void *arg)
{
	struct td_backend_io *io = arg;
	struct rbd_backend *rb = io->bpriv;
	ssize_t r = rbd_aio_get_return_value(c);
	rbd_completion_t flush;
	int err;

	rbd_aio_release(c);
	if (r < 0) {
		rbd_finish(io, rbd_result(io, r));
		return;
	}
	err = rbd_aio_create_completion(io, rbd_io_done, &flush);
	if (err) {
		rbd_finish(io, err);
		return;
	}
	err = rbd_aio_flush(rb->image, flush);
	if (err) {
		rbd_aio_release(flush);
		rbd_finish(io, err);
	}
}

static int rbd_submit(void *priv, struct td_backend_io *io)
{
	struct rbd_backend *rb = priv;
	bool fua_flush = io->op == TD_OP_WRITE && io->fua && rb->fua_flush;
	rbd_completion_t c;
	int op_flags = 0;
	int err;

	if (io->op == TD_OP_READ && io->off >= rb->size) {
		memset(io->buf, 0, io->len);
		io->done(io, 0);
		return 0;
	}
	io->bpriv = rb;
	err = rbd_aio_create_completion(io, fua_flush ? rbd_fua_write_done : rbd_io_done, &c);
	if (err)
		return err;
	in_flight_get(rb);
	switch (io->op) {
	case TD_OP_READ:
		err = rbd_aio_read(rb->image, io->off, io->len, io->buf, c);
		break;
	case TD_OP_WRITE:
		if (io->fua && !rb->fua_flush)
			op_flags = LIBRADOS_OP_FLAG_FADVISE_FUA;
		err = rbd_aio_write2(rb->image, io->off, io->len, io->buf, c, op_flags);
		break;
	case TD_OP_FLUSH:
		err = rbd_aio_flush(rb->image, c);
		break;
	case TD_OP_DISCARD:
		err = rbd_aio_write_zeroes(rb->image, io->off, io->len, c, 0, 0);
		break;
	case TD_OP_WRITE_ZEROES:
		err = rbd_aio_write_zeroes(rb->image, io->off, io->len, c,
					   RBD_WRITE_ZEROES_FLAG_THICK_PROVISION, 0);
		break;
	default:
		err = -EOPNOTSUPP;
		break;
	}
	if (err) {
		rbd_aio_release(c);
		in_flight_put(rb);
	}
	return err;
}

/* ---- open and close ----------------------------------------------------------------- */

/* Free what td_backend_rbd_open() set up, in reverse order; NULL handles were not made. */
static void rbd_teardown(struct rbd_backend *rb)
{
	if (rb->image) {
		if (rb->locked)
			rbd_lock_release(rb->image);
		rbd_close(rb->image);
	}
	if (rb->ioctx)
		rados_ioctx_destroy(rb->ioctx);
	if (rb->cluster)
		rados_shutdown(rb->cluster);
	td_cond_destroy(&rb->idle);
	td_mutex_destroy(&rb->lock);
	free(rb);
}

static void rbd_destroy(void *priv)
{
	struct rbd_backend *rb = priv;

	td_mutex_lock(&rb->lock);
	while (rb->in_flight)
		td_cond_wait(&rb->idle, &rb->lock);
	td_mutex_unlock(&rb->lock);
	rbd_teardown(rb);
}

static const struct td_backend_ops rbd_ops = {
	.name = "rbd",
	.submit = rbd_submit,
	.destroy = rbd_destroy,
};

/*
 * Settings of ours, each made only when the configuration file left @watch at
 * its built-in default, so that an administrator's choice stands.
 */
static const struct rbd_default {
	const char *watch;
	const char *key;
	const char *value;
} rbd_defaults[] = {
	/* A dead cluster fails the open instead of hanging it (librados: 300 s, and none). */
	{ "client_mount_timeout", "client_mount_timeout", RBD_CONNECT_TIMEOUT_S },
	{ "rados_mon_op_timeout", "rados_mon_op_timeout", RBD_CONNECT_TIMEOUT_S },
	/* A write completes once the OSDs have it: no write-around cache unless chosen. */
	{ "rbd_cache_policy", "rbd_cache", "false" },
};

/* Read @conf, set the keyring and rbd_defaults. Return: 0 or a negative errno, with @msg. */
static int rbd_configure(rados_t cluster, const struct td_rbd_params *p, const char *conf,
			 char *msg, size_t msglen)
{
	char before[TD_ARRAY_SIZE(rbd_defaults)][64];
	char now[64];
	int err;

	for (size_t i = 0; i < TD_ARRAY_SIZE(rbd_defaults); i++) {
		err = rados_conf_get(cluster, rbd_defaults[i].watch, before[i], sizeof(before[i]));
		if (err)
			goto out_key;
	}
	err = rados_conf_read_file(cluster, conf);
	if (err) {
		snprintf(msg, msglen, "rbd: cannot read %s: %s", conf, strerror(-err));
		return err;
	}
	if (p->keyring) {
		err = rados_conf_set(cluster, "keyring", p->keyring);
		if (err) {
			snprintf(msg, msglen, "rbd: cannot use keyring %s: %s", p->keyring,
				 strerror(-err));
			return err;
		}
	}
	for (size_t i = 0; i < TD_ARRAY_SIZE(rbd_defaults); i++) {
		err = rados_conf_get(cluster, rbd_defaults[i].watch, now, sizeof(now));
		if (!err && !strcmp(now, before[i]))
			err = rados_conf_set(cluster, rbd_defaults[i].key, rbd_defaults[i].value);
		if (err)
			goto out_key;
	}
	return 0;

out_key:
	snprintf(msg, msglen, "rbd: cannot set up the cluster handle: %s", strerror(-err));
	return err;
}

static int rbd_create_image(struct rbd_backend *rb, const struct td_rbd_params *p,
			    uint64_t create_size)
{
	rbd_image_options_t opts;
	int err;

	rbd_image_options_create(&opts);
	err = rbd_image_options_set_uint64(opts, RBD_IMAGE_OPTION_FEATURES, RBD_CREATE_FEATURES);
	if (!err)
		err = rbd_create4(rb->ioctx, p->image, create_size, opts);
	rbd_image_options_destroy(opts);
	/* Another daemon created it first: open it (and race for its lock) as if it had existed. */
	return err == -EEXIST ? 0 : err;
}

static int rbd_open_image(struct rbd_backend *rb, const struct td_rbd_params *p,
			  uint64_t create_size, bool read_only, char *msg, size_t msglen)
{
	int err;

	if (read_only)
		err = rbd_open_read_only(rb->ioctx, p->image, &rb->image, NULL);
	else
		err = rbd_open(rb->ioctx, p->image, &rb->image, NULL);
	if (err == -ENOENT && create_size && !read_only) {
		err = rbd_create_image(rb, p, create_size);
		if (err) {
			snprintf(msg, msglen, "rbd: cannot create image %s/%s: %s", p->pool,
				 p->image, strerror(-err));
			rb->image = NULL;
			return err;
		}
		err = rbd_open(rb->ioctx, p->image, &rb->image, NULL);
	}
	if (err) {
		rb->image = NULL;
		if (err == -ENOENT)
			snprintf(msg, msglen, "rbd: image %s/%s does not exist", p->pool, p->image);
		else
			snprintf(msg, msglen, "rbd: cannot open image %s/%s: %s", p->pool, p->image,
				 strerror(-err));
	}
	return err;
}

/*
 * Copy the client name ("client.4123") of the locker at @addr into @client.
 * Return: true when found. rbd_lock_get_owners() gives addresses only; the
 * exclusive lock is a cls lock on the header, which rbd_list_lockers() lists.
 */
static bool rbd_locker_client(rbd_image_t image, const char *addr, char *client, size_t len)
{
	char clients[RBD_LOCKERS_BYTES], cookies[RBD_LOCKERS_BYTES], addrs[RBD_LOCKERS_BYTES];
	size_t clients_len = sizeof(clients), cookies_len = sizeof(cookies);
	size_t addrs_len = sizeof(addrs), tag_len = sizeof(clients);
	char tag[RBD_LOCKERS_BYTES];
	const char *c = clients, *a = addrs;
	int exclusive;
	ssize_t n;

	n = rbd_list_lockers(image, &exclusive, tag, &tag_len, clients, &clients_len, cookies,
			     &cookies_len, addrs, &addrs_len);
	for (ssize_t i = 0; i < n; i++, c += strlen(c) + 1, a += strlen(a) + 1) {
		if (!strcmp(a, addr)) {
			snprintf(client, len, "%s", c);
			return true;
		}
	}
	return false;
}

/*
 * Name the holder of the image's lock in @msg. Return: true when there is
 * one, false when the lock is free or Ceph would not say.
 */
static bool rbd_name_owner(struct rbd_backend *rb, const struct td_rbd_params *p, char *msg,
			   size_t msglen)
{
	char *owners[RBD_MAX_OWNERS];
	size_t n = RBD_MAX_OWNERS;
	rbd_lock_mode_t mode;
	char client[128];
	int err;

	err = rbd_lock_get_owners(rb->image, &mode, owners, &n);
	if (err || n == 0)
		return false;
	if (rbd_locker_client(rb->image, owners[0], client, sizeof(client)))
		snprintf(msg, msglen, "rbd: image %s/%s is locked by %s at %s", p->pool, p->image,
			 client, owners[0]);
	else
		snprintf(msg, msglen, "rbd: image %s/%s is locked by %s", p->pool, p->image,
			 owners[0]);
	rbd_lock_get_owners_cleanup(owners, n);
	return true;
}

static int rbd_take_lock(struct rbd_backend *rb, const struct td_rbd_params *p, char *msg,
			 size_t msglen)
{
	uint64_t features;
	int err;

	err = rbd_get_features(rb->image, &features);
	if (err) {
		snprintf(msg, msglen, "rbd: cannot read the features of image %s/%s: %s", p->pool,
			 p->image, strerror(-err));
		return err;
	}
	if (!(features & RBD_FEATURE_EXCLUSIVE_LOCK)) {
		snprintf(msg, msglen,
			 "rbd: image %s/%s lacks the exclusive-lock feature "
			 "(rbd feature enable %s/%s exclusive-lock)",
			 p->pool, p->image, p->pool, p->image);
		return -EINVAL;
	}
	for (int i = 0; i < RBD_LOCK_ATTEMPTS; i++) {
		err = rbd_lock_acquire(rb->image, RBD_LOCK_MODE_EXCLUSIVE);
		if (!err) {
			rb->locked = true;
			return 0;
		}
		if (rbd_name_owner(rb, p, msg, msglen))
			return -EBUSY;
	}
	snprintf(msg, msglen, "rbd: cannot lock image %s/%s: %s", p->pool, p->image,
		 strerror(-err));
	return err;
}

/*
 * Return: whether a FUA write needs a flush after it: only with the
 * ObjectCacher (rbd_cache on, rbd_cache_policy = writeback), whose handling
 * of the FUA flag we do not rely on. The image's own view of its configuration (pool and image
 * overrides included) decides; when it cannot be read, flush to be safe.
 */
static bool rbd_fua_needs_flush(rbd_image_t image)
{
	rbd_config_option_t *opts = NULL;
	int n = 512;
	bool cache = true;
	bool writeback = true;
	int err;

	for (;;) {
		free(opts);
		opts = calloc((size_t)n, sizeof(*opts));
		if (!opts)
			return true;
		err = rbd_config_image_list(image, opts, &n);
		if (err != -ERANGE)
			break;
	}
	if (err < 0) {
		free(opts);
		return true;
	}
	for (int i = 0; i < n; i++) {
		if (!strcmp(opts[i].name, "rbd_cache"))
			cache = !strcmp(opts[i].value, "true");
		else if (!strcmp(opts[i].name, "rbd_cache_policy"))
			writeback = !strcmp(opts[i].value, "writeback");
	}
	rbd_config_image_list_cleanup(opts, n);
	free(opts);
	return cache && writeback;
}

int td_backend_rbd_open(struct td_backend *be, const struct td_rbd_params *p, uint64_t create_size,
			bool read_only, uint64_t *size, char *msg, size_t msglen)
{
	const char *conf = p->conf ? p->conf : RBD_DEFAULT_CONF;
	const char *id = p->id ? p->id : RBD_DEFAULT_ID;
	struct rbd_backend *rb;
	int err;

	if (!p->pool || !*p->pool || !p->image || !*p->image) {
		snprintf(msg, msglen, "rbd: no %s given", p->pool && *p->pool ? "image" : "pool");
		return -EINVAL;
	}
	rb = calloc(1, sizeof(*rb));
	if (!rb) {
		snprintf(msg, msglen, "rbd: out of memory");
		return -ENOMEM;
	}
	td_mutex_init(&rb->lock);
	td_cond_init(&rb->idle);
	snprintf(rb->name, sizeof(rb->name), "%s/%s", p->pool, p->image);
	err = rados_create(&rb->cluster, id);
	if (err) {
		rb->cluster = NULL;
		snprintf(msg, msglen, "rbd: cannot make a cluster handle for client.%s: %s", id,
			 strerror(-err));
		goto out_teardown;
	}
	err = rbd_configure(rb->cluster, p, conf, msg, msglen);
	if (err)
		goto out_teardown;
	err = rados_connect(rb->cluster);
	if (err) {
		snprintf(msg, msglen,
			 "rbd: cannot connect to the cluster with %s%s%s as client.%s: %s", conf,
			 p->keyring ? " and keyring " : "", p->keyring ? p->keyring : "", id,
			 strerror(-err));
		goto out_teardown;
	}
	err = rados_ioctx_create(rb->cluster, p->pool, &rb->ioctx);
	if (err) {
		rb->ioctx = NULL;
		if (err == -ENOENT)
			snprintf(msg, msglen, "rbd: pool '%s' does not exist", p->pool);
		else
			snprintf(msg, msglen, "rbd: cannot open pool '%s': %s", p->pool,
				 strerror(-err));
		goto out_teardown;
	}
	err = rbd_open_image(rb, p, create_size, read_only, msg, msglen);
	if (err)
		goto out_teardown;
	if (!read_only) {
		err = rbd_take_lock(rb, p, msg, msglen);
		if (err)
			goto out_teardown;
	}
	err = rbd_get_size(rb->image, &rb->size);
	if (err) {
		snprintf(msg, msglen, "rbd: cannot read the size of image %s/%s: %s", p->pool,
			 p->image, strerror(-err));
		goto out_teardown;
	}
	rb->fua_flush = rbd_fua_needs_flush(rb->image);
	*size = rb->size;
	be->ops = &rbd_ops;
	be->priv = rb;
	return 0;

out_teardown:
	rbd_teardown(rb);
	return err;
}
