// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rbtree.c - red-black tree rebalancing.
 *
 * The classic formulation with explicit parent pointers and NULL leaves
 * (NULL counts as black). Insertion recolours up the tree and rotates at most
 * twice; erase splices out the node (or its in-order successor, which then
 * takes the node's place) and repairs a missing black on the way up.
 */
#include "common/rbtree.h"

static void rotate_left(struct td_rb_root *root, struct td_rb_node *x)
{
	struct td_rb_node *y = x->right;

	x->right = y->left;
	if (y->left)
		y->left->parent = x;
	y->parent = x->parent;
	if (!x->parent)
		root->node = y;
	else if (x == x->parent->left)
		x->parent->left = y;
	else
		x->parent->right = y;
	y->left = x;
	x->parent = y;
}

static void rotate_right(struct td_rb_root *root, struct td_rb_node *x)
{
	struct td_rb_node *y = x->left;

	x->left = y->right;
	if (y->right)
		y->right->parent = x;
	y->parent = x->parent;
	if (!x->parent)
		root->node = y;
	else if (x == x->parent->right)
		x->parent->right = y;
	else
		x->parent->left = y;
	y->right = x;
	x->parent = y;
}

static bool is_red(const struct td_rb_node *n)
{
	return n && n->red;
}

void td_rb_insert(struct td_rb_root *root, struct td_rb_node *node, struct td_rb_node *parent,
		  struct td_rb_node **link)
{
	node->parent = parent;
	node->left = NULL;
	node->right = NULL;
	node->red = true;
	*link = node;

	struct td_rb_node *z = node;

	while (is_red(z->parent)) {
		struct td_rb_node *p = z->parent;
		struct td_rb_node *g = p->parent; /* exists: a red node is never the root */

		if (p == g->left) {
			struct td_rb_node *u = g->right;

			if (is_red(u)) {
				p->red = false;
				u->red = false;
				g->red = true;
				z = g;
				continue;
			}
			if (z == p->right) {
				z = p;
				rotate_left(root, z);
				p = z->parent;
			}
			p->red = false;
			g->red = true;
			rotate_right(root, g);
		} else {
			struct td_rb_node *u = g->left;

			if (is_red(u)) {
				p->red = false;
				u->red = false;
				g->red = true;
				z = g;
				continue;
			}
			if (z == p->left) {
				z = p;
				rotate_right(root, z);
				p = z->parent;
			}
			p->red = false;
			g->red = true;
			rotate_left(root, g);
		}
	}
	root->node->red = false;
}

/* Put @v where @u was, as far as @u's parent is concerned. */
static void transplant(struct td_rb_root *root, struct td_rb_node *u, struct td_rb_node *v)
{
	if (!u->parent)
		root->node = v;
	else if (u == u->parent->left)
		u->parent->left = v;
	else
		u->parent->right = v;
	if (v)
		v->parent = u->parent;
}

static void erase_fixup(struct td_rb_root *root, struct td_rb_node *x, struct td_rb_node *parent)
{
	while (x != root->node && !is_red(x)) {
		if (x == parent->left) {
			struct td_rb_node *w = parent->right;

			if (is_red(w)) {
				w->red = false;
				parent->red = true;
				rotate_left(root, parent);
				w = parent->right;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				w->red = true;
				x = parent;
				parent = x->parent;
				continue;
			}
			if (!is_red(w->right)) {
				w->left->red = false;
				w->red = true;
				rotate_right(root, w);
				w = parent->right;
			}
			w->red = parent->red;
			parent->red = false;
			w->right->red = false;
			rotate_left(root, parent);
			x = root->node;
			break;
		} else {
			struct td_rb_node *w = parent->left;

			if (is_red(w)) {
				w->red = false;
				parent->red = true;
				rotate_right(root, parent);
				w = parent->left;
			}
			if (!is_red(w->left) && !is_red(w->right)) {
				w->red = true;
				x = parent;
				parent = x->parent;
				continue;
			}
			if (!is_red(w->left)) {
				w->right->red = false;
				w->red = true;
				rotate_left(root, w);
				w = parent->left;
			}
			w->red = parent->red;
			parent->red = false;
			w->left->red = false;
			rotate_right(root, parent);
			x = root->node;
			break;
		}
	}
	if (x)
		x->red = false;
}

void td_rb_erase(struct td_rb_root *root, struct td_rb_node *z)
{
	struct td_rb_node *x;
	struct td_rb_node *x_parent;
	bool removed_red;

	if (!z->left) {
		x = z->right;
		x_parent = z->parent;
		removed_red = z->red;
		transplant(root, z, z->right);
	} else if (!z->right) {
		x = z->left;
		x_parent = z->parent;
		removed_red = z->red;
		transplant(root, z, z->left);
	} else {
		struct td_rb_node *y = z->right;

		while (y->left)
			y = y->left;
		removed_red = y->red;
		x = y->right;
		if (y->parent == z) {
			x_parent = y;
		} else {
			x_parent = y->parent;
			transplant(root, y, y->right);
			y->right = z->right;
			y->right->parent = y;
		}
		transplant(root, z, y);
		y->left = z->left;
		y->left->parent = y;
		y->red = z->red;
	}
	if (!removed_red)
		erase_fixup(root, x, x_parent);
}

struct td_rb_node *td_rb_first(const struct td_rb_root *root)
{
	struct td_rb_node *n = root->node;

	if (!n)
		return NULL;
	while (n->left)
		n = n->left;
	return n;
}

struct td_rb_node *td_rb_last(const struct td_rb_root *root)
{
	struct td_rb_node *n = root->node;

	if (!n)
		return NULL;
	while (n->right)
		n = n->right;
	return n;
}

struct td_rb_node *td_rb_next(const struct td_rb_node *node)
{
	if (node->right) {
		node = node->right;
		while (node->left)
			node = node->left;
		return (struct td_rb_node *)node;
	}
	while (node->parent && node == node->parent->right)
		node = node->parent;
	return node->parent;
}

struct td_rb_node *td_rb_prev(const struct td_rb_node *node)
{
	if (node->left) {
		node = node->left;
		while (node->right)
			node = node->right;
		return (struct td_rb_node *)node;
	}
	while (node->parent && node == node->parent->left)
		node = node->parent;
	return node->parent;
}

/* Return: black height of the subtree at @n, or -1 when broken; counts nodes into *@count. */
static int verify_subtree(const struct td_rb_node *n, const struct td_rb_node *parent, long *count)
{
	if (!n)
		return 1;
	if (n->parent != parent)
		return -1;
	if (n->red && (is_red(n->left) || is_red(n->right)))
		return -1;
	int lh = verify_subtree(n->left, n, count);
	int rh = verify_subtree(n->right, n, count);

	if (lh < 0 || rh < 0 || lh != rh)
		return -1;
	(*count)++;
	return lh + (n->red ? 0 : 1);
}

long td_rb_verify(const struct td_rb_root *root)
{
	long count = 0;

	if (root->node && root->node->red)
		return -1;
	if (verify_subtree(root->node, NULL, &count) < 0)
		return -1;
	return count;
}
