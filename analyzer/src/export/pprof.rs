//! pprof's protobuf profile (`go tool pprof`, pprof.me, Grafana Pyroscope), written
//! by a small encoder of our own (the profile.proto messages used: ValueType,
//! Sample, Label, Mapping, Location, Line, Function and the string table),
//! gzip-compressed as pprof expects.

use crate::rank::frames_of;
use crate::report::{FrameRow, Report};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

/// Protobuf wire encoding, just what profile.proto needs.
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    /// A varint field (uint64, int64 of a non-negative value, bool); zero is omitted.
    fn uint(&mut self, field: u32, v: u64) {
        if v != 0 {
            self.varint(u64::from(field) << 3);
            self.varint(v);
        }
    }
    /// A length-delimited field (bytes, string, message, packed repeated).
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.varint((u64::from(field) << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn message(&mut self, field: u32, build: impl FnOnce(&mut Pb)) {
        let mut m = Pb(Vec::new());
        build(&mut m);
        self.bytes(field, &m.0);
    }
    fn packed(&mut self, field: u32, vs: impl IntoIterator<Item = u64>) {
        let mut m = Pb(Vec::new());
        for v in vs {
            m.varint(v);
        }
        self.bytes(field, &m.0);
    }
}

/// Interns strings for the profile's string table (index 0 is "").
#[derive(Default)]
struct Strings {
    index: HashMap<String, u64>,
    table: Vec<String>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u64 {
        if self.table.is_empty() {
            self.table.push(String::new());
            self.index.insert(String::new(), 0);
        }
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as u64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// The first sample type, and the default one (but for reports without sites).
const ALLOC_OBJECTS: &str = "alloc_objects";

/// A pprof location: id, address, and (function id, line) per frame, innermost first.
type Location = (u64, u64, Vec<(u64, u64)>);

/// Live blocks and bytes of one site and phase at a moment (heap sampling's
/// estimates), for pprof's `inuse_objects` and `inuse_space`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InUse {
    /// The site.
    pub site_id: u64,
    /// Phase at allocation.
    pub phase: String,
    /// Estimated live blocks.
    pub objects: u64,
    /// Estimated live bytes.
    pub bytes: u64,
}

impl InUse {
    /// Whether the block was allocated in `phase` (any, when `None`).
    pub fn in_phase(&self, phase: Option<&str>) -> bool {
        phase.is_none_or(|p| self.phase == p)
    }
}

/// The pprof profile (uncompressed protobuf): one sample per (site, phase) with
/// values `alloc_objects` (allocations and reallocs), `alloc_space` (requested bytes),
/// `temporaries`, and `inuse_objects` and `inuse_space` from `in_use` (live at the
/// kept peak, estimated by heap sampling), the first the default, labelled with the
/// phase; one
/// location per return address, its inlined frames as lines, innermost first.
pub fn pprof_protobuf(report: &Report, phase: Option<&str>, in_use: &[InUse]) -> Vec<u8> {
    let mut strings = Strings::default();
    strings.id("");
    let mut functions: HashMap<(String, String), u64> = HashMap::new();
    // id, name (generic arguments removed), system name (as symbolized), file
    let mut function_list: Vec<(u64, u64, u64, u64)> = Vec::new();
    let mut locations: HashMap<u64, u64> = HashMap::new(); // address -> id
    let mut location_list: Vec<Location> = Vec::new();
    let mut site_locations: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut p = Pb(Vec::new());

    let mut location_ids = |site: u64, strings: &mut Strings| -> Vec<u64> {
        let frames = frames_of(&report.frames, site);
        let mut ids = Vec::new();
        let mut i = 0;
        while i < frames.len() {
            let stack_index = frames[i].stack_index;
            let group: Vec<&FrameRow> = frames[i..]
                .iter()
                .take_while(|f| f.stack_index == stack_index)
                .collect();
            i += group.len();
            let address = group[0].address;
            let next = location_list.len() as u64 + 1;
            let id = *locations.entry(address).or_insert(next);
            if id == next {
                let lines = group
                    .iter()
                    .map(|f| {
                        let file = f.file.clone().unwrap_or_default();
                        let key = (f.function.clone(), file.clone());
                        let next = function_list.len() as u64 + 1;
                        let fid = *functions.entry(key).or_insert(next);
                        if fid == next {
                            // Two names: pprof takes a function whose name equals
                            // its system name as not demangled yet, and its C++
                            // demangling heuristics garble Rust's `<T as Trait>::f`
                            // and `fn() -> T`, and merge every `with_capacity`.
                            let name = strings.id(&function_name(f));
                            let system_name = strings.id(&f.function);
                            let file = strings.id(&file);
                            function_list.push((fid, name, system_name, file));
                        }
                        (fid, u64::from(f.line.unwrap_or(0)))
                    })
                    .collect();
                location_list.push((id, address, lines));
            }
            ids.push(id);
        }
        ids
    };

    // The names Go's pprof and Pyroscope give allocation profiles' values.
    let types = [
        (ALLOC_OBJECTS, "count"),
        ("alloc_space", "bytes"),
        ("temporaries", "count"),
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
    ];
    for (t, unit) in types {
        let (t, unit) = (strings.id(t), strings.id(unit));
        p.message(1, |m| {
            m.uint(1, t);
            m.uint(2, unit);
        });
    }
    let mut samples: BTreeMap<(u64, &str), [u64; 5]> = BTreeMap::new();
    for row in report.rows(phase) {
        let v = samples.entry((row.site_id, &row.phase)).or_default();
        v[0] = v[0].saturating_add(row.calls());
        v[1] = v[1].saturating_add(row.bytes_requested);
        v[2] = v[2].saturating_add(row.temporary_count);
    }
    for u in in_use.iter().filter(|u| u.in_phase(phase)) {
        let v = samples.entry((u.site_id, &u.phase)).or_default();
        v[3] = v[3].saturating_add(u.objects);
        v[4] = v[4].saturating_add(u.bytes);
    }
    let phase_key = strings.id("phase");
    for ((site, ph), values) in samples {
        let locs = site_locations
            .entry(site)
            .or_insert_with(|| location_ids(site, &mut strings))
            .clone();
        let ph = strings.id(ph);
        p.message(2, |m| {
            m.packed(1, locs);
            m.packed(2, values);
            m.message(3, |l| {
                l.uint(1, phase_key);
                l.uint(2, ph);
            });
        });
    }
    // One mapping standing for the whole program: symbols are already resolved.
    let program = strings.id(report
        .manifest
        .command_line
        .first()
        .map_or("program", String::as_str));
    p.message(3, |m| {
        m.uint(1, 1);
        m.uint(3, u64::MAX);
        m.uint(5, program);
        for field in 7..=10 {
            m.uint(field, 1);
        }
    });
    for (id, address, lines) in &location_list {
        p.message(4, |m| {
            m.uint(1, *id);
            m.uint(2, 1);
            m.uint(3, *address);
            for &(fid, line) in lines {
                m.message(4, |l| {
                    l.uint(1, fid);
                    l.uint(2, line);
                });
            }
        });
    }
    for &(id, name, system_name, file) in &function_list {
        p.message(5, |m| {
            m.uint(1, id);
            m.uint(2, name);
            m.uint(3, system_name);
            m.uint(4, file);
        });
    }
    // period_type and period: allocations between two recorded ones (a `sample:N`
    // report's N; 1 where every allocation is). Viewers show it beside the profile's
    // type, and leave it blank when it is missing.
    let period_type = (strings.id(ALLOC_OBJECTS), strings.id("count"));
    let comments: Vec<u64> = estimates(report, in_use)
        .iter()
        .map(|c| strings.id(c))
        .collect();
    for s in &strings.table {
        p.bytes(6, s.as_bytes());
    }
    // default_sample_type: what a viewer shows first. A report with no site rows (a
    // `count` report with heap sampling) has only live bytes: shown first, rather
    // than a profile of zeros.
    let live = in_use.iter().any(|u| u.in_phase(phase));
    let default_type = if report.rows(phase).next().is_none() && live {
        strings.id("inuse_space")
    } else {
        strings.id(ALLOC_OBJECTS)
    };
    p.message(11, |m| {
        m.uint(1, period_type.0);
        m.uint(2, period_type.1);
    });
    p.uint(12, report.manifest.sample_interval.max(1));
    let start = report.manifest.start_unix_s;
    let duration = report.manifest.duration_s;
    p.uint(9, (start * 1e9) as u64);
    p.uint(10, (duration * 1e9) as u64);
    if !comments.is_empty() {
        p.packed(13, comments);
    }
    p.uint(14, default_type);
    p.0
}

/// Which of the profile's figures are estimates, in words, one line each: what
/// `pprof_protobuf` writes as the profile's comments (which `go tool pprof -comments`
/// prints), and the CLI says on standard error for a `sample:N` report, whose
/// allocation figures a user may otherwise take for exact counts.
pub fn estimates(report: &Report, in_use: &[InUse]) -> Vec<String> {
    let m = &report.manifest;
    let mut lines = Vec::new();
    if report.sampled() {
        let large = match m.sample_all_from_bytes {
            Some(b) => format!(
                "blocks of {} and more were each recorded and count once, and a site of \
                 few smaller ones may be missed or counted many times over",
                crate::units::bytes(b as f64)
            ),
            None => "a site with few large allocations may be missed or counted many times \
                     over"
                .to_owned(),
        };
        lines.push(format!(
            "{}: alloc_objects, alloc_space and temporaries are estimates: each sampled \
             allocation counts {}, {large}",
            report.stacks_mode(),
            report.sample_weight_words()
        ));
    }
    let without = report.allocs_without_stacks();
    if without > 0 {
        lines.push(crate::report::without_stacks_words(
            without,
            report.calls(None),
        ));
    }
    if !in_use.is_empty()
        && let Some(every) = heap_sampled(report)
    {
        lines.push(format!(
            "inuse_objects and inuse_space are heap sampling's estimates at the kept peak \
             ({every}){}",
            crate::report::heap_late_words(report.manifest.heap_sampling_started_late)
        ));
    }
    lines
}

/// How heap sampling's live-byte estimates were sampled (`sampled every 1.0 MiB on
/// average`), or `None` where they are exact (an interval of 1). A report whose heap
/// sampling stopped before it was written (interval 0) still holds the estimates of
/// the moments it kept.
pub fn heap_sampled(report: &Report) -> Option<String> {
    match report.manifest.heap_interval {
        1 => None,
        0 => Some("heap sampling stopped before the report was written".to_owned()),
        n => Some(format!("sampled {}", crate::units::heap_every(n))),
    }
}

/// A function's name in the profile: without generic arguments, and with its file
/// in its crate (`enforce (bellpepper-core/src/gadgets/multieq.rs)`) where the report
/// has one. pprof groups samples by function name, and line tables name a function
/// without its module: `alloc` is the allocator's and gadgets' in nine files, `new`
/// in many crates' `lib.rs`.
fn function_name(f: &FrameRow) -> String {
    let name = crate::naming::without_generics(&f.function);
    let name = name.trim_end_matches("::");
    match &f.file {
        Some(file) => format!("{name} ({})", alloc_tracer_format::frames::crate_path(file)),
        None => name.to_owned(),
    }
}

/// The pprof profile, gzip-compressed (what `go tool pprof` and others read).
pub fn pprof(
    report: &Report,
    phase: Option<&str>,
    in_use: &[InUse],
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&pprof_protobuf(report, phase, in_use))?;
    gz.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_wire_format() {
        let mut p = Pb(Vec::new());
        p.uint(1, 150);
        assert_eq!(p.0, [0x08, 0x96, 0x01]);
        let mut p = Pb(Vec::new());
        p.uint(2, 0);
        assert!(p.0.is_empty(), "zero values are omitted");
        p.bytes(6, b"ab");
        assert_eq!(p.0, [0x32, 2, b'a', b'b']);
        let mut p = Pb(Vec::new());
        p.packed(1, [1, 300]);
        assert_eq!(p.0, [0x0a, 3, 1, 0xac, 0x02]);
    }

    #[test]
    fn estimates_are_said_in_the_profiles_comments() {
        let mut r = Report::default();
        r.manifest.mode = "sites".into();
        r.manifest.heap_interval = 1;
        let live = [InUse {
            site_id: 1,
            phase: "p".into(),
            objects: 1,
            bytes: 64,
        }];
        // Exact in every figure: no comment at all.
        assert!(estimates(&r, &live).is_empty());
        r.manifest.mode = "sample:1000".into();
        r.manifest.sample_interval = 1000;
        r.manifest.heap_interval = 1 << 20;
        let lines = estimates(&r, &live);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("sample:1000: alloc_objects, alloc_space and temporaries are estimates: each sampled allocation counts 1000 times"), "{lines:?}");
        assert!(
            lines[1].ends_with("at the kept peak (sampled every 1.0 MiB on average)"),
            "{lines:?}"
        );
        // Nothing live sampled: no in-use figures to call estimates.
        assert_eq!(estimates(&r, &[]).len(), 1);
        // Heap sampling stopped before the report: its kept estimates still are.
        r.manifest.heap_interval = 0;
        let stopped = estimates(&r, &live);
        assert!(
            stopped[1].contains("(heap sampling stopped before"),
            "{stopped:?}"
        );
        // Switched to `count` after sampling, with heap sampling turned on late: the
        // estimates are still `sample:1000`'s, and what they leave out is said.
        let mut switched = Report {
            manifest: r.manifest.clone(),
            ..Default::default()
        };
        switched.manifest.mode = "count".into();
        switched.manifest.stacks_mode = Some("sample:1000".into());
        switched.manifest.allocs_without_stacks = Some(25);
        switched.manifest.heap_interval = 1 << 20;
        switched.manifest.heap_sampling_started_late = true;
        switched.phases = vec![crate::report::PhaseRow {
            alloc_count: 100,
            ..Default::default()
        }];
        let lines = estimates(&switched, &live);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("sample:1000: "), "{lines:?}");
        assert!(
            lines[1].starts_with(
                "25 allocations and reallocs (25.0 % of the run's) were counted in count mode"
            ),
            "{lines:?}"
        );
        assert!(
            lines[2].ends_with(
                "; it came on part-way through the run, and blocks allocated before are left out"
            ),
            "{lines:?}"
        );
        // Written in the string table, for the profile's comments (field 13; the CLI
        // test decodes them).
        r.manifest.heap_interval = 1 << 20;
        let lines = estimates(&r, &live);
        let raw = pprof_protobuf(&r, None, &live);
        for line in &lines {
            assert!(
                raw.windows(line.len()).any(|w| w == line.as_bytes()),
                "{line} not in the string table"
            );
        }
    }

    #[test]
    fn strings_start_with_the_empty_string() {
        let mut s = Strings::default();
        assert_eq!(s.id("x"), 1);
        assert_eq!(s.id(""), 0);
        assert_eq!(s.id("x"), 1);
        assert_eq!(s.table, ["", "x"]);
    }
}
