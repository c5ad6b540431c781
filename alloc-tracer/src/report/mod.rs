//! Cold path: a snapshot of every counter, symbolized and written as a report
//! directory (`docs/report-schema.md`).

pub mod parquet;
pub mod summary;

pub use alloc_tracer_format::schema;

use crate::Error;
use crate::config::{Mode, Settings};
use crate::hot::log_linear::{self, LIFETIME_SUB_BITS, SIZE_SUB_BITS};
use crate::hot::size_class::{NUM_CLASSES, class_bytes};
use crate::lifetimes::Lifetimes;
use crate::registry::{Counts, SiteCounts, SiteId};
use crate::symbolize::{self, Frame};
use parquet::Values;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub use summary::{ReportSummary, TopSite};

/// Sites listed in a [`ReportSummary`].
const SUMMARY_SITES: usize = 10;

/// Totals over all phases, as in the manifest.
#[derive(Serialize, Clone, Debug, Default)]
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
}

#[derive(Serialize)]
struct Manifest {
    schema_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    command_line: Vec<String>,
    host: String,
    cpu: String,
    cores: usize,
    pid: u32,
    start_unix_s: f64,
    end_unix_s: f64,
    duration_s: f64,
    mode: String,
    stack_depth: usize,
    /// Each sampled stack stands for this many allocations (1 in `sites` mode).
    sample_interval: u64,
    /// Each followed block stands for this many blocks (0: none followed).
    lifetime_interval: u64,
    weights: &'static str,
    totals: Totals,
    requested_bytes_percentiles: RequestedPercentiles,
    tracer: TracerOwn,
    dropped: Dropped,
    threads: u64,
    tables: Vec<TableInfo>,
}

#[derive(Serialize, Default)]
struct RequestedPercentiles {
    p50: u64,
    p90: u64,
    p99: u64,
    max: u64,
}

#[derive(Serialize)]
struct TracerOwn {
    alloc_count: u64,
    bytes_requested: u64,
}

#[derive(Serialize)]
struct Dropped {
    /// Allocations after a thread's state was merged at exit (counted only here).
    late_alloc_count: u64,
    /// Frees after a thread's state was merged at exit (counted only here).
    late_free_count: u64,
    /// Distinct stacks cut at `stack_depth` frames.
    stacks_at_depth_limit: usize,
    /// Phase names beyond the first 15, counted together.
    phases_merged: bool,
}

#[derive(Serialize)]
struct TableInfo {
    file: &'static str,
    rows: usize,
}

/// Everything read from the recorder for one report.
struct Snapshot {
    settings: Settings,
    counts: Box<Counts>,
    sites: HashMap<SiteId, SiteCounts>,
    lifetimes: HashMap<SiteId, Lifetimes>,
    phases: Vec<crate::phase::PhaseTime>,
}

/// Writes a report directory at `dir`, atomically: files go to a temporary sibling
/// directory that is renamed into place. An existing report at `dir` is replaced;
/// an existing directory that is not a report is left alone and is an error.
pub fn write(dir: &Path) -> Result<ReportSummary, Error> {
    crate::hot::thread::guarded(|| {
        let sites = crate::registry::sites();
        let lifetimes = crate::lifetimes::snapshot();
        let symbols = symbolize::resolve_all(
            sites
                .keys()
                .chain(lifetimes.keys())
                .flat_map(|id| id.frames.iter().copied()),
        );
        let snap = Snapshot {
            settings: Settings::current(),
            counts: Box::new(crate::registry::counts()),
            sites: without_tracer_frames(sites, &symbols, |a, b| {
                let mut sum = *a;
                sum.allocs += b.allocs;
                sum.reallocs += b.reallocs;
                sum.bytes_requested += b.bytes_requested;
                sum.bytes_allocated += b.bytes_allocated;
                sum.temporaries += b.temporaries;
                sum
            }),
            lifetimes: without_tracer_frames(lifetimes, &symbols, |a, b| {
                let mut sum = a.clone();
                sum.freed += b.freed;
                sum.total_ns += b.total_ns;
                sum.live += b.live;
                sum.live_bytes += b.live_bytes;
                if sum.buckets.len() < b.buckets.len() {
                    sum.buckets.resize(b.buckets.len(), 0);
                }
                for (x, y) in sum.buckets.iter_mut().zip(&b.buckets) {
                    *x += y;
                }
                sum
            }),
            phases: crate::phase::phases(),
        };
        write_snapshot(dir, &snap, &symbols)
    })
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Drops the tracer's own return addresses from the start of every stack (see
/// `hot::OWN_FRAMES`), merging stacks that then coincide. The next address usually
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
        let (phase, class, _) = crate::hot::site_table::unpack_meta(id.meta);
        let frames: Box<[usize]> = id.frames[own..].into();
        let key = SiteId {
            meta: crate::hot::site_table::pack_meta(phase, class, frames.len()),
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
fn user_frames<'s>(
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

fn write_snapshot(
    dir: &Path,
    snap: &Snapshot,
    symbols: &HashMap<usize, Vec<Frame>>,
) -> Result<ReportSummary, Error> {
    let end_unix = crate::clock::unix_seconds();
    if dir.exists() && !dir.join(schema::MANIFEST).exists() {
        let not_empty = std::fs::read_dir(dir).map_err(io(dir))?.next().is_some();
        if not_empty {
            return Err(Error::Io {
                path: dir.to_owned(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "exists and is not a report directory; not replacing it",
                ),
            });
        }
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(io(&parent))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
    }
    std::fs::create_dir(&tmp).map_err(io(&tmp))?;

    let weight = match snap.settings.mode {
        Mode::Sample(n) => n,
        _ => 1,
    };
    let lifetime_weight = match snap.settings.mode {
        Mode::Sample(n) => n,
        Mode::Sites => snap.settings.lifetime_interval,
        _ => 0,
    };

    // Site ids: one per distinct stack, biggest first, ties broken by the addresses
    // so that ids are stable for a given snapshot.
    let mut stack_allocs: HashMap<&[usize], u64> = HashMap::new();
    for (id, c) in &snap.sites {
        *stack_allocs.entry(&id.frames).or_default() += c.allocs + c.reallocs;
    }
    let mut stacks: Vec<(&[usize], u64)> = stack_allocs.into_iter().collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let site_ids: HashMap<&[usize], u64> = stacks
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (*s, i as u64))
        .collect();

    let phase_name = |id: usize| -> String {
        snap.phases
            .get(id)
            .map(|p| p.name.clone())
            .unwrap_or_else(|| format!("phase {id}"))
    };

    let mut tables = Vec::new();
    let sites_rows = write_sites(&tmp, snap, &site_ids, weight, lifetime_weight, &phase_name)?;
    tables.push(TableInfo {
        file: schema::SITES.file,
        rows: sites_rows,
    });
    let frames_rows = write_frames(&tmp, &stacks, &site_ids, symbols)?;
    tables.push(TableInfo {
        file: schema::FRAMES.file,
        rows: frames_rows,
    });
    let rows = write_size_classes(&tmp, &snap.counts, &phase_name)?;
    tables.push(TableInfo {
        file: schema::SIZE_CLASSES.file,
        rows,
    });
    let rows = write_requested(&tmp, &snap.counts)?;
    tables.push(TableInfo {
        file: schema::REQUESTED_SIZES.file,
        rows,
    });
    let rows = write_phases(&tmp, snap, &phase_name, weight)?;
    tables.push(TableInfo {
        file: schema::PHASES.file,
        rows,
    });
    let rows = write_lifetimes(&tmp, snap, &site_ids, &phase_name)?;
    tables.push(TableInfo {
        file: schema::LIFETIMES.file,
        rows,
    });

    let c = &snap.counts;
    let totals = Totals {
        alloc_count: c.total(|p| p.allocs),
        free_count: c.total(|p| p.frees),
        realloc_count: c.total(|p| p.reallocs),
        bytes_requested: c.total(|p| p.bytes_requested),
        bytes_allocated: c.total(|p| p.bytes_allocated),
        bytes_freed: c.total(|p| p.bytes_freed),
        temporary_count: c.total(|p| p.temporaries) * weight,
        sampled_count: c.total(|p| p.sampled),
        live_bytes_end: c.total(|p| p.bytes_allocated) as i64 - c.total(|p| p.bytes_freed) as i64,
        peak_live_bytes: crate::hot::PEAK_BYTES.load(std::sync::atomic::Ordering::Relaxed),
        peak_live_bytes_error_bytes: c.threads * crate::hot::LIVE_PUBLISH_BYTES as u64,
    };
    let start_ns = crate::clock::start_ns();
    let duration_s = crate::clock::now_ns().saturating_sub(start_ns) as f64 / 1e9;
    let manifest = Manifest {
        schema_version: schema::SCHEMA_VERSION,
        tool: "alloc-tracer",
        tool_version: env!("CARGO_PKG_VERSION"),
        command_line: std::env::args().collect(),
        host: alloc_tracer_format::host::name().unwrap_or_default(),
        cpu: alloc_tracer_format::host::cpu_model().unwrap_or_default(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        pid: std::process::id(),
        start_unix_s: end_unix - duration_s,
        end_unix_s: end_unix,
        duration_s,
        mode: snap.settings.mode.name(),
        stack_depth: snap.settings.depth,
        sample_interval: weight,
        lifetime_interval: lifetime_weight,
        weights: "alloc_count, realloc_count, bytes_* and temporary_count in sites.parquet, and temporary_count in phases.parquet and these totals, are sampled counts x sample_interval; followed_* counts are raw, live_bytes_estimate is scaled by lifetime_interval",
        requested_bytes_percentiles: requested_percentiles(c),
        tracer: TracerOwn {
            alloc_count: c.own_allocs,
            bytes_requested: c.own_bytes,
        },
        dropped: Dropped {
            late_alloc_count: c.late_allocs,
            late_free_count: c.late_frees,
            stacks_at_depth_limit: stacks
                .iter()
                .filter(|(s, _)| s.len() >= snap.settings.depth)
                .count(),
            phases_merged: snap.phases.len() >= crate::hot::control::MAX_PHASES,
        },
        threads: c.threads,
        totals,
        tables,
    };
    let manifest_path = tmp.join(schema::MANIFEST);
    let json = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
    std::fs::write(&manifest_path, json).map_err(io(&manifest_path))?;

    // Into place: move an old report aside first, since rename cannot replace a
    // non-empty directory.
    let old = parent.join(format!(".{name}.old-{}", std::process::id()));
    if dir.exists() {
        std::fs::rename(dir, &old).map_err(io(dir))?;
    }
    std::fs::rename(&tmp, dir).map_err(io(dir))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    let top = stacks
        .iter()
        .take(SUMMARY_SITES)
        .map(|(stack, allocs)| {
            let frames: Vec<Frame> = user_frames(stack, symbols)
                .into_iter()
                .map(|(_, _, f)| f.clone())
                .collect();
            let name = summary::site_name(&frames);
            let of_stack = snap.sites.iter().filter(|(id, _)| &*id.frames == *stack);
            TopSite {
                site_id: site_ids[stack],
                name,
                allocs: allocs * weight,
                bytes_requested: of_stack
                    .clone()
                    .map(|(_, c)| c.bytes_requested)
                    .sum::<u64>()
                    * weight,
                temporaries: of_stack.map(|(_, c)| c.temporaries).sum::<u64>() * weight,
            }
        })
        .collect();
    Ok(ReportSummary {
        dir: dir.to_owned(),
        mode: manifest.mode.clone(),
        stacks: stacks.len(),
        site_rows: sites_rows,
        allocs: manifest.totals.alloc_count,
        bytes_requested: manifest.totals.bytes_requested,
        temporaries: manifest.totals.temporary_count,
        top,
    })
}

fn write_sites(
    dir: &Path,
    snap: &Snapshot,
    site_ids: &HashMap<&[usize], u64>,
    weight: u64,
    lifetime_weight: u64,
    phase_name: &dyn Fn(usize) -> String,
) -> Result<usize, Error> {
    let mut rows: Vec<(u64, usize, usize, &SiteCounts, Option<&Lifetimes>)> = snap
        .sites
        .iter()
        .map(|(id, c)| {
            (
                site_ids[&*id.frames],
                id.phase(),
                id.class(),
                c,
                snap.lifetimes.get(id),
            )
        })
        .collect();
    rows.sort_by_key(|r| (r.0, r.1, r.2));
    let n = rows.len();
    let mut cols = SiteColumns::with_capacity(n);
    for (site, phase, class, c, life) in rows {
        let cb = class_bytes(class) as u64;
        cols.site_id.push(site);
        cols.phase.push(phase_name(phase));
        cols.class.push(cb);
        cols.allocs.push(c.allocs * weight);
        cols.reallocs.push(c.reallocs * weight);
        cols.requested.push(c.bytes_requested * weight);
        cols.allocated.push(c.bytes_allocated * weight);
        cols.temporaries.push(c.temporaries * weight);
        cols.sampled.push(c.allocs + c.reallocs);
        let (freed, live, live_bytes) = life.map_or((0, 0, 0), |l| (l.freed, l.live, l.live_bytes));
        cols.followed.push(freed + live);
        cols.freed.push(freed);
        cols.median.push(life.and_then(median_lifetime));
        cols.mean.push(
            life.filter(|l| l.freed > 0)
                .map(|l| (l.total_ns / l.freed as u128) as u64),
        );
        cols.live_bytes.push(live_bytes * lifetime_weight);
    }
    parquet::write(
        &dir.join(schema::SITES.file),
        &schema::SITES,
        cols.into_values(),
    )?;
    Ok(n)
}

#[derive(Default)]
struct SiteColumns {
    site_id: Vec<u64>,
    phase: Vec<String>,
    class: Vec<u64>,
    allocs: Vec<u64>,
    reallocs: Vec<u64>,
    requested: Vec<u64>,
    allocated: Vec<u64>,
    temporaries: Vec<u64>,
    sampled: Vec<u64>,
    followed: Vec<u64>,
    freed: Vec<u64>,
    median: Vec<Option<u64>>,
    mean: Vec<Option<u64>>,
    live_bytes: Vec<u64>,
}

impl SiteColumns {
    fn with_capacity(_n: usize) -> Self {
        SiteColumns::default()
    }

    fn into_values(self) -> Vec<Values> {
        vec![
            Values::U64(self.site_id),
            Values::Str(self.phase),
            Values::U64(self.class),
            Values::U64(self.allocs),
            Values::U64(self.reallocs),
            Values::U64(self.requested),
            Values::U64(self.allocated),
            Values::U64(self.temporaries),
            Values::U64(self.sampled),
            Values::U64(self.followed),
            Values::U64(self.freed),
            Values::OptU64(self.median),
            Values::OptU64(self.mean),
            Values::U64(self.live_bytes),
        ]
    }
}

/// Midpoint of the lifetime bucket holding the median freed block.
fn median_lifetime(l: &Lifetimes) -> Option<u64> {
    if l.freed == 0 {
        return None;
    }
    let half = l.freed.div_ceil(2);
    let mut seen = 0;
    for (b, &n) in l.buckets.iter().enumerate() {
        seen += n;
        if seen >= half {
            let low = log_linear::bucket_low(b, LIFETIME_SUB_BITS);
            let high = bucket_high(b, LIFETIME_SUB_BITS);
            return Some(low + (high - low) / 2);
        }
    }
    None
}

/// The largest value in bucket `b`.
fn bucket_high(b: usize, sub_bits: u32) -> u64 {
    if b + 1 >= log_linear::num_buckets(sub_bits, 64) {
        u64::MAX
    } else {
        log_linear::bucket_low(b + 1, sub_bits) - 1
    }
}

fn write_frames(
    dir: &Path,
    stacks: &[(&[usize], u64)],
    site_ids: &HashMap<&[usize], u64>,
    symbols: &HashMap<usize, Vec<Frame>>,
) -> Result<usize, Error> {
    let (mut site, mut index, mut stack_index, mut address) = (vec![], vec![], vec![], vec![]);
    let (mut function, mut file, mut line, mut inlined) = (vec![], vec![], vec![], vec![]);
    for (stack, _) in stacks {
        let id = site_ids[stack];
        for (i, (si, a, f)) in user_frames(stack, symbols).into_iter().enumerate() {
            site.push(id);
            index.push(i as u32);
            stack_index.push(si as u32);
            address.push(a as u64);
            function.push(f.function.clone());
            file.push(f.file.clone());
            line.push(f.line);
            inlined.push(f.inlined);
        }
    }
    let n = site.len();
    parquet::write(
        &dir.join(schema::FRAMES.file),
        &schema::FRAMES,
        vec![
            Values::U64(site),
            Values::U32(index),
            Values::U32(stack_index),
            Values::U64(address),
            Values::Str(function),
            Values::OptStr(file),
            Values::OptU32(line),
            Values::Bool(inlined),
        ],
    )?;
    Ok(n)
}

fn write_size_classes(
    dir: &Path,
    c: &Counts,
    phase_name: &dyn Fn(usize) -> String,
) -> Result<usize, Error> {
    let (mut phase, mut class, mut allocs) = (vec![], vec![], vec![]);
    for (p, per_class) in c.classes.iter().enumerate() {
        for (k, &n) in per_class.iter().enumerate().take(NUM_CLASSES) {
            if n > 0 {
                phase.push(phase_name(p));
                class.push(class_bytes(k) as u64);
                allocs.push(n);
            }
        }
    }
    let n = phase.len();
    parquet::write(
        &dir.join(schema::SIZE_CLASSES.file),
        &schema::SIZE_CLASSES,
        vec![Values::Str(phase), Values::U64(class), Values::U64(allocs)],
    )?;
    Ok(n)
}

fn write_requested(dir: &Path, c: &Counts) -> Result<usize, Error> {
    let (mut low, mut high, mut allocs) = (vec![], vec![], vec![]);
    for (b, &n) in c.requested.iter().enumerate() {
        if n > 0 {
            low.push(log_linear::bucket_low(b, SIZE_SUB_BITS));
            high.push(if b + 1 == c.requested.len() {
                u64::MAX
            } else {
                log_linear::bucket_low(b + 1, SIZE_SUB_BITS) - 1
            });
            allocs.push(n);
        }
    }
    let n = low.len();
    parquet::write(
        &dir.join(schema::REQUESTED_SIZES.file),
        &schema::REQUESTED_SIZES,
        vec![Values::U64(low), Values::U64(high), Values::U64(allocs)],
    )?;
    Ok(n)
}

/// Percentiles of requested sizes from an HDR histogram built from the buckets.
fn requested_percentiles(c: &Counts) -> RequestedPercentiles {
    let Ok(mut h) = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 48, 2) else {
        return RequestedPercentiles::default();
    };
    for (b, &n) in c.requested.iter().enumerate() {
        if n > 0 {
            let v = log_linear::bucket_low(b, SIZE_SUB_BITS).max(1);
            h.saturating_record_n(v, n);
        }
    }
    if h.is_empty() {
        return RequestedPercentiles::default();
    }
    RequestedPercentiles {
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        max: h.max(),
    }
}

/// `weight`: what a sampled temporary stands for (`sample_interval`; 1 in `sites`
/// mode, where every block's is counted).
fn write_phases(
    dir: &Path,
    snap: &Snapshot,
    phase_name: &dyn Fn(usize) -> String,
    weight: u64,
) -> Result<usize, Error> {
    let start_ns = crate::clock::start_ns();
    let mut cols: Vec<Vec<u64>> = vec![vec![]; 8];
    let (mut id, mut name, mut first, mut wall) = (vec![], vec![], vec![], vec![]);
    for (p, t) in snap.counts.phases.iter().enumerate() {
        let time = snap.phases.get(p);
        if time.is_none() && t.allocs + t.frees + t.reallocs == 0 {
            continue;
        }
        id.push(p as u32);
        name.push(phase_name(p));
        first.push(
            time.and_then(|t| t.first_start_ns)
                .map(|s| s.saturating_sub(start_ns)),
        );
        wall.push(time.map_or(0, |t| t.total_ns));
        for (col, v) in cols.iter_mut().zip([
            time.map_or(0, |t| t.entries),
            t.allocs,
            t.frees,
            t.reallocs,
            t.bytes_requested,
            t.bytes_allocated,
            t.bytes_freed,
            t.temporaries * weight,
        ]) {
            col.push(v);
        }
    }
    let n = id.len();
    let mut values = vec![Values::U32(id), Values::Str(name)];
    let mut cols = cols.into_iter();
    values.push(Values::U64(cols.next().unwrap_or_default()));
    values.push(Values::OptU64(first));
    values.push(Values::U64(wall));
    values.extend(cols.map(Values::U64));
    parquet::write(&dir.join(schema::PHASES.file), &schema::PHASES, values)?;
    Ok(n)
}

fn write_lifetimes(
    dir: &Path,
    snap: &Snapshot,
    site_ids: &HashMap<&[usize], u64>,
    phase_name: &dyn Fn(usize) -> String,
) -> Result<usize, Error> {
    let mut rows = vec![];
    for (id, l) in &snap.lifetimes {
        // A followed block's stack is in the site table unless the table was
        // flushed and cleared meanwhile; site ids exist for every stack seen.
        let Some(&site) = site_ids.get(&*id.frames) else {
            continue;
        };
        for (b, &n) in l.buckets.iter().enumerate() {
            if n > 0 {
                rows.push((site, id.phase(), id.class(), b, n));
            }
        }
    }
    rows.sort();
    let n = rows.len();
    let mut cols: [Vec<u64>; 5] = Default::default();
    let mut phase = vec![];
    for (site, p, class, b, count) in rows {
        phase.push(phase_name(p));
        for (col, v) in cols.iter_mut().zip([
            site,
            class_bytes(class) as u64,
            log_linear::bucket_low(b, LIFETIME_SUB_BITS),
            bucket_high(b, LIFETIME_SUB_BITS),
            count,
        ]) {
            col.push(v);
        }
    }
    let [site, class, low, high, count] = cols;
    parquet::write(
        &dir.join(schema::LIFETIMES.file),
        &schema::LIFETIMES,
        vec![
            Values::U64(site),
            Values::Str(phase),
            Values::U64(class),
            Values::U64(low),
            Values::U64(high),
            Values::U64(count),
        ],
    )?;
    Ok(n)
}
