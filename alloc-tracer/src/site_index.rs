//! Numbers for the sites of followed blocks (cold side).
//!
//! A followed block keeps its site's number, not a copy of its stack, and its
//! lifetime is added to its site's figures by that number: once its site is
//! numbered, following a block copies no frames and never hashes or compares its
//! stack again. A site is looked
//! up by its slot's key, the stack's 64-bit hash and the meta word, as the hot path's
//! site tables do (two stacks with equal hashes and meta words are taken to be the
//! same; see `hot::site_table::Slot`). A site numbered from its slot keeps the
//! slot's interned stack (`hot::stacks`, kept for the process), not a copy; one
//! numbered from frames already read copies them, once. Past [`MAX_SITES`] distinct
//! sites, a new site gets the number of its phase and class's folded site.

use crate::fast_hash::FastBuild;
use crate::hot::door::{SiteRef, Stack};
use crate::hot::site_table::SiteMeta;
use crate::site_map::{MAX_SITES, SiteId};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// A numbered site: its meta word (depth that of its frames) and its frames.
struct NumberedSite {
    meta: SiteMeta,
    frames: HeldFrames,
}

/// A numbered site's frames, innermost first.
enum HeldFrames {
    /// Its slot's interned stack, kept for the process.
    Interned(&'static [usize]),
    /// A copy.
    Copied(Box<[usize]>),
}

impl NumberedSite {
    fn frames(&self) -> &[usize] {
        match &self.frames {
            HeldFrames::Interned(f) => f,
            HeldFrames::Copied(f) => f,
        }
    }

    /// Frames this site holds a copy of.
    fn copied_frames(&self) -> usize {
        match &self.frames {
            HeldFrames::Interned(_) => 0,
            HeldFrames::Copied(f) => f.len(),
        }
    }

    fn site_id(&self) -> SiteId {
        SiteId {
            meta: self.meta,
            frames: self.frames().into(),
        }
    }

    fn copied(site: SiteId) -> NumberedSite {
        NumberedSite {
            meta: site.meta,
            frames: HeldFrames::Copied(site.frames),
        }
    }

    /// `site`'s frames: its slot's interned stack, or a copy of the frames given.
    /// Its depth is that of the frames kept: a stack past the threads' stacks' cap
    /// has the folded frame alone (see `SiteId::of_site`).
    fn of_site(site: SiteRef<'_>) -> NumberedSite {
        let interned = match site.stack {
            Stack::Slot(table, slot) => table.stack_of(slot),
            Stack::Frames(_) => None,
        };
        match interned {
            Some(stack) => NumberedSite {
                meta: site.meta.at_depth(stack.frames().len()),
                frames: HeldFrames::Interned(stack.frames()),
            },
            None => NumberedSite::copied(SiteId::of_site(site)),
        }
    }
}

#[derive(Default)]
struct Numbered {
    /// (stack hash, meta word) to number.
    by_key: HashMap<(u64, u64), u32, FastBuild>,
    /// The site of each number.
    sites: Vec<NumberedSite>,
    /// Frames the sites hold copies of, all together.
    frames: usize,
}

static NUMBERED: LazyLock<Mutex<Numbered>> = LazyLock::new(Mutex::default);

fn numbered() -> MutexGuard<'static, Numbered> {
    // A site is pushed before its key is inserted, so a panic between the two leaves
    // an unused site, never a number without one: poisoning is ignored.
    NUMBERED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key of a folded site: no stack hashes to 0 (`site_table::hash_finish`).
const FOLDED_HASH: u64 = 0;

impl Numbered {
    fn number(&mut self, key: (u64, u64), site: impl FnOnce() -> NumberedSite) -> u32 {
        if let Some(&n) = self.by_key.get(&key) {
            return n;
        }
        let n = self.sites.len() as u32;
        let site = site();
        self.frames += site.copied_frames();
        self.sites.push(site);
        self.by_key.insert(key, n);
        n
    }

    /// About how many bytes the sites take: each site, the frames it copied and its
    /// entry in the map by key (three words).
    fn bytes(&self) -> usize {
        let per_site = size_of::<NumberedSite>() + 3 * size_of::<u64>();
        self.sites.len() * per_site + self.frames * size_of::<usize>()
    }

    /// The number of `site`, numbering it if new, or its folded site's past `cap`
    /// sites.
    fn number_site(&mut self, site: SiteRef<'_>, cap: usize) -> u32 {
        let key = (site.hash, site.meta.bits());
        if let Some(&k) = self.by_key.get(&key) {
            return k;
        }
        if self.sites.len() >= cap {
            let folded = SiteId::folded(site.meta);
            let key = (FOLDED_HASH, folded.meta.bits());
            return self.number(key, || NumberedSite::copied(folded));
        }
        self.number(key, || NumberedSite::of_site(site))
    }
}

/// The number of `site`, numbering it if new. A site given by its slot in its
/// thread's table (the thread following one of its blocks) keeps its number there,
/// so that later blocks of the site take neither this lock nor a map lookup.
pub(crate) fn number(site: SiteRef<'_>) -> u32 {
    let slot = match &site.stack {
        Stack::Slot(_, slot) => Some(*slot),
        Stack::Frames(_) => None,
    };
    if let Some(n) = slot.and_then(|s| s.site_number()) {
        return n;
    }
    let n = numbered().number_site(site, MAX_SITES);
    if let Some(s) = slot {
        s.keep_site_number(n);
    }
    n
}

/// The sites of `numbers` (a number never handed out stands for an empty site).
pub(crate) fn sites(numbers: impl IntoIterator<Item = u32>) -> Vec<SiteId> {
    let n = numbered();
    numbers
        .into_iter()
        .map(|k| match n.sites.get(k as usize) {
            Some(site) => site.site_id(),
            None => SiteId {
                meta: SiteMeta::new(0, 0, 0),
                frames: Box::new([]),
            },
        })
        .collect()
}

/// About how many bytes the numbered sites take.
pub(crate) fn memory_bytes() -> u64 {
    numbered().bytes() as u64
}

/// The lock of the numbered sites, held across a `fork()` (see `fork`).
pub(crate) struct HeldForFork {
    _numbered: MutexGuard<'static, Numbered>,
}

/// Takes the lock (never held while another lock of the tracer's is taken).
pub(crate) fn hold_for_fork() -> HeldForFork {
    HeldForFork {
        _numbered: numbered(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_keeps_its_number_and_frames() {
        let meta = SiteMeta::new(0, 5, 2);
        let a = number(SiteRef {
            meta,
            hash: 0x1234_5679,
            stack: Stack::Frames(&[10, 20]),
        });
        let b = number(SiteRef {
            meta,
            hash: 0x1234_567b,
            stack: Stack::Frames(&[10, 30]),
        });
        // The same key again: its number, whatever frames come with it.
        let again = number(SiteRef {
            meta,
            hash: 0x1234_5679,
            stack: Stack::Frames(&[10, 20]),
        });
        assert_ne!(a, b);
        assert_eq!(a, again);
        let sites = sites([a, b]);
        assert_eq!(&*sites[0].frames, &[10, 20]);
        assert_eq!(&*sites[1].frames, &[10, 30]);
        assert_eq!(sites[1].meta, meta);
    }

    #[test]
    fn a_slot_keeps_its_sites_number_until_it_is_emptied() {
        use crate::hot::site_table::{Lookup, SiteKey, SiteTable, key_hash};
        let table = SiteTable::with_capacity(8);
        let of_slot = |frames: &[usize]| {
            let meta = SiteMeta::new(0, 4, frames.len());
            let key = SiteKey {
                meta,
                frames,
                hash: key_hash(meta, frames),
            };
            let Lookup::Slot(slot) = table.lookup(&key) else {
                panic!("room for one site")
            };
            let site = SiteRef {
                meta,
                hash: key.hash,
                stack: Stack::Slot(&table, slot),
            };
            (slot as *const _, number(site))
        };
        let (slot_a, a) = of_slot(&[0xa1, 0xa2]);
        assert_eq!(
            of_slot(&[0xa1, 0xa2]),
            (slot_a, a),
            "same slot, same number"
        );
        table.clear();
        // The same slot published again, for another site: one whose hash picks the
        // same slot of the eight.
        let meta = SiteMeta::new(0, 4, 2);
        let index = |frames: &[usize]| key_hash(meta, frames) & 7;
        let other = (0..)
            .map(|k| [0xb1, k])
            .find(|f| index(f) == index(&[0xa1, 0xa2]))
            .unwrap();
        let (slot_b, b) = of_slot(&other);
        assert_eq!(slot_b, slot_a);
        let by_frames = number(SiteRef {
            meta,
            hash: key_hash(meta, &other),
            stack: Stack::Frames(&other),
        });
        assert_eq!(b, by_frames, "the new site's own number");
        assert_ne!(a, b);
    }

    #[test]
    fn past_the_cap_new_sites_share_their_folded_site() {
        let mut n = Numbered::default();
        let meta = SiteMeta::new(1, 7, 1);
        let site = |hash: u64, frame: &'static [usize]| SiteRef {
            meta,
            hash,
            stack: Stack::Frames(frame),
        };
        let a = n.number_site(site(11, &[1]), 1);
        let b = n.number_site(site(13, &[2]), 1);
        let c = n.number_site(site(15, &[3]), 1);
        assert_eq!(
            n.number_site(site(11, &[1]), 1),
            a,
            "a known site keeps its number"
        );
        assert_ne!(a, b);
        assert_eq!(b, c, "both past the cap: the folded site's number");
        assert_eq!(n.sites[b as usize].site_id(), SiteId::folded(meta));
    }

    #[test]
    fn memory_counts_the_frames_each_site_copies() {
        let mut n = Numbered::default();
        let meta = SiteMeta::new(1, 7, 1);
        let per_site = size_of::<NumberedSite>() + 3 * size_of::<u64>();
        n.number_site(
            SiteRef {
                meta,
                hash: 21,
                stack: Stack::Frames(&[1, 2, 3]),
            },
            10,
        );
        assert_eq!(n.bytes(), per_site + 3 * size_of::<usize>());
        n.number_site(
            SiteRef {
                meta,
                hash: 23,
                stack: Stack::Frames(&[4; 40]),
            },
            10,
        );
        assert_eq!(n.bytes(), 2 * per_site + 43 * size_of::<usize>());
        // A site numbered from its slot holds the slot's interned stack: no copy.
        use crate::hot::site_table::{Lookup, SiteKey, SiteTable, key_hash};
        let table = SiteTable::with_capacity(8);
        let frames = [0x51, 0x52, 0x53, 0x54];
        let meta = SiteMeta::new(1, 7, frames.len());
        let hash = key_hash(meta, &frames);
        let Lookup::Slot(slot) = table.lookup(&SiteKey {
            meta,
            frames: &frames,
            hash,
        }) else {
            panic!("room for one site")
        };
        let k = n.number_site(
            SiteRef {
                meta,
                hash,
                stack: Stack::Slot(&table, slot),
            },
            10,
        );
        assert_eq!(n.bytes(), 3 * per_site + 43 * size_of::<usize>());
        let site = n.sites[k as usize].site_id();
        assert_eq!((&*site.frames, site.meta), (&frames[..], meta));
    }
}
