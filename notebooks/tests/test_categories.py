"""Categories: the analyzer's rules file read in Python, matched the same way
(analyzer/src/categories.rs), checked against `analyzer categories --format json`."""

import math

import polars as pl
import pytest

from allocprof import categories
from allocprof.report import Report


def test_default_rules_parse():
    rules = categories.load_rules()
    assert len(rules) >= 6
    assert rules[0].name == "Boolean::lc temporaries"
    assert all(c.frames or c.innermost for c in rules)


def test_unknown_keys_are_refused_like_the_analyzer_does():
    with pytest.raises(categories.RulesError, match="mine.toml"):
        categories.parse_rules('[[category]]\nnom = "x"', "mine.toml")
    with pytest.raises(categories.RulesError):
        categories.parse_rules('[[category]]\nname = "x"\nframes = [{ fn = "a" }]')
    with pytest.raises(categories.RulesError):
        categories.parse_rules("[[category]]\nname = ")


class FakeReport(Report):
    """A report made of a frames table only."""

    def __init__(self, rows):
        super().__init__(dir=None, manifest={})
        self._tables["frames"] = pl.DataFrame(
            rows,
            schema={"site_id": pl.UInt64, "frame_index": pl.UInt32, "function": pl.String,
                    "file": pl.String, "line": pl.UInt32},
            orient="row",
        )


def test_first_matching_rule_wins():
    # The cases of categories.rs's own test.
    lc = (0, "insert_or_update<S>", "/x/bellpepper-core-0.2.1/src/lc.rs")
    boolean = (1, "lc<S>", "/x/bellpepper-core-0.2.1/src/gadgets/boolean.rs")
    enforce = (2, "enforce<S>", "/x/bellperson-0.27.0/src/groth16/prover/mod.rs")
    grow = (0, "grow_one<T>", "/rustc/x/library/alloc/src/raw_vec/mod.rs")
    alloc = (1, "alloc<S>", "/x/bellperson-0.27.0/src/groth16/prover/mod.rs")
    stacks = {
        0: [lc, boolean, enforce],
        1: [lc, (1, *enforce[1:])],
        2: [grow, alloc],
        3: [(0, "main", "/x/src/main.rs")],
    }
    rows = [(site, i, f, file, 1) for site, fs in stacks.items() for i, f, file in fs]
    cats = dict(categories.site_categories(FakeReport(rows), categories.load_rules()).iter_rows())
    assert cats == {
        0: "Boolean::lc temporaries",
        1: "enforce LinearCombination buffers",
        2: "assignment and density vector growth",
        3: categories.UNMATCHED,
    }


def test_patterns_match_prefix_and_suffix():
    rules = categories.parse_rules(
        '''
[[category]]
name = "suffix"
frames = [{ function = "foo", file = "src/a.rs" }]
[[category]]
name = "part of path"
innermost = [{ file = "my-crate" }]
[[category]]
name = "claims nothing"
also = [{ function = "main" }]
'''
    )
    rows = [
        (0, 0, "foo_bar<T>", "/x/src/a.rs", 1),    # prefix of the name, suffix of the path
        (1, 0, "foo", "/x/src/a.rs.bak", 1),       # not a suffix
        (2, 0, "bar", "/x/my-crate-1.0/src/b.rs", 1),
        (3, 0, "alloc::raw_vec::grow", "/rustc/x/library/alloc/src/raw_vec.rs", 1),
        (3, 1, "bar", "/x/my-crate-1.0/src/b.rs", 1),  # innermost after the plumbing
        (4, 0, "bar", "/x/other/src/b.rs", 1),
        (4, 1, "baz", "/x/my-crate-1.0/src/b.rs", 1),  # not the naming frame
        (5, 0, "main", None, None),
    ]
    cats = dict(categories.site_categories(FakeReport(rows), rules).iter_rows())
    assert cats == {
        0: "suffix",
        1: categories.UNMATCHED,
        2: "part of path",
        3: "part of path",
        4: categories.UNMATCHED,
        5: categories.UNMATCHED,
    }


@pytest.mark.parametrize("phase", [None, "synthesize"])
def test_totals_equal_the_analyzers(any_report, analyzer, phase):
    args = ["categories", any_report.dir] + (["--phase", phase] if phase else [])
    theirs = analyzer(*args)
    mine = categories.category_totals(any_report, categories.load_rules(), phase).to_dicts()
    assert [m["category"] for m in mine] == [t["category"] for t in theirs]
    for m, t in zip(mine, theirs):
        assert math.isclose(m.pop("share"), t.pop("share"), rel_tol=1e-12, abs_tol=1e-15)
        # The analyzer may add fields (costs); every one computed here must agree.
        assert m == {k: t[k] for k in m}
    assert sum(t["alloc_count"] for t in theirs) > 0
