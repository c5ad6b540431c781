//! Sites across threads: their id ([`SiteId`]), and a concurrent map from site to a
//! value, capped in distinct sites, for the merged site counters of exited threads
//! and flushed tables (`registry`).
//!
//! Past [`MAX_SITES`] distinct sites, a new one is counted under its phase and
//! class's folded site ([`SiteId::folded`]), so that per-site figures still sum to
//! the totals. The number of sites is kept in a counter: a `DashMap`'s `len` takes
//! every shard's lock.

use crate::fast_hash::FastBuild;
use crate::hot::door::SiteRef;
use crate::hot::site_table::SiteMeta;
use crate::hot::stack::MAX_DEPTH;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// A call site across threads: phase, size class and stack.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct SiteId {
    /// Phase id, class index and depth.
    pub meta: SiteMeta,
    /// Return addresses, innermost first.
    pub frames: Box<[usize]>,
}

impl SiteId {
    /// The id of the site whose slot key is `meta` and `frames`.
    pub(crate) fn of_slot(meta: SiteMeta, frames: &[usize]) -> SiteId {
        SiteId {
            meta,
            frames: frames[..meta.depth()].into(),
        }
    }
    /// The id of a followed or heap-sampled block's site (its frames copied). Its
    /// depth is that of the frames kept: a stack past the threads' stacks' cap has
    /// the folded frame alone, as the site's counts do (`hot::site_table`).
    pub(crate) fn of_site(site: SiteRef<'_>) -> SiteId {
        let frames: Box<[usize]> = site.frames(&mut [0; MAX_DEPTH]).into();
        SiteId {
            meta: site.meta.at_depth(frames.len()),
            frames,
        }
    }
    /// Phase id of the site.
    pub fn phase(&self) -> usize {
        self.meta.phase()
    }
    /// Size-class index of the site.
    pub fn class(&self) -> usize {
        self.meta.class()
    }
    /// The site that stands for every site of `meta`'s phase and class folded past
    /// a cap: one frame, [`FOLDED_FRAME`], which reports name as such.
    pub fn folded(meta: SiteMeta) -> SiteId {
        SiteId {
            meta: SiteMeta::new(meta.phase(), meta.class(), 1),
            frames: Box::new([FOLDED_FRAME]),
        }
    }
}

/// The return address of a folded site's one frame: no code lives there, and the
/// symbolizer names it [`crate::symbolize::FOLDED_NAME`]. Stacks past the cap of
/// the threads' shared stacks fold to it too (`hot::stacks`).
pub use crate::hot::stacks::FOLDED_FRAME;

/// Most distinct sites a map keeps before it folds new ones.
pub const MAX_SITES: usize = 1 << 20;

/// Site to value, capped (see the module docs).
pub struct SiteMap<V> {
    map: DashMap<SiteId, V, FastBuild>,
    len: AtomicUsize,
    /// Frames the kept sites hold, all together.
    frames: AtomicUsize,
    folded: AtomicU64,
    /// [`MAX_SITES`], but in tests.
    cap: usize,
}

impl<V: Default> SiteMap<V> {
    /// An empty map.
    pub fn new() -> SiteMap<V> {
        SiteMap::with_cap(MAX_SITES)
    }

    fn with_cap(cap: usize) -> SiteMap<V> {
        SiteMap {
            map: DashMap::with_hasher(FastBuild::default()),
            len: AtomicUsize::new(0),
            frames: AtomicUsize::new(0),
            folded: AtomicU64::new(0),
            cap,
        }
    }

    /// Runs `f` on the value of `id`, made if new, or of its folded site when the map
    /// is full and `id` is not in it.
    pub fn update(&self, id: SiteId, f: impl FnOnce(&mut V)) {
        let id = if self.len.load(Relaxed) >= self.cap && !self.map.contains_key(&id) {
            self.folded.fetch_add(1, Relaxed);
            SiteId::folded(id.meta)
        } else {
            id
        };
        match self.map.entry(id) {
            Entry::Occupied(mut e) => f(e.get_mut()),
            Entry::Vacant(e) => {
                // Counted under the shard's write lock: one insert per new site.
                self.len.fetch_add(1, Relaxed);
                self.frames.fetch_add(e.key().frames.len(), Relaxed);
                f(e.insert(V::default()).value_mut());
            }
        }
    }
}

impl<V: Clone> SiteMap<V> {
    /// Every site and a copy of its value.
    pub fn entries(&self) -> impl Iterator<Item = (SiteId, V)> + '_ {
        self.map
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
    }
}

impl<V> SiteMap<V> {
    /// Distinct sites kept.
    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    /// About how many bytes the map holds: each site with its value, and its frames.
    pub fn memory_bytes(&self) -> usize {
        self.len() * size_of::<(SiteId, V)>() + self.frames.load(Relaxed) * size_of::<usize>()
    }

    /// Updates sent to a folded site so far because the map was full.
    pub fn folded(&self) -> u64 {
        self.folded.load(Relaxed)
    }

    /// Write-locks every shard, for a `fork()`: until [`unlock_all`](Self::unlock_all),
    /// no other thread can be inside the map.
    pub fn lock_all(&self) {
        for shard in self.map.shards() {
            // Unlocked by `unlock_all`: a write guard cannot outlive this call.
            std::mem::forget(shard.write());
        }
    }

    /// Unlocks what [`lock_all`](Self::lock_all) locked.
    ///
    /// # Safety
    /// Once per `lock_all`, on the thread that called it (or in the only thread of a
    /// child forked after it, its copy).
    pub unsafe fn unlock_all(&self) {
        for shard in self.map.shards() {
            // SAFETY: the caller's contract: `lock_all` write-locked every shard and
            // forgot the guards.
            unsafe { shard.force_unlock_write() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(frame: usize) -> SiteId {
        SiteId {
            meta: SiteMeta::new(0, 3, 1),
            frames: Box::new([frame]),
        }
    }

    #[test]
    fn counts_distinct_sites_once_each() {
        let map = SiteMap::<u64>::new();
        for frame in [1, 2, 1, 3, 2, 1] {
            map.update(site(frame), |n| *n += 1);
        }
        assert_eq!(map.len(), 3);
        let mut all: Vec<(usize, u64)> = map.entries().map(|(s, n)| (s.frames[0], n)).collect();
        all.sort();
        assert_eq!(all, [(1, 3), (2, 2), (3, 1)]);
        assert_eq!(map.folded(), 0);
        let entry = size_of::<(SiteId, u64)>();
        assert_eq!(map.memory_bytes(), 3 * (entry + size_of::<usize>()));
        map.update(
            SiteId {
                meta: SiteMeta::new(0, 3, 40),
                frames: vec![7; 40].into(),
            },
            |n| *n += 1,
        );
        assert_eq!(map.memory_bytes(), 4 * entry + 43 * size_of::<usize>());
    }

    #[test]
    fn past_the_cap_new_sites_fold_and_known_ones_do_not() {
        let map = SiteMap::<u64>::with_cap(2);
        for frame in [1, 2, 3, 4, 1, 3] {
            map.update(site(frame), |n| *n += 1);
        }
        let mut all: Vec<(usize, u64)> = map.entries().map(|(s, n)| (s.frames[0], n)).collect();
        all.sort();
        // 3, 4 and 3 again went to the folded site; 1 is known, so counted as itself.
        assert_eq!(all, [(1, 2), (2, 1), (FOLDED_FRAME, 3)]);
        assert_eq!(map.folded(), 3);
        assert_eq!(map.len(), 3);
    }
}
