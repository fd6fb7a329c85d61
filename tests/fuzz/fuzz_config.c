// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz_config.c - td_config_load_file() on arbitrary file contents.
 *
 * iniparser reads from a path, so the input goes into one memfd made at
 * start and is read back through /proc/self/fd/N: nothing touches the disk
 * and nothing is left behind between inputs (the file is truncated and
 * rewritten, the config freed). The loader must answer 0, -EINVAL with a
 * message, or -ENOMEM, and whatever it stored, accepted file or not, must
 * pass fuzz_check_config(). A refusal names the file ("PATH:LINE: ..." or
 * "config file \"PATH\": ..."), and every key the file set records a line
 * of the file as its origin.
 */
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
#include "fuzz_config.h"

static int ini_fd = -1;
static char ini_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	ini_fd = memfd_create("tagdisk-fuzz.ini", MFD_CLOEXEC);
	FUZZ_CHECK(ini_fd >= 0);
	snprintf(ini_path, sizeof(ini_path), "/proc/self/fd/%d", ini_fd);
	return 0;
}

/* Return: the number of lines of @data, a last one without '\n' included. */
static unsigned int nr_lines(const uint8_t *data, size_t size)
{
	unsigned int n = 0;

	for (size_t i = 0; i < size; i++)
		n += data[i] == '\n';
	return n + (size && data[size - 1] != '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct td_config c;
	char err[512];
	int ret;

	FUZZ_CHECK(ftruncate(ini_fd, 0) == 0);
	FUZZ_CHECK(pwrite(ini_fd, data, size, 0) == (ssize_t)size);

	td_config_init(&c);
	memset(err, 0x5a, sizeof(err));
	ret = td_config_load_file(&c, ini_path, err, sizeof(err));
	if (ret) {
		FUZZ_CHECK(ret == -EINVAL || ret == -ENOMEM);
		FUZZ_CHECK(fuzz_terminated(err, sizeof(err)) && err[0]);
	}
	if (ret == -EINVAL) {
		size_t plen = strlen(ini_path);

		FUZZ_CHECK((strncmp(err, ini_path, plen) == 0 && err[plen] == ':') ||
			   strncmp(err, "config file \"", 13) == 0);
	}
	for (size_t i = 0; i < td_config_nr_keys; i++) {
		FUZZ_CHECK(!c.origin[i].option);
		FUZZ_CHECK(c.origin[i].line <= nr_lines(data, size));
	}
	fuzz_check_config(&c);
	td_config_free(&c);
	return 0;
}
