#!/usr/bin/env bash
# Instructions the tracer adds to a real synthesis, counted by cachegrind (repeatable
# to within about 0.1 %, unlike wall time on a shared 2-core VM):
# 2 KiB PoRep partition 0 with the tracer off, in sites mode at depth 1 and at the
# default depth, and in count and sample:1000 modes, each without the timeline
# sampler (see below). Prints a markdown table: the whole program's
# instructions, those added per recorded allocation or realloc over `off`, and the
# recording function's (`record_site`: the walk, the site lookup, the counters) per
# call. Allocations are the `alloc_count + realloc_count` of a sites run's report.
# Usage: scripts/bench-synth-instructions.sh   (needs valgrind; about 3 minutes here)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
source scripts/bench-driver-builds.sh
out=$CARGO_TARGET_DIR/bench/synth-instructions
mkdir -p "$out"
bench_builds "$out/bin"
c1=$(bench_c1)
run() {
  local name=$1
  shift
  rm -rf "$out/report-$name"
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$out/$name.cg" \
    "$out/bin/synth-driver" "$@" --json porep --c1 "$c1" --partition 0 > /dev/null 2>&1
  cg_annotate "$out/$name.cg" > "$out/$name.txt"
}
# No timeline: its sampler runs every 10 ms of wall time, so under cachegrind (about
# 50 times slower) it would add instructions in proportion to the slowdown.
run off --trace off --timeline-ms 0
run count --trace count --timeline-ms 0
run sample --trace sample:1000 --timeline-ms 0
run sites-depth-1 --trace sites --depth 1 --timeline-ms 0
run sites --trace sites --timeline-ms 0
# The allocation count from a report of a run of its own (writing a report runs
# instructions of its own, which the runs above leave out).
rm -rf "$out/report-sites"
"$out/bin/synth-driver" --trace sites --report "$out/report-sites" --json porep --c1 "$c1" \
  --partition 0 > /dev/null 2>&1
python3 - "$out" <<'EOF'
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
def counts(name):
    total, record = 0, 0
    for line in (out / f"{name}.txt").read_text().splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if m.group(2) == "PROGRAM TOTALS":
            total = n
        elif m.group(2).endswith("hot::sites::record_site"):
            record += n
    return total, record
t = json.loads((out / "report-sites" / "manifest.json").read_text())["totals"]
allocs = t["alloc_count"] + t["realloc_count"]
off, _ = counts("off")
print(f"2 KiB PoRep partition 0, {allocs:,} allocations and reallocs recorded\n")
print("| `--trace` | instructions | added per allocation | `record_site` per call |")
print("|---|---:|---:|---:|")
for name, label in [("off", "off"), ("count", "count"), ("sample", "sample:1000"),
                    ("sites-depth-1", "sites, depth 1"), ("sites", "sites, default depth")]:
    total, record = counts(name)
    added = "" if name == "off" else f"{(total - off) / allocs:+,.0f}"
    per_call = f"{record / allocs:,.0f}" if record else ""
    print(f"| {label} | {total / 1e9:.2f} G | {added} | {per_call} |")
EOF
