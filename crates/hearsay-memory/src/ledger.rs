//! The in-memory half every store keeps in step with its database: each memory's
//! metadata and forgetting schedule ([`MetaTable`](crate::index::MetaTable), inside whatever the backend keeps in
//! memory), and the high-water mark of committed ids. Both stores write a tick and
//! reload a run through the same bookkeeping, so neither can drift from the other.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use hearsay_core::{MemoryId, MemoryRecord};

use crate::forget::Forgetting;
pub use crate::index::Metadata;
use crate::store::{EmbeddedRow, PendingEmbedding, TickWrite};

/// A store's in-memory state and its committed high-water mark.
#[derive(Debug, Default)]
pub struct Ledger<T> {
    state: RwLock<T>,
    /// Highest committed memory id: read by the backfill worker *before* it looks for
    /// pending rows, so "nothing pending" proves every id up to it is embedded.
    written_through: AtomicU64,
}

impl<T: Metadata> Ledger<T> {
    /// A ledger of `state`, with every id up to `written_through` committed.
    pub fn new(state: T, written_through: u64) -> Self {
        Self {
            state: RwLock::new(state),
            written_through: AtomicU64::new(written_through),
        }
    }

    /// The state, to read. Never held across an await.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        // A poisoned lock means a panic elsewhere already failed the run; the state is
        // only ever changed by whole-row operations, so it stays consistent.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, to change. Never held across an await.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Before a tick's transaction: its new memories are known (not yet recallable).
    pub fn before_write(&self, write: &TickWrite) {
        let mut state = self.write();
        for m in &write.memories {
            state.table_mut().add(m);
        }
    }

    /// After a tick's transaction committed: its recalls count, and its ids are written.
    pub fn committed(&self, write: &TickWrite) {
        self.written(
            write.tick,
            &write.recalled,
            write.memories.last().map(|m| m.id),
        );
    }

    /// After a tick's write is as good as committed (committed, or queued where nothing
    /// can overtake it): the memories recalled in `tick` count as recalled, and every id
    /// up to `last` as written.
    pub fn written(&self, tick: u64, recalled: &[MemoryId], last: Option<MemoryId>) {
        {
            let mut state = self.write();
            state.table_mut().touch_all(recalled, tick);
        }
        if let Some(last) = last {
            self.written_through.fetch_max(last.0, Ordering::SeqCst);
        }
    }

    /// Replaces the state with one loaded from the database (keeping the forgetting
    /// policy) and sets the high-water mark.
    pub fn replace(&self, mut state: T, written_through: u64) {
        let policy = self.read().table().forgetting();
        state.table_mut().set_forgetting(policy);
        *self.write() = state;
        self.written_through
            .store(written_through, Ordering::SeqCst);
    }

    /// The highest memory id whose write has committed.
    pub fn written_through(&self) -> u64 {
        self.written_through.load(Ordering::SeqCst)
    }

    /// The memories with these ids, in the order given (unknown ids left out).
    pub fn memories(&self, ids: &[MemoryId]) -> Vec<MemoryRecord> {
        let state = self.read();
        ids.iter()
            .filter_map(|&id| state.table().get(id).map(|m| m.memory.clone()))
            .collect()
    }

    /// Up to `limit` memories still waiting for a vector, lowest id first, none above the
    /// written mark (so no vector is saved before its row) and none of `held` (claimed
    /// by another worker). For a store whose writer process is the only one embedding.
    pub fn pending(&self, limit: usize, held: &BTreeSet<MemoryId>) -> Vec<PendingEmbedding> {
        let through = MemoryId(self.written_through());
        let state = self.read();
        // Every held id is still unembedded, so this window holds `limit` others if
        // there are that many.
        state
            .table()
            .unembedded(through, limit.saturating_add(held.len()))
            .into_iter()
            .filter(|m| !held.contains(&m.memory.id))
            .take(limit)
            .map(|m| PendingEmbedding {
                id: m.memory.id,
                content: m.memory.content.clone(),
            })
            .collect()
    }

    /// The lowest id of a memory without a vector.
    pub fn lowest_unembedded(&self) -> Option<u64> {
        self.read().table().lowest_unembedded().map(|id| id.0)
    }

    /// `rows` less those of memories that have a vector already (or are unknown): a
    /// memory is never embedded twice.
    pub fn still_waiting(&self, rows: Vec<EmbeddedRow>) -> Vec<EmbeddedRow> {
        let state = self.read();
        rows.into_iter()
            .filter(|r| state.table().get(r.id).is_some_and(|m| !m.embedded))
            .collect()
    }

    /// Sets how memories fade.
    pub fn set_forgetting(&self, policy: Forgetting) {
        self.write().table_mut().set_forgetting(policy);
    }
}
