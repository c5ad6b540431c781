"""scripts/check-layers.py: which modules a file names, and the cycles it reports."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check-layers.py"
spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layers)


def test_every_module_a_use_group_names_counts_nested_groups_included():
    assert layers.targets("use crate::{hot::{a, b}, session::Session};") == {"hot", "session"}
    assert layers.targets("use crate::x::y; let z = crate::w::f(); use crate::{p, q::r};") == {
        "x", "w", "p", "q"
    }
    # Comments and strings name nothing.
    assert layers.targets('// crate::a\nlet s = "crate::b";') == set()
    assert layers.targets('let s = r#"crate::a "quoted""#; /* crate::b */') == set()
    # A quote or an `r"` inside another literal starts nothing: the paths after it
    # are still code.
    assert layers.targets('let s = "for"; crate::a::f();') == {"a"}
    assert layers.targets("let q = '\"'; crate::a::f(); let t = \"x\";") == {"a"}
    assert layers.targets("let q = '\\''; crate::b::f();") == {"b"}
    assert layers.targets("fn f<'a>(x: &'a str) { crate::c::g(x) }") == {"c"}


def test_super_paths_name_the_module_they_climb_to():
    hot_alloc = ("hot", "alloc")
    # Within the top-level module: nothing of the crate's outside it.
    assert layers.targets("use super::entry;", hot_alloc) == {"hot"}
    # To the crate root and on: the module named there, alone or in a group.
    assert layers.targets("use super::super::registry::f;", hot_alloc) == {"registry"}
    assert layers.targets("use super::super::{registry, hot::x};", hot_alloc) == {"registry", "hot"}
    # An inline module is a level: a test module's `super::super` stays in `hot`.
    text = "mod tests { use super::super::entry; }\nfn f() { super::super::lifetimes::g(); }"
    assert layers.targets(text, hot_alloc) == {"hot", "lifetimes"}
    # A glob names nothing (as `crate::*`), not `super` by a shorter chain; a raw
    # identifier's inline module is a level too.
    assert layers.targets("use super::super::*;", hot_alloc) == set()
    assert layers.targets("mod r#type { use super::super::entry; }", hot_alloc) == {"hot"}
    # A file's own `super::*` at the top level of its crate names nothing else.
    assert layers.targets("mod tests { use super::*; use super::f; }", ("registry",)) == {"registry"}


def test_a_cycle_fails(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "lib.rs").write_text("mod a; mod b;\n")
    (src / "a.rs").write_text("use crate::{b::{f, g}};\n")
    (src / "b.rs").write_text("use crate::a::h;\n")
    problems = layers.check(src)
    assert any("a" in p and "b" in p for p in problems), problems
    (src / "b.rs").write_text("fn h() {}\n")
    assert layers.check(src) == []


def test_the_hot_path_reaches_the_cold_side_only_through_its_door(tmp_path):
    src = tmp_path / "alloc-tracer" / "src"
    (src / "hot").mkdir(parents=True)
    (src / "lib.rs").write_text("mod hot; mod registry;\n")
    (src / "registry.rs").write_text("pub fn f() {}\n")
    (src / "hot" / "mod.rs").write_text("mod x;\n")
    (src / "hot" / "x.rs").write_text("fn g() { crate::registry::f(); }\n")
    problems = layers.check(src)
    assert any("hot::door::Door" in p for p in problems), problems
    # Nor by climbing out of hot/ with `super`.
    (src / "hot" / "x.rs").write_text("use super::super::registry;\n")
    problems = layers.check(src)
    assert any("hot::door::Door" in p for p in problems), problems
    # Within hot/, anything goes.
    (src / "hot" / "x.rs").write_text("use crate::hot::door; use super::door::Door;\n")
    assert layers.check(src) == []
