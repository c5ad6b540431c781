#!/usr/bin/env python3
"""Checks the analyzer's cost model against measured A/B runs of real patches.

For each synth-driver patch variant (`inplace-lc`, `pooled-enforce`) against
`baseline`, on the same SHA-256 chain under the mirror prover:

1. one traced run per variant (`--trace sites`) writes a report;
2. `analyzer diff baseline VARIANT` gives the predicted change in seconds (the cost
   model, from this machine's calibration);
3. untraced runs (`--trace off`), interleaved baseline / variants, `--runs` rounds,
   give the measured synthesis times; the measured saving is the median of the
   per-round differences (baseline minus variant), the robust figure on a noisy
   machine, next to the medians of each side.

With --callgrind-blocks N, each variant also runs once under valgrind's callgrind on
an N-block chain: instruction totals are repeatable to the instruction, so the
instruction saving, scaled to the baseline's median time, is a deterministic check on
the noisy wall-time figure (it assumes unchanged instructions per cycle).

Prints a table and writes OUT/results.csv (the format notebooks/03-cost-model.ipynb
reads) and OUT/reports/<variant>/. Standard library only.

    scripts/cost-model-check.py [--blocks 64] [--runs 7] [--out DIR]

Binaries come from $CARGO_TARGET_DIR/release (default /var/tmp/alloc-profiler/target),
built with `cargo build --workspace --release --all-targets` unless --no-build.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = ["inplace-lc", "pooled-enforce"]
ROOT = Path(__file__).resolve().parent.parent


def run(cmd, **kw):
    r = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit(f"cost-model-check: {' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr}")
    return r


def synth(driver, variant, blocks, trace, report=None):
    cmd = [str(driver), "--prover", "mirror", "--variant", variant, "--trace", trace, "--json"]
    if report:
        cmd += ["--report", str(report)]
    cmd += ["sha256", "--blocks", str(blocks)]
    out = run(cmd).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(rows) != 1:
        sys.exit(f"cost-model-check: expected one JSON line from {' '.join(cmd)}, got:\n{out}")
    return rows[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=64, help="SHA-256 blocks (default 64)")
    ap.add_argument("--runs", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--out", type=Path, default=Path("/var/tmp/alloc-profiler/cost-model"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries already built")
    ap.add_argument("--calibration", type=Path, help="calibration file for the analyzer")
    ap.add_argument("--callgrind-blocks", type=int, default=0,
                    help="also count instructions under callgrind on a chain this long")
    args = ap.parse_args()

    target = Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/alloc-profiler/target"))
    if not args.no_build:
        env = dict(os.environ, CARGO_TARGET_DIR=str(target))
        subprocess.run(
            ["cargo", "build", "--workspace", "--release", "--all-targets", "--quiet"],
            check=True, cwd=ROOT, env=env,
        )
    driver, analyzer = target / "release" / "synth-driver", target / "release" / "analyzer"
    for b in (driver, analyzer):
        if not b.exists():
            sys.exit(f"cost-model-check: {b} is missing (build the workspace first)")
    args.out.mkdir(parents=True, exist_ok=True)
    reports = args.out / "reports"

    # 1. One traced run per variant; the digests prove the constraint systems equal.
    digests = {}
    for v in ["baseline"] + VARIANTS:
        print(f"tracing {v} ...", file=sys.stderr)
        r = synth(driver, v, args.blocks, "sites", reports / v)
        digests[v] = r.get("abc_digest")
    if len(set(digests.values())) != 1:
        sys.exit(f"cost-model-check: a/b/c digests differ: {digests}")

    # 2. Predictions from the cost model.
    predicted = {}
    for v in VARIANTS:
        cmd = [str(analyzer), "diff", str(reports / "baseline"), str(reports / v), "--format", "json"]
        if args.calibration:
            cmd += ["--calibration", str(args.calibration)]
        d = json.loads(run(cmd).stdout)
        predicted[v] = {
            "saving_s": -d["predicted_change_s"],
            "base_allocs": d["base"]["alloc_count"],
            "variant_allocs": d["change"]["alloc_count"],
        }

    # 3. Interleaved untraced runs.
    times = {v: [] for v in ["baseline"] + VARIANTS}
    for i in range(args.runs):
        order = ["baseline"] + VARIANTS if i % 2 == 0 else VARIANTS[::-1] + ["baseline"]
        for v in order:
            times[v].append(synth(driver, v, args.blocks, "off")["synth_seconds"])
        print(f"round {i + 1}/{args.runs}: "
              + ", ".join(f"{v} {times[v][-1]:.3f} s" for v in times), file=sys.stderr)

    # 4. Optional: instruction totals under callgrind, repeatable to the instruction.
    instructions = {}
    if args.callgrind_blocks:
        for v in ["baseline"] + VARIANTS:
            print(f"callgrind {v} ...", file=sys.stderr)
            out = args.out / f"callgrind-{v}.out"
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   str(driver), "--prover", "mirror", "--variant", v, "--trace", "off",
                   "sha256", "--blocks", str(args.callgrind_blocks)]
            err = run(cmd).stderr
            totals = [line for line in err.splitlines() if "Collected :" in line]
            instructions[v] = int(totals[-1].split(":")[-1].strip())

    rows = []
    for v in VARIANTS:
        diffs = [b - x for b, x in zip(times["baseline"], times[v])]
        rows.append({
            "variant": v,
            "predicted_saving_s": predicted[v]["saving_s"],
            "measured_saving_s": statistics.median(diffs),
            "baseline_median_s": statistics.median(times["baseline"]),
            "variant_median_s": statistics.median(times[v]),
            "runs": args.runs,
            "baseline_alloc_count": predicted[v]["base_allocs"],
            "variant_alloc_count": predicted[v]["variant_allocs"],
        })
        if instructions:
            share = 1 - instructions[v] / instructions["baseline"]
            rows[-1]["instruction_saving_share"] = share
            rows[-1]["instruction_saving_s"] = share * rows[-1]["baseline_median_s"]
    with open(args.out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    load = os.getloadavg()[0]
    print(f"sha256 --blocks {args.blocks}, mirror prover, {args.runs} interleaved rounds, "
          f"load {load:.2f}, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'variant':<16} {'allocs base -> variant':>26} {'predicted':>10} {'measured':>10} "
          f"{'base med':>9} {'var med':>9} {'pred/meas':>9}")
    for r in rows:
        ratio = (r["predicted_saving_s"] / r["measured_saving_s"]
                 if r["measured_saving_s"] else float("nan"))
        print(f"{r['variant']:<16} {r['baseline_alloc_count']:>12} -> {r['variant_alloc_count']:>10} "
              f"{r['predicted_saving_s']:>9.3f}s {r['measured_saving_s']:>9.3f}s "
              f"{r['baseline_median_s']:>8.3f}s {r['variant_median_s']:>8.3f}s {ratio:>9.2f}")
    if instructions:
        print(f"callgrind, sha256 --blocks {args.callgrind_blocks}: baseline "
              f"{instructions['baseline']:,} instructions")
        for r in rows:
            v = r["variant"]
            print(f"{v:<16} {instructions[v]:>15,} instructions, saving "
                  f"{100 * r['instruction_saving_share']:.2f} % -> {r['instruction_saving_s']:.3f} s "
                  f"at the baseline median; predicted/instructions "
                  f"{r['predicted_saving_s'] / r['instruction_saving_s']:.2f}")
    print(f"results: {args.out / 'results.csv'}")


if __name__ == "__main__":
    main()
