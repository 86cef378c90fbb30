//! `hearsay backfill`: memories a run left without an embedding (its embedder was down
//! when it ended) are embedded afterwards by any number of processes at once against one
//! PostgreSQL — none embeds a row another did (the embedder's own count of texts says
//! so) — and never beside the run's writer.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hearsay_tests::mock::{MockOptions, MockServer, Reply};
use hearsay_tests::{
    bin, hearsay, path_str, root, run_ok, scenario, sqlite_exec, sqlite_rows, summary,
};

use crate::store_conformance::database_url;

#[test]
fn two_processes_backfill_one_run_and_embed_no_row_twice() {
    let Some(url) = database_url() else {
        return;
    };
    let down = Arc::new(AtomicBool::new(true));
    let mock = MockServer::start_with(
        MockOptions {
            embed_down: down.clone(),
            // Slow enough that the two processes' batches overlap.
            embed_delay_ms: 40,
            ..MockOptions::default()
        },
        |_| Reply::answer("{}"),
    );
    let work = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(scenario("fish-market.toml")).expect("scenario");
    let text = text
        .split("\n[memory.embedder]")
        .next()
        .expect("text")
        .replace("store = \"sqlite\"", "store = \"postgres\"")
        .replace(
            "visibility = \"barrier\"",
            "visibility = \"eventual\"\ndrain_timeout_ms = 100",
        )
        // Every text is sent, even one seen before: the embedder's count of texts is
        // then exactly the rows embedded.
        + &format!(
            "\n[memory.embedder]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-embed\"\nbatch_size = 4\nmax_concurrency = 1\ncache_entries = 0\nretry_base_ms = 5\nmax_retries = 0\n",
            mock.url
        );
    assert!(
        text.contains("store = \"postgres\""),
        "the scenario names its store"
    );
    let file = work.path().join("s.toml");
    std::fs::write(&file, text).expect("write");
    let out = work.path().join("run");
    // The embedder is down for the whole run (no preflight: its probe would refuse it).
    run_ok(
        &file,
        &out,
        &[
            "--ticks",
            "40",
            "--no-progress",
            "--no-preflight",
            "--database-url",
            &url,
        ],
    );
    let s = summary(&out);
    let left = s["memories"]["unembedded"].as_u64().expect("unembedded");
    assert!(
        left > 40,
        "the run left memories unembedded: {}",
        s["memories"]
    );
    let run_id = s["store"]["run_id"].as_i64().expect("run id").to_string();

    down.store(false, Ordering::SeqCst);
    let sent_before = mock.embedded_texts().len();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(bin())
                .args(["backfill", "--database-url", &url, "--run", &run_id])
                .current_dir(root())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("hearsay backfill starts")
        })
        .collect();
    let mut embedded = Vec::new();
    for child in children {
        let output = child.wait_with_output().expect("hearsay backfill ends");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "backfill failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let n: u64 = stdout
            .split("embedded ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {stdout:?}"));
        embedded.push(n);
    }
    let sent: Vec<String> = mock.embedded_texts()[sent_before..].to_vec();

    let (unembedded, rows): (i64, Vec<String>) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let pool = sqlx::PgPool::connect(&url).await.expect("connect");
            let id: i64 = run_id.parse().expect("id");
            let unembedded: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM memories WHERE run_id = $1 AND embedding_model IS NULL",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("count");
            // The fish market's memories are one chunk each: one text per row.
            let rows: Vec<String> =
                sqlx::query_scalar("SELECT content FROM memories WHERE run_id = $1")
                    .bind(id)
                    .fetch_all(&pool)
                    .await
                    .expect("rows");
            pool.close().await;
            (unembedded, rows)
        });
    assert_eq!(unembedded, 0, "every memory is embedded");
    assert_eq!(
        embedded.iter().sum::<u64>(),
        left,
        "the two processes embedded the run's leftovers between them: {embedded:?}"
    );
    assert!(
        embedded.iter().all(|&n| n > 0),
        "both processes took a share: {embedded:?}"
    );
    // A batch sends a text repeated within it once, so a text is sent at most as
    // often as rows hold it; a row embedded twice would send its text once too many.
    fn count(texts: &[String]) -> std::collections::BTreeMap<&str, usize> {
        let mut by = std::collections::BTreeMap::new();
        for t in texts {
            *by.entry(t.as_str()).or_default() += 1;
        }
        by
    }
    let (sent_by, rows_by) = (count(&sent), count(&rows));
    for (text, n) in &sent_by {
        let held = rows_by.get(text).copied().unwrap_or(0);
        assert!(
            *n <= held,
            "{text:?} was sent {n} times for {held} rows: a row was embedded twice"
        );
    }
    assert_eq!(
        sent_by.keys().collect::<Vec<_>>(),
        rows_by.keys().collect::<Vec<_>>(),
        "every text was sent"
    );

    // Nothing is left, so a third finds nothing to do; a SQLite run's directory works too.
    let again = hearsay(
        &root(),
        &["backfill", "--database-url", &url, "--run", &run_id],
    );
    assert!(again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("embedded 0 memories"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    let sqlite = work.path().join("sqlite");
    run_ok(
        &scenario("fish-market.toml"),
        &sqlite,
        &["--ticks", "5", "--no-progress"],
    );
    let done = hearsay(&root(), &["backfill", path_str(&sqlite)]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
}

/// A SQLite run whose last memories have no vector (its embedder was down when it
/// ended) gets exactly those embedded by `hearsay backfill`, and a second backfill finds
/// nothing left.
#[test]
fn backfill_embeds_what_a_sqlite_run_left_unembedded() {
    let work = tempfile::tempdir().expect("tempdir");
    let run = work.path().join("run");
    run_ok(
        &scenario("fish-market.toml"),
        &run,
        &["--ticks", "8", "--no-progress"],
    );
    let db = run.join("memories.db");
    let count = |sql: &str| -> i64 { sqlx::Row::get(&sqlite_rows(&db, sql)[0], 0) };
    let unembedded = "SELECT count(*) FROM memory_rows m WHERE NOT EXISTS \
                      (SELECT 1 FROM memory_chunk_vectors v WHERE v.id = m.id)";
    assert_eq!(count(unembedded), 0, "the run embedded everything");
    let last = count("SELECT max(id) FROM memory_rows");
    assert!(last > 10, "fish market wrote {last} memories");
    let dropped = sqlite_exec(
        &db,
        &format!("DELETE FROM memory_chunk_vectors WHERE id > {}", last - 7),
    );
    assert!(dropped >= 7, "{dropped} chunk vectors dropped");
    assert_eq!(count(unembedded), 7);

    let done = hearsay(&root(), &["backfill", path_str(&run)]);
    let out = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(out.contains("embedded 7 memories"), "{out}");
    assert_eq!(count(unembedded), 0, "each is embedded again");
    let again = hearsay(&root(), &["backfill", path_str(&run)]);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("embedded 0 memories"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
}

/// A run being written is its writer's alone: `hearsay backfill` is refused beside it. Once
/// the writer dies (`kill -9`), its lock goes with its session and the run is free again.
#[test]
fn backfill_is_refused_beside_the_runs_writer_and_free_once_it_died() {
    let Some(url) = database_url() else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let file = crate::postgres::on_postgres(work.path(), "fish-market.toml");
    let out = work.path().join("run");
    let mut child = Command::new(bin())
        .args([
            "run",
            path_str(&file),
            "--ticks",
            "100000",
            "--out",
            path_str(&out),
            "--no-progress",
            "--database-url",
            &url,
        ])
        .current_dir(root())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("hearsay run starts");
    let started = std::time::Instant::now();
    let run_id = loop {
        let ticks = hearsay_tests::log_text(out.join("events.jsonl"))
            .map_or(0, |t| t.matches("\"type\":\"tick\"").count());
        let manifest: Option<serde_json::Value> = std::fs::read(out.join("run.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(id) = manifest.and_then(|m| m["store"]["run_id"].as_i64())
            && ticks >= 3
        {
            break id.to_string();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the run did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let beside = hearsay(
        &root(),
        &["backfill", "--database-url", &url, "--run", &run_id],
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(!beside.status.success(), "refused beside the writer");
    let err = String::from_utf8_lossy(&beside.stderr);
    assert!(err.contains("is being written"), "{err}");
    let after = hearsay(
        &root(),
        &["backfill", "--database-url", &url, "--run", &run_id],
    );
    assert!(
        after.status.success(),
        "free once the writer died: {}",
        String::from_utf8_lossy(&after.stderr)
    );
}
