//! Run-time settings: the mode, stack depth and sampling intervals, from the API or
//! from the environment at the first allocation.

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
    /// to its call stack and followed to its free; temporaries among those.
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

/// Default stack depth.
pub const DEFAULT_DEPTH: usize = 16;
/// Default mean interval between blocks followed to their free in `sites` mode.
pub const DEFAULT_LIFETIME_INTERVAL: u64 = 64;

/// Everything that decides what is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The mode.
    pub mode: Mode,
    /// Frames kept per stack (at most [`MAX_DEPTH`]).
    pub depth: usize,
    /// Mean interval, in allocations, between blocks followed to their free in
    /// `sites` mode; 0 follows none. (`sample` mode follows its sampled blocks.)
    pub lifetime_interval: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Off,
            depth: DEFAULT_DEPTH,
            lifetime_interval: DEFAULT_LIFETIME_INTERVAL,
        }
    }
}

impl Settings {
    /// Reads `ALLOC_TRACE`, `ALLOC_TRACE_DEPTH` and `ALLOC_TRACE_LIFETIMES`.
    pub fn from_env() -> Result<Settings, Error> {
        let mut s = Settings::default();
        if let Some(v) = getenv(c"ALLOC_TRACE") {
            s.mode = Mode::parse(v)?;
        }
        if let Some(v) = getenv(c"ALLOC_TRACE_DEPTH") {
            s.depth = match v.trim().parse::<usize>() {
                Ok(d) if (1..=MAX_DEPTH).contains(&d) => d,
                _ => {
                    return Err(Error::Setting {
                        name: "ALLOC_TRACE_DEPTH",
                        value: v.to_owned(),
                        expected: "expected a depth from 1 to 30",
                    });
                }
            };
        }
        if let Some(v) = getenv(c"ALLOC_TRACE_LIFETIMES") {
            s.lifetime_interval = v.trim().parse::<u64>().map_err(|_| Error::Setting {
                name: "ALLOC_TRACE_LIFETIMES",
                value: v.to_owned(),
                expected: "expected a mean interval in allocations (0 = none)",
            })?;
        }
        Ok(s)
    }

    /// Makes these settings current. Every thread redraws its countdowns to its next
    /// sampled stack and next followed block under the new intervals within 1024 of
    /// its allocations (`hot::countdown`); a change of mode also forgets every
    /// thread's latest block (briefly taking the registry lock), since `count` mode
    /// does not keep it up to date.
    pub fn apply(self) {
        self.publish_intervals();
        if Settings::current().mode != self.mode {
            crate::registry::forget_latest_blocks();
        }
        control::set_mode(self.mode.code(), self.depth);
    }

    /// Publishes the sampling and lifetime intervals and marks the start of tracing:
    /// what choosing settings does first, from the API or the environment.
    pub(crate) fn publish_intervals(self) {
        control::set_intervals(self.mode.sample_interval(), self.lifetime_interval);
        crate::hot::clock::mark_start();
    }

    /// The settings in force now.
    pub fn current() -> Settings {
        let c = control::load();
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
        }
    }
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
}
