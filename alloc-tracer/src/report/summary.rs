//! The short text summary printed after a report is written: totals and the top
//! call sites, each named by its first frame outside the allocator and the standard
//! library. (The analyzer ranks, classifies and prices sites properly; this is the
//! tracer's own one-glance view.)

use crate::symbolize::Frame;
use std::fmt;
use std::path::PathBuf;

use alloc_tracer_format::frames;

/// True for frames of the allocator, liballoc, core and std, unknown frames, and
/// this crate's own (see `alloc_tracer_format::frames`).
pub fn is_plumbing(frame: &Frame) -> bool {
    alloc_tracer_format::frames::is_plumbing(&frame.function, frame.file.as_deref())
        || is_tracer(frame)
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

/// A site's display name: its naming frame (without generics, with `file:line`),
/// then where it was reached from: the next frames outside the allocator, std, the
/// naming frame's own file and the C runtime (`frames::is_caller`), as the analyzer
/// shows them.
pub fn site_name(frames: &[Frame]) -> String {
    let Some(first) = naming_frame(frames) else {
        return String::new();
    };
    let pos = frames
        .iter()
        .position(|f| std::ptr::eq(f, first))
        .unwrap_or(0);
    let own = first.file.as_deref();
    let callers = frames[pos + 1..]
        .iter()
        .filter(|f| frames::is_caller(&f.function, f.file.as_deref(), own))
        .take(frames::CALLERS)
        .map(at);
    std::iter::once(at(first))
        .chain(callers)
        .collect::<Vec<_>>()
        .join(" < ")
}

/// `function (file:line)` of one frame, without generics.
fn at(f: &Frame) -> String {
    frames::describe(&f.function, f.file.as_deref(), f.line)
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
        // `count` mode does not count temporaries: say so rather than print 0 %.
        let temporaries = if self.mode == "count" {
            "temporaries not counted".to_owned()
        } else {
            format!("{:.0} % temporaries", pct(self.temporaries, self.allocs))
        };
        writeln!(
            f,
            "  mode {}: {} allocations, {:.1} MiB requested, {temporaries}, {} call stacks",
            self.mode,
            self.allocs,
            self.bytes_requested as f64 / (1 << 20) as f64,
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

    #[test]
    fn names_show_callers_outside_the_naming_file() {
        let at = |function: &str, file: &str, line| Frame {
            file: Some(file.into()),
            line: Some(line),
            ..frame(function)
        };
        let frames = [
            at("push<T>", "/rustc/x/library/alloc/src/vec/mod.rs", 1),
            at(
                "insert_or_update<S>",
                "/r/bellpepper-core-0.2.1/src/lc.rs",
                108,
            ),
            at(
                "add_unsimplified<S>",
                "/r/bellpepper-core-0.2.1/src/lc.rs",
                203,
            ),
            at(
                "lc<S>",
                "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
                450,
            ),
            at(
                "addmany<S>",
                "/r/bellpepper-0.2.1/src/gadgets/uint32.rs",
                350,
            ),
            at("sha256<S>", "/r/bellpepper-0.2.1/src/gadgets/sha256.rs", 9),
        ];
        assert_eq!(
            site_name(&frames),
            "insert_or_update (lc.rs:108) < lc (boolean.rs:450) < addmany (uint32.rs:350)"
        );
        assert_eq!(site_name(&frames[..1]), "push (mod.rs:1)");
    }
}
