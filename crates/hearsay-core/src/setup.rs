//! Building the world for tick 0 from a validated scenario.

use bevy_ecs::prelude::World;

use crate::components::{Hearing, KnownBy, Npc, Persona, Position, Reflection, ShortTerm, Target};
use crate::events::{SimEvent, SpawnLine};
use crate::facts::{FactBook, FactSpec};
use crate::grid::{Grid, Pos};
use crate::ids::{MemoryId, NpcId};
use crate::memory::{MemoryKind, MemoryRecord};
use crate::phrasing::Language;
use crate::resources::{
    ArchivedMemories, Decisions, InsightEvidence, MemoryLedger, Observations, Place,
    ReflectSettings, ReflectionsDeferred, ReflectionsDue, RollingDigest, Roster, ScheduledEvent,
    ScheduledEvents, SimClock, SimConfig, TickEvents, TickLog, Wakes, WorldMap,
};
use crate::schedule::build_schedules;
use crate::systems::remember::{learned_event, memory_event};
use crate::wake::{Attention, Mind};

/// A memory an NPC starts with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedMemory {
    /// The memory's text, stored as given (not rephrased).
    pub content: String,
    /// 1–10.
    pub importance: u8,
    /// Core memories never fade.
    pub core: bool,
}

/// One NPC as the scenario defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpcSetup {
    /// Unique among NPCs; logs and tapes name the NPC by it.
    pub name: String,
    /// Free-text character description that prompts give the brain.
    pub persona: String,
    /// Start cell (on the map).
    pub at: Pos,
    /// What it knows at tick 0.
    pub memories: Vec<SeedMemory>,
    /// How its brain is consulted (its brain's `think` and `reflect_retry_ticks`).
    pub mind: Mind,
}

/// Everything the kernel needs to build tick 0. Produced by the runtime from a
/// validated scenario; the kernel trusts it (positions on the map, names unique).
#[derive(Clone, Debug, PartialEq)]
pub struct WorldSetup {
    /// The root seed every RNG stream derives from.
    pub seed: u64,
    /// The language memories and observations are phrased in.
    pub language: Language,
    /// The map is cells `0..width` × `0..height`.
    pub grid: Grid,
    /// Talk reaches NPCs within this many cells (Euclidean, inclusive).
    pub hearing_radius: u32,
    /// NPCs, places and events within this many cells are perceived.
    pub sight_radius: u32,
    /// The most NPCs one talk reaches.
    pub max_listeners: u32,
    /// Short-term window length.
    pub short_term_len: usize,
    /// When NPCs reflect.
    pub reflect: ReflectSettings,
    /// Named places; [`ScheduledEvent::place`] indexes this list.
    pub places: Vec<Place>,
    /// NPCs; their ids are their indices.
    pub npcs: Vec<NpcSetup>,
    /// Scenario events (any order; sorted stably by tick here).
    pub events: Vec<ScheduledEvent>,
    /// Facts whose spread is tracked (`learned` lines), in scenario order.
    pub facts: Vec<FactSpec>,
}

/// Builds the world: spawns NPCs in id order, records their seed memories in the ledger
/// (ids 1..), and queues tick 0's opening log lines (spawns, seed memories, facts known
/// from the start). Registers messages and schedules.
pub(crate) fn build_world(setup: WorldSetup) -> World {
    let mut world = World::new();
    build_schedules(&mut world);

    let mut roster = Roster::default();
    let mut ledger = MemoryLedger {
        places: Some(std::sync::Arc::new(crate::PlaceNames::new(
            setup.places.iter().map(|p| p.name.as_str()),
        ))),
        ..MemoryLedger::default()
    };
    let mut log = Vec::new();
    for (idx, npc) in setup.npcs.iter().enumerate() {
        let id = NpcId(idx as u32);
        let entity = world
            .spawn((
                id,
                Npc {
                    name: npc.name.clone(),
                },
                Persona(npc.persona.clone()),
                Position(npc.at),
                Target::default(),
                Hearing::default(),
                ShortTerm::default(),
                KnownBy::default(),
                Reflection::default(),
                Attention::default(),
            ))
            .id();
        roster.names.push(npc.name.as_str().into());
        roster.entities.push(entity);
        log.push(SimEvent::Spawn(SpawnLine {
            tick: 0,
            npc: npc.name.clone(),
            at: npc.at,
        }));
    }
    for (idx, npc) in setup.npcs.iter().enumerate() {
        for seed in &npc.memories {
            ledger.record(MemoryRecord {
                id: MemoryId(0),
                npc: NpcId(idx as u32),
                kind: MemoryKind::Seed,
                content: seed.content.as_str().into(),
                importance: seed.importance,
                tick: 0,
                source: None,
                core: seed.core,
                evidence: Vec::new(),
                place: Default::default(),
            });
        }
    }
    let mut facts = FactBook::new(setup.facts);
    for m in &ledger.pending {
        log.push(memory_event(&roster, m));
    }
    for m in &ledger.pending {
        for idx in facts.observe(m) {
            log.push(learned_event(&roster, &facts, idx, m, None));
        }
    }

    let mut events = setup.events;
    events.sort_by_key(|e| e.tick);
    world.insert_resource(SimClock::default());
    world.insert_resource(SimConfig {
        seed: setup.seed,
        language: setup.language,
        short_term_len: setup.short_term_len,
        reflect: setup.reflect,
        minds: setup.npcs.iter().map(|n| n.mind).collect(),
    });
    world.insert_resource(WorldMap {
        grid: setup.grid,
        hearing_radius: setup.hearing_radius,
        sight_radius: setup.sight_radius,
        max_listeners: setup.max_listeners.max(1),
        places: setup.places,
    });
    world.insert_resource(roster);
    world.insert_resource(ScheduledEvents(events));
    world.insert_resource(ledger);
    world.insert_resource(facts);
    world.insert_resource(TickEvents(log));
    world.insert_resource(Observations::default());
    world.insert_resource(Decisions::default());
    world.insert_resource(ReflectionsDue::default());
    world.insert_resource(ReflectionsDeferred::default());
    world.insert_resource(Wakes::default());
    world.insert_resource(ArchivedMemories::default());
    world.insert_resource(InsightEvidence::default());
    world.insert_resource(crate::resources::KnownByAdded::default());
    world.insert_resource(TickLog::default());
    world.insert_resource(RollingDigest::default());
    world
}
