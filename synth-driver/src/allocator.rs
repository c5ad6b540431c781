//! The driver's global allocator: the tracer over [`Dispatch`], an inner allocator
//! (jemalloc, the system allocator or mimalloc) chosen by `--allocator` at start, so
//! that one binary shows whether the allocator itself is the lever.
//!
//! # How the choice is made before the first allocation
//!
//! A block must be freed by the allocator that made it, so the choice may not change
//! once anything is allocated, and the command line cannot be parsed (that
//! allocates) before the first allocation. So it is read twice:
//!
//! * [`read_argv`] runs from `.init_array`, with std's own hook that records
//!   `argc`/`argv`, before `main` and before Rust code allocates; it scans the raw C
//!   strings for `--allocator NAME` or `--allocator=NAME` without allocating and
//!   records what it found.
//! * The first call into [`Dispatch`] fixes the choice: what `read_argv` recorded, or
//!   jemalloc. Every later call, on any thread, reads the fixed choice, and nothing
//!   ever changes it, so every block goes back to the allocator that made it.
//!
//! clap then parses the same arguments, and [`confirm`] checks that the allocator
//! fixed at start is the one the parsed command line asks for (they differ only if
//! something allocated before `read_argv` ran, or a scan of raw arguments read
//! `--allocator` where clap reads a value of another flag), refusing the run rather
//! than running it on an allocator the user did not ask for. The hook needs glibc,
//! which passes `argc`, `argv` and `envp` to `.init_array` functions (std relies on
//! the same); elsewhere the driver runs on jemalloc and refuses another
//! `--allocator`.
//!
//! The choice costs one load of a never-written-again byte and a well-predicted
//! branch per call, and no stack frame (see `dispatch!`); the system allocator
//! also one jump. So the allocators' timings compare fairly.
//!
//! # Builds
//!
//! The default build wraps [`Dispatch`] in the tracer. Cargo features, off by
//! default, build the baselines `scripts/bench-peers.sh` compares the tracer with:
//! `untraced` makes [`Dispatch`] itself the global allocator (no tracer around it:
//! `--trace` and `--report` are refused); `jemalloc-prof` is `untraced` over a
//! jemalloc built with its own heap profiler, which `_RJEM_MALLOC_CONF=prof:true`
//! turns on at run time; and `dhat-heap` makes dhat-rs's allocator (over the system
//! allocator) the global one and writes `dhat-heap.json` in the working directory at
//! exit.

use anyhow::{Result, bail};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(all(feature = "untraced", feature = "dhat-heap"))]
compile_error!("features `untraced` and `dhat-heap` each choose the global allocator: pick one");

#[cfg(not(any(feature = "untraced", feature = "dhat-heap")))]
#[global_allocator]
static GLOBAL: alloc_tracer::TracingAllocator<Dispatch> =
    alloc_tracer::TracingAllocator::new(Dispatch);

#[cfg(feature = "untraced")]
#[global_allocator]
static GLOBAL: Dispatch = Dispatch;

#[cfg(feature = "dhat-heap")]
#[global_allocator]
static GLOBAL: dhat::Alloc = dhat::Alloc;

/// Which global allocator this build has, as the output names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// The tracer over [`Dispatch`] (the default).
    Traced,
    /// [`Dispatch`] alone (feature `untraced`).
    Untraced,
    /// dhat-rs over the system allocator (feature `dhat-heap`).
    Dhat,
}

/// This build's global allocator.
pub const BUILD: Build = if cfg!(feature = "dhat-heap") {
    Build::Dhat
} else if cfg!(feature = "untraced") {
    Build::Untraced
} else {
    Build::Traced
};

/// The inner allocators `--allocator` chooses from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Inner {
    /// tikv-jemallocator (the default).
    Jemalloc,
    /// `std::alloc::System`: glibc's malloc.
    System,
    /// mimalloc.
    Mimalloc,
}

impl Inner {
    /// The name the command line, the output and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Inner::Jemalloc => "jemalloc",
            Inner::System => "system",
            Inner::Mimalloc => "mimalloc",
        }
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn from_code(code: u8) -> Option<Inner> {
        [Inner::Jemalloc, Inner::System, Inner::Mimalloc]
            .into_iter()
            .find(|i| i.code() == code)
    }

    /// The allocator named by a raw argument, if any.
    fn from_arg(arg: &[u8]) -> Option<Inner> {
        [Inner::Jemalloc, Inner::System, Inner::Mimalloc]
            .into_iter()
            .find(|i| i.name().as_bytes() == arg)
    }
}

/// No choice fixed yet (no allocation yet).
const UNDECIDED: u8 = 0;

/// What [`read_argv`] found on the command line (`UNDECIDED`: nothing).
static REQUESTED: AtomicU8 = AtomicU8::new(UNDECIDED);
/// The allocator every call goes to, fixed by the first call.
static CHOSEN: AtomicU8 = AtomicU8::new(UNDECIDED);

/// The inner allocator, fixed at the first call.
fn chosen() -> Inner {
    fixed().unwrap_or_else(fix_choice)
}

/// The inner allocator, if the first call has fixed it.
#[inline(always)]
fn fixed() -> Option<Inner> {
    Inner::from_code(CHOSEN.load(Ordering::Relaxed))
}

/// Fixes the choice to what the command line asked for, or jemalloc. Several
/// threads cannot race here before `main` starts any, but a compare-exchange makes
/// the first one win anyway.
#[cold]
#[inline(never)]
fn fix_choice() -> Inner {
    let wanted = Inner::from_code(REQUESTED.load(Ordering::Relaxed))
        .unwrap_or(Inner::Jemalloc)
        .code();
    let code =
        match CHOSEN.compare_exchange(UNDECIDED, wanted, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => wanted,
            Err(fixed) => fixed,
        };
    Inner::from_code(code).unwrap_or(Inner::Jemalloc)
}

/// The inner allocator in use (fixing it now if nothing has allocated yet).
pub fn in_use() -> Inner {
    chosen()
}

/// Refuses a run whose global allocator is not the one the command line asks for
/// (`None`: none asked for). The allocator named in the output is then always the
/// one that served the run.
pub fn confirm(asked: Option<Inner>) -> Result<()> {
    match (BUILD, asked) {
        (Build::Dhat, None | Some(Inner::System)) => return Ok(()),
        (Build::Dhat, Some(other)) => bail!(
            "--allocator {}: this build allocates through dhat-rs over the system allocator (feature dhat-heap)",
            other.name()
        ),
        _ => {}
    }
    let asked = asked.unwrap_or(Inner::Jemalloc);
    let fixed = in_use();
    if fixed != asked {
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            bail!(
                "the allocator fixed at start is {}, not --allocator {}: give --allocator once, as its own argument or --allocator=NAME",
                fixed.name(),
                asked.name()
            );
        }
        bail!("--allocator is read before main with glibc only; this build runs on jemalloc");
    }
    Ok(())
}

/// The global allocator's name for the output and the report's manifest.
pub fn name() -> &'static str {
    match BUILD {
        Build::Dhat => "dhat-rs (system)",
        Build::Traced | Build::Untraced => in_use().name(),
    }
}

/// Calls `$method` of the chosen inner allocator. Every arm is sound for the same
/// reason: the caller upholds `$method`'s contract, and a block reaches the
/// allocator that made it, since the choice never changes once made.
///
/// Only jemalloc's and mimalloc's methods are inlined, because each ends in a tail
/// call and needs no stack frame. The system allocator's aligned path keeps
/// `posix_memalign`'s result on the stack, and the first call must call
/// [`fix_choice`] before it calls the allocator. Either, inlined, would make every
/// call set up a frame first, whichever allocator serves it. That is two frames an
/// allocation when the tracer records it (its entry point, then this
/// allocator, out of line). So those two paths are out of line (`out_of_line!`).
macro_rules! dispatch {
    ($method:ident($($arg:expr),*)) => {
        match fixed() {
            Some(Inner::Jemalloc) => {
                // SAFETY: see the macro's documentation.
                unsafe { tikv_jemallocator::Jemalloc.$method($($arg),*) }
            }
            Some(Inner::Mimalloc) => {
                // SAFETY: see the macro's documentation.
                unsafe { mimalloc::MiMalloc.$method($($arg),*) }
            }
            Some(Inner::System) => {
                // SAFETY: see the macro's documentation.
                unsafe { system_calls::$method($($arg),*) }
            }
            None => {
                // SAFETY: the caller's contract; `first_calls` fixes the choice
                // before it calls `Dispatch` again, which then takes an arm above.
                unsafe { first_calls::$method($($arg),*) }
            }
        }
    };
}

/// For each `GlobalAlloc` method, the system allocator's out of line, and the
/// first call's (see `dispatch!`). Plain functions, not closures: their
/// arguments stay in registers and each is reached by a tail call.
macro_rules! out_of_line {
    ($($method:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*) => {
        #[cfg_attr(feature = "dhat-heap", allow(dead_code))]
        mod system_calls {
            use super::*;
            $(
                /// `System`'s method.
                ///
                /// # Safety
                /// The method's `GlobalAlloc` contract.
                #[inline(never)]
                pub(super) unsafe fn $method($($arg: $ty),*) $(-> $ret)? {
                    // SAFETY: forwarded contract.
                    unsafe { System.$method($($arg),*) }
                }
            )*
        }
        #[cfg_attr(feature = "dhat-heap", allow(dead_code))]
        mod first_calls {
            use super::*;
            $(
                /// Fixes the choice, then makes the call.
                ///
                /// # Safety
                /// The method's `GlobalAlloc` contract.
                #[cold]
                #[inline(never)]
                pub(super) unsafe fn $method($($arg: $ty),*) $(-> $ret)? {
                    fix_choice();
                    // SAFETY: forwarded contract.
                    unsafe { Dispatch.$method($($arg),*) }
                }
            )*
        }
    };
}

out_of_line! {
    alloc(layout: Layout) -> *mut u8;
    alloc_zeroed(layout: Layout) -> *mut u8;
    dealloc(ptr: *mut u8, layout: Layout);
    realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8;
}

/// A `GlobalAlloc` that forwards every call to the inner allocator chosen at start
/// (see the module documentation).
#[cfg_attr(feature = "dhat-heap", allow(dead_code))]
pub struct Dispatch;

// SAFETY: every call goes, unchanged, to one of three sound allocators, the same
// one for the whole process (the choice is fixed at the first call and never
// changes), so a block is always resized and freed by the allocator that made it.
unsafe impl GlobalAlloc for Dispatch {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        dispatch!(alloc(layout))
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        dispatch!(alloc_zeroed(layout))
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        dispatch!(dealloc(ptr, layout))
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        dispatch!(realloc(ptr, layout, new_size))
    }
}

/// The allocator a raw argument list asks for: the value of the last
/// `--allocator NAME` or `--allocator=NAME` before a `--`; `None` when there is none
/// or its value names no allocator (clap then refuses the value). Where clap takes
/// the flag twice (once before the subcommand and once after) it too keeps the
/// last; twice on one side it refuses the command line, so the choice made here
/// never runs.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn scan<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Option<Inner> {
    let mut args = args.into_iter();
    let mut found = None;
    while let Some(arg) = args.next() {
        if arg == b"--" {
            break;
        }
        let value = if arg == b"--allocator" {
            args.next()
        } else {
            arg.strip_prefix(b"--allocator=")
        };
        if let Some(value) = value {
            found = Inner::from_arg(value);
        }
    }
    found
}

/// Records the allocator the command line asks for, from glibc's `.init_array` call
/// (`argc`, `argv`, `envp`), reading the C strings in place, and tells the tracer
/// that the driver names bad `ALLOC_TRACE*` values itself: nothing allocates here.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn read_argv(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    if argv.is_null() {
        return;
    }
    let args = (1..usize::try_from(argc).unwrap_or(0)).map_while(|i| {
        // SAFETY: the loader passes `argc` valid pointers in `argv`, each to a
        // NUL-terminated string that lives as long as the process; a null entry
        // (never seen below `argc`) ends the scan.
        let p = unsafe { *argv.add(i) };
        // SAFETY: as above, `p` is a NUL-terminated string that is never freed.
        (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
    });
    if let Some(inner) = scan(args) {
        REQUESTED.store(inner.code(), Ordering::Relaxed);
    }
    // `--trace` and the other tracer flags take `ALLOC_TRACE*` for defaults, and
    // clap names what is wrong with them; `ALLOC_TRACE=count,sites` (turns) is the
    // driver's alone. So the tracer need not say it ignores them.
    alloc_tracer::env_checked_by_program();
}

/// `read_argv` in the section of constructors the loader runs before `main`, with
/// std's own argument hook's priority, ahead of other constructors.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[unsafe(link_section = ".init_array.00099")]
static READ_ARGV: extern "C" fn(
    libc::c_int,
    *const *const libc::c_char,
    *const *const libc::c_char,
) = read_argv;

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(args: &str) -> Option<Inner> {
        scan(args.split(' ').map(str::as_bytes))
    }

    #[test]
    fn scan_finds_the_flag_in_either_spelling() {
        assert_eq!(scanned("--allocator system sha256"), Some(Inner::System));
        assert_eq!(
            scanned("sha256 --allocator=mimalloc"),
            Some(Inner::Mimalloc)
        );
        assert_eq!(
            scanned("--json porep --allocator jemalloc"),
            Some(Inner::Jemalloc)
        );
        assert_eq!(scanned("sha256 --blocks 4"), None);
        assert_eq!(scanned("sha256 --allocator"), None);
        assert_eq!(scanned("--allocator tcmalloc sha256"), None);
        assert_eq!(scanned("sha256 -- --allocator system"), None);
        assert_eq!(
            scanned("--allocator system sha256 --allocator=mimalloc"),
            Some(Inner::Mimalloc)
        );
    }

    #[test]
    fn a_run_on_another_allocator_than_asked_is_refused() {
        // The test binary's command line names no allocator: jemalloc is fixed.
        assert_eq!(in_use(), Inner::Jemalloc);
        assert!(confirm(None).is_ok());
        assert!(confirm(Some(Inner::Jemalloc)).is_ok());
        let err = confirm(Some(Inner::System)).unwrap_err().to_string();
        assert!(
            err.contains("the allocator fixed at start is jemalloc, not --allocator system"),
            "{err}"
        );
    }

    #[test]
    fn codes_round_trip() {
        for inner in [Inner::Jemalloc, Inner::System, Inner::Mimalloc] {
            assert_eq!(Inner::from_code(inner.code()), Some(inner));
            assert_eq!(Inner::from_arg(inner.name().as_bytes()), Some(inner));
        }
        assert_eq!(Inner::from_code(UNDECIDED), None);
    }
}
