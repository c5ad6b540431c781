//! The hasher of the cold side's maps, which are keyed by block addresses and by
//! stacks of return addresses.
//!
//! The standard maps' SipHash resists collisions chosen by whoever supplies the
//! keys. Here nobody chooses them: the addresses come from the allocator and the
//! compiled program. What SipHash costs does count: a followed block is looked up by
//! its address at its allocation and at its free, its site by the stack's hash and
//! meta word when it is numbered, and sites mode follows one allocation in 64. This
//! hasher takes one multiply a
//! word and mixes at the end, so that the low bits (the bucket) and the high bits
//! (hashbrown's tag byte) both depend on every input bit, 16-byte-aligned addresses
//! included.

use std::hash::{BuildHasherDefault, Hasher};

/// Builds [`FastHasher`]s: the `S` of the cold side's `HashMap`s and `DashMap`s.
pub type FastBuild = BuildHasherDefault<FastHasher>;

/// Multiply-rotate over 8-byte words, with a final mix (see the module docs). Not
/// for keys an adversary picks.
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;
const M: u64 = 0xd6e8_feb8_6659_fd93;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(23) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            // The length in the top byte: "a" and "a\0" differ.
            self.add(u64::from_le_bytes(b) ^ (rest.len() as u64) << 56);
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(n.into());
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(n.into());
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let x = (self.0 ^ self.0 >> 32).wrapping_mul(M);
        x ^ x >> 29
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    #[test]
    fn aligned_addresses_spread_over_low_and_high_bits() {
        let build = FastBuild::default();
        let hashes: Vec<u64> = (0..4096usize)
            .map(|k| build.hash_one(0x7f12_3400_0000usize + k * 16))
            .collect();
        // The bucket of a 4096-slot table and hashbrown's 7-bit tag: far from all
        // equal, as a multiply alone (low bits always zero) would leave them.
        let low: HashSet<u64> = hashes.iter().map(|h| h & 4095).collect();
        let high: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(low.len() > 2500, "{} distinct buckets of 4096", low.len());
        assert_eq!(high.len(), 128, "every tag value appears");
    }

    #[test]
    fn stacks_differing_in_one_frame_or_length_differ() {
        let build = FastBuild::default();
        let stack: Vec<usize> = (0..48).map(|k| 0x5555_0000 + k * 0x40).collect();
        let base = build.hash_one(&stack);
        for k in 0..stack.len() {
            let mut other = stack.clone();
            other[k] += 1;
            assert_ne!(build.hash_one(&other), base, "frame {k} changed");
        }
        assert_ne!(build.hash_one(&stack[..47]), base);
        assert_ne!(
            build.hash_one(b"a".as_slice()),
            build.hash_one(b"a\0".as_slice())
        );
    }
}
