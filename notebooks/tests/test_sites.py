"""Per-site totals and ranking equal `analyzer top --format json`, field by field."""

import math

import pytest

from allocprof.sites import phase_names, site_totals, top_sites
from reports import edited_copy


def same(mine: dict, theirs: dict):
    """Every field this package computes equals the analyzer's (which may have more:
    costs, from its calibration)."""
    assert mine.keys() <= theirs.keys()
    for k in mine:
        v = theirs[k]
        if isinstance(v, float):
            assert math.isclose(mine[k], v, rel_tol=1e-12, abs_tol=1e-15), k
        else:
            assert mine[k] == v, (k, mine, theirs)


@pytest.mark.parametrize("by", ["count", "bytes", "temporaries"])
def test_top_equals_the_analyzers(any_report, analyzer, by):
    theirs = analyzer("top", any_report.dir, "--by", by, "--limit", 50)
    mine = top_sites(any_report, by=by, limit=50).to_dicts()
    assert len(mine) == len(theirs) > 0
    for m, t in zip(mine, theirs):
        same(m, t)


def test_top_within_a_phase(report, analyzer):
    phase = "synthesize"
    theirs = analyzer("top", report.dir, "--phase", phase, "--limit", 30)
    mine = top_sites(report, limit=30, phase=phase).to_dicts()
    assert len(mine) == len(theirs) > 0
    for m, t in zip(mine, theirs):
        same(m, t)


def test_a_phase_named_with_control_characters_reads_as_the_analyzers(report, analyzer, tmp_path):
    """The analyzer escapes the control characters and backslashes of a report's
    text as it reads it (`\\n`, `\\u{1b}`, `\\\\`); so does this package, so that
    such a phase is the same name in both, and its rows are found by it."""
    odd = edited_copy(report, tmp_path / "odd", rename_phase=("synthesize", "synth\x1b[31m\nes\\ize"))
    escaped = "synth\\u{1b}[31m\\nes\\\\ize"
    assert escaped in phase_names(odd)
    theirs = analyzer("top", odd.dir, "--phase", escaped, "--limit", 30)
    mine = top_sites(odd, limit=30, phase=escaped).to_dicts()
    assert len(mine) == len(theirs) > 0
    for m, t in zip(mine, theirs):
        same(m, t)


def test_site_totals_add_up_to_the_table(any_report):
    totals = site_totals(any_report)
    assert totals["alloc_count"].sum() == any_report.sites["alloc_count"].sum()
    assert totals["site_id"].n_unique() == totals.height
    assert math.isclose(totals["share"].sum(), 1.0)


def test_unknown_ranking_is_refused(report):
    with pytest.raises(ValueError):
        top_sites(report, by="speed")


def test_a_negative_limit_is_refused(report):
    # As `analyzer top --limit -1`: polars' head(-1) would drop the last row instead.
    with pytest.raises(ValueError, match="limit must be a number of rows"):
        top_sites(report, limit=-1)
    assert top_sites(report, limit=0).height == 0
    # A number of rows from numpy is a number of rows.
    import numpy
    assert top_sites(report, limit=numpy.int64(2)).height == 2


def test_a_phase_the_report_does_not_name_is_refused(report):
    # As the analyzer's --phase: a typo must not read as an empty phase.
    with pytest.raises(ValueError, match="no phase 'Synthesize'"):
        top_sites(report, phase="Synthesize")


def test_a_sampled_reports_spread_is_the_analyzers(report, analyzer, tmp_path):
    """In a `sample:N` report every count is an estimate: its two-standard-error
    spread, per site and per category, is the analyzer's `alloc_count_noise`, and
    those of its bytes and temporaries the analyzer's too."""
    from reports import edited_copy

    from allocprof.sites import category_totals

    assert top_sites(report, limit=5)["alloc_count_noise"].null_count() == 5
    sampled = edited_copy(report, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    mine = top_sites(sampled, limit=20).to_dicts()
    theirs = analyzer("top", sampled.dir, "--limit", 20)
    assert all(m["alloc_count_noise"] for m in mine)
    noises = ("alloc_count_noise", "bytes_requested_noise", "temporary_count_noise")
    for key in noises:
        assert [m[key] for m in mine] == [t[key] for t in theirs], key
    assert all(m["bytes_requested_noise"] for m in mine)
    for key in noises:
        cats = {c["category"]: c[key] for c in category_totals(sampled).to_dicts()}
        want = {t["category"]: t[key] for t in analyzer("categories", sampled.dir)
                if t["sites"] > 0}
        assert cats == want and all(cats.values()), key
