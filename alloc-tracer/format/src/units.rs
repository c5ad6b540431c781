//! Bytes as the tracer's summary and the analyzer print them: in the binary unit that
//! suits their size, so that one figure reads the same wherever it is printed.

/// `b` bytes in the binary unit that suits their size (`512 B`, `1.5 KiB`, `3.0 MiB`,
/// `20.00 GiB`).
pub fn bytes(b: f64) -> String {
    let a = b.abs();
    if a >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if a >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else if a >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_binary_units() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes((3u64 << 20) as f64), "3.0 MiB");
        assert_eq!(bytes((20u64 << 30) as f64), "20.00 GiB");
        assert_eq!(bytes(-1536.0), "-1.5 KiB");
    }
}
