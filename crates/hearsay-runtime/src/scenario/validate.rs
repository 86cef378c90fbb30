//! `hearsay validate`: everything a scenario (or a run directory's) would make hearsay
//! do that the user should know before running it — that it is valid, what validation
//! noticed, which servers it calls with which key variables and whether this machine's
//! policy lets each key go there, and, for a run directory, the earlier scenarios its
//! `run.json` keeps. Nothing is sent and nothing is written.

use std::path::{Path, PathBuf};

use crate::RunError;
use crate::logs::RunManifest;
use crate::rundir::{MANIFEST_FILE, SCENARIO_FILE};
use crate::scenario::{self, Scenario};

/// What `validate` found.
#[derive(Debug)]
pub struct Validation {
    /// The file validated: the path given, or a run directory's `scenario.toml`.
    pub path: PathBuf,
    /// What that file describes, with defaults filled in.
    pub scenario: Scenario,
    /// One line per server called: section, model, URL, key variable and verdict.
    pub network: Vec<String>,
    /// Keys this machine would refuse to send (the run would be refused).
    pub refused: Vec<hearsay_brain::KeyRefused>,
    /// For a run directory: each earlier scenario in `run.json` (in force until a tick),
    /// with how it differs from `scenario.toml`.
    pub stages: Vec<(u64, Vec<String>)>,
}

/// Validates the scenario at `path`, or the `scenario.toml` of the run directory `path`.
pub fn validate(path: &Path) -> Result<Validation, RunError> {
    let dir = path.is_dir().then(|| path.to_owned());
    let file = match &dir {
        Some(dir) => {
            crate::rundir::require(dir, &[SCENARIO_FILE])?;
            dir.join(SCENARIO_FILE)
        }
        None => path.to_owned(),
    };
    let (scenario, bytes) = scenario::load(&file)?;
    let remotes = crate::providers::remotes(&scenario);
    let policy = crate::providers::key_policy()?;
    let network = crate::providers::describe(&remotes, &policy);
    let refused = crate::providers::refusals(&remotes, &policy);
    let mut stages = Vec::new();
    if let Some(dir) = &dir
        && dir.join(MANIFEST_FILE).is_file()
    {
        let manifest = RunManifest::read(dir)?;
        let current = String::from_utf8_lossy(&bytes);
        for stage in &manifest.earlier_scenarios {
            let parsed = scenario::parse(&dir.join(MANIFEST_FILE), stage.text.as_bytes())?;
            crate::source::check_stage_remotes(dir, &parsed, &scenario)?;
            stages.push((
                stage.until_tick,
                crate::logs::stage_diff(&stage.text, &current, 40),
            ));
        }
    }
    Ok(Validation {
        path: file,
        scenario,
        network,
        refused,
        stages,
    })
}
