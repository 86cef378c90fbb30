//! `bench-pg`: the PostgreSQL store at scale, through hearsay's own store code.
//!
//!     bench-pg --database-url URL [--memories 1000000] [--npcs 1000] [--queries 1000]
//!              [--sample 20000] [--heavy 2] [--heavy-memories 25000]
//!              [--heavy-queries 200] [--json FILE]
//!
//! 1. Insert: `--memories` memories over `--npcs` NPCs, written as ticks of one memory
//!    per NPC (one statement per tick, as a run writes them). Then `--heavy` more NPCs
//!    with `--heavy-memories` each (untimed): NPCs past `PgOptions::exact_scan_max`
//!    (20,000), the ones whose recall takes the HNSW path.
//! 2. Backfill with the HNSW index maintained: `--sample` rows with 1 worker, then
//!    `--sample` more with 4 workers (FOR UPDATE SKIP LOCKED claims).
//! 3. Backfill of the rest with the HNSW index dropped (4 workers), then the index built
//!    in one go — how a bulk load should be done.
//! 4. Recall: `--queries` (NPC, query) pairs, top 5: the exact per-NPC path (what runs
//!    use) and the HNSW iterative-scan path, latency p50/p95, and each path's recall@5
//!    against a brute force of its own (every memory of the NPC embedded again, cosine
//!    in f64), ties with the fifth counted as hits. Then `EXPLAIN (ANALYZE, BUFFERS)` of
//!    each path's statement: the indexes its plan used and the buffers it read; the HNSW
//!    figures are published only if the HNSW path's plan used the HNSW index.
//! 5. The heavy NPCs: `--heavy-queries` recalls through the store as runs configure it
//!    (the HNSW path, since they are past `exact_scan_max`) and through an exact scan of
//!    all their rows, each against the brute force, each with its plan.
//!
//! Vectors come from the hashing embedder over varied synthetic sentences, so the data
//! has the structure of real runs (near-duplicates, shared words), not random noise.
//! Prints a table and, with --json, writes the figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId};
use hearsay_memory::postgres::connect;
use hearsay_memory::{
    Backfill, BackfillConfig, HashingEmbedder, PgOptions, PgStore, Scoring, Store, TickWrite,
};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn num(args: &[String], name: &str, default: u64) -> u64 {
    arg(args, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const SUBJECTS: &[&str] = &[
    "the miller",
    "the mayor",
    "a sailor",
    "the baker",
    "old Greta",
    "the guard",
    "a merchant",
    "the priest",
    "the smith",
    "a stranger",
];
const VERBS: &[&str] = &[
    "sold", "lost", "found", "stole", "bought", "hid", "promised", "burned", "mended", "praised",
];
const OBJECTS: &[&str] = &[
    "fresh fish",
    "a silver ring",
    "the mill wheel",
    "two barrels of ale",
    "a red horse",
    "the temple bell",
    "a map of the docks",
    "warm bread",
    "a letter",
    "the harbour keys",
];
const PLACES: &[&str] = &[
    "market", "docks", "temple", "tavern", "square", "mill", "well", "bakery",
];

fn sentence(i: u64) -> String {
    let pick = |list: &[&'static str], salt: u64| {
        list[((i.wrapping_mul(2_654_435_761) ^ salt) % list.len() as u64) as usize]
    };
    format!(
        "{} {} {} near the {} on day {}",
        pick(SUBJECTS, 0x9e37),
        pick(VERBS, 0x7f4a),
        pick(OBJECTS, 0x1234),
        pick(PLACES, 0x5555),
        i % 97
    )
}

/// The index names a text plan's nodes scanned, in plan order.
fn plan_indexes(plan: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    for line in plan {
        if let Some(rest) = line.split(" using ").nth(1) {
            let name = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
            if line.contains("Index") && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// Cosine of two vectors summed in f64: arithmetic of its own, not the store's.
fn cosine64(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        0.0
    } else {
        ab / (aa.sqrt() * bb.sqrt())
    }
}

/// Which memories insert gives whom: `total` ids over `npcs` NPCs one per NPC per tick
/// (NPC `n` has ids `n + 1`, `n + 1 + npcs`, …), then `heavy_each` more for each of the
/// `heavy` NPCs after them, round-robin in the same way.
#[derive(Clone, Copy)]
struct Layout {
    total: u64,
    npcs: u64,
    heavy: u64,
    heavy_each: u64,
}

impl Layout {
    /// Every memory id insert gave `npc`.
    fn ids_of(&self, npc: u64) -> Vec<u64> {
        if npc < self.npcs {
            (npc + 1..=self.total).step_by(self.npcs as usize).collect()
        } else {
            let h = npc - self.npcs;
            let last = self.total + self.heavy * self.heavy_each;
            (self.total + 1 + h..=last)
                .step_by(self.heavy.max(1) as usize)
                .collect()
        }
    }
}

/// The five memories most similar to `query` among `ids`, by brute force over each one's
/// sentence embedded again: (cosine, id), best first.
fn brute_force_top5(query: &[f32], ids: &[u64]) -> Vec<(f64, u64)> {
    let mut all: Vec<(f64, u64)> = ids
        .iter()
        .map(|&id| {
            (
                cosine64(query, &HashingEmbedder.embed_one(&sentence(id))),
                id,
            )
        })
        .collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    all.truncate(5);
    all
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn backfill(store: &Arc<PgStore>, workers: usize, through: u64) -> f64 {
    let started = Instant::now();
    let before = store.stats().await.expect("stats").unembedded;
    let config = BackfillConfig {
        batch_size: 64,
        concurrency: 1,
        workers,
        ..BackfillConfig::default()
    };
    let worker = Backfill::spawn(
        &tokio::runtime::Handle::current(),
        store.clone(),
        Arc::new(HashingEmbedder),
        config,
    );
    assert!(
        worker
            .wait_embedded_through(through, Duration::from_secs(24 * 3600))
            .await
    );
    worker.shutdown().await;
    let after = store.stats().await.expect("stats").unembedded;
    (before - after) as f64 / started.elapsed().as_secs_f64()
}

/// Writes memories `ids.start + 1 ..= ids.end` as ticks of `per_tick` memories from
/// `first_tick` on, memory `id` to NPC `owner_base + (id - ids.start - 1) % owners`, one
/// statement per tick as a run writes them; the number of ticks written.
async fn insert(
    store: &PgStore,
    first_tick: u64,
    ids: std::ops::Range<u64>,
    owners: u64,
    owner_base: u64,
    per_tick: u64,
) -> u64 {
    let (offset, count) = (ids.start, ids.end - ids.start);
    let ticks = count.div_ceil(per_tick.max(1));
    for t in 0..ticks {
        let tick = first_tick + t;
        let memories: Vec<MemoryRecord> = (t * per_tick..((t + 1) * per_tick).min(count))
            .map(|j| MemoryRecord {
                id: MemoryId(offset + j + 1),
                npc: NpcId((owner_base + j % owners) as u32),
                kind: MemoryKind::Conversation,
                content: sentence(offset + j + 1).into(),
                importance: 1 + ((offset + j + 1) % 10) as u8,
                tick,
                source: None,
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
    ticks
}

/// The `hnsw.ef_search` values the heavy NPCs' recall is measured at (200 is
/// `PgOptions::default`'s; 40 is pgvector's own default).
const EF_SWEEP: [u32; 5] = [40, 64, 100, 140, 200];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = arg(&args, "--database-url")
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .expect("--database-url or DATABASE_URL");
    let total = num(&args, "--memories", 1_000_000);
    let npcs = num(&args, "--npcs", 1000);
    let queries = num(&args, "--queries", 1000);
    let sample = num(&args, "--sample", 20_000).min(total / 2);
    let heavy = num(&args, "--heavy", 2);
    let heavy_each = num(&args, "--heavy-memories", 25_000);
    let heavy_queries = num(&args, "--heavy-queries", 200);
    let layout = Layout {
        total,
        npcs,
        heavy,
        heavy_each,
    };
    let all = total + heavy * heavy_each;
    // Dense rows, as a real embedder's are: the HNSW index, which P4 measures, holds
    // only those (hashing vectors are otherwise kept sparse, migration 0007).
    // Recall in the database (not from the store's in-memory copy): what P4 measures.
    let options = PgOptions {
        sparse_nonzero_max: 0,
        memory_index_max_bytes: 0,
        ..PgOptions::default()
    };
    let pool = connect(&url, &options).await.expect("connect");
    // No migration makes the HNSW index: this benchmark measures it kept up during the
    // backfill, then dropped and rebuilt, so it makes it.
    sqlx::query(
        "CREATE INDEX IF NOT EXISTS memory_vectors_hnsw ON memory_vectors USING hnsw (embedding vector_cosine_ops)",
    )
    .execute(&pool)
    .await
    .expect("create the HNSW index");
    let names: Vec<String> = (0..npcs + heavy).map(|i| format!("npc{i}")).collect();
    let store = Arc::new(
        PgStore::create_run(
            pool.clone(),
            options.clone(),
            "bench-pg",
            1,
            "",
            names.clone(),
        )
        .await
        .expect("run"),
    );
    let mut figures = serde_json::Map::new();
    println!(
        "bench-pg: {total} memories over {npcs} NPCs, {heavy} more NPCs of {heavy_each}, run {}",
        store.run_id()
    );

    // 1. Insert, one tick of one memory per NPC at a time; then the heavy NPCs, untimed,
    // in ticks of 1,000 memories.
    let started = Instant::now();
    let ticks = insert(&store, 0, 0..total, npcs, 0, npcs).await;
    let insert_rate = total as f64 / started.elapsed().as_secs_f64();
    println!(
        "insert:                       {insert_rate:>10.0} memories/s ({ticks} ticks of {npcs})"
    );
    figures.insert("insert_per_s".into(), insert_rate.into());
    let ticks = ticks + insert(&store, ticks, total..all, heavy, npcs, 1000).await;

    // 2. Backfill with the HNSW index maintained, 1 then 4 workers.
    let one = backfill(&store, 1, sample).await;
    println!("backfill, HNSW kept, 1 worker: {one:>9.0} memories/s ({sample} rows)");
    let four = backfill(&store, 4, 2 * sample).await;
    println!("backfill, HNSW kept, 4 workers:{four:>9.0} memories/s ({sample} rows)");
    figures.insert("backfill_hnsw_1_worker_per_s".into(), one.into());
    figures.insert("backfill_hnsw_4_workers_per_s".into(), four.into());

    // 3. The rest as a bulk load: index dropped, filled, rebuilt in one go.
    sqlx::query("DROP INDEX memory_vectors_hnsw")
        .execute(&pool)
        .await
        .expect("drop index");
    let bulk = backfill(&store, 4, all).await;
    println!(
        "backfill, no index, 4 workers: {bulk:>9.0} memories/s ({} rows)",
        all - 2 * sample
    );
    figures.insert("backfill_no_index_4_workers_per_s".into(), bulk.into());
    let started = Instant::now();
    let mut conn = pool.acquire().await.expect("connection");
    sqlx::query("SET maintenance_work_mem = '10GB'")
        .execute(&mut *conn)
        .await
        .expect("set");
    sqlx::query("CREATE INDEX memory_vectors_hnsw ON memory_vectors USING hnsw (embedding vector_cosine_ops)")
        .execute(&mut *conn)
        .await
        .expect("build index");
    drop(conn);
    let build_s = started.elapsed().as_secs_f64();
    println!("HNSW index build:              {build_s:>9.0} s");
    figures.insert("hnsw_build_s".into(), build_s.into());
    sqlx::query("ANALYZE memory_vectors")
        .execute(&pool)
        .await
        .expect("analyze");

    // 4. Recall: exact path vs HNSW path, same queries.
    let hnsw_options = PgOptions {
        exact_scan_max: 0,
        ..options.clone()
    };
    let exact_options = PgOptions {
        exact_scan_max: u64::MAX,
        ..options.clone()
    };
    let attach = |options: PgOptions| {
        let (url, names, run) = (url.clone(), names.clone(), store.run_id());
        async move {
            let pool = connect(&url, &options).await.expect("connect");
            PgStore::attach(pool, options, run, names)
                .await
                .expect("attach")
        }
    };
    // As runs configure it (exact up to `exact_scan_max`, HNSW past it), HNSW always,
    // exact always.
    let options_default = options.clone();
    let default = attach(options).await;
    let hnsw = attach(hnsw_options).await;
    let exact = attach(exact_options).await;
    let base: Vec<(NpcId, Vec<f32>)> = (0..queries)
        .map(|q| {
            let npc = NpcId(((q * 7919) % npcs) as u32);
            (npc, HashingEmbedder.embed_one(&sentence(q * 31 + 7)))
        })
        .collect();
    let exact_run = measure(&default, &base, layout, ticks).await;
    let hnsw_run = measure(&hnsw, &base, layout, ticks).await;
    let exact_vs_hnsw = agreement(&exact_run.ids, &hnsw_run.ids);

    // What each path's statement did: the plan PostgreSQL chose for one NPC's recall, the
    // indexes it used and the buffers it touched. A figure labelled HNSW stands only if
    // that plan used the HNSW index.
    let probe = HashingEmbedder.embed_one(&sentence(12_345));
    let mut paths = serde_json::Map::new();
    paths.insert(
        "exact".into(),
        explain("exact", &default, NpcId(7), &probe).await,
    );
    paths.insert(
        "hnsw".into(),
        explain("hnsw", &hnsw, NpcId(7), &probe).await,
    );
    let hnsw_used = uses_hnsw(&paths["hnsw"]);
    let exact_off_hnsw = !uses_hnsw(&paths["exact"]);
    println!(
        "recall top-5, exact per NPC:   {}{}",
        exact_run.line(),
        exact_verdict(exact_off_hnsw)
    );
    println!(
        "recall top-5, HNSW iterative:  {} ({exact_vs_hnsw:.3} against the exact path){}",
        hnsw_run.line(),
        hnsw_verdict(hnsw_used)
    );
    figures.insert("hnsw_plan_used_hnsw".into(), hnsw_used.into());
    figures.insert("exact_plan_off_hnsw".into(), exact_off_hnsw.into());
    exact_run.publish(&mut figures, "recall_exact");
    if hnsw_used {
        hnsw_run.publish(&mut figures, "recall_hnsw");
    }

    // 5. The heavy NPCs, past `exact_scan_max`: the store as runs configure it (which
    // takes the HNSW path for them) against an exact scan of every row they have.
    if heavy > 0 && heavy_queries > 0 {
        let heavy_set: Vec<(NpcId, Vec<f32>)> = (0..heavy_queries)
            .map(|q| {
                let npc = NpcId((npcs + q % heavy) as u32);
                (npc, HashingEmbedder.embed_one(&sentence(q * 37 + 11)))
            })
            .collect();
        let path = measure(&default, &heavy_set, layout, ticks).await;
        let scan = measure(&exact, &heavy_set, layout, ticks).await;
        let agree = agreement(&scan.ids, &path.ids);
        let heavy_npc = NpcId(npcs as u32);
        let plan_path = explain("heavy, as runs", &default, heavy_npc, &probe).await;
        let plan_scan = explain("heavy, exact", &exact, heavy_npc, &probe).await;
        let heavy_hnsw_used = uses_hnsw(&plan_path);
        let scan_off_hnsw = !uses_hnsw(&plan_scan);
        paths.insert("heavy_hnsw".into(), plan_path);
        paths.insert("heavy_exact".into(), plan_scan);
        println!(
            "heavy NPCs ({heavy_each} memories), as runs recall: {} ({agree:.3} of its ids also the exact scan's: ties with the fifth go either way){}",
            path.line(),
            hnsw_verdict(heavy_hnsw_used)
        );
        println!(
            "heavy NPCs ({heavy_each} memories), exact scan:     {}{}",
            scan.line(),
            exact_verdict(scan_off_hnsw)
        );
        figures.insert("heavy_npcs".into(), heavy.into());
        figures.insert("heavy_memories_each".into(), heavy_each.into());
        figures.insert("heavy_plan_used_hnsw".into(), heavy_hnsw_used.into());
        if heavy_hnsw_used {
            path.publish(&mut figures, "recall_heavy_hnsw");
            figures.insert("recall_heavy_hnsw_vs_exact".into(), agree.into());
        }
        if scan_off_hnsw {
            scan.publish(&mut figures, "recall_heavy_exact");
        }
        // The HNSW path's one knob, `hnsw.ef_search` (`PgOptions::ef_search`): the same
        // queries at each value, each with its plan, so the trade between latency and
        // recall@5 is measured rather than guessed. A row whose plan left the HNSW index
        // is marked and gets no figures.
        let mut sweep = Vec::new();
        for ef in EF_SWEEP {
            let store = attach(PgOptions {
                ef_search: ef,
                ..options_default.clone()
            })
            .await;
            let run = measure(&store, &heavy_set, layout, ticks).await;
            let plan = explain(&format!("heavy, ef_search {ef}"), &store, heavy_npc, &probe).await;
            let used = uses_hnsw(&plan);
            println!(
                "heavy NPCs, ef_search {ef:>3}:          {}{}",
                run.line(),
                hnsw_verdict(used)
            );
            let mut row = serde_json::Map::new();
            row.insert("ef_search".into(), ef.into());
            row.insert("plan_used_hnsw".into(), used.into());
            row.insert("buffers".into(), plan["buffers"].clone());
            if used {
                run.publish(&mut row, "recall");
            }
            sweep.push(serde_json::Value::Object(row));
        }
        figures.insert("heavy_ef_sweep".into(), sweep.into());
        figures.insert("heavy_queries".into(), heavy_queries.into());
    }
    figures.insert("plans".into(), paths.into());
    figures.insert("memories".into(), total.into());
    figures.insert("npcs".into(), npcs.into());
    if let Some(path) = arg(&args, "--json") {
        std::fs::write(&path, serde_json::to_string_pretty(&figures).expect("json"))
            .expect("write json");
    }
}

/// One recall path over a set of queries: each recall's latency, and its top 5 scored
/// against the brute force.
struct Measured {
    /// Latencies, ms, sorted.
    ms: Vec<f64>,
    /// Of the 5 returned per query, how many are among the brute force's best (ties with
    /// the fifth counted).
    hits: u64,
    /// The ids each query returned, in query order.
    ids: Vec<Vec<u64>>,
    /// Recalls the HNSW path answered short, so that the store ran the exact scan
    /// instead (their latency is in `ms`).
    fell_back: u64,
}

impl Measured {
    fn p(&self, p: f64) -> f64 {
        percentile(&self.ms, p)
    }

    fn at_5(&self) -> f64 {
        self.hits as f64 / (5 * self.ids.len().max(1)) as f64
    }

    /// `{prefix}_p50_ms`, `{prefix}_p95_ms` and `{prefix}_at_5` into the figures.
    fn publish(&self, figures: &mut serde_json::Map<String, serde_json::Value>, prefix: &str) {
        figures.insert(format!("{prefix}_p50_ms"), self.p(0.5).into());
        figures.insert(format!("{prefix}_p95_ms"), self.p(0.95).into());
        figures.insert(format!("{prefix}_at_5"), self.at_5().into());
        figures.insert(format!("{prefix}_fell_back"), self.fell_back.into());
    }

    fn line(&self) -> String {
        format!(
            "p50 {:.2} ms, p95 {:.2} ms, recall@5 {:.3} against brute force{}",
            self.p(0.5),
            self.p(0.95),
            self.at_5(),
            match self.fell_back {
                0 => String::new(),
                n => format!(
                    "; {n} of {} answered by the exact scan (the HNSW scan came back short)",
                    self.ids.len()
                ),
            }
        )
    }
}

/// Runs every query through `store`'s recall, top 5, and scores each answer against the
/// truth, independent of PostgreSQL and of the store's arithmetic: every memory the NPC
/// was given, embedded again here, cosine summed in f64.
async fn measure(
    store: &PgStore,
    queries: &[(NpcId, Vec<f32>)],
    layout: Layout,
    now: u64,
) -> Measured {
    let scoring = Scoring::COSINE;
    let short_before = store.hnsw_short_recalls();
    let mut m = Measured {
        ms: Vec::with_capacity(queries.len()),
        hits: 0,
        ids: Vec::with_capacity(queries.len()),
        fell_back: 0,
    };
    for (npc, vector) in queries {
        let t = Instant::now();
        let got = store
            .recall(*npc, vector, now, 5, &scoring)
            .await
            .expect("recall");
        m.ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(got.len(), 5, "recall returns k");
        let truth = brute_force_top5(vector, &layout.ids_of(u64::from(npc.0)));
        let fifth = truth[truth.len() - 1].0;
        // A memory tied with the fifth best counts: ties may go either way.
        m.hits += got
            .iter()
            .filter(|r| {
                let v = HashingEmbedder.embed_one(&sentence(r.memory.id.0));
                cosine64(vector, &v) >= fifth - 1e-6
            })
            .count() as u64;
        m.ids.push(got.iter().map(|r| r.memory.id.0).collect());
    }
    m.ms.sort_by(f64::total_cmp);
    m.fell_back = store.hnsw_short_recalls() - short_before;
    m
}

/// The share of `b`'s ids that `a` returned for the same query.
fn agreement(a: &[Vec<u64>], b: &[Vec<u64>]) -> f64 {
    let (mut same, mut all) = (0usize, 0usize);
    for (a, b) in a.iter().zip(b) {
        same += b.iter().filter(|id| a.contains(id)).count();
        all += b.len();
    }
    same as f64 / all.max(1) as f64
}

/// Whether a plan probed by [`explain`] used the HNSW index.
fn uses_hnsw(plan: &serde_json::Value) -> bool {
    plan["indexes"]
        .as_array()
        .is_some_and(|i| i.iter().any(|n| n == "memory_vectors_hnsw"))
}

/// What a figure labelled HNSW gets printed beside it: nothing if its plan used the
/// HNSW index, else that it is not an HNSW figure (and it is not published).
fn hnsw_verdict(used: bool) -> &'static str {
    if used {
        ", its plan on the HNSW index"
    } else {
        " — NOT AN HNSW FIGURE: its plan did not use the HNSW index"
    }
}

/// What an exact path's figure gets printed beside it: a warning if its plan used the
/// HNSW index after all.
fn exact_verdict(off_hnsw: bool) -> &'static str {
    if off_hnsw {
        ""
    } else {
        " (BUT ITS PLAN USED THE HNSW INDEX)"
    }
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of the statement `store`'s recall runs for `npc`: the
/// indexes its plan used, whether it scanned sequentially, the buffers it read, the plan;
/// printed under `label`.
async fn explain(label: &str, store: &PgStore, npc: NpcId, probe: &[f32]) -> serde_json::Value {
    let plan = store
        .explain_recall(npc, probe, 5, &Scoring::COSINE)
        .await
        .expect("explain");
    let indexes = plan_indexes(&plan);
    let buffers = plan
        .iter()
        .find(|l| l.trim_start().starts_with("Buffers:"))
        .map(|l| l.trim().to_owned())
        .unwrap_or_default();
    let seq = plan.iter().any(|l| l.contains("Seq Scan"));
    println!(
        "plan, {label} path: indexes {indexes:?}{}; {buffers}",
        if seq { ", a sequential scan" } else { "" }
    );
    for line in &plan {
        println!("    {line}");
    }
    serde_json::json!({ "indexes": indexes, "seq_scan": seq, "buffers": buffers, "plan": plan })
}
