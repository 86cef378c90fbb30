//! Kernel tests: build a small world, hand in decisions, run whole ticks, check the world.

use std::collections::BTreeMap;
use std::sync::Arc;

use bevy_ecs::prelude::World;

use crate::memory::{HEARD_IMPORTANCE, MOVE_IMPORTANCE, MemoryKind, TALK_IMPORTANCE};
use crate::resources::{Place, RollingDigest};
use crate::schedule::build_schedules;
use crate::setup::build_world;
use crate::*;

mod speech;
mod wake;

pub(crate) fn setup() -> WorldSetup {
    WorldSetup {
        seed: 7,
        language: Language::En,
        grid: Grid {
            width: 20,
            height: 10,
        },
        hearing_radius: 3,
        sight_radius: 6,
        max_listeners: MAX_LISTENERS_DEFAULT,
        short_term_len: 2,
        reflect: ReflectSettings {
            threshold: 0,
            ..ReflectSettings::default()
        },
        places: vec![Place {
            name: "market".into(),
            at: Pos::new(15, 8),
        }],
        npcs: vec![
            npc(
                "Bob",
                14,
                8,
                &[("The market nearby is selling fresh fish.", 8)],
            ),
            npc("Alice", 12, 7, &[]),
            npc("Carol", 0, 0, &[]),
        ],
        events: vec![ScheduledEvent {
            tick: 1,
            place: 0,
            text: "A festival begins.".into(),
            importance: 6,
        }],
        facts: vec![FactSpec::by_words("fresh fish", vec!["fresh fish".into()])],
    }
}

pub(crate) fn npc(name: &str, x: i32, y: i32, memories: &[(&str, u8)]) -> NpcSetup {
    NpcSetup {
        name: name.into(),
        persona: format!("{name} lives here."),
        at: Pos::new(x, y),
        memories: memories
            .iter()
            .map(|&(c, i)| SeedMemory {
                content: c.into(),
                importance: i,
                core: false,
            })
            .collect(),
        mind: Mind::default(),
    }
}

pub(crate) fn tick(world: &mut World, t: u64, decisions: &[(u32, Decision)]) -> Vec<MemoryRecord> {
    world.resource_mut::<SimClock>().tick = t;
    world.run_schedule(SimPerceive);
    world.insert_resource(Decisions(thoughts(decisions)));
    world.run_schedule(SimAct);
    std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending)
}

/// `decisions`, each as a Think phase that recalled nothing would hand it to Act.
pub(crate) fn thoughts(decisions: &[(u32, Decision)]) -> BTreeMap<NpcId, Thought> {
    decisions
        .iter()
        .map(|(id, d)| {
            (
                NpcId(*id),
                Thought {
                    decision: d.clone(),
                    recalled: vec![],
                    recall_failed: false,
                    brain_failed: false,
                    reflection: None,
                    reflection_failed: false,
                },
            )
        })
        .collect()
}

pub(crate) fn position(world: &World, id: u32) -> Pos {
    let entity = world.resource::<Roster>().entities[id as usize];
    world
        .get::<Position>(entity)
        .map(|p| p.0)
        .expect("npc has a position")
}

#[test]
fn schedules_build_without_ambiguities() {
    let mut world = World::new();
    build_schedules(&mut world);
    let mut perceive = schedule::perceive_schedule();
    let mut act = schedule::act_schedule();
    world.insert_resource(SimClock::default());
    let world = &mut build_world(setup());
    assert!(perceive.initialize(world).is_ok());
    assert!(act.initialize(world).is_ok());
}

#[test]
fn a_crowd_hears_only_the_nearest_max_listeners() {
    // A speaker at (5, 5) in a crowd: 24 NPCs around it in the hearing radius.
    let mut npcs = vec![npc("Speaker", 5, 5, &[])];
    for y in 3..=7 {
        for x in 3..=7 {
            if (x, y) != (5, 5) {
                npcs.push(npc(&format!("N{x}{y}"), x, y, &[]));
            }
        }
    }
    let heard = |cap: u32| -> Vec<String> {
        let mut world = build_world(WorldSetup {
            npcs: npcs.clone(),
            max_listeners: cap,
            hearing_radius: 3,
            ..setup()
        });
        let talk = Decision::Talk {
            speech: "Hello.".into(),
            to: None,
        };
        let memories = tick(&mut world, 0, &[(0, talk)]);
        let roster = world.resource::<Roster>().clone();
        memories
            .iter()
            .filter(|m| m.kind == MemoryKind::Conversation && m.npc != NpcId(0))
            .map(|m| roster.name(m.npc).to_owned())
            .collect()
    };
    assert_eq!(heard(100).len(), 24, "everyone within 3 cells");
    let eight = heard(8);
    // The 8 nearest are the ring around the speaker (distance 1 and √2), listed in id
    // order (ids follow the scenario: row by row).
    assert_eq!(
        eight,
        vec!["N44", "N54", "N64", "N45", "N65", "N46", "N56", "N66"]
    );
    let ring = eight.clone();
    // The 4 at distance 2 come next; past them, ties at √5 are cut by id.
    let fourteen = heard(14);
    assert_eq!(fourteen.len(), 14);
    for n in ring.iter().chain(&[
        "N53".to_owned(),
        "N35".to_owned(),
        "N75".to_owned(),
        "N57".to_owned(),
    ]) {
        assert!(fourteen.contains(n), "{n} is nearer than anyone left out");
    }
    for n in ["N43", "N63"] {
        assert!(
            fourteen.contains(&n.to_owned()),
            "{n}: the first two at √5 by id"
        );
    }
    assert_eq!(heard(14), fourteen, "the same every time");
}

#[test]
fn talk_move_and_stay_follow_the_weighting() {
    let mut world = build_world(setup());
    let seeds = std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending);
    assert_eq!(seeds.len(), 1);
    assert_eq!(seeds[0].kind, MemoryKind::Seed);
    assert_eq!(seeds[0].id, MemoryId(1));

    let talk = Decision::Talk {
        speech: "The market nearby is selling fresh fish.".into(),
        to: None,
    };
    let memories = tick(
        &mut world,
        0,
        &[
            (0, talk),
            (1, Decision::Stay),
            (2, Decision::Move { to: Pos::new(5, 5) }),
        ],
    );
    let summary: Vec<_> = memories
        .iter()
        .map(|m| (m.npc.0, m.kind, m.importance, &*m.content, m.source))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                0,
                MemoryKind::Conversation,
                TALK_IMPORTANCE,
                "I said to everyone: The market nearby is selling fresh fish.",
                None
            ),
            (
                2,
                MemoryKind::Observation,
                MOVE_IMPORTANCE,
                "I decided to move to (5, 5)",
                None
            ),
            (
                1,
                MemoryKind::Conversation,
                HEARD_IMPORTANCE,
                "Bob said: The market nearby is selling fresh fish.",
                Some(NpcId(0))
            ),
        ]
    );
    assert_eq!(
        memories.iter().map(|m| m.id.0).collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert_eq!(position(&world, 2), Pos::new(1, 1));
    assert_eq!(position(&world, 1), Pos::new(12, 7));

    let book = world.resource::<FactBook>();
    let alice = book.knowers[0][&NpcId(1)];
    assert_eq!((alice.tick, alice.from), (0, Some(NpcId(0))));
    assert_eq!(book.curves[0], vec![(0, 2)]);
}

/// An observation carries its NPC's window itself, not a copy; the window slides in place
/// once the tick's observations are gone, and an observation still held keeps the window
/// it was made with.
#[test]
fn an_observation_shares_its_window_and_keeps_what_it_saw() {
    let mut world = build_world(setup());
    world.resource_mut::<MemoryLedger>().pending.clear();
    let bob = world.resource::<Roster>().entities[0];
    let window = |world: &World| world.get::<ShortTerm>(bob).expect("window").0.clone();
    let mv = |t: i32| vec![(0, Decision::Move { to: Pos::new(t, 8) })];
    for t in 0..2 {
        tick(&mut world, t, &mv(t as i32));
    }
    let observe = |world: &mut World, t: u64| {
        world.resource_mut::<SimClock>().tick = t;
        world.run_schedule(SimPerceive);
        std::mem::take(&mut world.resource_mut::<Observations>().0)
    };
    let act = |world: &mut World, d: &[(u32, Decision)]| {
        world.insert_resource(Decisions(thoughts(d)));
        world.run_schedule(SimAct);
    };

    // Shared, and slid in place once the observation is dropped.
    let observations = observe(&mut world, 2);
    let before = window(&world);
    assert!(Arc::ptr_eq(&observations[0].recent, &before));
    let ids = |w: &Window| w.iter().map(|m| m.id.0).collect::<Vec<_>>();
    let seen = ids(&before);
    assert_eq!(seen.len(), 2, "the window is full: {seen:?}");
    let at = Arc::as_ptr(&before);
    drop((observations, before));
    act(&mut world, &mv(2));
    let after = window(&world);
    assert_eq!(Arc::as_ptr(&after), at, "slid in place");
    assert_eq!(ids(&after)[0], seen[1]);
    assert_ne!(ids(&after)[1], seen[1]);
    drop(after);

    // An observation held across Act keeps what it saw.
    let held = observe(&mut world, 3);
    let seen = ids(&held[0].recent);
    act(&mut world, &mv(3));
    assert_eq!(ids(&held[0].recent), seen);
    assert_ne!(ids(&window(&world)), seen);
}

/// Every memory the kernel makes carries the first place its text names (the seed, the
/// talk and what was heard name the market; a move names nothing), and so does its entry
/// in its NPC's window; a ledger without the places leaves it unknown.
#[test]
fn every_memory_made_carries_the_place_its_text_names() {
    let mut world = build_world(setup());
    let seeds = std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending);
    assert_eq!(seeds[0].place.known(), Some(Some(0)));
    let talk = Decision::Talk {
        speech: "Fresh fish at the MARKET.".into(),
        to: None,
    };
    let memories = tick(
        &mut world,
        0,
        &[(0, talk), (2, Decision::Move { to: Pos::new(5, 5) })],
    );
    let carried: Vec<_> = memories
        .iter()
        .map(|m| (m.npc.0, m.place.known()))
        .collect();
    assert_eq!(
        carried,
        [(0, Some(Some(0))), (2, Some(None)), (1, Some(Some(0)))]
    );
    let alice = world.resource::<Roster>().entities[1];
    let window = &world.get::<ShortTerm>(alice).expect("window").0;
    assert_eq!(window.last().map(|m| m.place.known()), Some(Some(Some(0))));

    let mut bare = MemoryLedger::default();
    bare.record(memories[0].clone());
    assert_eq!(bare.pending[0].place.known(), None);
}

#[test]
fn observation_lists_what_is_in_sight_and_what_was_heard() {
    let mut world = build_world(setup());
    tick(
        &mut world,
        0,
        &[(
            0,
            Decision::Talk {
                speech: "Hello".into(),
                to: None,
            },
        )],
    );
    world.resource_mut::<SimClock>().tick = 1;
    world.run_schedule(SimPerceive);
    let obs = world.resource::<Observations>().0.clone();
    assert_eq!(obs.len(), 3);
    let alice = &obs[1];
    assert_eq!(
        alice
            .seen_npcs
            .iter()
            .map(|s| (&*s.name, s.audible))
            .collect::<Vec<_>>(),
        vec![("Bob", true)]
    );
    assert_eq!(alice.seen_places.len(), 1);
    assert_eq!(alice.heard.len(), 1);
    assert_eq!(&*alice.heard[0].text, "Hello");
    assert_eq!(
        alice.witnessed.len(),
        1,
        "the festival at tick 1 is within sight"
    );
    assert!(obs[2].seen_npcs.is_empty() && obs[2].witnessed.is_empty());
    assert_eq!(
        alice.known_by.len(),
        1,
        "Alice knows Bob heard his own words"
    );
    let text = Language::En.describe(alice);
    assert!(text.contains("I see Bob at (14, 8)"), "{text}");
    assert!(text.contains("I heard Bob say: \"Hello\""), "{text}");
}

#[test]
fn decisions_are_sanitized() {
    let mut world = build_world(setup());
    world.resource_mut::<MemoryLedger>().pending.clear();
    let long = "x".repeat(SPEECH_CHARS_MAX * 3);
    let memories = tick(
        &mut world,
        0,
        &[
            (
                0,
                Decision::Talk {
                    speech: long,
                    to: None,
                },
            ),
            (
                1,
                Decision::Talk {
                    speech: "   ".into(),
                    to: None,
                },
            ),
            (
                2,
                Decision::Move {
                    to: Pos::new(-50, 900),
                },
            ),
        ],
    );
    let said = &memories[0].content;
    assert_eq!(
        said.chars().count(),
        "I said to everyone: ".len() + SPEECH_CHARS_MAX
    );
    assert!(
        memories
            .iter()
            .all(|m| m.npc != NpcId(1) || m.source.is_some()),
        "blank speech is a stay"
    );
    let moved = memories
        .iter()
        .find(|m| m.npc == NpcId(2))
        .expect("carol moved");
    assert_eq!(&*moved.content, "I decided to move to (0, 9)");
    for _ in 0..20 {
        tick(
            &mut world,
            1,
            &[(
                2,
                Decision::Move {
                    to: Pos::new(99, -99),
                },
            )],
        );
    }
    let p = position(&world, 2);
    assert!(world.resource::<WorldMap>().grid.contains(p));
    assert_eq!(p, Pos::new(19, 0));
}

#[test]
fn short_term_window_keeps_the_last_few() {
    let mut world = build_world(setup());
    for t in 0..4 {
        tick(&mut world, t, &[(2, Decision::Move { to: Pos::new(9, 9) })]);
    }
    let entity = world.resource::<Roster>().entities[2];
    let window = world.get::<ShortTerm>(entity).expect("window").0.clone();
    assert_eq!(window.len(), 2);
}

#[test]
fn same_inputs_same_hashes() {
    let run = || {
        let mut world = build_world(setup());
        let mut lines = Vec::new();
        for t in 0..5 {
            tick(
                &mut world,
                t,
                &[
                    (
                        0,
                        Decision::Talk {
                            speech: "fresh fish".into(),
                            to: None,
                        },
                    ),
                    (2, Decision::Move { to: Pos::new(4, 4) }),
                ],
            );
            lines.append(&mut world.resource_mut::<TickLog>().lines);
        }
        (lines, world.resource::<RollingDigest>().0)
    };
    let (a, ha) = run();
    let (b, hb) = run();
    assert_eq!(a, b);
    assert_eq!(ha, hb);
    assert!(
        a.last()
            .is_some_and(|l| l.starts_with("{\"type\":\"tick\",\"tick\":4,\"hash\":"))
    );
}

#[test]
fn a_restored_checkpoint_continues_exactly() {
    // Reflection's tally on, its threshold out of reach: every NPC keeps evidence, heard
    // and mentioning the fact too.
    let kept = || {
        let mut s = setup();
        s.reflect.threshold = 1_000;
        s
    };
    let script = |t: u64| -> Vec<(u32, Decision)> {
        vec![
            (
                0,
                Decision::Talk {
                    speech: format!("fresh fish, round {}", t % 3),
                    to: None,
                },
            ),
            (
                1,
                Decision::Move {
                    to: Pos::new((t % 7) as i32, 3),
                },
            ),
            (
                2,
                Decision::Move {
                    to: Pos::new(14, 8),
                },
            ),
        ]
    };
    let mut original = build_world(kept());
    let mut lines = Vec::new();
    let mut stored: Vec<MemoryRecord> = Vec::new();
    for t in 0..6 {
        stored.extend(tick(&mut original, t, &script(t)));
        lines.append(&mut original.resource_mut::<TickLog>().lines);
    }
    // As a store saves it: the short-term windows and the evidence by memory id alone.
    let json = serde_json::to_string(&checkpoint::capture(
        &original,
        6,
        checkpoint::Memories::ById,
    ))
    .expect("serialises");
    let mut saved: checkpoint::Checkpoint = serde_json::from_str(&json).expect("deserialises");
    let whole = checkpoint::capture(&original, 6, checkpoint::Memories::Whole);
    let evidence = |c: &checkpoint::Checkpoint| -> Vec<checkpoint::EvidenceEntry> {
        c.npcs
            .iter()
            .flat_map(|n| n.reflection.evidence.clone())
            .collect()
    };
    assert!(
        evidence(&whole).iter().any(|e| matches!(
            e,
            checkpoint::Entry::Whole(e) if e.source.is_some() && !e.facts.is_empty()
        )),
        "some evidence was heard and mentions the fact: {:?}",
        evidence(&whole)
    );
    assert!(
        evidence(&saved)
            .iter()
            .all(|e| matches!(e, checkpoint::Entry::Id(_))),
        "the evidence holds ids"
    );
    let ids = saved.memory_ids();
    assert!(
        saved.npcs[0]
            .short_term
            .iter()
            .all(|e| ids.contains(&e.id()))
            && evidence(&whole).iter().all(|e| ids.contains(&e.id())),
        "the ids named are the windows' and the evidence's"
    );
    assert!(
        json.len() < serde_json::to_string(&whole).expect("json").len(),
        "and are smaller for it"
    );
    let unfilled = saved.clone();
    assert!(matches!(
        checkpoint::restore(&mut build_world(kept()), &unfilled),
        Err(checkpoint::CheckpointError::Unresolved(_))
    ));
    // Windows filled but not the evidence: refused too.
    let mut half = saved.clone();
    for npc in &mut half.npcs {
        npc.short_term = whole.npcs[0].short_term.clone();
    }
    assert!(matches!(
        checkpoint::restore(&mut build_world(kept()), &half),
        Err(checkpoint::CheckpointError::Unresolved(_))
    ));
    // The reader fills them in from the store's records, and gets the whole checkpoint.
    let names = ["Bob", "Alice", "Carol"];
    let mut found = stored.clone();
    found.sort_by_key(|m| m.id);
    saved.fill(&found, |m| RecentMemory {
        id: m.id,
        kind: m.kind,
        content: m.content.clone(),
        importance: m.importance,
        tick: m.tick,
        source: m.source.map(|s| crate::Name::from(names[s.index()])),
        place: Default::default(),
    });
    // And gathers what each NPC knows from the store's checkpoints (here this one alone:
    // what was learned since the world began).
    assert!(
        saved.npcs.iter().all(|n| n.known_by.is_empty())
            && saved.npcs.iter().any(|n| !n.learned.is_empty()),
        "a store's whole checkpoint holds what was learned"
    );
    assert!(matches!(
        checkpoint::restore(&mut build_world(kept()), &saved),
        Err(checkpoint::CheckpointError::Unassembled)
    ));
    checkpoint::KnownSoFar::default()
        .into_whole(&mut saved)
        .expect("fits");
    assert_eq!(saved, whole, "filled in, it is the whole checkpoint");
    // A checkpoint written before, with whole memories in its windows, reads the same.
    let old: checkpoint::Checkpoint =
        serde_json::from_str(&serde_json::to_string(&whole).expect("json")).expect("reads");
    assert_eq!(old, whole);

    let mut resumed = build_world(kept());
    checkpoint::restore(&mut resumed, &saved).expect("restores");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for t in 6..12 {
        let ma = tick(&mut original, t, &script(t));
        let mb = tick(&mut resumed, t, &script(t));
        assert_eq!(ma, mb, "tick {t}: same memories, same ids");
        a.append(&mut original.resource_mut::<TickLog>().lines);
        b.append(&mut resumed.resource_mut::<TickLog>().lines);
    }
    assert_eq!(
        a, b,
        "the resumed world logs exactly what the original logged"
    );
    assert_eq!(
        original.resource::<RollingDigest>().0,
        resumed.resource::<RollingDigest>().0
    );
    assert_eq!(
        original.resource::<FactBook>(),
        resumed.resource::<FactBook>()
    );

    let mut wrong = build_world(WorldSetup {
        npcs: kept().npcs[..2].to_vec(),
        ..kept()
    });
    assert!(
        checkpoint::restore(&mut wrong, &saved).is_err(),
        "a checkpoint from another scenario is refused"
    );
}

#[test]
fn reflection_is_due_past_the_threshold_and_cites_its_evidence() {
    let mut s = setup();
    s.reflect.threshold = 25;
    let mut world = build_world(s);
    world.resource_mut::<MemoryLedger>().pending.clear();
    let talk = || Decision::Talk {
        speech: "fresh fish".into(),
        to: None,
    };
    // Bob's own talk (8) each tick and the festival he sees at tick 1 (6): 8, 22, 30 —
    // due from tick 3.
    for t in 0..3 {
        tick(&mut world, t, &[(0, talk())]);
        assert!(world.resource::<ReflectionsDue>().0.is_empty(), "tick {t}");
    }
    world.resource_mut::<SimClock>().tick = 3;
    world.run_schedule(SimPerceive);
    let due = world.resource::<ReflectionsDue>().0.clone();
    // Alice, who heard all three and saw the festival, too.
    assert_eq!(
        due.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        vec![NpcId(0), NpcId(1)]
    );
    let (npc, evidence) = &due[0];
    assert_eq!(*npc, NpcId(0));
    let ids: Vec<MemoryId> = evidence.clone();
    assert_eq!(ids.len(), 4, "three talks and the festival: {evidence:?}");

    let insight = Insight {
        content: "Everyone should hear about the fresh fish.".into(),
        importance: 9,
        evidence: vec![ids[2], MemoryId(999), ids[0], ids[0]],
    };
    let mut thoughts = std::collections::BTreeMap::new();
    thoughts.insert(
        NpcId(0),
        Thought {
            decision: Decision::Stay,
            recalled: vec![],
            recall_failed: false,
            brain_failed: false,
            reflection: Some(vec![insight]),
            reflection_failed: false,
        },
    );
    world.insert_resource(Decisions(thoughts));
    world.run_schedule(SimAct);
    let made = std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending);
    let reflection = made
        .iter()
        .find(|m| m.kind == MemoryKind::Reflection)
        .expect("a reflection memory");
    assert_eq!(reflection.importance, 9);
    assert_eq!(
        reflection.evidence,
        vec![ids[0], ids[2]],
        "known ids, once, in order"
    );
    let lines = world.resource::<TickLog>().lines.join("\n");
    assert!(
        lines.contains(r#""type":"reflected","tick":3,"npc":"Bob","insights":1,"importance":30"#),
        "{lines}"
    );
    assert!(
        lines.contains(r#""kind":"reflection""#) && lines.contains(r#""evidence":["#),
        "{lines}"
    );

    // Reflecting starts the count over.
    let entity = world.resource::<Roster>().entities[0];
    let state = world.get::<Reflection>(entity).expect("state").clone();
    assert_eq!((state.importance, state.evidence.len()), (0, 0));
    world.resource_mut::<SimClock>().tick = 4;
    world.run_schedule(SimPerceive);
    let due: Vec<NpcId> = world
        .resource::<ReflectionsDue>()
        .0
        .iter()
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(due, vec![NpcId(1)], "Alice has not reflected yet");
}

#[test]
fn archived_memories_are_logged_at_the_start_of_the_tick() {
    let mut world = build_world(setup());
    world.resource_mut::<MemoryLedger>().pending.clear();
    world.insert_resource(ArchivedMemories(vec![(MemoryId(1), NpcId(0))]));
    tick(&mut world, 0, &[]);
    let lines = world.resource::<TickLog>().lines.clone();
    let forgot = lines
        .iter()
        .position(|l| l.contains(r#""type":"forgot""#))
        .expect("a forgot line");
    assert_eq!(
        lines[forgot],
        r#"{"type":"forgot","tick":0,"npc":"Bob","id":1}"#
    );
    assert!(world.resource::<ArchivedMemories>().0.is_empty(), "taken");
}

#[test]
fn a_reflection_teaches_a_fact_with_its_evidence_as_the_source() {
    let mut s = setup();
    s.reflect.threshold = 8;
    s.events.clear();
    s.facts
        .push(FactSpec::by_words("festival", vec!["festival".into()]));
    let mut world = build_world(s);
    world.resource_mut::<MemoryLedger>().pending.clear();
    let made = tick(
        &mut world,
        0,
        &[(
            0,
            Decision::Talk {
                speech: "There will be music and dancing at the market.".into(),
                to: None,
            },
        )],
    );
    let heard = made
        .iter()
        .find(|m| m.npc == NpcId(1) && m.source == Some(NpcId(0)))
        .expect("Alice heard Bob")
        .id;
    world.resource_mut::<SimClock>().tick = 1;
    world.run_schedule(SimPerceive);
    assert!(
        world
            .resource::<ReflectionsDue>()
            .0
            .iter()
            .any(|(n, _)| *n == NpcId(1))
    );
    let mut thoughts = std::collections::BTreeMap::new();
    thoughts.insert(
        NpcId(1),
        Thought {
            decision: Decision::Stay,
            recalled: vec![],
            recall_failed: false,
            brain_failed: false,
            reflection: Some(vec![Insight {
                content: "A festival is coming to the market.".into(),
                importance: 7,
                evidence: vec![heard],
            }]),
            reflection_failed: false,
        },
    );
    world.insert_resource(Decisions(thoughts));
    world.run_schedule(SimAct);
    let lines = world.resource::<TickLog>().lines.join("\n");
    let learned = lines
        .lines()
        .find(|l| l.contains(r#""type":"learned","tick":1,"fact":"festival""#))
        .expect("Alice learns of the festival by reflecting");
    assert!(
        learned.contains(r#""npc":"Alice","from":"Bob","memory":"#),
        "{learned}"
    );
    assert!(
        learned.ends_with(&format!(r#","via":{}}}"#, heard.0)),
        "{learned}"
    );
}
