//! The `hearsay` binary: command-line parsing, logging setup and exit codes.
//!
//! Everything else lives in the libraries (`hearsay-runtime` and below); this file only
//! turns arguments into calls and results into output and an exit code:
//! 0 success, 1 the run failed, 2 bad input (scenario, flags, paths).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hearsay_runtime::{RunError, RunOptions, scenario, summary};

/// Multi-agent tick simulation: NPCs observe, remember, forget and gossip.
#[derive(Debug, Parser)]
#[command(name = "hearsay", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scenario headless and print who learned what, when, from whom.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override the scenario's number of ticks.
        #[arg(long)]
        ticks: Option<u64>,
        /// Run directory [default: runs/<name>-seed<seed>].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace the run directory if it holds an earlier run.
        #[arg(long)]
        force: bool,
        /// Never draw a progress bar (it is only drawn on a terminal anyway).
        #[arg(long)]
        no_progress: bool,
        /// PostgreSQL URL for scenarios with `store = "postgres"`.
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: Option<String>,
    },
    /// Check a scenario file without running it.
    Validate {
        /// The scenario file (TOML).
        scenario: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    // One line per problem, however narrow the terminal: `file:line:col: message` must
    // stay greppable.
    let _ = miette::set_hook(Box::new(|_| {
        Box::new(miette::MietteHandlerOpts::new().wrap_lines(false).build())
    }));
    match cli.command {
        Command::Run {
            scenario,
            seed,
            ticks,
            out,
            force,
            no_progress,
            database_url,
        } => {
            let opts = RunOptions {
                scenario,
                seed,
                ticks,
                out,
                force,
                progress: !no_progress && std::io::stderr().is_terminal(),
                database_url,
            };
            match hearsay_runtime::run(&opts) {
                Ok(outcome) => {
                    print!("{}", summary::render(&outcome.summary));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        Command::Validate { scenario } => match scenario::load(&scenario) {
            Ok((s, _)) => {
                println!(
                    "ok: {} is valid: {:?}, {} NPCs, {} places, {} events, {} facts, {} ticks",
                    scenario.display(),
                    s.name,
                    s.npcs.len(),
                    s.places.len(),
                    s.events.len(),
                    s.facts.len(),
                    s.ticks
                );
                ExitCode::SUCCESS
            }
            Err(e) => fail(RunError::from(e)),
        },
    }
}

fn fail(error: RunError) -> ExitCode {
    let code = if error.is_bad_input() { 2 } else { 1 };
    match error {
        // Each problem of a scenario gets its own report, pointing into the file.
        RunError::Scenario(scenario::ScenarioError::Invalid { path, problems }) => {
            let n = problems.len();
            for problem in problems {
                eprintln!("{:?}", miette::Report::new(problem));
            }
            let plural = if n == 1 { "" } else { "s" };
            eprintln!(
                "error: {path} is not a valid scenario ({n} problem{plural}); nothing was run"
            );
        }
        other => eprintln!("{:?}", miette::Report::new(other)),
    }
    ExitCode::from(code)
}

/// Logs go to stderr, filtered by `RUST_LOG` (default: hearsay's warnings and errors, and
/// only errors from sqlx, whose slow-query warnings are hearsay's business to report).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
