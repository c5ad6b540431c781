#!/usr/bin/env python3
"""What each tracer mode costs a synthesis, timed in rounds inside one process:
`synth-driver --trace off,count,sample:1000,sites --iterations ...` runs every mode
once per round (the order reversed every other round), each with its own default
settings, so the runs a round compares lie seconds apart at most, where rounds of
fresh processes lie tens of seconds apart on a VM whose speed drifts over seconds.

Each of --processes processes runs --rounds rounds (--porep-rounds for PoRep), so
that no one process's memory layout sets the figure, each after a warm-up round that
is not counted: rounds times processes in all. A mode's
figure is the median over rounds of its synthesis time over the `off` run's of the
same round, with a distribution-free 95 % interval of that median (order statistics:
no assumption on how rounds scatter) and the middle half of the rounds' ratios.

Workloads: the SHA-256 chain of --sha-blocks blocks (short rounds, the tightest
figure) and, with --c1, 2 KiB PoRep partition 0 (rounds of a few seconds: each
iteration also builds the circuit and counts its shape, untimed).

    scripts/mode_turns.py --driver BIN [--c1 C1] [--rounds N] [--processes P]
                          [--modes off,count,sample:1000,sites]
                          [--driver-options='--heap-sample 0'] [--out DIR]

Writes OUT/mode-turns.md, mode-turns.csv and mode-turns-rounds.csv. Standard library
only.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from order_stats import interval_name, median_interval, quartiles
from positive import positive


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def process_rounds(driver, modes, options, workload, rounds, seed):
    """Synthesis seconds by mode, one dict per counted round, of one process that
    runs `rounds` rounds after a warm-up round."""
    n = len(modes)
    cmd = [str(driver), "--json", "--trace", ",".join(modes)] + options + workload
    cmd += ["--seed", str(seed)] if workload[0] == "sha256" else []
    cmd += ["--iterations", str((rounds + 1) * n)]
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"mode_turns: {' '.join(cmd)} exited with {r.returncode}:\n{r.stderr[-3000:]}")
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    if len(lines) != (rounds + 1) * n:
        sys.exit(f"mode_turns: expected {(rounds + 1) * n} JSON lines from {' '.join(cmd)}, "
                 f"got {len(lines)}")
    by_round = {}
    for line in lines:
        by_round.setdefault(line["iteration"] // n, {})[line["trace"]] = line["synth_seconds"]
    return [by_round[k] for k in sorted(by_round) if k > 0]


def summarize(workload, modes, rounds):
    rows = []
    base = modes[0]
    for mode in modes:
        ratios = [r[mode] / r[base] for r in rounds]
        lo, hi = median_interval(ratios)
        q1, q3 = quartiles(ratios)
        rows.append({
            "workload": workload,
            "mode": mode,
            "rounds": len(ratios),
            "ratio_median": statistics.median(ratios),
            "ratio_ci95_low": lo,
            "ratio_ci95_high": hi,
            "ratio_q1": q1,
            "ratio_q3": q3,
            "synth_s_median": statistics.median(r[mode] for r in rounds),
        })
    return rows


def markdown(rows, base):
    name = interval_name(min((r["rounds"] for r in rows), default=0))
    out = [f"| workload | `--trace` | synthesis / {base}, median [{name}] | middle half of rounds | synthesis s | rounds |",
           "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        if r["mode"] == base:
            ratio, half = "1", ""
        else:
            ratio = f"**{r['ratio_median']:.3f}x** [{r['ratio_ci95_low']:.3f}, {r['ratio_ci95_high']:.3f}]"
            half = f"{r['ratio_q1']:.3f}-{r['ratio_q3']:.3f}"
        out.append(f"| {r['workload']} | {r['mode']} | {ratio} | {half} | "
                   f"{r['synth_s_median']:.3f} | {r['rounds']} |")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--driver", type=Path, required=True, help="synth-driver, default build")
    p.add_argument("--c1", type=Path, help="2 KiB sector's c1.json: time PoRep partition 0 too")
    p.add_argument("--sha-blocks", type=positive, default=8)
    p.add_argument("--rounds", type=positive, default=200, help="SHA-256 rounds per process")
    p.add_argument("--porep-rounds", type=positive, default=10, help="PoRep rounds per process")
    p.add_argument("--processes", type=positive, default=3)
    p.add_argument("--modes", default="off,count,sample:1000,sites",
                   help="comma-separated, the first the baseline")
    p.add_argument("--driver-options", default="",
                   help="more synth-driver options for every mode, e.g. '--heap-sample 0'")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--check-args", action="store_true",
                   help="only check the arguments (scripts/bench-mode-turns.sh, before it builds)")
    a = p.parse_args()
    if len(a.modes.split(",")) < 2:
        p.error("--modes: give the baseline and at least one mode to compare with it")
    if a.check_args:
        return
    options = a.driver_options.split()
    modes = a.modes.split(",")
    # An earlier run's tables are not left to read as this run's should it fail.
    for stale in ("mode-turns.md", "mode-turns.csv", "mode-turns-rounds.csv"):
        (a.out / stale).unlink(missing_ok=True)

    workloads = [(f"SHA-256, {a.sha_blocks} blocks", ["sha256", "--blocks", str(a.sha_blocks)], a.rounds)]
    if a.c1:
        workloads.append(("2 KiB PoRep partition 0",
                          ["porep", "--c1", str(a.c1), "--partition", "0"], a.porep_rounds))
    rows, all_rounds = [], []
    for name, workload, rounds in workloads:
        kept = []
        for proc in range(a.processes):
            got = process_rounds(a.driver, modes, options, workload, rounds, seed=proc)
            kept += got
            all_rounds += [(name, proc, i, r) for i, r in enumerate(got)]
            medians = ", ".join(f"{m} {statistics.median(r[m] / r[modes[0]] for r in got):.3f}x"
                                for m in modes[1:])
            log(f"{name}: process {proc + 1}/{a.processes}, {len(got)} rounds: {medians}")
        rows += summarize(name, modes, kept)

    a.out.mkdir(parents=True, exist_ok=True)
    procs = f"{a.processes} process" + ("es" if a.processes != 1 else "")
    header = (f"Rounds inside {procs} per workload on {os.uname().nodename} "
              f"({os.cpu_count()} CPUs), each mode's synthesis over {modes[0]}'s in the same round"
              + (f"; synth-driver options {a.driver_options}" if options else "") + "\n\n")
    table = markdown(rows, modes[0])
    (a.out / "mode-turns.md").write_text(header + table)
    with open(a.out / "mode-turns.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(a.out / "mode-turns-rounds.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "process", "round", "mode", "synth_s"])
        for name, proc, i, r in all_rounds:
            for m in modes:
                w.writerow([name, proc, i, m, r[m]])
    print(table, end="")
    log(f"\n(written: {a.out}/mode-turns.md, mode-turns.csv, mode-turns-rounds.csv)")


if __name__ == "__main__":
    main()
