//! The cold side of the hot path's door (`hot::door::Door`): where the recording
//! path hands over the rare work it must not do itself.

use crate::config::{Mode, Settings};
use crate::hot::control::{self, Control};
use crate::hot::door::{Door, SiteRef};
use crate::hot::followed;
use crate::hot::thread::ThreadState;
use crate::registry::{self, SiteId};
use crate::session;

/// The tracer's implementation of the door: settings, the registry of thread
/// states, followed blocks (lifetimes and heap sampling) and kept peaks.
pub struct Cold;

impl Door for Cold {
    #[cold]
    #[inline(never)]
    fn first_allocation() {
        crate::fork::arm();
        settings_from_env();
    }

    #[cold]
    #[inline(never)]
    fn thread_started(state: *mut ThreadState) {
        registry::register(state);
    }

    #[cold]
    #[inline(never)]
    unsafe fn thread_exited(state: *mut ThreadState) {
        // SAFETY: the door's contract: a registered state, owned by this exiting
        // thread, never touched again.
        unsafe { registry::retire(state) };
    }

    #[cold]
    #[inline(never)]
    fn table_full(state: &ThreadState) {
        registry::flush_table(state);
    }

    #[cold]
    #[inline(never)]
    fn block_followed(ptr: *mut u8, site: SiteRef<'_>, class_bytes: u64) {
        if crate::lifetimes::skip_if_full() {
            return;
        }
        let p = ptr as usize;
        followed::claim(p);
        if crate::lifetimes::follow(ptr, site, class_bytes) {
            followed::release(p);
        }
        // Frees stopped being recorded as this block began to be followed: dropped
        // here or by `control_changed`.
        if !frees_recorded(control::load()) && crate::lifetimes::forget(ptr) {
            followed::release(p);
        }
    }

    #[cold]
    #[inline(never)]
    fn block_ended(ptr: *mut u8) {
        // A block followed for lifetimes and sampled for the heap at once holds
        // two counts in its entry: each map that lets it go releases one.
        if crate::lifetimes::end(ptr) {
            followed::release(ptr as usize);
        }
        if crate::heap::may_hold(ptr) && crate::heap::end(ptr) {
            followed::release(ptr as usize);
        }
    }

    #[cold]
    #[inline(never)]
    fn heap_sampled(ptr: *mut u8, site: SiteRef<'_>, class_bytes: u64) {
        let p = ptr as usize;
        followed::claim(p);
        if crate::heap::sample(ptr, SiteId::of_site(site), class_bytes) {
            followed::release(p);
        }
        // As in `block_followed`.
        if !frees_recorded(control::load()) && crate::heap::end(ptr) {
            followed::release(p);
        }
    }

    #[cold]
    #[inline(never)]
    fn new_peak(live_bytes: i64) {
        crate::heap::new_peak(live_bytes);
    }
}

/// True when frees under the control word `c` end followed blocks: recording, in a
/// mode that follows blocks.
fn frees_recorded(c: Control) -> bool {
    c.recording() && c.follows()
}

/// Called after the control word changed from `old` (a mode set, a pause): when
/// frees ended followed blocks under `old` and do not now, drops every block
/// followed for lifetimes or sampled for the heap, whose frees would go unseen (see
/// `lifetimes::drop_all`).
///
/// A block that another thread begins to follow meanwhile (under the word it read
/// before the change) is dropped either here or by that thread: it checks the word
/// after putting the block in its map, under the map's lock. If it took the lock
/// after this drop did, the change happened before its check, which sees it; if
/// before, the drop finds the block. A free under the old word that ends a block
/// meanwhile takes it out of its map under the same lock: one of the two finds it,
/// and only that one releases its count.
pub(crate) fn control_changed(old: Control) {
    if frees_recorded(old) && !frees_recorded(control::load()) {
        crate::hot::thread::guarded(|| {
            crate::lifetimes::drop_all(followed::release);
            crate::heap::drop_all(followed::release);
        });
    }
}

/// Decides the mode at the first allocation, from the environment, and arms the
/// exit report. Cold, once. Allocation-free on the success path; on a bad setting it writes one line to
/// standard error (with `write(2)`, which does not allocate) and stays off.
fn settings_from_env() {
    let settings = Settings::from_env();
    let (settings, bad) = match settings {
        Ok(s) => (s, false),
        Err(_) => (Settings::default(), true),
    };
    settings.publish_intervals();
    if control::init_mode(settings.mode.code(), settings.depth, settings.heap_on()) {
        if bad {
            let msg = b"alloc-tracer: ignoring invalid ALLOC_TRACE* settings (expected ALLOC_TRACE=off|count|sites|sample:N, ALLOC_TRACE_DEPTH=1..62, ALLOC_TRACE_LIFETIMES=N, ALLOC_TRACE_HEAP=BYTES, ALLOC_TRACE_TIMELINE_MS=N); tracing is off\n";
            // SAFETY: writes a static buffer to fd 2.
            unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
        }
        if settings.mode != Mode::Off {
            session::arm_exit_report();
            crate::timeline::start();
        }
    }
}
