//! Matching the sites of two reports (`diff`, `peak --base`): by whole stack key
//! ([`crate::naming::stack_key`]), then, among the rest, by the stack without lines
//! ([`crate::naming::loose_key`]) where both sides have it, for stacks through code a
//! patch moved. Never by address or site id, which differ between builds and runs.

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
    a: BTreeMap<String, T>,
    b: BTreeMap<String, T>,
) -> (BTreeMap<String, T>, BTreeMap<String, T>, usize) {
    let (mut x, mut y) = (BTreeMap::new(), BTreeMap::new());
    let (mut left_a, mut left_b): (BTreeMap<String, T>, BTreeMap<String, T>) = Default::default();
    for (k, acc) in a {
        if !b.contains_key(&k) {
            left_a
                .entry(acc.loose().to_owned())
                .or_default()
                .merge(&acc);
        }
        x.insert(k, acc);
    }
    for (k, acc) in b {
        if !x.contains_key(&k) {
            left_b
                .entry(acc.loose().to_owned())
                .or_default()
                .merge(&acc);
        }
        y.insert(k, acc);
    }
    let mut by_loose = 0;
    for (loose, acc_a) in left_a {
        if let Some(acc_b) = left_b.remove(&loose) {
            // Replace the unmatched whole-stack entries by one entry per side.
            x.retain(|k, v| y.contains_key(k) || v.loose() != loose);
            y.retain(|k, v| x.contains_key(k) || v.loose() != loose);
            let key = format!("{LOOSE_PREFIX}{loose}");
            x.insert(key.clone(), acc_a);
            y.insert(key, acc_b);
            by_loose += 1;
        }
    }
    (x, y, by_loose)
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
