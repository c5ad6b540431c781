//! Cold path: return addresses to function, file and line, once per unique address,
//! inlined frames expanded (release builds inline `Boolean::lc`, `enforce` closures
//! and most of liballoc; with `debug = "line-tables-only"` they are still named).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Held while the `backtrace` crate resolves addresses (`resolve_all`), which takes
/// a lock of its own: a fork while another thread held that one would leave it held
/// for good in the child, whose next report would wait on it. `fork::prepare` takes
/// this one instead, so no other thread is inside the crate at the fork.
static SYMBOLIZING: Mutex<()> = Mutex::new(());

/// Takes [`SYMBOLIZING`] (across a fork, after every other lock of the tracer's:
/// none is taken while it is held).
pub(crate) fn hold_for_fork() -> MutexGuard<'static, ()> {
    SYMBOLIZING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One source-level frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Demangled function name without the hash, or the address in hex.
    pub function: String,
    /// Source file, when line tables have it.
    pub file: Option<String>,
    /// Line, when line tables have it.
    pub line: Option<u32>,
    /// True when this frame was inlined into the next one (same address).
    pub inlined: bool,
}

/// The function name of a folded site's frame (`registry::FOLDED_FRAME`).
pub const FOLDED_NAME: &str = "[sites past the tracer's cap, folded]";

/// The frames of one return address, innermost (most inlined) first.
pub fn resolve(address: usize) -> Vec<Frame> {
    if address == crate::registry::FOLDED_FRAME {
        return vec![Frame {
            function: FOLDED_NAME.to_owned(),
            file: None,
            line: None,
            inlined: false,
        }];
    }
    let mut out = Vec::new();
    // `resolve` steps back from a return address to the call instruction itself.
    backtrace::resolve(address as *mut std::ffi::c_void, |sym| {
        out.push(Frame {
            function: sym
                .name()
                .map(|n| format!("{n:#}"))
                .unwrap_or_else(|| format!("{address:#x}")),
            file: sym.filename().map(|p| p.display().to_string()),
            line: sym.lineno(),
            inlined: true,
        });
    });
    match out.last_mut() {
        Some(outer) => outer.inlined = false,
        None => out.push(Frame {
            function: format!("{address:#x}"),
            file: None,
            line: None,
            inlined: false,
        }),
    }
    out
}

/// True when the symbolizer found no name for `address`, whose frames are
/// `frames` (from [`resolve`]): named by the address in hex.
pub fn unnamed(address: usize, frames: &[Frame]) -> bool {
    frames
        .last()
        .is_none_or(|f| f.function == format!("{address:#x}"))
}

/// Whether the program's own binary is gone from its path (deleted, or replaced by
/// a rebuild): the kernel then names it `PATH (deleted)`. The symbolizer opens the
/// path, so it names none of the binary's frames then.
pub fn binary_replaced() -> bool {
    std::fs::read_link("/proc/self/exe")
        .is_ok_and(|p| p.as_os_str().as_encoded_bytes().ends_with(b" (deleted)"))
}

/// Resolves every address once, then frees the debug information parsed for it
/// (the binary's mapping and its line tables: tens of MiB that the process would
/// otherwise hold to its end, through every later part of the report too; a second
/// report parses it again).
pub fn resolve_all(addresses: impl IntoIterator<Item = usize>) -> HashMap<usize, Vec<Frame>> {
    let _symbolizing = hold_for_fork();
    let mut out = HashMap::new();
    for a in addresses {
        out.entry(a).or_insert_with(|| resolve(a));
    }
    backtrace::clear_symbol_cache();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn return_address_here() -> usize {
        let trail = crate::hot::trail::Trail::default();
        let bounds = crate::hot::stack::current_stack_bounds();
        // SAFETY: this thread's own stack bounds, and a trail of this walk only.
        let w = unsafe { crate::hot::trail::walk(&trail, 0, 1, bounds, 0) };
        let mut raw = crate::hot::stack::raw_frames();
        let frames = crate::hot::trail::frames(&trail, &w, &mut raw);
        assert_eq!(frames.len(), 1);
        frames[0]
    }

    #[test]
    fn names_the_caller() {
        let frames = resolve(return_address_here());
        assert!(
            frames
                .iter()
                .any(|f| f.function.contains("names_the_caller")),
            "{frames:?}"
        );
        assert!(!frames.last().unwrap().inlined);
    }

    #[test]
    fn names_again_after_the_parsed_debug_information_is_freed() {
        let a = return_address_here();
        let first = resolve_all([a]);
        // `resolve_all` freed what it parsed: the next report parses it again.
        let again = resolve_all([a, a]);
        assert_eq!(first, again);
        assert!(first[&a].iter().any(|f| f.function.contains("names_again")));
    }
}
