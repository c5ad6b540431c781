"""Comparing two reports (a baseline and a change): per-phase, per-category and
per-site deltas.

Site ids are per report, so sites are matched by their source-level call stack
(`naming.stack_keys`): two reports of one build, or of builds whose frames did not
move, match site for site; a stack that exists on one side only is `removed` or
`added`. `key="name"` matches by site name instead (coarser, robust to line moves).
Deltas are change minus baseline: negative means the change allocates less.
"""

from __future__ import annotations

import polars as pl

from allocprof import categories, naming
from allocprof.report import Report
from allocprof.sites import site_totals

MEASURES = ("alloc_count", "realloc_count", "bytes_requested", "temporary_count")


def _delta_columns(measures) -> list[pl.Expr]:
    return [
        (pl.col(f"change_{m}").cast(pl.Int64) - pl.col(f"base_{m}").cast(pl.Int64)).alias(
            f"delta_{m}"
        )
        for m in measures
    ]


def totals_deltas(base: Report, change: Report) -> pl.DataFrame:
    """The manifests' totals side by side (measure, base, change, delta, ratio)."""
    b, c = base.manifest["totals"], change.manifest["totals"]
    keys = [k for k in b if k in c and isinstance(b[k], int)]
    df = pl.DataFrame(
        {"measure": keys, "base": [b[k] for k in keys], "change": [c[k] for k in keys]},
        schema={"measure": pl.String, "base": pl.Int64, "change": pl.Int64},
    )
    return df.with_columns(
        delta=pl.col("change") - pl.col("base"),
        ratio=pl.when(pl.col("base") != 0).then(pl.col("change") / pl.col("base")),
    )


def phase_deltas(base: Report, change: Report) -> pl.DataFrame:
    """Per phase: allocations, temporaries and wall time in both reports."""
    cols = ["alloc_count", "realloc_count", "temporary_count", "wall_ns"]

    def side(r: Report, prefix: str) -> pl.DataFrame:
        return r.phases.select("phase", *[pl.col(c).alias(f"{prefix}_{c}") for c in cols])

    out = side(base, "base").join(side(change, "change"), on="phase", how="full", coalesce=True)
    out = out.with_columns([pl.col(c).fill_null(0) for c in out.columns if c != "phase"])
    return out.with_columns(_delta_columns(cols))


def category_deltas(
    base: Report, change: Report, rules: list, phase: str | None = None
) -> pl.DataFrame:
    """Per category (rules order, then unmatched): both sides' totals and deltas."""
    cols = list(MEASURES) + ["sites"]

    def side(r: Report, prefix: str) -> pl.DataFrame:
        t = categories.category_totals(r, rules, phase)
        return t.select("category", *[pl.col(c).alias(f"{prefix}_{c}") for c in cols])

    b = side(base, "base").with_row_index("order")
    out = b.join(side(change, "change"), on="category", how="left").sort("order").drop("order")
    return out.with_columns(_delta_columns(cols))


def _keyed_sites(r: Report, rules: list, phase: str | None, key: str) -> pl.DataFrame:
    sites = categories.with_categories(r, site_totals(r, phase), rules)
    if key == "stack":
        keys = naming.stack_keys(r.annotated_frames).rename({"stack_key": "key"})
    elif key == "name":
        keys = naming.site_names(r.annotated_frames).rename({"name": "key"})
    else:
        raise ValueError(f"key must be 'stack' or 'name', not {key!r}")
    sites = sites.join(keys, on="site_id", how="left").with_columns(
        pl.col("key").fill_null(pl.format("(no frames) site {}", "site_id"))
    )
    return sites.group_by("key").agg(
        pl.col("site_id").min(),
        pl.col("category").first(),
        *[pl.col(m).sum() for m in MEASURES],
    )


def site_deltas(
    base: Report,
    change: Report,
    rules: list,
    phase: str | None = None,
    key: str = "stack",
    limit: int | None = 20,
) -> pl.DataFrame:
    """The sites whose allocations + reallocs changed most (by absolute delta), with
    both sides' figures, the category, a name and a status (both, removed, added)."""
    b = _keyed_sites(base, rules, phase, key)
    c = _keyed_sites(change, rules, phase, key)
    rename = lambda df, p: df.rename({x: f"{p}_{x}" for x in df.columns if x != "key"})  # noqa: E731
    out = rename(b, "base").join(rename(c, "change"), on="key", how="full", coalesce=True)
    out = (
        out.with_columns(
            status=pl.when(pl.col("base_site_id").is_null())
            .then(pl.lit("added"))
            .when(pl.col("change_site_id").is_null())
            .then(pl.lit("removed"))
            .otherwise(pl.lit("both")),
            category=pl.coalesce("base_category", "change_category"),
        )
        .with_columns([pl.col(f"{p}_{m}").fill_null(0) for p in ("base", "change") for m in MEASURES])
        .with_columns(_delta_columns(MEASURES))
        .with_columns(
            delta_count=pl.col("delta_alloc_count") + pl.col("delta_realloc_count")
        )
        .sort(
            [pl.col("delta_count").abs(), "key"], descending=[True, False]
        )
    )
    if limit is not None:
        out = out.head(limit)
    names_b = naming.site_names(base.annotated_frames, out["base_site_id"].drop_nulls().to_list())
    names_c = naming.site_names(change.annotated_frames, out["change_site_id"].drop_nulls().to_list())
    callers_b = naming.callers(base.annotated_frames, out["base_site_id"].drop_nulls().to_list())
    callers_c = naming.callers(change.annotated_frames, out["change_site_id"].drop_nulls().to_list())
    out = (
        out.join(names_b.rename({"site_id": "base_site_id", "name": "base_name"}), on="base_site_id", how="left")
        .join(names_c.rename({"site_id": "change_site_id", "name": "change_name"}), on="change_site_id", how="left")
        .join(callers_b.rename({"site_id": "base_site_id", "callers": "base_callers"}), on="base_site_id", how="left")
        .join(callers_c.rename({"site_id": "change_site_id", "callers": "change_callers"}), on="change_site_id", how="left")
        .with_columns(
            name=pl.coalesce("base_name", "change_name"),
            callers=pl.coalesce("base_callers", "change_callers"),
        )
    )
    return out.select(
        "name",
        "callers",
        "category",
        "status",
        "base_site_id",
        "change_site_id",
        "base_alloc_count",
        "change_alloc_count",
        "delta_count",
        "delta_alloc_count",
        "delta_realloc_count",
        "delta_bytes_requested",
        "delta_temporary_count",
        "key",
    )


def waterfall_steps(category_deltas_df: pl.DataFrame, measure: str = "alloc_count") -> pl.DataFrame:
    """Steps of a waterfall from the baseline total to the change's: one row per
    category with a non-zero delta (label, start, delta), between a `baseline` and a
    `change` bar."""
    base_total = int(category_deltas_df[f"base_{measure}"].sum())
    change_total = int(category_deltas_df[f"change_{measure}"].sum())
    steps = category_deltas_df.filter(pl.col(f"delta_{measure}") != 0).select(
        label="category", delta=pl.col(f"delta_{measure}")
    )
    starts = (steps["delta"].cum_sum() - steps["delta"] + base_total).to_list()
    rows = [("baseline", 0, base_total, "total")]
    rows += [(lbl, s, d, "delta") for lbl, s, d in zip(steps["label"], starts, steps["delta"])]
    rows.append(("change", 0, change_total, "total"))
    return pl.DataFrame(
        {
            "label": [r[0] for r in rows],
            "start": [r[1] for r in rows],
            "delta": [r[2] for r in rows],
            "kind": [r[3] for r in rows],
        },
        schema={"label": pl.String, "start": pl.Int64, "delta": pl.Int64, "kind": pl.String},
    )
