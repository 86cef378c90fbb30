//! Memory records as the simulation creates them, and the importance rules.
//!
//! The kernel only creates memories (text first, no embedding); storing, embedding and
//! recalling them belongs to `hearsay-memory`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{MemoryId, NpcId};
use crate::places::PlaceNamed;

/// Importance of what an NPC says (the pgvector memory design: talk = 8).
pub const TALK_IMPORTANCE: u8 = 8;
/// Importance of what an NPC hears from another.
pub const HEARD_IMPORTANCE: u8 = 8;
/// Importance of a decision to move (move = 4).
pub const MOVE_IMPORTANCE: u8 = 4;
/// Importance of a scenario event an NPC witnesses, unless the event sets its own.
pub const WITNESS_IMPORTANCE: u8 = 6;
/// Importance of a reflection whose brain did not give one.
pub const REFLECTION_IMPORTANCE: u8 = 7;

/// What kind of experience a memory records.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    /// Something the NPC did or saw.
    Observation,
    /// Something the NPC said or heard.
    Conversation,
    /// An insight the NPC drew from other memories.
    Reflection,
    /// A memory given by the scenario before the first tick.
    Seed,
}

impl MemoryKind {
    /// The lowercase name used in files and databases.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Observation => "observation",
            MemoryKind::Conversation => "conversation",
            MemoryKind::Reflection => "reflection",
            MemoryKind::Seed => "seed",
        }
    }

    /// Parses the lowercase name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "observation" => MemoryKind::Observation,
            "conversation" => MemoryKind::Conversation,
            "reflection" => MemoryKind::Reflection,
            "seed" => MemoryKind::Seed,
            _ => return None,
        })
    }
}

/// A memory: what the kernel creates (text first, no embedding) and stores keep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Deterministic id, in creation order.
    pub id: MemoryId,
    /// Whose memory it is.
    pub npc: NpcId,
    /// What kind of experience it records.
    pub kind: MemoryKind,
    /// The text, phrased in the scenario's language. Shared, never changed once written:
    /// a recall, a window, a brain's request and the event log each take a reference,
    /// not a copy.
    pub content: Arc<str>,
    /// 1–10.
    pub importance: u8,
    /// The tick in which it was created (seed memories: 0).
    pub tick: u64,
    /// The NPC whose words this memory records, if it was heard from someone.
    pub source: Option<NpcId>,
    /// Core memories never fade.
    pub core: bool,
    /// For a reflection: the memories it was drawn from, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<MemoryId>,
    /// The first of the scenario's places its text names, as [`crate::MemoryLedger`]
    /// worked it out when the memory was made; never written, so unknown in a memory
    /// read back.
    #[serde(skip)]
    pub place: PlaceNamed,
}

/// An insight a brain drew from an NPC's recent memories: it becomes a `reflection`
/// memory citing its evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Insight {
    /// The insight, in the NPC's words.
    pub content: String,
    /// 1–10 ([`REFLECTION_IMPORTANCE`] when the brain gave none).
    pub importance: u8,
    /// The memories it was drawn from (ids the NPC was shown).
    pub evidence: Vec<MemoryId>,
}
