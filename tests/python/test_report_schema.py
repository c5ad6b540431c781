"""A report read with Python polars has every documented column with its documented
type, and no nulls where the schema says there are none.

Run by scripts/test.sh with ALLOC_TRACER_REPORT pointing at a report directory.
"""

import json
import os
import re
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = Path(os.environ.get("ALLOC_TRACER_REPORT", ROOT / "target-report-missing"))


def documented():
    """{file: [(column, type, nullable)]} from docs/report-schema.md."""
    tables, current = {}, None
    for line in (ROOT / "docs" / "report-schema.md").read_text().splitlines():
        m = re.match(r"^### `(.+)`$", line)
        if m:
            current = m.group(1)
            tables[current] = []
        elif line.startswith("## "):
            current = None
        elif current and line.startswith("| `"):
            cells = [c.strip() for c in line.split("|")[1:-1]]
            tables[current].append((cells[0].strip("`"), cells[1], cells[2] == "yes"))
    return tables


def test_report_exists():
    assert (REPORT / "manifest.json").is_file(), f"no report at {REPORT}"


def test_schema_version_is_known():
    manifest = json.loads((REPORT / "manifest.json").read_text())
    assert manifest["schema_version"] == 1


@pytest.mark.parametrize("table", sorted(documented()))
def test_table_has_documented_columns_and_types(table):
    df = pl.read_parquet(REPORT / table)
    columns = documented()[table]
    assert df.columns == [c for c, _, _ in columns]
    for name, dtype, nullable in columns:
        assert str(df.schema[name]) == dtype, f"{table}.{name}"
        if not nullable:
            assert df[name].null_count() == 0, f"{table}.{name} has nulls"
    assert df.height > 0, f"{table} is empty"
