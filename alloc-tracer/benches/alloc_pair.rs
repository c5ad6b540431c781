//! Nanoseconds per malloc+free pair (160 bytes, the size of bellpepper's first
//! LinearCombination term block): plain jemalloc against the tracer in each mode,
//! side by side in one process. Rounds interleave the configurations; the table shows
//! medians over rounds, on one thread and on two threads at once.
//!
//! Each configuration runs two ways. *Inlined*: the loop calls `Jemalloc`'s methods
//! or the tracer's entry points inlined into it, the layout a constant (what code in
//! the crate that declares the `#[global_allocator]` gets). *Called*: the loop calls
//! an out-of-line function taking the layout as two integers, as the compiler's
//! `__rust_alloc` and `__rust_dealloc` are, which is how every other crate reaches
//! the global allocator (bellperson, bellpepper, std: nearly every allocation of a
//! synthesis); for jemalloc that function is what the compiler generates for a
//! program whose global allocator is plain `Jemalloc`.
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

/// How the loop reaches the allocator (see the module documentation).
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Inlined,
    Called,
}

/// Defines an out-of-line allocation and free through `$allocator`, the code the
/// compiler generates as `__rust_alloc` and `__rust_dealloc` when `$allocator` is
/// the global allocator. Exported unmangled, like those, so that the compiler
/// cannot specialise them for the constant layout of their one caller.
macro_rules! called {
    ($alloc:ident, $dealloc:ident, $allocator:expr) => {
        /// # Safety
        /// `GlobalAlloc::alloc`'s contract for the layout `size`, `align`.
        #[unsafe(no_mangle)]
        #[inline(never)]
        pub unsafe fn $alloc(size: usize, align: usize) -> *mut u8 {
            // SAFETY: forwarded contract; the caller passes a valid layout.
            unsafe { $allocator.alloc(Layout::from_size_align_unchecked(size, align)) }
        }

        /// # Safety
        /// `GlobalAlloc::dealloc`'s contract for `ptr` and the layout `size`, `align`.
        #[unsafe(no_mangle)]
        #[inline(never)]
        pub unsafe fn $dealloc(ptr: *mut u8, size: usize, align: usize) {
            // SAFETY: forwarded contract.
            unsafe { $allocator.dealloc(ptr, Layout::from_size_align_unchecked(size, align)) }
        }
    };
}

called!(
    alloc_pair_jemalloc_alloc,
    alloc_pair_jemalloc_dealloc,
    Jemalloc
);
called!(alloc_pair_traced_alloc, alloc_pair_traced_dealloc, GLOBAL);

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
            name: "jemalloc",
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
fn pairs(direct: bool, path: Path, n: usize) {
    let (size, align) = (LAYOUT.size(), LAYOUT.align());
    for _ in 0..n {
        // SAFETY: non-zero size; freed right away with the same layout.
        unsafe {
            match (direct, path) {
                (true, Path::Inlined) => {
                    let p = Jemalloc.alloc(LAYOUT);
                    black_box(p);
                    Jemalloc.dealloc(p, LAYOUT);
                }
                (false, Path::Inlined) => {
                    let p = std::alloc::alloc(LAYOUT);
                    black_box(p);
                    std::alloc::dealloc(p, LAYOUT);
                }
                (true, Path::Called) => {
                    let p = alloc_pair_jemalloc_alloc(size, align);
                    black_box(p);
                    alloc_pair_jemalloc_dealloc(p, size, align);
                }
                (false, Path::Called) => {
                    let p = alloc_pair_traced_alloc(size, align);
                    black_box(p);
                    alloc_pair_traced_dealloc(p, size, align);
                }
            }
        }
    }
}

#[inline(never)]
fn nested(depth: usize, direct: bool, path: Path, n: usize) -> usize {
    if depth == 0 {
        pairs(direct, path, n);
        0
    } else {
        black_box(nested(black_box(depth - 1), direct, path, n)) + 1
    }
}

/// ns per pair on each of `threads` threads running at once.
fn measure(config: Config, path: Path, threads: usize, n: usize) -> f64 {
    if let Some(s) = config.settings {
        s.apply();
    }
    let direct = config.settings.is_none();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| nested(NESTING, direct, path, n));
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
    // `cargo bench` adds `--bench`; flags are ignored. `inlined` or `called` keeps
    // one way of reaching the allocator; another word is a configuration filter.
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--") && a.parse::<usize>().is_err())
        .collect();
    let paths: Vec<Path> = [(Path::Inlined, "inlined"), (Path::Called, "called")]
        .into_iter()
        .filter(|(_, w)| {
            !words.iter().any(|a| a == "inlined" || a == "called") || words.iter().any(|a| a == w)
        })
        .map(|(p, _)| p)
        .collect();
    let filter = words.iter().find(|a| *a != "inlined" && *a != "called");
    let configs: Vec<Config> = configs()
        .into_iter()
        .enumerate()
        .filter(|(i, c)| *i == 0 || filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())))
        .map(|(_, c)| c)
        .collect();
    println!("alloc_pair: {rounds} rounds x {n} pairs of 160 bytes per configuration and thread");
    let cases: Vec<(usize, Path)> = paths
        .iter()
        .flat_map(|&p| (0..configs.len()).map(move |i| (i, p)))
        .collect();
    for threads in [1, 2] {
        // Warm up thread states, site tables and jemalloc's caches.
        for &(i, p) in &cases {
            measure(configs[i], p, threads, n / 10);
        }
        let mut samples = vec![vec![]; cases.len()];
        for round in 0..rounds {
            // Rotate the order each round so that no case always runs first.
            for k in 0..cases.len() {
                let c = (k + round) % cases.len();
                let (i, p) = cases[c];
                samples[c].push(measure(configs[i], p, threads, n));
            }
        }
        // Added cost and ratio against jemalloc reached the same way and measured in
        // the same round, a few seconds apart: this machine's speed can change within
        // a run, and pairing by round keeps such a change out of the difference.
        let column = |path: usize, i: usize| {
            let (x, base) = (
                &samples[path * configs.len() + i],
                &samples[path * configs.len()],
            );
            let per_round = |f: fn(f64, f64) -> f64| {
                median(x.iter().zip(base).map(|(&x, &b)| f(x, b)).collect())
            };
            format!(
                "{:.1} | {:+.1} | {:.2}x",
                median(x.clone()),
                per_round(|x, b| x - b),
                per_round(|x, b| x / b)
            )
        };
        println!();
        println!(
            "{threads} thread(s): ns/pair (median), added and ratio (medians of per-round differences and ratios to jemalloc reached the same way)"
        );
        let mut header = String::from("| configuration |");
        for p in &paths {
            header += match p {
                Path::Inlined => " inlined | added | ratio |",
                Path::Called => " called | added | ratio |",
            };
        }
        println!("{header}");
        println!("|---|{}", "---:|".repeat(3 * paths.len()));
        for (i, c) in configs.iter().enumerate() {
            let row: Vec<String> = (0..paths.len()).map(|p| column(p, i)).collect();
            println!("| {} | {} |", c.name, row.join(" | "));
        }
        // Shared machines change speed within minutes; say so when jemalloc's own
        // pair moved by more than a fifth between rounds of this run.
        let (lo, hi) = samples[0]
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
