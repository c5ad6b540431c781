#!/usr/bin/env python3
"""Interleaved rounds of synth-driver runs, and their tables: what
scripts/bench-allocators.sh, bench-heap.sh, bench-modes.sh, bench-peers.sh and
bench-sites.sh run after building.

Each round runs every configuration once, in fresh processes, in the given order in
even rounds and reversed in odd ones, so that a steady drift of the machine's speed
weighs on every configuration alike. A configuration's figure is the median over
rounds of its ratio to the baseline's run of the same round (synthesis seconds, as
the driver prints them), with the middle half of those ratios (first to third
quartile: how far a round strays, on a machine whose speed moves by a few per cent)
and the medians of its synthesis time, wall time, peak RSS (getrusage of the process
and the children it waited for) and report-writing time.

Every run is written to OUT/TABLE-runs.csv as it ends, so that a run that fails
leaves the rounds before it.

Standard library only.
"""

import argparse
import csv
import json
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from order_stats import quartiles
from positive import positive

# How the driver and dhat-rs say how long their report took (stderr).
REPORT_TIME = re.compile(r"written in ([0-9.]+) s")


@dataclass
class Config:
    """One way to run a workload: its name in the table, how it was built, and the
    command (the workload's arguments are appended)."""

    name: str
    build: str
    command: list
    # Its runs are compared with this configuration's runs (a small workload's
    # baseline for Valgrind DHAT).
    baseline: str = ""
    # Workload arguments of its own, instead of the table's.
    workload: list = field(default_factory=list)
    # Writes a report (a --report DIR is appended before the workload).
    report: bool = False


@dataclass
class Run:
    workload: str
    round: int
    config: str
    synth_s: float
    wall_s: float
    max_rss_mib: float
    report_s: float | None


class RunFailed(Exception):
    """A run that exited with an error or printed no iteration."""


class RunLog:
    """The runs' CSV, one row written as each run ends, so that a run failing late in
    a long benchmark leaves the rounds before it."""

    COLUMNS = ["workload", "round", "config", "synth_s", "wall_s", "max_rss_mib", "report_s"]

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = open(path, "w", newline="")
        self.writer = csv.writer(self.file)
        self.writer.writerow(self.COLUMNS)
        self.count = 0

    def add(self, x: "Run") -> None:
        self.writer.writerow([x.workload, x.round, x.config, x.synth_s, x.wall_s, x.max_rss_mib,
                              "" if x.report_s is None else x.report_s])
        self.file.flush()
        self.count += 1


def run_measured(cfg: Config, workload: list, scratch: Path) -> tuple[float, float, float, float | None]:
    """Runs `cfg` on `workload` once in `scratch`; returns synthesis seconds, wall
    seconds, peak RSS (MiB) and report seconds (None when nothing says)."""
    args = list(cfg.command)
    if cfg.report:
        args += ["--report", str(scratch / "report")]
    args += ["--json"] + (cfg.workload or workload)
    out_path, err_path = scratch / "stdout", scratch / "stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(args, cwd=scratch, stdout=out, stderr=err)
        except OSError as e:
            raise RunFailed(f"bench: {' '.join(args)}: {e}") from e
        # wait4 gives this process's own rusage (with its waited-for children, such
        # as heaptrack's interpreter), where getrusage(RUSAGE_CHILDREN) would keep
        # the largest of all runs so far.
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    stdout, stderr = out_path.read_text(), err_path.read_text()
    if proc.returncode != 0:
        raise RunFailed(f"bench: {' '.join(args)} exited with {proc.returncode}:\n{stderr[-3000:]}")
    lines = [json.loads(l) for l in stdout.splitlines() if l.startswith("{")]
    if not lines:
        raise RunFailed(f"bench: {' '.join(args)} printed no iteration:\n{stdout[-2000:]}{stderr[-2000:]}")
    times = REPORT_TIME.findall(stderr)
    report = float(times[-1]) if times else None
    return lines[0]["synth_seconds"], wall, usage.ru_maxrss / 1024, report


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def rounds(configs: list, workloads: dict, n: int, scratch: Path, runs_log: RunLog) -> list:
    runs = []
    for r in range(n):
        order = configs if r % 2 == 0 else configs[::-1]
        for name, workload in workloads.items():
            for cfg in order:
                synth, wall, rss, report = run_measured(cfg, workload, scratch)
                run = Run(name, r, cfg.name, synth, wall, rss, report)
                runs.append(run)
                runs_log.add(run)
                log(f"round {r + 1}/{n} {name} {cfg.name}: synthesis {synth:.3f} s, wall {wall:.1f} s, "
                    f"peak RSS {rss:.0f} MiB" + (f", report {report:.3f} s" if report is not None else ""))
    return runs


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratios_to(runs: list, mine: list, workload: str, base: str) -> list:
    """Each of `mine`'s synthesis times over `base`'s in the same round."""
    ratios = []
    for x in mine:
        ref = [y for y in runs if y.workload == workload and y.config == base and y.round == x.round]
        if ref:
            ratios.append(x.synth_s / ref[0].synth_s)
    return ratios


def summarize(configs: list, workloads: dict, runs: list, baseline: str) -> list:
    """One row per (workload, configuration): medians over rounds. A configuration
    measured against a baseline of its own is also given its ratio to the table's."""
    rows = []
    for name in workloads:
        for cfg in configs:
            base = cfg.baseline or baseline
            mine = [x for x in runs if x.workload == name and x.config == cfg.name]
            ratios = ratios_to(runs, mine, name, base)
            to_table = ratios_to(runs, mine, name, baseline) if cfg.baseline else []
            q1, q3 = quartiles(ratios)
            t1, t3 = quartiles(to_table)
            rows.append({
                "workload": name if not cfg.workload else " ".join(cfg.workload),
                "config": cfg.name,
                "build": cfg.build,
                "baseline": base,
                "rounds": len(ratios),
                "synth_ratio_median": median_or_none(ratios),
                "synth_ratio_q1": q1,
                "synth_ratio_q3": q3,
                "table_baseline_ratio_median": median_or_none(to_table),
                "table_baseline_ratio_q1": t1,
                "table_baseline_ratio_q3": t3,
                "synth_s_median": median_or_none([x.synth_s for x in mine]),
                "wall_s_median": median_or_none([x.wall_s for x in mine]),
                "max_rss_mib_median": median_or_none([x.max_rss_mib for x in mine]),
                "report_s_median": median_or_none([x.report_s for x in mine]),
            })
    return rows


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def markdown(rows: list, baseline: str) -> str:
    out = [f"| workload | configuration | build | synthesis / {baseline} | synthesis s | wall s | peak RSS MiB | report s |",
           "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = fmt(r["synth_ratio_median"], ".3f") + ("" if r["synth_ratio_median"] is None else "x")
        if r["synth_ratio_q1"] is not None and r["config"] != r["baseline"]:
            ratio += f" ({r['synth_ratio_q1']:.3f}-{r['synth_ratio_q3']:.3f})"
        if r["baseline"] != baseline:
            ratio += f" (/ {r['baseline']})"
            if r["table_baseline_ratio_median"] is not None:
                ratio += f"; {r['table_baseline_ratio_median']:.3f}x"
                if r["table_baseline_ratio_q1"] is not None:
                    ratio += f" ({r['table_baseline_ratio_q1']:.3f}-{r['table_baseline_ratio_q3']:.3f})"
                ratio += f" / {baseline}"
        out.append(f"| {r['workload']} | {r['config']} | {r['build']} | {ratio} | "
                   f"{fmt(r['synth_s_median'], '.3f')} | {fmt(r['wall_s_median'], '.1f')} | "
                   f"{fmt(r['max_rss_mib_median'], '.0f')} | {fmt(r['report_s_median'], '.3f')} |")
    return "\n".join(out) + "\n"


def write_outputs(out_dir: Path, stem: str, rows: list, header: str, baseline: str) -> str:
    """The table in markdown and CSV (the runs' CSV is written as they end)."""
    table = markdown(rows, baseline)
    (out_dir / f"{stem}.md").write_text(header + "\n" + table)
    with open(out_dir / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return table


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table", choices=["allocators", "peers", "heap", "modes", "sites"])
    p.add_argument("--bin", type=Path, required=True, help="folder of the driver builds")
    p.add_argument("--c1", type=Path, required=True, help="the 2 KiB sector's c1.json")
    p.add_argument("--rounds", type=positive, default=8)
    p.add_argument("--sha-blocks", type=int, default=512,
                   help="SHA-256 chain length (peers, and heap and modes with --with-sha)")
    p.add_argument("--with-sha", action="store_true",
                   help="heap, modes: the SHA-256 chain too, after the PoRep partition")
    p.add_argument("--small-blocks", type=int, default=4, help="SHA-256 chain of the small runs (Valgrind DHAT, jemalloc's profiler on every allocation)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", default="", help="comma-separated configurations to run (peers)")
    p.add_argument("--check-args", action="store_true",
                   help="check the arguments and stop (the shell scripts do, before they build)")
    a = p.parse_args()
    if a.with_sha and a.table not in ("heap", "modes"):
        p.error("--with-sha applies to the heap and modes tables")
    if a.only and a.table != "peers":
        p.error("--only applies to the peers table")

    porep = ["porep", "--c1", str(a.c1), "--partition", "0"]
    traced = str(a.bin / "synth-driver")
    if a.table == "allocators":
        configs = [Config(x, "default", [traced, "--allocator", x]) for x in ("jemalloc", "system", "mimalloc")]
        workloads = {"2 KiB PoRep partition 0": porep}
        baseline = "jemalloc"
    elif a.table == "modes":
        # Each mode as a user runs it, its default settings, against tracer off.
        configs = [Config("tracer off", "default", [traced, "--trace", "off"])]
        configs += [Config(mode, "default", [traced, "--trace", mode])
                    for mode in ("count", "sample:1000", "sites")]
        workloads = {"2 KiB PoRep partition 0": porep}
        if a.with_sha:
            workloads[f"SHA-256, {a.sha_blocks} blocks"] = ["sha256", "--blocks", str(a.sha_blocks)]
        baseline = "tracer off"
    elif a.table == "heap":
        # Each mode with heap sampling at 1 MiB against the same mode without it.
        configs = [Config("tracer off", "default", [traced, "--trace", "off"])]
        for mode in ("count", "sample:1000", "sites"):
            configs.append(Config(f"{mode}, no heap sampling", "default",
                                  [traced, "--trace", mode, "--heap-sample", "0"]))
            configs.append(Config(f"{mode}, heap sampling 1 MiB", "default",
                                  [traced, "--trace", mode, "--heap-sample", "1MiB"],
                                  baseline=f"{mode}, no heap sampling"))
        workloads = {"2 KiB PoRep partition 0": porep}
        if a.with_sha:
            workloads[f"SHA-256, {a.sha_blocks} blocks"] = ["sha256", "--blocks", str(a.sha_blocks)]
        baseline = "tracer off"
    elif a.table == "sites":
        # What each part of sites mode costs: the walk's depth, following blocks for
        # lifetimes, heap sampling; each row against tracer off.
        sites = [traced, "--trace", "sites"]
        neither = ["--lifetimes", "0", "--heap-sample", "0"]
        configs = [
            Config("tracer off", "default", [traced, "--trace", "off"]),
            Config("count", "default", [traced, "--trace", "count"]),
            Config("sites (depth 48, lifetimes 1/64, heap 1 MiB)", "default", sites),
            Config("sites, no lifetimes", "default", sites + ["--lifetimes", "0"]),
            Config("sites, no heap sampling", "default", sites + ["--heap-sample", "0"]),
            Config("sites, neither", "default", sites + neither),
            Config("sites, depth 1", "default", sites + ["--depth", "1"]),
            Config("sites, depth 1, neither", "default", sites + ["--depth", "1"] + neither),
        ]
        workloads = {"2 KiB PoRep partition 0": porep}
        baseline = "tracer off"
    else:
        untraced, dhat = str(a.bin / "synth-driver-untraced"), str(a.bin / "synth-driver-dhat")
        # jemalloc's own heap profiler, on at run time: sampling one allocation per
        # 512 KiB allocated on average (its default), or every allocation with each
        # stack's totals kept for the whole run (prof_accum), as `sites` keeps them;
        # each writes its profile at exit (in the run's folder).
        jeprof = str(a.bin / "synth-driver-jeprof")
        jeprof_on = "_RJEM_MALLOC_CONF=prof:true,prof_final:true"
        small = ["sha256", "--blocks", str(a.small_blocks)]
        configs = [
            Config("plain jemalloc", "untraced", [untraced]),
            Config("plain system", "untraced", [untraced, "--allocator", "system"]),
            Config("tracer off", "default", [traced, "--trace", "off"]),
            Config("tracer count", "default", [traced, "--trace", "count"], report=True),
            # Heap sampling alone, at jemalloc's profiler's default interval.
            Config("tracer count + heap sampling (512 KiB)", "default",
                   [traced, "--trace", "count", "--heap-sample", "512KiB"], report=True),
            Config("tracer sample:1000", "default", [traced, "--trace", "sample:1000"], report=True),
            Config("tracer sites", "default", [traced, "--trace", "sites"], report=True),
            Config("dhat-rs", "dhat-heap", [dhat]),
            Config("heaptrack", "untraced, system allocator",
                   ["heaptrack", "-o", "heaptrack.out", untraced, "--allocator", "system"]),
            Config("jemalloc prof (512 KiB)", "jemalloc-prof", ["env", jeprof_on, jeprof]),
            Config("plain jemalloc (small run)", "untraced", [untraced],
                   baseline="plain jemalloc (small run)", workload=small),
            Config("jemalloc prof on every allocation (small run)", "jemalloc-prof",
                   ["env", jeprof_on + ",lg_prof_sample:0,prof_accum:true", jeprof],
                   baseline="plain jemalloc (small run)", workload=small),
            Config("Valgrind DHAT (small run)", "untraced, system allocator",
                   ["valgrind", "--tool=dhat", "--dhat-out-file=dhat.out", untraced, "--allocator", "system"],
                   baseline="plain jemalloc (small run)", workload=small),
        ]
        if a.only:
            keep = set(a.only.split(","))
            unknown = keep - {c.name for c in configs}
            if unknown:
                p.error(f"--only: no configuration named {', '.join(sorted(unknown))} "
                        f"(they are: {', '.join(c.name for c in configs)})")
            # With the baselines they are measured against.
            keep |= {"plain jemalloc"} | {c.baseline for c in configs if c.name in keep and c.baseline}
            configs = [c for c in configs if c.name in keep]
        workloads = {"2 KiB PoRep partition 0": porep, f"SHA-256 chain, {a.sha_blocks} blocks": ["sha256", "--blocks", str(a.sha_blocks)]}
        baseline = "plain jemalloc"
        # Small runs go once per round, not once per workload.
        small_configs = [c for c in configs if c.workload]
        configs = [c for c in configs if not c.workload]

    if a.check_args:
        return
    # Every program found now, not when the small runs start after the main rounds.
    unfound = sorted({c.command[0] for c in configs + small_configs
                      if shutil.which(c.command[0]) is None})
    if unfound:
        sys.exit(f"bench: not found: {', '.join(unfound)}")
    # A table of an earlier run is not left beside this run's runs.
    for stale in (a.out / f"{a.table}.md", a.out / f"{a.table}.csv"):
        stale.unlink(missing_ok=True)
    runs_log = RunLog(a.out / f"{a.table}-runs.csv")
    with tempfile.TemporaryDirectory(prefix="bench-rounds-") as tmp:
        scratch = Path(tmp)
        header = (f"{a.rounds} interleaved rounds on {os.uname().nodename} ({os.cpu_count()} CPUs); "
                  f"ratios: median over rounds of synthesis seconds / the baseline's in the same round "
                  f"(in brackets, the middle half of the rounds' ratios)")
        try:
            runs = rounds(configs, workloads, a.rounds, scratch, runs_log)
            rows = summarize(configs, workloads, runs, baseline)
            if a.table == "peers" and small_configs:
                # The main table first: a small run that fails does not take it.
                write_outputs(a.out, a.table, rows, header, baseline)
                small_runs = rounds(small_configs, {"small": []}, a.rounds, scratch, runs_log)
                rows += summarize(small_configs, {"small": []}, small_runs, baseline)
        except RunFailed as e:
            kept = f"; the main rounds' table is in {a.out}/{a.table}.md" if (a.out / f"{a.table}.md").exists() else ""
            sys.exit(f"{e}\n(the {runs_log.count} runs that ended before it are in {runs_log.path}{kept})")

    table = write_outputs(a.out, a.table, rows, header, baseline)
    print(table, end="")
    print(f"\n(written: {a.out}/{a.table}.md, {a.table}.csv, {a.table}-runs.csv)", file=sys.stderr)


if __name__ == "__main__":
    main()
