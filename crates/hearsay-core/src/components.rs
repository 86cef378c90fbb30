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
    /// As the scenario gives it; also in [`crate::resources::Roster::names`].
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
    /// Set by a failed reflection: the NPC keeps its tally and evidence, and is not due
    /// again before this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<ReflectionRetry>,
}

/// When an NPC whose reflection failed may try again: both must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReflectionRetry {
    /// Not before this tick (the failure's tick plus `reflect_retry_ticks`).
    pub tick: u64,
    /// Not before its tally reaches this (the tally at the failure plus the threshold).
    pub importance: u32,
}

/// A memory an NPC may reflect on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The memory's id; its text is looked up in the store when the NPC reflects.
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
///
/// Saved (in checkpoints) as `{"key": [npc, …]}`: each key once, not once per NPC — the
/// biggest part of a big town's checkpoint. The older `[[key, npc], …]` still loads.
#[derive(Component, Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownBy(pub BTreeSet<(u64, NpcId)>);

impl Serialize for KnownBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut grouped: Vec<(u64, Vec<u32>)> = Vec::new();
        for &(key, npc) in &self.0 {
            match grouped.last_mut() {
                Some((k, npcs)) if *k == key => npcs.push(npc.0),
                _ => grouped.push((key, vec![npc.0])),
            }
        }
        let mut map = serializer.serialize_map(Some(grouped.len()))?;
        for (key, npcs) in &grouped {
            map.serialize_entry(&key.to_string(), npcs)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for KnownBy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Saved {
            Grouped(std::collections::BTreeMap<String, Vec<u32>>),
            Pairs(Vec<(u64, NpcId)>),
        }
        match Saved::deserialize(deserializer)? {
            Saved::Pairs(pairs) => Ok(KnownBy(pairs.into_iter().collect())),
            Saved::Grouped(map) => {
                let mut set = BTreeSet::new();
                for (key, npcs) in map {
                    let key: u64 = key.parse().map_err(serde::de::Error::custom)?;
                    set.extend(npcs.into_iter().map(|n| (key, NpcId(n))));
                }
                Ok(KnownBy(set))
            }
        }
    }
}

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
    use super::{KnownBy, gist_key};
    use crate::ids::NpcId;

    #[test]
    fn known_by_saves_each_key_once_and_loads_the_old_pairs_too() {
        let known = KnownBy(
            [(7, NpcId(2)), (7, NpcId(5)), (u64::MAX, NpcId(1))]
                .into_iter()
                .collect(),
        );
        let json = serde_json::to_string(&known).expect("json");
        assert_eq!(json, format!(r#"{{"7":[2,5],"{}":[1]}}"#, u64::MAX));
        assert_eq!(serde_json::from_str::<KnownBy>(&json).expect("new"), known);
        let old = format!("[[7,2],[7,5],[{},1]]", u64::MAX);
        assert_eq!(serde_json::from_str::<KnownBy>(&old).expect("old"), known);
    }

    #[test]
    fn gist_keys_ignore_case_and_final_punctuation() {
        assert_eq!(gist_key("Fresh fish!"), gist_key("fresh fish"));
        assert_eq!(gist_key("市场有鱼。"), gist_key("市场有鱼"));
        assert_ne!(gist_key("fresh fish"), gist_key("fresh bread"));
    }
}
