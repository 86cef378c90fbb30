//! The command line: every command, flag and its help text (clap).
#![allow(
    rustdoc::invalid_html_tags,
    reason = "the doc comments here are the help text clap prints, where `<name>` is a placeholder for the reader, not an HTML tag"
)]

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Multi-agent tick simulation: NPCs observe, remember, forget and gossip.
#[derive(Debug, Parser)]
#[command(name = "hearsay", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command that runs ticks shares.
#[derive(Debug, Args)]
pub struct Engine {
    /// Never draw a progress bar (it is only drawn on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Report progress as plain lines on stderr, `hearsay-progress DONE OF` (ticks, or a
    /// sweep's runs), for programs that drive hearsay; terminal or not.
    #[arg(long, conflicts_with = "no_progress")]
    pub progress_lines: bool,
    /// PostgreSQL URL for runs with `store = "postgres"`.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Most PostgreSQL connections this process opens at once [default: 16 per run]; a
    /// sweep shares them out among its runs at once (at least 2 each).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub pool_size: Option<u32>,
    /// Async worker threads [default: one per core]; results never depend on it.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Skip the servers' preflight (one probe decision per brain and one embedding,
    /// before anything is written; `hearsay check` runs it alone).
    #[arg(long)]
    pub no_preflight: bool,
}

impl Engine {
    pub fn progress(&self) -> hearsay_runtime::terminal::Progress {
        use hearsay_runtime::terminal::Progress;
        if self.progress_lines {
            Progress::Lines
        } else if !self.no_progress && std::io::stderr().is_terminal() {
            Progress::Bar
        } else {
            Progress::Hidden
        }
    }

    pub fn threads(&self) -> Option<usize> {
        self.threads.map(usize::from)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
        /// Change the scenario before it runs: a dotted key and a TOML value, e.g.
        /// --set memory.recall_k=3 (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Watch the run in a terminal view as it happens (quitting stops it; `hearsay
        /// resume` finishes it).
        #[arg(long)]
        watch: bool,
        /// With --watch: ticks per second to start at (0: as fast as the run goes).
        #[arg(long, default_value_t = 10)]
        speed: u32,
        #[command(flatten)]
        engine: Engine,
    },
    /// Play a run in a terminal view: map, speech, spread curves, tick by tick.
    Watch {
        /// The run directory.
        run_dir: PathBuf,
        /// Ticks per second to start at (0: as fast as possible).
        #[arg(long, default_value_t = 10)]
        speed: u32,
        /// Start paused.
        #[arg(long)]
        paused: bool,
    },
    /// Write report.html for a run: spread curves, who told whom, knowers with no
    /// source, NPC timelines, degradations and costs (self-contained).
    Report {
        /// The run directory.
        run_dir: PathBuf,
        /// Where to write it [default: RUN_DIR/report.html].
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Interview an NPC of a run with its own brain and its memories as they were at a
    /// tick; changes nothing.
    Ask {
        /// The run directory.
        run_dir: PathBuf,
        /// The NPC, by name.
        #[arg(long)]
        npc: String,
        /// Its memories as they were at the start of this tick [default: the end].
        #[arg(long)]
        at_tick: Option<u64>,
        /// The question.
        question: String,
        /// Print JSON (the answer and the memories it drew on).
        #[arg(long)]
        json: bool,
        /// PostgreSQL URL, for runs kept in PostgreSQL (only this flag: a command that
        /// reads a run never connects to a database from the environment).
        #[arg(long)]
        database_url: Option<String>,
    },
    /// Run a scenario over many seeds in parallel: how often each expectation is met,
    /// how long each fact takes to reach half of the NPCs. With --shard, one share of the
    /// seeds (a batch scheduler runs the others); --collect merges the shards.
    #[command(group(clap::ArgGroup::new("what").required(true).args(["scenario", "collect"])))]
    Sweep {
        /// The scenario file (TOML).
        #[arg(requires = "seeds", conflicts_with = "collect")]
        scenario: Option<PathBuf>,
        /// Seeds: a range with both ends included (1..20) or a list (3,7,11).
        #[arg(long)]
        seeds: Option<String>,
        /// Change the scenario for every run (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
        /// Runs at once [default: one per core].
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
        jobs: Option<u16>,
        /// Override the scenario's number of ticks.
        #[arg(long)]
        ticks: Option<u64>,
        /// Run only the I-th of N equal shares of the seeds: I/N, or auto (auto/N) for
        /// the index of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) or a Slurm array
        /// task (SLURM_ARRAY_TASK_ID).
        #[arg(long, value_name = "I/N|auto")]
        shard: Option<String>,
        /// Merge the shards in these directories (or, with no directory, those recorded
        /// in PostgreSQL under --sweep NAME) into the sweep.json an unsharded sweep writes.
        #[arg(long, value_name = "DIR", num_args = 0..,
              conflicts_with_all = ["seeds", "sets", "jobs", "ticks", "shard"])]
        collect: Option<Vec<PathBuf>>,
        /// The sweep's name in PostgreSQL: its shards record themselves there (store =
        /// "postgres"), and --collect reads them back.
        #[arg(long = "sweep", value_name = "NAME")]
        sweep_name: Option<String>,
        /// Where the runs and sweep.json go [default: runs/<name>-sweep, a shard's
        /// runs/<name>-sweep-I-of-N].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace --out if it holds an earlier sweep (and run a shard recorded as
        /// finished again).
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        engine: Engine,
    },
    /// Embed the memories a run left without an embedding (its embedder was down when it
    /// ended), with the run's own embedder. Any number of these may work on one
    /// PostgreSQL run at once: none embeds a row another did; never beside the run's
    /// writer.
    Backfill {
        /// The run directory (or give --database-url and --run for a run kept in
        /// PostgreSQL).
        run_dir: Option<PathBuf>,
        /// A PostgreSQL run, by its id in the runs table (with --database-url).
        #[arg(long = "run", value_name = "RUN_ID")]
        run_id: Option<i64>,
        /// Give up when nothing was embedded for this many seconds.
        #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
        stall_s: u64,
        /// PostgreSQL URL, for runs kept in PostgreSQL (only this flag, never the
        /// environment).
        #[arg(long)]
        database_url: Option<String>,
    },
    /// Serve a run's world and memories to MCP clients over stdio (read-only unless
    /// --allow-writes).
    Mcp {
        /// The run directory (or give --database-url and --run for a run kept in
        /// PostgreSQL).
        run_dir: Option<PathBuf>,
        /// A PostgreSQL run, by its id in the runs table (with --database-url).
        #[arg(long = "run", value_name = "RUN_ID")]
        run_id: Option<i64>,
        /// Serve add_memory too: new memories are stored and embedded.
        #[arg(long)]
        allow_writes: bool,
        /// PostgreSQL URL, for runs kept in PostgreSQL (only this flag, never the
        /// environment).
        #[arg(long)]
        database_url: Option<String>,
    },
    /// Ask a scenario's model servers what a run would before its first tick: one real
    /// decision per brain, one embedding; the context and how prompts are counted.
    /// Writes nothing.
    Check {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Change the scenario first, as `run --set` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        sets: Vec<String>,
    },
    /// Check a scenario file (or a run directory's) without running it: problems, notes,
    /// and which servers it calls with which key variables.
    Validate {
        /// The scenario file (TOML), or a run directory.
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
    /// Follow a tracked fact hop by hop: who told whom, the exact words at each hop, and
    /// how similar they stayed to the fact.
    Trace {
        /// The run directory (a finished run: its summary.json holds the hops).
        run_dir: PathBuf,
        /// The fact, by name.
        #[arg(long)]
        fact: String,
        /// Only the chain that reached this NPC, from where it started.
        #[arg(long)]
        npc: Option<String>,
    },
    /// Write a run's tables (npcs, events, memories, knowers, calls, ticks) as Parquet or
    /// CSV files, for DuckDB, polars, pandas or any other tool; --schema prints what
    /// each column holds.
    Export {
        /// The run directory.
        #[arg(required_unless_present = "schema")]
        run_dir: Option<PathBuf>,
        /// parquet (typed columns, lists as lists) or csv (lists as JSON arrays).
        #[arg(long, value_enum, default_value = "parquet")]
        format: ExportFormat,
        /// The directory the tables go to [default: RUN_DIR-export].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write `vectors`: every embedded memory chunk's vector.
        #[arg(long)]
        vectors: bool,
        /// Replace --out if it holds an earlier export.
        #[arg(long)]
        force: bool,
        /// Print the tables' schema (Markdown) and exit.
        #[arg(long, conflicts_with_all = ["format", "out", "vectors", "force"])]
        schema: bool,
        /// PostgreSQL URL, for runs kept in PostgreSQL (only this flag: a command that
        /// reads a run never connects to a database from the environment).
        #[arg(long)]
        database_url: Option<String>,
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
        /// Also show, tick by tick, whether the NPC thought (and why) or carried on:
        /// `A..B` (both included), `A..=B`, or one tick.
        #[arg(long, value_name = "A..B", value_parser = tick_range)]
        thinking: Option<(u64, u64)>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// PostgreSQL URL, for runs kept in PostgreSQL (only this flag, never the
        /// environment).
        #[arg(long)]
        database_url: Option<String>,
    },
}

/// `A..B` or `A..=B` (both ends included), or one tick `A`.
fn tick_range(spec: &str) -> Result<(u64, u64), String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("{s:?} is not a tick (a whole number)"))
    };
    let (a, b) = match spec.split_once("..") {
        Some((a, b)) => (number(a)?, number(b.strip_prefix('=').unwrap_or(b))?),
        None => {
            let t = number(spec)?;
            (t, t)
        }
    };
    if a > b {
        return Err(format!("{spec}: the first tick comes after the last"));
    }
    Ok((a, b))
}

/// `hearsay export --format`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ExportFormat {
    /// Apache Parquet (Snappy).
    Parquet,
    /// CSV with a header row.
    Csv,
}
