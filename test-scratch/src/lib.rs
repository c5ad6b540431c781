//! Scratch folders for the workspace's tests. Each is removed when the test that
//! made it passes, and kept when the test fails (its path on standard error), so
//! that a test run leaves nothing in the temporary folder but what a failure needs
//! looked at.
//!
//! Bind the folder for the whole test (`let dir = Scratch::new("name");`): a
//! temporary (`Scratch::new("name").join("report")`) is removed at the end of its
//! statement.

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh, empty folder under the system's temporary folder, removed on drop unless
/// the thread is panicking (a failed assertion).
#[derive(Debug)]
#[must_use = "the folder is removed when this is dropped"]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// `{prefix}-{process id}-{n}`, `n` counting this process's folders, emptied
    /// first if a run before left one of that name.
    pub fn new(prefix: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("cannot make the scratch folder {}: {e}", path.display()));
        Scratch { path }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path `name` in this folder, which keeps the folder while it lives: for
    /// helpers that hand a test one file.
    pub fn holding(self, name: &str) -> ScratchFile {
        ScratchFile {
            path: self.path.join(name),
            _dir: self,
        }
    }
}

/// A path in a [`Scratch`] folder that keeps the folder (`Scratch::holding`).
#[derive(Debug)]
#[must_use = "the folder is removed when this is dropped"]
pub struct ScratchFile {
    path: PathBuf,
    _dir: Scratch,
}

impl Deref for ScratchFile {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for ScratchFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<OsStr> for ScratchFile {
    fn as_ref(&self) -> &OsStr {
        self.path.as_os_str()
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.path.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for the failed test: {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn removed_when_dropped() {
        let dir = Scratch::new("test-scratch-removed");
        std::fs::write(dir.join("file"), b"x").unwrap();
        let path = dir.path().to_owned();
        assert!(path.join("file").exists());
        drop(dir);
        assert!(!path.exists(), "{} still there", path.display());
    }

    #[test]
    fn kept_when_its_test_fails() {
        let path = std::thread::spawn(|| {
            let dir = Scratch::new("test-scratch-kept");
            let path = dir.path().to_owned();
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _dir = dir;
                panic!("a failed assertion");
            }))
            .unwrap_err();
            path
        })
        .join()
        .unwrap();
        assert!(path.exists(), "{} removed", path.display());
        std::fs::remove_dir_all(path).unwrap();
    }

    #[test]
    fn a_file_keeps_its_folder() {
        let file = Scratch::new("test-scratch-file").holding("budget.toml");
        std::fs::write(&*file, b"x").unwrap();
        let folder = file.parent().unwrap().to_owned();
        assert!(file.exists());
        drop(file);
        assert!(!folder.exists(), "{} still there", folder.display());
    }

    #[test]
    fn two_of_one_name_are_apart() {
        let a = Scratch::new("test-scratch-apart");
        let b = Scratch::new("test-scratch-apart");
        assert_ne!(a.path(), b.path());
    }
}
