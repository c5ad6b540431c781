//! 32-bit words of the `inplace-lc` variant (bellperson `UInt32`'s representation)
//! and their additions, tied to the operands by packed equalities accumulated in place.

use super::Lc;
use super::bit::{Bit, alloc_bit, xor};
use bellperson::{ConstraintSystem, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};

/// A 32-bit word, least significant bit first, with bellperson `UInt32`'s
/// representation (a `Vec` of bits rebuilt by every rotation and clone).
#[derive(Clone)]
pub(super) struct Word {
    bits: Vec<Bit>,
    value: Option<u32>,
}

impl Word {
    pub(super) fn constant(value: u32) -> Word {
        Word {
            bits: (0..32).map(|i| Bit::Const(value >> i & 1 == 1)).collect(),
            value: Some(value),
        }
    }

    /// From 32 bits, most significant first.
    pub(super) fn from_bits_be(bits: &[Bit]) -> Word {
        let value = bits
            .iter()
            .try_fold(0u32, |acc, b| Some(acc << 1 | u32::from(b.value()?)));
        Word {
            bits: bits.iter().rev().copied().collect(),
            value,
        }
    }

    pub(super) fn into_bits_be(self) -> Vec<Bit> {
        let mut bits = self.bits;
        bits.reverse();
        bits
    }

    pub(super) fn rotr(&self, by: usize) -> Word {
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

    pub(super) fn shr(&self, by: usize) -> Word {
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

    pub(super) fn xor<CS: ConstraintSystem<Fr>>(
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

    pub(super) fn bitwise<CS: ConstraintSystem<Fr>>(
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
pub(super) struct PackedEqualities {
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

    pub(super) fn finish<CS: ConstraintSystem<Fr>>(mut self, cs: &mut CS) {
        if self.bits_used > 0 {
            self.flush(cs);
        }
    }
}

/// The sum of 2 to 10 words modulo 2^32: the full sum is allocated bit by bit and
/// tied to the operands by one packed equality.
pub(super) fn add_words<CS: ConstraintSystem<Fr>>(
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
pub(super) enum Pending {
    Known(Word),
    Sum(Vec<Word>),
}

impl Pending {
    pub(super) fn resolve<CS: ConstraintSystem<Fr>>(
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
