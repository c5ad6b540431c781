//! Conditions on a diff (`analyzer diff --fail-if`): `METRIC>THRESHOLD`, parsed
//! once, then judged against a [`Diff`] of two reports. The CLI prints every
//! condition with both reports' figures and exits 1 when one holds.

use crate::Error;
use crate::budget::figure;
use crate::diff::Diff;
use crate::sampling_noise::{Noise, Sampled};
use std::fmt;

/// What a `--fail-if` condition compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Allocations and reallocs.
    Allocs,
    /// Requested bytes.
    Bytes,
    /// Temporaries.
    Temporaries,
    /// Predicted allocation cost (seconds; needs a calibration).
    Cost,
    /// The run's highest live bytes (`peak_live_bytes`: the whole run, whatever
    /// `--phase` says).
    Peak,
    /// The process's peak resident set size (`max_rss_bytes`: the whole run).
    Rss,
}

/// How large a growth fails (in JSON `{"absolute": 0.005}` or `{"percent": 1.0}`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Threshold {
    /// `change - base` above this, in the metric's unit (count, bytes, seconds).
    Absolute(f64),
    /// `(change - base) / base` above this many percent.
    Percent(f64),
}

/// A `--fail-if` condition: `METRIC>THRESHOLD`, e.g. `allocs>+1%`, `bytes>+10MiB`,
/// `cost>+5ms`, `temporaries>+0`, `peak>+64MiB`.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// The text given, for the breach line.
    pub text: String,
    /// What it compares.
    pub metric: Metric,
    /// The growth that fails.
    pub threshold: Threshold,
}

/// Parses a `--fail-if` condition.
pub fn parse_condition(text: &str) -> Result<Condition, Error> {
    let bad = |reason: &str| Error::Condition {
        text: text.to_owned(),
        reason: reason.to_owned(),
    };
    let compact: String = text.split_whitespace().collect();
    // No threshold takes a comma: `allocs>+1%,bytes>+1%` is two conditions.
    if compact.contains(',') {
        return Err(bad(
            "one condition a --fail-if: give it once for each (--fail-if 'allocs>+1%' \
             --fail-if 'bytes>+1%')",
        ));
    }
    let (name, threshold) = compact.split_once('>').ok_or_else(|| {
        bad("expected METRIC>THRESHOLD, e.g. 'allocs>+1%', quoted (unquoted, the shell reads > as a redirection)")
    })?;
    let metric = match name {
        "allocs" => Metric::Allocs,
        "bytes" => Metric::Bytes,
        "temporaries" => Metric::Temporaries,
        "cost" => Metric::Cost,
        "peak" => Metric::Peak,
        "rss" => Metric::Rss,
        _ => {
            return Err(bad(
                "the metric is one of allocs, bytes, temporaries, cost, peak, rss",
            ));
        }
    };
    if let Some(rest) = threshold.strip_prefix('=') {
        return Err(bad(&format!(
            "a gate fails when the change grows beyond its threshold: write {name}>{rest}"
        )));
    }
    // `allocs>100` could be read as a cap on the change's own count; a gate compares
    // with the base, so its threshold says which way, as a change does.
    if threshold.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(bad(&format!(
            "the threshold is a change from the base and takes a sign: \
             {name}>+{threshold} fails when the change has more than {threshold} over the base"
        )));
    }
    let split = threshold
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | '_')))
        .unwrap_or(threshold.len());
    let (number, unit) = threshold.split_at(split);
    let number: f64 = number
        .replace('_', "")
        .parse()
        .map_err(|_| bad("the threshold is a number, e.g. +1% or +5ms"))?;
    if !number.is_finite() {
        return Err(bad("the threshold is a number, e.g. +1% or +5ms"));
    }
    let scale = match (metric, unit) {
        (_, "%") => return Ok(condition(text, metric, Threshold::Percent(number))),
        (Metric::Allocs | Metric::Temporaries, "") if number.fract() == 0.0 => 1.0,
        (Metric::Allocs | Metric::Temporaries, "") => {
            return Err(bad(
                "allocs and temporaries take a whole count (or a percentage, e.g. +1.5%)",
            ));
        }
        // A bare number of bytes reads as per cent to a reader of `--margin 5`: zero
        // alone needs no unit, as for cost.
        (Metric::Bytes | Metric::Peak | Metric::Rss, "") if number == 0.0 => 1.0,
        (Metric::Bytes | Metric::Peak | Metric::Rss, "") => {
            return Err(bad(&format!(
                "{name} takes B, KiB, MiB, GiB, TiB or %: write {name}>{threshold}B for \
                 bytes, {name}>{threshold}% for a share"
            )));
        }
        (Metric::Bytes | Metric::Peak | Metric::Rss, "B") => 1.0,
        (Metric::Bytes | Metric::Peak | Metric::Rss, "KiB") => 1024.0,
        (Metric::Bytes | Metric::Peak | Metric::Rss, "MiB") => 1024.0 * 1024.0,
        (Metric::Bytes | Metric::Peak | Metric::Rss, "GiB") => 1024.0 * 1024.0 * 1024.0,
        (Metric::Bytes | Metric::Peak | Metric::Rss, "TiB") => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        (Metric::Cost, "s") => 1.0,
        // No growth at all needs no unit.
        (Metric::Cost, "") if number == 0.0 => 1.0,
        (Metric::Cost, "ms") => 1e-3,
        (Metric::Cost, "us") => 1e-6,
        (Metric::Cost, "ns") => 1e-9,
        (Metric::Allocs | Metric::Temporaries, _) => {
            return Err(bad("allocs and temporaries take a count or a percentage"));
        }
        (Metric::Bytes, _) => return Err(bad("bytes takes B, KiB, MiB, GiB, TiB or %")),
        (Metric::Peak, _) => return Err(bad("peak takes B, KiB, MiB, GiB, TiB or %")),
        (Metric::Rss, _) => return Err(bad("rss takes B, KiB, MiB, GiB, TiB or %")),
        (Metric::Cost, _) => return Err(bad("cost takes s, ms, us, ns or %")),
    };
    Ok(condition(text, metric, Threshold::Absolute(number * scale)))
}

fn condition(text: &str, metric: Metric, threshold: Threshold) -> Condition {
    Condition {
        text: text.to_owned(),
        metric,
        threshold,
    }
}

/// A `--fail-if` condition judged, with its figures (in the metric's unit: a count,
/// bytes, or seconds for `cost`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Failed {
    /// The condition as given.
    pub condition: String,
    /// What it compared.
    pub metric: Metric,
    /// The growth that fails.
    pub threshold: Threshold,
    /// The baseline's figure.
    #[serde(serialize_with = "crate::budget::whole_or_fraction")]
    pub base: f64,
    /// The change's.
    #[serde(serialize_with = "crate::budget::whole_or_fraction")]
    pub change: f64,
    /// `change - base`.
    #[serde(serialize_with = "crate::budget::whole_or_fraction")]
    pub delta: f64,
    /// Where a report was traced in `sample:N` mode, how far sampling alone may
    /// move the growth of an estimated figure: `cost` (`Diff::predicted_change_noise_s`)
    /// and `temporaries`; `None` for exact ones.
    #[serde(serialize_with = "crate::budget::opt_whole_or_fraction")]
    pub sampling_noise: Option<f64>,
    /// For `cost`: the part of the growth at sites whose allocations and bytes did
    /// not change (`Diff::repriced_s`), where not 0.
    pub repriced_s: Option<f64>,
    /// For `peak`: how far the growth may be off, each side's peak being exact only
    /// to within its bound (`Side::peak_live_bytes_error_bytes`, the two summed);
    /// `None` where neither report gives one.
    #[serde(serialize_with = "crate::budget::opt_whole_or_fraction")]
    pub peak_error: Option<f64>,
}

impl Failed {
    /// What a breach of it is called on standard error: a negative threshold
    /// (`allocs>-1000`) demands a saving, which a change can fall short of but not
    /// go over budget.
    pub fn breach(&self) -> &'static str {
        match self.threshold {
            Threshold::Absolute(t) | Threshold::Percent(t) if t < 0.0 => "saving short of the gate",
            _ => "over budget",
        }
    }

    /// The growth the condition allows.
    fn allowed(&self) -> f64 {
        match self.threshold {
            Threshold::Absolute(t) => t,
            Threshold::Percent(p) => p / 100.0 * self.base.abs(),
        }
    }

    /// True when sampling alone may move the figure by more than the growth the
    /// condition allows: it then fails or passes by chance.
    pub fn under_noise(&self) -> bool {
        self.sampling_noise.is_some_and(|n| n > self.allowed())
    }

    /// True when the peaks' own error bound is more than the growth the condition
    /// allows: where each side's publishing of live bytes fell, not the program,
    /// can decide it.
    pub fn under_peak_error(&self) -> bool {
        self.peak_error.is_some_and(|e| e > self.allowed())
    }
}

impl fmt::Display for Failed {
    /// One line: `allocs>+1%: 1000 -> 1200 (+200, +20.0%)`; costs in milliseconds,
    /// bytes in the unit that suits them (JSON has them whole).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |x: f64| match self.metric {
            Metric::Cost => format!("{:.3} ms", x * 1e3),
            Metric::Bytes | Metric::Peak | Metric::Rss => crate::units::bytes(x),
            Metric::Allocs | Metric::Temporaries => figure(x),
        };
        let growth = self.change - self.base;
        let sign = if growth >= 0.0 { "+" } else { "" };
        write!(
            f,
            "{}: {} -> {} ({sign}{}",
            self.condition,
            show(self.base),
            show(self.change),
            show(growth)
        )?;
        if self.base != 0.0 {
            write!(f, ", {:+.1}%", (self.change / self.base - 1.0) * 100.0)?;
        }
        if let Some(r) = self.repriced_s {
            write!(
                f,
                "; {} of it at sites whose allocations and bytes did not change",
                show(r)
            )?;
        }
        if let Some(n) = self.sampling_noise {
            write!(
                f,
                "; sampling alone may move it by {} (two standard errors)",
                show(n)
            )?;
        }
        if let Some(e) = self.peak_error.filter(|_| self.under_peak_error()) {
            write!(f, "; the peaks are exact to within {} together", show(e))?;
        }
        write!(f, ")")
    }
}

/// The conditions that hold for `diff`. `cost` without predicted costs (no
/// calibration) is an error: it could never fail.
pub fn evaluate(conditions: &[Condition], diff: &Diff) -> Result<Vec<Failed>, Error> {
    Ok(outcomes(conditions, diff)?
        .into_iter()
        .filter_map(|(figures, held)| held.then_some(figures))
        .collect())
}

/// Every condition with its figures, and whether it holds (a breach), in the order
/// given: for a log that shows the gates passed too.
pub fn outcomes(conditions: &[Condition], diff: &Diff) -> Result<Vec<(Failed, bool)>, Error> {
    let mut all = Vec::new();
    for c in conditions {
        let (base, change) = match c.metric {
            Metric::Allocs => (diff.base.alloc_count as f64, diff.change.alloc_count as f64),
            Metric::Bytes => (
                diff.base.bytes_requested as f64,
                diff.change.bytes_requested as f64,
            ),
            Metric::Temporaries => match (diff.base.temporary_count, diff.change.temporary_count) {
                (Some(b), Some(c)) => (b as f64, c as f64),
                _ => {
                    return Err(Error::Condition {
                        text: c.text.clone(),
                        reason: "a report is in count mode, which does not count temporaries"
                            .into(),
                    });
                }
            },
            Metric::Peak => (
                diff.base.peak_live_bytes as f64,
                diff.change.peak_live_bytes as f64,
            ),
            Metric::Rss => match (diff.base.max_rss_bytes, diff.change.max_rss_bytes) {
                (0, _) | (_, 0) => {
                    return Err(Error::Condition {
                        text: c.text.clone(),
                        reason: "a report does not record its peak RSS (written by a \
                                 tracer before it did)"
                            .into(),
                    });
                }
                (b, c) => (b as f64, c as f64),
            },
            // With `--recycled`, the change pays for recycling what it no longer
            // allocates, as the diff's predicted change does.
            Metric::Cost => match (diff.base.cost_s, diff.change.cost_s) {
                (Some(b), Some(c)) => (b, c + diff.recycling_s.unwrap_or(0.0)),
                _ => {
                    return Err(Error::Condition {
                        text: c.text.clone(),
                        reason: "the diff has no predicted costs (no calibration)".into(),
                    });
                }
            },
        };
        let growth = change - base;
        let holds = match c.threshold {
            Threshold::Absolute(t) => growth > t,
            // From nothing, any growth is infinitely many percent.
            Threshold::Percent(p) if base == 0.0 => growth > 0.0 && p.is_finite(),
            // Multiplied out, not divided: 100 -> 107 is +7 %, not a rounding over.
            Threshold::Percent(p) => growth * 100.0 > p * base,
        };
        let figures = Failed {
            condition: c.text.clone(),
            metric: c.metric,
            threshold: c.threshold,
            base,
            change,
            delta: growth,
            sampling_noise: match c.metric {
                Metric::Cost => diff.predicted_change_noise_s,
                Metric::Temporaries => {
                    let side = |s: &crate::diff::Side| Sampled {
                        allocs: s.temporary_count.unwrap_or(0),
                        cost_weight_s2: None,
                        interval: s.sample_interval,
                    };
                    Noise::of_delta(side(&diff.base), side(&diff.change))
                        .count_bound()
                        .map(|n| n as f64)
                }
                _ => None,
            },
            // Under the line's last digit (1 us) it would read `-0.000 ms`.
            repriced_s: diff
                .repriced_s
                .filter(|r| c.metric == Metric::Cost && r.abs() >= 0.5e-6),
            peak_error: match c.metric {
                Metric::Peak => Some(
                    diff.base.peak_live_bytes_error_bytes as f64
                        + diff.change.peak_live_bytes_error_bytes as f64,
                )
                .filter(|e| *e > 0.0),
                _ => None,
            },
        };
        all.push((figures, holds));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_conditions() {
        let c = |t| parse_condition(t).map(|c| (c.metric, c.threshold));
        assert_eq!(
            c("allocs>+1%").unwrap(),
            (Metric::Allocs, Threshold::Percent(1.0))
        );
        assert_eq!(
            c("allocs > +0").unwrap(),
            (Metric::Allocs, Threshold::Absolute(0.0))
        );
        assert_eq!(
            c("bytes>+10MiB").unwrap(),
            (Metric::Bytes, Threshold::Absolute(10.0 * 1024.0 * 1024.0))
        );
        assert_eq!(
            c("peak>+0.5TiB").unwrap(),
            (Metric::Peak, Threshold::Absolute((1u64 << 39) as f64))
        );
        assert_eq!(
            c("cost>+5ms").unwrap(),
            (Metric::Cost, Threshold::Absolute(5e-3))
        );
        // No growth at all, like temporaries>+0, needs no unit.
        assert_eq!(
            c("cost>+0").unwrap(),
            (Metric::Cost, Threshold::Absolute(0.0))
        );
        assert_eq!(
            c("allocs>-1_000").unwrap(),
            (Metric::Allocs, Threshold::Absolute(-1000.0))
        );
        // A threshold that is no number says so, with no sign to suggest.
        let e = parse_condition("allocs >= +1%").unwrap_err().to_string();
        assert!(e.contains("write allocs>+1%"), "{e}");
        for bad in ["bytes>x", "allocs>"] {
            let e = parse_condition(bad).unwrap_err().to_string();
            assert!(e.contains("the threshold is a number"), "{bad}: {e}");
        }
        for bad in [
            "allocs",
            "walls>+1%",
            "allocs>+1ms",
            "cost>+5",
            "bytes>x",
            "cost>+inf s",
            "allocs>+1.5",
            "temporaries>+0.5",
        ] {
            let e = parse_condition(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--fail-if {bad}")), "{e}");
        }
        // A fraction of a per cent is fine.
        assert!(parse_condition("allocs>+1.5%").is_ok());
        // A bare number of bytes could be meant as per cent: a unit is asked for, but
        // for zero.
        for m in ["bytes", "peak", "rss"] {
            let e = parse_condition(&format!("{m}>+5")).unwrap_err().to_string();
            assert!(
                e.contains(&format!("write {m}>+5B for bytes, {m}>+5% for")),
                "{e}"
            );
            assert_eq!(
                parse_condition(&format!("{m}>+0")).unwrap().threshold,
                Threshold::Absolute(0.0)
            );
            assert_eq!(
                parse_condition(&format!("{m}>+5B")).unwrap().threshold,
                Threshold::Absolute(5.0)
            );
        }
        // Two conditions in one, and a > lost to the shell.
        let e = parse_condition("allocs>+1%,bytes>+1%")
            .unwrap_err()
            .to_string();
        assert!(e.contains("give it once for each"), "{e}");
        let e = parse_condition("allocs").unwrap_err().to_string();
        assert!(e.contains("quoted"), "{e}");
        // A bare number could be read as a cap on the change's own count.
        for (bare, hint) in [("allocs>100", "allocs>+100"), ("peak>1GiB", "peak>+1GiB")] {
            let e = parse_condition(bare).unwrap_err().to_string();
            assert!(e.contains(&format!("takes a sign: {hint} fails")), "{e}");
        }
    }

    fn side(alloc_count: u64, bytes_requested: u64, cost_s: Option<f64>) -> crate::diff::Side {
        crate::diff::Side {
            report: String::new(),
            alloc_count,
            bytes_requested,
            temporary_count: Some(7),
            peak_live_bytes: bytes_requested as i64 / 2,
            peak_live_bytes_error_bytes: 0,
            max_rss_bytes: bytes_requested * 2,
            cost_s,
            wall_s: None,
            sample_interval: 1,
        }
    }

    fn diff(base: crate::diff::Side, change: crate::diff::Side) -> Diff {
        Diff {
            phase: None,
            base,
            change,
            wall_source: String::new(),
            predicted_change_s: None,
            predicted_change_noise_s: None,
            recycling_s: None,
            repriced_s: None,
            repriced_sites: 0,
            measured_change_s: None,
            sites_compared: true,
            sites_matched: 0,
            sites_matched_by_path: 0,
            sites_matched_ignoring_lines: 0,
            sites_gone: 0,
            sites_new: 0,
            matched_alloc_share: 0.0,
            matched_alloc_share_by_path: 0.0,
            matched_alloc_share_ignoring_lines: 0.0,
            change_matched_alloc_share: 0.0,
            categories: Vec::new(),
            sites: Vec::new(),
        }
    }

    #[test]
    fn conditions_fail_on_growth_beyond_their_threshold_only() {
        let d = diff(side(1000, 4096, Some(0.010)), side(1011, 4096, Some(0.016)));
        let failing = |texts: &[&str]| -> Vec<String> {
            let cs: Vec<Condition> = texts.iter().map(|t| parse_condition(t).unwrap()).collect();
            evaluate(&cs, &d)
                .unwrap()
                .into_iter()
                .map(|f| f.to_string())
                .collect()
        };
        assert_eq!(
            failing(&[
                "allocs>+1%",
                "allocs>+2%",
                "bytes>+0",
                "temporaries>+0",
                "temporaries>-1",
                "cost>+5ms",
                "cost>+7ms"
            ]),
            [
                "allocs>+1%: 1000 -> 1011 (+11, +1.1%)",
                "temporaries>-1: 7 -> 7 (+0, +0.0%)",
                "cost>+5ms: 10.000 ms -> 16.000 ms (+6.000 ms, +60.0%)"
            ]
        );
        // A sampled report's cost gate says how far sampling alone moves it.
        let mut sampled = d.clone();
        sampled.predicted_change_noise_s = Some(0.008);
        let gate = [parse_condition("cost>+5ms").unwrap()];
        assert_eq!(
            evaluate(&gate, &sampled).unwrap()[0].to_string(),
            "cost>+5ms: 10.000 ms -> 16.000 ms (+6.000 ms, +60.0%; sampling alone may move \
             it by 8.000 ms (two standard errors))"
        );
        // ... more than the 5 ms the gate allows: it fails or passes by chance.
        assert!(evaluate(&gate, &sampled).unwrap()[0].under_noise());
        assert!(!evaluate(&gate, &d).unwrap()[0].under_noise());
        // Temporaries of sample:1000 reports are estimates: 7 on each side,
        // 2 * sqrt(1000 * 7 + 1000 * 7) = 237.
        let mut estimated = d.clone();
        estimated.base.sample_interval = 1000;
        estimated.change.sample_interval = 1000;
        let temporaries = [parse_condition("temporaries>+0").unwrap()];
        let (f, _) = &outcomes(&temporaries, &estimated).unwrap()[0];
        assert_eq!(f.sampling_noise, Some(237.0));
        assert!(f.under_noise());
        assert_eq!(
            outcomes(&temporaries, &d).unwrap()[0].0.sampling_noise,
            None
        );
        // The part of a cost growth at sites whose counts did not change is told.
        let mut repriced = d.clone();
        repriced.repriced_s = Some(0.002);
        assert_eq!(
            evaluate(&gate, &repriced).unwrap()[0].to_string(),
            "cost>+5ms: 10.000 ms -> 16.000 ms (+6.000 ms, +60.0%; 2.000 ms of it at sites \
             whose allocations and bytes did not change)"
        );
        // In JSON, what a bot needs: the metric, threshold and delta, counts whole.
        let allocs = [parse_condition("allocs>+1%").unwrap()];
        let json = serde_json::to_value(&evaluate(&allocs, &d).unwrap()[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "condition": "allocs>+1%",
                "metric": "allocs",
                "threshold": {"percent": 1.0},
                "base": 1000,
                "change": 1011,
                "delta": 11,
                "sampling_noise": null,
                "repriced_s": null,
                "peak_error": null
            })
        );
        // The peak: 2,048 -> 2,048 bytes here (half the requested bytes).
        assert_eq!(
            failing(&["peak>+0", "peak>-1B", "peak>+1KiB"]),
            ["peak>-1B: 2.0 KiB -> 2.0 KiB (+0 B, +0.0%)"]
        );
        // Each side's peak exact to within 256 KiB: a margin of 1 KiB is under their
        // 512 KiB together, one of 1 MiB is not.
        let mut bounded = d.clone();
        bounded.base.peak_live_bytes_error_bytes = 256 << 10;
        bounded.change.peak_live_bytes_error_bytes = 256 << 10;
        let peak = |text| {
            let gate = [parse_condition(text).unwrap()];
            outcomes(&gate, &bounded).unwrap()[0].0.clone()
        };
        let tight = peak("peak>+1KiB");
        assert_eq!(tight.peak_error, Some(524288.0));
        assert!(tight.under_peak_error() && !tight.under_noise());
        assert_eq!(
            tight.to_string(),
            "peak>+1KiB: 2.0 KiB -> 2.0 KiB (+0 B, +0.0%; the peaks are exact to within 512.0 KiB together)"
        );
        let wide = peak("peak>+1MiB");
        assert!(!wide.under_peak_error());
        assert_eq!(
            wide.to_string(),
            "peak>+1MiB: 2.0 KiB -> 2.0 KiB (+0 B, +0.0%)"
        );
        // Resident memory: 8 KiB on both sides (twice the requested bytes); unknown
        // (0, a report from before it was recorded) is an error, not a pass.
        assert_eq!(
            failing(&["rss>+0", "rss>-1B", "rss>+1%"]),
            ["rss>-1B: 8.0 KiB -> 8.0 KiB (+0 B, +0.0%)"]
        );
        let unknown = diff(side(1, 0, None), side(1, 4096, None));
        let err = evaluate(&[parse_condition("rss>+0").unwrap()], &unknown).unwrap_err();
        assert!(err.to_string().contains("peak RSS"), "{err}");
        assert!(parse_condition("rss>+5ms").is_err());
        // Exactly at the threshold holds nothing, whatever the floats: 100 -> 107 is
        // +7 % (107 / 100 - 1 is 0.07000000000000006).
        let at = diff(side(100, 0, None), side(107, 0, None));
        let holds = |text: &str| {
            !evaluate(&[parse_condition(text).unwrap()], &at)
                .unwrap()
                .is_empty()
        };
        assert!(!holds("allocs>+7%") && !holds("allocs>+7"));
        assert!(holds("allocs>+6.9%") && holds("allocs>+6"));
        // Priced with `--recycled`: the change also pays for recycling what it no
        // longer allocates (3 ms), as the diff's predicted change says.
        let recycled = Diff {
            recycling_s: Some(0.003),
            ..diff(side(1000, 0, Some(0.010)), side(500, 0, Some(0.005)))
        };
        let fails = |text: &str| {
            !evaluate(&[parse_condition(text).unwrap()], &recycled)
                .unwrap()
                .is_empty()
        };
        assert!(
            fails("cost>-2.5ms"),
            "10 ms -> 5 ms + 3 ms recycling is -2 ms"
        );
        assert!(!fails("cost>-1.5ms"));
        let unpriced = diff(side(1, 1, None), side(1, 1, None));
        assert!(evaluate(&[parse_condition("cost>+1ms").unwrap()], &unpriced).is_err());
        let from_zero = diff(side(0, 0, None), side(1, 0, None));
        assert_eq!(
            evaluate(&[parse_condition("allocs>+50%").unwrap()], &from_zero)
                .unwrap()
                .len(),
            1
        );
    }
}
