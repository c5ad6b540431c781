//! Circuits built from the real bellperson gadgets.

use anyhow::Result;
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::sha256::sha256;
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;
use rand::{Rng, SeedableRng};

/// A message of exactly `blocks` SHA-256 blocks (512 * blocks - 72 bits, so that the
/// padding fits in the last block), hashed with bellperson's `sha256` gadget.
#[derive(Clone)]
pub struct Sha256Chain {
    bits: Vec<bool>,
}

impl Sha256Chain {
    /// A random message of `blocks` blocks.
    pub fn random(blocks: usize, seed: u64) -> Self {
        let mut rng = rand_xorshift::XorShiftRng::seed_from_u64(seed);
        let bits = (0..512 * blocks - 72).map(|_| rng.r#gen()).collect();
        Sha256Chain { bits }
    }
}

impl Circuit<Fr> for Sha256Chain {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
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
