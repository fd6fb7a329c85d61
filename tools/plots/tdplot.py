# SPDX-License-Identifier: GPL-2.0-or-later
"""What every picture shares: matplotlib set up for files (no display), one look, the
colours of the runs, and saving.

Every series a picture draws carries an SVG id, `series-RUN-WHAT` (series()), and the
picture's caption goes into the SVG's metadata as its description as well as under its
title, so a test can check what a picture holds without comparing pixels
(tests/bats/blktrace_plots.bats) and a reader of the file sees the numbers it was drawn with.
"""
import os
import re
import textwrap

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams.update({
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "svg.hashsalt": "tagdisk",  # the same data gives the same file
    "svg.fonttype": "path",  # text as outlines: it looks the same in every viewer
})

# Okabe-Ito: told apart with any colour vision, and in grey.
BLUE, ORANGE, GREEN, VERMILLION = "#0072B2", "#E69F00", "#009E73", "#D55E00"
SKY, PURPLE, YELLOW, GREY = "#56B4E9", "#CC79A7", "#F0E442", "#666666"


def series(artist, run, what):
    """Name a drawn series in the SVG: <g id="series-RUN-WHAT">, or for a series drawn as
    several artists (bars) series-RUN-WHAT.0, .1, ... (ids are unique in a file)."""
    gid = "series-" + re.sub(r"[^A-Za-z0-9_-]+", "_", f"{run}-{what}")
    parts = list(artist) if isinstance(artist, (list, tuple)) else [artist]
    for i, a in enumerate(parts):
        a.set_gid(gid if len(parts) == 1 else f"{gid}.{i}")
    return artist


def wrap(caption, width_chars=155):
    return textwrap.wrap(caption, width_chars)


def header(fig, title, caption, panel_title_lines=2):
    """The title, and the caption wrapped under it. Return the top of the area left for the
    panels (a figure fraction), below the panels' own titles of panel_title_lines lines."""
    h = fig.get_figheight()
    lines = wrap(caption)
    fig.text(0.01, 1 - 0.12 / h, title, ha="left", va="top", fontsize=15, fontweight="bold")
    fig.text(0.01, 1 - 0.47 / h, "\n".join(lines), ha="left", va="top", fontsize=10.5,
             color="#222222", linespacing=1.35)
    used = 0.47 + 0.197 * len(lines) + 0.12 + 0.2 * panel_title_lines + 0.1
    return 1 - used / h


def save(fig, path, title, caption):
    """Write fig to path (.svg) with title and caption in its metadata; also a PNG beside it
    when TD_PLOTS_PNG is set (for looking at it)."""
    tmp = path + ".tmp"
    fig.savefig(tmp, format="svg", metadata={"Title": title, "Description": caption,
                                             "Date": None, "Creator": "tagdisk tools/plots"})
    os.replace(tmp, path)
    os.chmod(path, 0o644)
    if os.environ.get("TD_PLOTS_PNG"):
        fig.savefig(os.path.splitext(path)[0] + ".png", format="png", dpi=100)
    plt.close(fig)
