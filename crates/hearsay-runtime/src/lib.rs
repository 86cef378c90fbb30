//! The runtime: turns a scenario file into a run, and reads runs back.
//!
//! Four wings, each a folder that says what it owns:
//! - [`scenario`] — a scenario file, checked into a [`Scenario`]; `--set` edits;
//!   `hearsay validate`.
//! - [`run`](mod@run) — starting a run, a resume or a fork ([`run::run`], [`run::resume`],
//!   [`run::fork`]), the one engine loop every tick goes through ([`engine`]) and its two
//!   drivers (a run's, and [`replay`](mod@replay)'s), the async Think phase, providers, the preflight,
//!   sweeps, memories added to a recorded run ([`annex`]).
//! - [`record`] — the run directory: its files and lock, `run.json`, the event log and
//!   the tape, the story read back from the log, `summary.json`, expectations, the report.
//! - [`read`] — a recorded run read back: [`source`], [`inspect`](mod@inspect),
//!   [`ask`](mod@ask).
//!
//! It must never contain NPC behaviour (that is the kernel's and the brains'), and never
//! let async completion order reach the world: Think results are applied in NPC-id order.

pub mod notice;
pub mod read;
pub mod record;
pub mod run;
pub mod scenario;
pub mod terminal;

// Every wing's modules under their own names too: `crate::logs`, `hearsay_runtime::inspect`.
pub use read::{ask, inspect, source, trace};
pub use record::{expect, fit, logfile, logs, report, rundir, spread, story, summary};
pub use run::{annex, check, engine, preflight, providers, replay, sweep, think};
pub use scenario::{edit, validate};

use std::path::PathBuf;

/// The kernel's types, for crates built on the runtime (the MCP server): they depend on
/// the runtime alone.
pub use hearsay_core as core;

pub use ask::{Answer, AskOptions, ask};
pub use inspect::{InspectOptions, InspectReport, inspect};
pub use replay::{Divergence, ReplayReport, replay};
pub use run::{
    ForkOptions, Observer, ResumeOptions, RunOptions, RunOutcome, fork, resume, run, run_observed,
};
pub use scenario::{Scenario, ScenarioError};
pub use summary::Summary;
pub use sweep::{SweepOptions, SweepReport, sweep};

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum RunError {
    /// The scenario is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Scenario(#[from] ScenarioError),
    /// A command-line value is out of range.
    #[error("{0}")]
    BadOption(String),
    /// The run directory exists.
    #[error("run directory {} already exists", .0.display())]
    #[diagnostic(help("pass --force to replace it, or --out DIR to write the run elsewhere"))]
    Exists(PathBuf),
    /// An output directory hearsay may not write into or replace.
    #[error("{}: {problem}", path.display())]
    #[diagnostic(help("choose another --out directory"))]
    OutDir {
        /// The directory given.
        path: PathBuf,
        /// Why not.
        problem: String,
    },
    /// Reading or writing a file failed.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The memory store failed.
    #[error(transparent)]
    Store(#[from] hearsay_memory::StoreError),
    /// A run directory is missing something or holds something unexpected.
    #[error("{}: {problem}", path.display())]
    RunDir {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A command-line request cannot be met by this run directory.
    #[error("{0}")]
    Refused(String),
    /// An API key the scenario names is not in the environment.
    #[error(transparent)]
    Key(#[from] hearsay_brain::KeyError),
    /// A key the scenario would send to a server the user has not allowed it for.
    #[error("refused: {0}; nothing was sent")]
    #[diagnostic(help("{}", .0.help))]
    KeyRefused(hearsay_brain::KeyRefused),
    /// A model provider client could not be built.
    #[error("cannot set up a model provider: {0}")]
    Provider(String),
    /// A model server the scenario names does not answer, or refuses its key.
    #[error("the model server of {section} at {url} cannot be used: {problem}")]
    #[diagnostic(help(
        "is the server running and is base_url right? A key that is refused (HTTP 401/403) \
         needs the right api_key_env; nothing was run"
    ))]
    Unreachable {
        /// The scenario section (`[brain]`, `[brains.NAME]`, `[memory.embedder]`).
        section: String,
        /// Its base URL.
        url: String,
        /// What happened.
        problem: String,
    },
    /// `store = "postgres"` without a URL.
    #[error(
        "the scenario keeps memories in PostgreSQL (store = \"postgres\") but no database was given"
    )]
    #[diagnostic(help(
        "pass --database-url postgres://USER@HOST:PORT/DB (run, sweep, resume and fork also \
         read DATABASE_URL; a command that only reads a run takes the flag alone)"
    ))]
    NoDatabaseUrl,
    /// A model server failed the preflight: refused the probe, answered nothing valid,
    /// or took a prompt it cannot hold.
    #[error("preflight: {section} {problem}; nothing was written")]
    #[diagnostic(help("{hint}"))]
    Preflight {
        /// `[brain]`, `[brains.NAME]`, `[memory.embedder]`.
        section: String,
        /// What happened, with the server's own words.
        problem: String,
        /// What to change.
        hint: String,
    },
    /// The run cannot fit on this machine.
    #[error("refused: {0}; nothing was written")]
    #[diagnostic(help(
        "run fewer ticks or NPCs, or write the run to a disk with more room (--out)"
    ))]
    TooBig(String),
    /// Memory ran low: the run stopped between two ticks, everything before committed.
    #[error(
        "stopped before tick {tick}: only {} of memory is available, less than the {} this run keeps free",
        crate::preflight::human(*available),
        crate::preflight::human(*reserve)
    )]
    MemoryLow {
        /// The first tick not run.
        tick: u64,
        /// Bytes available when it stopped.
        available: u64,
        /// Bytes the run keeps free.
        reserve: u64,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl RunError {
    /// Whether the disk ran out of space (ENOSPC, or SQLite's "database or disk is full").
    pub fn is_disk_full(&self) -> bool {
        match self {
            RunError::Io { source, .. } => {
                source.kind() == std::io::ErrorKind::StorageFull
                    || source.raw_os_error() == Some(28)
            }
            RunError::Store(e) => {
                let text = e.to_string();
                text.contains("disk is full") || text.contains("No space left")
            }
            _ => false,
        }
    }

    /// Whether the user's input (scenario, flags, paths) was at fault, as opposed to the
    /// run failing: the CLI exits 2 for these, 1 otherwise.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            RunError::Scenario(_)
                | RunError::BadOption(_)
                | RunError::Exists(_)
                | RunError::OutDir { .. }
                | RunError::Key(_)
                | RunError::KeyRefused(_)
                | RunError::Unreachable { .. }
                | RunError::NoDatabaseUrl
                | RunError::RunDir { .. }
                | RunError::Refused(_)
                | RunError::TooBig(_)
                | RunError::Preflight { .. }
                | RunError::Store(hearsay_memory::StoreError::Damaged { .. })
        )
    }

    /// Whether the run stopped because memory ran low.
    pub fn is_memory_low(&self) -> bool {
        matches!(self, RunError::MemoryLow { .. })
    }

    /// Whether an earlier run's memory store is missing or damaged.
    pub fn is_damaged_store(&self) -> bool {
        matches!(
            self,
            RunError::Store(hearsay_memory::StoreError::Damaged { .. })
        )
    }
}
