/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rbtree.h - intrusive red-black trees.
 *
 * A struct td_rb_node is embedded in the object it sorts; the tree never
 * allocates and never compares. The caller walks down from the root with its
 * own comparison, then links the new node where the walk ended and calls
 * td_rb_insert_fixup(). Equal keys are allowed: insert them to the right of
 * their equals to keep insertion order among them. Every operation is
 * O(log n). No locking: the caller protects each tree with the lock named
 * where it is declared.
 */
#ifndef TAGDISK_RBTREE_H
#define TAGDISK_RBTREE_H

#include <stdbool.h>
#include <stddef.h>
#include "common/compiler.h"

struct td_rb_node {
	struct td_rb_node *parent;
	struct td_rb_node *left;
	struct td_rb_node *right;
	bool red;
};

struct td_rb_root {
	struct td_rb_node *node;
};

#define TD_RB_ROOT_INIT { NULL }

#define td_rb_entry(ptr, type, member) td_container_of(ptr, type, member)

static inline bool td_rb_empty(const struct td_rb_root *root)
{
	return root->node == NULL;
}

/*
 * Link @node as a child of @parent at *@link (the NULL child pointer where the
 * caller's walk ended; &root->node with @parent NULL for an empty tree), then
 * rebalance. @node must not be in any tree.
 */
void td_rb_insert(struct td_rb_root *root, struct td_rb_node *node, struct td_rb_node *parent,
		  struct td_rb_node **link) td_nonnull(1, 2, 4);

/* Remove @node, which must be in @root. The node's fields are garbage afterwards. */
void td_rb_erase(struct td_rb_root *root, struct td_rb_node *node) td_nonnull(1, 2);

/* In-order neighbours. Return: the node, or NULL at either end or for an empty tree. */
struct td_rb_node *td_rb_first(const struct td_rb_root *root) td_nonnull(1);
struct td_rb_node *td_rb_last(const struct td_rb_root *root) td_nonnull(1);
struct td_rb_node *td_rb_next(const struct td_rb_node *node) td_nonnull(1);
struct td_rb_node *td_rb_prev(const struct td_rb_node *node) td_nonnull(1);

/*
 * Check the red-black invariants (root black, no red node with a red child,
 * equal black height, consistent parent pointers). For tests.
 * Return: the number of nodes, or -1 when an invariant is broken.
 */
long td_rb_verify(const struct td_rb_root *root) td_nonnull(1);

#endif /* TAGDISK_RBTREE_H */
