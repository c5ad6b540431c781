//! Run-time settings: the mode, stack depth, sampling intervals, heap sampling and
//! the timeline, from the API or from the environment at the first allocation.

use crate::Error;
use crate::hot::control::{self, MODE_COUNT, MODE_OFF, MODE_SAMPLE, MODE_SITES};
use std::ffi::CStr;

/// What the tracer records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Nothing: a pure pass-through to the inner allocator.
    Off,
    /// Totals per phase, size-class and requested-size histograms, live and peak
    /// bytes.
    Count,
    /// `Count`, plus temporaries, every allocation attributed to its call stack, and
    /// one block in `lifetime_interval` followed to its free.
    Sites,
    /// `Count`, plus one allocation in N (on average, geometric intervals) attributed
    /// to its call stack and followed to its free; temporaries among those. N >= 1
    /// ([`Settings::apply`] panics on 0).
    Sample(u64),
}

impl Mode {
    /// Parses `off`, `count`, `sites` or `sample:N`.
    pub fn parse(s: &str) -> Result<Mode, Error> {
        let bad = || Error::Setting {
            name: "ALLOC_TRACE",
            value: s.to_owned(),
            expected: "expected off, count, sites or sample:N (N >= 1)",
        };
        match s.trim() {
            "" | "off" => Ok(Mode::Off),
            "count" => Ok(Mode::Count),
            "sites" => Ok(Mode::Sites),
            other => match other.strip_prefix("sample:").map(str::parse::<u64>) {
                Some(Ok(n)) if n >= 1 => Ok(Mode::Sample(n)),
                _ => Err(bad()),
            },
        }
    }

    /// The name used in reports: `off`, `count`, `sites`, `sample:N`.
    pub fn name(self) -> String {
        match self {
            Mode::Off => "off".into(),
            Mode::Count => "count".into(),
            Mode::Sites => "sites".into(),
            Mode::Sample(n) => format!("sample:{n}"),
        }
    }

    /// Allocations each sampled stack stands for: N in `sample:N`, 1 otherwise.
    pub fn sample_interval(self) -> u64 {
        match self {
            Mode::Sample(n) => n,
            _ => 1,
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Mode::Off => MODE_OFF,
            Mode::Count => MODE_COUNT,
            Mode::Sites => MODE_SITES,
            Mode::Sample(_) => MODE_SAMPLE,
        }
    }
}

/// Largest stack depth (frames of the program; the tracer walks two of its own more).
pub const MAX_DEPTH: usize = crate::hot::stack::MAX_DEPTH - crate::hot::sites::OWN_FRAMES;
const _: () = assert!(
    MAX_DEPTH == 62,
    "the depth range is spelled out in messages and docs"
);

/// Default stack depth: enough for a synthesis stack to reach `main` or its thread's
/// start (2 KiB PoRep: 31 frames at most). Past the first walk of a thread, the
/// frames a walk shares with the one before are compared, not walked (`trail`), so
/// depth costs little.
pub const DEFAULT_DEPTH: usize = 48;
/// Default mean interval between blocks followed to their free in `sites` mode.
pub const DEFAULT_LIFETIME_INTERVAL: u64 = 64;
/// Default mean interval, in bytes, of heap sampling in `sites` and `sample` modes
/// (off by default in `count` mode).
pub const DEFAULT_HEAP_INTERVAL: u64 = 1 << 20;
/// Default interval of the live-bytes timeline, in milliseconds.
pub const DEFAULT_TIMELINE_MS: u64 = crate::timeline::DEFAULT_INTERVAL_MS;

/// Everything that decides what is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The mode.
    pub mode: Mode,
    /// Frames kept per stack: 1 to [`MAX_DEPTH`] (more is taken as `MAX_DEPTH`, 0
    /// makes [`Settings::apply`] panic; the environment's `ALLOC_TRACE_DEPTH` refuses
    /// 0 and anything above `MAX_DEPTH`).
    pub depth: usize,
    /// Mean interval, in allocations, between blocks followed to their free in
    /// `sites` mode; 0 follows none. (`sample` mode follows its sampled blocks.)
    pub lifetime_interval: u64,
    /// Heap sampling: the mean interval in bytes between sampled bytes (each byte
    /// is sampled with probability 1/interval; 1 samples every block); `Some(0)`:
    /// off; `None`: the mode's default ([`DEFAULT_HEAP_INTERVAL`] in `sites` and
    /// `sample`, off in `count`).
    pub heap_interval: Option<u64>,
    /// Interval of the live-bytes timeline in milliseconds (0: none).
    pub timeline_ms: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Off,
            depth: DEFAULT_DEPTH,
            lifetime_interval: DEFAULT_LIFETIME_INTERVAL,
            heap_interval: None,
            timeline_ms: DEFAULT_TIMELINE_MS,
        }
    }
}

impl Settings {
    /// The heap sampling interval in force under these settings, in bytes (0: off).
    pub fn heap_bytes(&self) -> u64 {
        match (self.heap_interval, self.mode) {
            (Some(n), _) => n,
            (None, Mode::Sites | Mode::Sample(_)) => DEFAULT_HEAP_INTERVAL,
            (None, _) => 0,
        }
    }

    /// True when heap sampling is on.
    pub fn heap_on(&self) -> bool {
        self.heap_bytes() > 0 && self.mode != Mode::Off
    }

    /// Reads `ALLOC_TRACE`, `ALLOC_TRACE_DEPTH`, `ALLOC_TRACE_LIFETIMES`,
    /// `ALLOC_TRACE_HEAP` and `ALLOC_TRACE_TIMELINE_MS`, through std's environment
    /// lock (so a `set_var` on another thread waits). It allocates (the values are
    /// copied out under the lock): called before the program's first allocation, it
    /// makes that allocation, which reads the same variables to set up tracing, as
    /// any first allocation does.
    pub fn from_env() -> Result<Settings, Error> {
        Settings::from_vars(|name| std::env::var(name.to_str().ok()?).ok())
    }

    /// [`Settings::from_env`] at the first allocation: without std's lock, which the
    /// allocating thread may hold (`set_var` allocates while holding it), and
    /// without allocating but for an error's value.
    pub(crate) fn from_env_unlocked() -> Result<Settings, Error> {
        Settings::from_vars(getenv)
    }

    /// The settings that `get` gives the variables, read by name.
    fn from_vars<S: AsRef<str>>(get: impl Fn(&CStr) -> Option<S>) -> Result<Settings, Error> {
        let mut s = Settings::default();
        if let Some(v) = get(c"ALLOC_TRACE") {
            s.mode = Mode::parse(v.as_ref())?;
        }
        if let Some(v) = get(c"ALLOC_TRACE_DEPTH") {
            let v = v.as_ref();
            s.depth = match v.trim().parse::<usize>() {
                Ok(d) if (1..=MAX_DEPTH).contains(&d) => d,
                _ => {
                    return Err(Error::Setting {
                        name: "ALLOC_TRACE_DEPTH",
                        value: v.to_owned(),
                        expected: "expected a depth from 1 to 62",
                    });
                }
            };
        }
        if let Some(v) = get(c"ALLOC_TRACE_LIFETIMES") {
            let v = v.as_ref();
            s.lifetime_interval = v.trim().parse::<u64>().map_err(|_| Error::Setting {
                name: "ALLOC_TRACE_LIFETIMES",
                value: v.to_owned(),
                expected: "expected a mean interval in allocations (0 = none)",
            })?;
        }
        if let Some(v) = get(c"ALLOC_TRACE_HEAP") {
            let v = v.as_ref();
            s.heap_interval = Some(parse_bytes(v).ok_or_else(|| Error::Setting {
                name: "ALLOC_TRACE_HEAP",
                value: v.to_owned(),
                expected: "expected a mean interval in bytes, e.g. 1MiB or 65536 (0 = off)",
            })?);
        }
        if let Some(v) = get(c"ALLOC_TRACE_TIMELINE_MS") {
            let v = v.as_ref();
            s.timeline_ms = v.trim().parse::<u64>().map_err(|_| Error::Setting {
                name: "ALLOC_TRACE_TIMELINE_MS",
                value: v.to_owned(),
                expected: "expected an interval in milliseconds (0 = no timeline)",
            })?;
        }
        Ok(s)
    }

    /// Publishes the sampling, lifetime, heap and timeline intervals and marks the
    /// start of tracing: what choosing settings does first, from the API or the
    /// environment.
    pub(crate) fn publish_intervals(self) {
        control::set_intervals(
            match self.mode {
                Mode::Sample(n) => n,
                _ => 0,
            },
            self.lifetime_interval,
            if self.heap_on() { self.heap_bytes() } else { 0 },
        );
        crate::timeline::set_interval_ms(self.timeline_ms);
        crate::hot::clock::mark_start();
    }

    /// The settings in force now: before the first allocation and any
    /// [`Settings::apply`] (or in a program whose global allocator is not the
    /// tracer's), none are, and this is [`Settings::default`].
    pub fn current() -> Settings {
        let c = control::load();
        if c.mode() == control::MODE_UNINIT {
            return Settings::default();
        }
        let mode = match c.mode() {
            MODE_COUNT => Mode::Count,
            MODE_SITES => Mode::Sites,
            MODE_SAMPLE => Mode::Sample(control::sample_interval()),
            _ => Mode::Off,
        };
        Settings {
            mode,
            depth: c.depth(),
            lifetime_interval: control::lifetime_interval(),
            heap_interval: Some(if c.heap() {
                control::heap_interval()
            } else {
                0
            }),
            timeline_ms: crate::timeline::interval_ms(),
        }
    }
}

/// Parses a byte count: a number, optionally followed by `B`, `KiB`, `MiB`, `GiB`,
/// `TiB` (or `K`, `M`, `G`, `T`, also powers of 1024). A unit above bytes takes a
/// decimal too (`1.5MiB`), rounded to whole bytes. Allocates nothing: it runs inside
/// the first allocation, for `ALLOC_TRACE_HEAP`.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let number = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let shift = match s[number..].trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        _ => return None,
    };
    let number = &s[..number];
    if let Ok(n) = number.parse::<u64>() {
        return n.checked_mul(1 << shift);
    }
    // A decimal: digits on both sides of one point, of a unit above bytes.
    let (whole, fraction) = number.split_once('.')?;
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if shift == 0 || !digits(whole) || !digits(fraction) {
        return None;
    }
    let bytes = (number.parse::<f64>().ok()? * (1u64 << shift) as f64).round();
    // 2^64 is the first f64 past u64::MAX. A decimal is a size, never 0 (which
    // turns heap sampling off): one that rounds to it is refused.
    (1.0..18_446_744_073_709_551_616.0)
        .contains(&bytes)
        .then_some(bytes as u64)
}

/// `getenv` without allocating or taking std's environment lock: this runs inside
/// the first allocation, possibly while another thread holds that lock.
pub(crate) fn getenv(name: &CStr) -> Option<&'static str> {
    // SAFETY: `name` is NUL-terminated. The returned pointer, if not null, points to a
    // NUL-terminated string in the environment, which this program does not modify
    // concurrently at start-up.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: as above.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modes() {
        assert_eq!(Mode::parse("off").unwrap(), Mode::Off);
        assert_eq!(Mode::parse("count").unwrap(), Mode::Count);
        assert_eq!(Mode::parse(" sites ").unwrap(), Mode::Sites);
        assert_eq!(Mode::parse("sample:100").unwrap(), Mode::Sample(100));
        for bad in ["sample:0", "sample:x", "site", "sample"] {
            assert!(Mode::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Mode::Sample(7).name(), "sample:7");
    }

    #[test]
    fn parses_byte_counts() {
        assert_eq!(parse_bytes("0"), Some(0));
        assert_eq!(parse_bytes("65536"), Some(65536));
        assert_eq!(parse_bytes(" 1MiB "), Some(1 << 20));
        assert_eq!(parse_bytes("4K"), Some(4096));
        assert_eq!(parse_bytes("2 GiB"), Some(2 << 30));
        assert_eq!(parse_bytes("1TiB"), Some(1 << 40));
        assert_eq!(parse_bytes("1.5MiB"), Some(3 << 19));
        assert_eq!(parse_bytes("0.5 K"), Some(512));
        assert_eq!(parse_bytes("1.1MiB"), Some(1_153_434));
        for bad in [
            "",
            "MiB",
            "1TB",
            "-1",
            "99999999999999999999G",
            "1.5",
            "1.5B",
            ".5MiB",
            "1.MiB",
            "1.2.3MiB",
            "16777216.0TiB",
            "0.0000001MiB",
            "0.0K",
        ] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn heap_sampling_defaults_by_mode() {
        let s = |mode, heap_interval| Settings {
            mode,
            heap_interval,
            ..Default::default()
        };
        assert_eq!(s(Mode::Sites, None).heap_bytes(), DEFAULT_HEAP_INTERVAL);
        assert_eq!(
            s(Mode::Sample(10), None).heap_bytes(),
            DEFAULT_HEAP_INTERVAL
        );
        assert!(!s(Mode::Count, None).heap_on());
        assert!(s(Mode::Count, Some(4096)).heap_on());
        assert!(!s(Mode::Sites, Some(0)).heap_on());
        assert!(!s(Mode::Off, Some(4096)).heap_on());
    }
}
