#!/usr/bin/env bash
# What patching return addresses (so that a stack walk learns which frames returned
# instead of comparing them) would cost per frame: builds and runs
# scripts/return_patch_cost.c, which prints a markdown table. x86-64, a C compiler.
# Usage: scripts/bench-return-patch.sh [ALLOCATIONS [ROUNDS]]   (default 2000000 15)
set -euo pipefail
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
esac
(($# <= 2)) || { usage >&2; exit 2; }
for n in "$@"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
done
cd "$(dirname "$0")/.."
out=${CARGO_TARGET_DIR:-$PWD/target}/bench
mkdir -p "$out"
cc -O2 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer \
  -o "$out/return_patch_cost" scripts/return_patch_cost.c
"$out/return_patch_cost" "$@"
