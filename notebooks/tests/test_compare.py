"""Comparing two reports."""

import json
import shutil

import polars as pl
import pytest

import allocprof
from allocprof import compare


def test_a_report_against_itself_changes_nothing(report):
    cat = compare.category_deltas(report, report)
    assert (cat["delta_alloc_count"] == 0).all() and (cat["delta_sites"] == 0).all()
    sd = compare.site_deltas(report, report, limit=None)
    assert (sd["status"] == "both").all()
    assert (sd["delta_count"] == 0).all()
    assert (compare.totals_deltas(report, report)["delta"] == 0).all()
    steps = compare.waterfall_steps(cat)
    assert steps["label"].to_list() == ["baseline", "change"]


def test_deltas_add_up_to_the_difference_of_totals(base_and_change, analyzer):
    base, change = base_and_change
    expected = int(change.sites["alloc_count"].sum()) - int(base.sites["alloc_count"].sum())
    cat = compare.category_deltas(base, change)
    assert cat["delta_alloc_count"].sum() == expected
    # The categories of either side, in the analyzer's order.
    order = [t["category"] for t in analyzer("categories", base.dir)]
    shown = cat["category"].to_list()
    assert shown == [c for c in order if c in shown]
    sd = compare.site_deltas(base, change, limit=None)
    assert sd["delta_alloc_count"].sum() == expected
    # Every site of each side counts in exactly one row, one row per stack key: the
    # rows' sums are the sides' totals, and a row is on the sides its status says.
    assert sd["key"].n_unique() == sd.height
    for side, r in (("base", base), ("change", change)):
        for m in ("alloc_count", "realloc_count", "temporary_count"):
            assert sd[f"{side}_{m}"].sum() == int(r.sites[m].sum()), (side, m)
    calls = {s: pl.col(f"{s}_alloc_count") + pl.col(f"{s}_realloc_count") for s in ("base", "change")}
    on_side = sd.select(
        "status", base=calls["base"] > 0, change=calls["change"] > 0
    ).unique().sort("status")
    for row in on_side.iter_rows(named=True):
        assert (row["base"], row["change"]) == {
            "both": (True, True), "removed": (True, False), "added": (False, True)
        }[row["status"]], row
    top = compare.site_deltas(base, change, limit=5)
    assert top.height == min(5, sd.height)
    assert top["name"].null_count() == 0
    deltas = top["delta_count"].abs().to_list()
    assert deltas == sorted(deltas, reverse=True)


def test_waterfall_steps_walk_from_base_to_change(base_and_change):
    base, change = base_and_change
    cat = compare.category_deltas(base, change)
    steps = compare.waterfall_steps(cat)
    first, last = steps.row(0, named=True), steps.row(-1, named=True)
    inner = steps.slice(1, steps.height - 2)
    assert first["delta"] + inner["delta"].sum() == last["delta"]
    if inner.height:
        final = inner.row(-1, named=True)
        assert final["start"] + final["delta"] == last["delta"]


def test_phase_deltas_cover_both_sides(base_and_change):
    base, change = base_and_change
    ph = compare.phase_deltas(base, change)
    assert set(ph["phase"]) == set(base.phases["phase"]) | set(change.phases["phase"])
    assert ph.filter(pl.col("phase") == "synthesize").height == 1


def test_category_counts_are_analyzer_diffs(base_and_change, analyzer, fixture_calibration):
    """A category's count (allocations and reallocs) on each side, and its delta, are
    those of `analyzer diff`'s category rows."""
    base, change = base_and_change
    d = analyzer("diff", base.dir, change.dir, "--calibration", fixture_calibration)
    want = {
        c["category"]: (c["base_alloc_count"], c["change_alloc_count"], c["delta_alloc_count"])
        for c in d["categories"]
    }
    cat = compare.category_deltas(base, change)
    got = {
        r["category"]: (r["base_count"], r["change_count"], r["delta_count"])
        for r in cat.iter_rows(named=True)
        if r["base_count"] or r["change_count"]
    }
    assert got == {k: v for k, v in want.items() if v[0] or v[1]}


def test_stacks_match_as_analyzer_diff_matches_them(base_and_change, analyzer, fixture_calibration):
    """The stacks found on both sides, by whole stack and with lines ignored, and the
    matched share, are those of `analyzer diff`."""
    base, change = base_and_change
    d = analyzer("diff", base.dir, change.dir, "--calibration", fixture_calibration)
    sd = compare.site_deltas(base, change, limit=None)
    both = sd.filter(pl.col("status") == "both").height
    assert both == d["sites_matched_by_path"]
    assert both > 0
    assert sd.filter(pl.col("status") == "moved").height == d["sites_matched_ignoring_lines"]
    assert compare.matched_share(sd) == pytest.approx(d["matched_alloc_share"], rel=1e-9)


def test_code_moved_within_its_file_matches_with_lines_ignored(
    report, tmp_path, analyzer, fixture_calibration
):
    """A change that only moved the code of one file down a line: its stacks through
    that file match the baseline's with lines ignored (`moved`, unchanged counts),
    every row as `analyzer diff` pairs them, and every allocation matched."""
    moved_dir = tmp_path / "moved"
    shutil.copytree(report.dir, moved_dir)
    frames = pl.read_parquet(moved_dir / "frames.parquet")
    own = frames.filter(~pl.col("file").str.starts_with("/rustc/"))
    file = own.group_by("file").agg(pl.col("site_id").n_unique()).sort("site_id").row(-1)[0]
    frames.with_columns(
        line=pl.when(pl.col("file") == file).then(pl.col("line") + 1).otherwise(pl.col("line"))
    ).write_parquet(moved_dir / "frames.parquet")
    d = analyzer("diff", report.dir, moved_dir, "--calibration", fixture_calibration)
    assert d["sites_matched_ignoring_lines"] > 0, file
    sd = compare.site_deltas(report, allocprof.load(moved_dir), limit=None)
    status = dict(sd.group_by("status").len().iter_rows())
    assert status.get("moved", 0) == d["sites_matched_ignoring_lines"]
    assert status.get("both", 0) == d["sites_matched_by_path"]
    assert status.get("removed", 0) == d["sites_gone"]
    assert status.get("added", 0) == d["sites_new"]
    matched = sd.filter(pl.col("status").is_in(compare.MATCHED))
    assert (matched["delta_count"] == 0).all()
    assert compare.matched_share(sd) == pytest.approx(d["matched_alloc_share"], rel=1e-9)
    assert compare.matched_share(sd) == 1.0


def test_a_count_report_is_refused(report, tmp_path):
    # As `analyzer diff`: it records no sites, so every site would read as added.
    count_dir = tmp_path / "count"
    shutil.copytree(report.dir, count_dir)
    manifest = json.loads((count_dir / "manifest.json").read_text())
    manifest["mode"] = "count"
    (count_dir / "manifest.json").write_text(json.dumps(manifest))
    count = allocprof.load(count_dir)
    for f in (compare.site_deltas, compare.category_deltas):
        with pytest.raises(ValueError, match="`count` mode"):
            f(count, report)
