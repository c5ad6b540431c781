//! Running a [`Job`] under the tracer: its settings, the phases each iteration
//! passes through (`setup` builds the circuit, `synthesize` runs the prover, the
//! mirror prover's `enforce` inside it), and the report at the end (or, on SIGINT,
//! SIGTERM or SIGHUP, when the signal comes: see [`crate::signals`]).

use crate::job::{CountedCircuit, Job, Output, PorepInput, Prover, Variant, Work};
use crate::output::{self, IterationReport};
use crate::{allocator, circuits, lc_pool, mirror, porep, progress, prover, signals, turns};
use alloc_tracer::{Mode, Settings};
use anyhow::{Context, Result};
use filecoin_proofs_api::RegisteredSealProof;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// Runs `job` and prints its results on stdout.
pub fn run(job: Job) -> Result<()> {
    let Job {
        trace,
        output,
        prover,
        variants,
        // Fixed at start and confirmed by `main`; the output names it through
        // `allocator::name`.
        allocator: _,
        work,
        // Printed by `main`.
        notes: _,
    } = job;
    // Before anything starts a thread (progress bars, rayon, the prover's pools).
    signals::watch(trace.report.clone())?;
    // Rayon's global pool, started here and every worker waited for: each worker
    // allocates as it starts, on its own thread, whenever the scheduler runs it. Left
    // to the prover's first parallel call, those allocations landed in the first
    // synthesis's counts, or, on a loaded machine, after it.
    rayon::broadcast(|_| ());
    let settings = Settings {
        mode: trace.modes[0],
        depth: trace.depth,
        heap_interval: trace.heap_interval,
        lifetime_interval: trace.lifetime_interval,
        timeline_ms: trace.timeline_ms,
    };
    settings.apply();
    // With a report to write, a reader that goes away (`| head`) does not end the
    // run before its report: what is printed after is dropped.
    let mut out = KeepGoing {
        inner: std::io::stdout().lock(),
        on_broken_pipe: trace.report.is_some(),
        gone: false,
    };
    let mut runner = Runner {
        settings,
        modes: trace.modes,
        output,
        prover,
        variants,
        out: &mut out,
    };
    match work {
        Work::Seal {
            proof,
            sector_size,
            out,
            seed,
        } => {
            let c1 = seal(proof, sector_size, &out, seed)?;
            output::print_sealed(runner.out, &c1, output)?;
        }
        Work::Sha256 {
            blocks,
            seed,
            iterations,
        } => runner.iterations(
            &format!("sha256 --blocks {blocks}"),
            iterations,
            Witness::Real,
            |round, variant| {
                let seed = seed.wrapping_add(round);
                let chain = circuits::Sha256Chain::random(
                    blocks as usize,
                    seed,
                    variant == Variant::InplaceLc,
                );
                Ok((chain, Some(seed)))
            },
        )?,
        Work::Poseidon {
            hashes,
            arity,
            seed,
            iterations,
        } => runner.iterations(
            &format!("poseidon --hashes {hashes} --arity {arity}"),
            iterations,
            Witness::Real,
            |round, _| {
                let seed = seed.wrapping_add(round);
                let chain = circuits::PoseidonChain::new(hashes as usize, arity, seed);
                Ok((chain, Some(seed)))
            },
        )?,
        Work::Porep { input, iterations } => runner.porep(input, iterations)?,
    }
    if let Some(dir) = &trace.report {
        let finishing = signals::finishing();
        let start = Instant::now();
        let mut summary = alloc_tracer::write_report(dir)
            .with_context(|| format!("writing the report to {}", dir.display()))?;
        let seconds = start.elapsed().as_secs_f64();
        summary.top.truncate(trace.top);
        // Still held: a signal now waits for the whole summary before it ends the
        // process (it cut the summary off mid-line).
        output::print_summary(runner.out, &summary, seconds, output)?;
        runner.out.flush()?;
        drop(finishing);
    }
    Ok(())
}

/// The work proper begins: its input was read and checked (a C1 output, its
/// partition, a seal's folder), so a failure from here on ends a run worth its
/// `ALLOC_TRACE_REPORT` report, which `main` held back until now.
fn work_starts() {
    alloc_tracer::hold_exit_report(false);
}

/// Seals a sector (in the `seal` phase), with its steps on the progress line, and
/// returns the path of its C1 output.
fn seal(
    proof: RegisteredSealProof,
    sector_size: u64,
    out: &Path,
    seed: u64,
) -> Result<std::path::PathBuf> {
    let start = Instant::now();
    let _seal = alloc_tracer::phase("seal");
    let progress = progress::Progress::new("seal", None, false);
    porep::seal_sector(proof, sector_size, out, seed, &mut |step| {
        // Told once its folder and parent cache were checked.
        work_starts();
        // When the step began, not how long it took (a line read as the latter
        // gave each step its predecessor's time).
        progress.step(format!(
            "seal {proof:?}: {step}, from {:.1} s",
            start.elapsed().as_secs_f64()
        ))
    })
}

/// Where an iteration's witness comes from, as the output names it.
#[derive(Clone, Copy)]
enum Witness {
    /// The circuit's own values (a C1 output, a random message or preimages).
    Real,
    /// Synthetic vanilla proofs.
    Synthetic,
    /// None: the mirror prover stands in random values from this seed (plus the
    /// round, so that each round differs).
    Blank { seed: u64 },
}

impl Witness {
    fn name(self) -> &'static str {
        match self {
            Witness::Real => "real",
            Witness::Synthetic => "synthetic",
            Witness::Blank { .. } => "blank",
        }
    }
}

/// Runs iterations of one circuit and prints each.
struct Runner<'o> {
    /// The tracer's settings in force at the start (those of `modes[0]`).
    settings: Settings,
    /// One mode, or several taking turns by iteration (see `turn_of`).
    modes: Vec<Mode>,
    output: Output,
    prover: Prover,
    /// One, or several taking turns by iteration (see `turn_of`).
    variants: Vec<Variant>,
    out: &'o mut dyn Write,
}

impl Runner<'_> {
    /// One PoRep partition, from whichever input the command line gave.
    fn porep(&mut self, input: PorepInput, iterations: u64) -> Result<()> {
        match input {
            PorepInput::CountOnly { proof, circuit } => self.count_rows(proof, circuit),
            PorepInput::Blank { proof, seed } => {
                let label = format!("porep {proof:?} blank partition");
                porep::with_tree_shape!(proof.sector_size(), Tree => {
                    // The mirror prover's made-up values come from the seed plus the
                    // round (`Witness::Blank`).
                    self.iterations(&label, iterations, Witness::Blank { seed }, |round, _| {
                        Ok((porep::blank_circuit::<Tree>(proof)?, Some(seed.wrapping_add(round))))
                    })
                })
            }
            PorepInput::Synthetic { proof, seed } => {
                let label = format!("porep {proof:?} synthetic partition");
                porep::with_tree_shape!(proof.sector_size(), Tree => {
                    self.iterations(&label, iterations, Witness::Synthetic, |_, _| {
                        Ok((porep::synthetic_circuit::<Tree>(proof, seed)?, Some(seed)))
                    })
                })
            }
            PorepInput::C1 { path, partition } => {
                let c1 = {
                    let _setup = alloc_tracer::phase("setup");
                    porep::read_c1(&path)?
                };
                let n = porep::partitions(&c1);
                if partition >= n {
                    anyhow::bail!(
                        "partition {partition} out of range: {} has {n} partition(s)",
                        path.display()
                    );
                }
                let label = format!("porep {:?} partition {partition}", c1.registered_proof);
                porep::with_tree_shape!(c1.registered_proof.sector_size(), Tree => {
                    self.iterations(&label, iterations, Witness::Real, |_, _| {
                        let circuit = porep::partition_circuit::<Tree>(&c1, partition)
                            .with_context(|| path.display().to_string())?;
                        Ok((circuit, None))
                    })
                })
            }
        }
    }

    /// Counts the rows, aux and inputs of a partition without synthesizing a witness.
    fn count_rows(&mut self, proof: RegisteredSealProof, circuit: CountedCircuit) -> Result<()> {
        work_starts();
        let start = Instant::now();
        let progress = progress::Progress::new("counting rows", None, true);
        let shape = porep::with_tree_shape!(proof.sector_size(), Tree => {
            match circuit {
                CountedCircuit::Synthetic { seed } => {
                    circuits::shape(porep::synthetic_circuit::<Tree>(proof, seed)?)?
                }
                CountedCircuit::Blank => circuits::shape(porep::blank_circuit::<Tree>(proof)?)?,
            }
        });
        drop(progress);
        let (kind, witness) = match circuit {
            CountedCircuit::Synthetic { .. } => ("synthetic", "synthetic"),
            CountedCircuit::Blank => ("blank", "none"),
        };
        IterationReport {
            circuit: format!("porep {proof:?} {kind} partition (count only)"),
            iteration: 0,
            prover: "count-only",
            variant: self.variants[0].name(),
            witness,
            rows: shape.rows,
            aux: shape.aux,
            inputs: shape.inputs,
            synth_seconds: start.elapsed().as_secs_f64(),
            trace: self.modes[0].name(),
            allocator: allocator::name(),
            allocs: None,
            reallocs: None,
            temporaries: None,
            seed: None,
            peak_live_bytes: None,
            enforce_allocs: None,
            enforce_allocs_per_row: None,
            abc_digest: None,
            substituted_values: None,
        }
        .print(self.out, self.output)
    }

    /// The variant and mode of `iteration`, and its round. With one of each every
    /// iteration is a round; with several variants (or several modes: never both),
    /// each round runs each once, in the given order in even rounds and reversed in
    /// odd ones, so that a steady drift of the machine's speed weighs on each alike.
    fn turn_of(&self, iteration: u64) -> (Variant, Mode, u64) {
        let n = self.variants.len().max(self.modes.len());
        let (round, turn) = (iteration / n as u64, (iteration % n as u64) as usize);
        let turn = if round % 2 == 0 { turn } else { n - 1 - turn };
        let pick = |len: usize| if len == 1 { 0 } else { turn };
        (
            self.variants[pick(self.variants.len())],
            self.modes[pick(self.modes.len())],
            round,
        )
    }

    /// `make(round, variant)` builds the circuit of an iteration (in the `setup`
    /// phase; see `turn_of`); the chosen prover then synthesizes it (in the
    /// `synthesize` phase).
    fn iterations<C: bellperson::Circuit<blstrs::Scalar> + Send>(
        &mut self,
        label: &str,
        iterations: u64,
        witness: Witness,
        mut make: impl FnMut(u64, Variant) -> Result<(C, Option<u64>)>,
    ) -> Result<()> {
        let progress = progress::Progress::new("synthesis", Some(iterations), true);
        let mut rows_synthesized = 0;
        let mut times = turns::TurnTimes::default();
        for iteration in 0..iterations {
            let (variant, mode, round) = self.turn_of(iteration);
            if self.modes.len() > 1 {
                // Each mode with the settings given, and its own defaults for the
                // others (heap sampling), as a run of it alone would have them.
                Settings {
                    mode,
                    ..self.settings
                }
                .apply();
            }
            let (circuit, shape, seed) = {
                let _setup = alloc_tracer::phase("setup");
                // Counting publishes the rows it has counted so far.
                progress::ROWS_ARE_SIZE.store(false, std::sync::atomic::Ordering::Relaxed);
                // The stock prover keeps the shape to itself: count it on a circuit
                // of its own, before the one that is synthesized, made and freed
                // untraced (a block made traced and freed untraced would stay live
                // in the report for good).
                let shape = match self.prover {
                    Prover::Reference => Some(alloc_tracer::untraced(|| {
                        make(round, variant).and_then(|(circuit, _)| circuits::shape(circuit))
                    })?),
                    Prover::Mirror => None,
                };
                let (circuit, seed) = make(round, variant)?;
                (circuit, shape, seed)
            };
            // The first circuit made: its input (a C1 output's partition) checked.
            work_starts();
            // The mirror prover publishes its rows as it synthesizes, from 0; the stock
            // prover publishes none, so the progress line shows the size its shape
            // counted, exact (counting published only multiples of 4096).
            let size = shape.as_ref().map_or(0, |s| s.rows as u64);
            progress::ROWS.store(size, std::sync::atomic::Ordering::Relaxed);
            progress::ROWS_ARE_SIZE.store(shape.is_some(), std::sync::atomic::Ordering::Relaxed);
            let before = alloc_tracer::counts();
            let start = Instant::now();
            let (shape, digest, substituted) = {
                let _synth = alloc_tracer::phase("synthesize");
                match shape {
                    Some(shape) => {
                        prover::synthesize_reference(vec![circuit])?;
                        (shape, None, None)
                    }
                    None => {
                        let missing = match witness {
                            Witness::Blank { seed } => {
                                mirror::Missing::random(seed.wrapping_add(round))
                            }
                            Witness::Real | Witness::Synthetic => mirror::Missing::Fail,
                        };
                        let pool = match variant {
                            Variant::PooledEnforce => {
                                Some(lc_pool::LcPool::new().map_err(|e| {
                                    anyhow::anyhow!("--variant pooled-enforce: {e}")
                                })?)
                            }
                            _ => None,
                        };
                        let o = mirror::synthesize(circuit, missing, mode != Mode::Off, pool)?;
                        let shape = circuits::Shape {
                            rows: o.rows,
                            aux: o.aux,
                            inputs: o.inputs,
                        };
                        let substituted =
                            matches!(witness, Witness::Blank { .. }).then_some(o.substituted);
                        (shape, Some(o.abc_digest), substituted)
                    }
                }
            };
            let synth_seconds = start.elapsed().as_secs_f64();
            let after = alloc_tracer::counts();
            if self.variants.len() > 1 {
                times.record(variant.name(), synth_seconds);
            } else if self.modes.len() > 1 {
                times.record(&mode.name(), synth_seconds);
            }
            let traced = mode != Mode::Off;
            let enforce = match (traced, self.prover) {
                (true, Prover::Mirror) => enforce_allocs(&before, &after),
                _ => None,
            };
            let report = IterationReport {
                circuit: label.to_owned(),
                iteration,
                prover: self.prover.name(),
                variant: variant.name(),
                witness: witness.name(),
                rows: shape.rows,
                aux: shape.aux,
                inputs: shape.inputs,
                synth_seconds,
                trace: mode.name(),
                allocator: allocator::name(),
                allocs: traced.then(|| after.total(|p| p.allocs) - before.total(|p| p.allocs)),
                reallocs: traced
                    .then(|| after.total(|p| p.reallocs) - before.total(|p| p.reallocs)),
                // Exact in `sites` mode; counted among sampled blocks in `sample:N`,
                // each for the blocks it stands for (an estimate); not counted in
                // `count` mode.
                temporaries: matches!(mode, Mode::Sites | Mode::Sample(_))
                    .then(|| after.total(|p| p.temporaries) - before.total(|p| p.temporaries)),
                seed,
                // Not where `off` takes turns: frees in its turns go unrecorded, so the
                // live bytes, and their peak, only rise.
                peak_live_bytes: (traced && !self.modes.contains(&Mode::Off))
                    .then_some(after.peak_live_bytes),
                enforce_allocs: enforce,
                enforce_allocs_per_row: enforce
                    .filter(|_| shape.rows > 0)
                    .map(|e| e as f64 / shape.rows as f64),
                abc_digest: digest,
                substituted_values: substituted,
            };
            // What the report's figures are per: the rows synthesized in the
            // `synthesize` phase, over every iteration so far.
            rows_synthesized += shape.rows;
            alloc_tracer::label("circuit", label);
            alloc_tracer::label("iterations", iteration + 1);
            alloc_tracer::label("rows", rows_synthesized);
            // Which prover and patch made the run, so that a budget's `[labels]` can
            // hold to the reference prover (the mirror's `enforce` phase splits the
            // counts another way).
            alloc_tracer::label("prover", self.prover.name());
            let variants: Vec<&str> = self.variants.iter().map(|v| v.name()).collect();
            alloc_tracer::label("variant", variants.join(","));
            progress.suspend(|| report.print(self.out, self.output))?;
            progress.inc();
        }
        // On standard error, so that `--json` output stays one record a line.
        if let Some(summary) = times.summary() {
            progress.suspend(|| eprint!("{summary}"));
        }
        Ok(())
    }
}

/// Standard output that, once its reader is gone (a broken pipe) and
/// `on_broken_pipe` says so, drops whatever is written after, so that the run goes
/// on; otherwise the broken pipe is the writer's error, which ends the run.
struct KeepGoing<W: Write> {
    inner: W,
    on_broken_pipe: bool,
    gone: bool,
}

impl<W: Write> KeepGoing<W> {
    fn outcome<T>(&mut self, r: std::io::Result<T>, dropped: T) -> std::io::Result<T> {
        match r {
            Err(e) if self.on_broken_pipe && e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.gone = true;
                Ok(dropped)
            }
            r => r,
        }
    }
}

impl<W: Write> Write for KeepGoing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.gone {
            return Ok(buf.len());
        }
        let r = self.inner.write(buf);
        self.outcome(r, buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.gone {
            return Ok(());
        }
        let r = self.inner.flush();
        self.outcome(r, ())
    }
}

/// Allocations made in the `enforce` phase between two snapshots.
fn enforce_allocs(before: &alloc_tracer::Counts, after: &alloc_tracer::Counts) -> Option<u64> {
    let id = alloc_tracer::phases()
        .iter()
        .position(|p| p.name == "enforce")?;
    Some(after.phases.get(id)?.allocs - before.phases.get(id)?.allocs)
}

/// Fails early, with a one-line error, when the job's report could not be written
/// later ([`check_writable`]) or would overlap the sector a seal writes
/// ([`check_apart`]): before any note, so that the error is the one line said.
pub fn check_report(job: &Job) -> Result<()> {
    if let Some(dir) = &job.trace.report {
        check_writable(dir)?;
        if let Work::Seal { out, .. } = &job.work {
            check_apart(dir, out)?;
        }
    }
    Ok(())
}

/// Refuses a report folder that holds the sealed sector's folder or lies inside it:
/// the report would be refused after the seal (a report folder holds nothing else),
/// or the seal's folder would hold the report.
fn check_apart(report: &Path, out: &Path) -> Result<()> {
    let whole = |p: &Path| resolved(&alloc_tracer::expand_path(p));
    let (report, out) = (whole(report), whole(out));
    if out.starts_with(&report) || report.starts_with(&out) {
        anyhow::bail!(
            "--report {} and --out {} overlap: give the report a folder of its own",
            report.display(),
            out.display()
        );
    }
    Ok(())
}

/// `path` as the file system finds it: its longest existing ancestor with links and
/// `..` resolved (`canonicalize`), then the rest, whose `..` (which can follow a
/// folder not made yet) step back a level. (`std::path::absolute` leaves `a/../b`
/// and links as written, so two names of one folder would read apart.)
fn resolved(path: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let whole = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let parts: Vec<Component> = whole.components().collect();
    for known in (1..=parts.len()).rev() {
        let prefix: std::path::PathBuf = parts[..known].iter().collect();
        if let Ok(mut found) = prefix.canonicalize() {
            for part in &parts[known..] {
                match part {
                    Component::ParentDir => {
                        found.pop();
                    }
                    Component::CurDir => {}
                    other => found.push(other),
                }
            }
            return found;
        }
    }
    whole
}

/// Fails early, with a one-line error, when the report could not be written later:
/// the nearest folder above it that exists is not one or cannot be written (the
/// tracer makes the folders below it as it writes; none are made here, so that a run
/// refused later leaves nothing behind), or the folder is something the tracer would
/// refuse to replace (a file, or a folder holding more than a report). `%p` and `%t`
/// are expanded first, as the tracer expands them.
fn check_writable(dir: &Path) -> Result<()> {
    let dir = &alloc_tracer::expand_path(dir);
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let mut existing = Path::new(".");
    for a in parent.ancestors() {
        let a = if a.as_os_str().is_empty() {
            Path::new(".")
        } else {
            a
        };
        match a.symlink_metadata() {
            Ok(_) => {
                existing = a;
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // Not searchable, say: the report could not be made below it.
            Err(e) => anyhow::bail!("report directory {}: {}: {e}", dir.display(), a.display()),
        }
    }
    if !existing.is_dir() {
        anyhow::bail!(
            "report directory {}: cannot create its parent ({} is not a folder)",
            dir.display(),
            existing.display()
        );
    }
    let probe = existing.join(format!(".synth-driver-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("report directory {}: not writable", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    alloc_tracer::check_report_dir(dir).map_err(|e| anyhow::anyhow!("report directory {e}"))?;
    // Allowed, and documented, but not silently.
    if dir.join("manifest.json").is_file() {
        eprintln!(
            "synth-driver: {} holds an earlier report; this run's replaces it",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turns(variants: &[Variant], modes: &[Mode], iterations: u64) -> Vec<(Variant, Mode, u64)> {
        let mut sink = std::io::sink();
        let runner = Runner {
            settings: Settings::default(),
            modes: modes.to_vec(),
            output: Output::Text,
            prover: Prover::Mirror,
            variants: variants.to_vec(),
            out: &mut sink,
        };
        (0..iterations).map(|i| runner.turn_of(i)).collect()
    }

    #[test]
    fn variants_take_turns_forth_and_back() {
        use Variant::{Baseline as A, InplaceLc as C, PooledEnforce as B};
        let off = Mode::Off;
        assert_eq!(
            turns(&[A, B, C], &[off], 7),
            [
                (A, off, 0),
                (B, off, 0),
                (C, off, 0),
                (C, off, 1),
                (B, off, 1),
                (A, off, 1),
                (A, off, 2)
            ]
        );
        assert_eq!(turns(&[B], &[off], 2), [(B, off, 0), (B, off, 1)]);
    }

    #[test]
    fn modes_take_turns_forth_and_back() {
        use Mode::{Count, Off, Sample};
        let a = Variant::Baseline;
        assert_eq!(
            turns(&[a], &[Off, Count, Sample(1000)], 5),
            [
                (a, Off, 0),
                (a, Count, 0),
                (a, Sample(1000), 0),
                (a, Sample(1000), 1),
                (a, Count, 1),
            ]
        );
    }
}
