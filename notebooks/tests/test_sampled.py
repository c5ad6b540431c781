"""The queries on a real `sample:N` report (ALLOC_SAMPLED_REPORT): estimates with the
analyzer's spreads, and phases in which nothing was sampled."""

from allocprof import memory, overview, sites

NOISES = ("alloc_count_noise", "bytes_requested_noise", "temporary_count_noise")


def test_it_is_a_sampled_report(sampled_report):
    assert sampled_report.manifest["mode"].startswith("sample:")
    assert sampled_report.manifest["sample_interval"] > 1
    assert overview.sites_note(sampled_report).startswith("estimates from sampled stacks")


def test_the_spreads_are_the_analyzers(sampled_report, analyzer):
    """Per site and per category, counts and spreads as `analyzer top` and `analyzer
    categories` give them (the classes from 256 KiB recorded whole, exact)."""
    mine = sites.top_sites(sampled_report, limit=20).to_dicts()
    theirs = analyzer("top", sampled_report.dir, "--limit", 20)
    assert len(mine) == len(theirs) > 0
    for key in ("site_id", "alloc_count", "realloc_count", *NOISES):
        assert [m[key] for m in mine] == [t[key] for t in theirs], key
    assert all(m["alloc_count_noise"] for m in mine)
    cats = sites.category_totals(sampled_report).to_dicts()
    want = [t for t in analyzer("categories", sampled_report.dir) if t["sites"] > 0]
    for key in ("category", "alloc_count", "realloc_count", *NOISES):
        assert [c[key] for c in cats] == [t[key] for t in want], key
    per_category, _ = overview.temporaries(sampled_report)
    assert per_category["temporary_count_noise"].to_list() == [c["temporary_count_noise"] for c in cats]


def test_every_phase_is_priced_or_says_why_not(sampled_report, fixture_calibration, monkeypatch):
    """A phase none of whose allocations was sampled has no sites to price: its tables
    are empty but keep their columns, and the analyzer's note says why."""
    monkeypatch.setenv("ALLOC_PROFILER_CALIBRATION", str(fixture_calibration))
    sampled = set(sampled_report.sites["phase"])
    names = sites.phase_names(sampled_report)
    # Both kinds: scripts/test.sh's chain samples every phase about 1 run in 1,700.
    assert sampled and set(names) - sampled, f"phases {names}, sampled {sampled}: run again"
    for phase in names:
        totals, cats, top = overview.costs(sampled_report, phase)
        assert {"rank", "name", "callers", "distinction", "category", "alloc_count", "realloc_count",
                "saves_ms"} <= set(top.columns), phase
        assert {"category", "alloc_count", "realloc_count", "saves_ms"} <= set(cats.columns), phase
        if phase in sampled:
            assert top.height > 0 and top["alloc_count_noise"].null_count() == 0, phase
        else:
            assert top.is_empty() and cats.is_empty() and totals["notes"], phase


def test_memory_reads_it(sampled_report):
    """Heap sampling's peak, the timeline's phases one row per run, and the figures per
    row of a synth-driver report."""
    held = memory.held(sampled_report)
    assert memory.peak_note(sampled_report, held).startswith(f"{sampled_report.label}: kept peak ")
    assert memory.held_categories(held).height > 0
    spans = memory.timeline_phases(sampled_report)
    assert spans.height > 0
    assert (spans["from_s"] <= spans["to_s"]).all()
    assert (spans["to_s"].head(-1) < spans["from_s"].tail(-1)).all()
    scaled = memory.scale([sampled_report])
    assert scaled["allocs_per_row"][0] > 0 and scaled["peak_bytes_per_row"][0] > 0
    assert memory.scale_note(scaled) is None
