//! Hash maps keyed by site ids: a multiply-and-fold hash in place of std's SipHash,
//! which took most of `top`'s ranking of a million-site report (building the per-site
//! totals). Keys come from a report's files; a damaged file can at worst make its
//! own map slow, as a report that large already is.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by `u64` ids, hashed by [`IdHasher`].
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// An empty [`IdMap`] with room for `n` ids.
pub fn with_capacity<V>(n: usize) -> IdMap<V> {
    IdMap::with_capacity_and_hasher(n, BuildHasherDefault::default())
}

/// Hashes one `u64` by a 64-bit finalizer (two multiplications by odd constants,
/// each after folding the high bits down), so that every bit of an id moves both
/// the low bits that pick hashbrown's bucket and the high bits of its control
/// bytes: ids in a run, or all multiples of a power of two, still spread.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h = (h ^ (h >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h = (h ^ (h >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        h ^ (h >> 33)
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = self.0.rotate_left(23) ^ id;
    }

    /// Any other key's bytes, a word at a time (ids are hashed by `write_u64`).
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn buckets(ids: impl Iterator<Item = u64>, bits: u32) -> usize {
        let build = BuildHasherDefault::<IdHasher>::default();
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            seen.insert(build.hash_one(id) & ((1 << bits) - 1));
        }
        seen.len()
    }

    #[test]
    fn ids_in_a_run_and_strided_ids_spread_over_the_buckets() {
        // 4,096 ids into 4,096 buckets: a hash that spreads them fills most of them
        // (about 63 % for a random one); one that keeps only the low bits of
        // strided ids fills 1 (stride 2^12) or 4,096 / stride.
        for stride in [1u64, 8, 64, 4096, 1 << 32, 1 << 40, 1 << 52] {
            let filled = buckets((0..4096u64).map(|i| i * stride), 12);
            assert!(filled > 2000, "stride {stride}: {filled} of 4096 buckets");
        }
    }

    #[test]
    fn a_map_finds_what_it_holds() {
        let mut m = with_capacity(3);
        for id in [0u64, 1 << 40, u64::MAX] {
            m.insert(id, id.count_ones());
        }
        assert_eq!(m.get(&(1 << 40)), Some(&1));
        assert_eq!(m.get(&u64::MAX), Some(&64));
        assert_eq!(m.get(&7), None);
    }
}
