"""Figures are written as real, non-empty PNG and SVG files."""

from pathlib import Path

import polars as pl

from imagefiles import is_png, is_svg

from allocprof import compare, plots


def test_save_writes_png_and_svg(tmp_path):
    df = pl.DataFrame({"name": ["a", "b"], "n": [3, 1]})
    fig = plots.barh(df, "name", "n", "title", "count")
    paths = plots.save(fig, "bars", tmp_path / "out")
    assert [p.name for p in paths] == ["bars.png", "bars.svg"]
    assert is_png(paths[0]) and is_svg(paths[1])


def test_plot_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PLOT_DIR", str(tmp_path / "figures"))
    assert plots.plot_dir() == tmp_path / "figures"
    assert plots.plot_dir().is_dir()


def test_a_relative_plot_dir_is_taken_from_where_jupyter_started(tmp_path, monkeypatch):
    # The kernel runs in the notebook's folder; Jupyter was started in `launched`.
    launched, kernel = tmp_path / "launched", tmp_path / "notebooks"
    kernel.mkdir()
    monkeypatch.chdir(kernel)
    monkeypatch.setenv("PWD", str(launched))
    monkeypatch.setenv("PLOT_DIR", "figures")
    assert plots.plot_dir() == launched / "figures"
    # Without PLOT_DIR: plots/ where the kernel runs.
    monkeypatch.delenv("PLOT_DIR")
    assert plots.plot_dir() == Path("plots")


def test_checks_reject_empty_and_foreign_files(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "text.svg").write_text("not an image")
    assert not is_png(tmp_path / "empty.png")
    assert not is_svg(tmp_path / "text.svg")


def test_site_labels_tell_apart_every_site(any_report):
    """Sites whose name and callers read the same differ in their distinction, whose
    start is the frame where their stacks part and whose end tells apart the rest: a
    label keeps both (a label cut from the left gave sites 5 and 9 of the 2 KiB
    PoRep report the same one)."""
    triples = list(any_report.site_labels.select("name", "callers", "distinction").iter_rows())
    for width in (90, 80):
        labels = [plots.site_label(*t, width=width) for t in triples]
        assert len(set(labels)) == len(set(triples)), width


def test_a_long_distinction_keeps_its_start():
    common = " < ".join(f"frame_{i} (file.rs:{i})" for i in range(12))
    a = plots.site_label("f (a.rs:1)", "g (b.rs:2)", f"via left (lc.rs:185) < {common}")
    b = plots.site_label("f (a.rs:1)", "g (b.rs:2)", f"via right (lc.rs:191) < {common}")
    assert a != b
    assert "via left (lc.rs:185)" in a and "via right (lc.rs:191)" in b
    assert max(len(line) for line in a.splitlines()) <= 92


def test_count_figures_say_allocations_plus_reallocs(base_and_change):
    """The waterfall and the churn panel count what their labels say: allocations +
    reallocs, as the tables beside them (`delta_count`) do."""
    base, change = base_and_change
    steps = compare.waterfall_steps(compare.category_deltas(base, change))
    assert plots.waterfall(steps, "t").axes[0].get_ylabel().startswith("allocations + reallocs")
    every = compare.site_deltas(base, change, limit=None)
    fig = plots.site_deltas(every, compare.matched_share(base, change), "t")
    churn = fig.axes[1]
    assert churn.get_xlabel().startswith("allocations + reallocs")
    widths = [p.get_width() for p in churn.patches]
    by_status = dict(every.group_by("status").agg(
        base=(pl.col("base_alloc_count") + pl.col("base_realloc_count")).sum(),
        change=(pl.col("change_alloc_count") + pl.col("change_realloc_count")).sum(),
    ).select("status", pl.struct("base", "change")).iter_rows())
    assert widths == [-by_status[compare.GONE]["base"], by_status.get(compare.NEW, {"change": 0})["change"]]
    gone = every.filter(pl.col("status") == compare.GONE)
    assert gone["base_realloc_count"].sum() > 0, "no reallocs among the gone stacks: the test proves nothing"


def test_per_row_draws_reports_without_a_rows_label():
    scale = pl.DataFrame({"report": ["demo", "porep"], "allocs_per_row": [None, 4.98],
                          "peak_bytes_per_row": [None, 164.0]})
    fig = plots.per_row(scale, "t")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts.count("no rows label") == 2
    assert fig.axes[0].get_title().startswith("allocations + reallocs")


def test_empty_lifetimes_say_why():
    empty = pl.DataFrame(schema={"category": pl.String, "lifetime_ns_low": pl.UInt64,
                                 "lifetime_ns_high": pl.UInt64, "freed_count": pl.UInt64})
    fig = plots.lifetimes(empty, "t", empty="no lifetimes: count mode")
    assert [t.get_text() for t in fig.axes[0].texts] == ["no lifetimes: count mode"]


def test_ranked_sites_draw_with_or_without_categories(any_report):
    """`sites.top_sites`' rows (no categories) draw in one colour with no legend, as
    `overview.top_sites_table`'s draw coloured by category; both carry what tells
    apart sites that read the same (`distinction`)."""
    from allocprof import overview, sites

    bare = sites.top_sites(any_report, limit=5)
    assert "distinction" in bare.columns
    fig = plots.top_sites(bare, "alloc_count", "t", "x")
    assert fig.axes[0].get_legend() is None
    named = overview.top_sites_table(any_report, limit=5)
    assert plots.top_sites(named, "alloc_count", "t", "x").axes[0].get_legend() is not None
