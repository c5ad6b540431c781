"""Loading a report directory: the manifest, checked, the parquet tables, and the
analyzer's named-sites table."""

from __future__ import annotations

import json
import operator
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from allocprof import analyzer

#: The report schema version this package reads (docs/report-schema.md).
SUPPORTED_SCHEMA_VERSION = 1

TABLES = ("sites", "frames", "size_classes", "requested_sizes", "phases", "lifetimes",
          "heap_peak", "heap_end", "timeline")

#: Tables a version-1 report can lack (docs/report-schema.md: later tracers added
#: them), with why, in the words `Report.absent` gives.
LATER_TABLES = {
    "heap_peak": "written by a tracer from before it kept one",
    "heap_end": "written by a tracer from before it kept one",
    "timeline": "written by a tracer before it sampled one",
}

#: What the analyzer derives per site (`Report.site_labels`).
LABELS = ("name", "callers", "distinction", "category", "category_index", "stack_key", "job_key")


class ReportError(Exception):
    """A report that is missing, of an unknown schema version, or incomplete."""


#: Unicode's control characters (category Cc), which Rust's `char::is_control` names,
#: and the backslash.
_CONTROL = r"[\x00-\x1f\x7f-\x9f\\]"


def check_limit(limit: int | None) -> int | None:
    """`limit`, a number of rows (0 or more), or None for every row. A negative one
    is refused, as `analyzer --limit` refuses it: polars' `head` and Python's slices
    would read it as every row but the last few."""
    if limit is None:
        return None
    try:
        rows = operator.index(limit)  # ints, numpy's included; not floats
    except TypeError:
        rows = -1
    if rows < 0:
        raise ValueError(f"limit must be a number of rows (0 or more) or None, not {limit!r}")
    return rows


def escape_control(text: str) -> str:
    """`text` with each control character and backslash escaped as Rust's
    `char::escape_default` writes it (`\\n`, `\\u{1b}`, `\\\\`): as the analyzer
    reads every string of a report, so that a phase name here is the one its output
    names, and two names stay two."""
    named = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\"}
    return "".join(
        named.get(c) or (f"\\u{{{ord(c):x}}}" if unicodedata.category(c) == "Cc" else c)
        for c in text)


def escape_controls(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with the control characters and backslashes of its string columns
    escaped (`escape_control`); unchanged, and not copied, when it has none."""
    columns = [c for c, t in df.schema.items()
               if t == pl.String and df[c].str.contains(_CONTROL).any()]
    if not columns:
        return df
    return df.with_columns(
        pl.col(c).map_elements(escape_control, return_dtype=pl.String) for c in columns)


@dataclass
class Report:
    """One report: its manifest and its tables, read on first use, and the
    analyzer's named-sites table made from it with the category rules `rules` (None:
    the analyzer's built-in ones)."""

    dir: Path
    manifest: dict
    rules: Path | None = None
    _tables: dict = field(default_factory=dict, init=False, repr=False)

    def __setattr__(self, name, value):
        # Other rules make other categories: what was made with the old ones goes, so
        # that one report never answers with two sets of categories.
        if name == "rules":
            value = None if value is None else Path(value)
            if "_tables" in self.__dict__:
                for made in ("_named_sites", "_site_labels"):
                    self._tables.pop(made, None)
        super().__setattr__(name, value)

    @property
    def listed_tables(self) -> set[str]:
        """The tables `manifest.json`'s `tables` lists, by name (without `.parquet`):
        the ones a reader may open (docs/report-schema.md)."""
        return {
            t["file"].removesuffix(".parquet")
            for t in self.manifest.get("tables") or []
            if isinstance(t, dict) and isinstance(t.get("file"), str)
        }

    def _listed_rows(self, name: str) -> int | None:
        """The rows `manifest.json`'s `tables` lists for table `name`, if it says."""
        for t in self.manifest.get("tables") or []:
            if isinstance(t, dict) and t.get("file") == f"{name}.parquet":
                rows = t.get("rows")
                return rows if isinstance(rows, int) else None
        return None

    def has_table(self, name: str) -> bool:
        """Whether the report has table `name`: its manifest lists it (or the table
        was handed to this object already)."""
        return name in self._tables or name in self.listed_tables

    def absent(self, name: str) -> str | None:
        """None when the report has table `name`; else one line saying it has not, and
        why, for a notebook to print in place of what it would have drawn. A table
        file the manifest does not list is damage, not an older report: refused, as
        the analyzer refuses it."""
        if self.has_table(name):
            return None
        path = self.dir / f"{name}.parquet"
        if os.path.lexists(path):
            raise ReportError(f"{path}: not among the tables manifest.json lists")
        why = LATER_TABLES.get(name, "manifest.json's `tables` does not list it")
        return f"this report has no {name} table ({why})"

    def table(self, name: str) -> pl.DataFrame:
        """The parquet table `name` (one of TABLES). One that the manifest's `tables`
        does not list is refused (`absent` says why), as the format asks of readers."""
        if name not in TABLES:
            raise ReportError(f"{self.dir}: no table {name!r} in schema version 1")
        if name not in self._tables:
            if name not in self.listed_tables:
                raise ReportError(f"{self.dir}: {self.absent(name)}")
            path = self.dir / f"{name}.parquet"
            if not path.is_file():
                raise ReportError(f"{path}: missing")
            try:
                df = escape_controls(pl.read_parquet(path))
            except Exception as e:  # polars' errors do not name the file
                raise ReportError(f"{path}: {e}") from e
            # The rows the manifest lists: a table cut short, or another report's
            # table put there, disagrees with it (the analyzer's words).
            listed = self._listed_rows(name)
            if listed is not None and listed != df.height:
                raise ReportError(f"{path}: {df.height} rows, the manifest says {listed}")
            self._tables[name] = df
        return self._tables[name]

    @property
    def sites(self) -> pl.DataFrame:
        return self.table("sites")

    @property
    def frames(self) -> pl.DataFrame:
        return self.table("frames")

    @property
    def named_sites(self) -> pl.DataFrame:
        """The analyzer's named-sites table (`analyzer.named_sites`): per (site, phase),
        name, callers, category, category_index, stack_key, job_key and counts. Made
        once."""
        if "_named_sites" not in self._tables:
            self._tables["_named_sites"] = analyzer.named_sites(self.dir, self.rules)
        return self._tables["_named_sites"]

    @property
    def site_labels(self) -> pl.DataFrame:
        """One row per site, by site_id: name, callers, distinction, category,
        category_index, stack_key and job_key, from `named_sites`."""
        if "_site_labels" not in self._tables:
            self._tables["_site_labels"] = (
                self.named_sites.select("site_id", *LABELS)
                .unique("site_id", keep="first")
                .sort("site_id")
            )
        return self._tables["_site_labels"]

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
    def timeline(self) -> pl.DataFrame:
        return self.table("timeline")

    @property
    def label(self) -> str:
        """A short name for plots: the directory name."""
        return self.dir.name

    @property
    def stacks_mode(self) -> str:
        """The mode the sites' figures were recorded in, as the analyzer reads it: the
        manifest's `stacks_mode` (the latest mode that recorded stacks, in a run
        switched to `count` or `off` before its report), `count` where none did and
        allocations were counted; `mode` in reports written before it existed, and
        `count` there too for one written in `off` mode that counted allocations but
        holds no sites."""
        m = self.manifest
        if m.get("stacks_mode"):
            return m["stacks_mode"]
        without = m.get("allocs_without_stacks")
        if without:
            return "count"
        mode = m.get("mode") or ""
        if without is None and mode == "off" and not self._has_site_rows() and self._counted():
            return "count"
        return mode

    @property
    def count_only(self) -> bool:
        """True when no part of the run recorded stacks (nor temporaries)."""
        return self.stacks_mode == "count"

    @property
    def sampled(self) -> bool:
        """True when the sites' figures are sampled estimates (`sample:N`)."""
        return self.stacks_mode.startswith("sample:")

    @property
    def allocs_without_stacks(self) -> int:
        """Allocations and reallocs counted in `count` mode, with no stack, in a run
        that recorded stacks for the rest: in no site row (0 otherwise)."""
        m = self.manifest
        return int(m.get("allocs_without_stacks") or 0) if m.get("stacks_mode") else 0

    @property
    def mode_words(self) -> str:
        """The mode when the report was written, and the one its stacks were recorded
        in where that differs, as the analyzer words it: `count (stacks recorded in
        sites)`, or `off (after count)` where none was."""
        mode, stacks = self.manifest.get("mode") or "", self.stacks_mode
        if stacks == mode:
            return mode
        if stacks == "count":
            return f"{mode} (after count)"
        return f"{mode} (stacks recorded in {stacks})"

    def sample_weight_words(self) -> str:
        """What each sampled allocation counts for, in words, as the analyzer says it:
        `1000 times`, or where the run switched intervals, `for the interval it was
        drawn at, lately 1000`."""
        m = self.manifest
        n = m.get("sample_interval")
        if m.get("stack_weights_changed") and m.get("weighted_as_recorded"):
            return f"for the interval it was drawn at, lately {n}"
        return f"{n} times"

    def _has_site_rows(self) -> bool:
        return any(
            t.get("file") == "sites.parquet" and t.get("rows")
            for t in self.manifest.get("tables") or []
            if isinstance(t, dict)
        )

    def _counted(self) -> bool:
        t = self.manifest.get("totals") or {}
        return bool((t.get("alloc_count") or 0) + (t.get("realloc_count") or 0))


def load(path: str | os.PathLike, rules: str | os.PathLike | None = None) -> Report:
    """Reads the manifest of the report at `path` and checks its schema version.

    Like every reader of the format, refuses versions it does not know. Categories
    come from the rules file `rules`, else $ALLOC_CATEGORY_RULES (a relative one
    found as `launched_path` finds inputs), else the analyzer's built-in rules.
    """
    d = Path(path)
    manifest_path = d / "manifest.json"
    if not d.is_dir():
        launched = os.environ.get("PWD")
        also = f", nor under {launched}" if launched and Path(launched) != Path.cwd() else ""
        where = "" if d.is_absolute() else f" (a relative path, taken from {Path.cwd()}{also})"
        raise ReportError(f"{d}: no such report directory{where}")
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        inside = sorted(p.name for p in d.iterdir() if (p / "manifest.json").is_file())
        if inside:
            raise ReportError(
                f"{d}: not a report directory (no manifest.json), but holds reports: "
                + ", ".join(inside[:8]) + (", ..." if len(inside) > 8 else "")
            ) from None
        raise ReportError(f"{d}: not a report directory: no manifest.json") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"{manifest_path}: not JSON: {e}") from None
    version = manifest.get("schema_version")
    if version != SUPPORTED_SCHEMA_VERSION:
        raise ReportError(
            f"{manifest_path}: schema version {version}, this reader knows "
            f"{SUPPORTED_SCHEMA_VERSION}"
        )
    if not rules and (given := os.environ.get("ALLOC_CATEGORY_RULES")):
        rules = launched_path(given)
    return Report(dir=d, manifest=manifest, rules=Path(rules) if rules else None)


def from_env(var: str) -> Report:
    """The report named by environment variable `var` (how the notebooks get inputs)."""
    value = os.environ.get(var)
    if not value:
        raise ReportError(f"set {var} to a report directory (see notebooks/README.md)")
    return load(launched_path(value))


def launched_path(value: str) -> Path:
    """`value`, an input path: a relative one that is not under the working directory
    (a kernel's is the notebook's folder) but is under the one Jupyter was started
    from (`$PWD`, which the kernel inherits), from there; else as it is."""
    p = Path(value)
    launched = os.environ.get("PWD")
    if p.is_absolute() or p.exists() or not launched:
        return p
    there = Path(launched) / p
    return there if there.exists() else p
