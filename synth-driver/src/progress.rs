//! Progress on stderr for long work (sealing, many iterations, counting a 32 GiB
//! partition).
//!
//! The bar shows only when stderr is a terminal, and only once the work has run
//! for [`DELAY`], so short runs and piped runs draw none (stdout, `--json`'s, never
//! carries it); off a terminal, work made of steps (a seal's) prints each step's line
//! to stderr instead ([`Progress::step`]). Its drawing runs on its own thread with the tracer's
//! recording suppressed for that thread (`alloc_tracer::untraced`), and every call
//! into the bar from the working thread is suppressed the same way, so a traced run
//! counts the same allocations with or without a bar.
//!
//! A signal that ends the run takes the bar off the terminal first ([`hide`]), so that
//! its message is not drawn over.
//!
//! Constraint systems publish how many rows they have built through [`ROWS`], every
//! 4096 rows (a plain store, nothing per row).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long work runs before the bar appears.
pub const DELAY: Duration = Duration::from_secs(2);

/// Rows built so far by the synthesis in progress (0 when unknown).
pub static ROWS: AtomicU64 = AtomicU64::new(0);

/// Whether [`ROWS`] holds the size of the circuit being synthesized rather than the
/// rows built so far: the stock prover publishes none as it goes, and its circuit
/// was counted before.
pub static ROWS_ARE_SIZE: AtomicBool = AtomicBool::new(false);

/// Publishes `rows` to [`ROWS`] when it is a multiple of 4096.
#[inline]
pub fn publish_rows(rows: usize) {
    if rows.trailing_zeros() >= 12 {
        ROWS.store(rows as u64, Relaxed);
    }
}

/// The bar on the terminal, if any; `Hidden` once [`hide`] has run, after which no
/// bar appears.
static SHOWN: Mutex<Shown> = Mutex::new(Shown::None);

enum Shown {
    None,
    Bar(ProgressBar),
    Hidden,
}

fn shown() -> MutexGuard<'static, Shown> {
    SHOWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Takes the bar off the terminal for good: the process is about to end with a
/// message of its own.
pub fn hide() {
    alloc_tracer::untraced(|| {
        if let Shown::Bar(bar) = std::mem::replace(&mut *shown(), Shown::Hidden) {
            bar.finish_and_clear();
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
    });
}

/// A progress bar (a spinner when there is no length) and the thread drawing it.
pub struct Progress {
    bar: ProgressBar,
    done: Arc<AtomicBool>,
    drawing: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Progress over `len` steps (None: a spinner), labelled `prefix`; the message
    /// is the published row count if `rows_shown`, else the latest [`Progress::step`].
    pub fn new(prefix: &str, len: Option<u64>, rows_shown: bool) -> Progress {
        alloc_tracer::untraced(|| {
            let template = match len {
                Some(_) => "{prefix} {spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}",
                None => "{prefix} {spinner} [{elapsed_precise}] {msg}",
            };
            let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::hidden())
                .with_prefix(prefix.to_owned());
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            let done = Arc::new(AtomicBool::new(false));
            let drawing = Arc::new(AtomicBool::new(false));
            let ticker = std::io::stderr().is_terminal().then(|| {
                let (bar, done, drawing) = (bar.clone(), done.clone(), drawing.clone());
                std::thread::spawn(move || {
                    alloc_tracer::untraced(|| tick(&bar, &done, &drawing, rows_shown))
                })
            });
            Progress {
                bar,
                done,
                drawing,
                ticker,
            }
        })
    }

    /// One step done.
    pub fn inc(&self) {
        alloc_tracer::untraced(|| self.bar.inc(1));
    }

    /// What is being done now. Off a terminal the line goes to stderr as it is.
    pub fn step(&self, line: String) {
        if self.ticker.is_some() {
            // The bar frees its messages untraced: it gets a copy made untraced, and
            // `line` is freed here, as traced as it was made.
            alloc_tracer::untraced(|| self.bar.set_message(line.clone()));
        } else {
            eprintln!("{line}");
        }
    }

    /// Runs `f` (which prints) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        if self.drawing.load(Relaxed) {
            alloc_tracer::untraced(|| self.bar.suspend(f))
        } else {
            f()
        }
    }
}

/// The drawing thread: waits out [`DELAY`], then redraws every 200 ms (with the
/// published row count, if `rows_shown`) until `done`.
fn tick(bar: &ProgressBar, done: &AtomicBool, drawing: &AtomicBool, rows_shown: bool) {
    let start = Instant::now();
    while !done.load(Relaxed) && start.elapsed() < DELAY {
        std::thread::sleep(Duration::from_millis(50));
    }
    if done.load(Relaxed) {
        return;
    }
    {
        let mut shown = shown();
        if matches!(*shown, Shown::Hidden) {
            return;
        }
        bar.set_draw_target(ProgressDrawTarget::stderr());
        *shown = Shown::Bar(bar.clone());
    }
    drawing.store(true, Relaxed);
    let mut shown = (0, false);
    while !done.load(Relaxed) {
        let rows = ROWS.load(Relaxed);
        let size = ROWS_ARE_SIZE.load(Relaxed);
        // (Counting may have published the size itself last: the words change.)
        if rows_shown && (rows, size) != shown {
            // Not a count of rows done, which would read as all of them from the start.
            bar.set_message(if size {
                format!("a circuit of {rows} rows")
            } else {
                format!("{rows} rows")
            });
            shown = (rows, size);
        }
        bar.tick();
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Relaxed);
        alloc_tracer::untraced(|| {
            if let Some(t) = self.ticker.take() {
                let _ = t.join();
            }
            let mut shown = shown();
            if matches!(*shown, Shown::Bar(_)) {
                *shown = Shown::None;
            }
            drop(shown);
            self.bar.finish_and_clear();
        });
    }
}
