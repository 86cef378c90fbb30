//! Act: decisions take effect, in NPC-id order. Talk is heard by everyone within hearing
//! radius of where the speaker stood at the start of the tick; movers take one step.

use std::collections::BTreeMap;

use bevy_ecs::prelude::{MessageReader, MessageWriter, Query, Res, ResMut};

use crate::SPEECH_CHARS_MAX;
use crate::components::{Hearing, KnownBy, Position, Target, gist_key};
use crate::events::SimEvent;
use crate::ids::NpcId;
use crate::messages::{NpcMoved, NpcSpoke, SpeechHeard};
use crate::observation::HeardLine;
use crate::resources::{Decision, Decisions, Roster, SimClock, TickEvents, WorldMap};

/// Makes every decision valid before it takes effect: speech made one line (control
/// characters become spaces), trimmed and cut to
/// [`SPEECH_CHARS_MAX`] characters (empty speech becomes `stay`), move targets clamped to
/// the map (a move to where the NPC already stands becomes `stay`). A brain can therefore
/// never move anyone off the map or flood memories with its words.
pub fn sanitize_decisions(
    map: Res<WorldMap>,
    roster: Res<Roster>,
    positions: Query<&Position>,
    mut decisions: ResMut<Decisions>,
) {
    for (id, thought) in decisions.0.iter_mut() {
        let sanitized = match &thought.decision {
            Decision::Talk { speech } => {
                // One line of plain text: whatever a model answers, it cannot start a
                // line of its own in a listener's memory or prompt.
                let speech = crate::one_line(speech, SPEECH_CHARS_MAX);
                if speech.is_empty() {
                    Decision::Stay
                } else {
                    Decision::Talk { speech }
                }
            }
            Decision::Move { to } => {
                let to = map.grid.clamp(*to);
                let here = roster
                    .entities
                    .get(id.index())
                    .and_then(|&e| positions.get(e).ok())
                    .map(|p| p.0);
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
/// then id), listed in id order. The cap bounds what one tick can add to the world's
/// memories at `talks × max_listeners`, however many NPCs stand in one place.
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
        let Decision::Talk { speech } = &thought.decision else {
            continue;
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
            heard_by.sort_by_key(|&idx| (near.at(idx).map_or(u64::MAX, |p| here.dist2(p)), idx));
            heard_by.truncate(cap);
            heard_by.sort_unstable();
        }
        let listeners = heard_by.into_iter().map(|idx| NpcId(idx as u32)).collect();
        spoke.write(NpcSpoke {
            speaker,
            text: speech.clone(),
            listeners,
        });
    }
}

/// `move` sets the NPC's target and takes one step toward it; `stay` clears the target;
/// `talk` leaves both alone. Writes [`NpcMoved`].
pub fn walk(
    decisions: Res<Decisions>,
    map: Res<WorldMap>,
    roster: Res<Roster>,
    mut npcs: Query<(&mut Position, &mut Target)>,
    mut moved: MessageWriter<NpcMoved>,
) {
    for (&id, thought) in &decisions.0 {
        let Some(&entity) = roster.entities.get(id.index()) else {
            continue;
        };
        let Ok((mut pos, mut target)) = npcs.get_mut(entity) else {
            continue;
        };
        match thought.decision {
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
            }
            Decision::Stay => target.0 = None,
            Decision::Talk { .. } => {}
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
                    speaker_name: roster.name(msg.speaker).to_owned(),
                    text: msg.text.clone(),
                });
            }
            heard.write(SpeechHeard {
                listener,
                speaker: msg.speaker,
                text: msg.text.clone(),
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
                known
                    .0
                    .extend(present.iter().filter(|&&q| q != p).map(|&q| (key, q)));
            }
        }
    }
}

/// One log line per NPC per tick, in id order: `talk`, `move` or `stay`, with the
/// memories recalled for the decision.
pub fn log_actions(
    clock: Res<SimClock>,
    decisions: Res<Decisions>,
    roster: Res<Roster>,
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
        let event = match (&thought.decision, talks.get(&id), moves.get(&id)) {
            (Decision::Talk { .. }, Some(talk), _) => SimEvent::Talk {
                tick,
                npc,
                text: talk.text.clone(),
                listeners: roster.names_of(&talk.listeners),
                recalled,
                recall_failed,
            },
            (Decision::Move { .. }, _, Some(mv)) => SimEvent::Move {
                tick,
                npc,
                from: mv.from,
                to: mv.to,
                target: mv.target,
                recalled,
                recall_failed,
            },
            _ => {
                let Some(at) = roster
                    .entities
                    .get(id.index())
                    .and_then(|&e| positions.get(e).ok())
                else {
                    continue;
                };
                SimEvent::Stay {
                    tick,
                    npc,
                    at: at.0,
                    recalled,
                    recall_failed,
                    brain_failed: thought.brain_failed,
                }
            }
        };
        log.0.push(event);
    }
}
