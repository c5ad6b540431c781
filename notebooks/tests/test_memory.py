"""memory.scale against hand-made reports: one iteration's peak over one iteration's
rows, every iteration's allocations over every row."""

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import allocprof
from allocprof import memory
from allocprof.memory import scale, timeline
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
    """Readers go by the manifest's `tables`: a table it does not list is refused,
    even with its file there, and `absent` says why in one line."""
    assert report.has_table("timeline") and report.absent("timeline") is None
    m = json.loads((report.dir / "manifest.json").read_text())
    m["tables"] = [t for t in m["tables"] if t["file"] != "timeline.parquet"]
    older = tmp_path / "older"
    shutil.copytree(report.dir, older)
    (older / "manifest.json").write_text(json.dumps(m))
    r = allocprof.load(older)
    assert (older / "timeline.parquet").is_file() and not r.has_table("timeline")
    with pytest.raises(ReportError, match="has no timeline table"):
        r.timeline
    assert memory.timeline_note(r) == f"older: {r.absent('timeline')}"
    assert memory.timeline_phases(r) is None
    assert memory.timeline_phases(report).height > 0


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


MIB_BYTES = 1 << 20
