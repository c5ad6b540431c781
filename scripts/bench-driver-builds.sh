#!/usr/bin/env bash
# Builds synth-driver's default build and, with --peers, its untraced, dhat-heap and
# jemalloc-prof builds, and copies each binary into BIN (the first argument) under
# its own name: the features replace one binary path, so each build is copied away
# before the next. The default build is built last, so target/release/synth-driver
# stays the default one (cargo keeps each feature set's artifacts; switching back
# relinks nothing). Also seals the 2 KiB sector the benchmarks synthesize, unless present.
# Sourced by scripts/bench-allocators.sh, scripts/bench-heap.sh, scripts/bench-modes.sh,
# scripts/bench-mode-turns.sh, scripts/bench-peers.sh, scripts/bench-sites.sh and
# scripts/bench-synth-instructions.sh.
set -euo pipefail
bench_builds() {
  local bin=$1 peers=${2:-}
  mkdir -p "$bin"
  if [[ $peers == --peers ]]; then
    cargo build -q --release -p synth-driver --features untraced
    cp "$CARGO_TARGET_DIR/release/synth-driver" "$bin/synth-driver-untraced"
    cargo build -q --release -p synth-driver --features dhat-heap
    cp "$CARGO_TARGET_DIR/release/synth-driver" "$bin/synth-driver-dhat"
    cargo build -q --release -p synth-driver --features jemalloc-prof
    cp "$CARGO_TARGET_DIR/release/synth-driver" "$bin/synth-driver-jeprof"
  fi
  cargo build -q --release -p synth-driver
  cp "$CARGO_TARGET_DIR/release/synth-driver" "$bin/synth-driver"
}

# The 2 KiB sector's C1 output, sealed once (well under a second).
bench_c1() {
  local dir=$CARGO_TARGET_DIR/bench/sector-2k
  if [[ ! -f $dir/c1.json ]]; then
    # (`set -e` does not reach into `$(bench_c1)`: a failed seal returns here.)
    "$CARGO_TARGET_DIR/release/synth-driver" seal --sector-size 2KiB --out "$dir" > /dev/null ||
      return 1
  fi
  echo "$dir/c1.json"
}

# The whole of a benchmark of the default build on the 2 KiB sector: parses
# [--rounds N] [--out DIR] from the script's arguments, passes any other argument on
# to scripts/bench_rounds.py, builds, seals, and runs its table TABLE.
# Usage: bench_default_build TABLE "$@"
bench_default_build() {
  local table=$1 rounds=8 out=$CARGO_TARGET_DIR/bench
  local extra=()
  shift
  while (($#)); do
    case $1 in
      --rounds) rounds=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      # Before the builds and the seal: the calling script's header says what it
      # takes.
      -h|--help) sed -n '2,/^set -euo pipefail/{/^#/s/^# \{0,1\}//p}' "scripts/${0##*/}"; return ;;
      # What it builds and seals is what it measures.
      --bin|--c1) echo "$0: $1 is set by this script (it builds and seals what it measures)" >&2
        return 2 ;;
      *) extra+=("$1"); shift ;;
    esac
  done
  # Arguments it does not take are refused now, not after the builds and the seal.
  python3 scripts/bench_rounds.py "$table" --bin "$out/bin" --c1 - --rounds "$rounds" \
    --out "$out" "${extra[@]}" --check-args
  bench_builds "$out/bin"
  local c1
  c1=$(bench_c1)
  python3 scripts/bench_rounds.py "$table" --bin "$out/bin" --c1 "$c1" \
    --rounds "$rounds" --out "$out" "${extra[@]}"
}
