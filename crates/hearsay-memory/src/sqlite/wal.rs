//! The write-ahead log folded into the file in the background, so the writer never stops
//! for it.
//!
//! Why: SQLite folds the log into the file itself (a checkpoint) on the commit that takes
//! it past `wal_autocheckpoint` pages — 4,000 of them, 64 MiB —, copying every page and
//! syncing the file before the commit returns. The writer's queue waits behind that, and
//! a tick waits once two ticks are queued: in the 1,000-NPC town such commits stopped the
//! writer for a tenth of a second or more, a few times a run (docs/BENCHMARKS.md, the
//! twenty-eighth round, and the pair `r28-wal-background`).
//!
//! How: a connection of its own, on its own task, runs a `PASSIVE` checkpoint after the
//! writer commits a tick (at most one every [`PAUSE`]): it copies what is committed into
//! the file and syncs it while the writer goes on appending (a passive checkpoint never
//! waits for, nor blocks, a writer). The writer's own checkpoint still comes at 4,000
//! pages — SQLite starts the log over from its beginning only when a write begins with
//! every page of it folded, which a pass beside a busy writer rarely sees —, but finds
//! the pages copied and synced already and has only the last few to fold.
//!
//! Durability is unchanged: a commit is as durable as the log makes it, whoever copies it
//! into the file later. Should the connection not open, nothing changes but the speed:
//! the writer folds the log alone, as it did.
//!
//! Order at close: this connection closes first, so that the writer's connection is the
//! last one and its close folds the log in and removes the `-wal` and `-shm` files.

use std::sync::Arc;
use std::time::Duration;

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use tokio::sync::{Notify, watch};

/// The shortest time between two background checkpoints: each syncs the file, and a
/// 1,000-NPC town commits a tick every 25 ms or so.
const PAUSE: Duration = Duration::from_millis(200);

/// The background checkpointer of one store's file.
#[derive(Debug)]
pub(super) struct WalFolder {
    stop: watch::Sender<bool>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl WalFolder {
    /// Starts the task on the current tokio runtime; it connects with `options` (the
    /// writer's, for the same file) and folds the log each time `committed` is told.
    pub(super) fn spawn(options: SqliteConnectOptions, committed: Arc<Notify>) -> Self {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(fold(options, committed, stopped));
        Self {
            stop,
            task: std::sync::Mutex::new(Some(task)),
        }
    }

    /// Stops the task (after the checkpoint it may be running) and closes its connection.
    /// Before the writer's connection closes.
    pub(super) async fn stop(&self) {
        let _ = self.stop.send(true);
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

async fn fold(
    options: SqliteConnectOptions,
    committed: Arc<Notify>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut conn = match SqliteConnection::connect_with(&options).await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::debug!("no background checkpoints (the writer folds the log itself): {e}");
            return;
        }
    };
    loop {
        tokio::select! {
            () = committed.notified() => {}
            _ = stopped.changed() => break,
        }
        if *stopped.borrow() {
            break;
        }
        // Busy (the writer folding the log itself) or failed: the writer's own checkpoint
        // still comes, so nothing is lost but this pass.
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut conn)
            .await
        {
            tracing::debug!("a background checkpoint failed: {e}");
        }
        tokio::select! {
            () = tokio::time::sleep(PAUSE) => {}
            _ = stopped.changed() => break,
        }
    }
    let _ = conn.close().await;
}

impl Drop for WalFolder {
    /// A store dropped without [`crate::Store::close`] stops its checkpointer too, which
    /// then closes its connection on its own task.
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
