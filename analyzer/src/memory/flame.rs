//! Live bytes at a moment as folded stacks and flame graphs (inferno's), of one
//! report or, differential, of two.

use super::{Memory, Moment};
use crate::export;
use crate::rank::frames_of;
use crate::report::Report;
use std::collections::HashMap;

/// Folded stacks weighted by live bytes at `moment` (for `flamegraph` and `export
/// --format folded`, `--by peak-bytes` or `end-bytes`), keeping `which` frames: the
/// readable ones for a flame graph, all of them for other tools (as `export::folded`
/// keeps for allocations).
pub fn folded(
    report: &Report,
    memory: &Memory,
    moment: Moment,
    phase: Option<&str>,
    which: export::Frames,
) -> Vec<String> {
    let rows = match moment {
        Moment::Peak => &memory.peak,
        Moment::End => &memory.end,
    };
    let mut by_site: HashMap<u64, u64> = HashMap::new();
    for r in rows.iter().filter(|r| phase.is_none_or(|p| r.phase == p)) {
        let b = by_site.entry(r.site_id).or_default();
        *b = b.saturating_add(r.live_bytes_estimate);
    }
    let mut stacks: std::collections::BTreeMap<String, u64> = Default::default();
    for (site, bytes) in by_site.into_iter().filter(|(_, b)| *b > 0) {
        let stack = export::folded_stack(frames_of(&report.frames, site), which);
        let sum = stacks.entry(stack).or_default();
        *sum = sum.saturating_add(bytes);
    }
    stacks
        .into_iter()
        .map(|(stack, bytes)| format!("{stack} {bytes}"))
        .collect()
}

/// Whether nothing live at `moment` is an answer: heap sampling saw the moment (a
/// sampled row of it, or sampling on when the report was written and, for the peak,
/// a peak kept). A tracer keeps the peak's moment with heap sampling off too.
pub fn moment_sampled(report: &Report, memory: &Memory, moment: Moment) -> bool {
    let m = &report.manifest;
    match moment {
        Moment::Peak => !memory.peak.is_empty() || (m.heap_peak.is_some() && m.heap_interval > 0),
        Moment::End => !memory.end.is_empty() || m.heap_interval > 0,
    }
}

/// Why a moment that [`moment_sampled`] turns down has no answer.
pub const UNSEEN: &str = "heap sampling did not see that moment (it was off, ALLOC_TRACE_HEAP or synth-driver --heap-sample, or kept no peak)";

/// Why a moment that heap sampling saw ([`moment_sampled`]) has no live stacks.
pub const NOTHING_LIVE: &str = "no sampled block was live then";

/// A flame graph SVG of live bytes at `moment` (`flamegraph --by peak-bytes` or
/// `end-bytes`); with nothing live then, a picture saying why, and the why, for the
/// caller to say too.
pub fn flamegraph(
    report: &Report,
    memory: &Memory,
    moment: Moment,
    phase: Option<&str>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<Option<String>> {
    let lines = folded(report, memory, moment, phase, export::Frames::Readable);
    if lines.is_empty() && !moment_sampled(report, memory, moment) {
        // (Sampling on and nothing live then is drawn, below: an answer.)
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: no live bytes to draw: {UNSEEN}", report.dir.display()),
        ));
    }
    let title = format!(
        "Live bytes {} (heap sampling): {}{}",
        match moment {
            Moment::Peak => "at the kept peak",
            Moment::End => "at the end of the run",
        },
        export::report_name(report),
        export::phase_words(phase)
    );
    if lines.is_empty() {
        // Heap sampling was on and nothing it sampled was live then (a program that
        // freed everything), or nothing of the phase: an answer, drawn as one.
        let why = none_live(&[(report, memory)], moment, phase);
        write!(out, "{}", export::empty_svg(&title, &why))?;
        return Ok(Some(format!("no live bytes to draw: {why}")));
    }
    // The title says the widths are heap sampling's estimates; the subtitle what
    // they leave out.
    let late = report
        .manifest
        .heap_sampling_started_late
        .then(|| format!("heap sampling {}", crate::report::HEAP_STARTED_LATE));
    export::readable_flamegraph(&lines, title, "bytes", late, out)?;
    Ok(None)
}

/// Why no sampled block of `sides` is drawn at `moment`: none was live, or those
/// live were allocated in other phases than `phase`.
fn none_live(sides: &[(&Report, &Memory)], moment: Moment, phase: Option<&str>) -> String {
    phase_held_none(sides, moment, phase)
        .unwrap_or_else(|| "no sampled block was live then".to_owned())
}

/// Where `sides` had sampled blocks live at `moment` but none allocated in `phase`,
/// the words for it.
pub fn phase_held_none(
    sides: &[(&Report, &Memory)],
    moment: Moment,
    phase: Option<&str>,
) -> Option<String> {
    let p = phase?;
    sides
        .iter()
        .any(|(r, m)| !folded(r, m, moment, None, export::Frames::Readable).is_empty())
        .then(|| format!("none of the sampled blocks live then was allocated in phase {p}"))
}

/// A differential flame graph SVG of live bytes at `moment` in two reports
/// (`flamegraph --diff --by peak-bytes` or `end-bytes`): the stacks of the side
/// `widths` names, red where the change holds more than the base. Heap sampling's
/// estimates, so small differences are its noise; and a vector grown by doubling is
/// charged to the stack that last grew it, so a patch that reorders gadgets moves
/// bytes between stacks with none changed (`peak --base` pairs those rows by naming
/// frame).
pub fn flamegraph_diff(
    base: (&Report, &Memory),
    change: (&Report, &Memory),
    moment: Moment,
    phase: Option<&str>,
    widths: export::Widths,
    warning: Option<String>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let text = |(r, m): (&Report, &Memory)| {
        let mut t = folded(r, m, moment, phase, export::Frames::Readable).join("\n");
        t.push('\n');
        t
    };
    let refuse = |why: String| Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    // A side whose moment was not sampled would read as all growth, or all loss.
    for (side, (r, m)) in [("base", base), ("change", change)] {
        if !moment_sampled(r, m, moment) {
            return refuse(format!(
                "the {side} ({}) has no live bytes to compare: {UNSEEN}",
                r.dir.display()
            ));
        }
    }
    let (a, b) = (text(base), text(change));
    let title = format!(
        "Live bytes {} (heap sampling): {} against {}{}",
        match moment {
            Moment::Peak => "at the kept peak",
            Moment::End => "at the end of the run",
        },
        export::report_name(change.0),
        export::report_name(base.0),
        export::phase_words(phase)
    );
    if a.trim().is_empty() && b.trim().is_empty() {
        // Both sampled, and nothing live in either: an answer, as for one report.
        let why = none_live(&[base, change], moment, phase);
        return write!(out, "{}", export::empty_svg(&title, &why));
    }
    // With nothing of the drawn side's live, there is nothing to draw at its widths.
    let (drawn, name, side, other) = match widths {
        export::Widths::Change => (&b, "change", change, "base"),
        export::Widths::Base => (&a, "base", base, "change"),
    };
    if drawn.trim().is_empty() {
        let lists = match moment {
            Moment::Peak => "peak",
            Moment::End => "leaks",
        };
        let none = match phase {
            Some(p) => {
                format!("none of the {name}'s sampled blocks live then was allocated in phase {p}")
            }
            None => format!("no sampled block of the {name} was live then"),
        };
        return refuse(format!(
            "{none} ({}): nothing to draw at its widths (`--widths {other}` draws the \
             {other}'s stacks; `{lists} --base` lists what each held)",
            side.0.dir.display()
        ));
    }
    let drawing = export::Drawing {
        title,
        unit: "bytes",
        widths,
        notes: warning
            .into_iter()
            .chain(std::iter::once(
                "heap-sampling estimates; a vector is charged to the stack that last grew it"
                    .to_owned(),
            ))
            .chain(
                [("base", base.0), ("change", change.0)]
                    .into_iter()
                    .filter(|(_, r)| r.manifest.heap_sampling_started_late)
                    .map(|(side, _)| {
                        format!(
                            "the {side}'s heap sampling {}",
                            crate::report::HEAP_STARTED_LATE
                        )
                    }),
            )
            .collect(),
        intervals: None,
        estimated: true,
    };
    export::differential_flamegraph(&a, &b, drawing, out)
}
