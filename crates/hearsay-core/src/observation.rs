//! What one NPC perceives at the start of a tick: the input of its Think phase.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::grid::Pos;
use crate::ids::{MemoryId, NpcId};
use crate::memory::MemoryKind;

/// An NPC's or a place's name as observations, requests and memories carry it: held in
/// place when it is short (up to 23 bytes, nearly every name), shared behind a counter
/// otherwise.
///
/// Why not `Arc<str>` for all of them: an observation names everyone in sight, who spoke
/// and to whom, and is built on one thread and dropped on another. With shared names,
/// each of those is an atomic count on a line the other core also writes, and the
/// request's digest follows a pointer per name; in place, a name is 24 bytes copied. The
/// same text either way, so the same JSON and the same digests.
pub type Name = smol_str::SmolStr;

/// A short-term window, oldest first, as the NPC's [`crate::components::ShortTerm`] holds
/// it and its observation carries it: one window behind one counter.
///
/// Why shared: at 10,000 NPCs, copying each window into each observation (an atomic count
/// per memory text, on lines last written by another thread) and dropping it again after
/// Think was a few milliseconds of every tick; a shared window is one count each way. A
/// brain that cuts it for a small context gets its own copy (`Arc::make_mut`).
pub type Window = Arc<Vec<RecentMemory>>;

/// One of the NPC's latest memories, as its short-term window keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentMemory {
    /// The memory's id.
    pub id: MemoryId,
    /// Seed, observation, conversation or reflection.
    pub kind: MemoryKind,
    /// The memory as phrased in the scenario's language. Shared, not copied: the window
    /// is handed to every observation of every tick while the memory is in it (at 10,000
    /// NPCs, copying the texts was the largest part of building the observations).
    pub content: Arc<str>,
    /// 1–10.
    pub importance: u8,
    /// The tick it was formed (0 for seed memories).
    pub tick: u64,
    /// Name of the NPC it was heard from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Name>,
    /// The first of the scenario's places its text names, as the memory carries it
    /// ([`crate::MemoryRecord::place`]).
    #[serde(skip)]
    pub place: crate::PlaceNamed,
}

/// Another NPC within sight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenNpc {
    /// The seen NPC's id (its index in the scenario's NPC list).
    pub id: NpcId,
    /// The seen NPC's unique name, as prompts show it.
    pub name: Name,
    /// Where it stands.
    pub at: Pos,
    /// Whether it is within hearing radius (it would hear this NPC talk).
    pub audible: bool,
}

/// A named place within sight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenPlace {
    /// The place's name.
    pub name: Name,
    /// The place's cell, a valid `move` target.
    pub at: Pos,
}

/// One thing heard during the previous tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeardLine {
    /// The speaker's id; `speaker_name` is its name.
    pub speaker: NpcId,
    /// The speaker's name.
    pub speaker_name: Name,
    /// The speech as the speaker's `talk` line gives it (one line, capped in length);
    /// shared by everyone who heard it.
    pub text: Arc<str>,
    /// The name of the NPC the words were addressed to (this one, or another it
    /// overheard), if they were addressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Name>,
    /// The words were whispered to this NPC (then `to` is its own name).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub whispered: bool,
}

impl HeardLine {
    /// How `listener` heard it, for phrasing.
    pub fn how(&self, listener: &str) -> crate::phrasing::Heard<'_> {
        crate::phrasing::Heard::by(listener, self.to.as_deref(), self.whispered)
    }
}

/// A scenario event witnessed this tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witnessed {
    /// The place where it happens.
    pub place: String,
    /// The event's text as the scenario words it, without the place.
    pub text: String,
}

/// Everything an NPC perceives at the start of a tick, in a stable order (NPCs by id,
/// places by scenario order, heard lines in the order they were spoken).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observation {
    /// The observing NPC, whose decision this observation feeds.
    pub npc: NpcId,
    /// The observer's name, as its prompt addresses it.
    pub name: Name,
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
    pub recent: Window,
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
