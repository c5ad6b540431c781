//! Rendering results for people (aligned tables) and programs (JSON, CSV).

use crate::calibrate::Calibration;
use crate::categories::CategoryTotals;
use crate::cost::CostReport;
use crate::diff::Diff;
use crate::rank::RankedSite;
use std::io::{self, Write};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned text.
    Table,
    /// A JSON array of objects.
    Json,
    /// CSV with a header row.
    Csv,
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// Seconds with a precision that suits their size.
fn seconds(s: f64) -> String {
    // Rounding leftovers (and -0) print as 0.
    let s = if s.abs() < 5e-11 { 0.0 } else { s };
    let a = s.abs();
    if a >= 10.0 {
        format!("{s:.1} s")
    } else if a >= 0.1 {
        format!("{s:.2} s")
    } else if a >= 1e-4 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} us", s * 1e6)
    }
}

/// A site's name followed by its callers, if any.
fn with_callers(name: &str, callers: &str) -> String {
    if callers.is_empty() {
        name.to_owned()
    } else {
        format!("{name} < {callers}")
    }
}

fn opt_pct(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), pct)
}

fn opt_f(x: Option<f64>) -> String {
    x.map_or(String::new(), |v| format!("{v:.9}"))
}

/// Writes ranked sites.
pub fn sites(out: &mut dyn Write, sites: &[RankedSite], format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, sites)?;
            writeln!(out)
        }
        Format::Csv => {
            writeln!(
                out,
                "rank,site_id,name,callers,alloc_count,realloc_count,bytes_requested,bytes_allocated,temporary_count,temporary_share,share,main_size_class_bytes,lifetime_ns_median,cost_s"
            )?;
            for s in sites {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{},{},{}",
                    s.rank,
                    s.site_id,
                    csv_field(&s.name),
                    csv_field(&s.callers),
                    s.alloc_count,
                    s.realloc_count,
                    s.bytes_requested,
                    s.bytes_allocated,
                    s.temporary_count,
                    s.temporary_share,
                    s.share,
                    s.main_size_class_bytes,
                    s.lifetime_ns_median
                        .map_or(String::new(), |v| v.to_string()),
                    s.cost_s.map_or(String::new(), |v| format!("{v:.9}"))
                )?;
            }
            Ok(())
        }
        Format::Table => {
            writeln!(
                out,
                "{:>4} {:>12} {:>7} {:>14} {:>6} {:>7} {:>12} {:>9}  site",
                "rank", "allocs", "share", "bytes", "temps", "class", "lifetime", "cost"
            )?;
            for s in sites {
                writeln!(
                    out,
                    "{:>4} {:>12} {:>7} {:>14} {:>6} {:>7} {:>12} {:>9}  {}",
                    s.rank,
                    s.alloc_count + s.realloc_count,
                    pct(s.share),
                    s.bytes_requested,
                    format!("{:.0}%", 100.0 * s.temporary_share),
                    s.main_size_class_bytes,
                    s.lifetime_ns_median
                        .map_or("-".to_owned(), |v| format!("{v} ns")),
                    s.cost_s.map_or("-".to_owned(), seconds),
                    with_callers(&s.name, &s.callers)
                )?;
            }
            Ok(())
        }
    }
}

/// Writes category totals.
pub fn categories(out: &mut dyn Write, cats: &[CategoryTotals], format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, cats)?;
            writeln!(out)
        }
        Format::Csv => {
            writeln!(
                out,
                "category,sites,alloc_count,realloc_count,bytes_requested,temporary_count,share,top_site"
            )?;
            for c in cats {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{:.6},{}",
                    csv_field(&c.category),
                    c.sites,
                    c.alloc_count,
                    c.realloc_count,
                    c.bytes_requested,
                    c.temporary_count,
                    c.share,
                    csv_field(&c.top_site)
                )?;
            }
            Ok(())
        }
        Format::Table => {
            writeln!(
                out,
                "{:<40} {:>6} {:>12} {:>7} {:>14} {:>12}  top site",
                "category", "sites", "allocs", "share", "bytes", "temporaries"
            )?;
            for c in cats {
                writeln!(
                    out,
                    "{:<40} {:>6} {:>12} {:>7} {:>14} {:>12}  {}",
                    c.category,
                    c.sites,
                    c.alloc_count + c.realloc_count,
                    pct(c.share),
                    c.bytes_requested,
                    c.temporary_count,
                    c.top_site
                )?;
            }
            Ok(())
        }
    }
}

/// Writes the cost model's answer: categories, then the costliest sites.
pub fn cost(out: &mut dyn Write, c: &CostReport, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, c)?;
            writeln!(out)
        }
        Format::Csv => {
            writeln!(
                out,
                "kind,rank,site_id,name,callers,category,alloc_count,direct_s,indirect_s,total_s,phase_share"
            )?;
            for k in &c.categories {
                writeln!(
                    out,
                    "category,,,,,{},{},{:.9},{:.9},{:.9},{}",
                    csv_field(&k.category),
                    k.alloc_count,
                    k.direct_s,
                    k.indirect_s,
                    k.total_s,
                    opt_f(k.phase_share)
                )?;
            }
            for s in &c.sites {
                writeln!(
                    out,
                    "site,{},{},{},{},{},{},{:.9},{:.9},{:.9},{}",
                    s.rank,
                    s.site_id,
                    csv_field(&s.name),
                    csv_field(&s.callers),
                    csv_field(&s.category),
                    s.alloc_count + s.realloc_count,
                    s.direct_s,
                    s.indirect_s,
                    s.total_s,
                    opt_f(s.phase_share)
                )?;
            }
            Ok(())
        }
        Format::Table => {
            writeln!(
                out,
                "phase {}: {} wall (traced), allocation cost {} = {} direct + {} indirect (estimate)",
                c.phase.as_deref().unwrap_or("(all)"),
                c.phase_wall_s.map_or("-".to_owned(), seconds),
                seconds(c.total_s),
                seconds(c.direct_s),
                seconds(c.indirect_s),
            )?;
            if !c.host_matches {
                writeln!(
                    out,
                    "WARNING: calibrated on {} ({}), report from {} ({}): figures describe the calibration host",
                    c.calibration_host.0, c.calibration_host.1, c.report_host.0, c.report_host.1
                )?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:<40} {:>12} {:>10} {:>10} {:>10} {:>7}",
                "category", "allocs", "direct", "indirect", "saves", "of phase"
            )?;
            for k in &c.categories {
                writeln!(
                    out,
                    "{:<40} {:>12} {:>10} {:>10} {:>10} {:>7}",
                    k.category,
                    k.alloc_count,
                    seconds(k.direct_s),
                    seconds(k.indirect_s),
                    seconds(k.total_s),
                    opt_pct(k.phase_share)
                )?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:>4} {:>12} {:>10} {:>10} {:>10} {:>7}  site (removing it saves ~saves)",
                "rank", "allocs", "direct", "indirect", "saves", "of phase"
            )?;
            for s in &c.sites {
                writeln!(
                    out,
                    "{:>4} {:>12} {:>10} {:>10} {:>10} {:>7}  {} [{}]",
                    s.rank,
                    s.alloc_count + s.realloc_count,
                    seconds(s.direct_s),
                    seconds(s.indirect_s),
                    seconds(s.total_s),
                    opt_pct(s.phase_share),
                    with_callers(&s.name, &s.callers),
                    s.category
                )?;
            }
            Ok(())
        }
    }
}

/// Writes a comparison: totals, predicted against measured change, categories, sites.
pub fn diff(out: &mut dyn Write, d: &Diff, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, d)?;
            writeln!(out)
        }
        Format::Csv => {
            writeln!(
                out,
                "kind,name,callers,category,base_alloc_count,change_alloc_count,delta_alloc_count,delta_bytes_requested,delta_cost_s"
            )?;
            for c in &d.categories {
                writeln!(
                    out,
                    "category,,,{},{},{},{},{},{}",
                    csv_field(&c.category),
                    c.base_alloc_count,
                    c.change_alloc_count,
                    c.delta_alloc_count,
                    c.delta_bytes_requested,
                    opt_f(c.delta_cost_s)
                )?;
            }
            for s in &d.sites {
                writeln!(
                    out,
                    "site,{},{},{},{},{},{},{},{}",
                    csv_field(&s.name),
                    csv_field(&s.callers),
                    csv_field(&s.category),
                    s.base_alloc_count,
                    s.change_alloc_count,
                    s.delta_alloc_count,
                    s.delta_bytes_requested,
                    opt_f(s.delta_cost_s)
                )?;
            }
            Ok(())
        }
        Format::Table => {
            let opt_s = |x: Option<f64>| x.map_or("-".to_owned(), seconds);
            writeln!(
                out,
                "phase {}: base {} allocs, change {} allocs ({:+}); sites matched {} ({} with lines ignored), gone {}, new {}",
                d.phase.as_deref().unwrap_or("(all)"),
                d.base.alloc_count,
                d.change.alloc_count,
                d.change.alloc_count as i64 - d.base.alloc_count as i64,
                d.sites_matched,
                d.sites_matched_ignoring_lines,
                d.sites_gone,
                d.sites_new
            )?;
            let recycling = d.recycling_s.map_or(String::new(), |r| {
                format!(", plus {} to recycle what it removes", seconds(r))
            });
            writeln!(
                out,
                "predicted change {} (allocation cost {} -> {}{recycling}); measured change {} ({} -> {}; {})",
                opt_s(d.predicted_change_s),
                opt_s(d.base.cost_s),
                opt_s(d.change.cost_s),
                opt_s(d.measured_change_s),
                opt_s(d.base.wall_s),
                opt_s(d.change.wall_s),
                d.wall_source
            )?;
            writeln!(out)?;
            writeln!(
                out,
                "{:<40} {:>12} {:>12} {:>12} {:>10}",
                "category", "base", "change", "delta", "cost"
            )?;
            for c in &d.categories {
                writeln!(
                    out,
                    "{:<40} {:>12} {:>12} {:>+12} {:>10}",
                    c.category,
                    c.base_alloc_count,
                    c.change_alloc_count,
                    c.delta_alloc_count,
                    opt_s(c.delta_cost_s)
                )?;
            }
            writeln!(out)?;
            writeln!(
                out,
                "{:>12} {:>12} {:>12} {:>10}  site [category]",
                "base", "change", "delta", "cost"
            )?;
            for s in &d.sites {
                writeln!(
                    out,
                    "{:>12} {:>12} {:>+12} {:>10}  {} [{}]",
                    s.base_alloc_count,
                    s.change_alloc_count,
                    s.delta_alloc_count,
                    opt_s(s.delta_cost_s),
                    with_callers(&s.name, &s.callers),
                    s.category
                )?;
            }
            Ok(())
        }
    }
}

/// Writes a summary of a calibration (the JSON file holds everything).
pub fn calibration(out: &mut dyn Write, c: &Calibration) -> io::Result<()> {
    use crate::calibrate::Pattern;
    writeln!(
        out,
        "host {} ({}, {} cores), {}",
        c.host, c.cpu, c.cores, c.allocator
    )?;
    writeln!(
        out,
        "{:>10} {:>10} {:>10} {:>10}  ns per malloc+free pair (median of {})",
        "size", "temporary", "batch", "scattered", c.repetitions
    )?;
    let mut sizes: Vec<u64> = c.pairs.iter().map(|p| p.size_bytes).collect();
    sizes.dedup();
    for size in sizes {
        writeln!(
            out,
            "{:>10} {:>10.1} {:>10.1} {:>10.1}",
            size,
            c.pair_ns(size, Pattern::Temporary),
            c.pair_ns(size, Pattern::Batch),
            c.pair_ns(size, Pattern::Scattered)
        )?;
    }
    writeln!(out, "memcpy {:.1} bytes/ns", c.copy_bytes_per_ns)?;
    for o in &c.operations {
        writeln!(
            out,
            "{}: {:.1} ns per event, {:.1} ns beyond the allocator ({})",
            o.name, o.ns, o.beyond_allocator_ns, o.what
        )?;
    }
    Ok(())
}
