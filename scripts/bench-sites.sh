#!/usr/bin/env bash
# What each part of sites mode costs on 2 KiB PoRep partition 0: the default
# (depth 48, one block in 64 followed for lifetimes, heap sampling at 1 MiB) and the
# same without lifetimes, without heap sampling, without either, and at depth 1, in
# interleaved rounds of fresh processes against the tracer off; prints a markdown
# table and writes it with a CSV under OUT (default $CARGO_TARGET_DIR/bench).
# Usage: scripts/bench-sites.sh [--rounds N] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/bench-driver-builds.sh
bench_default_build sites "$@"
