//! `bench`: hearsay's benchmark suites, measured against the limits they should meet.
//!
//!     bench [--hearsay target/release/hearsay] [--out target/bench/results.json]
//!           [--quick] [SUITE ...]
//!
//! Suites (default: all but p4):
//! - `bandwidth`: this machine's memory read bandwidth (1 GiB of f32, the same 8-lane
//!   sum recall uses; one thread, and two).
//! - `recall`: recall's scan alone, 200 NPCs × 500 memories, dense vectors (a real
//!   embedder's) and sparse ones (the hashing embedder's): GB/s read against
//!   `bandwidth` (goal ≥ 50 %).
//! - `p1`: LLM-bound ticks — a mock OpenAI-compatible server at a fixed 200 ms per answer,
//!   256 NPCs, `max_concurrency` 32: mean tick ÷ ceil(N/C)·L (goal ≤ 1.10).
//! - `p2`: backfill isolation — `eventual` visibility with a 500 ms embedder against an
//!   instant one: tick time ratio (goal ≤ 1.05).
//! - `p3`: offline scale — 1,000 NPCs × 500 ticks, heuristic brain, hashing embedder,
//!   SQLite: ticks/s, time per phase, recall throughput against `bandwidth` (goal ≥ 50 %).
//! - `rss`: peak resident memory per 100,000 memories in the embedded store (two run
//!   lengths, the slope between them).
//! - `mesa`: the same gossip model in Mesa (`scripts/bench-mesa.py`) and in hearsay, at
//!   100 and 1,000 NPCs: time per tick, ratio.
//! - `p4`: PostgreSQL recall at 1,000,000 memories (the `bench-pg` binary; needs
//!   DATABASE_URL).
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

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
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
        let output = cmd.output().expect("hearsay runs");
        assert!(
            matches!(output.status.code(), Some(0 | 3)),
            "hearsay run {name} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("summary.json")).expect("summary.json"),
        )
        .expect("summary is JSON");
        // The stores of big runs are gigabytes: keep the disk free.
        let _ = std::fs::remove_file(out.join("memories.db"));
        let _ = std::fs::remove_file(out.join("llm.jsonl"));
        summary
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
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
                    content: text.clone(),
                    importance: 8,
                    tick: id % 300,
                    source: None,
                    core: false,
                    evidence: Vec::new(),
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
        let bytes: usize = (0..npcs).map(|n| index.bytes(NpcId(n))).sum();
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

fn suite_p2(b: &Bench) -> Value {
    let n = 64;
    let ticks = if b.quick { 40 } else { 120 };
    let run = |delay_ms: u64| {
        let mock = MockServer::start_with(
            MockOptions {
                embed_dims: 384,
                embed_delay_ms: delay_ms,
                ..MockOptions::default()
            },
            |_| Reply::answer("{}"),
        );
        let extra = format!(
            "[memory]\nvisibility = \"eventual\"\n\n[memory.embedder]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-embed\"\nbatch_size = 64\nmax_concurrency = 4\n",
            mock.url
        );
        b.run(
            &format!("p2-{delay_ms}"),
            &town("p2", n, ticks, true, &extra),
            &[],
        )
    };
    let instant = run(0);
    let slow = run(500);
    let (fast_ms, slow_ms) = (tick_ms(&instant), tick_ms(&slow));
    let ratio = slow_ms / fast_ms;
    say(&format!(
        "p2          eventual, {n} NPCs, {ticks} ticks: mean tick {fast_ms:.1} ms with an instant embedder, {slow_ms:.1} ms with a 500 ms one: ratio {ratio:.3} (goal <= 1.05); unembedded at the end {} and {}",
        instant["memories"]["unembedded"], slow["memories"]["unembedded"]
    ));
    json!({ "npcs": n, "ticks": ticks, "instant_tick_ms": fast_ms, "slow_tick_ms": slow_ms,
            "ratio": ratio, "instant": instant["timing"], "slow": slow["timing"],
            "slow_unembedded": slow["memories"]["unembedded"] })
}

fn suite_p3(b: &Bench, bandwidth_gb_s: Option<f64>) -> Value {
    let (n, ticks) = (1000, if b.quick { 100 } else { 500 });
    let s = b.run("p3", &town("p3", n, ticks, true, ""), &[]);
    let t = &s["timing"];
    let phases: BTreeMap<String, f64> = t["phases_ms"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), f(v) / ticks as f64))
                .collect()
        })
        .unwrap_or_default();
    let gb_s = f(&t["recall_gb_per_s"]);
    let share = bandwidth_gb_s.map(|bw| gb_s / bw);
    say(&format!(
        "p3          {n} NPCs x {ticks} ticks: {:.2} ticks/s, {} memories; per tick (ms): {}; recall {:.0} us per NPC, {gb_s:.1} GB/s{}",
        f(&t["ticks_per_second"]),
        s["memories"]["total"],
        phases
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        f(&t["recall_us_per_npc"]),
        share.map_or(String::new(), |s| format!(
            " = {:.0} % of one thread's memory bandwidth (sparse vectors: few bytes to read; the dense scan is the `recall` suite)",
            s * 100.0
        ))
    ));
    json!({ "npcs": n, "ticks": ticks, "ticks_per_second": t["ticks_per_second"],
            "phases_ms_per_tick": phases, "recall_us_per_npc": t["recall_us_per_npc"],
            "recall_gb_per_s": gb_s, "bandwidth_share": share,
            "memories": s["memories"], "peak_rss_mib": t["peak_rss_mib"], "wall_ms": t["wall_ms"] })
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
        let mesa: Value = serde_json::from_slice(
            out.stdout
                .split(|c| *c == b'\n')
                .rfind(|l| !l.is_empty())
                .unwrap_or_default(),
        )
        .expect("bench-mesa prints JSON");
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
    let hearsay = arg(&args, "--hearsay").map_or_else(
        || hearsay_tests::root().join("target/release/hearsay"),
        PathBuf::from,
    );
    let out = arg(&args, "--out").map_or_else(
        || hearsay_tests::root().join("target/bench/results.json"),
        PathBuf::from,
    );
    let quick = args.iter().any(|a| a == "--quick");
    let flags_with_values = ["--hearsay", "--out"];
    let mut suites: Vec<String> = Vec::new();
    let mut skip = false;
    for a in &args {
        if skip {
            skip = false;
            continue;
        }
        if flags_with_values.contains(&a.as_str()) {
            skip = true;
            continue;
        }
        if !a.starts_with("--") {
            suites.push(a.clone());
        }
    }
    if suites.is_empty() {
        suites = ["bandwidth", "recall", "p1", "p2", "p3", "rss", "mesa"]
            .map(String::from)
            .to_vec();
    }
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
    results.insert("quick".into(), json!(quick));
    let started = Instant::now();
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
            "p3" => suite_p3(&b, bw),
            "rss" => suite_rss(&b),
            "mesa" => suite_mesa(&b),
            "p4" => suite_p4(&b),
            other => {
                panic!("unknown suite {other:?}: bandwidth, recall, p1, p2, p3, rss, mesa, p4")
            }
        };
        results.insert(suite.clone(), v);
        eprintln!("({suite}: {:.0} s)", t.elapsed().as_secs_f64());
    }
    results.insert("wall_s".into(), json!(started.elapsed().as_secs_f64()));
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Suites run on their own keep the figures of the others from earlier runs.
    let mut merged = std::fs::read_to_string(&out)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Map<String, Value>>(&t).ok())
        .unwrap_or_default();
    merged.extend(results);
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&Value::Object(merged)).unwrap_or_default(),
    )
    .expect("write results");
    say(&format!("figures in {}", out.display()));
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
    let before = load("--before");
    let after = load("--after");
    let into = PathBuf::from(arg(args, "--into").unwrap_or_else(|| "docs/BENCHMARKS.md".into()));
    let text = std::fs::read_to_string(&into).unwrap_or_default();
    let block = render_block(&before, &after);
    let (begin, end) = ("<!-- bench:begin -->", "<!-- bench:end -->");
    let new = match (text.find(begin), text.find(end)) {
        (Some(a), Some(z)) if a < z => format!("{}{begin}\n{block}{}", &text[..a], &text[z..]),
        _ => format!("{begin}\n{block}{end}\n\n{text}"),
    };
    std::fs::write(&into, new).expect("write the report");
    println!("rendered {}", into.display());
}

fn cell(v: &Value, decimals: usize) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.decimals$}"),
        None => "–".into(),
    }
}

fn render_block(before: &Value, after: &Value) -> String {
    let m = &after["machine"];
    let mut s = String::new();
    s.push_str(&format!(
        "## The limits (generated by `scripts/bench.sh`; do not edit by hand)\n\n\
         Machine: {}, {} cores, {} GiB RAM; {}. Release build. \"Before\" is the engine before this\n\
         round of optimisations (commit recorded in `docs/bench/before.json`), \"after\" is now.\n\
         Every figure comes from `scripts/bench.sh` (the harness, tests/bin/bench.rs; one run per\n\
         figure on a shared machine: read ratios, not single milliseconds).\n\n",
        m["cpu"].as_str().unwrap_or("?"),
        m["cores"],
        cell(&m["memory_gib"], 0),
        m["rustc"].as_str().unwrap_or("?")
    ));
    s.push_str("| figure | goal | before | after |\n|---|---|---|---|\n");
    let row = |s: &mut String, name: &str, goal: &str, path: &[&str], decimals: usize| {
        let get = |v: &Value| {
            let mut x = v;
            for p in path {
                x = match p.parse::<usize>() {
                    Ok(i) if x.is_array() => &x[i],
                    _ => &x[*p],
                };
            }
            cell(x, decimals)
        };
        s.push_str(&format!(
            "| {name} | {goal} | {} | {} |\n",
            get(before),
            get(after)
        ));
    };
    // (figure, goal, path into the results, decimals)
    let rows: Vec<(String, &str, Vec<String>, usize)> = {
        let p = |parts: &[&str]| parts.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        let mut rows = vec![
            (
                "memory bandwidth, one thread (GB/s)".to_owned(),
                "",
                p(&["bandwidth", "one_thread_gb_s"]),
                1,
            ),
            (
                "recall scan, dense vectors (GB/s read)".into(),
                "",
                p(&["recall", "dense_gb_s"]),
                1,
            ),
            (
                "recall scan, dense, ÷ one thread's bandwidth".into(),
                "≥ 0.50",
                p(&["recall", "dense_bandwidth_share"]),
                2,
            ),
            (
                "recall of 500 memories, dense vectors (µs)".into(),
                "",
                p(&["recall", "dense_us_per_recall"]),
                0,
            ),
            (
                "recall of 500 memories, sparse vectors (µs)".into(),
                "",
                p(&["recall", "sparse_us_per_recall"]),
                0,
            ),
            (
                "P1 LLM-bound tick ÷ ceil(N/C)·L (256 NPCs, C 32, 200 ms)".into(),
                "≤ 1.10",
                p(&["p1", "ratio"]),
                3,
            ),
            (
                "P2 tick with a 500 ms embedder ÷ with an instant one (eventual)".into(),
                "≤ 1.05",
                p(&["p2", "ratio"]),
                3,
            ),
            (
                "P3 1,000 NPCs × 500 ticks: ticks/s".into(),
                "as fast as the machine allows",
                p(&["p3", "ticks_per_second"]),
                2,
            ),
        ];
        for phase in [
            "perceive",
            "barrier",
            "think",
            "act",
            "persist",
            "persist.checkpoint",
            "persist.store",
        ] {
            rows.push((
                format!("P3 {phase} per tick (ms)"),
                "",
                p(&["p3", "phases_ms_per_tick", phase]),
                1,
            ));
        }
        rows.extend([
            (
                "P3 recall per NPC (µs)".to_owned(),
                "",
                p(&["p3", "recall_us_per_npc"]),
                0,
            ),
            (
                "P3 recall throughput (GB/s of vector bytes read)".into(),
                "",
                p(&["p3", "recall_gb_per_s"]),
                1,
            ),
            (
                "peak RSS per 100,000 memories (MiB, slope)".into(),
                "",
                p(&["rss", "mib_per_100k"]),
                0,
            ),
            (
                "P4 PostgreSQL, 1,000,000 memories: per-NPC top-5 recall p50, exact path (ms)"
                    .into(),
                "≤ 5",
                p(&["p4", "recall_exact_p50_ms"]),
                2,
            ),
            (
                "P4 … p95, exact path (ms)".into(),
                "",
                p(&["p4", "recall_exact_p95_ms"]),
                2,
            ),
            (
                "P4 … p50, HNSW iterative scan (ms)".into(),
                "≤ 5",
                p(&["p4", "recall_hnsw_p50_ms"]),
                2,
            ),
            (
                "P4 HNSW recall@5 against exact".into(),
                "≥ 0.98",
                p(&["p4", "recall_hnsw_at_5"]),
                3,
            ),
            (
                "P4 insert (memories/s)".into(),
                "",
                p(&["p4", "insert_per_s"]),
                0,
            ),
        ]);
        for (i, n) in [100, 1000].iter().enumerate() {
            let i = i.to_string();
            rows.push((
                format!("Mesa, {n} NPCs: ms per tick"),
                "",
                p(&["mesa", &i, "mesa_ms_per_tick"]),
                2,
            ));
            rows.push((
                format!("hearsay, {n} NPCs: ms per tick"),
                "",
                p(&["mesa", &i, "hearsay_ms_per_tick"]),
                2,
            ));
            rows.push((
                format!("hearsay ÷ Mesa, {n} NPCs"),
                "",
                p(&["mesa", &i, "ratio"]),
                2,
            ));
        }
        rows
    };
    for (name, goal, path, decimals) in rows {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        row(&mut s, &name, goal, &path, decimals);
    }
    s.push('\n');
    s
}
