//! Reports in the formats other tools read: folded stacks (flamegraph.pl, inferno,
//! speedscope), flame graph SVGs (inferno), pprof's protobuf profile
//! (`go tool pprof`, pprof.me, Grafana Pyroscope), written by a small encoder of our
//! own (the profile.proto messages used: ValueType, Sample, Label, Mapping,
//! Location, Line, Function and the string table), gzip-compressed as pprof expects,
//! and the named-sites table (parquet): what the analyzer derives from each site's
//! frames (name, callers, category, stack key) as columns, so that readers in other
//! languages use these rules instead of porting them.

use crate::categories::{self, Category};
use crate::naming::{self, without_generics};
use crate::rank::frames_of;
use crate::report::{FrameRow, Report};
use alloc_tracer_format::site;
use polars::prelude::{Column, DataFrame, ParquetCompression, ParquetWriter};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

/// What a stack's weight is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// Allocations and reallocs.
    Count,
    /// Requested bytes.
    Bytes,
    /// Temporaries (blocks freed before their thread's next allocation).
    Temporaries,
}

impl Weight {
    fn of(self, row: &crate::report::SiteRow) -> u64 {
        match self {
            Weight::Count => row.calls(),
            Weight::Bytes => row.bytes_requested,
            Weight::Temporaries => row.temporary_count,
        }
    }

    /// What a unit of the weight is, for titles and tooltips.
    fn unit(self) -> &'static str {
        match self {
            Weight::Count => "allocations",
            Weight::Bytes => "bytes",
            Weight::Temporaries => "temporaries",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Weight::Count => "Allocations by count",
            Weight::Bytes => "Allocations by requested bytes",
            Weight::Temporaries => "Temporaries",
        }
    }
}

/// Which frames of a stack a folded line keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frames {
    /// Every frame the report has (what other tools expect of folded stacks).
    All,
    /// For people reading a flame graph: from the site's naming frame out (the
    /// allocator and standard-library frames inside it folded into it), and stacks
    /// that do not reach `main` or a thread's start under one root,
    /// [`CUT_SHORT`], instead of each rooted in whatever frame it was cut at.
    Readable,
}

/// The root of stacks cut short (at the depth limit, or by frames without frame
/// pointers) in [`Frames::Readable`] stacks.
pub const CUT_SHORT: &str = "[stack cut short]";

/// Folded stacks: one line per distinct stack, `outer;...;inner weight`, sorted.
/// Frame names are functions without generic arguments (so `f::<T>` is `f`; `;`
/// would split a frame, so it becomes `:`).
pub fn folded(report: &Report, by: Weight, phase: Option<&str>) -> Vec<String> {
    folded_frames(report, by, phase, Frames::All)
}

/// [`folded`], keeping `which` frames of each stack.
pub fn folded_frames(
    report: &Report,
    by: Weight,
    phase: Option<&str>,
    which: Frames,
) -> Vec<String> {
    let mut weights: BTreeMap<String, u64> = BTreeMap::new();
    let mut stacks: HashMap<u64, String> = HashMap::new();
    for row in report.rows(phase) {
        let w = by.of(row);
        if w == 0 {
            continue;
        }
        let stack = stacks
            .entry(row.site_id)
            .or_insert_with(|| folded_stack(frames_of(&report.frames, row.site_id), which));
        let sum = weights.entry(stack.clone()).or_default();
        *sum = sum.saturating_add(w);
    }
    weights
        .into_iter()
        .map(|(stack, w)| format!("{stack} {w}"))
        .collect()
}

/// One stack in the folded format, outermost frame first, without its weight,
/// keeping `which` of its frames.
pub fn folded_stack(frames: &[FrameRow], which: Frames) -> String {
    let mut frames = frames;
    let mut root = None;
    if which == Frames::Readable {
        frames = &frames[naming::naming_index(frames).unwrap_or(0)..];
        if frames
            .last()
            .is_some_and(|f| !site::is_stack_root(&without_generics(&f.function)))
        {
            root = Some(CUT_SHORT.to_owned());
        }
    }
    let names: Vec<String> = root
        .into_iter()
        .chain(frames.iter().rev().map(|f| {
            without_generics(&f.function)
                .trim_end_matches("::")
                .replace(';', ":")
        }))
        .collect();
    if names.is_empty() {
        "(no frames)".to_owned()
    } else {
        names.join(";")
    }
}

/// The report's name in titles: its folder's name.
pub fn report_name(report: &Report) -> String {
    report.dir.file_name().map_or_else(
        || report.dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// `, phase P` or `, all phases`, for titles.
pub fn phase_words(phase: Option<&str>) -> String {
    phase.map_or(", all phases".to_owned(), |p| format!(", phase {p}"))
}

/// A flame graph SVG (inferno) of the [`Frames::Readable`] folded stacks, titled with
/// the report and phase.
pub fn flamegraph(
    report: &Report,
    by: Weight,
    phase: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let lines = folded_frames(report, by, phase, Frames::Readable);
    if lines.is_empty() {
        return Err(nothing_to_draw());
    }
    let title = format!(
        "{}: {}{}",
        by.title(),
        report_name(report),
        phase_words(phase)
    );
    readable_flamegraph(&lines, title, by.unit(), out)
}

/// A flame graph SVG (inferno) of [`Frames::Readable`] folded lines, its subtitle
/// saying how they were folded.
pub fn readable_flamegraph(
    lines: &[String],
    title: String,
    unit: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title;
    opts.subtitle = Some(format!(
        "allocator frames folded into the first frame outside them; stacks that end \
         before main or a thread's start under {CUT_SHORT}"
    ));
    opts.count_name = unit.to_owned();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(io::Error::other)
}

fn nothing_to_draw() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "no allocations to draw (a phase without allocations, or a count-mode report without sites?)",
    )
}

/// A differential flame graph SVG (inferno's): the change's stacks, widths the
/// change's weights, each frame red where the change has more than the base and
/// blue where it has fewer (stacks only in the base have no width, so they do not
/// show). Stacks are matched by their functions, which do not depend on where a
/// crate's source came from.
pub fn flamegraph_diff(
    base: &Report,
    change: &Report,
    by: Weight,
    phase: Option<&str>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let text = |r: &Report| {
        let mut t = folded_frames(r, by, phase, Frames::Readable).join("\n");
        t.push('\n');
        t
    };
    let (a, b) = (text(base), text(change));
    if a.trim().is_empty() && b.trim().is_empty() {
        return Err(nothing_to_draw());
    }
    let mut merged = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        a.as_bytes(),
        b.as_bytes(),
        &mut merged,
    )?;
    let merged = String::from_utf8(merged).map_err(io::Error::other)?;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!(
        "{}: {} against {}{}",
        by.title(),
        report_name(change),
        report_name(base),
        phase_words(phase)
    );
    opts.subtitle = Some("widths: the change; red: more than the base, blue: fewer".to_owned());
    opts.count_name = by.unit().to_owned();
    inferno::flamegraph::from_lines(&mut opts, merged.lines(), out).map_err(io::Error::other)
}

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

/// The first sample type, and the default one.
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
    let mut function_list: Vec<(u64, u64, u64)> = Vec::new(); // id, name, file
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
                            let name = strings.id(&f.function);
                            let file = strings.id(&file);
                            function_list.push((fid, name, file));
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
    for u in in_use.iter().filter(|u| phase.is_none_or(|p| u.phase == p)) {
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
    for &(id, name, file) in &function_list {
        p.message(5, |m| {
            m.uint(1, id);
            m.uint(2, name);
            m.uint(3, name);
            m.uint(4, file);
        });
    }
    for s in &strings.table {
        p.bytes(6, s.as_bytes());
    }
    // default_sample_type: what a viewer shows first.
    let default_type = strings.id(ALLOC_OBJECTS);
    let start = report.manifest.start_unix_s;
    let duration = report.manifest.duration_s;
    p.uint(9, (start * 1e9) as u64);
    p.uint(10, (duration * 1e9) as u64);
    p.uint(14, default_type);
    p.0
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

/// One row of the named-sites table: a site's counts within one phase (summed over
/// size classes), with what the analyzer derives from its frames. The columns are
/// documented in docs/report-schema.md ("Derived: the named-sites table").
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NamedSite {
    /// `site_id` in the report.
    pub site_id: u64,
    /// Phase.
    pub phase: String,
    /// First frame outside the allocator and std (see `alloc_tracer_format::site`).
    pub name: String,
    /// Where that frame was reached from.
    pub callers: String,
    /// What tells the site apart from the table's other sites whose name and callers
    /// read the same (see `alloc_tracer_format::site::distinctions`); empty when none do.
    pub distinction: String,
    /// Category: the first rule that claims the site, or the unmatched.
    pub category: String,
    /// Position of that rule among the rules (the unmatched: the number of rules), so
    /// that readers can list categories in the analyzer's order.
    pub category_index: u32,
    /// What identifies the site across reports and builds.
    pub stack_key: String,
    /// Allocations.
    pub alloc_count: u64,
    /// Reallocs.
    pub realloc_count: u64,
    /// Requested bytes.
    pub bytes_requested: u64,
    /// Real block bytes.
    pub bytes_allocated: u64,
    /// Temporaries.
    pub temporary_count: u64,
}

/// The named-sites table, within `phase` if given: one row per (site, phase) with
/// rows in `sites.parquet`, by site id, then phase.
pub fn named_sites(report: &Report, rules: &[Category], phase: Option<&str>) -> Vec<NamedSite> {
    let mut counts: BTreeMap<(u64, &str), [u64; 5]> = BTreeMap::new();
    for row in report.rows(phase) {
        let c = counts.entry((row.site_id, &row.phase)).or_default();
        let add = [
            row.alloc_count,
            row.realloc_count,
            row.bytes_requested,
            row.bytes_allocated,
            row.temporary_count,
        ];
        for (sum, n) in c.iter_mut().zip(add) {
            *sum = sum.saturating_add(n);
        }
    }
    // Derived once per site, not per phase: naming walks every frame.
    let mut ids: Vec<u64> = counts.keys().map(|&(site, _)| site).collect();
    ids.dedup();
    let stacks: Vec<&[FrameRow]> = ids.iter().map(|&s| frames_of(&report.frames, s)).collect();
    let derived: HashMap<u64, (String, String, String, usize, String)> = ids
        .iter()
        .zip(&stacks)
        .zip(naming::distinctions(&stacks))
        .map(|((&site, frames), distinction)| {
            (
                site,
                (
                    naming::site_name(frames),
                    naming::callers(frames, naming::CALLERS),
                    distinction,
                    categories::classify(rules, frames),
                    naming::stack_key(frames),
                ),
            )
        })
        .collect();
    counts
        .into_iter()
        .map(|((site_id, phase), c)| {
            let (name, callers, distinction, category, stack_key) = derived
                .get(&site_id)
                .expect("every site of the table was derived");
            NamedSite {
                site_id,
                phase: phase.to_owned(),
                name: name.clone(),
                callers: callers.clone(),
                distinction: distinction.clone(),
                category: categories::category_name(rules, *category).to_owned(),
                category_index: *category as u32,
                stack_key: stack_key.clone(),
                alloc_count: c[0],
                realloc_count: c[1],
                bytes_requested: c[2],
                bytes_allocated: c[3],
                temporary_count: c[4],
            }
        })
        .collect()
}

/// The named-sites table as parquet (snappy, as the tracer writes its tables).
pub fn named_sites_parquet(rows: &[NamedSite], out: &mut dyn Write) -> io::Result<()> {
    let u64s = |name: &str, f: fn(&NamedSite) -> u64| {
        Column::new(name.into(), rows.iter().map(f).collect::<Vec<u64>>())
    };
    let strings = |name: &str, f: fn(&NamedSite) -> &str| {
        Column::new(name.into(), rows.iter().map(f).collect::<Vec<&str>>())
    };
    let columns = vec![
        u64s("site_id", |r| r.site_id),
        strings("phase", |r| &r.phase),
        strings("name", |r| &r.name),
        strings("callers", |r| &r.callers),
        strings("distinction", |r| &r.distinction),
        strings("category", |r| &r.category),
        Column::new(
            "category_index".into(),
            rows.iter().map(|r| r.category_index).collect::<Vec<u32>>(),
        ),
        strings("stack_key", |r| &r.stack_key),
        u64s("alloc_count", |r| r.alloc_count),
        u64s("realloc_count", |r| r.realloc_count),
        u64s("bytes_requested", |r| r.bytes_requested),
        u64s("bytes_allocated", |r| r.bytes_allocated),
        u64s("temporary_count", |r| r.temporary_count),
    ];
    let mut df = DataFrame::new(rows.len(), columns).map_err(io::Error::other)?;
    // Encoded whole before writing, so that a failed write (a closed pipe) reaches the
    // caller as the plain I/O error it is.
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf)
        .with_compression(ParquetCompression::Snappy)
        .finish(&mut df)
        .map_err(io::Error::other)?;
    out.write_all(&buf)
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
    fn strings_start_with_the_empty_string() {
        let mut s = Strings::default();
        assert_eq!(s.id("x"), 1);
        assert_eq!(s.id(""), 0);
        assert_eq!(s.id("x"), 1);
        assert_eq!(s.table, ["", "x"]);
    }
}
