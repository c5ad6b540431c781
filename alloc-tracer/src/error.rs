//! The crate's one error type.

use std::path::PathBuf;

/// What can go wrong outside the hot path (which never fails).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a report file or directory failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The parquet writer failed.
    #[error("{}: {source}", path.display())]
    Parquet {
        /// The table file.
        path: PathBuf,
        /// The underlying error.
        source: parquet::errors::ParquetError,
    },
    /// A setting (environment variable or API argument) is not valid.
    #[error("{name}={value:?}: {expected}")]
    Setting {
        /// The setting's name, e.g. `ALLOC_TRACE`.
        name: &'static str,
        /// The value given.
        value: String,
        /// What would have been accepted.
        expected: &'static str,
    },
}
