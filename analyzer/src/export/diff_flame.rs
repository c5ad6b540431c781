//! The frames of a differential flame graph, each named and coloured by the change of
//! every stack through it. inferno's own differential mode gives a change only to a
//! stack's last frame: every frame above it reads `0.00%` and is drawn white, so a
//! gadget all of whose callees grew looks untouched. Here a frame's name ends in its
//! change, `[+1,234 allocations, +28.0%]` (against the base's stacks through it;
//! `new` and `gone` where one side has none), and its colour is red where the change
//! has more, blue where it has fewer, deeper the larger the change against the
//! largest frame's (by the square root, so a frame with a hundredth of it still
//! shows a tint). A frame that did not change keeps its plain name and is drawn
//! near white.

use super::Widths;
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
/// side `widths` names, at their weights, `unit` naming a weight's unit.
pub(super) fn merge(base: &str, change: &str, widths: Widths, unit: &str) -> io::Result<Merged> {
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
    let largest = nodes[1..]
        .iter()
        .map(|n| n.delta().unsigned_abs())
        .max()
        .unwrap_or(0);
    let names: Vec<String> = nodes.iter().map(|n| named(n, unit)).collect();
    let mut palette = PaletteMap::default();
    palette.insert("", colour(nodes[0].delta(), largest));
    for (n, name) in nodes.iter().zip(&names).skip(1) {
        palette.insert(name, colour(n.delta(), largest));
    }
    let drawn = match widths {
        Widths::Change => &change,
        Widths::Base => &base,
    };
    let lines = drawn
        .iter()
        .filter(|(_, w)| **w > 0)
        .map(|(stack, w)| {
            let frames: Vec<&str> = path(&mut nodes, stack)
                .into_iter()
                .skip(1)
                .map(|i| names[i].as_str())
                .collect();
            format!("{} {w}", frames.join(";"))
        })
        .collect();
    Ok(Merged {
        lines,
        palette,
        totals: (nodes[0].base, nodes[0].change),
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

/// A frame's name with its change, or bare where nothing changed.
fn named(n: &Node, unit: &str) -> String {
    let delta = n.delta();
    if delta == 0 {
        return n.name.to_owned();
    }
    let against = if n.base == 0 {
        "new".to_owned()
    } else if n.change == 0 {
        "gone".to_owned()
    } else {
        format!("{:+.1}%", 100.0 * delta as f64 / n.base as f64)
    };
    let sign = if delta > 0 { '+' } else { '-' };
    format!(
        "{} [{sign}{} {unit}, {against}]",
        n.name,
        grouped(delta.unsigned_abs())
    )
}

/// Red for more, blue for fewer, from near white to inferno's deepest hue as the
/// square root of `delta` against `largest`.
fn colour(delta: i128, largest: u128) -> Color {
    if delta == 0 || largest == 0 {
        return UNCHANGED;
    }
    let share = (delta.unsigned_abs() as f64 / largest as f64).min(1.0);
    let c = 250 - (150.0 * share.sqrt()).round() as u8;
    if delta > 0 {
        Color { r: 255, g: c, b: c }
    } else {
        Color { r: c, g: c, b: 255 }
    }
}

/// `1234567` as `1,234,567`, as inferno writes its counts.
pub(super) fn grouped(n: u128) -> String {
    crate::render::digits_grouped(n, ',')
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
        let m = merge(base, change, Widths::Change, "allocations").unwrap();
        assert_eq!(m.totals, (15, 39));
        assert_eq!(
            m.lines,
            [
                "main [+24 allocations, +160.0%];a [+24 allocations, +240.0%];x [+20 allocations, +200.0%] 30",
                "main [+24 allocations, +160.0%];a [+24 allocations, +240.0%];y [+4 allocations, new] 4",
                "main [+24 allocations, +160.0%];b 5",
            ]
        );
        // The largest change (main's and a's) is deepest; x's 20 of 24 nearly so; b
        // did not change.
        let hue = |name: &str| rgb(m.palette.get(name).unwrap());
        assert_eq!(hue("main [+24 allocations, +160.0%]"), (255, 100, 100));
        assert_eq!(hue("x [+20 allocations, +200.0%]"), (255, 113, 113));
        assert_eq!(hue("y [+4 allocations, new]"), (255, 189, 189));
        assert_eq!(hue("b"), (250, 250, 250));
    }

    #[test]
    fn a_stack_only_in_the_base_shows_at_its_widths_as_gone_and_blue() {
        let base = "main;a 1000\nmain;b 1000\n";
        let change = "main;a 1000\n";
        let at_change = merge(base, change, Widths::Change, "bytes").unwrap();
        assert_eq!(at_change.lines, ["main [-1,000 bytes, -50.0%];a 1000"]);
        let at_base = merge(base, change, Widths::Base, "bytes").unwrap();
        assert_eq!(
            at_base.lines,
            [
                "main [-1,000 bytes, -50.0%];a 1000",
                "main [-1,000 bytes, -50.0%];b [-1,000 bytes, gone] 1000",
            ]
        );
        let hue = rgb(at_base.palette.get("b [-1,000 bytes, gone]").unwrap());
        assert_eq!(hue, (100, 100, 255));
    }

    #[test]
    fn a_profile_against_itself_names_no_change() {
        let text = "main;a;x 10\nmain;b 5\n";
        let m = merge(text, text, Widths::Change, "allocations").unwrap();
        assert_eq!(m.lines, ["main;a;x 10", "main;b 5"]);
        assert!(m.palette.iter().all(|(_, c)| c == UNCHANGED));
    }

    #[test]
    fn a_line_without_a_weight_is_refused() {
        let e = merge("main;a\n", "", Widths::Change, "bytes")
            .err()
            .unwrap();
        assert!(e.to_string().contains("main;a"), "{e}");
    }
}
