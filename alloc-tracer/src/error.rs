//! The crate's one error type.

use std::path::PathBuf;

/// What can go wrong outside the hot path (which never fails). Its `Debug` is its
/// message, as `Display` gives it: an error returned from `main` (or unwrapped) is
/// printed with `Debug`, and reads as one line naming the file or variable.
#[derive(thiserror::Error)]
pub enum Error {
    /// Reading or writing a report file or directory failed.
    #[error("{}: {}", path.display(), crate::error::causes(cause))]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error, in the message (not a `source()`: each cause is
        /// printed once, however the caller prints chains).
        cause: std::io::Error,
    },
    /// The parquet writer failed.
    #[error("{}: {}", path.display(), crate::error::causes(cause))]
    Parquet {
        /// The table file.
        path: PathBuf,
        /// The underlying error, in the message like `Io`'s.
        cause: parquet::errors::ParquetError,
    },
    /// The report folder exists and is not one this tracer may replace.
    #[error("{}: {why}; not replacing it", path.display())]
    NotReplaced {
        /// The folder.
        path: PathBuf,
        /// What makes it not a report folder of ours.
        why: String,
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

/// A copy that reads the same: an I/O cause keeps its OS error code, or else its kind
/// and message; a parquet cause keeps its message. (The tracer hands errors to the
/// program as copies made outside its guard; see `handed`.)
impl Clone for Error {
    fn clone(&self) -> Self {
        match self {
            Error::Io { path, cause } => Error::Io {
                path: path.clone(),
                cause: match cause.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(cause.kind(), causes(cause)),
                },
            },
            Error::Parquet { path, cause } => Error::Parquet {
                path: path.clone(),
                cause: {
                    let text = causes(cause);
                    let text = text.strip_prefix("Parquet error: ").unwrap_or(&text);
                    parquet::errors::ParquetError::General(text.to_owned())
                },
            },
            Error::NotReplaced { path, why } => Error::NotReplaced {
                path: path.clone(),
                why: why.clone(),
            },
            Error::Setting {
                name,
                value,
                expected,
            } => Error::Setting {
                name,
                value: value.clone(),
                expected,
            },
        }
    }
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// An error's message followed by those of its causes that it does not already
/// contain, joined by ": ", so that each cause is printed once.
pub(crate) fn causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_debugs_as_its_message() {
        let e = Error::NotReplaced {
            path: "reports/r".into(),
            why: "exists and is not a folder".into(),
        };
        assert_eq!(
            format!("{e:?}"),
            "reports/r: exists and is not a folder; not replacing it"
        );
        assert_eq!(format!("{e:?}"), e.to_string());
    }
}
