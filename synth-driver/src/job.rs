//! What one run of the driver does, as plain data: the command line checked once
//! ([`crate::cli`] builds a [`Job`] before any work starts), so that running it
//! ([`crate::runner`]) never meets a flag combination it has to refuse.

use crate::allocator::Inner;
use alloc_tracer::Mode;
use filecoin_proofs_api::RegisteredSealProof;
use std::path::PathBuf;

/// A checked command line.
#[derive(Debug, PartialEq)]
pub struct Job {
    /// What the tracer records and where its report goes.
    pub trace: Trace,
    /// How iterations (and the summary) are printed.
    pub output: Output,
    /// The prover that synthesizes (unused by `seal` and `porep --count-only`).
    pub prover: Prover,
    /// One variant, or several taking turns by iteration. Never empty; works that
    /// synthesize nothing have exactly one, `baseline`.
    pub variants: Vec<Variant>,
    /// The inner allocator the command line asks for (`None`: the default).
    pub allocator: Option<Inner>,
    /// The work itself.
    pub work: Work,
    /// What the user should know before the run starts (printed on standard
    /// error).
    pub notes: Vec<String>,
}

/// The tracer's settings for the run.
#[derive(Debug, PartialEq)]
pub struct Trace {
    /// What the tracer records: one mode, or several taking turns by iteration
    /// (never with several variants). Never empty.
    pub modes: Vec<Mode>,
    /// Frames kept per call stack.
    pub depth: usize,
    /// Heap sampling's mean interval in bytes (`None`: the mode's default).
    pub heap_interval: Option<u64>,
    /// Mean allocations between blocks followed for lifetimes (0: none).
    pub lifetime_interval: u64,
    /// The timeline's interval in milliseconds (0: none).
    pub timeline_ms: u64,
    /// Directory the report is written to at the end, if any.
    pub report: Option<PathBuf>,
    /// Sites listed in the printed summary.
    pub top: usize,
}

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// One line of text per iteration; the summary on stdout.
    Text,
    /// One JSON object per iteration; the summary on stderr, so stdout stays JSON.
    Json,
}

/// The prover that synthesizes the circuits: `Reference`, stock bellperson
/// (`create_proof_batch`, stopped right after synthesis), or `Mirror`, the driver's
/// replica of bellperson's `ProvingAssignment`, with an `enforce` phase and a digest
/// of a/b/c. (Said here rather than on each variant: `--prover`'s own help already
/// describes both, and variant docs would make clap list them a second time.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Prover {
    Reference,
    Mirror,
}

impl Prover {
    /// The name the output and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Prover::Reference => "reference",
            Prover::Mirror => "mirror",
        }
    }
}

/// Patch variants (`--variant`). Each keeps the constraint system, so the mirror
/// prover's a/b/c digest equals the baseline's; they differ in allocations only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Variant {
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
    /// The name the output and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::PooledEnforce => "pooled-enforce",
            Variant::InplaceLc => "inplace-lc",
        }
    }
}

/// The work of a run: one per subcommand.
#[derive(Debug, PartialEq)]
pub enum Work {
    /// Seal a sector of random data offline and write its C1 output.
    Seal {
        /// The registered proof the sector is sealed with.
        proof: RegisteredSealProof,
        /// Sector size in bytes.
        sector_size: u64,
        /// Directory for c1.json and the sector's files.
        out: PathBuf,
        /// Seed of the sector's data, ticket and challenge seed.
        seed: u64,
    },
    /// A chain of SHA-256 compressions.
    Sha256 {
        /// Message blocks.
        blocks: u64,
        /// Seed of the first round's message (each round adds its number).
        seed: u64,
        /// Iterations.
        iterations: u64,
    },
    /// A chain of Poseidon hashes.
    Poseidon {
        /// Hashes.
        hashes: u64,
        /// Inputs per hash.
        arity: usize,
        /// Seed of the first round's preimages (each round adds its number).
        seed: u64,
        /// Iterations.
        iterations: u64,
    },
    /// One Filecoin PoRep partition.
    Porep {
        /// Where the partition's circuit comes from.
        input: PorepInput,
        /// Iterations (ignored by [`PorepInput::CountOnly`], which counts once).
        iterations: u64,
    },
}

/// Where `porep` takes its partition from: the one valid reading of `--c1`,
/// `--sector-size`, `--synthetic`, `--blank` and `--count-only`.
#[derive(Debug, PartialEq)]
pub enum PorepInput {
    /// `--c1 FILE [--partition K]`: a real partition of a C1 output, any sector size.
    C1 {
        /// The C1 output (Curio's c1.json or the plain JSON).
        path: PathBuf,
        /// Partition to synthesize (checked against the file once it is read).
        partition: usize,
    },
    /// `--sector-size SIZE --synthetic`: partition 0 built from random vanilla proofs
    /// of that size's shape.
    Synthetic {
        /// The registered proof of the sector size.
        proof: RegisteredSealProof,
        /// Seed of the synthetic proofs.
        seed: u64,
    },
    /// `--sector-size SIZE --blank`: the blank circuit, the mirror prover standing
    /// in random values for the missing witness.
    Blank {
        /// The registered proof of the sector size.
        proof: RegisteredSealProof,
        /// Seed of the substituted values (each round adds its number).
        seed: u64,
    },
    /// `--sector-size SIZE --count-only [--synthetic]`: rows, aux and inputs counted
    /// without a witness.
    CountOnly {
        /// The registered proof of the sector size.
        proof: RegisteredSealProof,
        /// The circuit counted.
        circuit: CountedCircuit,
    },
}

/// The circuit `porep --count-only` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountedCircuit {
    /// The blank circuit (every value missing; the same constraints).
    Blank,
    /// The circuit of synthetic vanilla proofs from this seed.
    Synthetic {
        /// Seed of the synthetic proofs.
        seed: u64,
    },
}

impl Work {
    /// The input file it reads, if any (`porep --c1`): looked up before the run's
    /// notes are printed, so that a path mistyped is the one thing said.
    pub fn input_file(&self) -> Option<&std::path::Path> {
        match self {
            Work::Porep {
                input: PorepInput::C1 { path, .. },
                ..
            } => Some(path),
            _ => None,
        }
    }

    /// The command as error messages name it.
    pub fn command(&self) -> &'static str {
        match self {
            Work::Seal { .. } => "seal",
            Work::Sha256 { .. } => "sha256",
            Work::Poseidon { .. } => "poseidon",
            Work::Porep {
                input: PorepInput::CountOnly { .. },
                ..
            } => "porep --count-only",
            Work::Porep { .. } => "porep",
        }
    }

    /// The iterations it synthesizes (0 for work that synthesizes nothing).
    pub fn iterations(&self) -> u64 {
        match self {
            Work::Sha256 { iterations, .. }
            | Work::Poseidon { iterations, .. }
            | Work::Porep { iterations, .. }
                if self.synthesizes() =>
            {
                *iterations
            }
            _ => 0,
        }
    }

    /// Whether the work synthesizes circuits (with a prover, over iterations).
    pub fn synthesizes(&self) -> bool {
        !matches!(
            self,
            Work::Seal { .. }
                | Work::Porep {
                    input: PorepInput::CountOnly { .. },
                    ..
                }
        )
    }
}
