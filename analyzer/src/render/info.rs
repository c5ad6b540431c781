//! `info` and `calibrate`: what a report is, and what a calibration measured.

use super::{Format, seconds};
use crate::calibrate::Calibration;
use crate::info::Info;
use std::io::{self, Write};

/// Writes a report's description.
pub fn info(out: &mut dyn Write, i: &Info, format: Format) -> io::Result<()> {
    if format != Format::Table {
        serde_json::to_writer_pretty(&mut *out, i)?;
        return writeln!(out);
    }
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "unknown".to_owned()
        } else {
            s.to_owned()
        }
    };
    writeln!(out, "report    {}", i.report)?;
    // The mode the stacks were recorded in, after the one in force at the report
    // where the run switched from it.
    let mode = match i.stacks_mode.as_str() {
        s if s == i.mode => i.mode.clone(),
        "count" => format!("{}, after count", i.mode),
        s => format!("{}, stacks recorded in {s}", i.mode),
    };
    if i.stacks_mode == "count" {
        writeln!(
            out,
            "mode      {mode} (totals, live bytes and phases; no stacks, no temporaries)"
        )?;
    } else {
        writeln!(
            out,
            "mode      {mode} (each stack stands for {}{}; {}), {} frames per stack",
            match (i.stack_weights_changed, i.sample_interval) {
                (true, n) => format!("the interval it was drawn at, lately {n}"),
                (false, 1) => "1 allocation".to_owned(),
                (false, n) => format!("{n} allocations"),
            },
            i.sample_all_from_bytes.map_or(String::new(), |b| format!(
                ", but blocks of {} and more, each recorded whole",
                super::bytes(b as f64)
            )),
            if i.lifetime_interval == 0 {
                "no lifetimes followed".to_owned()
            } else {
                format!("1 block in {} followed to its free", i.lifetime_interval)
            },
            match i.stack_depths.as_slice() {
                [] | [_] => i.stack_depth.to_string(),
                depths => format!(
                    "{} (the run changed it: {})",
                    i.stack_depth,
                    depths
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        )?;
        if i.allocs_without_stacks > 0 {
            writeln!(
                out,
                "          {} allocations and reallocs ({} of the run's) counted in count mode, with no stack: in no site",
                i.allocs_without_stacks,
                super::pct(
                    i.allocs_without_stacks as f64
                        / i.alloc_count.saturating_add(i.realloc_count).max(1) as f64
                )
            )?;
        }
    }
    if let Some(a) = &i.allocator {
        writeln!(
            out,
            "allocator {a} (the inner allocator, as the program named it)"
        )?;
    }
    writeln!(out, "command   {}", i.command_line.join(" "))?;
    if let Some(pid) = i.forked_from_pid {
        writeln!(
            out,
            "forked    from process {pid}: the counts include what it recorded before the fork"
        )?;
    }
    if let Some(run) = &i.run_id {
        writeln!(
            out,
            "run id    {run} (shared by the reports of this process and those forked from it)"
        )?;
    }
    writeln!(
        out,
        "host      {} ({}, {} core{}), {} thread{} recorded",
        or_unknown(&i.host),
        or_unknown(&i.cpu),
        i.cores,
        if i.cores == 1 { "" } else { "s" },
        i.threads,
        if i.threads == 1 { "" } else { "s" }
    )?;
    writeln!(
        out,
        "run       {}{}",
        seconds(i.duration_s),
        i.incomplete.as_deref().map_or(String::new(), |why| format!(
            ", incomplete: written on {why}"
        ))
    )?;
    writeln!(
        out,
        "totals    {} allocations, {} reallocs, {} requested, {}, peak {} live (within {}){}",
        i.alloc_count,
        i.realloc_count,
        super::bytes(i.bytes_requested as f64),
        match i.temporary_count {
            None => "temporaries not counted".to_owned(),
            // Only sampled blocks are watched to their free, each standing for N.
            Some(temps) if i.sample_interval > 1 => format!(
                "{temps} temporaries (estimated: each sampled one counted for the {} it stands \
                 for{})",
                i.sample_interval,
                if i.sample_all_from_bytes.is_some() {
                    ", or once where recorded whole"
                } else {
                    ""
                }
            ),
            Some(temps) => format!("{temps} temporaries"),
        },
        super::bytes(i.peak_live_bytes as f64),
        super::bytes(i.peak_live_bytes_error_bytes as f64),
        if i.max_rss_bytes > 0 {
            format!(", peak RSS {}", super::bytes(i.max_rss_bytes as f64))
        } else {
            String::new()
        }
    )?;
    writeln!(
        out,
        "heap      {}",
        match (&i.heap_peak, i.heap_interval) {
            (None, 0) if !i.heap_intervals_changed => {
                "sampling off (ALLOC_TRACE_HEAP, synth-driver --heap-sample)".to_owned()
            }
            (peak, n) => {
                let every = match (n, i.heap_intervals_changed) {
                    (0, _) => "sampling stopped before the report was written".to_owned(),
                    (n, true) => format!(
                        "sampled at intervals that changed during the run (last {})",
                        super::heap_every(n)
                    ),
                    (n, false) => format!("sampled {}", super::heap_every(n)),
                };
                let peak = match peak {
                    Some(p) => format!(
                        "kept peak {} at {} in {} (`analyzer peak`)",
                        super::bytes(p.live_bytes as f64),
                        seconds(p.time_ns as f64 / 1e9),
                        p.phase
                    ),
                    None => "no peak kept".to_owned(),
                };
                let late = crate::report::heap_late_words(i.heap_sampling_started_late);
                format!("{every}; {peak}{late}")
            }
        }
    )?;
    if !i.labels.is_empty() {
        let labels: Vec<String> = i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(out, "labels    {}", labels.join(", "))?;
    }
    writeln!(out)?;
    // As wide as the longest phase name (a program's own may run long).
    let w = super::name_width(i.phases.iter().map(|p| p.phase.as_str()), 24);
    writeln!(
        out,
        "{:<w$} {:>10} {:>12} {:>10} {:>14} {:>12} {:>8} {:>11}",
        "phase", "wall", "allocs", "reallocs", "bytes", "temps", "sites", "peak"
    )?;
    for p in &i.phases {
        writeln!(
            out,
            "{:<w$} {:>10} {:>12} {:>10} {:>14} {:>12} {:>8} {:>11}",
            p.phase,
            if p.timed {
                seconds(p.wall_s)
            } else {
                "-".to_owned()
            },
            p.alloc_count,
            p.realloc_count,
            p.bytes_requested,
            // `count` mode counts neither: a 0 would read as none found.
            p.temporary_count.map_or("-".to_owned(), |t| t.to_string()),
            p.sites.map_or("-".to_owned(), |n| n.to_string()),
            // The highest live bytes while the phase was the innermost in force.
            p.peak_live_bytes
                .map_or("-".to_owned(), |b| super::bytes(b as f64))
        )?;
    }
    writeln!(
        out,
        "(main: the run's time outside the named phases; allocs: allocations, where \
         `check`, `budget` and `diff` count allocs and reallocs together; peak: the \
         highest live bytes while the phase was the innermost in force; -: a phase the \
         tracer did not time, what count mode does not record, or a report from before \
         the tracer recorded it)"
    )?;
    writeln!(out)?;
    let d = &i.dropped;
    let dropped: Vec<String> = [
        (d.late_alloc_count, "allocations after their thread's exit"),
        (d.late_free_count, "frees after their thread's exit"),
        (
            d.followed_skipped,
            "blocks not followed (65,536 followed at once)",
        ),
        (
            d.followed_dropped,
            "followed blocks dropped when recording of frees stopped",
        ),
        (
            d.stacks_at_depth_limit as u64,
            "stacks cut at the depth limit",
        ),
        (
            d.foreign_stack_walks,
            "allocations off the thread's stack (no frames)",
        ),
        (d.folded_sites, "sites past the tracer's cap, folded"),
        (
            d.stacks_ending_early,
            "stacks ending before main or a thread's start",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .chain(
        d.phases_merged
            .then(|| "phases past the 15th merged".to_owned()),
    )
    .collect();
    // What the tables lack (frames past the depth, blocks not followed, allocations
    // after their thread's exit, ...): "dropped" read as allocations lost from the
    // counts to a user of --depth 16.
    writeln!(
        out,
        "not kept  {}",
        if dropped.is_empty() {
            "nothing".to_owned()
        } else {
            dropped.join("; ")
        }
    )?;
    let tables: Vec<String> = i
        .tables
        .iter()
        .map(|t| {
            format!(
                "{} ({} row{})",
                t.file,
                t.rows,
                if t.rows == 1 { "" } else { "s" }
            )
        })
        .collect();
    writeln!(out, "tables    {}", tables.join(", "))
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
    let rates: Vec<String> = c
        .copy_rates
        .iter()
        .map(|r| {
            format!(
                "{:.1} at {}",
                r.bytes_per_ns,
                super::bytes(r.size_bytes as f64)
            )
        })
        .collect();
    writeln!(
        out,
        "memcpy bytes/ns: {}{:.1} at 4.0 MiB",
        rates.iter().map(|r| format!("{r}, ")).collect::<String>(),
        c.copy_bytes_per_ns
    )?;
    for o in &c.operations {
        writeln!(
            out,
            "{}: {:.1} ns per event, {:.1} ns beyond the allocator ({})",
            o.name, o.ns, o.beyond_allocator_ns, o.what
        )?;
    }
    Ok(())
}
