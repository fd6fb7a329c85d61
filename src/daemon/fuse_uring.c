// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_uring.c - FUSE over io_uring: one ring queue per CPU, set up and torn
 * down; the request tags.
 *
 * The parts: this file makes the rings, the entries (one mapping each: a
 * scratch page holding the ring header, then the payload) and the queue
 * threads, starts them once the INIT reply is written, and takes everything
 * down; fuse_uring_loop.c is the loop every ring thread runs (requests,
 * replies, commits, the idle trim); fuse_uring_helper.c the helper loops
 * that take large I/O off the queue threads. fuse_uring_int.h holds what
 * they share and the states of an entry.
 *
 * Starting. The queue threads are created with the rings, before the INIT
 * reply asks for io_uring (so a thread that cannot be made is known while
 * the connection can still be served through /dev/fuse), and wait there.
 * td_fuse_uring_start() lets them register their entries (the kernel refuses
 * REGISTER until it has processed the INIT reply) and waits until every one
 * has, returning the first refusal.
 *
 * Tags. A request handed to the process callback carries, instead of the
 * kernel's unique, a tag naming its entry: bit 62 set, bit 63 clear (the
 * kernel marks resent requests' uniques with bit 63, and its counter never
 * reaches bit 62), the queue in bits 32-61 and the entry in bits 0-31.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/fuse_uring_int.h"

#define TAG_BIT	 (1ULL << 62)
#define TAG_MASK (3ULL << 62)

unsigned int td_fuse_uring_nr_cpus(void)
{
	/* The kernel makes one queue per possible CPU: "0-N" or a list in sysfs. */
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	char line[256];
	unsigned int max = 0;

	if (f && fgets(line, sizeof(line), f)) {
		for (char *tok = strtok(line, ",\n"); tok; tok = strtok(NULL, ",\n")) {
			unsigned int a, b;
			int n = sscanf(tok, "%u-%u", &a, &b);

			if (n == 2 && b + 1 > max)
				max = b + 1;
			else if (n == 1 && a + 1 > max)
				max = a + 1;
		}
	}
	if (f)
		fclose(f);
	if (!max) {
		long n = sysconf(_SC_NPROCESSORS_CONF);

		max = n > 0 ? (unsigned int)n : 1;
	}
	return max;
}

uint64_t td_ring_ent_tag(const struct td_ring_ent *e)
{
	return TAG_BIT | ((uint64_t)e->q->qid << 32) | e->idx;
}

bool td_fuse_uring_owns(uint64_t unique)
{
	return (unique & TAG_MASK) == TAG_BIT;
}

struct td_ring_ent *td_ring_tag_ent(struct td_fuse_uring *u, uint64_t tag)
{
	unsigned int qid = (unsigned int)((tag >> 32) & 0x3fffffffU);
	unsigned int idx = (unsigned int)(tag & 0xffffffffU);

	if (!td_fuse_uring_owns(tag) || qid >= u->nr_queues || idx >= u->p.nr_entries)
		return NULL;
	return &u->queues[qid].ents[idx];
}

/* ---- creation --------------------------------------------------------------------------- */

/*
 * A loop's ring (SQE128) with room for @sqes commands, its eventfd and lock.
 *
 * Not SINGLE_ISSUER + DEFER_TASKRUN: deferring the task work that hands a
 * request to an armed entry until the thread next waits slows the common
 * case, a direct-I/O loop device on the disk (see docs/benchmarks.md).
 * Without it, that task work runs whenever the thread returns to user space,
 * which td_ring_trim_idle() is written for.
 */
int td_ring_loop_init(struct td_ring_loop *l, unsigned int sqes, char *err, size_t errlen)
{
	struct io_uring_params params = { .flags = IORING_SETUP_SQE128 };
	int ret;

	td_mutex_init(&l->lock);
	l->efd = eventfd(0, EFD_CLOEXEC);
	if (l->efd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return -errno;
	}
	/* Completions: twice the submissions (liburing's default). */
	ret = io_uring_queue_init_params(sqes, &l->ring, &params);
	if (ret < 0) {
		snprintf(err, errlen, "io_uring_setup: %s", strerror(-ret));
		return ret;
	}
	l->ring_ok = true;
	return 0;
}

void td_ring_loop_fini(struct td_ring_loop *l)
{
	if (l->ring_ok)
		io_uring_queue_exit(&l->ring);
	l->ring_ok = false;
	if (l->efd >= 0)
		close(l->efd);
	l->efd = -1;
	td_mutex_destroy(&l->lock);
}

static int queue_init(struct td_ring_queue *q, char *err, size_t errlen)
{
	struct td_fuse_uring *u = q->u;
	size_t map_bytes = TD_URING_SCRATCH_BYTES + u->p.payload_bytes;
	int ret;

	q->loop.u = u;
	q->loop.home = q;
	/* Its own entries (those at home) and the eventfd read. */
	ret = td_ring_loop_init(&q->loop, u->p.nr_entries + 1, err, errlen);
	if (ret)
		return ret;
	q->ents = calloc(u->p.nr_entries, sizeof(*q->ents));
	if (!q->ents) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < u->p.nr_entries; i++) {
		struct td_ring_ent *e = &q->ents[i];

		e->q = q;
		e->idx = i;
		e->state = TD_ENT_DEAD;
		e->map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (e->map == MAP_FAILED) {
			e->map = NULL;
			snprintf(err, errlen, "out of memory for ring buffers");
			return -ENOMEM;
		}
		e->hdr = e->map;
		e->payload = (char *)e->map + TD_URING_SCRATCH_BYTES;
		e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
		e->iov[1] = (struct iovec){ e->payload, u->p.payload_bytes };
	}
	return 0;
}

static void queue_fini(struct td_ring_queue *q)
{
	size_t map_bytes = TD_URING_SCRATCH_BYTES + q->u->p.payload_bytes;

	td_ring_loop_fini(&q->loop);
	if (q->ents)
		for (unsigned int i = 0; i < q->u->p.nr_entries; i++)
			if (q->ents[i].map)
				munmap(q->ents[i].map, map_bytes);
	free(q->ents);
}

/* Stop every loop thread (those started) and wait for them. */
static void stop_threads(struct td_fuse_uring *u)
{
	struct td_ring_loop *helpers;

	atomic_store(&u->exiting, true);
	/* No helper starts after this (start_helper checks exiting under the lock). */
	td_mutex_lock(&u->helper_lock);
	helpers = atomic_load(&u->helpers);
	td_mutex_unlock(&u->helper_lock);
	/* Queue threads still waiting for the start. */
	td_mutex_lock(&u->start_lock);
	td_cond_broadcast(&u->start_cond);
	td_mutex_unlock(&u->start_lock);

	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (u->queues[i].loop.started)
			eventfd_write(u->queues[i].loop.efd, 1);
	for (struct td_ring_loop *h = helpers; h; h = h->next_helper)
		eventfd_write(h->efd, 1);
	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (u->queues[i].loop.started)
			pthread_join(u->queues[i].loop.tid, NULL);
	for (struct td_ring_loop *h = helpers; h; h = h->next_helper)
		pthread_join(h->tid, NULL);
}

/*
 * Close every ring and free what the loops and @u hold (the threads are gone).
 * Closing a ring cancels the commands the kernel holds for it, releasing
 * /dev/fuse; the entries' buffers go after every ring is closed.
 */
static void uring_free(struct td_fuse_uring *u)
{
	struct td_ring_loop *h = atomic_load(&u->helpers);

	while (h) {
		struct td_ring_loop *next = h->next_helper;

		td_ring_loop_fini(h);
		free(h);
		h = next;
	}
	for (unsigned int i = 0; i < u->nr_queues; i++)
		queue_fini(&u->queues[i]);
	free(u->queues);
	td_cond_destroy(&u->start_cond);
	td_mutex_destroy(&u->start_lock);
	td_mutex_destroy(&u->helper_lock);
	free(u);
}

/* Create the queue threads; they wait for td_fuse_uring_start(). */
static int start_queue_threads(struct td_fuse_uring *u, char *err, size_t errlen)
{
	pthread_attr_t attr;
	int ret = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, TD_URING_THREAD_STACK);
	for (unsigned int i = 0; i < u->nr_queues; i++) {
		struct td_ring_loop *l = &u->queues[i].loop;

		ret = -pthread_create(&l->tid, &attr, td_ring_loop_thread, l);
		if (ret) {
			snprintf(err, errlen, "cannot start the thread of ring %u: %s", i,
				 strerror(-ret));
			break;
		}
		l->started = true;
	}
	pthread_attr_destroy(&attr);
	return ret;
}

struct td_fuse_uring *td_fuse_uring_create(const struct td_fuse_uring_params *p, char *err,
					   size_t errlen)
{
	struct td_fuse_uring *u = calloc(1, sizeof(*u));

	if (!u) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	u->p = *p;
	u->p.nr_entries = p->nr_entries < 2 ? 2 : p->nr_entries;
	td_mutex_init(&u->helper_lock);
	td_mutex_init(&u->start_lock);
	td_cond_init(&u->start_cond);
	if (sched_getaffinity(0, sizeof(u->cpus), &u->cpus)) {
		CPU_ZERO(&u->cpus);
		for (unsigned int i = 0; i < CPU_SETSIZE; i++)
			CPU_SET(i, &u->cpus);
	}
	u->nr_queues = td_fuse_uring_nr_cpus();
	u->queues = calloc(u->nr_queues, sizeof(*u->queues));
	if (!u->queues) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	for (unsigned int i = 0; i < u->nr_queues; i++) {
		u->queues[i].u = u;
		u->queues[i].qid = i;
		u->queues[i].loop.efd = -1;
	}
	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (queue_init(&u->queues[i], err, errlen))
			goto out_free;
	if (start_queue_threads(u, err, errlen)) {
		stop_threads(u);
		goto out_free;
	}
	return u;

out_free:
	uring_free(u);
	return NULL;
}

int td_fuse_uring_start(struct td_fuse_uring *u, int fuse_fd)
{
	int err;

	td_mutex_lock(&u->start_lock);
	u->p.fuse_fd = fuse_fd;
	u->go = true;
	td_cond_broadcast(&u->start_cond);
	while (u->registered < u->nr_queues)
		td_cond_wait(&u->start_cond, &u->start_lock);
	err = u->start_err;
	td_mutex_unlock(&u->start_lock);
	return err;
}

void td_fuse_uring_hold(struct td_fuse_uring *u)
{
	atomic_store(&u->holding, true);
}

void td_fuse_uring_destroy(struct td_fuse_uring *u)
{
	stop_threads(u);
	uring_free(u);
}

bool td_fuse_uring_failed(struct td_fuse_uring *u)
{
	return atomic_load(&u->failed);
}

unsigned int td_fuse_uring_counts(struct td_fuse_uring *u, uint64_t *counts, unsigned int max)
{
	for (unsigned int i = 0; i < u->nr_queues && i < max; i++)
		counts[i] = atomic_load_explicit(&u->queues[i].requests, memory_order_relaxed);
	return u->nr_queues;
}

void td_fuse_uring_trims(struct td_fuse_uring *u, uint64_t *trims, uint64_t *kept)
{
	*trims = atomic_load_explicit(&u->trims, memory_order_relaxed);
	*kept = atomic_load_explicit(&u->trim_kept, memory_order_relaxed);
}

unsigned int td_fuse_uring_helpers(struct td_fuse_uring *u)
{
	return atomic_load(&u->nr_helpers);
}

unsigned int td_fuse_uring_entries(const struct td_fuse_uring *u)
{
	return u->p.nr_entries;
}

size_t td_fuse_uring_payload(const struct td_fuse_uring *u)
{
	return u->p.payload_bytes;
}
