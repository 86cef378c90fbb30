//! Starting a run: a new one from a scenario, one continued after a stop, or one
//! branched off another at a tick — each checks what it was given, opens or creates the
//! store (one [`AnyStore`], whichever backend) and hands it to the engine.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearsay_core::checkpoint::Checkpoint;
use hearsay_memory::{AnyStore, PgOptions, PgStore, Rewind, SavedChain, SqliteStore, Store};

use super::options::{ForkOptions, Observer, ResumeOptions, RunOptions, RunOutcome};
use super::runner::{Engine, Parts, Start, Watch};
use crate::RunError;
use crate::logs::{EarlierScenario, Recalls, RunManifest, Tape, TickIndex};
use crate::providers;
use crate::rundir::{
    self, DirKind, DirLock, EVENTS_FILE, LLM_FILE, MEMORIES_FILE, Protected, SCENARIO_FILE,
};
use crate::scenario::raw::StoreKind;
use crate::scenario::{self, Scenario};
use crate::summary::{Backend, StoreInfo};

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
    let pg_options = pg_options(opts.pool_size)?;
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
    let (held, lock) = hold_new_run(&runtime, &store, lock)?;
    let summary = engine.drive(store, parts, &manifest, Start::fresh())?;
    drop(held);
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
    options: PgOptions,
    scenario_bytes: &[u8],
    names: &[String],
    purpose: Opened,
) -> Result<AnyStore, RunError> {
    Ok(match manifest.store.backend {
        Backend::Postgres => {
            let url = database_url.ok_or(RunError::NoDatabaseUrl)?;
            let run_id = manifest.store.run_id.ok_or_else(|| RunError::RunDir {
                path: dir.join(rundir::MANIFEST_FILE),
                problem: "a PostgreSQL run without a run_id".into(),
            })?;
            let pool = hearsay_memory::postgres::connect(url, &options).await?;
            crate::source::check_pg_run(&pool, run_id, dir, scenario_bytes, names).await?;
            PgStore::attach(pool, options, run_id, names.to_vec())
                .await?
                .into()
        }
        Backend::Sqlite => {
            let path = dir.join(MEMORIES_FILE);
            match purpose {
                Opened::ToRewind => SqliteStore::open_to_rewind(&path, names.to_vec()).await?,
                Opened::ToCopy => SqliteStore::open_checked_unloaded(&path, names.to_vec()).await?,
            }
            .into()
        }
    })
}

/// What an earlier run's SQLite store is opened for. Neither loads it: a resume's rewind
/// loads it once, and a fork reads its checkpoints and copies its file.
#[derive(Clone, Copy)]
enum Opened {
    /// A resume: rewound to its last checkpoint, then run on.
    ToRewind,
    /// A fork's source: read and copied, never written.
    ToCopy,
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
            let store = SqliteStore::open_to_rewind(&path, names.to_vec()).await?;
            store.rewind(rewind.clone()).await?;
            store.into()
        }
        AnyStore::Postgres(r) => PgStore::fork(
            r.pool().clone(),
            r.options().clone(),
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

/// Holds a PostgreSQL run as its one writer while the value lives (see
/// [`hearsay_memory::postgres::RunLock`]); nothing for SQLite, whose run directory's lock
/// does the same.
pub(crate) async fn hold_as_writer(
    store: &AnyStore,
) -> Result<Option<hearsay_memory::postgres::RunLock>, RunError> {
    let AnyStore::Postgres(pg) = store else {
        return Ok(None);
    };
    use hearsay_memory::postgres::{RunHolder, RunLock};
    match RunLock::try_take(pg.pool(), pg.run_id(), RunHolder::Writer).await? {
        Some(lock) => {
            // Alone with the run: its writes can be queued, and its backfill claim from
            // the ledger.
            pg.queue_writes();
            Ok(Some(lock))
        }
        None => Err(RunError::Refused(format!(
            "run {} in PostgreSQL is in use by another process (its writer, or `hearsay backfill`); \
             wait until it ends",
            pg.run_id()
        ))),
    }
}

/// [`hold_as_writer`] for a run that has not ticked yet (`run`, `fork`): refused, its
/// store is closed and its directory's claim undone.
fn hold_new_run(
    runtime: &tokio::runtime::Runtime,
    store: &AnyStore,
    lock: DirLock,
) -> Result<(Option<hearsay_memory::postgres::RunLock>, DirLock), RunError> {
    let held = runtime.block_on(hold_as_writer(store));
    if held.is_err() {
        runtime.block_on(store.close());
    }
    lock.or_abandon(held)
}

/// The fewest connections a run's PostgreSQL pool may have: the writer's queue holds one
/// for a transaction while the backfill asks the pool once more (the store's vector
/// space); a `hearsay backfill` helper saves a batch in its claim's transaction while it
/// does the same.
pub const RUN_CONNECTIONS_MIN: u32 = 2;

/// The most connections a run's pool may have.
pub const RUN_CONNECTIONS_MAX: u32 = 1024;

/// The PostgreSQL options of a run whose pool is `pool_size` connections (default 16).
pub(crate) fn pg_options(pool_size: Option<u32>) -> Result<PgOptions, RunError> {
    let defaults = PgOptions::default();
    let max_connections = pool_size.unwrap_or(defaults.max_connections);
    if !(RUN_CONNECTIONS_MIN..=RUN_CONNECTIONS_MAX).contains(&max_connections) {
        return Err(RunError::BadOption(format!(
            "--pool-size {max_connections}: a run needs {RUN_CONNECTIONS_MIN}..={RUN_CONNECTIONS_MAX} connections"
        )));
    }
    Ok(PgOptions {
        max_connections,
        ..defaults
    })
}

pub(crate) fn database_url_for(
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

/// The tick a finished SQLite run's store says it would resume from, told without
/// loading the store: a finished run is refused before the tens of seconds a big town's
/// store takes to load (every vector indexed), and before its servers are asked anything.
/// The last checkpoint is read first, after the store's light checks (header, schema), so
/// a run that has ticks left pays nothing more than that before its full open. Only a run
/// that looks finished then gets the full open's checks of the store (every page) and the
/// full resume's of its log ([`super::runner::log_to_resume`]), so a damaged run is not
/// called finished. `None` for a run that is not finished, a PostgreSQL run, or any
/// problem: the full resume then decides, and reports a problem as it always did.
async fn finished_at(dir: &Path, manifest: &RunManifest, names: &[String]) -> Option<u64> {
    if manifest.store.backend != Backend::Sqlite {
        return None;
    }
    let path = dir.join(MEMORIES_FILE);
    let last_checkpoint = async |store: SqliteStore| {
        let saved = store.latest_checkpoint(None).await;
        store.close().await;
        let chain = saved.ok()??;
        crate::source::assemble(dir, &chain).ok()
    };
    let store = SqliteStore::open_unloaded(&path, names.to_vec())
        .await
        .ok()?;
    if last_checkpoint(store).await?.next_tick < manifest.ticks {
        return None;
    }
    let store = SqliteStore::open_checked_unloaded(&path, names.to_vec())
        .await
        .ok()?;
    let checkpoint = last_checkpoint(store).await?;
    super::runner::log_to_resume(dir, Some(&checkpoint)).ok()?;
    (checkpoint.next_tick >= manifest.ticks).then_some(checkpoint.next_tick)
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
    let names: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
    if let Some(next_tick) = runtime.block_on(finished_at(dir, &manifest, &names)) {
        return Err(super::runner::complete(dir, next_tick, manifest.ticks));
    }
    runtime.block_on(providers::check_reachable(&scenario, &keys))?;
    preflight_servers(&runtime, &scenario, &mut parts, opts.no_preflight)?;
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
        pg_options(opts.pool_size)?,
        &scenario_bytes,
        &names,
        Opened::ToRewind,
    ))?);
    let held = runtime.block_on(hold_as_writer(&store));
    let resumed = held.and_then(|held| {
        let resumed = engine.resume_on(store.clone(), parts, &manifest);
        drop(held);
        resumed
    });
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
    // The source's log, checked whole and read in passes, its text never held: here
    // for the ticks it completed and where its file's blocks end (what the copy of the
    // ticks before the checkpoint copies, byte for byte), later for the recall state
    // before that checkpoint.
    let source_events = source.join(EVENTS_FILE);
    let source_read = TickIndex::read(&source_events, None, |_, _, _| Ok(()))?;
    let completed = source_read.completed();
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
        |checkpoint: Option<&SavedChain>| -> Result<(Option<Checkpoint>, Rewind), RunError> {
            // The ticks from a checkpoint before the fork tick run again from the tape, under
            // the scenario they first ran with (the stage kept in run.json); the edit takes
            // over at the fork tick. Its windows are filled from the new run's store once
            // that is rewound (and so loaded); the source's is never loaded.
            let parsed = checkpoint
                .map(|c| crate::source::assemble(source, c))
                .transpose()?;
            let next_tick = parsed.as_ref().map_or(0, |c| c.next_tick);
            let recalls = Recalls::of_log(&source_events, next_tick)?;
            let rewind = super::runner::rewind_to(recalls, parsed.as_ref());
            Ok((parsed, rewind))
        };
    // The new run's logs start as the source's, byte for byte: its events up to the
    // checkpoint (the ticks after it are run again), its brain calls up to the fork tick
    // (the ticks from the checkpoint on are decided by them).
    // With the brain figures of the ticks before the checkpoint, which are not run again.
    let copy_logs = |next_tick: u64,
                     (source_tape, tallies): (Tape, crate::summary::Tallies)|
     -> Result<(Tape, crate::summary::Tallies), RunError> {
        crate::logs::copy_events_through(
            &source_events,
            &source_read,
            &out.join(EVENTS_FILE),
            next_tick,
        )?;
        source_tape.write_before(&out.join(LLM_FILE), opts.at_tick)?;
        Ok((source_tape.into_range(next_tick, opts.at_tick), tallies))
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
        pg_options(opts.pool_size)?,
        &source_bytes,
        &names,
        Opened::ToCopy,
    ))?;
    let prepared = runtime
        .block_on(reader.latest_checkpoint(Some(opts.at_tick)))
        .map_err(RunError::from)
        .and_then(|saved| rewound(saved.as_ref()))
        // The tape is read, and its cast checked, before anything is claimed or branched:
        // a tape of another run is refused before a PostgreSQL fork writes a row.
        .and_then(|(checkpoint, rewind)| {
            let tape = super::runner::read_tape_from(
                &source.join(LLM_FILE),
                rewind.next_tick..opts.at_tick,
                &names,
            )?;
            Ok((checkpoint, rewind, tape))
        })
        .and_then(|r| Ok((r, target.claim().and_then(claimed)?)));
    let ((checkpoint, rewind, source_tape), lock) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            runtime.block_on(reader.close());
            return Err(e);
        }
    };
    // The logs are copied, and the source's tape (its text, the earlier calls' counts)
    // let go, before the store is branched and loaded: held through the load, they were
    // a 10,000-NPC fork's largest holding beside the store.
    let started_up = copy_logs(rewind.next_tick, source_tape).and_then(|logs| {
        let store = runtime.block_on(branch(
            &reader,
            out,
            (&scenario.name, scenario.seed, &text),
            &names,
            &rewind,
        ))?;
        // The windows' memories are older than the checkpoint: the rewind kept them.
        let checkpoint = checkpoint
            .map(|c| crate::source::fill(source, c, |ids| store.memories(ids), &names))
            .transpose()?;
        new_manifest.store.run_id = store.run_id();
        new_manifest.write(out)?;
        Ok((Arc::new(store), checkpoint, logs))
    });
    if let AnyStore::Sqlite(r) = &reader {
        // A PostgreSQL reader shares its pool with the new run; a SQLite one is done.
        runtime.block_on(r.close());
    }
    let ((store, checkpoint, (tape, tallies)), lock) = lock.or_abandon(started_up)?;
    // The new run's one writer, like `run` and `resume`.
    let (held, lock) = hold_new_run(&runtime, &store, lock)?;
    let summary = engine.drive(
        store,
        parts,
        &new_manifest,
        Start {
            checkpoint,
            tape,
            tallies,
        },
    )?;
    drop(held);
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
        parts.embedder_replicas.as_deref(),
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
        parts.embedder_replicas.as_deref(),
        true,
    ))?;
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(report)
}
