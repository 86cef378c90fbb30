//! Addressed talk and whispers: who hears them, and how each remembers them.

use super::{npc, setup, tick};
use crate::memory::{MemoryKind, TALK_IMPORTANCE};
use crate::*;

/// Bob at (5, 5); Carol next to him; Dave √8 away and Eve 3 away (both in earshot of 3);
/// Far out of earshot.
fn town(language: Language, max_listeners: u32) -> World {
    crate::setup::build_world(WorldSetup {
        language,
        max_listeners,
        npcs: vec![
            npc("Bob", 5, 5, &[]),
            npc("Carol", 6, 6, &[]),
            npc("Dave", 7, 7, &[]),
            npc("Eve", 5, 8, &[]),
            npc("Far", 15, 5, &[]),
        ],
        events: vec![],
        ..setup()
    })
}

use bevy_ecs::prelude::World;

/// Bob's decision at tick 0, everyone else staying: each NPC's conversation memories
/// (name, content, importance), in id order, and the tick's log lines.
fn bob_says(world: &mut World, decision: Decision) -> (Vec<(String, String, u8)>, Vec<String>) {
    let others = (1..5).map(|i| (i, Decision::Stay));
    let decisions: Vec<(u32, Decision)> = std::iter::once((0, decision)).chain(others).collect();
    let memories = tick(world, 0, &decisions);
    let roster = world.resource::<Roster>().clone();
    let heard = memories
        .iter()
        .filter(|m| m.kind == MemoryKind::Conversation)
        .map(|m| {
            (
                roster.name(m.npc).to_owned(),
                m.content.to_string(),
                m.importance,
            )
        })
        .collect();
    let lines = world.resource::<TickLog>().lines.clone();
    (heard, lines)
}

fn remembered(rows: &[(&str, &str)]) -> Vec<(String, String, u8)> {
    rows.iter()
        .map(|&(who, what)| (who.to_owned(), what.to_owned(), TALK_IMPORTANCE))
        .collect()
}

fn talk_line(lines: &[String]) -> serde_json::Value {
    let line = lines
        .iter()
        .find(|l| l.contains(r#""type":"talk""#))
        .expect("a talk line");
    serde_json::from_str(line).expect("a JSON line")
}

#[test]
fn addressed_talk_is_heard_by_everyone_in_earshot_each_in_its_own_words() {
    let talk = |to| Decision::Talk {
        speech: "Fresh fish today.".into(),
        to: Some(NpcId(to)),
    };
    let (heard, lines) = bob_says(&mut town(Language::En, 100), talk(1));
    assert_eq!(
        heard,
        remembered(&[
            ("Bob", "I said to Carol: Fresh fish today."),
            ("Carol", "Bob told me: Fresh fish today."),
            ("Dave", "Bob said to Carol: Fresh fish today."),
            ("Eve", "Bob said to Carol: Fresh fish today."),
        ])
    );
    let line = talk_line(&lines);
    assert_eq!(line["to"], "Carol");
    assert_eq!(
        line["listeners"],
        serde_json::json!(["Carol", "Dave", "Eve"])
    );
    assert!(line.get("whisper").is_none(), "{line}");

    let (heard, _) = bob_says(&mut town(Language::Zh, 100), talk(2));
    assert_eq!(
        heard,
        remembered(&[
            ("Bob", "我对Dave说：Fresh fish today."),
            ("Carol", "Bob对Dave说：Fresh fish today."),
            ("Dave", "Bob告诉我：Fresh fish today."),
            ("Eve", "Bob对Dave说：Fresh fish today."),
        ])
    );
}

#[test]
fn a_whisper_is_heard_by_the_addressee_alone() {
    let whisper = Decision::Whisper {
        speech: "The boat is late.".into(),
        to: NpcId(1),
    };
    let (heard, lines) = bob_says(&mut town(Language::En, 100), whisper.clone());
    assert_eq!(
        heard,
        remembered(&[
            ("Bob", "I whispered to Carol: The boat is late."),
            ("Carol", "Bob whispered to me: The boat is late."),
        ])
    );
    let line = talk_line(&lines);
    assert_eq!(line["to"], "Carol");
    assert_eq!(line["whisper"], true);
    assert_eq!(line["listeners"], serde_json::json!(["Carol"]));

    let mut world = town(Language::Zh, 100);
    let (heard, _) = bob_says(&mut world, whisper);
    assert_eq!(
        heard,
        remembered(&[
            ("Bob", "我悄悄对Carol说：The boat is late."),
            ("Carol", "Bob悄悄对我说：The boat is late."),
        ])
    );
    // Only Carol carries it into the next tick's observation, marked as whispered.
    world.resource_mut::<SimClock>().tick = 1;
    world.run_schedule(SimPerceive);
    let obs = &world.resource::<Observations>().0;
    assert_eq!(obs[1].heard.len(), 1);
    assert!(obs[1].heard[0].whispered);
    assert_eq!(obs[1].heard[0].to.as_deref(), Some("Carol"));
    for other in [2, 3, 4] {
        assert!(
            obs[other].heard.is_empty(),
            "{} heard nothing",
            obs[other].name
        );
    }
    assert!(
        Language::Zh
            .describe(&obs[1])
            .contains("Bob悄悄对我说：“The boat is late.”"),
        "{}",
        Language::Zh.describe(&obs[1])
    );
}

#[test]
fn an_addressee_out_of_reach_makes_a_plain_talk() {
    let plain = remembered(&[
        ("Bob", "I said to everyone: Psst."),
        ("Carol", "Bob said: Psst."),
        ("Dave", "Bob said: Psst."),
        ("Eve", "Bob said: Psst."),
    ]);
    // Dave is 2 cells away along each axis: out of a whisper's reach (one cell, diagonals
    // included), so everyone in earshot hears it as a plain talk.
    for decision in [
        Decision::Whisper {
            speech: "Psst.".into(),
            to: NpcId(2),
        },
        // Far is out of earshot; Bob is himself; NPC 9 does not exist.
        Decision::Talk {
            speech: "Psst.".into(),
            to: Some(NpcId(4)),
        },
        Decision::Talk {
            speech: "Psst.".into(),
            to: Some(NpcId(0)),
        },
        Decision::Whisper {
            speech: "Psst.".into(),
            to: NpcId(9),
        },
    ] {
        let (heard, lines) = bob_says(&mut town(Language::En, 100), decision.clone());
        assert_eq!(heard, plain, "{decision:?}");
        let line = talk_line(&lines);
        assert!(
            line.get("to").is_none() && line.get("whisper").is_none(),
            "{line}"
        );
    }
}

#[test]
fn in_a_crowd_the_addressee_is_heard_first() {
    // One listener at most: the nearest (Carol) for a plain talk, the addressee for an
    // addressed one, however far within earshot.
    let (heard, _) = bob_says(
        &mut town(Language::En, 1),
        Decision::Talk {
            speech: "Eve!".into(),
            to: None,
        },
    );
    assert_eq!(heard[1].0, "Carol");
    let (heard, lines) = bob_says(
        &mut town(Language::En, 1),
        Decision::Talk {
            speech: "Eve!".into(),
            to: Some(NpcId(3)),
        },
    );
    assert_eq!(
        heard,
        remembered(&[("Bob", "I said to Eve: Eve!"), ("Eve", "Bob told me: Eve!")])
    );
    assert_eq!(talk_line(&lines)["listeners"], serde_json::json!(["Eve"]));
}
