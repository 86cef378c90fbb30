//! Sweeps recorded in PostgreSQL (migration 0008): a shard of a sweep says it started
//! and, when it is done, leaves its report, so shards run by separate processes on
//! separate machines can be collected from the database alone.
//!
//! This module only keeps the records; what a report holds and how shards are merged is
//! the runtime's (`hearsay_runtime::sweep`). It never deletes anything but a shard's own
//! earlier record, and only when asked to run that shard again.

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres, Row};

use crate::StoreError;

/// What makes two shards parts of one sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepIdentity {
    /// The scenario's `name`.
    pub scenario: String,
    /// The digest of the edited scenario the runs ran.
    pub digest: String,
    /// Every seed of the sweep, in order.
    pub seeds: Vec<u64>,
    /// How many shards the seeds are split into.
    pub shards: u32,
}

/// What happened when a shard asked to start.
#[derive(Debug)]
pub enum ShardStart {
    /// It may run: the record says so, and the lock is held until [`ShardHold::finish`].
    Started(ShardHold),
    /// The name belongs to another sweep.
    Foreign(SweepIdentity),
    /// This shard already finished (at this time); run it again only if asked to.
    Finished(String),
    /// Another process is running this shard now.
    Busy {
        /// Where it started.
        host: String,
        /// When.
        started_at: String,
    },
}

/// A shard being run: its connection holds the session advisory lock of (sweep, shard).
#[derive(Debug)]
pub struct ShardHold {
    /// `None` only once finished or dropped.
    conn: Option<PoolConnection<Postgres>>,
    name: String,
    shard: u32,
}

/// One shard's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardRecord {
    /// 1-based.
    pub shard: u32,
    /// Where it ran (the host name it gave).
    pub host: String,
    /// When it started, as the server prints a timestamp.
    pub started_at: String,
    /// Its report, once it finished.
    pub report: Option<String>,
    /// Its wall-clock figures, once it finished.
    pub timing: Option<String>,
}

fn seeds_to_db(seeds: &[u64]) -> Result<Vec<i64>, StoreError> {
    seeds
        .iter()
        .map(|&s| {
            i64::try_from(s).map_err(|_| {
                StoreError::Corrupt(format!("seed {s} does not fit PostgreSQL's BIGINT"))
            })
        })
        .collect()
}

/// Starts shard `shard` of sweep `name` (`identity`) from `host`: records the sweep if it
/// is new, refuses a name of another sweep, a shard that finished before (unless
/// `again`) and one another process is running now (its advisory lock is held).
pub async fn start_shard(
    pool: &PgPool,
    name: &str,
    identity: &SweepIdentity,
    shard: u32,
    host: &str,
    again: bool,
) -> Result<ShardStart, StoreError> {
    let seeds = seeds_to_db(&identity.seeds)?;
    let mut conn = pool.acquire().await?;
    sqlx::query(
        "INSERT INTO sweeps (name, scenario, digest, seeds, shards) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (name) DO NOTHING",
    )
    .bind(name)
    .bind(&identity.scenario)
    .bind(&identity.digest)
    .bind(&seeds)
    .bind(identity.shards as i32)
    .execute(&mut *conn)
    .await?;
    let theirs = identity_of(&mut conn, name)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("sweep {name:?} vanished as it was made")))?;
    if theirs != *identity {
        return Ok(ShardStart::Foreign(theirs));
    }
    let locked: bool = sqlx::query_scalar(
        "SELECT pg_try_advisory_lock(hashtextextended('hearsay sweep ' || $1 || ' shard ' || $2, 0))",
    )
    .bind(name)
    .bind(shard as i32)
    .fetch_one(&mut *conn)
    .await?;
    let existing = sqlx::query(
        "SELECT host, started_at::text AS started_at, finished_at::text AS finished_at
         FROM sweep_shards WHERE sweep = $1 AND shard = $2",
    )
    .bind(name)
    .bind(shard as i32)
    .fetch_optional(&mut *conn)
    .await?;
    if !locked {
        let (host, started_at) = match &existing {
            Some(row) => (row.try_get("host")?, row.try_get("started_at")?),
            None => (String::from("?"), String::from("?")),
        };
        return Ok(ShardStart::Busy { host, started_at });
    }
    let unlock = |conn: PoolConnection<Postgres>| async move {
        let mut conn = conn;
        let _ = sqlx::query("SELECT pg_advisory_unlock_all()")
            .execute(&mut *conn)
            .await;
    };
    if let Some(row) = &existing {
        let finished: Option<String> = row.try_get("finished_at")?;
        if let Some(at) = finished.filter(|_| !again) {
            unlock(conn).await;
            return Ok(ShardStart::Finished(at));
        }
    }
    // Ours to (re)start: an unfinished row is a shard that died (its lock went with its
    // session); a finished one is replaced only because `again` was asked for.
    sqlx::query(
        "INSERT INTO sweep_shards (sweep, shard, host) VALUES ($1, $2, $3)
         ON CONFLICT (sweep, shard) DO UPDATE
         SET host = EXCLUDED.host, started_at = now(), finished_at = NULL, report = NULL, timing = NULL",
    )
    .bind(name)
    .bind(shard as i32)
    .bind(host)
    .execute(&mut *conn)
    .await?;
    Ok(ShardStart::Started(ShardHold {
        conn: Some(conn),
        name: name.to_owned(),
        shard,
    }))
}

impl ShardHold {
    /// Leaves the shard's `report` and `timing` and releases its lock.
    pub async fn finish(mut self, report: &str, timing: &str) -> Result<(), StoreError> {
        let Some(mut conn) = self.conn.take() else {
            return Err(StoreError::Corrupt("a shard was finished twice".into()));
        };
        sqlx::query(
            "UPDATE sweep_shards SET report = $3, timing = $4, finished_at = now()
             WHERE sweep = $1 AND shard = $2",
        )
        .bind(&self.name)
        .bind(self.shard as i32)
        .bind(report)
        .bind(timing)
        .execute(&mut *conn)
        .await?;
        sqlx::query("SELECT pg_advisory_unlock_all()")
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

impl Drop for ShardHold {
    /// A shard that did not finish closes its session rather than hand a connection
    /// holding its lock back to the pool: the lock goes with the session, and the record
    /// stays unfinished (collect reports it).
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
    }
}

async fn identity_of(
    conn: &mut sqlx::PgConnection,
    name: &str,
) -> Result<Option<SweepIdentity>, StoreError> {
    let Some(row) =
        sqlx::query("SELECT scenario, digest, seeds, shards FROM sweeps WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *conn)
            .await?
    else {
        return Ok(None);
    };
    let seeds: Vec<i64> = row.try_get("seeds")?;
    let shards: i32 = row.try_get("shards")?;
    Ok(Some(SweepIdentity {
        scenario: row.try_get("scenario")?,
        digest: row.try_get("digest")?,
        seeds: seeds.into_iter().map(|s| s as u64).collect(),
        shards: shards as u32,
    }))
}

/// Sweep `name`'s identity and every shard that started, by shard; `None` when the
/// database has no sweep of that name.
pub async fn shard_records(
    pool: &PgPool,
    name: &str,
) -> Result<Option<(SweepIdentity, Vec<ShardRecord>)>, StoreError> {
    let mut conn = pool.acquire().await?;
    let Some(identity) = identity_of(&mut conn, name).await? else {
        return Ok(None);
    };
    let rows = sqlx::query(
        "SELECT shard, host, started_at::text AS started_at, report, timing
         FROM sweep_shards WHERE sweep = $1 ORDER BY shard",
    )
    .bind(name)
    .fetch_all(&mut *conn)
    .await?;
    let records = rows
        .iter()
        .map(|r| {
            Ok(ShardRecord {
                shard: r.try_get::<i32, _>("shard")? as u32,
                host: r.try_get("host")?,
                started_at: r.try_get("started_at")?,
                report: r.try_get("report")?,
                timing: r.try_get("timing")?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(Some((identity, records)))
}
