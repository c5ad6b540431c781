#!/usr/bin/env python3
"""The tracer's own memory and report time as a rayon pool grows.

Runs `alloc-tracer/examples/pool.rs` (parallel parsing, grouping and formatting of
generated records) with 1, 4 and 16 threads in `off` and each mode given, ROUNDS
rounds taking turns, and prints a markdown table of medians: the run's time (the
example's work, before its report), its peak RSS before the report (the manifest's
`totals.max_rss_bytes`; in `off`, which writes no report, the process's) and the
process's (report writing included, as `/usr/bin/time` gives it), the tracer's own
memory (`tracer.memory_bytes`) beside the `off` run's peak RSS, and the time the
report took to write; then the tracer's memory by part (`tracer.memory_parts`).

Usage: scripts/bench_threads.py [--rounds 5] [--records 200000] [--threads 1,4,16]
       [--modes sites,sample:1000,count] [--no-build]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from positive import positive

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=positive, default=5)
    ap.add_argument("--records", type=positive, default=200_000)
    ap.add_argument("--threads", type=thread_counts, default=[1, 4, 16])
    ap.add_argument("--modes", default="sites,sample:1000,count")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    target = Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/alloc-profiler/target"))
    if not args.no_build:
        subprocess.run(
            ["cargo", "build", "--release", "-q", "-p", "alloc-tracer", "--example", "pool"],
            cwd=ROOT,
            check=True,
            env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        )
    pool = target / "release" / "examples" / "pool"
    threads = args.threads
    modes = ["off"] + [m for m in args.modes.split(",") if m != "off"]
    runs: dict[tuple[int, str], list[dict]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    try:
        for r in range(args.rounds):
            order = modes if r % 2 == 0 else modes[::-1]
            for t in threads:
                for mode in order:
                    runs.setdefault((t, mode), []).append(run(pool, scratch, t, mode, args.records))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"pool example, {args.records} records, medians of {args.rounds} rounds\n")
    print(
        "| threads | mode | run s | peak RSS of the run MiB | peak RSS with the report MiB "
        "| tracer memory MiB | tracer memory / `off` peak RSS | report written in s |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for t in threads:
        off_rss = med(runs[(t, "off")], "run_rss")
        for mode in modes:
            rs = runs[(t, mode)]
            mem = med(rs, "memory") if mode != "off" else None
            report = med(rs, "report") if mode != "off" else None
            cells = [
                str(t),
                mode,
                f"{med(rs, 'run'):.3f}",
                f"{med(rs, 'run_rss') / 2**20:.0f}",
                f"{med(rs, 'rss') / 2**20:.0f}",
                "" if mem is None else f"{mem / 2**20:.1f}",
                "" if mem is None else f"{mem / off_rss:.0%}",
                "" if report is None else f"{report:.2f}",
            ]
            print("| " + " | ".join(cells) + " |")
    print_parts(threads, modes, runs)


def print_parts(threads: list[int], modes: list[str], runs: dict) -> None:
    """The tracer's memory by part (`tracer.memory_parts`), medians in MiB, for the
    modes that record; nothing for reports without the parts."""
    some = [r["parts"] for rs in runs.values() for r in rs if r.get("parts")]
    if not some:
        return
    # In the manifest's order.
    parts = list(some[0])
    print("\ntracer memory by part, MiB (`tracer.memory_parts`)\n")
    print("| threads | mode | " + " | ".join(p.replace("_", " ") for p in parts) + " |")
    print("|---:|---|" + "---:|" * len(parts))
    for t in threads:
        for mode in modes:
            if mode == "off":
                continue
            rs = [r["parts"] for r in runs[(t, mode)] if r.get("parts")]
            cells = [f"{statistics.median(r[p] for r in rs) / 2**20:.1f}" for p in parts]
            print(f"| {t} | {mode} | " + " | ".join(cells) + " |")


def thread_counts(text: str) -> list[int]:
    """Comma-separated thread counts (`1,4,16`), for argparse."""
    return [positive(t) for t in text.split(",")]


def run(pool: Path, scratch: Path, threads: int, mode: str, records: int) -> dict:
    out = scratch / "report"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "ALLOC_TRACE": mode}
    timing = scratch / "time.txt"
    p = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", str(timing), str(pool), str(out), str(records)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    got = {"rss": int(timing.read_text().split()[-1]) * 1024}
    written = re.search(r"report written in ([0-9.]+) s", p.stdout)
    got["report"] = float(written.group(1)) if written else None
    ran = re.search(r"ran in ([0-9.]+) s", p.stdout)
    if ran is None:
        sys.exit(f"bench_threads: {pool} printed no `ran in N s` line (built from an older example?)")
    got["run"] = float(ran.group(1))
    if mode == "off":
        # No report: the process's peak is the run's.
        got["run_rss"] = got["rss"]
        return got
    m = json.loads((out / "manifest.json").read_text())
    got["run_rss"] = m["totals"]["max_rss_bytes"]
    got["memory"] = m["tracer"].get("memory_bytes")
    got["parts"] = m["tracer"].get("memory_parts")
    return got


def med(rs: list[dict], key: str):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None


if __name__ == "__main__":
    main()
