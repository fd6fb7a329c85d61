// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * bind_swap.c - an LD_PRELOAD shim that plays someone who may write to the
 * directory of the admin socket, acting in the window right after the daemon
 * binds a Unix socket: whatever is at TD_SHIM_SOCKET is moved aside and a
 * symlink to TD_SHIM_VICTIM takes its place. A daemon that then sets the
 * socket's mode and group by path changes the victim's instead.
 *
 *   TD_SHIM_SOCKET  the admin socket's path (the daemon's --socket)
 *   TD_SHIM_VICTIM  the file the symlink points to
 *
 * It acts once, on the first successful bind() of an AF_UNIX socket, and
 * writes "bind_swap: swapped PATH" to stderr when it did.
 *
 * Build: cc -shared -fPIC -o bind_swap.so bind_swap.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int done;
	bind_fn real = (bind_fn)dlsym(RTLD_NEXT, "bind");
	const char *path = getenv("TD_SHIM_SOCKET");
	const char *victim = getenv("TD_SHIM_VICTIM");
	char aside[4096];
	int ret;

	ret = real(fd, addr, len);
	if (ret || done || !path || !victim || addr->sa_family != AF_UNIX)
		return ret;
	done = 1;
	snprintf(aside, sizeof(aside), "%s.aside", path);
	rename(path, aside); /* nothing there yet is fine */
	if (symlink(victim, path) == 0)
		fprintf(stderr, "bind_swap: swapped %s\n", path);
	return ret;
}
