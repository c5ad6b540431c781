//! An exact, cheap allocation tracer: a [`GlobalAlloc`](std::alloc::GlobalAlloc)
//! wrapper, normally over tikv-jemallocator, that counts every allocation a Rust
//! program makes through its global allocator, attributes it to its call stack, and
//! writes a parquet report.
//!
//! # Why
//!
//! Allocation-heavy, multithreaded Rust (zk-SNARK circuit synthesis makes hundreds
//! of millions of 160-byte, short-lived blocks) needs to know *which call sites*
//! allocate, how often, in which size classes and for how long, on machines where
//! `perf` has no hardware counters. Existing tools either cannot see
//! tikv-jemallocator's prefixed symbols (heaptrack, Valgrind DHAT), serialize every
//! allocation behind one lock and unwind with DWARF (dhat-rs), or sample by bytes and
//! miss small blocks (jemalloc's profiler). This crate keeps per-thread counters, walks
//! frame pointers (a load or two a frame, no unwind tables) and symbolizes once per
//! address at the end.
//!
//! # Setup
//!
//! ```no_run
//! #[global_allocator]
//! static GLOBAL: alloc_tracer::TracingAllocator<alloc_tracer::Jemalloc> =
//!     alloc_tracer::TracingAllocator::new(alloc_tracer::Jemalloc);
//!
//! fn main() {
//!     alloc_tracer::Settings { mode: alloc_tracer::Mode::Sites, ..Default::default() }.apply();
//!     let session = alloc_tracer::Session::new("alloc-report");
//!     {
//!         let _p = alloc_tracer::phase("synthesize");
//!         // ... work ...
//!     }
//!     session.finish().expect("report written");
//! }
//! ```
//!
//! Settings applied in code replace the `ALLOC_TRACE_*` variables; `Settings { mode,
//! ..Settings::from_env()? }` keeps the environment's for the fields not set. An
//! invalid variable is named on standard error at the first allocation; a program
//! that reads the variables itself (as defaults of its own flags, say) and names
//! their errors can call [`env_checked_by_program`] before that.
//!
//! Build with frame pointers and line tables, so that stacks are complete and
//! inlined frames are named: in the `.cargo/config.toml` of the folder cargo runs
//! from (a workspace's root),
//! `[build] rustflags = ["-C", "force-frame-pointers=yes"]`, and in its `Cargo.toml`,
//! `[profile.release] debug = "line-tables-only"` (as this workspace does). Without
//! frame pointers stacks stop early or are empty, and reports say so.
//!
//! # Modes
//!
//! Chosen with [`Settings::apply`] or, at the first allocation, from the environment:
//!
//! | `ALLOC_TRACE` | records | cost |
//! |---|---|---|
//! | `off` (default) | nothing: pure pass-through | one load and one test per call |
//! | `count` | totals per phase, size-class and requested-size histograms, live and peak bytes | a few thread-local counter updates per call, no stack |
//! | `sites` | `count` + temporaries + every allocation's call stack | a check of the guessed site's kept stack against the stack per allocation (two loads a frame); a frame-pointer walk of the frames that changed and a hash when the guess fails |
//! | `sample:N` | `count` + one allocation in N (geometric intervals) with its stack, and temporaries among those | `count`'s, plus a countdown; one walk in N |
//!
//! What each mode costs per malloc+free pair, in nanoseconds and instructions, and
//! on a whole synthesis, is measured in BENCHMARKS.md (with the commands that
//! measure it). Memory: every thread that allocates while recording gets a state of
//! about 210 KiB (counters for 16 phases, one per request size up to 1 KiB), plus a
//! site table in `sites` and `sample` modes (72 bytes a slot, two to four slots a
//! site, and as many again in the tables it replaced until it can free them; each
//! distinct stack's frames are kept once for every thread's table), and in `sites`
//! mode kept walks for the guess, sized to the thread's table and its deepest walk:
//! at most 240 KiB for a thread that met under 128 sites, at most 1.7 MiB at the
//! default depth (2.2 MiB at depth 62).
//!
//! `ALLOC_TRACE_DEPTH` (default 48, at most 62) bounds stacks; `ALLOC_TRACE_LIFETIMES`
//! (default 64) follows one block in N to its free in `sites` mode; `sample:N` follows
//! its sampled blocks. `ALLOC_TRACE_HEAP=BYTES` (default `1MiB` in `sites` and
//! `sample:N`, off in `count` unless set; `0` turns it off) samples blocks by bytes
//! for the live-heap tables: which sites hold the memory at the peak and at the end.
//! `ALLOC_TRACE_TIMELINE_MS` (default 10, `0` none) samples live bytes over time, from
//! a thread of the tracer's own. Where `ALLOC_TRACE` chooses a mode other than
//! `off`, the first allocation starts that thread at the environment's interval, before any
//! [`Settings::apply`] can say otherwise, so `0` there is the way to have none;
//! settings applied in code start it at their own `timeline_ms` (`Default`'s is 10),
//! so a program that chooses the mode in code and must stay single-threaded sets
//! `timeline_ms: 0` or keeps the environment's with `..Settings::from_env()`.
//! `ALLOC_TRACE_REPORT=DIR` writes a report at normal process exit, whether the mode
//! came from `ALLOC_TRACE` or from [`Settings::apply`] (if tracing never came on, it
//! writes none and says so on standard error, unless `ALLOC_TRACE` chose `off`; an
//! empty `ALLOC_TRACE_REPORT` writes none and says so). An `ALLOC_TRACE_*` variable
//! the tracer does not read (`ALLOC_TRACE_REPROT`) is named on standard error at the
//! first allocation, and a run that `ALLOC_TRACE` traced while nothing asked for a
//! report or read its counts (no `ALLOC_TRACE_REPORT`, [`Session`], [`write_report`],
//! [`measure`], [`counts`] or [`phases`]) says so at exit.
//!
//! # What is exact and what is estimated
//!
//! * Exact: allocation, free and realloc counts, requested and size-class bytes per
//!   phase and size class; in `sites` mode, temporaries per phase, and allocations,
//!   reallocs, bytes and temporaries per call stack. A *temporary* is a block freed
//!   before its thread's next allocation (exact, from a one-entry per-thread record).
//! * `count` and `sample:N` record a small request (8 to 1024 bytes, aligned to at
//!   most 8) before handing it to jemalloc by a tail call, and do nothing after it
//!   returns (no frame, no saved register: measurably cheaper, BENCHMARKS.md),
//!   but for the one allocation in N whose stack `sample:N` samples. So they keep no
//!   record of the latest block: `count` does not count temporaries (its
//!   `temporary_count` is 0) and `sample:N` counts them among its sampled blocks
//!   (on the cold path their frees take as followed blocks, so that other frees
//!   pay nothing for it; each counts for N, like the per-site figures). And a small request the
//!   inner allocator refuses (jemalloc does only when the process is out of memory,
//!   and Rust's infallible allocations then abort) stays counted, as an allocation
//!   never freed; `sites` and sampled allocations take a refused request's record
//!   back.
//! * Estimated: in `sample:N` mode, per-site figures are sampled counts x N (unbiased:
//!   each allocation is sampled independently with probability 1/N), each weighted
//!   when recorded, so that a run switched between modes or intervals keeps each
//!   part's weight. Lifetimes, frees
//!   and live bytes per site come from followed blocks (one in `ALLOC_TRACE_LIFETIMES`,
//!   or the sampled ones), since following every block would cost a map update per
//!   allocation and per free. Global peak
//!   live bytes is exact to within 256 KiB for each thread recording at once (each
//!   thread publishes its net live bytes whenever they drift that far, and all of
//!   them when it exits).
//! * Heap sampling samples each allocated byte with probability 1/`ALLOC_TRACE_HEAP`,
//!   as jemalloc's and tcmalloc's heap profilers do: a block of `s` bytes with
//!   probability `p = 1 - (1 - 1/interval)^s`, weighted `s/p` bytes and `1/p` blocks
//!   (unbiased; exact with an interval of 1). Whenever live bytes rise 1/128 (and at
//!   least 1 MiB) above the last kept peak, what the sampled blocks say is live is
//!   kept: the kept peak is below the true one by less than 0.8 % of it or 1 MiB,
//!   whichever is larger.
//! * Size classes are jemalloc's, computed with the same arithmetic (checked against
//!   `nallocx`), without adding headers to blocks.
//!
//! # Reports
//!
//! A directory with `manifest.json` and parquet tables (`sites`, `frames`,
//! `size_classes`, `requested_sizes`, `phases`, `lifetimes`, `heap_peak`, `heap_end`,
//! `timeline`), written atomically; the
//! schema is documented in `docs/report-schema.md` and versioned
//! ([`SCHEMA_VERSION`]). The tracer cannot tell one inner allocator from another;
//! [`set_allocator_name`] names it in the manifest and the summary. Reports are written by [`Session::finish`], when a
//! [`Session`] drops (also when a panic unwinds through it, marked incomplete, and
//! at exit for one never dropped: `std::process::exit`; none when tracing never
//! came on, which it says), by [`write_report`], and
//! at normal process exit (including `std::process::exit` and a panic that ends
//! `main`) when `ALLOC_TRACE_REPORT` is set (unless the program's latest report
//! went to that same folder and it allocated little since (under 1 % more, or 1,000
//! allocations), as in printing its summary: no second copy; after more work than that, a report of the whole
//! run replaces it; a relative path is taken from the
//! working directory at the first allocation). A report written at exit with a
//! status other than 0 is marked incomplete (`exit status N`; glibc only, whose
//! `on_exit` passes the status); a program that may refuse its command line holds
//! that report back until its run starts ([`hold_exit_report`]). Threads that have
//! exited were merged into global tables; live threads (rayon workers) are read in place. Nothing is
//! written on `panic = "abort"` or a fatal signal; [`write_incomplete_report`] marks a
//! report of a run stopped early (synth-driver writes one on SIGINT, SIGTERM and SIGHUP).
//!
//! A report path may hold `%p` (the process id) and `%t` (when the tracer started,
//! Unix seconds: the process's first allocation), so that processes sharing one
//! setting write apart. A report replaces only an empty folder or one that is a
//! report of this tracer's and holds nothing else; writers of one folder take turns. What else holds inside any program (fork, foreign
//! stacks, bounded memory) and what does not is in `docs/guarantees.md`.
//!
//! # Limits
//!
//! * Linux only. Stacks are walked on x86_64 and aarch64 only; frames compiled
//!   without frame pointers are skipped or end the walk.
//! * Phases are process-wide (one current phase for all threads); at most 15 names,
//!   `main` among them (14 of the program's own; later ones count as `(other phases)`).
//! * Only one `TracingAllocator` should be the global allocator; all state is static.

#![warn(missing_docs)]

mod allocator;
mod config;
mod door;
mod ended;
mod error;
mod fast_hash;
mod fork;
mod handed;
mod heap;
mod hot;
mod labels;
mod lifetimes;
mod lineage;
mod measure;
mod phase;
mod registry;
mod report;
mod rss;
mod session;
mod site_index;
mod site_map;
mod start;
mod stripe;
mod symbolize;
mod timeline;
mod unseen_frees;
mod weights;

pub use allocator::TracingAllocator;
pub use config::{
    DEFAULT_DEPTH, DEFAULT_HEAP_INTERVAL, DEFAULT_LIFETIME_INTERVAL, DEFAULT_TIMELINE_MS,
    MAX_DEPTH, Mode, Settings, parse_bytes,
};
pub use error::Error;
pub use hot::size_class::{NUM_CLASSES, class_bytes};
pub use labels::label;
pub use measure::{Measured, last_top_sites, measure, measure_process};
pub use phase::{
    PauseGuard, PhaseGuard, PhaseId, PhaseTime, QuickPhaseGuard, pause, phase, phase_id,
};
pub use registry::{Counts, PhaseTotals};
#[doc(hidden)]
pub use report::directory::without_rename_flags;
pub use report::manifest::set_allocator_name;
pub use report::schema::{self, SCHEMA_VERSION};
pub use report::{ReportSummary, SUMMARY_SITES, TopSite};
pub use session::{
    Session, check_report_dir, expand_path, hold_exit_report, write_incomplete_report, write_report,
};
pub use start::env_checked_by_program;
/// tikv-jemallocator's allocator, the usual inner allocator (feature `jemalloc`, on by
/// default).
#[cfg(feature = "jemalloc")]
pub use tikv_jemallocator::Jemalloc;

/// Every counter so far, summed over live and exited threads. Allocation-free for
/// the caller (the tracer's own work runs under its re-entrancy guard); the value
/// is about 35 KiB, returned on the stack.
pub fn counts() -> Counts {
    session::answered_elsewhere();
    hot::thread::guarded(registry::counts)
}

/// Every phase so far, indexed by phase id (id 0 is `"main"`, in force outside any
/// phase guard); a phase's open entries count up to now.
pub fn phases() -> Vec<PhaseTime> {
    session::answered_elsewhere();
    handed::handed_out(phase::phases())
}

/// The bytes of the block jemalloc serves for a `size`/`align` request through
/// tikv-jemallocator: what `nallocx` says, computed without calling it (the tracer's
/// *block bytes*). Up to 14336 bytes that is a size class's size; above, the request
/// rounded up to whole pages, not necessarily any [`class_bytes`].
pub fn size_class_of(size: usize, align: usize) -> usize {
    hot::size_class::usable(hot::size_class::index_of(size, align), size)
}

/// Runs `f` with recording of this thread's allocations suppressed, as the tracer's
/// own (reports count them in the manifest's `tracer.alloc_count`, not in the
/// tables); for test and benchmark harnesses that must not disturb the counts. Its
/// frees are not recorded either: a block allocated outside `f` and freed inside
/// stays live in the report's live bytes, peak and heap tables (and the free of one
/// allocated inside and freed outside counts against bytes never counted), so make
/// and free each block on one side.
pub fn untraced<R>(f: impl FnOnce() -> R) -> R {
    hot::thread::guarded(f)
}

/// Reseeds this thread's sampling generator and redraws its countdowns, so that
/// which of its next allocations (`sample:N`, lifetimes) and bytes (heap sampling)
/// are sampled is reproducible. For tests of the estimates.
#[doc(hidden)]
pub fn reseed_this_thread(seed: u64) {
    // Makes this thread's state if it has none yet.
    drop(std::hint::black_box(Box::new(0u64)));
    if let Some(st) = hot::thread::current().recording_state() {
        // Distinct seeds, distinct streams (`seed | 1` made 2k and 2k + 1 one): an
        // odd multiplier is one to one; the generator's state must not be 0.
        let state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
        st.rng.set(if state == 0 { 1 } else { state });
        hot::countdown::redraw(st);
    }
}

/// True on a thread that is forking, after the tracer's fork handler took its
/// locks and before the fork: for tests of the order in which the handlers of the
/// tracer and of its inner allocator run.
#[doc(hidden)]
pub fn fork_prepared() -> bool {
    fork::prepared()
}

/// Runs `f` while holding the lock that thread exit, table flushes and reports take.
/// For tests that check the recording path never waits on it.
#[doc(hidden)]
pub fn with_registry_locked<R>(f: impl FnOnce() -> R) -> R {
    hot::thread::guarded(|| {
        registry::with_locked(|| {
            // `f` is the caller's code: its allocations are the program's.
            let was = hot::thread::with_local(|l| l.replace_guard(false));
            let r = f();
            hot::thread::with_local(|l| l.set_guard(was));
            r
        })
    })
}
