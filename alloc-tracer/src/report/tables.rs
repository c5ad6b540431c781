//! The report's parquet tables, one function each, from a snapshot (the columns are
//! those of `alloc_tracer_format::schema`, documented in `docs/report-schema.md`).

use super::parquet::{self, Values};
use super::schema;
use super::snapshot::{Snapshot, user_frames};
use crate::Error;
use crate::hot::log_linear::{self, LIFETIME_SUB_BITS, SIZE_SUB_BITS};
use crate::hot::size_class::{NUM_CLASSES, class_bytes};
use crate::lifetimes::Lifetimes;
use crate::registry::{Counts, SiteCounts};
use crate::symbolize::Frame;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

/// What the tables of one report share: the snapshot, site ids, phase names and the
/// weights of sampled figures.
pub struct Context<'s> {
    /// What was recorded.
    pub snap: &'s Snapshot,
    /// Site id of every distinct stack.
    pub site_ids: &'s HashMap<&'s [usize], u64>,
    /// Each sampled stack stands for this many allocations.
    pub weight: u64,
    /// Each followed block stands for this many blocks.
    pub lifetime_weight: u64,
}

impl<'s> Context<'s> {
    /// The name of phase `id`.
    pub fn phase_name(&self, id: usize) -> Cow<'s, str> {
        match self.snap.phases.get(id) {
            Some(p) => Cow::Borrowed(&p.name),
            None => Cow::Owned(format!("phase {id}")),
        }
    }
}

/// `sites.parquet`: one row per site, phase and size class.
pub fn write_sites(dir: &Path, cx: &Context<'_>) -> Result<usize, Error> {
    let (snap, site_ids, weight) = (cx.snap, cx.site_ids, cx.weight);
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
        cols.phase.push(cx.phase_name(phase));
        cols.class.push(cb);
        cols.allocs.push(c.allocs * weight);
        cols.reallocs.push(c.reallocs * weight);
        cols.requested.push(c.bytes_requested * weight);
        cols.allocated.push(c.bytes_allocated * weight);
        cols.temporaries.push(c.temporaries * weight);
        cols.sampled.push(c.allocs + c.reallocs);
        let (freed, live, dropped, live_bytes) =
            life.map_or((0, 0, 0, 0), |l| (l.freed, l.live, l.dropped, l.live_bytes));
        cols.followed.push(freed + live + dropped);
        cols.freed.push(freed);
        cols.median.push(life.and_then(median_lifetime));
        cols.mean.push(
            life.filter(|l| l.freed > 0)
                .map(|l| (l.total_ns / l.freed as u128) as u64),
        );
        cols.live_bytes.push(live_bytes * cx.lifetime_weight);
    }
    parquet::write(
        &dir.join(schema::SITES.file),
        &schema::SITES,
        cols.into_values(),
    )?;
    Ok(n)
}

#[derive(Default)]
struct SiteColumns<'s> {
    site_id: Vec<u64>,
    phase: Vec<Cow<'s, str>>,
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

impl<'s> SiteColumns<'s> {
    fn with_capacity(_n: usize) -> Self {
        SiteColumns::default()
    }

    fn into_values(self) -> Vec<Values<'s>> {
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
pub fn bucket_high(b: usize, sub_bits: u32) -> u64 {
    if b + 1 >= log_linear::num_buckets(sub_bits, 64) {
        u64::MAX
    } else {
        log_linear::bucket_low(b + 1, sub_bits) - 1
    }
}

/// `frames.parquet`: the symbolized frames of every stack, innermost first.
pub fn write_frames(
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
            function.push(Cow::Borrowed(f.function.as_str()));
            file.push(f.file.as_deref().map(Cow::Borrowed));
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

/// `size_classes.parquet`: allocations per phase and size class.
pub fn write_size_classes(dir: &Path, cx: &Context<'_>) -> Result<usize, Error> {
    let c: &Counts = &cx.snap.counts;
    let (mut phase, mut class, mut allocs) = (vec![], vec![], vec![]);
    for (p, per_class) in c.classes.iter().enumerate() {
        for (k, &n) in per_class.iter().enumerate().take(NUM_CLASSES) {
            if n > 0 {
                phase.push(cx.phase_name(p));
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

/// `requested_sizes.parquet`: allocations per requested-size bucket.
pub fn write_requested(dir: &Path, c: &Counts) -> Result<usize, Error> {
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

/// `phases.parquet`: totals and wall time per phase. Temporaries are weighted by
/// `cx.weight` (`sample_interval`; 1 in `sites` mode, where every block's is
/// counted).
pub fn write_phases(dir: &Path, cx: &Context<'_>) -> Result<usize, Error> {
    let (snap, weight) = (cx.snap, cx.weight);
    let start_ns = crate::hot::clock::start_ns();
    let mut cols: Vec<Vec<u64>> = vec![vec![]; 8];
    let (mut id, mut name, mut first, mut wall) = (vec![], vec![], vec![], vec![]);
    for (p, t) in snap.counts.phases.iter().enumerate() {
        let time = snap.phases.get(p);
        if time.is_none() && t.allocs + t.frees + t.reallocs == 0 {
            continue;
        }
        id.push(p as u32);
        name.push(cx.phase_name(p));
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
    let peaks: Vec<i64> = id.iter().map(|&p| snap.phase_peaks[p as usize]).collect();
    let mut values = vec![Values::U32(id), Values::Str(name)];
    let mut cols = cols.into_iter();
    values.push(Values::U64(cols.next().unwrap_or_default()));
    values.push(Values::OptU64(first));
    values.push(Values::U64(wall));
    values.extend(cols.map(Values::U64));
    values.push(Values::I64(peaks));
    parquet::write(&dir.join(schema::PHASES.file), &schema::PHASES, values)?;
    Ok(n)
}

/// `lifetimes.parquet`: lifetime histograms of followed blocks per site.
pub fn write_lifetimes(dir: &Path, cx: &Context<'_>) -> Result<usize, Error> {
    let (snap, site_ids) = (cx.snap, cx.site_ids);
    let mut rows = vec![];
    for (id, l) in &snap.lifetimes {
        // Every stack in the site tables has a site id; one whose site was folded
        // past the tracer's cap is not there, and its lifetimes are left out.
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
        phase.push(cx.phase_name(p));
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
