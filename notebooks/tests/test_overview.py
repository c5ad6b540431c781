"""The overview's tables agree with each other and with the manifest."""

import warnings
from pathlib import Path

import polars as pl
import pytest

import allocprof
from allocprof import overview, sites
from allocprof.sites import site_totals
from reports import edited_copy

#: A real count report: a whole 32 GiB partition's, traced in `count` mode.
COUNT_REPORT = Path(__file__).resolve().parents[1] / "data" / "porep-32g-count"


def test_size_classes_add_up_to_the_manifest(any_report):
    hist = overview.size_class_histogram(any_report)
    assert hist["alloc_count"].sum() == any_report.manifest["totals"]["alloc_count"]
    assert hist["size_class_bytes"].is_sorted()
    assert abs(hist["share"].sum() - 1) < 1e-9
    synth = overview.size_class_histogram(any_report, "synthesize")
    assert synth["alloc_count"].sum() == any_report.phases.filter(
        pl.col("phase") == "synthesize"
    )["alloc_count"].sum()


def test_phases_keep_every_phase(any_report):
    ph = overview.phases(any_report)
    assert ph["alloc_count"].sum() == any_report.manifest["totals"]["alloc_count"]
    assert ph["phase"][0] == "main"
    assert (ph["wall_s"] >= 0).all()


def test_lifetimes_per_category_add_up(any_report):
    total = any_report.lifetimes["freed_count"].sum()
    assert overview.lifetime_distribution(any_report)["freed_count"].sum() == total
    per_category = overview.lifetime_distribution(any_report, by_category=True)
    assert per_category["freed_count"].sum() == total
    # Every followed site has the analyzer's category.
    assert per_category["category"].null_count() == 0
    assert set(per_category["category"]) <= set(any_report.named_sites["category"])


def test_lifetime_quantiles():
    d = pl.DataFrame(
        {"lifetime_ns_low": [100, 200, 400], "lifetime_ns_high": [199, 399, 799],
         "freed_count": [50, 40, 10]}
    )
    assert overview.lifetime_quantile_ns(d, 0.5) == 199
    assert overview.lifetime_quantile_ns(d, 0.51) == 399
    assert overview.lifetime_quantile_ns(d, 0.95) == 799
    assert overview.lifetime_quantile_ns(d.clear(), 0.5) is None


def test_temporaries_per_category_add_up(any_report):
    per_category, top = overview.temporaries(any_report, limit=5)
    assert per_category["temporary_count"].sum() == site_totals(any_report)["temporary_count"].sum()
    assert top.height == 5
    counts = top["temporary_count"].to_list()
    assert counts == sorted(counts, reverse=True)


def test_totals_show_the_manifest(any_report):
    t = dict(overview.totals(any_report).iter_rows())
    assert t["mode"] == any_report.manifest["mode"]
    assert t["totals.alloc_count"] == str(any_report.manifest["totals"]["alloc_count"])
    # The tracer's memory by part, a row each (reports of this build have them).
    parts = any_report.manifest["tracer"]["memory_parts"]
    assert parts and all(t[f"tracer.memory_parts.{k}"] == str(n) for k, n in parts.items())


def test_totals_say_how_temporaries_were_counted(report, tmp_path):
    """Totals are exact in every traced mode but for temporaries: `count` mode does
    not count them (its 0 is shown as not counted), `sample:N` estimates them."""
    t = dict(overview.totals(report).iter_rows())
    assert t["totals.temporary_count"] == str(report.manifest["totals"]["temporary_count"])
    assert overview.temporaries_note(report) is None
    counted = edited_copy(report, tmp_path / "count", manifest=lambda m: m.update(mode="count"))
    t = dict(overview.totals(counted).iter_rows())
    assert t["totals.temporary_count"] == "not counted (count mode)"
    assert t["totals.alloc_count"] == str(report.manifest["totals"]["alloc_count"])
    assert "not counted" in overview.temporaries_note(counted)
    ph = overview.phases(counted)
    assert ph["temporary_count"].null_count() == ph.height
    assert ph["temporary_share"].null_count() == ph.height
    sampled = edited_copy(report, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    t = dict(overview.totals(sampled).iter_rows())
    assert t["totals.temporary_count"].endswith("(estimated: each sampled one counts 1000 times)")
    assert "estimated in sample:1000" in overview.temporaries_note(sampled)


def test_the_mode_the_stacks_were_recorded_in_decides_not_the_mode_at_the_end(report, tmp_path):
    """A report written in `count` or `off` mode after `sites` or `sample:N` keeps its
    sites (`stacks_mode`), and one that recorded no stack at all has none, whatever
    the mode it was written in; allocations counted with no stack are said."""
    calls = report.manifest["totals"]["alloc_count"] + report.manifest["totals"]["realloc_count"]

    def copy(name, **fields):
        return edited_copy(report, tmp_path / name, manifest=lambda m: m.update(fields))

    # `sites`, then `count` for a tenth of the run, written in `count` mode.
    switched = copy("sites-then-count", mode="count", stacks_mode="sites",
                    allocs_without_stacks=calls // 10)
    assert not switched.count_only and not switched.sampled
    assert overview.temporaries_counted(switched) == "exact"
    note = overview.sites_note(switched)
    assert f"{calls // 10} allocations and reallocs (10.0 % of the run's) were counted in count " \
           "mode, with no stack" in note, note
    assert "counted with the stacks only" in overview.temporaries_note(switched)
    assert overview.phases(switched)["temporary_count"].null_count() == 0
    assert dict(overview.totals(switched).iter_rows())["stacks_mode"] == "sites"
    # `sample:100`, then `off`: estimates still.
    sampled = copy("sampled-then-off", mode="off", stacks_mode="sample:100", sample_interval=100,
                   allocs_without_stacks=0)
    assert sampled.sampled and overview.temporaries_counted(sampled) == "estimated"
    assert overview.sites_note(sampled).startswith("estimates from sampled stacks (sample:100:")
    # `count`, then `off`: no stack at all.
    counted = copy("count-then-off", mode="off", stacks_mode=None, allocs_without_stacks=calls)
    assert counted.count_only
    assert "records allocations but no sites (mode off when written, after count mode)" \
        in overview.sites_note(counted)
    assert overview.costs(counted) is None
    assert counted.mode_words == "off (after count)"
    assert switched.mode_words == "count (stacks recorded in sites)"


def test_top_sites_table_tells_apart_sites_that_read_the_same(report):
    """The top-sites table shows the analyzer's distinction: sites whose name and
    callers read the same differ in it."""
    top = overview.top_sites_table(report, limit=30)
    assert {"distinction", "category", "count"} <= set(top.columns)
    assert (top["count"] == top["alloc_count"] + top["realloc_count"]).all()
    same = top.filter(pl.struct("name", "callers").is_duplicated())
    assert same.height > 0, "no sites that read the same among the top 30"
    assert not top.select("name", "callers", "distinction").is_duplicated().any()


def test_a_phase_the_report_lacks_is_refused_everywhere(report):
    # Categories, size classes and lifetimes read a mistyped phase as empty before.
    for f in (sites.category_totals, overview.size_class_histogram, overview.lifetime_distribution,
              lambda r, p: overview.temporaries(r, p)):
        with pytest.raises(ValueError, match=r"has no phase 'Synthesize' \(its phases: main, "):
            f(report, "Synthesize")


def test_empty_lifetimes_say_why(report, tmp_path):
    dist = overview.lifetime_distribution(report, by_category=True)
    assert overview.lifetimes_note(report, dist) is None
    assert overview.lifetime_quantiles(dist)["followed_freed"].sum() == dist["freed_count"].sum()
    unfollowed = edited_copy(report, tmp_path / "unfollowed", manifest=lambda m: m.update(lifetime_interval=0))
    empty = dist.clear()
    assert "lifetime_interval 0" in overview.lifetimes_note(unfollowed, empty)
    counted = edited_copy(report, tmp_path / "count", manifest=lambda m: m.update(mode="count"))
    assert "count mode" in overview.lifetimes_note(counted, empty)
    assert overview.lifetime_quantiles(empty).columns == [
        "category", "followed_freed", "p50_ns_at_most", "p90_ns_at_most"]


def test_per_site_figures_say_what_the_mode_recorded(report, tmp_path):
    """A count report's site figures say it records no sites, in place of empty
    bars; a sampled report's say they are estimates and draw the spread."""
    from allocprof import plots

    assert overview.sites_note(report) is None
    sampled = edited_copy(report, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    note = overview.sites_note(sampled)
    assert note.startswith("estimates from sampled stacks (sample:1000"), note
    top = overview.top_sites_table(sampled, limit=5)
    assert top["alloc_count_noise"].null_count() == 0
    fig = plots.top_sites(top, "count", "t", "n", notes=[note])
    ax = fig.axes[0]
    assert "warning: estimates" in ax.get_title().replace("\n", " ")
    assert any(type(c).__name__ == "ErrorbarContainer" for c in ax.containers)
    counted = allocprof.load(COUNT_REPORT)
    note = overview.sites_note(counted)
    assert note.startswith("count mode records no sites"), note
    fig = plots.barh(sites.category_totals(report).head(0), "category", "sites", "t", "n",
                     notes=[note])
    texts = [t.get_text().replace("\n", " ") for t in fig.axes[0].texts]
    assert any(t.startswith("nothing to draw: count mode records no sites") for t in texts), texts


def test_top_temporaries_are_told_apart(report):
    """Five rows all reading `insert_or_update (lc.rs:108)` tell the reader nothing:
    the table gives callers and what tells them apart, as `analyzer top` does."""
    _, top = overview.temporaries(report, limit=10)
    assert {"callers", "distinction"} <= set(top.columns)
    labels = top.select("name", "callers", "distinction").rows()
    assert len(set(labels)) == len(labels), labels


def test_costs_are_the_analyzers(report, analyzer, fixture_calibration, monkeypatch):
    """The cost section prices as `analyzer cost` does (its answer, read), and says a
    count report has nothing to price rather than failing."""
    monkeypatch.setenv("ALLOC_PROFILER_CALIBRATION", str(fixture_calibration))
    totals, cats, top = overview.costs(report, limit=5)
    theirs = analyzer("cost", report.dir, "--limit", 5, "--calibration", fixture_calibration)
    assert totals["total_s"] == theirs["total_s"] > 0
    assert top["site_id"].to_list() == [s["site_id"] for s in theirs["sites"]]
    assert top["saves_ms"].to_list() == [s["total_s"] * 1e3 for s in theirs["sites"]]
    assert cats["sites"].min() > 0
    assert overview.costs(allocprof.load(COUNT_REPORT)) is None


def test_costs_without_priced_sites_keep_their_columns(report, monkeypatch):
    """A phase in which a `sample:N` report sampled nothing has no sites to price: the
    tables keep their columns (the notebook selects them), and the analyzer's word on
    why comes back as a note."""

    def cost(report_dir, phase, limit, rules):
        warnings.warn("analyzer: r: no sites to price: no allocation of this phase was sampled")
        return {"total_s": 0.0, "direct_s": 0.0, "indirect_s": 0.0, "phase_wall_s": 0.1,
                "categories": [], "sites": []}

    monkeypatch.setattr(overview.analyzer, "cost", cost)
    totals, cats, top = overview.costs(report, "setup")
    assert top.is_empty() and cats.is_empty()
    assert {"rank", "name", "callers", "distinction", "category", "alloc_count", "realloc_count",
            "direct_s", "indirect_s", "saves_ms"} <= set(top.columns)
    assert {"category", "alloc_count", "realloc_count", "direct_s", "indirect_s", "saves_ms",
            "phase_share"} <= set(cats.columns)
    assert totals["notes"] == ["analyzer: r: no sites to price: no allocation of this phase was sampled"]


def test_the_cost_tables_have_what_tells_rows_apart(report, fixture_calibration, monkeypatch):
    """Reallocs apart from allocations (a category of reallocs alone is not free), and
    the distinction between sites whose name and callers read the same."""
    monkeypatch.setenv("ALLOC_PROFILER_CALIBRATION", str(fixture_calibration))
    totals, cats, top = overview.costs(report, limit=30)
    assert totals["notes"] == []
    assert cats["realloc_count"].sum() > 0
    assert top.filter(pl.struct("name", "callers").is_duplicated()).height > 0
    assert not top.select("name", "callers", "distinction").is_duplicated().any()


def test_temporaries_carry_their_spread_in_a_sampled_report(report, tmp_path):
    per_category, _ = overview.temporaries(report)
    assert per_category["temporary_count_noise"].null_count() == per_category.height
    sampled = edited_copy(report, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    per_category, _ = overview.temporaries(sampled)
    assert per_category["temporary_count_noise"].null_count() == 0
