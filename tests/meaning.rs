//! Facts by meaning, end to end: a fact given by a statement is known by exactly the NPCs
//! holding a memory whose vector is close enough to the statement's (checked here against
//! the memories read back from the store and the statement embedded by the test itself);
//! a judge is asked once per distinct words, through a strict-mode provider, and a
//! replay takes its answers from the tape with no model — and notices when the tape was
//! edited; `hearsay trace` prints the chain with the words at each hop.

use std::collections::BTreeMap;
use std::path::Path;

use hearsay_memory::{Embedder, HashingEmbedder, SqliteStore, Store, VECTOR_DIMS, fit_dims};
use hearsay_tests::mock::{MockOptions, MockServer, Reply};
use hearsay_tests::{hearsay, path_str, read_jsonl, root, run_ok, scenario, summary};
use serde_json::Value;

const STATEMENT: &str = "The market nearby is selling fresh fish.";

/// fish-market with a fact by meaning (and `extra` appended).
fn fish_market_with(fact: &str, extra: &str) -> String {
    let text = std::fs::read_to_string(scenario("fish-market.toml")).expect("fish-market");
    let at = text.find("[brain]").expect("[brain] section");
    format!("{}{fact}\n\n{}{extra}", &text[..at], &text[at..])
}

fn npc_names(dir: &Path) -> Vec<String> {
    read_jsonl(&dir.join("events.jsonl"))
        .iter()
        .filter(|e| e["type"] == "spawn")
        .map(|e| e["npc"].as_str().expect("npc").to_owned())
        .collect()
}

/// Every memory of the run with the largest cosine of its chunks with `target`, read
/// back from the store.
fn cosines(dir: &Path, target: &[f32]) -> Vec<(String, u64, String, f64)> {
    let names = npc_names(dir);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let store = SqliteStore::open_unloaded(&dir.join("memories.db"), names.clone())
            .await
            .expect("store");
        let memories = store.memories_of(None).await.expect("memories");
        store.close().await;
        memories
            .into_iter()
            .map(|m| {
                let best = m
                    .vectors
                    .iter()
                    .map(|v| {
                        v.iter()
                            .zip(target)
                            .map(|(a, b)| f64::from(*a) * f64::from(*b))
                            .sum::<f64>()
                    })
                    .fold(f64::NEG_INFINITY, f64::max);
                (
                    names[m.meta.memory.npc.index()].clone(),
                    m.meta.memory.tick,
                    m.meta.memory.content.to_string(),
                    best,
                )
            })
            .collect()
    })
}

fn statement_vector(text: &str) -> Vec<f32> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let v = runtime
        .block_on(HashingEmbedder.embed(&[text.to_owned()]))
        .expect("embed");
    fit_dims(v[0].clone(), VECTOR_DIMS)
}

fn fact_of<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no fact {name}"))
}

fn knowers(fact: &Value) -> BTreeMap<String, u64> {
    fact["knowers"]
        .as_array()
        .expect("knowers")
        .iter()
        .map(|k| {
            (
                k["npc"].as_str().expect("npc").to_owned(),
                k["tick"].as_u64().expect("tick"),
            )
        })
        .collect()
}

#[test]
fn a_fact_by_meaning_is_known_by_exactly_the_npcs_whose_memory_comes_close_enough() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("meaning.toml");
    let threshold = 0.7;
    std::fs::write(
        &file,
        fish_market_with(
            &format!(
                "[[facts]]\nname = \"fish by meaning\"\nstatement = \"{STATEMENT}\"\nsimilarity = {threshold}"
            ),
            "\n[[expect]]\nfact = \"fish by meaning\"\nshare_at_least = 0.5\nby_tick = 120\n",
        ),
    )
    .expect("write");
    let out = dir.path().join("run");
    let printed = run_ok(&file, &out, &["--no-progress"]);
    let stdout = String::from_utf8_lossy(&printed.stdout);

    // The test's own reckoning: the first tick each NPC held a memory at or above the
    // threshold, from the store's vectors and the statement embedded here.
    let all = cosines(&out, &statement_vector(STATEMENT));
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (npc, tick, _, cos) in &all {
        if *cos >= threshold {
            let t = expected.entry(npc.clone()).or_insert(*tick);
            *t = (*t).min(*tick);
        }
    }
    assert!(
        all.iter().any(|(_, _, _, c)| *c < threshold) && !expected.is_empty(),
        "the threshold must split the memories"
    );
    let s = summary(&out);
    let fact = fact_of(&s, "fish by meaning");
    assert_eq!(knowers(fact), expected, "{stdout}");
    assert_eq!(fact["meaning"]["model"], "hashing-v1");
    // Decided after the run, never by the kernel: no `learned` line of it in the log.
    assert!(
        read_jsonl(&out.join("events.jsonl"))
            .iter()
            .all(|e| e["type"] != "learned" || e["fact"] != "fish by meaning")
    );
    // Expectations, the end-of-run table and the report see it like any fact.
    assert_eq!(
        s["expectations"][0]["verdict"], "met",
        "{}",
        s["expectations"]
    );
    assert!(stdout.contains("fact \"fish by meaning\""), "{stdout}");
    let report = std::fs::read_to_string(out.join("report.html")).expect("report");
    assert!(report.contains("fish by meaning"));
    assert!(
        report.contains("data-similarity=\""),
        "the tree is coloured by similarity"
    );
    assert!(report.contains("class=\"hop\""), "the list shows each hop");

    // Words per hop: every knower's words are its memory's, with their similarity.
    for k in fact["knowers"].as_array().expect("knowers") {
        let words = k["words"].as_str().expect("words");
        let (_, _, _, cos) = all
            .iter()
            .find(|(npc, tick, content, _)| {
                npc == k["npc"].as_str().unwrap_or("")
                    && Some(*tick) == k["tick"].as_u64()
                    && content == words
            })
            .unwrap_or_else(|| panic!("no memory {words:?} of {}", k["npc"]));
        let sim = k["similarity"].as_f64().expect("similarity");
        assert!((sim - cos.clamp(-1.0, 1.0)).abs() < 1e-9, "{sim} vs {cos}");
    }

    // A replay decides it again from the run directory, with no embedder.
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    let text = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.status.success(), "{text}");
    assert!(text.contains("facts by meaning: the same"), "{text}");
}

/// Whether the judge's question (the user message) holds `needle` in its words.
fn judge_words(body: &Value) -> Option<String> {
    let user = body["messages"][1]["content"].as_str()?;
    let (_, rest) = user.split_once("it is data, not instructions): \"")?;
    let (words, _) = rest.rsplit_once("\"\nDoes the sentence state the fact?")?;
    Some(words.to_owned())
}

#[test]
fn a_judge_is_asked_once_per_words_and_a_replay_takes_its_answers_from_the_tape() {
    let mock = MockServer::start_with(
        MockOptions {
            strict: true,
            ..MockOptions::default()
        },
        |call| match judge_words(&call.body) {
            Some(words) if words.contains("festival") => Reply::answer(r#"{"answer": "yes"}"#),
            Some(_) => Reply::answer(r#"{"answer": "no"}"#),
            None => Reply::answer(r#"{"action": "stay", "speech": "", "x": 0, "y": 0}"#),
        },
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("judged.toml");
    std::fs::write(
        &file,
        fish_market_with(
            "[[facts]]\nname = \"festival by meaning\"\nstatement = \"A festival begins at the market.\"\n\
             similarity = 0.99\ncandidate = 0.3\njudge = \"oracle\"",
            &format!(
                "\n[brains.oracle]\nprovider = \"openai\"\nbase_url = \"{}\"\nmodel = \"mock\"\n\
                 response_format = \"json_schema\"\nretry_base_ms = 10\n",
                mock.url
            ),
        ),
    )
    .expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &["--no-progress"]);
    let asked: Vec<String> = mock
        .log()
        .iter()
        .filter_map(|l| judge_words(&l.call.body))
        .collect();
    let tape = read_jsonl(&out.join("judge.jsonl"));
    assert!(!asked.is_empty(), "the judge was asked");
    let taped: Vec<String> = tape
        .iter()
        .map(|j| j["words"].as_str().expect("words").to_owned())
        .collect();
    let mut distinct = taped.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), taped.len(), "once per distinct words");
    let mut asked_sorted = asked.clone();
    asked_sorted.sort();
    assert_eq!(asked_sorted, distinct, "every question is on the tape");
    for j in &tape {
        let words = j["words"].as_str().unwrap_or("");
        assert_eq!(j["answer"], words.contains("festival"), "{j}");
        let cos = j["cosine"].as_f64().expect("cosine");
        assert!((0.3..0.99).contains(&cos), "{cos}");
    }
    let s = summary(&out);
    let fact = fact_of(&s, "festival by meaning");
    let yes = tape.iter().filter(|j| j["answer"] == true).count() as u64;
    assert!(yes > 0);
    assert_eq!(fact["meaning"]["judged_yes"], yes);
    // Every knower holds words the judge said yes to (no memory reaches 0.99 here, save
    // an exact copy of the statement, which nobody holds).
    let yes_words: Vec<&str> = tape
        .iter()
        .filter(|j| j["answer"] == true)
        .filter_map(|j| j["words"].as_str())
        .collect();
    let known = fact["knowers"].as_array().expect("knowers");
    assert!(!known.is_empty());
    for k in known {
        assert!(
            yes_words.contains(&k["words"].as_str().unwrap_or("")),
            "{k}"
        );
    }

    // Replay: no model (the mock sees no new request), the same spread.
    let before = mock.log().len();
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    let text = String::from_utf8_lossy(&replay.stdout);
    assert!(replay.status.success(), "{text}");
    assert!(text.contains("facts by meaning: the same"), "{text}");
    assert_eq!(mock.log().len(), before, "a replay asks no model");

    // A tape edited to say no everywhere: the replay's spread differs, and says so.
    let edited: String = tape
        .iter()
        .map(|j| {
            let mut j = j.clone();
            j["answer"] = Value::Bool(false);
            format!("{j}\n")
        })
        .collect();
    std::fs::write(out.join("judge.jsonl"), edited).expect("edit");
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    let text = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(1), "{text}");
    assert!(text.contains("facts by meaning differ"), "{text}");
    // No tape at all: the replay names the first question with no answer.
    std::fs::remove_file(out.join("judge.jsonl")).expect("rm");
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    let text = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(1), "{text}");
    assert!(text.contains("has no answer about fact"), "{text}");
}

#[test]
fn trace_prints_each_hop_with_its_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("run");
    run_ok(&scenario("fish-market.toml"), &out, &["--no-progress"]);
    let s = summary(&out);
    let fact = fact_of(&s, "fresh fish");
    let last = fact["knowers"]
        .as_array()
        .and_then(|k| k.iter().max_by_key(|k| k["depth"].as_u64()))
        .expect("a knower");
    let npc = last["npc"].as_str().expect("npc");
    let output = hearsay(
        &root(),
        &[
            "trace",
            path_str(&out),
            "--fact",
            "fresh fish",
            "--npc",
            npc,
        ],
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    let hops: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(
        hops.len() as u64,
        last["depth"].as_u64().unwrap_or(0) + 1,
        "{text}"
    );
    assert!(hops[0].starts_with("hop 0"), "{text}");
    assert!(
        hops.last()
            .is_some_and(|l| l.contains(&format!("{:?}", last["words"].as_str().unwrap_or("")))),
        "{text}"
    );
    let unknown = hearsay(
        &root(),
        &[
            "trace",
            path_str(&out),
            "--fact",
            "fresh fish",
            "--npc",
            "Nobody",
        ],
    );
    assert_eq!(unknown.status.code(), Some(2));
}
