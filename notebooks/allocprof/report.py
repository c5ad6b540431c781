"""Loading a report directory: the manifest, checked, and the parquet tables."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

#: The report schema version this package reads (docs/report-schema.md).
SUPPORTED_SCHEMA_VERSION = 1

TABLES = ("sites", "frames", "size_classes", "requested_sizes", "phases", "lifetimes")


class ReportError(Exception):
    """A report that is missing, of an unknown schema version, or incomplete."""


@dataclass
class Report:
    """One report: its manifest and its tables, read on first use."""

    dir: Path
    manifest: dict
    _tables: dict = field(default_factory=dict, repr=False)

    def table(self, name: str) -> pl.DataFrame:
        """The parquet table `name` (one of TABLES)."""
        if name not in TABLES:
            raise ReportError(f"{self.dir}: no table {name!r} in schema version 1")
        if name not in self._tables:
            path = self.dir / f"{name}.parquet"
            if not path.is_file():
                raise ReportError(f"{path}: missing")
            self._tables[name] = pl.read_parquet(path)
        return self._tables[name]

    @property
    def sites(self) -> pl.DataFrame:
        return self.table("sites")

    @property
    def frames(self) -> pl.DataFrame:
        return self.table("frames")

    @property
    def annotated_frames(self) -> pl.DataFrame:
        """frames with `short_function` and `plumbing` (naming.annotate), computed once."""
        if "_annotated" not in self._tables:
            from allocprof import naming

            self._tables["_annotated"] = naming.annotate(self.frames)
        return self._tables["_annotated"]

    @property
    def size_classes(self) -> pl.DataFrame:
        return self.table("size_classes")

    @property
    def requested_sizes(self) -> pl.DataFrame:
        return self.table("requested_sizes")

    @property
    def phases(self) -> pl.DataFrame:
        return self.table("phases")

    @property
    def lifetimes(self) -> pl.DataFrame:
        return self.table("lifetimes")

    @property
    def label(self) -> str:
        """A short name for plots: the directory name."""
        return self.dir.name


def load(path: str | os.PathLike) -> Report:
    """Reads the manifest of the report at `path` and checks its schema version.

    Like every reader of the format, refuses versions it does not know.
    """
    d = Path(path)
    manifest_path = d / "manifest.json"
    if not d.is_dir():
        raise ReportError(f"{d}: no such report directory")
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{manifest_path}: missing") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{manifest_path}: not JSON: {e}") from None
    version = manifest.get("schema_version")
    if version != SUPPORTED_SCHEMA_VERSION:
        raise ReportError(
            f"{manifest_path}: schema version {version}, this reader knows "
            f"{SUPPORTED_SCHEMA_VERSION}"
        )
    return Report(dir=d, manifest=manifest)


def from_env(var: str) -> Report:
    """The report named by environment variable `var` (how the notebooks get inputs)."""
    value = os.environ.get(var)
    if not value:
        raise ReportError(f"set {var} to a report directory (see notebooks/README.md)")
    return load(value)
