//! `store = "postgres"` end to end: the same scenario and seed give byte-identical
//! events on SQLite and PostgreSQL; a bad or missing database is refused before anything
//! runs; a server restart mid-run loses nothing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hearsay_tests::{bin, hearsay, of_type, path_str, read_jsonl, root, run_ok, scenario, summary};
use sqlx::Row;

use crate::store_conformance::database_url;

/// `scenario` with `store = "postgres"`, written to `dir`.
pub(crate) fn on_postgres(dir: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(scenario(name)).expect("scenario");
    let text = if text.contains("store = \"sqlite\"") {
        text.replace("store = \"sqlite\"", "store = \"postgres\"")
    } else if text.contains("[memory]\n") {
        text.replace("[memory]\n", "[memory]\nstore = \"postgres\"\n")
    } else {
        format!("{text}\n[memory]\nstore = \"postgres\"\n")
    };
    let path = dir.join(format!("pg-{name}"));
    std::fs::write(&path, text).expect("write");
    path
}

/// Runs `name` on both backends and checks the events are byte-identical; returns the
/// two run directories (in a temporary directory) and the URL.
fn same_events(
    name: &str,
    extra: &[&str],
) -> Option<(tempfile::TempDir, PathBuf, PathBuf, String)> {
    let url = database_url()?;
    let dir = tempfile::tempdir().expect("tempdir");
    let sqlite_out = dir.path().join("sqlite");
    run_ok(&scenario(name), &sqlite_out, extra);
    let pg_out = dir.path().join("postgres");
    let mut args = extra.to_vec();
    args.extend(["--database-url", url.as_str()]);
    run_ok(&on_postgres(dir.path(), name), &pg_out, &args);
    let a = hearsay_tests::log_bytes(sqlite_out.join("events.jsonl")).expect("sqlite events");
    let b = hearsay_tests::log_bytes(pg_out.join("events.jsonl")).expect("postgres events");
    assert!(
        a == b,
        "{name}: events.jsonl differs between SQLite and PostgreSQL"
    );
    let s = summary(&pg_out);
    assert_eq!(s["store"]["backend"], "postgres");
    assert!(s["store"]["run_id"].as_i64() > Some(0));
    assert_eq!(s["memories"], summary(&sqlite_out)["memories"]);
    assert!(
        !pg_out.join("memories.db").exists(),
        "memories live in PostgreSQL"
    );
    Some((dir, sqlite_out, pg_out, url))
}

#[test]
fn fish_market_is_byte_identical_on_both_backends() {
    same_events("fish-market.toml", &[]);
}

/// Fast forgetting (archived vectors moved out of the HNSW table while the run goes on),
/// frequent reflection and a chunked memory: the same run on both backends, and inspect
/// reads both alike.
#[test]
fn the_forgetful_village_is_byte_identical_on_both_backends() {
    let Some((_dir, sqlite_out, pg_out, url)) = same_events("forgetful-village.toml", &[]) else {
        return;
    };
    let s = summary(&pg_out);
    assert!(
        s["memories"]["archived"].as_u64() > Some(100),
        "{}",
        s["memories"]
    );
    let run_id = s["store"]["run_id"].as_i64().expect("run_id");
    let (moved, live_archived): (i64, i64) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let pool = sqlx::PgPool::connect(&url).await.expect("connect");
            let row = sqlx::query(
                "SELECT (SELECT count(DISTINCT id) FROM memory_vectors_archive WHERE run_id = $1) AS moved,
                        (SELECT count(*) FROM memory_vectors v JOIN memories m USING (run_id, id)
                         WHERE v.run_id = $1 AND m.forgotten_tick IS NOT NULL) AS live",
            )
            .bind(run_id)
            .fetch_one(&pool)
            .await
            .expect("count");
            (row.get("moved"), row.get("live"))
        });
    assert!(moved > 0, "archived vectors left the HNSW-indexed table");
    assert!(
        moved + live_archived >= s["memories"]["archived"].as_i64().expect("archived"),
        "every archived memory kept its vectors somewhere"
    );
    // `hearsay ARGS --database-url URL`, which must succeed: its stdout.
    let ok = |args: &[&str]| {
        let out = hearsay(&root(), &[args, &["--database-url", &url]].concat());
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let inspect = |dir: &Path| {
        ok(&[
            "inspect",
            path_str(dir),
            "--npc",
            "Mira",
            "--query",
            "the old bridge",
            "--all",
            "--json",
        ])
    };
    assert!(
        inspect(&sqlite_out) == inspect(&pg_out),
        "inspect differs between SQLite and PostgreSQL"
    );
    // The export reads the memories as the store hands them over, a row at a time (on
    // PostgreSQL as one statement's rows arrive): the same tables from both backends.
    let export = |dir: &Path| {
        let out_dir = dir.with_extension("export");
        ok(&[
            "export",
            path_str(dir),
            "--format",
            "csv",
            "--out",
            path_str(&out_dir),
        ]);
        out_dir
    };
    let (from_sqlite, from_pg) = (export(&sqlite_out), export(&pg_out));
    for (table, least) in [("memories.csv", 100), ("events.csv", 100), ("npcs.csv", 2)] {
        let read = |dir: &Path| std::fs::read(dir.join(table)).expect("the table");
        let rows = read(&from_pg);
        assert!(
            rows.iter().filter(|&&b| b == b'\n').count() > least,
            "{table}: too few rows to compare"
        );
        assert!(
            read(&from_sqlite) == rows,
            "{table} differs between SQLite and PostgreSQL"
        );
    }
    let replay = hearsay(&root(), &["replay", path_str(&pg_out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 300 ticks"
    );
    // Deleting a run takes all of it: memories, recall touches, live and archived
    // vectors, checkpoints (the trigger of migrations 0010 and 0012: `memory_rows` and
    // `memory_recalls` have no key to `runs`).
    let left: Vec<i64> = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let pool = sqlx::PgPool::connect(&url).await.expect("connect");
            let count = |table: &str| format!("SELECT count(*) FROM {table} WHERE run_id = $1");
            let tables = [
                "memories",
                "memory_recalls",
                "memory_vectors",
                "memory_vectors_archive",
                "checkpoints",
            ];
            let mut before = 0;
            for t in tables {
                let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(count(t)))
                    .bind(run_id)
                    .fetch_one(&pool)
                    .await
                    .expect("count");
                before += i64::from(n > 0);
            }
            assert_eq!(before, 5, "the run had rows in every table");
            sqlx::query("DELETE FROM runs WHERE id = $1")
                .bind(run_id)
                .execute(&pool)
                .await
                .expect("delete the run");
            let mut left = Vec::new();
            for t in tables {
                left.push(
                    sqlx::query_scalar(sqlx::AssertSqlSafe(count(t)))
                        .bind(run_id)
                        .fetch_one(&pool)
                        .await
                        .expect("count"),
                );
            }
            left
        });
    assert_eq!(left, vec![0; 5], "rows of a deleted run left behind");
}

#[test]
fn the_200_npc_town_is_byte_identical_on_both_backends() {
    same_events("rumour-200.toml", &["--ticks", "12"]);
}

#[test]
fn a_postgres_scenario_without_a_database_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = on_postgres(dir.path(), "fish-market.toml");
    let out = dir.path().join("run");
    let output = Command::new(bin())
        .args(["run", path_str(&file), "--out", path_str(&out)])
        .env_remove("DATABASE_URL")
        .output()
        .expect("hearsay");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no database was given") && stderr.contains("--database-url"),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn an_unreachable_server_is_a_clear_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = on_postgres(dir.path(), "fish-market.toml");
    let out = dir.path().join("run");
    let url = "postgres://hearsay:hunter2@127.0.0.1:9/nowhere";
    let output = hearsay(
        dir.path(),
        &[
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--database-url",
            url,
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot reach postgres://hearsay:[redacted]@127.0.0.1:9/nowhere"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "the password never prints");
    assert!(!out.exists());
}

#[test]
fn a_database_where_vector_cannot_be_created_says_how_to_fix_it() {
    let Some(url) = database_url() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let suffix = std::process::id();
    let (role, db) = (
        format!("hearsay_plain_{suffix}"),
        format!("hearsay_noext_{suffix}"),
    );
    runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&url).await.expect("connect");
        for sql in [
            format!("CREATE ROLE {role} LOGIN"),
            format!("CREATE DATABASE {db} OWNER {role}"),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .expect("setup");
        }
        pool.close().await;
    });
    let (head, _) = url.rsplit_once('/').expect("url has a database");
    let plain_url = head.replacen("postgres@", &format!("{role}@"), 1) + "/" + &db;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = on_postgres(dir.path(), "fish-market.toml");
    let out = dir.path().join("run");
    let output = hearsay(
        dir.path(),
        &[
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--database-url",
            &plain_url,
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("CREATE EXTENSION vector"), "{stderr}");
    assert!(!out.exists());
    runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&url).await.expect("connect");
        for sql in [format!("DROP DATABASE {db}"), format!("DROP ROLE {role}")] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .expect("teardown");
        }
        pool.close().await;
    });
}

/// A throwaway cluster of the test's own (so restarting it disturbs no other test),
/// stopped when dropped.
struct OwnCluster {
    env_file: PathBuf,
    url: String,
}

impl OwnCluster {
    fn start(dir: &Path) -> Option<OwnCluster> {
        let env_file = dir.join("pg.env");
        let started = Command::new(root().join("scripts/pg.sh"))
            .arg("start")
            .arg(&env_file)
            .output();
        match started {
            Ok(out) if out.status.success() => {}
            other => {
                let why = match other {
                    Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
                    Err(e) => e.to_string(),
                };
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!(
                        "scripts/pg.sh start failed, and under CI the restart test must run: {why}"
                    );
                }
                eprintln!("note: scripts/pg.sh start failed ({why}); the restart test did not run");
                return None;
            }
        }
        let text = std::fs::read_to_string(&env_file).expect("pg.env");
        let url = text
            .lines()
            .find_map(|l| l.strip_prefix("DATABASE_URL="))
            .expect("DATABASE_URL in pg.env")
            .to_owned();
        Some(OwnCluster { env_file, url })
    }

    fn restart(&self) {
        let out = Command::new(root().join("scripts/pg.sh"))
            .arg("restart")
            .arg(&self.env_file)
            .output()
            .expect("pg.sh");
        assert!(
            out.status.success(),
            "pg.sh restart: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join("scripts/pg.sh"))
            .arg("stop")
            .arg(&self.env_file)
            .output();
    }
}

/// `pg_ctl restart` while a run is writing: the run rides it out, and ends with every
/// memory stored, nothing half-written, and the same events as an uninterrupted run.
#[test]
fn a_server_restart_mid_run_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(cluster) = OwnCluster::start(dir.path()) else {
        return;
    };
    let url = cluster.url.clone();
    let ticks = ["--ticks", "30"];
    let reference = dir.path().join("reference");
    run_ok(&scenario("rumour-200.toml"), &reference, &ticks);

    let out = dir.path().join("restarted");
    let file = on_postgres(dir.path(), "rumour-200.toml");
    let mut child = Command::new(bin())
        .args([
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--no-progress",
            "--database-url",
            &url,
        ])
        .args(ticks)
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("hearsay starts");
    // Wait until the run is well under way (a third of its ticks logged), then restart.
    let events = out.join("events.jsonl");
    let started = std::time::Instant::now();
    loop {
        let done = hearsay_tests::log_text(&events)
            .map(|t| t.matches("\"type\":\"tick\"").count())
            .unwrap_or(0);
        if done >= 8 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the run did not get going"
        );
        assert!(
            child.try_wait().expect("child").is_none(),
            "the run ended before the restart"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let at_tick = hearsay_tests::log_text(&events)
        .map(|t| t.matches("\"type\":\"tick\"").count())
        .unwrap_or(0);
    cluster.restart();
    let output = child.wait_with_output().expect("hearsay ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the run survives a restart:\n{stderr}"
    );

    let a = hearsay_tests::log_bytes(reference.join("events.jsonl")).expect("reference");
    let b = hearsay_tests::log_bytes(&events).expect("restarted");
    assert!(
        a == b,
        "the restarted run differs from the uninterrupted one"
    );
    let s = summary(&out);
    assert_eq!(s["memories"]["unembedded"], 0);
    let logged = of_type(&read_jsonl(&events), "memory").len() as i64;
    let run_id = s["store"]["run_id"].as_i64().expect("run id");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (rows, ticks_seen): (i64, i64) = runtime.block_on(async {
        let pool = sqlx::PgPool::connect(&url).await.expect("connect");
        let row = sqlx::query("SELECT count(*) AS n, count(DISTINCT tick_created) AS t FROM memories WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(&pool)
            .await
            .expect("count");
        let out = (row.get("n"), row.get("t"));
        pool.close().await;
        out
    });
    assert_eq!(
        rows, logged,
        "every memory in events.jsonl is in PostgreSQL, once"
    );
    assert_eq!(ticks_seen, 30, "every tick wrote its memories");
    println!(
        "figure: PostgreSQL restarted after {at_tick} of 30 ticks (rumour-200): {rows} memories, all stored once, 0 unembedded, events byte-identical; lost 0 ticks"
    );
}

/// kill -9 of a run kept in PostgreSQL, then `resume` and `fork`: the same bytes as the
/// run on SQLite, and the fork equal to it before the fork tick.
#[test]
fn a_postgres_run_killed_resumed_and_forked() {
    let Some(url) = database_url() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let ticks = ["--ticks", "20"];
    let reference = dir.path().join("sqlite");
    run_ok(&scenario("rumour-200.toml"), &reference, &ticks);

    let out = dir.path().join("postgres");
    let file = on_postgres(dir.path(), "rumour-200.toml");
    let mut child = Command::new(bin())
        .args([
            "run",
            path_str(&file),
            "--out",
            path_str(&out),
            "--no-progress",
            "--database-url",
            &url,
        ])
        .args(ticks)
        .current_dir(root())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("hearsay starts");
    let started = std::time::Instant::now();
    while hearsay_tests::log_text(out.join("events.jsonl"))
        .map(|t| t.matches("\"type\":\"tick\"").count())
        .unwrap_or(0)
        < 8
    {
        assert!(started.elapsed() < Duration::from_secs(120), "no progress");
        assert!(
            child.try_wait().expect("child").is_none(),
            "the run ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    let resumed = hearsay(&root(), &["resume", path_str(&out), "--database-url", &url]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let a = hearsay_tests::log_bytes(reference.join("events.jsonl")).expect("sqlite");
    let b = hearsay_tests::log_bytes(out.join("events.jsonl")).expect("postgres");
    assert!(
        a == b,
        "killed, resumed on PostgreSQL: differs from the uninterrupted SQLite run"
    );

    let forked = dir.path().join("fork");
    let fork = hearsay(
        &root(),
        &[
            "fork",
            path_str(&out),
            "--at-tick",
            "10",
            "--out",
            path_str(&forked),
            "--seed",
            "9",
            "--database-url",
            &url,
        ],
    );
    assert!(
        fork.status.success(),
        "{}",
        String::from_utf8_lossy(&fork.stderr)
    );
    let original = String::from_utf8(b).expect("utf8");
    let branch = hearsay_tests::log_text(forked.join("events.jsonl")).expect("fork events");
    let cut = |text: &str| {
        let end = text
            .find("{\"type\":\"tick\",\"tick\":9,")
            .expect("tick 9 closes");
        text[..end].to_owned()
    };
    assert_eq!(
        cut(&original),
        cut(&branch),
        "the fork is the original before tick 10"
    );
    assert_ne!(
        summary(&forked)["store"]["run_id"],
        summary(&out)["store"]["run_id"],
        "a fork is a new run"
    );
    let replay = hearsay(&root(), &["replay", path_str(&forked)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 20 ticks"
    );

    // An edited fork between two checkpoints (the runs save one every ten ticks): the
    // ticks from the checkpoint at 10 run again under the source's scenario, the edit
    // (the world and the forgetting, which the store keeps) takes over at 15 — on
    // PostgreSQL as on SQLite, byte for byte.
    let edited = |from: &Path, out: &Path, on_postgres: bool| {
        let mut args = vec![
            "--set",
            "world.hearing_radius=1",
            "--set",
            "memory.forget.strength=0.2",
        ];
        if on_postgres {
            args.extend(["--database-url", &url]);
        }
        hearsay_tests::fork_ok(from, 15, out, &args);
    };
    let (edited_pg, edited_sqlite) = (dir.path().join("edited-pg"), dir.path().join("edited"));
    edited(&out, &edited_pg, true);
    edited(&reference, &edited_sqlite, false);
    for file in ["events.jsonl", "llm.jsonl"] {
        assert!(
            hearsay_tests::log_bytes(edited_pg.join(file)).expect("postgres")
                == hearsay_tests::log_bytes(edited_sqlite.join(file)).expect("sqlite"),
            "{file}: the edited fork on PostgreSQL differs from the one on SQLite"
        );
    }
    let replay = hearsay(&root(), &["replay", path_str(&edited_pg)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 20 ticks"
    );
}

/// A run directory names its PostgreSQL run by id; an edited (or shared) directory could
/// name any run in the user's database. Every command that reads or continues a run
/// attaches only a row holding the directory's own scenario and NPCs, and a command that
/// reads a run takes the database only from `--database-url`, never the environment.
#[test]
fn a_run_directory_cannot_read_another_postgres_run() {
    let Some(url) = database_url() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let file = on_postgres(dir.path(), "fish-market.toml");
    let mine = dir.path().join("mine");
    let secret = dir.path().join("secret");
    run_ok(&file, &mine, &["--ticks", "10", "--database-url", &url]);
    // Another run in the same database: the same NPCs, another seed (so another text).
    run_ok(
        &file,
        &secret,
        &["--ticks", "10", "--seed", "7", "--database-url", &url],
    );
    let secret_id = summary(&secret)["store"]["run_id"].as_i64().expect("id");
    // The shared directory now names the secret run.
    let manifest_path = mine.join("run.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).expect("run.json"))
            .expect("json");
    manifest["store"]["run_id"] = secret_id.into();
    std::fs::write(&manifest_path, manifest.to_string()).expect("write");
    let m = path_str(&mine);
    for args in [
        vec!["inspect", m, "--npc", "Bob", "--database-url", &url],
        vec![
            "ask",
            m,
            "--npc",
            "Bob",
            "--database-url",
            &url,
            "what do you know?",
        ],
        vec!["resume", m, "--database-url", &url],
        vec![
            "fork",
            m,
            "--at-tick",
            "5",
            "--out",
            path_str(&dir.path().join("f")),
            "--database-url",
            &url,
        ],
    ] {
        let o = hearsay(&root(), &args);
        let said = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains(&format!(
                "names PostgreSQL run {secret_id}, whose scenario is not"
            )),
            "{args:?}: {said}"
        );
        assert!(!String::from_utf8_lossy(&o.stdout).contains("fresh fish"));
    }
    assert!(!dir.path().join("f").exists());
    // Reading commands never take the database from the environment.
    let original_id = summary(&mine)["store"]["run_id"].as_i64().expect("id");
    manifest["store"]["run_id"] = original_id.into();
    std::fs::write(&manifest_path, manifest.to_string()).expect("write");
    let o = Command::new(bin())
        .args(["inspect", m, "--npc", "Bob"])
        .env("DATABASE_URL", &url)
        .output()
        .expect("hearsay");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no database was given"));
    let o = hearsay(
        &root(),
        &["inspect", m, "--npc", "Bob", "--database-url", &url],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
