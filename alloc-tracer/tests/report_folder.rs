//! The report writer never destroys what it did not write (not even a folder made
//! while it writes), lets concurrent writers take turns, and leaves nothing behind
//! when a write fails. One test: it forks, and
//! the mode is process-wide.

mod common;

use alloc_tracer::{Mode, Settings, TracingAllocator, write_report};
use alloc_tracer_format::manifest::Manifest;
use common::scratch;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Names in `parent` other than `keep`: staging or set-aside folders left behind.
fn strays(parent: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

/// Every file under `dir` with its contents, sorted.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Runs `f` in a forked child (this test is the process's only thread then, so the
/// child starts with every lock free) and returns its exit code; fails the test if
/// the child runs past `limit`.
fn in_child(limit: Duration, f: impl FnOnce() -> i32) -> i32 {
    common::in_child(limit, f).unwrap_or_else(|| panic!("child still running after {limit:?}"))
}

#[test]
fn writes_only_its_own_reports() {
    Settings {
        mode: Mode::Count,
        ..Default::default()
    }
    .apply();
    let v: Vec<u64> = (0..1000).collect();
    assert_eq!(v.len(), 1000);

    // A folder with a manifest.json that is not ours, and other files: untouched.
    let root = scratch("foreign");
    let app = root.join("app");
    std::fs::create_dir_all(app.join("icons")).unwrap();
    std::fs::write(
        app.join("manifest.json"),
        br#"{"name": "an extension", "manifest_version": 3}"#,
    )
    .unwrap();
    std::fs::write(app.join("index.html"), b"<html></html>").unwrap();
    std::fs::write(app.join("icons/a.png"), b"png").unwrap();
    let before = contents(&app);
    let err = write_report(&app).unwrap_err().to_string();
    assert!(err.contains("not replacing"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(contents(&app), before);
    assert!(
        strays(&root, &["app"]).is_empty(),
        "{:?}",
        strays(&root, &["app"])
    );

    // Our report with a file of the user's added: refused too.
    let ours = root.join("ours");
    write_report(&ours).unwrap();
    std::fs::write(ours.join("notes.txt"), b"mine").unwrap();
    let err = write_report(&ours).unwrap_err().to_string();
    assert!(err.contains("notes.txt"), "{err}");
    assert_eq!(std::fs::read(ours.join("notes.txt")).unwrap(), b"mine");
    // Without it, ours is replaced.
    std::fs::remove_file(ours.join("notes.txt")).unwrap();
    write_report(&ours).unwrap();

    // A folder named like a report table, holding a file of the user's: refused
    // (replacing the report deleted it with the folder).
    std::fs::remove_file(ours.join("timeline.parquet")).unwrap();
    std::fs::create_dir(ours.join("timeline.parquet")).unwrap();
    std::fs::write(ours.join("timeline.parquet/notes.txt"), b"mine").unwrap();
    let err = write_report(&ours).unwrap_err().to_string();
    assert!(
        err.contains("timeline.parquet, named like a report file"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(ours.join("timeline.parquet/notes.txt")).unwrap(),
        b"mine"
    );

    // Another process's report where `%t` (the start time, to the second) puts this
    // run's: set aside, not replaced, as `%t` meant one report per run. A report of
    // that process written before this run started, at a path that names no run:
    // replaced, as ever.
    let template = root.join("t-%t");
    let expanded = alloc_tracer::expand_path(&template);
    for (path, kept) in [(&template, true), (&root.join("plain"), false)] {
        let at = alloc_tracer::expand_path(path);
        write_report(&at).unwrap();
        let manifest = at.join("manifest.json");
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
        let other = std::process::id() + 1;
        m["pid"] = other.into();
        m["run_id"] = "0000000000000001".into();
        let start = m["start_unix_s"].as_f64().unwrap();
        m["end_unix_s"] = (start - 100.0).into();
        let theirs = serde_json::to_vec(&m).unwrap();
        std::fs::write(&manifest, &theirs).unwrap();
        write_report(path).unwrap();
        let aside = root.join(format!(
            "{}-{other}",
            at.file_name().unwrap().to_str().unwrap()
        ));
        assert_eq!(aside.exists(), kept, "{}", aside.display());
        if kept {
            assert_eq!(std::fs::read(aside.join("manifest.json")).unwrap(), theirs);
            assert_eq!(at, expanded);
        }
        let ours = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&manifest).unwrap());
        assert_eq!(ours.unwrap()["pid"], std::process::id());
    }

    // A file where the folder would go: refused.
    std::fs::write(root.join("file"), b"x").unwrap();
    assert!(write_report(&root.join("file")).is_err());
    assert_eq!(std::fs::read(root.join("file")).unwrap(), b"x");

    // `%p` names the process.
    let summary = write_report(&root.join("r-%p")).unwrap();
    assert_eq!(summary.dir, root.join(format!("r-{}", std::process::id())));
    assert!(summary.dir.join("manifest.json").exists());

    // Four processes and two threads write one folder at once: they take turns, and
    // one valid report is left, with no staging folder beside it.
    let shared = scratch("concurrent");
    let dest = shared.join("report");
    let children: Vec<libc::pid_t> = (0..4)
        .map(|_| {
            // SAFETY: as in `in_child`: no other thread runs at this fork.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0);
            if pid == 0 {
                let ok = (0..5).all(|_| write_report(&dest).is_ok());
                // SAFETY: ends the child without the parent's exit handlers.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            pid
        })
        .collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..5 {
                    write_report(&dest).unwrap();
                }
            });
        }
    });
    for pid in children {
        let code = common::wait_child(pid, Duration::from_secs(60));
        assert_eq!(code, Some(0), "a writer failed");
    }
    let manifest = Manifest::from_json(&std::fs::read(dest.join("manifest.json")).unwrap());
    assert!(manifest.unwrap().is_alloc_tracer());
    assert!(
        strays(&shared, &["report"]).is_empty(),
        "{:?}",
        strays(&shared, &["report"])
    );

    // A write that fails (a file-size limit standing in for a full disk) leaves
    // nothing, and says why once.
    let failing = scratch("failing");
    let dest = failing.join("report");
    let code = in_child(Duration::from_secs(60), || {
        // SAFETY: plain calls on this process's own limits and signal disposition.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 64,
                rlim_max: libc::RLIM_INFINITY,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
        }
        match write_report(&dest) {
            Ok(_) => 10,
            Err(e) => {
                let text = e.to_string();
                let cause = std::io::Error::from_raw_os_error(libc::EFBIG).to_string();
                if text.matches(&cause).count() != 1 || text.lines().count() != 1 {
                    eprintln!("{text}");
                    11
                } else {
                    0
                }
            }
        }
    });
    assert_eq!(
        code, 0,
        "the write did not fail as expected (10: it succeeded; 11: message)"
    );
    assert!(
        strays(&failing, &[]).is_empty(),
        "{:?}",
        strays(&failing, &[])
    );

    // What writers killed mid-write left beside a report goes with the next write
    // there; what a running process (pid 1) stages stays.
    let abandoned = scratch("abandoned");
    // Above pid_max: no process has it, now or later.
    let dead: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse::<u64>()
        .unwrap()
        + 1;
    // Half-written reports go; a folder of the program's, left under such a name by
    // a writer killed after trading places with it, stays.
    let leftovers = [
        (format!(".report.tmp-{dead}-0"), "sites.parquet"),
        (format!(".report.old-{dead}-3"), "manifest.json"),
        (format!(".report.tmp-{dead}-5"), "notes.txt"),
        (".report.tmp-1-0".to_owned(), "sites.parquet"),
    ];
    for (l, file) in &leftovers {
        std::fs::create_dir_all(abandoned.join(l)).unwrap();
        std::fs::write(abandoned.join(l).join(file), "x").unwrap();
    }
    write_report(&abandoned.join("report")).unwrap();
    let mut left = strays(&abandoned, &["report"]);
    left.sort();
    assert_eq!(
        left,
        [
            ".report.tmp-1-0".to_owned(),
            format!(".report.tmp-{dead}-5")
        ]
    );

    // A folder another program makes and fills while a report is written there,
    // after the writer checked the destination (its staging folder exists), is never
    // replaced: the program's file stays, whatever the write answers. Also where the
    // filesystem has no `renameat2` flags, and the old folder is moved aside first.
    let racing = scratch("racing");
    for flags in [true, false] {
        alloc_tracer::without_rename_flags(!flags);
        let mut raced = 0;
        for i in 0..50 {
            let dest = racing.join(format!("out{i}-{flags}"));
            let staging = format!(".out{i}-{flags}.tmp-");
            let d = dest.clone();
            let writer = std::thread::spawn(move || write_report(&d).map(|_| ()));
            let mut made = false;
            while !writer.is_finished() {
                if strays(&racing, &[]).iter().any(|n| n.starts_with(&staging)) {
                    // Made whole under another name and renamed into place, so that
                    // the writer never finds it made but not yet filled.
                    let mine = racing.join(format!("program{i}-{flags}"));
                    std::fs::create_dir(&mine).unwrap();
                    std::fs::write(mine.join("mine.txt"), b"the program's").unwrap();
                    made = std::fs::rename(&mine, &dest).is_ok();
                    if !made {
                        std::fs::remove_dir_all(&mine).unwrap();
                    }
                    break;
                }
            }
            let result = writer.join().unwrap();
            if made {
                raced += 1;
                assert!(
                    dest.join("mine.txt").exists(),
                    "write {i} (renameat2 flags: {flags}) replaced the program's folder \
                     ({result:?})"
                );
            }
        }
        assert!(
            raced > 0,
            "no folder was made during a write (renameat2 flags: {flags}): nothing tested"
        );
        let left: Vec<String> = strays(&racing, &[])
            .into_iter()
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // Without the flags, a report of ours is still replaced.
    alloc_tracer::without_rename_flags(true);
    let plain = racing.join("plain");
    write_report(&plain).unwrap();
    let first = std::fs::read(plain.join("manifest.json")).unwrap();
    write_report(&plain).unwrap();
    assert_ne!(std::fs::read(plain.join("manifest.json")).unwrap(), first);
    alloc_tracer::without_rename_flags(false);

    // A report that another run wrote while this one ran is moved aside, however
    // close its start to this run's, and whatever its pid (a process in another pid
    // namespace may have this one's); one of this run (a forked relative's: the same
    // run id), or one from before run ids that started with it, is replaced.
    let runs = scratch("runs");
    let mine = Manifest::from_json(&std::fs::read(plain.join("manifest.json")).unwrap()).unwrap();
    let run_id = mine.run_id.clone().expect("a run id");
    assert_eq!(run_id.len(), 16, "{run_id}");
    let other_id = format!("{:016x}", u64::from_str_radix(&run_id, 16).unwrap() ^ 1);
    let me = std::process::id();
    for (name, pid, id, set_aside) in [
        ("other-run", 1, Some(other_id.as_str()), true),
        ("other-run-my-pid", me, Some(other_id.as_str()), true),
        ("same-run", 1, Some(run_id.as_str()), false),
        ("no-run-id", 1, None, false),
    ] {
        let dest = runs.join(name);
        std::fs::create_dir_all(&dest).unwrap();
        let mut theirs = serde_json::json!({
            "tool": "alloc-tracer",
            "pid": pid,
            "start_unix_s": mine.start_unix_s,
            "end_unix_s": mine.end_unix_s + 3600.0,
            "schema_version": 1,
        });
        if let Some(id) = id {
            theirs["run_id"] = id.into();
        }
        std::fs::write(dest.join("manifest.json"), theirs.to_string()).unwrap();
        write_report(&dest).unwrap();
        let now = Manifest::from_json(&std::fs::read(dest.join("manifest.json")).unwrap());
        assert_eq!(now.unwrap().pid, std::process::id(), "{name}");
        let aside = runs.join(format!("{name}-{pid}"));
        assert_eq!(aside.exists(), set_aside, "{name}");
        if set_aside {
            assert_eq!(
                std::fs::read_to_string(aside.join("manifest.json")).unwrap(),
                theirs.to_string()
            );
        }
    }

    // A folder whose name leaves no room for the longer one the report is made under
    // beside it is refused before the run, with the longest that fits; a report is
    // written under a name of that length.
    let long = scratch("long-names");
    let refused = alloc_tracer::check_report_dir(&long.join("a".repeat(250))).unwrap_err();
    let fits: usize = refused
        .to_string()
        .split("name the folder in ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{refused}"));
    assert!((200..250).contains(&fits), "{refused}");
    let longest = long.join("b".repeat(fits));
    alloc_tracer::check_report_dir(&longest).unwrap();
    write_report(&longest).unwrap();
    assert!(longest.join("manifest.json").is_file());

    for d in [root, shared, failing, racing, abandoned, runs, long] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
