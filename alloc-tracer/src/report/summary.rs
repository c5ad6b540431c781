//! The short text summary printed after a report is written: totals and the top
//! call sites, each named by its first frame outside the allocator and the standard
//! library. (The analyzer ranks, classifies and prices sites properly; this is the
//! tracer's own one-glance view.)

use crate::symbolize::Frame;
use std::fmt;
use std::path::PathBuf;

use alloc_tracer_format::site;

impl site::Frame for Frame {
    fn function(&self) -> &str {
        &self.function
    }
    fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }
    fn line(&self) -> Option<u32> {
        self.line
    }
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

/// The display names of the first `shown` of `stacks` (every site of the report, in
/// site order, from the frames the report keeps: the tracer's own and the allocator
/// shim dropped): each its name and callers as the analyzer shows them
/// (`alloc_tracer_format::site`), and where two sites would read the same, what
/// tells them apart among all of them (`alloc_tracer_format::site::distinctions_among`,
/// as `analyzer top` and the export name them).
pub fn site_names<F: site::Frame>(stacks: &[Vec<F>], shown: usize) -> Vec<String> {
    let refs: Vec<&[F]> = stacks.iter().map(Vec::as_slice).collect();
    let shown: Vec<usize> = (0..shown.min(refs.len())).collect();
    refs.iter()
        .zip(site::distinctions_among(&refs, &shown, site::CALLERS))
        .map(|(frames, d)| {
            site::with_distinction(&site::name_with_callers(frames, site::CALLERS), &d)
        })
        .collect()
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
    /// Mode name (in force when the report was written).
    pub mode: String,
    /// Allocations each sampled stack stands for: the latest stacks' mode's (1 where
    /// every stack was recorded), as the manifest's `sample_interval`.
    pub sample_interval: u64,
    /// Stacks were recorded under more than one weight (the manifest's
    /// `stack_weights_changed`): each sampled one counts for its own interval.
    pub weights_changed: bool,
    /// The mode the stacks were recorded in (the manifest's `stacks_mode`): `mode`
    /// where it records them, the latest that did in a run switched to `count` or
    /// `off`; `None` where none was.
    pub stacks_mode: Option<String>,
    /// Allocations and reallocs counted in `count` mode, with no stack (the
    /// manifest's `allocs_without_stacks`): in no site.
    pub allocs_without_stacks: u64,
    /// The inner allocator, if the program named it ([`crate::set_allocator_name`]).
    pub allocator: Option<String>,
    /// Distinct call stacks.
    pub stacks: usize,
    /// Rows of `sites.parquet`.
    pub site_rows: usize,
    /// Allocations counted (all phases).
    pub allocs: u64,
    /// Reallocs counted (all phases): sites' counts and shares are of allocations and
    /// reallocs together.
    pub reallocs: u64,
    /// Requested bytes (all phases).
    pub bytes_requested: u64,
    /// Temporaries (all phases).
    pub temporaries: u64,
    /// The sites with the most allocations, most first.
    pub top: Vec<TopSite>,
    /// A warning, with its fix, when many stacks end before main or a thread's
    /// start (code built without frame pointers).
    pub setup_warning: Option<String>,
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
        // What a site's count is of: its allocations and reallocs.
        let calls = self.allocs.saturating_add(self.reallocs);
        writeln!(f, "alloc-tracer report: {}", self.dir.display())?;
        // Those a stack was recorded for (every one where no part of the run was in
        // `count` mode): what temporaries are counted among.
        let with_stacks = calls.saturating_sub(self.allocs_without_stacks);
        // `count` mode does not count temporaries: say so rather than print 0 %.
        let temporaries = match &self.stacks_mode {
            None => "temporaries not counted".to_owned(),
            Some(_) if self.allocs_without_stacks > 0 => format!(
                "{:.0} % temporaries of those with stacks",
                pct(self.temporaries, with_stacks)
            ),
            Some(_) => format!("{:.0} % temporaries", pct(self.temporaries, calls)),
        };
        // Count mode records none: a 0 would read as stacks lost.
        let stacks = if self.stacks_mode.is_none() && self.stacks == 0 {
            "no call stacks (count mode records none)".to_owned()
        } else {
            format!("{} call stacks", self.stacks)
        };
        // Written after a switch from the mode that recorded the stacks.
        let mode = match &self.stacks_mode {
            Some(m) if *m != self.mode => format!("{} (stacks recorded in {m})", self.mode),
            _ => self.mode.clone(),
        };
        let over = self
            .allocator
            .as_deref()
            .map(|a| format!(" over {a}"))
            .unwrap_or_default();
        writeln!(
            f,
            "  mode {mode}{over}, whole run: {} allocations and {} reallocs, {} requested, {temporaries}, {stacks}",
            self.allocs,
            self.reallocs,
            alloc_tracer_format::units::bytes(self.bytes_requested as f64),
        )?;
        if let Some(w) = &self.setup_warning {
            writeln!(f, "  {w}")?;
        }
        // A run that recorded stacks for one part and only counted another.
        if self.stacks_mode.is_some() && self.allocs_without_stacks > 0 {
            writeln!(
                f,
                "  {} allocations and reallocs ({:.1} %) were counted in count mode, with no stack: in no site",
                self.allocs_without_stacks,
                pct(self.allocs_without_stacks, calls)
            )?;
        }
        if self.top.is_empty() {
            return Ok(());
        }
        // A site's count is of allocations and reallocs (a realloc that moves a block
        // is an allocation too), and the header says so.
        if self.sample_interval > 1 {
            // Estimates, against exact totals: `analyzer top` divides by the sites'
            // estimates summed instead, so its shares differ a little.
            let weight = if self.weights_changed {
                format!(
                    "for the interval it was drawn at, lately {}",
                    self.sample_interval
                )
            } else {
                format!("{} times", self.sample_interval)
            };
            writeln!(
                f,
                "  top sites by allocations and reallocs (estimates: each sampled \
                 allocation counts {weight}; shares of the exact totals above):"
            )?;
        } else {
            writeln!(f, "  top sites by allocations and reallocs:")?;
        }
        writeln!(
            f,
            "  {:>13} {:>6} {:>6} {:>9}  site",
            "alloc+realloc", "share", "temps", "B/call"
        )?;
        for s in &self.top {
            writeln!(
                f,
                "  {:>13} {:>5.1}% {:>5.0}% {:>9.0}  {}",
                s.allocs,
                pct(s.allocs, calls),
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

    /// A site's name and callers, as the summary shows it.
    fn site_name(frames: &[Frame]) -> String {
        site::name_with_callers(frames, site::CALLERS)
    }

    fn frame(function: &str) -> Frame {
        Frame {
            function: function.into(),
            file: None,
            line: None,
            inlined: false,
        }
    }

    #[test]
    fn shares_are_of_allocations_and_reallocs() {
        // One site made every allocation and realloc: all of them, not 125 %.
        let summary = ReportSummary {
            dir: "r".into(),
            mode: "sites".into(),
            sample_interval: 1,
            weights_changed: false,
            stacks_mode: Some("sites".into()),
            allocs_without_stacks: 0,
            allocator: None,
            stacks: 1,
            site_rows: 1,
            allocs: 80,
            reallocs: 20,
            bytes_requested: 800,
            temporaries: 50,
            top: vec![TopSite {
                site_id: 0,
                name: "f".into(),
                allocs: 100,
                bytes_requested: 800,
                temporaries: 50,
            }],
            setup_warning: None,
        };
        let text = summary.to_string();
        assert!(text.contains("50 % temporaries"), "{text}");
        assert!(text.contains("100.0%"), "{text}");
        // The header counts what the shares are of.
        assert!(text.contains(": 80 allocations and 20 reallocs,"), "{text}");

        // Sampled, then switched to `count` before the report: its sites are still
        // estimates, and it has stacks.
        let switched = ReportSummary {
            mode: "count".into(),
            stacks_mode: Some("sample:1000".into()),
            sample_interval: 1000,
            ..summary.clone()
        };
        let text = switched.to_string();
        assert!(text.contains("1 call stacks"), "{text}");
        assert!(text.contains("50 % temporaries,"), "{text}");
        assert!(
            text.contains("mode count (stacks recorded in sample:1000),"),
            "{text}"
        );
        assert!(text.contains("allocation counts 1000 times;"), "{text}");
        let mixed = ReportSummary {
            weights_changed: true,
            ..switched
        };
        let text = mixed.to_string();
        assert!(
            text.contains("counts for the interval it was drawn at, lately 1000;"),
            "{text}"
        );
    }

    #[test]
    fn allocations_counted_without_stacks_are_said() {
        // `sites` for 60 of the 100 calls, then `count`: its temporaries are of the
        // 60, and the 40 are in no site.
        let summary = ReportSummary {
            dir: "r".into(),
            mode: "count".into(),
            sample_interval: 1,
            weights_changed: false,
            stacks_mode: Some("sites".into()),
            allocs_without_stacks: 40,
            allocator: None,
            stacks: 1,
            site_rows: 1,
            allocs: 100,
            reallocs: 0,
            bytes_requested: 800,
            temporaries: 30,
            top: vec![],
            setup_warning: None,
        };
        let text = summary.to_string();
        assert!(
            text.contains("mode count (stacks recorded in sites),"),
            "{text}"
        );
        assert!(
            text.contains("50 % temporaries of those with stacks"),
            "{text}"
        );
        assert!(
            text.contains("40 allocations and reallocs (40.0 %) were counted in count mode"),
            "{text}"
        );
        // A `count` run: all of them, and nothing to say beyond its mode.
        let count = ReportSummary {
            stacks_mode: None,
            allocs_without_stacks: 100,
            stacks: 0,
            ..summary
        };
        let text = count.to_string();
        assert!(text.contains("temporaries not counted"), "{text}");
        assert!(
            text.contains("no call stacks (count mode records none)"),
            "{text}"
        );
        assert!(!text.contains("with no stack"), "{text}");
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
            site_name(&frames),
            "bellpepper_core::lc::LinearCombination::add_unsimplified"
        );
        assert_eq!(
            site_name(&frames[..2]),
            "alloc::raw_vec::RawVecInner::with_capacity_in"
        );
        assert_eq!(site_name(&[]), site::NO_FRAMES);
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

    #[test]
    fn sites_that_read_the_same_are_told_apart() {
        let at = |function: &str, file: &str, line| Frame {
            file: Some(file.into()),
            line: Some(line),
            ..frame(function)
        };
        let stack = |outer_line| {
            vec![
                at(
                    "insert_or_update<S>",
                    "/r/bellpepper-core-0.2.1/src/lc.rs",
                    108,
                ),
                at(
                    "lc<S>",
                    "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
                    450,
                ),
                at(
                    "addmany<S>",
                    "/r/bellperson-0.27.0/src/gadgets/uint32.rs",
                    350,
                ),
                at(
                    "sha256<S>",
                    "/r/bellperson-0.27.0/src/gadgets/sha256.rs",
                    outer_line,
                ),
            ]
        };
        let all = [stack(57), stack(61), vec![at("main", "/r/m.rs", 1)]];
        let names = site_names(&all, 3);
        assert_eq!(
            names,
            [
                "insert_or_update (lc.rs:108) < lc (boolean.rs:450) < addmany (uint32.rs:350) [via sha256 (sha256.rs:57)]",
                "insert_or_update (lc.rs:108) < lc (boolean.rs:450) < addmany (uint32.rs:350) [via sha256 (sha256.rs:61)]",
                "main (m.rs:1)",
            ]
        );
        // The first shown alone still reads as among every site.
        assert_eq!(site_names(&all, 1), names[..1]);
    }
}
