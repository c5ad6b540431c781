#!/usr/bin/env python3
"""Where `record_site`'s instructions go: a callgrind profile made with
`--dump-instr=yes`, its per-instruction counts for `hot::sites::record_site`, and
for each instruction the functions inlined at it (`addr2line -i`), grouped into the
parts of a sites-mode recording: finding where the walk starts, comparing the kept
frames, walking the new ones, writing their records and hashes, the site lookup, and
the rest (entry and exit, the counters). Prints a markdown table of instructions per
call. Used by scripts/bench-synth-instructions.sh.

Standard library only; needs binutils' `addr2line`.

Usage: scripts/record_site_parts.py CALLGRIND_FILE BINARY
"""

import re
import subprocess
import sys

FUNCTION = "hot::sites::record_site"

# Parts, by the innermost inlined function that names one (first match wins).
# `addr2line -i` names inlined functions without their paths; within
# `record_site` these names are unambiguous.
PARTS = [
    ("comparing the kept frames with the stack", ("unchanged_to", "any_differ", "differs")),
    ("writing the new records and hash sums",
     ("keep_in_front", "join_whole", "join", "restart", "move_down", "window", "whole",
      "one_return_changed")),
    ("finding where the walk starts", ("start",)),
    ("the site lookup", ("find", "new_site")),
    ("walking the new frames, finding where they join the kept ones", ("walk_from",)),
]
REST = "entry and exit, the counters, the lifetime countdown"


def self_costs(path: str) -> tuple[dict[int, int], int]:
    """Self instructions of each address of FUNCTION (every compiled copy), and the
    calls made to it."""
    names: dict[str, str] = {}
    costs: dict[int, int] = {}
    calls = 0
    inside = skip_call = calling = False
    prev = [0, 0]
    positions = 1
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("positions:"):
            positions = len(line.split()) - 1
            continue
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3)
            if m.group(1) == "fn":
                inside = names[m.group(2)].endswith(FUNCTION)
            else:
                calling = names[m.group(2)].endswith(FUNCTION)
            continue
        if line.startswith("calls="):
            skip_call = True  # the next cost line is the call's inclusive cost
            if calling:
                calls += int(line.split("=")[1].split()[0])
            continue
        if not line or not (line[0].isdigit() or line[0] in "+-*"):
            continue
        tokens = line.split()
        for i in range(positions):
            t = tokens[i]
            if t == "*":
                continue
            prev[i] = prev[i] + int(t, 0) if t[0] in "+-" else int(t, 0)
        if skip_call:
            skip_call = False
            continue
        if inside and len(tokens) > positions:
            costs[prev[0]] = costs.get(prev[0], 0) + int(tokens[positions])
    return costs, calls


def enclosing_fn(location: str) -> str | None:
    """The name of the function whose source holds `location` (FILE:LINE), when the
    file is readable: the nearest `fn` line at or above it."""
    path, _, line = location.rpartition(":")
    try:
        lines = open(path).read().splitlines()[: int(line)]
    except (OSError, ValueError):
        return None
    for text in reversed(lines):
        m = re.match(r"\s*(?:pub(?:\([^)]*\))? )?(?:const )?(?:unsafe )?fn (\w+)", text)
        if m:
            return m.group(1)
    return None


def inline_chains(binary: str, addresses: list[int]) -> dict[int, list[str]]:
    """For each address, the functions inlined there, innermost first.

    `addr2line -i` prints, per level, a function and a source line in it, but names
    the innermost level after the symbol (the function all of it was inlined into);
    that level's name is taken from its source line instead."""
    out = subprocess.run(
        ["addr2line", "-a", "-f", "-i", "-C", "-e", binary],
        input="\n".join(hex(a) for a in addresses), capture_output=True, text=True,
        check=True).stdout.splitlines()
    chains: dict[int, list[str]] = {}
    current = None
    i = 0
    while i < len(out):
        if out[i].startswith("0x"):
            current = int(out[i], 16)
            chains[current] = []
            i += 1
            continue
        name, location = out[i], out[i + 1] if i + 1 < len(out) else ""
        if not chains[current]:
            name = enclosing_fn(location.split(" ")[0]) or name
        chains[current].append(name)
        i += 2
    return chains


def part_of(chain: list[str]) -> str:
    for name in chain:
        bare = re.sub(r"<.*", "", name).split("::")[-1]  # no generics, no path
        for part, functions in PARTS:
            if bare in functions:
                return part
    return REST


def main() -> None:
    path, binary = sys.argv[1], sys.argv[2]
    costs, calls = self_costs(path)
    if not costs or not calls:
        sys.exit(f"{path}: no instructions of {FUNCTION} (made with --dump-instr=yes?)")
    chains = inline_chains(binary, sorted(costs))
    parts = {part: 0 for part, _ in PARTS} | {REST: 0}
    for address, n in costs.items():
        parts[part_of(chains.get(address, []))] += n
    total = sum(parts.values())
    print(f"`record_site`, {calls:,} calls: {total / calls:,.0f} instructions a call\n")
    print("| part | instructions a call | share |")
    print("|---|---:|---:|")
    for part, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"| {part} | {n / calls:,.0f} | {100 * n / total:.0f} % |")


if __name__ == "__main__":
    main()
