//! `manifest.json`: what a report says about its run, typed. The tracer writes it,
//! readers parse it with [`Manifest::from_json`], which checks the schema version
//! first, in one place.

use crate::schema::SCHEMA_VERSION;
use serde::{Deserialize, Serialize};

/// Most blocks followed to their free for lifetimes at once (heap sampling's blocks,
/// one per interval of live bytes, are not capped).
pub const MAX_FOLLOWED: u64 = 1 << 16;

/// The value of [`Manifest::tool`] in reports written by alloc-tracer: a report
/// writer replaces only folders whose manifest says so.
pub const TOOL: &str = "alloc-tracer";

/// The manifest of a report (documented field by field in `docs/report-schema.md`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// Version of the report layout ([`SCHEMA_VERSION`] when written).
    pub schema_version: u32,
    /// The writer: [`TOOL`].
    pub tool: String,
    /// The writer's version.
    pub tool_version: String,
    /// The traced program's command line.
    pub command_line: Vec<String>,
    /// Host name.
    pub host: String,
    /// CPU model.
    pub cpu: String,
    /// Cores available to the process.
    pub cores: usize,
    /// Process id.
    pub pid: u32,
    /// When tracing started (Unix seconds).
    pub start_unix_s: f64,
    /// When the report was written (Unix seconds).
    pub end_unix_s: f64,
    /// Seconds from start to report.
    pub duration_s: f64,
    /// Mode name: `off`, `count`, `sites` or `sample:N`.
    pub mode: String,
    /// Frames kept per stack.
    pub stack_depth: usize,
    /// The depths the report's stacks were walked at, ascending: `stack_depth`
    /// alone, unless the run changed it (`Settings::apply`) while it recorded
    /// stacks; empty where none was walked, and in reports written before it existed.
    #[serde(default)]
    pub stack_depths: Vec<usize>,
    /// Each sampled stack stands for this many allocations (1 in `sites` mode).
    pub sample_interval: u64,
    /// Each followed block stands for this many blocks (0: none followed).
    pub lifetime_interval: u64,
    /// Which columns are weighted by which interval, in words.
    pub weights: String,
    /// Totals over all phases.
    pub totals: Totals,
    /// Percentiles of requested sizes.
    pub requested_bytes_percentiles: RequestedPercentiles,
    /// The tracer's own allocations (not counted as the program's).
    pub tracer: TracerOwn,
    /// What was not recorded, or recorded coarsely.
    pub dropped: Dropped,
    /// Threads that recorded anything.
    pub threads: u64,
    /// The tables written, with their row counts.
    pub tables: Vec<TableInfo>,
    /// Why the report was written before the run finished (e.g. `SIGINT`), or
    /// `None` for a complete run. (Absent in reports written before it existed.)
    #[serde(default)]
    pub incomplete: Option<String>,
    /// Heap sampling's mean interval in bytes between sampled bytes (0: off; 1:
    /// every block). (Absent in reports written before it existed.)
    #[serde(default)]
    pub heap_interval: u64,
    /// In a `sample:N` report, the smallest size class recorded whole: rows of
    /// this class and larger count each allocation once, not N times, and sampling
    /// leaves them no spread (`size_class::SAMPLE_ALL_FROM_BYTES`). `None` in other
    /// modes, and in reports written before it existed, which sampled every class
    /// one in N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_all_from_bytes: Option<u64>,
    /// The latest peak of live bytes kept (`heap_peak.parquet` is what heap
    /// sampling said was live then), if live bytes ever reached one.
    #[serde(default)]
    pub heap_peak: Option<HeapPeak>,
    /// The timeline's interval in milliseconds (0: none).
    #[serde(default)]
    pub timeline_interval_ms: u64,
    /// Facts the program stated about its run (`alloc_tracer::label`), e.g.
    /// synth-driver's `circuit`, `rows` and `iterations`.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The inner allocator, as the program named it
    /// (`alloc_tracer::set_allocator_name`), or `None` when it did not. (Absent in
    /// reports written before it existed.)
    #[serde(default)]
    pub allocator: Option<String>,
    /// For a report written by a forked child, the process it was forked from (the
    /// latest fork's parent): its counts include what that process recorded before
    /// the fork. `None` otherwise, and in reports written before it existed.
    #[serde(default)]
    pub forked_from_pid: Option<u32>,
    /// The traced run, 16 hex digits drawn at random once per process (at its first
    /// fork or report) and kept by the children forked from it after that: reports
    /// that share it were written by one process or by processes forked from it.
    /// `None` in reports written before it existed.
    #[serde(default)]
    pub run_id: Option<String>,
    /// True when stacks were recorded under more than one weight: the mode switched
    /// at run time between `sites` (each counts 1) and `sample:N`, or between two
    /// intervals N. Where `weighted_as_recorded`, each count kept its own weight,
    /// but sampling's spread taken from `sample_interval` assumes one; before, the
    /// sites' counts were weighted by the mode in force when the report was written,
    /// so those recorded under another were off by the ratio. Phase totals are
    /// exact either way. (Absent, false, in reports written before it existed.)
    #[serde(default)]
    pub stack_weights_changed: bool,
    /// True when heap sampling ran at more than one interval (`Settings::apply` with
    /// another `heap_interval`): each sampled block's estimate is weighted by its own
    /// interval, but `heap_interval` is the last one only, so readers take each
    /// row's sampling share from its `sampled_count` over its `live_blocks_estimate`.
    /// (Absent, false, in reports written before it existed.)
    #[serde(default)]
    pub heap_intervals_changed: bool,
    /// True when sites' counts and followed blocks' live bytes were weighted as they
    /// were recorded (each sampled stack by the interval it was drawn with), so that
    /// a run whose weights changed (`stack_weights_changed`) still has the right
    /// estimates. Absent (false) in reports written before: those weighted every
    /// site by the mode in force at the report.
    #[serde(default)]
    pub weighted_as_recorded: bool,
    /// True when heap sampling was turned on (`Settings::apply`) while the program
    /// held 1 MiB or more allocated with it off: those blocks were never sampled,
    /// so the heap tables leave out those still live. (Absent, false, in reports written
    /// before it existed.)
    #[serde(default)]
    pub heap_sampling_started_late: bool,
    /// The mode the sites' figures were recorded in: `mode` where it records stacks
    /// (`sites`, `sample:N`); in a run switched to `count` or `off` before its report,
    /// the latest mode that recorded them. `None` where no stack was recorded (a
    /// `count` run), and in reports written before it existed (read `mode` there).
    #[serde(default)]
    pub stacks_mode: Option<String>,
    /// Allocations and reallocs counted in `count` mode, with no stack (exact totals,
    /// in no site row): every one in a `count` run; in a run that recorded stacks for
    /// one part and only counted another, what the sites leave out: exact where every
    /// stack was recorded in `sites` mode (the totals less the sites' calls), else a
    /// tally of the stretches in `count` mode between the running totals read as
    /// `Settings::apply` switched modes, which other threads' allocations made during
    /// a switch may be counted in twice or not at all. `None` in reports written
    /// before it existed.
    #[serde(default)]
    pub allocs_without_stacks: Option<u64>,
}

/// The latest kept peak of live bytes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct HeapPeak {
    /// Exact live bytes then (within `peak_live_bytes_error_bytes`).
    pub live_bytes: i64,
    /// When, in nanoseconds after tracing started.
    pub time_ns: u64,
    /// The phase in force then.
    pub phase: String,
}

/// Totals over all phases, as in the manifest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// `alloc`/`alloc_zeroed` calls.
    pub alloc_count: u64,
    /// `dealloc` calls.
    pub free_count: u64,
    /// `realloc` calls.
    pub realloc_count: u64,
    /// Requested bytes of allocations and reallocs.
    pub bytes_requested: u64,
    /// Size-class bytes of allocations and reallocs.
    pub bytes_allocated: u64,
    /// Size-class bytes freed.
    pub bytes_freed: u64,
    /// Blocks freed before their thread's next allocation.
    pub temporary_count: u64,
    /// Stacks captured in `sample` mode.
    pub sampled_count: u64,
    /// Global live bytes at the end (allocated minus freed, size classes).
    pub live_bytes_end: i64,
    /// Highest global live bytes seen, exact to within `peak_live_bytes_error_bytes`.
    pub peak_live_bytes: i64,
    /// Bound on the error of `peak_live_bytes` (threads x publish threshold).
    pub peak_live_bytes_error_bytes: u64,
    /// The process's highest resident set size so far, as the kernel counts it
    /// (`VmHWM`; without `/proc`, `getrusage`'s `ru_maxrss`, which can hold the
    /// high-water mark of the process that started this one): what the machine had
    /// to hold, the tracer's own memory in, untouched capacity out. 0 where unknown,
    /// and in reports written before it existed.
    #[serde(default)]
    pub max_rss_bytes: u64,
    /// The process's resident set size when the report was taken, before its own
    /// work: what `heap_end.parquet`'s moment held. 0 where unknown, and in reports
    /// written before it existed.
    #[serde(default)]
    pub rss_bytes_end: u64,
}

/// Percentiles of requested sizes, from the requested-size histogram.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestedPercentiles {
    /// Median request, bytes (the floor of its requested-size bucket, as below).
    pub p50: u64,
    /// 90th percentile, bytes.
    pub p90: u64,
    /// 99th percentile, bytes.
    pub p99: u64,
    /// Largest request, bytes, down to the floor of its bucket (buckets are under
    /// 3.2 % wide; exact up to 64 bytes and at powers of two).
    pub max: u64,
}

/// The tracer's own allocations.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct TracerOwn {
    /// Allocations (and moving reallocs) by the tracer, and by the program inside
    /// `alloc_tracer::untraced`.
    pub alloc_count: u64,
    /// Their requested bytes.
    pub bytes_requested: u64,
    /// About how many bytes the tracer held when the report was taken: thread
    /// states, site tables, merged sites, followed blocks. (Absent in reports written
    /// before it existed.)
    #[serde(default)]
    pub memory_bytes: u64,
    /// `memory_bytes` by part. (`None` in reports written before it existed.)
    #[serde(default)]
    pub memory_parts: Option<MemoryParts>,
}

/// What the tracer's own memory holds, in bytes; the parts sum to `memory_bytes`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryParts {
    /// Each recording thread's state (its counters).
    pub thread_states: u64,
    /// The threads' site tables, current and replaced ones not freed yet.
    pub site_tables: u64,
    /// The threads' kept walks for the guess (`sites` mode).
    pub kept_walks: u64,
    /// Each distinct stack's frames, kept once for every thread.
    pub stacks: u64,
    /// The sites of threads that exited.
    pub merged_sites: u64,
    /// Blocks followed for lifetimes, their sites' numbers and ended lifetimes.
    pub lifetimes: u64,
    /// Heap sampling's blocks and per-site sums.
    pub heap: u64,
    /// The live-bytes timeline.
    pub timeline: u64,
}

impl MemoryParts {
    /// The parts' sum.
    pub fn total(&self) -> u64 {
        self.thread_states
            + self.site_tables
            + self.kept_walks
            + self.stacks
            + self.merged_sites
            + self.lifetimes
            + self.heap
            + self.timeline
    }
}

/// What was not recorded, or recorded coarsely.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Allocations after a thread's state was merged at exit (counted only here).
    pub late_alloc_count: u64,
    /// Frees after a thread's state was merged at exit (counted only here).
    pub late_free_count: u64,
    /// Distinct stacks cut at `stack_depth` frames (or at another of
    /// `stack_depths`, in a run that changed the depth).
    pub stacks_at_depth_limit: usize,
    /// Allocations and reallocs at those stacks (weighted like the sites table).
    /// (Absent, 0, in reports written before it existed.)
    #[serde(default)]
    pub stacks_at_depth_limit_alloc_count: u64,
    /// Phase names beyond the first 15, counted together.
    pub phases_merged: bool,
    /// Allocations whose stack walk found the stack pointer off the thread's known
    /// stack (a signal handler on its own stack, a coroutine, a `stacker` segment):
    /// counted, with no frames. (Absent in reports written before it existed.)
    #[serde(default)]
    pub foreign_stack_walks: u64,
    /// Sites (stack, phase, size class) past the tracer's cap on its merged tables,
    /// counted under one folded site per phase and class; a site counts once per
    /// thread table merged into its folded site (a thread's flush or exit), so one
    /// recorded by several threads counts several times. (Absent in reports written
    /// before it existed.)
    #[serde(default)]
    pub folded_sites: u64,
    /// Blocks due to be followed to their free for lifetimes but not, because the
    /// shard of the tracer's map their address falls in held its share of
    /// [`MAX_FOLLOWED`] at once: lifetimes and live-bytes estimates
    /// undercount by that much. (Absent in reports written before it existed.)
    #[serde(default)]
    pub followed_skipped: u64,
    /// Blocks followed for lifetimes when recording of frees stopped (a pause, or a
    /// switch to `off` or to `count` without heap sampling): dropped, since their
    /// frees would go unseen; they are neither freed nor live in the tables. (Absent
    /// in reports written before it existed.)
    #[serde(default)]
    pub followed_dropped: u64,
    /// Distinct stacks, below the depth limit, that end before main or a thread's
    /// start (`site::is_stack_root`), or have no frames although the walk ran on the
    /// thread's stack: frames lost, usually to code built without frame pointers.
    /// (Absent in reports written before it existed.)
    #[serde(default)]
    pub stacks_ending_early: u64,
    /// Allocations and reallocs at those stacks (weighted like the sites table).
    #[serde(default)]
    pub stacks_ending_early_alloc_count: u64,
    /// Distinct return addresses in the report's stacks. (Absent, 0, in reports
    /// written before it existed.)
    #[serde(default)]
    pub return_addresses: u64,
    /// Those of them the symbolizer found no name for: their frames are named by
    /// the address in hex. (Absent in reports written before it existed.)
    #[serde(default)]
    pub unnamed_addresses: u64,
    /// True when the program's own binary was deleted or replaced (a rebuild) by the
    /// time the report was written: the symbolizer reads it by its path, so its
    /// frames then go unnamed. (Absent in reports written before it existed.)
    #[serde(default)]
    pub binary_replaced: bool,
}

/// One table of the report.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct TableInfo {
    /// File name in the report folder.
    pub file: String,
    /// Rows written.
    pub rows: usize,
}

/// Why a manifest cannot be read.
#[derive(Debug)]
pub enum ManifestError {
    /// Not JSON, or not shaped like a manifest.
    Json(serde_json::Error),
    /// No `schema_version` number.
    NoVersion,
    /// A schema version this build does not read.
    Version {
        /// The version found.
        found: u64,
    },
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestError::Json(e) => write!(f, "not a report manifest: {e}"),
            ManifestError::NoVersion => write!(f, "no schema_version: not a report manifest"),
            ManifestError::Version { found } => write!(
                f,
                "schema version {found}, this build reads version {SCHEMA_VERSION}"
            ),
        }
    }
}

impl std::error::Error for ManifestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ManifestError::Json(e) => Some(e),
            _ => None,
        }
    }
}

/// Checks a schema version found in a report against the one this build reads.
pub fn check_version(found: u64) -> Result<(), ManifestError> {
    if found == SCHEMA_VERSION as u64 {
        Ok(())
    } else {
        Err(ManifestError::Version { found })
    }
}

impl Manifest {
    /// Parses a manifest, checking its schema version before its shape, so that a
    /// report of another version says so rather than failing on a field.
    pub fn from_json(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let v: serde_json::Value = serde_json::from_slice(bytes).map_err(ManifestError::Json)?;
        // An array would otherwise be read as the struct's fields in order.
        let Some(object) = v.as_object() else {
            return Err(ManifestError::Json(serde::de::Error::custom(
                "not a JSON object",
            )));
        };
        let version = match object.get("schema_version") {
            None | Some(serde_json::Value::Null) => return Err(ManifestError::NoVersion),
            Some(found) => u64::deserialize(found).map_err(ManifestError::Json)?,
        };
        check_version(version)?;
        // From the bytes, not the value: errors keep their line and column, and a
        // key given twice is refused.
        serde_json::from_slice(bytes).map_err(ManifestError::Json)
    }

    /// The manifest as written to `manifest.json`.
    pub fn to_json(&self) -> Vec<u8> {
        // Plain data with string keys: serializing cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// The share of allocations and reallocs whose stacks end early (see
    /// [`Dropped::stacks_ending_early`]).
    pub fn stacks_ending_early_share(&self) -> f64 {
        let all = self.totals.alloc_count + self.totals.realloc_count;
        if all == 0 {
            0.0
        } else {
            self.dropped.stacks_ending_early_alloc_count as f64 / all as f64
        }
    }

    /// The depths the stacks were walked at, ascending: `stack_depths`, or
    /// `stack_depth` alone where the report does not list them (never empty).
    pub fn depths_walked(&self) -> Vec<usize> {
        match self.stack_depths.as_slice() {
            [] => vec![self.stack_depth],
            d => d.to_vec(),
        }
    }

    /// The share of allocations (and reallocs) whose stacks were cut at the depth
    /// limit ([`Dropped::stacks_at_depth_limit`]).
    pub fn stacks_cut_share(&self) -> f64 {
        let all = self.totals.alloc_count + self.totals.realloc_count;
        if all == 0 {
            0.0
        } else {
            self.dropped.stacks_at_depth_limit_alloc_count as f64 / all as f64
        }
    }

    /// The warning line, with its fix, when too many stacks end early, or are cut
    /// at the depth limit, or too many of their frames have no name (both when the
    /// binary was replaced; stacks that end early name stray words of the stack,
    /// which have no name, by themselves).
    pub fn setup_warning(&self) -> Option<String> {
        let cut_share = self.stacks_cut_share();
        let cut = (cut_share > crate::site::EARLY_STACKS_WARN_SHARE).then(|| {
            // The shallowest depth walked is where most were cut.
            crate::site::cut_stacks_warning(cut_share, self.depths_walked()[0])
        });
        match (self.frames_warning(), cut) {
            (Some(f), Some(c)) => Some(format!(
                "{f}; and {}",
                c.strip_prefix("warning: ").unwrap_or(&c)
            )),
            (f, c) => f.or(c),
        }
    }

    /// [`Manifest::setup_warning`]'s part on stacks that end early and frames with
    /// no name.
    fn frames_warning(&self) -> Option<String> {
        let share = self.stacks_ending_early_share();
        let early = (share > crate::site::EARLY_STACKS_WARN_SHARE)
            .then(|| crate::site::early_stacks_warning(share));
        let d = &self.dropped;
        let names = crate::site::unnamed_frames_warning(
            d.unnamed_addresses,
            d.return_addresses,
            d.binary_replaced,
        );
        match (early, names) {
            // Stacks cut short hold stray words of the stack as frames, which have no
            // name: the early stacks are the cause, unless the binary went too.
            (Some(e), Some(n)) if d.binary_replaced => Some(format!(
                "{e}; and {}",
                n.strip_prefix("warning: ").unwrap_or(&n)
            )),
            (e, n) => e.or(n),
        }
    }

    /// True when the manifest was written by alloc-tracer.
    pub fn is_alloc_tracer(&self) -> bool {
        self.tool == TOOL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_warning_names_the_cause_of_unnamed_frames() {
        let mut m = Manifest::default();
        m.totals.alloc_count = 100;
        m.dropped.return_addresses = 10;
        m.dropped.unnamed_addresses = 5;
        let w = m.setup_warning().unwrap();
        assert!(w.starts_with("warning: 5 of 10 return addresses"), "{w}");
        // Stacks that end early: their stray words are the unnamed frames.
        m.dropped.stacks_ending_early_alloc_count = 90;
        let w = m.setup_warning().unwrap();
        assert!(
            w.contains("force-frame-pointers") && !w.contains("no name"),
            "{w}"
        );
        // Unless the binary went too: both, each with its fix.
        m.dropped.binary_replaced = true;
        let w = m.setup_warning().unwrap();
        assert!(
            w.contains("force-frame-pointers") && w.contains("deleted or replaced"),
            "{w}"
        );
        m.dropped.unnamed_addresses = 0;
        m.dropped.stacks_ending_early_alloc_count = 0;
        assert_eq!(m.setup_warning(), None);
    }

    #[test]
    fn the_setup_warning_names_stacks_cut_at_the_depth_limit() {
        let mut m = Manifest {
            stack_depth: 48,
            ..Default::default()
        };
        m.totals.alloc_count = 100;
        m.dropped.stacks_at_depth_limit_alloc_count = 20;
        assert_eq!(m.setup_warning(), None, "a fifth: below the warning");
        m.dropped.stacks_at_depth_limit_alloc_count = 60;
        let w = m.setup_warning().unwrap();
        assert!(
            w.starts_with(
                "warning: 60 % of allocations have call stacks cut at the depth limit (48 frames)"
            ),
            "{w}"
        );
        // A run that walked at 2 frames, then at 48: cut at 2.
        m.stack_depths = vec![2, 48];
        assert!(m.setup_warning().unwrap().contains("(2 frames)"));
        // With stacks that end early too: both.
        m.dropped.stacks_ending_early_alloc_count = 30;
        let w = m.setup_warning().unwrap();
        assert!(
            w.contains("force-frame-pointers")
                && w.contains("; and 60 % of allocations have call stacks cut"),
            "{w}"
        );
    }

    #[test]
    fn round_trips_and_checks_the_version() {
        let m = Manifest {
            schema_version: SCHEMA_VERSION,
            tool: TOOL.into(),
            mode: "sites".into(),
            ..Default::default()
        };
        let back = Manifest::from_json(&m.to_json()).unwrap();
        assert_eq!(back, m);
        let other = Manifest {
            schema_version: SCHEMA_VERSION + 1,
            ..m.clone()
        };
        let err = Manifest::from_json(&other.to_json()).unwrap_err();
        assert!(
            matches!(err, ManifestError::Version { found } if found == SCHEMA_VERSION as u64 + 1)
        );
        assert!(matches!(
            Manifest::from_json(b"{\"name\": \"x\"}"),
            Err(ManifestError::NoVersion)
        ));
        assert!(matches!(
            Manifest::from_json(b"{\"schema_version\": 1, \"tool\": 3}"),
            Err(ManifestError::Json(_))
        ));
        // The struct's fields in order, as an array: not a manifest.
        let fields = serde_json::to_value(&m).unwrap();
        let array: Vec<_> = fields.as_object().unwrap().values().cloned().collect();
        let err = Manifest::from_json(&serde_json::to_vec(&array).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "not a report manifest: not a JSON object");
    }
}
