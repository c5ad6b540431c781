"""Memory: live bytes over time, what holds the peak (heap sampling's estimates, named
and categorised by the analyzer), and how allocations and memory scale with the
number of rows synthesized.
"""

from __future__ import annotations

import polars as pl

from allocprof import analyzer
from allocprof.report import Report, check_limit

GIB = float(1 << 30)
MIB = float(1 << 20)
# Standard errors in a ±, as the analyzer prints it (about a 95 % interval).
SIGMAS = 2.0


def timeline(report: Report) -> pl.DataFrame:
    """The timeline with seconds and MiB: time_s, phase, live_mib, alloc_count,
    bytes_allocated, rss_mib (the process's resident memory; null in reports written
    before the tracer sampled it, and where it was unknown)."""
    tl = report.timeline.sort("time_ns")
    rss = (pl.when(pl.col("rss_bytes") > 0).then(pl.col("rss_bytes") / MIB)
           if "rss_bytes" in tl.columns else pl.lit(None, dtype=pl.Float64))
    return tl.with_columns(
        (pl.col("time_ns") / 1e9).alias("time_s"),
        (pl.col("live_bytes") / MIB).alias("live_mib"),
        rss.alias("rss_mib"),
    ).select("time_s", "phase", "live_mib", "alloc_count", "bytes_allocated", "rss_mib")


def timeline_note(report: Report) -> str | None:
    """Why there is no timeline to draw, in one line (no table: an older tracer; an
    empty one: sampling off), else None."""
    if (why := report.absent("timeline")) is not None:
        return f"{report.label}: {why}"
    if report.timeline.height == 0:
        return (f"{report.label}: the timeline is empty (timeline_interval_ms "
                f"{report.manifest.get('timeline_interval_ms', 0)}: not sampled)")
    return None


def timeline_phases(report: Report) -> pl.DataFrame | None:
    """Per run of one phase in the timeline (consecutive points, as `phase_spans`: a
    phase entered once per iteration has a row per iteration), in order: phase,
    from_s and to_s (its first and last points), max_live_mib and max_rss_mib (the
    highest of its points, which, every `timeline_interval_ms`, can miss a short
    rise), and peak_live_mib: the highest live bytes while the phase was the innermost
    in force, over all its runs, from `phases.parquet`, exact to within the manifest's
    `totals.peak_live_bytes_error_bytes` (null in reports written before it was kept). None
    without a timeline (`timeline_note` says why)."""
    if timeline_note(report) is not None:
        return None
    run = (pl.col("phase") != pl.col("phase").shift()).fill_null(True).cum_sum().alias("run")
    out = timeline(report).group_by(run, maintain_order=True).agg(
        pl.col("phase").first(),
        pl.col("time_s").min().alias("from_s"), pl.col("time_s").max().alias("to_s"),
        pl.col("live_mib").max().alias("max_live_mib"), pl.col("rss_mib").max().alias("max_rss_mib"),
    ).drop("run")
    phases = report.phases
    peak = (pl.col("peak_live_bytes") / MIB if "peak_live_bytes" in phases.columns
            else pl.lit(None, dtype=pl.Float64))
    return out.join(phases.select("phase", peak.alias("peak_live_mib")), on="phase",
                    how="left", maintain_order="left")


def phase_spans(tl: pl.DataFrame) -> list[tuple[str, float, float]]:
    """Consecutive runs of one phase in the timeline, as (phase, start_s, end_s)."""
    spans: list[list] = []
    for phase, t in zip(tl["phase"].to_list(), tl["time_s"].to_list()):
        if spans and spans[-1][0] == phase:
            spans[-1][2] = t
        else:
            if spans:
                spans[-1][2] = t
            spans.append([phase, t, t])
    return [tuple(s) for s in spans]


def held(report: Report, moment: str = "peak") -> dict:
    """What holds memory at the kept peak ("peak") or at the end ("end"): the
    analyzer's answer (`analyzer peak|leaks --format json`), in the report's category
    rules."""
    return analyzer.held(report.dir, moment, report.rules)


def _size(n: float) -> str:
    return f"{n / GIB:,.2f} GiB" if n >= GIB else f"{n / MIB:,.1f} MiB"


def _seconds(t: float) -> str:
    return f"{t:.2f} s" if t >= 1 else f"{t * 1e3:.2f} ms"


def peak_note(report: Report, h: dict) -> str:
    """One line on the kept peak of a `held(report)` answer: where and when, and how
    much of it heap sampling's estimates account for; or why there are no sites to
    show: a report without a heap_peak table (an older tracer), one with no peak
    kept (live bytes never reached 1 MiB, or, where the run went higher, a tracer
    from before it kept one), or heap sampling off while the peak was kept. And
    when heap sampling came on part-way through the run, that blocks allocated
    before are left out. The words are `analyzer peak`'s."""
    run = (report.manifest.get("totals") or {}).get("peak_live_bytes")
    if (why := report.absent("heap_peak")) is not None:
        highest = f"; the run's highest live bytes: {_size(run)}" if run else ""
        return f"{report.label}: {why}: no sites to show at the peak{highest}"
    if h.get("live_bytes") is None:
        # A tracer keeps a peak once live bytes pass 1 MiB.
        if run and run >= MIB:
            return (f"{report.label}: no peak kept (the run reached {_size(run)} live, but "
                    "the tracer that wrote this report kept no peak moment)")
        return f"{report.label}: no peak kept (live bytes never reached 1 MiB)"
    line = (f"{report.label}: kept peak {_size(h['live_bytes'])} at {_seconds(h['time_s'])} "
            f"({h['phase']})")
    if not h.get("heap_interval") and not h.get("estimated_bytes"):
        return line + "; heap sampling was off, so no sites hold sampled memory"
    se = h.get("estimated_bytes_se")
    # Two standard errors, as the analyzer's ± (about a 95 % interval).
    spread = f" ± {SIGMAS * se / h['live_bytes']:.1%}" if se else ""
    late = ("; it came on part-way through the run, and blocks allocated before are left out"
            if h.get("heap_started_late") else "")
    # Each block is weighted by its own interval; the ± comes from the rows' spread.
    changed = ("; heap sampling ran at intervals that changed during the run"
               if h.get("heap_intervals_changed") else "")
    return (line + f"; the estimates add up to {h['estimated_bytes'] / h['live_bytes']:.1%}"
            f"{spread} of it{late}{changed}")


def end_note(report: Report, at_end: pl.DataFrame) -> str | None:
    """Why `at_end` (`held_sites` of `held(report, "end")`) has no sites, in one line:
    no heap_end table (an older tracer), heap sampling off, or no sampled block live at
    the end; with sites, what they leave out where heap sampling came on part-way
    through the run (as `analyzer leaks` says), else None."""
    if (why := report.absent("heap_end")) is not None:
        return f"{report.label}: {why}"
    if not at_end.is_empty():
        if report.manifest.get("heap_sampling_started_late"):
            return (f"{report.label}: heap sampling came on part-way through the run, and "
                    "blocks allocated before are left out")
        return None
    end = (report.manifest.get("totals") or {}).get("live_bytes_end")
    if not report.manifest.get("heap_interval"):
        return (f"{report.label}: heap sampling was off, so no sites hold sampled memory at the "
                f"end (live_bytes_end {end})")
    return (f"{report.label}: no block heap sampling sampled was live at the end (it samples one byte in "
            f"{report.manifest['heap_interval']}: smaller leaks can go unseen; live_bytes_end {end})")


def held_categories(h: dict) -> pl.DataFrame:
    """Categories of a `held` answer, largest first: category, live_mib, share,
    se_mib, the estimate's standard error (0 where exact), and bound_mib, twice it:
    how far heap sampling alone may put the estimate (about a 95 % interval; the
    analyzer's ±)."""
    return pl.DataFrame(
        h["categories"], schema={"category": pl.String, "live_bytes": pl.UInt64,
                                 "share": pl.Float64, "sites": pl.UInt64,
                                 "live_bytes_se": pl.UInt64}
    ).with_columns(
        (pl.col("live_bytes") / MIB).alias("live_mib"),
        (pl.col("live_bytes_se").fill_null(0) / MIB).alias("se_mib"),
    ).with_columns((SIGMAS * pl.col("se_mib")).alias("bound_mib"))


def held_sites(h: dict, limit: int = 15) -> pl.DataFrame:
    """The largest sites of a `held` answer: name, callers, distinction, category,
    live_mib, se_mib (the estimate's standard error), bound_mib (twice it, as
    `held_categories`), share, sampled_count."""
    rows = h["sites"][:check_limit(limit)]
    if not rows:
        return pl.DataFrame(schema={"name": pl.String, "callers": pl.String,
                                    "distinction": pl.String, "category": pl.String,
                                    "live_mib": pl.Float64, "se_mib": pl.Float64,
                                    "bound_mib": pl.Float64, "share": pl.Float64,
                                    "sampled_count": pl.UInt64})
    df = pl.DataFrame(rows, infer_schema_length=None)
    se = pl.col("live_bytes_se").fill_null(0) if "live_bytes_se" in df.columns else pl.lit(0)
    return df.with_columns(
        (pl.col("live_bytes") / MIB).alias("live_mib"),
        (se / MIB).cast(pl.Float64).alias("se_mib"),
    ).with_columns((SIGMAS * pl.col("se_mib")).alias("bound_mib")).select(
        "name", "callers", "distinction", "category", "live_mib", "se_mib", "bound_mib",
        "share", "sampled_count")


def scale_note(scaled: pl.DataFrame, phase: str = "synthesize") -> str | None:
    """Which reports of a `scale` table have nothing per row, in one line: no `rows`
    label (synth-driver records one), a `rows` or `iterations` label that is not a
    whole number, or (with rows) no phase `phase` to count allocations in; and which
    were written before their run finished, whose figures per row read high; None
    when every one has its figures."""
    rows, allocs = pl.col("rows"), pl.col("allocs")
    parts = [
        (rows == 0, "no `rows` label (synth-driver records one)", "no figures per row"),
        (rows.is_null(), "a `rows` or `iterations` label that is not a whole number",
         "no figures per row"),
        ((rows > 0) & allocs.is_null(), f"no `{phase}` phase", "no allocations per row"),
        (pl.col("incomplete").is_not_null() & (rows > 0),
         "a report written before its run finished",
         "its counts include the iteration under way, which its `rows` label does not "
         "count, so its figures per row read high"),
    ]
    lines = [
        f"{what} in {', '.join(missing)}: {so}"
        for where, what, so in parts
        if (missing := scaled.filter(where)["report"].to_list())
    ]
    return "; ".join(lines) or None


def _whole(labels: dict, key: str, default: int) -> int | None:
    """Label `key` as a whole number (`default` where it is absent); None where it is
    not one."""
    value = labels.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def scale(reports: list[Report], phase: str = "synthesize") -> pl.DataFrame:
    """One row per report: the rows it synthesized (its `rows` label, over all its
    iterations; 0 without one, null where it or `iterations` is not a whole number),
    allocations in `phase` (null where the report has no such phase), peak live
    bytes, and both per row: allocations over every row, the peak over one
    iteration's rows (each iteration's circuit is freed before the next, so the peak
    is one iteration's), and why the report was written before its run finished
    (`incomplete`, null for one that finished). `scale_note` says which reports lack
    figures, or have them high, and why."""
    out = []
    for r in reports:
        m = r.manifest
        labels = m.get("labels") or {}
        rows, iterations = _whole(labels, "rows", 0), _whole(labels, "iterations", 1)
        if iterations is None:
            rows = None
        rows_once = rows // max(iterations, 1) if rows else 0
        ph = r.phases.filter(pl.col("phase") == phase)
        allocs = int(ph["alloc_count"].sum() + ph["realloc_count"].sum()) if ph.height else None
        peak = int(m["totals"]["peak_live_bytes"])
        out.append({
            "report": r.label,
            "circuit": labels.get("circuit", ""),
            "rows": rows,
            "allocs": allocs,
            "peak_gib": peak / GIB,
            "allocs_per_row": allocs / rows if rows and allocs is not None else None,
            "peak_bytes_per_row": peak / rows_once if rows_once else None,
            "synthesis_s": float(ph["wall_ns"].sum()) / 1e9 if ph.height else None,
            "incomplete": m.get("incomplete"),
        })
    return pl.DataFrame(out, schema={
        "report": pl.String, "circuit": pl.String, "rows": pl.Int64, "allocs": pl.Int64,
        "peak_gib": pl.Float64, "allocs_per_row": pl.Float64, "peak_bytes_per_row": pl.Float64,
        "synthesis_s": pl.Float64, "incomplete": pl.String,
    })
