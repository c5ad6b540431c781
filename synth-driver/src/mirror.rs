//! The mirror prover: a constraint system that does what bellperson 0.27's private
//! `ProvingAssignment` does during synthesis (same vectors, density trackers and
//! evaluation, same per-input constraints and assignment conversion afterwards), and
//! also reports what the stock prover keeps to itself: the shape, a digest of the
//! a/b/c evaluations, and an `enforce` phase around every enforce-closure
//! evaluation so that reports tell closure allocations from gadget code.
//!
//! It can also stand in a random value for a missing assignment, which lets a blank
//! circuit (all values `None`) be synthesized: the same constraints and closures as
//! a real witness, without the witness arithmetic of the vanilla proofs.

use crate::lc_pool::LcPool;
use anyhow::{Result, bail};
use bellperson::multiexp::DensityTracker;
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use rand::SeedableRng;
use sha2::{Digest, Sha256};

/// What to do when the circuit has no value for a variable.
pub enum Missing {
    /// Fail with `AssignmentMissing`, as the stock prover does.
    Fail,
    /// Use a random field element (deterministic from the seed).
    Random(rand_xorshift::XorShiftRng),
}

impl Missing {
    /// Random values from `seed`.
    pub fn random(seed: u64) -> Self {
        Missing::Random(rand_xorshift::XorShiftRng::seed_from_u64(seed))
    }
}

/// What a mirror synthesis found.
pub struct Outcome {
    /// Rows of a/b/c (constraints plus one per input).
    pub rows: usize,
    /// Private variables.
    pub aux: usize,
    /// Public inputs, ONE included.
    pub inputs: usize,
    /// SHA-256 over the a, b and c evaluations in order, hex.
    pub abc_digest: String,
    /// Values substituted because the circuit had none.
    pub substituted: u64,
}

struct MirrorAssignment {
    a_aux_density: DensityTracker,
    b_input_density: DensityTracker,
    b_aux_density: DensityTracker,
    a: Vec<Fr>,
    b: Vec<Fr>,
    c: Vec<Fr>,
    input_assignment: Vec<Fr>,
    aux_assignment: Vec<Fr>,
    missing: Missing,
    substituted: u64,
    enforce_phase: Option<alloc_tracer::PhaseId>,
    /// Recycled combination buffers (the `pooled-enforce` variant).
    pool: Option<LcPool>,
}

impl MirrorAssignment {
    fn value(
        &mut self,
        f: impl FnOnce() -> Result<Fr, SynthesisError>,
    ) -> Result<Fr, SynthesisError> {
        match (f(), &mut self.missing) {
            (Err(SynthesisError::AssignmentMissing), Missing::Random(rng)) => {
                self.substituted += 1;
                Ok(Fr::random(rng))
            }
            (v, _) => v,
        }
    }
}

/// The value of `lc`, counting each variable with a non-zero coefficient in the
/// given density trackers (what bellperson's internal `eval_with_trackers` does).
fn evaluate(
    lc: &LinearCombination<Fr>,
    mut input_density: Option<&mut DensityTracker>,
    mut aux_density: Option<&mut DensityTracker>,
    inputs: &[Fr],
    aux: &[Fr],
) -> Fr {
    let mut sum = Fr::ZERO;
    let mut add = |value: Fr, coeff: &Fr| {
        sum += if *coeff == Fr::ONE {
            value
        } else {
            value * coeff
        };
    };
    for (&i, coeff) in lc.iter_inputs() {
        if !bool::from(coeff.is_zero()) {
            add(inputs[i], coeff);
            if let Some(d) = input_density.as_deref_mut() {
                d.inc(i);
            }
        }
    }
    for (&i, coeff) in lc.iter_aux() {
        if !bool::from(coeff.is_zero()) {
            add(aux[i], coeff);
            if let Some(d) = aux_density.as_deref_mut() {
                d.inc(i);
            }
        }
    }
    sum
}

impl ConstraintSystem<Fr> for MirrorAssignment {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = self.value(f)?;
        self.aux_assignment.push(v);
        self.a_aux_density.add_element();
        self.b_aux_density.add_element();
        Ok(Variable::new_unchecked(Index::Aux(
            self.aux_assignment.len() - 1,
        )))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = self.value(f)?;
        self.input_assignment.push(v);
        self.b_input_density.add_element();
        Ok(Variable::new_unchecked(Index::Input(
            self.input_assignment.len() - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        let guard = self.enforce_phase.map(alloc_tracer::PhaseId::enter);
        let (a, b, c) = match &mut self.pool {
            None => (
                a(LinearCombination::zero()),
                b(LinearCombination::zero()),
                c(LinearCombination::zero()),
            ),
            Some(pool) => (a(pool.take()), b(pool.take()), c(pool.take())),
        };
        // Inputs have full density in A (every input gets an `x * 0 = 0` row), and
        // C has no query of its own: only A's aux and B's trackers count.
        let (inputs, aux) = (&self.input_assignment, &self.aux_assignment);
        let a_value = evaluate(&a, None, Some(&mut self.a_aux_density), inputs, aux);
        let b_value = evaluate(
            &b,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
            inputs,
            aux,
        );
        let c_value = evaluate(&c, None, None, inputs, aux);
        self.a.push(a_value);
        self.b.push(b_value);
        self.c.push(c_value);
        crate::progress::publish_rows(self.a.len());
        match &mut self.pool {
            None => drop((a, b, c)),
            Some(pool) => {
                pool.put(a);
                pool.put(b);
                pool.put(c);
            }
        }
        drop(guard);
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

/// Synthesizes `circuit` the way bellperson's prover does, up to (and including) the
/// conversion of the assignments that precedes the first parameter access.
///
/// `pool`, when given, recycles the combination buffers of every `enforce` (the
/// `pooled-enforce` variant; see [`crate::lc_pool`]): same rows, fewer allocations.
/// Never inlined: `scripts/cost-model-check.py` counts the instructions between its
/// entry and its return under callgrind.
#[inline(never)]
pub fn synthesize<C: Circuit<Fr>>(
    circuit: C,
    missing: Missing,
    introspect: bool,
    pool: Option<LcPool>,
) -> Result<Outcome> {
    let mut cs = MirrorAssignment {
        a_aux_density: DensityTracker::new(),
        b_input_density: DensityTracker::new(),
        b_aux_density: DensityTracker::new(),
        a: vec![],
        b: vec![],
        c: vec![],
        input_assignment: vec![],
        aux_assignment: vec![],
        missing,
        substituted: 0,
        enforce_phase: introspect.then(|| alloc_tracer::phase_id("enforce")),
        pool,
    };
    cs.alloc_input(|| "", || Ok(Fr::ONE))?;
    if let Err(e) = circuit.synthesize(&mut cs) {
        bail!("synthesis failed: {e}");
    }
    for i in 0..cs.input_assignment.len() {
        cs.enforce(
            || "",
            |lc| lc + Variable::new_unchecked(Index::Input(i)),
            |lc| lc,
            |lc| lc,
        );
    }
    let mut digest = Sha256::new();
    for v in cs.a.iter().chain(&cs.b).chain(&cs.c) {
        digest.update(v.to_repr());
    }
    let outcome = Outcome {
        rows: cs.a.len(),
        aux: cs.aux_assignment.len(),
        inputs: cs.input_assignment.len(),
        abc_digest: digest
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
        substituted: cs.substituted,
    };
    witness_bytes(&mut cs);
    Ok(outcome)
}

/// The stock prover turns the assignments into byte representations before it asks
/// for parameters: the same allocations here, in a function of their own so that
/// the category rules can tell them from the assignment vectors themselves.
#[inline(never)]
fn witness_bytes(cs: &mut MirrorAssignment) {
    let inputs: Vec<_> = std::mem::take(&mut cs.input_assignment)
        .into_iter()
        .map(|s| s.to_repr())
        .collect();
    let aux: Vec<_> = std::mem::take(&mut cs.aux_assignment)
        .into_iter()
        .map(|s| s.to_repr())
        .collect();
    std::hint::black_box((&inputs, &aux));
}
