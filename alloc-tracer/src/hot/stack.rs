//! Call-stack capture by frame-pointer walk.
//!
//! With `-C force-frame-pointers=yes` every frame starts with the caller's frame
//! pointer followed by the return address, so a stack is a linked list: about 1.4 ns
//! a frame here, against about 4 us for a DWARF unwind of the same stack. Frames
//! compiled without frame pointers are skipped over (their return address is lost) or
//! end the walk early; they never make it read outside the thread's stack, because
//! every frame pointer must lie strictly above the previous one and below the top of
//! the stack recorded when the thread was first seen.
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
}

/// Walks up to `depth` frames, starting with the caller of the function this is
/// inlined into after passing over `skip` frames, and hashes their return addresses
/// (`site_table::hash` of `seed` and the frames) without storing them: a site seen
/// before needs only the hash, and a new one reads its frames again with
/// [`frames_of`].
///
/// `stack_top` is the highest address of the current thread's stack (exclusive).
#[inline(always)]
pub fn walk(skip: usize, depth: usize, stack_top: usize, seed: u64) -> Walk {
    let (mut fp, sp) = registers();
    let mut hash = super::site_table::hash_start(seed);
    let none = |hash| Walk {
        n: 0,
        hash: super::site_table::hash_finish(hash),
        start: 0,
    };
    // One unsigned comparison checks sp <= fp <= stack_top - 16: below `sp` the
    // difference wraps around to a huge value.
    let span = stack_top
        .saturating_sub(sp)
        .saturating_sub(2 * size_of::<usize>());
    if fp.wrapping_sub(sp) > span {
        return none(hash);
    }
    // From here on every frame pointer lies strictly above the one before (so above
    // `sp`) and at most at `limit`: both words of a frame lie in this thread's stack.
    let limit = sp + span;
    // The tracer's own frames: walked over, not kept.
    for _ in 0..skip {
        // SAFETY: sp <= fp <= stack_top - 16 (checked before the loop and on every
        // step): the word lies in this thread's stack, which is mapped from the
        // current stack pointer up to its top. (x86_64 and aarch64 load unaligned
        // words from normal memory.)
        let next = unsafe { (fp as *const usize).read_unaligned() };
        if next <= fp || next > limit {
            return none(hash);
        }
        fp = next;
    }
    let start = fp;
    let max = depth.min(MAX_DEPTH);
    if max == 0 {
        return none(hash);
    }
    let mut left = max;
    loop {
        // SAFETY: as above: sp <= fp <= stack_top - 16. The words may be garbage if a
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
    for slot in out.iter_mut().take(walk.n) {
        // SAFETY: the walk read these two words moments ago, after checking that
        // they lie in this thread's stack; the caller guarantees they are unchanged.
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (p.read_unaligned(), p.add(1).read_unaligned())
        };
        slot.write(ret);
        fp = next;
    }
    captured(out, walk.n)
}

/// Fills `out` with up to `depth` return addresses, starting with the caller of the
/// function this is inlined into, and returns how many it wrote and their hash
/// (`site_table::hash` of `seed` and the frames): a [`walk`] and [`frames_of`].
///
/// `stack_top` is the highest address of the current thread's stack (exclusive).
#[cfg(test)]
#[inline(always)]
pub fn capture(
    out: &mut RawFrames,
    skip: usize,
    depth: usize,
    stack_top: usize,
    seed: u64,
) -> (usize, u64) {
    let w = walk(skip, depth, stack_top, seed);
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

/// The top (highest address, exclusive) of the current thread's stack, or 0 when it
/// cannot be found (then no stacks are captured on this thread).
///
/// Cold: called once per thread. glibc's `pthread_getattr_np` may call glibc's own
/// `malloc`, which is not the Rust global allocator, so this cannot recurse.
pub fn current_stack_top() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `attr` is initialised by pthread_getattr_np before use and destroyed
        // after; the out-pointers are valid locals.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                return 0;
            }
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut size: libc::size_t = 0;
            let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            if rc != 0 {
                return 0;
            }
            addr as usize + size
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn capture_here(out: &mut RawFrames) -> usize {
        capture(out, 0, MAX_DEPTH, current_stack_top(), 0).0
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
        let (n, h) = capture(&mut frames, 0, MAX_DEPTH, current_stack_top(), 42);
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
        let top = current_stack_top();
        let a = capture(all, 0, MAX_DEPTH, top, 0).0;
        let b = capture(skipped, 1, MAX_DEPTH, top, 0).0;
        ((a, b), ())
    }

    #[test]
    fn depth_is_capped() {
        let mut frames = raw_frames();
        assert!(capture(&mut frames, 0, 2, current_stack_top(), 0).0 <= 2);
        assert_eq!(capture(&mut frames, 0, 0, current_stack_top(), 0).0, 0);
    }

    #[test]
    fn no_stack_top_means_no_frames() {
        let mut frames = raw_frames();
        assert_eq!(capture(&mut frames, 0, MAX_DEPTH, 0, 0).0, 0);
    }
}
