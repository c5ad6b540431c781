//! Filecoin PoRep: sealing a small sector offline, reading C1 outputs, and building the
//! StackedCircuit of one partition the way filecoin-proofs' commit phase 2 does.

use anyhow::{Context, Result, bail};
use base64::Engine;
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

/// Seals a sector of random data fully offline (piece, pre-commit 1 and 2, commit
/// phase 1; no Groth parameters) and writes `out/c1.json` in Curio's format.
/// `progress` is told each step as it starts.
pub fn seal_sector(
    proof: RegisteredSealProof,
    sector_size: u64,
    out: &Path,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf> {
    let work = out.join("sector");
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
    let mut data = vec![0u8; u64::from(unpadded) as usize];
    rand_xorshift::XorShiftRng::seed_from_u64(seed ^ 0x5eed).fill_bytes(&mut data);
    let mut staged_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)
        .with_context(|| format!("creating {}", staged.display()))?;
    let (piece, _) = seal::add_piece(proof, &data[..], &mut staged_file, unpadded, &[])
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
    let path = out.join("c1.json");
    std::fs::write(&path, serde_json::to_vec(&wrapper)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Reads a C1 output: Curio's c1.json, or the plain serde JSON of
/// `filecoin_proofs_api::seal::SealCommitPhase1Output`.
pub fn read_c1(path: &Path) -> Result<SealCommitPhase1Output> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not JSON (truncated or corrupt?)", path.display()))?;
    let plain = if value.get("Phase1Out").is_some() {
        let wrapper: CurioC1 = serde_json::from_value(value)
            .with_context(|| format!("{}: not a Curio c1.json", path.display()))?;
        base64::engine::general_purpose::STANDARD
            .decode(wrapper.phase1_out.trim())
            .with_context(|| format!("{}: Phase1Out is not base64", path.display()))?
    } else {
        bytes
    };
    serde_json::from_slice(&plain).with_context(|| {
        format!(
            "{}: not a SealCommitPhase1Output (corrupt or another version?)",
            path.display()
        )
    })
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
    let Some(proofs) = vanilla.get(partition) else {
        bail!("partition {partition} out of range: the C1 output has {n} partition(s)");
    };
    let comm_r = as_safe_commitment::<<Tree::Hasher as Hasher>::Domain, _>(&c1.comm_r, "comm_r")?;
    let comm_d = DefaultPieceDomain::try_from_bytes(&c1.comm_d).context("comm_d")?;
    let replica_id: blstrs::Scalar = c1.replica_id.into();
    let public_inputs = PublicInputs::<<Tree::Hasher as Hasher>::Domain, _> {
        replica_id: replica_id.into(),
        tau: Some(Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let public_params = public_params::<Tree>(c1.registered_proof)?;
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
