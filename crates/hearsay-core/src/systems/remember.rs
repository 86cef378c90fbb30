//! Remember: what happened this tick becomes memory (text first, embedding later), with
//! the pgvector memory design's weighting: talk 8, move 4, stay not stored, heard 8.

use bevy_ecs::prelude::{MessageReader, Query, Res, ResMut};

use crate::components::ShortTerm;
use crate::events::SimEvent;
use crate::facts::FactBook;
use crate::ids::MemoryId;
use crate::memory::{HEARD_IMPORTANCE, MOVE_IMPORTANCE, MemoryKind, MemoryRecord, TALK_IMPORTANCE};
use crate::messages::{EventWitnessed, NpcMoved, NpcSpoke, SpeechHeard};
use crate::resources::{MemoryLedger, Roster, SimClock, SimConfig, TickEvents};

fn memory(
    npc: crate::ids::NpcId,
    kind: MemoryKind,
    content: String,
    importance: u8,
    tick: u64,
    source: Option<crate::ids::NpcId>,
) -> MemoryRecord {
    MemoryRecord {
        id: MemoryId(0),
        npc,
        kind,
        content,
        importance,
        tick,
        source,
        core: false,
    }
}

/// Witnesses of a scenario event remember it as an observation.
pub fn record_witnessed_memories(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    mut witnessed: MessageReader<EventWitnessed>,
    mut ledger: ResMut<MemoryLedger>,
) {
    for w in witnessed.read() {
        let content = config.language.witnessed(&w.place, &w.text);
        ledger.record(memory(
            w.npc,
            MemoryKind::Observation,
            content,
            w.importance,
            clock.tick,
            None,
        ));
    }
}

/// The actor's own memories: talk → conversation `I said to everyone: …` (8);
/// move → observation `I decided to move to (x, y)` (4); stay → nothing.
pub fn record_action_memories(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    mut spoke: MessageReader<NpcSpoke>,
    mut moved: MessageReader<NpcMoved>,
    mut ledger: ResMut<MemoryLedger>,
) {
    let lang = config.language;
    for s in spoke.read() {
        let content = lang.said_to_everyone(&s.text);
        ledger.record(memory(
            s.speaker,
            MemoryKind::Conversation,
            content,
            TALK_IMPORTANCE,
            clock.tick,
            None,
        ));
    }
    for m in moved.read() {
        let content = lang.decided_to_move(m.target);
        ledger.record(memory(
            m.npc,
            MemoryKind::Observation,
            content,
            MOVE_IMPORTANCE,
            clock.tick,
            None,
        ));
    }
}

/// Each listener remembers `<speaker> said: <speech>` (8), with the speaker as source:
/// this is how information spreads.
pub fn record_heard_memories(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    roster: Res<Roster>,
    mut heard: MessageReader<SpeechHeard>,
    mut ledger: ResMut<MemoryLedger>,
) {
    for h in heard.read() {
        let content = config.language.heard(roster.name(h.speaker), &h.text);
        ledger.record(memory(
            h.listener,
            MemoryKind::Conversation,
            content,
            HEARD_IMPORTANCE,
            clock.tick,
            Some(h.speaker),
        ));
    }
}

/// One `memory` log line per memory created this tick, in id order.
pub fn log_memories(ledger: Res<MemoryLedger>, roster: Res<Roster>, mut log: ResMut<TickEvents>) {
    for m in ledger.this_tick() {
        log.0.push(memory_event(&roster, m));
    }
}

/// The log line for a new memory.
pub fn memory_event(roster: &Roster, m: &MemoryRecord) -> SimEvent {
    SimEvent::Memory {
        tick: m.tick,
        npc: roster.name(m.npc).to_owned(),
        id: m.id,
        kind: m.kind,
        importance: m.importance,
        content: m.content.clone(),
        from: m.source.map(|s| roster.name(s).to_owned()),
    }
}

/// Pushes this tick's memories into their owners' short-term windows, dropping the oldest
/// beyond the configured length.
pub fn update_short_term(
    config: Res<SimConfig>,
    ledger: Res<MemoryLedger>,
    roster: Res<Roster>,
    mut windows: Query<&mut ShortTerm>,
) {
    for m in ledger.this_tick() {
        let Some(&entity) = roster.entities.get(m.npc.index()) else {
            continue;
        };
        if let Ok(mut window) = windows.get_mut(entity) {
            window.0.push_back(m.content.clone());
            while window.0.len() > config.short_term_len {
                window.0.pop_front();
            }
        }
    }
}

/// Checks this tick's memories against the tracked facts; logs who learned what, from whom.
pub fn track_facts(
    ledger: Res<MemoryLedger>,
    roster: Res<Roster>,
    mut facts: ResMut<FactBook>,
    mut log: ResMut<TickEvents>,
) {
    for m in ledger.this_tick() {
        for idx in facts.observe(m) {
            log.0.push(learned_event(&roster, &facts, idx, m));
        }
    }
}

/// The log line for an NPC learning fact `idx` from memory `m`.
pub fn learned_event(roster: &Roster, facts: &FactBook, idx: usize, m: &MemoryRecord) -> SimEvent {
    SimEvent::Learned {
        tick: m.tick,
        fact: facts.specs[idx].name.clone(),
        npc: roster.name(m.npc).to_owned(),
        from: m.source.map(|s| roster.name(s).to_owned()),
        memory: m.id,
    }
}
