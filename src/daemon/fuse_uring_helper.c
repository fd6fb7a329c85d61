// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_uring_helper.c - FUSE over io_uring: helper loops for large I/O.
 *
 * With one submitting process every request lands on one queue. Had its
 * thread to commit everything, the 1 MiB copies of sequential I/O would run
 * one after another on one CPU (the classic transport spreads them over its
 * reader threads). A request of TD_URING_OFFLOAD_MIN bytes and more is handed
 * to a helper (an idle one, else a new one), which processes it, commits it
 * from its own ring and so keeps the entry: the following large requests on
 * that entry arrive at the helper directly, and the kernel's copies for them
 * run on the helper's CPU. A small request arriving at a helper goes back to
 * its queue's loop, which keeps its entries while requests are small
 * (per-CPU, cheaper than a hand-over).
 *
 * When the handlers block for the I/O's duration (bio mode, an inline
 * drive), flushes and fallocates go to helpers too, and a helper keeps a
 * request rather than wait behind a busier one.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include "common/log.h"
#include "daemon/fuse_uring_int.h"

bool td_ring_wants_helper(const struct td_fuse_uring *u, const struct fuse_in_header *in)
{
	const void *arg = in + 1;

	switch (in->opcode) {
	case FUSE_FSYNC:
	case FUSE_FALLOCATE:
		return u->p.blocking;
	case FUSE_READ:
		return in->len >= sizeof(*in) + sizeof(struct fuse_read_in) &&
		       ((const struct fuse_read_in *)arg)->size >= TD_URING_OFFLOAD_MIN;
	case FUSE_WRITE:
		return in->len >= sizeof(*in) + sizeof(struct fuse_write_in) &&
		       ((const struct fuse_write_in *)arg)->size >= TD_URING_OFFLOAD_MIN;
	default:
		return false;
	}
}

/* Start one more helper, unless p.helpers are running. Return: it, or NULL. */
static struct td_ring_loop *start_helper(struct td_fuse_uring *u)
{
	struct td_ring_loop *h = NULL;
	char err[128];
	pthread_attr_t attr;

	td_mutex_lock(&u->helper_lock);
	if (atomic_load(&u->nr_helpers) >= u->p.helpers || atomic_load(&u->exiting))
		goto out;
	h = calloc(1, sizeof(*h));
	if (!h)
		goto out;
	h->u = u;
	/* A helper's ring may come to hold every entry of every queue. */
	if (td_ring_loop_init(h, u->nr_queues * u->p.nr_entries + 1, err, sizeof(err))) {
		td_warnx("fuse: ring helper: %s", err);
		td_ring_loop_fini(h);
		free(h);
		h = NULL;
		goto out;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, TD_URING_THREAD_STACK);
	/*
	 * A thread inherits its creator's CPUs, and a queue's thread is pinned:
	 * without this every helper would share that one CPU.
	 */
	pthread_attr_setaffinity_np(&attr, sizeof(u->cpus), &u->cpus);
	if (pthread_create(&h->tid, &attr, td_ring_loop_thread, h)) {
		pthread_attr_destroy(&attr);
		td_ring_loop_fini(h);
		free(h);
		h = NULL;
		goto out;
	}
	pthread_attr_destroy(&attr);
	h->started = true;
	h->next_helper = atomic_load(&u->helpers);
	atomic_store(&u->helpers, h);
	atomic_fetch_add(&u->nr_helpers, 1);
out:
	td_mutex_unlock(&u->helper_lock);
	return h;
}

static bool helper_free(struct td_ring_loop *h)
{
	return !atomic_load_explicit(&h->armed, memory_order_relaxed) &&
	       !atomic_load_explicit(&h->load, memory_order_relaxed);
}

struct td_ring_loop *td_ring_free_helper(struct td_fuse_uring *u, struct td_ring_loop *self)
{
	for (struct td_ring_loop *h = atomic_load(&u->helpers); h; h = h->next_helper)
		if (h != self && helper_free(h))
			return h;
	return start_helper(u);
}

/*
 * A free helper, else a new one, else (from a queue's loop, which must not
 * block) the least busy.
 */
struct td_ring_loop *td_ring_pick_helper(struct td_fuse_uring *u, struct td_ring_loop *self)
{
	struct td_ring_loop *h = td_ring_free_helper(u, self);
	struct td_ring_loop *best = NULL;
	unsigned int best_busy = UINT_MAX;

	if (h)
		return h;
	if (!self->home && u->p.blocking)
		return NULL;
	for (h = atomic_load(&u->helpers); h; h = h->next_helper) {
		unsigned int busy = atomic_load_explicit(&h->load, memory_order_relaxed) +
				    atomic_load_explicit(&h->armed, memory_order_relaxed);

		if (h != self && busy < best_busy) {
			best = h;
			best_busy = busy;
		}
	}
	return best;
}

void td_ring_hand_over(struct td_ring_loop *to, struct td_ring_ent *e)
{
	if (!to->home && !e->loaded) {
		e->loaded = true;
		atomic_fetch_add_explicit(&to->load, 1, memory_order_relaxed);
	}
	td_ring_set_owner(e, to);
	td_ring_push(to, &to->work_head, &to->work_tail, e);
}
