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
//! * Sites shown together that would read the same are told apart by a
//!   **distinction** ([`distinctions`]): the first frame further out where their
//!   stacks differ (`[via sha256 (sha256.rs:57)]`), or a number (`[#2]`) when their
//!   frames read the same from the naming frame outward (they differ inward of it).
//! * The **crate path** of a source file is `<crate>/<path inside the crate>`
//!   ([`crate_path`]): the same whether the crate came from the registry, a vendored
//!   folder, a path dependency or a git checkout, so that a `[patch.crates-io]` build
//!   still matches its baseline.
//! * The **stack key** identifies a site across reports and builds, where site ids and
//!   return addresses differ: per frame, the function without generics, the crate path
//!   and the line. The **loose key** is the same without lines, for stacks that a patch
//!   moved.

pub use crate::frames::crate_path;
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

impl<F: Frame> Frame for &F {
    fn function(&self) -> &str {
        (**self).function()
    }
    fn file(&self) -> Option<&str> {
        (**self).file()
    }
    fn line(&self) -> Option<u32> {
        (**self).line()
    }
}

/// The name of a site without frames.
pub const NO_FRAMES: &str = "(no frames)";

/// Callers shown after a site's name.
pub const CALLERS: usize = 2;

/// Whether a frame after a site's naming frame says where that frame was reached
/// from: it is not plumbing, has a source file, is not in the naming frame's own file
/// (so that a container's helpers, like LinearCombination's, do not hide who called
/// it; [`callers`] falls back to that file's frames where no other is left), and is not the C runtime's (`__libc_*`, or where a process or thread starts:
/// [`is_stack_root`], but for `main`, which names the program's own `main` too; the C
/// runtime's has no source file).
pub fn is_caller(function: &str, file: Option<&str>, naming_file: Option<&str>) -> bool {
    !is_plumbing(function, file)
        && file.is_some()
        && file != naming_file
        && !function.starts_with("__libc")
        && (function == "main" || !is_stack_root(function))
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
    let outer = &frames[pos + 1..];
    let shown = |naming_file| {
        outer
            .iter()
            .filter(|f| is_caller(f.function(), f.file(), naming_file))
            .take(n)
            .map(at)
            .collect::<Vec<_>>()
    };
    let mut callers = shown(own);
    // A stack with no caller in another file (a program of one file) shows the
    // nearest ones in the naming frame's own file, rather than none.
    if callers.is_empty() {
        callers = shown(None);
    }
    callers.join(" < ")
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

/// What tells apart sites shown together whose [`name_with_callers`] read the same,
/// one entry per stack (empty for a site whose text is already unique): `via ` and the
/// first frame past the naming frame where the colliding stacks differ (more than one,
/// joined by ` < `, when a first difference leaves some still alike); where nothing
/// outward differs, `in ` and the first frame inward of the naming frame that does
/// (what they allocate through: liballoc's allocation or growth, a library's setup);
/// then `#1`, `#2`, ... in the order given when their frames read the same throughout. Frames are
/// compared as they are shown (`function (file:line)`, no generics), aligned at the
/// naming frame; a stack that ends first shows `(end of stack)`.
pub fn distinctions<F: Frame>(stacks: &[&[F]], n: usize) -> Vec<String> {
    let texts: Vec<String> = stacks.iter().map(|s| name_with_callers(s, n)).collect();
    let naming: Vec<usize> = stacks
        .iter()
        .map(|s| naming_index(s).unwrap_or(0))
        .collect();
    // The frame `k` places past a stack's naming frame, as shown.
    let shown = |i: usize, k: usize| -> String {
        stacks[i]
            .get(naming[i] + k)
            .map_or_else(|| "(end of stack)".to_owned(), at)
    };
    // The frame `k` places inward of a stack's naming frame (in the allocator or a
    // library that allocates for its caller), as shown.
    let inward = |i: usize, k: usize| -> String {
        naming[i]
            .checked_sub(k)
            .and_then(|j| stacks[i].get(j))
            .map_or_else(|| "(start of stack)".to_owned(), at)
    };
    let mut via: Vec<Vec<String>> = vec![Vec::new(); stacks.len()];
    let mut next = vec![1usize; stacks.len()];
    let mut numbered = vec![false; stacks.len()];
    let mut looked_inward = vec![false; stacks.len()];
    loop {
        let mut groups: std::collections::BTreeMap<(&str, &[String]), Vec<usize>> =
            Default::default();
        for i in (0..stacks.len()).filter(|&i| !numbered[i]) {
            groups.entry((&texts[i], &via[i])).or_default().push(i);
        }
        let mut split = Vec::new();
        for group in groups.into_values().filter(|g| g.len() > 1) {
            let deepest = group
                .iter()
                .map(|&i| stacks[i].len().saturating_sub(naming[i]))
                .max()
                .unwrap_or(0);
            let start = group.iter().map(|&i| next[i]).max().unwrap_or(1);
            let differs = (start..deepest).find(|&k| {
                let first = shown(group[0], k);
                group[1..].iter().any(|&i| shown(i, k) != first)
            });
            split.push((group, differs));
        }
        if split.is_empty() {
            break;
        }
        for (group, differs) in split {
            // Nothing outward tells them apart: what they allocate through may (a
            // library's own setup beside the collect it runs for the same caller),
            // looked at once, before numbering.
            let within = if differs.is_none() && group.iter().all(|&i| !looked_inward[i]) {
                let deepest = group.iter().map(|&i| naming[i]).max().unwrap_or(0);
                (1..=deepest).find(|&k| {
                    let first = inward(group[0], k);
                    group[1..].iter().any(|&i| inward(i, k) != first)
                })
            } else {
                None
            };
            for (rank, &i) in group.iter().enumerate() {
                match (differs, within) {
                    (Some(k), _) => {
                        via[i].push(shown(i, k));
                        next[i] = k + 1;
                    }
                    (None, Some(k)) => {
                        via[i].push(format!("{INWARD}{}", inward(i, k)));
                        looked_inward[i] = true;
                    }
                    (None, None) => {
                        via[i].push(format!("#{}", rank + 1));
                        numbered[i] = true;
                    }
                }
            }
        }
    }
    via.into_iter().map(|v| distinction_text(&v)).collect()
}

/// Marks a distinction found inward of the naming frame.
const INWARD: &str = "in ";

/// [`distinctions`] of the stacks at positions `shown` of `all`, worked out among
/// every stack of `all` (a report's sites, in site order), not among those shown: so
/// that a site reads the same however many rows a view lists, in every view of one
/// report and in its export. Only the stacks whose name and callers read as a shown
/// one's are compared, as the others cannot change its distinction (nor its number,
/// the order among them kept).
pub fn distinctions_among<F: Frame>(all: &[&[F]], shown: &[usize], n: usize) -> Vec<String> {
    let text = |s: &[F]| name_with_callers(s, n);
    // Sites that read alike have naming frames of one shown line (a frame's line is
    // shown only with its file: `describe`), so a stack none of whose frames has a
    // shown site's naming line is passed over before its naming frame is looked
    // for: tests that build no string, so that texts are made for few of a million
    // sites.
    let shown_line = |f: &F| f.file().and(f.line());
    let line = |s: &[F]| naming_index(s).map(|i| shown_line(&s[i]));
    let is_shown: std::collections::HashSet<usize> = shown.iter().copied().collect();
    let lines: std::collections::HashSet<_> = shown.iter().map(|&i| line(all[i])).collect();
    // Few lines (one a row shown): compared in a list, not hashed.
    let frame_lines: Vec<Option<u32>> = lines.iter().flatten().copied().collect();
    let may = |s: &[F]| {
        (s.is_empty() && lines.contains(&None))
            || s.iter().any(|f| frame_lines.contains(&shown_line(f)))
    };
    let wanted: std::collections::HashSet<String> = shown.iter().map(|&i| text(all[i])).collect();
    let alike: Vec<usize> = (0..all.len())
        .filter(|&i| {
            let s = all[i];
            is_shown.contains(&i)
                || (may(s) && lines.contains(&line(s)) && wanted.contains(&text(s)))
        })
        .collect();
    let stacks: Vec<&[F]> = alike.iter().map(|&i| all[i]).collect();
    let found: std::collections::HashMap<usize, String> =
        alike.into_iter().zip(distinctions(&stacks, n)).collect();
    shown.iter().map(|i| found[i].clone()).collect()
}

/// `via A < B`, then `in C` (inward), then `#N`, each part where there is one.
fn distinction_text(parts: &[String]) -> String {
    let outward: Vec<&str> = parts
        .iter()
        .map(String::as_str)
        .filter(|p| !p.starts_with('#') && !p.starts_with(INWARD))
        .collect();
    let mut out = Vec::new();
    if !outward.is_empty() {
        out.push(format!("via {}", outward.join(" < ")));
    }
    out.extend(
        parts
            .iter()
            .filter(|p| p.starts_with(INWARD) || p.starts_with('#'))
            .cloned(),
    );
    out.join(" ")
}

/// A site's text with its distinction, if any: `name < callers [via ...]`.
pub fn with_distinction(text: &str, distinction: &str) -> String {
    if distinction.is_empty() {
        text.to_owned()
    } else {
        format!("{text} [{distinction}]")
    }
}

/// What identifies a site across reports and builds: per frame, innermost first, the
/// function without generic arguments, `@`, the [`crate_path`] of the source file, `:`,
/// the line, and a newline. Empty without frames.
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
        if let Some(file) = f.file() {
            key.push_str(&crate_path(file));
        }
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

/// The one-line warning, with its fix, for a share of allocations in stacks cut at
/// the depth limit, `depth` frames (above [`EARLY_STACKS_WARN_SHARE`] too): their
/// sites are named by their innermost frames, wherever they were called from.
pub fn cut_stacks_warning(share: f64, depth: usize) -> String {
    format!(
        "warning: {:.0} % of allocations have call stacks cut at the depth limit ({depth} \
         frame{}): their sites and categories are told by their innermost frames, not by \
         where those were called from; trace with more frames (ALLOC_TRACE_DEPTH or \
         synth-driver --depth, up to 62; 48 by default)",
        share * 100.0,
        if depth == 1 { "" } else { "s" }
    )
}

/// Above this share of a report's return addresses without a name, readers warn.
pub const UNNAMED_WARN_SHARE: f64 = 0.1;

/// The one-line warning, with its fix, when `unnamed` of a report's `addresses`
/// distinct return addresses have no name: `None` below [`UNNAMED_WARN_SHARE`],
/// unless the binary was replaced (`replaced`) and any went unnamed.
pub fn unnamed_frames_warning(unnamed: u64, addresses: u64, replaced: bool) -> Option<String> {
    let many = unnamed as f64 > UNNAMED_WARN_SHARE * addresses as f64;
    if unnamed == 0 || !(many || replaced) {
        return None;
    }
    let why = if replaced {
        "the program's binary was deleted or replaced (rebuilt?) before the report was \
         written, and the symbolizer reads it by its path: run it again and leave it \
         in place until the report is written"
    } else {
        "the binary or a library has no symbols (stripped?: keep symbols and line \
         tables, strip = false and debug = \"line-tables-only\" in the release \
         profile), or, without /proc, the symbolizer could not find the executable"
    };
    Some(format!(
        "warning: {unnamed} of {addresses} return addresses in the stacks have no name \
         (their frames show as addresses): {why}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unnamed_frames_are_warned_of_past_a_share_or_after_a_rebuild() {
        assert_eq!(unnamed_frames_warning(0, 100, true), None);
        assert_eq!(unnamed_frames_warning(10, 100, false), None);
        let stripped = unnamed_frames_warning(11, 100, false).unwrap();
        assert!(
            stripped.starts_with("warning: 11 of 100 return addresses"),
            "{stripped}"
        );
        assert!(stripped.contains("stripped?"), "{stripped}");
        let rebuilt = unnamed_frames_warning(1, 100, true).unwrap();
        assert!(rebuilt.contains("deleted or replaced"), "{rebuilt}");
    }

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
    fn distinctions_among_all_equal_those_of_the_whole() {
        // Sites of distinct lines (passed over by the prefilter), two that read alike
        // and differ further out, and two whose naming frames read `f` alone: one
        // without a file but with a line, one with a file but no line.
        let alike = |outer: &'static str| {
            vec![
                at("lc<S>", BOOLEAN, 450),
                at("addmany<S>", "/r/uint32.rs", 350),
                at("compute<S>", "/r/sha256.rs", 144),
                at(outer, "/r/label.rs", 61),
            ]
        };
        let bare = |file: Option<&'static str>, line: Option<u32>| {
            vec![
                FrameRef {
                    function: "f",
                    file,
                    line,
                },
                at("main", "/r/main.rs", 9),
                at("outer", "/r/outer.rs", 1),
            ]
        };
        let mut stacks: Vec<Vec<FrameRef>> = (0..6)
            .map(|k| vec![at("other", "/r/o.rs", 100 + k), at("main", "/r/main.rs", 9)])
            .collect();
        stacks.push(alike("first"));
        stacks.push(alike("second"));
        stacks.push(bare(None, Some(5)));
        stacks.push(bare(Some("/r/f.rs"), None));
        let all: Vec<&[FrameRef]> = stacks.iter().map(Vec::as_slice).collect();
        let whole = distinctions(&all, CALLERS);
        assert!(!whole[6].is_empty() && !whole[8].is_empty(), "{whole:?}");
        for shown in [vec![6], vec![7], vec![8], vec![9], vec![0, 7, 9], vec![3]] {
            let want: Vec<String> = shown.iter().map(|&i| whole[i].clone()).collect();
            assert_eq!(distinctions_among(&all, &shown, CALLERS), want, "{shown:?}");
        }
    }

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
        // Where a thread starts says nothing of who called.
        assert!(!is_caller(
            "start_thread",
            Some("./nptl/pthread_create.c"),
            lc
        ));
        assert!(!is_caller("clone3", Some("clone3.S"), lc));
        // The program's own `main` is one.
        assert!(is_caller("main", Some("/r/src/main.rs"), lc));
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
        // A program of one file: its callers are in the naming frame's file.
        let main = "/home/u/app/src/main.rs";
        let one_file = [
            at("push<u8>", PUSH, 1),
            at("temporaries", main, 22),
            at("worker", main, 30),
            at("{closure#0}", main, 37),
            at("start_thread", "./nptl/pthread_create.c", 447),
        ];
        assert_eq!(
            callers(&one_file, 2),
            "worker (main.rs:30) < {closure#0} (main.rs:37)"
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
            "lc@bellpepper-core/src/gadgets/boolean.rs:10\n"
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
            "lc@bellpepper-core/src/gadgets/boolean.rs\n"
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

    #[test]
    fn crate_paths_do_not_depend_on_where_the_crate_came_from() {
        let want = "bellpepper-core/src/gadgets/boolean.rs";
        for path in [
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
            "/home/a/.cargo/registry/src/github.com-1ecc6299db9ec823/bellpepper-core-0.2.1-rc.1/src/gadgets/boolean.rs",
            "/work/app/vendor/bellpepper-core/src/gadgets/boolean.rs",
            "vendor/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
            "/home/me/bellpepper/crates/bellpepper-core/src/gadgets/boolean.rs",
            "/root/.cargo/git/checkouts/bellpepper-3a1f9c0d2e4b5a67/8d1c2f3/crates/bellpepper-core/src/gadgets/boolean.rs",
            "/root/.cargo/git/checkouts/bellpepper-core-3a1f9c0d2e4b5a67/8d1c2f3/src/gadgets/boolean.rs",
        ] {
            assert_eq!(crate_path(path), want, "{path}");
        }
        assert_eq!(
            crate_path("/rustc/59807616e1fa/library/alloc/src/vec/mod.rs"),
            "alloc/src/vec/mod.rs"
        );
        assert_eq!(
            crate_path("/r/x25519-dalek-2.0.0/src/lib.rs"),
            "x25519-dalek/src/lib.rs"
        );
        assert_eq!(crate_path("/r/sha2-0.10.8/src/lib.rs"), "sha2/src/lib.rs");
        assert_eq!(
            crate_path("/w/alloc-tracer/examples/demo.rs"),
            "alloc-tracer/examples/demo.rs"
        );
        // A module folder named `tests` inside `src` does not hide the crate.
        assert_eq!(crate_path("/w/a/src/tests/b.rs"), "a/src/tests/b.rs");
        assert_eq!(
            crate_path("./csu/../sysdeps/nptl/libc_start_call_main.h"),
            "../sysdeps/nptl/libc_start_call_main.h"
        );
        assert_eq!(crate_path("src/main.rs"), "src/main.rs");
        assert_eq!(crate_path("main.rs"), "main.rs");
    }

    #[test]
    fn colliding_sites_are_told_apart_by_the_first_frame_that_differs() {
        let lc = |outer: &'static str, line| {
            vec![
                at("push<u8>", PUSH, 1),
                at("insert_or_update<S>", LC, 108),
                at("lc<S>", BOOLEAN, 450),
                at(
                    "addmany<S>",
                    "/r/bellperson-0.27.0/src/gadgets/uint32.rs",
                    350,
                ),
                at("sha256_compression_function<S>", "/r/sha256.rs", 200),
                at(outer, "/r/porep/src/column.rs", line),
            ]
        };
        let unique = vec![
            at("insert_or_update<S>", LC, 108),
            at("enforce", "/r/x.rs", 9),
        ];
        let stacks = [
            lc("hash", 10),
            unique.clone(),
            lc("hash", 12),
            lc("label", 10),
            lc("hash", 10),
            lc("hash", 10),
        ];
        let refs: Vec<&[FrameRef]> = stacks.iter().map(Vec::as_slice).collect();
        assert_eq!(
            distinctions(&refs, CALLERS),
            [
                "via hash (column.rs:10) #1",
                "",
                "via hash (column.rs:12)",
                "via label (column.rs:10)",
                "via hash (column.rs:10) #2",
                "via hash (column.rs:10) #3",
            ]
        );
        let texts: Vec<String> = refs
            .iter()
            .zip(distinctions(&refs, CALLERS))
            .map(|(s, d)| with_distinction(&name_with_callers(s, CALLERS), &d))
            .collect();
        assert_eq!(
            texts[2],
            "insert_or_update (lc.rs:108) < lc (boolean.rs:450) < addmany (uint32.rs:350) \
             [via hash (column.rs:12)]"
        );
        let unique_texts: std::collections::HashSet<&String> = texts.iter().collect();
        assert_eq!(unique_texts.len(), texts.len());
        // A stack that ends where another goes on, and frames that read the same.
        let short = lc("hash", 10)[..5].to_vec();
        let refs: Vec<&[FrameRef]> = vec![&stacks[0], &short, &unique, &unique];
        assert_eq!(
            distinctions(&refs, CALLERS),
            ["via hash (column.rs:10)", "via (end of stack)", "#1", "#2"]
        );
    }

    #[test]
    fn stacks_alike_from_the_naming_frame_out_are_told_apart_by_what_they_allocate_through() {
        // A vector made and later grown from one line: the same frames outward of the
        // naming frame, another inward (liballoc's allocation, or its growth).
        let through = |function: &'static str, line: u32| {
            vec![
                at(function, PUSH, line),
                at("insert_or_update<S>", LC, 108),
                at("enforce", "/r/x.rs", 9),
            ]
        };
        let stacks = [
            through("with_capacity", 1),
            through("finish_grow", 2),
            through("with_capacity", 1),
        ];
        let refs: Vec<&[FrameRef]> = stacks.iter().map(Vec::as_slice).collect();
        assert_eq!(
            distinctions(&refs, CALLERS),
            [
                "in with_capacity (mod.rs:1) #1",
                "in finish_grow (mod.rs:2)",
                "in with_capacity (mod.rs:1) #2",
            ]
        );
    }
}
