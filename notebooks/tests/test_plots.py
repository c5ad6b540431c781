"""Figures are written as real, non-empty PNG and SVG files."""

import polars as pl

from imagefiles import is_png, is_svg

from allocprof import plots


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


def test_checks_reject_empty_and_foreign_files(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "text.svg").write_text("not an image")
    assert not is_png(tmp_path / "empty.png")
    assert not is_svg(tmp_path / "text.svg")
