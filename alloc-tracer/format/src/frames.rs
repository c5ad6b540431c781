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

/// Source paths of allocator plumbing: Rust's alloc, core and std, and hashbrown.
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
        || file.is_some_and(|file| PLUMBING_FILES.iter().any(|p| file.contains(p)))
}

/// A function name without generic arguments: `Vec<T>::push<u8>` -> `Vec::push`. A
/// qualified path `<Type as Trait>::f` keeps its type, without the brackets.
pub fn without_generics(name: &str) -> String {
    if let Some(inner) = name.strip_prefix('<') {
        let mut depth = 1usize;
        if let Some(end) = inner.find(|c| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            depth == 0
        }) {
            return without_generics(&inner[..end]) + &without_generics(&inner[end + 1..]);
        }
    }
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
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
    }
}
