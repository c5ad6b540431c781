//! The analyzer's one error type: what went wrong, and with which file.

use std::path::PathBuf;

/// Errors reading or interpreting a report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory is missing or unreadable.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the OS said: in the message, and not a `source()`, so that a chain
        /// printed whole (`{:#}`) says it once.
        cause: std::io::Error,
    },
    /// The report was written with a schema version this analyzer does not know.
    #[error("{}: schema version {found}, this analyzer reads version {supported}", path.display())]
    SchemaVersion {
        /// The manifest.
        path: PathBuf,
        /// The version found.
        found: String,
        /// The version supported.
        supported: u64,
    },
    /// A file is not what the schema says (truncated, corrupt, missing columns).
    #[error("{}: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A category rules file is not valid.
    #[error("{}: {reason}", path.display())]
    Rules {
        /// The rules file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A budget file is not valid, or names what the report or rules lack, or the
    /// report cannot be judged by any budget.
    #[error("{}: {reason}", path.display())]
    Budget {
        /// The budget file (the report, where the report is what is wrong).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A `--fail-if` condition is not valid.
    #[error("--fail-if {text}: {reason}")]
    Condition {
        /// The condition as given.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// `--phase` names a phase the report does not have.
    #[error("--phase {phase}: {} has no such phase (its phases: {phases})", report.display())]
    UnknownPhase {
        /// The phase as given.
        phase: String,
        /// The report directory.
        report: PathBuf,
        /// The report's phases, comma-separated.
        phases: String,
    },
}
