//! What SIGINT, SIGTERM and SIGHUP do to a run: with `--report DIR`, write the report
//! of what was recorded so far, marked incomplete in its manifest (`"incomplete":
//! "SIGINT"`), then exit with 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP: the
//! terminal went away, a dropped ssh session); without it, just exit with those
//! codes. A run started with SIGHUP ignored (`nohup`) leaves it out: blocked, an
//! ignored signal is still queued and `sigwait` would take it. What the signal
//! thread says goes to standard error without failing if that is gone (a closed
//! terminal).
//!
//! A signal handler cannot write a report (it allocates, takes locks and does I/O,
//! none of it async-signal-safe), so no handler is installed: both signals are
//! blocked in the main thread before any other thread starts, every thread inherits
//! that mask, and one thread of ours waits for them with `sigwait` and does the work
//! as ordinary code, while the synthesis threads may still be allocating (the tracer
//! takes its snapshot under its own locks).
//!
//! Once a signal has arrived, the others stay blocked and pending until the process
//! ends: a second Ctrl-C while the report is written is ignored and the report is
//! finished. (Only SIGKILL can stop the write, and even then no half-written report
//! appears: the tracer writes it under a temporary name and renames it into place.)
//!
//! The run's own report and a signal's never both get written: whichever comes
//! first holds [`REPORT`] until it is done; a signal that comes while the complete
//! report is being written waits for it, then exits without writing.
//!
//! The process ends with `_exit`, which skips `atexit` handlers: the tracer's
//! `ALLOC_TRACE_REPORT` exit hook would otherwise write a report of the same run not
//! marked incomplete, over ours when it names the same folder spelled another way.
//! Nothing waits to be flushed: stdout is line-buffered and stderr unbuffered.

use crate::progress;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Release};
use std::sync::{Mutex, MutexGuard};

/// Where a signal writes its report; `None` without `--report`, or once the run
/// has taken it to write its own.
static REPORT: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Set by the signal thread once its own code runs (see [`watch`]).
static STARTED: AtomicBool = AtomicBool::new(false);

/// Set once a stop signal was taken: the signal thread writes the report and ends
/// the process, and the run must not end it first (see [`wait_if_stopping`]).
static TAKEN: AtomicBool = AtomicBool::new(false);

/// When a stop signal was taken, never returns: the signal thread is writing the
/// report and ends the process. For the main thread's way out on an error (its
/// output to a closed terminal fails after a hang-up, say), which would otherwise
/// end the process with the report half written.
pub fn wait_if_stopping() {
    while TAKEN.load(Acquire) {
        std::thread::park();
    }
}

/// Blocks the stop signals in the calling thread and starts the thread that waits
/// for them, which writes a report to `report` (if any) when one arrives.
///
/// Must be called from the main thread before any other thread starts: a thread
/// started earlier keeps the signals unblocked, and one delivered there would end the
/// process with no report.
pub fn watch(report: Option<PathBuf>) -> Result<()> {
    *lock() = report;
    let set = ffi::stop_signals();
    ffi::block(&set).context("blocking SIGINT, SIGTERM and SIGHUP")?;
    // The driver's own thread, not the program under study: its allocations stay out
    // of the report. `untraced` cannot reach one of them: std's start-up of a named
    // thread copies the name (for its stack-overflow message) on the new thread,
    // before the closure runs. Waiting for the closure makes that copy happen here,
    // before `run` turns the tracer on, in every run; left to the scheduler it landed
    // in whatever phase was running when the thread started, now and then in the
    // first iteration's count.
    alloc_tracer::untraced(|| {
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                STARTED.store(true, Release);
                wait(&set)
            })
    })
    .context("starting the thread that waits for SIGINT, SIGTERM and SIGHUP")?;
    while !STARTED.load(Acquire) {
        std::thread::yield_now();
    }
    Ok(())
}

/// Held while the run writes its complete report and prints its summary: a signal
/// from then on writes none, and one arriving meanwhile waits for both to finish.
pub struct Finishing {
    _report: MutexGuard<'static, Option<PathBuf>>,
}

/// The run has ended and writes its own report: signals stop writing one.
pub fn finishing() -> Finishing {
    let mut report = lock();
    *report = None;
    Finishing { _report: report }
}

fn lock() -> MutexGuard<'static, Option<PathBuf>> {
    REPORT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The signal thread: waits for the first stop signal and ends the process.
fn wait(set: &ffi::SigSet) -> ! {
    let signal = match ffi::wait(set) {
        Ok(signal) => signal,
        // sigwait fails only on an invalid set. Ending the run is better than going
        // on with both signals blocked and no one to take them: nothing would stop it.
        Err(e) => {
            say(&format!(
                "synth-driver: waiting for SIGINT, SIGTERM and SIGHUP: {e}"
            ));
            ffi::exit_now(2)
        }
    };
    TAKEN.store(true, Release);
    // Held until the process ends: the run can no longer start its own report.
    let report = lock();
    progress::hide();
    if let Some(dir) = report.as_deref() {
        let name = signal.name();
        say(&format!(
            "synth-driver: {name}: writing the report of the run so far to {} (marked incomplete)",
            alloc_tracer::expand_path(dir).display()
        ));
        match alloc_tracer::write_incomplete_report(dir, name) {
            // What the run's own summary would have warned of (stacks cut short,
            // frames without names).
            Ok(summary) => {
                if let Some(w) = &summary.setup_warning {
                    say(&format!("synth-driver: {}: {w}", summary.dir.display()));
                }
            }
            Err(e) => say(&format!("synth-driver: {name}: report not written: {e}")),
        }
    }
    ffi::exit_now(signal.exit_code())
}

/// One line on standard error; nothing if it cannot be written (`eprintln!` would
/// panic, and the thread would end without writing the report or the process).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The signals that stop a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Interrupt,
    Terminate,
    Hangup,
}

impl Stop {
    /// The signal's name, as the manifest's `incomplete` gives it.
    fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
            Stop::Hangup => "SIGHUP",
        }
    }

    /// 128 plus the signal's number, as a shell reports a process the signal killed.
    fn exit_code(self) -> i32 {
        128 + match self {
            Stop::Interrupt => libc::SIGINT,
            Stop::Terminate => libc::SIGTERM,
            Stop::Hangup => libc::SIGHUP,
        }
    }
}

/// The libc calls, each behind a safe function.
mod ffi {
    use super::Stop;
    use std::io;

    /// A set of signals.
    pub struct SigSet(libc::sigset_t);

    /// SIGINT, SIGTERM and SIGHUP, but SIGHUP when the process ignores it (`nohup`).
    pub fn stop_signals() -> SigSet {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it whatever it held.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t and the signal numbers are valid, so
        // neither call can fail.
        unsafe {
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
        }
        if !ignored(libc::SIGHUP) {
            // SAFETY: as above.
            unsafe { libc::sigaddset(&mut set, libc::SIGHUP) };
        }
        SigSet(set)
    }

    /// Whether `signal`'s disposition is to be ignored.
    fn ignored(signal: libc::c_int) -> bool {
        // SAFETY: sigaction is plain data, for which all zeros is a valid value.
        let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: with no new action `sigaction` only writes the current one into
        // `current`, a valid out pointer.
        let rc = unsafe { libc::sigaction(signal, std::ptr::null(), &mut current) };
        rc == 0 && current.sa_sigaction == libc::SIG_IGN
    }

    /// Blocks `set` in the calling thread (and the threads it starts from now on).
    pub fn block(set: &SigSet) -> io::Result<()> {
        // SAFETY: `set.0` is an initialised sigset_t; the old mask is not asked for.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set.0, std::ptr::null_mut()) };
        match rc {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }

    /// Waits until a signal of `set` (blocked in every thread) is pending and takes it.
    pub fn wait(set: &SigSet) -> io::Result<Stop> {
        let mut signal = 0;
        // SAFETY: `set.0` is an initialised sigset_t and `signal` a valid out pointer.
        let rc = unsafe { libc::sigwait(&set.0, &mut signal) };
        match (rc, signal) {
            (0, libc::SIGINT) => Ok(Stop::Interrupt),
            (0, libc::SIGHUP) => Ok(Stop::Hangup),
            // The set holds only the three.
            (0, _) => Ok(Stop::Terminate),
            (e, _) => Err(io::Error::from_raw_os_error(e)),
        }
    }

    /// Ends the process with `code` at once, without `atexit` handlers (see the
    /// module doc).
    pub fn exit_now(code: i32) -> ! {
        // SAFETY: `_exit` may be called from any thread at any time; it ends the
        // process without touching its memory.
        unsafe { libc::_exit(code) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        assert_eq!(Stop::Interrupt.exit_code(), 130);
        assert_eq!(Stop::Terminate.exit_code(), 143);
        assert_eq!(Stop::Interrupt.name(), "SIGINT");
        assert_eq!(Stop::Terminate.name(), "SIGTERM");
        assert_eq!(Stop::Hangup.exit_code(), 129);
        assert_eq!(Stop::Hangup.name(), "SIGHUP");
    }
}
