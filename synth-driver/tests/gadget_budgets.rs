//! Allocation budgets of real bellpepper gadgets, measured with `alloc_tracer::measure`
//! under a constraint system that evaluates every enforce closure as the Groth16
//! prover does (building its three LinearCombinations) and keeps nothing: the counts
//! are what the gadgets themselves allocate. A change to the gadgets (or a patched
//! bellpepper) that allocates more fails here, with the measured counts.

use alloc_tracer::{TracingAllocator, assert_allocs, measure};
use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multieq::MultiEq;
use bellperson::gadgets::sha256::sha256_block_no_padding;
use bellperson::gadgets::uint32::UInt32;
use blstrs::Scalar as Fr;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// Evaluates what the prover evaluates and counts variables and constraints.
#[derive(Default)]
struct Evaluating {
    aux: usize,
    inputs: usize,
    constraints: usize,
}

impl ConstraintSystem<Fr> for Evaluating {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        black_box(f()?);
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        black_box(f()?);
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        black_box(a(LinearCombination::zero()));
        black_box(b(LinearCombination::zero()));
        black_box(c(LinearCombination::zero()));
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

#[test]
fn addmany_of_three_words() {
    let mut cs = Evaluating::default();
    let words: Vec<UInt32> = [0x6a09_e667u32, 0xbb67_ae85, 0x3c6e_f372]
        .iter()
        .enumerate()
        .map(|(i, &w)| UInt32::alloc(cs.namespace(|| format!("word {i}")), Some(w)).unwrap())
        .collect();
    let (sum, m) = measure(|| {
        let mut eq = MultiEq::new(&mut cs);
        UInt32::addmany(eq.namespace(|| "add"), &words).unwrap()
    });
    let value = sum
        .into_bits()
        .iter()
        .enumerate()
        .map(|(i, b)| (b.get_value().unwrap() as u32) << i)
        .sum::<u32>();
    assert_eq!(
        value,
        0x6a09_e667u32
            .wrapping_add(0xbb67_ae85)
            .wrapping_add(0x3c6e_f372)
    );
    eprintln!("addmany of 3 words: {m:?}");
    assert_allocs!(m, allocs <= ADDMANY_ALLOCS, reallocs <= ADDMANY_REALLOCS);
    // Below the budget is news too: lower it, so that the saving cannot be lost.
    assert_eq!(
        (m.allocs, m.reallocs),
        (ADDMANY_ALLOCS, ADDMANY_REALLOCS),
        "below budget: lower ADDMANY_ALLOCS and ADDMANY_REALLOCS"
    );
}

#[test]
fn one_sha256_block() {
    let mut cs = Evaluating::default();
    let bits: Vec<Boolean> = (0..512)
        .map(|i| {
            AllocatedBit::alloc(cs.namespace(|| format!("bit {i}")), Some(i % 3 == 0))
                .map(Boolean::from)
                .unwrap()
        })
        .collect();
    let before = cs.constraints;
    let (digest, m) = measure(|| sha256_block_no_padding(&mut cs, &bits).unwrap());
    assert_eq!(digest.len(), 256);
    eprintln!(
        "one SHA-256 block ({} constraints): {m:?}",
        cs.constraints - before
    );
    assert_eq!(cs.constraints - before, 25_840);
    assert_allocs!(
        m,
        allocs <= SHA256_BLOCK_ALLOCS,
        reallocs <= SHA256_BLOCK_REALLOCS
    );
    assert_eq!(
        (m.allocs, m.reallocs),
        (SHA256_BLOCK_ALLOCS, SHA256_BLOCK_REALLOCS),
        "below budget: lower SHA256_BLOCK_ALLOCS and SHA256_BLOCK_REALLOCS"
    );
}

// What the gadgets allocate with bellperson 0.27.0 and bellpepper-core 0.2.1 (the
// workspace's lock), measured by these tests: the budgets are exactly that, so that
// any increase fails (lower them when a patch saves allocations). Adding three
// words: 206 allocations and 22 reallocs (LinearCombination vectors growing). One
// SHA-256 compression, 25,840 constraints: 121,750 allocations (4.7 a constraint)
// and 4,768 reallocs.
const ADDMANY_ALLOCS: u64 = 206;
const ADDMANY_REALLOCS: u64 = 22;
const SHA256_BLOCK_ALLOCS: u64 = 121_750;
const SHA256_BLOCK_REALLOCS: u64 = 4_768;
