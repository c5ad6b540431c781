"""memory.scale against hand-made reports: one iteration's peak over one iteration's
rows, every iteration's allocations over every row."""

from pathlib import Path

import polars as pl

from allocprof.memory import scale, timeline
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


def with_timeline(columns: dict) -> Report:
    r = Report(dir=Path("made-timeline"), manifest={})
    r._tables["timeline"] = pl.DataFrame(columns)
    return r


def test_timeline_reads_resident_memory_where_sampled():
    base = {"time_ns": [20_000_000, 10_000_000], "phase": ["a", "a"],
            "live_bytes": [1 << 20, 2 << 20], "alloc_count": [2, 1],
            "bytes_allocated": [2, 1]}
    # In time order; 0 is unknown (no /proc), not "nothing resident".
    tl = timeline(with_timeline({**base, "rss_bytes": [0, 3 << 20]}))
    assert tl["time_s"].to_list() == [0.01, 0.02]
    assert tl["rss_mib"].to_list() == [3.0, None]
    # Reports written before the column existed.
    tl = timeline(with_timeline(base))
    assert tl["rss_mib"].null_count() == 2
