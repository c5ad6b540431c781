//! Memory: which sites hold the live bytes at the kept peak (`heap_peak.parquet`) and
//! at the report (`heap_end.parquet`), and live bytes over time
//! (`timeline.parquet`). `render` writes the answers, `svg` plots the timeline,
//! `flame` draws live bytes as flame graphs, `compare` sets two reports' answers
//! side by side.

pub mod compare;
mod flame;
pub mod render;
pub mod svg;

pub use flame::{
    NOTHING_LIVE, UNSEEN, flamegraph, flamegraph_diff, folded, moment_sampled, phase_held_none,
};

use crate::Error;
use crate::categories::{self, Category};
use crate::export;
use crate::naming;
use crate::rank::{CALLERS, frames_of};
use crate::report::read_with_later;
use crate::report::{self, Report};
use alloc_tracer_format::schema;
use polars::prelude::DataFrame;
use std::collections::{BTreeMap, HashMap};

/// One row of `heap_peak.parquet` or `heap_end.parquet`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeapRow {
    /// The site.
    pub site_id: u64,
    /// Phase at allocation.
    pub phase: String,
    /// jemalloc size class.
    pub size_class_bytes: u64,
    /// Sampled blocks live (raw).
    pub sampled_count: u64,
    /// Estimated live bytes.
    pub live_bytes_estimate: u64,
    /// Estimated live blocks.
    pub live_blocks_estimate: u64,
    /// The standard deviation of `live_bytes_estimate` from sampling, as the tracer
    /// summed it block by block; `None` in reports written before it.
    pub live_bytes_stddev: Option<u64>,
}

/// One row of `timeline.parquet`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimelinePoint {
    /// Nanoseconds after tracing started.
    pub time_ns: u64,
    /// Phase in force.
    pub phase: String,
    /// Live bytes.
    pub live_bytes: i64,
    /// Allocations and reallocs so far.
    pub alloc_count: u64,
    /// Their real bytes so far.
    pub bytes_allocated: u64,
    /// The process's resident set size (0 where unknown, and in reports written
    /// before it was sampled).
    pub rss_bytes: u64,
}

/// A report's memory tables (empty where the report has none: heap sampling off,
/// or a report written before they existed).
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// What was live at the kept peak.
    pub peak: Vec<HeapRow>,
    /// What was live at the report.
    pub end: Vec<HeapRow>,
    /// Live bytes over time, in time order.
    pub timeline: Vec<TimelinePoint>,
}

const HEAP_COLUMNS: &[&str] = &[
    "site_id",
    "phase",
    "size_class_bytes",
    "sampled_count",
    "live_bytes_estimate",
    "live_blocks_estimate",
];

const TIMELINE_COLUMNS: &[&str] = &[
    "time_ns",
    "phase",
    "live_bytes",
    "alloc_count",
    "bytes_allocated",
];

/// Reads the memory tables of a loaded report, checked like its other tables.
pub fn load(report: &Report) -> Result<Memory, Error> {
    // Tables from before heap sampling and the timeline: absent, and not listed.
    let table = |t: &schema::Table| -> Result<bool, Error> {
        Ok(report::listed(&report.dir, &report.manifest, t)?.is_some())
    };
    let heap = |t: &schema::Table| -> Result<Vec<HeapRow>, Error> {
        if !table(t)? {
            return Ok(vec![]);
        }
        read_with_later(
            &report.dir,
            &report.manifest,
            t,
            HEAP_COLUMNS,
            &["live_bytes_stddev"],
            heap_rows,
        )
    };
    let timeline = if table(&schema::TIMELINE)? {
        let mut t = read_with_later(
            &report.dir,
            &report.manifest,
            &schema::TIMELINE,
            TIMELINE_COLUMNS,
            &["rss_bytes"],
            timeline_rows,
        )?;
        t.sort_by_key(|p| p.time_ns);
        t
    } else {
        vec![]
    };
    Ok(Memory {
        peak: heap(&schema::HEAP_PEAK)?,
        end: heap(&schema::HEAP_END)?,
        timeline,
    })
}

fn heap_rows(df: &DataFrame) -> Result<Vec<HeapRow>, String> {
    let site = report::u64s(df, "site_id")?;
    let mut phase = report::strings(df, "phase")?;
    let class = report::u64s(df, "size_class_bytes")?;
    let sampled = report::u64s(df, "sampled_count")?;
    let bytes = report::u64s(df, "live_bytes_estimate")?;
    let blocks = report::u64s(df, "live_blocks_estimate")?;
    let stddev = match df.column("live_bytes_stddev") {
        Ok(_) => report::u64s(df, "live_bytes_stddev")?
            .into_iter()
            .map(Some)
            .collect(),
        Err(_) => vec![None; df.height()],
    };
    Ok((0..df.height())
        .map(|i| HeapRow {
            site_id: site[i],
            phase: phase[i].take().unwrap_or_default(),
            size_class_bytes: class[i],
            sampled_count: sampled[i],
            live_bytes_estimate: bytes[i],
            live_blocks_estimate: blocks[i],
            live_bytes_stddev: stddev[i],
        })
        .collect())
}

fn timeline_rows(df: &DataFrame) -> Result<Vec<TimelinePoint>, String> {
    let time = report::u64s(df, "time_ns")?;
    let mut phase = report::strings(df, "phase")?;
    let live = report::i64s(df, "live_bytes")?;
    let allocs = report::u64s(df, "alloc_count")?;
    let bytes = report::u64s(df, "bytes_allocated")?;
    let rss = match df.column("rss_bytes") {
        Ok(_) => report::u64s(df, "rss_bytes")?,
        Err(_) => vec![0; df.height()],
    };
    Ok((0..df.height())
        .map(|i| TimelinePoint {
            time_ns: time[i],
            phase: phase[i].take().unwrap_or_default(),
            live_bytes: live[i],
            alloc_count: allocs[i],
            bytes_allocated: bytes[i],
            rss_bytes: rss[i],
        })
        .collect())
}

/// One site's live memory at a moment, summed over its size classes.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HeldSite {
    /// Rank, from 1, by live bytes.
    pub rank: usize,
    /// `site_id` in the report.
    pub site_id: u64,
    /// First frame outside the allocator and std.
    pub name: String,
    /// Where that frame was reached from.
    pub callers: String,
    /// For sites of the phase whose name and callers read the same (listed or not):
    /// the first frame further out that tells them apart
    /// (`naming::distinctions_among`); empty otherwise.
    pub distinction: String,
    /// The first category whose rules claim the site.
    pub category: String,
    /// Estimated live bytes.
    pub live_bytes: u64,
    /// Their share of the moment's live bytes (the kept peak's, or the end's).
    pub share: f64,
    /// Estimated live blocks.
    pub live_blocks: u64,
    /// Sampled blocks behind the estimates (raw): few means a rough estimate.
    pub sampled_count: u64,
    /// One standard error of `live_bytes` (heap sampling's, from the variance of
    /// each of its rows' estimates).
    pub live_bytes_se: u64,
    /// The size class holding most of the site's live bytes.
    pub main_size_class_bytes: u64,
    /// Estimated live bytes and blocks per size class (not written: what
    /// `compare` needs to take a site's error at the other report's bytes).
    #[serde(skip)]
    pub classes: BTreeMap<u64, (u64, u64)>,
}

/// Live bytes per category at a moment.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HeldCategory {
    /// Category name.
    pub category: String,
    /// Estimated live bytes.
    pub live_bytes: u64,
    /// Their share of the moment's live bytes.
    pub share: f64,
    /// Sites in the category.
    pub sites: usize,
    /// One standard error of `live_bytes` (its sites' variances summed).
    pub live_bytes_se: u64,
}

/// What holds memory at one moment: the moment's exact live bytes (when known),
/// what the estimates add up to, and the sites and categories, largest first.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Held {
    /// `peak` or `end`.
    pub moment: String,
    /// Exact live bytes then: the kept peak's; at the end, the bytes allocated and
    /// not freed while traced (`live_bytes_end`, which frees of blocks allocated
    /// before tracing lower, so it can be below what is live, or negative).
    pub live_bytes: Option<i64>,
    /// The run's highest live bytes (`peak_live_bytes`; the peak moment only): the
    /// kept peak lies below it by less than 1/128 of it or 1 MiB, and what was
    /// allocated between the two is in no table.
    pub run_peak_live_bytes: Option<i64>,
    /// The phase the run's highest was published in, where that is not the kept
    /// peak's (the peak moment only): the tables describe the kept moment, whose
    /// blocks may be others than those live at the highest.
    pub run_peak_phase: Option<String>,
    /// The process's highest resident set size over the run (`max_rss_bytes`, at
    /// either moment: the tables print it at the peak; 0 where the report does not
    /// have it).
    pub max_rss_bytes: u64,
    /// The process's resident set size at the moment: at the kept peak, the
    /// timeline's nearest point (its time in `rss_time_s`); at the end, when the
    /// report was taken (`totals.rss_bytes_end`). 0 where unknown (no timeline, or a
    /// report written before the tracer sampled resident memory).
    pub rss_bytes: u64,
    /// When `rss_bytes` was sampled, in seconds after tracing started (the kept
    /// peak's timeline point; `None` at the end, where it is the report's moment).
    pub rss_time_s: Option<f64>,
    /// When, in seconds after tracing started (the kept peak only).
    pub time_s: Option<f64>,
    /// The phase in force then (the kept peak only).
    pub phase: Option<String>,
    /// The phase whose blocks the tables hold (`--phase`: blocks allocated in it,
    /// wherever the moment fell); `None`, every phase's.
    pub blocks_of_phase: Option<String>,
    /// Heap sampling's mean interval in bytes (0: off): the last one, where it
    /// changed during the run (`heap_intervals_changed`).
    pub heap_interval: u64,
    /// Heap sampling ran at more than one interval during the run.
    pub heap_intervals_changed: bool,
    /// Heap sampling came on after the program had allocated with it off: the
    /// estimates leave out blocks allocated before.
    pub heap_started_late: bool,
    /// The sum of the estimates over the sites of the phase asked for (every phase
    /// without `--phase`), before `--limit`.
    pub estimated_bytes: u64,
    /// The same over every phase: 0 when no sampled block was live then at all.
    pub estimated_bytes_all_phases: u64,
    /// One standard error of `estimated_bytes` (0 when the interval is unknown, or
    /// 1, where the estimates are exact).
    pub estimated_bytes_se: u64,
    /// Categories, largest first.
    pub categories: Vec<HeldCategory>,
    /// Sites, largest first (at most the limit).
    pub sites: Vec<HeldSite>,
    /// Sites past the limit, left out of `sites`.
    pub more_sites: usize,
    /// Whether the report has the moment's table (`heap_peak.parquet` or
    /// `heap_end.parquet`) at all: a report written by a tracer from before it kept
    /// one has none, which is not the same as nothing sampled.
    pub table_written: bool,
}

/// The variance of a heap-sampling row's estimate, as its sampled blocks estimate it:
/// each live block of `s` bytes was sampled with probability `p` ([`sampled_share`])
/// and stands for `s/p` bytes, so the row's estimate has variance `k s^2 (1 - p) /
/// p^2` over its `k` sampled blocks. The tracer sums it block by block, each at
/// its own `p` (`live_bytes_stddev`, squared here); for reports before it, this
/// figures it from the row. `s` is the row's bytes over its blocks: exact
/// for a small size class, whose blocks are all one size, and a mean for a large
/// class's grid bin. 0 at an interval of 1 (exact) or unknown (0). `mixed`: heap
/// sampling ran at more than one interval (the manifest's `heap_intervals_changed`),
/// so `interval`, the last one, need not be the row's: `p` is then the row's own,
/// its sampled blocks over the blocks they stand for.
fn row_variance(r: &HeapRow, interval: u64, mixed: bool) -> f64 {
    if let Some(sd) = r.live_bytes_stddev {
        return sd as f64 * sd as f64;
    }
    if r.live_blocks_estimate == 0 {
        return 0.0;
    }
    let s = r.live_bytes_estimate as f64 / r.live_blocks_estimate as f64;
    let p = if mixed {
        let p = r.sampled_count as f64 / r.live_blocks_estimate as f64;
        (p > 0.0 && p < 1.0).then_some(p)
    } else {
        sampled_share(s, interval)
    };
    match p {
        Some(p) => r.sampled_count as f64 * s * s * (1.0 - p) / (p * p),
        None => 0.0,
    }
}

/// The variance heap sampling at `interval` gives an estimate of `bytes` live in
/// blocks of `block` bytes: `bytes/block` blocks, each sampled with probability `p`
/// and standing for `block/p` bytes, give `bytes * block * (1 - p) / p`. What a
/// report that sampled none of them could have estimated, which its own sampled
/// blocks cannot say ([`row_variance`]). 0 at an interval of 1 (exact) or unknown.
pub(crate) fn variance_of(bytes: f64, block: f64, interval: u64) -> f64 {
    match sampled_share(block, interval) {
        Some(p) => bytes * block * (1.0 - p) / p,
        None => 0.0,
    }
}

/// The probability that heap sampling at a mean `interval` samples a block of
/// `block` bytes: `1 - (1 - 1/interval)^block`. `None` where the estimate has no
/// sampling error to speak of: an interval of 1 (every block), 0 (unknown), or no
/// block.
fn sampled_share(block: f64, interval: u64) -> Option<f64> {
    if interval <= 1 || block <= 0.0 {
        return None;
    }
    let p = -(block * (-1.0 / interval as f64).ln_1p()).exp_m1();
    (p > 0.0).then_some(p)
}

/// Which table a [`Held`] is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moment {
    /// The kept peak (`heap_peak.parquet`).
    Peak,
    /// The report (`heap_end.parquet`): leaks and long-lived data.
    End,
}

/// The phase whose peak is the run's highest (`phases.parquet`), unless the kept
/// peak's phase `kept` reached it too.
fn run_peak_phase(report: &Report, kept: Option<&str>) -> Option<String> {
    let highest = report.manifest.totals.peak_live_bytes;
    let mut at_highest = report
        .phases
        .iter()
        .filter(|r| r.peak_live_bytes == Some(highest))
        .map(|r| r.phase.as_str());
    let first = at_highest.clone().next()?;
    (kept.is_some() && !at_highest.any(|p| Some(p) == kept)).then(|| first.to_owned())
}

/// What holds memory at `moment`: sites of blocks allocated in `phase` (all if
/// `None`), categorised by `rules`, the `limit` largest.
pub fn held(
    report: &Report,
    memory: &Memory,
    moment: Moment,
    rules: &[Category],
    phase: Option<&str>,
    limit: usize,
) -> Held {
    let rows = match moment {
        Moment::Peak => &memory.peak,
        Moment::End => &memory.end,
    };
    let m = &report.manifest;
    let (live_bytes, time_s, at_phase) = match moment {
        Moment::Peak => m.heap_peak.as_ref().map_or((None, None, None), |p| {
            (
                Some(p.live_bytes),
                Some(p.time_ns as f64 / 1e9),
                Some(p.phase.clone()),
            )
        }),
        Moment::End => (Some(m.totals.live_bytes_end), None, None),
    };
    let in_phase = |r: &&HeapRow| phase.is_none_or(|p| r.phase == p);
    // What every sampled block accounts for, and those of the phase asked for.
    let all_bytes = rows
        .iter()
        .map(|r| r.live_bytes_estimate)
        .fold(0, u64::saturating_add);
    let estimated_bytes = rows
        .iter()
        .filter(in_phase)
        .map(|r| r.live_bytes_estimate)
        .fold(0, u64::saturating_add);
    #[derive(Default)]
    struct Acc {
        sampled: u64,
        variance: f64,
        /// Bytes and blocks per size class (the site's are their sums).
        classes: BTreeMap<u64, (u64, u64)>,
    }
    let mut by_site: HashMap<u64, Acc> = HashMap::new();
    let mut variance = 0.0;
    for r in rows.iter().filter(in_phase) {
        let v = row_variance(r, m.heap_interval, m.heap_intervals_changed);
        variance += v;
        let a = by_site.entry(r.site_id).or_default();
        a.sampled = a.sampled.saturating_add(r.sampled_count);
        a.variance += v;
        let class = a.classes.entry(r.size_class_bytes).or_default();
        class.0 = class.0.saturating_add(r.live_bytes_estimate);
        class.1 = class.1.saturating_add(r.live_blocks_estimate);
    }
    // Shares of the kept peak's exact live bytes; at the end, of what the estimates
    // say is live (`live_bytes_end` is a net of allocations and frees, not that).
    let whole = live_bytes
        .filter(|b| *b > 0 && moment == Moment::Peak)
        .map_or(all_bytes as f64, |b| b as f64);
    let share = |b: u64| if whole > 0.0 { b as f64 / whole } else { 0.0 };
    let mut sites: Vec<HeldSite> = by_site
        .into_iter()
        .map(|(site_id, a)| {
            let frames = frames_of(&report.frames, site_id);
            let category = categories::classify(rules, frames);
            let (bytes, blocks) = a.classes.values().fold((0u64, 0u64), |(b, n), c| {
                (b.saturating_add(c.0), n.saturating_add(c.1))
            });
            HeldSite {
                rank: 0,
                site_id,
                name: naming::site_name(frames),
                callers: naming::callers(frames, CALLERS),
                distinction: String::new(),
                category: categories::category_name(rules, category).to_owned(),
                live_bytes: bytes,
                share: share(bytes),
                live_blocks: blocks,
                sampled_count: a.sampled,
                live_bytes_se: a.variance.sqrt().round() as u64,
                main_size_class_bytes: a
                    .classes
                    .iter()
                    .max_by_key(|(c, (b, _))| (*b, **c))
                    .map_or(0, |(c, _)| *c),
                classes: a.classes,
            }
        })
        .collect();
    sites.sort_by(|a, b| {
        b.live_bytes
            .cmp(&a.live_bytes)
            .then(a.site_id.cmp(&b.site_id))
    });
    let mut cats: HashMap<&str, (u64, usize, f64)> = HashMap::new();
    for s in &sites {
        let c = cats.entry(s.category.as_str()).or_default();
        c.0 = c.0.saturating_add(s.live_bytes);
        c.1 += 1;
        c.2 += (s.live_bytes_se as f64).powi(2);
    }
    let mut categories: Vec<HeldCategory> = cats
        .into_iter()
        .map(|(name, (bytes, n, variance))| HeldCategory {
            category: name.to_owned(),
            live_bytes: bytes,
            share: share(bytes),
            sites: n,
            live_bytes_se: variance.sqrt().round() as u64,
        })
        .collect();
    categories.sort_by(|a, b| {
        b.live_bytes
            .cmp(&a.live_bytes)
            .then(a.category.cmp(&b.category))
    });
    // Told apart among every site of the phase, as `top` tells them apart, and the
    // sites live only here (heap sampling's, in `sample:N`).
    let mut ids = crate::rank::site_ids(report, phase);
    ids.extend(sites.iter().map(|s| s.site_id));
    ids.sort_unstable();
    ids.dedup();
    let more_sites = sites.len().saturating_sub(limit);
    sites.truncate(limit);
    let shown: Vec<u64> = sites.iter().map(|s| s.site_id).collect();
    let distinctions = crate::rank::distinctions_among_sites(report, &ids, &shown);
    for (i, (s, d)) in sites.iter_mut().zip(distinctions).enumerate() {
        s.rank = i + 1;
        s.distinction = d;
    }
    let rss = match moment {
        Moment::Peak => rss_near(memory, m.heap_peak.as_ref().map(|p| p.time_ns)),
        Moment::End => (m.totals.rss_bytes_end, None),
    };
    Held {
        moment: match moment {
            Moment::Peak => "peak",
            Moment::End => "end",
        }
        .to_owned(),
        live_bytes,
        run_peak_live_bytes: (moment == Moment::Peak).then_some(m.totals.peak_live_bytes),
        // Only above the kept peak: at it, the kept moment is the highest, whichever
        // phase each was credited to.
        run_peak_phase: (moment == Moment::Peak
            && live_bytes.is_some_and(|kept| m.totals.peak_live_bytes > kept))
        .then(|| run_peak_phase(report, at_phase.as_deref()))
        .flatten(),
        max_rss_bytes: m.totals.max_rss_bytes,
        rss_bytes: rss.0,
        rss_time_s: rss.1,
        time_s,
        phase: at_phase,
        blocks_of_phase: phase.map(str::to_owned),
        heap_interval: m.heap_interval,
        heap_intervals_changed: m.heap_intervals_changed,
        heap_started_late: m.heap_sampling_started_late,
        estimated_bytes,
        estimated_bytes_all_phases: all_bytes,
        estimated_bytes_se: variance.sqrt().round() as u64,
        categories,
        sites,
        more_sites,
        table_written: m.tables.iter().any(|t| t.file == moment_table(moment).file),
    }
}

/// The table of what heap sampling found live at `moment`.
fn moment_table(moment: Moment) -> &'static schema::Table {
    match moment {
        Moment::Peak => &schema::HEAP_PEAK,
        Moment::End => &schema::HEAP_END,
    }
}

/// Resident memory at the timeline's point nearest the kept peak, and that point's
/// time in seconds: (0, None) with no peak kept or no point, 0 where the point holds
/// none.
fn rss_near(memory: &Memory, peak_ns: Option<u64>) -> (u64, Option<f64>) {
    peak_ns
        .and_then(|t| memory.timeline.iter().min_by_key(|p| p.time_ns.abs_diff(t)))
        .filter(|p| p.rss_bytes > 0)
        .map_or((0, None), |p| (p.rss_bytes, Some(p.time_ns as f64 / 1e9)))
}

/// Live blocks and bytes per site and phase at the kept peak, for pprof's
/// `inuse_objects` and `inuse_space`.
pub fn in_use(memory: &Memory) -> Vec<export::InUse> {
    let mut by: std::collections::BTreeMap<(u64, &str), (u64, u64)> = Default::default();
    for r in &memory.peak {
        let v = by.entry((r.site_id, &r.phase)).or_default();
        v.0 = v.0.saturating_add(r.live_blocks_estimate);
        v.1 = v.1.saturating_add(r.live_bytes_estimate);
    }
    by.into_iter()
        .map(|((site_id, phase), (objects, bytes))| export::InUse {
            site_id,
            phase: phase.to_owned(),
            objects,
            bytes,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_at_the_point_nearest_the_moment() {
        let point = |ms: u64, rss_mib: u64| TimelinePoint {
            time_ns: ms * 1_000_000,
            rss_bytes: rss_mib << 20,
            ..Default::default()
        };
        let memory = Memory {
            timeline: vec![point(0, 10), point(10, 20), point(20, 30), point(30, 25)],
            ..Default::default()
        };
        assert_eq!(rss_near(&memory, Some(12_000_000)), (20 << 20, Some(0.01)));
        assert_eq!(rss_near(&memory, Some(17_000_000)), (30 << 20, Some(0.02)));
        assert_eq!(rss_near(&memory, Some(99_000_000)), (25 << 20, Some(0.03)));
        // No peak kept, or no timeline: unknown.
        assert_eq!(rss_near(&memory, None), (0, None));
        assert_eq!(rss_near(&Memory::default(), Some(12_000_000)), (0, None));
    }

    #[test]
    fn the_sampling_error_follows_from_the_blocks_sampled() {
        let row = |bytes: u64, blocks: u64, sampled: u64| HeapRow {
            site_id: 0,
            phase: "p".into(),
            size_class_bytes: 0,
            sampled_count: sampled,
            live_bytes_estimate: bytes,
            live_blocks_estimate: blocks,
            live_bytes_stddev: None,
        };
        // 4 MiB blocks at an interval of 1 MiB: p = 1 - (1 - 2^-20)^(2^22), about
        // 1 - e^-4; each of 4 sampled blocks adds s^2 (1 - p) / p^2.
        let s = (4u64 << 20) as f64;
        let p = 1.0 - (1.0 - 1.0 / (1u64 << 20) as f64).powf(s);
        let want = 4.0 * s * s * (1.0 - p) / (p * p);
        let got = row_variance(&row(16 << 20, 4, 4), 1 << 20, false);
        assert!((got / want - 1.0).abs() < 1e-9, "{got} {want}");
        // Intervals that changed during the run: the row's own share, its sampled
        // blocks over those they stand for (here 4 of 8: p = 1/2).
        let s8 = (2u64 << 20) as f64;
        let mixed = row_variance(&row(16 << 20, 8, 4), 1, true);
        assert!(
            (mixed / (4.0 * s8 * s8 * 0.5 / 0.25) - 1.0).abs() < 1e-9,
            "{mixed}"
        );
        assert_eq!(row_variance(&row(16 << 20, 4, 4), 1 << 20, true), 0.0);
        // A tracer that summed it block by block, each at its own share, says it:
        // taken as it is, intervals changed or not.
        let summed = HeapRow {
            live_bytes_stddev: Some(3000),
            ..row(16 << 20, 8, 4)
        };
        assert_eq!(row_variance(&summed, 1 << 20, false), 9e6);
        assert_eq!(row_variance(&summed, 1, true), 9e6);
        // Exact at an interval of 1, and unknown without one.
        assert_eq!(row_variance(&row(16 << 20, 4, 4), 1, false), 0.0);
        assert_eq!(row_variance(&row(16 << 20, 4, 4), 0, false), 0.0);
        // One sampled block far smaller than the interval stands for about
        // interval / s blocks, so its error is about the interval itself.
        let small = row_variance(&row(160 * 6554, 6554, 1), 1 << 20, false).sqrt();
        assert!((small / (1u64 << 20) as f64 - 1.0).abs() < 0.01, "{small}");
        // The same from the bytes alone, as a report that sampled none of them would
        // have estimated them: about bytes times the interval for small blocks.
        let bytes = 160.0 * 6554.0;
        let none = variance_of(bytes, 160.0, 1 << 20);
        assert!(
            (none / (bytes * (1u64 << 20) as f64) - 1.0).abs() < 0.01,
            "{none}"
        );
        // Where the estimate is exactly k s / p, both say the same.
        let p = 1.0 - (1.0 - 1.0 / (1u64 << 20) as f64).powf(s);
        let of = variance_of(4.0 * s / p, s, 1 << 20);
        assert!((of / want - 1.0).abs() < 1e-9, "{of} {want}");
        assert_eq!(variance_of(bytes, 160.0, 1), 0.0);
        assert_eq!(variance_of(bytes, 160.0, 0), 0.0);
    }
}
