//! What happens at process exit: the `ALLOC_TRACE_REPORT` report, the reports of
//! sessions the program never dropped (`std::process::exit`), and a note when
//! `ALLOC_TRACE` traced a run while nothing asked for its report.
//!
//! The hooks are registered with glibc's `on_exit`, which passes the exit status: a
//! report written at a non-zero status is marked incomplete (`exit status N`), since
//! the run did not finish its work, and `analyzer check` and `--fail-if` refuse it
//! (elsewhere `atexit`, and the status is taken as 0). They run under the tracer's
//! guard: the C library has run the threads' exit destructors by then, so an
//! allocation there (a path's) would count as the program's, made after its
//! thread's exit. And they print with `write(2)`: in a forked child std's lock of
//! standard error may be held by a thread that did not come along.

use super::{LAST_WRITTEN, ReportSummary, end, holds_pid, in_dir, live, same_file, say};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::AcqRel, Ordering::Relaxed};

/// Allocations made after the program's own report to the exit report's folder, up
/// to one in this many of those it counted or [`SAME_REPORT_CALLS`], whichever is
/// more, leave that report as the run's: printing its summary, tearing down.
const SAME_REPORT_SHARE: u64 = 100;

/// See [`SAME_REPORT_SHARE`].
const SAME_REPORT_CALLS: u64 = 1000;

/// A hook run at exit, with the exit status.
type Hook = extern "C" fn(libc::c_int, *mut libc::c_void);

#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe extern "C" {
    /// glibc's `on_exit`: like `atexit`, with the exit status passed to the hook.
    fn on_exit(hook: Hook, arg: *mut libc::c_void) -> libc::c_int;
}

/// Registers `hook` to run at exit. Allocation-free as far as this crate goes (the
/// C library may allocate its list of hooks).
fn at_exit(hook: Hook) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `hook` is a plain `extern "C" fn` that never unwinds (each catches
    // panics).
    unsafe {
        on_exit(hook, std::ptr::null_mut());
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        /// The hooks registered so far (at most three), for `run_all`.
        static HOOKS: std::sync::Mutex<Vec<Hook>> = std::sync::Mutex::new(Vec::new());
        extern "C" fn run_all() {
            let hooks = std::mem::take(&mut *HOOKS.lock().unwrap_or_else(|e| e.into_inner()));
            for h in hooks.into_iter().rev() {
                h(0, std::ptr::null_mut());
            }
        }
        let mut hooks = HOOKS.lock().unwrap_or_else(|e| e.into_inner());
        if hooks.is_empty() {
            // SAFETY: `run_all` is a plain `extern "C" fn()` that never unwinds.
            unsafe { libc::atexit(run_all) };
        }
        hooks.push(hook);
    }
}

/// Why a report written at exit with `status` covers part of the run: `None` for 0.
fn incomplete(status: libc::c_int) -> Option<String> {
    (status != 0).then(|| format!("exit status {status}"))
}

/// Set once [`arm_sessions`] registered its hook. An atomic, not a `Once`: a fork
/// that caught a `Once` running would leave it running for good in the child.
static SESSIONS_ARMED: AtomicBool = AtomicBool::new(false);

/// Registers [`sessions_at_exit`], once per process (a forked child inherits it).
pub(super) fn arm_sessions() {
    if !SESSIONS_ARMED.swap(true, AcqRel) {
        at_exit(sessions_at_exit);
    }
}

/// Writes the reports of the sessions the program never dropped (it called
/// `std::process::exit`), newest first, as dropping them would have.
extern "C" fn sessions_at_exit(status: libc::c_int, _: *mut libc::c_void) {
    let _ = std::panic::catch_unwind(|| {
        crate::hot::thread::guarded(|| {
            // `prepare` holds this lock across a fork, so a child finds it free; a
            // thread still making or dropping a session holds it briefly.
            let left = std::mem::take(&mut *live());
            for s in left.iter().rev() {
                end(
                    &s.dir,
                    s.base.as_ref(),
                    s.pid,
                    incomplete(status).as_deref(),
                    " (its Session was not dropped before the process exited)",
                );
            }
        })
    });
}

/// Set once the program has asked for a report, or read the tracer's counts, some
/// other way than `ALLOC_TRACE_REPORT`: a [`Session`](super::Session),
/// [`write_report`](super::write_report), `measure`, `counts`, `phases`,
/// `last_top_sites`, or a program that handles the tracer's variables itself.
static ANSWERED: AtomicBool = AtomicBool::new(false);

/// Notes that the program reads what the tracer records in a way of its own.
pub(crate) fn answered_elsewhere() {
    ANSWERED.store(true, Relaxed);
}

/// True when `ALLOC_TRACE_REPORT` is set, to anything (a path that is not UTF-8
/// included).
fn report_variable_set() -> bool {
    // SAFETY: a NUL-terminated name; nothing is kept.
    !unsafe { libc::getenv(c"ALLOC_TRACE_REPORT".as_ptr()) }.is_null()
}

/// Registers [`no_report_note`] for a run that `ALLOC_TRACE` traces without
/// `ALLOC_TRACE_REPORT`. Runs once, under the guard, from the first allocation.
pub(crate) fn arm_no_report_note() {
    if !report_variable_set() {
        at_exit(no_report_note);
    }
}

/// At exit: says so when `ALLOC_TRACE` traced the run and nothing asked for its
/// report, so that a user who set the mode alone learns where the report would come
/// from rather than find none. Not in a forked child, whose parent says it.
extern "C" fn no_report_note(_: libc::c_int, _: *mut libc::c_void) {
    if ANSWERED.load(Relaxed) || crate::lineage::forked_from().is_some() {
        return;
    }
    let written = match LAST_WRITTEN.try_lock() {
        Ok(w) => w.is_some(),
        Err(_) => true,
    };
    if !written {
        say(
            "alloc-tracer: ALLOC_TRACE traced this run, but nothing asked for its report: \
             set ALLOC_TRACE_REPORT=DIR, or make an alloc_tracer::Session\n",
        );
    }
}

/// Set while the program holds the exit hook's report back ([`hold_exit_report`]).
static HELD: AtomicBool = AtomicBool::new(false);

/// Holds the `ALLOC_TRACE_REPORT` report at exit back (`true`), or lets it be
/// written again (`false`). For a program that checks its command line before its
/// run and may refuse it: a refused command, or `--help`, ending while held writes
/// no report, so it does not replace the report of an earlier run in the same folder
/// with one of a process that did nothing (the refusal says why). Reports the
/// program writes itself (a [`Session`](super::Session), `write_report`) are not
/// held.
pub fn hold_exit_report(held: bool) {
    HELD.store(held, Relaxed);
}

/// The process that armed the exit hook: a child forked from it inherits the hook.
static ARMED_BY: AtomicU32 = AtomicU32::new(0);
/// The working directory when the exit hook was armed: a relative
/// `ALLOC_TRACE_REPORT` lies there, wherever the program moved since.
static ARMED_IN: OnceLock<PathBuf> = OnceLock::new();

/// Registers the exit hook when `ALLOC_TRACE_REPORT` is set. Runs once, under the
/// guard, from the first allocation.
pub(crate) fn arm_exit_report() {
    if crate::config::getenv(c"ALLOC_TRACE_REPORT").is_some_and(|s| s.trim().is_empty()) {
        // Most likely a variable that was not set (`ALLOC_TRACE_REPORT=$DIR`): taken
        // as a path, it would be the working directory.
        say("alloc-tracer: ALLOC_TRACE_REPORT is empty: no report at exit (give it a folder)\n");
        return;
    }
    if let Some(setting) = crate::config::getenv(c"ALLOC_TRACE_REPORT") {
        ARMED_BY.store(std::process::id(), Relaxed);
        if let Ok(cwd) = std::env::current_dir() {
            let _ = ARMED_IN.set(cwd);
        }
        // Where the report could not go is said now, not at the end of a long run.
        let dir = in_dir(ARMED_IN.get(), Path::new(&setting));
        if let Err(e) = crate::report::directory::check_destination(&dir) {
            say(&format!(
                "alloc-tracer: ALLOC_TRACE_REPORT: {e}: the report at exit will not be \
                 written unless that changes\n"
            ));
        }
        at_exit(report_at_exit);
    } else if report_variable_set() {
        say("alloc-tracer: ALLOC_TRACE_REPORT is not UTF-8: no report at exit\n");
    }
}

extern "C" fn report_at_exit(status: libc::c_int, _: *mut libc::c_void) {
    let _ = std::panic::catch_unwind(|| crate::hot::thread::guarded(|| report(status)));
}

/// The `ALLOC_TRACE_REPORT` report, at exit with `status`.
fn report(status: libc::c_int) {
    // Read with the C library's getenv, not std's: std's environment lock may be
    // held, in a forked child, by a thread that did not come along.
    let Some(setting) = crate::config::getenv(c"ALLOC_TRACE_REPORT").map(PathBuf::from) else {
        return;
    };
    if HELD.load(Relaxed) {
        return;
    }
    // A forked child shares its parent's setting: it writes a report of its own
    // only where the path tells the two apart.
    let forked = ARMED_BY.load(Relaxed) != std::process::id();
    if forked && !holds_pid(&setting) {
        say(&format!(
            "alloc-tracer: a forked child writes no report at exit to {} (its \
             parent's; put %p in ALLOC_TRACE_REPORT for one per process)\n",
            setting.display()
        ));
        return;
    }
    if !crate::timeline::started() {
        // Tracing never came on: nothing to report. Unless the mode was chosen
        // (`ALLOC_TRACE=off`, or a bad value already named), say why there is none.
        if !super::mode_chosen() {
            say(
                "alloc-tracer: ALLOC_TRACE_REPORT is set, but tracing was never on \
                 (set ALLOC_TRACE=count, sites or sample:N, or apply Settings with one \
                 of those modes): no report written\n",
            );
        }
        return;
    }
    let dir = in_dir(ARMED_IN.get(), &setting);
    // The program's own latest report went there, and it did next to nothing since
    // (printed its summary, tore down): the same report again. After more work than
    // that (a report written mid-run), one of the whole run replaces it.
    let last = LAST_WRITTEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    if let Some((path, calls)) = last
        && path == same_file(&dir)
        && super::calls_so_far().saturating_sub(calls)
            <= (calls / SAME_REPORT_SHARE).max(SAME_REPORT_CALLS)
    {
        return;
    }
    match super::write_expanded(
        dir,
        super::names_run(&setting),
        incomplete(status).as_deref(),
    ) {
        Ok(s) => {
            say(&format!(
                "alloc-tracer: report written to {}\n",
                s.dir.display()
            ));
            warn_of_setup(&s);
        }
        Err(e) => say(&format!("alloc-tracer: report not written: {e}\n")),
    }
}

/// Prints a written report's setup warning (stacks that end early), which a
/// program that did not ask for the summary would not see.
pub(super) fn warn_of_setup(s: &ReportSummary) {
    if let Some(w) = &s.setup_warning {
        say(&format!("alloc-tracer: {}: {w}\n", s.dir.display()));
    }
}
