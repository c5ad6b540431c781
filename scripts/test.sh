#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace, then the Python side against a
# report written by this build. Installs the Python packages of requirements.txt into
# a virtual environment outside the clone (reused by later runs).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/alloc-profiler/target}"
venv="${ALLOC_PROFILER_VENV:-/var/tmp/alloc-profiler/venv}"

echo "== cargo test (release) =="
cargo test --workspace --release

echo "== python: reports read with polars =="
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt
report="$CARGO_TARGET_DIR/test-reports/demo"
cargo run --release --quiet -p alloc-tracer --example demo -- "$report" > /dev/null
ALLOC_TRACER_REPORT="$report" "$venv/bin/python" -m pytest -q tests/python
