/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * compiler.h - attributes and small helpers shared by every tagdisk module.
 *
 * Nothing here has state; every other header may include it.
 */
#ifndef TAGDISK_COMPILER_H
#define TAGDISK_COMPILER_H

#include <stddef.h>

#define td_likely(x)	__builtin_expect(!!(x), 1)
#define td_unlikely(x)	__builtin_expect(!!(x), 0)
#define td_nonnull(...) __attribute__((nonnull(__VA_ARGS__)))
#define td_printf(fmt, args) __attribute__((format(printf, fmt, args)))
#define td_unused	__attribute__((unused))
#define td_warn_unused	__attribute__((warn_unused_result))
#define td_noreturn	__attribute__((noreturn))

/* Size of a cache line; hot per-thread data is aligned to it. */
#define TD_CACHELINE 64
#define td_cacheline_aligned __attribute__((aligned(TD_CACHELINE)))

#define TD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TD_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TD_DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

/* container_of: from a pointer to a member back to its enclosing struct. */
#define td_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif /* TAGDISK_COMPILER_H */
