// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_wlog.c - tagdisk-replay's reading of a write log (src/ctl/replay*.c,
 * common/wlog_fmt.c) on arbitrary bytes: the input is the log file.
 *
 * replay.h promises that a bad log is one message and exit status 2 with
 * nothing written. So: listing the log (-vv) ends in 0 or 2; --find on it
 * too; and replaying it onto a 256 KiB target ends in 0 or 2, the target
 * still 256 KiB (nothing written past its end), and, when it ended in 2,
 * every byte of it as it was.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ctl/replay.h"
#include "fuzz.h"

#define TARGET_BYTES (256U << 10)

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	devnull = fopen("/dev/null", "w");
	return 0;
}

static int memfd_path(const char *name, char *path, size_t len)
{
	int fd = memfd_create(name, 0);

	FUZZ_CHECK(fd >= 0);
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

static bool target_untouched(int fd)
{
	static uint8_t buf[65536];
	struct stat st;

	FUZZ_CHECK(fstat(fd, &st) == 0);
	if (st.st_size != TARGET_BYTES)
		return false;
	for (off_t off = 0; off < TARGET_BYTES; off += sizeof(buf)) {
		FUZZ_CHECK(pread(fd, buf, sizeof(buf), off) == (ssize_t)sizeof(buf));
		for (size_t i = 0; i < sizeof(buf); i++)
			if (buf[i] != 0xa5)
				return false;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fill[TARGET_BYTES];
	struct td_replay_opts o;
	char lpath[64], tpath[64];
	struct stat st;
	int lfd, tfd, r;

	lfd = memfd_path("log", lpath, sizeof(lpath));
	FUZZ_CHECK(write(lfd, data, size) == (ssize_t)size);

	td_replay_opts_default(&o);
	o.log = lpath;
	o.out = devnull;
	o.err = devnull;
	o.verbose = 2;
	r = td_replay_run(&o);
	FUZZ_CHECK(r == TD_REPLAY_OK || r == TD_REPLAY_BAD_INPUT);

	o.verbose = 0;
	o.find = true;
	o.next_flush = true;
	r = td_replay_run(&o);
	FUZZ_CHECK(r == TD_REPLAY_OK || r == TD_REPLAY_BAD_INPUT);

	tfd = memfd_path("target", tpath, sizeof(tpath));
	memset(fill, 0xa5, sizeof(fill));
	FUZZ_CHECK(write(tfd, fill, sizeof(fill)) == (ssize_t)sizeof(fill));
	o.find = false;
	o.next_flush = false;
	o.target = tpath;
	r = td_replay_run(&o);
	FUZZ_CHECK(r == TD_REPLAY_OK || r == TD_REPLAY_BAD_INPUT);
	FUZZ_CHECK(fstat(tfd, &st) == 0 && st.st_size == TARGET_BYTES);
	if (r == TD_REPLAY_BAD_INPUT)
		FUZZ_CHECK(target_untouched(tfd));
	close(tfd);
	close(lfd);
	return 0;
}
