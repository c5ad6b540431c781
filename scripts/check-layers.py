#!/usr/bin/env python3
"""Checks that a crate's modules depend on each other in one direction.

For each crate source folder given (default: alloc-tracer/src), every top-level module
(a file or folder under src/, the crate root excepted) is a node, and a `crate::NAME`
path in its code (in `use` lines or inline, comments and strings left out) is an edge
to module NAME, as is a `super::` path that climbs out of its top-level module to
NAME (`super::super::NAME` in a file of src/hot/, counting inline `mod` blocks as a
level each). The check fails on any cycle, printing it. For alloc-tracer it also
checks the hot path's door rule: code under src/hot/ names nothing of the crate
outside hot/ (it reaches the cold side only through the `hot::door::Door` trait).

Usage: scripts/check-layers.py [CRATE_SRC ...]
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATE_PATH = re.compile(r"\bcrate::(\{|\w+)")
# The whole chain of `super::`: never a shorter one with `super` read as the name
# (`super::super::*`, a glob, names nothing, as `crate::*` does not).
SUPER_PATH = re.compile(r"\b((?:super::)+)(?!super\b)(\{|\w+)")
INLINE_MOD = re.compile(r"\bmod\s+(?:r#)?(\w+)\s*\{")


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


def group_end(code: str, open_at: int) -> int:
    """The index of the brace that closes the one at `open_at`."""
    depth = 0
    for end in range(open_at, len(code)):
        depth += {"{": 1, "}": -1}.get(code[end], 0)
        if depth == 0:
            return end
    return len(code)


def named(code: str, m: re.Match, group: int) -> set[str]:
    """The first segment of the path after `m`'s prefix, or each item's of a group."""
    if m.group(group) != "{":
        return {m.group(group)}
    start = m.start(group)
    return group_heads(code[start + 1 : group_end(code, start)])


def targets(text: str, module: tuple[str, ...] = ()) -> set[str]:
    """The crate's top-level modules that `text`, the file of module `module` (its
    path below the crate root: `("hot", "alloc")` for src/hot/alloc.rs), names by
    `crate::` paths or by `super::` paths that climb to the crate root."""
    out = set()
    code = code_only(text)
    for m in CRATE_PATH.finditer(code):
        out |= named(code, m, 1)
    inline = [(m.group(1), m.end() - 1, group_end(code, m.end() - 1)) for m in INLINE_MOD.finditer(code)]
    for m in SUPER_PATH.finditer(code):
        here = list(module) + [name for name, start, end in inline if start < m.start() < end]
        up = m.group(1).count("super::")
        if up > len(here):
            continue
        base = here[: len(here) - up]
        out |= {base[0]} if base else named(code, m, 2)
    return out


def shown(path: Path) -> Path:
    """`path` relative to the repository when inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def module_of(src: Path, file: Path) -> str | None:
    path = module_path(src, file)
    return path[0] if path else None


def module_path(src: Path, file: Path) -> tuple[str, ...]:
    """The module a source file holds, as its path below the crate root."""
    parts = list(file.relative_to(src).parts)
    parts[-1] = parts[-1].removesuffix(".rs")
    if parts[-1] == "mod" or parts == ["lib"] or parts == ["main"]:
        parts.pop()
    return tuple(parts)


def check(src: Path) -> list[str]:
    modules = {module_of(src, f) for f in src.rglob("*.rs")} - {None}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    problems = []
    for f in sorted(src.rglob("*.rs")):
        m = module_of(src, f)
        if m is None:
            continue
        for t in targets(f.read_text(), module_path(src, f)):
            if t in modules and t != m:
                edges[m].add(t)
                if m == "hot" and src.parent.name == "alloc-tracer":
                    problems.append(
                        f"{shown(f)}: the hot path names the module crate::{t}; "
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
