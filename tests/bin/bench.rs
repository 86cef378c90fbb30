//! `bench`: hearsay's benchmark suites, measured against the limits they should meet.
//!
//!     bench [--hearsay target/release/hearsay] [--out target/bench/results.json]
//!           [--quick] [SUITE ...]
//!
//! Suites (default: the first seven; `--help` lists them; a name or flag it does not
//! know stops it before any suite runs):
//! - `bandwidth`: this machine's memory read bandwidth (1 GiB of f32, the same 8-lane
//!   sum recall uses; one thread, and two).
//! - `recall`: recall's scan alone, 200 NPCs × 500 memories, dense vectors (a real
//!   embedder's) and sparse ones (the hashing embedder's): GB/s read against
//!   `bandwidth` (goal ≥ 50 %).
//! - `p1`: LLM-bound ticks — a mock OpenAI-compatible server at a fixed 200 ms per answer,
//!   256 NPCs, `max_concurrency` 32: mean tick ÷ ceil(N/C)·L (goal ≤ 1.10).
//! - `p2`: backfill isolation where recall happens — an LLM-bound run (mock at 1,000 ms
//!   per decision, 256 NPCs, C 32) under `eventual` visibility with an instant and a
//!   500 ms embedder: tick ÷ ceil(N/C)·L for both (goal ≤ 1.05) and the share of recalls
//!   whose query came from this tick's or the previous tick's observation (goal ≥ 95 %).
//! - `p3`: offline scale — 1,000 NPCs × 500 ticks, heuristic brain, hashing embedder,
//!   SQLite: ticks/s, time per phase, recall throughput against `bandwidth` (goal ≥ 50 %).
//! - `rss`: peak resident memory per 100,000 memories in the embedded store (two run
//!   lengths, the slope between them).
//! - `mesa`: the same gossip model in Mesa (`scripts/bench-mesa.py`) and in hearsay, at
//!   100 and 1,000 NPCs: time per tick, ratio.
//! - `p4`: PostgreSQL recall at 1,000,000 memories (the `bench-pg` binary; needs
//!   DATABASE_URL).
//! - `pgtown`: the 200-NPC town on PostgreSQL against SQLite (needs DATABASE_URL).
//! - `scaleout`: a sweep against one PostgreSQL as one process and as two shard
//!   processes, the server's share of the time, the insert rate of the store's own tick
//!   write with one and two writers, and where one server saturates (needs DATABASE_URL).
//!
//! `bench town N TICKS` prints the suites' town of N NPCs as a scenario, for profiling.
//! `bench pairs LABEL --a BIN --b BIN` runs two builds on that town by turns (see
//! `pairs.rs`; `scripts/bench-pairs.sh` builds two commits for it).
//!
//! Prints a table as it goes and writes every figure to `--out` (JSON), which
//! `bench render` turns into docs/BENCHMARKS.md's generated part (scripts/bench.sh does
//! both).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use hearsay_tests::mock::{MockOptions, MockServer, Reply};
use serde_json::{Value, json};

#[path = "bench/pairs.rs"]
mod pairs;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// How to call `bench` (printed by `--help` and after a mistake).
fn usage() -> String {
    format!(
        "usage: bench [--hearsay BIN] [--out FILE.json] [--quick] [SUITE ...]
       bench render --before B.json --after A.json --into docs/BENCHMARKS.md [--readme README.md] [--pairs P.json]
       bench pairs ...      (see scripts/bench-pairs.sh)
       bench town N TICKS   (the suites' town as a scenario, on stdout)

suites: {}
        (default: {}; p4, pgtown and scaleout need DATABASE_URL)
",
        SUITES.join(" "),
        SUITES[..DEFAULT_SUITES].join(" ")
    )
}

/// The first this many of [`SUITES`] run when none is named.
const DEFAULT_SUITES: usize = 7;

/// Every suite `bench` runs, by the name it is asked for.
const SUITES: [&str; 12] = [
    "bandwidth",
    "recall",
    "p1",
    "p2",
    "p3",
    "rss",
    "mesa",
    "p4",
    "p10k",
    "p100k",
    "pgtown",
    "scaleout",
];

/// What a run of the suites was asked for.
#[derive(Debug, PartialEq)]
struct Cli {
    hearsay: PathBuf,
    out: PathBuf,
    quick: bool,
    /// In the order asked, the defaults when none was named; `recall` brings
    /// `bandwidth` before it (its figure is a share of it).
    suites: Vec<String>,
}

impl Cli {
    /// Reads the arguments, refusing what it does not know before any suite runs: a
    /// mistyped suite used to be found only when its turn came, after the suites before
    /// it had run for minutes, and a mistyped flag was not found at all.
    fn parse(args: &[String]) -> Result<Self, String> {
        let (mut hearsay, mut out, mut quick) = (None, None, false);
        let mut suites: Vec<String> = Vec::new();
        let mut args = args.iter();
        while let Some(a) = args.next() {
            match a.as_str() {
                "--hearsay" | "--out" => {
                    let value = args
                        .next()
                        .ok_or_else(|| format!("{a} needs a path after it"))?;
                    let slot = if a == "--hearsay" {
                        &mut hearsay
                    } else {
                        &mut out
                    };
                    *slot = Some(PathBuf::from(value));
                }
                "--quick" => quick = true,
                flag if flag.starts_with('-') => return Err(format!("unknown flag {flag:?}")),
                suite if SUITES.contains(&suite) => suites.push(suite.to_owned()),
                other => {
                    return Err(format!(
                        "unknown suite {other:?} (the suites: {})",
                        SUITES.join(", ")
                    ));
                }
            }
        }
        if suites.is_empty() {
            suites = SUITES[..DEFAULT_SUITES]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
        }
        // The recall scan's figure is a share of one thread's bandwidth: measured in the
        // same run, never taken from an earlier one (this shared machine's bandwidth has
        // read 19 GB/s one day and 36 another, and a scan "126 % of bandwidth" was the
        // result).
        if let Some(at) = suites.iter().position(|s| s == "recall")
            && !suites.iter().any(|s| s == "bandwidth")
        {
            suites.insert(at, "bandwidth".to_owned());
        }
        Ok(Self {
            hearsay: hearsay
                .unwrap_or_else(|| hearsay_tests::root().join("target/release/hearsay")),
            out: out.unwrap_or_else(|| hearsay_tests::root().join("target/bench/results.json")),
            quick,
            suites,
        })
    }
}

fn say(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

/// A town of `n` NPCs at the density and shape of the 200-NPC town (64 × 40), one of
/// them knowing a rumour; `places` adds the town's six places.
pub fn town(name: &str, n: usize, ticks: u64, places: bool, extra: &str) -> String {
    let area = n as f64 * 64.0 * 40.0 / 200.0;
    let width = ((area * 1.6).sqrt().round() as u32).max(8);
    let height = ((area / f64::from(width)).round() as u32).max(8);
    let mut s = format!(
        "name = \"{name}\"\nseed = 1\nticks = {ticks}\n\n[world]\nwidth = {width}\nheight = {height}\nhearing_radius = 3\nsight_radius = 6\n\n"
    );
    if places {
        for (p, fx, fy) in [
            ("square", 0.5, 0.5),
            ("tavern", 0.19, 0.25),
            ("market", 0.78, 0.3),
            ("docks", 0.87, 0.85),
            ("temple", 0.31, 0.8),
            ("mill", 0.09, 0.55),
        ] {
            let x = (f64::from(width) * fx) as u32;
            let y = (f64::from(height) * fy) as u32;
            s.push_str(&format!("[[places]]\nname = \"{p}\"\nat = [{x}, {y}]\n\n"));
        }
    }
    // A fixed LCG, so the town is the same on every machine.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |m: u32| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        ((state >> 33) % u64::from(m)) as u32
    };
    for i in 0..n {
        let (x, y) = (next(width), next(height));
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\npersona = \"Townsperson {i}.\"\nat = [{x}, {y}]\n"
        ));
        if i == 0 {
            s.push_str(
                "memories = [{ content = \"The mayor is going to resign before winter.\", importance = 8 }]\n",
            );
        }
        s.push('\n');
    }
    s.push_str("[[facts]]\nname = \"mayor\"\nmatch = [\"resign\"]\n\n");
    s.push_str(extra);
    s
}

struct Bench {
    hearsay: PathBuf,
    work: tempfile::TempDir,
    quick: bool,
}

impl Bench {
    /// Runs `hearsay run` on `scenario` (text); its summary.json.
    fn run(&self, name: &str, scenario: &str, extra: &[&str]) -> Value {
        let file = self.work.path().join(format!("{name}.toml"));
        std::fs::write(&file, scenario).expect("write scenario");
        let out = self.work.path().join(name);
        let mut cmd = Command::new(&self.hearsay);
        cmd.arg("run")
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .arg("--force")
            .arg("--no-progress")
            .args(extra)
            .env_remove("RUST_LOG");
        let started = Instant::now();
        let output = cmd.output().expect("hearsay runs");
        let process = started.elapsed();
        assert!(
            matches!(output.status.code(), Some(0 | 3)),
            "hearsay run {name} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("summary.json")).expect("summary.json"),
        )
        .expect("summary is JSON");
        let mut summary = summary;
        summary["finish_s"] = json!(finish_s(process, &summary));
        summary["run_dir_bytes"] = run_dir_bytes(&out);
        summary["run_dir_bytes"]["store_tables"] = store_tables(&out.join("memories.db"));
        // The stores of big runs are gigabytes: keep the disk free.
        let _ = std::fs::remove_dir_all(&out);
        summary
    }

    /// Mesa's time per tick for the gossip model at `n` NPCs × `ticks`.
    fn mesa(&self, n: usize, ticks: u64) -> Value {
        let out = Command::new("python3")
            .arg(hearsay_tests::root().join("scripts/bench-mesa.py"))
            .args(["--npcs", &n.to_string(), "--ticks", &ticks.to_string()])
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "bench-mesa failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(
            out.stdout
                .split(|c| *c == b'\n')
                .rfind(|l| !l.is_empty())
                .unwrap_or_default(),
        )
        .expect("bench-mesa prints JSON")
    }
}

/// Every file of a run directory and its size (bytes), and their total; SQLite's
/// write-ahead files are counted with the store.
fn run_dir_bytes(dir: &std::path::Path) -> Value {
    let mut files = serde_json::Map::new();
    let mut total = 0u64;
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let len = e.metadata().map_or(0, |m| m.len());
            total += len;
            files.insert(e.file_name().to_string_lossy().into_owned(), json!(len));
        }
    }
    // The logs' text, decoded by zstd itself: what their compressed sizes hold (the
    // evidence beside the bytes per NPC-tick), its lines, and the ticks the event log
    // closes.
    let mut logs = serde_json::Map::new();
    for name in ["events.jsonl", "llm.jsonl"] {
        if let Ok(text) = hearsay_tests::log_bytes(dir.join(name)) {
            let ticks = text
                .split(|&b| b == b'\n')
                .filter(|l| l.starts_with(br#"{"type":"tick","#))
                .count();
            let lines = text.iter().filter(|&&b| b == b'\n').count();
            logs.insert(
                name.into(),
                json!({ "text_bytes": text.len(), "tick_lines": ticks, "lines": lines }),
            );
        }
    }
    json!({ "files": files, "total": total, "logs": logs })
}

/// The size of a run's log file in `files` (`run_dir_bytes`): `events.jsonl.zst`, or the
/// plain `events.jsonl` of the runs measured before the logs were compressed.
fn log_file<'a>(files: &'a Value, name: &str) -> &'a Value {
    match &files[format!("{name}.zst")] {
        Value::Null => &files[name],
        zst => zst,
    }
}

/// The pages each table and index of a SQLite store takes, in bytes (SQLite's `dbstat`),
/// so the table can split `memories.db` into what it holds; empty without a store.
fn store_tables(db: &std::path::Path) -> Value {
    if !db.is_file() {
        return json!({});
    }
    let rows: Vec<(String, i64)> = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(db)
                .read_only(true);
            let pool = sqlx::SqlitePool::connect_with(options)
                .await
                .expect("open the store");
            let rows =
                sqlx::query_as("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY name")
                    .fetch_all(&pool)
                    .await
                    .expect("dbstat");
            pool.close().await;
            rows
        });
    Value::Object(rows.into_iter().map(|(n, b)| (n, json!(b))).collect())
}

/// The commit the harness measures: that of the repository (or worktree) the measured
/// binary was built in — the nearest directory above it with a `.git` — as `git
/// rev-parse HEAD`, and whether tracked files there differ from it (a figure of a dirty
/// tree is not a figure of that commit). Markdown and `docs/bench` do not count: they
/// are what the harness itself writes between suites, and no build reads them.
fn commit(binary: &std::path::Path) -> Value {
    let binary = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.to_path_buf());
    let Some(repo) = binary.ancestors().find(|d| d.join(".git").exists()) else {
        return json!({ "sha": null, "dirty": null, "binary": binary.display().to_string() });
    };
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(repo)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let sha = git(&["rev-parse", "HEAD"]);
    let dirty = git(&[
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--",
        ".",
        ":(exclude)*.md",
        ":(exclude)docs/bench",
    ])
    .map(|s| !s.is_empty());
    json!({ "sha": sha, "dirty": dirty, "binary": binary.display().to_string() })
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// Seconds from the end of what a run's `summary.json` times (`timing.wall_ms`: setup,
/// ticks, drain) to the process's exit, `process` its whole wall clock as the harness
/// timed it: the story read back from the event log, `summary.json` and `report.html`
/// written, the process gone. What a user waits for after the last tick.
fn finish_s(process: std::time::Duration, summary: &Value) -> f64 {
    process.as_secs_f64() - f(&summary["timing"]["wall_ms"]) / 1000.0
}

/// A run's time per phase (`timing.phases_ms`), per tick of its `ticks`.
fn per_tick(summary: &Value, ticks: u64) -> BTreeMap<String, f64> {
    summary["timing"]["phases_ms"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), f(v) / ticks as f64))
                .collect()
        })
        .unwrap_or_default()
}

fn tick_ms(summary: &Value) -> f64 {
    1000.0 / f(&summary["timing"]["ticks_per_second"]).max(1e-9)
}

/// GB/s reading `bytes` of f32 with the 8-lane sum, best of 3, on `threads` threads.
fn bandwidth(threads: usize) -> f64 {
    let floats = (1usize << 30) / 4;
    let data: Vec<f32> = (0..floats).map(|i| (i % 17) as f32 * 0.001).collect();
    let per = floats / threads;
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let started = Instant::now();
        let sums: Vec<f32> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let part = &data[t * per..(t + 1) * per];
                    s.spawn(move || {
                        let mut acc = [0.0f32; 8];
                        for c in part.chunks_exact(8) {
                            for i in 0..8 {
                                acc[i] += c[i];
                            }
                        }
                        acc.iter().sum::<f32>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0.0))
                .collect()
        });
        let secs = started.elapsed().as_secs_f64();
        std::hint::black_box(sums);
        best = best.min(secs);
    }
    (floats * 4) as f64 / best / 1e9
}

fn suite_bandwidth() -> Value {
    let one = bandwidth(1);
    let two = bandwidth(2);
    say(&format!(
        "bandwidth   memory read, 1 GiB of f32: {one:.1} GB/s on one thread, {two:.1} GB/s on two"
    ));
    json!({ "one_thread_gb_s": one, "two_threads_gb_s": two })
}

/// Recall's scan on its own, through the store's index: 200 NPCs × 500 memories of
/// dense vectors (as a real embedder's), then of sparse ones (as the hashing embedder's);
/// every NPC recalls once per round; GB/s of vector bytes read per second of search.
fn suite_recall(bandwidth_gb_s: Option<f64>) -> Value {
    use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId};
    use hearsay_memory::index::VectorIndex;
    use hearsay_memory::{HashingEmbedder, Scoring, VECTOR_DIMS};
    let (npcs, per) = (200u32, 500u64);
    let mut state: u64 = 11;
    let mut rand = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (state >> 33) as u32
    };
    let words = [
        "fish", "market", "mayor", "resign", "winter", "bread", "mill", "river", "boat", "night",
    ];
    let mut run = |dense: bool| {
        let mut index = VectorIndex::default();
        let embedder = HashingEmbedder;
        let mut id = 0u64;
        for npc in 0..npcs {
            for _ in 0..per {
                id += 1;
                let text: Vec<&str> = (0..8)
                    .map(|_| words[rand() as usize % words.len()])
                    .collect();
                let text = format!("{} {}", text.join(" "), id);
                index.add_meta(&MemoryRecord {
                    id: MemoryId(id),
                    npc: NpcId(npc),
                    kind: MemoryKind::Conversation,
                    content: text.as_str().into(),
                    importance: 8,
                    tick: id % 300,
                    source: None,
                    core: false,
                    evidence: Vec::new(),
                    place: Default::default(),
                });
                let mut v = embedder.embed_one(&text);
                if dense {
                    // Spread over every dimension, as a real model's vectors are.
                    for (i, x) in v.iter_mut().enumerate() {
                        *x += ((i as u32 ^ rand()) % 1000) as f32 * 1e-5;
                    }
                    hearsay_memory::embed::normalise(&mut v);
                }
                index.add_vector(MemoryId(id), &v);
            }
        }
        let query = embedder.embed_one("is the mayor going to resign before winter");
        // What one pass of searches reads, as the search itself counts it.
        let bytes: usize = (0..npcs)
            .map(|n| {
                index
                    .search_counted(NpcId(n), &query, 300, 5, &Scoring::default())
                    .1
            })
            .sum();
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let started = Instant::now();
            for n in 0..npcs {
                std::hint::black_box(index.search(NpcId(n), &query, 300, 5, &Scoring::default()));
            }
            best = best.min(started.elapsed().as_secs_f64());
        }
        (
            bytes as f64 / best / 1e9,
            best * 1e6 / f64::from(npcs),
            bytes,
        )
    };
    let (dense_gb_s, dense_us, dense_bytes) = run(true);
    let (sparse_gb_s, sparse_us, sparse_bytes) = run(false);
    let share = bandwidth_gb_s.map(|bw| dense_gb_s / bw);
    say(&format!(
        "recall      {npcs} NPCs x {per} memories: dense {dense_us:.0} us per recall, {dense_gb_s:.1} GB/s{}; sparse {sparse_us:.0} us, {:.0}x fewer bytes",
        share.map_or(String::new(), |s| format!(
            " = {:.0} % of one thread's bandwidth (goal >= 50 %)",
            s * 100.0
        )),
        dense_bytes as f64 / sparse_bytes.max(1) as f64,
    ));
    let _ = VECTOR_DIMS;
    json!({ "npcs": npcs, "memories_per_npc": per,
            "dense_gb_s": dense_gb_s, "dense_us_per_recall": dense_us, "dense_bandwidth_share": share,
            "sparse_gb_s": sparse_gb_s, "sparse_us_per_recall": sparse_us,
            "dense_bytes": dense_bytes, "sparse_bytes": sparse_bytes })
}

fn suite_p1(b: &Bench) -> Value {
    let (n, c, latency_ms) = (256usize, 32usize, 200u64);
    let ticks = if b.quick { 3 } else { 5 };
    let mock = MockServer::start(move |_| {
        Reply::slow(
            r#"{"action": "stay", "speech": "", "x": 0, "y": 0}"#,
            latency_ms,
        )
    });
    let brain = format!(
        "[brain]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock\"\nmax_concurrency = {c}\ntimeout_ms = 30000\nthink = \"every_tick\"\n\n[memory.reflect]\nthreshold = 0\n",
        mock.url
    );
    let s = b.run("p1", &town("p1", n, ticks, true, &brain), &[]);
    let floor_ms = (n.div_ceil(c) as u64 * latency_ms) as f64;
    let tick = f(&s["timing"]["phases_ms"]["think"]) / ticks as f64;
    let whole = tick_ms(&s);
    let ratio = whole / floor_ms;
    say(&format!(
        "p1          {n} NPCs, max_concurrency {c}, {latency_ms} ms per answer: mean tick {whole:.0} ms (think {tick:.0} ms) against a floor of {floor_ms:.0} ms: ratio {ratio:.3} (goal <= 1.10)"
    ));
    json!({ "npcs": n, "max_concurrency": c, "latency_ms": latency_ms, "ticks": ticks,
            "tick_ms": whole, "think_ms": tick, "floor_ms": floor_ms, "ratio": ratio })
}

/// P2, backfill isolation where recall happens: an LLM-bound run (the mock at 1,000 ms
/// per decision, 256 NPCs, `max_concurrency` 32) under `eventual` visibility, once with
/// an instant embedder and once with a 500 ms one. Each tick ÷ ceil(N/C)·L (goal ≤ 1.05
/// for both), and how fresh the query each recall used was: the share from this tick's or
/// the previous tick's observation (goal ≥ 95 %), with the bytes recall read as evidence
/// that it recalled at all.
fn suite_p2(b: &Bench) -> Value {
    let (n, c, latency_ms) = (256usize, 32usize, 1000u64);
    let ticks = if b.quick { 3 } else { 6 };
    let floor_ms = (n.div_ceil(c) as u64 * latency_ms) as f64;
    let run = |delay_ms: u64| {
        let mock = MockServer::start_with(
            MockOptions {
                embed_dims: 384,
                embed_delay_ms: delay_ms,
                ..MockOptions::default()
            },
            move |_| {
                Reply::slow(
                    r#"{"action": "talk", "speech": "Have you heard? The mayor is going to resign before winter.", "x": 0, "y": 0}"#,
                    latency_ms,
                )
            },
        );
        let extra = format!(
            "[brain]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock\"\nmax_concurrency = {c}\ntimeout_ms = 30000\nthink = \"every_tick\"\n\n[memory]\nvisibility = \"eventual\"\n\n[memory.embedder]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-embed\"\nbatch_size = 64\nmax_concurrency = 4\n\n[memory.reflect]\nthreshold = 0\n",
            url = mock.url
        );
        let s = b.run(
            &format!("p2-{delay_ms}"),
            &town("p2", n, ticks, true, &extra),
            &[],
        );
        let q = &s["timing"]["recall_queries"];
        let counted = ["this_tick", "previous_tick", "older", "none"]
            .iter()
            .map(|k| q[k].as_u64().unwrap_or(0))
            .sum::<u64>();
        let current =
            q["this_tick"].as_u64().unwrap_or(0) + q["previous_tick"].as_u64().unwrap_or(0);
        let share = current as f64 / counted.max(1) as f64;
        let tick = tick_ms(&s);
        json!({ "embed_delay_ms": delay_ms, "tick_ms": tick, "ratio": tick / floor_ms,
                "queries": q, "current_share": share,
                "recall_bytes_scanned": s["timing"]["recall_bytes_scanned"],
                "recalled_at_all": s["timing"]["recall_bytes_scanned"].as_u64().unwrap_or(0) > 0,
                "unembedded": s["memories"]["unembedded"], "memories": s["memories"]["total"] })
    };
    let instant = run(0);
    let slow = run(500);
    for r in [&instant, &slow] {
        say(&format!(
            "p2          eventual, {n} NPCs, C {c}, {latency_ms} ms per decision, {} ms embedder: tick {:.0} ms / floor {floor_ms:.0} ms = {:.3} (goal <= 1.05); recall queries from this or the previous tick {:.1} % (goal >= 95 %: {}); recall read {} bytes over {} memories; unembedded at the end {}",
            r["embed_delay_ms"],
            f(&r["tick_ms"]),
            f(&r["ratio"]),
            f(&r["current_share"]) * 100.0,
            r["queries"],
            r["recall_bytes_scanned"],
            r["memories"],
            r["unembedded"],
        ));
    }
    let ratio = f(&instant["ratio"]).max(f(&slow["ratio"]));
    let share = f(&instant["current_share"]).min(f(&slow["current_share"]));
    json!({ "npcs": n, "max_concurrency": c, "latency_ms": latency_ms, "ticks": ticks,
            "floor_ms": floor_ms, "instant": instant, "slow": slow,
            "ratio": ratio, "slow_ratio": slow["ratio"], "instant_ratio": instant["ratio"],
            "current_share": share, "slow_unembedded": slow["unembedded"] })
}

fn suite_p3(b: &Bench) -> Value {
    let (n, ticks) = (1000, if b.quick { 100 } else { 500 });
    // Rounds by turns, hearsay then Mesa, each ratio the median of the rounds' own: a
    // checkpoint's first tenth is about a millisecond per tick, and on this shared
    // machine one run's ratio crossed its goal between two runs of the same engine
    // (docs/BENCHMARKS.md, the twenty-first round). The run directory, phases and
    // memories are the median run's (by ticks/s).
    let rounds = if b.quick { 1 } else { 3 };
    // The machine's speed that day, beside the figures (see `suite_big`), and what the
    // recall's throughput is a share of.
    let machine_gb_s = bandwidth(1);
    let mut runs = Vec::with_capacity(rounds);
    let mut mesa = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        runs.push(b.run("p3", &town("p3", n, ticks, true, ""), &[]));
        // Goal 1: the same gossip model in Mesa, at the same size and length.
        mesa.push(f(&b.mesa(n, ticks)["ms_per_tick"]));
    }
    let median = |v: Vec<f64>| pairs::median(v).unwrap_or(f64::NAN);
    let tps: Vec<f64> = runs
        .iter()
        .map(|r| f(&r["timing"]["ticks_per_second"]))
        .collect();
    let middle = tps
        .iter()
        .position(|&x| x == median(tps.clone()))
        .unwrap_or(0);
    let s = &runs[middle];
    let t = &s["timing"];
    let phases = per_tick(s, ticks);
    let gb_s = f(&t["recall_gb_per_s"]);
    let share = gb_s / machine_gb_s;
    say(&format!(
        "p3          {n} NPCs x {ticks} ticks, the median of {rounds} runs: {:.2} ticks/s (runs: {}), {} memories (one thread's memory bandwidth before the runs {machine_gb_s:.1} GB/s); per tick (ms): {}; recall {:.0} us per NPC, {gb_s:.1} GB/s = {:.0} % of one thread's memory bandwidth (sparse vectors: few bytes to read; the dense scan is the `recall` suite)",
        f(&t["ticks_per_second"]),
        tps.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        s["memories"]["total"],
        phases
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        f(&t["recall_us_per_npc"]),
        share * 100.0
    ));
    let ratios: Vec<f64> = runs
        .iter()
        .zip(&mesa)
        .map(|(r, m)| tick_ms(r) / m)
        .collect();
    let ours = median(runs.iter().map(tick_ms).collect());
    let theirs = median(mesa.clone());
    let ratio = median(ratios.clone());
    say(&format!(
        "p3          hearsay {ours:.1} ms per tick, Mesa {theirs:.2} ms at {n} NPCs x {ticks} ticks (medians): hearsay/Mesa {ratio:.2}, the median of the rounds' {} (goal <= 1.0)",
        ratios
            .iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    // Goal 4: the run directory per NPC-tick, and checkpoints that do not grow.
    let bytes = f(&s["run_dir_bytes"]["total"]);
    let per_npc_tick = bytes / (n as f64 * ticks as f64);
    let cp = &t["checkpoints"];
    // The last tenth's cost per tick against an earlier tenth's: 1 when flat; the median
    // of the rounds'.
    let rounds_growth = |from: &str, key: &str| -> Vec<f64> {
        runs.iter()
            .map(|r| {
                let cp = &r["timing"]["checkpoints"];
                f(&cp["last_tenth"][key]) / f(&cp[from][key]).max(1e-9)
            })
            .collect()
    };
    let growth = |from: &str, key: &str| median(rounds_growth(from, key));
    say(&waiting_line("p3", s));
    say(&format!(
        "p3          run directory {:.0} MB = {per_npc_tick:.0} bytes per NPC-tick (goal <= 300): {}; the logs' text {}; checkpoints {} written, {:.0} MB; per tick {:.2} ms and {:.0} bytes in the first tenth, {:.2} ms and {:.0} bytes in the last (the median run); the rounds' ratios {} and their median x{:.2} (goal: flat)",
        bytes / 1e6,
        s["run_dir_bytes"]["files"],
        s["run_dir_bytes"]["logs"],
        cp["written"],
        f(&cp["bytes"]) / 1e6,
        f(&cp["first_tenth"]["ms_per_tick"]),
        f(&cp["first_tenth"]["bytes_per_tick"]),
        f(&cp["last_tenth"]["ms_per_tick"]),
        f(&cp["last_tenth"]["bytes_per_tick"]),
        rounds_growth("first_tenth", "ms_per_tick")
            .iter()
            .map(|x| format!("x{x:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        growth("first_tenth", "ms_per_tick")
    ));
    // The same encoding in the tick thread's CPU time: the work alone, without the waits
    // for a core that a wall clock on two busy cores counts.
    say(&format!(
        "p3          checkpoints in CPU time: {:.2} ms per tick in the first tenth, {:.2} in the last (the median run); the rounds' median ratio x{:.2}, bytes x{:.2}",
        f(&cp["first_tenth"]["cpu_ms_per_tick"]),
        f(&cp["last_tenth"]["cpu_ms_per_tick"]),
        growth("first_tenth", "cpu_ms_per_tick"),
        growth("first_tenth", "bytes_per_tick")
    ));
    // The first tenth holds the town's filling (windows and evidence start empty, so
    // deltas are smaller): growth with the run's length is the last tenth against the
    // second.
    say(&format!(
        "p3          checkpoints after the filling: {:.2} ms ({:.2} CPU) and {:.0} bytes per tick in the second tenth; last / second x{:.2} wall, x{:.2} CPU, bytes x{:.2}",
        f(&cp["second_tenth"]["ms_per_tick"]),
        f(&cp["second_tenth"]["cpu_ms_per_tick"]),
        f(&cp["second_tenth"]["bytes_per_tick"]),
        growth("second_tenth", "ms_per_tick"),
        growth("second_tenth", "cpu_ms_per_tick"),
        growth("second_tenth", "bytes_per_tick"),
    ));
    json!({ "npcs": n, "ticks": ticks, "ticks_per_second": t["ticks_per_second"],
            "ms_per_tick": ours, "mesa_ms_per_tick": theirs, "mesa_ratio": ratio,
            "rounds": rounds, "rounds_ticks_per_second": tps, "rounds_mesa_ratio": ratios,
            "rounds_checkpoint_growth": rounds_growth("first_tenth", "ms_per_tick"),
            "rounds_checkpoint_cpu_growth": rounds_growth("first_tenth", "cpu_ms_per_tick"),
            "phases_ms_per_tick": phases, "recall_us_per_npc": t["recall_us_per_npc"],
            "recall_gb_per_s": gb_s, "bandwidth_share": share,
            "run_dir": s["run_dir_bytes"], "bytes_per_npc_tick": per_npc_tick,
            "checkpoints": cp, "checkpoint_growth": growth("first_tenth", "ms_per_tick"),
            "checkpoint_cpu_growth": growth("first_tenth", "cpu_ms_per_tick"),
            "checkpoint_bytes_growth": growth("first_tenth", "bytes_per_tick"),
            "checkpoint_steady_growth": growth("second_tenth", "ms_per_tick"),
            "checkpoint_steady_cpu_growth": growth("second_tenth", "cpu_ms_per_tick"),
            "checkpoint_steady_bytes_growth": growth("second_tenth", "bytes_per_tick"),
            "memories": s["memories"], "peak_rss_mib": t["peak_rss_mib"], "wall_ms": t["wall_ms"],
            "tick_thread_waiting_ms_per_tick": t["tick_thread_waiting_ms_per_tick"],
            "bandwidth_one_thread_gb_s": machine_gb_s })
}

/// The line that says how long a run's tick thread, ready to run, waited for a core (its
/// summary's `tick_thread_waiting_ms_per_tick`), beside the tick it was part of.
fn waiting_line(name: &str, summary: &Value) -> String {
    let t = &summary["timing"];
    let tick_ms = tick_ms(summary);
    match t["tick_thread_waiting_ms_per_tick"].as_f64() {
        Some(waiting) => format!(
            "{name:<11} the tick thread waited for a core {waiting:.2} ms of each {tick_ms:.1} ms tick ({:.0} %), the median run (Linux's schedstat: ready to run, every core taken)",
            100.0 * waiting / tick_ms.max(1e-9)
        ),
        None => format!("{name:<11} the tick thread's wait for a core: not known (no schedstat)"),
    }
}

/// A big town, heuristic brain, hashing embedder, SQLite: ticks/s, phases, peak RSS.
/// `p10k` is 10,000 NPCs × 200 ticks (goal ≥ 10 ticks/s), `p100k` 100,000 × 20 (goal:
/// completes within 16 GiB).
///
/// `rounds` runs of the same town: ticks/s is their median, and the phases, RSS and run
/// directory are the median run's. One run of the same engine gave 6.62 ticks/s and
/// the next 7.10 (docs/BENCHMARKS.md, the twenty-first round).
fn suite_big(b: &Bench, name: &str, n: usize, ticks: u64, rounds: usize) -> Value {
    let started = Instant::now();
    let mut scenario = town(name, n, ticks, true, "");
    if n > 20_000 {
        // A scenario may not promise more than 2,000,000 memories in one tick: at the
        // town's density (about two NPCs within earshot) ten listeners per talk is
        // more than any talk reaches.
        scenario = scenario.replacen(
            "sight_radius = 6\n",
            "sight_radius = 6\nmax_listeners = 10\n",
            1,
        );
    }
    // This shared machine's speed moves from day to day (its memory bandwidth has read
    // 14 GB/s one day and 36 another): measured beside the figure, so that two runs'
    // ticks/s can be told apart from two days' machines.
    let machine_gb_s = bandwidth(1);
    let runs: Vec<Value> = (0..rounds.max(1))
        .map(|_| b.run(name, &scenario, &[]))
        .collect();
    let tps: Vec<f64> = runs
        .iter()
        .map(|r| f(&r["timing"]["ticks_per_second"]))
        .collect();
    let middle = pairs::median(tps.clone())
        .and_then(|m| tps.iter().position(|&x| x == m))
        .unwrap_or(0);
    let s = &runs[middle];
    let t = &s["timing"];
    let phases = per_tick(s, ticks);
    let bytes = f(&s["run_dir_bytes"]["total"]);
    say(&format!(
        "{name:<11} {n} NPCs x {ticks} ticks, the median of {} runs: {:.2} ticks/s (runs: {}), {} memories, peak RSS {:.0} MiB, after the last tick {:.2} s to exit ({} lines of events.jsonl read back, report.html {} bytes), run directory {:.0} bytes per NPC-tick; per tick (ms): {}; one thread's memory bandwidth before the runs {machine_gb_s:.1} GB/s; {:.0} s in all",
        runs.len(),
        f(&t["ticks_per_second"]),
        tps.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        s["memories"]["total"],
        f(&t["peak_rss_mib"]),
        f(&s["finish_s"]),
        s["run_dir_bytes"]["logs"]["events.jsonl"]["lines"],
        s["run_dir_bytes"]["files"]["report.html"],
        bytes / (n as f64 * ticks as f64),
        phases
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64()
    ));
    // How many cores each phase kept busy: the process's CPU time in it over its wall
    // clock (every thread's; 2 is both cores of this machine).
    let cores_busy: BTreeMap<String, f64> = t["phases_cpu_ms"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, cpu)| (k.clone(), f(cpu) / f(&t["phases_ms"][k]).max(1e-9)))
                .collect()
        })
        .unwrap_or_default();
    say(&format!(
        "{name:<11} cores busy per phase: {}",
        cores_busy
            .iter()
            .map(|(k, v)| format!("{k} {v:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    say(&waiting_line(name, s));
    json!({ "npcs": n, "ticks": ticks, "ticks_per_second": t["ticks_per_second"],
            "rounds": runs.len(), "rounds_ticks_per_second": tps,
            "phases_ms_per_tick": phases, "cores_busy": cores_busy, "peak_rss_mib": t["peak_rss_mib"],
            "tick_thread_waiting_ms_per_tick": t["tick_thread_waiting_ms_per_tick"],
            "memories": s["memories"], "run_dir": s["run_dir_bytes"],
            "bytes_per_npc_tick": bytes / (n as f64 * ticks as f64),
            "bandwidth_one_thread_gb_s": machine_gb_s, "finish_s": s["finish_s"],
            "wall_s": started.elapsed().as_secs_f64() })
}

/// Goal 6: `rumour-200` × 100 ticks on PostgreSQL (DATABASE_URL) against SQLite — the
/// same events, byte for byte, at what tick time.
fn suite_pgtown(b: &Bench) -> Value {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        panic!("pgtown needs DATABASE_URL (scripts/bench.sh starts a throwaway cluster)");
    };
    let ticks = if b.quick { 30 } else { 100 };
    let scenario = std::fs::read_to_string(hearsay_tests::root().join("scenarios/rumour-200.toml"))
        .expect("rumour-200.toml");
    let ticks_arg = ticks.to_string();
    let sqlite = b.run("pgtown-sqlite", &scenario, &["--ticks", &ticks_arg]);
    let pg = b.run(
        "pgtown-pg",
        &scenario,
        &[
            "--ticks",
            &ticks_arg,
            "--set",
            "memory.store=\"postgres\"",
            "--database-url",
            &url,
        ],
    );
    let (lite_ms, pg_ms) = (tick_ms(&sqlite), tick_ms(&pg));
    let same = sqlite["run_dir_bytes"]["logs"]["events.jsonl"]["text_bytes"]
        == pg["run_dir_bytes"]["logs"]["events.jsonl"]["text_bytes"];
    say(&format!(
        "pgtown      rumour-200 x {ticks} ticks: SQLite {lite_ms:.1} ms per tick, PostgreSQL {pg_ms:.1}: x{:.2} (goal <= 2); PostgreSQL per tick {:?}; SQLite {:?}; the event logs' text of the same size: {same}",
        pg_ms / lite_ms,
        per_tick(&pg, ticks),
        per_tick(&sqlite, ticks)
    ));
    json!({ "ticks": ticks, "sqlite_tick_ms": lite_ms, "pg_tick_ms": pg_ms, "ratio": pg_ms / lite_ms,
            "pg_phases_ms_per_tick": per_tick(&pg, ticks), "sqlite_phases_ms_per_tick": per_tick(&sqlite, ticks),
            "events_same_size": same })
}

/// The server's time executing statements in the current database (`pg_stat_database.
/// active_time`, ms; PostgreSQL 14+), and memories written so far in every run.
fn pg_busy(url: &str) -> (f64, i64) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let pool = sqlx::PgPool::connect(url).await.expect("connect");
            // The statistics are sent by each backend when it goes idle; make ours current.
            let _ = sqlx::query("SELECT pg_stat_force_next_flush()")
                .execute(&pool)
                .await;
            let active: f64 = sqlx::query_scalar(
                "SELECT active_time FROM pg_stat_database WHERE datname = current_database()",
            )
            .fetch_one(&pool)
            .await
            .expect("active_time");
            // No table yet in a fresh database: nothing written.
            let memories: i64 = sqlx::query_scalar("SELECT count(*) FROM memories")
                .fetch_one(&pool)
                .await
                .unwrap_or(0);
            pool.close().await;
            (active, memories)
        })
}

/// Memories per second one PostgreSQL takes through the store's own tick write
/// (`PgStore::write_tick`, one transaction per tick), with `writers` runs writing at once:
/// towns of 200 NPCs writing `per_npc_tick` memories per NPC-tick (text only, as a tick
/// writes them; the backfill is not running).
fn insert_rate(url: &str, writers: usize, ticks: u64, per_npc_tick: u64) -> f64 {
    use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId};
    use hearsay_memory::{PgOptions, PgStore, Store, TickWrite};
    let npcs = 200u64;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let options = PgOptions {
                max_connections: 2,
                ..PgOptions::default()
            };
            let mut stores = Vec::new();
            for w in 0..writers {
                let pool = hearsay_memory::postgres::connect(url, &options)
                    .await
                    .expect("connect");
                let names: Vec<String> = (0..npcs).map(|i| format!("npc{i}")).collect();
                stores.push(
                    PgStore::create_run(pool, options.clone(), "bench-insert", w as u64, "", names)
                        .await
                        .expect("run"),
                );
            }
            let started = Instant::now();
            let per_tick = npcs * per_npc_tick;
            let writes = stores.iter().map(|store| async move {
                for tick in 0..ticks {
                    let first = tick * per_tick + 1;
                    let memories: Vec<MemoryRecord> = (0..per_tick)
                        .map(|i| MemoryRecord {
                            id: MemoryId(first + i),
                            npc: NpcId((i % npcs) as u32),
                            kind: MemoryKind::Conversation,
                            content: format!(
                                "npc{} said: the mill is on fire, word {}",
                                i % npcs,
                                first + i
                            )
                            .into(),
                            importance: 8,
                            tick,
                            source: Some(NpcId(((i + 1) % npcs) as u32)),
                            core: false,
                            evidence: Vec::new(),
                            place: Default::default(),
                        })
                        .collect();
                    store
                        .write_tick(TickWrite {
                            tick,
                            memories,
                            ..Default::default()
                        })
                        .await
                        .expect("write");
                }
            });
            futures_util::future::join_all(writes).await;
            let secs = started.elapsed().as_secs_f64();
            for store in &stores {
                store.close().await;
            }
            (writers as u64 * ticks * per_tick) as f64 / secs
        })
}

/// Sweep throughput against one PostgreSQL with one shard process (two runs at once)
/// and with two shard processes (one run at once each), the database's share of the
/// time, and from it where one server saturates.
fn suite_scaleout(b: &Bench) -> Value {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        panic!("scaleout needs DATABASE_URL (scripts/bench.sh starts a throwaway cluster)");
    };
    let (ticks, seeds) = if b.quick { (10, 4) } else { (30, 8) };
    let scenario = std::fs::read_to_string(hearsay_tests::root().join("scenarios/rumour-200.toml"))
        .expect("rumour-200.toml");
    let file = b.work.path().join("scaleout.toml");
    std::fs::write(&file, &scenario).expect("write scenario");
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let seeds_arg = format!("1..{seeds}");
    let ticks_arg = ticks.to_string();
    let sweep = |name: &str, shard: Option<&str>, jobs: &str| {
        let out = b.work.path().join(name);
        let mut cmd = Command::new(&b.hearsay);
        cmd.arg("sweep")
            .arg(&file)
            .args(["--seeds", &seeds_arg, "--ticks", &ticks_arg, "--jobs", jobs])
            .args(["--set", "memory.store=\"postgres\""])
            .args([
                "--database-url",
                &url,
                "--no-progress",
                "--force",
                "--sweep",
            ])
            .arg(format!(
                "bench-{stamp}-{}",
                name.split('-').next().unwrap_or(name)
            ))
            .arg("--out")
            .arg(&out)
            .env_remove("RUST_LOG");
        if let Some(s) = shard {
            cmd.args(["--shard", s]);
        }
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("hearsay sweep starts")
    };
    let finish = |child: std::process::Child, what: &str| {
        let out = child.wait_with_output().expect("hearsay sweep ends");
        assert!(
            out.status.success(),
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let mut configs = Vec::new();
    let mut tables = Vec::new();
    for (label, shards) in [("one", 1usize), ("two", 2usize)] {
        let (busy0, mem0) = pg_busy(&url);
        let started = Instant::now();
        let children: Vec<_> = if shards == 1 {
            vec![sweep("one", None, "2")]
        } else {
            (1..=2)
                .map(|i| sweep(&format!("two-{i}"), Some(&format!("{i}/2")), "1"))
                .collect()
        };
        let outputs: Vec<Vec<u8>> = children.into_iter().map(|c| finish(c, label)).collect();
        let wall_s = started.elapsed().as_secs_f64();
        let (busy1, mem1) = pg_busy(&url);
        // Every run's own wall time, from the shards' shards.json.
        let dirs: Vec<PathBuf> = if shards == 1 {
            vec![b.work.path().join("one")]
        } else {
            (1..=2)
                .map(|i| b.work.path().join(format!("two-{i}")))
                .collect()
        };
        let run_ms: f64 = dirs
            .iter()
            .map(|d| {
                let v: Value = serde_json::from_slice(
                    &std::fs::read(d.join("shards.json")).expect("shards.json"),
                )
                .expect("json");
                v["shards"][0]["runs"]
                    .as_array()
                    .map_or(0.0, |r| r.iter().map(|x| f(&x["wall_ms"])).sum())
            })
            .sum();
        if shards == 1 {
            tables.push(outputs[0].clone());
        }
        let busy_ms = busy1 - busy0;
        let memories = mem1 - mem0;
        assert!(memories > 0, "{label}: the runs wrote no memories");
        say(&format!(
            "scaleout    {label} shard process(es), rumour-200 x {ticks} ticks x {seeds} seeds on one PostgreSQL: {:.1} runs per minute ({wall_s:.1} s); the server busy {busy_ms:.0} ms of {run_ms:.0} ms of runs ({:.1} %); {memories} memories written ({:.0} per s)",
            seeds as f64 * 60.0 / wall_s,
            100.0 * busy_ms / run_ms.max(1.0),
            memories as f64 / wall_s
        ));
        configs.push(json!({ "shards": shards, "wall_s": wall_s, "runs_per_minute": seeds as f64 * 60.0 / wall_s,
                             "db_busy_ms": busy_ms, "run_ms": run_ms, "db_share": busy_ms / run_ms.max(1.0),
                             "memories": memories, "memories_per_s": memories as f64 / wall_s,
                             "db_ms_per_memory": busy_ms / memories as f64 }));
    }
    // The two shards, collected from the database, are the one-process sweep.
    let collected = b.work.path().join("collected");
    let out = Command::new(&b.hearsay)
        .args(["sweep", "--collect", "--database-url", &url, "--sweep"])
        .arg(format!("bench-{stamp}-two"))
        .arg("--out")
        .arg(&collected)
        .output()
        .expect("collect");
    assert!(
        out.status.success(),
        "collect failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let same = std::fs::read(collected.join("sweep.json")).ok()
        == std::fs::read(b.work.path().join("one/sweep.json")).ok()
        && out.stdout == tables[0];
    assert!(
        same,
        "the collected shards differ from the one-process sweep"
    );
    // Where one server saturates: a town of n NPCs writing w memories per NPC-tick at r
    // ticks per second asks n·w·r memories per second, each costing the server
    // db_ms_per_memory of statement time (writes, recalls and backfill included); one
    // server core is saturated at 1000 / db_ms_per_memory memories per second.
    let two = &configs[1];
    let per_memory = f(&two["db_ms_per_memory"]);
    let per_npc_tick = f(&two["memories"]) / (seeds as f64 * ticks as f64 * 200.0);
    let saturation = 1000.0 / per_memory.max(1e-9);
    say(&format!(
        "scaleout    the server spends {per_memory:.3} ms per memory written ({per_npc_tick:.2} memories per NPC-tick): one core of it saturates at {saturation:.0} memories/s, a town of {:.0} NPCs at 1 tick/s or {:.0} at 10; collected shards = the one-process sweep: {same}",
        saturation / per_npc_tick,
        saturation / per_npc_tick / 10.0
    ));
    // The insert rate the server gives the store's own tick write, alone: an upper bound
    // on the memories per second it can take, whatever else a run asks of it.
    let w = per_npc_tick.round().max(1.0) as u64;
    let insert_ticks = if b.quick { 20 } else { 100 };
    let insert_one = insert_rate(&url, 1, insert_ticks, w);
    let insert_two = insert_rate(&url, 2, insert_ticks, w);
    let insert_best = insert_one.max(insert_two);
    say(&format!(
        "scaleout    the tick write alone (200 NPCs x {w} memories per NPC-tick, {insert_ticks} ticks): {insert_one:.0} memories/s with one writer, {insert_two:.0} with two: even with nothing but inserts, a town of {:.0} NPCs at 1 tick/s ({:.0} at 10) fills it",
        insert_best / per_npc_tick,
        insert_best / per_npc_tick / 10.0
    ));
    json!({ "ticks": ticks, "seeds": seeds, "one": configs[0], "two": configs[1],
            "insert_per_s_one_writer": insert_one, "insert_per_s_two_writers": insert_two,
            "insert_bound_npcs_at_1_tick_per_s": insert_best / per_npc_tick,
            "speedup": f(&configs[1]["runs_per_minute"]) / f(&configs[0]["runs_per_minute"]).max(1e-9),
            "db_ms_per_memory": per_memory, "memories_per_npc_tick": per_npc_tick,
            "saturation_memories_per_s": saturation,
            "saturation_npcs_at_1_tick_per_s": saturation / per_npc_tick,
            "collected_equal": same })
}

fn suite_rss(b: &Bench) -> Value {
    let n = 1000;
    let (short, long) = if b.quick { (30, 90) } else { (100, 300) };
    let point = |ticks: u64| {
        let s = b.run(
            &format!("rss-{ticks}"),
            &town("rss", n, ticks, true, ""),
            &[],
        );
        (
            s["memories"]["total"].as_u64().unwrap_or(0) as f64,
            f(&s["timing"]["peak_rss_mib"]),
        )
    };
    let (m1, r1) = point(short);
    let (m2, r2) = point(long);
    let slope = (r2 - r1) / (m2 - m1).max(1.0) * 100_000.0;
    say(&format!(
        "rss         {n} NPCs: peak RSS {r1:.0} MiB at {m1:.0} memories, {r2:.0} MiB at {m2:.0}: {slope:.0} MiB per 100,000 memories (whole process {:.0} MiB per 100,000)",
        r2 / m2 * 100_000.0
    ));
    json!({ "points": [[m1, r1], [m2, r2]], "mib_per_100k": slope,
            "whole_mib_per_100k": r2 / m2 * 100_000.0 })
}

fn suite_mesa(b: &Bench) -> Value {
    let ticks = if b.quick { 50 } else { 100 };
    let mut rows = Vec::new();
    for n in [100usize, 1000] {
        let mesa = b.mesa(n, ticks);
        let s = b.run(
            &format!("peer-{n}"),
            &town("peer", n, ticks, false, ""),
            &[],
        );
        let ours = tick_ms(&s);
        let theirs = f(&mesa["ms_per_tick"]);
        say(&format!(
            "mesa        {n} NPCs x {ticks} ticks: Mesa {theirs:.2} ms per tick (half knew it by tick {}), hearsay {ours:.2} ms (half by tick {}): hearsay/Mesa {:.2}",
            mesa["half_tick"],
            s["facts"][0]["half_tick"],
            ours / theirs
        ));
        rows.push(json!({ "npcs": n, "ticks": ticks, "mesa_ms_per_tick": theirs,
                          "hearsay_ms_per_tick": ours, "ratio": ours / theirs,
                          "mesa_half_tick": mesa["half_tick"], "hearsay_half_tick": s["facts"][0]["half_tick"],
                          "hearsay_phases_ms": s["timing"]["phases_ms"], "mesa": mesa["mesa"] }));
    }
    json!(rows)
}

fn suite_p4(b: &Bench) -> Value {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        panic!("p4 needs DATABASE_URL (scripts/bench.sh starts a throwaway cluster)");
    };
    let json_path = b.work.path().join("bench-pg.json");
    let bin = b
        .hearsay
        .parent()
        .map_or_else(|| PathBuf::from("bench-pg"), |d| d.join("bench-pg"));
    let memories = if b.quick { "100000" } else { "1000000" };
    let status = Command::new(bin)
        .args([
            "--database-url",
            &url,
            "--memories",
            memories,
            "--npcs",
            "1000",
        ])
        .arg("--json")
        .arg(&json_path)
        .status()
        .expect("bench-pg runs");
    assert!(status.success(), "bench-pg failed");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("bench-pg.json"))
            .expect("json");
    say(&format!("p4          {}", v));
    v
}

/// Machine facts for the report.
fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_default();
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0 / 1024.0);
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    json!({ "cpu": cpu, "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "memory_gib": mem_gib, "rustc": rustc })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("render") {
        render(&args[1..]);
        return;
    }
    if args.first().map(String::as_str) == Some("pairs") {
        pairs::main(&args[1..]);
        return;
    }
    if args.first().map(String::as_str) == Some("town") {
        // `bench town N TICKS`: the suites' town as a scenario file, for profiling.
        let n = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
        let ticks = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100);
        print!("{}", town("town", n, ticks, true, ""));
        return;
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{}", usage());
        return;
    }
    let Cli {
        hearsay,
        out,
        quick,
        suites,
    } = Cli::parse(&args).unwrap_or_else(|e| {
        eprintln!("bench: {e}\n\n{}", usage());
        std::process::exit(2)
    });
    assert!(
        hearsay.is_file(),
        "{} is missing: cargo build --release -p hearsay",
        hearsay.display()
    );
    let b = Bench {
        hearsay,
        work: tempfile::tempdir().expect("work dir"),
        quick,
    };
    let mut results = serde_json::Map::new();
    results.insert("machine".into(), machine());
    results.insert("commit".into(), commit(&b.hearsay));
    results.insert("quick".into(), json!(quick));
    let started = Instant::now();
    // Which commit measured each suite: suites run on their own keep the others' figures.
    let mut measured_at = std::fs::read_to_string(&out)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["measured_at"].as_object().cloned())
        .unwrap_or_default();
    // Bandwidth from an earlier run of the harness, unless measured again now.
    let mut bw = std::fs::read_to_string(&out)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v["bandwidth"]["one_thread_gb_s"].as_f64());
    for suite in &suites {
        let t = Instant::now();
        let v = match suite.as_str() {
            "bandwidth" => {
                let v = suite_bandwidth();
                bw = v["one_thread_gb_s"].as_f64();
                v
            }
            "recall" => suite_recall(bw),
            "p1" => suite_p1(&b),
            "p2" => suite_p2(&b),
            "p3" => suite_p3(&b),
            "rss" => suite_rss(&b),
            "mesa" => suite_mesa(&b),
            "p4" => suite_p4(&b),
            "p10k" => {
                let (ticks, rounds) = if quick { (20, 1) } else { (200, 3) };
                suite_big(&b, "p10k", 10_000, ticks, rounds)
            }
            // One run: it takes minutes, and its goal is that it completes.
            "p100k" => suite_big(&b, "p100k", 100_000, if quick { 3 } else { 20 }, 1),
            "pgtown" => suite_pgtown(&b),
            "scaleout" => suite_scaleout(&b),
            // `Cli::parse` let through only the names in `SUITES`.
            other => unreachable!("suite {other:?} is not in SUITES"),
        };
        results.insert(suite.clone(), v);
        measured_at.insert(suite.clone(), results["commit"].clone());
        eprintln!("({suite}: {:.0} s)", t.elapsed().as_secs_f64());
        // Saved after every suite: a suite that fails later loses nothing measured.
        results.insert("wall_s".into(), json!(started.elapsed().as_secs_f64()));
        results.insert("measured_at".into(), Value::Object(measured_at.clone()));
        save(&out, &results);
    }
    save(&out, &results);
    say(&format!("figures in {}", out.display()));
}

/// Writes `results` into `out`, keeping the figures of suites not run this time (suites
/// run on their own keep the others' from earlier runs).
fn save(out: &std::path::Path, results: &serde_json::Map<String, Value>) {
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let mut merged = std::fs::read_to_string(out)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Map<String, Value>>(&t).ok())
        .unwrap_or_default();
    merged.extend(results.clone());
    std::fs::write(
        out,
        serde_json::to_string_pretty(&Value::Object(merged)).unwrap_or_default(),
    )
    .expect("write results");
}

/// `bench render --before B.json --after A.json --into docs/BENCHMARKS.md`: replaces the
/// part of the file between the `bench:begin` and `bench:end` markers with the figures.
fn render(args: &[String]) {
    let load = |flag: &str| -> Value {
        let path = arg(args, flag).unwrap_or_else(|| panic!("{flag} FILE"));
        serde_json::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        )
        .unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let (mut before, mut after) = (load("--before"), load("--after"));
    per_npc_tick(&mut before);
    per_npc_tick(&mut after);
    let into = PathBuf::from(arg(args, "--into").unwrap_or_else(|| "docs/BENCHMARKS.md".into()));
    splice(&into, "bench", &render_block(&before, &after));
    if let Some(readme) = arg(args, "--readme") {
        splice(
            &PathBuf::from(readme),
            "bench:readme",
            &render_readme(&after),
        );
    }
    if after["p4"]["heavy_ef_sweep"].is_array() {
        splice(&into, "bench:p4-ef", &render_ef_sweep(&after));
    }
    if let Some(file) = arg(args, "--pairs").filter(|f| std::path::Path::new(f).is_file()) {
        let pairs: Value = serde_json::from_str(
            &std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}")),
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
        splice(&into, "bench:pairs", &pairs::render_block(&pairs));
    }
}

/// Replaces the part of `file` between `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
fn splice(file: &std::path::Path, name: &str, block: &str) {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let (begin, end) = (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    );
    let new = match (text.find(&begin), text.find(&end)) {
        (Some(a), Some(z)) if a < z => format!("{}{begin}\n{block}{}", &text[..a], &text[z..]),
        _ => format!("{begin}\n{block}{end}\n\n{text}"),
    };
    std::fs::write(file, new).expect("write the report");
    println!("rendered {}", file.display());
}

fn cell(v: &Value, decimals: usize) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.decimals$}"),
        None => "–".into(),
    }
}

/// A figure's goal: at most, or at least, this value.
#[derive(Clone, Copy)]
enum Goal {
    None,
    AtMost(f64),
    AtLeast(f64),
}

impl Goal {
    fn text(self) -> String {
        match self {
            Goal::None => String::new(),
            Goal::AtMost(x) => format!("≤ {x}"),
            Goal::AtLeast(x) => format!("≥ {x}"),
        }
    }

    /// `v` as [`cell`] writes it with `decimals`, and with more where those would print
    /// a figure on the wrong side of its goal: 1.502 against "≤ 1.5" is missed, and
    /// "1.50" would read as met. Up to six decimals, then every digit the number has.
    fn cell(self, v: &Value, decimals: usize) -> String {
        let verdict = self.verdict(v);
        let tells = |text: &String| self.verdict_of(text.parse().ok()) == verdict;
        (decimals..=decimals.max(6))
            .map(|d| cell(v, d))
            .find(tells)
            .or_else(|| v.as_f64().map(|x| format!("{x}")))
            .unwrap_or_else(|| cell(v, decimals))
    }

    /// "met", [`MISSED`], or nothing when there is no goal or no figure.
    fn verdict(self, v: &Value) -> &'static str {
        self.verdict_of(v.as_f64())
    }

    /// [`Goal::verdict`] of a figure as a number, if there is one.
    fn verdict_of(self, x: Option<f64>) -> &'static str {
        match (self, x) {
            (Goal::AtMost(g), Some(x)) if x <= g => "met",
            (Goal::AtLeast(g), Some(x)) if x >= g => "met",
            (Goal::AtMost(_) | Goal::AtLeast(_), Some(_)) => MISSED,
            _ => "",
        }
    }
}

/// The verdict of a figure that misses its goal, as the tables print it.
const MISSED: &str = "**missed**";

/// One row of the limits table: its label, goal, path into the results, decimals.
struct Row {
    name: String,
    goal: Goal,
    path: Vec<String>,
    decimals: usize,
    /// Shown in the README's block too.
    headline: bool,
}

fn rows() -> Vec<Row> {
    let row = |name: &str, goal: Goal, path: &[&str], decimals: usize, headline: bool| Row {
        name: name.to_owned(),
        goal,
        path: path.iter().map(|x| (*x).to_owned()).collect(),
        decimals,
        headline,
    };
    use Goal::{AtLeast, AtMost, None as No};
    let mut rows = vec![
        row(
            "memory bandwidth, one thread (GB/s)",
            No,
            &["bandwidth", "one_thread_gb_s"],
            1,
            false,
        ),
        row(
            "recall scan, dense vectors (GB/s read)",
            No,
            &["recall", "dense_gb_s"],
            1,
            false,
        ),
        row(
            "recall scan, dense (1,536 dims), ÷ one thread's bandwidth",
            AtLeast(0.5),
            &["recall", "dense_bandwidth_share"],
            2,
            true,
        ),
        row(
            "recall of 500 memories, dense vectors (µs)",
            No,
            &["recall", "dense_us_per_recall"],
            0,
            false,
        ),
        row(
            "recall of 500 memories, sparse vectors (µs)",
            No,
            &["recall", "sparse_us_per_recall"],
            0,
            false,
        ),
        row(
            "P1 LLM-bound tick ÷ ceil(N/C)·L (256 NPCs, C 32, 200 ms)",
            AtMost(1.10),
            &["p1", "ratio"],
            3,
            true,
        ),
        row(
            "P2 LLM-bound tick ÷ ceil(N/C)·L, eventual, instant embedder (256 NPCs, C 32, 1,000 ms)",
            AtMost(1.05),
            &["p2", "instant_ratio"],
            3,
            true,
        ),
        row(
            "P2 … with a 500 ms embedder",
            AtMost(1.05),
            &["p2", "slow_ratio"],
            3,
            true,
        ),
        row(
            "P2 share of recalls whose query is this tick's or the previous tick's (the worse run)",
            AtLeast(0.95),
            &["p2", "current_share"],
            3,
            true,
        ),
        row(
            "P3 1,000 NPCs × 500 ticks: ticks/s (median of 3 runs)",
            No,
            &["p3", "ticks_per_second"],
            2,
            true,
        ),
        row(
            "P3 … one thread's memory bandwidth just before its runs (GB/s; the machine's speed that day)",
            No,
            &["p3", "bandwidth_one_thread_gb_s"],
            1,
            false,
        ),
        row(
            "P3 hearsay ms per tick ÷ Mesa's, same model, 1,000 NPCs × 500 ticks (median of 3 runs)",
            AtMost(1.0),
            &["p3", "mesa_ratio"],
            2,
            true,
        ),
    ];
    for phase in [
        "perceive",
        "barrier",
        "think",
        "act",
        "persist",
        "persist.log",
        "persist.checkpoint",
        "persist.store",
    ] {
        rows.push(row(
            &format!("P3 {phase} per tick (ms)"),
            No,
            &["p3", "phases_ms_per_tick", phase],
            1,
            false,
        ));
    }
    rows.extend([
        row(
            "P3 the tick thread's wait for a core, ready to run, per tick (ms; Linux's schedstat)",
            No,
            &["p3", "tick_thread_waiting_ms_per_tick"],
            2,
            false,
        ),
        row(
            "P3 recall per NPC (µs)",
            No,
            &["p3", "recall_us_per_npc"],
            0,
            false,
        ),
        row(
            "P3 run directory, bytes per NPC-tick",
            AtMost(300.0),
            &["p3", "bytes_per_npc_tick"],
            0,
            true,
        ),
        row(
            "… of which the event log (`events.jsonl.zst`)",
            No,
            &["p3", "per_npc_tick", "events"],
            0,
            false,
        ),
        row(
            "… of which the tape (`llm.jsonl.zst`)",
            No,
            &["p3", "per_npc_tick", "tape"],
            0,
            false,
        ),
        row(
            "… of which `memories.db`",
            No,
            &["p3", "per_npc_tick", "store"],
            0,
            false,
        ),
        row(
            "… … of which checkpoints (their JSON)",
            No,
            &["p3", "per_npc_tick", "checkpoints"],
            0,
            false,
        ),
        row(
            "… … of which checkpoints, as stored (SQLite's pages)",
            No,
            &["p3", "per_npc_tick", "checkpoints_stored"],
            0,
            false,
        ),
        row(
            "… … of which vectors, as stored (SQLite's pages)",
            No,
            &["p3", "per_npc_tick", "vectors_stored"],
            0,
            false,
        ),
        row(
            "P3 checkpoint cost per tick (wall clock), last tenth ÷ first tenth (flat: 1; median of 3 runs)",
            AtMost(1.5),
            &["p3", "checkpoint_growth"],
            2,
            true,
        ),
        row(
            "… the same in the tick thread's CPU time",
            AtMost(1.5),
            &["p3", "checkpoint_cpu_growth"],
            2,
            false,
        ),
        row(
            "… its bytes per tick, last tenth ÷ first tenth",
            No,
            &["p3", "checkpoint_bytes_growth"],
            2,
            false,
        ),
        row(
            "P3 checkpoint cost per tick (wall clock), last tenth ÷ second tenth (after the town fills)",
            AtMost(1.5),
            &["p3", "checkpoint_steady_growth"],
            2,
            true,
        ),
        row(
            "… the same in the tick thread's CPU time",
            AtMost(1.5),
            &["p3", "checkpoint_steady_cpu_growth"],
            2,
            false,
        ),
        row(
            "… its bytes per tick, last tenth ÷ second tenth",
            No,
            &["p3", "checkpoint_steady_bytes_growth"],
            2,
            false,
        ),
        row(
            "10,000 NPCs × 200 ticks: ticks/s (median of 3 runs)",
            AtLeast(10.0),
            &["p10k", "ticks_per_second"],
            2,
            true,
        ),
        row(
            "10,000 NPCs: one thread's memory bandwidth just before its runs (GB/s; the machine's speed that day)",
            No,
            &["p10k", "bandwidth_one_thread_gb_s"],
            1,
            false,
        ),
        row(
            "10,000 NPCs: peak RSS (MiB, the median run)",
            No,
            &["p10k", "peak_rss_mib"],
            0,
            false,
        ),
        row(
            "10,000 NPCs: after the last tick until `hearsay run` exits — the story read back from `events.jsonl`, `summary.json` and `report.html` written (s, the median run)",
            No,
            &["p10k", "finish_s"],
            2,
            true,
        ),
    ]);
    for phase in ["perceive", "think", "act", "persist"] {
        rows.push(row(
            &format!("10,000 NPCs: cores busy in {phase} (process CPU ÷ wall clock; 2 cores)"),
            No,
            &["p10k", "cores_busy", phase],
            2,
            false,
        ));
    }
    rows.push(row(
        "10,000 NPCs: the tick thread's wait for a core, ready to run, per tick (ms; Linux's schedstat)",
        No,
        &["p10k", "tick_thread_waiting_ms_per_tick"],
        1,
        false,
    ));
    rows.extend([
        row(
            "100,000 NPCs × 20 ticks: ticks/s",
            No,
            &["p100k", "ticks_per_second"],
            3,
            true,
        ),
        row(
            "100,000 NPCs: one thread's memory bandwidth just before its runs (GB/s; the machine's speed that day)",
            No,
            &["p100k", "bandwidth_one_thread_gb_s"],
            1,
            false,
        ),
        row(
            "100,000 NPCs × 20 ticks: peak RSS (MiB)",
            AtMost(16384.0),
            &["p100k", "peak_rss_mib"],
            0,
            true,
        ),
        row(
            "100,000 NPCs: after the last tick until `hearsay run` exits (s)",
            No,
            &["p100k", "finish_s"],
            2,
            false,
        ),
        row(
            "peak RSS per 100,000 memories (MiB, slope)",
            No,
            &["rss", "mib_per_100k"],
            0,
            false,
        ),
        row(
            "P4 PostgreSQL, 1,000,000 memories: per-NPC top-5 recall p50, exact path (ms)",
            AtMost(5.0),
            &["p4", "recall_exact_p50_ms"],
            2,
            true,
        ),
        row(
            "P4 … p95, exact path (ms)",
            No,
            &["p4", "recall_exact_p95_ms"],
            2,
            false,
        ),
        row(
            "P4 exact path recall@5 against brute force",
            AtLeast(0.98),
            &["p4", "recall_exact_at_5"],
            3,
            false,
        ),
        row(
            "P4 NPCs of 25,000 memories (past `exact_scan_max`, so the HNSW path): top-5 recall p50, its plan on the HNSW index (ms)",
            AtMost(5.0),
            &["p4", "recall_heavy_hnsw_p50_ms"],
            2,
            true,
        ),
        row(
            "P4 … p95 (ms)",
            No,
            &["p4", "recall_heavy_hnsw_p95_ms"],
            2,
            false,
        ),
        row(
            "P4 … recall@5 against brute force",
            AtLeast(0.98),
            &["p4", "recall_heavy_hnsw_at_5"],
            3,
            true,
        ),
        row(
            "P4 the same NPCs by an exact scan of all their rows: p50 (ms)",
            No,
            &["p4", "recall_heavy_exact_p50_ms"],
            2,
            false,
        ),
        row(
            "P4 insert (memories/s)",
            No,
            &["p4", "insert_per_s"],
            0,
            false,
        ),
        row(
            "PostgreSQL ÷ SQLite tick time, rumour-200 × 100 ticks",
            AtMost(2.0),
            &["pgtown", "ratio"],
            2,
            true,
        ),
        row(
            "… PostgreSQL ms per tick",
            No,
            &["pgtown", "pg_tick_ms"],
            1,
            false,
        ),
        row(
            "… SQLite ms per tick",
            No,
            &["pgtown", "sqlite_tick_ms"],
            1,
            false,
        ),
        row(
            "sweep on one PostgreSQL, rumour-200: runs per minute, 1 shard process × 2 runs at once",
            No,
            &["scaleout", "one", "runs_per_minute"],
            1,
            false,
        ),
        row(
            "… 2 shard processes × 1 run at once",
            No,
            &["scaleout", "two", "runs_per_minute"],
            1,
            false,
        ),
        row(
            "… the database's share of the runs' time (2 shards)",
            No,
            &["scaleout", "two", "db_share"],
            3,
            false,
        ),
        row(
            "… server statement time per memory written (ms)",
            No,
            &["scaleout", "db_ms_per_memory"],
            3,
            false,
        ),
        row(
            "… one server core saturates at (memories/s, predicted)",
            No,
            &["scaleout", "saturation_memories_per_s"],
            0,
            false,
        ),
        row(
            "… … a town of this many NPCs at 1 tick/s (predicted)",
            No,
            &["scaleout", "saturation_npcs_at_1_tick_per_s"],
            0,
            false,
        ),
        row(
            "… the tick write alone: memories/s, 1 writer",
            No,
            &["scaleout", "insert_per_s_one_writer"],
            0,
            false,
        ),
        row(
            "… … 2 writers at once",
            No,
            &["scaleout", "insert_per_s_two_writers"],
            0,
            false,
        ),
        row(
            "… … the town it fills at 1 tick/s with inserts alone (NPCs, predicted)",
            No,
            &["scaleout", "insert_bound_npcs_at_1_tick_per_s"],
            0,
            false,
        ),
    ]);
    for (i, n) in [100, 1000].iter().enumerate() {
        let i = i.to_string();
        rows.push(row(
            &format!("Mesa, {n} NPCs × 100 ticks: ms per tick"),
            No,
            &["mesa", &i, "mesa_ms_per_tick"],
            2,
            false,
        ));
        rows.push(row(
            &format!("hearsay, {n} NPCs × 100 ticks: ms per tick"),
            No,
            &["mesa", &i, "hearsay_ms_per_tick"],
            2,
            false,
        ));
        rows.push(row(
            &format!("hearsay ÷ Mesa, {n} NPCs × 100 ticks"),
            No,
            &["mesa", &i, "ratio"],
            2,
            false,
        ));
    }
    rows
}

/// The P3 run directory's parts per NPC-tick, from the bytes the suite recorded (the
/// files' sizes and the checkpoints' bytes), as `p3.per_npc_tick` for the table.
fn per_npc_tick(v: &mut Value) {
    let p3 = &v["p3"];
    let npc_ticks = p3["npcs"].as_f64().unwrap_or(0.0) * p3["ticks"].as_f64().unwrap_or(0.0);
    if npc_ticks <= 0.0 {
        return;
    }
    let files = &p3["run_dir"]["files"];
    let per = |x: &Value| x.as_f64().map(|b| b / npc_ticks);
    // Before 0008 the vectors were one table and its key; since, the blobs and the chunks
    // naming them.
    let vectors = [
        "memory_vectors",
        "sqlite_autoindex_memory_vectors_1",
        "vector_blobs",
        "sqlite_autoindex_vector_blobs_1",
        "memory_chunk_vectors",
    ]
    .iter()
    .filter_map(|t| p3["run_dir"]["store_tables"][*t].as_f64())
    .reduce(|a, b| a + b)
    .map(|b| b / npc_ticks);
    let parts = json!({
        "events": per(log_file(files, "events.jsonl")),
        "tape": per(log_file(files, "llm.jsonl")),
        "store": per(&files["memories.db"]),
        "checkpoints": per(&p3["checkpoints"]["bytes"]),
        "checkpoints_stored": per(&p3["run_dir"]["store_tables"]["checkpoints"]),
        "vectors_stored": vectors,
    });
    v["p3"]["per_npc_tick"] = parts;
}

fn lookup<'v>(v: &'v Value, path: &[String]) -> &'v Value {
    let mut x = v;
    for p in path {
        x = match p.parse::<usize>() {
            Ok(i) if x.is_array() => &x[i],
            _ => &x[p.as_str()],
        };
    }
    x
}

/// Which commits a results file measured (per suite, as `measured_at` records them), for
/// a table's header.
fn measured(v: &Value) -> String {
    let name = |c: &Value| match (c["sha"].as_str(), c["dirty"].as_bool()) {
        (Some(sha), Some(true)) => {
            format!("{} with uncommitted changes", &sha[..sha.len().min(10)])
        }
        (Some(sha), _) => sha[..sha.len().min(10)].to_owned(),
        (None, _) => "a commit not recorded".into(),
    };
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (suite, c) in v["measured_at"].as_object().into_iter().flatten() {
        by.entry(name(c)).or_default().push(suite.clone());
    }
    match by.len() {
        0 => format!("commit {}", name(&v["commit"])),
        1 => format!("commit {}", by.keys().next().map_or("", String::as_str)),
        _ => format!(
            "commits {}",
            by.iter()
                .map(|(c, suites)| format!("{c} ({})", suites.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

fn render_block(before: &Value, after: &Value) -> String {
    let m = &after["machine"];
    let mut s = String::new();
    s.push_str(&format!(
        "## The limits (generated by `scripts/bench.sh`; do not edit by hand)\n\n\
         Machine: {}, {} cores, {} GiB RAM; {}. Release build. \"Before\" ({}, \
         `docs/bench/before.json`) is the engine before this round of optimisations, \"after\" \
         ({}, `docs/bench/after.json`) is now; both were written by the harness\n\
         (tests/bin/bench.rs; one run per figure on a shared machine, P3's the median of three\n\
         runs: read ratios, not single milliseconds). A goal the after figure misses says so.\n\n",
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        cell(&m["memory_gib"], 0),
        m["rustc"].as_str().unwrap_or("?"),
        measured(before),
        measured(after),
    ));
    s.push_str("| figure | goal | before | after | |\n|---|---|---|---|---|\n");
    for r in rows() {
        let (b, a) = (lookup(before, &r.path), lookup(after, &r.path));
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.name,
            r.goal.text(),
            r.goal.cell(b, r.decimals),
            r.goal.cell(a, r.decimals),
            r.goal.verdict(a)
        ));
    }
    s.push('\n');
    s
}

/// P4's heavy NPCs at each `hnsw.ef_search` the harness measured: latency, recall@5
/// against the brute force, and the buffers of the plan (on the HNSW index, or said not
/// to be).
fn render_ef_sweep(after: &Value) -> String {
    let p4 = &after["p4"];
    let commit = after["measured_at"]["p4"]["sha"]
        .as_str()
        .map_or("a commit not recorded", |sha| &sha[..sha.len().min(10)]);
    let mut s = format!(
        "Generated by `scripts/bench.sh p4` at commit {commit}; do not edit by hand. The {} \
         NPCs of {} memories, {} recalls each row, top 5 (goals: p50 ≤ 5 ms, recall@5 ≥ 0.98).\n\n\
         | `hnsw.ef_search` | p50 (ms) | p95 (ms) | recall@5 | answered by the exact scan (HNSW short) | plan | |\n|---|---|---|---|---|---|---|\n",
        p4["heavy_npcs"], p4["heavy_memories_each"], p4["heavy_queries"],
    );
    for row in p4["heavy_ef_sweep"].as_array().into_iter().flatten() {
        let used = row["plan_used_hnsw"].as_bool() == Some(true);
        let (p50, at_5) = (&row["recall_p50_ms"], &row["recall_at_5"]);
        let met =
            p50.as_f64().is_some_and(|x| x <= 5.0) && at_5.as_f64().is_some_and(|x| x >= 0.98);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            row["ef_search"],
            cell(p50, 2),
            cell(&row["recall_p95_ms"], 2),
            cell(at_5, 3),
            cell(&row["recall_fell_back"], 0),
            if used {
                format!("HNSW index, {}", row["buffers"].as_str().unwrap_or("?"))
            } else {
                "**not on the HNSW index** (no figures)".into()
            },
            if !used {
                ""
            } else if met {
                "both met"
            } else {
                "missed"
            },
        ));
    }
    s.push('\n');
    s
}

/// The README's part: the goals, the figure measured now, met or missed.
fn render_readme(after: &Value) -> String {
    let mut s = format!(
        "Generated by `scripts/bench.sh` from `docs/bench/after.json` ({}); do not edit by hand.\n\n\
         | figure | goal | measured | |\n|---|---|---|---|\n",
        measured(after)
    );
    // The headline rows, and any other row whose figure misses its goal: a miss is said
    // where the reader looks first. A row that continues the one above it ("…") follows
    // a headline row, so it keeps its context (a test holds the table to that).
    for r in rows() {
        let a = lookup(after, &r.path);
        if !r.headline && r.goal.verdict(a) != MISSED {
            continue;
        }
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.name,
            r.goal.text(),
            r.goal.cell(a, r.decimals),
            r.goal.verdict(a)
        ));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        Cli::parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn the_readme_shows_every_missed_goal_beside_the_headline_rows() {
        let cpu = "| … the same in the tick thread's CPU time | ≤ 1.5 |";
        let after = |cpu_growth: f64| json!({"p3": {"checkpoint_growth": 1.33, "checkpoint_cpu_growth": cpu_growth}});
        let missed = render_readme(&after(1.51));
        let line = missed.lines().find(|l| l.starts_with(cpu));
        assert_eq!(line, Some(format!("{cpu} 1.51 | {MISSED} |").as_str()));
        // Right under the headline row it continues.
        let lines: Vec<&str> = missed.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(cpu))
            .expect("shown");
        assert!(
            lines[at - 1].starts_with(
                "| P3 checkpoint cost per tick (wall clock), last tenth ÷ first tenth"
            )
        );
        // Met, it stays in BENCHMARKS.md's table only.
        assert!(!render_readme(&after(1.43)).contains(cpu));
    }

    #[test]
    fn a_figure_that_rounds_onto_its_goal_shows_the_side_it_is_on() {
        let (most, least) = (Goal::AtMost(1.5), Goal::AtLeast(10.0));
        // Missed by less than the row's decimals show: digits until it reads missed.
        assert_eq!(most.cell(&json!(1.502193855636058), 2), "1.502");
        assert_eq!(most.cell(&json!(1.5000004), 2), "1.5000004");
        assert_eq!(least.cell(&json!(9.996), 2), "9.996");
        // Met, or missed plainly: the row's decimals.
        assert_eq!(most.cell(&json!(1.4996), 2), "1.50");
        assert_eq!(most.cell(&json!(1.5), 2), "1.50");
        assert_eq!(most.cell(&json!(1.59), 2), "1.59");
        assert_eq!(least.cell(&json!(6.04), 2), "6.04");
        // No goal, or no figure.
        assert_eq!(Goal::None.cell(&json!(1.502), 2), "1.50");
        assert_eq!(most.cell(&Value::Null, 2), "–");
        // What the README prints for such a row.
        let after = json!({"p3": {"checkpoint_growth": 1.502193855636058}});
        let readme = render_readme(&after);
        assert!(
            readme.contains(&format!("| ≤ 1.5 | 1.502 | {MISSED} |")),
            "{readme}"
        );
    }

    #[test]
    fn a_row_that_continues_another_follows_a_headline_row() {
        // The README shows a missed row without the rows around it: one that reads as the
        // continuation of the row above ("…") must continue a row the README shows.
        let rows = rows();
        for (i, r) in rows.iter().enumerate() {
            if r.name.starts_with('…') && !matches!(r.goal, Goal::None) {
                let parent = rows[..i].iter().rev().find(|p| !p.name.starts_with('…'));
                assert!(
                    parent.is_some_and(|p| p.headline),
                    "{:?} continues a row the README does not show",
                    r.name
                );
            }
        }
    }

    #[test]
    fn the_command_line_is_read_before_any_suite_runs() {
        let cli = parse(&["p3", "--out", "x.json", "--quick", "recall"]).expect("valid");
        assert_eq!(cli.suites, ["p3", "bandwidth", "recall"]);
        assert_eq!(cli.out, PathBuf::from("x.json"));
        assert!(cli.quick);
        assert_eq!(parse(&[]).expect("valid").suites, SUITES[..DEFAULT_SUITES]);
        assert_eq!(
            parse(&["--hearsay", "bin/h", "p10k"]).expect("valid"),
            Cli {
                hearsay: PathBuf::from("bin/h"),
                out: hearsay_tests::root().join("target/bench/results.json"),
                quick: false,
                suites: vec!["p10k".to_owned()],
            }
        );
        for (args, refused) in [
            (&["p3", "p10"][..], "unknown suite \"p10\""),
            (&["--quik", "p3"][..], "unknown flag \"--quik\""),
            (&["p3", "--out"][..], "--out needs a path"),
        ] {
            let e = parse(args).expect_err("refused");
            assert!(e.contains(refused), "{args:?}: {e}");
        }
    }
}
