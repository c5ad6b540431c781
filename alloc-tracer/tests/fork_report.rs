//! Reports and fork(): a child forked while another thread writes a report into a
//! folder can write its own report there (it inherits no lock on the folder), and a
//! child that drops its copy of a `Session` guard writes nothing over its parent's
//! report. One test: it forks, and the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Session, Settings, TracingAllocator, write_report};
use common::scratch;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const CHILDREN: usize = 20;

/// `common::in_child` with the 20 s this file allows a child.
fn in_child(f: impl FnOnce() -> i32) -> Option<i32> {
    common::in_child(Duration::from_secs(20), f)
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
    // again, each writing its own there: in `sites` mode, so that both symbolize
    // stacks (the `backtrace` crate's lock, taken then, must not be inherited held).
    Settings {
        mode: Mode::Sites,
        ..Default::default()
    }
    .apply();
    black_box(vec![0u8; 100]);
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
    // A child's report says whose counts it holds besides its own; the parent's
    // says nothing of the kind.
    let forked_from = |dir: std::path::PathBuf| {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        m["forked_from_pid"].clone()
    };
    assert_eq!(
        forked_from(shared.join("child-0")),
        serde_json::json!(std::process::id())
    );
    assert_eq!(forked_from(shared.join("parent")), serde_json::Value::Null);
    // A child that forks a child of its own still names its own parent.
    let grand = shared.join("after-grandchild");
    let grand_in_child = grand.clone();
    let code = in_child(move || {
        if in_child(|| 0) != Some(0) {
            return 2;
        }
        if write_report(&grand_in_child).is_ok() {
            0
        } else {
            1
        }
    });
    assert_eq!(code, Some(0));
    assert_eq!(forked_from(grand), serde_json::json!(std::process::id()));
    for d in [root, shared] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
