"""Per-site totals and ranking, as `analyzer top` computes them (analyzer/src/rank/),
and per-category totals, as `analyzer categories` does. Sites are named and categorised
by the analyzer itself: these functions join its named-sites table
(`Report.site_labels`)."""

from __future__ import annotations

import polars as pl

from allocprof.report import Report, check_limit

#: What `top` ranks by: the analyzer's `--by count|bytes|temporaries`.
RANK_KEYS = {
    "count": pl.col("alloc_count") + pl.col("realloc_count"),
    "bytes": pl.col("bytes_requested"),
    "temporaries": pl.col("temporary_count"),
}


def noise_bound(report: Report, count: pl.Expr) -> pl.Expr:
    """How far sampling alone may put `count`, an estimate in a `sample:N` report,
    from the truth: two standard errors (N times the count its variance), rounded up,
    as the analyzer's `alloc_count_noise`; null in a report that records every
    allocation, and for a count of 0."""
    n = int(report.manifest.get("sample_interval") or 1)
    if n <= 1:
        return pl.lit(None, dtype=pl.UInt64)
    return bound_of_variance(count.cast(pl.Float64) * n)


#: The smallest size class `sample:N` records whole (the tracer's
#: `size_class::SAMPLE_ALL_FROM_BYTES`; a report that does says so in its manifest's
#: `sample_all_from_bytes`).
SAMPLE_ALL_FROM_BYTES = 256 * 1024


def records_whole(report: Report) -> bool:
    """True when `report` recorded the classes from `SAMPLE_ALL_FROM_BYTES` on whole
    (a `sample:N` report from a tracer that does)."""
    return report.manifest.get("sample_all_from_bytes") is not None


def row_sampled(report: Report) -> pl.Expr:
    """True for the site rows whose counts are sampled estimates (the analyzer's
    `Report::row_sampled`): a `sample:N` report's, but for the size classes it
    records whole (`sample_all_from_bytes` in its manifest), which are exact."""
    n = int(report.manifest.get("sample_interval") or 1)
    if n <= 1:
        return pl.lit(False)
    return pl.col("size_class_bytes") < SAMPLE_ALL_FROM_BYTES if records_whole(report) \
        else pl.lit(True)


def sampled_parts(report: Report) -> pl.DataFrame:
    """Per site and phase, the parts of its rows that sampling estimates
    (`row_sampled`), which the spreads come from: `sampled_calls` (allocations and
    reallocs), `sampled_temporaries` and `bytes_square_sum` (`square_bound`); and
    `small_calls`, those in the classes below `SAMPLE_ALL_FROM_BYTES` in any mode
    (what another report's sampling of these sites is measured against)."""
    calls = pl.col("alloc_count") + pl.col("realloc_count")
    sampled = row_sampled(report)
    return report.sites.group_by("site_id", "phase").agg(
        calls.filter(pl.col("size_class_bytes") < SAMPLE_ALL_FROM_BYTES).sum().cast(pl.UInt64)
        .alias("small_calls"),
        calls.filter(sampled).sum().cast(pl.UInt64).alias("sampled_calls"),
        pl.col("temporary_count").filter(sampled).sum().cast(pl.UInt64)
        .alias("sampled_temporaries"),
        square_bound(pl.col("bytes_requested"), pl.col("size_class_bytes"), calls)
        .filter(sampled)
        .sum()
        .alias("bytes_square_sum"),
    )


def _site_parts(report: Report, phase: str | None) -> pl.DataFrame:
    """`sampled_parts` summed per site, within `phase` if given."""
    parts = sampled_parts(report)
    if phase is not None:
        parts = parts.filter(pl.col("phase") == phase)
    return parts.group_by("site_id").agg(
        pl.col("sampled_calls", "sampled_temporaries", "bytes_square_sum").sum()
    )


def noise_or_none(report: Report, count: pl.Expr) -> pl.Expr:
    """`noise_bound` of the sampled part of an estimate, and where that part is 0 in a
    `sample:N` report what sampling may have missed: about 3N (the analyzer's
    `Report::count_or_none_noise`)."""
    n = int(report.manifest.get("sample_interval") or 1)
    if n <= 1:
        return pl.lit(None, dtype=pl.UInt64)
    return pl.when(count == 0).then(pl.lit(3 * n, dtype=pl.UInt64)).otherwise(
        noise_bound(report, count))


def square_bound(bytes_: pl.Expr, class_bytes: pl.Expr, calls: pl.Expr) -> pl.Expr:
    """One row's part of the sum of squared block sizes that a bytes estimate's
    spread comes from: its bytes times its class's size (no block is larger), or its
    mean request where that is larger (the analyzer's `sampling_noise::square_bound`)."""
    mean = pl.when(calls > 0).then(bytes_ // calls).otherwise(0)
    return bytes_.cast(pl.Float64) * pl.max_horizontal(class_bytes, mean).cast(pl.Float64)


def bytes_noise(report: Report, square_sum: pl.Expr) -> pl.Expr:
    """How far sampling alone may put a bytes estimate from the truth: two standard
    errors of N times `square_sum` (`square_bound` summed over its rows), as the
    analyzer's `bytes_requested_noise`; null in an exact report."""
    n = int(report.manifest.get("sample_interval") or 1)
    if n <= 1:
        return pl.lit(None, dtype=pl.UInt64)
    return bound_of_variance(square_sum * n)


def bound_of_variance(variance: pl.Expr) -> pl.Expr:
    """Two standard errors of a count whose sampling variance is `variance`, rounded
    up (null where it is 0: nothing sampled), as the analyzer's bounds."""
    return pl.when(variance > 0).then((2.0 * variance.sqrt()).ceil().cast(pl.UInt64))


def phase_names(report: Report) -> list[str]:
    """The phases the report names, in its order (`phases.parquet`), then any that
    only `sites.parquet` has: the analyzer's `phase_names`."""
    names = report.phases.sort("phase_id")["phase"].to_list()
    for p in report.sites["phase"].unique(maintain_order=True).to_list():
        if p not in names:
            names.append(p)
    return names


def check_phase(report: Report, phase: str | None) -> str | None:
    """`phase` itself when the report has it (or None); a phase the report does not
    name is refused with one line that lists its phases, as the analyzer's `--phase`
    is: a typo would otherwise read as an empty phase."""
    if phase is not None and phase not in (names := phase_names(report)):
        raise ValueError(f"{report.dir} has no phase {phase!r} (its phases: {', '.join(names)})")
    return phase


def _phase_rows(report: Report, phase: str | None) -> pl.DataFrame:
    """The site rows of `phase` (all if None; a phase the report lacks is refused)."""
    rows = report.sites
    if check_phase(report, phase) is None:
        return rows
    return rows.filter(pl.col("phase") == phase)


def site_totals(report: Report, phase: str | None = None) -> pl.DataFrame:
    """One row per site over the rows of `phase` (all phases if None): alloc_count,
    realloc_count, bytes_requested, bytes_allocated, temporary_count, temporary_share
    (temporaries / (allocations + reallocs)), share (of allocations + reallocs in the selection),
    main_size_class_bytes (the class with most allocations + reallocs over the
    phases, the smaller on ties) and lifetime_ns_median (of that class's largest row,
    the earliest on ties), and the parts of `sampled_parts`
    (sampled_calls, sampled_temporaries, bytes_square_sum). Not named: see
    `top_sites`."""
    rows = _phase_rows(report, phase).with_row_index("row").with_columns(
        n=pl.col("alloc_count") + pl.col("realloc_count")
    )
    # The main class, as rank/mod.rs picks it: most allocations + reallocs over the
    # phases, the smaller class on ties, none when a site has no allocation at all;
    # its lifetime is its largest row's (a median does not add up), the earliest on
    # ties.
    by_class = (
        rows.filter(pl.col("n") > 0)
        .sort(["site_id", "size_class_bytes", "n", "row"], descending=[False, False, True, False])
        .group_by(["site_id", "size_class_bytes"], maintain_order=True)
        .agg(total=pl.col("n").sum(), lifetime_ns_median=pl.col("lifetime_ns_median").first())
    )
    main = (
        by_class.sort(["site_id", "total", "size_class_bytes"], descending=[False, True, False])
        .group_by("site_id", maintain_order=True)
        .first()
        .select(
            "site_id",
            main_size_class_bytes="size_class_bytes",
            lifetime_ns_median="lifetime_ns_median",
        )
    )
    sums = rows.group_by("site_id").agg(
        pl.col("alloc_count").sum(),
        pl.col("realloc_count").sum(),
        pl.col("bytes_requested").sum(),
        pl.col("bytes_allocated").sum(),
        pl.col("temporary_count").sum(),
    )
    sums = sums.join(_site_parts(report, phase), on="site_id", how="left").with_columns(
        pl.col("sampled_calls", "sampled_temporaries").fill_null(0),
        pl.col("bytes_square_sum").fill_null(0.0),
    )
    total = (sums["alloc_count"].sum() or 0) + (sums["realloc_count"].sum() or 0)

    def ratio(a: pl.Expr, b: pl.Expr) -> pl.Expr:
        return pl.when(b == 0).then(0.0).otherwise(a / b)

    return (
        sums.join(main, on="site_id", how="left")
        .with_columns(pl.col("main_size_class_bytes").fill_null(0))
        .with_columns(
            temporary_share=ratio(
                pl.col("temporary_count"), pl.col("alloc_count") + pl.col("realloc_count")
            ),
            share=ratio(pl.col("alloc_count") + pl.col("realloc_count"), pl.lit(total)),
        )
        .sort("site_id")
    )


def top_sites(
    report: Report, by: str = "count", limit: int | None = 20, phase: str | None = None
) -> pl.DataFrame:
    """The sites ranked first by `by` (count, bytes or temporaries), ties by site id,
    with rank (from 1), name, callers and what tells apart sites that read the same
    (`distinction`): the rows of `analyzer top --format json`
    (`alloc_count_noise`, `bytes_requested_noise`, `temporary_count_noise`: the
    estimates' spread in a `sample:N` report)."""
    if by not in RANK_KEYS:
        raise ValueError(f"by must be one of {sorted(RANK_KEYS)}, not {by!r}")
    check_limit(limit)
    ranked = (
        site_totals(report, phase)
        .with_columns(key=RANK_KEYS[by])
        .sort(["key", "site_id"], descending=[True, False])
        .drop("key")
    )
    if limit is not None:
        ranked = ranked.head(limit)
    return (
        ranked.with_row_index("rank", offset=1)
        .join(report.site_labels, on="site_id", how="left")
        .select(
            "rank",
            "site_id",
            "name",
            "callers",
            "distinction",
            "alloc_count",
            "realloc_count",
            "bytes_requested",
            "bytes_allocated",
            "temporary_count",
            "temporary_share",
            "share",
            alloc_count_noise=noise_or_none(report, pl.col("sampled_calls")),
            main_size_class_bytes="main_size_class_bytes",
            lifetime_ns_median="lifetime_ns_median",
            bytes_requested_noise=bytes_noise(report, pl.col("bytes_square_sum")),
            temporary_count_noise=noise_or_none(report, pl.col("sampled_temporaries")),
        )
    )


def with_categories(report: Report, frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (any table with a site_id column) with the analyzer's `category`."""
    return frame.join(
        report.site_labels.select("site_id", "category"), on="site_id", how="left"
    )


def category_totals(report: Report, phase: str | None = None) -> pl.DataFrame:
    """Totals per category within `phase` if given (one the report lacks is refused),
    in the analyzer's order (its rules in order, then the unmatched): the rows of
    `analyzer categories --format json`, less the categories without sites (the
    analyzer lists those too); `alloc_count_noise`, `bytes_requested_noise`,
    `temporary_count_noise`: the estimates' spread in a `sample:N` report."""
    rows = report.named_sites
    if check_phase(report, phase) is not None:
        rows = rows.filter(pl.col("phase") == phase)
    # The named rows have no size class: each site's sampled parts from its rows in
    # the report's own table.
    squares = _site_parts(report, phase)
    per_site = (
        rows.group_by("site_id", "category", "category_index")
        .agg(
            pl.col("alloc_count").sum(),
            pl.col("realloc_count").sum(),
            pl.col("bytes_requested").sum(),
            pl.col("temporary_count").sum(),
        )
        .join(squares, on="site_id", how="left")
        .with_columns(n=pl.col("alloc_count") + pl.col("realloc_count"))
    )
    total = per_site["n"].sum() or 0
    # The biggest site of each category; ties go to the lower site id.
    top = (
        per_site.sort(["n", "site_id"], descending=[True, False])
        .group_by("category", maintain_order=True)
        .first()
        .join(report.site_labels.select("site_id", "name"), on="site_id", how="left")
        .select("category", top_site="name")
    )
    return (
        per_site.group_by("category", "category_index")
        .agg(
            pl.len().cast(pl.UInt64).alias("sites"),
            pl.col("alloc_count").sum(),
            pl.col("realloc_count").sum(),
            pl.col("bytes_requested").sum(),
            pl.col("temporary_count").sum(),
            pl.col("sampled_calls", "sampled_temporaries", "bytes_square_sum").sum(),
        )
        .join(top, on="category", how="left")
        .with_columns(
            share=(pl.col("alloc_count") + pl.col("realloc_count")) / total
            if total
            else pl.lit(0.0)
        )
        .sort("category_index")
        .select(
            "category",
            "category_index",
            "sites",
            "alloc_count",
            "realloc_count",
            "bytes_requested",
            "temporary_count",
            "share",
            alloc_count_noise=noise_or_none(report, pl.col("sampled_calls")),
            top_site="top_site",
            bytes_requested_noise=bytes_noise(report, pl.col("bytes_square_sum")),
            temporary_count_noise=noise_or_none(report, pl.col("sampled_temporaries")),
        )
    )
