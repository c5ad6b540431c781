//! Nanoseconds per malloc+free pair (160 bytes, the size of bellpepper's first
//! LinearCombination term block): plain jemalloc against the tracer in each mode,
//! side by side in one process. Rounds interleave the configurations; the table shows
//! medians over rounds, on one thread and on two threads at once.
//!
//! `cargo bench -p alloc-tracer --bench alloc_pair [-- ROUNDS PAIRS [NAME]]`; NAME
//! keeps the configurations whose name contains it (plus the jemalloc baseline).

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::time::Instant;
use tikv_jemallocator::Jemalloc;

#[global_allocator]
static GLOBAL: TracingAllocator<Jemalloc> = TracingAllocator::new(Jemalloc);

const LAYOUT: Layout = match Layout::from_size_align(160, 8) {
    Ok(l) => l,
    Err(_) => panic!("valid layout"),
};

/// Frames below the measured loop, so that `sites` walks a full 16-frame stack.
const NESTING: usize = 20;

#[derive(Clone, Copy)]
struct Config {
    name: &'static str,
    settings: Option<Settings>,
}

fn configs() -> Vec<Config> {
    let with = |mode, lifetime_interval| {
        Some(Settings {
            mode,
            depth: 16,
            lifetime_interval,
        })
    };
    vec![
        Config {
            name: "jemalloc (direct)",
            settings: None,
        },
        Config {
            name: "off",
            settings: with(Mode::Off, 0),
        },
        Config {
            name: "count",
            settings: with(Mode::Count, 0),
        },
        Config {
            name: "sample:1000",
            settings: with(Mode::Sample(1000), 0),
        },
        Config {
            name: "sites, depth 16, no lifetimes",
            settings: with(Mode::Sites, 0),
        },
        Config {
            name: "sites, depth 16, lifetimes 1/64",
            settings: with(Mode::Sites, 64),
        },
    ]
}

#[inline(never)]
fn pairs(direct: bool, n: usize) {
    for _ in 0..n {
        // SAFETY: non-zero size; freed right away with the same layout.
        unsafe {
            if direct {
                let p = Jemalloc.alloc(LAYOUT);
                black_box(p);
                Jemalloc.dealloc(p, LAYOUT);
            } else {
                let p = std::alloc::alloc(LAYOUT);
                black_box(p);
                std::alloc::dealloc(p, LAYOUT);
            }
        }
    }
}

#[inline(never)]
fn nested(depth: usize, direct: bool, n: usize) -> usize {
    if depth == 0 {
        pairs(direct, n);
        0
    } else {
        black_box(nested(black_box(depth - 1), direct, n)) + 1
    }
}

/// ns per pair on each of `threads` threads running at once.
fn measure(config: Config, threads: usize, n: usize) -> f64 {
    if let Some(s) = config.settings {
        s.apply();
    }
    let direct = config.settings.is_none();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| nested(NESTING, direct, n));
        }
    });
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    Settings::default().apply();
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(11);
    let n = args.get(1).copied().unwrap_or(2_000_000);
    // `cargo bench` adds `--bench`; flags are ignored.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--") && a.parse::<usize>().is_err());
    let configs: Vec<Config> = configs()
        .into_iter()
        .enumerate()
        .filter(|(i, c)| *i == 0 || filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())))
        .map(|(_, c)| c)
        .collect();
    println!("alloc_pair: {rounds} rounds x {n} pairs of 160 bytes per configuration and thread");
    for threads in [1, 2] {
        // Warm up thread states, site tables and jemalloc's caches.
        for &c in &configs {
            measure(c, threads, n / 10);
        }
        let mut samples = vec![vec![]; configs.len()];
        for round in 0..rounds {
            // Rotate the order each round so that no configuration always runs first.
            for k in 0..configs.len() {
                let i = (k + round) % configs.len();
                samples[i].push(measure(configs[i], threads, n));
            }
        }
        // Added cost and ratio against jemalloc measured in the same round, a few
        // seconds apart: this machine's speed can change within a run, and pairing
        // by round keeps such a change out of the difference.
        let base = &samples[0];
        let per_round = |i: usize, f: fn(f64, f64) -> f64| {
            median(
                samples[i]
                    .iter()
                    .zip(base)
                    .map(|(&x, &b)| f(x, b))
                    .collect(),
            )
        };
        println!();
        println!("{threads} thread(s)");
        println!(
            "| configuration | ns/pair (median) | added (median of per-round differences) | ratio (median of per-round ratios) |"
        );
        println!("|---|---:|---:|---:|");
        for (i, c) in configs.iter().enumerate() {
            println!(
                "| {} | {:.1} | {:+.1} | {:.2}x |",
                c.name,
                median(samples[i].clone()),
                per_round(i, |x, b| x - b),
                per_round(i, |x, b| x / b),
            );
        }
        // Shared machines change speed within minutes; say so when jemalloc's own
        // pair moved by more than a fifth between rounds of this run.
        let (lo, hi) = base
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        if hi > 1.2 * lo {
            println!(
                "note: jemalloc's pair took {lo:.1} to {hi:.1} ns across rounds: the machine's \
                 speed changed during this run; compare ratios, or rerun"
            );
        }
    }
}
