//! Nanoseconds per malloc+free pair (160 bytes, the size of bellpepper's first
//! LinearCombination term block): plain jemalloc against the tracer in each mode,
//! side by side in one process. Rounds interleave the configurations; the table shows
//! medians over rounds, on one thread and on two threads at once.
//!
//! Each configuration runs two ways. *Inlined*: the loop calls `std::alloc::alloc`
//! and `dealloc`, the tracer's entry points inlined into it, the layout a constant
//! (what code compiled in the crate that declares the `#[global_allocator]` gets,
//! generic code instantiated there included); for jemalloc and the floor, their
//! methods inlined after what `std::alloc::alloc` adds to any allocator's
//! (`std_alloc_marker`). *Called*: the loop calls an out-of-line function
//! taking the layout as two integers, as the compiler's `__rust_alloc` and
//! `__rust_dealloc` are (what code compiled in other crates gets); for jemalloc that
//! function is what the compiler generates for a program whose global allocator is
//! plain `Jemalloc`. A synthesis mixes them: in `synth-driver`, 97 % of allocations
//! come through `__rust_alloc` (`RawVec`'s growth path) while nearly every free is
//! inlined into a `drop_in_place` instantiated in the driver's crate.
//!
//! `cargo bench -p alloc-tracer --bench alloc_pair [-- ROUNDS PAIRS [NAME] [inlined |
//! called]]`; NAME keeps the configurations whose name starts with it (plus the
//! jemalloc baseline), `inlined` or `called` one way only.

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;
use tikv_jemallocator::Jemalloc;

#[global_allocator]
static GLOBAL: TracingAllocator<Jemalloc> = TracingAllocator::new(Jemalloc);

const LAYOUT: Layout = match Layout::from_size_align(160, 8) {
    Ok(l) => l,
    Err(_) => panic!("valid layout"),
};

/// Frames below the measured loop, so that `sites` walks a full 48-frame stack.
const NESTING: usize = 60;

/// What a configuration allocates with.
#[derive(Clone, Copy)]
enum Allocator {
    Jemalloc,
    /// [`Floor`]: the reference point for `count`.
    Floor,
    /// The tracer (this binary's global allocator) with these settings.
    Traced(Settings),
}

#[derive(Clone, Copy)]
struct Config {
    name: &'static str,
    allocator: Allocator,
}

/// How the loop reaches the allocator (see the module documentation).
#[derive(Clone, Copy, PartialEq)]
enum Path {
    Inlined,
    Called,
}

/// The least an allocator that counts can do, for reference: per-thread counters of
/// allocations, frees and requested bytes and a count per jemalloc size class (the
/// "thread-local counters + size-class array" that counting allocators usually are), in
/// front of jemalloc, and nothing else: no phases, no live bytes, no re-entrancy
/// guard, no thread registry, a null return counted. What `count` adds over this is
/// the price of what it records beyond it.
struct Floor;

/// Atomics updated by a relaxed load and store, as the tracer's counters are (so
/// that a report can read them from another thread; and so that the compiler cannot
/// keep them in registers across a loop inlined around them).
struct FloorCounts {
    allocs: AtomicU64,
    frees: AtomicU64,
    bytes: AtomicU64,
    classes: [AtomicU64; 32],
}

thread_local! {
    static FLOOR: FloorCounts = const {
        FloorCounts {
            allocs: AtomicU64::new(0),
            frees: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            classes: [const { AtomicU64::new(0) }; 32],
        }
    };
}

/// jemalloc's small size classes up to 1 KiB (16-byte quantum).
const FLOOR_CLASSES: [usize; 21] = [
    8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896,
    1024,
];

/// Class index by `size.div_ceil(8)`, for sizes up to 1 KiB.
static FLOOR_CLASS_OF: [u8; 129] = {
    let mut t = [0u8; 129];
    let (mut i, mut c) = (0, 0);
    while i < t.len() {
        while FLOOR_CLASSES[c] < i * 8 {
            c += 1;
        }
        t[i] = c as u8;
        i += 1;
    }
    t
};

fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Relaxed).wrapping_add(by), Relaxed);
}

// SAFETY: forwards every call to jemalloc unchanged; counting touches only
// thread-local counters.
unsafe impl GlobalAlloc for Floor {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let size = layout.size();
        let class = match FLOOR_CLASS_OF.get(size.div_ceil(8)) {
            Some(&c) => c as usize,
            None => 31,
        };
        FLOOR.with(|f| {
            bump(&f.allocs, 1);
            bump(&f.bytes, size as u64);
            bump(&f.classes[class], 1);
        });
        // SAFETY: forwarded contract.
        unsafe { Jemalloc.alloc(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FLOOR.with(|f| bump(&f.frees, 1));
        // SAFETY: forwarded contract.
        unsafe { Jemalloc.dealloc(ptr, layout) }
    }
}

/// What `std::alloc::alloc` runs before the global allocator's `alloc`, whichever it
/// is: a call to an empty function (`__rust_no_alloc_shim_is_unstable_v2`, not
/// callable from stable code), here the same code under another name, so that the
/// inlined jemalloc and floor rows pay what a program whose global allocator they
/// were would pay. (Checked against such a program, plain `Jemalloc` as its global
/// allocator, fast state: 5.14 ns a pair through `std::alloc`, 5.15 ns with this call
/// and `Jemalloc`'s methods, 4.05 ns with the methods alone.)
#[inline(never)]
fn std_alloc_marker() {
    // SAFETY: an empty instruction sequence. (Not `pure`: the call must stay.)
    unsafe { std::arch::asm!("", options(nomem, nostack, preserves_flags)) }
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
called!(alloc_pair_floor_alloc, alloc_pair_floor_dealloc, Floor);
called!(alloc_pair_traced_alloc, alloc_pair_traced_dealloc, GLOBAL);

fn configs() -> Vec<Config> {
    let traced = |name, mode, depth, lifetime_interval| Config {
        name,
        allocator: Allocator::Traced(Settings {
            mode,
            depth,
            lifetime_interval,
            ..Default::default()
        }),
    };
    vec![
        Config {
            name: "jemalloc",
            allocator: Allocator::Jemalloc,
        },
        Config {
            name: "floor: thread-local counters + size-class array",
            allocator: Allocator::Floor,
        },
        traced("off", Mode::Off, 16, 0),
        traced("count", Mode::Count, 16, 0),
        traced("sample:1000", Mode::Sample(1000), 16, 0),
        traced("sites, depth 16, no lifetimes", Mode::Sites, 16, 0),
        traced("sites, depth 16, lifetimes 1/64", Mode::Sites, 16, 64),
        traced("sites, depth 48, no lifetimes", Mode::Sites, 48, 0),
        traced("sites, depth 48, lifetimes 1/64", Mode::Sites, 48, 64),
        traced("sites, depth 16, every block followed", Mode::Sites, 16, 1),
        Config {
            name: "sites, depth 16, every block heap-sampled",
            allocator: Allocator::Traced(Settings {
                mode: Mode::Sites,
                depth: 16,
                lifetime_interval: 0,
                heap_interval: Some(1),
                ..Default::default()
            }),
        },
    ]
}

/// One allocation and free of `LAYOUT` through `$alloc` and `$dealloc`.
macro_rules! pair {
    ($alloc:expr, $dealloc:expr) => {{
        let p = $alloc;
        black_box(p);
        $dealloc(p);
    }};
}

#[inline(never)]
fn pairs(allocator: Allocator, path: Path, n: usize) {
    let (size, align) = (LAYOUT.size(), LAYOUT.align());
    for _ in 0..n {
        // SAFETY: non-zero size; freed right away with the same layout.
        unsafe {
            match (allocator, path) {
                (Allocator::Jemalloc, Path::Inlined) => pair!(
                    {
                        std_alloc_marker();
                        Jemalloc.alloc(LAYOUT)
                    },
                    |p| Jemalloc.dealloc(p, LAYOUT)
                ),
                (Allocator::Floor, Path::Inlined) => pair!(
                    {
                        std_alloc_marker();
                        Floor.alloc(LAYOUT)
                    },
                    |p| Floor.dealloc(p, LAYOUT)
                ),
                (Allocator::Traced(_), Path::Inlined) => {
                    pair!(std::alloc::alloc(LAYOUT), |p| std::alloc::dealloc(
                        p, LAYOUT
                    ))
                }
                (Allocator::Jemalloc, Path::Called) => {
                    pair!(alloc_pair_jemalloc_alloc(size, align), |p| {
                        alloc_pair_jemalloc_dealloc(p, size, align)
                    })
                }
                (Allocator::Floor, Path::Called) => {
                    pair!(alloc_pair_floor_alloc(size, align), |p| {
                        alloc_pair_floor_dealloc(p, size, align)
                    })
                }
                (Allocator::Traced(_), Path::Called) => {
                    pair!(alloc_pair_traced_alloc(size, align), |p| {
                        alloc_pair_traced_dealloc(p, size, align)
                    })
                }
            }
        }
    }
}

#[inline(never)]
fn nested(depth: usize, allocator: Allocator, path: Path, n: usize) -> usize {
    if depth == 0 {
        pairs(allocator, path, n);
        0
    } else {
        black_box(nested(black_box(depth - 1), allocator, path, n)) + 1
    }
}

/// ns per pair on each of `threads` threads running at once.
fn measure(config: Config, path: Path, threads: usize, n: usize) -> f64 {
    if let Allocator::Traced(s) = config.allocator {
        s.apply();
    }
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| nested(NESTING, config.allocator, path, n));
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
        .filter(|(i, c)| {
            *i == 0
                || filter
                    .as_ref()
                    .is_none_or(|f| c.name.starts_with(f.as_str()))
        })
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
