// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * types.c - names of the operations every stage shares (tagdisk/types.h).
 */
#include "tagdisk/types.h"

const char *td_op_name(enum td_op op)
{
	switch (op) {
	case TD_OP_READ:
		return "read";
	case TD_OP_WRITE:
		return "write";
	case TD_OP_FLUSH:
		return "flush";
	case TD_OP_DISCARD:
		return "discard";
	case TD_OP_WRITE_ZEROES:
		return "write_zeroes";
	}
	return "unknown";
}
