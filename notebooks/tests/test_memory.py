"""memory.scale against hand-made reports: one iteration's peak over one iteration's
rows, every iteration's allocations over every row."""

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import allocprof
from allocprof import memory
from allocprof.memory import scale, scale_note, timeline
from allocprof.report import Report, ReportError
from reports import edited_copy


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
    # A run stopped before it finished counts the iteration under way too: said.
    stopped = made(1000, 1, 5000, 190_000)
    stopped.manifest["incomplete"] = "SIGINT"
    scaled = scale([stopped])
    assert scaled["incomplete"].to_list() == ["SIGINT"]
    assert "a report written before its run finished in " in scale_note(scaled)
    assert scale_note(scale([made(1000, 1, 5000, 190_000)])) is None


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


def test_tables_the_manifest_does_not_list_are_absent(report, tmp_path):
    """Readers go by the manifest's `tables`: a table it does not list is absent (a
    report from before it), and `absent` says why in one line; with its file there
    all the same, the two disagree: refused as damage, as the analyzer refuses it. A
    table whose rows are not those listed is refused too."""
    assert report.has_table("timeline") and report.absent("timeline") is None
    m = json.loads((report.dir / "manifest.json").read_text())
    m["tables"] = [t for t in m["tables"] if t["file"] != "timeline.parquet"]
    damaged = tmp_path / "damaged"
    shutil.copytree(report.dir, damaged)
    (damaged / "manifest.json").write_text(json.dumps(m))
    r = allocprof.load(damaged)
    assert (damaged / "timeline.parquet").is_file() and not r.has_table("timeline")
    for read in (lambda: r.timeline, lambda: r.absent("timeline"), lambda: memory.timeline_note(r)):
        with pytest.raises(ReportError, match="timeline.parquet: not among the tables manifest.json lists"):
            read()
    older = tmp_path / "older"
    shutil.copytree(damaged, older)
    (older / "timeline.parquet").unlink()
    r = allocprof.load(older)
    with pytest.raises(ReportError, match="has no timeline table"):
        r.timeline
    assert memory.timeline_note(r) == f"older: {r.absent('timeline')}"
    assert memory.timeline_phases(r) is None
    assert memory.timeline_phases(report).height > 0
    # Rows the manifest does not list.
    m = json.loads((report.dir / "manifest.json").read_text())
    for t in m["tables"]:
        if t["file"] == "phases.parquet":
            t["rows"] += 1
    short = tmp_path / "short"
    shutil.copytree(report.dir, short)
    (short / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ReportError, match=r"phases.parquet: \d+ rows, the manifest says \d+"):
        allocprof.load(short).phases


def test_timeline_phases_give_each_phases_exact_peak_beside_its_highest_point(report):
    """The timeline's points can miss a short rise: each phase's exact highest live
    bytes come from phases.parquet, and no point of the phase lies above them (but
    for the publish error the manifest bounds)."""
    t = memory.timeline_phases(report)
    exact = dict(zip(report.phases["phase"].to_list(),
                     (report.phases["peak_live_bytes"] / memory.MIB).to_list()))
    slack = report.manifest["totals"]["peak_live_bytes_error_bytes"] / memory.MIB
    assert t.height > 0
    for phase, point, peak in t.select("phase", "max_live_mib", "peak_live_mib").iter_rows():
        assert peak == exact[phase], phase
        assert point <= peak + slack, (phase, point, peak)


def test_peak_note_tells_an_older_report_from_a_small_peak(report, tmp_path):
    """Without a heap_peak table (an older tracer), the note says so, with the run's
    peak, not that live bytes never reached 1 MiB; nor does a report whose manifest
    kept no peak while its run went past 1 MiB."""
    note = memory.peak_note(report, memory.held(report))
    assert note.startswith(f"{report.label}: kept peak ") and "the estimates add up to" in note
    assert "part-way" not in note
    late = edited_copy(report, tmp_path / "late", manifest=lambda m: m.update(
        heap_sampling_started_late=True))
    assert memory.peak_note(late, memory.held(late)).endswith(
        "it came on part-way through the run, and blocks allocated before are left out")
    older = edited_copy(report, tmp_path / "older", drop_tables=["heap_peak", "heap_end"],
                        manifest=lambda m: [m.pop(k, None) for k in ("heap_peak", "heap_interval")])
    h = memory.held(older)
    assert h["live_bytes"] is None
    note = memory.peak_note(older, h)
    assert "no heap_peak table (written by a tracer from before it kept one)" in note
    assert "never reached 1 MiB" not in note
    assert f"{report.manifest['totals']['peak_live_bytes'] / 2**20:,.1f} MiB" in note
    unkept = edited_copy(report, tmp_path / "unkept", manifest=lambda m: m.update(heap_peak=None))
    note = memory.peak_note(unkept, memory.held(unkept))
    assert note.startswith("unkept: no peak kept (the run reached ") and "kept no peak moment" in note
    small = edited_copy(report, tmp_path / "small", manifest=lambda m: (
        m.update(heap_peak=None), m["totals"].update(peak_live_bytes=1000)))
    assert memory.peak_note(small, memory.held(small)) == "small: no peak kept (live bytes never reached 1 MiB)"


def test_scale_note_names_reports_without_rows(report, tracer_report):
    scaled = scale([report, tracer_report])
    assert scaled["allocs_per_row"].to_list()[1] is None
    assert memory.scale_note(scaled) == (
        f"no `rows` label (synth-driver records one) in {tracer_report.label}: no figures per row")
    assert memory.scale_note(scale([report])) is None


def test_the_peaks_estimates_carry_their_standard_errors(report):
    """Heap sampling's estimates come with the analyzer's standard errors, by
    category and site, and the note's total with its spread (blocks much larger than
    the interval are sampled for sure: their error is 0, and so may every figure's
    be in a given run)."""
    h = memory.held(report)
    cats = memory.held_categories(h)
    assert (cats["se_mib"] * MIB_BYTES).round().to_list() == [c["live_bytes_se"] for c in h["categories"]]
    sites = memory.held_sites(h, limit=len(h["sites"]))
    assert (sites["se_mib"] * MIB_BYTES).round().to_list() == [
        float(s.get("live_bytes_se") or 0) for s in h["sites"]
    ]
    assert (" ± " in memory.peak_note(report, h)) == bool(h.get("estimated_bytes_se"))
    # Whatever this run's figures: a standard error of 1 MiB reads 1.0 MiB.
    one = {"categories": [{"category": "c", "live_bytes": 3 << 20, "share": 1.0, "sites": 1,
                           "live_bytes_se": 1 << 20}],
           "sites": [{"name": "f", "callers": "", "distinction": "", "category": "c",
                      "live_bytes": 3 << 20, "share": 1.0, "sampled_count": 2,
                      "live_bytes_se": 1 << 20}]}
    assert memory.held_categories(one)["se_mib"].to_list() == [1.0]
    assert memory.held_sites(one)["se_mib"].to_list() == [1.0]
    # The ± drawn and printed is two of them, as the analyzer's.
    assert memory.held_categories(one)["bound_mib"].to_list() == [2.0]
    assert memory.held_sites(one)["bound_mib"].to_list() == [2.0]
    assert memory.held_sites({"sites": []}).columns == memory.held_sites(one).columns
    with pytest.raises(ValueError, match="limit must be a number of rows"):
        memory.held_sites(one, limit=-1)


MIB_BYTES = 1 << 20


def test_a_phase_run_once_per_iteration_has_a_row_per_run():
    """Phases entered once per iteration: each run its own row, from its first point to
    its last, none overlapping; the exact peak is the phase's over all its runs."""
    r = with_timeline({"time_ns": [t * 500_000_000 for t in range(1, 8)],
                       "phase": ["setup", "synthesize", "synthesize", "setup", "synthesize", "main", "main"],
                       "live_bytes": [1 << 20, 4 << 20, 8 << 20, 1 << 20, 6 << 20, 0, 0],
                       "alloc_count": [1] * 7, "bytes_allocated": [1] * 7})
    r.manifest["tables"] = [{"file": "timeline.parquet"}]
    r._tables["phases"] = pl.DataFrame({"phase": ["main", "setup", "synthesize"],
                                        "peak_live_bytes": [1 << 20, 2 << 20, 9 << 20]})
    t = memory.timeline_phases(r)
    assert t.select("phase", "from_s", "to_s").rows() == [
        ("setup", 0.5, 0.5), ("synthesize", 1.0, 1.5), ("setup", 2.0, 2.0),
        ("synthesize", 2.5, 2.5), ("main", 3.0, 3.5)]
    assert t["max_live_mib"].to_list() == [1.0, 8.0, 1.0, 6.0, 0.0]
    assert t["peak_live_mib"].to_list() == [2.0, 9.0, 2.0, 9.0, 1.0]


def test_scale_has_no_figure_where_it_cannot_count_one():
    """Without the phase, allocations per row are missing, not 0; a `rows` label that
    is not a number gives no figures per row, and the note says which and why."""
    without = made(1000, 1, 5000, 190_000)
    without._tables["phases"] = without.phases.with_columns(phase=pl.lit("prove"))
    garbled = made(1000, 1, 5000, 190_000)
    garbled.dir = Path("garbled")
    garbled.manifest["labels"]["rows"] = "about 1000"
    scaled = scale([without, garbled])
    first, second = scaled.to_dicts()
    assert first["allocs"] is None and first["allocs_per_row"] is None
    assert first["peak_bytes_per_row"] == 190.0
    assert second["rows"] is None and second["allocs_per_row"] is second["peak_bytes_per_row"] is None
    assert memory.scale_note(scaled) == (
        "a `rows` or `iterations` label that is not a whole number in garbled: no figures per row; "
        "no `synthesize` phase in made-1: no allocations per row")
    from allocprof import plots

    texts = [t.get_text() for ax in plots.per_row(scaled, "t").axes for t in ax.texts]
    assert "no synthesize phase" in texts and "rows label not a number" in texts


def test_an_empty_end_says_whether_heap_sampling_was_on():
    empty = memory.held_sites({"sites": []})
    off = Report(dir=Path("off"), manifest={"heap_interval": 0, "totals": {"live_bytes_end": 10},
                                            "tables": [{"file": "heap_end.parquet"}]})
    assert memory.end_note(off, empty) == (
        "off: heap sampling was off, so no sites hold sampled memory at the end (live_bytes_end 10)")
    on = Report(dir=Path("on"), manifest={**off.manifest, "heap_interval": 1 << 20})
    assert "it samples one byte in 1048576" in memory.end_note(on, empty)
    older = Report(dir=Path("older"), manifest={"heap_interval": 1 << 20, "tables": []})
    assert memory.end_note(older, empty) == "older: this report has no heap_end table " \
        "(written by a tracer from before it kept one)"
    # Sites at the end: nothing to say, but what heap sampling left out when it came
    # on late (as `analyzer leaks` says).
    some = pl.DataFrame({"name": ["f"]})
    assert memory.end_note(on, some) is None
    late = Report(dir=Path("late"), manifest={**on.manifest, "heap_sampling_started_late": True})
    assert memory.end_note(late, some) == ("late: heap sampling came on part-way through the "
                                           "run, and blocks allocated before are left out")


def test_held_categories_follow_the_reports_rules(report, tmp_path):
    """`memory.held` passes the report's category rules to the analyzer, as every
    other query does: with a one-rule file, the peak is held by that category and
    the unmatched."""
    rules = tmp_path / "one.toml"
    rules.write_text('[[category]]\nname = "with a source file"\nframes = [{ file = "src/" }]\n')
    mine = allocprof.load(report.dir, rules=rules)
    held = {c["category"] for c in memory.held(mine)["categories"]}
    assert "with a source file" in held
    assert held <= {"with a source file", "other (no rule matched)"}
    assert held != {c["category"] for c in memory.held(report)["categories"]}
