// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * blktrace_fmt.c - blktrace records: action words, the header's byte layout,
 * and process names for process notes.
 *
 * Each event becomes one record whose action word combines the step (queue,
 * merge, getrq, insert, issue, complete, requeue) with the categories blkparse
 * prints as the RWBS column: R or W, D for a discard, F before it for a
 * flush, F after it for FUA. The 2.6 block layer that tagdisk models traced
 * a request's life with exactly these steps, so blkparse's per-action
 * summary and btt's Q2G/G2I/I2D/D2C breakdown mean what they say.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "common/blktrace_fmt.h"

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

static uint64_t get_le(const unsigned char **p, unsigned int bytes)
{
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < bytes; i++)
		v |= (uint64_t)(*p)[i] << (8 * i);
	*p += bytes;
	return v;
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

bool td_blktrace_decode(const unsigned char in[TD_BLKTRACE_RECORD_LEN],
			struct td_blktrace_record *rec)
{
	const unsigned char *p = in;

	rec->magic = (uint32_t)get_le(&p, 4);
	rec->sequence = (uint32_t)get_le(&p, 4);
	rec->time_ns = get_le(&p, 8);
	rec->sector = get_le(&p, 8);
	rec->bytes = (uint32_t)get_le(&p, 4);
	rec->action = (uint32_t)get_le(&p, 4);
	rec->pid = (uint32_t)get_le(&p, 4);
	rec->device = (uint32_t)get_le(&p, 4);
	rec->cpu = (uint32_t)get_le(&p, 4);
	rec->error = (uint16_t)get_le(&p, 2);
	rec->pdu_len = (uint16_t)get_le(&p, 2);
	return rec->magic == (TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION);
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
