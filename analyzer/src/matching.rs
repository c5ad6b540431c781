//! Matching the sites of two reports (`diff`, `peak --base`): by whole stack key
//! ([`crate::naming::stack_key`]), then, among the rest, by the stack without lines
//! ([`crate::naming::loose_key`]) where both sides have it, for stacks through code a
//! patch moved. Never by address or site id, which differ between builds and runs.
//! The callers key the job frames of each stack (`crate::naming::job_frames`), so
//! that a thread pool's varying frames around a job do not split it.

use std::collections::BTreeMap;

/// The prefix of keys matched with lines ignored.
pub const LOOSE_PREFIX: &str = "(lines ignored)\n";

/// What [`pair_up`] needs of the sites summed under one key.
pub trait Matched: Default {
    /// Their stack key without lines.
    fn loose(&self) -> &str;
    /// Adds `other`'s figures to these.
    fn merge(&mut self, other: &Self);
}

/// Both sides under common keys, and how many keys matched only with lines ignored:
/// a key one side lacks whose loose key the other side has unmatched becomes one
/// [`LOOSE_PREFIX`] key on each side, the sites under that loose key summed. Keys
/// with no partner stay, on their side alone.
pub fn pair_up<T: Matched>(
    mut a: BTreeMap<String, T>,
    mut b: BTreeMap<String, T>,
) -> (BTreeMap<String, T>, BTreeMap<String, T>, usize) {
    let by_loose = pair_leftovers(&mut a, &mut b, LOOSE_PREFIX, |t| t.loose().to_owned());
    (a, b, by_loose)
}

/// Among the keys one side has and the other lacks, pairs those whose `group` reads
/// the same on both sides: each such group becomes one `prefix` + group key on each
/// side, its sites summed. Returns how many groups paired.
pub fn pair_leftovers<T: Matched>(
    x: &mut BTreeMap<String, T>,
    y: &mut BTreeMap<String, T>,
    prefix: &str,
    group: impl Fn(&T) -> String,
) -> usize {
    let left = |from: &BTreeMap<String, T>, other: &BTreeMap<String, T>| {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in from.iter().filter(|(k, _)| !other.contains_key(*k)) {
            groups.entry(group(v)).or_default().push(k.clone());
        }
        groups
    };
    let (gx, gy) = (left(x, y), left(y, x));
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

    #[test]
    fn whole_stacks_first_then_the_moved_ones_summed_by_loose_key() {
        // f:1 is on both sides; g moved from lines 5 and 6 to 7; h is gone, k new.
        let a = side(&[
            ("f:1", "f", 1),
            ("g:5", "g", 2),
            ("g:6", "g", 3),
            ("h:9", "h", 4),
        ]);
        let b = side(&[("f:1", "f", 10), ("g:7", "g", 20), ("k:2", "k", 30)]);
        let (x, y, by_loose) = pair_up(a, b);
        assert_eq!(by_loose, 1);
        let loose = format!("{LOOSE_PREFIX}g");
        assert_eq!(x[&loose].n, 5);
        assert_eq!(y[&loose].n, 20);
        assert_eq!(x["f:1"].n, 1);
        assert_eq!(y["f:1"].n, 10);
        assert!(!x.contains_key("g:5") && !y.contains_key("g:7"));
        assert!(x.contains_key("h:9") && !y.contains_key("h:9"));
        assert!(y.contains_key("k:2") && !x.contains_key("k:2"));
    }
}
