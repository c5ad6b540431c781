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

/// What the tables of one report share: the snapshot, site ids and phase names.
/// (Site counts are weighted as recorded: see `registry::SiteCounts`.)
pub struct Context<'s> {
    /// What was recorded.
    pub snap: &'s Snapshot,
    /// Site id of every distinct stack.
    pub site_ids: &'s HashMap<&'s [usize], u64>,
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
    let (snap, site_ids) = (cx.snap, cx.site_ids);
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
        cols.allocs.push(c.allocs);
        cols.reallocs.push(c.reallocs);
        cols.requested.push(c.bytes_requested);
        cols.allocated.push(c.bytes_allocated);
        cols.temporaries.push(c.temporaries);
        cols.sampled.push(c.stacks());
        let (freed, live, dropped, live_bytes) =
            life.map_or((0, 0, 0, 0), |l| (l.freed, l.live, l.dropped, l.live_bytes));
        cols.followed.push(freed + live + dropped);
        cols.freed.push(freed);
        cols.median.push(life.and_then(median_lifetime));
        cols.mean.push(
            life.filter(|l| l.freed > 0)
                .map(|l| (l.total_ns / l.freed as u128) as u64),
        );
        cols.live_bytes.push(live_bytes);
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

/// Rows of `frames.parquet` held before they are written as a row group: a program
/// of many deep stacks has millions of frame rows (a rayon pool's recursion makes
/// a stack per path), about 80 bytes each while held.
const FRAMES_GROUP_ROWS: usize = 1 << 18;

/// `frames.parquet`: the symbolized frames of every stack, innermost first, in row
/// groups of about [`FRAMES_GROUP_ROWS`] rows.
pub fn write_frames(
    dir: &Path,
    stacks: &[(&[usize], u64)],
    site_ids: &HashMap<&[usize], u64>,
    symbols: &HashMap<usize, Vec<Frame>>,
) -> Result<usize, Error> {
    write_frames_grouped(dir, stacks, site_ids, symbols, FRAMES_GROUP_ROWS)
}

fn write_frames_grouped(
    dir: &Path,
    stacks: &[(&[usize], u64)],
    site_ids: &HashMap<&[usize], u64>,
    symbols: &HashMap<usize, Vec<Frame>>,
    group_rows: usize,
) -> Result<usize, Error> {
    let path = dir.join(schema::FRAMES.file);
    let mut file = parquet::TableFile::create(&path, &schema::FRAMES)?;
    // Room for a group (a stack's rows, at most a few hundred, may pass it), or for
    // every stack at about 64 rows when they are fewer: growing the columns row by
    // row copied them again and again.
    let room = group_rows.min(stacks.len().saturating_mul(64)) + 512;
    let mut rows = FrameRows::with_capacity(room);
    let mut written = 0;
    for (stack, _) in stacks {
        let id = site_ids[stack];
        for (i, (si, a, f)) in user_frames(stack, symbols).into_iter().enumerate() {
            rows.site.push(id);
            rows.index.push(i as u32);
            rows.stack_index.push(si as u32);
            rows.address.push(a as u64);
            rows.function.push(Cow::Borrowed(f.function.as_str()));
            rows.file.push(f.file.as_deref().map(Cow::Borrowed));
            rows.line.push(f.line);
            rows.inlined.push(f.inlined);
        }
        if rows.site.len() >= group_rows {
            written += rows.site.len();
            // The next group's room made after this one is written and freed: one
            // group held at a time.
            let full = std::mem::replace(&mut rows, FrameRows::with_capacity(0));
            file.write_group(full.into_values())?;
            rows = FrameRows::with_capacity(room);
        }
    }
    // The last rows; a table of none still gets its (empty) group.
    if !rows.site.is_empty() || written == 0 {
        written += rows.site.len();
        file.write_group(rows.into_values())?;
    }
    file.close()?;
    Ok(written)
}

/// The columns of `frames.parquet` for one row group.
struct FrameRows<'a> {
    site: Vec<u64>,
    index: Vec<u32>,
    stack_index: Vec<u32>,
    address: Vec<u64>,
    function: Vec<Cow<'a, str>>,
    file: Vec<Option<Cow<'a, str>>>,
    line: Vec<Option<u32>>,
    inlined: Vec<bool>,
}

impl<'a> FrameRows<'a> {
    fn with_capacity(n: usize) -> FrameRows<'a> {
        FrameRows {
            site: Vec::with_capacity(n),
            index: Vec::with_capacity(n),
            stack_index: Vec::with_capacity(n),
            address: Vec::with_capacity(n),
            function: Vec::with_capacity(n),
            file: Vec::with_capacity(n),
            line: Vec::with_capacity(n),
            inlined: Vec::with_capacity(n),
        }
    }

    fn into_values(self) -> Vec<Values<'a>> {
        vec![
            Values::U64(self.site),
            Values::U32(self.index),
            Values::U32(self.stack_index),
            Values::U64(self.address),
            Values::Str(self.function),
            Values::OptStr(self.file),
            Values::OptU32(self.line),
            Values::Bool(self.inlined),
        ]
    }
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

/// `phases.parquet`: totals and wall time per phase. Temporaries were weighted as
/// they were counted (each as many as its block stands for: N in `sample:N`, 1 in
/// `sites` mode and in the classes `sample:N` records whole).
pub fn write_phases(dir: &Path, cx: &Context<'_>) -> Result<usize, Error> {
    let snap = cx.snap;
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
            t.temporaries,
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

#[cfg(test)]
mod tests {
    use super::*;
    use ::parquet::file::reader::{FileReader, SerializedFileReader};
    use ::parquet::record::Field;

    #[test]
    fn frames_in_row_groups_read_back_as_one_table() {
        // Three stacks of 2, 3 and 1 addresses; the second address has an inlined
        // frame, so the stacks have 3, 4 and 1 rows. Groups close at 3 rows or more.
        let frame = |name: &str, inlined| Frame {
            function: name.to_owned(),
            file: (name != "c").then(|| format!("{name}.rs")),
            line: Some(name.len() as u32),
            inlined,
        };
        let symbols: HashMap<usize, Vec<Frame>> = [
            (1, vec![frame("a", false)]),
            (2, vec![frame("b_inlined", true), frame("b", false)]),
            (3, vec![frame("c", false)]),
        ]
        .into_iter()
        .collect();
        let (s1, s2, s3): (&[usize], &[usize], &[usize]) = (&[1, 2], &[2, 1, 3], &[3]);
        let stacks = [(s1, 0), (s2, 0), (s3, 0)];
        let site_ids: HashMap<&[usize], u64> = [(s1, 10), (s2, 20), (s3, 30)].into_iter().collect();
        let dir = std::env::temp_dir().join(format!("alloc-tracer-frames-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let n = write_frames_grouped(&dir, &stacks, &site_ids, &symbols, 3).unwrap();
        let reader =
            SerializedFileReader::new(std::fs::File::open(dir.join(schema::FRAMES.file)).unwrap())
                .unwrap();
        let groups = reader.metadata().num_row_groups();
        let rows: Vec<(u64, u32, u32, String)> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| {
                let r = r.unwrap();
                let col = |name: &str| {
                    r.get_column_iter()
                        .find(|(n, _)| n.as_str() == name)
                        .map(|(_, v)| v.clone())
                        .unwrap()
                };
                let (Field::ULong(site), Field::UInt(index), Field::UInt(si), Field::Str(f)) = (
                    col("site_id"),
                    col("frame_index"),
                    col("stack_index"),
                    col("function"),
                ) else {
                    panic!("column types of {r:?}")
                };
                (site, index, si, f)
            })
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(n, 8);
        assert_eq!(groups, 3);
        let want = [
            (10, 0, 0, "a"),
            (10, 1, 1, "b_inlined"),
            (10, 2, 1, "b"),
            (20, 0, 0, "b_inlined"),
            (20, 1, 0, "b"),
            (20, 2, 1, "a"),
            (20, 3, 2, "c"),
            (30, 0, 0, "c"),
        ];
        let got: Vec<_> = rows
            .iter()
            .map(|(a, b, c, d)| (*a, *b, *c, d.as_str()))
            .collect();
        assert_eq!(got, want);
    }
}
