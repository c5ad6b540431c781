//! A report folder's parent that the program can enter and write but not read is
//! refused by the check made before a run (`check_report_dir`, as `Session::new` and
//! `ALLOC_TRACE_REPORT` run it): the writer opens the parent to lock it, so the
//! report would be lost at the end. Permissions bind root only without its
//! capabilities to override them, so the check runs in a forked child that gives
//! those two up first (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`), keeping its user,
//! so that it can still enter every folder of the test's path (a temporary folder
//! under a `0700` home among them). One test: the child is forked from a process
//! with no other test thread.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use test_scratch::Scratch;

/// The capabilities that let root read and search any folder.
const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;
/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words of each set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// What the child found, as its exit code.
const REFUSED_UNREADABLE_AND_TOOK_READABLE: i32 = 0;
const TOOK_UNREADABLE: i32 = 1;
const REFUSED_READABLE: i32 = 2;
const KEPT_CAPABILITIES: i32 = 3;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Drops the capabilities that override permissions on files and folders from
/// every set of this (single-threaded) process; true when done. `access`, which the
/// check uses, tests a root caller's permitted set, so that set loses them too.
fn drop_override_capabilities() -> bool {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: `header` and `data` have the kernel's layout for version 3 (two data
    // words), and live across both calls.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return false;
        }
        let mask = !(1 << CAP_DAC_OVERRIDE | 1 << CAP_DAC_READ_SEARCH);
        data[0].effective &= mask;
        data[0].permitted &= mask;
        data[0].inheritable &= mask;
        libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) == 0
    }
}

/// In the child: the check on `report` inside `parent`, made unreadable, then
/// readable again.
fn child(parent: &Path) -> i32 {
    if !drop_override_capabilities() {
        return KEPT_CAPABILITIES;
    }
    let report = parent.join("report");
    if alloc_tracer::check_report_dir(&report).is_ok() {
        return TOOK_UNREADABLE;
    }
    // The readable case: a second folder, made so beforehand.
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
            REFUSED_READABLE => "a readable parent was refused (its error above)",
            KEPT_CAPABILITIES => "the child could not give up its capabilities",
            _ => "the child failed",
        }
    );
    for folder in [&parent, &readable] {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
