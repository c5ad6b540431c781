//! A model-based test of the tracer: random sequences of alloc, alloc_zeroed,
//! realloc (grow, shrink, same size), free, thread spawn and exit, phase and mode
//! switches, run against the real allocator and against a reference model that
//! counts what each operation should add. Every phase's allocations, frees, reallocs,
//! requested bytes and size-class bytes must equal the model's exactly. One test:
//! the mode is process-wide.

use alloc_tracer::{Mode, PhaseTotals, Settings, TracingAllocator, size_class_of, untraced};
use std::alloc::Layout;
use std::collections::HashMap;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

const SEQUENCES: u64 = 200;
const OPS: usize = 400;
const PHASES: [&str; 3] = ["model-a", "model-b", "model-c"];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn layout(&mut self) -> Layout {
        let size = match self.below(10) {
            0..=5 => 1 + self.below(1024),
            6..=7 => 1025 + self.below(20_000),
            8 => 8 + self.below(64),
            _ => 100_000 + self.below(300_000),
        } as usize;
        let align = [1, 8, 8, 8, 16, 32, 64, 4096][self.below(8) as usize];
        Layout::from_size_align(size, align).unwrap()
    }
}

/// What the tracer should have counted, per phase name.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
struct Expected {
    allocs: u64,
    frees: u64,
    reallocs: u64,
    bytes_requested: u64,
    bytes_allocated: u64,
    bytes_freed: u64,
}

impl Expected {
    fn of(t: &PhaseTotals) -> Expected {
        Expected {
            allocs: t.allocs,
            frees: t.frees,
            reallocs: t.reallocs,
            bytes_requested: t.bytes_requested,
            bytes_allocated: t.bytes_allocated,
            bytes_freed: t.bytes_freed,
        }
    }
    fn add(&mut self, o: &Expected) {
        self.allocs += o.allocs;
        self.frees += o.frees;
        self.reallocs += o.reallocs;
        self.bytes_requested += o.bytes_requested;
        self.bytes_allocated += o.bytes_allocated;
        self.bytes_freed += o.bytes_freed;
    }
}

type Model = HashMap<&'static str, Expected>;

/// Runs `ops` random operations on this thread (and threads it spawns), freeing
/// every block it allocated before returning; returns what they should count.
/// The bookkeeping is the tracer's own (`untraced`), so only the operations count.
fn run(rng: &mut Rng, ops: usize, depth: u32) -> Model {
    let mut model: Model = untraced(HashMap::new);
    let mut live: Vec<(*mut u8, Layout)> = untraced(|| Vec::with_capacity(ops + 1));
    let mut phase = untraced(|| alloc_tracer::phase_id(PHASES[0]));
    let mut name = PHASES[0];
    let mut guard = phase.enter();
    for _ in 0..ops {
        // The counts of the phase in force when the operation starts.
        let at = name;
        let mut e = untraced(|| *model.entry(at).or_default());
        match rng.below(100) {
            0..=34 => {
                let layout = rng.layout();
                let zeroed = rng.below(2) == 0;
                // SAFETY: non-zero size; freed below with the same layout.
                let p = unsafe {
                    if zeroed {
                        std::alloc::alloc_zeroed(layout)
                    } else {
                        std::alloc::alloc(layout)
                    }
                };
                assert!(!p.is_null());
                e.allocs += 1;
                e.bytes_requested += layout.size() as u64;
                e.bytes_allocated += size_class_of(layout.size(), layout.align()) as u64;
                live.push((p, layout));
            }
            35..=64 if !live.is_empty() => {
                let i = rng.below(live.len() as u64) as usize;
                let (p, layout) = live.swap_remove(i);
                // SAFETY: allocated above with this layout, freed once.
                unsafe { std::alloc::dealloc(p, layout) };
                e.frees += 1;
                e.bytes_freed += size_class_of(layout.size(), layout.align()) as u64;
            }
            65..=84 if !live.is_empty() => {
                let i = rng.below(live.len() as u64) as usize;
                let (p, layout) = live[i];
                let new_size = match rng.below(3) {
                    0 => layout.size() * 2 + rng.below(100) as usize,
                    1 => (layout.size() / 2).max(1),
                    _ => layout.size(),
                };
                // SAFETY: `p` is live with `layout`; the new size is non-zero and
                // does not overflow when rounded to the alignment.
                let q = unsafe { std::alloc::realloc(p, layout, new_size) };
                assert!(!q.is_null());
                e.reallocs += 1;
                e.bytes_requested += new_size as u64;
                e.bytes_allocated += size_class_of(new_size, layout.align()) as u64;
                e.bytes_freed += size_class_of(layout.size(), layout.align()) as u64;
                live[i] = (
                    q,
                    Layout::from_size_align(new_size, layout.align()).unwrap(),
                );
            }
            85..=90 => {
                drop(guard);
                name = PHASES[rng.below(PHASES.len() as u64) as usize];
                phase = untraced(|| alloc_tracer::phase_id(name));
                guard = phase.enter();
            }
            91..=94 => {
                let mode = [Mode::Count, Mode::Sites, Mode::Sample(3)][rng.below(3) as usize];
                Settings {
                    mode,
                    lifetime_interval: rng.below(3),
                    ..Default::default()
                }
                .apply();
            }
            _ if depth < 2 => {
                // A thread that runs operations of its own and exits. Spawning and
                // joining are the harness's. Phases are process-wide: this thread
                // leaves its phase while the child runs (and allocates nothing
                // meanwhile), as a program that enters phases from one driving
                // thread does.
                let mut child_rng = Rng(rng.next() | 1);
                let n = (ops / 4).max(1);
                drop(guard);
                let handle =
                    untraced(|| std::thread::spawn(move || run(&mut child_rng, n, depth + 1)));
                let child = untraced(|| handle.join().unwrap());
                // The child's map was allocated as the tracer's own: freed so too.
                untraced(|| {
                    for (k, v) in &child {
                        model.entry(k).or_default().add(v);
                    }
                    drop(child);
                });
                guard = phase.enter();
                continue;
            }
            _ => {}
        }
        untraced(|| model.insert(at, e));
    }
    for (p, layout) in live.drain(..) {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { std::alloc::dealloc(p, layout) };
        let e = untraced(|| model.entry(name).or_default());
        e.frees += 1;
        e.bytes_freed += size_class_of(layout.size(), layout.align()) as u64;
    }
    drop(guard);
    untraced(|| drop(live));
    model
}

/// Every phase's totals by name, as the tracer counts them.
fn counted() -> HashMap<String, Expected> {
    untraced(|| {
        let c = alloc_tracer::counts();
        alloc_tracer::phases()
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.clone(), Expected::of(&c.phases[i])))
            .collect()
    })
}

/// Set in the child process that runs the model.
const CHILD: &str = "ALLOC_TRACER_MODEL_CHILD";

/// The model runs in a child process of this test binary with one test thread. The
/// test harness, running tests on threads of their own, prints a line when a test
/// has run for 60 seconds (this one takes about that long unoptimised), and that
/// allocation counts in whatever phase is in force: phases are process-wide. With
/// one test thread the harness waits without a timeout and allocates nothing.
#[test]
fn counts_equal_the_model() {
    if std::env::var_os(CHILD).is_some() {
        return run_model();
    }
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "counts_equal_the_model",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .status()
        .unwrap();
    assert!(status.success(), "the model's process: {status}");
}

fn run_model() {
    Settings {
        mode: Mode::Count,
        ..Default::default()
    }
    .apply();
    for seed in 1..=SEQUENCES {
        let before = counted();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        // The model's phases are entered on threads that run nothing else of the
        // program's; the main phase is the test harness's.
        let model = run(&mut rng, OPS, 0);
        let after = counted();
        for name in PHASES {
            let b = before.get(name).copied().unwrap_or_default();
            let a = after.get(name).copied().unwrap_or_default();
            let got = Expected {
                allocs: a.allocs - b.allocs,
                frees: a.frees - b.frees,
                reallocs: a.reallocs - b.reallocs,
                bytes_requested: a.bytes_requested - b.bytes_requested,
                bytes_allocated: a.bytes_allocated - b.bytes_allocated,
                bytes_freed: a.bytes_freed - b.bytes_freed,
            };
            let want = model.get(name).copied().unwrap_or_default();
            assert_eq!(got, want, "seed {seed}, phase {name}");
        }
        untraced(|| drop(model));
    }
    Settings::default().apply();
}
