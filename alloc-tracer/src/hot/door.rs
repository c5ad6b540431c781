//! The door: the only way out of the hot path.
//!
//! The recording path needs cold work now and then: reading the settings at the
//! first allocation of the process, registering a thread's state at its first
//! allocation and merging it at its exit, emptying a full site table, following
//! a block from its allocation to its free, and keeping what is live when live bytes
//! reach a new peak. It asks for that through this trait, and
//! nothing else in `hot/` names a module outside `hot/`. The cold side implements it
//! (the crate's cold `door` module) and the allocator wires the two together, so control flows
//! out of the hot path only here, and the hot path's rules (no allocation, no lock,
//! no I/O on the recording path) are the whole story of what it does.
//!
//! Every call is rare (once per process, per thread, per full table, per followed or
//! heap-sampled block, per new peak) and made from a `#[cold]` branch. Unless a method says otherwise,
//! it is called with the re-entrancy guard set, so what it allocates is the
//! tracer's own.

use super::site_table::{SiteMeta, SiteTable, Slot};
use super::stack::{Frames, MAX_DEPTH};
use super::thread::ThreadState;

/// A followed block's site, as the hot path knows it: the key of its slot.
#[derive(Clone, Copy)]
pub struct SiteRef<'a> {
    /// Phase, size class and depth.
    pub meta: SiteMeta,
    /// The slot's key hash (`site_table::key_hash` of `meta` and the frames): with
    /// `meta`, what the cold side looks the site up by.
    pub hash: u64,
    /// Where its return addresses are.
    pub stack: Stack<'a>,
}

/// Where a site's return addresses are, innermost first (`meta.depth()` of them).
/// A slot's lie apart from it, in lines of their own: the cold side reads them only
/// for a site it has not seen yet, so that following a block of a known site reads
/// none of them.
#[derive(Clone, Copy)]
pub enum Stack<'a> {
    /// Already read.
    Frames(&'a [usize]),
    /// Those of a slot of a thread's current site table.
    Slot(&'a SiteTable, &'a Slot),
}

impl SiteRef<'_> {
    /// The site's return addresses, copied into `out`.
    pub fn frames<'o>(&self, out: &'o mut Frames) -> &'o [usize] {
        let n = match self.stack {
            Stack::Frames(f) => {
                let n = f.len().min(MAX_DEPTH);
                out[..n].copy_from_slice(&f[..n]);
                n
            }
            Stack::Slot(table, slot) => table.frames_of(slot, out),
        };
        &out[..n]
    }
}

/// What the hot path asks of the cold side.
pub trait Door {
    /// The first allocation of the process, before the mode is known: read the
    /// settings and set the mode (`control::init_mode`). Runs without allocating on
    /// the success path, since another thread may hold locks the allocator needs.
    fn first_allocation();

    /// A thread's state was just created, at its first recorded allocation: make it
    /// visible to reports.
    fn thread_started(state: *mut ThreadState);

    /// The thread that owns `state` is exiting: merge its counters and free it.
    ///
    /// # Safety
    /// `state` is a state passed to [`thread_started`](Door::thread_started), owned
    /// by the calling thread, which never touches it again.
    unsafe fn thread_exited(state: *mut ThreadState);

    /// The owner's site table is at its size cap: move its contents somewhere and
    /// leave it empty.
    fn table_full(state: &ThreadState);

    /// Runs `f` now if no other thread can be reading a live thread's site tables,
    /// and keeps it so while `f` runs; otherwise does nothing. Never waits (the owner
    /// of a table that grew frees the tables it replaced here).
    fn if_tables_unread(f: impl FnOnce());

    /// Start following the block at `ptr` allocated at `site`, until
    /// [`block_ended`](Door::block_ended); while live it counts `live_bytes` (its
    /// real bytes times the blocks it stands for). Must count it in
    /// `hot::followed` (`claim`) so that frees of it take the cold path.
    fn block_followed(ptr: *mut u8, site: SiteRef<'_>, live_bytes: u64);

    /// The block at `ptr`, which `hot::followed::maybe` flagged, is being freed or
    /// moved: stop following it if it is followed (for lifetimes, heap sampling or
    /// both). Called before the inner allocator can hand the address out again.
    fn block_ended(ptr: *mut u8);

    /// Heap sampling sampled the block at `ptr` (of `class_bytes` real bytes,
    /// allocated at `site`) at a mean of `interval` bytes: count it live, weighted by
    /// its sampling probability, until [`block_ended`](Door::block_ended). Like
    /// `block_followed`, it must count the block in `hot::followed`.
    fn heap_sampled(ptr: *mut u8, site: SiteRef<'_>, class_bytes: u64, interval: u64);

    /// The global live bytes reached `live_bytes`, a new peak by at least
    /// `live::PEAK_STEP`'s margin (`live::peak_mark_due`): keep what is live now.
    fn new_peak(live_bytes: i64);
}
