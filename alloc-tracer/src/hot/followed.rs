//! The table every free reads: is this block followed to its free?
//!
//! Followed blocks (lifetimes, heap sampling; see the cold modules `lifetimes` and
//! `heap`) live in global maps behind locks. A free must not take a lock just to
//! learn that its block is not there, so each followed block is also counted in one
//! entry of this table, at an index hashed from its address. An entry holds how many
//! followed blocks hash to it and, while that is one, the block's fingerprint (its
//! address's low 32 bits), or [`SHARED`] when several do. A free compares its
//! index's entry with its own fingerprint and with `SHARED` (one relaxed load, two
//! comparisons) and goes to the cold path only on a match; the cold path looks the
//! address up in the maps, so a match that is not its block (another block with the
//! same index and fingerprint, or a shared entry) costs one lock and finds nothing.
//!
//! Every block due to be followed is followed, however many hash to one entry: the
//! count keeps the entry non-empty until the last of them ends.
//!
//! In front of the table, one bit per entry says whether it is non-empty: 8 KiB that
//! stay in cache, where the 512 KiB table does not (a synthesis streams far more
//! data past it between frees). A free whose bit is clear, nearly every free, reads
//! nothing else.

use std::sync::atomic::{
    AtomicU64,
    Ordering::{Relaxed, SeqCst},
};

const TABLE_BITS: u32 = 16;

/// Entries of the table.
pub const ENTRIES: usize = 1 << TABLE_BITS;

/// Per entry: bits 32-63 the followed blocks hashed to it, bits 0-31 the one
/// block's fingerprint, or [`SHARED`], or 0 when none.
static TABLE: [AtomicU64; ENTRIES] = [const { AtomicU64::new(0) }; ENTRIES];

/// Bit `i % 64` of word `i / 64`: entry `i` is non-empty. Set after the entry is
/// (`claim`); cleared when it empties, then set again if a claim filled it meanwhile
/// (`release`).
static OCCUPIED: [AtomicU64; ENTRIES / 64] = [const { AtomicU64::new(0) }; ENTRIES / 64];

/// The fingerprint part of an entry several followed blocks share: even, so never a
/// block's fingerprint (those are odd).
const SHARED: u32 = 2;

const ONE: u64 = 1 << 32;

#[inline(always)]
fn index(ptr: usize) -> usize {
    address_hash(ptr, TABLE_BITS)
}

/// A hash of a block's address in `bits` bits (its top ones): the index of this
/// table, and of any other table of blocks keyed the same way (`heap`'s filter).
/// The address is multiplied as it is: its low bits, zero in most blocks, only
/// shift the product's bits up (the top bits are those of the product of the
/// address's upper bits, below 2^60, with the odd constant), and shifting them out
/// first would cost every free two instructions.
#[inline(always)]
pub fn address_hash(ptr: usize, bits: u32) -> usize {
    ((ptr as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// The address's fingerprint: its low 32 bits, odd (the lowest bit is an alignment
/// bit, 0 in every block address), so never 0 or [`SHARED`].
#[inline(always)]
fn fingerprint(ptr: usize) -> u32 {
    ptr as u32 | 1
}

/// The word of [`OCCUPIED`] that holds entry `i`'s bit, bit `i % 64`.
#[inline(always)]
fn occupied_word(i: usize) -> &'static AtomicU64 {
    &OCCUPIED[(i / 64) % (ENTRIES / 64)]
}

/// The word of [`OCCUPIED`] and the bit in it of entry `i`.
#[inline(always)]
fn occupied(i: usize) -> (&'static AtomicU64, u64) {
    (occupied_word(i), 1 << (i % 64))
}

/// True when `ptr` may be a followed block. One relaxed load of a bit, and of the
/// entry only when that is set: the only cost a free pays for following unless its
/// block, or one hashed to the same entry, is followed.
#[inline(always)]
pub fn maybe(ptr: *mut u8) -> bool {
    let ptr = ptr as usize;
    let i = index(ptr);
    // The word shifted by the bit's index, not masked with the bit: one bit test,
    // where a mask takes a shift of its own and a test.
    if (occupied_word(i).load(Relaxed) >> (i % 64)) & 1 == 0 {
        return false;
    }
    let e = TABLE[i].load(Relaxed) as u32;
    e == fingerprint(ptr) || e == SHARED
}

/// Counts `ptr`, a block about to be followed, in its entry. Cold side, once per
/// map that holds the block (a block followed for lifetimes and sampled for the
/// heap at once is claimed twice, and released once as each map lets it go, so that
/// whoever takes it out of a map releases that count, with no other check). An
/// entry whose blocks all have one fingerprint keeps it: a second count of the same
/// block does not make it shared.
pub fn claim(ptr: usize) {
    let i = index(ptr);
    let fp = fingerprint(ptr) as u64;
    let _ = TABLE[i].fetch_update(SeqCst, SeqCst, |e| {
        Some(if e >> 32 == 0 {
            ONE | fp
        } else if e as u32 as u64 == fp {
            e + ONE
        } else {
            ((e & !(u32::MAX as u64)) + ONE) | SHARED as u64
        })
    });
    let (word, bit) = occupied(i);
    word.fetch_or(bit, SeqCst);
}

/// Takes a block that stopped being followed out of its entry. Cold side, once per
/// claim. An entry shared until now stays marked shared while any block
/// remains: which one is left is not known, and a shared entry only sends the frees
/// that hash to it to the cold path.
pub fn release(ptr: usize) {
    let i = index(ptr);
    let entry = &TABLE[i];
    let was = entry.fetch_update(SeqCst, SeqCst, |e| {
        Some(match e >> 32 {
            0 => 0,
            1 => 0,
            _ => e - ONE,
        })
    });
    if was.is_ok_and(|e| e >> 32 <= 1) {
        // Emptied: clear the bit, unless a claim on another thread filled the entry
        // again meanwhile (its bit is set after its entry, so one of the two sees
        // the other).
        let (word, bit) = occupied(i);
        word.fetch_and(!bit, SeqCst);
        if entry.load(SeqCst) >> 32 != 0 {
            word.fetch_or(bit, SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_sharing_an_entry_are_all_seen_until_the_last_ends() {
        // Two addresses that share the index (the top bits of the address times a
        // constant), found by search.
        let a = 0x7f00_0000_1000usize;
        let b = (1..1 << 24)
            .map(|k| a + k * 16)
            .find(|&p| index(p) == index(a))
            .expect("a second address with the same index");
        let other = (1..1 << 24)
            .map(|k| a + k * 16)
            .find(|&p| index(p) != index(a))
            .unwrap();
        assert!(!maybe(a as *mut u8));
        claim(a);
        assert!(maybe(a as *mut u8) && !maybe(b as *mut u8) && !maybe(other as *mut u8));
        claim(b);
        assert!(maybe(a as *mut u8) && maybe(b as *mut u8));
        release(a);
        assert!(maybe(b as *mut u8), "b is still followed");
        release(b);
        assert!(!maybe(a as *mut u8) && !maybe(b as *mut u8));
    }

    #[test]
    fn a_block_claimed_twice_keeps_its_fingerprint_until_released_twice() {
        let a = 0x7e00_0000_2000usize;
        let b = (1..1 << 24)
            .map(|k| a + k * 16)
            .find(|&p| index(p) == index(a))
            .expect("a second address with the same index");
        claim(a);
        claim(a);
        assert!(maybe(a as *mut u8), "a is followed");
        assert!(
            !maybe(b as *mut u8),
            "not shared: b's free reads nothing more"
        );
        release(a);
        assert!(maybe(a as *mut u8), "a is still held once");
        release(a);
        assert!(!maybe(a as *mut u8));
    }
}
