//! The run directory: where a run writes everything, and the rules for (re)creating it.

use std::path::{Path, PathBuf};

use crate::RunError;

/// Files in a run directory.
pub const SCENARIO_FILE: &str = "scenario.toml";
/// Event log.
pub const EVENTS_FILE: &str = "events.jsonl";
/// Brain-call tape.
pub const LLM_FILE: &str = "llm.jsonl";
/// Embedded store.
pub const MEMORIES_FILE: &str = "memories.db";
/// Summary.
pub const SUMMARY_FILE: &str = "summary.json";
/// The settings a run ran with.
pub const MANIFEST_FILE: &str = "run.json";

/// Checks that `dir` is a run directory holding `files` before a command reads it, so a
/// missing file is reported once, by name, instead of as the first read that fails.
pub fn require(dir: &Path, files: &[&str]) -> Result<(), RunError> {
    if !dir.is_dir() {
        let problem = if dir.exists() {
            "is not a directory; a run directory is what `hearsay run` writes (runs/NAME-seedN)"
        } else {
            "no such run directory; `hearsay run SCENARIO` writes one (runs/NAME-seedN by default)"
        };
        return Err(RunError::RunDir {
            path: dir.to_owned(),
            problem: problem.into(),
        });
    }
    let missing: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let problem = if missing.contains(&MANIFEST_FILE) && missing.contains(&SCENARIO_FILE) {
        format!(
            "is not a hearsay run directory (no {MANIFEST_FILE}, no {SCENARIO_FILE}); \
             `hearsay run SCENARIO` writes one"
        )
    } else {
        format!(
            "is incomplete: {} missing (a hearsay run writes {})",
            missing.join(", "),
            [
                MANIFEST_FILE,
                SCENARIO_FILE,
                EVENTS_FILE,
                LLM_FILE,
                MEMORIES_FILE,
                SUMMARY_FILE
            ]
            .join(", ")
        )
    };
    Err(RunError::RunDir {
        path: dir.to_owned(),
        problem,
    })
}

/// `name` with everything but letters, digits, `-` and `_` replaced by `-`.
fn safe_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// `runs/<name>-seed<seed>`, with the name made safe for a path.
pub fn default_dir(name: &str, seed: u64) -> PathBuf {
    PathBuf::from("runs").join(format!("{}-seed{seed}", safe_name(name)))
}

/// `runs/<name>-sweep`, where `hearsay sweep` puts its runs.
pub fn default_sweep_dir(name: &str) -> PathBuf {
    PathBuf::from("runs").join(format!("{}-sweep", safe_name(name)))
}

/// Makes sure `dir` can be created: it must not exist, unless `force` is set and it is
/// empty or holds a previous run (which is then removed). Never removes anything else.
pub fn prepare(dir: &Path, force: bool) -> Result<(), RunError> {
    if !dir.exists() {
        return Ok(());
    }
    if !force {
        return Err(RunError::Exists(dir.to_owned()));
    }
    let io = |source| RunError::Io {
        path: dir.to_owned(),
        source,
    };
    if !dir.is_dir() {
        return Err(RunError::NotARunDir(dir.to_owned()));
    }
    let empty = std::fs::read_dir(dir).map_err(io)?.next().is_none();
    let is_run = dir.join(SCENARIO_FILE).is_file();
    if !empty && !is_run {
        return Err(RunError::NotARunDir(dir.to_owned()));
    }
    std::fs::remove_dir_all(dir).map_err(io)
}
