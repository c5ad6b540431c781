//! The part of a stack that matches across runs of a thread pool's program.
//!
//! A rayon pool runs each job under whatever frames its work stealing happened to
//! build: `join` inside `join` to some depth, on the calling thread or on a worker
//! that stole it. The same line of the program then shows up under dozens of
//! stacks, and which of them, and how often, changes from run to run: two runs of
//! the same build matched by whole stacks read as sites gone and new. Matching
//! (`analyzer diff`, `peak --base`) reads the **job frames** instead: the stack
//! without the pool's frames that lie inward of the program's first frame, and cut
//! at the first of the pool's frames outward of it. What is left says what the job
//! did and from which closure; what is cut says only how the pool got there (the
//! caller of the `par_iter`, which the closure's own frame names already).
//!
//! What is cut is also what a job stolen by another thread does not have on its
//! stack: where the job was submitted from. So a function running its own
//! `par_iter`, called from two places, has jobs of one key; and the pool's own
//! allocations on a worker (a collect's vectors, its queues) keep no frame of the
//! program at all.
//!
//! A stack with no pool frames is its own job frames; a synthesis that runs inside
//! one pool job keeps every site apart as before (the frames cut are the same for
//! all of its sites).

use crate::frames::{in_crate, is_plumbing};
use crate::site::Frame;
use std::borrow::Cow;

/// The job frames of `frames` (innermost first): see the module docs.
pub fn job_frames<F: Frame + Clone>(frames: &[F]) -> Cow<'_, [F]> {
    let in_pool = |f: &F| f.file().is_some_and(in_pool_crate);
    let Some(first_pool) = frames.iter().position(in_pool) else {
        return Cow::Borrowed(frames);
    };
    let mut out = Vec::with_capacity(frames.len());
    let mut program = false;
    for f in frames {
        if in_pool(f) {
            if program {
                break;
            }
            continue;
        }
        program |= !is_plumbing(f.function(), f.file());
        out.push(f.clone());
    }
    // The pool's frames all lie outward of the program's: the stack is cut there.
    if out.len() == first_pool {
        return Cow::Borrowed(&frames[..first_pool]);
    }
    Cow::Owned(out)
}

/// True for a source file of a thread pool's crate (rayon, rayon-core), whose frames
/// between a worker's start, or a caller's `par_iter`, and the job it runs depend on
/// which thread stole what: from the registry, vendored, a path dependency or a git
/// checkout, as `frames::crate_path` reads them.
pub fn in_pool_crate(file: &str) -> bool {
    in_crate(file, &["rayon", "rayon-core"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct F(&'static str, &'static str);

    impl Frame for F {
        fn function(&self) -> &str {
            self.0
        }
        fn file(&self) -> Option<&str> {
            Some(self.1)
        }
        fn line(&self) -> Option<u32> {
            Some(1)
        }
    }

    const ALLOC: F = F("alloc", "/rustc/abc/library/alloc/src/alloc.rs");
    const JOIN: F = F(
        "{closure#0}",
        "/r/registry/src/index/rayon-core-1.12.1/src/join/mod.rs",
    );
    const BRIDGE: F = F(
        "helper",
        "/r/registry/src/index/rayon-1.10.0/src/iter/plumbing/mod.rs",
    );
    const WORKER: F = F("main_loop", "/work/vendor/rayon-core/src/registry.rs");
    const START: F = F("start_thread", "./nptl/pthread_create.c");
    const PARSE_LINE: F = F("parse_line", "/home/me/app/src/main.rs");
    const CLOSURE: F = F("{closure#0}", "/home/me/app/src/main.rs");
    const PARSE: F = F("parse", "/home/me/app/src/main.rs");
    const MAIN: F = F("main", "/home/me/app/src/main.rs");

    #[test]
    fn a_job_reads_the_same_whichever_thread_ran_it_and_how_deep() {
        let stolen = [
            ALLOC, PARSE_LINE, CLOSURE, BRIDGE, JOIN, JOIN, WORKER, START,
        ];
        let inline = [
            ALLOC, PARSE_LINE, CLOSURE, BRIDGE, JOIN, BRIDGE, PARSE, MAIN,
        ];
        let want = [ALLOC, PARSE_LINE, CLOSURE];
        assert_eq!(*job_frames(&stolen), want);
        assert_eq!(*job_frames(&inline), want);
        assert!(matches!(job_frames(&stolen), Cow::Borrowed(_)));
    }

    #[test]
    fn the_pools_own_allocations_keep_the_program_frames_outward() {
        // A collect's vector, allocated by the pool: no program frame inward.
        let inline = [
            ALLOC, BRIDGE, JOIN, JOIN, BRIDGE, PARSE, BRIDGE, WORKER, START,
        ];
        assert_eq!(*job_frames(&inline), [ALLOC, PARSE]);
        let stolen = [ALLOC, BRIDGE, JOIN, WORKER, START];
        assert_eq!(*job_frames(&stolen), [ALLOC, START]);
    }

    #[test]
    fn the_pool_is_found_wherever_its_crate_was_built_from() {
        for file in [
            "/r/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-1.10.0/src/iter/mod.rs",
            "/r/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-core-1.12.1/src/join/mod.rs",
            "/work/vendor/rayon-core/src/registry.rs",
            "/home/a/.cargo/git/checkouts/rayon-3a1f9c0d2e4b5a67/8d1c2f3/src/iter/mod.rs",
            "/home/a/.cargo/git/checkouts/rayon-3a1f9c0d2e4b5a67/8d1c2f3/rayon-core/src/job.rs",
        ] {
            assert!(in_pool_crate(file), "{file}");
        }
        for file in [
            "/r/registry/src/index/rayon-cond-0.3.0/src/lib.rs",
            "/r/registry/src/index/crossbeam-deque-0.8.5/src/deque.rs",
            "/home/me/app/src/main.rs",
            "./nptl/pthread_create.c",
        ] {
            assert!(!in_pool_crate(file), "{file}");
        }
    }

    #[test]
    fn a_stack_without_pool_frames_is_whole() {
        let plain = [ALLOC, PARSE_LINE, PARSE, MAIN];
        assert!(matches!(job_frames(&plain), Cow::Borrowed(s) if s.len() == 4));
        assert!(job_frames::<F>(&[]).is_empty());
    }
}
