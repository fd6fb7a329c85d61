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
 * States of an entry, all changed by the queue's thread except PROCESSING ->
 * replied (any thread, through the commit list):
 *
 *   ARMED --CQE res 0--> PROCESSING --reply--> on the commit list --SQE--> ARMED
 *   ARMED --CQE res < 0--> DEAD (unmount: -ENOTCONN; daemon exit: -ECANCELED)
 *   PROCESSING, while held (stopping) --> HELD: never committed; the kernel
 *                                         ends its request when the connection goes
 *
 * Waking a queue's thread. A reply from another thread goes on the queue's
 * commit list (its mutex) and, when the list was not already marked for a
 * wake-up, one eventfd write; the thread keeps a read of that eventfd armed
 * on its ring, so io_uring_submit_and_wait() returns. Replies made in the
 * queue's own thread (metadata, errors) go on a thread-local list and ride the
 * next submit. Only the queue's thread touches its submission queue: the
 * kernel runs a ring command's follow-up work in the task that issued it.
 *
 * Memory. Entries are mapped, not filled: only the pages a request or its
 * reply touches become resident. An entry that held data is marked dirty,
 * and a queue idle for IDLE_TRIM_S gives its armed entries' pages back
 * (trim_idle), so an idle daemon's RSS does not keep entries x 1 MiB.
 *
 * Why I/O does not stay on the ring thread: with one submitting process every
 * request lands on one queue; its thread only decodes and hands the I/O to
 * the queue (the drive's workers do the copies), so the work spreads over the
 * CPUs and the thread is back for the next request at once.
 */
#include <assert.h>
#include <errno.h>
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
#define IDLE_TRIM_S   1	    /* an idle queue gives back its payload pages after this */
#define OFFLOAD_MIN   (64U << 10) /* blocking handlers: I/O this large goes to a helper */

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

struct ring_ent {
	struct ring_queue *q;
	unsigned int idx;
	enum ent_state state; /* the queue's thread, except while PROCESSING (the replier) */
	uint64_t unique;      /* the kernel's, for the commit */
	void *map;
	struct td_fuse_uring_req_header *hdr;
	char *payload;
	struct iovec iov[2];
	struct ring_ent *next_commit;
	bool dirty;		    /* its payload holds pages: written before the commit is queued */
	struct ring_ent *next_work; /* u->work_lock */
	size_t work_len;	    /* the rebuilt request's length, for a helper */
	char *work_start;
};

struct ring_queue {
	struct td_fuse_uring *u;
	unsigned int qid;
	struct io_uring ring;
	bool ring_ok;
	pthread_t tid;
	bool started;
	int efd;
	uint64_t efd_buf;
	struct ring_ent *ents;
	unsigned int nr_live; /* the thread: entries not DEAD */
	bool maybe_dirty;     /* the thread: some entry may hold payload pages to give back */

	struct td_mutex lock;
	struct ring_ent *commit_head; /* lock */
	struct ring_ent *commit_tail; /* lock */
	bool wake_pending;	      /* lock: an eventfd write is on its way */

	_Atomic uint64_t requests;
};

/* Helper threads for handlers that block (td_fuse_uring_params.helpers). */
struct helper {
	struct helper *next; /* u->work_lock */
	pthread_t tid;
};

struct td_fuse_uring {
	struct td_fuse_uring_params p;
	unsigned int nr_queues;
	struct ring_queue *queues;
	_Atomic bool holding;
	_Atomic bool exiting;

	struct td_mutex work_lock;
	struct td_cond work_cond;	/* work queued, or exiting */
	struct ring_ent *work_head;	/* work_lock: requests for the helpers */
	struct ring_ent *work_tail;	/* work_lock */
	unsigned int nr_helpers;	/* work_lock */
	unsigned int idle_helpers;	/* work_lock */
	struct helper *helpers;		/* work_lock */
};

/* The queue this thread serves, the entry whose request it is handling, its own replies. */
static _Thread_local struct ring_queue *tl_queue;
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

/* ---- submissions (the queue's thread only) -------------------------------------------- */

static struct io_uring_sqe *get_sqe(struct ring_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
	}
	return sqe;
}

static void prep_cmd(struct ring_queue *q, struct ring_ent *e, enum td_fuse_uring_cmd op)
{
	struct io_uring_sqe *sqe = get_sqe(q);
	struct td_fuse_uring_cmd_req *req;

	assert(sqe); /* the ring holds an SQE for every entry and the eventfd read */
	memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: two slots */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->u->p.fuse_fd;
	sqe->cmd_op = op;
	sqe->addr = (uint64_t)(uintptr_t)e->iov;
	sqe->len = 2;
	req = (struct td_fuse_uring_cmd_req *)(void *)sqe->cmd;
	req->qid = (uint16_t)q->qid;
	req->commit_id = op == TD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH ? e->unique : 0;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)e);
	e->state = ENT_ARMED;
}

static void arm_eventfd(struct ring_queue *q)
{
	struct io_uring_sqe *sqe = get_sqe(q);

	assert(sqe);
	io_uring_prep_read(sqe, q->efd, &q->efd_buf, sizeof(q->efd_buf), 0);
	io_uring_sqe_set_data64(sqe, EFD_USER_DATA);
}

/* Commit what was replied since the last submit. */
static void prep_commits(struct ring_queue *q)
{
	struct ring_ent *remote;

	td_mutex_lock(&q->lock);
	remote = q->commit_head;
	q->commit_head = q->commit_tail = NULL;
	q->wake_pending = false;
	td_mutex_unlock(&q->lock);

	for (int pass = 0; pass < 2; pass++) {
		struct ring_ent *e = pass ? remote : tl_local_head;

		if (!pass)
			tl_local_head = NULL;
		while (e) {
			struct ring_ent *next = e->next_commit;

			e->next_commit = NULL;
			q->maybe_dirty |= e->dirty;
			prep_cmd(q, e, TD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH);
			e = next;
		}
	}
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
	e->next_commit = tl_local_head;
	tl_local_head = e;
}

/* ---- helpers: handlers that block run off the ring thread ------------------------------- */

/*
 * Does this request go to a helper? Flushes and fallocates may block long; reads
 * and writes of OFFLOAD_MIN bytes and more are copies worth another CPU. Small
 * ones cost less inline than the hand-over (a wake-up and a context switch).
 */
static bool wants_helper(const struct fuse_in_header *in)
{
	const void *arg = in + 1;

	switch (in->opcode) {
	case FUSE_FSYNC:
	case FUSE_FALLOCATE:
		return true;
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

static void *helper_thread(void *arg)
{
	struct td_fuse_uring *u = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	td_thread_name("td-ring-io");
	td_mutex_lock(&u->work_lock);
	for (;;) {
		struct ring_ent *e = u->work_head;

		if (!e) {
			if (atomic_load(&u->exiting))
				break;
			u->idle_helpers++;
			td_cond_wait(&u->work_cond, &u->work_lock);
			u->idle_helpers--;
			continue;
		}
		u->work_head = e->next_work;
		if (!u->work_head)
			u->work_tail = NULL;
		td_mutex_unlock(&u->work_lock);
		tl_ent = e;
		u->p.process(u->p.arg, e->work_start, e->work_len);
		tl_ent = NULL;
		td_mutex_lock(&u->work_lock);
	}
	td_mutex_unlock(&u->work_lock);
	return NULL;
}

/* Hand a request to a helper, starting one more when none is idle (up to p.helpers). */
static void queue_work(struct td_fuse_uring *u, struct ring_ent *e, char *start, size_t len)
{
	e->work_start = start;
	e->work_len = len;
	e->next_work = NULL;
	td_mutex_lock(&u->work_lock);
	if (u->work_tail)
		u->work_tail->next_work = e;
	else
		u->work_head = e;
	u->work_tail = e;
	if (!u->idle_helpers && u->nr_helpers < u->p.helpers) {
		struct helper *h = calloc(1, sizeof(*h));
		pthread_attr_t attr;

		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, THREAD_STACK);
		if (h && !pthread_create(&h->tid, &attr, helper_thread, u)) {
			h->next = u->helpers;
			u->helpers = h;
			u->nr_helpers++;
		} else {
			free(h);
		}
		pthread_attr_destroy(&attr);
	}
	td_cond_signal(&u->work_cond);
	td_mutex_unlock(&u->work_lock);
}

static void handle_request(struct ring_queue *q, struct ring_ent *e)
{
	struct td_fuse_uring *u = q->u;
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;
	size_t payload = e->hdr->ring_ent_in_out.payload_sz;
	size_t len = in->len;

	e->unique = in->unique;
	e->state = ENT_PROCESSING;
	if (payload)
		e->dirty = true;
	atomic_fetch_add_explicit(&q->requests, 1, memory_order_relaxed);
	if (atomic_load(&u->holding)) {
		e->state = ENT_HELD; /* the kernel ends it when the connection goes */
		return;
	}
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
	if (u->p.helpers && wants_helper(copy)) {
		queue_work(u, e, start, len);
		return;
	}
	tl_ent = e;
	u->p.process(u->p.arg, start, len);
	tl_ent = NULL;
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
	struct ring_queue *q = e->q;
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

	if (tl_queue == q) {
		e->next_commit = tl_local_head;
		tl_local_head = e;
	} else {
		bool wake;

		td_mutex_lock(&q->lock);
		e->next_commit = NULL;
		if (q->commit_tail)
			q->commit_tail->next_commit = e;
		else
			q->commit_head = e;
		q->commit_tail = e;
		wake = !q->wake_pending;
		q->wake_pending = true;
		td_mutex_unlock(&q->lock);
		if (wake)
			eventfd_write(q->efd, 1);
	}
	return (ssize_t)(sizeof(*oh) + total);
}

/* ---- the queue's thread ----------------------------------------------------------------- */

/*
 * The queue has been idle for IDLE_TRIM_S: give back the payload pages its armed
 * entries hold (a 1 MiB request leaves 1 MiB resident, locked under mlockall), so an
 * idle daemon's memory does not grow with the entries. Safe for ARMED entries only
 * because the kernel writes a request into an entry from this thread's own task
 * work (fuse_uring_send_in_task) or its own submit: never while we run here. A
 * fresh anonymous mapping over the payload frees the pages and, under
 * mlockall(MCL_FUTURE), is locked on fault like the rest (madvise(MADV_DONTNEED)
 * is refused on locked memory).
 */
static void trim_idle(struct ring_queue *q)
{
	size_t len = q->u->p.payload_bytes;
	bool left = false;

	for (unsigned int i = 0; i < q->u->p.nr_entries; i++) {
		struct ring_ent *e = &q->ents[i];

		if (!e->dirty)
			continue;
		if (e->state != ENT_ARMED) {
			left = true;
			continue;
		}
		if (mmap(e->payload, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			left = true;
		else
			e->dirty = false;
	}
	q->maybe_dirty = left;
}

static void *queue_thread(void *arg)
{
	struct ring_queue *q = arg;
	struct td_fuse_uring *u = q->u;
	char name[16];
	cpu_set_t cpus;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	snprintf(name, sizeof(name), "td-ring%u", q->qid);
	td_thread_name(name);
	CPU_ZERO(&cpus);
	CPU_SET(q->qid, &cpus);
	/* An offline CPU's queue still needs entries: it then runs anywhere. */
	(void)pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	tl_queue = q;

	/* Register every entry before anything else: the ring serves once all queues have some. */
	for (unsigned int i = 0; i < u->p.nr_entries; i++)
		prep_cmd(q, &q->ents[i], TD_FUSE_IO_URING_CMD_REGISTER);
	q->nr_live = u->p.nr_entries;
	arm_eventfd(q);

	while (!atomic_load(&u->exiting)) {
		int ret;

		prep_commits(q);
		if (q->maybe_dirty) {
			struct __kernel_timespec ts = { .tv_sec = IDLE_TRIM_S };
			struct io_uring_cqe *first;

			ret = io_uring_submit(&q->ring);
			if (ret >= 0)
				ret = io_uring_wait_cqe_timeout(&q->ring, &first, &ts);
			if (ret == -ETIME) {
				trim_idle(q);
				continue;
			}
		} else {
			ret = io_uring_submit_and_wait(&q->ring, 1);
		}
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			td_warnx("fuse: ring %u: %s", q->qid, strerror(-ret));
			break;
		}
		struct io_uring_cqe *cqe;
		unsigned int head, seen = 0;

		io_uring_for_each_cqe(&q->ring, head, cqe) {
			seen++;
			if (cqe->user_data == EFD_USER_DATA) {
				if (!atomic_load(&u->exiting))
					arm_eventfd(q);
				continue;
			}
			struct ring_ent *e = (void *)(uintptr_t)cqe->user_data;

			if (cqe->res == 0) {
				handle_request(q, e);
				continue;
			}
			if (e->state != ENT_DEAD) {
				e->state = ENT_DEAD;
				q->nr_live--;
			}
			if (cqe->res != -ENOTCONN && cqe->res != -ECANCELED &&
			    cqe->res != -ECONNABORTED && q->nr_live + 1 == u->p.nr_entries)
				td_warnx("fuse: ring %u: entry ended: %s; requests go through "
					 "/dev/fuse",
					 q->qid, strerror(-cqe->res));
		}
		io_uring_cq_advance(&q->ring, seen);
	}
	return NULL;
}

/* ---- creation --------------------------------------------------------------------------- */

static int queue_init(struct ring_queue *q, char *err, size_t errlen)
{
	struct td_fuse_uring *u = q->u;
	size_t map_bytes = SCRATCH_BYTES + u->p.payload_bytes;
	struct io_uring_params params = { .flags = IORING_SETUP_SQE128 };
	int ret;

	td_mutex_init(&q->lock);
	q->efd = eventfd(0, EFD_CLOEXEC);
	if (q->efd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return -errno;
	}
	/* An SQE for each entry's command and the eventfd read; completions twice that. */
	ret = io_uring_queue_init_params(u->p.nr_entries * 2 + 2, &q->ring, &params);
	if (ret < 0) {
		snprintf(err, errlen, "io_uring_setup: %s", strerror(-ret));
		return ret;
	}
	q->ring_ok = true;
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

	if (q->ring_ok)
		io_uring_queue_exit(&q->ring);
	if (q->ents)
		for (unsigned int i = 0; i < q->u->p.nr_entries; i++)
			if (q->ents[i].map)
				munmap(q->ents[i].map, map_bytes);
	free(q->ents);
	if (q->efd >= 0)
		close(q->efd);
	td_mutex_destroy(&q->lock);
}

/* Close every queue's ring and free what it and @u hold (the threads are gone). */
static void uring_free(struct td_fuse_uring *u)
{
	for (unsigned int i = 0; i < u->nr_queues; i++)
		queue_fini(&u->queues[i]);
	free(u->queues);
	td_cond_destroy(&u->work_cond);
	td_mutex_destroy(&u->work_lock);
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
	td_mutex_init(&u->work_lock);
	td_cond_init(&u->work_cond);
	u->nr_queues = td_fuse_uring_nr_cpus();
	u->queues = calloc(u->nr_queues, sizeof(*u->queues));
	if (!u->queues) {
		snprintf(err, errlen, "out of memory");
		free(u);
		return NULL;
	}
	for (unsigned int i = 0; i < u->nr_queues; i++) {
		u->queues[i].u = u;
		u->queues[i].qid = i;
		u->queues[i].efd = -1;
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
		struct ring_queue *q = &u->queues[i];

		ret = -pthread_create(&q->tid, &attr, queue_thread, q);
		if (ret) {
			td_err("fuse: cannot start ring thread %u: %s", i, strerror(-ret));
			break;
		}
		q->started = true;
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
	atomic_store(&u->exiting, true);
	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (u->queues[i].started)
			eventfd_write(u->queues[i].efd, 1);
	for (unsigned int i = 0; i < u->nr_queues; i++)
		if (u->queues[i].started)
			pthread_join(u->queues[i].tid, NULL);
	td_mutex_lock(&u->work_lock);
	td_cond_broadcast(&u->work_cond);
	td_mutex_unlock(&u->work_lock);
	while (u->helpers) {
		struct helper *h = u->helpers;

		u->helpers = h->next;
		pthread_join(h->tid, NULL);
		free(h);
	}
	/* Closing each ring cancels the commands the kernel holds, releasing /dev/fuse. */
	uring_free(u);
}

unsigned int td_fuse_uring_counts(struct td_fuse_uring *u, uint64_t *counts, unsigned int max)
{
	for (unsigned int i = 0; i < u->nr_queues && i < max; i++)
		counts[i] = atomic_load_explicit(&u->queues[i].requests, memory_order_relaxed);
	return u->nr_queues;
}

unsigned int td_fuse_uring_entries(const struct td_fuse_uring *u)
{
	return u->p.nr_entries;
}
