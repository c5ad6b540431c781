//! `synth-driver`: runs real bellperson circuit synthesis under alloc-tracer, the way
//! the Groth16 prover does it, and prints the tracer's summary.
//!
//! Commands: offline sealing (`seal`), Filecoin PoRep partitions (`porep`: from a C1
//! output, from synthetic vanilla proofs of any sector size, blank, or rows counted
//! only), and scalable chains of the gadgets PoRep is made of (`sha256`,
//! `poseidon`). Provers: stock bellperson (`reference`) or the driver's replica of
//! its `ProvingAssignment` with introspection (`mirror`). Patch variants
//! (`--variant`) keep the constraint system and change allocations; see
//! docs/synth-driver-variants.md.
//!
//! The binary reads its command line into a [`job::Job`] ([`cli`]), which checks
//! every flag combination before any work, then runs it under the tracer
//! ([`runner`]) and prints each iteration ([`output`]). `--allocator` chooses the
//! tracer's inner allocator at start ([`allocator`]). SIGINT, SIGTERM and SIGHUP end
//! a run with exit code 130, 143 and 129, after writing the report of the run so far,
//! marked incomplete, when there is one to write ([`signals`]).

mod allocator;
mod c1_shape;
mod circuits;
mod cli;
mod inplace;
mod job;
mod lc_pool;
mod mirror;
mod output;
mod porep;
mod progress;
mod prover;
mod runner;
mod signals;
mod turns;

use anyhow::{Context, Result};
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The dhat-heap build (a baseline for scripts/bench-peers.sh): dhat-rs records
    // from here and writes dhat-heap.json when this drops, after the run.
    #[cfg(feature = "dhat-heap")]
    let dhat = dhat::Profiler::new_heap();
    let code = match run() {
        Ok(code) => code,
        // Output piped into `head` and the like: the reader has all it wanted.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // A stop signal's report is being written: it ends the process.
            signals::wait_if_stopping();
            // Not `eprintln!`, which panics when standard error is gone.
            let _ = writeln!(std::io::stderr(), "synth-driver: {e:#}");
            ExitCode::from(2)
        }
    };
    #[cfg(feature = "dhat-heap")]
    {
        let start = std::time::Instant::now();
        drop(dhat);
        eprintln!(
            "dhat-rs: profile written in {:.3} s",
            start.elapsed().as_secs_f64()
        );
    }
    code
}

/// Parses the command line, checks it into a job, and runs it. Usage errors (clap's,
/// with their usage text, and the flag combinations the job refuses) exit with 2,
/// as do failures of the work itself; `--help` and `--version` exit with 0.
fn run() -> Result<ExitCode> {
    // A command refused before its work starts (or `--help`) writes no
    // `ALLOC_TRACE_REPORT` report at exit: one of a process that did nothing would
    // replace the report of an earlier run in that folder. The runner lets it go
    // once its input is read and checked (`runner::work_starts`).
    alloc_tracer::hold_exit_report(true);
    let cli = match cli::Cli::parse_args(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            e.print()?;
            return Ok(if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            });
        }
    };
    let job = cli.into_job()?;
    if let Some(path) = job.work.input_file() {
        // A path that leads nowhere, in the same words as reading it later, before
        // any note. Not opened: a FIFO's writer would take it for the reader.
        std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    }
    runner::check_report(&job)?;
    for note in &job.notes {
        writeln!(std::io::stderr(), "synth-driver: note: {note}")?;
    }
    allocator::confirm(job.allocator)?;
    alloc_tracer::set_allocator_name(allocator::name());
    runner::run(job)?;
    Ok(ExitCode::SUCCESS)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
