// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_elevator.c - unit tests for the elevator core and the noop and deadline
 * elevators (src/elevator.c, src/elv_noop.c, src/elv_deadline.c).
 *
 * Each test drives one elevator instance directly, the way queue.c does:
 * requests come from a td_rq_pool the fixture owns (no queue behind it), bios
 * live in the fixture, and time is a fake clock the test sets by hand, so
 * every deadline decision is exact. Expected dispatch orders are worked out
 * by hand in comments from the rules at the top of src/elv_deadline.c.
 *
 * Tests of one shape are tables of cases: each row is its own cmocka test,
 * named after the behaviour it pins, run by one function (the row reaches
 * it through the fixture). Dispatch orders are scripts: requests added, the
 * clock moved, and the start sectors each dispatch must return.
 *
 * Dispatched and merged-away requests go straight back to the pool, so the
 * teardown also catches a request the elevator forgot to give back.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "tagdisk/elevator.h"
#include "unit_util.h"

#define NR_REQUESTS 64
#define NR_BIOS	    (TD_RQ_MAX_BIOS + 64)
#define MS	    TD_NSEC_PER_MSEC
#define NONE	    UINT64_MAX /* "nothing dispatched" in sector lists */

struct fixture {
	uint64_t now_ns; /* the fake clock */
	struct td_clock clock;
	struct td_elv_tunables tunables;
	struct td_elv_queue eq;
	struct td_mutex lock; /* stands in for the queue lock; held throughout */
	struct td_rq_pool pool;
	struct td_elevator *e;
	struct td_bio bios[NR_BIOS];
	unsigned int nr_bios;
	const void *row; /* the table row a table's test runs, or NULL */
};

static uint64_t fake_now(void *ctx)
{
	const struct fixture *fx = ctx;

	return fx->now_ns;
}

static void end_io_unused(struct td_bio *bio, int err)
{
	(void)bio;
	(void)err;
}

/* *@state comes in as the test's prestate (a table row, or NULL) and leaves as the fixture. */
static int fx_setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx)
		return -1;
	fx->row = *state;
	fx->clock = (struct td_clock){ .now_ns = fake_now, .ctx = fx };
	fx->tunables = (struct td_elv_tunables){
		.read_expire_ms = 500,
		.write_expire_ms = 5000,
		.fifo_batch = 16,
		.writes_starved = 2,
	};
	fx->eq = (struct td_elv_queue){
		.tunables = &fx->tunables,
		.clock = &fx->clock,
		.max_sectors = 1024,
	};
	td_mutex_init(&fx->lock);
	td_mutex_lock(&fx->lock);
	if (td_rq_pool_init(&fx->pool, NULL, NR_REQUESTS)) {
		td_mutex_unlock(&fx->lock);
		td_mutex_destroy(&fx->lock);
		free(fx);
		return -1;
	}
	*state = fx;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fixture *fx = *state;
	int ret = 0;

	if (fx->e) {
		struct td_request *rq;

		while ((rq = td_elv_dispatch(fx->e, true)))
			td_rq_pool_put_locked(&fx->pool, rq);
		td_elv_destroy(fx->e);
	}
	if (fx->pool.nr_free == fx->pool.nr) {
		td_rq_pool_destroy(&fx->pool);
	} else {
		/* A request went missing: report it, and free without the pool's assert. */
		fprintf(stderr, "teardown: %u of %u requests not returned\n",
			fx->pool.nr - fx->pool.nr_free, fx->pool.nr);
		td_cond_destroy(&fx->pool.wait);
		free(fx->pool.rqs);
		ret = -1;
	}
	td_mutex_unlock(&fx->lock);
	td_mutex_destroy(&fx->lock);
	free(fx);
	return ret;
}

static void fx_start(struct fixture *fx, const struct td_elevator_type *type)
{
	int err = 12345;

	fx->e = td_elv_create(type, &fx->eq, NR_REQUESTS, &err);
	assert_non_null(fx->e);
	assert_int_equal(err, 12345); /* untouched on success */
	assert_string_equal(td_elv_name(fx->e), type->name);
	assert_int_equal(td_elv_count(fx->e), 0);
	assert_false(td_elv_has_work(fx->e));
}

static struct td_bio *fx_bio(struct fixture *fx, enum td_op op, uint64_t sector,
			     uint32_t nr_sectors, unsigned int flags)
{
	assert_true(fx->nr_bios < NR_BIOS);
	struct td_bio *bio = &fx->bios[fx->nr_bios];

	td_bio_init(bio, op, sector, nr_sectors, NULL, end_io_unused, NULL);
	bio->flags = flags;
	bio->pid = (int32_t)(1000 + fx->nr_bios);
	fx->nr_bios++;
	return bio;
}

/* Give @bio a request of its own and add it, as queue.c does when no merge is found. */
static struct td_request *fx_add_bio(struct fixture *fx, struct td_bio *bio)
{
	uint32_t count = td_elv_count(fx->e);
	struct td_request *rq = td_rq_pool_get_locked(&fx->pool, &fx->lock);

	td_rq_init_from_bio(rq, bio);
	td_elv_add(fx->e, rq, fx->now_ns);
	assert_ptr_equal(rq->elv_owner, fx->e);
	assert_int_equal(td_elv_count(fx->e), count + 1);
	assert_true(td_elv_has_work(fx->e));
	return rq;
}

static struct td_request *fx_add(struct fixture *fx, enum td_op op, uint64_t sector,
				 uint32_t nr_sectors, unsigned int flags)
{
	return fx_add_bio(fx, fx_bio(fx, op, sector, nr_sectors, flags));
}

static struct td_request *fx_read(struct fixture *fx, uint64_t sector)
{
	return fx_add(fx, TD_OP_READ, sector, 8, 0);
}

static struct td_request *fx_write(struct fixture *fx, uint64_t sector)
{
	return fx_add(fx, TD_OP_WRITE, sector, 8, 0);
}

/* Return: the merge td_elv_merge() finds for @bio; *@rqp is only written on a merge. */
static enum td_elv_merge fx_merge(struct fixture *fx, struct td_bio *bio, struct td_request **rqp)
{
	*rqp = NULL;
	return td_elv_merge(fx->e, bio, rqp);
}

/* Merge @bio into @rq as td_elv_merge() found; return the emptied request (put back), or NULL. */
static struct td_request *fx_merge_bio(struct fixture *fx, struct td_request *rq,
				       struct td_bio *bio, enum td_elv_merge type)
{
	struct td_request *gone = td_elv_merge_bio(fx->e, rq, bio, type);

	if (gone) {
		assert_null(gone->bio);
		assert_int_equal(gone->nr_bios, 0);
		td_rq_pool_put_locked(&fx->pool, gone);
	}
	return gone;
}

/* Dispatch one request, check the bookkeeping, put it back; return its start sector or NONE. */
static uint64_t fx_dispatch(struct fixture *fx, bool force)
{
	uint32_t count = td_elv_count(fx->e);
	struct td_request *rq = td_elv_dispatch(fx->e, force);

	if (!rq) {
		assert_int_equal(td_elv_count(fx->e), count);
		return NONE;
	}
	uint64_t sector = rq->sector;

	assert_int_equal(td_elv_count(fx->e), count - 1);
	assert_int_equal(td_elv_has_work(fx->e), count > 1);
	td_rq_pool_put_locked(&fx->pool, rq);
	return sector;
}

/* Dispatch @n requests and check their start sectors are exactly @want. */
static void expect_dispatch(struct fixture *fx, bool force, const uint64_t *want, size_t n)
{
	uint64_t got[NR_REQUESTS];

	assert_true(n <= NR_REQUESTS);
	for (size_t i = 0; i < n; i++)
		got[i] = fx_dispatch(fx, force);
	for (size_t i = 0; i < n; i++) {
		if (got[i] != want[i])
			print_error("dispatch %zu: sector %llu, expected %llu\n", i,
				    (unsigned long long)got[i], (unsigned long long)want[i]);
		assert_int_equal(got[i], want[i]);
	}
}

#define EXPECT_DISPATCH(fx, force, ...)                                                   \
	expect_dispatch(fx, force, (const uint64_t[]){ __VA_ARGS__ },                      \
			sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))

/* @rq holds exactly the bios @want, in order, and its fields agree with them. */
static void expect_chain(const struct td_request *rq, struct td_bio *const *want, size_t n)
{
	const struct td_bio *bio = rq->bio;
	uint64_t sectors = 0;

	assert_int_equal(rq->nr_bios, n);
	assert_int_equal(rq->sector, want[0]->sector);
	for (size_t i = 0; i < n; i++) {
		assert_ptr_equal(bio, want[i]);
		sectors += bio->nr_sectors;
		if (i + 1 < n)
			assert_int_equal(bio->sector + bio->nr_sectors, want[i + 1]->sector);
		bio = bio->next;
	}
	assert_null(bio);
	assert_ptr_equal(rq->biotail, want[n - 1]);
	assert_int_equal(rq->nr_sectors, sectors);
}

#define EXPECT_CHAIN(rq, ...)                                                              \
	expect_chain(rq, (struct td_bio *const[]){ __VA_ARGS__ },                          \
		     sizeof((struct td_bio *const[]){ __VA_ARGS__ }) / sizeof(struct td_bio *))

/* ---- tables of cases ------------------------------------------------------------------- */

/*
 * The cmocka tests of the program: one per unique test and one per table
 * row (struct test_list in unit_util.h; fx_setup moves the row into the fixture).
 */
#define ADD_TEST(l, fn)	   TL_ADD_TEST(l, fn)
#define ADD_FX_TEST(l, fn) test_list_add(l, #fn, fn, fx_setup, fx_teardown, NULL)
#define ADD_TABLE(l, fn, setup, teardown, table) TL_ADD_TABLE(l, fn, setup, teardown, table)
#define ADD_FX_TABLE(l, fn, table) ADD_TABLE(l, fn, fx_setup, fx_teardown, table)

/*
 * A script: what happens to the elevator, step by step, and what each
 * dispatch must return. Scripts end with END.
 */
enum step_kind { STEP_END = 0, STEP_AT, STEP_ADD, STEP_DISPATCH, STEP_COUNT };

struct step {
	enum step_kind kind;
	uint64_t ns;	      /* AT: set the fake clock */
	enum td_op op;	      /* ADD: a request of one bio */
	uint64_t sector;
	uint32_t nr_sectors;
	unsigned int flags;
	bool force;	      /* DISPATCH, expecting the start sectors @want (NONE: nothing) */
	const uint64_t *want;
	size_t n;
	uint32_t count;	      /* COUNT: td_elv_count(), and td_elv_has_work() agrees */
};

#define END		{ .kind = STEP_END }
#define AT_NS(t)	{ .kind = STEP_AT, .ns = (t) }
#define AT_MS(t)	AT_NS((uint64_t)(t) * MS)
#define ADD(o, s, n, f)                                                                      \
	{ .kind = STEP_ADD, .op = (o), .sector = (s), .nr_sectors = (n), .flags = (f) }
#define RD(s)		ADD(TD_OP_READ, s, 8, 0)
#define WR(s)		ADD(TD_OP_WRITE, s, 8, 0)
#define WR_FUA(s)	ADD(TD_OP_WRITE, s, 8, TD_BIO_FUA)
#define DISC(s)		ADD(TD_OP_DISCARD, s, 8, 0)
#define WZ(s)		ADD(TD_OP_WRITE_ZEROES, s, 8, 0)
#define SECTORS(...)                                                                         \
	.want = (const uint64_t[]){ __VA_ARGS__ },                                           \
	.n = sizeof((const uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t)
#define OUT(...)	{ .kind = STEP_DISPATCH, SECTORS(__VA_ARGS__) }
#define DRAIN(...)	{ .kind = STEP_DISPATCH, .force = true, SECTORS(__VA_ARGS__) }
#define COUNT(c)	{ .kind = STEP_COUNT, .count = (c) }
#define SCRIPT(...)	((const struct step[]){ __VA_ARGS__, END })

static struct td_request *step_add(struct fixture *fx, const struct step *s)
{
	assert_int_equal(s->kind, STEP_ADD);
	return fx_add(fx, s->op, s->sector, s->nr_sectors, s->flags);
}

static void run_script(struct fixture *fx, const struct step *script)
{
	for (const struct step *s = script; s && s->kind != STEP_END; s++) {
		switch (s->kind) {
		case STEP_AT:
			fx->now_ns = s->ns;
			break;
		case STEP_ADD:
			step_add(fx, s);
			break;
		case STEP_DISPATCH:
			expect_dispatch(fx, s->force, s->want, s->n);
			break;
		case STEP_COUNT:
			assert_int_equal(td_elv_count(fx->e), s->count);
			assert_int_equal(td_elv_has_work(fx->e), s->count > 0);
			break;
		default:
			fail_msg("step %td: unknown kind %d", s - script, (int)s->kind);
		}
	}
}

/* ---- registry and life cycle ----------------------------------------------------------- */

static void test_elv_find_returns_registered_types_only(void **state)
{
	(void)state;
	assert_ptr_equal(td_elv_find("noop"), &td_elv_noop);
	assert_ptr_equal(td_elv_find("deadline"), &td_elv_deadline);
	assert_ptr_equal(td_elv_find("none"), &td_elv_none);
	assert_ptr_equal(td_elv_find("mq-deadline"), &td_elv_mq_deadline);
	assert_null(td_elv_find("nope"));
	assert_null(td_elv_find(""));
	assert_null(td_elv_find("Deadline"));
	assert_null(td_elv_find("noop "));
}

/*
 * td_elv_names() into a buffer of @size (or NULL) returns the full length,
 * like snprintf, writes @want (NULL: nothing) and no byte past @size.
 */
struct names_case {
	const char *name;
	size_t size;
	bool null_buf;
	const char *want;
};

static const struct names_case names_cases[] = {
	{ "test_elv_names_lists_registry", 64, false, "deadline, mq-deadline, noop, none" },
	{ "test_elv_names_truncates_like_snprintf", 6, false, "deadl" },
	{ "test_elv_names_fits_with_room_for_terminator", 34, false, "deadline, mq-deadline, noop, none" },
	{ "test_elv_names_terminator_replaces_last_char", 33, false, "deadline, mq-deadline, noop, non" },
	{ "test_elv_names_cuts_inside_separator", 10, false, "deadline," },
	{ "test_elv_names_size_0_writes_nothing", 0, false, NULL },
	{ "test_elv_names_null_buffer_of_size_0", 0, true, NULL },
};

static void run_names_case(void **state)
{
	const struct names_case *c = *state;
	char buf[64];

	memset(buf, 'x', sizeof(buf));
	assert_int_equal(td_elv_names(c->null_buf ? NULL : buf, c->size), strlen("deadline, mq-deadline, noop, none"));
	if (c->want)
		assert_string_equal(buf, c->want);
	for (size_t i = c->size; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 'x');
}

struct create_case {
	const char *name;
	const struct td_elevator_type *type;
	uint32_t nr_requests;
};

static const struct create_case create_cases[] = {
	{ "test_elv_create_and_destroy_empty_noop_0_requests", &td_elv_noop, 0 },
	{ "test_elv_create_and_destroy_empty_noop_1_request", &td_elv_noop, 1 },
	{ "test_elv_create_and_destroy_empty_noop_17_requests", &td_elv_noop, 17 },
	{ "test_elv_create_and_destroy_empty_noop_4m_requests", &td_elv_noop, 1U << 22 },
	{ "test_elv_create_and_destroy_empty_deadline_0_requests", &td_elv_deadline, 0 },
	{ "test_elv_create_and_destroy_empty_deadline_1_request", &td_elv_deadline, 1 },
	{ "test_elv_create_and_destroy_empty_deadline_17_requests", &td_elv_deadline, 17 },
	{ "test_elv_create_and_destroy_empty_deadline_4m_requests", &td_elv_deadline, 1U << 22 },
};

static void run_create_case(void **state)
{
	struct fixture *fx = *state;
	const struct create_case *c = fx->row;
	int err = 12345;
	struct td_elevator *e = td_elv_create(c->type, &fx->eq, c->nr_requests, &err);

	assert_non_null(e);
	assert_int_equal(err, 12345);
	assert_string_equal(td_elv_name(e), c->type->name);
	assert_int_equal(td_elv_count(e), 0);
	assert_false(td_elv_has_work(e));
	assert_null(td_elv_dispatch(e, false));
	assert_null(td_elv_dispatch(e, true));
	td_elv_destroy(e);
}

static int failing_init(const struct td_elv_queue *eq, void **data)
{
	(void)eq;
	(void)data;
	return -ENOMEM;
}

static void test_elv_create_reports_init_failure(void **state)
{
	struct fixture *fx = *state;
	struct td_elevator_type broken = td_elv_noop;
	int err = 0;

	broken.name = "broken";
	broken.init = failing_init;
	assert_null(td_elv_create(&broken, &fx->eq, NR_REQUESTS, &err));
	assert_int_equal(err, -ENOMEM);
}

/* Return: the calling process's virtual size in bytes, or 0. */
static uint64_t vm_size_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%lu", &pages) != 1)
		pages = 0;
	fclose(f);
	return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

enum {
	ENOMEM_CHILD_OK = 0,
	ENOMEM_CHILD_SETUP = 3,	  /* could not arrange the failure */
	ENOMEM_CHILD_CREATED = 4, /* td_elv_create succeeded anyway */
	ENOMEM_CHILD_BAD_ERR = 5, /* NULL, but *err is not -ENOMEM */
};

/*
 * In a child whose address space is capped a few MiB above its current size,
 * small allocations still work but the 16 MiB merge hash of a 2^20-request
 * elevator cannot be allocated.
 */
static int enomem_child(const struct td_elv_queue *eq)
{
	const uint64_t hash_bytes = (uint64_t)(1U << 20) * sizeof(struct td_list);
	uint64_t vm = vm_size_bytes();
	struct rlimit rl;
	void *p;
	int err = 12345;

	if (!vm)
		return ENOMEM_CHILD_SETUP;
	rl.rlim_cur = vm + 4 * 1024 * 1024;
	rl.rlim_max = rl.rlim_cur;
	if (setrlimit(RLIMIT_AS, &rl))
		return ENOMEM_CHILD_SETUP;
	p = malloc(64);
	if (!p)
		return ENOMEM_CHILD_SETUP;
	free(p);
	p = malloc(hash_bytes);
	if (p)
		return ENOMEM_CHILD_SETUP;
	if (td_elv_create(&td_elv_deadline, eq, 1U << 20, &err))
		return ENOMEM_CHILD_CREATED;
	return err == -ENOMEM ? ENOMEM_CHILD_OK : ENOMEM_CHILD_BAD_ERR;
}

static void test_elv_create_reports_enomem_when_hash_allocation_fails(void **state)
{
	struct fixture *fx = *state;
	pid_t pid;
	int status;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	skip(); /* the sanitizers' allocators abort in a capped address space */
#endif
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(enomem_child(&fx->eq));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == ENOMEM_CHILD_SETUP)
		skip(); /* this system would not let a 16 MiB allocation fail alone */
	assert_int_equal(WEXITSTATUS(status), ENOMEM_CHILD_OK);
}

/* ---- dispatch order -------------------------------------------------------------------- */

/*
 * An elevator of @type with the tunables given (0: the fixture's default,
 * fifo_batch 16 and writes_starved 2) runs @setup, then @script.
 */
struct order_case {
	const char *name;
	const struct td_elevator_type *type;
	uint32_t fifo_batch;
	uint32_t writes_starved;
	const struct step *setup; /* a scenario rows share, or NULL */
	const struct step *script;
};

/*
 * fifo_batch = 2. Reads at 0 and 100000 (far away) at t = 0; 8, 16, 24, 32 at
 * t = 1 ms. The first batch starts at the FIFO head, 0, and sweeps to 8. The
 * second batch continues the sweep (16): the far read has not expired.
 */
static const struct step read_expiry_scenario[] = {
	AT_MS(0), RD(0), RD(100000), AT_MS(1), RD(8), RD(16), RD(24), RD(32),
	OUT(0, 8, 16), END,
};

/*
 * Writes only, fifo_batch = 1: writes at 8 and 100000 at t = 0, then 16 and
 * 24 at t = 1 ms. 8 (FIFO head), then 16 (sweep). The third pick depends on
 * whether the far write, now the FIFO head, has expired.
 */
static const struct step write_expiry_scenario[] = {
	AT_MS(0), WR(8), WR(100000), AT_MS(1), WR(16), WR(24), OUT(8, 16), END,
};

/*
 * fifo_batch = 4, ten reads 0, 8, ..., 72. Arrival: 0 at t = 0, 72 at
 * t = 1 ms, the others at t = 2 ms. The first batch starts at the FIFO head
 * (0) and takes 0, 8, 16, 24 in sector order; then a new batch is chosen.
 */
static const struct step fifo_batch_scenario[] = {
	AT_MS(0), RD(0), AT_MS(1), RD(72),
	AT_MS(2), RD(8), RD(16), RD(24), RD(32), RD(40), RD(48), RD(56), RD(64),
	OUT(0, 8, 16, 24), END,
};

static const struct order_case order_cases[] = {
	/* noop: first in, first out, whatever the operation. */
	{ "test_noop_dispatches_in_insertion_order", &td_elv_noop,
	  .script = SCRIPT(RD(100), WR(8), RD(50), COUNT(3), OUT(100, 8, 50, NONE), COUNT(0)) },
	{ "test_noop_dispatches_dataless_requests_in_insertion_order", &td_elv_noop,
	  .script = SCRIPT(DISC(0), WZ(100), WR(200), OUT(0, 100, 200, NONE)) },
	{ "test_noop_force_dispatch_drains_in_order", &td_elv_noop,
	  .script = SCRIPT(WR(40), RD(30), DISC(20), RD(10), DRAIN(40, 30, 20, 10, NONE, NONE)) },
	/*
	 * Nothing has been dispatched, so there is no sweep position: the batch
	 * starts at the FIFO head, 300, the oldest read. Nothing lies above 300,
	 * so the sweep has nothing further and the next batch starts at the FIFO
	 * head again, now 100; from there the sweep goes up to 200. (The 2.6.24+
	 * Linux rule. Older 2.6 kernels restarted at the lowest sector instead,
	 * which would give 100, 200, 300.)
	 */
	{ "test_deadline_first_batch_starts_at_fifo_head_then_sweeps_up", &td_elv_deadline,
	  .script = SCRIPT(RD(300), RD(100), RD(200), OUT(300, 100, 200, NONE)) },
	/*
	 * 100 is the FIFO head and the lowest sector. A read queued below the
	 * sweep (150) waits for the next pass; one above (350) is taken on the
	 * way: 300, 350, 400; then the sweep is out and restarts at the FIFO
	 * head, 150.
	 */
	{ "test_deadline_sweep_continues_upwards_in_sector_order", &td_elv_deadline,
	  .script = SCRIPT(RD(100), RD(400), RD(200), RD(300), OUT(100, 200),
			   RD(150), RD(350), OUT(300, 350, 400, 150, NONE)) },
	/* The discard is older, but reads win a new batch while writes are not starved. */
	{ "test_deadline_prefers_reads_and_puts_discards_with_writes", &td_elv_deadline,
	  .script = SCRIPT(DISC(0), WZ(50), RD(100), OUT(100, 0, 50, NONE)) },
	/*
	 * Reads (starved 0 -> 1): 100, 108. Writes are starved (1 >= 1): 0, 8,
	 * leaving the write sweep at 16. Reads again (starved 0 -> 1): 116 from
	 * the FIFO head, and the batch continues with the read sweep, 124, not
	 * with the write that was next before the reads took over. Then 16.
	 */
	{ "test_deadline_new_batch_forgets_other_direction_sweep", &td_elv_deadline,
	  .fifo_batch = 2, .writes_starved = 1,
	  .script = SCRIPT(RD(100), RD(108), RD(116), RD(124), WR(0), WR(8), WR(16),
			   OUT(100, 108, 0, 8, 116, 124, 16, NONE)) },
	/*
	 * 1. No batch: reads win (starved 0 -> 1); FIFO head 300; nothing above it.
	 * 2. No next read: reads win (starved 1 -> 2); FIFO head 100; next 200.
	 * 3. The batch continues with 200; nothing above it.
	 * 4. No reads left: writes (starved reset); FIFO head 50; nothing above it.
	 * 5. FIFO head 10.
	 */
	{ "test_deadline_force_dispatch_drains_in_deadline_order", &td_elv_deadline,
	  .script = SCRIPT(RD(300), WR(50), RD(100), WR(10), RD(200), COUNT(5),
			   DRAIN(300, 100, 200, 50, 10, NONE, NONE), COUNT(0)) },
	/*
	 * Batch 1: reads (starved 0 -> 1), FIFO head 0. Batch 2: reads
	 * (starved 1 -> 2), sweep at 8. Batch 3: starved 2 >= 2, the write
	 * (starved reset). Then no writes remain: reads from the FIFO head, 16,
	 * sweeping (one per batch) to 40.
	 */
	{ "test_deadline_write_starvation_exact_sequence", &td_elv_deadline,
	  .fifo_batch = 1, .writes_starved = 2,
	  .script = SCRIPT(WR(1000), RD(0), RD(8), RD(16), RD(24), RD(32), RD(40),
			   OUT(0, 8, 1000, 16, 24, 32, 40, NONE)) },
	/*
	 * At exactly t = read_expire_ms the far read's deadline has come. The
	 * running batch is not interrupted (24), but the next batch starts at
	 * the expired FIFO head instead of continuing at 32; after it the sweep
	 * has nothing further and restarts at the FIFO head, 32.
	 */
	{ "test_deadline_expired_read_dispatched_before_sweep", &td_elv_deadline,
	  .fifo_batch = 2, .setup = read_expiry_scenario,
	  .script = SCRIPT(AT_MS(500), OUT(24, 100000, 32, NONE)) },
	/* One nanosecond early. */
	{ "test_deadline_unexpired_read_waits_for_sweep", &td_elv_deadline,
	  .fifo_batch = 2, .setup = read_expiry_scenario,
	  .script = SCRIPT(AT_NS(500 * MS - 1), OUT(24, 32, 100000, NONE)) },
	/* Past read_expire_ms but not write_expire_ms: the sweep goes on. */
	{ "test_deadline_write_not_expired_past_read_expire_ms", &td_elv_deadline,
	  .fifo_batch = 1, .setup = write_expiry_scenario,
	  .script = SCRIPT(AT_MS(4999), OUT(24)) },
	{ "test_deadline_write_not_expired_one_ns_before_write_expire_ms", &td_elv_deadline,
	  .fifo_batch = 1, .setup = write_expiry_scenario,
	  .script = SCRIPT(AT_NS(5000 * MS - 1), OUT(24)) },
	{ "test_deadline_write_expires_at_write_expire_ms", &td_elv_deadline,
	  .fifo_batch = 1, .setup = write_expiry_scenario,
	  .script = SCRIPT(AT_MS(5000), OUT(100000)) },
	/* Nothing expired: the next batches continue the sweep, 32..56 then 64, 72. */
	{ "test_deadline_fifo_batch_new_batch_continues_sweep", &td_elv_deadline,
	  .fifo_batch = 4, .setup = fifo_batch_scenario,
	  .script = SCRIPT(OUT(32, 40, 48, 56, 64, 72, NONE)) },
	/*
	 * 72 expired (queued at 1 ms, read_expire 500 ms); the others (2 ms) not
	 * yet. The new batch starts at 72; above it is nothing, so the next batch
	 * restarts at the FIFO head, 32, and takes four; then 64.
	 */
	{ "test_deadline_fifo_batch_new_batch_starts_at_expired_head", &td_elv_deadline,
	  .fifo_batch = 4, .setup = fifo_batch_scenario,
	  .script = SCRIPT(AT_MS(501), OUT(72, 32, 40, 48, 56, 64, NONE)) },
	/*
	 * Everything expires mid-batch: the batch runs out its four (0, 8, 16,
	 * 24); the next starts at the FIFO head, 1000.
	 */
	{ "test_deadline_fifo_batch_is_not_cut_by_expiry", &td_elv_deadline,
	  .fifo_batch = 4,
	  .script = SCRIPT(RD(0), RD(1000), AT_MS(1), RD(8), RD(16), RD(24), RD(32), RD(40),
			   RD(48), OUT(0), AT_MS(10000), OUT(8, 16, 24, 1000, 32, 40, 48, NONE)) },
};

static void run_order_case(void **state)
{
	struct fixture *fx = *state;
	const struct order_case *c = fx->row;

	if (c->fifo_batch)
		fx->tunables.fifo_batch = c->fifo_batch;
	if (c->writes_starved)
		fx->tunables.writes_starved = c->writes_starved;
	fx_start(fx, c->type);
	run_script(fx, c->setup);
	run_script(fx, c->script);
}


/* ---- deadline: equal sectors, force ----------------------------------------------------- */

static void test_deadline_equal_sectors_keep_arrival_order(void **state)
{
	struct fixture *fx = *state;
	struct td_request *first;
	struct td_request *second;
	struct td_request *third;

	fx_start(fx, &td_elv_deadline);
	fx_read(fx, 50);
	first = fx_read(fx, 100);
	second = fx_add(fx, TD_OP_READ, 100, 16, 0);
	third = fx_add(fx, TD_OP_READ, 100, 4, 0);
	/* The sweep from 50 meets the three equal starts in the order they arrived. */
	EXPECT_DISPATCH(fx, false, 50);
	assert_ptr_equal(td_elv_dispatch(fx->e, false), first);
	td_rq_pool_put_locked(&fx->pool, first);
	assert_ptr_equal(td_elv_dispatch(fx->e, false), second);
	td_rq_pool_put_locked(&fx->pool, second);
	assert_ptr_equal(td_elv_dispatch(fx->e, false), third);
	td_rq_pool_put_locked(&fx->pool, third);
	assert_int_equal(td_elv_count(fx->e), 0);
}

static void test_deadline_force_and_normal_dispatch_agree(void **state)
{
	struct fixture *fx = *state;
	uint64_t order[2][12];

	for (int force = 0; force < 2; force++) {
		fx_start(fx, &td_elv_deadline);
		fx->now_ns = 0;
		for (int i = 0; i < 12; i++) {
			uint64_t sector = (uint64_t)((i * 7) % 12) * 16;

			if (i % 3 == 2)
				fx_write(fx, 1000 + sector);
			else
				fx_read(fx, sector);
			fx->now_ns += 100 * MS;
		}
		for (int i = 0; i < 12; i++)
			order[force][i] = fx_dispatch(fx, force);
		assert_int_equal(fx_dispatch(fx, force), NONE);
		td_elv_destroy(fx->e);
		fx->e = NULL;
	}
	for (int i = 0; i < 12; i++)
		assert_int_equal(order[0][i], order[1][i]);
}

/* ---- deadline: writes_starved ---------------------------------------------------------- */

/*
 * One write queued first, then reads kept coming (four always queued above
 * the sweep, so no batch ends early): exactly @reads are dispatched before
 * the write.
 */
struct starved_case {
	const char *name;
	uint32_t fifo_batch;
	uint32_t writes_starved;
	unsigned int reads;
};

static const struct starved_case starved_cases[] = {
	/* One read per batch: exactly writes_starved read batches, then the write. */
	{ "test_deadline_write_waits_2_batches_of_1_read", 1, 2, 2 },
	{ "test_deadline_write_waits_5_batches_of_1_read", 1, 5, 5 },
	/* Batches of three: two whole batches. */
	{ "test_deadline_write_waits_2_batches_of_3_reads", 3, 2, 6 },
	{ "test_deadline_write_waits_1_batch_of_2_reads", 2, 1, 2 },
	/* writes_starved = 0: the write gets the very first batch. */
	{ "test_deadline_write_gets_first_batch_when_writes_starved_0", 1, 0, 0 },
};

static void run_starved_case(void **state)
{
	struct fixture *fx = *state;
	const struct starved_case *c = fx->row;
	uint64_t next_read = 0;
	unsigned int reads = 0;

	fx->tunables.fifo_batch = c->fifo_batch;
	fx->tunables.writes_starved = c->writes_starved;
	fx_start(fx, &td_elv_deadline);
	fx_write(fx, 1000000);
	for (int i = 0; i < 4; i++, next_read += 8)
		fx_read(fx, next_read);
	for (;;) {
		uint64_t sector = fx_dispatch(fx, false);

		assert_int_not_equal(sector, NONE);
		if (sector == 1000000)
			break;
		assert_int_equal(sector, (uint64_t)reads * 8); /* reads go in sector order */
		reads++;
		assert_true(reads < 100);
		fx_read(fx, next_read);
		next_read += 8;
	}
	assert_int_equal(reads, c->reads);
}


/* ---- merge lookups --------------------------------------------------------------------- */

/* An elevator holding one request per step (ADD only), for lookups. */
struct queued_set {
	const struct td_elevator_type *type;
	uint32_t max_sectors; /* 0: the fixture's 1024 */
	struct step queued[5];
};

static const struct queued_set noop_read_write = { &td_elv_noop, 0, { RD(0), WR(100), END } };
static const struct queued_set noop_plain_fua = { &td_elv_noop, 0, { WR(0), WR_FUA(100), END } };
static const struct queued_set noop_dataless = {
	&td_elv_noop, 0, { DISC(0), WZ(100), WR(200), END }
};
static const struct queued_set deadline_kinds = {
	&td_elv_deadline, 0, { RD(100), WR(200), WR_FUA(300), DISC(400), END }
};
static const struct queued_set deadline_16_sectors = { &td_elv_deadline, 16, { RD(100), END } };

/* Looking @bio up in @set finds @merge, into the @found-th queued request; nothing changes. */
struct lookup_case {
	const char *name;
	const struct queued_set *set;
	struct step bio; /* an ADD step */
	enum td_elv_merge merge;
	unsigned int found;
};

#define NO_MERGE      TD_ELV_NO_MERGE
#define BACK_INTO(i)  TD_ELV_BACK_MERGE, (i)
#define FRONT_INTO(i) TD_ELV_FRONT_MERGE, (i)

static const struct lookup_case lookup_cases[] = {
	{ "test_noop_write_does_not_back_merge_into_read", &noop_read_write, WR(8), NO_MERGE },
	{ "test_noop_read_does_not_back_merge_into_write", &noop_read_write, RD(108), NO_MERGE },
	{ "test_noop_discard_does_not_back_merge_into_write", &noop_read_write, DISC(108),
	  NO_MERGE },
	{ "test_noop_read_back_merges_into_read", &noop_read_write, RD(8), BACK_INTO(0) },
	{ "test_noop_write_back_merges_into_write", &noop_read_write, WR(108), BACK_INTO(1) },
	{ "test_noop_fua_write_does_not_back_merge_into_plain", &noop_plain_fua, WR_FUA(8),
	  NO_MERGE },
	{ "test_noop_plain_write_does_not_back_merge_into_fua", &noop_plain_fua, WR(108),
	  NO_MERGE },
	{ "test_noop_plain_write_back_merges_into_plain", &noop_plain_fua, WR(8), BACK_INTO(0) },
	{ "test_noop_fua_write_back_merges_into_fua", &noop_plain_fua, WR_FUA(108),
	  BACK_INTO(1) },
	{ "test_noop_discard_never_merges", &noop_dataless, DISC(8), NO_MERGE },
	{ "test_noop_write_zeroes_never_merges", &noop_dataless, WZ(108), NO_MERGE },
	/* A flush "at" the end of a write, or anywhere, never merges. */
	{ "test_noop_flush_at_end_of_write_never_merges", &noop_dataless,
	  ADD(TD_OP_FLUSH, 208, 0, 0), NO_MERGE },
	{ "test_noop_flush_at_sector_0_never_merges", &noop_dataless, ADD(TD_OP_FLUSH, 0, 0, 0),
	  NO_MERGE },
	/* Front and back of a read, with writes. */
	{ "test_deadline_write_does_not_front_merge_into_read", &deadline_kinds, WR(92), NO_MERGE },
	{ "test_deadline_write_does_not_back_merge_into_read", &deadline_kinds, WR(108), NO_MERGE },
	/* Same direction, other op: dataless bios are refused before any lookup. */
	{ "test_deadline_discard_does_not_front_merge_into_write", &deadline_kinds, DISC(192),
	  NO_MERGE },
	{ "test_deadline_write_zeroes_does_not_back_merge_into_write", &deadline_kinds, WZ(208),
	  NO_MERGE },
	/* FUA mismatch, both ways. */
	{ "test_deadline_fua_write_does_not_front_merge_into_plain", &deadline_kinds, WR_FUA(192),
	  NO_MERGE },
	{ "test_deadline_plain_write_does_not_front_merge_into_fua", &deadline_kinds, WR(292),
	  NO_MERGE },
	{ "test_deadline_plain_write_does_not_back_merge_into_fua", &deadline_kinds, WR(308),
	  NO_MERGE },
	/* Discards never merge, front or back. */
	{ "test_deadline_discard_does_not_front_merge_into_discard", &deadline_kinds, DISC(392),
	  NO_MERGE },
	{ "test_deadline_discard_does_not_back_merge_into_discard", &deadline_kinds, DISC(408),
	  NO_MERGE },
	/* Positive controls: the same positions with the matching kind do merge. */
	{ "test_deadline_read_front_merges_into_read", &deadline_kinds, RD(92), FRONT_INTO(0) },
	{ "test_deadline_fua_write_front_merges_into_fua", &deadline_kinds, WR_FUA(292),
	  FRONT_INTO(2) },
	{ "test_deadline_plain_write_back_merges_into_plain", &deadline_kinds, WR(208),
	  BACK_INTO(1) },
	/* max_sectors holds for front merges too. */
	{ "test_deadline_front_merge_refused_past_max_sectors", &deadline_16_sectors,
	  ADD(TD_OP_READ, 91, 9, 0), NO_MERGE },
	{ "test_deadline_front_merge_allowed_up_to_max_sectors", &deadline_16_sectors, RD(92),
	  FRONT_INTO(0) },
};

static void run_lookup_case(void **state)
{
	struct fixture *fx = *state;
	const struct lookup_case *c = fx->row;
	const struct step *q = c->set->queued;
	struct td_request *rqs[TD_ARRAY_SIZE(c->set->queued)];
	struct td_request *found;
	uint32_t n = 0;

	if (c->set->max_sectors)
		fx->eq.max_sectors = c->set->max_sectors;
	fx_start(fx, c->set->type);
	for (; q[n].kind != STEP_END; n++)
		rqs[n] = step_add(fx, &q[n]);
	assert_int_equal(c->bio.kind, STEP_ADD);
	assert_int_equal(fx_merge(fx, fx_bio(fx, c->bio.op, c->bio.sector, c->bio.nr_sectors,
					      c->bio.flags), &found),
			 c->merge);
	if (c->merge == TD_ELV_NO_MERGE) {
		assert_null(found);
	} else {
		assert_true(c->found < n);
		assert_ptr_equal(found, rqs[c->found]);
	}
	assert_int_equal(td_elv_count(fx->e), n);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(rqs[i]->sector, q[i].sector);
		assert_int_equal(rqs[i]->nr_sectors, q[i].nr_sectors);
		assert_int_equal(rqs[i]->nr_bios, 1);
	}
}

/* ---- noop: merges --------------------------------------------------------------------- */

static void test_noop_back_merge_through_hash_grows_request(void **state)
{
	struct fixture *fx = *state;
	struct td_request *rq;
	struct td_request *other;
	struct td_request *found;
	struct td_bio *b1 = fx_bio(fx, TD_OP_WRITE, 100, 8, 0);
	struct td_bio *b2 = fx_bio(fx, TD_OP_WRITE, 108, 4, 0);
	struct td_bio *b3 = fx_bio(fx, TD_OP_WRITE, 112, 8, 0);

	fx_start(fx, &td_elv_noop);
	rq = fx_add_bio(fx, b1);
	other = fx_write(fx, 300);

	/* No merge has happened yet, so no hint: only the hash can find rq. */
	assert_int_equal(fx_merge(fx, b2, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, rq);
	assert_null(fx_merge_bio(fx, found, b2, TD_ELV_BACK_MERGE));
	assert_int_equal(td_elv_count(fx->e), 2);
	EXPECT_CHAIN(rq, b1, b2);
	assert_int_equal(rq->pid, b1->pid);

	/* The hash moved to the new end sector. */
	assert_int_equal(fx_merge(fx, b3, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, rq);
	assert_null(fx_merge_bio(fx, found, b3, TD_ELV_BACK_MERGE));
	EXPECT_CHAIN(rq, b1, b2, b3);
	assert_int_equal(td_elv_count(fx->e), 2);

	/* The grown request keeps its place. */
	assert_ptr_equal(td_elv_dispatch(fx->e, false), rq);
	td_rq_pool_put_locked(&fx->pool, rq);
	assert_ptr_equal(td_elv_dispatch(fx->e, false), other);
	td_rq_pool_put_locked(&fx->pool, other);
	assert_int_equal(td_elv_count(fx->e), 0);
}

static void test_noop_never_front_merges(void **state)
{
	struct fixture *fx = *state;
	struct td_request *rq;
	struct td_request *found;
	struct td_bio *back = fx_bio(fx, TD_OP_READ, 108, 8, 0);
	struct td_bio *front = fx_bio(fx, TD_OP_READ, 92, 8, 0);

	fx_start(fx, &td_elv_noop);
	rq = fx_read(fx, 100);
	assert_int_equal(fx_merge(fx, front, &found), TD_ELV_NO_MERGE);
	assert_null(found);

	/* Not even when rq is the last-merge hint. */
	assert_int_equal(fx_merge(fx, back, &found), TD_ELV_BACK_MERGE);
	assert_null(fx_merge_bio(fx, found, back, TD_ELV_BACK_MERGE));
	assert_int_equal(fx_merge(fx, front, &found), TD_ELV_NO_MERGE);
	assert_null(found);
	assert_int_equal(rq->sector, 100);
	assert_int_equal(rq->nr_sectors, 16);
}

static void test_noop_no_merge_past_max_sectors(void **state)
{
	struct fixture *fx = *state;
	struct td_request *rq;
	struct td_request *found;
	struct td_bio *fits = fx_bio(fx, TD_OP_READ, 8, 8, 0);
	struct td_bio *over = fx_bio(fx, TD_OP_READ, 16, 1, 0);

	struct td_bio *first;

	fx->eq.max_sectors = 16;
	fx_start(fx, &td_elv_noop);
	rq = fx_read(fx, 0);
	first = rq->bio;
	assert_int_equal(fx_merge(fx, fits, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, rq);
	assert_null(fx_merge_bio(fx, found, fits, TD_ELV_BACK_MERGE));
	assert_int_equal(rq->nr_sectors, 16);

	/* One sector more than max_sectors: not through the hint, not through the hash. */
	assert_int_equal(fx_merge(fx, over, &found), TD_ELV_NO_MERGE);
	assert_null(found);
	EXPECT_CHAIN(rq, first, fits);
}

static void test_noop_no_merge_past_max_bios(void **state)
{
	struct fixture *fx = *state;
	struct td_request *rq;
	struct td_request *found;
	struct td_bio *bio;

	fx->eq.max_sectors = UINT32_MAX;
	fx_start(fx, &td_elv_noop);
	rq = fx_add(fx, TD_OP_WRITE, 0, 1, 0);
	for (uint64_t s = 1; s < TD_RQ_MAX_BIOS; s++) {
		bio = fx_bio(fx, TD_OP_WRITE, s, 1, 0);
		assert_int_equal(fx_merge(fx, bio, &found), TD_ELV_BACK_MERGE);
		assert_ptr_equal(found, rq);
		assert_null(fx_merge_bio(fx, found, bio, TD_ELV_BACK_MERGE));
	}
	assert_int_equal(rq->nr_bios, TD_RQ_MAX_BIOS);
	assert_int_equal(rq->nr_sectors, TD_RQ_MAX_BIOS);

	bio = fx_bio(fx, TD_OP_WRITE, TD_RQ_MAX_BIOS, 1, 0);
	assert_int_equal(fx_merge(fx, bio, &found), TD_ELV_NO_MERGE);
	assert_null(found);
	assert_int_equal(td_elv_count(fx->e), 1);
}

/* ---- deadline: merges ------------------------------------------------------------------ */

static void test_deadline_back_merge_grows_request(void **state)
{
	struct fixture *fx = *state;
	struct td_request *rq;
	struct td_request *found;
	struct td_bio *b1 = fx_bio(fx, TD_OP_READ, 100, 8, 0);
	struct td_bio *b2 = fx_bio(fx, TD_OP_READ, 108, 8, 0);

	fx_start(fx, &td_elv_deadline);
	rq = fx_add_bio(fx, b1);
	fx_read(fx, 200); /* a sorted neighbour, not touching */
	assert_int_equal(fx_merge(fx, b2, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, rq);
	assert_null(fx_merge_bio(fx, found, b2, TD_ELV_BACK_MERGE));
	EXPECT_CHAIN(rq, b1, b2);
	assert_int_equal(td_elv_count(fx->e), 2);
	EXPECT_DISPATCH(fx, false, 100, 200, NONE);
}

static void test_deadline_front_merge_found_in_sort_tree_and_resorted(void **state)
{
	struct fixture *fx = *state;
	struct td_request *a;
	struct td_request *found;
	struct td_bio *b0 = fx_bio(fx, TD_OP_READ, 100, 8, 0);
	struct td_bio *front = fx_bio(fx, TD_OP_READ, 92, 8, 0);
	struct td_bio *front2 = fx_bio(fx, TD_OP_READ, 84, 8, 0);
	struct td_bio *elsewhere = fx_bio(fx, TD_OP_READ, 308, 8, 0);
	struct td_request *far;

	fx_start(fx, &td_elv_deadline);
	fx_read(fx, 0); /* FIFO head */
	a = fx_add_bio(fx, b0);
	fx_add(fx, TD_OP_READ, 95, 2, 0); /* overlaps the front merges: sorts between 92 and 100 */
	far = fx_read(fx, 300);

	/* No request ends at 92 and there is no hint yet: the sort tree finds it. */
	assert_int_equal(fx_merge(fx, front, &found), TD_ELV_FRONT_MERGE);
	assert_ptr_equal(found, a);
	assert_null(fx_merge_bio(fx, found, front, TD_ELV_FRONT_MERGE));
	EXPECT_CHAIN(a, front, b0);
	assert_int_equal(a->pid, front->pid);
	assert_int_equal(td_elv_count(fx->e), 4);

	/*
	 * Move the last-merge hint elsewhere, so only the tree can find a's new
	 * start, 92, for the next front merge.
	 */
	assert_int_equal(fx_merge(fx, elsewhere, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, far);
	assert_null(fx_merge_bio(fx, found, elsewhere, TD_ELV_BACK_MERGE));
	assert_int_equal(fx_merge(fx, front2, &found), TD_ELV_FRONT_MERGE);
	assert_ptr_equal(found, a);
	assert_null(fx_merge_bio(fx, found, front2, TD_ELV_FRONT_MERGE));
	EXPECT_CHAIN(a, front2, front, b0);

	/* Re-sorted: a (now at 84) comes before 95 in the sweep from 0. */
	EXPECT_DISPATCH(fx, false, 0, 84, 95, 300, NONE);
}

static void test_deadline_back_merge_joins_next_request(void **state)
{
	struct fixture *fx = *state;
	struct td_request *first;
	struct td_request *second;
	struct td_request *found;
	struct td_bio *b_first = fx_bio(fx, TD_OP_WRITE, 0, 8, 0);
	struct td_bio *b_second = fx_bio(fx, TD_OP_WRITE, 16, 8, 0);
	struct td_bio *gap = fx_bio(fx, TD_OP_WRITE, 8, 8, 0);

	fx_start(fx, &td_elv_deadline);
	first = fx_add_bio(fx, b_first);
	second = fx_add_bio(fx, b_second);
	fx_write(fx, 500);

	assert_int_equal(fx_merge(fx, gap, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, first);
	assert_ptr_equal(fx_merge_bio(fx, found, gap, TD_ELV_BACK_MERGE), second);
	assert_int_equal(td_elv_count(fx->e), 2);
	EXPECT_CHAIN(first, b_first, gap, b_second);
	assert_int_equal(first->sector, 0);
	assert_int_equal(first->nr_sectors, 24);
	assert_int_equal(first->pid, b_first->pid);

	/* The hash knows the new end: a bio at 24 back-merges, nothing ends at 16 any more. */
	struct td_bio *tail = fx_bio(fx, TD_OP_WRITE, 24, 8, 0);

	assert_int_equal(fx_merge(fx, fx_bio(fx, TD_OP_WRITE, 16, 8, 0), &found),
			 TD_ELV_NO_MERGE);
	assert_int_equal(fx_merge(fx, tail, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, first);
	assert_null(fx_merge_bio(fx, found, tail, TD_ELV_BACK_MERGE));
	EXPECT_CHAIN(first, b_first, gap, b_second, tail);
	EXPECT_DISPATCH(fx, false, 0, 500, NONE);
}

static void test_deadline_request_merge_survivor_takes_earlier_deadline(void **state)
{
	struct fixture *fx = *state;
	struct td_request *first;
	struct td_request *second;
	struct td_request *found;
	struct td_bio *b_first;
	struct td_bio *b_second;
	struct td_bio *gap = fx_bio(fx, TD_OP_READ, 8, 8, 0);

	fx_start(fx, &td_elv_deadline);
	/* FIFO: [16,24) at 0 ms, 1000 at 5 ms, [0,8) at 10 ms. */
	fx->now_ns = 0;
	second = fx_read(fx, 16);
	b_second = second->bio;
	fx->now_ns = 5 * MS;
	fx_read(fx, 1000);
	fx->now_ns = 10 * MS;
	first = fx_read(fx, 0);
	b_first = first->bio;
	assert_int_equal(second->fifo_time_ns, 500 * MS);
	assert_int_equal(first->fifo_time_ns, 510 * MS);

	assert_int_equal(fx_merge(fx, gap, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, first);
	assert_ptr_equal(fx_merge_bio(fx, found, gap, TD_ELV_BACK_MERGE), second);
	EXPECT_CHAIN(first, b_first, gap, b_second);
	assert_int_equal(first->fifo_time_ns, 500 * MS);

	/*
	 * The survivor took the emptied request's place at the FIFO head, ahead
	 * of 1000: it starts the first batch and the sweep goes on to 1000.
	 * Left at its own place it would come after 1000.
	 */
	EXPECT_DISPATCH(fx, false, 0, 1000, NONE);
}

static void test_deadline_request_merge_survivor_keeps_its_earlier_deadline(void **state)
{
	struct fixture *fx = *state;
	struct td_request *first;
	struct td_request *found;
	struct td_bio *gap = fx_bio(fx, TD_OP_READ, 8, 8, 0);

	fx_start(fx, &td_elv_deadline);
	fx->now_ns = 0;
	first = fx_read(fx, 0);
	fx->now_ns = 5 * MS;
	fx_read(fx, 1000);
	fx->now_ns = 10 * MS;
	fx_read(fx, 16);

	assert_int_equal(fx_merge(fx, gap, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, first);
	assert_non_null(fx_merge_bio(fx, found, gap, TD_ELV_BACK_MERGE));
	assert_int_equal(first->fifo_time_ns, 500 * MS);
	assert_int_equal(first->nr_sectors, 24);
	/* At 500 ms the survivor is the expired FIFO head; 1000 (505 ms) is not. */
	fx->now_ns = 500 * MS;
	EXPECT_DISPATCH(fx, false, 0, 1000, NONE);
}

static void test_deadline_front_merge_bridges_gap_into_one_request(void **state)
{
	struct fixture *fx = *state;
	struct td_request *first;
	struct td_request *second;
	struct td_request *found;
	struct td_bio *b_first = fx_bio(fx, TD_OP_READ, 0, 8, 0);
	struct td_bio *b_second = fx_bio(fx, TD_OP_READ, 16, 4, 0);
	struct td_bio *tail = fx_bio(fx, TD_OP_READ, 20, 4, 0);
	struct td_bio *gap = fx_bio(fx, TD_OP_READ, 8, 8, 0);

	fx_start(fx, &td_elv_deadline);
	fx->now_ns = 0;
	first = fx_add_bio(fx, b_first);
	fx->now_ns = 10 * MS;
	second = fx_add_bio(fx, b_second);
	fx_read(fx, 100);

	/* [20,24) back-merges into [16,20), which becomes the last-merge hint. */
	assert_int_equal(fx_merge(fx, tail, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, second);
	assert_null(fx_merge_bio(fx, found, tail, TD_ELV_BACK_MERGE));

	/*
	 * [8,16) touches both; the hint is tried first and takes it as a front
	 * merge. The grown [8,24) now touches [0,8) before it: the two become
	 * one, the earlier request survives and the hinted one is emptied.
	 */
	assert_int_equal(fx_merge(fx, gap, &found), TD_ELV_FRONT_MERGE);
	assert_ptr_equal(found, second);
	assert_ptr_equal(fx_merge_bio(fx, found, gap, TD_ELV_FRONT_MERGE), second);
	assert_int_equal(td_elv_count(fx->e), 2);
	EXPECT_CHAIN(first, b_first, gap, b_second, tail);
	assert_int_equal(first->nr_sectors, 24);
	assert_int_equal(first->fifo_time_ns, 500 * MS);
	EXPECT_DISPATCH(fx, false, 0, 100, NONE);
}

static void test_deadline_front_merge_bridge_survivor_takes_earlier_deadline(void **state)
{
	struct fixture *fx = *state;
	struct td_request *first;
	struct td_request *second;
	struct td_request *found;
	struct td_bio *b_first = fx_bio(fx, TD_OP_READ, 0, 8, 0);
	struct td_bio *b_second = fx_bio(fx, TD_OP_READ, 16, 4, 0);
	struct td_bio *tail = fx_bio(fx, TD_OP_READ, 20, 4, 0);
	struct td_bio *gap = fx_bio(fx, TD_OP_READ, 8, 8, 0);

	fx_start(fx, &td_elv_deadline);
	/* FIFO: [16,20) at 0 ms, 1000 at 5 ms, [0,8) at 10 ms. */
	fx->now_ns = 0;
	second = fx_add_bio(fx, b_second);
	fx->now_ns = 5 * MS;
	fx_read(fx, 1000);
	fx->now_ns = 10 * MS;
	first = fx_add_bio(fx, b_first);

	assert_int_equal(fx_merge(fx, tail, &found), TD_ELV_BACK_MERGE);
	assert_null(fx_merge_bio(fx, found, tail, TD_ELV_BACK_MERGE));
	assert_int_equal(fx_merge(fx, gap, &found), TD_ELV_FRONT_MERGE);
	assert_ptr_equal(fx_merge_bio(fx, found, gap, TD_ELV_FRONT_MERGE), second);
	EXPECT_CHAIN(first, b_first, gap, b_second, tail);
	assert_int_equal(first->fifo_time_ns, 500 * MS);
	EXPECT_DISPATCH(fx, false, 0, 1000, NONE);
}

static void test_deadline_request_merge_stops_at_limits(void **state)
{
	struct fixture *fx = *state;
	struct td_request *first;
	struct td_request *found;
	struct td_bio *gap = fx_bio(fx, TD_OP_WRITE, 8, 8, 0);
	struct td_bio *gap_fua = fx_bio(fx, TD_OP_WRITE, 108, 8, 0);

	fx->eq.max_sectors = 16;
	fx_start(fx, &td_elv_deadline);
	/* [0,8) + [8,16) fits; + [16,24) would make 24 > 16 sectors. */
	first = fx_write(fx, 0);
	fx_write(fx, 16);
	assert_int_equal(fx_merge(fx, gap, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, first);
	assert_null(fx_merge_bio(fx, found, gap, TD_ELV_BACK_MERGE));
	assert_int_equal(first->nr_sectors, 16);
	assert_int_equal(td_elv_count(fx->e), 2);

	/* A FUA neighbour does not join a plain request. */
	first = fx_write(fx, 100);
	fx_add(fx, TD_OP_WRITE, 116, 8, TD_BIO_FUA);
	assert_int_equal(fx_merge(fx, gap_fua, &found), TD_ELV_BACK_MERGE);
	assert_ptr_equal(found, first);
	assert_null(fx_merge_bio(fx, found, gap_fua, TD_ELV_BACK_MERGE));
	assert_int_equal(td_elv_count(fx->e), 4);
	EXPECT_DISPATCH(fx, false, 0, 16, 100, 116, NONE);
}

/* ---- bookkeeping ----------------------------------------------------------------------- */

static void test_deadline_count_and_has_work_track_every_change(void **state)
{
	struct fixture *fx = *state;
	struct td_request *found;
	struct td_bio *back = fx_bio(fx, TD_OP_READ, 8, 8, 0);

	fx_start(fx, &td_elv_deadline);
	fx_read(fx, 0);
	fx_read(fx, 16);
	fx_write(fx, 100);
	assert_int_equal(td_elv_count(fx->e), 3);
	assert_true(td_elv_has_work(fx->e));

	/* A bio merge keeps the count; the request merge it causes drops one. */
	assert_int_equal(fx_merge(fx, back, &found), TD_ELV_BACK_MERGE);
	assert_non_null(fx_merge_bio(fx, found, back, TD_ELV_BACK_MERGE));
	assert_int_equal(td_elv_count(fx->e), 2);

	assert_int_not_equal(fx_dispatch(fx, false), NONE);
	assert_int_equal(td_elv_count(fx->e), 1);
	assert_true(td_elv_has_work(fx->e));
	assert_int_not_equal(fx_dispatch(fx, false), NONE);
	assert_int_equal(td_elv_count(fx->e), 0);
	assert_false(td_elv_has_work(fx->e));
	assert_int_equal(fx_dispatch(fx, false), NONE);
	assert_int_equal(fx_dispatch(fx, true), NONE);
	assert_int_equal(td_elv_count(fx->e), 0);
}

struct type_case {
	const char *name;
	const struct td_elevator_type *type;
};

static const struct type_case leaves_lookups_cases[] = {
	{ "test_noop_dispatched_request_leaves_merge_lookups", &td_elv_noop },
	{ "test_deadline_dispatched_request_leaves_merge_lookups", &td_elv_deadline },
};

static void run_leaves_lookups_case(void **state)
{
	struct fixture *fx = *state;
	const struct type_case *c = fx->row;
	struct td_request *rq;
	struct td_request *found;
	struct td_bio *back = fx_bio(fx, TD_OP_READ, 108, 8, 0);

	fx_start(fx, c->type);
	rq = fx_read(fx, 100);
	assert_int_equal(fx_merge(fx, back, &found), TD_ELV_BACK_MERGE);
	assert_null(fx_merge_bio(fx, found, back, TD_ELV_BACK_MERGE));
	/*
	 * rq is now the hint, in the hash and (deadline) in the tree; once
	 * dispatched it is in none of them, though this test leaves it QUEUED.
	 */
	assert_ptr_equal(td_elv_dispatch(fx->e, false), rq);
	assert_true(td_list_empty(&rq->hash));
	assert_true(td_list_empty(&rq->fifo));
	assert_int_equal(fx_merge(fx, fx_bio(fx, TD_OP_READ, 116, 8, 0), &found),
			 TD_ELV_NO_MERGE);
	assert_int_equal(fx_merge(fx, fx_bio(fx, TD_OP_READ, 92, 8, 0), &found),
			 TD_ELV_NO_MERGE);
	assert_null(found);
	td_elv_completed(fx->e, rq);
	td_rq_pool_put_locked(&fx->pool, rq);
}


int main(void)
{
	static struct test_list l;

	ADD_TEST(&l, test_elv_find_returns_registered_types_only);
	ADD_TABLE(&l, run_names_case, NULL, NULL, names_cases);
	ADD_FX_TABLE(&l, run_create_case, create_cases);
	ADD_FX_TEST(&l, test_elv_create_reports_init_failure);
	ADD_FX_TEST(&l, test_elv_create_reports_enomem_when_hash_allocation_fails);
	ADD_FX_TABLE(&l, run_order_case, order_cases);
	ADD_FX_TEST(&l, test_deadline_equal_sectors_keep_arrival_order);
	ADD_FX_TEST(&l, test_deadline_force_and_normal_dispatch_agree);
	ADD_FX_TABLE(&l, run_starved_case, starved_cases);
	ADD_FX_TABLE(&l, run_lookup_case, lookup_cases);
	ADD_FX_TEST(&l, test_noop_back_merge_through_hash_grows_request);
	ADD_FX_TEST(&l, test_noop_never_front_merges);
	ADD_FX_TEST(&l, test_noop_no_merge_past_max_sectors);
	ADD_FX_TEST(&l, test_noop_no_merge_past_max_bios);
	ADD_FX_TEST(&l, test_deadline_back_merge_grows_request);
	ADD_FX_TEST(&l, test_deadline_front_merge_found_in_sort_tree_and_resorted);
	ADD_FX_TEST(&l, test_deadline_back_merge_joins_next_request);
	ADD_FX_TEST(&l, test_deadline_request_merge_survivor_takes_earlier_deadline);
	ADD_FX_TEST(&l, test_deadline_request_merge_survivor_keeps_its_earlier_deadline);
	ADD_FX_TEST(&l, test_deadline_front_merge_bridges_gap_into_one_request);
	ADD_FX_TEST(&l, test_deadline_front_merge_bridge_survivor_takes_earlier_deadline);
	ADD_FX_TEST(&l, test_deadline_request_merge_stops_at_limits);
	ADD_FX_TEST(&l, test_deadline_count_and_has_work_track_every_change);
	ADD_FX_TABLE(&l, run_leaves_lookups_case, leaves_lookups_cases);

	return test_list_run(&l);
}
