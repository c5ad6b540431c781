"""Edited copies of real reports: what older tracers, other modes or a mistyped phase
leave the notebooks to cope with."""

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

import allocprof


def report_from(var: str) -> allocprof.Report:
    """The report environment variable `var` names; a test without it fails."""
    value = os.environ.get(var)
    if not value:
        pytest.fail(f"set {var} to a report directory (scripts/test.sh does)")
    return allocprof.load(value)


class _Edits(dict):
    """A manifest that remembers which keys an edit set."""

    def __init__(self, m: dict):
        super().__init__(m)
        self.keys_set: set[str] = set()

    def __setitem__(self, key, value):
        self.keys_set.add(key)
        super().__setitem__(key, value)

    def update(self, *args, **kwargs):
        fields = dict(*args, **kwargs)
        self.keys_set.update(fields)
        super().update(fields)


def edited_copy(report: allocprof.Report, dest: Path, drop_tables=(), manifest=None,
                rename_phase: tuple[str, str] | None = None) -> allocprof.Report:
    """A copy of `report` at `dest` without the tables `drop_tables` (their files and
    their entries in the manifest's `tables`), with `manifest(m)` applied to its
    manifest, and with phase `old` renamed `new` in every table (`rename_phase`). An
    edit of `mode` alone makes the copy read as traced in that mode throughout: the
    fields that name the mode its stacks were recorded in go, as in reports written
    before them."""
    shutil.copytree(report.dir, dest)
    m = json.loads((dest / "manifest.json").read_text())
    for name in drop_tables:
        (dest / f"{name}.parquet").unlink()
        m["tables"] = [t for t in m["tables"] if t["file"] != f"{name}.parquet"]
    if manifest is not None:
        edits = _Edits(m)
        manifest(edits)
        m = dict(edits)
        if "mode" in edits.keys_set and "stacks_mode" not in edits.keys_set:
            m.pop("stacks_mode", None)
            m.pop("allocs_without_stacks", None)
    (dest / "manifest.json").write_text(json.dumps(m))
    if rename_phase is not None:
        old, new = rename_phase
        for t in m["tables"]:
            path = dest / t["file"]
            df = pl.read_parquet(path)
            if "phase" in df.columns:
                df.with_columns(
                    pl.when(pl.col("phase") == old).then(pl.lit(new)).otherwise(pl.col("phase")).alias("phase")
                ).write_parquet(path)
    return allocprof.load(dest)
