//! Cold path: the process's resident memory, as the kernel counts it.
//!
//! Live bytes count what the program holds in blocks; resident memory counts what
//! the machine gives the process: the allocator's retained and fragmented pages, the
//! tracer's own tables, code and stacks, and not capacity reserved but never
//! touched. The timeline samples [`current_bytes`] beside live bytes, so a plot shows
//! where the two part; the manifest keeps [`peak_bytes`].

/// The process's resident set size now, 0 where unknown (no `/proc`): the second
/// field of `/proc/self/statm`, in pages. Allocation-free (a stack buffer and raw
/// `open`/`read`), so the timeline's sampler can call it at any moment.
pub(crate) fn current_bytes() -> u64 {
    let mut buf = [0u8; 128];
    // SAFETY: a NUL-terminated path; the descriptor is closed before returning;
    // `read` writes at most `buf.len()` bytes into `buf`.
    let n = unsafe {
        let fd = libc::open(
            c"/proc/self/statm".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 0;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    if n <= 0 {
        return 0;
    }
    resident_pages(&buf[..n as usize]).map_or(0, |pages| pages.saturating_mul(page_size()))
}

/// The resident page count of a `statm` line (`size resident shared ...`).
fn resident_pages(statm: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(statm).ok()?;
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u64 } else { 4096 }
}

/// The process's highest resident set size so far, 0 where unknown: `VmHWM` of
/// `/proc/self/status`, which counts this program alone. (`getrusage`'s `ru_maxrss`
/// keeps the high-water mark of the image `execve` replaced, so a program started by
/// a large process, cargo or a notebook, would report at least that one's.) Without
/// `/proc`, `ru_maxrss` it is, with that caveat.
pub(crate) fn peak_bytes() -> u64 {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let kib = status.lines().find_map(|l| {
            l.strip_prefix("VmHWM:")
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        });
        if let Some(kib) = kib {
            return kib.saturating_mul(1024);
        }
    }
    // SAFETY: `usage` is written by the call before it is read.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a local.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    // Linux counts it in KiB.
    (usage.ru_maxrss.max(0) as u64).saturating_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_pages_is_statm_s_second_field() {
        assert_eq!(resident_pages(b"81234 5678 910 11 0 1213 0\n"), Some(5678));
        assert_eq!(resident_pages(b"81234"), None);
        assert_eq!(resident_pages(b"1 x 2"), None);
    }

    #[test]
    fn current_rss_grows_with_touched_pages_and_stays_under_the_peak() {
        let before = current_bytes();
        assert!(before > 0, "this test runs where /proc exists");
        // 64 MiB touched page by page: resident, whatever the allocator retains.
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&mut v);
        let during = current_bytes();
        assert!(
            during >= before + (48 << 20),
            "resident {before} -> {during} after touching 64 MiB"
        );
        assert!(
            peak_bytes() >= during,
            "peak {} < now {during}",
            peak_bytes()
        );
        drop(v);
    }
}
