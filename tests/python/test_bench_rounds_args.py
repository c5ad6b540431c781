"""scripts/bench_rounds.py --check-args: what the bench scripts run before their builds,
so that an option a table does not take is refused at once, not after minutes of
building and sealing."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_rounds.py"


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SCRIPT, *args, "--bin", "b", "--c1", "-", "--out", "o", "--check-args"],
        capture_output=True, text=True,
    )


def test_options_a_table_takes_pass():
    assert check("modes", "--with-sha", "--rounds", "3").returncode == 0
    assert check("heap", "--with-sha").returncode == 0
    assert check("peers", "--only", "dhat-rs,heaptrack").returncode == 0


def test_options_a_table_does_not_take_are_refused():
    r = check("sites", "--with-sha")
    assert r.returncode == 2 and "--with-sha applies to the heap and modes" in r.stderr
    r = check("modes", "--only", "dhat-rs")
    assert r.returncode == 2 and "--only applies to the peers table" in r.stderr
    r = check("peers", "--only", "dhat-rs,dhat")
    assert r.returncode == 2 and "no configuration named dhat " in r.stderr
    r = check("modes", "--bogus")
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr


def test_every_peer_can_be_named_in_only():
    # The list the refusal gives, passed back whole: a name with a comma in it would
    # split into names that are not there.
    r = check("peers", "--only", "nothing")
    names = r.stderr.split("(they are: ", 1)[1].rsplit(")", 1)[0].split(", ")
    assert "jemalloc prof (512 KiB)" in names, names
    r = check("peers", "--only", ",".join(names))
    assert r.returncode == 0, r.stderr
