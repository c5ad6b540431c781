//! Cold path: the lifetimes of followed blocks that ended, per site.
//!
//! Every end of a followed block adds its lifetime to its site's record. Threads
//! that run the same code end blocks of the same sites, so records written in place
//! by every thread would move their cache lines, and the lock over them, from core
//! to core at each end: measured with every block followed, two threads took two to
//! three times one thread's time an end. So an end is written to a buffer of its
//! thread's own (its `stripe`), and a full buffer is added to the records at once,
//! under their lock, once every [`BUFFER`] ends. Readers ([`with_records`]) first
//! add every buffer, so they see every end.

use crate::hot::log_linear::{LIFETIME_BUCKETS, LIFETIME_SUB_BITS, bucket};
use crate::stripe::{self, Padded, STRIPES};
use std::sync::{Mutex, MutexGuard};

/// Buckets of a lifetime histogram allocated together: four powers of two.
const GROUP: usize = 4 << LIFETIME_SUB_BITS;
/// Groups of a whole histogram.
const GROUPS: usize = LIFETIME_BUCKETS.div_ceil(GROUP);

/// What became of one site's ended blocks. Its histogram's buckets come in groups
/// of four powers of two, each allocated at its first lifetime: a site's lifetimes
/// mostly span a few of the 62 powers of two a histogram covers, and a whole one
/// took 2 KiB a site (28 MB of a small program's 112 MiB on 16 threads).
pub(crate) struct Ended {
    pub freed: u64,
    pub total_ns: u128,
    groups: [Option<Box<[u64; GROUP]>>; GROUPS],
    /// Blocks of the site dropped while followed (`lifetimes::drop_all`).
    pub dropped: u64,
}

impl Ended {
    const EMPTY: Ended = Ended {
        freed: 0,
        total_ns: 0,
        groups: [const { None }; GROUPS],
        dropped: 0,
    };

    /// Adds a lifetime of `ns`; true when it took a new group of buckets.
    fn add_lifetime(&mut self, ns: u64) -> bool {
        self.freed += 1;
        self.total_ns += ns as u128;
        let b = bucket(ns, LIFETIME_SUB_BITS);
        let group = &mut self.groups[b / GROUP];
        let new = group.is_none();
        group.get_or_insert_with(|| Box::new([0; GROUP]))[b % GROUP] += 1;
        new
    }

    /// Lifetimes per bucket, up to the last bucket that holds any, in an allocation
    /// of at most the groups it reaches (a report holds one for each site with
    /// lifetimes: 2 KiB each at the whole histogram's length).
    pub(crate) fn buckets(&self) -> Vec<u64> {
        let reach = self.groups.iter().rposition(Option::is_some);
        let mut out = vec![0; reach.map_or(0, |g| (g + 1) * GROUP).min(LIFETIME_BUCKETS)];
        for (g, group) in self.groups.iter().enumerate() {
            if let Some(group) = group {
                for (k, &n) in group.iter().enumerate() {
                    if let Some(b) = out.get_mut(g * GROUP + k) {
                        *b = n;
                    }
                }
            }
        }
        let used = out.iter().rposition(|&n| n != 0).map_or(0, |b| b + 1);
        out.truncate(used);
        out
    }
}

/// Per-site records, by site number, and the groups of buckets they took.
pub(crate) struct Records {
    sites: Vec<Ended>,
    groups: usize,
}

impl Records {
    /// The record of site number `site`, made if new.
    pub(crate) fn site(&mut self, site: u32) -> &mut Ended {
        let k = site as usize;
        if self.sites.len() <= k {
            self.sites.resize_with(k + 1, || Ended::EMPTY);
        }
        &mut self.sites[k]
    }

    /// Adds a lifetime of `ns` to site number `site`.
    fn add_lifetime(&mut self, site: u32, ns: u64) {
        if self.site(site).add_lifetime(ns) {
            self.groups += 1;
        }
    }

    /// The records with their site numbers.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &Ended)> {
        self.sites.iter().enumerate().map(|(k, e)| (k as u32, e))
    }
}

static RECORDS: Mutex<Records> = Mutex::new(Records {
    sites: Vec::new(),
    groups: 0,
});

fn records() -> MutexGuard<'static, Records> {
    // Each update is complete before anything that can panic: poisoning is ignored.
    RECORDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends a stripe holds before they are added to the records.
const BUFFER: usize = 128;

/// Ends not yet added to the records: (site number, lifetime in ns).
struct Buffer {
    len: usize,
    ends: [(u32, u64); BUFFER],
}

impl Buffer {
    /// Adds the buffered ends to `records` and empties the buffer.
    fn drain_into(&mut self, records: &mut Records) {
        for &(site, ns) in &self.ends[..self.len] {
            records.add_lifetime(site, ns);
        }
        self.len = 0;
    }
}

/// Each thread's buffer, by its stripe.
static BUFFERS: [Padded<Mutex<Buffer>>; STRIPES] = [const {
    Padded(Mutex::new(Buffer {
        len: 0,
        ends: [(0, 0); BUFFER],
    }))
}; STRIPES];

fn lock(stripe: &Mutex<Buffer>) -> MutexGuard<'_, Buffer> {
    // As for the records: poisoning is ignored.
    stripe.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds a lifetime of `ns` to site number `site`: to this thread's buffer, which
/// goes to the records when full. Cold, under the guard; takes the stripe's lock,
/// then, once every [`BUFFER`] ends, the records'.
pub(crate) fn add(site: u32, ns: u64) {
    let mut b = lock(&BUFFERS[stripe::index()].0);
    let n = b.len;
    b.ends[n] = (site, ns);
    b.len = n + 1;
    if b.len == BUFFER {
        b.drain_into(&mut records());
    }
}

/// Counts one block dropped while followed (`lifetimes::drop_all`) for each site
/// number in `sites`. Takes the records' lock.
pub(crate) fn add_dropped(sites: impl IntoIterator<Item = u32>) {
    let mut r = records();
    for site in sites {
        r.site(site).dropped += 1;
    }
}

/// Runs `f` on the records with every buffered end added. Takes each stripe's lock,
/// then the records', as [`add`] does.
pub(crate) fn with_records<R>(f: impl FnOnce(&mut Records) -> R) -> R {
    for s in &BUFFERS {
        lock(&s.0).drain_into(&mut records());
    }
    f(&mut records())
}

/// About how many bytes the records and buffers take.
pub(crate) fn memory_bytes() -> u64 {
    let r = records();
    (r.sites.capacity() * size_of::<Ended>()
        + r.groups * size_of::<[u64; GROUP]>()
        + size_of_val(&BUFFERS)) as u64
}

/// Every lock of the ended lifetimes, held across a `fork()` (see `fork`).
pub(crate) struct HeldForFork {
    // Fields drop in declaration order, releasing in the reverse of taking.
    _records: MutexGuard<'static, Records>,
    _stripes: Vec<MutexGuard<'static, Buffer>>,
}

/// Takes every stripe's lock, then the records' (the order [`add`] takes them in).
pub(crate) fn hold_for_fork() -> HeldForFork {
    let stripes = BUFFERS.iter().map(|s| lock(&s.0)).collect();
    HeldForFork {
        _records: records(),
        _stripes: stripes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::door::{SiteRef, Stack};
    use crate::hot::site_table::SiteMeta;
    use crate::site_index;

    #[test]
    fn buckets_in_groups_are_the_whole_histogram() {
        let mut e = Ended::EMPTY;
        let mut whole = vec![0u64; LIFETIME_BUCKETS];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut lifetimes = vec![0, 1, 7, 8, 1_000, u64::MAX, u64::MAX - 1];
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Spread over every power of two.
            lifetimes.push(x >> (x % 64));
        }
        let mut groups = 0;
        for &ns in &lifetimes {
            groups += usize::from(e.add_lifetime(ns));
            whole[bucket(ns, LIFETIME_SUB_BITS)] += 1;
        }
        assert_eq!(e.buckets(), whole);
        assert_eq!(groups, GROUPS);
        assert_eq!(e.freed, lifetimes.len() as u64);
        // A site whose blocks lived 1 to 2 µs: one group, its buckets up to the last
        // that holds any.
        let mut e = Ended::EMPTY;
        assert!(e.add_lifetime(1_500));
        assert!(!e.add_lifetime(1_100));
        let b = e.buckets();
        assert_eq!(b.len(), bucket(1_500, LIFETIME_SUB_BITS) + 1);
        assert_eq!(b.iter().sum::<u64>(), 2);
        assert!(b.capacity() <= (bucket(1_500, LIFETIME_SUB_BITS) / GROUP + 1) * GROUP);
        assert!(Ended::EMPTY.buckets().is_empty());
    }

    #[test]
    fn every_buffered_end_reaches_the_records() {
        // Sites of this test's own, numbered as real ones are (records are indexed
        // by number: a number far above the others would make a record for every
        // number below it), each ended on a thread of its own, so that stripes fill
        // and drain at different points.
        let sites: Vec<u32> = (0..3u64)
            .map(|t| {
                site_index::number(SiteRef {
                    meta: SiteMeta::new(0, 3, 0),
                    hash: 0xe7de_d000 + t,
                    stack: Stack::Frames(&[]),
                })
            })
            .collect();
        let threads: Vec<_> = sites
            .iter()
            .map(|&site| {
                std::thread::spawn(move || {
                    for i in 0..(BUFFER as u64 * 2 + 7) {
                        add(site, 1_000 + i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        with_records(|r| {
            for (t, &site) in sites.iter().enumerate() {
                let e = r.site(site);
                let n = BUFFER as u64 * 2 + 7;
                assert_eq!(e.freed, n, "thread {t}");
                assert_eq!(e.total_ns, (0..n).map(|i| 1_000 + i as u128).sum::<u128>());
                assert_eq!(e.buckets().iter().sum::<u64>(), n);
            }
        });
    }
}
