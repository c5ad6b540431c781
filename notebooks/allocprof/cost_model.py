"""The cost model checked against measurements: predicted vs measured savings per
variant, from the results of `scripts/cost-model-check.py`.

That script writes OUT/results.csv, one row per variant, with the columns in
RESULT_COLUMNS (savings and medians in seconds; `runs`: the measured runs behind the
medians), the INTERVAL_COLUMNS when it wrote them (the range of the predictions over
the session's calibrations, and a 95 % interval of the measured median, or with
fewer than 6 runs their range), and
OUT/reports/<variant>/, a report directory per variant.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from allocprof import report as report_module

RESULT_COLUMNS = {
    "variant": pl.String,
    "predicted_saving_s": pl.Float64,
    "measured_saving_s": pl.Float64,
    "baseline_median_s": pl.Float64,
    "variant_median_s": pl.Float64,
    "runs": pl.Int64,
}


# Optional: (low, high) column pairs around predicted_saving_s and measured_saving_s.
INTERVAL_COLUMNS = {
    "predicted_saving_s": ("predicted_saving_low_s", "predicted_saving_high_s"),
    "measured_saving_s": ("measured_saving_low_s", "measured_saving_high_s"),
}


class ResultsError(Exception):
    """A results file without the expected columns."""


def load_results(path: str | os.PathLike) -> pl.DataFrame:
    """results.csv, checked: the RESULT_COLUMNS (in that order), then the
    INTERVAL_COLUMNS pairs that the file has (both of a pair, or neither); other
    columns are left out. One row per variant, no empty values."""
    path = Path(path)
    if not path.is_file():
        where = "" if path.is_absolute() else f" (a relative path, taken from {Path.cwd()})"
        raise ResultsError(
            f"{path}: no such file{where}: scripts/cost-model-check.py writes results.csv "
            "in its --out folder"
        )
    df = pl.read_csv(path)
    missing = [c for c in RESULT_COLUMNS if c not in df.columns]
    if missing:
        raise ResultsError(f"{path}: no column {missing}, expected {list(RESULT_COLUMNS)}")
    intervals = [c for pair in INTERVAL_COLUMNS.values() if all(x in df.columns for x in pair)
                 for c in pair]
    try:
        df = df.select([pl.col(c).cast(t) for c, t in RESULT_COLUMNS.items()]
                       + [pl.col(c).cast(pl.Float64) for c in intervals])
    except pl.exceptions.InvalidOperationError as e:
        raise ResultsError(f"{path}: {e}") from None
    nulls = [c for c in df.columns if df[c].null_count()]
    if nulls:
        raise ResultsError(f"{path}: empty values in {nulls}")
    if df["variant"].n_unique() != df.height:
        raise ResultsError(f"{path}: a variant appears twice")
    return df


def with_errors(results: pl.DataFrame) -> pl.DataFrame:
    """Adds the prediction error (predicted - measured, seconds), the measured saving
    as a share of the baseline median, and measured / predicted (null when nothing
    was predicted)."""
    return results.with_columns(
        error_s=pl.col("predicted_saving_s") - pl.col("measured_saving_s"),
        measured_saving_share=pl.when(pl.col("baseline_median_s") != 0).then(
            pl.col("measured_saving_s") / pl.col("baseline_median_s")
        ),
        predicted_saving_share=pl.when(pl.col("baseline_median_s") != 0).then(
            pl.col("predicted_saving_s") / pl.col("baseline_median_s")
        ),
        measured_over_predicted=pl.when(pl.col("predicted_saving_s") != 0).then(
            pl.col("measured_saving_s") / pl.col("predicted_saving_s")
        ),
    )


def variant_reports(results_path: str | os.PathLike) -> dict[str, Path]:
    """variant -> report directory, for the variants under reports/ beside the results
    file that hold a report (a baseline report too, when there is one)."""
    root = Path(results_path).parent / "reports"
    if not root.is_dir():
        return {}
    return {d.name: d for d in sorted(root.iterdir()) if (d / "manifest.json").is_file()}


def allocation_totals(reports: dict[str, Path]) -> pl.DataFrame:
    """Per variant: the manifest's totals, `count` being allocations + reallocs (what
    results.csv's baseline_alloc_count and variant_alloc_count count, as `analyzer
    diff` does). Exact in every traced mode but for temporaries: not counted in
    `count` mode, estimated in `sample:N`."""
    rows = []
    for variant, path in reports.items():
        t = report_module.load(path).manifest["totals"]
        rows.append(
            {
                "variant": variant,
                "count": t["alloc_count"] + t["realloc_count"],
                "alloc_count": t["alloc_count"],
                "realloc_count": t["realloc_count"],
                "temporary_count": t["temporary_count"],
                "bytes_requested": t["bytes_requested"],
            }
        )
    schema = {"variant": pl.String, "count": pl.Int64, "alloc_count": pl.Int64, "realloc_count": pl.Int64,
              "temporary_count": pl.Int64, "bytes_requested": pl.Int64}
    return pl.DataFrame(rows, schema=schema)
