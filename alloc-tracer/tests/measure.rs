//! `measure` is exact per thread while many tests measure at once: these tests run
//! on parallel threads of one binary (as `cargo test` runs them), each allocating a
//! count of its own while a thread of its own allocates beside it, and each sees
//! exactly its own. (The mode is process-wide; every test here wants the same,
//! counting, so they share it.)

use alloc_tracer::{Measured, TracingAllocator, assert_allocs, measure, size_class_of};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// `k` boxes of 64 bytes and a vector grown to `k` elements by pushes, all freed,
/// measured while another thread allocates too.
fn work(k: usize) -> Measured {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Relaxed) {
                black_box(vec![0u8; 100]);
            }
        });
        let ((), m) = measure(|| {
            let boxes: Vec<Box<[u8; 64]>> = (0..k).map(|i| Box::new([i as u8; 64])).collect();
            black_box(&boxes);
            let mut v: Vec<u64> = Vec::new();
            for i in 0..k as u64 {
                v.push(i);
            }
            black_box(v);
        });
        stop.store(true, Relaxed);
        m
    })
}

/// What `work(k)` must count: the boxes and the collected vector (one allocation of
/// exactly `k` pointers), and the pushed vector's growth (4 elements first, then
/// doubling: one allocation, then a realloc per doubling).
fn expected(k: usize) -> (u64, u64) {
    let mut reallocs = 0;
    let mut cap = 4;
    while cap < k {
        cap *= 2;
        reallocs += 1;
    }
    (k as u64 + 2, reallocs)
}

/// The most `work(k)` holds at once: everything just before the end, when the
/// boxes, the collected vector and the pushed one (grown to its last capacity) are
/// all live, in size-class bytes.
fn expected_peak(k: usize) -> u64 {
    let class = |size: usize| size_class_of(size, 8) as u64;
    let mut cap = 4;
    while cap < k {
        cap *= 2;
    }
    k as u64 * class(64) + class(8 * k) + class(8 * cap)
}

fn check(k: usize) {
    let m = work(k);
    let (allocs, reallocs) = expected(k);
    assert_eq!((m.allocs, m.reallocs), (allocs, reallocs), "{m:?}");
    assert_eq!(m.frees, allocs, "{m:?}");
    assert_eq!(m.peak_bytes, expected_peak(k), "{m:?}");
    assert_allocs!(
        m,
        allocs <= allocs,
        reallocs <= reallocs,
        peak_bytes <= expected_peak(k)
    );
}

#[test]
fn t01() {
    check(100);
}
#[test]
fn t02() {
    check(200);
}
#[test]
fn t03() {
    check(300);
}
#[test]
fn t04() {
    check(400);
}
#[test]
fn t05() {
    check(500);
}
#[test]
fn t06() {
    check(600);
}
#[test]
fn t07() {
    check(700);
}
#[test]
fn t08() {
    check(800);
}
#[test]
fn t09() {
    check(900);
}
#[test]
fn t10_and_the_assertion_names_every_breach() {
    check(1000);
    let m = Measured {
        allocs: 13,
        bytes: 5000,
        ..Default::default()
    };
    let message = std::panic::catch_unwind(|| assert_allocs!(m, allocs <= 12, bytes <= 4096))
        .unwrap_err()
        .downcast::<String>()
        .unwrap();
    assert!(
        message.contains("allocs = 13 (budget 12)")
            && message.contains("bytes = 5000 (budget 4096)"),
        "{message}"
    );
    // A budget on temporaries not counted in full (`count` mode, as here: zero
    // temporaries would pass any budget) is refused.
    let payload = std::panic::catch_unwind(|| assert_allocs!(m, temporaries <= 1)).unwrap_err();
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(
        message.contains("needs the tracer in sites mode"),
        "{message}"
    );
    let exact = Measured {
        temporaries: 1,
        temporaries_exact: true,
        ..m
    };
    assert_allocs!(exact, temporaries <= 1);
}

#[test]
fn nested_measures_each_see_their_own_peak() {
    let class = |size: usize| size_class_of(size, 8) as u64;
    let ((inner, held), outer) = measure(|| {
        let held = black_box(vec![1u8; 4096]);
        let ((), inner) = measure(|| {
            black_box(vec![2u8; 8192]);
        });
        (inner, held.len())
    });
    assert_eq!(held, 4096);
    assert_eq!(inner.peak_bytes, class(8192), "{inner:?}");
    assert_eq!(outer.peak_bytes, class(4096) + class(8192), "{outer:?}");
}
