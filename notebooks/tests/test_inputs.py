"""Where the notebooks' inputs are looked for, and what a wrong one says."""

import re
from pathlib import Path

import pytest

from allocprof.execute import absolute_inputs
from allocprof.report import ReportError, launched_path, load


def test_a_folder_of_reports_is_named_as_such(tmp_path):
    for name in ("porep-2k", "sha-base"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text("{}")
    with pytest.raises(ReportError, match="not a report directory .*holds reports: porep-2k, sha-base"):
        load(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="empty: not a report directory: no manifest.json"):
        load(tmp_path / "empty")


def test_a_relative_path_says_where_it_was_taken_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    with pytest.raises(ReportError, match=re.escape(f"(a relative path, taken from {tmp_path})")):
        load("reports/nonesuch")
    # Where Jupyter was started elsewhere, it names that place too.
    monkeypatch.setenv("PWD", "/somewhere/else")
    with pytest.raises(ReportError, match=re.escape(f"taken from {tmp_path}, nor under /somewhere/else)")):
        load("reports/nonesuch")
    with pytest.raises(ReportError) as e:
        load(tmp_path / "nonesuch")
    assert "taken from" not in str(e.value)


def test_a_relative_input_is_taken_from_where_jupyter_was_started(tmp_path, monkeypatch):
    # Jupyter started in `root`; the kernel runs in the notebooks' folder.
    root, notebooks = tmp_path / "root", tmp_path / "root" / "notebooks"
    (root / "reports" / "r").mkdir(parents=True)
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)
    monkeypatch.setenv("PWD", str(root))
    assert launched_path("reports/r") == root / "reports" / "r"
    # What exists where the kernel runs wins; what exists nowhere stays as given.
    (notebooks / "reports" / "r").mkdir(parents=True)
    assert launched_path("reports/r") == Path("reports/r")
    assert launched_path("reports/none") == Path("reports/none")


def test_headless_runs_take_relative_inputs_from_the_caller(tmp_path):
    env = {"ALLOC_REPORT": "reports/r", "PLOT_DIR": "/abs/plots", "HOME": "x", "ALLOC_PHASE": "p"}
    out = absolute_inputs(env, tmp_path)
    assert out["ALLOC_REPORT"] == str(tmp_path / "reports/r")
    assert out["PLOT_DIR"] == "/abs/plots"
    # Not paths: as they are.
    assert (out["HOME"], out["ALLOC_PHASE"]) == ("x", "p")


def test_relative_category_rules_are_taken_from_where_jupyter_was_started(tmp_path, monkeypatch):
    root, notebooks = tmp_path / "root", tmp_path / "root" / "notebooks"
    (root / "r").mkdir(parents=True)
    (root / "r" / "manifest.json").write_text('{"schema_version": 1}')
    (root / "rules.toml").write_text("")
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)
    monkeypatch.setenv("PWD", str(root))
    monkeypatch.setenv("ALLOC_CATEGORY_RULES", "rules.toml")
    assert load(root / "r").rules == root / "rules.toml"
    # One given to `load` is the caller's, as given.
    assert load(root / "r", rules="mine.toml").rules == Path("mine.toml")
