"""memory.scale against hand-made reports: one iteration's peak over one iteration's
rows, every iteration's allocations over every row."""

from pathlib import Path

import polars as pl

from allocprof.memory import scale
from allocprof.report import Report


def made(rows: int, iterations: int, allocs: int, peak: int) -> Report:
    r = Report(dir=Path(f"made-{iterations}"), manifest={
        "labels": {"rows": str(rows * iterations), "iterations": str(iterations)},
        "totals": {"peak_live_bytes": peak},
    })
    r._tables["phases"] = pl.DataFrame({
        "phase": ["synthesize"], "alloc_count": [allocs * iterations],
        "realloc_count": [0], "wall_ns": [10**9],
    })
    return r


def test_scale_is_per_row_whatever_the_iterations():
    once, thrice = scale([made(1000, 1, 5000, 190_000), made(1000, 3, 5000, 190_000)]).to_dicts()
    for key in ("allocs_per_row", "peak_bytes_per_row"):
        assert once[key] == thrice[key], key
    assert once["peak_bytes_per_row"] == 190.0
    assert once["allocs_per_row"] == 5.0
