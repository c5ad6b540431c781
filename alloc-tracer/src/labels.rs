//! Labels: facts about the run that the program states and reports carry in their
//! manifest (`labels`), e.g. synth-driver's circuit and rows, so that figures per row
//! or per circuit can be read from the report alone.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

static LABELS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

fn labels() -> MutexGuard<'static, BTreeMap<String, String>> {
    // An insert cannot leave the map inconsistent: poisoning is ignored.
    LABELS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the label `key` to `value` for every report written from now on (the latest
/// value of a key wins). What the map takes is the tracer's own memory.
pub fn label(key: &str, value: impl std::fmt::Display) {
    crate::hot::thread::guarded(|| {
        labels().insert(key.to_owned(), value.to_string());
    });
}

/// Every label set so far.
pub fn all() -> BTreeMap<String, String> {
    labels().clone()
}

/// The labels' lock, held across a `fork()` (see `fork`; taken alone everywhere).
pub(crate) fn hold_for_fork() -> MutexGuard<'static, BTreeMap<String, String>> {
    labels()
}
