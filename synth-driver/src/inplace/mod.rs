//! The `inplace-lc` variant's own SHA-256 gadget layer.
//!
//! bellperson's SHA-256 gadget builds every linear combination out of temporaries:
//! `Boolean::lc` returns a fresh `LinearCombination` (one 160-byte buffer per
//! variable side) that is then added by reference (`lc + &tmp`) and dropped, and
//! `MultiEq` clones its two accumulated combinations on every packed equality and on
//! every flush. This module computes the same circuit while adding each term to the
//! combination being built, by value (`lc + (coeff, var)`), so the only combination
//! buffers left are the ones the constraint system receives.
//!
//! Everything else is kept as in bellperson, on purpose, so that an A/B comparison
//! isolates the linear-combination temporaries: words are `Vec`s of bits cloned and
//! rebuilt by rotations exactly as often as bellperson's `UInt32`, the field
//! arithmetic of the packed equalities is `MultiEq`'s ([`add_scaled`]), the same aux
//! variables are allocated in the same order with the same values, and the same
//! constraints are enforced in the same order (the packed equalities of `MultiEq`
//! included, flushed at the same points). So the mirror prover's a/b/c digest equals
//! the baseline's, which `tests/variants.rs` checks. Namespaces are omitted: both
//! provers ignore them.
//!
//! Limits: only what the SHA-256 chain needs (bits, 32-bit words, xor, ch, maj,
//! additions); no in-circuit value checks beyond bellperson's.

mod bit;
mod word;

pub use bit::{Bit, alloc_bit};

use bellperson::{ConstraintSystem, LinearCombination, SynthesisError};
use bit::{ch, maj};
use blstrs::Scalar as Fr;
use word::{PackedEqualities, Pending, Word, add_words};

type Lc = LinearCombination<Fr>;

/// SHA-256 round constants (FIPS 180-4, section 4.2.2).
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256 initial hash value (FIPS 180-4, section 5.3.3).
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// One SHA-256 compression of a 512-bit block (most significant bit of each word
/// first) onto the state `h`.
fn compress<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    block: &[Bit],
    h: &[Word],
) -> Result<Vec<Word>, SynthesisError> {
    assert_eq!(block.len(), 512);
    let mut eq = PackedEqualities::default();
    let mut w: Vec<Word> = block.chunks(32).map(Word::from_bits_be).collect();
    for i in 16..64 {
        let x = &w[i - 15];
        let s0 = x.rotr(7).xor(cs, &x.rotr(18))?.xor(cs, &x.shr(3))?;
        let y = &w[i - 2];
        let s1 = y.rotr(17).xor(cs, &y.rotr(19))?.xor(cs, &y.shr(10))?;
        let next = add_words(cs, &mut eq, &[w[i - 16].clone(), s0, w[i - 7].clone(), s1])?;
        w.push(next);
    }

    let mut a = Pending::Known(h[0].clone());
    let (mut b, mut c, mut d) = (h[1].clone(), h[2].clone(), h[3].clone());
    let mut e = Pending::Known(h[4].clone());
    let (mut f, mut g, mut hh) = (h[5].clone(), h[6].clone(), h[7].clone());
    for (i, &k) in K.iter().enumerate() {
        let e_now = e.resolve(cs, &mut eq, None)?;
        let s1 = e_now
            .rotr(6)
            .xor(cs, &e_now.rotr(11))?
            .xor(cs, &e_now.rotr(25))?;
        let choice = Word::bitwise(cs, [&e_now, &f, &g], ch, |a, b, c| (a & b) ^ (!a & c))?;
        let t1 = [hh.clone(), s1, choice, Word::constant(k), w[i].clone()];
        let a_now = a.resolve(cs, &mut eq, None)?;
        let s0 = a_now
            .rotr(2)
            .xor(cs, &a_now.rotr(13))?
            .xor(cs, &a_now.rotr(22))?;
        let majority = Word::bitwise(cs, [&a_now, &b, &c], maj, |a, b, c| {
            (a & b) ^ (a & c) ^ (b & c)
        })?;
        hh = g;
        g = f;
        f = e_now;
        e = Pending::Sum(t1.iter().cloned().chain([d]).collect());
        d = c;
        c = b;
        b = a_now;
        // Clones where bellperson clones, so that only combination buffers differ.
        let t2 = [s0, majority];
        a = Pending::Sum(t1.iter().cloned().chain(t2.iter().cloned()).collect());
    }

    let h0 = a.resolve(cs, &mut eq, Some(&h[0]))?;
    let h1 = add_words(cs, &mut eq, &[h[1].clone(), b])?;
    let h2 = add_words(cs, &mut eq, &[h[2].clone(), c])?;
    let h3 = add_words(cs, &mut eq, &[h[3].clone(), d])?;
    let h4 = e.resolve(cs, &mut eq, Some(&h[4]))?;
    let h5 = add_words(cs, &mut eq, &[h[5].clone(), f])?;
    let h6 = add_words(cs, &mut eq, &[h[6].clone(), g])?;
    let h7 = add_words(cs, &mut eq, &[h[7].clone(), hh])?;
    eq.finish(cs);
    Ok(vec![h0, h1, h2, h3, h4, h5, h6, h7])
}

/// SHA-256 of `message` (a whole number of bytes), padded as the standard says:
/// the digest's 256 bits, most significant first.
pub fn sha256<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    message: &[Bit],
) -> Result<Vec<Bit>, SynthesisError> {
    assert!(message.len().is_multiple_of(8));
    let length = message.len() as u64;
    let mut padded = message.to_vec();
    padded.push(Bit::Const(true));
    while !(padded.len() + 64).is_multiple_of(512) {
        padded.push(Bit::Const(false));
    }
    padded.extend((0..64).rev().map(|i| Bit::Const(length >> i & 1 == 1)));
    let mut state: Vec<Word> = IV.iter().map(|&v| Word::constant(v)).collect();
    for block in padded.chunks(512) {
        state = compress(cs, block, &state)?;
    }
    Ok(state.into_iter().flat_map(Word::into_bits_be).collect())
}
