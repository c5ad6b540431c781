//! `analyzer peak` and `analyzer leaks` as tables, JSON and CSV.
//!
//! JSON is the whole [`Held`] (the moment, the estimates' total, categories and
//! sites); CSV is its categories, then its sites, one row each, told apart by a
//! `kind` column (as `cost` and `diff` write theirs).

use super::{Held, HeldCategory, HeldSite};
pub use crate::render::bytes;
use crate::render::{Format, csv_rows, pct, with_callers};
use std::io::{self, Write};

/// Writes what holds memory at one moment.
pub fn held(out: &mut dyn Write, h: &Held, format: Format) -> io::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, h)?;
            writeln!(out)
        }
        Format::Csv => {
            let rows: Vec<HeldCsvRow> = h
                .categories
                .iter()
                .map(HeldCsvRow::from)
                .chain(h.sites.iter().map(HeldCsvRow::from))
                .collect();
            csv_rows(out, &rows)
        }
        Format::Table => table(out, h),
    }
}

/// One CSV row: a category's (`kind` `category`) or a site's (`site`).
#[derive(Default, serde::Serialize)]
struct HeldCsvRow<'a> {
    kind: &'a str,
    rank: Option<usize>,
    site_id: Option<u64>,
    name: Option<&'a str>,
    callers: Option<&'a str>,
    distinction: Option<&'a str>,
    category: &'a str,
    sites: Option<usize>,
    live_bytes: u64,
    live_bytes_se: Option<u64>,
    share: f64,
    live_blocks: Option<u64>,
    sampled_count: Option<u64>,
    main_size_class_bytes: Option<u64>,
}

impl<'a> From<&'a HeldCategory> for HeldCsvRow<'a> {
    fn from(c: &'a HeldCategory) -> Self {
        HeldCsvRow {
            kind: "category",
            category: &c.category,
            sites: Some(c.sites),
            live_bytes: c.live_bytes,
            live_bytes_se: Some(c.live_bytes_se),
            share: c.share,
            ..HeldCsvRow::default()
        }
    }
}

impl<'a> From<&'a HeldSite> for HeldCsvRow<'a> {
    fn from(s: &'a HeldSite) -> Self {
        HeldCsvRow {
            kind: "site",
            rank: Some(s.rank),
            site_id: Some(s.site_id),
            name: Some(&s.name),
            callers: Some(&s.callers),
            distinction: Some(&s.distinction),
            category: &s.category,
            sites: None,
            live_bytes: s.live_bytes,
            live_bytes_se: Some(s.live_bytes_se),
            share: s.share,
            live_blocks: Some(s.live_blocks),
            sampled_count: Some(s.sampled_count),
            main_size_class_bytes: Some(s.main_size_class_bytes),
        }
    }
}

fn table(out: &mut dyn Write, h: &Held) -> io::Result<()> {
    let what = if h.moment == "peak" {
        "at the kept peak"
    } else {
        "at the end of the run"
    };
    match (h.live_bytes, h.time_s, &h.phase) {
        (Some(live), Some(t), Some(phase)) => writeln!(
            out,
            "{what}: {} live at {}, phase {phase}",
            bytes(live as f64),
            crate::render::seconds(t)
        )?,
        (Some(live), _, _) if h.moment == "end" => writeln!(
            out,
            "{what}: {} allocated and not freed while traced (frees of blocks allocated \
             before tracing count against it; the estimates below are what was live)",
            bytes(live as f64)
        )?,
        (Some(live), _, _) => writeln!(out, "{what}: {} live", bytes(live as f64))?,
        _ => {
            // Nothing was kept, whatever the interval: no advice on sampling. A tracer
            // keeps a peak once live bytes pass 1 MiB as a thread publishes them;
            // older tracers kept none at an exiting thread's last bytes.
            let why = match h.run_peak_live_bytes {
                _ if !h.table_written => {
                    "the tracer that wrote this report kept no peak moment".to_owned()
                }
                Some(run) if run >= 1 << 20 => format!(
                    "the run reached {} live only as exiting threads published their \
                     last bytes, where the tracer that wrote this report kept no moment",
                    bytes(run as f64)
                ),
                _ => "live bytes never reached 1 MiB".to_owned(),
            };
            writeln!(
                out,
                "{what}: no peak kept ({why}); `analyzer leaks` shows what was live at the \
                 end"
            )?;
        }
    }
    if let (Some(kept), Some(run)) = (h.live_bytes, h.run_peak_live_bytes)
        && run > kept
    {
        match &h.run_peak_phase {
            Some(p) => writeln!(
                out,
                "the run's highest: {} live, {} above the kept peak, in phase {} where \
                 the kept peak is in phase {}: the tables below are of the kept peak, \
                 and what was live at the highest may be other blocks",
                bytes(run as f64),
                bytes((run - kept) as f64),
                p,
                h.phase.as_deref().unwrap_or(""),
            )?,
            None => writeln!(
                out,
                "the run's highest: {} live, {} above the kept peak (what was allocated \
                 between the two is not in the tables below)",
                bytes(run as f64),
                bytes((run - kept) as f64)
            )?,
        }
    }
    if h.rss_bytes > 0 {
        let when = match h.rss_time_s {
            Some(t) => format!(
                "near the kept peak: {} (the timeline's point at {})",
                bytes(h.rss_bytes as f64),
                crate::render::seconds(t)
            ),
            None => format!(
                "at the end: {} (when the report was taken)",
                bytes(h.rss_bytes as f64)
            ),
        };
        writeln!(out, "resident memory {when}")?;
    }
    // The run's figure: beside the peak, not the end.
    if h.max_rss_bytes > 0 && h.moment == "peak" {
        writeln!(
            out,
            "the process's peak resident memory: {} (the kernel's count: the tracer's and \
             the allocator's own memory in, capacity never touched out)",
            bytes(h.max_rss_bytes as f64)
        )?;
    }
    if h.live_bytes.is_none() {
        // No moment kept: no table to show.
        return Ok(());
    }
    if !h.table_written {
        return writeln!(out, "{}", no_table(h));
    }
    // The manifest's interval is the one in force when the report was written: a
    // program that stopped heap sampling before (a switch to `off`, say) still has
    // the peak it kept, with its estimates.
    if h.heap_interval == 0 && h.estimated_bytes_all_phases == 0 {
        writeln!(
            out,
            "heap sampling was off when the report was written, and no sampled block was kept from before: rerun with ALLOC_TRACE_HEAP=1MiB (synth-driver --heap-sample 1MiB) to see the sites"
        )?;
        return Ok(());
    }
    // A share of what was live: at the end, `live_bytes` is a net of allocations and
    // frees while traced, not that.
    let cover = h
        .live_bytes
        .filter(|l| *l > 0 && h.moment == "peak")
        .map_or(String::new(), |l| {
            format!(" ({} of it)", pct(h.estimated_bytes as f64 / l as f64))
        });
    // Blocks allocated before heap sampling came on are in no estimate.
    let late = crate::report::heap_late_words(h.heap_started_late);
    let sampling = if h.heap_intervals_changed {
        format!(
            "heap sampling at intervals that changed during the run (last {}):",
            crate::render::heap_every(h.heap_interval)
        )
    } else if h.heap_interval == 0 {
        "heap sampling, stopped before the report was written:".to_owned()
    } else {
        format!(
            "heap sampling {}:",
            crate::render::heap_every(h.heap_interval)
        )
    };
    // How far sampling alone may put the estimate, where it may: two standard errors,
    // as wide as `top`'s and `diff`'s ±.
    let se = if h.estimated_bytes_se > 0 {
        format!(", ± {} (two standard errors)", bound(h.estimated_bytes_se))
    } else {
        String::new()
    };
    // With --phase, the moment is the run's, and the tables its blocks of the phase.
    let of_phase = h.blocks_of_phase.as_ref().map_or(String::new(), |p| {
        format!(", of blocks allocated in phase {p},")
    });
    writeln!(
        out,
        "{sampling} sites below{of_phase} account for {}{cover}{se}{late}",
        bytes(h.estimated_bytes as f64)
    )?;
    // Empty tables would read as a failure; say what they mean instead.
    if h.estimated_bytes_all_phases == 0 {
        // At the end, a net of zero or less while traced leaves sampling little to
        // look for: no advice to sample more (frees of blocks allocated before
        // tracing can still hide a leak, which the line says).
        if h.moment == "end" && h.live_bytes.is_some_and(|b| b <= 0) {
            return writeln!(
                out,
                "no sampled block was live then, and no more was allocated than freed while traced: sampling more is unlikely to find a leak (unless frees of blocks allocated before tracing hide one)"
            );
        }
        return writeln!(
            out,
            "no sampled block was live then: a block of fewer bytes than the interval is sampled only now and then (a smaller ALLOC_TRACE_HEAP, synth-driver --heap-sample, samples more)"
        );
    }
    if h.estimated_bytes == 0 {
        return writeln!(
            out,
            "none of the sampled blocks live then was allocated in the phase asked for"
        );
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:>12}{} {:>7} {:>6}  category",
        "live",
        se_column(h, "±"),
        "share",
        "sites"
    )?;
    for c in &h.categories {
        writeln!(
            out,
            "{:>12}{} {:>7} {:>6}  {}",
            bytes(c.live_bytes as f64),
            se_column(h, &bound(c.live_bytes_se)),
            pct(c.share),
            c.sites,
            c.category
        )?;
    }
    if !h.sites.is_empty() {
        site_table(out, h)?;
    }
    // The sites `--limit` left out (as the JSON's `more_sites`): the total above
    // counts them too.
    if h.more_sites > 0 {
        let shown: u64 = h.sites.iter().map(|s| s.live_bytes).sum();
        writeln!(
            out,
            "{} more {}, {} (--limit shows more)",
            h.more_sites,
            if h.more_sites == 1 { "site" } else { "sites" },
            bytes(h.estimated_bytes.saturating_sub(shown) as f64)
        )?;
    }
    Ok(())
}

/// Two standard errors of `se`, in bytes: how far heap sampling alone may put an
/// estimate (about a 95 % interval), as the tables' ± give it.
pub(crate) fn bound(se: u64) -> String {
    bytes(se as f64 * crate::sampling_noise::SIGMAS)
}

/// A column of ± (`bound`), where the estimates have any error (heap sampling at an
/// interval of 1 is exact): `text` right-aligned, or nothing.
fn se_column(h: &Held, text: &str) -> String {
    if h.estimated_bytes_se > 0 {
        format!(" {text:>11}")
    } else {
        String::new()
    }
}

fn site_table(out: &mut dyn Write, h: &Held) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "{:>4} {:>12}{} {:>7} {:>12} {:>8} {:>11}  site {{category}}",
        "rank",
        "live",
        se_column(h, "±"),
        "share",
        "blocks",
        "sampled",
        "class"
    )?;
    for s in &h.sites {
        writeln!(
            out,
            "{:>4} {:>12}{} {:>7} {:>12} {:>8} {:>11}  {} {{{}}}",
            s.rank,
            bytes(s.live_bytes as f64),
            se_column(h, &bound(s.live_bytes_se)),
            pct(s.share),
            s.live_blocks,
            s.sampled_count,
            bytes(s.main_size_class_bytes as f64),
            alloc_tracer_format::site::with_distinction(
                &with_callers(&s.name, &s.callers),
                &s.distinction
            ),
            s.category
        )?;
    }
    Ok(())
}

/// Why a report has no sites at `h`'s moment when it lacks the moment's table.
pub fn no_table(h: &Held) -> String {
    let table = if h.moment == "peak" {
        "heap_peak"
    } else {
        "heap_end"
    };
    format!(
        "this report has no {table} table (written by a tracer from before it kept one): \
         no sites to show"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `table` writes for `h`.
    fn rendered(h: &Held) -> String {
        let mut out = Vec::new();
        table(&mut out, h).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_moment_with_no_sampled_block_says_so_instead_of_empty_tables() {
        let h = Held {
            moment: "end".into(),
            live_bytes: Some(31_000),
            heap_interval: 65_536,
            heap_intervals_changed: false,
            table_written: true,
            ..Held::default()
        };
        // A report without the moment's table is not one where nothing was sampled.
        let text = rendered(&Held {
            table_written: false,
            ..h.clone()
        });
        assert!(
            text.contains("this report has no heap_end table (written by a tracer from before"),
            "{text}"
        );
        assert!(!text.contains("no sampled block"), "{text}");
        let text = rendered(&h);
        assert!(text.contains("no sampled block was live then"), "{text}");
        assert!(text.contains("samples more"), "{text}");
        assert!(!text.contains("rank"), "{text}");
        // Nothing more allocated than freed: no advice to sample more.
        let text = rendered(&Held {
            live_bytes: Some(-1400),
            ..h.clone()
        });
        assert!(
            text.contains("sampling more is unlikely to find a leak"),
            "{text}"
        );
        assert!(!text.contains("samples more"), "{text}");
        assert!(!text.contains("resident"), "{text}");
        // Resident memory, where the timeline sampled it.
        let text = rendered(&Held {
            rss_bytes: 3 << 20,
            ..h.clone()
        });
        assert!(
            text.contains("resident memory at the end: 3.0 MiB (when the report was taken)"),
            "{text}"
        );
        // Sampled blocks live, none of them in the phase asked for.
        let h = Held {
            estimated_bytes_all_phases: 1 << 20,
            ..h
        };
        let text = rendered(&h);
        assert!(text.contains("none of the sampled blocks"), "{text}");
        assert!(!text.contains("rank"), "{text}");
        // Sites of that phase live, none shown (`--limit 0`): their categories.
        let h = Held {
            estimated_bytes: 1 << 20,
            categories: vec![super::super::HeldCategory {
                category: "gadget vectors".into(),
                live_bytes: 1 << 20,
                share: 1.0,
                sites: 3,
                live_bytes_se: 0,
            }],
            ..h
        };
        let text = rendered(&h);
        assert!(text.contains("gadget vectors"), "{text}");
        assert!(
            !text.contains("none of the sampled") && !text.contains("rank"),
            "{text}"
        );
        // Exact estimates (no error): no column of errors.
        assert!(!text.contains("±"), "{text}");
        // Estimates with an error: each row's beside it.
        let text = rendered(&Held {
            estimated_bytes_se: 700 << 10,
            categories: vec![super::super::HeldCategory {
                live_bytes_se: 700 << 10,
                ..h.categories[0].clone()
            }],
            ..h
        });
        assert!(
            text.contains("        live           ±   share  sites  category"),
            "{text}"
        );
        assert!(
            text.contains("     1.0 MiB     1.4 MiB  100.0%      3  gadget vectors"),
            "{text}"
        );
    }

    #[test]
    fn a_share_of_what_was_live_is_given_at_the_peak_only() {
        let h = Held {
            moment: "peak".into(),
            live_bytes: Some(4 << 20),
            time_s: Some(1.0),
            phase: Some("build".into()),
            heap_interval: 1 << 20,
            heap_intervals_changed: false,
            estimated_bytes: 3 << 20,
            estimated_bytes_all_phases: 3 << 20,
            table_written: true,
            ..Held::default()
        };
        assert!(rendered(&h).contains("account for 3.0 MiB (75.0% of it)"));
        // At the end, `live_bytes` is a net of allocations and frees, not what was
        // live: a share of it means nothing (1 KiB of 64 B would read 1600 %).
        let end = rendered(&Held {
            moment: "end".into(),
            live_bytes: Some(1 << 20),
            time_s: None,
            phase: None,
            ..h
        });
        assert!(end.contains("account for 3.0 MiB"), "{end}");
        assert!(!end.contains("of it"), "{end}");
    }

    #[test]
    fn a_run_with_no_peak_kept_still_gives_its_resident_memory_and_says_why() {
        // As `held` makes it: no moment, so no resident memory near one.
        let h = Held {
            moment: "peak".into(),
            run_peak_live_bytes: Some(300 << 10),
            max_rss_bytes: 10 << 20,
            heap_interval: 1 << 20,
            heap_intervals_changed: false,
            table_written: true,
            ..Held::default()
        };
        let text = rendered(&h);
        assert!(text.contains("live bytes never reached 1 MiB"), "{text}");
        assert!(text.contains("peak resident memory: 10.0 MiB"), "{text}");
        assert!(!text.contains("heap sampling"), "{text}");
        // Over 1 MiB with no moment: only an exiting thread's publishing raised it.
        let text = rendered(&Held {
            run_peak_live_bytes: Some(2 << 20),
            ..h.clone()
        });
        assert!(text.contains("only as exiting threads published"), "{text}");
        // Without the peak's table, the tracer is older than keeping one.
        let text = rendered(&Held {
            table_written: false,
            ..h
        });
        assert!(text.contains("kept no peak moment"), "{text}");
        assert!(!text.contains("no heap_peak table"), "{text}");
    }
}
