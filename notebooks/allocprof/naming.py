"""Naming a site: its first frame outside the allocator and the standard library,
without generic arguments, as `function (file:line)`.

A port of `alloc-tracer/format/src/frames.rs` and `analyzer/src/naming.rs`; the tests
compare the names with `analyzer top --format json`.
"""

from __future__ import annotations

import polars as pl

# Function-name prefixes of allocator plumbing (frames.rs: PLUMBING).
PLUMBING = (
    "alloc::",
    "core::",
    "std::",
    "__rust",
    "__rg_",
    "alloc_tracer::",
    "tikv_jemallocator::",
    "hashbrown::",
    "0x",
)

# Source paths of allocator plumbing (frames.rs: PLUMBING_FILES).
PLUMBING_FILES = ("/library/alloc/", "/library/core/", "/library/std/", "/hashbrown-")

_BLANKET = (" as alloc::", " as core::", " as std::")

NO_FRAMES = "(no frames)"


def is_plumbing(function: str, file: str | None) -> bool:
    """True for frames of the allocator, liballoc, core and std, and unknown frames."""
    f = function.lstrip("<")
    return (
        f.startswith(PLUMBING)
        or (f.startswith("T as") and any(p in function for p in _BLANKET))
        or (file is not None and any(p in file for p in PLUMBING_FILES))
    )


def without_generics(name: str) -> str:
    """`<alloc::vec::Vec<T>>::push<u8>` -> `alloc::vec::Vec::push`."""
    if name.startswith("<"):
        inner = name[1:]
        depth = 1
        for i, c in enumerate(inner):
            if c == "<":
                depth += 1
            elif c == ">":
                depth -= 1
            if depth == 0:
                return without_generics(inner[:i]) + without_generics(inner[i + 1 :])
    out = []
    depth = 0
    for c in name:
        if c == "<":
            depth += 1
        elif c == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def file_name(file: str) -> str:
    """The last component of a source path."""
    return file.rsplit("/", 1)[-1]


def _by_name(function: str) -> bool:
    f = function.lstrip("<")
    return f.startswith(PLUMBING) or (
        f.startswith("T as") and any(p in function for p in _BLANKET)
    )


def annotate(frames: pl.DataFrame) -> pl.DataFrame:
    """frames.parquet's site_id, frame_index, function, file, line, plus
    `short_function` (without generics) and `plumbing` (`is_plumbing`).

    Function names run to a kilobyte of generic arguments and repeat over many frames,
    so both are computed once per distinct name and joined back."""
    f = frames.select("site_id", "frame_index", "function", "file", "line")
    distinct = f.select(pl.col("function").unique()).to_series().to_list()
    by_function = pl.DataFrame(
        {
            "function": distinct,
            "short_function": [without_generics(x) for x in distinct],
            "plumbing_name": [_by_name(x) for x in distinct],
        },
        schema={"function": pl.String, "short_function": pl.String, "plumbing_name": pl.Boolean},
    )
    by_file = pl.any_horizontal(
        [pl.col("file").str.contains(p, literal=True) for p in PLUMBING_FILES]
    ).fill_null(False)
    return (
        f.join(by_function, on="function", how="left")
        .with_columns(plumbing=pl.col("plumbing_name") | by_file)
        .drop("plumbing_name")
    )


def naming_frames(frames: pl.DataFrame) -> pl.DataFrame:
    """One row per site: the frame that names it (first non-plumbing frame, else the
    outermost), with the columns of `annotate`."""
    f = frames if "plumbing" in frames.columns else annotate(frames)
    chosen = f.group_by("site_id").agg(
        pl.col("frame_index")
        .filter(~pl.col("plumbing"))
        .min()
        .fill_null(pl.col("frame_index").max())
    )
    return chosen.join(f, on=["site_id", "frame_index"], how="left")


def site_names(frames: pl.DataFrame, site_ids=None) -> pl.DataFrame:
    """site_id -> name (`function (file:line)`), for `site_ids` (all sites if None).
    Sites without frames are named `(no frames)`."""
    inner = naming_frames(frames)
    file_part = pl.col("file").str.split("/").list.last()
    names = inner.select(
        "site_id",
        pl.when(pl.col("file").is_not_null() & pl.col("line").is_not_null())
        .then(pl.format("{} ({}:{})", "short_function", file_part, "line"))
        .otherwise(pl.col("short_function"))
        .alias("name"),
    )
    if site_ids is None:
        return names
    wanted = pl.DataFrame({"site_id": list(site_ids)}, schema={"site_id": pl.UInt64})
    return wanted.join(names, on="site_id", how="left").with_columns(
        pl.col("name").fill_null(NO_FRAMES)
    )


def stack_keys(frames: pl.DataFrame) -> pl.DataFrame:
    """site_id -> stack_key: what identifies a site across reports and builds. Per
    frame, innermost first: the function without generics, `@`, the last four
    components of the source path, `:`, the line, and a newline (the key of the
    analyzer's `diff`, analyzer/src/diff.rs). Addresses are left out: they change with
    every build; so are path prefixes, which change with the machine."""
    f = frames if "short_function" in frames.columns else annotate(frames)
    tail = pl.col("file").str.split("/").list.slice(-4).list.join("/").fill_null("")
    return (
        f.sort("site_id", "frame_index")
        .with_columns(
            pl.concat_str(
                "short_function",
                pl.lit("@"),
                tail,
                pl.lit(":"),
                pl.col("line").cast(pl.String).fill_null(""),
                pl.lit("\n"),
            ).alias("frame")
        )
        .group_by("site_id", maintain_order=True)
        .agg(pl.col("frame").str.join("").alias("stack_key"))
    )


def callers(frames: pl.DataFrame, site_ids, depth: int = 2) -> pl.DataFrame:
    """site_id -> callers: the short names of the `depth` non-plumbing frames after the
    naming frame, joined by " <- " (context for the many sites that share a name such
    as `insert_or_update (lc.rs:108)`; not part of the analyzer's name)."""
    wanted = pl.DataFrame({"site_id": list(site_ids)}, schema={"site_id": pl.UInt64})
    f = frames.join(wanted, on="site_id", how="semi")
    f = f if "plumbing" in f.columns else annotate(f)
    f = f.filter(~pl.col("plumbing")).sort("site_id", "frame_index")
    out = f.group_by("site_id", maintain_order=True).agg(
        pl.col("short_function").slice(1, depth).str.join(" <- ").alias("callers")
    )
    return wanted.join(out, on="site_id", how="left").with_columns(
        pl.col("callers").fill_null("")
    )
