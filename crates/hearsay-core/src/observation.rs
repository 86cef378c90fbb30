//! What one NPC perceives at the start of a tick: the input of its Think phase.

use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::ids::{MemoryId, NpcId};
use crate::memory::MemoryKind;

/// One of the NPC's latest memories, as its short-term window keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentMemory {
    /// The memory's id.
    pub id: MemoryId,
    /// Its kind.
    pub kind: MemoryKind,
    /// The text.
    pub content: String,
    /// 1–10.
    pub importance: u8,
    /// Tick created.
    pub tick: u64,
    /// Name of the NPC it was heard from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Another NPC within sight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenNpc {
    /// Its id.
    pub id: NpcId,
    /// Its name.
    pub name: String,
    /// Where it stands.
    pub at: Pos,
    /// Whether it is within hearing radius (it would hear this NPC talk).
    pub audible: bool,
}

/// A named place within sight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenPlace {
    /// The place's name.
    pub name: String,
    /// Its cell.
    pub at: Pos,
}

/// One thing heard during the previous tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeardLine {
    /// Who spoke.
    pub speaker: NpcId,
    /// The speaker's name.
    pub speaker_name: String,
    /// What was said.
    pub text: String,
}

/// A scenario event witnessed this tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witnessed {
    /// The place where it happens.
    pub place: String,
    /// What happens.
    pub text: String,
}

/// Everything an NPC perceives at the start of a tick, in a stable order (NPCs by id,
/// places by scenario order, heard lines in the order they were spoken).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The observer.
    pub npc: NpcId,
    /// Its name.
    pub name: String,
    /// The tick being decided.
    pub tick: u64,
    /// Where it stands.
    pub at: Pos,
    /// Where it was heading, if anywhere.
    pub target: Option<Pos>,
    /// NPCs within sight radius, by id.
    pub seen_npcs: Vec<SeenNpc>,
    /// Places within sight radius, in scenario order.
    pub seen_places: Vec<SeenPlace>,
    /// What it heard during the previous tick.
    pub heard: Vec<HeardLine>,
    /// Scenario events it witnesses this tick.
    pub witnessed: Vec<Witnessed>,
    /// Its last few memories, oldest first (the short-term window): always in its
    /// context, whatever recall returns.
    pub recent: Vec<RecentMemory>,
    /// (gist key, NPC) pairs: which of the NPCs that can hear it already know which gist,
    /// as far as this NPC knows. See [`crate::components::KnownBy`].
    pub known_by: Vec<(u64, NpcId)>,
}

impl Observation {
    /// The NPCs that would hear this NPC talk, by id.
    pub fn audible(&self) -> impl Iterator<Item = &SeenNpc> {
        self.seen_npcs.iter().filter(|s| s.audible)
    }
}
