#!/usr/bin/env bash
# What heap sampling costs: 2 KiB PoRep partition 0 synthesized in count,
# sample:1000 and sites modes, each with heap sampling off and at 1 MiB, in
# interleaved rounds of fresh processes; prints a markdown table (each mode against
# tracer off, each heap-sampled run against the same mode without heap sampling)
# and writes it with a CSV under OUT (default $CARGO_TARGET_DIR/bench).
# Usage: scripts/bench-heap.sh [--rounds N] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
rounds=8 out=$CARGO_TARGET_DIR/bench
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--out DIR]" >&2; exit 2 ;;
  esac
done
source scripts/bench-driver-builds.sh
bench_builds "$out/bin"
c1=$(bench_c1)
python3 scripts/bench_rounds.py heap --bin "$out/bin" --c1 "$c1" --rounds "$rounds" --out "$out"
