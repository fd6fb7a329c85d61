#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""make plots: the README's pictures, drawn from real runs (Debian's python3-matplotlib).

    tools/plots/plots.py [--build DIR] [--out DIR] [--seconds N] [--work DIR]
                         [--bench RESULT.json]
    tools/plots/plots.py --redraw WORK [--out DIR] [--bench RESULT.json]

  elevator.svg  the elevator: noop vs deadline at tag depth 1 (the host sorts)
  tcq.svg       tagged queueing: tag depth 1 vs 32 with noop (the drive sorts)
  reset.svg     a reset and a command timeout under fio verify: nothing lost
  bench.svg     `make bench`'s table as ratios, from the saved result OUT/bench.json, or
                from --bench RESULT.json, which is copied there (tools/plots/bench_chart.py;
                `make bench` draws the same chart next to its own report)

The first two share their load, 4 KiB random reads at fio QD32 on the HDD latency model
(4 GiB, 7200 rpm), and their baseline run (noop, tag depth 1), so three traced runs of
--seconds each make them. Every picture's caption is computed from its runs, written under
its title and into the SVG's metadata, and collected in OUT/captions.md.

Needs root, /dev/fuse, fio and a built tree; make plots passes BUILD, PLOTS_SECONDS and
PLOTS_OUT (the defaults of --build, --seconds and --out). --work keeps the runs' traces
and reports in that directory (else a temporary one is removed); --redraw draws from such
a directory without running anything. TD_PLOTS_PNG=1 also writes a PNG beside each SVG.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # nothing written into the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

import bench_chart  # noqa: E402
import runs  # noqa: E402
import tdplot  # noqa: E402
import tdtrace  # noqa: E402
from tdplot import plt  # noqa: E402

SECTORS_PER_TRACK = 2048  # the HDD model's default (hdd_sectors_per_track)
GIB = 1 << 30


def load(path):
    with open(path) as f:
        return json.load(f)


def pct(values, p):
    return float(np.percentile(values, p)) if len(values) else float("nan")


class Run:
    """One traced run, as read back from its directory (runs.py)."""

    def __init__(self, rundir):
        self.meta = load(os.path.join(rundir, "run.json"))
        self.name = self.meta["name"]
        self.label = self.meta.get("label", self.name)
        self.stats = load(os.path.join(rundir, "stats.json"))
        fio = load(os.path.join(rundir, "fio.json"))
        self.fio_jobs = fio["jobs"]
        self.events, self.dropped = tdtrace.read(os.path.join(rundir, "trace.blktrace.0"))
        if not self.events:
            raise tdtrace.TraceError(f"{rundir}: the trace holds no event")
        if self.dropped:
            raise tdtrace.TraceError(f"{rundir}: the daemon dropped {self.dropped} events")
        self.q2c = tdtrace.q2c(self.events)
        self.done = [e for e in self.events if e.action == "C"]
        self.span = self.events[-1].t
        # The drive serves one command at a time: completions are in the order it served.
        self.seeks = [abs(b.sector - a.end) / SECTORS_PER_TRACK
                      for a, b in zip(self.done, self.done[1:])]

    @property
    def iops(self):
        return sum(j["read"]["iops"] + j["write"]["iops"] for j in self.fio_jobs)

    @property
    def fio_writes(self):
        return sum(j["write"]["total_ios"] for j in self.fio_jobs)

    @property
    def fio_reads(self):
        return sum(j["read"]["total_ios"] for j in self.fio_jobs)

    @property
    def fio_errors(self):
        return sum(j["error"] for j in self.fio_jobs)

    def q2c_ms(self):
        return [x[1] * 1e3 for x in self.q2c]

    def mean_seek_tracks(self):
        """The drive's own figure (stats), which the trace's agrees with."""
        return self.stats["drive"]["mean_seek_sectors"] / SECTORS_PER_TRACK


def bins(span, width):
    """Bin edges over [0, span), whole bins only (a last partial one would read low)."""
    n = max(int(span // width), 1)
    return np.arange(n + 1) * width


def per_interval_rate(times, edges):
    counts, _ = np.histogram(times, edges)
    return counts / np.diff(edges)


def per_interval_pct(pairs, edges, p):
    """p-th percentile of the values of (time, value) pairs in each bin; nan for an empty one."""
    out = []
    for lo, hi in zip(edges, edges[1:]):
        v = [x for t, x in pairs if lo <= t < hi]
        out.append(pct(v, p) if v else float("nan"))
    return np.array(out)


def centres(edges):
    return (edges[:-1] + edges[1:]) / 2


# ---- elevator.svg and tcq.svg: two runs of the same load side by side ----------------------

def zoom_window(runs_, width=1.0):
    """A window of width seconds (at most) in the middle of the shorter run."""
    span = min(r.span for r in runs_)
    width = min(width, span / 2)
    lo = max(span / 2 - width / 2, 0)
    return lo, lo + width


def head_path(ax, run, colour, window, what):
    """The offset of each read the drive served in window, in the order served."""
    lo, hi = window
    pts = [(e.t - lo, (e.sector * 512) / GIB) for e in run.done if lo <= e.t < hi]
    xs, ys = [p[0] * 1e3 for p in pts], [p[1] for p in pts]
    tdplot.series(ax.plot(xs, ys, "-", color=colour, lw=0.8, alpha=0.55), run.name, "path")
    tdplot.series(ax.plot(xs, ys, "o", color=colour, ms=3.2), run.name, "served")
    ax.set_xlim(0, (hi - lo) * 1e3)
    ax.set_ylim(0, 4)
    ax.set_xlabel(f"ms (a {(hi - lo) * 1e3:.0f} ms window from {lo:.1f} s into the run)")
    in_window = [s for e, s in zip(run.done[1:], run.seeks) if lo <= e.t < hi]
    seek = statistics.mean(in_window) if in_window else 0.0
    ax.set_title(f"{run.label}: {what}\n{len(pts)} reads served in this window, mean seek "
                 f"{seek:.0f} tracks", loc="left")


def legend_above(ax, **kw):
    """The legend on the right of the panel's title line, off the data."""
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), borderaxespad=0.2, **kw)


def compare_figure(base, other, colour, out, title, caption, what_base, what_other):
    """Two runs of one load: the head's path in a window of each, side by side; then
    throughput, Q2C latency and seek distances of both, overlaid."""
    fig = plt.figure(figsize=(13, 9.4))
    top = tdplot.header(fig, title, caption)
    gs = fig.add_gridspec(2, 3, height_ratios=[1.25, 1], top=top, bottom=0.065, left=0.06,
                          right=0.985, hspace=0.42, wspace=0.26)
    colours = {base.name: tdplot.BLUE, other.name: colour}
    window = zoom_window((base, other))
    sub = gs[0, :].subgridspec(1, 2, wspace=0.06)
    ax0 = fig.add_subplot(sub[0, 0])
    head_path(ax0, base, colours[base.name], window, what_base)
    ax0.set_ylabel("offset on the disk (GiB)")
    ax1 = fig.add_subplot(sub[0, 1], sharey=ax0)
    head_path(ax1, other, colours[other.name], window, what_other)
    ax1.tick_params(labelleft=False)

    ax = fig.add_subplot(gs[1, 0])
    top_v = 0
    for r in (base, other):
        edges = bins(r.span, 0.5)
        iops = per_interval_rate([e.t for e in r.done], edges)
        top_v = max(top_v, iops.max())
        tdplot.series(ax.plot(centres(edges), iops, "o-", color=colours[r.name], ms=3,
                              label=r.label), r.name, "iops")
    ax.set_ylim(0, top_v * 1.15)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("reads completed per second")
    ax.set_title("Throughput\n(per 0.5 s)", loc="left")
    ax.legend(loc="lower right")

    ax = fig.add_subplot(gs[1, 1])
    top_v = 0
    for r in (base, other):
        edges = bins(r.span, 1.0)
        pairs = [(t, s * 1e3) for t, s, _ in r.q2c]
        for p, style, what in ((50, "-", "q2c-median"), (99, "--", "q2c-p99")):
            v = per_interval_pct(pairs, edges, p)
            top_v = max(top_v, np.nanmax(v))
            tdplot.series(ax.plot(centres(edges), v, style, marker="o", ms=3,
                                  color=colours[r.name]), r.name, what)
    ax.set_ylim(0, top_v * 1.45)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("queued to completed (ms)")
    ax.set_title("Latency, queue to completion\n(per 1 s)", loc="left")
    ax.legend(loc="upper left", ncol=2, handles=[
        Line2D([], [], color=colours[base.name], label=base.label),
        Line2D([], [], color="k", ls="-", label="median"),
        Line2D([], [], color=colours[other.name], label=other.label),
        Line2D([], [], color="k", ls="--", label="p99")])

    ax = fig.add_subplot(gs[1, 2])
    edges = np.linspace(0, 4096, 33)
    for r in (base, other):
        w = np.ones(len(r.seeks)) * 100 / max(len(r.seeks), 1)
        tdplot.series(ax.hist(r.seeks, edges, weights=w, histtype="step", lw=1.8,
                              color=colours[r.name], label=r.label)[2], r.name, "seeks")
    ax.set_xlim(0, 4096)
    ax.set_xlabel("seek distance (tracks; the disk has 4096)")
    ax.set_ylabel("% of seeks")
    ax.set_title("How far the head moves\n(the whole run)", loc="left")
    ax.legend(loc="upper right")
    tdplot.save(fig, out, title, caption)


def times(a, b):
    return f"{b / a:.2f}x" if a else "-"


def q2c_numbers(a, b):
    return (statistics.median(a.q2c_ms()), statistics.median(b.q2c_ms()),
            pct(a.q2c_ms(), 99), pct(b.q2c_ms(), 99))


def elevator_text(base, dl):
    m0, m1, p0, p1 = q2c_numbers(base, dl)
    title = (f"The elevator on an HDD: deadline's sorted sweeps serve {times(base.iops, dl.iops)}"
             f" the reads of noop's arrival order")
    tail = ("a read just behind the sweep waits for the next one (read_expire, 500 ms, "
            "bounds it)" if p1 > p0 else "the sweeps shorten the tail too")
    caption = (f"4 KiB random reads at fio QD32 on the HDD model (4 GiB, 7200 rpm) with tag "
               f"depth 1, so the drive serves each read in the order the elevator hands it "
               f"over; {base.meta['seconds']} s per run. deadline vs noop: {base.iops:.0f} -> "
               f"{dl.iops:.0f} IOPS, mean seek {base.mean_seek_tracks():.0f} -> "
               f"{dl.mean_seek_tracks():.0f} tracks, median Q2C {m0:.0f} -> {m1:.0f} ms; "
               f"p99 Q2C {p0:.0f} -> {p1:.0f} ms: {tail}.")
    return title, caption


def tcq_text(d1, d32):
    m0, m1, p0, p1 = q2c_numbers(d1, d32)
    title = (f"Tagged queueing on an HDD: holding 32 commands, the drive serves "
             f"{times(d1.iops, d32.iops)} the reads")
    tail = ("a far command is left for later, the price of the short seeks"
            if p1 > p0 else "the tail shortens too")
    caption = (f"The same 4 KiB random reads at fio QD32 on the HDD model, noop (arrival "
               f"order); {d1.meta['seconds']} s per run. At tag depth 1 the drive holds one "
               f"command; at 32 it holds 32 and serves the nearest first (shortest positioning "
               f"time). Depth 32 vs 1: {d1.iops:.0f} -> {d32.iops:.0f} IOPS, mean seek "
               f"{d1.mean_seek_tracks():.0f} -> {d32.mean_seek_tracks():.0f} tracks, median "
               f"Q2C {m0:.0f} -> {m1:.0f} ms; p99 Q2C {p0:.0f} -> {p1:.0f} ms: {tail}.")
    return title, caption


# ---- reset.svg -------------------------------------------------------------------------------

def requeue_bursts(events, gap=0.001):
    """The resets, from their R events: [(time, requests requeued)]."""
    out = []
    for e in events:
        if e.action != "R":
            continue
        if out and e.t - out[-1][0] < gap:
            out[-1][1] += 1
        else:
            out.append([e.t, 1])
    return [tuple(b) for b in out]


def oldest_age(events, step=0.005):
    """The age of the oldest command at the drive, sampled every step seconds: (times, ages
    in ms, dispatch time of the oldest at each sample or nan)."""
    at_drive = {}  # (op, sector, sectors) -> [dispatch times]
    ts, ages, since = [], [], []
    t_next = 0.0
    for e in events:
        while t_next <= e.t:
            held = [t for v in at_drive.values() for t in v]
            ts.append(t_next)
            ages.append((t_next - min(held)) * 1e3 if held else 0.0)
            since.append(min(held) if held else float("nan"))
            t_next += step
        key = (e.op, e.sector, e.sectors)
        if e.action == "D":
            at_drive.setdefault(key, []).append(e.t)
        elif e.action in ("C", "R") and at_drive.get(key):
            at_drive[key].pop(0)
            if not at_drive[key]:
                del at_drive[key]
    return np.array(ts), np.array(ages), np.array(since)


def reset_analysis(run):
    ev = run.events
    bursts = requeue_bursts(ev)
    occ = np.array(tdtrace.occupancy(ev))
    depth = run.meta["depth"]
    a = {"bursts": bursts, "occ": occ}
    # How long each reset left the drive short of its tags: from the R burst until every
    # tag is in use again.
    a["refill_ms"] = []
    for t, _ in bursts:
        back = occ[(occ[:, 0] > t) & (occ[:, 1] >= depth)]
        a["refill_ms"].append((back[0, 0] - t) * 1e3 if len(back) else float("nan"))
    ts, ages, since = oldest_age(ev)
    a["age"] = (ts, ages)
    # The hung command: the oldest one when the timer reset the drive.
    a["hung"] = None
    if len(bursts) >= 2:
        sel = ts <= bursts[1][0]
        if sel.any():
            i = np.where(sel)[0][-1]
            a["hung"] = (float(since[i]), bursts[1][0])
    # The longest time without a completion while the command hung.
    a["stall"] = 0.0
    if a["hung"]:
        h0, h1 = a["hung"]
        t = [h0] + [e.t for e in run.done if h0 < e.t < h1] + [h1]
        a["stall"] = max(y - x for x, y in zip(t, t[1:]))
    # Every bio queued was completed: what the trace says of "nothing lost".
    a["queued"] = sum(1 for e in ev if e.action == "Q")
    a["completed"] = len(run.q2c)
    a["requeued"] = sum(n for _, n in bursts)
    return a


def thin(occ, step, keep):
    """occ (rows of time, at the drive, waiting) as it stood every step seconds, with every
    row inside the (lo, hi) windows of keep: a picture of the whole run that a reader's SVG
    viewer draws quickly, and that still shows what happens at each reset."""
    grid = np.arange(occ[0, 0], occ[-1, 0], step)
    idx = np.searchsorted(occ[:, 0], grid, side="right") - 1
    rows = np.column_stack([grid, occ[idx, 1], occ[idx, 2]])
    near = np.zeros(len(occ), dtype=bool)
    for lo, hi in keep:
        near |= (occ[:, 0] >= lo) & (occ[:, 0] <= hi)
    both = np.concatenate([rows, occ[near], occ[-1:]])
    return both[np.argsort(both[:, 0], kind="stable")]


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def reset_text(run, a):
    st = run.stats
    b = a["bursts"]
    title = "A reset under load, and a hung command taken back by the timeout: nothing lost"
    parts = [f"fio writes {run.meta['blocks']} random 4 KiB blocks at QD32 and reads each back "
             f"(crc32c) on the HDD model, deadline, {run.meta['depth']} tags: "
             f"{run.meta['depth']} commands at the drive, the rest waiting in the queue."]
    if len(b) >= 1:
        parts.append(f"At {b[0][0]:.2f} s tagdiskctl reset invalidates every tag and "
                     f"requeues {plural(b[0][1], 'request')}; the drive has all its tags again "
                     f"{a['refill_ms'][0]:.1f} ms later.")
    if a["hung"]:
        h0, h1 = a["hung"]
        stall = a["stall"]
        meanwhile = ("the others go on completing" if stall < 0.25 else
                     f"the others complete, then fio, which must read that block back, waits "
                     f"for it: {stall:.2f} s without a completion")
        parts.append(f"At {h0:.2f} s inject hang makes the drive hold one command; "
                     f"{meanwhile}; {h1 - h0:.2f} s after the hang (command_timeout_ms = "
                     f"{run.meta['timeout_ms']}) the timer resets the drive and requeues "
                     f"{plural(b[1][1], 'request')}.")
    parts.append(f"fio verified {run.fio_reads} of the {run.fio_writes} blocks it wrote, "
                 f"{run.fio_errors} errors; each of the {a['queued']} bios queued completed "
                 f"once; the daemon counted {plural(st['resets'], 'reset')}, "
                 f"{plural(st['timeouts'], 'timeout')}, "
                 f"{st['requeued']} requeued, {st['errors']} errors.")
    return title, " ".join(parts)


def stacked(ax, t, drive, waiting, run, prefix=""):
    """Requests at the drive (bottom) and waiting in the queue (on top of them)."""
    tdplot.series(ax.fill_between(t, 0, drive, step="post", color=tdplot.BLUE, lw=0,
                                  label="at the drive (tag held)"),
                  run.name, prefix + "tags")
    tdplot.series(ax.fill_between(t, drive, drive + waiting, step="post", color=tdplot.ORANGE,
                                  lw=0, alpha=0.85, label="waiting in the queue"),
                  run.name, prefix + "queued")


def reset_figure(run, out):
    a = reset_analysis(run)
    title, caption = reset_text(run, a)
    fig = plt.figure(figsize=(13, 9.4))
    top = tdplot.header(fig, title, caption)
    gs = fig.add_gridspec(3, 2, height_ratios=[1.2, 1, 1], width_ratios=[2.4, 1], top=top,
                          bottom=0.065, left=0.06, right=0.985, hspace=0.62, wspace=0.14)
    occ = a["occ"]
    bursts = a["bursts"]
    names = ["tagdiskctl reset", "timeout reset"]
    total = occ[:, 1] + occ[:, 2]

    def mark(ax, label=False):
        for i, (t, nr) in enumerate(bursts):
            ax.axvline(t, color=tdplot.VERMILLION, lw=1.2, ls=":", zorder=3)
            if label:
                # Near the right end the label goes left of its line, inside the axes.
                left = t > 0.7 * occ[-1, 0]
                ax.annotate(f"{names[min(i, 1)]}: {nr} requeued", (t, 1.0),
                            xycoords=("data", "axes fraction"), xytext=(-4 if left else 4, -3),
                            textcoords="offset points", va="top", fontsize=9.5,
                            ha="right" if left else "left",
                            color=tdplot.VERMILLION, fontweight="bold")

    ax = fig.add_subplot(gs[0, 0])
    few = thin(occ, 0.01, [(t - 0.005, t + 0.015) for t, _ in bursts])
    stacked(ax, few[:, 0], few[:, 1], few[:, 2], run)
    if a["hung"]:
        h0, h1 = a["hung"]
        tdplot.series(ax.fill_between([h0, h1], 0, 1, color=tdplot.PURPLE,
                                      label="hung command"), run.name, "hung")
    ax.set_ylim(0, total.max() * 1.3)
    ax.set_xlim(0, run.span)
    ax.set_ylabel("requests")
    ax.set_title("Where the requests are", loc="left")
    legend_above(ax, ncol=3, fontsize=9.5)
    mark(ax, label=True)

    ax = fig.add_subplot(gs[1, 0], sharex=ax)
    edges = bins(run.span, 0.05)
    rate, _ = np.histogram([e.t for e in run.done], edges)
    tdplot.series(ax.bar(edges[:-1], rate, width=0.05, align="edge", color=tdplot.GREEN,
                         label="completed"), run.name, "completed")
    req, _ = np.histogram([e.t for e in run.events if e.action == "R"], edges)
    some = req > 0  # one bar per reset
    tdplot.series(ax.bar(edges[:-1][some], -req[some], width=0.05, align="edge",
                         color=tdplot.VERMILLION, label="requeued by a reset (down)"),
                  run.name, "requeued")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylabel("requests per 50 ms")
    ax.set_title("Completions", loc="left")
    legend_above(ax, ncol=2)
    mark(ax)

    ax = fig.add_subplot(gs[2, 0], sharex=ax)
    ts, ages = a["age"]
    tdplot.series(ax.plot(ts, ages, color=tdplot.PURPLE, lw=1.5,
                          label="age of the oldest command at the drive"), run.name, "oldest")
    ax.axhline(run.meta["timeout_ms"], color=tdplot.GREY, ls="--", lw=1,
               label=f"command_timeout_ms = {run.meta['timeout_ms']}")
    if a["hung"]:
        ax.axvline(a["hung"][0], color=tdplot.PURPLE, lw=1.2, ls=":", zorder=3)
        ax.annotate("inject hang", (a["hung"][0], 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-4, -3), textcoords="offset points", ha="right", va="top",
                    fontsize=9.5, color=tdplot.PURPLE, fontweight="bold")
    ax.set_ylim(0, max(run.meta["timeout_ms"], ages.max()) * 1.2)
    ax.set_ylabel("ms")
    ax.set_xlabel("time (s)")
    ax.set_title("The oldest command", loc="left")
    legend_above(ax, ncol=2)
    mark(ax)

    # Close-ups of the resets: the tags drop to 0 and come back.
    for i in range(2):
        ax = fig.add_subplot(gs[i, 1])
        if i >= len(bursts):
            ax.set_visible(False)
            continue
        t, nr = bursts[i]
        refill = a["refill_ms"][i] / 1e3
        lo, hi = t - 0.003, t + max(0.007, refill * 1.4 if refill == refill else 0)
        keep = (occ[:, 0] >= lo) & (occ[:, 0] <= hi)
        prev = occ[occ[:, 0] < lo]
        first = prev[-1] if len(prev) else occ[0]
        last = occ[occ[:, 0] <= hi][-1]
        tt = np.concatenate([[lo], occ[keep, 0], [hi]])
        d = np.concatenate([[first[1]], occ[keep, 1], [last[1]]])
        w = np.concatenate([[first[2]], occ[keep, 2], [last[2]]])
        stacked(ax, (tt - t) * 1e3, d, w, run, prefix=f"zoom{i}-")
        ax.axvline(0, color=tdplot.VERMILLION, lw=1.2, ls=":")
        ax.set_xlim((lo - t) * 1e3, (hi - t) * 1e3)
        ax.set_ylim(0, total.max() * 1.15)
        ax.set_xlabel(f"ms from the {names[i]}")
        ax.set_title(f"Close-up: {names[i]}\n{nr} requeued, tags refilled in "
                     f"{a['refill_ms'][i]:.1f} ms", loc="left", fontsize=10)

    ax = fig.add_subplot(gs[2, 1])
    ax.axis("off")
    rows = [("fio blocks written", run.fio_writes), ("verified (crc32c)", run.fio_reads),
            ("fio errors", run.fio_errors), ("bios queued / completed",
                                             f"{a['queued']} / {a['completed']}"),
            ("resets / timeouts", f"{run.stats['resets']} / {run.stats['timeouts']}"),
            ("requeued: R events / counter", f"{a['requeued']} / {run.stats['requeued']}"),
            ("errors (daemon)", run.stats["errors"])]
    ax.set_title("Nothing lost", loc="left")
    for k, (name, value) in enumerate(rows):
        y = 0.92 - k * 0.14
        ax.text(0.0, y, name, transform=ax.transAxes, fontsize=10, va="top")
        ax.text(1.0, y, str(value), transform=ax.transAxes, fontsize=10, va="top", ha="right",
                fontweight="bold")
    tdplot.save(fig, out, title, caption)
    return title, caption


# ---- main -------------------------------------------------------------------------------------

def check_reset(run, a):
    """What the reset picture claims, checked: a run that lost anything fails make plots
    rather than being drawn as "nothing lost"."""
    st = run.stats
    problems = []
    if len(a["bursts"]) != 2 or st["resets"] != 2 or st["timeouts"] != 1:
        problems.append(f"{len(a['bursts'])} requeue bursts in the trace, {st['resets']} "
                        f"resets and {st['timeouts']} timeouts counted (want 2, 2, 1)")
    if a["requeued"] != st["requeued"]:
        problems.append(f"{a['requeued']} R events, the daemon counted {st['requeued']}")
    said = [m["requeued"] for m in run.meta.get("marks", []) if m["what"] == "reset"]
    if a["bursts"] and said != [a["bursts"][0][1]]:
        problems.append(f"reset replied requeued {said}, the trace has "
                        f"{a['bursts'][0][1]} R events at that reset")
    if a["queued"] != a["completed"]:
        problems.append(f"{a['queued']} bios queued, {a['completed']} completed")
    if run.fio_errors or st["errors"] or run.fio_reads != run.fio_writes:
        problems.append(f"fio: {run.fio_writes} written, {run.fio_reads} verified, "
                        f"{run.fio_errors} errors; the daemon: {st['errors']} errors")
    if not a["hung"]:
        problems.append("no hung command found before the timeout reset")
    if problems:
        raise runs.RunError("the reset run: " + "; ".join(problems))


def write_captions(out, captions):
    with open(os.path.join(out, "captions.md"), "w") as f:
        f.write("# The pictures and their captions\n\n"
                "Written by `make plots` (tools/plots/plots.py) with the pictures, from the "
                "runs they were drawn from.\n")
        for name, (t, c) in captions.items():
            f.write(f"\n## {name}\n\n![{t}]({name})\n\n**{t}.** {c}\n")


def draw(work, out, bench, say):
    """Draw elevator.svg, tcq.svg and reset.svg into out from the runs kept in work, and
    bench.svg from the saved bench result bench (None: none)."""
    base = Run(os.path.join(work, "depth1"))
    dl = Run(os.path.join(work, "deadline"))
    d32 = Run(os.path.join(work, "depth32"))
    reset = Run(os.path.join(work, "reset"))
    check_reset(reset, reset_analysis(reset))
    captions = {}
    base.label = "noop"
    t, c = elevator_text(base, dl)
    compare_figure(base, dl, tdplot.VERMILLION, os.path.join(out, "elevator.svg"), t, c,
                   "in arrival order, back and forth", "sorted sweeps")
    captions["elevator.svg"] = (t, c)
    base.label = "tag depth 1"
    t, c = tcq_text(base, d32)
    compare_figure(base, d32, tdplot.GREEN, os.path.join(out, "tcq.svg"), t, c,
                   "one command at a time", "the nearest of 32 first")
    captions["tcq.svg"] = (t, c)
    captions["reset.svg"] = reset_figure(reset, os.path.join(out, "reset.svg"))
    if bench:
        saved = os.path.join(out, "bench.json")
        if os.path.abspath(bench) != os.path.abspath(saved):
            shutil.copyfile(bench, saved)
        with open(saved) as f:
            result = json.load(f)
        if result.get("format") != "tagdisk-bench 1":
            raise runs.RunError(f"{bench}: not a saved bench result")
        captions["bench.svg"] = bench_chart.draw(result, os.path.join(out, "bench.svg"))
    else:
        say("bench.svg: no saved bench result (make bench, then --bench "
            "build/bench/bench.json): not drawn")
    write_captions(out, captions)
    for name, (t, c) in captions.items():
        say(f"{name}: {t}. {c}")
    return captions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--out", default=os.environ.get("PLOTS_OUT", os.path.join(ROOT, "docs/img")))
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("PLOTS_SECONDS", 10)))
    ap.add_argument("--work", help="keep the runs here")
    ap.add_argument("--redraw", metavar="WORK", help="draw from the runs kept in WORK")
    ap.add_argument("--bench", metavar="RESULT.json",
                    help="the saved bench result to chart, copied to OUT/bench.json "
                    "(default: OUT/bench.json, when there is one)")
    a = ap.parse_args()

    def say(msg):
        print("plots: " + msg, flush=True)

    os.makedirs(a.out, exist_ok=True)
    bench = a.bench or os.path.join(a.out, "bench.json")
    if not os.path.exists(bench):
        if a.bench:
            sys.exit(f"plots: {a.bench}: no such file")
        bench = None
    if a.seconds < 2:
        sys.exit(f"plots: --seconds {a.seconds}: at least 2")
    try:
        if a.redraw:
            draw(a.redraw, a.out, bench, say)
            return 0
        build = os.path.abspath(a.build)
        for b in ("tagdiskd", "tagdiskctl"):
            if not os.access(os.path.join(build, b), os.X_OK):
                sys.exit(f"plots: {build}/{b} is missing (make all)")
        if not shutil.which("fio"):
            sys.exit("plots: needs fio (apt install fio)")
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
            sys.exit("plots: needs root and /dev/fuse")
        work = a.work or tempfile.mkdtemp(prefix="tagdisk-plots.")
        os.makedirs(work, exist_ok=True)
        try:
            for name in ("depth1", "deadline", "depth32"):
                runs.hdd_run(build, work, name, a.seconds, say)
            runs.reset_run(build, work, say)
            draw(work, a.out, bench, say)
        finally:
            if not a.work:
                shutil.rmtree(work, ignore_errors=True)
    except (OSError, ValueError, KeyError, runs.RunError, tdtrace.TraceError,
            subprocess.SubprocessError) as e:
        sys.exit(f"plots: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
