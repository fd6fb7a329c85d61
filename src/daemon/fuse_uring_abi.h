/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fuse_uring_abi.h - the FUSE-over-io_uring part of the kernel ABI that
 * Debian 12's <linux/fuse.h> (protocol 7.38) lacks.
 *
 * Written from include/uapi/linux/fuse.h of Linux 6.14 (protocol 7.42, where
 * FUSE over io_uring was merged), unchanged through 6.18 (7.45). Layouts
 * are the kernel's; the names are ours, with a TD_ prefix, so this header
 * can sit beside a newer system <linux/fuse.h> without clashing.
 *
 * Transport in one paragraph: each ring entry is a pair of buffers the daemon
 * registers (REGISTER, iovec[2] = {header, payload}); a request arrives as a
 * completion of that command with the fuse_in_header in the header's in_out,
 * the opcode's first argument in op_in and the rest in the payload; the
 * daemon puts its fuse_out_header in in_out and the out arguments in the
 * payload, and COMMIT_AND_FETCH both sends that reply and re-arms the entry.
 */
#ifndef TAGDISK_FUSE_URING_ABI_H
#define TAGDISK_FUSE_URING_ABI_H

#include <stdint.h>

/* FUSE_INIT flag (64-bit flags; bit 9 of flags2, which needs FUSE_INIT_EXT). */
#define TD_FUSE_OVER_IO_URING (1ULL << 41)

#define TD_FUSE_URING_IN_OUT_HEADER_SZ 128
#define TD_FUSE_URING_OP_IN_OUT_SZ     128

/* struct fuse_uring_ent_in_out: per-entry metadata the kernel and the daemon exchange. */
struct td_fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;  /* the request's unique: what COMMIT_AND_FETCH names */
	uint32_t payload_sz; /* bytes of the payload used, both ways */
	uint32_t padding;
	uint64_t reserved;
};

/* struct fuse_uring_req_header: the first iovec of an entry. */
struct td_fuse_uring_req_header {
	char in_out[TD_FUSE_URING_IN_OUT_HEADER_SZ]; /* fuse_in_header in, fuse_out_header out */
	char op_in[TD_FUSE_URING_OP_IN_OUT_SZ];	     /* the opcode's first in-argument */
	struct td_fuse_uring_ent_in_out ring_ent_in_out;
};

/* enum fuse_uring_cmd: the io_uring command's cmd_op. */
enum td_fuse_uring_cmd {
	TD_FUSE_IO_URING_CMD_INVALID = 0,
	TD_FUSE_IO_URING_CMD_REGISTER = 1,
	TD_FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

/* struct fuse_uring_cmd_req: in the SQE's command area (needs IORING_SETUP_SQE128). */
struct td_fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id; /* COMMIT_AND_FETCH: the request answered */
	uint16_t qid;	    /* the queue: one per possible CPU */
	uint8_t padding[6];
};

_Static_assert(sizeof(struct td_fuse_uring_req_header) == 288, "kernel ABI: 288-byte header");
_Static_assert(sizeof(struct td_fuse_uring_cmd_req) == 24, "kernel ABI: 24-byte command");

#endif /* TAGDISK_FUSE_URING_ABI_H */
