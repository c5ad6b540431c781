//! The frames of a differential flame graph, each named and coloured by the change of
//! every stack through it. inferno's own differential mode gives a change only to a
//! stack's last frame: every frame above it reads `0.00%` and is drawn white, so a
//! gadget all of whose callees grew looks untouched. Here a frame's name ends in its
//! change, `[+1,234 allocations, +28.0%]` (against the base's stacks through it;
//! `new` and `gone` where one side has none), and its colour is red where the change
//! has more, blue where it has fewer, deeper the larger the change against the whole
//! graph's weight (on a log scale: a change of 0.1 % of it is a tint, 1 % clear, 10 %
//! deep, all of it the deepest), so that a change of a few allocations in millions
//! stays near white. A frame that did not change keeps its plain name and is drawn
//! near white; so is a sampled report's change under two standard errors of its
//! sampling, marked `~`.

use super::Widths;
use crate::sampling_noise::{Noise, Sampled, within};
use inferno::flamegraph::color::{Color, PaletteMap};
use std::collections::{BTreeMap, HashMap};
use std::io;

/// The colour of a frame that did not change (inferno's for a zero change).
const UNCHANGED: Color = Color {
    r: 250,
    g: 250,
    b: 250,
};

/// The drawn side's stacks, ready for inferno's plain (not differential) mode.
pub(super) struct Merged {
    /// Folded lines of the drawn side, each frame named with its change.
    pub lines: Vec<String>,
    /// The colour of each name in `lines`, and of the root (`""`).
    pub palette: PaletteMap,
    /// What all the stacks weigh in the base and in the change.
    pub totals: (u64, u64),
    /// Frames drawn whose change is under two standard errors of sampling (`~`).
    pub within_noise: usize,
}

/// How a count's estimate varies in a report sampled one allocation in `N`: each
/// side's `N` (1 where exact).
#[derive(Clone, Copy, Debug)]
pub struct Intervals {
    /// The base's.
    pub base: u64,
    /// The change's.
    pub change: u64,
}

/// A frame of the merged tree: what the stacks through it weigh on each side.
struct Node<'a> {
    name: &'a str,
    children: HashMap<&'a str, usize>,
    base: u64,
    change: u64,
}

impl Node<'_> {
    fn delta(&self) -> i128 {
        i128::from(self.change) - i128::from(self.base)
    }
}

/// Merges two folded texts (`outer;...;inner weight` lines) into the stacks of the
/// side `widths` names, at their weights, `unit` naming a weight's unit; with
/// `intervals`, the weights are counts estimated from samples.
pub(super) fn merge(
    base: &str,
    change: &str,
    widths: Widths,
    unit: &str,
    intervals: Option<Intervals>,
) -> io::Result<Merged> {
    let (base, change) = (parse(base)?, parse(change)?);
    let mut nodes = vec![Node {
        name: "",
        children: HashMap::new(),
        base: 0,
        change: 0,
    }];
    for (stacks, is_base) in [(&base, true), (&change, false)] {
        for (stack, &w) in stacks {
            for i in path(&mut nodes, stack) {
                let side = if is_base {
                    &mut nodes[i].base
                } else {
                    &mut nodes[i].change
                };
                *side = side.saturating_add(w);
            }
        }
    }
    let whole = nodes[0].base.max(nodes[0].change);
    let noise = |n: &Node| {
        let i = intervals?;
        let side = |allocs, interval| Sampled {
            allocs,
            cost_weight_s2: None,
            interval,
        };
        Noise::of_delta(side(n.base, i.base), side(n.change, i.change)).count_bound()
    };
    let noisy: Vec<bool> = nodes
        .iter()
        .map(|n| within(n.delta() as f64, noise(n).map(|b| b as f64)))
        .collect();
    let names: Vec<String> = nodes
        .iter()
        .zip(&noisy)
        .map(|(n, &noisy)| named(n, unit, noisy))
        .collect();
    let mut palette = PaletteMap::default();
    for ((n, name), &noisy) in nodes.iter().zip(&names).zip(&noisy) {
        let delta = if noisy { 0 } else { n.delta() };
        palette.insert(name, colour(delta, whole));
    }
    let drawn = match widths {
        Widths::Change => &change,
        Widths::Base => &base,
    };
    let mut shown = vec![false; nodes.len()];
    let lines = drawn
        .iter()
        .filter(|(_, w)| **w > 0)
        .map(|(stack, w)| {
            let path = path(&mut nodes, stack);
            let frames: Vec<&str> = path[1..].iter().map(|&i| names[i].as_str()).collect();
            for i in path {
                shown[i] = true;
            }
            format!("{} {w}", frames.join(";"))
        })
        .collect();
    Ok(Merged {
        lines,
        palette,
        totals: (nodes[0].base, nodes[0].change),
        within_noise: (1..nodes.len()).filter(|&i| shown[i] && noisy[i]).count(),
    })
}

/// The stacks of a folded text and their weights (a stack given twice, summed).
fn parse(text: &str) -> io::Result<BTreeMap<&str, u64>> {
    let mut stacks = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let weight = line
            .rsplit_once(' ')
            .and_then(|(stack, w)| Some((stack, w.parse::<u64>().ok()?)));
        let Some((stack, w)) = weight else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not a folded stack (`frames weight`): {line}"),
            ));
        };
        let sum: &mut u64 = stacks.entry(stack).or_default();
        *sum = sum.saturating_add(w);
    }
    Ok(stacks)
}

/// The nodes from the root to `stack`'s last frame, added where missing.
fn path<'a>(nodes: &mut Vec<Node<'a>>, stack: &'a str) -> Vec<usize> {
    let mut at = 0;
    let mut out = vec![0];
    for frame in stack.split(';') {
        at = match nodes[at].children.get(frame) {
            Some(&i) => i,
            None => {
                let i = nodes.len();
                nodes.push(Node {
                    name: frame,
                    children: HashMap::new(),
                    base: 0,
                    change: 0,
                });
                nodes[at].children.insert(frame, i);
                i
            }
        };
        out.push(at);
    }
    out
}

/// A frame's name with its change, or bare where nothing changed (the root's, `""`,
/// stays bare: inferno names it `all`); `~` before a change under sampling's noise.
fn named(n: &Node, unit: &str, noisy: bool) -> String {
    let delta = n.delta();
    if delta == 0 || n.name.is_empty() {
        return n.name.to_owned();
    }
    let sign = if delta > 0 { '+' } else { '-' };
    format!(
        "{} [{}{sign}{} {unit}, {}]",
        n.name,
        if noisy { "~" } else { "" },
        grouped(delta.unsigned_abs()),
        against(n.base, n.change)
    )
}

/// The change from `base` to `change` against `base`: `+28.0%`, `-0.04%` (two
/// decimals under a tenth of a per cent, so that a change never reads as 0.0%),
/// `new` or `gone` where one side has none, `unchanged`.
pub(super) fn against(base: u64, change: u64) -> String {
    if base == change {
        return "unchanged".to_owned();
    }
    if base == 0 {
        return "new".to_owned();
    }
    if change == 0 {
        return "gone".to_owned();
    }
    let pct = 100.0 * (change as f64 - base as f64) / base as f64;
    let sign = if change > base { '+' } else { '-' };
    match pct.abs() {
        p if p >= 0.1 => format!("{sign}{p:.1}%"),
        p if p >= 0.01 => format!("{sign}{p:.2}%"),
        _ => format!("{sign}<0.01%"),
    }
}

/// Red for more, blue for fewer, from near white to inferno's deepest hue as
/// `delta` goes from 0.1 % of `whole` (a tint) to all of it, on a log scale.
fn colour(delta: i128, whole: u64) -> Color {
    if delta == 0 || whole == 0 {
        return UNCHANGED;
    }
    let share = delta.unsigned_abs() as f64 / whole as f64;
    let depth = ((1.0 + 1000.0 * share).log10() / 3.0).min(1.0);
    let c = 250 - (150.0 * depth).round() as u8;
    if delta > 0 {
        Color { r: 255, g: c, b: c }
    } else {
        Color { r: c, g: c, b: 255 }
    }
}

/// `1234567` as `1,234,567`, as inferno writes its counts.
pub(super) fn grouped(n: u128) -> String {
    crate::units::digits_grouped(n, ',')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rgb(c: Color) -> (u8, u8, u8) {
        (c.r, c.g, c.b)
    }

    #[test]
    fn every_frame_carries_the_change_of_the_stacks_through_it() {
        let base = "main;a;x 10\nmain;b 5\n";
        let change = "main;a;x 30\nmain;a;y 4\nmain;b 5\n";
        let m = merge(base, change, Widths::Change, "allocations", None).unwrap();
        assert_eq!(m.totals, (15, 39));
        assert_eq!(
            m.lines,
            [
                "main [+24 allocations, +160.0%];a [+24 allocations, +240.0%];x [+20 allocations, +200.0%] 30",
                "main [+24 allocations, +160.0%];a [+24 allocations, +240.0%];y [+4 allocations, new] 4",
                "main [+24 allocations, +160.0%];b 5",
            ]
        );
        // Deeper for a larger share of the graph's 39; b did not change.
        let hue = |name: &str| rgb(m.palette.get(name).unwrap());
        assert_eq!(hue("main [+24 allocations, +160.0%]"), (255, 111, 111));
        assert_eq!(hue("x [+20 allocations, +200.0%]"), (255, 114, 114));
        assert_eq!(hue("y [+4 allocations, new]"), (255, 149, 149));
        assert_eq!(hue("b"), (250, 250, 250));
        assert_eq!(hue(""), (255, 111, 111), "the root, inferno's `all`");
        assert_eq!(m.within_noise, 0);
    }

    #[test]
    fn a_change_of_a_few_in_millions_stays_near_white() {
        let base = "main;a 4305105\nmain;b 1000\n";
        let change = "main;a 4305110\nmain;b 1000\n";
        let m = merge(base, change, Widths::Change, "allocations", None).unwrap();
        assert_eq!(
            m.lines[0],
            "main [+5 allocations, +<0.01%];a [+5 allocations, +<0.01%] 4305110"
        );
        let hue = rgb(m.palette.get("a [+5 allocations, +<0.01%]").unwrap());
        assert_eq!(hue, (255, 250, 250));
    }

    #[test]
    fn a_stack_only_in_the_base_shows_at_its_widths_as_gone_and_blue() {
        let base = "main;a 1000\nmain;b 1000\n";
        let change = "main;a 1000\n";
        let at_change = merge(base, change, Widths::Change, "bytes", None).unwrap();
        assert_eq!(at_change.lines, ["main [-1,000 bytes, -50.0%];a 1000"]);
        let at_base = merge(base, change, Widths::Base, "bytes", None).unwrap();
        assert_eq!(
            at_base.lines,
            [
                "main [-1,000 bytes, -50.0%];a 1000",
                "main [-1,000 bytes, -50.0%];b [-1,000 bytes, gone] 1000",
            ]
        );
        let hue = rgb(at_base.palette.get("b [-1,000 bytes, gone]").unwrap());
        assert_eq!(hue, (115, 115, 255));
    }

    #[test]
    fn a_sampled_change_under_two_standard_errors_is_marked_and_not_coloured() {
        // One in 1,000 sampled: a's 2,000 -> 4,000 (two samples against four) is
        // under 2 sqrt(1000 (4,000 + 4,000)) = 5,657; b's 100,000 -> 50,000 is not.
        let base = "main;a 2000\nmain;b 100000\n";
        let change = "main;a 4000\nmain;b 50000\n";
        let sampled = Intervals {
            base: 1000,
            change: 1000,
        };
        let m = merge(base, change, Widths::Change, "allocations", Some(sampled)).unwrap();
        assert_eq!(
            m.lines,
            [
                "main [-48,000 allocations, -47.1%];a [~+2,000 allocations, +100.0%] 4000",
                "main [-48,000 allocations, -47.1%];b [-50,000 allocations, -50.0%] 50000",
            ]
        );
        let hue = |name: &str| rgb(m.palette.get(name).unwrap());
        assert_eq!(hue("a [~+2,000 allocations, +100.0%]"), UNCHANGED_RGB);
        assert_ne!(hue("b [-50,000 allocations, -50.0%]"), UNCHANGED_RGB);
        assert_eq!(m.within_noise, 1);
        // The same figures from exact reports: every change is one.
        let exact = merge(base, change, Widths::Change, "allocations", None).unwrap();
        assert_eq!(exact.within_noise, 0);
    }

    #[test]
    fn only_drawn_frames_count_as_marked() {
        // main's +1,000 and a's +2,000 are under their noise (5,657), and so is c's
        // loss of 1,000 (2,828); but c, gone from the change, is not drawn at the
        // change's widths, so two marks show there, three at the base's.
        let sampled = Intervals {
            base: 1000,
            change: 1000,
        };
        let (base, change) = ("main;a 2000\nmain;c 1000\n", "main;a 4000\n");
        let at_change = merge(base, change, Widths::Change, "allocations", Some(sampled)).unwrap();
        assert_eq!(at_change.within_noise, 2);
        let at_base = merge(base, change, Widths::Base, "allocations", Some(sampled)).unwrap();
        assert_eq!(at_base.within_noise, 3);
    }

    const UNCHANGED_RGB: (u8, u8, u8) = (250, 250, 250);

    #[test]
    fn a_change_against_its_base_never_reads_as_none() {
        assert_eq!(against(1000, 1280), "+28.0%");
        assert_eq!(against(10_000, 9_996), "-0.04%");
        assert_eq!(against(10_000_000, 10_000_001), "+<0.01%");
        assert_eq!(against(0, 5), "new");
        assert_eq!(against(5, 0), "gone");
        assert_eq!(against(5, 5), "unchanged");
    }

    #[test]
    fn a_profile_against_itself_names_no_change() {
        let text = "main;a;x 10\nmain;b 5\n";
        let m = merge(text, text, Widths::Change, "allocations", None).unwrap();
        assert_eq!(m.lines, ["main;a;x 10", "main;b 5"]);
        assert!(m.palette.iter().all(|(_, c)| c == UNCHANGED));
    }

    #[test]
    fn a_line_without_a_weight_is_refused() {
        let e = merge("main;a\n", "", Widths::Change, "bytes", None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("main;a"), "{e}");
    }
}
