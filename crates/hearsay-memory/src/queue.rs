//! A store's writes on a task of their own, in the order they were made: a tick's write
//! and the backfill's batches of vectors. The caller hands a write over and goes on; the
//! in-memory ledger, which is what recall reads, has already taken it. Both stores that
//! write in the background (SQLite always, PostgreSQL for the run's writer process) use
//! this one queue; each says how a job is written ([`Sink`]).
//!
//! What it promises:
//! - Order: one queue drained by one task, so a tick's rows commit before the vectors of
//!   those rows (the ledger counts a tick's ids as written only once its write is
//!   queued, and the backfill claims no id above that), and ticks commit in order.
//! - Bounded: at most [`TICKS_AHEAD`] ticks wait at once; a third waits for the first to
//!   commit. A crash loses at most those, never part of one (each is one transaction).
//! - A failed write fails the store: nothing queued after it is written (so nothing names
//!   a row that is not there), and every later call returns the failure.
//! - [`WriteQueue::flush`] waits until everything queued so far is written, and what a
//!   sink held back from it ([`Sink::flush`]): whatever reads the database in this
//!   process calls it first.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use crate::store::StoreError;

/// Ticks whose writes may wait in the queue at once: a tick's write overlaps the next
/// tick; a third waits for the first to commit.
pub(crate) const TICKS_AHEAD: usize = 2;

/// Writes of any kind waiting at once (a tick's and the backfill's batches); a full
/// queue makes the writer's callers wait.
const QUEUE: usize = 256;

/// How a store writes a queued job, each in one transaction.
pub(crate) trait Sink: Send + Sync + 'static {
    /// A tick's write, as the store prepared it.
    type Tick: Send + 'static;
    /// A batch of vectors, as the store prepared it.
    type Vectors: Send + 'static;

    /// Batches of vectors found waiting one after another that are handed to the sink
    /// at once: the backfill saves a tick's memories in many batches, and a store that
    /// writes them as one statement or one transaction saves the round trips, the
    /// planning or the commits of the others.
    const VECTORS_AT_ONCE: usize = 8;

    /// Writes a tick.
    fn tick(&self, job: &Self::Tick) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Writes batches of vectors queued one after the other (up to [`Sink::VECTORS_AT_ONCE`]),
    /// in their order: as one write where the store can.
    fn vectors(
        &self,
        jobs: Vec<Self::Vectors>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Writes what the sink held back from the jobs written so far (SQLite's recall
    /// touches, gathered over several ticks), before a flush answers: whoever flushes
    /// reads the database next.
    fn flush(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Ok(()) }
    }
}

/// One write, as queued.
enum Job<S: Sink> {
    Tick {
        job: S::Tick,
        _slot: OwnedSemaphorePermit,
    },
    Vectors(S::Vectors),
    Flush(oneshot::Sender<()>),
}

/// The queue and the task that drains it.
pub(crate) struct WriteQueue<S: Sink> {
    jobs: mpsc::Sender<Job<S>>,
    ticks: Arc<Semaphore>,
    state: Arc<State>,
}

impl<S: Sink> std::fmt::Debug for WriteQueue<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteQueue")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// What the task reports.
#[derive(Debug, Default)]
struct State {
    /// The first failure's text; nothing is written after it.
    failure: std::sync::Mutex<Option<String>>,
    /// Nanoseconds spent writing.
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

impl<S: Sink> WriteQueue<S> {
    /// Starts the task on the current tokio runtime, writing through `sink`.
    pub(crate) fn spawn(sink: S) -> Self {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let state = Arc::new(State::default());
        tokio::spawn(drain(sink, queue, state.clone()));
        Self {
            jobs,
            ticks: Arc::new(Semaphore::new(TICKS_AHEAD)),
            state,
        }
    }

    /// The failure that stopped the writer, if one did.
    pub(crate) fn failed(&self) -> Result<(), StoreError> {
        match self.state.failure() {
            Some(text) => Err(StoreError::Write(text)),
            None => Ok(()),
        }
    }

    /// Queues a tick's write, once fewer than [`TICKS_AHEAD`] ticks wait.
    pub(crate) async fn tick(&self, job: S::Tick) -> Result<(), StoreError> {
        self.failed()?;
        let slot = self
            .ticks
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| gone())?;
        self.send(Job::Tick { job, _slot: slot }).await
    }

    /// Queues a batch of vectors.
    pub(crate) async fn vectors(&self, job: S::Vectors) -> Result<(), StoreError> {
        self.failed()?;
        self.send(Job::Vectors(job)).await
    }

    /// Waits until everything queued so far is written; the failure if a write failed.
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let (done, written) = oneshot::channel();
        self.send(Job::Flush(done)).await?;
        written.await.map_err(|_| gone())?;
        self.failed()
    }

    /// Time spent writing so far.
    pub(crate) fn busy(&self) -> Duration {
        Duration::from_nanos(self.state.busy_ns.load(Ordering::Relaxed))
    }

    async fn send(&self, job: Job<S>) -> Result<(), StoreError> {
        self.jobs.send(job).await.map_err(|_| gone())
    }
}

fn gone() -> StoreError {
    StoreError::Write("the store's writer stopped".into())
}

/// The task: writes each job in turn (batches of vectors waiting one after another
/// together); after a failure, only answers flushes.
async fn drain<S: Sink>(sink: S, mut queue: mpsc::Receiver<Job<S>>, state: Arc<State>) {
    // A job taken from the queue while gathering batches of vectors, written next.
    let mut next: Option<Job<S>> = None;
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => match queue.recv().await {
                Some(job) => job,
                None => break,
            },
        };
        let started = Instant::now();
        let result = match job {
            Job::Flush(done) if state.failure().is_some() => {
                let _ = done.send(());
                continue;
            }
            Job::Flush(done) => {
                let result = sink.flush().await;
                record(&state, started, result);
                let _ = done.send(());
                continue;
            }
            _ if state.failure().is_some() => continue,
            Job::Tick { job, _slot } => sink.tick(&job).await,
            Job::Vectors(job) => {
                let mut jobs = vec![job];
                while jobs.len() < S::VECTORS_AT_ONCE {
                    match queue.try_recv() {
                        Ok(Job::Vectors(more)) => jobs.push(more),
                        Ok(other) => {
                            next = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                sink.vectors(jobs).await
            }
        };
        record(&state, started, result);
    }
}

/// Adds a write's time to the busy time; a failure stops the writer.
fn record(state: &State, started: Instant, result: Result<(), StoreError>) {
    let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    state.busy_ns.fetch_add(ns, Ordering::Relaxed);
    if let Err(e) = result {
        tracing::error!("writing the memory store failed: {e}");
        *state.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
    }
}
