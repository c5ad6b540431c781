//! What the tracer's API hands back (phases, report summaries, errors, `measure`'s
//! results) is the program's: counted when made and when the program frees it. Made
//! under the tracer's guard, its free counted a free of bytes never counted: a phase
//! with more frees than allocations, live bytes below zero in every later report.
//! And `measure` inside `untraced`, which counts nothing, panics rather than pass a
//! budget with zeros; a report says when its stacks were recorded under two
//! weights. One test: the mode and the phases are process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator, measure, untraced};
use std::hint::black_box;
use test_scratch::Scratch;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// `n` blocks of 100 bytes kept at once, then freed, and the vector holding them.
#[inline(never)]
fn blocks(n: usize) {
    let kept: Vec<Vec<u8>> = (0..n).map(|_| Vec::with_capacity(100)).collect();
    black_box(&kept);
}

#[test]
fn the_apis_values_are_counted_as_made_and_freed() {
    // Settings applied one after the other, with nothing allocated between, mix no
    // weights (checked with the first report below).
    common::wait_until_quiet();
    for mode in [Mode::Sample(10), Mode::Sites] {
        Settings {
            mode,
            ..Settings::current()
        }
        .apply();
    }
    let scratch = Scratch::new("alloc-tracer-api-values");
    let not_a_folder = scratch.join("a-file");
    std::fs::write(&not_a_folder, b"mine").unwrap();
    {
        let _phase = alloc_tracer::phase("api");
        for _ in 0..50 {
            black_box(alloc_tracer::phases());
            let ((), m) = measure(|| blocks(10));
            assert_eq!(m.allocs, 11);
            black_box(alloc_tracer::last_top_sites());
        }
        for i in 0..3 {
            let summary = alloc_tracer::write_report(&scratch.join(format!("r{i}"))).unwrap();
            assert!(summary.allocs > 0);
        }
        let refused = alloc_tracer::check_report_dir(&not_a_folder).unwrap_err();
        assert!(
            refused.to_string().contains("not replacing it"),
            "{refused}"
        );
        let session = alloc_tracer::Session::new(scratch.join("session"));
        blocks(5);
        black_box(session.finish().unwrap());
    }
    let id = alloc_tracer::phases()
        .iter()
        .position(|p| p.name == "api")
        .unwrap();
    let p = alloc_tracer::counts().phases[id];
    // Everything made in the phase was freed in it, the API's values among them.
    assert!(p.allocs >= 50 * 11 + 6, "{p:?}");
    assert_eq!(p.frees, p.allocs, "{p:?}");
    assert_eq!(p.bytes_freed, p.bytes_allocated, "{p:?}");
    // A report written after says so too.
    let last = alloc_tracer::write_report(&scratch.join("last")).unwrap();
    assert!(last.allocs > 0);
    let manifest = std::fs::read_to_string(scratch.join("last/manifest.json")).unwrap();
    let live_end = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"live_bytes_end\": "))
        .unwrap();
    assert!(!live_end.starts_with('-'), "live_bytes_end {live_end}");
    // Stacks recorded in one mode so far; then under another weight: the report
    // says its sites' weights are mixed.
    assert!(
        manifest.contains("\"stack_weights_changed\": false"),
        "{manifest}"
    );
    Settings {
        mode: Mode::Sample(10),
        ..Settings::current()
    }
    .apply();
    blocks(100);
    alloc_tracer::write_report(&scratch.join("mixed")).unwrap();
    let mixed = std::fs::read_to_string(scratch.join("mixed/manifest.json")).unwrap();
    assert!(mixed.contains("\"stack_weights_changed\": true"), "{mixed}");
    // Heap sampling off so far (`Settings::current()` of the tracer off); turned
    // on, at one interval, then at another.
    assert!(
        mixed.contains("\"heap_intervals_changed\": false")
            && mixed.contains("\"heap_sampling_started_late\": false"),
        "{mixed}"
    );
    // 2 MiB held from before heap sampling comes on: left out of its tables.
    let held_before = vec![1u8; 2 << 20];
    for interval in [1 << 16, 4096] {
        Settings {
            heap_interval: Some(interval),
            ..Settings::current()
        }
        .apply();
        blocks(100);
    }
    alloc_tracer::write_report(&scratch.join("heap")).unwrap();
    let heap = std::fs::read_to_string(scratch.join("heap/manifest.json")).unwrap();
    assert!(heap.contains("\"heap_intervals_changed\": true"), "{heap}");
    // And it came on while the program held that much allocated without it.
    assert!(
        heap.contains("\"heap_sampling_started_late\": true"),
        "{heap}"
    );
    black_box(held_before);

    let inside = std::panic::catch_unwind(|| untraced(|| measure(|| blocks(10))));
    let message = *inside.unwrap_err().downcast::<String>().unwrap();
    assert!(
        message.contains("inside alloc_tracer::untraced"),
        "{message}"
    );
}
