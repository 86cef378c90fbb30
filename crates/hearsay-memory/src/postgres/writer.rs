//! How the PostgreSQL store writes a tick and a batch of vectors — the statements, and
//! riding out a lost connection — whether the caller waits for them or the run's writer
//! process queues them ([`crate::queue`], started by [`super::PgStore::queue_writes`]).
//!
//! Why a queue for the writer process: a tick's write is one round trip of some 12 ms
//! of server time at 200 NPCs, and the backfill's claim and save two more; waited for,
//! they were most of a PostgreSQL tick (persist 27 ms and the barrier 21 ms of 67 ms, at
//! ed8be4d). The run's writer holds the run alone (`RunLock`), so its in-memory ledger
//! is the truth: recall reads it, the backfill claims from it, and the database takes
//! the writes in order on the other core. What a crash loses is what SQLite's queue
//! loses: at most the ticks still queued, never part of one; the checkpoint in the
//! database is the truth `hearsay resume` goes on from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pgvector::{SparseVector, Vector};
use sqlx::PgConnection;
use sqlx::postgres::PgPool;

use super::{i64_of, transient};
use crate::queue::{Sink, WriteQueue};
use crate::store::{StoreError, TickWrite};

/// The run's writer queue.
pub(super) type Writer = WriteQueue<PgSink>;

/// Runs `op` until it succeeds, fails for good, or a lost connection outlasts
/// `outage_max` (retrying with backoff in between).
pub(super) async fn retrying<T, F, Fut>(
    outage_max: Duration,
    what: &str,
    mut op: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let started = tokio::time::Instant::now();
    let mut wait = Duration::from_millis(100);
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if transient(&e) && started.elapsed() < outage_max => {
                tracing::warn!(
                    retry_in_ms = wait.as_millis() as u64,
                    "PostgreSQL {what} failed, retrying: {e}"
                );
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) if transient(&e) => {
                return Err(StoreError::Unreachable {
                    location: format!(
                        "the database (still unreachable after {} s)",
                        outage_max.as_secs()
                    ),
                    source: e,
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Where a run's writes go.
#[derive(Clone, Debug)]
pub(super) struct Target {
    pub(super) pool: PgPool,
    pub(super) run_id: i64,
    pub(super) outage_max: Duration,
    /// NPC names, by id: each memory row carries its NPC's.
    pub(super) npc_names: std::sync::Arc<[String]>,
}

/// A tick's write as queued: the write, and each recalled memory's NPC (from the
/// ledger; `None` for one it does not hold, which the database is asked for).
#[derive(Debug)]
pub(super) struct TickJob {
    pub(super) write: TickWrite,
    pub(super) npcs: Vec<Option<i32>>,
}

/// A tick's memories (text only), recall touches (a row of ids per NPC that recalled,
/// migration 0012), archive marks and checkpoint as one
/// statement, so one round trip and one implicit transaction: the tick is written whole
/// or not at all. Retried as a whole after a lost connection, which is safe: inserts
/// skip rows already there, a tick's touches are written once, an archive mark is set once.
pub(super) async fn write_tick(to: &Target, job: &TickJob) -> Result<(), StoreError> {
    let TickJob {
        write,
        npcs: recalled_npcs,
    } = job;
    let n = write.memories.len();
    let mut ids = Vec::with_capacity(n);
    let mut npcs = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    let mut kinds = Vec::with_capacity(n);
    let mut contents = Vec::with_capacity(n);
    let mut importances = Vec::with_capacity(n);
    let mut ticks = Vec::with_capacity(n);
    let mut sources = Vec::with_capacity(n);
    let mut cores = Vec::with_capacity(n);
    let mut evidence = Vec::with_capacity(n);
    for m in &write.memories {
        evidence.push(super::evidence_literal(m));
        ids.push(i64_of(m.id.0, "memory id")?);
        npcs.push(m.npc.0 as i32);
        names.push(
            to.npc_names
                .get(m.npc.index())
                .map(String::as_str)
                .unwrap_or_default(),
        );
        kinds.push(m.kind.as_str());
        contents.push(&*m.content);
        importances.push(i16::from(m.importance));
        ticks.push(i64_of(m.tick, "tick")?);
        sources.push(m.source.map(|s| s.0 as i32));
        cores.push(m.core);
    }
    let ids_of = |ids: &[hearsay_core::MemoryId]| {
        ids.iter()
            .map(|id| i64_of(id.0, "memory id"))
            .collect::<Result<Vec<_>, _>>()
    };
    let recalled = ids_of(&write.recalled)?;
    let archived = ids_of(&write.archived)?;
    let tick = i64_of(write.tick, "tick")?;
    let checkpoint_tick = write
        .checkpoint
        .as_ref()
        .map(|c| i64_of(c.next_tick, "tick"))
        .transpose()?;
    let checkpoint_state = write.checkpoint.as_ref().map(|c| c.state.as_str());
    let checkpoint_base = write
        .checkpoint
        .as_ref()
        .and_then(|c| c.base)
        .map(|b| i64_of(b, "tick"))
        .transpose()?;
    // A recalled memory's NPC comes with it; one the ledger did not hold (none, in the
    // writer process) is looked up by key. Not as a subquery per row inside COALESCE:
    // the planner costs that as run for every row (~100,000 for 1,000 ids), which
    // crossed `jit_above_cost` and compiled the statement on every tick — 25 ms of JIT
    // (auto_explain) in a 37 ms write.
    // `id = ANY(ARRAY(SELECT unnest($n)))` rather than `id = ANY($n)`: the ids reach the
    // planner as a value to come, not a constant of 1,000 elements whose every element
    // it estimates — 1.4 ms less planning per statement (`EXPLAIN (ANALYZE, SUMMARY)`:
    // 0.6 against 2.0 ms for 1,000 ids), and the key looked up by run and id rather
    // than the run read through the key's prefix and filtered.
    retrying(to.outage_max, "write", || {
        sqlx::query(
            "WITH inserted AS (
                INSERT INTO memory_rows (run_id, id, npc, npc_name, kind, content, importance,
                                         tick_created, tick_last_recalled_0010, source_npc, core, evidence)
                SELECT $1, u.id, u.npc, u.name, u.kind, u.content, u.importance, u.tick, u.tick,
                       u.source, u.core, u.evidence::bigint[]
                FROM UNNEST($2::bigint[], $3::int[], $4::text[], $5::text[], $6::text[],
                            $7::smallint[], $8::bigint[], $9::int[], $10::bool[], $15::text[])
                     AS u(id, npc, name, kind, content, importance, tick, source, core, evidence)
                ON CONFLICT (run_id, id) DO NOTHING
                RETURNING 1
             ), touched AS (
                INSERT INTO memory_recalls (run_id, npc, tick, ids)
                SELECT $1, r.npc, $11, array_agg(DISTINCT r.id ORDER BY r.id)
                FROM (SELECT u.id, u.npc FROM UNNEST($12::bigint[], $18::int[]) AS u(id, npc)
                      WHERE u.npc IS NOT NULL
                      UNION ALL
                      SELECT m.id, m.npc FROM memory_rows m
                      WHERE m.run_id = $1 AND m.id = ANY(ARRAY(
                          SELECT u.id FROM UNNEST($12::bigint[], $18::int[]) AS u(id, npc)
                          WHERE u.npc IS NULL))) r
                GROUP BY r.npc
                ON CONFLICT (run_id, npc, tick) DO NOTHING
                RETURNING 1
             ), archived AS (
                UPDATE memory_rows SET forgotten_tick = $11
                WHERE cardinality($16::bigint[]) > 0
                  AND run_id = $1 AND id = ANY(ARRAY(SELECT unnest($16::bigint[])))
                  AND forgotten_tick IS NULL
                RETURNING 1
             ), checkpointed AS (
                INSERT INTO checkpoints (run_id, next_tick, base, state)
                SELECT $1, $13, $17::bigint, $14 WHERE $13::bigint IS NOT NULL
                ON CONFLICT (run_id, next_tick) DO UPDATE SET base = excluded.base, state = excluded.state
                RETURNING 1
             )
             SELECT (SELECT count(*) FROM inserted) AS inserted, (SELECT count(*) FROM touched) AS touched,
                    (SELECT count(*) FROM archived) AS archived,
                    (SELECT count(*) FROM checkpointed) AS checkpointed",
        )
        .bind(to.run_id)
        .bind(&ids)
        .bind(&npcs)
        .bind(&names)
        .bind(&kinds)
        .bind(&contents)
        .bind(&importances)
        .bind(&ticks)
        .bind(&sources)
        .bind(&cores)
        .bind(tick)
        .bind(&recalled)
        .bind(checkpoint_tick)
        .bind(checkpoint_state)
        .bind(&evidence)
        .bind(&archived)
        .bind(checkpoint_base)
        .bind(recalled_npcs)
        .fetch_one(&to.pool)
    })
    .await?;
    Ok(())
}

/// A batch of vectors as sent: one row per chunk, each dense or sparse (migration 0007),
/// and the width each memory's model made.
#[derive(Debug, Default)]
pub(super) struct VectorBatch {
    pub(super) model: String,
    pub(super) ids: Vec<i64>,
    pub(super) chunks: Vec<i32>,
    pub(super) dense: Vec<Option<Vector>>,
    pub(super) sparse: Vec<Option<SparseVector>>,
    /// The memories of the batch, once each, beside their widths.
    pub(super) memory_ids: Vec<i64>,
    pub(super) dims: Vec<i32>,
}

impl VectorBatch {
    /// `other`'s rows after these (batches of one claim each: no memory in both).
    fn append(&mut self, other: VectorBatch) {
        self.ids.extend(other.ids);
        self.chunks.extend(other.chunks);
        self.dense.extend(other.dense);
        self.sparse.extend(other.sparse);
        self.memory_ids.extend(other.memory_ids);
        self.dims.extend(other.dims);
    }
}

/// Saves a batch on `conn` as one statement (inside the caller's transaction, if any):
/// each memory still waiting is marked with the model and width that made its vectors,
/// and those memories' vectors go to `memory_vectors`, or straight to the archive
/// (dense) for memories archived meanwhile. A memory that already has an embedding is
/// left as it is: its vectors are not saved. The mark decides, under the row's lock, so
/// a memory goes to exactly one of the two tables, once.
pub(super) async fn save_batch(
    conn: &mut PgConnection,
    run_id: i64,
    b: &VectorBatch,
) -> Result<(), sqlx::Error> {
    // `memory_rows` is looked up once, by the batch's ids on both key columns (the ids
    // as in `write_tick`), and never joined to the vectors: with a join, a stale
    // estimate made PostgreSQL scan every pending row of the run once per saved vector.
    // The mark's RETURNING says which memories were waiting, their NPC and whether they
    // are archived; a first read of the same rows for that took ~15 % of the statement
    // (auto_explain: 1,906 buffers for 629 ids, read again by the mark). One round trip
    // where three statements and a transaction's begin and commit were five.
    sqlx::query(
        "WITH marked AS (
            UPDATE memory_rows SET embedding_model = $6,
                                   embedding_dims = ($7::int[])[array_position($5::bigint[], id)]
            WHERE run_id = $1 AND id = ANY(ARRAY(SELECT unnest($5::bigint[])))
              AND embedding_model IS NULL
            RETURNING id, npc, forgotten_tick IS NOT NULL AS gone
         ), u AS (
            SELECT u.id, u.chunk, u.embedding, u.sparse, m.npc, m.gone
            FROM UNNEST($2::bigint[], $3::int[], $4::vector[], $8::sparsevec[])
                 AS u(id, chunk, embedding, sparse)
            JOIN marked m USING (id)
         ), live AS (
            INSERT INTO memory_vectors (run_id, id, chunk, npc, embedding, sparse)
            SELECT $1, id, chunk, npc, embedding, sparse FROM u WHERE NOT gone
            ON CONFLICT (run_id, id, chunk) DO NOTHING
            RETURNING 1
         ), archived AS (
            INSERT INTO memory_vectors_archive (run_id, id, chunk, npc, embedding)
            SELECT $1, id, chunk, npc, COALESCE(embedding, sparse::vector) FROM u WHERE gone
            ON CONFLICT (run_id, id, chunk) DO NOTHING
            RETURNING 1
         )
         SELECT (SELECT count(*) FROM live) AS live, (SELECT count(*) FROM archived) AS archived,
                (SELECT count(*) FROM marked) AS marked",
    )
    .bind(run_id)
    .bind(&b.ids)
    .bind(&b.chunks)
    .bind(&b.dense)
    .bind(&b.memory_ids)
    .bind(&b.model)
    .bind(&b.dims)
    .bind(&b.sparse)
    .fetch_one(&mut *conn)
    .await?;
    Ok(())
}

/// The run's memory count at which the writer first refreshes `memory_rows`' statistics,
/// and the factor to the next time.
const ANALYZE_FIRST: u64 = 4_000;
const ANALYZE_GROWTH: u64 = 16;

/// Writes the queue's jobs for the run's writer process.
pub(super) struct PgSink {
    target: Target,
    /// The memory id past which `memory_rows`' statistics are refreshed next.
    analyze_at: AtomicU64,
}

impl PgSink {
    pub(super) fn new(target: Target) -> Self {
        Self {
            target,
            analyze_at: AtomicU64::new(ANALYZE_FIRST),
        }
    }

    /// Refreshes the statistics of `memory_rows.run_id` once the run has grown past the
    /// mark (4,000 memories, then 16 times as many each time: a few per run, each a
    /// sample of the table that took 80 to 120 ms here).
    ///
    /// Why: with statistics older than the run, the planner believes the run holds a
    /// row or two, and reaches a batch's embedding marks and a tick's archive marks
    /// (`run_id = $1 AND id = ANY(…)`; before migration 0011 its recall touches too) by
    /// reading every row of the run through the key's `run_id` prefix and filtering,
    /// rather than looking each id up — 35 ms of a 44 ms tick write at tick 99 of
    /// rumour-200 (auto_explain), and growing with the run.
    /// Autovacuum would analyze the table too, but a minute or more later. A role that
    /// may not analyze the table gets a warning from the server, not an error.
    async fn analyze_when_grown(&self, write: &TickWrite) {
        let Some(last) = write.memories.last().map(|m| m.id.0) else {
            return;
        };
        let at = self.analyze_at.load(Ordering::Relaxed);
        if last < at {
            return;
        }
        self.analyze_at
            .store(last.saturating_mul(ANALYZE_GROWTH), Ordering::Relaxed);
        let started = std::time::Instant::now();
        match sqlx::query("ANALYZE memory_rows (run_id)")
            .execute(&self.target.pool)
            .await
        {
            Ok(_) => tracing::debug!(
                memories = last,
                ms = started.elapsed().as_millis() as u64,
                "refreshed the statistics of memory_rows.run_id"
            ),
            Err(e) => tracing::warn!("refreshing the statistics of memory_rows failed: {e}"),
        }
    }
}

impl Sink for PgSink {
    type Tick = TickJob;
    type Vectors = VectorBatch;

    async fn tick(&self, job: &TickJob) -> Result<(), StoreError> {
        write_tick(&self.target, job).await?;
        self.analyze_when_grown(&job.write).await;
        Ok(())
    }

    /// Batches of one model as one statement, so one implicit transaction, retried
    /// whole after a lost connection (the save skips what is already saved).
    async fn vectors(&self, batches: Vec<VectorBatch>) -> Result<(), StoreError> {
        let Target {
            pool,
            run_id,
            outage_max,
            ..
        } = &self.target;
        let mut merged: Vec<VectorBatch> = Vec::new();
        for b in batches {
            match merged.last_mut() {
                Some(last) if last.model == b.model => last.append(b),
                _ => merged.push(b),
            }
        }
        for batch in &merged {
            retrying(*outage_max, "save", || async {
                let mut conn = pool.acquire().await?;
                save_batch(&mut conn, *run_id, batch).await
            })
            .await?;
        }
        Ok(())
    }
}
