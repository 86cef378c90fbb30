//! Memory for hearsay's NPCs: stores, embedders, recall and the embedding backfill worker.
//!
//! This crate owns how memories are kept, found again and forgotten: the [`Store`] trait
//! with its embedded SQLite and its PostgreSQL + pgvector backends (the only crate that
//! uses sqlx), the [`Embedder`] trait and the offline [`HashingEmbedder`], exact scored
//! recall (relevance + recency + importance), [`Forgetting`] (an Ebbinghaus curve in
//! ticks; archived, never deleted), [`Chunking`] of long texts, and the [`Backfill`]
//! worker that embeds memories written as text first (`embedding IS NULL`) off the tick
//! thread, and one vector space per store ([`space`]): recall never compares vectors of
//! two models, and a change of embedder sets the old vectors aside and embeds again;
//! and, for runs shared through one PostgreSQL, who holds a run
//! ([`postgres::RunLock`]) and the records of sharded sweeps ([`sweeps`]).
//!
//! It must never decide anything about the simulation: it does not create memories (the
//! kernel does, with ids), never reorders or invents them, and never blocks the tick
//! thread — the worker is a tokio task and recall is read-only over an in-memory index.

pub mod any;
pub mod backfill;
pub mod cache;
pub mod chunk;
pub mod embed;
pub mod forget;
pub mod hashing;
pub mod index;
pub mod ledger;
pub mod meta;
pub mod migrations;
pub mod postgres;
mod queue;
pub mod scoring;
pub mod space;
pub mod sqlite;
pub mod store;
pub mod sweeps;

pub use any::{AnyClaim, AnyStore, StoreLocation};
pub use backfill::{Backfill, BackfillConfig, Progress};
pub use cache::CachedEmbedder;
pub use chunk::Chunking;
pub use embed::{DenseQuery, EmbedError, Embedder, Embedding, VECTOR_DIMS, fit_dims};
pub use forget::Forgetting;
pub use hashing::HashingEmbedder;
pub use index::{Forgotten, MemoryMeta};
pub use postgres::{PgOptions, PgStore};
pub use scoring::Scoring;
pub use space::{ModelVectors, SpaceSwitch, VectorSpace};
pub use sqlite::SqliteStore;
pub use store::{
    EmbeddedRow, MemoryStats, PendingEmbedding, RecalledMemory, Rewind, SavedChain,
    SavedCheckpoint, Store, StoreError, StoredMemory, TickWrite,
};

/// A boxed, sendable future: the return type of object-safe async trait methods.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What the crate's tests share.
#[cfg(test)]
pub(crate) mod testing {
    /// A fixed LCG (MMIX's constants), the tests' source of numbers: each call, the next
    /// state (its high bits, `>> 33`, are the better ones).
    pub(crate) fn lcg(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            state
        }
    }
}
