//! Components: plain data attached to each NPC entity.

use std::collections::{BTreeSet, VecDeque};

use bevy_ecs::component::Component;
use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::ids::{MemoryId, NpcId};
use crate::observation::{HeardLine, Window};

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
///
/// Shared with the NPC's observation, not copied into it ([`crate::Window`]): by the time
/// `remember` slides it, the tick's observation is gone and the window is this
/// component's alone again, so it slides in place.
#[derive(Component, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShortTerm(pub Window);

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

impl Evidence {
    /// Memory `m` as evidence: its id, the NPC it was heard from and the facts of `book`
    /// its text mentions. The one place evidence is made, when the memory is new and when
    /// a checkpoint that saved its id alone is read back ([`crate::checkpoint::Checkpoint::fill`]).
    pub fn of(m: &crate::MemoryRecord, book: &crate::facts::FactBook) -> Self {
        Self {
            id: m.id,
            source: m.source,
            facts: book.mentioned_in(&m.content),
        }
    }
}

/// Who the NPC believes already knows what: (gist key, NPC) pairs, learned by being
/// present when something was said. Lets a gossip avoid retelling people what they know.
///
/// Saved (in checkpoints) as `{"key": [npc, …]}`: each key once, not once per NPC — the
/// biggest part of a big town's checkpoint. The older `[[key, npc], …]` still loads.
#[derive(Component, Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownBy(pub BTreeSet<(u64, NpcId)>);

impl KnownBy {
    /// Whether it holds no pair.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pairs about the NPCs in `audible`, in the set's order (key, then NPC).
    ///
    /// The set grows with the gossip (in the P3 town about 130 pairs per NPC by tick
    /// 500, all under one or two keys), while the NPCs in earshot are a handful: a filter
    /// over every pair made building observations six times dearer at the end of a run
    /// than at its start. So each key is visited once, by skipping from one key to the
    /// next, and under it only the audible NPCs are looked up. When keys are many (every
    /// utterance its own gist), those lookups would cost more than the filter: once they
    /// have added up to the set's size, the rest of the set is filtered as before. Either
    /// way the answer is the filter's.
    pub fn about(&self, audible: &BTreeSet<NpcId>) -> Vec<(u64, NpcId)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let mut out = Vec::new();
        if audible.is_empty() {
            return out;
        }
        // A key's visit costs a lookup per audible NPC and one to skip to the next key;
        // the filter, a step and a lookup in `audible` per pair.
        let budget = self.0.len();
        let mut spent = 0;
        let mut next = self.0.first().copied();
        while let Some((key, _)) = next {
            if spent >= budget {
                // Too many keys for lookups to pay: filter the rest, this key included.
                out.extend(
                    self.0
                        .range((key, NpcId(0))..)
                        .filter(|(_, npc)| audible.contains(npc))
                        .copied(),
                );
                break;
            }
            spent += audible.len() + 1;
            out.extend(
                audible
                    .iter()
                    .filter(|&&npc| self.0.contains(&(key, npc)))
                    .map(|&npc| (key, npc)),
            );
            next = self
                .0
                .range((Excluded((key, NpcId(u32::MAX))), Unbounded))
                .next()
                .copied();
        }
        out
    }
}

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
    use std::collections::BTreeSet;

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
    fn what_the_audible_know_is_the_filter_of_every_pair() {
        // Few keys with many NPCs each (a town retelling one rumour), many keys with an
        // NPC or two each (past the lookups' budget), NPC ids at both ends of the range.
        let mut state = 7u64;
        let mut next = |m: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) % m
        };
        for (keys, pairs) in [(1, 0), (1, 130), (3, 400), (500, 600), (40, 60)] {
            let mut set: BTreeSet<(u64, NpcId)> = (0..pairs)
                .map(|_| (next(keys), NpcId(next(200) as u32)))
                .collect();
            set.insert((u64::MAX, NpcId(u32::MAX)));
            set.insert((0, NpcId(0)));
            let known = KnownBy(set);
            for size in [0, 1, 3, 12, 60] {
                let mut audible: BTreeSet<NpcId> =
                    (0..size).map(|_| NpcId(next(200) as u32)).collect();
                if size == 3 {
                    audible.insert(NpcId(u32::MAX));
                    audible.insert(NpcId(0));
                }
                let filtered: Vec<_> = known
                    .0
                    .iter()
                    .filter(|(_, npc)| audible.contains(npc))
                    .copied()
                    .collect();
                assert_eq!(
                    known.about(&audible),
                    filtered,
                    "{keys} keys, {pairs} pairs, {size} audible"
                );
            }
        }
    }

    #[test]
    fn gist_keys_ignore_case_and_final_punctuation() {
        assert_eq!(gist_key("Fresh fish!"), gist_key("fresh fish"));
        assert_eq!(gist_key("市场有鱼。"), gist_key("市场有鱼"));
        assert_ne!(gist_key("fresh fish"), gist_key("fresh bread"));
    }
}
