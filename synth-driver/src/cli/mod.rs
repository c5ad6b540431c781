//! The command line: clap's types, and [`Cli::into_job`], which turns them into a
//! [`Job`] and is the one place that refuses a combination of flags, with a
//! one-line message, before any work starts.

use crate::allocator::{self, Build, Inner};
use crate::job::{CountedCircuit, Job, Output, PorepInput, Prover, Trace, Variant, Work};
use crate::porep;
use alloc_tracer::Mode;
use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand};
use filecoin_proofs_api::RegisteredSealProof;
use std::path::PathBuf;
use values::{
    at_least, parse_arity, parse_bytes, parse_depth, parse_lifetimes, parse_mode, parse_partition,
    parse_timeline_ms, parse_top, within,
};

mod values;

/// Runs real bellperson synthesis under alloc-tracer.
#[derive(Parser, Debug)]
#[command(
    version,
    about,
    after_help = "EXAMPLES:\n  \
    synth-driver seal --sector-size 2KiB --out sectors/2k\n  \
    synth-driver --trace sites --report reports/porep porep --c1 sectors/2k/c1.json\n  \
    synth-driver --json sha256 --blocks 64 -i 3\n  \
    synth-driver --allocator system --trace count sha256 --blocks 64\n  \
    synth-driver --prover mirror --variant inplace-lc --trace count sha256 --blocks 64\n  \
    synth-driver --prover mirror --variant pooled-enforce porep --sector-size 2KiB --synthetic\n  \
    synth-driver --json porep --sector-size 32GiB --synthetic --count-only\n  \
    synth-driver poseidon --hashes 10000 --arity 8\n\n\
    EXIT STATUS: 0 on success (and when the reader of standard output goes away:\n  \
    at once, or with --report after the run and its report); 2 on a usage error\n  \
    (clap's message) or a failed run (one line on standard error); 130, 143 or\n  \
    129 when SIGINT, SIGTERM or SIGHUP stops a run (with --report, after writing\n  \
    the report, marked incomplete)."
)]
pub struct Cli {
    #[command(flatten)]
    trace: TraceArgs,
    /// The tracer's options given on the command line (not from the environment),
    /// as its flags: set by [`Cli::parse_args`].
    #[arg(skip)]
    tracer_flags: Vec<&'static str>,
    /// Print JSON instead of text: one object per iteration (seal: {"c1": PATH}).
    #[arg(long, global = true, help_heading = "Driver options")]
    json: bool,
    /// reference: stock bellperson (create_proof_batch, stopped right after
    /// synthesis). mirror: the driver's replica of bellperson's ProvingAssignment,
    /// which adds an `enforce` phase around enforce closures and a digest of a/b/c.
    /// Default: reference (mirror with --blank).
    #[arg(long, global = true, help_heading = "Driver options", value_enum)]
    prover: Option<Prover>,
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
        help_heading = "Driver options",
        value_enum,
        value_delimiter = ',',
        default_value = "baseline"
    )]
    variant: Vec<Variant>,
    /// The tracer's inner allocator: jemalloc (the default), system (glibc's
    /// malloc) or mimalloc. Fixed at start, before anything allocates; the output
    /// and the report's manifest name it.
    #[arg(long, global = true, help_heading = "Driver options", value_enum)]
    allocator: Option<Inner>,
    #[command(subcommand)]
    command: Command,
}

/// Global: given before or after the subcommand; listed apart from the
/// subcommand's own options in its help.
#[derive(Args, Debug)]
#[command(next_help_heading = "Tracing options")]
struct TraceArgs {
    /// What the tracer records: off (a pass-through, the baseline), count (totals,
    /// no temporaries), sites (every stack, temporaries exact) or sample:N (one
    /// stack in N; temporaries among those, times N). Several, comma-separated,
    /// take turns iteration by iteration in one process, as several --variant values
    /// do: what each mode costs, timed without the machine's drift over seconds.
    /// Each mode takes its own defaults for the settings not given; those given
    /// (--heap-sample, say) hold in every traced mode. Not with several variants or
    /// with --report. Default: ALLOC_TRACE, else off (the tracer reads ALLOC_TRACE
    /// at the first allocation, so a --trace that differs from it is refused, but
    /// for ALLOC_TRACE=off or empty).
    #[arg(
        long,
        env = "ALLOC_TRACE",
        default_value = "off",
        value_parser = parse_mode,
        value_delimiter = ',',
        global = true
    )]
    trace: Vec<Mode>,
    /// Frames kept per call stack (1 to 62). Like --heap-sample, --lifetimes and
    /// --timeline-ms, it sets the tracer: given on the command line with --trace
    /// off, it is refused.
    #[arg(long, env = "ALLOC_TRACE_DEPTH", default_value_t = alloc_tracer::DEFAULT_DEPTH as u64, value_parser = parse_depth, allow_negative_numbers = true, global = true)]
    depth: u64,
    /// Heap sampling: mean bytes between sampled bytes (B, KiB, MiB, GiB, TiB or
    /// K, M, G, T, e.g. 1MiB, 1.5MiB, 65536; 0 = off; 1 = every block). Default: 1MiB
    /// in sites and sample:N, off in count.
    #[arg(long, env = "ALLOC_TRACE_HEAP", value_parser = parse_bytes, allow_negative_numbers = true, global = true)]
    heap_sample: Option<u64>,
    /// Mean interval, in allocations, between blocks followed to their free for
    /// lifetimes in sites mode (0 = none; sample:N follows its sampled blocks).
    #[arg(long, env = "ALLOC_TRACE_LIFETIMES", default_value_t = alloc_tracer::DEFAULT_LIFETIME_INTERVAL, value_parser = parse_lifetimes, allow_negative_numbers = true, global = true)]
    lifetimes: u64,
    /// Interval of the report's live-bytes timeline, in milliseconds (0 = none).
    #[arg(long, env = "ALLOC_TRACE_TIMELINE_MS", default_value_t = alloc_tracer::DEFAULT_TIMELINE_MS, value_parser = parse_timeline_ms, allow_negative_numbers = true, global = true)]
    timeline_ms: u64,
    /// Write the tracer's report (parquet tables and manifest.json) to this directory,
    /// with --trace other than off: new, empty, or an earlier report (replaced); any
    /// other folder is refused before the run. %p and %t expand to the process id
    /// and the start time.
    #[arg(long, global = true)]
    report: Option<PathBuf>,
    /// Sites listed in the summary printed after the --report is written, at most
    /// 10, the default (the tracer's summary keeps 10; `analyzer top` ranks every
    /// site).
    #[arg(long, global = true, value_parser = parse_top)]
    top: Option<usize>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Seals a sector of random data offline (piece, pre-commit 1 and 2, commit phase 1;
    /// no Groth parameters) and writes OUT/c1.json in Curio's format. The SDR parent
    /// cache goes to FIL_PROOFS_PARENT_CACHE (default /var/tmp/filecoin-parents).
    #[command(
        after_help = "The driver's options, listed above with seal's own: --json and \
        --allocator apply; --trace (one mode) and the tracer's settings trace the sealing \
        itself; --prover, and --variant other than baseline, are refused: seal \
        synthesizes nothing."
    )]
    Seal {
        /// 2KiB or 8MiB (larger sizes work but take hours, hundreds of GiB of disk and
        /// tens of GiB of memory).
        #[arg(long, value_parser = porep::parse_sector_size)]
        sector_size: (u64, RegisteredSealProof),
        /// Directory for c1.json and the sector's files: new, empty, or an earlier
        /// seal's output (its sector/ folder is removed first, and its c1.json
        /// replaced once the new one is written, so a seal that fails keeps it;
        /// other files there stay); any other folder is refused.
        #[arg(long)]
        out: PathBuf,
        /// Seed of the sector's data, ticket and challenge seed.
        #[arg(long, default_value_t = 0, value_parser = at_least::<0>, allow_negative_numbers = true)]
        seed: u64,
    },
    /// Synthesizes one partition of a Filecoin PoRep (StackedDrg) circuit from a C1
    /// output, as commit phase 2 does; or, with --sector-size, from synthetic vanilla
    /// proofs (--synthetic) or the blank circuit (--blank); --count-only counts the
    /// rows of a partition without any witness.
    #[command(after_help = "INPUTS (one of):\n  \
        --c1 FILE [--partition K]                       a real partition, any sector size\n  \
        --sector-size SIZE --synthetic [--seed X]       partition 0 of synthetic vanilla proofs\n  \
        --sector-size SIZE --blank [--seed X]           the blank circuit (mirror prover)\n  \
        --sector-size SIZE --count-only [--synthetic]   rows, aux and inputs, no witness")]
    Porep {
        #[command(flatten)]
        input: PorepArgs,
        /// Iterations (each builds and synthesizes the circuit anew).
        #[arg(short = 'i', long, default_value_t = 1, value_parser = at_least::<1>, allow_negative_numbers = true)]
        iterations: u64,
    },
    /// A chain of SHA-256 compressions over random bits (bellperson's sha256 gadget).
    Sha256 {
        /// Message blocks (one compression, about 26 k constraints, each).
        #[arg(long, default_value_t = 4, value_parser = within::<1, 1_000_000>, allow_negative_numbers = true)]
        blocks: u64,
        /// Iterations (each synthesizes the circuit anew).
        #[arg(short = 'i', long, default_value_t = 1, value_parser = at_least::<1>, allow_negative_numbers = true)]
        iterations: u64,
        /// Seed of the random message.
        #[arg(long, default_value_t = 0, value_parser = at_least::<0>, allow_negative_numbers = true)]
        seed: u64,
    },
    /// A chain of Poseidon hashes (neptune's legacy circuit with filecoin-hashers'
    /// constants, as Filecoin's Merkle proofs use them).
    Poseidon {
        /// Hashes (about 500 constraints each at arity 8).
        #[arg(long, default_value_t = 1000, value_parser = within::<1, 100_000_000>, allow_negative_numbers = true)]
        hashes: u64,
        /// Inputs per hash: 2, 4, 8, 11, 16, 24 or 36.
        #[arg(long, default_value = "8", value_parser = parse_arity)]
        arity: usize,
        /// Iterations (each synthesizes the circuit anew).
        #[arg(short = 'i', long, default_value_t = 1, value_parser = at_least::<1>, allow_negative_numbers = true)]
        iterations: u64,
        /// Seed of the random preimages.
        #[arg(long, default_value_t = 0, value_parser = at_least::<0>, allow_negative_numbers = true)]
        seed: u64,
    },
}

/// The flags that say where `porep`'s partition comes from. Clap takes them as they
/// come; [`PorepArgs::input`] accepts the combinations that mean something.
#[derive(Args, Debug)]
struct PorepArgs {
    /// Curio's c1.json, or the plain JSON of filecoin-proofs-api's
    /// SealCommitPhase1Output. Any sector size; a 32 GiB partition peaks near
    /// 20 GiB of memory (452 MiB at 2 KiB; docs/memory.md).
    #[arg(long)]
    c1: Option<PathBuf>,
    /// Sector size of a partition with no C1 output (with --count-only, --blank or
    /// --synthetic).
    #[arg(long, value_parser = porep::parse_sector_size)]
    sector_size: Option<(u64, RegisteredSealProof)>,
    /// Count rows, aux and inputs of the blank circuit (all values missing; the
    /// same constraints), or with --synthetic of the synthetic one, without
    /// synthesizing a witness: works for 32 GiB on a small machine.
    #[arg(long)]
    count_only: bool,
    /// Synthesize the blank circuit of --sector-size with the mirror prover,
    /// which substitutes a random value for every missing one: the constraints
    /// and enforce closures of a real partition, without the vanilla proofs'
    /// witness arithmetic (an approximation; the output says `witness: blank`).
    #[arg(long)]
    blank: bool,
    /// Synthesize a partition of --sector-size from synthetic vanilla proofs:
    /// random values in proofs of exactly that size's shape, through the same
    /// circuit construction as a real C1 output (the real constraint system of
    /// any size, without sealing; the output says `witness: synthetic`).
    #[arg(long)]
    synthetic: bool,
    /// Seed of the substituted values (--blank) or synthetic proofs (--synthetic);
    /// default 0.
    #[arg(long, value_parser = at_least::<0>, allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Partition to synthesize (--c1).
    #[arg(long, default_value_t = 0, value_parser = parse_partition, allow_negative_numbers = true)]
    partition: usize,
}

/// Why `porep` without an input flag does nothing.
const NO_INPUT: &str =
    "porep needs --c1 FILE, or --sector-size SIZE with --count-only, --blank or --synthetic";

impl PorepArgs {
    /// The one input these flags describe, or why they describe none. A flag the
    /// input does not use is refused (`--seed` with `--c1`, whose values are the
    /// file's; a partition other than 0 with `--sector-size`, whose inputs build
    /// partition 0): accepted, it would read as applied.
    fn input(self) -> Result<PorepInput> {
        let PorepArgs {
            c1,
            sector_size,
            count_only,
            blank,
            synthetic,
            seed,
            partition,
        } = self;
        let proof = match (c1, sector_size) {
            (Some(_), Some(_)) => {
                bail!("--c1 and --sector-size exclude each other: a C1 output has its own size")
            }
            (None, None) => bail!(NO_INPUT),
            (Some(path), None) => {
                let flag = [
                    (count_only, "--count-only"),
                    (blank, "--blank"),
                    (synthetic, "--synthetic"),
                ]
                .into_iter()
                .find_map(|(set, flag)| set.then_some(flag));
                if let Some(flag) = flag {
                    bail!("{flag} goes with --sector-size, not --c1");
                }
                if seed.is_some() {
                    bail!(
                        "--seed goes with --blank or --synthetic: a C1 output's values are its own"
                    );
                }
                return Ok(PorepInput::C1 { path, partition });
            }
            (None, Some((_, proof))) => {
                if partition != 0 {
                    bail!(
                        "--partition {partition} goes with --c1; --sector-size builds partition 0"
                    );
                }
                proof
            }
        };
        if seed.is_some() && !blank && !synthetic {
            bail!(
                "--seed goes with --blank or --synthetic: --count-only alone counts the blank circuit"
            );
        }
        let seed = seed.unwrap_or(0);
        Ok(match (count_only, blank, synthetic) {
            (_, true, true) => bail!("--blank and --synthetic exclude each other"),
            (true, true, false) => bail!(
                "--count-only and --blank exclude each other (--count-only alone counts the blank circuit)"
            ),
            (true, false, false) => PorepInput::CountOnly {
                proof,
                circuit: CountedCircuit::Blank,
            },
            (true, false, true) => PorepInput::CountOnly {
                proof,
                circuit: CountedCircuit::Synthetic { seed },
            },
            (false, true, false) => PorepInput::Blank { proof, seed },
            (false, false, true) => PorepInput::Synthetic { proof, seed },
            (false, false, false) => bail!(NO_INPUT),
        })
    }
}

/// The tracer's options that only `--trace` other than off uses: argument id and
/// flag.
const TRACER_OPTIONS: [(&str, &str); 4] = [
    ("depth", "--depth"),
    ("heap_sample", "--heap-sample"),
    ("lifetimes", "--lifetimes"),
    ("timeline_ms", "--timeline-ms"),
];

impl Cli {
    /// Parses a command line (the program's name first), noting which of the
    /// tracer's options it gives itself: those then need `--trace` (set from the
    /// environment, as `ALLOC_TRACE_DEPTH` and the like, they may be meant for
    /// another program).
    pub fn parse_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
        let mut command = Cli::command();
        // An empty ALLOC_TRACE chose nothing (`ALLOC_TRACE=$MODE` with MODE unset): the
        // tracer reads it as off, and so does --trace's default.
        if std::env::var_os("ALLOC_TRACE").is_some_and(|v| v.is_empty()) {
            command = command.mut_arg("trace", |a| a.env(None));
        }
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        // The subcommand given, for a tip that names it.
        let subcommand = args
            .iter()
            .skip(1)
            .filter_map(|a| a.to_str())
            .find(|a| command.get_subcommands().any(|s| s.get_name() == *a));
        let subcommand = subcommand.map(str::to_owned);
        let (given, after) = globals_given(&command, &args);
        if let Some(e) = given_on_both_sides(&mut command, &given, after.as_deref()) {
            return Err(e);
        }
        // An option given on the command line replaces its environment variable,
        // which clap would still parse (and refuse when malformed) at the level where
        // the option is not given: before or after the subcommand.
        for (id, _, _) in &given {
            command = command.mut_arg(id.as_str(), |a| a.env(None));
        }
        let matches = command
            .try_get_matches_from(args)
            .map_err(|e| subcommand_option_tip(e, subcommand.as_deref()))?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        // Global options given after the subcommand are in its matches.
        let mut all = vec![&matches];
        all.extend(matches.subcommand().map(|(_, m)| m));
        cli.tracer_flags = TRACER_OPTIONS
            .iter()
            .filter(|(id, _)| {
                all.iter()
                    .any(|m| m.value_source(id) == Some(ValueSource::CommandLine))
            })
            .map(|&(_, flag)| flag)
            .collect();
        Ok(cli)
    }

    /// The job this command line asks for, every flag combination checked.
    pub fn into_job(self) -> Result<Job> {
        let work = match self.command {
            Command::Seal {
                sector_size: (sector_size, proof),
                out,
                seed,
            } => Work::Seal {
                proof,
                sector_size,
                out,
                seed,
            },
            Command::Sha256 {
                blocks,
                iterations,
                seed,
            } => Work::Sha256 {
                blocks,
                seed,
                iterations,
            },
            Command::Poseidon {
                hashes,
                arity,
                iterations,
                seed,
            } => Work::Poseidon {
                hashes,
                arity,
                seed,
                iterations,
            },
            Command::Porep { input, iterations } => {
                let input = input.input()?;
                if matches!(input, PorepInput::CountOnly { .. }) && iterations > 1 {
                    bail!("--count-only counts once; --iterations {iterations} does not apply");
                }
                Work::Porep { input, iterations }
            }
        };
        let blank = matches!(
            work,
            Work::Porep {
                input: PorepInput::Blank { .. },
                ..
            }
        );
        let prover = match self.prover {
            Some(Prover::Reference) if blank => bail!(
                "--blank needs --prover mirror: the stock prover stops at the first missing value"
            ),
            // --blank switches to the mirror prover unless told otherwise.
            None if blank => Prover::Mirror,
            other => other.unwrap_or(Prover::Reference),
        };
        let count_only = matches!(
            work,
            Work::Porep {
                input: PorepInput::CountOnly { .. },
                ..
            }
        );
        if self.prover.is_some() && (count_only || matches!(work, Work::Seal { .. })) {
            bail!("--prover chooses who synthesizes; seal and --count-only synthesize nothing");
        }
        check_trace_env(&self.trace.trace)?;
        let report = self.trace.report.is_some();
        check_variants(&self.variant, &work, prover)?;
        let turns_note = check_turns(&self.variant, &self.trace.trace, &work, report)?;
        let traced = self.trace.trace.iter().any(|&m| m != Mode::Off);
        if count_only && (traced || report) {
            let from_env = if std::env::var_os("ALLOC_TRACE").is_some() {
                " (ALLOC_TRACE sets --trace)"
            } else {
                ""
            };
            bail!(
                "--count-only counts rows untraced, with no prover: --trace and --report do not apply{from_env}"
            );
        }
        if self.trace.top.is_some() && !report {
            bail!("--top lists sites of the summary printed with --report: give --report DIR");
        }
        if report && !traced {
            bail!(
                "--report with --trace off would write a report of nothing: give --trace count, sites or sample:N"
            );
        }
        if !traced && !self.tracer_flags.is_empty() {
            let (last, rest) = self.tracer_flags.split_last().expect("not empty");
            let flags = if rest.is_empty() {
                format!("{last} sets")
            } else {
                format!("{} and {last} set", rest.join(", "))
            };
            bail!(
                "{flags} the tracer, which --trace off leaves out: give --trace count, sites or sample:N"
            );
        }
        let mut notes = Vec::new();
        // The tracer writes a report at exit for ALLOC_TRACE_REPORT too, however the
        // mode was chosen.
        let env_report = std::env::var_os("ALLOC_TRACE_REPORT").is_some_and(|v| !v.is_empty());
        if let [mode @ (Mode::Sites | Mode::Sample(_))] = self.trace.trace[..]
            && !report
            && !env_report
        {
            let prints = if work.synthesizes() {
                "this run prints counts only"
            } else {
                "this run writes nothing of them"
            };
            notes.push(format!(
                "{} mode records stacks, but only --report DIR (or ALLOC_TRACE_REPORT) \
                 writes them: {prints}",
                mode.name()
            ));
        }
        if report && env_report {
            notes.push(
                "ALLOC_TRACE_REPORT is set too: the tracer writes a report there at exit as \
                 well as --report's"
                    .to_owned(),
            );
        }
        notes.extend(turns_note);
        // Settings that no mode of the run uses: accepted (a script may set them for
        // every mode), but said.
        let modes = &self.trace.trace;
        let given = |flag| self.tracer_flags.contains(&flag);
        if traced && given("--lifetimes") && !modes.contains(&Mode::Sites) {
            notes.push(
                "--lifetimes sets how often sites mode follows a block to its free; \
                 sample:N follows each sampled block and count none, so it changes nothing here"
                    .to_owned(),
            );
        }
        if self.trace.top.is_some() && modes.iter().all(|m| matches!(m, Mode::Count | Mode::Off)) {
            notes.push(
                "--top lists the summary's sites; count mode records no sites, so it \
                 changes nothing here"
                    .to_owned(),
            );
        }
        // Count mode walks stacks only for heap sampling's blocks.
        let heap = self.trace.heap_sample.is_some_and(|h| h > 0);
        if traced
            && given("--depth")
            && !heap
            && modes.iter().all(|m| matches!(m, Mode::Count | Mode::Off))
        {
            notes.push(
                "--depth sets the frames kept per stack; count mode without heap sampling \
                 records no stacks, so it changes nothing here"
                    .to_owned(),
            );
        }
        if allocator::BUILD != Build::Traced && (traced || report) {
            bail!(
                "this synth-driver was built without the tracer (feature untraced or dhat-heap): --trace and --report need the default build"
            );
        }
        Ok(Job {
            trace: Trace {
                modes: self.trace.trace,
                depth: self.trace.depth as usize,
                heap_interval: self.trace.heap_sample,
                lifetime_interval: self.trace.lifetimes,
                timeline_ms: self.trace.timeline_ms,
                report: self.trace.report,
                top: self.trace.top.unwrap_or(alloc_tracer::SUMMARY_SITES),
            },
            output: if self.json {
                Output::Json
            } else {
                Output::Text
            },
            prover,
            variants: self.variant,
            allocator: self.allocator,
            work,
            notes,
        })
    }
}

/// Refuses variants that do not apply to `work` under `prover`.
fn check_variants(variants: &[Variant], work: &Work, prover: Prover) -> Result<()> {
    let command = work.command();
    for variant in variants {
        match variant {
            Variant::Baseline => {}
            Variant::InplaceLc if matches!(work, Work::Sha256 { .. }) => {}
            Variant::InplaceLc => {
                bail!("--variant inplace-lc exists for sha256 only, not {command}")
            }
            Variant::PooledEnforce if !work.synthesizes() => {
                bail!("--variant pooled-enforce does not apply to {command} (no synthesis)")
            }
            Variant::PooledEnforce if prover == Prover::Reference => {
                bail!("--variant pooled-enforce needs --prover mirror")
            }
            Variant::PooledEnforce => {}
        }
    }
    Ok(())
}

/// The global options a command line gives, each as its argument's id, its flag and
/// whether it comes after the subcommand, and the subcommand (the first argument
/// that names one and is no option's value).
fn globals_given(
    command: &clap::Command,
    args: &[std::ffi::OsString],
) -> (Vec<(String, String, bool)>, Option<String>) {
    let subcommands: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
    // The global long options, and whether each takes a value (the next argument,
    // unless given as `--name=value`).
    let globals: Vec<(String, String, bool)> = command
        .get_arguments()
        .filter(|a| a.is_global_set())
        .filter_map(|a| {
            Some((
                a.get_id().to_string(),
                format!("--{}", a.get_long()?),
                a.get_action().takes_values(),
            ))
        })
        .collect();
    let mut given = Vec::new();
    let mut after: Option<String> = None;
    let mut args = args.iter().skip(1).filter_map(|a| a.to_str());
    while let Some(a) = args.next() {
        if a == "--" {
            break;
        }
        if let Some((id, flag, takes)) = globals.iter().find(|(_, f, _)| {
            a == f
                || a.strip_prefix(f.as_str())
                    .is_some_and(|v| v.starts_with('='))
        }) {
            given.push((id.clone(), flag.clone(), after.is_some()));
            if *takes && a == flag {
                args.next();
            }
        } else if after.is_none() && subcommands.contains(&a) {
            after = Some(a.to_owned());
        }
    }
    (given, after)
}

/// Refuses a driver option given both before and after the subcommand: clap keeps
/// the values after it and drops those before without a word (`--trace count
/// sha256 --trace sites` ran `sites` alone), where the same values on one side take
/// turns or are refused as given twice.
fn given_on_both_sides(
    command: &mut clap::Command,
    given: &[(String, String, bool)],
    subcommand: Option<&str>,
) -> Option<clap::Error> {
    let twice = &given
        .iter()
        .find(|(_, f, side)| !side && given.iter().any(|(_, g, s)| g == f && *s))?
        .1;
    let subcommand = subcommand?;
    Some(command.error(
        clap::error::ErrorKind::ArgumentConflict,
        format!(
            "{twice} is given both before and after {subcommand}, where the values after \
             it would replace those before: give them on one side"
        ),
    ))
}

/// clap's error for `-i`, `--iterations` or `--seed` given before the subcommand
/// (where the tracer's options and `--json` may go), with a tip: they are the
/// subcommand's own.
fn subcommand_option_tip(mut e: clap::Error, subcommand: Option<&str>) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) if e.kind() == ErrorKind::UnknownArgument => {
            ["--iterations", "--seed", "-i"]
                .into_iter()
                .find(|f| arg.split('=').next() == Some(*f))
        }
        _ => None,
    };
    if let Some(flag) = flag {
        e.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![
                format!(
                    "{flag} is the subcommand's: give it after it ({} {flag} ...)",
                    subcommand.unwrap_or("SUBCOMMAND")
                )
                .into(),
            ]),
        );
    }
    e
}

/// Refuses turns (several variants, or several modes) where they cannot be taken:
/// work without iterations, fewer iterations than values (some would never run) or
/// not a multiple of them (a last round short), a report that would mix them, both
/// lists at once, or a value given twice (times are kept by value). A note for turns
/// of a single round, which compare nothing.
fn check_turns(
    variants: &[Variant],
    modes: &[Mode],
    work: &Work,
    report: bool,
) -> Result<Option<String>> {
    let command = work.command();
    let flag = match (variants.len() > 1, modes.len() > 1) {
        (false, false) => return Ok(None),
        (true, true) => {
            bail!("several --variant and several --trace values: only one of them takes turns")
        }
        (true, false) => "--variant",
        (false, true) => "--trace",
    };
    if !work.synthesizes() {
        bail!("several {flag} values take turns by iteration; {command} has no iterations");
    }
    // Times are kept by value: a value given twice would run twice as often and be
    // compared with nothing.
    let twice = variants
        .iter()
        .enumerate()
        .find(|(i, v)| variants[..*i].contains(v))
        .map(|(_, v)| v.name().to_owned())
        .or_else(|| {
            modes
                .iter()
                .enumerate()
                .find(|(i, m)| modes[..*i].contains(m))
                .map(|(_, m)| m.name())
        });
    if let Some(value) = twice {
        bail!("{flag} {value} is given twice: each value takes one turn a round");
    }
    if report {
        bail!(
            "several {flag} values with --report would mix them in one report; give one per traced run"
        );
    }
    let values = variants.len().max(modes.len()) as u64;
    if work.iterations() < values {
        bail!(
            "{values} {flag} values take turns by iteration, and --iterations {} runs fewer: \
             give at least {values}",
            work.iterations()
        );
    }
    // A last round cut short leaves runs no other value's run pairs with.
    let n = work.iterations();
    if !n.is_multiple_of(values) {
        bail!(
            "{values} {flag} values take turns by iteration, and --iterations {n} leaves the \
             last round short: give a multiple of {values} (--iterations {} or {})",
            n - n % values,
            n - n % values + values
        );
    }
    Ok((n == values).then(|| {
        format!(
            "one round of turns: each value runs once, too few to compare; \
             --iterations {} or more prints their medians and ratios",
            2 * values
        )
    }))
}

/// Refuses a `--trace` other than `ALLOC_TRACE`, when that is set to a mode: the
/// tracer took it at the program's first allocation, so the report would hold the
/// start in one mode and the rest in another.
fn check_trace_env(modes: &[Mode]) -> Result<()> {
    let Ok(env) = std::env::var("ALLOC_TRACE") else {
        return Ok(());
    };
    match Mode::parse(env.trim()) {
        // Off from the start: nothing was recorded that another mode would mix with.
        Ok(Mode::Off) => Ok(()),
        Ok(m) if modes != [m] => bail!(
            "ALLOC_TRACE={env} and --trace {} differ: the tracer took ALLOC_TRACE at the \
             program's start; unset it, or give the same mode",
            modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(",")
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1_1 as P2K;

    #[test]
    fn tracer_options_need_a_trace() {
        let e = job("sha256 --depth 8").unwrap_err();
        assert!(e.starts_with("--depth sets the tracer"), "{e}");
        let e = job("--depth 8 --lifetimes 4 --timeline-ms 0 sha256").unwrap_err();
        assert!(
            e.starts_with("--depth, --lifetimes and --timeline-ms set the tracer"),
            "{e}"
        );
        assert!(job("--trace count --depth 8 sha256").is_ok());
        assert!(job("sha256 --heap-sample 1MiB --trace count").is_ok());
    }

    #[test]
    fn an_option_on_both_sides_of_the_subcommand_is_refused() {
        // Clap kept the values after the subcommand and dropped those before.
        for args in [
            "--trace count sha256 -i 2 --trace sites",
            "--variant baseline sha256 --variant inplace-lc -i 2",
            "--allocator system sha256 --allocator=mimalloc",
        ] {
            let e = job(args).unwrap_err();
            assert!(
                e.contains("is given both before and after sha256"),
                "{args}: {e}"
            );
        }
        // On one side, as before: turns, or one value.
        assert!(job("--trace count --trace sites sha256 -i 2").is_ok());
        assert!(job("sha256 -i 2 --trace count --trace sites").is_ok());
        assert!(job("--trace count sha256 --depth 8").is_ok());
        // A value that names a subcommand (a folder called sha256) is a value.
        let e = job("--report sha256 --trace count sha256 --trace sites -i 2").unwrap_err();
        assert!(
            e.contains("--trace is given both before and after sha256"),
            "{e}"
        );
        assert!(
            job("--variant baseline --report poseidon sha256 --variant inplace-lc -i 2")
                .unwrap_err()
                .contains("--variant is given both before and after sha256")
        );
    }

    #[test]
    fn numbers_out_of_range_say_what_is_taken() {
        for (args, expected) in [
            ("sha256 -i 0", "expected a whole number, 1 or more"),
            ("sha256 --seed -3", "expected a whole number, 0 or more"),
            (
                "sha256 --blocks 0",
                "expected a whole number, from 1 to 1000000",
            ),
            (
                "--trace sites --depth 99 sha256",
                "expected a whole number, from 1 to 62 (here or from ALLOC_TRACE_DEPTH)",
            ),
            (
                "--trace sites --timeline-ms -1 sha256",
                "(here or from ALLOC_TRACE_TIMELINE_MS)",
            ),
            (
                "porep --c1 x --partition -1",
                "expected a whole number, 0 or more",
            ),
            (
                "sha256 --seed 99999999999999999999",
                "too large: expected a whole number",
            ),
        ] {
            let e = job(args).map(|_| ()).unwrap_err();
            assert!(e.contains(expected), "{args}: {e}");
        }
    }

    #[test]
    fn stacks_without_a_report_are_noted() {
        let notes = |args| job(args).unwrap().notes;
        for args in ["--trace sites sha256", "--trace sample:100 sha256"] {
            let n = notes(args);
            assert_eq!(n.len(), 1, "{args}: {n:?}");
            assert!(
                n[0].contains("only --report DIR (or ALLOC_TRACE_REPORT) writes them"),
                "{n:?}"
            );
        }
        assert!(notes("--trace sites --report r sha256").is_empty());
        assert!(notes("--trace count sha256").is_empty());
        // Modes taking turns time the tracer; they have no report anyway.
        assert!(notes("--trace off,sites sha256 -i 4").is_empty());
        // One round of turns compares nothing: said.
        let n = notes("--trace off,sites sha256 -i 2");
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].starts_with("one round of turns"), "{n:?}");
        assert!(n[0].contains("--iterations 4 or more"), "{n:?}");
        let n = notes("--variant baseline,inplace-lc sha256 -i 2");
        assert!(n[0].starts_with("one round of turns"), "{n:?}");
        // --top with count mode lists nothing.
        let n = notes("--trace count --report r --top 3 sha256");
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].starts_with("--top lists the summary's sites"), "{n:?}");
        assert!(notes("--trace sites --report r --top 3 sha256").is_empty());
        // Seal prints no counts.
        let n = notes("--trace sites seal --sector-size 2KiB --out o");
        assert!(n[0].ends_with("this run writes nothing of them"), "{n:?}");
        // Settings no mode of the run uses.
        let n = notes("--trace sample:100 --lifetimes 8 --report r sha256");
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with("--lifetimes sets how often sites mode"),
            "{n:?}"
        );
        let n = notes("--trace count --depth 8 --lifetimes 8 sha256");
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(
            n[1].starts_with("--depth sets the frames kept per stack"),
            "{n:?}"
        );
        assert!(notes("--trace sites --depth 8 --lifetimes 8 --report r sha256").is_empty());
        // Count mode walks the stacks of heap sampling's blocks.
        assert!(notes("--trace count --heap-sample 1KiB --depth 8 sha256").is_empty());
        assert!(notes("--trace count,sites --lifetimes 8 sha256 -i 4").is_empty());
    }

    #[test]
    fn a_subcommands_option_before_it_gets_a_tip() {
        for flag in ["-i 2", "--iterations 2", "--seed 3", "--iterations=2"] {
            let args = format!("--trace off,count {flag} sha256");
            let e = job(&args).map(|_| ()).unwrap_err();
            let flag = flag.split([' ', '=']).next().unwrap();
            assert!(
                e.contains(&format!(
                    "is the subcommand's: give it after it (sha256 {flag} ...)"
                )),
                "{args}: {e}"
            );
        }
        // Named as given, whichever subcommand it is.
        let e = job("-i 2 porep --sector-size 2KiB")
            .map(|_| ())
            .unwrap_err();
        assert!(e.contains("give it after it (porep -i ...)"), "{e}");
        // Other unknown arguments are clap's alone.
        let e = job("--bogus sha256").map(|_| ()).unwrap_err();
        assert!(!e.contains("subcommand's"), "{e}");
    }

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    /// The job of `synth-driver ARGS`, or its error message. These tests parse as
    /// the driver does, the environment included, so a tracer setting in it
    /// (`ALLOC_TRACE=count cargo test`) would change what they parse: they say so
    /// rather than fail on a wrong job.
    fn job(args: &str) -> Result<Job, String> {
        let set: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k == "ALLOC_TRACE" || k.starts_with("ALLOC_TRACE_"))
            .collect();
        assert!(
            set.is_empty(),
            "unset {} to run these tests: they parse the command line as the driver \
             does, the environment included",
            set.join(", ")
        );
        let cli = Cli::parse_args(std::iter::once("synth-driver").chain(args.split(' ')))
            .map_err(|e| format!("clap: {e}"))?;
        cli.into_job().map_err(|e| format!("{e:#}"))
    }

    fn porep_input(args: &str) -> Result<PorepInput, String> {
        match job(args)?.work {
            Work::Porep { input, .. } => Ok(input),
            other => panic!("{args}: not porep: {other:?}"),
        }
    }

    #[test]
    fn porep_inputs_accepted() {
        let cases = [
            (
                "porep --c1 c1.json",
                PorepInput::C1 {
                    path: "c1.json".into(),
                    partition: 0,
                },
            ),
            (
                "porep --c1 c1.json --partition 3",
                PorepInput::C1 {
                    path: "c1.json".into(),
                    partition: 3,
                },
            ),
            (
                "porep --sector-size 2KiB --synthetic --seed 5",
                PorepInput::Synthetic {
                    proof: P2K,
                    seed: 5,
                },
            ),
            (
                "porep --sector-size 2048 --blank --partition 0",
                PorepInput::Blank {
                    proof: P2K,
                    seed: 0,
                },
            ),
            (
                "porep --sector-size 2KiB --count-only",
                PorepInput::CountOnly {
                    proof: P2K,
                    circuit: CountedCircuit::Blank,
                },
            ),
            (
                "porep --sector-size 2KiB --count-only --synthetic --seed 2",
                PorepInput::CountOnly {
                    proof: P2K,
                    circuit: CountedCircuit::Synthetic { seed: 2 },
                },
            ),
        ];
        for (args, want) in cases {
            assert_eq!(porep_input(args), Ok(want), "{args}");
        }
    }

    #[test]
    fn porep_inputs_refused_in_one_line() {
        let cases = [
            ("porep", "porep needs --c1 FILE"),
            ("porep --sector-size 2KiB", "porep needs --c1 FILE"),
            ("porep --partition 1", "porep needs --c1 FILE"),
            (
                "porep --c1 c1.json --sector-size 2KiB",
                "exclude each other",
            ),
            (
                "porep --c1 c1.json --count-only",
                "--count-only goes with --sector-size",
            ),
            (
                "porep --c1 c1.json --blank",
                "--blank goes with --sector-size",
            ),
            (
                "porep --c1 c1.json --synthetic",
                "--synthetic goes with --sector-size",
            ),
            (
                "porep --c1 c1.json --seed 9",
                "--seed goes with --blank or --synthetic",
            ),
            (
                "porep --sector-size 2KiB --count-only --seed 9",
                "--seed goes with --blank or --synthetic",
            ),
            (
                "porep --sector-size 2KiB --blank --synthetic",
                "--blank and --synthetic",
            ),
            (
                "porep --sector-size 2KiB --blank --count-only",
                "--count-only and --blank",
            ),
            (
                "porep --sector-size 2KiB --blank --count-only --synthetic",
                "--blank and --synthetic",
            ),
            ("porep --sector-size 3KiB --blank", "clap: "),
            (
                "porep --sector-size 2KiB --synthetic --partition 7",
                "--partition 7 goes with --c1; --sector-size builds partition 0",
            ),
            (
                "porep --sector-size 2KiB --count-only -i 3",
                "--count-only counts once; --iterations 3 does not apply",
            ),
        ];
        for (args, want) in cases {
            let err = porep_input(args).unwrap_err();
            assert!(err.contains(want), "{args}: {err}");
            if !want.starts_with("clap") {
                assert_eq!(err.lines().count(), 1, "{args}: {err}");
            }
        }
    }

    #[test]
    fn trace_settings_reach_the_job() {
        let trace = |args| job(args).map(|j| (j.trace.depth, j.trace.lifetime_interval));
        assert_eq!(
            trace("--trace sites sha256"),
            Ok((
                alloc_tracer::DEFAULT_DEPTH,
                alloc_tracer::DEFAULT_LIFETIME_INTERVAL
            ))
        );
        assert_eq!(
            trace("--trace sites --depth 16 --lifetimes 0 sha256"),
            Ok((16, 0))
        );
        assert_eq!(
            trace("sha256 --lifetimes 256 --trace sites"),
            Ok((alloc_tracer::DEFAULT_DEPTH, 256))
        );
        assert!(
            trace("--lifetimes -1 sha256")
                .unwrap_err()
                .contains("clap: ")
        );
    }

    #[test]
    fn blank_switches_to_the_mirror_prover() {
        let prover = |args| job(args).map(|j| j.prover);
        assert_eq!(
            prover("porep --sector-size 2KiB --blank"),
            Ok(Prover::Mirror)
        );
        assert_eq!(prover("porep --c1 c1.json"), Ok(Prover::Reference));
        assert_eq!(prover("--prover mirror sha256"), Ok(Prover::Mirror));
        let err = prover("--prover reference porep --sector-size 2KiB --blank").unwrap_err();
        assert!(err.contains("--blank needs --prover mirror"), "{err}");
    }

    #[test]
    fn variants_where_they_apply() {
        for ok in [
            "--variant inplace-lc sha256",
            "--variant inplace-lc --prover mirror sha256",
            "--variant pooled-enforce --prover mirror poseidon",
            "--variant pooled-enforce porep --sector-size 2KiB --blank",
            "--variant pooled-enforce --prover mirror porep --c1 c1.json",
            "--variant baseline seal --sector-size 2KiB --out x",
            "--variant baseline,inplace-lc sha256 -i 4",
        ] {
            assert!(job(ok).is_ok(), "{ok}: {:?}", job(ok));
        }
        for (args, want) in [
            ("--variant pooled-enforce sha256", "needs --prover mirror"),
            ("--variant inplace-lc poseidon", "sha256 only, not poseidon"),
            (
                "--variant pooled-enforce porep --sector-size 2KiB --count-only",
                "does not apply to porep --count-only",
            ),
            (
                "--variant baseline,baseline seal --sector-size 2KiB --out x",
                "seal has no iterations",
            ),
            (
                "--variant baseline,inplace-lc --report r sha256",
                "mix them in one report",
            ),
        ] {
            let err = job(args).unwrap_err();
            assert!(err.contains(want), "{args}: {err}");
        }
    }

    #[test]
    fn modes_take_turns_where_they_can() {
        use Mode::{Count, Off, Sample, Sites};
        let modes = |args| job(args).map(|j| j.trace.modes);
        assert_eq!(modes("sha256"), Ok(vec![Off]));
        assert_eq!(modes("--trace sites sha256"), Ok(vec![Sites]));
        assert_eq!(
            modes("--trace off,count,sample:1000,sites sha256 -i 8"),
            Ok(vec![Off, Count, Sample(1000), Sites])
        );
        for (args, want) in [
            (
                "--trace off,count --variant baseline,inplace-lc sha256",
                "only one of them takes turns",
            ),
            (
                "--trace off,sites --report r sha256",
                "mix them in one report",
            ),
            (
                "--trace off,count seal --sector-size 2KiB --out x",
                "seal has no iterations",
            ),
            ("--trace off,bogus sha256", "clap:"),
            ("--trace , sha256", "an empty mode"),
            (
                "--trace sample:0 sha256",
                "expected off, count, sites or sample:N",
            ),
            (
                "--trace off,count sha256",
                "2 --trace values take turns by iteration, and --iterations 1 runs fewer",
            ),
            (
                "--trace off,count sha256 -i 3",
                "--iterations 3 leaves the last round short: give a multiple of 2 \
                 (--iterations 2 or 4)",
            ),
            // Times are kept by value: a value given twice would compare nothing.
            (
                "--variant baseline,baseline sha256 -i 4",
                "--variant baseline is given twice: each value takes one turn a round",
            ),
            (
                "--trace count,sites,count sha256 -i 6",
                "--trace count is given twice",
            ),
            ("--top 11 sha256", "the summary lists 0 to 10 sites"),
            (
                "--top 3 --trace sites sha256",
                "--top lists sites of the summary printed with --report",
            ),
            (
                "--report r sha256",
                "--report with --trace off would write a report of nothing",
            ),
            (
                "--trace sites porep --sector-size 2KiB --count-only",
                "--count-only counts rows untraced",
            ),
            // Not the advice to add --trace, which --count-only refuses in turn.
            (
                "--report r porep --sector-size 2KiB --count-only",
                "--trace and --report do not apply",
            ),
            (
                "--prover mirror porep --sector-size 2KiB --count-only",
                "seal and --count-only synthesize nothing",
            ),
            (
                "--prover mirror seal --sector-size 2KiB --out s",
                "seal and --count-only synthesize nothing",
            ),
        ] {
            let err = job(args).unwrap_err();
            assert!(err.contains(want), "{args}: {err}");
        }
    }
}
