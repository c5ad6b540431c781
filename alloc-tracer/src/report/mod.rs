//! Cold path: a snapshot of every counter, symbolized and written as a report
//! directory (`docs/report-schema.md`): [`snapshot`] reads the recorder, [`tables`]
//! and [`manifest`] turn it into files, [`directory`] puts them in place atomically,
//! and [`summary`] prints the one-glance view; [`room`] moves the work to a thread of
//! its own when the caller's stack is too small for it.

pub mod directory;
pub mod heap_tables;
pub mod manifest;
pub mod parquet;
pub mod room;
pub mod snapshot;
pub mod summary;
pub mod tables;

pub use alloc_tracer_format::schema;

use crate::Error;
use alloc_tracer_format::manifest::TableInfo;
use directory::{Staging, io};
use snapshot::{Snapshot, user_frames};
use std::collections::HashMap;
use std::path::Path;
pub use summary::{ReportSummary, TopSite};
use tables::Context;

/// Sites listed in a [`ReportSummary`] (its `top`).
pub const SUMMARY_SITES: usize = 10;

/// Writes a report directory at `dir`, atomically: files go to a temporary sibling
/// directory that is renamed into place. An existing report at `dir` is replaced;
/// an existing directory that is not a report is left alone and is an error.
/// `incomplete`: why the run did not finish (the manifest says so), if it did not.
/// `apart`: the path named this run apart (`%p`, `%t`), so a report of another
/// process found there is set aside, not replaced (see `directory::Staging::new`).
/// Runs under the guard, the snapshot freed under it too: made uncounted, its free
/// would count (the caller hands the summary out; see `handed`).
pub fn write(dir: &Path, incomplete: Option<&str>, apart: bool) -> Result<ReportSummary, Error> {
    crate::hot::thread::guarded(|| {
        // On a thread of its own where this one's stack is small (`room`).
        room::with_room(|| {
            let snap = Snapshot::take();
            write_snapshot(dir, &snap, incomplete, apart)
        })
    })
}

/// Which stacks are cut at the depth limit, and which end early below it: their
/// outermost frame is not an entry point, or they have no frame at all although the
/// walk ran on the thread's own stack (frames were lost: in a program built without
/// frame pointers every walk finds none). Walks off the thread's stack (counted
/// apart, as foreign walks) also give empty stacks, so their count is taken off the
/// empty stacks' allocations. The folded site is neither. Over every stack of the
/// report: heap sampling's stacks of no counted allocation too (in `count` mode,
/// the only ones).
/// `stacks`' counts are weighted (as the report's); `raw` gives the walks behind
/// them, which foreign walks are taken from.
fn stack_ends(
    snap: &Snapshot,
    stacks: &[(&[usize], u64)],
    raw: &HashMap<&[usize], u64>,
) -> manifest::StackEnds {
    let mut ends = manifest::StackEnds::default();
    let (mut empty, mut empty_walks, mut empty_allocs) = (0, 0u64, 0u64);
    // A stack as long as a depth it may have been walked at was cut there (a run
    // that changed the depth has stacks cut at each), or one longer: the allocator
    // entry's frame, kept until the report drops it, may be one more.
    let depths = manifest::stack_depths(snap);
    let deepest = depths.last().copied().unwrap_or(snap.settings.depth);
    let cut = |n: usize| n >= deepest || depths.iter().any(|&d| n == d || n == d + 1);
    for (stack, allocs) in stacks {
        if cut(stack.len()) {
            ends.at_depth_limit += 1;
            ends.at_depth_limit_allocs += allocs;
            continue;
        }
        let frames = user_frames(stack, &snap.symbols);
        let Some((_, _, outer)) = frames.last() else {
            empty += 1;
            empty_walks += raw.get(stack).copied().unwrap_or(0);
            empty_allocs += allocs;
            continue;
        };
        if outer.function == crate::symbolize::FOLDED_NAME
            || alloc_tracer_format::site::is_stack_root(&outer.function)
        {
            continue;
        }
        ends.early += 1;
        ends.early_allocs += allocs;
    }
    // Both raw counts of walks: every allocation's in `sites` mode, the sampled
    // ones' in `sample:N`. The lost walks' allocations are their share of the
    // empty stacks' (weighted as recorded). A row recorded in both modes, in a run
    // switched between them, counts its samples only (`SiteCounts::stacks`), so
    // there the lost walks can be undercounted.
    let lost = empty_walks.saturating_sub(snap.counts.foreign_walks);
    if lost > 0 {
        ends.early += empty;
        ends.early_allocs += (empty_allocs as u128 * lost as u128 / empty_walks as u128) as u64;
    }
    ends
}

fn write_snapshot(
    dir: &Path,
    snap: &Snapshot,
    incomplete: Option<&str>,
    apart: bool,
) -> Result<ReportSummary, Error> {
    let staging = Staging::new(dir, apart)?;
    let tmp = staging.path();

    // Site ids: one per distinct stack, biggest first (by the report's weighted
    // counts), ties broken by the addresses so that ids are stable for a given
    // snapshot.
    let mut stack_allocs: HashMap<&[usize], u64> = HashMap::new();
    let mut walks: HashMap<&[usize], u64> = HashMap::new();
    for (id, c) in &snap.sites {
        *stack_allocs.entry(&id.frames).or_default() += c.allocs + c.reallocs;
        *walks.entry(&id.frames).or_default() += c.stacks();
    }
    // Stacks seen only by heap sampling (in `count` mode, all of them) come after,
    // with no allocations of their own in the sites table.
    let mut heap_only: Vec<&[usize]> = snap
        .heap_peak
        .keys()
        .chain(snap.heap_end.keys())
        .map(|id| &*id.frames)
        .filter(|f| !stack_allocs.contains_key(f))
        .collect();
    heap_only.sort();
    heap_only.dedup();
    let mut stacks: Vec<(&[usize], u64)> = stack_allocs.into_iter().collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let every_stack: Vec<(&[usize], u64)> = stacks
        .iter()
        .copied()
        .chain(heap_only.into_iter().map(|s| (s, 0)))
        .collect();
    let site_ids: HashMap<&[usize], u64> = every_stack
        .iter()
        .enumerate()
        .map(|(i, (s, _))| (*s, i as u64))
        .collect();

    let cx = Context {
        snap,
        site_ids: &site_ids,
    };
    let sites_rows = tables::write_sites(tmp, &cx)?;
    let table_rows = [
        (schema::SITES.file, sites_rows),
        (
            schema::FRAMES.file,
            tables::write_frames(tmp, &every_stack, &site_ids, &snap.symbols)?,
        ),
        (
            schema::SIZE_CLASSES.file,
            tables::write_size_classes(tmp, &cx)?,
        ),
        (
            schema::REQUESTED_SIZES.file,
            tables::write_requested(tmp, &snap.counts)?,
        ),
        (schema::PHASES.file, tables::write_phases(tmp, &cx)?),
        (schema::LIFETIMES.file, tables::write_lifetimes(tmp, &cx)?),
        (
            schema::HEAP_PEAK.file,
            heap_tables::write_heap(tmp, &schema::HEAP_PEAK, &snap.heap_peak, &cx)?,
        ),
        (
            schema::HEAP_END.file,
            heap_tables::write_heap(tmp, &schema::HEAP_END, &snap.heap_end, &cx)?,
        ),
        (
            schema::TIMELINE.file,
            heap_tables::write_timeline(tmp, &cx)?,
        ),
    ];
    let tables = table_rows
        .into_iter()
        .map(|(file, rows)| TableInfo {
            file: file.into(),
            rows,
        })
        .collect();
    let ends = stack_ends(snap, &every_stack, &walks);
    let site_calls = snap.sites.values().map(|c| c.allocs + c.reallocs).sum();
    let manifest = manifest::build(snap, tables, ends, site_calls, incomplete);
    let manifest_path = tmp.join(schema::MANIFEST);
    std::fs::write(&manifest_path, manifest.to_json()).map_err(io(&manifest_path))?;
    staging.commit()?;

    // Named among every site, as the analyzer names them.
    let frames: Vec<Vec<_>> = stacks
        .iter()
        .map(|(stack, _)| {
            user_frames(stack, &snap.symbols)
                .into_iter()
                .map(|(_, _, f)| f)
                .collect()
        })
        .collect();
    let shown = &stacks[..stacks.len().min(SUMMARY_SITES)];
    let top = shown
        .iter()
        .zip(summary::site_names(&frames, shown.len()))
        .map(|((stack, allocs), name)| {
            let of_stack = snap.sites.iter().filter(|(id, _)| &*id.frames == *stack);
            TopSite {
                site_id: site_ids[stack],
                name,
                allocs: *allocs,
                bytes_requested: of_stack.clone().map(|(_, c)| c.bytes_requested).sum(),
                temporaries: of_stack.map(|(_, c)| c.temporaries).sum(),
            }
        })
        .collect();
    Ok(ReportSummary {
        setup_warning: manifest.setup_warning(),
        dir: dir.to_owned(),
        mode: manifest.mode.clone(),
        sample_interval: manifest.sample_interval,
        weights_changed: manifest.stack_weights_changed,
        stacks_mode: manifest.stacks_mode.clone(),
        allocs_without_stacks: manifest.allocs_without_stacks.unwrap_or(0),
        allocator: manifest.allocator.clone(),
        stacks: stacks.len(),
        site_rows: sites_rows,
        allocs: manifest.totals.alloc_count,
        reallocs: manifest.totals.realloc_count,
        bytes_requested: manifest.totals.bytes_requested,
        temporaries: manifest.totals.temporary_count,
        top,
    })
}
