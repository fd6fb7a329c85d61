// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * blktrace.c - tagdisk trace events as blktrace binary records.
 *
 * Each event becomes one record whose action word combines the step (queue,
 * merge, getrq, insert, issue, complete, requeue) with the categories blkparse
 * prints as the RWBS column: R or W, D for a discard, F before it for a
 * flush, F after it for FUA. The 2.6 block layer that tagdisk models traced
 * a request's life with exactly these steps, so blkparse's per-action
 * summary and btt's Q2G/G2I/I2D/D2C breakdown mean what they say.
 *
 * The writer remembers every pid it has named, in a sorted array (a trace
 * sees few distinct submitters; a binary search keeps the common case cheap),
 * so each process gets one note however many events it has.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ctl/blktrace.h"

struct td_blktrace {
	FILE *out;
	uint32_t device;
	td_blktrace_comm_fn comm;
	void *comm_arg;
	uint32_t sequence;    /* of the last I/O record */
	bool started;	      /* t0_ns is set */
	uint64_t t0_ns;	      /* the first event's time */
	uint64_t last_rel_ns; /* the last time written, relative to t0_ns */
	int32_t *pids;	      /* named so far, ascending */
	size_t nr_pids;
	size_t cap_pids;
	uint64_t events;
	uint64_t bytes;
};

static const struct {
	char letter;
	uint16_t code;
	uint16_t cat;
} actions[] = {
	{ 'Q', TD_BLKTRACE_ACT_QUEUE, TD_BLKTRACE_CAT_QUEUE },
	{ 'M', TD_BLKTRACE_ACT_BACKMERGE, TD_BLKTRACE_CAT_QUEUE },
	{ 'F', TD_BLKTRACE_ACT_FRONTMERGE, TD_BLKTRACE_CAT_QUEUE },
	{ 'G', TD_BLKTRACE_ACT_GETRQ, TD_BLKTRACE_CAT_QUEUE },
	{ 'I', TD_BLKTRACE_ACT_INSERT, TD_BLKTRACE_CAT_QUEUE },
	{ 'D', TD_BLKTRACE_ACT_ISSUE, TD_BLKTRACE_CAT_ISSUE },
	{ 'C', TD_BLKTRACE_ACT_COMPLETE, TD_BLKTRACE_CAT_COMPLETE },
	{ 'R', TD_BLKTRACE_ACT_REQUEUE, TD_BLKTRACE_CAT_REQUEUE },
};

static const struct {
	const char *name;
	uint16_t cat;
} ops[] = {
	{ "read", TD_BLKTRACE_CAT_READ },
	{ "write", TD_BLKTRACE_CAT_WRITE },
	{ "flush", TD_BLKTRACE_CAT_READ | TD_BLKTRACE_CAT_FLUSH },
	{ "discard", TD_BLKTRACE_CAT_WRITE | TD_BLKTRACE_CAT_DISCARD },
	{ "write_zeroes", TD_BLKTRACE_CAT_WRITE },
};

uint32_t td_blktrace_action(char action, const char *op, bool fua)
{
	uint32_t cat = 0;
	uint32_t code = 0;
	size_t i;

	for (i = 0; i < TD_ARRAY_SIZE(actions); i++) {
		if (actions[i].letter == action) {
			code = actions[i].code;
			cat = actions[i].cat;
			break;
		}
	}
	if (!code)
		return 0;
	for (i = 0; i < TD_ARRAY_SIZE(ops); i++)
		if (strcmp(ops[i].name, op) == 0)
			break;
	if (i == TD_ARRAY_SIZE(ops))
		return 0;
	cat |= ops[i].cat;
	if (fua)
		cat |= TD_BLKTRACE_CAT_FUA;
	return cat << TD_BLKTRACE_CAT_SHIFT | code;
}

static unsigned char *put_le(unsigned char *p, uint64_t v, unsigned int bytes)
{
	unsigned int i;

	for (i = 0; i < bytes; i++)
		*p++ = (unsigned char)(v >> (8 * i));
	return p;
}

size_t td_blktrace_encode(const struct td_blktrace_record *rec,
			  unsigned char out[TD_BLKTRACE_RECORD_LEN])
{
	unsigned char *p = out;

	p = put_le(p, rec->magic, 4);
	p = put_le(p, rec->sequence, 4);
	p = put_le(p, rec->time_ns, 8);
	p = put_le(p, rec->sector, 8);
	p = put_le(p, rec->bytes, 4);
	p = put_le(p, rec->action, 4);
	p = put_le(p, rec->pid, 4);
	p = put_le(p, rec->device, 4);
	p = put_le(p, rec->cpu, 4);
	p = put_le(p, rec->error, 2);
	p = put_le(p, rec->pdu_len, 2);
	return (size_t)(p - out);
}

int td_blktrace_proc_comm(int32_t pid, char comm[TD_BLKTRACE_COMM_LEN], void *arg)
{
	char path[32];
	char buf[TD_BLKTRACE_COMM_LEN + 1];
	ssize_t n;
	int fd;
	int err;

	(void)arg;
	if (pid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do {
		n = read(fd, buf, sizeof(buf) - 1);
	} while (n < 0 && errno == EINTR);
	err = errno;
	close(fd);
	if (n < 0)
		return -err;
	/* The kernel ends the name with a newline; an exiting process may give nothing. */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
		n--;
	if (n == 0)
		return -ENOENT;
	memset(comm, 0, TD_BLKTRACE_COMM_LEN);
	memcpy(comm, buf, TD_MIN((size_t)n, (size_t)TD_BLKTRACE_COMM_LEN - 1));
	return 0;
}

struct td_blktrace *td_blktrace_create(FILE *out, uint32_t device, td_blktrace_comm_fn comm,
				       void *arg)
{
	struct td_blktrace *bt = calloc(1, sizeof(*bt));

	if (!bt)
		return NULL;
	bt->out = out;
	bt->device = device;
	bt->comm = comm;
	bt->comm_arg = arg;
	return bt;
}

void td_blktrace_free(struct td_blktrace *bt)
{
	if (!bt)
		return;
	free(bt->pids);
	free(bt);
}

/* Write @len bytes to the stream. Return: 0, or a negative errno. */
static int emit(struct td_blktrace *bt, const void *buf, size_t len)
{
	errno = 0;
	if (fwrite(buf, 1, len, bt->out) != len)
		return errno ? -errno : -EIO;
	bt->bytes += len;
	return 0;
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

	if (!bt->comm || pid <= 0 || pid_find(bt, pid, &pos))
		return 0;
	r = pid_insert(bt, pid, pos);
	if (r)
		return r;
	if (bt->comm(pid, comm, bt->comm_arg))
		return 0;
	td_blktrace_encode(&(struct td_blktrace_record){
				   .magic = TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION,
				   .time_ns = rel_ns,
				   .action = TD_BLKTRACE_TN_PROCESS,
				   .pid = (uint32_t)pid,
				   .device = bt->device,
				   .pdu_len = TD_BLKTRACE_COMM_LEN,
			   },
			   rec);
	memcpy(rec + TD_BLKTRACE_RECORD_LEN, comm, TD_BLKTRACE_COMM_LEN);
	return emit(bt, rec, sizeof(rec));
}

int td_blktrace_add(struct td_blktrace *bt, const struct td_ctl_event *ev)
{
	uint32_t action = td_blktrace_action(ev->action, ev->op, ev->fua);
	unsigned char rec[TD_BLKTRACE_RECORD_LEN];
	uint64_t bytes = ev->sectors * 512;
	int32_t pid = (int32_t)TD_MIN(TD_MAX(ev->pid, 0), INT32_MAX);
	uint64_t rel_ns;
	uint16_t error = 0;
	int r;

	if (!action)
		return -EINVAL;
	if (!bt->started) {
		bt->t0_ns = ev->time_ns;
		bt->started = true;
	}
	rel_ns = ev->time_ns > bt->t0_ns ? ev->time_ns - bt->t0_ns : 0;
	rel_ns = TD_MAX(rel_ns, bt->last_rel_ns);
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
				   .device = bt->device,
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

int td_blktrace_flush(struct td_blktrace *bt)
{
	errno = 0;
	if (fflush(bt->out) || ferror(bt->out))
		return errno ? -errno : -EIO;
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
