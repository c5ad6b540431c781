//! A monotonic nanosecond clock that never allocates (used for phase bounds and
//! sampled lifetimes, never per allocation).

/// Nanoseconds of `CLOCK_MONOTONIC`.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC is always supported on
    // Linux, and on failure `ts` stays zero.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Seconds since the Unix epoch, for report metadata.
pub fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

static START_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

static START_UNIX_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Marks the start of tracing (the first time only).
pub(crate) fn mark_start() {
    if START_NS
        .compare_exchange(
            0,
            now_ns(),
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        )
        .is_ok()
    {
        START_UNIX_S.store(unix_seconds() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

/// When tracing started, in whole Unix seconds (0 if it has not).
pub fn start_unix_seconds() -> u64 {
    START_UNIX_S.load(std::sync::atomic::Ordering::Relaxed)
}

/// When tracing started (monotonic ns); now if it has not.
pub fn start_ns() -> u64 {
    match START_NS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => now_ns(),
        t => t,
    }
}
