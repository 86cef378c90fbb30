//! Resources: the world-wide state of a simulation, each with the reason it exists.

use std::collections::BTreeMap;

use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;
use serde::{Deserialize, Serialize};

use crate::events::SimEvent;
use crate::grid::{Grid, Pos};
use crate::ids::{MemoryId, NpcId};
use crate::memory::{Insight, MemoryRecord};
use crate::observation::Observation;
use crate::phrasing::Language;

/// Simulation time. Written only by the runtime, between ticks; logic never reads a clock.
#[derive(Resource, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimClock {
    /// The tick being simulated, from 0.
    pub tick: u64,
}

/// Run-wide settings that systems consult.
#[derive(Resource, Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// The root seed every RNG stream derives from.
    pub seed: u64,
    /// How memories are phrased.
    pub language: Language,
    /// How many recent experiences each NPC keeps in its short-term window.
    pub short_term_len: usize,
    /// When an NPC reflects.
    pub reflect: ReflectSettings,
    /// How each NPC's brain is consulted, by id.
    pub minds: Vec<crate::wake::Mind>,
}

impl SimConfig {
    /// How `npc`'s brain is consulted.
    pub fn mind(&self, npc: NpcId) -> crate::wake::Mind {
        self.minds.get(npc.index()).copied().unwrap_or_default()
    }
}

/// When and on what NPCs reflect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectSettings {
    /// An NPC reflects once the importance of its memories since its last reflection
    /// adds up to this (0: never).
    pub threshold: u32,
    /// How many of its latest memories it reflects on.
    pub evidence: usize,
    /// At most this many insights per reflection.
    pub insights_max: usize,
}

impl Default for ReflectSettings {
    /// Generative Agents' threshold of 150; the 30 latest memories; up to 3 insights.
    fn default() -> Self {
        Self {
            threshold: 150,
            evidence: 30,
            insights_max: 3,
        }
    }
}

/// A named place on the map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// Unique among places; the scenario's events and `scenario_event` lines use it. A
    /// [`crate::Name`], as every observation that sees the place carries it.
    pub name: crate::observation::Name,
    /// The place's cell, on the map; sight radius is measured from it.
    pub at: Pos,
}

/// The map: extent, perception radii and places. Fixed for the whole run.
#[derive(Resource, Clone, Debug, PartialEq, Eq)]
pub struct WorldMap {
    /// The map's extent.
    pub grid: Grid,
    /// Talk reaches every NPC within this radius.
    pub hearing_radius: u32,
    /// NPCs, places and events within this radius are perceived.
    pub sight_radius: u32,
    /// The most NPCs one talk reaches (the nearest; see `speak`).
    pub max_listeners: u32,
    /// Named places, in scenario order.
    pub places: Vec<Place>,
}

/// NPC names and entities by id, so systems can visit NPCs in id order without sorting
/// query results, and never depend on `Entity` allocation order.
#[derive(Resource, Clone, Debug, Default)]
pub struct Roster {
    /// Names, indexed by `NpcId`; copied into every observation that names them (see
    /// [`crate::Name`]).
    pub names: Vec<crate::observation::Name>,
    /// Entities, indexed by `NpcId`.
    pub entities: Vec<Entity>,
}

impl Roster {
    /// The name of `id`.
    pub fn name(&self, id: NpcId) -> &str {
        &self.names[id.index()]
    }

    /// The name of `id`, to keep (a copy when short, shared when long).
    pub fn shared_name(&self, id: NpcId) -> crate::observation::Name {
        self.names[id.index()].clone()
    }

    /// Names of several NPCs, in the order given.
    pub fn names_of(&self, ids: &[NpcId]) -> Vec<String> {
        ids.iter().map(|&id| self.name(id).to_owned()).collect()
    }
}

/// A scenario event: every NPC within sight radius of `place` observes `text` at `tick`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledEvent {
    /// The tick it fires on, during that tick's Perceive phase.
    pub tick: u64,
    /// Index into [`WorldMap::places`].
    pub place: usize,
    /// The event as the scenario words it; witnesses remember it with the place added.
    pub text: String,
    /// Importance of the witnesses' memories.
    pub importance: u8,
}

/// The scenario's events, sorted by tick (stable: scenario order within a tick).
#[derive(Resource, Clone, Debug, Default)]
pub struct ScheduledEvents(pub Vec<ScheduledEvent>);

/// Output of the Perceive phase: one observation per NPC, by id. The runtime reads it
/// to run the Think phase.
#[derive(Resource, Clone, Debug, Default)]
pub struct Observations(pub Vec<Observation>);

/// What an NPC decided to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum Decision {
    /// Say `speech` to everyone within hearing radius, perhaps addressing one of them.
    Talk {
        /// The words as the brain gave them; sanitising makes them one capped line.
        speech: String,
        /// The NPC the words are addressed to: everyone in earshot still hears them, but
        /// the addressee remembers being told and bystanders remember who was spoken
        /// to. Must be within hearing radius; otherwise sanitising drops it (a plain
        /// talk). Absent from the tape when `None`, so unaddressed talk keeps its bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<NpcId>,
    },
    /// Say `speech` to `to` alone: nobody else hears it, however close.
    Whisper {
        /// The words, sanitised like a talk's.
        speech: String,
        /// The addressee: within [`WHISPER_REACH`](crate::grid::WHISPER_REACH) (one cell,
        /// diagonals included). Out of reach, sanitising turns the whisper into a plain
        /// talk, heard by everyone in earshot.
        to: NpcId,
    },
    /// Walk toward `to`, one step per tick.
    Move {
        /// The destination (clamped to the map when applied).
        to: Pos,
    },
    /// Do nothing this tick.
    Stay,
}

/// The outcome of one NPC's Think phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thought {
    /// What it will do.
    pub decision: Decision,
    /// The memories recall returned for it, best first.
    pub recalled: Vec<MemoryId>,
    /// Recall failed (embedder or store), so it decided without memories.
    pub recall_failed: bool,
    /// The brain failed, so `decision` is the fallback `Stay`.
    pub brain_failed: bool,
    /// When the NPC was due to reflect this tick: the insights its brain drew (none if it
    /// drew none or failed). Reflecting resets what it accumulated, unless it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflection: Option<Vec<Insight>>,
    /// The reflection failed (refused, cut off, invalid): the NPC keeps what it
    /// accumulated and tries again later (see [`crate::components::Reflection::retry`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reflection_failed: bool,
}

/// Input of the Act phase: every NPC's thought, keyed (and therefore applied) by id,
/// whatever order the async Think phase finished in. Written by the runtime.
#[derive(Resource, Clone, Debug, Default)]
pub struct Decisions(pub BTreeMap<NpcId, Thought>);

/// Memories created but not yet handed to a store. Ids are assigned here, in creation
/// order, so they are the same on every backend. The runtime drains `pending` after
/// setup and after every tick.
#[derive(Resource, Clone, Debug)]
pub struct MemoryLedger {
    /// The id the next memory will get.
    pub next_id: u64,
    /// Memories not yet drained by the runtime, in id order.
    pub pending: Vec<MemoryRecord>,
    /// The id of the first memory created in the tick in progress.
    pub first_of_tick: u64,
    /// The scenario's places, which each memory recorded is looked through for once
    /// ([`MemoryRecord::place`]); without them its place is left unknown.
    pub places: Option<std::sync::Arc<crate::PlaceNames>>,
}

impl Default for MemoryLedger {
    fn default() -> Self {
        Self {
            next_id: 1,
            pending: Vec::new(),
            first_of_tick: 1,
            places: None,
        }
    }
}

impl MemoryLedger {
    /// Records a new memory and returns its id.
    pub fn record(&mut self, mut memory: MemoryRecord) -> MemoryId {
        let id = MemoryId(self.next_id);
        self.next_id += 1;
        memory.id = id;
        memory.place = match &self.places {
            Some(places) => places.place_named(&memory.content),
            None => crate::PlaceNamed::UNKNOWN,
        };
        self.pending.push(memory);
        id
    }

    /// The memories created in the tick in progress that are still pending.
    pub fn this_tick(&self) -> impl Iterator<Item = &MemoryRecord> {
        let first = self.first_of_tick;
        self.pending.iter().filter(move |m| m.id.0 >= first)
    }
}

/// NPCs due to reflect this tick, by id, each with the ids of the memories it reflects on
/// (oldest first): filled in Perceive, read by the runtime's Think phase.
#[derive(Resource, Clone, Debug, Default)]
pub struct ReflectionsDue(pub Vec<(NpcId, Vec<MemoryId>)>);

/// NPCs whose tally has reached the threshold but whose last reflection failed, so
/// they wait (for `reflect_retry_ticks` and another threshold): counted, not called.
#[derive(Resource, Clone, Debug, Default)]
pub struct ReflectionsDeferred(pub Vec<NpcId>);

/// Who thinks this tick and why, by NPC id: filled by `judge_wakes` in Perceive, read by
/// `continue_intentions` and `log_actions` in Act.
#[derive(Resource, Clone, Debug, Default)]
pub struct Wakes(pub Vec<crate::wake::Wake>);

/// Memories archived at the start of this tick (forgotten: their retention fell below
/// the threshold), in id order. Written by the runtime before `SimPerceive` from its
/// store's forgetting schedule; logged by `log_forgotten`.
#[derive(Resource, Clone, Debug, Default)]
pub struct ArchivedMemories(pub Vec<(MemoryId, NpcId)>);

/// The [`KnownBy`](crate::components::KnownBy) pairs each NPC learned since the last
/// checkpoint save, as (NPC, pair): what the next checkpoint delta records of them.
/// `KnownBy` only grows, so these are exactly the difference from the saved state — and
/// a delta costs what the tick added, not a walk of every set that changed, which grew
/// with the gossip. Cleared at every save and restore.
#[derive(Resource, Clone, Debug, Default)]
pub struct KnownByAdded(pub Vec<(NpcId, (u64, NpcId))>);

/// The evidence of each reflection created this tick, for fact tracking.
#[derive(Resource, Clone, Debug, Default)]
pub struct InsightEvidence(pub BTreeMap<MemoryId, Vec<crate::components::Evidence>>);

/// The events of the tick in progress, in the order they happened.
#[derive(Resource, Clone, Debug, Default)]
pub struct TickEvents(pub Vec<SimEvent>);

/// The sealed log of the last tick: the exact lines to append to `events.jsonl` (the
/// closing `tick` line with the rolling hash included). Drained by the runtime.
#[derive(Resource, Clone, Debug, Default)]
pub struct TickLog {
    /// JSON lines, without newlines.
    pub lines: Vec<String>,
    /// The rolling hash after this tick, hex.
    pub hash: String,
}

/// The rolling hash over every event line so far.
#[derive(Resource, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RollingDigest(pub [u8; 32]);
