//! Rendering results for people (aligned tables) and programs (JSON, CSV).

use crate::categories::CategoryTotals;
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
                "rank,site_id,name,alloc_count,realloc_count,bytes_requested,bytes_allocated,temporary_count,temporary_share,share,main_size_class_bytes,lifetime_ns_median"
            )?;
            for s in sites {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{:.6},{:.6},{},{}",
                    s.rank,
                    s.site_id,
                    csv_field(&s.name),
                    s.alloc_count,
                    s.realloc_count,
                    s.bytes_requested,
                    s.bytes_allocated,
                    s.temporary_count,
                    s.temporary_share,
                    s.share,
                    s.main_size_class_bytes,
                    s.lifetime_ns_median
                        .map_or(String::new(), |v| v.to_string())
                )?;
            }
            Ok(())
        }
        Format::Table => {
            writeln!(
                out,
                "{:>4} {:>12} {:>7} {:>14} {:>6} {:>7} {:>12}  site",
                "rank", "allocs", "share", "bytes", "temps", "class", "lifetime"
            )?;
            for s in sites {
                writeln!(
                    out,
                    "{:>4} {:>12} {:>7} {:>14} {:>6} {:>7} {:>12}  {}",
                    s.rank,
                    s.alloc_count + s.realloc_count,
                    pct(s.share),
                    s.bytes_requested,
                    format!("{:.0}%", 100.0 * s.temporary_share),
                    s.main_size_class_bytes,
                    s.lifetime_ns_median
                        .map_or("-".to_owned(), |v| format!("{v} ns")),
                    s.name
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
