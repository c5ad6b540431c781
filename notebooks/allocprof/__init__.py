"""Query code shared by the notebooks: alloc-tracer reports read with Python polars.

The report format is `docs/report-schema.md` (schema version 1). Sites are named,
categorised and keyed by the analyzer, not here: `Report.named_sites` is its
named-sites table (`analyzer export --format parquet`, run on first use; see
`allocprof.analyzer`), and the functions here join its columns.

Modules: `report` (loading), `analyzer` (the named-sites table), `sites` (per-site
and per-category totals), `overview` (one report), `compare` (two reports),
`cost_model` (predicted vs measured savings), `memory` (the timeline, what holds
the peak, and how memory scales with the circuit), `plots` (matplotlib figures saved to
PLOT_DIR), `execute` (running notebooks headless).
"""

from allocprof.report import Report, load

__all__ = ["Report", "load"]
