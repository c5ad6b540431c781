//! The machine a report or a calibration describes: read one way by the tracer (into
//! the manifest) and by the analyzer (into its calibration), so that the analyzer's
//! host-mismatch check compares like with like.

/// The host name (`/proc/sys/kernel/hostname`), if readable.
pub fn name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The CPU model (the first `model name` of `/proc/cpuinfo`), if readable.
pub fn cpu_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
    })
}
