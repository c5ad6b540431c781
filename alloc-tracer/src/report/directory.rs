//! Writing a report folder safely: the files go to a temporary sibling folder that
//! is synced and renamed into place, under a lock on the parent folder, replacing an
//! earlier report but never anything else, even a folder made or filled at the
//! last moment by another program (see [`Staging::commit`]).
//!
//! A folder is replaced only when its manifest says alloc-tracer wrote it and it
//! holds nothing but report files (`schema::is_report_file`); anything else is
//! refused, whatever it contains. Writers of the same parent folder, in this process
//! or others, take turns (`flock` on the parent), and each stages under a name of
//! its own (pid and a per-process counter), so concurrent writers never see each
//! other's half-written folders. A staging folder is removed on every error path.

use super::schema;
use crate::Error;
use alloc_tracer_format::manifest::TOOL;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The `Error::Io` for `path`.
pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |cause| Error::Io {
        path: path.to_owned(),
        cause,
    }
}

/// Staging folders made by this process so far, for unique names.
static STAGED: AtomicU64 = AtomicU64::new(0);

/// A report folder being written: a temporary sibling of its destination, removed
/// on drop unless committed.
pub struct Staging {
    dir: PathBuf,
    parent: PathBuf,
    name: String,
    tmp: PathBuf,
    /// The parent folder, `flock`ed for as long as this writer stages.
    _lock: FolderLock,
    committed: bool,
}

impl Staging {
    /// Takes the parent folder's lock, checks that `dir` may be replaced (absent,
    /// empty, or a report of ours), and creates the staging folder beside it.
    /// `apart`: the path named this run apart (`%p`, `%t`): a report another process
    /// wrote there, whenever, is set aside too (see [`set_aside_if_concurrent`]).
    pub fn new(dir: &Path, apart: bool) -> Result<Staging, Error> {
        // A file where a folder of the path would go, or a folder that cannot be
        // written, named as such rather than by the error of making the folders.
        check_destination(dir)?;
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let lock = lock_folder(&parent)?;
        set_aside_if_concurrent(dir, apart)?;
        check_replaceable(dir)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report".into());
        let n = STAGED.fetch_add(1, Relaxed);
        let tmp = parent.join(format!(".{name}.tmp-{}-{n}", std::process::id()));
        // Under the lock no other writer stages: a folder of this name was left by
        // an earlier process with this pid that died while writing.
        if std::fs::symlink_metadata(&tmp).is_ok() {
            std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        remove_left_by_the_dead(&parent, &name);
        // Named after the destination asked for, not the staging folder's hidden name.
        std::fs::create_dir(&tmp).map_err(|cause| Error::Io {
            path: dir.to_owned(),
            cause: std::io::Error::new(
                cause.kind(),
                format!(
                    "{cause} (making the folder it is written in first, {})",
                    tmp.display()
                ),
            ),
        })?;
        Ok(Staging {
            dir: dir.to_owned(),
            parent,
            name,
            tmp,
            _lock: lock,
            committed: false,
        })
    }

    /// The staging folder, where the files go.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs the staged files and moves the report into place, replacing nothing
    /// that was not checked where it lies at that moment: the staging folder takes
    /// the destination's name only while no folder has it (`RENAME_NOREPLACE`), or
    /// trades places with the folder there (`RENAME_EXCHANGE`), which is then
    /// checked again where it went and traded back if it may not be replaced (a
    /// program or another tool filled it since `new`). On a filesystem without
    /// those renames, the old report is moved aside, then removed.
    pub fn commit(mut self) -> Result<(), Error> {
        for entry in std::fs::read_dir(&self.tmp).map_err(io(&self.tmp))? {
            let path = entry.map_err(io(&self.tmp))?.path();
            sync(&path)?;
        }
        sync(&self.tmp)?;
        let replaced = match rename2(&self.tmp, &self.dir, libc::RENAME_NOREPLACE) {
            Ok(()) => false,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                check_replaceable(&self.dir)?;
                match rename2(&self.tmp, &self.dir, libc::RENAME_EXCHANGE) {
                    Ok(()) => {}
                    Err(e) if unsupported(&e) => return self.commit_aside(),
                    Err(e) => return Err(io(&self.dir)(e)),
                }
                // `tmp` now holds what was at the destination.
                if let Err(refused) = check_replaceable(&self.tmp) {
                    // Until traded back, `tmp` is not ours to remove on an error.
                    self.committed = true;
                    rename2(&self.tmp, &self.dir, libc::RENAME_EXCHANGE)
                        .map_err(now_here(&self.tmp, &self.dir))?;
                    self.committed = false;
                    return Err(refused_at(&self.dir, refused));
                }
                true
            }
            Err(e) if unsupported(&e) => return self.commit_aside(),
            Err(e) => return Err(io(&self.dir)(e)),
        };
        self.committed = true;
        sync(&self.parent)?;
        if replaced {
            // The report is in place: an old one left behind (a hidden folder beside
            // it) is no reason to say it was not written.
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
        Ok(())
    }

    /// `commit` where the filesystem has no `renameat2` flags: an old report is
    /// moved aside first, since rename cannot replace a non-empty folder, then
    /// checked where it went (a program may have made and filled the folder since
    /// `new`: it is put back), and removed after.
    fn commit_aside(mut self) -> Result<(), Error> {
        let old = self.parent.join(format!(
            ".{}.old-{}-{}",
            self.name,
            std::process::id(),
            STAGED.fetch_add(1, Relaxed)
        ));
        let replacing = self.dir.exists();
        if replacing {
            std::fs::rename(&self.dir, &old).map_err(io(&self.dir))?;
            if let Err(refused) = check_replaceable(&old) {
                std::fs::rename(&old, &self.dir).map_err(now_here(&old, &self.dir))?;
                return Err(refused_at(&self.dir, refused));
            }
        }
        if let Err(e) = std::fs::rename(&self.tmp, &self.dir) {
            if replacing {
                // Put the old report back rather than leave nothing.
                let _ = std::fs::rename(&old, &self.dir);
            }
            return Err(io(&self.dir)(e));
        }
        self.committed = true;
        sync(&self.parent)?;
        if replacing {
            // As in `commit`.
            let _ = std::fs::remove_dir_all(&old);
        }
        Ok(())
    }
}

/// The error of putting back, from `moved` to `dir`, a folder that may not be
/// replaced: it names where the folder is now.
fn now_here<'a>(moved: &'a Path, dir: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |cause| Error::Io {
        path: moved.to_owned(),
        cause: std::io::Error::new(
            cause.kind(),
            format!(
                "{cause}: the folder that was at {} is now here",
                dir.display()
            ),
        ),
    }
}

/// `check_replaceable`'s refusal of a folder checked where it was moved, named by
/// `dir`, where it was (and is again).
fn refused_at(dir: &Path, refused: Error) -> Error {
    match refused {
        Error::NotReplaced { why, .. } => Error::NotReplaced {
            path: dir.to_owned(),
            why,
        },
        Error::Io { cause, .. } => Error::Io {
            path: dir.to_owned(),
            cause,
        },
        other => other,
    }
}

/// Set by [`without_rename_flags`].
static NO_RENAME_FLAGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process's report writer take every `renameat2` flag for unsupported,
/// as on a filesystem without them: for tests of that path.
#[doc(hidden)]
pub fn without_rename_flags(on: bool) {
    NO_RENAME_FLAGS.store(on, Relaxed);
}

/// `renameat2(from, to, flags)` for paths.
fn rename2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    if flags != 0 && NO_RENAME_FLAGS.load(Relaxed) {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths, relative to the working directory.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// True when `renameat2`'s flags are not supported (an old kernel, or a
/// filesystem without them).
fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS))
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Removes the staging and set-aside folders of `name` (`.NAME.tmp-PID-N`,
/// `.NAME.old-PID-N`) that writers killed while writing left beside it: those whose
/// process no longer runs, and that hold report files only (a writer killed after
/// trading places with a folder that was not a report left that folder under such a
/// name: it stays). Under the parent's lock, so no live writer's is touched; a folder
/// whose pid now names another process stays.
fn remove_left_by_the_dead(parent: &Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|f| f.strip_prefix(&format!(".{name}.")))
        else {
            continue;
        };
        let Some(pid_n) = rest
            .strip_prefix("tmp-")
            .or_else(|| rest.strip_prefix("old-"))
        else {
            continue;
        };
        let Some((pid, n)) = pid_n.split_once('-') else {
            continue;
        };
        let (Ok(pid), true) = (
            pid.parse::<libc::pid_t>(),
            n.bytes().all(|b| b.is_ascii_digit()),
        ) else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        let only_report_files = || {
            std::fs::read_dir(entry.path()).is_ok_and(|files| {
                files.flatten().all(|f| {
                    f.file_type().is_ok_and(|t| t.is_file())
                        && f.file_name().to_str().is_some_and(schema::is_report_file)
                })
            })
        };
        if gone && entry.file_type().is_ok_and(|t| t.is_dir()) && only_report_files() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Moves aside, to `DIR-PID`, the report at `dir` when another process wrote it while
/// this one's tracing ran (a program this one ran, which inherited
/// `ALLOC_TRACE_REPORT` without `%p`; or another run sharing the path): replacing it
/// would lose that run's report without a word. The report this process writes then
/// takes `dir`, as the last writer's always did. A report of the same traced run (its
/// `run_id` this process's: a forked relative's) is not another's. With `apart`
/// (the path's `%p` or `%t` meant one report per run, and another run's expanded to
/// the same: `%t` is the start time to the second), another process's report is set
/// aside whenever it was written. Called under the parent folder's lock, so that two
/// writers cannot both miss each other.
fn set_aside_if_concurrent(dir: &Path, apart: bool) -> Result<(), Error> {
    #[derive(serde::Deserialize)]
    struct Writer {
        tool: Option<String>,
        pid: Option<u32>,
        start_unix_s: Option<f64>,
        end_unix_s: Option<f64>,
        run_id: Option<String>,
    }
    let Ok(text) = std::fs::read(dir.join(schema::MANIFEST)) else {
        return Ok(());
    };
    let Ok(w) = serde_json::from_slice::<Writer>(&text) else {
        return Ok(());
    };
    let (Some(pid), Some(start), Some(end)) = (w.pid, w.start_unix_s, w.end_unix_s) else {
        return Ok(());
    };
    let elapsed_s =
        crate::hot::clock::now_ns().saturating_sub(crate::hot::clock::start_ns()) as f64 / 1e9;
    let started = crate::hot::clock::unix_seconds() - elapsed_s;
    let same_run = match w.run_id.as_deref() {
        Some(id) => u64::from_str_radix(id, 16).ok() == Some(crate::lineage::run_id()),
        // A report from before run ids: a forked relative's counts from the same
        // start (wall time less the run's monotonic time, so to within a drift).
        None => (start - started).abs() <= 0.01,
    };
    let overlapped = end > started;
    let why = if overlapped {
        "written while this one ran"
    } else {
        "which the path named as this run's too (%t is the start time to the second)"
    };
    // Another process: by its run id where the report has one (a process in another
    // pid namespace, a container's, may have this one's pid, as may a process that
    // had it before), else by its pid.
    let other_process = match w.run_id {
        Some(_) => !same_run,
        None => pid != std::process::id() && !same_run,
    };
    let another = w.tool.as_deref() == Some(TOOL) && (overlapped || apart) && other_process;
    if !another || check_replaceable(dir).is_err() {
        return Ok(());
    }
    let name = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    for n in 0..10 {
        let suffix = if n == 0 {
            format!("-{pid}")
        } else {
            format!("-{pid}-{n}")
        };
        let aside = dir.with_file_name(format!("{name}{suffix}"));
        let moved = match rename2(dir, &aside, libc::RENAME_NOREPLACE) {
            Err(e) if unsupported(&e) => {
                // Without that rename, look first: under the lock no writer of ours
                // makes the name meanwhile.
                if std::fs::symlink_metadata(&aside).is_ok() {
                    continue;
                }
                std::fs::rename(dir, &aside)
            }
            other => other,
        };
        match moved {
            Ok(()) => {
                let line = format!(
                    "alloc-tracer: {} held the report of process {pid}, {why}: moved to {} \
                     (put %p in the path for one per process)\n",
                    dir.display(),
                    aside.display()
                );
                // SAFETY: writes a live buffer of its length to fd 2.
                unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
                return Ok(());
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(io(dir)(e)),
        }
    }
    Err(Error::NotReplaced {
        path: dir.to_owned(),
        why: format!("holds the report of process {pid}, {why}"),
    })
}

/// The longest name a folder may have (Linux's file systems, ext4, xfs, btrfs, tmpfs).
const NAME_MAX: usize = 255;

/// Fails when a report could not be written at `dir` as things stand: its folder
/// (or, not made yet, the nearest folder above it that exists) not writable, a
/// read-only filesystem included, or [`check_replaceable`] failing. For the checks
/// before a run; writing checks again.
pub fn check_destination(dir: &Path) -> Result<(), Error> {
    // `x/..` or `/`: no folder of that name can be made. `x/.` reads as `x` to
    // `Path`, but the report cannot be renamed onto `.`.
    let mut text = dir.as_os_str().as_encoded_bytes();
    while let Some(t) = text.strip_suffix(b"/") {
        text = t;
    }
    if dir.file_name().is_none() || text == b"." || text.ends_with(b"/.") {
        return Err(Error::NotReplaced {
            path: dir.to_owned(),
            why: "names no folder to write (it ends in `.` or `..`, or is a root): name \
                  the report's folder itself"
                .into(),
        });
    }
    // The report is staged beside its folder under a longer name (`Staging::new`: its
    // count of stagings up to 20 digits), which must fit the file system's limit on a
    // name too.
    // (As `Staging::new` writes it: a name not UTF-8 with its bytes replaced.)
    let name_len = dir.file_name().map_or(0, |n| n.to_string_lossy().len());
    let staged_len = name_len + format!("..tmp-{}-{}", std::process::id(), u64::MAX).len();
    if staged_len > NAME_MAX {
        return Err(Error::NotReplaced {
            path: dir.to_owned(),
            why: format!(
                "its folder's name is {name_len} bytes, and the report is made beside it \
                 under one {} bytes longer (`.NAME.tmp-PID-N`), past the {NAME_MAX} bytes a \
                 name may have: name the folder in {} bytes or fewer",
                staged_len - name_len,
                NAME_MAX - (staged_len - name_len)
            ),
        });
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // `symlink_metadata`: a dangling link is in the way, not absent.
    if let Some(existing) = parent
        .ancestors()
        .find(|a| a.as_os_str().is_empty() || std::fs::symlink_metadata(a).is_ok())
    {
        let existing = if existing.as_os_str().is_empty() {
            Path::new(".")
        } else {
            existing
        };
        if !existing.is_dir() {
            return Err(io(existing)(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a folder, and the report would go inside it",
            )));
        }
        let c = std::ffi::CString::new(existing.as_os_str().as_encoded_bytes()).map_err(|_| {
            io(existing)(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a NUL byte in the path",
            ))
        })?;
        // Read too where it is the parent: the writer opens that to lock it (a
        // parent it makes itself is its own to read).
        let read = if existing == parent { libc::R_OK } else { 0 };
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), read | libc::W_OK | libc::X_OK) } != 0 {
            return Err(io(existing)(std::io::Error::last_os_error()));
        }
    }
    check_replaceable(dir)
}

/// Fails unless `dir` is absent, an empty folder, or a report of this tracer's
/// holding nothing else: what writing a report there may replace.
pub fn check_replaceable(dir: &Path) -> Result<(), Error> {
    let refuse = |why: &str| Error::NotReplaced {
        path: dir.to_owned(),
        why: why.to_owned(),
    };
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(dir)(e)),
    };
    if meta.file_type().is_symlink() {
        // Replaced, the link would become a folder; followed, a report would land
        // where the path does not say.
        return Err(refuse("is a symbolic link (name the folder it points to)"));
    }
    if !meta.is_dir() {
        return Err(refuse("exists and is not a folder"));
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        // A report's files are plain files: a folder (or link) named like one holds
        // something else, which replacing the report would delete.
        let plain = entry.file_type().map_err(io(dir))?.is_file();
        names.push((entry.file_name(), plain));
    }
    if names.is_empty() {
        return Ok(());
    }
    if let Some((other, _)) = names
        .iter()
        .find(|(n, _)| !n.to_str().is_some_and(schema::is_report_file))
    {
        return Err(refuse(&format!(
            "holds {} besides report files",
            other.to_string_lossy()
        )));
    }
    if let Some((other, _)) = names.iter().find(|(_, plain)| !plain) {
        return Err(refuse(&format!(
            "holds {}, named like a report file but not a file",
            other.to_string_lossy()
        )));
    }
    let manifest = match std::fs::read(dir.join(schema::MANIFEST)) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(
                "holds report tables but no manifest.json (not a whole report)",
            ));
        }
        Err(e) => return Err(io(&dir.join(schema::MANIFEST))(e)),
    };
    #[derive(serde::Deserialize)]
    struct Writer {
        tool: Option<String>,
    }
    match serde_json::from_slice::<Writer>(&manifest) {
        Ok(Writer { tool: Some(t) }) if t == TOOL => Ok(()),
        _ => Err(refuse("its manifest.json was not written by alloc-tracer")),
    }
}

/// The descriptors of the folders this process holds (or waits for) a report lock
/// on. A `flock` lasts until every descriptor on it is closed, and a forked child
/// holds copies of them all: it closes its copies ([`close_in_child`]), else its own
/// report in the same folder would wait forever, and the parent's next ones until
/// the child exits.
static LOCKED: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

fn locked() -> MutexGuard<'static, Vec<RawFd>> {
    LOCKED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An open folder in [`LOCKED`] while it lives.
struct FolderLock(std::mem::ManuallyDrop<File>);

impl Drop for FolderLock {
    fn drop(&mut self) {
        // Closed and taken off the list under the list's lock, which a fork waits
        // for: a child forked before has the descriptor listed (and closes its copy),
        // one forked after has neither, and none closes a number reused meanwhile.
        let mut list = locked();
        let fd = self.0.as_raw_fd();
        // SAFETY: the file is dropped here only, and not used after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.0) };
        list.retain(|&f| f != fd);
    }
}

/// The lock of [`LOCKED`], held across a `fork()` (see `fork`), so that the list the
/// child receives is complete and none of its descriptors is being closed.
pub(crate) fn hold_for_fork() -> MutexGuard<'static, Vec<RawFd>> {
    locked()
}

/// In a forked child, with [`hold_for_fork`]'s guard: closes the child's copies of
/// the report locks' descriptors (never unlocking them: that would release the
/// parent's lock too).
pub(crate) fn close_in_child(held: &mut Vec<RawFd>) {
    for fd in held.drain(..) {
        // SAFETY: a descriptor the parent held open at the fork; the child's copy
        // is owned by no `File` that runs here (its owner was another thread).
        unsafe { libc::close(fd) };
    }
}

/// Opens `folder` and takes an exclusive `flock` on it, waiting for other writers.
fn lock_folder(folder: &Path) -> Result<FolderLock, Error> {
    let f = {
        let mut list = locked();
        let f = File::open(folder).map_err(io(folder))?;
        list.push(f.as_raw_fd());
        FolderLock(std::mem::ManuallyDrop::new(f))
    };
    loop {
        // SAFETY: `flock` on a file descriptor this function owns.
        if unsafe { libc::flock(f.0.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(f);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(io(folder)(e));
        }
    }
}

/// `fsync` of a file or folder.
fn sync(path: &Path) -> Result<(), Error> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(io(path))
}
