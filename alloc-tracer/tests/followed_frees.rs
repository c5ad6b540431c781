//! Every followed block's free ends its following, the free that publishes the
//! thread's net live bytes among them: that free takes a path of its own (the
//! counter overflowed downwards), which must still look the block up among the
//! followed ones. One test: the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Blocks of 1 KiB: 1,000 of them move the thread's net live bytes by several times
/// the 256 KiB at which it publishes, up while they are allocated, down while freed.
const BLOCKS: usize = 1000;

/// The blocks, into a vector allocated by the caller (so that this function's
/// sites hold the blocks alone).
#[inline(never)]
fn allocate_all(blocks: &mut Vec<Box<[u8]>>) {
    for i in 0..BLOCKS {
        blocks.push(vec![i as u8; 1024].into_boxed_slice());
    }
}

#[test]
fn every_followed_free_ends_its_following() {
    Settings {
        mode: Mode::Sites,
        lifetime_interval: 1,
        ..Default::default()
    }
    .apply();
    // A thread started under these settings follows every block from its first.
    std::thread::spawn(|| {
        let mut blocks = Vec::with_capacity(BLOCKS);
        allocate_all(black_box(&mut blocks));
        drop(blocks);
    })
    .join()
    .unwrap();

    let dir_scratch = common::scratch("followed-frees");

    let dir = dir_scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    Settings::default().apply();
    let allocs = common::sum_for_function(&dir, "allocate_all", "alloc_count");
    let followed = common::sum_for_function(&dir, "allocate_all", "followed_count");
    let freed = common::sum_for_function(&dir, "allocate_all", "followed_freed_count");
    assert_eq!(allocs, BLOCKS as u64);
    assert_eq!(followed, allocs, "every block is followed at interval 1");
    assert_eq!(freed, followed, "every followed block was freed");
}
