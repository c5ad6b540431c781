//! The reference prover: stock bellperson, stopped right after synthesis.
//!
//! `create_proof_batch` synthesizes every circuit (one `ProvingAssignment` each, in
//! parallel), converts the assignments, and only then asks its `ParameterSource` for
//! the verifying key. [`StopAfterSynthesis`] answers that first request with an error,
//! so the real prover code runs up to the end of synthesis and nothing after it, with
//! no Groth parameters.

use anyhow::{Result, bail};
use bellperson::groth16::{ParameterSource, VerifyingKey, create_proof_batch};
use bellperson::{Circuit, SynthesisError};
use blstrs::{Bls12, G1Affine, G2Affine, Scalar as Fr};
use ff::Field;
use std::sync::Arc;

/// A parameter source that ends the proof at its first request.
pub struct StopAfterSynthesis;

/// The error [`StopAfterSynthesis`] returns; seeing it means synthesis finished.
const STOP: fn() -> SynthesisError = || SynthesisError::MalformedVerifyingKey;

impl ParameterSource<Bls12> for StopAfterSynthesis {
    type G1Builder = (Arc<Vec<G1Affine>>, usize);
    type G2Builder = (Arc<Vec<G2Affine>>, usize);

    fn get_vk(&self, _: usize) -> Result<&VerifyingKey<Bls12>, SynthesisError> {
        Err(STOP())
    }
    fn get_h(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        Err(STOP())
    }
    fn get_l(&self, _: usize) -> Result<Self::G1Builder, SynthesisError> {
        Err(STOP())
    }
    fn get_a(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        Err(STOP())
    }
    fn get_b_g1(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G1Builder, Self::G1Builder), SynthesisError> {
        Err(STOP())
    }
    fn get_b_g2(
        &self,
        _: usize,
        _: usize,
    ) -> Result<(Self::G2Builder, Self::G2Builder), SynthesisError> {
        Err(STOP())
    }
}

/// Synthesizes `circuits` with the stock bellperson prover.
pub fn synthesize_reference<C: Circuit<Fr> + Send>(circuits: Vec<C>) -> Result<()> {
    let n = circuits.len();
    let zeros = vec![Fr::ZERO; n];
    match create_proof_batch::<Bls12, C, _>(circuits, StopAfterSynthesis, zeros.clone(), zeros) {
        Err(SynthesisError::MalformedVerifyingKey) => Ok(()),
        Err(e) => bail!("synthesis failed: {e}"),
        Ok(_) => bail!("the prover produced a proof without parameters"),
    }
}
