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

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearsay_brain::{BrainCall, CallOutcome};
use hearsay_core::checkpoint::Checkpoint;
use hearsay_core::{NpcId, Sim, Thought};
use hearsay_memory::{
    AnyStore, Backfill, BackfillConfig, CachedEmbedder, Embedder, PgOptions, PgStore, Rewind,
    SavedCheckpoint, SpaceSwitch, SqliteStore, Store, StoreError, TickWrite, VectorSpace,
};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::Semaphore;

use crate::RunError;
use crate::logs::{EarlierScenario, EventLog, RunManifest, Tape, tape_line, write_lines};
use crate::providers;
use crate::rundir::{
    self, DirKind, DirLock, EVENTS_FILE, LLM_FILE, MEMORIES_FILE, Protected, SCENARIO_FILE,
    SUMMARY_FILE,
};
use crate::scenario::raw::{StoreKind, Visibility};
use crate::scenario::{self, Scenario};
use crate::summary::{
    self, Backend, BrainTally, Degraded, EmbedderStats, Reembed, StoreInfo, Summary, Timing,
};
use crate::think::{BrainSlot, RequestTemplate, ThinkContext, think_all};

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
    /// Draw a progress bar.
    pub progress: bool,
    /// PostgreSQL URL, for `store = "postgres"` (`--database-url`, else `DATABASE_URL`).
    pub database_url: Option<String>,
    /// Async worker threads (default: one per core). Never changes a run's results.
    pub threads: Option<usize>,
    /// `KEY=VALUE` edits of the scenario (dotted TOML keys) before it runs; the run
    /// directory keeps the edited scenario.
    pub sets: Vec<String>,
    /// Skip the servers' preflight (the probe decision and embedding; see
    /// [`crate::check`]).
    pub no_preflight: bool,
}

/// What `hearsay resume` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct ResumeOptions {
    /// The run directory.
    pub dir: PathBuf,
    /// Draw a progress bar.
    pub progress: bool,
    /// PostgreSQL URL, for runs kept in PostgreSQL.
    pub database_url: Option<String>,
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
    /// Draw a progress bar.
    pub progress: bool,
    /// PostgreSQL URL, for runs kept in PostgreSQL.
    pub database_url: Option<String>,
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

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.to_owned(),
        source,
    }
}

fn tokio_runtime(threads: Option<usize>) -> Result<tokio::runtime::Runtime, RunError> {
    let threads = threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("hearsay-async")
        .enable_all()
        .build()
        .map_err(RunError::Runtime)
}

/// Runs a scenario headless, start to finish.
pub fn run(opts: &RunOptions) -> Result<RunOutcome, RunError> {
    run_observed(opts, None)
}

/// Runs a scenario, calling `observer` after every tick (`hearsay run --watch`).
pub fn run_observed(opts: &RunOptions, observer: Option<Observer>) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    let watch = observer.map(|o| Watch {
        observer: std::cell::RefCell::new(o),
        stopped_at: std::cell::Cell::new(None),
    });
    if let Some(ticks) = opts.ticks
        && (ticks == 0 || ticks > scenario::TICKS_MAX)
    {
        return Err(RunError::BadOption(format!(
            "--ticks {ticks}: must be 1..={}",
            scenario::TICKS_MAX
        )));
    }
    // `--seed` and `--ticks` are `--set seed=` and `--set ticks=`: applied before
    // validation, and the run directory's scenario.toml says what ran.
    let sets = crate::edit::overrides(&opts.sets, opts.seed, opts.ticks);
    let (scenario, bytes) = crate::edit::load_edited(&opts.scenario, &sets)?;
    for note in &scenario.notes {
        crate::notice::say(note);
    }
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| rundir::default_dir(&scenario.name, scenario.seed));
    // What the output directory may be, before anything else is done.
    let target = rundir::check_target(
        &dir,
        DirKind::Run,
        opts.force,
        &Protected {
            inputs: vec![opts.scenario.clone()],
            source: None,
        },
    )?;
    // Keys and clients before anything touches the disk: a missing key refuses the run.
    let keys = providers::load_keys(&scenario)?;
    let mut parts = Parts::build(&scenario, &keys)?;
    let database_url = database_url_for(&scenario, &opts.database_url)?;
    crate::preflight::check(&scenario, &dir, 0)?;
    let runtime = tokio_runtime(opts.threads)?;
    // The database, too, before the run directory: an unreachable server or a missing
    // extension refuses the run with nothing left behind.
    let pg_options = PgOptions::default();
    let pg_pool = match &database_url {
        Some(url) => Some(runtime.block_on(hearsay_memory::postgres::connect(url, &pg_options))?),
        None => None,
    };
    runtime.block_on(providers::check_reachable(&scenario, &keys))?;
    preflight_servers(&runtime, &scenario, &mut parts, opts.no_preflight)?;

    // From here on the directory is this process's: made (or an earlier run of hearsay's
    // emptied), marked and locked until the run ends.
    let lock = target.claim()?;
    // Nothing has run yet: a failure before tick 0 leaves nothing behind (`abandon`).
    let mut manifest = RunManifest {
        hearsay: env!("CARGO_PKG_VERSION").to_owned(),
        scenario: scenario.name.clone(),
        ticks: scenario.ticks,
        seeds: vec![(0, scenario.seed)],
        store: StoreInfo::default(),
        checkpoint_every: scenario.checkpoint_every,
        forked_from: None,
        earlier_scenarios: Vec::new(),
    };
    let ((), lock) = lock.or_abandon(rundir::write_file(&dir.join(SCENARIO_FILE), &bytes))?;
    let names: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
    let engine = Engine {
        runtime: &runtime,
        scenario: &scenario,
        dir: &dir,
        progress: opts.progress,
        started,
        watch: watch.as_ref(),
    };
    let created = runtime.block_on(async {
        Ok::<AnyStore, RunError>(match pg_pool {
            None => {
                let store = SqliteStore::create(&dir.join(MEMORIES_FILE), names).await?;
                let meta = async {
                    store.set_meta("scenario", &scenario.name).await?;
                    store.set_meta("seed", &scenario.seed.to_string()).await
                };
                if let Err(e) = meta.await {
                    store.close().await;
                    return Err(e.into());
                }
                store.into()
            }
            Some(pool) => {
                let text = String::from_utf8_lossy(&bytes);
                PgStore::create_run(
                    pool,
                    pg_options,
                    &scenario.name,
                    scenario.seed,
                    &text,
                    names,
                )
                .await?
                .into()
            }
        })
    });
    let (store, lock) = lock.or_abandon(created.map(Arc::new))?;
    manifest.store = StoreInfo {
        backend: backend_of(&store),
        run_id: store.run_id(),
    };
    if let Err(e) = manifest.write(&dir) {
        // Nothing has run yet (a full disk, most likely): leave nothing behind.
        runtime.block_on(store.close());
        lock.abandon();
        return Err(e);
    }
    let summary = engine.drive(store, parts, &manifest, Start::fresh())?;
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(lock);
    Ok(RunOutcome {
        dir,
        summary,
        started_at: 0,
        stopped_at: watch.and_then(|w| w.stopped_at.get()),
    })
}

/// The store of the run recorded in `dir`, loaded for recall, to continue it or branch
/// off it: on PostgreSQL (`database_url`) attached only if its row holds this directory's
/// scenario (`scenario_bytes`) and NPCs.
async fn open_recorded(
    dir: &Path,
    manifest: &RunManifest,
    database_url: Option<&str>,
    scenario_bytes: &[u8],
    names: &[String],
) -> Result<AnyStore, RunError> {
    Ok(match manifest.store.backend {
        Backend::Postgres => {
            let url = database_url.ok_or(RunError::NoDatabaseUrl)?;
            let run_id = manifest.store.run_id.ok_or_else(|| RunError::RunDir {
                path: dir.join(rundir::MANIFEST_FILE),
                problem: "a PostgreSQL run without a run_id".into(),
            })?;
            let options = PgOptions::default();
            let pool = hearsay_memory::postgres::connect(url, &options).await?;
            crate::source::check_pg_run(&pool, run_id, dir, scenario_bytes, names).await?;
            PgStore::attach(pool, options, run_id, names.to_vec())
                .await?
                .into()
        }
        Backend::Sqlite => SqliteStore::open(&dir.join(MEMORIES_FILE), names.to_vec())
            .await?
            .into(),
    })
}

/// A new run's store branched off `reader`'s at `rewind` (a fork): a copy of the SQLite
/// file in `out`, rewound; or a new PostgreSQL run copied from the old one's rows.
async fn branch(
    reader: &AnyStore,
    out: &Path,
    new: (&str, u64, &str),
    names: &[String],
    rewind: &Rewind,
) -> Result<AnyStore, RunError> {
    Ok(match reader {
        AnyStore::Sqlite(r) => {
            let path = out.join(MEMORIES_FILE);
            r.copy_to(&path).await?;
            let store = SqliteStore::open(&path, names.to_vec()).await?;
            store.rewind(rewind.clone()).await?;
            store.into()
        }
        AnyStore::Postgres(r) => PgStore::fork(
            r.pool().clone(),
            PgOptions::default(),
            r.run_id(),
            new,
            names.to_vec(),
            rewind,
        )
        .await?
        .into(),
    })
}

/// The backend of `store`, as `run.json` records it.
fn backend_of(store: &AnyStore) -> Backend {
    match store {
        AnyStore::Sqlite(_) => Backend::Sqlite,
        AnyStore::Postgres(_) => Backend::Postgres,
    }
}

fn database_url_for(
    scenario: &Scenario,
    given: &Option<String>,
) -> Result<Option<String>, RunError> {
    match scenario.memory.store {
        StoreKind::Postgres => Ok(Some(given.clone().ok_or(RunError::NoDatabaseUrl)?)),
        StoreKind::Sqlite => Ok(None),
    }
}

/// The scenario of an existing run, with the settings it ran with.
fn recorded_scenario(dir: &Path, manifest: &RunManifest) -> Result<(Scenario, Vec<u8>), RunError> {
    let path = dir.join(SCENARIO_FILE);
    let (mut scenario, bytes) = scenario::load(&path)?;
    scenario.seed = manifest.seed_at(0);
    scenario.ticks = manifest.ticks;
    Ok((scenario, bytes))
}

/// Continues a run that stopped before its last tick (a crash, `kill -9`, a full disk)
/// from its last checkpoint; the result is the run that would have been.
pub fn resume(opts: &ResumeOptions) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    let dir = &opts.dir;
    rundir::require(dir, &[rundir::MANIFEST_FILE, SCENARIO_FILE])?;
    // The run's writer, from here to its end: a run still going, or a second resume, is
    // refused at once.
    let lock = DirLock::acquire(dir)?;
    let manifest = RunManifest::read(dir)?;
    let (scenario, scenario_bytes) = recorded_scenario(dir, &manifest)?;
    let keys = providers::load_keys(&scenario)?;
    let mut parts = Parts::build(&scenario, &keys)?;
    let runtime = tokio_runtime(opts.threads)?;
    runtime.block_on(providers::check_reachable(&scenario, &keys))?;
    preflight_servers(&runtime, &scenario, &mut parts, opts.no_preflight)?;
    let names: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
    let engine = Engine {
        runtime: &runtime,
        scenario: &scenario,
        dir,
        progress: opts.progress,
        started,
        watch: None,
    };
    let store = Arc::new(runtime.block_on(open_recorded(
        dir,
        &manifest,
        opts.database_url.as_deref(),
        &scenario_bytes,
        &names,
    ))?);
    let resumed = engine.resume_on(store.clone(), parts, &manifest);
    if resumed.is_err() {
        // Refused before any tick ran: close cleanly, leaving no WAL files behind.
        runtime.block_on(store.close());
    }
    let (summary, started_at) = resumed?;
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(lock);
    Ok(RunOutcome {
        dir: dir.clone(),
        summary,
        started_at,
        stopped_at: None,
    })
}

/// Branches a new run off an existing one: identical up to `at_tick`, then free to
/// differ (another seed, another model, other weights).
pub fn fork(opts: &ForkOptions) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    let source = &opts.dir;
    rundir::require(
        source,
        &[rundir::MANIFEST_FILE, SCENARIO_FILE, EVENTS_FILE, LLM_FILE],
    )?;
    let manifest = RunManifest::read(source)?;
    let events = EventLog::read(&source.join(EVENTS_FILE))?;
    let completed = events.ticks.len() as u64;
    crate::logs::check_not_cut_short(source, manifest.ticks, completed)?;
    if opts.at_tick > completed || opts.at_tick >= manifest.ticks {
        return Err(RunError::Refused(format!(
            "--at-tick {}: {} has completed ticks 0..{} of {}; fork at a tick from 0 to {}",
            opts.at_tick,
            source.display(),
            completed,
            manifest.ticks,
            completed.min(manifest.ticks.saturating_sub(1))
        )));
    }
    let (original, source_bytes) = recorded_scenario(source, &manifest)?;
    let source_text = String::from_utf8_lossy(&source_bytes).into_owned();
    // The edits apply to the scenario the source ran tick `at_tick` with; the stages
    // before it are kept, so replay can run every tick with the settings it ran with.
    let base_text = manifest
        .scenario_text_at(opts.at_tick, &source_text)
        .to_owned();
    if base_text != source_text {
        // A stage kept in run.json: it may not call anything scenario.toml does not show.
        let stage = scenario::parse(&source.join(rundir::MANIFEST_FILE), base_text.as_bytes())?;
        crate::source::check_stage_remotes(source, &stage, &original)?;
    }
    // `--seed S` is `--set seed=S`. Seed and ticks take effect at the fork tick without
    // changing how earlier ticks ran; every other key is an edit of the scenario.
    let sets = crate::edit::overrides(&opts.sets, opts.seed, None);
    let (stage_sets, edits): (Vec<String>, Vec<String>) = sets
        .into_iter()
        .partition(|s| matches!(crate::edit::set_key(s), "seed" | "ticks"));
    let edited_text = crate::edit::apply_sets(&base_text, &edits)?;
    let edited = edited_text != base_text;
    let label = if sets_given(opts) {
        crate::edit::edited_label(&source.join(SCENARIO_FILE))
    } else {
        source.join(SCENARIO_FILE)
    };
    let given_seed = stage_sets.iter().any(|s| crate::edit::set_key(s) == "seed");
    let given_ticks = stage_sets
        .iter()
        .any(|s| crate::edit::set_key(s) == "ticks");
    // The fork's scenario.toml says what runs from the fork tick on: its seed and its
    // length, given or inherited.
    let mut final_sets = stage_sets.clone();
    if !given_seed {
        final_sets.push(format!("seed={}", manifest.seed_at(opts.at_tick)));
    }
    if !given_ticks {
        final_sets.push(format!("ticks={}", manifest.ticks));
    }
    let text = crate::edit::apply_sets(&edited_text, &final_sets)?;
    let mut scenario = scenario::parse(&label, text.as_bytes())?;
    if scenario.ticks <= opts.at_tick {
        return Err(RunError::BadOption(format!(
            "ticks = {}: a fork at tick {} needs more ticks than that",
            scenario.ticks, opts.at_tick
        )));
    }
    let mut earlier_scenarios: Vec<EarlierScenario> = manifest
        .earlier_scenarios
        .iter()
        .filter(|s| s.until_tick <= opts.at_tick)
        .cloned()
        .collect();
    if edited {
        earlier_scenarios.push(EarlierScenario {
            until_tick: opts.at_tick,
            text: base_text.clone(),
        });
    }
    if scenario.facts != original.facts {
        return Err(RunError::Refused(
            "a fork keeps the tracked facts of the run it branches from ([[facts]] carries \
             who knows what across the fork)"
                .into(),
        ));
    }
    let names: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
    let original_names: Vec<String> = original.npcs.iter().map(|n| n.name.clone()).collect();
    if names != original_names {
        return Err(RunError::Refused(
            "a fork keeps the NPCs of the run it branches from (same names, same order)".into(),
        ));
    }
    let target = rundir::check_target(
        &opts.out,
        DirKind::Run,
        opts.force,
        &Protected {
            inputs: Vec::new(),
            source: Some(source.clone()),
        },
    )?;
    let keys = providers::load_keys(&scenario)?;
    let mut parts = Parts::build(&scenario, &keys)?;
    crate::preflight::check(&scenario, &opts.out, opts.at_tick)?;
    let runtime = tokio_runtime(opts.threads)?;
    runtime.block_on(providers::check_reachable(&scenario, &keys))?;
    preflight_servers(&runtime, &scenario, &mut parts, opts.no_preflight)?;

    let mut seeds: Vec<(u64, u64)> = manifest
        .seeds
        .iter()
        .copied()
        .filter(|(from, _)| *from < opts.at_tick)
        .collect();
    if seeds.is_empty() {
        seeds.push((0, manifest.seed_at(0)));
    }
    if scenario.seed != manifest.seed_at(opts.at_tick) {
        seeds.push((opts.at_tick, scenario.seed));
    }
    scenario.seed = seeds[0].1;
    let mut new_manifest = RunManifest {
        hearsay: env!("CARGO_PKG_VERSION").to_owned(),
        scenario: scenario.name.clone(),
        ticks: scenario.ticks,
        seeds,
        store: manifest.store.clone(),
        checkpoint_every: scenario.checkpoint_every,
        forked_from: Some((source.display().to_string(), opts.at_tick)),
        earlier_scenarios,
    };
    let out = &opts.out;
    let engine = Engine {
        runtime: &runtime,
        scenario: &scenario,
        dir: out,
        progress: opts.progress,
        started,
        watch: None,
    };
    let rewound =
        |checkpoint: Option<&SavedCheckpoint>| -> Result<(Option<Checkpoint>, Rewind), RunError> {
            // The ticks from a checkpoint to the fork tick would run under the edited
            // scenario: an edit needs a checkpoint at the fork tick itself.
            let at = checkpoint.map_or(0, |c| c.next_tick);
            if edited && at != opts.at_tick {
                return Err(RunError::Refused(format!(
                    "--set needs a checkpoint before tick {} and the nearest is before tick {at} \
                     (the run saved one every {} ticks); fork at a tick that is a multiple of it, \
                     or fork without --set",
                    opts.at_tick, manifest.checkpoint_every
                )));
            }
            let parsed = checkpoint
                .map(|c| parse_checkpoint(source, c))
                .transpose()?;
            let next_tick = parsed.as_ref().map_or(0, |c| c.next_tick);
            let rewind = Rewind {
                next_memory_id: parsed.as_ref().map_or(1, |c| c.next_memory_id),
                next_tick,
                last_recalled: events.last_recalled(next_tick),
                recall_counts: events.recall_counts(next_tick),
            };
            Ok((parsed, rewind))
        };
    let source_tape = Tape::read(&source.join(LLM_FILE))?;
    source_tape.check_cast(&source.join(LLM_FILE), &names)?;
    // The new run's logs start as the source's, byte for byte: its events up to the
    // checkpoint (the ticks after it are run again), its brain calls up to the fork tick
    // (the ticks from the checkpoint on are decided by them).
    let copy_logs = |next_tick: u64| -> Result<Tape, RunError> {
        write_lines(&out.join(EVENTS_FILE), events.through(next_tick).iter())?;
        rundir::write_file(&out.join(LLM_FILE), &source_tape.raw_before(opts.at_tick))?;
        Ok(source_tape
            .clone()
            .from_tick(next_tick)
            .before(opts.at_tick))
    };

    let claimed = |lock: DirLock| -> Result<DirLock, RunError> {
        lock.or_abandon(rundir::write_file(
            &out.join(SCENARIO_FILE),
            text.as_bytes(),
        ))
        .map(|((), lock)| lock)
    };
    let reader = runtime.block_on(open_recorded(
        source,
        &manifest,
        opts.database_url.as_deref(),
        &source_bytes,
        &names,
    ))?;
    let prepared = runtime
        .block_on(reader.latest_checkpoint(Some(opts.at_tick)))
        .map_err(RunError::from)
        .and_then(|saved| rewound(saved.as_ref()))
        .and_then(|r| Ok((r, target.claim().and_then(claimed)?)));
    let ((checkpoint, rewind), lock) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            runtime.block_on(reader.close());
            return Err(e);
        }
    };
    let started_up = runtime
        .block_on(branch(
            &reader,
            out,
            (&scenario.name, scenario.seed, &text),
            &names,
            &rewind,
        ))
        .and_then(|store| {
            new_manifest.store.run_id = store.run_id();
            new_manifest.write(out)?;
            Ok((Arc::new(store), copy_logs(rewind.next_tick)?))
        });
    if let AnyStore::Sqlite(r) = &reader {
        // A PostgreSQL reader shares its pool with the new run; a SQLite one is done.
        runtime.block_on(r.close());
    }
    let ((store, tape), lock) = lock.or_abandon(started_up)?;
    let summary = engine.drive(store, parts, &new_manifest, Start { checkpoint, tape })?;
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(lock);
    Ok(RunOutcome {
        dir: out.clone(),
        summary,
        started_at: opts.at_tick,
        stopped_at: None,
    })
}

/// Whether a fork was given any edit (`--set` or `--seed`): its problems are then reported
/// against the edited text.
fn sets_given(opts: &ForkOptions) -> bool {
    !opts.sets.is_empty() || opts.seed.is_some()
}

fn parse_checkpoint(dir: &Path, saved: &SavedCheckpoint) -> Result<Checkpoint, RunError> {
    serde_json::from_str(&saved.state).map_err(|e| RunError::RunDir {
        path: dir.to_owned(),
        problem: format!(
            "the checkpoint before tick {} is unreadable: {e}",
            saved.next_tick
        ),
    })
}

/// The servers' preflight ([`crate::check`]) for a run about to start, said on stderr;
/// the width of the embedder's vectors, when the probe saw it, completes the run's
/// vector space.
fn preflight_servers(
    runtime: &tokio::runtime::Runtime,
    scenario: &Scenario,
    parts: &mut Parts,
    skip: bool,
) -> Result<(), RunError> {
    let report = runtime.block_on(crate::check::check_servers(
        scenario,
        &parts.brains,
        &parts.embedder,
        !skip,
    ))?;
    crate::check::announce(&report);
    if let Some(e) = &report.embedder {
        parts.space.dims = Some(e.dims);
    }
    Ok(())
}

/// Checks `opts.scenario`'s servers as a run would before its first tick, and nothing
/// else (`hearsay check`): keys, reachability, then the preflight.
pub fn check(opts: &RunOptions) -> Result<crate::check::CheckReport, RunError> {
    let sets = crate::edit::overrides(&opts.sets, opts.seed, opts.ticks);
    let (scenario, _) = crate::edit::load_edited(&opts.scenario, &sets)?;
    let keys = providers::load_keys(&scenario)?;
    let parts = Parts::build(&scenario, &keys)?;
    let runtime = tokio_runtime(opts.threads)?;
    runtime.block_on(providers::check_reachable(&scenario, &keys))?;
    let report = runtime.block_on(crate::check::check_servers(
        &scenario,
        &parts.brains,
        &parts.embedder,
        true,
    ))?;
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(report)
}

/// The brains and the embedder of a run, built before the run directory exists.
struct Parts {
    brains: Vec<BrainSlot>,
    embedder: Arc<dyn Embedder>,
    cache: Option<Arc<CachedEmbedder>>,
    /// The vector space the embedder makes: recall compares nothing else.
    space: VectorSpace,
}

impl Parts {
    fn build(scenario: &Scenario, keys: &providers::Keys) -> Result<Parts, RunError> {
        let brains = scenario
            .brains
            .iter()
            .map(|(name, spec)| {
                Ok(BrainSlot {
                    name: name.clone(),
                    brain: providers::brain(spec, keys)?,
                    limit: Arc::new(Semaphore::new(spec.max_concurrency)),
                })
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        let (embedder, cache) = providers::embedder(
            &scenario.memory.embedder,
            scenario.memory.cache_entries,
            keys,
        )?;
        let space = providers::space_of(&scenario.memory.embedder, embedder.model());
        Ok(Parts {
            brains,
            embedder,
            cache,
            space,
        })
    }
}

/// Where a run starts: from scratch, or from a checkpoint, with the decisions of ticks
/// already decided.
struct Start {
    checkpoint: Option<Checkpoint>,
    tape: Tape,
}

impl Start {
    fn fresh() -> Start {
        Start {
            checkpoint: None,
            tape: Tape::default(),
        }
    }
}

/// Phase names in `summary.json`'s `timing.phases_ms`.
const PHASES: [&str; 5] = ["perceive", "barrier", "think", "act", "persist"];
/// The parts of `persist`, timed apart: the event log, the checkpoint's capture and
/// encoding, the store's transaction.
const PERSIST_PARTS: [&str; 3] = ["persist.log", "persist.checkpoint", "persist.store"];

/// What a run needs besides its store and its brains.
struct Engine<'a> {
    runtime: &'a tokio::runtime::Runtime,
    scenario: &'a Scenario,
    dir: &'a Path,
    progress: bool,
    started: Instant,
    watch: Option<&'a Watch>,
}

/// Called after every tick with the tick and its `events.jsonl` lines, once they are
/// written and committed; `Break` stops the run there (it can be resumed). It may block:
/// the run waits for it.
pub type Observer = Box<dyn FnMut(u64, &[String]) -> std::ops::ControlFlow<()> + Send>;

/// A run's observer and whether it stopped the run.
struct Watch {
    observer: std::cell::RefCell<Observer>,
    stopped_at: std::cell::Cell<Option<u64>>,
}

impl Engine<'_> {
    /// Resumes on `store` from its last checkpoint.
    fn resume_on<S: Store>(
        &self,
        store: Arc<S>,
        parts: Parts,
        manifest: &RunManifest,
    ) -> Result<(Summary, u64), RunError> {
        let dir = self.dir;
        let saved = self.runtime.block_on(store.latest_checkpoint(None))?;
        let checkpoint = saved
            .as_ref()
            .map(|c| parse_checkpoint(dir, c))
            .transpose()?;
        let next_tick = checkpoint.as_ref().map_or(0, |c| c.next_tick);
        // The log is written before the store commits a tick, so it reaches at least as
        // far as the checkpoint; a run killed before its first tick may have none yet.
        let events_path = dir.join(EVENTS_FILE);
        let events = if checkpoint.is_none() && !events_path.exists() {
            EventLog::default()
        } else {
            EventLog::read(&events_path)?
        };
        if let Some(c) = &checkpoint {
            let logged = events.ticks.len() as u64;
            if logged < next_tick {
                return Err(RunError::RunDir {
                    path: events_path,
                    problem: format!(
                        "closes {logged} ticks, but the store's last checkpoint is after tick {}: \
                         the log was cut short, so the run cannot be resumed",
                        next_tick - 1
                    ),
                });
            }
            if events.hash_before(next_tick).as_deref() != Some(c.digest.as_str()) {
                return Err(RunError::RunDir {
                    path: events_path,
                    problem: format!(
                        "the event log does not match the store's checkpoint before tick {next_tick} \
                         (from another run?); it cannot be resumed"
                    ),
                });
            }
        }
        if next_tick >= manifest.ticks {
            return Err(RunError::Refused(format!(
                "{} is complete ({} of {} ticks): nothing to resume",
                dir.display(),
                next_tick,
                manifest.ticks
            )));
        }
        let names: Vec<String> = self.scenario.npcs.iter().map(|n| n.name.clone()).collect();
        let llm_path = dir.join(LLM_FILE);
        let tape = Tape::read(&llm_path)?;
        tape.check_cast(&llm_path, &names)?;
        // Ticks after the checkpoint that were decided in full before the stop are taken
        // from the tape as they are; the logs are cut back, never written again, so every
        // byte written before the stop stays as it was.
        let decided = tape.clone().complete_from(next_tick, &names);
        let decided_until = decided
            .ticks
            .keys()
            .next_back()
            .map_or(next_tick, |t| t + 1);
        if events_path.exists() {
            rundir::truncate(&events_path, events.bytes_through(next_tick))?;
        }
        match tape.bytes_before(decided_until) {
            Some(len) => rundir::truncate(&llm_path, len)?,
            // Not in tick order (not as hearsay writes it): kept lines rewritten as read.
            None => rundir::write_file(&llm_path, &tape.raw_before(decided_until))?,
        }
        let rewind = Rewind {
            next_memory_id: checkpoint.as_ref().map_or(1, |c| c.next_memory_id),
            next_tick,
            last_recalled: events.last_recalled(next_tick),
            recall_counts: events.recall_counts(next_tick),
        };
        self.runtime.block_on(store.rewind(rewind))?;
        tracing::info!(next_tick, "resuming");
        let summary = self.drive(
            store,
            parts,
            manifest,
            Start {
                checkpoint,
                tape: decided,
            },
        )?;
        Ok((summary, next_tick))
    }

    /// Runs the remaining ticks on `store`, then closes it whatever happened.
    fn drive<S: Store>(
        &self,
        store: Arc<S>,
        parts: Parts,
        manifest: &RunManifest,
        start: Start,
    ) -> Result<Summary, RunError> {
        let result = self.simulate(store.clone(), parts, manifest, start);
        self.runtime.block_on(store.close());
        result
    }

    fn simulate<S: Store>(
        &self,
        store: Arc<S>,
        parts: Parts,
        manifest: &RunManifest,
        start: Start,
    ) -> Result<Summary, RunError> {
        let Engine {
            runtime,
            scenario,
            dir,
            progress,
            started,
            watch,
        } = *self;
        let Parts {
            brains,
            embedder,
            cache,
            space,
        } = parts;
        let embedder_model = embedder.model().to_owned();
        // Forgetting before anything is written or recalled: the schedule covers every
        // memory, loaded or new.
        store.set_forgetting(scenario.memory.forgetting);
        // One vector space: a store that holds another model's vectors (a fork or resume
        // with another embedder) sets them aside before the worker starts, and the
        // worker embeds those memories again.
        let switched_at = Instant::now();
        let switch = runtime.block_on(store.use_space(&space))?;
        announce_switch(&switch, &space);
        let backfill = Backfill::spawn(
            runtime.handle(),
            store.clone(),
            embedder.clone(),
            backfill_config(scenario),
        );

        let first_tick = start.checkpoint.as_ref().map_or(0, |c| c.next_tick);
        let mut sim = match &start.checkpoint {
            Some(c) => Sim::restored(scenario.world_setup(), c).map_err(|e| RunError::RunDir {
                path: dir.to_owned(),
                problem: format!("the checkpoint does not fit the scenario: {e}"),
            })?,
            None => {
                let mut sim = Sim::new(scenario.world_setup());
                runtime.block_on(store.write_tick(TickWrite {
                    tick: 0,
                    memories: sim.take_memories(),
                    recalled: Vec::new(),
                    archived: Vec::new(),
                    checkpoint: None,
                }))?;
                sim
            }
        };
        backfill.wake();
        // The re-embedding is timed in the background, whatever the ticks do meanwhile.
        let reembed_clock = (switch.reembed > 0).then(|| {
            let done = backfill.embedded_through(switch.pending_through);
            let texts_before = backfill.progress().texts;
            let progress = backfill.progress_receiver();
            runtime.spawn(async move {
                done.await.then(|| {
                    (
                        switched_at.elapsed(),
                        progress.borrow().texts - texts_before,
                    )
                })
            })
        });

        let brain_names: Vec<&String> = scenario.brains.keys().collect();
        let template = RequestTemplate::new(scenario);
        let names = template.names.clone();
        let ctx = Arc::new(ThinkContext {
            store: store.clone(),
            embedder,
            embed_batch: scenario.memory.batch_size,
            brains,
            npc_brain: scenario
                .npcs
                .iter()
                .map(|n| brain_names.iter().position(|b| **b == n.brain).unwrap_or(0))
                .collect(),
            template,
            recall_k: scenario.memory.recall_k,
            scoring: scenario.memory.scoring,
            insights_max: scenario.memory.reflect.insights_max,
            queries: (scenario.memory.visibility == Visibility::Eventual).then(|| {
                Arc::new(crate::think::QueryPipeline::new(
                    scenario.npcs.len(),
                    scenario.memory.embed_concurrency,
                ))
            }),
        });

        let events_path = dir.join(EVENTS_FILE);
        let llm_path = dir.join(LLM_FILE);
        let append =
            |path: &Path| rundir::open_append(path).map(|f| BufWriter::with_capacity(1 << 16, f));
        let events: BufWriter<File> = append(&events_path)?;
        let llm: BufWriter<File> = append(&llm_path)?;

        let bar = if progress {
            let bar = ProgressBar::new(scenario.ticks);
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix} tick {pos}/{len} [{bar:32}] {elapsed_precise} eta {eta} {msg}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(scenario.name.clone());
            bar.set_position(first_tick);
            bar
        } else {
            ProgressBar::hidden()
        };

        let mut driver = Runner {
            engine: self,
            manifest,
            store: store.clone(),
            backfill: &backfill,
            ctx,
            tape: &start.tape,
            names: names.clone(),
            switch: &switch,
            space: &space,
            reembed_waited: switch.reembed == 0,
            events,
            events_path,
            llm,
            llm_path: llm_path.clone(),
            bar: &bar,
            degraded: Degraded::default(),
            phase_time: [Duration::ZERO; PHASES.len()],
            persist_time: [Duration::ZERO; PERSIST_PARTS.len()],
            recall_time: Duration::ZERO,
            recalls: 0,
            tick_barrier: Duration::ZERO,
            barrier_timeout: Duration::from_millis(scenario.memory.barrier_timeout_ms),
            guard: crate::preflight::MemoryGuard::new(scenario),
        };
        let loop_started = Instant::now();
        let stopped_at = crate::engine::drive(&mut sim, first_tick, scenario.ticks, &mut driver)?;
        if let (Some(w), Some(next)) = (watch, stopped_at) {
            w.stopped_at.set(Some(next));
        }
        let Runner {
            mut degraded,
            phase_time,
            persist_time,
            recall_time,
            recalls,
            ..
        } = driver;
        let loop_time = loop_started.elapsed();
        bar.finish_and_clear();

        let drain_started = Instant::now();
        let through = store.written_through();
        let drained = runtime.block_on(backfill.wait_embedded_through(
            through,
            Duration::from_millis(scenario.memory.drain_timeout_ms),
        ));
        refused(&backfill)?;
        let worker = runtime.block_on(backfill.shutdown());
        let reembed_time = reembed_clock.and_then(|clock| {
            // Finished by now if the drain reached the watermark; never wait past it.
            runtime
                .block_on(async { tokio::time::timeout(Duration::from_secs(1), clock).await })
                .ok()
                .and_then(Result::ok)
                .flatten()
        });
        if !drained {
            tracing::warn!(
                "the embedding worker did not drain in time; some memories stay unembedded"
            );
        }
        degraded.embed_retries = worker.failures;
        let drain_ms = drain_started.elapsed().as_secs_f64() * 1000.0;

        // Brain figures from the whole tape: a resumed run counts what happened before
        // the interruption too.
        let tape = Tape::read(&llm_path)?;
        let mut tallies: BTreeMap<String, BrainTally> = BTreeMap::new();
        for call in tape.calls(&names) {
            tallies.entry(call.brain.clone()).or_default().add(call);
            degraded.recall_failures += u64::from(call.recall_failed);
            degraded.brain_failures += u64::from(call.outcome == CallOutcome::Failed);
            degraded.fallbacks += u64::from(call.outcome == CallOutcome::Fallback);
            degraded.reflection_failures += u64::from(
                call.reflection
                    .as_ref()
                    .is_some_and(|r| r.outcome == CallOutcome::Failed),
            );
        }
        let stats = runtime.block_on(store.stats())?;
        let roster_names = sim.names().to_vec();
        let ticks_run = scenario.ticks - first_tick;
        let summary = Summary {
            scenario: scenario.name.clone(),
            seed: manifest.seed_at(0),
            ticks: scenario.ticks,
            facts: summary::facts(sim.facts(), &roster_names),
            memories: stats,
            degraded,
            brains: tallies
                .into_iter()
                .map(|(name, t)| (name, t.finish()))
                .collect(),
            embedder: EmbedderStats {
                model: embedder_model,
                cache_hits: cache.as_ref().map_or(0, |c| c.counts().0),
                cache_misses: cache.as_ref().map_or(0, |c| c.counts().1),
                reembed: switch
                    .changed()
                    .then(|| Reembed::new(&switch, reembed_time)),
            },
            npcs: roster_names.len(),
            store: manifest.store.clone(),
            run_dir: dir.display().to_string(),
            timing: Timing {
                wall_ms: started.elapsed().as_secs_f64() * 1000.0,
                ticks_per_second: ticks_run as f64 / loop_time.as_secs_f64().max(1e-9),
                phases_ms: PHASES
                    .iter()
                    .zip(phase_time)
                    .chain(PERSIST_PARTS.iter().zip(persist_time))
                    .map(|(name, d)| ((*name).to_owned(), d.as_secs_f64() * 1000.0))
                    .collect(),
                drain_ms,
                recall_us_per_npc: if recalls == 0 {
                    0.0
                } else {
                    recall_time.as_secs_f64() * 1e6 / recalls as f64
                },
                recall_bytes_scanned: store.bytes_scanned(),
                recall_gb_per_s: store.bytes_scanned() as f64
                    / recall_time.as_secs_f64().max(1e-9)
                    / 1e9,
                peak_rss_mib: summary::peak_rss_mib(),
            },
            expectations: Vec::new(),
        };
        if watch.is_some_and(|w| w.stopped_at.get().is_some()) {
            // Stopped early: like a crash, minus the crash; `resume` finishes it.
            return Ok(summary);
        }
        finish(dir, scenario, summary)
    }
}

/// The engine loop's driver for a run (fresh, resumed or forked): brains decide (or the
/// tape, for ticks decided before an interruption), the store and the logs record.
struct Runner<'a, S: Store> {
    engine: &'a Engine<'a>,
    manifest: &'a RunManifest,
    store: Arc<S>,
    backfill: &'a Backfill,
    ctx: Arc<ThinkContext<S>>,
    /// Ticks decided before an interruption (a resumed or forked run).
    tape: &'a Tape,
    names: Vec<String>,
    switch: &'a SpaceSwitch,
    space: &'a VectorSpace,
    /// Whether the first new tick waited for the re-embedding (or there was none).
    reembed_waited: bool,
    events: BufWriter<File>,
    events_path: PathBuf,
    llm: BufWriter<File>,
    llm_path: PathBuf,
    bar: &'a ProgressBar,
    degraded: Degraded,
    phase_time: [Duration; PHASES.len()],
    persist_time: [Duration; PERSIST_PARTS.len()],
    recall_time: Duration,
    recalls: u64,
    /// The barrier's share of the tick being run.
    tick_barrier: Duration,
    barrier_timeout: Duration,
    guard: crate::preflight::MemoryGuard,
}

impl<S: Store> Runner<'_, S> {
    /// Under `barrier`: waits until every memory written so far is embedded (and, the
    /// first time after a change of vector space, re-embedded). Returns how long it took.
    fn barrier(&mut self, tick: u64) -> Result<Duration, RunError> {
        let started = Instant::now();
        let Engine {
            runtime,
            scenario,
            dir,
            ..
        } = *self.engine;
        if scenario.memory.visibility != Visibility::Barrier {
            return Ok(Duration::ZERO);
        }
        if !self.reembed_waited {
            // No new tick recalls before every memory is in the new space: wait as long
            // as the worker makes progress.
            self.reembed_waited = true;
            if !wait_reembedded(
                runtime,
                self.backfill,
                self.switch,
                self.space,
                self.barrier_timeout,
                self.bar,
            )? {
                self.degraded.barrier_timeouts += 1;
            }
        }
        let through = self.store.written_through();
        if !runtime.block_on(
            self.backfill
                .wait_embedded_through(through, self.barrier_timeout),
        ) {
            if self.backfill.progress().disk_full {
                // Nothing will be embedded until space is freed: stop now, with every
                // committed tick intact, rather than wait.
                return Err(RunError::Io {
                    path: dir.join(MEMORIES_FILE),
                    source: std::io::Error::from(std::io::ErrorKind::StorageFull),
                });
            }
            self.degraded.barrier_timeouts += 1;
            tracing::warn!(
                tick,
                "embedding barrier timed out; recalling what is embedded so far"
            );
        }
        Ok(started.elapsed())
    }
}

impl<S: Store> crate::engine::TickDriver for Runner<'_, S> {
    type Stop = RunError;

    fn begin(&mut self, tick: u64, _sim: &mut Sim) -> Result<(), RunError> {
        if let Some(available) = self.guard.low(tick) {
            // Between two ticks, everything before committed: `resume` goes on from here.
            return Err(RunError::MemoryLow {
                tick,
                available,
                reserve: self.guard.reserve,
            });
        }
        Ok(())
    }

    fn seed(&self, tick: u64) -> u64 {
        self.manifest.seed_at(tick)
    }

    fn forget_due(&mut self, tick: u64) -> Vec<hearsay_memory::Forgotten> {
        // A pop from the store's schedule, not a scan.
        self.store.forget_due(tick)
    }

    fn think(
        &mut self,
        tick: u64,
        seed: u64,
        perceived: hearsay_core::Perceived,
    ) -> Result<BTreeMap<NpcId, Thought>, RunError> {
        let runtime = self.engine.runtime;
        // Who reflects this tick, on which memories (texts from the store's metadata).
        let due: Vec<_> = perceived
            .reflections_due
            .into_iter()
            .map(|(npc, ids)| (npc, self.store.memories(&ids)))
            .collect();
        let taped = self.tape.complete_tick(tick, &self.names);
        show_reembedding(self.bar, self.backfill, self.switch, self.space);
        let barrier = if taped.is_none() {
            self.barrier(tick)?
        } else {
            Duration::ZERO
        };
        let decided_before = taped.is_some();
        let thoughts: Vec<(NpcId, Thought, BrainCall)> = match taped {
            // Decided before the interruption: the same decisions, the same recalls.
            Some(calls) => perceived
                .observations
                .iter()
                .filter_map(|o| {
                    calls
                        .get(&self.names[o.npc.index()])
                        .map(|c| (o.npc, thought_from(c), c.clone()))
                })
                .collect(),
            None => runtime
                .block_on(think_all(
                    self.ctx.clone(),
                    seed,
                    perceived.observations,
                    due,
                ))
                .0
                .into_iter()
                .map(|t| {
                    self.recall_time += t.recall_time;
                    self.recalls += 1;
                    (t.npc, t.thought, t.call)
                })
                .collect(),
        };
        // A tick decided before (a resumed or forked run) is on the tape already.
        if !decided_before {
            for (_, _, call) in &thoughts {
                self.llm
                    .write_all(tape_line(call).as_bytes())
                    .and_then(|()| self.llm.write_all(b"\n"))
                    .map_err(io_err(&self.llm_path))?;
            }
        }
        // Decided before acting: on a crash, what was decided is on the tape.
        self.llm.flush().map_err(io_err(&self.llm_path))?;
        self.tick_barrier = barrier;
        Ok(thoughts.into_iter().map(|(npc, t, _)| (npc, t)).collect())
    }

    fn record(
        &mut self,
        tick: u64,
        acted: hearsay_core::Acted,
        recalled: Vec<hearsay_core::MemoryId>,
        archived: Vec<hearsay_memory::Forgotten>,
        sim: &Sim,
        times: crate::engine::PhaseTimes,
    ) -> Result<ControlFlow<()>, RunError> {
        let Engine {
            runtime,
            scenario,
            dir,
            watch,
            ..
        } = *self.engine;
        let t4 = Instant::now();
        for line in &acted.log.lines {
            self.events
                .write_all(line.as_bytes())
                .and_then(|()| self.events.write_all(b"\n"))
                .map_err(io_err(&self.events_path))?;
        }
        self.events.flush().map_err(io_err(&self.events_path))?;
        let t4_log = Instant::now();
        let next_tick = tick + 1;
        let every = scenario.checkpoint_every;
        let checkpoint = (every > 0
            && (next_tick.is_multiple_of(every) || next_tick == scenario.ticks))
            .then_some(())
            .map(|()| {
                serde_json::to_string(&sim.capture(next_tick))
                    .map(|state| SavedCheckpoint { next_tick, state })
                    .map_err(|e| RunError::RunDir {
                        path: dir.join(MEMORIES_FILE),
                        problem: format!("cannot encode the checkpoint after tick {tick}: {e}"),
                    })
            })
            .transpose()?;
        let t4_checkpoint = Instant::now();
        runtime.block_on(self.store.write_tick(TickWrite {
            tick,
            memories: acted.memories,
            recalled,
            archived: archived.iter().map(|f| f.id).collect(),
            checkpoint,
        }))?;
        self.backfill.wake();
        refused(self.backfill)?;
        let t5 = Instant::now();

        // Phases as `summary.json` names them; the barrier is part of the driver's think.
        for (slot, d) in self.phase_time.iter_mut().zip([
            times.perceive,
            self.tick_barrier,
            times.think.saturating_sub(self.tick_barrier),
            times.act,
            t5 - t4,
        ]) {
            *slot += d;
        }
        for (slot, d) in self.persist_time.iter_mut().zip([
            t4_log - t4,
            t4_checkpoint - t4_log,
            t5 - t4_checkpoint,
        ]) {
            *slot += d;
        }
        self.bar.inc(1);
        if let Some(w) = watch
            && (w.observer.borrow_mut())(tick, &acted.log.lines).is_break()
        {
            return Ok(ControlFlow::Break(()));
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// How the scenario's backfill worker batches: the same for a run and for memories added
/// to it later ([`crate::annex`]).
pub(crate) fn backfill_config(scenario: &Scenario) -> BackfillConfig {
    BackfillConfig {
        batch_size: scenario.memory.batch_size,
        concurrency: scenario.memory.embed_concurrency,
        chunking: scenario.memory.chunking,
        ..BackfillConfig::default()
    }
}

/// Says on stderr what a change of vector space did, before the first tick.
fn announce_switch(switch: &SpaceSwitch, space: &VectorSpace) {
    if !switch.changed() {
        return;
    }
    let from: Vec<String> = switch
        .retired
        .iter()
        .map(|(model, n)| format!("{n} of {model:?}"))
        .collect();
    let mut line = format!("vector space: {space}");
    if !from.is_empty() {
        line.push_str(&format!(
            "; vectors set aside (kept, out of recall): {}",
            from.join(", ")
        ));
    }
    if switch.restored > 0 {
        line.push_str(&format!(
            "; {} memories have their earlier vectors of this model back",
            switch.restored
        ));
    }
    if switch.reembed > 0 {
        line.push_str(&format!("; re-embedding {} memories", switch.reembed));
    }
    crate::notice::say(&line);
}

/// The re-embedding's progress on the bar, until it is done.
fn show_reembedding(
    bar: &ProgressBar,
    backfill: &Backfill,
    switch: &SpaceSwitch,
    space: &VectorSpace,
) {
    if switch.reembed == 0 {
        return;
    }
    let progress = backfill.progress();
    if progress.embedded_through >= switch.pending_through {
        bar.set_message("");
        return;
    }
    // The worker claims the lowest ids first: the memories to re-embed come before any
    // written since.
    bar.set_message(format!(
        "re-embedding with {}: {}/{}",
        space.model,
        progress.embedded.min(switch.pending),
        switch.pending
    ));
}

/// Waits until every memory written before the switch is embedded in the new space, as
/// long as the worker keeps making progress (a stall of `stall` ends the wait: recall
/// then uses what is embedded so far, counted as a barrier timeout). Returns whether it
/// finished.
fn wait_reembedded(
    runtime: &tokio::runtime::Runtime,
    backfill: &Backfill,
    switch: &SpaceSwitch,
    space: &VectorSpace,
    stall: Duration,
    bar: &ProgressBar,
) -> Result<bool, RunError> {
    let slice = stall.min(Duration::from_millis(250));
    let mut last = backfill.progress().embedded;
    let mut still = Duration::ZERO;
    loop {
        if runtime.block_on(backfill.wait_embedded_through(switch.pending_through, slice)) {
            show_reembedding(bar, backfill, switch, space);
            return Ok(true);
        }
        refused(backfill)?;
        let progress = backfill.progress();
        if progress.disk_full {
            // The barrier that follows stops the run.
            return Ok(false);
        }
        show_reembedding(bar, backfill, switch, space);
        if progress.embedded == last {
            still += slice;
            if still >= stall {
                tracing::warn!(
                    "re-embedding made no progress for {} ms; recalling what is embedded so far",
                    stall.as_millis()
                );
                return Ok(false);
            }
        } else {
            last = progress.embedded;
            still = Duration::ZERO;
        }
    }
}

/// Stops the run if the store refused the embedder's vectors (another vector space).
fn refused(backfill: &Backfill) -> Result<(), RunError> {
    match backfill.refusal() {
        Some(why) => Err(RunError::Store(StoreError::Space(why))),
        None => Ok(()),
    }
}

/// Ends a run: judges the scenario's expectations on its story, writes `summary.json`
/// and `report.html`.
fn finish(dir: &Path, scenario: &Scenario, mut summary: Summary) -> Result<Summary, RunError> {
    let report_started = Instant::now();
    let story = crate::story::Story::read(dir, scenario)?;
    summary.expectations = crate::expect::judge(&scenario.expectations, &story);
    let summary_path = dir.join(SUMMARY_FILE);
    let json = serde_json::to_string_pretty(&summary).map_err(|e| RunError::RunDir {
        path: summary_path.clone(),
        problem: format!("cannot encode the summary: {e}"),
    })?;
    rundir::write_file(&summary_path, (json + "\n").as_bytes())?;
    let written = crate::report::write(
        &crate::report::ReportInput {
            dir,
            scenario,
            summary: Some(&summary),
        },
        &story,
        &dir.join(crate::report::REPORT_FILE),
        report_started,
    )?;
    tracing::info!(
        bytes = written.bytes,
        seconds = written.seconds,
        "wrote {}",
        written.path.display()
    );
    Ok(summary)
}

/// The thought a tape entry records: the decision, the recalls, how it went.
pub fn thought_from(call: &BrainCall) -> Thought {
    Thought {
        decision: call.decision.clone(),
        recalled: call.recalled.clone(),
        recall_failed: call.recall_failed,
        brain_failed: call.outcome == CallOutcome::Failed,
        reflection: call.reflection.as_ref().map(|r| r.insights.clone()),
    }
}
