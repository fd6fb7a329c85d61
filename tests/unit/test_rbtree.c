// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test_rbtree.c - unit tests for the intrusive red-black tree (src/rbtree.c).
 *
 * Items carry an integer key and their insertion rank; the tests walk down
 * with their own comparison, as users of the tree do, putting equal keys to
 * the right. Large runs use a fixed-seed generator so a failure replays
 * exactly. td_rb_verify() is itself checked on hand-broken trees first, so
 * the runs that lean on it cannot pass by a verifier that accepts anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "common/rbtree.h"

#define BIG_N 10000

struct item {
	int key;
	int rank; /* insertion order */
	bool linked;
	struct td_rb_node node;
};

static struct item *item_of(const struct td_rb_node *node)
{
	return node ? td_rb_entry(node, struct item, node) : NULL;
}

static void item_insert(struct td_rb_root *root, struct item *it)
{
	struct td_rb_node **link = &root->node;
	struct td_rb_node *parent = NULL;

	while (*link) {
		parent = *link;
		link = it->key < item_of(parent)->key ? &parent->left : &parent->right;
	}
	td_rb_insert(root, &it->node, parent, link);
	it->linked = true;
}

static void item_erase(struct td_rb_root *root, struct item *it)
{
	td_rb_erase(root, &it->node);
	it->linked = false;
}

/* xorshift64*: a small deterministic generator, the same on every libc. */
static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
	rng_state = seed ? seed : 1;
}

static uint32_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dULL) >> 32);
}

static void shuffle(int *v, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rng_next() % (uint32_t)(i + 1));
		int t = v[i];

		v[i] = v[j];
		v[j] = t;
	}
}

/* Return: the depth of the deepest node (0 for an empty tree). */
static int depth(const struct td_rb_node *n)
{
	if (!n)
		return 0;
	int l = depth(n->left);
	int r = depth(n->right);

	return 1 + (l > r ? l : r);
}

/*
 * Walk forwards and backwards and check both walks see exactly @want (keys in
 * order) and that first/last are its ends.
 */
static void assert_keys(const struct td_rb_root *root, const int *want, int n)
{
	struct td_rb_node *node;
	int i = 0;

	assert_int_equal(td_rb_verify(root), n);
	for (node = td_rb_first(root); node; node = td_rb_next(node)) {
		assert_true(i < n);
		assert_int_equal(item_of(node)->key, want[i]);
		i++;
	}
	assert_int_equal(i, n);
	for (node = td_rb_last(root); node; node = td_rb_prev(node)) {
		i--;
		assert_true(i >= 0);
		assert_int_equal(item_of(node)->key, want[i]);
	}
	assert_int_equal(i, 0);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a;
	int y = *(const int *)b;

	return (x > y) - (x < y);
}

/* ---- the verifier can fail ------------------------------------------------------------- */

/* Three nodes linked by hand: @b at the root with @a left and @c right. */
static void link3(struct td_rb_root *root, struct item *a, struct item *b, struct item *c)
{
	*a = (struct item){ .key = 1 };
	*b = (struct item){ .key = 2 };
	*c = (struct item){ .key = 3 };
	root->node = &b->node;
	b->node = (struct td_rb_node){ NULL, &a->node, &c->node, false };
	a->node = (struct td_rb_node){ &b->node, NULL, NULL, true };
	c->node = (struct td_rb_node){ &b->node, NULL, NULL, true };
}

static void test_rb_verify_rejects_each_broken_invariant(void **state)
{
	struct td_rb_root root = TD_RB_ROOT_INIT;
	struct item a;
	struct item b;
	struct item c;

	(void)state;
	link3(&root, &a, &b, &c);
	assert_int_equal(td_rb_verify(&root), 3);

	b.node.red = true; /* red root */
	assert_int_equal(td_rb_verify(&root), -1);

	link3(&root, &a, &b, &c);
	a.node.red = false; /* black heights 2 and 1 */
	assert_int_equal(td_rb_verify(&root), -1);

	link3(&root, &a, &b, &c);
	c.node.parent = &a.node; /* wrong parent pointer */
	assert_int_equal(td_rb_verify(&root), -1);

	link3(&root, &a, &b, &c);
	b.node.right = NULL; /* a red child of a red node */
	a.node.left = &c.node;
	c.node.parent = &a.node;
	assert_int_equal(td_rb_verify(&root), -1);

	link3(&root, &a, &b, &c);
	b.node.parent = &a.node; /* the root must have no parent */
	assert_int_equal(td_rb_verify(&root), -1);
}

/* ---- small trees ----------------------------------------------------------------------- */

static void test_rb_empty_tree_has_no_nodes(void **state)
{
	struct td_rb_root root = TD_RB_ROOT_INIT;

	(void)state;
	assert_true(td_rb_empty(&root));
	assert_null(td_rb_first(&root));
	assert_null(td_rb_last(&root));
	assert_int_equal(td_rb_verify(&root), 0);
}

static void test_rb_single_node_is_first_last_and_black(void **state)
{
	struct td_rb_root root = TD_RB_ROOT_INIT;
	struct item it = { .key = 5 };

	(void)state;
	item_insert(&root, &it);
	assert_false(td_rb_empty(&root));
	assert_ptr_equal(root.node, &it.node);
	assert_false(it.node.red);
	assert_null(it.node.parent);
	assert_ptr_equal(td_rb_first(&root), &it.node);
	assert_ptr_equal(td_rb_last(&root), &it.node);
	assert_null(td_rb_next(&it.node));
	assert_null(td_rb_prev(&it.node));
	assert_int_equal(td_rb_verify(&root), 1);

	item_erase(&root, &it);
	assert_true(td_rb_empty(&root));
	assert_null(td_rb_first(&root));
	assert_null(td_rb_last(&root));
	assert_int_equal(td_rb_verify(&root), 0);
}

static void test_rb_three_nodes_neighbours_in_key_order(void **state)
{
	struct td_rb_root root = TD_RB_ROOT_INIT;
	struct item it[3] = { { .key = 30 }, { .key = 10 }, { .key = 20 } };

	(void)state;
	for (int i = 0; i < 3; i++)
		item_insert(&root, &it[i]);
	assert_int_equal(td_rb_verify(&root), 3);
	/* 30, 10, 20 needs a double rotation: 20 ends at the root. */
	assert_ptr_equal(root.node, &it[2].node);

	assert_ptr_equal(td_rb_first(&root), &it[1].node);
	assert_ptr_equal(td_rb_last(&root), &it[0].node);
	assert_ptr_equal(td_rb_next(&it[1].node), &it[2].node);
	assert_ptr_equal(td_rb_next(&it[2].node), &it[0].node);
	assert_null(td_rb_next(&it[0].node));
	assert_ptr_equal(td_rb_prev(&it[0].node), &it[2].node);
	assert_ptr_equal(td_rb_prev(&it[2].node), &it[1].node);
	assert_null(td_rb_prev(&it[1].node));

	/* Erase the root, which has two children. */
	item_erase(&root, &it[2]);
	assert_int_equal(td_rb_verify(&root), 2);
	assert_ptr_equal(td_rb_first(&root), &it[1].node);
	assert_ptr_equal(td_rb_next(&it[1].node), &it[0].node);
	assert_null(td_rb_next(&it[0].node));
	assert_ptr_equal(td_rb_last(&root), &it[0].node);
	assert_ptr_equal(td_rb_prev(&it[0].node), &it[1].node);
}

/* ---- large runs ------------------------------------------------------------------------ */

static void run_insert_erase(const int *ins, const int *del, int n)
{
	struct item *items = calloc((size_t)n, sizeof(*items));
	int *sorted = calloc((size_t)n, sizeof(*sorted));
	struct td_rb_root root = TD_RB_ROOT_INIT;
	int max_depth = 0;

	assert_non_null(items);
	assert_non_null(sorted);
	/* Node for key k is items[k]; keys are 0..n-1. */
	for (int i = 0; i < n; i++) {
		struct item *it = &items[ins[i]];

		it->key = ins[i];
		it->rank = i;
		item_insert(&root, it);
		assert_int_equal(td_rb_verify(&root), i + 1);
	}
	for (int i = 0; i < n; i++)
		sorted[i] = i;
	assert_keys(&root, sorted, n);

	/* A red-black tree of n nodes is at most 2 log2(n + 1) deep: 2^depth <= (n + 1)^2. */
	max_depth = depth(root.node);
	assert_true(max_depth < 63);
	assert_true((1ULL << max_depth) <= (uint64_t)(n + 1) * (uint64_t)(n + 1));

	for (int i = 0; i < n; i++) {
		item_erase(&root, &items[del[i]]);
		assert_int_equal(td_rb_verify(&root), n - i - 1);
		if (i % 1000 == 999 || i == n / 2) {
			int left = 0;

			for (int k = 0; k < n; k++)
				if (items[k].linked)
					sorted[left++] = k;
			assert_int_equal(left, n - i - 1);
			assert_keys(&root, sorted, left);
		}
	}
	assert_true(td_rb_empty(&root));
	free(sorted);
	free(items);
}

static void test_rb_random_insert_and_erase_keep_invariants(void **state)
{
	int *ins = calloc(BIG_N, sizeof(*ins));
	int *del = calloc(BIG_N, sizeof(*del));

	(void)state;
	assert_non_null(ins);
	assert_non_null(del);
	for (int i = 0; i < BIG_N; i++) {
		ins[i] = i;
		del[i] = i;
	}
	rng_seed(0x7461676469736bULL);
	shuffle(ins, BIG_N);
	shuffle(del, BIG_N);
	run_insert_erase(ins, del, BIG_N);
	free(del);
	free(ins);
}

static void test_rb_ascending_and_descending_runs_keep_invariants(void **state)
{
	enum { N = 2000 };
	static int up[N];
	static int down[N];

	(void)state;
	for (int i = 0; i < N; i++) {
		up[i] = i;
		down[i] = N - 1 - i;
	}
	run_insert_erase(up, up, N);
	run_insert_erase(up, down, N);
	run_insert_erase(down, up, N);
	run_insert_erase(down, down, N);
}

static void test_rb_duplicates_keep_insertion_order(void **state)
{
	enum { N = 3000, KEYS = 7 };
	static struct item items[N];
	struct td_rb_root root = TD_RB_ROOT_INIT;
	int last_key;
	int last_rank;
	int seen;

	(void)state;
	rng_seed(42);
	for (int i = 0; i < N; i++) {
		items[i] = (struct item){ .key = (int)(rng_next() % KEYS), .rank = i };
		item_insert(&root, &items[i]);
	}
	assert_int_equal(td_rb_verify(&root), N);

	/* Erase a random third; survivors must still be in (key, rank) order. */
	for (int i = 0; i < N; i++)
		if (rng_next() % 3 == 0)
			item_erase(&root, &items[i]);

	for (int pass = 0; pass < 2; pass++) {
		last_key = -1;
		last_rank = -1;
		seen = 0;
		for (struct td_rb_node *n = td_rb_first(&root); n; n = td_rb_next(n)) {
			const struct item *it = item_of(n);

			assert_true(it->linked);
			assert_true(it->key > last_key ||
				    (it->key == last_key && it->rank > last_rank));
			last_key = it->key;
			last_rank = it->rank;
			seen++;
		}
		int linked = 0;

		for (int i = 0; i < N; i++)
			linked += items[i].linked;
		assert_int_equal(seen, linked);
		assert_int_equal(td_rb_verify(&root), linked);

		/* Second pass: insert more equals and look again. */
		for (int i = 0; i < N; i++) {
			if (!items[i].linked) {
				items[i].rank = N + i;
				item_insert(&root, &items[i]);
			}
		}
	}
	for (int i = 0; i < N; i++)
		item_erase(&root, &items[i]);
	assert_true(td_rb_empty(&root));
}

static void test_rb_keys_sort_like_qsort(void **state)
{
	enum { N = 1000 };
	static struct item items[N];
	static int keys[N];
	struct td_rb_root root = TD_RB_ROOT_INIT;

	(void)state;
	rng_seed(7);
	for (int i = 0; i < N; i++) {
		/* Negative and repeated keys too. */
		keys[i] = (int)(rng_next() % 200) - 100;
		items[i] = (struct item){ .key = keys[i], .rank = i };
		item_insert(&root, &items[i]);
	}
	qsort(keys, N, sizeof(keys[0]), cmp_int);
	assert_keys(&root, keys, N);
	for (int i = 0; i < N; i++)
		item_erase(&root, &items[i]);
	assert_int_equal(td_rb_verify(&root), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rb_verify_rejects_each_broken_invariant),
		cmocka_unit_test(test_rb_empty_tree_has_no_nodes),
		cmocka_unit_test(test_rb_single_node_is_first_last_and_black),
		cmocka_unit_test(test_rb_three_nodes_neighbours_in_key_order),
		cmocka_unit_test(test_rb_random_insert_and_erase_keep_invariants),
		cmocka_unit_test(test_rb_ascending_and_descending_runs_keep_invariants),
		cmocka_unit_test(test_rb_duplicates_keep_insertion_order),
		cmocka_unit_test(test_rb_keys_sort_like_qsort),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
