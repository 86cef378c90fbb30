//! Remember: what happened this tick becomes memory (text first, embedding later), with
//! the pgvector memory design's weighting: talk 8, move 4, stay not stored, heard 8.

use bevy_ecs::prelude::{MessageReader, Query, Res, ResMut};

use crate::components::{Evidence, Reflection, ReflectionRetry, ShortTerm};
use crate::events::{LearnedLine, MemoryLine, ReflectedLine, SimEvent};
use crate::facts::FactBook;
use crate::ids::MemoryId;
use crate::memory::{HEARD_IMPORTANCE, MOVE_IMPORTANCE, MemoryKind, MemoryRecord, TALK_IMPORTANCE};
use crate::messages::{EventWitnessed, NpcMoved, NpcSpoke, SpeechHeard};
use crate::observation::RecentMemory;
use crate::phrasing::{Heard, Said};
use crate::resources::{
    Decisions, InsightEvidence, MemoryLedger, Roster, SimClock, SimConfig, TickEvents,
};

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
        content: content.into(),
        importance,
        tick,
        source,
        core: false,
        evidence: Vec::new(),
        place: Default::default(),
    }
}

/// NPCs that were due to reflect turn their brain's insights into `reflection` memories
/// (importance 1–10, citing only memories they were shown), and start accumulating again;
/// one whose reflection failed keeps what it accumulated and is given a retry (see
/// [`ReflectionRetry`]). Logs a `reflected` line per NPC; keeps each insight's evidence
/// for [`track_facts`].
#[expect(
    clippy::too_many_arguments,
    reason = "a system's parameters are its declared data access"
)]
pub fn record_reflections(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    roster: Res<Roster>,
    decisions: Res<Decisions>,
    mut states: Query<&mut Reflection>,
    mut ledger: ResMut<MemoryLedger>,
    mut sources: ResMut<InsightEvidence>,
    mut log: ResMut<TickEvents>,
) {
    sources.0.clear();
    for (&npc, thought) in &decisions.0 {
        let Some(insights) = &thought.reflection else {
            continue;
        };
        let Some(Ok(mut state)) = roster.entities.get(npc.index()).map(|&e| states.get_mut(e))
        else {
            continue;
        };
        if thought.reflection_failed {
            // Nothing learned, nothing lost: the tally and evidence stay, and the next try
            // waits until both `reflect_retry_ticks` passed and another threshold came in.
            state.retry = Some(ReflectionRetry {
                tick: clock.tick + config.mind(npc).reflect_retry_ticks,
                importance: state.importance.saturating_add(config.reflect.threshold),
            });
            log.0.push(SimEvent::Reflected(ReflectedLine {
                tick: clock.tick,
                npc: roster.name(npc).to_owned(),
                insights: 0,
                importance: state.importance,
                failed: true,
            }));
            continue;
        }
        state.retry = None;
        let evidence: Vec<Evidence> = state.evidence.drain(..).collect();
        let importance = std::mem::take(&mut state.importance);
        let mut kept = Vec::new();
        for insight in insights.iter().take(config.reflect.insights_max) {
            // One line, like speech: an insight is run text a brain wrote.
            let content = crate::one_line(&insight.content, crate::INSIGHT_CHARS_MAX);
            if content.is_empty() {
                continue;
            }
            let mut cited: Vec<MemoryId> = insight
                .evidence
                .iter()
                .copied()
                .filter(|id| evidence.iter().any(|e| e.id == *id))
                .collect();
            cited.sort_unstable();
            cited.dedup();
            kept.push((content, insight.importance.clamp(1, 10), cited));
        }
        log.0.push(SimEvent::Reflected(ReflectedLine {
            tick: clock.tick,
            npc: roster.name(npc).to_owned(),
            insights: kept.len(),
            importance,
            failed: false,
        }));
        for (content, importance, cited) in kept {
            let cited_records: Vec<Evidence> = evidence
                .iter()
                .filter(|e| cited.contains(&e.id))
                .cloned()
                .collect();
            let id = ledger.record(MemoryRecord {
                id: MemoryId(0),
                npc,
                kind: MemoryKind::Reflection,
                content: content.into(),
                importance,
                tick: clock.tick,
                source: None,
                core: false,
                evidence: cited,
                place: Default::default(),
            });
            sources.0.insert(id, cited_records);
        }
    }
}

/// Every new memory but a reflection adds its importance to its owner's accumulator and
/// joins the evidence for its next reflection (the latest few are kept).
pub fn accumulate_importance(
    config: Res<SimConfig>,
    ledger: Res<MemoryLedger>,
    roster: Res<Roster>,
    facts: Res<FactBook>,
    mut states: Query<&mut Reflection>,
) {
    if config.reflect.threshold == 0 {
        return;
    }
    for m in ledger.this_tick() {
        if m.kind == MemoryKind::Reflection {
            continue;
        }
        let Some(Ok(mut state)) = roster
            .entities
            .get(m.npc.index())
            .map(|&e| states.get_mut(e))
        else {
            continue;
        };
        state.importance = state.importance.saturating_add(u32::from(m.importance));
        state.evidence.push_back(Evidence::of(m, &facts));
        while state.evidence.len() > config.reflect.evidence {
            state.evidence.pop_front();
        }
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

/// The actor's own memories: talk → conversation `I said to everyone: …`, addressed
/// `I said to Carol: …`, whispered `I whispered to Carol: …` (8);
/// move → observation `I decided to move to (x, y)` (4); stay → nothing.
pub fn record_action_memories(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    roster: Res<Roster>,
    mut spoke: MessageReader<NpcSpoke>,
    mut moved: MessageReader<NpcMoved>,
    mut ledger: ResMut<MemoryLedger>,
) {
    let lang = config.language;
    for s in spoke.read() {
        let to = s.to.map(|to| roster.name(to));
        let said = match to {
            Some(to) if s.whisper => Said::WhisperedTo(to),
            Some(to) => Said::To(to),
            None => Said::ToEveryone,
        };
        let content = lang.said(said, &s.text);
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

/// Each listener remembers `<speaker> said: <speech>` — or, addressed, `Bob told me: …`
/// (the addressee) and `Bob said to Carol: …` (bystanders), whispered `Bob whispered to
/// me: …` — (8), with the speaker as source: this is how information spreads.
pub fn record_heard_memories(
    clock: Res<SimClock>,
    config: Res<SimConfig>,
    roster: Res<Roster>,
    mut heard: MessageReader<SpeechHeard>,
    mut ledger: ResMut<MemoryLedger>,
) {
    for h in heard.read() {
        let how = Heard::by(
            roster.name(h.listener),
            h.to.map(|to| roster.name(to)),
            h.whisper,
        );
        let content = config
            .language
            .heard_as(roster.name(h.speaker), how, &h.text);
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
    SimEvent::Memory(MemoryLine {
        tick: m.tick,
        npc: roster.name(m.npc).to_owned(),
        id: m.id,
        kind: m.kind,
        importance: m.importance,
        content: m.content.clone(),
        from: m.source.map(|s| roster.name(s).to_owned()),
        evidence: m.evidence.clone(),
    })
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
            // The tick's observations are gone: no copy, unless something still holds it.
            let window = std::sync::Arc::make_mut(&mut window.0);
            window.push(RecentMemory {
                id: m.id,
                kind: m.kind,
                content: m.content.clone(),
                importance: m.importance,
                tick: m.tick,
                source: m.source.map(|s| roster.name(s).into()),
                place: m.place,
            });
            if window.len() > config.short_term_len {
                window.drain(..window.len() - config.short_term_len);
            }
        }
    }
}

/// Checks this tick's memories against the tracked facts; logs who learned what, from
/// whom. A reflection teaches a fact with its evidence as the source: the speaker of the
/// first cited memory that mentions the fact (else of the first cited memory someone
/// said).
pub fn track_facts(
    ledger: Res<MemoryLedger>,
    roster: Res<Roster>,
    sources: Res<InsightEvidence>,
    mut facts: ResMut<FactBook>,
    mut log: ResMut<TickEvents>,
) {
    for m in ledger.this_tick() {
        let evidence = sources.0.get(&m.id);
        let learned = facts.observe_with(m, |idx| match evidence {
            None => (m.source, None),
            // The cited memory that mentions the fact, else the first cited one that
            // someone said.
            Some(ev) => ev
                .iter()
                .find(|e| e.facts.contains(&(idx as u16)))
                .or_else(|| ev.iter().find(|e| e.source.is_some()))
                .map_or((None, None), |e| (e.source, Some(e.id))),
        });
        for (idx, via) in learned {
            log.0.push(learned_event(&roster, &facts, idx, m, via));
        }
    }
}

/// The log line for an NPC learning fact `idx` from memory `m` (through evidence memory
/// `via`, for a reflection).
pub fn learned_event(
    roster: &Roster,
    facts: &FactBook,
    idx: usize,
    m: &MemoryRecord,
    via: Option<MemoryId>,
) -> SimEvent {
    let knower = facts.knowers[idx].get(&m.npc);
    SimEvent::Learned(LearnedLine {
        tick: m.tick,
        fact: facts.specs[idx].name.clone(),
        npc: roster.name(m.npc).to_owned(),
        from: knower
            .and_then(|k| k.from)
            .map(|s| roster.name(s).to_owned()),
        memory: m.id,
        via,
    })
}
