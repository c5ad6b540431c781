"""The notebooks run headless from start to end (any failing cell fails the test) and
draw their figures; they are committed without outputs.

Inputs as the notebooks read them: ALLOC_REPORT (01, 04), ALLOC_BASE_REPORT and
ALLOC_CHANGE_REPORT (02), COST_MODEL_RESULTS (03), ALLOC_LARGE_REPORT (04, default the
committed 32 GiB report under data/), ALLOC_SAMPLED_REPORT (01 on a `sample:N` report).
Figures go to $PLOT_DIR when it is set (CI keeps them), else to a
temporary directory.
"""

import ast
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError

from allocprof import plots, sites
from allocprof.execute import execute
from imagefiles import is_png, is_svg
from reports import edited_copy, report_from

HERE = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
#: The figures `plots` draws (what test_figures_say_what_they_count reads the calls of).
PLOTS = {name for name in dir(plots) if callable(getattr(plots, name)) and not name.startswith("_")}


def plot_dir(tmp_path) -> Path:
    return Path(os.environ.get("PLOT_DIR") or tmp_path / "plots")


def figures(directory: Path, prefix: str) -> list[Path]:
    return sorted(directory.glob(f"{prefix}-*.*"))


def check_figures(directory: Path, prefix: str, expected: set):
    found = figures(directory, prefix)
    names = {p.stem for p in found}
    assert expected <= names, f"missing figures {expected - names} in {directory}"
    for p in found:
        if p.suffix == ".png":
            assert is_png(p), p
        elif p.suffix == ".svg":
            assert is_svg(p), p
    assert {p.suffix for p in found} == {".png", ".svg"}


def test_there_are_four_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01-overview.ipynb",
        "02-compare.ipynb",
        "03-cost-model.ipynb",
        "04-memory.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{path.name}: clear outputs before committing "
                "(jupyter nbconvert --clear-output --inplace)"
            )


def test_a_failing_cell_fails_the_run(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("raise ValueError('boom')")]
    )
    path = tmp_path / "failing.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(CellExecutionError, match="boom"):
        execute(path)


def run(name: str, monkeypatch, tmp_path, **env) -> nbformat.NotebookNode:
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    out = os.environ.get("NOTEBOOK_OUT")  # executed copies, with outputs, if wanted
    return execute(HERE / name, out)


def outputs(nb) -> str:
    """Everything the cells printed or showed as text."""
    return "".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "")
        for c in nb.cells for o in c.get("outputs", [])
    )


def test_overview_runs(monkeypatch, tmp_path):
    if not os.environ.get("ALLOC_REPORT"):
        pytest.fail("set ALLOC_REPORT to a report directory (scripts/test.sh does)")
    d = plot_dir(tmp_path)
    nb = run("01-overview.ipynb", monkeypatch, tmp_path, PLOT_DIR=d)
    check_figures(d, "01", {"01-phases", "01-top-sites", "01-categories", "01-cost-sites",
                            "01-size-classes", "01-lifetimes", "01-temporaries"})
    # The top sites' table shows what tells apart sites that read the same.
    top = next(o["data"]["text/plain"] for o in nb.cells[7].outputs if "text/plain" in o.get("data", {}))
    assert "distinction" in top and "via " in top


def test_memory_runs(monkeypatch, tmp_path):
    if not os.environ.get("ALLOC_REPORT"):
        pytest.fail("set ALLOC_REPORT to a report directory (scripts/test.sh does)")
    d = plot_dir(tmp_path)
    nb = run("04-memory.ipynb", monkeypatch, tmp_path, PLOT_DIR=d)
    check_figures(d, "04", {"04-timeline", "04-timeline-large", "04-peak-categories",
                            "04-peak-sites", "04-per-row"})
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "kept peak" in text and "estimates add up to" in text


def test_compare_runs(monkeypatch, tmp_path):
    for var in ("ALLOC_BASE_REPORT", "ALLOC_CHANGE_REPORT"):
        if not os.environ.get(var):
            pytest.fail(f"set {var} to a report directory (scripts/test.sh does)")
    d = plot_dir(tmp_path)
    nb = run("02-compare.ipynb", monkeypatch, tmp_path, PLOT_DIR=d)
    check_figures(d, "02", {"02-waterfall", "02-site-deltas"})
    # The predicted change in seconds, as `analyzer diff` gives it.
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "predicted change " in text and " ms (allocation cost " in text, text


def cost_model_fixture(tmp_path, report: str | None) -> Path:
    """Made-up results at tmp_path/fixture/results.csv, with `report` copied as the
    baseline's beside them (if given)."""
    results = tmp_path / "fixture" / "results.csv"
    results.parent.mkdir()
    results.write_text(
        "variant,predicted_saving_s,measured_saving_s,baseline_median_s,variant_median_s,runs\n"
        "fixture-a,2.0,0.5,10.0,9.5,5\n"
        "fixture-b,0.5,0.75,10.0,9.25,5\n"
    )
    if report:
        shutil.copytree(report, results.parent / "reports" / "baseline")
    return results


def test_cost_model_runs_on_a_fixture(monkeypatch, tmp_path):
    # Made-up figures in a temporary directory, to run the notebook's cells; its
    # figures stay there, apart from the real ones.
    report = os.environ.get("ALLOC_BASE_REPORT")
    results = cost_model_fixture(tmp_path, report)
    d = tmp_path / "fixture-plots"
    nb = run("03-cost-model.ipynb", monkeypatch, tmp_path, COST_MODEL_RESULTS=results, PLOT_DIR=d)
    expected = {"03-predicted-vs-measured", "03-savings"} | ({"03-allocations"} if report else set())
    check_figures(d, "03", expected)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "2 variants" in text


def test_cost_model_finds_a_relative_results_file_and_its_reports(monkeypatch, tmp_path):
    """A relative COST_MODEL_RESULTS, found under the folder Jupyter was started from
    (the kernel runs in the notebooks' folder): the reports beside it are found there
    too."""
    cost_model_fixture(tmp_path, report_from("ALLOC_BASE_REPORT").dir)
    d = tmp_path / "plots"
    run("03-cost-model.ipynb", monkeypatch, tmp_path, PWD=tmp_path,
        COST_MODEL_RESULTS=Path("fixture") / "results.csv", PLOT_DIR=d)
    check_figures(d, "03", {"03-predicted-vs-measured", "03-savings", "03-allocations"})


def test_cost_model_runs_on_measured_results(monkeypatch, tmp_path):
    results = os.environ.get("COST_MODEL_RESULTS")
    if not results or not Path(results).is_file():
        pytest.skip(
            f"notebook 03 not run on measurements: no results file at COST_MODEL_RESULTS="
            f"{results or '(unset)'} (scripts/cost-model-check.py writes OUT/results.csv)"
        )
    d = plot_dir(tmp_path)
    run("03-cost-model.ipynb", monkeypatch, tmp_path, COST_MODEL_RESULTS=results, PLOT_DIR=d)
    check_figures(d, "03", {"03-predicted-vs-measured", "03-savings"})


def test_memory_runs_on_reports_that_lack_what_it_draws(monkeypatch, tmp_path):
    """Valid reports without what 04 draws: no `rows` label (the tracer's demo), no
    timeline (an older tracer), a larger report without a kept peak (heap_peak
    absent): each is said in one line, and the cells after it run."""
    demo = edited_copy(report_from("ALLOC_TRACER_REPORT"), tmp_path / "demo", drop_tables=["timeline"],
                       manifest=lambda m: m.pop("timeline_interval_ms", None))
    assert "rows" not in demo.manifest.get("labels", {})
    large = edited_copy(report_from("ALLOC_BASE_REPORT"), tmp_path / "older", drop_tables=["heap_peak", "heap_end"],
                        manifest=lambda m: [m.pop(k, None) for k in ("heap_peak", "heap_interval")])
    d = tmp_path / "plots"
    nb = run("04-memory.ipynb", monkeypatch, tmp_path, ALLOC_REPORT=demo.dir, ALLOC_LARGE_REPORT=large.dir,
             PLOT_DIR=d)
    text = outputs(nb)
    assert "demo: this report has no timeline table" in text
    assert "older: this report has no heap_peak table" in text
    assert "never reached 1 MiB" not in text
    assert "no `rows` label (synth-driver records one) in demo" in text
    check_figures(d, "04", {"04-timeline-large", "04-peak-categories", "04-peak-sites", "04-per-row"})


def test_compare_refuses_a_phase_a_report_lacks(monkeypatch, tmp_path):
    """A mistyped ALLOC_PHASE stops 02 at once with the analyzer's one-line refusal,
    rather than drawing empty tables."""
    for var in ("ALLOC_BASE_REPORT", "ALLOC_CHANGE_REPORT"):
        if not os.environ.get(var):
            pytest.fail(f"set {var} to a report directory (scripts/test.sh does)")
    with pytest.raises(CellExecutionError, match="has no phase 'synthesise' \\(its phases: main, "):
        run("02-compare.ipynb", monkeypatch, tmp_path, ALLOC_PHASE="synthesise", PLOT_DIR=tmp_path / "plots")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_say_what_they_count(path):
    """"allocations" alone names the `alloc` calls, reallocs apart: a figure of
    allocations + reallocs says so. No notebook labels a figure with the bare word,
    and every figure of counts (`count`) says "allocations + reallocs"."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in PLOTS:
                words = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                assert "allocations" not in words, (path.name, cell.source)
                if "count" in words or "n" in words:
                    assert "allocations + reallocs" in words, (path.name, cell.source)


def test_compare_of_count_reports_gives_their_totals(monkeypatch, tmp_path):
    """Two `count` reports compare exactly on totals and phases (as `analyzer diff`
    gates them); their sites, which they do not record, are said to be missing, not a
    traceback."""
    # A real count report (a whole 32 GiB partition's), against itself.
    counted = HERE / "data" / "porep-32g-count"
    nb = run("02-compare.ipynb", monkeypatch, tmp_path, ALLOC_BASE_REPORT=counted,
             ALLOC_CHANGE_REPORT=counted, PLOT_DIR=tmp_path / "plots")
    text = outputs(nb)
    assert "were written in `count` mode, which records no sites" in text, text
    assert "alloc_count" in text, "the totals table"
    assert "no sites to compare" in text


def test_overview_runs_on_a_sampled_report_in_a_phase_without_sampled_sites(sampled_report, monkeypatch,
                                                                             tmp_path):
    """01 on a real `sample:N` report, in a phase none of whose allocations was sampled
    (`setup`'s few, mostly): the cost section says there are no sites to price, rather
    than failing on an empty table; the figures say they hold estimates."""
    sampled = set(sampled_report.sites["phase"])
    names = sites.phase_names(sampled_report)
    phase = "setup" if "setup" in names and "setup" not in sampled else \
        next((p for p in names if p not in sampled), None)
    # scripts/test.sh's chain at sample:100: `setup` makes 1 allocation and `main` 6,
    # so both are sampled about 1 run in 1,700.
    assert phase is not None, f"every phase of {sampled_report.label} was sampled: run again"
    d = tmp_path / "plots"
    nb = run("01-overview.ipynb", monkeypatch, tmp_path, ALLOC_REPORT=sampled_report.dir,
             ALLOC_PHASE=phase, PLOT_DIR=d)
    check_figures(d, "01", {"01-phases", "01-top-sites", "01-categories", "01-cost-sites",
                            "01-size-classes", "01-lifetimes", "01-temporaries"})
    text = outputs(nb)
    assert "estimates from sampled stacks" in text
    assert f"no sites to price ({sampled_report.label}, phase {phase})" in text, text


def test_paths_that_are_no_notebooks_are_said_and_the_rest_still_run(tmp_path, capsys):
    """`python -m allocprof.execute` on a missing file, a binary one and JSON that is
    no notebook: each one line, exit 1, none stopping the others (a traceback did)."""
    from allocprof import execute

    binary = tmp_path / "binary.ipynb"
    binary.write_bytes(bytes(range(256)))
    listed = tmp_path / "list.ipynb"
    listed.write_text("[]")
    assert execute.main([str(tmp_path / "missing.ipynb"), str(binary), str(listed)]) == 1
    err = capsys.readouterr().err
    assert err.count("FAILED: not a notebook") == 3, err
