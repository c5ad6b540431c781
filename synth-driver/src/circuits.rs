//! Circuits built from the real bellperson gadgets.

use anyhow::Result;
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::sha256::sha256;
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;
use rand::{Rng, SeedableRng};

/// A message of exactly `blocks` SHA-256 blocks (512 * blocks - 72 bits, so that the
/// padding fits in the last block), hashed with bellperson's `sha256` gadget or, for
/// the `inplace-lc` variant, with the driver's own gadgets ([`crate::inplace`]),
/// which build the same constraint system.
#[derive(Clone)]
pub struct Sha256Chain {
    bits: Vec<bool>,
    inplace: bool,
}

impl Sha256Chain {
    /// A random message of `blocks` blocks; `inplace` picks the driver's gadgets.
    pub fn random(blocks: usize, seed: u64, inplace: bool) -> Self {
        let mut rng = rand_xorshift::XorShiftRng::seed_from_u64(seed);
        let bits = (0..512 * blocks - 72).map(|_| rng.r#gen()).collect();
        Sha256Chain { bits, inplace }
    }

    fn synthesize_inplace<CS: ConstraintSystem<Fr>>(
        self,
        cs: &mut CS,
    ) -> Result<(), SynthesisError> {
        use crate::inplace::{Bit, alloc_bit, sha256};
        let bits = self
            .bits
            .iter()
            .map(|b| alloc_bit(cs, Some(*b)))
            .collect::<Result<Vec<_>, _>>()?;
        let digest = sha256(cs, &bits)?;
        if let Some(&Bit::Is(bit, value)) = digest.first() {
            let input = cs.alloc_input(
                || "digest bit 0",
                || {
                    value
                        .map(|b| if b { Fr::ONE } else { Fr::ZERO })
                        .ok_or(SynthesisError::AssignmentMissing)
                },
            )?;
            cs.enforce(
                || "digest bit 0 is public",
                |lc| lc + input,
                |lc| lc + CS::one(),
                |lc| lc + bit,
            );
        }
        Ok(())
    }
}

impl Circuit<Fr> for Sha256Chain {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        if self.inplace {
            return self.synthesize_inplace(cs);
        }
        let bits = self
            .bits
            .iter()
            .enumerate()
            .map(|(i, b)| {
                AllocatedBit::alloc(cs.namespace(|| format!("message bit {i}")), Some(*b))
                    .map(Boolean::from)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let digest = sha256(cs.namespace(|| "sha256"), &bits)?;
        // Expose the first digest bit, as circuits expose their commitments.
        if let Some(Boolean::Is(bit)) = digest.first() {
            let value = bit.get_value().map(|b| if b { Fr::ONE } else { Fr::ZERO });
            let input = cs.alloc_input(
                || "digest bit 0",
                || value.ok_or(SynthesisError::AssignmentMissing),
            )?;
            cs.enforce(
                || "digest bit 0 is public",
                |lc| lc + input,
                |lc| lc + CS::one(),
                |lc| lc + bit.get_variable(),
            );
        }
        Ok(())
    }
}

/// Arities of the Poseidon constants Filecoin pre-builds (filecoin-hashers'
/// `POSEIDON_CONSTANTS_*`).
pub const POSEIDON_ARITIES: [usize; 7] = [2, 4, 8, 11, 16, 24, 36];

/// A chain of `hashes` Poseidon hashes with neptune's legacy circuit (the one
/// filecoin-hashers and storage-proofs use) and filecoin-hashers' constants: each
/// hash takes the previous output and `arity - 1` random field elements, like a
/// Merkle inclusion path; the last output is a public input.
#[derive(Clone)]
pub struct PoseidonChain {
    hashes: usize,
    arity: usize,
    seed: u64,
}

impl PoseidonChain {
    /// `arity` must be one of [`POSEIDON_ARITIES`] (else synthesis fails).
    pub fn new(hashes: usize, arity: usize, seed: u64) -> Self {
        PoseidonChain {
            hashes,
            arity,
            seed,
        }
    }

    fn chain<A, CS>(
        self,
        cs: &mut CS,
        constants: &neptune::poseidon::PoseidonConstants<Fr, A>,
    ) -> Result<(), SynthesisError>
    where
        A: neptune::Arity<Fr>,
        CS: ConstraintSystem<Fr>,
    {
        use bellpepper_core::num::AllocatedNum;
        let mut rng = rand_xorshift::XorShiftRng::seed_from_u64(self.seed);
        let mut last: Option<AllocatedNum<Fr>> = None;
        for i in 0..self.hashes {
            let mut preimage = Vec::with_capacity(self.arity);
            preimage.extend(last.take());
            while preimage.len() < self.arity {
                let value = Fr::random(&mut rng);
                let j = preimage.len();
                preimage.push(AllocatedNum::alloc(
                    cs.namespace(|| format!("hash {i} element {j}")),
                    || Ok(value),
                )?);
            }
            last = Some(neptune::circuit::poseidon_hash(
                cs.namespace(|| format!("hash {i}")),
                preimage,
                constants,
            )?);
        }
        if let Some(out) = last {
            out.inputize(cs.namespace(|| "output"))?;
        }
        Ok(())
    }
}

impl Circuit<Fr> for PoseidonChain {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        use filecoin_hashers::*;
        match self.arity {
            2 => self.chain(cs, &*POSEIDON_CONSTANTS_2),
            4 => self.chain(cs, &*POSEIDON_CONSTANTS_4),
            8 => self.chain(cs, &*POSEIDON_CONSTANTS_8),
            11 => self.chain(cs, &*POSEIDON_CONSTANTS_11),
            16 => self.chain(cs, &*POSEIDON_CONSTANTS_16),
            24 => self.chain(cs, &*POSEIDON_CONSTANTS_24),
            36 => self.chain(cs, &*POSEIDON_CONSTANTS_36),
            _ => Err(SynthesisError::Unsatisfiable),
        }
    }
}

/// Size of a circuit as the prover sees it.
pub struct Shape {
    /// Rows of the prover's a/b/c vectors: constraints plus one per public input
    /// (the prover adds `input * 0 = 0` for each, the constant ONE included).
    pub rows: usize,
    /// Private variables.
    pub aux: usize,
    /// Public inputs, ONE included.
    pub inputs: usize,
}

/// Counts a circuit's rows, aux and inputs. Enforce closures are not run (like
/// bellperson's `BenchCS`): fine for counting, never used for profiling.
pub fn shape<C: Circuit<Fr>>(circuit: C) -> Result<Shape> {
    let mut cs = ShapeCS::default();
    alloc_tracer::untraced(|| circuit.synthesize(&mut cs))?;
    Ok(Shape {
        rows: cs.constraints + cs.inputs,
        aux: cs.aux,
        inputs: cs.inputs,
    })
}

/// A constraint system that only counts.
struct ShapeCS {
    inputs: usize,
    aux: usize,
    constraints: usize,
}

impl Default for ShapeCS {
    fn default() -> Self {
        // The prover allocates the constant ONE as input 0.
        ShapeCS {
            inputs: 1,
            aux: 0,
            constraints: 0,
        }
    }
}

impl ConstraintSystem<Fr> for ShapeCS {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        self.constraints += 1;
        crate::progress::publish_rows(self.constraints);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
