"""Comparing two reports (a baseline and a change): per-phase, per-category and
per-site deltas.

Site ids are per report, so sites are matched as `analyzer diff` matches them: by
the analyzer's job key (its `job_key` column: the source-level call stack, less the
frames a rayon pool nests around a job, which differ from run to run), then the
stacks left on each side by the same key with line numbers ignored (a patch that
moved code within its files; one to one, those moved as the patch moved their
function's lines first, then the nearest): status `by path` and `ignoring lines`,
as `analyzer diff` names them. Two reports of one build match site
for site; a stack found on one side only is `gone` (baseline only) or `new` (change
only). `key="name"` matches by site name instead (coarser). Deltas are change minus
baseline: negative means the change allocates less. A phase is checked in both
reports, and reports of different modes or circuits are said to be (`warnings`), as
`analyzer diff` does.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from allocprof import analyzer
from allocprof.overview import phases, temporaries_note
from allocprof.report import Report, check_limit
from allocprof.sites import bound_of_variance, category_totals, records_whole, sampled_parts
from allocprof.sites import check_phase as _check_phase

MEASURES = ("alloc_count", "realloc_count", "bytes_requested", "temporary_count")

#: A row's status, as `analyzer diff` names it (its `matched` field): found in both
#: reports by whole stack, or with lines ignored; only in the baseline; only in the change.
BY_PATH, IGNORING_LINES, GONE, NEW = "by path", "ignoring lines", "gone", "new"

#: Statuses of rows found in both reports.
MATCHED = (BY_PATH, IGNORING_LINES)

#: The key prefix of rows matched with line numbers ignored (as `analyzer diff`'s).
LOOSE_PREFIX = "(lines ignored)\n"


def _with_sites(*reports: Report) -> None:
    """Refuses a report that recorded no stack (a `count` report), as `analyzer diff`
    does: it has no sites, so every site of the other report would read as added or
    removed."""
    for r in reports:
        if r.count_only:
            raise ValueError(
                f"{r.dir} {_no_sites_words(r)}: a comparison of sites needs reports traced "
                "in `sites` or `sample:N`"
            )


def _no_sites_words(r: Report) -> str:
    """How a report that recorded no stack came to have no sites."""
    mode = r.manifest.get("mode")
    if mode == "count":
        return "was written in `count` mode, which records no sites"
    return f"records allocations but no sites (mode {mode} when written, after count mode)"


def without_sites(base: Report, change: Report) -> str | None:
    """Why the two reports' sites cannot be compared (a `count` report records none:
    its totals and phases still can), else None."""
    counted = [r for r in (base, change) if r.count_only]
    if not counted:
        return None
    if all(r.manifest.get("mode") == "count" for r in counted):
        said = (f"{' and '.join(str(r.dir) for r in counted)} "
                f"{'was' if len(counted) == 1 else 'were'} written in `count` mode, which "
                "records no sites")
    else:
        said = " and ".join(f"{r.dir} {_no_sites_words(r)}" for r in counted)
    return (
        f"{said}: the totals and phases above compare exactly, the categories, costs and "
        "sites need reports traced in `sites` or `sample:N`"
    )


def check_phase(base: Report, change: Report, phase: str | None) -> str | None:
    """`phase` when both reports have it (or None); else the one-line error of the
    first report that lacks it, with its phases, as `analyzer diff --phase` refuses a
    phase either report lacks."""
    for r in (base, change):
        _check_phase(r, phase)
    return phase


def _resolved(rules: Path | None) -> Path | None:
    """A rules file's path as the file system resolves it (None: built-in rules)."""
    return None if rules is None else Path(rules).resolve()


def _check_pair(base: Report, change: Report, phase: str | None) -> str | None:
    """`check_phase`, and the two reports' category rules the same: `analyzer diff`
    takes one `--rules` for both, and categories of two rule sets do not compare."""
    if _resolved(base.rules) != _resolved(change.rules):
        raise ValueError(
            f"the reports were loaded with different category rules ({base.rules or 'built-in'} "
            f"and {change.rules or 'built-in'}): load both with the same `rules`")
    return check_phase(base, change, phase)


def warnings(base: Report, change: Report) -> list[str]:
    """What `analyzer diff` says on standard error of two reports that differ beyond a
    patch: traced in different modes (sampled figures are estimates), or of different
    work: other circuits or provers (synth-driver's `circuit` and `prover` labels), one
    circuit run a different number of times (the same `circuit` label and rows an
    iteration), or circuits of different sizes (the `rows` label, over every
    iteration)."""
    out = []
    mb, mc = base.mode_words, change.mode_words
    if mb != mc:
        out.append(
            f"the reports were traced in different modes ({mb} and {mc}): sampled "
            "figures are estimates, so small differences may be sampling noise"
        )
    lb = base.manifest.get("labels") or {}
    lc = change.manifest.get("labels") or {}
    apart = _other_work(lb, lc)
    if apart is not None:
        out.append(f"the reports are {apart}: their differences are not a patch's alone")
    return out


def predicted_cost(base: Report, change: Report, phase: str | None = None, recycled: bool = False):
    """What the change saves or costs in seconds, as `analyzer diff` predicts it (its
    calibration; docs/cost-model.md): a dict of both sides' `cost_s`, the
    `predicted_change_s`, its `noise_s` from sampling (None for exact reports) and
    `repriced_s` (the part at sites whose allocations and bytes did not change), and
    a table of the categories: `delta_count` (allocations + reallocs, which `analyzer
    diff` calls `delta_alloc_count`), `delta_cost_s` and its `cost_noise_s`. A `count`
    report, which records no sites to price, is refused (ValueError), as `analyzer
    diff` refuses it. `recycled`: the change recycles what it no longer allocates (a
    pool, as synth-driver's `pooled-enforce`): `recycling_s`, what that costs, is
    part of the prediction (`analyzer diff --recycled`); else None."""
    _with_sites(base, change)
    _check_pair(base, change, phase)
    d = analyzer.diff(base.dir, change.dir, phase, base.rules, recycled)
    summary = {
        "base_cost_s": d["base"]["cost_s"],
        "change_cost_s": d["change"]["cost_s"],
        "predicted_change_s": d["predicted_change_s"],
        "recycling_s": d.get("recycling_s"),
        "noise_s": d["predicted_change_noise_s"],
        "repriced_s": d["repriced_s"],
    }
    cats = pl.DataFrame(d["categories"], infer_schema_length=None).filter(
        (pl.col("base_alloc_count") > 0) | (pl.col("change_alloc_count") > 0)
    ).select("category", pl.col("delta_alloc_count").alias("delta_count"), "delta_cost_s", "cost_noise_s")
    return summary, cats


def estimate_note(base: Report, change: Report) -> str | None:
    """What a figure of the two reports must say when either was traced in `sample:N`
    mode: its per-site and per-category counts are estimates, with the noise the
    figures draw as error bars; None when both record every allocation."""
    sampled = [f"{r.label} ({r.stacks_mode})" for r in (base, change) if r.sampled]
    if not sampled:
        return None
    return (
        "estimates from sampled stacks in " + " and ".join(sampled)
        + ": error bars are two standard errors of sampling alone"
    )


#: Below this share of the baseline's allocations at matched sites, the per-site rows
#: are mostly churn (`analyzer diff`'s LOW_MATCH_SHARE).
LOW_MATCH_SHARE = 0.8


def match_warning(matched: float, base_sites: int | None = None) -> str | None:
    """`analyzer diff`'s warning when under LOW_MATCH_SHARE of the baseline's
    allocations are at sites found in the change (`matched`: `matched_share`); none
    where the baseline has no site to match (`base_sites` 0: a sampled report that
    sampled nothing of the phase), as there."""
    if matched >= LOW_MATCH_SHARE or base_sites == 0:
        return None
    return (
        f"only {matched:.1%} of the base's allocations are at sites found in the change: "
        "the patch removed that code, or the site rows marked gone and new are largely "
        "the same code under other frames (trust the category totals)"
    )


def _other_work(lb: dict, lc: dict) -> str | None:
    """How two reports' work differs, in `analyzer diff`'s words: other circuits, other
    provers, or (different `rows` labels) one circuit run a different number of times
    or circuits of different sizes; None when it does not."""
    for key, what in (("circuit", "of different circuits"), ("prover", "run by different provers")):
        x, y = lb.get(key), lc.get(key)
        if x is not None and y is not None and x != y:
            return f"{what} ({x} and {y})"
    rb, rc, ib, ic = lb.get("rows"), lc.get("rows"), lb.get("iterations"), lc.get("iterations")
    if rb is None or rc is None or rb == rc:
        return None
    try:
        nb, nc, ib_n, ic_n = int(rb), int(rc), int(ib), int(ic)
    except (TypeError, ValueError):
        nb = None
    same = lb.get("circuit") is not None and lb.get("circuit") == lc.get("circuit")
    if nb is not None and same and ib_n != ic_n and nb * ic_n == nc * ib_n:
        return f"of one circuit run {ib} and {ic} times (rows {rb} and {rc})"
    return f"of circuits of different sizes (rows {rb} and {rc})"


def _with_deltas(df: pl.DataFrame, measures) -> pl.DataFrame:
    """`df` with delta_M = change_M - base_M for each measure M: counts as Int64 (the
    tables' UInt64 would wrap below zero), floats (seconds) as they are."""

    def delta(m: str) -> pl.Expr:
        b, c = pl.col(f"base_{m}"), pl.col(f"change_{m}")
        if df.schema[f"base_{m}"].is_integer() and df.schema[f"change_{m}"].is_integer():
            b, c = b.cast(pl.Int64), c.cast(pl.Int64)
        return (c - b).alias(f"delta_{m}")

    return df.with_columns([delta(m) for m in measures])


def totals_deltas(base: Report, change: Report) -> pl.DataFrame:
    """The manifests' totals side by side (measure, base, change, delta, ratio, note).
    Exact in every traced mode but for temporaries: a `count` report's are not counted
    (null here, and so is the delta), a `sample:N` report's are estimates; `note` says
    so."""
    b, c = base.manifest["totals"], change.manifest["totals"]
    keys = [k for k in b if k in c and isinstance(b[k], int)]
    uncounted = {s: r.count_only for s, r in (("base", base), ("change", change))}

    def value(side: str, totals: dict, k: str) -> int | None:
        return None if k == "temporary_count" and uncounted[side] else totals[k]

    notes = [
        f"{side}: {how.removeprefix('temporaries: ')}"
        for side, r in (("baseline", base), ("change", change))
        if (how := temporaries_note(r))
    ]
    df = pl.DataFrame(
        {
            "measure": keys,
            "base": [value("base", b, k) for k in keys],
            "change": [value("change", c, k) for k in keys],
            "note": ["; ".join(notes) if k == "temporary_count" and notes else None for k in keys],
        },
        schema={"measure": pl.String, "base": pl.Int64, "change": pl.Int64, "note": pl.String},
    )
    return df.with_columns(
        delta=pl.col("change") - pl.col("base"),
        ratio=pl.when(pl.col("base") != 0).then(pl.col("change") / pl.col("base")),
    ).select("measure", "base", "change", "delta", "ratio", "note")


def phase_deltas(base: Report, change: Report) -> pl.DataFrame:
    """Per phase, the base's in its order and then those only the change has:
    allocations, temporaries and wall time (seconds, not rounded) in both reports (`main`'s wall time, the run's outside the named phases, as `analyzer
    info` gives it). A `count` report's temporaries are null: it does not count them."""
    cols = ["alloc_count", "realloc_count", "temporary_count", "wall_s"]

    def side(r: Report, prefix: str) -> pl.DataFrame:
        return phases(r).with_row_index(f"{prefix}_order").select(
            "phase", f"{prefix}_order", *[pl.col(c).alias(f"{prefix}_{c}") for c in cols]
        )

    b, c = side(base, "base"), side(change, "change")
    # The base's phases in its order, then those only the change has, in its order.
    out = (
        b.join(c, on="phase", how="full", coalesce=True)
        .sort(pl.col("base_order").is_null(), "base_order", "change_order")
        .drop("base_order", "change_order")
    )
    out = out.with_columns([pl.col(c).fill_null(0) for c in out.columns if c != "phase"])
    for prefix, r in (("base", base), ("change", change)):
        if r.count_only:
            out = out.with_columns(pl.lit(None, dtype=pl.UInt64).alias(f"{prefix}_temporary_count"))
    return _with_deltas(out, cols)


def category_deltas(base: Report, change: Report, phase: str | None = None) -> pl.DataFrame:
    """Per category with sites on either side (the analyzer's order): both sides'
    totals and deltas; `count` is allocations plus reallocs, what `analyzer diff`'s
    category rows count."""
    _with_sites(base, change)
    _check_pair(base, change, phase)
    cols = list(MEASURES) + ["count", "sites"]

    def side(r: Report, prefix: str) -> pl.DataFrame:
        t = category_totals(r, phase).with_columns(
            count=pl.col("alloc_count") + pl.col("realloc_count")
        )
        return t.select(
            "category",
            pl.col("category_index").alias(f"{prefix}_index"),
            *[pl.col(c).alias(f"{prefix}_{c}") for c in cols],
        )

    out = side(base, "base").join(side(change, "change"), on="category", how="full", coalesce=True)
    out = (
        out.with_columns(order=pl.coalesce("base_index", "change_index"))
        .sort("order")
        .drop("order", "base_index", "change_index")
    )
    out = out.with_columns([pl.col(c).fill_null(0) for c in out.columns if c != "category"])
    # Each side's part of a key's variance to the category that side counts it in
    # (a side without the key: the other's), as `analyzer diff` assigns it.
    rows = _site_rows(base, change, phase, "stack")
    parts = pl.concat(
        [
            rows.select(
                category=pl.coalesce(f"{side}_category", f"{other}_category"),
                variance=pl.col(f"{side}_variance"),
            )
            for side, other in (("base", "change"), ("change", "base"))
        ]
    )
    noise = parts.group_by("category").agg(pl.col("variance").sum()).select(
        "category", count_noise=bound_of_variance(pl.col("variance"))
    )
    return _with_deltas(out, cols).join(noise, on="category", how="left", maintain_order="left")


def _keyed_sites(r: Report, phase: str | None, key: str) -> pl.DataFrame:
    """The named-sites rows of `phase` (one the report lacks is refused) summed per
    key; each key is named after its lowest site id (site ids rank sites by
    allocations, 0 = most), by stack with the job's callers and distinction (told
    apart among all the report's jobs, where `analyzer diff` tells apart the rows it
    shows)."""
    rows = r.named_sites
    if key == "stack":
        key_column = "job_key"
        rows = rows.with_columns(callers=pl.col("job_callers"), distinction=pl.col("job_distinction"))
    elif key == "name":
        key_column = "name"
    else:
        raise ValueError(f"key must be 'stack' or 'name', not {key!r}")
    if _check_phase(r, phase) is not None:
        rows = rows.filter(pl.col("phase") == phase)
    # Each row's allocations in the classes a `sample:N` report samples one in N.
    rows = rows.join(
        sampled_parts(r).select("site_id", "phase", "small_calls"),
        on=["site_id", "phase"],
        how="left",
    ).with_columns(pl.col("small_calls").fill_null(0))
    return (
        rows.sort("site_id")
        .group_by(pl.col(key_column).alias("key"), maintain_order=True)
        .agg(*_summed(pl.col("site_id")))
    )


def _summed(order: pl.Expr) -> list[pl.Expr]:
    """A group's labels, from its lowest site id (`order` sorted), and its sums."""
    first = lambda c: pl.col(c).sort_by(order).first()  # noqa: E731
    return [
        pl.col("site_id").min(),
        *[first(c) for c in ("name", "callers", "distinction", "category")],
        *[pl.col(m).sum() for m in MEASURES],
        pl.col("small_calls").sum(),
    ]


def _loose_str(key: str) -> str:
    """A stack key without its line numbers (`function@path:line` per line becomes
    `function@path`), the analyzer's `loose_key`."""
    return re.sub(r":[0-9]*\n", "\n", key)


def _line(frame: str) -> int | None:
    """The line of a stack key's frame (`function@path:line`), if it has one."""
    _, colon, line = frame.rpartition(":")
    return int(line) if colon and line.isdigit() else None


def _frames(x: str, y: str):
    """The frames of two stack keys of one loose key, side by side: each frame
    without its line, by how many lines the second moved from the first (None where
    either has no line), and whether the two differ."""
    for f, g in zip(x.split("\n"), y.split("\n")):
        p, q = _line(f), _line(g)
        yield f.rpartition(":")[0] or f, (q - p if p is not None and q is not None else None), f != g


#: What a frame whose lines differ and one of which has none costs a pair, as
#: `analyzer diff` has it: more than any shift of lines.
_LINELESS = 1 << 32


def _cost(x: str, y: str, usual: dict[str, int]) -> int:
    """What pairing two stack keys of one loose key costs, as `analyzer diff` has it:
    by how many lines each frame moved otherwise than its function's usual shift (0
    for one not in it), summed; _LINELESS for a differing frame one of which has no
    line."""
    total = 0
    for at, shift, differ in _frames(x, y):
        if shift is not None:
            total += abs(shift - usual.get(at, 0))
        elif differ:
            total += _LINELESS
    return total


def _line_order(keys: list[str]) -> list[str]:
    """Stack keys by their frames' lines, outermost frame first (a frame without a
    line as 0), then by the key, as `analyzer diff` orders them."""
    def lines(k: str) -> list[int]:
        return [_line(f) or 0 for f in reversed(k.split("\n"))]
    return [k for _, k in sorted((lines(k), k) for k in keys)]


def _align(xs: list[str], ys: list[str], usual: dict[str, int]) -> list[tuple[str, str]]:
    """One group's pairs, each side in line order, none crossing another: as many as
    can be, and among those the least cost, as `analyzer diff` pairs them (ties to
    pairing first, then to leaving the earlier baseline key out)."""
    xs, ys = _line_order(xs), _line_order(ys)
    n, m = len(xs), len(ys)
    best = [[(0, 0)] * (m + 1) for _ in range(n + 1)]
    how = [[0] * (m + 1) for _ in range(n + 1)]

    def better(a, b):
        return a[0] > b[0] or (a[0] == b[0] and a[1] < b[1])

    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 and j == 0:
                continue
            here = None
            if i and j:
                p, c = best[i - 1][j - 1]
                here = ((p + 1, c + _cost(xs[i - 1], ys[j - 1], usual)), 0)
            if i and (here is None or better(best[i - 1][j], here[0])):
                here = (best[i - 1][j], 1)
            if j and (here is None or better(best[i][j - 1], here[0])):
                here = (best[i][j - 1], 2)
            best[i][j], how[i][j] = here
    pairs = []
    i, j = n, m
    while i or j:
        if how[i][j] == 0:
            pairs.append((xs[i - 1], ys[j - 1]))
            i, j = i - 1, j - 1
        elif how[i][j] == 1:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _usual_shifts(groups) -> dict[str, int]:
    """For each function (a frame without its line) with lines, the shift most
    candidate pairs give it, 0 (a frame unchanged) among them, ties to the smaller
    shift, as `analyzer diff` finds it: a patch that adds or removes lines moves
    every line after them alike, so the pairs that agree with it are the right ones
    where whole keys or distance alone would cross two sites."""
    counts: dict[str, dict[int, int]] = {}
    for xs, ys in groups:
        for x in xs:
            for y in ys:
                for at, shift, _ in _frames(x, y):
                    if shift is not None:
                        per = counts.setdefault(at, {})
                        per[shift] = per.get(shift, 0) + 1
    return {at: max(per.items(), key=lambda kv: (kv[1], -abs(kv[0]), kv[0]))[0]
            for at, per in counts.items()}


def _match_ignoring_lines(b: pl.DataFrame, c: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both sides' rows by stack key, paired as `analyzer diff` pairs them: stacks
    that read the same without lines, one to one, in line order with no two pairs
    crossing, as many as can be, and among those the ones whose frames moved least
    otherwise than their function's usual shift. A pair of different keys goes under
    the baseline's key prefixed with LOOSE_PREFIX on both sides; what is left over
    stays gone or new."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for key in sorted(set(b["key"].to_list())):
        groups.setdefault(_loose_str(key), ([], []))[0].append(key)
    for key in sorted(set(c["key"].to_list())):
        groups.setdefault(_loose_str(key), ([], []))[1].append(key)
    both = [(xs, ys) for _, (xs, ys) in sorted(groups.items()) if xs and ys]
    usual = _usual_shifts(both)
    pairs = [pair for xs, ys in both for pair in _align(xs, ys, usual)]
    b_to = {x: LOOSE_PREFIX + x for x, y in pairs if x != y}
    c_to = {y: LOOSE_PREFIX + x for x, y in pairs if x != y}
    return (b.with_columns(key=pl.col("key").replace(b_to)),
            c.with_columns(key=pl.col("key").replace(c_to)))


def _sampled_weights(base: Report, change: Report) -> tuple[int, int]:
    """Each side's sample interval where it samples (0 for a report that records
    every allocation): the weight of the side's part of a delta's variance."""

    def weight(r: Report) -> int:
        n = int(r.manifest.get("sample_interval") or 1)
        return n if n > 1 else 0

    return weight(base), weight(change)


def _site_rows(base: Report, change: Report, phase: str | None, key: str) -> pl.DataFrame:
    """Both sides' keyed sites joined, with status, labels, deltas and each side's
    part of the count delta's sampling variance (`base_variance`, `change_variance`:
    the side's sample interval times the larger side's count of what it samples, 0
    where the side records every allocation; see `site_deltas`)."""
    _with_sites(base, change)
    _check_pair(base, change, phase)
    b = _keyed_sites(base, phase, key)
    c = _keyed_sites(change, phase, key)
    if key == "stack":
        b, c = _match_ignoring_lines(b, c)
    rename = lambda df, p: df.rename({x: f"{p}_{x}" for x in df.columns if x != "key"})  # noqa: E731
    out = rename(b, "base").join(rename(c, "change"), on="key", how="full", coalesce=True)
    out = (
        out.with_columns(
            status=pl.when(pl.col("base_site_id").is_null())
            .then(pl.lit(NEW))
            .when(pl.col("change_site_id").is_null())
            .then(pl.lit(GONE))
            .when(pl.col("key").str.starts_with(LOOSE_PREFIX))
            .then(pl.lit(IGNORING_LINES))
            .otherwise(pl.lit(BY_PATH)),
            name=pl.coalesce("base_name", "change_name"),
            callers=pl.coalesce("base_callers", "change_callers"),
            distinction=pl.coalesce("base_distinction", "change_distinction"),
            category=pl.coalesce("base_category", "change_category"),
        )
        .with_columns([pl.col(f"{p}_{m}").fill_null(0) for p in ("base", "change")
                       for m in (*MEASURES, "small_calls")])
        .pipe(_with_deltas, MEASURES)
        .with_columns(
            delta_count=pl.col("delta_alloc_count") + pl.col("delta_realloc_count")
        )
    )
    wb, wc = _sampled_weights(base, change)

    def truth(r: Report) -> pl.Expr:
        # The larger side's count of what `r` samples: all of it, or the classes
        # below those it records whole.
        part = "small_calls" if records_whole(r) else "count"
        return pl.max_horizontal(
            pl.col(f"base_{part}") if part != "count"
            else pl.col("base_alloc_count") + pl.col("base_realloc_count"),
            pl.col(f"change_{part}") if part != "count"
            else pl.col("change_alloc_count") + pl.col("change_realloc_count"),
        ).cast(pl.Float64)

    return out.with_columns(base_variance=wb * truth(base), change_variance=wc * truth(change))


def site_deltas(
    base: Report,
    change: Report,
    phase: str | None = None,
    key: str = "stack",
    limit: int | None = 20,
) -> pl.DataFrame:
    """The sites whose allocations + reallocs changed most (by absolute delta), with
    both sides' figures, the category, a name and a status: `by path`, `ignoring
    lines` (matched with line numbers ignored, summed per side; `key="stack"` only),
    `gone` or `new`. A phase either report lacks is refused.

    `count_noise` is how far the sampling of allocations alone may move
    `delta_count` where a report was traced in `sample:N` mode (null otherwise), as
    `analyzer diff`'s `alloc_count_noise`: two standard errors, each side's count
    taken as Poisson in its samples, `N` times the larger side's count its variance.
    A site of `c` allocations goes unrecorded with probability about `e^(-c/N)`."""
    check_limit(limit)
    out = _site_rows(base, change, phase, key).with_columns(
        count_noise=bound_of_variance(pl.col("base_variance") + pl.col("change_variance"))
    ).sort([pl.col("delta_count").abs(), "key"], descending=[True, False])
    if limit is not None:
        out = out.head(limit)
    return out.select(
        "name",
        "callers",
        "distinction",
        "category",
        "status",
        "base_site_id",
        "change_site_id",
        "base_alloc_count",
        "change_alloc_count",
        "base_realloc_count",
        "change_realloc_count",
        "base_temporary_count",
        "change_temporary_count",
        "delta_count",
        "delta_alloc_count",
        "delta_realloc_count",
        "delta_bytes_requested",
        "delta_temporary_count",
        "count_noise",
        "key",
    )


def unmatched_sites(deltas: pl.DataFrame, limit: int | None = 20) -> pl.DataFrame:
    """The rows of `site_deltas` found in one report only (`gone`, `new`), most
    allocations + reallocs first: the stacks a patch removed or added (or the same code
    under other frames), which `analyzer diff` lists by name among its rows."""
    out = deltas.filter(pl.col("status").is_in((GONE, NEW))).sort(
        [pl.col("delta_count").abs(), "key"], descending=[True, False]
    )
    return out if check_limit(limit) is None else out.head(limit)


def changed_sites(deltas: pl.DataFrame, limit: int | None = 20) -> pl.DataFrame:
    """The rows of `site_deltas` found in both reports whose allocations + reallocs
    changed (delta_count not 0), largest change first: what the site-deltas figure
    draws. Empty when no matched site changed."""
    out = deltas.filter(pl.col("status").is_in(MATCHED) & (pl.col("delta_count") != 0))
    return out if check_limit(limit) is None else out.head(limit)


def waterfall_steps(category_deltas_df: pl.DataFrame, measure: str = "count") -> pl.DataFrame:
    """Steps of a waterfall from the baseline total to the change's: one row per
    category with a non-zero delta (label, start, delta, and `noise`: for `count`, the
    category's `count_noise`, null where no report was sampled), between a `baseline`
    and a `change` bar. `measure`: one of the frame's measures (`count`, or one of
    `MEASURES`)."""
    measures = [c.removeprefix("base_") for c in category_deltas_df.columns if c.startswith("base_")]
    if measure not in measures:
        raise ValueError(f"measure must be one of {measures}, not {measure!r}")
    base_total = int(category_deltas_df[f"base_{measure}"].sum())
    change_total = int(category_deltas_df[f"change_{measure}"].sum())
    has_noise = measure == "count" and "count_noise" in category_deltas_df.columns
    steps = category_deltas_df.filter(pl.col(f"delta_{measure}") != 0).select(
        label="category",
        delta=pl.col(f"delta_{measure}"),
        noise=pl.col("count_noise") if has_noise else pl.lit(None, dtype=pl.UInt64),
    )
    starts = (steps["delta"].cum_sum() - steps["delta"] + base_total).to_list()
    rows = [("baseline", 0, base_total, "total", None)]
    rows += [
        (lbl, s, d, "delta", n)
        for lbl, s, d, n in zip(steps["label"], starts, steps["delta"], steps["noise"])
    ]
    rows.append(("change", 0, change_total, "total", None))
    return pl.DataFrame(
        {
            "label": [r[0] for r in rows],
            "start": [r[1] for r in rows],
            "delta": [r[2] for r in rows],
            "kind": [r[3] for r in rows],
            "noise": [r[4] for r in rows],
        },
        schema={
            "label": pl.String,
            "start": pl.Int64,
            "delta": pl.Int64,
            "kind": pl.String,
            "noise": pl.UInt64,
        },
    )


def matched_share(base: Report, change: Report, phase: str | None = None, key: str = "stack") -> float:
    """The share of the baseline's allocations and reallocs at sites found in both
    reports (status `by path` or `ignoring lines` in `site_deltas`): `analyzer
    diff`'s `matched_alloc_share` (0 for an empty baseline, as there). Below most, the
    per-site rows are churn of unmatched stacks rather than per-site change. Taken
    from the reports, not from a `site_deltas` frame, which its `limit` may have cut."""
    deltas = _site_rows(base, change, phase, key)
    calls = pl.col("base_alloc_count") + pl.col("base_realloc_count")
    total = deltas.select(calls.sum()).item()
    both = deltas.filter(pl.col("status").is_in(MATCHED)).select(calls.sum()).item()
    return float(both / total) if total else 0.0
