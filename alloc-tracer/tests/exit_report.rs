//! `ALLOC_TRACE_REPORT` writes the report at exit however the mode was chosen (from
//! `ALLOC_TRACE` or in code), says why when tracing never came on, and bad settings
//! are named.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use std::hint::black_box;
use std::path::Path;
use std::process::{Command, Output};

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Tells the tracer, before any allocation, that this program names bad settings
/// itself, when the child's environment asks (`ALLOC_TRACER_TEST_QUIET`).
extern "C" fn quiet_if_asked() {
    // SAFETY: a NUL-terminated name; `getenv` neither allocates nor keeps it.
    if !unsafe { libc::getenv(c"ALLOC_TRACER_TEST_QUIET".as_ptr()) }.is_null() {
        alloc_tracer::env_checked_by_program();
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static QUIET_IF_ASKED: extern "C" fn() = quiet_if_asked;

/// Allocations the child makes once tracing is on.
const ALLOCS: usize = 1000;

/// Run as a child by the tests below: chooses `count` mode in code when
/// `ALLOC_TRACER_TEST_CHILD` is `apply`, then allocates. Ignored, so that a plain
/// `cargo test` does not count it as a test that passed.
#[test]
#[ignore = "run as a child by the tests of this file"]
fn child_allocates() {
    let Some(how) = std::env::var_os("ALLOC_TRACER_TEST_CHILD") else {
        return;
    };
    if how == "apply" || how == "fork" {
        Settings {
            mode: Mode::Count,
            ..Default::default()
        }
        .apply();
    }
    // The exit report held back (`hold`), or held and let go again (`release`).
    if let Some(hold) = std::env::var_os("ALLOC_TRACER_TEST_HOLD") {
        alloc_tracer::hold_exit_report(true);
        if hold == "release" {
            alloc_tracer::hold_exit_report(false);
        }
    }
    // A session of its own, made and dropped before any work.
    let session = std::env::var_os("ALLOC_TRACER_TEST_SESSION").map(alloc_tracer::Session::new);
    // Not `eprintln!`, which the test harness captures.
    std::io::Write::write_all(&mut std::io::stderr(), b"child: session made\n").unwrap();
    for i in 0..ALLOCS {
        black_box(vec![0u8; 64 + i % 64]);
    }
    // A report of its own to the exit report's folder, then more work (`more`), its
    // summary printed (`print`) or nothing (`end`), and the process exits with nothing allocated after (the test
    // harness would allocate as it ends).
    if let Some(then) = std::env::var_os("ALLOC_TRACER_TEST_WRITE") {
        let dir = std::env::var_os("ALLOC_TRACE_REPORT").unwrap();
        let summary = alloc_tracer::write_report(Path::new(&dir)).unwrap();
        if then == "print" {
            // Its summary printed: a few allocations, not more work.
            let text = summary.to_string();
            std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes()).unwrap();
        }
        if then == "more" {
            for i in 0..3 * ALLOCS {
                black_box(vec![0u8; 64 + i % 64]);
            }
        }
        std::process::exit(0);
    }
    if how == "fork" {
        // A forked child that allocates and ends through `exit`, its exit hooks
        // run, the session never dropped.
        // SAFETY: the child allocates and exits; the tracer's fork handlers leave
        // it no lock held.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            for i in 0..ALLOCS {
                black_box(vec![0u8; 64 + i % 64]);
            }
            // SAFETY: ends the child as a program would, exit hooks included.
            unsafe { libc::exit(0) };
        }
        let code = common::wait_child(pid, std::time::Duration::from_secs(60));
        assert_eq!(code, Some(0), "the forked child");
    }
    if std::env::var_os("ALLOC_TRACER_TEST_SMALL_STACK").is_some() {
        // The exit report written on a thread of a 64 KiB stack, too small for it:
        // the thread allocates, then ends the process.
        std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(|| {
                for i in 0..ALLOCS {
                    black_box(vec![0u8; 64 + i % 64]);
                }
                std::process::exit(0);
            })
            .unwrap();
        loop {
            std::thread::park();
        }
    }
    if let Some(code) = std::env::var_os("ALLOC_TRACER_TEST_EXIT") {
        // The session is never dropped.
        std::process::exit(code.to_str().and_then(|c| c.parse().ok()).unwrap_or(0));
    }
    drop(session);
}

/// The child, with `ALLOC_TRACE_REPORT` set to `dir` and `env` added.
fn child(how: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "child_allocates",
        "--test-threads=1",
    ])
    .env("ALLOC_TRACER_TEST_CHILD", how)
    .env("ALLOC_TRACE_REPORT", dir)
    .env_remove("ALLOC_TRACE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

#[test]
fn a_mode_chosen_in_code_is_reported_at_exit() {
    let dir_scratch = common::scratch("exit-apply");
    let dir = dir_scratch.join("report");
    let out = child("apply", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alloc-tracer: report written to "),
        "{stderr}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["mode"], "count");
    assert!(manifest["totals"]["alloc_count"].as_u64().unwrap() >= ALLOCS as u64);
    // The exit hook's own allocations, made after the thread's exit destructors, are
    // the tracer's, not the program's.
    assert_eq!(manifest["dropped"]["late_alloc_count"], 0, "{manifest}");
}

#[test]
fn a_thread_of_a_small_stack_that_exits_gets_its_report_written() {
    let dir_scratch = common::scratch("exit-small-stack");
    let dir = dir_scratch.join("report");
    let out = child("apply", &dir, &[("ALLOC_TRACER_TEST_SMALL_STACK", "1")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alloc-tracer: report written to "),
        "{stderr}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    // The main thread's allocations and the small one's.
    assert!(manifest["totals"]["alloc_count"].as_u64().unwrap() >= 2 * ALLOCS as u64);
    // The thread that wrote it counts nothing of its own.
    assert_eq!(manifest["dropped"]["late_alloc_count"], 0, "{manifest}");
}

#[test]
fn a_report_the_program_wrote_there_is_not_written_again_unless_it_worked_since() {
    for (then, again) in [("end", false), ("print", false), ("more", true)] {
        let scratch = common::scratch(&format!("exit-written-{then}"));
        let dir = scratch.join("report");
        let out = child("apply", &dir, &[("ALLOC_TRACER_TEST_WRITE", then)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.contains("alloc-tracer: report written to "),
            again,
            "{then}: {stderr}"
        );
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
        let allocs = manifest["totals"]["alloc_count"].as_u64().unwrap();
        // The work after the program's own report is in the one at exit.
        assert_eq!(allocs >= 2 * ALLOCS as u64, again, "{then}: {allocs}");
    }
}

#[test]
fn a_held_exit_report_is_not_written_until_let_go() {
    let dir_scratch = common::scratch("exit-held");
    let dir = dir_scratch.join("report");
    let out = child("apply", &dir, &[("ALLOC_TRACER_TEST_HOLD", "hold")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("report written"), "{stderr}");
    assert!(!dir.exists(), "a held report was written");
    let out = child("apply", &dir, &[("ALLOC_TRACER_TEST_HOLD", "release")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("report written"), "{stderr}");
    assert!(dir.join("manifest.json").exists());
}

#[test]
fn a_report_asked_for_with_tracing_never_on_says_why_there_is_none() {
    let dir_scratch = common::scratch("exit-never");
    let dir = dir_scratch.join("report");
    let out = child("idle", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ALLOC_TRACE_REPORT is set, but tracing was never on"),
        "{stderr}"
    );
    assert!(!dir.exists());
    // Chosen off: nothing to say.
    let out = child("idle", &dir, &[("ALLOC_TRACE", "off")]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("alloc-tracer"));
    assert!(!dir.exists());
}

#[test]
fn a_bad_setting_is_named_with_its_value() {
    let dir_scratch = common::scratch("exit-bad");
    let dir = dir_scratch.join("report");
    for (name, value) in [
        ("ALLOC_TRACE", "site"),
        ("ALLOC_TRACE_HEAP", "1MB"),
        ("ALLOC_TRACE_DEPTH", "99"),
    ] {
        let out = child("idle", &dir, &[(name, value)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = format!("alloc-tracer: ignoring invalid {name}={value} (expected ");
        assert!(stderr.contains(&line), "{stderr}");
        assert!(
            stderr.contains("); tracing is off unless the program applies settings of its own\n"),
            "{stderr}"
        );
        assert!(!dir.exists());
    }
}

#[test]
fn a_program_that_names_bad_settings_itself_is_left_to_do_so() {
    let dir_scratch = common::scratch("exit-quiet");
    let dir = dir_scratch.join("report");
    let quiet = [("ALLOC_TRACER_TEST_QUIET", "1")];
    let out = child("idle", &dir, &[("ALLOC_TRACE", "count,sites"), quiet[0]]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ignoring invalid"), "{stderr}");
    assert!(!dir.exists());
    // A valid setting still applies from the first allocation.
    let out = child("idle", &dir, &[("ALLOC_TRACE", "count"), quiet[0]]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alloc-tracer: report written to "),
        "{stderr}"
    );
}

#[test]
fn a_destination_the_report_cannot_go_to_is_named_at_the_start() {
    // A folder of the user's: refused at the end, and said at the first allocation,
    // before the run.
    let dir_scratch = common::scratch("exit-early");
    let dir = dir_scratch.join("mine");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "keep me").unwrap();
    let out = child("idle", &dir, &[("ALLOC_TRACE", "count")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let early = stderr
        .find("alloc-tracer: ALLOC_TRACE_REPORT: ")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        stderr[early..].contains("holds notes.txt besides report files"),
        "{stderr}"
    );
    let at_end = stderr
        .find("report not written")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(early < at_end, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "keep me"
    );
    // Under a file, where no folder can be made.
    let file_scratch = common::scratch("exit-early-file");
    let file = file_scratch.join("plain");
    std::fs::write(&file, "x").unwrap();
    let out = child("idle", &file.join("report"), &[("ALLOC_TRACE", "count")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("plain: not a folder, and the report would go inside it"),
        "{stderr}"
    );
    // And at the end, in the same words, not the error of making folders there.
    let at_end = stderr
        .find("report not written: ")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        stderr[at_end..]
            .lines()
            .next()
            .unwrap()
            .ends_with("plain: not a folder, and the report would go inside it"),
        "{stderr}"
    );
    // A path that names no folder: `..` last, or `.` (which `Path` reads away, and
    // a rename cannot land on), also where it is an earlier report.
    let earlier = file.parent().unwrap().join("earlier");
    child("idle", &earlier, &[("ALLOC_TRACE", "count")]);
    assert!(earlier.join("manifest.json").exists());
    for path in ["x/..", "x/.", "earlier/.", "earlier/./", "earlier/.//"] {
        let out = child(
            "idle",
            &file.parent().unwrap().join(path),
            &[("ALLOC_TRACE", "count")],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("names no folder to write"),
            "{path}: {stderr}"
        );
    }
    // A good destination: no word at the start.
    let good_scratch = common::scratch("exit-early-good");
    let good = good_scratch.join("report");
    let out = child("idle", &good, &[("ALLOC_TRACE", "count")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("ALLOC_TRACE_REPORT: "), "{stderr}");
    assert!(good.join("manifest.json").exists());
}

#[test]
fn a_session_names_a_destination_it_cannot_write_when_made() {
    let dir_scratch = common::scratch("session-early");
    let dir = dir_scratch.join("mine");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "keep me").unwrap();
    let elsewhere_scratch = common::scratch("session-early-exit");
    let elsewhere = elsewhere_scratch.join("report");
    let out = child(
        "apply",
        &elsewhere,
        &[("ALLOC_TRACER_TEST_SESSION", dir.to_str().unwrap())],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let early = stderr
        .find("alloc-tracer: Session: ")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        stderr[early..].contains("holds notes.txt besides report files"),
        "{stderr}"
    );
    assert!(
        early < stderr.find("child: session made").unwrap(),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "keep me"
    );
}

#[test]
fn a_session_never_dropped_writes_its_report_at_exit() {
    let dir_scratch = common::scratch("session-exit");
    let dir = dir_scratch.join("report");
    let hook_scratch = common::scratch("session-exit-hook");
    let hook = hook_scratch.join("report");
    let manifest = |dir: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
    };
    let out = child(
        "apply",
        &hook,
        &[
            ("ALLOC_TRACER_TEST_SESSION", dir.to_str().unwrap()),
            ("ALLOC_TRACER_TEST_EXIT", "0"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("(its Session was not dropped before the process exited)"),
        "{stderr}"
    );
    let m = manifest(&dir);
    assert!(m["totals"]["alloc_count"].as_u64().unwrap() >= ALLOCS as u64);
    assert_eq!(m["incomplete"], serde_json::Value::Null);
    // The exit hook's report is written as well.
    assert_eq!(manifest(&hook)["incomplete"], serde_json::Value::Null);
    // A program that bails out: both reports say the run did not finish, so that
    // no budget judges them.
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "child_allocates"])
        .env("ALLOC_TRACER_TEST_CHILD", "apply")
        .env("ALLOC_TRACE_REPORT", &hook)
        .env("ALLOC_TRACER_TEST_SESSION", &dir)
        .env("ALLOC_TRACER_TEST_EXIT", "3")
        .env_remove("ALLOC_TRACE");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(manifest(&dir)["incomplete"], "exit status 3");
    assert_eq!(manifest(&hook)["incomplete"], "exit status 3");
}

#[test]
fn a_session_with_tracing_never_on_writes_no_report_and_says_why() {
    let dir_scratch = common::scratch("session-never");
    let dir = dir_scratch.join("report");
    let hook_scratch = common::scratch("session-never-hook");
    let hook = hook_scratch.join("report");
    let session = [("ALLOC_TRACER_TEST_SESSION", dir.to_str().unwrap())];
    let out = child("idle", &hook, &session);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alloc-tracer: Session: tracing was never on (set ALLOC_TRACE"),
        "{stderr}"
    );
    assert!(!dir.exists(), "a report of zeros would pass any budget");
    // An empty ALLOC_TRACE (a variable that was not set) chose nothing either.
    let out = child("idle", &hook, &[session[0], ("ALLOC_TRACE", "")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tracing was never on"), "{stderr}");
    assert!(!dir.exists());
    // ALLOC_TRACE=off chose it: nothing to say.
    let out = child("idle", &hook, &[session[0], ("ALLOC_TRACE", "off")]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("alloc-tracer"));
    assert!(!dir.exists());
}

#[test]
fn a_traced_run_whose_report_nobody_asked_for_says_so_at_exit() {
    let run = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--ignored", "--exact", "child_allocates"])
            .env("ALLOC_TRACER_TEST_CHILD", "idle")
            .env("ALLOC_TRACE", "count")
            .env_remove("ALLOC_TRACE_REPORT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let note = "alloc-tracer: ALLOC_TRACE traced this run, but nothing asked for its report: \
                set ALLOC_TRACE_REPORT=DIR, or make an alloc_tracer::Session";
    let stderr = run(&[]);
    assert!(stderr.contains(note), "{stderr}");
    // A Session asked for one; a program that reads the variables itself knows.
    let dir_scratch = common::scratch("exit-asked");
    let dir = dir_scratch.join("report");
    let stderr = run(&[("ALLOC_TRACER_TEST_SESSION", dir.to_str().unwrap())]);
    assert!(!stderr.contains("nothing asked"), "{stderr}");
    assert!(dir.join("manifest.json").exists());
    let stderr = run(&[("ALLOC_TRACER_TEST_QUIET", "1")]);
    assert!(!stderr.contains("nothing asked"), "{stderr}");
}

#[test]
fn misspelt_and_empty_settings_are_named() {
    let dir_scratch = common::scratch("exit-misspelt");
    let dir = dir_scratch.join("report");
    let out = child("apply", &dir, &[("ALLOC_TRACE_REPROT", "elsewhere")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("alloc-tracer: ignoring ALLOC_TRACE_REPROT, which the tracer does not read"),
        "{stderr}"
    );
    assert!(dir.join("manifest.json").exists());
    // An empty report path (`ALLOC_TRACE_REPORT=$UNSET`) is not the working folder.
    let out = child("apply", Path::new(""), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("alloc-tracer: ALLOC_TRACE_REPORT is empty: no report at exit"),
        "{stderr}"
    );
    assert!(!stderr.contains("report written"), "{stderr}");
}

#[test]
fn a_report_another_process_wrote_during_the_run_is_moved_aside_not_replaced() {
    // As a program the child ran would leave it (its `ALLOC_TRACE_REPORT` inherited,
    // no %p): another pid, ended after the child started.
    let dir_scratch = common::scratch("exit-concurrent");
    let dir = dir_scratch.join("report");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = |start: f64, end: f64| {
        format!(
            r#"{{"tool": "alloc-tracer", "pid": 1, "start_unix_s": {start}, "end_unix_s": {end}, "schema_version": 1}}"#
        )
    };
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 3600.0;
    let theirs = manifest(later - 1.0, later);
    std::fs::write(dir.join("manifest.json"), &theirs).unwrap();
    let out = child("apply", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("held the report of process 1, written while this one ran: moved to"),
        "{stderr}"
    );
    let aside = dir.with_file_name("report-1");
    assert_eq!(
        std::fs::read_to_string(aside.join("manifest.json")).unwrap(),
        theirs
    );
    let ours: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(ours["mode"], "count");
    // One from a run that ended before this one began is replaced as ever.
    let old = manifest(1.0, 2.0);
    std::fs::write(dir.join("manifest.json"), &old).unwrap();
    let out = child("apply", &dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("moved to"), "{stderr}");
    assert_ne!(
        std::fs::read_to_string(dir.join("manifest.json")).unwrap(),
        old
    );
    assert!(!dir.with_file_name("report-1-1").exists());
}

#[test]
fn a_forked_child_that_exits_writes_its_own_reports_only_where_the_path_holds_pid() {
    let scratch = common::scratch("exit-fork");
    // The paths' parent: the reports of each case, and nothing else.
    let reports = |case: &str| -> Vec<serde_json::Value> {
        let mut found: Vec<serde_json::Value> = std::fs::read_dir(scratch.join(case))
            .unwrap()
            .map(|e| {
                let m = std::fs::read(e.unwrap().path().join("manifest.json")).unwrap();
                serde_json::from_slice(&m).unwrap()
            })
            .collect();
        found.sort_by_key(|m| m["forked_from_pid"].as_u64());
        found
    };
    for (case, pattern) in [("plain", "r"), ("per-process", "r-%p")] {
        let exit_dir = scratch.join(case).join("exit").join(pattern);
        let session_dir = scratch.join(case).join("session").join(pattern);
        std::fs::create_dir_all(exit_dir.parent().unwrap()).unwrap();
        std::fs::create_dir_all(session_dir.parent().unwrap()).unwrap();
        let out = child(
            "fork",
            &exit_dir,
            &[("ALLOC_TRACER_TEST_SESSION", session_dir.to_str().unwrap())],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        for (what, dir) in [("exit", &exit_dir), ("session", &session_dir)] {
            let written = reports(&format!("{case}/{what}"));
            let none = match what {
                "exit" => "a forked child writes no report at exit to",
                _ => "a forked child's session writes no report to",
            };
            let says_none = stderr.contains(&format!("{none} {}", dir.display()));
            if case == "plain" {
                // The parent's report only, and the child says why it wrote none.
                assert_eq!(written.len(), 1, "{what}: {stderr}");
                assert!(written[0]["forked_from_pid"].is_null(), "{what}");
                assert!(says_none, "{what}: {stderr}");
            } else {
                // One each, the child's naming the parent.
                assert_eq!(written.len(), 2, "{what}: {stderr}");
                assert!(written[0]["forked_from_pid"].is_null(), "{what}");
                assert_eq!(
                    written[1]["forked_from_pid"], written[0]["pid"],
                    "{what}: the child names its parent"
                );
                assert!(!says_none, "{what}: {stderr}");
                // Each counts its own run: the child's includes the parent's
                // allocations before the fork, and its own after.
                let allocs = |m: &serde_json::Value| m["totals"]["alloc_count"].as_u64().unwrap();
                assert!(allocs(&written[1]) > allocs(&written[0]) / 2, "{what}");
            }
        }
    }
}
