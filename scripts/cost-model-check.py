#!/usr/bin/env python3
"""Checks the analyzer's cost model against measured A/B runs of real patches.

For each synth-driver patch variant (`inplace-lc`, `pooled-enforce`) against
`baseline`, on the same SHA-256 chain under the mirror prover; or, with --c1, for
`pooled-enforce` (the one variant that applies to PoRep) on a PoRep partition
synthesized from a C1 output, the workload the tracer is built for:

1. one traced run per variant (`--trace sites`) writes a report;
2. `analyzer diff baseline VARIANT` gives the predicted change in seconds (the cost
   model): the median over calibrations made by `analyzer calibrate` in the session,
   one before each process of step 3 (this VM's speed changes over minutes, and a
   calibration and the rounds it is compared with should see the same stretch of
   it), unless --calibration names one; `pooled-enforce` recycles the blocks it stops
   allocating, and is diffed with `--recycled`;
3. untraced runs (`--trace off`) give the measured synthesis times: `--runs` rounds,
   each running baseline and every variant once, in one process
   (`synth-driver --variant baseline,inplace-lc,pooled-enforce --iterations ...`:
   the order alternates round by round and a round's variants share a message),
   spread over `--processes` processes (so no one process's memory layout sets the
   figure), each after a warm-up round that is not counted. The measured saving is
   the median of the per-round differences (baseline minus variant), with a
   distribution-free 95 % interval of that median.
   Rounds of a fraction of a second each are what make this precise on a VM whose
   speed drifts by up to 30 % over seconds: the same check with whole processes as
   rounds (1.5 s each) scattered its per-round differences ten times as widely.

With --callgrind-blocks N (with --c1: --callgrind, on the same partition), each
variant also runs once under valgrind's callgrind on an N-block chain, its
instructions counted from the mirror prover's `synthesize` entry to its return
(what the rounds time; loading the C1 and building the circuit left out):
instruction totals are repeatable to the instruction, so the instruction saving, scaled to the
baseline's median time, is a deterministic check on the noisy wall-time figure (it
assumes unchanged instructions per cycle).

Prints a table and writes OUT/results.csv (the format notebooks/03-cost-model.ipynb
reads), OUT/rounds.csv (every round's synthesis seconds per variant) and
OUT/reports/<variant>/. Standard library only.

    scripts/cost-model-check.py [--blocks 8] [--runs 150] [--processes 5] [--out DIR]
    scripts/cost-model-check.py --c1 C1 [--partition 0] [--runs 60] [--callgrind] [--out DIR]

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

from order_stats import interval_name, median_interval
from positive import positive

VARIANTS = ["inplace-lc", "pooled-enforce"]
# The variants that apply to PoRep (`inplace-lc` rewrites SHA-256's gadgets only).
POREP_VARIANTS = ["pooled-enforce"]
# What each variant's patch is, as `analyzer diff` is told.
DIFF_FLAGS = {"pooled-enforce": ["--recycled"]}
ROOT = Path(__file__).resolve().parent.parent


def run(cmd, **kw):
    r = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit(f"cost-model-check: {' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr}")
    return r


def synthesis_instructions(dump: Path, synthesis: str) -> int:
    """The instructions of callgrind's dump at the synthesis' end (its first part,
    `OUT.1`, written by `--dump-after`)."""
    if not dump.is_file():
        sys.exit(f"cost-model-check: callgrind wrote no dump at {dump}: {synthesis} "
                 "never returned (renamed, or inlined into its caller?)")
    for line in dump.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    sys.exit(f"cost-model-check: {dump} holds no instruction total")


def workload(args, seed=0, blocks=None):
    """synth-driver's subcommand and its arguments: the PoRep partition of --c1, or
    a SHA-256 chain of `blocks` (default --blocks) on `seed`."""
    if args.c1 is not None:
        return ["porep", "--c1", str(args.c1), "--partition", str(args.partition)]
    return ["sha256", "--blocks", str(blocks or args.blocks), "--seed", str(seed)]


def describe(args):
    """The workload in words, for the table's header."""
    if args.c1 is not None:
        return f"porep partition {args.partition} of {args.c1}"
    return f"sha256 --blocks {args.blocks}"


def synth(driver, variants, work, trace, report=None, iterations=1):
    """The JSON lines of one synth-driver run of `work` (`workload`), one per
    iteration."""
    cmd = [str(driver), "--prover", "mirror", "--variant", ",".join(variants),
           "--trace", trace, "--json"]
    if report:
        cmd += ["--report", str(report)]
    cmd += work + ["--iterations", str(iterations)]
    out = run(cmd).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(rows) != iterations:
        sys.exit(f"cost-model-check: expected {iterations} JSON lines from {' '.join(cmd)}, "
                 f"got:\n{out}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=8,
                    help="SHA-256 blocks per synthesis (default 8, about 0.2 s)")
    ap.add_argument("--c1", type=Path,
                    help="a C1 output (synth-driver seal writes one): check pooled-enforce "
                         "on its PoRep partition instead of the SHA-256 chain")
    ap.add_argument("--partition", type=int, default=0, help="the partition of --c1 (default 0)")
    ap.add_argument("--runs", type=positive,
                    help="interleaved rounds (default 150; 60 with --c1, whose rounds "
                         "take seconds)")
    ap.add_argument("--processes", type=positive, default=5,
                    help="processes the rounds are spread over (default 5)")
    ap.add_argument("--out", type=Path, default=Path("/var/tmp/alloc-profiler/cost-model"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries already built")
    ap.add_argument("--calibration", type=Path,
                    help="calibration file for the analyzer (default: calibrate before "
                         "each process, into OUT/calibration-N.json)")
    ap.add_argument("--quick-calibration", action="store_true",
                    help="calibrate with `analyzer calibrate --quick` (for CI)")
    ap.add_argument("--callgrind-blocks", type=int, default=0,
                    help="also count instructions under callgrind on a chain this long")
    ap.add_argument("--callgrind", action="store_true",
                    help="with --c1: also count instructions under callgrind on the partition")
    args = ap.parse_args()
    if args.c1 is not None:
        if args.callgrind_blocks:
            ap.error("--callgrind-blocks is for the SHA-256 chain; with --c1 give --callgrind")
        if not args.c1.is_file():
            ap.error(f"--c1 {args.c1}: no such file (synth-driver seal --sector-size 2KiB "
                     "--out DIR writes DIR/c1.json)")
    elif args.callgrind:
        ap.error("--callgrind goes with --c1; on the SHA-256 chain give --callgrind-blocks N")
    if args.runs is None:
        args.runs = 60 if args.c1 is not None else 150
    variants = POREP_VARIANTS if args.c1 is not None else VARIANTS

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
    # An earlier run's tables are not left to read as this run's should it fail.
    for stale in ("results.csv", "rounds.csv"):
        (args.out / stale).unlink(missing_ok=True)
    reports = args.out / "reports"

    # 1. One traced run per variant; the digests prove the constraint systems equal.
    digests = {}
    for v in ["baseline"] + variants:
        print(f"tracing {v} ...", file=sys.stderr)
        r = synth(driver, [v], workload(args), "sites", reports / v)[0]
        digests[v] = r.get("abc_digest")
    if len(set(digests.values())) != 1:
        sys.exit(f"cost-model-check: a/b/c digests differ: {digests}")

    # 2 and 3. Predictions and interleaved untraced runs: rounds in a few processes,
    # each process preceded by a calibration of its own (unless one is given), so that
    # the calibrations sample the same stretch of the machine's drift as the rounds.
    def predict(calibration):
        out = {}
        for v in variants:
            cmd = [str(analyzer), "diff", str(reports / "baseline"), str(reports / v),
                   "--format", "json", "--calibration", str(calibration)] + DIFF_FLAGS.get(v, [])
            d = json.loads(run(cmd).stdout)
            out[v] = (-d["predicted_change_s"], d["base"]["alloc_count"],
                      d["change"]["alloc_count"])
        return out

    predictions = []
    if args.calibration is not None:
        predictions.append(predict(args.calibration))
    times = {v: [] for v in ["baseline"] + variants}
    processes = max(1, min(args.processes, args.runs))
    done = 0
    for p in range(processes):
        rounds = (args.runs - done) // (processes - p)
        if rounds == 0:
            continue
        if args.calibration is None:
            calibration = args.out / f"calibration-{p + 1}.json"
            print(f"calibrating ({p + 1}/{processes}) ...", file=sys.stderr)
            run([str(analyzer), "calibrate", "--out", str(calibration)]
                + (["--quick"] if args.quick_calibration else []))
            predictions.append(predict(calibration))
        # One more round first, discarded: a process's first synthesis pays for page
        # faults and the allocator's first growth, and always runs baseline first.
        rows = synth(driver, ["baseline"] + variants, workload(args, seed=1000 * p), "off",
                     iterations=(rounds + 1) * len(times))
        for i in range(len(times), len(rows), len(times)):
            by_variant = {r["variant"]: r["synth_seconds"] for r in rows[i:i + len(times)]}
            if set(by_variant) != set(times):
                sys.exit(f"cost-model-check: round without every variant: {rows[i:i + len(times)]}")
            for v in times:
                times[v].append(by_variant[v])
        done += rounds
        print(f"process {p + 1}/{processes}: {done}/{args.runs} rounds; medians so far "
              + ", ".join(f"{v} {statistics.median(times[v]):.4f} s" for v in times),
              file=sys.stderr)
    # The prediction is the median over the calibrations, with their range.
    predicted = {}
    for v in variants:
        savings = [pr[v][0] for pr in predictions]
        predicted[v] = {
            "saving_s": statistics.median(savings),
            "low_s": min(savings),
            "high_s": max(savings),
            "base_allocs": predictions[0][v][1],
            "variant_allocs": predictions[0][v][2],
        }

    # 4. Optional: instruction totals under callgrind, repeatable to the instruction:
    # the synthesis' alone (callgrind zeroes its counts on entering the mirror
    # prover's `synthesize` and dumps them on leaving it), as its time is the
    # synthesis' alone; loading the C1 and building the circuit are left out.
    instructions = {}
    if args.callgrind_blocks or args.callgrind:
        synthesis = "synth_driver::mirror::synthesize"
        for v in ["baseline"] + variants:
            print(f"callgrind {v} ...", file=sys.stderr)
            out = args.out / f"callgrind-{v}.out"
            for old in args.out.glob(f"callgrind-{v}.out*"):
                old.unlink()
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   f"--zero-before={synthesis}", f"--dump-after={synthesis}",
                   str(driver), "--prover", "mirror", "--variant", v, "--trace", "off"]
            cmd += workload(args, blocks=args.callgrind_blocks or None)
            run(cmd)
            instructions[v] = synthesis_instructions(Path(f"{out}.1"), synthesis)

    rows = []
    for v in variants:
        diffs = [b - x for b, x in zip(times["baseline"], times[v])]
        interval = median_interval(diffs)
        rows.append({
            "variant": v,
            "predicted_saving_s": predicted[v]["saving_s"],
            # The range of the predictions over the session's calibrations.
            "predicted_saving_low_s": predicted[v]["low_s"],
            "predicted_saving_high_s": predicted[v]["high_s"],
            "measured_saving_s": statistics.median(diffs),
            # A distribution-free 95 % interval of that median (order statistics):
            # how well the rounds pin the measured saving down on this machine.
            "measured_saving_low_s": interval[0],
            "measured_saving_high_s": interval[1],
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

    with open(args.out / "rounds.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["round"] + list(times))
        w.writerows([i + 1] + [times[v][i] for v in times] for i in range(args.runs))

    load = os.getloadavg()[0]
    print(f"{describe(args)}, mirror prover, {args.runs} interleaved rounds "
          f"in {processes} processes, "
          f"load {load:.2f}, {time.strftime('%Y-%m-%d %H:%M')}")
    name = interval_name(args.runs)
    print(f"predicted: median over {len(predictions)} calibration(s) [their range]; measured: "
          f"median of per-round differences [{name}]")
    print(f"{'variant':<16} {'allocs base -> variant':>26} {'predicted':>10} {'range':>18} "
          f"{'measured':>10} "
          f"{'interval':>18} {'base med':>9} {'var med':>9} {'pred/meas':>9}")
    for r in rows:
        ratio = (r["predicted_saving_s"] / r["measured_saving_s"]
                 if r["measured_saving_s"] else float("nan"))
        print(f"{r['variant']:<16} {r['baseline_alloc_count']:>12} -> {r['variant_alloc_count']:>10} "
              f"{r['predicted_saving_s']:>9.4f}s "
              f"{r['predicted_saving_low_s']:>9.4f}s..{r['predicted_saving_high_s']:.4f}s "
              f"{r['measured_saving_s']:>9.4f}s "
              f"{r['measured_saving_low_s']:>9.4f}s..{r['measured_saving_high_s']:.4f}s "
              f"{r['baseline_median_s']:>8.4f}s {r['variant_median_s']:>8.4f}s {ratio:>9.2f}")
    if instructions:
        counted = (describe(args) if args.callgrind
                   else f"sha256 --blocks {args.callgrind_blocks}")
        print(f"callgrind, {counted}: baseline "
              f"{instructions['baseline']:,} instructions")
        for r in rows:
            v = r["variant"]
            print(f"{v:<16} {instructions[v]:>15,} instructions, saving "
                  f"{100 * r['instruction_saving_share']:.2f} % -> {r['instruction_saving_s']:.4f} s "
                  f"at the baseline median; predicted/instructions "
                  f"{r['predicted_saving_s'] / r['instruction_saving_s']:.2f}")
    print(f"results: {args.out / 'results.csv'}, rounds: {args.out / 'rounds.csv'}")


if __name__ == "__main__":
    main()
