"""allocprof names, categorises and keys sites with the analyzer's named-sites table
(`analyzer export --format parquet`), not with rules of its own: the columns it reads
agree with the analyzer's other commands on real reports."""

import math

import polars as pl
import pytest

import allocprof
from allocprof import analyzer as analyzer_module
from allocprof import sites

COLUMNS = [
    "site_id", "phase", "name", "callers", "distinction", "category", "category_index", "stack_key",
    "job_key", "job_callers", "job_distinction", "alloc_count", "realloc_count",
    "bytes_requested", "bytes_allocated", "temporary_count",
]
COUNTS = COLUMNS[11:]


def test_one_row_per_site_and_phase_with_the_reports_counts(any_report):
    table = any_report.named_sites
    assert table.columns == COLUMNS
    assert not table.select("site_id", "phase").is_duplicated().any()
    want = any_report.sites.group_by("site_id", "phase").agg(pl.col(c).sum() for c in COUNTS)
    got = table.select("site_id", "phase", *COUNTS)
    assert got.sort("site_id", "phase").equals(want.sort("site_id", "phase"))


def test_names_and_callers_are_tops(any_report, analyzer):
    theirs = analyzer("top", any_report.dir, "--limit", 1_000_000)
    labels = {
        row["site_id"]: (row["name"], row["callers"])
        for row in any_report.site_labels.iter_rows(named=True)
    }
    assert len(labels) == len(theirs) > 0
    for t in theirs:
        assert labels[t["site_id"]] == (t["name"], t["callers"]), t["site_id"]
    # Callers tell apart sites that share a name (a container's insert).
    assert any(callers for _, callers in labels.values())


@pytest.mark.parametrize("phase", [None, "synthesize"])
def test_category_totals_are_the_analyzers(any_report, analyzer, phase):
    args = ["categories", any_report.dir] + (["--phase", phase] if phase else [])
    theirs = [t for t in analyzer(*args) if t["sites"] > 0]
    mine = sites.category_totals(any_report, phase).drop("category_index").to_dicts()
    assert [m["category"] for m in mine] == [t["category"] for t in theirs]
    for m, t in zip(mine, theirs):
        assert math.isclose(m.pop("share"), t.pop("share"), rel_tol=1e-12, abs_tol=1e-15)
        # The analyzer may add fields (costs); every one computed here must agree.
        assert m == {k: t[k] for k in m}
    assert sum(t["alloc_count"] for t in theirs) > 0


def test_job_keys_are_the_ones_analyzer_diff_matches(any_report, analyzer, fixture_calibration):
    d = analyzer("diff", any_report.dir, any_report.dir, "--calibration", fixture_calibration)
    labels = any_report.site_labels
    assert d["sites_matched"] == labels["job_key"].n_unique()
    assert d["sites_gone"] == d["sites_new"] == 0
    # One line per frame: source lines, not addresses, so sites whose return addresses
    # differ but expand to the same lines share a key.
    frames = any_report.frames.group_by("site_id").len()
    lines = labels.select("site_id", n=pl.col("stack_key").str.count_matches("\n"))
    joined = frames.join(lines, on="site_id")
    assert joined.height == frames.height
    assert (joined["len"] == joined["n"]).all()


def test_rules_go_to_the_analyzer(report, analyzer, tmp_path, monkeypatch):
    rules = tmp_path / "mine.toml"
    rules.write_text(
        '[[category]]\nname = "with a source file"\nframes = [{ file = "src/" }]\n'
    )
    monkeypatch.setenv("ALLOC_CATEGORY_RULES", str(rules))
    mine = allocprof.load(report.dir)
    assert mine.rules == rules
    theirs = [t["category"] for t in analyzer("categories", report.dir, "--rules", rules)]
    assert sites.category_totals(mine)["category"].to_list() == [
        c for c in theirs if c in set(mine.site_labels["category"])
    ]
    assert "with a source file" in set(mine.site_labels["category"])

    rules.write_text('[[category]]\nnom = "x"\n')
    with pytest.raises(analyzer_module.AnalyzerError, match="mine.toml"):
        allocprof.load(report.dir).named_sites


def test_without_an_analyzer_the_error_says_where_to_point(report, monkeypatch):
    monkeypatch.setenv("ANALYZER", "/no/such/analyzer")
    with pytest.raises(analyzer_module.AnalyzerError, match="ANALYZER"):
        allocprof.load(report.dir).named_sites


def test_an_analyzer_that_cannot_answer_is_named(tmp_path, monkeypatch):
    """ANALYZER set to a folder, to a file that is not executable, or to a program that
    fails without a word: each an AnalyzerError naming it, not a bare OSError or
    "exit code 1"."""
    from allocprof import analyzer

    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 1\n")
    silent.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("")
    for given, said in [(tmp_path, "a folder"), (plain, "cannot be run"),
                        (silent, "info x --format json: exit code 1, nothing said")]:
        monkeypatch.setenv("ANALYZER", str(given))
        with pytest.raises(analyzer.AnalyzerError, match=said):
            analyzer.info("x")
