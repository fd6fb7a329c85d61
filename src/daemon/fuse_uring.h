/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuse_uring.h - the FUSE-over-io_uring transport's rings (Linux 6.14+).
 *
 * One ring queue per possible CPU, each with its own io_uring and a thread
 * pinned to that CPU. Each queue registers nr_entries entries (a 288-byte
 * header and a payload buffer each) with the kernel; a request arrives as
 * the completion of an entry's command, the owner's process callback handles
 * it as if read from /dev/fuse, and the reply - sent from any thread through
 * td_fuse_uring_reply() - goes back, with the fetch of the next request, in
 * one COMMIT_AND_FETCH issued by the thread whose ring holds the entry: its
 * queue's thread, or a helper's for large I/O (params.helpers).
 *
 * Requests are handed to the process callback with their `unique` replaced
 * by a tag naming the entry (td_fuse_uring_owns() recognises it), so a reply
 * written later from a completion thread finds its entry; the entry stays
 * the request's until that reply commits.
 *
 * Lifetime: create before mounting or while answering FUSE_INIT (the sizes
 * are the reply's; the queue threads are made then and wait), start once the
 * INIT reply asking for io_uring is written (the kernel refuses REGISTER
 * before), destroy before closing /dev/fuse (the ring's pending commands hold
 * the device open). Every reply to a ring request must have been written
 * before destroy. The parts and the states of an entry: fuse_uring_int.h.
 * LOCKING: each loop's (queue thread's or helper's) mutex guards its lists
 * of replies waiting to be committed and of requests handed to it;
 * everything else of a loop belongs to its thread, and an entry to the loop
 * holding it. The request counters are relaxed atomics.
 */
#ifndef TAGDISK_FUSE_URING_H
#define TAGDISK_FUSE_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include "common/compiler.h"

struct td_fuse_uring;

struct td_fuse_uring_params {
	int fuse_fd;		  /* the /dev/fuse connection (borrowed; or given at start) */
	unsigned int nr_entries;  /* per queue, 2 at least */
	size_t payload_bytes;	  /* per entry: max(8192, max_write, max_pages x page) */
	/*
	 * Handle one request, in the queue's thread: @buf holds the fuse_in_header
	 * (unique tagged), the arguments and the payload, @len bytes, as a read of
	 * /dev/fuse would. Its reply must come through td_fuse_uring_reply().
	 */
	void (*process)(void *arg, void *buf, size_t len);
	void *arg;
	/*
	 * Helper loops, started on demand, at most this many (0: every request
	 * is processed in its queue's thread). READ and WRITE of 64 KiB and more
	 * go to a helper, which keeps the entry while such requests keep coming
	 * on it: the kernel's copies of the payload, at the commit and at the
	 * fetch, run in the thread whose ring holds the entry, so they spread
	 * over the CPUs instead of queueing on the ring thread. Small requests
	 * stay in (or go back to) their queue's thread, cheaper than a hand-over.
	 */
	unsigned int helpers;
	/*
	 * The handlers may block for the I/O's duration (they do it in the
	 * calling thread): FSYNC and FALLOCATE go to helpers too, and a helper
	 * keeps a request rather than wait behind a busier one.
	 */
	bool blocking;
	/*
	 * Optional: a loop met an error it cannot wait through (its entries and
	 * the requests in them would hang): stop serving. Called once per failing
	 * loop, from its thread; td_fuse_uring_failed() is true from then on.
	 */
	void (*failed)(void *arg);
};

/* Return: the number of queues the kernel expects: one per possible CPU. */
unsigned int td_fuse_uring_nr_cpus(void);

/*
 * Set up the queues: rings, entry buffers and the queue threads, which wait
 * for td_fuse_uring_start() (the kernel refuses REGISTER until it has
 * processed the INIT reply). Return: the rings, or NULL with a message in
 * @err (nothing is left behind).
 */
struct td_fuse_uring *td_fuse_uring_create(const struct td_fuse_uring_params *p, char *err,
					   size_t errlen) td_nonnull(1, 2);

/*
 * Once the INIT reply asking for io_uring is written: let the queue threads
 * register their entries on @fuse_fd, and wait until all have. Return: 0, or the first
 * negative errno the kernel answered a REGISTER with (it then serves the
 * connection through /dev/fuse).
 */
int td_fuse_uring_start(struct td_fuse_uring *u, int fuse_fd) td_nonnull(1);

/* From now on, requests arriving on the rings are held, not processed (a stopping daemon). */
void td_fuse_uring_hold(struct td_fuse_uring *u) td_nonnull(1);

/* Stop the threads, cancel what the kernel holds, free. */
void td_fuse_uring_destroy(struct td_fuse_uring *u) td_nonnull(1);

/* Return: whether a loop stopped on an error (the params' failed callback ran). */
bool td_fuse_uring_failed(struct td_fuse_uring *u) td_nonnull(1);

/* Return: whether @unique is the tag of a ring request. */
bool td_fuse_uring_owns(uint64_t unique);

/*
 * Send the reply in @iov (iov[0] a fuse_out_header with the tagged unique) to
 * its ring entry; any thread. Return: the bytes of the reply, or -1 with errno.
 */
ssize_t td_fuse_uring_reply(struct td_fuse_uring *u, const struct iovec *iov, int count)
	td_nonnull(1, 2);

/*
 * In the thread handling a ring request: whether [@data, @data + @len) lies in
 * its entry's payload (valid until the reply: no need to copy it).
 */
bool td_fuse_uring_data_pinned(const void *data, size_t len);

/*
 * In the thread handling a ring request: its entry's payload, where a reply
 * of @len bytes can be built in place (no copy at reply time); NULL when not
 * handling a ring request or @len does not fit.
 */
void *td_fuse_uring_reply_space(size_t len);

/* Return: the number of queues; per-queue request counts into @counts (up to @max). */
unsigned int td_fuse_uring_counts(struct td_fuse_uring *u, uint64_t *counts, unsigned int max)
	td_nonnull(1);

/* The entries idle loops gave back, in *@trims; of those, the ones holding a request, in *@kept. */
void td_fuse_uring_trims(struct td_fuse_uring *u, uint64_t *trims, uint64_t *kept)
	td_nonnull(1, 2, 3);

/* Return: the helper loops running now. */
unsigned int td_fuse_uring_helpers(struct td_fuse_uring *u) td_nonnull(1);

/* Return: the entries per queue. */
unsigned int td_fuse_uring_entries(const struct td_fuse_uring *u) td_nonnull(1);

/* Return: the payload bytes of each entry. */
size_t td_fuse_uring_payload(const struct td_fuse_uring *u) td_nonnull(1);

#endif /* TAGDISK_FUSE_URING_H */
