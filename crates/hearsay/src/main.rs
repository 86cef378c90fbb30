//! The `hearsay` binary: command-line parsing, logging setup and exit codes.
//!
//! Everything else lives in the libraries (`hearsay-runtime` and below); this file only
//! turns arguments into calls and results into output and an exit code:
//! 0 success, 1 the run failed (or a replay diverged), 2 bad input (scenario, flags,
//! paths, run directories).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use hearsay_runtime::{ForkOptions, ResumeOptions, RunError, RunOptions, scenario, summary};

/// Multi-agent tick simulation: NPCs observe, remember, forget and gossip.
#[derive(Debug, Parser)]
#[command(name = "hearsay", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Options every command that runs ticks shares.
#[derive(Debug, Args)]
struct Engine {
    /// Never draw a progress bar (it is only drawn on a terminal anyway).
    #[arg(long)]
    no_progress: bool,
    /// PostgreSQL URL for runs with `store = "postgres"`.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Async worker threads [default: one per core]; results never depend on it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
}

impl Engine {
    fn progress(&self) -> bool {
        !self.no_progress && std::io::stderr().is_terminal()
    }

    fn threads(&self) -> Option<usize> {
        self.threads.map(usize::from)
    }
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
        #[command(flatten)]
        engine: Engine,
    },
    /// Check a scenario file without running it.
    Validate {
        /// The scenario file (TOML).
        scenario: PathBuf,
    },
    /// Re-run a recorded run offline from its tape and compare every tick.
    Replay {
        /// The run directory.
        run_dir: PathBuf,
    },
    /// Continue a run that stopped early (crash, kill) from its last checkpoint.
    Resume {
        /// The run directory.
        run_dir: PathBuf,
        #[command(flatten)]
        engine: Engine,
    },
    /// Branch a new run off a recorded one: identical up to a tick, then free to differ.
    Fork {
        /// The run to branch from.
        run_dir: PathBuf,
        /// The first tick that may differ.
        #[arg(long)]
        at_tick: u64,
        /// The new run directory.
        #[arg(long)]
        out: PathBuf,
        /// Replace --out if it holds an earlier run.
        #[arg(long)]
        force: bool,
        /// The seed from --at-tick on.
        #[arg(long)]
        seed: Option<u64>,
        /// Change the scenario from --at-tick on: a dotted key and a TOML value, e.g.
        /// --set brains.gemini.model="gemini-2.5-pro" (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        engine: Engine,
    },
    /// Show one NPC's memories: kind, importance, recalls, retention, archived; with
    /// --query, how each scores and what recall would return.
    Inspect {
        /// The run directory.
        run_dir: PathBuf,
        /// The NPC, by name.
        #[arg(long)]
        npc: String,
        /// Score every memory against this text, as recall would.
        #[arg(long)]
        query: Option<String>,
        /// The state at the start of this tick [default: after the last tick].
        #[arg(long)]
        at_tick: Option<u64>,
        /// Show archived (forgotten) memories too.
        #[arg(long)]
        all: bool,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// PostgreSQL URL, for runs kept in PostgreSQL.
        #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
        database_url: Option<String>,
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
            engine,
        } => {
            let opts = RunOptions {
                scenario,
                seed,
                ticks,
                out,
                force,
                progress: engine.progress(),
                database_url: engine.database_url.clone(),
                threads: engine.threads(),
            };
            report(hearsay_runtime::run(&opts))
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
        Command::Replay { run_dir } => match hearsay_runtime::replay(&run_dir) {
            Ok(report) => match report.divergence {
                None => {
                    println!("identical: {} ticks", report.ticks);
                    ExitCode::SUCCESS
                }
                Some(d) => {
                    println!("diverged at tick {}: {}", d.tick, d.what);
                    for line in &d.expected {
                        println!("  - recorded: {line}");
                    }
                    for line in &d.replayed {
                        println!("  + replayed: {line}");
                    }
                    println!("({} ticks identical before it)", report.ticks);
                    ExitCode::from(1)
                }
            },
            Err(e) => fail(e),
        },
        Command::Resume { run_dir, engine } => {
            let opts = ResumeOptions {
                dir: run_dir,
                progress: engine.progress(),
                database_url: engine.database_url.clone(),
                threads: engine.threads(),
            };
            report(hearsay_runtime::resume(&opts))
        }
        Command::Fork {
            run_dir,
            at_tick,
            out,
            force,
            seed,
            sets,
            engine,
        } => {
            let opts = ForkOptions {
                dir: run_dir,
                at_tick,
                out,
                force,
                seed,
                sets,
                progress: engine.progress(),
                database_url: engine.database_url.clone(),
                threads: engine.threads(),
            };
            report(hearsay_runtime::fork(&opts))
        }
        Command::Inspect {
            run_dir,
            npc,
            query,
            at_tick,
            all,
            json,
            database_url,
        } => {
            let opts = hearsay_runtime::InspectOptions {
                dir: run_dir.clone(),
                npc,
                query,
                at_tick,
                all,
                database_url,
            };
            match hearsay_runtime::inspect(&opts) {
                Ok(r) if json => {
                    println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
                    ExitCode::SUCCESS
                }
                Ok(r) => {
                    print!("{}", hearsay_runtime::inspect::table(&r, &run_dir));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

fn report(result: Result<hearsay_runtime::RunOutcome, RunError>) -> ExitCode {
    match result {
        Ok(outcome) => {
            if outcome.started_at > 0 {
                println!("(continued from tick {})", outcome.started_at);
            }
            print!("{}", summary::render(&outcome.summary));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
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
