//! Stack walks that read again only what may have changed since the thread's
//! previous walk.
//!
//! A frame-pointer walk is a chain of dependent loads: each frame's address is read
//! from the frame before, about 1.4 ns a frame here. Consecutive allocations of a
//! thread mostly share the outer part of their stacks (`main`, the prover's loops,
//! a gadget) and differ in a few inner frames. So each thread keeps its previous
//! walk's frame records, outermost first: where each frame lies, the two words read
//! there (the caller's frame pointer and the return address), and the hash sum of
//! the frames from it outward. A new walk first compares the kept records that still
//! lie on the stack with the two words now at their addresses, from the outermost
//! in, up to the first that changed. Those loads do not depend on each other, so the
//! processor runs them side by side. Then it follows frame pointers from its start
//! until it reaches one of the unchanged records, and takes the rest from the trail.
//!
//! **Exact.** A walk is a function of the words it reads. When the walk reaches an
//! unchanged record, a walk on from there would read exactly the kept words at
//! exactly the kept addresses (each record's first word is the next one's address)
//! and stop where the kept walk stopped, so the kept frames and their hash sum are
//! the new walk's, bit for bit. A stack whose outer part did change is walked as far
//! as it must be. Both are checked against a plain walk, over stacks that change
//! between walks, in the tests below.
//!
//! **Safe.** Every compared address lies between the walk's first frame (at or above
//! the stack pointer) and the top of the thread's stack: kept records only ever come
//! from walks of this thread's stack under the same bounds, and those below the
//! walk's first frame are not compared.
//!
//! **Cost.** A compared record takes a handful of instructions, not a dependent
//! load, so depth costs little once a thread's stacks share their outer part; the
//! first walk of a thread, and one whose outer part changed, cost what a plain walk
//! does, plus writing the records.

use super::site_table::{HASH_POW, hash_extend, hash_finish};
use super::stack::{self, MAX_DEPTH, RawFrames, StackBounds, Start};
use std::cell::Cell;
use std::mem::MaybeUninit;

/// One frame of a kept walk. `next` and `ret` lie side by side and 16-byte
/// aligned, as the stack holds them, so that one 16-byte load compares them.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
struct Record {
    /// The first word at the frame: the caller's frame pointer.
    next: usize,
    /// The second: the return address into the caller.
    ret: usize,
    /// Where the frame lies (its frame pointer).
    fp: usize,
    /// Hash sum (`site_table::hash_extend`) of the frames from this one outward, down
    /// to where the sums start (see [`Trail::base`]).
    sum: u64,
}

/// Records a trail holds: a kept walk of up to `MAX_DEPTH` frames, and room for as
/// many new ones in front of it before it must move down.
const CAP: usize = 2 * MAX_DEPTH;
const _: () = assert!(CAP.is_power_of_two());

/// A thread's previous walk: its records `lo..hi` of `recs`, outermost first. All
/// zeros is an empty trail. Owner thread only.
pub struct Trail {
    recs: [Cell<Record>; CAP],
    /// The outermost kept record.
    lo: Cell<usize>,
    /// One past the innermost (`lo`: none).
    hi: Cell<usize>,
    /// Hash sum of the record just outside the outermost kept one (0 when sums
    /// start at it, as they always do when `cut` is false): the kept walk's own sum
    /// is `sum(hi - 1) - K^len · base`.
    base: Cell<u64>,
    /// True when the kept walk stopped at its depth, not at the stack's end: its
    /// outermost record's frame pointer leads further.
    cut: Cell<bool>,
}

/// What a walk found: how many frames and their hash. The frames are the trail's
/// until the thread's next walk ([`frames`]).
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    /// Frames walked (return addresses hashed).
    pub n: usize,
    /// `site_table::hash` of the seed and the return addresses.
    pub hash: u64,
    /// True when the stack pointer was outside the thread's known stack, so that no
    /// frame could be trusted and none was read.
    pub foreign: bool,
}

impl Default for Trail {
    fn default() -> Trail {
        Trail {
            recs: std::array::from_fn(|_| Cell::default()),
            lo: Cell::new(0),
            hi: Cell::new(0),
            base: Cell::new(0),
            cut: Cell::new(false),
        }
    }
}

impl Trail {
    /// Record `i` (`i < CAP` by construction; masked, never out of bounds).
    #[inline(always)]
    fn at(&self, i: usize) -> Record {
        self.cell(i).get()
    }

    #[inline(always)]
    fn set(&self, i: usize, r: Record) {
        self.cell(i).set(r);
    }

    #[inline(always)]
    fn cell(&self, i: usize) -> &Cell<Record> {
        &self.recs[i & (CAP - 1)]
    }
}

/// Walks up to `depth` frames, starting with the caller of the function this is
/// inlined into after passing over `skip` frames, and hashes their return addresses
/// (`site_table::hash` of `seed` and the frames). The frames stay in `trail` for
/// [`frames`].
///
/// # Safety
/// `bounds` must be the current thread's stack (from `stack::current_stack_bounds`
/// on this thread), or zero; `trail` must be this thread's, only ever walked with
/// these bounds.
#[inline(always)]
pub unsafe fn walk(
    trail: &Trail,
    skip: usize,
    depth: usize,
    bounds: StackBounds,
    seed: u64,
) -> Walk {
    // SAFETY: forwarded contract.
    match unsafe { stack::start(skip, bounds) } {
        // SAFETY: `start` checked fp against the stack's bounds, which give `limit`.
        Start::Frames { fp, limit } => unsafe { walk_from(trail, fp, limit, depth, seed) },
        Start::Empty => empty(seed, false),
        Start::Foreign => empty(seed, true),
    }
}

#[inline(always)]
pub fn empty(seed: u64, foreign: bool) -> Walk {
    Walk {
        n: 0,
        hash: hash_finish(0, seed),
        foreign,
    }
}

/// The return addresses of `walk`, the latest walk of `trail`, innermost first.
#[inline(always)]
pub fn frames<'o>(trail: &Trail, walk: &Walk, out: &'o mut RawFrames) -> &'o [usize] {
    let (lo, hi) = (trail.lo.get(), trail.hi.get());
    let n = walk.n.min(hi - lo);
    for (k, slot) in out.iter_mut().take(n).enumerate() {
        slot.write(trail.at(hi - 1 - k).ret);
    }
    // SAFETY: the first `n` (<= MAX_DEPTH) were written just above.
    unsafe { stack::captured(out, n) }
}

/// Frame `k` (`k < walk.n`) of `walk`, the latest walk of `trail`, innermost
/// first: where it lies and its two words.
#[inline(always)]
pub fn frame(trail: &Trail, walk: &Walk, k: usize) -> (usize, usize, usize) {
    debug_assert!(k < walk.n && k < trail.hi.get() - trail.lo.get());
    let r = trail.at(trail.hi.get().wrapping_sub(1 + k));
    (r.fp, r.next, r.ret)
}

/// The walk from the frame at `fp`, which lies on the current thread's stack at or
/// above the stack pointer, with `limit` the highest frame pointer of that stack.
///
/// First it compares the kept records that lie at or above `fp` with the stack, from
/// the outermost in, up to the first that differs: every record outward of that one
/// is unchanged. If the kept walk starts at `fp` and all of it is unchanged, that is
/// the walk. Otherwise it walks from `fp` until it reaches one of the unchanged
/// records, and takes the rest from the trail.
///
/// # Safety
/// Every address from `fp` to `limit + 16` must be mapped, and every walk of `trail`
/// before must have been over the same memory with the same `limit`.
#[inline(always)]
pub unsafe fn walk_from(
    trail: &Trail,
    mut fp: usize,
    limit: usize,
    depth: usize,
    seed: u64,
) -> Walk {
    let max = depth.min(MAX_DEPTH);
    if max == 0 {
        return empty(seed, false);
    }
    let (lo, hi) = (trail.lo.get(), trail.hi.get());
    // Kept records at or above `fp`: `lo..above` (those further in are not on the
    // stack any more).
    let mut above = hi;
    while above > lo && trail.at(above - 1).fp < fp {
        above -= 1;
    }
    // SAFETY: the records `lo..above` lie at or above `fp` (on the stack, at or
    // above the stack pointer) and at most at `limit`.
    let unchanged = unsafe { unchanged_to(trail, lo, above) };
    if unchanged == hi && hi > lo && trail.at(hi - 1).fp == fp {
        // The kept walk starts here and nothing in it changed (about a quarter of
        // a synthesis's walks): it is this walk, as `join` would find it with no
        // new frames, unless it was cut shorter than this walk may go.
        let n = hi - lo;
        if n <= max && !trail.cut.get() {
            return whole(trail.at(hi - 1).sum, n, seed);
        }
        if n == max {
            return window(trail.at(hi - 1).sum, n, trail.base.get(), seed);
        }
    }
    if unchanged < above && !trail.cut.get() && above - lo <= max && trail.at(above - 1).fp == fp {
        // SAFETY: the records `unchanged..above` lie at or above `fp`, as above.
        if let Some(walk) = unsafe { one_return_changed(trail, unchanged, above, seed) } {
            return walk;
        }
    }
    // The walk joins at the innermost unchanged record it reaches: `joint - 1`.
    let mut joint = unchanged;
    // New frames, innermost first: (frame pointer, return address). Left
    // uninitialised: zeroing 1 KiB per walk would cost more than the walk.
    let mut new = [const { MaybeUninit::<(usize, usize)>::uninit() }; MAX_DEPTH];
    let mut i = 0;
    // The frame pointer of the record the walk joins next: `joint - 1`'s, or none.
    let stop_at = |joint: usize| {
        if joint > lo {
            trail.at(joint - 1).fp
        } else {
            usize::MAX
        }
    };
    let mut stop = stop_at(joint);
    let last_next = loop {
        if fp >= stop {
            if fp == stop && !trail.cut.get() && i + joint - lo <= max && joint + i <= CAP {
                // The common join, tested first so that it skips the search below:
                // the walk reached the innermost unchanged record itself (`stop` is
                // its address, `joint > lo`), all of the kept walk from there out
                // ended at the stack's end, and there is room for the new records in
                // front.
                return join_whole(trail, new_frames(&new, i), joint - 1, seed);
            }
            // Reached the unchanged records, or passed over some of them (frames
            // without frame pointers): join at the one at `fp`, if any.
            while joint > lo && trail.at(joint - 1).fp < fp {
                joint -= 1;
            }
            if joint > lo && trail.at(joint - 1).fp == fp {
                let p = joint - 1;
                if !trail.cut.get() && i + p + 1 - lo <= max && p + 1 + i <= CAP {
                    // As above, at a record the walk reached by passing over others.
                    return join_whole(trail, new_frames(&new, i), p, seed);
                }
                let want = (max - i).min(p + 1 - lo);
                if p + 1 - want > lo || i + want == max || !trail.cut.get() {
                    return join(trail, new_frames(&new, i), p, want, seed);
                }
                // The kept walk stopped at its depth and this one has room for more:
                // take its records as new ones and walk on past them.
                for k in 0..want {
                    let r = trail.at(p - k);
                    new[(i + k) & (MAX_DEPTH - 1)].write((r.fp, r.ret));
                }
                i += want;
                fp = trail.at(lo).next;
                joint = lo;
            }
            stop = stop_at(joint);
        }
        // SAFETY: fp lies on the stack between the stack pointer and `limit`:
        // checked by `start` or by `follows` below.
        let (next, ret) = unsafe { stack::read_frame(fp) };
        // (`i < max <= MAX_DEPTH`: the mask only spares a bounds check.)
        new[i & (MAX_DEPTH - 1)].write((fp, ret));
        i += 1;
        // Two branches, each nearly always taken the same way, where one on both
        // conditions made the compiler compute them into flags first.
        if !stack::follows(fp, next, limit) {
            break next;
        }
        if i == max {
            break next;
        }
        fp = next;
    };
    let cut = i == max && stack::follows(fp, last_next, limit);
    let sum = restart(trail, new_frames(&new, i), last_next, cut);
    Walk {
        n: i,
        hash: hash_finish(sum, seed),
        foreign: false,
    }
}

/// The walk when the kept walk starts where this one does and only the return
/// address of its outermost changed record `k` changed: a call from another place in
/// the same caller, everything inward of it called again as before (half of a
/// synthesis's walks). The record's first word must be the kept one, and every record
/// from `k + 1` to `above` (the innermost, at the walk's start) unchanged; then the
/// walk is the kept one with that return address, as a plain walk would read it, and
/// only the hash sums from `k` inward are made again. The kept walk must not be cut
/// and must fit the walk's depth. `None` when the stack is not like that.
///
/// # Safety
/// The records `k..above` must lie at or above the walk's start (see [`walk_from`]).
#[inline(always)]
unsafe fn one_return_changed(trail: &Trail, k: usize, above: usize, seed: u64) -> Option<Walk> {
    let lo = trail.lo.get();
    let r = trail.at(k);
    // SAFETY: the caller's contract.
    let (next, ret) = unsafe { stack::read_frame(r.fp) };
    // SAFETY: as above.
    if next != r.next || unsafe { unchanged_to(trail, k + 1, above) } != above {
        return None;
    }
    // Not cut: the sums start at the outermost record (`base` 0).
    let mut sum = if k > lo { trail.at(k - 1).sum } else { 0 };
    sum = hash_extend(sum, ret);
    trail.set(k, Record { ret, sum, ..r });
    for j in k + 1..above {
        let mut q = trail.at(j);
        sum = hash_extend(sum, q.ret);
        q.sum = sum;
        trail.set(j, q);
    }
    trail.hi.set(above);
    Some(whole(sum, above - lo, seed))
}

/// The first `n` new frames.
#[inline(always)]
fn new_frames(new: &[MaybeUninit<(usize, usize)>; MAX_DEPTH], n: usize) -> &[(usize, usize)] {
    // SAFETY: `walk_from` wrote the first `n` (<= MAX_DEPTH) before asking, and
    // `MaybeUninit<T>` has the layout of `T`.
    unsafe { std::slice::from_raw_parts(new.as_ptr().cast(), n.min(MAX_DEPTH)) }
}

/// Compares the kept records `from..to` (outermost first) with the stack's words at
/// their addresses, up to the first that differs, and returns its index (`to` when
/// none does): every record before it is unchanged. Eight records at a time, one
/// branch per eight (the loads do not depend on each other); then four, from the
/// start of the eight that differed or of the last seven; then one at a time.
///
/// # Safety
/// The records' addresses must be mapped (see [`walk_from`]), and `to <= CAP`.
#[inline(always)]
unsafe fn unchanged_to(trail: &Trail, from: usize, to: usize) -> usize {
    let recs = trail.recs.as_ptr();
    let mut i = from;
    // SAFETY: the records each loop compares lie in `recs` (`i + 8`, `i + 4` or
    // `i + 1` is at most `to <= CAP`); the stack's words are the caller's contract.
    while i + 8 <= to && !unsafe { any_differ::<8>(recs.add(i)) } {
        i += 8;
    }
    // SAFETY: as above.
    if i + 4 <= to && !unsafe { any_differ::<4>(recs.add(i)) } {
        i += 4;
    }
    // SAFETY: as above.
    while i < to && unsafe { differs(&*recs.add(i)) } == 0 {
        i += 1;
    }
    i
}

/// True when one of the `N` records from `first` differs from the stack. On x86_64
/// each record is one 16-byte load from the stack and one from the trail (SSE2, part
/// of x86_64's baseline): on the 48-frame `alloc_pair` stack that took 9 ns a walk
/// off the two 8-byte loads of [`differs`]. (A 16-byte load that spans the two 8-byte
/// stores of a `call` and a `push` still in the store buffer waits for them to reach
/// the cache; measured, that costs less than the loads it saves.)
///
/// # Safety
/// The `N` records must lie in the trail, and their addresses be mapped.
#[inline(always)]
unsafe fn any_differ<const N: usize>(first: *const Cell<Record>) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_load_si128, _mm_loadu_si128, _mm_movemask_epi8,
            _mm_or_si128, _mm_setzero_si128, _mm_xor_si128,
        };
        // SAFETY: the caller's contract (`read_frame`'s 16 bytes at each record's
        // address); `next` and `ret` start the 32-byte-aligned `repr(C)` record; SSE2
        // is part of x86_64's baseline.
        unsafe {
            let mut all = _mm_setzero_si128();
            for k in 0..N {
                let r = (*first.add(k)).as_ptr();
                let stack = _mm_loadu_si128((*r).fp as *const __m128i);
                all = _mm_or_si128(all, _mm_xor_si128(stack, _mm_load_si128(r.cast())));
            }
            _mm_movemask_epi8(_mm_cmpeq_epi8(all, _mm_setzero_si128())) != 0xffff
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: the caller's contract.
        (0..N).fold(0, |d, k| d | unsafe { differs(&*first.add(k)) }) != 0
    }
}

/// The two words at a kept record's address xor the two it kept: 0 when unchanged.
///
/// # Safety
/// The record's address must be mapped.
#[inline(always)]
unsafe fn differs(r: &Cell<Record>) -> u64 {
    let r = r.get();
    // SAFETY: the caller's contract.
    let (next, ret) = unsafe { stack::read_frame(r.fp) };
    (next ^ r.next) as u64 | (ret ^ r.ret) as u64
}

/// Keeps `new` (innermost first) in front of the `want` kept records from `p`
/// outward, and returns the walk of them all. Writing the new records extends the
/// hash sums from `p`'s inward; the walk is their [`window`].
#[inline(always)]
fn join(trail: &Trail, new: &[(usize, usize)], p: usize, want: usize, seed: u64) -> Walk {
    let outer = p + 1 - want;
    let lo = trail.lo.get();
    let (base, cut) = if outer == lo {
        (trail.base.get(), trail.cut.get())
    } else {
        (trail.at(outer - 1).sum, true)
    };
    let p = if p + new.len() < CAP {
        p
    } else {
        // No room in front: move the kept records down to the start.
        move_down(trail, outer, want)
    };
    let outer = p + 1 - want;
    let sum = keep_in_front(trail, new, p);
    let n = new.len() + want;
    trail.lo.set(outer);
    trail.hi.set(p + 1 + new.len());
    trail.base.set(base);
    trail.cut.set(cut);
    window(sum, n, base, seed)
}

/// Keeps `new` (innermost first) in front of the kept record `p` and all of the
/// kept walk outward of it, which was not cut (so its sums start at its outermost
/// record: `base` is 0); `p + 1 + new.len() <= CAP`. Returns the walk of them all.
#[inline(always)]
fn join_whole(trail: &Trail, new: &[(usize, usize)], p: usize, seed: u64) -> Walk {
    debug_assert!(!trail.cut.get() && trail.base.get() == 0 && p + 1 + new.len() <= CAP);
    let sum = keep_in_front(trail, new, p);
    let hi = p + 1 + new.len();
    trail.hi.set(hi);
    whole(sum, hi - trail.lo.get(), seed)
}

/// Writes `new` (innermost first) to the records `p + 1 ..= p + new.len()` (which
/// must lie in the trail), outermost first, extending the hash sums from record
/// `p`'s, and returns the innermost one's sum.
#[inline(always)]
fn keep_in_front(trail: &Trail, new: &[(usize, usize)], p: usize) -> u64 {
    let joint = trail.at(p);
    let (mut sum, mut next) = (joint.sum, joint.fp);
    for (k, &(fp, ret)) in new.iter().rev().enumerate() {
        sum = hash_extend(sum, ret);
        trail.set(p + 1 + k, Record { fp, next, ret, sum });
        next = fp;
    }
    sum
}

/// The walk of the `n` kept records from the outermost, where the sums start,
/// whose innermost has hash sum `sum`.
#[inline(always)]
fn whole(sum: u64, n: usize, seed: u64) -> Walk {
    Walk {
        n,
        hash: hash_finish(sum, seed),
        foreign: false,
    }
}

/// The walk of the `n` kept records whose innermost has hash sum `sum`, the sum
/// just outside the outermost being `base`: its hash is the innermost sum less
/// `K^n · base`.
#[inline(always)]
fn window(sum: u64, n: usize, base: u64, seed: u64) -> Walk {
    Walk {
        n,
        hash: hash_finish(
            sum.wrapping_sub(HASH_POW[n.min(MAX_DEPTH)].wrapping_mul(base)),
            seed,
        ),
        foreign: false,
    }
}

/// Moves the `want` records from `outer` in to the start of the trail, and returns
/// where the innermost of them now is.
#[cold]
#[inline(never)]
fn move_down(trail: &Trail, outer: usize, want: usize) -> usize {
    for k in 0..want {
        trail.set(k, trail.at(outer + k));
    }
    want - 1
}

/// Keeps `new` (innermost first; `last_next` the outermost frame's first word) as a
/// walk of its own, from the start of the trail, and returns its hash sum.
#[inline(never)]
fn restart(trail: &Trail, new: &[(usize, usize)], last_next: usize, cut: bool) -> u64 {
    let n = new.len();
    let (mut sum, mut next) = (0, last_next);
    for (k, &(fp, ret)) in new.iter().enumerate().rev() {
        sum = hash_extend(sum, ret);
        trail.set(n - 1 - k, Record { fp, next, ret, sum });
        next = fp;
    }
    trail.lo.set(0);
    trail.hi.set(n);
    trail.base.set(0);
    trail.cut.set(cut);
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::fake_stack::FakeStack;
    use crate::hot::site_table::hash;

    /// Walks `stack` from its innermost frame (or one further out) both ways and
    /// checks that the trail walk is the plain one.
    fn check(trail: &Trail, stack: &mut FakeStack, depth: usize) -> usize {
        let skip = stack.rand(2) as usize;
        let Some(&word) = stack.frames.iter().rev().nth(skip) else {
            return 0;
        };
        walks_match(trail, stack, stack.addr(word), depth)
    }

    /// Walks `stack` from the frame at `fp` both ways, checks that the trail walk is
    /// the plain one, frames and hash, and returns how many frames it has.
    fn walks_match(trail: &Trail, stack: &FakeStack, fp: usize, depth: usize) -> usize {
        let limit = stack.limit();
        // SAFETY: every frame pointer the walks follow lies in `stack.mem`, below
        // `limit + 16`, and the trail was only ever walked over it.
        let expected = unsafe { stack::plain_walk(fp, limit, depth) };
        // SAFETY: as above.
        let w = unsafe { walk_from(trail, fp, limit, depth, 7) };
        let mut raw = stack::raw_frames();
        assert_eq!(frames(trail, &w, &mut raw), &expected[..]);
        assert_eq!(w.hash, hash(7, &expected));
        expected.len()
    }

    #[test]
    fn a_walk_is_the_plain_walk_however_the_stack_changed() {
        for seed in 1..=40 {
            let trail: Trail = Trail::default();
            let mut stack = FakeStack::new(seed);
            let mut walked = 0;
            for step in 0..2_000 {
                match stack.rand(10) {
                    0..=3 if stack.frames.len() < 150 => stack.call(),
                    4..=7 if stack.frames.len() > 1 => stack.ret(),
                    8 if step % 50 == 0 => stack.break_a_frame(),
                    _ => {}
                }
                let depth = [1, 3, 16, 48, MAX_DEPTH][stack.rand(5) as usize];
                walked += check(&trail, &mut stack, depth);
            }
            assert!(walked > 10_000, "seed {seed}: only {walked} frames walked");
        }
    }

    #[test]
    fn a_stack_that_keeps_growing_moves_the_kept_records_down() {
        let trail = Trail::default();
        let mut stack = FakeStack::new(11);
        for _ in 0..300 {
            stack.call();
            // From the innermost frame: each walk joins the last one a frame in.
            let fp = stack.innermost();
            walks_match(&trail, &stack, fp, MAX_DEPTH);
        }
        assert!(trail.hi.get() <= CAP);
    }

    #[test]
    fn a_call_from_another_place_keeps_the_frames_inward_of_it() {
        let trail = Trail::default();
        let mut stack = FakeStack::with_frames(5, 12);
        let inner = stack.innermost();
        assert_eq!(walks_match(&trail, &stack, inner, MAX_DEPTH), 12);
        for round in 0..8 {
            // The frame `round` out from the innermost is called from another place in
            // the same caller: its return address changes, its first word and every
            // frame inward of it stay.
            let w = stack.frames[stack.frames.len() - 1 - round];
            stack.mem[w + 1] = 0x2000 + round;
            walks_match(&trail, &stack, inner, MAX_DEPTH);
            // The same stack again, taken whole from the kept sums.
            walks_match(&trail, &stack, inner, MAX_DEPTH);
            // A new frame in front of the innermost kept record, joined at its sum.
            stack.call();
            walks_match(&trail, &stack, stack.innermost(), MAX_DEPTH);
            stack.ret();
        }
    }

    #[test]
    fn a_changed_outer_frame_is_seen() {
        let trail = Trail::default();
        let mut stack = FakeStack::with_frames(3, 40);
        assert_eq!(check(&trail, &mut stack, 32), 32);
        // Change the outermost frame's return address: the same walk must see it.
        let outer = stack.frames[stack.frames.len() - 32];
        stack.mem[outer + 1] = 0x9999;
        let fp = stack.innermost();
        // SAFETY: as in `check`.
        let w = unsafe { walk_from(&trail, fp, stack.limit(), 32, 7) };
        let mut raw = stack::raw_frames();
        assert_eq!(frames(&trail, &w, &mut raw)[31], 0x9999);
    }
}
