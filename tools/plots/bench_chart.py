#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The table of `make bench` as a chart: IOPS per job, as ratios.

    tools/plots/bench_chart.py RESULT.json OUT.svg

RESULT.json is what bench/bench.py saves (OUT/bench.json): per job and target the medians
of the rounds. One panel per job; a pair of bars per kind of tagdisk target, FUSE over
/dev/fuse (classic) and FUSE over io_uring (uring), each as long as its IOPS over the
pass-through of the same transport (bench/passthrough.c: that transport with no block
layer, its ceiling), labelled with that ratio and the ratio to the raw image file, and to
qemu-storage-daemon where the result has it. The panel's title gives the raw file's IOPS and
the pass-throughs' ratios to it. Kinds the result lacks are left out; kinds it has that are
not known here come last, named as they are.
"""
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tdplot  # noqa: E402
from tdplot import plt  # noqa: E402

# kind -> what a reader calls it. A target is KIND-TRANSPORT, or KIND alone. The references
# (raw file, pass-throughs) get no bar of their own: they are the scale.
KINDS = [
    ("bio", "bio\n(no queue)"),
    ("rq", "rq\n(deadline, 32 tags)"),
    ("mq", "mq\n(none, 32 tags)"),
    ("loop", "loop device\non rq"),
    ("loop-mq", "loop device\non mq"),
    ("loop-pass", "loop device on\nthe pass-through"),
    ("qsd", "qemu-storage-\ndaemon"),
    ("loop-qsd", "loop device on\nqemu-storage-\ndaemon"),
]
REFERENCES = ("raw", "pass")
TRANSPORT_COLOURS = {"classic": tdplot.BLUE, "uring": tdplot.ORANGE, None: tdplot.GREY}
TRANSPORT_NAMES = {"classic": "FUSE classic (/dev/fuse)", "uring": "FUSE over io_uring",
                   None: "no FUSE transport"}


def split(target):
    """(kind, transport or None)."""
    for tr in ("classic", "uring"):
        if target.endswith("-" + tr):
            return target[:-len(tr) - 1], tr
    return target, None


def kinds_of(targets):
    known = [k for k, _ in KINDS]
    have = []
    for t in targets:
        k = split(t)[0]
        if k not in have and k not in REFERENCES:
            have.append(k)
    return sorted(have, key=lambda k: known.index(k) if k in known else len(known))


def label_of(kind):
    return dict(KINDS).get(kind, kind)


def span(values):
    lo, hi = min(values), max(values)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def iops(res, job, target):
    return res[job].get(target, {}).get("iops") or None


def scale_of(res, job, target):
    """What a target's bar is measured against: the pass-through of its transport; for a
    target with no transport, the raw file."""
    tr = split(target)[1]
    return iops(res, job, f"pass-{tr}" if tr else "raw")


def qsd_of(res, job, kind):
    """qemu-storage-daemon's IOPS to set a bar of this kind against: through a loop device
    for a loop device; None where the result has no qsd."""
    pre = "loop-" if kind.startswith("loop") else ""
    return iops(res, job, pre + "qsd-classic") or iops(res, job, pre + "qsd")


def caption_of(r):
    """What the chart says, in numbers from it."""
    res, jobs = r["results"], r["jobs"]
    parts = [f"make bench on {r['date']} ({r['machine']}; images on {r['images']}, "
             f"{r['size']}): fio IOPS, median of {r['rounds']} round(s) of {r['runtime_s']} s "
             f"per job and target. Each bar is a tagdisk target's IOPS over those of the "
             f"FUSE pass-through of the same transport (1.00: the transport with no block "
             f"layer); its label adds the ratio to the raw image file."]
    for tr in ("uring", "classic"):
        said = []
        for kind in ("bio", "rq", "mq"):
            t = f"{kind}-{tr}"
            vals = [iops(res, j, t) / scale_of(res, j, t) for j in jobs
                    if iops(res, j, t) and scale_of(res, j, t)]
            if vals:
                said.append(f"{kind} {span(vals)}")
        if said:
            parts.append(f"Over {tr}, x the pass-through, from job to job: "
                         f"{', '.join(said)}.")
    vals = [iops(res, j, f"pass-{tr}") / iops(res, j, "raw") for j in jobs
            for tr in ("classic", "uring") if iops(res, j, f"pass-{tr}") and iops(res, j, "raw")]
    if vals:
        parts.append(f"The pass-throughs themselves: {span(vals)} x the raw file.")
    for t in ("mq-uring", "rq-classic"):
        vals = [iops(res, j, t) / qsd_of(res, j, "") for j in jobs
                if iops(res, j, t) and qsd_of(res, j, "")]
        if vals:
            parts.append(f"{t} x qemu-storage-daemon's FUSE export: {span(vals)}.")
    vals = [iops(res, j, "loop-mq-uring") / qsd_of(res, j, "loop") for j in jobs
            if iops(res, j, "loop-mq-uring") and qsd_of(res, j, "loop")]
    if vals:
        parts.append(f"Through a loop device, mq-uring x qemu-storage-daemon: {span(vals)}.")
    return " ".join(parts)


def draw(r, out):
    jobs, res = r["jobs"], r["results"]
    all_targets = [t for j in jobs for t in r["targets"][j]]
    kinds = kinds_of(all_targets)
    title = "make bench: tagdisk's modes against the FUSE pass-through of their transport"
    caption = caption_of(r)
    cols = 2
    rows = (len(jobs) + 1 + cols - 1) // cols  # one cell more for the key
    panel_h = 0.42 * len(kinds) + 1.0
    fig = plt.figure(figsize=(13, rows * panel_h + 1.9))
    top = tdplot.header(fig, title, caption, panel_title_lines=2)
    gs = fig.add_gridspec(rows, cols, top=top, bottom=0.03, left=0.1, right=0.985,
                          hspace=0.75, wspace=0.32)
    ratios = [iops(res, j, t) / scale_of(res, j, t) for j in jobs for t in r["targets"][j]
              if split(t)[0] not in REFERENCES and iops(res, j, t) and scale_of(res, j, t)]
    xmax = max(ratios + [1.0]) * 1.5
    for n, job in enumerate(jobs):
        ax = fig.add_subplot(gs[n // cols, n % cols])
        raw = iops(res, job, "raw")
        sub = [f"{tr} {iops(res, job, f'pass-{tr}') / raw:.2f}" for tr in ("classic", "uring")
               if raw and iops(res, job, f"pass-{tr}")]
        ax.set_title(f"{job}: raw file {raw:,.0f} IOPS\npass-through / raw: {', '.join(sub)}"
                     if raw else job, loc="left", fontsize=10)
        for i, kind in enumerate(kinds):
            for tr in (None, "classic", "uring"):
                t = kind if tr is None else f"{kind}-{tr}"
                v, ref = iops(res, job, t), scale_of(res, job, t)
                if not v or not ref:
                    continue
                y = i + (0 if tr is None else (-0.2 if tr == "classic" else 0.2))
                h = 0.7 if tr is None else 0.38
                tdplot.series(ax.barh(y, v / ref, height=h, color=TRANSPORT_COLOURS[tr]),
                              job, t)
                notes = [f"{v / raw:.2f} raw"] if raw else []
                qsd = qsd_of(res, job, kind)
                if "qsd" not in kind and qsd:
                    notes.append(f"{v / qsd:.2f} qsd")
                ax.text(v / ref, y, f" {v / ref:.2f}" + (f"  ({', '.join(notes)})"
                                                         if notes else ""),
                        va="center", fontsize=7.5)
        ax.axvline(1.0, color="k", lw=0.9, ls=":")
        ax.set_yticks(range(len(kinds)))
        ax.set_yticklabels([label_of(k) for k in kinds], fontsize=8.5)
        ax.set_ylim(len(kinds) - 0.5, -0.5)
        ax.set_xlim(0, xmax)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("IOPS / the pass-through's (same transport)", fontsize=8.5)
        ax.tick_params(axis="x", labelsize=8)
    # The key.
    ax = fig.add_subplot(gs[len(jobs) // cols, len(jobs) % cols])
    ax.axis("off")
    trs = [tr for tr in ("classic", "uring", None)
           if any(split(t)[1] == tr and split(t)[0] not in REFERENCES for t in all_targets)]
    for i, tr in enumerate(trs):
        ax.add_patch(plt.Rectangle((0.0, 0.82 - i * 0.16), 0.07, 0.09,
                                   color=TRANSPORT_COLOURS[tr], transform=ax.transAxes))
        ax.text(0.1, 0.865 - i * 0.16, TRANSPORT_NAMES[tr], transform=ax.transAxes,
                va="center", fontsize=10)
    ax.text(0.0, 0.82 - len(trs) * 0.16,
            "dotted line: the FUSE pass-through of the same transport\n(1.00; bench/passthrough.c"
            ": the transport with no block layer)\nin brackets: x the raw image file, and x "
            "qemu-storage-daemon\n(through a loop device for a loop device)",
            transform=ax.transAxes, va="top", fontsize=9.5)
    tdplot.save(fig, out, title, caption)
    return title, caption


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_chart.py RESULT.json OUT.svg")
    try:
        with open(sys.argv[1]) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"bench_chart: {sys.argv[1]}: {e}")
    if r.get("format") != "tagdisk-bench 1":
        sys.exit(f"bench_chart: {sys.argv[1]}: not a saved bench result "
                 f"(format {r.get('format')!r})")
    draw(r, sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
