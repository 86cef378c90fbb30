//! The tick loop: Perceive (kernel) → barrier → Think (async) → Act (kernel) → persist.
//!
//! The world lives on the calling thread. Async work (embedding, recall, brains, store
//! writes) runs on a tokio runtime; the embedding backfill worker is a task on that
//! runtime's worker threads, never on this one.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearsay_brain::request::KnownPlace;
use hearsay_core::resources::{MemoryLedger, Observations, Roster, TickLog};
use hearsay_core::{Decisions, FactBook, SimAct, SimClock, SimPerceive, build_world};
use hearsay_memory::{
    Backfill, BackfillConfig, CachedEmbedder, Embedder, PgOptions, PgStore, SqliteStore, Store,
    TickWrite,
};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::Semaphore;

use crate::RunError;
use crate::providers;
use crate::rundir::{self, EVENTS_FILE, LLM_FILE, MEMORIES_FILE, SCENARIO_FILE, SUMMARY_FILE};
use crate::scenario::raw::{StoreKind, Visibility};
use crate::scenario::{self, Scenario};
use crate::summary::{self, BrainTally, Degraded, EmbedderStats, StoreInfo, Summary, Timing};
use crate::think::{BrainSlot, ThinkContext, think_all};

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
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct RunOutcome {
    /// Where it was written.
    pub dir: PathBuf,
    /// What `summary.json` holds.
    pub summary: Summary,
}

/// Runs a scenario headless, start to finish.
pub fn run(opts: &RunOptions) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    let (mut scenario, bytes) = scenario::load(&opts.scenario)?;
    if let Some(seed) = opts.seed {
        scenario.seed = seed;
    }
    if let Some(ticks) = opts.ticks {
        if ticks == 0 || ticks > scenario::TICKS_MAX {
            return Err(RunError::BadOption(format!(
                "--ticks {ticks}: must be 1..={}",
                scenario::TICKS_MAX
            )));
        }
        scenario.ticks = ticks;
    }
    let dir = opts
        .out
        .clone()
        .unwrap_or_else(|| rundir::default_dir(&scenario.name, scenario.seed));
    // Keys and clients before anything touches the disk: a missing key refuses the run.
    let keys = providers::load_keys(&scenario)?;
    let parts = Parts::build(&scenario, &keys)?;
    let database_url = match scenario.memory.store {
        StoreKind::Postgres => Some(opts.database_url.clone().ok_or(RunError::NoDatabaseUrl)?),
        StoreKind::Sqlite => None,
    };
    rundir::prepare(&dir, opts.force)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::thread::available_parallelism()
                .map_or(2, |n| n.get())
                .max(2),
        )
        .thread_name("hearsay-async")
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;

    // The database, too, before the run directory: an unreachable server or a missing
    // extension refuses the run with nothing left behind.
    let pg_options = PgOptions::default();
    let pg_pool = match &database_url {
        Some(url) => Some(runtime.block_on(hearsay_memory::postgres::connect(url, &pg_options))?),
        None => None,
    };

    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| RunError::Io { path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let scenario_copy = dir.join(SCENARIO_FILE);
    std::fs::write(&scenario_copy, &bytes).map_err(io(&scenario_copy))?;

    let names: Vec<String> = scenario.npcs.iter().map(|n| n.name.clone()).collect();
    let setup = |store_info| RunSetup {
        scenario: &scenario,
        dir: &dir,
        progress: opts.progress,
        started,
        store_info,
    };
    let summary = match scenario.memory.store {
        StoreKind::Sqlite => {
            let db = dir.join(MEMORIES_FILE);
            let store = match runtime.block_on(SqliteStore::create(&db, names)) {
                Ok(store) => Arc::new(store),
                Err(e) => {
                    // Nothing has run yet: leave no half-made run directory behind.
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(e.into());
                }
            };
            runtime.block_on(store.set_meta("scenario", &scenario.name))?;
            runtime.block_on(store.set_meta("seed", &scenario.seed.to_string()))?;
            let info = StoreInfo {
                backend: "sqlite".into(),
                run_id: None,
            };
            run_on(&runtime, store, parts, setup(info))?
        }
        StoreKind::Postgres => {
            let Some(pool) = pg_pool else {
                return Err(RunError::NoDatabaseUrl);
            };
            let text = String::from_utf8_lossy(&bytes);
            let store = match runtime.block_on(PgStore::create_run(
                pool,
                pg_options,
                &scenario.name,
                scenario.seed,
                &text,
                names,
            )) {
                Ok(store) => Arc::new(store),
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(e.into());
                }
            };
            let info = StoreInfo {
                backend: "postgres".into(),
                run_id: Some(store.run_id()),
            };
            run_on(&runtime, store, parts, setup(info))?
        }
    };
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(RunOutcome { dir, summary })
}

/// The brains and the embedder of a run, built before the run directory exists.
struct Parts {
    brains: Vec<BrainSlot>,
    embedder: Arc<dyn Embedder>,
    cache: Option<Arc<CachedEmbedder>>,
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
        Ok(Parts {
            brains,
            embedder,
            cache,
        })
    }
}

/// Phase names in `summary.json`'s `timing.phases_ms`.
const PHASES: [&str; 5] = ["perceive", "barrier", "think", "act", "persist"];

/// Simulates on `store`, then closes it whatever happened.
fn run_on<S: Store>(
    runtime: &tokio::runtime::Runtime,
    store: Arc<S>,
    parts: Parts,
    setup: RunSetup<'_>,
) -> Result<Summary, RunError> {
    let result = simulate(runtime, store.clone(), parts, setup);
    runtime.block_on(store.close());
    result
}

/// What a run needs besides its store and its brains.
struct RunSetup<'a> {
    scenario: &'a Scenario,
    dir: &'a Path,
    progress: bool,
    started: Instant,
    store_info: StoreInfo,
}

fn simulate<S: Store>(
    runtime: &tokio::runtime::Runtime,
    store: Arc<S>,
    parts: Parts,
    setup: RunSetup<'_>,
) -> Result<Summary, RunError> {
    let RunSetup {
        scenario,
        dir,
        progress,
        started,
        store_info,
    } = setup;
    let Parts {
        brains,
        embedder,
        cache,
    } = parts;
    let embedder_model = embedder.model().to_owned();
    let backfill = Backfill::spawn(
        runtime.handle(),
        store.clone(),
        embedder.clone(),
        BackfillConfig {
            batch_size: scenario.memory.batch_size,
            concurrency: scenario.memory.embed_concurrency,
            ..BackfillConfig::default()
        },
    );

    let mut world = build_world(scenario.world_setup());
    let seeds = std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending);
    runtime.block_on(store.write_tick(TickWrite {
        tick: 0,
        memories: seeds,
        recalled: Vec::new(),
    }))?;
    backfill.wake();

    let brain_names: Vec<&String> = scenario.brains.keys().collect();
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
        personas: scenario.npcs.iter().map(|n| n.persona.clone()).collect(),
        names: world.resource::<Roster>().names.clone(),
        seed: scenario.seed,
        language: scenario.language,
        grid: scenario.grid,
        places: scenario
            .places
            .iter()
            .map(|p| KnownPlace {
                name: p.name.clone(),
                at: p.at,
            })
            .collect(),
        recall_k: scenario.memory.recall_k,
        scoring: scenario.memory.scoring,
    });

    let events_path = dir.join(EVENTS_FILE);
    let llm_path = dir.join(LLM_FILE);
    let open = |path: &Path| {
        File::create(path)
            .map(|f| BufWriter::with_capacity(1 << 16, f))
            .map_err(|source| RunError::Io {
                path: path.to_owned(),
                source,
            })
    };
    let mut events = open(&events_path)?;
    let mut llm = open(&llm_path)?;
    let write_err = |path: &Path| {
        let path = path.to_owned();
        move |source| RunError::Io { path, source }
    };

    let bar = if progress {
        let bar = ProgressBar::new(scenario.ticks);
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix} tick {pos}/{len} [{bar:32}] {elapsed_precise} eta {eta}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(scenario.name.clone());
        bar
    } else {
        ProgressBar::hidden()
    };

    let mut degraded = Degraded::default();
    let mut tallies: BTreeMap<String, BrainTally> = BTreeMap::new();
    let mut phase_time = [Duration::ZERO; PHASES.len()];
    let barrier_timeout = Duration::from_millis(scenario.memory.barrier_timeout_ms);
    let loop_started = Instant::now();
    for tick in 0..scenario.ticks {
        let _span = tracing::debug_span!("tick", tick).entered();
        let t0 = Instant::now();
        world.resource_mut::<SimClock>().tick = tick;
        world.run_schedule(SimPerceive);
        let observations = std::mem::take(&mut world.resource_mut::<Observations>().0);

        let t1 = Instant::now();
        if scenario.memory.visibility == Visibility::Barrier {
            let through = store.written_through();
            if !runtime.block_on(backfill.wait_embedded_through(through, barrier_timeout)) {
                degraded.barrier_timeouts += 1;
                tracing::warn!(
                    tick,
                    "embedding barrier timed out; recalling what is embedded so far"
                );
            }
        }

        let t2 = Instant::now();
        let (thoughts, counts) = runtime.block_on(think_all(ctx.clone(), observations));
        degraded.recall_failures += counts.recall_failures;
        degraded.brain_failures += counts.brain_failures;
        degraded.fallbacks += counts.fallbacks;
        let mut recalled: Vec<_> = thoughts
            .iter()
            .flat_map(|t| t.thought.recalled.iter().copied())
            .collect();
        recalled.sort_unstable();
        recalled.dedup();
        for t in &thoughts {
            tallies
                .entry(t.call.brain.clone())
                .or_default()
                .add(&t.call);
            let line = serde_json::to_string(&t.call).unwrap_or_default();
            llm.write_all(line.as_bytes())
                .and_then(|()| llm.write_all(b"\n"))
                .map_err(write_err(&llm_path))?;
        }
        world.insert_resource(Decisions(
            thoughts.into_iter().map(|t| (t.npc, t.thought)).collect(),
        ));

        let t3 = Instant::now();
        world.run_schedule(SimAct);

        let t4 = Instant::now();
        let log = std::mem::take(&mut *world.resource_mut::<TickLog>());
        for line in &log.lines {
            events
                .write_all(line.as_bytes())
                .and_then(|()| events.write_all(b"\n"))
                .map_err(write_err(&events_path))?;
        }
        events.flush().map_err(write_err(&events_path))?;
        let memories = std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending);
        runtime.block_on(store.write_tick(TickWrite {
            tick,
            memories,
            recalled,
        }))?;
        backfill.wake();
        let t5 = Instant::now();

        for (slot, (a, b)) in
            phase_time
                .iter_mut()
                .zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)])
        {
            *slot += b - a;
        }
        bar.inc(1);
    }
    let loop_time = loop_started.elapsed();
    llm.flush().map_err(write_err(&llm_path))?;
    bar.finish_and_clear();

    let drain_started = Instant::now();
    let through = store.written_through();
    let drained = runtime.block_on(backfill.wait_embedded_through(
        through,
        Duration::from_millis(scenario.memory.drain_timeout_ms),
    ));
    let worker = runtime.block_on(backfill.shutdown());
    if !drained {
        tracing::warn!("the embedding worker did not drain in time; some memories stay unembedded");
    }
    degraded.embed_retries = worker.failures;
    let drain_ms = drain_started.elapsed().as_secs_f64() * 1000.0;

    let stats = runtime.block_on(store.stats())?;
    let names = world.resource::<Roster>().names.clone();
    let summary = Summary {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        ticks: scenario.ticks,
        facts: summary::facts(world.resource::<FactBook>(), &names),
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
        },
        npcs: names.len(),
        store: store_info,
        run_dir: dir.display().to_string(),
        timing: Timing {
            wall_ms: started.elapsed().as_secs_f64() * 1000.0,
            ticks_per_second: scenario.ticks as f64 / loop_time.as_secs_f64().max(1e-9),
            phases_ms: PHASES
                .iter()
                .zip(phase_time)
                .map(|(name, d)| ((*name).to_owned(), d.as_secs_f64() * 1000.0))
                .collect(),
            drain_ms,
        },
    };
    let summary_path = dir.join(SUMMARY_FILE);
    let json = serde_json::to_string_pretty(&summary).unwrap_or_default();
    std::fs::write(&summary_path, json + "\n").map_err(write_err(&summary_path))?;
    Ok(summary)
}
