//! Shared by the integration tests: reading a report back.
#![allow(dead_code)]

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use std::collections::HashMap;
use std::path::Path;
pub use test_scratch::Scratch;

/// One row as column name -> field.
pub type Row = HashMap<String, Field>;

/// Every row of a report table.
pub fn read_table(dir: &Path, file: &str) -> Vec<Row> {
    let path = dir.join(file);
    let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let reader = SerializedFileReader::new(f).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|r| {
            r.unwrap()
                .get_column_iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect()
}

pub fn u64_of(row: &Row, col: &str) -> u64 {
    match &row[col] {
        Field::ULong(v) => *v,
        Field::UInt(v) => *v as u64,
        other => panic!("{col}: not an unsigned integer: {other:?}"),
    }
}

pub fn str_of<'a>(row: &'a Row, col: &str) -> &'a str {
    match &row[col] {
        Field::Str(s) => s,
        other => panic!("{col}: not a string: {other:?}"),
    }
}

/// Function names of each site, innermost first.
pub fn site_functions(dir: &Path) -> HashMap<u64, Vec<String>> {
    let mut frames: Vec<(u64, u64, String)> = read_table(dir, "frames.parquet")
        .iter()
        .map(|r| {
            (
                u64_of(r, "site_id"),
                u64_of(r, "frame_index"),
                str_of(r, "function").to_owned(),
            )
        })
        .collect();
    frames.sort();
    let mut out: HashMap<u64, Vec<String>> = HashMap::new();
    for (site, _, f) in frames {
        out.entry(site).or_default().push(f);
    }
    out
}

/// Sum of a `sites.parquet` column over the sites whose frames name `function`.
pub fn sum_for_function(dir: &Path, function: &str, col: &str) -> u64 {
    sum_for_function_in(dir, "sites.parquet", function, col)
}

/// Sum of a column of `table` (one with a `site_id` column: `sites.parquet`,
/// `heap_end.parquet`, ...) over the sites whose frames name `function`.
pub fn sum_for_function_in(dir: &Path, table: &str, function: &str, col: &str) -> u64 {
    rows_of(dir, table, function, None)
        .iter()
        .map(|r| u64_of(r, col))
        .sum()
}

/// The rows of `table` whose sites' frames name `function`, of size class
/// `class_bytes` if given (a function's blocks apart from the vector holding them).
pub fn rows_of(dir: &Path, table: &str, function: &str, class_bytes: Option<u64>) -> Vec<Row> {
    let functions = site_functions(dir);
    read_table(dir, table)
        .into_iter()
        .filter(|r| {
            class_bytes.is_none_or(|c| u64_of(r, "size_class_bytes") == c)
                && functions
                    .get(&u64_of(r, "site_id"))
                    .is_some_and(|fs| fs.iter().any(|f| f.contains(function)))
        })
        .collect()
}

/// A fresh folder for one test's reports, removed when the test passes.
pub fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("alloc-tracer-{name}"))
}

/// Runs `work` and returns the change of the tracer's totals (over all phases) it
/// saw: `d(|p| p.allocs)` is the allocations recorded meanwhile. Waits first until
/// no other thread allocates ([`wait_until_quiet`]).
pub fn change_during(work: impl FnOnce()) -> impl Fn(fn(&alloc_tracer::PhaseTotals) -> u64) -> u64 {
    wait_until_quiet();
    let before = alloc_tracer::counts();
    work();
    let after = alloc_tracer::counts();
    move |f| after.total(f) - before.total(f)
}

/// Waits until the process's other threads stop allocating, so that a window of the
/// tracer's process-wide totals opened next holds this thread's allocations alone.
/// The test harness's main thread allocates for a moment after it starts a test's
/// thread (its record of the running test, its channel's first wait), and a test
/// that opens a window at once can count those (a window of `sampled_stacks` counted
/// 1,002 allocations of 1,000 in 5 runs of 40 with a busy loop on its CPU). Quiet:
/// the main thread is asleep (it waits for the test) and the totals did not move
/// over 50 ms. Gives up after 5 s, leaving the window's check to fail if they move.
pub fn wait_until_quiet() {
    use std::time::{Duration, Instant};
    let events = || {
        let c = alloc_tracer::counts();
        c.total(|p| p.allocs) + c.total(|p| p.frees) + c.total(|p| p.reallocs)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = events();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = events();
        if (now == last && alloc_tracer::untraced(main_thread_asleep)) || Instant::now() > deadline
        {
            return;
        }
        last = now;
    }
}

/// True when the process's main thread is asleep, or is this thread, or its state
/// cannot be read (`/proc`).
fn main_thread_asleep() -> bool {
    let pid = std::process::id();
    // SAFETY: gettid takes no arguments and cannot fail.
    if unsafe { libc::gettid() } as u32 == pid {
        return true;
    }
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{pid}/stat")) else {
        return true;
    };
    // The state follows the command's closing parenthesis.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
        .is_none_or(|state| state == 'S')
}

/// Forks a child that runs `f` and leaves with `_exit` and what `f` returns (never
/// returning into the test harness); returns [`wait_child`]'s answer for it.
pub fn in_child(limit: std::time::Duration, f: impl FnOnce() -> i32) -> Option<i32> {
    // SAFETY: the child runs only `f`, which the caller keeps to what a forked
    // child may do, and ends with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = f();
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    wait_child(pid, limit)
}

/// Waits for our child `pid`: its exit code (128 + the signal, as a shell says, when
/// a signal killed it), or `None` when it was still running after `limit` (then it
/// is killed and reaped).
pub fn wait_child(pid: libc::pid_t, limit: std::time::Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
        if start.elapsed() > limit {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}
