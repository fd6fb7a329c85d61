// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_queue_mq.c - the mq mode of the request queue (src/engine/queue_mq.c
 * and what it shares with rq mode).
 *
 * Two parts:
 *  - every queued-mode case of test_queue.c, built again with the queue in
 *    mq mode and one hardware context: the software queues, the hctx, the
 *    shared tag set and the split completion must behave exactly as the rq
 *    queue does (prep, DEFER and KILL, tags, resets and retries, timeouts,
 *    barriers, depth and scheduler switches, bounded drains, plugging);
 *  - cases of its own with several hardware contexts: which hctx a CPU's
 *    bios reach, per-hctx status and tags, scheduler names, two submitters
 *    pinned to different CPUs, overlapping writes from different hctxs, and
 *    the reset stress test across hctxs.
 * Threads are pinned with sched_setaffinity to the CPUs this process may
 * use, so which software queue a bio takes is known exactly; on a machine
 * with one usable CPU the cross-CPU expectations degrade to that one CPU.
 */
#define TEST_QUEUE_MODE TD_MODE_MQ
#define TEST_QUEUE_NR_HW 1
#define TEST_QUEUE_NO_MAIN
#include "test_queue.c"

#include <sched.h>

/* ---- CPUs ----------------------------------------------------------------------------- */

/* The CPUs this process may run on, from its affinity at start. */
static int usable_cpus[CPU_SETSIZE];
static unsigned int nr_usable_cpus;

static void find_usable_cpus(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		usable_cpus[0] = sched_getcpu();
		nr_usable_cpus = 1;
		return;
	}
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			usable_cpus[nr_usable_cpus++] = c;
}

/* Run the calling thread on @cpu only. Return: true when it does. */
static bool pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		return false;
	return sched_getcpu() == cpu;
}

/* Let the calling thread run on every usable CPU again. */
static void unpin(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	for (unsigned int i = 0; i < nr_usable_cpus; i++)
		CPU_SET(usable_cpus[i], &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static unsigned int possible_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	return n < 1 ? 1 : (unsigned int)n;
}

static struct td_hctx_status hctx_status(struct env *e, unsigned int i)
{
	struct td_hctx_status hs;

	assert_int_equal(td_queue_get_hctx_status(e->q, i, &hs), 0);
	return hs;
}

/* ---- which hctx a CPU's bios reach ---------------------------------------------------- */

struct map_case {
	const char *name;
	unsigned int nr_hw; /* 0: one per CPU */
};

static const struct map_case map_cases[] = {
	{ "test_mq_cpu_bios_reach_hctx_cpu_mod_1", 1 },
	{ "test_mq_cpu_bios_reach_hctx_cpu_mod_2", 2 },
	{ "test_mq_cpu_bios_reach_hctx_cpu_mod_3", 3 },
	{ "test_mq_cpu_bios_reach_own_hctx_by_default", 0 },
};

static void run_map_case(void **state)
{
	const struct map_case *c = *state;
	unsigned int nr_hw = c->nr_hw ? c->nr_hw : possible_cpus();
	uint64_t *want_dispatched = calloc(nr_hw, sizeof(*want_dispatched));
	uint8_t *buf = xmalloc(4096);
	struct td_queue_status st;
	struct env_opts o;
	struct env e;
	struct tbio t;

	assert_non_null(want_dispatched);
	env_opts_default(&o);
	o.nr_hw_queues = c->nr_hw;
	o.elevator = "none";
	env_create(&e, &o);
	st = env_status(&e);
	assert_int_equal(st.mode, TD_MODE_MQ);
	assert_int_equal(st.nr_hw_queues, nr_hw);
	assert_string_equal(st.elevator, "none");
	for (unsigned int i = 0; i < nr_hw; i++)
		assert_int_equal(hctx_status(&e, i).dispatched, 0);

	for (unsigned int k = 0; k < nr_usable_cpus; k++) {
		int cpu = usable_cpus[k];

		assert_true(pin_to(cpu));
		for (unsigned int j = 0; j <= k; j++) {
			/* Inline drive: each write is dispatched and done before submit returns. */
			fill_range(buf, (uint64_t)(k * 64 + j * 8), 8, 3);
			submit_sync(&e, &t, TD_OP_WRITE, (uint64_t)(k * 64 + j * 8), 8, buf);
			assert_int_equal(atomic_load(&t.err), 0);
			assert_memory_equal(env_disk(&e, (uint64_t)(k * 64 + j * 8)), buf, 4096);
			want_dispatched[(unsigned int)cpu % nr_hw]++;
		}
		for (unsigned int i = 0; i < nr_hw; i++)
			assert_int_equal(hctx_status(&e, i).dispatched, want_dispatched[i]);
	}
	unpin();
	uint64_t ctx_total = 0;

	for (unsigned int i = 0; i < nr_hw; i++) {
		struct td_hctx_status hs = hctx_status(&e, i);

		assert_int_equal(hs.queued, 0);
		assert_int_equal(hs.in_flight, 0);
		ctx_total += hs.ctx_queued;
	}
	assert_int_equal(ctx_total, nr_usable_cpus * (nr_usable_cpus + 1) / 2);
	struct td_hctx_status hs;

	assert_int_equal(td_queue_get_hctx_status(e.q, nr_hw, &hs), -EINVAL);
	env_destroy(&e);
	free(want_dispatched);
	free(buf);
}

/* ---- scheduler names ------------------------------------------------------------------ */

struct sched_case {
	const char *name;
	enum td_queue_mode mode;
	const char *set;
	int ret;
	const char *shown;
};

static const struct sched_case sched_cases[] = {
	{ "test_mq_elevator_none_shows_none", TD_MODE_MQ, "none", 0, "none" },
	{ "test_mq_elevator_mq_deadline_shows_mq_deadline", TD_MODE_MQ, "mq-deadline", 0,
	  "mq-deadline" },
	{ "test_mq_elevator_noop_means_none", TD_MODE_MQ, "noop", 0, "none" },
	{ "test_mq_elevator_deadline_means_mq_deadline", TD_MODE_MQ, "deadline", 0,
	  "mq-deadline" },
	{ "test_mq_elevator_unknown_is_rejected_and_keeps_scheduler", TD_MODE_MQ, "cfq", -EINVAL,
	  "mq-deadline" },
	{ "test_rq_elevator_mq_deadline_means_deadline", TD_MODE_RQ, "mq-deadline", 0,
	  "deadline" },
	{ "test_rq_elevator_none_means_noop", TD_MODE_RQ, "none", 0, "noop" },
};

static void run_sched_case(void **state)
{
	const struct sched_case *c = *state;
	uint8_t *buf = xmalloc(4096);
	struct env_opts o;
	struct env e;
	struct tbio t;

	env_opts_default(&o);
	o.mode = c->mode;
	o.nr_hw_queues = 2;
	o.elevator = "deadline";
	env_create(&e, &o);
	assert_string_equal(env_status(&e).elevator,
			    c->mode == TD_MODE_MQ ? "mq-deadline" : "deadline");
	assert_int_equal(td_queue_set_elevator(e.q, c->set), c->ret);
	assert_string_equal(env_status(&e).elevator, c->shown);
	/* Every hctx switched, and serves. */
	for (unsigned int k = 0; k < nr_usable_cpus; k++) {
		assert_true(pin_to(usable_cpus[k]));
		fill_range(buf, k * 8, 8, 9);
		submit_sync(&e, &t, TD_OP_WRITE, k * 8, 8, buf);
		assert_int_equal(atomic_load(&t.err), 0);
		assert_memory_equal(env_disk(&e, k * 8), buf, 4096);
	}
	unpin();
	env_destroy(&e);
	free(buf);
}

/* ---- tags and reset across hctxs ------------------------------------------------------ */

/*
 * Writes held by the drive (an injected hang) on every usable CPU's hctx:
 * tags name their hctx, and one reset takes every one back and requeues it.
 */
static void test_mq_reset_requeues_commands_of_every_hctx(void **state)
{
	unsigned int n = nr_usable_cpus < 4 ? nr_usable_cpus : 4;
	uint8_t *buf = xmalloc((size_t)n * 4096);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct td_tag_info info[8];
	struct tbio t[4];
	struct env_opts o;
	struct env e;
	struct done d;

	(void)state;
	assert_non_null(s);
	env_opts_default(&o);
	o.nr_hw_queues = 0; /* one per CPU */
	o.workers = 2;
	o.elevator = "none";
	env_create(&e, &o);
	assert_int_equal(td_inject_add_hang(td_drive_inject(e.drive), n), 0);
	done_init(&d);
	for (unsigned int k = 0; k < n; k++) {
		assert_true(pin_to(usable_cpus[k]));
		fill_range(buf + k * 4096, k * 64, 8, 21);
		tbio_init(&t[k], &d, TD_OP_WRITE, k * 64, 8, buf + k * 4096);
		td_queue_submit(e.q, &t[k].bio);
	}
	unpin();
	assert_true(wait_hung(&e, n));

	assert_int_equal(td_queue_get_tags(e.q, info, 8), n);
	for (unsigned int i = 0; i < n; i++) {
		unsigned int k = (unsigned int)(info[i].sector / 64);

		assert_true(k < n);
		assert_int_equal(info[i].sector, k * 64);
		assert_int_equal(info[i].hctx, usable_cpus[k] % (int)possible_cpus());
		assert_int_equal(info[i].op, TD_OP_WRITE);
	}
	assert_int_equal(env_status(&e).in_flight, n);
	assert_int_equal(done_count(&d), 0);

	/* The hangs are used up: the requeued writes complete. */
	assert_int_equal(td_queue_reset(e.q, false), n);
	assert_true(done_wait(&d, n, WAIT_MS));
	assert_int_equal(d.errors, 0);
	for (unsigned int k = 0; k < n; k++) {
		assert_int_equal(atomic_load(&t[k].ended), 1);
		assert_memory_equal(env_disk(&e, k * 64), buf + k * 4096, 4096);
	}
	env_stats(&e, s);
	assert_int_equal(s->counters[TD_STAT_RESETS], 1);
	assert_int_equal(s->counters[TD_STAT_REQUEUED], n);
	assert_int_equal(s->ios[TD_OP_WRITE], n);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	assert_int_equal(td_tag_busy(td_queue_tag_map(e.q)), 0);
	free(s);
	done_destroy(&d);
	env_destroy(&e);
	free(buf);
}

/* Return: true when @n requests are in flight within WAIT_MS. */
static bool wait_in_flight(struct env *e, unsigned int n)
{
	uint64_t deadline = mono_ns() + (uint64_t)WAIT_MS * 1000000ULL;

	while (env_status(e).in_flight != n) {
		if (mono_ns() > deadline)
			return false;
		sleep_us(200);
	}
	return true;
}

/*
 * One tag, two hctxs: a write on the second CPU waits for the tag the first
 * CPU's write holds for 100 ms at the drive. Return: the deferrals counted,
 * or -1 when the first write had already ended by the time the second was
 * submitted (a stalled machine: the second never had to wait).
 */
static int64_t write_behind_other_hctxs_tag(void)
{
	uint8_t *buf = xmalloc(2 * 4096);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));
	struct tbio t[2];
	struct env_opts o;
	struct env e;
	struct done d;
	bool waited;
	int64_t deferred;

	assert_non_null(s);
	env_opts_default(&o);
	o.nr_hw_queues = 0; /* one per CPU */
	o.depth = 1;
	o.workers = 1;
	o.elevator = "none";
	env_create(&e, &o);
	td_inject_set_latency(td_drive_inject(e.drive), 100000);
	done_init(&d);
	for (unsigned int k = 0; k < 2; k++) {
		/* With one usable CPU both go to one hctx, where the second waits too. */
		assert_true(pin_to(usable_cpus[k % nr_usable_cpus]));
		fill_range(buf + k * 4096, k * 64, 8, 31);
		tbio_init(&t[k], &d, TD_OP_WRITE, k * 64, 8, buf + k * 4096);
		td_queue_submit(e.q, &t[k].bio);
		if (k == 0)
			assert_true(wait_in_flight(&e, 1));
	}
	/* Nothing ended yet: the second was submitted while the first held the tag. */
	waited = done_count(&d) == 0;
	unpin();
	assert_true(done_wait(&d, 2, WAIT_MS));
	assert_int_equal(d.errors, 0);
	for (unsigned int k = 0; k < 2; k++)
		assert_memory_equal(env_disk(&e, k * 64), buf + k * 4096, 4096);
	env_stats(&e, s);
	assert_int_equal(s->ios[TD_OP_WRITE], 2);
	deferred = waited ? (int64_t)s->counters[TD_STAT_DEFERRED] : -1;
	free(s);
	done_destroy(&d);
	env_destroy(&e);
	free(buf);
	return deferred;
}

/*
 * The tag's end runs the waiting write: it is deferred exactly once, not
 * retried by its hctx's timer every millisecond. A run where the machine
 * stalled past the first write's 100 ms proves nothing and is repeated.
 */
static void test_mq_write_waiting_for_other_hctxs_tag_is_run_by_its_end(void **state)
{
	int64_t deferred = -1;

	(void)state;
	for (unsigned int attempt = 0; attempt < 10 && deferred < 0; attempt++)
		deferred = write_behind_other_hctxs_tag();
	if (deferred < 0)
		fail_msg("in 10 runs the second write never arrived before the first ended");
	assert_int_equal(deferred, 1);
}

/* ---- completions run other hctxs: never nested ----------------------------------------- */

struct nest_submitter {
	struct env *e;
	struct tbio *t;
	int cpu;
	_Atomic bool pinned_failed;
};

/* Submit one write from @cpu; with an inline drive it executes (and waits at the gate) here. */
static void *nest_submit_main(void *p)
{
	struct nest_submitter *s = p;

	if (!pin_to(s->cpu)) {
		atomic_store(&s->pinned_failed, true);
		return NULL;
	}
	td_queue_submit(s->e->q, &s->t->bio);
	return NULL;
}

/*
 * One tag, two hctxs, an inline drive. A write of hctx 0 holds the tag at the
 * drive (the gate) in thread A; a write of hctx 1 finds no tag and waits. When
 * the first ends, its completion (in A, inside hctx 0's run) frees the tag and
 * kicks hctx 1. That run used to happen there and then, nested in hctx 0's: the
 * second write executed with two queue runs on A's stack. Now it runs after
 * hctx 0's run has returned: one run on the stack at a time, and both writes
 * land.
 */
static void test_mq_completion_runs_other_hctx_after_its_own_run_not_inside(void **state)
{
	uint8_t *buf = xmalloc(2 * 4096);
	struct nest_submitter a;
	struct tbio t[2];
	struct env_opts o;
	struct env e;
	struct done d;
	pthread_t th;
	int cpu[2] = { -1, -1 };

	(void)state;
	/* Two usable CPUs that map to different hctxs of two (c % 2). */
	for (unsigned int i = 0; i < nr_usable_cpus && cpu[1] < 0; i++) {
		if (cpu[0] < 0)
			cpu[0] = usable_cpus[i];
		else if (usable_cpus[i] % 2 != cpu[0] % 2)
			cpu[1] = usable_cpus[i];
	}
	if (cpu[1] < 0) {
		free(buf);
		skip();
	}
	env_opts_default(&o);
	o.nr_hw_queues = 2;
	o.depth = 1;
	o.workers = 0;
	o.gate = true;
	o.elevator = "none";
	env_create(&e, &o);
	atomic_store(&e.gate->block_writes, true);
	done_init(&d);
	for (unsigned int k = 0; k < 2; k++) {
		fill_range(buf + k * 4096, k * 64, 8, 57);
		tbio_init(&t[k], &d, TD_OP_WRITE, k * 64, 8, buf + k * 4096);
	}

	a = (struct nest_submitter){ .e = &e, .t = &t[0], .cpu = cpu[0] };
	assert_int_equal(pthread_create(&th, NULL, nest_submit_main, &a), 0);
	assert_true(gate_wait_waiting(e.gate, 1));
	/* The second write, from the other hctx: no tag, so it waits, and submit returns. */
	assert_true(pin_to(cpu[1]));
	td_queue_submit(e.q, &t[1].bio);
	unpin();
	assert_int_equal(hctx_status(&e, (unsigned int)cpu[1] % 2).queued, 1);
	assert_int_equal(done_count(&d), 0);

	atomic_store(&e.gate->block_writes, false);
	gate_release(e.gate, 1);
	assert_true(done_wait(&d, 2, WAIT_MS));
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_false(atomic_load(&a.pinned_failed));
	assert_int_equal(d.errors, 0);
	for (unsigned int k = 0; k < 2; k++)
		assert_memory_equal(env_disk(&e, k * 64), buf + k * 4096, 4096);
	/* Both executed in A (hctx 1 has no other runner), each with one run on the stack. */
	assert_int_equal(e.gate->max_inline_depth, 1);
	assert_int_equal(e.gate->nr_callers, 1);
	/* Nothing is left pinned: the deferred run dropped its count, and the queue drains. */
	td_queue_drain(e.q);
	done_destroy(&d);
	env_destroy(&e);
	free(buf);
}

/* ---- two submitters on two CPUs ------------------------------------------------------- */

#define PAIR_WRITES 400

struct pair_arg {
	struct env *e;
	int cpu;
	unsigned int id;
	_Atomic unsigned int failures;
};

static void *pair_main(void *p)
{
	struct pair_arg *a = p;
	struct tbio *t = calloc(PAIR_WRITES, sizeof(*t));
	uint8_t *buf = malloc((size_t)PAIR_WRITES * 4096);
	struct done d;

	if (!t || !buf || !pin_to(a->cpu)) {
		atomic_fetch_add(&a->failures, 1);
		goto out_free;
	}
	done_init(&d);
	/* Thread id writes every other 4 KiB block: ids interleave, nothing overlaps. */
	for (unsigned int i = 0; i < PAIR_WRITES; i++) {
		uint64_t sector = (uint64_t)(2 * i + a->id) * 8;

		fill_range(buf + (size_t)i * 4096, sector, 8, 100 + a->id);
		tbio_init(&t[i], &d, TD_OP_WRITE, sector, 8, buf + (size_t)i * 4096);
		td_queue_submit(a->e->q, &t[i].bio);
	}
	if (!done_wait(&d, PAIR_WRITES, WAIT_MS * 3) || d.errors)
		atomic_fetch_add(&a->failures, 1);
	for (unsigned int i = 0; i < PAIR_WRITES; i++)
		if (atomic_load(&t[i].ended) != 1)
			atomic_fetch_add(&a->failures, 1);
	done_destroy(&d);
out_free:
	free(buf);
	free(t);
	return NULL;
}

struct pair_case {
	const char *name;
	unsigned int workers;
	const char *elevator;
};

static const struct pair_case pair_cases[] = {
	{ "test_mq_two_cpus_submit_concurrently_inline_none", 0, "none" },
	{ "test_mq_two_cpus_submit_concurrently_workers_none", 2, "none" },
	{ "test_mq_two_cpus_submit_concurrently_workers_mq_deadline", 2, "mq-deadline" },
};

static void run_pair_case(void **state)
{
	const struct pair_case *c = *state;
	struct pair_arg a[2];
	pthread_t th[2];
	struct env_opts o;
	struct env e;
	uint8_t *want = xmalloc(4096);
	uint8_t *got = xmalloc(4096);
	struct td_stats_snapshot *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	env_opts_default(&o);
	o.nr_hw_queues = 0;
	o.workers = c->workers;
	o.elevator = c->elevator;
	o.depth = 16;
	env_create(&e, &o);
	for (unsigned int i = 0; i < 2; i++) {
		a[i] = (struct pair_arg){ .e = &e, .id = i,
					  .cpu = usable_cpus[i % nr_usable_cpus] };
		assert_int_equal(pthread_create(&th[i], NULL, pair_main, &a[i]), 0);
	}
	for (unsigned int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(atomic_load(&a[i].failures), 0);
	}
	td_queue_drain(e.q);

	/* Every block holds exactly what its writer wrote, read back through the queue too. */
	for (unsigned int b = 0; b < 2 * PAIR_WRITES; b++) {
		struct tbio t;

		fill_range(want, (uint64_t)b * 8, 8, 100 + b % 2);
		assert_memory_equal(env_disk(&e, (uint64_t)b * 8), want, 4096);
		memset(got, 0, 4096);
		submit_sync_wait(&e, &t, TD_OP_READ, (uint64_t)b * 8, 8, got);
		assert_int_equal(atomic_load(&t.err), 0);
		assert_memory_equal(got, want, 4096);
	}
	env_stats(&e, s);
	assert_int_equal(s->errors[TD_OP_WRITE], 0);
	/* Merged bios count once: requests plus merges is every bio. */
	assert_int_equal(s->ios[TD_OP_WRITE] + s->back_merges[TD_OP_WRITE] +
				 s->front_merges[TD_OP_WRITE],
			 2 * PAIR_WRITES);
	assert_int_equal(s->ios[TD_OP_READ] + s->back_merges[TD_OP_READ] +
				 s->front_merges[TD_OP_READ],
			 2 * PAIR_WRITES);
	uint64_t dispatched = 0;
	unsigned int busy_hctxs = 0;

	for (unsigned int i = 0; i < env_status(&e).nr_hw_queues; i++) {
		struct td_hctx_status hs = hctx_status(&e, i);

		dispatched += hs.dispatched;
		busy_hctxs += hs.ctx_queued > 0;
		assert_int_equal(hs.queued, 0);
		assert_int_equal(hs.in_flight, 0);
	}
	assert_int_equal(dispatched, s->ios[TD_OP_WRITE] + s->ios[TD_OP_READ]);
	/* The writers ran on two CPUs, hence two software queues and two hctxs. */
	if (nr_usable_cpus >= 2 && usable_cpus[0] % (int)possible_cpus() !=
				       usable_cpus[1] % (int)possible_cpus())
		assert_true(busy_hctxs >= 2);
	assert_int_equal(td_tag_busy(td_queue_tag_map(e.q)), 0);
	env_destroy(&e);
	free(s);
	free(want);
	free(got);
}

/* ---- shared cases run with two hardware contexts -------------------------------------- */

/* Run @fn (a case of test_queue.c) on queues of two hctxs. */
static void with_two_hctxs(void (*fn)(void **), void **state)
{
	test_nr_hw = 2;
	fn(state);
	test_nr_hw = TEST_QUEUE_NR_HW;
}

static void test_mq_overlapping_writes_from_two_hctxs_never_in_flight_together(void **state)
{
	with_two_hctxs(test_overlapping_writes_never_in_flight_together, state);
}

static void test_mq_stress_resets_under_load_across_two_hctxs_keep_every_write(void **state)
{
	with_two_hctxs(test_stress_resets_under_load_keep_every_completed_write, state);
}

static void test_mq_elevator_switch_under_load_across_two_hctxs_loses_no_write(void **state)
{
	with_two_hctxs(test_elevator_switch_under_load_loses_no_write, state);
}

static void test_mq_depth_resize_across_two_hctxs(void **state)
{
	with_two_hctxs(test_depth_resize_from_4_to_1_and_back_with_commands_held, state);
}

int main(void)
{
	/* The cases of test_queue.c; the bio mode ones ask for bio mode and run as there. */
	static const struct CMUnitTest shared[] = {
		QUEUE_SHARED_CASES
	};
	static const struct CMUnitTest own[] = {
		cmocka_unit_test(test_mq_reset_requeues_commands_of_every_hctx),
		cmocka_unit_test(test_mq_write_waiting_for_other_hctxs_tag_is_run_by_its_end),
		cmocka_unit_test(test_mq_completion_runs_other_hctx_after_its_own_run_not_inside),
		cmocka_unit_test(test_mq_overlapping_writes_from_two_hctxs_never_in_flight_together),
		cmocka_unit_test(test_mq_elevator_switch_under_load_across_two_hctxs_loses_no_write),
		cmocka_unit_test(test_mq_depth_resize_across_two_hctxs),
		cmocka_unit_test(test_mq_stress_resets_under_load_across_two_hctxs_keep_every_write),
	};
	struct CMUnitTest tests[TD_ARRAY_SIZE(shared) + TD_ARRAY_SIZE(own) +
			       TD_ARRAY_SIZE(prep_cases) + TD_ARRAY_SIZE(kill_cases) +
			       TD_ARRAY_SIZE(kick_cases) + TD_ARRAY_SIZE(drain_cases) +
			       TD_ARRAY_SIZE(depth_cases) +
			       TD_ARRAY_SIZE(map_cases) + TD_ARRAY_SIZE(sched_cases) +
			       TD_ARRAY_SIZE(pair_cases)];
	size_t n = 0;

	find_usable_cpus();
	TABLE_CASES(run_prep_case, prep_cases, tests, n);
	TABLE_CASES(run_kill_case, kill_cases, tests, n);
	for (size_t i = 0; i < TD_ARRAY_SIZE(shared); i++)
		tests[n++] = shared[i];
	TABLE_CASES(run_kick_case, kick_cases, tests, n);
	TABLE_CASES(run_drain_case, drain_cases, tests, n);
	TABLE_CASES(run_depth_case, depth_cases, tests, n);
	TABLE_CASES(run_map_case, map_cases, tests, n);
	TABLE_CASES(run_sched_case, sched_cases, tests, n);
	TABLE_CASES(run_pair_case, pair_cases, tests, n);
	for (size_t i = 0; i < TD_ARRAY_SIZE(own); i++)
		tests[n++] = own[i];

	td_log_init("test_queue_mq", TD_LOG_ERR);
	alarm(WATCHDOG_S);
	return _cmocka_run_group_tests("test_queue_mq", tests, n, NULL, NULL);
}
