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
