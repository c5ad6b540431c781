"""Sorting sites into categories by the analyzer's TOML rules.

The same rules file and the same matching as `analyzer/src/categories.rs` (a site goes
to the first category whose patterns match its frames); the tests compare the totals
with `analyzer categories --format json`. Reading the TOML here instead of calling the
analyzer gives each *site* its category, which the notebooks need for per-site views.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from allocprof import naming
from allocprof.report import Report
from allocprof.sites import site_totals

#: The name of allocations no rule claims (categories.rs: UNMATCHED).
UNMATCHED = "other (no rule matched)"

#: The analyzer's built-in rules, read from the repository this package lives in.
DEFAULT_RULES_PATH = (
    Path(__file__).resolve().parents[2] / "analyzer" / "src" / "default_categories.toml"
)


class RulesError(Exception):
    """A rules file that does not parse or has keys the analyzer would refuse."""


@dataclass(frozen=True)
class Pattern:
    """Function-name prefix (generics removed) and source-path suffix (or any part of
    the path when it has no `.rs`)."""

    function: str | None = None
    file: str | None = None

    def expr(self) -> pl.Expr:
        """Whether a frame (columns short_function, file) matches."""
        ok = pl.lit(True)
        if self.function is not None:
            ok = ok & pl.col("short_function").str.starts_with(self.function)
        if self.file is not None:
            if self.file.endswith(".rs"):
                on_file = pl.col("file").str.ends_with(self.file)
            else:
                on_file = pl.col("file").str.contains(self.file, literal=True)
            ok = ok & on_file.fill_null(False)
        return ok


@dataclass(frozen=True)
class Category:
    name: str
    description: str = ""
    frames: tuple[Pattern, ...] = field(default_factory=tuple)
    innermost: tuple[Pattern, ...] = field(default_factory=tuple)
    also: tuple[Pattern, ...] = field(default_factory=tuple)
    #: A calibrated operation the analyzer's cost model adds per allocation (not used
    #: for matching).
    indirect: str | None = None


def _patterns(raw, where: str) -> tuple[Pattern, ...]:
    out = []
    for p in raw:
        unknown = set(p) - {"function", "file"}
        if unknown:
            raise RulesError(f"{where}: unknown pattern keys {sorted(unknown)}")
        out.append(Pattern(function=p.get("function"), file=p.get("file")))
    return tuple(out)


def parse_rules(text: str, where: str = "rules") -> list[Category]:
    """Rules from TOML text; refuses unknown keys, as the analyzer does."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RulesError(f"{where}: {e}") from None
    if set(doc) != {"category"}:
        raise RulesError(f"{where}: expected only [[category]] tables, found {sorted(doc)}")
    out = []
    for c in doc["category"]:
        unknown = set(c) - {"name", "description", "frames", "innermost", "also", "indirect"}
        if unknown or "name" not in c:
            raise RulesError(
                f"{where}: category keys {sorted(c)}: a name is required, and "
                f"{sorted(unknown)} are unknown here (if the analyzer learned them, teach "
                "notebooks/allocprof/categories.py too)"
            )
        out.append(
            Category(
                name=c["name"],
                description=c.get("description", ""),
                frames=_patterns(c.get("frames", []), where),
                innermost=_patterns(c.get("innermost", []), where),
                also=_patterns(c.get("also", []), where),
                indirect=c.get("indirect"),
            )
        )
    return out


def load_rules(path: str | os.PathLike | None = None) -> list[Category]:
    """Rules from `path`, else from $ALLOC_CATEGORY_RULES, else the analyzer's built-in
    ones."""
    path = path or os.environ.get("ALLOC_CATEGORY_RULES") or DEFAULT_RULES_PATH
    return parse_rules(Path(path).read_text(), str(path))


def site_categories(report: Report, rules: list[Category]) -> pl.DataFrame:
    """site_id -> category, for every site with frames (the others get UNMATCHED from
    `with_categories`)."""
    frames = report.annotated_frames
    inner = naming.naming_frames(frames)
    any_frame, on_inner = [], []
    for k, c in enumerate(rules):
        for j, p in enumerate(c.frames):
            any_frame.append(p.expr().any().alias(f"f{k}_{j}"))
        for j, p in enumerate(c.also):
            any_frame.append(p.expr().any().alias(f"a{k}_{j}"))
        for j, p in enumerate(c.innermost):
            on_inner.append(p.expr().any().alias(f"i{k}_{j}"))
    hits = frames.group_by("site_id").agg(any_frame) if any_frame else None
    per_site = report.frames.select(pl.col("site_id").unique())
    if hits is not None:
        per_site = per_site.join(hits, on="site_id", how="left")
    if on_inner:
        per_site = per_site.join(
            inner.group_by("site_id").agg(on_inner), on="site_id", how="left"
        )
    category = pl.lit(UNMATCHED)
    # Built from the last rule to the first, so that the first matching rule wins.
    for k, c in reversed(list(enumerate(rules))):
        if not c.frames and not c.innermost:
            continue  # claims nothing (categories.rs: Category::claims)
        cond = pl.lit(True)
        for prefix, pats in (("f", c.frames), ("i", c.innermost), ("a", c.also)):
            if pats:
                cond = cond & pl.any_horizontal(
                    [pl.col(f"{prefix}{k}_{j}").fill_null(False) for j in range(len(pats))]
                )
        category = pl.when(cond).then(pl.lit(c.name)).otherwise(category)
    return per_site.select("site_id", category.alias("category"))


def with_categories(
    report: Report, sites: pl.DataFrame, rules: list[Category]
) -> pl.DataFrame:
    """`sites` (any frame with a site_id column) with a `category` column."""
    cats = site_categories(report, rules)
    return sites.join(cats, on="site_id", how="left").with_columns(
        pl.col("category").fill_null(UNMATCHED)
    )


def category_totals(
    report: Report, rules: list[Category], phase: str | None = None
) -> pl.DataFrame:
    """Totals per category, rules in order and then UNMATCHED (all of them, empty ones
    too), within `phase` if given: the rows of `analyzer categories --format json`."""
    order = [c.name for c in rules] + [UNMATCHED]
    sites = with_categories(report, site_totals(report, phase), rules).with_columns(
        n=pl.col("alloc_count") + pl.col("realloc_count")
    )
    total = sites["n"].sum()
    top = (
        sites.sort(["n", "site_id"], descending=[True, False])
        .group_by("category", maintain_order=True)
        .first()
        .select("category", top_site_id="site_id")
    )
    sums = sites.group_by("category").agg(
        pl.len().alias("sites"),
        pl.col("alloc_count").sum(),
        pl.col("realloc_count").sum(),
        pl.col("bytes_requested").sum(),
        pl.col("temporary_count").sum(),
    )
    names = naming.site_names(report.annotated_frames, top["top_site_id"].to_list())
    top = top.join(names, left_on="top_site_id", right_on="site_id", how="left")
    out = (
        pl.DataFrame({"category": order, "order": list(range(len(order)))})
        .join(sums, on="category", how="left")
        .join(top.select("category", top_site="name"), on="category", how="left")
        .with_columns(
            pl.col("sites").fill_null(0).cast(pl.UInt64),
            *[
                pl.col(c).fill_null(0).cast(pl.UInt64)
                for c in ("alloc_count", "realloc_count", "bytes_requested", "temporary_count")
            ],
            pl.col("top_site").fill_null(""),
        )
        .with_columns(
            share=(
                (pl.col("alloc_count") + pl.col("realloc_count")) / total
                if total
                else pl.lit(0.0)
            )
        )
        .sort("order")
        .select(
            "category",
            "sites",
            "alloc_count",
            "realloc_count",
            "bytes_requested",
            "temporary_count",
            "share",
            "top_site",
        )
    )
    return out
