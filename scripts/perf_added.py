#!/usr/bin/env python3
"""Where a tracer mode's added time goes: interleaved `perf record -e cpu-clock` runs
of one binary with two sets of arguments (a baseline, such as `--trace off`, and the
mode), and per round the samples each symbol gains in the mode's run over the
baseline's run of the same round.

The gains, grouped: the tracer's own functions, the inner allocator, the kernel, and
the rest of the program, each over the round's baseline total (samples come at a
fixed rate, so that is the time it adds), with the median over rounds.
Callgrind shows that a mode adds instructions only inside the tracer's functions;
this says whether it also slows the program's own code (cache or branch-predictor
pollution), which an instruction count cannot show. Whole runs are sampled (setup
too), so the ratio of totals is below the synthesis-only ratio; the groups' shares
of the added time are what to read.

Standard library only; needs `perf` (software `cpu-clock` sampling works on
machines without hardware counters).

Usage:
  scripts/perf_added.py [--rounds N] [--freq HZ] [--top K] \\
      --base='ARGS...' --mode='ARGS...' BIN -- WORKLOAD...
(Options before BIN; `=` because the arguments start with `--`.)
Example (sites mode against the tracer off, 2 KiB PoRep partition 0):
  scripts/perf_added.py --rounds 8 --base='--trace off' --mode='--trace sites' \\
      target/release/synth-driver -- \\
      --json porep --c1 sectors/2k/c1.json --partition 0
"""

import argparse
import re
import shlex
import statistics
import sys
import tempfile
from pathlib import Path

from ab_perf_share import record, samples_by_symbol
from positive import positive
import order_stats

# Groups, first match wins; user-space symbols that match none are the program's, or
# the C library's and libm's (memmove, log), which the tracer calls too: no symbol
# says who called them.
GROUPS = [
    ("tracer", re.compile(r"alloc_tracer::")),
    ("inner allocator", re.compile(r"^(_rjem_|je_|mi_|_mi_)|jemalloc|mimalloc")),
    ("allocator entry points", re.compile(r"__rust_(alloc|dealloc|realloc|alloc_zeroed)\b"
                                         r"|synth_driver::allocator::")),
]


def group(kind: str, symbol: str) -> str:
    if kind == "k":
        return "kernel"
    for name, pattern in GROUPS:
        if pattern.search(symbol):
            return name
    return "program and C library"


def grouped(found: dict[tuple[str, str], int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for (kind, symbol), n in found.items():
        g = group(kind, symbol)
        out[g] = out.get(g, 0) + n
    return out


def paired(base: list[dict], mode: list[dict], key: str) -> list[float]:
    """Per round, `key`'s samples in the mode less the baseline's, over the
    baseline's total of that round (both runs next to each other in time, so a
    change of the machine's speed between rounds cancels)."""
    return [(m.get(key, 0) - b.get(key, 0)) / sum(b.values()) for b, m in zip(base, mode)]


def middle_half(xs: list[float]) -> str:
    """The middle half of `xs`, as the other benchmarks' tables give it
    (`order_stats.quartiles`), or nothing under two values."""
    q1, q3 = order_stats.quartiles(xs)
    return "" if q1 is None else f" ({q1:+.3f} to {q3:+.3f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=positive, default=8, help="runs of each (default 8)")
    p.add_argument("--freq", type=int, default=5000, help="samples a second (default 5000)")
    p.add_argument("--top", type=int, default=15, help="symbols listed (default 15)")
    p.add_argument("--base", required=True, help="the baseline's arguments, one string")
    p.add_argument("--mode", required=True, help="the mode's arguments, one string")
    p.add_argument("binary")
    p.add_argument("workload", nargs=argparse.REMAINDER,
                   help="-- then the arguments both run with, after their own")
    a = p.parse_args()
    workload = a.workload[1:] if a.workload[:1] == ["--"] else a.workload
    configs = {"base": shlex.split(a.base) + workload, "mode": shlex.split(a.mode) + workload}
    runs: dict[str, list] = {"base": [], "mode": []}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        for r in range(a.rounds):
            for name in ("base", "mode") if r % 2 == 0 else ("mode", "base"):
                record(a.binary, configs[name], a.freq, data)
                found = samples_by_symbol(data)
                runs[name].append(found)
                print(f"round {r + 1} {name}: {sum(found.values())} samples", flush=True)
    base, mode = runs["base"], runs["mode"]
    ratio = statistics.median(sum(m.values()) / sum(b.values()) for b, m in zip(base, mode))
    print(f"\n{a.rounds} rounds; whole-run samples, mode / base: {ratio:.3f}x (median of "
          "the rounds' ratios). Per group, samples added over the round's baseline "
          "total (median of the rounds; in brackets the middle half):\n")
    print("| group | added, x of the baseline | share of the added time |")
    print("|---|---:|---:|")
    gb, gm = [grouped(r) for r in base], [grouped(r) for r in mode]
    names = sorted(set().union(*gb, *gm))
    added = {g: paired(gb, gm, g) for g in names}
    total = statistics.median(sum(added[g][r] for g in names) for r in range(a.rounds))
    for g in sorted(names, key=lambda g: -statistics.median(added[g])):
        med = statistics.median(added[g])
        share = f"{100 * med / total:.0f} %" if total > 0 else "n/a"
        print(f"| {g} | {med:+.3f}{middle_half(added[g])} | {share} |")
    print("\nSymbols whose samples changed most (median per round, mode less base):")
    keys = set().union(*base, *mode)
    change = {k: statistics.median(m.get(k, 0) - b.get(k, 0) for b, m in zip(base, mode))
              for k in keys}
    ranked = sorted(keys, key=lambda k: -change[k])
    for k in ranked[:a.top] + ranked[-5:]:
        print(f"{change[k]:+8.0f}  [{k[0]}] {k[1][:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
