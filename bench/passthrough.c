// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * passthrough.c - tagdisk's own FUSE front end with the engine switched off.
 *
 * The ceiling `make bench` measures tagdisk against: the same session loop,
 * buffers, open flags and disk-file semantics as tagdiskd, but every request
 * is served by pread/pwrite in the FUSE thread that received it. Not
 * installed; benchmarks only.
 *
 *   tagdisk-passthrough -f --image IMAGE --mount DIR [--socket IGNORED] [-o OPT]...
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/log.h"
#include "daemon/frontend.h"

static struct td_frontend *fe;

static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	int sig;

	sigwait(set, &sig);
	td_frontend_stop(fe);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "image", required_argument, NULL, 'i' },
		{ "mount", required_argument, NULL, 'm' },
		{ "socket", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	const char *image = NULL, *mount = NULL;
	const char *fuse_opts[16];
	size_t nr_opts = 0;
	char err[256];
	struct stat st;
	sigset_t set;
	pthread_t sig_thread;
	int c, fd;

	td_log_init("tagdisk-passthrough", TD_LOG_NOTICE);
	while ((c = getopt_long(argc, argv, "fo:", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
		case 's':
			break;
		case 'i':
			image = optarg;
			break;
		case 'm':
			mount = optarg;
			break;
		case 'o':
			if (nr_opts < 16)
				fuse_opts[nr_opts++] = optarg;
			break;
		default:
			return 2;
		}
	}
	if (!image || !mount) {
		fprintf(stderr, "usage: tagdisk-passthrough -f --image IMAGE --mount DIR\n");
		return 2;
	}
	fd = open(image, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "tagdisk-passthrough: %s: %s\n", image, strerror(errno));
		return 1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sigdelset(&set, SIGUSR1);

	struct td_frontend_params p = {
		.mountpoint = mount,
		.name = "disk",
		.size_bytes = (uint64_t)st.st_size,
		.logical_block_size = 512,
		.parallel_direct_writes = true,
		.max_threads = 128,
		.max_background = 128,
		.image_fd = fd,
		.passthrough = true,
		.fuse_opts = fuse_opts,
		.nr_fuse_opts = nr_opts,
	};

	fe = td_frontend_create(&p, err, sizeof(err));
	if (!fe) {
		fprintf(stderr, "tagdisk-passthrough: %s\n", err);
		return 1;
	}
	pthread_create(&sig_thread, NULL, signal_main, &set);
	int ret = td_frontend_run(fe);

	pthread_kill(sig_thread, SIGTERM);
	pthread_join(sig_thread, NULL);
	td_frontend_unmount(fe);
	td_frontend_destroy(fe);
	close(fd);
	return ret < 0 ? 1 : 0;
}
