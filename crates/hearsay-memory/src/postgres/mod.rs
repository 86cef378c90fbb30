//! The PostgreSQL + pgvector store, for big and shared runs: many runs per database,
//! one round trip per tick for writes — queued off the tick in the run's writer process
//! (`writer`), whose backfill claims from its ledger — `FOR UPDATE SKIP LOCKED` claims
//! for any number of `hearsay backfill` workers, exact per-NPC recall (with an HNSW iterative scan for NPCs whose
//! memories outgrow an exact scan), and retries through a server restart.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId};
use pgvector::{SparseVector, Vector};
use sqlx::migrate::Migrator;
pub use sqlx::postgres::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Postgres, Row, Transaction};

use crate::embed::{Embedding, VECTOR_DIMS, dot};
use crate::forget::Forgetting;
use crate::index::{
    Forgotten, MemoryMeta, Metadata, VectorIndex, group_chunks, shortlist_by_best_chunk,
};
use crate::ledger::Ledger;
use crate::migrations;
use crate::scoring::{Scoring, rank};
use writer::{Target, VectorBatch, Writer};

mod writer;
use crate::space::{SpaceSwitch, VectorSpace};
use crate::store::SpaceGuard;
use crate::store::{
    EmbeddedRow, MemoryStats, PendingEmbedding, RecalledMemory, Rewind, SavedChain, Store,
    StoreError, StoredMemory, TickWrite,
};

/// The PostgreSQL migrations, embedded in the binary (a test checks this list against
/// `migrations/postgres`).
const MIGRATIONS: &[migrations::Embedded] = &[
    (
        1,
        "memories",
        include_str!("../../../../migrations/postgres/0001_memories.sql"),
    ),
    (
        2,
        "checkpoints",
        include_str!("../../../../migrations/postgres/0002_checkpoints.sql"),
    ),
    (
        3,
        "forgetting_chunks_reflections",
        include_str!("../../../../migrations/postgres/0003_forgetting_chunks_reflections.sql"),
    ),
    (
        4,
        "vector_spaces",
        include_str!("../../../../migrations/postgres/0004_vector_spaces.sql"),
    ),
    (
        5,
        "hnsw_on_demand",
        include_str!("../../../../migrations/postgres/0005_hnsw_on_demand.sql"),
    ),
    (
        6,
        "checkpoint_deltas",
        include_str!("../../../../migrations/postgres/0006_checkpoint_deltas.sql"),
    ),
    (
        7,
        "sparse_recall",
        include_str!("../../../../migrations/postgres/0007_sparse_recall.sql"),
    ),
    (
        8,
        "sweeps",
        include_str!("../../../../migrations/postgres/0008_sweeps.sql"),
    ),
    (
        9,
        "no_npc_index",
        include_str!("../../../../migrations/postgres/0009_no_npc_index.sql"),
    ),
    (
        10,
        "runs_cascade_by_trigger",
        include_str!("../../../../migrations/postgres/0010_runs_cascade_by_trigger.sql"),
    ),
    (
        11,
        "recalls_by_tick",
        include_str!("../../../../migrations/postgres/0011_recalls_by_tick.sql"),
    ),
    (
        12,
        "recalls_by_npc",
        include_str!("../../../../migrations/postgres/0012_recalls_by_npc.sql"),
    ),
];

/// The migrator for `migrations/postgres`.
pub fn migrator() -> Migrator {
    migrations::migrator(MIGRATIONS)
}

/// How the PostgreSQL store connects and how long it rides out an outage.
#[derive(Clone, Debug)]
pub struct PgOptions {
    /// The most connections the store's pool opens at once (16 by default).
    pub max_connections: u32,
    /// NPCs with more embedded memories than this are recalled through the HNSW index
    /// (iterative scan) instead of an exact scan — where the database has that index
    /// (`memory_vectors_hnsw`, which no migration makes any more; see
    /// `migrations/postgres/0005_hnsw_on_demand.sql`).
    pub exact_scan_max: u64,
    /// `hnsw.ef_search` for those scans (200 by default): how many candidates the graph
    /// search keeps. Each one visited is a page read (a 1536-dim element fills most of
    /// one), so latency grows with it and recall@5 saturates; below it, a filtered scan
    /// runs out of budget more often and comes back short, which recall answers with the
    /// exact scan. `bench-pg` measures all three from 40 to 200 (docs/BENCHMARKS.md, P4).
    pub ef_search: u32,
    /// Extra rows fetched beyond the cosine shortlist. pgvector sums floats in another
    /// order than hearsay does, so near-ties at the edge of the shortlist can fall on
    /// either side; the shortlist is cut again in Rust, with the same arithmetic as every
    /// other store, from this wider window.
    pub tie_margin: usize,
    /// How long a write or recall keeps retrying a lost connection before giving up.
    pub outage_max: Duration,
    /// A vector with at most this many non-zero dimensions is kept sparse (migration
    /// 0007; 192 by default, at most 1.6 kB against the dense 6 kB): the hashing
    /// embedder's always are, a real embedder's never. 0 keeps every vector dense (the
    /// HNSW index, for NPCs past `exact_scan_max`, holds dense rows only).
    pub sparse_nonzero_max: usize,
    /// Recall from an in-memory copy of the run's live vectors while it holds at most this
    /// many bytes (2 GiB by default; a hashing vector takes a few hundred bytes, a dense
    /// one 6 KiB): the writer process is the only one that embeds its run's rows (its
    /// lock, `RunLock`), so the copy is the truth, and recall is the same exact search,
    /// with the same bits, as the SQLite store's — without a statement per NPC per tick.
    /// A run that grows past it lets the copy go and recalls in the database from then on
    /// (the same results); 0 always recalls in the database.
    pub memory_index_max_bytes: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            exact_scan_max: 20_000,
            ef_search: 200,
            tie_margin: 32,
            outage_max: Duration::from_secs(60),
            sparse_nonzero_max: 192,
            memory_index_max_bytes: 2 << 30,
        }
    }
}

/// The URL with every secret replaced, for messages: the password of its user part, and
/// the value of any query parameter that names a password, secret, token or key
/// (`?password=`, `sslpassword=`, …).
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let base = match base.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:[redacted]@{host}"),
                None => base.to_owned(),
            },
            None => base.to_owned(),
        },
        None => base.to_owned(),
    };
    let Some(query) = query else {
        return base;
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((name, _)) if secret_param(name) => format!("{name}=[redacted]"),
            _ => param.to_owned(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// Whether a connection parameter's value is a secret.
fn secret_param(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["pass", "secret", "token", "key"]
        .iter()
        .any(|s| name.contains(s))
}

/// Connects to `url` and brings the schema up to date, with errors that say what to do:
/// an unreachable server, a missing `vector` extension (and how to install it).
pub async fn connect(url: &str, options: &PgOptions) -> Result<PgPool, StoreError> {
    let shown = redact_url(url);
    let mut connect_options: PgConnectOptions = url.parse().map_err(|e| StoreError::Open {
        location: shown.clone(),
        source: e,
    })?;
    // Every session says which process it is (`pg_stat_activity.application_name`), so
    // whoever runs the server sees each hearsay process's connections — unless the URL
    // names an application itself.
    if connect_options.get_application_name().is_none() {
        connect_options =
            connect_options.application_name(&format!("hearsay[{}]", std::process::id()));
    }
    // One plain connection first: a refused or misaddressed server fails fast here,
    // instead of after the pool's acquire timeout.
    match <sqlx::PgConnection as sqlx::Connection>::connect_with(&connect_options).await {
        Ok(conn) => {
            let _ = sqlx::Connection::close(conn).await;
        }
        Err(e) => {
            return Err(StoreError::Unreachable {
                location: shown,
                source: e,
            });
        }
    }
    let ef_search = options.ef_search;
    let pool = PgPoolOptions::new()
        .max_connections(options.max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(move |conn, _| {
            Box::pin(async move {
                // Filtered HNSW scans keep going until they have enough rows (pgvector
                // 0.8); only the HNSW recall path uses the index at all.
                sqlx::query("SET hnsw.iterative_scan = strict_order")
                    .execute(&mut *conn)
                    .await?;
                // Plan every recall for its own run and NPC: after five executions a
                // generic plan would guess the selectivity of `run_id = $1` and can pick
                // a sequential scan over every run's vectors (measured: 1 s instead of 1 ms).
                sqlx::query("SET plan_cache_mode = force_custom_plan")
                    .execute(&mut *conn)
                    .await?;
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SET hnsw.ef_search = {ef_search}"
                )))
                .execute(&mut *conn)
                .await?;
                // No JIT: hearsay's statements are short, run every tick, and a plan
                // costed past `jit_above_cost` compiles itself at every execution — a
                // tick write once did (25.8 ms of JIT in a 37 ms write, auto_explain;
                // docs/BENCHMARKS.md, the twelfth round).
                sqlx::query("SET jit = off").execute(&mut *conn).await?;
                Ok(())
            })
        })
        .connect_with(connect_options.clone())
        .await;
    let pool = match pool {
        Ok(pool) => pool,
        Err(e) if is_missing_vector(&e) => return Err(missing_vector(&shown)),
        Err(e) => {
            return Err(StoreError::Unreachable {
                location: shown,
                source: e,
            });
        }
    };
    let available: Option<String> =
        sqlx::query("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
            .fetch_optional(&pool)
            .await?
            .map(|row| row.try_get("default_version"))
            .transpose()?;
    if available.is_none() {
        return Err(missing_vector(&shown));
    }
    // pgvector is not a trusted extension: only a superuser can create it. Try here, so
    // a plain role gets told exactly what to ask for.
    if let Err(e) = sqlx::query("CREATE EXTENSION IF NOT EXISTS vector")
        .execute(&pool)
        .await
    {
        if is_permission(&e) {
            return Err(StoreError::Setup(format!(
                "the vector extension is installed on {shown} but this role may not create it: \
                 run `CREATE EXTENSION vector;` once as a superuser in that database"
            )));
        }
        return Err(e.into());
    }
    migrator().run(&pool).await?;
    Ok(pool)
}

fn missing_vector(shown: &str) -> StoreError {
    StoreError::Setup(format!(
        "the PostgreSQL server at {shown} has no pgvector extension: install pgvector 0.8 or later \
         (Debian/Ubuntu: the postgresql-NN-pgvector package, or build it from source with \
         `make && make install`; scripts/pg.sh install does this for PostgreSQL 15), then rerun"
    ))
}

fn is_missing_vector(e: &sqlx::Error) -> bool {
    e.to_string().contains("hnsw.iterative_scan") || e.to_string().contains("\"vector\"")
}

fn is_permission(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("42501"))
}

/// Whether `e` is worth retrying: the connection broke or the server is restarting.
fn transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| {
            // 08: connection exception; 57P01-03: admin/crash shutdown, cannot connect now.
            c.starts_with("08") || c == "57P01" || c == "57P02" || c == "57P03"
        }),
        _ => false,
    }
}

/// Exact recall of one NPC: every vector of it through the (run, npc) index, by inner
/// product then id (see `PgStore::recall_sql`). Binds: run, npc, query, window rows,
/// excluded ids.
/// The exact path: `d` over the sparse vector where a row is kept sparse (migration
/// 0007), against the query's sparse form ($6), else over the dense one; each row is sent
/// back as it is kept.
const RECALL_EXACT: &str = "SELECT id, sparse, embedding
                 FROM (SELECT id, sparse, embedding, COALESCE(sparse <#> $6, embedding <#> $3) AS d
                       FROM memory_vectors
                       WHERE run_id = $1 AND npc = $2 AND NOT (id = ANY($5))) s
                 ORDER BY CASE WHEN abs(d) < 1e-5 THEN 0 ELSE d END, id
                 LIMIT $4";

/// A run's memories in a shared PostgreSQL database.
#[derive(Debug)]
pub struct PgStore {
    pool: PgPool,
    run_id: i64,
    options: PgOptions,
    npc_names: Arc<[String]>,
    /// Embedded live memories per NPC (this process's view), to choose the recall path.
    embedded_per_npc: Vec<AtomicU64>,
    /// NPCs with a memory of several chunks: their recall groups vectors by memory.
    chunked: Vec<AtomicBool>,
    /// Archived memories whose vectors may still be in `memory_vectors`, by NPC: recall
    /// leaves them out until [`Store::tidy_archive`] has moved them.
    unmoved: RwLock<BTreeMap<NpcId, BTreeSet<i64>>>,
    /// The run's metadata (text, importance, last recalled, …), kept in memory like the
    /// SQLite store does: recall then reads only `memory_vectors`, one index scan, and
    /// never depends on the planner's guess about a brand-new run's rows. A run has one
    /// writer process, so this is the truth; `attach` reloads it. With the committed
    /// high-water mark.
    ledger: Ledger<VectorIndex>,
    /// Whether recall searches the ledger's copy of the vectors
    /// ([`PgOptions::memory_index_max_bytes`]) rather than the database.
    in_memory: AtomicBool,
    /// The model (and width) whose vectors the run's vector tables hold.
    space: SpaceGuard,
    /// Whether the database has the HNSW index (`memory_vectors_hnsw`): no migration
    /// makes it any more, and without it every NPC is recalled exactly.
    hnsw: bool,
    /// Whether the run keeps vectors sparse (migration 0007). The HNSW index holds dense
    /// rows only, so then every NPC is recalled exactly (over small rows).
    sparse_rows: AtomicBool,
    /// The writer process's queue ([`PgStore::queue_writes`]): with it, writes are queued
    /// and the backfill claims from the ledger; without it (a `hearsay backfill` helper,
    /// a reader), each write is waited for and claims lock rows in the database.
    queue: OnceLock<Writer>,
    /// Memories claimed from the ledger by a backfill worker of this process and not yet
    /// saved or released.
    claimed: Arc<Mutex<BTreeSet<MemoryId>>>,
    /// HNSW-path recalls that came back short and were answered by the exact scan.
    hnsw_short: AtomicU64,
}

/// Whether `memory_vectors_hnsw` exists in the schema the pool works in.
async fn hnsw_present(pool: &PgPool) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "SELECT EXISTS (SELECT 1 FROM pg_indexes
                        WHERE schemaname = current_schema() AND indexname = 'memory_vectors_hnsw') AS present",
    )
    .fetch_one(pool)
    .await?
    .try_get("present")?)
}

/// The in-memory copy of run `run_id`: `metas` (as the database has them) and, if the
/// run's live vectors fit in `max_bytes`, those vectors, so recall can search them as the
/// SQLite store does. The estimate is taken first, from the rows' stored sizes: a run
/// too big is never half loaded; its memories keep the database's `embedded` and recall
/// stays in the database. With whether the vectors were loaded.
async fn load_index(
    pool: &PgPool,
    run_id: i64,
    metas: Vec<MemoryMeta>,
    max_bytes: usize,
) -> Result<(VectorIndex, bool), StoreError> {
    let mut index = VectorIndex::default();
    let estimate: Option<i64> = if max_bytes == 0 {
        None
    } else {
        sqlx::query_scalar(
            "SELECT COALESCE(sum(CASE WHEN v.sparse IS NULL THEN 6144 + 8
                                      ELSE pg_column_size(v.sparse) * 3 / 2 + 12 END), 0)::bigint
             FROM memory_vectors v WHERE v.run_id = $1",
        )
        .bind(run_id)
        .fetch_one(pool)
        .await?
    };
    let load = estimate.is_some_and(|b| (b as u64) <= max_bytes as u64);
    for mut meta in metas {
        // Live memories become embedded in the copy as their vectors load below.
        if load && meta.forgotten.is_none() {
            meta.embedded = false;
        }
        index.insert_meta(meta);
    }
    if !load {
        return Ok((index, false));
    }
    let rows = sqlx::query(
        "SELECT v.id, v.sparse, v.embedding FROM memory_vectors v
         JOIN memory_rows m ON m.run_id = v.run_id AND m.id = v.id
         WHERE v.run_id = $1 AND m.forgotten_tick IS NULL ORDER BY v.id, v.chunk",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    index.load_chunks(rows.iter().map(|r| {
        let id = MemoryId(r.try_get::<i64, _>("id")? as u64);
        let vector = match r.try_get::<Option<SparseVector>, _>("sparse")? {
            Some(sparse) => sparse.to_vec(),
            None => r.try_get::<Vector, _>("embedding")?.to_vec(),
        };
        Ok::<_, StoreError>((id, Embedding::of_fitted(vector)))
    }))?;
    Ok((index, true))
}

/// Who holds a run ([`RunLock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunHolder {
    /// The one process that runs its ticks (`run`, `resume`, `fork`): alone.
    Writer,
    /// A process that only embeds its rows (`hearsay backfill`): beside others like it,
    /// never beside the writer, whose in-memory view of the run must stay the truth.
    Helper,
}

/// A run held by this process: a session advisory lock on its id, on a connection of its
/// own (outside the store's pool), released when dropped or when the process dies — so a
/// crashed writer leaves a run that can be resumed at once, and no two processes ever
/// write one run.
#[derive(Debug)]
pub struct RunLock {
    _conn: sqlx::PgConnection,
}

impl RunLock {
    /// Takes `run_id` as `holder`; `None` when another process holds it in a way that
    /// excludes this one.
    pub async fn try_take(
        pool: &PgPool,
        run_id: i64,
        holder: RunHolder,
    ) -> Result<Option<RunLock>, StoreError> {
        let mut conn = pool.acquire().await?.detach();
        let sql = match holder {
            RunHolder::Writer => {
                "SELECT pg_try_advisory_lock(hashtextextended('hearsay run ' || $1::text, 0))"
            }
            RunHolder::Helper => {
                "SELECT pg_try_advisory_lock_shared(hashtextextended('hearsay run ' || $1::text, 0))"
            }
        };
        let taken: bool = sqlx::query_scalar(sql)
            .bind(run_id)
            .fetch_one(&mut conn)
            .await?;
        Ok(taken.then_some(RunLock { _conn: conn }))
    }
}

/// A run as the `runs` table records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRow {
    /// The scenario's `name` (not a file path).
    pub name: String,
    /// The run's root seed (stored as a signed `BIGINT`, read back bit for bit).
    pub seed: u64,
    /// The scenario file, verbatim.
    pub scenario: String,
    /// NPC names, by id.
    pub npc_names: Vec<String>,
}

/// The `runs` row of `run_id`, if there is one.
pub async fn run_row(pool: &PgPool, run_id: i64) -> Result<Option<RunRow>, StoreError> {
    let row = sqlx::query("SELECT name, seed, scenario, npc_names FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_optional(pool)
        .await?;
    row.map(|r| {
        Ok(RunRow {
            name: r.try_get("name")?,
            seed: r.try_get::<i64, _>("seed")? as u64,
            scenario: r.try_get("scenario")?,
            npc_names: r.try_get("npc_names")?,
        })
    })
    .transpose()
}

impl PgStore {
    /// Registers a new run and returns its store.
    pub async fn create_run(
        pool: PgPool,
        options: PgOptions,
        name: &str,
        seed: u64,
        scenario: &str,
        npc_names: Vec<String>,
    ) -> Result<Self, StoreError> {
        let run_id: i64 = sqlx::query("INSERT INTO runs (name, seed, scenario, npc_names) VALUES ($1, $2, $3, $4) RETURNING id")
            .bind(name)
            .bind(seed as i64)
            .bind(scenario)
            .bind(&npc_names)
            .fetch_one(&pool)
            .await?
            .try_get("id")?;
        let embedded_per_npc = npc_names.iter().map(|_| AtomicU64::new(0)).collect();
        let chunked = npc_names.iter().map(|_| AtomicBool::new(false)).collect();
        let hnsw = hnsw_present(&pool).await?;
        Ok(Self {
            pool,
            run_id,
            embedded_per_npc,
            chunked,
            npc_names: npc_names.into(),
            unmoved: RwLock::new(BTreeMap::new()),
            in_memory: AtomicBool::new(options.memory_index_max_bytes > 0),
            hnsw_short: AtomicU64::new(0),
            ledger: Ledger::default(),
            space: SpaceGuard::default(),
            hnsw,
            sparse_rows: AtomicBool::new(false),
            options,
            queue: OnceLock::new(),
            claimed: Arc::default(),
        })
    }

    /// Attaches to an existing run (to continue it, or to read it).
    pub async fn attach(
        pool: PgPool,
        options: PgOptions,
        run_id: i64,
        npc_names: Vec<String>,
    ) -> Result<Self, StoreError> {
        let embedded_per_npc: Vec<AtomicU64> =
            npc_names.iter().map(|_| AtomicU64::new(0)).collect();
        let chunked: Vec<AtomicBool> = npc_names.iter().map(|_| AtomicBool::new(false)).collect();
        let rows = sqlx::query(
            "SELECT npc, count(DISTINCT id) AS n, max(chunk) AS chunks
             FROM memory_vectors WHERE run_id = $1 GROUP BY npc",
        )
        .bind(run_id)
        .fetch_all(&pool)
        .await?;
        for row in rows {
            let npc: i32 = row.try_get("npc")?;
            let n: i64 = row.try_get("n")?;
            let chunks: i32 = row.try_get("chunks")?;
            if let Some(c) = embedded_per_npc.get(npc as usize) {
                c.store(n as u64, Ordering::Relaxed);
            }
            if let Some(c) = chunked.get(npc as usize) {
                c.store(chunks > 0, Ordering::Relaxed);
            }
        }
        let mut written = 0;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {META_COLUMNS} FROM memories WHERE run_id = $1 ORDER BY id"
        )))
        .bind(run_id)
        .fetch_all(&pool)
        .await?;
        let mut metas = Vec::with_capacity(rows.len());
        let mut dense = crate::meta::DenseIds::default();
        for r in &rows {
            let m = meta_from_row(r)?;
            dense.admit(m.memory.id)?;
            written = written.max(m.memory.id.0);
            metas.push(m);
        }
        drop(rows);
        let (meta, in_memory) =
            load_index(&pool, run_id, metas, options.memory_index_max_bytes).await?;
        // Archived memories whose vectors the worker has not moved yet.
        let mut unmoved: BTreeMap<NpcId, BTreeSet<i64>> = BTreeMap::new();
        let rows = sqlx::query(
            "SELECT DISTINCT v.npc, v.id FROM memory_vectors v
             JOIN memory_rows m ON m.run_id = v.run_id AND m.id = v.id
             WHERE v.run_id = $1 AND m.forgotten_tick IS NOT NULL",
        )
        .bind(run_id)
        .fetch_all(&pool)
        .await?;
        for r in &rows {
            unmoved
                .entry(NpcId(r.try_get::<i32, _>("npc")? as u32))
                .or_default()
                .insert(r.try_get("id")?);
        }
        let hnsw = hnsw_present(&pool).await?;
        let sparse_rows: bool = sqlx::query(
            "SELECT EXISTS (SELECT 1 FROM memory_vectors WHERE run_id = $1 AND sparse IS NOT NULL) AS any",
        )
        .bind(run_id)
        .fetch_one(&pool)
        .await?
        .try_get("any")?;
        Ok(Self {
            pool,
            run_id,
            options,
            npc_names: npc_names.into(),
            embedded_per_npc,
            chunked,
            unmoved: RwLock::new(unmoved),
            in_memory: AtomicBool::new(in_memory),
            hnsw_short: AtomicU64::new(0),
            ledger: Ledger::new(meta, written),
            space: SpaceGuard::default(),
            hnsw,
            sparse_rows: AtomicBool::new(sparse_rows),
            queue: OnceLock::new(),
            claimed: Arc::default(),
        })
    }

    /// The run's id in `runs`.
    pub fn run_id(&self) -> i64 {
        self.run_id
    }

    /// The pool (for tests and benchmarks).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether recall searches the in-memory copy of the vectors (see
    /// [`PgOptions::memory_index_max_bytes`]) rather than the database.
    pub fn recalls_in_memory(&self) -> bool {
        self.in_memory.load(Ordering::Relaxed)
    }

    /// How many HNSW-path recalls came back with fewer rows than asked for and were
    /// answered by the exact scan instead (since this store was opened).
    pub fn hnsw_short_recalls(&self) -> u64 {
        self.hnsw_short.load(Ordering::Relaxed)
    }

    /// The options it was opened with (a fork's new run takes the same).
    pub fn options(&self) -> &PgOptions {
        &self.options
    }

    /// Runs `op`, retrying a lost connection for up to `outage_max`.
    async fn retrying<T, F, Fut>(&self, what: &str, op: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
    {
        writer::retrying(self.options.outage_max, what, op).await
    }

    /// Makes this process the run's writer (call once it holds [`RunLock`] as
    /// [`RunHolder::Writer`], on the tokio runtime, before the backfill starts): from now
    /// on each tick's write and each batch of vectors is queued and written on a task of
    /// its own, in order (see `writer`), and the backfill claims from the ledger,
    /// which is the truth while no other process writes the run. Every read of the
    /// database first waits for the queue ([`Store::flush`]). A second call changes
    /// nothing.
    pub fn queue_writes(&self) {
        self.queue
            .get_or_init(|| Writer::spawn(writer::PgSink::new(self.target())));
    }

    /// Where this run's writes go.
    fn target(&self) -> Target {
        Target {
            pool: self.pool.clone(),
            run_id: self.run_id,
            outage_max: self.options.outage_max,
            npc_names: self.npc_names.clone(),
        }
    }

    /// Waits for the queued writes, if writes are queued.
    async fn drain(&self) -> Result<(), StoreError> {
        match self.queue.get() {
            Some(queue) => queue.flush().await,
            None => Ok(()),
        }
    }
}

/// The `memories` columns [`meta_from_row`] reads.
const META_COLUMNS: &str = "id, npc, kind, content, importance, tick_created, tick_last_recalled,
     source_npc, core, evidence, recall_count, forgotten_tick, embedding_model IS NOT NULL AS embedded";

/// A memory's metadata from a row with [`META_COLUMNS`].
fn meta_from_row(r: &sqlx::postgres::PgRow) -> Result<MemoryMeta, StoreError> {
    let kind: String = r.try_get("kind")?;
    let memory = MemoryRecord {
        id: MemoryId(r.try_get::<i64, _>("id")? as u64),
        npc: NpcId(r.try_get::<i32, _>("npc")? as u32),
        kind: MemoryKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown memory kind {kind:?}")))?,
        content: r.try_get("content")?,
        importance: r.try_get::<i16, _>("importance")? as u8,
        tick: r.try_get::<i64, _>("tick_created")? as u64,
        source: r
            .try_get::<Option<i32>, _>("source_npc")?
            .map(|s| NpcId(s as u32)),
        core: r.try_get("core")?,
        evidence: r
            .try_get::<Option<Vec<i64>>, _>("evidence")?
            .unwrap_or_default()
            .into_iter()
            .map(|e| MemoryId(e as u64))
            .collect(),
        place: Default::default(),
    };
    Ok(MemoryMeta {
        memory,
        last_recalled: r.try_get::<i64, _>("tick_last_recalled")? as u64,
        recalls: r.try_get::<i32, _>("recall_count")? as u32,
        forgotten: r
            .try_get::<Option<i64>, _>("forgotten_tick")?
            .map(|t| t as u64),
        embedded: r.try_get("embedded")?,
    })
}

/// Evidence ids as a PostgreSQL array literal, NULL when there is none.
fn evidence_literal(m: &MemoryRecord) -> Option<String> {
    (!m.evidence.is_empty()).then(|| {
        let ids: Vec<String> = m.evidence.iter().map(|e| e.0.to_string()).collect();
        format!("{{{}}}", ids.join(","))
    })
}

impl PgStore {
    /// A model other than `model` whose vectors recall would use, if any.
    async fn other_model(&self, model: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT embedding_model FROM memory_rows
             WHERE run_id = $1 AND embedding_model IS NOT NULL AND embedding_model <> $2 LIMIT 1",
        )
        .bind(self.run_id)
        .bind(model)
        .fetch_optional(&self.pool)
        .await?)
    }

    fn unmoved_write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<NpcId, BTreeSet<i64>>> {
        self.unmoved.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A recall's window (memory id, vector) ranked as on every store: the same dot
    /// product in Rust (equal bits, equal order), archived memories dropped before the
    /// cut, the shortlist by best chunk, then relevance + recency + importance.
    fn ranked(
        &self,
        query: &[f32],
        rows: Vec<(MemoryId, Vec<f32>)>,
        shortlist: usize,
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> Vec<RecalledMemory> {
        let mut window: Vec<(MemoryId, f32)> = rows
            .iter()
            .map(|(id, embedding)| (*id, dot(query, embedding)))
            .collect();
        let candidates = {
            let meta = self.ledger.read();
            window.retain(|(id, _)| meta.meta(*id).is_some_and(|m| m.forgotten.is_none()));
            shortlist_by_best_chunk(window, shortlist)
                .into_iter()
                .filter_map(|(similarity, id)| meta.meta_table().candidate(id, similarity))
                .collect()
        };
        rank(candidates, tick, k, scoring)
    }

    /// The statement recall runs for `npc`: exact over its vectors through the (run, npc)
    /// index while it has at most `exact_scan_max` embedded memories, the HNSW index with
    /// pgvector's iterative scan beyond. Binds: run, npc, query, window rows, excluded ids,
    /// and for the exact paths (`true` beside the statement) the query as a sparsevec.
    /// `exact` asks for the exact path whatever the NPC's size.
    fn recall_sql(&self, npc: NpcId, exact: bool) -> (&'static str, bool) {
        let embedded = self
            .embedded_per_npc
            .get(npc.index())
            .map_or(0, |c| c.load(Ordering::Relaxed));
        let chunked = self
            .chunked
            .get(npc.index())
            .is_some_and(|c| c.load(Ordering::Relaxed));
        // Exact: every vector of the NPC through the (run, npc) index, sorted by distance
        // then id (the second key keeps the planner off the HNSW index). For very large
        // NPCs: the HNSW index with pgvector 0.8's iterative scan. By inner product
        // (`<#>` is its negative), not `<=>`: every vector is unit length, so it is the
        // cosine, and without the per-row division by norms that pgvector's cosine does,
        // memories whose products with the query are the same get the same bits and tie
        // exactly, as in Rust (measured: `<=>` split a tie of ~40 memories and changed a
        // run at tick 66). Values within the similarity floor of zero tie too; ties go by
        // id. An NPC with chunked memories ranks each memory by its best chunk, then
        // fetches every chunk of the window's memories so Rust can take the same maximum
        // as every other store. Archived memories whose vectors are not yet moved out
        // are left out by id.
        let exact = exact
            || embedded <= self.options.exact_scan_max
            || !self.hnsw
            || self.sparse_rows.load(Ordering::Relaxed);
        match (exact, chunked) {
            (true, false) => (RECALL_EXACT, true),
            (true, true) => (
                "WITH best AS (
                    SELECT id, min(CASE WHEN abs(d) < 1e-5 THEN 0 ELSE d END) AS d
                    FROM (SELECT id, COALESCE(sparse <#> $6, embedding <#> $3) AS d
                          FROM memory_vectors
                          WHERE run_id = $1 AND npc = $2 AND NOT (id = ANY($5))) s
                    GROUP BY id ORDER BY d, id LIMIT $4
                 )
                 SELECT v.id, v.sparse, v.embedding
                 FROM best JOIN memory_vectors v ON v.run_id = $1 AND v.id = best.id",
                true,
            ),
            (false, false) => (
                "SELECT id, NULL::sparsevec AS sparse, embedding FROM memory_vectors
                 WHERE run_id = $1 AND npc = $2 AND NOT (id = ANY($5))
                 ORDER BY embedding <=> $3 LIMIT $4",
                false,
            ),
            (false, true) => (
                "SELECT id, NULL::sparsevec AS sparse, embedding FROM memory_vectors
                 WHERE run_id = $1 AND npc = $2 AND NOT (id = ANY($5))
                 ORDER BY embedding <=> $3 LIMIT $4 * 4",
                false,
            ),
        }
    }

    /// `EXPLAIN (ANALYZE, BUFFERS)` of the statement `recall` runs for `npc` with this
    /// query, with the same binds: the plan's lines, so a benchmark can show which index
    /// each recall path used and how many buffers it read.
    pub async fn explain_recall(
        &self,
        npc: NpcId,
        query: &[f32],
        k: usize,
        scoring: &Scoring,
    ) -> Result<Vec<String>, StoreError> {
        self.drain().await?;
        let n = (scoring.candidates.max(k) + self.options.tie_margin) as i64;
        let (sql, sparse) = self.recall_sql(npc, false);
        let sql = format!("EXPLAIN (ANALYZE, BUFFERS) {sql}");
        let mut statement = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.run_id)
            .bind(npc.0 as i32)
            .bind(Vector::from(query.to_vec()))
            .bind(n)
            .bind(self.unmoved_of(npc));
        if sparse {
            statement = statement.bind(SparseVector::from_dense(query));
        }
        let rows = statement.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).map_err(StoreError::from))
            .collect()
    }

    fn unmoved_of(&self, npc: NpcId) -> Vec<i64> {
        self.unmoved
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&npc)
            .map(|ids| ids.iter().copied().collect())
            .unwrap_or_default()
    }
}

/// How many memories a recall's rows name (a chunked memory has a row per chunk).
fn distinct_ids(rows: &[sqlx::postgres::PgRow]) -> Result<usize, StoreError> {
    let ids = rows
        .iter()
        .map(|r| r.try_get::<i64, _>("id"))
        .collect::<Result<BTreeSet<i64>, _>>()?;
    Ok(ids.len())
}

/// Undoes a run's writes after a checkpoint (see [`Rewind`]).
async fn rewind_run(pool: &PgPool, run_id: i64, rewind: &Rewind) -> Result<(), StoreError> {
    let first = i64_of(rewind.next_memory_id, "memory id")?;
    let tick = i64_of(rewind.next_tick, "tick")?;
    let mut ids = Vec::with_capacity(rewind.last_recalled.len());
    let mut ticks = Vec::with_capacity(rewind.last_recalled.len());
    let mut counts = Vec::with_capacity(rewind.last_recalled.len());
    for (id, t) in &rewind.last_recalled {
        ids.push(i64_of(id.0, "memory id")?);
        ticks.push(i64_of(*t, "tick")?);
        counts.push(rewind.recall_counts.get(id).copied().unwrap_or(0) as i32);
    }
    let mut tx = pool.begin().await?;
    sqlx::query("DELETE FROM memory_vectors WHERE run_id = $1 AND id >= $2")
        .bind(run_id)
        .bind(first)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM memory_rows WHERE run_id = $1 AND id >= $2")
        .bind(run_id)
        .bind(first)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM checkpoints WHERE run_id = $1 AND next_tick > $2")
        .bind(run_id)
        .bind(tick)
        .execute(&mut *tx)
        .await?;
    // Archived in the undone ticks: live again, vectors back in the recall table.
    sqlx::query(
        "WITH back AS (
            DELETE FROM memory_vectors_archive a USING memory_rows m
            WHERE a.run_id = $1 AND m.run_id = $1 AND m.id = a.id AND m.forgotten_tick >= $2
            RETURNING a.run_id, a.id, a.chunk, a.npc, a.embedding
         )
         INSERT INTO memory_vectors (run_id, id, chunk, npc, embedding)
         SELECT run_id, id, chunk, npc, embedding FROM back ON CONFLICT DO NOTHING",
    )
    .bind(run_id)
    .bind(tick)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE memory_rows SET forgotten_tick = NULL WHERE run_id = $1 AND forgotten_tick >= $2",
    )
    .bind(run_id)
    .bind(tick)
    .execute(&mut *tx)
    .await?;
    // Recalls from the undone ticks: their rows go (migrations 0011, 0012). A row written
    // before 0011 that was recalled in them goes back to the last recall before them and
    // the count before them (its ticks all precede any row of `memory_recalls`: a run
    // goes on from a checkpoint, rewound to it first).
    sqlx::query("DELETE FROM memory_recalls WHERE run_id = $1 AND tick >= $2")
        .bind(run_id)
        .bind(tick)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "UPDATE memory_rows SET tick_last_recalled_0010 =
             GREATEST(tick_created, COALESCE(($4::bigint[])[array_position($3::bigint[], id)], tick_created)),
             recall_count_0010 = COALESCE(($5::int[])[array_position($3::bigint[], id)], 0)
         WHERE run_id = $1 AND tick_last_recalled_0010 >= $2",
    )
    .bind(run_id)
    .bind(tick)
    .bind(&ids)
    .bind(&ticks)
    .bind(&counts)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// [`Store::use_space`] for run `run_id`, in one transaction (see [`crate::space`]).
async fn use_space_of(
    pool: &PgPool,
    run_id: i64,
    space: &VectorSpace,
) -> Result<SpaceSwitch, StoreError> {
    let model = space.model.as_str();
    let mut tx = pool.begin().await?;
    // The space's width: as given, else the one its vectors (in use, else kept) have.
    let dims: Option<i32> = match space.dims {
        Some(d) => {
            Some(i32::try_from(d).map_err(|_| StoreError::Corrupt(format!("{d} dimensions")))?)
        }
        None => {
            sqlx::query_scalar(
                "SELECT d FROM (SELECT embedding_dims AS d, 0 AS kept, count(*) AS n
                                FROM memory_rows WHERE run_id = $1 AND embedding_model = $2
                                GROUP BY embedding_dims
                                UNION ALL
                                SELECT dims, 1, count(DISTINCT id) FROM memory_vectors_kept
                                WHERE run_id = $1 AND model = $2 GROUP BY dims) AS widths
                 ORDER BY kept, n DESC, d LIMIT 1",
            )
            .bind(run_id)
            .bind(model)
            .fetch_optional(&mut *tx)
            .await?
        }
    };
    // Memories whose vectors are of another space: $2 model, $3 width.
    const OTHER: &str = "m.embedding_model IS NOT NULL
         AND NOT (m.embedding_model = $2 AND ($3::int IS NULL OR m.embedding_dims = $3))";
    let mut switch = SpaceSwitch::default();
    let retired = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT m.embedding_model AS model, count(*) AS n FROM memory_rows m
         WHERE m.run_id = $1 AND {OTHER} GROUP BY m.embedding_model"
    )))
    .bind(run_id)
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
        // Out of the recall tables (and the HNSW index), with their model.
        for (table, dense) in [
            ("memory_vectors", "COALESCE(v.embedding, v.sparse::vector)"),
            ("memory_vectors_archive", "v.embedding"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "WITH moved AS (
                    DELETE FROM {table} v USING memory_rows m
                    WHERE v.run_id = $1 AND m.run_id = $1 AND m.id = v.id AND {OTHER}
                    RETURNING v.id, m.embedding_model, m.embedding_dims, v.chunk, v.npc, {dense} AS embedding
                 )
                 INSERT INTO memory_vectors_kept (run_id, id, model, dims, chunk, npc, embedding)
                 SELECT $1, id, embedding_model, embedding_dims, chunk, npc, embedding FROM moved
                 ON CONFLICT DO NOTHING"
            )))
            .bind(run_id)
            .bind(model)
            .bind(dims)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE memory_rows m SET embedding_model = NULL, embedding_dims = NULL
             WHERE m.run_id = $1 AND {OTHER}"
        )))
        .bind(run_id)
        .bind(model)
        .bind(dims)
        .execute(&mut *tx)
        .await?;
    }
    if let Some(dims) = dims {
        // Kept vectors of this space come back (moved, not copied): live memories' to the
        // recall table, archived ones' to the archive.
        for (table, forgotten) in [
            ("memory_vectors", "IS NULL"),
            ("memory_vectors_archive", "IS NOT NULL"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {table} (run_id, id, chunk, npc, embedding)
                 SELECT $1, k.id, k.chunk, k.npc, k.embedding FROM memory_vectors_kept k
                 JOIN memory_rows m ON m.run_id = $1 AND m.id = k.id
                 WHERE k.run_id = $1 AND k.model = $2 AND k.dims = $3
                   AND m.embedding_model IS NULL AND m.forgotten_tick {forgotten}
                 ON CONFLICT DO NOTHING"
            )))
            .bind(run_id)
            .bind(model)
            .bind(dims)
            .execute(&mut *tx)
            .await?;
        }
        switch.restored = sqlx::query(
            "UPDATE memory_rows SET embedding_model = $2, embedding_dims = $3
             WHERE run_id = $1 AND embedding_model IS NULL AND id IN
                   (SELECT id FROM memory_vectors_kept WHERE run_id = $1 AND model = $2 AND dims = $3)",
        )
        .bind(run_id)
        .bind(model)
        .bind(dims)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query(
            "DELETE FROM memory_vectors_kept WHERE run_id = $1 AND model = $2 AND dims = $3
               AND id IN (SELECT id FROM memory_rows WHERE run_id = $1 AND embedding_model = $2
                                                   AND embedding_dims = $3)",
        )
        .bind(run_id)
        .bind(model)
        .bind(dims)
        .execute(&mut *tx)
        .await?;
    }
    let pending = sqlx::query(
        "SELECT count(*) AS n, coalesce(max(id), 0) AS through,
                count(*) FILTER (WHERE EXISTS (SELECT 1 FROM memory_vectors_kept k
                                               WHERE k.run_id = $1 AND k.id = m.id)) AS reembed
         FROM memory_rows m WHERE m.run_id = $1 AND m.embedding_model IS NULL",
    )
    .bind(run_id)
    .fetch_one(&mut *tx)
    .await?;
    switch.pending = pending.try_get::<i64, _>("n")? as u64;
    switch.pending_through = pending.try_get::<i64, _>("through")? as u64;
    switch.reembed = pending.try_get::<i64, _>("reembed")? as u64;
    tx.commit().await?;
    switch.space = Some(VectorSpace::new(model, dims.map(|d| d as usize)));
    Ok(switch)
}

impl PgStore {
    /// A new run that starts as a copy of run `source` up to a checkpoint: its memories
    /// below `rewind.next_memory_id`, their vectors, and its checkpoints up to
    /// `rewind.next_tick` (a fork).
    pub async fn fork(
        pool: PgPool,
        options: PgOptions,
        source: i64,
        new: (&str, u64, &str),
        npc_names: Vec<String>,
        rewind: &Rewind,
    ) -> Result<PgStore, StoreError> {
        let (name, seed, scenario) = new;
        let created = PgStore::create_run(
            pool.clone(),
            options.clone(),
            name,
            seed,
            scenario,
            npc_names.clone(),
        )
        .await?;
        let run_id = created.run_id();
        let first = i64_of(rewind.next_memory_id, "memory id")?;
        let tick = i64_of(rewind.next_tick, "tick")?;
        let mut tx = pool.begin().await?;
        sqlx::query(
            "INSERT INTO memory_rows (run_id, id, npc, npc_name, kind, content, importance, tick_created,
                                   tick_last_recalled_0010, source_npc, core, forgotten_tick, embedding_model,
                                   embedding_dims, recall_count_0010, evidence)
             SELECT $1, id, npc, npc_name, kind, content, importance, tick_created, tick_last_recalled_0010,
                    source_npc, core, forgotten_tick, embedding_model, embedding_dims, recall_count_0010, evidence
             FROM memory_rows WHERE run_id = $2 AND id < $3",
        )
        .bind(run_id)
        .bind(source)
        .bind(first)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO memory_recalls (run_id, npc, tick, ids)
             SELECT $1, npc, tick, ids FROM memory_recalls WHERE run_id = $2 AND tick < $3",
        )
        .bind(run_id)
        .bind(source)
        .bind(tick)
        .execute(&mut *tx)
        .await?;
        for (table, columns) in [
            ("memory_vectors", "id, chunk, npc, embedding, sparse"),
            ("memory_vectors_archive", "id, chunk, npc, embedding"),
            (
                "memory_vectors_kept",
                "id, model, dims, chunk, npc, embedding",
            ),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {table} (run_id, {columns})
                 SELECT $1, {columns} FROM {table} WHERE run_id = $2 AND id < $3"
            )))
            .bind(run_id)
            .bind(source)
            .bind(first)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "INSERT INTO checkpoints (run_id, next_tick, base, state)
             SELECT $1, next_tick, base, state FROM checkpoints WHERE run_id = $2 AND next_tick <= $3",
        )
        .bind(run_id)
        .bind(source)
        .bind(tick)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        rewind_run(&pool, run_id, rewind).await?;
        PgStore::attach(pool, options, run_id, npc_names).await
    }
}

impl PgStore {
    /// Rebuilds this process's view of the run (metadata, per-NPC counts, unmoved
    /// archives, the high-water mark) from the database, keeping the forgetting policy.
    async fn reload(&self) -> Result<(), StoreError> {
        let fresh = PgStore::attach(
            self.pool.clone(),
            self.options.clone(),
            self.run_id,
            self.npc_names.to_vec(),
        )
        .await?;
        let meta = std::mem::take(&mut *fresh.ledger.write());
        self.ledger.replace(meta, fresh.written_through());
        self.in_memory
            .store(fresh.in_memory.load(Ordering::Relaxed), Ordering::Relaxed);
        for (mine, theirs) in self.embedded_per_npc.iter().zip(&fresh.embedded_per_npc) {
            mine.store(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for (mine, theirs) in self.chunked.iter().zip(&fresh.chunked) {
            mine.store(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        *self.unmoved_write() = std::mem::take(&mut *fresh.unmoved_write());
        Ok(())
    }
}

fn i64_of(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} {v} does not fit in BIGINT")))
}

/// A claim: the open transaction holding the claimed rows' locks, or (in the run's
/// writer process) the ids held in the store's claimed set until saved or dropped.
pub struct PgClaim(ClaimHold);

enum ClaimHold {
    Locked(Option<Transaction<'static, Postgres>>),
    Held {
        ids: Vec<MemoryId>,
        claimed: Arc<Mutex<BTreeSet<MemoryId>>>,
    },
}

impl Drop for ClaimHold {
    fn drop(&mut self) {
        if let ClaimHold::Held { ids, claimed } = self {
            let mut claimed = claimed.lock().unwrap_or_else(|e| e.into_inner());
            for id in ids.iter() {
                claimed.remove(id);
            }
        }
    }
}

/// `v` as a `sparsevec`, taken from its non-zero entries where it keeps them (writing
/// 1,536 floats out to find its few dozen again was about a fifth of the writer's own
/// samples in `perf record` of rumour-200 on PostgreSQL).
fn sparse_of(v: &Embedding) -> SparseVector {
    match v {
        Embedding::Sparse { idx, val } => {
            let entries: Vec<(i32, f32)> = idx
                .iter()
                .map(|&i| i32::from(i))
                .zip(val.iter().copied())
                .collect();
            SparseVector::from_map(entries.iter().map(|(i, v)| (i, v)), VECTOR_DIMS as i32)
        }
        Embedding::Dense(_) => SparseVector::from_dense(&v.to_dense()),
    }
}

impl PgStore {
    /// `rows` as sent to the database: each row dense or sparse (migration 0007; only
    /// one of the two is sent, so a batch of hashing vectors travels as a tenth of the
    /// bytes). Each row's NPC is taken from its memory's row as the save marks it.
    fn batch(&self, rows: &[EmbeddedRow], model: &str) -> Result<VectorBatch, StoreError> {
        let mut b = VectorBatch {
            model: model.to_owned(),
            ..VectorBatch::default()
        };
        let mut dims_of: BTreeMap<i64, i32> = BTreeMap::new();
        for r in rows {
            let id = i64_of(r.id.0, "memory id")?;
            b.ids.push(id);
            b.chunks.push(r.chunk as i32);
            if r.vector.nonzeros() <= self.options.sparse_nonzero_max {
                b.dense.push(None);
                b.sparse.push(Some(sparse_of(&r.vector)));
            } else {
                b.dense.push(Some(Vector::from(r.vector.to_dense())));
                b.sparse.push(None);
            }
            dims_of.insert(id, r.dims as i32);
        }
        (b.memory_ids, b.dims) = dims_of.into_iter().unzip();
        Ok(b)
    }

    /// After `batch` (of `rows`) is saved or queued: counts what this process embedded per NPC, to
    /// choose the database's recall path, and keeps the vectors in the in-memory copy
    /// while it recalls from there.
    fn saved(&self, rows: &[EmbeddedRow], batch: &VectorBatch) {
        if batch.sparse.iter().any(Option::is_some) {
            self.sparse_rows.store(true, Ordering::Relaxed);
        }
        let mut index = self.ledger.write();
        let in_memory = self.in_memory.load(Ordering::Relaxed);
        for (id, chunks) in group_chunks(rows) {
            let Some(m) = index.meta(id) else { continue };
            let (npc, live, fresh) = (m.memory.npc, m.forgotten.is_none(), !m.embedded);
            if chunks.len() > 1
                && let Some(flag) = self.chunked.get(npc.index())
            {
                flag.store(true, Ordering::Relaxed);
            }
            if !fresh {
                continue;
            }
            if in_memory {
                index.add_vectors(id, &chunks);
            } else {
                index.table_mut().mark_embedded(id);
            }
            if live && let Some(count) = self.embedded_per_npc.get(npc.index()) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        if in_memory && index.vector_bytes() > self.options.memory_index_max_bytes {
            // Past its budget: the copy goes, and recall goes to the database (the same
            // results; the database has every vector).
            index.drop_vectors();
            self.in_memory.store(false, Ordering::Relaxed);
            tracing::info!(
                run = self.run_id,
                "the run's vectors passed memory_index_max_bytes: recall reads them in the database from now on"
            );
        }
    }
}

impl Store for PgStore {
    async fn close(&self) {
        if let Err(e) = self.drain().await {
            tracing::error!("closing the PostgreSQL store with writes unwritten: {e}");
        }
        self.pool.close().await;
    }

    async fn latest_checkpoint(
        &self,
        at_most: Option<u64>,
    ) -> Result<Option<SavedChain>, StoreError> {
        let limit = i64_of(at_most.unwrap_or(i64::MAX as u64), "tick")?;
        self.drain().await?;
        let rows = sqlx::query(
            "SELECT next_tick, base, state FROM checkpoints
             WHERE run_id = $1 AND next_tick <= $2 ORDER BY next_tick",
        )
        .bind(self.run_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        SavedChain::from_rows(&rows, |r| Ok(r.try_get("state")?))
    }

    async fn rewind(&self, rewind: Rewind) -> Result<(), StoreError> {
        self.drain().await?;
        rewind_run(&self.pool, self.run_id, &rewind).await?;
        self.reload().await
    }

    async fn use_space(&self, space: &VectorSpace) -> Result<SpaceSwitch, StoreError> {
        self.drain().await?;
        let switch = use_space_of(&self.pool, self.run_id, space).await?;
        if let Some(current) = &switch.space {
            self.space.set(current.clone());
        }
        if switch.changed() {
            self.reload().await?;
        }
        Ok(switch)
    }

    type Claim = PgClaim;

    /// Queued in the run's writer process ([`PgStore::queue_writes`]): the ledger has
    /// the tick at once, the database once the writer commits it. Else waited for.
    async fn write_tick(&self, write: TickWrite) -> Result<(), StoreError> {
        i64_of(write.tick, "tick")?;
        self.ledger.before_write(&write);
        // Each recalled memory's NPC, from the ledger (migration 0012 keys a tick's
        // touches by NPC); `None` only for a memory the ledger never held.
        let npcs: Vec<Option<i32>> = {
            let meta = self.ledger.read();
            write
                .recalled
                .iter()
                .map(|&id| meta.meta(id).map(|m| m.memory.npc.0 as i32))
                .collect()
        };
        let job = writer::TickJob { write, npcs };
        let Some(queue) = self.queue.get() else {
            writer::write_tick(&self.target(), &job).await?;
            self.ledger.committed(&job.write);
            return Ok(());
        };
        let (tick, recalled, last) = (
            job.write.tick,
            job.write.recalled.clone(),
            job.write.memories.last().map(|m| m.id),
        );
        queue.tick(job).await?;
        // Only now: the backfill claims no id above the written mark, so no vector is
        // queued before the row it belongs to.
        self.ledger.written(tick, &recalled, last);
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.drain().await
    }

    fn background_write_time(&self) -> Option<Duration> {
        self.queue.get().map(Writer::busy)
    }

    fn written_through(&self) -> u64 {
        self.ledger.written_through()
    }

    /// In the run's writer process, from the ledger (its queued rows included, up to
    /// the written mark), skipping what another worker of the process holds; else rows
    /// locked `FOR UPDATE SKIP LOCKED` in the database.
    async fn claim_embeddings(
        &self,
        limit: usize,
    ) -> Result<(Vec<PendingEmbedding>, PgClaim), StoreError> {
        if let Some(queue) = self.queue.get() {
            queue.failed()?;
            let mut claimed = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
            let rows = self.ledger.pending(limit, &claimed);
            let ids: Vec<MemoryId> = rows.iter().map(|r| r.id).collect();
            claimed.extend(ids.iter().copied());
            let hold = ClaimHold::Held {
                ids,
                claimed: self.claimed.clone(),
            };
            return Ok((rows, PgClaim(hold)));
        }
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(
            "SELECT id, content FROM memory_rows WHERE run_id = $1 AND embedding_model IS NULL
             ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED",
        )
        .bind(self.run_id)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?;
        let rows = rows
            .iter()
            .map(|r| {
                Ok(PendingEmbedding {
                    id: MemoryId(r.try_get::<i64, _>("id")? as u64),
                    content: r.try_get::<String, _>("content")?.into(),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok((rows, PgClaim(ClaimHold::Locked(Some(tx)))))
    }

    async fn save_embeddings(
        &self,
        mut claim: PgClaim,
        rows: Vec<EmbeddedRow>,
        model: &str,
    ) -> Result<(), StoreError> {
        if rows.iter().any(|r| !r.vector.fits()) {
            return Err(StoreError::Corrupt(format!(
                "a vector is not {VECTOR_DIMS} wide"
            )));
        }
        self.space
            .check_save(model, &rows, self.other_model(model))
            .await?;
        match &mut claim.0 {
            ClaimHold::Locked(tx) => {
                let Some(mut tx) = tx.take() else {
                    return Err(StoreError::Corrupt("a claim was saved twice".into()));
                };
                let batch = self.batch(&rows, model)?;
                if !rows.is_empty() {
                    writer::save_batch(&mut tx, self.run_id, &batch).await?;
                }
                tx.commit().await?;
                self.saved(&rows, &batch);
            }
            ClaimHold::Held { .. } => {
                let Some(queue) = self.queue.get() else {
                    return Err(StoreError::Corrupt(
                        "a claim of the writer's queue without the queue".into(),
                    ));
                };
                queue.failed()?;
                let rows = self.ledger.still_waiting(rows);
                if rows.is_empty() {
                    return Ok(());
                }
                let batch = self.batch(&rows, model)?;
                // Recallable now; in the database once the writer gets to it (after the
                // rows, which were queued before these ids could be claimed).
                self.saved(&rows, &batch);
                queue.vectors(batch).await?;
            }
        }
        Ok(())
    }

    async fn lowest_unembedded(&self) -> Result<Option<u64>, StoreError> {
        if let Some(queue) = self.queue.get() {
            queue.failed()?;
            return Ok(self.ledger.lowest_unembedded());
        }
        let lowest: Option<i64> = sqlx::query(
            "SELECT min(id) AS id FROM memory_rows WHERE run_id = $1 AND embedding_model IS NULL",
        )
        .bind(self.run_id)
        .fetch_one(&self.pool)
        .await?
        .try_get("id")?;
        Ok(lowest.map(|id| id as u64))
    }

    async fn recall(
        &self,
        npc: NpcId,
        query: &[f32],
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> Result<Vec<RecalledMemory>, StoreError> {
        if k == 0 || query.len() != VECTOR_DIMS {
            return Ok(Vec::new());
        }
        if self.in_memory.load(Ordering::Relaxed) {
            return Ok(self.ledger.read().search(npc, query, tick, k, scoring));
        }
        // The database has what the ledger has once the queue is written.
        self.drain().await?;
        let shortlist = scoring.candidates.max(k);
        let n = (shortlist + self.options.tie_margin) as i64;
        let q = Vector::from(query.to_vec());
        let excluded = self.unmoved_of(npc);
        let window = |exact: bool| {
            let (sql, sparse) = self.recall_sql(npc, exact);
            let q_sparse = sparse.then(|| SparseVector::from_dense(query));
            let (q, excluded) = (&q, &excluded);
            async move {
                let rows = self
                    .retrying("recall", || {
                        let statement = sqlx::query(sql)
                            .bind(self.run_id)
                            .bind(npc.0 as i32)
                            .bind(q)
                            .bind(n)
                            .bind(excluded);
                        match &q_sparse {
                            Some(q_sparse) => statement.bind(q_sparse),
                            None => statement,
                        }
                        .fetch_all(&self.pool)
                    })
                    .await?;
                Ok::<_, StoreError>((rows, sparse))
            }
        };
        let (mut rows, exact) = window(false).await?;
        if !exact && distinct_ids(&rows)? < n as usize {
            // pgvector's iterative HNSW scan stops at `hnsw.max_scan_tuples` or its
            // memory budget, and a filtered scan (this NPC's rows among every NPC's) can
            // stop there with fewer memories than asked for (measured: P4's NPCs of
            // 25,000 memories at `ef_search` 100). The NPC has more than `exact_scan_max`
            // memories, so it has enough: a short answer is the index's, and the exact
            // scan gives the whole one. (A chunked NPC's rows are chunks: counted by
            // memory, as the exact path's window is.)
            self.hnsw_short.fetch_add(1, Ordering::Relaxed);
            rows = window(true).await?.0;
        }
        // A row comes back sparse or dense, as it is kept: either way the same values, so
        // Rust's product below has the same bits as every other store's.
        let window = rows
            .iter()
            .map(|r| {
                let id = MemoryId(r.try_get::<i64, _>("id")? as u64);
                let vector = match r.try_get::<Option<SparseVector>, _>("sparse")? {
                    Some(sparse) => sparse.to_vec(),
                    None => r.try_get::<Vector, _>("embedding")?.to_vec(),
                };
                Ok((id, vector))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(self.ranked(query, window, shortlist, tick, k, scoring))
    }

    fn memories(&self, ids: &[MemoryId]) -> Vec<MemoryRecord> {
        self.ledger.memories(ids)
    }

    fn set_forgetting(&self, policy: Forgetting) {
        self.ledger.set_forgetting(policy);
    }

    fn forget_due(&self, tick: u64) -> Vec<Forgotten> {
        let due = self.ledger.write().forget_due(tick);
        if !due.is_empty() {
            let meta = self.ledger.read();
            let mut unmoved = self.unmoved_write();
            for f in &due {
                unmoved.entry(f.npc).or_default().insert(f.id.0 as i64);
                if meta.meta(f.id).is_some_and(|m| m.embedded)
                    && let Some(count) = self.embedded_per_npc.get(f.npc.index())
                {
                    let _ = count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                        Some(c.saturating_sub(1))
                    });
                }
            }
        }
        due
    }

    async fn tidy_archive(&self) -> Result<usize, StoreError> {
        let pending: Vec<i64> = {
            let unmoved = self.unmoved.read().unwrap_or_else(|e| e.into_inner());
            unmoved.values().flatten().copied().take(4096).collect()
        };
        if pending.is_empty() {
            return Ok(0);
        }
        self.drain().await?;
        let mut tx = self.pool.begin().await?;
        // Lock the rows first (waiting for any backfill claim on them to commit), then
        // move in a second statement, whose snapshot sees whatever that claim saved. Only
        // memories whose archiving has committed move; the rest wait for the next round.
        let gone: Vec<i64> = sqlx::query(
            "SELECT id FROM memory_rows WHERE run_id = $1 AND id = ANY($2) AND forgotten_tick IS NOT NULL
             ORDER BY id FOR UPDATE",
        )
        .bind(self.run_id)
        .bind(&pending)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<Result<_, _>>()?;
        if gone.is_empty() {
            tx.rollback().await?;
            return Ok(0);
        }
        sqlx::query(
            "WITH moved AS (
                DELETE FROM memory_vectors WHERE run_id = $1 AND id = ANY($2)
                RETURNING run_id, id, chunk, npc, COALESCE(embedding, sparse::vector) AS embedding
             )
             INSERT INTO memory_vectors_archive (run_id, id, chunk, npc, embedding)
             SELECT run_id, id, chunk, npc, embedding FROM moved ON CONFLICT DO NOTHING",
        )
        .bind(self.run_id)
        .bind(&gone)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let gone: BTreeSet<i64> = gone.into_iter().collect();
        let mut unmoved = self.unmoved_write();
        for ids in unmoved.values_mut() {
            ids.retain(|id| !gone.contains(id));
        }
        unmoved.retain(|_, ids| !ids.is_empty());
        Ok(gone.len())
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
        use futures_util::TryStreamExt;
        self.drain().await?;
        // One statement, its rows taken as the server sends them: the recall touches'
        // aggregate is made once (a page at a time by `id > …`, the view's aggregate
        // would be made again for every page).
        let sql = format!("SELECT {META_COLUMNS} FROM memories WHERE run_id = $1 ORDER BY id");
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(self.run_id)
            .fetch(&self.pool);
        while let Some(row) = rows.try_next().await.map_err(StoreError::from)? {
            each(meta_from_row(&row)?)?;
        }
        Ok(())
    }

    async fn vectors_of(
        &self,
        ids: &[MemoryId],
    ) -> Result<BTreeMap<MemoryId, Vec<Vec<f32>>>, StoreError> {
        self.drain().await?;
        let ids: Vec<i64> = ids.iter().map(|id| id.0 as i64).collect();
        let rows = sqlx::query(
            "SELECT id, chunk, COALESCE(embedding, sparse::vector) AS embedding
             FROM memory_vectors WHERE run_id = $1 AND id = ANY($2)
             UNION ALL
             SELECT id, chunk, embedding FROM memory_vectors_archive
             WHERE run_id = $1 AND id = ANY($2)
             ORDER BY id, chunk",
        )
        .bind(self.run_id)
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        let mut out: BTreeMap<MemoryId, Vec<Vec<f32>>> = BTreeMap::new();
        for r in &rows {
            let id = MemoryId(r.try_get::<i64, _>("id")? as u64);
            let embedding: Vector = r.try_get("embedding")?;
            out.entry(id).or_default().push(embedding.to_vec());
        }
        Ok(out)
    }

    async fn memories_of(&self, npc: Option<NpcId>) -> Result<Vec<StoredMemory>, StoreError> {
        self.drain().await?;
        // One NPC as a plain equality, never `($2 IS NULL OR npc = $2)`: through the view
        // `memories` the equality reaches the recall touches' key (migration 0012), while
        // the OR is folded away only in a plan made for the value, not in a generic one,
        // which would add up every touch of the run for one NPC.
        let of_npc = if npc.is_some() { "AND npc = $2" } else { "" };
        let npc = npc.map(|n| n.0 as i32);
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {META_COLUMNS}, embedding_model AS model, embedding_dims AS dims
             FROM memories WHERE run_id = $1 {of_npc} ORDER BY id"
        )))
        .bind(self.run_id)
        .bind(npc)
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<StoredMemory> = rows
            .iter()
            .map(|r| {
                let model: Option<String> = r.try_get("model")?;
                let dims: Option<i32> = r.try_get("dims")?;
                Ok(StoredMemory {
                    meta: meta_from_row(r)?,
                    vectors: Vec::new(),
                    space: model.map(|m| VectorSpace::new(m, dims.map(|d| d as usize))),
                })
            })
            .collect::<Result<_, StoreError>>()?;
        let vectors = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id, chunk, COALESCE(embedding, sparse::vector) AS embedding FROM memory_vectors
             WHERE run_id = $1 {of_npc}
             UNION ALL
             SELECT id, chunk, embedding FROM memory_vectors_archive
             WHERE run_id = $1 {of_npc}
             ORDER BY id, chunk"
        )))
        .bind(self.run_id)
        .bind(npc)
        .fetch_all(&self.pool)
        .await?;
        let mut at = 0;
        for r in &vectors {
            let id = MemoryId(r.try_get::<i64, _>("id")? as u64);
            let embedding: Vector = r.try_get("embedding")?;
            while at < out.len() && out[at].meta.memory.id < id {
                at += 1;
            }
            if let Some(m) = out.get_mut(at).filter(|m| m.meta.memory.id == id) {
                m.vectors.push(embedding.to_vec());
            }
        }
        Ok(out)
    }

    async fn stats(&self) -> Result<MemoryStats, StoreError> {
        self.drain().await?;
        let mut stats = MemoryStats::default();
        let rows = sqlx::query("SELECT kind, count(*) AS n FROM memory_rows WHERE run_id = $1 GROUP BY kind ORDER BY kind")
            .bind(self.run_id)
            .fetch_all(&self.pool)
            .await?;
        for row in rows {
            let kind: String = row.try_get("kind")?;
            let n: i64 = row.try_get("n")?;
            stats.total += n as u64;
            stats.by_kind.insert(kind, n as u64);
        }
        let unembedded: i64 = sqlx::query(
            "SELECT count(*) AS n FROM memory_rows WHERE run_id = $1 AND embedding_model IS NULL",
        )
        .bind(self.run_id)
        .fetch_one(&self.pool)
        .await?
        .try_get("n")?;
        stats.unembedded = unembedded as u64;
        let archived: i64 = sqlx::query(
            "SELECT count(*) AS n FROM memory_rows WHERE run_id = $1 AND forgotten_tick IS NOT NULL",
        )
        .bind(self.run_id)
        .fetch_one(&self.pool)
        .await?
        .try_get("n")?;
        stats.archived = archived as u64;
        let in_use: Vec<(String, i64)> = sqlx::query_as(
            "SELECT embedding_model AS model, count(*) AS n FROM memory_rows
             WHERE run_id = $1 AND embedding_model IS NOT NULL GROUP BY embedding_model",
        )
        .bind(self.run_id)
        .fetch_all(&self.pool)
        .await?;
        let kept: Vec<(String, i64)> = sqlx::query_as(
            "SELECT model, count(DISTINCT id) AS n FROM memory_vectors_kept
             WHERE run_id = $1 GROUP BY model",
        )
        .bind(self.run_id)
        .fetch_all(&self.pool)
        .await?;
        stats.count_models(in_use, kept);
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_vector_is_sent_as_its_dense_form_would_be() {
        let hashing = crate::hashing::HashingEmbedder;
        let mut dense = vec![0.0f32; VECTOR_DIMS];
        dense[3] = 0.5;
        dense[1500] = -0.25;
        for v in [
            hashing.embed_fitted_one("The market nearby is selling fresh fish."),
            hashing.embed_fitted_one(""),
            Embedding::Dense(dense),
        ] {
            assert_eq!(sparse_of(&v), SparseVector::from_dense(&v.to_dense()));
        }
        assert!(
            matches!(
                hashing.embed_fitted_one("fresh fish"),
                Embedding::Sparse { .. }
            ),
            "the hashing embedder's vectors take the sparse path"
        );
    }

    #[test]
    fn the_migration_list_matches_the_directory() {
        crate::migrations::assert_lists_directory(MIGRATIONS, "postgres");
    }

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact_url("postgres://bob:s3cret@db:5432/x"),
            "postgres://bob:[redacted]@db:5432/x"
        );
        assert_eq!(redact_url("postgres://bob@db/x"), "postgres://bob@db/x");
        assert_eq!(
            redact_url("postgres://bob@db/x?password=s3cret&sslmode=require"),
            "postgres://bob@db/x?password=[redacted]&sslmode=require"
        );
        assert_eq!(
            redact_url("postgresql:///x?host=/run&sslpassword=k&PassWord=p"),
            "postgresql:///x?host=/run&sslpassword=[redacted]&PassWord=[redacted]"
        );
        assert_eq!(
            redact_url("postgres://bob:p@ss@db/x"),
            "postgres://bob:[redacted]@db/x"
        );
        assert_eq!(redact_url("not a url"), "not a url");
    }
}
