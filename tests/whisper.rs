//! Whispers end to end: a heuristic town with `whisper = 0.5` whispers some of its gossip
//! to neighbours — heard by the addressee alone, phrased so in every memory — and says
//! the rest aloud; the run replays identically.

use std::collections::BTreeMap;

use hearsay_tests::{hearsay, of_type, path_str, read_jsonl, root, run_ok};
use serde_json::Value;

/// Six NPCs on a small map, each knowing something worth telling.
const TOWN: &str = r#"
name = "whispers"
seed = 1
ticks = 40

[world]
width = 7
height = 7
hearing_radius = 3

[[places]]
name = "square"
at = [3, 3]

[[npcs]]
name = "Bob"
persona = "Knows the market."
at = [5, 5]
memories = [
  { content = "The market nearby is selling fresh fish.", importance = 8 },
  { content = "The mill closes at noon tomorrow.", importance = 7 },
]

[[npcs]]
name = "Alice"
memories = [{ content = "The baker is hiring.", importance = 8 }]
persona = "A baker."
at = [4, 3]

[[npcs]]
name = "Carol"
memories = [{ content = "The well water is sweet again.", importance = 8 }]
persona = "A water carrier."
at = [2, 4]

[[npcs]]
name = "Dave"
memories = [{ content = "Wolves were seen by the farm.", importance = 8 }]
persona = "A farmer."
at = [4, 4]

[[npcs]]
name = "Erin"
memories = [{ content = "The weaver's loom is broken.", importance = 8 }]
persona = "A weaver."
at = [1, 1]

[[npcs]]
name = "Finn"
memories = [{ content = "The boat leaves at dawn.", importance = 8 }]
persona = "A boatman."
at = [5, 2]

[[facts]]
name = "fresh fish"
match = ["fresh fish"]

[brain]
provider = "heuristic"
whisper = 0.5
"#;

#[test]
fn whispered_gossip_is_heard_by_the_addressee_alone_and_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("whispers.toml");
    std::fs::write(&file, TOWN).expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &["--no-progress"]);

    let events = read_jsonl(&out.join("events.jsonl"));
    let talks = of_type(&events, "talk");
    let whispers: Vec<&&Value> = talks.iter().filter(|t| t["whisper"] == true).collect();
    let aloud = talks.len() - whispers.len();
    assert!(
        whispers.len() >= 3 && aloud >= 3,
        "about half the gossip whispered: {} whispers, {aloud} aloud",
        whispers.len()
    );

    // Per (tick, NPC): its conversation memories.
    let mut memories: BTreeMap<(u64, String), Vec<String>> = BTreeMap::new();
    for m in of_type(&events, "memory") {
        if m["kind"] == "conversation" {
            let key = (
                m["tick"].as_u64().expect("tick"),
                m["npc"].as_str().expect("npc").to_owned(),
            );
            memories
                .entry(key)
                .or_default()
                .push(m["content"].as_str().expect("content").to_owned());
        }
    }
    let names = ["Bob", "Alice", "Carol", "Dave", "Erin", "Finn"];
    for w in &whispers {
        let tick = w["tick"].as_u64().expect("tick");
        let speaker = w["npc"].as_str().expect("npc");
        let to = w["to"].as_str().expect("a whisper names its addressee");
        let text = w["text"].as_str().expect("text");
        assert_eq!(w["listeners"], serde_json::json!([to]), "{w}");
        let of = |npc: &str| {
            memories
                .get(&(tick, npc.to_owned()))
                .cloned()
                .unwrap_or_default()
        };
        assert!(
            of(speaker).contains(&format!("I whispered to {to}: {text}")),
            "{w}"
        );
        assert!(
            of(to).contains(&format!("{speaker} whispered to me: {text}")),
            "{w}"
        );
        for other in names.iter().filter(|n| **n != speaker && **n != to) {
            assert!(
                of(other)
                    .iter()
                    .all(|m| !m.starts_with(&format!("{speaker} "))),
                "{other} overheard a whisper at tick {tick}: {:?}",
                of(other)
            );
        }
    }
    for t in talks.iter().filter(|t| t["whisper"] != true) {
        assert!(
            t.get("to").is_none(),
            "the heuristic brain does not address talk: {t}"
        );
    }

    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 40 ticks",
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(replay.status.code(), Some(0));

    // The same seed whispers the same way.
    let again = dir.path().join("again");
    run_ok(&file, &again, &["--no-progress"]);
    assert_eq!(
        hearsay_tests::log_bytes(out.join("events.jsonl")).expect("events"),
        hearsay_tests::log_bytes(again.join("events.jsonl")).expect("events")
    );

    // At whisper = 0 nobody whispers, and the memories say so.
    let never = dir.path().join("never");
    run_ok(
        &file,
        &never,
        &["--no-progress", "--set", "brain.whisper=0"],
    );
    let text = hearsay_tests::log_text(never.join("events.jsonl")).expect("events");
    assert!(!text.contains("whisper"), "no whisper at 0");
    assert!(text.contains("I said to everyone: "));
}

/// N0 at (5, 5), N1 next to it, N2 two cells off (in earshot), N3 out of earshot; every
/// NPC asks the mock, which answers `N0`'s `script` for each tick and `stay` otherwise.
fn llm_town(url: &str) -> String {
    let mut s = format!(
        "name = \"addressed\"\nseed = 3\nticks = 4\n\n[world]\nwidth = 20\nheight = 10\nhearing_radius = 3\n\n\
         [brain]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"mock-model\"\nretry_base_ms = 10\nthink = \"every_tick\"\n\n"
    );
    for (i, (x, y)) in [(5, 5), (6, 6), (7, 7), (15, 5)].into_iter().enumerate() {
        s.push_str(&format!(
            "[[npcs]]\nname = \"N{i}\"\npersona = \"Person {i}.\"\nat = [{x}, {y}]\n\n"
        ));
    }
    s
}

#[test]
fn a_model_addresses_talk_and_whispers_and_bad_addressees_are_repaired_and_counted() {
    use hearsay_tests::mock::{MockOptions, MockServer, Reply};
    let answer = |action: &str, speech: &str, to: Option<&str>| {
        serde_json::json!({"action": action, "speech": speech, "to": to, "x": 0, "y": 0})
            .to_string()
    };
    let mock = MockServer::start_with(
        MockOptions {
            strict: true,
            ..MockOptions::default()
        },
        move |call| {
            let stay = answer("stay", "", None);
            if call.npc != "N0" {
                return Reply::answer(stay);
            }
            Reply::answer(match call.tick {
                0 => answer("talk", "Fresh fish.", Some("N2")),
                1 => answer("whisper", "The boat is late.", Some("N1")),
                // N2 is two cells off: beyond a whisper's reach.
                2 => answer("whisper", "Wolves.", Some("N2")),
                _ => answer("talk", "Anyone?", Some("Nobody")),
            })
        },
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("s.toml");
    std::fs::write(&file, llm_town(&mock.url)).expect("write");
    let out = dir.path().join("run");
    run_ok(&file, &out, &["--no-progress"]);

    let events = read_jsonl(&out.join("events.jsonl"));
    let talks = of_type(&events, "talk");
    assert_eq!(talks.len(), 4, "{talks:?}");
    assert_eq!(
        (talks[0]["to"].as_str(), talks[0]["listeners"].clone()),
        (Some("N2"), serde_json::json!(["N1", "N2"]))
    );
    assert_eq!(
        (talks[1]["to"].as_str(), talks[1]["whisper"].as_bool()),
        (Some("N1"), Some(true))
    );
    assert_eq!(talks[1]["listeners"], serde_json::json!(["N1"]));
    for t in &talks[2..] {
        assert!(
            t.get("to").is_none() && t.get("whisper").is_none(),
            "repaired to plain talk: {t}"
        );
        assert_eq!(t["listeners"], serde_json::json!(["N1", "N2"]));
    }
    let memories: Vec<(u64, String, String)> = of_type(&events, "memory")
        .iter()
        .filter(|m| m["kind"] == "conversation")
        .map(|m| {
            (
                m["tick"].as_u64().expect("tick"),
                m["npc"].as_str().expect("npc").to_owned(),
                m["content"].as_str().expect("content").to_owned(),
            )
        })
        .collect();
    let expected: Vec<(u64, String, String)> = [
        (0, "N0", "I said to N2: Fresh fish."),
        (0, "N1", "N0 said to N2: Fresh fish."),
        (0, "N2", "N0 told me: Fresh fish."),
        (1, "N0", "I whispered to N1: The boat is late."),
        (1, "N1", "N0 whispered to me: The boat is late."),
        (2, "N0", "I said to everyone: Wolves."),
        (2, "N1", "N0 said: Wolves."),
        (2, "N2", "N0 said: Wolves."),
        (3, "N0", "I said to everyone: Anyone?"),
        (3, "N1", "N0 said: Anyone?"),
        (3, "N2", "N0 said: Anyone?"),
    ]
    .into_iter()
    .map(|(t, n, c)| (t, n.to_owned(), c.to_owned()))
    .collect();
    assert_eq!(memories, expected);

    // The prompt said who can be whispered to, and what was whispered to whom.
    let n1_tick2 = mock
        .decisions()
        .into_iter()
        .find(|l| l.call.npc == "N1" && l.call.tick == 2)
        .expect("N1 asked at tick 2");
    let user = n1_tick2.call.body["messages"][1]["content"]
        .as_str()
        .expect("user message")
        .to_owned();
    assert!(
        user.contains("N0 at (5, 5), within earshot, close enough to whisper to"),
        "{user}"
    );
    assert!(
        user.contains("- N0 whispered to you: \"The boat is late.\""),
        "{user}"
    );

    let b = &hearsay_tests::summary(&out)["brains"]["default"];
    assert_eq!(b["addressee_repairs"], 2, "{b}");
    assert_eq!(b["repairs"], 2, "{b}");

    let replay = hearsay(&root(), &["replay", path_str(&out)]);
    assert_eq!(
        String::from_utf8_lossy(&replay.stdout).trim(),
        "identical: 4 ticks",
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
}
