//! Bits and the boolean gadgets of the `inplace-lc` variant: allocation, xor, and,
//! and SHA-256's `ch` and `maj`, each adding its terms to the combination being built.

use super::Lc;
use bellperson::{ConstraintSystem, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;

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

    pub(super) fn is_constant(self) -> bool {
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
pub(super) fn xor<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    a: Bit,
    b: Bit,
) -> Result<Bit, SynthesisError> {
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
pub(super) fn ch<CS: ConstraintSystem<Fr>>(
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
pub(super) fn maj<CS: ConstraintSystem<Fr>>(
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
