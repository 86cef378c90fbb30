//! The `record` wing: the run directory and everything in it. `rundir` (its names, its
//! marker, its lock, the only ways its files are written), `logs` (`run.json`, the event
//! log with its hash chain, the tape), `story` (the run read back from its log), `spread` (facts by
//! meaning, the words of every hop: `facts.json`, `judge.jsonl`), `summary`
//! (`summary.json`), `fit` (the SI fit of a spread curve), `expect` (`[[expect]]` judged on the story), `report` (`report.html`).

pub mod expect;
pub mod fit;
pub mod logfile;
pub mod logs;
pub mod report;
pub mod rundir;
pub mod spread;
pub mod story;
pub mod summary;
