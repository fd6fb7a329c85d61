// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * blktrace_writer.c - trace events as blktrace binary records.
 *
 * The writer remembers every pid it has named, in a sorted array (a trace
 * sees few distinct submitters; a binary search keeps the common case cheap),
 * so each process gets one note however many events it has.
 *
 * The reorder window is a ring of the events held, sorted by time; equal
 * times keep the order they were added in. Events mostly come in time order
 * (the trace hub merges its rings by time), and each such event is appended
 * and later taken from the front, in constant time (a binary heap, which
 * sifts through up to 16 levels per event whatever the order, took more than
 * half of the admin thread's samples at 4k randrw QD32). A late event is put in its
 * place by moving the newer ones up a slot; those are the events of the few
 * milliseconds since its time, and late events are rare. An event leaves the
 * window when the newest time added is reorder_ns past it, when the window
 * is full, or on td_blktrace_flush(); it is encoded only then, so the
 * sequence numbers follow the time order of the file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/blktrace_writer.h"

struct td_blktrace {
	struct td_blktrace_writer_params p;
	uint32_t sequence;    /* of the last I/O record, gaps included */
	bool started;	      /* t0_ns is set */
	uint64_t t0_ns;	      /* the first event's time */
	uint64_t last_rel_ns; /* the last time written, relative to t0_ns */
	struct td_blktrace_event *ring; /* the reorder window: cap_held slots */
	size_t head;			/* the slot of the oldest event held */
	size_t nr_held;
	size_t cap_held;
	uint64_t newest_ns;   /* the newest time added */
	uint64_t late;
	int32_t *pids;	      /* named so far, ascending */
	size_t nr_pids;
	size_t cap_pids;
	uint64_t events;
	uint64_t bytes;
	uint64_t lost;
};

struct td_blktrace *td_blktrace_create(const struct td_blktrace_writer_params *p)
{
	struct td_blktrace *bt = calloc(1, sizeof(*bt));

	if (!bt)
		return NULL;
	bt->p = *p;
	if (!bt->p.reorder_max)
		bt->p.reorder_max = TD_BLKTRACE_REORDER_MAX;
	return bt;
}

size_t td_blktrace_window_bytes(const struct td_blktrace_writer_params *p)
{
	return ((p->reorder_max ? p->reorder_max : TD_BLKTRACE_REORDER_MAX) + 1) *
	       sizeof(struct td_blktrace_event);
}

void td_blktrace_free(struct td_blktrace *bt)
{
	if (!bt)
		return;
	free(bt->ring);
	free(bt->pids);
	free(bt);
}

static int emit(struct td_blktrace *bt, const void *buf, size_t len)
{
	int r = bt->p.emit(bt->p.emit_arg, buf, len);

	if (!r)
		bt->bytes += len;
	return r;
}

/*
 * Find @pid among the named ones. Return: true when present; *@pos gets its
 * index, or where it would go.
 */
static bool pid_find(const struct td_blktrace *bt, int32_t pid, size_t *pos)
{
	size_t lo = 0;
	size_t hi = bt->nr_pids;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (bt->pids[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	*pos = lo;
	return lo < bt->nr_pids && bt->pids[lo] == pid;
}

static int pid_insert(struct td_blktrace *bt, int32_t pid, size_t pos)
{
	if (bt->nr_pids == bt->cap_pids) {
		size_t cap = bt->cap_pids ? bt->cap_pids * 2 : 16;
		int32_t *p = realloc(bt->pids, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		bt->pids = p;
		bt->cap_pids = cap;
	}
	memmove(bt->pids + pos + 1, bt->pids + pos, (bt->nr_pids - pos) * sizeof(*bt->pids));
	bt->pids[pos] = pid;
	bt->nr_pids++;
	return 0;
}

/*
 * Name @pid once, before its first event at @rel_ns. A process that cannot be
 * named (gone already) is remembered all the same: asking again would fail again.
 */
static int name_process(struct td_blktrace *bt, int32_t pid, uint64_t rel_ns)
{
	unsigned char rec[TD_BLKTRACE_RECORD_LEN + TD_BLKTRACE_COMM_LEN];
	char comm[TD_BLKTRACE_COMM_LEN];
	size_t pos;
	int r;

	if (!bt->p.comm || pid <= 0 || pid_find(bt, pid, &pos))
		return 0;
	r = pid_insert(bt, pid, pos);
	if (r)
		return r;
	if (bt->p.comm(pid, comm, bt->p.comm_arg))
		return 0;
	td_blktrace_encode(&(struct td_blktrace_record){
				   .magic = TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION,
				   .time_ns = rel_ns,
				   .action = TD_BLKTRACE_TN_PROCESS,
				   .pid = (uint32_t)pid,
				   .device = bt->p.device,
				   .pdu_len = TD_BLKTRACE_COMM_LEN,
			   },
			   rec);
	memcpy(rec + TD_BLKTRACE_RECORD_LEN, comm, TD_BLKTRACE_COMM_LEN);
	return emit(bt, rec, sizeof(rec));
}

/* Write the record of @ev, which is not older than the last one written. */
static int write_event(struct td_blktrace *bt, const struct td_blktrace_event *ev)
{
	uint32_t action = td_blktrace_action(ev->action, ev->op, ev->fua);
	unsigned char rec[TD_BLKTRACE_RECORD_LEN];
	uint64_t bytes = ev->sectors * 512;
	int32_t pid = (int32_t)TD_MIN(TD_MAX(ev->pid, 0), INT32_MAX);
	uint64_t rel_ns;
	uint16_t error = 0;
	int r;

	if (!bt->started) {
		bt->t0_ns = ev->time_ns;
		bt->started = true;
	}
	rel_ns = ev->time_ns - bt->t0_ns;
	bt->last_rel_ns = rel_ns;

	r = name_process(bt, pid, rel_ns);
	if (r)
		return r;
	/* The kernel's completion carries the errno; a positive one reads best in blkparse. */
	if (ev->action == 'C' && ev->error)
		error = (uint16_t)TD_MIN(ev->error < 0 ? -ev->error : ev->error, UINT16_MAX);
	td_blktrace_encode(&(struct td_blktrace_record){
				   .magic = TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION,
				   .sequence = bt->sequence + 1,
				   .time_ns = rel_ns,
				   .sector = ev->sector,
				   .bytes = (uint32_t)TD_MIN(bytes, UINT32_MAX),
				   .action = action,
				   .pid = (uint32_t)pid,
				   .device = bt->p.device,
				   .error = error,
			   },
			   rec);
	r = emit(bt, rec, sizeof(rec));
	if (r)
		return r;
	bt->sequence++;
	bt->events++;
	return 0;
}

/* ---- the reorder window --------------------------------------------------------------- */

/* The slot of the @i-th oldest event held. */
static size_t slot(const struct td_blktrace *bt, size_t i)
{
	size_t at = bt->head + i;

	return at >= bt->cap_held ? at - bt->cap_held : at;
}

/* Make room for one more event: at most reorder_max + 1 slots, as td_blktrace_add() needs. */
static int window_grow(struct td_blktrace *bt)
{
	size_t old = bt->cap_held;
	size_t cap = TD_MIN(old ? old * 2 : 64, bt->p.reorder_max + 1);
	struct td_blktrace_event *r;

	if (cap <= old)
		return -ENOBUFS; /* never: an event leaves the window before its write is tried */
	r = realloc(bt->ring, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	/* The part from head to the old end goes to the new end; the wrapped part stays. */
	if (bt->nr_held && bt->head + bt->nr_held > old) {
		memmove(r + bt->head + (cap - old), r + bt->head, (old - bt->head) * sizeof(*r));
		bt->head += cap - old;
	}
	bt->ring = r;
	bt->cap_held = cap;
	return 0;
}

/* Put @ev after every event held that is not newer than it. */
static int window_insert(struct td_blktrace *bt, const struct td_blktrace_event *ev)
{
	size_t lo = bt->nr_held;
	size_t hi = bt->nr_held;

	if (bt->nr_held == bt->cap_held) {
		int r = window_grow(bt);

		if (r)
			return r;
	}
	/* In time order (the usual case) it goes last; otherwise search for its place. */
	if (hi && bt->ring[slot(bt, hi - 1)].time_ns > ev->time_ns) {
		lo = 0;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (bt->ring[slot(bt, mid)].time_ns <= ev->time_ns)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t i = bt->nr_held; i > lo; i--)
			bt->ring[slot(bt, i)] = bt->ring[slot(bt, i - 1)];
	}
	bt->ring[slot(bt, lo)] = *ev;
	bt->nr_held++;
	return 0;
}

/* Write the oldest event held. */
static int write_oldest(struct td_blktrace *bt)
{
	struct td_blktrace_event ev = bt->ring[bt->head];

	bt->head = slot(bt, 1);
	bt->nr_held--;
	return write_event(bt, &ev);
}

int td_blktrace_flush(struct td_blktrace *bt, uint64_t until_ns)
{
	while (bt->nr_held && bt->ring[bt->head].time_ns <= until_ns) {
		int r = write_oldest(bt);

		if (r)
			return r;
	}
	return 0;
}

int td_blktrace_add(struct td_blktrace *bt, const struct td_blktrace_event *ev)
{
	int r;

	if (!td_blktrace_action(ev->action, ev->op, ev->fua))
		return -EINVAL;
	/* Too late for its place: a record at its own time would go back in time. */
	if (bt->started && ev->time_ns < bt->t0_ns + bt->last_rel_ns) {
		bt->late++;
		return td_blktrace_dropped(bt, 1);
	}
	r = window_insert(bt, ev);
	if (r)
		return r;
	bt->newest_ns = TD_MAX(bt->newest_ns, ev->time_ns);
	while (bt->nr_held > bt->p.reorder_max) {
		r = write_oldest(bt);
		if (r)
			return r;
	}
	if (bt->newest_ns < bt->p.reorder_ns)
		return 0;
	return td_blktrace_flush(bt, bt->newest_ns - bt->p.reorder_ns);
}

int td_blktrace_dropped(struct td_blktrace *bt, uint64_t n)
{
	unsigned char rec[TD_BLKTRACE_RECORD_LEN + 64];
	int len = snprintf((char *)rec + TD_BLKTRACE_RECORD_LEN, sizeof(rec) - TD_BLKTRACE_RECORD_LEN,
			   TD_BLKTRACE_DROPPED_MSG "%llu", (unsigned long long)n);
	int r;

	if (!n)
		return 0;
	td_blktrace_encode(&(struct td_blktrace_record){
				   .magic = TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION,
				   .time_ns = bt->last_rel_ns,
				   .action = TD_BLKTRACE_TN_MESSAGE,
				   .device = bt->p.device,
				   .pdu_len = (uint16_t)len,
			   },
			   rec);
	r = emit(bt, rec, TD_BLKTRACE_RECORD_LEN + (size_t)len);
	if (r)
		return r;
	bt->sequence += (uint32_t)n;
	bt->lost += n;
	return 0;
}

uint64_t td_blktrace_events(const struct td_blktrace *bt)
{
	return bt->events;
}

uint64_t td_blktrace_bytes(const struct td_blktrace *bt)
{
	return bt->bytes;
}

uint64_t td_blktrace_lost(const struct td_blktrace *bt)
{
	return bt->lost;
}

uint64_t td_blktrace_late(const struct td_blktrace *bt)
{
	return bt->late;
}
