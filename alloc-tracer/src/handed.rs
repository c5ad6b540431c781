//! Values the tracer's API makes under its guard and hands to the program.
//!
//! A block made under the guard is not counted; freed by the program, outside it,
//! its free is: a free of bytes never counted, so more frees than allocations and
//! live bytes below zero, in every report written after. So what the API returns
//! is copied outside the guard (its blocks the program's, counted when made and
//! when the program frees them, as any library call's), and the tracer's own copy
//! is freed under the guard.

/// `made`, built under the guard, handed to the program as a copy of its own.
pub(crate) fn handed_out<T: Clone>(made: T) -> T {
    let copy = made.clone();
    crate::hot::thread::guarded(move || drop(made));
    copy
}
