//! Sweeps split by a batch scheduler: shards run as separate processes against one
//! PostgreSQL, collected from their directories and from the database, give the
//! unsharded sweep's table and `sweep.json` byte for byte; a missing, duplicated or
//! foreign shard is named, never merged; a shard recorded as finished, or a name of
//! another sweep, is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hearsay_tests::{assert_ok as ok, bin, hearsay, path_str, root, scenario};

use crate::postgres::on_postgres;
use crate::store_conformance::database_url;

fn refused(output: &Output, what: &str) -> String {
    assert!(
        !output.status.success(),
        "{what} should have been refused\nstdout:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A sweep name no earlier test run used in this database.
fn unique_name(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("test-{what}-{}-{nanos}", std::process::id())
}

fn sweep_args<'a>(scenario: &'a Path, out: &'a Path, url: &'a str) -> Vec<&'a str> {
    vec![
        "sweep",
        path_str(scenario),
        "--seeds",
        "1..6",
        "--ticks",
        "30",
        "--set",
        "memory.recall_k=3",
        "--out",
        path_str(out),
        "--database-url",
        url,
        "--no-progress",
    ]
}

/// `hearsay sweep --collect DIR... --out OUT`.
fn collect_dirs(dirs: &[&Path], out: &Path) -> Output {
    let mut args = vec!["sweep", "--collect"];
    args.extend(dirs.iter().map(|d| path_str(d)));
    args.extend(["--out", path_str(out)]);
    hearsay(&root(), &args)
}

/// `hearsay sweep --collect --database-url URL --sweep NAME --out OUT`.
fn collect_named(url: &str, name: &str, out: &Path) -> Output {
    hearsay(
        &root(),
        &[
            "sweep",
            "--collect",
            "--database-url",
            url,
            "--sweep",
            name,
            "--out",
            path_str(out),
        ],
    )
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn shards_run_apart_against_one_postgres_collect_to_the_unsharded_sweep() {
    let Some(url) = database_url() else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let pg_scenario = on_postgres(work.path(), "fish-market.toml");
    let whole = work.path().join("whole");
    let whole_name = unique_name("whole");
    let mut args = sweep_args(&pg_scenario, &whole, &url);
    args.extend(["--jobs", "2", "--pool-size", "8", "--sweep", &whole_name]);
    let unsharded = hearsay(&root(), &args);
    ok(&unsharded, "the unsharded sweep");
    // A pool too small for the runs at once is refused before anything runs.
    let small = work.path().join("small");
    let mut args = sweep_args(&pg_scenario, &small, &url);
    args.extend(["--jobs", "2", "--pool-size", "3"]);
    let err = refused(&hearsay(&root(), &args), "a pool of 3 for 2 runs at once");
    assert!(err.contains("need at least 2 connections each"), "{err}");

    // Three shards as three processes at once, as a job array would start them, each
    // recording itself in the database under one name.
    let name = unique_name("shards");
    let shard_dir = |i: usize| work.path().join(format!("shard-{i}"));
    let children: Vec<_> = (1..=3)
        .map(|i| {
            let out = shard_dir(i);
            let shard = format!("{i}/3");
            let mut args = sweep_args(&pg_scenario, &out, &url);
            args.extend([
                "--shard",
                shard.as_str(),
                "--sweep",
                name.as_str(),
                "--jobs",
                "1",
            ]);
            Command::new(bin())
                .args(&args)
                .current_dir(root())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("a shard starts")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let output = child.wait_with_output().expect("a shard ends");
        ok(&output, &format!("shard {}/3", i + 1));
    }
    let shard_json: serde_json::Value =
        serde_json::from_slice(&read(&shard_dir(2).join("shard.json"))).expect("shard.json");
    assert_eq!(shard_json["shard"]["index"], 2);
    assert_eq!(shard_json["shard"]["seeds"], serde_json::json!([3, 4]));
    assert_eq!(shard_json["seeds"], serde_json::json!([1, 2, 3, 4, 5, 6]));

    // Every run got its own id in the one database.
    let mut run_ids: Vec<i64> = (1..=3)
        .flat_map(|i| {
            let dir = shard_dir(i);
            std::fs::read_dir(&dir)
                .expect("shard dir")
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("seed-"))
                .map(|e| {
                    hearsay_tests::summary(&e.path())["store"]["run_id"]
                        .as_i64()
                        .expect("run id")
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(run_ids.len(), 6);
    run_ids.sort_unstable();
    run_ids.dedup();
    assert_eq!(run_ids.len(), 6, "run ids collide: {run_ids:?}");

    // Collected from the directories, given in any order, and from the database alone.
    let from_dirs = work.path().join("from-dirs");
    let collected = collect_dirs(&[&shard_dir(3), &shard_dir(1), &shard_dir(2)], &from_dirs);
    ok(&collected, "collect from the shards' directories");
    let from_db = work.path().join("from-db");
    let from_database = collect_named(&url, &name, &from_db);
    ok(&from_database, "collect from PostgreSQL");
    // An unsharded sweep recorded under a name is its own one shard.
    let whole_db = work.path().join("whole-db");
    ok(
        &collect_named(&url, &whole_name, &whole_db),
        "collect the unsharded sweep from PostgreSQL",
    );
    let whole_json = read(&whole.join("sweep.json"));
    assert!(read(&whole_db.join("sweep.json")) == whole_json);
    for (dir, output) in [(&from_dirs, &collected), (&from_db, &from_database)] {
        assert!(
            read(&dir.join("sweep.json")) == whole_json,
            "{}: sweep.json differs from the unsharded sweep's:\n{}\n---\n{}",
            dir.display(),
            String::from_utf8_lossy(&read(&dir.join("sweep.json"))),
            String::from_utf8_lossy(&whole_json)
        );
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&unsharded.stdout),
            "the table differs from the unsharded sweep's"
        );
        let shards: serde_json::Value =
            serde_json::from_slice(&read(&dir.join("shards.json"))).expect("shards.json");
        let listed: Vec<u64> = shards["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .map(|s| s["index"].as_u64().expect("index"))
            .collect();
        assert_eq!(
            listed,
            vec![1, 2, 3],
            "shards.json lists every shard in order"
        );
    }

    // A missing shard is named with its seeds; a duplicated one with both places.
    let missing = collect_dirs(
        &[&shard_dir(1), &shard_dir(3)],
        &work.path().join("missing"),
    );
    let err = refused(&missing, "collect without shard 2");
    assert!(err.contains("missing shard 2/3 (seeds 3,4)"), "{err}");
    assert!(!work.path().join("missing").exists(), "nothing written");
    let twice = collect_dirs(
        &[&shard_dir(1), &shard_dir(2), &shard_dir(2), &shard_dir(3)],
        &work.path().join("twice"),
    );
    let err = refused(&twice, "collect with shard 2 twice");
    assert!(err.contains("duplicated shard 2/3"), "{err}");

    // A shard of another sweep (other ticks) is foreign, by directory and by name.
    let other = work.path().join("other-2");
    let mut args = sweep_args(&pg_scenario, &other, &url);
    args[5] = "31";
    args.extend(["--shard", "2/3", "--jobs", "1"]);
    ok(&hearsay(&root(), &args), "a shard of another sweep");
    let foreign = collect_dirs(
        &[&shard_dir(1), &other, &shard_dir(3)],
        &work.path().join("foreign"),
    );
    let err = refused(&foreign, "collect with a foreign shard");
    assert!(err.contains("foreign shard"), "{err}");
    assert!(err.contains(path_str(&other)), "{err}");
    let other_name = work.path().join("other-name");
    let mut args = sweep_args(&pg_scenario, &other_name, &url);
    args[5] = "31";
    args.extend(["--shard", "1/3", "--sweep", name.as_str()]);
    let err = refused(
        &hearsay(&root(), &args),
        "another sweep under the same name",
    );
    assert!(err.contains("is another sweep"), "{err}");
    assert!(!work.path().join("other-name").exists(), "nothing made");

    // A shard recorded as finished is not run twice by mistake.
    let again = work.path().join("again");
    let mut args = sweep_args(&pg_scenario, &again, &url);
    args.extend(["--shard", "2/3", "--sweep", name.as_str()]);
    let err = refused(&hearsay(&root(), &args), "shard 2 again");
    assert!(err.contains("shard 2/3 already finished"), "{err}");
    assert!(err.contains("--force"), "{err}");

    // Collecting a name the database does not hold says so.
    let unknown = unique_name("unknown");
    let err = refused(
        &collect_named(&url, &unknown, &work.path().join("unknown")),
        "collect an unknown sweep",
    );
    assert!(err.contains("holds no sweep of that name"), "{err}");
}

/// The shards of a SQLite sweep, collected from their directories, are the unsharded
/// sweep too; a shard directory is not a whole sweep and the other way round.
#[test]
fn sqlite_shards_collect_from_their_directories() {
    let work = tempfile::tempdir().expect("tempdir");
    let fish = scenario("fish-market.toml");
    let base = |out: &Path| -> Vec<String> {
        [
            "sweep",
            path_str(&fish),
            "--seeds",
            "3,9,4,1,7",
            "--ticks",
            "25",
            "--out",
            path_str(out),
            "--no-progress",
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        hearsay(&root(), &args)
    };
    let whole = work.path().join("whole");
    let unsharded = run(base(&whole));
    ok(&unsharded, "the unsharded sweep");
    let dirs: Vec<PathBuf> = (1..=2).map(|i| work.path().join(format!("s{i}"))).collect();
    for (i, dir) in dirs.iter().enumerate() {
        let mut args = base(dir);
        args.extend(["--shard".into(), format!("{}/2", i + 1)]);
        ok(&run(args), "a shard");
    }
    let shard1: serde_json::Value =
        serde_json::from_slice(&read(&dirs[0].join("shard.json"))).expect("shard.json");
    assert_eq!(
        shard1["shard"]["seeds"],
        serde_json::json!([3, 9]),
        "contiguous shares in the order given"
    );
    let out = work.path().join("collected");
    let collected = collect_dirs(&[&dirs[0], &dirs[1]], &out);
    ok(&collected, "collect");
    assert!(read(&out.join("sweep.json")) == read(&whole.join("sweep.json")));
    assert_eq!(collected.stdout, unsharded.stdout);
    let err = refused(
        &collect_dirs(&[&whole], &work.path().join("x")),
        "collect a whole sweep",
    );
    assert!(err.contains("a whole sweep"), "{err}");
    // The out directory may not be a shard being collected, even with --force.
    let before = read(&dirs[0].join("shard.json"));
    let err = refused(
        &hearsay(
            &root(),
            &[
                "sweep",
                "--collect",
                path_str(&dirs[0]),
                path_str(&dirs[1]),
                "--out",
                path_str(&dirs[0]),
                "--force",
            ],
        ),
        "collect into a shard",
    );
    assert!(err.contains("an input of this command"), "{err}");
    assert!(read(&dirs[0].join("shard.json")) == before && dirs[0].join("seed-3").is_dir());
    // A shard that never finished has no shard.json.
    std::fs::remove_file(dirs[1].join("shard.json")).expect("remove");
    let err = refused(
        &collect_dirs(&[&dirs[0], &dirs[1]], &work.path().join("y")),
        "collect an unfinished shard",
    );
    assert!(err.contains("has not finished"), "{err}");
    // More shards than seeds, and a shard that does not exist, are refused before anything runs.
    for (shard, says) in [
        ("6/6", "cannot be split into 6 shards"),
        ("3/2", "does not exist"),
    ] {
        let mut args = base(&work.path().join("z"));
        args.extend(["--shard".into(), shard.into()]);
        let err = refused(&run(args), shard);
        assert!(err.contains(says), "{shard}: {err}");
        assert!(!work.path().join("z").exists());
    }
}

/// The most connections hearsay process `pid` held at once, polled from
/// `pg_stat_activity` (every session says `hearsay[PID]`) until the process ends.
fn most_connections(url: &str, child: &mut std::process::Child) -> i64 {
    let pid = child.id();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let pool = sqlx::PgPool::connect(url).await.expect("connect");
            let name = format!("hearsay[{pid}]");
            let mut most = 0;
            let started = std::time::Instant::now();
            while child.try_wait().expect("wait").is_none() {
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(300),
                    "the sweep hangs"
                );
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                )
                .bind(&name)
                .fetch_one(&pool)
                .await
                .expect("pg_stat_activity");
                most = most.max(n);
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            pool.close().await;
            most
        })
}

/// `--pool-size` bounds what a sweep process opens: its runs share it out, and each run
/// holds one more connection for its writer's lock. (How the share becomes each run's
/// pool is `sweep::tests::a_pool_is_shared_out_among_the_runs_at_once`. Without the flag
/// the same sweep opens 6 to 10: a run's writes go through one queue and its backfill
/// claims from memory, so a run needs few connections at once, and how many more its
/// pool opens depends on when each is handed back — no bound to test against.)
#[test]
fn a_sweeps_connections_stay_within_its_pool_size() {
    let Some(url) = database_url() else {
        return;
    };
    let work = tempfile::tempdir().expect("tempdir");
    let town = on_postgres(work.path(), "rumour-200.toml");
    let sweep = |out: &str, extra: &[&str]| {
        let out = work.path().join(out);
        let mut child = Command::new(bin())
            .args(["sweep", path_str(&town), "--seeds", "1..2", "--ticks", "10"])
            .args([
                "--jobs",
                "2",
                "--no-progress",
                "--database-url",
                &url,
                "--out",
            ])
            .arg(&out)
            .args(extra)
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the sweep starts");
        let most = most_connections(&url, &mut child);
        let output = child.wait_with_output().expect("the sweep ends");
        ok(&output, "the sweep");
        most
    };
    let bounded = sweep("bounded", &["--pool-size", "4"]);
    // 4 for the runs' pools, one writer's lock per run at once.
    assert!(bounded > 0, "the sweep's sessions are named hearsay[PID]");
    assert!(
        bounded <= 4 + 2,
        "{bounded} connections with --pool-size 4 and 2 runs at once"
    );
}
