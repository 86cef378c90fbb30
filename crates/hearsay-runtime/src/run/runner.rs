//! The run's side of the engine loop: the brains, the barrier, the store and the logs
//! ([`Runner`], a [`crate::engine::TickDriver`]), and what happens before the first tick
//! (the vector space, the backfill worker) and after the last (the drain, the summary,
//! the report).
//!
//! Over 600 lines because the setup, the driver and the summary share one state (the
//! store, the worker, the tallies) that would otherwise travel through a dozen
//! parameters.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearsay_brain::{BrainCall, CallOutcome};
use hearsay_core::checkpoint::Checkpoint;
use hearsay_core::{NpcId, Sim, Thought};
use hearsay_memory::{
    Backfill, BackfillConfig, CachedEmbedder, Embedder, Rewind, SavedCheckpoint, SpaceSwitch,
    Store, TickWrite, VectorSpace,
};
use indicatif::ProgressBar;

use super::options::Observer;
use super::space::{announce_switch, refused, show_reembedding, wait_reembedded};
use crate::RunError;
use crate::engine::Stages;
use crate::logfile::{BackgroundLog, LogWriter};
use crate::logs::{Recalls, RunManifest, Tape, TickIndex, tape_line};
use crate::providers;
use crate::rundir::{
    self, EVENTS_FILE, LLM_FILE, MANIFEST_FILE, MEMORIES_FILE, SCENARIO_FILE, SUMMARY_FILE,
};
use crate::scenario::Scenario;
use crate::scenario::raw::Visibility;
use crate::summary::{self, Degraded, EmbedderStats, Reembed, Summary, Timing};
use crate::think::{BrainSlot, RequestTemplate, ThinkContext, think_all};

/// The brains and the embedder of a run, built before the run directory exists.
pub(super) struct Parts {
    pub(super) brains: Vec<BrainSlot>,
    pub(super) embedder: Arc<dyn Embedder>,
    pub(super) cache: Option<Arc<CachedEmbedder>>,
    /// The embedder's server replicas, when it is remote.
    pub(super) embedder_replicas: Option<Arc<hearsay_brain::Replicas>>,
    /// The vector space the embedder makes: recall compares nothing else.
    pub(super) space: VectorSpace,
}

impl Parts {
    pub(super) fn build(scenario: &Scenario, keys: &providers::Keys) -> Result<Parts, RunError> {
        let vocabulary = providers::vocabulary(scenario);
        let brains = scenario
            .brains
            .iter()
            .map(|(name, spec)| {
                Ok(BrainSlot::new(
                    name.clone(),
                    providers::brain(spec, &vocabulary, keys)?,
                    spec.slots(),
                ))
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        let built = providers::embedder(
            &scenario.memory.embedder,
            scenario.memory.cache_entries,
            keys,
        )?;
        let space = providers::space_of(&scenario.memory.embedder, built.embedder.model());
        Ok(Parts {
            brains,
            embedder: built.embedder,
            cache: built.cache,
            embedder_replicas: built.replicas,
            space,
        })
    }
}

/// Where a run starts: from scratch, or from a checkpoint, with the decisions of ticks
/// already decided.
pub(super) struct Start {
    pub(super) checkpoint: Option<Checkpoint>,
    pub(super) tape: Tape,
    /// The brain figures of the ticks before the first one this process runs or takes
    /// from `tape` (a resumed or forked run's earlier ticks).
    pub(super) tallies: summary::Tallies,
}

impl Start {
    pub(super) fn fresh() -> Start {
        Start {
            checkpoint: None,
            tape: Tape::default(),
            tallies: summary::Tallies::default(),
        }
    }
}

/// Phase names in `summary.json`'s `timing.phases_ms`.
const PHASES: [&str; 5] = ["perceive", "barrier", "think", "act", "persist"];
/// The parts of `persist`, timed apart: the event log, the checkpoint's capture and
/// encoding, the store's transaction.
const PERSIST_PARTS: [&str; 3] = ["persist.log", "persist.checkpoint", "persist.store"];

/// What a run needs besides its store and its brains.
pub(super) struct Engine<'a> {
    pub(super) runtime: &'a tokio::runtime::Runtime,
    pub(super) scenario: &'a Scenario,
    pub(super) dir: &'a Path,
    pub(super) progress: crate::terminal::Progress,
    pub(super) started: Instant,
    pub(super) watch: Option<&'a Watch>,
}

/// A run's observer and whether it stopped the run.
pub(super) struct Watch {
    pub(super) observer: std::cell::RefCell<Observer>,
    pub(super) stopped_at: std::cell::Cell<Option<u64>>,
}

impl Engine<'_> {
    /// Resumes on `store` from its last checkpoint.
    pub(super) fn resume_on<S: Store>(
        &self,
        store: Arc<S>,
        parts: Parts,
        manifest: &RunManifest,
    ) -> Result<(Summary, u64), RunError> {
        let dir = self.dir;
        let saved = self.runtime.block_on(store.latest_checkpoint(None))?;
        // Its windows are filled once the store is rewound: a store opened to be rewound
        // is loaded by the rewind, not before (`SqliteStore::open_to_rewind`).
        let checkpoint = saved
            .as_ref()
            .map(|c| crate::source::assemble(dir, c))
            .transpose()?;
        let next_tick = checkpoint.as_ref().map_or(0, |c| c.next_tick);
        let (events, recalls, logged) = log_to_resume(dir, checkpoint.as_ref())?;
        if next_tick >= manifest.ticks {
            return Err(complete(dir, next_tick, manifest.ticks));
        }
        let names: Vec<String> = self.scenario.npcs.iter().map(|n| n.name.clone()).collect();
        let llm_path = dir.join(LLM_FILE);
        let (tape, tallies) = read_tape_from(&llm_path, next_tick..u64::MAX, &names)?;
        // Ticks after the checkpoint that were decided in full before the stop are taken
        // from the tape as they are; the logs are cut back, never written again, so every
        // byte written before the stop stays as it was.
        let decided_until = tape.complete_until(next_tick, &names);
        if logged {
            events.cut_back(next_tick)?;
        }
        tape.keep_before(decided_until)?;
        let decided = tape.into_range(next_tick, decided_until);
        self.runtime
            .block_on(store.rewind(rewind_to(recalls, checkpoint.as_ref())))?;
        // The windows' memories are older than the checkpoint: the rewind kept them.
        let checkpoint = checkpoint
            .map(|c| crate::source::fill(dir, c, |ids| store.memories(ids), &names))
            .transpose()?;
        tracing::info!(next_tick, "resuming");
        let summary = self.drive(
            store,
            parts,
            manifest,
            Start {
                checkpoint,
                tape: decided,
                tallies,
            },
        )?;
        Ok((summary, next_tick))
    }

    /// Runs the remaining ticks on `store`, then closes it whatever happened.
    pub(super) fn drive<S: Store>(
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
        mut start: Start,
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
            embedder_replicas,
            space,
        } = parts;
        let embedder_model = embedder.model().to_owned();
        let first_tick = start.checkpoint.as_ref().map_or(0, |c| c.next_tick);
        // A fork's ticks before its fork tick run under the scenario they first ran with.
        let (in_force, stages) = Stages::starting(
            Stages::of_run(manifest, &dir.join(MANIFEST_FILE))?,
            scenario.clone(),
            first_tick,
        );
        // Forgetting before anything is written or recalled: the schedule covers every
        // memory, loaded or new.
        store.set_forgetting(in_force.memory.forgetting);
        // One vector space: a store that holds another model's vectors (a fork or resume
        // with another embedder) sets them aside before the worker starts, and the
        // worker embeds those memories again.
        let switched_at = Instant::now();
        let switch = runtime.block_on(store.use_space(&space))?;
        announce_switch(&switch, &space);
        // Facts by meaning compare memories with their statements' vectors: made now, so
        // an embedder that cannot make them stops the run before tick 0.
        runtime.block_on(crate::spread::embed_statements(
            dir,
            scenario,
            embedder.as_ref(),
        ))?;
        let backfill = Backfill::spawn(
            runtime.handle(),
            store.clone(),
            embedder.clone(),
            backfill_config(scenario),
        );

        let mut sim = match &start.checkpoint {
            Some(c) => Sim::restored(in_force.world_setup(), c).map_err(|e| RunError::RunDir {
                path: dir.to_owned(),
                problem: format!("the checkpoint does not fit the scenario: {e}"),
            })?,
            None => {
                let mut sim = Sim::new(in_force.world_setup());
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
        let names: Vec<String> = template.names.iter().map(|n| n.to_string()).collect();
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
                    scenario.memory.embed_slots(),
                ))
            }),
        });

        let events_path = dir.join(EVENTS_FILE);
        let llm_path = dir.join(LLM_FILE);
        let events = BackgroundLog::new(LogWriter::append(&events_path)?);
        let llm = BackgroundLog::new(LogWriter::append(&llm_path)?);
        // In a run directory of the format before, the plain files.
        let (events_path, llm_path) = (events.path().to_owned(), llm.path().to_owned());

        let bar = crate::terminal::progress_bar(
            progress,
            scenario.ticks,
            "{prefix} tick {pos}/{len} [{bar:32}] {elapsed_precise} eta {eta} {msg}",
        );
        crate::terminal::announce_dir(progress, dir);
        bar.set_prefix(scenario.name.clone());
        bar.set_position(first_tick);

        let mut driver = Runner {
            engine: self,
            manifest,
            store: store.clone(),
            backfill: &backfill,
            ctx,
            tape: std::mem::take(&mut start.tape),
            tallies: std::mem::take(&mut start.tallies),
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
            phase_cpu: [Duration::ZERO; PHASES.len()],
            persist_time: [Duration::ZERO; PERSIST_PARTS.len()],
            recall_time: Duration::ZERO,
            recalls: 0,
            query_ages: summary::QueryAges::default(),
            checkpoint_costs: Vec::new(),
            per_tick: summary::PerTick {
                first_tick,
                ..summary::PerTick::default()
            },
            chain: Chain::default(),
            stages,
            tick_barrier: Duration::ZERO,
            tick_barrier_cpu: Duration::ZERO,
            barrier_timeout: Duration::from_millis(scenario.memory.barrier_timeout_ms),
            guard: crate::preflight::MemoryGuard::new(scenario),
        };
        let loop_started = Instant::now();
        let loop_cpu = summary::process_cpu();
        let loop_waiting = summary::thread_waiting();
        let stopped_at = crate::engine::drive(&mut sim, first_tick, scenario.ticks, &mut driver)?;
        if let (Some(w), Some(next)) = (watch, stopped_at) {
            w.stopped_at.set(Some(next));
        }
        let Runner {
            mut degraded,
            phase_time,
            phase_cpu,
            persist_time,
            recall_time,
            recalls,
            query_ages,
            checkpoint_costs,
            per_tick,
            ctx,
            events,
            events_path,
            llm,
            llm_path,
            tallies,
            ..
        } = driver;
        // The run's frames end here; a run stopped by an error leaves them open, as a
        // crash does, and `resume` ends them where it cuts back.
        events.finish().map_err(io_err(&events_path))?;
        llm.finish().map_err(io_err(&llm_path))?;
        let loop_time = loop_started.elapsed();
        let loop_cpu = summary::process_cpu().saturating_sub(loop_cpu);
        let loop_waiting = loop_waiting
            .zip(summary::thread_waiting())
            .map(|(before, after)| after.saturating_sub(before));
        crate::terminal::finish_progress(&bar, progress);

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

        // Brain figures of the whole run: a resumed or forked run's earlier ticks too.
        tallies.degrade(&mut degraded);
        let stats = runtime.block_on(store.stats())?;
        let roster_names: Vec<String> = sim.names().iter().map(|n| n.to_string()).collect();
        let ticks_run = scenario.ticks - first_tick;
        let summary = Summary {
            scenario: scenario.name.clone(),
            seed: manifest.seed_at(0),
            ticks: scenario.ticks,
            facts: summary::facts(sim.facts(), &roster_names, scenario.ticks.saturating_sub(1)),
            memories: stats,
            degraded,
            brains: tallies
                .brains
                .into_iter()
                .map(|(name, t)| {
                    let think = think_name(scenario.brains.get(&name).map(|b| b.mind.think));
                    let mut stats = t.finish(think);
                    if let Some(llm) = ctx
                        .brains
                        .iter()
                        .find(|slot| slot.name == name)
                        .and_then(|slot| slot.brain.llm())
                    {
                        stats.replicas = summary::replicas(llm.replicas().stats());
                    }
                    (name, stats)
                })
                .collect(),
            embedder: EmbedderStats {
                model: embedder_model,
                cache_hits: cache.as_ref().map_or(0, |c| c.counts().0),
                cache_misses: cache.as_ref().map_or(0, |c| c.counts().1),
                reembed: switch
                    .changed()
                    .then(|| Reembed::new(&switch, reembed_time)),
                replicas: embedder_replicas
                    .as_ref()
                    .map_or_else(Vec::new, |r| summary::replicas(r.stats())),
            },
            npcs: roster_names.len(),
            store: manifest.store.clone(),
            run_dir: dir.display().to_string(),
            timing: Timing {
                wall_ms: started.elapsed().as_secs_f64() * 1000.0,
                ticks_per_second: ticks_run as f64 / loop_time.as_secs_f64().max(1e-9),
                cpu_ms_per_tick: (ticks_run > 0)
                    .then(|| loop_cpu.as_secs_f64() * 1000.0 / ticks_run as f64),
                phases_ms: PHASES
                    .iter()
                    .zip(phase_time)
                    .chain(PERSIST_PARTS.iter().zip(persist_time))
                    .map(|(name, d)| ((*name).to_owned(), d.as_secs_f64() * 1000.0))
                    .collect(),
                phases_cpu_ms: PHASES
                    .iter()
                    .zip(phase_cpu)
                    .map(|(name, d)| ((*name).to_owned(), d.as_secs_f64() * 1000.0))
                    .collect(),
                drain_ms,
                store_writer_ms: store
                    .background_write_time()
                    .map(|d| d.as_secs_f64() * 1000.0),
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
                tick_thread_waiting_ms_per_tick: loop_waiting
                    .filter(|_| ticks_run > 0)
                    .map(|w| w.as_secs_f64() * 1000.0 / ticks_run as f64),
                recall_queries: query_ages,
                checkpoints: summary::CheckpointCost::of(&checkpoint_costs),
                per_tick: Some(per_tick),
            },
            expectations: Vec::new(),
        };
        if watch.is_some_and(|w| w.stopped_at.get().is_some()) {
            // Stopped early: like a crash, minus the crash; `resume` finishes it.
            return Ok(summary);
        }
        let judges: Vec<crate::spread::Judge> = ctx
            .brains
            .iter()
            .map(|slot| crate::spread::Judge {
                name: slot.name.clone(),
                brain: slot.brain.clone(),
                concurrency: scenario.brains.get(&slot.name).map_or(1, |b| b.slots()),
            })
            .collect();
        let decided = runtime.block_on(crate::spread::decide(
            store.as_ref(),
            dir,
            scenario,
            &names,
            &judges,
            &space.model,
            scenario.ticks,
        ))?;
        finish(dir, scenario, summary, &decided, &space.model, |ids| {
            runtime.block_on(store.vectors_of(ids))
        })
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
    /// Ticks decided before an interruption (a resumed or forked run), each taken out as
    /// it is replayed.
    tape: Tape,
    /// The brain figures so far, counted as each tick's calls are decided or replayed.
    tallies: summary::Tallies,
    names: Vec<String>,
    switch: &'a SpaceSwitch,
    space: &'a VectorSpace,
    /// Whether the first new tick waited for the re-embedding (or there was none).
    reembed_waited: bool,
    events: BackgroundLog,
    events_path: PathBuf,
    llm: BackgroundLog,
    llm_path: PathBuf,
    bar: &'a ProgressBar,
    degraded: Degraded,
    phase_time: [Duration; PHASES.len()],
    /// The whole process's CPU time in each of [`PHASES`].
    phase_cpu: [Duration; PHASES.len()],
    persist_time: [Duration; PERSIST_PARTS.len()],
    recall_time: Duration,
    recalls: u64,
    query_ages: summary::QueryAges,
    /// Each tick's checkpoint: encoding time and bytes (0 without one).
    checkpoint_costs: Vec<summary::TickCheckpoint>,
    /// Each tick's phases, for `summary.json`.
    per_tick: summary::PerTick,
    /// The checkpoints saved so far, as the next one is taken against them.
    chain: Chain,
    /// When a fork's ticks before its fork tick end, and the edited scenario takes over.
    stages: Stages,
    /// The barrier's share of the tick being run, in wall-clock and process CPU time.
    tick_barrier: Duration,
    tick_barrier_cpu: Duration,
    barrier_timeout: Duration,
    guard: crate::preflight::MemoryGuard,
}

/// The most deltas after one whole checkpoint, whatever their size: a reader applies
/// them all, so their count is bounded too.
const CHAIN_DELTAS_MAX: usize = 1_000;

/// The deltas after a whole checkpoint add up to at most this many times its bytes.
const CHAIN_BYTES_PER_WHOLE: usize = 4;

/// How a run saves its checkpoints: whole, then deltas on the one saved before, until
/// the deltas since the whole one would add up to more than [`CHAIN_BYTES_PER_WHOLE`]
/// times its bytes — then whole again. So a tick's save costs about what changed in it
/// (the whole checkpoints spread over the ticks between add at most a quarter), not the
/// size of a world that grows with the gossip. Nor does a whole checkpoint hold what
/// grows with the gossip: of each NPC's `KnownBy`, only what it learned since the save
/// before (a reader gathers the rest from every earlier checkpoint,
/// `hearsay_core::checkpoint::KnownSoFar`), so whole checkpoints keep about one size
/// through a run. A reader applies at most five whole checkpoints' worth of its chain,
/// and reads what was learned from each checkpoint before it. Which rows are whole
/// follows from their sizes alone, so it is the same in every run of the same seed. A run
/// that resumes or forks starts with a whole one.
///
/// A whole checkpoint after the first is the chain's base, brought up to the tick by
/// that tick's delta, written out: the base is the world as [`Sim::save_whole`] would
/// capture it, its `learned` the delta's (the core's tests hold them equal, JSON and all,
/// tick by tick) — no second capture of the world.
#[derive(Default)]
struct Chain {
    /// The state saved last (windows by id), what the next delta is taken against.
    base: Option<hearsay_core::checkpoint::Checkpoint>,
    /// The `next_tick` of the chain's whole checkpoint and its bytes.
    whole: (u64, usize),
    /// The bytes and the number of the deltas saved after it.
    deltas: (usize, usize),
    /// The bytes of the delta saved last: the next one's buffer starts that large.
    last_delta: usize,
}

impl Chain {
    /// The checkpoint after `next_tick - 1`, as the store saves it.
    fn save(&mut self, sim: &mut Sim, next_tick: u64) -> Result<SavedCheckpoint, String> {
        let state = match &mut self.base {
            None => {
                let whole = sim.save_whole(next_tick);
                let state = json(0, |out| whole.write_json(out))?;
                self.base = Some(whole);
                state
            }
            Some(base) => {
                let (bytes, count) = self.deltas;
                let hint = self.last_delta;
                let state = sim
                    .save_delta(next_tick, base, |delta| {
                        json(hint, |out| delta.write_json(out))
                    })
                    .map_err(|e| e.to_string())??;
                self.last_delta = state.len();
                if bytes + state.len() <= CHAIN_BYTES_PER_WHOLE * self.whole.1
                    && count < CHAIN_DELTAS_MAX
                {
                    self.deltas = (bytes + state.len(), count + 1);
                    return Ok(SavedCheckpoint {
                        next_tick,
                        base: Some(self.whole.0),
                        state,
                    });
                }
                // The delta brought the base to `next_tick`: it is the whole checkpoint.
                json(self.whole.1, |out| base.write_json(out))?
            }
        };
        self.whole = (next_tick, state.len());
        self.deltas = (0, 0);
        Ok(SavedCheckpoint {
            next_tick,
            base: None,
            state,
        })
    }
}

/// A checkpoint's JSON as `write` writes it, in a buffer of `hint` bytes to start with (a
/// checkpoint's size is close to the one before it, and a buffer grown by doubling copies
/// its bytes again at every step).
fn json(hint: usize, write: impl FnOnce(&mut Vec<u8>)) -> Result<String, String> {
    let mut out = Vec::with_capacity(hint + hint / 8);
    write(&mut out);
    // The writers write UTF-8 only (keys, numbers and `str`s).
    String::from_utf8(out).map_err(|e| format!("a checkpoint's JSON is not UTF-8: {e}"))
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

    fn begin(&mut self, tick: u64, sim: &mut Sim) -> Result<(), RunError> {
        if let Some(available) = self.guard.low(tick) {
            // Between two ticks, everything before committed: `resume` goes on from here.
            return Err(RunError::MemoryLow {
                tick,
                available,
                reserve: self.guard.reserve,
            });
        }
        let dir = self.engine.dir;
        let next = self
            .stages
            .switch(tick, sim)
            .map_err(|e| RunError::RunDir {
                path: dir.join(SCENARIO_FILE),
                problem: format!(
                    "the scenario in force from tick {tick} does not fit the run: {e}"
                ),
            })?;
        if let Some(next) = next {
            self.store.set_forgetting(next.memory.forgetting);
            // The world was set up anew: the next checkpoint is a whole one, as a fork's
            // first is.
            self.chain = Chain::default();
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
        // Who reflects this tick, on which memories (by id: each reflection reads their
        // records in its NPC's turn).
        let due = perceived.reflections_due;
        let notes = tick_notes(
            tick,
            &perceived.wakes,
            &perceived.reflections_deferred,
            &self.ctx.brains,
            &self.ctx.npc_brain,
            &self.names,
        );
        // Taken out of the tape as it is replayed: a tick's calls parsed now, and let go.
        let taped = self.tape.take_tick(tick, &self.names)?;
        if taped.is_none() && self.stages.earlier(tick) {
            // Only the tape knows how the source decided it; the brains of the edited
            // scenario would not decide it the same.
            return Err(RunError::RunDir {
                path: self.llm_path.clone(),
                problem: format!(
                    "tick {tick} comes before the fork's tick, so its decisions must come from \
                     the tape, and the tape has none for it; fork the source run again"
                ),
            });
        }
        show_reembedding(self.bar, self.backfill, self.switch, self.space);
        let barrier_cpu = summary::process_cpu();
        let barrier = if taped.is_none() {
            self.barrier(tick)?
        } else {
            Duration::ZERO
        };
        self.tick_barrier_cpu = summary::process_cpu().saturating_sub(barrier_cpu);
        // A tick decided before (a resumed or forked run) is on the tape already: the
        // same decisions, the same recalls, counted from the tape.
        if let Some(calls) = taped {
            let thoughts = perceived
                .observations
                .iter()
                .filter_map(|o| {
                    calls
                        .get(&self.names[o.npc.index()])
                        .map(|c| (o.npc, thought_from(c)))
                })
                .collect();
            if calls.is_empty() {
                for note in &notes {
                    self.tallies.note(note);
                }
            } else {
                for note in self.tape.notes.get(&tick).into_iter().flatten() {
                    self.tallies.note(note);
                }
                self.tallies.tick(&calls, &self.names);
            }
            self.tick_barrier = barrier;
            return Ok(thoughts);
        }
        // Decided now: each result read where it lies, and its thought taken into the
        // tick's decisions (a list of the results' parts first was one more pass moving
        // every thought, on the tick thread).
        let results = runtime
            .block_on(think_all(
                self.ctx.clone(),
                seed,
                perceived.observations,
                &perceived.wakes,
                due,
            ))
            .0;
        for note in &notes {
            self.tallies.note(note);
        }
        for t in &results {
            self.recall_time += t.recall_time;
            self.recalls += 1;
            self.query_ages.add(t.query_age);
        }
        // The tallies in NPC order (the results come sorted by NPC; sorted again here so
        // that the order is this function's to keep).
        let mut calls: Vec<(NpcId, &summary::Counted)> =
            results.iter().map(|t| (t.npc, &t.counted)).collect();
        calls.sort_by_key(|(npc, _)| npc.index());
        for (_, call) in calls {
            self.tallies.call(call);
        }
        // Compressed and written while the NPCs act; `record` waits for it before the
        // tick's events, so on disk what was decided always comes first.
        let notes: Vec<String> = notes.iter().map(tape_line).collect();
        let lines = results.iter().map(|t| &t.line).chain(&notes);
        self.llm
            .send_tick(joined_lines(lines))
            .map_err(io_err(&self.llm_path))?;
        self.tick_barrier = barrier;
        Ok(results.into_iter().map(|t| (t.npc, t.thought)).collect())
    }

    fn record(
        &mut self,
        tick: u64,
        acted: hearsay_core::Acted,
        recalled: Vec<hearsay_core::MemoryId>,
        archived: Vec<hearsay_memory::Forgotten>,
        sim: &mut Sim,
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
        let c4 = summary::process_cpu();
        // What was decided is on disk before what came of it.
        self.llm.settle().map_err(io_err(&self.llm_path))?;
        // The events are compressed while the checkpoint is taken (see below for when
        // they are waited for).
        self.events
            .send_tick(joined_lines(&acted.log.lines))
            .map_err(io_err(&self.events_path))?;
        let t4_log = Instant::now();
        let cpu_before = summary::thread_cpu();
        let next_tick = tick + 1;
        let every = scenario.checkpoint_every;
        let checkpoint = (every > 0
            && (next_tick.is_multiple_of(every) || next_tick == scenario.ticks))
            .then(|| self.chain.save(sim, next_tick))
            .transpose()
            .map_err(|problem| RunError::RunDir {
                path: dir.join(MEMORIES_FILE),
                problem: format!("cannot save the checkpoint after tick {tick}: {problem}"),
            })?;
        let t4_checkpoint = Instant::now();
        self.checkpoint_costs.push(summary::TickCheckpoint {
            wall: t4_checkpoint - t4_log,
            cpu: summary::thread_cpu().saturating_sub(cpu_before),
            bytes: checkpoint.as_ref().map_or(0, |c| c.state.len()),
        });
        if checkpoint.is_some() || watch.is_some() {
            // A resume starts from the store's last checkpoint and needs the log through
            // it, and an observer reads the tick from the file: then the events are on
            // disk before the store's write. On the ticks between checkpoints they are
            // compressed while the next tick runs (its `send_tick` waits for them, so
            // the log is never more than a tick behind); a crash in between loses only
            // ticks after the last checkpoint, which a resume runs again.
            self.events.settle().map_err(io_err(&self.events_path))?;
        }
        let t4_settled = Instant::now();
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
        let phases = [
            times.perceive,
            self.tick_barrier,
            times.think.saturating_sub(self.tick_barrier),
            times.act,
            t5 - t4,
        ];
        for (slot, d) in self.phase_time.iter_mut().zip(phases) {
            *slot += d;
        }
        let cpu = [
            times.perceive_cpu,
            self.tick_barrier_cpu,
            times.think_cpu.saturating_sub(self.tick_barrier_cpu),
            times.act_cpu,
            summary::process_cpu().saturating_sub(c4),
        ];
        for (slot, d) in self.phase_cpu.iter_mut().zip(cpu) {
            *slot += d;
        }
        let checkpoint_bytes = self.checkpoint_costs.last().map_or(0, |c| c.bytes);
        self.per_tick.push(phases, checkpoint_bytes);
        for (slot, d) in self.persist_time.iter_mut().zip([
            (t4_log - t4) + (t4_settled - t4_checkpoint),
            t4_checkpoint - t4_log,
            t5 - t4_settled,
        ]) {
            *slot += d;
        }
        self.bar.inc(1);
        if let Some(w) = watch {
            // An observer sees a tick only once it is in the file: a store that writes
            // in the background is waited for.
            runtime.block_on(self.store.flush())?;
            if (w.observer.borrow_mut())(tick, &acted.log.lines).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// How the scenario's backfill worker batches: the same for a run and for memories added
/// to it later ([`crate::annex`]).
pub(crate) fn backfill_config(scenario: &Scenario) -> BackfillConfig {
    BackfillConfig {
        batch_size: scenario.memory.batch_size,
        concurrency: scenario.memory.embed_slots(),
        chunking: scenario.memory.chunking,
        ..BackfillConfig::default()
    }
}

/// Ends a run: judges the scenario's expectations on its story, writes `summary.json`
/// and `report.html`.
fn finish(
    dir: &Path,
    scenario: &Scenario,
    mut summary: Summary,
    decided: &crate::spread::FactsFile,
    model: &str,
    vectors: impl FnOnce(
        &[hearsay_core::MemoryId],
    ) -> Result<
        BTreeMap<hearsay_core::MemoryId, Vec<Vec<f32>>>,
        hearsay_memory::StoreError,
    >,
) -> Result<Summary, RunError> {
    let report_started = Instant::now();
    let story = crate::story::Story::read(dir, scenario)?;
    let vectors = vectors(&crate::spread::hop_memories(&story))?;
    summary.facts = summary::facts_of(
        &story,
        scenario,
        &vectors,
        decided,
        &crate::spread::JudgeTape::read(dir)?,
        model,
    );
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

/// What the summary counts of a tape's calls, by tick, then NPC name.
/// The tape at `path` for a resume or a fork: the calls of `ticks` kept, every caller
/// checked to be one of `names`, and the brain figures of the ticks before `ticks`
/// (counted as their calls are read, each tick's in roster order, and dropped).
pub(super) fn read_tape_from(
    path: &Path,
    ticks: std::ops::Range<u64>,
    names: &[String],
) -> Result<(Tape, summary::Tallies), RunError> {
    let mut earlier = summary::EarlierCalls::new(names);
    let tape = Tape::read_range(path, ticks.clone(), names, |call| {
        earlier.add(call.tick, &call.npc, summary::Counted::of(call));
    })?;
    if let Some(tallies) = earlier.finish(&tape.notes, ticks.start) {
        return Ok((tape, tallies));
    }
    // Calls out of tick order: read again, every earlier one held, then counted.
    let mut counted: BTreeMap<u64, BTreeMap<String, summary::Counted>> = BTreeMap::new();
    Tape::read_range(path, ticks.clone(), names, |call| {
        counted
            .entry(call.tick)
            .or_default()
            .insert(call.npc.to_string(), summary::Counted::of(call));
    })?;
    let tallies = summary::Tallies::of_earlier(&tape.notes, &counted, names, ticks.start);
    Ok((tape, tallies))
}

/// How a store goes back to `checkpoint` (none: to before tick 0), with the recall state
/// of the ticks before it (read from the event log).
pub(super) fn rewind_to(recalls: Recalls, checkpoint: Option<&Checkpoint>) -> Rewind {
    let (last_recalled, recall_counts) = recalls.into_state();
    Rewind {
        next_memory_id: checkpoint.map_or(1, |c| c.next_memory_id),
        next_tick: checkpoint.map_or(0, |c| c.next_tick),
        last_recalled,
        recall_counts,
    }
}

/// The event log of the run in `dir`, which resumes after `checkpoint` (none: from tick
/// 0), checked to reach the checkpoint and to agree with it: where its ticks close, the
/// recall state of the ticks before the checkpoint, and whether the log file is there. The
/// log is read in one pass and its text not kept. Both a resume and the early look at a
/// finished run (`open::finished_at`) check the log this way, so both refuse a damaged
/// one alike.
pub(super) fn log_to_resume(
    dir: &Path,
    checkpoint: Option<&hearsay_core::checkpoint::Checkpoint>,
) -> Result<(TickIndex, Recalls, bool), RunError> {
    // The log is written before the store commits a tick's checkpoint, so it reaches at
    // least as far as the checkpoint; a run killed before its first tick may have none yet.
    let events_path = dir.join(EVENTS_FILE);
    let logged = crate::logfile::present(&events_path);
    let next_tick = checkpoint.map_or(0, |c| c.next_tick);
    let mut recalls = Recalls::default();
    let index = if checkpoint.is_none() && !logged {
        TickIndex::default()
    } else {
        TickIndex::read(&events_path, None, |tick, _, line| {
            if tick < next_tick {
                recalls.add(line);
            }
            Ok(())
        })?
    };
    if let Some(c) = checkpoint {
        let closed = index.completed();
        if closed < next_tick {
            return Err(RunError::RunDir {
                path: events_path,
                problem: format!(
                    "closes {closed} ticks, but the store's last checkpoint is after tick {}: \
                     the log was cut short, so the run cannot be resumed",
                    next_tick - 1
                ),
            });
        }
        if index.hash_before(next_tick).as_deref() != Some(c.digest.as_str()) {
            return Err(RunError::RunDir {
                path: events_path,
                problem: format!(
                    "the event log does not match the store's checkpoint before tick {next_tick} \
                     (from another run?); it cannot be resumed"
                ),
            });
        }
    }
    Ok((index, recalls, logged))
}

/// The refusal to resume the run in `dir`, whose store's last checkpoint is before
/// `next_tick` of its `ticks`.
pub(super) fn complete(dir: &Path, next_tick: u64, ticks: u64) -> RunError {
    RunError::Refused(format!(
        "{} is complete ({next_tick} of {ticks} ticks): nothing to resume",
        dir.display()
    ))
}

/// The thought a tape entry records: the decision, the recalls, how it went.
pub fn thought_from(call: &BrainCall) -> Thought {
    Thought {
        decision: call.decision.clone(),
        recalled: call.recalled.clone(),
        recall_failed: call.recall_failed,
        brain_failed: call.exchange.outcome == CallOutcome::Failed,
        reflection: call.reflection.as_ref().map(|r| r.insights.clone()),
        reflection_failed: call
            .reflection
            .as_ref()
            .is_some_and(|r| r.exchange.outcome == CallOutcome::Failed),
    }
}

/// A brain's `think` as the summary spells it.
pub(crate) fn think_name(think: Option<hearsay_core::ThinkMode>) -> &'static str {
    match think {
        Some(hearsay_core::ThinkMode::OnChange { .. }) => "on_change",
        _ => "every_tick",
    }
}

/// The tick's notes, one per brain that has NPCs that continued or whose reflection was
/// deferred, in the order of `brains`: with the tick's calls they account for every NPC.
pub(crate) fn tick_notes(
    tick: u64,
    perceived_wakes: &[hearsay_core::Wake],
    deferred: &[NpcId],
    brains: &[BrainSlot],
    npc_brain: &[usize],
    names: &[String],
) -> Vec<hearsay_brain::TickNote> {
    let mut notes: Vec<hearsay_brain::TickNote> = brains
        .iter()
        .map(|b| hearsay_brain::TickNote {
            tick,
            brain: b.name.clone(),
            ..Default::default()
        })
        .collect();
    for (idx, wake) in perceived_wakes.iter().enumerate() {
        if !wake.thinks()
            && let Some(note) = npc_brain.get(idx).and_then(|&b| notes.get_mut(b))
        {
            note.continued.push(names[idx].clone());
        }
    }
    for npc in deferred {
        if let Some(note) = npc_brain.get(npc.index()).and_then(|&b| notes.get_mut(b)) {
            note.deferred.push(names[npc.index()].clone());
        }
    }
    notes.retain(|n| !n.continued.is_empty() || !n.deferred.is_empty());
    notes
}

/// Lines, each ended by a newline, as one text: a log compresses a tick's text in one
/// call rather than one per line. Sized first: a big town's tick is megabytes, and a
/// text grown by doubling copied itself a score of times into fresh pages.
fn joined_lines<'a, I>(lines: I) -> Vec<u8>
where
    I: IntoIterator<Item = &'a String>,
    I::IntoIter: Clone,
{
    let lines = lines.into_iter();
    let mut text = Vec::with_capacity(lines.clone().map(|l| l.len() + 1).sum());
    for line in lines {
        text.extend_from_slice(line.as_bytes());
        text.push(b'\n');
    }
    text
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.to_owned(),
        source,
    }
}
