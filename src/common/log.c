// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * log.c - leveled logging to stderr, journald-aware.
 *
 * journald sets $JOURNAL_STREAM to "DEVICE:INODE" of the stream it gave us
 * as stderr; when that matches, lines carry a "<N>" priority prefix that
 * journald strips and records as the level.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/log.h"

static const char *log_ident = "tagdisk";
static _Atomic int log_max_level = TD_LOG_INFO;
static bool log_journal;

static const char *const level_names[] = {
	[TD_LOG_ERR] = "error",	  [TD_LOG_WARNING] = "warning", [TD_LOG_NOTICE] = "notice",
	[TD_LOG_INFO] = "info",	  [TD_LOG_DEBUG] = "debug",
};

static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino;
}

void td_log_init(const char *ident, enum td_log_level max_level)
{
	log_ident = ident;
	atomic_store(&log_max_level, max_level);
	log_journal = stderr_is_journal();
}

void td_log_set_level(enum td_log_level max_level)
{
	atomic_store(&log_max_level, max_level);
}

bool td_log_enabled(enum td_log_level level)
{
	return (int)level <= atomic_load_explicit(&log_max_level, memory_order_relaxed);
}

static void log_line(enum td_log_level level, const char *fmt, va_list ap, int errnum)
	td_printf(2, 0);

static void log_line(enum td_log_level level, const char *fmt, va_list ap, int errnum)
{
	char line[1024];
	size_t n;

	if (log_journal)
		n = (size_t)snprintf(line, sizeof(line), "<%d>", (int)level);
	else
		n = (size_t)snprintf(line, sizeof(line), "%s: %s: ", log_ident, level_names[level]);
	if (n < sizeof(line)) {
		int r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);

		n = r < 0 ? n : TD_MIN(n + (size_t)r, sizeof(line) - 1);
	}
	if (errnum && n < sizeof(line) - 1) {
		int r = snprintf(line + n, sizeof(line) - n, ": %s", strerror(errnum));

		n = r < 0 ? n : TD_MIN(n + (size_t)r, sizeof(line) - 1);
	}
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, n);
	(void)w;
}

void td_log(enum td_log_level level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (!td_log_enabled(level))
		return;
	va_start(ap, fmt);
	log_line(level, fmt, ap, 0);
	va_end(ap);
	errno = saved;
}

void td_log_errno(enum td_log_level level, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	if (!td_log_enabled(level))
		return;
	va_start(ap, fmt);
	log_line(level, fmt, ap, saved);
	va_end(ap);
	errno = saved;
}
