"""Inputs of the Python reader tests, from the environment scripts/test.sh sets:

* ALLOC_TRACER_REPORT: a report (the tracer's demo) for the schema test;
* ALLOC_REPORT: a synthesis report (2 KiB PoRep) for the interop and README tests;
* ANALYZER: the analyzer binary (default: $CARGO_TARGET_DIR/release/analyzer).

A missing input fails the test that needs it, naming the variable.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/alloc-profiler/target"))


@pytest.fixture(scope="session")
def synthesis_report() -> Path:
    value = os.environ.get("ALLOC_REPORT")
    if not value:
        pytest.fail("set ALLOC_REPORT to a report directory (scripts/test.sh does)")
    path = Path(value)
    assert (path / "manifest.json").is_file(), f"no report at {path}"
    return path


@pytest.fixture(scope="session")
def analyzer_top():
    """`analyzer top REPORT --by count --limit N --format json`, parsed."""
    binary = Path(os.environ.get("ANALYZER") or TARGET / "release" / "analyzer")
    if not binary.is_file():
        pytest.fail(f"no analyzer binary at {binary}: set ANALYZER")

    def run(report: Path, limit: int = 10):
        out = subprocess.run(
            [str(binary), "top", str(report), "--by", "count", "--limit", str(limit),
             "--format", "json"],
            check=True, capture_output=True, text=True,
        )
        return json.loads(out.stdout)

    return run
