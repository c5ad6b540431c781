//! A per-thread open-addressing table of call sites, readable from other threads.
//!
//! Only the owning thread inserts and counts; the report writer may read a live
//! thread's table at any time. Every field is an atomic written with plain
//! load-then-store (no read-modify-write, so no `lock` prefix): a reader sees each
//! counter at some recent value. A slot's key and stack are written before its tag is
//! published with `Release`, and never change afterwards, so a reader that sees the tag
//! with `Acquire` sees the whole key.
//!
//! The table never allocates: when it is half full the caller grows it in cold code
//! (see `thread::grow_table`). Half, not three quarters: with linear probing a
//! lookup on a synthesis took 2.0 probes at three quarters and 1.4 at half, and
//! each probe past the first reads another slot's line and takes its branch the
//! other way.

use super::stack::{Frames, MAX_DEPTH};
use super::stacks::{self, Stack};
use std::ptr::null_mut;
use std::sync::atomic::{
    AtomicPtr, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};

/// The identity of a site in a thread's table: the stack plus what else splits it.
#[derive(Clone, Copy)]
pub struct SiteKey<'a> {
    /// Phase id, size-class index and depth.
    pub meta: SiteMeta,
    /// Return addresses, innermost first; only `meta.depth()` of them count.
    pub frames: &'a [usize],
    /// Hash of `meta` and `frames`, never 0.
    pub hash: u64,
}

/// Phase id, size-class index and stack depth of a site, packed in one word: the
/// part of a site's identity that is not its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct SiteMeta(u64);

impl SiteMeta {
    /// Packs phase id, size-class index and depth.
    #[inline(always)]
    pub const fn new(phase: usize, class: usize, depth: usize) -> SiteMeta {
        SiteMeta(phase as u64 | (class as u64) << 8 | (depth as u64) << 24)
    }
    /// The same with depth `depth`, for a meta made with depth 0 (the walk learns
    /// the depth last).
    #[inline(always)]
    pub const fn with_depth(self, depth: usize) -> SiteMeta {
        SiteMeta(self.0 | (depth as u64) << 24)
    }
    /// The same with depth 0: what a stack's hash is seeded with.
    #[inline(always)]
    pub const fn without_depth(self) -> SiteMeta {
        SiteMeta(self.0 & !(0xff << 24))
    }
    /// The same with its depth replaced by `depth`: the depth of the frames a site
    /// keeps, which for a stack past the cap is the folded frame's one.
    #[inline(always)]
    pub const fn at_depth(self, depth: usize) -> SiteMeta {
        self.without_depth().with_depth(depth)
    }
    /// Phase id.
    pub const fn phase(self) -> usize {
        (self.0 & 0xff) as usize
    }
    /// Size-class index.
    pub const fn class(self) -> usize {
        ((self.0 >> 8) & 0xffff) as usize
    }
    /// Frames in the stack.
    pub const fn depth(self) -> usize {
        ((self.0 >> 24) & 0xff) as usize
    }
    /// The packed word.
    #[inline(always)]
    pub const fn bits(self) -> u64 {
        self.0
    }
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;
const M: u64 = 0xd6e8_feb8_6659_fd93;

/// Hashes a stack and a seed (never returns 0).
///
/// The stack's part is a polynomial in its frames, innermost first:
/// `sum = mix(f0) + mix(f1)·K + mix(f2)·K² + …` (mod 2^64), so that a walk that
/// reuses the outer part of the previous one reuses its sum too (`trail`): the sum of
/// an inner part followed by an outer one is `inner + K^len(inner) · outer`. `mix`
/// scrambles each return address first, which leaves two different stacks colliding
/// about as rarely as under a random 64-bit hash; [`hash_finish`] then mixes in the
/// seed and spreads every bit into the low ones that pick a table slot.
#[inline(always)]
pub fn hash(seed: u64, frames: &[usize]) -> u64 {
    hash_finish(
        frames.iter().rev().fold(0, |sum, &f| hash_extend(sum, f)),
        seed,
    )
}

/// The hash of a site key: its frames seeded with the meta word less the depth
/// (which the capture only knows at the end).
pub fn key_hash(meta: SiteMeta, frames: &[usize]) -> u64 {
    hash(meta.without_depth().bits(), frames)
}

/// A return address scrambled: its term in a stack's sum, times `K^index`.
#[inline(always)]
pub fn hash_mix(frame: usize) -> u64 {
    let x = (frame as u64).wrapping_mul(M);
    x ^ (x >> 31)
}

/// The sum of a stack whose outer part sums to `outer`, with `frame` in front of it.
#[inline(always)]
pub fn hash_extend(outer: u64, frame: usize) -> u64 {
    hash_mix(frame).wrapping_add(outer.wrapping_mul(K))
}

/// `K^n` for `n` up to `MAX_DEPTH`: what a sum is multiplied by to sit behind `n`
/// frames.
pub const HASH_POW: [u64; MAX_DEPTH + 1] = {
    let mut p = [1u64; MAX_DEPTH + 1];
    let mut i = 1;
    while i <= MAX_DEPTH {
        p[i] = p[i - 1].wrapping_mul(K);
        i += 1;
    }
    p
};

/// The hash of a stack whose frames sum to `sum`, seeded with `seed` (never 0: 0
/// marks an empty slot). The bit set to make it so is the top one: a stack's first
/// slot comes from the low bits (setting the lowest left every first slot an odd
/// one, half the table).
#[inline(always)]
pub fn hash_finish(sum: u64, seed: u64) -> u64 {
    let x = (sum ^ seed.wrapping_mul(K)).wrapping_mul(M);
    (x ^ (x >> 29)) | 1 << 63
}

/// Counters of one (stack, phase, size class), in one cache line: a lookup touches
/// this line only. The site's frames lie apart, one copy for every thread's tables
/// (`stacks`; read only when a site is inserted or reported), so that slots stay
/// dense however deep the stacks. (On a synthesis the lookup and its counters take
/// about a sixth of the recording function's time, cache misses included; the walk
/// takes the rest. See BENCHMARKS.md.)
#[repr(C, align(64))]
pub struct Slot {
    tag: AtomicU64,
    meta: AtomicU64,
    /// Allocations (`alloc`, `alloc_zeroed`). Every counter here is weighted as it
    /// is recorded: each call counts once in `sites` mode, and in `sample` mode each
    /// sampled one counts for the allocations it stands for (`hot::sites::sample`),
    /// so that a run switched between modes or intervals keeps each count's own
    /// weight.
    pub allocs: AtomicU64,
    /// `realloc` calls that landed in this class.
    pub reallocs: AtomicU64,
    /// Sum of requested sizes of the allocations and reallocs counted here.
    pub bytes_requested: AtomicU64,
    /// Sum of their real block sizes (see `size_class::usable`).
    pub bytes_allocated: AtomicU64,
    /// Blocks from here freed before their thread's next allocation.
    pub temporaries: AtomicU64,
    /// In the line's spare word: bits 0-31, the site's number among the sites of
    /// followed blocks, plus one, 0 until a block of this slot's site is followed
    /// (see [`Slot::site_number`]); bits 32-63, the stacks sampled here in `sample`
    /// mode (see [`Slot::samples`]), which the sampled path alone counts.
    number: AtomicU64,
}

/// The low half of [`Slot`]'s spare word: the site's number.
const NUMBER_BITS: u64 = u32::MAX as u64;

/// One sample in the high half of [`Slot`]'s spare word.
const ONE_SAMPLE: u64 = 1 << 32;

/// Adds `n` to a counter only this thread writes: a load and a store, no `lock` prefix.
#[inline(always)]
pub fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

impl Slot {
    /// The number the cold side gave this slot's site for its followed blocks, once
    /// it has given one (`site_index`): following another block of the site then
    /// needs no lookup of its key in a shared map. Owner thread only, as the slot's
    /// counters; emptied with the slot.
    pub fn site_number(&self) -> Option<u32> {
        match self.number.load(Relaxed) & NUMBER_BITS {
            0 => None,
            n => Some((n - 1) as u32),
        }
    }

    /// Keeps `number` as this slot's site's (see [`Slot::site_number`]).
    pub fn keep_site_number(&self, number: u32) {
        let samples = self.number.load(Relaxed) & !NUMBER_BITS;
        self.number.store(samples | (number as u64 + 1), Relaxed);
    }

    /// Stacks sampled here in `sample` mode (raw, unweighted; up to `u32::MAX`).
    pub fn samples(&self) -> u64 {
        self.number.load(Relaxed) >> 32
    }

    /// Counts one more sampled stack here (owner thread, on the sampled path); the
    /// count stays at `u32::MAX` once there, 4 billion samples of one site on one
    /// thread.
    pub fn count_sample(&self) {
        let word = self.number.load(Relaxed);
        if word >> 32 != u32::MAX as u64 {
            self.number.store(word + ONE_SAMPLE, Relaxed);
        }
    }

    /// Two keys with equal 64-bit hashes and meta words are taken to be the same
    /// stack without comparing frames: comparing a stack's frames costs more than the
    /// rest of a lookup, and with a million distinct stacks the chance of any collision is
    /// about 3e-8.
    #[inline(always)]
    fn matches(&self, key: &SiteKey<'_>) -> bool {
        self.meta.load(Relaxed) == key.meta.bits()
    }

    fn publish(&self, stack: &AtomicPtr<Stack>, key: &SiteKey<'_>, interned: &'static Stack) {
        self.meta.store(key.meta.bits(), Relaxed);
        stack.store((interned as *const Stack).cast_mut(), Relaxed);
        self.tag.store(key.hash, Release);
    }

    /// Copies the counters of `other`, and its site's number (the owner, while
    /// growing its table).
    fn take_counts_from(&self, other: &Slot) {
        for (dst, src) in [
            (&self.number, &other.number),
            (&self.allocs, &other.allocs),
            (&self.reallocs, &other.reallocs),
            (&self.bytes_requested, &other.bytes_requested),
            (&self.bytes_allocated, &other.bytes_allocated),
            (&self.temporaries, &other.temporaries),
        ] {
            dst.store(src.load(Relaxed), Relaxed);
        }
    }
}

/// Result of a lookup by the owning thread.
pub enum Lookup<'t> {
    /// The slot for the key (found or newly published).
    Slot(&'t Slot),
    /// The table is too full to insert: grow it, then look up again.
    Full,
}

/// A power-of-two array of slots, and their sites' stacks.
pub struct SiteTable {
    slots: Box<[Slot]>,
    /// Slot `i`'s stack (written before the slot's tag is published, and read only
    /// after it), apart from the slots so that a lookup reads one line.
    stacks: Box<[AtomicPtr<Stack>]>,
    len: AtomicUsize,
}

impl SiteTable {
    /// A zeroed table of `capacity` slots (a power of two). Allocates: cold code only,
    /// under the re-entrancy guard.
    pub fn with_capacity(capacity: usize) -> Box<SiteTable> {
        debug_assert!(capacity.is_power_of_two());
        // All-zero bytes are a valid `Slot` (atomics of 0: an empty slot).
        let slots = std::iter::repeat_with(Slot::empty)
            .take(capacity)
            .collect::<Box<[Slot]>>();
        let stacks = std::iter::repeat_with(|| AtomicPtr::new(null_mut()))
            .take(capacity)
            .collect::<Box<[AtomicPtr<Stack>]>>();
        Box::new(SiteTable {
            slots,
            stacks,
            len: AtomicUsize::new(0),
        })
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Number of published slots.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    /// True when no slot is published.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of a table of `capacity` slots (their stacks are counted apart, once
    /// for every table: `stacks::memory_bytes`).
    pub const fn bytes(capacity: usize) -> usize {
        capacity * (size_of::<Slot>() + size_of::<AtomicPtr<Stack>>())
    }

    /// Calls `f` with each published slot, its meta word and its frames. Safe from
    /// any thread: a slot's key is written before its tag is published.
    pub fn for_each_site(&self, mut f: impl FnMut(&Slot, SiteMeta, &[usize])) {
        self.for_each_key(|slot, meta, _, stack| f(slot, shown(meta, stack), stack.frames()));
    }

    /// Calls `f` with each published slot, its key as the owner looks it up (meta
    /// word and hash: a folded stack's too) and its interned stack.
    fn for_each_key(&self, mut f: impl FnMut(&Slot, SiteMeta, u64, &'static Stack)) {
        for (slot, stack) in self.slots.iter().zip(self.stacks.iter()) {
            if let Some((meta, hash, stack)) = read_key(slot, stack) {
                f(slot, meta, hash, stack);
            }
        }
    }

    /// The meta word and hash of `slot`, a slot of this table; `None` if not
    /// published. Reads the slot's own line only.
    pub fn key(&self, slot: &Slot) -> Option<(SiteMeta, u64)> {
        let tag = slot.tag.load(Acquire);
        (tag != 0).then(|| (SiteMeta(slot.meta.load(Relaxed)), tag))
    }

    /// The frames of `slot`, a slot of this table, into `out`, and how many (0 if
    /// it is not published).
    pub fn frames_of(&self, slot: &Slot, out: &mut Frames) -> usize {
        let Some(stack) = self.stack_of(slot) else {
            return 0;
        };
        let frames = stack.frames();
        out[..frames.len()].copy_from_slice(frames);
        frames.len()
    }

    /// The interned stack of `slot`, a slot of this table (`None` while it is
    /// empty): what [`frames_of`](SiteTable::frames_of) copies.
    pub fn stack_of(&self, slot: &Slot) -> Option<&'static Stack> {
        let i = (slot as *const Slot)
            .addr()
            .wrapping_sub(self.slots.as_ptr().addr())
            / size_of::<Slot>();
        self.slots
            .get(i)
            .zip(self.stacks.get(i))
            .and_then(|(slot, stack)| read_key(slot, stack))
            .map(|(_, _, stack)| stack)
    }

    /// The slot of a site already in the table: same hash and meta word (see
    /// [`Slot::matches`]). Owner thread only; `None` sends the caller to [`lookup`],
    /// which inserts.
    ///
    /// [`lookup`]: SiteTable::lookup
    #[inline(always)]
    pub fn find(&self, hash: u64, meta: SiteMeta) -> Option<&Slot> {
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = hash as usize & mask;
        loop {
            let slot = self.slots.get(i)?;
            let tag = slot.tag.load(Relaxed);
            if tag == hash && slot.meta.load(Relaxed) == meta.bits() {
                return Some(slot);
            }
            if tag == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Finds or publishes the slot for `key`. Owner thread only; publishing a site
    /// may intern its stack (`stacks::intern`), which allocates the first time any
    /// thread meets that stack: under the re-entrancy guard only.
    pub fn lookup(&self, key: &SiteKey<'_>) -> Lookup<'_> {
        self.lookup_with(key, || {
            stacks::intern(&key.frames[..key.meta.depth().min(key.frames.len())])
        })
    }

    /// [`lookup`](SiteTable::lookup), with the key's interned stack from `stack` if
    /// the site is published.
    #[inline]
    fn lookup_with(&self, key: &SiteKey<'_>, stack: impl FnOnce() -> &'static Stack) -> Lookup<'_> {
        let mask = self.slots.len() - 1;
        let mut i = key.hash as usize & mask;
        loop {
            let (Some(slot), Some(slot_stack)) = (self.slots.get(i), self.stacks.get(i)) else {
                return Lookup::Full;
            };
            let tag = slot.tag.load(Relaxed);
            if tag == key.hash && slot.matches(key) {
                return Lookup::Slot(slot);
            }
            if tag == 0 {
                let len = self.len.load(Relaxed);
                if (len + 1) * 2 > self.slots.len() {
                    return Lookup::Full;
                }
                slot.publish(slot_stack, key, stack());
                self.len.store(len + 1, Relaxed);
                return Lookup::Slot(slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// Moves every published slot of `self` into `bigger` (owner thread, cold), under
    /// the key the owner looks it up by: a folded stack's slot keeps its own.
    pub fn move_into(&self, bigger: &SiteTable) {
        self.for_each_key(|slot, meta, hash, stack| {
            let key = SiteKey {
                meta,
                frames: stack.frames(),
                hash,
            };
            if let Lookup::Slot(dst) = bigger.lookup_with(&key, || stack) {
                dst.take_counts_from(slot);
            }
        });
    }

    /// Empties the table (owner thread, with readers excluded by the registry lock).
    pub fn clear(&self) {
        for slot in self.slots.iter() {
            for counter in [
                &slot.tag,
                &slot.meta,
                &slot.allocs,
                &slot.reallocs,
                &slot.bytes_requested,
                &slot.bytes_allocated,
                &slot.temporaries,
                &slot.number,
            ] {
                counter.store(0, Relaxed);
            }
        }
        self.len.store(0, Relaxed);
    }
}

/// The meta word, hash and stack of a published slot, or `None` for an empty one.
/// Safe from any thread.
fn read_key(slot: &Slot, stack: &AtomicPtr<Stack>) -> Option<(SiteMeta, u64, &'static Stack)> {
    let hash = slot.tag.load(Acquire);
    if hash == 0 {
        return None;
    }
    let meta = SiteMeta(slot.meta.load(Relaxed));
    // SAFETY: published with the tag, from `stacks::intern`, whose records live for
    // the process.
    let stack = unsafe { &*stack.load(Relaxed) };
    Some((meta, hash, stack))
}

/// The meta word readers see for a slot of key `meta` and stack `stack`: a stack
/// past the cap has the folded record's one frame, whatever the walk's depth.
fn shown(meta: SiteMeta, stack: &Stack) -> SiteMeta {
    meta.at_depth(stack.frames().len())
}

impl Slot {
    fn empty() -> Slot {
        Slot {
            tag: AtomicU64::new(0),
            meta: AtomicU64::new(0),
            allocs: AtomicU64::new(0),
            reallocs: AtomicU64::new(0),
            bytes_requested: AtomicU64::new(0),
            bytes_allocated: AtomicU64::new(0),
            temporaries: AtomicU64::new(0),
            number: AtomicU64::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(meta: SiteMeta, frames: &[usize]) -> SiteKey<'_> {
        SiteKey {
            meta,
            frames,
            hash: key_hash(meta, frames),
        }
    }

    #[test]
    fn same_key_same_slot_and_growth_keeps_counts() {
        // Eight slots hold four sites: the table is full at half.
        let table = SiteTable::with_capacity(8);
        let stacks: Vec<Vec<usize>> = (1..=4).map(|i| vec![i, i * 10, 7]).collect();
        for (n, s) in stacks.iter().enumerate() {
            let k = key(SiteMeta::new(0, 3, s.len()), s);
            for _ in 0..=n {
                match table.lookup(&k) {
                    Lookup::Slot(slot) => bump(&slot.allocs, 1),
                    Lookup::Full => panic!("full too early at {n}"),
                }
            }
        }
        assert_eq!(table.len(), 4);
        assert!(matches!(
            table.lookup(&key(SiteMeta::new(1, 3, 1), &[99])),
            Lookup::Full
        ));
        let bigger = SiteTable::with_capacity(16);
        table.move_into(&bigger);
        assert_eq!(bigger.len(), 4);
        for (n, s) in stacks.iter().enumerate() {
            match bigger.lookup(&key(SiteMeta::new(0, 3, s.len()), s)) {
                Lookup::Slot(slot) => assert_eq!(slot.allocs.load(Relaxed), n as u64 + 1),
                Lookup::Full => panic!("full"),
            }
        }
        bigger.clear();
        assert!(bigger.is_empty());
    }

    #[test]
    fn first_slots_cover_the_table() {
        // Every low bit of a hash varies, so stacks start in every slot of a table.
        let mut first = [0usize; 16];
        for f in 0..1_000usize {
            let h = key_hash(SiteMeta::new(0, 3, 2), &[0x40_1000 + 16 * f, 0x40_2000]);
            assert_ne!(h, 0);
            first[h as usize & 15] += 1;
        }
        assert!(first.iter().all(|&n| n > 20), "first slots {first:?}");
    }

    #[test]
    fn a_folded_stack_reads_as_the_folded_site() {
        let table = SiteTable::with_capacity(8);
        let frames = [0x10, 0x20, 0x30];
        let k = key(SiteMeta::new(2, 5, 3), &frames);
        let Lookup::Slot(slot) = table.lookup_with(&k, stacks::folded) else {
            panic!("full")
        };
        let mut seen = vec![];
        table.for_each_site(|_, meta, frames| seen.push((meta, frames.to_vec())));
        assert_eq!(seen, [(SiteMeta::new(2, 5, 1), vec![stacks::FOLDED_FRAME])]);
        let mut out = [0; MAX_DEPTH];
        assert_eq!(table.frames_of(slot, &mut out), 1);
        assert_eq!(out[0], stacks::FOLDED_FRAME);
    }

    #[test]
    fn folded_slots_keep_their_keys_and_counts_when_the_table_grows() {
        // Two stacks past the cap, of one phase and class: two slots, both folded.
        let table = SiteTable::with_capacity(8);
        let stacks_of = [[0x10usize, 0x20], [0x10, 0x30]];
        let keys: Vec<SiteKey<'_>> = stacks_of
            .iter()
            .map(|s| key(SiteMeta::new(1, 4, 2), s))
            .collect();
        for (k, n) in keys.iter().zip([7, 5]) {
            let Lookup::Slot(slot) = table.lookup_with(k, stacks::folded) else {
                panic!("full")
            };
            bump(&slot.allocs, n);
        }
        let bigger = SiteTable::with_capacity(16);
        table.move_into(&bigger);
        assert_eq!(bigger.len(), 2);
        for (k, n) in keys.iter().zip([7, 5]) {
            let slot = bigger
                .find(k.hash, k.meta)
                .expect("found by the owner's key");
            assert_eq!(slot.allocs.load(Relaxed), n);
        }
        let mut seen = vec![];
        bigger.for_each_site(|slot, meta, frames| {
            seen.push((meta, frames.to_vec(), slot.allocs.load(Relaxed)));
        });
        seen.sort_by_key(|s| s.2);
        let folded = (SiteMeta::new(1, 4, 1), vec![stacks::FOLDED_FRAME]);
        assert_eq!(
            seen,
            [(folded.0, folded.1.clone(), 5), (folded.0, folded.1, 7)]
        );
    }

    #[test]
    fn meta_splits_sites() {
        let table = SiteTable::with_capacity(8);
        let frames = [1, 2, 3];
        let a = key(SiteMeta::new(0, 1, 3), &frames);
        let b = key(SiteMeta::new(0, 2, 3), &frames);
        let (Lookup::Slot(sa), Lookup::Slot(sb)) = (table.lookup(&a), table.lookup(&b)) else {
            panic!("full")
        };
        assert!(!std::ptr::eq(sa, sb));
        let m = SiteMeta::new(5, 156, 32);
        assert_eq!((m.phase(), m.class(), m.depth()), (5, 156, 32));
        assert_eq!(SiteMeta::new(5, 156, 0).with_depth(32), m);
        assert_eq!(m.without_depth(), SiteMeta::new(5, 156, 0));
        assert_eq!(m.at_depth(1), SiteMeta::new(5, 156, 1));
    }
}
