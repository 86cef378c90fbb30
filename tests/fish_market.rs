//! The design's own example, end to end: Bob knows the market sells fresh fish, Alice
//! hears it from him and then walks to the market; every memory follows the weighting.

use std::collections::BTreeMap;
use std::path::Path;

use hearsay_tests::{of_type, read_jsonl, run_ok, scenario, sqlite_rows, summary};
use serde_json::Value;
use sqlx::Row;

const MARKET: [i64; 2] = [15, 8];

/// (kind, content, importance, from) per (tick, NPC).
type MemoriesByTickAndNpc = BTreeMap<(u64, String), Vec<(String, String, u64, Option<String>)>>;

fn pos(v: &Value) -> [i64; 2] {
    [v[0].as_i64().expect("x"), v[1].as_i64().expect("y")]
}

#[test]
fn alice_learns_fresh_fish_from_bob_then_reaches_the_market() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    let output = run_ok(&scenario("fish-market.toml"), &out, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("fact \"fresh fish\""),
        "the fact table is printed:\n{stdout}"
    );
    assert!(
        stdout.contains("half of the NPCs knew it by tick"),
        "{stdout}"
    );
    readme_transcript_is_what_the_run_printed(&stdout, &out);

    for file in [
        "scenario.toml",
        "events.jsonl.zst",
        "llm.jsonl.zst",
        "memories.db",
        "summary.json",
    ] {
        assert!(out.join(file).is_file(), "{file} is in the run directory");
    }
    assert_eq!(
        std::fs::read(out.join("scenario.toml")).expect("copy"),
        std::fs::read(scenario("fish-market.toml")).expect("original"),
        "scenario.toml is an exact copy"
    );

    let s = summary(&out);
    assert_eq!(s["scenario"], "fish-market");
    assert_eq!(s["seed"], 42);
    assert_eq!(s["ticks"], 240);
    let fish = &s["facts"][0];
    assert_eq!(fish["name"], "fresh fish");
    let knowers = fish["knowers"].as_array().expect("knowers");
    assert_eq!(
        knowers[0],
        serde_json::json!({"npc": "Bob", "tick": 0, "from": null, "depth": 0, "similarity": 1.0,
                           "memory": 1, "words": "The market nearby is selling fresh fish."})
    );
    let alice = knowers
        .iter()
        .find(|k| k["npc"] == "Alice")
        .expect("Alice learns it");
    assert_eq!(alice["from"], "Bob");
    assert_eq!(alice["depth"], 1);
    assert_eq!(
        alice["words"],
        "Bob said: The market nearby is selling fresh fish."
    );
    let sim = alice["similarity"].as_f64().expect("similarity");
    assert!(
        sim > 0.6 && sim < 1.0,
        "Bob's words with an attribution: {sim}"
    );
    let learned = alice["tick"].as_u64().expect("tick");
    let curve = fish["curve"].as_array().expect("curve");
    assert_eq!(curve[0], serde_json::json!([0, 1]));
    assert_eq!(
        curve.last().expect("point")[1].as_u64(),
        Some(knowers.len() as u64)
    );
    assert_eq!(
        s["degraded"],
        serde_json::json!({"recall_failures": 0, "brain_failures": 0, "barrier_timeouts": 0, "embed_retries": 0, "fallbacks": 0, "reflection_failures": 0})
    );

    let events = read_jsonl(&out.join("events.jsonl"));
    let reached = events.iter().any(|e| {
        e["npc"] == "Alice"
            && e["tick"].as_u64() >= Some(learned)
            && ((e["type"] == "move" && pos(&e["to"]) == MARKET)
                || (e["type"] == "stay" && pos(&e["at"]) == MARKET))
    });
    assert!(
        reached,
        "Alice reaches the market after learning at tick {learned}"
    );
    let heard = of_type(&events, "memory")
        .into_iter()
        .find(|m| m["npc"] == "Alice" && m["from"] == "Bob")
        .expect("Alice has a memory of Bob's words");
    assert_eq!(
        heard["content"],
        "Bob said: The market nearby is selling fresh fish."
    );
    assert_eq!(heard["importance"], 8);
    assert_eq!(heard["kind"], "conversation");
}

/// README's "What a run prints" is this run's output, line for line, as it would print
/// into `runs/fish-market-seed42`: only the `time:` line, which is the machine's, is held to
/// its form alone.
fn readme_transcript_is_what_the_run_printed(stdout: &str, out: &Path) {
    let printed = stdout.replace(out.to_str().expect("UTF-8 path"), "runs/fish-market-seed42");
    readme_transcript_is(
        "$ cargo run --release -- run scenarios/fish-market.toml\n",
        &printed,
        |line| line.starts_with("time: ") && line.ends_with(" ticks/s"),
    );
}

/// The README's transcript that follows `command` in a code block, against `printed`
/// line for line; a line `timed` accepts is the machine's (a time) and is held only to
/// its form, on both sides.
fn readme_transcript_is(command: &str, printed: &str, timed: impl Fn(&str) -> bool) {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .expect("README.md");
    let transcript = readme
        .split_once(command)
        .unwrap_or_else(|| panic!("README shows {command:?}"))
        .1
        .split_once("```")
        .expect("the transcript's block ends")
        .0;
    let (want, got): (Vec<&str>, Vec<&str>) =
        (transcript.lines().collect(), printed.lines().collect());
    assert_eq!(
        want.len(),
        got.len(),
        "README's transcript of {command:?} has {} lines, the command printed {}:\n{printed}",
        want.len(),
        got.len()
    );
    for (w, g) in want.iter().zip(&got) {
        if timed(w) {
            assert!(timed(g), "a line of times, in its form: {g}");
        } else {
            assert_eq!(
                w, g,
                "README's transcript of {command:?} differs from the output:\n{printed}"
            );
        }
    }
}

/// README's sweep transcript is what `hearsay sweep scenarios/fish-market.toml --seeds
/// 1..5` prints (its table on stdout, then the line of times on stderr) into
/// `runs/fish-market-sweep`.
#[test]
fn readme_sweep_transcript_is_what_the_sweep_prints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("sweep");
    let sweep = hearsay_tests::hearsay(
        &hearsay_tests::root(),
        &[
            "sweep",
            "scenarios/fish-market.toml",
            "--seeds",
            "1..5",
            "--jobs",
            "2",
            "--no-progress",
            "--out",
            hearsay_tests::path_str(&out),
        ],
    );
    assert!(
        sweep.status.success(),
        "{}",
        String::from_utf8_lossy(&sweep.stderr)
    );
    let stderr = String::from_utf8_lossy(&sweep.stderr);
    let times = stderr.lines().last().unwrap_or_default();
    let printed = format!("{}{times}\n", String::from_utf8_lossy(&sweep.stdout))
        .replace(hearsay_tests::path_str(&out), "runs/fish-market-sweep");
    readme_transcript_is(
        "$ hearsay sweep scenarios/fish-market.toml --seeds 1..5\n",
        &printed,
        |line| {
            line.starts_with("5 runs in ")
                && line.contains(" s with 2 jobs: ")
                && line.ends_with(" runs per minute; runs/fish-market-sweep/sweep.json")
        },
    );
}

/// talk → speaker `I said to everyone: …` (8) and listeners `<speaker> said: …` (8);
/// move → `I decided to move to (x, y)` (4); stay → nothing. Checked against every
/// action of the run, then against the rows in memories.db.
#[test]
fn memories_follow_talk_8_move_4_stay_filtered_and_are_all_embedded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(
        &scenario("fish-market.toml"),
        &out,
        &["--ticks", "120", "--seed", "5"],
    );
    let events = read_jsonl(&out.join("events.jsonl"));

    let mut expected: MemoriesByTickAndNpc = BTreeMap::new();
    let mut expect =
        |tick: u64, npc: &str, kind: &str, content: String, importance: u64, from: Option<&str>| {
            expected.entry((tick, npc.to_owned())).or_default().push((
                kind.to_owned(),
                content,
                importance,
                from.map(str::to_owned),
            ));
        };
    let (mut talks, mut moves, mut stays) = (0, 0, 0);
    for e in &events {
        let tick = e["tick"].as_u64().unwrap_or(0);
        let npc = e["npc"].as_str().unwrap_or("");
        match e["type"].as_str() {
            Some("talk") => {
                talks += 1;
                let text = e["text"].as_str().expect("text");
                expect(
                    tick,
                    npc,
                    "conversation",
                    format!("I said to everyone: {text}"),
                    8,
                    None,
                );
                for listener in e["listeners"].as_array().expect("listeners") {
                    let l = listener.as_str().expect("name");
                    expect(
                        tick,
                        l,
                        "conversation",
                        format!("{npc} said: {text}"),
                        8,
                        Some(npc),
                    );
                }
            }
            Some("move") => {
                moves += 1;
                let [x, y] = pos(&e["target"]);
                expect(
                    tick,
                    npc,
                    "observation",
                    format!("I decided to move to ({x}, {y})"),
                    4,
                    None,
                );
            }
            Some("stay") => stays += 1,
            Some("scenario_event") => {
                for w in e["witnesses"].as_array().expect("witnesses") {
                    let text = e["text"].as_str().expect("text");
                    let place = e["place"].as_str().expect("place");
                    expect(
                        tick,
                        w.as_str().expect("name"),
                        "observation",
                        format!("I saw at the {place}: {text}"),
                        6,
                        None,
                    );
                }
            }
            _ => {}
        }
    }
    assert!(
        talks > 0 && moves > 0 && stays > 0,
        "the run exercises all three actions: {talks} {moves} {stays}"
    );

    // Reflections are not actions: each follows a `reflected` line of its NPC's and
    // cites only that NPC's earlier memories.
    let owner: BTreeMap<u64, (String, u64)> = of_type(&events, "memory")
        .iter()
        .map(|m| {
            (
                m["id"].as_u64().expect("id"),
                (
                    m["npc"].as_str().expect("npc").to_owned(),
                    m["tick"].as_u64().expect("tick"),
                ),
            )
        })
        .collect();
    let reflected: std::collections::BTreeSet<(u64, String)> = of_type(&events, "reflected")
        .iter()
        .map(|r| {
            (
                r["tick"].as_u64().expect("tick"),
                r["npc"].as_str().expect("npc").to_owned(),
            )
        })
        .collect();
    let mut reflections = 0;
    for m in of_type(&events, "memory")
        .into_iter()
        .filter(|m| m["kind"] == "reflection")
    {
        reflections += 1;
        let npc = m["npc"].as_str().expect("npc");
        let tick = m["tick"].as_u64().expect("tick");
        assert!(reflected.contains(&(tick, npc.to_owned())), "{m}");
        let evidence = m["evidence"].as_array().expect("evidence");
        assert!(!evidence.is_empty(), "{m}");
        for id in evidence {
            let (whose, when) = &owner[&id.as_u64().expect("id")];
            assert!(whose == npc && *when < tick, "{m} cites {id}");
        }
    }
    assert!(
        reflections > 0,
        "240 ticks of gossip reach the reflection threshold"
    );

    let mut actual: MemoriesByTickAndNpc = BTreeMap::new();
    for m in of_type(&events, "memory") {
        if m["kind"] == "seed" || m["kind"] == "reflection" {
            continue;
        }
        actual
            .entry((
                m["tick"].as_u64().expect("tick"),
                m["npc"].as_str().expect("npc").to_owned(),
            ))
            .or_default()
            .push((
                m["kind"].as_str().expect("kind").to_owned(),
                m["content"].as_str().expect("content").to_owned(),
                m["importance"].as_u64().expect("importance"),
                m["from"].as_str().map(str::to_owned),
            ));
    }
    for list in expected.values_mut().chain(actual.values_mut()) {
        list.sort();
    }
    assert_eq!(
        actual, expected,
        "memories are exactly what the actions imply"
    );

    let rows = store_rows(&out.join("memories.db"));
    let logged = of_type(&events, "memory").len();
    assert_eq!(
        rows.len(),
        logged,
        "every logged memory is stored, and nothing else"
    );
    for (id, kind, importance, dims, model) in &rows {
        assert_eq!(*dims, Some(1536), "memory {id} is embedded with 1536 dims");
        assert_eq!(model.as_deref(), Some("hashing-v1"));
        assert!(["seed", "conversation", "observation", "reflection"].contains(&kind.as_str()));
        assert!((1..=10).contains(importance));
    }
    let s = summary(&out);
    assert_eq!(s["memories"]["unembedded"], 0);
    assert_eq!(s["memories"]["total"], logged);
}

type StoredRow = (i64, String, i64, Option<i64>, Option<String>);

fn store_rows(db: &Path) -> Vec<StoredRow> {
    sqlite_rows(
        db,
        "SELECT id, kind, importance, embedding_dims, embedding_model FROM memories ORDER BY id",
    )
    .iter()
    .map(|r| {
        (
            r.get("id"),
            r.get("kind"),
            r.get("importance"),
            r.get("embedding_dims"),
            r.get("embedding_model"),
        )
    })
    .collect()
}
