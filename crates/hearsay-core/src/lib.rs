//! The deterministic kernel of hearsay: the world an NPC lives in and the rules of one tick.
//!
//! This crate owns the ECS data (components, resources, messages), the two tick schedules
//! ([`SimPerceive`] and [`SimAct`]) with their system sets, the phrasing of memories, fact
//! tracking, seeded RNG streams and the rolling tick digest.
//!
//! It must never do IO, await, read the wall clock or the environment, draw unseeded
//! randomness, or iterate an unordered collection in a way that reaches its output: every
//! tick is a pure function of the previous world, the seed, and the decisions handed in by
//! the runtime (which are applied in [`NpcId`] order, never in arrival order). A big
//! town's observations are built on scoped threads, each a run of consecutive NPCs, and
//! joined in id order: the same observations whatever the number of threads (the number
//! of cores, asked of the system once per process, is the one thing it reads from
//! outside, and it never reaches the output).
//!
//! # The tick
//!
//! ```text
//!  SimPerceive                      (runtime: Think, async)       SimAct
//!  Ingest:   message_update_system  embed + recall + brain   ->   Act:      speak, walk, stay, deliver_speech, log_actions
//!  Perceive: log_forgotten,         (+ reflect, when due)         Remember: record_*_memories, record_reflections,
//!            fire_scenario_events,  per NPC that thinks, bounded,           log_memories, update_short_term,
//!            observe -> Observations results into Decisions                 accumulate_importance, track_facts
//!            request_reflections,                                 Record:   seal_tick -> TickLog (lines + rolling hash)
//!            judge_wakes -> Wakes   (Act starts with continue_intentions: the kernel acts for NPCs that continue)
//! ```

pub mod checkpoint;
pub mod components;
pub mod digest;
pub mod events;
pub mod facts;
pub mod grid;
pub mod ids;
pub mod line;
pub mod memory;
pub mod messages;
pub mod observation;
pub mod phrasing;
pub mod places;
pub mod resources;
pub mod rng;
pub mod schedule;
pub mod setup;
pub mod sim;
pub mod systems;
pub mod wake;

pub use components::{Hearing, KnownBy, Npc, Persona, Position, Reflection, ShortTerm, Target};
pub use events::SimEvent;
pub use facts::{DISTORTED_BELOW, FactBook, FactSpec, Knower, Meaning};
pub use grid::{Grid, Pos};
pub use ids::{MemoryId, NpcId};
pub use memory::{Insight, MemoryKind, MemoryRecord};
pub use observation::{
    HeardLine, Name, Observation, RecentMemory, SeenNpc, SeenPlace, Window, Witnessed,
};
pub use phrasing::{Heard, Language, Said};
pub use places::{PlaceNamed, PlaceNames};
pub use resources::{
    ArchivedMemories, Decision, Decisions, MemoryLedger, Observations, ReflectSettings,
    ReflectionsDue, Roster, ScheduledEvent, SimClock, Thought, TickLog, WorldMap,
};
pub use schedule::{SimAct, SimPerceive, TickSystems};
pub use setup::{NpcSetup, SeedMemory, WorldSetup};
pub use sim::{Acted, Perceived, Sim};
pub use wake::{Attention, Intent, Mind, ThinkMode, Wake, WakeReason};

/// Longest speech, in characters, that an NPC can utter in one tick; longer speech is cut.
pub const SPEECH_CHARS_MAX: usize = 280;

/// Longest reflection insight kept, in characters; longer ones are cut.
pub const INSIGHT_CHARS_MAX: usize = 1_000;

/// The most listeners a talk reaches when a scenario does not say (`[world] max_listeners`).
pub const MAX_LISTENERS_DEFAULT: u32 = 100;

/// `text` as one line of plain text, at most `max` characters: control characters
/// (newlines, escapes, bidirectional overrides) become spaces, then the ends are trimmed.
/// What a brain says can then neither start a line of its own in a memory, a prompt or
/// a log, nor drive a terminal that prints it.
pub fn one_line(text: &str, max: usize) -> String {
    let line: String = text
        .chars()
        .map(|c| if is_control(c) { ' ' } else { c })
        .collect();
    let cut: String = line.trim().chars().take(max).collect();
    cut.trim_end().to_owned()
}

/// Whether `c` is a control character or an invisible formatting character that changes
/// how text around it is shown (bidirectional embeddings, overrides and isolates).
pub fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

#[cfg(test)]
mod tests;
