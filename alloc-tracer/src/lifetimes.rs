//! Cold path: blocks followed from allocation to free, for lifetimes and per-site
//! frees and live bytes.
//!
//! Following every block would need a pointer side table updated on every
//! allocation and free (~45 ns a pair here), so only sampled blocks are followed: one
//! allocation in `lifetime_interval` (geometric intervals), or every sampled stack in
//! `sample` mode. A free may happen on any thread, so followed blocks live in a global
//! map, in shards chosen by a hash of the address, each under its own lock and
//! holding at most its share of [`MAX_FOLLOWED`]; no count shared by every shard is
//! written, so threads following blocks in different shards write no common cache
//! line. An ended block's lifetime goes to its site's record through `ended`, which
//! buffers it per thread. Every free checks the hot side's table first
//! (`hot::followed`): a relaxed load of one entry indexed by the pointer's hash,
//! which counts the followed blocks hashed to it and holds their fingerprint; only
//! when it may be the freed block's does the free take the cold path (the door's
//! `block_ended`) and the shard lock. Heap sampling (`heap`) follows its blocks through the same table; the door
//! counts each followed block in it once, and takes it out once.

use crate::ended;
use crate::fast_hash::FastBuild;
use crate::hot::clock;
use crate::hot::door::SiteRef;
use crate::hot::followed::address_hash;
use crate::site_index;
use crate::site_map::SiteId;
use crate::stripe::Padded;
use alloc_tracer_format::manifest::MAX_FOLLOWED;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{LazyLock, Mutex, MutexGuard};

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;

/// Blocks a shard follows at once, at most: its share of [`MAX_FOLLOWED`].
const SHARD_CAP: usize = (MAX_FOLLOWED as usize) / SHARDS;

/// Blocks not followed because their shard followed [`SHARD_CAP`].
static SKIPPED: AtomicU64 = AtomicU64::new(0);

/// Followed blocks dropped because recording of frees stopped (`drop_all`).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Followed blocks dropped because recording of frees stopped while they were
/// followed ([`drop_all`]).
pub fn dropped() -> u64 {
    DROPPED.load(Relaxed)
}

/// Blocks that were due to be followed but were not, because their shard followed
/// its share of [`MAX_FOLLOWED`] at once (which bounds the memory lifetimes take).
pub fn skipped() -> u64 {
    SKIPPED.load(Relaxed)
}

/// About how many bytes the followed blocks and the ended lifetimes take.
pub fn memory_bytes() -> u64 {
    let followed: usize = shards().map(|s| lock(s).capacity()).sum();
    (followed * (size_of::<(usize, Followed)>() + 1)) as u64
        + ended::memory_bytes()
        + site_index::memory_bytes()
}

struct Followed {
    /// The site's number (`site_index`).
    site: u32,
    birth_ns: u64,
    /// Its real bytes times the blocks it stands for (weighted as recorded).
    live_bytes: u64,
}

type Blocks = HashMap<usize, Followed, FastBuild>;

/// The shards, each on cache lines of its own.
static FOLLOWED: LazyLock<[Padded<Mutex<Blocks>>; SHARDS]> =
    LazyLock::new(|| std::array::from_fn(|_| Padded(Mutex::new(Blocks::default()))));

/// Every shard of `FOLLOWED`.
fn shards() -> impl Iterator<Item = &'static Mutex<Blocks>> {
    FOLLOWED.iter().map(|s| &s.0)
}

/// What became of the followed blocks of one site.
#[derive(Clone, Debug, Default)]
pub struct Lifetimes {
    /// Followed blocks freed (or moved by realloc).
    pub freed: u64,
    /// Sum of their lifetimes.
    pub total_ns: u128,
    /// Their lifetimes, per `log_linear` bucket (2 sub-bits), up to the last bucket
    /// that holds any.
    pub buckets: Vec<u64>,
    /// Followed blocks still live.
    pub live: u64,
    /// Followed blocks dropped when recording of frees stopped ([`drop_all`]).
    pub dropped: u64,
    /// Size-class bytes of the followed blocks still live, each times the blocks
    /// it stands for (its weight when it was followed).
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

fn shard(ptr: usize) -> &'static Mutex<Blocks> {
    // Hashed: blocks of one size class, 64 bytes or more apart, would leave most
    // shards unused if chosen by a few address bits.
    &FOLLOWED[address_hash(ptr, SHARD_BITS)].0
}

fn lock(shard: &Mutex<Blocks>) -> MutexGuard<'_, Blocks> {
    // Each update is complete before anything that can panic: poisoning is ignored.
    shard.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts following the block at `ptr` (counted in the hot side's table by the
/// caller), unless its shard follows its share of [`MAX_FOLLOWED`] already (counted
/// in [`skipped`]). True when the caller takes one count out of the table: the
/// block's own, when skipped, or that of a block followed at the same address,
/// which this one replaced: rare, as a block stops being followed before its
/// address can be handed out again, unless its free went unseen (made under the
/// guard: inside `alloc_tracer::untraced`). Cold, under the guard.
pub(crate) fn follow(ptr: *mut u8, site: SiteRef<'_>, live_bytes: u64) -> bool {
    let ptr = ptr as usize;
    let f = Followed {
        site: site_index::number(site),
        birth_ns: clock::now_ns(),
        live_bytes,
    };
    let mut blocks = lock(shard(ptr));
    if blocks.len() >= SHARD_CAP && !blocks.contains_key(&ptr) {
        SKIPPED.fetch_add(1, Relaxed);
        return true;
    }
    blocks.insert(ptr, f).is_some()
}

/// Ends following `ptr` if it is followed (it is being freed or moved); true when
/// it was (the caller releases its entry). Cold, under the guard, and before the
/// inner allocator frees the block, so the address cannot be reused and followed
/// again in between.
pub(crate) fn end(ptr: *mut u8) -> bool {
    let Some(f) = take(ptr) else {
        return false;
    };
    ended::add(f.site, clock::now_ns().saturating_sub(f.birth_ns));
    true
}

/// Takes `ptr` out of the followed blocks, if it is one.
fn take(ptr: *mut u8) -> Option<Followed> {
    let ptr = ptr as usize;
    lock(shard(ptr)).remove(&ptr)
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
    ended::add_dropped([f.site]);
    true
}

/// Stops following every followed block, counting each dropped at its site, and
/// hands each address to `release` (which takes it out of the hot side's table).
/// For when frees stop being recorded (a pause, a switch to a mode that follows
/// nothing): a block left followed would stay live in the report for good, and a
/// free of another block at its address, once recording resumed, would end it with
/// a lifetime that is not one. Cold, under the guard. Takes each shard, then the
/// ended records' lock inside it, the order `hold_for_fork` takes them in.
pub(crate) fn drop_all(mut release: impl FnMut(usize)) {
    for shard in shards() {
        let mut blocks = lock(shard);
        if blocks.is_empty() {
            continue;
        }
        DROPPED.fetch_add(blocks.len() as u64, Relaxed);
        ended::add_dropped(blocks.drain().map(|(ptr, f)| {
            release(ptr);
            f.site
        }));
    }
}

/// Every lock of the followed blocks, held across a `fork()` (see `fork`).
pub(crate) struct HeldForFork {
    // Fields drop in declaration order, releasing in the reverse of taking.
    _sites: site_index::HeldForFork,
    _ended: ended::HeldForFork,
    _followed: Vec<MutexGuard<'static, Blocks>>,
}

/// Takes every lock of the followed blocks: each shard of `FOLLOWED`, then the
/// ended records' (`ended::hold_for_fork`), then the site numbers' (taken while
/// none of the others is held).
pub(crate) fn hold_for_fork() -> HeldForFork {
    let followed = shards().map(lock).collect();
    let ended = ended::hold_for_fork();
    HeldForFork {
        _sites: site_index::hold_for_fork(),
        _ended: ended,
        _followed: followed,
    }
}

/// Lifetimes of ended blocks and counts of live followed blocks, per site.
pub fn snapshot() -> HashMap<SiteId, Lifetimes> {
    let mut by_number: HashMap<u32, Lifetimes, FastBuild> = ended::with_records(|r| {
        r.iter()
            .filter(|(_, e)| e.freed != 0 || e.dropped != 0)
            .map(|(k, e)| {
                let l = Lifetimes {
                    freed: e.freed,
                    dropped: e.dropped,
                    total_ns: e.total_ns,
                    buckets: e.buckets(),
                    ..Lifetimes::default()
                };
                (k, l)
            })
            .collect()
    });
    for shard in shards() {
        let map = lock(shard);
        for f in map.values() {
            let e = by_number.entry(f.site).or_default();
            e.live += 1;
            e.live_bytes += f.live_bytes;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::door::Stack;
    use crate::hot::site_table::SiteMeta;

    #[test]
    fn a_full_shard_turns_new_blocks_away_and_still_replaces_its_own() {
        let site = SiteRef {
            meta: SiteMeta::new(0, 5, 0),
            hash: 0x7171,
            stack: Stack::Frames(&[]),
        };
        // Addresses no real block has here, all in one shard: not the shard of the
        // door's unit test's addresses, which follows a block while this runs.
        let index = |p: usize| address_hash(p, SHARD_BITS);
        let busy = [0x5b00_0000_0040usize, 0x5b00_0000_0080].map(index);
        let target = (0..SHARDS).find(|k| !busy.contains(k)).unwrap();
        let addresses: Vec<usize> = (0usize..)
            .map(|k| 0x5c00_0000_0000 + k * 16)
            .filter(|&p| index(p) == target)
            .take(SHARD_CAP + 2)
            .collect();
        let before = skipped();
        for &p in &addresses[..SHARD_CAP] {
            assert!(
                !follow(p as *mut u8, site, 64),
                "followed, nothing replaced"
            );
        }
        assert!(
            follow(addresses[SHARD_CAP] as *mut u8, site, 64),
            "turned away"
        );
        assert!(follow(addresses[SHARD_CAP + 1] as *mut u8, site, 64));
        assert_eq!(skipped(), before + 2);
        assert!(
            take(addresses[SHARD_CAP] as *mut u8).is_none(),
            "not followed"
        );
        // A block at an address already followed replaces it, full or not.
        assert!(follow(addresses[0] as *mut u8, site, 64), "replaced");
        assert_eq!(skipped(), before + 2);
        for &p in &addresses[..SHARD_CAP] {
            assert!(take(p as *mut u8).is_some());
        }
        // Room again.
        assert!(!follow(addresses[SHARD_CAP] as *mut u8, site, 64));
        assert!(take(addresses[SHARD_CAP] as *mut u8).is_some());
    }
}
