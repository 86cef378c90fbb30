//! The store's writes, in the order they were made, on a task of their own: a tick's
//! memories, recall touches, archive marks and checkpoint in one transaction, and the
//! backfill's vectors, each batch in one. The caller hands a write over and goes on; the
//! in-memory ledger, which is what recall reads, has already taken it.
//!
//! Why: the file is the run's record for later (resume, fork, inspect, export), not what
//! the next tick reads, so a tick need not wait for SQLite. A tick's transaction now
//! overlaps the next tick's work, on the other core. What that changes, and why it is
//! safe:
//! - Order: one queue, one connection, so a tick's rows commit before the vectors of
//!   those rows, and ticks commit in order (the ledger counts a tick's ids as written
//!   only once its write is queued, and the backfill claims no id above that).
//! - A crash loses at most the writes still queued, never part of one: the checkpoint
//!   on disk is still the truth (`hearsay resume` cuts the logs back to it and takes the
//!   ticks decided since from the tape), and a memory whose vectors were lost is
//!   embedded again. At most [`TICKS_AHEAD`] ticks are queued.
//! - A failed write fails the store: nothing queued after it is written (so nothing
//!   names a row or a blob that is not there), and every later call that writes or
//!   reads the file returns the failure (with SQLite's own words, so a full disk is
//!   still reported as one).
//! - Whatever reads the file in this process first waits for the queue to drain
//!   ([`Writer::flush`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use sqlx::SqlitePool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::vectors::PackedVectors;
use super::{ADD_SPACE, evidence_json, kind_code, pack_checkpoint, to_i64};
use crate::store::{StoreError, TickWrite};

/// Ticks whose writes may wait in the queue at once: a tick's write overlaps the next
/// tick; a third waits for the first to commit.
pub(super) const TICKS_AHEAD: usize = 2;

/// Writes of any kind waiting at once (a tick's and the backfill's batches); a full
/// queue makes the writer's callers wait.
const QUEUE: usize = 256;

/// One write, as queued.
enum Job {
    Tick {
        write: TickWrite,
        _slot: OwnedSemaphorePermit,
    },
    Vectors {
        packed: PackedVectors,
        /// The embedded memories by the width their model made.
        by_dims: BTreeMap<usize, Vec<i64>>,
        model: String,
    },
    Flush(oneshot::Sender<()>),
}

/// The queue and the task that drains it.
#[derive(Debug)]
pub(super) struct Writer {
    jobs: mpsc::Sender<Job>,
    ticks: Arc<Semaphore>,
    state: Arc<State>,
}

/// What the writer task reports.
#[derive(Debug, Default)]
struct State {
    /// The first failure's text; nothing is written after it.
    failure: std::sync::Mutex<Option<String>>,
    /// Nanoseconds spent in transactions.
    busy_ns: AtomicU64,
}

impl State {
    fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Job::Tick { .. } => "Tick",
            Job::Vectors { .. } => "Vectors",
            Job::Flush(_) => "Flush",
        })
    }
}

impl Writer {
    /// Starts the task on the current tokio runtime, writing through `pool`.
    pub(super) fn spawn(pool: SqlitePool) -> Writer {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let state = Arc::new(State::default());
        tokio::spawn(drain(pool, queue, state.clone()));
        Writer {
            jobs,
            ticks: Arc::new(Semaphore::new(TICKS_AHEAD)),
            state,
        }
    }

    /// The failure that stopped the writer, if one did.
    pub(super) fn failed(&self) -> Result<(), StoreError> {
        match self.state.failure() {
            Some(text) => Err(StoreError::Write(text)),
            None => Ok(()),
        }
    }

    /// Queues a tick's write, once fewer than [`TICKS_AHEAD`] ticks wait.
    pub(super) async fn tick(&self, write: TickWrite) -> Result<(), StoreError> {
        self.failed()?;
        let slot = self
            .ticks
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| gone())?;
        self.send(Job::Tick { write, _slot: slot }).await
    }

    /// Queues a batch of vectors.
    pub(super) async fn vectors(
        &self,
        packed: PackedVectors,
        by_dims: BTreeMap<usize, Vec<i64>>,
        model: &str,
    ) -> Result<(), StoreError> {
        self.failed()?;
        self.send(Job::Vectors {
            packed,
            by_dims,
            model: model.to_owned(),
        })
        .await
    }

    /// Waits until everything queued so far is written; the failure if a write failed.
    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        let (done, written) = oneshot::channel();
        self.send(Job::Flush(done)).await?;
        written.await.map_err(|_| gone())?;
        self.failed()
    }

    /// Time spent in transactions so far.
    pub(super) fn busy(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.state.busy_ns.load(Ordering::Relaxed))
    }

    async fn send(&self, job: Job) -> Result<(), StoreError> {
        self.jobs.send(job).await.map_err(|_| gone())
    }
}

fn gone() -> StoreError {
    StoreError::Write("the store's writer stopped".into())
}

/// The task: writes each job in turn; after a failure, only answers flushes.
async fn drain(pool: SqlitePool, mut queue: mpsc::Receiver<Job>, state: Arc<State>) {
    while let Some(job) = queue.recv().await {
        let result = match job {
            Job::Flush(done) => {
                let _ = done.send(());
                continue;
            }
            _ if state.failure().is_some() => continue,
            Job::Tick { write, _slot } => {
                let started = Instant::now();
                let result = write_tick(&pool, &write).await;
                add_busy(&state, started);
                result
            }
            Job::Vectors {
                packed,
                by_dims,
                model,
            } => {
                let started = Instant::now();
                let result = write_vectors(&pool, &packed, by_dims, &model).await;
                add_busy(&state, started);
                result
            }
        };
        if let Err(e) = result {
            tracing::error!("writing the memory store failed: {e}");
            *state.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
        }
    }
}

fn add_busy(state: &State, started: Instant) {
    let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    state.busy_ns.fetch_add(ns, Ordering::Relaxed);
}

/// A tick's memories (text only), recall touches, archive marks and checkpoint, in one
/// transaction. One statement per kind of write, whatever the tick's size: the rows
/// travel as one JSON array and SQLite unpacks them with `json_each`.
async fn write_tick(pool: &SqlitePool, write: &TickWrite) -> Result<(), StoreError> {
    let tick = to_i64(write.tick, "tick")?;
    // Compressed before the transaction, which holds the file's write lock.
    let packed = write
        .checkpoint
        .as_ref()
        .map(|c| pack_checkpoint(&c.state))
        .transpose()?;
    let rows: Vec<serde_json::Value> = write
        .memories
        .iter()
        .map(|m| {
            serde_json::json!([
                m.id.0,
                m.npc.0,
                kind_code(m.kind),
                m.content,
                m.importance,
                m.tick,
                m.source.map(|s| s.0),
                m.core,
                evidence_json(m)
            ])
        })
        .collect();
    let recalled: Vec<u64> = write.recalled.iter().map(|id| id.0).collect();
    let mut tx = pool.begin().await?;
    if !rows.is_empty() {
        sqlx::query(
            "INSERT INTO memory_rows (id, npc, kind, content, importance, tick_created, \
             source_npc, core, evidence) \
             SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, \
             value ->> 6, value ->> 7, value ->> 8 FROM json_each(?) \
             WHERE true ORDER BY key ON CONFLICT (id) DO NOTHING",
        )
        .bind(serde_json::Value::Array(rows).to_string())
        .execute(&mut *tx)
        .await?;
    }
    if !recalled.is_empty() {
        // Once per tick: a repeated write of the same tick counts nothing twice.
        sqlx::query(
            "INSERT INTO memory_recalls (id, tick_last_recalled, recall_count) \
             SELECT value, ?1, 1 FROM json_each(?2) WHERE true \
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
             WHERE id IN (SELECT value FROM json_each(?)) AND forgotten_tick IS NULL",
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

/// A batch of vectors in one transaction: the vectors first, then their memories are
/// marked with the space (model and width) that made them.
async fn write_vectors(
    pool: &SqlitePool,
    packed: &PackedVectors,
    by_dims: BTreeMap<usize, Vec<i64>>,
    model: &str,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    packed.write(&mut tx).await?;
    for (dims, ids) in by_dims {
        sqlx::query(ADD_SPACE)
            .bind(model)
            .bind(dims as i64)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "UPDATE memory_rows SET space = \
             (SELECT space FROM vector_spaces WHERE model = ?1 AND dims = ?2) \
             WHERE id IN (SELECT value FROM json_each(?3)) AND space IS NULL",
        )
        .bind(model)
        .bind(dims as i64)
        .bind(serde_json::Value::from(ids).to_string())
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
