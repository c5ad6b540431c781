//! A rayon pool's program under the tracer: the tracer's own memory and report time
//! as threads are added (`scripts/bench_threads.py`). Parses generated log lines in
//! parallel, groups them by key with a parallel fold, and formats one line per key.
//! A pool's work stealing runs the same code at many recursion depths, so each
//! thread meets thousands of distinct stacks.
//!
//! `RAYON_NUM_THREADS=16 ALLOC_TRACE=sites cargo run --release -p alloc-tracer --example pool -- [REPORT_DIR] [RECORDS]`

use alloc_tracer::{Session, TracingAllocator};
use rayon::prelude::*;
use std::collections::HashMap;

#[global_allocator]
static GLOBAL: TracingAllocator<alloc_tracer::Jemalloc> =
    TracingAllocator::new(alloc_tracer::Jemalloc);

struct Record {
    key: String,
    tags: Vec<String>,
    amount: u64,
}

/// A xorshift step: the same lines on every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[inline(never)]
fn lines(n: usize) -> Vec<String> {
    let _phase = alloc_tracer::phase("generate");
    let mut s = 0x5eed_u64;
    (0..n)
        .map(|i| {
            let mut line = format!("{i} key{:04}", next(&mut s) % 4000);
            for _ in 0..1 + next(&mut s) % 5 {
                line += &format!(" tag{}={}", next(&mut s) % 300, next(&mut s) % 1000);
            }
            line
        })
        .collect()
}

#[inline(never)]
fn parse_line(line: &str) -> Record {
    let mut words = line.split(' ').skip(1);
    let key = words.next().unwrap_or_default().to_owned();
    let mut amount = 0;
    let tags = words
        .map(|w| {
            let (tag, value) = w.split_once('=').unwrap_or((w, "0"));
            amount += value.parse::<u64>().unwrap_or(0);
            tag.to_owned()
        })
        .collect();
    Record { key, tags, amount }
}

#[inline(never)]
fn parse(lines: &[String]) -> Vec<Record> {
    let _phase = alloc_tracer::phase("parse");
    lines.par_iter().map(|l| parse_line(l)).collect()
}

#[inline(never)]
fn group(records: &[Record]) -> HashMap<&str, (u64, Vec<&str>)> {
    let _phase = alloc_tracer::phase("group");
    records
        .par_iter()
        .fold(HashMap::new, |mut m: HashMap<&str, (u64, Vec<&str>)>, r| {
            let e = m.entry(r.key.as_str()).or_default();
            e.0 += r.amount;
            e.1.extend(r.tags.iter().map(String::as_str));
            m
        })
        .reduce(HashMap::new, |mut a, b| {
            for (k, (amount, tags)) in b {
                let e = a.entry(k).or_default();
                e.0 += amount;
                e.1.extend(tags);
            }
            a
        })
}

#[inline(never)]
fn summarize(groups: &HashMap<&str, (u64, Vec<&str>)>) -> Vec<String> {
    let _phase = alloc_tracer::phase("summarize");
    let mut keys: Vec<&&str> = groups.keys().collect();
    keys.sort();
    keys.par_iter()
        .map(|k| {
            let (amount, tags) = &groups[**k];
            let mut counts: HashMap<&str, u32> = HashMap::new();
            for t in tags {
                *counts.entry(t).or_default() += 1;
            }
            let mut top: Vec<(&str, u32)> = counts.into_iter().collect();
            top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            top.truncate(3);
            format!("{k}: {amount} over {} tags, most {top:?}", tags.len())
        })
        .collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "pool-report".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    alloc_tracer::label("records", n);
    let ran = std::time::Instant::now();
    let session = Session::new(&dir);
    let lines = lines(n);
    let records = parse(&lines);
    drop(lines);
    let groups = group(&records);
    let out = summarize(&groups);
    println!(
        "{} keys over {} records; {}",
        out.len(),
        records.len(),
        out.first().map_or("", String::as_str)
    );
    // The work's time in every mode (`off` writes no report to read it from).
    println!("ran in {:.3} s", ran.elapsed().as_secs_f64());
    let start = std::time::Instant::now();
    drop(session);
    if std::path::Path::new(&dir).join("manifest.json").exists() {
        println!("report written in {:.3} s", start.elapsed().as_secs_f64());
    }
}
