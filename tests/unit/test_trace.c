// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_trace.c - the trace hub: delivery, ordering, overflow accounting, threads, and the
 * memory budget.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>
#include "tagdisk/trace.h"
#include "unit_util.h"

/*
 * Subscribers live in the fixture so that teardown can unsubscribe whatever a
 * failed assertion left behind, and the hub can still be destroyed cleanly.
 */
#define FX_SUBS 4
/* Rings of a fixture's subscriber: more than any test's threads alive at once. */
#define FX_RINGS 8
/* The fixture hub's budget: room for every test's subscribers. */
#define FX_BUDGET (64U << 20)

struct trace_fixture {
	struct td_trace *t;
	struct td_trace_sub *subs[FX_SUBS];
};

static int trace_setup(void **state)
{
	struct trace_fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->t = td_trace_create(FX_BUDGET);
	assert_non_null(f->t);
	*state = f;
	return 0;
}

static int trace_teardown(void **state)
{
	struct trace_fixture *f = *state;

	for (int i = 0; i < FX_SUBS; i++)
		if (f->subs[i])
			td_trace_unsubscribe(f->t, f->subs[i]);
	td_trace_destroy(f->t);
	free(f);
	return 0;
}

/* Subscribe slot @i with @capacity; fails the test on error. */
static struct td_trace_sub *fx_subscribe(struct trace_fixture *f, int i, size_t capacity)
{
	assert_null(f->subs[i]);
	f->subs[i] = td_trace_subscribe(f->t, &(struct td_trace_sub_params){
						      .ring_events = capacity,
						      .nr_rings = FX_RINGS,
					      });
	assert_non_null(f->subs[i]);
	return f->subs[i];
}

static void fx_unsubscribe(struct trace_fixture *f, int i)
{
	assert_non_null(f->subs[i]);
	td_trace_unsubscribe(f->t, f->subs[i]);
	f->subs[i] = NULL;
}

static unsigned int nr_subs(struct td_trace *t)
{
	return atomic_load(&t->nr_subs);
}

/* A queue event numbered @seq, carried in its sector; its time is 1000 + @seq. */
static void emit_seq(struct td_trace *t, uint64_t seq)
{
	td_trace_emit(t, TD_TA_QUEUE, TD_OP_WRITE, false, seq, 8, 1, -1, 0, 1000 + seq);
}

static void test_trace_emit_with_null_hub_is_noop(void **state)
{
	(void)state;
	td_trace_emit(NULL, TD_TA_QUEUE, TD_OP_READ, false, 0, 8, 1, -1, 0, 0);
	td_trace_emit(NULL, TD_TA_COMPLETE, TD_OP_WRITE, true, 1, 8, 1, 3, -EIO, 0);
}

static void test_trace_emit_without_subscriber_delivers_nothing_later(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[4];
	uint64_t dropped = 77;
	struct td_trace_sub *sub;

	assert_int_equal(nr_subs(f->t), 0);
	for (uint64_t i = 0; i < 10; i++)
		emit_seq(f->t, i);

	sub = fx_subscribe(f, 0, 4);
	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 0);
	assert_int_equal(dropped, 0);
}

static void test_trace_subscriber_receives_events_in_order_with_exact_fields(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace *t = f->t;
	struct td_trace_event out[8];
	uint64_t dropped = 99;
	struct td_trace_sub *sub = fx_subscribe(f, 0, 8);

	assert_int_equal(nr_subs(t), 1);
	td_trace_emit(t, TD_TA_QUEUE, TD_OP_WRITE, true, 123456789012ULL, 16, 4242, -1, 0, 1000);
	td_trace_emit(t, TD_TA_DISPATCH, TD_OP_READ, false, 2048, 256, 17, 31, 0, 2000);
	td_trace_emit(t, TD_TA_COMPLETE, TD_OP_DISCARD, false, 7, 1, 0, 5, -EIO, 3000);

	assert_int_equal(td_trace_read(t, sub, out, TD_ARRAY_SIZE(out), &dropped), 3);
	assert_int_equal(dropped, 0);

	assert_int_equal(out[0].action, 'Q');
	assert_int_equal(out[0].op, TD_OP_WRITE);
	assert_int_equal(out[0].fua, 1);
	assert_int_equal(out[0].sector, 123456789012ULL);
	assert_int_equal(out[0].nr_sectors, 16);
	assert_int_equal(out[0].pid, 4242);
	assert_int_equal(out[0].tag, -1);
	assert_int_equal(out[0].error, 0);
	assert_int_equal(out[0].time_ns, 1000);

	assert_int_equal(out[1].action, 'D');
	assert_int_equal(out[1].op, TD_OP_READ);
	assert_int_equal(out[1].fua, 0);
	assert_int_equal(out[1].sector, 2048);
	assert_int_equal(out[1].nr_sectors, 256);
	assert_int_equal(out[1].pid, 17);
	assert_int_equal(out[1].tag, 31);
	assert_int_equal(out[1].error, 0);
	assert_int_equal(out[1].time_ns, 2000);

	assert_int_equal(out[2].action, 'C');
	assert_int_equal(out[2].op, TD_OP_DISCARD);
	assert_int_equal(out[2].fua, 0);
	assert_int_equal(out[2].sector, 7);
	assert_int_equal(out[2].nr_sectors, 1);
	assert_int_equal(out[2].pid, 0);
	assert_int_equal(out[2].tag, 5);
	assert_int_equal(out[2].error, -EIO);
	assert_int_equal(out[2].time_ns, 3000);

	/* Read moves events out: nothing is left. */
	assert_int_equal(td_trace_read(t, sub, out, TD_ARRAY_SIZE(out), &dropped), 0);
	fx_unsubscribe(f, 0);
	assert_int_equal(nr_subs(t), 0);
}

static void test_trace_read_respects_max_and_keeps_the_rest(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[8];
	uint64_t dropped;
	struct td_trace_sub *sub = fx_subscribe(f, 0, 8);

	for (uint64_t i = 0; i < 5; i++)
		emit_seq(f->t, i);
	assert_int_equal(td_trace_read(f->t, sub, out, 2, &dropped), 2);
	assert_int_equal(out[0].sector, 0);
	assert_int_equal(out[1].sector, 1);
	assert_int_equal(td_trace_read(f->t, sub, out, 0, &dropped), 0);
	assert_int_equal(td_trace_read(f->t, sub, out, 8, &dropped), 3);
	assert_int_equal(out[0].sector, 2);
	assert_int_equal(out[1].sector, 3);
	assert_int_equal(out[2].sector, 4);
	assert_int_equal(out[2].time_ns, 1004);
	assert_int_equal(dropped, 0);
}

static void test_trace_ring_wraps_around_keeping_order(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[4];
	uint64_t dropped;
	uint64_t next_emit = 0;
	uint64_t next_read = 0;
	struct td_trace_sub *sub = fx_subscribe(f, 0, 4);

	/* Emit 3, read 2, then the rest: head and tail go round the ring of 4 many times. */
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 3; i++)
			emit_seq(f->t, next_emit++);
		size_t n = td_trace_read(f->t, sub, out, 2, &dropped);

		assert_int_equal(n, 2);
		assert_int_equal(dropped, 0);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(out[i].sector, next_read++);
		n = td_trace_read(f->t, sub, out, 4, &dropped);
		assert_int_equal(n, 1);
		assert_int_equal(out[0].sector, next_read++);
	}
	assert_int_equal(next_read, 60);

	/* A full ring read in one call whose oldest event is not at index 0. */
	for (int i = 0; i < 4; i++)
		emit_seq(f->t, next_emit++);
	assert_int_equal(td_trace_read(f->t, sub, out, 4, &dropped), 4);
	assert_int_equal(dropped, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(out[i].sector, next_read++);
}

static void test_trace_overflow_drops_newest_and_counts_exactly(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[16];
	uint64_t dropped = 0;
	/* 5 rounds up to a ring of 8. */
	struct td_trace_sub *sub = fx_subscribe(f, 0, 5);

	for (uint64_t i = 0; i < 11; i++)
		emit_seq(f->t, i);

	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 8);
	assert_int_equal(dropped, 3);
	for (uint64_t i = 0; i < 8; i++)
		assert_int_equal(out[i].sector, i);

	/* The count is reset by the read that reported it. */
	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 0);
	assert_int_equal(dropped, 0);

	/* Room again: new events arrive, and a later overflow counts from zero. */
	for (uint64_t i = 100; i < 110; i++)
		emit_seq(f->t, i);
	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 8);
	assert_int_equal(dropped, 2);
	assert_int_equal(out[0].sector, 100);
	assert_int_equal(out[7].sector, 107);
}

static void test_trace_capacity_zero_and_one_hold_one_event(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[4];
	uint64_t dropped;
	struct td_trace_sub *zero = fx_subscribe(f, 0, 0);
	struct td_trace_sub *one = fx_subscribe(f, 1, 1);

	for (uint64_t i = 0; i < 3; i++)
		emit_seq(f->t, i);
	assert_int_equal(td_trace_read(f->t, zero, out, 4, &dropped), 1);
	assert_int_equal(out[0].sector, 0);
	assert_int_equal(dropped, 2);
	assert_int_equal(td_trace_read(f->t, one, out, 4, &dropped), 1);
	assert_int_equal(out[0].sector, 0);
	assert_int_equal(dropped, 2);
}

/* A subscriber of one ring of @events, in @f's slot @i. */
static struct td_trace_sub *fx_subscribe_rings(struct trace_fixture *f, int i, size_t events,
					       unsigned int nr_rings)
{
	assert_null(f->subs[i]);
	f->subs[i] = td_trace_subscribe(f->t, &(struct td_trace_sub_params){
						      .ring_events = events,
						      .nr_rings = nr_rings,
					      });
	assert_non_null(f->subs[i]);
	return f->subs[i];
}

static void test_trace_ring_rounding_never_passes_the_cap(void **state)
{
	struct trace_fixture *f = *state;
	/* 64 MiB of events (what `trace buffer_kib=65536` asks) rounds up past the cap. */
	size_t asked = (64U << 20) / sizeof(struct td_trace_event);
	size_t cap_bytes = td_trace_sub_cost(TD_TRACE_RING_EVENTS_MAX, 1);
	struct td_trace_sub *sub;

	assert_true(asked > TD_TRACE_RING_EVENTS_MAX);
	assert_true(cap_bytes < FX_BUDGET);
	assert_int_equal(td_trace_sub_cost(asked, 1), cap_bytes);
	assert_int_equal(td_trace_sub_cost(SIZE_MAX, 1), cap_bytes);
	/* Below the cap it rounds up: 5 -> 8, as the ring tests below rely on. */
	assert_true(td_trace_sub_cost(5, 1) == td_trace_sub_cost(8, 1));
	assert_true(td_trace_sub_cost(9, 1) == td_trace_sub_cost(16, 1));

	sub = fx_subscribe_rings(f, 0, asked, 1);
	assert_int_equal(td_trace_sub_ring_events(sub), TD_TRACE_RING_EVENTS_MAX);
	assert_int_equal(td_trace_sub_bytes(sub), cap_bytes);
	/* The ring and its counters, rounded to pages: no more. */
	assert_true(cap_bytes <= (size_t)TD_TRACE_RING_EVENTS_MAX * sizeof(struct td_trace_event) +
					  65536);
	fx_unsubscribe(f, 0);
	sub = fx_subscribe_rings(f, 0, SIZE_MAX, 1);
	assert_int_equal(td_trace_sub_ring_events(sub), TD_TRACE_RING_EVENTS_MAX);
}

static void test_trace_nr_rings_out_of_range_fails_with_einval(void **state)
{
	struct trace_fixture *f = *state;

	errno = 0;
	assert_null(td_trace_subscribe(f->t, &(struct td_trace_sub_params){ .ring_events = 4 }));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(td_trace_subscribe(f->t, &(struct td_trace_sub_params){
						     .ring_events = 4,
						     .nr_rings = TD_TRACE_MAX_THREADS + 1,
					     }));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(nr_subs(f->t), 0);
}

static void test_trace_subscribe_makes_every_ring_resident(void **state)
{
	struct trace_fixture *f = *state;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct td_trace_sub *sub = fx_subscribe_rings(f, 0, 65536, 4);
	size_t bytes = td_trace_sub_bytes(sub);
	size_t used;

	/* The subscriber is its mapping's first bytes (trace.c), and all of it is there now. */
	assert_int_equal(bytes % page, 0);
	assert_true(bytes >= 4 * 65536 * sizeof(struct td_trace_event));
	assert_int_equal(resident_pages(sub, bytes), bytes / page);
	assert_int_equal(td_trace_budget(f->t, &used), FX_BUDGET);
	assert_int_equal(used, bytes);
	fx_unsubscribe(f, 0);
	assert_int_equal(td_trace_budget(f->t, &used), FX_BUDGET);
	assert_int_equal(used, 0);
}

/* What a reader spends besides the rings is charged with them, and given back with them. */
static void test_trace_extra_bytes_are_charged_with_the_rings(void **state)
{
	struct trace_fixture *f = *state;
	size_t rings = td_trace_sub_cost(4096, 2);
	size_t extra = 3U << 20;
	struct td_trace_sub_params p = { .ring_events = 4096, .nr_rings = 2, .extra_bytes = extra };
	size_t used;

	f->subs[0] = td_trace_subscribe(f->t, &p);
	assert_non_null(f->subs[0]);
	assert_int_equal(td_trace_sub_bytes(f->subs[0]), rings + extra);
	td_trace_budget(f->t, &used);
	assert_int_equal(used, rings + extra);

	/* Extra bytes alone over what is left: refused, nothing taken. */
	p.extra_bytes = FX_BUDGET - used + 1;
	errno = 0;
	assert_null(td_trace_subscribe(f->t, &p));
	assert_int_equal(errno, ENOSPC);
	/* Rings that fit only without the extra bytes: refused too. */
	p.extra_bytes = FX_BUDGET - used - rings + 1;
	errno = 0;
	assert_null(td_trace_subscribe(f->t, &p));
	assert_int_equal(errno, ENOSPC);
	/* Exactly what is left fits. */
	p.extra_bytes = FX_BUDGET - used - rings;
	f->subs[1] = td_trace_subscribe(f->t, &p);
	assert_non_null(f->subs[1]);
	td_trace_budget(f->t, &used);
	assert_int_equal(used, FX_BUDGET);

	fx_unsubscribe(f, 1);
	fx_unsubscribe(f, 0);
	td_trace_budget(f->t, &used);
	assert_int_equal(used, 0);
}

/* /proc/self/statm's first field: the pages mapped. */
static unsigned long vm_pages(void)
{
	unsigned long size = 0;
	FILE *fp = fopen("/proc/self/statm", "r");

	assert_non_null(fp);
	assert_int_equal(fscanf(fp, "%lu", &size), 1);
	fclose(fp);
	return size;
}

struct first_emit {
	struct td_trace *t;
	size_t heap_before, heap_after;
	unsigned long vm_before, vm_after;
};

/* A new thread's first events: measured around them, in the thread itself. */
static void *first_emit_main(void *arg)
{
	struct first_emit *fe = arg;
	struct mallinfo2 mi;

	/* Once first: the thread's own malloc state is set up by its first fopen(). */
	(void)vm_pages();
	mi = mallinfo2();
	fe->heap_before = mi.uordblks + mi.hblkhd;
	fe->vm_before = vm_pages();
	for (uint64_t i = 0; i < 100; i++)
		emit_seq(fe->t, i);
	mi = mallinfo2();
	fe->heap_after = mi.uordblks + mi.hblkhd;
	fe->vm_after = vm_pages();
	return NULL;
}

static void test_trace_emit_allocates_nothing(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[128];
	uint64_t dropped = 1;
	struct first_emit fe = { .t = f->t };
	pthread_t th;

	fx_subscribe_rings(f, 0, 65536, 4);
	fx_subscribe_rings(f, 1, 65536, 4);
	assert_int_equal(pthread_create(&th, NULL, first_emit_main, &fe), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	/* The thread took a ring in each subscriber: not a byte of heap, not a page mapped. */
	assert_int_equal(fe.heap_after, fe.heap_before);
	/* valgrind maps memory of its own as the program runs: there, only the heap counts. */
	if (!strstr(getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "", "vgpreload"))
		assert_int_equal(fe.vm_after, fe.vm_before);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(td_trace_read(f->t, f->subs[i], out, TD_ARRAY_SIZE(out), &dropped),
				 100);
		assert_int_equal(dropped, 0);
	}
}

static void test_trace_subscribers_share_one_budget(void **state)
{
	struct trace_fixture *f = *state;
	size_t one = td_trace_sub_cost(4096, 4);
	struct td_trace *t = td_trace_create(3 * one);
	struct td_trace_sub *subs[4] = { 0 };
	struct td_trace_sub_params p = { .ring_events = 4096, .nr_rings = 4 };
	size_t used;

	(void)f;
	assert_non_null(t);
	for (int i = 0; i < 3; i++) {
		subs[i] = td_trace_subscribe(t, &p);
		assert_non_null(subs[i]);
		assert_int_equal(td_trace_sub_bytes(subs[i]), one);
	}
	assert_int_equal(td_trace_budget(t, &used), 3 * one);
	assert_int_equal(used, 3 * one);
	/* The fourth does not fit: refused, nothing taken. */
	errno = 0;
	assert_null(td_trace_subscribe(t, &p));
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(nr_subs(t), 3);
	td_trace_budget(t, &used);
	assert_int_equal(used, 3 * one);
	/* One leaves: its memory is back, and the next one fits. */
	td_trace_unsubscribe(t, subs[1]);
	subs[1] = td_trace_subscribe(t, &p);
	assert_non_null(subs[1]);
	for (int i = 0; i < 3; i++)
		td_trace_unsubscribe(t, subs[i]);
	td_trace_budget(t, &used);
	assert_int_equal(used, 0);
	td_trace_destroy(t);
}

static void test_trace_a_subscriber_that_allows_it_gets_smaller_rings(void **state)
{
	size_t big = td_trace_sub_cost(65536, 4);
	size_t small = td_trace_sub_cost(8192, 4);
	struct td_trace_sub_params p = { .ring_events = 65536, .min_ring_events = 1024,
					 .nr_rings = 4 };
	struct td_trace *t;
	struct td_trace_sub *a, *b;
	size_t used;

	(void)state;
	/* Room for one subscriber of 65536 events per ring, and one of 8192. */
	t = td_trace_create(big + small);
	assert_non_null(t);
	a = td_trace_subscribe(t, &p);
	assert_non_null(a);
	assert_int_equal(td_trace_sub_ring_events(a), 65536);
	/* The next one gets the largest power of two that fits. */
	b = td_trace_subscribe(t, &p);
	assert_non_null(b);
	assert_int_equal(td_trace_sub_ring_events(b), 8192);
	assert_int_equal(td_trace_sub_bytes(b), small);
	td_trace_budget(t, &used);
	assert_int_equal(used, big + small);
	/* Nothing left: refused, with or without a minimum. */
	errno = 0;
	assert_null(td_trace_subscribe(t, &p));
	assert_int_equal(errno, ENOSPC);
	p.min_ring_events = 0;
	p.ring_events = 1;
	errno = 0;
	assert_null(td_trace_subscribe(t, &p));
	assert_int_equal(errno, ENOSPC);
	/* A minimum above what fits is refused too, not given less. */
	td_trace_unsubscribe(t, b);
	p.ring_events = 65536;
	p.min_ring_events = 16384;
	errno = 0;
	assert_null(td_trace_subscribe(t, &p));
	assert_int_equal(errno, ENOSPC);
	td_trace_unsubscribe(t, a);
	td_trace_destroy(t);
}

static void test_trace_two_subscribers_each_get_every_event(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[16];
	uint64_t dropped;
	struct td_trace_sub *a = fx_subscribe(f, 0, 16);
	struct td_trace_sub *b = fx_subscribe(f, 1, 4);

	assert_int_equal(nr_subs(f->t), 2);
	for (uint64_t i = 0; i < 6; i++)
		emit_seq(f->t, i);

	/* Each ring is independent: b overflows, a does not. */
	assert_int_equal(td_trace_read(f->t, a, out, TD_ARRAY_SIZE(out), &dropped), 6);
	assert_int_equal(dropped, 0);
	for (uint64_t i = 0; i < 6; i++)
		assert_int_equal(out[i].sector, i);
	assert_int_equal(td_trace_read(f->t, b, out, TD_ARRAY_SIZE(out), &dropped), 4);
	assert_int_equal(dropped, 2);
	for (uint64_t i = 0; i < 4; i++)
		assert_int_equal(out[i].sector, i);
}

static void test_trace_unsubscribe_stops_delivery(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[8];
	uint64_t dropped;
	struct td_trace_sub *b;

	fx_subscribe(f, 0, 8);
	b = fx_subscribe(f, 1, 8);
	emit_seq(f->t, 1);
	fx_unsubscribe(f, 0);
	assert_int_equal(nr_subs(f->t), 1);
	emit_seq(f->t, 2);

	assert_int_equal(td_trace_read(f->t, b, out, TD_ARRAY_SIZE(out), &dropped), 2);
	assert_int_equal(out[0].sector, 1);
	assert_int_equal(out[1].sector, 2);

	fx_unsubscribe(f, 1);
	assert_int_equal(nr_subs(f->t), 0);
	/* Nobody listens any more: emitting is harmless. */
	emit_seq(f->t, 3);

	/* A fresh subscriber starts empty. */
	b = fx_subscribe(f, 0, 8);
	assert_int_equal(td_trace_read(f->t, b, out, TD_ARRAY_SIZE(out), &dropped), 0);
	assert_int_equal(dropped, 0);
	fx_unsubscribe(f, 0);
	assert_int_equal(nr_subs(f->t), 0);
}

#define MT_EMITTERS   4
#define MT_EVENTS     50000
#define MT_RING	      1024
#define MT_READ_BATCH 64

struct mt_emitter {
	pthread_t thread;
	struct td_trace *t;
	int32_t id;
	_Atomic int *finished;
};

static void *mt_emitter_main(void *arg)
{
	struct mt_emitter *e = arg;

	for (uint64_t seq = 0; seq < MT_EVENTS; seq++)
		td_trace_emit(e->t, TD_TA_QUEUE, TD_OP_READ, false, seq, 8, e->id, -1, 0, seq);
	atomic_fetch_add(e->finished, 1);
	return NULL;
}

struct mt_churn {
	pthread_t thread;
	struct td_trace *t;
	_Atomic int *finished;
	unsigned long rounds;
	bool failed;
};

/* Subscribes and unsubscribes while the emitters run, racing the list changes. */
static void *mt_churn_main(void *arg)
{
	struct mt_churn *c = arg;
	struct td_trace_event out[MT_READ_BATCH];
	uint64_t dropped;

	while (atomic_load(c->finished) < MT_EMITTERS) {
		struct td_trace_sub *sub = td_trace_subscribe(c->t, &(struct td_trace_sub_params){
								      .ring_events = 16,
								      .nr_rings = FX_RINGS,
							      });

		if (!sub) {
			c->failed = true;
			break;
		}
		(void)td_trace_read(c->t, sub, out, MT_READ_BATCH, &dropped);
		td_trace_unsubscribe(c->t, sub);
		c->rounds++;
	}
	return NULL;
}

static void test_trace_concurrent_emitters_lose_nothing_unaccounted(void **state)
{
	struct trace_fixture *f = *state;
	struct mt_emitter emitters[MT_EMITTERS];
	struct td_trace_event out[MT_READ_BATCH];
	uint64_t received[MT_EMITTERS] = { 0 };
	int64_t last_seq[MT_EMITTERS];
	uint64_t total_received = 0;
	uint64_t total_dropped = 0;
	uint64_t bad_emitter = 0;
	uint64_t out_of_order = 0;
	uint64_t bad_fields = 0;
	_Atomic int finished = 0;
	struct mt_churn churn = { .t = f->t, .finished = &finished };
	struct td_trace_sub *sub = fx_subscribe(f, 0, MT_RING);
	bool done = false;

	for (int i = 0; i < MT_EMITTERS; i++)
		last_seq[i] = -1;
	for (int i = 0; i < MT_EMITTERS; i++) {
		emitters[i] = (struct mt_emitter){ .t = f->t, .id = i, .finished = &finished };
		assert_int_equal(pthread_create(&emitters[i].thread, NULL, mt_emitter_main,
						&emitters[i]),
				 0);
	}
	assert_int_equal(pthread_create(&churn.thread, NULL, mt_churn_main, &churn), 0);

	/* No assertion until the threads are joined: a failure must not free the hub under them. */
	while (!done) {
		/* Sampled before the read: once every emitter is done, one empty read ends it. */
		bool all_finished = atomic_load(&finished) == MT_EMITTERS;
		uint64_t dropped = 0;
		size_t n = td_trace_read(f->t, sub, out, MT_READ_BATCH, &dropped);

		total_dropped += dropped;
		for (size_t i = 0; i < n; i++) {
			int32_t id = out[i].pid;

			if (id < 0 || id >= MT_EMITTERS) {
				bad_emitter++;
				continue;
			}
			if ((int64_t)out[i].sector <= last_seq[id])
				out_of_order++;
			if (out[i].time_ns != out[i].sector || out[i].action != TD_TA_QUEUE ||
			    out[i].nr_sectors != 8)
				bad_fields++;
			last_seq[id] = (int64_t)out[i].sector;
			received[id]++;
		}
		total_received += n;
		done = all_finished && n == 0;
	}
	for (int i = 0; i < MT_EMITTERS; i++)
		assert_int_equal(pthread_join(emitters[i].thread, NULL), 0);
	assert_int_equal(pthread_join(churn.thread, NULL), 0);

	assert_false(churn.failed);
	assert_int_equal(bad_emitter, 0);
	assert_int_equal(out_of_order, 0);
	assert_int_equal(bad_fields, 0);
	assert_int_equal(total_received + total_dropped, (uint64_t)MT_EMITTERS * MT_EVENTS);
	for (int i = 0; i < MT_EMITTERS; i++)
		assert_true(received[i] <= MT_EVENTS);
	fx_unsubscribe(f, 0);
	assert_int_equal(nr_subs(f->t), 0);
}

/* ---- per-thread rings ------------------------------------------------------------------- */

struct stamp_thread {
	pthread_t thread;
	struct td_trace *t;
	int32_t id;
	uint64_t first, step, count; /* times first, first + step, ... */
	pthread_barrier_t *alive;    /* NULL, or: stay until every thread has emitted */
};

static void *stamp_main(void *arg)
{
	struct stamp_thread *st = arg;

	for (uint64_t i = 0; i < st->count; i++) {
		uint64_t time = st->first + i * st->step;

		td_trace_emit(st->t, TD_TA_QUEUE, TD_OP_READ, false, time, 8, st->id, -1, 0, time);
	}
	/* A thread that exits gives its slot (and ring) to the next one: keep them apart. */
	if (st->alive)
		pthread_barrier_wait(st->alive);
	return NULL;
}

static void run_stamp_threads(struct stamp_thread *th, size_t n)
{
	pthread_barrier_t alive;

	assert_int_equal(pthread_barrier_init(&alive, NULL, (unsigned int)n), 0);
	for (size_t i = 0; i < n; i++)
		th[i].alive = &alive;
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pthread_create(&th[i].thread, NULL, stamp_main, &th[i]), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pthread_join(th[i].thread, NULL), 0);
	pthread_barrier_destroy(&alive);
}

static void test_trace_rings_of_several_threads_are_merged_in_time_order(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[64];
	uint64_t dropped = 99;
	struct td_trace_sub *sub = fx_subscribe(f, 0, 16);
	/* Three threads, times interleaved: 0 3 6.. / 1 4 7.. / 2 5 8.. */
	struct stamp_thread th[3];

	for (int i = 0; i < 3; i++)
		th[i] = (struct stamp_thread){ .t = f->t, .id = i, .first = (uint64_t)i, .step = 3,
					       .count = 10 };
	run_stamp_threads(th, 3);
	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 30);
	assert_int_equal(dropped, 0);
	for (uint64_t i = 0; i < 30; i++) {
		assert_int_equal(out[i].time_ns, i);
		assert_int_equal(out[i].pid, (int32_t)(i % 3));
	}
}

static void test_trace_each_thread_has_its_own_ring_of_the_capacity(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[64];
	uint64_t dropped = 0;
	struct td_trace_sub *sub = fx_subscribe(f, 0, 8);
	struct stamp_thread th[2] = {
		{ .t = f->t, .id = 0, .first = 0, .step = 2, .count = 12 },
		{ .t = f->t, .id = 1, .first = 1, .step = 2, .count = 12 },
	};

	/* 8 fit in each thread's ring: 16 delivered, 4 + 4 dropped, nothing shared. */
	run_stamp_threads(th, 2);
	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 16);
	assert_int_equal(dropped, 8);
	assert_int_equal(td_trace_dropped(f->t), 8);
	for (uint64_t i = 0; i < 16; i++)
		assert_int_equal(out[i].time_ns, i);
	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 0);
	assert_int_equal(dropped, 0);
	/* The hub's total stays: it is what `stats` reports. */
	assert_int_equal(td_trace_dropped(f->t), 8);
}

static void test_trace_read_until_leaves_later_events_for_the_next_read(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[16];
	uint64_t dropped = 0;
	struct td_trace_sub *sub = fx_subscribe(f, 0, 16);

	for (uint64_t seq = 0; seq < 6; seq++)
		emit_seq(f->t, seq); /* times 1000..1005 */
	assert_int_equal(td_trace_read_until(f->t, sub, out, 16, 1002, &dropped), 3);
	assert_int_equal(out[2].time_ns, 1002);
	assert_int_equal(td_trace_read_until(f->t, sub, out, 16, 1002, &dropped), 0);
	assert_int_equal(td_trace_read_until(f->t, sub, out, 16, UINT64_MAX, &dropped), 3);
	assert_int_equal(out[0].time_ns, 1003);
	assert_int_equal(out[2].time_ns, 1005);
}

static void test_trace_threads_that_exit_give_their_slot_back(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[8];
	uint64_t dropped = 0;
	uint64_t total = 0;
	struct td_trace_sub *sub = fx_subscribe(f, 0, 4);

	/* Twice as many short-lived threads as there are slots, one after another. */
	for (int i = 0; i < 2 * TD_TRACE_MAX_THREADS; i++) {
		struct stamp_thread th = { .t = f->t, .id = i, .first = (uint64_t)i, .step = 1,
					   .count = 1 };
		size_t n;

		run_stamp_threads(&th, 1);
		n = td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped);
		assert_int_equal(n, 1);
		assert_int_equal(dropped, 0);
		assert_int_equal(out[0].pid, i);
		total += n;
	}
	assert_int_equal(total, 2 * TD_TRACE_MAX_THREADS);
}

static void test_trace_subscribers_beyond_the_maximum_get_ebusy(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_sub *subs[TD_TRACE_MAX_SUBS];
	struct td_trace_sub_params p = { .ring_events = 4, .nr_rings = 1 };

	for (int i = 0; i < TD_TRACE_MAX_SUBS; i++) {
		subs[i] = td_trace_subscribe(f->t, &p);
		assert_non_null(subs[i]);
	}
	errno = 0;
	assert_null(td_trace_subscribe(f->t, &p));
	assert_int_equal(errno, EBUSY);
	td_trace_unsubscribe(f->t, subs[3]);
	subs[3] = td_trace_subscribe(f->t, &p);
	assert_non_null(subs[3]);
	for (int i = 0; i < TD_TRACE_MAX_SUBS; i++)
		td_trace_unsubscribe(f->t, subs[i]);
	assert_int_equal(nr_subs(f->t), 0);
}

static void test_trace_threads_beyond_the_rings_lose_their_events_counted(void **state)
{
	struct trace_fixture *f = *state;
	struct td_trace_event out[64];
	uint64_t dropped = 0;
	struct td_trace_sub *sub = fx_subscribe_rings(f, 0, 16, 2);
	struct stamp_thread th[3];

	/* Three threads alive together, two rings: one thread's 10 events are lost, and said. */
	for (int i = 0; i < 3; i++)
		th[i] = (struct stamp_thread){ .t = f->t, .id = i, .first = (uint64_t)i, .step = 3,
					       .count = 10 };
	run_stamp_threads(th, 3);
	assert_int_equal(td_trace_read(f->t, sub, out, TD_ARRAY_SIZE(out), &dropped), 20);
	assert_int_equal(dropped, 10);
	assert_int_equal(td_trace_dropped(f->t), 10);
}

#define TRACE_TEST(fn) cmocka_unit_test_setup_teardown(fn, trace_setup, trace_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_emit_with_null_hub_is_noop),
		TRACE_TEST(test_trace_emit_without_subscriber_delivers_nothing_later),
		TRACE_TEST(test_trace_subscriber_receives_events_in_order_with_exact_fields),
		TRACE_TEST(test_trace_read_respects_max_and_keeps_the_rest),
		TRACE_TEST(test_trace_ring_wraps_around_keeping_order),
		TRACE_TEST(test_trace_overflow_drops_newest_and_counts_exactly),
		TRACE_TEST(test_trace_capacity_zero_and_one_hold_one_event),
		TRACE_TEST(test_trace_ring_rounding_never_passes_the_cap),
		TRACE_TEST(test_trace_nr_rings_out_of_range_fails_with_einval),
		TRACE_TEST(test_trace_subscribe_makes_every_ring_resident),
		TRACE_TEST(test_trace_extra_bytes_are_charged_with_the_rings),
		TRACE_TEST(test_trace_emit_allocates_nothing),
		TRACE_TEST(test_trace_subscribers_share_one_budget),
		cmocka_unit_test(test_trace_a_subscriber_that_allows_it_gets_smaller_rings),
		TRACE_TEST(test_trace_two_subscribers_each_get_every_event),
		TRACE_TEST(test_trace_unsubscribe_stops_delivery),
		TRACE_TEST(test_trace_concurrent_emitters_lose_nothing_unaccounted),
		TRACE_TEST(test_trace_rings_of_several_threads_are_merged_in_time_order),
		TRACE_TEST(test_trace_each_thread_has_its_own_ring_of_the_capacity),
		TRACE_TEST(test_trace_read_until_leaves_later_events_for_the_next_read),
		TRACE_TEST(test_trace_threads_that_exit_give_their_slot_back),
		TRACE_TEST(test_trace_subscribers_beyond_the_maximum_get_ebusy),
		TRACE_TEST(test_trace_threads_beyond_the_rings_lose_their_events_counted),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
