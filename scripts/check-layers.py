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
CRATE_PATH = re.compile(r"\bcrate::(\{[^}]*\}|\w+)")


def code_only(text: str) -> str:
    """The source without comments and string literals (good enough for paths)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def targets(text: str) -> set[str]:
    out = set()
    for m in CRATE_PATH.finditer(code_only(text)):
        part = m.group(1)
        if part.startswith("{"):
            for item in part[1:-1].split(","):
                name = re.match(r"\s*(\w+)", item)
                if name:
                    out.add(name.group(1))
        else:
            out.add(part)
    return out


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
                        f"{f.relative_to(ROOT)}: the hot path names crate::{t}; "
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
                    f"{src.relative_to(ROOT)}: modules import each other in a cycle: "
                    + " -> ".join(cycle)
                )
                break
    return problems


def main() -> int:
    srcs = [ROOT / a for a in sys.argv[1:]] or [ROOT / "alloc-tracer" / "src"]
    problems = [p for src in srcs for p in check(src)]
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print("layers: no import cycle in " + ", ".join(str(s.relative_to(ROOT)) for s in srcs))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
