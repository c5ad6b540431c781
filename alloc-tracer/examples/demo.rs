//! Traces a small workload with two phases and writes a report: the smallest complete
//! use of alloc-tracer in a program of your own.
//!
//! `cargo run --release -p alloc-tracer --example demo -- [REPORT_DIR]`

use alloc_tracer::{Mode, Session, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<alloc_tracer::Jemalloc> =
    TracingAllocator::new(alloc_tracer::Jemalloc);

/// Builds a list of short vectors: one long-lived Vec growing, many temporaries.
#[inline(never)]
fn build(n: usize) -> Vec<Vec<u64>> {
    let _phase = alloc_tracer::phase("build");
    let mut kept = Vec::new();
    for i in 0..n {
        let tmp: Vec<u64> = (0..(i % 7) as u64).collect();
        if i % 16 == 0 {
            kept.push(tmp);
        } else {
            black_box(tmp);
        }
    }
    kept
}

/// A buffer the program keeps to its end: live in the report (`analyzer leaks`).
#[inline(never)]
fn lookup_table() -> Vec<u64> {
    black_box((0..1 << 18).collect())
}

#[inline(never)]
fn combine(kept: &[Vec<u64>]) -> u64 {
    let _phase = alloc_tracer::phase("combine");
    kept.iter()
        .map(|v| {
            v.iter()
                .chain([1, 2, 3].iter())
                .copied()
                .collect::<Vec<u64>>()
        })
        .map(|v| v.iter().sum::<u64>())
        .sum()
}

fn main() -> Result<(), alloc_tracer::Error> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "demo-report".to_owned());
    Settings {
        mode: Mode::Sites,
        lifetime_interval: 8,
        // A small workload: sample its heap finely (the default is 1 MiB) and its
        // live bytes every millisecond, so that the memory tables have rows.
        heap_interval: Some(4096),
        timeline_ms: 1,
        ..Default::default()
    }
    .apply();
    let session = Session::new(&dir);
    let table = lookup_table();
    let kept = build(100_000);
    println!("checksum {}", combine(&kept) + table[7]);
    drop(kept);
    let summary = session.finish()?;
    drop(table);
    println!("{summary}");
    Ok(())
}
