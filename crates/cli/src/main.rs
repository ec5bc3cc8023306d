//! `moirai`: the single command of the toolkit.
//!
//! Exit codes: 0 success; 1 the run failed (an operator panicked, the endpoint could not
//! listen); 2 bad command line or query (clap's own code for usage errors).

mod run;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "moirai", version, about = "Scheduling stream processing queries: engine, middleware, lab.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one workload on moirai's engine at one rate and report throughput and latency.
    Run {
        #[command(subcommand)]
        workload: run::Workload,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run { workload } => run::run(workload),
    };
    std::process::exit(code);
}
