"""The overview's tables agree with each other and with the manifest."""

import polars as pl

from allocprof import overview
from allocprof.sites import site_totals


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
