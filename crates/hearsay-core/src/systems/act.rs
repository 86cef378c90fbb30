//! Act: decisions take effect, in NPC-id order. Talk is heard by everyone within hearing
//! radius of where the speaker stood at the start of the tick (addressed or not); a
//! whisper by its addressee alone; movers take one step.

use std::collections::BTreeMap;

use bevy_ecs::prelude::{MessageReader, MessageWriter, Query, Res, ResMut};

use crate::SPEECH_CHARS_MAX;
use crate::components::{Hearing, KnownBy, Position, Target, gist_key};
use crate::events::{MoveLine, SimEvent, StayLine, TalkLine};
use crate::grid::Pos;
use crate::ids::NpcId;
use crate::messages::{NpcMoved, NpcSpoke, SpeechHeard};
use crate::observation::HeardLine;
use crate::resources::{
    Decision, Decisions, Roster, SimClock, Thought, TickEvents, Wakes, WorldMap,
};
use crate::wake::{Attention, Intent, Wake};

/// Acts for every NPC that continues this tick (see [`Wakes`]): one that was walking
/// walks on toward its target, one that was staying stays. Its thought has no recall
/// and no brain behind it. Runs first in Act, so its decisions are checked like any.
pub fn continue_intentions(
    wakes: Res<Wakes>,
    roster: Res<Roster>,
    npcs: Query<(&Target, &Attention)>,
    mut decisions: ResMut<Decisions>,
) {
    for (idx, wake) in wakes.0.iter().enumerate() {
        if wake.thinks() {
            continue;
        }
        let Some(Ok((target, attention))) = roster.entities.get(idx).map(|&e| npcs.get(e)) else {
            continue;
        };
        let decision = match (attention.intent, target.0) {
            (Intent::Walk, Some(to)) => Decision::Move { to },
            _ => Decision::Stay,
        };
        decisions.0.insert(
            NpcId(idx as u32),
            Thought {
                decision,
                recalled: Vec::new(),
                recall_failed: false,
                brain_failed: false,
                reflection: None,
                reflection_failed: false,
            },
        );
    }
}

/// Makes every decision valid before it takes effect: speech made one line (control
/// characters become spaces), trimmed and cut to
/// [`SPEECH_CHARS_MAX`] characters (empty speech becomes `stay`), move targets clamped to
/// the map (a move to where the NPC already stands becomes `stay`), an addressee checked
/// against where everyone stands at the start of the tick: a talk's `to` that is the
/// speaker, unknown or beyond hearing radius is dropped, and a whisper whose addressee
/// is not within [`Pos::within_whisper`](crate::grid::Pos::within_whisper) reach becomes
/// a plain talk. A brain can therefore never move anyone off the map, flood memories
/// with its words, or whisper across the room — whatever the tape it is replayed from.
pub fn sanitize_decisions(
    map: Res<WorldMap>,
    roster: Res<Roster>,
    positions: Query<&Position>,
    mut decisions: ResMut<Decisions>,
) {
    let at = |id: NpcId| {
        roster
            .entities
            .get(id.index())
            .and_then(|&e| positions.get(e).ok())
            .map(|p| p.0)
    };
    for (&id, thought) in decisions.0.iter_mut() {
        let here = at(id);
        // The addressee, if it is someone else standing where `reaches` says it may.
        let addressee = |to: NpcId, reaches: &dyn Fn(Pos, Pos) -> bool| {
            let there = at(to)?;
            (to != id && reaches(here?, there)).then_some(to)
        };
        let sanitized = match &thought.decision {
            Decision::Talk { speech, to } => {
                // One line of plain text: whatever a model answers, it cannot start a
                // line of its own in a listener's memory or prompt.
                let speech = crate::one_line(speech, SPEECH_CHARS_MAX);
                if speech.is_empty() {
                    Decision::Stay
                } else {
                    let to =
                        to.and_then(|to| addressee(to, &|a, b| a.within(b, map.hearing_radius)));
                    Decision::Talk { speech, to }
                }
            }
            Decision::Whisper { speech, to } => {
                let speech = crate::one_line(speech, SPEECH_CHARS_MAX);
                if speech.is_empty() {
                    Decision::Stay
                } else if let Some(to) = addressee(*to, &|a, b| a.within_whisper(b)) {
                    Decision::Whisper { speech, to }
                } else {
                    Decision::Talk { speech, to: None }
                }
            }
            Decision::Move { to } => {
                let to = map.grid.clamp(*to);
                if here == Some(to) {
                    Decision::Stay
                } else {
                    Decision::Move { to }
                }
            }
            Decision::Stay => Decision::Stay,
        };
        thought.decision = sanitized;
    }
}

/// Every `talk` decision becomes an [`NpcSpoke`] naming who hears it: everyone within
/// hearing radius, or — in a crowd — the nearest `max_listeners` of them (by distance,
/// then id; an addressee first of all), listed in id order. The cap bounds what one tick
/// can add to the world's memories at `talks × max_listeners`, however many NPCs stand
/// in one place. A `whisper` is heard by its addressee alone.
pub fn speak(
    decisions: Res<Decisions>,
    map: Res<WorldMap>,
    roster: Res<Roster>,
    positions: Query<&Position>,
    mut spoke: MessageWriter<NpcSpoke>,
) {
    let at: Vec<_> = roster
        .entities
        .iter()
        .map(|&e| positions.get(e).map(|p| p.0).ok())
        .collect();
    let near = crate::grid::Neighbours::new(at, map.hearing_radius);
    for (&speaker, thought) in &decisions.0 {
        let (speech, to) = match &thought.decision {
            Decision::Talk { speech, to } => (speech, *to),
            Decision::Whisper { speech, to } => {
                spoke.write(NpcSpoke {
                    speaker,
                    text: speech.as_str().into(),
                    listeners: vec![*to],
                    to: Some(*to),
                    whisper: true,
                });
                continue;
            }
            _ => continue,
        };
        let Some(here) = near.at(speaker.index()) else {
            continue;
        };
        let mut heard_by: Vec<usize> = near
            .within(here, map.hearing_radius)
            .into_iter()
            .filter(|&idx| idx != speaker.index())
            .collect();
        let cap = map.max_listeners as usize;
        if heard_by.len() > cap {
            let addressee = to.map(NpcId::index);
            heard_by.sort_by_key(|&idx| {
                let dist = near.at(idx).map_or(u64::MAX, |p| here.dist2(p));
                (Some(idx) != addressee, dist, idx)
            });
            heard_by.truncate(cap);
            heard_by.sort_unstable();
        }
        let listeners = heard_by.into_iter().map(|idx| NpcId(idx as u32)).collect();
        spoke.write(NpcSpoke {
            speaker,
            text: speech.as_str().into(),
            listeners,
            to,
            whisper: false,
        });
    }
}

/// `move` sets the NPC's target and takes one step toward it; `stay` clears the target;
/// `talk` leaves both alone. Writes [`NpcMoved`]. For an `on_change` NPC it also sets what
/// it will carry on with: walking on (or, once there, `Arrived`: it must think), staying,
/// or nothing after a talk or a failed brain.
pub fn walk(
    decisions: Res<Decisions>,
    map: Res<WorldMap>,
    roster: Res<Roster>,
    wakes: Res<Wakes>,
    mut npcs: Query<(&mut Position, &mut Target, &mut Attention)>,
    mut moved: MessageWriter<NpcMoved>,
) {
    for (&id, thought) in &decisions.0 {
        let Some(&entity) = roster.entities.get(id.index()) else {
            continue;
        };
        let Ok((mut pos, mut target, mut attention)) = npcs.get_mut(entity) else {
            continue;
        };
        let intent = match thought.decision {
            Decision::Move { to } => {
                let from = pos.0;
                let next = map.grid.clamp(from.step_toward(to));
                pos.0 = next;
                target.0 = (next != to).then_some(to);
                moved.write(NpcMoved {
                    npc: id,
                    from,
                    to: next,
                    target: to,
                });
                if next == to {
                    Intent::Arrived
                } else {
                    Intent::Walk
                }
            }
            Decision::Stay => {
                target.0 = None;
                if thought.brain_failed {
                    Intent::None
                } else {
                    Intent::Stay
                }
            }
            Decision::Talk { .. } | Decision::Whisper { .. } => Intent::None,
        };
        // An `every_tick` NPC keeps no attention (nothing for checkpoints to carry).
        if wakes.0.get(id.index()).is_some_and(|w| *w != Wake::Always) {
            attention.intent = intent;
        }
    }
}

/// Delivers speech: each listener's [`Hearing`] is replaced by what it heard this tick and
/// a [`SpeechHeard`] is written per listener. Everyone present (speaker and listeners) now
/// knows everyone else there heard those words ([`KnownBy`]).
pub fn deliver_speech(
    roster: Res<Roster>,
    mut spoke: MessageReader<NpcSpoke>,
    mut npcs: Query<(&mut Hearing, &mut KnownBy)>,
    mut heard: MessageWriter<SpeechHeard>,
    mut added: ResMut<crate::resources::KnownByAdded>,
) {
    for (mut hearing, _) in npcs.iter_mut() {
        hearing.0.clear();
    }
    for msg in spoke.read() {
        for &listener in &msg.listeners {
            let Some(&entity) = roster.entities.get(listener.index()) else {
                continue;
            };
            if let Ok((mut hearing, _)) = npcs.get_mut(entity) {
                hearing.0.push(HeardLine {
                    speaker: msg.speaker,
                    speaker_name: roster.shared_name(msg.speaker),
                    text: msg.text.clone(),
                    to: msg.to.map(|to| roster.shared_name(to)),
                    whispered: msg.whisper,
                });
            }
            heard.write(SpeechHeard {
                listener,
                speaker: msg.speaker,
                text: msg.text.clone(),
                to: msg.to,
                whisper: msg.whisper,
            });
        }
        let key = gist_key(&msg.text);
        let present: Vec<NpcId> = std::iter::once(msg.speaker)
            .chain(msg.listeners.iter().copied())
            .collect();
        for &p in &present {
            let Some(&entity) = roster.entities.get(p.index()) else {
                continue;
            };
            if let Ok((_, mut known)) = npcs.get_mut(entity) {
                // Written only when something is new, so the ECS marks a `KnownBy`
                // changed only then (checkpoint deltas compare only those).
                if present
                    .iter()
                    .any(|&q| q != p && !known.0.contains(&(key, q)))
                {
                    for &q in present.iter().filter(|&&q| q != p) {
                        if known.0.insert((key, q)) {
                            added.0.push((p, (key, q)));
                        }
                    }
                }
            }
        }
    }
}

/// One log line per NPC per tick, in id order: `talk` (a whisper too, marked so), `move`
/// or `stay`, with the
/// memories recalled for the decision and, under `on_change`, why the NPC thought or
/// that it continued.
#[expect(
    clippy::too_many_arguments,
    reason = "a system's parameters are its declared data access"
)]
pub fn log_actions(
    clock: Res<SimClock>,
    decisions: Res<Decisions>,
    roster: Res<Roster>,
    wakes: Res<Wakes>,
    positions: Query<&Position>,
    mut spoke: MessageReader<NpcSpoke>,
    mut moved: MessageReader<NpcMoved>,
    mut log: ResMut<TickEvents>,
) {
    let talks: BTreeMap<NpcId, &NpcSpoke> = spoke.read().map(|m| (m.speaker, m)).collect();
    let moves: BTreeMap<NpcId, &NpcMoved> = moved.read().map(|m| (m.npc, m)).collect();
    let tick = clock.tick;
    for (&id, thought) in &decisions.0 {
        let npc = roster.name(id).to_owned();
        let recalled = thought.recalled.clone();
        let recall_failed = thought.recall_failed;
        let wake = wakes.0.get(id.index()).cloned().unwrap_or_default();
        let continued = !wake.thinks();
        let wake = wake.reasons().to_vec();
        let event = match (&thought.decision, talks.get(&id), moves.get(&id)) {
            (Decision::Talk { .. } | Decision::Whisper { .. }, Some(talk), _) => {
                SimEvent::Talk(TalkLine {
                    tick,
                    npc,
                    text: talk.text.to_string(),
                    listeners: roster.names_of(&talk.listeners),
                    to: talk.to.map(|to| roster.name(to).to_owned()),
                    whisper: talk.whisper,
                    recalled,
                    recall_failed,
                    wake,
                })
            }
            (Decision::Move { .. }, _, Some(mv)) => SimEvent::Move(MoveLine {
                tick,
                npc,
                from: mv.from,
                to: mv.to,
                target: mv.target,
                recalled,
                recall_failed,
                wake,
                continued,
            }),
            _ => {
                let Some(at) = roster
                    .entities
                    .get(id.index())
                    .and_then(|&e| positions.get(e).ok())
                else {
                    continue;
                };
                SimEvent::Stay(StayLine {
                    tick,
                    npc,
                    at: at.0,
                    recalled,
                    recall_failed,
                    brain_failed: thought.brain_failed,
                    wake,
                    continued,
                })
            }
        };
        log.0.push(event);
    }
}
