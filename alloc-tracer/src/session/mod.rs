//! When reports get written: on demand, when a [`Session`] guard drops (also while
//! unwinding from a panic), and at normal process exit when `ALLOC_TRACE_REPORT`
//! names a directory; and where: a report path may hold `%p` (the process id) and
//! `%t` (when tracing started, Unix seconds), so that many processes (test binaries,
//! forked children) can share one setting without writing over each other.

mod exit;

pub use exit::hold_exit_report;
pub(crate) use exit::{answered_elsewhere, arm_exit_report, arm_no_report_note};

use crate::Error;
use crate::handed::handed_out;
use crate::report::{self, ReportSummary};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The last directory a report was written to, and the allocations and reallocs it
/// counted, so that the exit hook does not write the same report twice (but does
/// where the program did more work since; see `exit::report`).
static LAST_WRITTEN: Mutex<Option<(PathBuf, u64)>> = Mutex::new(None);

/// Writes a report of everything recorded so far to `dir` (see `report::write`),
/// with `%p` and `%t` in it expanded ([`expand_path`]). It creates `dir`'s parent if
/// missing, waits for any other writer of that folder (a `flock`), and symbolizes
/// every address the report holds (tens of milliseconds to seconds). Estimates keep
/// the weights they were recorded with, whatever the mode now.
pub fn write_report(dir: &Path) -> Result<ReportSummary, Error> {
    write(dir, None)
}

/// Writes a report like [`write_report`], marked in its manifest as incomplete
/// because of `why` (e.g. `SIGINT`): for a program stopped before its run finished.
pub fn write_incomplete_report(dir: &Path, why: &str) -> Result<ReportSummary, Error> {
    write(dir, Some(why))
}

fn write(dir: &Path, incomplete: Option<&str>) -> Result<ReportSummary, Error> {
    answered_elsewhere();
    // The tracer's own work: its allocations are not the program's, and what it
    // hands back is made the program's (`handed`).
    let written = crate::hot::thread::guarded(|| {
        write_expanded(expand_path(dir), names_run(dir), incomplete)
    });
    handed_out(written)
}

/// Allocations and reallocs recorded so far, every thread's.
pub(super) fn calls_so_far() -> u64 {
    let t = crate::registry::counts().all_phases();
    t.allocs + t.reallocs
}

/// `path`, `%p` and `%t` expanded, taken from `base` when relative.
fn in_dir(base: Option<&PathBuf>, path: &Path) -> PathBuf {
    crate::hot::thread::guarded(|| {
        let path = expand_path(path);
        match base {
            Some(b) => b.join(path),
            None => path,
        }
    })
}

/// [`write`] to a path already expanded, under the guard; `apart`: the path before
/// expanding named the run apart ([`names_run`]).
fn write_expanded(
    dir: PathBuf,
    apart: bool,
    incomplete: Option<&str>,
) -> Result<ReportSummary, Error> {
    let summary = report::write(&dir, incomplete, apart)?;
    *LAST_WRITTEN.lock().unwrap_or_else(|e| e.into_inner()) =
        Some((same_file(&dir), summary.allocs + summary.reallocs));
    Ok(summary)
}

/// Fails when `dir` (`%p` and `%t` expanded) is neither absent, nor an empty folder,
/// nor a report of this tracer's holding nothing else, as writing a report there
/// would, or when the folder it would go in (or the nearest one above that exists)
/// is not writable: for programs that check where their report goes before a long
/// run rather than learn it at the end. It writes nothing (a disk that fills up
/// still fails at the end). Writing checks again. [`Session::new`] and
/// `ALLOC_TRACE_REPORT` run this check at once and say on standard error what fails.
pub fn check_report_dir(dir: &Path) -> Result<(), Error> {
    handed_out(crate::hot::thread::guarded(|| {
        report::directory::check_destination(&expand_path(dir))
    }))
}

/// `path` with `%p` replaced by the process id, `%t` by when the tracer started
/// (Unix seconds: the process's first allocation, or the first
/// [`Settings::apply`](crate::Settings::apply) before it) and `%%` by `%`. A path
/// that is not UTF-8 is returned as it is.
pub fn expand_path(path: &Path) -> PathBuf {
    let Some(text) = path.to_str() else {
        return path.to_owned();
    };
    if !text.contains('%') {
        return path.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('p') => out.push_str(&std::process::id().to_string()),
            Some('t') => out.push_str(&crate::hot::clock::start_unix_seconds().to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    PathBuf::from(out)
}

/// `path` spelled so that two spellings of one folder compare equal (`a/../r`,
/// `./r`, an absolute path): canonical when it exists.
fn same_file(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// The locks of the live sessions and of the last written path (each a leaf, never
/// held while another is taken), held across a `fork()` (see `fork`).
pub(crate) type HeldForFork = (
    std::sync::MutexGuard<'static, Vec<Live>>,
    std::sync::MutexGuard<'static, Option<(PathBuf, u64)>>,
);

/// Takes [`HeldForFork`].
pub(crate) fn hold_for_fork() -> HeldForFork {
    (
        live(),
        LAST_WRITTEN.lock().unwrap_or_else(|e| e.into_inner()),
    )
}

/// Writes a report to its directory when dropped, unless [`Session::finish`] did.
///
/// Dropping happens on unwinding too, so a panic that unwinds through the guard
/// still leaves a report, marked incomplete (`panic`: the work it covers stopped
/// short; `analyzer check` refuses it). A session the program never drops, because
/// it ends with `std::process::exit`, writes its report at exit, marked incomplete
/// (`exit status N`) when the status is not 0. With `panic = "abort"` or on a
/// signal nothing runs, and no report is written.
///
/// If tracing never came on (no `ALLOC_TRACE` mode, no [`Settings::apply`](crate::Settings::apply)),
/// dropping writes no report, whose zeros would pass any budget, and says so on
/// standard error (silently where `ALLOC_TRACE` chose `off`). A report written on
/// drop or at exit whose stacks mostly end early (code built without frame
/// pointers) has its warning printed too, since the program never sees its summary.
///
/// A forked child that drops its copy of the guard writes no report unless the path
/// holds `%p` (it says so on standard error), so that it never replaces its
/// parent's; [`Session::finish`], called on purpose, writes one anyway, as it does
/// with tracing never on.
#[must_use = "the report is written when the session is dropped"]
pub struct Session {
    dir: Option<PathBuf>,
    /// The working directory when the guard was made, for a relative `dir`.
    base: Option<PathBuf>,
    /// The process that made the guard.
    pid: u32,
    /// Its entry in [`LIVE`].
    id: u64,
}

/// A session not yet dropped or finished, for the exit hook.
pub(crate) struct Live {
    id: u64,
    dir: PathBuf,
    base: Option<PathBuf>,
    pid: u32,
}

/// Sessions not yet dropped or finished: at exit, their reports are written.
static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());
/// Numbers sessions, for [`LIVE`].
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn live() -> std::sync::MutexGuard<'static, Vec<Live>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

impl Session {
    /// A session that reports to `dir`, a relative path taken from the working
    /// directory now (a program that changes directory still reports there).
    pub fn new(dir: impl Into<PathBuf>) -> Session {
        answered_elsewhere();
        let dir = dir.into();
        let base = dir
            .is_relative()
            .then(std::env::current_dir)
            .and_then(Result::ok);
        // Where the report could not go is said now, not when the run is over.
        crate::hot::thread::guarded(|| {
            let at = in_dir(base.as_ref(), &dir);
            if let Err(e) = report::directory::check_destination(&at) {
                say(&format!(
                    "alloc-tracer: Session: {e}: its report will not be written unless \
                     that changes\n"
                ));
            }
        });
        let pid = std::process::id();
        let id = NEXT_ID.fetch_add(1, Relaxed);
        crate::hot::thread::guarded(|| {
            live().push(Live {
                id,
                dir: dir.clone(),
                base: base.clone(),
                pid,
            });
            exit::arm_sessions();
        });
        Session {
            base,
            dir: Some(dir),
            pid,
            id,
        }
    }

    /// Writes the report now and returns what was written.
    pub fn finish(mut self) -> Result<ReportSummary, Error> {
        let dir = self.dir.take().expect("dir is only taken here or in drop");
        forget_live(self.id);
        let written = crate::hot::thread::guarded(|| {
            write_expanded(in_dir(self.base.as_ref(), &dir), names_run(&dir), None)
        });
        handed_out(written)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else {
            return;
        };
        forget_live(self.id);
        // Dropped while a panic unwinds: the work it covers stopped short.
        let panic = std::thread::panicking().then_some("panic");
        // A panic in the writer is caught (its message printed by the panic hook)
        // and the report said to be lost: while another panic unwinds it would
        // abort the process, and otherwise take down a program whose work is done.
        // Under the guard: what the writer makes is freed under it too.
        let wrote = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::hot::thread::guarded(|| end(&dir, self.base.as_ref(), self.pid, panic, ""))
        }));
        if wrote.is_err() {
            say(&format!(
                "alloc-tracer: Session: the report to {} was not written: its writer \
                 panicked\n",
                dir.display()
            ));
        }
    }
}

/// Takes session `id` off [`LIVE`].
fn forget_live(id: u64) {
    crate::hot::thread::guarded(|| live().retain(|s| s.id != id));
}

/// Writes the report of a session that ends without [`Session::finish`] (under the
/// guard): dropped,
/// or (`at_exit`, said after each line) never dropped before the process exited;
/// marked `incomplete` when its run stopped short (a panic, a non-zero exit).
fn end(dir: &Path, base: Option<&PathBuf>, pid: u32, incomplete: Option<&str>, at_exit: &str) {
    if pid != std::process::id() && !holds_pid(dir) {
        say(&format!(
            "alloc-tracer: a forked child's session writes no report to {} \
             (its parent's; put %p in the path for one per process){at_exit}\n",
            dir.display()
        ));
        return;
    }
    if !crate::timeline::started() {
        if !mode_chosen() {
            say(&format!(
                "alloc-tracer: Session: tracing was never on (set ALLOC_TRACE=count, \
                 sites or sample:N, or apply Settings with one of those modes): no report \
                 written to {}{at_exit}\n",
                dir.display()
            ));
        }
        return;
    }
    match write_expanded(in_dir(base, dir), names_run(dir), incomplete) {
        Ok(s) => {
            if !at_exit.is_empty() {
                say(&format!(
                    "alloc-tracer: report written to {}{at_exit}\n",
                    s.dir.display()
                ));
            }
            exit::warn_of_setup(&s);
        }
        Err(e) => say(&format!("alloc-tracer: report not written: {e}{at_exit}\n")),
    }
}

/// True when `ALLOC_TRACE` chose a mode, or a value already named as invalid: an
/// empty one chose nothing (most likely a variable that was not set).
fn mode_chosen() -> bool {
    crate::config::getenv(c"ALLOC_TRACE").is_some_and(|m| !m.trim().is_empty())
}

/// Writes `line` to standard error with `write(2)`: in a forked child, std's lock of
/// standard error may be held by a thread that did not come along, and inside the
/// first allocation by the thread that allocates.
fn say(line: &str) {
    // SAFETY: writes a live buffer of its length to fd 2.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// True when `path` holds a `%p` that [`expand_path`] expands (not `%%p`).
fn holds_pid(path: &Path) -> bool {
    holds_escape(path, 'p')
}

/// True when `path` holds `%p` or `%t`: meant to name one report per run.
fn names_run(path: &Path) -> bool {
    holds_pid(path) || holds_escape(path, 't')
}

/// True when `path` holds `%` followed by `c` (not `%%c`).
fn holds_escape(path: &Path, c: char) -> bool {
    let Some(text) = path.to_str() else {
        return false;
    };
    let mut chars = text.chars();
    while let Some(x) = chars.next() {
        if x == '%' && chars.next() == Some(c) {
            return true;
        }
    }
    false
}
