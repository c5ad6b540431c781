"""Running notebooks headless (nbclient), as CI does: every cell must succeed.

    python -m allocprof.execute [--out DIR] NOTEBOOK...

Inputs come from the environment (ALLOC_REPORT, ...; see notebooks/README.md), which
the kernel inherits; a relative path among them is taken from where this command runs,
not from the notebook's folder, where the kernel does. With --out, the executed copies
(with outputs) are written there; the notebooks themselves are left as they are.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

#: Per cell: a 32 GiB report's tables take seconds to read, never minutes.
CELL_TIMEOUT_S = 600
#: A kernel starts in a second or two, but CI's two cores may be busy compiling.
STARTUP_TIMEOUT_S = 180


#: The inputs that name files or folders.
PATH_INPUTS = (
    "ALLOC_REPORT",
    "ALLOC_BASE_REPORT",
    "ALLOC_CHANGE_REPORT",
    "ALLOC_LARGE_REPORT",
    "ALLOC_CATEGORY_RULES",
    "COST_MODEL_RESULTS",
    "PLOT_DIR",
    "ALLOC_PROFILER_CALIBRATION",
    "ANALYZER",
)


def absolute_inputs(env: dict, cwd: Path) -> dict:
    """`env` with each relative path among `PATH_INPUTS` made absolute against `cwd`:
    the kernel runs in the notebook's folder, and `reports/x` given from the
    repository root means the root's `reports/x`."""
    out = dict(env)
    for name in PATH_INPUTS:
        value = out.get(name)
        if value and not Path(value).is_absolute():
            out[name] = str(cwd / value)
    return out


class NotANotebook(Exception):
    """A path that is no notebook this package can read."""


def execute(notebook: str | Path, out: str | Path | None = None) -> nbformat.NotebookNode:
    """Executes `notebook` in a fresh python3 kernel whose working directory is the
    notebook's own (so `import allocprof` finds this package); raises NotANotebook
    for a path it cannot read as one, CellExecutionError on the first failing cell."""
    path = Path(notebook)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # absent, unreadable, not JSON, not a notebook's JSON
        raise NotANotebook(f"not a notebook: {e}") from e
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        startup_timeout=STARTUP_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent.resolve())}},
    )
    try:
        client.execute()
    finally:
        if out is not None:
            Path(out).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, Path(out) / path.name)
    return nb


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="write executed copies here")
    args = parser.parse_args(argv)
    os.environ.update(absolute_inputs(dict(os.environ), Path.cwd()))
    failed = 0
    for nb in args.notebooks:
        start = time.monotonic()
        try:
            execute(nb, args.out)
            print(f"{nb}: ok ({time.monotonic() - start:.1f} s)")
        except CellExecutionError as e:
            failed += 1
            print(f"{nb}: FAILED\n{e}", file=sys.stderr)
        except NotANotebook as e:
            # Said, and the next ones still run.
            failed += 1
            print(f"{nb}: FAILED: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
