//! Frame conventions: which frames are allocator plumbing, and how a function name
//! is shortened for display. `site` names and keys a site with them.

/// Function-name prefixes of allocator plumbing.
const PLUMBING: &[&str] = &[
    "alloc::",
    "core::",
    "std::",
    "__rust",
    "__rg_",
    "alloc_tracer::",
    "tikv_jemallocator::",
    "hashbrown::",
    "0x",
];

/// Source paths of allocator plumbing: Rust's alloc, core and std, and hashbrown
/// (and rayon's and this tracer's sources, [`in_plumbing_crate`]).
const PLUMBING_FILES: &[&str] = &[
    "/library/alloc/",
    "/library/core/",
    "/library/std/",
    "/hashbrown-",
];

/// True for frames of the allocator, liballoc, core and std, and unknown frames.
/// Inlined frames can carry short names (`push`, `with_capacity`), so the source path
/// counts too.
pub fn is_plumbing(function: &str, file: Option<&str>) -> bool {
    let f = function.trim_start_matches('<');
    PLUMBING.iter().any(|p| f.starts_with(p))
        || (f.starts_with("T as")
            && [" as alloc::", " as core::", " as std::"]
                .iter()
                .any(|p| function.contains(p)))
        || file.is_some_and(|file| {
            PLUMBING_FILES.iter().any(|p| file.contains(p)) || in_plumbing_crate(file)
        })
}

/// True for a source file of a crate that allocates on its caller's behalf, which
/// line tables name without a crate path:
/// - rayon and rayon-core (`rayon-1.12.0/src/` in the registry, `rayon/src/`
///   vendored or checked out): a
///   `par_iter().collect()` is the caller's vector, and the frames between a
///   worker's start and the caller's closure are rayon's own;
/// - this tracer (`alloc-tracer/src/`, versioned or not, or a relative path): what it
///   allocates for the program, such as `Session::new`'s copy of its path.
fn in_plumbing_crate(file: &str) -> bool {
    in_crate(file, &["alloc-tracer", "rayon", "rayon-core"])
}

/// True for a source file under `<name>/src/` or `<name>-<version>/src/`, for one of
/// `names`: a registry folder (`rayon-1.12.0`), or a crate vendored or checked out
/// under its own name (`vendor/rayon/src`).
fn in_crate(file: &str, names: &[&str]) -> bool {
    let versioned = |folder: &str, name: &str| {
        folder
            .strip_prefix(name)
            .and_then(|v| v.strip_prefix('-'))
            .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    };
    let named = |folder: &str| {
        names
            .iter()
            .any(|name| folder == *name || versioned(folder, name))
    };
    file.split('/')
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[1] == "src" && named(w[0]))
}

/// A function name without generic arguments: `Vec<T>::push<u8>` -> `Vec::push`,
/// `f::<T>` -> `f`. A
/// qualified path `<Type as Trait>::f` keeps its type, without the brackets. The `>`
/// of `->` (a return type, as in `F: FnOnce() -> T`) closes no bracket.
pub fn without_generics(name: &str) -> String {
    if name.starts_with('<') {
        let mut depth = 0i64;
        if let Some((end, _)) = brackets(name).find(|&(_, step)| {
            depth += step;
            depth == 0
        }) {
            return without_generics(&name[1..end]) + &without_generics(&name[end + 1..]);
        }
    }
    let mut out = String::with_capacity(name.len());
    let mut depth = 0i64;
    let mut steps = brackets(name).peekable();
    for (i, c) in name.char_indices() {
        if let Some(&(at, step)) = steps.peek()
            && at == i
        {
            steps.next();
            // An unmatched `>` stays, as text.
            if step > 0 || depth > 0 {
                // A turbofish's `::` goes with its arguments (`f::<T>` is `f`).
                if step > 0 && depth == 0 && out.ends_with("::") {
                    out.truncate(out.len() - 2);
                }
                depth += step;
                continue;
            }
        }
        if depth == 0 {
            out.push(c);
        }
    }
    out
}

/// The generic brackets of `name`: each `<` (+1) and `>` (-1) by byte offset, but the
/// `>` of `->`.
fn brackets(name: &str) -> impl Iterator<Item = (usize, i64)> + '_ {
    let mut prev = '\0';
    name.char_indices().filter_map(move |(i, c)| {
        let step = match c {
            '<' => Some((i, 1)),
            '>' if prev != '-' => Some((i, -1)),
            _ => None,
        };
        prev = c;
        step
    })
}

/// The last component of a source path.
pub fn file_name(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

/// `function (file:line)` of a frame, without generic arguments; just the function
/// when the line tables gave no file or line.
pub fn describe(function: &str, file: Option<&str>, line: Option<u32>) -> String {
    let name = without_generics(function);
    match (file, line) {
        (Some(file), Some(line)) => format!("{name} ({}:{line})", file_name(file)),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generics_are_dropped() {
        assert_eq!(
            without_generics("<alloc::vec::Vec<T>>::push<u8>"),
            "alloc::vec::Vec::push"
        );
        assert_eq!(without_generics("main"), "main");
        assert_eq!(
            without_generics("test::__rust_begin_short_backtrace::<fn(), ()>"),
            "test::__rust_begin_short_backtrace"
        );
        assert_eq!(
            without_generics("core::ptr::drop_in_place::<u8>::{closure#0}"),
            "core::ptr::drop_in_place::{closure#0}"
        );
        assert_eq!(
            without_generics("<T as core::convert::Into<U>>::into"),
            "T as core::convert::Into::into"
        );
    }

    #[test]
    fn a_return_type_arrow_closes_no_bracket() {
        // A function pointer's return type in a generic argument (a frame of a
        // 2 KiB PoRep report, shortened).
        assert_eq!(
            without_generics(
                "call_once<std::sync::poison::rwlock::RwLock<std::collections::hash::map::HashMap<u64, u8>>, spin::relax::Spin, fn() -> std::sync::poison::rwlock::RwLock<std::collections::hash::map::HashMap<u64, u8>>>"
            ),
            "call_once"
        );
        assert_eq!(
            without_generics("<F as core::ops::FnOnce<()>>::call_once<fn() -> u8>"),
            "F as core::ops::FnOnce::call_once"
        );
        // Outside brackets an arrow is text, as is a `>` that closes nothing.
        assert_eq!(without_generics("a -> b"), "a -> b");
        assert_eq!(without_generics("a > b"), "a > b");
    }

    #[test]
    fn plumbing_by_name_and_path() {
        assert!(is_plumbing("__rustc::__rust_alloc", None));
        assert!(is_plumbing(
            "<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
            None
        ));
        assert!(is_plumbing(
            "push",
            Some("/rustc/abc/library/alloc/src/vec/mod.rs")
        ));
        assert!(!is_plumbing(
            "insert_or_update",
            Some("/r/bellpepper-core-0.2.1/src/lc.rs")
        ));
        // The tracer's own functions, named without their path by line tables.
        assert!(is_plumbing(
            "new",
            Some("/home/u/alloc-profiler/alloc-tracer/src/session.rs")
        ));
        assert!(is_plumbing(
            "new",
            Some("/r/registry/src/index/alloc-tracer-0.1.0/src/session.rs")
        ));
        assert!(is_plumbing("new", Some("alloc-tracer/src/session.rs")));
        // Rayon's parallel iterators, which collect and split for their caller.
        assert!(is_plumbing(
            "collect_with_consumer",
            Some("/r/registry/src/index/rayon-1.12.0/src/iter/collect/mod.rs")
        ));
        assert!(is_plumbing(
            "join_context",
            Some("/r/registry/src/index/rayon-core-1.13.0/src/join/mod.rs")
        ));
        assert!(!is_plumbing(
            "main",
            Some("/home/u/alloc-profiler/alloc-tracer/examples/demo.rs")
        ));
        // Its format crate, and crates that only begin with its name, are not it.
        assert!(!is_plumbing(
            "f",
            Some("/r/alloc-tracer-format-0.1.0/src/lib.rs")
        ));
        assert!(!is_plumbing("f", Some("/r/alloc-tracer-ext/src/lib.rs")));
        assert!(is_plumbing(
            "collect_with_consumer",
            Some("/w/proj/vendor/rayon/src/iter/collect/mod.rs")
        ));
        // A program of one's own that only begins with rayon's name is not it.
        assert!(!is_plumbing("main", Some("/home/u/rayon-demo/src/main.rs")));
    }
}
