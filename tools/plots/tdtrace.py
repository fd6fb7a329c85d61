# SPDX-License-Identifier: GPL-2.0-or-later
"""Reading `tagdiskctl trace --blktrace FILE` files (docs/protocol.md, "blktrace records").

A file is a run of Linux `struct blk_io_trace` records: a 48-byte little-endian header and
pdu_len bytes of payload. Notes (the notify category) name processes and count dropped
events; every other record is one event of one I/O:

  Q  a bio was queued             M/F  it merged into a queued request (back/front)
  G  it got a request of its own  I    that request entered the elevator
  D  a request went to the drive (it holds a tag)
  C  the drive completed it       R    a reset took its tag and requeued it

From the events this module derives what the pictures show: each bio's queue-to-completion
time (Q2C: what the submitter waits, queueing included) and, at each instant, the requests
at the drive and those waiting in the queue.
"""
import struct

HEADER = struct.Struct("<IIQQIIIIIHH")
MAGIC = 0x65617400
CAT_SHIFT = 16
CAT_READ, CAT_WRITE, CAT_FLUSH = 1 << 0, 1 << 1, 1 << 2
CAT_NOTIFY = 1 << 10
CAT_DISCARD = 1 << 13
ACTIONS = {1: "Q", 2: "M", 3: "F", 4: "G", 6: "R", 7: "D", 8: "C", 12: "I"}
DROPPED_MSG = b"tagdisk: dropped events: "


class TraceError(Exception):
    pass


class Event:
    __slots__ = ("t", "action", "op", "sector", "sectors", "pid", "error")

    def __init__(self, t, action, op, sector, sectors, pid, error):
        self.t = t  # seconds since the file's first event
        self.action = action
        self.op = op  # "read", "write", "flush", "discard"
        self.sector = sector
        self.sectors = sectors
        self.pid = pid
        self.error = error

    @property
    def end(self):
        return self.sector + self.sectors


def _op(cat):
    if cat & CAT_DISCARD:
        return "discard"
    if cat & CAT_FLUSH and not cat & (CAT_READ | CAT_WRITE):
        return "flush"
    return "write" if cat & CAT_WRITE else "read"


def read(path):
    """Return (events in file order, events the daemon dropped). Raise TraceError on a bad
    record: a picture drawn from half a trace would be a wrong picture."""
    with open(path, "rb") as f:
        data = f.read()
    events, dropped, off = [], 0, 0
    while off < len(data):
        if off + HEADER.size > len(data):
            raise TraceError(f"{path}: a record cut short at byte {off}")
        (magic, _seq, time_ns, sector, nbytes, action, pid, _dev, _cpu, error,
         pdu_len) = HEADER.unpack_from(data, off)
        if magic & 0xffffff00 != MAGIC:
            raise TraceError(f"{path}: bad magic {magic:#x} at byte {off}")
        pdu = data[off + HEADER.size:off + HEADER.size + pdu_len]
        off += HEADER.size + pdu_len
        cat = action >> CAT_SHIFT
        if cat & CAT_NOTIFY:
            if pdu.startswith(DROPPED_MSG):
                dropped += int(pdu[len(DROPPED_MSG):].split(b"\0")[0] or 0)
            continue
        code = ACTIONS.get(action & 0xffff)
        if code is None:
            continue
        events.append(Event(time_ns / 1e9, code, _op(cat), sector, nbytes // 512, pid, error))
    return events, dropped


def q2c(events):
    """Each bio's queue-to-completion time: [(completion time, seconds, op)], in completion
    order. A completion ends every queued bio of its op inside its range (the bios merged
    into the request); a requeue ends none (the request is redone)."""
    pending = {}  # op -> [(sector, end, queued at)]
    out = []
    for e in events:
        if e.action == "Q":
            pending.setdefault(e.op, []).append((e.sector, e.end, e.t))
        elif e.action == "C":
            waiting = pending.get(e.op, [])
            if e.op == "flush":
                done = waiting[:1]
            else:
                done = [b for b in waiting if b[0] >= e.sector and b[1] <= e.end]
            for b in done:
                waiting.remove(b)
                out.append((e.t, e.t - b[2], e.op))
    return out


def occupancy(events):
    """Requests at the drive (holding a tag) and waiting in the queue, after each event:
    [(time, at the drive, waiting)]. I adds a request to the queue (a flush, which skips the
    elevator, too), D moves one to the drive, C ends one there, R puts one back in the queue.
    A merge that joins two queued requests is not traced: each such join leaves waiting one
    too high (the counts are clamped at 0)."""
    out, drive, waiting = [], 0, 0
    for e in events:
        if e.action == "I":
            waiting += 1
        elif e.action == "D":
            drive += 1
            waiting = max(waiting - 1, 0)
        elif e.action == "C":
            drive = max(drive - 1, 0)
        elif e.action == "R":
            drive = max(drive - 1, 0)
            waiting += 1
        else:
            continue
        out.append((e.t, drive, waiting))
    return out
