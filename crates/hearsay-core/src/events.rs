//! The event log: every line of `events.jsonl`.
//!
//! Events carry names (unique per scenario) rather than ids, so the log reads on its own.
//! They never carry wall-clock values: the log of a seeded run is byte-identical.

use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::ids::MemoryId;
use crate::memory::MemoryKind;

fn is_false(b: &bool) -> bool {
    !*b
}

/// One line of `events.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SimEvent {
    /// An NPC enters the world (before tick 0's actions).
    Spawn {
        /// Tick.
        tick: u64,
        /// Name.
        npc: String,
        /// Start cell.
        at: Pos,
    },
    /// A scenario event fires.
    ScenarioEvent {
        /// Tick.
        tick: u64,
        /// Place name.
        place: String,
        /// What happens.
        text: String,
        /// Who sees it, by id order.
        witnesses: Vec<String>,
    },
    /// An NPC talked.
    Talk {
        /// Tick.
        tick: u64,
        /// Speaker.
        npc: String,
        /// What it said.
        text: String,
        /// Who heard it.
        listeners: Vec<String>,
        /// Memories recalled for the decision.
        recalled: Vec<MemoryId>,
        /// Recall failed this tick.
        #[serde(default, skip_serializing_if = "is_false")]
        recall_failed: bool,
    },
    /// An NPC took a step toward its target.
    Move {
        /// Tick.
        tick: u64,
        /// Who moved.
        npc: String,
        /// From.
        from: Pos,
        /// To.
        to: Pos,
        /// Destination.
        target: Pos,
        /// Memories recalled for the decision.
        recalled: Vec<MemoryId>,
        /// Recall failed this tick.
        #[serde(default, skip_serializing_if = "is_false")]
        recall_failed: bool,
    },
    /// An NPC stayed where it was.
    Stay {
        /// Tick.
        tick: u64,
        /// Who stayed.
        npc: String,
        /// Where.
        at: Pos,
        /// Memories recalled for the decision.
        recalled: Vec<MemoryId>,
        /// Recall failed this tick.
        #[serde(default, skip_serializing_if = "is_false")]
        recall_failed: bool,
        /// The brain failed and `stay` is the fallback.
        #[serde(default, skip_serializing_if = "is_false")]
        brain_failed: bool,
    },
    /// A memory was written (text first; its embedding comes later).
    Memory {
        /// Tick.
        tick: u64,
        /// Whose memory.
        npc: String,
        /// Its id.
        id: MemoryId,
        /// Its kind.
        kind: MemoryKind,
        /// 1–10.
        importance: u8,
        /// The text.
        content: String,
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
        /// Tick.
        tick: u64,
        /// Whose memory.
        npc: String,
        /// Its id.
        id: MemoryId,
    },
    /// An NPC reflected on its recent memories (its insights follow as `memory` lines
    /// of kind `reflection`).
    Reflected {
        /// Tick.
        tick: u64,
        /// Who.
        npc: String,
        /// How many insights it drew.
        insights: usize,
        /// The importance that had accumulated since its last reflection.
        importance: u32,
    },
    /// An NPC came to know a tracked fact.
    Learned {
        /// Tick.
        tick: u64,
        /// The fact's name.
        fact: String,
        /// Who learned it.
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
        /// Tick.
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
