//! One copy of each call stack, shared by every thread's site table.
//!
//! A site table's slot names its stack by a pointer to a record here rather than by
//! frames of its own. The same stacks recur in every thread of a pool (each runs the
//! same code) and under several phases and size classes, and frames kept in the
//! slot took `MAX_DEPTH` words whatever the stack's depth, in every slot of the
//! table, published or not: sixteen rayon threads recording about ten thousand sites
//! each held several hundred megabytes of frames.
//!
//! Records are interned only when a thread publishes a site new to its table (cold,
//! under the re-entrancy guard), and read only when a table grows or a report reads
//! a table. They are pushed onto their bucket's list with a compare-and-swap and
//! never freed, so the recording path still takes no lock (a `fork` can catch no
//! one holding it) and a pointer to a record stays valid for the process's life.
//! At most [`MAX_STACKS`] are kept; a stack met after that gets the folded record,
//! one frame, [`FOLDED_FRAME`], and its sites are counted as the folded site of
//! their phase and size class, as the merged sites past their cap are.

use std::alloc::{Layout, alloc, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::null_mut;
use std::sync::atomic::{
    AtomicPtr, AtomicU64, AtomicUsize,
    Ordering::{AcqRel, Acquire, Relaxed},
};

/// Lists the records hang from: on average a list holds one record for every
/// 16,384 distinct stacks, and is walked only when a thread meets a stack new to
/// its table.
const BUCKETS: usize = 1 << 14;

/// Most distinct stacks kept (the cap of the merged sites too).
pub const MAX_STACKS: usize = 1 << 20;

/// The return address of a folded site's one frame: no code lives there, and the
/// symbolizer names it as folded.
pub const FOLDED_FRAME: usize = usize::MAX;

/// The record every stack past [`MAX_STACKS`] gets.
static FOLDED: Folded = Folded(Stack {
    next: std::ptr::null(),
    hash: 0,
    frames: FOLDED_FRAMES.as_ptr(),
    len: 1,
});

/// [`FOLDED`]'s one frame.
static FOLDED_FRAMES: [usize; 1] = [FOLDED_FRAME];

/// A record that is never written, shareable between threads.
struct Folded(Stack);

// SAFETY: `next` is null and `frames` points to a static; nothing is ever written.
unsafe impl Sync for Folded {}

/// The bucket array, made at the first interning (null until then).
static TABLE: AtomicPtr<AtomicPtr<Stack>> = AtomicPtr::new(null_mut());
/// Bytes of the records interned so far.
static RECORD_BYTES: AtomicU64 = AtomicU64::new(0);
/// Records interned so far, and places taken for records being made (given back
/// when another thread interns the stack first): near the cap, a place held a
/// moment may fold a stack that would have fit.
static RECORDS: AtomicUsize = AtomicUsize::new(0);
/// Sites given the folded record because [`MAX_STACKS`] were kept (see
/// [`folded_count`]).
static FOLDED_COUNT: AtomicU64 = AtomicU64::new(0);

/// An interned stack: its header, followed in the same allocation by its frames.
#[repr(C)]
pub struct Stack {
    /// The next record of the bucket, published before this one.
    next: *const Stack,
    hash: u64,
    /// The frames after the header, by a pointer made from the whole allocation's
    /// (a reference to the header covers the header only).
    frames: *const usize,
    len: usize,
}

impl Stack {
    /// The return addresses, innermost first.
    pub fn frames(&self) -> &[usize] {
        // SAFETY: `frames` points to `len` words (after the header in `new_record`'s
        // allocation, or the folded record's static), written before the record was
        // published and never written or freed afterwards.
        unsafe { std::slice::from_raw_parts(self.frames, self.len) }
    }
}

/// The record of `frames`, interned now if no thread has before, or the folded
/// record (see [`folded`]) when [`MAX_STACKS`] are kept already. Allocates the first
/// time a stack is met, so only under the re-entrancy guard. Aborts, as a `Box`
/// does, if the allocator has no memory left.
pub fn intern(frames: &[usize]) -> &'static Stack {
    intern_capped(frames, MAX_STACKS, &RECORDS)
}

/// The record that stands for every stack past the cap: one frame, [`FOLDED_FRAME`].
pub fn folded() -> &'static Stack {
    &FOLDED.0
}

/// Sites given the folded record so far: once per site (stack, phase, size class)
/// a thread's table published after the cap, again if the table was emptied when
/// full and met it anew.
pub fn folded_count() -> u64 {
    FOLDED_COUNT.load(Relaxed)
}

/// [`intern`], keeping at most `cap` records counted in `records`.
fn intern_capped(frames: &[usize], cap: usize, records: &AtomicUsize) -> &'static Stack {
    // The site tables' hash, unseeded: it spreads every bit into the low ones.
    let hash = super::site_table::hash(0, frames);
    let bucket = &buckets()[hash as usize & (BUCKETS - 1)];
    let mut head = bucket.load(Acquire);
    // Records at and past `seen` were searched in an earlier round.
    let mut seen: *const Stack = std::ptr::null();
    let mut made: *mut Stack = null_mut();
    loop {
        if let Some(found) = find(head, seen, hash, frames) {
            if !made.is_null() {
                records.fetch_sub(1, Relaxed);
                // SAFETY: `made` is ours, never published.
                unsafe { dealloc(made.cast(), layout(frames.len())) };
            }
            return found;
        }
        if made.is_null() {
            // A place among the `cap`, taken before the record is made (given back
            // if another thread interns the stack first), so that racing threads
            // never keep more.
            if records.fetch_add(1, Relaxed) >= cap {
                records.fetch_sub(1, Relaxed);
                FOLDED_COUNT.fetch_add(1, Relaxed);
                return folded();
            }
            made = new_record(hash, frames);
        }
        // SAFETY: `made` is ours until the exchange below publishes it (its release
        // half makes the record's words visible with the pointer).
        unsafe { (*made).next = head };
        match bucket.compare_exchange(head, made, AcqRel, Acquire) {
            Ok(_) => {
                RECORD_BYTES.fetch_add(layout(frames.len()).size() as u64, Relaxed);
                // SAFETY: published records are never freed or written.
                return unsafe { &*made };
            }
            Err(now) => {
                seen = head;
                head = now;
            }
        }
    }
}

/// Bytes of the records and the bucket array.
pub fn memory_bytes() -> u64 {
    let table = if TABLE.load(Relaxed).is_null() {
        0
    } else {
        BUCKETS * size_of::<AtomicPtr<Stack>>()
    };
    RECORD_BYTES.load(Relaxed) + table as u64
}

/// The record of `frames` among those from `head` up to (not including) `stop`.
fn find(
    mut head: *const Stack,
    stop: *const Stack,
    hash: u64,
    frames: &[usize],
) -> Option<&'static Stack> {
    while head != stop && !head.is_null() {
        // SAFETY: a bucket's records are published whole and never freed.
        let s = unsafe { &*head };
        if s.hash == hash && s.frames() == frames {
            return Some(s);
        }
        head = s.next;
    }
    None
}

fn new_record(hash: u64, frames: &[usize]) -> *mut Stack {
    let layout = layout(frames.len());
    // SAFETY: the layout is never zero-sized (it has a header).
    let p = unsafe { alloc(layout) }.cast::<Stack>();
    if p.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `p` holds the header and `frames.len()` words after it.
    unsafe {
        let words = p.add(1).cast::<usize>();
        p.write(Stack {
            next: std::ptr::null(),
            hash,
            frames: words,
            len: frames.len(),
        });
        std::ptr::copy_nonoverlapping(frames.as_ptr(), words, frames.len());
    }
    p
}

fn layout(len: usize) -> Layout {
    let words = size_of::<Stack>() / size_of::<usize>() + len;
    // A few hundred bytes at most (`len` is at most `MAX_DEPTH`): never overflows.
    Layout::array::<usize>(words).unwrap_or(Layout::new::<Stack>())
}

fn buckets() -> &'static [AtomicPtr<Stack>] {
    let mut table = TABLE.load(Acquire);
    if table.is_null() {
        let layout = Layout::array::<AtomicPtr<Stack>>(BUCKETS).unwrap_or(Layout::new::<u8>());
        // SAFETY: not zero-sized; all-zero bytes are null pointers, empty buckets.
        let made = unsafe { alloc_zeroed(layout) }.cast::<AtomicPtr<Stack>>();
        if made.is_null() {
            handle_alloc_error(layout);
        }
        table = match TABLE.compare_exchange(null_mut(), made, AcqRel, Acquire) {
            Ok(_) => made,
            Err(first) => {
                // SAFETY: ours, never published.
                unsafe { dealloc(made.cast(), layout) };
                first
            }
        };
    }
    // SAFETY: the array is made once, published whole and never freed.
    unsafe { std::slice::from_raw_parts(table, BUCKETS) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_record_per_stack() {
        let a = intern(&[0x1000, 0x2000, 0x3000]);
        let b = intern(&[0x1000, 0x2000, 0x3000]);
        let c = intern(&[0x1000, 0x2000]);
        let d = intern(&[]);
        assert!(std::ptr::eq(a, b));
        assert!(!std::ptr::eq(a, c));
        assert_eq!(a.frames(), [0x1000, 0x2000, 0x3000]);
        assert_eq!(c.frames(), [0x1000, 0x2000]);
        assert!(d.frames().is_empty());
        assert!(std::ptr::eq(d, intern(&[])));
    }

    #[test]
    fn past_the_cap_new_stacks_fold_and_known_ones_do_not() {
        let known = intern(&[0x5000, 0x6000]);
        let before = folded_count();
        assert!(std::ptr::eq(
            intern_capped(&[0x5000, 0x6000], 0, &RECORDS),
            known
        ));
        let new = intern_capped(&[0x5000, 0x7000], 0, &RECORDS);
        assert!(std::ptr::eq(new, folded()));
        assert_eq!(new.frames(), [FOLDED_FRAME]);
        assert!(folded_count() > before);
        // Not kept: the next interning with room makes its record.
        assert_ne!(intern(&[0x5000, 0x7000]).frames(), [FOLDED_FRAME]);
    }

    #[test]
    fn threads_racing_at_the_cap_keep_exactly_the_cap() {
        // 4 threads each intern 200 stacks of their own, new to the process, against
        // a cap of 100 counted apart from the process's: exactly 100 are kept.
        let records = AtomicUsize::new(0);
        let base = 0x7e57_0000_0000usize;
        let kept: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let records = &records;
                    s.spawn(move || {
                        (0..200)
                            .filter(|i| {
                                let frames = [base + t * 1000 + i, 0x1];
                                !std::ptr::eq(intern_capped(&frames, 100, records), folded())
                            })
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(kept, 100);
        assert_eq!(records.load(Relaxed), 100);
    }

    #[test]
    fn threads_racing_share_one_record_per_stack() {
        // More stacks than buckets, so that lists hold several records and the
        // threads' exchanges on one bucket race.
        let stacks: Vec<Vec<usize>> = (0..3 * BUCKETS)
            .map(|i| vec![0xdead_0000 + i, 0xbeef_0000, i % 7])
            .collect();
        let seen: Vec<Vec<usize>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let stacks = &stacks;
                    s.spawn(move || {
                        // Each thread in its own order.
                        let order: Vec<usize> = if t % 2 == 0 {
                            (0..stacks.len()).collect()
                        } else {
                            (0..stacks.len()).rev().collect()
                        };
                        let mut got = vec![0usize; stacks.len()];
                        for i in order {
                            got[i] = intern(&stacks[i]) as *const Stack as usize;
                        }
                        got
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for got in &seen[1..] {
            assert_eq!(got, &seen[0]);
        }
        for (i, &p) in seen[0].iter().enumerate() {
            // SAFETY: interned records live for the process.
            assert_eq!(unsafe { &*(p as *const Stack) }.frames(), stacks[i]);
        }
        let distinct: std::collections::HashSet<usize> = seen[0].iter().copied().collect();
        assert_eq!(distinct.len(), stacks.len());
    }
}
