//! Naming a site by its frames: the rules of `alloc_tracer_format::site` (shared with
//! the tracer's summary) over the report's frame rows.

use crate::report::FrameRow;
use alloc_tracer_format::{jobs, site};
use std::borrow::Cow;

pub use alloc_tracer_format::frames::without_generics;
pub use alloc_tracer_format::site::{CALLERS, crate_path, with_distinction};

impl site::Frame for FrameRow {
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

/// The position of the frame that names a site, if it has frames.
pub fn naming_index(frames: &[FrameRow]) -> Option<usize> {
    site::naming_index(frames)
}

/// The frame that names a site, if it has frames.
pub fn naming_frame(frames: &[FrameRow]) -> Option<&FrameRow> {
    site::naming_frame(frames)
}

/// `function (file:line)` of the naming frame (`(no frames)` without frames).
pub fn site_name(frames: &[FrameRow]) -> String {
    site::name(frames)
}

/// Where the naming frame was reached from: up to `n` of the next frames outside the
/// allocator, std, the naming frame's own file (unless no other file has one) and
/// the C runtime, innermost first, joined by ` < `.
pub fn callers(frames: &[FrameRow], n: usize) -> String {
    site::callers(frames, n)
}

/// What tells apart the sites of `stacks`, shown together, whose name and callers
/// read the same (see `site::distinctions`); empty for the others.
pub fn distinctions(stacks: &[&[FrameRow]]) -> Vec<String> {
    site::distinctions(stacks, CALLERS)
}

/// [`distinctions`] of the stacks at positions `shown` of `all`, worked out among
/// every stack of `all` (a report's sites, in site order), not only those shown (see
/// `site::distinctions_among`).
pub fn distinctions_among(all: &[&[FrameRow]], shown: &[usize]) -> Vec<String> {
    site::distinctions_among(all, shown, CALLERS)
}

/// The frames two reports' sites are matched by: a thread pool job's, without the
/// frames the pool's work stealing varies from run to run (see `jobs::job_frames`);
/// the whole stack when it has no pool frames.
pub fn job_frames(frames: &[FrameRow]) -> Cow<'_, [FrameRow]> {
    jobs::job_frames(frames)
}

/// What identifies a site across reports and builds (see `site::stack_key`).
pub fn stack_key(frames: &[FrameRow]) -> String {
    site::stack_key(frames)
}

/// [`stack_key`] without lines, for stacks a patch moved (see `site::loose_key`).
pub fn loose_key(frames: &[FrameRow]) -> String {
    site::loose_key(frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str) -> FrameRow {
        FrameRow::test(function, file, Some(7))
    }

    #[test]
    fn names_skip_plumbing_and_generics() {
        let frames = [
            frame("push<u8>", "/rustc/x/library/alloc/src/vec/mod.rs"),
            frame(
                "insert_or_update<Scalar>",
                "/r/bellpepper-core-0.2.1/src/lc.rs",
            ),
        ];
        assert_eq!(site_name(&frames), "insert_or_update (lc.rs:7)");
        assert_eq!(site_name(&[]), "(no frames)");
        assert_eq!(callers(&frames, 2), "");
    }

    #[test]
    fn a_site_reads_the_same_whatever_else_is_shown() {
        // Three sites of one name and callers, told apart two frames out; shown
        // alone, or with one other, each still reads as among all three.
        let stack = |outer: &str| {
            vec![
                frame("insert_or_update<S>", "/r/bellpepper-core-0.2.1/src/lc.rs"),
                frame("lc<S>", "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs"),
                frame(
                    "addmany<S>",
                    "/r/bellpepper-core-0.2.1/src/gadgets/uint32.rs",
                ),
                frame("compute<S>", "/r/sha256.rs"),
                frame(outer, "/r/label.rs"),
            ]
        };
        let (a, b, c) = (stack("first"), stack("first"), stack("second"));
        let mut b = b;
        b[3] = frame("other<S>", "/r/sha256.rs");
        let all: Vec<&[FrameRow]> = vec![&a, &b, &c];
        let whole = distinctions(&all);
        for shown in [vec![0], vec![2], vec![0, 2], vec![1, 2], vec![0, 1, 2]] {
            let got = distinctions_among(&all, &shown);
            let want: Vec<String> = shown.iter().map(|&i| whole[i].clone()).collect();
            assert_eq!(got, want, "{shown:?}");
        }
        assert!(!whole[0].is_empty() && whole[0] != whole[2], "{whole:?}");
    }

    #[test]
    fn callers_skip_the_naming_frames_own_file() {
        let frames = [
            frame("push<u8>", "/rustc/x/library/alloc/src/vec/mod.rs"),
            frame("insert_or_update<S>", "/r/bellpepper-core-0.2.1/src/lc.rs"),
            frame("add<S>", "/r/bellpepper-core-0.2.1/src/lc.rs"),
            frame("lc<S>", "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs"),
            frame(
                "{closure#3}<S>",
                "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
            ),
            frame("enforce<S>", "/r/mirror.rs"),
        ];
        assert_eq!(
            callers(&frames, 2),
            "lc (boolean.rs:7) < {closure#3} (boolean.rs:7)"
        );
        assert_eq!(callers(&frames, 9).matches(" < ").count(), 2);
    }
}
