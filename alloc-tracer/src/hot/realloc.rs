//! Reallocs: recorded after the inner allocator returns, as a realloc in the new
//! block's class (and a free of the old block's bytes). For heap sampling the new
//! block counts as a new one of its full size (the old one, if sampled, stopped
//! being followed before the inner allocator could move it).

use super::caller::{Call, state};
use super::control::Control;
use super::door::Door;
use super::entry::no_tail_call;
use super::heap;
use super::live;
use super::log_linear;
use super::site_table::bump;
use super::sites::{REALLOC, site_and_latest};
use super::size_class;
use super::thread;
use std::alloc::Layout;

/// Records a successful realloc of `old` (`layout`) to `new` (`new_size` bytes).
#[inline(never)]
pub fn record_realloc<D: Door>(
    ctl: Control,
    old: *mut u8,
    layout: Layout,
    new: *mut u8,
    new_size: usize,
) {
    let local = thread::current();
    let moved = old != new;
    let new_layout = Layout::from_size_align(new_size, layout.align()).unwrap_or(layout);
    let call = if moved { Call::Alloc } else { Call::Free };
    let Some(st) = state::<D>(local, new_layout, call) else {
        return;
    };
    let class = size_class::index_of(new_size, layout.align());
    let old_class = size_class::index_of(layout.size(), layout.align());
    let p = st.phase(ctl);
    bump(&p.reallocs, 1);
    bump(&p.bytes_requested, new_size as u64);
    let usable = size_class::usable(class, new_size);
    let old_usable = size_class::usable(old_class, layout.size());
    bump(&p.realloc_bytes_allocated, usable as u64);
    bump(&p.realloc_bytes_freed, old_usable as u64);
    if moved {
        // A moving realloc is a request jemalloc serves from the new class.
        if let Some(c) = st.moved.get(class) {
            bump(c, 1);
        }
    }
    bump(&st.requested[log_linear::size_bucket(new_size)], 1);
    site_and_latest::<D, REALLOC>(st, ctl, new, new_size, usable, class);
    if heap::due(st, usable) {
        heap::sample_block::<D>(st, ctl, new, usable, class);
        no_tail_call();
    }
    // After the heap sample, so that a peak the new bytes make is kept with the
    // block in it.
    live::add_bytes::<D>(st, usable as i64 - old_usable as i64);
}
