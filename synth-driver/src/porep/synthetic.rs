//! Partition circuits from synthetic vanilla proofs: every size's real constraint
//! system without sealing a sector of that size.

use super::public_params;
use crate::c1_shape;
use anyhow::{Context, Result};
use ff::PrimeField;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher};
use filecoin_proofs_api::RegisteredSealProof;
use rand::{Rng as _, SeedableRng};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{
    PublicInputs, StackedCircuit, StackedCompound, StackedDrg, Tau,
};

/// A partition circuit built from *synthetic* vanilla proofs: random field elements
/// in proofs of exactly the shape a real C1 output of this sector size has (Merkle
/// paths of the tree's arities and heights, columns of every layer, 6 DRG and 8
/// expander parent columns, one labeling proof per layer), with the roots shared
/// across challenges as the circuit requires. It goes through the same
/// `StackedCompound::circuit` path as a real C1, so the constraint system is the real
/// one for any size; the witness satisfies nothing (the prover never checks).
///
/// The proofs are generated as the serde JSON of `stacked::Proof` (the form C1
/// outputs take) and deserialized, because their Merkle proof types keep private
/// fields.
pub fn synthetic_circuit<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
    seed: u64,
) -> Result<StackedCircuit<Tree, DefaultPieceHasher>> {
    use serde_json::{Value, json};
    use storage_proofs_core::drgraph::Graph;
    use storage_proofs_porep::stacked::{EXP_DEGREE, TOTAL_PARENTS};
    use typenum::Unsigned;

    let pp = public_params::<Tree>(proof)?;
    let vp = &pp.vanilla_params;
    let shape = Synthetic {
        layers: vp.num_layers,
        nodes: vp.graph.size(),
        base: Tree::Arity::to_usize(),
        sub: Tree::SubTreeArity::to_usize(),
        top: Tree::TopTreeArity::to_usize(),
    };
    let rng = &mut rand_xorshift::XorShiftRng::seed_from_u64(seed);
    let comm_r_last = domain(rng);
    let comm_c = domain(rng);
    let mut proofs = vec![];
    for _ in 0..vp.challenges.num_challenges_per_partition() {
        let challenge = rng.gen_range(1..shape.nodes as u64);
        let comm_d = json!({ "data": { "Single": {
            "root": domain(rng),
            "leaf": domain(rng),
            "path": path(rng, 2, height(shape.nodes, 2)),
        } } });
        let c_x = shape.column(rng, &comm_c);
        let drg: Vec<Value> = (0..storage_proofs_core::drgraph::BASE_DEGREE)
            .map(|_| shape.column(rng, &comm_c))
            .collect();
        let exp: Vec<Value> = (0..EXP_DEGREE)
            .map(|_| shape.column(rng, &comm_c))
            .collect();
        let mut labeling = |layer: usize| {
            let parents: Vec<Value> = (0..TOTAL_PARENTS).map(|_| domain(rng)).collect();
            json!({ "parents": parents, "layer_index": layer, "node": challenge })
        };
        let labeling_proofs: Vec<Value> = (1..=shape.layers).map(&mut labeling).collect();
        let encoding_proof = labeling(shape.layers);
        proofs.push(json!({
            "comm_d_proofs": comm_d,
            "comm_r_last_proof": shape.tree_proof(rng, &comm_r_last),
            "replica_column_proofs": { "c_x": c_x, "drg_parents": drg, "exp_parents": exp },
            "labeling_proofs": labeling_proofs,
            "encoding_proof": encoding_proof,
        }));
    }
    let proofs: Vec<storage_proofs_porep::stacked::Proof<Tree, DefaultPieceHasher>> =
        serde_json::from_value(Value::Array(proofs))
            .context("synthetic vanilla proofs do not deserialize")?;
    alloc_tracer::untraced(|| c1_shape::check_proofs(proof, vp, &proofs, 0))
        .context("synthetic vanilla proofs")?;
    let comm_r = <Tree::Hasher as Hasher>::Domain::from(field(rng));
    let comm_d =
        DefaultPieceDomain::try_from_bytes(field(rng).to_repr().as_ref()).context("comm_d")?;
    let mut seed_bytes = [0u8; 32];
    rng.fill(&mut seed_bytes);
    let public_inputs = PublicInputs::<<Tree::Hasher as Hasher>::Domain, _> {
        replica_id: field(rng).into(),
        tau: Some(Tau { comm_d, comm_r }),
        k: None,
        seed: Some(seed_bytes),
    };
    <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
        StackedDrg<'_, Tree, DefaultPieceHasher>,
        _,
    >>::circuit(&public_inputs, (), &proofs, vp, Some(0))
}

type Rng = rand_xorshift::XorShiftRng;

fn field(rng: &mut Rng) -> blstrs::Scalar {
    <blstrs::Scalar as ff::Field>::random(rng)
}

/// A hash domain as serde writes it: the 32 bytes of a random field element.
fn domain(rng: &mut Rng) -> serde_json::Value {
    serde_json::json!(field(rng).to_repr().as_ref())
}

/// An inclusion path of `levels` levels: at each, the arity's other children and
/// the position among them.
fn path(rng: &mut Rng, arity: usize, levels: usize) -> serde_json::Value {
    let levels: Vec<serde_json::Value> = (0..levels)
        .map(|_| {
            let hashes: Vec<serde_json::Value> = (1..arity).map(|_| domain(rng)).collect();
            serde_json::json!({ "hashes": hashes, "index": rng.gen_range(0..arity) })
        })
        .collect();
    serde_json::json!({ "path": levels })
}

/// Levels of a tree of `arity` over `leaves` leaves.
fn height(leaves: usize, arity: usize) -> usize {
    let (mut levels, mut n) = (0, 1);
    while n < leaves {
        n *= arity;
        levels += 1;
    }
    levels
}

/// The dimensions of one sector size's vanilla proofs.
struct Synthetic {
    layers: usize,
    nodes: usize,
    base: usize,
    sub: usize,
    top: usize,
}

impl Synthetic {
    /// A Merkle proof of the sector's tree shape (base, sub and top trees) to `root`.
    fn tree_proof(&self, rng: &mut Rng, root: &serde_json::Value) -> serde_json::Value {
        let base_leaves = self.nodes / self.sub.max(1) / self.top.max(1);
        let base_path = path(rng, self.base, height(base_leaves, self.base));
        let leaf = domain(rng);
        let data = if self.top > 0 {
            serde_json::json!({ "Top": {
                "base_proof": base_path,
                "sub_proof": path(rng, self.sub, 1),
                "top_proof": path(rng, self.top, 1),
                "root": root,
                "leaf": leaf,
            } })
        } else if self.sub > 0 {
            serde_json::json!({ "Sub": {
                "base_proof": base_path,
                "sub_proof": path(rng, self.sub, 1),
                "root": root,
                "leaf": leaf,
            } })
        } else {
            serde_json::json!({ "Single": { "root": root, "leaf": leaf, "path": base_path } })
        };
        serde_json::json!({ "data": data })
    }

    /// A column (one label per layer) of a random node, opened against `comm_c`.
    fn column(&self, rng: &mut Rng, comm_c: &serde_json::Value) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = (0..self.layers).map(|_| domain(rng)).collect();
        let index = rng.gen_range(0..self.nodes as u32);
        serde_json::json!({
            "column": { "index": index, "rows": rows, "_h": null },
            "inclusion_proof": self.tree_proof(rng, comm_c),
        })
    }
}
