//! The next site, guessed from the one before and checked against the stack.
//!
//! A synthesis allocates in the same order again and again (each gadget, each
//! constraint, the same calls), so the site that followed a site last time nearly
//! always follows it again: 92 % of `sites` mode's allocations on a 2 KiB PoRep
//! partition and on a SHA-256 chain. Each thread keeps, for each site it met (one
//! entry a slot of its site table, up to [`MAX_ENTRIES`], by the slot's address), the
//! walk that found it (where it started, and the two words read at each frame: room
//! for as many as the thread's deepest walk so far) and the site that came next. An
//! allocation first checks the site that followed the thread's latest one: if the
//! stack holds every word of that walk at its address, the slot is that site's, with
//! no walk, no hash and no lookup. Failing that, it checks the latest kept walk that
//! started at the same frame with the same first return address (the successor
//! guessed wrong mostly because this allocation comes from elsewhere). Otherwise
//! `trail` walks as usual and the walk is kept here.
//!
//! **Exact.** A walk is a function of the words it reads, of where it starts, of the
//! stack's top and of its depth. The kept walk was made on this thread (same top),
//! from the same frame and at the same depth (both checked); if each word it read
//! is still at its address, a walk now reads the same words at the same addresses
//! (each frame's first word is the next frame's address) and stops where it stopped,
//! its last frame's words included. So it finds the kept walk's frames and slot.
//! Entries are forgotten when the slots move or empty (`reset`).
//!
//! **Safe.** The addresses compared are those a walk from the same frame checked
//! against the same stack bounds: at or above that frame (at or above the stack
//! pointer) and at most the top of the stack.
//!
//! **Cost.** A hit compares the frames, two loads and five instructions each, the
//! loads of one frame not waiting on another's; a miss walks as before and keeps the
//! walk (about one allocation in 25 on a SHA-256 chain, once the second guess is in).

use super::site_table::Slot;
use super::stack::MAX_DEPTH;
use super::trail::{self, Trail, Walk};
use std::alloc::Layout;
use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Most sites a thread keeps walks of: one a slot of its site table, up to this
/// many; past it a site whose place is taken is walked again.
pub const MAX_ENTRIES: usize = 2048;
/// Places in the index by first frame (see [`Predictor::second_guess`]).
const STARTS: usize = 4096;
const _: () = assert!(MAX_ENTRIES.is_power_of_two() && STARTS.is_power_of_two());

/// The two words read at a frame, side by side and 16-byte aligned, as the stack
/// holds them, so that one 16-byte load compares them.
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct Words {
    /// The caller's frame pointer: where the next frame lies.
    next: usize,
    /// The return address into the caller.
    ret: usize,
}

/// One site's kept walk and the site that followed it. Its words follow it in the
/// kept walks' allocation, as many as the walks' depth (`Kept::frames`).
#[repr(C)]
struct Entry {
    /// The site's slot (null: an empty entry).
    slot: *const Slot,
    /// The entry of the site that came next last time (null: none yet).
    then: *mut Entry,
    /// Where the walk started (0 in an empty or forgotten entry, and never a
    /// frame's address).
    fp: usize,
    /// The walk's key: its seed (phase, size class) and depth; see [`key`].
    key: u64,
    /// Frames walked, at least 1.
    n: usize,
    /// The words read at each frame, innermost first; the first `n` count. The
    /// allocation holds `Kept::frames` of them from here (see [`words`]).
    words: [Words; 0],
}

/// What a predictor allocates: an index of the kept walks by where they start, the
/// sizes, then the entries (from [`ENTRIES_AT`], `stride` bytes apart), one a slot
/// of the thread's site table up to [`MAX_ENTRIES`]. Sized to the table and to the
/// thread's deepest walk, so that a thread that meets a hundred sites does not hold
/// room for thousands of walks, nor one whose stacks are 20 frames deep room for 62.
#[repr(C)]
struct Kept {
    starts: [*mut Entry; STARTS],
    /// Entries, a power of two.
    entries: usize,
    /// Words an entry holds: the deepest walk it may keep.
    frames: usize,
    /// Bytes from one entry to the next: an entry and its words, in whole cache lines.
    stride: usize,
}

/// Where the entries start in a predictor's allocation: after its `Kept`, on a cache
/// line.
const ENTRIES_AT: usize = size_of::<Kept>().next_multiple_of(64);

impl Kept {
    /// Words an entry holds to keep a walk of `n` frames: `n` rounded up to fill the
    /// entry's last cache line (a 48-byte head, then 16 bytes a frame), at least 1.
    fn frames_for(n: usize) -> usize {
        const HEAD: usize = size_of::<Entry>();
        const PER_LINE: usize = 64 / size_of::<Words>();
        const _: () = assert!(HEAD % 64 + size_of::<Words>() == 64);
        n.saturating_sub(1).next_multiple_of(PER_LINE) + 1
    }

    /// The layout of kept walks of `entries` entries of `frames` words, and the stride.
    fn layout(entries: usize, frames: usize) -> (Layout, usize) {
        let stride = (size_of::<Entry>() + frames * size_of::<Words>()).next_multiple_of(64);
        let size = ENTRIES_AT + entries * stride;
        // A size under `isize::MAX` (entries and frames are bounded), align 64.
        let layout = Layout::from_size_align(size, 64).expect("kept walks' layout");
        (layout, stride)
    }
}

/// Entry `i` of `kept`.
///
/// # Safety
/// `kept` must be a predictor's allocation and `i` below its `entries`.
#[inline(always)]
unsafe fn entry(kept: *mut Kept, i: usize) -> *mut Entry {
    // SAFETY: the caller's contract: the entry lies in the allocation.
    unsafe {
        kept.cast::<u8>()
            .add(ENTRIES_AT + i * (*kept).stride)
            .cast()
    }
}

/// The words of entry `e`.
///
/// # Safety
/// `e` must be an entry of a predictor's allocation (a pointer with its provenance).
#[inline(always)]
unsafe fn words(e: *const Entry) -> *const Words {
    // SAFETY: the caller's contract; a raw place, no reference made.
    unsafe { (&raw const (*e).words).cast() }
}

/// A thread's kept walks. All zeros is an empty one. Owner thread only.
pub struct Predictor {
    /// Allocated at the first walk kept (null before), and anew when the thread's
    /// table or the depth outgrows it.
    kept: Cell<*mut Kept>,
    /// Bytes `kept` takes, for the cold side, which may ask [`Predictor::bytes`] from
    /// another thread while the owner replaces `kept`.
    bytes: AtomicUsize,
    /// The entry of the thread's latest site, if it has one.
    latest: Cell<*mut Entry>,
    /// `latest`'s `then`: the guess for the next allocation.
    guess: Cell<*mut Entry>,
    /// The entry the index by first frame offered last and whose words the stack
    /// did not hold (null: none since the latest walk was kept).
    tried: Cell<*mut Entry>,
    /// Resets so far, in the bits above the walk key's (see [`key`]): mixed into
    /// every key, so that a reset forgets every entry without touching them.
    epoch: Cell<u64>,
}

impl Default for Predictor {
    fn default() -> Predictor {
        Predictor {
            kept: Cell::new(null_mut()),
            bytes: AtomicUsize::new(0),
            latest: Cell::new(null_mut()),
            guess: Cell::new(null_mut()),
            tried: Cell::new(null_mut()),
            epoch: Cell::new(0),
        }
    }
}

/// The key of a walk: the hash seed (phase and size class) and the walk's depth,
/// which `SiteMeta::new` leaves clear above bit 32. The predictor adds its epoch
/// above bit 48.
#[inline(always)]
pub fn key(seed: u64, depth: usize) -> u64 {
    seed ^ (depth as u64) << 40
}

/// One reset, in a key's epoch bits.
const EPOCH: u64 = 1 << 48;

impl Predictor {
    /// The guessed site when the stack from `fp` holds its walk's words, for a walk
    /// of key `key`; else `None`.
    ///
    /// # Safety
    /// `fp` must be where a walk of this thread's stack starts, from `stack::start`
    /// with the bounds every walk kept here was made with.
    #[inline(always)]
    pub unsafe fn guess(&self, fp: usize, key: u64) -> Option<&Slot> {
        let key = key ^ self.epoch.get();
        let e = self.guess.get();
        // SAFETY: the caller's contract.
        if !e.is_null() && unsafe { holds(e, fp, key) } {
            // SAFETY: `e` is a non-null entry of `kept`, its key (the current
            // epoch's) found by `holds`.
            return Some(unsafe { self.hit(e) });
        }
        // SAFETY: the caller's contract.
        unsafe { self.second_guess(fp, key) }
    }

    /// When the site that followed last time is not the one (about one allocation
    /// in eleven on a synthesis, nearly always because this one starts elsewhere):
    /// the site whose walk was the latest kept to start at `fp` with the same first
    /// frame, found by those.
    ///
    /// # Safety
    /// As for [`Predictor::guess`].
    #[inline(never)]
    unsafe fn second_guess(&self, fp: usize, key: u64) -> Option<&Slot> {
        let kept = self.kept.get();
        if kept.is_null() {
            return None;
        }
        // SAFETY: `fp` starts a walk: its two words are mapped.
        let (_, ret) = unsafe { super::stack::read_frame(fp) };
        // SAFETY: the index lies in `starts`; its entries in `entries`.
        let e = unsafe { (*kept).starts[start_index(fp, ret, key)] };
        // SAFETY: the caller's contract.
        if !e.is_null() && unsafe { holds(e, fp, key) } {
            // The site that followed the latest one this time.
            self.follows_latest(e);
            // SAFETY: `e` is a non-null entry of `kept`, its key (the current
            // epoch's) found by `holds`.
            return Some(unsafe { self.hit(e) });
        }
        self.tried.set(e);
        None
    }

    /// Takes entry `e`, which held the stack's words, as the thread's latest site.
    ///
    /// # Safety
    /// `e` must be a non-null entry of `kept` whose key [`holds`] found of the
    /// current epoch.
    #[inline(always)]
    unsafe fn hit(&self, e: *mut Entry) -> &Slot {
        self.latest.set(e);
        // SAFETY: the caller's contract: `e`'s key is of the current epoch, so `e` was
        // kept since the latest `reset` (which starts a new epoch whenever the slots
        // move or empty), and its slot is still in the thread's table.
        unsafe {
            self.guess.set((*e).then);
            &*(*e).slot
        }
    }

    /// Keeps `walk`, the latest walk of `trail`, which started at `fp` with key
    /// `key` and found `slot`, a slot of the thread's site table of `slots` slots;
    /// and `slot` as the site after the latest. A walk of no frames keeps nothing and
    /// forgets the latest site.
    #[inline(never)]
    pub fn learn(
        &self,
        slot: &Slot,
        slots: usize,
        trail: &Trail,
        walk: &Walk,
        fp: usize,
        key: u64,
    ) {
        let key = key ^ self.epoch.get();
        let n = walk.n.min(MAX_DEPTH);
        // Before `tried` is read: kept walks allocated anew forget it.
        let kept = self.kept(slots.min(MAX_ENTRIES), Kept::frames_for(n));
        let tried = self.tried.replace(null_mut());
        if n == 0 || kept.is_null() {
            self.latest.set(null_mut());
            self.guess.set(null_mut());
            return;
        }
        let slot_ptr = std::ptr::from_ref(slot);
        // Slots are 64 bytes: the slots of a table of at most `entries` slots have
        // entries of their own.
        // SAFETY: `kept` is this predictor's and only this thread touches it.
        let index = (slot_ptr as usize >> 6) & unsafe { (*kept).entries - 1 };
        // SAFETY: as above, and `index` is below `entries`.
        let e = unsafe { entry(kept, index) };
        // SAFETY: as above.
        let head = unsafe { &mut *e };
        if head.slot != slot_ptr {
            head.slot = slot_ptr;
            head.then = null_mut();
            head.fp = 0;
        }
        // SAFETY: `e` is an entry of `kept`, whose `frames` are at least `n`.
        let w = unsafe { words(e).cast_mut() };
        // A walk kept for this slot from here is still good unless it was checked
        // just now and failed (the guesses were `guess` and `tried`): any walk that
        // reads its words finds this slot.
        if head.fp != fp || head.key != key || head.n != n || e == self.guess.get() || e == tried {
            head.fp = fp;
            head.key = key;
            head.n = n;
            let mut expected = fp;
            for k in 0..n {
                let (at, next, ret) = trail::frame(trail, walk, k);
                debug_assert_eq!(at, expected);
                expected = next;
                // SAFETY: `k < n <= frames`.
                unsafe { w.add(k).write(Words { next, ret }) };
            }
        }
        // SAFETY: `n >= 1` words were kept; only this thread touches `kept`.
        unsafe { (*kept).starts[start_index(fp, (*w).ret, key)] = e };
        self.follows_latest(e);
        self.latest.set(e);
        // Read through `e`, not `head`, whose borrow ends above: `follows_latest` may
        // just have written this very field (the latest entry was `e`).
        // SAFETY: `e` is an entry of `kept`; only this thread touches it.
        self.guess.set(unsafe { (*e).then });
    }

    /// Keeps entry `e` as the one after the latest.
    #[inline(always)]
    fn follows_latest(&self, e: *mut Entry) {
        let latest = self.latest.get();
        if !latest.is_null() {
            // SAFETY: non-null entries lie in `kept`; only this thread touches them.
            unsafe { (*latest).then = e };
        }
    }

    /// Forgets every kept walk: the slots they lead to moved or were emptied. A
    /// new epoch makes every kept key differ; once in 65,536 resets, when the
    /// epochs wrap around, the entries are emptied too.
    #[cold]
    pub fn reset(&self) {
        self.latest.set(null_mut());
        self.guess.set(null_mut());
        self.tried.set(null_mut());
        let epoch = self.epoch.get().wrapping_add(EPOCH);
        self.epoch.set(epoch);
        let kept = self.kept.get();
        if epoch == 0 && !kept.is_null() {
            // SAFETY: all zeros is an empty index and empty entries, which lie in the
            // allocation of these sizes after `ENTRIES_AT`; only this thread touches
            // them.
            unsafe {
                (*kept).starts = [null_mut(); STARTS];
                let (layout, _) = Kept::layout((*kept).entries, (*kept).frames);
                kept.cast::<u8>()
                    .add(ENTRIES_AT)
                    .write_bytes(0, layout.size() - ENTRIES_AT);
            }
        }
    }

    /// Bytes the kept walks take (0 before the first).
    pub fn bytes(&self) -> usize {
        self.bytes.load(Relaxed)
    }

    /// Frees the kept walks; a later `learn` allocates them anew.
    ///
    /// # Safety
    /// Owner thread only, as every call.
    pub unsafe fn free(&self) {
        let kept = self.kept.replace(null_mut());
        self.bytes.store(0, Relaxed);
        self.latest.set(null_mut());
        self.guess.set(null_mut());
        self.tried.set(null_mut());
        if !kept.is_null() {
            // SAFETY: allocated in `allocate` with the layout of these sizes, and no
            // longer reachable from this predictor.
            unsafe {
                let (layout, _) = Kept::layout((*kept).entries, (*kept).frames);
                std::alloc::dealloc(kept.cast(), layout);
            }
        }
    }

    /// The kept walks, with at least `entries` entries of `frames` words: allocated
    /// at the first call, and anew, empty, when the thread's table or its walks
    /// outgrew them (never smaller than before, so that walks of two depths taking
    /// turns do not make them anew each time); null if that failed.
    #[inline(always)]
    fn kept(&self, entries: usize, frames: usize) -> *mut Kept {
        let kept = self.kept.get();
        if kept.is_null() {
            return self.allocate(entries, frames);
        }
        // SAFETY: a non-null `kept` is this predictor's allocation.
        let (had_entries, had_frames) = unsafe { ((*kept).entries, (*kept).frames) };
        if had_entries >= entries && had_frames >= frames {
            return kept;
        }
        self.allocate(entries.max(had_entries), frames.max(had_frames))
    }

    /// Allocates kept walks of `entries` entries (a power of two) of `frames` words,
    /// zeroed (all empty), in place of any the thread had (every walk forgotten),
    /// under the re-entrancy guard. The entries grow with the table, from its first
    /// 256 slots to [`MAX_ENTRIES`], and the words with the thread's deepest walk,
    /// four frames at a time, so this runs a few times a thread, mostly at its start.
    #[cold]
    #[inline(never)]
    fn allocate(&self, entries: usize, frames: usize) -> *mut Kept {
        let (layout, stride) = Kept::layout(entries, frames);
        let kept = super::thread::guarded(|| {
            // SAFETY: owner thread; the old allocation is unreachable once freed.
            unsafe { self.free() };
            // SAFETY: the layout is not zero-sized.
            unsafe { std::alloc::alloc_zeroed(layout).cast::<Kept>() }
        });
        if !kept.is_null() {
            // SAFETY: a fresh allocation of `layout`, which holds a `Kept`.
            unsafe {
                (*kept).entries = entries;
                (*kept).frames = frames;
                (*kept).stride = stride;
            }
            self.bytes.store(layout.size(), Relaxed);
        }
        self.kept.set(kept);
        kept
    }
}

/// Where the index by first frame keeps the latest walk from `fp` whose first
/// frame's return address is `ret`, of key `key`.
#[inline(always)]
fn start_index(fp: usize, ret: usize, key: u64) -> usize {
    let h = (fp as u64 ^ (ret as u64).rotate_left(29) ^ key).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - STARTS.trailing_zeros())) as usize
}

/// True when entry `e` kept a walk from `fp` of key `key` (epoch included) and the
/// stack still holds its words.
///
/// # Safety
/// `e` must be an entry of a predictor's `kept`, and `fp` start a walk of this
/// thread's stack under the bounds every kept walk was made with.
#[inline(always)]
unsafe fn holds(e: *const Entry, fp: usize, key: u64) -> bool {
    // SAFETY: the caller's contract; only this thread touches the entry.
    let (at, kept_key) = unsafe { ((*e).fp, (*e).key) };
    // SAFETY: the entry's walk started at `fp` on this stack, so its addresses are
    // mapped.
    at == fp && kept_key == key && unsafe { same_words(e) }
}

/// True when the stack holds every word of the entry's walk at its address (the
/// first frame at `fp`, each next one where the frame before says). One
/// accumulated difference, one branch: a hit compares them all anyway.
///
/// Two loads a frame on x86_64: the kept words, 16 bytes, and the stack's 16 bytes
/// at the address the kept words before them hold, taken from the register they were
/// loaded into (a third load of that address from memory, which the compiler would
/// otherwise make, cost 0.013x of a SHA-256 synthesis; BENCHMARKS.md).
///
/// # Safety
/// `e` must be an entry of a predictor's allocation, and its addresses mapped (see
/// [`Predictor::guess`]).
#[inline(always)]
unsafe fn same_words(e: *const Entry) -> bool {
    // SAFETY: the caller's contract; `learn` keeps at most `frames` words.
    let (n, fp) = unsafe { ((*e).n, (*e).fp) };
    // SAFETY: as above.
    let w = unsafe { words(e) };
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_load_si128, _mm_loadu_si128, _mm_movemask_epi8,
            _mm_or_si128, _mm_setzero_si128, _mm_xor_si128,
        };
        // SAFETY: `k < n <= frames` for every kept element read, and `Words` is
        // 16-byte aligned (an entry is, in a stride of whole cache lines); frame 0 lies at `fp`, each next frame at the address the
        // kept words before it hold, and the stack's 16 bytes there are the
        // caller's contract; SSE2 is part of x86_64's baseline.
        unsafe {
            // The difference at frame `k`, and frame `k`'s kept words, given those of
            // frame `k - 1`, whose first word is frame `k`'s address.
            let step = |before: __m128i, k: usize| {
                let kept = _mm_load_si128(w.add(k).cast());
                let at: usize;
                // The low 8 bytes of an XMM register moved to a general one; in
                // assembly so that the compiler keeps it a move and does not load the
                // word from memory a second time.
                std::arch::asm!("movq {at}, {before}", before = in(xmm_reg) before,
                    at = out(reg) at, options(pure, nomem, nostack, preserves_flags));
                (
                    _mm_xor_si128(_mm_loadu_si128(at as *const __m128i), kept),
                    kept,
                )
            };
            let mut before = _mm_load_si128(w.cast());
            let mut all = _mm_xor_si128(_mm_loadu_si128(fp as *const __m128i), before);
            let mut k = 1;
            while k + 4 <= n {
                let (a, b1) = step(before, k);
                let (b, b2) = step(b1, k + 1);
                let (c, b3) = step(b2, k + 2);
                let (d, b4) = step(b3, k + 3);
                all = _mm_or_si128(all, _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d)));
                before = b4;
                k += 4;
            }
            while k < n {
                let (a, b1) = step(before, k);
                all = _mm_or_si128(all, a);
                before = b1;
                k += 1;
            }
            _mm_movemask_epi8(_mm_cmpeq_epi8(all, _mm_setzero_si128())) == 0xffff
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut at = fp;
        let mut d = 0;
        for k in 0..n {
            // SAFETY: as above.
            let (next, ret) = unsafe { super::stack::read_frame(at) };
            // SAFETY: `k < n <= frames`.
            let kept = unsafe { *w.add(k) };
            d |= (next ^ kept.next) | (ret ^ kept.ret);
            at = kept.next;
        }
        d == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::fake_stack::FakeStack;
    use crate::hot::site_table::{Lookup, SiteKey, SiteMeta, SiteTable, key_hash};
    use crate::hot::stack;

    /// A thread's walking parts over a fake stack: the trail, the predictor and a
    /// site table; counts the allocations the guess answered.
    struct Walker {
        trail: Trail,
        predictor: Predictor,
        table: Box<SiteTable>,
        /// The table size the predictor is told (its entries follow it).
        slots: usize,
        guessed: usize,
        walked: usize,
    }

    impl Walker {
        fn new() -> Walker {
            Walker {
                trail: Trail::default(),
                predictor: Predictor::default(),
                table: SiteTable::with_capacity(1 << 14),
                slots: 1 << 14,
                guessed: 0,
                walked: 0,
            }
        }

        /// The slot of the stack from `fp`, as `sites::site_slot` finds it (the
        /// guess, else a walk kept afterwards), checked against the slot of a plain
        /// walk's frames.
        fn site(
            &mut self,
            stack: &FakeStack,
            fp: usize,
            depth: usize,
            class: usize,
        ) -> *const Slot {
            let limit = stack.limit();
            // SAFETY: every frame pointer the walks follow lies in `stack.mem`, below
            // `limit + 16`, and the trail and predictor only ever walked it.
            let expected = unsafe { stack::plain_walk(fp, limit, depth) };
            let seed = SiteMeta::new(0, class, 0);
            let meta = seed.with_depth(expected.len());
            let want = self.slot_of(meta, &expected);
            let key = key(seed.bits(), depth);
            // SAFETY: as above.
            if let Some(slot) = unsafe { self.predictor.guess(fp, key) } {
                assert!(std::ptr::eq(slot, want), "a guess found another site");
                self.guessed += 1;
                return want;
            }
            // SAFETY: as above.
            let walk = unsafe { trail::walk_from(&self.trail, fp, limit, depth, seed.bits()) };
            assert_eq!(walk.hash, key_hash(meta, &expected));
            // SAFETY: `want` lies in `self.table`, which outlives this call.
            self.predictor
                .learn(unsafe { &*want }, self.slots, &self.trail, &walk, fp, key);
            self.walked += 1;
            want
        }

        fn slot_of(&self, meta: SiteMeta, frames: &[usize]) -> *const Slot {
            let key = SiteKey {
                meta,
                frames,
                hash: key_hash(meta, frames),
            };
            match self.table.lookup(&key) {
                Lookup::Slot(slot) => slot,
                Lookup::Full => panic!("test table full"),
            }
        }
    }

    impl Drop for Walker {
        fn drop(&mut self) {
            // SAFETY: the predictor is not used again.
            unsafe { self.predictor.free() };
        }
    }

    #[test]
    fn a_guess_is_the_site_a_walk_finds_however_the_stack_changed() {
        for seed in 1..=30 {
            let mut w = Walker::new();
            // Half the seeds with fewer entries than the table has slots: slots share
            // entries.
            if seed % 2 == 1 {
                w.slots = 256;
            }
            let mut stack = FakeStack::with_frames(seed, 20);
            for step in 0..3_000 {
                // Mostly the same few calls again and again, as in a synthesis; now and
                // then a frame further out called from elsewhere or broken.
                match stack.rand(12) {
                    0..=3 if stack.frames.len() < 40 => stack.call(),
                    4..=7 if stack.frames.len() > 2 => stack.ret(),
                    8 => {
                        let pick = stack.rand(stack.frames.len() as u64) as usize;
                        let word = stack.frames[pick];
                        stack.mem[word + 1] = 0x1000 + stack.rand(3) as usize;
                    }
                    9 if step % 40 == 0 => stack.break_a_frame(),
                    _ => {}
                }
                let skip = stack.rand(2) as usize;
                let Some(&word) = stack.frames.iter().rev().nth(skip) else {
                    continue;
                };
                let depth = [1, 3, 16, 49, MAX_DEPTH][stack.rand(5) as usize];
                let class = stack.rand(2) as usize;
                w.site(&stack, stack.addr(word), depth, class);
            }
            assert!(
                w.guessed > 300 && w.walked > 300,
                "seed {seed}: {} guessed, {} walked",
                w.guessed,
                w.walked
            );
        }
    }

    #[test]
    fn a_frame_changed_far_out_is_never_guessed_through() {
        let mut w = Walker::new();
        let mut stack = FakeStack::with_frames(9, 30);
        let fp = stack.innermost();
        let first = w.site(&stack, fp, MAX_DEPTH, 0);
        assert_eq!(w.site(&stack, fp, MAX_DEPTH, 0), first);
        assert_eq!(w.guessed, 1);
        // The outermost frame called from another place: every word the walk reads
        // is the same but one, 30 frames out.
        let outer = stack.frames[0];
        let was = stack.mem[outer + 1];
        stack.mem[outer + 1] = 0x7777;
        let other = w.site(&stack, fp, MAX_DEPTH, 0);
        assert_ne!(other, first);
        // Back as it was: the first site again, guessed (it followed the other).
        stack.mem[outer + 1] = was;
        assert_eq!(w.site(&stack, fp, MAX_DEPTH, 0), first);
        // The walk cut at 8 frames does not see the change: another key, its own site.
        stack.mem[outer + 1] = 0x7777;
        let cut = w.site(&stack, fp, 8, 0);
        assert!(cut != first && cut != other);
        // And another size class at the same stack is another site.
        assert!(w.site(&stack, fp, MAX_DEPTH, 1) != other);
    }

    #[test]
    fn an_entry_fills_its_last_cache_line() {
        let stride = |n| Kept::layout(1, Kept::frames_for(n)).1;
        assert_eq!(Kept::frames_for(0), 1);
        assert_eq!(Kept::frames_for(1), 1);
        assert_eq!(Kept::frames_for(2), 5);
        assert_eq!(Kept::frames_for(5), 5);
        assert_eq!(Kept::frames_for(6), 9);
        assert_eq!(Kept::frames_for(MAX_DEPTH), MAX_DEPTH + 1);
        for n in 1..=MAX_DEPTH {
            let frames = Kept::frames_for(n);
            assert!(frames >= n && frames < n + 4);
            // No word more would fit in the same lines.
            assert_eq!(
                stride(n),
                size_of::<Entry>() + frames * size_of::<Words>(),
                "{n}"
            );
        }
    }

    #[test]
    fn kept_walks_grow_with_the_table_and_the_walks() {
        let mut w = Walker::new();
        w.slots = 256;
        // 30 frames: a walk at the greatest depth reads 30.
        let stack = FakeStack::with_frames(5, 30);
        let fp = stack.innermost();
        let first = w.site(&stack, fp, 8, 0);
        let small = Kept::layout(256, Kept::frames_for(8)).0.size();
        assert_eq!(w.predictor.bytes(), small);
        assert_eq!(w.site(&stack, fp, 8, 0), first);
        assert_eq!((w.guessed, w.predictor.bytes()), (1, small));
        // A deeper walk than the entries hold: room made for it (for its 30 frames,
        // not the depth's 64), the walks kept before forgotten; then it is guessed.
        let deep = w.site(&stack, fp, MAX_DEPTH, 0);
        let frames = Kept::frames_for(30);
        assert_eq!(w.predictor.bytes(), Kept::layout(256, frames).0.size());
        assert_eq!(w.site(&stack, fp, MAX_DEPTH, 0), deep);
        assert_eq!(w.guessed, 2);
        // The table grew (which resets the predictor), met by a shallower walk: an
        // entry a slot, up to the cap, and room for the deeper walks kept.
        w.slots = 1 << 14;
        w.predictor.reset();
        assert_eq!(w.site(&stack, fp, 8, 0), first);
        let big = Kept::layout(MAX_ENTRIES, frames).0.size();
        assert_eq!((w.walked, w.predictor.bytes()), (3, big));
        assert_eq!(w.site(&stack, fp, 8, 0), first);
        // Deeper walks fit: nothing allocated anew.
        assert_eq!(w.site(&stack, fp, MAX_DEPTH, 0), deep);
        assert_eq!(w.site(&stack, fp, MAX_DEPTH, 0), deep);
        assert_eq!((w.guessed, w.walked, w.predictor.bytes()), (4, 4, big));
        assert!(small < 200 << 10 && big < 1200 << 10, "{small} {big}");
    }

    #[test]
    fn after_a_reset_nothing_is_guessed() {
        let mut w = Walker::new();
        let stack = FakeStack::with_frames(4, 10);
        let fp = stack.innermost();
        w.site(&stack, fp, MAX_DEPTH, 0);
        w.site(&stack, fp, MAX_DEPTH, 0);
        assert_eq!(w.guessed, 1);
        w.predictor.reset();
        w.site(&stack, fp, MAX_DEPTH, 0);
        assert_eq!((w.guessed, w.walked), (1, 2));
        assert!(w.predictor.bytes() > 0);
        // When the epochs wrap around, the entries are emptied (not the sizes): the
        // next walk is kept and guessed as before.
        for _ in 0..1 << 16 {
            w.predictor.reset();
        }
        let kept = w.predictor.kept.get();
        // SAFETY: the predictor's allocation, not freed while `w` lives.
        let sizes = unsafe { ((*kept).entries, (*kept).frames) };
        assert_eq!(sizes, (MAX_ENTRIES, Kept::frames_for(10)));
        w.site(&stack, fp, MAX_DEPTH, 0);
        w.site(&stack, fp, MAX_DEPTH, 0);
        assert_eq!((w.guessed, w.walked), (2, 3));
    }
}
