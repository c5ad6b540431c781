//! Rows of groups of sites (`GroupBy` other than `Site`): by rayon job, naming
//! function or line (a closure named by the function it is defined in), name and
//! callers, category, or crate.

use super::{
    CALLERS, GroupBy, RankBy, RankedSite, first, frames_of, ratio, site_ids, site_totals, top,
};
use crate::categories::{self, Category};
use crate::naming;
use crate::report::{FrameRow, Report};
use std::collections::HashMap;

/// The function frame `i` of `frames` stands for, without generic arguments, and
/// the line that tells it apart when its name cannot. A closure (`{closure#0}`, as
/// line tables name it) goes with the function it is defined in: the first frame
/// further out in its file that is not a closure (`parse_line::{closure#0}`); where
/// none is on the stack (a rayon job stolen by another thread), the one `parents`
/// found for the same closure frame on other stacks; else it goes by its line.
/// Closures of one index in different functions are different functions.
fn function_of(frames: &[FrameRow], i: usize, parents: &Parents) -> (String, Option<u32>) {
    let function = naming::without_generics(&frames[i].function);
    if !is_closure(&function) {
        return (function, None);
    }
    let parent =
        parent_on_stack(frames, i).or_else(|| parents.get(&closure_key(&frames[i])).cloned());
    match parent {
        Some(parent) => (format!("{parent}::{function}"), None),
        None => (function, frames[i].line),
    }
}

/// A closure frame's function, file and line, to find its parent from other stacks.
type ClosureKey = (String, Option<String>, Option<u32>);

/// The function each closure frame was found in on some stack (see `function_of`).
type Parents = HashMap<ClosureKey, String>;

fn closure_key(f: &FrameRow) -> ClosureKey {
    (f.function.clone(), f.file.clone(), f.line)
}

/// The first frame outward of closure frame `i` in its file that is not a closure.
fn parent_on_stack(frames: &[FrameRow], i: usize) -> Option<String> {
    let file = frames[i].file.as_deref();
    frames[i + 1..]
        .iter()
        .filter(|f| f.file.as_deref() == file)
        .map(|f| naming::without_generics(&f.function))
        .find(|f| !is_closure(f))
}

/// The parents of the naming frames that are closures, from the stacks that hold
/// them.
fn closure_parents(report: &Report, sites: &[RankedSite]) -> Parents {
    let mut parents = Parents::new();
    for s in sites {
        let frames = frames_of(&report.frames, s.site_id);
        if let Some(i) = naming::naming_index(frames)
            && is_closure(&naming::without_generics(&frames[i].function))
            && let Some(parent) = parent_on_stack(frames, i)
        {
            parents.entry(closure_key(&frames[i])).or_insert(parent);
        }
    }
    parents
}

/// True for a closure's name as line tables give it (`{closure#0}`), or a path
/// ending in one.
fn is_closure(function: &str) -> bool {
    function.ends_with('}')
        && function
            .rsplit("::")
            .next()
            .is_some_and(|last| last.starts_with("{closure#"))
}

/// The crate path of the naming frame's file (`crate-b/src/mod.rs`); empty without
/// one.
fn naming_crate_path(frames: &[FrameRow]) -> String {
    naming::naming_frame(frames)
        .and_then(|f| f.file.as_deref())
        .map(naming::crate_path)
        .unwrap_or_default()
}

/// Like [`top`], with each row a group of sites (`group`; [`GroupBy::Site`] is
/// [`top`]): counts and costs summed over the group's sites, named by the group (a
/// function as `function (file)`, a line as `function (file:line)`, a category by its
/// name; a job by its name and callers, told apart as sites are), `site_id` and the
/// main size class those of its site with most allocations.
/// `costs` must price every site for the groups' costs to be whole.
pub fn top_grouped(
    report: &Report,
    by: RankBy,
    limit: usize,
    phase: Option<&str>,
    costs: Option<&HashMap<u64, f64>>,
    group: GroupBy,
    rules: &[Category],
) -> Vec<RankedSite> {
    if group == GroupBy::Site {
        return top(report, by, limit, phase, costs);
    }
    // Each group: its row, its biggest site's calls, its name and callers.
    let mut groups: HashMap<String, (RankedSite, u64, (String, String))> = HashMap::new();
    let mut sites = site_totals(report, phase);
    sites.sort_by_key(|s| s.site_id);
    let total = sites
        .iter()
        .map(|s| s.alloc_count.saturating_add(s.realloc_count))
        .fold(0, u64::saturating_add);
    let parents = match group {
        GroupBy::Function => closure_parents(report, &sites),
        _ => Parents::new(),
    };
    for s in sites {
        let frames = frames_of(&report.frames, s.site_id);
        let (key, label) = match group {
            GroupBy::Callers => {
                let (name, callers) = (naming::site_name(frames), naming::callers(frames, CALLERS));
                // Keyed by the crate path too, as lines are.
                let file = naming_crate_path(frames);
                (format!("{name}@{file} < {callers}"), (name, callers))
            }
            GroupBy::Job => {
                let job = naming::job_frames(frames);
                (
                    naming::stack_key(&job),
                    (naming::site_name(&job), String::new()),
                )
            }
            GroupBy::Category => {
                let i = categories::classify(rules, frames);
                (
                    format!("{i:010}"),
                    (
                        categories::category_name(rules, i).to_owned(),
                        String::new(),
                    ),
                )
            }
            GroupBy::Crate => {
                let krate = naming_crate_path(frames)
                    .split('/')
                    .next()
                    .map(str::to_owned)
                    .filter(|k| !k.is_empty())
                    .unwrap_or_else(|| "(no source)".to_owned());
                (krate.clone(), (krate, String::new()))
            }
            GroupBy::Line => {
                // Keyed by the crate path too: one file name and line in two crates
                // are two lines.
                let name = naming::site_name(frames);
                let file = naming_crate_path(frames);
                (format!("{name}@{file}"), (name, String::new()))
            }
            GroupBy::Function | GroupBy::Site => match naming::naming_index(frames) {
                Some(i) => {
                    let f = &frames[i];
                    let (function, line) = function_of(frames, i, &parents);
                    let file = f.file.as_deref().map(naming::crate_path);
                    let at = line.map(|l| format!(":{l}")).unwrap_or_default();
                    let label = match &file {
                        Some(file) => format!(
                            "{function} ({}{at})",
                            alloc_tracer_format::frames::file_name(file)
                        ),
                        None => function.clone(),
                    };
                    (
                        format!("{function}@{}{at}", file.unwrap_or_default()),
                        (label, String::new()),
                    )
                }
                None => (String::new(), (naming::site_name(frames), String::new())),
            },
        };
        let calls = s.alloc_count.saturating_add(s.realloc_count);
        let cost = costs.and_then(|c| c.get(&s.site_id).copied());
        let entry = groups.entry(key.clone()).or_insert_with(|| {
            let mut g = s.clone();
            g.sites = 0;
            g.alloc_count = 0;
            g.realloc_count = 0;
            g.bytes_requested = 0;
            g.bytes_allocated = 0;
            g.temporary_count = 0;
            g.bytes_square_sum = 0.0;
            g.sampled = (0, 0);
            g.share = 0.0;
            g.cost_s = None;
            (g, 0, label)
        });
        let (g, biggest, _) = entry;
        if calls > *biggest {
            *biggest = calls;
            g.site_id = s.site_id;
            g.main_size_class_bytes = s.main_size_class_bytes;
            g.lifetime_ns_median = s.lifetime_ns_median;
        }
        g.sites += 1;
        g.alloc_count = g.alloc_count.saturating_add(s.alloc_count);
        g.realloc_count = g.realloc_count.saturating_add(s.realloc_count);
        g.bytes_requested = g.bytes_requested.saturating_add(s.bytes_requested);
        g.bytes_allocated = g.bytes_allocated.saturating_add(s.bytes_allocated);
        g.temporary_count = g.temporary_count.saturating_add(s.temporary_count);
        g.bytes_square_sum += s.bytes_square_sum;
        g.sampled.0 = g.sampled.0.saturating_add(s.sampled.0);
        g.sampled.1 = g.sampled.1.saturating_add(s.sampled.1);
        if let Some(c) = cost {
            *g.cost_s.get_or_insert(0.0) += c;
        }
    }
    let mut rows: Vec<RankedSite> = groups
        .into_values()
        .map(|(mut g, _, (name, callers))| {
            g.name = name;
            g.callers = callers;
            let calls = g.alloc_count.saturating_add(g.realloc_count);
            g.temporary_share = ratio(g.temporary_count, calls);
            // From the counts, not a sum of the sites' shares: a float sum of shares
            // comes to 1.0000000000000002.
            g.share = ratio(calls, total);
            g.alloc_count_noise = report.count_or_none_noise(g.sampled.0);
            g.bytes_requested_noise = report.bytes_noise(g.bytes_square_sum);
            g.temporary_count_noise = report.count_or_none_noise(g.sampled.1);
            g
        })
        .collect();
    if group == GroupBy::Job {
        let mut rows = first(rows, by, limit);
        // Told apart among every job, one stack a job key (its first site's), in key
        // order, as the export's jobs are.
        let job_of = |site: u64| naming::job_frames(frames_of(&report.frames, site));
        let mut first_of_job: std::collections::BTreeMap<String, u64> = Default::default();
        for id in site_ids(report, phase) {
            first_of_job
                .entry(naming::stack_key(&job_of(id)))
                .or_insert(id);
        }
        let jobs: Vec<_> = first_of_job.values().map(|&id| job_of(id)).collect();
        let all: Vec<&[FrameRow]> = jobs.iter().map(|j| &**j).collect();
        let position: HashMap<&str, usize> = first_of_job
            .keys()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i))
            .collect();
        let shown: Vec<usize> = rows
            .iter()
            .map(|r| position[naming::stack_key(&job_of(r.site_id)).as_str()])
            .collect();
        for ((r, &i), d) in rows
            .iter_mut()
            .zip(&shown)
            .zip(naming::distinctions_among(&all, &shown))
        {
            r.callers = naming::callers(all[i], CALLERS);
            r.distinction = d;
        }
        return rows;
    }
    // Two functions (or lines) of one name in files of one name, in different crates:
    // name them by their crate paths.
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for r in &rows {
        *seen.entry((r.name.clone(), r.callers.clone())).or_default() += 1;
    }
    if matches!(group, GroupBy::Function | GroupBy::Line | GroupBy::Callers) {
        for r in &mut rows {
            if seen[&(r.name.clone(), r.callers.clone())] > 1
                && let Some(f) = naming::naming_frame(frames_of(&report.frames, r.site_id))
            {
                r.distinction = f
                    .file
                    .as_deref()
                    .map(naming::crate_path)
                    .unwrap_or_default();
            }
        }
    }
    first(rows, by, limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank::split_by_pool;
    use crate::report::{FrameRow, SiteRow};

    /// A site of `n` allocations at `line` of `file`, in function `new`.
    fn site(site_id: u64, file: &str, n: u64) -> (SiteRow, FrameRow) {
        (
            SiteRow {
                site_id,
                phase: "p".into(),
                size_class_bytes: 160,
                alloc_count: n,
                realloc_count: 0,
                bytes_requested: 0,
                bytes_allocated: 0,
                temporary_count: 0,
                lifetime_ns_median: None,
                followed_freed_count: 0,
                followed_count: 0,
            },
            FrameRow {
                site_id,
                ..FrameRow::test("new", file, Some(42))
            },
        )
    }

    /// A report of one site per file: `(file, allocations)`, site ids in order.
    fn report_of_files(files: &[(&str, u64)]) -> Report {
        let (sites, frames) = files
            .iter()
            .enumerate()
            .map(|(id, &(file, n))| site(id as u64, file, n))
            .unzip();
        Report {
            sites,
            frames,
            ..Report::default()
        }
    }

    #[test]
    fn sites_are_grouped_by_the_crate_whose_code_names_them() {
        let report = report_of_files(&[
            ("/r/crate-a-1.0.0/src/mod.rs", 3),
            ("/r/crate-b-1.0.0/src/mod.rs", 5),
            ("/r/crate-b-1.0.0/src/lib.rs", 7),
        ]);
        let rows = top_grouped(&report, RankBy::Count, 10, None, None, GroupBy::Crate, &[]);
        let got: Vec<(&str, u64, usize)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.alloc_count, r.sites))
            .collect();
        assert_eq!(got, [("crate-b", 12, 2), ("crate-a", 3, 1)]);
    }

    #[test]
    fn sites_that_read_the_same_are_one_row_by_callers() {
        // Three sites of one gadget call path (insert_or_update < lc < addmany), two
        // of them apart only by where addmany was called from; a fourth by another
        // line of lc.
        let stack = |site_id: u64, lc_line: u32, compute_line: u32| -> Vec<FrameRow> {
            [
                (
                    "insert_or_update",
                    "/r/bellpepper-core-0.2.1/src/lc.rs",
                    108,
                ),
                (
                    "lc",
                    "/r/bellpepper-core-0.2.1/src/gadgets/boolean.rs",
                    lc_line,
                ),
                ("addmany", "/r/bellperson-0.27.0/src/gadgets/uint32.rs", 350),
                (
                    "compute",
                    "/r/bellperson-0.27.0/src/gadgets/sha256.rs",
                    compute_line,
                ),
            ]
            .into_iter()
            .enumerate()
            .map(|(i, (function, file, line))| FrameRow {
                site_id,
                frame_index: i as u32,
                stack_index: i as u32,
                ..FrameRow::test(function, file, Some(line))
            })
            .collect()
        };
        let mut report = report_of_files(&[
            ("/r/a.rs", 5),
            ("/r/a.rs", 7),
            ("/r/a.rs", 11),
            ("/r/a.rs", 2),
        ]);
        report.frames = [(0, 450, 144), (1, 450, 163), (2, 450, 181), (3, 451, 144)]
            .into_iter()
            .flat_map(|(id, lc, compute)| stack(id, lc, compute))
            .collect();
        let rows = top_grouped(
            &report,
            RankBy::Count,
            10,
            None,
            None,
            GroupBy::Callers,
            &[],
        );
        let got: Vec<(&str, &str, u64, usize)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.callers.as_str(), r.alloc_count, r.sites))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "insert_or_update (lc.rs:108)",
                    "lc (boolean.rs:450) < addmany (uint32.rs:350)",
                    23,
                    3
                ),
                (
                    "insert_or_update (lc.rs:108)",
                    "lc (boolean.rs:451) < addmany (uint32.rs:350)",
                    2,
                    1
                ),
            ]
        );
        assert!(rows.iter().all(|r| r.distinction.is_empty()));
    }

    #[test]
    fn one_line_in_two_crates_is_two_lines() {
        let report = report_of_files(&[
            ("/r/crate-a-1.0.0/src/mod.rs", 3),
            ("/r/crate-b-1.0.0/src/mod.rs", 5),
            ("/r/crate-b-1.0.0/src/mod.rs", 7),
        ]);
        for group in [GroupBy::Line, GroupBy::Function] {
            let rows = top_grouped(&report, RankBy::Count, 10, None, None, group, &[]);
            let got: Vec<(u64, &str)> = rows
                .iter()
                .map(|r| (r.alloc_count, r.distinction.as_str()))
                .collect();
            assert_eq!(
                got,
                [(12, "crate-b/src/mod.rs"), (3, "crate-a/src/mod.rs")],
                "{group:?}"
            );
        }
    }

    #[test]
    fn closures_of_one_index_in_different_functions_are_different_functions() {
        let main = "/a/src/main.rs";
        let join = "/r/rayon-core-1.12.1/src/join/mod.rs";
        let stacks: [&[(&str, &str, u32)]; 5] = [
            // `parse_line`'s closure, twice (two lines of it), and `summarize`'s.
            &[("{closure#0}", main, 55), ("parse_line", main, 57)],
            &[("{closure#0}", main, 56), ("parse_line", main, 57)],
            &[("{closure#0}", main, 100), ("summarize", main, 98)],
            // A job stolen by a worker: its function is not on the stack, nor on
            // any other.
            &[("{closure#0}", main, 64), ("{closure#0}", join, 412)],
            // `summarize`'s closure stolen: its function is found on the stack above.
            &[("{closure#0}", main, 100), ("{closure#0}", join, 412)],
        ];
        let mut frames = vec![];
        for (id, stack) in stacks.iter().enumerate() {
            for (i, &(function, file, line)) in stack.iter().enumerate() {
                frames.push(FrameRow {
                    site_id: id as u64,
                    frame_index: i as u32,
                    stack_index: i as u32,
                    ..FrameRow::test(function, file, Some(line))
                });
            }
        }
        let sites = [(0, 5), (1, 4), (2, 3), (3, 2), (4, 3)]
            .into_iter()
            .map(|(id, n)| site(id, main, n).0)
            .collect();
        let report = Report {
            sites,
            frames,
            ..Report::default()
        };
        let rows = top_grouped(
            &report,
            RankBy::Count,
            10,
            None,
            None,
            GroupBy::Function,
            &[],
        );
        let got: Vec<(&str, u64)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.alloc_count))
            .collect();
        assert_eq!(
            got,
            [
                ("parse_line::{closure#0} (main.rs)", 9),
                ("summarize::{closure#0} (main.rs)", 6),
                ("{closure#0} (main.rs:64)", 2),
            ]
        );
    }

    #[test]
    fn a_job_under_several_pool_paths_is_one_row() {
        // Sites 0 and 1: one job (`parse_line` from its closure) under two ways
        // through rayon, site 1 (the one with most allocations, which names the row)
        // reached from `run`; site 2: another closure's job, whose name reads the
        // same.
        let frame = |site_id, i: u32, function: &str, file: &str, line| FrameRow {
            site_id,
            frame_index: i,
            stack_index: i,
            ..FrameRow::test(function, file, Some(line))
        };
        let join = "/r/rayon-core-1.12.1/src/join/mod.rs";
        let stacks: [&[(&str, &str, u32)]; 3] = [
            &[
                ("parse_line", "/a/src/main.rs", 57),
                ("{closure#0}", "/a/src/main.rs", 64),
                ("{closure#0}", join, 412),
            ],
            &[
                ("parse_line", "/a/src/main.rs", 57),
                ("{closure#0}", "/a/src/main.rs", 64),
                ("{closure#1}", join, 421),
                ("{closure#0}", join, 412),
                // Outward of the pool: what the job frames leave out, callers too.
                ("run", "/a/src/lib.rs", 20),
            ],
            &[
                ("parse_line", "/a/src/main.rs", 57),
                ("{closure#0}", "/a/src/main.rs", 90),
                ("{closure#0}", join, 412),
            ],
        ];
        let mut frames = vec![];
        for (id, stack) in stacks.iter().enumerate() {
            for (i, &(function, file, line)) in stack.iter().enumerate() {
                frames.push(frame(id as u64, i as u32, function, file, line));
            }
        }
        let sites = [(0, 5), (1, 7), (2, 4)]
            .into_iter()
            .map(|(id, n)| site(id, "/a/src/main.rs", n).0)
            .collect();
        let report = Report {
            sites,
            frames,
            ..Report::default()
        };
        let rows = top_grouped(&report, RankBy::Count, 10, None, None, GroupBy::Job, &[]);
        let got: Vec<(u64, usize, &str, &str)> = rows
            .iter()
            .map(|r| (r.alloc_count, r.sites, r.callers.as_str(), r.name.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (12, 2, "{closure#0} (main.rs:64)", "parse_line (main.rs:57)"),
                (4, 1, "{closure#0} (main.rs:90)", "parse_line (main.rs:57)"),
            ]
        );
        // Per site, the two paths are two rows, which `top` says are one job's.
        let per_site = top(&report, RankBy::Count, 10, None, None);
        assert_eq!(per_site.len(), 3);
        assert_eq!(split_by_pool(&report, &per_site), 2);
        // Shown alone, neither is split.
        assert_eq!(split_by_pool(&report, &per_site[..1]), 0);
    }
}
