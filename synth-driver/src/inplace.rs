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

use bellperson::{ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};

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

fn field(b: bool) -> Fr {
    if b { Fr::ONE } else { Fr::ZERO }
}

fn known(v: Option<bool>) -> Result<Fr, SynthesisError> {
    v.map(field).ok_or(SynthesisError::AssignmentMissing)
}

/// A circuit bit: a boolean-constrained variable, its negation, or a constant.
/// Values are those of the underlying variable (`Not` included), as in bellpepper.
#[derive(Clone, Copy, Debug)]
pub enum Bit {
    /// The variable itself.
    Is(Variable, Option<bool>),
    /// One minus the variable.
    Not(Variable, Option<bool>),
    /// A constant, no variable.
    Const(bool),
}

impl Bit {
    /// The bit's value, if known.
    pub fn value(self) -> Option<bool> {
        match self {
            Bit::Is(_, v) => v,
            Bit::Not(_, v) => v.map(|b| !b),
            Bit::Const(b) => Some(b),
        }
    }

    fn not(self) -> Bit {
        match self {
            Bit::Is(x, v) => Bit::Not(x, v),
            Bit::Not(x, v) => Bit::Is(x, v),
            Bit::Const(b) => Bit::Const(!b),
        }
    }

    fn is_constant(self) -> bool {
        matches!(self, Bit::Const(_))
    }

    /// `lc + coeff * self`, adding the terms to `lc` itself.
    fn add_to(self, lc: Lc, coeff: Fr, one: Variable) -> Lc {
        match self {
            Bit::Is(x, _) => lc + (coeff, x),
            Bit::Not(x, _) => lc + (coeff, one) - (coeff, x),
            Bit::Const(true) => lc + (coeff, one),
            Bit::Const(false) => lc,
        }
    }
}

/// Allocates a boolean-constrained bit: `(1 - x) * x = 0`.
pub fn alloc_bit<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    value: Option<bool>,
) -> Result<Bit, SynthesisError> {
    let x = cs.alloc(|| "bit", || known(value))?;
    cs.enforce(
        || "bit is boolean",
        |lc| lc + CS::one() - x,
        |lc| lc + x,
        |lc| lc,
    );
    Ok(Bit::Is(x, value))
}

type Var = (Variable, Option<bool>);

fn both(a: Option<bool>, b: Option<bool>, f: impl Fn(bool, bool) -> bool) -> Option<bool> {
    Some(f(a?, b?))
}

/// `(2a) * b = a + b - r`: r is a xor b (variables).
fn xor_vars<CS: ConstraintSystem<Fr>>(cs: &mut CS, a: Var, b: Var) -> Result<Bit, SynthesisError> {
    let value = both(a.1, b.1, |x, y| x ^ y);
    let r = cs.alloc(|| "result", || known(value))?;
    let two = Fr::ONE.double();
    cs.enforce(
        || "xor",
        |lc| lc + (two, a.0),
        |lc| lc + b.0,
        |lc| lc + a.0 + b.0 - r,
    );
    Ok(Bit::Is(r, value))
}

/// `a * b = r`.
fn and_vars<CS: ConstraintSystem<Fr>>(cs: &mut CS, a: Var, b: Var) -> Result<Bit, SynthesisError> {
    let value = both(a.1, b.1, |x, y| x & y);
    let r = cs.alloc(|| "result", || known(value))?;
    cs.enforce(|| "and", |lc| lc + a.0, |lc| lc + b.0, |lc| lc + r);
    Ok(Bit::Is(r, value))
}

/// `a * (1 - b) = r`.
fn and_not_vars<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    a: Var,
    b: Var,
) -> Result<Bit, SynthesisError> {
    let value = both(a.1, b.1, |x, y| x & !y);
    let r = cs.alloc(|| "result", || known(value))?;
    cs.enforce(
        || "and not",
        |lc| lc + a.0,
        |lc| lc + CS::one() - b.0,
        |lc| lc + r,
    );
    Ok(Bit::Is(r, value))
}

/// `(1 - a) * (1 - b) = r`.
fn nor_vars<CS: ConstraintSystem<Fr>>(cs: &mut CS, a: Var, b: Var) -> Result<Bit, SynthesisError> {
    let value = both(a.1, b.1, |x, y| !x & !y);
    let r = cs.alloc(|| "result", || known(value))?;
    cs.enforce(
        || "nor",
        |lc| lc + CS::one() - a.0,
        |lc| lc + CS::one() - b.0,
        |lc| lc + r,
    );
    Ok(Bit::Is(r, value))
}

/// `a xor b`, folding constants and negations the way bellpepper's `Boolean::xor`
/// does (the variable of an `Is` operand always goes first).
fn xor<CS: ConstraintSystem<Fr>>(cs: &mut CS, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
    match (a, b) {
        (Bit::Const(false), x) | (x, Bit::Const(false)) => Ok(x),
        (Bit::Const(true), x) | (x, Bit::Const(true)) => Ok(x.not()),
        (Bit::Is(x, v), Bit::Not(y, w)) | (Bit::Not(y, w), Bit::Is(x, v)) => {
            Ok(xor_vars(cs, (x, v), (y, w))?.not())
        }
        (Bit::Is(x, v), Bit::Is(y, w)) | (Bit::Not(x, v), Bit::Not(y, w)) => {
            xor_vars(cs, (x, v), (y, w))
        }
    }
}

/// `a and b`, with bellpepper's `Boolean::and` folding.
fn and<CS: ConstraintSystem<Fr>>(cs: &mut CS, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
    match (a, b) {
        (Bit::Const(false), _) | (_, Bit::Const(false)) => Ok(Bit::Const(false)),
        (Bit::Const(true), x) | (x, Bit::Const(true)) => Ok(x),
        (Bit::Is(x, v), Bit::Not(y, w)) | (Bit::Not(y, w), Bit::Is(x, v)) => {
            and_not_vars(cs, (x, v), (y, w))
        }
        (Bit::Not(x, v), Bit::Not(y, w)) => nor_vars(cs, (x, v), (y, w)),
        (Bit::Is(x, v), Bit::Is(y, w)) => and_vars(cs, (x, v), (y, w)),
    }
}

fn three(a: Bit, b: Bit, c: Bit, f: impl Fn(bool, bool, bool) -> bool) -> Option<bool> {
    Some(f(a.value()?, b.value()?, c.value()?))
}

/// SHA-256's `ch`: `(a and b) xor (not a and c)`.
fn ch<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    a: Bit,
    b: Bit,
    c: Bit,
) -> Result<Bit, SynthesisError> {
    let value = three(a, b, c, |a, b, c| (a & b) ^ (!a & c));
    match (a, b, c) {
        (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => {
            return Ok(Bit::Const(value.unwrap_or(false)));
        }
        (Bit::Const(false), _, c) => return Ok(c),
        (a, Bit::Const(false), c) => return and(cs, a.not(), c),
        (a, b, Bit::Const(false)) => return and(cs, a, b),
        (a, b, Bit::Const(true)) => return Ok(and(cs, a, b.not())?.not()),
        (a, Bit::Const(true), c) => return Ok(and(cs, a.not(), c.not())?.not()),
        _ => {}
    }
    let r = cs.alloc(|| "ch", || known(value))?;
    let one = CS::one();
    // a * (b - c) = r - c
    cs.enforce(
        || "ch",
        |lc| c.add_to(b.add_to(lc, Fr::ONE, one), -Fr::ONE, one),
        |lc| a.add_to(lc, Fr::ONE, one),
        |lc| c.add_to(lc + r, -Fr::ONE, one),
    );
    Ok(Bit::Is(r, value))
}

/// SHA-256's `maj`: `(a and b) xor (a and c) xor (b and c)`.
fn maj<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    a: Bit,
    b: Bit,
    c: Bit,
) -> Result<Bit, SynthesisError> {
    let value = three(a, b, c, |a, b, c| (a & b) ^ (a & c) ^ (b & c));
    match (a, b, c) {
        (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => {
            return Ok(Bit::Const(value.unwrap_or(false)));
        }
        (Bit::Const(false), b, c) => return and(cs, b, c),
        (a, Bit::Const(false), c) => return and(cs, a, c),
        (a, b, Bit::Const(false)) => return and(cs, a, b),
        (a, b, Bit::Const(true)) => return Ok(and(cs, a.not(), b.not())?.not()),
        (a, Bit::Const(true), c) => return Ok(and(cs, a.not(), c.not())?.not()),
        (Bit::Const(true), b, c) => return Ok(and(cs, b.not(), c.not())?.not()),
        _ => {}
    }
    // The result is allocated before `b and c`, as in bellpepper.
    let r = cs.alloc(|| "maj", || known(value))?;
    let bc = and(cs, b, c)?;
    let one = CS::one();
    let two = Fr::ONE.double();
    // (2bc - b - c) * a = bc - r
    cs.enforce(
        || "maj",
        |lc| {
            c.add_to(
                b.add_to(bc.add_to(lc, two, one), -Fr::ONE, one),
                -Fr::ONE,
                one,
            )
        },
        |lc| a.add_to(lc, Fr::ONE, one),
        |lc| bc.add_to(lc, Fr::ONE, one) - r,
    );
    Ok(Bit::Is(r, value))
}

/// A 32-bit word, least significant bit first, with bellperson `UInt32`'s
/// representation (a `Vec` of bits rebuilt by every rotation and clone).
#[derive(Clone)]
struct Word {
    bits: Vec<Bit>,
    value: Option<u32>,
}

impl Word {
    fn constant(value: u32) -> Word {
        Word {
            bits: (0..32).map(|i| Bit::Const(value >> i & 1 == 1)).collect(),
            value: Some(value),
        }
    }

    /// From 32 bits, most significant first.
    fn from_bits_be(bits: &[Bit]) -> Word {
        let value = bits
            .iter()
            .try_fold(0u32, |acc, b| Some(acc << 1 | u32::from(b.value()?)));
        Word {
            bits: bits.iter().rev().copied().collect(),
            value,
        }
    }

    fn into_bits_be(self) -> Vec<Bit> {
        let mut bits = self.bits;
        bits.reverse();
        bits
    }

    fn rotr(&self, by: usize) -> Word {
        Word {
            bits: self
                .bits
                .iter()
                .cycle()
                .skip(by)
                .take(32)
                .copied()
                .collect(),
            value: self.value.map(|v| v.rotate_right(by as u32)),
        }
    }

    fn shr(&self, by: usize) -> Word {
        Word {
            bits: self
                .bits
                .iter()
                .skip(by)
                .copied()
                .chain(std::iter::repeat(Bit::Const(false)))
                .take(32)
                .collect(),
            value: self.value.map(|v| v >> by),
        }
    }

    fn xor<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        other: &Word,
    ) -> Result<Word, SynthesisError> {
        let bits = self
            .bits
            .iter()
            .zip(&other.bits)
            .map(|(&a, &b)| xor(cs, a, b))
            .collect::<Result<_, _>>()?;
        Ok(Word {
            bits,
            value: self.value.zip(other.value).map(|(a, b)| a ^ b),
        })
    }

    fn bitwise<CS: ConstraintSystem<Fr>>(
        cs: &mut CS,
        [a, b, c]: [&Word; 3],
        gadget: fn(&mut CS, Bit, Bit, Bit) -> Result<Bit, SynthesisError>,
        op: fn(u32, u32, u32) -> u32,
    ) -> Result<Word, SynthesisError> {
        let bits = (0..32)
            .map(|i| gadget(cs, a.bits[i], b.bits[i], c.bits[i]))
            .collect::<Result<_, _>>()?;
        let value = match (a.value, b.value, c.value) {
            (Some(a), Some(b), Some(c)) => Some(op(a, b, c)),
            _ => None,
        };
        Ok(Word { bits, value })
    }
}

/// Equalities `lhs = rhs` of at most a field element's capacity in bits, packed
/// into one constraint `lhs * 1 = rhs` (bellperson's `MultiEq`), accumulated in
/// place rather than by cloning.
#[derive(Default)]
struct PackedEqualities {
    lhs: Lc,
    rhs: Lc,
    bits_used: usize,
}

impl PackedEqualities {
    fn flush<CS: ConstraintSystem<Fr>>(&mut self, cs: &mut CS) {
        let lhs = std::mem::take(&mut self.lhs);
        let rhs = std::mem::take(&mut self.rhs);
        cs.enforce(
            || "packed equalities",
            |_| lhs,
            |lc| lc + CS::one(),
            |_| rhs,
        );
        self.bits_used = 0;
    }

    fn finish<CS: ConstraintSystem<Fr>>(mut self, cs: &mut CS) {
        if self.bits_used > 0 {
            self.flush(cs);
        }
    }
}

/// The sum of 2 to 10 words modulo 2^32: the full sum is allocated bit by bit and
/// tied to the operands by one packed equality.
fn add_words<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    eq: &mut PackedEqualities,
    operands: &[Word],
) -> Result<Word, SynthesisError> {
    assert!((2..=10).contains(&operands.len()));
    let sum = operands
        .iter()
        .try_fold(0u64, |acc, w| Some(acc + u64::from(w.value?)));
    let constant = operands
        .iter()
        .all(|w| w.bits.iter().all(|b| b.is_constant()));
    if constant && let Some(sum) = sum {
        return Ok(Word::constant(sum as u32));
    }
    let max = operands.len() as u64 * u64::from(u32::MAX);
    let width = (u64::BITS - max.leading_zeros()) as usize;
    let mut result = (0..width)
        .map(|i| alloc_bit(cs, sum.map(|s| s >> i & 1 == 1)))
        .collect::<Result<Vec<_>, _>>()?;
    if Fr::CAPACITY as usize <= eq.bits_used + width {
        eq.flush(cs);
    }
    let shift = Fr::from(2).pow_vartime([eq.bits_used as u64]);
    let one = CS::one();
    eq.lhs = add_scaled(
        std::mem::take(&mut eq.lhs),
        operands.iter().map(|w| &w.bits[..]),
        shift,
        one,
    );
    eq.rhs = add_scaled(std::mem::take(&mut eq.rhs), [&result[..]], shift, one);
    eq.bits_used += width;
    result.truncate(32);
    Ok(Word {
        bits: result,
        value: sum.map(|s| s as u32),
    })
}

/// `lc + shift * sum(words)`, each word's bits weighted 1, 2, 4, ..., added to `lc`
/// itself. The field work is MultiEq's, on purpose: bellpepper builds the unscaled sum
/// (constant bits merging into one term for the constant 1) and then multiplies each
/// of its terms by `shift`; so does this, one multiplication per variable term and one
/// for the constant term, so that the variant differs from baseline in allocations
/// and copies only, not in arithmetic.
fn add_scaled<'a>(
    mut lc: Lc,
    words: impl IntoIterator<Item = &'a [Bit]>,
    shift: Fr,
    one: Variable,
) -> Lc {
    let mut constant: Option<Fr> = None;
    for bits in words {
        let mut coeff = Fr::ONE;
        for &bit in bits {
            match bit {
                Bit::Is(x, _) => lc = lc + (coeff * shift, x),
                Bit::Not(x, _) => {
                    *constant.get_or_insert(Fr::ZERO) += coeff;
                    lc = lc - (coeff * shift, x);
                }
                Bit::Const(true) => *constant.get_or_insert(Fr::ZERO) += coeff,
                Bit::Const(false) => {}
            }
            coeff = coeff.double();
        }
    }
    match constant {
        Some(c) => lc + (c * shift, one),
        None => lc,
    }
}

/// A word known now, or a sum whose addition is put off until the word is used.
enum Pending {
    Known(Word),
    Sum(Vec<Word>),
}

impl Pending {
    fn resolve<CS: ConstraintSystem<Fr>>(
        self,
        cs: &mut CS,
        eq: &mut PackedEqualities,
        extra: Option<&Word>,
    ) -> Result<Word, SynthesisError> {
        match self {
            // Cloned, not moved, as bellperson's gadget does.
            Pending::Known(ref w) => Ok(w.clone()),
            Pending::Sum(mut terms) => {
                terms.extend(extra.cloned());
                add_words(cs, eq, &terms)
            }
        }
    }
}

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
