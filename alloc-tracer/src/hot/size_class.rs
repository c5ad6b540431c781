//! jemalloc's size classes, computed without calling into jemalloc.
//!
//! jemalloc 5.3 on x86_64 Linux (`LG_QUANTUM = 4`, `LG_PAGE = 12`, four classes per
//! doubling) serves a request from the smallest class that fits: 8, then multiples of
//! 16 up to 128, then four classes per power of two (160, 192, 224, 256, 320, ...), small
//! and large alike. tikv-jemallocator passes an alignment flag when `align > 16` or
//! `align > size`; jemalloc then serves the class of `size` rounded up to `align`
//! (small blocks, `align <= 4096`) or a large class of at least 16 KiB.
//!
//! `tests/size_classes.rs` checks this arithmetic against `nallocx` for every size up
//! to 64 KiB and every alignment up to 4096, so a future jemalloc with other classes
//! fails loudly instead of skewing reports.

/// Number of class slots kept per phase: classes up to 2^44 bytes; larger requests
/// share the last slot.
pub const NUM_CLASSES: usize = 9 + 4 * (44 - 7);

const PAGE: usize = 4096;
/// Index of the largest small class (14336 bytes).
pub const LAST_SMALL: usize = 9 + 4 * (13 - 7) + 2;
/// Largest small class: the most a small block adds to a thread's live bytes.
pub const SMALL_MAX: usize = 14336;
const LARGE_MIN: usize = 16384;

/// Index of the class `size` falls in when requested with the natural alignment.
#[inline(always)]
const fn index_of_size(size: usize) -> usize {
    if size <= 8 {
        0
    } else if size <= 128 {
        size.div_ceil(16)
    } else {
        let x = size - 1;
        let lg = (usize::BITS - 1 - x.leading_zeros()) as usize;
        let shift = lg - 2;
        let idx = 9 + (lg - 7) * 4 + ((x >> shift) & 3);
        if idx < NUM_CLASSES {
            idx
        } else {
            NUM_CLASSES - 1
        }
    }
}

const fn compute_class_bytes(idx: usize) -> usize {
    match idx {
        0 => 8,
        1..=8 => idx * 16,
        _ => {
            let group = (idx - 9) / 4;
            let step = (idx - 9) % 4;
            let lg = group + 7;
            (1usize << lg) + ((step + 1) << (lg - 2))
        }
    }
}

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
        t[i] = compute_class_bytes(i);
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
    /// [`LIVE_UNIT`](crate::hot::LIVE_UNIT) bytes.
    pub units: u8,
}

impl Request {
    /// Real bytes of the block (the class size).
    #[inline(always)]
    pub fn usable(self) -> usize {
        self.units as usize * crate::hot::LIVE_UNIT
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
        let usable = compute_class_bytes(class);
        let units = usable / crate::hot::LIVE_UNIT;
        assert!(class <= u8::MAX as usize && bucket <= u8::MAX as usize);
        assert!(units * crate::hot::LIVE_UNIT == usable && units <= u8::MAX as usize);
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
    index_of_aligned(size, align)
}

#[cold]
fn index_of_aligned(size: usize, align: usize) -> usize {
    if size <= SMALL_MAX && align <= PAGE {
        let rounded = size.next_multiple_of(align);
        if rounded < LARGE_MIN {
            return index_of_size(rounded);
        }
    }
    index_of_size(size.max(LARGE_MIN))
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
    fn known_classes() {
        let cases = [
            (1, 8),
            (8, 8),
            (9, 16),
            (16, 16),
            (17, 32),
            (128, 128),
            (129, 160),
            (160, 160),
            (161, 192),
            (256, 256),
            (257, 320),
            (14336, 14336),
            (14337, 16384),
            (16385, 20480),
        ];
        for (size, class) in cases {
            assert_eq!(class_bytes(index_of(size, 1)), class, "size {size}");
        }
    }

    #[test]
    fn indices_are_contiguous_and_increasing() {
        for idx in 1..NUM_CLASSES {
            assert!(class_bytes(idx) > class_bytes(idx - 1));
            assert_eq!(index_of(class_bytes(idx), 1), idx);
            assert_eq!(index_of(class_bytes(idx - 1) + 1, 1), idx);
        }
    }

    #[test]
    fn large_blocks_are_whole_pages() {
        assert_eq!(class_bytes(LAST_SMALL), 14336);
        assert_eq!(usable(index_of(14336, 8), 14336), 14336);
        assert_eq!(usable(index_of(32769, 8), 32769), 36864);
        assert_eq!(usable(index_of(8, 8192), 8), 16384);
    }

    #[test]
    fn alignment_rounds_up() {
        assert_eq!(class_bytes(index_of(8, 16)), 16);
        assert_eq!(class_bytes(index_of(100, 64)), 128);
        assert_eq!(class_bytes(index_of(8, 4096)), 4096);
        assert_eq!(class_bytes(index_of(8192, 8192)), 16384);
    }
}
