//! jemalloc's size classes: the grid every report bins block sizes on.
//!
//! jemalloc 5.3 on x86_64 Linux (`LG_QUANTUM = 4`, `LG_PAGE = 12`, four classes per
//! doubling) serves a request from the smallest class that fits: 8, then multiples of
//! 16 up to 128, then four classes per power of two (160, 192, 224, 256, 320, ...), small
//! and large alike. tikv-jemallocator passes an alignment flag when `align > 16` or
//! `align > size`; jemalloc then serves the class of `size` rounded up to `align`
//! (small blocks, `align <= 4096`) or a large class of at least 16 KiB. Large blocks
//! take whole pages.
//!
//! This is the reference arithmetic: the tracer's hot path builds its lookup tables
//! from these `const fn`s and is tested against them (and against `nallocx`), and
//! readers use them to name and price classes. With another inner allocator the
//! classes are still this grid: a binning, not that allocator's real block sizes.

/// Number of class indices: classes up to 2^44 bytes; larger requests share the last.
pub const NUM_CLASSES: usize = 9 + 4 * (44 - 7);
/// Bytes of a page.
pub const PAGE: usize = 4096;
/// Index of the largest small class (14336 bytes).
pub const LAST_SMALL: usize = 9 + 4 * (13 - 7) + 2;
/// Largest small class.
pub const SMALL_MAX: usize = 14336;
/// Smallest large block.
pub const LARGE_MIN: usize = 16384;

/// Index of the class `size` falls in when requested with the natural alignment.
#[inline(always)]
pub const fn index_of_size(size: usize) -> usize {
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

/// Bytes of the smallest class that `sample:N` mode records whole: every allocation
/// and realloc whose block falls in it or a larger one (requests over 224 KiB) is
/// recorded with its stack and counted once, not one in N counted N times. Few in
/// number, such blocks hold much of a program's bytes (a fifth of 2 KiB PoRep
/// synthesis' requested bytes, in 61 allocations and reallocs of its a/b/c and
/// assignment vectors), which one in N would miss in most runs and count N times
/// over in the rest; at a few microseconds a walk they cost next to nothing beside
/// filling that memory.
pub const SAMPLE_ALL_FROM_BYTES: usize = 256 * 1024;

/// The index of the class of [`SAMPLE_ALL_FROM_BYTES`].
pub const SAMPLE_ALL_FROM_CLASS: usize = index_of_size(SAMPLE_ALL_FROM_BYTES);

/// Byte size of the class with index `idx` (the last index stands for "larger").
pub const fn class_bytes(idx: usize) -> usize {
    let idx = if idx < NUM_CLASSES {
        idx
    } else {
        NUM_CLASSES - 1
    };
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

/// The real size of a block of class `idx` requested with `size` bytes: the class
/// size for small blocks, whole pages (at least 16 KiB) for large ones.
pub const fn usable(idx: usize, size: usize) -> usize {
    if idx <= LAST_SMALL {
        class_bytes(idx)
    } else {
        let pages = size.next_multiple_of(PAGE);
        if pages > LARGE_MIN { pages } else { LARGE_MIN }
    }
}

/// Index of the class that serves a `size`/`align` request made through
/// tikv-jemallocator.
pub const fn index_of(size: usize, align: usize) -> usize {
    // With `align <= 16`, rounding up to the alignment (what jemalloc does when
    // tikv-jemallocator passes the flag, i.e. when `align > size`) gives the class of
    // `max(size, align)`.
    if align <= 16 {
        return index_of_size(if size > align { size } else { align });
    }
    index_of_aligned(size, align)
}

/// `index_of` for `align > 16` (jemalloc's `sz_sa2u`).
pub const fn index_of_aligned(size: usize, align: usize) -> usize {
    if size <= SMALL_MAX && align <= PAGE {
        let rounded = size.next_multiple_of(align);
        if rounded < LARGE_MIN {
            return index_of_size(rounded);
        }
    }
    index_of_size(if size > LARGE_MIN { size } else { LARGE_MIN })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn sampled_whole_from_the_256_kib_class() {
        assert_eq!(class_bytes(SAMPLE_ALL_FROM_CLASS), SAMPLE_ALL_FROM_BYTES);
        assert_eq!(class_bytes(SAMPLE_ALL_FROM_CLASS - 1), 224 * 1024);
        assert_eq!(index_of_size(224 * 1024 + 1), SAMPLE_ALL_FROM_CLASS);
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
        assert_eq!(class_bytes(LAST_SMALL), SMALL_MAX);
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
