#!/usr/bin/env bash
# What each tracer mode costs, timed in rounds inside one process (synth-driver
# --trace off,count,sample:1000,sites --iterations ...): the SHA-256 chain in short
# rounds and 2 KiB PoRep partition 0, each mode against tracer off in the same round;
# prints a markdown table and writes it with CSVs under OUT (default
# $CARGO_TARGET_DIR/bench). See scripts/mode_turns.py for the options.
# Usage: scripts/bench-mode-turns.sh [--rounds N] [--porep-rounds N] [--processes P]
#        [--modes LIST] [--sha-blocks N] [--driver-options OPTS] [--no-porep] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/bench-driver-builds.sh
out=$CARGO_TARGET_DIR/bench
porep=1
extra=()
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    --no-porep) porep=0; shift ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    --rounds|--porep-rounds|--processes|--modes|--sha-blocks|--driver-options)
      (($# >= 2)) || { echo "$0: $1 takes a value" >&2; exit 2; }
      extra+=("$1=$2"); shift 2 ;;
    *) sed -n 's/^# Usage: //p;s/^#        /       /p' "$0" >&2; exit 2 ;;
  esac
done
# Values it cannot take are refused now, not after the builds and the seal.
python3 scripts/mode_turns.py --driver - --out "$out" "${extra[@]}" --check-args
bench_builds "$out/bin"
c1=$(bench_c1)
((porep)) && extra+=(--c1 "$c1")
python3 scripts/mode_turns.py --driver "$out/bin/synth-driver" --out "$out" "${extra[@]}"
