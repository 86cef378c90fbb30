//! The tick loop: Perceive (kernel) → barrier → Think (async) → Act (kernel) → persist,
//! for a new run ([`run`]), a run continued after a crash ([`resume`]), or a new run
//! branched off an old one at a tick ([`fork`]).
//!
//! The world lives on the calling thread. Async work (embedding, recall, brains, store
//! writes) runs on a tokio runtime; the embedding backfill worker is a task on that
//! runtime's worker threads, never on this one. Every tick's memories, recall touches
//! and (every `checkpoint_every` ticks) the world's state commit together; a resumed or
//! forked run restarts from such a checkpoint and takes the decisions of ticks that were
//! already decided from the tape (`llm.jsonl`), so it ends exactly where an
//! uninterrupted run would.
//!
//! The `run` wing: `options` (what a run is asked to do), `open` (run, resume, fork,
//! check), `engine` (the one loop every tick goes through), `runner` (the run's driver
//! of it), `space` (a change of embedder, seen from the run), `think` (the async Think
//! phase), `providers` (brains and embedders from a scenario), `check` and `preflight`
//! (what is verified before tick 0), `replay` (the engine driven by the tape), `sweep`
//! (many seeds), `annex` (memories added to a recorded run).

pub mod annex;
pub mod check;
pub mod engine;
mod open;
mod options;
pub mod preflight;
pub mod providers;
pub mod replay;
mod runner;
mod space;
pub mod sweep;
pub mod think;

pub use open::{RUN_CONNECTIONS_MAX, RUN_CONNECTIONS_MIN, check, fork, resume, run, run_observed};
pub(crate) use open::{database_url_for, hold_as_writer};
pub use options::{ForkOptions, Observer, ResumeOptions, RunOptions, RunOutcome};
pub(crate) use runner::backfill_config;
pub use runner::thought_from;
