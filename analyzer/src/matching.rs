//! Matching the sites of two reports (`diff`, `peak --base`): stacks that read the
//! same without lines ([`crate::naming::loose_key`]) pair one to one, by whole stack
//! key ([`crate::naming::stack_key`]) where the code did not move, and otherwise by
//! how the patch moved each function's lines, so that a site the patch removed is
//! not summed into one it moved, and a site does not pair with another whose old
//! lines it moved onto. Never by address or site id, which differ between builds and
//! runs.
//! The callers key the job frames of each stack (`crate::naming::job_frames`), so
//! that a thread pool's varying frames around a job do not split it.

use std::collections::{BTreeMap, HashMap};

/// The prefix of keys matched with lines ignored.
pub const LOOSE_PREFIX: &str = "(lines ignored)\n";

/// What [`pair_up`] and [`pair_leftovers`] need of the sites summed under one key.
pub trait Matched: Default {
    /// Their stack key without lines ([`pair_up`]'s groups).
    fn loose(&self) -> &str;
    /// Adds `other`'s figures to these ([`pair_leftovers`]' sums).
    fn merge(&mut self, other: &Self);
}

/// Both sides under common keys, and how many sites matched only with lines ignored.
/// The stacks of both sides that read the same without lines pair one to one, in
/// line order ([`align`]): a patch that adds or removes lines keeps the order of
/// the calls below them, so no two pairs cross (lines 37 and 38 moved to 38 and 39
/// pair 37 with 38, not the old 38 with the new 38; lines 10 and 11 left where they
/// were, below lines 50 and 60 moved to 51 and 61, keep their whole keys). As many
/// pair as can, and among the ways to pair that many, the one whose frames moved
/// least otherwise than their function's usual shift ([`usual_shifts`]). Two
/// stacks paired with different keys become one [`LOOSE_PREFIX`] key on both sides.
/// What is left over (a site the patch removed beside one it moved) stays on its
/// side alone, as do keys with no partner.
pub fn pair_up<T: Matched>(
    mut a: BTreeMap<String, T>,
    mut b: BTreeMap<String, T>,
) -> (BTreeMap<String, T>, BTreeMap<String, T>, usize) {
    let (ga, gb) = (by_loose(&a), by_loose(&b));
    let groups: Vec<(&Vec<String>, &Vec<String>)> = ga
        .iter()
        .filter_map(|(loose, keys_a)| Some((keys_a, gb.get(loose)?)))
        .collect();
    let usual = usual_shifts(&groups);
    let pairs: Vec<(&String, &String)> = groups
        .iter()
        .flat_map(|(xs, ys)| align(xs, ys, &usual))
        .collect();
    let mut loose = 0;
    for (x, y) in pairs {
        if x == y {
            continue;
        }
        let key = format!("{LOOSE_PREFIX}{x}");
        if let (Some(sx), Some(sy)) = (a.remove(x), b.remove(y)) {
            a.insert(key.clone(), sx);
            b.insert(key, sy);
            loose += 1;
        }
    }
    (a, b, loose)
}

/// What a frame whose lines differ and one of which has none costs a pair: more
/// than any shift of lines.
const LINELESS: u64 = 1 << 32;

/// The pairs of one group's keys (`xs` of one side, `ys` of the other), each side
/// in line order ([`line_order`]), none crossing another: as many as can be, and
/// among those the least cost ([`cost`]), by the usual dynamic programme over
/// both orders. Ties go to pairing first, then to leaving the earlier `xs` key out.
fn align<'k>(
    xs: &'k [String],
    ys: &'k [String],
    usual: &HashMap<&str, i64>,
) -> Vec<(&'k String, &'k String)> {
    let (xs, ys) = (line_order(xs), line_order(ys));
    let (n, m) = (xs.len(), ys.len());
    // best[i][j]: the most pairs among xs[..i] and ys[..j], then the least cost, as
    // (pairs, cost); how[i][j]: the step that reached it (0 pair, 1 skip x, 2 skip y).
    let mut best = vec![vec![(0usize, 0u64); m + 1]; n + 1];
    let mut how = vec![vec![0u8; m + 1]; n + 1];
    for i in 0..=n {
        for j in 0..=m {
            if i == 0 && j == 0 {
                continue;
            }
            let mut here: Option<((usize, u64), u8)> = None;
            if i > 0 && j > 0 {
                let (p, c) = best[i - 1][j - 1];
                here = Some((
                    (p + 1, c.saturating_add(cost(xs[i - 1], ys[j - 1], usual))),
                    0,
                ));
            }
            if i > 0 {
                let cand = best[i - 1][j];
                if here.is_none_or(|(h, _)| better(cand, h)) {
                    here = Some((cand, 1));
                }
            }
            if j > 0 {
                let cand = best[i][j - 1];
                if here.is_none_or(|(h, _)| better(cand, h)) {
                    here = Some((cand, 2));
                }
            }
            let (value, step) = here.expect("i or j is above 0");
            best[i][j] = value;
            how[i][j] = step;
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (n, m);
    while i > 0 || j > 0 {
        match how[i][j] {
            0 => {
                pairs.push((xs[i - 1], ys[j - 1]));
                i -= 1;
                j -= 1;
            }
            1 => i -= 1,
            _ => j -= 1,
        }
    }
    pairs.reverse();
    pairs
}

/// True when `a` (pairs, cost) is better than `b`: more pairs, or as many for less.
fn better(a: (usize, u64), b: (usize, u64)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// Stack keys by their frames' lines, outermost frame first (a frame without a line
/// as 0), then by the key: the order a patch's moves keep.
fn line_order(keys: &[String]) -> Vec<&String> {
    let lines = |k: &String| -> Vec<u64> {
        let mut v: Vec<u64> = k
            .split('\n')
            .map(|f| frame_line(f).1.unwrap_or(0))
            .collect();
        v.reverse();
        v
    };
    let mut out: Vec<(Vec<u64>, &String)> = keys.iter().map(|k| (lines(k), k)).collect();
    out.sort();
    out.into_iter().map(|(_, k)| k).collect()
}

/// What pairing two stack keys of one loose key costs: by how many lines each frame
/// moved otherwise than its function's `usual` shift (0 for one not in it), summed;
/// [`LINELESS`] for a differing frame one of which has no line.
fn cost(x: &str, y: &str, usual: &HashMap<&str, i64>) -> u64 {
    frames(x, y)
        .map(|(at, shift, differ)| match shift {
            Some(s) => s.abs_diff(usual.get(at).copied().unwrap_or(0)),
            None if differ => LINELESS,
            None => 0,
        })
        .fold(0, u64::saturating_add)
}

/// A frame of a stack key split into what names it without its line, and its line.
fn frame_line(frame: &str) -> (&str, Option<u64>) {
    match frame.rsplit_once(':') {
        Some((at, l)) => (at, l.parse().ok()),
        None => (frame, None),
    }
}

/// The frames of two stack keys of one loose key, side by side: each frame without
/// its line, by how many lines the second moved from the first (`None` where either
/// has no line), and whether the two frames differ.
fn frames<'k>(x: &'k str, y: &'k str) -> impl Iterator<Item = (&'k str, Option<i64>, bool)> {
    x.split('\n').zip(y.split('\n')).map(|(f, g)| {
        let ((at, p), (_, q)) = (frame_line(f), frame_line(g));
        let shift = p.zip(q).map(|(p, q)| q as i64 - p as i64);
        (at, shift, f != g)
    })
}

/// For each function (a frame without its line) with lines, the shift most
/// candidate pairs give it, 0 (a frame unchanged) among them: a patch that adds or
/// removes lines moves every line after them by the same count, so the pairs that
/// agree with it are the right ones where whole keys or distance alone would cross
/// two sites (lines 37 and 38 moved to 38 and 39: the old 38 is not the new 38).
/// Within a group of stacks that all moved alike, the right pairs give the shift
/// once per stack and no other shift can come up as often. Ties go to the smaller
/// shift.
fn usual_shifts<'k>(groups: &[(&'k Vec<String>, &'k Vec<String>)]) -> HashMap<&'k str, i64> {
    let mut counts: HashMap<&str, HashMap<i64, usize>> = HashMap::new();
    for (xs, ys) in groups {
        for x in xs.iter() {
            for y in ys.iter() {
                for (at, shift, _) in frames(x, y) {
                    if let Some(shift) = shift {
                        *counts.entry(at).or_default().entry(shift).or_default() += 1;
                    }
                }
            }
        }
    }
    counts
        .into_iter()
        .filter_map(|(at, shifts)| {
            let best = shifts
                .into_iter()
                .max_by_key(|&(shift, n)| (n, std::cmp::Reverse(shift.unsigned_abs()), shift))?;
            Some((at, best.0))
        })
        .collect()
}

/// The keys of `side`, grouped by their loose key.
fn by_loose<T: Matched>(side: &BTreeMap<String, T>) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in side {
        groups
            .entry(v.loose().to_owned())
            .or_default()
            .push(k.clone());
    }
    groups
}

/// The keys of `from` that `other` lacks, grouped by `group`.
fn unmatched<T>(
    from: &BTreeMap<String, T>,
    other: &BTreeMap<String, T>,
    group: impl Fn(&T) -> String,
) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in from.iter().filter(|(k, _)| !other.contains_key(*k)) {
        groups.entry(group(v)).or_default().push(k.clone());
    }
    groups
}

/// Among the keys one side has and the other lacks, pairs those whose `group` reads
/// the same on both sides: each such group becomes one `prefix` + group key on each
/// side, its sites summed (`peak --base`'s pass by the naming frame, where what
/// matters is the bytes a name holds, whichever caller grew them). Returns how many
/// groups paired.
pub fn pair_leftovers<T: Matched>(
    x: &mut BTreeMap<String, T>,
    y: &mut BTreeMap<String, T>,
    prefix: &str,
    group: impl Fn(&T) -> String,
) -> usize {
    let (gx, gy) = (unmatched(x, y, &group), unmatched(y, x, &group));
    let take = |side: &mut BTreeMap<String, T>, keys: &[String]| {
        let mut sum = T::default();
        for v in keys.iter().filter_map(|k| side.remove(k)) {
            sum.merge(&v);
        }
        sum
    };
    let mut paired = 0;
    for (name, keys_x) in gx {
        let Some(keys_y) = gy.get(&name) else {
            continue;
        };
        let key = format!("{prefix}{name}");
        let (sx, sy) = (take(x, &keys_x), take(y, keys_y));
        x.insert(key.clone(), sx);
        y.insert(key, sy);
        paired += 1;
    }
    paired
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Bytes {
        loose: String,
        n: u64,
    }

    impl Matched for Bytes {
        fn loose(&self) -> &str {
            &self.loose
        }
        fn merge(&mut self, o: &Self) {
            self.loose.clone_from(&o.loose);
            self.n += o.n;
        }
    }

    fn side(entries: &[(&str, &str, u64)]) -> BTreeMap<String, Bytes> {
        entries
            .iter()
            .map(|(k, l, n)| {
                let b = Bytes {
                    loose: (*l).into(),
                    n: *n,
                };
                ((*k).to_owned(), b)
            })
            .collect()
    }

    /// A side whose stacks all have the loose key `loose`.
    fn one_loose(loose: &str, rows: &[(String, u64)]) -> BTreeMap<String, Bytes> {
        rows.iter()
            .map(|(k, n)| {
                let b = Bytes {
                    loose: loose.to_owned(),
                    n: *n,
                };
                (k.clone(), b)
            })
            .collect()
    }

    #[test]
    fn whole_stacks_first_then_the_moved_ones_one_to_one() {
        // f:1 is on both sides; g:5 and g:6 became one g:7 (the nearer, g:6, moved;
        // g:5 was removed); h is gone, k new.
        let a = side(&[
            ("f:1", "f", 1),
            ("g:5", "g", 2),
            ("g:6", "g", 3),
            ("h:9", "h", 4),
        ]);
        let b = side(&[("f:1", "f", 10), ("g:7", "g", 20), ("k:2", "k", 30)]);
        let (x, y, by_loose) = pair_up(a, b);
        assert_eq!(by_loose, 1);
        let loose = format!("{LOOSE_PREFIX}g:6");
        assert_eq!(x[&loose].n, 3);
        assert_eq!(y[&loose].n, 20);
        assert_eq!(x["f:1"].n, 1);
        assert_eq!(y["f:1"].n, 10);
        assert!(!x.contains_key("g:6") && !y.contains_key("g:7"));
        // The removed one stays the base's alone: a gone row, not summed in.
        assert_eq!(x["g:5"].n, 2);
        assert!(!y.contains_key("g:5"));
        assert!(x.contains_key("h:9") && !y.contains_key("h:9"));
        assert!(y.contains_key("k:2") && !x.contains_key("k:2"));
    }

    #[test]
    fn moved_stacks_pair_by_the_fewest_frames_whose_lines_differ() {
        // One frame moved (mirror.rs 162 -> 164) under three callers; the base has two
        // callers more, which the change removed.
        let key = |caller: u32, line: u32| {
            format!("lc@lc.rs:1\nenforce@mirror.rs:{line}\nsha@sha.rs:{caller}\n")
        };
        let loose = "lc@lc.rs\nenforce@mirror.rs\nsha@sha.rs\n";
        let base: Vec<(String, u64)> = [109, 110, 114, 115, 166]
            .iter()
            .map(|&c| (key(c, 162), u64::from(c)))
            .collect();
        let change: Vec<(String, u64)> = [109, 114, 166]
            .iter()
            .map(|&c| (key(c, 164), 1000 + u64::from(c)))
            .collect();
        let (x, y, by_loose) = pair_up(one_loose(loose, &base), one_loose(loose, &change));
        assert_eq!(by_loose, 3);
        for c in [109u64, 114, 166] {
            let k = format!("{LOOSE_PREFIX}{}", key(c as u32, 162));
            assert_eq!((x[&k].n, y[&k].n), (c, 1000 + c), "caller {c}");
        }
        for c in [110, 115] {
            assert!(x.contains_key(&key(c, 162)) && !y.contains_key(&key(c, 162)));
        }
    }

    #[test]
    fn moved_stacks_pair_by_the_shift_the_patch_made() {
        // Three lines inserted at the top of lc.rs: every lc.rs frame moved by 3. By
        // distance alone, 40/37 -> 43/39 (5 lines) beats the right 40/37 -> 43/40 (6),
        // and the two sites would cross.
        let key =
            |outer: u32, inner: u32| format!("add@lc.rs:{inner}\nlc@lc.rs:{outer}\nmain@m.rs:1\n");
        let loose = "add@lc.rs\nlc@lc.rs\nmain@m.rs\n";
        let base = [(key(40, 36), 212), (key(40, 37), 216)];
        let change = [(key(43, 39), 212), (key(43, 40), 216)];
        let (x, y, by_loose) = pair_up(one_loose(loose, &base), one_loose(loose, &change));
        assert_eq!(by_loose, 2);
        for (k, n) in base {
            let k = format!("{LOOSE_PREFIX}{k}");
            assert_eq!((x[&k].n, y[&k].n), (n, n), "{k}");
        }
    }

    #[test]
    fn a_pair_costs_the_lines_its_frames_moved_otherwise_than_usual() {
        let none = HashMap::new();
        assert_eq!(cost("a:1\nb:2\n", "a:1\nb:2\n", &none), 0);
        assert_eq!(cost("a:1\nb:2\n", "a:1\nb:5\n", &none), 3);
        assert_eq!(cost("a:1\nb:2\n", "a:4\nb:3\n", &none), 4);
        assert_eq!(cost("a:\n", "a:7\n", &none), LINELESS);
        let usual = HashMap::from([("b", 3)]);
        assert_eq!(cost("a:1\nb:2\n", "a:1\nb:5\n", &usual), 0);
        assert_eq!(cost("a:1\nb:2\n", "a:4\nb:5\n", &usual), 3);
        // An unmoved frame of a function that usually moved costs its shift.
        assert_eq!(cost("a:1\nb:2\n", "a:1\nb:2\n", &usual), 3);
    }

    #[test]
    fn sites_left_in_place_above_moved_ones_keep_their_whole_keys() {
        // A line added at 30 of f.rs: its calls at 50 and 60 moved to 51 and 61, those
        // at 10 and 11 did not. +1 is f's usual shift (three pairs give it, the
        // crossed 10 -> 11 among them), and pairs by it first had the old 10 take the
        // new 11, and the old 11 the new 10.
        let key = |line: u32| format!("lc@lc.rs:1\nf@f.rs:{line}\nmain@m.rs:1\n");
        let loose = "lc@lc.rs\nf@f.rs\nmain@m.rs\n";
        let base: Vec<(String, u64)> = [10, 11, 50, 60]
            .iter()
            .map(|&l| (key(l), u64::from(l)))
            .collect();
        let change: Vec<(String, u64)> = [10, 11, 51, 61]
            .iter()
            .map(|&l| (key(l), 1000 + u64::from(l)))
            .collect();
        let (x, y, by_loose) = pair_up(one_loose(loose, &base), one_loose(loose, &change));
        assert_eq!(by_loose, 2);
        for l in [10u32, 11] {
            assert_eq!(
                (x[&key(l)].n, y[&key(l)].n),
                (u64::from(l), 1000 + u64::from(l))
            );
        }
        for (from, to) in [(50u32, 51u64), (60, 61)] {
            let k = format!("{LOOSE_PREFIX}{}", key(from));
            assert_eq!((x[&k].n, y[&k].n), (u64::from(from), 1000 + to), "{from}");
        }
    }

    #[test]
    fn a_stack_moved_onto_another_sites_old_lines_pairs_by_the_move() {
        // One line added at the top of f.rs: its calls at 37 and 38 are now at 38
        // and 39. The new 38 is the old 37: matched by whole key, the two sites
        // crossed. g.rs did not move, and its stacks match whole.
        let key = |line: u32| format!("lc@lc.rs:1\nf@f.rs:{line}\nmain@m.rs:1\n");
        let loose = "lc@lc.rs\nf@f.rs\nmain@m.rs\n";
        let base: Vec<(String, u64)> = [37, 38].iter().map(|&l| (key(l), u64::from(l))).collect();
        let change: Vec<(String, u64)> = [38, 39]
            .iter()
            .map(|&l| (key(l), 1000 + u64::from(l)))
            .collect();
        let mut a = one_loose(loose, &base);
        let mut b = one_loose(loose, &change);
        a.extend(side(&[("g@g.rs:5\n", "g@g.rs\n", 7)]));
        b.extend(side(&[("g@g.rs:5\n", "g@g.rs\n", 8)]));
        let (x, y, by_loose) = pair_up(a, b);
        assert_eq!(by_loose, 2);
        for (from, to) in [(37u32, 38u64), (38, 39)] {
            let k = format!("{LOOSE_PREFIX}{}", key(from));
            assert_eq!((x[&k].n, y[&k].n), (u64::from(from), 1000 + to), "{from}");
        }
        assert!(!x.contains_key(&key(38)) && !y.contains_key(&key(38)));
        assert_eq!((x["g@g.rs:5\n"].n, y["g@g.rs:5\n"].n), (7, 8));
    }

    #[test]
    fn a_function_moved_by_two_amounts_pairs_each_region_by_its_own() {
        // Three lines added above f (its calls at 36 and 37 moved to 39 and 40) and
        // seven more between those and its calls at 80 and 81 (to 90 and 91). With
        // one usual shift for f (+3: as common as +10, and smaller) the second region
        // went by distance alone, where 81 -> 90 (9 lines) comes before 80 -> 90
        // (10): the two sites crossed.
        let key = |line: u32| format!("lc@lc.rs:1\nf@f.rs:{line}\nmain@m.rs:1\n");
        let loose = "lc@lc.rs\nf@f.rs\nmain@m.rs\n";
        let base: Vec<(String, u64)> = [36, 37, 80, 81]
            .iter()
            .map(|&l| (key(l), u64::from(l)))
            .collect();
        let change: Vec<(String, u64)> = [39, 40, 90, 91]
            .iter()
            .map(|&l| (key(l), 1000 + u64::from(l)))
            .collect();
        let (x, y, by_loose) = pair_up(one_loose(loose, &base), one_loose(loose, &change));
        assert_eq!(by_loose, 4);
        for (from, to) in [(36u32, 39u64), (37, 40), (80, 90), (81, 91)] {
            let k = format!("{LOOSE_PREFIX}{}", key(from));
            assert_eq!((x[&k].n, y[&k].n), (u64::from(from), 1000 + to), "{from}");
        }
    }
}
