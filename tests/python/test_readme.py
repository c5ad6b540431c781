"""The README's "Reading reports" snippets work on a real report: the Python polars
snippet and the DuckDB SQL run (the top-10 ones agree with the analyzer), and the Rust
polars snippet type-checks against the polars this workspace builds."""

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import duckdb
import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", "/var/tmp/alloc-profiler/target"))
PLACEHOLDER = "reports/porep-2k"


def snippets(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Reading reports"):]
    section = section[: section.index("\n## ", 1)]
    found = re.findall(rf"```{language}\n(.*?)```", section, re.S)
    assert found, f"no {language} snippet in README.md's Reading reports"
    return found


def on(report, code: str) -> str:
    assert PLACEHOLDER in code
    return code.replace(PLACEHOLDER, str(report))


def test_python_polars_snippet(synthesis_report, analyzer_top):
    (code,) = snippets("python")
    scope = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(on(synthesis_report, code), scope)
    top = scope["top"]
    expected = [(s["site_id"], s["alloc_count"] + s["realloc_count"]) for s in analyzer_top(synthesis_report)]
    assert list(top.select("site_id", "count").iter_rows()) == expected
    assert top["function"].null_count() == 0
    assert "site_id" in out.getvalue()


def test_duckdb_snippets(synthesis_report, analyzer_top):
    top_sql, classes_sql = snippets("sql")
    rows = duckdb.sql(on(synthesis_report, top_sql)).fetchall()
    expected = [(s["site_id"], s["alloc_count"] + s["realloc_count"]) for s in analyzer_top(synthesis_report)]
    assert [(int(r[0]), int(r[1])) for r in rows] == expected
    assert all(r[2] for r in rows)

    rows = duckdb.sql(on(synthesis_report, classes_sql)).fetchall()
    want = (
        pl.read_parquet(synthesis_report / "size_classes.parquet")
        .group_by("phase", "size_class_bytes")
        .agg(pl.col("alloc_count").sum())
        .sort("alloc_count", descending=True)
        .head(10)
    )
    assert [int(r[2]) for r in rows] == want["alloc_count"].to_list()
    assert {(r[0], int(r[1]), int(r[2])) for r in rows} <= set(
        pl.read_parquet(synthesis_report / "size_classes.parquet")
        .group_by("phase", "size_class_bytes")
        .agg(pl.col("alloc_count").sum())
        .iter_rows()
    )


def test_rust_polars_snippet_type_checks(tmp_path):
    """rustc --emit=metadata against the polars and anyhow the workspace build left in
    the target directory (no cargo, no linking: a second or so)."""
    (code,) = snippets("rust")
    rustc = shutil.which("rustc")
    if rustc is None:
        pytest.fail("rustc not found: the Rust snippet cannot be checked")
    deps = TARGET / "release" / "deps"

    def locked(name):
        """The rlibs of `name` at the version Cargo.lock pins, newest first: the
        target directory, reused across builds, keeps older versions' too."""
        lock = (ROOT / "Cargo.lock").read_text()
        version = re.search(rf'name = "{name}"\nversion = "([^"]+)"', lock).group(1)
        source = f"/{name}-{version}/src/lib.rs"
        libs = [lib for lib in deps.glob(f"lib{name}-*.rlib")
                if source in lib.with_name(lib.name[3:-5] + ".d").read_text(errors="replace")]
        return sorted(libs, key=lambda lib: lib.stat().st_mtime, reverse=True)

    polars_libs, anyhow_libs = locked("polars"), locked("anyhow")
    if not polars_libs or not anyhow_libs:
        pytest.fail(f"no polars/anyhow rlib of Cargo.lock's versions in {deps}: "
                    "build the workspace first")
    src = tmp_path / "snippet.rs"
    src.write_text(code)
    errors = []
    # The target directory can hold several builds of that polars (the workspace's
    # crates ask for different features): the snippet must type-check against one.
    for lib in polars_libs:
        r = subprocess.run(
            [rustc, "--edition", "2021", "--crate-type", "bin", "--emit=metadata",
             "-o", str(tmp_path / "snippet.rmeta"), str(src),
             "--extern", f"polars={lib}", "--extern", f"anyhow={anyhow_libs[0]}",
             "-L", f"dependency={deps}"],
            capture_output=True, text=True, env={**os.environ, "RUSTFLAGS": ""},
        )
        if r.returncode == 0:
            return
        errors.append(f"{lib.name}:\n{r.stderr[-2000:]}")
    pytest.fail("the README's Rust snippet does not type-check:\n" + "\n".join(errors))


def test_ci_gate_snippet(synthesis_report):
    """The "Allocation regression gate in CI" job's `analyzer check` step passes on the
    2 KiB PoRep partition's report with the repository's example budget, and its trace
    step makes that report the way scripts/test.sh does."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Allocation regression gate in CI"):]
    section = section[: section.index("\n## ", 1)]
    (job,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    assert "--trace sites --report reports/porep-2k porep --c1 reports/sector-2k/c1.json --partition 0" in job
    (check,) = re.findall(r"run: (target/release/analyzer check .*)", job)
    binary = Path(os.environ.get("ANALYZER") or TARGET / "release" / "analyzer")
    # Paths quoted for the shell: a checkout or report path may hold a space.
    assert PLACEHOLDER in check
    command = check.replace(PLACEHOLDER, shlex.quote(str(synthesis_report))).replace(
        "target/release/analyzer", shlex.quote(str(binary))
    )
    r = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.endswith(" limits checked, all within budget\n"), r.stdout


def test_analyzer_commands(synthesis_report, tmp_path):
    """Every `analyzer` command of the README's analyzer block runs on the 2 KiB PoRep
    report (the diff and the differential flame graph compare it with itself), and its
    outputs are written."""
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", text, re.S) if "-p analyzer --" in b]
    assert blocks, "no analyzer commands in README.md"
    commands = [l for b in blocks for l in b.splitlines() if "-p analyzer --" in l]
    subcommands = {c.split(" -- ")[1].split()[0] for c in commands}
    assert {"info", "top", "categories", "cost", "diff", "budget", "check", "flamegraph",
            "export"} <= subcommands
    binary = Path(os.environ.get("ANALYZER") or TARGET / "release" / "analyzer")
    for command in commands:
        line = command.replace("cargo run --release -p analyzer --", shlex.quote(str(binary)))
        for placeholder in (PLACEHOLDER, "reports/base", "reports/patched"):
            line = line.replace(placeholder, shlex.quote(str(synthesis_report)))
        r = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, f"{command}: {r.stderr}"
        outputs = re.findall(r"-o (\S+)", line)
        for out in outputs:
            assert (tmp_path / out).stat().st_size > 0, f"{command}: {out} is empty"


def test_install_commands_are_what_ci_runs():
    """The README's install commands are the ones .ci/run runs into a temporary root."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Installing the tools"):]
    section = section[: section.index("\n## ", 1)]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    ci = (ROOT / ".ci" / "run").read_text()
    assert "for crate in analyzer synth-driver" in ci
    assert 'cargo install --locked --quiet --path "$crate"' in ci
    for crate in ("analyzer", "synth-driver"):
        assert f"cargo install --locked --path {crate}\n" in block
    assert "pip install -e notebooks\n" in block
    assert "-e 'notebooks[notebooks]' -c constraints.txt" in (ROOT / "scripts" / "test.sh").read_text()
