//! Starting to trace: the setup the program's first allocation makes (the fork
//! handlers, the settings from the environment, the exit report, the timeline), and
//! choosing settings in code, which makes that setup first if no allocation has yet.

use crate::config::{Mode, Settings};
use crate::hot::control::{self, MODE_UNINIT};
use crate::session;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Set by [`env_checked_by_program`].
static ENV_CHECKED_BY_PROGRAM: AtomicBool = AtomicBool::new(false);

/// Says that the program reads the tracer's environment variables itself and
/// names what is wrong with them (as a command line whose flags take `ALLOC_TRACE`
/// and the others for defaults does): an invalid setting is then ignored without
/// the tracer's own line on standard error, which would say tracing is off just
/// before the program turns it on; nor is a run that asked for no report told so
/// at exit (the program knows where its reports go). A valid setting still applies
/// from the first allocation, and unknown `ALLOC_TRACE_*` names and an empty
/// `ALLOC_TRACE_REPORT` are still named. It counts only when called before the
/// program's first allocation, e.g. from a constructor in `.init_array`; it does not
/// allocate.
pub fn env_checked_by_program() {
    ENV_CHECKED_BY_PROGRAM.store(true, Relaxed);
    // It knows where its reports go, too.
    session::answered_elsewhere();
}

/// What the first allocation of the process sets up (the door's
/// `first_allocation`), under the re-entrancy guard. Also run by
/// [`Settings::apply`] before any allocation.
pub(crate) fn first_allocation() {
    crate::fork::arm();
    settings_from_env();
}

/// The variables the tracer reads.
const KNOWN: [&[u8]; 6] = [
    b"ALLOC_TRACE",
    b"ALLOC_TRACE_DEPTH",
    b"ALLOC_TRACE_HEAP",
    b"ALLOC_TRACE_LIFETIMES",
    b"ALLOC_TRACE_REPORT",
    b"ALLOC_TRACE_TIMELINE_MS",
];

/// Names, on standard error, each `ALLOC_TRACE_*` variable the tracer does not read
/// (`ALLOC_TRACE_REPROT`): a misspelt setting would otherwise be ignored unseen.
/// Reads the C library's `environ` in place, without allocating.
fn name_unknown_variables() {
    unsafe extern "C" {
        // `mut`: `setenv` replaces it.
        static mut environ: *const *const libc::c_char;
    }
    // SAFETY: `environ` is the C library's array of NUL-terminated strings, ended by
    // a null pointer, read by value; nothing modifies it during the program's first
    // allocation.
    let mut at = unsafe { environ };
    if at.is_null() {
        return;
    }
    loop {
        // SAFETY: as above, `at` lies within the array, up to its null end.
        let entry = unsafe { *at };
        if entry.is_null() {
            return;
        }
        // SAFETY: as above, a NUL-terminated string.
        let bytes = unsafe { std::ffi::CStr::from_ptr(entry) }.to_bytes();
        let name = bytes.split(|&b| b == b'=').next().unwrap_or(bytes);
        if unknown(name) {
            let pieces: [&[u8]; 3] = [
                b"alloc-tracer: ignoring ",
                name,
                b", which the tracer does not read (it reads ALLOC_TRACE, ALLOC_TRACE_DEPTH, \
                  ALLOC_TRACE_HEAP, ALLOC_TRACE_LIFETIMES, ALLOC_TRACE_REPORT and \
                  ALLOC_TRACE_TIMELINE_MS)\n",
            ];
            say(&pieces);
        }
        // SAFETY: the entry was not the null end, so the next one is in the array.
        at = unsafe { at.add(1) };
    }
}

/// Writes `pieces` to standard error with `write(2)`, which neither allocates nor
/// locks: this runs inside the program's first allocation.
fn say(pieces: &[&[u8]]) {
    for piece in pieces {
        // SAFETY: writes a live buffer of its length to fd 2.
        unsafe { libc::write(2, piece.as_ptr().cast(), piece.len()) };
    }
}

/// True for a variable named like the tracer's (`ALLOC_TRACE_` and more) that is not
/// one of them.
fn unknown(name: &[u8]) -> bool {
    name.starts_with(b"ALLOC_TRACE_") && !KNOWN.contains(&name)
}

/// Decides the mode at the first allocation, from the environment, and arms the
/// exit report when `ALLOC_TRACE_REPORT` is set (whatever the mode: the program may
/// choose one in code). Cold, once, under the guard (arming the exit report reads the
/// working directory, which allocates); a bad
/// setting is named in one line on standard error (pieces written with `write(2)`,
/// which does not allocate or lock), unless the program names it itself
/// ([`env_checked_by_program`]), and tracing stays off.
fn settings_from_env() {
    let settings = Settings::from_env_unlocked();
    let (settings, bad) = match settings {
        Ok(s) => (s, None),
        Err(e) => (Settings::default(), Some(e)),
    };
    settings.publish_intervals();
    if control::init_mode(settings.mode.code(), settings.depth, settings.heap_on()) {
        let (name, value, expected): (&[u8], &[u8], &[u8]) = match &bad {
            None => (b"", b"", b""),
            Some(crate::Error::Setting {
                name,
                value,
                expected,
            }) => (name.as_bytes(), value.as_bytes(), expected.as_bytes()),
            // `from_env` makes no other error; should it, the line stays true.
            Some(_) => (b"ALLOC_TRACE*", b"...", b"see the crate documentation"),
        };
        if bad.is_some() && !ENV_CHECKED_BY_PROGRAM.load(Relaxed) {
            let pieces = [
                b"alloc-tracer: ignoring invalid ",
                name,
                b"=",
                value,
                b" (",
                expected,
                b"); tracing is off unless the program applies settings of its own\n",
            ];
            say(&pieces);
        }
        name_unknown_variables();
        session::arm_exit_report();
        if settings.mode != Mode::Off {
            crate::timeline::start();
            session::arm_no_report_note();
        }
    }
}

impl Settings {
    /// Makes these settings current. Every thread redraws its countdowns to its next
    /// sampled stack and next followed block under the new intervals within 1024 of
    /// its allocations (`hot::countdown`); a change of mode also forgets every
    /// thread's latest block (briefly taking the registry lock), since `count` mode
    /// does not keep it up to date. A switch to a mode that follows no block (`off`,
    /// or `count` without heap sampling) drops the blocks followed for lifetimes
    /// and sampled for the heap: their frees would go unseen (the report counts those
    /// followed for lifetimes in `dropped.followed_dropped`). A run may record
    /// stacks for one part and only count the rest: its report, in whichever mode it
    /// is written, keeps the sites, names the mode they were recorded in
    /// (`stacks_mode`) and counts what `count` mode counted in
    /// `allocs_without_stacks`. Calls from several threads at once take effect one
    /// after the other.
    ///
    /// Called before the program's first allocation, it first makes the setup that
    /// allocation would have made: the fork handlers, the environment's settings
    /// (which these then replace) and the `ALLOC_TRACE_REPORT` exit hook.
    ///
    /// # Panics
    /// On a `depth` of 0 or `Mode::Sample(0)`, which the environment's variables
    /// refuse too: a stack of no frames names no site, and sampling one allocation
    /// in 0 means nothing.
    pub fn apply(self) {
        assert!(
            self.depth >= 1,
            "alloc_tracer::Settings::apply: depth 0; a stack keeps 1 to {} frames",
            crate::MAX_DEPTH
        );
        assert!(
            self.mode != crate::Mode::Sample(0),
            "alloc_tracer::Settings::apply: Mode::Sample(0); sample one allocation in N, N >= 1"
        );
        if control::load().mode() == MODE_UNINIT {
            crate::hot::thread::guarded(first_allocation);
        }
        let _applying = crate::weights::applying();
        // What was in force, before the new intervals are published over it.
        let current = Settings::current();
        let calls = crate::hot::thread::guarded(crate::weights::calls);
        let heap = |s: &Settings| if s.heap_on() { s.heap_bytes() } else { 0 };
        crate::weights::switch(
            (current.mode, heap(&current), current.depth),
            (self.mode, heap(&self), self.depth),
            calls,
            crate::hot::live::live_bytes(),
        );
        self.publish_intervals();
        if Settings::current().mode != self.mode {
            crate::registry::forget_latest_blocks();
        }
        let old = control::set_mode(self.mode.code(), self.depth, self.heap_on());
        crate::unseen_frees::control_changed(old);
        // The calling thread takes up the new intervals at once (others within a
        // countdown chunk), so that what it does next is sampled as they say.
        if let Some(st) = crate::hot::thread::current().recording_state() {
            crate::hot::countdown::redraw(st);
        }
        if self.mode != Mode::Off {
            crate::timeline::start();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_misspelt_names_of_the_tracers_are_unknown() {
        for name in KNOWN {
            assert!(!unknown(name));
        }
        assert!(unknown(b"ALLOC_TRACE_REPROT"));
        assert!(unknown(b"ALLOC_TRACE_"));
        // Another tool's, or a test's, prefix.
        assert!(!unknown(b"ALLOC_TRACER_TEST_CHILD"));
        assert!(!unknown(b"ALLOC_TRACEX"));
    }

    #[test]
    #[should_panic(expected = "depth 0; a stack keeps 1 to 62 frames")]
    fn a_depth_of_0_is_refused() {
        Settings {
            depth: 0,
            ..Default::default()
        }
        .apply();
    }

    #[test]
    #[should_panic(expected = "Mode::Sample(0)")]
    fn sampling_one_in_0_is_refused() {
        Settings {
            mode: crate::Mode::Sample(0),
            ..Default::default()
        }
        .apply();
    }
}
