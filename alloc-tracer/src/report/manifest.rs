//! The report's manifest, from a snapshot: run metadata, totals and what was dropped
//! (the type and its rules are `alloc_tracer_format::manifest`'s).

use super::snapshot::Snapshot;
use crate::config::Mode;
use crate::hot::control::MAX_PHASES;
use crate::hot::live::LIVE_PUBLISH_BYTES;
use crate::hot::log_linear::{self, SIZE_SUB_BITS};
use crate::registry::Counts;
use alloc_tracer_format::manifest::{
    Dropped, HeapPeak, Manifest, MemoryParts, RequestedPercentiles, TOOL, TableInfo, Totals,
    TracerOwn,
};
use alloc_tracer_format::schema::SCHEMA_VERSION;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// What the columns' weights mean, in the manifest's words.
const WEIGHTS: &str = "alloc_count, realloc_count, bytes_* and temporary_count in sites.parquet, and temporary_count in phases.parquet and these totals, are weighted as recorded: each sampled stack counts for the interval its sample was drawn with (sample_interval, unless the run changed it), but in rows of size_class_bytes >= sample_all_from_bytes (recorded whole: x 1); followed_* counts are raw, live_bytes_estimate weighs each followed block by the blocks it stood for when followed (lifetime_interval, likewise; x 1 in those rows)";

/// Each followed block stands for this many blocks (0: none followed).
pub fn lifetime_weight(mode: Mode, lifetime_interval: u64) -> u64 {
    match mode {
        Mode::Sample(n) => n,
        Mode::Sites => lifetime_interval,
        _ => 0,
    }
}

/// How complete the stacks are: distinct stacks cut at the depth limit, and those
/// that end early below it (with their weighted allocations).
#[derive(Clone, Copy, Debug, Default)]
pub struct StackEnds {
    /// Stacks cut at the depth limit.
    pub at_depth_limit: usize,
    /// Allocations and reallocs at those (weighted as the report's).
    pub at_depth_limit_allocs: u64,
    /// Stacks that end before main or a thread's start.
    pub early: u64,
    /// Allocations and reallocs at those.
    pub early_allocs: u64,
}

/// The manifest of a report of `snap` whose tables are `tables`, its sites' rows
/// holding `site_calls` allocations and reallocs (weighted as recorded).
/// `incomplete`: why the run did not finish, if it did not.
pub fn build(
    snap: &Snapshot,
    tables: Vec<TableInfo>,
    ends: StackEnds,
    site_calls: u64,
    incomplete: Option<&str>,
) -> Manifest {
    let c = &snap.counts;
    // The figures' weights are those of the latest stacks, whatever the mode now.
    let calls = crate::weights::calls();
    let stacks_mode = crate::weights::stack_mode(snap.settings.mode);
    let weight = stacks_mode.sample_interval();
    let totals = Totals {
        alloc_count: c.total(|p| p.allocs),
        free_count: c.total(|p| p.frees),
        realloc_count: c.total(|p| p.reallocs),
        bytes_requested: c.total(|p| p.bytes_requested),
        bytes_allocated: c.total(|p| p.bytes_allocated),
        bytes_freed: c.total(|p| p.bytes_freed),
        // Weighted as counted (`hot::free::count_temporary`).
        temporary_count: c.total(|p| p.temporaries),
        sampled_count: c.total(|p| p.sampled),
        live_bytes_end: c.total(|p| p.bytes_allocated) as i64 - c.total(|p| p.bytes_freed) as i64,
        peak_live_bytes: snap.phase_peaks.iter().copied().max().unwrap_or(0),
        // Threads that exited had published everything: only those recording at
        // once can each hold back up to the publishing step.
        peak_live_bytes_error_bytes: snap.most_threads * LIVE_PUBLISH_BYTES as u64,
        max_rss_bytes: snap.max_rss_bytes,
        rss_bytes_end: snap.rss_bytes,
    };
    let counted = totals.alloc_count.saturating_add(totals.realloc_count);
    let memory = MemoryParts {
        lifetimes: crate::lifetimes::memory_bytes(),
        heap: crate::heap::memory_bytes(),
        timeline: crate::timeline::memory_bytes(),
        ..crate::registry::memory_parts()
    };
    // The run ends where the snapshot read it, before symbolizing and writing.
    let end_unix = snap.taken_unix_s;
    let start_ns = crate::hot::clock::start_ns();
    let duration_s = snap.taken_ns.saturating_sub(start_ns) as f64 / 1e9;
    Manifest {
        schema_version: SCHEMA_VERSION,
        tool: TOOL.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command_line: command_line(std::env::args_os()),
        host: alloc_tracer_format::host::name().unwrap_or_default(),
        cpu: alloc_tracer_format::host::cpu_model().unwrap_or_default(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        pid: std::process::id(),
        start_unix_s: end_unix - duration_s,
        end_unix_s: end_unix,
        duration_s,
        mode: snap.settings.mode.name(),
        stack_depth: snap.settings.depth,
        stack_depths: stack_depths(snap),
        sample_interval: weight,
        sample_all_from_bytes: matches!(stacks_mode, crate::Mode::Sample(_))
            .then_some(alloc_tracer_format::size_class::SAMPLE_ALL_FROM_BYTES as u64),
        lifetime_interval: lifetime_weight(stacks_mode, snap.settings.lifetime_interval),
        weights: WEIGHTS.into(),
        totals,
        requested_bytes_percentiles: requested_percentiles(c),
        tracer: TracerOwn {
            alloc_count: c.own_allocs,
            bytes_requested: c.own_bytes,
            memory_bytes: memory.total(),
            memory_parts: Some(memory),
        },
        dropped: Dropped {
            late_alloc_count: c.late_allocs,
            late_free_count: c.late_frees,
            stacks_at_depth_limit: ends.at_depth_limit,
            stacks_at_depth_limit_alloc_count: ends.at_depth_limit_allocs,
            phases_merged: snap.phases.len() >= MAX_PHASES,
            foreign_stack_walks: c.foreign_walks,
            folded_sites: crate::registry::folded_sites(),
            followed_skipped: crate::lifetimes::skipped(),
            followed_dropped: crate::lifetimes::dropped(),
            stacks_ending_early: ends.early,
            stacks_ending_early_alloc_count: ends.early_allocs,
            return_addresses: snap.symbols.len() as u64,
            unnamed_addresses: snap
                .symbols
                .iter()
                .filter(|(a, f)| crate::symbolize::unnamed(**a, f))
                .count() as u64,
            binary_replaced: crate::symbolize::binary_replaced(),
        },
        threads: c.threads,
        tables,
        incomplete: incomplete.map(str::to_owned),
        heap_interval: snap.settings.heap_bytes(),
        heap_peak: (snap.peak.live_bytes > 0).then(|| HeapPeak {
            live_bytes: snap.peak.live_bytes,
            time_ns: snap.peak.time_ns.saturating_sub(start_ns),
            phase: snap
                .phases
                .get(snap.peak.phase)
                .map_or_else(|| format!("phase {}", snap.peak.phase), |p| p.name.clone()),
        }),
        timeline_interval_ms: snap.settings.timeline_ms,
        labels: snap.labels.clone(),
        allocator: allocator_name().map(str::to_owned),
        forked_from_pid: crate::lineage::forked_from(),
        run_id: Some(format!("{:016x}", crate::lineage::run_id())),
        stack_weights_changed: crate::weights::stacks_changed(calls),
        heap_intervals_changed: crate::weights::heap_changed(calls),
        weighted_as_recorded: true,
        heap_sampling_started_late: crate::weights::heap_started_late(),
        stacks_mode: crate::weights::stacks_recorded_in(snap.settings.mode).map(|m| m.name()),
        allocs_without_stacks: Some(without_stacks(snap, calls, counted, site_calls)),
    }
}

/// The depths `snap`'s stacks were walked at, ascending (one, unless the run
/// changed it).
pub fn stack_depths(snap: &Snapshot) -> Vec<usize> {
    let s = &snap.settings;
    let heap = if s.heap_on() { s.heap_bytes() } else { 0 };
    crate::weights::stack_depths(s.mode, heap, s.depth, crate::weights::calls())
}

/// Allocations and reallocs counted with no stack, of the `counted` the snapshot
/// holds: all of them where no stack was recorded, none where no part of the run
/// was in `count` mode. Where every stack was recorded in `sites` mode, exactly those
/// that no site holds (its rows hold `site_calls`): an allocation another thread
/// made as the mode switched is in a site or not, whichever mode it saw (in a report
/// written while no other thread allocates: the snapshot reads the sites a moment
/// before the totals). Otherwise (sampled stacks are estimates) the tally of
/// `count` mode's stretches, whose ends are the running totals as settings were
/// applied and `calls`, read after the snapshot.
fn without_stacks(snap: &Snapshot, calls: u64, counted: u64, site_calls: u64) -> u64 {
    let mode = snap.settings.mode;
    match crate::weights::stacks_recorded_in(mode) {
        None => counted,
        Some(_) if !crate::weights::counted_without_stacks(mode) => 0,
        Some(crate::Mode::Sites) if !crate::weights::stacks_changed(calls) => {
            counted.saturating_sub(site_calls)
        }
        Some(_) => crate::weights::allocs_without_stacks(mode, calls).min(counted),
    }
}

/// The inner allocator's name, as the program gave it.
static ALLOCATOR_NAME: Mutex<Option<&'static str>> = Mutex::new(None);

/// Names the inner allocator (`"jemalloc"`, `"system"`, `"mimalloc"`, ...) in the
/// manifest and summary of the reports written from now on. The tracer cannot tell
/// one `GlobalAlloc` from another by itself; without this, reports say `null`.
pub fn set_allocator_name(name: &'static str) {
    *ALLOCATOR_NAME
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(name);
}

/// The inner allocator's name, if the program gave one.
pub fn allocator_name() -> Option<&'static str> {
    *ALLOCATOR_NAME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The name's lock, for `fork`'s handlers: a child must not inherit it held by a
/// thread that is not there, or its reports would wait for it forever.
pub(crate) fn hold_for_fork() -> MutexGuard<'static, Option<&'static str>> {
    ALLOCATOR_NAME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Percentiles of requested sizes, each the floor of the requested-size bucket it
/// falls in (log-linear buckets, a few per cent wide), and the floor of the highest
/// bucket used.
fn requested_percentiles(c: &Counts) -> RequestedPercentiles {
    let total: u64 = c.requested.iter().sum();
    let Some(last) = c.requested.iter().rposition(|&n| n > 0) else {
        return RequestedPercentiles::default();
    };
    let floor = |b: usize| log_linear::bucket_low(b, SIZE_SUB_BITS);
    let at = |q: f64| {
        let want = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        let b = c
            .requested
            .iter()
            .position(|&n| {
                seen += n;
                seen >= want
            })
            .unwrap_or(last);
        floor(b)
    };
    RequestedPercentiles {
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        max: floor(last),
    }
}

/// The process's arguments as text: one that is not UTF-8 (a file name, say) is
/// written with U+FFFD for its bad bytes (`std::env::args` would panic on it, and the
/// report would be lost).
fn command_line(args: impl Iterator<Item = std::ffi::OsString>) -> Vec<String> {
    args.map(|a| a.to_string_lossy().into_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_that_are_not_utf8_are_written_lossily() {
        use std::os::unix::ffi::OsStringExt;
        let args = [
            std::ffi::OsString::from("prover"),
            std::ffi::OsString::from_vec(b"sector-\xff.dat".to_vec()),
        ];
        assert_eq!(
            command_line(args.into_iter()),
            ["prover", "sector-\u{fffd}.dat"]
        );
    }

    #[test]
    fn requested_percentiles_are_bucket_floors_and_max_the_largest_request() {
        let mut c = Counts::default();
        c.requested[log_linear::size_bucket(64)] += 98;
        c.requested[log_linear::size_bucket(1000)] += 1;
        c.requested[log_linear::size_bucket(2 << 20)] += 1;
        let p = requested_percentiles(&c);
        let floor = |size| log_linear::bucket_low(log_linear::size_bucket(size), SIZE_SUB_BITS);
        assert_eq!(
            (p.p50, p.p90, p.p99, p.max),
            (64, 64, floor(1000), 2 << 20),
            "{p:?}"
        );
        assert!(floor(1000) <= 1000 && floor(1000) > 960);
        assert_eq!(
            requested_percentiles(&Counts::default()),
            RequestedPercentiles::default()
        );
    }
}
