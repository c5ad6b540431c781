"""Comparing two reports."""

import polars as pl

from allocprof import categories, compare
from allocprof.sites import site_totals


def test_a_report_against_itself_changes_nothing(report):
    rules = categories.load_rules()
    cat = compare.category_deltas(report, report, rules)
    assert (cat["delta_alloc_count"] == 0).all() and (cat["delta_sites"] == 0).all()
    sd = compare.site_deltas(report, report, rules, limit=None)
    assert (sd["status"] == "both").all()
    assert (sd["delta_count"] == 0).all()
    assert (compare.totals_deltas(report, report)["delta"] == 0).all()
    steps = compare.waterfall_steps(cat)
    assert steps["label"].to_list() == ["baseline", "change"]


def test_deltas_add_up_to_the_difference_of_totals(base_and_change):
    base, change = base_and_change
    rules = categories.load_rules()
    expected = int(change.sites["alloc_count"].sum()) - int(base.sites["alloc_count"].sum())
    cat = compare.category_deltas(base, change, rules)
    assert cat["delta_alloc_count"].sum() == expected
    assert cat["category"].to_list()[-1] == categories.UNMATCHED
    sd = compare.site_deltas(base, change, rules, limit=None)
    assert sd["delta_alloc_count"].sum() == expected
    # Every site of each side is in exactly one row.
    assert sd["base_site_id"].drop_nulls().n_unique() <= site_totals(base).height
    assert set(sd["status"]) <= {"both", "added", "removed"}
    top = compare.site_deltas(base, change, rules, limit=5)
    assert top.height == min(5, sd.height)
    assert top["name"].null_count() == 0
    deltas = top["delta_count"].abs().to_list()
    assert deltas == sorted(deltas, reverse=True)


def test_waterfall_steps_walk_from_base_to_change(base_and_change):
    base, change = base_and_change
    cat = compare.category_deltas(base, change, categories.load_rules())
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
