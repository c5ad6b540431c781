//! The tracer dropped into programs unlike a test binary: each case runs as a child
//! process of this one whose first call is `Settings::apply`, before any allocation.
//! So this binary has no test harness, and no Rust `main` either (`no_main`): Rust's
//! runtime allocates before `main` (the main thread's name, for its stack-overflow
//! handler), which a C program calling into Rust, say, does not.
//!
//! * `report`: the `ALLOC_TRACE_REPORT` exit hook is armed by `apply` too, and a
//!   relative report path (of the exit hook, of a `Session`) lies in the directory
//!   the program was in when it chose it, though it changed directory since.
//! * `fork`: the fork handlers are armed by `apply` too: a child forked while another
//!   thread holds the registry lock starts a thread (which takes it) and finishes.
//! * `key-destructor`: threads whose first call is a free in a pthread key's
//!   destructor, after their thread-locals' destructors ran, still hand their state
//!   over at exit (else each stays in the live list for good).
//! * `one-thread`: with `ALLOC_TRACE_TIMELINE_MS=0` the tracer starts no thread (the
//!   mode from `ALLOC_TRACE`, no `apply`).
//! * `no-proc`: without `/proc` (hidden in a mount namespace of the child's own),
//!   where glibc cannot find the main thread's stack, the main thread's allocations
//!   still get their stacks. Skipped, and said so, where the child may not make a
//!   namespace.

#![no_main]

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const CASE: &str = "ALLOC_TRACER_DROP_IN_CASE";

/// The C entry point, called by the C library's start code without Rust's runtime
/// set up before it.
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // Read without allocating: `apply` comes before any allocation. The one-thread
    // case takes its mode from the environment with the rest of its settings.
    // SAFETY: a NUL-terminated name; the value is read before anything sets one.
    let case = unsafe { libc::getenv(c"ALLOC_TRACER_DROP_IN_CASE".as_ptr()) };
    // SAFETY: a value `getenv` returned is NUL-terminated.
    let case = (!case.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(case) });
    // Before the first allocation, which finds the main thread's stack.
    let hidden = (case == Some(c"no-proc")).then(hide_proc);
    if case != Some(c"one-thread") {
        Settings {
            mode: if hidden.is_some() {
                Mode::Sites
            } else {
                Mode::Count
            },
            ..Default::default()
        }
        .apply();
    }
    let code = match case.map(|c| c.to_str().unwrap()) {
        Some("report") => report_case(),
        Some("fork") => fork_case(),
        Some("key-destructor") => key_destructor_case(),
        Some("one-thread") => one_thread_case(),
        Some("no-proc") => no_proc_case(hidden.unwrap()),
        Some(other) => panic!("unknown case {other}"),
        None => {
            run_all();
            0
        }
    };
    std::process::exit(code);
}

fn scratch(name: &str) -> common::Scratch {
    common::scratch(&format!("drop-in-{name}"))
}

/// Runs `case` as a child in `cwd` with `env`, killing it after 60 s; returns its
/// standard error.
fn child(case: &str, cwd: &Path, env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.current_dir(cwd)
        .env(CASE, case)
        .env_remove("ALLOC_TRACE")
        .env_remove("ALLOC_TRACE_REPORT")
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut c = cmd.spawn().unwrap();
    let start = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = c.kill();
            panic!("case {case}: still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = c.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "case {case}: {:?}\n{stderr}",
        out.status
    );
    stderr
}

fn run_all() {
    let dir = scratch("report");
    let stderr = child("report", &dir, &[("ALLOC_TRACE_REPORT", "report")]);
    assert!(
        stderr.contains("alloc-tracer: report written to "),
        "{stderr}"
    );
    let manifest = std::fs::read(dir.join("report/manifest.json"))
        .unwrap_or_else(|e| panic!("no report where the program started ({e}): {stderr}"));
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(manifest["mode"], "count");
    assert!(dir.join("session-report/manifest.json").exists());
    assert!(!dir.join("moved/report").exists() && !dir.join("moved/session-report").exists());
    println!("report: ok");

    for case in ["fork", "key-destructor"] {
        child(case, &dir, &[]);
        println!("{case}: ok");
    }
    child(
        "one-thread",
        &dir,
        &[("ALLOC_TRACE", "count"), ("ALLOC_TRACE_TIMELINE_MS", "0")],
    );
    println!("one-thread: ok");
    let stderr = child("no-proc", &dir, &[]);
    match stderr.lines().find_map(|l| l.strip_prefix("skipped: ")) {
        Some(why) => println!("no-proc: skipped ({why})"),
        None => println!("no-proc: ok"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn report_case() -> i32 {
    let session = alloc_tracer::Session::new("session-report");
    for i in 0..1000 {
        black_box(vec![0u8; 64 + i % 64]);
    }
    std::fs::create_dir("moved").unwrap();
    std::env::set_current_dir("moved").unwrap();
    session.finish().unwrap();
    0
}

fn fork_case() -> i32 {
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        // The thread's state first: made under the registry lock, it would wait on
        // it.
        black_box(vec![0u8; 1]);
        alloc_tracer::with_registry_locked(|| {
            held_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(300));
        });
    });
    held_rx.recv().unwrap();
    // The child only starts and joins a thread.
    let code = common::in_child(Duration::from_secs(10), || {
        let ok = std::thread::spawn(|| black_box(vec![1u8; 100]).len())
            .join()
            .is_ok();
        if ok { 0 } else { 1 }
    });
    holder.join().unwrap();
    match code {
        Some(0) => 0,
        Some(status) => {
            eprintln!("forked child failed: exit {status}");
            2
        }
        None => {
            eprintln!("forked child hung: it inherited the registry lock held");
            3
        }
    }
}

static mut KEY: libc::pthread_key_t = 0;

extern "C" fn free_in_key_destructor(p: *mut libc::c_void) {
    // SAFETY: `p` came from `Box::into_raw` of a `[u8; 64]`, handed over once.
    drop(unsafe { Box::from_raw(p.cast::<[u8; 64]>()) });
}

extern "C" fn set_key(p: *mut libc::c_void) -> *mut libc::c_void {
    // No allocation here: the thread's first call to the allocator is the free in
    // the key's destructor.
    // SAFETY: a key made before any of these threads started.
    unsafe { libc::pthread_setspecific(KEY, p) };
    std::ptr::null_mut()
}

fn key_destructor_case() -> i32 {
    const THREADS: u64 = 40;
    // SAFETY: made once, before the threads that use it.
    unsafe { libc::pthread_key_create(&raw mut KEY, Some(free_in_key_destructor)) };
    let before = memory_bytes();
    for _ in 0..THREADS {
        let p = Box::into_raw(Box::new([7u8; 64])).cast::<libc::c_void>();
        // SAFETY: a zeroed pthread_t is written by pthread_create; `set_key` does not
        // unwind.
        unsafe {
            let mut t: libc::pthread_t = std::mem::zeroed();
            assert_eq!(
                libc::pthread_create(&mut t, std::ptr::null(), set_key, p),
                0
            );
            libc::pthread_join(t, std::ptr::null_mut());
        }
    }
    let after = memory_bytes();
    // Every one of those threads made a state of about 210 KiB; handed over at exit,
    // none is left.
    let state = 200 * 1024;
    if after > before + state {
        eprintln!(
            "{} KiB more tracer memory after {THREADS} threads exited: their states stayed",
            (after - before) / 1024
        );
        return 1;
    }
    0
}

/// The tracer's memory (`tracer.memory_bytes`), from a report.
fn memory_bytes() -> u64 {
    let dir = scratch("memory");
    alloc_tracer::write_report(&dir.join("r")).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("r/manifest.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    manifest["tracer"]["memory_bytes"].as_u64().unwrap()
}

fn one_thread_case() -> i32 {
    black_box(vec![0u8; 100]);
    if alloc_tracer::counts().total(|p| p.allocs) == 0 {
        eprintln!("not tracing");
        return 2;
    }
    let threads = std::fs::read_dir("/proc/self/task").unwrap().count();
    if threads == 1 {
        0
    } else {
        eprintln!("{threads} threads with the timeline off");
        1
    }
}

/// Hides `/proc` from this process: a mount namespace of its own (in a user namespace
/// of its own when not privileged), with an empty tmpfs over `/proc`. Allocates
/// nothing. `Err`: the step that failed and its `errno`.
fn hide_proc() -> Result<(), (&'static str, i32)> {
    let errno = || std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let none = std::ptr::null();
    // SAFETY: system calls with NUL-terminated names or nulls where they take none.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0
            && libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0
        {
            return Err(("unshare", errno()));
        }
        // Private first, or the mount below would show in the namespace this one
        // copied, the machine's.
        let private = libc::MS_REC | libc::MS_PRIVATE;
        if libc::mount(none, c"/".as_ptr(), none, private, std::ptr::null()) != 0 {
            return Err(("making mounts private", errno()));
        }
        let (tmpfs, proc) = (c"tmpfs".as_ptr(), c"/proc".as_ptr());
        if libc::mount(tmpfs, proc, tmpfs, 0, std::ptr::null()) != 0 {
            return Err(("mounting over /proc", errno()));
        }
    }
    Ok(())
}

#[inline(never)]
fn allocate_in_no_proc_case() -> usize {
    black_box(vec![0u8; 100]).len()
}

fn no_proc_case(hidden: Result<(), (&'static str, i32)>) -> i32 {
    if let Err((step, errno)) = hidden {
        eprintln!("skipped: cannot hide /proc here ({step}: errno {errno})");
        return 0;
    }
    if std::fs::metadata("/proc/self/maps").is_ok() {
        eprintln!("/proc/self/maps still there");
        return 2;
    }
    let (_, m) = alloc_tracer::measure(|| {
        for _ in 0..100 {
            allocate_in_no_proc_case();
        }
    });
    assert_eq!(m.allocs, 100);
    // Stacks walked up to the C library's start code (the program's own frames are
    // named by address: the symbolizer finds the executable through /proc).
    let sites = alloc_tracer::last_top_sites();
    if sites.is_empty() || sites.iter().any(|(name, _)| name == "(no frames)") {
        eprintln!("the main thread's allocations got no stacks: {sites:?}");
        return 1;
    }
    0
}
