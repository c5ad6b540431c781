//! What one report is made of: everything read from the recorder at one moment,
//! with stacks cleaned of the tracer's own frames.

use super::summary;
use crate::config::Settings;
use crate::heap::SiteLive;
use crate::hot::site_table::SiteMeta;
use crate::lifetimes::Lifetimes;
use crate::phase::PhaseTime;
use crate::registry::{Counts, SiteCounts, SiteId};
use crate::symbolize::{self, Frame};
use std::collections::HashMap;

/// Everything read from the recorder for one report.
pub struct Snapshot {
    /// The settings in force.
    pub settings: Settings,
    /// Every counter.
    pub counts: Box<Counts>,
    /// Site counters, stacks without the tracer's own frames.
    pub sites: HashMap<SiteId, SiteCounts>,
    /// Followed blocks per site, likewise.
    pub lifetimes: HashMap<SiteId, Lifetimes>,
    /// Phase names and times.
    pub phases: Vec<PhaseTime>,
    /// What heap sampling said was live at the kept peak, likewise per site.
    pub heap_peak: HashMap<SiteId, SiteLive>,
    /// The kept peak's live bytes, time and phase (its `sites` moved to
    /// `heap_peak`).
    pub peak: crate::heap::Peak,
    /// What heap sampling says is live now, per site.
    pub heap_end: HashMap<SiteId, SiteLive>,
    /// The live-bytes timeline.
    pub timeline: Vec<crate::timeline::Point>,
    /// The program's labels.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Symbols of every return address in `sites`, `lifetimes` and the heap tables.
    pub symbols: HashMap<usize, Vec<Frame>>,
    /// When the recorder was read (`clock::now_ns`), before symbolizing: the end of
    /// the run the report covers.
    pub taken_ns: u64,
    /// The same moment in Unix seconds.
    pub taken_unix_s: f64,
    /// The process's peak resident set size then (`rss::peak_bytes`, and at least
    /// `rss_bytes` and every timeline point's), before the report's own work:
    /// symbolizing a small program's stacks can take more memory than the program
    /// did.
    pub max_rss_bytes: u64,
    /// The process's resident set size then.
    pub rss_bytes: u64,
    /// The most threads that had recorded at once (the peak's error bound), read
    /// with the counts.
    pub most_threads: u64,
    /// The highest published live bytes while each phase was the innermost in
    /// force; the run's peak is the highest of them.
    pub phase_peaks: [i64; crate::hot::control::MAX_PHASES],
}

impl Snapshot {
    /// Reads the recorder, then symbolizes. Runs under the re-entrancy guard. The
    /// run's end, its phase times, its timeline and its peak RSS are read first, so
    /// that none of them counts what symbolizing takes (tens of milliseconds to
    /// seconds, and tens of MiB).
    pub fn take() -> Snapshot {
        crate::hot::thread::guarded(|| {
            let taken_ns = crate::hot::clock::now_ns();
            let taken_unix_s = crate::hot::clock::unix_seconds();
            let rss_bytes = crate::rss::current_bytes();
            let phase_peaks = crate::hot::live::phase_peak_bytes();
            let most_threads = crate::registry::most_threads_at_once();
            let settings = Settings::current();
            let phases = crate::phase::phases_at(taken_ns);
            let timeline = crate::timeline::points_to_now();
            // Never below a size the report shows: the kernel's high-water mark is
            // its own reading, and reading it allocates.
            let max_rss_bytes = timeline
                .iter()
                .map(|p| p.rss_bytes)
                .fold(crate::rss::peak_bytes().max(rss_bytes), u64::max);
            let labels = crate::labels::all();
            let sites = crate::registry::sites();
            let counts = Box::new(crate::registry::counts());
            let lifetimes = crate::lifetimes::snapshot();
            let mut peak = crate::heap::peak();
            let heap_peak: HashMap<SiteId, SiteLive> =
                std::mem::take(&mut peak.sites).into_iter().collect();
            let heap_end = crate::heap::live_now();
            let symbols = symbolize::resolve_all(
                sites
                    .keys()
                    .chain(lifetimes.keys())
                    .chain(heap_peak.keys())
                    .chain(heap_end.keys())
                    .flat_map(|id| id.frames.iter().copied()),
            );
            let add_live = |a: &SiteLive, b: &SiteLive| {
                let mut sum = *a;
                sum.add(b);
                sum
            };
            Snapshot {
                settings,
                counts,
                sites: without_tracer_frames(sites, &symbols, |a, b| {
                    let mut sum = *a;
                    sum.add(b);
                    sum
                }),
                lifetimes: without_tracer_frames(lifetimes, &symbols, |a, b| {
                    let mut sum = a.clone();
                    sum.add(b);
                    sum
                }),
                phases,
                heap_peak: without_tracer_frames(heap_peak, &symbols, add_live),
                peak,
                heap_end: without_tracer_frames(heap_end, &symbols, add_live),
                timeline,
                labels,
                symbols,
                taken_ns,
                taken_unix_s,
                max_rss_bytes,
                rss_bytes,
                most_threads,
                phase_peaks,
            }
        })
    }
}

/// Drops the tracer's own return addresses from the start of every stack (see
/// `hot::sites::OWN_FRAMES`), merging stacks that then coincide. The next address usually
/// still carries the tracer's inlined frames (the allocator entry point inlined into
/// the caller); [`user_frames`] drops those when frames are listed.
fn without_tracer_frames<V>(
    map: HashMap<SiteId, V>,
    symbols: &HashMap<usize, Vec<Frame>>,
    merge: impl Fn(&V, &V) -> V,
) -> HashMap<SiteId, V> {
    let mut out: HashMap<SiteId, V> = HashMap::with_capacity(map.len());
    for (id, v) in map {
        let own = id
            .frames
            .iter()
            .take_while(|a| symbols[a].iter().all(summary::is_tracer))
            .count();
        let frames: Box<[usize]> = id.frames[own..].into();
        let key = SiteId {
            meta: SiteMeta::new(id.phase(), id.class(), frames.len()),
            frames,
        };
        let merged = match out.get(&key) {
            Some(old) => merge(old, &v),
            None => v,
        };
        out.insert(key, merged);
    }
    out
}

/// The symbolized frames of a stack, innermost first, without the tracer's own
/// frames and the allocator shim in front.
pub fn user_frames<'s>(
    stack: &[usize],
    symbols: &'s HashMap<usize, Vec<Frame>>,
) -> Vec<(usize, usize, &'s Frame)> {
    stack
        .iter()
        .enumerate()
        .flat_map(|(si, a)| symbols[a].iter().map(move |f| (si, *a, f)))
        .skip_while(|(_, _, f)| summary::is_tracer(f) || summary::is_shim(f))
        .collect()
}
