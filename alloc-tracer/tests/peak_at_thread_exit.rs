//! A peak made as threads exit: each worker holds back under 256 KiB of live bytes
//! (never published while it runs) and hands its blocks on as it exits, so the run's
//! peak is reached by the exiting threads' last publishes alone. The report keeps
//! that moment, with what heap sampling said was live then.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const WORKERS: usize = 64;
/// 160-byte blocks a worker makes: 200,000 bytes, under the 256 KiB a thread holds
/// back before it publishes.
const BLOCKS: usize = 1_250;

/// A worker's blocks, handed to whoever joins it.
#[allow(clippy::vec_box)] // each box is a block of its own, the subject here
#[inline(never)]
fn handed_on() -> Vec<Box<[u8; 160]>> {
    (0..BLOCKS).map(|_| Box::new([1u8; 160])).collect()
}

#[test]
fn a_peak_reached_as_threads_exit_is_kept() {
    Settings {
        mode: Mode::Count,
        heap_interval: Some(4096),
        lifetime_interval: 0,
        ..Default::default()
    }
    .apply();
    // All workers start, then each waits until every one has made its blocks, so
    // that none exits (publishing) before the others hold theirs.
    let ready = std::sync::Barrier::new(WORKERS);
    let kept: Vec<Vec<Box<[u8; 160]>>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                s.spawn(|| {
                    let blocks = handed_on();
                    ready.wait();
                    blocks
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let held = (WORKERS * BLOCKS * 160) as i64;

    let scratch = common::scratch("peak-at-exit");
    let dir = scratch.join("report");
    alloc_tracer::write_report(&dir).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let peak = &manifest["heap_peak"];
    let kept_bytes = peak["live_bytes"].as_i64().unwrap_or(0);
    // A peak is kept each time live bytes rise 1 MiB (or 1/128) above the last.
    assert!(
        kept_bytes > held - (1 << 20),
        "kept peak {kept_bytes} bytes, {held} held at once: {peak}"
    );
    // What heap sampling said was live then names the workers' function.
    let at_peak: u64 = common::sum_for_function_in(
        &dir,
        "heap_peak.parquet",
        "handed_on",
        "live_bytes_estimate",
    );
    assert!(
        at_peak as f64 > 0.8 * held as f64,
        "{at_peak} bytes of handed_on's at the kept peak, {held} held"
    );
    black_box(kept);
}
