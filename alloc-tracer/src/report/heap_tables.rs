//! The report's memory tables: heap sampling's estimates at the kept peak and at the
//! report (`heap_peak.parquet`, `heap_end.parquet`), and the timeline.

use super::parquet::{self, Values};
use super::schema::{self, Table};
use super::tables::Context;
use crate::Error;
use crate::heap::SiteLive;
use crate::hot::size_class::class_bytes;
use crate::registry::SiteId;
use std::collections::HashMap;
use std::path::Path;

/// `heap_peak.parquet` or `heap_end.parquet` (`table`) from per-site estimates,
/// by site id, phase and size class.
pub fn write_heap(
    dir: &Path,
    table: &Table,
    live: &HashMap<SiteId, SiteLive>,
    cx: &Context<'_>,
) -> Result<usize, Error> {
    let mut rows: Vec<(u64, usize, usize, &SiteLive)> = live
        .iter()
        .filter(|(_, l)| l.sampled > 0)
        .map(|(id, l)| (cx.site_ids[&*id.frames], id.phase(), id.class(), l))
        .collect();
    rows.sort_by_key(|r| (r.0, r.1, r.2));
    let n = rows.len();
    let (mut site, mut phase, mut class) = (vec![], vec![], vec![]);
    let (mut sampled, mut bytes, mut blocks, mut stddev) = (vec![], vec![], vec![], vec![]);
    for (id, p, k, l) in rows {
        site.push(id);
        phase.push(cx.phase_name(p));
        class.push(class_bytes(k) as u64);
        sampled.push(l.sampled);
        bytes.push(l.bytes.round().max(0.0) as u64);
        blocks.push(l.blocks.round().max(0.0) as u64);
        stddev.push(l.variance.sqrt().round() as u64);
    }
    parquet::write(
        &dir.join(table.file),
        table,
        vec![
            Values::U64(site),
            Values::Str(phase),
            Values::U64(class),
            Values::U64(sampled),
            Values::U64(bytes),
            Values::U64(blocks),
            Values::U64(stddev),
        ],
    )?;
    Ok(n)
}

/// `timeline.parquet`: the timeline's points in time order.
pub fn write_timeline(dir: &Path, cx: &Context<'_>) -> Result<usize, Error> {
    let points = &cx.snap.timeline;
    let n = points.len();
    parquet::write(
        &dir.join(schema::TIMELINE.file),
        &schema::TIMELINE,
        vec![
            Values::U64(points.iter().map(|p| p.time_ns).collect()),
            Values::Str(points.iter().map(|p| cx.phase_name(p.phase)).collect()),
            Values::I64(points.iter().map(|p| p.live_bytes).collect()),
            Values::U64(points.iter().map(|p| p.alloc_count).collect()),
            Values::U64(points.iter().map(|p| p.bytes_allocated).collect()),
            Values::U64(points.iter().map(|p| p.rss_bytes).collect()),
        ],
    )?;
    Ok(n)
}
