//! jemalloc's size classes, as the hot path finds them: by table lookups built at
//! compile time from the reference arithmetic in `alloc_tracer_format::size_class`
//! (which says what the classes are and why), and tested against it here and
//! against `nallocx` in `tests/size_classes.rs`, so that a future jemalloc with other
//! classes fails loudly instead of skewing reports.

use alloc_tracer_format::size_class::{
    self as reference, LARGE_MIN, PAGE, index_of_aligned, index_of_size,
};
pub use alloc_tracer_format::size_class::{LAST_SMALL, NUM_CLASSES, SAMPLE_ALL_FROM_CLASS};

/// Requests up to this size take the table lookup.
const LOOKUP_MAX: usize = 4096;

/// Class index of every size up to [`LOOKUP_MAX`], in steps of 8 bytes (all classes in
/// that range are multiples of 8), as jemalloc itself does.
static LOOKUP: [u8; LOOKUP_MAX / 8 + 1] = {
    let mut t = [0u8; LOOKUP_MAX / 8 + 1];
    let mut i = 0;
    while i < t.len() {
        t[i] = index_of_size(i * 8) as u8;
        i += 1;
    }
    t
};

static CLASS_BYTES: [usize; NUM_CLASSES] = {
    let mut t = [0usize; NUM_CLASSES];
    let mut i = 0;
    while i < NUM_CLASSES {
        t[i] = reference::class_bytes(i);
        i += 1;
    }
    t
};

/// Requests up to this many bytes with an alignment of at most 8 (nearly all of
/// them) are classified by one lookup in [`SMALL_REQUESTS`].
pub const SMALL_REQUEST_MAX: usize = 1024;

/// What the hot path needs to know of a request: its class index, its
/// requested-size bucket (`log_linear::size_bucket`) and its real block size in
/// live-byte units. The indices are `u8` so that indexing arrays of 256 entries needs
/// no bounds check; the entry is 4 bytes so that a lookup is one scaled index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(4))]
pub struct Request {
    /// Size-class index.
    pub class: u8,
    /// Requested-size bucket.
    pub bucket: u8,
    /// Real bytes of the block (the class size) in units of
    /// [`LIVE_UNIT`](super::live::LIVE_UNIT) bytes.
    pub units: u8,
}

impl Request {
    /// Real bytes of the block (the class size).
    #[inline(always)]
    pub fn usable(self) -> usize {
        self.units as usize * super::live::LIVE_UNIT
    }
}

/// Class, bucket and real size of every request size up to [`SMALL_REQUEST_MAX`]
/// (alignment at most 8: then the class is that of the size alone).
pub static SMALL_REQUESTS: [Request; SMALL_REQUEST_MAX + 1] = {
    let mut t = [Request {
        class: 0,
        bucket: 0,
        units: 0,
    }; SMALL_REQUEST_MAX + 1];
    let mut size = 0;
    while size <= SMALL_REQUEST_MAX {
        let class = index_of_size(size);
        let bucket = super::log_linear::size_bucket(size);
        let usable = reference::class_bytes(class);
        let units = usable / super::live::LIVE_UNIT;
        assert!(class <= u8::MAX as usize && bucket <= u8::MAX as usize);
        assert!(units * super::live::LIVE_UNIT == usable && units <= u8::MAX as usize);
        t[size] = Request {
            class: class as u8,
            bucket: bucket as u8,
            units: units as u8,
        };
        size += 1;
    }
    t
};

/// Byte size of the class with index `idx` (the last index stands for "larger").
#[inline(always)]
pub fn class_bytes(idx: usize) -> usize {
    CLASS_BYTES[idx.min(NUM_CLASSES - 1)]
}

/// The real size of a block of class `idx` requested with `size` bytes: the class
/// size for small blocks, whole pages (at least 16 KiB) for large ones.
#[inline(always)]
pub fn usable(idx: usize, size: usize) -> usize {
    if idx <= LAST_SMALL {
        class_bytes(idx)
    } else {
        size.next_multiple_of(PAGE).max(LARGE_MIN)
    }
}

/// Index of the jemalloc class that serves a `size`/`align` request made through
/// tikv-jemallocator.
#[inline(always)]
pub fn index_of(size: usize, align: usize) -> usize {
    // With `align <= 16`, rounding up to the alignment (what jemalloc does when
    // tikv-jemallocator passes the flag, i.e. when `align > size`) gives the class of
    // `max(size, align)`.
    if align <= 16 && size <= LOOKUP_MAX {
        return LOOKUP[size.max(align).div_ceil(8)] as usize;
    }
    if align <= 16 && align <= size {
        return index_of_size(size);
    }
    // The aligned path (`sz_sa2u`); rare, kept out of line.
    aligned(size, align)
}

#[cold]
fn aligned(size: usize, align: usize) -> usize {
    index_of_aligned(size, align)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_agrees_with_arithmetic() {
        for size in 1..=LOOKUP_MAX {
            for align in [1, 2, 4, 8, 16] {
                let slow = if align <= size {
                    index_of_size(size)
                } else {
                    index_of_aligned(size, align)
                };
                assert_eq!(index_of(size, align), slow, "size {size} align {align}");
            }
        }
    }

    #[test]
    fn small_requests_agree_with_arithmetic() {
        for (size, &r) in SMALL_REQUESTS.iter().enumerate() {
            for align in [1, 2, 4, 8] {
                assert_eq!(
                    r.class as usize,
                    index_of(size, align),
                    "size {size} align {align}"
                );
            }
            assert_eq!(r.bucket as usize, crate::hot::log_linear::size_bucket(size));
            assert_eq!(r.usable(), usable(r.class as usize, size));
        }
    }

    #[test]
    fn tables_agree_with_the_reference() {
        for size in (0..=3 * LOOKUP_MAX).chain([1 << 20, (1 << 20) + 1, 1 << 40]) {
            for align in [1, 2, 4, 8, 16, 32, 64, 4096, 8192] {
                assert_eq!(
                    index_of(size, align),
                    reference::index_of(size, align),
                    "size {size} align {align}"
                );
            }
            let k = reference::index_of(size, 8);
            assert_eq!(usable(k, size), reference::usable(k, size), "size {size}");
        }
        for k in 0..NUM_CLASSES + 2 {
            assert_eq!(class_bytes(k), reference::class_bytes(k));
        }
    }
}
