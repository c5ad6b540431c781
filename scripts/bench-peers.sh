#!/usr/bin/env bash
# The tracer beside what a user would run instead, on the same synthesis (2 KiB PoRep
# partition 0, and a SHA-256 chain of about 10 s here): synth-driver built without the
# tracer (feature untraced: plain jemalloc, and plain system malloc), the tracer in
# off / count / count with heap sampling / sample:1000 / sites, dhat-rs as the
# global allocator (feature dhat-heap), heaptrack on the untraced build over the
# system allocator (it cannot see jemalloc), jemalloc's own heap profiler (feature
# jemalloc-prof, sampling by its default of 512 KiB), and on a small SHA-256 run
# (with plain jemalloc on the same small run as their baseline) Valgrind DHAT and
# jemalloc's profiler sampling every allocation. Interleaved rounds of fresh
# processes; per configuration the median of per-round synthesis ratios to plain
# jemalloc, and the medians of synthesis and wall time, peak RSS and report-writing
# time (the tracer's and dhat-rs's, as they print it). Prints the markdown table and writes it, a CSV
# of it and a CSV of every run under OUT (default $CARGO_TARGET_DIR/bench), a row
# as each run ends (a failed run leaves the rounds before it).
# Installs heaptrack and valgrind from Debian packages when missing.
# Usage: scripts/bench-peers.sh [--rounds N] [--sha-blocks N] [--small-blocks N] [--only CONFIG,...] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
rounds=8 out=$CARGO_TARGET_DIR/bench extra=()
while (($#)); do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --sha-blocks|--small-blocks|--only) extra+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "usage: $0 [--rounds N] [--sha-blocks N] [--small-blocks N] [--only CONFIG,...] [--out DIR]" >&2; exit 2 ;;
  esac
done
# Arguments it does not take are refused now, not after the installs and builds.
python3 scripts/bench_rounds.py peers --bin "$out/bin" --c1 - --rounds "$rounds" --out "$out" \
  "${extra[@]}" --check-args
missing=()
command -v heaptrack > /dev/null || missing+=(heaptrack)
command -v valgrind > /dev/null || missing+=(valgrind)
if ((${#missing[@]})); then
  sudo=; ((EUID == 0)) || sudo=sudo
  # Inside an `if`, a failing command does not stop the script: said, and stopped.
  if ! { $sudo apt-get update -q && $sudo apt-get install -y -q "${missing[@]}"; }; then
    echo "bench-peers: could not install ${missing[*]} (apt-get failed above)" >&2
    exit 1
  fi
fi
source scripts/bench-driver-builds.sh
bench_builds "$out/bin" --peers
c1=$(bench_c1)
echo "heaptrack: $(heaptrack --version 2>&1 | head -1); valgrind: $(valgrind --version)" >&2
python3 scripts/bench_rounds.py peers --bin "$out/bin" --c1 "$c1" --rounds "$rounds" --out "$out" "${extra[@]}"
