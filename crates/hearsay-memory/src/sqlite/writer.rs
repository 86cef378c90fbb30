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
/// transaction. The memories go [`ROWS_PER_INSERT`] to a statement, their values bound;
/// the touches and marks, lists of ids, as one JSON array each that SQLite unpacks with
/// `jsonb_each`, which parses the text once (`json_each` hands each element on as text
/// that every `->>` parses again).
async fn write_tick(pool: &SqlitePool, write: &TickWrite) -> Result<(), StoreError> {
    let tick = to_i64(write.tick, "tick")?;
    // Compressed before the transaction, which holds the file's write lock.
    let packed = write
        .checkpoint
        .as_ref()
        .map(|c| pack_checkpoint(&c.state))
        .transpose()?;
    let recalled: Vec<u64> = write.recalled.iter().map(|id| id.0).collect();
    let mut tx = pool.begin().await?;
    for rows in write.memories.chunks(ROWS_PER_INSERT) {
        insert_rows(&mut tx, rows).await?;
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

/// Rows per `INSERT` of a tick's memories: 9 parameters each, far below SQLite's
/// limit of 32,766 per statement. One prepared statement serves every full chunk.
const ROWS_PER_INSERT: usize = 128;

/// Inserts `rows` (at most [`ROWS_PER_INSERT`]) with one statement, each value bound as
/// a parameter. They used to travel as one JSON array unpacked by `jsonb_each`, but
/// extracting nine values from JSON per row cost the writer more than binding them.
async fn insert_rows(
    tx: &mut sqlx::SqliteConnection,
    rows: &[hearsay_core::MemoryRecord],
) -> Result<(), StoreError> {
    const COLUMNS: &str = "INSERT INTO memory_rows (id, npc, kind, content, importance, \
                           tick_created, source_npc, core, evidence) VALUES ";
    static FULL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let values = |n: usize| {
        let mut sql = String::from(COLUMNS);
        for i in 0..n {
            sql.push_str(if i == 0 { "" } else { "," });
            sql.push_str("(?,?,?,?,?,?,?,?,?)");
        }
        sql.push_str(" ON CONFLICT (id) DO NOTHING");
        sql
    };
    let sql: std::borrow::Cow<'_, str> = if rows.len() == ROWS_PER_INSERT {
        FULL.get_or_init(|| values(ROWS_PER_INSERT)).as_str().into()
    } else {
        values(rows.len()).into()
    };
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for m in rows {
        query = query
            .bind(to_i64(m.id.0, "memory id")?)
            .bind(i64::from(m.npc.0))
            .bind(kind_code(m.kind))
            .bind(m.content.as_str())
            .bind(i64::from(m.importance))
            .bind(to_i64(m.tick, "tick")?)
            .bind(m.source.map(|s| i64::from(s.0)))
            .bind(m.core)
            .bind(evidence_json(m));
    }
    query.execute(&mut *tx).await?;
    Ok(())
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
