//! What opening a run reads of its whole file — every memory's metadata (the index, an
//! export, `inspect`) and the chunks that name each live memory's vectors — in batches
//! of rows that SQLite packs into one JSON array each, not row by row.
//!
//! sqlx steps a statement on its connection's worker thread and hands every row over to
//! the caller's task on its own, with a copy of each of its values: reading the 2.65
//! million memories of a 1,000-NPC town after 2,000 ticks took 16 s that way, the file
//! itself about 3 s. A batch of a few thousand rows, built by SQLite's `json_array` and
//! `json_group_array` (in the order its `ORDER BY` says) and parsed here, crosses once.

use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId};
use serde::Deserialize;
use sqlx::Row;
use sqlx::sqlite::SqlitePool;

use crate::index::MemoryMeta;
use crate::space::VectorSpace;
use crate::store::StoreError;

/// Rows per statement: about 400 KB of JSON for a town's short memories, so the text
/// held at once stays small whatever the run's length.
const BATCH_ROWS: i64 = 4096;

/// The columns of a memory (the `memories` view) and its recall state, in the order of
/// [`Packed`]'s fields.
const COLUMNS: &str = "m.id, m.npc, m.kind, m.content, m.importance, m.tick_created, \
     COALESCE(r.tick_last_recalled, m.tick_created), m.source_npc, m.core, m.evidence, \
     COALESCE(r.recall_count, 0), m.forgotten_tick, m.embedding_model, m.embedding_dims";

/// One row of a batch, as `json_array` wrote it.
#[derive(Deserialize)]
struct Packed(
    i64,
    i64,
    String,
    std::sync::Arc<str>,
    i64,
    i64,
    i64,
    Option<i64>,
    i64,
    Option<String>,
    i64,
    Option<i64>,
    Option<String>,
    Option<i64>,
);

/// Each memory (of `npc` alone, if given) in id order, with the model and width of its
/// vectors (`None` until embedded), handed to `each` a batch at a time.
pub(super) async fn each_memory<E: From<StoreError>>(
    pool: &SqlitePool,
    npc: Option<NpcId>,
    each: impl FnMut(MemoryMeta, Option<VectorSpace>) -> Result<(), E>,
) -> Result<(), E> {
    each_memory_in(pool, npc, BATCH_ROWS, each).await
}

/// [`each_memory`], `batch_rows` rows per statement.
pub(super) async fn each_memory_in<E: From<StoreError>>(
    pool: &SqlitePool,
    npc: Option<NpcId>,
    batch_rows: i64,
    mut each: impl FnMut(MemoryMeta, Option<VectorSpace>) -> Result<(), E>,
) -> Result<(), E> {
    let npc = npc.map(|n| i64::from(n.0));
    let sql = format!(
        "SELECT json_group_array(json_array({COLUMNS}) ORDER BY m.id) AS batch, \
                count(*) AS n \
         FROM (SELECT * FROM memories WHERE id > ?1 AND (?2 IS NULL OR npc = ?2) \
               ORDER BY id LIMIT ?3) m \
         LEFT JOIN memory_recalls r ON r.id = m.id"
    );
    let mut after = i64::MIN;
    loop {
        let query = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(after)
            .bind(npc)
            .bind(batch_rows);
        let rows = batch::<Packed>(pool, query).await?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = last.0;
        for packed in rows {
            let (meta, space) = unpack(packed)?;
            each(meta, space)?;
        }
    }
}

/// Each live (not archived) memory's chunks as `(memory id, vector id)`, in id and chunk
/// order, handed to `each` a batch at a time.
pub(super) async fn each_live_chunk(
    pool: &SqlitePool,
    each: impl FnMut(i64, i64) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    each_live_chunk_in(pool, BATCH_ROWS, each).await
}

/// [`each_live_chunk`], `batch_rows` chunks per statement.
pub(super) async fn each_live_chunk_in(
    pool: &SqlitePool,
    batch_rows: i64,
    mut each: impl FnMut(i64, i64) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    // Batches by the key, (id, chunk) after the last one's: as many statements as the
    // rows need, whatever the ids.
    const SQL: &str = "SELECT json_group_array(json_array(id, chunk, vid) ORDER BY id, chunk) \
                AS batch, count(*) AS n \
         FROM (SELECT c.id, c.chunk, c.vid FROM memory_chunk_vectors c \
               JOIN memory_rows m ON m.id = c.id \
               WHERE m.forgotten_tick IS NULL AND (c.id, c.chunk) > (?1, ?2) \
               ORDER BY c.id, c.chunk LIMIT ?3)";
    let mut after = (i64::MIN, i64::MIN);
    loop {
        let query = sqlx::query(SQL)
            .bind(after.0)
            .bind(after.1)
            .bind(batch_rows);
        let rows = batch::<(i64, i64, i64)>(pool, query).await?;
        let Some(&(id, chunk, _)) = rows.last() else {
            return Ok(());
        };
        after = (id, chunk);
        for (id, _, vid) in rows {
            each(id, vid)?;
        }
    }
}

/// The rows of one packed batch (columns `batch` and `n`), in the order it holds them.
async fn batch<T: serde::de::DeserializeOwned>(
    pool: &SqlitePool,
    query: sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
) -> Result<Vec<T>, StoreError> {
    let row = query.fetch_one(pool).await?;
    if row.try_get::<i64, _>("n")? == 0 {
        return Ok(Vec::new());
    }
    let text: String = row.try_get("batch")?;
    serde_json::from_str(&text)
        .map_err(|e| StoreError::Corrupt(format!("a batch of rows read back: {e}")))
}

/// A row as the index and the store's readers know it.
fn unpack(p: Packed) -> Result<(MemoryMeta, Option<VectorSpace>), StoreError> {
    let Packed(
        id,
        npc,
        kind,
        content,
        importance,
        tick,
        last_recalled,
        source,
        core,
        evidence,
        recalls,
        forgotten,
        model,
        dims,
    ) = p;
    let evidence = match evidence {
        None => Vec::new(),
        Some(text) => serde_json::from_str::<Vec<u64>>(&text)
            .map_err(|e| StoreError::Corrupt(format!("malformed evidence {text:?}: {e}")))?
            .into_iter()
            .map(MemoryId)
            .collect(),
    };
    let memory = MemoryRecord {
        id: MemoryId(id as u64),
        npc: NpcId(npc as u32),
        kind: MemoryKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown memory kind {kind:?}")))?,
        content,
        importance: importance as u8,
        tick: tick as u64,
        source: source.map(|s| NpcId(s as u32)),
        core: core != 0,
        evidence,
        place: Default::default(),
    };
    let meta = MemoryMeta {
        memory,
        last_recalled: last_recalled as u64,
        recalls: recalls as u32,
        forgotten: forgotten.map(|t| t as u64),
        embedded: model.is_some(),
    };
    Ok((
        meta,
        model.map(|m| VectorSpace::new(m, dims.map(|d| d as usize))),
    ))
}
