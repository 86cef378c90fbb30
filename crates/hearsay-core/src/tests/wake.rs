//! The wake rules: each reason wakes an `on_change` NPC, its absence lets it continue,
//! and continuing costs no decision from outside.

use std::collections::BTreeMap;

use super::{npc, setup};
use crate::checkpoint::{Checkpoint, written};
use crate::*;

const ON_CHANGE: Mind = Mind {
    think: ThinkMode::OnChange { max_idle_ticks: 8 },
    reflect_retry_ticks: 10,
};

/// The test world with every NPC under `on_change` (idle after `idle` ticks) and no
/// scenario event unless `events`.
fn world(idle: u64, events: bool) -> WorldSetup {
    let mut s = setup();
    for n in &mut s.npcs {
        n.mind = Mind {
            think: ThinkMode::OnChange {
                max_idle_ticks: idle,
            },
            ..ON_CHANGE
        };
    }
    if !events {
        s.events.clear();
    }
    s
}

fn thought(decision: Decision) -> Thought {
    Thought {
        decision,
        recalled: vec![],
        recall_failed: false,
        brain_failed: false,
        reflection: None,
        reflection_failed: false,
    }
}

/// One tick: every NPC that thinks gets `decide(npc, its observation)`; returns who
/// woke (with the reasons) and the tick's log.
fn step(
    sim: &mut Sim,
    t: u64,
    decide: &mut dyn FnMut(NpcId, &Observation) -> Thought,
) -> (Vec<Wake>, Vec<String>) {
    let (perceived, lines) = step_full(sim, t, decide);
    (perceived.wakes, lines)
}

/// [`step`], with everything the tick perceived but the observations.
fn step_full(
    sim: &mut Sim,
    t: u64,
    decide: &mut dyn FnMut(NpcId, &Observation) -> Thought,
) -> (Perceived, Vec<String>) {
    let mut perceived = sim.perceive(t, 7, vec![]);
    let thinking: Vec<NpcId> = perceived.observations.iter().map(|o| o.npc).collect();
    let expected: Vec<NpcId> = perceived
        .wakes
        .iter()
        .enumerate()
        .filter(|(_, w)| w.thinks())
        .map(|(i, _)| NpcId(i as u32))
        .collect();
    assert_eq!(thinking, expected, "observations are exactly the thinkers'");
    let decisions: BTreeMap<NpcId, Thought> = perceived
        .observations
        .iter()
        .map(|o| (o.npc, decide(o.npc, o)))
        .collect();
    let acted = sim.act(decisions);
    perceived.observations.clear();
    (perceived, acted.log.lines)
}

fn woken(reasons: &[WakeReason]) -> Wake {
    Wake::Woken(reasons.to_vec())
}

fn stay_all(_: NpcId, _: &Observation) -> Thought {
    thought(Decision::Stay)
}

#[test]
fn every_tick_npcs_always_think_and_their_lines_carry_no_wake() {
    let mut sim = Sim::new(setup());
    for t in 0..4 {
        let (wakes, lines) = step(&mut sim, t, &mut stay_all);
        assert_eq!(wakes, vec![Wake::Always; 3]);
        assert!(
            lines
                .iter()
                .all(|l| !l.contains("\"wake\"") && !l.contains("\"continued\"")),
            "{lines:?}"
        );
    }
}

#[test]
fn an_npc_alone_and_walking_thinks_again_only_when_it_arrives() {
    // Carol at (0, 0) is alone (Bob and Alice are out of sight). At tick 0 she decides
    // to walk to (6, 0): six steps, the last at tick 5.
    let mut sim = Sim::new(world(8, false));
    let mut calls: Vec<(u64, NpcId)> = Vec::new();
    for t in 0..8 {
        let (wakes, lines) = step(&mut sim, t, &mut |npc, _| {
            calls.push((t, npc));
            if npc == NpcId(2) && t == 0 {
                thought(Decision::Move { to: Pos::new(6, 0) })
            } else {
                thought(Decision::Stay)
            }
        });
        let carol = &wakes[2];
        match t {
            0 => assert_eq!(*carol, woken(&[WakeReason::NoIntention])),
            1..=5 => {
                assert_eq!(*carol, Wake::Continued, "tick {t}");
                let line = lines
                    .iter()
                    .find(|l| l.contains(r#""npc":"Carol""#) && l.contains(r#""type":"move""#))
                    .expect("she walks on");
                assert!(line.contains(r#""continued":true"#), "{line}");
            }
            6 => assert_eq!(*carol, woken(&[WakeReason::Arrived])),
            _ => assert_eq!(
                *carol,
                Wake::Continued,
                "she stays, as she decided at tick 6"
            ),
        }
    }
    let carol: Vec<u64> = calls
        .iter()
        .filter(|(_, n)| *n == NpcId(2))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(carol, vec![0, 6], "two thoughts in eight ticks");
}

#[test]
fn a_long_walk_is_interrupted_by_max_idle_ticks() {
    let mut sim = Sim::new(world(3, false));
    let mut carol = Vec::new();
    for t in 0..8 {
        let (wakes, _) = step(&mut sim, t, &mut |npc, obs| {
            if npc == NpcId(2) {
                // Keep heading for the far corner.
                let _ = obs;
                thought(Decision::Move {
                    to: Pos::new(19, 0),
                })
            } else {
                thought(Decision::Stay)
            }
        });
        carol.push(wakes[2].clone());
    }
    assert_eq!(
        carol,
        vec![
            woken(&[WakeReason::NoIntention]),
            Wake::Continued,
            Wake::Continued,
            woken(&[WakeReason::Idle]),
            Wake::Continued,
            Wake::Continued,
            woken(&[WakeReason::Idle]),
            Wake::Continued,
        ]
    );
}

#[test]
fn nothing_changing_wakes_nobody() {
    let mut sim = Sim::new(world(8, false));
    let (wakes, _) = step(&mut sim, 0, &mut stay_all);
    // Bob and Alice are within earshot of each other from the start; Carol is alone.
    assert_eq!(
        wakes,
        vec![
            woken(&[WakeReason::Newcomer, WakeReason::NoIntention]),
            woken(&[WakeReason::Newcomer, WakeReason::NoIntention]),
            woken(&[WakeReason::NoIntention]),
        ],
        "the first tick"
    );
    for t in 1..8 {
        let (wakes, lines) = step(&mut sim, t, &mut stay_all);
        assert_eq!(wakes, vec![Wake::Continued; 3], "tick {t}");
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains(r#""continued":true"#))
                .count(),
            3,
            "{lines:?}"
        );
    }
    let (wakes, _) = step(&mut sim, 8, &mut stay_all);
    assert_eq!(wakes, vec![woken(&[WakeReason::Idle]); 3]);
}

#[test]
fn speech_wakes_every_listener_and_the_speaker_has_no_intention_after() {
    // A crowd: everyone in earshot of the speaker wakes; the speaker too (no intention).
    let mut npcs = vec![npc("Speaker", 5, 5, &[])];
    for (i, (x, y)) in [(4, 5), (6, 6), (5, 3), (8, 5), (5, 9)]
        .into_iter()
        .enumerate()
    {
        npcs.push(npc(&format!("L{i}"), x, y, &[]));
    }
    let mut s = world(8, false);
    s.npcs = npcs
        .into_iter()
        .map(|mut n| {
            n.mind = ON_CHANGE;
            n
        })
        .collect();
    let mut sim = Sim::new(s);
    step(&mut sim, 0, &mut stay_all);
    let (wakes, _) = step(&mut sim, 1, &mut stay_all);
    assert_eq!(wakes, vec![Wake::Continued; 6], "nothing changed");
    // Nobody thinks at tick 1, so wake the speaker by hand: idle after 8 ticks.
    for t in 2..8 {
        step(&mut sim, t, &mut stay_all);
    }
    step(&mut sim, 8, &mut |npc, _| {
        if npc == NpcId(0) {
            thought(Decision::Talk {
                speech: "Listen!".into(),
                to: None,
            })
        } else {
            thought(Decision::Stay)
        }
    });
    let (wakes, _) = step(&mut sim, 9, &mut stay_all);
    // (5, 9) is 4 cells away: out of earshot, it does not wake.
    assert_eq!(
        wakes,
        vec![
            woken(&[WakeReason::NoIntention]),
            woken(&[WakeReason::Heard]),
            woken(&[WakeReason::Heard]),
            woken(&[WakeReason::Heard]),
            woken(&[WakeReason::Heard]),
            Wake::Continued,
        ]
    );
}

#[test]
fn someone_coming_within_earshot_wakes_both() {
    // Carol walks from (0, 0) toward Alice at (12, 7); Alice stays. Earshot is 3 cells.
    let mut sim = Sim::new(world(100, false));
    let mut met = None;
    for t in 0..14 {
        let (wakes, _) = step(&mut sim, t, &mut |npc, _| {
            if npc == NpcId(2) {
                thought(Decision::Move {
                    to: Pos::new(11, 7),
                })
            } else {
                thought(Decision::Stay)
            }
        });
        if t > 0 && wakes[1] != Wake::Continued {
            met = Some((t, wakes.clone()));
            break;
        }
    }
    let (t, wakes) = met.expect("they meet");
    assert!(
        wakes[1].reasons().contains(&WakeReason::Newcomer),
        "Alice at tick {t}: {wakes:?}"
    );
    assert!(
        wakes[2].reasons().contains(&WakeReason::Newcomer),
        "Carol at tick {t}: {wakes:?}"
    );
    // The next tick, nobody new: Alice (who decided to stay again) continues.
    let (wakes, _) = step(&mut sim, t + 1, &mut stay_all);
    assert_eq!(wakes[1], Wake::Continued);
}

#[test]
fn a_scenario_event_wakes_its_witnesses() {
    let mut sim = Sim::new(world(100, true));
    step(&mut sim, 0, &mut stay_all);
    // The festival at the market (15, 8), tick 1: Bob and Alice are within sight.
    let (wakes, _) = step(&mut sim, 1, &mut stay_all);
    assert_eq!(
        wakes,
        vec![
            woken(&[WakeReason::Witnessed]),
            woken(&[WakeReason::Witnessed]),
            Wake::Continued
        ]
    );
}

#[test]
fn a_brain_failure_is_no_intention_and_an_unreachable_target_wakes() {
    let mut sim = Sim::new(world(100, false));
    step(&mut sim, 0, &mut |npc, _| {
        let mut t = thought(Decision::Stay);
        t.brain_failed = npc == NpcId(2);
        t
    });
    // Carol's brain failed (she stayed): she thinks again; this time she walks.
    let (wakes, _) = step(&mut sim, 1, &mut |_, _| {
        thought(Decision::Move { to: Pos::new(3, 3) })
    });
    assert_eq!(
        wakes[2],
        woken(&[WakeReason::NoIntention]),
        "a failure retries"
    );
    assert_eq!(wakes[0], Wake::Continued);

    // A target off the map (a fork onto a smaller map can leave one): unreachable.
    let mut saved: Checkpoint = sim.capture(2);
    assert_eq!(saved.npcs[2].attention.intent, Intent::Walk);
    saved.npcs[2].target = Target(Some(Pos::new(-4, 0)));
    let mut sim = Sim::restored(world(100, false), &saved).expect("restores");
    let (wakes, _) = step(&mut sim, 2, &mut stay_all);
    assert_eq!(wakes[2], woken(&[WakeReason::Unreachable]));
}

fn bob_talks(npc: NpcId, _: &Observation) -> Thought {
    if npc == NpcId(0) {
        thought(Decision::Talk {
            speech: "Fish!".into(),
            to: None,
        })
    } else {
        thought(Decision::Stay)
    }
}

#[test]
fn a_due_reflection_wakes_and_a_failed_one_waits_for_its_retry() {
    let mut s = world(4, false);
    s.reflect.threshold = 16;
    let mut sim = Sim::new(s);
    // Bob talks twice (8 + 8): due at tick 2. Each talk leaves him without intention.
    step(&mut sim, 0, &mut bob_talks);
    step(&mut sim, 1, &mut bob_talks);
    let perceived = sim.perceive(2, 7, vec![]);
    assert_eq!(
        perceived.wakes[0],
        woken(&[WakeReason::NoIntention, WakeReason::Reflection])
    );
    assert_eq!(perceived.reflections_due.len(), 2, "Alice heard both talks");
    // Both reflections fail.
    let decisions = perceived
        .observations
        .iter()
        .map(|o| {
            let mut t = thought(Decision::Stay);
            t.reflection = Some(vec![]);
            t.reflection_failed = perceived.reflections_due.iter().any(|(n, _)| *n == o.npc);
            (o.npc, t)
        })
        .collect();
    let acted = sim.act(decisions);
    assert!(
        acted.log.lines.iter().any(|l| l.contains(
            r#""type":"reflected","tick":2,"npc":"Bob","insights":0,"importance":16,"failed":true"#
        )),
        "{:?}",
        acted.log.lines
    );
    // From now on Bob talks whenever he thinks (idle at tick 6, then every tick after a
    // talk): his tally passes 32 at tick 7, but the retry waits for tick 12.
    for t in 3..12 {
        let (p, _) = step_full(&mut sim, t, &mut bob_talks);
        assert!(p.reflections_due.is_empty(), "tick {t}");
        assert_eq!(p.reflections_deferred, vec![NpcId(0), NpcId(1)], "tick {t}");
    }
    let p = sim.perceive(12, 7, vec![]);
    assert!(p.reflections_deferred.is_empty());
    assert_eq!(
        p.reflections_due
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>(),
        vec![NpcId(0), NpcId(1)]
    );
    let (_, evidence) = &p.reflections_due[0];
    assert!(
        evidence.len() > 2,
        "the failed try's evidence is kept: {evidence:?}"
    );
    assert!(p.wakes[0].reasons().contains(&WakeReason::Reflection));
}

#[test]
fn a_checkpoint_carries_the_wake_state_exactly() {
    let run = |stop: Option<u64>| -> Vec<String> {
        let mut sim = Sim::new(world(4, true));
        let mut lines = Vec::new();
        let mut decide = |npc: NpcId, obs: &Observation| match (npc.0 + obs.tick as u32) % 3 {
            0 => thought(Decision::Move {
                to: Pos::new((obs.tick as i32 * 3) % 20, 2),
            }),
            1 => thought(Decision::Stay),
            _ => thought(Decision::Talk {
                speech: format!("tick {}", obs.tick),
                to: None,
            }),
        };
        for t in 0..16 {
            if stop == Some(t) {
                let saved = sim.capture(t);
                let json = serde_json::to_string(&saved).expect("encodes");
                let back: Checkpoint = serde_json::from_str(&json).expect("decodes");
                sim = Sim::restored(world(4, true), &back).expect("restores");
            }
            let (_, l) = step(&mut sim, t, &mut decide);
            lines.extend(l);
        }
        lines
    };
    let whole = run(None);
    assert!(whole.iter().any(|l| l.contains(r#""continued":true"#)));
    assert!(whole.iter().any(|l| l.contains(r#""wake":["#)));
    for stop in [3, 7, 11] {
        assert_eq!(
            run(Some(stop)),
            whole,
            "stopped and restored before tick {stop}"
        );
    }
}

#[test]
fn a_whisper_wakes_the_addressee_alone() {
    // The speaker whispers to its neighbour; the NPC two cells away is in earshot of a
    // talk but hears nothing of a whisper, so it sleeps on.
    let mut s = world(8, false);
    s.npcs = [("Speaker", 5, 5), ("Next", 6, 5), ("Near", 5, 7)]
        .into_iter()
        .map(|(name, x, y)| {
            let mut n = npc(name, x, y, &[]);
            n.mind = ON_CHANGE;
            n
        })
        .collect();
    let mut sim = Sim::new(s);
    for t in 0..8 {
        step(&mut sim, t, &mut stay_all);
    }
    step(&mut sim, 8, &mut |npc, _| {
        if npc == NpcId(0) {
            thought(Decision::Whisper {
                speech: "Psst.".into(),
                to: NpcId(1),
            })
        } else {
            thought(Decision::Stay)
        }
    });
    let (wakes, _) = step(&mut sim, 9, &mut stay_all);
    assert_eq!(
        wakes,
        vec![
            woken(&[WakeReason::NoIntention]),
            woken(&[WakeReason::Heard]),
            Wake::Continued,
        ]
    );
}

/// A checkpoint with its windows and evidence by id, as a store saves it.
fn by_id(mut c: Checkpoint) -> Checkpoint {
    use crate::checkpoint::Entry;
    for npc in &mut c.npcs {
        for entry in &mut npc.short_term {
            *entry = Entry::Id(entry.id());
        }
        for entry in &mut npc.reflection.evidence {
            *entry = Entry::Id(entry.id());
        }
    }
    c
}

#[test]
fn deltas_applied_in_order_equal_the_whole_checkpoint_at_every_tick() {
    let mut sim = Sim::new(world(4, true));
    let mut decide = |npc: NpcId, obs: &Observation| match (npc.0 * 7 + obs.tick as u32) % 4 {
        0 => thought(Decision::Move {
            to: Pos::new((obs.tick as i32 * 5) % 20, (npc.0 as i32 * 3) % 10),
        }),
        1 => thought(Decision::Stay),
        _ => thought(Decision::Talk {
            speech: format!("news {} from {}", obs.tick % 5, npc.0),
            to: None,
        }),
    };
    step(&mut sim, 0, &mut decide);
    let mut base = sim.save_whole(1);
    // The state saved last as a capture holds it (every NPC's `KnownBy` whole).
    let mut before = by_id(sim.capture(1));
    assert_eq!(
        base.npcs.iter().map(|n| &n.learned).collect::<Vec<_>>(),
        before.npcs.iter().map(|n| &n.known_by).collect::<Vec<_>>(),
        "the first save holds what was learned since the world began: all of it"
    );
    // What a reader has: the whole checkpoint as JSON, then each delta as JSON; it puts
    // together what each NPC knows from every checkpoint so far.
    let mut reader: Checkpoint =
        serde_json::from_str(&serde_json::to_string(&base).expect("encodes")).expect("decodes");
    crate::checkpoint::KnownSoFar::default()
        .into_whole(&mut reader)
        .expect("fits");
    let (mut slides, mut learned, mut skipped) = (0, 0, 0);
    for t in 1..30 {
        if t == 15 {
            // A resume: a restored world saves whole first, then deltas again.
            sim = Sim::restored(world(4, true), &sim.capture(15)).expect("restores");
            base = sim.save_whole(15);
            assert!(
                base.npcs
                    .iter()
                    .all(|n| n.learned.is_empty() && n.known_by.is_empty()),
                "nothing learned since the restore"
            );
            let mut so_far = crate::checkpoint::KnownSoFar::default();
            so_far.whole(reader).expect("fits");
            reader = base.clone();
            so_far.into_whole(&mut reader).expect("fits");
            before = by_id(sim.capture(15));
        }
        step(&mut sim, t, &mut decide);
        let delta = sim
            .save_delta(t + 1, &mut base, Clone::clone)
            .expect("fits");
        let json = serde_json::to_string(&delta).expect("encodes");
        assert_eq!(
            written(|out| delta.write_json(out)),
            json,
            "tick {t}: the delta's writer writes serde's bytes"
        );
        let read: crate::checkpoint::CheckpointDelta =
            serde_json::from_str(&json).expect("decodes");
        assert_eq!(read, delta, "tick {t}: the JSON round trip");
        reader.apply(read).expect("applies");
        let whole = by_id(sim.capture(t + 1));
        assert_eq!(
            delta,
            whole.delta_from(&before),
            "tick {t}: the journal of pairs learned gives what comparing every part finds"
        );
        // The saver's base is the capture but for `KnownBy`: of it, what the delta added.
        let mut saved = whole.clone();
        for (i, npc) in saved.npcs.iter_mut().enumerate() {
            npc.known_by = Default::default();
            npc.learned = delta
                .npcs
                .iter()
                .find(|d| d.npc as usize == i)
                .and_then(|d| d.known_by.as_ref())
                .map(|k| k.add.clone())
                .unwrap_or_default();
        }
        assert_eq!(base, saved, "tick {t}: the saver's base");
        // A run saves its base as the next whole checkpoint: the same bytes as that, by
        // the writer a run uses and by serde.
        let serde = serde_json::to_string(&saved).expect("encodes");
        assert_eq!(
            serde_json::to_string(&base).expect("encodes"),
            serde,
            "tick {t}: the base's JSON"
        );
        assert_eq!(
            written(|out| base.write_json(out)),
            serde,
            "tick {t}: the whole checkpoint's writer writes serde's bytes"
        );
        assert_eq!(reader, whole, "tick {t}: the reader's state");
        skipped += whole.npcs.len() - delta.npcs.len();
        for n in &delta.npcs {
            slides += usize::from(matches!(
                n.short_term,
                Some(crate::checkpoint::SeqDelta::Slide { .. })
            ));
            learned += usize::from(n.known_by.is_some());
        }
        before = whole;
    }
    assert!(
        slides > 10,
        "windows slide rather than being saved whole ({slides})"
    );
    assert!(learned > 5, "talk teaches who knows what ({learned})");
    assert!(skipped > 0, "an NPC with nothing new is left out");
    // Applied to the wrong checkpoint, a delta is refused.
    let delta = sim.save_delta(31, &mut base, Clone::clone).expect("fits");
    let mut stale = by_id(sim.capture(31));
    stale.next_tick = 12;
    assert!(matches!(
        stale.apply(delta),
        Err(crate::checkpoint::CheckpointError::Delta(_))
    ));
}

/// A fork's stage switch between two saves (`Sim::carried_to`) sets the world up anew:
/// what the NPCs learned since the last save must still reach the next one, or a reader
/// gathering `KnownBy` from the saves would miss it.
#[test]
fn what_was_learned_before_a_stage_switch_reaches_the_next_save() {
    let mut sim = Sim::new(world(4, true));
    let mut decide = |npc: NpcId, obs: &Observation| {
        thought(Decision::Talk {
            speech: format!("news {} from {}", obs.tick, npc.0),
            to: None,
        })
    };
    step(&mut sim, 0, &mut decide);
    let first = sim.save_whole(1);
    for t in 1..3 {
        step(&mut sim, t, &mut decide);
    }
    let learned: usize = sim
        .capture(3)
        .npcs
        .iter()
        .zip(&first.npcs)
        .map(|(now, then)| now.known_by.0.len() - then.learned.0.len())
        .sum();
    assert!(learned > 0, "talk in ticks 1 and 2 taught who heard it");
    sim = sim.carried_to(world(4, true), 3).expect("carries");
    step(&mut sim, 3, &mut decide);
    let second = sim.save_whole(4);
    let mut known = crate::checkpoint::KnownSoFar::default();
    known.whole(first).expect("fits");
    let mut read = second;
    known.into_whole(&mut read).expect("fits");
    let whole = sim.capture(4);
    for (i, (read, whole)) in read.npcs.iter().zip(&whole.npcs).enumerate() {
        assert_eq!(read.known_by, whole.known_by, "NPC {i}");
    }
}
