//! Numbers as text, for every module that prints one: bytes in the binary unit that
//! suits them (the tracer's formatter, so that a figure reads the same in its summary
//! and here), digits in groups of three, and heap sampling's interval in words. A
//! leaf, naming no other module, so that the modules that write files or messages
//! (budget drafts, exports, `--fail-if`'s verdicts) and the renderers that depend on
//! them can all use it.

/// Bytes in the unit that suits their size (binary units, as the tracer prints).
pub use alloc_tracer_format::units::bytes;

/// `n`'s digits in groups of three, `sep` between them: `1234567` as `1,234,567`
/// (as inferno writes counts) or `1_234_567` (a TOML number).
pub(crate) fn digits_grouped(n: u128, sep: char) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// How often heap sampling at `interval` (above 0) samples, in words: `every block
/// (exact)` at 1, else `every 1.0 MiB on average`.
pub fn heap_every(interval: u64) -> String {
    if interval == 1 {
        "every block (exact)".to_owned()
    } else {
        format!("every {} on average", bytes(interval as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped_in_threes_from_the_right() {
        assert_eq!(digits_grouped(0, ','), "0");
        assert_eq!(digits_grouped(999, ','), "999");
        assert_eq!(digits_grouped(1000, ','), "1,000");
        assert_eq!(digits_grouped(1_234_567, '_'), "1_234_567");
    }

    #[test]
    fn heap_sampling_at_one_byte_is_every_block() {
        assert_eq!(heap_every(1), "every block (exact)");
        assert_eq!(heap_every(1 << 20), "every 1.0 MiB on average");
    }
}
