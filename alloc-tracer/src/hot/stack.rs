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
//! segment) gets no frames, and the walk says so ([`Start::Foreign`]).
//!
//! This module finds where a walk starts and reads one frame; `trail` walks, reusing
//! what the thread's previous walk read. Only x86_64 and aarch64 are walked;
//! elsewhere stacks are empty.

/// The most frames a stack can hold; `ALLOC_TRACE_DEPTH` is capped to this less the
/// tracer's own frames.
pub const MAX_DEPTH: usize = 64;

/// Raw return addresses, innermost first.
pub type Frames = [usize; MAX_DEPTH];

/// Space for a capture, left uninitialised (zeroing 512 bytes per allocation would
/// cost more than hashing the stack).
pub type RawFrames = [std::mem::MaybeUninit<usize>; MAX_DEPTH];

/// Empty space for a capture.
#[inline(always)]
pub const fn raw_frames() -> RawFrames {
    [const { std::mem::MaybeUninit::uninit() }; MAX_DEPTH]
}

/// The first `n` frames written into `out`.
///
/// # Safety
/// The first `n` (at most `MAX_DEPTH`) elements of `out` must be initialised.
#[inline(always)]
pub unsafe fn captured(out: &RawFrames, n: usize) -> &[usize] {
    // SAFETY: the caller initialised the first `n` (<= MAX_DEPTH) elements, and
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

/// Where a walk starts: the first frame to keep and the highest frame pointer
/// any frame may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// Frame pointer of the first frame to keep, and the top of the stack less 16
    /// (every frame pointer of the walk lies strictly above the one before and at
    /// most at `limit`: both words of a frame lie in this thread's stack).
    Frames {
        /// The first frame to keep.
        fp: usize,
        /// The highest frame pointer accepted.
        limit: usize,
    },
    /// No frame to keep: unknown bounds, a frame pointer off the stack, or the
    /// tracer's own frames end the stack.
    Empty,
    /// The stack pointer lies outside the thread's known stack (a signal handler on
    /// its own stack, a coroutine): no frame could be trusted, none was read.
    Foreign,
}

/// Finds the first frame to keep: the caller of the function this is inlined into,
/// after passing over `skip` frames (the tracer's own).
///
/// # Safety
/// `bounds` must be the current thread's stack (from [`current_stack_bounds`] on
/// this thread), or zero: the words read lie between the stack pointer and the top
/// of `bounds`, which is mapped only when the stack pointer is inside them.
#[inline(always)]
pub unsafe fn start(skip: usize, bounds: StackBounds) -> Start {
    let (mut fp, sp) = registers();
    // The stack pointer must be on this thread's stack: everything from it up to the
    // top is then mapped. (Below `low` the difference wraps around to a huge value.)
    let below_sp = sp.wrapping_sub(bounds.low);
    if below_sp >= bounds.size {
        return if bounds.size != 0 {
            Start::Foreign
        } else {
            Start::Empty
        };
    }
    // One unsigned comparison checks sp <= fp <= top - 16: below `sp` the
    // difference wraps around to a huge value. (With `sp` within 16 bytes of the top
    // the span saturates to 0 and a record at `sp` would reach past the top; no
    // allocation runs there: a thread's first frames, and above them its descriptor
    // or the program's arguments, lie between. Checking it would cost every walk.)
    let span = (bounds.size - below_sp).saturating_sub(2 * size_of::<usize>());
    if fp.wrapping_sub(sp) > span {
        return Start::Empty;
    }
    let limit = sp + span;
    for _ in 0..skip {
        // SAFETY: sp <= fp <= limit (checked before the loop and on every step).
        let (next, _) = unsafe { read_frame(fp) };
        if !follows(fp, next, limit) {
            return Start::Empty;
        }
        fp = next;
    }
    Start::Frames { fp, limit }
}

/// The two words of the frame at `fp`: the caller's frame pointer and the return
/// address into the caller. The words may be garbage if a function lacks a frame
/// pointer; [`follows`] keeps a walk moving up the stack, inside it.
///
/// # Safety
/// `fp .. fp + 16` must be mapped: on this thread's stack, sp <= fp <= top - 16.
/// (x86_64 and aarch64 load unaligned words from normal memory.)
#[inline(always)]
pub unsafe fn read_frame(fp: usize) -> (usize, usize) {
    let p = fp as *const usize;
    // SAFETY: the caller's contract.
    unsafe { (p.read_unaligned(), p.add(1).read_unaligned()) }
}

/// True when a walk at `fp` goes on to `next`: strictly up the stack and at most at
/// `limit`. (A zero return address marks the outermost frame on some platforms; a
/// zero `next` ends the walk there anyway.)
#[inline(always)]
pub fn follows(fp: usize, next: usize, limit: usize) -> bool {
    next > fp && next <= limit
}

/// Up to `max` return addresses from the frame at `fp` up, one frame after another
/// (what a `trail` walk must give): the reference for tests.
///
/// # Safety
/// Every frame from `fp` up to `limit + 16` must be mapped.
#[cfg(test)]
pub unsafe fn plain_walk(mut fp: usize, limit: usize, max: usize) -> Vec<usize> {
    let mut out = Vec::new();
    while out.len() < max {
        // SAFETY: forwarded contract; `follows` keeps fp in [start, limit].
        let (next, ret) = unsafe { read_frame(fp) };
        out.push(ret);
        if !follows(fp, next, limit) {
            break;
        }
        fp = next;
    }
    out
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
                return main_thread_bounds().unwrap_or_default();
            }
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut size: libc::size_t = 0;
            let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            if rc != 0 {
                return StackBounds::default();
            }
            let (low, size) = unlimited_main_capped(addr as usize, size);
            StackBounds { low, size }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        StackBounds::default()
    }
}

/// Most of the main thread's stack kept under `ulimit -s unlimited`.
const UNLIMITED_MAIN_STACK: usize = 1 << 30;

/// The main thread's stack as glibc gives it (`low`, `size`), its top
/// [`UNLIMITED_MAIN_STACK`] only where `RLIMIT_STACK` is unlimited. glibc then takes
/// it to reach down to the next mapping below, which can be terabytes away, just
/// above the area new mappings are made in from the bottom up: a coroutine's or a
/// `stacker` segment's stack made later can land inside those bounds, and an
/// allocation on it would pass for one on this stack, its frame chain followed into
/// the unmapped gap between. Other threads, and limited stacks, are returned as
/// they are.
#[cfg(target_os = "linux")]
fn unlimited_main_capped(low: usize, size: usize) -> (usize, usize) {
    if size <= UNLIMITED_MAIN_STACK {
        return (low, size);
    }
    // SAFETY: plain system calls; `limit` is a valid local.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        let unlimited = libc::getrlimit(libc::RLIMIT_STACK, &mut limit) == 0
            && limit.rlim_cur == libc::RLIM_INFINITY;
        if !unlimited || libc::syscall(libc::SYS_gettid) != libc::getpid() as libc::c_long {
            return (low, size);
        }
    }
    (low + size - UNLIMITED_MAIN_STACK, UNLIMITED_MAIN_STACK)
}

/// The main thread's stack when `pthread_getattr_np` cannot find it: glibc reads
/// `/proc/self/maps` for the main thread's, and a sandbox or container may have no
/// `/proc`. Then the stack's top is taken as where the C library recorded the stack
/// at the program's start (`__libc_stack_end`: every frame lies below it), and its
/// bottom as far below as the stack may grow: `RLIMIT_STACK`, but at most 8 MiB (a
/// walk from deeper down is then taken as off the stack and reads nothing). The
/// kernel places no other mapping within the limit in force at `execve` below the
/// stack's top (nor within 128 MiB), so a stack pointer inside these bounds is on
/// this stack, and everything from it to the top is mapped; the cap keeps that so
/// when the program raised its limit since. `None` on another thread (its stack
/// glibc always knows) or another C library.
///
/// # Safety
/// Called as `current_stack_bounds` is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe fn main_thread_bounds() -> Option<StackBounds> {
    unsafe extern "C" {
        static __libc_stack_end: *mut libc::c_void;
    }
    // SAFETY: plain system calls; `__libc_stack_end` is written once by the dynamic
    // loader before any program code runs; `limit` is a valid local.
    unsafe {
        if libc::syscall(libc::SYS_gettid) != libc::getpid() as libc::c_long {
            return None;
        }
        let top = __libc_stack_end as usize;
        let mut limit: libc::rlimit = std::mem::zeroed();
        let size = if libc::getrlimit(libc::RLIMIT_STACK, &mut limit) == 0
            && limit.rlim_cur != libc::RLIM_INFINITY
        {
            limit.rlim_cur as usize
        } else {
            8 << 20
        };
        let size = size.min(8 << 20).min(top);
        (size > 0).then_some(StackBounds {
            low: top - size,
            size,
        })
    }
}

#[cfg(all(target_os = "linux", not(target_env = "gnu")))]
unsafe fn main_thread_bounds() -> Option<StackBounds> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to `max` return addresses from the caller of this function up.
    #[inline(never)]
    fn here(skip: usize, max: usize, bounds: StackBounds) -> (Start, Vec<usize>) {
        // SAFETY: this thread's bounds (or none or foreign ones: then nothing is read).
        let start = unsafe { start(skip, bounds) };
        let frames = match start {
            // SAFETY: `start` checked the frame against this thread's stack.
            Start::Frames { fp, limit } => unsafe { plain_walk(fp, limit, max) },
            _ => Vec::new(),
        };
        (start, frames)
    }

    #[test]
    fn captures_a_chain_of_return_addresses() {
        let (_, frames) = here(0, MAX_DEPTH, current_stack_bounds());
        // This test function, the test harness closure and a few std frames at least.
        assert!(frames.len() >= 3, "only {} frames", frames.len());
        assert!(frames.iter().all(|&f| f != 0));
    }

    #[test]
    fn skipped_frames_are_not_kept() {
        let b = current_stack_bounds();
        let (all, skipped) = (here(0, MAX_DEPTH, b).1, here(1, MAX_DEPTH, b).1);
        assert!(all.len() >= 3);
        assert_eq!(skipped.len(), all.len() - 1);
        assert_eq!(all[1..], skipped[..]);
    }

    #[test]
    fn no_stack_top_means_no_frames() {
        assert_eq!(here(0, MAX_DEPTH, StackBounds::default()).0, Start::Empty);
    }

    #[test]
    fn a_stack_pointer_outside_the_bounds_reads_nothing() {
        let b = current_stack_bounds();
        // Bounds of some other stack, below this one: the current stack pointer is
        // outside them, so no frame is read and the walk says it was foreign.
        let elsewhere = StackBounds {
            low: b.low.saturating_sub(1 << 20),
            size: 1 << 19,
        };
        assert_eq!(here(0, MAX_DEPTH, elsewhere).0, Start::Foreign);
        assert!(matches!(here(0, MAX_DEPTH, b).0, Start::Frames { .. }));
    }
}
