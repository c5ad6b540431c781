//! SIGINT, SIGTERM and SIGHUP during a run: the report of the run so far, marked
//! incomplete, and the shell's exit codes (130, 143, 129). Each run is bounded: a
//! driver still running after [`LIMIT`] is killed and the test fails.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use test_scratch::Scratch;

/// How long any run may take, start to exit.
const LIMIT: Duration = Duration::from_secs(60);

/// A run that goes on far longer than any test: one JSON line per iteration, each a
/// fraction of a second.
const ENDLESS: [&str; 6] = ["sha256", "--blocks", "2", "-i", "1000000", "--json"];

/// A fresh folder for one test.
fn scratch(test: &str) -> Scratch {
    Scratch::new(&format!("synth-driver-signals-{test}"))
}

/// A driver started in `cwd`, its output read by threads of the test (so that it
/// never blocks on a full pipe).
struct Run {
    child: Child,
    started: Instant,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Run {
    fn start(command: Command) -> Run {
        // The test itself may run with SIGHUP ignored (under nohup): the driver takes
        // it as under a terminal.
        Run::start_with(command, libc::SIG_DFL)
    }

    /// `start`, SIGHUP's disposition `hup` (SIG_IGN: as under `nohup`).
    fn start_with(mut command: Command, hup: libc::sighandler_t) -> Run {
        // SAFETY: `signal` is async-signal-safe, the only call between fork and exec.
        unsafe {
            command.pre_exec(move || {
                libc::signal(libc::SIGHUP, hup);
                Ok(())
            });
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = send.send(line);
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Run {
            child,
            started: Instant::now(),
            lines,
            stderr,
        }
    }

    /// Waits for the next iteration's line (the first: synthesis has run and been
    /// recorded).
    fn first_iteration(&mut self) {
        let left = LIMIT.saturating_sub(self.started.elapsed());
        match self.lines.recv_timeout(left) {
            Ok(line) => assert!(line.starts_with('{'), "not an iteration: {line}"),
            Err(e) => self.fail(&format!("no iteration line: {e}")),
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill has no memory-safety preconditions; `pid` is our child, which
        // has not been waited for, so the pid cannot have been reused.
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for the driver to exit; returns its status and stderr.
    fn finish(mut self) -> (ExitStatus, String) {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, self.stderr.join().unwrap());
            }
            if self.started.elapsed() > LIMIT {
                self.fail("still running");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("{why} after {:?}", self.started.elapsed());
    }
}

fn manifest(report: &Path) -> serde_json::Value {
    let text = std::fs::read(report.join("manifest.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", report.display()));
    serde_json::from_slice(&text).unwrap()
}

/// Only the report itself in `dir`: no staging folder or old report left beside it.
fn nothing_but(dir: &Path, names: &[&str]) {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert_eq!(found, names, "in {}", dir.display());
}

/// Interrupts an endless traced run with `signal` once it has printed an iteration;
/// returns the exit status and stderr.
fn interrupt(dir: &Path, trace: &str, signal: libc::c_int) -> (ExitStatus, String) {
    let mut command = common::driver();
    command
        .current_dir(dir)
        .args(["--trace", trace, "--report", "report"])
        .args(ENDLESS);
    let mut run = Run::start(command);
    run.first_iteration();
    run.signal(signal);
    run.finish()
}

fn assert_incomplete(dir: &Path, why: &str) {
    let manifest = manifest(&dir.join("report"));
    assert_eq!(manifest["incomplete"], why, "{manifest:#}");
    let allocs = manifest["totals"]["alloc_count"].as_u64().unwrap();
    assert!(allocs > 0, "{manifest:#}");
    nothing_but(dir, &["report"]);
}

/// The one line a signal prints, naming the signal and the folder.
fn assert_said(stderr: &str, why: &str) {
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains(why)).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].starts_with("synth-driver: "), "{stderr}");
    assert!(said[0].contains("report"), "{stderr}");
}

#[test]
fn sigint_writes_an_incomplete_report_and_exits_130() {
    let dir = scratch("sigint");
    let (status, stderr) = interrupt(&dir, "count", libc::SIGINT);
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_incomplete(&dir, "SIGINT");
    assert_said(&stderr, "SIGINT");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigterm_and_sighup_write_an_incomplete_report_and_exit_143_and_129() {
    for (signal, name, code) in [
        (libc::SIGTERM, "SIGTERM", 143),
        // The terminal went away (a dropped ssh session).
        (libc::SIGHUP, "SIGHUP", 129),
    ] {
        let dir = scratch(&name.to_lowercase());
        let (status, stderr) = interrupt(&dir, "count", signal);
        assert_eq!(status.code(), Some(code), "{stderr}");
        assert_incomplete(&dir, name);
        assert_said(&stderr, name);
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Under `nohup` (SIGHUP ignored) a hang-up changes nothing: the run goes on, and a
/// SIGINT after it writes the report.
#[test]
fn under_nohup_a_hangup_changes_nothing() {
    let dir = scratch("nohup");
    let mut command = common::driver();
    command
        .current_dir(&dir)
        .args(["--trace", "count", "--report", "report"])
        .args(ENDLESS);
    let mut run = Run::start_with(command, libc::SIG_IGN);
    run.first_iteration();
    run.signal(libc::SIGHUP);
    // Still running: it prints its next iterations.
    run.first_iteration();
    run.first_iteration();
    run.signal(libc::SIGINT);
    let (status, stderr) = run.finish();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_incomplete(&dir, "SIGINT");
    assert!(!stderr.contains("SIGHUP"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Signals that follow the first while its report is written change nothing: the
/// first one's report, whole, and its exit code.
#[test]
fn further_signals_while_writing_are_ignored() {
    let dir = scratch("twice");
    let mut command = common::driver();
    command
        .current_dir(&dir)
        .args(["--trace", "sites", "--report", "report"])
        .args(ENDLESS);
    let mut run = Run::start(command);
    run.first_iteration();
    run.signal(libc::SIGINT);
    for _ in 0..5 {
        run.signal(libc::SIGTERM);
        run.signal(libc::SIGINT);
        std::thread::sleep(Duration::from_millis(10));
    }
    let (status, stderr) = run.finish();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert_incomplete(&dir, "SIGINT");
    assert_said(&stderr, "SIGINT");
    assert!(!stderr.contains("SIGTERM"), "{stderr}");
    let report = analyzer::report::load(&dir.join("report")).unwrap();
    assert!(!report.sites.is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

/// The tracer's exit hook, set to the same folder spelled another way, writes no
/// second report over the incomplete one; set to another folder, it writes none
/// there either (a report of an interrupted run would claim it finished).
#[test]
fn exit_hook_writes_no_report_of_an_interrupted_run() {
    let dir = scratch("hook");
    for (hook, left) in [
        (dir.join("report"), &["report"][..]),
        (dir.join("other"), &["report"][..]),
    ] {
        let mut command = common::driver();
        command
            .current_dir(&dir)
            .env("ALLOC_TRACE", "count")
            .env("ALLOC_TRACE_REPORT", &hook)
            .args(["--trace", "count", "--report", "report"])
            .args(ENDLESS);
        let mut run = Run::start(command);
        run.first_iteration();
        run.signal(libc::SIGINT);
        let (status, stderr) = run.finish();
        assert_eq!(status.code(), Some(130), "{stderr}");
        assert_incomplete(&dir, "SIGINT");
        nothing_but(&dir, left);
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn without_report_a_signal_just_exits() {
    let dir = scratch("plain");
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let mut command = common::driver();
        command
            .current_dir(&dir)
            .args(["--trace", "count"])
            .args(ENDLESS);
        let mut run = Run::start(command);
        run.first_iteration();
        run.signal(signal);
        let (status, stderr) = run.finish();
        assert_eq!(status.code(), Some(code), "{stderr}");
        assert_eq!(stderr, "");
        nothing_but(&dir, &[]);
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_finished_run_writes_a_complete_report() {
    let dir = scratch("finished");
    let mut command = common::driver();
    command
        .current_dir(&dir)
        .args(["--trace", "count", "--report", "report"])
        .args(["sha256", "--blocks", "1", "--json"]);
    let (status, stderr) = Run::start(command).finish();
    assert!(status.success(), "{stderr}");
    let manifest = manifest(&dir.join("report"));
    assert_eq!(
        manifest["incomplete"],
        serde_json::Value::Null,
        "{manifest:#}"
    );
    nothing_but(&dir, &["report"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_binary_replaced_before_the_report_is_warned_of() {
    // A rebuild while a long run goes on unlinks the binary: the symbolizer, which
    // opens it by its path, then names none of its frames. The report says so, and
    // so does the line on standard error.
    let dir = scratch("replaced");
    let copy = dir.join("synth-driver");
    std::fs::copy(env!("CARGO_BIN_EXE_synth-driver"), &copy).unwrap();
    let mut command = Command::new(&copy);
    command
        .env_remove("ALLOC_TRACE")
        .current_dir(&dir)
        .args(["--trace", "sites", "--report", "report"])
        .args(ENDLESS);
    let mut run = Run::start(command);
    run.first_iteration();
    std::fs::remove_file(&copy).unwrap();
    run.signal(libc::SIGINT);
    let (status, stderr) = run.finish();
    assert_eq!(status.code(), Some(130), "{stderr}");
    let dropped = &manifest(&dir.join("report"))["dropped"];
    assert_eq!(dropped["binary_replaced"], true, "{dropped:#}");
    let unnamed = dropped["unnamed_addresses"].as_u64().unwrap();
    assert!(unnamed > 0, "{dropped:#}");
    assert!(
        stderr.contains("return addresses in the stacks have no name")
            && stderr.contains("deleted or replaced"),
        "{stderr}"
    );
    // The same run, its binary left in place: every frame named, no warning.
    let dir = scratch("in-place");
    let (status, stderr) = interrupt(&dir, "sites", libc::SIGINT);
    assert_eq!(status.code(), Some(130), "{stderr}");
    let dropped = &manifest(&dir.join("report"))["dropped"];
    assert_eq!(dropped["binary_replaced"], false, "{dropped:#}");
    assert_eq!(dropped["unnamed_addresses"], 0, "{dropped:#}");
    assert!(
        dropped["return_addresses"].as_u64().unwrap() > 0,
        "{dropped:#}"
    );
    assert!(!stderr.contains("have no name"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
