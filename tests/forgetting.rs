//! The brain that forgets, end to end: recency decay in recall, forgetting that archives
//! and never deletes, reflection past a threshold with its evidence, chunking of long
//! Chinese and emoji text, and `hearsay inspect` agreeing with what brains were given.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hearsay_memory::{Chunking, Forgetting, HashingEmbedder, VECTOR_DIMS, fit_dims};
use hearsay_tests::mock::{ChatCall, MockServer, Reply};
use hearsay_tests::{
    hearsay, of_type, path_str, read_jsonl, root, run_ok, scenario, sqlite_rows, summary,
};
use serde_json::Value;
use sqlx::Row;

fn inspect_json(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["inspect", path_str(dir), "--json"];
    all.extend_from_slice(args);
    let out = hearsay(&root(), &all);
    assert!(
        out.status.success(),
        "inspect {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("inspect --json prints JSON")
}

/// A hermit at a well on a tiny map hears the same rumour at tick 2 and at tick 60. A
/// core memory of importance 10 takes the only recall slot every tick, so neither rumour
/// is ever recalled: only their age tells them apart.
fn hermit(decay: f64) -> String {
    format!(
        "name = \"hermit\"\nseed = 5\nticks = 100\n\n[world]\nwidth = 3\nheight = 3\nhearing_radius = 1\nsight_radius = 3\n\n\
         [[places]]\nname = \"well\"\nat = [1, 1]\n\n\
         [[npcs]]\nname = \"Hermit\"\nat = [1, 1]\nmemories = [{{ content = \"I keep the well and I never leave it.\", importance = 10 }}]\n\n\
         [[events]]\ntick = 2\nplace = \"well\"\ntext = \"Rumour: the mill is haunted.\"\nimportance = 8\n\n\
         [[events]]\ntick = 60\nplace = \"well\"\ntext = \"Rumour: the mill is haunted.\"\nimportance = 8\n\n\
         [memory]\nrecall_k = 1\n\n[memory.scoring]\nw_imp = 10.0\ndecay = {decay}\n"
    )
}

#[test]
fn decay_makes_a_fresh_rumour_beat_an_old_one_of_the_same_importance() {
    let dir = tempfile::tempdir().expect("tempdir");
    let order = |decay: f64| {
        let file = dir.path().join(format!("hermit-{decay}.toml"));
        std::fs::write(&file, hermit(decay)).expect("write");
        let out = dir.path().join(format!("run-{decay}"));
        run_ok(&file, &out, &[]);
        let report = inspect_json(
            &out,
            &["--npc", "Hermit", "--query", "Is the mill haunted?"],
        );
        let rumours: Vec<&Value> = report["memories"]
            .as_array()
            .expect("memories")
            .iter()
            .filter(|m| m["content"].as_str().is_some_and(|c| c.contains("haunted")))
            .collect();
        assert_eq!(rumours.len(), 2, "{report:#}");
        assert_eq!(
            rumours[0]["query"]["relevance"],
            rumours[1]["query"]["relevance"]
        );
        assert_eq!(rumours[0]["importance"], rumours[1]["importance"]);
        for r in &rumours {
            assert_eq!(r["recalls"], 0, "never recalled: {r}");
        }
        rumours
            .iter()
            .map(|r| {
                (
                    r["tick"].as_u64().expect("tick"),
                    r["query"]["score"].as_f64().expect("score"),
                )
            })
            .collect::<Vec<_>>()
    };
    let with_decay = order(0.99);
    assert_eq!(
        with_decay[0].0, 60,
        "the fresh rumour ranks first: {with_decay:?}"
    );
    assert!(with_decay[0].1 > with_decay[1].1);
    let without = order(1.0);
    assert_eq!(
        without[0].1, without[1].1,
        "without decay they tie: {without:?}"
    );
    assert_eq!(without[0].0, 2, "and the tie goes to the older id");
}

/// fish-market with memories that fade within tens of ticks.
fn forgetful_fish_market(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(scenario("fish-market.toml")).expect("scenario");
    let file = dir.join("forgetful.toml");
    std::fs::write(
        &file,
        format!("{text}\n[memory.forget]\nthreshold = 0.05\nstrength = 2.0\nrecall_boost = 1.0\n"),
    )
    .expect("write");
    file
}

#[test]
fn forgotten_memories_leave_recall_but_stay_in_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(
        &forgetful_fish_market(dir.path()),
        &out,
        &["--ticks", "150"],
    );
    let events = read_jsonl(&out.join("events.jsonl"));
    let forgot: BTreeMap<u64, u64> = of_type(&events, "forgot")
        .iter()
        .map(|f| {
            (
                f["id"].as_u64().expect("id"),
                f["tick"].as_u64().expect("tick"),
            )
        })
        .collect();
    assert!(forgot.len() > 100, "{} forgotten", forgot.len());
    let s = summary(&out);
    assert_eq!(s["memories"]["archived"], forgot.len());

    // Recall never returns a memory once it is forgotten.
    let mut recalls: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for e in events
        .iter()
        .filter(|e| matches!(e["type"].as_str(), Some("talk" | "move" | "stay")))
    {
        let tick = e["tick"].as_u64().expect("tick");
        for id in e["recalled"].as_array().expect("recalled") {
            let id = id.as_u64().expect("id");
            if let Some(&at) = forgot.get(&id) {
                assert!(
                    tick < at,
                    "memory {id} recalled at {tick}, forgotten at {at}"
                );
            }
            recalls.entry(id).or_default().push(tick);
        }
    }

    // Each was archived exactly when the curve says, given its importance and recalls:
    // a recalled memory lasts longer.
    let policy = Forgetting {
        threshold: 0.05,
        strength_per_importance: 2.0,
        recall_boost: 1.0,
    };
    let mut strengthened = 0;
    for m in of_type(&events, "memory") {
        let id = m["id"].as_u64().expect("id");
        let created = m["tick"].as_u64().expect("tick");
        let importance = m["importance"].as_u64().expect("importance") as u8;
        let core = m["kind"] == "seed";
        let seen: Vec<u64> = recalls.get(&id).cloned().unwrap_or_default();
        let mut ticks: Vec<u64> = seen.clone();
        ticks.dedup();
        let last = ticks.last().copied().unwrap_or(created);
        let due = policy.fades_at(importance, ticks.len() as u32, core, last);
        match forgot.get(&id) {
            Some(&at) => {
                assert_eq!(Some(at), due, "memory {id}: {m}");
                strengthened += usize::from(!ticks.is_empty());
            }
            None => assert!(
                due.is_none_or(|d| d >= 150),
                "memory {id} should have faded at {due:?}"
            ),
        }
    }
    assert!(
        strengthened > 0,
        "some forgotten memories had been recalled first"
    );

    // Still in the store, with their vectors, marked with the tick they were archived.
    let rows = sqlite_rows(
        &out.join("memories.db"),
        "SELECT m.id, m.forgotten_tick, count(v.id) AS vectors FROM memories m \
         LEFT JOIN memory_vectors v ON v.id = m.id WHERE m.forgotten_tick IS NOT NULL GROUP BY m.id",
    );
    assert_eq!(rows.len(), forgot.len());
    for r in &rows {
        let id: i64 = r.get("id");
        let at: i64 = r.get("forgotten_tick");
        assert_eq!(forgot.get(&(id as u64)).copied(), Some(at as u64));
        assert!(
            r.get::<i64, _>("vectors") >= 1,
            "memory {id} kept its vector"
        );
    }

    // inspect hides them unless asked, then marks them.
    let alice = inspect_json(&out, &["--npc", "Alice"]);
    let all = inspect_json(&out, &["--npc", "Alice", "--all"]);
    let archived = all["archived"].as_u64().expect("archived");
    assert!(archived > 0);
    assert_eq!(
        all["memories"].as_array().expect("rows").len() as u64,
        alice["memories"].as_array().expect("rows").len() as u64 + archived
    );
    assert!(
        alice["memories"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|m| m["archived"].is_null())
    );

    // And the replay forgets the same memories at the same ticks.
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 150 ticks"
    );
}

#[test]
fn reflections_follow_the_threshold_and_cite_their_evidence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &out, &[]);
    let events = read_jsonl(&out.join("events.jsonl"));
    let memories: Vec<&Value> = of_type(&events, "memory");
    let reflected = of_type(&events, "reflected");
    assert!(reflected.len() >= 4, "{} reflections", reflected.len());
    let mut since: BTreeMap<String, u64> = BTreeMap::new();
    for r in &reflected {
        let npc = r["npc"].as_str().expect("npc").to_owned();
        let tick = r["tick"].as_u64().expect("tick");
        let from = since.get(&npc).copied().unwrap_or(0);
        let own = |until: u64| -> Vec<&Value> {
            memories
                .iter()
                .copied()
                .filter(|m| {
                    m["npc"] == npc.as_str()
                        && m["kind"] != "seed"
                        && m["kind"] != "reflection"
                        && (from..until).contains(&m["tick"].as_u64().expect("tick"))
                })
                .collect()
        };
        let sum = |ms: &[&Value]| -> u64 {
            ms.iter()
                .map(|m| m["importance"].as_u64().expect("importance"))
                .sum()
        };
        let accumulated = sum(&own(tick));
        assert_eq!(r["importance"].as_u64(), Some(accumulated), "{r}");
        assert!(accumulated >= 150, "reflected below the threshold: {r}");
        assert!(
            sum(&own(tick - 1)) < 150,
            "{npc} was due before tick {tick}: {r}"
        );
        // Its insights cite only what it had experienced since its last reflection.
        let window: BTreeSet<u64> = own(tick)
            .iter()
            .map(|m| m["id"].as_u64().expect("id"))
            .collect();
        let insights: Vec<&&Value> = memories
            .iter()
            .filter(|m| m["kind"] == "reflection" && m["npc"] == npc.as_str() && m["tick"] == tick)
            .collect();
        assert_eq!(
            insights.len() as u64,
            r["insights"].as_u64().expect("insights")
        );
        for i in insights {
            let evidence = i["evidence"].as_array().expect("evidence");
            assert!(!evidence.is_empty(), "{i}");
            for e in evidence {
                assert!(window.contains(&e.as_u64().expect("id")), "{i} cites {e}");
            }
        }
        since.insert(npc, tick);
    }
    // The tape holds the insights, so the replay makes the same reflections.
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 240 ticks"
    );
}

const STORY: &str = "很久以前，河上的老桥在春天的洪水中倒塌了。磨坊主的祖父带着绳子游过河，全村人一起把装满粮食的车拉回了岸边。🌊🌉🪢 从那以后，河水高涨时没有人再过那座桥。👨‍👩‍👧‍👦 每年春天，孩子们都会在井边听这个故事。🇨🇳 最后一句：渡口的船夫会吹笛子。";

#[test]
fn long_chinese_and_emoji_memories_are_chunked_and_found_by_any_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("story.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"story\"\nseed = 1\nticks = 3\nlanguage = \"zh\"\n\n[world]\nwidth = 8\nheight = 8\nhearing_radius = 2\n\n\
             [[npcs]]\nname = \"米拉\"\nat = [1, 1]\nmemories = [{{ content = \"{STORY}\", importance = 9 }}]\n\n\
             [[npcs]]\nname = \"托马斯\"\nat = [6, 6]\n\n[memory]\nchunk_chars = 32\nchunk_overlap = 6\n"
        ),
    )
    .expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &[]);
    let chunking = Chunking {
        chars: 32,
        overlap: 6,
    };
    let expected = chunking.split(STORY).len();
    assert!(expected >= 4);
    let rows = sqlite_rows(
        &out.join("memories.db"),
        "SELECT m.content, count(v.id) AS chunks FROM memories m JOIN memory_vectors v ON v.id = m.id \
         WHERE m.id = 1 GROUP BY m.id",
    );
    assert_eq!(rows[0].get::<String, _>("content"), STORY, "stored exactly");
    assert_eq!(rows[0].get::<i64, _>("chunks") as usize, expected);

    // The last sentence is found through its own chunk.
    let query = "渡口的船夫会吹笛子";
    let report = inspect_json(&out, &["--npc", "米拉", "--query", query, "--at-tick", "1"]);
    let first = &report["memories"][0];
    assert_eq!(first["id"], 1, "{report:#}");
    assert_eq!(first["content"], STORY);
    assert_eq!(first["chunks"].as_u64(), Some(expected as u64));
    assert_eq!(report["recalled"][0], 1);
    let q = fit_dims(HashingEmbedder.embed_one(query), VECTOR_DIMS);
    let best = chunking
        .chunks(STORY)
        .into_iter()
        .map(|c| {
            hearsay_memory::scoring::similarity_key(hearsay_memory::embed::dot(
                &q,
                &fit_dims(HashingEmbedder.embed_one(c), VECTOR_DIMS),
            ))
        })
        .fold(f32::MIN, f32::max);
    let whole =
        hearsay_memory::embed::dot(&q, &fit_dims(HashingEmbedder.embed_one(STORY), VECTOR_DIMS));
    assert!(
        best > whole + 0.1,
        "a chunk matches better than the whole: {best} vs {whole}"
    );
    assert_eq!(
        first["query"]["relevance"].as_f64().map(|r| r as f32),
        Some(best),
        "relevance is the best chunk's"
    );
}

#[test]
fn inspect_scores_equal_what_the_brain_was_given() {
    // A model's calls keep the scores of what they were given on the tape (the heuristic
    // brain's leave them out: inspect computes them, which is what is checked here), so
    // the forgetful market thinks through an OpenAI-compatible brain: the mock server,
    // scripted to talk, walk and stay.
    let mock = MockServer::start(|call: &ChatCall| {
        let n = call.npc.len() as u64 + call.tick;
        Reply::answer(match n % 3 {
            0 => format!(
                r#"{{"action":"talk","speech":"{} says the fish is fresh at tick {}","x":0,"y":0}}"#,
                call.npc, call.tick
            ),
            1 => format!(
                r#"{{"action":"move","speech":"","x":{},"y":{}}}"#,
                n % 20,
                n % 10
            ),
            _ => r#"{"action":"stay","speech":"","x":0,"y":0}"#.to_owned(),
        })
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let heuristic = std::fs::read_to_string(forgetful_fish_market(dir.path())).expect("scenario");
    assert!(heuristic.contains("provider = \"heuristic\""));
    let served = dir.path().join("served.toml");
    std::fs::write(
        &served,
        heuristic.replacen(
            "provider = \"heuristic\"",
            &format!(
                "provider = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock-model\"\nthink = \"every_tick\"",
                mock.url
            ),
            1,
        ),
    )
    .expect("write");
    run_ok(&served, &out, &["--ticks", "120"]);
    assert!(mock.decisions().len() >= 400, "the model decided");
    let calls = read_jsonl(&out.join("llm.jsonl"));
    assert!(calls.iter().all(|c| c["provider"] == "openai"));
    let mut checked = 0;
    for call in calls.iter().filter(|c| {
        let t = c["tick"].as_u64().unwrap_or(0);
        [0, 7, 33, 80, 119].contains(&t)
    }) {
        let tick = call["tick"].as_u64().expect("tick").to_string();
        let npc = call["npc"].as_str().expect("npc");
        let query = call["recall_query"].as_str().unwrap_or("");
        let report = inspect_json(
            &out,
            &["--npc", npc, "--query", query, "--at-tick", &tick, "--all"],
        );
        assert_eq!(report["recalled"], call["recalled"], "{npc} at {tick}");
        let rows: BTreeMap<u64, &Value> = report["memories"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|m| (m["id"].as_u64().expect("id"), m))
            .collect();
        let none = Vec::new();
        let scores = call["recall_scores"].as_array().unwrap_or(&none);
        assert_eq!(
            scores.len(),
            call["recalled"].as_array().expect("ids").len()
        );
        for (rank, (id, given)) in call["recalled"]
            .as_array()
            .expect("ids")
            .iter()
            .zip(scores)
            .enumerate()
        {
            let row = rows[&id.as_u64().expect("id")];
            let q = &row["query"];
            assert_eq!(q["relevance"], given["relevance"], "{npc} at {tick}: {row}");
            assert_eq!(q["recency"], given["recency"], "{npc} at {tick}: {row}");
            assert_eq!(q["score"], given["score"], "{npc} at {tick}: {row}");
            assert_eq!(q["recalled_rank"], rank + 1);
            assert!(
                row["archived"].is_null(),
                "an archived memory was recalled: {row}"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked} recalled memories compared");

    let unknown = hearsay(&root(), &["inspect", path_str(&out), "--npc", "Nobody"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("NPCs: Bob, Alice, Carol, Dave"));
    let late = hearsay(
        &root(),
        &[
            "inspect",
            path_str(&out),
            "--npc",
            "Bob",
            "--at-tick",
            "121",
        ],
    );
    assert_eq!(late.status.code(), Some(2));
}
