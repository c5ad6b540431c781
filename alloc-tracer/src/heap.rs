//! Cold path: the blocks heap sampling sampled, what they say is live per site now,
//! and what was live at the latest kept peak.
//!
//! A block of `s` real bytes is sampled with probability `p = 1 - (1 - 1/mean)^s`
//! (`hot::heap`), so it stands for `1/p` blocks and `s/p` bytes: summed over the
//! sampled blocks live at some moment, these are unbiased estimates of the blocks
//! and bytes live then ([`weight`]). With a mean of 1 every block is sampled with
//! weight 1, and the estimates are exact.
//!
//! Frees find sampled blocks through the hot side's table of followed blocks,
//! shared with lifetimes (the door's `block_ended` ends both), and then in a map
//! sharded by address, as lifetimes' are; a count of sampled blocks per hash slot,
//! read without a lock ([`may_hold`]), keeps nearly every end of a block followed
//! only for lifetimes out of it. What the live blocks say per site is kept as sums
//! per thread (`stripe`): a sample adds its block's weights to its thread's sums,
//! an end takes them from the ending thread's, and a site's estimate is the total
//! over every stripe, taken at each kept peak and for the report. The sums are
//! fixed-point integers, so that what a block added on one thread and took away on
//! another cancels exactly.

use crate::fast_hash::FastBuild;
use crate::hot::clock;
use crate::hot::control;
use crate::hot::followed::address_hash;
use crate::site_index;
use crate::site_map::SiteId;
use crate::stripe::{self, Padded, STRIPES};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// What the sampled blocks of one site say is live.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SiteLive {
    /// Sampled blocks live (raw).
    pub sampled: u64,
    /// Estimated live bytes: the sum of the blocks' `s/p`.
    pub bytes: f64,
    /// Estimated live blocks: the sum of their `1/p`.
    pub blocks: f64,
    /// The variance of `bytes` from sampling, as the sampled blocks estimate it:
    /// the sum of their `(s/p)^2 (1 - p)`, each block at its own `p`.
    pub variance: f64,
}

impl SiteLive {
    /// Adds another stack's figures (two sites that turned out to be one).
    pub fn add(&mut self, o: &SiteLive) {
        self.sampled += o.sampled;
        self.bytes += o.bytes;
        self.blocks += o.blocks;
        self.variance += o.variance;
    }
}

/// What was live when live bytes reached the latest kept peak.
#[derive(Clone, Debug, Default)]
pub struct Peak {
    /// Exact live bytes then (as published: within the peak's stated error).
    pub live_bytes: i64,
    /// When, in nanoseconds after tracing started.
    pub time_ns: u64,
    /// The phase in force (id).
    pub phase: usize,
    /// Sites with sampled blocks live then.
    pub sites: Vec<(SiteId, SiteLive)>,
}

/// Units of the fixed-point sums a byte or a block is.
const UNIT: f64 = (1u64 << 32) as f64;

/// Sampled blocks, and the bytes and blocks they stand for, in fixed point.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Sums {
    sampled: i64,
    bytes: i128,
    blocks: i128,
    /// In whole bytes squared (a block's is at least about its own bytes squared
    /// where sampling is not near certain: units would add nothing).
    variance: i128,
}

impl Sums {
    /// One sampled block standing for `bytes` bytes and `blocks` blocks (`1/p`):
    /// its estimate's variance is `bytes^2 (1 - p)`.
    fn of_block(bytes: f64, blocks: f64) -> Sums {
        let p = 1.0 / blocks;
        Sums {
            sampled: 1,
            bytes: (bytes * UNIT).round() as i128,
            blocks: (blocks * UNIT).round() as i128,
            variance: (bytes * bytes * (1.0 - p)).round() as i128,
        }
    }

    fn add(&mut self, o: &Sums) {
        self.sampled += o.sampled;
        self.bytes += o.bytes;
        self.blocks += o.blocks;
        self.variance += o.variance;
    }

    fn sub(&mut self, o: &Sums) {
        self.sampled -= o.sampled;
        self.bytes -= o.bytes;
        self.blocks -= o.blocks;
        self.variance -= o.variance;
    }

    fn is_zero(&self) -> bool {
        *self == Sums::default()
    }

    fn live(&self) -> SiteLive {
        SiteLive {
            sampled: self.sampled.max(0) as u64,
            bytes: self.bytes as f64 / UNIT,
            blocks: self.blocks as f64 / UNIT,
            variance: self.variance.max(0) as f64,
        }
    }
}

/// A sampled block: its site's number (`site_index`) and what it adds to its sums.
struct Block {
    site: u32,
    sums: Sums,
}

type Blocks = HashMap<usize, Block, FastBuild>;

const SHARD_BITS: u32 = 6;

/// The sampled blocks, by a hash of their address.
static BLOCKS: LazyLock<[Padded<Mutex<Blocks>>; 1 << SHARD_BITS]> =
    LazyLock::new(|| std::array::from_fn(|_| Padded(Mutex::new(Blocks::default()))));

fn shard(ptr: usize) -> &'static Mutex<Blocks> {
    &BLOCKS[address_hash(ptr, SHARD_BITS)].0
}

/// Sums by site number, those that are not zero.
type SiteSums = HashMap<u32, Sums, FastBuild>;

/// Each thread's sums, by its stripe.
static LIVE: LazyLock<[Padded<Mutex<SiteSums>>; STRIPES]> =
    LazyLock::new(|| std::array::from_fn(|_| Padded(Mutex::new(SiteSums::default()))));

/// The kept peak, its sites by number.
struct KeptPeak {
    live_bytes: i64,
    time_ns: u64,
    phase: usize,
    sites: Vec<(u32, Sums)>,
}

static PEAK: Mutex<KeptPeak> = Mutex::new(KeptPeak {
    live_bytes: 0,
    time_ns: 0,
    phase: 0,
    sites: Vec::new(),
});

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update keeps its map consistent before it can panic: poisoning is
    // ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds `sums` to site `site` in the calling thread's stripe (`add`), or takes them
/// away; a site whose sums come to zero leaves the stripe.
fn count_live(site: u32, sums: &Sums, add: bool) {
    let mut live = lock(&LIVE[stripe::index()].0);
    let s = live.entry(site).or_default();
    if add {
        s.add(sums);
    } else {
        s.sub(sums);
    }
    if s.is_zero() {
        live.remove(&site);
    }
}

const FILTER_BITS: u32 = 12;

/// Sampled blocks per slot, a slot picked by a hash of the block's address; changed
/// under the block's shard lock, read without it ([`may_hold`]).
static SAMPLED_AT: [AtomicU32; 1 << FILTER_BITS] = [const { AtomicU32::new(0) }; 1 << FILTER_BITS];

fn filter_slot(ptr: usize) -> &'static AtomicU32 {
    &SAMPLED_AT[address_hash(ptr, FILTER_BITS)]
}

/// False only when `ptr` is not a sampled block, read without the lock: the end of
/// a block followed only for lifetimes skips the lock. A sampled block's slot counts it from
/// before its allocation returns until its end, and its free comes after the one
/// and before the other.
pub(crate) fn may_hold(ptr: *mut u8) -> bool {
    filter_slot(ptr as usize).load(Relaxed) != 0
}

/// The weights of a sampled block of `bytes` real bytes at a mean interval of
/// `mean` bytes: the bytes and blocks it stands for (`s/p`, `1/p`).
pub fn weight(bytes: u64, mean: u64) -> (f64, f64) {
    if mean <= 1 || bytes == 0 {
        return (bytes as f64, 1.0);
    }
    // p = 1 - (1 - 1/mean)^s, computed without cancellation.
    let p = -((bytes as f64) * (-1.0 / mean as f64).ln_1p()).exp_m1();
    (bytes as f64 / p, 1.0 / p)
}

/// Counts the block at `ptr` (counted in the hot side's table by the caller) live
/// at site number `site` (`site_index`). True when a block sampled at the same
/// address was replaced, whose count in the table the caller then takes out (rare:
/// see `lifetimes::follow`). Weighted by `interval`, the mean its draw was made
/// at. Cold, under the guard; takes the block's shard lock, then its thread's
/// stripe.
pub(crate) fn sample(ptr: *mut u8, site: u32, class_bytes: u64, interval: u64) -> bool {
    let (bytes, blocks) = weight(class_bytes, interval);
    let sums = Sums::of_block(bytes, blocks);
    let ptr = ptr as usize;
    let old = {
        let mut blocks = lock(shard(ptr));
        let old = blocks.insert(ptr, Block { site, sums });
        if old.is_none() {
            filter_slot(ptr).fetch_add(1, Relaxed);
        }
        old
    };
    count_live(site, &sums, true);
    match old {
        None => false,
        Some(old) => {
            count_live(old.site, &old.sums, false);
            true
        }
    }
}

/// Stops counting `ptr` live if it is a sampled block (it is being freed or moved);
/// true when it was. Cold, under the guard.
pub(crate) fn end(ptr: *mut u8) -> bool {
    let ptr = ptr as usize;
    let Some(b) = lock(shard(ptr)).remove(&ptr) else {
        return false;
    };
    filter_slot(ptr).fetch_sub(1, Relaxed);
    count_live(b.site, &b.sums, false);
    true
}

/// Stops counting every sampled block live and hands each address to `release`
/// (which takes it out of the hot side's table): for when frees stop being recorded
/// (see `lifetimes::drop_all`). The kept peak stays. Cold, under the guard.
pub(crate) fn drop_all(mut release: impl FnMut(usize)) {
    for s in BLOCKS.iter() {
        let dropped: Vec<(usize, Block)> = lock(&s.0).drain().collect();
        for (ptr, b) in dropped {
            filter_slot(ptr).fetch_sub(1, Relaxed);
            release(ptr);
            count_live(b.site, &b.sums, false);
        }
    }
}

/// The total over every stripe of each site's sums, those above zero blocks. Takes
/// every stripe's lock at once, so that no sample or end is half counted.
fn live_sums() -> Vec<(u32, Sums)> {
    let stripes: Vec<_> = LIVE.iter().map(|s| lock(&s.0)).collect();
    let mut stripes = stripes;
    let mut total: HashMap<u32, Sums, FastBuild> = HashMap::default();
    for live in &stripes {
        for (&site, s) in live.iter() {
            total.entry(site).or_default().add(s);
        }
    }
    // A site whose blocks were sampled on one thread and ended on another is left
    // in both stripes, its total zero: it leaves them here.
    for (site, _) in total.iter().filter(|(_, s)| s.is_zero()) {
        for live in &mut stripes {
            live.remove(site);
        }
    }
    total.into_iter().filter(|(_, s)| s.sampled > 0).collect()
}

/// The sites of `sums`, by number, with their estimates (two numbers with one site,
/// as past the cap, add up).
fn by_site(sums: Vec<(u32, Sums)>) -> HashMap<SiteId, SiteLive> {
    let (numbers, sums): (Vec<u32>, Vec<Sums>) = sums.into_iter().unzip();
    let mut all: HashMap<SiteId, SiteLive> = HashMap::new();
    for (site, s) in site_index::sites(numbers).into_iter().zip(sums) {
        all.entry(site).or_default().add(&s.live());
    }
    all
}

/// Live bytes reached `live_bytes`, a new kept peak: keeps what the sampled blocks
/// say is live now, with the time and phase. Cold, under the guard. Takes the
/// peak's lock, then the stripes'.
pub(crate) fn new_peak(live_bytes: i64) {
    let mut peak = lock(&PEAK);
    // Two threads may pass two marks at once; the higher one stays.
    if live_bytes <= peak.live_bytes {
        return;
    }
    peak.live_bytes = live_bytes;
    peak.time_ns = clock::now_ns();
    peak.phase = control::load().phase();
    peak.sites = live_sums();
}

/// What the sampled blocks say is live now, per site.
pub fn live_now() -> HashMap<SiteId, SiteLive> {
    by_site(live_sums())
}

/// The latest kept peak.
pub fn peak() -> Peak {
    let (live_bytes, time_ns, phase, sites) = {
        let p = lock(&PEAK);
        (p.live_bytes, p.time_ns, p.phase, p.sites.clone())
    };
    Peak {
        live_bytes,
        time_ns,
        phase,
        sites: by_site(sites).into_iter().collect(),
    }
}

/// About how many bytes the sampled blocks, their sums and the kept peak take (their
/// sites' frames are `site_index`'s).
pub fn memory_bytes() -> u64 {
    let blocks: usize = BLOCKS.iter().map(|s| lock(&s.0).capacity()).sum();
    let sums: usize = LIVE.iter().map(|s| lock(&s.0).capacity()).sum();
    (blocks * (size_of::<(usize, Block)>() + 1)
        + sums * (size_of::<(u32, Sums)>() + 1)
        + lock(&PEAK).sites.capacity() * size_of::<(u32, Sums)>()
        + size_of_val(&*BLOCKS)
        + size_of_val(&*LIVE)) as u64
}

/// The locks of the sampled blocks, held across a `fork()` (see `fork`).
pub(crate) struct HeldForFork {
    // Fields drop in declaration order, releasing in the reverse of taking.
    _live: Vec<MutexGuard<'static, SiteSums>>,
    _blocks: Vec<MutexGuard<'static, Blocks>>,
    _peak: MutexGuard<'static, KeptPeak>,
}

/// Takes every lock of heap sampling: the peak's, every shard's, every stripe's
/// (the order the code takes them in: a shard's lock is never taken while a
/// stripe's is held, and the peak's never while either is).
pub(crate) fn hold_for_fork() -> HeldForFork {
    let peak = lock(&PEAK);
    let blocks = BLOCKS.iter().map(|s| lock(&s.0)).collect();
    HeldForFork {
        _live: LIVE.iter().map(|s| lock(&s.0)).collect(),
        _blocks: blocks,
        _peak: peak,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_block_is_seen_without_the_lock_until_it_ends() {
        // Addresses of a range no real block has here (the map only keeps numbers),
        // two of them sharing a filter slot.
        let a = 0x5a00_0000_0000usize;
        let b = (1..1 << 24)
            .map(|k| a + k * 16)
            .find(|&p| std::ptr::eq(filter_slot(p), filter_slot(a)))
            .expect("a second address in the same slot");
        assert!(!may_hold(a as *mut u8) && !may_hold(b as *mut u8));
        sample(a as *mut u8, 7, 64, 4096);
        sample(b as *mut u8, 7, 64, 4096);
        assert!(end(a as *mut u8));
        assert!(may_hold(b as *mut u8), "b is still sampled");
        assert!(end(b as *mut u8));
        assert!(!may_hold(a as *mut u8) && !may_hold(b as *mut u8));
        assert!(!end(a as *mut u8), "ended once");
    }

    #[test]
    fn what_one_thread_adds_another_takes_away_exactly() {
        // A site number no other test uses, and addresses no real block has.
        let site = 4_000_000u32;
        let total = |site| {
            live_sums()
                .into_iter()
                .find(|&(k, _)| k == site)
                .map(|(_, s)| s)
        };
        let entries = |site| {
            LIVE.iter()
                .filter(|s| lock(&s.0).contains_key(&site))
                .count()
        };
        let addresses: Vec<usize> = (0..50).map(|k| 0x5d00_0000_0000 + k * 48).collect();
        let sampler = {
            let addresses = addresses.clone();
            std::thread::spawn(move || {
                for (k, &p) in addresses.iter().enumerate() {
                    sample(p as *mut u8, site, 16 + 16 * k as u64, 4096);
                }
            })
        };
        sampler.join().unwrap();
        let live = total(site).expect("live");
        assert_eq!(live.sampled, 50);
        // Ended on this thread: its stripe goes below zero, the total to nothing.
        for &p in &addresses[..49] {
            assert!(end(p as *mut u8));
        }
        let last = total(site).expect("one block live");
        assert_eq!(last.sampled, 1);
        let (bytes, blocks) = weight(16 + 16 * 49, 4096);
        assert_eq!(last.live(), Sums::of_block(bytes, blocks).live());
        assert!(end(addresses[49] as *mut u8));
        assert_eq!(entries(site), 2, "added on one stripe, taken from another");
        assert!(total(site).is_none(), "nothing live");
        assert_eq!(entries(site), 0, "the sums cancelled exactly, and left");
    }

    #[test]
    fn weights_are_inverse_probabilities() {
        // Every byte sampled: exact.
        assert_eq!(weight(48, 1), (48.0, 1.0));
        // A block much larger than the mean is nearly always sampled.
        let (bytes, blocks) = weight(64 << 20, 1 << 20);
        assert!((blocks - 1.0).abs() < 1e-12 && (bytes - (64 << 20) as f64).abs() < 1.0);
        // A small block: p close to s / mean, so it stands for about mean bytes.
        let (bytes, blocks) = weight(64, 1 << 20);
        let p = 1.0 - (1.0 - 1.0 / (1u64 << 20) as f64).powi(64);
        assert!((blocks - 1.0 / p).abs() / blocks < 1e-9, "{blocks}");
        assert!((bytes - 64.0 / p).abs() / bytes < 1e-9);
        assert!((bytes - (1 << 20) as f64).abs() < 64.0, "{bytes}");
    }
}
