"""Memory: live bytes over time, what holds the peak (heap sampling's estimates, named
and categorised by the analyzer), and how allocations and memory scale with the
number of rows synthesized.
"""

from __future__ import annotations

import polars as pl

from allocprof import analyzer
from allocprof.report import Report

GIB = float(1 << 30)
MIB = float(1 << 20)


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
    analyzer's answer (`analyzer peak|leaks --format json`)."""
    return analyzer.held(report.dir, moment)


def held_categories(h: dict) -> pl.DataFrame:
    """Categories of a `held` answer, largest first: category, live_mib, share."""
    return pl.DataFrame(
        h["categories"], schema={"category": pl.String, "live_bytes": pl.UInt64,
                                 "share": pl.Float64, "sites": pl.UInt64}
    ).with_columns((pl.col("live_bytes") / MIB).alias("live_mib"))


def held_sites(h: dict, limit: int = 15) -> pl.DataFrame:
    """The largest sites of a `held` answer: name, callers, distinction, category,
    live_mib, share, sampled_count."""
    rows = h["sites"][:limit]
    if not rows:
        return pl.DataFrame(schema={"name": pl.String, "callers": pl.String,
                                    "distinction": pl.String, "category": pl.String,
                                    "live_mib": pl.Float64, "share": pl.Float64,
                                    "sampled_count": pl.UInt64})
    return pl.DataFrame(rows).with_columns(
        (pl.col("live_bytes") / MIB).alias("live_mib")
    ).select("name", "callers", "distinction", "category", "live_mib", "share",
             "sampled_count")


def scale(reports: list[Report], phase: str = "synthesize") -> pl.DataFrame:
    """One row per report: the rows it synthesized (its `rows` label, over all its
    iterations), allocations in `phase`, peak live bytes, and both per row: allocations
    over every row, the peak over one iteration's rows (each iteration's circuit is
    freed before the next, so the peak is one iteration's)."""
    out = []
    for r in reports:
        m = r.manifest
        labels = m.get("labels", {})
        rows = int(labels.get("rows", 0))
        rows_once = rows // max(int(labels.get("iterations", 1)), 1)
        ph = r.phases.filter(pl.col("phase") == phase)
        allocs = int(ph["alloc_count"].sum() + ph["realloc_count"].sum()) if ph.height else 0
        peak = int(m["totals"]["peak_live_bytes"])
        out.append({
            "report": r.label,
            "circuit": m.get("labels", {}).get("circuit", ""),
            "rows": rows,
            "allocs": allocs,
            "peak_gib": peak / GIB,
            "allocs_per_row": allocs / rows if rows else None,
            "peak_bytes_per_row": peak / rows_once if rows_once else None,
            "synthesis_s": float(ph["wall_ns"].sum()) / 1e9 if ph.height else None,
        })
    return pl.DataFrame(out)
