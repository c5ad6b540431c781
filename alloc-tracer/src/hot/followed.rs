//! The filter every free reads: is this block perhaps followed to its free?
//!
//! Followed blocks (lifetimes, per-site frees and live bytes; see the cold module
//! `lifetimes`) live in a global map behind locks. A free must not take a lock just
//! to learn that its block is not there, so every followed block also counts in one
//! entry of this array, indexed by a hash of its address: a free reads that entry (one
//! relaxed load) and goes to the cold path only when it is not zero. The cold side
//! adds and removes entries as it starts and ends following blocks.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

const FILTER_BITS: u32 = 16;

static FILTER: [AtomicU32; 1 << FILTER_BITS] = [const { AtomicU32::new(0) }; 1 << FILTER_BITS];

#[inline(always)]
fn index(ptr: usize) -> usize {
    ((ptr as u64 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - FILTER_BITS)) as usize
}

/// True when `ptr` may be a followed block. One relaxed load: the only cost a free
/// pays for lifetimes unless its block is followed.
#[inline(always)]
pub fn maybe(ptr: *mut u8) -> bool {
    FILTER[index(ptr as usize)].load(Relaxed) != 0
}

/// Counts a newly followed block (cold side, once per block).
pub fn add(ptr: usize) {
    FILTER[index(ptr)].fetch_add(1, Relaxed);
}

/// Uncounts a block no longer followed (cold side, once per block).
pub fn remove(ptr: usize) {
    FILTER[index(ptr)].fetch_sub(1, Relaxed);
}
