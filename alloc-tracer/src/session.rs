//! When reports get written: on demand, when a [`Session`] guard drops (also while
//! unwinding from a panic), and at normal process exit when `ALLOC_TRACE_REPORT`
//! names a directory.

use crate::Error;
use crate::report::{self, ReportSummary};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The last directory a report was written to, so that the exit hook does not write
/// the same report twice.
static LAST_WRITTEN: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Writes a report of everything recorded so far to `dir` (see `report::write`).
pub fn write_report(dir: &Path) -> Result<ReportSummary, Error> {
    let summary = report::write(dir)?;
    crate::hot::thread::guarded(|| {
        *LAST_WRITTEN.lock().unwrap_or_else(|e| e.into_inner()) = Some(dir.to_owned());
    });
    Ok(summary)
}

/// Writes a report to its directory when dropped, unless [`Session::finish`] did.
///
/// Dropping happens on unwinding too, so a panic that unwinds through the guard
/// still leaves a report. With `panic = "abort"`, or on `std::process::exit` or a
/// signal, guards do not run; the `ALLOC_TRACE_REPORT` exit hook still covers
/// `process::exit` (it runs from `atexit`), nothing covers abort or signals.
#[must_use = "the report is written when the session is dropped"]
pub struct Session {
    dir: Option<PathBuf>,
}

impl Session {
    /// A session that reports to `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Session {
        Session {
            dir: Some(dir.into()),
        }
    }

    /// Writes the report now and returns what was written.
    pub fn finish(mut self) -> Result<ReportSummary, Error> {
        let dir = self.dir.take().expect("dir is only taken here or in drop");
        write_report(&dir)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take()
            && let Err(e) = write_report(&dir)
        {
            eprintln!("alloc-tracer: report not written: {e}");
        }
    }
}

/// Registers the exit hook when `ALLOC_TRACE_REPORT` is set. Runs once, under the
/// guard, from the first allocation.
pub(crate) fn arm_exit_report() {
    if crate::config::getenv(c"ALLOC_TRACE_REPORT").is_some() {
        // SAFETY: `report_at_exit` is a plain `extern "C" fn()` that never unwinds
        // (errors are printed, panics are caught).
        unsafe { libc::atexit(report_at_exit) };
    }
}

extern "C" fn report_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(dir) = std::env::var_os("ALLOC_TRACE_REPORT").map(PathBuf::from) else {
            return;
        };
        let already = crate::hot::thread::guarded(|| {
            LAST_WRITTEN
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_deref()
                == Some(&dir)
        });
        if already {
            return;
        }
        match write_report(&dir) {
            Ok(s) => eprintln!("alloc-tracer: report written to {}", s.dir.display()),
            Err(e) => eprintln!("alloc-tracer: report not written: {e}"),
        }
    });
}
