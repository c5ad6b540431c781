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
///   vendored, or a git checkout): a
///   `par_iter().collect()` is the caller's vector, and the frames between a
///   worker's start and the caller's closure are rayon's own;
/// - this tracer (`alloc-tracer/src/`, versioned or not, or a relative path): what it
///   allocates for the program, such as `Session::new`'s copy of its path.
fn in_plumbing_crate(file: &str) -> bool {
    in_crate(file, &["alloc-tracer", "rayon", "rayon-core"])
}

/// True for a source file of one of the crates `names`, wherever it was built from
/// (a registry folder `rayon-1.12.0`, a vendored or path folder `rayon`, a git
/// checkout), as [`crate_path`] reads it: a file under the crate's `src`.
pub(crate) fn in_crate(file: &str, names: &[&str]) -> bool {
    // `crate_path`'s reading of the folders before the last `src`, without making
    // the path: naming asks this of every frame it passes.
    let mut up = file.rsplit('/').skip_while(|p| *p != "src").skip(1);
    let Some(folder) = up.next() else {
        return false;
    };
    let (checkout, above) = (up.next(), up.next());
    let krate = match (checkout, above) {
        (Some(checkout), Some("checkouts")) if is_hex(folder) => without_hash(checkout),
        _ => without_version(folder),
    };
    names.contains(&krate)
}

/// A source path as `<crate>/<path inside the crate>`, whatever folder the crate was
/// built from:
///
/// | source | path | crate path |
/// |---|---|---|
/// | registry | `~/.cargo/registry/src/<index>/bellpepper-core-0.2.1/src/lc.rs` | `bellpepper-core/src/lc.rs` |
/// | vendored | `vendor/bellpepper-core/src/lc.rs` | `bellpepper-core/src/lc.rs` |
/// | path dependency | `/home/me/bellpepper/crates/bellpepper-core/src/lc.rs` | `bellpepper-core/src/lc.rs` |
/// | git, workspace | `~/.cargo/git/checkouts/bellpepper-<hash>/<rev>/crates/bellpepper-core/src/lc.rs` | `bellpepper-core/src/lc.rs` |
/// | git, one crate | `~/.cargo/git/checkouts/bellpepper-core-<hash>/<rev>/src/lc.rs` | `bellpepper-core/src/lc.rs` |
/// | standard library | `/rustc/<hash>/library/alloc/src/vec/mod.rs` | `alloc/src/vec/mod.rs` |
///
/// The crate folder is the one that holds the last `src` component (else the last
/// `examples`, `tests` or `benches`), without a `-<version>` suffix; in a git checkout
/// without a crate folder, the checkout's name without its `-<hash>`. A path with none
/// of these keeps its last four components. The crate is named by its folder, so a
/// path dependency checked out under another folder name (`my-fork/src/lc.rs`) does
/// not match the registry's crate.
pub fn crate_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    let marker = |names: &[&str]| {
        parts
            .iter()
            .rposition(|p| names.contains(p))
            .filter(|&i| i > 0)
    };
    let Some(root) = marker(&["src"]).or_else(|| marker(&["examples", "tests", "benches"])) else {
        return path_tail(path).to_owned();
    };
    let folder = parts[root - 1];
    // `checkouts/<name>-<hash>/<rev>/src`: the folder is a revision, the crate is the
    // checkout.
    let krate = if root >= 3 && parts[root - 3] == "checkouts" && is_hex(folder) {
        without_hash(parts[root - 2])
    } else {
        without_version(folder)
    };
    format!("{krate}/{}", parts[root..].join("/"))
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `name-<hex>` (a git checkout's folder) without the `-<hex>`.
fn without_hash(folder: &str) -> &str {
    match folder.rsplit_once('-') {
        Some((name, hash)) if !name.is_empty() && hash.len() >= 8 && is_hex(hash) => name,
        _ => folder,
    }
}

/// `name-1.2.3` (a registry or vendored folder) without the `-1.2.3`; the version
/// may carry a pre-release or build suffix (`-rc.1`, `+zstd.1.5`).
fn without_version(folder: &str) -> &str {
    for (i, _) in folder.match_indices('-') {
        if i > 0 && is_version(&folder[i + 1..]) {
            return &folder[..i];
        }
    }
    folder
}

/// `MAJOR.MINOR.PATCH`, optionally followed by `-...` or `+...`.
fn is_version(s: &str) -> bool {
    let core = s.split(['-', '+']).next().unwrap_or("");
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
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
        // A git checkout: the folder before `src` is a revision.
        assert!(is_plumbing(
            "collect_with_consumer",
            Some("/h/.cargo/git/checkouts/rayon-3a1f9c0d2e4b5a67/8d1c2f3/src/iter/collect/mod.rs")
        ));
        // A program of one's own that only begins with rayon's name is not it.
        assert!(!is_plumbing("main", Some("/home/u/rayon-demo/src/main.rs")));
    }

    #[test]
    fn a_files_crate_reads_as_crate_path_reads_it() {
        for path in [
            "/r/registry/src/index.crates.io-1949cf8c6b5b557f/bellpepper-core-0.2.1/src/lc.rs",
            "/h/.cargo/git/checkouts/bellpepper-3a1f9c0d2e4b5a67/8d1c2f3/src/lc.rs",
            "/h/.cargo/git/checkouts/bellpepper-3a1f9c0d2e4b5a67/8d1c2f3/crates/core/src/lc.rs",
            "/w/vendor/rayon/src/iter/mod.rs",
            "alloc-tracer/src/session.rs",
            "/w/app/src/main.rs",
        ] {
            let krate = crate_path(path).split('/').next().unwrap().to_owned();
            assert!(in_crate(path, &[krate.as_str()]), "{path}: {krate}");
            assert!(!in_crate(path, &["other"]), "{path}");
        }
        for path in ["src/main.rs", "/w/app/examples/demo.rs", "lc.rs"] {
            assert!(!in_crate(path, &["src", "app", "w", ""]), "{path}");
        }
    }
}
