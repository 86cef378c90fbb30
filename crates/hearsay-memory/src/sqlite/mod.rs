//! The embedded store: one SQLite file per run, through sqlx, with the run's vectors held
//! in memory for exact cosine recall.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId};
use sqlx::Row;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::embed::{Embedding, VECTOR_DIMS};

mod packed;
mod vectors;
mod wal;
mod writer;

use crate::forget::Forgetting;
use crate::index::{Forgotten, MemoryMeta, VectorIndex};
use crate::ledger::Ledger;
use crate::meta::DenseIds;
use crate::migrations;
use crate::scoring::Scoring;
use crate::space::{SpaceSwitch, VectorSpace};
use crate::store::SpaceGuard;
use crate::store::{
    EmbeddedRow, MemoryStats, PendingEmbedding, RecalledMemory, Rewind, SavedChain, Store,
    StoreError, StoredMemory, TickWrite,
};
use vectors::{BlobIds, PackedVectors};
pub use vectors::{decode_vector, encode_embedding, encode_vector};

const NOT_A_STORE: &str = "holds no hearsay memory store (an empty file, or another database)";

fn damaged(path: &Path, problem: &str) -> StoreError {
    StoreError::Damaged {
        location: path.display().to_string(),
        problem: problem.to_owned(),
    }
}

/// A failure reading an earlier run's file: damage (SQLite's CORRUPT, NOTADB) is said so;
/// anything else stays what it was.
fn damaged_by(path: &Path, error: sqlx::Error) -> StoreError {
    let code = match &error {
        sqlx::Error::Database(db) => db.code().and_then(|c| c.parse::<i64>().ok()),
        _ => None,
    };
    match code.map(|c| c & 0xff) {
        Some(11) => damaged(path, &format!("damaged ({error})")),
        // SQLite reports some damaged record headers as a failed allocation.
        Some(7) => damaged(path, &format!("damaged: unreadable ({error})")),
        Some(26) => damaged(path, "not a database (it holds something else)"),
        _ => StoreError::Open {
            location: path.display().to_string(),
            source: error,
        },
    }
}

/// Checkpoints are kept compressed: a big town's checkpoint is hundreds of kilobytes of
/// JSON per tick, and zstd's fastest level packs it many times over for a small share of
/// the tick (the harness's row "checkpoints, as stored" against "their JSON"). A checkpoint written before compression is its
/// JSON as TEXT and reads as it always did (its bytes never begin with zstd's magic
/// number, as JSON never begins with byte 0x28 0xb5).
const CHECKPOINT_ZSTD_LEVEL: i32 = 1;

/// zstd's frame magic number, as the first bytes of every compressed checkpoint.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The most a compressed checkpoint may unpack to: SQLite's longest value
/// (`SQLITE_MAX_LENGTH`), so nothing the uncompressed format could hold is refused, while
/// a crafted file cannot make a reader inflate without bound.
const CHECKPOINT_MAX_BYTES: u64 = 1_000_000_000;

/// A checkpoint's JSON as this store keeps it.
fn pack_checkpoint(json: &str) -> Result<Vec<u8>, StoreError> {
    zstd::bulk::compress(json.as_bytes(), CHECKPOINT_ZSTD_LEVEL)
        .map_err(|e| StoreError::Corrupt(format!("cannot compress a checkpoint: {e}")))
}

/// A stored checkpoint's JSON: unpacked when compressed, as it is when written as TEXT
/// by an earlier version.
fn unpack_checkpoint(next_tick: i64, stored: Vec<u8>) -> Result<String, StoreError> {
    unpack_at_most(next_tick, stored, CHECKPOINT_MAX_BYTES)
}

fn unpack_at_most(next_tick: i64, stored: Vec<u8>, max: u64) -> Result<String, StoreError> {
    let broken = |problem: String| {
        StoreError::Corrupt(format!("the checkpoint before tick {next_tick}: {problem}"))
    };
    let json = if stored.starts_with(&ZSTD_MAGIC) {
        use std::io::Read;
        let mut json = Vec::new();
        zstd::stream::read::Decoder::new(stored.as_slice())
            .map_err(|e| broken(format!("cannot decompress it: {e}")))?
            .take(max + 1)
            .read_to_end(&mut json)
            .map_err(|e| broken(format!("cannot decompress it: {e}")))?;
        if json.len() as u64 > max {
            return Err(broken(format!("it unpacks to more than {max} bytes")));
        }
        json
    } else {
        stored
    };
    String::from_utf8(json).map_err(|_| broken("it is not UTF-8 text".to_owned()))
}

/// The SQLite migrations, embedded in the binary (listed here so a new file cannot be
/// forgotten: a test checks this list against `migrations/sqlite`).
const MIGRATIONS: &[migrations::Embedded] = &[
    (
        1,
        "memories",
        include_str!("../../../../migrations/sqlite/0001_memories.sql"),
    ),
    (
        2,
        "memories_view",
        include_str!("../../../../migrations/sqlite/0002_memories_view.sql"),
    ),
    (
        3,
        "checkpoints",
        include_str!("../../../../migrations/sqlite/0003_checkpoints.sql"),
    ),
    (
        4,
        "forgetting_chunks_reflections",
        include_str!("../../../../migrations/sqlite/0004_forgetting_chunks_reflections.sql"),
    ),
    (
        5,
        "narrow_recalls",
        include_str!("../../../../migrations/sqlite/0005_narrow_recalls.sql"),
    ),
    (
        6,
        "vector_spaces",
        include_str!("../../../../migrations/sqlite/0006_vector_spaces.sql"),
    ),
    (
        7,
        "checkpoint_deltas",
        include_str!("../../../../migrations/sqlite/0007_checkpoint_deltas.sql"),
    ),
    (
        8,
        "shared_vectors",
        include_str!("../../../../migrations/sqlite/0008_shared_vectors.sql"),
    ),
    (
        9,
        "no_npc_index",
        include_str!("../../../../migrations/sqlite/0009_no_npc_index.sql"),
    ),
    (
        10,
        "narrow_memories",
        include_str!("../../../../migrations/sqlite/0010_narrow_memories.sql"),
    ),
    (
        11,
        "blobs_kept_unique_by_the_store",
        include_str!("../../../../migrations/sqlite/0011_blobs_kept_unique_by_the_store.sql"),
    ),
];

/// Drops the vectors no chunk names any longer (after a rewind or a change of model):
/// one pass over the chunks, whatever the number of blobs.
const DROP_UNNAMED_BLOBS: &str =
    "DELETE FROM vector_blobs WHERE vid NOT IN (SELECT vid FROM memory_chunk_vectors)";

/// Makes sure `vector_spaces` has (model ?1, width ?2), before rows are marked with it.
const ADD_SPACE: &str =
    "INSERT INTO vector_spaces (model, dims) VALUES (?1, ?2) ON CONFLICT (model, dims) DO NOTHING";

/// Records the names of the run's NPCs (by id, their place in `names`) that `npcs` does
/// not have yet: the `npc_name` the view `memories` gives each row. A name once recorded
/// stays, as the rows written with it did before 0010.
async fn name_npcs(pool: &SqlitePool, names: &[String]) -> Result<(), StoreError> {
    if names.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO npcs (npc, name) SELECT key, value FROM json_each(?) WHERE true \
         ON CONFLICT (npc) DO NOTHING",
    )
    .bind(serde_json::Value::from(names.to_vec()).to_string())
    .execute(pool)
    .await?;
    Ok(())
}

/// A kind as `memory_rows` keeps it (`memory_kinds`, migration 0010).
fn kind_code(kind: MemoryKind) -> i64 {
    match kind {
        MemoryKind::Observation => 0,
        MemoryKind::Conversation => 1,
        MemoryKind::Reflection => 2,
        MemoryKind::Seed => 3,
    }
}

/// The migrator for `migrations/sqlite`.
pub fn migrator() -> Migrator {
    migrations::migrator(MIGRATIONS)
}

/// A run's memories in one SQLite file.
#[derive(Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    path: PathBuf,
    /// The metadata and vectors recall reads, ahead of the file: `write_tick` adds a
    /// tick's memories and `save_embeddings` their vectors as they queue the writes.
    ledger: Ledger<VectorIndex>,
    /// Vector bytes recall has read, for throughput figures.
    scanned: AtomicU64,
    /// The model (and width) whose vectors `memory_vectors` holds.
    space: SpaceGuard,
    /// Every stored vector's `vid` by its bytes' digest: a save writes only the vectors
    /// the file lacks and names the rest, without asking the file.
    blobs: std::sync::Mutex<BlobIds>,
    /// Every write to the file, in order, in the background (see [`writer`]).
    writer: writer::Writer,
    /// Told by the writer after each tick's commit: what the background checkpointer
    /// waits for.
    committed: std::sync::Arc<tokio::sync::Notify>,
    /// The background checkpointer of a store that writes (see [`wal`]); none for one
    /// opened to read.
    wal: Option<wal::WalFolder>,
    /// False for a store opened to read only ([`SqliteStore::open_unloaded`]), or to be
    /// rewound before it is loaded ([`SqliteStore::open_to_rewind`]): its ledger knows
    /// none of the file's rows, so it refuses to write or claim rather than miss rows it
    /// never loaded. A load ([`Store::rewind`]'s) sets it.
    loaded: AtomicBool,
}

impl SqliteStore {
    /// Creates a new store at `path` (the file must not exist yet) and applies migrations.
    pub async fn create(path: &Path, npc_names: Vec<String>) -> Result<Self, StoreError> {
        let pool = Self::pool(path, true)
            .await
            .map_err(|source| StoreError::Open {
                location: path.display().to_string(),
                source,
            })?;
        migrator().run(&pool).await?;
        name_npcs(&pool, &npc_names).await?;
        Ok(Self::with_pool(pool, path).folding())
    }

    /// Opens the store of an earlier run and loads its memories and vectors, after
    /// SQLite's `quick_check` of every page: a resumed or forked run must not build on a
    /// damaged store.
    pub async fn open(path: &Path, npc_names: Vec<String>) -> Result<Self, StoreError> {
        let store = Self::connect_existing(path, npc_names, true).await?;
        let loaded = store.reload().await.map_err(|e| match e {
            StoreError::Query(e) => damaged_by(path, e),
            other => other,
        });
        match loaded {
            Ok(()) => Ok(store.folding()),
            Err(e) => {
                store.pool.close().await;
                Err(e)
            }
        }
    }

    /// Opens the store of an earlier run without loading it into memory: for reading
    /// (`hearsay inspect`), never for recall.
    pub async fn open_unloaded(path: &Path, npc_names: Vec<String>) -> Result<Self, StoreError> {
        let store = Self::connect_existing(path, npc_names, false).await?;
        store.loaded.store(false, Ordering::Release);
        Ok(store)
    }

    /// Opens the store of an earlier run after the same checks as [`SqliteStore::open`],
    /// to be rewound to a checkpoint ([`Store::rewind`]) before anything else: the rewind
    /// loads it, once. (`open` loaded every memory and vector, and the rewind loaded them
    /// all again: a resume or a fork of a 10,000-NPC town late in its run spent seconds
    /// and twice the memory on the first load.) Until the rewind it refuses to write,
    /// claim or recall.
    pub async fn open_to_rewind(path: &Path, npc_names: Vec<String>) -> Result<Self, StoreError> {
        let store = Self::connect_existing(path, npc_names, true).await?;
        store.loaded.store(false, Ordering::Release);
        Ok(store.folding())
    }

    /// Opens the store of an earlier run after the same checks as [`SqliteStore::open`]
    /// (every page included), without loading it: to read what it says of the run, such
    /// as its last checkpoint, before deciding to load it.
    pub async fn open_checked_unloaded(
        path: &Path,
        npc_names: Vec<String>,
    ) -> Result<Self, StoreError> {
        let store = Self::connect_existing(path, npc_names, true).await?;
        store.loaded.store(false, Ordering::Release);
        Ok(store)
    }

    /// Connects to an earlier run's file: it must exist and hold a hearsay store (and,
    /// with `every_page`, pass SQLite's `quick_check`); the migrations then bring an
    /// older schema up to date.
    async fn connect_existing(
        path: &Path,
        npc_names: Vec<String>,
        every_page: bool,
    ) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(damaged(path, "missing: the run's memories are not there"));
        }
        // Look before connecting: SQLite would turn an empty file into a new database.
        let mut header = [0u8; 16];
        let read = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut header))
            .map_err(|e| damaged(path, &format!("cannot be read ({e})")))?;
        if read == 0 {
            return Err(damaged(path, NOT_A_STORE));
        }
        if read < header.len() || &header != b"SQLite format 3\0" {
            return Err(damaged(path, "not a database (it holds something else)"));
        }
        Self::verify(path, every_page).await?;
        let pool = Self::pool(path, false)
            .await
            .map_err(|e| damaged_by(path, e))?;
        if let Err(e) = migrator().run(&pool).await {
            pool.close().await;
            return Err(match e {
                sqlx::migrate::MigrateError::Execute(e) => damaged_by(path, e),
                other => StoreError::Migrate(other),
            });
        }
        if let Err(e) = name_npcs(&pool, &npc_names).await {
            pool.close().await;
            return Err(e);
        }
        Ok(Self::with_pool(pool, path))
    }

    /// Checks that `path` holds a hearsay store (and, with `every_page`, that every page
    /// reads) over one connection of its own, before any pool opens it. A store that was
    /// closed cleanly (no `-wal` file) is read as immutable, so a refused file is left
    /// exactly as it was: a WAL connection creates `-wal` and `-shm` files, and SQLite
    /// does not always remove them when it closes a damaged file.
    async fn verify(path: &Path, every_page: bool) -> Result<(), StoreError> {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let options = if Path::new(&wal).exists() {
            Self::options(path, false)
        } else {
            SqliteConnectOptions::new()
                .filename(path)
                .read_only(true)
                .immutable(true)
        };
        let mut conn = sqlx::ConnectOptions::connect(&options)
            .await
            .map_err(|e| damaged_by(path, e))?;
        let checked = Self::check_contents(&mut conn, path, every_page).await;
        let _ = sqlx::Connection::close(conn).await;
        checked
    }

    async fn check_contents(
        conn: &mut sqlx::SqliteConnection,
        path: &Path,
        every_page: bool,
    ) -> Result<(), StoreError> {
        let tables: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM sqlite_master \
             WHERE type = 'table' AND name IN ('memories', 'memory_rows')",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| damaged_by(path, e))?;
        if tables != 1 {
            return Err(damaged(path, NOT_A_STORE));
        }
        if every_page {
            let lines: Vec<String> = sqlx::query_scalar("PRAGMA quick_check")
                .fetch_all(&mut *conn)
                .await
                .map_err(|e| damaged_by(path, e))?;
            if lines.iter().any(|l| l != "ok") {
                return Err(damaged(
                    path,
                    &format!("SQLite's integrity check fails: {}", lines.join("; ")),
                ));
            }
        }
        Ok(())
    }

    /// One connection: SQLite lets one transaction write at a time, so the tick's write
    /// and the worker's save take turns either way (in the pool's queue, not in SQLite's
    /// sleeping busy handler), and every read the run makes comes from memory. With
    /// several, a reader's connections could close at once, each seeing the other still
    /// open, and leave the `-wal` and `-shm` files beside the store (`hearsay inspect`
    /// did, in about a third of its runs in a debug build).
    async fn pool(path: &Path, create: bool) -> Result<SqlitePool, sqlx::Error> {
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(Self::options(path, create))
            .await
    }

    fn options(path: &Path, create: bool) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            // Vectors are 6 KiB: bigger pages keep each one in fewer overflow pages.
            .page_size(16384)
            // 64 MiB of pages (SQLite's default is 2 MiB): a big town's tables and
            // indexes outgrow the default, each miss a read from the OS.
            .pragma("cache_size", "-65536")
            // The write-ahead log is copied into the file every 4,000 pages (64 MiB), not
            // SQLite's 1,000: fewer, larger checkpoints, each page rewritten in the file
            // fewer times (measured in docs/BENCHMARKS.md, the twentieth round). The cost
            // is disk while a store is open: up to 64 MiB of log, not 16. Durability is
            // the log's, unchanged; the last connection's close still folds the log in and
            // removes it.
            .pragma("wal_autocheckpoint", "4000")
            .busy_timeout(Duration::from_secs(30))
    }

    fn with_pool(pool: SqlitePool, path: &Path) -> Self {
        let committed = std::sync::Arc::new(tokio::sync::Notify::new());
        Self {
            writer: writer::Writer::spawn(writer::SqliteSink::new(pool.clone(), committed.clone())),
            committed,
            wal: None,
            pool,
            path: path.to_owned(),
            ledger: Ledger::default(),
            scanned: AtomicU64::new(0),
            space: SpaceGuard::default(),
            blobs: std::sync::Mutex::new(BlobIds::default()),
            loaded: AtomicBool::new(true),
        }
    }

    /// This store with its background checkpointer (a store that writes).
    fn folding(mut self) -> Self {
        self.wal = Some(wal::WalFolder::spawn(
            Self::options(&self.path, false),
            self.committed.clone(),
        ));
        self
    }

    /// Refuses a write or a claim on a store opened only to read.
    fn writable(&self) -> Result<(), StoreError> {
        if self.loaded.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(StoreError::Setup(format!(
                "{} was opened to read; a store that writes or embeds must be opened (and \
                 loaded) with SqliteStore::open",
                self.path.display()
            )))
        }
    }

    /// Records run-level facts (scenario name, seed, …) in `run_meta`.
    pub async fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        self.writer.flush().await?;
        sqlx::query("INSERT INTO run_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(value)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes a consistent copy of the whole store to `path` (`VACUUM INTO`).
    pub async fn copy_to(&self, path: &Path) -> Result<(), StoreError> {
        self.writer.flush().await?;
        sqlx::query("VACUUM INTO ?")
            .bind(path.display().to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Rebuilds the in-memory index and the high-water mark from the file (keeping the
    /// forgetting policy).
    ///
    /// Rows are read a packed batch at a time (`packed`), and each distinct vector is
    /// decoded once: memories name their vector by `vid`, and in a 10,000-NPC town
    /// 364,000 memories named 62,000 vectors — read through the view `memory_vectors`,
    /// every memory's blob came back, was written out as 1,536 floats and made sparse
    /// again, most of a resume's load.
    ///
    /// A file whose ids jump far past the memories it holds is refused before the index
    /// grows to them ([`DenseIds`]).
    async fn reload(&self) -> Result<(), StoreError> {
        let mut index = VectorIndex::default();
        let mut written = 0;
        let mut dense = DenseIds::default();
        packed::each_memory(&self.pool, None, |mut meta, _| {
            dense.admit(meta.memory.id)?;
            written = written.max(meta.memory.id.0);
            // Live memories become embedded in the index as their vectors load below.
            if meta.forgotten.is_none() {
                meta.embedded = false;
            }
            index.insert_meta(meta);
            Ok::<(), StoreError>(())
        })
        .await?;
        let stored: Vec<(i64, Vec<u8>)> = sqlx::query_as("SELECT vid, embedding FROM vector_blobs")
            .fetch_all(&self.pool)
            .await?;
        // Only live memories' vectors: archived ones stay on disk, out of recall.
        let mut chunks: Vec<(i64, i64)> = Vec::new();
        packed::each_live_chunk(&self.pool, |id, vid| {
            chunks.push((id, vid));
            Ok(())
        })
        .await?;
        let bytes: std::collections::HashMap<i64, &[u8]> =
            stored.iter().map(|(vid, b)| (*vid, b.as_slice())).collect();
        let mut decoded: std::collections::HashMap<i64, Embedding> =
            std::collections::HashMap::new();
        // A chunk whose blob is missing is skipped, as the view's join skipped it.
        index.load_chunks(chunks.iter().filter_map(|&(id, vid)| {
            let blob = bytes.get(&vid)?;
            let vector = match decoded.entry(vid) {
                std::collections::hash_map::Entry::Occupied(e) => e.get().clone(),
                std::collections::hash_map::Entry::Vacant(e) => match decode_vector(blob) {
                    Some(v) => e.insert(Embedding::of_fitted(v)).clone(),
                    None => {
                        return Some(Err(StoreError::Corrupt(format!(
                            "memory {id} has a malformed vector"
                        ))));
                    }
                },
            };
            Some(Ok((MemoryId(id as u64), vector)))
        }))?;
        let blobs = BlobIds::of(stored.iter().map(|(vid, b)| (*vid, b.as_slice())));
        *self.blobs.lock().unwrap_or_else(|e| e.into_inner()) = blobs;
        self.ledger.replace(index, written);
        self.loaded.store(true, Ordering::Release);
        Ok(())
    }

    /// A model other than `model` whose vectors recall would use, if any.
    async fn other_model(&self, model: &str) -> Result<Option<String>, StoreError> {
        self.writer.flush().await?;
        Ok(sqlx::query_scalar(
            "SELECT embedding_model FROM memories \
             WHERE embedding_model IS NOT NULL AND embedding_model <> ? LIMIT 1",
        )
        .bind(model)
        .fetch_optional(&self.pool)
        .await?)
    }
}

/// Evidence ids as stored: a JSON array, or NULL when there is none.
fn evidence_json(m: &MemoryRecord) -> Option<String> {
    (!m.evidence.is_empty()).then(|| {
        serde_json::Value::from(m.evidence.iter().map(|e| e.0).collect::<Vec<_>>()).to_string()
    })
}

fn to_i64(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} {v} does not fit in SQLite")))
}

impl Store for SqliteStore {
    async fn close(&self) {
        // Whatever is queued is written first; a failure was reported to the caller that
        // wrote (or flushed) after it.
        if let Err(e) = self.writer.flush().await {
            tracing::warn!("closing the memory store with writes lost: {e}");
        }
        // Its connection first: the writer's must be the last to close (see `wal`).
        if let Some(wal) = &self.wal {
            wal.stop().await;
        }
        self.pool.close().await;
    }

    async fn latest_checkpoint(
        &self,
        at_most: Option<u64>,
    ) -> Result<Option<SavedChain>, StoreError> {
        self.writer.flush().await?;
        let limit = to_i64(at_most.unwrap_or(i64::MAX as u64), "tick")?;
        let rows = sqlx::query(
            "SELECT next_tick, base, CAST(state AS BLOB) AS state FROM checkpoints
             WHERE next_tick <= ?1 ORDER BY next_tick",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        SavedChain::from_rows(&rows, |r| {
            unpack_checkpoint(r.try_get("next_tick")?, r.try_get("state")?)
        })
    }

    async fn rewind(&self, rewind: Rewind) -> Result<(), StoreError> {
        self.writer.flush().await?;
        let first = to_i64(rewind.next_memory_id, "memory id")?;
        let tick = to_i64(rewind.next_tick, "tick")?;
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM memory_recalls WHERE id >= ?")
            .bind(first)
            .execute(&mut *tx)
            .await?;
        for table in ["memory_chunk_vectors", "memory_vectors_kept"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE id >= ?"
            )))
            .bind(first)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(DROP_UNNAMED_BLOBS).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM memory_rows WHERE id >= ?")
            .bind(first)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM checkpoints WHERE next_tick > ?")
            .bind(tick)
            .execute(&mut *tx)
            .await?;
        // Archived in the undone ticks: live again.
        sqlx::query("UPDATE memory_rows SET forgotten_tick = NULL WHERE forgotten_tick >= ?")
            .bind(tick)
            .execute(&mut *tx)
            .await?;
        // Recall state as it was before the undone ticks: rows touched in them go, and
        // every memory the event log has recalled before them gets the log's state —
        // not only those the undone ticks touched: the file may lag the run by up to the
        // ticks the writer gathers touches over (a crash loses those), so a row the
        // undone ticks never reached may be short of ticks before them too. A memory the
        // log does not name keeps its row.
        sqlx::query("DELETE FROM memory_recalls WHERE tick_last_recalled >= ?")
            .bind(tick)
            .execute(&mut *tx)
            .await?;
        let rows: Vec<(i64, i64, i64)> = rewind
            .recall_counts
            .iter()
            .filter(|(id, n)| **n > 0 && id.0 < rewind.next_memory_id)
            .map(|(id, n)| {
                let last = rewind.last_recalled.get(id).copied().unwrap_or(0);
                Ok((
                    to_i64(id.0, "memory id")?,
                    to_i64(last, "tick")?,
                    i64::from(*n),
                ))
            })
            .collect::<Result<_, StoreError>>()?;
        for chunk in rows.chunks(writer::TOUCHES_PER_UPSERT) {
            let sql = writer::multi_row(
                writer::INSERT_RECALLS,
                "(?,?,?)",
                chunk.len(),
                " ON CONFLICT (id) DO UPDATE SET tick_last_recalled = excluded.tick_last_recalled, \
                 recall_count = excluded.recall_count",
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (id, last, n) in chunk {
                query = query.bind(id).bind(last).bind(n);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        self.reload().await
    }

    /// One file has one writer process and one worker: nothing to lock.
    type Claim = ();

    /// Queued (see `writer`): the ledger has the tick at once, the file once the
    /// writer commits it.
    async fn write_tick(&self, write: TickWrite) -> Result<(), StoreError> {
        self.writable()?;
        to_i64(write.tick, "tick")?;
        self.ledger.before_write(&write);
        let (tick, recalled, last) = (
            write.tick,
            write.recalled.clone(),
            write.memories.last().map(|m| m.id),
        );
        self.writer.tick(write).await?;
        // Only now: the backfill claims no id above the written mark, so no vector is
        // queued before the row it belongs to.
        self.ledger.written(tick, &recalled, last);
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.writer.flush().await
    }

    fn background_write_time(&self) -> Option<std::time::Duration> {
        Some(self.writer.busy())
    }

    fn written_through(&self) -> u64 {
        self.ledger.written_through()
    }

    /// From memory: the file has one writer and one worker, so the ledger knows every
    /// row the worker has not embedded yet (committed ones only: up to the high-water
    /// mark).
    async fn claim_embeddings(
        &self,
        limit: usize,
    ) -> Result<(Vec<PendingEmbedding>, ()), StoreError> {
        self.writable()?;
        Ok((self.ledger.pending(limit, &BTreeSet::new()), ()))
    }

    async fn lowest_unembedded(&self) -> Result<Option<u64>, StoreError> {
        self.writable()?;
        Ok(self.ledger.lowest_unembedded())
    }

    async fn save_embeddings(
        &self,
        _claim: (),
        rows: Vec<EmbeddedRow>,
        model: &str,
    ) -> Result<(), StoreError> {
        self.writable()?;
        if rows.is_empty() {
            return Ok(());
        }
        if rows.iter().any(|r| !r.vector.fits()) {
            return Err(StoreError::Corrupt(format!(
                "a vector is not {VECTOR_DIMS} wide"
            )));
        }
        self.space
            .check_save(model, &rows, self.other_model(model))
            .await?;
        let rows = self.ledger.still_waiting(rows);
        if rows.is_empty() {
            return Ok(());
        }
        let mut by_dims: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
        for r in &rows {
            by_dims
                .entry(r.dims)
                .or_default()
                .push(to_i64(r.id.0, "memory id")?);
        }
        // A chunked memory is in `rows` once per chunk.
        for ids in by_dims.values_mut() {
            ids.sort_unstable();
            ids.dedup();
        }
        let chunks = rows
            .iter()
            .map(|r| {
                Ok((
                    to_i64(r.id.0, "memory id")?,
                    i64::from(r.chunk),
                    encode_embedding(&r.vector),
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        self.writer.failed()?;
        let packed = {
            let mut blobs = self.blobs.lock().unwrap_or_else(|e| e.into_inner());
            PackedVectors::pack(chunks, &mut blobs)
        };
        // Recallable now; in the file once the writer gets to it (after the rows, which
        // were queued before these ids could be claimed).
        {
            let groups = crate::index::group_chunks(&rows);
            self.ledger.write().add_all(&groups);
        }
        self.writer
            .vectors(writer::Vectors {
                packed,
                by_dims,
                model: model.to_owned(),
            })
            .await
    }

    fn memories(&self, ids: &[MemoryId]) -> Vec<MemoryRecord> {
        self.ledger.memories(ids)
    }

    fn set_forgetting(&self, policy: Forgetting) {
        self.ledger.set_forgetting(policy);
    }

    fn forget_due(&self, tick: u64) -> Vec<Forgotten> {
        self.ledger.write().forget_due(tick)
    }

    /// Nothing to move: archived vectors already left the in-memory index.
    async fn tidy_archive(&self) -> Result<usize, StoreError> {
        Ok(0)
    }

    async fn metadata(&self) -> Result<Vec<MemoryMeta>, StoreError> {
        let mut out = Vec::new();
        self.each_meta(|meta| {
            out.push(meta);
            Ok::<(), StoreError>(())
        })
        .await?;
        Ok(out)
    }

    async fn each_meta<E: From<StoreError> + Send>(
        &self,
        mut each: impl FnMut(MemoryMeta) -> Result<(), E> + Send,
    ) -> Result<(), E> {
        self.writer.flush().await?;
        packed::each_memory(&self.pool, None, |meta, _| each(meta)).await
    }

    async fn vectors_of(
        &self,
        ids: &[MemoryId],
    ) -> Result<BTreeMap<MemoryId, Vec<Vec<f32>>>, StoreError> {
        self.writer.flush().await?;
        let mut out: BTreeMap<MemoryId, Vec<Vec<f32>>> = BTreeMap::new();
        // One statement per 500 ids: well under SQLite's limit of bound parameters.
        for part in ids.chunks(500) {
            let marks = vec!["?"; part.len()].join(", ");
            let mut q = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT id, embedding FROM memory_vectors WHERE id IN ({marks}) ORDER BY id, chunk"
            )));
            for id in part {
                q = q.bind(id.0 as i64);
            }
            for r in q.fetch_all(&self.pool).await? {
                let id = MemoryId(r.try_get::<i64, _>("id")? as u64);
                let bytes: Vec<u8> = r.try_get("embedding")?;
                let vector = decode_vector(&bytes).ok_or_else(|| {
                    StoreError::Corrupt(format!("memory {} has a malformed vector", id.0))
                })?;
                out.entry(id).or_default().push(vector);
            }
        }
        Ok(out)
    }

    async fn memories_of(&self, npc: Option<NpcId>) -> Result<Vec<StoredMemory>, StoreError> {
        self.writer.flush().await?;
        // `?1 IS NULL` selects every NPC.
        let mut out: Vec<StoredMemory> = Vec::new();
        packed::each_memory(&self.pool, npc, |meta, space| {
            out.push(StoredMemory {
                meta,
                vectors: Vec::new(),
                space,
            });
            Ok::<(), StoreError>(())
        })
        .await?;
        let npc = npc.map(|n| i64::from(n.0));
        let vectors = sqlx::query(
            "SELECT v.id, v.embedding FROM memory_vectors v JOIN memories m USING (id) \
             WHERE (?1 IS NULL OR m.npc = ?1) ORDER BY v.id, v.chunk",
        )
        .bind(npc)
        .fetch_all(&self.pool)
        .await?;
        let mut at = 0;
        for r in &vectors {
            let id = MemoryId(r.try_get::<i64, _>("id")? as u64);
            let bytes: Vec<u8> = r.try_get("embedding")?;
            let vector = decode_vector(&bytes).ok_or_else(|| {
                StoreError::Corrupt(format!("memory {} has a malformed vector", id.0))
            })?;
            while at < out.len() && out[at].meta.memory.id < id {
                at += 1;
            }
            if let Some(m) = out.get_mut(at).filter(|m| m.meta.memory.id == id) {
                m.vectors.push(vector);
            }
        }
        Ok(out)
    }

    async fn recall(
        &self,
        npc: NpcId,
        query: &[f32],
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> Result<Vec<RecalledMemory>, StoreError> {
        let (recalled, read) = self
            .ledger
            .read()
            .search_counted(npc, query, tick, k, scoring);
        self.scanned.fetch_add(read as u64, Ordering::Relaxed);
        Ok(recalled)
    }

    fn bytes_scanned(&self) -> u64 {
        self.scanned.load(Ordering::Relaxed)
    }

    async fn stats(&self) -> Result<MemoryStats, StoreError> {
        self.writer.flush().await?;
        let mut stats = MemoryStats::default();
        let rows =
            sqlx::query("SELECT kind, COUNT(*) AS n FROM memories GROUP BY kind ORDER BY kind")
                .fetch_all(&self.pool)
                .await?;
        for row in rows {
            let kind: String = row.try_get("kind")?;
            let n: i64 = row.try_get("n")?;
            if MemoryKind::parse(&kind).is_none() {
                return Err(StoreError::Corrupt(format!("unknown memory kind {kind:?}")));
            }
            stats.total += n as u64;
            stats.by_kind.insert(kind, n as u64);
        }
        let unembedded: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM memory_rows WHERE space IS NULL")
                .fetch_one(&self.pool)
                .await?
                .try_get("n")?;
        stats.unembedded = unembedded as u64;
        let archived: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM memory_rows WHERE forgotten_tick IS NOT NULL")
                .fetch_one(&self.pool)
                .await?
                .try_get("n")?;
        stats.archived = archived as u64;
        let in_use: Vec<(String, i64)> = sqlx::query_as(
            "SELECT embedding_model AS model, count(*) AS n FROM memories \
             WHERE embedding_model IS NOT NULL GROUP BY embedding_model",
        )
        .fetch_all(&self.pool)
        .await?;
        let kept: Vec<(String, i64)> = sqlx::query_as(
            "SELECT model, count(DISTINCT id) AS n FROM memory_vectors_kept GROUP BY model",
        )
        .fetch_all(&self.pool)
        .await?;
        stats.count_models(in_use, kept);
        Ok(stats)
    }

    async fn use_space(&self, space: &VectorSpace) -> Result<SpaceSwitch, StoreError> {
        self.writer.flush().await?;
        let model = space.model.as_str();
        let mut tx = self.pool.begin().await?;
        // The space's width: as given, else the one its vectors (in use, else kept) have.
        let dims: Option<i64> = match space.dims {
            Some(d) => Some(to_i64(d as u64, "dims")?),
            None => {
                sqlx::query_scalar(
                    "SELECT d FROM (SELECT embedding_dims AS d, 0 AS kept, count(*) AS n \
                     FROM memories WHERE embedding_model = ?1 GROUP BY embedding_dims \
                     UNION ALL SELECT dims, 1, count(DISTINCT id) FROM memory_vectors_kept \
                     WHERE model = ?1 GROUP BY dims) ORDER BY kept, n DESC, d LIMIT 1",
                )
                .bind(model)
                .fetch_optional(&mut *tx)
                .await?
            }
        };
        // Memories whose vectors are of another space: ?1 model, ?2 width.
        const OTHER: &str = "embedding_model IS NOT NULL \
             AND NOT (embedding_model = ?1 AND (?2 IS NULL OR embedding_dims = ?2))";
        let mut switch = SpaceSwitch::default();
        let retired = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT embedding_model AS model, count(*) AS n FROM memories WHERE {OTHER} \
             GROUP BY embedding_model"
        )))
        .bind(model)
        .bind(dims)
        .fetch_all(&mut *tx)
        .await?;
        for r in &retired {
            switch
                .retired
                .insert(r.try_get("model")?, r.try_get::<i64, _>("n")? as u64);
        }
        if !switch.retired.is_empty() {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO memory_vectors_kept (id, model, dims, chunk, embedding) \
                 SELECT v.id, m.embedding_model, m.embedding_dims, v.chunk, v.embedding \
                 FROM memory_vectors v JOIN memories m ON m.id = v.id WHERE {} \
                 ON CONFLICT DO NOTHING",
                OTHER.replace("embedding_", "m.embedding_")
            )))
            .bind(model)
            .bind(dims)
            .execute(&mut *tx)
            .await?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM memory_chunk_vectors WHERE id IN (SELECT id FROM memories WHERE {OTHER})"
            )))
            .bind(model)
            .bind(dims)
            .execute(&mut *tx)
            .await?;
            sqlx::query(DROP_UNNAMED_BLOBS).execute(&mut *tx).await?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE memory_rows SET space = NULL WHERE id IN (SELECT id FROM memories WHERE {OTHER})"
            )))
            .bind(model)
            .bind(dims)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(dims) = dims {
            // Kept vectors of this space come back (moved, not copied).
            const KEPT: &str = "FROM memory_vectors_kept k JOIN memories m ON m.id = k.id";
            const OF_SPACE: &str =
                "WHERE k.model = ?1 AND k.dims = ?2 AND m.embedding_model IS NULL";
            let kept = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT k.id, k.chunk, k.embedding {KEPT} {OF_SPACE} ORDER BY k.id, k.chunk"
            )))
            .bind(model)
            .bind(dims)
            .fetch_all(&mut *tx)
            .await?;
            let kept = kept
                .iter()
                .map(|r| {
                    Ok((
                        r.try_get("id")?,
                        r.try_get("chunk")?,
                        r.try_get("embedding")?,
                    ))
                })
                .collect::<Result<Vec<(i64, i64, Vec<u8>)>, StoreError>>()?;
            // Through the blobs the file holds now (the switch may have dropped some), as
            // a save writes them; the store reloads them below.
            let mut known = BlobIds::load(&mut tx).await?;
            PackedVectors::pack(kept, &mut known).write(&mut tx).await?;
            sqlx::query(ADD_SPACE)
                .bind(model)
                .bind(dims)
                .execute(&mut *tx)
                .await?;
            switch.restored = sqlx::query(
                "UPDATE memory_rows SET space = \
                 (SELECT space FROM vector_spaces WHERE model = ?1 AND dims = ?2) \
                 WHERE space IS NULL AND id IN \
                 (SELECT id FROM memory_vectors_kept WHERE model = ?1 AND dims = ?2)",
            )
            .bind(model)
            .bind(dims)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            sqlx::query(
                "DELETE FROM memory_vectors_kept WHERE model = ?1 AND dims = ?2 AND id IN \
                 (SELECT id FROM memories WHERE embedding_model = ?1 AND embedding_dims = ?2)",
            )
            .bind(model)
            .bind(dims)
            .execute(&mut *tx)
            .await?;
        }
        let pending = sqlx::query(
            "SELECT count(*) AS n, coalesce(max(id), 0) AS through, \
             coalesce(sum(EXISTS (SELECT 1 FROM memory_vectors_kept k WHERE k.id = m.id)), 0) AS reembed \
             FROM memory_rows m WHERE space IS NULL",
        )
        .fetch_one(&mut *tx)
        .await?;
        switch.pending = pending.try_get::<i64, _>("n")? as u64;
        switch.pending_through = pending.try_get::<i64, _>("through")? as u64;
        switch.reembed = pending.try_get::<i64, _>("reembed")? as u64;
        tx.commit().await?;
        let current = VectorSpace::new(model, dims.map(|d| d as usize));
        self.space.set(current.clone());
        switch.space = Some(current);
        if switch.changed() {
            self.reload().await?;
        }
        Ok(switch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::Embedding;
    use crate::embed::{Embedder, VECTOR_DIMS};
    use crate::hashing::{HASHING_MODEL, HashingEmbedder};
    use crate::store::SavedCheckpoint;
    use hearsay_core::MemoryRecord;
    use sqlx::Column;

    /// A tick's write of `memories` and nothing else.
    fn tick_of(tick: u64, memories: Vec<MemoryRecord>) -> TickWrite {
        TickWrite {
            tick,
            memories,
            ..TickWrite::default()
        }
    }

    fn mem(id: u64, npc: u32, content: &str) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(id),
            npc: NpcId(npc),
            kind: MemoryKind::Conversation,
            content: content.into(),
            importance: 8,
            tick: 1,
            source: None,
            core: false,
            evidence: Vec::new(),
            place: Default::default(),
        }
    }

    #[tokio::test]
    async fn checkpoints_are_compressed_and_old_text_ones_still_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let store = SqliteStore::create(&path, vec!["Bob".into()])
            .await
            .expect("store opens");
        let json = format!(
            r#"{{"next_tick":2,"npcs":[{}]}}"#,
            r#"{"npc":0},"#.repeat(500) + "{}"
        );
        let saved = |next_tick, base, state: &str| SavedCheckpoint {
            next_tick,
            base,
            state: state.to_owned(),
        };
        for (tick, base) in [(1, None), (2, Some(2))] {
            store
                .write_tick(TickWrite {
                    tick,
                    checkpoint: Some(saved(tick + 1, base, &json)),
                    ..TickWrite::default()
                })
                .await
                .expect("write");
        }
        let stored: Vec<(i64, String, i64)> =
            sqlx::query_as("SELECT next_tick, typeof(state), length(state) FROM checkpoints")
                .fetch_all(&store.pool)
                .await
                .expect("rows");
        assert!(
            stored
                .iter()
                .all(|(_, t, len)| t == "blob" && (*len as usize) < json.len() / 10),
            "{stored:?} against {} bytes of JSON",
            json.len()
        );
        // The chain before tick 3 reads back as the JSON written.
        let chain = store
            .latest_checkpoint(None)
            .await
            .expect("read")
            .expect("a chain");
        assert_eq!(chain.whole, saved(2, None, &json));
        assert_eq!(chain.deltas, vec![saved(3, Some(2), &json)]);
        // A checkpoint an earlier version wrote is its JSON as TEXT.
        sqlx::query("UPDATE checkpoints SET state = ? WHERE next_tick = 3")
            .bind(r#"{"old":true}"#)
            .execute(&store.pool)
            .await
            .expect("update");
        let chain = store
            .latest_checkpoint(None)
            .await
            .expect("read")
            .expect("a chain");
        assert_eq!(chain.deltas[0].state, r#"{"old":true}"#);
        // Damage is said, with the tick.
        sqlx::query("UPDATE checkpoints SET state = ? WHERE next_tick = 3")
            .bind([0x28u8, 0xb5, 0x2f, 0xfd, 1, 2, 3].to_vec())
            .execute(&store.pool)
            .await
            .expect("update");
        let e = store.latest_checkpoint(None).await.expect_err("damaged");
        assert!(e.to_string().contains("before tick 3"), "{e}");
    }

    /// Embeds every waiting memory of `store` with the hashing embedder.
    async fn embed_all(store: &SqliteStore) {
        let (pending, claim) = store.claim_embeddings(1000).await.expect("pending");
        save_hashed(store, &pending, claim).await;
        store.flush().await.expect("written");
    }

    /// Embeds the claimed `pending` with the hashing embedder and saves them.
    async fn save_hashed(store: &SqliteStore, pending: &[PendingEmbedding], claim: ()) {
        let embedder = HashingEmbedder;
        let texts: Vec<String> = pending.iter().map(|p| p.content.to_string()).collect();
        let vectors = embedder.embed(&texts).await.expect("embed");
        let rows = pending
            .iter()
            .zip(vectors)
            .map(|(p, vector)| EmbeddedRow {
                id: p.id,
                chunk: 0,
                dims: vector.len(),
                vector: Embedding::of_fitted(vector),
            })
            .collect();
        store
            .save_embeddings(claim, rows, embedder.model())
            .await
            .expect("save");
    }

    async fn counts(store: &SqliteStore) -> (i64, i64) {
        store.flush().await.expect("written");
        sqlx::query_as(
            "SELECT (SELECT count(*) FROM vector_blobs), (SELECT count(*) FROM memory_vectors)",
        )
        .fetch_one(&store.pool)
        .await
        .expect("counts")
    }

    #[tokio::test]
    async fn the_log_is_folded_in_the_background_and_the_close_leaves_no_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let store = SqliteStore::create(&path, vec!["Bob".into()])
            .await
            .expect("store opens");
        let size = || std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let before = size();
        // A tick of about 8 MiB of text: far below the 4,000 pages (64 MiB) at which the
        // writer would fold the log itself, so only the background can have copied it.
        let text = "x".repeat(4096);
        let memories = (1..=2000)
            .map(|id| mem(id, 0, &format!("{id} {text}")))
            .collect();
        store.write_tick(tick_of(1, memories)).await.expect("write");
        store.flush().await.expect("written");
        let mut folded = false;
        for _ in 0..100 {
            if size() > before + 8 * 1024 * 1024 {
                folded = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            folded,
            "the file grew from {before} to {} bytes: the tick is still only in the log",
            size()
        );
        store.close().await;
        for leftover in ["m.db-wal", "m.db-shm"] {
            assert!(
                !dir.path().join(leftover).exists(),
                "{leftover} left behind"
            );
        }
    }

    #[tokio::test]
    async fn identical_vectors_are_stored_once_and_go_with_their_last_memory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::create(&dir.path().join("m.db"), vec!["Bob".into(), "Ann".into()])
            .await
            .expect("store opens");
        let said = "Bob said: the mill burned";
        store
            .write_tick(tick_of(
                1,
                vec![mem(1, 0, said), mem(2, 1, said), mem(3, 1, "rain")],
            ))
            .await
            .expect("write");
        embed_all(&store).await;
        store
            .write_tick(tick_of(
                2,
                vec![mem(4, 0, said), mem(5, 0, "a new sentence")],
            ))
            .await
            .expect("write");
        embed_all(&store).await;
        assert_eq!(
            counts(&store).await,
            (3, 5),
            "three distinct vectors, five memories"
        );
        // Every memory reads its own vector back, shared or not.
        let expected = HashingEmbedder.embed_one(said);
        for id in [1, 2, 4] {
            let blob: Vec<u8> =
                sqlx::query_scalar("SELECT embedding FROM memories_with_embeddings WHERE id = ?")
                    .bind(id)
                    .fetch_one(&store.pool)
                    .await
                    .expect("row");
            assert_eq!(decode_vector(&blob), Some(expected.clone()), "memory {id}");
        }
        // A rewind to before tick 2 drops the vector only memory 5 had, and keeps the
        // shared one the earlier memories still name.
        store
            .rewind(Rewind {
                next_tick: 2,
                next_memory_id: 4,
                ..Rewind::default()
            })
            .await
            .expect("rewind");
        assert_eq!(counts(&store).await, (2, 3));
        // The same text written again shares the blob still there.
        store
            .write_tick(tick_of(2, vec![mem(4, 0, said)]))
            .await
            .expect("write");
        embed_all(&store).await;
        assert_eq!(counts(&store).await, (2, 4));
    }

    #[tokio::test]
    async fn vectors_mark_their_memories_and_no_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::create(&dir.path().join("m.db"), vec!["Bob".into()])
            .await
            .expect("store opens");
        let memories = (1..=60)
            .map(|id| mem(id, 0, &format!("fact {id}")))
            .collect();
        store.write_tick(tick_of(1, memories)).await.expect("write");
        store.flush().await.expect("written");
        let embedded = |ids: &[u64]| -> Vec<EmbeddedRow> {
            ids.iter()
                .flat_map(|&id| {
                    // Memory 14 comes in two chunks, the second first.
                    let chunks: &[u32] = if id == 14 { &[1, 0] } else { &[0] };
                    chunks.iter().map(move |&chunk| EmbeddedRow {
                        id: MemoryId(id),
                        chunk,
                        dims: VECTOR_DIMS,
                        vector: Embedding::of_fitted(
                            HashingEmbedder.embed_one(&format!("fact {id} {chunk}")),
                        ),
                    })
                })
                .collect()
        };
        let marked = || async {
            store.flush().await.expect("written");
            sqlx::query_scalar::<_, i64>(
                "SELECT id FROM memory_rows WHERE space IS NOT NULL ORDER BY id",
            )
            .fetch_all(&store.pool)
            .await
            .expect("marked")
        };
        // A few runs, out of order: a statement per run.
        let first = [9, 10, 11, 12, 1, 2, 3, 4, 5, 7, 14];
        store
            .save_embeddings((), embedded(&first), HASHING_MODEL)
            .await
            .expect("save");
        let mut expected: Vec<i64> = first.iter().map(|&id| id as i64).collect();
        expected.sort_unstable();
        assert_eq!(marked().await, expected);
        // More runs than are marked one by one (every other id): one statement over
        // the list.
        let second: Vec<u64> = (21..=59).step_by(2).collect();
        store
            .save_embeddings((), embedded(&second), HASHING_MODEL)
            .await
            .expect("save");
        expected.extend(second.iter().map(|&id| id as i64));
        assert_eq!(marked().await, expected);
        assert_eq!(
            store.stats().await.expect("stats").unembedded,
            60 - expected.len() as u64
        );
    }

    /// A new file at `path` migrated to `version` only: a store written by an older hearsay.
    async fn pool_at_version(path: &Path, version: usize) -> SqlitePool {
        let pool = SqliteStore::pool(path, true).await.expect("pool");
        migrations::migrator(&MIGRATIONS[..version])
            .run(&pool)
            .await
            .expect("an older version");
        pool
    }

    /// A store opened to be rewound (a resume's, a fork's copy) knows nothing of its file
    /// until the rewind loads it — one load, where opening loaded it and the rewind
    /// loaded it again — and refuses to write or claim before.
    #[tokio::test]
    async fn a_store_opened_to_rewind_is_loaded_by_the_rewind_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let pool = pool_at_version(&path, MIGRATIONS.len()).await;
        for id in 1..=3 {
            sqlx::query(
                "INSERT INTO memory_rows (id, npc, kind, content, importance, tick_created) \
                 VALUES (?, 0, 0, 'I decided to stay', 4, ?)",
            )
            .bind(id)
            .bind(id)
            .execute(&pool)
            .await
            .expect("memory");
        }
        pool.close().await;
        let store = SqliteStore::open_to_rewind(&path, vec!["Bob".into()])
            .await
            .expect("opens");
        let ids = [MemoryId(1), MemoryId(2), MemoryId(3)];
        assert!(store.memories(&ids).is_empty(), "loaded before the rewind");
        assert!(store.writable().is_err(), "writes before it is loaded");
        store
            .rewind(Rewind {
                next_memory_id: 3,
                next_tick: 3,
                last_recalled: BTreeMap::new(),
                recall_counts: BTreeMap::new(),
            })
            .await
            .expect("rewinds");
        let kept: Vec<u64> = store.memories(&ids).iter().map(|m| m.id.0).collect();
        assert_eq!(kept, [1, 2], "the rewind's load: memory 3 is undone");
        assert!(store.writable().is_ok(), "refuses to write once loaded");
        store.close().await;
    }

    #[tokio::test]
    async fn a_file_of_version_7_moves_its_vectors_into_shared_blobs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let pool = pool_at_version(&path, 7).await;
        let vectors = [
            HashingEmbedder.embed_one("a"),
            HashingEmbedder.embed_one("b"),
        ];
        for (id, v) in [(1, 0), (2, 1), (3, 0), (4, 0)] {
            sqlx::query(
                "INSERT INTO memories (id, npc, npc_name, kind, content, importance, tick_created, \
                 embedding_model, embedding_dims) VALUES (?, 0, 'Bob', 'observation', 'x', 4, 1, 'm', 1536)",
            )
            .bind(id)
            .execute(&pool)
            .await
            .expect("memory");
            sqlx::query("INSERT INTO memory_vectors (id, chunk, embedding) VALUES (?, 0, ?)")
                .bind(id)
                .bind(encode_vector(&vectors[v]))
                .execute(&pool)
                .await
                .expect("vector");
        }
        pool.close().await;
        let store = SqliteStore::open(&path, vec!["Bob".into()])
            .await
            .expect("opens and migrates");
        assert_eq!(counts(&store).await, (2, 4));
        let rows: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT id, embedding FROM memories_with_embeddings ORDER BY id")
                .fetch_all(&store.pool)
                .await
                .expect("rows");
        let read: Vec<(i64, Option<Vec<f32>>)> =
            rows.iter().map(|(id, b)| (*id, decode_vector(b))).collect();
        let want = |i: usize| Some(vectors[i].clone());
        assert_eq!(
            read,
            vec![(1, want(0)), (2, want(1)), (3, want(0)), (4, want(0))]
        );
    }

    #[tokio::test]
    async fn a_file_of_version_10_keeps_its_blobs_and_the_store_keeps_them_distinct() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let pool = pool_at_version(&path, 10).await;
        let (a, b) = ("Bob said: the mill burned", "rain");
        for (vid, text) in [(1, a), (2, b)] {
            sqlx::query("INSERT INTO vector_blobs (vid, embedding) VALUES (?, ?)")
                .bind(vid)
                .bind(encode_vector(&HashingEmbedder.embed_one(text)))
                .execute(&pool)
                .await
                .expect("blob");
        }
        sqlx::query("INSERT INTO vector_spaces (model, dims) VALUES ('hashing-v1', 1536)")
            .execute(&pool)
            .await
            .expect("space");
        for (id, text, vid) in [(1, a, 1), (2, a, 1), (3, b, 2)] {
            sqlx::query(
                "INSERT INTO memory_rows (id, npc, kind, content, importance, tick_created, space) \
                 VALUES (?, 0, 1, ?, 8, 1, 1)",
            )
            .bind(id)
            .bind(text)
            .execute(&pool)
            .await
            .expect("memory");
            sqlx::query("INSERT INTO memory_chunk_vectors (id, chunk, vid) VALUES (?, 0, ?)")
                .bind(id)
                .bind(vid)
                .execute(&pool)
                .await
                .expect("chunk");
        }
        pool.close().await;
        let store = SqliteStore::open(&path, vec!["Bob".into()])
            .await
            .expect("opens and migrates");
        let blobs: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT vid, embedding FROM vector_blobs ORDER BY vid")
                .fetch_all(&store.pool)
                .await
                .expect("blobs");
        assert_eq!(
            blobs,
            vec![
                (1, encode_vector(&HashingEmbedder.embed_one(a))),
                (2, encode_vector(&HashingEmbedder.embed_one(b)))
            ],
            "the blobs and their vids as they were"
        );
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'index' \
             AND tbl_name IN ('vector_blobs', 'memory_rows') ORDER BY name",
        )
        .fetch_all(&store.pool)
        .await
        .expect("indexes");
        assert_eq!(indexes, vec!["memories_by_forgetting".to_owned()]);
        // Without the index, the store itself names a vector the file holds, and writes
        // a new one once.
        store
            .write_tick(tick_of(
                2,
                vec![mem(4, 0, a), mem(5, 0, "snow"), mem(6, 0, "snow")],
            ))
            .await
            .expect("write");
        embed_all(&store).await;
        assert_eq!(counts(&store).await, (3, 6));
        let named: Vec<(i64, i64)> =
            sqlx::query_as("SELECT id, vid FROM memory_chunk_vectors ORDER BY id")
                .fetch_all(&store.pool)
                .await
                .expect("chunks");
        assert_eq!(named, vec![(1, 1), (2, 1), (3, 2), (4, 1), (5, 3), (6, 3)]);
    }

    #[tokio::test]
    async fn a_file_of_version_9_reads_the_same_through_the_view_of_version_10() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let pool = pool_at_version(&path, 9).await;
        // Every kind; embedded in two spaces and not at all; archived; heard; a
        // reflection with evidence; recalled; a vector kept of another model.
        for (id, npc, name, kind, space, forgotten, source, evidence) in [
            (1, 0, "Bob", "seed", Some(("m", 1536)), None, None, None),
            (
                2,
                1,
                "Alice",
                "observation",
                Some(("m", 1536)),
                Some(5),
                None,
                None,
            ),
            (
                3,
                1,
                "Alice",
                "conversation",
                Some(("m", 384)),
                None,
                Some(0),
                None,
            ),
            (4, 0, "Bob", "reflection", None, None, None, Some("[2,3]")),
        ] {
            sqlx::query(
                "INSERT INTO memories (id, npc, npc_name, kind, content, importance, tick_created, \
                 source_npc, core, forgotten_tick, embedding_model, embedding_dims, evidence) \
                 VALUES (?, ?, ?, ?, 'said: x', 4, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(npc)
            .bind(name)
            .bind(kind)
            .bind(id * 2)
            .bind(source)
            .bind(i64::from(id == 1))
            .bind(forgotten)
            .bind(space.map(|s| s.0))
            .bind(space.map(|s| s.1))
            .bind(evidence)
            .execute(&pool)
            .await
            .expect("memory");
        }
        let blob = encode_vector(&HashingEmbedder.embed_one("a"));
        for statement in [
            "INSERT INTO vector_blobs (vid, embedding) VALUES (1, ?1)",
            "INSERT INTO memory_chunk_vectors (id, chunk, vid) VALUES (1, 0, 1), (2, 0, 1), (2, 1, 1)",
            "INSERT INTO memory_recalls (id, tick_last_recalled, recall_count) VALUES (2, 7, 3)",
            "INSERT INTO memory_vectors_kept (id, model, dims, chunk, embedding) VALUES (4, 'old', 8, 0, ?1)",
        ] {
            sqlx::query(statement)
                .bind(blob.as_slice())
                .execute(&pool)
                .await
                .expect(statement);
        }
        let everything = "SELECT * FROM memories_with_embeddings ORDER BY id";
        let dump = |rows: Vec<sqlx::sqlite::SqliteRow>| -> Vec<Vec<String>> {
            rows.iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| {
                            let v: Option<Vec<u8>> = r.try_get_unchecked(i).ok();
                            format!("{}={v:?}", r.column(i).name())
                        })
                        .collect()
                })
                .collect()
        };
        let before = dump(
            sqlx::query(everything)
                .fetch_all(&pool)
                .await
                .expect("rows"),
        );
        let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_vectors_kept")
            .fetch_one(&pool)
            .await
            .expect("kept");
        pool.close().await;
        let store = SqliteStore::open_unloaded(&path, vec!["Bob".into(), "Alice".into()])
            .await
            .expect("opens and migrates");
        let after = dump(
            sqlx::query(everything)
                .fetch_all(&store.pool)
                .await
                .expect("rows"),
        );
        assert_eq!(before, after, "the view reads as the table did");
        assert_eq!(before.len(), 4);
        // The dump holds the values (a column that did not decode would read as None).
        let cell = |name: &str, v: &[u8]| format!("{name}={:?}", Some(v.to_vec()));
        for (row, name, v) in [
            (2, "kind", &b"conversation"[..]),
            (2, "npc_name", b"Alice"),
            (2, "embedding_dims", b"384"),
            (1, "tick_last_recalled", b"7"),
            (0, "embedding", &blob),
            (3, "evidence", b"[2,3]"),
        ] {
            assert!(
                after[row].contains(&cell(name, v)),
                "{name}: {:?}",
                after[row]
            );
        }
        let kept_after: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_vectors_kept")
            .fetch_one(&store.pool)
            .await
            .expect("kept");
        assert_eq!(kept, kept_after);
        let spaces: Vec<(String, i64)> =
            sqlx::query_as("SELECT model, dims FROM vector_spaces ORDER BY space")
                .fetch_all(&store.pool)
                .await
                .expect("spaces");
        assert_eq!(spaces, vec![("m".into(), 384), ("m".into(), 1536)]);
        // The keys of the rebuilt tables hold: a chunk of no memory is refused.
        let orphan =
            sqlx::query("INSERT INTO memory_chunk_vectors (id, chunk, vid) VALUES (99, 0, 1)")
                .execute(&store.pool)
                .await;
        assert!(orphan.is_err(), "foreign keys name memory_rows");
        let stats = store.stats().await.expect("stats");
        assert_eq!((stats.total, stats.unembedded, stats.archived), (4, 1, 1));
    }

    #[tokio::test]
    async fn memories_read_in_packed_batches_are_the_rows_read_one_by_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.db");
        let store = SqliteStore::create(&path, vec!["Bob".into(), "Alice".into()])
            .await
            .expect("store opens");
        // Texts JSON must escape, every kind, heard, core, evidence; some embedded, some
        // recalled, one archived.
        let texts = [
            "plain",
            "she said \"run\"",
            "back\\slash and / slash",
            "two\nlines\tand a tab",
            "caf\u{e9} \u{1F41F} \u{1}",
            "[1, 2] looks like JSON",
            "",
            "null",
        ];
        let mut memories: Vec<MemoryRecord> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut m = mem(i as u64 + 1, (i % 2) as u32, t);
                m.kind = [
                    MemoryKind::Observation,
                    MemoryKind::Conversation,
                    MemoryKind::Seed,
                ][i % 3];
                m.importance = (i % 10) as u8 + 1;
                m.tick = i as u64;
                m.source = (i % 3 == 1).then_some(NpcId(1));
                m.core = i == 2;
                m
            })
            .collect();
        let mut reflection = mem(9, 1, "a reflection");
        reflection.kind = MemoryKind::Reflection;
        reflection.evidence = vec![MemoryId(2), MemoryId(4)];
        memories.push(reflection);
        store.write_tick(tick_of(1, memories)).await.expect("write");
        // Memory 3 in three chunks, the others in one.
        let (pending, claim) = store.claim_embeddings(1000).await.expect("pending");
        let rows = pending
            .iter()
            .flat_map(|p| {
                let chunks = if p.id == MemoryId(3) { 3 } else { 1 };
                (0..chunks).map(move |chunk| EmbeddedRow {
                    id: p.id,
                    chunk,
                    dims: VECTOR_DIMS,
                    vector: Embedding::of_fitted(
                        HashingEmbedder.embed_one(&format!("{} {chunk}", p.content)),
                    ),
                })
            })
            .collect();
        store
            .save_embeddings(claim, rows, HASHING_MODEL)
            .await
            .expect("save");
        store
            .write_tick(tick_of(2, vec![mem(10, 0, "not embedded yet")]))
            .await
            .expect("write");
        for (tick, recalled, archived) in [(3, vec![1, 2], vec![]), (4, vec![2], vec![5])] {
            store
                .write_tick(TickWrite {
                    tick,
                    recalled: recalled.into_iter().map(MemoryId).collect(),
                    archived: archived.into_iter().map(MemoryId).collect(),
                    ..TickWrite::default()
                })
                .await
                .expect("write");
        }
        store.flush().await.expect("written");
        // Nested: tuples of more than twelve compare and print no more.
        type Row = (
            (i64, i64, String, String, i64, i64),
            (i64, Option<i64>, bool, Option<String>, i64, Option<i64>),
            (Option<String>, Option<i64>),
        );
        type Flat = (
            i64,
            i64,
            String,
            String,
            i64,
            i64,
            i64,
            Option<i64>,
            bool,
            Option<String>,
            i64,
            Option<i64>,
            Option<String>,
            Option<i64>,
        );
        let one_by_one: Vec<Flat> = sqlx::query_as(
            "SELECT m.id, m.npc, m.kind, m.content, m.importance, m.tick_created, \
             COALESCE(r.tick_last_recalled, m.tick_created), m.source_npc, m.core, m.evidence, \
             COALESCE(r.recall_count, 0), m.forgotten_tick, m.embedding_model, m.embedding_dims \
             FROM memories m LEFT JOIN memory_recalls r ON r.id = m.id ORDER BY m.id",
        )
        .fetch_all(&store.pool)
        .await
        .expect("rows");
        let one_by_one: Vec<Row> = one_by_one
            .into_iter()
            .map(|r| {
                (
                    (r.0, r.1, r.2, r.3, r.4, r.5),
                    (r.6, r.7, r.8, r.9, r.10, r.11),
                    (r.12, r.13),
                )
            })
            .collect();
        assert_eq!(one_by_one.len(), 10);
        assert_eq!(one_by_one[1].1.0, 4, "recalled last at tick 4");
        assert_eq!(one_by_one[4].1.5, Some(4), "archived");
        assert!(one_by_one[9].2.0.is_none() && one_by_one[0].2.0.is_some());
        let as_row = |m: &MemoryMeta, space: &Option<VectorSpace>| -> Row {
            let r = &m.memory;
            (
                (
                    r.id.0 as i64,
                    i64::from(r.npc.0),
                    r.kind.as_str().to_owned(),
                    r.content.to_string(),
                    i64::from(r.importance),
                    r.tick as i64,
                ),
                (
                    m.last_recalled as i64,
                    r.source.map(|s| i64::from(s.0)),
                    r.core,
                    evidence_json(r),
                    i64::from(m.recalls),
                    m.forgotten.map(|t| t as i64),
                ),
                (
                    space.as_ref().map(|s| s.model.clone()),
                    space.as_ref().and_then(|s| s.dims).map(|d| d as i64),
                ),
            )
        };
        for (npc, batch) in [(None, 1), (None, 3), (None, 4096), (Some(NpcId(1)), 2)] {
            let mut packed = Vec::new();
            packed::each_memory_in(&store.pool, npc, batch, |meta, space| {
                assert_eq!(meta.embedded, space.is_some());
                packed.push(as_row(&meta, &space));
                Ok::<(), StoreError>(())
            })
            .await
            .expect("packed");
            let wanted: Vec<Row> = one_by_one
                .iter()
                .filter(|r| npc.is_none_or(|n: NpcId| r.0.1 == i64::from(n.0)))
                .cloned()
                .collect();
            assert_eq!(packed, wanted, "npc {npc:?}, {batch} rows per batch");
        }
        let live: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT c.id, c.vid FROM memory_chunk_vectors c JOIN memory_rows m ON m.id = c.id \
             WHERE m.forgotten_tick IS NULL ORDER BY c.id, c.chunk",
        )
        .fetch_all(&store.pool)
        .await
        .expect("chunks");
        let ids: Vec<i64> = live.iter().map(|c| c.0).collect();
        assert_eq!(
            ids,
            vec![1, 2, 3, 3, 3, 4, 6, 7, 8, 9],
            "5 archived, 10 not embedded"
        );
        for batch in [1, 2, 4096] {
            let mut packed = Vec::new();
            packed::each_live_chunk_in(&store.pool, batch, |id, vid| {
                packed.push((id, vid));
                Ok(())
            })
            .await
            .expect("packed");
            assert_eq!(packed, live, "{batch} chunks per batch");
        }
        // Ids far apart (a file from elsewhere): read in as many statements as their
        // rows, and refused by the index's load before its rows are allocated.
        store.close().await;
        let pool = SqlitePool::connect_with(SqliteConnectOptions::new().filename(&path))
            .await
            .expect("the file");
        let far = 400_000_000i64;
        for statement in [
            "INSERT INTO memory_rows (id, npc, kind, content, importance, tick_created) \
             VALUES (?1, 0, 0, 'far away', 4, 5)",
            "INSERT INTO memory_chunk_vectors (id, chunk, vid) \
             SELECT ?1, 0, vid FROM memory_chunk_vectors LIMIT 1",
        ] {
            sqlx::query(statement)
                .bind(far)
                .execute(&pool)
                .await
                .expect(statement);
        }
        let mut ids = Vec::new();
        packed::each_live_chunk_in(&pool, 2, |id, _| {
            ids.push(id);
            Ok(())
        })
        .await
        .expect("packed");
        assert_eq!(ids.last(), Some(&far));
        let mut metas = 0;
        packed::each_memory_in(&pool, None, 2, |_, _| {
            metas += 1;
            Ok::<(), StoreError>(())
        })
        .await
        .expect("packed");
        assert_eq!(metas, 11);
        pool.close().await;
        let Err(refused) = SqliteStore::open(&path, vec!["Bob".into(), "Alice".into()]).await
        else {
            panic!("a file whose ids jump is refused");
        };
        let refused = refused.to_string();
        assert!(
            refused.contains("memory 400000000 comes after 10"),
            "{refused}"
        );
    }

    #[test]
    fn a_checkpoint_that_unpacks_past_the_bound_is_refused() {
        let packed = pack_checkpoint(&"x".repeat(10_000)).expect("pack");
        assert_eq!(
            unpack_at_most(5, packed.clone(), 10_000).expect("at the bound"),
            "x".repeat(10_000)
        );
        let e = unpack_at_most(5, packed, 9_999).expect_err("past it");
        assert!(e.to_string().contains("more than 9999 bytes"), "{e}");
        let e = unpack_at_most(5, vec![0xff, 0xfe], 100).expect_err("not text");
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }

    #[test]
    fn the_migration_list_matches_the_directory() {
        crate::migrations::assert_lists_directory(MIGRATIONS, "sqlite");
    }

    #[tokio::test]
    async fn write_embed_recall_and_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store =
            SqliteStore::create(&dir.path().join("m.db"), vec!["Bob".into(), "Alice".into()])
                .await
                .expect("store opens");
        store
            .write_tick(TickWrite {
                tick: 1,
                memories: vec![
                    mem(1, 0, "The market sells fresh fish"),
                    mem(2, 0, "The blacksmith forged a sword"),
                    mem(3, 1, "Fresh fish at the market"),
                ],
                ..Default::default()
            })
            .await
            .expect("write");
        assert_eq!(store.written_through(), 3);
        let stats = store.stats().await.expect("stats");
        assert_eq!((stats.total, stats.unembedded), (3, 3));

        let (pending, claim) = store.claim_embeddings(2).await.expect("pending");
        assert_eq!(
            pending.iter().map(|p| p.id.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        save_hashed(&store, &pending, claim).await;
        assert_eq!(store.stats().await.expect("stats").unembedded, 1);

        let query = HashingEmbedder.embed_one("fresh fish");
        let recalled = store
            .recall(NpcId(0), &query, 1, 5, &Scoring::COSINE)
            .await
            .expect("recall");
        assert_eq!(
            recalled.iter().map(|r| r.memory.id.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(recalled[0].score > recalled[1].score);
        assert!(
            store
                .recall(NpcId(1), &query, 1, 5, &Scoring::COSINE)
                .await
                .expect("recall")
                .is_empty(),
            "3 is not embedded yet"
        );

        store
            .write_tick(TickWrite {
                tick: 9,
                memories: vec![],
                recalled: vec![MemoryId(1)],
                ..Default::default()
            })
            .await
            .expect("touch");
        // Queued: in the file once flushed.
        store.flush().await.expect("written");
        let row = sqlx::query(
            "SELECT r.tick_last_recalled, embedding_dims, embedding_model, length(v.embedding) AS len \
             FROM memories JOIN memory_vectors v USING (id) JOIN memory_recalls r USING (id) WHERE id = 1",
        )
            .fetch_one(&store.pool)
            .await
            .expect("row");
        assert_eq!(row.get::<i64, _>("tick_last_recalled"), 9);
        assert_eq!(row.get::<i64, _>("embedding_dims"), VECTOR_DIMS as i64);
        assert_eq!(row.get::<String, _>("embedding_model"), "hashing-v1");
        // The hashing vector is sparse: a marker and (index, value) pairs, not 6 KiB.
        let len = row.get::<i64, _>("len");
        assert!(len < 4 * VECTOR_DIMS as i64 && (len - 4) % 6 == 0, "{len}");
        store.close().await;
    }

    #[test]
    fn vectors_round_trip_through_bytes() {
        let v = vec![1.5f32, -0.25, 0.0, f32::MIN_POSITIVE];
        assert_eq!(decode_vector(&encode_vector(&v)), Some(v));
        assert_eq!(decode_vector(&[1, 2, 3]), None);
        // Sparse vectors take 4 + 6 bytes per non-zero entry and come back exactly.
        let mut sparse = vec![0.0f32; VECTOR_DIMS];
        sparse[3] = 0.6;
        sparse[1535] = -0.8;
        let blob = encode_vector(&sparse);
        assert_eq!(blob.len(), 4 + 2 * 6);
        assert_eq!(decode_vector(&blob), Some(sparse));
        let dense = vec![0.01f32; VECTOR_DIMS];
        assert_eq!(encode_vector(&dense).len(), VECTOR_DIMS * 4);
        assert_eq!(decode_vector(&encode_vector(&dense)), Some(dense));
        assert_eq!(
            decode_vector(&[0xff, 0xff, 0xff, 0xff, 9, 9, 0, 0, 0, 0]),
            None,
            "index past 1536"
        );
    }
}
