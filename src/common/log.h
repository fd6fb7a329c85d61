/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.h - one line per event on stderr, with a level.
 *
 * Levels are syslog's. When stderr is connected to the journal
 * ($JOURNAL_STREAM matches it), each line starts with "<N>" so journald
 * records the level; otherwise lines read "tagdiskd: warning: ...".
 * Messages put the subject first and quote values. Logging preserves errno.
 * Thread safe: each line is written with a single write(2).
 */
#ifndef TAGDISK_LOG_H
#define TAGDISK_LOG_H

#include <stdbool.h>
#include "common/compiler.h"

enum td_log_level {
	TD_LOG_ERR = 3,
	TD_LOG_WARNING = 4,
	TD_LOG_NOTICE = 5,
	TD_LOG_INFO = 6,
	TD_LOG_DEBUG = 7,
};

/* Set the program name and the most verbose level printed (default TD_LOG_INFO). */
void td_log_init(const char *ident, enum td_log_level max_level);
void td_log_set_level(enum td_log_level max_level);

/* Return: true when messages at @level are printed (check before costly formatting). */
bool td_log_enabled(enum td_log_level level);

void td_log(enum td_log_level level, const char *fmt, ...) td_printf(2, 3);
/* Like td_log() with ": <strerror(errno)>" appended. */
void td_log_errno(enum td_log_level level, const char *fmt, ...) td_printf(2, 3);

#define td_err(...)	   td_log(TD_LOG_ERR, __VA_ARGS__)
#define td_err_errno(...)  td_log_errno(TD_LOG_ERR, __VA_ARGS__)
#define td_warnx(...)	   td_log(TD_LOG_WARNING, __VA_ARGS__)
#define td_warn(...)	   td_log_errno(TD_LOG_WARNING, __VA_ARGS__)
#define td_notice(...)	   td_log(TD_LOG_NOTICE, __VA_ARGS__)
#define td_info(...)	   td_log(TD_LOG_INFO, __VA_ARGS__)
#define td_debug(...)                                 \
	do {                                          \
		if (td_log_enabled(TD_LOG_DEBUG))     \
			td_log(TD_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif /* TAGDISK_LOG_H */
