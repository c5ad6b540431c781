"""Other parquet engines read the same report: DuckDB and pandas answer "top 10 sites by
allocation count" exactly as the analyzer does (count = allocations + reallocs per site,
ties by site id)."""

import duckdb
import pandas as pd


def expected(analyzer_top, report):
    top = analyzer_top(report, 10)
    assert len(top) == 10
    return [(s["site_id"], s["alloc_count"], s["realloc_count"]) for s in top]


def test_duckdb_top_sites_equal_the_analyzers(synthesis_report, analyzer_top):
    rows = duckdb.sql(
        f"""
        SELECT site_id, sum(alloc_count) AS alloc_count, sum(realloc_count) AS realloc_count
        FROM read_parquet('{synthesis_report / "sites.parquet"}')
        GROUP BY site_id
        ORDER BY sum(alloc_count + realloc_count) DESC, site_id
        LIMIT 10
        """
    ).fetchall()
    assert [tuple(int(v) for v in r) for r in rows] == expected(analyzer_top, synthesis_report)


def test_pandas_top_sites_equal_the_analyzers(synthesis_report, analyzer_top):
    sites = pd.read_parquet(synthesis_report / "sites.parquet")
    sites["count"] = sites["alloc_count"] + sites["realloc_count"]
    top = (
        sites.groupby("site_id", as_index=False)[["alloc_count", "realloc_count", "count"]]
        .sum()
        .sort_values(["count", "site_id"], ascending=[False, True])
        .head(10)
    )
    rows = list(zip(top["site_id"], top["alloc_count"], top["realloc_count"]))
    assert [tuple(int(v) for v in r) for r in rows] == expected(analyzer_top, synthesis_report)


def test_the_engines_read_every_table_alike(synthesis_report):
    """Row counts and column names agree between DuckDB, pandas and the manifest."""
    import json

    manifest = json.loads((synthesis_report / "manifest.json").read_text())
    for table in manifest["tables"]:
        path = synthesis_report / table["file"]
        df = pd.read_parquet(path)
        rel = duckdb.sql(f"SELECT * FROM read_parquet('{path}')")
        assert len(df) == table["rows"] == rel.shape[0], table["file"]
        assert list(df.columns) == rel.columns, table["file"]
