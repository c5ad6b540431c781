//! `synth-driver`: runs real bellperson circuit synthesis under alloc-tracer, the way
//! the Groth16 prover does it, and prints the tracer's summary.
//!
//! Commands: offline sealing (`seal`), Filecoin PoRep partitions from a C1 output or
//! blank (`porep`), and scalable chains of the gadgets PoRep is made of (`sha256`,
//! `poseidon`). Provers: stock bellperson (`reference`) or the driver's replica of
//! its `ProvingAssignment` with introspection (`mirror`). Patch variants
//! (`--variant`) keep the constraint system and change allocations; see
//! docs/synth-driver-variants.md.

mod circuits;
mod inplace;
mod lc_pool;
mod mirror;
mod porep;
mod progress;
mod prover;

use alloc_tracer::{Mode, Settings, TracingAllocator};
use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Runs real bellperson synthesis under alloc-tracer.
#[derive(Parser, Debug)]
#[command(
    version,
    about,
    after_help = "EXAMPLES:\n  \
    synth-driver seal --sector-size 2KiB --out sectors/2k\n  \
    synth-driver --trace sites --report reports/porep porep --c1 sectors/2k/c1.json\n  \
    synth-driver --json sha256 --blocks 64 -i 3\n  \
    synth-driver --prover mirror --variant inplace-lc --trace count sha256 --blocks 64\n  \
    synth-driver --prover mirror --variant pooled-enforce porep --sector-size 2KiB --synthetic\n  \
    synth-driver --json porep --sector-size 32GiB --synthetic --count-only\n  \
    synth-driver poseidon --hashes 10000 --arity 8"
)]
struct Cli {
    #[command(flatten)]
    trace: TraceArgs,
    /// Print one JSON object per iteration instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// reference: stock bellperson (create_proof_batch, stopped right after
    /// synthesis). mirror: the driver's replica of bellperson's ProvingAssignment,
    /// which adds an `enforce` phase around enforce closures and a digest of a/b/c.
    #[arg(long, global = true, value_enum)]
    prover: Option<ProverKind>,
    /// Patch variant for A/B comparisons: same constraint system (same a/b/c digest
    /// under --prover mirror), different allocation behaviour. baseline: any command,
    /// either prover. pooled-enforce: --prover mirror only (sha256, poseidon,
    /// porep --c1, --blank or --synthetic). inplace-lc: sha256 only, either prover.
    /// Several, comma-separated, take turns iteration by iteration in one process
    /// (rounds A B C, then C B A, ...; every variant of a round on the same seed):
    /// an A/B timing that the machine's drift over seconds does not blur.
    #[arg(
        long,
        global = true,
        value_enum,
        value_delimiter = ',',
        default_value = "baseline"
    )]
    variant: Vec<Variant>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug)]
struct TraceArgs {
    /// What the tracer records: off (plain jemalloc, the baseline), count (totals,
    /// no temporaries), sites (every stack, temporaries exact) or sample:N (one
    /// stack in N; temporaries among those, times N).
    #[arg(long, default_value = "off", value_parser = parse_mode, global = true)]
    trace: Mode,
    /// Frames kept per call stack (1 to 30).
    #[arg(long, default_value_t = alloc_tracer::DEFAULT_DEPTH as u64, value_parser = clap::value_parser!(u64).range(1..=alloc_tracer::MAX_DEPTH as u64), global = true)]
    depth: u64,
    /// Write the tracer's report (parquet tables and manifest.json) to this directory.
    #[arg(long, global = true)]
    report: Option<PathBuf>,
    /// Sites listed in the printed summary.
    #[arg(long, default_value_t = 10, global = true)]
    top: usize,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Seals a sector of random data offline (piece, pre-commit 1 and 2, commit phase 1;
    /// no Groth parameters) and writes OUT/c1.json in Curio's format. The SDR parent
    /// cache goes to FIL_PROOFS_PARENT_CACHE (default /var/tmp/filecoin-parents).
    Seal {
        /// 2KiB or 8MiB (larger sizes work but take hours and hundreds of GiB).
        #[arg(long, value_parser = porep::parse_sector_size)]
        sector_size: (u64, filecoin_proofs_api::RegisteredSealProof),
        /// Directory for c1.json and the sector's files.
        #[arg(long)]
        out: PathBuf,
        /// Seed of the sector's data, ticket and challenge seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Synthesizes one partition of a Filecoin PoRep (StackedDrg) circuit from a C1
    /// output, as commit phase 2 does; or, with --sector-size, from synthetic vanilla
    /// proofs (--synthetic) or the blank circuit (--blank); --count-only counts the
    /// rows of a partition without any witness.
    Porep {
        /// Curio's c1.json, or the plain JSON of filecoin-proofs-api's
        /// SealCommitPhase1Output. Any sector size.
        #[arg(
            long,
            required_unless_present = "sector_size",
            conflicts_with = "sector_size"
        )]
        c1: Option<PathBuf>,
        /// Sector size of a partition with no C1 output (needs --count-only).
        #[arg(long, value_parser = porep::parse_sector_size)]
        sector_size: Option<(u64, filecoin_proofs_api::RegisteredSealProof)>,
        /// Count rows, aux and inputs of the blank circuit (all values missing; the
        /// same constraints), or with --synthetic of the synthetic one, without
        /// synthesizing a witness: works for 32 GiB on a small machine.
        #[arg(long, conflicts_with = "blank")]
        count_only: bool,
        /// Synthesize the blank circuit of --sector-size with the mirror prover,
        /// which substitutes a random value for every missing one: the constraints
        /// and enforce closures of a real partition, without the vanilla proofs'
        /// witness arithmetic (an approximation; the output says `witness: blank`).
        #[arg(long, requires = "sector_size")]
        blank: bool,
        /// Synthesize a partition of --sector-size from synthetic vanilla proofs:
        /// random values in proofs of exactly that size's shape, through the same
        /// circuit construction as a real C1 output (the real constraint system of
        /// any size, without sealing; the output says `witness: synthetic`).
        #[arg(long, requires = "sector_size", conflicts_with = "blank")]
        synthetic: bool,
        /// Seed of the substituted values (--blank) or synthetic proofs (--synthetic).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Partition to synthesize.
        #[arg(long, default_value_t = 0)]
        partition: usize,
        /// Iterations (each builds and synthesizes the circuit anew).
        #[arg(short = 'i', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        iterations: u64,
    },
    /// A chain of SHA-256 compressions over random bits (bellperson's sha256 gadget).
    Sha256 {
        /// Message blocks (one compression, about 26 k constraints, each).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        blocks: u64,
        /// Iterations (each synthesizes the circuit anew).
        #[arg(short = 'i', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        iterations: u64,
        /// Seed of the random message.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// A chain of Poseidon hashes (neptune's legacy circuit with filecoin-hashers'
    /// constants, as Filecoin's Merkle proofs use them).
    Poseidon {
        /// Hashes (about 500 constraints each at arity 8).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        hashes: u64,
        /// Inputs per hash: 2, 4, 8, 11, 16, 24 or 36.
        #[arg(long, default_value = "8", value_parser = parse_arity)]
        arity: usize,
        /// Iterations (each synthesizes the circuit anew).
        #[arg(short = 'i', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        iterations: u64,
        /// Seed of the random preimages.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

/// Patch variants (`--variant`). Each keeps the constraint system, so the mirror
/// prover's a/b/c digest equals the baseline's; they differ in allocations only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Variant {
    /// The unchanged circuits and provers.
    Baseline,
    /// The mirror prover recycles the LinearCombination buffers of every enforce
    /// (emptied and handed to the next enforce's closures) instead of freeing them.
    PooledEnforce,
    /// SHA-256 through the driver's own gadgets, which add terms to linear
    /// combinations in place instead of building Boolean::lc temporaries and
    /// cloning MultiEq's accumulators.
    InplaceLc,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::PooledEnforce => "pooled-enforce",
            Variant::InplaceLc => "inplace-lc",
        }
    }

    /// Refuses combinations the variant does not cover: `command` is the
    /// subcommand's name, `prover` the one in force.
    fn check(self, command: &str, prover: ProverKind) -> Result<()> {
        match (self, command, prover) {
            (Variant::Baseline, _, _) => Ok(()),
            (Variant::InplaceLc, "sha256", _) => Ok(()),
            (Variant::InplaceLc, _, _) => {
                anyhow::bail!("--variant inplace-lc exists for sha256 only, not {command}")
            }
            (Variant::PooledEnforce, "seal" | "porep --count-only", _) => {
                anyhow::bail!("--variant pooled-enforce does not apply to {command} (no synthesis)")
            }
            (Variant::PooledEnforce, _, ProverKind::Mirror) => Ok(()),
            (Variant::PooledEnforce, _, ProverKind::Reference) => {
                anyhow::bail!("--variant pooled-enforce needs --prover mirror")
            }
        }
    }
}

fn parse_arity(s: &str) -> Result<usize, String> {
    let arities = circuits::POSEIDON_ARITIES;
    s.parse()
        .ok()
        .filter(|a| arities.contains(a))
        .ok_or_else(|| format!("unsupported arity {s:?}; expected one of {arities:?}"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ProverKind {
    Reference,
    Mirror,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    Mode::parse(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("synth-driver: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// One iteration's result, as printed.
#[derive(serde::Serialize)]
struct IterationReport {
    circuit: String,
    iteration: u64,
    prover: &'static str,
    variant: &'static str,
    witness: &'static str,
    rows: usize,
    aux: usize,
    inputs: usize,
    synth_seconds: f64,
    trace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    abc_digest: Option<String>,
    /// Values the mirror prover made up because the circuit had none (blank runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    substituted_values: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    allocs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temporaries: Option<u64>,
    /// Allocations inside enforce-closure evaluation (traced mirror runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    enforce_allocs: Option<u64>,
    /// Of those, per constraint (enforce_allocs / rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    enforce_allocs_per_row: Option<f64>,
}

fn run(cli: Cli) -> Result<ExitCode> {
    if let Some(dir) = &cli.trace.report {
        check_writable(dir)?;
    }
    Settings {
        mode: cli.trace.trace,
        depth: cli.trace.depth as usize,
        ..Default::default()
    }
    .apply();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut run = Runner {
        trace: cli.trace.trace,
        json: cli.json,
        prover: cli.prover.unwrap_or(ProverKind::Reference),
        variants: cli.variant.clone(),
        synthetic: false,
        out: &mut out,
    };
    let command = match &cli.command {
        Command::Sha256 { .. } => "sha256",
        Command::Poseidon { .. } => "poseidon",
        Command::Seal { .. } => "seal",
        Command::Porep {
            count_only: true, ..
        } => "porep --count-only",
        Command::Porep { .. } => "porep",
    };
    let prover = match &cli.command {
        // --blank switches to the mirror prover unless told otherwise.
        Command::Porep { blank: true, .. } => cli.prover.unwrap_or(ProverKind::Mirror),
        _ => run.prover,
    };
    for v in &cli.variant {
        v.check(command, prover)?;
    }
    if cli.variant.len() > 1 && matches!(command, "seal" | "porep --count-only") {
        anyhow::bail!(
            "several --variant values take turns by iteration; {command} has no iterations"
        );
    }
    if cli.variant.len() > 1 && cli.trace.report.is_some() {
        anyhow::bail!(
            "several --variant values with --report would mix them in one report; trace one variant per run"
        );
    }
    match cli.command {
        Command::Sha256 {
            blocks,
            iterations,
            seed,
        } => run.iterations(
            &format!("sha256 --blocks {blocks}"),
            iterations,
            None,
            |round, variant| {
                Ok(circuits::Sha256Chain::random(
                    blocks as usize,
                    seed.wrapping_add(round),
                    variant == Variant::InplaceLc,
                ))
            },
        )?,
        Command::Poseidon {
            hashes,
            arity,
            iterations,
            seed,
        } => run.iterations(
            &format!("poseidon --hashes {hashes} --arity {arity}"),
            iterations,
            None,
            |round, _| {
                Ok(circuits::PoseidonChain::new(
                    hashes as usize,
                    arity,
                    seed.wrapping_add(round),
                ))
            },
        )?,
        Command::Seal {
            sector_size: (bytes, proof),
            out: dir,
            seed,
        } => {
            let start = Instant::now();
            let path = {
                let _setup = alloc_tracer::phase("seal");
                let progress = progress::Progress::new("seal", None, false);
                porep::seal_sector(proof, bytes, &dir, seed, &mut |step| {
                    progress.step(format!(
                        "seal {proof:?}: {step} ({:.1} s)",
                        start.elapsed().as_secs_f64()
                    ))
                })?
            };
            writeln!(run.out, "{}", path.display())?;
        }
        Command::Porep {
            sector_size: Some((_, proof)),
            count_only: true,
            synthetic,
            seed,
            ..
        } => {
            let start = Instant::now();
            let progress = progress::Progress::new("counting rows", None, true);
            let shape = porep::with_tree_shape!(proof.sector_size(), Tree => {
                if synthetic {
                    circuits::shape(porep::synthetic_circuit::<Tree>(proof, seed)?)?
                } else {
                    circuits::shape(porep::blank_circuit::<Tree>(proof)?)?
                }
            });
            drop(progress);
            let report = IterationReport {
                circuit: format!(
                    "porep {proof:?} {} partition (count only)",
                    if synthetic { "synthetic" } else { "blank" }
                ),
                iteration: 0,
                prover: "count-only",
                variant: run.variants[0].name(),
                witness: if synthetic { "synthetic" } else { "none" },
                rows: shape.rows,
                aux: shape.aux,
                inputs: shape.inputs,
                synth_seconds: start.elapsed().as_secs_f64(),
                trace: run.trace.name(),
                allocs: None,
                temporaries: None,
                enforce_allocs: None,
                enforce_allocs_per_row: None,
                abc_digest: None,
                substituted_values: None,
            };
            print_iteration(run.out, &report, run.json)?;
        }
        Command::Porep {
            sector_size: Some((_, proof)),
            blank: true,
            seed,
            iterations,
            ..
        } => {
            if cli.prover == Some(ProverKind::Reference) {
                anyhow::bail!(
                    "--blank needs --prover mirror: the stock prover stops at the first missing value"
                );
            }
            run.prover = ProverKind::Mirror;
            let label = format!("porep {proof:?} blank partition");
            let blank = Some(seed);
            porep::with_tree_shape!(proof.sector_size(), Tree => {
                run.iterations(&label, iterations, blank, |_, _| porep::blank_circuit::<Tree>(proof))?
            })
        }
        Command::Porep {
            sector_size: Some((_, proof)),
            synthetic: true,
            seed,
            iterations,
            ..
        } => {
            run.synthetic = true;
            let label = format!("porep {proof:?} synthetic partition");
            porep::with_tree_shape!(proof.sector_size(), Tree => {
                run.iterations(&label, iterations, None, |_, _| {
                    porep::synthetic_circuit::<Tree>(proof, seed)
                })?
            })
        }
        Command::Porep { c1: None, .. } => {
            anyhow::bail!(
                "porep needs --c1 FILE, or --sector-size SIZE with --count-only, --blank or --synthetic"
            )
        }
        Command::Porep {
            c1: Some(c1),
            count_only,
            partition,
            iterations,
            ..
        } => {
            if count_only {
                anyhow::bail!("--count-only goes with --sector-size, not --c1");
            }
            let c1_out = {
                let _setup = alloc_tracer::phase("setup");
                porep::read_c1(&c1)?
            };
            let n = porep::partitions(&c1_out);
            if partition >= n {
                anyhow::bail!(
                    "partition {partition} out of range: {} has {n} partition(s)",
                    c1.display()
                );
            }
            let label = format!("porep {:?} partition {partition}", c1_out.registered_proof);
            porep::with_tree_shape!(c1_out.registered_proof.sector_size(), Tree => {
                run.iterations(&label, iterations, None, |_, _| {
                    porep::partition_circuit::<Tree>(&c1_out, partition)
                })?
            })
        }
    }
    if let Some(dir) = &cli.trace.report {
        let summary = alloc_tracer::write_report(dir)
            .with_context(|| format!("writing the report to {}", dir.display()))?;
        let mut summary = summary;
        summary.top.truncate(cli.trace.top);
        if cli.json {
            eprintln!("{summary}");
        } else {
            writeln!(run.out, "{summary}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs iterations of one circuit and prints each.
struct Runner<'o> {
    trace: Mode,
    json: bool,
    prover: ProverKind,
    /// One, or several taking turns by iteration (see `variant_of`).
    variants: Vec<Variant>,
    /// The circuits' witness comes from synthetic vanilla proofs.
    synthetic: bool,
    out: &'o mut dyn Write,
}

impl Runner<'_> {
    /// The variant of `iteration` and its round. With one variant every iteration is
    /// a round; with several, each round runs each variant once, in the given order
    /// in even rounds and reversed in odd ones, so that a steady drift of the
    /// machine's speed weighs on every variant alike.
    fn variant_of(&self, iteration: u64) -> (Variant, u64) {
        let n = self.variants.len() as u64;
        let (round, turn) = (iteration / n, (iteration % n) as usize);
        let turn = if round % 2 == 0 {
            turn
        } else {
            self.variants.len() - 1 - turn
        };
        (self.variants[turn], round)
    }

    /// `make(round, variant)` builds the circuit of an iteration (in the `setup`
    /// phase; see `variant_of`); the chosen prover then synthesizes it (in the
    /// `synthesize` phase). `blank` is the seed of substituted values when the
    /// circuit has none (mirror prover only).
    fn iterations<C: bellperson::Circuit<blstrs::Scalar> + Send>(
        &mut self,
        label: &str,
        iterations: u64,
        blank: Option<u64>,
        mut make: impl FnMut(u64, Variant) -> Result<C>,
    ) -> Result<()> {
        let progress = progress::Progress::new("synthesis", Some(iterations), true);
        for iteration in 0..iterations {
            let (variant, round) = self.variant_of(iteration);
            let (circuit, shape) = {
                let _setup = alloc_tracer::phase("setup");
                let shape = match self.prover {
                    ProverKind::Reference => Some(circuits::shape(make(round, variant)?)?),
                    ProverKind::Mirror => None,
                };
                (make(round, variant)?, shape)
            };
            progress::ROWS.store(0, std::sync::atomic::Ordering::Relaxed);
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
                        let missing = match blank {
                            Some(seed) => mirror::Missing::random(seed.wrapping_add(round)),
                            None => mirror::Missing::Fail,
                        };
                        let pool = match variant {
                            Variant::PooledEnforce => {
                                Some(lc_pool::LcPool::new().map_err(|e| {
                                    anyhow::anyhow!("--variant pooled-enforce: {e}")
                                })?)
                            }
                            _ => None,
                        };
                        let o =
                            mirror::synthesize(circuit, missing, self.trace != Mode::Off, pool)?;
                        let shape = circuits::Shape {
                            rows: o.rows,
                            aux: o.aux,
                            inputs: o.inputs,
                        };
                        (shape, Some(o.abc_digest), blank.map(|_| o.substituted))
                    }
                }
            };
            let synth_seconds = start.elapsed().as_secs_f64();
            let after = alloc_tracer::counts();
            let traced = self.trace != Mode::Off;
            let enforce = match (traced, self.prover) {
                (true, ProverKind::Mirror) => enforce_allocs(&before, &after),
                _ => None,
            };
            let report = IterationReport {
                circuit: label.to_owned(),
                iteration,
                prover: match self.prover {
                    ProverKind::Reference => "reference",
                    ProverKind::Mirror => "mirror",
                },
                variant: variant.name(),
                witness: match (blank, self.synthetic) {
                    (Some(_), _) => "blank",
                    (None, true) => "synthetic",
                    (None, false) => "real",
                },
                rows: shape.rows,
                aux: shape.aux,
                inputs: shape.inputs,
                synth_seconds,
                trace: self.trace.name(),
                allocs: traced.then(|| after.total(|p| p.allocs) - before.total(|p| p.allocs)),
                // Exact in `sites` mode; counted among sampled blocks in `sample:N`
                // (times N, an estimate); not counted in `count` mode.
                temporaries: match self.trace {
                    Mode::Sites => Some(1),
                    Mode::Sample(n) => Some(n),
                    Mode::Count | Mode::Off => None,
                }
                .map(|weight| {
                    (after.total(|p| p.temporaries) - before.total(|p| p.temporaries)) * weight
                }),
                enforce_allocs: enforce,
                enforce_allocs_per_row: enforce
                    .filter(|_| shape.rows > 0)
                    .map(|e| e as f64 / shape.rows as f64),
                abc_digest: digest,
                substituted_values: substituted,
            };
            progress.suspend(|| print_iteration(self.out, &report, self.json))?;
            progress.inc();
        }
        Ok(())
    }
}

/// Allocations made in the `enforce` phase between two snapshots.
fn enforce_allocs(before: &alloc_tracer::Counts, after: &alloc_tracer::Counts) -> Option<u64> {
    let id = alloc_tracer::phases()
        .iter()
        .position(|p| p.name == "enforce")?;
    Some(after.phases.get(id)?.allocs - before.phases.get(id)?.allocs)
}

fn print_iteration(out: &mut dyn Write, r: &IterationReport, json: bool) -> Result<()> {
    if json {
        serde_json::to_writer(&mut *out, r)?;
        writeln!(out)?;
    } else {
        write!(
            out,
            "{} [{}] iteration {}: {} rows, {} aux, {} inputs, synthesis {:.3} s (prover {}, variant {}, trace {})",
            r.circuit,
            r.prover,
            r.iteration,
            r.rows,
            r.aux,
            r.inputs,
            r.synth_seconds,
            r.prover,
            r.variant,
            r.trace
        )?;
        if let Some(a) = r.allocs {
            write!(out, ", {a} allocations")?;
        }
        if let Some(t) = r.temporaries {
            write!(out, ", {t} temporaries")?;
        }
        if let Some(e) = r.enforce_allocs {
            write!(out, ", {e} in enforce")?;
        }
        if let Some(e) = r.enforce_allocs_per_row {
            write!(out, " ({e:.2} per constraint)")?;
        }
        if let Some(d) = &r.abc_digest {
            write!(out, ", abc digest {d}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Fails early, with a one-line error, when the report could not be written later.
fn check_writable(dir: &std::path::Path) -> Result<()> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).with_context(|| {
        format!(
            "report directory {}: cannot create its parent",
            dir.display()
        )
    })?;
    let probe = parent.join(format!(".synth-driver-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("report directory {}: not writable", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
