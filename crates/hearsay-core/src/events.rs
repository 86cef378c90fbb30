//! The event log: every line of `events.jsonl`.
//!
//! Events carry names (unique per scenario) rather than ids, so the log reads on its own.
//! They never carry wall-clock values: the log of a seeded run is byte-identical.

use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::ids::MemoryId;
use crate::memory::MemoryKind;
use crate::wake::WakeReason;

fn is_false(b: &bool) -> bool {
    !*b
}

/// One line of `events.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SimEvent {
    /// An NPC enters the world (before tick 0's actions).
    Spawn {
        /// Always 0: every NPC spawns before the first tick runs.
        tick: u64,
        /// The NPC's unique scenario name, by which every later line refers to it.
        npc: String,
        /// The cell it starts on, as the scenario's `at` gives it.
        at: Pos,
    },
    /// A scenario event fires.
    ScenarioEvent {
        /// The tick the scenario schedules it for.
        tick: u64,
        /// The scenario place it happens at; NPCs within sight radius of it witness it.
        place: String,
        /// The event's text as the scenario words it (witnesses' memories wrap it).
        text: String,
        /// Who sees it, by id order.
        witnesses: Vec<String>,
    },
    /// An NPC talked — to everyone in earshot, to one of them (`to`), or in a whisper
    /// (`whisper`: `listeners` is the addressee alone). One line type for all three, so
    /// every reader of who heard what from whom reads them alike.
    Talk {
        /// The tick it spoke; its listeners' `memory` lines carry the same tick.
        tick: u64,
        /// The speaker's name.
        npc: String,
        /// The speech after sanitising: one line, trimmed and capped in length.
        text: String,
        /// Names of those who heard it, in id order: within hearing radius (at most
        /// `max_listeners`), or the addressee alone for a whisper.
        listeners: Vec<String>,
        /// The name of the NPC it was addressed to, always among `listeners`; absent for
        /// talk to everyone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
        /// Whispered to `to`: nobody else heard it.
        #[serde(default, skip_serializing_if = "is_false")]
        whisper: bool,
        /// Memories recalled for the decision.
        recalled: Vec<MemoryId>,
        /// Recall failed this tick.
        #[serde(default, skip_serializing_if = "is_false")]
        recall_failed: bool,
        /// Under `on_change`: why it thought this tick.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        wake: Vec<WakeReason>,
    },
    /// An NPC took a step toward its target.
    Move {
        /// The tick of the step: one step a tick, so a long walk spans many `move` lines.
        tick: u64,
        /// The mover's name.
        npc: String,
        /// The cell it stood on before the step.
        from: Pos,
        /// The cell it stands on after this one step.
        to: Pos,
        /// Where it is heading (clamped to the map); equals `to` once it has arrived.
        target: Pos,
        /// Memories recalled for the decision.
        recalled: Vec<MemoryId>,
        /// Recall failed this tick.
        #[serde(default, skip_serializing_if = "is_false")]
        recall_failed: bool,
        /// Under `on_change`: why it thought this tick.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        wake: Vec<WakeReason>,
        /// Under `on_change`: it did not think, but walked on toward its target.
        #[serde(default, skip_serializing_if = "is_false")]
        continued: bool,
    },
    /// An NPC stayed where it was.
    Stay {
        /// The tick it stayed (staying writes no memory).
        tick: u64,
        /// The name of the NPC that stayed.
        npc: String,
        /// The cell it stays on.
        at: Pos,
        /// Memories recalled for the decision.
        recalled: Vec<MemoryId>,
        /// Recall failed this tick.
        #[serde(default, skip_serializing_if = "is_false")]
        recall_failed: bool,
        /// The brain failed and `stay` is the fallback.
        #[serde(default, skip_serializing_if = "is_false")]
        brain_failed: bool,
        /// Under `on_change`: why it thought this tick.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        wake: Vec<WakeReason>,
        /// Under `on_change`: it did not think, but stayed as it had decided to.
        #[serde(default, skip_serializing_if = "is_false")]
        continued: bool,
    },
    /// A memory was written (text first; its embedding comes later).
    Memory {
        /// The tick it was formed (the memory's own `tick`).
        tick: u64,
        /// The name of the NPC that remembers it.
        npc: String,
        /// Dense from 1 in creation order across all NPCs; later lines cite it.
        id: MemoryId,
        /// Seed, observation, conversation or reflection.
        kind: MemoryKind,
        /// 1–10.
        importance: u8,
        /// The memory in the scenario's language, as recall and prompts show it.
        content: std::sync::Arc<str>,
        /// The speaker it was heard from, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        /// For a reflection: the memories it was drawn from.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        evidence: Vec<MemoryId>,
    },
    /// A memory faded below the forgetting threshold and was archived: kept, never
    /// recalled again.
    Forgot {
        /// The tick at whose start it was archived.
        tick: u64,
        /// The name of the NPC that owned the memory.
        npc: String,
        /// The id its `memory` line gave it.
        id: MemoryId,
    },
    /// An NPC reflected on its recent memories (its insights follow as `memory` lines
    /// of kind `reflection`).
    Reflected {
        /// The tick it reflected; its insights' `memory` lines carry the same tick.
        tick: u64,
        /// The name of the NPC that reflected.
        npc: String,
        /// How many insights it drew.
        insights: usize,
        /// The importance that had accumulated since its last reflection.
        importance: u32,
        /// The reflection failed: the NPC keeps what it accumulated and tries again after
        /// `reflect_retry_ticks` and another threshold.
        #[serde(default, skip_serializing_if = "is_false")]
        failed: bool,
    },
    /// An NPC came to know a tracked fact.
    Learned {
        /// The tick of the memory that taught it.
        tick: u64,
        /// The fact's name.
        fact: String,
        /// The name of the NPC that now knows it.
        npc: String,
        /// From whose words (`null` for seed memories and things seen).
        from: Option<String>,
        /// The memory that holds it.
        memory: MemoryId,
        /// When learned through a reflection: the evidence memory that taught it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<MemoryId>,
    },
    /// Closes a tick with the rolling hash of every line so far.
    Tick {
        /// The tick this line closes.
        tick: u64,
        /// Rolling blake3 hash, hex.
        hash: String,
    },
}

impl SimEvent {
    /// The tick the event belongs to.
    pub fn tick(&self) -> u64 {
        match self {
            SimEvent::Spawn { tick, .. }
            | SimEvent::ScenarioEvent { tick, .. }
            | SimEvent::Talk { tick, .. }
            | SimEvent::Move { tick, .. }
            | SimEvent::Stay { tick, .. }
            | SimEvent::Memory { tick, .. }
            | SimEvent::Learned { tick, .. }
            | SimEvent::Forgot { tick, .. }
            | SimEvent::Reflected { tick, .. }
            | SimEvent::Tick { tick, .. } => *tick,
        }
    }
}
