/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * list.h - intrusive circular doubly linked lists.
 *
 * A struct td_list is embedded in the object it links; an empty list is a
 * head pointing at itself. The list owns nothing: whoever inserts an entry
 * keeps it alive until it is deleted. No locking: the caller protects each
 * list with the lock named where the list is declared.
 */
#ifndef TAGDISK_LIST_H
#define TAGDISK_LIST_H

#include <stdbool.h>
#include "common/compiler.h"

struct td_list {
	struct td_list *next;
	struct td_list *prev;
};

#define TD_LIST_INIT(name) { &(name), &(name) }

static inline void td_list_init(struct td_list *head)
{
	head->next = head;
	head->prev = head;
}

static inline bool td_list_empty(const struct td_list *head)
{
	return head->next == head;
}

static inline void td_list_insert_between(struct td_list *entry, struct td_list *prev,
					  struct td_list *next)
{
	next->prev = entry;
	entry->next = next;
	entry->prev = prev;
	prev->next = entry;
}

/* Insert @entry right after @head (at the front of the list). */
static inline void td_list_add(struct td_list *entry, struct td_list *head)
{
	td_list_insert_between(entry, head, head->next);
}

/* Insert @entry right before @head (at the back of the list). */
static inline void td_list_add_tail(struct td_list *entry, struct td_list *head)
{
	td_list_insert_between(entry, head->prev, head);
}

/* Unlink @entry and leave it pointing at itself, so td_list_empty() on it is true. */
static inline void td_list_del(struct td_list *entry)
{
	entry->next->prev = entry->prev;
	entry->prev->next = entry->next;
	td_list_init(entry);
}

static inline void td_list_move(struct td_list *entry, struct td_list *head)
{
	td_list_del(entry);
	td_list_add(entry, head);
}

static inline void td_list_move_tail(struct td_list *entry, struct td_list *head)
{
	td_list_del(entry);
	td_list_add_tail(entry, head);
}

/* Move every entry of @list to the front of @head, keeping their order; @list becomes empty. */
static inline void td_list_splice_init(struct td_list *list, struct td_list *head)
{
	if (td_list_empty(list))
		return;
	struct td_list *first = list->next;
	struct td_list *last = list->prev;
	struct td_list *at = head->next;

	first->prev = head;
	head->next = first;
	last->next = at;
	at->prev = last;
	td_list_init(list);
}

/* Move every entry of @list to the back of @head, keeping their order; @list becomes empty. */
static inline void td_list_splice_tail_init(struct td_list *list, struct td_list *head)
{
	if (td_list_empty(list))
		return;
	struct td_list *first = list->next;
	struct td_list *last = list->prev;
	struct td_list *at = head->prev;

	first->prev = at;
	at->next = first;
	last->next = head;
	head->prev = last;
	td_list_init(list);
}

#define td_list_entry(ptr, type, member) td_container_of(ptr, type, member)
#define td_list_first_entry(head, type, member) td_list_entry((head)->next, type, member)
#define td_list_last_entry(head, type, member) td_list_entry((head)->prev, type, member)

#define td_list_for_each(pos, head) for (pos = (head)->next; pos != (head); pos = pos->next)
#define td_list_for_each_safe(pos, n, head) \
	for (pos = (head)->next, n = pos->next; pos != (head); pos = n, n = pos->next)

#endif /* TAGDISK_LIST_H */
