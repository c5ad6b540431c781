//! Cold path: blocks followed from allocation to free, for lifetimes and per-site
//! frees and live bytes.
//!
//! Following every block would need a pointer side table updated on every
//! allocation and free (~45 ns a pair here), so only sampled blocks are followed: one
//! allocation in `lifetime_interval` (geometric intervals), or every sampled stack in
//! `sample` mode. A free may happen on any thread, so followed blocks live in a global
//! sharded map. Every free checks a counting filter first: a relaxed load of one
//! counter indexed by the pointer's hash, which is zero unless some followed block
//! hashes there; only then does the free take the cold path and the shard lock.

use crate::hot::log_linear::{LIFETIME_BUCKETS, LIFETIME_SUB_BITS, bucket};
use crate::registry::SiteId;
use dashmap::DashMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex};

const FILTER_BITS: u32 = 16;
const SHARDS: usize = 16;

static FILTER: [AtomicU32; 1 << FILTER_BITS] = [const { AtomicU32::new(0) }; 1 << FILTER_BITS];

struct Followed {
    site: SiteId,
    birth_ns: u64,
    class_bytes: u64,
}

static FOLLOWED: LazyLock<[Mutex<HashMap<usize, Followed>>; SHARDS]> =
    LazyLock::new(|| std::array::from_fn(|_| Mutex::new(HashMap::new())));

/// What became of the followed blocks of one site.
#[derive(Clone, Debug, Default)]
pub struct Lifetimes {
    /// Followed blocks freed (or moved by realloc).
    pub freed: u64,
    /// Sum of their lifetimes.
    pub total_ns: u128,
    /// Their lifetimes, per `log_linear` bucket (2 sub-bits).
    pub buckets: Vec<u64>,
    /// Followed blocks still live.
    pub live: u64,
    /// Size-class bytes of the followed blocks still live.
    pub live_bytes: u64,
}

static ENDED: LazyLock<DashMap<SiteId, Lifetimes>> = LazyLock::new(DashMap::new);

#[inline(always)]
fn filter_index(ptr: usize) -> usize {
    ((ptr as u64 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - FILTER_BITS)) as usize
}

/// True when `ptr` may be a followed block. One relaxed load: the only cost a free
/// pays for lifetimes unless it is followed.
#[inline(always)]
pub fn maybe_followed(ptr: *mut u8) -> bool {
    FILTER[filter_index(ptr as usize)].load(Relaxed) != 0
}

fn shard(ptr: usize) -> &'static Mutex<HashMap<usize, Followed>> {
    &FOLLOWED[(ptr >> 4) % SHARDS]
}

/// Starts following the block at `ptr`. Cold, under the guard.
pub(crate) fn follow(ptr: *mut u8, site: SiteId, class_bytes: u64) {
    let ptr = ptr as usize;
    let f = Followed {
        site,
        birth_ns: crate::clock::now_ns(),
        class_bytes,
    };
    let old = shard(ptr)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ptr, f);
    if old.is_none() {
        FILTER[filter_index(ptr)].fetch_add(1, Relaxed);
    }
}

/// Ends following `ptr` if it is followed (it is being freed or moved). Cold, under
/// the guard, and before the inner allocator frees the block, so the address cannot
/// be reused and followed again in between.
pub(crate) fn end(ptr: *mut u8) {
    let ptr = ptr as usize;
    let Some(f) = shard(ptr)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&ptr)
    else {
        return;
    };
    FILTER[filter_index(ptr)].fetch_sub(1, Relaxed);
    let ns = crate::clock::now_ns().saturating_sub(f.birth_ns);
    let mut e = ENDED.entry(f.site).or_default();
    if e.buckets.is_empty() {
        e.buckets = vec![0; LIFETIME_BUCKETS];
    }
    e.freed += 1;
    e.total_ns += ns as u128;
    e.buckets[bucket(ns, LIFETIME_SUB_BITS)] += 1;
}

/// Lifetimes of ended blocks and counts of live followed blocks, per site.
pub fn snapshot() -> HashMap<SiteId, Lifetimes> {
    let mut all: HashMap<SiteId, Lifetimes> = ENDED
        .iter()
        .map(|e| (e.key().clone(), e.value().clone()))
        .collect();
    for shard in FOLLOWED.iter() {
        let map = shard.lock().unwrap_or_else(|e| e.into_inner());
        for f in map.values() {
            let e = all.entry(f.site.clone()).or_default();
            e.live += 1;
            e.live_bytes += f.class_bytes;
        }
    }
    all
}
