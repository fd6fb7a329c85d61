/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tag.h - tag maps for tagged command queueing.
 *
 * A tag map hands out small integers (tags) in [0, depth), each naming one
 * command outstanding at the drive, and remembers which request holds each
 * tag. One map may be shared by several queues (as several devices behind
 * one host adapter share its tags): each queue attaches to the map, which
 * is reference counted and freed with its last user.
 *
 * Lifetime: the reference count is the number of attached users. A new map
 * has none; its creator either attaches it (td_tag_map_attach(), usually
 * through each queue that uses it) and from then on borrows it, or, if it
 * never attaches it, frees it with td_tag_map_destroy(). The detach that
 * removes the last user frees the map. A creator that must keep the map
 * alive while queues come and go attaches itself (with a NULL kick).
 *
 * Allocation is spread like the kernel's sbitmap: the bitmap is split into
 * words, each on its own cache line, and each thread starts searching at the
 * word where it last succeeded, so threads rarely touch the same line.
 * Starting and ending tags are lock-free (atomic bit operations); the map
 * is safe to use from any number of threads.
 *
 * Ordering: td_tag_end() must be called before the request's completion runs
 * (the tag must be free when the submitter learns the command is done).
 * Invalidating every tag of a queue after a reset is the queue's job
 * (td_queue_invalidate_tags() in tagdisk/queue.h), built on td_tag_end().
 *
 * Resizing never reallocates: a map is created with room for
 * TD_TAG_DEPTH_MAX tags and the depth limits which ones may be started.
 * Shrinking leaves tags above the new depth in use until they end.
 *
 * LOCKING: the bitmap, the tag-to-request table, the depth and the starved
 * flag are lock-free atomics. The user list is guarded by the map's user
 * lock, which attach, detach and kick take (last in the lock order of
 * tagdisk/queue.h). td_tag_map_kick() calls the kick functions without it.
 */
#ifndef TAGDISK_TAG_H
#define TAGDISK_TAG_H

#include <limits.h>
#include <stdbool.h>
#include "common/compiler.h"

#define TD_TAG_DEPTH_MAX 4096

struct td_tag_map;

/*
 * Called when a tag frees after td_tag_start() had failed for this user.
 * Runs with no map lock held and must tolerate spurious calls (every user is
 * kicked, starved or not); it may take the queue lock, but must not detach a
 * user of the same map. Never called for @user once td_tag_map_detach() returned.
 */
typedef void (*td_tag_kick_fn)(void *user);

/* Return: a new map of @depth tags (1..TD_TAG_DEPTH_MAX) with no users, or NULL (errno set). */
struct td_tag_map *td_tag_map_create(unsigned int depth) td_warn_unused;
/*
 * Like td_tag_map_create(), with the bitmap spread over more cache lines for
 * many concurrent users (an mq tag set): fewer tags per word, chosen from
 * @depth as Linux's sbitmap does (see tag.c). Tags are still [0, depth).
 */
struct td_tag_map *td_tag_map_create_spread(unsigned int depth) td_warn_unused;
/* Free a map that has no users (one never attached); a map with users is freed by detach. */
void td_tag_map_destroy(struct td_tag_map *map) td_nonnull(1);

/*
 * Attach @user to @map, taking a reference. @kick (may be NULL) is called by
 * td_tag_map_kick() when a tag frees after a failed start. Return: 0 or -ENOMEM.
 */
int td_tag_map_attach(struct td_tag_map *map, td_tag_kick_fn kick, void *user) td_nonnull(1);
/*
 * Detach @user (which must be attached) and drop its reference; the map is
 * freed with its last user. Waits for a kick already calling @user's function
 * to return, so call it with no queue lock held.
 */
void td_tag_map_detach(struct td_tag_map *map, void *user) td_nonnull(1);
/* Return: the number of users attached. */
unsigned int td_tag_map_users(const struct td_tag_map *map) td_nonnull(1);

/*
 * Allocate a free tag below the current depth and associate @rq with it.
 * Return: the tag (>= 0), or -EBUSY when every tag is in use; the map then
 * remembers that a user starved, for td_tag_end().
 */
int td_tag_start(struct td_tag_map *map, void *rq) td_nonnull(1, 2);

/* A cursor for td_tag_start_at() that is not yet anywhere: the scan begins at the CPU's home. */
#define TD_TAG_CURSOR_HOME UINT_MAX

/*
 * td_tag_start(), with the scan beginning at word *@cursor instead of this
 * CPU's home, and *@cursor left at the word the tag came from. A caller
 * that starts many tags in one go keeps one cursor for all of them (from
 * TD_TAG_CURSOR_HOME), so no start rescans the words the ones before it
 * filled; starting each go from the home again keeps a busy user from
 * creeping into other CPUs' words. The cursor only says where to look
 * first: every word is still scanned before the map reports -EBUSY.
 */
int td_tag_start_at(struct td_tag_map *map, void *rq, unsigned int *cursor) td_nonnull(1, 2, 3);

/*
 * Free @tag (which must be in use).
 * Return: true when a start failed since an end last returned true: the
 * caller should call td_tag_map_kick() once it holds no lock.
 */
bool td_tag_end(struct td_tag_map *map, int tag) td_nonnull(1);

/* Call every attached user's kick function. Call with no queue lock held. */
void td_tag_map_kick(struct td_tag_map *map) td_nonnull(1);

/* Return: the request holding @tag, or NULL when @tag is free or out of range. */
void *td_tag_find(const struct td_tag_map *map, int tag) td_nonnull(1);

/* Change the depth to @depth (1..TD_TAG_DEPTH_MAX). Return: 0 or -EINVAL. */
int td_tag_resize(struct td_tag_map *map, unsigned int depth) td_nonnull(1);

/* Return: the current depth. */
unsigned int td_tag_depth(const struct td_tag_map *map) td_nonnull(1);

/* Return: the number of tags in use (a snapshot; exact when nothing runs concurrently). */
unsigned int td_tag_busy(const struct td_tag_map *map) td_nonnull(1);

#endif /* TAGDISK_TAG_H */
