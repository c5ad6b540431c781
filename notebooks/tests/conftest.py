"""Inputs of the tests that need real reports, from the environment that
scripts/test.sh sets (the same variables the notebooks read):

* ALLOC_REPORT, ALLOC_BASE_REPORT, ALLOC_CHANGE_REPORT: report directories;
* ALLOC_TRACER_REPORT: the tracer's demo report (no `rows` label: not synth-driver's);
* ALLOC_SAMPLED_REPORT: a report traced in `sample:N` mode (scripts/test.sh writes a
  `sample:100` one);
* ANALYZER: the analyzer binary (default: $CARGO_TARGET_DIR/release/analyzer).

A missing input fails the test that needs it, with the variable to set: a test that
quietly skips in CI would prove nothing.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

import allocprof
from reports import report_from

REPORT_VARS = ("ALLOC_REPORT", "ALLOC_BASE_REPORT", "ALLOC_CHANGE_REPORT")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=REPORT_VARS)
def any_report(request) -> allocprof.Report:
    """Each report the environment names."""
    return report_from(request.param)


@pytest.fixture
def report() -> allocprof.Report:
    return report_from("ALLOC_REPORT")


@pytest.fixture
def base_and_change():
    return report_from("ALLOC_BASE_REPORT"), report_from("ALLOC_CHANGE_REPORT")


@pytest.fixture
def tracer_report() -> allocprof.Report:
    return report_from("ALLOC_TRACER_REPORT")


@pytest.fixture
def sampled_report() -> allocprof.Report:
    """A real `sample:N` report (ALLOC_SAMPLED_REPORT)."""
    return report_from("ALLOC_SAMPLED_REPORT")


@pytest.fixture(scope="session")
def analyzer():
    """Runs the analyzer binary and returns its parsed JSON output."""
    target = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/alloc-profiler/target")
    binary = Path(os.environ.get("ANALYZER") or Path(target) / "release" / "analyzer")
    if not binary.is_file():
        pytest.fail(f"no analyzer binary at {binary}: set ANALYZER")

    def run(*args):
        out = subprocess.run(
            [str(binary), *map(str, args), "--format", "json"],
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(out.stdout)

    return run


@pytest.fixture(scope="session")
def fixture_calibration() -> Path:
    """The analyzer's fixture calibration, for commands that price (`diff`) without
    measuring this machine."""
    return ROOT / "analyzer" / "tests" / "fixtures" / "calibration.json"
