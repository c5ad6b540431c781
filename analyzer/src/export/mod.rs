//! Reports in the formats other tools read: folded stacks (flamegraph.pl, inferno,
//! speedscope) and flame graph SVGs (inferno) here, the frames of a differential one
//! in `diff_flame`; pprof's protobuf profile in `pprof`; the named-sites table
//! (parquet) in `named_sites`.

mod diff_flame;
mod named_sites;
mod pprof;

pub use diff_flame::Intervals;
pub use named_sites::{NamedSite, named_sites, named_sites_parquet};
pub use pprof::{InUse, estimates as pprof_estimates, heap_sampled, pprof, pprof_protobuf};

use crate::naming::{self, without_generics};
use crate::rank::frames_of;
use crate::report::{FrameRow, Report};
use alloc_tracer_format::frames::file_name;
use alloc_tracer_format::site;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

/// What a stack's weight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// Allocations and reallocs.
    Count,
    /// Requested bytes.
    Bytes,
    /// Temporaries (blocks freed before their thread's next allocation).
    Temporaries,
}

impl Weight {
    fn of(self, row: &crate::report::SiteRow) -> u64 {
        match self {
            Weight::Count => row.calls(),
            Weight::Bytes => row.bytes_requested,
            Weight::Temporaries => row.temporary_count,
        }
    }

    /// What a unit of the weight is, for titles and tooltips.
    pub fn unit(self) -> &'static str {
        match self {
            Weight::Count => "allocations",
            Weight::Bytes => "bytes",
            Weight::Temporaries => "temporaries",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Weight::Count => "Allocations by count",
            Weight::Bytes => "Allocations by requested bytes",
            Weight::Temporaries => "Temporaries",
        }
    }
}

/// Which frames of a stack a folded line keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frames {
    /// Every frame the report has (what other tools expect of folded stacks).
    All,
    /// For people reading a flame graph: from the site's naming frame out (the
    /// allocator, std, hashbrown, rayon and tracer frames inside it folded into it), each frame
    /// named with its file (`enforce (multieq.rs)`), and stacks that do not reach
    /// `main` or a thread's start under one root, [`CUT_SHORT`], instead of each
    /// rooted in whatever frame it was cut at.
    Readable,
}

/// The root of stacks cut short (at the depth limit, or by frames without frame
/// pointers) in [`Frames::Readable`] stacks.
pub const CUT_SHORT: &str = "[stack cut short]";

/// Folded stacks: one line per distinct stack, `outer;...;inner weight`, sorted.
/// Frame names are functions without generic arguments (so `f::<T>` is `f`; `;`
/// would split a frame, so it becomes `:`).
pub fn folded(report: &Report, by: Weight, phase: Option<&str>) -> Vec<String> {
    folded_frames(report, by, phase, Frames::All)
}

/// [`folded`], keeping `which` frames of each stack.
pub fn folded_frames(
    report: &Report,
    by: Weight,
    phase: Option<&str>,
    which: Frames,
) -> Vec<String> {
    let mut weights: BTreeMap<String, u64> = BTreeMap::new();
    let mut stacks: HashMap<u64, String> = HashMap::new();
    for row in report.rows(phase) {
        let w = by.of(row);
        if w == 0 {
            continue;
        }
        let stack = stacks
            .entry(row.site_id)
            .or_insert_with(|| folded_stack(frames_of(&report.frames, row.site_id), which));
        let sum = weights.entry(stack.clone()).or_default();
        *sum = sum.saturating_add(w);
    }
    weights
        .into_iter()
        .map(|(stack, w)| format!("{stack} {w}"))
        .collect()
}

/// One stack in the folded format, outermost frame first, without its weight,
/// keeping `which` of its frames.
pub fn folded_stack(frames: &[FrameRow], which: Frames) -> String {
    let mut frames = frames;
    let mut root = None;
    if which == Frames::Readable {
        frames = &frames[naming::naming_index(frames).unwrap_or(0)..];
        if frames
            .last()
            .is_some_and(|f| !site::is_stack_root(&without_generics(&f.function)))
        {
            root = Some(CUT_SHORT.to_owned());
        }
    }
    let names: Vec<String> = root
        .into_iter()
        .chain(frames.iter().rev().map(|f| {
            match which {
                Frames::Readable => readable_name(f),
                Frames::All => without_generics(&f.function)
                    .trim_end_matches("::")
                    .to_owned(),
            }
            .replace(';', ":")
        }))
        .collect();
    if names.is_empty() {
        "(no frames)".to_owned()
    } else {
        names.join(";")
    }
}

/// A frame's name for people: its function without generics and, where the report
/// has it, its file (`enforce (multieq.rs)`): line tables name a function without
/// its module (`enforce`, `{closure#0}`, `new`), and the file tells apart those of
/// one name.
pub fn readable_name(f: &FrameRow) -> String {
    let name = without_generics(&f.function);
    let name = name.trim_end_matches("::");
    match &f.file {
        Some(file) => format!("{name} ({})", file_name(file)),
        None => name.to_owned(),
    }
}

/// The report's name in titles: its folder's name.
pub fn report_name(report: &Report) -> String {
    report.dir.file_name().map_or_else(
        || report.dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `, phase P` or `, all phases`, for titles.
pub fn phase_words(phase: Option<&str>) -> String {
    phase.map_or(", all phases".to_owned(), |p| format!(", phase {p}"))
}

/// A flame graph SVG (inferno) of the [`Frames::Readable`] folded stacks, titled with
/// the report and phase. With nothing to draw (no site of the phase, or none with
/// temporaries), a picture saying why, and the why, for the caller to say too; a
/// report that records no sites has no answer (an error).
pub fn flamegraph(
    report: &Report,
    by: Weight,
    phase: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<Option<String>> {
    let lines = folded_frames(report, by, phase, Frames::Readable);
    if lines.is_empty() && report.count_only() {
        return Err(nothing_to_draw(&[report], by, phase));
    }
    let title = format!(
        "{}: {}{}",
        by.title(),
        report_name(report),
        phase_words(phase)
    );
    if lines.is_empty() {
        let why = format!(
            "no {} to draw: {}",
            by.unit(),
            why_nothing(&[report], phase)
        );
        write!(out, "{}", empty_svg(&title, &why))?;
        return Ok(Some(why));
    }
    readable_flamegraph(&lines, title, by.unit(), sampled_words(report), out)?;
    Ok(None)
}

/// A picture that answers with nothing: `title`, and `why` under it.
pub fn empty_svg(title: &str, why: &str) -> String {
    let escape = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let (escaped, why) = (escape(title), escape(why));
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\"90\">\
         <text x=\"600\" y=\"32\" text-anchor=\"middle\" font-family=\"sans-serif\" \
         font-size=\"17\">{escaped}</text>\
         <text x=\"600\" y=\"64\" text-anchor=\"middle\" font-family=\"sans-serif\" \
         font-size=\"14\">{why}</text></svg>\n"
    )
}

/// What a `sample:N` report's allocation figures are, for a subtitle or a note: the
/// picture outlives the terminal, and its widths read as counts. `None` for an exact
/// report.
pub fn sampled_words(report: &Report) -> Option<String> {
    report.sampled().then(|| {
        format!(
            "estimates ({}: each sampled allocation counts {}; `analyzer info` gives \
             each phase's exact totals)",
            report.stacks_mode(),
            report.sample_weight_words()
        )
    })
}

/// A flame graph SVG (inferno) of [`Frames::Readable`] folded lines, its subtitle
/// saying how they were folded, after `estimates` where the widths are.
pub fn readable_flamegraph(
    lines: &[String],
    title: String,
    unit: &str,
    estimates: Option<String>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title;
    let folding = format!(
        "allocator, std, hashbrown, rayon and tracer frames folded into the first frame \
         outside them; stacks that end before main or a thread's start under {CUT_SHORT}"
    );
    with_subtitle(
        &mut opts,
        match estimates {
            Some(e) => format!("{e}; {folding}"),
            None => folding,
        },
    );
    opts.count_name = unit.to_owned();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(io::Error::other)
}

/// Sets `subtitle`, the image made wider where it would not fit: inferno's default
/// image is 1,200 pixels wide and centres the subtitle in it, cut at the edges.
fn with_subtitle(opts: &mut inferno::flamegraph::Options, subtitle: String) {
    let needed = subtitle.chars().count() as f64 * opts.font_size as f64 * opts.font_width;
    opts.image_width = Some(1200.max(needed.ceil() as usize + 40));
    opts.subtitle = Some(subtitle);
}

/// Why a `count` report has no sites to draw or export.
pub const COUNT_RECORDS_NO_SITES: &str =
    "a count-mode report records no sites (run with ALLOC_TRACE=sites or sample:N)";

/// Why the reports' folded stacks are empty, from what the reports say of
/// themselves (the words of `top`'s note).
pub fn why_nothing(reports: &[&Report], phase: Option<&str>) -> &'static str {
    let sampled = reports.iter().any(|r| r.sampled());
    if reports.iter().any(|r| r.count_only()) {
        COUNT_RECORDS_NO_SITES
    } else if reports.iter().any(|r| r.rows(phase).next().is_some()) {
        // Sites, but none weighs anything (no temporaries, say).
        "the sites recorded hold none"
    } else {
        match (phase.is_some(), sampled) {
            (true, true) => "no allocation of this phase was sampled",
            (true, false) => "no allocation of this phase was recorded",
            (false, true) => "no allocation was sampled",
            (false, false) => "no allocation was recorded",
        }
    }
}

/// Why there is nothing to draw by `by`, as an error.
fn nothing_to_draw(reports: &[&Report], by: Weight, phase: Option<&str>) -> io::Error {
    let why = why_nothing(reports, phase);
    let named: Vec<String> = reports
        .iter()
        .map(|r| r.dir.display().to_string())
        .collect();
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: no {} to draw: {why}", named.join(" and "), by.unit()),
    )
}

/// A differential flame graph SVG: the stacks of the side `widths` names, at its
/// weights, each frame named and coloured by the change of the stacks through it
/// (`diff_flame`). Stacks are matched by their frames' functions and file names
/// (not paths: a crate built from a git checkout matches its registry build), so a
/// function a patch moved to another file reads as gone from one and new in the
/// other. `warning` (reports of other work, say) leads the subtitle.
pub fn flamegraph_diff(
    base: &Report,
    change: &Report,
    by: Weight,
    phase: Option<&str>,
    widths: Widths,
    warning: Option<String>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let text = |r: &Report| {
        let mut t = folded_frames(r, by, phase, Frames::Readable).join("\n");
        t.push('\n');
        t
    };
    let (a, b) = (text(base), text(change));
    if a.trim().is_empty() && b.trim().is_empty() {
        return Err(nothing_to_draw(&[base, change], by, phase));
    }
    let title = format!(
        "{}: {} against {}{}",
        by.title(),
        report_name(change),
        report_name(base),
        phase_words(phase)
    );
    let (ma, mb) = (&base.manifest, &change.manifest);
    let sampled = [ma, mb].iter().any(|m| m.sample_interval > 1);
    let mut notes: Vec<String> = warning.into_iter().collect();
    if sampled {
        let modes = if base.stacks_mode() == change.stacks_mode() {
            base.stacks_mode().to_owned()
        } else {
            format!("{} and {}", base.stacks_mode(), change.stacks_mode())
        };
        notes.push(match by {
            // (Below: no bound for them.)
            Weight::Bytes => format!("estimates ({modes}), none marked as noise"),
            _ => format!("estimates ({modes})"),
        });
        // Allocations and bytes the phase totals count exactly in every mode: the
        // figures the estimates below stand for.
        let exact = |r: &Report| match by {
            Weight::Count => Some(r.calls(phase)),
            Weight::Bytes => Some(r.phase_sum(phase, |p| p.bytes_requested)),
            Weight::Temporaries => None,
        };
        if let (Some(before), Some(after)) = (exact(base), exact(change)) {
            notes.push(format!(
                "counted exactly: {} -> {} {} ({})",
                diff_flame::grouped(before.into()),
                diff_flame::grouped(after.into()),
                by.unit(),
                diff_flame::against(before, after)
            ));
        }
    }
    // A sampled count's estimate varies as its interval times itself; bytes vary
    // with the blocks' sizes too, which folded stacks do not keep.
    let intervals = (sampled && by != Weight::Bytes).then(|| Intervals {
        base: ma.sample_interval.max(1),
        change: mb.sample_interval.max(1),
    });
    let drawing = Drawing {
        title,
        unit: by.unit(),
        widths,
        notes,
        intervals,
        estimated: sampled,
    };
    differential_flamegraph(&a, &b, drawing, out)
}

/// What a differential flame graph says besides its stacks.
pub struct Drawing<'a> {
    /// Its title.
    pub title: String,
    /// What a unit of weight is (`allocations`, `bytes`).
    pub unit: &'a str,
    /// Whose stacks it draws.
    pub widths: Widths,
    /// What the subtitle says first (a warning first of all).
    pub notes: Vec<String>,
    /// Where the weights are counts estimated from samples: each side's interval,
    /// so that changes under two standard errors are marked `~`.
    pub intervals: Option<Intervals>,
    /// Whether the weights are estimates (sampled stacks, heap sampling): the
    /// subtitle's totals say so.
    pub estimated: bool,
}

/// Whose stacks a differential flame graph draws, at their widths: the change's
/// (what a patch left or added; a stack it removed is not drawn) or the base's
/// (what a patch removed shows, in blue; a stack it added is not drawn).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Widths {
    /// The change's stacks.
    #[default]
    Change,
    /// The base's stacks.
    Base,
}

impl Widths {
    /// The subtitle's words for it.
    fn words(self) -> &'static str {
        match self {
            Widths::Change => {
                "widths: stacks of the change (--widths base: of the base); red: more than \
                 the base, blue: fewer"
            }
            Widths::Base => "widths: stacks of the base; red: more in the change, blue: fewer",
        }
    }
}

/// A differential flame graph SVG of two folded texts (`stack weight` lines): the
/// stacks of the side `drawing.widths` names at their widths, each frame named with
/// the change of the stacks through it and red where the change has more than the
/// base, blue where fewer (`diff_flame`); the subtitle gives `drawing.notes`, the
/// widths, the totals and what `~` means where a frame has it. The image is made
/// wider where the subtitle would not fit.
pub fn differential_flamegraph(
    base: &str,
    change: &str,
    drawing: Drawing,
    out: &mut dyn Write,
) -> io::Result<()> {
    let Drawing {
        title,
        unit,
        widths,
        mut notes,
        intervals,
        estimated,
    } = drawing;
    let mut merged = diff_flame::merge(base, change, widths, unit, intervals)?;
    if merged.totals == (0, 0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("neither report has {unit} to draw"),
        ));
    }
    if merged.lines.is_empty() {
        let (side, other) = match widths {
            Widths::Change => ("change", "base"),
            Widths::Base => ("base", "change"),
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the {side} has no {unit} to draw at its widths (`--widths {other}` draws \
                 the {other}'s stacks)"
            ),
        ));
    }
    let (before, after) = merged.totals;
    notes.push(widths.words().to_owned());
    notes.push(format!(
        "all{}: {} -> {} {unit} ({})",
        if estimated { " as drawn" } else { "" },
        diff_flame::grouped(before.into()),
        diff_flame::grouped(after.into()),
        diff_flame::against(before, after)
    ));
    if merged.within_noise > 0 {
        notes.push("~: under two standard errors of sampling".to_owned());
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title;
    with_subtitle(&mut opts, notes.join("; "));
    opts.count_name = unit.to_owned();
    opts.palette_map = Some(&mut merged.palette);
    inferno::flamegraph::from_lines(&mut opts, merged.lines.iter().map(String::as_str), out)
        .map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_stacks_start_at_the_naming_frame_and_root_the_cut_ones() {
        let lib = "/r/gadget-1.0.0/src/lib.rs";
        let stack = |outer: &str| {
            vec![
                FrameRow::test(
                    "alloc::raw_vec::finish_grow",
                    "/rustc/x/library/alloc/src/raw_vec/mod.rs",
                    Some(1),
                ),
                FrameRow::test("gadget::enforce<T>", lib, Some(2)),
                // `;` separates frames in the format: a name holding one is mended.
                FrameRow::test("<[u8; 32] as gadget::Fill>::fill", lib, Some(3)),
                FrameRow::test(outer, "/r/app/src/main.rs", Some(4)),
            ]
        };
        let rooted = stack("main");
        assert_eq!(
            folded_stack(&rooted, Frames::Readable),
            "main (main.rs);[u8: 32] as gadget::Fill::fill (lib.rs);gadget::enforce (lib.rs)"
        );
        // Every frame, with no file, for other tools.
        assert_eq!(
            folded_stack(&rooted, Frames::All),
            "main;[u8: 32] as gadget::Fill::fill;gadget::enforce;alloc::raw_vec::finish_grow"
        );
        // A stack cut at the depth limit, under one root rather than its last frame.
        assert_eq!(
            folded_stack(&stack("app::worker"), Frames::Readable),
            format!(
                "{CUT_SHORT};app::worker (main.rs);[u8: 32] as gadget::Fill::fill (lib.rs);\
                 gadget::enforce (lib.rs)"
            )
        );
        assert_eq!(folded_stack(&[], Frames::All), "(no frames)");
    }

    #[test]
    fn a_side_with_nothing_to_draw_names_the_other_widths() {
        let draw = |widths| {
            let mut svg = Vec::new();
            let drawing = Drawing {
                title: "t".to_owned(),
                unit: "bytes",
                widths,
                notes: vec![],
                intervals: None,
                estimated: false,
            };
            differential_flamegraph("main;a 5\n", "\n", drawing, &mut svg)
                .map(|()| String::from_utf8(svg).unwrap())
        };
        let e = draw(Widths::Change).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the change has no bytes to draw at its widths (`--widths base` draws the base's stacks)"
        );
        let svg = draw(Widths::Base).unwrap();
        assert!(svg.contains("a [-5 bytes, gone]"), "{svg}");
    }
}
