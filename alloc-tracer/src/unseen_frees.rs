//! When frees stop being recorded (a pause, a switch to a mode that follows no
//! block), the blocks followed for lifetimes and sampled for the heap are dropped:
//! their frees would go unseen. Called by the settings and the pause after they
//! change the control word.

use crate::hot::control::{self, Control};
use crate::hot::followed;

/// True when frees under the control word `c` end followed blocks: recording, in a
/// mode that follows blocks.
pub(crate) fn recorded(c: Control) -> bool {
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
    if recorded(old) && !recorded(control::load()) {
        crate::hot::thread::guarded(|| {
            crate::lifetimes::drop_all(followed::release);
            crate::heap::drop_all(followed::release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::door::Cold;
    use crate::hot::door::{Door, SiteRef, Stack};
    use crate::hot::site_table::SiteMeta;

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
        Cold::heap_sampled(b, site, 64);
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
