// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_blktrace.c - the blktrace records a `trace blktrace` stream carries:
 * exact bytes of a header, the action words blkparse decodes, process notes,
 * the events' own times, relative, in time order through a reorder window, late
 * events dropped and said, drop messages and sequence gaps, errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/blktrace_writer.h"

#if __has_include(<linux/blktrace_api.h>)
#include <linux/blktrace_api.h>
#define HAVE_KERNEL_BLKTRACE_API 1
#endif

/* The device 259:0 in blktrace's dev_t: 259 << 20, little-endian. */
#define DEV_LE 0x00, 0x00, 0x30, 0x10

static void test_encode_lays_out_header_little_endian_at_fixed_offsets(void **state)
{
	const struct td_blktrace_record rec = {
		.magic = TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION,
		.sequence = 1,
		.time_ns = 0x0102030405060708ULL,
		.sector = 0x1122334455667788ULL,
		.bytes = 4096,
		.action = 0x00120001,
		.pid = 4321,
		.device = TD_BLKTRACE_DEVICE,
		.cpu = 3,
		.error = 5,
		.pdu_len = 16,
	};
	static const unsigned char expected[TD_BLKTRACE_RECORD_LEN] = {
		0x07, 0x74, 0x61, 0x65,				/* magic 0x65617407 */
		0x01, 0x00, 0x00, 0x00,				/* sequence */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* time */
		0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, /* sector */
		0x00, 0x10, 0x00, 0x00,				/* bytes */
		0x01, 0x00, 0x12, 0x00,				/* action */
		0xe1, 0x10, 0x00, 0x00,				/* pid */
		DEV_LE,						/* device */
		0x03, 0x00, 0x00, 0x00,				/* cpu */
		0x05, 0x00,					/* error */
		0x10, 0x00,					/* pdu_len */
	};
	unsigned char out[TD_BLKTRACE_RECORD_LEN + 1];

	(void)state;
	memset(out, 0xa5, sizeof(out));
	assert_int_equal(td_blktrace_encode(&rec, out), TD_BLKTRACE_RECORD_LEN);
	assert_memory_equal(out, expected, sizeof(expected));
	assert_int_equal(out[TD_BLKTRACE_RECORD_LEN], 0xa5); /* nothing past the header */
}

#ifdef HAVE_KERNEL_BLKTRACE_API
/* On a little-endian host, our bytes are the kernel's struct blk_io_trace as it sits in memory. */
static void test_encode_matches_kernel_struct_layout(void **state)
{
	const struct td_blktrace_record rec = {
		.magic = TD_BLKTRACE_MAGIC | TD_BLKTRACE_VERSION,
		.sequence = 77,
		.time_ns = 123456789012ULL,
		.sector = 987654321ULL,
		.bytes = 65536,
		.action = 0x00410007,
		.pid = 99,
		.device = TD_BLKTRACE_MKDEV(8, 16),
		.cpu = 1,
		.error = 0,
		.pdu_len = 0,
	};
	struct blk_io_trace k = {
		.magic = BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION,
		.sequence = 77,
		.time = 123456789012ULL,
		.sector = 987654321ULL,
		.bytes = 65536,
		.action = BLK_TA_ISSUE | BLK_TC_ACT(BLK_TC_READ),
		.pid = 99,
		.device = (8U << 20) | 16,
		.cpu = 1,
	};
	unsigned char out[TD_BLKTRACE_RECORD_LEN];

	(void)state;
	if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
		skip();
	assert_int_equal(sizeof(k), TD_BLKTRACE_RECORD_LEN);
	td_blktrace_encode(&rec, out);
	assert_memory_equal(out, &k, sizeof(k));
	assert_int_equal(TD_BLKTRACE_TN_PROCESS, BLK_TN_PROCESS);
	assert_int_equal(td_blktrace_action('Q', "write", false),
			 BLK_TA_QUEUE | BLK_TC_ACT(BLK_TC_WRITE));
	assert_int_equal(td_blktrace_action('R', "read", false),
			 BLK_TA_REQUEUE | BLK_TC_ACT(BLK_TC_READ));
	/* BLK_TC_ACT(BLK_TC_FUA) would shift into the sign bit of an int: shift it unsigned. */
	assert_int_equal(td_blktrace_action('C', "write", true),
			 BLK_TA_COMPLETE | BLK_TC_ACT(BLK_TC_WRITE) |
				 (uint32_t)BLK_TC_FUA << BLK_TC_SHIFT);
}
#endif

static void test_action_maps_each_event_letter_to_its_step(void **state)
{
	/* Category QUEUE 0x10, ISSUE 0x40, COMPLETE 0x80 or REQUEUE 0x20, plus WRITE 0x02. */
	static const struct {
		char letter;
		uint32_t word;
	} cases[] = {
		{ 'Q', 0x00120001 }, { 'M', 0x00120002 }, { 'F', 0x00120003 },
		{ 'G', 0x00120004 }, { 'I', 0x0012000c }, { 'D', 0x00420007 },
		{ 'C', 0x00820008 }, { 'R', 0x00220006 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < TD_ARRAY_SIZE(cases); i++)
		assert_int_equal(td_blktrace_action(cases[i].letter, "write", false),
				 cases[i].word);
}

static void test_action_sets_the_categories_of_each_op(void **state)
{
	(void)state;
	/* D (issue, 0x40) with the op's categories. */
	assert_int_equal(td_blktrace_action('D', "read", false), 0x00410007);
	assert_int_equal(td_blktrace_action('D', "write", false), 0x00420007);
	assert_int_equal(td_blktrace_action('D', "write", true), 0x80420007);
	assert_int_equal(td_blktrace_action('D', "flush", false), 0x00450007);
	assert_int_equal(td_blktrace_action('D', "discard", false), 0x20420007);
	assert_int_equal(td_blktrace_action('D', "write_zeroes", false), 0x00420007);
}

static void test_action_is_zero_for_unknown_letter_or_op(void **state)
{
	(void)state;
	assert_int_equal(td_blktrace_action('X', "write", false), 0);
	assert_int_equal(td_blktrace_action('\0', "read", false), 0);
	assert_int_equal(td_blktrace_action('q', "read", false), 0);
	assert_int_equal(td_blktrace_action('Q', "trim", false), 0);
	assert_int_equal(td_blktrace_action('Q', "", false), 0);
}

/* ---- the writer, on a memory stream --------------------------------------------------- */

struct sink {
	FILE *f;
	char *buf;
	size_t len;
	unsigned int comm_calls;
	int32_t last_comm_pid;
};

static int sink_setup(void **state)
{
	struct sink *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->f = open_memstream(&s->buf, &s->len);
	assert_non_null(s->f);
	*state = s;
	return 0;
}

/* The writer's emit callback: a stdio stream. */
static int file_emit(void *arg, const void *buf, size_t len)
{
	errno = 0;
	if (fwrite(buf, 1, len, arg) != len)
		return errno ? -errno : -EIO;
	return 0;
}

static struct td_blktrace *writer(FILE *f, uint32_t device, td_blktrace_comm_fn comm, void *arg)
{
	return td_blktrace_create(&(struct td_blktrace_writer_params){
		.emit = file_emit,
		.emit_arg = f,
		.device = device,
		.comm = comm,
		.comm_arg = arg,
	});
}

static int sink_teardown(void **state)
{
	struct sink *s = *state;

	fclose(s->f);
	free(s->buf);
	free(s);
	return 0;
}

/* Names pid 4321 "dd" and pid 77 "kworker/u8:2+loop0" (cut to 15 bytes); knows no others. */
static int fake_comm(int32_t pid, char comm[TD_BLKTRACE_COMM_LEN], void *arg)
{
	struct sink *s = arg;

	s->comm_calls++;
	s->last_comm_pid = pid;
	memset(comm, 0, TD_BLKTRACE_COMM_LEN);
	if (pid == 4321) {
		memcpy(comm, "dd", 2);
		return 0;
	}
	if (pid == 77) {
		memcpy(comm, "kworker/u8:2+lo", 15);
		return 0;
	}
	return -ENOENT;
}

static struct td_blktrace_event event(char action, const char *op, uint64_t time_ns, int64_t pid,
				 uint64_t sector, uint64_t sectors)
{
	return (struct td_blktrace_event){
		.time_ns = time_ns,
		.pid = pid,
		.action = action,
		.op = op,
		.sector = sector,
		.sectors = sectors,
	};
}

static int add(struct td_blktrace *bt, struct td_blktrace_event ev)
{
	return td_blktrace_add(bt, &ev);
}

/* Little-endian fields of the record header at @p. */
static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static uint16_t le16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void test_add_writes_process_note_then_event_exact_bytes(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, fake_comm, s);
	struct td_blktrace_event ev = event('Q', "write", 5000000123ULL, 4321, 2048, 8);
	static const unsigned char expected[] = {
		/* the process note: sequence 0, time 0, action 0x04000000 (notify, process) */
		0x07, 0x74, 0x61, 0x65, 0x00, 0x00, 0x00, 0x00,		/* magic, sequence */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,		/* time */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,		/* sector */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04,		/* bytes, action */
		0xe1, 0x10, 0x00, 0x00, DEV_LE,				/* pid, device */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,	/* cpu, error, pdu_len */
		'd', 'd', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* comm */
		/* the queue event: sequence 1, time 0, 2048 + 8, action 0x00120001 */
		0x07, 0x74, 0x61, 0x65, 0x01, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x10, 0x00, 0x00, 0x01, 0x00, 0x12, 0x00,
		0xe1, 0x10, 0x00, 0x00, DEV_LE,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};

	assert_non_null(bt);
	assert_int_equal(td_blktrace_add(bt, &ev), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, sizeof(expected));
	assert_memory_equal(s->buf, expected, sizeof(expected));
	assert_int_equal(td_blktrace_events(bt), 1);
	assert_int_equal(td_blktrace_bytes(bt), sizeof(expected));
	td_blktrace_free(bt);
}

static void test_add_names_each_pid_once_and_numbers_only_io_records(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, fake_comm, s);
	const size_t note = TD_BLKTRACE_RECORD_LEN + TD_BLKTRACE_COMM_LEN;
	const unsigned char *p;

	assert_non_null(bt);
	assert_int_equal(add(bt, event('Q', "write", 10, 4321, 0, 8)), 0);
	assert_int_equal(add(bt, event('Q', "read", 20, 77, 64, 8)), 0);
	assert_int_equal(add(bt, event('G', "write", 30, 4321, 0, 8)), 0);
	assert_int_equal(add(bt, event('G', "read", 40, 77, 64, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->comm_calls, 2);
	assert_int_equal(s->len, 2 * note + 4 * TD_BLKTRACE_RECORD_LEN);
	assert_int_equal(td_blktrace_events(bt), 4);

	/* note(4321) Q note(77) Q G G */
	p = (const unsigned char *)s->buf;
	assert_int_equal(le32(p + 28), TD_BLKTRACE_TN_PROCESS);
	assert_int_equal(le32(p + 32), 4321);
	p += note;
	assert_int_equal(le32(p + 4), 1);
	p += TD_BLKTRACE_RECORD_LEN;
	assert_int_equal(le32(p + 28), TD_BLKTRACE_TN_PROCESS);
	assert_int_equal(le32(p + 32), 77);
	assert_int_equal(le32(p + 4), 0);
	assert_int_equal(le64(p + 8), 10); /* the note takes its event's time */
	assert_memory_equal(p + TD_BLKTRACE_RECORD_LEN, "kworker/u8:2+lo\0", 16);
	p += note;
	assert_int_equal(le32(p + 4), 2);
	assert_int_equal(le32(p + 28), 0x00110001);
	assert_int_equal(le64(p + 16), 64);
	p += TD_BLKTRACE_RECORD_LEN;
	assert_int_equal(le32(p + 4), 3);
	assert_int_equal(le32(p + 28), 0x00120004);
	p += TD_BLKTRACE_RECORD_LEN;
	assert_int_equal(le32(p + 4), 4);
	assert_int_equal(le32(p + 32), 77);
	td_blktrace_free(bt);
}

static void test_add_writes_no_note_for_unnamed_or_nonpositive_pid(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, fake_comm, s);

	assert_non_null(bt);
	/* 555 is unknown to fake_comm: asked once, then remembered as nameless. */
	assert_int_equal(add(bt, event('Q', "write", 1, 555, 0, 8)), 0);
	assert_int_equal(add(bt, event('D', "write", 2, 555, 0, 8)), 0);
	assert_int_equal(add(bt, event('C', "write", 3, 0, 0, 8)), 0);
	assert_int_equal(add(bt, event('C', "write", 4, -1, 0, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->comm_calls, 1);
	assert_int_equal(s->last_comm_pid, 555);
	assert_int_equal(s->len, 4 * TD_BLKTRACE_RECORD_LEN);
	/* A negative pid is written as 0, never as a huge unsigned one. */
	assert_int_equal(le32((const unsigned char *)s->buf + 3 * TD_BLKTRACE_RECORD_LEN + 32), 0);
	td_blktrace_free(bt);
}

static void test_add_without_comm_callback_writes_no_notes(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_MKDEV(8, 0), NULL, NULL);

	assert_non_null(bt);
	assert_int_equal(add(bt, event('Q', "read", 1, 4321, 0, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, TD_BLKTRACE_RECORD_LEN);
	assert_int_equal(le32((const unsigned char *)s->buf + 36), 8U << 20);
	td_blktrace_free(bt);
}

static struct td_blktrace *reordering_writer(FILE *f, uint64_t reorder_ns, size_t reorder_max)
{
	return td_blktrace_create(&(struct td_blktrace_writer_params){
		.emit = file_emit,
		.emit_arg = f,
		.device = TD_BLKTRACE_DEVICE,
		.reorder_ns = reorder_ns,
		.reorder_max = reorder_max,
	});
}

/* The record @i of @s (I/O records only: no notes in these tests). */
static const unsigned char *record(const struct sink *s, size_t i)
{
	return (const unsigned char *)s->buf + i * TD_BLKTRACE_RECORD_LEN;
}

static void test_add_writes_events_in_time_order_with_their_own_times(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = reordering_writer(s->f, 1000, 0);
	/* Arrival order; each event's sector is its index here. */
	static const uint64_t in[] = { 1000000, 1000500, 1000400, 999900, 1002000 };
	/* Written: by time, each with its own time relative to the first written. */
	static const uint64_t want_sector[] = { 3, 0, 2, 1, 4 };
	static const uint64_t want_rel[] = { 0, 100, 500, 600, 2100 };
	size_t i;

	assert_non_null(bt);
	for (i = 0; i < TD_ARRAY_SIZE(in) - 1; i++)
		assert_int_equal(add(bt, event('Q', "write", in[i], 1, i, 8)), 0);
	/* Nothing is 1000 ns older than the newest yet: all four are held. */
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, 0);
	assert_int_equal(add(bt, event('Q', "write", in[4], 1, 4, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, 4 * TD_BLKTRACE_RECORD_LEN);
	assert_int_equal(td_blktrace_flush(bt, UINT64_MAX), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, TD_ARRAY_SIZE(in) * TD_BLKTRACE_RECORD_LEN);
	for (i = 0; i < TD_ARRAY_SIZE(in); i++) {
		assert_int_equal(le64(record(s, i) + 16), want_sector[i]);
		assert_int_equal(le64(record(s, i) + 8), want_rel[i]);
		assert_int_equal(le32(record(s, i) + 4), i + 1);
	}
	assert_int_equal(td_blktrace_events(bt), TD_ARRAY_SIZE(in));
	assert_int_equal(td_blktrace_late(bt), 0);
	assert_int_equal(td_blktrace_lost(bt), 0);
	td_blktrace_free(bt);
}

static void test_add_drops_and_says_an_event_older_than_one_written(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, NULL, NULL);
	static const char msg[] = TD_BLKTRACE_DROPPED_MSG "1";
	const unsigned char *p;

	/* Without a window each event is written as it comes: the second is too late. */
	assert_non_null(bt);
	assert_int_equal(add(bt, event('D', "write", 5000, 1, 0, 8)), 0);
	assert_int_equal(add(bt, event('Q', "write", 4000, 1, 8, 8)), 0);
	assert_int_equal(add(bt, event('C', "write", 7000, 1, 0, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, 3 * TD_BLKTRACE_RECORD_LEN + strlen(msg));
	assert_int_equal(td_blktrace_events(bt), 2);
	assert_int_equal(td_blktrace_lost(bt), 1);
	p = (const unsigned char *)s->buf;
	assert_int_equal(le64(p + 8), 0);
	p += TD_BLKTRACE_RECORD_LEN;
	/* A message at the last time written, not a record at a time it did not have. */
	assert_int_equal(le32(p + 28), TD_BLKTRACE_TN_MESSAGE);
	assert_int_equal(le64(p + 8), 0);
	assert_memory_equal(p + TD_BLKTRACE_RECORD_LEN, msg, strlen(msg));
	p += TD_BLKTRACE_RECORD_LEN + strlen(msg);
	assert_int_equal(le64(p + 8), 2000);
	assert_int_equal(le32(p + 4), 3); /* the gap blkparse counts */
	assert_int_equal(td_blktrace_late(bt), 1);
	td_blktrace_free(bt);
}

static void test_add_writes_the_oldest_when_the_window_is_full(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = reordering_writer(s->f, UINT64_MAX / 2, 2);

	assert_non_null(bt);
	assert_int_equal(add(bt, event('Q', "write", 300, 1, 0, 8)), 0);
	assert_int_equal(add(bt, event('Q', "write", 100, 1, 8, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, 0);
	/* A third does not fit: the oldest held (100) goes out, with its own time. */
	assert_int_equal(add(bt, event('Q', "write", 200, 1, 16, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, TD_BLKTRACE_RECORD_LEN);
	assert_int_equal(le64(record(s, 0) + 16), 8);
	/* Flushing up to a time writes what is that old, and keeps the rest. */
	assert_int_equal(td_blktrace_flush(bt, 250), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, 2 * TD_BLKTRACE_RECORD_LEN);
	assert_int_equal(le64(record(s, 1) + 16), 16);
	assert_int_equal(le64(record(s, 1) + 8), 100);
	assert_int_equal(td_blktrace_flush(bt, UINT64_MAX), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(le64(record(s, 2) + 8), 200);
	/* Equal times keep the order they were added in. */
	assert_int_equal(add(bt, event('D', "write", 400, 1, 24, 8)), 0);
	assert_int_equal(add(bt, event('C', "write", 400, 1, 24, 8)), 0);
	assert_int_equal(td_blktrace_flush(bt, UINT64_MAX), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(le32(record(s, 3) + 28) & 0xffff, 7); /* D: issue */
	assert_int_equal(le32(record(s, 4) + 28) & 0xffff, 8); /* C: complete */
	td_blktrace_free(bt);
}

/*
 * The window against a model: 20000 events, mostly in time order, some late by up to
 * 3 us, a window of 2.5 us, first by time and then by count (at most 2000 events
 * held), that wraps and grows. The model keeps a plain sorted array; the records must be the model's, in its
 * order, and every event is either written or counted late.
 */
#define MODEL_EVENTS 20000
#define MODEL_MAX 2000
#define MODEL_REORDER 2500

struct model {
	struct td_blktrace_event held[MODEL_MAX + 1];
	size_t nr;
	uint64_t out_time[MODEL_EVENTS];
	uint64_t out_sector[MODEL_EVENTS];
	size_t nr_out;
	bool started;
	uint64_t last;
	uint64_t newest;
	uint64_t late;
};

static void model_write_front(struct model *m)
{
	m->out_time[m->nr_out] = m->held[0].time_ns;
	m->out_sector[m->nr_out++] = m->held[0].sector;
	m->last = m->held[0].time_ns;
	m->started = true;
	memmove(m->held, m->held + 1, --m->nr * sizeof(m->held[0]));
}

static void model_add(struct model *m, const struct td_blktrace_event *ev)
{
	size_t pos = m->nr;

	if (m->started && ev->time_ns < m->last) {
		m->late++;
		return;
	}
	while (pos && m->held[pos - 1].time_ns > ev->time_ns)
		pos--;
	memmove(m->held + pos + 1, m->held + pos, (m->nr - pos) * sizeof(m->held[0]));
	m->held[pos] = *ev;
	m->nr++;
	m->newest = ev->time_ns > m->newest ? ev->time_ns : m->newest;
	while (m->nr > MODEL_MAX)
		model_write_front(m);
	while (m->nr && m->newest >= MODEL_REORDER && m->held[0].time_ns <= m->newest - MODEL_REORDER)
		model_write_front(m);
}

static void test_add_orders_like_a_sorted_array_model(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = reordering_writer(s->f, MODEL_REORDER, MODEL_MAX);
	struct model *m = calloc(1, sizeof(*m));
	const unsigned char *p, *end;
	size_t n = 0;
	uint64_t seed = 42;

	assert_non_null(bt);
	assert_non_null(m);
	uint64_t t0 = 10000;

	for (uint64_t i = 0; i < MODEL_EVENTS; i++) {
		/*
		 * Events 10 ns apart, then 1 ns apart from the 2000th: the window, which
		 * has written events by then, grows while its start is past slot 0.
		 */
		uint64_t t = t0 + (i < 2000 ? i * 10 : 20000 + (i - 2000));

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		/* One event in eight late by up to 3 us; some share a time with another. */
		if ((seed >> 33) % 8 == 0)
			t -= (seed >> 40) % 3000;
		else if ((seed >> 33) % 8 == 1)
			t -= t % 40;
		struct td_blktrace_event ev = event('Q', "write", t, 1, i, 8);

		assert_int_equal(add(bt, ev), 0);
		model_add(m, &ev);
	}
	assert_int_equal(td_blktrace_flush(bt, UINT64_MAX), 0);
	while (m->nr)
		model_write_front(m);
	assert_int_equal(fflush(s->f), 0);
	assert_true(m->late > 0 && m->late < MODEL_EVENTS / 8);
	assert_int_equal(td_blktrace_late(bt), m->late);
	assert_int_equal(m->nr_out + m->late, MODEL_EVENTS);

	/* The I/O records in the file, skipping the messages that say what was dropped. */
	p = (const unsigned char *)s->buf;
	end = p + s->len;
	while (p < end) {
		uint16_t pdu = le16(p + 46);

		if (!pdu) {
			assert_true(n < m->nr_out);
			assert_int_equal(le64(p + 8), m->out_time[n] - m->out_time[0]);
			assert_int_equal(le64(p + 16), m->out_sector[n]);
			n++;
		}
		p += TD_BLKTRACE_RECORD_LEN + pdu;
	}
	assert_int_equal(n, m->nr_out);
	free(m);
	td_blktrace_free(bt);
}

static void test_add_puts_positive_errno_only_on_completions(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, NULL, NULL);
	struct td_blktrace_event c = event('C', "read", 1, 1, 0, 8);
	struct td_blktrace_event d = event('D', "read", 1, 1, 0, 8);
	struct td_blktrace_event ok = event('C', "read", 1, 1, 0, 8);
	const unsigned char *p;

	assert_non_null(bt);
	c.error = -EIO;
	d.error = -EIO;
	assert_int_equal(td_blktrace_add(bt, &c), 0);
	assert_int_equal(td_blktrace_add(bt, &d), 0);
	assert_int_equal(td_blktrace_add(bt, &ok), 0);
	assert_int_equal(fflush(s->f), 0);
	p = (const unsigned char *)s->buf;
	assert_int_equal(le16(p + 44), EIO);
	assert_int_equal(le16(p + TD_BLKTRACE_RECORD_LEN + 44), 0);
	assert_int_equal(le16(p + 2 * TD_BLKTRACE_RECORD_LEN + 44), 0);
	td_blktrace_free(bt);
}

static void test_add_gives_flush_zero_bytes_and_bytes_of_sectors(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, NULL, NULL);
	const unsigned char *p;

	assert_non_null(bt);
	assert_int_equal(add(bt, event('D', "flush", 1, 1, 0, 0)), 0);
	assert_int_equal(add(bt, event('D', "write", 2, 1, 8, 2048)), 0);
	assert_int_equal(fflush(s->f), 0);
	p = (const unsigned char *)s->buf;
	assert_int_equal(le32(p + 24), 0);
	assert_int_equal(le32(p + 28), 0x00450007);
	assert_int_equal(le32(p + TD_BLKTRACE_RECORD_LEN + 24), 1048576);
	td_blktrace_free(bt);
}

static void test_add_rejects_unknown_action_and_writes_nothing(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, fake_comm, s);

	assert_non_null(bt);
	assert_int_equal(add(bt, event('Z', "write", 9, 4321, 0, 8)), -EINVAL);
	assert_int_equal(add(bt, event('Q', "copy", 9, 4321, 0, 8)), -EINVAL);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, 0);
	assert_int_equal(s->comm_calls, 0);
	assert_int_equal(td_blktrace_events(bt), 0);
	assert_int_equal(td_blktrace_bytes(bt), 0);
	/* Nor did the rejected events fix time 0 or take a sequence number. */
	assert_int_equal(add(bt, event('Q', "write", 50, 1, 0, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(le32((const unsigned char *)s->buf + 4), 1);
	assert_int_equal(le64((const unsigned char *)s->buf + 8), 0);
	td_blktrace_free(bt);
}

static void test_add_reports_the_errno_of_a_failed_write(void **state)
{
	FILE *ro = fopen("/dev/null", "r");
	struct td_blktrace *bt;

	(void)state;
	assert_non_null(ro);
	bt = writer(ro, TD_BLKTRACE_DEVICE, NULL, NULL);
	assert_non_null(bt);
	assert_int_equal(add(bt, event('Q', "write", 1, 1, 0, 8)), -EBADF);
	assert_int_equal(td_blktrace_events(bt), 0);
	assert_int_equal(td_blktrace_bytes(bt), 0);
	td_blktrace_free(bt);
	fclose(ro);
}

/* An emitter that fails while fail is set, and appends to buf otherwise. */
struct flaky {
	bool fail;
	unsigned char buf[16 * TD_BLKTRACE_RECORD_LEN];
	size_t len;
};

static int flaky_emit(void *arg, const void *buf, size_t len)
{
	struct flaky *f = arg;

	if (f->fail)
		return -EPIPE;
	assert_true(f->len + len <= sizeof(f->buf));
	memcpy(f->buf + f->len, buf, len);
	f->len += len;
	return 0;
}

/*
 * Writes that fail with the window full: each takes its event out of the window
 * (lost, as its error said), so the window never holds more than reorder_max + 1.
 */
static void test_add_after_a_failed_write_with_the_window_full(void **state)
{
	struct flaky f = { 0 };
	struct td_blktrace *bt = td_blktrace_create(&(struct td_blktrace_writer_params){
		.emit = flaky_emit,
		.emit_arg = &f,
		.device = TD_BLKTRACE_DEVICE,
		.reorder_ns = UINT64_MAX / 2,
		.reorder_max = 2,
	});

	(void)state;
	assert_non_null(bt);
	assert_int_equal(add(bt, event('Q', "write", 100, 1, 0, 8)), 0);
	assert_int_equal(add(bt, event('Q', "write", 200, 1, 8, 8)), 0);
	f.fail = true;
	/* Three held: the oldest must go out, and its write fails. */
	assert_int_equal(add(bt, event('Q', "write", 300, 1, 16, 8)), -EPIPE);
	assert_int_equal(add(bt, event('Q', "write", 400, 1, 24, 8)), -EPIPE);
	f.fail = false;
	assert_int_equal(add(bt, event('Q', "write", 500, 1, 32, 8)), 0);
	assert_int_equal(td_blktrace_flush(bt, UINT64_MAX), 0);
	/* 100 and 200 went with the failed writes; the others come in order. */
	assert_int_equal(f.len, 3 * TD_BLKTRACE_RECORD_LEN);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(le64(f.buf + i * TD_BLKTRACE_RECORD_LEN + 16), 8 * (i + 2));
	td_blktrace_free(bt);
}

static void test_dropped_writes_a_message_and_leaves_a_sequence_gap(void **state)
{
	struct sink *s = *state;
	struct td_blktrace *bt = writer(s->f, TD_BLKTRACE_DEVICE, NULL, NULL);
	static const char msg[] = TD_BLKTRACE_DROPPED_MSG "1234";
	const unsigned char *p;

	assert_non_null(bt);
	assert_int_equal(add(bt, event('Q', "write", 100, 1, 0, 8)), 0);
	assert_int_equal(add(bt, event('C', "write", 350, 1, 0, 8)), 0);
	assert_int_equal(td_blktrace_dropped(bt, 0), 0); /* nothing lost: nothing written */
	assert_int_equal(td_blktrace_dropped(bt, 1234), 0);
	assert_int_equal(add(bt, event('Q', "read", 900, 1, 64, 8)), 0);
	assert_int_equal(fflush(s->f), 0);
	assert_int_equal(s->len, 3 * TD_BLKTRACE_RECORD_LEN + TD_BLKTRACE_RECORD_LEN + strlen(msg));
	assert_int_equal(td_blktrace_events(bt), 3);
	assert_int_equal(td_blktrace_lost(bt), 1234);
	assert_int_equal(td_blktrace_bytes(bt), s->len);

	p = (const unsigned char *)s->buf + 2 * TD_BLKTRACE_RECORD_LEN;
	assert_int_equal(le32(p + 4), 0);			  /* a note has no sequence */
	assert_int_equal(le64(p + 8), 250);			  /* the last time written */
	assert_int_equal(le32(p + 28), TD_BLKTRACE_TN_MESSAGE);
	assert_int_equal(le16(p + 46), strlen(msg));
	assert_memory_equal(p + TD_BLKTRACE_RECORD_LEN, msg, strlen(msg));
	p += TD_BLKTRACE_RECORD_LEN + strlen(msg);
	assert_int_equal(le32(p + 4), 2 + 1234 + 1); /* blkparse counts the gap as lost */
	assert_int_equal(le64(p + 8), 800);
	td_blktrace_free(bt);
}

static void test_proc_comm_reads_the_name_of_a_live_process(void **state)
{
	char comm[TD_BLKTRACE_COMM_LEN];
	char old[TD_BLKTRACE_COMM_LEN] = "";

	(void)state;
	assert_int_equal(prctl(PR_GET_NAME, old), 0);
	assert_int_equal(prctl(PR_SET_NAME, "td-blk-check"), 0);
	memset(comm, 'x', sizeof(comm));
	assert_int_equal(td_blktrace_proc_comm((int32_t)gettid(), comm, NULL), 0);
	assert_memory_equal(comm, "td-blk-check\0\0\0\0", TD_BLKTRACE_COMM_LEN);
	prctl(PR_SET_NAME, old);
}

static void test_proc_comm_fails_for_no_process(void **state)
{
	char comm[TD_BLKTRACE_COMM_LEN];

	(void)state;
	assert_int_equal(td_blktrace_proc_comm(0, comm, NULL), -EINVAL);
	assert_int_equal(td_blktrace_proc_comm(-5, comm, NULL), -EINVAL);
	/* Above the kernel's largest pid_max (4194304). */
	assert_int_equal(td_blktrace_proc_comm(INT32_MAX, comm, NULL), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_lays_out_header_little_endian_at_fixed_offsets),
#ifdef HAVE_KERNEL_BLKTRACE_API
		cmocka_unit_test(test_encode_matches_kernel_struct_layout),
#endif
		cmocka_unit_test(test_action_maps_each_event_letter_to_its_step),
		cmocka_unit_test(test_action_sets_the_categories_of_each_op),
		cmocka_unit_test(test_action_is_zero_for_unknown_letter_or_op),
		cmocka_unit_test_setup_teardown(test_add_writes_process_note_then_event_exact_bytes,
						sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(
			test_add_names_each_pid_once_and_numbers_only_io_records, sink_setup,
			sink_teardown),
		cmocka_unit_test_setup_teardown(
			test_add_writes_no_note_for_unnamed_or_nonpositive_pid, sink_setup,
			sink_teardown),
		cmocka_unit_test_setup_teardown(test_add_without_comm_callback_writes_no_notes,
						sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_add_writes_events_in_time_order_with_their_own_times,
						sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_add_drops_and_says_an_event_older_than_one_written,
						sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_add_writes_the_oldest_when_the_window_is_full,
						sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_add_orders_like_a_sorted_array_model,
						sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_add_puts_positive_errno_only_on_completions,
						sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(
			test_add_gives_flush_zero_bytes_and_bytes_of_sectors, sink_setup,
			sink_teardown),
		cmocka_unit_test_setup_teardown(test_add_rejects_unknown_action_and_writes_nothing,
						sink_setup, sink_teardown),
		cmocka_unit_test(test_add_reports_the_errno_of_a_failed_write),
		cmocka_unit_test(test_add_after_a_failed_write_with_the_window_full),
		cmocka_unit_test_setup_teardown(
			test_dropped_writes_a_message_and_leaves_a_sequence_gap, sink_setup,
			sink_teardown),
		cmocka_unit_test(test_proc_comm_reads_the_name_of_a_live_process),
		cmocka_unit_test(test_proc_comm_fails_for_no_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
