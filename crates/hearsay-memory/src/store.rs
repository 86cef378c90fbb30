//! The store interface every backend implements, and its plain data types.

use std::collections::BTreeMap;
use std::future::Future;

use hearsay_core::{MemoryId, MemoryRecord, NpcId};
use serde::{Deserialize, Serialize};

use crate::forget::Forgetting;
use crate::meta::{Forgotten, MemoryMeta};
pub use crate::scoring::RecalledMemory;
use crate::scoring::Scoring;
use crate::space::{ModelVectors, SpaceSwitch, VectorSpace};
use std::sync::RwLock;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or created.
    #[error("cannot open the memory store at {location}: {source}")]
    Open {
        /// Where (a file path or a redacted URL).
        location: String,
        /// The backend's error.
        #[source]
        source: sqlx::Error,
    },
    /// The server could not be reached (or stayed unreachable).
    #[error(
        "cannot reach {location}: {source}; is the server running, and is the URL (--database-url or DATABASE_URL) right?"
    )]
    Unreachable {
        /// Where (a redacted URL).
        location: String,
        /// The backend's error.
        #[source]
        source: sqlx::Error,
    },
    /// The database lacks something hearsay needs, with what to do about it.
    #[error("{0}")]
    Setup(String),
    /// Migrations failed.
    #[error("cannot prepare the memory store schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query failed.
    #[error("memory store query failed: {0}")]
    Query(#[from] sqlx::Error),
    /// The data in the store is not what hearsay wrote.
    #[error("memory store holds unexpected data: {0}")]
    Corrupt(String),
    /// Vectors of two models would meet: see [`crate::space`].
    #[error("{0}")]
    Space(String),
    /// A write queued earlier failed (see the SQLite store's writer): the store takes no
    /// more writes.
    #[error("writing the memory store failed: {0}")]
    Write(String),
    /// An earlier run's store file is missing, empty, not a database or damaged.
    #[error("{location}: {problem}")]
    Damaged {
        /// The store file's path, as displayed to the user.
        location: String,
        /// What is wrong with it.
        problem: String,
    },
}

/// One tick's writes, applied in a single transaction: the memories it created, the
/// memories recalled during it (their "last recalled" tick becomes `tick` and their
/// recall count grows) and the memories archived at its start.
#[derive(Clone, Debug, Default)]
pub struct TickWrite {
    /// The tick written; recalled memories get it as their "last recalled" tick.
    pub tick: u64,
    /// New memories, in id order, embedding NULL.
    pub memories: Vec<MemoryRecord>,
    /// Memories recalled this tick.
    pub recalled: Vec<MemoryId>,
    /// Memories archived at the start of this tick ([`Store::forget_due`]).
    pub archived: Vec<MemoryId>,
    /// The world state after this tick, saved in the same transaction.
    pub checkpoint: Option<SavedCheckpoint>,
}

/// A checkpoint as a store keeps it: whole, or a delta on the one saved before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedCheckpoint {
    /// The tick that runs next.
    pub next_tick: u64,
    /// `None`: a whole checkpoint (`hearsay_core::checkpoint::Checkpoint` as JSON). A
    /// delta (`CheckpointDelta` as JSON) names the whole checkpoint its chain starts from
    /// by that one's `next_tick`.
    #[serde(default)]
    pub base: Option<u64>,
    /// The JSON.
    pub state: String,
}

/// What a checkpoint is read from: the whole checkpoint a chain starts with and the
/// deltas saved after it, in tick order (none when the checkpoint is whole), and every
/// checkpoint the run saved before that chain — what each NPC believes others know is
/// saved as what it learned since the checkpoint before, so a reader gathers it from all
/// of them (`hearsay_core::checkpoint::KnownSoFar`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedChain {
    /// The checkpoints before the chain's whole one, in tick order (whole ones and deltas
    /// of earlier chains).
    pub earlier: Vec<SavedCheckpoint>,
    /// The whole checkpoint.
    pub whole: SavedCheckpoint,
    /// The deltas after it, in tick order, each on the one before.
    pub deltas: Vec<SavedCheckpoint>,
}

impl SavedChain {
    /// The tick that runs next after the chain's last checkpoint.
    pub fn next_tick(&self) -> u64 {
        self.deltas.last().unwrap_or(&self.whole).next_tick
    }

    /// [`SavedChain::of`] the rows a backend's chain query returned (columns `next_tick`,
    /// `base`, `state`), every tick checked to be a tick (never negative); `state` reads
    /// a row's JSON the way its backend keeps it.
    pub(crate) fn from_rows<R: sqlx::Row>(
        rows: &[R],
        state: impl Fn(&R) -> Result<String, StoreError>,
    ) -> Result<Option<Self>, StoreError>
    where
        for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        for<'c> &'c str: sqlx::ColumnIndex<R>,
    {
        let tick = |t: i64| {
            u64::try_from(t)
                .map_err(|_| StoreError::Corrupt(format!("checkpoints: tick {t} is negative")))
        };
        let saved = rows
            .iter()
            .map(|r| {
                Ok(SavedCheckpoint {
                    next_tick: tick(r.try_get::<i64, _>("next_tick")?)?,
                    base: r.try_get::<Option<i64>, _>("base")?.map(tick).transpose()?,
                    state: state(r)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Self::of(saved)
    }

    /// The rows a store read for a chain — every checkpoint up to the one wanted, in tick
    /// order — split at the whole checkpoint the last one's chain starts with, the chain
    /// checked: that whole checkpoint, then only deltas on it. No rows: no checkpoint.
    pub fn of(rows: Vec<SavedCheckpoint>) -> Result<Option<Self>, StoreError> {
        let Some(last) = rows.last() else {
            return Ok(None);
        };
        let broken = |problem: String| StoreError::Corrupt(format!("checkpoints: {problem}"));
        let (last_tick, start) = (last.next_tick, last.base.unwrap_or(last.next_tick));
        let mut earlier = rows;
        let split = earlier
            .iter()
            .position(|r| r.next_tick >= start)
            .unwrap_or(earlier.len());
        let mut rows = earlier.split_off(split).into_iter();
        let whole = rows
            .next()
            .filter(|w| w.next_tick == start && w.base.is_none())
            .ok_or_else(|| {
                broken(format!(
                    "the checkpoint before tick {last_tick} is a delta on the one before tick \
                     {start}, which the store does not have"
                ))
            })?;
        let deltas: Vec<SavedCheckpoint> = rows.collect();
        if let Some(stray) = deltas.iter().find(|d| d.base != Some(whole.next_tick)) {
            return Err(broken(format!(
                "the checkpoint before tick {} does not belong to the chain that starts before \
                 tick {}",
                stray.next_tick, whole.next_tick
            )));
        }
        Ok(Some(Self {
            earlier,
            whole,
            deltas,
        }))
    }
}

/// What a store must undo to go back to a checkpoint (to resume or fork a run).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rewind {
    /// Memories with this id or higher are removed (they will be created again).
    pub next_memory_id: u64,
    /// Checkpoints after this tick are removed.
    pub next_tick: u64,
    /// The last tick each memory was recalled before `next_tick` (from the event log);
    /// memories touched later get their value back from here (or their creation tick).
    pub last_recalled: BTreeMap<MemoryId, u64>,
    /// How many ticks each memory was recalled in before `next_tick` (from the event
    /// log); memories touched later get their count back from here (or 0).
    pub recall_counts: BTreeMap<MemoryId, u32>,
}

/// A memory waiting for its embedding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingEmbedding {
    /// The memory the embedding will be stored under.
    pub id: MemoryId,
    /// The text to embed (the memory's own, shared).
    pub content: std::sync::Arc<str>,
}

/// The embedding of one chunk of a memory, ready to store.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddedRow {
    /// The memory the chunk belongs to; a memory has one row per chunk.
    pub id: MemoryId,
    /// Which chunk of its content (0 for the first or only one; see [`crate::Chunking`]).
    pub chunk: u32,
    /// The vector, fitted to [`crate::VECTOR_DIMS`] and normalised.
    pub vector: crate::embed::Embedding,
    /// How many dimensions the embedder produced before fitting.
    pub dims: usize,
}

/// Counts for the run summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStats {
    /// Every memory in the store, archived ones included: the sum of `by_kind`.
    pub total: u64,
    /// Per kind (`observation`, `conversation`, …).
    pub by_kind: BTreeMap<String, u64>,
    /// Still without an embedding.
    pub unembedded: u64,
    /// Archived (forgotten): kept, but no longer recalled.
    #[serde(default)]
    pub archived: u64,
    /// Every embedding model with vectors in the store: memories whose vectors of it
    /// recall uses, and memories whose vectors of it are kept from an earlier space.
    #[serde(default)]
    pub models: BTreeMap<String, ModelVectors>,
}

impl MemoryStats {
    /// Adds (model, memories) counts: of vectors recall uses, and of kept vectors.
    pub fn count_models(&mut self, in_use: Vec<(String, i64)>, kept: Vec<(String, i64)>) {
        for (model, n) in in_use {
            self.models.entry(model).or_default().in_use += n as u64;
        }
        for (model, n) in kept {
            self.models.entry(model).or_default().kept += n as u64;
        }
    }
}

/// A memory as the store keeps it, for `hearsay inspect`: the record, its recall history,
/// whether it was forgotten, and its chunks' vectors.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredMemory {
    /// Everything recall knows of it.
    pub meta: MemoryMeta,
    /// Its chunks' vectors, in chunk order (empty until embedded).
    pub vectors: Vec<Vec<f32>>,
    /// The model and width that made `vectors` (`None` until embedded).
    pub space: Option<VectorSpace>,
}

/// A memory store. Implementations keep ids as given (they are assigned by the kernel),
/// write each tick in one transaction, and return recall results in a deterministic order
/// (score descending, ties by id ascending).
pub trait Store: Send + Sync + 'static {
    /// Rows handed to one backfill worker, held until they are saved or the claim is
    /// dropped (released). On PostgreSQL, row locks taken `FOR UPDATE SKIP LOCKED`, so
    /// several workers — in one process or many — never embed the same row; in the run's
    /// writer process, ids held in memory (no other process embeds its run).
    type Claim: Send;

    /// Writes a tick's new memories (text only) and recall touches in one transaction.
    /// A store may queue the write and return before it commits (the SQLite store does,
    /// and the PostgreSQL store in the run's writer process; see `crate::queue`): what recall reads has it at once, the file once it commits, and
    /// [`Store::flush`] waits for that.
    fn write_tick(&self, write: TickWrite) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Waits until every write made so far has committed; the failure if one did not.
    fn flush(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Ok(()) }
    }

    /// How long the store's own writer has spent in transactions, for a store that
    /// writes in the background (`None` for one whose writes the caller waits for).
    fn background_write_time(&self) -> Option<std::time::Duration> {
        None
    }

    /// The highest memory id whose write has committed (0 before any).
    fn written_through(&self) -> u64;

    /// Claims up to `limit` memories still waiting for an embedding, lowest id first
    /// (rows claimed by another worker are skipped).
    fn claim_embeddings(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<(Vec<PendingEmbedding>, Self::Claim), StoreError>> + Send;

    /// Makes `space` the store's current vector space (see [`crate::space`]), in one
    /// transaction: vectors of any other model or width move to the kept vectors, out of
    /// recall, and their memories count as not embedded; kept vectors of `space` come
    /// back. Nothing is deleted. Call before the backfill worker starts.
    fn use_space(
        &self,
        space: &VectorSpace,
    ) -> impl Future<Output = Result<SpaceSwitch, StoreError>> + Send;

    /// Saves embeddings made by `model` for rows of `claim` (every chunk of each memory),
    /// in one transaction, and makes them recallable. A memory that already has an
    /// embedding is left as it is; one archived meanwhile keeps its vectors out of recall.
    /// Vectors of another space than the current one are refused ([`StoreError::Space`]).
    fn save_embeddings(
        &self,
        claim: Self::Claim,
        rows: Vec<EmbeddedRow>,
        model: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The lowest memory id still without an embedding, claimed or not.
    fn lowest_unembedded(&self) -> impl Future<Output = Result<Option<u64>, StoreError>> + Send;

    /// The `k` embedded memories of `npc` that score highest for `query` at `tick`
    /// (see [`Scoring`]). Does not refresh "last recalled": the caller reports recalls
    /// in the tick's [`TickWrite`], so the refresh lands in the tick's transaction.
    fn recall(
        &self,
        npc: NpcId,
        query: &[f32],
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> impl Future<Output = Result<Vec<RecalledMemory>, StoreError>> + Send;

    /// The memories with these ids, in the order given (unknown ids are left out): read
    /// from the in-memory metadata, never the database.
    fn memories(&self, ids: &[MemoryId]) -> Vec<MemoryRecord>;

    /// Sets how memories fade and schedules every live memory (call before the first
    /// tick; a store starts with forgetting off).
    fn set_forgetting(&self, policy: Forgetting);

    /// Archives every memory whose retention is below the threshold at `tick`. Recall
    /// stops returning them at once (in memory); the caller persists the archive in the
    /// tick's [`TickWrite::archived`]. Cheap: it pops a schedule, never scans.
    fn forget_due(&self, tick: u64) -> Vec<Forgotten>;

    /// Background upkeep of archived memories, run by the backfill worker when it is
    /// idle, never by the tick: PostgreSQL moves their vectors out of the HNSW-indexed
    /// table into `memory_vectors_archive`. Returns how many memories it moved.
    fn tidy_archive(&self) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// Every memory of `npc` (of every NPC for `None`), live and archived, with its
    /// vectors in the current space, in id order (for `hearsay inspect` and the spread of
    /// facts by meaning; reads the database, not the recall index).
    fn memories_of(
        &self,
        npc: Option<NpcId>,
    ) -> impl Future<Output = Result<Vec<StoredMemory>, StoreError>> + Send;

    /// The vectors (in the current space, chunk order) of the memories with these ids
    /// that have them, live or archived, by id (for the similarity of a fact's words
    /// from hop to hop; reads the database).
    fn vectors_of(
        &self,
        ids: &[MemoryId],
    ) -> impl Future<Output = Result<BTreeMap<MemoryId, Vec<Vec<f32>>>, StoreError>> + Send;

    /// Every memory's metadata, live and archived, without vectors, in id order (for
    /// readers of a whole run: fact spread, timelines; reads the database).
    fn metadata(&self) -> impl Future<Output = Result<Vec<MemoryMeta>, StoreError>> + Send;

    /// [`Store::metadata`] handed to `each` a row at a time as it is read, never held
    /// whole: for a reader that writes each row out as it goes (`hearsay export` of a run
    /// of millions of memories). An error of `each` ends the read and is returned.
    fn each_meta<E: From<StoreError> + Send>(
        &self,
        each: impl FnMut(MemoryMeta) -> Result<(), E> + Send,
    ) -> impl Future<Output = Result<(), E>> + Send;

    /// Counts for the summary.
    fn stats(&self) -> impl Future<Output = Result<MemoryStats, StoreError>> + Send;

    /// Vector bytes recall has read so far, for throughput figures; 0 for a store that
    /// does not count (PostgreSQL reads them on the server).
    fn bytes_scanned(&self) -> u64 {
        0
    }

    /// The latest checkpoint with `next_tick` at most `at_most` (any, if `None`), as the
    /// chain it is read from, with every checkpoint saved before that chain.
    fn latest_checkpoint(
        &self,
        at_most: Option<u64>,
    ) -> impl Future<Output = Result<Option<SavedChain>, StoreError>> + Send;

    /// Goes back to a checkpoint: see [`Rewind`].
    fn rewind(&self, rewind: Rewind) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Closes the store's connections (flushing what the backend buffers).
    fn close(&self) -> impl Future<Output = ()> + Send;
}

/// A store's current space, and the check every save goes through.
#[derive(Debug, Default)]
pub struct SpaceGuard(RwLock<Option<VectorSpace>>);

impl SpaceGuard {
    /// The current space, if one was chosen or established.
    pub fn get(&self) -> Option<VectorSpace> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Makes `space` current.
    pub fn set(&self, space: VectorSpace) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(space);
    }

    /// Checks rows about to be saved as `model`'s. With no current space yet, `others`
    /// (called once) says whether the store holds vectors of another space; if it does
    /// the save is refused (the caller must [`crate::Store::use_space`] first), else the
    /// rows' space becomes current. A width other than the space's is refused too: the
    /// server now serves another model under the same name.
    pub async fn check_save<F>(
        &self,
        model: &str,
        rows: &[EmbeddedRow],
        others: F,
    ) -> Result<(), StoreError>
    where
        F: std::future::Future<Output = Result<Option<String>, StoreError>>,
    {
        let Some(first) = rows.first() else {
            return Ok(());
        };
        let mut space = match self.get() {
            Some(space) => space,
            None => {
                if let Some(other) = others.await? {
                    return Err(StoreError::Space(format!(
                        "the store holds vectors of {other}; vectors of {model} cannot join them \
                         (choose the store's vector space first, which sets the others aside)"
                    )));
                }
                VectorSpace::new(model, None)
            }
        };
        if space.model != model {
            return Err(StoreError::Space(format!(
                "the store's vectors are of {space}, not of {model}: recall would compare two \
                 models' vectors"
            )));
        }
        let dims = space.dims.unwrap_or(first.dims);
        if let Some(bad) = rows.iter().find(|r| r.dims != dims) {
            return Err(StoreError::Space(format!(
                "the embedder {model:?} answered with {} dimensions where its earlier vectors \
                 have {dims}: the server now serves another model under that name. Stop it, \
                 and fork or resume the run once the server is right (a changed model is \
                 re-embedded)",
                bad.dims
            )));
        }
        if space.dims.is_none() {
            space.dims = Some(dims);
            self.set(space);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(dims: usize) -> EmbeddedRow {
        EmbeddedRow {
            id: MemoryId(1),
            chunk: 0,
            vector: crate::Embedding::of_fitted(vec![0.0; crate::VECTOR_DIMS]),
            dims,
        }
    }

    #[tokio::test]
    async fn a_save_of_another_model_or_width_is_refused() {
        let guard = SpaceGuard::default();
        let none = async { Ok(None) };
        guard
            .check_save("e5", &[row(384)], none)
            .await
            .expect("the first save sets the space");
        assert_eq!(guard.get(), Some(VectorSpace::new("e5", Some(384))));
        let refused = guard
            .check_save("hashing-v1", &[row(1536)], async { Ok(None) })
            .await;
        assert!(matches!(refused, Err(StoreError::Space(m)) if m.contains("not of hashing-v1")));
        let wider = guard
            .check_save("e5", &[row(384), row(768)], async { Ok(None) })
            .await;
        assert!(matches!(wider, Err(StoreError::Space(m)) if m.contains("768 dimensions")));

        let fresh = SpaceGuard::default();
        let mixed = fresh
            .check_save("e5", &[row(384)], async {
                Ok(Some("hashing-v1".to_owned()))
            })
            .await;
        assert!(matches!(mixed, Err(StoreError::Space(m)) if m.contains("hashing-v1")));
        assert_eq!(fresh.get(), None, "nothing was established");
    }
}

#[cfg(test)]
mod chain_tests {
    use super::{SavedChain, SavedCheckpoint};

    fn row(next_tick: u64, base: Option<u64>) -> SavedCheckpoint {
        SavedCheckpoint {
            next_tick,
            base,
            state: String::new(),
        }
    }

    #[test]
    fn a_chain_is_a_whole_checkpoint_and_its_own_deltas_after_the_earlier_ones() {
        assert_eq!(SavedChain::of(vec![]).expect("empty"), None);
        let chain = SavedChain::of(vec![row(4, None), row(5, Some(4)), row(6, Some(4))])
            .expect("reads")
            .expect("some");
        assert_eq!(chain.next_tick(), 6);
        assert_eq!(chain.deltas.len(), 2);
        // A delta whose whole checkpoint is gone, or one of another chain: refused.
        assert!(SavedChain::of(vec![row(5, Some(4))]).is_err());
        assert!(SavedChain::of(vec![row(4, None), row(5, Some(1))]).is_err());
        assert!(SavedChain::of(vec![row(4, None), row(5, Some(4)), row(6, Some(5))]).is_err());
        // The rows before the chain's whole checkpoint are its earlier ones.
        let chain = SavedChain::of(vec![
            row(1, None),
            row(2, Some(1)),
            row(4, None),
            row(5, Some(4)),
        ])
        .expect("reads")
        .expect("some");
        assert_eq!(chain.earlier, vec![row(1, None), row(2, Some(1))]);
        assert_eq!(
            (chain.whole, chain.deltas),
            (row(4, None), vec![row(5, Some(4))])
        );
        let whole = SavedChain::of(vec![row(4, None), row(5, None)])
            .expect("reads")
            .expect("some");
        assert_eq!(
            (whole.earlier, whole.whole),
            (vec![row(4, None)], row(5, None))
        );
    }
}
