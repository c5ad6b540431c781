//! The parsers of the command line's values: whole numbers in a range (naming the
//! `ALLOC_TRACE_*` variable that may have given one), modes, byte counts, arities.

use crate::circuits;
use alloc_tracer::Mode;

/// A `--trace` value. (The tracer's own parser, made for `ALLOC_TRACE`, takes an
/// empty value for `off` and names the variable in its errors.)
pub(super) fn parse_mode(s: &str) -> Result<Mode, String> {
    const EXPECTED: &str =
        "expected off, count, sites or sample:N (N >= 1), from --trace or ALLOC_TRACE";
    if s.trim().is_empty() {
        return Err(format!("an empty mode: {EXPECTED}"));
    }
    Mode::parse(s).map_err(|_| EXPECTED.to_owned())
}

/// A whole number from `min` to `max`; `env`, the variable that may have given it.
pub(super) fn whole(s: &str, min: u64, max: u64, env: Option<&str>) -> Result<u64, String> {
    let range = match (min, max) {
        (_, u64::MAX) => format!("{min} or more"),
        _ => format!("from {min} to {max}"),
    };
    let from = env.map_or(String::new(), |env| format!(" (here or from {env})"));
    let s = s.trim();
    match s.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
            Err(format!("too large: expected a whole number, {range}{from}"))
        }
        _ => Err(format!("expected a whole number, {range}{from}")),
    }
}

pub(super) fn at_least<const MIN: u64>(s: &str) -> Result<u64, String> {
    whole(s, MIN, u64::MAX, None)
}

pub(super) fn within<const MIN: u64, const MAX: u64>(s: &str) -> Result<u64, String> {
    whole(s, MIN, MAX, None)
}

pub(super) fn parse_depth(s: &str) -> Result<u64, String> {
    let most = alloc_tracer::MAX_DEPTH as u64;
    whole(s, 1, most, Some("ALLOC_TRACE_DEPTH"))
}

pub(super) fn parse_lifetimes(s: &str) -> Result<u64, String> {
    whole(s, 0, u64::MAX, Some("ALLOC_TRACE_LIFETIMES"))
}

pub(super) fn parse_timeline_ms(s: &str) -> Result<u64, String> {
    whole(s, 0, u64::MAX, Some("ALLOC_TRACE_TIMELINE_MS"))
}

pub(super) fn parse_partition(s: &str) -> Result<usize, String> {
    whole(s, 0, usize::MAX as u64, None).map(|n| n as usize)
}

pub(super) fn parse_top(s: &str) -> Result<usize, String> {
    let most = alloc_tracer::SUMMARY_SITES;
    match s.parse::<usize>() {
        Ok(n) if n <= most => Ok(n),
        _ => Err(format!(
            "the summary lists 0 to {most} sites (`analyzer top` ranks them all)"
        )),
    }
}

pub(super) fn parse_bytes(s: &str) -> Result<u64, String> {
    alloc_tracer::parse_bytes(s).ok_or_else(|| {
        format!(
            "{s:?} is not a byte count (e.g. 1MiB, 1.5MiB, 64KiB, 65536; units B, KiB, \
             MiB, GiB, TiB, or K, M, G, T; here or from ALLOC_TRACE_HEAP)"
        )
    })
}

pub(super) fn parse_arity(s: &str) -> Result<usize, String> {
    let arities = circuits::POSEIDON_ARITIES;
    s.parse()
        .ok()
        .filter(|a| arities.contains(a))
        .ok_or_else(|| format!("unsupported arity {s:?}; expected one of {arities:?}"))
}
