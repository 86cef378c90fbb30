//! A run to read back, wherever it is: a run directory (its scenario, event log and
//! store, SQLite or PostgreSQL), or a PostgreSQL run by id alone (the scenario from the
//! `runs` table, no event log). `inspect`, `ask` and `hearsay mcp` read through it.
//!
//! Without an event log, a memory's recall history is only known as it stands at the
//! end of the run (the store keeps "last recalled" and the count), so questions about an
//! earlier tick need the run directory; everything else — which memories existed at a
//! tick, which were archived by then, who knew which fact from whom — the store answers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hearsay_core::checkpoint::{Checkpoint, CheckpointDelta, KnownSoFar};
use hearsay_core::{MemoryId, MemoryRecord, NpcId, RecentMemory};
use hearsay_memory::{
    AnyStore, MemoryMeta, PgOptions, PgStore, SavedChain, SqliteStore, Store, StoreError,
    StoredMemory,
};

use crate::RunError;
use crate::logs::{EventsFile, RunManifest};
use crate::rundir::{EVENTS_FILE, MANIFEST_FILE, MEMORIES_FILE, SCENARIO_FILE};
use crate::scenario::{self, Scenario};

pub use hearsay_memory::StoreLocation;

/// A run, opened for reading.
#[derive(Clone, Debug)]
pub struct RunSource {
    /// The scenario (the latest, for a fork), with the seed and ticks the run ran with.
    pub scenario: Scenario,
    /// NPC names, by id.
    pub names: Vec<String>,
    /// Ticks completed.
    pub completed: u64,
    /// The run directory, if the run was opened through one.
    pub dir: Option<PathBuf>,
    /// `run.json`, from a run directory.
    pub manifest: Option<RunManifest>,
    /// `events.jsonl`, from a run directory: opened (its seal checked), read again by
    /// the passes that need its lines.
    pub events: Option<EventsFile>,
    /// Where the memories are.
    pub store: StoreLocation,
    /// What to call the run in messages.
    pub label: String,
    /// `scenario.toml` as the directory holds it: a PostgreSQL run is attached only if its
    /// row holds the same text ([`check_pg_run`]).
    pub scenario_text: Option<Vec<u8>>,
}

/// A reader's pool: two connections, and recall in the database — a reader recalls
/// for an NPC or two, not every NPC every tick, and loading every vector first would
/// cost more than it saves.
fn pg_read_options() -> PgOptions {
    PgOptions {
        max_connections: 2,
        memory_index_max_bytes: 0,
        ..PgOptions::default()
    }
}

impl RunSource {
    /// Opens the run in `dir`; `database_url` is needed for runs kept in PostgreSQL (and
    /// is only ever the one the user gave: a run directory names a run id, never a server).
    pub fn open_dir(dir: &Path, database_url: Option<&str>) -> Result<RunSource, RunError> {
        Self::open_dir_for(dir, database_url, None)
    }

    /// [`RunSource::open_dir`] for a reader of NPC `npc` alone (`inspect`, `ask`): the
    /// event log's open keeps what its recalls need ([`EventsFile::open_for`]), so the
    /// log is read once.
    pub fn open_dir_for(
        dir: &Path,
        database_url: Option<&str>,
        npc: Option<&str>,
    ) -> Result<RunSource, RunError> {
        crate::rundir::require(dir, &[MANIFEST_FILE, SCENARIO_FILE, EVENTS_FILE])?;
        let manifest = RunManifest::read(dir)?;
        let (mut scenario, scenario_text) = scenario::load(&dir.join(SCENARIO_FILE))?;
        scenario.seed = manifest.seed_at(0);
        scenario.ticks = manifest.ticks;
        let events = EventsFile::open_for(&dir.join(EVENTS_FILE), npc)?;
        crate::logs::check_not_cut_short(dir, manifest.ticks, events.completed())?;
        let store = match manifest.store.backend {
            crate::summary::Backend::Postgres => StoreLocation::Postgres {
                url: database_url.ok_or(RunError::NoDatabaseUrl)?.to_owned(),
                run_id: manifest.store.run_id.ok_or_else(|| RunError::RunDir {
                    path: dir.join(MANIFEST_FILE),
                    problem: "a PostgreSQL run without a run_id".into(),
                })?,
            },
            _ => StoreLocation::Sqlite(dir.join(MEMORIES_FILE)),
        };
        Ok(RunSource {
            names: scenario.npcs.iter().map(|n| n.name.clone()).collect(),
            scenario,
            completed: events.completed(),
            dir: Some(dir.to_owned()),
            manifest: Some(manifest),
            events: Some(events),
            store,
            label: dir.display().to_string(),
            scenario_text: Some(scenario_text),
        })
    }

    /// Checks, for a run opened through its directory, that PostgreSQL run `run_id` is the
    /// directory's own.
    pub async fn check_row(
        &self,
        pool: &hearsay_memory::postgres::PgPool,
        run_id: i64,
    ) -> Result<(), RunError> {
        match (&self.dir, &self.scenario_text) {
            (Some(dir), Some(text)) => check_pg_run(pool, run_id, dir, text, &self.names).await,
            _ => Ok(()),
        }
    }

    /// Opens PostgreSQL run `run_id` from the database alone.
    pub async fn open_postgres(url: &str, run_id: i64) -> Result<RunSource, RunError> {
        let options = pg_read_options();
        let pool = hearsay_memory::postgres::connect(url, &options).await?;
        let row = hearsay_memory::postgres::run_row(&pool, run_id)
            .await?
            .ok_or_else(|| {
                RunError::Refused(format!(
                    "--run {run_id}: the database has no such run (see the runs table, or a run directory's run.json)"
                ))
            })?;
        let label = format!("PostgreSQL run {run_id}");
        let mut scenario = scenario::parse(Path::new(&label), row.scenario.as_bytes())?;
        scenario.seed = row.seed;
        let store = PgStore::attach(pool, options, run_id, row.npc_names.clone()).await?;
        let checkpoint = store.latest_checkpoint(None).await;
        store.close().await;
        // The last checkpoint says how far the run got (it is saved after the last tick).
        let completed = checkpoint?.map_or(0, |c| c.next_tick());
        scenario.ticks = scenario.ticks.max(completed);
        Ok(RunSource {
            names: row.npc_names,
            scenario,
            completed,
            dir: None,
            manifest: None,
            events: None,
            store: StoreLocation::Postgres {
                url: url.to_owned(),
                run_id,
            },
            label,
            scenario_text: None,
        })
    }

    /// The NPC called `name`, or a refusal that lists the NPCs.
    pub fn npc(&self, name: &str) -> Result<NpcId, RunError> {
        self.names
            .iter()
            .position(|n| n == name)
            .map(|i| NpcId(i as u32))
            .ok_or_else(|| {
                let shown: Vec<&str> = self.names.iter().take(12).map(String::as_str).collect();
                RunError::Refused(format!(
                    "no such NPC {name:?} in {}; NPCs: {}{}",
                    self.label,
                    shown.join(", "),
                    if self.names.len() > shown.len() {
                        ", …"
                    } else {
                        ""
                    }
                ))
            })
    }

    /// The tick to look at: `at` (0..=completed), or the end.
    pub fn tick(&self, at: Option<u64>, flag: &str) -> Result<u64, RunError> {
        let completed = self.completed;
        match at {
            None => Ok(completed),
            Some(t) if t <= completed => Ok(t),
            Some(t) => Err(RunError::Refused(format!(
                "{flag} {t}: {} has completed ticks 0..{completed}; choose a tick from 0 to {completed}",
                self.label
            ))),
        }
    }

    /// The scenario in force at `tick` (a fork with `--set` changed it at its fork tick).
    pub fn scenario_at(&self, tick: u64) -> Result<Scenario, RunError> {
        let Some(manifest) = &self.manifest else {
            return Ok(self.scenario.clone());
        };
        match manifest
            .earlier_scenarios
            .iter()
            .find(|s| tick < s.until_tick)
        {
            Some(earlier) => {
                let dir = self.dir.clone().unwrap_or_default();
                let mut s = scenario::parse(&dir.join(MANIFEST_FILE), earlier.text.as_bytes())?;
                check_stage_remotes(&dir, &s, &self.scenario)?;
                s.seed = self.scenario.seed;
                s.ticks = self.scenario.ticks;
                Ok(s)
            }
            None => Ok(self.scenario.clone()),
        }
    }

    /// The earlier scenario tick `tick` ran under, when it was not `scenario.toml`, and
    /// how the two differ.
    pub fn stage_at(&self, tick: u64) -> Option<crate::inspect::EarlierStage> {
        let manifest = self.manifest.as_ref()?;
        let current = String::from_utf8_lossy(self.scenario_text.as_deref()?);
        let earlier = manifest
            .earlier_scenarios
            .iter()
            .find(|s| tick < s.until_tick)?;
        Some(crate::inspect::EarlierStage {
            until_tick: earlier.until_tick,
            diff: crate::logs::stage_diff(&earlier.text, &current, 40),
        })
    }

    /// Opens the store once and closes it: a server that reads the run for a while
    /// (`hearsay mcp`) refuses a missing or damaged store before it starts serving.
    pub async fn check_store(&self) -> Result<(), RunError> {
        self.open_reader().await?.close().await;
        Ok(())
    }

    /// The run's store, opened for reading (never loaded for recall): on PostgreSQL
    /// attached only if its row holds this directory's scenario and NPCs
    /// ([`check_pg_run`]). The caller closes it.
    pub async fn open_store(&self, options: PgOptions) -> Result<AnyStore, RunError> {
        Ok(match &self.store {
            StoreLocation::Sqlite(path) => SqliteStore::open_unloaded(path, self.names.clone())
                .await?
                .into(),
            StoreLocation::Postgres { url, run_id } => {
                let pool = hearsay_memory::postgres::connect(url, &options).await?;
                if let Err(e) = self.check_row(&pool, *run_id).await {
                    pool.close().await;
                    return Err(e);
                }
                PgStore::attach(pool, options, *run_id, self.names.clone())
                    .await?
                    .into()
            }
        })
    }

    /// The run's store opened to add to it (`hearsay mcp --allow-writes`, `hearsay
    /// backfill`): a SQLite file is checked page by page and loaded, because its store
    /// keeps the bookkeeping of what is written and what awaits a vector in memory. The
    /// caller closes it.
    pub async fn open_writer(&self) -> Result<AnyStore, RunError> {
        match &self.store {
            StoreLocation::Sqlite(path) => {
                Ok(SqliteStore::open(path, self.names.clone()).await?.into())
            }
            StoreLocation::Postgres { .. } => self.open_store(PgOptions::default()).await,
        }
    }

    /// The run's store opened for reading with the readers' small pool (two connections
    /// on PostgreSQL): for a reader that makes many calls on one store. The caller closes
    /// it.
    pub async fn open_reader(&self) -> Result<AnyStore, RunError> {
        self.open_store(pg_read_options()).await
    }

    /// `read` on the run's store, opened for reading and closed again.
    async fn read_store<T>(
        &self,
        read: impl AsyncFnOnce(&AnyStore) -> Result<T, StoreError>,
    ) -> Result<T, RunError> {
        let store = self.open_reader().await?;
        let out = read(&store).await;
        store.close().await;
        Ok(out?)
    }

    /// Every memory of `npc` (of everyone for `None`) as the store keeps it, archived ones
    /// too, with their vectors in the run's current space, by id.
    pub async fn memories_of(&self, npc: Option<NpcId>) -> Result<Vec<StoredMemory>, RunError> {
        self.read_store(async |store| store.memories_of(npc).await)
            .await
    }

    /// The vectors (current space) of the memories with these ids, by id.
    pub async fn vectors_of(
        &self,
        ids: &[MemoryId],
    ) -> Result<BTreeMap<MemoryId, Vec<Vec<f32>>>, RunError> {
        self.read_store(async |store| store.vectors_of(ids).await)
            .await
    }

    /// Every memory's metadata (no vectors), archived ones too, by id.
    pub async fn metadata(&self) -> Result<Vec<MemoryMeta>, RunError> {
        self.read_store(async |store| store.metadata().await).await
    }

    /// The world's state saved after the last checkpointed tick, if the run saved one.
    pub async fn latest_checkpoint(&self) -> Result<Option<Checkpoint>, RunError> {
        let label = PathBuf::from(&self.label);
        let read = self
            .read_store(async |store| {
                let Some(saved) = store.latest_checkpoint(None).await? else {
                    return Ok(None);
                };
                // A store opened to read may not hold the run's metadata in memory: then
                // the memories the checkpoint names come from the database.
                let assembled = match assemble(&label, &saved) {
                    Ok(c) => c,
                    Err(e) => return Ok(Some(Err(e))),
                };
                let wanted = assembled.memory_ids();
                let mut records = store.memories(&wanted);
                if records.len() < wanted.len() {
                    let wanted: std::collections::BTreeSet<MemoryId> = wanted.into_iter().collect();
                    records = store
                        .metadata()
                        .await?
                        .into_iter()
                        .map(|m| m.memory)
                        .filter(|m| wanted.contains(&m.id))
                        .collect();
                }
                Ok(Some(fill(&label, assembled, |_| records, &self.names)))
            })
            .await?;
        read.transpose()
    }

    /// (last tick recalled, times recalled) of each memory of `stored`, NPC `npc`'s, at
    /// the start of `tick`: from the event log (its own recalls of them), or — at the end
    /// of a run, without one — from the store itself.
    pub fn recalls_at(
        &self,
        tick: u64,
        npc: NpcId,
        stored: &[StoredMemory],
    ) -> Result<BTreeMap<MemoryId, (u64, u32)>, RunError> {
        if let Some(events) = &self.events {
            // Only these memories' recalls are counted: a reader asks of an NPC or two.
            let ids: std::collections::BTreeSet<MemoryId> =
                stored.iter().map(|s| s.meta.memory.id).collect();
            let name = self.names.get(npc.0 as usize).map_or("", String::as_str);
            return events.recalls(tick, name, |id| ids.contains(&id));
        }
        if tick < self.completed {
            return Err(RunError::Refused(format!(
                "{} has no event log here, so recalls before its last tick are unknown; \
                 read the run directory instead (with --database-url), or ask about the end",
                self.label
            )));
        }
        Ok(stored
            .iter()
            .filter(|s| s.meta.recalls > 0)
            .map(|s| (s.meta.memory.id, (s.meta.last_recalled, s.meta.recalls)))
            .collect())
    }
}

/// Refuses to attach a run directory to a PostgreSQL run that is not its own. `run.json`
/// names a run id, and a shared or edited directory could name any run in the user's
/// database; the row's scenario text and NPCs must be this directory's.
pub async fn check_pg_run(
    pool: &hearsay_memory::postgres::PgPool,
    run_id: i64,
    dir: &Path,
    scenario_text: &[u8],
    names: &[String],
) -> Result<(), RunError> {
    let row = hearsay_memory::postgres::run_row(pool, run_id).await?;
    let mismatch = match row {
        None => Some("which this database does not have".to_owned()),
        Some(row) if row.scenario.as_bytes() != scenario_text => {
            Some("whose scenario is not this directory's scenario.toml".to_owned())
        }
        Some(row) if row.npc_names != names => {
            Some("whose NPCs are not this directory's".to_owned())
        }
        Some(_) => None,
    };
    match mismatch {
        None => Ok(()),
        Some(why) => Err(RunError::RunDir {
            path: dir.join(MANIFEST_FILE),
            problem: format!(
                "names PostgreSQL run {run_id}, {why}: that run is not this directory's, so \
                 nothing of it was read"
            ),
        }),
    }
}

/// Refuses a scenario kept in `run.json` (a stage before a fork) that would call a server
/// `scenario.toml` does not show, or send a key it does not send: a run directory is
/// data, and only what the user can read in `scenario.toml` may steer a network call.
pub fn check_stage_remotes(
    dir: &Path,
    stage: &Scenario,
    current: &Scenario,
) -> Result<(), RunError> {
    let shown: Vec<(String, Option<String>)> = crate::providers::remotes(current)
        .into_iter()
        .map(|r| (r.base_url, r.key_var))
        .collect();
    for r in crate::providers::remotes(stage) {
        if !shown.contains(&(r.base_url.clone(), r.key_var.clone())) {
            return Err(RunError::RunDir {
                path: dir.join(MANIFEST_FILE),
                problem: format!(
                    "keeps an earlier scenario whose {} calls {}{}, which {SCENARIO_FILE} does \
                     not: hearsay calls only servers the scenario file shows; nothing was sent",
                    r.section,
                    crate::terminal::safe(&r.base_url),
                    r.key_var
                        .map(|v| format!(" with the key in ${v}"))
                        .unwrap_or_default()
                ),
            });
        }
    }
    Ok(())
}

/// A checkpoint as a store saved it ([`assemble`]d from its chain), with the memories
/// it names by id alone — the short-term windows' and the reflections' evidence — filled
/// in from `memories` (the store's metadata: the windows' texts; the evidence's sources,
/// and its facts by matching the texts) and the run's NPC `names`. One naming a memory
/// the store does not have says where. A resume or a fork fills it only after its store
/// is rewound, which loads the store (the memories are older than the checkpoint, so the
/// rewind keeps them).
pub(crate) fn fill(
    label: &Path,
    mut checkpoint: Checkpoint,
    memories: impl FnOnce(&[MemoryId]) -> Vec<MemoryRecord>,
    names: &[String],
) -> Result<Checkpoint, RunError> {
    let ids = checkpoint.memory_ids();
    if !ids.is_empty() {
        let mut found = memories(&ids);
        if !found.is_sorted_by_key(|m| m.id) {
            found.sort_unstable_by_key(|m| m.id);
        }
        if let Some(missing) = ids
            .iter()
            .find(|id| found.binary_search_by_key(*id, |m| m.id).is_err())
        {
            return Err(unreadable(
                label,
                checkpoint.next_tick,
                format!(
                    "it names memory {} (in a short-term window or a reflection's evidence), which the store does not have",
                    missing.0
                ),
            ));
        }
        checkpoint.fill(&found, |m| RecentMemory {
            id: m.id,
            kind: m.kind,
            content: m.content.clone(),
            importance: m.importance,
            tick: m.tick,
            source: m
                .source
                .and_then(|s| names.get(s.index()).map(|n| n.as_str().into())),
            place: Default::default(),
        });
    }
    Ok(checkpoint)
}

/// The checkpoint a chain reads as, its windows and evidence still by memory id: what
/// each NPC believes others know gathered from every checkpoint before the chain
/// ([`KnownSoFar`]), put into the chain's whole checkpoint with what that one holds, then
/// each delta applied in tick order.
pub(crate) fn assemble(label: &Path, chain: &SavedChain) -> Result<Checkpoint, RunError> {
    let mut known = KnownSoFar::default();
    for saved in &chain.earlier {
        let at = saved.next_tick;
        let fits = if saved.base.is_none() {
            let whole: Checkpoint = serde_json::from_str(&saved.state)
                .map_err(|e| unreadable(label, at, e.to_string()))?;
            mismatch(label, at, whole.next_tick)?;
            known.whole(whole)
        } else {
            let delta: CheckpointDelta = serde_json::from_str(&saved.state)
                .map_err(|e| unreadable(label, at, format!("as a delta: {e}")))?;
            mismatch(label, at, delta.next_tick)?;
            known.delta(delta)
        };
        fits.map_err(|e| unreadable(label, at, e.to_string()))?;
    }
    let mut checkpoint: Checkpoint = serde_json::from_str(&chain.whole.state)
        .map_err(|e| unreadable(label, chain.whole.next_tick, e.to_string()))?;
    mismatch(label, chain.whole.next_tick, checkpoint.next_tick)?;
    known
        .into_whole(&mut checkpoint)
        .map_err(|e| unreadable(label, chain.whole.next_tick, e.to_string()))?;
    for saved in &chain.deltas {
        let delta: CheckpointDelta = serde_json::from_str(&saved.state)
            .map_err(|e| unreadable(label, saved.next_tick, format!("as a delta: {e}")))?;
        mismatch(label, saved.next_tick, delta.next_tick)?;
        checkpoint
            .apply(delta)
            .map_err(|e| unreadable(label, saved.next_tick, e.to_string()))?;
    }
    Ok(checkpoint)
}

/// A row saved before one tick whose JSON says another.
fn mismatch(label: &Path, row: u64, json: u64) -> Result<(), RunError> {
    if row == json {
        return Ok(());
    }
    Err(unreadable(
        label,
        row,
        format!("its row is before tick {row} and its JSON before tick {json}"),
    ))
}

fn unreadable(label: &Path, next_tick: u64, problem: String) -> RunError {
    RunError::RunDir {
        path: label.to_owned(),
        problem: format!("the checkpoint before tick {next_tick} is unreadable: {problem}"),
    }
}
