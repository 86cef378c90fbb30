//! A store of either backend behind one type, chosen once: callers that open a run's
//! store (a run, a resume, a fork, the readers, MCP) hold an [`AnyStore`] and never
//! dispatch on a backend's name again.

use std::path::PathBuf;

use hearsay_core::{MemoryId, MemoryRecord, NpcId};

use crate::forget::Forgetting;
use crate::index::{Forgotten, MemoryMeta};
use crate::postgres::{PgClaim, PgStore};
use crate::scoring::Scoring;
use crate::space::{SpaceSwitch, VectorSpace};
use crate::sqlite::SqliteStore;
use crate::store::{
    EmbeddedRow, MemoryStats, PendingEmbedding, RecalledMemory, Rewind, SavedChain, Store,
    StoreError, StoredMemory, TickWrite,
};

/// Where a run's memories are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file (`memories.db` in the run directory).
    Sqlite(PathBuf),
    /// A run in a PostgreSQL database.
    Postgres {
        /// The database.
        url: String,
        /// The run's id in `runs`.
        run_id: i64,
    },
}

/// The store of a run, on either backend.
#[derive(Debug)]
pub enum AnyStore {
    /// Embedded SQLite.
    Sqlite(SqliteStore),
    /// PostgreSQL + pgvector.
    Postgres(PgStore),
}

impl From<SqliteStore> for AnyStore {
    fn from(s: SqliteStore) -> Self {
        AnyStore::Sqlite(s)
    }
}

impl From<PgStore> for AnyStore {
    fn from(s: PgStore) -> Self {
        AnyStore::Postgres(s)
    }
}

/// A claim of either backend.
pub enum AnyClaim {
    /// SQLite's (one writer: nothing to hold).
    Sqlite(()),
    /// PostgreSQL's row locks.
    Postgres(PgClaim),
}

/// Runs `$call` on the backend's store.
macro_rules! each {
    ($self:expr, |$s:ident| $call:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $call,
            AnyStore::Postgres($s) => $call,
        }
    };
}

impl AnyStore {
    /// The PostgreSQL run id, if the store is a PostgreSQL run.
    pub fn run_id(&self) -> Option<i64> {
        match self {
            AnyStore::Sqlite(_) => None,
            AnyStore::Postgres(p) => Some(p.run_id()),
        }
    }
}

impl Store for AnyStore {
    type Claim = AnyClaim;

    async fn write_tick(&self, write: TickWrite) -> Result<(), StoreError> {
        each!(self, |s| s.write_tick(write).await)
    }

    async fn flush(&self) -> Result<(), StoreError> {
        each!(self, |s| s.flush().await)
    }

    fn background_write_time(&self) -> Option<std::time::Duration> {
        each!(self, |s| s.background_write_time())
    }

    fn written_through(&self) -> u64 {
        each!(self, |s| s.written_through())
    }

    async fn claim_embeddings(
        &self,
        limit: usize,
    ) -> Result<(Vec<PendingEmbedding>, AnyClaim), StoreError> {
        match self {
            AnyStore::Sqlite(s) => {
                let (rows, claim) = s.claim_embeddings(limit).await?;
                Ok((rows, AnyClaim::Sqlite(claim)))
            }
            AnyStore::Postgres(s) => {
                let (rows, claim) = s.claim_embeddings(limit).await?;
                Ok((rows, AnyClaim::Postgres(claim)))
            }
        }
    }

    async fn use_space(&self, space: &VectorSpace) -> Result<SpaceSwitch, StoreError> {
        each!(self, |s| s.use_space(space).await)
    }

    async fn save_embeddings(
        &self,
        claim: AnyClaim,
        rows: Vec<EmbeddedRow>,
        model: &str,
    ) -> Result<(), StoreError> {
        match (self, claim) {
            (AnyStore::Sqlite(s), AnyClaim::Sqlite(c)) => s.save_embeddings(c, rows, model).await,
            (AnyStore::Postgres(s), AnyClaim::Postgres(c)) => {
                s.save_embeddings(c, rows, model).await
            }
            _ => Err(StoreError::Corrupt(
                "a claim was saved to another store".into(),
            )),
        }
    }

    async fn lowest_unembedded(&self) -> Result<Option<u64>, StoreError> {
        each!(self, |s| s.lowest_unembedded().await)
    }

    async fn recall(
        &self,
        npc: NpcId,
        query: &[f32],
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> Result<Vec<RecalledMemory>, StoreError> {
        each!(self, |s| s.recall(npc, query, tick, k, scoring).await)
    }

    fn memories(&self, ids: &[MemoryId]) -> Vec<MemoryRecord> {
        each!(self, |s| s.memories(ids))
    }

    fn set_forgetting(&self, policy: Forgetting) {
        each!(self, |s| s.set_forgetting(policy))
    }

    fn forget_due(&self, tick: u64) -> Vec<Forgotten> {
        each!(self, |s| s.forget_due(tick))
    }

    async fn tidy_archive(&self) -> Result<usize, StoreError> {
        each!(self, |s| s.tidy_archive().await)
    }

    async fn memories_of(&self, npc: Option<NpcId>) -> Result<Vec<StoredMemory>, StoreError> {
        each!(self, |s| s.memories_of(npc).await)
    }

    async fn vectors_of(
        &self,
        ids: &[MemoryId],
    ) -> Result<std::collections::BTreeMap<MemoryId, Vec<Vec<f32>>>, StoreError> {
        each!(self, |s| s.vectors_of(ids).await)
    }

    async fn metadata(&self) -> Result<Vec<MemoryMeta>, StoreError> {
        each!(self, |s| s.metadata().await)
    }

    async fn each_meta<E: From<StoreError> + Send>(
        &self,
        each: impl FnMut(MemoryMeta) -> Result<(), E> + Send,
    ) -> Result<(), E> {
        each!(self, |s| s.each_meta(each).await)
    }

    async fn stats(&self) -> Result<MemoryStats, StoreError> {
        each!(self, |s| s.stats().await)
    }

    fn bytes_scanned(&self) -> u64 {
        each!(self, |s| s.bytes_scanned())
    }

    async fn latest_checkpoint(
        &self,
        at_most: Option<u64>,
    ) -> Result<Option<SavedChain>, StoreError> {
        each!(self, |s| s.latest_checkpoint(at_most).await)
    }

    async fn rewind(&self, rewind: Rewind) -> Result<(), StoreError> {
        each!(self, |s| s.rewind(rewind).await)
    }

    async fn close(&self) {
        each!(self, |s| s.close().await)
    }
}
