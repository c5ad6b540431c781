//! Size classes: the tracer's arithmetic against `nallocx`, and per-class counts
//! against jemalloc's own per-bin request counters over a window.

use alloc_tracer::{Mode, Settings, TracingAllocator, size_class_of};
use std::alloc::{GlobalAlloc, Layout};
use tikv_jemalloc_sys as sys;

#[global_allocator]
static GLOBAL: TracingAllocator<tikv_jemallocator::Jemalloc> =
    TracingAllocator::new(tikv_jemallocator::Jemalloc);

/// The flags tikv-jemallocator passes for a layout.
fn flags(size: usize, align: usize) -> i32 {
    if align <= 16 && align <= size {
        0
    } else {
        align.trailing_zeros() as i32
    }
}

fn read_u64(name: &[u8]) -> u64 {
    // SAFETY: `name` is a NUL-terminated mallctl name of a u64 statistic.
    unsafe { tikv_jemalloc_ctl::raw::read::<u64>(name) }.unwrap()
}

fn flush_and_refresh() {
    // SAFETY: "thread.tcache.flush" takes no arguments; it merges this thread's cache
    // statistics into the arena's.
    let rc = unsafe {
        sys::mallctl(
            c"thread.tcache.flush".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(rc, 0);
    tikv_jemalloc_ctl::epoch::advance().unwrap();
}

#[test]
fn classes_match_jemalloc() {
    // Part 1: the arithmetic, for every size up to 64 KiB and every alignment.
    for align in (0..=12).map(|k| 1usize << k) {
        for size in 1..=65536usize {
            // SAFETY: nallocx only computes; size is non-zero.
            let real = unsafe { sys::nallocx(size, flags(size, align)) };
            assert_eq!(
                size_class_of(size, align),
                real,
                "size {size} align {align}"
            );
        }
    }
    for size in [1usize << 20, (1 << 20) + 1, 3 << 22, 1 << 30] {
        // SAFETY: as above.
        let real = unsafe { sys::nallocx(size, 0) };
        assert_eq!(size_class_of(size, 8), real, "size {size}");
    }

    // Part 2: counts per bin over a window, in sites mode (whose table growth and
    // followed blocks make the tracer allocate too) and in count mode (whose small
    // requests are counted per requested size and classed when read).
    let nbins = {
        // SAFETY: NUL-terminated name of an unsigned statistic.
        unsafe { tikv_jemalloc_ctl::raw::read::<u32>(b"arenas.nbins\0") }.unwrap() as usize
    };
    // A fresh arena for this thread alone, so that no other thread's requests (the
    // test harness's, jemalloc's own) land in the counters we compare.
    // SAFETY: "arenas.create" returns an unsigned arena index; "thread.arena" takes
    // one.
    let arena = unsafe { tikv_jemalloc_ctl::raw::read::<u32>(b"arenas.create\0") }.unwrap();
    // SAFETY: as above.
    unsafe { tikv_jemalloc_ctl::raw::write::<u32>(b"thread.arena\0", arena) }.unwrap();
    let names: Vec<(usize, Vec<u8>)> = (0..nbins)
        .map(|j| {
            let size_name = format!("arenas.bin.{j}.size\0");
            // SAFETY: NUL-terminated name of a size_t statistic.
            let size =
                unsafe { tikv_jemalloc_ctl::raw::read::<usize>(size_name.as_bytes()) }.unwrap();
            (
                size,
                format!("stats.arenas.{arena}.bins.{j}.nrequests\0").into_bytes(),
            )
        })
        .collect();
    let layouts: Vec<Layout> = (1..=3000)
        .step_by(7)
        .chain([4096, 8192, 14336])
        .map(|s| Layout::from_size_align(s, 8).unwrap())
        .chain([
            Layout::from_size_align(100, 64).unwrap(),
            Layout::from_size_align(8, 4096).unwrap(),
        ])
        .collect();

    for (mode, lifetime_interval) in [(Mode::Sites, 3), (Mode::Count, 0)] {
        Settings {
            mode,
            depth: 16,
            lifetime_interval,
            // The tracer's counts are the whole process's, jemalloc's this thread's
            // arena's: the timeline sampler's own allocations (its points' growth,
            // on its own thread) would land in a window now and then (every run of
            // a debug build did: class 160, one block more than jemalloc saw).
            timeline_ms: 0,
            ..Default::default()
        }
        .apply();
        // Reading the statistics makes jemalloc itself request a few small blocks on
        // this thread (seen with the tracer off and no workload). A control window
        // measured the same way, without the workload, takes them out.
        // The first windows on a fresh arena also include its set-up; settle first.
        window(&names, || {});
        let control = window(&names, || {});
        let measured = window(&names, || {
            for round in 0..5 {
                for &l in &layouts {
                    // SAFETY: non-zero sizes; every block is freed with its own layout.
                    unsafe {
                        let p = GLOBAL.alloc(l);
                        assert!(!p.is_null());
                        if round % 2 == 0 {
                            let z = GLOBAL.alloc_zeroed(l);
                            GLOBAL.dealloc(z, l);
                        }
                        GLOBAL.dealloc(p, l);
                    }
                }
            }
        });
        let mut checked = 0;
        let mut mismatches = vec![];
        for (j, (size, _)) in names.iter().enumerate() {
            let k = (0..alloc_tracer::NUM_CLASSES)
                .find(|&k| alloc_tracer::class_bytes(k) == *size)
                .unwrap();
            let jemalloc = measured.jemalloc[j] - control.jemalloc[j];
            let ours = measured.tracer[k] - control.tracer[k];
            if jemalloc != ours {
                mismatches.push((j, *size, jemalloc, ours));
            }
            checked += ours;
        }
        assert!(
            mismatches.is_empty(),
            "{mode:?}: (bin, size, jemalloc, tracer): {mismatches:?}"
        );
        let program_allocs = 5 * layouts.len() + 3 * layouts.len();
        assert!(
            checked >= program_allocs as u64,
            "{checked} < {program_allocs}"
        );
        if mode == Mode::Sites {
            assert!(
                measured.own > 0,
                "the window should include tracer allocations"
            );
        }
    }
}

/// Per-bin request deltas (jemalloc) and per-class deltas (tracer: program plus its
/// own allocations) over one run of `work`.
struct Window {
    jemalloc: Vec<u64>,
    tracer: Vec<u64>,
    own: u64,
}

fn window(names: &[(usize, Vec<u8>)], work: impl FnOnce()) -> Window {
    let mut before = vec![0u64; names.len()];
    let mut after = vec![0u64; names.len()];
    flush_and_refresh();
    let c0 = alloc_tracer::counts();
    for (b, (_, name)) in before.iter_mut().zip(names) {
        *b = read_u64(name);
    }
    work();
    flush_and_refresh();
    for (a, (_, name)) in after.iter_mut().zip(names) {
        *a = read_u64(name);
    }
    let c1 = alloc_tracer::counts();
    let tracer = (0..alloc_tracer::NUM_CLASSES)
        .map(|k| {
            (0..c1.classes.len())
                .map(|p| c1.classes[p][k] - c0.classes[p][k])
                .sum::<u64>()
                + (c1.moved[k] - c0.moved[k])
                + (c1.own_classes[k] - c0.own_classes[k])
        })
        .collect();
    Window {
        jemalloc: after.iter().zip(&before).map(|(a, b)| a - b).collect(),
        tracer,
        own: c1.own_allocs - c0.own_allocs,
    }
}
