"""Figures for the notebooks (matplotlib), and saving them to PLOT_DIR.

Every function takes polars frames from the other modules and returns a Figure;
`save` writes it as PNG and SVG, so that CI can check the notebooks really drew.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

FORMATS = ("png", "svg")


def plot_dir() -> Path:
    """$PLOT_DIR, else plots/ in the working directory (created). A relative
    $PLOT_DIR is taken from where Jupyter was started (`$PWD`, which the kernel
    inherits; the kernel's working directory is the notebook's folder), as a
    headless run takes it from where it was run."""
    given = os.environ.get("PLOT_DIR")
    launched = os.environ.get("PWD")
    if given and not Path(given).is_absolute() and launched:
        d = Path(launched) / given
    else:
        d = Path(given or "plots")
    d.mkdir(parents=True, exist_ok=True)
    return d


def save(fig, name: str, directory: str | os.PathLike | None = None) -> list[Path]:
    """Writes `fig` as NAME.png and NAME.svg under `directory` (default: plot_dir())."""
    d = Path(directory) if directory is not None else plot_dir()
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in FORMATS:
        p = d / f"{name}.{ext}"
        fig.savefig(p, bbox_inches="tight", dpi=110)
        paths.append(p)
    return paths


def _short(label: str, width: int = 48) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _wrap(chain: str, width: int, max_lines: int) -> list[str]:
    """A chain of frames joined by ` < ` on lines of about `width` characters, broken
    between frames (a frame longer than a line is cut at its end). Past `max_lines`
    lines the middle gives way to `…`: the start and the end stay, where frames that
    tell sites apart are (a `via` chain starts with the frame where stacks part, and
    ends with the frames, or the `#n`, that tell apart the rest)."""
    lines: list[str] = []
    for frame in chain.split(" < "):
        frame = _short(frame, width - 4)
        if lines and len(lines[-1]) + 3 + len(frame) <= width:
            lines[-1] += " < " + frame
        elif lines:
            lines[-1] += " <"
            lines.append(frame)
        else:
            lines.append(frame)
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + ["… " + lines[-1]]
    return lines


#: Counts as plain thousands (12,345,678), never matplotlib's `1e6` offset.
THOUSANDS = FuncFormatter(lambda v, _: f"{int(round(v)):,}")


def _plain(axis) -> None:
    axis.set_major_formatter(THOUSANDS)


def site_label(name: str, callers: str, distinction: str = "", width: int = 90) -> str:
    """A site: its name and callers, then, in brackets, what tells it apart from sites
    that read the same (the analyzer's `distinction`), if anything does; each wrapped
    between frames on lines of about `width` characters, not cut (but past 2 and 4
    lines, in the middle), so that sites that differ get labels that differ."""
    text = name if not callers else f"{name} < {callers}"
    lines = _wrap(text, width, 2)
    if distinction:
        # The analyzer's parts: `via` frames outward, then `in` a frame inward and a
        # `#n` where those leave sites alike; the last two kept whole, on a line of
        # their own.
        via, *rest = re.split(r" (?=in |#\d)", distinction)
        if via.startswith(("in ", "#")):
            via, rest = "", [via, *rest]
        tail = " ".join(rest)
        parts = (_wrap(via, width, 4) if via else []) + ([_short(tail, width)] if tail else [])
        parts[0], parts[-1] = "[" + parts[0], parts[-1] + "]"
        lines += parts
    return "\n".join(lines)


#: Inches a line of a 7-point label takes.
LINE_IN = 0.125


def _label_rows(labels: list[str]) -> tuple[list[float], float]:
    """Where to put bars whose labels run over several lines: each row's centre and
    the rows' total extent, in lines from the top (at least 3)."""
    ys, top = [], 0.0
    for label in labels:
        pitch = max(label.count("\n") + 1, 2) + 0.8
        ys.append(top + pitch / 2)
        top += pitch
    return ys, max(top, 3.0)


def _category_colors(categories: list[str]) -> dict[str, str]:
    """One colour per category, in order of first appearance."""
    palette = plt.get_cmap("tab10").colors
    colors: dict[str, str] = {}
    for c in categories:
        if c not in colors:
            colors[c] = palette[len(colors) % len(palette)]
    return colors


def barh(df: pl.DataFrame, label: str, value: str, title: str, xlabel: str, color=None,
         signed: bool = False, err: str | None = None, notes=()):
    """Horizontal bars, first row on top; `signed`: green below zero (fewer), red above;
    `err`: a column of error bars (sampling's spread; nulls draw none); `notes` in red
    under the title, and in place of the bars when there are none."""
    fig, ax = plt.subplots(figsize=(11, 0.35 * max(df.height, 3) + 1.2))
    labels = [_short(str(v), 80) for v in df[label].to_list()]
    values = df[value].to_list()
    if signed:
        color = ["tab:green" if v < 0 else "tab:red" for v in values]
        ax.axvline(0, color="black", linewidth=0.6)
    errors = df[err].to_list() if err and err in df.columns else []
    ax.barh(range(df.height), values, color=color, **_xerr(errors))
    ax.set_yticks(range(df.height), labels)
    ax.invert_yaxis()
    _plain(ax.xaxis)
    _nothing_drawn(ax, df.height, notes)
    _notes(ax, title, notes)
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    return fig


def _xerr(errors: list) -> dict:
    """`barh` arguments for error bars of `errors` (None: none at that bar), or none
    when no bar has one."""
    if not any(e is not None for e in errors):
        return {}
    return {"xerr": [e or 0 for e in errors], "error_kw": {"linewidth": 0.8, "capsize": 2}}


def _nothing_drawn(ax, rows: int, notes) -> None:
    """With no rows, says so where the bars would be (and why, if `notes` say)."""
    if rows:
        return
    ax.set_xticks([])
    ax.set_yticks([])
    why = next((n for n in notes if n), None)
    ax.text(0.5, 0.5, textwrap.fill(f"nothing to draw: {why}" if why else "nothing to draw", 80),
            ha="center", va="center", transform=ax.transAxes)


def top_sites(top: pl.DataFrame, value: str, title: str, xlabel: str, notes=(),
              err: str | None = None):
    """The ranked sites as horizontal bars, first on top: each labelled by its name
    and callers, and below them by what tells it apart from sites that read the same
    (`site_label`); coloured by category, with a legend; error bars of the column
    `err` (for `count`, by default `alloc_count_noise`, where a report was sampled);
    `notes` in red under the title."""
    rows = list(top.iter_rows(named=True))
    labels = [site_label(r["name"], r["callers"], r.get("distinction") or "") for r in rows]
    ys, extent = _label_rows(labels)
    fig, ax = plt.subplots(figsize=(12, max(extent * LINE_IN, 1.5) + 1.6))
    # Rows without categories (`sites.top_sites`) are drawn in one colour, no legend.
    categories = [r.get("category") for r in rows]
    colors = _category_colors([c or "" for c in categories])
    err = err or ("alloc_count_noise" if value == "count" else None)
    errors = [r.get(err) for r in rows] if err else []
    ax.barh(ys, [r[value] for r in rows], height=1.6, color=[colors[c or ""] for c in categories],
            **_xerr(errors))
    ax.set_yticks(ys, labels, fontsize=7)
    if rows:
        ax.set_ylim(extent, 0)
    if any(categories):
        ax.legend(handles=[Patch(color=c, label=k) for k, c in colors.items()], fontsize=7,
                  loc="lower right", title="category", title_fontsize=7)
    _plain(ax.xaxis)
    _nothing_drawn(ax, len(rows), notes)
    _notes(ax, title, notes)
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    return fig


def site_deltas(deltas: pl.DataFrame, matched_share: float, title: str, limit: int = 20,
                low_share: float = 0.8, notes=()):
    """Per-site changes of the sites found in both reports (rows of
    compare.site_deltas with status `by path` or `ignoring lines`), largest first,
    green fewer and red more; the stacks found in one report only (`gone`, `new`) drawn
    apart, as two totals of allocations + reallocs (churn: the same code under other
    frames, or code the change added or removed), and a warning in the title when
    under `low_share` of the baseline's allocations matched; error bars where rows
    have a sampling `count_noise`, and `notes` in red under the title."""
    from allocprof.compare import GONE, NEW, changed_sites

    both = changed_sites(deltas, limit)
    removed = deltas.filter(pl.col("status") == GONE)
    added = deltas.filter(pl.col("status") == NEW)
    rows = list(both.iter_rows(named=True))
    labels = [f"{r['category']}: " + site_label(r["name"], r["callers"], r.get("distinction") or "", 80)
              for r in rows]
    ys, extent = _label_rows(labels)
    fig, (ax, bx) = plt.subplots(
        2, 1, figsize=(12, extent * LINE_IN + 4.2),
        gridspec_kw={"height_ratios": [max(extent * LINE_IN, 1.2), 1.4]},
    )
    values = [r["delta_count"] for r in rows]
    noise = [r.get("count_noise") for r in rows]
    ax.barh(ys, values, height=1.6, color=["tab:green" if v < 0 else "tab:red" for v in values],
            **_xerr(noise))
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_yticks(ys, labels, fontsize=7)
    ax.set_ylim(extent, 0)
    _plain(ax.xaxis)
    if not rows:
        ax.set_xlim(-1, 1)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no site found in both reports changed", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("change - baseline (allocations + reallocs), sites in both reports")
    # A baseline with no site here (a sampled one that sampled none of the phase)
    # matches nothing, and says nothing of the patch.
    base_sites = deltas.filter(pl.col("status") != NEW).height
    low = (
        f"only {matched_share:.0%} of the baseline's allocations + reallocs are at matched sites: "
        "the category totals are what to trust"
        if matched_share < low_share and base_sites else None
    )
    _notes(ax, f"{title}\nmatched sites: {matched_share:.0%} of the baseline's allocations + reallocs",
           [low, *notes])
    calls = lambda df, side: int(df[f"{side}_alloc_count"].sum() + df[f"{side}_realloc_count"].sum())  # noqa: E731
    churn_values = [-calls(removed, "base"), calls(added, "change")]
    bx.barh([0, 1], churn_values, color="tab:gray")
    bx.axvline(0, color="black", linewidth=0.6)
    bx.set_yticks([0, 1], [f"stacks only in the baseline ({removed.height})",
                           f"stacks only in the change ({added.height})"], fontsize=8)
    bx.invert_yaxis()
    _plain(bx.xaxis)
    bx.set_xlabel("allocations + reallocs at unmatched stacks (churn, not per-site change)")
    fig.tight_layout()
    return fig


def savings(results: pl.DataFrame, title: str, intervals: dict[str, tuple[str, str]]):
    """Predicted and measured saving per variant in ms, with their intervals (the
    predictions' range over calibrations, the measured median's 95 % interval) where
    the results have them; a bar whose interval includes zero is hatched and said to be
    no measurable change."""
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * results.height + 2.5), 4.2))
    series = [("predicted_saving_s", "predicted", "tab:blue"), ("measured_saving_s", "measured", "tab:orange")]
    width = 0.38
    hatched = False
    for i, (column, name, color) in enumerate(series):
        values = [v * 1e3 for v in results[column].to_list()]
        xs = [j + i * width for j in range(results.height)]
        low, high = intervals.get(column, (None, None))
        err = None
        zero = [False] * results.height
        if low in results.columns and high in results.columns:
            lows = [v * 1e3 for v in results[low].to_list()]
            highs = [v * 1e3 for v in results[high].to_list()]
            err = [[max(v - a, 0) for v, a in zip(values, lows)], [max(b - v, 0) for v, b in zip(values, highs)]]
            zero = [a <= 0 <= b for a, b in zip(lows, highs)]
        for x, v, z in zip(xs, values, zero):
            ax.bar(x, v, width=width, color="white" if z else color, edgecolor=color,
                   hatch="//" if z else None, linewidth=1.2)
            hatched |= z
        if err is not None:
            ax.errorbar(xs, values, yerr=err, fmt="none", ecolor="black", elinewidth=1, capsize=3)
    ax.set_xticks([j + width / 2 for j in range(results.height)], results["variant"].to_list())
    ax.axhline(0, color="black", linewidth=0.6)
    handles = [Patch(color=c, label=n) for _, n, c in series]
    if hatched:
        handles.append(Patch(facecolor="white", edgecolor="gray", hatch="//",
                             label="interval includes 0: no measurable change"))
    ax.legend(handles=handles, fontsize=8)
    ax.set_ylabel("saving per run (ms; above 0: faster)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def phases(phases_df: pl.DataFrame, title: str):
    """Allocations (reallocs apart) and wall time per phase, side by side."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.2))
    names = phases_df["phase"].to_list()
    a.bar(names, phases_df["alloc_count"].to_list(), color="tab:blue")
    a.set_title("allocations (reallocs not counted)")
    _plain(a.yaxis)
    b.bar(names, phases_df["wall_s"].to_list(), color="tab:gray")
    b.set_title("wall time (s; main: outside the named phases)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def size_classes(hist: pl.DataFrame, title: str):
    """Allocations per jemalloc size class (log scale: a few classes dominate; reallocs
    are not in size_classes.parquet)."""
    fig, ax = plt.subplots(figsize=(10, 3.5))
    labels = [str(v) for v in hist["size_class_bytes"].to_list()]
    ax.bar(labels, hist["alloc_count"].to_list(), color="tab:blue")
    ax.set_yscale("log")
    ax.set_xlabel("size class (bytes)")
    ax.set_ylabel("allocations (reallocs not counted)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    fig.tight_layout()
    return fig


def lifetimes(dist: pl.DataFrame, title: str, max_lines: int = 6, empty: str | None = None):
    """Followed blocks per lifetime bucket (log-log), one line per category if the
    frame has a category column (the `max_lines` categories with most blocks). With
    no block, the axes say `empty` (why: `overview.lifetimes_note`)."""
    fig, ax = plt.subplots(figsize=(9, 3.8))
    if not dist.height:
        ax.text(0.5, 0.5, empty or "no followed block freed", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(title)
        fig.tight_layout()
        return fig
    if "category" in dist.columns:
        biggest = (
            dist.group_by("category").agg(pl.col("freed_count").sum())
            .sort(["freed_count", "category"], descending=[True, False])
            .head(max_lines)["category"].to_list()
        )
        groups = {(c,): dist.filter(pl.col("category") == c) for c in biggest}
    else:
        groups = {("all",): dist}
    for key, g in groups.items():
        g = g.sort("lifetime_ns_low")
        mid = ((g["lifetime_ns_low"] + g["lifetime_ns_high"]) / 2).to_list()
        ax.plot(mid, g["freed_count"].to_list(), marker=".", label=_short(str(key[0]), 40))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("lifetime (ns)")
    ax.set_ylabel("followed blocks freed")
    ax.set_title(title)
    if len(groups) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _notes(ax, title: str, notes) -> None:
    """`title`, and under it in red each of `notes` (what a reader of the figure alone
    must know: the reports differ beyond a patch, the figures are estimates)."""
    notes = [n for n in notes if n]
    if not notes:
        ax.set_title(title)
        return
    wrapped = "\n".join(textwrap.fill(f"warning: {n}", 110) for n in notes)
    ax.set_title(f"{title}\n{wrapped}", color="tab:red", fontsize=9)


def waterfall(steps: pl.DataFrame, title: str, ylabel: str = "allocations + reallocs",
              notes=()):
    """Baseline total, one bar per category delta (green: fewer, red: more), change
    total (rows of compare.waterfall_steps; `ylabel` what they count: by default its
    measure `count`, allocations + reallocs), with error bars where steps have a
    sampling `noise`; `notes` in red under the title."""
    fig, ax = plt.subplots(figsize=(10, 4.2 + 0.3 * len([n for n in notes if n])))
    colors = [
        "tab:gray" if k == "total" else ("tab:green" if d < 0 else "tab:red")
        for k, d in zip(steps["kind"], steps["delta"])
    ]
    x = list(range(steps.height))
    starts, deltas = steps["start"].to_list(), steps["delta"].to_list()
    ax.bar(x, deltas, bottom=starts, color=colors)
    noise = steps["noise"].to_list() if "noise" in steps.columns else [None] * steps.height
    if any(n is not None for n in noise):
        # At each step's end, as far as sampling alone may move it.
        ends_x = [i for i, n in enumerate(noise) if n is not None]
        ax.errorbar(ends_x, [starts[i] + deltas[i] for i in ends_x],
                    yerr=[noise[i] for i in ends_x], fmt="none", ecolor="black", capsize=3,
                    linewidth=0.8)
    for i, (k, s, d) in enumerate(zip(steps["kind"], starts, deltas)):
        # Labels alternate in height, so that those of narrow neighbouring bars do
        # not run into each other.
        ax.annotate(f"{d:+,}" if k == "delta" else f"{d:,}", (i, s + d if d >= 0 else s),
                    textcoords="offset points", xytext=(0, 3 + 9 * (i % 2)), ha="center",
                    fontsize=8)
    # Deltas are often a few percent of the totals: zoom onto the range they span
    # (the total bars are cut, which the label says).
    ends = [s + d for s, d in zip(starts, deltas)]
    tops = [v for k, s, e in zip(steps["kind"], starts, ends) for v in ((e,) if k == "total" else (s, e))]
    lo, hi = min(tops), max(tops)
    pad = max((hi - lo) * 0.15, hi * 0.002, 1)
    if lo - pad > 0:
        ax.set_ylim(lo - pad, hi + pad)
        ylabel += " (axis not from 0)"
    ax.set_xticks(x, [_short(s, 28) for s in steps["label"].to_list()], rotation=30, ha="right")
    _plain(ax.yaxis)
    ax.set_ylabel(ylabel)
    _notes(ax, title, notes)
    fig.tight_layout()
    return fig


def predicted_vs_measured(results: pl.DataFrame, title: str):
    """One point per variant, predicted saving against measured, with the y = x line:
    points under it are over-predictions. Where the results carry intervals
    (`cost_model.INTERVAL_COLUMNS`), they are drawn as error bars: the predictions'
    range across calibrations (horizontal) and the measured median's 95 % interval
    (vertical)."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
    p = results["predicted_saving_s"].to_list()
    m = results["measured_saving_s"].to_list()
    lo = min(p + m + [0.0])
    hi = max(p + m + [0.0])

    def bars(column, values):
        low, high = (f"{column[:-2]}_low_s", f"{column[:-2]}_high_s")
        if low not in results.columns or high not in results.columns:
            return None
        lows, highs = results[low].to_list(), results[high].to_list()
        nonlocal lo, hi
        lo, hi = min([lo] + lows), max([hi] + highs)
        return [[v - a for v, a in zip(values, lows)], [b - v for v, b in zip(values, highs)]]

    ax.errorbar(p, m, xerr=bars("predicted_saving_s", p), yerr=bars("measured_saving_s", m),
                fmt="o", color="tab:blue", ecolor="tab:blue", elinewidth=1, capsize=3)
    pad = (hi - lo) * 0.1 or 1.0
    for v, x, y in zip(results["variant"].to_list(), p, m):
        # Labels of points in the right half go to their left, inside the axes.
        right = x > (lo + hi) / 2
        ax.annotate(v, (x, y), textcoords="offset points", xytext=(-4 if right else 4, 4),
                    ha="right" if right else "left", fontsize=8)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="tab:gray", linestyle="--")
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("predicted saving (s)")
    ax.set_ylabel("measured saving (s)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def timeline(tl: pl.DataFrame, spans: list[tuple[str, float, float]], peak: dict | None,
             title: str, highest_bytes: int | None = None):
    """Live MiB over time (`memory.timeline`) and resident MiB where the report
    sampled it, the phases shaded behind the lines (`memory.phase_spans`), the kept
    peak (the manifest's `heap_peak`) marked, and the run's highest live bytes
    (`highest_bytes`, the manifest's `totals.peak_live_bytes`) as a faint line: points
    taken every few milliseconds can miss a short rise."""
    fig, ax = plt.subplots(figsize=(11, 4))
    colors = _category_colors([p for p, _, _ in spans])
    seen = set()
    for phase, start, end in spans:
        ax.axvspan(start, end, color=colors[phase], alpha=0.15,
                   label=None if phase in seen else f"phase {phase}")
        seen.add(phase)
    ax.plot(tl["time_s"].to_list(), tl["live_mib"].to_list(), color="tab:blue",
            linewidth=1.6, label="live bytes")
    highest = highest_bytes / float(1 << 20) if highest_bytes and highest_bytes > 0 else None
    if highest is not None:
        ax.axhline(highest, color="tab:blue", alpha=0.4, linewidth=1,
                   label=f"highest live bytes {highest:,.1f} MiB (points can miss it)")
    rss = tl.drop_nulls("rss_mib")
    if rss.height:
        ax.plot(rss["time_s"].to_list(), rss["rss_mib"].to_list(), color="tab:orange",
                linewidth=1.6, label="resident set size")
    if peak:
        t, mib = peak["time_ns"] / 1e9, peak["live_bytes"] / float(1 << 20)
        ax.plot([t], [mib], "o", color="tab:red")
        # To a tenth of a MiB, as the highest live bytes' line; seconds to the
        # hundredth in a short run.
        when = f"{t:.2f}" if t < 10 else f"{t:.1f}"
        ax.annotate(f"kept peak {mib:,.1f} MiB at {when} s ({peak['phase']})", (t, mib),
                    textcoords="offset points", xytext=(-8, 6),
                    ha="right" if t > 0.5 * (tl["time_s"].max() or 0) else "left",
                    color="tab:red", fontsize=8)
    ax.set_xlabel("seconds after tracing started")
    ax.set_ylabel("MiB")
    _plain(ax.yaxis)
    top = max([*tl["live_mib"].to_list(), *rss["rss_mib"].to_list(),
               peak["live_bytes"] / float(1 << 20) if peak else 0, highest or 0, 1])
    ax.set_ylim(0, top * 1.15)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def per_row(scale: pl.DataFrame, title: str):
    """Allocations + reallocs per row and peak bytes per row (`memory.scale`), one bar
    per report, side by side; a report without a figure (no `rows` label, one that is
    not a number, no synthesize phase for the first, fewer rows than iterations for the
    second; a frame without `rows` reads as no label) gets no bar, and says why."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.4))
    labels = [_short(str(v), 28) for v in scale["report"].to_list()]
    rows = scale["rows"].to_list() if "rows" in scale.columns else [0] * scale.height

    def missing(otherwise: str) -> list[str]:
        """Why each report has no figure: its rows label, else `otherwise`."""
        return ["no rows label" if n == 0 else "rows label not a number" if n is None
                else otherwise for n in rows]

    for ax, column, color, why_not in (
        (a, "allocs_per_row", "tab:blue", missing("no synthesize phase")),
        # One iteration's rows, the label's over the iterations: none below one a run.
        (b, "peak_bytes_per_row", "tab:orange", missing("fewer rows than iterations")),
    ):
        values = scale[column].to_list()
        bars = ax.bar(labels, [0 if v is None else v for v in values], color=color)
        for bar, v, why in zip(bars, values, why_not):
            text = why if v is None else (f"{v:,.2f}" if v < 10 else f"{v:,.0f}")
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
    a.set_title("allocations + reallocs per row (synthesize)")
    b.set_title("peak live bytes per row")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
