//! `analyzer calibrate`: measures what a malloc+free pair and the work around a
//! temporary cost on this machine, with the allocator traced programs use
//! (tikv-jemallocator, this binary's global allocator) and the real bellpepper-core
//! operations. The library's `calibrate` module holds what this produces.
//!
//! Figures are medians of repeated timed loops; each loop is long enough
//! (milliseconds) that the clock's cost is negligible. Three access patterns bracket
//! what sites do:
//!
//! * [`Pattern::Temporary`]: allocate, touch, free at once (the same block comes back
//!   from jemalloc's thread cache every time: the cheapest case);
//! * [`Pattern::Batch`]: allocate 64 blocks, then free them all (blocks that live for
//!   a short stretch of work, like the six term vectors of an `enforce`);
//! * [`Pattern::Scattered`]: allocate ~64 MiB worth of blocks, free them in random
//!   order (long-lived blocks: cold cache lines, thread-cache flushes to the arena).
//!
//! Pairs are timed through `Vec::with_capacity`. Operations measured besides
//! ([`OperationCost`]): `lc_temporary` (the work around a `Boolean::lc` temporary),
//! [`VEC_GROWTH`] (what Rust's growth path, `grow_one` and `finish_grow`, adds to a
//! pair when a block starts as a push onto an empty `Vec`) and [`RECYCLE`] (what a
//! recycling pool costs per block instead of a pair).

use analyzer::calibrate::{
    CALIBRATION_VERSION, Calibration, CopyRate, OperationCost, PairCost, Pattern, RECYCLE,
    VEC_GROWTH,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Sizes calibrated: every jemalloc small class, then large sizes on a coarser grid
/// (costs in between are interpolated).
const SIZES: &[u64] = &[
    8,
    16,
    32,
    48,
    64,
    80,
    96,
    112,
    128,
    160,
    192,
    224,
    256,
    320,
    384,
    448,
    512,
    640,
    768,
    896,
    1024,
    1280,
    1536,
    1792,
    2048,
    2560,
    3072,
    3584,
    4096,
    5120,
    6144,
    7168,
    8192,
    10240,
    12288,
    14336,
    16384,
    32768,
    65536,
    262_144,
    1 << 20,
    4 << 20,
    16 << 20,
];

/// How long and how often to measure.
#[derive(Clone, Copy, Debug)]
pub struct Effort {
    /// Timed repetitions per figure (the median is kept).
    pub repetitions: usize,
    /// Minimum length of one timed repetition.
    pub min_time: Duration,
}

/// How long [`Effort::FULL`] takes on a development machine of two cores, as the
/// messages and docs say it.
pub const FULL_DURATION: &str = "about 15 s";

impl Effort {
    /// The default: 5 passes over every figure, each repetition at least 4 ms
    /// ([`FULL_DURATION`] in all).
    pub const FULL: Effort = Effort {
        repetitions: 5,
        min_time: Duration::from_millis(4),
    };
    /// For tests: one short repetition (figures are rough).
    pub const QUICK: Effort = Effort {
        repetitions: 1,
        min_time: Duration::from_micros(200),
    };
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Rounds for one timed repetition to last `min_time` (doubling from 1).
fn rounds_for(effort: Effort, round: &mut impl FnMut(u64) -> u64) -> u64 {
    let mut n = 1u64;
    loop {
        let t = Instant::now();
        round(n);
        if t.elapsed() >= effort.min_time || n >= 1 << 30 {
            return n;
        }
        n *= 2;
    }
}

/// Median over repetitions of nanoseconds per event: `round(n)` runs `n` rounds and
/// returns the events it made; `n` doubles until a round lasts `min_time`.
fn time_per_event(effort: Effort, mut round: impl FnMut(u64) -> u64) -> f64 {
    let n = rounds_for(effort, &mut round);
    median(
        (0..effort.repetitions)
            .map(|_| {
                let t = Instant::now();
                let events = round(n);
                t.elapsed().as_nanos() as f64 / events.max(1) as f64
            })
            .collect(),
    )
}

/// Medians of nanoseconds per event of two loops timed alternately (see
/// [`time_per_event`]), both run for the same number of rounds.
fn time_pair(
    effort: Effort,
    mut a: impl FnMut(u64) -> u64,
    mut b: impl FnMut(u64) -> u64,
) -> (f64, f64) {
    let n = rounds_for(effort, &mut a);
    let time = |f: &mut dyn FnMut(u64) -> u64| {
        let t = Instant::now();
        let events = f(n);
        t.elapsed().as_nanos() as f64 / events.max(1) as f64
    };
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for _ in 0..effort.repetitions.max(1) * 3 {
        xs.push(time(&mut a));
        ys.push(time(&mut b));
    }
    (median(xs), median(ys))
}

/// A block of `size` bytes, one byte written (as any user of a block does).
#[inline(always)]
fn block(size: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(size as usize);
    v.push(1u8);
    v
}

fn pair_ns(size: u64, pattern: Pattern, effort: Effort) -> f64 {
    match pattern {
        Pattern::Temporary => time_per_event(effort, |n| {
            for _ in 0..n {
                black_box(block(size));
            }
            n
        }),
        Pattern::Batch => {
            let mut held: Vec<Vec<u8>> = Vec::with_capacity(64);
            time_per_event(effort, |n| {
                for _ in 0..n {
                    for _ in 0..64 {
                        held.push(block(size));
                    }
                    black_box(&held);
                    held.clear();
                }
                n * 64
            })
        }
        Pattern::Scattered => {
            let count = ((64u64 << 20) / size).clamp(16, 1 << 18) as usize;
            let mut held: Vec<Vec<u8>> = Vec::with_capacity(count);
            let mut order: Vec<usize> = (0..count).collect();
            shuffle(&mut order, size);
            let mut slots: Vec<Option<Vec<u8>>> = Vec::with_capacity(count);
            time_per_event(effort, |n| {
                for _ in 0..n {
                    for _ in 0..count {
                        held.push(block(size));
                    }
                    slots.extend(held.drain(..).map(Some));
                    for &i in &order {
                        drop(black_box(slots[i].take()));
                    }
                    slots.clear();
                }
                n * count as u64
            })
        }
    }
}

/// Fisher-Yates with a xorshift generator (deterministic per seed).
fn shuffle(v: &mut [usize], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

/// Sizes of the copies timed besides 4 MiB: those of a clone or realloc of a few
/// terms up to a large vector's.
const COPY_SIZES: [usize; 4] = [256, 4 << 10, 64 << 10, 1 << 20];

/// memcpy throughput of copies of `len` bytes, again and again between two buffers.
fn copy_bytes_per_ns(effort: Effort, len: usize) -> f64 {
    let src = vec![7u8; len];
    let mut dst = vec![0u8; len];
    let ns_per_copy = time_per_event(effort, |n| {
        for _ in 0..n {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        }
        n
    });
    len as f64 / ns_per_copy
}

/// A LinearCombination term's size: four of them fill a 160-byte block, the first
/// block a push onto an empty `Vec` of terms allocates.
type Term = (usize, [u64; 4]);

/// One sample of Rust's growth path: a 160-byte block that starts as a push onto an
/// empty `Vec` (`grow_one`, `finish_grow`, then the allocator) against the same block
/// from `Vec::with_capacity` (the allocator alone), both freed at once. Nanoseconds
/// per block of each loop.
fn vec_growth_sample(effort: Effort) -> (f64, f64) {
    let term: Term = (7, [1, 2, 3, 4]);
    let grown = |n: u64| {
        for _ in 0..n {
            // Not `vec![term]`, which allocates the exact size up front: the push
            // must take the growth path (and black_box keeps the compiler from
            // seeing that the vector is empty).
            let mut v: Vec<Term> = black_box(Vec::new());
            v.push(black_box(term));
            black_box(v);
        }
        n
    };
    let sized = |n: u64| {
        for _ in 0..n {
            let mut v: Vec<Term> = Vec::with_capacity(4);
            v.push(black_box(term));
            black_box(v);
        }
        n
    };
    time_pair(effort, grown, sized)
}

/// Blocks taken from and returned to the free list per event in [`recycle_sample`]:
/// six, as a recycling pool for `enforce` hands out (three combinations, two
/// buffers each).
const RECYCLED: usize = 6;

/// One sample of what a recycling pool costs instead of the allocator: per block,
/// taking an emptied 160-byte buffer of terms from a free list, writing a term,
/// emptying it and returning it, six held at a time; against the same work on
/// buffers that stay put. Nanoseconds per block of each loop.
fn recycle_sample(effort: Effort) -> (f64, f64) {
    let term: Term = (7, [1, 2, 3, 4]);
    let mut pool: Vec<Vec<Term>> = (0..4 * RECYCLED).map(|_| Vec::with_capacity(4)).collect();
    let mut kept: Vec<Vec<Term>> = (0..RECYCLED).map(|_| Vec::with_capacity(4)).collect();
    let mut taken: Vec<Vec<Term>> = Vec::with_capacity(RECYCLED);
    let recycling = |n: u64| {
        for _ in 0..n {
            for _ in 0..RECYCLED {
                let mut b = pool.pop().unwrap_or_default();
                b.push(black_box(term));
                taken.push(b);
            }
            black_box(&mut taken);
            for mut b in taken.drain(..) {
                b.clear();
                pool.push(b);
            }
        }
        n * RECYCLED as u64
    };
    let staying = |n: u64| {
        for _ in 0..n {
            for b in kept.iter_mut() {
                b.push(black_box(term));
            }
            black_box(&mut kept);
            for b in kept.iter_mut() {
                b.clear();
            }
        }
        n * RECYCLED as u64
    };
    time_pair(effort, recycling, staying)
}

/// Terms per LinearCombination in the `lc_temporary` loops (as in UInt32::addmany).
const TERMS: usize = 32;

/// One sample of the work around a `Boolean::lc` temporary, measured on
/// bellpepper-core's `LinearCombination` over BLS12-381 scalars (what the circuits
/// use): nanoseconds per term with temporaries, and in place.
fn lc_temporary_sample(effort: Effort) -> (f64, f64) {
    use bellpepper_core::{Index, LinearCombination, Variable};
    use blstrs::Scalar;
    use ff::Field;
    let vars: Vec<Variable> = (0..TERMS)
        .map(|i| Variable::new_unchecked(Index::Aux(i)))
        .collect();
    let coeff = Scalar::ONE.double();
    // `Boolean::lc` builds `zero() + (coeff, var)` and the caller merges it with
    // `lc + &tmp`; the in-place form is `lc + (coeff, var)`. 32 terms per LC, as in
    // UInt32::addmany. The two loops alternate, so that both see the same machine.
    let with_temporaries = |n: u64| {
        for _ in 0..n {
            let mut lc = LinearCombination::<Scalar>::zero();
            for &v in &vars {
                let tmp = LinearCombination::<Scalar>::zero() + (coeff, v);
                lc = lc + black_box(&tmp);
            }
            black_box(lc);
        }
        n * TERMS as u64
    };
    let in_place = |n: u64| {
        for _ in 0..n {
            let mut lc = LinearCombination::<Scalar>::zero();
            for &v in &vars {
                lc = lc + black_box((coeff, v));
            }
            black_box(lc);
        }
        n * TERMS as u64
    };
    time_pair(effort, with_temporaries, in_place)
}

/// The median of per-pass differences of two loops' samples, and their medians.
fn difference(samples: &[(f64, f64)]) -> (f64, f64, f64) {
    (
        median(samples.iter().map(|(a, b)| a - b).collect()).max(0.0),
        median(samples.iter().map(|s| s.0).collect()),
        median(samples.iter().map(|s| s.1).collect()),
    )
}

/// Per-pass samples of the calibrated operations.
#[derive(Default)]
struct OperationSamples {
    lc_temporary: Vec<(f64, f64)>,
    vec_growth: Vec<(f64, f64)>,
    recycle: Vec<(f64, f64)>,
}

impl OperationSamples {
    fn take(&mut self, effort: Effort) {
        self.lc_temporary.push(lc_temporary_sample(effort));
        self.vec_growth.push(vec_growth_sample(effort));
        self.recycle.push(recycle_sample(effort));
    }
}

/// The calibrated operations, each the median of its per-pass differences.
fn operations(samples: &OperationSamples, pairs: &Calibration) -> Vec<OperationCost> {
    let passes = samples.lc_temporary.len();
    let (growth, grown, sized) = difference(&samples.vec_growth);
    let (recycle, recycling, staying) = difference(&samples.recycle);
    let (ns, with_temporaries, in_place) = difference(&samples.lc_temporary);
    // A one-term LinearCombination holds 4 terms of 40 bytes: a 160-byte block.
    vec![
        OperationCost {
            name: "lc_temporary".to_owned(),
            ns,
            // Its allocation also passes `Vec`'s growth path (an insert into an
            // empty Vec), which the cost model adds apart (`vec_growth`) to every
            // allocation made through it: taken off here, not counted twice.
            beyond_allocator_ns: (ns - pairs.pair_ns(160, Pattern::Temporary) - growth).max(0.0),
            what: format!(
                "building a one-term LinearCombination and merging it into another \
                 (lc + &tmp) instead of adding the term in place (lc + (coeff, var)), \
                 per term, {TERMS} terms per LinearCombination; medians \
                 {with_temporaries:.1} ns vs {in_place:.1} ns over {passes} passes"
            ),
        },
        // The next two are not work beside an allocation (`beyond_allocator_ns` is
        // `ns`): the cost model adds `vec_growth` to the pairs of sites allocated
        // through `finish_grow`, and `analyzer diff --recycled` adds `recycle` for
        // each allocation a change removes.
        OperationCost {
            name: VEC_GROWTH.to_owned(),
            ns: growth,
            beyond_allocator_ns: growth,
            what: format!(
                "a 160-byte block from a push onto an empty Vec (grow_one, finish_grow) \
                 instead of Vec::with_capacity, per pair; medians {grown:.1} ns vs \
                 {sized:.1} ns over {passes} passes"
            ),
        },
        OperationCost {
            name: RECYCLE.to_owned(),
            ns: recycle,
            beyond_allocator_ns: recycle,
            what: format!(
                "taking an emptied 160-byte buffer from a free list and returning it, \
                 per block, {RECYCLED} held at a time, beyond the same use of buffers \
                 that stay put; medians {recycling:.1} ns vs {staying:.1} ns over \
                 {passes} passes"
            ),
        },
    ]
}

/// This machine's host name and CPU model (as the tracer writes them).
fn this_host() -> (String, String) {
    use alloc_tracer_format::host;
    let unknown = || "unknown".to_owned();
    (
        host::name().unwrap_or_else(unknown),
        host::cpu_model().unwrap_or_else(unknown),
    )
}

/// Measures everything. `progress` hears about each size as it is done.
pub fn run(effort: Effort, mut progress: impl FnMut(&str)) -> Calibration {
    // Passes over every figure, rather than repetitions of one figure in a row: this
    // VM's speed drifts over seconds, and medians over passes spread across the whole
    // run are steadier (consecutive calibrations differed by 1.7x before).
    let passes = effort.repetitions.max(1);
    let once = Effort {
        repetitions: 1,
        ..effort
    };
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); SIZES.len() * Pattern::ALL.len()];
    let mut copies = Vec::new();
    let mut copies_by_size: Vec<Vec<f64>> = vec![Vec::new(); COPY_SIZES.len()];
    let mut op_samples = OperationSamples::default();
    for pass in 0..passes {
        for (i, &size) in SIZES.iter().enumerate() {
            for (j, &pattern) in Pattern::ALL.iter().enumerate() {
                samples[i * Pattern::ALL.len() + j].push(pair_ns(size, pattern, once));
            }
        }
        copies.push(copy_bytes_per_ns(once, 4 << 20));
        for (samples, &len) in copies_by_size.iter_mut().zip(&COPY_SIZES) {
            samples.push(copy_bytes_per_ns(once, len));
        }
        op_samples.take(once);
        progress(&format!("pass {} of {passes}", pass + 1));
    }
    let pairs = SIZES
        .iter()
        .flat_map(|&size| Pattern::ALL.map(move |pattern| (size, pattern)))
        .zip(samples)
        .map(|((size_bytes, pattern), ns)| PairCost {
            size_bytes,
            pattern,
            ns: median(ns),
        })
        .collect();
    let copy = median(copies);
    let (host, cpu) = this_host();
    let mut c = Calibration {
        version: CALIBRATION_VERSION,
        host,
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        created_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        allocator: "tikv-jemallocator 0.7.0".to_owned(),
        repetitions: effort.repetitions,
        pairs,
        copy_bytes_per_ns: copy,
        copy_rates: COPY_SIZES
            .iter()
            .zip(copies_by_size)
            .map(|(&len, rates)| CopyRate {
                size_bytes: len as u64,
                bytes_per_ns: median(rates),
            })
            .collect(),
        operations: Vec::new(),
    };
    c.operations = operations(&op_samples, &c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_measures_every_size_and_pattern() {
        let c = run(Effort::QUICK, |_| {});
        assert_eq!(c.pairs.len(), SIZES.len() * Pattern::ALL.len());
        assert!(c.pairs.iter().all(|p| p.ns > 0.0 && p.ns.is_finite()));
        assert!(c.copy_bytes_per_ns > 0.0);
        assert_eq!(c.copy_rates.len(), COPY_SIZES.len());
        assert!(
            c.copy_rates.iter().all(|r| r.bytes_per_ns > 0.0),
            "{:?}",
            c.copy_rates
        );
        for name in ["lc_temporary", VEC_GROWTH, RECYCLE] {
            let o = c.operation(name).unwrap_or_else(|| panic!("no {name}"));
            assert!(o.ns.is_finite() && o.ns >= 0.0, "{o:?}");
            assert!(o.what.contains("passes"), "{o:?}");
        }
    }
}
