//! Whether a C1 output's vanilla proofs have the shape of its registered proof.
//!
//! A C1 output edited or assembled by hand can decode and still not fit: the circuit
//! would be built from it regardless, of another size than the sector's (a Merkle
//! path one level short makes fewer rows), or the proof library would panic on it (a
//! path level with too few hashes, a missing parent column, a column short of a row,
//! a hash that is not a field element). Each is refused with one line naming the proof
//! and what does not fit. Values are not checked further, as synthesis does not check
//! them: a proof that does not verify is synthesized all the same.

use anyhow::{Context, Result, bail};
use filecoin_proofs::DefaultPieceHasher;
use filecoin_proofs_api::RegisteredSealProof;
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{ColumnProof, Proof, PublicParams};
use typenum::Unsigned;

/// A Merkle proof of the sector's tree (comm_c's and comm_r_last's).
type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// Refuses a partition whose vanilla proofs do not have the shape of the C1
/// output's registered proof: its sector size, then [`check_proofs`].
pub fn check_partition<Tree: 'static + MerkleTreeTrait>(
    c1: &SealCommitPhase1Output,
    params: &PublicParams<Tree>,
    proofs: &[Proof<Tree, DefaultPieceHasher>],
    partition: usize,
) -> Result<()> {
    let proof = c1.registered_proof;
    let of_size = vanilla_sector_size(&c1.vanilla_proofs);
    if of_size != u64::from(proof.sector_size()) {
        bail!(
            "registered_proof {proof:?} is for {} bytes, and its vanilla proofs are of a \
             {of_size}-byte sector",
            u64::from(proof.sector_size())
        );
    }
    check_proofs(proof, params, proofs, partition)
}

/// Refuses vanilla proofs of one partition that do not have the shape `proof`'s
/// public parameters `params` give: the number of challenges, of layers and of parent
/// columns, and every Merkle path's levels and each level's hashes.
pub fn check_proofs<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
    params: &PublicParams<Tree>,
    proofs: &[Proof<Tree, DefaultPieceHasher>],
    partition: usize,
) -> Result<()> {
    let challenges = params.challenges.num_challenges_per_partition();
    if proofs.len() != challenges {
        bail!(
            "partition {partition} holds {} vanilla proofs, and {proof:?} challenges {challenges} \
             a partition",
            proofs.len()
        );
    }
    let nodes = params.graph.size();
    let (base_degree, exp_degree) = (
        params.graph.base_graph().degree(),
        params.graph.expansion_degree(),
    );
    for (i, p) in proofs.iter().enumerate() {
        let columns = &p.replica_column_proofs;
        let (layers, drg, exp) = (
            p.labeling_proofs.len(),
            columns.drg_parents.len(),
            columns.exp_parents.len(),
        );
        if layers != params.num_layers || drg != base_degree || exp != exp_degree {
            bail!(
                "partition {partition}, vanilla proof {i}: {layers} labeling proofs, {drg} DRG \
                 and {exp} expander parents ({proof:?} has {} layers, {base_degree} DRG and \
                 {exp_degree} expander parents)",
                params.num_layers
            );
        }
        let mut paths = vec![
            (
                "comm_d_proofs".to_owned(),
                path_fault(&p.comm_d_proofs, nodes),
            ),
            (
                "comm_r_last_proof".to_owned(),
                path_fault(&p.comm_r_last_proof, nodes),
            ),
        ];
        let named = std::iter::once(("c_x".to_owned(), &columns.c_x))
            .chain(
                columns
                    .drg_parents
                    .iter()
                    .enumerate()
                    .map(|(k, c)| (format!("DRG parent {k}"), c)),
            )
            .chain(
                columns
                    .exp_parents
                    .iter()
                    .enumerate()
                    .map(|(k, c)| (format!("expander parent {k}"), c)),
            );
        for (name, column) in named {
            let (inclusion, rows) = column_parts::<Tree>(column)?;
            paths.push((
                format!("{name}'s inclusion proof"),
                path_fault(&inclusion, nodes),
            ));
            // Its circuit asserts a row a layer.
            let layers = params.num_layers;
            paths.push((
                format!("{name}'s column"),
                (rows != layers).then(|| {
                    format!("{rows} rows, where the sector's {layers} layers make {layers}")
                }),
            ));
        }
        if let Some((name, fault)) = paths
            .into_iter()
            .find_map(|(name, fault)| Some((name, fault?)))
        {
            bail!("partition {partition}, vanilla proof {i}: {name} has {fault}");
        }
        let value = serde_json::to_value(p).context("a vanilla proof")?;
        if let Some(fault) = not_field_element(&value, &mut Vec::new()) {
            bail!("partition {partition}, vanilla proof {i}: {fault}");
        }
    }
    Ok(())
}

/// The first 32-byte value under `value` (a vanilla proof's serde form, in which every
/// hash, leaf, root, row and label is an array of 32 bytes and nothing else is) that
/// is not a field element's representation, named by where it lies
/// (`comm_r_last_proof/data/Single/root`): the proof library turns each into one with
/// an `unwrap`.
fn not_field_element(value: &serde_json::Value, at: &mut Vec<String>) -> Option<String> {
    use ff::PrimeField;
    match value {
        serde_json::Value::Array(items) => {
            let bytes: Option<Vec<u8>> = items
                .iter()
                .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            if let Some(bytes) = bytes.filter(|b| b.len() == 32) {
                let repr: [u8; 32] = bytes.try_into().expect("32 bytes");
                return blstrs::Scalar::from_repr_vartime(repr)
                    .is_none()
                    .then(|| format!("{} is not a field element", at.join("/")));
            }
            items.iter().enumerate().find_map(|(k, item)| {
                at.push(k.to_string());
                let found = not_field_element(item, at);
                at.pop();
                found
            })
        }
        serde_json::Value::Object(fields) => fields.iter().find_map(|(key, item)| {
            at.push(key.clone());
            let found = not_field_element(item, at);
            at.pop();
            found
        }),
        _ => None,
    }
}

/// What is wrong with the path of Merkle proof `p` for a tree over `leaves` leaves
/// of its arities, if anything: its number of levels, or a level's hashes (its
/// arity less one) or position (below its arity). The levels run from the leaf:
/// the base tree's, then the sub-tree's and the top tree's, where the tree has them.
fn path_fault<P: MerkleProofTrait>(p: &P, leaves: usize) -> Option<String> {
    let path = p.path();
    let expected = p.expected_len(leaves);
    if path.len() != expected {
        return Some(format!(
            "a path of {} levels, where a tree over {leaves} leaves has {expected}",
            path.len()
        ));
    }
    let (sub, top) = (P::SubTreeArity::to_usize(), P::TopTreeArity::to_usize());
    let base_levels = expected - usize::from(sub > 0) - usize::from(top > 0);
    let arities = std::iter::repeat_n(P::Arity::to_usize(), base_levels)
        .chain((sub > 0).then_some(sub))
        .chain((top > 0).then_some(top));
    path.iter()
        .zip(arities)
        .enumerate()
        .find(|(_, ((hashes, index), arity))| hashes.len() + 1 != *arity || index >= arity)
        .map(|(level, ((hashes, index), arity))| {
            format!(
                "{} hashes and position {index} at level {level} of its path, where a level \
                 of arity {arity} has {} and a position below {arity}",
                hashes.len(),
                arity - 1
            )
        })
}

/// A column proof's inclusion proof and its column's number of rows, which the proof
/// library keeps private: taken from the column proof's serde form, the form C1
/// outputs have.
fn column_parts<Tree: 'static + MerkleTreeTrait>(
    column: &ColumnProof<TreeProof<Tree>>,
) -> Result<(TreeProof<Tree>, usize)> {
    let mut value = serde_json::to_value(column).context("a column proof")?;
    let rows = value["column"]["rows"].as_array().map_or(0, Vec::len);
    let proof = value
        .get_mut("inclusion_proof")
        .map(serde_json::Value::take)
        .context("a column proof without its inclusion proof")?;
    let proof = serde_json::from_value(proof).context("a column proof's inclusion proof")?;
    Ok((proof, rows))
}

/// The sector size the vanilla proofs of a C1 output were made for.
fn vanilla_sector_size(proofs: &VanillaSealProof) -> u64 {
    use VanillaSealProof::*;
    match proofs {
        StackedDrg2KiBV1(_) => 2 << 10,
        StackedDrg8MiBV1(_) => 8 << 20,
        StackedDrg512MiBV1(_) => 512 << 20,
        StackedDrg32GiBV1(_) => 32 << 30,
        StackedDrg64GiBV1(_) => 64 << 30,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_hashers::poseidon::PoseidonHasher;
    use serde_json::{Value, json};
    use typenum::{U2, U8};

    /// A path of levels of these arities, each at position `index`.
    fn levels(arities: &[usize], index: usize) -> Value {
        let levels: Vec<Value> = arities
            .iter()
            .map(|&a| json!({ "hashes": vec![ZERO; a - 1], "index": index }))
            .collect();
        json!({ "path": levels })
    }

    /// A proof of the 64 GiB sector's tree shape (base arity 8, sub-tree 8, top 2).
    fn top_proof(base: &[usize], sub: &[usize], top: &[usize], index: usize) -> TopProof {
        serde_json::from_value(json!({ "data": { "Top": {
            "base_proof": levels(base, index),
            "sub_proof": levels(sub, index),
            "top_proof": levels(top, index),
            "root": ZERO,
            "leaf": ZERO,
        } } }))
        .unwrap()
    }

    type TopProof = MerkleProof<PoseidonHasher, U8, U8, U2>;

    /// A hash as serde writes it.
    const ZERO: [u8; 32] = [0; 32];

    /// 8^3 leaves in each of the 8 x 2 base trees: 3 base levels, a sub and a top.
    const LEAVES: usize = 512 * 16;

    #[test]
    fn a_path_of_the_trees_arities_fits() {
        assert_eq!(path_fault(&top_proof(&[8; 3], &[8], &[2], 1), LEAVES), None);
    }

    #[test]
    fn each_level_is_checked_against_its_own_trees_arity() {
        let fault = |p: TopProof| path_fault(&p, LEAVES).unwrap();
        assert!(
            fault(top_proof(&[8; 2], &[8], &[2], 0)).starts_with("a path of 4 levels"),
            "a base level short"
        );
        let top_as_base = fault(top_proof(&[8; 3], &[8], &[8], 0));
        assert!(
            top_as_base.contains("at level 4") && top_as_base.contains("arity 2 has 1"),
            "{top_as_base}"
        );
        let sub_as_top = fault(top_proof(&[8; 3], &[2], &[2], 0));
        assert!(
            sub_as_top.contains("at level 3") && sub_as_top.contains("arity 8 has 7"),
            "{sub_as_top}"
        );
        let position = fault(top_proof(&[8; 3], &[8], &[2], 7));
        assert!(
            position.contains("position 7 at level 4"),
            "a top position past its arity: {position}"
        );
    }

    #[test]
    fn a_single_tree_proof_for_a_tree_with_sub_and_top_levels_does_not_fit() {
        let single: TopProof = serde_json::from_value(json!({ "data": { "Single": {
            "path": levels(&[8; 5], 0),
            "root": ZERO,
            "leaf": ZERO,
        } } }))
        .unwrap();
        let fault = path_fault(&single, LEAVES).unwrap();
        assert!(fault.contains("at level 4"), "{fault}");
    }
}
