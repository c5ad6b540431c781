//! The short text summary printed after a report is written: totals and the top
//! call sites, each named by its first frame outside the allocator and the standard
//! library. (The analyzer ranks, classifies and prices sites properly; this is the
//! tracer's own one-glance view.)

use crate::symbolize::Frame;
use std::fmt;
use std::path::PathBuf;

/// Function-name prefixes of allocator plumbing, skipped when naming a site.
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

/// Source paths of allocator plumbing: Rust's alloc, core and std libraries, hashbrown,
/// and this crate.
const PLUMBING_FILES: &[&str] = &[
    "/library/alloc/",
    "/library/core/",
    "/library/std/",
    "/hashbrown-",
    concat!(env!("CARGO_MANIFEST_DIR"), "/src/"),
];

/// True for frames of the allocator, liballoc, core and std (and unknown frames).
/// Inlined frames can carry short names (`push`, `with_capacity`), so the source path
/// counts too.
pub fn is_plumbing(frame: &Frame) -> bool {
    let function = frame.function.as_str();
    let f = function.trim_start_matches('<');
    PLUMBING.iter().any(|p| f.starts_with(p))
        || (f.starts_with("T as")
            && [" as alloc::", " as core::", " as std::"]
                .iter()
                .any(|p| function.contains(p)))
        || frame
            .file
            .as_deref()
            .is_some_and(|file| PLUMBING_FILES.iter().any(|p| file.contains(p)))
}

/// True for frames of this crate (the tracer's own, innermost in every stack).
pub fn is_tracer(frame: &Frame) -> bool {
    frame.function.starts_with("alloc_tracer::")
        || frame
            .file
            .as_deref()
            .is_some_and(|f| f.starts_with(concat!(env!("CARGO_MANIFEST_DIR"), "/src/")))
}

/// True for the allocator entry points the compiler generates (`__rust_alloc` and
/// friends), which sit between the tracer and the program.
pub fn is_shim(frame: &Frame) -> bool {
    frame.function.starts_with("__rust_")
        || frame.function.starts_with("__rg_")
        || frame.function.starts_with("__rustc::__rust_")
}

/// The frame that names a site: the first one outside allocator plumbing, else the
/// outermost captured.
pub fn naming_frame(frames: &[Frame]) -> Option<&Frame> {
    frames.iter().find(|f| !is_plumbing(f)).or(frames.last())
}

/// A function name without generic arguments: `Vec<T>::push` -> `Vec::push`.
pub fn without_generics(name: &str) -> String {
    // A qualified path `<Type as Trait>::f` keeps its type: drop only the brackets.
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

/// A site's display name: its naming frame (without generics, with `file:line`),
/// then the next two distinct functions that called it.
pub fn site_name(frames: &[Frame]) -> String {
    let Some(first) = naming_frame(frames) else {
        return String::new();
    };
    let at = |f: &Frame| match (&f.file, f.line) {
        (Some(file), Some(line)) => format!(
            "{} ({}:{line})",
            without_generics(&f.function),
            file.rsplit('/').next().unwrap_or(file)
        ),
        _ => without_generics(&f.function),
    };
    let mut parts = vec![at(first)];
    let mut last = without_generics(&first.function);
    let start = frames
        .iter()
        .position(|f| std::ptr::eq(f, first))
        .unwrap_or(0);
    for f in &frames[start..] {
        let name = without_generics(&f.function);
        if parts.len() == 3 {
            break;
        }
        if name != last && !is_plumbing(f) {
            parts.push(name.clone());
        }
        last = name;
    }
    parts.join(" <- ")
}

/// One line of the summary.
#[derive(Clone, Debug)]
pub struct TopSite {
    /// `site_id` in the report.
    pub site_id: u64,
    /// Function (and `file:line`) naming the site.
    pub name: String,
    /// Allocations and reallocs.
    pub allocs: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Temporaries.
    pub temporaries: u64,
}

/// What a written report holds, in brief.
#[derive(Clone, Debug)]
pub struct ReportSummary {
    /// The report directory.
    pub dir: PathBuf,
    /// Mode name.
    pub mode: String,
    /// Distinct call stacks.
    pub stacks: usize,
    /// Rows of `sites.parquet`.
    pub site_rows: usize,
    /// Allocations counted (all phases).
    pub allocs: u64,
    /// Requested bytes (all phases).
    pub bytes_requested: u64,
    /// Temporaries (all phases).
    pub temporaries: u64,
    /// The sites with the most allocations, most first.
    pub top: Vec<TopSite>,
}

impl fmt::Display for ReportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = |a: u64, b: u64| {
            if b == 0 {
                0.0
            } else {
                100.0 * a as f64 / b as f64
            }
        };
        writeln!(f, "alloc-tracer report: {}", self.dir.display())?;
        writeln!(
            f,
            "  mode {}: {} allocations, {:.1} MiB requested, {:.0} % temporaries, {} call stacks",
            self.mode,
            self.allocs,
            self.bytes_requested as f64 / (1 << 20) as f64,
            pct(self.temporaries, self.allocs),
            self.stacks
        )?;
        if self.top.is_empty() {
            return Ok(());
        }
        writeln!(f, "  top sites by allocations:")?;
        writeln!(
            f,
            "  {:>12} {:>6} {:>6} {:>9}  site",
            "allocs", "share", "temps", "B/alloc"
        )?;
        for s in &self.top {
            writeln!(
                f,
                "  {:>12} {:>5.1}% {:>5.0}% {:>9.0}  {}",
                s.allocs,
                pct(s.allocs, self.allocs),
                pct(s.temporaries, s.allocs),
                s.bytes_requested as f64 / s.allocs.max(1) as f64,
                s.name
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str) -> Frame {
        Frame {
            function: function.into(),
            file: None,
            line: None,
            inlined: false,
        }
    }

    #[test]
    fn generics_are_dropped() {
        assert_eq!(
            without_generics("<alloc::vec::Vec<T>>::push<u8>"),
            "alloc::vec::Vec::push"
        );
        assert_eq!(without_generics("main"), "main");
    }

    #[test]
    fn library_paths_are_plumbing() {
        let mut f = frame("push");
        f.file = Some("/rustc/abc/library/alloc/src/vec/mod.rs".into());
        assert!(is_plumbing(&f));
        f.file = Some("/home/me/.cargo/registry/src/x/bellpepper-core-0.2.1/src/lc.rs".into());
        assert!(!is_plumbing(&f));
    }

    #[test]
    fn names_skip_plumbing() {
        let frames = [
            frame("__rustc::__rust_alloc"),
            frame("alloc::raw_vec::RawVecInner<A>::with_capacity_in"),
            frame("<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem"),
            frame("bellpepper_core::lc::LinearCombination<Scalar>::add_unsimplified"),
            frame("main"),
        ];
        assert_eq!(
            naming_frame(&frames).unwrap().function,
            "bellpepper_core::lc::LinearCombination<Scalar>::add_unsimplified"
        );
        assert_eq!(
            naming_frame(&frames[..2]).unwrap().function,
            frames[1].function
        );
        assert!(naming_frame(&[]).is_none());
    }
}
