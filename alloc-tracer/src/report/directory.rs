//! Writing a report folder atomically: the files go to a temporary sibling folder
//! that is renamed into place, replacing an earlier report but never a folder that is
//! not one.

use super::schema;
use crate::Error;
use std::path::{Path, PathBuf};

/// The `Error::Io` for `path`.
pub fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// A report folder being written: a temporary sibling of its destination.
pub struct Staging {
    dir: PathBuf,
    parent: PathBuf,
    name: String,
    tmp: PathBuf,
}

impl Staging {
    /// Checks that `dir` may be replaced (absent, empty, or a report) and creates the
    /// temporary folder beside it.
    pub fn new(dir: &Path) -> Result<Staging, Error> {
        if dir.exists() && !dir.join(schema::MANIFEST).exists() {
            let not_empty = std::fs::read_dir(dir).map_err(io(dir))?.next().is_some();
            if not_empty {
                return Err(Error::Io {
                    path: dir.to_owned(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "exists and is not a report directory; not replacing it",
                    ),
                });
            }
        }
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io(&parent))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report".into());
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(io(&tmp))?;
        Ok(Staging {
            dir: dir.to_owned(),
            parent,
            name,
            tmp,
        })
    }

    /// The temporary folder, where the files go.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Moves the finished report into place. An old report is moved aside first,
    /// since rename cannot replace a non-empty folder, and removed after.
    pub fn commit(self) -> Result<(), Error> {
        let old = self
            .parent
            .join(format!(".{}.old-{}", self.name, std::process::id()));
        if self.dir.exists() {
            std::fs::rename(&self.dir, &old).map_err(io(&self.dir))?;
        }
        std::fs::rename(&self.tmp, &self.dir).map_err(io(&self.dir))?;
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(io(&old))?;
        }
        Ok(())
    }
}
