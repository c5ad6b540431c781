//! Naming a site by its frames: the first frame outside the allocator and the
//! standard library, without generic arguments.

use crate::report::FrameRow;

pub use alloc_tracer_format::frames::without_generics;

/// True for frames of the allocator, liballoc, core and std.
pub fn is_plumbing(f: &FrameRow) -> bool {
    alloc_tracer_format::frames::is_plumbing(&f.function, f.file.as_deref())
}

/// The frame that names a site, if it has frames.
pub fn naming_frame(frames: &[FrameRow]) -> Option<&FrameRow> {
    frames.iter().find(|f| !is_plumbing(f)).or(frames.last())
}

/// `function (file:line)` of one frame.
fn describe(f: &FrameRow) -> String {
    alloc_tracer_format::frames::describe(&f.function, f.file.as_deref(), f.line)
}

/// `function (file:line)` of the naming frame.
pub fn site_name(frames: &[FrameRow]) -> String {
    naming_frame(frames).map_or_else(|| "(no frames)".to_owned(), describe)
}

/// Where the naming frame was reached from: up to `n` of the next frames that
/// `alloc_tracer_format::frames::is_caller` accepts (outside the allocator, std, the
/// naming frame's own file and the C runtime), innermost first, joined by ` < `.
pub fn callers(frames: &[FrameRow], n: usize) -> String {
    let Some(pos) = frames.iter().position(|f| !is_plumbing(f)) else {
        return String::new();
    };
    let own = frames[pos].file.as_deref();
    frames[pos + 1..]
        .iter()
        .filter(|f| alloc_tracer_format::frames::is_caller(&f.function, f.file.as_deref(), own))
        .take(n)
        .map(describe)
        .collect::<Vec<_>>()
        .join(" < ")
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
