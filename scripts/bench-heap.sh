#!/usr/bin/env bash
# What heap sampling costs: 2 KiB PoRep partition 0 synthesized in count,
# sample:1000 and sites modes, each with heap sampling off and at 1 MiB, in
# interleaved rounds of fresh processes; prints a markdown table (each mode against
# tracer off, each heap-sampled run against the same mode without heap sampling)
# and writes it with a CSV under OUT (default $CARGO_TARGET_DIR/bench). With
# --with-sha, the 512-block SHA-256 chain too (about 10 s a run here).
# Usage: scripts/bench-heap.sh [--rounds N] [--out DIR] [--with-sha] [--sha-blocks N]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/bench-driver-builds.sh
bench_default_build heap "$@"
