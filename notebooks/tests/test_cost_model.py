"""The cost-model results reader, on a results file made up here: a test fixture in a
temporary directory, not a measurement."""

import math
import shutil

import pytest

from allocprof import cost_model

HEADER = "variant,predicted_saving_s,measured_saving_s,baseline_median_s,variant_median_s,runs\n"


@pytest.fixture
def results_csv(tmp_path):
    # Made-up figures chosen to exercise the arithmetic (over-, under- and a
    # zero prediction).
    p = tmp_path / "results.csv"
    p.write_text(
        HEADER
        + "fixture-a,2.0,0.5,10.0,9.5,7\n"
        + "fixture-b,1.0,1.5,10.0,8.5,7\n"
        + "fixture-c,0.0,-0.25,10.0,10.25,7\n"
    )
    return p


def test_results_are_read_and_errors_derived(results_csv):
    r = cost_model.with_errors(cost_model.load_results(results_csv))
    assert r["variant"].to_list() == ["fixture-a", "fixture-b", "fixture-c"]
    assert r["runs"].to_list() == [7, 7, 7]
    assert r["error_s"].to_list() == [1.5, -0.5, 0.25]
    assert math.isclose(r["measured_saving_share"][1], 0.15)
    assert r["measured_over_predicted"].to_list()[:2] == [0.25, 1.5]
    assert r["measured_over_predicted"][2] is None


def test_columns_may_come_in_another_order(tmp_path):
    p = tmp_path / "results.csv"
    p.write_text("runs,variant,measured_saving_s,predicted_saving_s,variant_median_s,baseline_median_s,note\n"
                 "3,x,1,2,9,10,extra\n")
    r = cost_model.load_results(p)
    assert r.columns == list(cost_model.RESULT_COLUMNS)
    assert r.row(0) == ("x", 2.0, 1.0, 10.0, 9.0, 3)


@pytest.mark.parametrize(
    "text, message",
    [
        ("variant,predicted_saving_s\nx,1\n", "no column"),
        (HEADER + "x,1,,10,9,3\n", "empty values"),
        (HEADER + "x,1,1,10,9,3\nx,2,2,10,8,3\n", "twice"),
        (HEADER + "x,fast,1,10,9,3\n", "results.csv"),
    ],
)
def test_bad_results_are_refused(tmp_path, text, message):
    p = tmp_path / "results.csv"
    p.write_text(text)
    with pytest.raises(cost_model.ResultsError, match=message):
        cost_model.load_results(p)


def test_variant_reports_beside_the_results(results_csv, report):
    assert cost_model.variant_reports(results_csv) == {}
    reports = results_csv.parent / "reports"
    shutil.copytree(report.dir, reports / "baseline")
    (reports / "not-a-report").mkdir()
    found = cost_model.variant_reports(results_csv)
    assert list(found) == ["baseline"]
    totals = cost_model.allocation_totals(found)
    assert totals.row(0, named=True)["alloc_count"] == report.manifest["totals"]["alloc_count"]


def test_interval_columns_are_kept_when_present(tmp_path):
    p = tmp_path / "results.csv"
    p.write_text(HEADER.rstrip("\n")
                 + ",predicted_saving_low_s,predicted_saving_high_s,measured_saving_low_s\n"
                 + "x,2,1,10,9,3,1.5,2.5,0.5\n")
    r = cost_model.load_results(p)
    # The predicted pair is complete; the measured one lacks its high column.
    assert r.columns == list(cost_model.RESULT_COLUMNS) + [
        "predicted_saving_low_s", "predicted_saving_high_s"]
    assert r.row(0)[-2:] == (1.5, 2.5)


def test_predicted_vs_measured_draws_intervals(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    from allocprof import plots
    p = tmp_path / "results.csv"
    p.write_text(HEADER.rstrip("\n")
                 + ",predicted_saving_low_s,predicted_saving_high_s,"
                 + "measured_saving_low_s,measured_saving_high_s\n"
                 + "x,2,1,10,9,3,1.5,2.5,0.5,3.5\n")
    fig = plots.predicted_vs_measured(cost_model.load_results(p), "t")
    ax = fig.axes[0]
    # The measured interval's top (3.5) lies beyond every other value: the axes
    # reach it only if they take the bars in.
    assert ax.get_xlim()[1] > 3.5 and ax.get_ylim()[1] > 3.5
    # Two error-bar collections, each bar from its interval's low end to its high.
    assert len(ax.collections) == 2
    segments = sorted(tuple(map(tuple, s.tolist())) for c in ax.collections
                      for s in c.get_segments())
    assert segments == [((1.5, 1.0), (2.5, 1.0)), ((2.0, 0.5), (2.0, 3.5))]


def test_a_missing_results_file_says_what_writes_it(tmp_path):
    with pytest.raises(cost_model.ResultsError, match="no such file: scripts/cost-model-check.py writes"):
        cost_model.load_results(tmp_path / "results.csv")
