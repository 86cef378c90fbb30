//! The embedding backfill worker: a tokio task that finds memories whose embedding is
//! NULL, embeds them (chunk by chunk) in batches and writes the vectors back, retrying
//! with backoff when the embedder fails; when idle, it tidies archived memories
//! ([`Store::tidy_archive`]). It never runs on the tick thread.
//!
//! Progress is a watermark, `embedded_through`: every memory id up to it has a vector.
//! The runtime's `barrier` visibility waits on it before a tick recalls anything.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::chunk::Chunking;
use crate::embed::Embedder;
use crate::store::{EmbeddedRow, Store, StoreError};

/// How the worker batches and backs off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackfillConfig {
    /// Memories embedded per call.
    pub batch_size: usize,
    /// Embedding calls in flight at once, per worker.
    pub concurrency: usize,
    /// Worker tasks, each claiming its own rows (only stores whose claims lock rows,
    /// such as PostgreSQL, benefit from more than one).
    pub workers: usize,
    /// How long contents are split into chunks, each embedded on its own.
    pub chunking: Chunking,
    /// First wait after a failure.
    pub backoff_min: Duration,
    /// Longest wait between retries (the wait doubles up to this).
    pub backoff_max: Duration,
}

impl Default for BackfillConfig {
    fn default() -> Self {
        Self {
            batch_size: 256,
            concurrency: 1,
            workers: 1,
            chunking: Chunking::default(),
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(5),
        }
    }
}

/// What the worker has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Every memory with an id up to this one has an embedding.
    pub embedded_through: u64,
    /// Memories embedded by this worker.
    pub embedded: u64,
    /// Texts embedded for them (a chunked memory is several).
    pub texts: u64,
    /// Failed attempts (embedder or store), each followed by a backoff and a retry.
    pub failures: u64,
    /// The last attempt failed because the disk under the store is full: waiting for the
    /// worker is pointless until space is freed.
    pub disk_full: bool,
    /// The store refused the embedder's vectors as of another vector space (another
    /// model, or another width under the same name): the workers stopped, and
    /// [`Backfill::refusal`] says why. A run must stop too.
    pub refused: bool,
}

/// A running backfill worker.
#[derive(Debug)]
pub struct Backfill {
    refusal: Arc<std::sync::Mutex<Option<String>>>,
    wake: Arc<Notify>,
    progress: watch::Receiver<Progress>,
    stop: watch::Sender<bool>,
    handles: Vec<JoinHandle<()>>,
}

impl Backfill {
    /// Starts `config.workers` workers on `runtime`.
    pub fn spawn<S: Store>(
        runtime: &tokio::runtime::Handle,
        store: Arc<S>,
        embedder: Arc<dyn Embedder>,
        config: BackfillConfig,
    ) -> Self {
        let wake = Arc::new(Notify::new());
        let (progress_tx, progress) = watch::channel(Progress::default());
        let (stop, stop_rx) = watch::channel(false);
        let progress_tx = Arc::new(progress_tx);
        let refusal = Arc::new(std::sync::Mutex::new(None));
        let handles = (0..config.workers.max(1))
            .map(|_| {
                runtime.spawn(work(
                    Worker {
                        store: store.clone(),
                        embedder: embedder.clone(),
                        config: config.clone(),
                        wake: wake.clone(),
                        progress: progress_tx.clone(),
                        refusal: refusal.clone(),
                    },
                    stop_rx.clone(),
                ))
            })
            .collect();
        Self {
            refusal,
            wake,
            progress,
            stop,
            handles,
        }
    }

    /// Tells the workers new rows were written.
    pub fn wake(&self) {
        self.wake.notify_waiters();
        self.wake.notify_one();
    }

    /// The latest progress.
    pub fn progress(&self) -> Progress {
        *self.progress.borrow()
    }

    /// A receiver of the progress, for tasks that watch it.
    pub fn progress_receiver(&self) -> watch::Receiver<Progress> {
        self.progress.clone()
    }

    /// Why the store refused the embedder's vectors, if it did ([`Progress::refused`]).
    pub fn refusal(&self) -> Option<String> {
        self.refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A future that resolves once every memory up to `id` is embedded (or the workers
    /// stopped), independent of this handle: to time a re-embedding in the background.
    pub fn embedded_through(&self, id: u64) -> impl std::future::Future<Output = bool> + use<> {
        let mut rx = self.progress.clone();
        async move {
            matches!(rx.wait_for(|p| p.embedded_through >= id || p.refused).await,
                Ok(p) if p.embedded_through >= id)
        }
    }

    /// Waits until every memory up to `id` is embedded, or `timeout` passes. Returns
    /// whether the watermark was reached.
    pub async fn wait_embedded_through(&self, id: u64, timeout: Duration) -> bool {
        if self.progress().embedded_through >= id {
            return true;
        }
        self.wake();
        let mut rx = self.progress.clone();
        let waited = tokio::time::timeout(
            timeout,
            rx.wait_for(|p| p.embedded_through >= id || p.disk_full || p.refused),
        )
        .await;
        matches!(waited, Ok(Ok(p)) if p.embedded_through >= id)
    }

    /// Stops the worker after its current batch and waits for it to exit.
    pub async fn shutdown(self) -> Progress {
        let _ = self.stop.send(true);
        self.wake.notify_waiters();
        for handle in self.handles {
            if let Err(e) = handle.await {
                tracing::error!("embedding worker panicked: {e}");
            }
        }
        *self.progress.borrow()
    }
}

/// Publishes the watermark: every id below the lowest unembedded one (or everything
/// committed, if none is left). `written` must be read before the query.
async fn publish_watermark<S: Store>(
    store: &S,
    written: u64,
    progress: &watch::Sender<Progress>,
) -> Result<(), String> {
    let through = match store.lowest_unembedded().await.map_err(|e| e.to_string())? {
        None => written,
        Some(lowest) => lowest.saturating_sub(1).min(written),
    };
    progress.send_modify(|p| p.embedded_through = p.embedded_through.max(through));
    Ok(())
}

/// What one worker task works with.
struct Worker<S> {
    store: Arc<S>,
    embedder: Arc<dyn Embedder>,
    config: BackfillConfig,
    wake: Arc<Notify>,
    progress: Arc<watch::Sender<Progress>>,
    refusal: Arc<std::sync::Mutex<Option<String>>>,
}

async fn work<S: Store>(worker: Worker<S>, mut stop: watch::Receiver<bool>) {
    let Worker {
        store,
        embedder,
        config,
        wake,
        progress,
        refusal,
    } = worker;
    let mut backoff = config.backoff_min;
    let batch_size = config.batch_size.max(1);
    let round_size = batch_size * config.concurrency.max(1);
    loop {
        if *stop.borrow() {
            return;
        }
        // Read the committed high-water mark *before* looking for pending rows: if none
        // are pending afterwards, every id up to it is embedded.
        let written = store.written_through();
        let (rows, claim) = match store.claim_embeddings(round_size).await {
            Ok(claimed) => claimed,
            Err(e) => {
                if backoff_after(&e.to_string(), &progress, &mut stop, &mut backoff, &config).await
                {
                    return;
                }
                continue;
            }
        };
        if rows.is_empty() {
            drop(claim);
            if let Err(e) = publish_watermark(&*store, written, &progress).await {
                if backoff_after(&e, &progress, &mut stop, &mut backoff, &config).await {
                    return;
                }
                continue;
            }
            // Idle: upkeep of archived memories (moving their vectors out of the recall
            // index on PostgreSQL). A failure is retried at the next idle moment.
            match store.tidy_archive().await {
                Ok(0) => {}
                Ok(moved) => tracing::debug!(moved, "archived memories tidied"),
                Err(e) => tracing::warn!("tidying archived memories failed: {e}"),
            }
            tokio::select! {
                biased;
                _ = stop.changed() => {}
                _ = wake.notified() => {}
                // Also look again now and then: a wake can race a commit, and rows
                // another worker released come back.
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
            continue;
        }

        // Every chunk of every claimed memory, in order, as a range of its text (split
        // once: the chunk counts below come from the same split); batches are cut by
        // texts, each copied once, into the embedder's input.
        let splits: Vec<Vec<std::ops::Range<usize>>> = rows
            .iter()
            .map(|r| config.chunking.split(&r.content))
            .collect();
        let texts: Vec<(usize, u32, std::ops::Range<usize>)> = splits
            .iter()
            .enumerate()
            .flat_map(|(i, ranges)| {
                ranges
                    .iter()
                    .enumerate()
                    .map(move |(c, range)| (i, c as u32, range.clone()))
            })
            .collect();
        // Up to `concurrency` requests in flight; whatever succeeded is saved even if a
        // batch failed (the next round picks the rest up again).
        let rows_ref = &rows;
        let calls = texts.chunks(batch_size).map(|batch| {
            let embedder = &embedder;
            async move {
                let inputs: Vec<String> = batch
                    .iter()
                    .map(|(i, _, range)| rows_ref[*i].content[range.clone()].to_owned())
                    .collect();
                match embedder.embed_fitted(&inputs).await {
                    Ok(vectors) if vectors.len() == batch.len() => Ok(batch
                        .iter()
                        .zip(vectors)
                        .map(|((i, chunk, _), (dims, vector))| {
                            (
                                *i,
                                EmbeddedRow {
                                    id: rows_ref[*i].id,
                                    chunk: *chunk,
                                    dims,
                                    vector,
                                },
                            )
                        })
                        .collect::<Vec<_>>()),
                    Ok(vectors) => Err(format!(
                        "embedder returned {} vectors for {} texts",
                        vectors.len(),
                        batch.len()
                    )),
                    Err(e) => Err(e.to_string()),
                }
            }
        });
        let mut done: Vec<Vec<EmbeddedRow>> = vec![Vec::new(); rows.len()];
        let mut failures: Vec<String> = Vec::new();
        for result in futures_util::future::join_all(calls).await {
            match result {
                Ok(batch) => {
                    for (i, row) in batch {
                        done[i].push(row);
                    }
                }
                Err(e) => failures.push(e),
            }
        }
        // A memory is saved whole or not at all: all of its chunks, or none.
        let wanted: Vec<usize> = splits.iter().map(Vec::len).collect();
        let n = done
            .iter()
            .zip(&wanted)
            .filter(|(d, w)| d.len() == **w)
            .count() as u64;
        let texts_saved = done
            .iter()
            .zip(&wanted)
            .filter(|(d, w)| d.len() == **w)
            .map(|(_, w)| *w as u64)
            .sum::<u64>();
        let embedded: Vec<EmbeddedRow> = done
            .into_iter()
            .zip(&wanted)
            .filter(|(d, w)| d.len() == **w)
            .flat_map(|(d, _)| d)
            .collect();
        match store
            .save_embeddings(claim, embedded, embedder.model())
            .await
        {
            Ok(()) => progress.send_modify(|p| {
                p.embedded += n;
                p.texts += texts_saved;
                p.disk_full = false;
            }),
            Err(StoreError::Space(why)) => {
                // Not a failure to retry: these vectors may never join the store's.
                tracing::error!("embedding stopped: {why}");
                *refusal.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                progress.send_modify(|p| p.refused = true);
                return;
            }
            Err(e) => failures.push(e.to_string()),
        }
        if failures.is_empty() {
            backoff = config.backoff_min;
            let written = store.written_through();
            if let Err(e) = publish_watermark(&*store, written, &progress).await {
                failures.push(e);
            }
        }
        if !failures.is_empty() {
            progress.send_modify(|p| p.failures += failures.len() as u64 - 1);
            if backoff_after(
                &failures.join("; "),
                &progress,
                &mut stop,
                &mut backoff,
                &config,
            )
            .await
            {
                return;
            }
        }
    }
}

/// Counts a failure and waits out the backoff (doubling it for next time). Returns true
/// if the worker was told to stop meanwhile.
async fn backoff_after(
    reason: &str,
    progress: &watch::Sender<Progress>,
    stop: &mut watch::Receiver<bool>,
    backoff: &mut Duration,
    config: &BackfillConfig,
) -> bool {
    let disk_full = reason.contains("disk is full") || reason.contains("No space left");
    progress.send_modify(|p| {
        p.failures += 1;
        p.disk_full = disk_full;
    });
    tracing::warn!(
        retry_in_ms = backoff.as_millis() as u64,
        "embedding backfill failed: {reason}"
    );
    let stopped = tokio::select! {
        biased;
        _ = stop.changed() => true,
        _ = tokio::time::sleep(*backoff) => false,
    };
    *backoff = (*backoff * 2).min(config.backoff_max);
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BoxFuture;
    use crate::embed::EmbedError;
    use crate::hashing::HashingEmbedder;
    use crate::sqlite::SqliteStore;
    use crate::store::TickWrite;
    use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails its first `fail_first` calls, then embeds like the hashing embedder.
    struct Flaky {
        calls: AtomicU32,
        fail_first: u32,
    }

    impl Embedder for Flaky {
        fn model(&self) -> &str {
            "flaky"
        }
        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            Box::pin(async move {
                if self.calls.fetch_add(1, Ordering::SeqCst) < self.fail_first {
                    return Err(EmbedError::Unavailable("connection refused".into()));
                }
                Ok(texts.iter().map(|t| HashingEmbedder.embed_one(t)).collect())
            })
        }
    }

    fn mems(range: std::ops::RangeInclusive<u64>) -> Vec<MemoryRecord> {
        range
            .map(|id| MemoryRecord {
                id: MemoryId(id),
                npc: NpcId((id % 3) as u32),
                kind: MemoryKind::Observation,
                content: format!("memory number {id}").into(),
                importance: 4,
                tick: 0,
                source: None,
                core: false,
                evidence: Vec::new(),
                place: Default::default(),
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drains_in_batches_and_survives_failures() {
        let dir = tempfile::tempdir().expect("tempdir");
        let names = vec!["a".into(), "b".into(), "c".into()];
        let store = Arc::new(
            SqliteStore::create(&dir.path().join("m.db"), names)
                .await
                .expect("store"),
        );
        let embedder = Arc::new(Flaky {
            calls: AtomicU32::new(0),
            fail_first: 3,
        });
        let config = BackfillConfig {
            batch_size: 7,
            concurrency: 2,
            workers: 1,
            chunking: Chunking::default(),
            backoff_min: Duration::from_millis(1),
            backoff_max: Duration::from_millis(4),
        };
        let worker = Backfill::spawn(
            &tokio::runtime::Handle::current(),
            store.clone(),
            embedder,
            config,
        );

        store
            .write_tick(TickWrite {
                tick: 0,
                memories: mems(1..=40),
                ..Default::default()
            })
            .await
            .expect("write");
        worker.wake();
        assert!(
            worker
                .wait_embedded_through(40, Duration::from_secs(20))
                .await
        );
        store
            .write_tick(TickWrite {
                tick: 1,
                memories: mems(41..=50),
                ..Default::default()
            })
            .await
            .expect("write");
        worker.wake();
        assert!(
            worker
                .wait_embedded_through(50, Duration::from_secs(20))
                .await
        );

        let progress = worker.shutdown().await;
        assert_eq!(progress.embedded, 50);
        assert_eq!(progress.failures, 3);
        assert_eq!(store.stats().await.expect("stats").unembedded, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_embedder_times_the_barrier_out_instead_of_hanging() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(
            SqliteStore::create(&dir.path().join("m.db"), vec!["a".into(); 3])
                .await
                .expect("store"),
        );
        let embedder = Arc::new(Flaky {
            calls: AtomicU32::new(0),
            fail_first: u32::MAX,
        });
        let config = BackfillConfig {
            batch_size: 8,
            concurrency: 1,
            workers: 1,
            chunking: Chunking::default(),
            backoff_min: Duration::from_millis(1),
            backoff_max: Duration::from_millis(2),
        };
        let worker = Backfill::spawn(
            &tokio::runtime::Handle::current(),
            store.clone(),
            embedder,
            config,
        );
        store
            .write_tick(TickWrite {
                tick: 0,
                memories: mems(1..=3),
                ..Default::default()
            })
            .await
            .expect("write");
        assert!(
            !worker
                .wait_embedded_through(3, Duration::from_millis(100))
                .await
        );
        let progress = worker.shutdown().await;
        assert!(progress.failures >= 1);
        assert_eq!(progress.embedded, 0);
        assert_eq!(store.stats().await.expect("stats").unembedded, 3);
    }
}
