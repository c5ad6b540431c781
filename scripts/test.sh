#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace, then the Python side against a
# report written by this build. Installs the Python packages of requirements.txt, at
# the versions of constraints.txt, and notebooks/ (allocprof) into a virtual
# environment outside the clone (reused by later runs).
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 (no arguments; -h for what it runs)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/alloc-profiler/target}"
venv="${ALLOC_PROFILER_VENV:-/var/tmp/alloc-profiler/venv}"

echo "== cargo test (release) =="
cargo test --workspace --release

echo "== python: reports read with polars, DuckDB and pandas; notebooks =="
python_start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# Exact versions (constraints.txt) within the ranges users install; allocprof itself
# installed the way notebooks/README.md tells users to.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e 'notebooks[notebooks]' -c constraints.txt
reports="$CARGO_TARGET_DIR/test-reports"
report="$reports/demo"
cargo run --release --quiet -p alloc-tracer --example demo -- "$report" > /dev/null

# Reports of real synthesis, made by this build: a 2 KiB PoRep partition (one report
# for notebook 01 and the interop tests), a 4-block SHA-256 chain, baseline against
# the in-place-LC variant, for notebook 02, and the chain traced in sample:100, for the
# queries and notebook 01 on estimates.
driver="$CARGO_TARGET_DIR/release/synth-driver"
rm -rf "$reports/sector-2k" "$reports/porep-2k" "$reports/sha256-base" "$reports/sha256-change" \
  "$reports/sha256-sampled"
"$driver" seal --sector-size 2KiB --out "$reports/sector-2k" > /dev/null
"$driver" --trace sites --report "$reports/porep-2k" porep --c1 "$reports/sector-2k/c1.json" --partition 0 > /dev/null
"$driver" --trace sites --variant baseline --report "$reports/sha256-base" sha256 --blocks 4 > /dev/null
"$driver" --trace sites --variant inplace-lc --report "$reports/sha256-change" sha256 --blocks 4 > /dev/null
"$driver" --trace sample:100 --report "$reports/sha256-sampled" sha256 --blocks 4 > /dev/null
echo "reports for the Python tests and notebooks written in $(( $(date +%s) - python_start )) s"

# The cost model end to end on a small chain, for notebook 03: a quick calibration and
# 3 interleaved rounds, so its figures are rough; the table that counts is in
# BENCHMARKS.md (scripts/cost-model-check.py with its defaults, on a quiet machine).
export ALLOC_PROFILER_CALIBRATION="$reports/calibration.json"
"$CARGO_TARGET_DIR/release/analyzer" calibrate --quick --out "$ALLOC_PROFILER_CALIBRATION" > /dev/null
python3 scripts/cost-model-check.py --no-build --blocks 4 --runs 3 --out "$reports/cost-model" \
  --calibration "$ALLOC_PROFILER_CALIBRATION"
export COST_MODEL_RESULTS="$reports/cost-model/results.csv"
# And on the 2 KiB PoRep partition (pooled-enforce, one round): that the script's
# PoRep path works end to end.
python3 scripts/cost-model-check.py --no-build --c1 "$reports/sector-2k/c1.json" --runs 1 \
  --processes 1 --out "$reports/cost-model-porep" --calibration "$ALLOC_PROFILER_CALIBRATION" \
  > /dev/null
# The tracer's modes taking turns in one process (scripts/bench-mode-turns.sh's
# method) in 3 rounds of a 1-block chain: that the script and the driver's turns
# work together; the figures that count are in BENCHMARKS.md.
python3 scripts/mode_turns.py --driver "$driver" --sha-blocks 1 --rounds 3 --processes 1 \
  --out "$reports/mode-turns" > /dev/null
rm -rf "$reports/plots" "$reports/notebooks"
ALLOC_TRACER_REPORT="$report" \
  ALLOC_REPORT="$reports/porep-2k" \
  ALLOC_BASE_REPORT="$reports/sha256-base" \
  ALLOC_CHANGE_REPORT="$reports/sha256-change" \
  ALLOC_SAMPLED_REPORT="$reports/sha256-sampled" \
  ANALYZER="$CARGO_TARGET_DIR/release/analyzer" \
  PLOT_DIR="$reports/plots" \
  NOTEBOOK_OUT="$reports/notebooks" \
  JUPYTER_PLATFORM_DIRS=1 \
  "$venv/bin/python" -m pytest -q -rs tests/python notebooks/tests
echo "figures in $reports/plots, executed notebooks in $reports/notebooks"
echo "== python part finished in $(( $(date +%s) - python_start )) s =="
