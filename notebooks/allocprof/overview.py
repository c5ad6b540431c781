"""Tables for the overview of one report: totals, phases, size classes, lifetimes,
temporaries."""

from __future__ import annotations

import warnings

import polars as pl

from allocprof import analyzer
from allocprof.report import Report
from allocprof.sites import category_totals, check_phase, top_sites, with_categories


def temporaries_counted(report: Report) -> str:
    """How the report counts temporaries (docs/report-schema.md), by the mode its
    stacks were recorded in (`Report.stacks_mode`, whatever the mode when it was
    written): `exact` in `sites` mode, `estimated` in `sample:N` (the sampled ones
    times N), `not counted` where no stack was (`count` mode: its temporary_count is 0
    whatever the program did)."""
    if report.count_only:
        return "not counted"
    if report.sampled:
        return "estimated"
    return "exact"


def temporaries_note(report: Report) -> str | None:
    """One line on the report's temporaries where they are not exact, or cover part
    of the run, else None."""
    how = temporaries_counted(report)
    if how == "not counted":
        return "temporaries: not counted in count mode (the report's 0 says nothing)"
    without = _without_stacks(report)
    if how == "estimated":
        return (f"temporaries: estimated in {report.stacks_mode} mode (each sampled one counts "
                f"{report.sample_weight_words()}), as every per-site figure is{without}")
    return f"temporaries: counted with the stacks only{without}" if without else None


def _without_stacks(report: Report) -> str:
    """`; N allocations ... in no site` where the run counted part of itself in `count`
    mode (`Report.allocs_without_stacks`), else empty."""
    n = report.allocs_without_stacks
    if not n:
        return ""
    t = report.manifest.get("totals") or {}
    calls = (t.get("alloc_count") or 0) + (t.get("realloc_count") or 0)
    return (f"; {n} allocations and reallocs ({100 * n / max(calls, 1):.1f} % of the run's) "
            "were counted in count mode, with no stack: no site holds them")


def sites_note(report: Report, error_bars: bool = True) -> str | None:
    """What every per-site figure of the report must say, else None: a report that
    recorded no stack (`count` mode, or switched from it to `off`) has no sites; a
    `sample:N` report's are estimates (`error_bars`: the figure draws their spread);
    a run that counted part of itself in `count` mode has that part in no site."""
    mode = report.manifest.get("mode") or ""
    if report.count_only:
        if mode != "count":
            return (f"the report records allocations but no sites (mode {mode} when written, "
                    "after count mode), so there are no sites, categories or temporaries "
                    "to show (trace with sites or sample:N)")
        return ("count mode records no sites, so there are no sites, categories or "
                "temporaries to show (trace with sites or sample:N)")
    without = _without_stacks(report)
    if report.sampled:
        spread = ("; the `_noise` columns and the error bars are two standard errors of sampling "
                  "alone") if error_bars else ""
        return (f"estimates from sampled stacks ({report.stacks_mode}: each recorded "
                f"allocation counts {report.sample_weight_words()}){spread}{without}")
    if report.manifest.get("stack_weights_changed"):
        # Written in `sites` after `sample:N`: part of the counts are estimates.
        return ("the mode switched during the run between sites and sample:N: the sites "
                f"recorded in sample:N are estimates, with no spread drawn{without}")
    return without.removeprefix("; ") or None


#: The columns of `analyzer cost`'s category rows, for an answer without any.
COST_CATEGORY_SCHEMA = {
    "category": pl.String, "sites": pl.Int64, "alloc_count": pl.Int64, "realloc_count": pl.Int64,
    "direct_s": pl.Float64, "indirect_s": pl.Float64, "total_s": pl.Float64,
    "phase_share": pl.Float64, "alloc_count_noise": pl.Int64,
}

#: The columns of `analyzer cost`'s site rows, for an answer without any (a phase in
#: which a `sample:N` report sampled nothing).
COST_SITE_SCHEMA = {
    "rank": pl.Int64, "site_id": pl.Int64, "name": pl.String, "callers": pl.String,
    "distinction": pl.String, "category": pl.String, "alloc_count": pl.Int64,
    "realloc_count": pl.Int64, "temporary_count": pl.Int64, "direct_s": pl.Float64,
    "indirect_s": pl.Float64, "total_s": pl.Float64, "phase_share": pl.Float64,
    "alloc_count_noise": pl.Int64,
}


def _rows(rows: list[dict], schema: dict) -> pl.DataFrame:
    """`rows` as a frame; without any, an empty one with the columns of `schema`."""
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame(schema=schema)


def costs(report: Report, phase: str | None = None, limit: int = 20):
    """What the allocations cost in seconds, as `analyzer cost` prices them (its
    calibration of this machine; docs/cost-model.md): the answer's totals (dict:
    `total_s`, `direct_s`, `indirect_s`, `phase_wall_s`, and `notes`, what the analyzer
    said of its answer, such as why nothing was priced), its categories with sites and
    its `limit` costliest sites (with `saves_ms`, what removing one would save; both
    keep their columns when empty). None for a report that recorded no stack (a
    `count` report), which has no sites to price."""
    if report.count_only:
        return None
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        answer = analyzer.cost(report.dir, phase, limit, report.rules)
    saves = (pl.col("total_s") * 1e3).alias("saves_ms")
    sites = _rows(answer["sites"], COST_SITE_SCHEMA).with_columns(saves)
    cats = _rows(answer["categories"], COST_CATEGORY_SCHEMA).filter(pl.col("sites") > 0).with_columns(saves)
    totals = {k: answer.get(k) for k in ("total_s", "direct_s", "indirect_s", "phase_wall_s")}
    totals["notes"] = [str(w.message) for w in said]
    return totals, cats, sites


def totals(report: Report) -> pl.DataFrame:
    """The manifest's run metadata and totals as (key, value) rows, values as text.
    Totals are exact in every traced mode but for temporaries: `not counted` in
    `count` mode, marked `(estimated ...)` in `sample:N`."""
    m = report.manifest
    rows = [
        ("command_line", " ".join(m.get("command_line", []))),
        ("mode", m.get("mode")),
        ("stacks_mode", report.stacks_mode),
        ("allocator", m.get("allocator") or "not named"),
        ("host / cpu / cores", f"{m.get('host')} / {m.get('cpu')} / {m.get('cores')}"),
        ("duration_s", f"{m.get('duration_s', 0):.3f}"),
        ("threads", m.get("threads")),
    ]
    how = temporaries_counted(report)

    def total(k, v):
        if k != "temporary_count" or how == "exact":
            return v
        if how == "not counted":
            return "not counted (count mode)"
        return f"{v} (estimated: each sampled one counts {report.sample_weight_words()})"

    rows += [(f"totals.{k}", total(k, v)) for k, v in m.get("totals", {}).items()]
    rows += [(f"dropped.{k}", v) for k, v in m.get("dropped", {}).items()]
    for k, v in m.get("tracer", {}).items():
        # `memory_parts` is an object: one row a part.
        parts = v.items() if isinstance(v, dict) else []
        rows += [(f"tracer.{k}.{p}", n) for p, n in parts] or [(f"tracer.{k}", v)]
    return pl.DataFrame(
        {"key": [k for k, _ in rows], "value": [str(v) for _, v in rows]}
    )


def phases(report: Report) -> pl.DataFrame:
    """phases.parquet with wall time in seconds (`main`: outside the named phases),
    allocations and reallocs per second of the phase, and the temporaries' share of
    its allocations and reallocs, as the analyzer counts them. In `count` mode, which
    does not count temporaries (its tables hold 0), temporary_count and
    temporary_share are null."""
    counted = not report.count_only
    # Wall times as `analyzer info` gives them: `main`'s is the run's time outside the
    # named phases (the tracer does not time it).
    walls = pl.DataFrame(
        [(p["phase"], p["wall_s"]) for p in analyzer.info(report.dir)["phases"]],
        schema={"phase": pl.String, "wall_s": pl.Float64}, orient="row",
    )
    calls = pl.col("alloc_count") + pl.col("realloc_count")
    return report.phases.join(walls, on="phase", how="left").with_columns(
        allocs_per_s=pl.when(pl.col("wall_s") > 0)
        .then(calls / pl.col("wall_s"))
        .otherwise(None),
        temporary_share=pl.when(pl.lit(counted) & (calls > 0))
        .then(pl.col("temporary_count") / calls)
        .otherwise(pl.lit(0.0 if counted else None, dtype=pl.Float64)),
        temporary_count=pl.col("temporary_count") if counted else pl.lit(None, dtype=pl.UInt64),
    ).sort("phase_id")


def size_class_histogram(report: Report, phase: str | None = None) -> pl.DataFrame:
    """Allocations per jemalloc size class (size_classes.parquet, exact in every
    mode), with each class's share, smallest class first."""
    rows = report.size_classes
    if check_phase(report, phase) is not None:
        rows = rows.filter(pl.col("phase") == phase)
    out = rows.group_by("size_class_bytes").agg(pl.col("alloc_count").sum())
    total = out["alloc_count"].sum() or 0
    return out.with_columns(
        share=pl.col("alloc_count") / total if total else pl.lit(0.0)
    ).sort("size_class_bytes")


def lifetime_distribution(
    report: Report, phase: str | None = None, by_category: bool = False
) -> pl.DataFrame:
    """Followed blocks freed per lifetime bucket (lifetimes.parquet: raw counts of
    followed blocks, not scaled). With `by_category`, one row per (category, bucket),
    categories as the analyzer gives them."""
    rows = report.lifetimes
    if check_phase(report, phase) is not None:
        rows = rows.filter(pl.col("phase") == phase)
    keys = ["lifetime_ns_low", "lifetime_ns_high"]
    if by_category:
        rows = with_categories(report, rows)
        keys = ["category", *keys]
    return rows.group_by(keys).agg(pl.col("freed_count").sum()).sort(keys)


def lifetimes_note(report: Report, distribution: pl.DataFrame) -> str | None:
    """Why a lifetime distribution (`lifetime_distribution`) is empty, in one line;
    None when it is not."""
    if distribution.height and distribution["freed_count"].sum():
        return None
    m = report.manifest
    if report.count_only:
        return "no lifetimes: count mode follows no blocks to their free"
    if not m.get("lifetime_interval"):
        return "no lifetimes: no block was followed to its free (lifetime_interval 0, e.g. --lifetimes 0)"
    return "no lifetimes: no followed block was freed (in this phase) before the report"


def top_sites_table(report: Report, phase: str | None = None, limit: int = 20) -> pl.DataFrame:
    """The sites with most allocations + reallocs (`sites.top_sites` by count), with
    `count` (allocations + reallocs), the category and the `distinction` that tells
    apart sites whose name and callers read the same."""
    top = with_categories(report, top_sites(report, by="count", limit=limit, phase=phase))
    return top.with_columns(count=pl.col("alloc_count") + pl.col("realloc_count")).select(
        "rank", "site_id", "name", "callers", "distinction", "category", "count",
        "alloc_count_noise", "alloc_count", "realloc_count", "share", "temporary_share",
        "main_size_class_bytes", "lifetime_ns_median",
    )


def lifetime_quantiles(distribution: pl.DataFrame) -> pl.DataFrame:
    """Per category of a lifetime distribution by category: followed blocks freed,
    and the upper bounds of the buckets holding the median and the 90th percentile."""
    rows = [
        {
            "category": c,
            "followed_freed": int(g["freed_count"].sum()),
            "p50_ns_at_most": lifetime_quantile_ns(g, 0.5),
            "p90_ns_at_most": lifetime_quantile_ns(g, 0.9),
        }
        for (c,), g in distribution.partition_by("category", as_dict=True, maintain_order=True).items()
    ] if distribution.height else []
    return pl.DataFrame(rows, schema={"category": pl.String, "followed_freed": pl.Int64,
                                      "p50_ns_at_most": pl.Int64, "p90_ns_at_most": pl.Int64})


def lifetime_quantile_ns(distribution: pl.DataFrame, q: float) -> int | None:
    """The upper bound of the bucket holding quantile `q` of a lifetime distribution
    (rows of one category or of all: bucket bounds and freed_count)."""
    d = (
        distribution.group_by("lifetime_ns_low", "lifetime_ns_high")
        .agg(pl.col("freed_count").sum())
        .sort("lifetime_ns_low")
    )
    total = d["freed_count"].sum()
    if not total:
        return None
    cumulative = d["freed_count"].cum_sum()
    index = (cumulative >= q * total).arg_true()[0]
    return int(d["lifetime_ns_high"][index])


def temporaries(
    report: Report, phase: str | None = None, limit: int = 10
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Temporaries (blocks freed before their thread's next allocation) per category
    (with `temporary_count_noise`, their spread in a `sample:N` report), and the
    `limit` sites with most of them (named, with their callers, what tells
    apart those that read the same, and their category)."""
    calls = pl.col("alloc_count") + pl.col("realloc_count")
    per_category = category_totals(report, phase).select(
        "category",
        "alloc_count",
        "realloc_count",
        "temporary_count",
        # Of allocations and reallocs, as `analyzer top --group-by category`.
        temporary_share=pl.when(calls > 0).then(pl.col("temporary_count") / calls).otherwise(0.0),
        temporary_count_noise="temporary_count_noise",
    )
    top = top_sites(report, by="temporaries", limit=limit, phase=phase)
    top = with_categories(report, top).select(
        "rank", "site_id", "name", "callers", "distinction", "category", "alloc_count",
        "temporary_count", "temporary_share", "main_size_class_bytes", "lifetime_ns_median",
    )
    return per_category, top
