//! What `hearsay run`, `resume` and `fork` are asked to do, and what they hand back.

use std::path::PathBuf;

use crate::summary::Summary;

/// What `hearsay run` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The scenario file.
    pub scenario: PathBuf,
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
    /// Overrides the scenario's tick count.
    pub ticks: Option<u64>,
    /// Run directory (default `runs/<name>-seed<seed>`).
    pub out: Option<PathBuf>,
    /// Replace an existing run directory.
    pub force: bool,
    /// How to show progress.
    pub progress: crate::terminal::Progress,
    /// PostgreSQL URL, for `store = "postgres"` (`--database-url`, else `DATABASE_URL`).
    pub database_url: Option<String>,
    /// Most PostgreSQL connections the run opens at once [default 16]; at least
    /// [`crate::run::RUN_CONNECTIONS_MIN`].
    pub pool_size: Option<u32>,
    /// Async worker threads (default: one per core). Never changes a run's results.
    pub threads: Option<usize>,
    /// `KEY=VALUE` edits of the scenario (dotted TOML keys) before it runs; the run
    /// directory keeps the edited scenario.
    pub sets: Vec<String>,
    /// Skip the servers' preflight (the probe decision and embedding; see
    /// [`crate::check()`]).
    pub no_preflight: bool,
}

/// What `hearsay resume` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct ResumeOptions {
    /// The run directory.
    pub dir: PathBuf,
    /// How to show progress.
    pub progress: crate::terminal::Progress,
    /// PostgreSQL URL, for runs kept in PostgreSQL.
    pub database_url: Option<String>,
    /// Most PostgreSQL connections the run opens at once [default 16]; at least
    /// [`crate::run::RUN_CONNECTIONS_MIN`].
    pub pool_size: Option<u32>,
    /// Async worker threads.
    pub threads: Option<usize>,
    /// Skip the servers' preflight.
    pub no_preflight: bool,
}

/// What `hearsay fork` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct ForkOptions {
    /// The run to fork.
    pub dir: PathBuf,
    /// The first tick of the new run that may differ.
    pub at_tick: u64,
    /// The new run directory.
    pub out: PathBuf,
    /// Replace `out` if it holds a run.
    pub force: bool,
    /// The seed from `at_tick` on.
    pub seed: Option<u64>,
    /// `KEY=VALUE` edits of the scenario (dotted TOML keys), in force from `at_tick` on.
    pub sets: Vec<String>,
    /// How to show progress.
    pub progress: crate::terminal::Progress,
    /// PostgreSQL URL, for runs kept in PostgreSQL.
    pub database_url: Option<String>,
    /// Most PostgreSQL connections the run opens at once [default 16]; at least
    /// [`crate::run::RUN_CONNECTIONS_MIN`].
    pub pool_size: Option<u32>,
    /// Async worker threads.
    pub threads: Option<usize>,
    /// Skip the servers' preflight.
    pub no_preflight: bool,
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// Where it was written.
    pub dir: PathBuf,
    /// What `summary.json` holds.
    pub summary: Summary,
    /// The tick this invocation started from (0 for a new run).
    pub started_at: u64,
    /// Set when an observer stopped the run early: the tick it would have run next.
    /// Nothing was summarised; `hearsay resume` finishes the run.
    pub stopped_at: Option<u64>,
}

/// Called after every tick with the tick and its `events.jsonl` lines, once they are
/// written and committed; `Break` stops the run there (it can be resumed). It may block:
/// the run waits for it.
pub type Observer = Box<dyn FnMut(u64, &[String]) -> std::ops::ControlFlow<()> + Send>;
