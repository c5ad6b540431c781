//! The `pooled-enforce` variant's recycling pool of `LinearCombination` buffers.
//!
//! Every `enforce` hands its three closures an empty `LinearCombination`; the first
//! term on each side allocates a buffer (capacity 4, 160 bytes) and longer sides grow
//! it, and all of it is freed once the row is evaluated. The pool keeps the buffers
//! of evaluated combinations, empties them, and hands them to the next `enforce` as
//! its starting combinations, so closures that extend the combination they are given
//! (`|lc| lc + x`, most of them) stop allocating.
//!
//! # Why an unsafe view
//!
//! bellpepper-core 0.2.1 keeps the fields of `LinearCombination` private (two
//! `Indexer`s, each a `Vec<(usize, Scalar)>` plus the position of the last insertion)
//! and offers no way to clear one or to start one with capacity. The choices were to
//! vendor bellpepper-core (a patched copy of a third-party crate, ruled out), to
//! recycle at the allocator (which is what jemalloc's thread cache already does, so
//! it would measure nothing), or to read and build the struct through a local
//! struct with the same fields in the same order: [`LcView`]. Rust does not promise
//! that two structs with equal fields get equal layouts, so the view is used only
//! after [`check_layout`] has proved, in this very binary, that
//!
//! - the sizes and alignments agree (also asserted at compile time);
//! - a combination built through the public API, read through the view, shows the
//!   buffer addresses the public iterators point into (compared before anything is
//!   dereferenced), the same terms, and the insertion positions bellpepper's
//!   algorithm leaves;
//! - a combination built from the view's pieces equals `LinearCombination::zero()`,
//!   and after the same additions equals (`PartialEq`, so every private field) the
//!   combination built by the public API, with its terms in the buffers the view put
//!   there.
//!
//! If any of that fails the variant is refused with an error. The check has to read
//! through the view before it knows the view is right; it reads only the buffers'
//! addresses and lengths (words of the struct, never dereferenced) until those match
//! what the public API shows. The workspace pins
//! bellpepper-core to `=0.2.1`; the check is what keeps a future bump honest.

use bellperson::{Index, LinearCombination, Variable};
use blstrs::Scalar as Fr;

type Lc = LinearCombination<Fr>;
type Term = (usize, Fr);

/// bellpepper-core 0.2.1's private `Indexer<Fr>`: the same fields in the same order.
struct IndexerView {
    values: Vec<Term>,
    last_inserted: Option<(usize, usize)>,
}

/// bellpepper-core 0.2.1's `LinearCombination<Fr>`: the same fields in the same order.
struct LcView {
    inputs: IndexerView,
    aux: IndexerView,
}

const _: () = assert!(std::mem::size_of::<LcView>() == std::mem::size_of::<Lc>());
const _: () = assert!(std::mem::align_of::<LcView>() == std::mem::align_of::<Lc>());

/// Buffers kept at most; an `enforce` takes six and gives six back.
const KEPT: usize = 32;

/// A pool of emptied combination buffers.
pub struct LcPool {
    spare: Vec<Vec<Term>>,
}

impl LcPool {
    /// A pool, once [`check_layout`] has passed.
    pub fn new() -> Result<LcPool, String> {
        check_layout()?;
        Ok(LcPool {
            spare: Vec::with_capacity(KEPT),
        })
    }

    /// An empty combination on recycled buffers (fresh, unallocated ones when the
    /// pool is empty).
    #[inline]
    pub fn take(&mut self) -> Lc {
        let inputs = self.spare.pop().unwrap_or_default();
        let aux = self.spare.pop().unwrap_or_default();
        // SAFETY: both buffers are empty; `LcPool::new` checked the view.
        unsafe { assemble(inputs, aux) }
    }

    /// Keeps `lc`'s buffers, emptied, for later `take`s.
    #[inline]
    pub fn put(&mut self, lc: Lc) {
        // SAFETY: `LcPool::new` checked the view.
        let (mut inputs, mut aux) = unsafe { disassemble(lc) };
        for buffer in [&mut inputs, &mut aux] {
            if buffer.capacity() > 0 && self.spare.len() < KEPT {
                buffer.clear();
                self.spare.push(std::mem::take(buffer));
            }
        }
    }
}

/// A combination whose term lists are `inputs` and `aux`, with no last insertion.
///
/// # Safety
/// [`check_layout`] must have passed, and both vectors must be sorted by index without
/// duplicates (empty, here), as bellpepper-core's invariant requires.
unsafe fn assemble(inputs: Vec<Term>, aux: Vec<Term>) -> Lc {
    let view = LcView {
        inputs: IndexerView {
            values: inputs,
            last_inserted: None,
        },
        aux: IndexerView {
            values: aux,
            last_inserted: None,
        },
    };
    // SAFETY: the caller guarantees the checked layout: LcView and Lc are the same
    // fields at the same offsets, so this is a move of the same bytes.
    unsafe { std::mem::transmute::<LcView, Lc>(view) }
}

/// The term lists of `lc`.
///
/// # Safety
/// [`check_layout`] must have passed.
unsafe fn disassemble(lc: Lc) -> (Vec<Term>, Vec<Term>) {
    // SAFETY: the caller guarantees the checked layout (see `assemble`).
    let view = unsafe { std::mem::transmute::<Lc, LcView>(lc) };
    (view.inputs.values, view.aux.values)
}

/// Proves the view right for this binary, or says what differs.
pub fn check_layout() -> Result<(), String> {
    let fail = |what: &str| Err(format!("LinearCombination layout check failed: {what}"));
    let c = |k: u64| Fr::from(k);
    let aux = |i| Variable::new_unchecked(Index::Aux(i));
    let input = |i| Variable::new_unchecked(Index::Input(i));
    // Aux 9, then 7 (inserted before it by binary search), then 8 (after 7 by the
    // consecutive-key shortcut): last insertion at position 1, key 8.
    let build = |lc: Lc| lc + (c(3), input(3)) + (c(5), aux(9)) + (c(6), aux(7)) + (c(7), aux(8));
    let public = build(Lc::zero());
    let key_offset = std::mem::offset_of!(Term, 0);
    let first_key = |mut it: Box<dyn Iterator<Item = (&usize, &Fr)> + '_>| {
        it.next().map(|(k, _)| k as *const usize as usize)
    };
    let (Some(input_key), Some(aux_key)) = (
        first_key(Box::new(public.iter_inputs())),
        first_key(Box::new(public.iter_aux())),
    ) else {
        return fail("the public API lost a term");
    };
    // SAFETY: sizes and alignments agree (asserted at compile time). Only the
    // buffers' addresses and lengths are read before they are compared with what
    // the public API shows; the view is a borrow, never dropped.
    let view = unsafe { &*(&public as *const Lc as *const LcView) };
    if view.inputs.values.as_ptr() as usize + key_offset != input_key
        || view.aux.values.as_ptr() as usize + key_offset != aux_key
        || view.inputs.values.len() != 1
        || view.aux.values.len() != 3
    {
        return fail("the term buffers are not where the view reads them");
    }
    if view.inputs.values != [(3, c(3))]
        || view.aux.values != [(7, c(6)), (8, c(7)), (9, c(5))]
        || view.inputs.last_inserted != Some((0, 3))
        || view.aux.last_inserted != Some((1, 8))
    {
        return fail("the view reads other terms or insertion positions");
    }
    let (inputs, aux_terms) = (Vec::with_capacity(8), Vec::with_capacity(8));
    let (pi, pa) = (inputs.as_ptr(), aux_terms.as_ptr());
    // SAFETY: the view reads built combinations right (just checked); both lists are
    // empty.
    let empty = unsafe { assemble(inputs, aux_terms) };
    if empty != Lc::zero() || !empty.is_empty() {
        return fail("a combination assembled from empty buffers is not zero");
    }
    let rebuilt = build(empty);
    if rebuilt != public {
        return fail("additions to an assembled combination differ from the public API's");
    }
    // SAFETY: as above.
    let (inputs, aux_terms) = unsafe { disassemble(rebuilt) };
    if inputs.as_ptr() != pi
        || aux_terms.as_ptr() != pa
        || inputs.len() != 1
        || aux_terms.len() != 3
    {
        return fail("the terms did not go into the assembled buffers");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_matches_this_build() {
        check_layout().unwrap();
    }

    #[test]
    fn recycled_combinations_behave_like_fresh_ones() {
        let mut pool = LcPool::new().unwrap();
        for round in 0..4usize {
            let mut lc = pool.take();
            assert!(lc.is_empty());
            let mut fresh = Lc::zero();
            for i in 0..10 + round {
                let v = Variable::new_unchecked(Index::Aux(i * 3 % 7 + round));
                lc = lc + (Fr::from(i as u64), v);
                fresh = fresh + (Fr::from(i as u64), v);
            }
            assert!(lc == fresh);
            pool.put(lc);
        }
        assert!(!pool.spare.is_empty());
    }
}
