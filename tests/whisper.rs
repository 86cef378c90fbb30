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
        std::fs::read(out.join("events.jsonl")).expect("events"),
        std::fs::read(again.join("events.jsonl")).expect("events")
    );

    // At whisper = 0 nobody whispers, and the memories say so.
    let never = dir.path().join("never");
    run_ok(
        &file,
        &never,
        &["--no-progress", "--set", "brain.whisper=0"],
    );
    let text = std::fs::read_to_string(never.join("events.jsonl")).expect("events");
    assert!(!text.contains("whisper"), "no whisper at 0");
    assert!(text.contains("I said to everyone: "));
}
