//! The cold side of the hot path's door (`hot::door::Door`): where the recording
//! path hands over the rare work it must not do itself.

use crate::hot::control;
use crate::hot::door::{Door, SiteRef};
use crate::hot::followed;
use crate::hot::thread::ThreadState;
use crate::registry;

/// The tracer's implementation of the door: settings, the registry of thread
/// states, followed blocks (lifetimes and heap sampling) and kept peaks.
pub struct Cold;

impl Door for Cold {
    #[cold]
    #[inline(never)]
    fn first_allocation() {
        crate::start::first_allocation();
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
    fn if_tables_unread(f: impl FnOnce()) {
        registry::if_unlocked(f);
    }

    #[cold]
    #[inline(never)]
    fn block_followed(ptr: *mut u8, site: SiteRef<'_>, live_bytes: u64) {
        let p = ptr as usize;
        // Claimed first, released if its shard turns it away.
        followed::claim(p);
        if crate::lifetimes::follow(ptr, site, live_bytes) {
            followed::release(p);
        }
        // Frees stopped being recorded as this block began to be followed: dropped
        // here or by `unseen_frees::control_changed`.
        if !crate::unseen_frees::recorded(control::load()) && crate::lifetimes::forget(ptr) {
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
    fn heap_sampled(ptr: *mut u8, site: SiteRef<'_>, class_bytes: u64, interval: u64) {
        let p = ptr as usize;
        followed::claim(p);
        let number = crate::site_index::number(site);
        if crate::heap::sample(ptr, number, class_bytes, interval) {
            followed::release(p);
        }
        // As in `block_followed`.
        if !crate::unseen_frees::recorded(control::load()) && crate::heap::end(ptr) {
            followed::release(p);
        }
    }

    #[cold]
    #[inline(never)]
    fn new_peak(live_bytes: i64) {
        crate::heap::new_peak(live_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::door::Stack;
    use crate::hot::site_table::SiteMeta;
    use crate::unseen_frees::recorded;

    #[test]
    fn a_block_followed_as_frees_stop_being_recorded_is_dropped_by_its_follower() {
        // Unit tests choose no mode: frees are not recorded, as just after a switch
        // to `off` that a follower did not see in time.
        assert!(!recorded(control::load()));
        let site = SiteRef {
            meta: SiteMeta::new(0, 3, 0),
            hash: 0x5151,
            stack: Stack::Frames(&[]),
        };
        // Addresses no real block has here.
        let (a, b) = (
            0x5b00_0000_0040usize as *mut u8,
            0x5b00_0000_0080usize as *mut u8,
        );
        let dropped = crate::lifetimes::dropped();
        Cold::block_followed(a, site, 64);
        Cold::heap_sampled(b, site, 64, 4096);
        assert!(
            !followed::maybe(a) && !followed::maybe(b),
            "entries released"
        );
        assert!(
            !crate::lifetimes::forget(a),
            "not left in the lifetimes' map"
        );
        assert!(!crate::heap::end(b), "not left in the heap's map");
        assert_eq!(crate::lifetimes::dropped(), dropped + 1);
    }
}
