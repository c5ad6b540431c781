//! The hot path: everything the `GlobalAlloc` implementation runs per call.
//!
//! # Rules
//!
//! Code in this module tree runs inside every allocation of the traced program, on
//! every thread, hundreds of millions of times a synthesis. It must:
//!
//! 1. **Never allocate** through the global allocator outside the re-entrancy guard.
//!    Growing a site table, creating a thread's state and following a sampled block
//!    happen in `#[cold]` functions that set the guard first; the tracer's own
//!    allocations then pass straight through and are counted apart (`caller`).
//! 2. **Never block** and never take a lock on the recording path. The cold paths
//!    above may take the cold side's locks (the registry's once per thread and per
//!    full table flushed, and tried, never waited for, when a table grows; a
//!    shard's, a stripe's and the site numbers' per followed or heap-sampled
//!    block; the kept peak's per new peak), never one a recording thread could be
//!    waiting on while holding it.
//! 3. **Never do I/O, symbolize or panic.** No `unwrap`, no indexing that can fail
//!    (indices are clamped by construction), no formatting.
//! 4. **No shared atomic read-modify-write per call.** Counters are per thread,
//!    updated with a relaxed load and store (no `lock` prefix) so that the report can
//!    read live threads; the only shared RMW happens when a thread's net live bytes
//!    have drifted by [`live::LIVE_PUBLISH_BYTES`], when a sampled block is followed,
//!    and in cold paths.
//! 5. **Never change the layout** passed to the inner allocator: no headers, so the
//!    size class recorded is the one jemalloc really uses. `realloc`,
//!    `alloc_zeroed`, over-aligned layouts and null returns pass through with
//!    exactly the inner allocator's semantics; a null return is not recorded, but
//!    for a small request in `count` mode or not sampled in `sample` mode, which is
//!    recorded before a tail call to the inner allocator and so never sees its
//!    result (see the crate's "What is exact").
//! 6. **One door out.** Nothing here names a module outside `hot/` but through the
//!    [`door::Door`] trait, whose `#[cold]` methods the cold side implements (first
//!    allocation, thread start and exit, table full, block followed and ended, block
//!    heap-sampled, new peak).
//!    Every static the recording path writes lives here; cold code may read these
//!    types and call their public functions, never the reverse.
//!
//! `tests/hot_path.rs` checks rules 1, 2 and 5 with a counting inner allocator and a
//! held registry lock; `scripts/check-layers.py` checks rule 6.
//!
//! # Control flow
//!
//! With tail calls (`→`: a jump, nothing done after it returns; `↳`: a call) a reader
//! follows each mode through these functions. `A` is the inner allocator.
//!
//! ```text
//! entry::alloc ── off ──────────────────────────────────→ A
//!   ├─ count ── alloc::alloc_without_stack ── small ────→ A
//!   │                                      ├─ heap chunk done ─→ alloc_heap_chunk_done ── other ─→ A
//!   │                                      │        └─ heap-sampled ─→ alloc_heap_sampled ↳ A, ↳ heap::sample_block
//!   │                                      └─ other ─→ alloc_recorded
//!   ├─ sample ─ alloc::alloc_without_stack ── small ────→ A
//!   │                                      ├─ chunk done ─→ alloc_chunk_done ── other ─→ A
//!   │                                      │        ├─ 1 in N ─→ alloc_sampled ↳ A, ↳ sites::sample
//!   │                                      │        └─ heap-sampled ─→ alloc_heap_sampled
//!   │                                      ├─ heap chunk done ─→ alloc_heap_chunk_done (as in count)
//!   │                                      └─ other ─→ alloc_recorded ↳ A, ↳ sites::sample when drawn,
//!   │                                               or whole from 256 KiB's class
//!   └─ sites, first call ─ alloc::alloc_recorded ↳ A, then sites::record_site (guess inlined,
//!                                      │        ↳ sites::walked_slot when refused)
//!                                      └─ not small → alloc_any ↳ A (first: alloc_first)
//! entry::dealloc ── off ────────────────────────────────→ A
//!   └─ recording ─ free::dealloc_recorded ── small ─────→ A   (one copy per every-stack / follows)
//!                                      ├─ overflow / followed → dealloc_pending → A
//!                                      │    (`sample`: a sampled block's temporary found here)
//!                                      ├─ large or over-aligned → dealloc_any → A
//!                                      └─ no thread state ↳ dealloc_unusual ↳ A
//! entry::realloc ── a followed block ↳ end_following; then ↳ A, then ↳ realloc::record_realloc ↳ sites (sites, sample)
//! ```
//!
//! (`count` mode without heap sampling runs a copy of `alloc_without_stack` without
//! the heap countdown.)
//!
//! `caller` decides whose a call is (the program's, the tracer's own, a thread's
//! first, or after thread exit); `live` keeps live and peak bytes; `heap` decides
//! which blocks heap sampling samples (every recording path counts its bytes);
//! `followed` is the table of followed blocks every free reads; `predict` guesses a
//! `sites` allocation's site from the one before and checks the guess against the
//! stack; `trail` walks stacks, reusing the frames a walk shares with the thread's
//! previous one; `stacks` keeps one copy of each stack for every thread's site
//! table; `thread`, `control`, `site_table`, `stack`,
//! `size_class` and `log_linear` hold the state and arithmetic these paths share.

pub mod alloc;
pub mod caller;
pub mod clock;
pub mod control;
pub mod countdown;
pub mod door;
pub mod entry;
#[cfg(test)]
pub mod fake_stack;
pub mod followed;
pub mod free;
pub mod heap;
pub mod live;
pub mod log_linear;
pub mod predict;
pub mod realloc;
pub mod site_table;
pub mod sites;
pub mod size_class;
pub mod stack;
pub mod stacks;
pub mod thread;
pub mod trail;
