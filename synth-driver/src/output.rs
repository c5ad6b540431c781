//! What the driver prints: one line of text or one JSON object per iteration, and
//! the tracer's summary after the report is written.

use crate::job::Output;
use anyhow::Result;
use std::io::Write;

/// One iteration's result, as printed (the JSON field names are part of the CLI:
/// scripts and tests read them).
#[derive(serde::Serialize)]
pub struct IterationReport {
    /// What was synthesized, e.g. `sha256 --blocks 4`.
    pub circuit: String,
    /// Iteration number, from 0.
    pub iteration: u64,
    /// `reference`, `mirror`, or `count-only` when nothing was synthesized.
    pub prover: &'static str,
    /// The patch variant of this iteration.
    pub variant: &'static str,
    /// Where the witness came from: `real`, `synthetic`, `blank` or `none`.
    pub witness: &'static str,
    /// The seed of this iteration's made-up data, where it has any: sha256 and
    /// poseidon inputs and `--blank` values (`--seed` plus the round), `--synthetic`
    /// vanilla proofs (`--seed`). Absent for a real C1 partition, and for
    /// `--count-only`, which synthesizes nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Rows of the prover's a/b/c vectors.
    pub rows: usize,
    /// Private variables.
    pub aux: usize,
    /// Public inputs, ONE included.
    pub inputs: usize,
    /// Wall time of synthesis (of counting, for `count-only`).
    pub synth_seconds: f64,
    /// The tracer's mode.
    pub trace: String,
    /// The global allocator under the tracer (`jemalloc`, `system`, `mimalloc`), or
    /// in the baseline builds without the tracer the one that served the run.
    pub allocator: &'static str,
    /// SHA-256 of the a/b/c evaluations (mirror prover).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub abc_digest: Option<String>,
    /// Values the mirror prover made up because the circuit had none (blank runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub substituted_values: Option<u64>,
    /// Allocations during synthesis (traced runs), reallocs not included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocs: Option<u64>,
    /// Reallocs during synthesis (traced runs): with `allocs`, what the analyzer's
    /// `alloc+realloc` columns count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reallocs: Option<u64>,
    /// Temporaries during synthesis (`sites` runs; in `sample:N` runs an estimate,
    /// those among the sampled blocks times N, which the text line marks `~`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporaries: Option<u64>,
    /// The run's highest live bytes so far, setup and earlier iterations included
    /// (traced runs; exact to within 256 KiB a thread recording at once, the
    /// report's `peak_live_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_live_bytes: Option<i64>,
    /// Allocations inside enforce-closure evaluation (traced mirror runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce_allocs: Option<u64>,
    /// Of those, per constraint (enforce_allocs / rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce_allocs_per_row: Option<f64>,
}

impl IterationReport {
    /// Prints the iteration as one line of `output`'s kind.
    pub fn print(&self, out: &mut dyn Write, output: Output) -> Result<()> {
        match output {
            Output::Json => {
                serde_json::to_writer(&mut *out, self)?;
                writeln!(out)?;
            }
            Output::Text => self.print_text(out)?,
        }
        Ok(())
    }

    fn print_text(&self, out: &mut dyn Write) -> Result<()> {
        let r = self;
        // `--count-only` synthesizes nothing: its time is of counting the rows.
        let work = if r.prover == "count-only" {
            "counting"
        } else {
            "synthesis"
        };
        write!(
            out,
            "{} [{}] iteration {}: {} rows, {} aux, {} inputs, {work} {:.3} s (variant {}, trace {}, allocator {}",
            r.circuit,
            r.prover,
            r.iteration,
            r.rows,
            r.aux,
            r.inputs,
            r.synth_seconds,
            r.variant,
            r.trace,
            r.allocator
        )?;
        if let Some(seed) = r.seed {
            write!(out, ", seed {seed}")?;
        }
        // A witness not the circuit's own is said, as JSON says it.
        if r.witness != "real" {
            write!(out, ", witness: {}", r.witness)?;
        }
        if let Some(n) = r.substituted_values {
            write!(out, ", {n} values substituted")?;
        }
        write!(out, ")")?;
        if let Some(a) = r.allocs {
            // The synthesis' own, apart from the tracer's summary of the whole run.
            write!(out, "; in synthesis: {a} allocations")?;
        }
        if let Some(a) = r.reallocs {
            write!(out, ", {a} reallocs")?;
        }
        if let Some(t) = r.temporaries {
            // Counted among the sampled blocks only, times N.
            let about = if r.trace.starts_with("sample:") {
                "~"
            } else {
                ""
            };
            write!(out, ", {about}{t} temporaries")?;
        }
        if let Some(e) = r.enforce_allocs {
            write!(out, ", {e} in enforce")?;
        }
        if let Some(e) = r.enforce_allocs_per_row {
            write!(out, " ({e:.2} per constraint)")?;
        }
        if let Some(p) = r.peak_live_bytes {
            write!(
                out,
                ", peak {:.1} MiB live so far",
                p as f64 / (1u64 << 20) as f64
            )?;
        }
        if let Some(d) = &r.abc_digest {
            write!(out, ", abc digest {d}")?;
        }
        writeln!(out)?;
        Ok(())
    }
}

/// Prints the tracer's summary: after the iterations on stdout, or on stderr with
/// JSON output, so that stdout holds nothing but JSON lines.
pub fn print_summary(
    out: &mut dyn Write,
    summary: &alloc_tracer::ReportSummary,
    seconds: f64,
    output: Output,
) -> Result<()> {
    match output {
        Output::Json => eprintln!("{summary}  written in {seconds:.3} s"),
        Output::Text => writeln!(out, "{summary}  written in {seconds:.3} s")?,
    }
    Ok(())
}

/// Prints the path of a sealed sector's C1 output, the one thing `seal` prints: as
/// is, or with `--json` as an object (`{"c1": PATH}`).
pub fn print_sealed(out: &mut dyn Write, c1: &std::path::Path, output: Output) -> Result<()> {
    match output {
        Output::Json => {
            serde_json::to_writer(&mut *out, &serde_json::json!({ "c1": c1 }))?;
            writeln!(out)?;
        }
        Output::Text => writeln!(out, "{}", c1.display())?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> IterationReport {
        IterationReport {
            circuit: "sha256 --blocks 2".into(),
            iteration: 1,
            prover: "mirror",
            variant: "baseline",
            witness: "real",
            rows: 52_000,
            aux: 51_000,
            inputs: 2,
            synth_seconds: 0.25,
            trace: "count".into(),
            allocator: "system",
            abc_digest: Some("ab".repeat(32)),
            substituted_values: None,
            allocs: Some(900_000),
            reallocs: Some(2_000),
            temporaries: None,
            seed: None,
            peak_live_bytes: Some(3 << 19),
            enforce_allocs: Some(104_000),
            enforce_allocs_per_row: Some(2.0),
        }
    }

    fn printed(r: &IterationReport, output: Output) -> String {
        let mut out = vec![];
        r.print(&mut out, output).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn text_line() {
        let want = format!(
            "sha256 --blocks 2 [mirror] iteration 1: 52000 rows, 51000 aux, 2 inputs, \
             synthesis 0.250 s (variant baseline, trace count, allocator system); \
             in synthesis: 900000 allocations, 2000 reallocs, 104000 in enforce (2.00 per constraint), peak 1.5 MiB \
             live so far, abc digest {}\n",
            "ab".repeat(32)
        );
        assert_eq!(printed(&report(), Output::Text), want);
        // `--count-only` synthesizes nothing: its time is of counting.
        let counted = IterationReport {
            prover: "count-only",
            ..report()
        };
        assert!(
            printed(&counted, Output::Text).contains("2 inputs, counting 0.250 s (variant"),
            "{}",
            printed(&counted, Output::Text)
        );
        let blank = IterationReport {
            witness: "blank",
            seed: Some(3),
            substituted_values: Some(7),
            ..report()
        };
        assert!(
            printed(&blank, Output::Text)
                .contains("(variant baseline, trace count, allocator system, seed 3, witness: blank, 7 values substituted)"),
            "{}",
            printed(&blank, Output::Text)
        );
        // Temporaries estimated from sampled blocks are marked as such.
        let sampled = IterationReport {
            trace: "sample:1000".into(),
            temporaries: Some(6_200_000),
            ..report()
        };
        assert!(printed(&sampled, Output::Text).contains(", ~6200000 temporaries"));
        let exact = IterationReport {
            trace: "sites".into(),
            temporaries: Some(6_171_128),
            ..report()
        };
        assert!(printed(&exact, Output::Text).contains(", 6171128 temporaries"));
    }

    #[test]
    fn json_line_leaves_out_what_was_not_measured() {
        let want = format!(
            "{{\"circuit\":\"sha256 --blocks 2\",\"iteration\":1,\"prover\":\"mirror\",\
             \"variant\":\"baseline\",\"witness\":\"real\",\"rows\":52000,\"aux\":51000,\
             \"inputs\":2,\"synth_seconds\":0.25,\"trace\":\"count\",\"allocator\":\"system\",\"abc_digest\":\"{}\",\
             \"allocs\":900000,\"reallocs\":2000,\"peak_live_bytes\":1572864,\"enforce_allocs\":104000,\
             \"enforce_allocs_per_row\":2.0}}\n",
            "ab".repeat(32)
        );
        assert_eq!(printed(&report(), Output::Json), want);
        // A seed, where the data has one, after the witness.
        let seeded = IterationReport {
            seed: Some(7),
            ..report()
        };
        assert!(
            printed(&seeded, Output::Json).contains("\"witness\":\"real\",\"seed\":7,\"rows\""),
            "{}",
            printed(&seeded, Output::Json)
        );
    }
}
