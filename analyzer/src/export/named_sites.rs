//! The named-sites table (parquet): what the analyzer derives from each site's frames
//! (name, callers, category, stack key, job key) as columns, so that readers in other
//! languages use these rules instead of porting them.

use crate::categories::{self, Category};
use crate::naming;
use crate::rank::frames_of;
use crate::report::{FrameRow, Report};
use polars::prelude::{Column, DataFrame, ParquetCompression, ParquetWriter};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

/// One row of the named-sites table: a site's counts within one phase (summed over
/// size classes), with what the analyzer derives from its frames. The columns are
/// documented in docs/report-schema.md ("Derived: the named-sites table").
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NamedSite {
    /// `site_id` in the report.
    pub site_id: u64,
    /// Phase.
    pub phase: String,
    /// First frame outside the allocator and std (see `alloc_tracer_format::site`).
    pub name: String,
    /// Where that frame was reached from.
    pub callers: String,
    /// What tells the site apart from the table's other sites whose name and callers
    /// read the same (see `alloc_tracer_format::site::distinctions`); empty when none do.
    pub distinction: String,
    /// Category: the first rule that claims the site, or the unmatched.
    pub category: String,
    /// Position of that rule among the rules (the unmatched: the number of rules), so
    /// that readers can list categories in the analyzer's order.
    pub category_index: u32,
    /// What identifies the site across reports and builds.
    pub stack_key: String,
    /// The stack key of its job frames (`naming::job_frames`): what `diff` matches,
    /// the same as `stack_key` but where a thread pool nests frames around a job.
    pub job_key: String,
    /// `callers` of the job frames: what `diff` shows for the sites of one job key.
    pub job_callers: String,
    /// What tells the job apart from the table's other jobs whose name and
    /// `job_callers` read the same (as `distinction`, among job keys).
    pub job_distinction: String,
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
}

/// The named-sites table, within `phase` if given: one row per (site, phase) with
/// rows in `sites.parquet`, by site id, then phase.
pub fn named_sites(report: &Report, rules: &[Category], phase: Option<&str>) -> Vec<NamedSite> {
    let mut counts: BTreeMap<(u64, &str), [u64; 5]> = BTreeMap::new();
    for row in report.rows(phase) {
        let c = counts.entry((row.site_id, &row.phase)).or_default();
        let add = [
            row.alloc_count,
            row.realloc_count,
            row.bytes_requested,
            row.bytes_allocated,
            row.temporary_count,
        ];
        for (sum, n) in c.iter_mut().zip(add) {
            *sum = sum.saturating_add(n);
        }
    }
    // Derived once per site, not per phase: naming walks every frame.
    let mut ids: Vec<u64> = counts.keys().map(|&(site, _)| site).collect();
    ids.dedup();
    let stacks: Vec<&[FrameRow]> = ids.iter().map(|&s| frames_of(&report.frames, s)).collect();
    let jobs: Vec<_> = stacks.iter().map(|f| naming::job_frames(f)).collect();
    let job_keys: Vec<String> = jobs.iter().map(|j| naming::stack_key(j)).collect();
    // Jobs are told apart among jobs: one stack per job key, the first site's.
    let mut first_of_job: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, k) in job_keys.iter().enumerate() {
        first_of_job.entry(k).or_insert(i);
    }
    let job_stacks: Vec<&[FrameRow]> = first_of_job.values().map(|&i| &*jobs[i]).collect();
    let job_distinctions: HashMap<&str, String> = first_of_job
        .keys()
        .copied()
        .zip(naming::distinctions(&job_stacks))
        .collect();
    let derived: HashMap<u64, Derived> = ids
        .iter()
        .zip(&stacks)
        .zip(naming::distinctions(&stacks))
        .zip(jobs.iter().zip(&job_keys))
        .map(|(((&site, frames), distinction), (job, job_key))| {
            let derived = Derived {
                name: naming::site_name(frames),
                callers: naming::callers(frames, naming::CALLERS),
                distinction,
                category: categories::classify(rules, frames),
                stack_key: naming::stack_key(frames),
                job_callers: naming::callers(job, naming::CALLERS),
                job_distinction: job_distinctions[job_key.as_str()].clone(),
                job_key: job_key.clone(),
            };
            (site, derived)
        })
        .collect();
    counts
        .into_iter()
        .map(|((site_id, phase), c)| {
            let d = derived
                .get(&site_id)
                .expect("every site of the table was derived");
            NamedSite {
                site_id,
                phase: phase.to_owned(),
                name: d.name.clone(),
                callers: d.callers.clone(),
                distinction: d.distinction.clone(),
                category: categories::category_name(rules, d.category).to_owned(),
                category_index: d.category as u32,
                stack_key: d.stack_key.clone(),
                job_key: d.job_key.clone(),
                job_callers: d.job_callers.clone(),
                job_distinction: d.job_distinction.clone(),
                alloc_count: c[0],
                realloc_count: c[1],
                bytes_requested: c[2],
                bytes_allocated: c[3],
                temporary_count: c[4],
            }
        })
        .collect()
}

/// What the table derives from one site's frames.
struct Derived {
    name: String,
    callers: String,
    distinction: String,
    category: usize,
    stack_key: String,
    job_key: String,
    job_callers: String,
    job_distinction: String,
}

/// The named-sites table as parquet (snappy, as the tracer writes its tables).
pub fn named_sites_parquet(rows: &[NamedSite], out: &mut dyn Write) -> io::Result<()> {
    let u64s = |name: &str, f: fn(&NamedSite) -> u64| {
        Column::new(name.into(), rows.iter().map(f).collect::<Vec<u64>>())
    };
    let strings = |name: &str, f: fn(&NamedSite) -> &str| {
        Column::new(name.into(), rows.iter().map(f).collect::<Vec<&str>>())
    };
    let columns = vec![
        u64s("site_id", |r| r.site_id),
        strings("phase", |r| &r.phase),
        strings("name", |r| &r.name),
        strings("callers", |r| &r.callers),
        strings("distinction", |r| &r.distinction),
        strings("category", |r| &r.category),
        Column::new(
            "category_index".into(),
            rows.iter().map(|r| r.category_index).collect::<Vec<u32>>(),
        ),
        strings("stack_key", |r| &r.stack_key),
        strings("job_key", |r| &r.job_key),
        strings("job_callers", |r| &r.job_callers),
        strings("job_distinction", |r| &r.job_distinction),
        u64s("alloc_count", |r| r.alloc_count),
        u64s("realloc_count", |r| r.realloc_count),
        u64s("bytes_requested", |r| r.bytes_requested),
        u64s("bytes_allocated", |r| r.bytes_allocated),
        u64s("temporary_count", |r| r.temporary_count),
    ];
    let mut df = DataFrame::new(rows.len(), columns).map_err(io::Error::other)?;
    // Encoded whole before writing, so that a failed write (a closed pipe) reaches the
    // caller as the plain I/O error it is.
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf)
        .with_compression(ParquetCompression::Snappy)
        .finish(&mut df)
        .map_err(io::Error::other)?;
    out.write_all(&buf)
}
