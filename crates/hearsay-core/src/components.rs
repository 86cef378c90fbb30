//! Components: plain data attached to each NPC entity.

use std::collections::{BTreeSet, VecDeque};

use bevy_ecs::component::Component;
use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::ids::{MemoryId, NpcId};
use crate::observation::{HeardLine, RecentMemory};

/// Marks an NPC and carries its name (unique in a scenario).
#[derive(Component, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Npc {
    /// The NPC's name.
    pub name: String,
}

/// Who the NPC is, in its own words: goes into its prompt.
#[derive(Component, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persona(pub String);

/// Where the NPC stands. Always on the map.
#[derive(Component, Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position(pub Pos);

/// Where the NPC is walking to, one step per tick; `None` when it has no destination.
#[derive(Component, Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target(pub Option<Pos>);

/// What the NPC heard during the last Act phase; read by the next tick's `observe`.
#[derive(Component, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hearing(pub Vec<HeardLine>);

/// The NPC's short-term window: its last few memories, oldest first. Always part of its
/// context, whatever recall returns.
#[derive(Component, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShortTerm(pub VecDeque<RecentMemory>);

/// What the NPC has experienced since it last reflected: the importance of its new
/// memories added up (reflections excluded), and the latest of them, oldest first, as
/// evidence for the next reflection. Only ids and what fact tracking needs are kept (the
/// runtime looks the texts up in its store), so checkpoints stay small.
#[derive(Component, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reflection {
    /// Importance accumulated since the last reflection.
    pub importance: u32,
    /// The most recent memories since then (at most the configured number).
    pub evidence: VecDeque<Evidence>,
}

/// A memory an NPC may reflect on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The memory.
    pub id: MemoryId,
    /// The NPC whose words it records, if heard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<NpcId>,
    /// The tracked facts (indices into the fact book) it mentions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<u16>,
}

/// Who the NPC believes already knows what: (gist key, NPC) pairs, learned by being
/// present when something was said. Lets a gossip avoid retelling people what they know.
#[derive(Component, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownBy(pub BTreeSet<(u64, NpcId)>);

/// The key under which a piece of speech is remembered as "known": its normalised text
/// hashed. Same words, same key, whoever says them.
pub fn gist_key(text: &str) -> u64 {
    let normalised: String = text
        .trim()
        .trim_end_matches(['.', '!', '?', '。', '！', '？'])
        .to_lowercase();
    let hash = blake3::hash(normalised.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

/// A convenience for code that only needs a position.
impl From<Position> for Pos {
    fn from(p: Position) -> Pos {
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::gist_key;

    #[test]
    fn gist_keys_ignore_case_and_final_punctuation() {
        assert_eq!(gist_key("Fresh fish!"), gist_key("fresh fish"));
        assert_eq!(gist_key("市场有鱼。"), gist_key("市场有鱼"));
        assert_ne!(gist_key("fresh fish"), gist_key("fresh bread"));
    }
}
