//! Log-linear buckets, the layout of an HDR histogram: exact below `2 << SUB_BITS`,
//! then `1 << SUB_BITS` buckets per power of two. Used for requested sizes (5 bits:
//! buckets under 3.2 % wide, like an HDR histogram with two significant digits) and
//! for lifetimes (2 bits). Recording is one counter increment; the report turns the
//! counts into percentiles (bucket floors) where they are wanted.

/// Sub-bucket bits of the requested-size histogram.
pub const SIZE_SUB_BITS: u32 = 5;
/// Buckets of the requested-size histogram: sizes up to 2^48 bytes, larger ones
/// share the last bucket.
pub const SIZE_BUCKETS: usize = num_buckets(SIZE_SUB_BITS, 48);

/// Sub-bucket bits of lifetime histograms.
pub const LIFETIME_SUB_BITS: u32 = 2;
/// Buckets of a lifetime histogram (nanoseconds, all of `u64`).
pub const LIFETIME_BUCKETS: usize = num_buckets(LIFETIME_SUB_BITS, 64);

/// Number of buckets needed for values below `2^max_lg`.
pub const fn num_buckets(sub_bits: u32, max_lg: u32) -> usize {
    let sub = 1usize << sub_bits;
    2 * sub + (max_lg - sub_bits - 1) as usize * sub
}

/// The bucket of `v`.
#[inline(always)]
pub const fn bucket(v: u64, sub_bits: u32) -> usize {
    let sub = 1u64 << sub_bits;
    if v < 2 * sub {
        v as usize
    } else {
        let lg = 63 - v.leading_zeros();
        let within = (v >> (lg - sub_bits)) & (sub - 1);
        (2 * sub + (lg - sub_bits - 1) as u64 * sub + within) as usize
    }
}

/// The requested-size bucket of `size`.
#[inline(always)]
pub const fn size_bucket(size: usize) -> usize {
    let b = bucket(size as u64, SIZE_SUB_BITS);
    if b < SIZE_BUCKETS {
        b
    } else {
        SIZE_BUCKETS - 1
    }
}

/// The smallest value in bucket `b`.
pub fn bucket_low(b: usize, sub_bits: u32) -> u64 {
    let sub = 1usize << sub_bits;
    if b < 2 * sub {
        b as u64
    } else {
        let lg = sub_bits as usize + 1 + (b - 2 * sub) / sub;
        let within = ((b - 2 * sub) % sub) as u64;
        (sub as u64 + within) << (lg - sub_bits as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_tight() {
        for bits in [LIFETIME_SUB_BITS, SIZE_SUB_BITS] {
            let n = num_buckets(bits, 48);
            for b in 1..n {
                assert!(bucket_low(b, bits) > bucket_low(b - 1, bits));
                assert_eq!(bucket(bucket_low(b, bits), bits), b);
                assert_eq!(bucket(bucket_low(b, bits) - 1, bits), b - 1);
            }
        }
        for size in [160u64, 4000, 1 << 20] {
            let low = bucket_low(bucket(size, SIZE_SUB_BITS), SIZE_SUB_BITS) as f64;
            assert!(low <= size as f64 && size as f64 - low < 0.032 * size as f64);
        }
        assert_eq!(bucket(u64::MAX, LIFETIME_SUB_BITS), LIFETIME_BUCKETS - 1);
    }
}
