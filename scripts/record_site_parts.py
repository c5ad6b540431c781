#!/usr/bin/env python3
"""Where `record_site`'s instructions go: a callgrind profile made with
`--dump-instr=yes`, the per-instruction counts of the recording functions
`record_site` is inlined into (`alloc_recorded`, `alloc_any`, `record_first_alloc`,
`record_realloc`) and of the functions it calls (the predictor's `second_guess` and
`learn`, and `walked_slot`, the walk after a refused guess), and for each
instruction the functions inlined at it (`addr2line -i`).
The instructions inlined from `record_site`, and those of the functions it calls,
are grouped into the parts of a sites-mode recording: finding where the walk starts,
checking the guessed site's kept walk, comparing the kept frames, walking the new
ones, writing their records and hashes, the site lookup, keeping walks for the
guess, the walk's own call and frame, and the rest (the counters, the lifetime
countdown). Prints a markdown table of instructions per recorded allocation or
realloc.
Used by scripts/bench-synth-instructions.sh.

Standard library only; needs binutils' `addr2line`.

Usage: scripts/record_site_parts.py CALLGRIND_FILE BINARY CALLS
CALLS: the recorded allocations and reallocs in the profile (one walk each in
`sites` mode). Callgrind's own count of calls into the recording functions is not
it: they are reached by jumps as well as calls.
"""

import re
import subprocess
import sys

# The functions `record_site` is inlined into.
HOSTS = ("hot::alloc::alloc_recorded", "hot::alloc::alloc_any",
         "hot::alloc::record_first_alloc", "hot::realloc::record_realloc",
         "hot::predict::Predictor::second_guess", "hot::predict::Predictor::learn",
         "hot::sites::walked_slot")
INLINED = "record_site"
# Out-of-line functions only `record_site` calls: all of their instructions count.
CALLED = ("second_guess", "learn", "walked_slot")

# Parts, by the innermost inlined function that names one (first match wins).
# `addr2line -i` names inlined functions without their paths; within
# `record_site` these names are unambiguous.
PARTS = [
    ("keeping walks for the guess", ("learn", "follows_latest")),
    ("the guess: checking a kept walk against the stack",
     ("guess", "second_guess", "holds", "same_words", "hit")),
    ("comparing the kept frames with the stack", ("unchanged_to", "any_differ", "differs")),
    ("writing the new records and hash sums",
     ("keep_in_front", "join_whole", "join", "restart", "move_down", "window", "whole",
      "one_return_changed")),
    ("finding where the walk starts", ("start",)),
    ("the site lookup", ("find", "new_site")),
    ("walking the new frames, finding where they join the kept ones", ("walk_from",)),
    ("the walk's own call and frame", ("walked_slot",)),
]
REST = "the counters, the lifetime countdown"


def self_costs(path: str) -> dict[int, int]:
    """Self instructions of each address of the HOSTS (every compiled copy)."""
    names: dict[str, str] = {}
    costs: dict[int, int] = {}
    inside = skip_call = False
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
                inside = names[m.group(2)].endswith(HOSTS)
            continue
        if line.startswith("calls="):
            skip_call = True  # the next cost line is the call's inclusive cost
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
    return costs


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


def bare(name: str) -> str:
    """A function's name without generics or path."""
    return re.sub(r"<.*", "", name).split("::")[-1]


def part_of(chain: list[str]) -> str:
    for name in chain:
        for part, functions in PARTS:
            if bare(name) in functions:
                return part
    return REST


def parts(path: str, binary: str) -> dict[str, int]:
    """Instructions inlined from `record_site` in the profile at `path`, by part."""
    costs = self_costs(path)
    if not costs:
        sys.exit(f"{path}: no instructions of {', '.join(HOSTS)} (made with --dump-instr=yes?)")
    chains = inline_chains(binary, sorted(costs))
    found = {part: 0 for part, _ in PARTS} | {REST: 0}
    for address, n in costs.items():
        chain = chains.get(address, [])
        if any(bare(name) == INLINED or bare(name) in CALLED for name in chain):
            found[part_of(chain)] += n
    return found


def main() -> None:
    if len(sys.argv) != 4 or not sys.argv[3].isdigit():
        print(__doc__, file=sys.stdout if "--help" in sys.argv or "-h" in sys.argv else sys.stderr)
        sys.exit(0 if "--help" in sys.argv or "-h" in sys.argv else 2)
    path, binary, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    found = parts(path, binary)
    total = sum(found.values())
    print(f"`record_site`, inlined in the recording functions, over {calls:,} recorded "
          f"allocations and reallocs: {total / calls:,.0f} instructions each\n")
    print("| part | instructions an allocation | share |")
    print("|---|---:|---:|")
    for part, n in sorted(found.items(), key=lambda kv: -kv[1]):
        print(f"| {part} | {n / calls:,.0f} | {100 * n / total:.0f} % |")


if __name__ == "__main__":
    main()
