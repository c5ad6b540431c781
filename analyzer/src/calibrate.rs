//! A calibration: what a malloc+free pair and the work around a temporary cost on
//! one machine, as `analyzer calibrate` measured them there, stored as JSON.
//!
//! The cost model ([`crate::cost`]) prices each report row with these figures. The
//! measurement itself is not in this library: it must run under the allocator that
//! traced programs use (tikv-jemallocator), as the process's global allocator, and
//! it times real bellpepper-core operations; the `analyzer` binary is built that way
//! (its `calibrate` feature), so a program that only reads reports and calibrations
//! links neither. Three access patterns ([`Pattern`]) bracket what sites do with
//! their blocks; the calibrated operations ([`OperationCost`]) are `lc_temporary`
//! (the work around a `Boolean::lc` temporary), [`VEC_GROWTH`] and [`RECYCLE`].

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version of the calibration file format; readers refuse others but version 1,
/// which they read as 2 (see `Calibration::load`). 2: memcpy rates by copy size, and
/// `lc_temporary` without the growth path `vec_growth` prices apart.
pub const CALIBRATION_VERSION: u32 = 2;

/// How blocks of one size are used between their malloc and their free.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Freed before the next allocation.
    Temporary,
    /// Freed after a short stretch of other allocations.
    Batch,
    /// Long-lived, freed in an order unrelated to allocation.
    Scattered,
}

impl Pattern {
    /// All patterns, in the order calibrated.
    pub const ALL: [Pattern; 3] = [Pattern::Temporary, Pattern::Batch, Pattern::Scattered];
}

/// Cost of one malloc+free pair of one size in one pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairCost {
    /// Requested size (a jemalloc size class).
    pub size_bytes: u64,
    /// Access pattern.
    pub pattern: Pattern,
    /// Median nanoseconds per pair (allocation, one byte written, free).
    pub ns: f64,
}

/// Cost of one calibrated operation (work that exists only because of an allocation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperationCost {
    /// Name used by category rules (`indirect = "..."`).
    pub name: String,
    /// Median nanoseconds per event, the allocator's own pair cost included.
    pub ns: f64,
    /// `ns` less the allocator's pair cost for the block the event allocates: the
    /// work that exists only because of the allocation (the indirect cost).
    pub beyond_allocator_ns: f64,
    /// What was measured.
    pub what: String,
}

/// A stored calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// [`CALIBRATION_VERSION`].
    pub version: u32,
    /// Host name where it was measured.
    pub host: String,
    /// CPU model where it was measured.
    pub cpu: String,
    /// Logical cores.
    pub cores: usize,
    /// When (seconds since the Unix epoch).
    pub created_unix_s: u64,
    /// Allocator measured.
    pub allocator: String,
    /// Repetitions behind each median.
    pub repetitions: usize,
    /// Pair costs per size and pattern.
    pub pairs: Vec<PairCost>,
    /// memcpy throughput (bytes per nanosecond) of 4 MiB copies: the rate of copies
    /// larger than any in `copy_rates`.
    pub copy_bytes_per_ns: f64,
    /// memcpy throughput by copy size, smallest first: a copy of a few KiB, from and
    /// to cache lines still warm, runs several times faster than one of 4 MiB.
    /// Empty in a calibration migrated from version 1.
    #[serde(default)]
    pub copy_rates: Vec<CopyRate>,
    /// Operations around temporaries.
    pub operations: Vec<OperationCost>,
}

/// memcpy throughput of copies of one size.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CopyRate {
    /// Bytes a copy.
    pub size_bytes: u64,
    /// Bytes per nanosecond.
    pub bytes_per_ns: f64,
}

/// Name of the calibrated cost that Rust's growth path adds to a pair.
pub const VEC_GROWTH: &str = "vec_growth";

/// Name of the calibrated cost of recycling a block through a pool instead of
/// allocating it.
pub const RECYCLE: &str = "recycle";

impl Calibration {
    /// Nanoseconds per pair of a block of `size` bytes in `pattern`: the calibrated
    /// size, or linear interpolation between the two around it (the last one beyond).
    pub fn pair_ns(&self, size: u64, pattern: Pattern) -> f64 {
        let mut below: Option<&PairCost> = None;
        let mut above: Option<&PairCost> = None;
        for p in self.pairs.iter().filter(|p| p.pattern == pattern) {
            if p.size_bytes <= size && below.is_none_or(|b| p.size_bytes > b.size_bytes) {
                below = Some(p);
            }
            if p.size_bytes >= size && above.is_none_or(|a| p.size_bytes < a.size_bytes) {
                above = Some(p);
            }
        }
        match (below, above) {
            (Some(b), Some(a)) if a.size_bytes > b.size_bytes => {
                let t = (size - b.size_bytes) as f64 / (a.size_bytes - b.size_bytes) as f64;
                b.ns + t * (a.ns - b.ns)
            }
            (Some(p), _) | (None, Some(p)) => p.ns,
            (None, None) => 0.0,
        }
    }

    /// Nanoseconds to copy `bytes` bytes: at the rate of the calibrated copy size, or
    /// between the two sizes around it (linear in the logarithm of the size), the
    /// smallest size's rate below it and the 4 MiB rate above every one.
    pub fn copy_ns(&self, bytes: f64) -> f64 {
        if bytes <= 0.0 {
            return 0.0;
        }
        let mut rates: Vec<(f64, f64)> = self
            .copy_rates
            .iter()
            .map(|r| (r.size_bytes as f64, r.bytes_per_ns))
            .collect();
        rates.push(((4u64 << 20) as f64, self.copy_bytes_per_ns));
        rates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let rate = match rates.iter().position(|&(size, _)| size >= bytes) {
            Some(0) => rates[0].1,
            Some(i) => {
                let ((s0, r0), (s1, r1)) = (rates[i - 1], rates[i]);
                let t = (bytes.ln() - s0.ln()) / (s1.ln() - s0.ln());
                r0 + t * (r1 - r0)
            }
            None => self.copy_bytes_per_ns,
        };
        bytes / rate
    }

    /// The calibrated operation called `name`, if any.
    pub fn operation(&self, name: &str) -> Option<&OperationCost> {
        self.operations.iter().find(|o| o.name == name)
    }

    /// Reads a stored calibration, checking its version.
    pub fn load(path: &Path) -> Result<Calibration, crate::Error> {
        let text = std::fs::read(path).map_err(|cause| crate::Error::Io {
            path: path.to_owned(),
            cause,
        })?;
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| crate::Error::Corrupt {
                path: path.to_owned(),
                reason: format!("not JSON: {e}"),
            })?;
        let version = value.get("version").and_then(|v| v.as_u64());
        match version {
            Some(v) if v == u64::from(CALIBRATION_VERSION) || v == 1 => {}
            other => {
                return Err(crate::Error::Corrupt {
                    path: path.to_owned(),
                    reason: format!(
                        "calibration version {}, this analyzer reads version {CALIBRATION_VERSION} \
                         (run `analyzer calibrate` again)",
                        other.map_or_else(|| "missing".to_owned(), |v| v.to_string())
                    ),
                });
            }
        }
        let mut c: Calibration =
            serde_json::from_value(value).map_err(|e| crate::Error::Corrupt {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        if version == Some(1) {
            c.migrate_version_1();
        }
        c.check().map_err(|reason| crate::Error::Corrupt {
            path: path.to_owned(),
            reason,
        })?;
        Ok(c)
    }

    /// Reads a version-1 calibration as version 2: its `lc_temporary` less the
    /// growth path the model adds apart, and every copy at its 4 MiB rate (it has no
    /// rates by size: `analyzer calibrate` measures them).
    fn migrate_version_1(&mut self) {
        let growth = self
            .operation(VEC_GROWTH)
            .map_or(0.0, |o| o.beyond_allocator_ns);
        if let Some(lc) = self
            .operations
            .iter_mut()
            .find(|o| o.name == "lc_temporary")
        {
            lc.beyond_allocator_ns = (lc.beyond_allocator_ns - growth).max(0.0);
        }
        self.version = CALIBRATION_VERSION;
    }

    /// Refuses figures no measurement gives, which would price with NaN or
    /// infinity (and a cost gate comparing NaN never fails): a copy rate that is not
    /// finite and above zero, a time that is not finite and at least zero, no pairs.
    fn check(&self) -> Result<(), String> {
        for (what, rate) in
            std::iter::once(("copy_bytes_per_ns".to_owned(), self.copy_bytes_per_ns)).chain(
                self.copy_rates.iter().map(|r| {
                    (
                        format!("the copy rate of {} bytes", r.size_bytes),
                        r.bytes_per_ns,
                    )
                }),
            )
        {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(format!("{what} is {rate}, not a rate above zero"));
            }
        }
        if self.pairs.is_empty() {
            return Err("no pairs".to_owned());
        }
        let times = self
            .pairs
            .iter()
            .map(|p| (format!("the pair of {} bytes", p.size_bytes), p.ns))
            .chain(self.operations.iter().flat_map(|o| {
                [
                    (format!("operation {}", o.name), o.ns),
                    (
                        format!("operation {}'s beyond_allocator_ns", o.name),
                        o.beyond_allocator_ns,
                    ),
                ]
            }));
        for (what, ns) in times {
            if !(ns.is_finite() && ns >= 0.0) {
                return Err(format!("{what} takes {ns} ns"));
            }
        }
        Ok(())
    }

    /// Writes the calibration as JSON (through a temporary file, then a rename).
    pub fn store(&self, path: &Path) -> Result<(), crate::Error> {
        let io = |cause| crate::Error::Io {
            path: path.to_owned(),
            cause,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("calibration serializes");
        std::fs::write(&tmp, text + "\n").map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

/// Where calibrations are stored unless told otherwise: `$ALLOC_PROFILER_CALIBRATION`,
/// else `$XDG_CACHE_HOME/alloc-profiler/calibration.json`, else
/// `~/.cache/alloc-profiler/calibration.json`.
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("ALLOC_PROFILER_CALIBRATION") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("alloc-profiler").join("calibration.json")
}

/// A small made-up calibration for tests: 160-byte pairs of 5, 10 and 40 ns
/// (temporary, batch, scattered), memcpy at 8 bytes/ns, `lc_temporary` 12 ns (7 ns
/// beyond the allocator), `vec_growth` 3 ns and `recycle` 2 ns.
#[cfg(test)]
pub(crate) fn test_calibration() -> Calibration {
    let pairs = [
        (Pattern::Temporary, 5.0),
        (Pattern::Batch, 10.0),
        (Pattern::Scattered, 40.0),
    ]
    .into_iter()
    .map(|(pattern, ns)| PairCost {
        size_bytes: 160,
        pattern,
        ns,
    })
    .collect();
    let op = |name: &str, ns: f64, beyond_allocator_ns: f64| OperationCost {
        name: name.into(),
        ns,
        beyond_allocator_ns,
        what: String::new(),
    };
    Calibration {
        version: CALIBRATION_VERSION,
        host: "h".into(),
        cpu: "c".into(),
        cores: 1,
        created_unix_s: 0,
        allocator: "a".into(),
        repetitions: 1,
        pairs,
        copy_bytes_per_ns: 8.0,
        copy_rates: Vec::new(),
        operations: vec![
            op("lc_temporary", 12.0, 7.0),
            op(VEC_GROWTH, 3.0, 3.0),
            op(RECYCLE, 2.0, 2.0),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calib(points: &[(u64, f64)]) -> Calibration {
        Calibration {
            pairs: points
                .iter()
                .map(|&(size_bytes, ns)| PairCost {
                    size_bytes,
                    pattern: Pattern::Batch,
                    ns,
                })
                .collect(),
            copy_bytes_per_ns: 1.0,
            operations: vec![],
            ..test_calibration()
        }
    }

    #[test]
    fn interpolates_between_calibrated_sizes() {
        let c = calib(&[(16, 2.0), (32, 4.0), (64, 10.0)]);
        assert_eq!(c.pair_ns(16, Pattern::Batch), 2.0);
        assert_eq!(c.pair_ns(24, Pattern::Batch), 3.0);
        assert_eq!(c.pair_ns(48, Pattern::Batch), 7.0);
        assert_eq!(c.pair_ns(8, Pattern::Batch), 2.0);
        assert_eq!(c.pair_ns(1 << 30, Pattern::Batch), 10.0);
        assert_eq!(c.pair_ns(32, Pattern::Temporary), 0.0);
    }

    #[test]
    fn copies_are_priced_at_the_rate_of_their_size() {
        let c = Calibration {
            copy_bytes_per_ns: 10.0,
            copy_rates: vec![
                CopyRate {
                    size_bytes: 1 << 10,
                    bytes_per_ns: 40.0,
                },
                CopyRate {
                    size_bytes: 64 << 10,
                    bytes_per_ns: 20.0,
                },
            ],
            ..calib(&[(16, 1.0)])
        };
        // At a calibrated size, below the smallest, above the largest (4 MiB).
        assert_eq!(c.copy_ns(1024.0), 1024.0 / 40.0);
        assert_eq!(c.copy_ns(100.0), 100.0 / 40.0);
        assert_eq!(c.copy_ns((8 << 20) as f64), (8 << 20) as f64 / 10.0);
        // Halfway in the logarithm of the size between 1 KiB and 64 KiB: 8 KiB.
        assert!((c.copy_ns(8192.0) - 8192.0 / 30.0).abs() < 1e-9);
        assert_eq!(c.copy_ns(0.0), 0.0);
        // Without rates by size, every copy at the 4 MiB rate.
        let plain = calib(&[(16, 1.0)]);
        assert_eq!(plain.copy_ns(1024.0), 1024.0);
    }

    #[test]
    fn a_version_1_calibration_is_read_as_version_2() {
        let dir = std::env::temp_dir().join(format!("analyzer-calib-v1-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("v1.json");
        let mut v1 = serde_json::to_value(test_calibration()).unwrap();
        v1["version"] = 1.into();
        v1.as_object_mut().unwrap().remove("copy_rates");
        std::fs::write(&path, v1.to_string()).unwrap();
        let c = Calibration::load(&path).unwrap();
        assert_eq!(c.version, CALIBRATION_VERSION);
        assert!(c.copy_rates.is_empty());
        // lc_temporary's 7 ns less vec_growth's 3.
        assert_eq!(
            c.operation("lc_temporary").unwrap().beyond_allocator_ns,
            4.0
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn store_and_load_round_trip_and_refuse_other_versions() {
        let dir = std::env::temp_dir().join(format!("analyzer-calib-{}", std::process::id()));
        let path = dir.join("c.json");
        let c = calib(&[(16, 2.5)]);
        c.store(&path).unwrap();
        assert_eq!(Calibration::load(&path).unwrap(), c);
        std::fs::write(&path, r#"{"version": 99}"#).unwrap();
        let e = Calibration::load(&path).unwrap_err().to_string();
        assert!(e.contains("calibration version 99"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
