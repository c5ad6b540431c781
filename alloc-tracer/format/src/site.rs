//! A site's name and identity, from its symbolized frames (innermost first). Every
//! reader of a report shows and matches sites by these rules: the tracer's summary and
//! the analyzer call them, and the analyzer writes their results as columns for readers
//! in other languages (`analyzer export --format parquet`), so that no one ports them.
//!
//! * The **naming frame** is the first frame outside the allocator and the standard
//!   library ([`is_plumbing`]), else the outermost: the innermost frames of a
//!   stack are nearly always liballoc's, which say nothing about who allocated.
//! * The **name** is that frame as `function (file:line)`, without generic arguments.
//! * The **callers** are the next frames that say where the naming frame was reached
//!   from ([`is_caller`]), up to [`CALLERS`] of them, joined by ` < `: many sites share
//!   a name (a container's insert), and their callers tell them apart.
//! * The **stack key** identifies a site across reports and builds, where site ids and
//!   return addresses differ: per frame, the function without generics, the last four
//!   components of the source path (the crate and its file, without the machine's
//!   prefix) and the line. The **loose key** is the same without lines, for stacks that
//!   a patch moved.

use crate::frames::{describe, is_plumbing, without_generics};

/// What the rules read of a frame.
pub trait Frame {
    /// Demangled function name (generic arguments included).
    fn function(&self) -> &str;
    /// Source file, when the line tables have it.
    fn file(&self) -> Option<&str>;
    /// Source line, when the line tables have it.
    fn line(&self) -> Option<u32>;
}

/// The name of a site without frames.
pub const NO_FRAMES: &str = "(no frames)";

/// Callers shown after a site's name.
pub const CALLERS: usize = 2;

/// Whether a frame after a site's naming frame says where that frame was reached
/// from: it is not plumbing, has a source file, is not in the naming frame's own file
/// (so that a container's helpers, like LinearCombination's, do not hide who called
/// it), and is not the C runtime's.
pub fn is_caller(function: &str, file: Option<&str>, naming_file: Option<&str>) -> bool {
    !is_plumbing(function, file)
        && file.is_some()
        && file != naming_file
        && !function.starts_with("__libc")
}

/// The position of the naming frame: the first frame outside plumbing, else the
/// outermost; `None` without frames.
pub fn naming_index<F: Frame>(frames: &[F]) -> Option<usize> {
    frames
        .iter()
        .position(|f| !is_plumbing(f.function(), f.file()))
        .or(frames.len().checked_sub(1))
}

/// The frame that names a site, if it has frames.
pub fn naming_frame<F: Frame>(frames: &[F]) -> Option<&F> {
    naming_index(frames).map(|i| &frames[i])
}

/// `function (file:line)` of one frame, without generics.
fn at<F: Frame>(f: &F) -> String {
    describe(f.function(), f.file(), f.line())
}

/// A site's name: its naming frame as `function (file:line)`; [`NO_FRAMES`] without
/// frames.
pub fn name<F: Frame>(frames: &[F]) -> String {
    naming_frame(frames).map_or_else(|| NO_FRAMES.to_owned(), at)
}

/// Where the naming frame was reached from: up to `n` of the frames after it that
/// [`is_caller`] accepts, innermost first, joined by ` < ` (empty when there are none).
pub fn callers<F: Frame>(frames: &[F], n: usize) -> String {
    let Some(pos) = naming_index(frames) else {
        return String::new();
    };
    let own = frames[pos].file();
    frames[pos + 1..]
        .iter()
        .filter(|f| is_caller(f.function(), f.file(), own))
        .take(n)
        .map(at)
        .collect::<Vec<_>>()
        .join(" < ")
}

/// The name followed by up to `n` callers, all joined by ` < `: a site on one line.
pub fn name_with_callers<F: Frame>(frames: &[F], n: usize) -> String {
    let (name, callers) = (name(frames), callers(frames, n));
    if callers.is_empty() {
        name
    } else {
        format!("{name} < {callers}")
    }
}

/// What identifies a site across reports and builds: per frame, innermost first, the
/// function without generic arguments, `@`, the last four components of the source
/// path, `:`, the line, and a newline. Empty without frames.
pub fn stack_key<F: Frame>(frames: &[F]) -> String {
    key(frames, true)
}

/// [`stack_key`] without the lines (`function@path\n` per frame): matches a site
/// whose frames a patch moved within their files.
pub fn loose_key<F: Frame>(frames: &[F]) -> String {
    key(frames, false)
}

fn key<F: Frame>(frames: &[F], lines: bool) -> String {
    let mut key = String::new();
    for f in frames {
        key.push_str(&without_generics(f.function()));
        key.push('@');
        key.push_str(f.file().map_or("", path_tail));
        if lines {
            key.push(':');
            if let Some(l) = f.line() {
                key.push_str(&l.to_string());
            }
        }
        key.push('\n');
    }
    key
}

/// The last four components of a path (all of it when shorter).
fn path_tail(p: &str) -> &str {
    let mut start = p.len();
    for _ in 0..4 {
        match p[..start].rfind('/') {
            Some(i) => start = i,
            None => return p,
        }
    }
    &p[start + 1..]
}

/// A frame as plain borrowed fields, for readers without a frame type of their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameRef<'a> {
    /// Demangled function name.
    pub function: &'a str,
    /// Source file.
    pub file: Option<&'a str>,
    /// Source line.
    pub line: Option<u32>,
}

impl Frame for FrameRef<'_> {
    fn function(&self) -> &str {
        self.function
    }
    fn file(&self) -> Option<&str> {
        self.file
    }
    fn line(&self) -> Option<u32> {
        self.line
    }
}

/// True for the functions a complete stack ends in: the process's entry or a
/// thread's. A stack below the depth limit that ends elsewhere lost its outer frames,
/// usually to code built without frame pointers.
pub fn is_stack_root(function: &str) -> bool {
    matches!(
        function,
        "main"
            | "_start"
            | "__libc_start_main"
            | "__libc_start_call_main"
            | "start_thread"
            | "thread_start"
            | "clone"
            | "clone3"
            | "__clone"
    ) || function.starts_with("std::rt::lang_start")
}

/// Above this share of allocations in stacks that end early, reports warn.
pub const EARLY_STACKS_WARN_SHARE: f64 = 0.2;

/// The one-line warning, with its fix, for a share of allocations in stacks that
/// end early.
pub fn early_stacks_warning(share: f64) -> String {
    format!(
        "warning: {:.0} % of allocations have call stacks that end before main or a \
         thread's start: build with -C force-frame-pointers=yes (and debug = \
         \"line-tables-only\" in the release profile) for complete stacks",
        share * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at<'a>(function: &'a str, file: &'a str, line: u32) -> FrameRef<'a> {
        FrameRef {
            function,
            file: Some(file),
            line: Some(line),
        }
    }

    const PUSH: &str = "/rustc/x/library/alloc/src/vec/mod.rs";
    const LC: &str = "/r/bellpepper-core-0.2.1/src/lc.rs";
    const BOOLEAN: &str = "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs";

    #[test]
    fn callers_are_outside_the_naming_file() {
        let lc = Some(LC);
        assert!(!is_caller("add_unsimplified<S>", lc, lc));
        assert!(is_caller("lc<S>", Some("/r/src/gadgets/boolean.rs"), lc));
        assert!(!is_caller("main", None, lc));
        assert!(!is_caller("push", Some(PUSH), lc));
        assert!(!is_caller(
            "__libc_start_call_main",
            Some("libc_start_call_main.h"),
            lc
        ));
    }

    #[test]
    fn names_skip_plumbing_and_generics() {
        let frames = [
            at("push<u8>", PUSH, 7),
            at("insert_or_update<Scalar>", LC, 7),
        ];
        assert_eq!(naming_index(&frames), Some(1));
        assert_eq!(name(&frames), "insert_or_update (lc.rs:7)");
        assert_eq!(callers(&frames, CALLERS), "");
        assert_eq!(
            name_with_callers(&frames, CALLERS),
            "insert_or_update (lc.rs:7)"
        );
        let none: [FrameRef; 0] = [];
        assert_eq!(name(&none), NO_FRAMES);
        assert_eq!(naming_frame(&none), None);
        assert_eq!(callers(&none, CALLERS), "");
    }

    #[test]
    fn all_plumbing_is_named_by_the_outermost_frame() {
        let frames = [
            FrameRef {
                function: "__rustc::__rust_alloc",
                ..FrameRef::default()
            },
            FrameRef {
                function: "alloc::raw_vec::RawVecInner<A>::with_capacity_in",
                ..FrameRef::default()
            },
        ];
        assert_eq!(naming_index(&frames), Some(1));
        assert_eq!(
            name(&frames),
            "alloc::raw_vec::RawVecInner::with_capacity_in"
        );
        assert_eq!(callers(&frames, CALLERS), "");
    }

    #[test]
    fn callers_skip_the_naming_frames_own_file() {
        let frames = [
            at("push<u8>", PUSH, 1),
            at("insert_or_update<S>", LC, 108),
            at("add<S>", LC, 203),
            at("lc<S>", BOOLEAN, 450),
            at("{closure#3}<S>", BOOLEAN, 451),
            at("enforce<S>", "/r/mirror.rs", 9),
        ];
        assert_eq!(
            callers(&frames, 2),
            "lc (boolean.rs:450) < {closure#3} (boolean.rs:451)"
        );
        assert_eq!(callers(&frames, 9).matches(" < ").count(), 2);
        assert_eq!(
            name_with_callers(&frames, 2),
            "insert_or_update (lc.rs:108) < lc (boolean.rs:450) < {closure#3} (boolean.rs:451)"
        );
    }

    #[test]
    fn keys_ignore_generics_and_path_prefixes_but_not_lines() {
        let here = [at(
            "lc<blstrs::Scalar>",
            "/home/a/.cargo/registry/src/index-1/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
            10,
        )];
        let there = [at(
            "lc<S>",
            "/root/.cargo/registry/src/index-2/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
            10,
        )];
        assert_eq!(stack_key(&here), stack_key(&there));
        assert_eq!(
            stack_key(&here),
            "lc@bellpepper-core-0.2.1/src/gadgets/boolean.rs:10\n"
        );
        let moved = [at(
            "lc",
            "/x/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
            11,
        )];
        assert_ne!(stack_key(&here), stack_key(&moved));
        assert_eq!(loose_key(&here), loose_key(&moved));
        assert_eq!(
            loose_key(&moved),
            "lc@bellpepper-core-0.2.1/src/gadgets/boolean.rs\n"
        );
        assert_eq!(stack_key(&[at("main", "main.rs", 3)]), "main@main.rs:3\n");
        let no_line = FrameRef {
            function: "main",
            file: None,
            line: None,
        };
        assert_eq!(stack_key(&[no_line]), "main@:\n");
        assert_eq!(stack_key::<FrameRef>(&[]), "");
    }
}
