//! Memories added to a recorded run from outside the simulation (`hearsay mcp
//! --allow-writes`), written the way a run writes them: ids from the kernel's
//! [`MemoryLedger`], text first, embedded by the same backfill worker with the run's own
//! embedder — and only into a store of that embedder's vector space.

use std::sync::Arc;
use std::time::Duration;

use hearsay_core::{MemoryId, MemoryKind, MemoryLedger, MemoryRecord, NpcId};
use hearsay_memory::{AnyStore, Backfill, Store, TickWrite};

use crate::RunError;
use crate::rundir::DirLock;
use crate::source::RunSource;

/// A run's store opened for additions, with its embedding worker.
pub struct Annex {
    store: Arc<AnyStore>,
    backfill: Backfill,
    ledger: tokio::sync::Mutex<MemoryLedger>,
    /// The run directory's writer lock, held while memories may be added: never beside
    /// a run, a resume or another writer.
    _lock: Option<DirLock>,
    /// On PostgreSQL, the run's writer lock too (a run served by its id has no directory).
    _run_lock: Option<hearsay_memory::postgres::RunLock>,
}

impl Annex {
    /// Opens `source`'s store for additions (on the current tokio runtime).
    pub async fn open(source: &RunSource) -> Result<Annex, RunError> {
        let lock = source.dir.as_deref().map(DirLock::acquire).transpose()?;
        let (store, backfill) = open_embedding(source).await?;
        let run_lock = match crate::run::hold_as_writer(&store).await {
            Ok(held) => held,
            Err(e) => {
                backfill.shutdown().await;
                store.close().await;
                return Err(e);
            }
        };
        let last = source.metadata().await?.last().map_or(0, |m| m.memory.id.0);
        Ok(Annex {
            store,
            backfill,
            ledger: tokio::sync::Mutex::new(MemoryLedger {
                next_id: last + 1,
                first_of_tick: last + 1,
                pending: Vec::new(),
                // Not at hand: what an added memory's text names is looked for when
                // needed.
                places: None,
            }),
            _lock: lock,
            _run_lock: run_lock,
        })
    }

    /// Adds an observation of `npc`'s, dated `tick`; returns its id. Its embedding follows
    /// in the background.
    pub async fn add(
        &self,
        npc: NpcId,
        content: String,
        importance: u8,
        tick: u64,
    ) -> Result<MemoryId, RunError> {
        let mut ledger = self.ledger.lock().await;
        let mut draft = ledger.clone();
        let id = draft.record(MemoryRecord {
            id: MemoryId(0),
            npc,
            kind: MemoryKind::Observation,
            content: content.into(),
            importance,
            tick,
            source: None,
            core: false,
            evidence: Vec::new(),
            place: Default::default(),
        });
        let memories = std::mem::take(&mut draft.pending);
        self.store
            .write_tick(TickWrite {
                tick,
                memories,
                ..TickWrite::default()
            })
            .await?;
        // The id is spent only once the memory is stored.
        *ledger = draft;
        self.backfill.wake();
        Ok(id)
    }

    /// Waits (within reason) for the added memories' embeddings, then closes the store.
    pub async fn close(self) {
        let through = self.ledger.lock().await.next_id - 1;
        if !self
            .backfill
            .wait_embedded_through(through, Duration::from_secs(30))
            .await
        {
            tracing::warn!("memories added over MCP were left unembedded");
        }
        self.backfill.shutdown().await;
        self.store.close().await;
    }
}

/// `source`'s store with the backfill worker of the run's own embedder, refused for a
/// store whose vectors are another model's.
async fn open_embedding(source: &RunSource) -> Result<(Arc<AnyStore>, Backfill), RunError> {
    let scenario = &source.scenario;
    let keys = match &scenario.memory.embedder {
        crate::scenario::EmbedderSpec::Hashing => crate::providers::Keys::default(),
        _ => crate::providers::load_embedder_keys(scenario)?,
    };
    let embedder = crate::providers::embedder(
        &scenario.memory.embedder,
        scenario.memory.cache_entries,
        &keys,
    )?
    .embedder;
    let store = Arc::new(source.open_writer().await?);
    if let Err(e) = same_space(&*store, embedder.model()).await {
        store.close().await;
        return Err(e);
    }
    let backfill = Backfill::spawn(
        &tokio::runtime::Handle::current(),
        store.clone(),
        embedder,
        crate::run::backfill_config(scenario),
    );
    Ok((store, backfill))
}

/// What `hearsay backfill` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backfilled {
    /// Memories this process embedded.
    pub embedded: u64,
    /// Texts it sent to the embedder (a memory of several chunks is several).
    pub texts: u64,
    /// Embedding calls that failed (and were retried).
    pub failures: u64,
}

/// Embeds every memory of `source`'s run still without an embedding, with the run's own
/// embedder — beside any number of other `hearsay backfill` processes of the same run
/// (rows are claimed `FOR UPDATE SKIP LOCKED`, so none is embedded twice), never beside
/// the process writing the run. Gives up when nothing was embedded for `stall`.
pub async fn backfill(source: &RunSource, stall: Duration) -> Result<Backfilled, RunError> {
    // A SQLite run is its directory's; a PostgreSQL run is held in the database, shared
    // with other helpers.
    let dir_lock = match source.store {
        hearsay_memory::StoreLocation::Sqlite(_) => {
            source.dir.as_deref().map(DirLock::acquire).transpose()?
        }
        hearsay_memory::StoreLocation::Postgres { .. } => None,
    };
    let (store, backfill) = open_embedding(source).await?;
    let held = match &*store {
        AnyStore::Postgres(pg) => {
            use hearsay_memory::postgres::{RunHolder, RunLock};
            match RunLock::try_take(pg.pool(), pg.run_id(), RunHolder::Helper).await {
                Ok(Some(lock)) => Some(lock),
                Ok(None) => {
                    backfill.shutdown().await;
                    store.close().await;
                    return Err(RunError::Refused(format!(
                        "run {} in PostgreSQL is being written (run, resume or fork) by another \
                         process; its own worker embeds its memories: wait until it ends",
                        pg.run_id()
                    )));
                }
                Err(e) => {
                    backfill.shutdown().await;
                    store.close().await;
                    return Err(e.into());
                }
            }
        }
        AnyStore::Sqlite(_) => None,
    };
    backfill.wake();
    let mut last_change = tokio::time::Instant::now();
    let mut seen = backfill.progress();
    let outcome = loop {
        match store.lowest_unembedded().await {
            Ok(None) => break Ok(()),
            Ok(Some(_)) => {}
            Err(e) => break Err(RunError::from(e)),
        }
        if let Some(why) = backfill.refusal() {
            break Err(RunError::Refused(why));
        }
        let now = backfill.progress();
        if now.embedded != seen.embedded || now.embedded_through != seen.embedded_through {
            last_change = tokio::time::Instant::now();
            seen = now;
        } else if last_change.elapsed() >= stall {
            break Err(RunError::Refused(format!(
                "nothing was embedded for {} s ({} failed embedding calls); is the embedder up?",
                stall.as_secs(),
                now.failures
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let progress = backfill.shutdown().await;
    store.close().await;
    drop(held);
    drop(dir_lock);
    outcome?;
    Ok(Backfilled {
        embedded: progress.embedded,
        texts: progress.texts,
        failures: progress.failures,
    })
}

/// Refuses to add memories embedded by `model` to a store whose recall uses another
/// model's vectors: they could never be compared (a run re-embeds on fork or resume; a
/// reader adding one memory must not).
async fn same_space<S: Store>(store: &S, model: &str) -> Result<(), RunError> {
    let stats = store.stats().await?;
    match stats
        .models
        .iter()
        .find(|(m, v)| v.in_use > 0 && m.as_str() != model)
    {
        Some((other, v)) => Err(RunError::Refused(format!(
            "add_memory: the run's memories are embedded by {other:?} ({} of them) and the \
             scenario's embedder is {model:?}; a memory embedded by one could not be recalled \
             against the other. Fork the run with the embedder it has now to re-embed them",
            v.in_use
        ))),
        None => Ok(()),
    }
}
