"""The analyzer's named-sites table: each site's name, callers, category and stack key,
as the analyzer derives them from its frames (`analyzer export --format parquet`).

Naming, category rules and stack keys are written once, in Rust (the format crate and
the analyzer); this package reads their results and never re-implements them. The
table is made on first use by running the analyzer binary, found as `binary` says.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import warnings
from pathlib import Path

import polars as pl

#: The repository this package lives in (for its default build directory).
ROOT = Path(__file__).resolve().parents[2]


class AnalyzerError(Exception):
    """No analyzer binary, or the analyzer refused the report or the rules."""


def binary() -> Path:
    """The analyzer binary: $ANALYZER, else the newest `release/analyzer` under
    $CARGO_TARGET_DIR, /var/tmp/alloc-profiler/target (where scripts/test.sh builds)
    or this repository's `target/`, else `analyzer` on PATH."""
    given = os.environ.get("ANALYZER")
    if given:
        path = Path(given)
        if path.is_dir():
            raise AnalyzerError(f"ANALYZER={given}: a folder, not the analyzer binary")
        if not path.is_file():
            raise AnalyzerError(f"ANALYZER={given}: no such file")
        return path
    targets = [os.environ.get("CARGO_TARGET_DIR"), "/var/tmp/alloc-profiler/target", ROOT / "target"]
    built = [p for t in filter(None, targets) if (p := Path(t) / "release" / "analyzer").is_file()]
    if built:
        # An older build would answer for code that has changed since.
        return max(built, key=lambda p: p.stat().st_mtime)
    on_path = shutil.which("analyzer")
    if on_path:
        return Path(on_path)
    raise AnalyzerError(
        "no analyzer binary: build it (cargo build --release -p analyzer) or set ANALYZER"
    )


def _run(*args: str | os.PathLike) -> bytes:
    """Runs the analyzer with `args`; returns its standard output. A failure raises
    AnalyzerError with its message; what it says of an answer it gives (why a table is
    empty, that heap sampling was off) becomes a warning."""
    command = [str(binary()), *map(str, args)]
    try:
        out = subprocess.run(command, capture_output=True)
    except OSError as e:  # not executable, not a program
        raise AnalyzerError(f"{command[0]}: cannot be run: {e}") from e
    if out.returncode != 0:
        message = out.stderr.decode(errors="replace").strip()
        raise AnalyzerError(message or f"{' '.join(command)}: exit code {out.returncode}, nothing said")
    for line in out.stderr.decode(errors="replace").splitlines():
        warnings.warn(line, stacklevel=3)
    return out.stdout


def named_sites(report_dir: str | os.PathLike, rules: str | os.PathLike | None = None) -> pl.DataFrame:
    """`analyzer export REPORT --format parquet [--rules RULES]`, read: one row per
    (site, phase) with site_id, phase, name, callers, category, category_index,
    stack_key, job_key and the counts (docs/report-schema.md, "Derived: the
    named-sites table")."""
    rules_args = [] if rules is None else ["--rules", rules]
    return pl.read_parquet(io.BytesIO(_run("export", report_dir, "--format", "parquet", *rules_args)))


def info(report_dir: str | os.PathLike) -> dict:
    """`analyzer info REPORT --format json`, parsed: mode, phases (with `main`'s wall
    time as the run's time outside the named phases), threads, peak, dropped."""
    return json.loads(_run("info", report_dir, "--format", "json"))


def _rules_args(rules: str | os.PathLike | None) -> list:
    return [] if rules is None else ["--rules", rules]


def _phase_args(phase: str | None) -> list:
    return [] if phase is None else ["--phase", phase]


def cost(report_dir: str | os.PathLike, phase: str | None = None, limit: int = 20,
         rules: str | os.PathLike | None = None) -> dict:
    """`analyzer cost REPORT --format json`, parsed: what each category and the
    `limit` costliest sites cost in seconds (`direct_s` inside the allocator,
    `indirect_s` the work around it, an estimate; `total_s`, what removing them would
    save), by the calibration `analyzer cost` uses ($ALLOC_PROFILER_CALIBRATION, else
    the stored one, else one it measures first, about 15 s; docs/cost-model.md)."""
    return json.loads(_run("cost", report_dir, "--format", "json", "--limit", str(limit),
                           *_phase_args(phase), *_rules_args(rules)))


def diff(base_dir: str | os.PathLike, change_dir: str | os.PathLike, phase: str | None = None,
         rules: str | os.PathLike | None = None, recycled: bool = False) -> dict:
    """`analyzer diff BASE CHANGE --format json`, parsed: among the rest the predicted
    change in seconds (`predicted_change_s`, its sampling noise, and `repriced_s`, the
    part at sites whose counts did not change) and each category's `delta_cost_s`.
    `recycled`: the change recycles the blocks it no longer allocates (a pool), whose
    cost the prediction adds back (`--recycled`, `recycling_s`)."""
    return json.loads(_run("diff", base_dir, change_dir, "--format", "json",
                           *_phase_args(phase), *_rules_args(rules),
                           *(["--recycled"] if recycled else [])))


#: The analyzer's command for each moment `held` answers for.
MOMENTS = {"peak": "peak", "end": "leaks"}


def held(report_dir: str | os.PathLike, moment: str = "peak",
         rules: str | os.PathLike | None = None) -> dict:
    """`analyzer peak REPORT --format json` (`moment` "peak") or `analyzer leaks`
    ("end"), every site: what holds the live bytes then, by site and category, as
    heap sampling estimates them, with the moment's exact live bytes."""
    if moment not in MOMENTS:
        raise ValueError(f"moment {moment!r}: one of {', '.join(MOMENTS)}")
    return json.loads(_run(MOMENTS[moment], report_dir, "--format", "json", "--limit", "1000000",
                           *_rules_args(rules)))
