"""Comparing two reports."""

import json
import shutil
import subprocess

import polars as pl
import pytest

import allocprof
from allocprof import analyzer as analyzer_module
from allocprof import compare, plots
from reports import edited_copy


def test_a_report_against_itself_changes_nothing(report):
    cat = compare.category_deltas(report, report)
    assert (cat["delta_alloc_count"] == 0).all() and (cat["delta_sites"] == 0).all()
    sd = compare.site_deltas(report, report, limit=None)
    assert (sd["status"] == compare.BY_PATH).all()
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
            compare.BY_PATH: (True, True), compare.GONE: (True, False), compare.NEW: (False, True)
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


def test_a_measure_the_deltas_lack_and_a_negative_limit_are_refused(base_and_change):
    base, change = base_and_change
    with pytest.raises(ValueError, match="measure must be one of .*'alloc_count'"):
        compare.waterfall_steps(compare.category_deltas(base, change), "bytes")
    deltas = compare.site_deltas(base, change, limit=None)
    for f in (lambda: compare.site_deltas(base, change, limit=-3),
              lambda: compare.unmatched_sites(deltas, limit=-1),
              lambda: compare.changed_sites(deltas, limit=-1)):
        with pytest.raises(ValueError, match="limit must be a number of rows"):
            f()


def test_phase_deltas_cover_both_sides(base_and_change):
    base, change = base_and_change
    ph = compare.phase_deltas(base, change)
    assert set(ph["phase"]) == set(base.phases["phase"]) | set(change.phases["phase"])
    assert ph.filter(pl.col("phase") == "synthesize").height == 1
    # The base's order (the report's), whichever order the join kept.
    assert ph["phase"].to_list()[: base.phases.height] == base.phases.sort("phase_id")["phase"].to_list()


def test_a_phase_only_the_change_has_comes_after_the_bases(base_and_change, tmp_path):
    base, change = base_and_change
    renamed_dir = tmp_path / "renamed"
    shutil.copytree(change.dir, renamed_dir)
    table = pl.read_parquet(renamed_dir / "phases.parquet")
    first = table.sort("phase_id")["phase"][0]
    table.with_columns(
        phase=pl.when(pl.col("phase") == first).then(pl.lit("0-new")).otherwise(pl.col("phase"))
    ).write_parquet(renamed_dir / "phases.parquet")
    ph = compare.phase_deltas(base, allocprof.load(renamed_dir))
    want = base.phases.sort("phase_id")["phase"].to_list()
    assert ph["phase"].to_list() == [*want, "0-new"]
    assert ph.filter(pl.col("phase") == first)["change_alloc_count"].item() == 0


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
    both = sd.filter(pl.col("status") == compare.BY_PATH).height
    assert both == d["sites_matched_by_path"]
    assert both > 0
    assert sd.filter(pl.col("status") == compare.IGNORING_LINES).height == d["sites_matched_ignoring_lines"]
    assert compare.matched_share(base, change) == pytest.approx(d["matched_alloc_share"], rel=1e-9)


@pytest.mark.parametrize("shift,lc_file,later", [
    (1, False, None), (1, True, None), (3, True, None), (3, True, 10), (0, True, 1), (0, False, 1),
])
def test_code_moved_within_its_file_matches_with_lines_ignored(
    report, tmp_path, analyzer, fixture_calibration, shift, lc_file, later
):
    """A change that only moved the code of one file down `shift` lines: its stacks
    through that file match the baseline's with lines ignored (`ignoring lines`,
    unchanged counts), every row as `analyzer diff` pairs them, and every allocation
    matched. Moved by three, LinearCombination's file (two of its frames in most
    synthesis stacks, lines a line apart) crossed sites when pairs went by distance
    alone: 37 is nearer 39 than 40. Moved by one, its stacks crossed when whole keys
    matched first: the new 38 is the old 37, not the old 38. Its later half alone
    moved by one (a line added in the middle), the unmoved sites above crossed when
    pairs went by the usual shift first."""
    moved_dir = tmp_path / "moved"
    shutil.copytree(report.dir, moved_dir)
    frames = pl.read_parquet(moved_dir / "frames.parquet")
    own = frames.filter(~pl.col("file").str.starts_with("/rustc/"))
    if lc_file:
        file = own.filter(pl.col("file").str.ends_with("bellpepper-core-0.2.1/src/lc.rs"))["file"][0]
    else:
        file = own.group_by("file").agg(pl.col("site_id").n_unique()).sort("site_id").row(-1)[0]
    # `later`: the file's later half moved by that many lines instead (lines added
    # above it and more between), so that one function's lines can move by two
    # amounts.
    middle = frames.filter(pl.col("file") == file)["line"].median()
    moved = pl.col("line") + (
        pl.when(pl.col("line") >= middle).then(later).otherwise(shift) if later else shift
    )
    frames.with_columns(
        line=pl.when(pl.col("file") == file).then(moved).otherwise(pl.col("line"))
    ).write_parquet(moved_dir / "frames.parquet")
    d = analyzer("diff", report.dir, moved_dir, "--calibration", fixture_calibration)
    assert d["sites_matched_ignoring_lines"] > 0, file
    sd = compare.site_deltas(report, allocprof.load(moved_dir), limit=None)
    status = dict(sd.group_by("status").len().iter_rows())
    assert status.get(compare.IGNORING_LINES, 0) == d["sites_matched_ignoring_lines"]
    assert status.get(compare.BY_PATH, 0) == d["sites_matched_by_path"]
    assert status.get(compare.GONE, 0) == d["sites_gone"]
    assert status.get(compare.NEW, 0) == d["sites_new"]
    matched = sd.filter(pl.col("status").is_in(compare.MATCHED))
    assert (matched["delta_count"] == 0).all()
    moved = allocprof.load(moved_dir)
    assert compare.matched_share(report, moved) == pytest.approx(d["matched_alloc_share"], rel=1e-9)
    assert compare.matched_share(report, moved) == 1.0


def test_a_count_report_is_refused(report, tmp_path):
    # As `analyzer diff`: it records no sites, so every site would read as added.
    count_dir = tmp_path / "count"
    shutil.copytree(report.dir, count_dir)
    manifest = json.loads((count_dir / "manifest.json").read_text())
    manifest["mode"] = "count"
    # Traced in `count` mode throughout: no stacks recorded in another.
    manifest.pop("stacks_mode", None)
    (count_dir / "manifest.json").write_text(json.dumps(manifest))
    count = allocprof.load(count_dir)
    for f in (compare.site_deltas, compare.category_deltas):
        with pytest.raises(ValueError, match="`count` mode"):
            f(count, report)


def test_wall_time_deltas_keep_their_fractions(base_and_change, analyzer, fixture_calibration):
    """Wall times are seconds as floats: their deltas are not rounded to whole seconds
    (a run 12 ms faster read 0), and add up to the change `analyzer diff` measures."""
    base, change = base_and_change
    ph = compare.phase_deltas(base, change)
    assert ph.schema["delta_wall_s"] == pl.Float64
    d = analyzer("diff", base.dir, change.dir, "--calibration", fixture_calibration)
    assert d["measured_change_s"] != 0
    assert ph["delta_wall_s"].sum() == pytest.approx(d["measured_change_s"], abs=1e-6)
    for row in ph.iter_rows(named=True):
        assert row["delta_wall_s"] == pytest.approx(row["change_wall_s"] - row["base_wall_s"], abs=1e-12)


def test_a_phase_either_report_lacks_is_refused(base_and_change, tmp_path):
    """As `analyzer diff --phase`: a mistyped phase, or one only one report has, is
    refused with one line naming the report that lacks it and its phases, not read as
    a phase with nothing in it."""
    base, change = base_and_change
    calls = [
        lambda b, c, p: compare.check_phase(b, c, p),
        lambda b, c, p: compare.category_deltas(b, c, p),
        lambda b, c, p: compare.site_deltas(b, c, p),
        lambda b, c, p: compare.site_deltas(b, c, p, key="name"),
    ]
    for f in calls:
        with pytest.raises(ValueError, match=rf"^{base.dir} has no phase 'synthesise' \(its phases: main, "):
            f(base, change, "synthesise")
    # `setup` renamed in a copy of the change: only the baseline has it.
    one_sided = edited_copy(change, tmp_path / "renamed", rename_phase=("setup", "set-up"))
    assert "setup" in set(base.phases["phase"])
    for f in calls:
        for b, c in ((base, one_sided), (one_sided, base)):
            with pytest.raises(ValueError) as e:
                f(b, c, "setup")
            message = str(e.value)
            assert message.startswith(f"{one_sided.dir} has no phase 'setup'"), message
            assert "set-up" in message and "\n" not in message
    assert compare.check_phase(base, change, "synthesize") == "synthesize"


def test_reports_of_different_modes_are_said_to_be(base_and_change, tmp_path, fixture_calibration):
    """The warning `analyzer diff` gives two reports of different modes, word for word."""
    base, change = base_and_change
    assert compare.warnings(base, change) == []
    sampled = edited_copy(change, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    (warning,) = compare.warnings(base, sampled)
    assert warning == (
        f"the reports were traced in different modes ({base.manifest['mode']} and sample:1000): "
        "sampled figures are estimates, so small differences may be sampling noise"
    )
    out = subprocess.run([str(analyzer_module.binary()), "diff", str(base.dir), str(sampled.dir),
                          "--format", "json", "--calibration", str(fixture_calibration)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"analyzer: {warning}" in out.stderr


@pytest.mark.parametrize("rows, other, said", [
    ("2000", {}, "of one circuit run 1 and 2 times (rows 1000 and 2000)"),
    ("3000", {}, "of circuits of different sizes (rows 1000 and 3000)"),
    ("1000", {"prover": "mirror"}, "run by different provers (reference and mirror)"),
    ("1000", {"circuit": "poseidon"}, "of different circuits (sha256 --blocks 1 and poseidon)"),
])
def test_other_work_is_said_as_analyzer_diff_says_it(base_and_change, tmp_path, fixture_calibration,
                                                      rows, other, said):
    """One circuit run twice, against once, a larger one, another prover or another
    circuit: `analyzer diff`'s words."""
    base, change = base_and_change
    labels = lambda n, its, more: lambda m: m.setdefault("labels", {}).update(
        {"circuit": "sha256 --blocks 1", "prover": "reference", "rows": n, "iterations": its,
         **more})
    once = edited_copy(base, tmp_path / "once", manifest=labels("1000", "1", {}))
    its = "2" if rows != "1000" else "1"
    twice = edited_copy(change, tmp_path / "twice", manifest=labels(rows, its, other))
    (warning,) = compare.warnings(once, twice)
    assert warning == f"the reports are {said}: their differences are not a patch's alone"
    out = subprocess.run([str(analyzer_module.binary()), "diff", str(once.dir), str(twice.dir),
                          "--format", "json", "--calibration", str(fixture_calibration)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"analyzer: {warning}" in out.stderr


def test_totals_say_temporaries_are_not_exact_across_modes(base_and_change, tmp_path):
    """Totals are exact in every traced mode but for temporaries: a `sample:N`
    report's are estimates (a note says so), a `count` report's are not counted (no
    figure, no delta), whatever its manifest's 0."""
    base, change = base_and_change
    same = compare.totals_deltas(base, change)
    assert same["note"].null_count() == same.height
    sampled = edited_copy(change, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    row = compare.totals_deltas(base, sampled).filter(pl.col("measure") == "temporary_count").row(0, named=True)
    assert "estimated in sample:1000" in row["note"] and row["note"].startswith("change:")
    counted = edited_copy(base, tmp_path / "count", manifest=lambda m: m.update(mode="count"))
    t = compare.totals_deltas(counted, change)
    row = t.filter(pl.col("measure") == "temporary_count").row(0, named=True)
    assert row["base"] is None and row["delta"] is None and "not counted" in row["note"]
    assert row["change"] == change.manifest["totals"]["temporary_count"]
    allocs = t.filter(pl.col("measure") == "alloc_count").row(0, named=True)
    assert allocs["delta"] == change.manifest["totals"]["alloc_count"] - base.manifest["totals"]["alloc_count"]
    ph = compare.phase_deltas(counted, change)
    assert ph["base_temporary_count"].null_count() == ph.height
    assert ph["delta_temporary_count"].null_count() == ph.height


def test_statuses_are_analyzer_diffs(base_and_change, analyzer, fixture_calibration):
    """Statuses are the `matched` words of `analyzer diff`'s site rows, as many rows
    gone and new (it lists the matched ones that changed: the counts of those are
    `test_stacks_match_as_analyzer_diff_matches_them`'s)."""
    base, change = base_and_change
    d = analyzer("diff", base.dir, change.dir, "--calibration", fixture_calibration, "--limit", 1_000_000)
    theirs = {}
    for s in d["sites"]:
        theirs[s["matched"]] = theirs.get(s["matched"], 0) + 1
    sd = compare.site_deltas(base, change, limit=None)
    mine = dict(sd.group_by("status").len().iter_rows())
    assert set(mine) <= {compare.BY_PATH, compare.IGNORING_LINES, compare.GONE, compare.NEW}
    assert set(theirs) <= set(mine)
    for status in (compare.GONE, compare.NEW):
        assert mine.get(status, 0) == theirs.get(status, 0), status
    assert mine.get(compare.GONE, 0) > 0


def test_changed_sites_are_matched_sites_that_changed(report, tmp_path):
    """The table of sites that changed lists those found in both reports whose
    allocations + reallocs changed, and none that did not (a report against itself:
    none)."""
    assert compare.changed_sites(compare.site_deltas(report, report, limit=None)).is_empty()
    # A copy with site 0's allocations doubled: that site changed, no other did.
    more = edited_copy(report, tmp_path / "more")
    sites = pl.read_parquet(more.dir / "sites.parquet")
    sites.with_columns(
        alloc_count=pl.when(pl.col("site_id") == 0).then(pl.col("alloc_count") * 2).otherwise(pl.col("alloc_count"))
    ).write_parquet(more.dir / "sites.parquet")
    every = compare.site_deltas(report, allocprof.load(more.dir), limit=None)
    changed = compare.changed_sites(every)
    key = report.site_labels.filter(pl.col("site_id") == 0)["job_key"].item()
    assert changed["key"].to_list() == [key]
    assert changed["delta_count"].item() == report.sites.filter(pl.col("site_id") == 0)["alloc_count"].sum()


def test_sampling_noise_is_analyzer_diffs(base_and_change, tmp_path, fixture_calibration):
    """Where a report was traced in `sample:N`, each category's and site's count noise
    is `analyzer diff`'s `alloc_count_noise`; where neither was, there is none."""
    base, change = base_and_change
    assert compare.category_deltas(base, change)["count_noise"].null_count() == \
        compare.category_deltas(base, change).height
    assert compare.site_deltas(base, change, limit=None)["count_noise"].null_count() == \
        compare.site_deltas(base, change, limit=None).height
    sampled = edited_copy(change, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    out = subprocess.run([str(analyzer_module.binary()), "diff", str(base.dir), str(sampled.dir),
                          "--format", "json", "--limit", "100000",
                          "--calibration", str(fixture_calibration)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    want = {c["category"]: c["alloc_count_noise"] for c in d["categories"]}
    got = {r["category"]: r["count_noise"]
           for r in compare.category_deltas(base, sampled).iter_rows(named=True)}
    assert {k: v for k, v in got.items() if v is not None}
    for category, noise in got.items():
        assert noise == want[category], category
    # Per site: the same bounds, as a multiset (rows are named alike on both sides).
    rows = compare.site_deltas(base, sampled, limit=None)
    changed = rows.filter(pl.col("delta_count") != 0)
    assert sorted(changed["count_noise"].to_list()) == sorted(
        s["alloc_count_noise"] for s in d["sites"] if s["delta_alloc_count"] != 0
    )


def test_figures_of_sampled_reports_say_they_hold_estimates(base_and_change, tmp_path):
    """A figure pasted alone into a PR must say its counts are estimates, and draw
    how far sampling may move them: the waterfall's steps and the per-site bars carry
    error bars of `count_noise`, and the titles the note."""
    base, change = base_and_change
    assert compare.estimate_note(base, change) is None
    sampled = edited_copy(change, tmp_path / "sampled",
                          manifest=lambda m: m.update(mode="sample:1000", sample_interval=1000))
    note = compare.estimate_note(base, sampled)
    assert note.startswith(f"estimates from sampled stacks in {sampled.label} (sample:1000)"), note
    steps = compare.waterfall_steps(compare.category_deltas(base, sampled))
    deltas = steps.filter(pl.col("kind") == "delta")
    assert deltas.height and deltas["noise"].null_count() == 0, steps
    assert steps.filter(pl.col("kind") == "total")["noise"].null_count() == 2
    fig = plots.waterfall(steps, "t", notes=[note])
    ax = fig.axes[0]
    assert "warning: estimates from sampled stacks" in ax.get_title().replace("\n", " ")
    assert ax.containers and any(type(c).__name__ == "ErrorbarContainer" for c in ax.containers)
    every = compare.site_deltas(base, sampled, limit=None)
    fig = plots.site_deltas(every, compare.matched_share(base, sampled), "t", notes=[note])
    assert "warning: estimates" in fig.axes[0].get_title().replace("\n", " ")
    # Exact reports: no error bars, no note.
    exact = plots.waterfall(compare.waterfall_steps(compare.category_deltas(base, change)), "t")
    assert not any(type(c).__name__ == "ErrorbarContainer" for c in exact.axes[0].containers)
    assert "warning" not in exact.axes[0].get_title()


def test_the_stacks_in_one_report_only_are_listed(base_and_change):
    """`analyzer diff` lists the sites a patch removed by name; so does the notebook."""
    base, change = base_and_change
    every = compare.site_deltas(base, change, limit=None)
    gone_or_new = compare.unmatched_sites(every, limit=None)
    assert set(gone_or_new["status"].unique()) <= {compare.GONE, compare.NEW}
    assert gone_or_new.height == every.filter(pl.col("status").is_in((compare.GONE, compare.NEW))).height
    assert gone_or_new.height > 0, "the in-place variant removes Boolean::lc's stacks"
    sizes = gone_or_new["delta_count"].abs().to_list()
    assert sizes == sorted(sizes, reverse=True)
    assert compare.unmatched_sites(every, limit=3).height == min(3, gone_or_new.height)


def test_a_low_matched_share_is_warned_of_as_analyzer_diff_does():
    assert compare.match_warning(0.9) is None
    # A baseline with no site to match (nothing of the phase sampled): no warning.
    assert compare.match_warning(0.0, base_sites=0) is None
    assert compare.match_warning(0.759) == (
        "only 75.9% of the base's allocations are at sites found in the change: the patch "
        "removed that code, or the site rows marked gone and new are largely the same code "
        "under other frames (trust the category totals)"
    )


def test_the_predicted_cost_is_analyzer_diffs(base_and_change, analyzer, fixture_calibration, monkeypatch):
    base, change = base_and_change
    monkeypatch.setenv("ALLOC_PROFILER_CALIBRATION", str(fixture_calibration))
    summary, cats = compare.predicted_cost(base, change)
    d = analyzer("diff", base.dir, change.dir, "--calibration", fixture_calibration)
    assert summary["predicted_change_s"] == d["predicted_change_s"] != 0
    assert summary["repriced_s"] == d["repriced_s"]
    assert summary["noise_s"] is None
    assert cats["delta_cost_s"].sum() == pytest.approx(
        sum(c["delta_cost_s"] for c in d["categories"]), abs=1e-12)
    # Allocations + reallocs, named as category_deltas names them.
    counts = dict(compare.category_deltas(base, change).select("category", "delta_count").iter_rows())
    assert cats.columns == ["category", "delta_count", "delta_cost_s", "cost_noise_s"]
    assert all(counts[c] == n for c, n in cats.select("category", "delta_count").iter_rows())
    # Without --recycled, nothing is added back for recycling.
    assert summary["recycling_s"] is None


def test_a_recycling_change_adds_back_what_recycling_costs(base_and_change, analyzer,
                                                          fixture_calibration, monkeypatch, tmp_path):
    base, change = base_and_change
    # The fixture's calibration with the price of recycling a block (which an older
    # analyzer made it without).
    cal = json.loads(fixture_calibration.read_text())
    cal["operations"].append({"name": "recycle", "ns": 5.0, "beyond_allocator_ns": 5.0,
                              "what": "a test's price of a take and a return"})
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps(cal))
    monkeypatch.setenv("ALLOC_PROFILER_CALIBRATION", str(calibration))
    plain, _ = compare.predicted_cost(base, change)
    summary, _ = compare.predicted_cost(base, change, recycled=True)
    d = analyzer("diff", base.dir, change.dir, "--calibration", calibration, "--recycled")
    assert summary["recycling_s"] == d["recycling_s"]
    assert summary["predicted_change_s"] == d["predicted_change_s"]
    # The change (inplace-lc) removes allocations: recycling them would cost time.
    assert summary["recycling_s"] > 0
    assert summary["predicted_change_s"] == pytest.approx(
        plain["predicted_change_s"] + summary["recycling_s"], abs=1e-9)


def test_reports_of_different_rules_are_refused_and_new_rules_remake_categories(
    base_and_change, tmp_path
):
    """As `analyzer diff`, which takes one `--rules`: two reports loaded with other
    rules are refused, not compared across two sets of categories; and a report whose
    rules change makes its categories again."""
    base, change = base_and_change
    rules = tmp_path / "rules.toml"
    rules.write_text('[[category]]\nname = "everything"\ninnermost = [{ function = "" }]\n')
    other = allocprof.load(base.dir, rules=rules)
    for f in (compare.category_deltas, compare.predicted_cost, compare.site_deltas):
        with pytest.raises(ValueError, match="different category rules"):
            f(other, change)
    # The same rules spelt another way (relative, a str) are the same rules.
    import os
    same = allocprof.load(change.dir, rules=os.path.relpath(rules))
    compare.category_deltas(other, same)
    assert "everything" not in set(base.site_labels["category"])
    relabelled = allocprof.load(base.dir)
    relabelled.site_labels
    relabelled.rules = rules
    assert set(relabelled.site_labels["category"]) <= {"everything", "other (no rule matched)"}
