"""Site naming, ported from alloc-tracer/format/src/frames.rs and analyzer/src/naming.rs
(the cases of their tests, and the names `analyzer top` gives on real reports)."""

import polars as pl

from allocprof import naming
from allocprof.sites import top_sites


def test_generics_are_dropped():
    assert naming.without_generics("<alloc::vec::Vec<T>>::push<u8>") == "alloc::vec::Vec::push"
    assert naming.without_generics("main") == "main"
    assert (
        naming.without_generics("<bellpepper_core::lc::LinearCombination<S> as core::ops::Add>::add")
        == "bellpepper_core::lc::LinearCombination as core::ops::Add::add"
    )
    # Unbalanced brackets keep what is outside them, as the Rust code does.
    assert naming.without_generics("a>b<c") == "a>b"


def test_plumbing_by_name_and_path():
    assert naming.is_plumbing("__rustc::__rust_alloc", None)
    assert naming.is_plumbing("<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem", None)
    assert naming.is_plumbing("push", "/rustc/abc/library/alloc/src/vec/mod.rs")
    assert not naming.is_plumbing("insert_or_update", "/r/bellpepper-core-0.2.1/src/lc.rs")
    assert not naming.is_plumbing("T as my::Trait", None)


def frames(rows):
    return pl.DataFrame(
        rows,
        schema={"site_id": pl.UInt64, "frame_index": pl.UInt32, "function": pl.String,
                "file": pl.String, "line": pl.UInt32},
        orient="row",
    )


def test_names_skip_plumbing_and_generics():
    f = frames([
        (0, 0, "push<u8>", "/rustc/x/library/alloc/src/vec/mod.rs", 7),
        (0, 1, "insert_or_update<Scalar>", "/r/bellpepper-core-0.2.1/src/lc.rs", 7),
        (0, 2, "enforce<S>", "/r/bellperson/src/groth16/prover/mod.rs", 9),
        # All plumbing: named by the outermost frame.
        (1, 0, "alloc::alloc::alloc", "/rustc/x/library/alloc/src/alloc.rs", 1),
        (1, 1, "core::ptr::drop", None, None),
    ])
    names = dict(naming.site_names(f, [0, 1, 2]).iter_rows())
    assert names == {0: "insert_or_update (lc.rs:7)", 1: "core::ptr::drop", 2: naming.NO_FRAMES}
    callers = dict(naming.callers(f, [0], depth=2).iter_rows())
    assert callers == {0: "enforce"}


def test_names_equal_the_analyzers(any_report, analyzer):
    theirs = analyzer("top", any_report.dir, "--limit", 200)
    mine = top_sites(any_report, limit=200)
    assert [(s["site_id"], s["name"]) for s in theirs] == list(
        mine.select("site_id", "name").iter_rows()
    )


def test_stack_keys_cover_every_site_once(any_report):
    keys = naming.stack_keys(any_report.annotated_frames)
    assert keys.height == any_report.frames["site_id"].n_unique()
    assert keys["site_id"].n_unique() == keys.height
    assert keys["stack_key"].str.len_chars().min() > 0
    # Keys are source lines, not addresses: sites whose return addresses differ but
    # expand to the same lines (a quarter of a PoRep report's) share one.
    site = keys["site_id"][0]
    first = any_report.frames.filter(pl.col("site_id") == site).sort("frame_index")
    assert keys["stack_key"][0].count("\n") == first.height


def test_stack_keys_drop_generics_and_path_prefixes_but_not_lines():
    f = frames([
        (0, 0, "insert<u8>", "/home/a/.cargo/registry/src/x/bellpepper-core-0.2.1/src/lc.rs", 108),
        (0, 1, "main", "main.rs", None),
        (1, 0, "insert<u64>", "/ci/cargo/registry/src/y/bellpepper-core-0.2.1/src/lc.rs", 108),
        (1, 1, "main", "main.rs", None),
        (2, 0, "insert", "/ci/cargo/registry/src/y/bellpepper-core-0.2.1/src/lc.rs", 109),
        (2, 1, "main", "main.rs", None),
    ])
    keys = dict(naming.stack_keys(f).iter_rows())
    assert keys[0] == "insert@x/bellpepper-core-0.2.1/src/lc.rs:108\nmain@main.rs:\n"
    assert keys[0].replace("x/", "y/") == keys[1]
    assert keys[1] != keys[2]
