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
