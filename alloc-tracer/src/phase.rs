//! Phases: named regions of a run (`setup`, `synthesize`, ...) that reports keep
//! apart, and pausing.
//!
//! Phases are process-wide: the current phase is one field of the control word that
//! every allocation on every thread reads, so a phase set by the thread driving the
//! work also covers the rayon workers it starts. Phases nest; leaving one restores
//! the one before. Up to 15 names can be told apart, `main` (outside every phase)
//! among them: 14 of the program's own; later names are counted under
//! `(other phases)`.

use crate::hot::control::{self, MAX_PHASES};
use crate::hot::thread::guarded;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The phase in force when no guard is alive.
pub const DEFAULT_PHASE: &str = "main";
/// Where names beyond the first [`MAX_PHASES`] - 1 go.
pub const OVERFLOW_PHASE: &str = "(other phases)";

/// Time spent in one phase.
#[derive(Clone, Debug, Default)]
pub struct PhaseTime {
    /// Phase name.
    pub name: String,
    /// Times the phase was entered.
    pub entries: u64,
    /// When it was first entered (monotonic ns), if ever.
    pub first_start_ns: Option<u64>,
    /// Total time inside it, nested phases included, and of its entries still open
    /// the time so far.
    pub total_ns: u64,
    /// Entries open now (timed guards not dropped yet), and the sum of their starts.
    open: u64,
    open_starts_ns: u128,
}

static PHASES: Mutex<Vec<PhaseTime>> = Mutex::new(Vec::new());
/// Phase ids in use: every id recorded so far is below it.
static USED: AtomicUsize = AtomicUsize::new(1);

/// Phase ids in use so far (at least 1, `main`), read without a lock.
pub fn used() -> usize {
    USED.load(Relaxed)
}

fn with_phases<R>(f: impl FnOnce(&mut Vec<PhaseTime>) -> R) -> R {
    guarded(|| {
        let mut p = PHASES.lock().unwrap_or_else(|e| e.into_inner());
        if p.is_empty() {
            p.push(PhaseTime {
                name: DEFAULT_PHASE.into(),
                ..Default::default()
            });
        }
        f(&mut p)
    })
}

/// The phase list's lock, held across a `fork()` (see `fork`).
pub(crate) fn hold_for_fork() -> std::sync::MutexGuard<'static, Vec<PhaseTime>> {
    PHASES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of phase `name`, registering it (or the overflow phase) if new.
fn id_of(p: &mut Vec<PhaseTime>, name: &str) -> usize {
    match p.iter().position(|x| x.name == name) {
        Some(i) => i,
        None if p.len() < MAX_PHASES - 1 => {
            p.push(PhaseTime {
                name: name.into(),
                ..Default::default()
            });
            USED.fetch_max(p.len(), Relaxed);
            p.len() - 1
        }
        None => {
            if p.len() < MAX_PHASES {
                p.push(PhaseTime {
                    name: OVERFLOW_PHASE.into(),
                    ..Default::default()
                });
                // Once: the report cannot tell these phases apart, and the program's
                // author should learn it now, not from the report. (Under the guard:
                // what the message allocates is the tracer's own. A bare write(2), not
                // stderr's lock, which a forked child may find held.)
                let note = format!(
                    "alloc-tracer: phase \"{name}\" is past the {} names reports tell \
                     apart (`main` among them): it and every later new name are counted \
                     under \"{OVERFLOW_PHASE}\"\n",
                    MAX_PHASES - 1
                );
                // SAFETY: writes a live buffer of its length to fd 2.
                unsafe { libc::write(2, note.as_ptr().cast(), note.len()) };
            }
            USED.fetch_max(MAX_PHASES, Relaxed);
            MAX_PHASES - 1
        }
    }
}

/// Marks a region until the guard is dropped. Phases are process-wide: the phase
/// in force covers every thread's allocations, and dropping a guard restores the
/// phase in force when it was made, so guards must be dropped in the reverse order
/// of their making, from one driving thread (else a finished phase can stay in
/// force). Up to 15 names are told apart, `main` among them; later names count as
/// `(other phases)`.
#[must_use = "the phase ends when the guard is dropped"]
pub struct PhaseGuard {
    id: usize,
    previous: usize,
    start_ns: u64,
}

/// Enters phase `name` until the returned guard is dropped (see [`PhaseGuard`]).
pub fn phase(name: &str) -> PhaseGuard {
    let start_ns = crate::hot::clock::now_ns();
    let id = with_phases(|p| {
        let id = id_of(p, name);
        let t = &mut p[id];
        t.entries += 1;
        t.first_start_ns.get_or_insert(start_ns);
        t.open += 1;
        t.open_starts_ns += u128::from(start_ns);
        id
    });
    let previous = set_phase(id);
    PhaseGuard {
        id,
        previous,
        start_ns,
    }
}

/// Puts `id` in force and returns the phase that was; the phase's peak starts from
/// what is live as it comes into force (a phase that only frees peaks there).
#[inline]
fn set_phase(id: usize) -> usize {
    let previous = control::set_phase(id).phase();
    crate::hot::live::phase_entered(id);
    previous
}

impl Drop for PhaseGuard {
    fn drop(&mut self) {
        set_phase(self.previous);
        let elapsed = crate::hot::clock::now_ns().saturating_sub(self.start_ns);
        with_phases(|p| {
            if let Some(t) = p.get_mut(self.id) {
                t.total_ns += elapsed;
                t.open = t.open.saturating_sub(1);
                t.open_starts_ns = t.open_starts_ns.saturating_sub(u128::from(self.start_ns));
            }
        });
    }
}

/// A phase looked up once and entered cheaply many times: one atomic update of the
/// control word on entry and one on exit, no lock and no clock. For tight regions such
/// as the evaluation of each enforce closure. Quick guards are not timed or counted:
/// the phase's `total_ns` (the report's `wall_ns`), `entries` and `first_start_ns`
/// come from [`phase`] guards only. Process-wide, as [`PhaseGuard`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseId(usize);

/// Looks up (or registers) phase `name` for [`PhaseId::enter`].
pub fn phase_id(name: &str) -> PhaseId {
    PhaseId(with_phases(|p| id_of(p, name)))
}

impl PhaseId {
    /// Enters the phase until the returned guard drops.
    #[inline]
    pub fn enter(self) -> QuickPhaseGuard {
        QuickPhaseGuard {
            previous: set_phase(self.0),
        }
    }

    /// The phase's index in [`phases`](crate::phases) and in
    /// [`Counts::phases`](crate::Counts::phases).
    pub fn index(self) -> usize {
        self.0
    }
}

/// Restores the previous phase when dropped; see [`PhaseId`].
#[must_use = "the phase ends when the guard is dropped"]
pub struct QuickPhaseGuard {
    previous: usize,
}

impl Drop for QuickPhaseGuard {
    #[inline]
    fn drop(&mut self) {
        set_phase(self.previous);
    }
}

/// Every phase so far, indexed by phase id (id 0 is `"main"`, in force outside any
/// phase guard); a phase's open entries count up to now.
pub fn phases() -> Vec<PhaseTime> {
    phases_at(crate::hot::clock::now_ns())
}

/// [`phases`], open entries counted up to `now_ns` (monotonic, not before any
/// open entry's start): a report's phases as of its end.
pub(crate) fn phases_at(now_ns: u64) -> Vec<PhaseTime> {
    with_phases(|p| {
        p.iter()
            .map(|t| PhaseTime {
                // An entry made after `now_ns` was read (another thread's) counts 0.
                total_ns: t.total_ns.saturating_add(
                    (u128::from(t.open) * u128::from(now_ns))
                        .saturating_sub(t.open_starts_ns)
                        .min(u128::from(u64::MAX)) as u64,
                ),
                open: 0,
                open_starts_ns: 0,
                ..t.clone()
            })
            .collect()
    })
}

/// Stops recording on every thread, process-wide (for one thread, see
/// [`untraced`](crate::untraced)), until the returned guard is dropped. Guards nest,
/// on one thread or several, dropped in any order: recording resumes when the last
/// one is dropped. Allocations and frees made meanwhile are not counted at all, so
/// live-byte figures are off by whatever a paused region leaves allocated or frees.
/// Resuming forgets every thread's latest block: a block allocated before the pause
/// is not a temporary when freed after it. Pausing drops the blocks followed for
/// lifetimes and sampled for the heap, whose frees would go unseen (those followed
/// for lifetimes counted in `dropped.followed_dropped` in the report).
#[must_use = "recording resumes when the guard is dropped"]
pub struct PauseGuard {
    _private: (),
}

/// Pause guards alive. Under its lock the pause bit is set by the first and cleared
/// by the last, so that two threads' guards cannot leave it wrong.
static PAUSES: Mutex<usize> = Mutex::new(0);

fn pauses() -> std::sync::MutexGuard<'static, usize> {
    PAUSES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The lock of the pause count, held across a `fork()` (see `fork`); taken before
/// the registry's, as `PauseGuard`'s drop does.
pub(crate) fn hold_pauses_for_fork() -> std::sync::MutexGuard<'static, usize> {
    pauses()
}

/// Pauses recording; see [`PauseGuard`].
pub fn pause() -> PauseGuard {
    guarded(|| {
        let mut n = pauses();
        if *n == 0 {
            let old = control::set_paused(true);
            crate::unseen_frees::control_changed(old);
        }
        *n += 1;
    });
    PauseGuard { _private: () }
}

impl Drop for PauseGuard {
    fn drop(&mut self) {
        guarded(|| {
            let mut n = pauses();
            *n = n.saturating_sub(1);
            if *n == 0 {
                // Allocations made while paused were not recorded as the latest.
                crate::registry::forget_latest_blocks();
                control::set_paused(false);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time_of(name: &str) -> (u64, u64) {
        let p = phases();
        let t = p.iter().find(|t| t.name == name).unwrap();
        (t.entries, t.total_ns)
    }

    #[test]
    fn an_open_phase_counts_its_time_so_far() {
        let pause = std::time::Duration::from_millis(20);
        let outer = phase("open-outer");
        std::thread::sleep(pause);
        {
            let _inner = phase("open-inner");
            std::thread::sleep(pause);
            let (entries, ns) = time_of("open-outer");
            assert_eq!(entries, 1);
            assert!(ns >= 2 * pause.as_nanos() as u64, "{ns} ns");
            assert!(time_of("open-inner").1 >= pause.as_nanos() as u64);
        }
        drop(outer);
        let (_, closed) = time_of("open-outer");
        std::thread::sleep(pause);
        assert_eq!(
            time_of("open-outer").1,
            closed,
            "a closed phase's time stays"
        );
        assert!(time_of("open-inner").1 < closed);
    }
}
