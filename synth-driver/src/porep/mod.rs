//! Filecoin PoRep: sealing a small sector offline, reading C1 outputs, and building the
//! StackedCircuit of one partition the way filecoin-proofs' commit phase 2 does.

mod synthetic;

pub use synthetic::synthetic_circuit;

use crate::c1_shape;
use anyhow::{Context, Result, bail};
use base64::Engine;
use ff::PrimeField;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::parameters::setup_params;
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, as_safe_commitment};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{
    PaddedBytesAmount, RegisteredSealProof, SectorId, UnpaddedBytesAmount, seal,
};
use rand::{RngCore, SeedableRng};
use std::path::{Path, PathBuf};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{
    PublicInputs, StackedCircuit, StackedCompound, StackedDrg, Tau,
};

/// Sector sizes the driver knows, with the registered proof (v1.1, interactive PoRep)
/// used to seal them.
pub const SECTOR_SIZES: &[(&str, u64, RegisteredSealProof)] = &[
    ("2KiB", 2 << 10, RegisteredSealProof::StackedDrg2KiBV1_1),
    ("8MiB", 8 << 20, RegisteredSealProof::StackedDrg8MiBV1_1),
    (
        "512MiB",
        512 << 20,
        RegisteredSealProof::StackedDrg512MiBV1_1,
    ),
    ("32GiB", 32 << 30, RegisteredSealProof::StackedDrg32GiBV1_1),
    ("64GiB", 64 << 30, RegisteredSealProof::StackedDrg64GiBV1_1),
];

/// Runs `$body` with the type alias `$tree` bound to the merkle-tree shape of sector
/// size `$bytes` (the circuit types are generic over it), or fails for other sizes.
macro_rules! with_tree_shape {
    ($bytes:expr, $tree:ident => $body:expr) => {{
        match u64::from($bytes) {
            0x800 => {
                type $tree = filecoin_proofs::SectorShape2KiB;
                $body
            }
            0x80_0000 => {
                type $tree = filecoin_proofs::SectorShape8MiB;
                $body
            }
            0x2000_0000 => {
                type $tree = filecoin_proofs::SectorShape512MiB;
                $body
            }
            0x8_0000_0000 => {
                type $tree = filecoin_proofs::SectorShape32GiB;
                $body
            }
            0x10_0000_0000 => {
                type $tree = filecoin_proofs::SectorShape64GiB;
                $body
            }
            other => anyhow::bail!("unsupported sector size {other}"),
        }
    }};
}
pub(crate) use with_tree_shape;

/// Parses `2KiB`, `8MiB`, `512MiB`, `32GiB`, `64GiB` (or the size in bytes).
pub fn parse_sector_size(s: &str) -> Result<(u64, RegisteredSealProof), String> {
    SECTOR_SIZES
        .iter()
        .find(|(name, bytes, _)| name.eq_ignore_ascii_case(s) || s.parse() == Ok(*bytes))
        .map(|&(_, bytes, proof)| (bytes, proof))
        .ok_or_else(|| {
            let names: Vec<&str> = SECTOR_SIZES.iter().map(|s| s.0).collect();
            format!(
                "unknown sector size {s:?}; expected one of {}",
                names.join(", ")
            )
        })
}

/// Curio's (and lotus-bench's) c1.json: the C1 output as base64 of its serde JSON.
#[derive(serde::Serialize, serde::Deserialize)]
struct CurioC1 {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

/// The file that marks a folder as `seal`'s output, which a later `seal` may write
/// over.
const SEALED_MARK: &str = ".synth-driver-seal";

/// Refuses `out` unless it is absent, empty, or an earlier `seal`'s output (marked
/// by [`SEALED_MARK`]): sealing removes an earlier `sector/` there, writes its own,
/// and renames its `c1.json` over the earlier one.
fn check_seal_folder(out: &Path) -> Result<()> {
    // A link to a folder (on a larger disk, say) is that folder.
    let meta = match std::fs::metadata(out) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("--out {}", out.display())),
    };
    if !meta.is_dir() {
        anyhow::bail!("--out {}: exists and is not a folder", out.display());
    }
    if out.join(SEALED_MARK).is_file() {
        return Ok(());
    }
    let first = std::fs::read_dir(out)
        .with_context(|| format!("--out {}", out.display()))?
        .next()
        .transpose()
        .with_context(|| format!("--out {}", out.display()))?;
    match first {
        None => Ok(()),
        Some(entry) => anyhow::bail!(
            "--out {}: holds {} and is not an earlier seal's output; not writing over it \
             (choose a new or empty folder)",
            out.display(),
            entry.file_name().to_string_lossy()
        ),
    }
}

/// Fails unless the SDR parent cache's folder exists or can be made: pre-commit 1
/// writes the cache there, and when it cannot, filecoin-proofs' error names neither
/// the folder nor the variable, after the piece was made. (A folder that exists may
/// be read-only and already hold the cache, which is then only read.)
fn check_parent_cache() -> Result<()> {
    let dir = std::env::var_os("FIL_PROOFS_PARENT_CACHE")
        .map_or_else(|| PathBuf::from("/var/tmp/filecoin-parents"), PathBuf::from);
    std::fs::create_dir_all(&dir).with_context(|| {
        format!(
            "the SDR parent cache's folder {} (FIL_PROOFS_PARENT_CACHE) cannot be made",
            dir.display()
        )
    })
}

/// filecoin-proofs' error for a damaged SDR parent cache file (cut short by a seal
/// that was killed, say), with what to do: every later seal fails on it until it is
/// deleted, and the next seal then makes it again.
fn parent_cache_hint(e: anyhow::Error) -> anyhow::Error {
    if format!("{e:#}").contains("corrupted cache") {
        e.context(
            "the SDR parent cache file is damaged (delete it, and the next seal makes it \
             again)",
        )
    } else {
        e
    }
}

/// The piece's random bytes, made as they are read (a whole piece in memory would
/// need the sector's size in RAM before sealing even starts). Drawn in chunks of a
/// multiple of 8 bytes, as the piece's length is, so that the bytes are those of one
/// `fill_bytes` over the whole piece.
struct RandomPiece {
    rng: rand_xorshift::XorShiftRng,
    left: u64,
    chunk: Vec<u8>,
    at: usize,
}

impl RandomPiece {
    const CHUNK: usize = 1 << 16;

    fn new(seed: u64, len: u64) -> Self {
        RandomPiece {
            rng: rand_xorshift::XorShiftRng::seed_from_u64(seed),
            left: len,
            chunk: Vec::new(),
            at: 0,
        }
    }
}

impl std::io::Read for RandomPiece {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.chunk.len() {
            let n = (self.left as usize).min(Self::CHUNK);
            if n == 0 {
                return Ok(0);
            }
            self.chunk.resize(n, 0);
            self.rng.fill_bytes(&mut self.chunk);
            self.left -= n as u64;
            self.at = 0;
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Seals a sector of random data fully offline (piece, pre-commit 1 and 2, commit
/// phase 1; no Groth parameters) and writes `out/c1.json` in Curio's format.
/// `out` must be absent, empty or an earlier seal's output, which this replaces: its
/// `c1.json` only once this one's is written, so that a seal that fails (or is
/// killed) leaves the earlier C1, which needs nothing else. `progress` is told each
/// step as it starts.
pub fn seal_sector(
    proof: RegisteredSealProof,
    sector_size: u64,
    out: &Path,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf> {
    check_seal_folder(out)?;
    check_parent_cache()?;
    // An earlier seal's sector goes first: pre-commit 1 took the trees in its cache
    // for this sector's and failed halfway ("pieces and comm_d do not match"). Its
    // C1 stays until this one's replaces it: a C1 holds all a synthesis reads.
    let work = out.join("sector");
    if let Err(e) = std::fs::remove_dir_all(&work)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(e).with_context(|| format!("removing the earlier seal's {}", work.display()));
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mark = out.join(SEALED_MARK);
    std::fs::write(
        &mark,
        b"written by synth-driver seal: a later seal may replace this folder's contents\n",
    )
    .with_context(|| format!("writing {}", mark.display()))?;
    let cache = work.join("cache");
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let staged = work.join("staged");
    let sealed = work.join("sealed");
    let mut rng = rand_xorshift::XorShiftRng::seed_from_u64(seed);
    let mut bytes32 = || {
        let mut b = [0u8; 32];
        rng.fill_bytes(&mut b);
        b
    };
    let (prover_id, ticket, mut chain_seed) = (bytes32(), bytes32(), bytes32());
    chain_seed[31] |= 1; // commit phase 2 rejects an all-zero seed
    let sector_id = SectorId::from(1);

    progress("piece");
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(sector_size));
    let data = RandomPiece::new(seed ^ 0x5eed, u64::from(unpadded));
    let mut staged_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)
        .with_context(|| format!("creating {}", staged.display()))?;
    let (piece, _) = seal::add_piece(proof, data, &mut staged_file, unpadded, &[])
        .context("adding the piece")?;
    drop(staged_file);
    std::fs::File::create(&sealed).with_context(|| format!("creating {}", sealed.display()))?;

    progress("pre-commit phase 1 (SDR labels)");
    let p1 = seal::seal_pre_commit_phase1(
        proof,
        &cache,
        &staged,
        &sealed,
        prover_id,
        sector_id,
        ticket,
        std::slice::from_ref(&piece),
    )
    .map_err(parent_cache_hint)
    .context("pre-commit phase 1")?;
    progress("pre-commit phase 2 (trees)");
    let p2 = seal::seal_pre_commit_phase2(p1, &cache, &sealed).context("pre-commit phase 2")?;
    progress("commit phase 1 (vanilla proofs)");
    let c1 = seal::seal_commit_phase1(
        &cache,
        &sealed,
        prover_id,
        sector_id,
        ticket,
        chain_seed,
        p2,
        std::slice::from_ref(&piece),
    )
    .context("commit phase 1")?;

    let json = serde_json::to_vec(&c1).context("encoding the C1 output")?;
    let wrapper = CurioC1 {
        sector_num: u64::from(sector_id),
        phase1_out: base64::engine::general_purpose::STANDARD.encode(json),
        sector_size,
    };
    // Written aside, then renamed over the earlier one: never half a C1.
    let path = out.join("c1.json");
    let partial = out.join("c1.json.partial");
    std::fs::write(&partial, serde_json::to_vec(&wrapper)?)
        .with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Reads a C1 output: Curio's c1.json, or the plain serde JSON of
/// `filecoin_proofs_api::seal::SealCommitPhase1Output`.
pub fn read_c1(path: &Path) -> Result<SealCommitPhase1Output> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not JSON (truncated or corrupt?)", path.display()))?;
    let (plain, claimed) = if value.get("Phase1Out").is_some() {
        let wrapper: CurioC1 = serde_json::from_value(value)
            .with_context(|| format!("{}: not a Curio c1.json", path.display()))?;
        let plain = base64::engine::general_purpose::STANDARD
            .decode(wrapper.phase1_out.trim())
            .with_context(|| format!("{}: Phase1Out is not base64", path.display()))?;
        (plain, Some(wrapper.sector_size))
    } else {
        (bytes, None)
    };
    let c1: SealCommitPhase1Output = serde_json::from_slice(&plain).with_context(|| {
        format!(
            "{}: not a SealCommitPhase1Output (corrupt or another version?)",
            path.display()
        )
    })?;
    // The wrapper's own size and its proof's: a file edited or put together by hand
    // could say one and hold the other.
    let proof_size = u64::from(c1.registered_proof.sector_size());
    if let Some(claimed) = claimed.filter(|&c| c != proof_size) {
        bail!(
            "{}: its SectorSize says {claimed} bytes, its proof ({:?}) is of {proof_size}",
            path.display(),
            c1.registered_proof
        );
    }
    Ok(c1)
}

/// Partitions in the C1 output's proof.
pub fn partitions(c1: &SealCommitPhase1Output) -> usize {
    usize::from(c1.registered_proof.as_v1_config().partitions)
}

/// Builds the StackedCircuit of `partition`, as `seal_commit_phase2` does before it
/// hands the circuits to bellperson.
pub fn partition_circuit<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
    partition: usize,
) -> Result<StackedCircuit<Tree, DefaultPieceHasher>> {
    let vanilla: Vec<Vec<storage_proofs_porep::stacked::Proof<Tree, DefaultPieceHasher>>> = c1
        .vanilla_proofs
        .clone()
        .try_into()
        .context("vanilla proofs of another shape")?;
    let n = vanilla.len();
    if n != partitions(c1) {
        bail!(
            "the C1 output holds vanilla proofs of {n} partition(s), and {:?} has {}",
            c1.registered_proof,
            partitions(c1)
        );
    }
    let Some(proofs) = vanilla.get(partition) else {
        bail!("partition {partition} out of range: the C1 output has {n} partition(s)");
    };
    let comm_r = as_safe_commitment::<<Tree::Hasher as Hasher>::Domain, _>(&c1.comm_r, "comm_r")?;
    let comm_d = DefaultPieceDomain::try_from_bytes(&c1.comm_d).context("comm_d")?;
    let replica_bytes: [u8; 32] = c1.replica_id.into();
    let replica_id = blstrs::Scalar::from_repr_vartime(replica_bytes)
        .context("replica_id is not a field element")?;
    let public_inputs = PublicInputs::<<Tree::Hasher as Hasher>::Domain, _> {
        replica_id: replica_id.into(),
        tau: Some(Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let public_params = public_params::<Tree>(c1.registered_proof)?;
    // The driver's own check, not the prover's work: kept out of the report.
    alloc_tracer::untraced(|| {
        c1_shape::check_partition(c1, &public_params.vanilla_params, proofs, partition)
    })?;
    let circuit = <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::circuit(
        &public_inputs,
        (),
        proofs,
        &public_params.vanilla_params,
        Some(partition),
    )?;
    Ok(circuit)
}

/// The compound public parameters of a sector size, as commit phase 2 sets them up.
fn public_params<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
) -> Result<compound_proof::PublicParams<'static, StackedDrg<'static, Tree, DefaultPieceHasher>>> {
    let config = proof.as_v1_config();
    let setup = compound_proof::SetupParams {
        vanilla_params: setup_params(&config)?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'static, Tree, DefaultPieceHasher>,
        _,
    >>::setup(&setup)
}

/// The circuit of one partition with no witness (every value `None`): the same
/// constraints as a real partition, for counting rows without holding a witness.
pub fn blank_circuit<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
) -> Result<StackedCircuit<Tree, DefaultPieceHasher>> {
    let pp = public_params::<Tree>(proof)?;
    Ok(
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'static, Tree, DefaultPieceHasher>,
            _,
        >>::blank_circuit(&pp.vanilla_params),
    )
}
