#!/usr/bin/env bash
# 2 KiB PoRep partition 0 synthesized over each inner allocator (`synth-driver
# --allocator jemalloc|system|mimalloc`, tracer off), in interleaved rounds of fresh
# processes; prints a markdown table of the medians of per-round ratios to jemalloc
# and writes it with a CSV under OUT (default $CARGO_TARGET_DIR/bench).
# Usage: scripts/bench-allocators.sh [--rounds N] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/bench-driver-builds.sh
bench_default_build allocators "$@"
