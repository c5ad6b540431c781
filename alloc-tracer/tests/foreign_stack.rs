//! An allocation made while the thread runs on a stack of its own making (as a
//! coroutine, a `stacker` segment or a signal handler on `sigaltstack` does), whose
//! frame-pointer chain is garbage pointing at unmapped memory: the stack walk must
//! read nothing there, and the allocation is still counted, as a foreign walk. One
//! test: the mode is process-wide.
#![cfg(target_arch = "x86_64")]

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const PAGE: usize = 4096;
/// Pages of the stack segment: enough for a debug build (jemalloc's realloc path alone
/// takes more than 64 KiB of stack unoptimised).
const STACK_PAGES: usize = 64;

extern "C" fn allocate() {
    let b = Box::new([7u8; 160]);
    black_box(&b);
    let mut v: Vec<u64> = Vec::new();
    for i in 0..100 {
        v.push(i);
    }
    black_box(v);
}

/// Calls `f` with the stack pointer at `top` and the frame pointer at `fp`.
///
/// # Safety
/// `top` must be the 16-byte aligned end of writable memory large enough for `f`.
unsafe fn call_on(top: usize, fp: usize, f: extern "C" fn()) {
    // SAFETY: the caller's stack pointer and frame pointer are kept in callee-saved
    // registers across the call and restored after it; `f` follows the C ABI and
    // does not unwind.
    unsafe {
        std::arch::asm!(
            "mov r12, rsp",
            "mov r13, rbp",
            "mov rsp, r14",
            "mov rbp, r15",
            "call rax",
            "mov rsp, r12",
            "mov rbp, r13",
            in("r14") top,
            in("r15") fp,
            in("rax") f,
            out("r12") _,
            out("r13") _,
            clobber_abi("C"),
        );
    }
}

/// The lowest address of the current thread's stack.
fn thread_stack_low() -> usize {
    // SAFETY: `attr` is filled by pthread_getattr_np and destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        assert_eq!(libc::pthread_getattr_np(libc::pthread_self(), &mut attr), 0);
        let (mut addr, mut size) = (std::ptr::null_mut(), 0);
        assert_eq!(libc::pthread_attr_getstack(&attr, &mut addr, &mut size), 0);
        libc::pthread_attr_destroy(&mut attr);
        addr as usize
    }
}

#[test]
fn walks_never_leave_the_known_stack() {
    // A stack segment below this thread's stack, then a page nobody may read, which
    // the garbage frame pointer points into: between the segment and the thread's
    // stack top, so a walk bounded only by the top would read it and fault.
    let low = thread_stack_low();
    // SAFETY: a fresh anonymous mapping at an address nothing else uses
    // (MAP_FIXED_NOREPLACE fails rather than replace a mapping); the second part is
    // made inaccessible.
    let base = unsafe {
        let want = (low - (256 << 20)) & !(PAGE - 1);
        let p = libc::mmap(
            want as *mut libc::c_void,
            (STACK_PAGES + 1) * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        assert!((p as usize) < low);
        assert_eq!(
            libc::mprotect(
                p.cast::<u8>().add(STACK_PAGES * PAGE).cast(),
                PAGE,
                libc::PROT_NONE
            ),
            0
        );
        p as usize
    };
    let top = base + STACK_PAGES * PAGE;
    let garbage_fp = top + PAGE / 2;
    for mode in [Mode::Sites, Mode::Sample(1)] {
        Settings {
            mode,
            lifetime_interval: 1,
            ..Default::default()
        }
        .apply();
        let before = alloc_tracer::counts();
        // SAFETY: `top` ends STACK_PAGES writable pages and is page-aligned.
        unsafe { call_on(top, garbage_fp, allocate) };
        let after = alloc_tracer::counts();
        Settings::default().apply();
        let allocs = after.total(|p| p.allocs) - before.total(|p| p.allocs);
        assert!(allocs >= 2, "{mode:?}: {allocs} allocations counted");
        assert!(
            after.foreign_walks > before.foreign_walks,
            "{mode:?}: no foreign walk counted"
        );
    }
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(base as *mut libc::c_void, (STACK_PAGES + 1) * PAGE) };
}
