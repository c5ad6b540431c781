//! realloc (grow, shrink, in place), alloc_zeroed, alignments up to 4096 and null
//! returns keep exactly the inner allocator's semantics, and are counted as such.

use alloc_tracer::{Mode, Settings, TracingAllocator, size_class_of};
use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// An inner allocator that always fails.
struct Exhausted;

// SAFETY: never hands out memory, so no contract about blocks can be broken.
unsafe impl GlobalAlloc for Exhausted {
    unsafe fn alloc(&self, _: Layout) -> *mut u8 {
        std::ptr::null_mut()
    }
    unsafe fn dealloc(&self, _: *mut u8, _: Layout) {
        unreachable!("nothing was allocated")
    }
}

/// A sample interval under which none of this test's allocations is sampled.
const NEVER_SAMPLED: u64 = 1 << 40;

fn totals() -> alloc_tracer::PhaseTotals {
    alloc_tracer::counts().all_phases()
}

#[test]
fn passes_through_with_inner_semantics() {
    // `sites` records after the inner call; `count` and `sample` record a small
    // request before a tail call to the inner allocator, so a refused one stays
    // counted (as documented in the crate's "What is exact" section), but for the
    // one in N whose stack `sample` samples, which is taken back: `sample:1` samples
    // every allocation, `sample:2^40` none of these.
    for mode in [
        Mode::Sites,
        Mode::Count,
        Mode::Sample(1),
        Mode::Sample(3),
        Mode::Sample(NEVER_SAMPLED),
    ] {
        eprintln!("mode {mode:?}");
        check(mode);
    }
}

fn check(mode: Mode) {
    Settings {
        mode,
        ..Default::default()
    }
    .apply();

    // SAFETY: every pointer is used within its layout and freed once with it.
    unsafe {
        // realloc grow: contents kept, counted as one realloc of the new size.
        let l = Layout::from_size_align(16, 8).unwrap();
        let p = GLOBAL.alloc(l);
        for i in 0..16 {
            *p.add(i) = i as u8;
        }
        let t0 = totals();
        let q = GLOBAL.realloc(p, l, 100_000);
        let t1 = totals();
        assert!(!q.is_null());
        assert!((0..16).all(|i| *q.add(i) == i as u8));
        assert_eq!(t1.reallocs - t0.reallocs, 1);
        assert_eq!(t1.allocs - t0.allocs, 0);
        assert_eq!(t1.bytes_requested - t0.bytes_requested, 100_000);
        assert_eq!(
            t1.bytes_allocated - t0.bytes_allocated,
            size_class_of(100_000, 8) as u64
        );
        assert_eq!(t1.bytes_freed - t0.bytes_freed, 16);

        // realloc shrink, then in place within one class.
        let l2 = Layout::from_size_align(100_000, 8).unwrap();
        let r = GLOBAL.realloc(q, l2, 100);
        assert!(!r.is_null());
        assert!((0..16).all(|i| *r.add(i) == i as u8));
        let l3 = Layout::from_size_align(100, 8).unwrap();
        let s = GLOBAL.realloc(r, l3, 110);
        assert_eq!(s, r, "100 -> 110 bytes stays in the 112-byte class");
        let t2 = totals();
        assert_eq!(t2.reallocs - t1.reallocs, 2);
        GLOBAL.dealloc(s, Layout::from_size_align(110, 8).unwrap());
        assert_eq!(totals().frees - t2.frees, 1);

        // alloc_zeroed really zeroes (on a reused, dirtied block too).
        for _ in 0..3 {
            let l = Layout::from_size_align(4000, 8).unwrap();
            let z = GLOBAL.alloc_zeroed(l);
            assert!((0..4000).all(|i| *z.add(i) == 0));
            std::ptr::write_bytes(z, 0xAB, 4000);
            GLOBAL.dealloc(z, l);
        }

        // Alignments up to 4096, small and large.
        for align in (0..=12).map(|k| 1usize << k) {
            for size in [1, 7, 100, 5000, 70_000] {
                let l = Layout::from_size_align(size, align).unwrap();
                let p = GLOBAL.alloc(l);
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "size {size} align {align}");
                let p = GLOBAL.realloc(p, l, size * 3);
                assert_eq!(p as usize % align, 0, "realloc size {size} align {align}");
                GLOBAL.dealloc(p, Layout::from_size_align(size * 3, align).unwrap());
            }
        }

        // Null returns pass through and are not counted, but for small requests
        // refused in `count` mode or not sampled in `sample` mode.
        let t3 = totals();
        let huge = Layout::from_size_align(1 << 62, 8).unwrap();
        assert!(GLOBAL.alloc(huge).is_null());
        assert!(GLOBAL.alloc_zeroed(huge).is_null());
        let small = Layout::from_size_align(64, 8).unwrap();
        let p = GLOBAL.alloc(small);
        assert!(GLOBAL.realloc(p, small, 1 << 62).is_null());
        GLOBAL.dealloc(p, small);
        let failing = TracingAllocator::new(Exhausted);
        assert!(failing.alloc(small).is_null());
        assert!(failing.alloc_zeroed(small).is_null());
        let t4 = totals();
        // Besides the 64-byte block: the refused 64-byte requests still counted.
        let refused_counted = (t4.allocs - t3.allocs)
            .checked_sub(1)
            .expect("the 64-byte block is counted");
        match mode {
            Mode::Count | Mode::Sample(NEVER_SAMPLED) => assert_eq!(refused_counted, 2),
            // Each sampled or not, at random.
            Mode::Sample(3) => assert!(refused_counted <= 2),
            _ => assert_eq!(refused_counted, 0),
        }
        assert_eq!(
            t4.bytes_requested - t3.bytes_requested,
            64 * (1 + refused_counted)
        );
        assert_eq!(
            t4.reallocs - t3.reallocs,
            0,
            "the failed realloc is not counted"
        );
        assert_eq!(t4.frees - t3.frees, 1);
    }
}
