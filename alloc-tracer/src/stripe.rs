//! Stripes: state of the cold side that each thread writes in a part of its own.
//!
//! Sums and buffers that every thread would otherwise write in one place (the
//! lifetimes of ended blocks, heap sampling's live estimates) are kept in
//! [`STRIPES`] parts, and a thread writes only its own: handed out round robin at
//! its first call, so that two threads share one only past [`STRIPES`] threads.
//! Readers combine every stripe. [`Padded`] keeps each part, and each shard of the
//! maps keyed by address, on cache lines of its own.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Stripes per striped structure.
pub(crate) const STRIPES: usize = 64;

/// A value on cache lines of its own, so that writes to its neighbours do not move
/// them from core to core.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub T);

/// The next stripe to hand to a thread that has none.
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's stripe (`usize::MAX` until its first call). A constant
    /// initializer and no destructor: reading it never allocates.
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The calling thread's stripe, below [`STRIPES`].
pub(crate) fn index() -> usize {
    STRIPE
        .try_with(|s| {
            if s.get() == usize::MAX {
                s.set(NEXT.fetch_add(1, Relaxed) % STRIPES);
            }
            s.get()
        })
        // A thread whose thread-locals are gone shares the first stripe.
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_get_stripes_of_their_own_and_keep_them() {
        let here = index();
        assert_eq!(index(), here, "kept");
        let others: Vec<usize> = (0..3)
            .map(|_| std::thread::spawn(index).join().unwrap())
            .collect();
        assert!(others.iter().all(|&k| k < STRIPES));
        // Handed out in turn (other tests' threads may take stripes meanwhile).
        assert!(others[0] != others[1] && others[1] != others[2]);
    }
}
