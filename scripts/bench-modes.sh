#!/usr/bin/env bash
# What each mode costs as a user runs it (its default settings): 2 KiB PoRep
# partition 0 synthesized with the tracer off and in count, sample:1000 and sites
# modes, in interleaved rounds of fresh processes; prints a markdown table of each
# mode against tracer off and writes it with a CSV under OUT (default
# $CARGO_TARGET_DIR/bench). With --with-sha, the 512-block SHA-256 chain too (about
# 10 s a run here).
# Usage: scripts/bench-modes.sh [--rounds N] [--out DIR] [--with-sha] [--sha-blocks N]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/bench-driver-builds.sh
bench_default_build modes "$@"
