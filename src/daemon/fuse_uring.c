// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse_uring.c - FUSE over io_uring: one ring queue per CPU.
 *
 * Entry. One anonymous mapping: a page of scratch, then the payload. The
 * scratch page holds the 288-byte ring header at its start; when a request
 * arrives, its fuse_in_header and first argument are copied to the bytes just
 * before the payload, so header, arguments and payload are contiguous as a
 * /dev/fuse read would give them, and a write's data is used in place.
 *
 * Loops. Every thread here runs a loop around its own io_uring: one per
 * queue (pinned to the queue's CPU; it registers the queue's entries) and
 * helpers started on demand. The kernel does not tie an entry to the ring
 * that registered it: a COMMIT_AND_FETCH names the queue and the request,
 * and whichever ring issues it gets the entry's next request. So an entry
 * belongs to the loop that issued its last command, and the kernel's work
 * for it - copying a read's reply into the reader's pages at the commit, a
 * write's payload into the entry in the task work of the fetch - runs in
 * that loop's thread.
 *
 * Why helpers: with one submitting process every request lands on one
 * queue. Had its thread to commit everything, the 1 MiB copies of sequential
 * I/O would run one after another on one CPU (the classic transport spreads
 * them over its reader threads). A request of 64 KiB and more is handed to a
 * helper (an idle one, else a new one), which processes it, commits it from
 * its own ring and so keeps the entry: the following large requests on that
 * entry arrive at the helper directly. A small request arriving at a helper
 * goes back to its queue's loop, which keeps its entries while requests are
 * small (per-CPU, cheaper than a hand-over).
 *
 * States of an entry, all changed by its owner's thread except PROCESSING ->
 * replied (any thread, through the owner's commit list):
 *
 *   ARMED --CQE res 0--> PROCESSING --reply--> on a commit list --SQE--> ARMED
 *   PROCESSING --hand-over--> PROCESSING in another loop (owner changed)
 *   ARMED --CQE res < 0--> DEAD (unmount: -ENOTCONN; daemon exit: -ECANCELED)
 *   PROCESSING, while held (stopping) --> HELD: never committed; the kernel
 *                                         ends its request when the connection goes
 *
 * Waking a loop's thread. A reply from another thread goes on the owner's
 * commit list, a hand-over on its work list (its mutex), and, when no wake-up
 * is already on its way, one eventfd write; the thread keeps a read of that
 * eventfd armed on its ring, so io_uring_submit_and_wait() returns. The
 * thread clears "on its way" each time it takes either list, so whatever is
 * pushed after a take writes again, and nothing pushed before it waits
 * through a sleep (commits are taken at the top of the loop). Replies
 * made in the loop's own thread go on a thread-local list and ride the next
 * submit. Only a loop's thread touches its submission queue.
 *
 * Memory. Entries are mapped, not filled: only the pages a request or its
 * reply touches become resident. An entry that held data is marked dirty,
 * and a loop idle for IDLE_TRIM_S gives its armed entries' pages back
 * (trim_idle), so an idle daemon's RSS does not keep entries x 1 MiB.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common/lock.h"
#include "common/log.h"
#include "daemon/fuse_uring.h"
#include "daemon/fuse_uring_abi.h"

#define SCRATCH_BYTES 4096U
#define TAG_BIT	      (1ULL << 63)
#define EFD_USER_DATA 1ULL /* the eventfd read's user_data (entries are pointers) */
#define THREAD_STACK  (512U << 10)
#define IDLE_TRIM_S   1	    /* an idle loop gives back its entries' payload pages after this */
#define OFFLOAD_MIN   (64U << 10) /* I/O this large goes to a helper */

_Static_assert(sizeof(struct td_fuse_uring_req_header) + sizeof(struct fuse_in_header) +
		       TD_FUSE_URING_OP_IN_OUT_SZ <=
		   SCRATCH_BYTES,
	       "the scratch page holds the ring header and a rebuilt request header");

enum ent_state {
	ENT_ARMED,
	ENT_PROCESSING,
	ENT_HELD,
	ENT_DEAD,
};

struct ring_loop;

struct ring_ent {
	struct ring_queue *q; /* the kernel's queue: its qid goes in every command */
	unsigned int idx;
	/*
	 * The loop whose ring issued the entry's command, or that will commit it:
	 * set by the loop handing it over while PROCESSING (release), read by any
	 * replier and by the owner's idle trim (acquire).
	 */
	struct ring_loop *_Atomic owner;
	enum ent_state state; /* the owner's thread, except while PROCESSING (the replier) */
	uint64_t unique;      /* the kernel's, for the commit */
	void *map;
	struct td_fuse_uring_req_header *hdr;
	char *payload;
	struct iovec iov[2];
	struct ring_ent *next; /* on a commit, work or to-do list */
	bool dirty;	       /* its payload holds pages: written before the commit is queued */
	bool loaded;	       /* counted in its owner's load */
	bool passed;	       /* its commit was passed to an idle helper: commit it there */
	size_t work_len;       /* the rebuilt request, handed between loops */
	char *work_start;
};

/*
 * A thread with its own io_uring: a queue's thread (pinned, registers the
 * queue's entries) or a helper (started on demand). An entry belongs to the
 * loop whose ring issued its command, so the kernel's copies for it - the
 * reply's payload into the reader's pages at the commit, the next request's
 * payload into the entry in the task work - run in that loop's thread.
 */
struct ring_loop {
	struct td_fuse_uring *u;
	struct ring_queue *home; /* a queue's loop; NULL for a helper */
	struct ring_loop *next_helper;
	struct io_uring ring;
	bool ring_ok;
	pthread_t tid;
	bool started;
	int efd;
	uint64_t efd_buf;
	bool maybe_dirty; /* the thread: an entry it owns may hold payload pages to give back */

	struct td_mutex lock;
	struct ring_ent *commit_head; /* lock: replied from other threads */
	struct ring_ent *commit_tail; /* lock */
	struct ring_ent *work_head;   /* lock: requests handed to this loop */
	struct ring_ent *work_tail;   /* lock */
	bool wake_pending;	      /* lock: an eventfd write is on its way */

	_Atomic unsigned int load;  /* helpers: requests taken and not yet committed */
	_Atomic unsigned int armed; /* commands this ring holds (entries it owns, armed) */
};

struct ring_queue {
	struct td_fuse_uring *u;
	unsigned int qid;
	struct ring_loop loop;
	struct ring_ent *ents;
	_Atomic unsigned int nr_live; /* entries not DEAD */
	_Atomic uint64_t requests;
};

struct td_fuse_uring {
	struct td_fuse_uring_params p;
	unsigned int nr_queues;
	struct ring_queue *queues;
	_Atomic bool holding;
	_Atomic bool exiting;

	cpu_set_t cpus; /* the process's CPUs, for helpers (started by pinned threads) */
	struct td_mutex helper_lock;	      /* serialises starting helpers */
	struct ring_loop *_Atomic helpers;    /* pushed at the head, never removed until destroy */
	_Atomic unsigned int nr_helpers;
};

/* The loop this thread runs, the entry whose request it is handling, its own replies. */
static _Thread_local struct ring_loop *tl_loop;
static _Thread_local struct ring_ent *tl_ent;
static _Thread_local struct ring_ent *tl_local_head;

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

static uint64_t ent_tag(const struct ring_ent *e)
{
	return TAG_BIT | ((uint64_t)e->q->qid << 32) | e->idx;
}

bool td_fuse_uring_owns(uint64_t unique)
{
	return (unique & TAG_BIT) != 0;
}

static struct ring_ent *tag_ent(struct td_fuse_uring *u, uint64_t tag)
{
	unsigned int qid = (unsigned int)((tag >> 32) & 0x7fffffffU);
	unsigned int idx = (unsigned int)(tag & 0xffffffffU);

	if (!(tag & TAG_BIT) || qid >= u->nr_queues || idx >= u->p.nr_entries)
		return NULL;
	return &u->queues[qid].ents[idx];
}

static struct ring_loop *ent_owner(struct ring_ent *e)
{
	return atomic_load_explicit(&e->owner, memory_order_acquire);
}

static void set_owner(struct ring_ent *e, struct ring_loop *l)
{
	atomic_store_explicit(&e->owner, l, memory_order_release);
}

/* ---- submissions (the loop's thread only) --------------------------------------------- */

static struct io_uring_sqe *get_sqe(struct ring_loop *l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		io_uring_submit(&l->ring);
		sqe = io_uring_get_sqe(&l->ring);
	}
	return sqe;
}

static void prep_cmd(struct ring_loop *l, struct ring_ent *e, enum td_fuse_uring_cmd op)
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
	e->state = ENT_ARMED;
	atomic_fetch_add_explicit(&l->armed, 1, memory_order_relaxed);
}

static void arm_eventfd(struct ring_loop *l)
{
	struct io_uring_sqe *sqe = get_sqe(l);

	assert(sqe);
	io_uring_prep_read(sqe, l->efd, &l->efd_buf, sizeof(l->efd_buf), 0);
	io_uring_sqe_set_data64(sqe, EFD_USER_DATA);
}

/* Wake @l's thread (a write to its eventfd) unless a wake-up is already on its way. */
static void wake_locked(struct ring_loop *l, bool *wake)
{
	*wake = !l->wake_pending;
	l->wake_pending = true;
}

/* Put the replied @e on @l's commit list (another thread than @l's). */
static void push_commit(struct ring_loop *l, struct ring_ent *e)
{
	bool wake;

	td_mutex_lock(&l->lock);
	e->next = NULL;
	if (l->commit_tail)
		l->commit_tail->next = e;
	else
		l->commit_head = e;
	l->commit_tail = e;
	wake_locked(l, &wake);
	td_mutex_unlock(&l->lock);
	if (wake)
		eventfd_write(l->efd, 1);
}

static struct ring_loop *free_helper(struct td_fuse_uring *u, struct ring_loop *self);

/*
 * Commit what was replied since the last submit. A helper already holding an
 * armed entry passes further commits to a free helper: whoever commits an
 * entry gets its next request (and the kernel's copy of it), and a helper
 * busy with one request would leave the next one waiting.
 */
static void prep_commits(struct ring_loop *l)
{
	struct ring_ent *remote;
	unsigned int done = 0;

	td_mutex_lock(&l->lock);
	remote = l->commit_head;
	l->commit_head = l->commit_tail = NULL;
	l->wake_pending = false;
	td_mutex_unlock(&l->lock);

	for (int pass = 0; pass < 2; pass++) {
		struct ring_ent *e = pass ? remote : tl_local_head;

		if (!pass)
			tl_local_head = NULL;
		while (e) {
			struct ring_ent *next = e->next;
			struct ring_loop *to;

			e->next = NULL;
			if (e->loaded) {
				e->loaded = false;
				done++;
			}
			if (!l->home && !e->passed &&
			    atomic_load_explicit(&l->armed, memory_order_relaxed) &&
			    (to = free_helper(l->u, l))) {
				e->passed = true;
				set_owner(e, to);
				push_commit(to, e);
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

/* ---- helpers ---------------------------------------------------------------------------- */

/*
 * Does this request go to a helper? Flushes and fallocates may block long
 * (when the handlers block); reads and writes of OFFLOAD_MIN bytes and more
 * carry copies worth another CPU: the handler's, and the kernel's at the
 * commit and the fetch, which run in the thread whose ring holds the entry.
 * Small ones cost less inline than the hand-over (a wake-up and a context
 * switch).
 */
static bool wants_helper(const struct td_fuse_uring *u, const struct fuse_in_header *in)
{
	const void *arg = in + 1;

	switch (in->opcode) {
	case FUSE_FSYNC:
	case FUSE_FALLOCATE:
		return u->p.blocking;
	case FUSE_READ:
		return in->len >= sizeof(*in) + sizeof(struct fuse_read_in) &&
		       ((const struct fuse_read_in *)arg)->size >= OFFLOAD_MIN;
	case FUSE_WRITE:
		return in->len >= sizeof(*in) + sizeof(struct fuse_write_in) &&
		       ((const struct fuse_write_in *)arg)->size >= OFFLOAD_MIN;
	default:
		return false;
	}
}

static void *loop_thread(void *arg);
static int loop_init(struct ring_loop *l, unsigned int sqes, char *err, size_t errlen);
static void loop_fini(struct ring_loop *l);

/* Start one more helper, unless p.helpers are running. Return: it, or NULL. */
static struct ring_loop *start_helper(struct td_fuse_uring *u)
{
	struct ring_loop *h = NULL;
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
	if (loop_init(h, u->nr_queues * u->p.nr_entries + 1, err, sizeof(err))) {
		td_warnx("fuse: ring helper: %s", err);
		loop_fini(h);
		free(h);
		h = NULL;
		goto out;
	}
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	/*
	 * A thread inherits its creator's CPUs, and a queue's thread is pinned:
	 * without this every helper would share that one CPU.
	 */
	pthread_attr_setaffinity_np(&attr, sizeof(u->cpus), &u->cpus);
	if (pthread_create(&h->tid, &attr, loop_thread, h)) {
		pthread_attr_destroy(&attr);
		loop_fini(h);
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

static bool helper_free(struct ring_loop *h)
{
	return !atomic_load_explicit(&h->armed, memory_order_relaxed) &&
	       !atomic_load_explicit(&h->load, memory_order_relaxed);
}

/* A helper other than @self holding no entry and no request, else a new one, else NULL. */
static struct ring_loop *free_helper(struct td_fuse_uring *u, struct ring_loop *self)
{
	for (struct ring_loop *h = atomic_load(&u->helpers); h; h = h->next_helper)
		if (h != self && helper_free(h))
			return h;
	return start_helper(u);
}

/*
 * A helper for one more request, other than @self: a free one, else a new
 * one, else (from a queue's loop, which must not block) the least busy.
 * Return: NULL when @self should keep it.
 */
static struct ring_loop *pick_helper(struct td_fuse_uring *u, struct ring_loop *self)
{
	struct ring_loop *h = free_helper(u, self);
	struct ring_loop *best = NULL;
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

/* Hand the request in @e (rebuilt at work_start) to @to's thread. */
static void hand_over(struct ring_loop *to, struct ring_ent *e)
{
	bool wake;

	if (!to->home && !e->loaded) {
		e->loaded = true;
		atomic_fetch_add_explicit(&to->load, 1, memory_order_relaxed);
	}
	set_owner(e, to);
	td_mutex_lock(&to->lock);
	e->next = NULL;
	if (to->work_tail)
		to->work_tail->next = e;
	else
		to->work_head = e;
	to->work_tail = e;
	wake_locked(to, &wake);
	td_mutex_unlock(&to->lock);
	if (wake)
		eventfd_write(to->efd, 1);
}

/* ---- requests --------------------------------------------------------------------------- */

/* Reply @error to the request in @e without data (a malformed request). */
static void reply_error(struct ring_ent *e, int error)
{
	struct fuse_out_header *oh = (void *)e->hdr->in_out;

	oh->len = sizeof(*oh);
	oh->error = -error;
	oh->unique = e->unique;
	e->hdr->ring_ent_in_out.payload_sz = 0;
	e->next = tl_local_head;
	tl_local_head = e;
}

static void process(struct ring_loop *l, struct ring_ent *e)
{
	if (atomic_load(&l->u->holding)) {
		e->state = ENT_HELD; /* the kernel ends it when the connection goes */
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
static void receive(struct ring_loop *l, struct ring_ent *e, struct ring_ent ***todo)
{
	struct td_fuse_uring *u = l->u;
	struct ring_queue *q = e->q;
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;
	size_t payload = e->hdr->ring_ent_in_out.payload_sz;
	size_t len = in->len;

	e->unique = in->unique;
	e->state = ENT_PROCESSING;
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
	copy->unique = ent_tag(e);
	e->work_start = start;
	e->work_len = len;

	struct ring_loop *to = l;

	if (!u->p.helpers || atomic_load(&u->holding)) {
		to = l;
	} else if (wants_helper(u, copy)) {
		if (l->home || atomic_load_explicit(&l->load, memory_order_relaxed) ||
		    atomic_load_explicit(&l->armed, memory_order_relaxed)) {
			struct ring_loop *h = pick_helper(u, l);

			if (h)
				to = h;
		}
	} else if (!l->home) {
		to = &q->loop;
	}
	if (to != l) {
		hand_over(to, e);
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
	const struct ring_ent *e = tl_ent;
	const char *p = data;

	return e && p >= e->payload && len <= e->q->u->p.payload_bytes &&
	       (size_t)(p - e->payload) <= e->q->u->p.payload_bytes - len;
}

void *td_fuse_uring_reply_space(size_t len)
{
	struct ring_ent *e = tl_ent;

	return e && len <= e->q->u->p.payload_bytes ? e->payload : NULL;
}

ssize_t td_fuse_uring_reply(struct td_fuse_uring *u, const struct iovec *iov, int count)
{
	const struct fuse_out_header *in_oh = iov[0].iov_base;
	struct ring_ent *e;
	size_t total = 0;

	if (count < 1 || iov[0].iov_len < sizeof(*in_oh) || !(e = tag_ent(u, in_oh->unique)) ||
	    e->state != ENT_PROCESSING) {
		errno = EINVAL;
		return -1;
	}
	struct ring_loop *l = ent_owner(e);
	int error = in_oh->error;

	for (int i = 1; i < count && !error; i++) {
		if (iov[i].iov_len > u->p.payload_bytes - total) {
			error = -EIO; /* cannot happen: max_write bounds every reply */
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
		push_commit(l, e);
	}
	return (ssize_t)(sizeof(*oh) + total);
}

/* ---- the loops -------------------------------------------------------------------------- */

/*
 * The loop has been idle for IDLE_TRIM_S: give back the payload pages of the
 * armed entries it owns (a 1 MiB request leaves 1 MiB resident, locked under
 * mlockall), so an idle daemon's memory does not grow with the entries. Safe
 * for ARMED entries this loop owns only, because the kernel writes a request
 * into an entry from the owner's own task work (fuse_uring_send_in_task) or
 * its own submit: never while it runs here. A fresh anonymous mapping over
 * the payload frees the pages and, under mlockall(MCL_FUTURE), is locked on
 * fault like the rest (madvise(MADV_DONTNEED) is refused on locked memory).
 */
static void trim_idle(struct ring_loop *l)
{
	struct td_fuse_uring *u = l->u;
	size_t len = u->p.payload_bytes;
	bool left = false;

	for (unsigned int qi = 0; qi < u->nr_queues; qi++) {
		for (unsigned int i = 0; i < u->p.nr_entries; i++) {
			struct ring_ent *e = &u->queues[qi].ents[i];

			if (ent_owner(e) != l || e->state == ENT_DEAD)
				continue;
			if (e->state != ENT_ARMED) {
				left = true; /* its replier may be marking it dirty now */
				continue;
			}
			if (!e->dirty)
				continue;
			if (mmap(e->payload, len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
				left = true;
			else
				e->dirty = false;
		}
	}
	l->maybe_dirty = left;
}

/* An entry's command ended with @res < 0: unmount, exit, or a refused command. */
static void ent_ended(struct ring_loop *l, struct ring_ent *e, int res)
{
	struct ring_queue *q = e->q;

	if (e->state == ENT_DEAD)
		return;
	e->state = ENT_DEAD;
	unsigned int left = atomic_fetch_sub(&q->nr_live, 1) - 1;

	if (res != -ENOTCONN && res != -ECANCELED && res != -ECONNABORTED &&
	    left + 1 == l->u->p.nr_entries)
		td_warnx("fuse: ring %u: entry ended: %s; requests go through /dev/fuse", q->qid,
			 strerror(-res));
}

static void *loop_thread(void *arg)
{
	struct ring_loop *l = arg;
	struct td_fuse_uring *u = l->u;
	struct ring_queue *q = l->home;
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

		/* Register every entry first: the ring serves once all queues have some. */
		for (unsigned int i = 0; i < u->p.nr_entries; i++) {
			set_owner(&q->ents[i], l);
			prep_cmd(l, &q->ents[i], TD_FUSE_IO_URING_CMD_REGISTER);
		}
		atomic_store(&q->nr_live, u->p.nr_entries);
	} else {
		td_thread_name("td-ring-io");
	}
	arm_eventfd(l);

	while (!atomic_load(&u->exiting)) {
		int ret;

		prep_commits(l);
		if (l->maybe_dirty) {
			struct __kernel_timespec ts = { .tv_sec = IDLE_TRIM_S };
			struct io_uring_cqe *first;

			ret = io_uring_submit(&l->ring);
			if (ret >= 0)
				ret = io_uring_wait_cqe_timeout(&l->ring, &first, &ts);
			if (ret == -ETIME) {
				trim_idle(l);
				continue;
			}
		} else {
			ret = io_uring_submit_and_wait(&l->ring, 1);
		}
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			td_warnx("fuse: ring %s%u: %s", q ? "" : "helper ", q ? q->qid : 0,
				 strerror(-ret));
			break;
		}
		struct io_uring_cqe *cqe;
		struct ring_ent *todo = NULL, **tail = &todo;
		unsigned int head, seen = 0;

		io_uring_for_each_cqe(&l->ring, head, cqe) {
			seen++;
			if (cqe->user_data == EFD_USER_DATA) {
				if (!atomic_load(&u->exiting))
					arm_eventfd(l);
				continue;
			}
			struct ring_ent *e = (void *)(uintptr_t)cqe->user_data;

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
			struct ring_ent *e = todo;

			todo = e->next;
			e->next = NULL;
			process(l, e);
		}
	}
	return NULL;
}

/* ---- creation --------------------------------------------------------------------------- */

/*
 * A loop's ring (SQE128) with room for @sqes commands, its eventfd and lock.
 *
 * Not SINGLE_ISSUER + DEFER_TASKRUN (enabled by the loop's thread), though
 * measured: deferring the task work that hands a request to an entry until
 * the thread next waits raised one fio job's 4k QD32 IOPS by 20-25% (its
 * CPU is the queue thread's), but cost 15% of 4k randread QD32 through a
 * direct-I/O loop device (CPU per I/O 3.9 -> 4.5 us), the more common way
 * to use the disk; two fio jobs were level.
 */
static int loop_init(struct ring_loop *l, unsigned int sqes, char *err, size_t errlen)
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

static void loop_fini(struct ring_loop *l)
{
	if (l->ring_ok)
		io_uring_queue_exit(&l->ring);
	l->ring_ok = false;
	if (l->efd >= 0)
		close(l->efd);
	l->efd = -1;
	td_mutex_destroy(&l->lock);
}

static int queue_init(struct ring_queue *q, char *err, size_t errlen)
{
	struct td_fuse_uring *u = q->u;
	size_t map_bytes = SCRATCH_BYTES + u->p.payload_bytes;
	int ret;

	q->loop.u = u;
	q->loop.home = q;
	/* Its own entries (those at home) and the eventfd read. */
	ret = loop_init(&q->loop, u->p.nr_entries + 1, err, errlen);
	if (ret)
		return ret;
	q->ents = calloc(u->p.nr_entries, sizeof(*q->ents));
	if (!q->ents) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < u->p.nr_entries; i++) {
		struct ring_ent *e = &q->ents[i];

		e->q = q;
		e->idx = i;
		e->state = ENT_DEAD;
		e->map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (e->map == MAP_FAILED) {
			e->map = NULL;
			snprintf(err, errlen, "out of memory for ring buffers");
			return -ENOMEM;
		}
		e->hdr = e->map;
		e->payload = (char *)e->map + SCRATCH_BYTES;
		e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
		e->iov[1] = (struct iovec){ e->payload, u->p.payload_bytes };
	}
	return 0;
}

static void queue_fini(struct ring_queue *q)
{
	size_t map_bytes = SCRATCH_BYTES + q->u->p.payload_bytes;

	loop_fini(&q->loop);
	if (q->ents)
		for (unsigned int i = 0; i < q->u->p.nr_entries; i++)
			if (q->ents[i].map)
				munmap(q->ents[i].map, map_bytes);
	free(q->ents);
}

/*
 * Close every ring and free what the loops and @u hold (the threads are gone).
 * Closing a ring cancels the commands the kernel holds for it, releasing
 * /dev/fuse; the entries' buffers go after every ring is closed.
 */
static void uring_free(struct td_fuse_uring *u)
{
	struct ring_loop *h = atomic_load(&u->helpers);

	while (h) {
		struct ring_loop *next = h->next_helper;

		loop_fini(h);
		free(h);
		h = next;
	}
	for (unsigned int i = 0; i < u->nr_queues; i++)
		queue_fini(&u->queues[i]);
	free(u->queues);
	td_mutex_destroy(&u->helper_lock);
	free(u);
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
	if (sched_getaffinity(0, sizeof(u->cpus), &u->cpus)) {
		CPU_ZERO(&u->cpus);
		for (unsigned int i = 0; i < CPU_SETSIZE; i++)
			CPU_SET(i, &u->cpus);
	}
	u->nr_queues = td_fuse_uring_nr_cpus();
	u->queues = calloc(u->nr_queues, sizeof(*u->queues));
	if (!u->queues) {
		snprintf(err, errlen, "out of memory");
		td_mutex_destroy(&u->helper_lock);
		free(u);
		return NULL;
	}
	for (unsigned int i = 0; i < u->nr_queues; i++) {
		u->queues[i].u = u;
		u->queues[i].qid = i;
		u->queues[i].loop.efd = -1;
	}
	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (queue_init(&u->queues[i], err, errlen))
			goto out_fini;

	return u;

out_fini:
	uring_free(u);
	return NULL;
}

int td_fuse_uring_start(struct td_fuse_uring *u)
{
	pthread_attr_t attr;
	int ret = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	for (unsigned int i = 0; i < u->nr_queues; i++) {
		struct ring_loop *l = &u->queues[i].loop;

		ret = -pthread_create(&l->tid, &attr, loop_thread, l);
		if (ret) {
			td_err("fuse: cannot start ring thread %u: %s", i, strerror(-ret));
			break;
		}
		l->started = true;
	}
	pthread_attr_destroy(&attr);
	return ret;
}

void td_fuse_uring_hold(struct td_fuse_uring *u)
{
	atomic_store(&u->holding, true);
}

void td_fuse_uring_destroy(struct td_fuse_uring *u)
{
	struct ring_loop *helpers;

	atomic_store(&u->exiting, true);
	/* No helper starts after this (start_helper checks exiting under the lock). */
	td_mutex_lock(&u->helper_lock);
	helpers = atomic_load(&u->helpers);
	td_mutex_unlock(&u->helper_lock);

	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (u->queues[i].loop.started)
			eventfd_write(u->queues[i].loop.efd, 1);
	for (struct ring_loop *h = helpers; h; h = h->next_helper)
		eventfd_write(h->efd, 1);
	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (u->queues[i].loop.started)
			pthread_join(u->queues[i].loop.tid, NULL);
	for (struct ring_loop *h = helpers; h; h = h->next_helper)
		pthread_join(h->tid, NULL);
	uring_free(u);
}

unsigned int td_fuse_uring_counts(struct td_fuse_uring *u, uint64_t *counts, unsigned int max)
{
	for (unsigned int i = 0; i < u->nr_queues && i < max; i++)
		counts[i] = atomic_load_explicit(&u->queues[i].requests, memory_order_relaxed);
	return u->nr_queues;
}

unsigned int td_fuse_uring_helpers(struct td_fuse_uring *u)
{
	return atomic_load(&u->nr_helpers);
}

unsigned int td_fuse_uring_entries(const struct td_fuse_uring *u)
{
	return u->p.nr_entries;
}
