//! A small traced program for the setup check (`tests/frame_pointers.rs`): it
//! records its allocations in `sites` mode, from `main` and from a thread, writes a
//! report to the folder its one argument names and prints the summary. Built as the
//! workspace builds it (with frame pointers) its stacks reach `main` and the
//! threads' start; built without, the report must say they do not.
#![forbid(unsafe_code)]

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<std::alloc::System> = TracingAllocator::new(std::alloc::System);

/// Allocations through a few frames of the program's own, as real code makes them.
#[inline(never)]
fn build(depth: u32, n: usize) -> usize {
    if depth == 0 {
        let v: Vec<Vec<u64>> = (0..n).map(|i| vec![i as u64; 1 + i % 7]).collect();
        return black_box(v).iter().map(Vec::len).sum();
    }
    black_box(build(depth - 1, n)) + black_box(Box::new(depth)).as_ref().count_ones() as usize
}

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: frame-pointer-probe REPORT_DIR");
        std::process::exit(2);
    };
    alloc_tracer::set_allocator_name("system");
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    let mut total = build(4, 20_000);
    total += std::thread::spawn(|| build(6, 20_000)).join().unwrap_or(0);
    black_box(total);
    match alloc_tracer::write_report(std::path::Path::new(&dir)) {
        Ok(summary) => print!("{summary}"),
        Err(e) => {
            eprintln!("frame-pointer-probe: {e}");
            std::process::exit(1);
        }
    }
}
