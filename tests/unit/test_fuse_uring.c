// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_fuse_uring.c - FUSE over io_uring without a connection: the request
 * tags, and the idle trim's promise that no request the kernel wrote into an
 * armed entry is lost, whenever it was written.
 *
 * The kernel writes a request into an armed entry (payload, then the ring
 * header with its commit_id) in one piece of work in the owning loop's
 * thread, at any return to user space: before td_ring_trim_idle() moves the
 * entry's pages away, or after (never during: that is one system call). This
 * test plays the kernel at both moments through its own mremap(), which the
 * daemon's objects call instead of libc's (a definition in the program wins):
 * "before" writes the request into the entry and then moves; "after" moves
 * and then writes into the range left in place. The entries are made by
 * td_fuse_uring_create() as for a real connection; their queue threads wait
 * for a start that never comes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/fuse.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>
#include "daemon/fuse_uring_int.h"
#include "unit_util.h"

#define PAYLOAD ((size_t)1 << 20)

enum fill_when {
	FILL_NEVER,
	FILL_BEFORE_MOVE,
	FILL_AFTER_MOVE,
};

/* What the next mremap() of the test does besides moving: who plays the kernel when. */
static struct {
	enum fill_when when;
	struct td_ring_ent *ent;
	uint64_t unique;
	size_t payload_len;
	unsigned int calls;
	bool refuse; /* fail the move with EINVAL, as a kernel before 5.7 (or valgrind) does */
} kernel;

/* The kernel's work for a request of @unique with @payload_len bytes, into @e at @base. */
static void kernel_writes_request(void *base, uint64_t unique, size_t payload_len)
{
	struct td_fuse_uring_req_header *hdr = base;
	struct fuse_in_header *in = (void *)hdr->in_out;
	char *payload = (char *)base + TD_URING_SCRATCH_BYTES;

	for (size_t i = 0; i < payload_len; i++)
		payload[i] = (char)(unique + i * 7 + 1);
	hdr->ring_ent_in_out.commit_id = unique;
	hdr->ring_ent_in_out.payload_sz = (uint32_t)payload_len;
	in->unique = unique;
	in->opcode = FUSE_WRITE;
	in->len = (uint32_t)(sizeof(*in) + sizeof(struct fuse_write_in) + payload_len);
}

static bool request_is_there(const struct td_ring_ent *e, uint64_t unique, size_t payload_len)
{
	const struct fuse_in_header *in = (const void *)e->hdr->in_out;

	if (e->hdr->ring_ent_in_out.commit_id != unique || in->unique != unique ||
	    e->hdr->ring_ent_in_out.payload_sz != payload_len)
		return false;
	for (size_t i = 0; i < payload_len; i++)
		if (e->payload[i] != (char)(unique + i * 7 + 1))
			return false;
	return true;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *moved;

	kernel.calls++;
	if (kernel.when == FILL_BEFORE_MOVE && kernel.ent && old == kernel.ent->map)
		kernel_writes_request(old, kernel.unique, kernel.payload_len);
	if (kernel.refuse) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	/* The real move; flags without MREMAP_FIXED take no fifth argument. */
	assert_false(flags & MREMAP_FIXED);
	moved = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, NULL);
	if (moved != MAP_FAILED && kernel.when == FILL_AFTER_MOVE && kernel.ent &&
	    old == kernel.ent->map)
		kernel_writes_request(old, kernel.unique, kernel.payload_len);
	return moved;
}

/*
 * Return: whether this kernel moves pages with MREMAP_DONTUNMAP (Linux 5.7;
 * valgrind does not implement it). Where it does not, the trim keeps every
 * page, and the tests of what a move does skip.
 */
static bool dontunmap_moves(void)
{
	size_t len = 4096;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *moved;

	assert_true(p != MAP_FAILED);
	moved = (void *)syscall(SYS_mremap, p, len, len, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
	munmap(p, len);
	if (moved == MAP_FAILED)
		return false;
	munmap(moved, len);
	return true;
}

#define SKIP_WITHOUT_DONTUNMAP()                                                              \
	do {                                                                                  \
		if (!dontunmap_moves()) {                                                     \
			print_message("mremap(MREMAP_DONTUNMAP) is refused here (valgrind, or a " \
				      "kernel before 5.7): nothing to move, skipped\n");          \
			skip();                                                               \
		}                                                                             \
	} while (0)

static void noop_process(void *arg, void *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
}

static int setup(void **state)
{
	struct td_fuse_uring_params p = {
		.fuse_fd = -1,
		.nr_entries = 4,
		.payload_bytes = PAYLOAD,
		.process = noop_process,
	};
	char err[128];
	struct td_fuse_uring *u = td_fuse_uring_create(&p, err, sizeof(err));

	if (!u)
		fail_msg("td_fuse_uring_create: %s", err);
	memset(&kernel, 0, sizeof(kernel));
	*state = u;
	return 0;
}

static int teardown(void **state)
{
	td_fuse_uring_destroy(*state);
	return 0;
}

/* Entry @i of queue 0, armed by that queue's loop after answering @last (0: never used). */
static struct td_ring_ent *armed_ent(struct td_fuse_uring *u, unsigned int i, uint64_t last)
{
	struct td_ring_ent *e = &u->queues[0].ents[i];

	td_ring_set_owner(e, &u->queues[0].loop);
	e->state = TD_ENT_ARMED;
	e->unique = last;
	e->armed_id = last;
	if (last)
		kernel_writes_request(e->map, last, 8192); /* the request it answered */
	e->dirty = true;
	return e;
}

static void test_tag_names_its_entry_and_only_ring_tags_are_owned(void **state)
{
	struct td_fuse_uring *u = *state;
	struct td_ring_ent *e = &u->queues[0].ents[3];
	uint64_t tag = td_ring_ent_tag(e);

	assert_true(td_fuse_uring_owns(tag));
	assert_ptr_equal(td_ring_tag_ent(u, tag), e);
	/* The kernel's own uniques, and those it marks as resent (bit 63), are not ours. */
	assert_false(td_fuse_uring_owns(2));
	assert_false(td_fuse_uring_owns(123456));
	assert_false(td_fuse_uring_owns((1ULL << 63) | 2));
	assert_false(td_fuse_uring_owns((1ULL << 63) | tag));
	assert_null(td_ring_tag_ent(u, (1ULL << 63) | tag));
	/* An entry past the end names nothing. */
	assert_null(td_ring_tag_ent(u, tag + 1));
}

static void test_trim_gives_back_the_pages_of_an_empty_armed_entry(void **state)
{
	struct td_fuse_uring *u = *state;
	struct td_ring_ent *e = armed_ent(u, 0, 42);

	SKIP_WITHOUT_DONTUNMAP();
	memset(e->payload, 0xa5, PAYLOAD); /* a 1 MiB request passed through it */
	assert_true(resident_pages(e->payload, PAYLOAD) >= PAYLOAD / 4096);
	kernel.when = FILL_NEVER;
	assert_false(td_ring_trim_idle(&u->queues[0].loop));
	assert_int_equal(kernel.calls, 1);
	assert_int_equal(resident_pages(e->payload, PAYLOAD), 0);
	assert_false(e->dirty);
	/* Its header is fresh: a request arriving now shows as a commit_id other than 0. */
	assert_int_equal(e->armed_id, 0);
	assert_int_equal(e->hdr->ring_ent_in_out.commit_id, 0);
}

static void check_request_survives(struct td_fuse_uring *u, enum fill_when when, uint64_t last)
{
	struct td_ring_ent *e = armed_ent(u, 1, last);

	kernel.when = when;
	kernel.ent = e;
	kernel.unique = last + 2;
	kernel.payload_len = 65536 + 100;
	td_ring_trim_idle(&u->queues[0].loop);
	assert_int_equal(kernel.calls, 1);
	assert_true(request_is_there(e, last + 2, 65536 + 100));
	assert_true(e->dirty);
	/* Trimmed again before its completion is reaped: still there. */
	kernel.when = FILL_NEVER;
	kernel.calls = 0;
	td_ring_trim_idle(&u->queues[0].loop);
	assert_int_equal(kernel.calls, 1);
	assert_true(request_is_there(e, last + 2, 65536 + 100));
}

static void test_trim_keeps_a_request_written_just_before_the_move(void **state)
{
	check_request_survives(*state, FILL_BEFORE_MOVE, 40);
}

static void test_trim_keeps_a_request_written_just_after_the_move(void **state)
{
	SKIP_WITHOUT_DONTUNMAP();
	check_request_survives(*state, FILL_AFTER_MOVE, 40);
}

/* A move the kernel refuses: every page stays, the request in it too; tried again later. */
static void test_trim_refused_keeps_pages_and_request(void **state)
{
	struct td_fuse_uring *u = *state;
	struct td_ring_ent *e = armed_ent(u, 1, 40);

	kernel.refuse = true;
	kernel.when = FILL_BEFORE_MOVE;
	kernel.ent = e;
	kernel.unique = 42;
	kernel.payload_len = 4096;
	assert_true(td_ring_trim_idle(&u->queues[0].loop));
	assert_int_equal(kernel.calls, 1);
	assert_true(request_is_there(e, 42, 4096));
	assert_true(e->dirty);
	assert_int_equal(atomic_load(&u->trims), 0);
}

static void test_trim_keeps_the_first_request_of_a_never_used_entry(void **state)
{
	check_request_survives(*state, FILL_BEFORE_MOVE, 0);
}

static void test_trim_leaves_entries_it_does_not_hold_armed(void **state)
{
	struct td_fuse_uring *u = *state;
	struct td_ring_ent *busy = armed_ent(u, 2, 10);
	struct td_ring_ent *other = armed_ent(u, 3, 12);
	struct td_ring_loop helper = { 0 };

	busy->state = TD_ENT_PROCESSING;	   /* its request is being handled */
	td_ring_set_owner(other, &helper); /* another loop's: its task work is not ours */
	memset(busy->payload, 1, 4096);
	memset(other->payload, 1, 4096);
	/* Processing: pages are left, and the loop is told to look again later. */
	assert_true(td_ring_trim_idle(&u->queues[0].loop));
	assert_int_equal(kernel.calls, 0);
	assert_int_equal(resident_pages(busy->payload, 4096), 1);
	assert_int_equal(resident_pages(other->payload, 4096), 1);
	assert_true(busy->dirty);
	assert_true(other->dirty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tag_names_its_entry_and_only_ring_tags_are_owned,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim_gives_back_the_pages_of_an_empty_armed_entry,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim_keeps_a_request_written_just_before_the_move,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim_keeps_a_request_written_just_after_the_move,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim_refused_keeps_pages_and_request, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_trim_keeps_the_first_request_of_a_never_used_entry,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_trim_leaves_entries_it_does_not_hold_armed, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
