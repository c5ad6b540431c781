//! Writing a report where the stack has room for it. Symbolizing the stacks and
//! building the tables take about 100 KiB of stack; a program may write its report
//! (or exit, writing the `ALLOC_TRACE_REPORT` one) from a thread of a small stack,
//! which that would overflow. So a thread with less than [`NEEDED`] left, or one
//! running off its own stack (a signal stack, a coroutine), writes on a thread of
//! the tracer's own and waits for it.
//!
//! That thread is made with `pthread_create`, its re-entrancy guard set for good
//! from its first instruction (as the timeline's sampler): everything it allocates
//! and frees, its thread-locals' destructors' included, is the tracer's own, so the
//! report it writes counts nothing of its own making. It starts with every signal
//! blocked, so that none sent to the process is handled on it.

use std::ffi::c_void;

/// Stack the writing may take, with a wide margin.
const NEEDED: usize = 1 << 20;

/// The stack of the thread that writes for a caller short of room (reserved, not
/// touched: pages are mapped as the writing reaches them).
const THREAD_STACK: usize = 16 << 20;

/// Runs `f` here when this thread's stack has room for it, else on a thread of its
/// own, waiting for it (here too should that thread not start). A panic in `f`
/// reaches the caller either way.
pub fn with_room<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if room_here() >= NEEDED {
        return f();
    }
    let mut job = Job {
        f: Some(f),
        out: None,
    };
    if !run_on_thread(&mut job) {
        return (job.f.take().expect("not run"))();
    }
    match job.out.expect("the thread ran the job") {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Bytes of this thread's stack below the current frame; 0 when the stack is
/// unknown or the frame lies off it.
fn room_here() -> usize {
    let b = crate::hot::stack::current_stack_bounds();
    let here = std::ptr::addr_of!(b) as usize;
    if b.size == 0 || here < b.low || here >= b.low.saturating_add(b.size) {
        return 0;
    }
    here - b.low
}

struct Job<F, R> {
    f: Option<F>,
    out: Option<std::thread::Result<R>>,
}

/// Runs `job` on a new thread of [`THREAD_STACK`] and waits for it; false when the
/// thread could not be made.
fn run_on_thread<F: FnOnce() -> R, R>(job: &mut Job<F, R>) -> bool {
    // SAFETY: `attr` is initialised before use and destroyed after; the signal sets
    // are initialised before they are read; `job` outlives the thread, which is
    // joined before this returns, and only that thread touches it meanwhile;
    // `start::<F, R>` matches the job's type and never unwinds.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_attr_init(&mut attr) != 0 {
            return false;
        }
        libc::pthread_attr_setstacksize(&mut attr, THREAD_STACK);
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
        let mut t: libc::pthread_t = std::mem::zeroed();
        let made = libc::pthread_create(
            &mut t,
            &attr,
            start::<F, R>,
            (job as *mut Job<F, R>).cast::<c_void>(),
        ) == 0;
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        if made {
            libc::pthread_join(t, std::ptr::null_mut());
        }
        made
    }
}

extern "C" fn start<F: FnOnce() -> R, R>(job: *mut c_void) -> *mut c_void {
    crate::hot::thread::with_local(|l| l.set_guard(true));
    // SAFETY: `run_on_thread` passed its `Job<F, R>`, alive until it joins this
    // thread.
    let job = unsafe { &mut *job.cast::<Job<F, R>>() };
    if let Some(f) = job.f.take() {
        job.out = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    }
    std::ptr::null_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_short_of_stack_hands_the_work_over() {
        // Plenty here: run in place.
        let here = std::thread::current().id();
        assert_eq!(with_room(|| std::thread::current().id()), here);
        // A 64 KiB thread: run elsewhere, with its answer and its panic brought back.
        std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let me = std::thread::current().id();
                let (ran_on, room) = with_room(|| (std::thread::current().id(), room_here()));
                assert_ne!(ran_on, me);
                assert!(room >= NEEDED, "{room}");
                let caught = std::panic::catch_unwind(|| with_room(|| panic!("in the job")));
                assert!(caught.is_err());
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
