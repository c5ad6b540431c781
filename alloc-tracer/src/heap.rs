//! Cold path: the blocks heap sampling sampled, what they say is live per site now,
//! and what was live at the latest kept peak.
//!
//! A block of `s` real bytes is sampled with probability `p = 1 - (1 - 1/mean)^s`
//! (`hot::heap`), so it stands for `1/p` blocks and `s/p` bytes: summed over the
//! sampled blocks live at some moment, these are unbiased estimates of the blocks
//! and bytes live then ([`weight`]). With a mean of 1 every block is sampled with
//! weight 1, and the estimates are exact.
//!
//! Sampled blocks are few (one per mean bytes allocated), so one lock guards them
//! all; frees find them through the hot side's table of followed blocks, shared with
//! lifetimes (the door's `block_ended` ends both), so a free of a block not sampled
//! never comes here, nor, by a count of sampled blocks per hash slot read without
//! the lock ([`may_hold`]), does nearly any end of a block followed for lifetimes.

use crate::fast_hash::FastBuild;
use crate::hot::clock;
use crate::hot::control;
use crate::hot::followed;
use crate::registry::SiteId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

/// What the sampled blocks of one site say is live.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SiteLive {
    /// Sampled blocks live (raw).
    pub sampled: u64,
    /// Estimated live bytes: the sum of the blocks' `s/p`.
    pub bytes: f64,
    /// Estimated live blocks: the sum of their `1/p`.
    pub blocks: f64,
}

impl SiteLive {
    fn add(&mut self, b: &Block) {
        self.sampled += 1;
        self.bytes += b.bytes;
        self.blocks += b.blocks;
    }
    fn sub(&mut self, b: &Block) {
        self.sampled -= 1;
        self.bytes -= b.bytes;
        self.blocks -= b.blocks;
        if self.sampled == 0 {
            // No rounding residue from the float sums.
            *self = SiteLive::default();
        }
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
    pub sites: Vec<(Arc<SiteId>, SiteLive)>,
}

struct Block {
    site: Arc<SiteId>,
    bytes: f64,
    blocks: f64,
}

#[derive(Default)]
struct Heap {
    blocks: HashMap<usize, Block, FastBuild>,
    live: HashMap<Arc<SiteId>, SiteLive, FastBuild>,
    peak: Peak,
}

static HEAP: LazyLock<Mutex<Heap>> = LazyLock::new(Mutex::default);

const FILTER_BITS: u32 = 12;

/// Sampled blocks per slot, a slot picked by a hash of the block's address; changed
/// under the lock, read without it ([`may_hold`]).
static SAMPLED_AT: [AtomicU32; 1 << FILTER_BITS] = [const { AtomicU32::new(0) }; 1 << FILTER_BITS];

fn filter_slot(ptr: usize) -> &'static AtomicU32 {
    &SAMPLED_AT[followed::address_hash(ptr, FILTER_BITS)]
}

/// False only when `ptr` is not a sampled block, read without the lock: the end of
/// a block followed only for lifetimes skips the lock. A sampled block's slot counts it from
/// before its allocation returns until its end, and its free comes after the one
/// and before the other.
pub(crate) fn may_hold(ptr: *mut u8) -> bool {
    filter_slot(ptr as usize).load(Relaxed) != 0
}

fn heap() -> MutexGuard<'static, Heap> {
    // Every mutation keeps the maps consistent before it can panic, so poisoning is
    // ignored.
    HEAP.lock().unwrap_or_else(|e| e.into_inner())
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
/// at `site`. True when a block sampled at the same address was replaced, whose
/// count in the table the caller then takes out (rare: see `lifetimes::follow`).
/// Cold, under the guard.
pub(crate) fn sample(ptr: *mut u8, site: SiteId, class_bytes: u64) -> bool {
    let (bytes, blocks) = weight(class_bytes, control::heap_interval());
    let mut h = heap();
    let site = match h.live.get_key_value(&site) {
        Some((k, _)) => k.clone(),
        None => Arc::new(site),
    };
    let b = Block {
        site,
        bytes,
        blocks,
    };
    h.live.entry(b.site.clone()).or_default().add(&b);
    match h.blocks.insert(ptr as usize, b) {
        None => {
            filter_slot(ptr as usize).fetch_add(1, Relaxed);
            false
        }
        Some(old) => {
            if let Some(l) = h.live.get_mut(&old.site) {
                l.sub(&old);
            }
            true
        }
    }
}

/// Stops counting `ptr` live if it is a sampled block (it is being freed or moved);
/// true when it was. Cold, under the guard.
pub(crate) fn end(ptr: *mut u8) -> bool {
    let mut h = heap();
    let Some(b) = h.blocks.remove(&(ptr as usize)) else {
        return false;
    };
    filter_slot(ptr as usize).fetch_sub(1, Relaxed);
    if let Some(l) = h.live.get_mut(&b.site) {
        l.sub(&b);
        if l.sampled == 0 {
            h.live.remove(&b.site);
        }
    }
    true
}

/// Stops counting every sampled block live and hands each address to `release`
/// (which takes it out of the hot side's table): for when frees stop being recorded
/// (see `lifetimes::drop_all`). The kept peak stays. Cold, under the guard.
pub(crate) fn drop_all(mut release: impl FnMut(usize)) {
    let mut h = heap();
    for (ptr, _) in h.blocks.drain() {
        filter_slot(ptr).fetch_sub(1, Relaxed);
        release(ptr);
    }
    h.live.clear();
}

/// Live bytes reached `live_bytes`, a new kept peak: keeps what the sampled blocks
/// say is live now, with the time and phase. Cold, under the guard.
pub(crate) fn new_peak(live_bytes: i64) {
    let mut h = heap();
    // Two threads may pass two marks at once; the higher one stays.
    if live_bytes <= h.peak.live_bytes {
        return;
    }
    let Heap { live, peak, .. } = &mut *h;
    peak.live_bytes = live_bytes;
    peak.time_ns = clock::now_ns();
    peak.phase = control::load().phase();
    peak.sites.clear();
    peak.sites
        .extend(live.iter().map(|(site, l)| (site.clone(), *l)));
}

/// What the sampled blocks say is live now, per site.
pub fn live_now() -> HashMap<SiteId, SiteLive> {
    heap()
        .live
        .iter()
        .map(|(site, l)| ((**site).clone(), *l))
        .collect()
}

/// The latest kept peak.
pub fn peak() -> Peak {
    heap().peak.clone()
}

/// About how many bytes the sampled blocks, their sites and the kept peak take.
pub fn memory_bytes() -> u64 {
    let h = heap();
    // Each site owns its frames on the heap.
    let site = size_of::<SiteId>() + SiteId::max_frames_bytes() + size_of::<SiteLive>();
    (h.blocks.capacity() * (size_of::<(usize, Block)>() + 8)
        + h.live.capacity() * (size_of::<(Arc<SiteId>, SiteLive)>() + 8)
        + h.live.len() * site
        + h.peak.sites.capacity() * size_of::<(Arc<SiteId>, SiteLive)>()) as u64
}

/// The lock of the sampled blocks, held across a `fork()` (see `fork`).
pub(crate) struct HeldForFork {
    _heap: MutexGuard<'static, Heap>,
}

/// Takes the lock of the sampled blocks (taken alone everywhere else).
pub(crate) fn hold_for_fork() -> HeldForFork {
    HeldForFork { _heap: heap() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::site_table::SiteMeta;

    #[test]
    fn a_sampled_block_is_seen_without_the_lock_until_it_ends() {
        // Addresses of a range no real block has here (the map only keeps numbers),
        // two of them sharing a filter slot.
        let a = 0x5a00_0000_0000usize;
        let b = (1..1 << 24)
            .map(|k| a + k * 16)
            .find(|&p| std::ptr::eq(filter_slot(p), filter_slot(a)))
            .expect("a second address in the same slot");
        let site = || SiteId::folded(SiteMeta::new(0, 0, 0));
        assert!(!may_hold(a as *mut u8) && !may_hold(b as *mut u8));
        sample(a as *mut u8, site(), 64);
        sample(b as *mut u8, site(), 64);
        assert!(end(a as *mut u8));
        assert!(may_hold(b as *mut u8), "b is still sampled");
        assert!(end(b as *mut u8));
        assert!(!may_hold(a as *mut u8) && !may_hold(b as *mut u8));
        assert!(!end(a as *mut u8), "ended once");
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
