//! What variants or modes taking turns come to: each one's median synthesis time
//! and, against the first, the median of the per-round ratios, with the middle half
//! of those ratios. Rounds lie a second or less apart, so a ratio within a round
//! leaves out the machine's drift over minutes; the median of the ratios, not the
//! ratio of the medians, is the figure the benchmarks report.

use std::fmt::Write as _;

/// Synthesis times by turn (a variant's or a mode's name) and round.
#[derive(Debug, Default)]
pub struct TurnTimes {
    /// The turns' names, in the order given.
    names: Vec<String>,
    /// `seconds[turn][round]`.
    seconds: Vec<Vec<f64>>,
}

impl TurnTimes {
    /// Records turn `name`'s synthesis time in its next round.
    pub fn record(&mut self, name: &str, seconds: f64) {
        let i = match self.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.names.push(name.to_owned());
                self.seconds.push(Vec::new());
                self.names.len() - 1
            }
        };
        self.seconds[i].push(seconds);
    }

    /// The summary, or `None` with one turn, or fewer than two rounds.
    pub fn summary(&self) -> Option<String> {
        let rounds = self.seconds.iter().map(Vec::len).min()?;
        if self.names.len() < 2 || rounds < 2 {
            return None;
        }
        let width = self.names.iter().map(String::len).max().unwrap_or(0);
        let mut out = format!(
            "synth-driver: {rounds} rounds of turns; synthesis, the median of the rounds, and \
             against {}: the median of the per-round ratios [the middle half of them]\n",
            self.names[0]
        );
        for (name, times) in self.names.iter().zip(&self.seconds) {
            let mut own = times[..rounds].to_vec();
            let _ = write!(out, "  {name:<width$}  {:>9.3} s", median(&mut own));
            if name != &self.names[0] {
                let mut ratios: Vec<f64> = times[..rounds]
                    .iter()
                    .zip(&self.seconds[0][..rounds])
                    .map(|(t, base)| t / base)
                    .collect();
                let (low, high) = middle_half(&mut ratios);
                let _ = write!(out, "  {:.3}x [{low:.3}, {high:.3}]", median(&mut ratios));
            }
            out.push('\n');
        }
        Some(out)
    }
}

/// The median of `xs` (sorted in place; the mean of the middle two of an even count).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The first and third quartiles of `xs` (sorted in place), by the nearest rank.
fn middle_half(xs: &mut [f64]) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[((q * xs.len() as f64).ceil() as usize).saturating_sub(1)];
    (at(0.25), at(0.75))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_taken_within_rounds() {
        let mut t = TurnTimes::default();
        // The machine slows by half in round 2: each round's ratio stays 0.9.
        for (base, patch) in [(1.0, 0.9), (2.0, 1.8), (1.0, 0.9), (1.2, 1.08)] {
            t.record("baseline", base);
            t.record("pooled-enforce", patch);
        }
        let s = t.summary().unwrap();
        assert!(s.starts_with("synth-driver: 4 rounds of turns"), "{s}");
        assert!(s.contains("  baseline            1.100 s\n"), "{s}");
        assert!(
            s.contains("  pooled-enforce      0.990 s  0.900x [0.900, 0.900]\n"),
            "{s}"
        );
    }

    #[test]
    fn one_turn_or_one_round_has_no_summary() {
        let mut t = TurnTimes::default();
        t.record("sites", 1.0);
        t.record("sites", 1.0);
        assert!(t.summary().is_none());
        t.record("off", 1.0);
        assert!(t.summary().is_none(), "one round of off");
    }

    #[test]
    fn quartiles_by_nearest_rank() {
        let mut xs = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(middle_half(&mut xs), (1.0, 3.0));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
