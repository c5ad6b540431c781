#!/usr/bin/env python3
"""Checks that a crate's modules depend on each other in one direction.

For each crate source folder given (default: alloc-tracer/src), every top-level module
(a file or folder under src/, the crate root excepted) is a node, and a `crate::NAME`
path in its code (in `use` lines or inline, comments and strings left out) is an edge
to module NAME. The check fails on any cycle, printing it. For alloc-tracer it also
checks the hot path's door rule: code under src/hot/ names nothing of the crate
outside hot/ (it reaches the cold side only through the `hot::door::Door` trait).

Usage: scripts/check-layers.py [CRATE_SRC ...]
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATE_PATH = re.compile(r"\bcrate::(\{|\w+)")


# Comments, raw strings, strings and char literals, matched left to right in one pass,
# so that a quote or `r"` inside one (`"...for"`, `'"'`) does not start another.
NOT_CODE = re.compile(
    r"""//[^\n]*
    | /\*.*?\*/
    | \bb?r(\#*)".*?"\1
    | b?"(?:\\.|[^"\\])*"
    | b?'(?:\\.|[^'\\])'""",
    re.S | re.X,
)


def code_only(text: str) -> str:
    """The source without comments, string and char literals (good enough for
    paths); line breaks are kept, so lines keep their numbers."""
    return NOT_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def group_heads(group: str) -> set[str]:
    """The first path segment of each item of a `use` group's inside (`a::b, c::{d,
    e}, f` gives a, c and f): commas inside nested braces separate no items."""
    heads, depth, start = set(), 0, 0
    for i, c in enumerate(group + ","):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            name = re.match(r"\s*(\w+)", group[start:i])
            if name:
                heads.add(name.group(1))
            start = i + 1
    return heads


def targets(text: str) -> set[str]:
    out = set()
    code = code_only(text)
    for m in CRATE_PATH.finditer(code):
        if m.group(1) != "{":
            out.add(m.group(1))
            continue
        # The group runs to its matching brace, nested groups included.
        depth, end = 0, m.start(1)
        for end in range(m.start(1), len(code)):
            depth += {"{": 1, "}": -1}.get(code[end], 0)
            if depth == 0:
                break
        out |= group_heads(code[m.start(1) + 1 : end])
    return out


def shown(path: Path) -> Path:
    """`path` relative to the repository when inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def module_of(src: Path, file: Path) -> str | None:
    rel = file.relative_to(src)
    if rel.parts in (("lib.rs",), ("main.rs",)):
        return None
    return rel.parts[0].removesuffix(".rs")


def check(src: Path) -> list[str]:
    modules = {module_of(src, f) for f in src.rglob("*.rs")} - {None}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    problems = []
    for f in sorted(src.rglob("*.rs")):
        m = module_of(src, f)
        if m is None:
            continue
        for t in targets(f.read_text()):
            if t in modules and t != m:
                edges[m].add(t)
                if m == "hot" and src.parent.name == "alloc-tracer":
                    problems.append(
                        f"{shown(f)}: the hot path names crate::{t}; "
                        "reach the cold side through hot::door::Door instead"
                    )
    # Depth-first search for a cycle.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(modules):
        if m not in state:
            cycle = visit(m)
            if cycle:
                problems.append(
                    f"{shown(src)}: modules import each other in a cycle: "
                    + " -> ".join(cycle)
                )
                break
    return problems


def main() -> int:
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__)
        return 0
    srcs = [ROOT / a for a in sys.argv[1:]] or [ROOT / "alloc-tracer" / "src"]
    missing = [s for s in srcs if not s.is_dir()]
    if missing:
        print(f"check-layers: not a folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    problems = [p for src in srcs for p in check(src)]
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print("layers: no import cycle in " + ", ".join(str(s.relative_to(ROOT)) for s in srcs))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
