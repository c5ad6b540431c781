//! `analyzer timeline -o FILE.svg`: live bytes over time, and the process's resident
//! memory where the report sampled it, the phases shaded behind the lines, the kept
//! peak marked, and the high-water marks of both (which points taken every few
//! milliseconds can miss) as faint lines; drawn with plotters (SVG, text left to the
//! viewer's fonts).

use super::{Memory, render::bytes};
use crate::report::Report;
use alloc_tracer_format::schema;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::io;

/// Phases in time order as (phase, first second, last second) spans.
fn spans(memory: &Memory) -> Vec<(String, f64, f64)> {
    let mut spans: Vec<(String, f64, f64)> = vec![];
    for p in &memory.timeline {
        let t = p.time_ns as f64 / 1e9;
        match spans.last_mut() {
            Some(last) if last.0 == p.phase => last.2 = t,
            Some(last) => {
                last.2 = t;
                spans.push((p.phase.clone(), t, t));
            }
            None => spans.push((p.phase.clone(), t, t)),
        }
    }
    spans
}

/// Whether the timeline sampled resident memory (reports written before it did, and
/// runs without `/proc`, hold zeros).
fn has_rss(memory: &Memory) -> bool {
    memory.timeline.iter().any(|p| p.rss_bytes > 0)
}

/// The plot as an SVG document. An error when the report has no timeline.
pub fn timeline(report: &Report, memory: &Memory) -> io::Result<String> {
    let m = &report.manifest;
    if memory.timeline.is_empty() {
        // The manifest says which: no such table listed (a tracer from before it),
        // an interval of 0 when the timeline was off (reports from before the field
        // read 0 too), or a table of no point.
        let listed = m.tables.iter().any(|t| t.file == schema::TIMELINE.file);
        let why = if !listed && m.timeline_interval_ms != 0 {
            "the report lists no timeline table (written by a tracer from before timelines?)"
        } else if m.timeline_interval_ms == 0 {
            "the timeline was off (ALLOC_TRACE_TIMELINE_MS=0, synth-driver --timeline-ms 0), or the report is from a tracer older than timelines"
        } else {
            "its timeline table holds no point"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: no timeline: {why}", report.dir.display()),
        ));
    }
    let peak = m.heap_peak.as_ref();
    let rss = has_rss(memory);
    // The kernel's high-water mark, drawn beside the sampled line (the samples, 10 ms
    // apart, can miss the top).
    let max_rss = if rss { m.totals.max_rss_bytes } else { 0 };
    // The same for live bytes (exact to within its bound), where the points can lie
    // below it.
    let highest_live = (
        m.totals.peak_live_bytes,
        m.totals.peak_live_bytes_error_bytes,
    );
    let top = memory
        .timeline
        .iter()
        .map(|p| p.live_bytes)
        .chain(
            memory
                .timeline
                .iter()
                .filter(|_| rss)
                .map(|p| p.rss_bytes.min(i64::MAX as u64) as i64),
        )
        .chain(peak.map(|p| p.live_bytes))
        .chain([max_rss.min(i64::MAX as u64) as i64, highest_live.0])
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (unit, scale) = if top >= (1u64 << 30) as f64 {
        ("GiB", (1u64 << 30) as f64)
    } else {
        ("MiB", (1u64 << 20) as f64)
    };
    let t_end = memory
        .timeline
        .last()
        .map_or(1.0, |p| p.time_ns as f64 / 1e9)
        .max(peak.map_or(0.0, |p| p.time_ns as f64 / 1e9))
        .max(1e-3);
    let y_top = top / scale * 1.12;
    let name = report.dir.file_name().map_or_else(
        || report.dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let what = if rss {
        "Live bytes and resident memory"
    } else {
        "Live bytes"
    };
    // A run stopped early ends where it stopped, not where it would have.
    let stopped = m
        .incomplete
        .as_ref()
        .map_or(String::new(), |why| format!("; stopped early: {why}"));
    let title = format!(
        "{what} over time: {name} ({}, a point every {} ms{stopped})",
        m.mode, m.timeline_interval_ms
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 520)).into_drawing_area();
        let marks = Marks {
            peak,
            max_rss,
            highest_live,
            interval_ms: m.timeline_interval_ms,
        };
        draw(&root, memory, &title, t_end, y_top, unit, scale, &marks)
            .map_err(|e| io::Error::other(e.to_string()))?;
        root.present()
            .map_err(|e| io::Error::other(e.to_string()))?;
    }
    Ok(svg)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// The phases every synth-driver report has, each given its own colour, so that one
/// phase is drawn alike in every report's timeline (a phase the plot meets first in
/// one report and second in another kept its colour by order).
const KNOWN_PHASES: [&str; 4] = ["main", "setup", "synthesize", "enforce"];

/// The palette index of `phase`, the `nth` phase the plot met: a known phase's own,
/// the others' after them by order met.
fn phase_colour(phase: &str, nth: usize) -> usize {
    match KNOWN_PHASES.iter().position(|p| *p == phase) {
        Some(i) => i + 1,
        None => KNOWN_PHASES.len() + 1 + nth,
    }
}

/// Decimals for an axis from 0 to `end`: enough to tell its ten or so ticks apart
/// (a 0.15 s run's ticks read 0.02, 0.04, not 0.0, 0.0), and at least one.
fn decimals(end: f64) -> usize {
    let step = end / 10.0;
    if step > 0.0 && step.is_finite() {
        // A step just under a power of ten (0.0095) gets that power's ticks (0.01).
        (-step.log10() - 0.1).ceil().clamp(1.0, 6.0) as usize
    } else {
        1
    }
}

/// What the plot marks besides its lines.
struct Marks<'m> {
    /// The kept peak (heap sampling's), a dot.
    peak: Option<&'m alloc_tracer_format::manifest::HeapPeak>,
    /// The kernel's high-water mark of resident memory (0: none), a faint line.
    max_rss: u64,
    /// The run's highest live bytes (0 or less: none), a faint line, and the bound
    /// on their error (threads that had not published their last bytes).
    highest_live: (i64, u64),
    /// The timeline's interval, in milliseconds.
    interval_ms: u64,
}

#[allow(clippy::too_many_arguments)]
fn draw(
    root: &Area<'_>,
    memory: &Memory,
    title: &str,
    t_end: f64,
    y_top: f64,
    unit: &str,
    scale: f64,
    marks: &Marks<'_>,
) -> Result<(), Box<dyn std::error::Error>> {
    let (peak, max_rss) = (marks.peak, marks.max_rss);
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_end, 0f64..y_top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        .x_desc("seconds after tracing started")
        .y_desc(unit.to_string())
        .y_label_formatter(&|v| format!("{:.*}", decimals(y_top), v))
        .x_label_formatter(&|v| format!("{:.*}", decimals(t_end), v))
        .draw()?;
    let mut phases: Vec<String> = vec![];
    for (phase, t0, t1) in spans(memory) {
        let (i, first) = match phases.iter().position(|p| *p == phase) {
            Some(i) => (i, false),
            None => {
                phases.push(phase.clone());
                (phases.len() - 1, true)
            }
        };
        let colour = Palette99::pick(phase_colour(&phase, i)).mix(0.18);
        let series = chart.draw_series(std::iter::once(Rectangle::new(
            [(t0, 0.0), (t1, y_top)],
            colour.filled(),
        )))?;
        if first {
            series
                .label(format!("phase {phase}"))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled())
                });
        }
    }
    chart
        .draw_series(LineSeries::new(
            memory
                .timeline
                .iter()
                .map(|p| (p.time_ns as f64 / 1e9, p.live_bytes as f64 / scale)),
            BLUE.stroke_width(2),
        ))?
        .label("live bytes")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLUE.stroke_width(2)));
    if let (highest, error) = marks.highest_live
        && highest > 0
    {
        let y = highest as f64 / scale;
        let within = if error > 0 {
            format!("within {}", bytes(error as f64))
        } else {
            "exact".to_owned()
        };
        let label = format!(
            "highest live bytes {} ({within}; points {} ms apart can miss it)",
            bytes(highest as f64),
            marks.interval_ms
        );
        high_water(&mut chart, y, t_end, BLUE.mix(0.4), label)?;
    }
    if has_rss(memory) {
        let orange = RGBColor(230, 120, 0);
        chart
            .draw_series(LineSeries::new(
                memory
                    .timeline
                    .iter()
                    // 0 is unknown (a failed read), not nothing resident.
                    .filter(|p| p.rss_bytes > 0)
                    .map(|p| (p.time_ns as f64 / 1e9, p.rss_bytes as f64 / scale)),
                orange.stroke_width(2),
            ))?
            .label("resident set size")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], orange.stroke_width(2)));
        if max_rss > 0 {
            let label = format!(
                "peak resident set size {} (the kernel's high-water mark)",
                bytes(max_rss as f64)
            );
            high_water(
                &mut chart,
                max_rss as f64 / scale,
                t_end,
                orange.mix(0.5),
                label,
            )?;
        }
    }
    if let Some(p) = peak {
        let (t, y) = (p.time_ns as f64 / 1e9, p.live_bytes as f64 / scale);
        chart.draw_series(std::iter::once(Circle::new((t, y), 5, RED.filled())))?;
        let label = format!(
            "kept peak {} at {t:.2} s ({})",
            bytes(p.live_bytes as f64),
            p.phase
        );
        // Left of the mark when it is in the right half, so the label stays inside.
        let anchor = if t > t_end / 2.0 {
            (t - t_end * 0.01, y + y_top * 0.03)
        } else {
            (t + t_end * 0.01, y + y_top * 0.03)
        };
        let pos = if t > t_end / 2.0 {
            Pos::new(HPos::Right, VPos::Bottom)
        } else {
            Pos::new(HPos::Left, VPos::Bottom)
        };
        chart.draw_series(std::iter::once(Text::new(
            label,
            anchor,
            ("sans-serif", 14).into_font().color(&RED).pos(pos),
        )))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

/// The plot's axes: seconds across, the unit up.
type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// A faint line across the plot at `y`, in the legend as `label`: a high-water mark,
/// kept as the run went, where the sampled points beside it can miss the top.
fn high_water(
    chart: &mut Chart<'_, '_>,
    y: f64,
    t_end: f64,
    faint: RGBAColor,
    label: String,
) -> Result<(), Box<dyn std::error::Error>> {
    chart
        .draw_series(LineSeries::new(
            [(0.0, y), (t_end, y)],
            faint.stroke_width(1),
        ))?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], faint.stroke_width(1)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::TimelinePoint;

    #[test]
    fn a_phase_has_one_colour_in_every_report() {
        assert_eq!(phase_colour("synthesize", 0), phase_colour("synthesize", 2));
        assert_ne!(phase_colour("setup", 0), phase_colour("synthesize", 1));
        // Others come after the known ones, apart from each other.
        assert_ne!(phase_colour("prove", 3), phase_colour("enforce", 3));
        assert_ne!(phase_colour("a", 0), phase_colour("b", 1));
    }

    #[test]
    fn axis_labels_tell_a_short_run_s_ticks_apart() {
        assert_eq!(decimals(0.15), 2);
        assert_eq!(decimals(0.095), 2);
        assert_eq!(decimals(0.012), 3);
        assert_eq!(decimals(3.1), 1);
        assert_eq!(decimals(136.6), 1);
        assert_eq!(decimals(0.0), 1);
    }

    fn memory(rss: &[u64]) -> Memory {
        Memory {
            timeline: rss
                .iter()
                .enumerate()
                .map(|(i, &rss_bytes)| TimelinePoint {
                    time_ns: i as u64 * 10_000_000,
                    phase: "synthesize".into(),
                    live_bytes: 100 << 20,
                    rss_bytes,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn resident_memory_is_drawn_where_sampled_and_sets_the_scale() {
        // RSS at 3 GiB over 100 MiB live: the axis goes to GiB for it, and its line
        // and legend are there.
        let svg = timeline(&Report::default(), &memory(&[3 << 30, 3 << 30, 3 << 30])).unwrap();
        assert!(
            svg.contains("Live bytes and resident memory over time"),
            "{svg}"
        );
        assert!(svg.contains("resident set size"));
        assert!(svg.contains("\nGiB\n"), "{svg}");
        // The kernel's high-water mark, where the report has it.
        let mut r = Report::default();
        r.manifest.totals.max_rss_bytes = 4 << 30;
        let svg = timeline(&r, &memory(&[3 << 30, 3 << 30, 3 << 30])).unwrap();
        assert!(
            svg.contains("peak resident set size 4.00 GiB (the kernel&apos;s high-water mark)"),
            "{svg}"
        );
        // The run's highest live bytes, within their bound, beside the points that can miss it;
        // heap sampling's kept peak named as such.
        r.manifest.totals.peak_live_bytes = 150 << 20;
        r.manifest.totals.peak_live_bytes_error_bytes = 256 << 10;
        r.manifest.timeline_interval_ms = 10;
        r.manifest.heap_peak = Some(alloc_tracer_format::manifest::HeapPeak {
            live_bytes: 149 << 20,
            time_ns: 10_000_000,
            phase: "synthesize".into(),
        });
        let svg = timeline(&r, &memory(&[3 << 30, 3 << 30, 3 << 30])).unwrap();
        assert!(
            svg.contains(
                "highest live bytes 150.0 MiB (within 256.0 KiB; points 10 ms apart can miss it)"
            ),
            "{svg}"
        );
        assert!(
            svg.contains("kept peak 149.0 MiB at 0.01 s (synthesize)"),
            "{svg}"
        );
        assert!(!svg.contains("stopped early"), "{svg}");
        // A run stopped by a signal says so in the title.
        r.manifest.incomplete = Some("SIGINT".into());
        let svg = timeline(&r, &memory(&[3 << 30, 3 << 30, 3 << 30])).unwrap();
        assert!(
            svg.contains("a point every 10 ms; stopped early: SIGINT)"),
            "{svg}"
        );
        // Reports from before (zeros): live bytes alone, in MiB.
        let svg = timeline(&Report::default(), &memory(&[0, 0, 0])).unwrap();
        assert!(svg.contains("Live bytes over time"));
        assert!(!svg.contains("resident set size"));
        assert!(svg.contains("\nMiB\n"), "{svg}");
    }
}
