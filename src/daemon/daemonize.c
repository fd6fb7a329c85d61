// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * daemonize.c - going to the background; log lines to syslog (see daemon.h).
 *
 * The child closes every descriptor it inherited beyond stdin, stdout and
 * stderr (at this point the process has opened none it keeps but the report
 * pipe). The report pipe carries one byte from the child to the waiting parent:
 * REPORT_READY or REPORT_FAILED. End of file without a byte means the child
 * died. The log pipe's write end becomes the child's stderr once it serves;
 * the td-syslog thread reads whole lines from it and hands each to syslog(3)
 * at the level written in it ("tagdiskd: warning: ..." or, under journald,
 * "<4>...").
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>
#include "common/lock.h"
#include "common/log.h"
#include "daemon/daemon.h"

#define REPORT_READY  'R'
#define REPORT_FAILED 'F'
#define REPORT_UNSERVABLE 'U' /* a configuration this machine cannot serve: exit 2 */
#define LOG_LINE_MAX  4096

static struct {
	int report_fd; /* child: write end of the report pipe, until it reports; else -1 */
	int log_fd;    /* read end of the log pipe, for the td-syslog thread; else -1 */
	pthread_t log_thread;
	bool log_started;
} dz = { .report_fd = -1, .log_fd = -1 };

/* The parent: wait for the child's report, then exit as daemon.h says. */
static void __attribute__((noreturn)) parent_wait(int fd, pid_t child)
{
	char c = 0;
	ssize_t n;
	int status = 0;

	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && c == REPORT_READY)
		_exit(0);
	/* It failed and is cleaning up (unmounting, removing what it created): wait for that. */
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (n != 1) {
		if (WIFSIGNALED(status))
			fprintf(stderr, "tagdiskd: the daemon process was killed by signal %d (%s) "
					"before it served\n",
				WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			fprintf(stderr, "tagdiskd: the daemon process exited with status %d before "
					"it served\n",
				WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	_exit(n == 1 && c == REPORT_UNSERVABLE ? 2 : 1);
}

static int redirect_to_null(int target)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int ret = 0;

	if (null < 0)
		return -errno;
	if (dup2(null, target) < 0)
		ret = -errno;
	close(null);
	return ret;
}

int td_daemonize(char *err, size_t errlen)
{
	int fds[2];
	pid_t pid;
	int ret;

	/* A closed stdin, stdout or stderr would be taken by the pipe: fill them first. */
	do
		ret = open("/dev/null", O_RDWR);
	while (ret >= 0 && ret <= STDERR_FILENO);
	if (ret >= 0)
		close(ret);
	if (pipe2(fds, O_CLOEXEC) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot go to the background: pipe: %s", strerror(errno));
		return ret;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot go to the background: fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return ret;
	}
	if (pid > 0) {
		close(fds[1]);
		parent_wait(fds[0], pid);
	}
	close(fds[0]);
	dz.report_fd = fds[1];
	/* Nothing the caller left open is ours (a test harness waits for its pipes to close). */
	if (dz.report_fd > 3)
		close_range(3, (unsigned int)dz.report_fd - 1, 0);
	close_range((unsigned int)dz.report_fd + 1, ~0U, 0);
	/* A fork's child leads no process group, so setsid() cannot fail. */
	setsid();
	/* Hold no directory busy: nothing can be unmounted under a daemon's current directory. */
	ret = chdir("/") < 0 ? -errno : redirect_to_null(STDIN_FILENO);
	if (ret)
		snprintf(err, errlen, "cannot go to the background: %s", strerror(-ret));
	return ret;
}

static void report(char what)
{
	ssize_t n;

	if (dz.report_fd < 0)
		return;
	do
		n = write(dz.report_fd, &what, 1);
	while (n < 0 && errno == EINTR);
	/* A parent that is gone (killed while waiting) needs no report. */
	close(dz.report_fd);
	dz.report_fd = -1;
}

/* One line as log.c wrote it: find its level, drop the prefix, pass it on. */
static void forward_line(char *line)
{
	static const struct {
		const char *name;
		int priority;
	} levels[] = {
		{ "error: ", LOG_ERR },	  { "warning: ", LOG_WARNING }, { "notice: ", LOG_NOTICE },
		{ "info: ", LOG_INFO },	  { "debug: ", LOG_DEBUG },
	};
	int priority = LOG_NOTICE;
	char *msg = line;
	char *colon;

	if (line[0] == '<' && line[1] >= '0' && line[1] <= '7' && line[2] == '>') {
		priority = line[1] - '0';
		msg = line + 3;
	} else if ((colon = strstr(line, ": "))) {
		for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
			size_t len = strlen(levels[i].name);

			if (strncmp(colon + 2, levels[i].name, len) == 0) {
				priority = levels[i].priority;
				msg = colon + 2 + len;
				break;
			}
		}
	}
	if (*msg)
		syslog(LOG_DAEMON | priority, "%s", msg);
}

static void *syslog_main(void *arg)
{
	char buf[LOG_LINE_MAX + 1];
	size_t have = 0;

	(void)arg;
	td_thread_name("td-syslog");
	openlog("tagdiskd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	for (;;) {
		ssize_t n = read(dz.log_fd, buf + have, LOG_LINE_MAX - have);
		char *start = buf;
		char *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		while ((nl = memchr(start, '\n', have - (size_t)(start - buf)))) {
			*nl = '\0';
			forward_line(start);
			start = nl + 1;
		}
		have -= (size_t)(start - buf);
		memmove(buf, start, have);
		if (have == LOG_LINE_MAX) { /* no line is this long; pass it on as it is */
			buf[have] = '\0';
			forward_line(buf);
			have = 0;
		}
	}
	if (have) {
		buf[have] = '\0';
		forward_line(buf);
	}
	closelog();
	return NULL;
}

/* Make stderr a pipe to the td-syslog thread. Return: 0 or a negative errno. */
static int start_syslog(void)
{
	int fds[2];
	int ret;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	/* A stuck syslog must never block a thread that logs: a full pipe drops the line. */
	if (fcntl(fds[1], F_SETFL, O_NONBLOCK) < 0) {
		ret = -errno;
		goto out_close;
	}
	dz.log_fd = fds[0];
	ret = pthread_create(&dz.log_thread, NULL, syslog_main, NULL);
	if (ret) {
		ret = -ret;
		dz.log_fd = -1;
		goto out_close;
	}
	dz.log_started = true;
	/* From here every log line goes to syslog; the write end lives on as fd 2 alone. */
	dup2(fds[1], STDERR_FILENO);
	close(fds[1]);
	return 0;

out_close:
	close(fds[0]);
	close(fds[1]);
	return ret;
}

void td_daemonize_ready(void)
{
	int ret;

	if (dz.report_fd < 0)
		return;
	redirect_to_null(STDOUT_FILENO);
	ret = start_syslog();
	if (ret) {
		fprintf(stderr, "tagdiskd: warning: cannot log to syslog: %s; logging nothing\n",
			strerror(-ret));
		redirect_to_null(STDERR_FILENO);
	}
	/* The parent exits now: its caller's stdout and stderr are no longer ours. */
	report(REPORT_READY);
}

void td_daemonize_resume(void)
{
	int ret;

	/* Our predecessor went back to where it was started, for our command line. */
	if (chdir("/") < 0)
		td_warn("cannot move to /: %s", strerror(errno));
	redirect_to_null(STDIN_FILENO);
	redirect_to_null(STDOUT_FILENO);
	ret = start_syslog();
	if (ret)
		redirect_to_null(STDERR_FILENO);
}

void td_daemonize_failed(bool unservable)
{
	report(unservable ? REPORT_UNSERVABLE : REPORT_FAILED);
}

void td_daemonize_end(void)
{
	if (!dz.log_started)
		return;
	/* fd 2 held the log pipe's only write end: replacing it lets the thread read EOF. */
	redirect_to_null(STDERR_FILENO);
	pthread_join(dz.log_thread, NULL);
	close(dz.log_fd);
	dz.log_fd = -1;
	dz.log_started = false;
}
