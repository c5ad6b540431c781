//! The table every free reads: is this block followed to its free?
//!
//! Followed blocks (lifetimes, per-site frees and live bytes; see the cold module
//! `lifetimes`) live in a global map behind locks. A free must not take a lock just
//! to learn that its block is not there, so each followed block also holds one entry
//! of this table, at an index hashed from its address, holding a fingerprint of the
//! address: a free compares that entry with its own block's fingerprint (one relaxed
//! load) and goes to the cold path only when they are equal. Different live blocks
//! rarely share both index and fingerprint (their addresses would have to be a
//! multiple of 4 GiB apart), and when they do the cold path finds nothing and costs a
//! lock once; so the common free never takes a lock, however many blocks are
//! followed.
//!
//! A block whose entry is taken by another followed block is not followed (the cold
//! side counts it), which bounds the followed blocks to the table's size.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

const TABLE_BITS: u32 = 16;

/// Most blocks followed at once: the table's entries.
pub const CAPACITY: usize = 1 << TABLE_BITS;

static TABLE: [AtomicU32; CAPACITY] = [const { AtomicU32::new(0) }; CAPACITY];

#[inline(always)]
fn index(ptr: usize) -> usize {
    ((ptr as u64 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - TABLE_BITS)) as usize
}

/// The address's fingerprint: its low 32 bits, never 0 (0 marks a free entry; the
/// lowest bit is an alignment bit, 0 in every block address).
#[inline(always)]
fn fingerprint(ptr: usize) -> u32 {
    ptr as u32 | 1
}

/// True when `ptr` may be a followed block. One relaxed load: the only cost a free
/// pays for lifetimes unless its block is followed.
#[inline(always)]
pub fn maybe(ptr: *mut u8) -> bool {
    let ptr = ptr as usize;
    TABLE[index(ptr)].load(Relaxed) == fingerprint(ptr)
}

/// Takes `ptr`'s entry for a block about to be followed; false when another
/// followed block holds it (then `ptr` must not be followed). Cold side.
pub fn claim(ptr: usize) -> bool {
    TABLE[index(ptr)]
        .compare_exchange(0, fingerprint(ptr), Relaxed, Relaxed)
        .is_ok()
}

/// Frees the entry of a followed block no longer followed. Cold side, once per
/// block that `claim` accepted.
pub fn release(ptr: usize) {
    TABLE[index(ptr)].store(0, Relaxed);
}
