//! Thinking only when something changed (`think = "on_change"`), end to end against the
//! mock model server, whose request log shows exactly which NPC-ticks called: those the
//! event log and the tape say were woken, and no other; speech wakes every listener; an
//! NPC alone on a long walk calls only when it arrives or has been idle too long; failed
//! reflections wait for their retry; the heuristic brain under `on_change` is as
//! deterministic as ever, and its runs replay, resume and fork exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hearsay_tests::mock::{ChatCall, MockServer, Reply};
use hearsay_tests::{fork_ok, hearsay, path_str, read_jsonl, root, run_ok, scenario, summary};
use serde_json::{Value, json};

fn decision(action: &str, speech: &str, x: i64, y: i64) -> String {
    json!({ "action": action, "speech": speech, "x": x, "y": y }).to_string()
}

fn npc_index(call: &ChatCall) -> u64 {
    call.npc.trim_start_matches('N').parse().unwrap_or(0)
}

/// Decisions that depend on the NPC and the tick only: some talk, some walk far, some
/// stay.
fn scripted(call: &ChatCall) -> Reply {
    let i = npc_index(call);
    Reply::answer(match (i + call.tick) % 5 {
        0 => decision(
            "talk",
            &format!("N{i} has news at tick {}", call.tick),
            0,
            0,
        ),
        1 | 2 => decision(
            "move",
            "",
            ((i * 7 + call.tick * 3) % 30) as i64,
            (i % 12) as i64,
        ),
        _ => decision("stay", "", 0, 0),
    })
}

fn town(url: &str, npcs: usize, ticks: u64, think: &str, brain_extra: &str) -> String {
    let mut s = format!(
        "name = \"think\"\nseed = 9\nticks = {ticks}\n\n[world]\nwidth = 30\nheight = 12\nhearing_radius = 3\n\n\
         [[places]]\nname = \"market\"\nat = [15, 6]\n\n\
         [[events]]\ntick = 5\nplace = \"market\"\ntext = \"A festival begins.\"\n\n\
         [brain]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock\"\nmax_concurrency = 8\nretry_base_ms = 10\n\
         think = \"{think}\"\n{brain_extra}\n\n[memory.reflect]\nthreshold = 0\n\n"
    );
    for i in 0..npcs {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\nat = [{}, {}]\n\n",
            (i * 5) % 30,
            (i * 7) % 12
        ));
    }
    s
}

/// The (tick, NPC) of every action line, with the line.
fn actions(dir: &Path) -> BTreeMap<(u64, String), Value> {
    read_jsonl(&dir.join("events.jsonl"))
        .into_iter()
        .filter(|e| matches!(e["type"].as_str(), Some("talk" | "move" | "stay")))
        .map(|e| {
            let key = (
                e["tick"].as_u64().expect("tick"),
                e["npc"].as_str().expect("npc").to_owned(),
            );
            (key, e)
        })
        .collect()
}

#[test]
fn under_on_change_exactly_the_woken_npc_ticks_call_the_model() {
    let (npcs, ticks) = (12, 30);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut calls_by_mode = BTreeMap::new();
    for think in ["every_tick", "on_change"] {
        let mock = MockServer::start(scripted);
        let file = dir.path().join(format!("{think}.toml"));
        std::fs::write(&file, town(&mock.url, npcs, ticks, think, "")).expect("write");
        let out = dir.path().join(think);
        let output = run_ok(&file, &out, &["--no-progress"]);
        let asked: Vec<(u64, String)> = mock
            .decisions()
            .iter()
            .map(|l| (l.call.tick, l.call.npc.clone()))
            .collect();
        let asked_set: BTreeSet<(u64, String)> = asked.iter().cloned().collect();
        assert_eq!(
            asked.len(),
            asked_set.len(),
            "{think}: each NPC-tick asked once"
        );

        let acts = actions(&out);
        assert_eq!(
            acts.len(),
            npcs * ticks as usize,
            "{think}: one line per NPC-tick"
        );
        let thought: BTreeSet<(u64, String)> = acts
            .iter()
            .filter(|(_, e)| e["continued"] != true)
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(
            thought, asked_set,
            "{think}: the lines that thought are the requests"
        );
        let taped: BTreeSet<(u64, String)> = read_jsonl(&out.join("llm.jsonl"))
            .iter()
            .filter_map(|c| Some((c["tick"].as_u64()?, c["npc"].as_str()?.to_owned())))
            .collect();
        assert_eq!(
            taped, asked_set,
            "{think}: the tape's calls are the requests"
        );

        let s = summary(&out);
        let t = &s["brains"]["default"]["thinking"];
        assert_eq!(t["think"], think);
        assert_eq!(t["npc_ticks"], npcs as u64 * ticks);
        assert_eq!(t["thoughts"], asked.len() as u64);
        assert_eq!(
            t["continued"].as_u64(),
            Some(npcs as u64 * ticks - asked.len() as u64)
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(&format!(
                "thinking default ({think}): {} NPC-ticks",
                npcs as u64 * ticks
            )),
            "{stdout}"
        );
        if think == "on_change" {
            // Every line says why it thought, or that it continued; every reason counted.
            let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
            for ((tick, npc), e) in &acts {
                let wake = e["wake"].as_array().cloned().unwrap_or_default();
                assert!(
                    (e["continued"] == true) == wake.is_empty(),
                    "{npc} at {tick}: {e}"
                );
                for r in wake {
                    *reasons
                        .entry(r.as_str().expect("reason").to_owned())
                        .or_default() += 1;
                }
            }
            assert_eq!(t["wake"], json!(reasons));
            for reason in [
                "heard",
                "newcomer",
                "witnessed",
                "arrived",
                "no_intention",
                "idle",
            ] {
                assert!(
                    reasons.contains_key(reason),
                    "no NPC woke for {reason}: {reasons:?}"
                );
            }
            // Speech wakes every listener the next tick.
            for ((tick, npc), e) in &acts {
                if e["type"] != "talk" || *tick + 1 >= ticks {
                    continue;
                }
                for l in e["listeners"].as_array().into_iter().flatten() {
                    let listener = l.as_str().expect("name").to_owned();
                    let next = &acts[&(tick + 1, listener.clone())];
                    assert!(
                        next["wake"]
                            .as_array()
                            .is_some_and(|w| w.contains(&json!("heard"))),
                        "{listener} heard {npc} at tick {tick} but did not wake: {next}"
                    );
                }
            }
            let replay = hearsay(&root(), &["replay", path_str(&out)]);
            assert_eq!(
                String::from_utf8_lossy(&replay.stdout).trim(),
                format!("identical: {ticks} ticks"),
                "{}",
                String::from_utf8_lossy(&replay.stderr)
            );
        }
        calls_by_mode.insert(think, asked.len());
    }
    println!(
        "figure: think: {npcs} NPCs x {ticks} ticks against the mock: {} decisions every tick, {} on change",
        calls_by_mode["every_tick"], calls_by_mode["on_change"]
    );
    assert_eq!(calls_by_mode["every_tick"], npcs * ticks as usize);
    assert!(calls_by_mode["on_change"] < calls_by_mode["every_tick"]);
}

#[test]
fn an_npc_alone_and_walking_calls_only_when_it_arrives_or_idles() {
    // N0 walks from (0, 0) to (29, 0): 29 steps, the last at tick 28. N1 sits in the far
    // corner. With max_idle_ticks = 8, N0 thinks at 0 (no intention), 8, 16, 24 (idle)
    // and 29 (arrived); then it stays where it is (its move to where it stands is a
    // stay) until it would be idle again at 37, after the run.
    let mock = MockServer::start(|call| {
        Reply::answer(if call.npc == "N0" {
            decision("move", "", 29, 0)
        } else {
            decision("stay", "", 0, 0)
        })
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = town(&mock.url, 0, 34, "on_change", "max_idle_ticks = 8");
    text = text.replace(
        "[[events]]\ntick = 5\nplace = \"market\"\ntext = \"A festival begins.\"\n\n",
        "",
    );
    text.push_str(
        "[[npcs]]\nname = \"N0\"\nat = [0, 0]\n\n[[npcs]]\nname = \"N1\"\nat = [29, 11]\n",
    );
    let file = dir.path().join("s.toml");
    std::fs::write(&file, text).expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &["--no-progress"]);
    let n0: Vec<u64> = mock
        .decisions()
        .iter()
        .filter(|l| l.call.npc == "N0")
        .map(|l| l.call.tick)
        .collect();
    assert_eq!(n0, vec![0, 8, 16, 24, 29], "N0's calls");
    let acts = actions(&out);
    assert_eq!(acts[&(29, "N0".to_owned())]["wake"], json!(["arrived"]));
    assert_eq!(acts[&(8, "N0".to_owned())]["wake"], json!(["idle"]));
    assert_eq!(acts[&(5, "N0".to_owned())]["continued"], true);
    assert_eq!(acts[&(5, "N0".to_owned())]["type"], "move");
    let n1: Vec<u64> = mock
        .decisions()
        .iter()
        .filter(|l| l.call.npc == "N1")
        .map(|l| l.call.tick)
        .collect();
    assert_eq!(
        n1,
        vec![0, 8, 16, 24, 32],
        "N1 stays; it is asked when idle"
    );
}

#[test]
fn a_failed_reflection_waits_for_its_retry_and_has_its_own_token_limit() {
    // Every reflection is cut off at max_tokens; decisions are fine.
    let mock = MockServer::start(|call| {
        if call.reflect {
            Reply::Answer {
                content: r#"{"insights": [{"text": "I keep hear"#.into(),
                finish_reason: "length".into(),
                delay_ms: 0,
            }
        } else {
            scripted(call)
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let text = town(
        &mock.url,
        8,
        40,
        "every_tick",
        "reflect_retry_ticks = 10\nreflect_max_tokens = 300",
    )
    .replace("threshold = 0", "threshold = 16");
    let file = dir.path().join("s.toml");
    std::fs::write(&file, text).expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &["--no-progress"]);
    let mut tries: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for l in mock.log().iter().filter(|l| l.call.reflect) {
        assert_eq!(
            l.call.body["max_tokens"], 300,
            "reflections ask for their own limit"
        );
        tries
            .entry(l.call.npc.clone())
            .or_default()
            .push(l.call.tick);
    }
    for l in mock.decisions() {
        assert_eq!(l.call.body["max_tokens"], 256, "decisions keep max_tokens");
    }
    let total: usize = tries.values().map(Vec::len).sum();
    assert!(total > 0, "someone tried to reflect");
    for (npc, ticks) in &tries {
        for w in ticks.windows(2) {
            assert!(w[1] - w[0] >= 10, "{npc} retried too soon: {ticks:?}");
        }
    }
    let s = summary(&out);
    let t = &s["brains"]["default"]["thinking"];
    assert_eq!(t["reflections_failed"], total as u64);
    assert!(t["reflections_deferred"].as_u64() > Some(0), "{t}");
    assert_eq!(s["degraded"]["reflection_failures"], total as u64);
    println!(
        "figure: think: 8 NPCs x 40 ticks, every reflection cut off: {total} reflection calls \
         ({} NPC-ticks deferred)",
        t["reflections_deferred"]
    );
    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 40 ticks",
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}

#[test]
fn the_heuristic_brain_on_change_is_deterministic_and_forks_and_resumes_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let market = scenario("fish-market.toml");
    let set = [
        "--set",
        "brain.think=\"on_change\"",
        "--ticks",
        "120",
        "--no-progress",
    ];
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    run_ok(&market, &a, &set);
    run_ok(&market, &b, &set);
    let events = hearsay_tests::log_bytes(a.join("events.jsonl")).expect("events");
    assert_eq!(
        events,
        hearsay_tests::log_bytes(b.join("events.jsonl")).expect("events")
    );
    let text = String::from_utf8_lossy(&events);
    assert!(text.contains(r#""continued":true"#) && text.contains(r#""wake":["#));
    let s = summary(&a);
    let t = &s["brains"]["default"]["thinking"];
    assert_eq!(t["think"], "on_change");
    assert!(t["calls_per_npc_tick"].as_f64() < Some(0.6), "{t}");

    let replay = hearsay(&root(), &["replay", path_str(&a)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 120 ticks"
    );

    // A fork at tick 60 with nothing changed continues exactly as the run did.
    let fork = dir.path().join("fork");
    fork_ok(&a, 60, &fork, &[]);
    assert_eq!(
        events,
        hearsay_tests::log_bytes(fork.join("events.jsonl")).expect("events")
    );

    // Thinking every tick from tick 60 on: the same until 60, different after.
    let every = dir.path().join("every");
    fork_ok(&a, 60, &every, &["--set", "brain.think=\"every_tick\""]);
    let other = hearsay_tests::log_text(every.join("events.jsonl")).expect("events");
    let cut = |t: &str| -> String {
        t.lines()
            .take_while(|l| !l.contains(r#""tick":60,"#))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(cut(&other), cut(&text));
    assert_ne!(other, text);
    let replay = hearsay(&root(), &["replay", path_str(&every)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 120 ticks"
    );

    // inspect shows the wake reasons over a range.
    let inspect = hearsay(
        &root(),
        &[
            "inspect",
            path_str(&a),
            "--npc",
            "Alice",
            "--thinking",
            "0..20",
        ],
    );
    let out = String::from_utf8_lossy(&inspect.stdout);
    assert!(
        inspect.status.success(),
        "{}",
        String::from_utf8_lossy(&inspect.stderr)
    );
    assert!(
        out.contains("thinking: ") && out.contains("of 21 ticks thought"),
        "{out}"
    );
    assert!(
        out.contains("continued") && out.contains("thought: "),
        "{out}"
    );
}
