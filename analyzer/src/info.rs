//! What a report is, at a glance: how it was taken (mode, intervals, command line,
//! host), its phases with their wall times and counts, its threads, peak live bytes
//! and peak RSS, what the tracer dropped and its tables. `analyzer info` prints it; the first command to run
//! on a report someone hands you.

use crate::report::Report;
use alloc_tracer_format::manifest::{Dropped, TableInfo};

/// One phase of the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PhaseInfo {
    /// Phase name.
    pub phase: String,
    /// Wall time in seconds; for `main`, the run's time outside the named phases;
    /// 0 for a phase never timed.
    pub wall_s: f64,
    /// Whether the tracer timed the phase (false for one entered only by quick
    /// guards, as the mirror prover's `enforce`, whose 0 is no measure).
    pub timed: bool,
    /// Allocations, from `phases.parquet` (exact in every mode; in `count` mode the
    /// sites table, which `--phase` selects from, is empty). Named as the report's
    /// totals name them: reallocs apart.
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Temporaries; `None` in `count` mode, which counts none (a 0 would read as
    /// none found).
    pub temporary_count: Option<u64>,
    /// Distinct call stacks that allocated in the phase; `None` in `count` mode,
    /// which records none.
    pub sites: Option<usize>,
    /// The highest live bytes while the phase was the innermost in force (`None` in reports
    /// written before the tracer recorded it).
    pub peak_live_bytes: Option<i64>,
}

/// A report's description.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Info {
    /// Report directory.
    pub report: String,
    /// Mode when the report was written: `off`, `count`, `sites` or `sample:N`.
    pub mode: String,
    /// The mode the stacks were recorded in (`Report::stacks_mode`): `mode`, or the
    /// latest that recorded stacks in a run switched to `count` or `off`.
    pub stacks_mode: String,
    /// Allocations and reallocs counted in `count` mode, with no stack, in a run
    /// that recorded stacks for the rest (`Report::allocs_without_stacks`).
    pub allocs_without_stacks: u64,
    /// Stacks were recorded under more than one weight (the manifest's
    /// `stack_weights_changed`).
    pub stack_weights_changed: bool,
    /// Allocations each recorded stack stands for.
    pub sample_interval: u64,
    /// Blocks each followed block stands for (0: none followed).
    pub lifetime_interval: u64,
    /// In a `sample:N` report, the smallest size class recorded whole (every block
    /// of it and larger, counted once); `None` otherwise.
    pub sample_all_from_bytes: Option<u64>,
    /// Return addresses kept per stack.
    pub stack_depth: usize,
    /// The depths the stacks were walked at, where the run changed it (the
    /// manifest's `stack_depths`; one, or none in older reports, otherwise).
    pub stack_depths: Vec<usize>,
    /// The traced program's command line.
    pub command_line: Vec<String>,
    /// Host name.
    pub host: String,
    /// CPU model.
    pub cpu: String,
    /// Cores available to the process.
    pub cores: usize,
    /// Seconds from the start of tracing to the report.
    pub duration_s: f64,
    /// Why the report was written before the run finished, if it was.
    pub incomplete: Option<String>,
    /// Threads that recorded anything.
    pub threads: u64,
    /// Allocations over all phases, reallocs not counted (`realloc_count`), as in
    /// each phase's `alloc_count`.
    pub alloc_count: u64,
    /// Reallocs over all phases.
    pub realloc_count: u64,
    /// Requested bytes over all phases.
    pub bytes_requested: u64,
    /// Temporaries over all phases; `None` in `count` mode, which counts none.
    pub temporary_count: Option<u64>,
    /// Highest live bytes seen.
    pub peak_live_bytes: i64,
    /// Bound on the error of `peak_live_bytes`.
    pub peak_live_bytes_error_bytes: u64,
    /// The process's highest resident set size when the report was written (0:
    /// unknown, as in reports written before it was recorded).
    pub max_rss_bytes: u64,
    /// The process's resident set size when the report was taken (0: unknown).
    pub rss_bytes_end: u64,
    /// The phases, in the report's order.
    pub phases: Vec<PhaseInfo>,
    /// What the tables do not hold (the manifest's `dropped`).
    pub dropped: Dropped,
    /// The tables with their rows.
    pub tables: Vec<TableInfo>,
    /// Heap sampling's mean interval in bytes (0: off).
    pub heap_interval: u64,
    /// Heap sampling ran at more than one interval (the manifest's
    /// `heap_intervals_changed`).
    pub heap_intervals_changed: bool,
    /// Heap sampling came on part-way through the run (the manifest's
    /// `heap_sampling_started_late`).
    pub heap_sampling_started_late: bool,
    /// The kept peak of live bytes, if any.
    pub heap_peak: Option<alloc_tracer_format::manifest::HeapPeak>,
    /// The timeline's interval in milliseconds (0: no timeline).
    pub timeline_interval_ms: u64,
    /// What the program said about its run (`alloc_tracer::label`).
    pub labels: std::collections::BTreeMap<String, String>,
    /// The inner allocator as the program named it (`alloc_tracer::set_allocator_name`).
    pub allocator: Option<String>,
    /// For a forked child's report, the process it was forked from: its counts
    /// include what that process recorded before the fork.
    pub forked_from_pid: Option<u32>,
    /// The traced run: reports that share it were written by one process or by
    /// processes forked from it.
    pub run_id: Option<String>,
}

/// Describes `report`.
pub fn info(report: &Report) -> Info {
    let m = &report.manifest;
    let phases = report
        .phase_names()
        .into_iter()
        .map(|p| {
            // Counts from `phases.parquet`: exact in every mode (the sites table is
            // empty in `count` mode and weighted in `sample:N`).
            let sites: std::collections::HashSet<u64> =
                report.rows(Some(p)).map(|r| r.site_id).collect();
            let (mut allocs, mut reallocs, mut bytes, mut temps) = (0u64, 0u64, 0u64, 0u64);
            let mut peak: Option<i64> = None;
            for r in report.phases.iter().filter(|r| r.phase == p) {
                peak = peak.max(r.peak_live_bytes);
                allocs = allocs.saturating_add(r.alloc_count);
                reallocs = reallocs.saturating_add(r.realloc_count);
                bytes = bytes.saturating_add(r.bytes_requested);
                temps = temps.saturating_add(r.temporary_count);
            }
            PhaseInfo {
                phase: p.to_owned(),
                wall_s: report.wall_s(Some(p)).unwrap_or(0.0),
                timed: report.wall_s(Some(p)).is_some(),
                alloc_count: allocs,
                realloc_count: reallocs,
                bytes_requested: bytes,
                temporary_count: (!report.count_only()).then_some(temps),
                sites: (!report.count_only()).then_some(sites.len()),
                peak_live_bytes: peak,
            }
        })
        .collect();
    Info {
        report: report.dir.display().to_string(),
        mode: m.mode.clone(),
        stacks_mode: report.stacks_mode().to_owned(),
        allocs_without_stacks: report.allocs_without_stacks(),
        stack_weights_changed: m.stack_weights_changed,
        sample_interval: m.sample_interval,
        lifetime_interval: m.lifetime_interval,
        sample_all_from_bytes: m.sample_all_from_bytes,
        stack_depth: m.stack_depth,
        stack_depths: m.stack_depths.clone(),
        command_line: m.command_line.clone(),
        host: m.host.clone(),
        cpu: m.cpu.clone(),
        cores: m.cores,
        duration_s: m.duration_s,
        incomplete: m.incomplete.clone(),
        threads: m.threads,
        alloc_count: m.totals.alloc_count,
        realloc_count: m.totals.realloc_count,
        bytes_requested: m.totals.bytes_requested,
        temporary_count: (!report.count_only()).then_some(m.totals.temporary_count),
        peak_live_bytes: m.totals.peak_live_bytes,
        peak_live_bytes_error_bytes: m.totals.peak_live_bytes_error_bytes,
        max_rss_bytes: m.totals.max_rss_bytes,
        rss_bytes_end: m.totals.rss_bytes_end,
        phases,
        dropped: m.dropped.clone(),
        tables: m.tables.clone(),
        heap_interval: m.heap_interval,
        heap_intervals_changed: m.heap_intervals_changed,
        heap_sampling_started_late: m.heap_sampling_started_late,
        heap_peak: m.heap_peak.clone(),
        timeline_interval_ms: m.timeline_interval_ms,
        labels: m.labels.clone(),
        allocator: m.allocator.clone(),
        forked_from_pid: m.forked_from_pid,
        run_id: m.run_id.clone(),
    }
}
