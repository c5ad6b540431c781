//! Cold path: blocks followed from allocation to free, for lifetimes and per-site
//! frees and live bytes.
//!
//! Following every block would need a pointer side table updated on every
//! allocation and free (~45 ns a pair here), so only sampled blocks are followed: one
//! allocation in `lifetime_interval` (geometric intervals), or every sampled stack in
//! `sample` mode. A free may happen on any thread, so followed blocks live in a global
//! sharded map. Every free checks the hot side's table first (`hot::followed`): a
//! relaxed load of one entry indexed by the pointer's hash, which counts the followed
//! blocks hashed to it and holds their fingerprint; only when it may be the freed
//! block's does the free take the cold path (the door's `block_ended`) and the shard
//! lock. Heap sampling (`heap`) follows its blocks through the same table; the door
//! counts each followed block in it once, and takes it out once.

use crate::fast_hash::FastBuild;
use crate::hot::clock;
use crate::hot::door::SiteRef;
use crate::hot::log_linear::{LIFETIME_BUCKETS, LIFETIME_SUB_BITS, bucket};
use crate::site_index;
use crate::site_map::SiteId;
use alloc_tracer_format::manifest::MAX_FOLLOWED;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex, MutexGuard};

const SHARDS: usize = 16;

/// Blocks followed now (at most `MAX_FOLLOWED`).
static FOLLOWING: AtomicU64 = AtomicU64::new(0);
/// Blocks not followed because `MAX_FOLLOWED` were.
static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// Followed blocks dropped because recording of frees stopped (`drop_all`).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Followed blocks dropped because recording of frees stopped while they were
/// followed ([`drop_all`]).
pub fn dropped() -> u64 {
    DROPPED.load(Relaxed)
}

/// Blocks that were due to be followed but were not, because
/// [`MAX_FOLLOWED`] were followed at once (which bounds the memory lifetimes take).
pub fn skipped() -> u64 {
    SKIPPED.load(Relaxed)
}

/// True when as many blocks as allowed are followed, counting the block the caller
/// then skips.
pub(crate) fn skip_if_full() -> bool {
    let full = FOLLOWING.load(Relaxed) >= MAX_FOLLOWED;
    if full {
        SKIPPED.fetch_add(1, Relaxed);
    }
    full
}

/// About how many bytes the followed blocks and the ended lifetimes take.
pub fn memory_bytes() -> u64 {
    let followed = size_of::<(usize, Followed)>();
    FOLLOWING.load(Relaxed) * followed as u64
        + (ended().capacity() * size_of::<Ended>()) as u64
        + site_index::memory_bytes()
}

struct Followed {
    /// The site's number (`site_index`).
    site: u32,
    birth_ns: u64,
    class_bytes: u64,
}

type Blocks = HashMap<usize, Followed, FastBuild>;

static FOLLOWED: LazyLock<[Mutex<Blocks>; SHARDS]> =
    LazyLock::new(|| std::array::from_fn(|_| Mutex::new(Blocks::default())));

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
    /// Followed blocks dropped when recording of frees stopped ([`drop_all`]).
    pub dropped: u64,
    /// Size-class bytes of the followed blocks still live.
    pub live_bytes: u64,
}

impl Lifetimes {
    /// Adds `o`'s figures to these (two sites that turned out to be one).
    pub(crate) fn add(&mut self, o: &Lifetimes) {
        self.freed += o.freed;
        self.total_ns += o.total_ns;
        self.live += o.live;
        self.dropped += o.dropped;
        self.live_bytes += o.live_bytes;
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
    }
}

/// What became of one site's ended blocks. The histogram lies in the record, not
/// behind a pointer, so that an end's two writes (the sums, the lifetime's bucket)
/// go to addresses known at once: the two cache misses an end pays overlap, where a
/// bucket behind the record's pointer waits for the record's miss first.
struct Ended {
    freed: u64,
    total_ns: u128,
    buckets: [u64; LIFETIME_BUCKETS],
    /// Blocks of the site dropped while followed ([`drop_all`]).
    dropped: u64,
}

impl Ended {
    const EMPTY: Ended = Ended {
        freed: 0,
        total_ns: 0,
        buckets: [0; LIFETIME_BUCKETS],
        dropped: 0,
    };
}

/// Lifetimes of ended blocks, by site number.
static ENDED: Mutex<Vec<Ended>> = Mutex::new(Vec::new());

fn ended() -> MutexGuard<'static, Vec<Ended>> {
    // Each update is complete before anything that can panic: poisoning is ignored.
    ENDED.lock().unwrap_or_else(|e| e.into_inner())
}

fn shard(ptr: usize) -> &'static Mutex<Blocks> {
    &FOLLOWED[(ptr >> 4) % SHARDS]
}

/// Starts following the block at `ptr` (counted in the hot side's table by the
/// caller). True when a block followed at the same address was replaced, whose
/// count in the table the caller then takes out: rare, as a block stops being
/// followed before its address can be handed out again, unless its free went
/// unseen (made under the guard: inside `alloc_tracer::untraced`). Cold, under the
/// guard.
pub(crate) fn follow(ptr: *mut u8, site: SiteRef<'_>, class_bytes: u64) -> bool {
    let ptr = ptr as usize;
    let f = Followed {
        site: site_index::number(site),
        birth_ns: clock::now_ns(),
        class_bytes,
    };
    let old = shard(ptr)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ptr, f);
    if old.is_none() {
        FOLLOWING.fetch_add(1, Relaxed);
    }
    old.is_some()
}

/// Ends following `ptr` if it is followed (it is being freed or moved); true when
/// it was (the caller releases its entry). Cold, under the guard, and before the
/// inner allocator frees the block, so the address cannot be reused and followed
/// again in between.
pub(crate) fn end(ptr: *mut u8) -> bool {
    let Some(f) = take(ptr) else {
        return false;
    };
    let ns = clock::now_ns().saturating_sub(f.birth_ns);
    let mut ended = ended();
    let e = site_ended(&mut ended, f.site);
    e.freed += 1;
    e.total_ns += ns as u128;
    e.buckets[bucket(ns, LIFETIME_SUB_BITS)] += 1;
    true
}

/// Takes `ptr` out of the followed blocks, if it is one.
fn take(ptr: *mut u8) -> Option<Followed> {
    let ptr = ptr as usize;
    let f = shard(ptr)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&ptr)?;
    FOLLOWING.fetch_sub(1, Relaxed);
    Some(f)
}

/// The ended record of site number `site`, made if new.
fn site_ended(ended: &mut Vec<Ended>, site: u32) -> &mut Ended {
    let k = site as usize;
    if ended.len() <= k {
        ended.resize_with(k + 1, || Ended::EMPTY);
    }
    &mut ended[k]
}

/// Stops following `ptr` without a lifetime if it is followed, counting it dropped;
/// true when it was (the caller releases its entry). For a block that began to be
/// followed as recording of frees stopped (the door's `block_followed`), which
/// [`drop_all`] may or may not have seen. Cold, under the guard.
pub(crate) fn forget(ptr: *mut u8) -> bool {
    let Some(f) = take(ptr) else {
        return false;
    };
    DROPPED.fetch_add(1, Relaxed);
    site_ended(&mut ended(), f.site).dropped += 1;
    true
}

/// Stops following every followed block, counting each dropped at its site, and
/// hands each address to `release` (which takes it out of the hot side's table).
/// For when frees stop being recorded (a pause, a switch to a mode that follows
/// nothing): a block left followed would stay live in the report for good, and a
/// free of another block at its address, once recording resumed, would end it with
/// a lifetime that is not one. Cold, under the guard. Takes each shard, then
/// `ENDED` inside it, the order `hold_for_fork` takes them in.
pub(crate) fn drop_all(mut release: impl FnMut(usize)) {
    for shard in FOLLOWED.iter() {
        let mut blocks = shard.lock().unwrap_or_else(|e| e.into_inner());
        if blocks.is_empty() {
            continue;
        }
        let mut ended = ended();
        let n = blocks.len() as u64;
        for (ptr, f) in blocks.drain() {
            site_ended(&mut ended, f.site).dropped += 1;
            release(ptr);
        }
        FOLLOWING.fetch_sub(n, Relaxed);
        DROPPED.fetch_add(n, Relaxed);
    }
}

/// Every lock of the followed blocks, held across a `fork()` (see `fork`).
pub(crate) struct HeldForFork {
    // Fields drop in declaration order, releasing in the reverse of taking.
    _sites: site_index::HeldForFork,
    _ended: MutexGuard<'static, Vec<Ended>>,
    _followed: Vec<MutexGuard<'static, Blocks>>,
}

/// Takes every lock of the followed blocks: each shard of `FOLLOWED`, then `ENDED`,
/// then the site numbers' (none of them is taken while another is held).
pub(crate) fn hold_for_fork() -> HeldForFork {
    let followed = FOLLOWED
        .iter()
        .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()))
        .collect();
    let ended = ended();
    HeldForFork {
        _sites: site_index::hold_for_fork(),
        _ended: ended,
        _followed: followed,
    }
}

/// Lifetimes of ended blocks and counts of live followed blocks, per site.
pub fn snapshot() -> HashMap<SiteId, Lifetimes> {
    let mut by_number: HashMap<u32, Lifetimes, FastBuild> = ended()
        .iter()
        .enumerate()
        .filter(|(_, e)| e.freed != 0 || e.dropped != 0)
        .map(|(k, e)| {
            let l = Lifetimes {
                freed: e.freed,
                dropped: e.dropped,
                total_ns: e.total_ns,
                buckets: e.buckets.to_vec(),
                ..Lifetimes::default()
            };
            (k as u32, l)
        })
        .collect();
    for shard in FOLLOWED.iter() {
        let map = shard.lock().unwrap_or_else(|e| e.into_inner());
        for f in map.values() {
            let e = by_number.entry(f.site).or_default();
            e.live += 1;
            e.live_bytes += f.class_bytes;
        }
    }
    let (numbers, lifetimes): (Vec<u32>, Vec<Lifetimes>) = by_number.into_iter().unzip();
    // Each key has one number; should two keys' sites be equal, their figures add up.
    let mut all: HashMap<SiteId, Lifetimes> = HashMap::new();
    for (site, l) in site_index::sites(numbers).into_iter().zip(lifetimes) {
        all.entry(site).or_default().add(&l);
    }
    all
}
