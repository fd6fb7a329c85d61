/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuzz.h - what every libFuzzer harness of tagdisk shares.
 *
 * A harness feeds one parser arbitrary bytes and then checks the promises its
 * header makes about the result. A broken promise is reported like a crash:
 * one line naming the check, then abort(), so libFuzzer saves the input. The
 * checks do not rely on assert(), which NDEBUG would remove.
 *
 * LOCKING: none; libFuzzer calls a harness from one thread.
 */
#ifndef TAGDISK_FUZZ_H
#define TAGDISK_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The entry point libFuzzer calls once per input; always returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Called once before the first input, where a harness defines it. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* True when the NUL-terminated @s fits in @len bytes: a message was not written past its buffer. */
static inline bool fuzz_terminated(const char *s, size_t len)
{
	return len && memchr(s, '\0', len) != NULL;
}

#endif /* TAGDISK_FUZZ_H */
