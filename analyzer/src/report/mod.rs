//! Loading a report directory: the manifest, checked, and the tables as plain rows.
//! The module that reads with polars (`export` writes the named-sites table with it);
//! `table` reads one table, checked, into a frame; `rows` decodes frames into rows.

mod rows;
mod table;

pub(crate) use table::{i64s, listed, read, read_with_later, strings, u64s};

use crate::{Error, SUPPORTED_SCHEMA_VERSION};
use alloc_tracer_format::manifest::{Manifest, ManifestError};
use alloc_tracer_format::schema;
use rows::{
    FRAME_COLUMNS, LIFETIME_COLUMNS, PHASE_COLUMNS, SITE_COLUMNS, frame_rows, lifetime_rows,
    phase_rows, site_rows,
};
use std::path::{Path, PathBuf};
use table::{file_kind, one_line, read_manifest};

/// One row of `sites.parquet`.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteRow {
    /// Call stack.
    pub site_id: u64,
    /// Phase at allocation.
    pub phase: String,
    /// jemalloc size class.
    pub size_class_bytes: u64,
    /// Allocations.
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Real block bytes.
    pub bytes_allocated: u64,
    /// Temporaries.
    pub temporary_count: u64,
    /// Median lifetime of followed blocks.
    pub lifetime_ns_median: Option<u64>,
    /// Followed blocks freed.
    pub followed_freed_count: u64,
    /// Blocks followed to their free: freed, still live, or dropped.
    pub followed_count: u64,
}

/// One row of `lifetimes.parquet`: followed blocks of a (site, phase, size class)
/// freed with a lifetime in `[low_ns, high_ns]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifetimeRow {
    /// The site.
    pub site_id: u64,
    /// Phase at allocation.
    pub phase: String,
    /// jemalloc size class.
    pub size_class_bytes: u64,
    /// Shortest lifetime in the bucket.
    pub low_ns: u64,
    /// Longest lifetime in the bucket.
    pub high_ns: u64,
    /// Followed blocks freed with a lifetime in the bucket (raw).
    pub freed_count: u64,
}

/// One row of `frames.parquet`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameRow {
    /// The site.
    pub site_id: u64,
    /// Position, innermost first.
    pub frame_index: u32,
    /// Position of its return address in the captured stack, innermost first.
    pub stack_index: u32,
    /// Return address (shared by the frames inlined at it).
    pub address: u64,
    /// Function name.
    pub function: String,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
}

impl FrameRow {
    /// A frame of site 0 at index 0, for unit tests.
    #[cfg(test)]
    pub(crate) fn test(function: &str, file: &str, line: Option<u32>) -> FrameRow {
        FrameRow {
            site_id: 0,
            frame_index: 0,
            stack_index: 0,
            address: 0,
            function: function.into(),
            file: Some(file.into()),
            line,
        }
    }
}

/// A loaded report (the default: an empty one, for tests and tools that build one).
#[derive(Debug, Default)]
pub struct Report {
    /// The report directory.
    pub dir: PathBuf,
    /// `manifest.json`.
    pub manifest: Manifest,
    /// `sites.parquet`.
    pub sites: Vec<SiteRow>,
    /// `frames.parquet`, ordered by site and frame index.
    pub frames: Vec<FrameRow>,
    /// `phases.parquet`.
    pub phases: Vec<PhaseRow>,
    /// `lifetimes.parquet`.
    pub lifetimes: Vec<LifetimeRow>,
}

/// The phase of allocations made outside any named phase.
pub const MAIN_PHASE: &str = "main";

/// One row of `phases.parquet` (the columns the analyzer uses).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhaseRow {
    /// Phase name.
    pub phase: String,
    /// Time inside the phase, nested phases included.
    pub wall_ns: u64,
    /// Times the phase was entered by a timed guard (0 for one entered only by the
    /// tracer's quick guards, which keep no time).
    pub entry_count: u64,
    /// Allocations (exact in every mode, like the other counts here).
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Requested bytes of allocations and reallocs.
    pub bytes_requested: u64,
    /// Temporaries (0 in `count` mode; an estimate in `sample:N`).
    pub temporary_count: u64,
    /// The highest published live bytes while the phase was the innermost in force (`None` in
    /// reports written before the tracer recorded it).
    pub peak_live_bytes: Option<i64>,
}

impl PhaseRow {
    /// Allocations plus reallocs (saturating).
    pub fn calls(&self) -> u64 {
        self.alloc_count.saturating_add(self.realloc_count)
    }
}

impl SiteRow {
    /// True when the row's size class is below those `sample:N` records whole
    /// (`size_class::SAMPLE_ALL_FROM_BYTES`), whatever the report's mode: the rows
    /// a `sample:N` report samples one in N.
    pub fn below_whole(&self) -> bool {
        self.size_class_bytes < alloc_tracer_format::size_class::SAMPLE_ALL_FROM_BYTES as u64
    }

    /// Allocations plus reallocs, the count the analyzer ranks and prices by
    /// (saturating: a damaged report can hold any counts).
    pub fn calls(&self) -> u64 {
        self.alloc_count.saturating_add(self.realloc_count)
    }
}

impl Report {
    /// The rows of `sites.parquet` allocated in `phase`, or all of them when `None`:
    /// the one place the analyzer's commands apply `--phase`.
    pub fn rows<'a>(&'a self, phase: Option<&'a str>) -> impl Iterator<Item = &'a SiteRow> {
        self.sites
            .iter()
            .filter(move |r| phase.is_none_or(|p| r.phase == p))
    }

    /// The sum of `f` over the rows of `phases.parquet` for `phase`, or the whole
    /// run when `None` (its counts exact in every mode but temporaries; saturating).
    pub fn phase_sum(&self, phase: Option<&str>, f: impl Fn(&PhaseRow) -> u64) -> u64 {
        self.phases
            .iter()
            .filter(|r| phase.is_none_or(|p| r.phase == p))
            .map(f)
            .fold(0, u64::saturating_add)
    }

    /// Allocations plus reallocs of `phase`, or of the whole run when `None`, from
    /// `phases.parquet` (exact in every mode; saturating).
    pub fn calls(&self, phase: Option<&str>) -> u64 {
        self.phase_sum(phase, PhaseRow::calls)
    }

    /// How far sampling alone may put `count`, an estimate from this report's
    /// sampled stacks, from the truth (`sampling_noise::estimate_bound`); `None` in a
    /// report that records every stack.
    pub fn count_noise(&self, count: u64) -> Option<u64> {
        crate::sampling_noise::estimate_bound(count, self.manifest.sample_interval)
    }

    /// True when `row`'s counts are sampled estimates: a `sample:N` report's, but for
    /// the classes it records whole (`sample_all_from_bytes`), whose counts are
    /// exact. Sampling's spread comes from these rows only.
    pub fn row_sampled(&self, row: &SiteRow) -> bool {
        self.manifest.sample_interval > 1 && (!self.records_whole() || row.below_whole())
    }

    /// True when this report recorded the classes from `sample_all_from_bytes` on
    /// whole (a `sample:N` report from a tracer that does).
    pub fn records_whole(&self) -> bool {
        self.manifest.sample_all_from_bytes.is_some()
    }

    /// Of `all` allocations, `small` of them in the classes below those recorded
    /// whole (`SiteRow::below_whole`): the part this report's sampling estimates (0
    /// in an exact report).
    pub fn sampled_part(&self, all: u64, small: u64) -> u64 {
        match (self.manifest.sample_interval > 1, self.records_whole()) {
            (false, _) => 0,
            (true, true) => small,
            (true, false) => all,
        }
    }

    /// In a `sample:N` report, the requested bytes its sites hold (an estimate),
    /// those of its phase totals (counted exactly in every mode), in `phase` or in
    /// all, and how far sampling alone may put the first from the second
    /// (`sampling_noise::bytes_bound` over the sampled rows): further apart when
    /// blocks too rare to be sampled hold many bytes (missed) or one was sampled
    /// (counted `N` times over). `None` in an exact report, and in one that counted
    /// part of its run with no stack (`allocs_without_stacks`), whose totals hold
    /// bytes no site could.
    pub fn sampled_bytes_against_exact(
        &self,
        phase: Option<&str>,
    ) -> Option<(u64, u64, Option<u64>)> {
        if self.manifest.sample_interval <= 1 || self.allocs_without_stacks() > 0 {
            return None;
        }
        let (mut sampled, mut square) = (0u64, 0.0);
        for r in self.rows(phase) {
            sampled = sampled.saturating_add(r.bytes_requested);
            if self.row_sampled(r) {
                square += crate::sampling_noise::square_bound(
                    r.bytes_requested,
                    r.size_class_bytes,
                    r.calls(),
                );
            }
        }
        let exact = self.phase_sum(phase, |r| r.bytes_requested);
        Some((sampled, exact, self.bytes_noise(square)))
    }

    /// As [`Report::count_noise`] of the sampled part of an estimate, and where
    /// that part is 0 what sampling may have missed (`sampling_noise::unsampled_bound`):
    /// a site or category none of whose allocations (or temporaries) was sampled,
    /// or only blocks of the classes recorded whole, may have made up to about 3N
    /// more.
    pub fn count_or_none_noise(&self, count: u64) -> Option<u64> {
        let n = self.manifest.sample_interval;
        if count == 0 {
            crate::sampling_noise::unsampled_bound(n)
        } else {
            self.count_noise(count)
        }
    }

    /// The same for an estimate of requested bytes, from its rows' sum of
    /// `sampling_noise::square_bound`.
    pub fn bytes_noise(&self, square_sum: f64) -> Option<u64> {
        crate::sampling_noise::bytes_bound(square_sum, self.manifest.sample_interval)
    }

    /// True when the report counted allocations but holds no sites: a `count` report,
    /// or one whose mode was switched to `off` before it was written.
    pub fn counts_without_sites(&self) -> bool {
        self.sites.is_empty() && self.calls(None) > 0
    }

    /// The mode the sites' figures were recorded in: the manifest's `mode`, or, in a
    /// run switched to `count` or `off` before its report, the latest mode that
    /// recorded stacks (`stacks_mode`): `sites` or `sample:N` wherever any stack was
    /// recorded, `count` where none was and allocations were counted. Reports
    /// written before the tracer said so give `mode`, or `count` for one written in
    /// `off` mode that counted allocations and holds no site (switched from `count`).
    pub fn stacks_mode(&self) -> &str {
        let m = &self.manifest;
        match (m.stacks_mode.as_deref(), m.allocs_without_stacks) {
            (Some(s), _) if !s.is_empty() => s,
            (_, Some(n)) if n > 0 => "count",
            (_, None) if m.mode == "off" && self.counts_without_sites() => "count",
            _ => &m.mode,
        }
    }

    /// How many allocations each sampled one counts for, in words: `1000 times`, or,
    /// where the run switched intervals (`stack_weights_changed`), `for the interval
    /// it was drawn at, lately 1000`.
    pub fn sample_weight_words(&self) -> String {
        let m = &self.manifest;
        if m.stack_weights_changed && m.weighted_as_recorded {
            format!(
                "for the interval it was drawn at, lately {}",
                m.sample_interval
            )
        } else {
            format!("{} times", m.sample_interval)
        }
    }

    /// The mode when the report was written, and the one its stacks were recorded
    /// in where that differs: `count (stacks recorded in sites)`, or `off (after
    /// count)` where none was. Two reports whose words differ were traced
    /// differently.
    pub fn mode_words(&self) -> String {
        let (mode, stacks) = (&self.manifest.mode, self.stacks_mode());
        match stacks {
            s if s == mode => mode.clone(),
            "count" => format!("{mode} (after count)"),
            s => format!("{mode} (stacks recorded in {s})"),
        }
    }

    /// True when the sites' figures are sampled estimates (`sample:N`).
    pub fn sampled(&self) -> bool {
        self.stacks_mode().starts_with("sample:")
    }

    /// True when no part of the run recorded stacks, nor temporaries: a `count` run
    /// (or one switched between `count` and `off`).
    pub fn count_only(&self) -> bool {
        self.stacks_mode() == "count"
    }

    /// Allocations and reallocs counted in `count` mode, with no stack, in a report
    /// that recorded stacks for the rest of its run (the manifest's
    /// `allocs_without_stacks`): in no site row. 0 where every one had its stack
    /// recorded, in a `count` report, and in reports written before the tracer
    /// counted them.
    pub fn allocs_without_stacks(&self) -> u64 {
        let m = &self.manifest;
        match m.stacks_mode.as_deref() {
            Some(s) if !s.is_empty() => m.allocs_without_stacks.unwrap_or(0),
            _ => 0,
        }
    }

    /// Why the report can answer no gate or budget, when it recorded no allocation
    /// at all (one written with the tracer `off`, by `Session::finish` or
    /// `write_report`): every maximum would pass on its zeros. Said of the report,
    /// without its path (`records no allocation: ...`).
    pub fn nothing_recorded(&self) -> Option<String> {
        (self.calls(None) == 0).then(|| {
            let why = if self.manifest.mode == "off" {
                "the tracer was off (set ALLOC_TRACE=sites, count or sample:N, or call \
                 Settings::apply)"
            } else {
                "the program allocated nothing while it was traced"
            };
            format!("records no allocation: {why}, and every limit passes on zeros")
        })
    }

    /// True when the report records sites to share its allocations out by: not a
    /// `count` report, nor one [`Report::counts_without_sites`].
    pub fn records_sites(&self) -> bool {
        !self.count_only() && !self.counts_without_sites()
    }

    /// The rows synthesized, from the `rows` label (synth-driver records it; a program
    /// of its own states it with `alloc_tracer::label`), when it is a count above 0.
    pub fn rows_label(&self) -> Option<u64> {
        self.manifest
            .labels
            .get("rows")
            .and_then(|r| r.parse::<u64>().ok())
            .filter(|r| *r > 0)
    }

    /// Wall time of `phase` in seconds, or of the whole traced run when `None`.
    /// `main`, the time outside any named phase, is the run's time less the named
    /// phases' (the tracer does not time it). `None` for a phase never timed (entered
    /// only by quick guards, as the mirror prover's `enforce`): its 0 is no measure.
    pub fn wall_s(&self, phase: Option<&str>) -> Option<f64> {
        match phase {
            Some(MAIN_PHASE) => Some(self.outside_phases_s()),
            Some(p) => self
                .phases
                .iter()
                .find(|r| r.phase == p)
                .filter(|r| r.entry_count > 0)
                .map(|r| r.wall_ns as f64 / 1e9),
            None => Some(self.manifest.duration_s),
        }
    }

    /// The run's time outside the named phases: its duration less their wall times
    /// (at least 0: nested phases count twice in that sum).
    pub fn outside_phases_s(&self) -> f64 {
        let named: u64 = self
            .phases
            .iter()
            .filter(|r| r.phase != MAIN_PHASE)
            .map(|r| r.wall_ns)
            .fold(0, u64::saturating_add);
        // In whole nanoseconds, so that the figure is as exact as its parts.
        let duration_ns = (self.manifest.duration_s * 1e9).round() as u64;
        duration_ns.saturating_sub(named) as f64 / 1e9
    }

    /// The phases the report names, in its order (`phases.parquet`), then any that
    /// only `sites.parquet` has.
    pub fn phase_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.phases.iter().map(|r| r.phase.as_str()).collect();
        for r in &self.sites {
            if !names.contains(&r.phase.as_str()) {
                names.push(&r.phase);
            }
        }
        names
    }

    /// `phase` itself when the report has it; [`Error::UnknownPhase`], listing the
    /// report's phases, otherwise.
    pub fn check_phase<'a>(&self, phase: Option<&'a str>) -> Result<Option<&'a str>, Error> {
        match phase {
            Some(p) if !self.phase_names().contains(&p) => Err(Error::UnknownPhase {
                phase: p.to_owned(),
                report: self.dir.clone(),
                phases: self.phase_names().join(", "),
            }),
            _ => Ok(phase),
        }
    }

    /// The manifest's `host` and `cpu` (`unknown` where empty).
    pub fn host(&self) -> (String, String) {
        let or_unknown = |s: &str| {
            if s.is_empty() {
                "unknown".to_owned()
            } else {
                s.to_owned()
            }
        };
        (
            or_unknown(&self.manifest.host),
            or_unknown(&self.manifest.cpu),
        )
    }
}

/// Reads the report at `dir`, checking its schema version.
///
/// A damaged or foreign report is an [`Error`] with a one-line reason naming the
/// file, never a panic, an abort or a hang: anything but a regular file is refused
/// before it is opened (a FIFO would block forever); each table is checked before
/// its rows are decoded (the rows the manifest lists, the columns the analyzer reads
/// present with the schema's types, their page headers consistent) and after (no
/// nulls where the schema has none, one value per row); and a panic inside the
/// parquet reader, which damaged data pages can still cause, is caught and reported
/// as [`Error::Corrupt`]. To keep that
/// panic's message off standard error, the first load installs a panic hook that
/// stays silent for panics on a thread while it reads a table (and on polars' worker
/// threads while any table is read) and hands every other panic to the hook it
/// replaced.
pub fn load(dir: &Path) -> Result<Report, Error> {
    let manifest_path = dir.join(schema::MANIFEST);
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(meta) => {
            return Err(Error::Corrupt {
                path: dir.to_owned(),
                reason: format!("not a report directory ({})", file_kind(meta.file_type())),
            });
        }
        Err(_) => {
            return Err(Error::Io {
                path: dir.to_owned(),
                cause: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such report directory",
                ),
            });
        }
    }
    if matches!(manifest_path.try_exists(), Ok(false)) {
        return Err(Error::Corrupt {
            path: dir.to_owned(),
            reason: format!(
                "not a report: no {} (an alloc-tracer report directory holds one)",
                schema::MANIFEST
            ),
        });
    }
    let text = read_manifest(&manifest_path)?;
    let manifest = Manifest::from_json(&text).map_err(|e| match e {
        ManifestError::Version { found } => Error::SchemaVersion {
            path: manifest_path.clone(),
            found: found.to_string(),
            supported: SUPPORTED_SCHEMA_VERSION,
        },
        ManifestError::NoVersion => Error::Corrupt {
            path: manifest_path.clone(),
            reason: ManifestError::NoVersion.to_string(),
        },
        ManifestError::Json(e) => Error::Corrupt {
            path: manifest_path.clone(),
            reason: one_line(format!("not a report manifest: {e}")),
        },
    })?;
    let mut manifest = manifest;
    escape_controls(&mut manifest);
    let sites = read(dir, &manifest, &schema::SITES, SITE_COLUMNS, site_rows)?;
    let mut frames = read(dir, &manifest, &schema::FRAMES, FRAME_COLUMNS, frame_rows)?;
    frames.sort_by_key(|f| (f.site_id, f.frame_index));
    let phases = read_with_later(
        dir,
        &manifest,
        &schema::PHASES,
        PHASE_COLUMNS,
        &["peak_live_bytes"],
        phase_rows,
    )?;
    let lifetimes = read(
        dir,
        &manifest,
        &schema::LIFETIMES,
        LIFETIME_COLUMNS,
        lifetime_rows,
    )?;
    Ok(Report {
        dir: dir.to_owned(),
        manifest,
        sites,
        frames,
        phases,
        lifetimes,
    })
}

/// What heap sampling left out where it came on part-way through the run (after
/// "heap sampling" or "it").
pub const HEAP_STARTED_LATE: &str =
    "came on part-way through the run, and blocks allocated before are left out";

/// [`HEAP_STARTED_LATE`] as a clause after one about heap sampling's estimates
/// (`; it came on ...`) where it did (`late`: the manifest's
/// `heap_sampling_started_late`); empty otherwise.
pub fn heap_late_words(late: bool) -> String {
    if late {
        format!("; it {HEAP_STARTED_LATE}")
    } else {
        String::new()
    }
}

/// What a report's `without` allocations and reallocs counted in `count` mode, with
/// no stack, of its `calls`, mean for its sites (`Report::allocs_without_stacks`).
pub fn without_stacks_words(without: u64, calls: u64) -> String {
    format!(
        "{without} allocations and reallocs ({:.1} % of the run's) were counted in count \
         mode, with no stack: no site holds them, and per-site shares are of those \
         recorded with stacks (`analyzer info` gives each phase's exact totals)",
        100.0 * without as f64 / calls.max(1) as f64
    )
}

/// Escapes control characters and backslashes in the manifest's free text (see
/// [`escape_controls_in`]).
fn escape_controls(m: &mut Manifest) {
    let escape = escape_controls_in;
    for s in [
        &mut m.tool_version,
        &mut m.host,
        &mut m.cpu,
        &mut m.mode,
        &mut m.weights,
    ] {
        escape(s);
    }
    m.command_line.iter_mut().for_each(escape);
    for s in [&mut m.incomplete, &mut m.allocator, &mut m.run_id]
        .into_iter()
        .flatten()
    {
        escape(s);
    }
    if let Some(peak) = &mut m.heap_peak {
        escape(&mut peak.phase);
    }
    m.labels = std::mem::take(&mut m.labels)
        .into_iter()
        .map(|(mut k, mut v)| {
            escape(&mut k);
            escape(&mut v);
            (k, v)
        })
        .collect();
}

/// Escapes the control characters in `s` (a line break reads `\n`, an escape
/// `\u{1b}`), and its backslashes (`\\`), so that two names stay two (a line break
/// and a backslash before an `n`): the analyzer prints a report's text (the
/// manifest's, and the tables' phase names, functions and files) in notes and
/// tables, which must stay on their lines and must not drive the terminal. The same
/// everywhere, so that a phase named in the manifest still names its row in the
/// tables.
pub(crate) fn escape_controls_in(s: &mut String) {
    let escaped = |c: char| c.is_control() || c == '\\';
    if s.chars().any(escaped) {
        let mut out = String::with_capacity(s.len() + 8);
        for c in s.chars() {
            if escaped(c) {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
        }
        *s = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_one_line() {
        assert_eq!(one_line("a\n\n  b\tc "), "a b c");
    }
}
