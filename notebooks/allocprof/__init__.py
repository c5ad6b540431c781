"""Query code shared by the notebooks: alloc-tracer reports read with Python polars.

The report format is `docs/report-schema.md` (schema version 1). Site names and
categories follow the analyzer's rules exactly (`alloc-tracer/format/src/frames.rs`,
`analyzer/src/naming.rs`, `analyzer/src/categories.rs`); the tests check them against
the analyzer's JSON output on real reports, so a change on either side shows up there.

Modules: `report` (loading), `naming`, `categories`, `overview` (one report),
`compare` (two reports), `cost_model` (predicted vs measured savings), `plots`
(matplotlib figures saved to PLOT_DIR), `execute` (running notebooks headless).
"""

from allocprof.report import Report, load

__all__ = ["Report", "load"]
