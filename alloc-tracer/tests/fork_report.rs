//! Reports and fork(): a child forked while another thread writes a report into a
//! folder can write its own report there (it inherits no lock on the folder), and a
//! child that drops its copy of a `Session` guard writes nothing over its parent's
//! report. One test: it forks, and the mode is process-wide.

use alloc_tracer::{Mode, Session, Settings, TracingAllocator, write_report};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const CHILDREN: usize = 20;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("alloc-tracer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Forks a child that runs `f` and leaves with `_exit` and its code; returns the
/// code, or `None` if the child was still running after 20 s (then killed).
fn in_child(f: impl FnOnce() -> i32) -> Option<i32> {
    // SAFETY: the child runs only `f` and ends with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = f();
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let start = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            assert!(libc::WIFEXITED(status), "child died: status {status}");
            return Some(libc::WEXITSTATUS(status));
        }
        if start.elapsed() > Duration::from_secs(20) {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn forked_children_and_reports() {
    Settings {
        mode: Mode::Count,
        ..Default::default()
    }
    .apply();
    black_box(vec![0u8; 100]);

    // A child's copy of the session guard, dropped, writes no report.
    let root = scratch("fork-session");
    let dest = root.join("report");
    let session = std::mem::ManuallyDrop::new(Session::new(&dest));
    let code = in_child(|| {
        // SAFETY: the child's copy of the parent's guard, dropped once, here.
        drop(std::mem::ManuallyDrop::into_inner(unsafe {
            std::ptr::read(&session)
        }));
        0
    });
    assert_eq!(code, Some(0));
    assert!(
        !dest.exists(),
        "a forked child's session wrote over its parent's report"
    );
    // The parent's own copy does.
    std::mem::ManuallyDrop::into_inner(session)
        .finish()
        .unwrap();
    assert!(dest.join("manifest.json").exists());

    // Children forked while a thread writes reports into the same folder, again and
    // again, each writing its own there.
    let shared = scratch("fork-writing");
    let stop = AtomicBool::new(false);
    let mut hung = 0;
    std::thread::scope(|s| {
        let parent_report = shared.join("parent");
        let stop = &stop;
        s.spawn(move || {
            while !stop.load(Relaxed) {
                write_report(&parent_report).unwrap();
            }
        });
        for k in 0..CHILDREN {
            let mine = shared.join(format!("child-{k}"));
            match in_child(move || if write_report(&mine).is_ok() { 0 } else { 1 }) {
                Some(code) => assert_eq!(code, 0, "child {k} could not write its report"),
                None => hung += 1,
            }
        }
        stop.store(true, Relaxed);
    });
    assert_eq!(
        hung, 0,
        "of {CHILDREN} children, these waited for the lock of a report another thread was writing"
    );
    for d in [root, shared] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
