//! The SQLite store's writes, on the store's write queue ([`crate::queue`]): a tick's
//! memories, archive marks and checkpoint in one transaction, with the recall touches of
//! the last ticks every [`TOUCH_TICKS`] ticks, and the backfill's vectors, the batches
//! waiting together (up to the sink's `VECTORS_AT_ONCE`) in one.
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
pub(super) struct SqliteSink {
    pool: SqlitePool,
    /// Told after each tick's commit (the background checkpointer, [`super::wal`]).
    committed: std::sync::Arc<tokio::sync::Notify>,
    /// Recall touches not written yet (only the writer's task takes the lock).
    touches: std::sync::Mutex<Touches>,
}

impl SqliteSink {
    pub(super) fn new(pool: SqlitePool, committed: std::sync::Arc<tokio::sync::Notify>) -> Self {
        Self {
            pool,
            committed,
            touches: std::sync::Mutex::default(),
        }
    }

    /// The touches gathered so far, leaving none.
    fn take_touches(&self) -> Touches {
        std::mem::take(&mut *self.touches.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Ticks whose recall touches are gathered before they are written (with the tick that
/// completes them), and the most touches gathered at once before they are written
/// anyway (a 100,000-NPC town touches about 500,000 a tick).
///
/// Why gather: every tick an NPC recalls mostly what it recalled the tick before, so a
/// tick's touches rewrote the same rows of `memory_recalls` again and again — 46,000
/// upserts a tick at 10,000 NPCs, spread over the whole table, whose pages all went to
/// the write-ahead log each tick. Ten ticks of the 10,000-NPC town touch 12 % as many
/// distinct memories as they touch in all. What it costs: while a run goes on, the file's
/// recall state (`tick_last_recalled`, `recall_count`) may be up to nine ticks behind the
/// run; it is exact whenever the writer is flushed (the run's end, `hearsay` reading its
/// own file) and after `resume` or `fork`, which rebuild it from the event log.
const TOUCH_TICKS: u64 = 10;
/// Touches (a memory once per tick) gathered before they are written anyway: 32 MiB of
/// ids, some eight ticks of a 100,000-NPC town.
const TOUCHES_AT_MOST: usize = 1 << 22;

/// Recall touches gathered over ticks: each tick's recalled memories as they came,
/// folded per memory (the last tick it was recalled in, and in how many ticks) when they
/// are written ([`Touches::per_memory`]).
///
/// Why lists, not a map folded as they come: a tick's list arrives sorted (the engine
/// sorts and dedups it), so keeping it is a copy, and the fold is a merge of at most ten
/// sorted lists once per ten ticks. A map ordered by id, updated for each touch as it
/// came, cost the write queue's task about 2 ms per tick at 10,000 NPCs, each touch a walk
/// down a tree of tens of thousands of entries (the thirty-sixth round,
/// docs/BENCHMARKS.md).
#[derive(Debug, Default)]
struct Touches {
    /// Each tick added, in the order they were: its tick and its memories, ascending,
    /// each once.
    lists: Vec<(u64, Vec<u64>)>,
    /// The ids in `lists`, together.
    entries: usize,
    /// The first tick gathered: rows already touched at or after it are not counted
    /// again (a tick written twice counts once, as each tick's own upsert did).
    first_tick: Option<u64>,
}

impl Touches {
    fn add(&mut self, tick: u64, ids: &[hearsay_core::MemoryId]) {
        let mut list: Vec<u64> = ids.iter().map(|id| id.0).collect();
        if !list.is_sorted() {
            list.sort_unstable();
        }
        // A memory listed twice in one tick is recalled in one tick.
        list.dedup();
        self.entries += list.len();
        self.lists.push((tick, list));
        self.first_tick = Some(self.first_tick.map_or(tick, |t| t.min(tick)));
    }

    fn due(&self) -> bool {
        self.lists.len() as u64 >= TOUCH_TICKS || self.entries >= TOUCHES_AT_MOST
    }

    fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Per memory, ascending by id: the last tick it was recalled in and in how many
    /// ticks, the lists that name it taken in the order they were added — a tick counts
    /// when it is the memory's first or later than the last one counted (so a tick added
    /// twice counts once).
    fn per_memory(&self) -> Vec<(u64, (u64, u32))> {
        let mut at = vec![0usize; self.lists.len()];
        let mut out = Vec::new();
        loop {
            let next = self
                .lists
                .iter()
                .zip(&at)
                .filter_map(|((_, ids), &i)| ids.get(i))
                .min();
            let Some(&id) = next else { break };
            let mut folded: Option<(u64, u32)> = None;
            for ((tick, ids), i) in self.lists.iter().zip(at.iter_mut()) {
                if ids.get(*i) == Some(&id) {
                    *i += 1;
                    folded = match folded {
                        None => Some((*tick, 1)),
                        Some((last, n)) if last < *tick => Some((*tick, n + 1)),
                        same => same,
                    };
                }
            }
            if let Some(folded) = folded {
                out.push((id, folded));
            }
        }
        out
    }
}

/// A batch of the backfill's vectors.
pub(super) struct Vectors {
    pub(super) packed: PackedVectors,
    /// The embedded memories by the width their model made, each list ascending and
    /// each id once.
    pub(super) by_dims: BTreeMap<usize, Vec<i64>>,
    pub(super) model: String,
}

impl Sink for SqliteSink {
    type Tick = TickWrite;
    type Vectors = Vectors;

    /// The 10,000-NPC town writes about 11,000 memories a tick, some forty batches of
    /// 256 for the backfill, and each commit writes the pages they share to the
    /// write-ahead log again.
    const VECTORS_AT_ONCE: usize = 64;

    async fn tick(&self, write: &TickWrite) -> Result<(), StoreError> {
        let due = {
            let mut touches = self.touches.lock().unwrap_or_else(|e| e.into_inner());
            touches.add(write.tick, &write.recalled);
            touches.due()
        };
        let touches = if due {
            self.take_touches()
        } else {
            Touches::default()
        };
        write_tick(&self.pool, write, &touches).await?;
        self.committed.notify_one();
        Ok(())
    }

    /// The batches in one transaction: a commit writes every page it dirtied to the
    /// write-ahead log, and batches one after another dirty the same pages (the ends of
    /// `memory_chunk_vectors` and `vector_blobs`, the rows they mark in `memory_rows`), so
    /// a transaction per batch wrote those pages once per batch. Each batch is whole in
    /// it: a memory is embedded whole or not at all.
    async fn vectors(&self, batches: Vec<Vectors>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for v in batches {
            write_vectors(&mut tx, v.packed, &v.by_dims, &v.model).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        let touches = self.take_touches();
        if touches.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        write_touches(&mut tx, &touches).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A tick's memories (text only), the recall touches due (see [`TOUCH_TICKS`]), archive
/// marks and checkpoint, in one transaction. The memories go [`ROWS_PER_INSERT`] to a
/// statement and the touches [`TOUCHES_PER_UPSERT`], their values bound; the marks, a list
/// of ids, as one JSON array that SQLite unpacks with `jsonb_each`, which parses the text
/// once (`json_each` hands each element on as text that every `->>` parses again).
async fn write_tick(
    pool: &SqlitePool,
    write: &TickWrite,
    touches: &Touches,
) -> Result<(), StoreError> {
    let tick = to_i64(write.tick, "tick")?;
    // Compressed before the transaction, which holds the file's write lock.
    let packed = write
        .checkpoint
        .as_ref()
        .map(|c| pack_checkpoint(&c.state))
        .transpose()?;
    let mut tx = pool.begin().await?;
    for rows in write.memories.chunks(ROWS_PER_INSERT) {
        insert_rows(&mut tx, rows).await?;
    }
    write_touches(&mut tx, touches).await?;
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
        multi_row(
            COLUMNS,
            "(?,?,?,?,?,?,?,?,?)",
            n,
            " ON CONFLICT (id) DO NOTHING",
        )
    };
    let sql = chunk_statement(&FULL, ROWS_PER_INSERT, rows.len(), values);
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for m in rows {
        query = query
            .bind(to_i64(m.id.0, "memory id")?)
            .bind(i64::from(m.npc.0))
            .bind(kind_code(m.kind))
            // Shared, not copied: sqlx copies a `&str` into a fresh `String`.
            .bind(m.content.clone())
            .bind(i64::from(m.importance))
            .bind(to_i64(m.tick, "tick")?)
            .bind(m.source.map(|s| i64::from(s.0)))
            .bind(m.core)
            .bind(evidence_json(m));
    }
    query.execute(&mut *tx).await?;
    Ok(())
}

/// `head`, `n` times `row` separated by commas, then `tail`: a statement of many rows
/// whose values are all bound.
pub(super) fn multi_row(head: &str, row: &str, n: usize, tail: &str) -> String {
    let mut sql = String::with_capacity(head.len() + n * (row.len() + 1) + tail.len());
    sql.push_str(head);
    for i in 0..n {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(row);
    }
    sql.push_str(tail);
    sql
}

/// The statement for a chunk of `n` rows out of chunks of `per`: a full chunk's text is
/// made once (`full`) and reused, so sqlx, which keeps statements prepared by their
/// text, prepares it once; a shorter last chunk gets a text of its own.
pub(super) fn chunk_statement(
    full: &'static std::sync::OnceLock<String>,
    per: usize,
    n: usize,
    make: impl Fn(usize) -> String,
) -> std::borrow::Cow<'static, str> {
    if n == per {
        full.get_or_init(|| make(per)).as_str().into()
    } else {
        make(n).into()
    }
}

/// The start of every insert of recall state, rows of (id, last tick, ticks) to follow.
pub(super) const INSERT_RECALLS: &str =
    "INSERT INTO memory_recalls (id, tick_last_recalled, recall_count) VALUES ";

/// Touches per upsert: 3 parameters each, and the first tick (rewind's inserts of recall
/// state go as many to a statement).
pub(super) const TOUCHES_PER_UPSERT: usize = 256;

/// Adds gathered touches to `memory_recalls`, [`TOUCHES_PER_UPSERT`] to a statement, in
/// ascending id. A row already touched at or after the first gathered tick is left as it
/// is: those ticks were counted (a tick written twice counts once).
async fn write_touches(
    tx: &mut sqlx::SqliteConnection,
    touches: &Touches,
) -> Result<(), StoreError> {
    let Some(first) = touches.first_tick else {
        return Ok(());
    };
    let first = to_i64(first, "tick")?;
    static FULL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let upsert = |n: usize| {
        multi_row(
            INSERT_RECALLS,
            "(?,?,?)",
            n,
            " ON CONFLICT (id) DO UPDATE SET recall_count = recall_count + excluded.recall_count, \
             tick_last_recalled = excluded.tick_last_recalled WHERE tick_last_recalled < ?",
        )
    };
    let rows = touches.per_memory();
    for chunk in rows.chunks(TOUCHES_PER_UPSERT) {
        let sql = chunk_statement(&FULL, TOUCHES_PER_UPSERT, chunk.len(), upsert);
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (id, (last, n)) in chunk {
            query = query
                .bind(to_i64(*id, "memory id")?)
                .bind(to_i64(*last, "tick")?)
                .bind(i64::from(*n));
        }
        query.bind(first).execute(&mut *tx).await?;
    }
    Ok(())
}

/// A batch of vectors, in the caller's transaction: the vectors first, then their
/// memories are marked with the space (model and width) that made them.
async fn write_vectors(
    tx: &mut sqlx::SqliteConnection,
    packed: PackedVectors,
    by_dims: &BTreeMap<usize, Vec<i64>>,
    model: &str,
) -> Result<(), StoreError> {
    packed.write(tx).await?;
    for (dims, ids) in by_dims {
        sqlx::query(ADD_SPACE)
            .bind(model)
            .bind(*dims as i64)
            .execute(&mut *tx)
            .await?;
        // Marks the memories `which` picks (its parameters from ?3 on) with the space.
        macro_rules! mark {
            ($which:literal) => {
                sqlx::query(concat!(
                    "UPDATE memory_rows SET space = ",
                    "(SELECT space FROM vector_spaces WHERE model = ?1 AND dims = ?2) WHERE ",
                    $which,
                    " AND space IS NULL"
                ))
                .bind(model)
                .bind(*dims as i64)
            };
        }
        let runs = id_runs(ids);
        if runs.len() <= MARKED_RUNS_AT_MOST {
            for (first, last) in runs {
                mark!("id BETWEEN ?3 AND ?4")
                    .bind(first)
                    .bind(last)
                    .execute(&mut *tx)
                    .await?;
            }
        } else {
            mark!("id IN (SELECT value FROM jsonb_each(?3))")
                .bind(serde_json::Value::from(ids.as_slice()).to_string())
                .execute(&mut *tx)
                .await?;
        }
    }
    Ok(())
}

/// Most runs of ids a batch marks one statement each; a batch in more pieces is marked
/// by one statement over its list.
///
/// The backfill claims memories in id order, so a batch's ids are nearly always one
/// run, or a few: marked as ranges, each row is found by a step along the table rather
/// than a search of it per id from a list (the writer's busy time in
/// `docs/BENCHMARKS.md`, the twenty-fifth round).
const MARKED_RUNS_AT_MOST: usize = 16;

/// `ids` (ascending, each once) as runs of consecutive ids, `(first, last)` each.
fn id_runs(ids: &[i64]) -> Vec<(i64, i64)> {
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((_, last)) if last.checked_add(1) == Some(id) => *last = id,
            _ => runs.push((id, id)),
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearsay_core::MemoryId;

    #[test]
    fn touches_count_each_tick_once_and_fall_due_after_ten_ticks() {
        let mut t = Touches::default();
        t.add(4, &[MemoryId(7), MemoryId(3)]);
        t.add(4, &[MemoryId(7)]);
        t.add(6, &[MemoryId(7)]);
        assert_eq!(
            t.per_memory(),
            [(3, (4, 1)), (7, (6, 2))],
            "7 in ticks 4 and 6: two ticks, the last 6"
        );
        assert_eq!(t.first_tick, Some(4));
        assert!(!t.due());
        for tick in 7..14 {
            t.add(tick, &[]);
        }
        assert!(t.due(), "{} ticks gathered", t.lists.len());
    }

    /// The fold by lists gives, for any ticks in any order (repeated, going back, lists
    /// unsorted or with repeats), what folding each touch into a map as it comes gives:
    /// the way the touches were gathered before.
    #[test]
    fn touches_folded_by_lists_are_touches_folded_one_by_one() {
        let mut next = crate::testing::lcg(5);
        for round in 0..200 {
            let mut t = Touches::default();
            let mut one_by_one: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
            for _ in 0..1 + next() % 12 {
                let tick = 100 + next() % 8;
                let ids: Vec<MemoryId> = (0..next() % 30)
                    .map(|_| MemoryId(1 + next() % 40))
                    .collect();
                for id in &ids {
                    let (last, n) = one_by_one.entry(id.0).or_insert((tick, 0));
                    if *n == 0 || *last < tick {
                        *n += 1;
                        *last = tick;
                    }
                }
                t.add(tick, &ids);
            }
            let want: Vec<(u64, (u64, u32))> = one_by_one.into_iter().collect();
            assert_eq!(t.per_memory(), want, "round {round}");
            assert_eq!(t.is_empty(), want.is_empty());
        }
    }

    #[test]
    fn ids_coalesce_into_runs_of_consecutive_ids() {
        assert_eq!(id_runs(&[]), vec![]);
        assert_eq!(id_runs(&[4]), vec![(4, 4)]);
        assert_eq!(
            id_runs(&[1, 2, 3, 5, 7, 8, i64::MAX - 1, i64::MAX]),
            vec![(1, 3), (5, 5), (7, 8), (i64::MAX - 1, i64::MAX)]
        );
    }

    #[test]
    fn a_statement_of_many_rows() {
        assert_eq!(multi_row("V ", "(?,?)", 3, ";"), "V (?,?),(?,?),(?,?);");
        assert_eq!(multi_row("V ", "(?)", 1, ""), "V (?)");
    }
}
