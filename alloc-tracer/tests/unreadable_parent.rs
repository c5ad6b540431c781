//! A report folder's parent that the program can enter and write but not read is
//! refused by the check made before a run (`check_report_dir`, as `Session::new` and
//! `ALLOC_TRACE_REPORT` run it): the writer opens the parent to lock it, so the
//! report would be lost at the end. Permissions do not bind root, so the check runs
//! in a forked child that gives up root for `nobody` first (as whoever runs the
//! tests, where that is not root). One test: the child is forked from a process with
//! no other test thread.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use test_scratch::Scratch;

/// The user and group the child takes when it runs as root.
const NOBODY: libc::uid_t = 65534;

/// What the child found, as its exit code.
const REFUSED_UNREADABLE_AND_TOOK_READABLE: i32 = 0;
const TOOK_UNREADABLE: i32 = 1;
const REFUSED_READABLE: i32 = 2;
const NOT_NOBODY: i32 = 3;

/// In the child: the check on `report` inside `parent`, made unreadable, then
/// readable again.
fn child(parent: &Path) -> i32 {
    // SAFETY: plain calls; groups first, while still root.
    unsafe {
        if libc::geteuid() == 0
            && (libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0)
        {
            return NOT_NOBODY;
        }
    }
    let report = parent.join("report");
    if alloc_tracer::check_report_dir(&report).is_ok() {
        return TOOK_UNREADABLE;
    }
    // The parent is the test's (root's, or the user's): only its owner may chmod
    // it, so the readable case is a second folder made so beforehand.
    let readable = parent.with_extension("readable").join("report");
    if let Err(e) = alloc_tracer::check_report_dir(&readable) {
        eprintln!("{e}");
        return REFUSED_READABLE;
    }
    REFUSED_UNREADABLE_AND_TOOK_READABLE
}

#[test]
fn a_parent_that_cannot_be_read_is_refused_before_the_run() {
    let dir = Scratch::new("alloc-tracer-unreadable-parent");
    let parent = dir.join("parent");
    let readable = parent.with_extension("readable");
    for (folder, mode) in [(&parent, 0o333), (&readable, 0o777)] {
        std::fs::create_dir(folder).unwrap();
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // SAFETY: the child makes its checks and ends with `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child(&parent);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "the child ended by a signal");
    let code = libc::WEXITSTATUS(status);
    assert_eq!(
        code,
        REFUSED_UNREADABLE_AND_TOOK_READABLE,
        "{}",
        match code {
            TOOK_UNREADABLE => "a parent it cannot read was taken",
            REFUSED_READABLE =>
                "a readable parent was refused (its error above): can nobody (uid 65534) \
                 enter the temporary folder's path? If not, set TMPDIR to one it can",
            NOT_NOBODY => "the child could not give up root",
            _ => "the child failed",
        }
    );
    for folder in [&parent, &readable] {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
