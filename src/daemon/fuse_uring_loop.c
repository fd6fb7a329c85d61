// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_uring_loop.c - FUSE over io_uring: the loop every ring thread runs.
 *
 * A loop submits its commands (REGISTER once, then COMMIT_AND_FETCH for each
 * reply), reaps what its ring completes - a request for an entry, or the end
 * of an entry's command - and processes the requests it keeps; large ones
 * go to helper loops (fuse_uring_helper.c), small ones arriving at a helper
 * go home to their queue's loop.
 *
 * Waking a loop's thread. A reply from another thread goes on the owner's
 * commit list, a hand-over on its work list (its mutex), and, when no wake-up
 * is already on its way, one eventfd write; the thread keeps a read of that
 * eventfd armed on its ring, so io_uring_submit_and_wait() returns. The
 * thread clears "on its way" each time it takes either list, so whatever is
 * pushed after a take writes again, and nothing pushed before it waits
 * through a sleep (commits are taken at the top of the loop). Replies made in
 * the loop's own thread go on a thread-local list and ride the next submit.
 * Only a loop's thread touches its submission queue.
 *
 * Memory. Entries are mapped, not filled: only the pages a request or its
 * reply touches become resident. An entry that held data is marked dirty,
 * and a loop idle for TD_URING_IDLE_TRIM_S gives the pages of its armed
 * entries back (td_ring_trim_idle), so an idle daemon's memory does not keep
 * entries x 1 MiB. How that stays safe against the kernel writing a request
 * into an armed entry at that very moment is told above td_ring_trim_idle().
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <linux/fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/fuse_uring_int.h"

/* The loop this thread runs, the entry whose request it is handling, its own replies. */
static _Thread_local struct td_ring_loop *tl_loop;
static _Thread_local struct td_ring_ent *tl_ent;
static _Thread_local struct td_ring_ent *tl_local_head;

/* ---- submissions (the loop's thread only) --------------------------------------------- */

static struct io_uring_sqe *get_sqe(struct td_ring_loop *l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		io_uring_submit(&l->ring);
		sqe = io_uring_get_sqe(&l->ring);
	}
	return sqe;
}

static void prep_cmd(struct td_ring_loop *l, struct td_ring_ent *e, enum td_fuse_uring_cmd op)
{
	struct io_uring_sqe *sqe = get_sqe(l);
	struct td_fuse_uring_cmd_req *req;

	assert(sqe); /* the ring holds an SQE for every entry it can own and the eventfd read */
	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: two slots */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = l->u->p.fuse_fd;
	sqe->cmd_op = op;
	sqe->addr = (uint64_t)(uintptr_t)e->iov;
	sqe->len = 2;
	req = (struct td_fuse_uring_cmd_req *)(void *)sqe->cmd;
	req->qid = (uint16_t)e->q->qid;
	req->commit_id = op == TD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? e->unique : 0;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)e);
	/* Until a request comes, its header keeps the last one's commit_id (fresh pages: 0). */
	e->armed_id = op == TD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? e->unique : 0;
	e->state = TD_ENT_ARMED;
	atomic_fetch_add_explicit(&l->armed, 1, memory_order_relaxed);
}

static void arm_eventfd(struct td_ring_loop *l)
{
	struct io_uring_sqe *sqe = get_sqe(l);

	assert(sqe);
	io_uring_prep_read(sqe, l->efd, &l->efd_buf, sizeof(l->efd_buf), 0);
	io_uring_sqe_set_data64(sqe, TD_URING_EFD_USER_DATA);
}

void td_ring_wake_locked(struct td_ring_loop *l, bool *wake)
{
	assert(td_lock_held(&l->lock));
	*wake = !l->wake_pending;
	l->wake_pending = true;
}

void td_ring_push(struct td_ring_loop *l, struct td_ring_ent **head, struct td_ring_ent **tail,
		  struct td_ring_ent *e)
{
	bool wake;

	td_mutex_lock(&l->lock);
	e->next = NULL;
	if (*tail)
		(*tail)->next = e;
	else
		*head = e;
	*tail = e;
	td_ring_wake_locked(l, &wake);
	td_mutex_unlock(&l->lock);
	if (wake)
		eventfd_write(l->efd, 1);
}

void td_ring_push_commit(struct td_ring_loop *l, struct td_ring_ent *e)
{
	td_ring_push(l, &l->commit_head, &l->commit_tail, e);
}

/*
 * Commit what was replied since the last submit. A helper already holding an
 * armed entry passes further commits to a free helper: whoever commits an
 * entry gets its next request (and the kernel's copy of it), and a helper
 * busy with one request would leave the next one waiting.
 */
static void prep_commits(struct td_ring_loop *l)
{
	struct td_ring_ent *remote;
	unsigned int done = 0;

	td_mutex_lock(&l->lock);
	remote = l->commit_head;
	l->commit_head = l->commit_tail = NULL;
	l->wake_pending = false;
	td_mutex_unlock(&l->lock);

	for (int pass = 0; pass < 2; pass++) {
		struct td_ring_ent *e = pass ? remote : tl_local_head;

		if (!pass)
			tl_local_head = NULL;
		while (e) {
			struct td_ring_ent *next = e->next;
			struct td_ring_loop *to;

			e->next = NULL;
			if (e->loaded) {
				e->loaded = false;
				done++;
			}
			if (!l->home && !e->passed &&
			    atomic_load_explicit(&l->armed, memory_order_relaxed) &&
			    (to = td_ring_free_helper(l->u, l))) {
				e->passed = true;
				td_ring_set_owner(e, to);
				td_ring_push_commit(to, e);
			} else {
				e->passed = false;
				l->maybe_dirty |= e->dirty;
				prep_cmd(l, e, TD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
			}
			e = next;
		}
	}
	if (done)
		atomic_fetch_sub_explicit(&l->load, done, memory_order_relaxed);
}

/* ---- requests --------------------------------------------------------------------------- */

/* Reply @error to the request in @e without data (a malformed request). */
static void reply_error(struct td_ring_ent *e, int error)
{
	struct fuse_out_header *oh = (void *)e->hdr->in_out;

	oh->len = sizeof(*oh);
	oh->error = -error;
	oh->unique = e->unique;
	e->hdr->ring_ent_in_out.payload_sz = 0;
	e->next = tl_local_head;
	tl_local_head = e;
}

static void process(struct td_ring_loop *l, struct td_ring_ent *e)
{
	if (atomic_load(&l->u->holding)) {
		e->state = TD_ENT_HELD; /* the kernel ends it when the connection goes */
		return;
	}
	tl_ent = e;
	l->u->p.process(l->u->p.arg, e->work_start, e->work_len);
	tl_ent = NULL;
}

/*
 * A request arrived on @l's ring for @e: rebuild it before the payload, then
 * decide where it runs. Small requests run in their queue's loop (an entry a
 * helper held goes home first); large ones in a helper, which keeps the entry
 * while they keep coming. What runs here goes on @todo, run once the
 * completions are all seen (so that the others can be handed over first).
 */
static void receive(struct td_ring_loop *l, struct td_ring_ent *e, struct td_ring_ent ***todo)
{
	struct td_fuse_uring *u = l->u;
	struct td_ring_queue *q = e->q;
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;
	size_t payload = e->hdr->ring_ent_in_out.payload_sz;
	size_t len = in->len;

	e->unique = in->unique;
	e->state = TD_ENT_PROCESSING;
	if (payload)
		e->dirty = true;
	atomic_fetch_add_explicit(&q->requests, 1, memory_order_relaxed);
	if (len < sizeof(*in) + payload || payload > u->p.payload_bytes ||
	    len - sizeof(*in) - payload > TD_FUSE_URING_OP_IN_OUT_SZ) {
		td_warnx("fuse: ring %u: malformed request (opcode %u, len %zu, payload %zu)",
			 q->qid, in->opcode, len, payload);
		reply_error(e, EIO);
		return;
	}
	size_t op_len = len - sizeof(*in) - payload;
	char *start = e->payload - sizeof(*in) - op_len;
	struct fuse_in_header *copy = (void *)start;

	memcpy(start, in, sizeof(*in));
	memcpy(start + sizeof(*in), e->hdr->op_in, op_len);
	copy->unique = td_ring_ent_tag(e);
	e->work_start = start;
	e->work_len = len;

	struct td_ring_loop *to = l;

	if (!u->p.helpers || atomic_load(&u->holding)) {
		to = l;
	} else if (td_ring_wants_helper(u, copy)) {
		if (l->home || atomic_load_explicit(&l->load, memory_order_relaxed) ||
		    atomic_load_explicit(&l->armed, memory_order_relaxed)) {
			struct td_ring_loop *h = td_ring_pick_helper(u, l);

			if (h)
				to = h;
		}
	} else if (!l->home) {
		to = &q->loop;
	}
	if (to != l) {
		td_ring_hand_over(to, e);
		return;
	}
	if (!l->home && !e->loaded) {
		e->loaded = true;
		atomic_fetch_add_explicit(&l->load, 1, memory_order_relaxed);
	}
	e->next = NULL;
	**todo = e;
	*todo = &e->next;
}

bool td_fuse_uring_data_pinned(const void *data, size_t len)
{
	const struct td_ring_ent *e = tl_ent;
	const char *p = data;

	return e && p >= e->payload && len <= e->q->u->p.payload_bytes &&
	       (size_t)(p - e->payload) <= e->q->u->p.payload_bytes - len;
}

void *td_fuse_uring_reply_space(size_t len)
{
	struct td_ring_ent *e = tl_ent;

	return e && len <= e->q->u->p.payload_bytes ? e->payload : NULL;
}

ssize_t td_fuse_uring_reply(struct td_fuse_uring *u, const struct iovec *iov, int count)
{
	const struct fuse_out_header *in_oh = iov[0].iov_base;
	struct td_ring_ent *e;
	size_t total = 0;

	if (count < 1 || iov[0].iov_len < sizeof(*in_oh) ||
	    !(e = td_ring_tag_ent(u, in_oh->unique)) || e->state != TD_ENT_PROCESSING) {
		errno = EINVAL;
		return -1;
	}
	struct td_ring_loop *l = td_ring_ent_owner(e);
	int error = in_oh->error;

	for (int i = 1; i < count && !error; i++) {
		/* max_write and max_read (the INIT reply) bound every reply's data. */
		if (iov[i].iov_len > u->p.payload_bytes - total) {
			td_warnx("fuse: ring %u: a reply of more than %zu bytes: failed with EIO",
				 e->q->qid, u->p.payload_bytes);
			error = -EIO;
			break;
		}
		if (iov[i].iov_base != e->payload + total)
			memmove(e->payload + total, iov[i].iov_base, iov[i].iov_len);
		total += iov[i].iov_len;
	}
	if (error)
		total = 0;

	struct fuse_out_header *oh = (void *)e->hdr->in_out;

	oh->len = (uint32_t)(sizeof(*oh) + total);
	oh->error = error;
	oh->unique = e->unique;
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)total;
	e->dirty = true; /* a read may have filled the payload, even if it then failed */

	if (tl_loop == l) {
		e->next = tl_local_head;
		tl_local_head = e;
	} else {
		td_ring_push_commit(l, e);
	}
	return (ssize_t)(sizeof(*oh) + total);
}

/* ---- giving pages back ----------------------------------------------------------------- */

/*
 * Give back the pages of @e, ARMED and owned by the calling loop, without
 * losing a request the kernel may have written into it. Return: false when
 * the pages could not be given back (they stay; a later idle period retries).
 *
 * The kernel writes a request into an armed entry - payload, then the ring
 * header with the request's commit_id - in one piece of work that runs in
 * this thread only (the fetch inside our own submit, or the task work that
 * hands a request to an armed entry), and task work runs whenever this
 * thread returns to user space: after any system call, or an interrupt. So
 * at no moment can we know the entry is still empty, and plain discarding
 * (a fresh mapping over it, MADV_DONTNEED) could throw away a request that
 * arrived an instant before, leaving its header to describe a payload of
 * zeros - a write acknowledged and never stored.
 *
 * Instead the pages are moved away, whole, by one mremap(MREMAP_DONTUNMAP):
 * the range stays mapped, empty, and the kernel's write lands either before
 * the move (it travels with the pages) or after it (into fresh pages in
 * place), never half in each, since no task work runs inside a system call.
 * The headers say which: a request written after the move shows in the
 * fresh header; one written before shows in the moved header as a
 * commit_id other than the one the entry was armed with. Only in that last
 * case are header and payload copied back, before anyone reads them (the
 * entry's completion is reaped after this returns, by this thread).
 */
static bool trim_ent(struct td_fuse_uring *u, struct td_ring_ent *e)
{
	size_t len = TD_URING_SCRATCH_BYTES + u->p.payload_bytes;
	uint64_t armed_id = e->armed_id;
	/*
	 * The fifth argument too, though unused without MREMAP_FIXED: glibc
	 * passes whatever is there, and the kernel refuses a stray address.
	 */
	void *moved = mremap(e->map, len, len, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);

	if (moved == MAP_FAILED)
		return false;

	const struct td_fuse_uring_req_header *old = moved;

	if (e->hdr->ring_ent_in_out.commit_id) {
		/* Written after the move, in place: nothing to do. */
		e->dirty = true;
	} else if (old->ring_ent_in_out.commit_id != armed_id) {
		/* Written before the move: bring it back. */
		size_t payload = TD_MIN((size_t)old->ring_ent_in_out.payload_sz, u->p.payload_bytes);

		memcpy(e->map, moved, TD_URING_SCRATCH_BYTES + payload);
		e->dirty = true;
	} else {
		/* Still empty; its fresh header shows commit_id 0 until a request comes. */
		e->armed_id = 0;
		e->dirty = false;
	}
	munmap(moved, len);
	atomic_fetch_add_explicit(&u->trims, 1, memory_order_relaxed);
	if (e->dirty)
		atomic_fetch_add_explicit(&u->trim_kept, 1, memory_order_relaxed);
	return true;
}

bool td_ring_trim_idle(struct td_ring_loop *l)
{
	struct td_fuse_uring *u = l->u;
	bool left = false;

	for (unsigned int qi = 0; qi < u->nr_queues; qi++) {
		for (unsigned int i = 0; i < u->p.nr_entries; i++) {
			struct td_ring_ent *e = &u->queues[qi].ents[i];

			if (td_ring_ent_owner(e) != l || e->state == TD_ENT_DEAD)
				continue;
			if (e->state != TD_ENT_ARMED) {
				left = true; /* its replier may be marking it dirty now */
				continue;
			}
			if (e->dirty && !trim_ent(u, e))
				left = true;
		}
	}
	return left;
}

/* ---- the loop --------------------------------------------------------------------------- */

/* An entry's command ended with @res < 0: unmount, exit, or a refused command. */
static void ent_ended(struct td_ring_loop *l, struct td_ring_ent *e, int res)
{
	struct td_ring_queue *q = e->q;

	if (e->state == TD_ENT_DEAD)
		return;
	e->state = TD_ENT_DEAD;
	unsigned int left = atomic_fetch_sub(&q->nr_live, 1) - 1;

	if (res != -ENOTCONN && res != -ECANCELED && res != -ECONNABORTED &&
	    left + 1 == l->u->p.nr_entries)
		td_warnx("fuse: ring %u: entry ended: %s; requests go through /dev/fuse", q->qid,
			 strerror(-res));
}

/*
 * A queue's loop: wait for td_fuse_uring_start(), register every entry, and
 * report whether the kernel refused any (a refusal completes at once, while
 * the submit runs). Return: false when the loop is to end without serving.
 */
static bool register_entries(struct td_ring_loop *l)
{
	struct td_fuse_uring *u = l->u;
	struct td_ring_queue *q = l->home;
	struct io_uring_cqe *cqe;
	unsigned int head;
	int err = 0, ret;

	td_mutex_lock(&u->start_lock);
	while (!u->go && !atomic_load(&u->exiting))
		td_cond_wait(&u->start_cond, &u->start_lock);
	td_mutex_unlock(&u->start_lock);
	if (atomic_load(&u->exiting))
		return false;

	/* Every entry first: the ring serves once every queue has some. */
	for (unsigned int i = 0; i < u->p.nr_entries; i++) {
		td_ring_set_owner(&q->ents[i], l);
		prep_cmd(l, &q->ents[i], TD_FUSE_IO_URING_CMD_REGISTER);
	}
	atomic_store(&q->nr_live, u->p.nr_entries);
	arm_eventfd(l);
	ret = io_uring_submit(&l->ring);
	if (ret < 0)
		err = ret;
	/* Look without reaping: the loop reaps (and counts) them. */
	io_uring_for_each_cqe(&l->ring, head, cqe) {
		if (cqe->user_data != TD_URING_EFD_USER_DATA && cqe->res < 0 && !err)
			err = cqe->res;
	}
	td_mutex_lock(&u->start_lock);
	u->registered++;
	if (err && !u->start_err)
		u->start_err = err;
	td_cond_broadcast(&u->start_cond);
	td_mutex_unlock(&u->start_lock);
	return true;
}

/* Return: whether @ret from submitting or waiting is one to retry rather than give up on. */
static bool transient(int ret)
{
	return ret == -EINTR || ret == -EAGAIN || ret == -EBUSY || ret == -ENOMEM ||
	       ret == -ETIME;
}

void *td_ring_loop_thread(void *arg)
{
	struct td_ring_loop *l = arg;
	struct td_fuse_uring *u = l->u;
	struct td_ring_queue *q = l->home;
	unsigned int failures = 0;
	char name[16];
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	tl_loop = l;
	if (q) {
		cpu_set_t cpus;

		snprintf(name, sizeof(name), "td-ring%u", q->qid);
		td_thread_name(name);
		CPU_ZERO(&cpus);
		CPU_SET(q->qid, &cpus);
		/* An offline CPU's queue still needs entries: it then runs anywhere. */
		(void)pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
		if (!register_entries(l))
			return NULL;
	} else {
		td_thread_name("td-ring-io");
		arm_eventfd(l);
	}

	while (!atomic_load(&u->exiting)) {
		int ret;

		prep_commits(l);
		if (l->maybe_dirty) {
			struct __kernel_timespec ts = { .tv_sec = TD_URING_IDLE_TRIM_S };
			struct io_uring_cqe *first;

			ret = io_uring_submit(&l->ring);
			if (ret >= 0)
				ret = io_uring_wait_cqe_timeout(&l->ring, &first, &ts);
			if (ret == -ETIME) {
				l->maybe_dirty = td_ring_trim_idle(l);
				continue;
			}
		} else {
			ret = io_uring_submit_and_wait(&l->ring, 1);
		}
		if (ret < 0 && !transient(ret)) {
			/*
			 * The ring cannot be waited on: its entries and the requests in
			 * them would hang until unmount. Say so, and let the owner stop.
			 */
			td_err("fuse: ring %s%u: %s; stopping", q ? "" : "helper ",
			       q ? q->qid : 0, strerror(-ret));
			atomic_store(&u->failed, true);
			if (u->p.failed)
				u->p.failed(u->p.arg);
			break;
		}
		if (ret == -ENOMEM && ++failures % 1000 == 1)
			td_warnx("fuse: ring %s%u: %s; retrying", q ? "" : "helper ", q ? q->qid : 0,
				 strerror(-ret));
		if (ret == -ENOMEM) {
			struct timespec ts = { .tv_nsec = 1000000 };

			nanosleep(&ts, NULL);
		}

		struct io_uring_cqe *cqe;
		struct td_ring_ent *todo = NULL, **tail = &todo;
		unsigned int head, seen = 0;

		io_uring_for_each_cqe(&l->ring, head, cqe) {
			seen++;
			if (cqe->user_data == TD_URING_EFD_USER_DATA) {
				if (!atomic_load(&u->exiting))
					arm_eventfd(l);
				continue;
			}
			struct td_ring_ent *e = (void *)(uintptr_t)cqe->user_data;

			atomic_fetch_sub_explicit(&l->armed, 1, memory_order_relaxed);
			if (cqe->res == 0)
				receive(l, e, &tail);
			else
				ent_ended(l, e, cqe->res);
		}
		io_uring_cq_advance(&l->ring, seen);

		/*
		 * A hand-over from now on must wake us again: one that came while we
		 * run these would otherwise find the flag still set by the one that
		 * woke us, write nothing, and wait on our list until some other
		 * event came (at the end of a job, none does). Commits pushed before
		 * the clear are taken at the top of the loop, before any wait.
		 */
		td_mutex_lock(&l->lock);
		*tail = l->work_head;
		l->work_head = l->work_tail = NULL;
		l->wake_pending = false;
		td_mutex_unlock(&l->lock);
		while (todo) {
			struct td_ring_ent *e = todo;

			todo = e->next;
			e->next = NULL;
			process(l, e);
		}
	}
	return NULL;
}
