#!/usr/bin/env bash
# Instructions the tracer adds to a real synthesis, counted by callgrind (repeatable
# to within about 0.1 %, unlike wall time on a shared 2-core VM):
# 2 KiB PoRep partition 0 with the tracer off, in sites mode at depth 1 and at the
# default depth, and in count and sample:1000 modes, each without the timeline
# sampler (see below). Only the synthesis is counted: callgrind zeroes its counts
# when the driver enters `prover::synthesize_reference` and dumps them when it
# leaves (every thread's, the prover's workers included), so the driver's setup,
# its untraced count of the circuit's shape and the report are left out. Prints a
# markdown table: the synthesis' instructions, those added per recorded allocation
# or realloc over `off`, and of those `record_site`'s (the guess, the walk, the site
# lookup, the counters; inlined into the recording functions). Allocations are the
# synthesize phase's allocations and reallocs, from `analyzer info` on a sites
# run's report. Then a second table: where `record_site`'s instructions go at the
# default depth (scripts/record_site_parts.py).
# Usage: scripts/bench-synth-instructions.sh   (needs valgrind; about 12 minutes here)
set -euo pipefail
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac
command -v valgrind > /dev/null || { echo "$0: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/bench-driver-builds.sh
out=$CARGO_TARGET_DIR/bench/synth-instructions
mkdir -p "$out"
bench_builds "$out/bin"
c1=$(bench_c1)
# Extra callgrind options for the next `run`.
cg_extra=()
run() {
  local name=$1
  shift
  rm -rf "$out/report-$name"
  local synthesis=synth_driver::prover::synthesize_reference
  rm -f "$out/$name.cg" "$out/$name.cg".*
  # Its log kept, and shown if the run fails.
  valgrind --tool=callgrind --zero-before="$synthesis" --dump-after="$synthesis" \
    --callgrind-out-file="$out/$name.cg" "${cg_extra[@]}" \
    "$out/bin/synth-driver" "$@" --json porep --c1 "$c1" --partition 0 > /dev/null \
    2> "$out/$name.log" || { cat "$out/$name.log" >&2; return 1; }
  # Part 1 is the dump at the synthesis' end; the last part, the rest of the run.
  callgrind_annotate --auto=no --threshold=100 "$out/$name.cg.1" > "$out/$name.txt"
}
# No timeline: its sampler runs every 10 ms of wall time, so under callgrind (about
# 50 times slower) it would add instructions in proportion to the slowdown.
run off --trace off   # (the timeline starts with the first mode other than off)
run count --trace count --timeline-ms 0
run sample --trace sample:1000 --timeline-ms 0
# Per instruction, for `record_site`'s part, which is inlined (the counts are the
# same).
cg_extra=(--dump-instr=yes)
run sites-depth-1 --trace sites --depth 1 --timeline-ms 0
run sites --trace sites --timeline-ms 0
# The allocation count from a report of a run of its own (writing a report runs
# instructions of its own, which the runs above leave out).
rm -rf "$out/report-sites"
"$out/bin/synth-driver" --trace sites --report "$out/report-sites" --json porep --c1 "$c1" \
  --partition 0 > /dev/null 2> "$out/report-sites.log" || { cat "$out/report-sites.log" >&2; exit 1; }
cargo run -q --release -p analyzer -- info "$out/report-sites" --format json > "$out/report-sites.json"
python3 - "$out" <<'EOF'
import json, re, sys
from pathlib import Path
sys.path.insert(0, "scripts")
import record_site_parts
out = Path(sys.argv[1])
def counts(name):
    total = None
    for line in (out / f"{name}.txt").read_text().splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        # callgrind_annotate names a function's object file after it, at times.
        what = re.sub(r" \[[^\]]*\]$", "", m.group(2))
        if what == "PROGRAM TOTALS":
            total = n
    if total is None:
        sys.exit(f"bench-synth-instructions: no PROGRAM TOTALS line in {out / f'{name}.txt'}")
    record = 0
    if name.startswith("sites"):
        record = sum(record_site_parts.parts(str(out / f"{name}.cg.1"),
                                             str(out / "bin/synth-driver")).values())
    return total, record
# Allocations and reallocs: the analyzer's phase `alloc_count` counts allocations,
# `realloc_count` reallocs (each recorded with its stack in `sites` mode).
phases = json.loads((out / "report-sites.json").read_text())["phases"]
allocs = next(p["alloc_count"] + p["realloc_count"] for p in phases if p["phase"] == "synthesize")
off, _ = counts("off")
print(f"2 KiB PoRep partition 0, synthesis only: {allocs:,} allocations and reallocs recorded\n")
print("| `--trace` | synthesis instructions | added per allocation | of which `record_site` |")
print("|---|---:|---:|---:|")
for name, label in [("off", "off"), ("count", "count"), ("sample", "sample:1000"),
                    ("sites-depth-1", "sites, depth 1"), ("sites", "sites, default depth")]:
    total, record = counts(name)
    added = "" if name == "off" else f"{(total - off) / allocs:+,.0f}"
    per_call = f"{record / allocs:,.0f}" if record else ""
    print(f"| {label} | {total / 1e9:.2f} G | {added} | {per_call} |")
print(allocs, file=open(out / "allocs.txt", "w"))
EOF
echo
python3 scripts/record_site_parts.py "$out/sites.cg.1" "$out/bin/synth-driver" "$(cat "$out/allocs.txt")"
