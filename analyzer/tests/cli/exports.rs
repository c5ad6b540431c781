//! `export` and `flamegraph`: folded stacks, pprof profiles read back by an independent
//! decoder, the named-sites table.

use super::*;

#[test]
fn folded_stacks_and_flamegraph() {
    let r = fixture();
    let r = r.to_str().unwrap();
    snapshot(
        "folded-build.txt",
        &["export", r, "--format", "folded", "--phase", "build"],
    );
    let dir = Scratch::new("analyzer-flame");
    let svg = dir.join("f.svg");
    let out = analyzer(&[
        "flamegraph",
        r,
        "--by",
        "bytes",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml"),
        "{}",
        &text[..100.min(text.len())]
    );
    for f in ["<title>build (", "<title>combine (", "requested bytes"] {
        assert!(text.contains(f), "{f} missing from the SVG");
    }
}

/// profile.proto, the messages we write, for prost to decode.
mod pprof {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
    }
}

/// The gzipped pprof profile at `file`, decoded.
fn read_pprof(file: &Path) -> pprof::Profile {
    use prost::Message;
    use std::io::Read;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(file).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    pprof::Profile::decode(raw.as_slice()).unwrap()
}

#[test]
fn a_count_reports_pprof_profile_opens_on_its_live_bytes() {
    // The 32 GiB partition's count report: no sites, heap samples at the kept peak.
    let r = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks/data/porep-32g-count");
    let file = Scratch::new("analyzer-count").holding("profile.pb.gz");
    // The default sample type of the profile exported with `extra` arguments.
    let default_type = |extra: &[&str]| {
        let mut args = vec!["export", r.to_str().unwrap(), "--format", "pprof"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", file.to_str().unwrap()]);
        let out = analyzer(&args);
        assert!(out.status.success(), "{out:?}");
        let p = read_pprof(&file);
        p.string_table[p.default_sample_type as usize].clone()
    };
    assert_eq!(
        default_type(&[]),
        "inuse_space",
        "alloc_objects is all zeros in a count report"
    );
    // Its heap samples all lie in `synthesize`: a profile of `setup` holds no sample
    // at all, and opens on the usual first type, as the export of a phase does.
    assert_eq!(default_type(&["--phase", "setup"]), "alloc_objects");
    std::fs::remove_file(file).unwrap();
}

#[test]
fn a_sampled_reports_pprof_profile_gives_its_interval_as_the_period() {
    let sampled = copy_fixture("pprof-period");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:100".into();
        m["sample_interval"] = 100.into();
    });
    let file = sampled.join("p.pb.gz");
    let out = analyzer(&[
        "export",
        sampled.to_str().unwrap(),
        "--format",
        "pprof",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let p = read_pprof(&file);
    let period_type = p.period_type.expect("a period type");
    assert_eq!(p.string_table[period_type.r#type as usize], "alloc_objects");
    assert_eq!(p.period, 100);
}

#[test]
fn pprof_profile_decodes_and_matches_top() {
    // A report with heap sampling, for the in-use values.
    let r = memory_fixture();
    let r = r.to_str().unwrap();
    let dir = Scratch::new("analyzer-pprof");
    let file = dir.join("p.pb.gz");
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "pprof",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let p = read_pprof(&file);
    let s = |i: i64| p.string_table[i as usize].as_str();
    assert_eq!(s(0), "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("temporaries", "count"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes")
        ]
    );
    // What Go's pprof and Pyroscope show first.
    assert_eq!(s(p.default_sample_type), "alloc_objects");
    // Every allocation recorded: one allocation between two recorded ones.
    let period_type = p.period_type.as_ref().expect("a period type");
    assert_eq!(
        (s(period_type.r#type), s(period_type.unit), p.period),
        ("alloc_objects", "count", 1)
    );
    // Its comments say which figures are estimates: here heap sampling's.
    let comments: Vec<&str> = p.comment.iter().map(|&c| s(c)).collect();
    assert_eq!(comments.len(), 1, "{comments:?}");
    assert!(
        comments[0].starts_with("inuse_objects and inuse_space are heap sampling's estimates"),
        "{comments:?}"
    );
    // Every reference resolves.
    let locations: std::collections::HashMap<u64, &pprof::Location> =
        p.location.iter().map(|l| (l.id, l)).collect();
    let functions: std::collections::HashMap<u64, &pprof::Function> =
        p.function.iter().map(|f| (f.id, f)).collect();
    assert_eq!(p.mapping.len(), 1);
    assert!(p.mapping[0].has_functions);
    for sample in &p.sample {
        assert_eq!(sample.value.len(), 5);
        assert_eq!(s(sample.label[0].key), "phase");
        for id in &sample.location_id {
            let loc = locations[id];
            assert_eq!(loc.mapping_id, 1);
            assert!(!loc.line.is_empty());
            for line in &loc.line {
                assert!(functions.contains_key(&line.function_id));
            }
        }
    }
    // The total allocation count equals the sum over `top`'s sites.
    let total: i64 = p.sample.iter().map(|x| x.value[0]).sum();
    let top = analyzer(&["top", r, "--limit", "100000", "--format", "json"]);
    let top: serde_json::Value = serde_json::from_slice(&top.stdout).unwrap();
    let want: u64 = top
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["alloc_count"].as_u64().unwrap() + x["realloc_count"].as_u64().unwrap())
        .sum();
    assert_eq!(total as u64, want);
    // In-use bytes are the live bytes `peak` gives at the kept peak.
    let in_use: i64 = p.sample.iter().map(|x| x.value[4]).sum();
    let peak = analyzer(&["peak", r, "--format", "json"]);
    let peak: serde_json::Value = serde_json::from_slice(&peak.stdout).unwrap();
    assert!(in_use > 0);
    assert_eq!(in_use as u64, peak["estimated_bytes"].as_u64().unwrap());
    // The leaf function of the biggest sample's first location names a real function.
    let biggest = p.sample.iter().max_by_key(|x| x.value[0]).unwrap();
    let leaf = locations[&biggest.location_id[0]];
    assert!(!s(functions[&leaf.line[0].function_id].name).is_empty());
    // Names without generic arguments, with their file in its crate, system names as
    // symbolized: pprof takes a name equal to its system name
    // as still mangled and garbles Rust's with its C++ rules, and groups functions by
    // name, so that `new` of one file must not read as `new` of another.
    let mut generic = 0;
    let mut files_of_name: std::collections::HashMap<&str, std::collections::HashSet<&str>> =
        std::collections::HashMap::new();
    for f in &p.function {
        let (name, system, file) = (s(f.name), s(f.system_name), s(f.filename));
        let short = analyzer::naming::without_generics(system);
        let want = if file.is_empty() {
            short.clone()
        } else {
            format!(
                "{short} ({})",
                alloc_tracer_format::frames::crate_path(file)
            )
        };
        assert_eq!(name, want, "{system} in {file}");
        generic += usize::from(short != system);
        files_of_name.entry(name).or_default().insert(file);
    }
    assert!(generic > 0, "the fixture's stacks hold generic functions");
    let shared: Vec<_> = files_of_name.iter().filter(|(_, f)| f.len() > 1).collect();
    assert!(
        shared.is_empty(),
        "one name for functions of several files: {shared:?}"
    );
    let short_names: std::collections::HashSet<String> = p
        .function
        .iter()
        .map(|f| analyzer::naming::without_generics(s(f.system_name)))
        .collect();
    assert!(
        short_names.len() < files_of_name.len(),
        "the fixture has a short name in several files, which the file tells apart"
    );
}

/// The named-sites table's columns and types as docs/report-schema.md lists them, types
/// as Rust polars prints them.
fn documented_named_sites() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/report-schema.md");
    let text = std::fs::read_to_string(path).unwrap();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Derived: the named-sites table"))
        .expect("docs/report-schema.md documents the named-sites table");
    let columns: Vec<(String, String)> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            assert_eq!(cells[3], "no", "{l}");
            let dtype = match cells[2] {
                "UInt64" => "u64",
                "UInt32" => "u32",
                "String" => "str",
                other => panic!("{l}: type {other}"),
            };
            (cells[1].trim_matches('`').to_owned(), dtype.to_owned())
        })
        .collect();
    assert!(!columns.is_empty());
    columns
}

#[test]
fn named_sites_table_carries_the_names_categories_and_counts_of_the_other_commands() {
    use polars::prelude::*;
    let r = fixture();
    let r = r.to_str().unwrap();
    let dir = Scratch::new("analyzer-named");
    let file = dir.join("sites.parquet");
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "parquet",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let df = ParquetReader::new(std::fs::File::open(&file).unwrap())
        .finish()
        .unwrap();
    let schema: Vec<(String, String)> = df
        .schema()
        .iter()
        .map(|(name, dtype)| (name.to_string(), dtype.to_string()))
        .collect();
    assert_eq!(schema, documented_named_sites());
    let strs = |name: &str| -> Vec<String> {
        let c = df.column(name).unwrap().str().unwrap();
        c.iter().map(|v| v.unwrap().to_owned()).collect()
    };
    let u64s = |name: &str| -> Vec<u64> {
        let c = df.column(name).unwrap().u64().unwrap();
        c.iter().map(|v| v.unwrap()).collect()
    };
    let (ids, names, callers) = (u64s("site_id"), strs("name"), strs("callers"));
    let (categories, keys) = (strs("category"), strs("stack_key"));
    let counts: Vec<u64> = u64s("alloc_count")
        .iter()
        .zip(u64s("realloc_count"))
        .map(|(a, r)| a + r)
        .collect();
    // Per site: `top`'s name, callers and count (over all phases).
    let top = analyzer(&["top", r, "--limit", "100000", "--format", "json"]);
    let top: serde_json::Value = serde_json::from_slice(&top.stdout).unwrap();
    let top = top.as_array().unwrap();
    assert!(!top.is_empty());
    for site in top {
        let id = site["site_id"].as_u64().unwrap();
        let rows: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] == id).collect();
        assert!(!rows.is_empty(), "site {id}");
        for &i in &rows {
            assert_eq!(names[i], site["name"].as_str().unwrap(), "site {id}");
            assert_eq!(callers[i], site["callers"].as_str().unwrap(), "site {id}");
            assert!(keys[i].ends_with('\n'), "site {id}: {:?}", keys[i]);
        }
        let n: u64 = rows.iter().map(|&i| counts[i]).sum();
        let want = site["alloc_count"].as_u64().unwrap() + site["realloc_count"].as_u64().unwrap();
        assert_eq!(n, want, "site {id}");
    }
    // Per category: `categories`'s totals.
    let cats = analyzer(&["categories", r, "--format", "json"]);
    let cats: serde_json::Value = serde_json::from_slice(&cats.stdout).unwrap();
    for cat in cats.as_array().unwrap() {
        let name = cat["category"].as_str().unwrap();
        let n: u64 = (0..ids.len())
            .filter(|&i| categories[i] == name)
            .map(|i| counts[i])
            .sum();
        let want = cat["alloc_count"].as_u64().unwrap() + cat["realloc_count"].as_u64().unwrap();
        assert_eq!(n, want, "{name}");
    }
    // A phase keeps its rows only.
    let build = dir.join("build.parquet");
    let out = analyzer(&[
        "export",
        r,
        "--format",
        "parquet",
        "--phase",
        "build",
        "-o",
        build.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let build = ParquetReader::new(std::fs::File::open(&build).unwrap())
        .finish()
        .unwrap();
    let phases = build.column("phase").unwrap().str().unwrap();
    assert!(build.height() > 0);
    assert!(phases.iter().all(|p| p == Some("build")));
}

#[test]
fn flamegraph_of_temporaries_folds_allocator_frames() {
    let r = fixture();
    let dir = copy_fixture("flame-temps");
    let svg = dir.join("t.svg");
    let out = analyzer(&[
        "flamegraph",
        r.to_str().unwrap(),
        "--by",
        "temporaries",
        "--phase",
        "build",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("Temporaries: demo-report, phase build"));
    assert!(text.contains(" temporaries, "));
    // Allocator frames are folded into the first frame outside them (the demo's
    // `build`, which collects into vectors).
    assert!(text.contains("<title>build ("));
    assert!(!text.contains("<title>alloc_impl ("));
    // Folded stacks for other tools keep them.
    let folded = analyzer(&[
        "export",
        r.to_str().unwrap(),
        "--format",
        "folded",
        "--by",
        "temporaries",
    ]);
    assert!(
        String::from_utf8(folded.stdout)
            .unwrap()
            .contains(";alloc_impl;")
    );
}

#[test]
fn a_flame_graph_of_nothing_says_why_from_the_report() {
    // A count report: no sites, and (without heap sampling) no live bytes.
    let count = count_copy(&fixture(), "flame-count");
    let c = count.to_str().unwrap();
    let svg = Scratch::new("analyzer-flame").holding("graph.svg");
    let s = svg.to_str().unwrap();
    assert_one_line_error(
        &["flamegraph", c, "-o", s],
        "no allocations to draw: a count-mode report records no sites",
    );
    edit_manifest(&count, |m| m["heap_interval"] = 0.into());
    assert_one_line_error(
        &["flamegraph", c, "--by", "peak-bytes", "-o", s],
        "no live bytes to draw: heap sampling did not see that moment",
    );
    let _ = std::fs::remove_file(svg);
}

#[test]
fn an_output_never_replaces_a_report_file_nor_a_budget() {
    let dir = copy_fixture("outputs-over-reports");
    let d = dir.to_str().unwrap();
    let manifest = std::fs::read(dir.join("manifest.json")).unwrap();
    let sites = std::fs::read(dir.join("sites.parquet")).unwrap();
    // Each command refused before any work, the report as it was.
    for (args, file) in [
        (
            vec!["export", d, "--format", "parquet", "-o"],
            "sites.parquet",
        ),
        (
            vec!["export", d, "--format", "folded", "-o"],
            "phases.parquet",
        ),
        (
            vec!["export", d, "--format", "pprof", "-o"],
            "manifest.json",
        ),
        (vec!["budget", d, "-o"], "manifest.json"),
    ] {
        let out = dir.join(file);
        let mut args = args.clone();
        args.push(out.to_str().unwrap());
        assert_one_line_error(
            &args,
            &format!(
                "{}: a file of a report ({}), which this output would replace",
                out.display(),
                out.display()
            ),
        );
    }
    // Nor through a link to one: symbolic, or hard (written in place).
    let elsewhere = Scratch::new("analyzer-outputs-elsewhere");
    let soft = elsewhere.join("soft.folded");
    std::os::unix::fs::symlink(dir.join("sites.parquet"), &soft).unwrap();
    let hard = elsewhere.join("hard.folded");
    std::fs::hard_link(dir.join("sites.parquet"), &hard).unwrap();
    for out in [&soft, &hard] {
        assert_one_line_error(
            &[
                "export",
                d,
                "--format",
                "folded",
                "-o",
                out.to_str().unwrap(),
            ],
            "which this output would replace: write it elsewhere",
        );
    }
    assert_eq!(std::fs::read(dir.join("manifest.json")).unwrap(), manifest);
    assert_eq!(std::fs::read(dir.join("sites.parquet")).unwrap(), sites);
    std::fs::remove_file(&hard).unwrap();
    // Another name there is written (an export beside the tables). (`flamegraph` and
    // `timeline` write only names ending in .svg, which no report file has.)
    let folded = dir.join("allocs.folded");
    let out = analyzer(&[
        "export",
        d,
        "--format",
        "folded",
        "-o",
        folded.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    // A draft goes to a new file: an existing budget is left as it is.
    let budget = budget_file("kept", "# mine\n");
    assert_one_line_error(
        &["budget", d, "-o", budget.to_str().unwrap()],
        "exists, and a draft would replace it: `analyzer budget REPORT --tighten",
    );
    assert_eq!(std::fs::read_to_string(&*budget).unwrap(), "# mine\n");
    // Standard output by name is written through, as before.
    let out = analyzer(&["budget", d, "-o", "/dev/stdout"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("allocs"),
        "{out:?}"
    );
}

#[test]
fn nothing_to_draw_is_an_answer_drawn_and_said() {
    // The fixture's `main` phase made no temporaries: exit 0, a picture that says
    // so, and the line on standard error; the folded export empty, and said.
    let r = fixture();
    let d = r.to_str().unwrap();
    let svg = Scratch::new("analyzer-nothing-drawn").holding("t.svg");
    let out = analyzer(&[
        "flamegraph",
        d,
        "--phase",
        "main",
        "--by",
        "temporaries",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no temporaries to draw: the sites recorded hold none"),
        "{stderr}"
    );
    let picture = std::fs::read_to_string(&*svg).unwrap();
    assert!(
        picture.contains("no temporaries to draw: the sites recorded hold none")
            && picture.contains("phase main"),
        "{picture}"
    );
    let out = analyzer(&[
        "export",
        d,
        "--phase",
        "main",
        "--by",
        "temporaries",
        "--format",
        "folded",
    ]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no temporaries to export"),
        "{out:?}"
    );
    // A sampled report whose phase had nothing sampled says so, as `top` does.
    let sampled = count_copy(&fixture(), "nothing-sampled");
    edit_manifest(&sampled, |m| {
        m["mode"] = "sample:1000".into();
        m["sample_interval"] = 1000.into();
    });
    let out = analyzer(&[
        "flamegraph",
        sampled.to_str().unwrap(),
        "--phase",
        "build",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("no allocations to draw: no allocation of this phase was sampled"),
        "{out:?}"
    );
    // A count report cannot answer: exit 2; nor can one written in `off` mode after
    // counting (from before the tracer named the mode its stacks were recorded in).
    let off = count_copy(&fixture(), "nothing-off");
    edit_manifest(&off, |m| m["mode"] = "off".into());
    assert_one_line_error(
        &[
            "flamegraph",
            off.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ],
        "no allocations to draw: a count-mode report records no sites",
    );
    let counted = count_copy(&fixture(), "nothing-counted");
    assert_one_line_error(
        &[
            "flamegraph",
            counted.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ],
        "a count-mode report records no sites",
    );
}
