//! Naming a site by its frames: the first frame outside the allocator and the
//! standard library, without generic arguments.

use crate::report::FrameRow;

use alloc_tracer_format::frames::file_name;
pub use alloc_tracer_format::frames::without_generics;

/// True for frames of the allocator, liballoc, core and std.
pub fn is_plumbing(f: &FrameRow) -> bool {
    alloc_tracer_format::frames::is_plumbing(&f.function, f.file.as_deref())
}

/// The frame that names a site, if it has frames.
pub fn naming_frame(frames: &[FrameRow]) -> Option<&FrameRow> {
    frames.iter().find(|f| !is_plumbing(f)).or(frames.last())
}

/// `function (file:line)` of the naming frame.
pub fn site_name(frames: &[FrameRow]) -> String {
    match naming_frame(frames) {
        None => "(no frames)".to_owned(),
        Some(f) => {
            let name = without_generics(&f.function);
            match (&f.file, f.line) {
                (Some(file), Some(line)) => {
                    format!("{name} ({}:{line})", file_name(file))
                }
                _ => name,
            }
        }
    }
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
    }
}
