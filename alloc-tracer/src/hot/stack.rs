//! Call-stack capture by frame-pointer walk.
//!
//! With `-C force-frame-pointers=yes` every frame starts with the caller's frame
//! pointer followed by the return address, so a stack is a linked list: about 1.4 ns
//! a frame here, against about 4 us for a DWARF unwind of the same stack. Frames
//! compiled without frame pointers are skipped over (their return address is lost) or
//! end the walk early; they never make it read outside the thread's stack, because
//! the walk starts only when the stack pointer lies inside the stack recorded when
//! the thread was first seen ([`StackBounds`]), and every frame pointer must lie
//! strictly above the previous one and below the top of that stack. Code running on
//! another stack (a signal handler on `sigaltstack`, a coroutine, a `stacker`
//! segment) gets no frames, and the walk says so ([`Walk::foreign`]).
//!
//! Only x86_64 and aarch64 are walked; elsewhere stacks are empty.

/// The most frames a stack can hold; `ALLOC_TRACE_DEPTH` is capped to this.
pub const MAX_DEPTH: usize = 32;

/// Raw return addresses, innermost first.
pub type Frames = [usize; MAX_DEPTH];

/// Space for a capture, left uninitialised (zeroing 256 bytes per allocation would
/// cost more than hashing the stack).
pub type RawFrames = [std::mem::MaybeUninit<usize>; MAX_DEPTH];

/// Empty space for a capture.
#[inline(always)]
pub const fn raw_frames() -> RawFrames {
    [const { std::mem::MaybeUninit::uninit() }; MAX_DEPTH]
}

/// The first `n` frames written by [`capture`].
#[inline(always)]
pub fn captured(out: &RawFrames, n: usize) -> &[usize] {
    // SAFETY: `capture` initialised the first `n` (<= MAX_DEPTH) elements, and
    // `MaybeUninit<usize>` has the layout of `usize`.
    unsafe { std::slice::from_raw_parts(out.as_ptr().cast::<usize>(), n.min(MAX_DEPTH)) }
}

/// The stack of a thread: `low <= sp < low + size` while it runs on it. Both 0 when
/// unknown (then no stacks are captured on that thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackBounds {
    /// Lowest address of the stack.
    pub low: usize,
    /// Bytes from `low` to the top of the stack (exclusive).
    pub size: usize,
}

/// What a [`walk`] found: how many frames, their hash, and where the first one is,
/// so that [`frames_of`] can read the same frames again.
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    /// Frames walked (return addresses hashed).
    pub n: usize,
    /// `site_table::hash` of the seed and the return addresses.
    pub hash: u64,
    /// Frame pointer of the first frame kept.
    pub start: usize,
    /// Highest frame pointer the walk accepted (the stack's top less 16).
    pub limit: usize,
    /// True when the stack pointer was outside the thread's known stack, so that no
    /// frame could be trusted and none was read.
    pub foreign: bool,
}

/// Walks up to `depth` frames, starting with the caller of the function this is
/// inlined into after passing over `skip` frames, and hashes their return addresses
/// (`site_table::hash` of `seed` and the frames) without storing them: a site seen
/// before needs only the hash, and a new one reads its frames again with
/// [`frames_of`].
///
/// # Safety
/// `bounds` must be the current thread's stack (from [`current_stack_bounds`] on
/// this thread), or zero: every word read lies between the stack pointer and
/// the top of `bounds`, which is mapped only when the stack pointer is inside them.
#[inline(always)]
pub unsafe fn walk(skip: usize, depth: usize, bounds: StackBounds, seed: u64) -> Walk {
    let (mut fp, sp) = registers();
    let mut hash = super::site_table::hash_start(seed);
    let none = |hash, foreign| Walk {
        n: 0,
        hash: super::site_table::hash_finish(hash),
        start: 0,
        limit: 0,
        foreign,
    };
    // The stack pointer must be on this thread's stack: everything from it up to the
    // top is then mapped. (Below `low` the difference wraps around to a huge value.)
    let below_sp = sp.wrapping_sub(bounds.low);
    if below_sp >= bounds.size {
        return none(hash, bounds.size != 0);
    }
    // One unsigned comparison checks sp <= fp <= top - 16: below `sp` the
    // difference wraps around to a huge value.
    let span = (bounds.size - below_sp).saturating_sub(2 * size_of::<usize>());
    if fp.wrapping_sub(sp) > span {
        return none(hash, false);
    }
    // From here on every frame pointer lies strictly above the one before (so above
    // `sp`) and at most at `limit`: both words of a frame lie in this thread's stack.
    let limit = sp + span;
    // The tracer's own frames: walked over, not kept.
    for _ in 0..skip {
        // SAFETY: sp <= fp <= top - 16 (checked before the loop and on every
        // step), and the stack is mapped from the current stack pointer up to its
        // top. (x86_64 and aarch64 load unaligned words from normal memory.)
        let next = unsafe { (fp as *const usize).read_unaligned() };
        if next <= fp || next > limit {
            return none(hash, false);
        }
        fp = next;
    }
    let start = fp;
    let max = depth.min(MAX_DEPTH);
    if max == 0 {
        return none(hash, false);
    }
    let mut left = max;
    loop {
        // SAFETY: as above: sp <= fp <= top - 16. The words may be garbage if a
        // frame lacks a frame pointer; the check on `next` below keeps the walk moving
        // up the stack, inside it. (A zero return address marks the outermost frame on
        // some platforms; the `next <= fp` check ends the walk there anyway.)
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (p.read_unaligned(), p.add(1).read_unaligned())
        };
        hash = super::site_table::hash_step(hash, ret);
        left -= 1;
        if left == 0 || next <= fp || next > limit {
            break;
        }
        fp = next;
    }
    Walk {
        n: max - left,
        hash: super::site_table::hash_finish(hash),
        start,
        limit,
        foreign: false,
    }
}

/// Writes the return addresses of an earlier [`walk`] into `out` and returns them.
///
/// # Safety
/// `walk` must come from a walk made by a caller of the current function, on this
/// thread, that has not returned yet: the frames it walked belong to functions still
/// running below that caller, so they still hold what the walk read.
#[inline(always)]
pub unsafe fn frames_of<'o>(walk: &Walk, out: &'o mut RawFrames) -> &'o [usize] {
    let mut fp = walk.start;
    let mut n = 0;
    for slot in out.iter_mut().take(walk.n) {
        // The walk checked every frame; checked again, so that a stack changed after
        // all (a broken caller's promise) ends the copy rather than a read outside.
        if fp < walk.start || fp > walk.limit {
            break;
        }
        // SAFETY: the walk read these two words moments ago, after checking that
        // they lie in this thread's stack (between `start` and `limit`, rechecked
        // above); the caller guarantees they are unchanged.
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (p.read_unaligned(), p.add(1).read_unaligned())
        };
        slot.write(ret);
        n += 1;
        if next <= fp {
            break;
        }
        fp = next;
    }
    captured(out, n)
}

/// Fills `out` with up to `depth` return addresses, starting with the caller of the
/// function this is inlined into, and returns how many it wrote and their hash
/// (`site_table::hash` of `seed` and the frames): a [`walk`] and [`frames_of`].
///
/// # Safety
/// As for [`walk`].
#[cfg(test)]
#[inline(always)]
pub unsafe fn capture(
    out: &mut RawFrames,
    skip: usize,
    depth: usize,
    bounds: StackBounds,
    seed: u64,
) -> (usize, u64) {
    // SAFETY: forwarded contract.
    let w = unsafe { walk(skip, depth, bounds, seed) };
    // SAFETY: the walk was made just now, in this same function (everything here is
    // inlined into the caller).
    let n = unsafe { frames_of(&w, out) }.len();
    (n, w.hash)
}

/// The current frame pointer and stack pointer.
#[inline(always)]
fn registers() -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let (fp, sp): (usize, usize);
        // SAFETY: reads two registers; no memory access, no side effects.
        unsafe {
            std::arch::asm!("mov {fp}, rbp", "mov {sp}, rsp", fp = out(reg) fp, sp = out(reg) sp,
                options(nomem, nostack, preserves_flags));
        }
        (fp, sp)
    }
    #[cfg(target_arch = "aarch64")]
    {
        let (fp, sp): (usize, usize);
        // SAFETY: reads two registers; no memory access, no side effects.
        unsafe {
            std::arch::asm!("mov {fp}, x29", "mov {sp}, sp", fp = out(reg) fp, sp = out(reg) sp,
                options(nomem, nostack, preserves_flags));
        }
        (fp, sp)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        (0, 1)
    }
}

/// The current thread's stack, or zeros when it cannot be found (then no stacks are
/// captured on this thread).
///
/// Cold: called once per thread. glibc's `pthread_getattr_np` may call glibc's own
/// `malloc`, which is not the Rust global allocator, so this cannot recurse.
pub fn current_stack_bounds() -> StackBounds {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `attr` is initialised by pthread_getattr_np before use and destroyed
        // after; the out-pointers are valid locals.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                return StackBounds::default();
            }
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut size: libc::size_t = 0;
            let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            if rc != 0 {
                return StackBounds::default();
            }
            StackBounds {
                low: addr as usize,
                size,
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        StackBounds::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn capture_here(out: &mut RawFrames) -> usize {
        // SAFETY: this thread's bounds (or none).
        unsafe { capture(out, 0, MAX_DEPTH, current_stack_bounds(), 0) }.0
    }

    #[test]
    fn captures_a_chain_of_return_addresses() {
        let mut frames = raw_frames();
        let n = capture_here(&mut frames);
        // This test function, the test harness closure and a few std frames at least.
        assert!(n >= 3, "only {n} frames");
        assert!(captured(&frames, n).iter().all(|&f| f != 0));
    }

    #[test]
    fn hash_is_the_site_table_hash() {
        let mut frames = raw_frames();
        // SAFETY: this thread's bounds (or none).
        let (n, h) = unsafe { capture(&mut frames, 0, MAX_DEPTH, current_stack_bounds(), 42) };
        assert_eq!(h, crate::hot::site_table::hash(42, captured(&frames, n)));
    }

    #[test]
    fn skipped_frames_are_not_kept() {
        let (mut all, mut skipped) = (raw_frames(), raw_frames());
        let (n, _) = capture_both(&mut all, &mut skipped);
        assert!(n.0 >= 3);
        assert_eq!(n.1, n.0 - 1);
        assert_eq!(captured(&all, n.0)[2..], captured(&skipped, n.1)[1..]);
    }

    #[inline(never)]
    fn capture_both(all: &mut RawFrames, skipped: &mut RawFrames) -> ((usize, usize), ()) {
        let b = current_stack_bounds();
        // SAFETY: this thread's bounds (or none).
        let a = unsafe { capture(all, 0, MAX_DEPTH, b, 0) }.0;
        // SAFETY: this thread's bounds (or none).
        let b = unsafe { capture(skipped, 1, MAX_DEPTH, b, 0) }.0;
        ((a, b), ())
    }

    #[test]
    fn depth_is_capped() {
        let mut frames = raw_frames();
        let b = current_stack_bounds();
        // SAFETY: this thread's bounds (or none).
        assert!(unsafe { capture(&mut frames, 0, 2, b, 0) }.0 <= 2);
        // SAFETY: this thread's bounds (or none).
        assert_eq!(unsafe { capture(&mut frames, 0, 0, b, 0) }.0, 0);
    }

    #[test]
    fn no_stack_top_means_no_frames() {
        let mut frames = raw_frames();
        let none = StackBounds::default();
        // SAFETY: this thread's bounds (or none).
        assert_eq!(unsafe { capture(&mut frames, 0, MAX_DEPTH, none, 0) }.0, 0);
    }

    #[test]
    fn a_stack_pointer_outside_the_bounds_reads_nothing() {
        let here = current_stack_bounds();
        // Bounds of some other stack, below this one: the current stack pointer is
        // outside them, so no frame is read and the walk says it was foreign.
        let elsewhere = StackBounds {
            low: here.low.saturating_sub(1 << 20),
            size: 1 << 19,
        };
        // SAFETY: the walk reads nothing when the stack pointer is outside `bounds`.
        let w = unsafe { walk(0, MAX_DEPTH, elsewhere, 0) };
        assert_eq!(w.n, 0);
        assert!(w.foreign);
        // SAFETY: these are this thread's bounds.
        let w = unsafe { walk(0, MAX_DEPTH, here, 0) };
        assert!(w.n > 0 && !w.foreign);
    }
}
