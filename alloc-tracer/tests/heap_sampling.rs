//! Heap sampling's tables against blocks whose sizes and lifetimes the test knows:
//! exact when every byte is sampled (mean 1), and within four standard deviations of
//! the truth at the default mean of 1 MiB, with a fixed seed.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator, size_class_of};
use alloc_tracer_format::manifest::Manifest;
use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const SMALL: usize = 48;
const SMALL_N: usize = 1000;
const LARGE: usize = 4 << 20;
const LARGE_N: usize = 8;

/// The peak: small blocks, then large ones, each large one a new kept peak.
#[inline(never)]
#[allow(clippy::vec_box)] // one block per small allocation, on purpose
fn peak_blocks() -> (Vec<Box<[u8; SMALL]>>, Vec<Vec<u8>>) {
    let small: Vec<_> = (0..SMALL_N)
        .map(|_| black_box(Box::new([1u8; SMALL])))
        .collect();
    let large: Vec<_> = (0..LARGE_N).map(|_| black_box(vec![0u8; LARGE])).collect();
    (small, large)
}

/// What stays live to the report, less than the peak.
#[inline(never)]
fn end_blocks() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = (0..50).map(|_| black_box(vec![2u8; 1000])).collect();
    v.extend((0..2).map(|_| black_box(vec![3u8; 1 << 20])));
    v
}

/// Many blocks of mixed sizes, for the estimates at 1 MiB.
#[inline(never)]
fn mixed_blocks(sizes: &[usize]) -> Vec<Vec<u8>> {
    sizes.iter().map(|&s| black_box(vec![4u8; s])).collect()
}

/// Per size class, (sampled, bytes, blocks) of a heap table's rows at sites whose
/// frames name `function`.
fn heap_rows(dir: &Path, file: &str, function: &str) -> HashMap<u64, (u64, u64, u64)> {
    let functions = common::site_functions(dir);
    let mut out: HashMap<u64, (u64, u64, u64)> = HashMap::new();
    for r in common::read_table(dir, file) {
        let named = functions
            .get(&common::u64_of(&r, "site_id"))
            .is_some_and(|fs| fs.iter().any(|f| f.contains(function)));
        if named {
            let e = out
                .entry(common::u64_of(&r, "size_class_bytes"))
                .or_default();
            e.0 += common::u64_of(&r, "sampled_count");
            e.1 += common::u64_of(&r, "live_bytes_estimate");
            e.2 += common::u64_of(&r, "live_blocks_estimate");
        }
    }
    out
}

fn manifest(dir: &Path) -> Manifest {
    Manifest::from_json(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn heap_tables_match_known_blocks() {
    let root = common::scratch("heap_sampling");
    every_block_exactly(&root.join("mean1"));
    estimates_at_one_mib(&root.join("mean1mib"));
    cut_stacks_counted(&root.join("depth2"));
}

/// In `count` mode the heap tables hold the report's only stacks: those cut at the
/// depth limit are counted in the manifest like any site's.
fn cut_stacks_counted(dir: &Path) {
    Settings {
        mode: Mode::Count,
        heap_interval: Some(1),
        depth: 2,
        ..Default::default()
    }
    .apply();
    let end = end_blocks();
    alloc_tracer::write_report(dir).unwrap();
    drop(end);
    let m = manifest(dir);
    assert!(m.dropped.stacks_at_depth_limit > 0, "{:?}", m.dropped);
}

fn every_block_exactly(dir: &Path) {
    // `count` mode: heap sampling walks its own stacks.
    Settings {
        mode: Mode::Count,
        heap_interval: Some(1),
        ..Default::default()
    }
    .apply();
    let peak = {
        let _p = alloc_tracer::phase("peak");
        peak_blocks()
    };
    drop(peak);
    let end = end_blocks();
    alloc_tracer::write_report(dir).unwrap();
    drop(end);

    let m = manifest(dir);
    assert_eq!(m.heap_interval, 1);
    let kept = m.heap_peak.expect("a peak was kept");
    assert_eq!(kept.phase, "peak");
    let small_class = size_class_of(SMALL, 8) as u64;
    let large_class = size_class_of(LARGE, 1) as u64;
    let at_peak = heap_rows(dir, "heap_peak.parquet", "peak_blocks");
    assert_eq!(
        at_peak[&(small_class)],
        (SMALL_N as u64, SMALL_N as u64 * small_class, SMALL_N as u64)
    );
    // (The two vectors holding the blocks are live there too, in their classes.)
    assert_eq!(
        at_peak[&large_class],
        (LARGE_N as u64, LARGE_N as u64 * large_class, LARGE_N as u64)
    );
    assert!(kept.live_bytes >= (LARGE_N * LARGE + SMALL_N * SMALL) as i64);

    let at_end = heap_rows(dir, "heap_end.parquet", "end_blocks");
    let (c1000, c1mib) = (
        size_class_of(1000, 1) as u64,
        size_class_of(1 << 20, 1) as u64,
    );
    assert_eq!(at_end[&c1000], (50, 50 * c1000, 50));
    assert_eq!(at_end[&c1mib], (2, 2 * c1mib, 2));
    assert!(
        heap_rows(dir, "heap_end.parquet", "peak_blocks").is_empty(),
        "freed blocks are not live at the end"
    );
}

fn estimates_at_one_mib(dir: &Path) {
    Settings {
        mode: Mode::Count,
        heap_interval: Some(1 << 20),
        ..Default::default()
    }
    .apply();
    // Sizes from a fixed generator: 20,000 blocks of 16 B to 16 KiB, and ten of 3 MiB.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut sizes: Vec<usize> = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            16 + (x % (16 << 10)) as usize
        })
        .collect();
    sizes.extend([3 << 20; 10]);
    alloc_tracer::reseed_this_thread(42);
    let kept = mixed_blocks(&sizes);
    alloc_tracer::write_report(dir).unwrap();
    drop(kept);

    // The truth, and the estimator's standard deviation: each block of s real bytes
    // is sampled with p = 1 - (1 - 1/mean)^s and then stands for s/p bytes, so the
    // variance of the estimate is the sum of s^2 (1 - p) / p.
    let mean = (1u64 << 20) as f64;
    let (mut bytes, mut var_bytes, mut var_blocks) = (0f64, 0f64, 0f64);
    for &s in &sizes {
        let s = size_class_of(s, 1) as f64;
        let p = -(s * (-1.0 / mean).ln_1p()).exp_m1();
        bytes += s;
        var_bytes += s * s * (1.0 - p) / p;
        var_blocks += (1.0 - p) / p;
    }
    let got = heap_rows(dir, "heap_end.parquet", "mixed_blocks")
        .values()
        .fold((0, 0, 0), |a, v| (a.0 + v.0, a.1 + v.1, a.2 + v.2));
    let (sampled, est_bytes, est_blocks) = (got.0 as f64, got.1 as f64, got.2 as f64);
    let n = sizes.len() as f64;
    eprintln!(
        "sampled {sampled}; bytes {est_bytes} of {bytes} (sd {:.0}); blocks {est_blocks} of {n} (sd {:.0})",
        var_bytes.sqrt(),
        var_blocks.sqrt()
    );
    assert!(
        (est_bytes - bytes).abs() <= 4.0 * var_bytes.sqrt(),
        "bytes {est_bytes} vs {bytes}"
    );
    assert!(
        (est_blocks - n).abs() <= 4.0 * var_blocks.sqrt(),
        "blocks {est_blocks} vs {n}"
    );
    // The ten 3 MiB blocks are all but certain to be sampled (p > 0.95 each).
    assert!(sampled >= 10.0);
}
