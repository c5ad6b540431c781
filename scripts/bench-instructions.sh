#!/usr/bin/env bash
# Instructions per malloc+free pair that alloc-tracer adds in each mode, counted by
# callgrind: repeatable to the instruction, unlike wall time on a shared 2-core VM.
# Each run measures jemalloc alone and then one configuration; a baseline run measures
# jemalloc alone. A run is F + J + C instructions: F the process's own start and end,
# J jemalloc's pairs, C the configuration's pairs (jemalloc's again, and what the
# configuration adds). A baseline is F + J, and one of twice the pairs F + 2J, which
# gives F. So a configuration adds (its run + F - 2 x baseline) / pairs instructions
# per pair over jemalloc.
# Usage: scripts/bench-instructions.sh   (needs valgrind)
set -euo pipefail
usage() { sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; }
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) usage >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
command -v valgrind > /dev/null || { echo "$0: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
# The compiler's messages rendered on standard error, so that a failed build says why.
bin=$(cargo bench -q -p alloc-tracer --bench alloc_pair --no-run \
  --message-format=json-render-diagnostics \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "alloc_pair" and m.get("executable"):
        print(m["executable"])')
pairs=200000
# One round of `pairs` pairs on 1 and on 2 threads, after a warm-up of pairs/10 on each:
# every configuration runs 3.3 x pairs pairs in all.
per_config=$(( pairs * 33 / 10 ))
count() {
  count_pairs "$pairs" "$@"
}
count_pairs() {
  local n=$1 log
  shift
  # The whole log on a failure, not an empty count.
  log=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" 1 "$n" "$@" 2>&1 >/dev/null) ||
    { echo "$log" >&2; return 1; }
  local found
  found=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' <<< "$log")
  # No count found (valgrind's output changed) is an error, not a count of 0.
  [[ $found =~ ^[0-9]+$ ]] || { echo "$log" >&2; echo "bench-instructions: no 'Collected' count in callgrind's output above" >&2; return 1; }
  echo "$found"
}
# Per way of reaching the allocator (see benches/alloc_pair.rs): a run of jemalloc
# alone reached that way is the baseline of that column.
base_inlined=$(count "no such configuration" inlined)
base_called=$(count "no such configuration" called)
# F, the instructions of a run that are no pair's.
fixed_inlined=$(( 2 * base_inlined - $(count_pairs $((2 * pairs)) "no such configuration" inlined) ))
fixed_called=$(( 2 * base_called - $(count_pairs $((2 * pairs)) "no such configuration" called) ))
printf '| configuration | inlined: instructions per pair added | called: instructions per pair added |\n|---|---:|---:|\n'
for c in floor off count sample "sites, depth 16, no lifetimes" "sites, depth 16, lifetimes 1/64" "sites, depth 48, no lifetimes" "sites, depth 48, lifetimes 1/64"; do
  inlined=$(count "$c" inlined)
  called=$(count "$c" called)
  awk -v c="$c" -v i="$inlined" -v bi="$base_inlined" -v fi="$fixed_inlined" \
    -v k="$called" -v bk="$base_called" -v fk="$fixed_called" -v n="$per_config" \
    'BEGIN { printf "| %s | %.1f | %.1f |\n", c, (i + fi - 2 * bi) / n, (k + fk - 2 * bk) / n }'
done
