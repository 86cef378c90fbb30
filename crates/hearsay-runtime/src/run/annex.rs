//! Memories added to a recorded run from outside the simulation (`hearsay mcp
//! --allow-writes`), written the way a run writes them: ids from the kernel's
//! [`MemoryLedger`], text first, embedded by the same backfill worker with the run's own
//! embedder — and only into a store of that embedder's vector space.

use std::sync::Arc;
use std::time::Duration;

use hearsay_core::{MemoryId, MemoryKind, MemoryLedger, MemoryRecord, NpcId};
use hearsay_memory::{AnyStore, Backfill, PgOptions, Store, TickWrite};

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
}

impl Annex {
    /// Opens `source`'s store for additions (on the current tokio runtime).
    pub async fn open(source: &RunSource) -> Result<Annex, RunError> {
        let lock = source.dir.as_deref().map(DirLock::acquire).transpose()?;
        let scenario = &source.scenario;
        let keys = match &scenario.memory.embedder {
            crate::scenario::EmbedderSpec::Hashing => crate::providers::Keys::default(),
            _ => crate::providers::load_embedder_keys(scenario)?,
        };
        let (embedder, _) = crate::providers::embedder(
            &scenario.memory.embedder,
            scenario.memory.cache_entries,
            &keys,
        )?;
        let store = Arc::new(source.open_store(PgOptions::default()).await?);
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
        let last = source.metadata().await?.last().map_or(0, |m| m.memory.id.0);
        Ok(Annex {
            store,
            backfill,
            ledger: tokio::sync::Mutex::new(MemoryLedger {
                next_id: last + 1,
                first_of_tick: last + 1,
                pending: Vec::new(),
            }),
            _lock: lock,
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
            content,
            importance,
            tick,
            source: None,
            core: false,
            evidence: Vec::new(),
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
