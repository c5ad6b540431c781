#!/usr/bin/env bash
# Builds synth-driver's default build and, with --peers, its untraced and dhat-heap
# builds, and copies each binary into BIN (the first argument) under its own name:
# the features replace one binary path, so each build is copied away before the
# next. The default build is built last, so target/release/synth-driver stays the
# default one (cargo keeps each feature set's artifacts; switching back relinks
# nothing). Also seals the 2 KiB sector the benchmarks synthesize, unless present.
# Sourced by scripts/bench-allocators.sh and scripts/bench-peers.sh.
set -euo pipefail
bench_builds() {
  local bin=$1 peers=${2:-}
  mkdir -p "$bin"
  if [[ $peers == --peers ]]; then
    cargo build -q --release -p synth-driver --features untraced
    cp "$CARGO_TARGET_DIR/release/synth-driver" "$bin/synth-driver-untraced"
    cargo build -q --release -p synth-driver --features dhat-heap
    cp "$CARGO_TARGET_DIR/release/synth-driver" "$bin/synth-driver-dhat"
  fi
  cargo build -q --release -p synth-driver
  cp "$CARGO_TARGET_DIR/release/synth-driver" "$bin/synth-driver"
}

# The 2 KiB sector's C1 output, sealed once (well under a second).
bench_c1() {
  local dir=$CARGO_TARGET_DIR/bench/sector-2k
  if [[ ! -f $dir/c1.json ]]; then
    "$CARGO_TARGET_DIR/release/synth-driver" seal --sector-size 2KiB --out "$dir" > /dev/null
  fi
  echo "$dir/c1.json"
}
