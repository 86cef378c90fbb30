//! What a brain is told: the NPC, what it perceives, what it recalls.

use hearsay_core::{Grid, Language, MemoryId, MemoryKind, NpcId, Observation, Pos};
use serde::{Deserialize, Serialize};

/// A recalled memory as a brain sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recollection {
    /// Its id (cited on the tape).
    pub id: MemoryId,
    /// Seed, observation, conversation or reflection.
    pub kind: MemoryKind,
    /// The memory as stored, phrased in the scenario's language.
    pub content: String,
    /// 1–10.
    pub importance: u8,
    /// The tick it was formed (0 for seed memories).
    pub tick: u64,
    /// Name of the NPC it was heard from.
    pub source: Option<String>,
}

/// A named place the NPC knows of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownPlace {
    /// The place's unique name from the scenario.
    pub name: String,
    /// The place's cell: what a `move` toward it targets.
    pub at: Pos,
}

/// Everything a brain may use to decide, for one NPC at one tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrainRequest {
    /// The scenario's root seed (the heuristic brain derives its RNG stream from it).
    pub seed: u64,
    /// The language the NPC thinks and speaks in.
    pub language: Language,
    /// Who the NPC is.
    pub persona: String,
    /// The map's extent: targets must lie inside.
    pub grid: Grid,
    /// Every named place on the map (the NPC knows the town).
    pub places: Vec<KnownPlace>,
    /// What it perceives now, including its short-term window.
    pub observation: Observation,
    /// What recall returned, best first.
    pub recalled: Vec<Recollection>,
}

/// The first 32 hex digits of the blake3 hash of `value` as JSON, streamed into the
/// hasher (the same bytes `serde_json::to_vec` would give, without building them).
/// The serializer writes a few bytes at a time; a buffer hands them to the hasher in
/// pages, since each `update` costs more than its bytes when they are few.
fn digest_of<T: Serialize>(value: &T) -> String {
    use std::io::Write;
    let mut hasher = blake3::Hasher::new();
    let streamed = {
        let mut buffered = std::io::BufWriter::with_capacity(8192, &mut hasher);
        serde_json::to_writer(&mut buffered, value).is_ok() && buffered.flush().is_ok()
    };
    if !streamed {
        // As the digest of the empty serialization, as it always was.
        hasher = blake3::Hasher::new();
    }
    hasher.finalize().to_hex()[..32].to_owned()
}

impl BrainRequest {
    /// A digest of the whole request: equal requests, equal digests.
    pub fn digest(&self) -> String {
        digest_of(self)
    }
}

/// Everything a brain may use to reflect: one NPC, at one tick, looking back over its
/// latest memories.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReflectRequest {
    /// The scenario's root seed.
    pub seed: u64,
    /// The language the NPC thinks in.
    pub language: Language,
    /// The reflecting NPC's id (its index in the scenario's NPC list).
    pub npc: NpcId,
    /// The reflecting NPC's name.
    pub name: String,
    /// The scenario's free-text description of the NPC.
    pub persona: String,
    /// The tick it reflects at; its insights are dated with it.
    pub tick: u64,
    /// Every named place on the map.
    pub places: Vec<KnownPlace>,
    /// The memories it reflects on, oldest first.
    pub memories: Vec<Recollection>,
    /// At most this many insights are kept.
    pub insights_max: usize,
}

impl ReflectRequest {
    /// A digest of the whole request.
    pub fn digest(&self) -> String {
        digest_of(self)
    }
}

/// A question put to an NPC (`hearsay ask`): who it is, what it recalls for the question,
/// its latest memories — all as they were at one tick of a finished run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AskRequest {
    /// The scenario's root seed.
    pub seed: u64,
    /// The language the NPC speaks.
    pub language: Language,
    /// The asked NPC's id (its index in the scenario's NPC list).
    pub npc: NpcId,
    /// The asked NPC's name.
    pub name: String,
    /// The scenario's free-text description of the NPC.
    pub persona: String,
    /// The tick it is asked at.
    pub tick: u64,
    /// Every named place on the map.
    pub places: Vec<KnownPlace>,
    /// The user's question, trimmed; also the recall query.
    pub question: String,
    /// What recall returns for the question, best first, with each one's cosine
    /// relevance to it.
    pub recalled: Vec<(Recollection, f32)>,
    /// Its latest memories, oldest first (the short-term window).
    pub recent: Vec<Recollection>,
}
