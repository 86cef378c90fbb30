//! The SQLite store's writes, on the store's write queue ([`crate::queue`]): a tick's
//! memories, recall touches, archive marks and checkpoint in one transaction, and the
//! backfill's vectors, each batch in one.
//!
//! Why: the file is the run's record for later (resume, fork, inspect, export), not what
//! the next tick reads, so a tick need not wait for SQLite. A tick's transaction now
//! overlaps the next tick's work, on the other core. A crash loses at most the writes
//! still queued, never part of one: the checkpoint on disk is still the truth
//! (`hearsay resume` cuts the logs back to it and takes the ticks decided since from the
//! tape), and a memory whose vectors were lost is embedded again. A failed write is
//! reported with SQLite's own words, so a full disk is still reported as one.

use std::collections::BTreeMap;

use sqlx::SqlitePool;

use super::vectors::PackedVectors;
use super::{ADD_SPACE, evidence_json, kind_code, pack_checkpoint, to_i64};
use crate::queue::{Sink, WriteQueue};
use crate::store::{StoreError, TickWrite};

/// The store's queue.
pub(super) type Writer = WriteQueue<SqliteSink>;

/// Writes through the store's one connection.
pub(super) struct SqliteSink(pub(super) SqlitePool);

/// A batch of the backfill's vectors.
pub(super) struct Vectors {
    pub(super) packed: PackedVectors,
    /// The embedded memories by the width their model made.
    pub(super) by_dims: BTreeMap<usize, Vec<i64>>,
    pub(super) model: String,
}

impl Sink for SqliteSink {
    type Tick = TickWrite;
    type Vectors = Vectors;

    async fn tick(&self, write: &TickWrite) -> Result<(), StoreError> {
        write_tick(&self.0, write).await
    }

    /// Each batch in a transaction of its own (SQLite has no round trips to save).
    async fn vectors(&self, batches: Vec<Vectors>) -> Result<(), StoreError> {
        for v in &batches {
            write_vectors(&self.0, &v.packed, &v.by_dims, &v.model).await?;
        }
        Ok(())
    }
}

/// A tick's memories (text only), recall touches, archive marks and checkpoint, in one
/// transaction. One statement per kind of write, whatever the tick's size: the rows
/// travel as one JSON array and SQLite unpacks them with `jsonb_each`, which parses the
/// text once (`json_each` hands each element on as text that every `->>` parses again).
async fn write_tick(pool: &SqlitePool, write: &TickWrite) -> Result<(), StoreError> {
    let tick = to_i64(write.tick, "tick")?;
    // Compressed before the transaction, which holds the file's write lock.
    let packed = write
        .checkpoint
        .as_ref()
        .map(|c| pack_checkpoint(&c.state))
        .transpose()?;
    // Serialized straight from the records (no JSON values built on the way).
    let rows = serde_json::to_string(&MemoryRows(&write.memories))
        .map_err(|e| StoreError::Corrupt(format!("a tick's memories as JSON: {e}")))?;
    let recalled: Vec<u64> = write.recalled.iter().map(|id| id.0).collect();
    let mut tx = pool.begin().await?;
    if !write.memories.is_empty() {
        sqlx::query(
            "INSERT INTO memory_rows (id, npc, kind, content, importance, tick_created, \
             source_npc, core, evidence) \
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, \
             value ->> 6, value ->> 7, value ->> 8 FROM jsonb_each(?) \
             WHERE true ORDER BY key ON CONFLICT (id) DO NOTHING",
        )
        .bind(rows)
        .execute(&mut *tx)
        .await?;
    }
    if !recalled.is_empty() {
        // Once per tick: a repeated write of the same tick counts nothing twice.
        sqlx::query(
            "INSERT INTO memory_recalls (id, tick_last_recalled, recall_count) \
             SELECT value, ?1, 1 FROM jsonb_each(?2) WHERE true \
             ON CONFLICT (id) DO UPDATE SET recall_count = recall_count + 1, \
             tick_last_recalled = ?1 WHERE tick_last_recalled < ?1",
        )
        .bind(tick)
        .bind(serde_json::Value::from(recalled).to_string())
        .execute(&mut *tx)
        .await?;
    }
    if !write.archived.is_empty() {
        let archived: Vec<u64> = write.archived.iter().map(|id| id.0).collect();
        sqlx::query(
            "UPDATE memory_rows SET forgotten_tick = ? \
             WHERE id IN (SELECT value FROM jsonb_each(?)) AND forgotten_tick IS NULL",
        )
        .bind(tick)
        .bind(serde_json::Value::from(archived).to_string())
        .execute(&mut *tx)
        .await?;
    }
    if let (Some(checkpoint), Some(state)) = (&write.checkpoint, packed) {
        sqlx::query(
            "INSERT INTO checkpoints (next_tick, base, state) VALUES (?, ?, ?) \
             ON CONFLICT (next_tick) DO UPDATE SET base = excluded.base, state = excluded.state",
        )
        .bind(to_i64(checkpoint.next_tick, "tick")?)
        .bind(checkpoint.base.map(|b| to_i64(b, "tick")).transpose()?)
        .bind(state)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A tick's memories as the JSON array `write_tick` unpacks: one array per memory, its
/// columns in the statement's order.
struct MemoryRows<'a>(&'a [hearsay_core::MemoryRecord]);

impl serde::Serialize for MemoryRows<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|m| {
            (
                m.id.0,
                m.npc.0,
                kind_code(m.kind),
                m.content.as_str(),
                m.importance,
                m.tick,
                m.source.map(|s| s.0),
                m.core,
                evidence_json(m),
            )
        }))
    }
}

/// A batch of vectors in one transaction: the vectors first, then their memories are
/// marked with the space (model and width) that made them.
async fn write_vectors(
    pool: &SqlitePool,
    packed: &PackedVectors,
    by_dims: &BTreeMap<usize, Vec<i64>>,
    model: &str,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    packed.write(&mut tx).await?;
    for (dims, ids) in by_dims {
        sqlx::query(ADD_SPACE)
            .bind(model)
            .bind(*dims as i64)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE memory_rows SET space = \
             (SELECT space FROM vector_spaces WHERE model = ?1 AND dims = ?2) \
             WHERE id IN (SELECT value FROM jsonb_each(?3)) AND space IS NULL",
        )
        .bind(model)
        .bind(*dims as i64)
        .bind(serde_json::Value::from(ids.as_slice()).to_string())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
