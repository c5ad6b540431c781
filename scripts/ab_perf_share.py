#!/usr/bin/env python3
"""Which of two builds spends less of its time in one function: interleaved
`perf record -e cpu-clock` runs of each build on the same command, and per run the
function's share of all the run's samples.

For changes to the tracer's hot path, where this machine's wall-time ratios move by
a few per cent between runs and instruction counts do not predict time (a change
that cut `record_site`'s instructions ran slower). A function's share of its own
run's samples does not move with the machine's speed as a whole, and it isolates
the function from the rest of the program. Runs alternate A, B, then B, A.

Prints each run (the function's samples, all samples, the share) and, per build,
the median share and the median of the per-round ratios B / A.

Standard library only; needs `perf` (software `cpu-clock` sampling works on
machines without hardware counters).

Usage:
  scripts/ab_perf_share.py [--runs N] [--symbol REGEX] [--freq HZ] BIN_A BIN_B -- ARGS...
Example (the recording function of sites mode, the walk inlined in it, 2 KiB PoRep
partition 0):
  scripts/ab_perf_share.py --symbol 'hot::alloc::alloc_recorded' \\
      old/synth-driver target/release/synth-driver -- \\
      --trace sites --json porep --c1 sectors/2k/c1.json --partition 0
"""

import argparse
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from positive import positive

# A `perf report --sort sym -F sample,sym` line: samples, then `[.]` or `[k]`, then
# the symbol.
LINE = re.compile(r"^\s*(\d+)\s+\[([^\]]+)\]\s+(.*?)\s*$")


def samples_by_symbol(data: Path) -> dict[tuple[str, str], int]:
    """The samples of each symbol in a perf.data, keyed by (`.` for user code or `k`
    for the kernel, symbol); a symbol listed twice (two copies of one generic
    function) is summed."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "sym",
         "--stdio", "-F", "sample,sym"],
        capture_output=True, text=True, check=True).stdout
    found: dict[tuple[str, str], int] = {}
    for line in report.splitlines():
        m = LINE.match(line)
        if m:
            key = (m.group(2), m.group(3))
            found[key] = found.get(key, 0) + int(m.group(1))
    return found


def record(binary: str, args: list[str], freq: int, data: Path) -> None:
    """Runs `binary` with `args` under `perf record -e cpu-clock` at `freq` samples a
    second into `data`; exits with the run's stderr if it fails."""
    run = subprocess.run(
        ["perf", "record", "-q", "-F", str(freq), "-e", "cpu-clock", "-o", str(data),
         binary, *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr[-2000:])
        raise SystemExit(f"{binary} {shlex.join(args)} failed ({run.returncode})")


def shares(data: Path, symbol: re.Pattern) -> tuple[int, int]:
    """The samples of symbols matching `symbol`, and all samples, in a perf.data."""
    found = samples_by_symbol(data)
    matched = sum(n for (_, sym), n in found.items() if symbol.search(sym))
    return matched, sum(found.values())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=positive, default=4, help="runs of each build (default 4)")
    p.add_argument("--symbol", default=r"hot::alloc::alloc_recorded",
                   help="regular expression for the function's symbol")
    p.add_argument("--freq", type=int, default=4000, help="samples a second (default 4000)")
    p.add_argument("a", help="build A (the baseline)")
    p.add_argument("b", help="build B")
    p.add_argument("args", nargs=argparse.REMAINDER,
                   help="-- then the arguments both builds run with")
    a = p.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    if not args:
        p.error("give the arguments to run after --")
    symbol = re.compile(a.symbol)
    builds = {"A": a.a, "B": a.b}
    found: dict[str, list[float]] = {"A": [], "B": []}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        for r in range(a.runs):
            for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                record(builds[name], args, a.freq, data)
                matched, total = shares(data, symbol)
                if total == 0:
                    print(f"run {r + 1} of {name}: no samples", file=sys.stderr)
                    return 1
                found[name].append(matched / total)
                print(f"run {r + 1} {name}: {matched} of {total} samples, "
                      f"{100 * matched / total:.2f} %", flush=True)
    for name in ("A", "B"):
        print(f"{name} {builds[name]}: median share {100 * statistics.median(found[name]):.2f} %")
    ratios = [b / a for a, b in zip(found["A"], found["B"]) if a > 0]
    if ratios:
        print(f"B / A: {statistics.median(ratios):.3f} (median of {len(ratios)} rounds; "
              f"range {min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
