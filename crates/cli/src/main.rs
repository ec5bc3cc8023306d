//! `moirai`: the single command of the toolkit.
//!
//! Exit codes: 0 success; 1 the run failed (an operator panicked, the endpoint could not
//! listen); 2 bad command line or query (clap's own code for usage errors); 141 the reader of
//! its output went away (`moirai run … | head`), as for a shell tool ended by `SIGPIPE`.
#![forbid(unsafe_code)]
// The doc comments of the argument structs are clap's --help texts, written in its syntax
// (`dynamic[:N]`), not intra-doc links.
#![allow(rustdoc::broken_intra_doc_links)]

mod bench;
mod demo;
mod l_rating;
mod logging;
mod micro_batch;
mod run;
mod schedule;
mod sim;
mod workload;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "moirai", version, about = "Scheduling stream processing queries: engine, middleware, lab.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The Lachesis experiment in a few minutes: SYN, the OS scheduler alone vs queue-size
    /// scheduling by the middleware, side by side, with a table and report.html.
    Demo(demo::DemoArgs),
    /// Run one workload on moirai's engine at one rate and report throughput and latency.
    Run {
        #[command(subcommand)]
        workload: workload::Workloads,
    },
    /// The middleware: attach to running SPEs and steer the Linux scheduler by policy
    /// (per-thread nice, cgroup CPU shares); restores everything on exit.
    Schedule(schedule::ScheduleArgs),
    /// Sweep offered rates, run configurations side by side (A B A B ...), and write
    /// results.csv, results.json and report.html.
    Bench(bench::BenchArgs),
    /// Simulate a sweep deterministically: the same configurations as `moirai bench`, on a
    /// simulated machine of --cores cores (CFS model), written as results.csv, results.json and
    /// report.html.
    Sim(sim::SimArgs),
    /// Linear Road's L-rating: the most expressways whose every answer is within the benchmark's
    /// limits at the records' clock, per threading model (docs/linear-road.md).
    #[command(name = "l-rating")]
    LRating(l_rating::LRatingArgs),
    /// Draw micro-batch runs over time (commit latency, group size, coordination overhead) from
    /// their `moirai run … --threading micro-batch --json` output, as SVG files.
    #[command(name = "micro-batch-timeline")]
    MicroBatchTimeline(micro_batch::TimelineArgs),
    /// An executor process of a micro-batch run, started by its driver (`--threading micro-batch`).
    #[command(name = "micro-batch-executor", hide = true)]
    MicroBatchExecutor(micro_batch::ExecutorArgs),
}

/// The exit code when standard output or error was closed under the command: what a shell
/// reports for a tool that `SIGPIPE` ended (128 + 13).
const EXIT_OUTPUT_CLOSED: i32 = 141;

fn main() {
    logging::install();
    let cli = Cli::parse();
    quiet_when_output_closed();
    // `println!` panics when its reader has gone (Rust ignores `SIGPIPE`, so the write fails
    // with `EPIPE`): unwinding runs every guard on the way (the middleware restores what it
    // changed, engines stop their threads), then the command ends quietly.
    let code = match std::panic::catch_unwind(|| dispatch(cli)) {
        Ok(code) => code,
        Err(payload) if is_output_closed(payload_text(&*payload)) => EXIT_OUTPUT_CLOSED,
        Err(payload) => std::panic::resume_unwind(payload),
    };
    std::process::exit(code);
}

fn dispatch(cli: Cli) -> i32 {
    match cli.command {
        Command::Run { workload } => run::run(workload),
        Command::Demo(args) => demo::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Schedule(args) => schedule::run(args),
        Command::Sim(args) => sim::run(args),
        Command::LRating(args) => l_rating::run(args),
        Command::MicroBatchExecutor(args) => micro_batch::executor(args),
        Command::MicroBatchTimeline(args) => micro_batch::timeline(args),
    }
}

/// Leaves the panic report out when the panic is a write to a closed standard output or error
/// (there is nobody to read it); every other panic is reported as before.
fn quiet_when_output_closed() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_output_closed(payload_text(info.payload())) {
            report(info);
        }
    }));
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

/// `std`'s panic message for `print!`/`eprint!` into a pipe whose reader has gone.
fn is_output_closed(message: &str) -> bool {
    (message.starts_with("failed printing to stdout") || message.starts_with("failed printing to stderr"))
        && message.contains("Broken pipe")
}
