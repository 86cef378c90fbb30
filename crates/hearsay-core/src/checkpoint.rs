//! Checkpoints: the whole simulation state at a tick boundary, as plain data.
//!
//! Everything a tick reads that earlier ticks wrote is here: each NPC's position, target,
//! what it heard, its short-term window, what it believes others know, what it has
//! accumulated toward its next reflection and what the wake rules remember; the next
//! memory id; the fact book; the rolling hash. Randomness needs no state (every stream is
//! derived from seed, NPC and tick). Restoring a checkpoint into a freshly built world
//! and running the next tick gives exactly what the original run's next tick gave.

use std::collections::BTreeSet;

use bevy_ecs::prelude::World;
use serde::{Deserialize, Serialize};

use crate::components::{
    Evidence, Hearing, KnownBy, Position, Reflection, ReflectionRetry, ShortTerm, Target,
};
use crate::facts::FactBook;
use crate::ids::MemoryId;
use crate::memory::MemoryRecord;
use crate::observation::RecentMemory;
use crate::resources::{MemoryLedger, RollingDigest, Roster, SimClock};
use crate::wake::Attention;

mod delta;
mod json;

pub use delta::{
    CheckpointDelta, FactDelta, NpcDelta, ReflectionDelta, SeqDelta, Sequence, SetDelta,
};
pub(crate) use delta::{KnownByView, NpcView};
#[cfg(test)]
pub(crate) use json::written;

/// One NPC's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NpcState {
    /// Where it stands.
    pub position: Position,
    /// Where it walks.
    pub target: Target,
    /// What it heard during the last tick.
    pub hearing: Hearing,
    /// Its short-term window, oldest first.
    pub short_term: Vec<WindowEntry>,
    /// What it believes others know: the whole set, in a checkpoint to restore (as
    /// [`crate::Sim::capture`] takes it, or as a reader assembles a store's, [`KnownSoFar`]).
    /// Left out when empty.
    #[serde(default, skip_serializing_if = "KnownBy::is_empty")]
    pub known_by: KnownBy,
    /// What it learned of that since the checkpoint saved before — a store's whole
    /// checkpoint holds this instead of the set, which only grows with the gossip (and a
    /// hearsay that knew only `known_by` refuses such a checkpoint rather than misread
    /// it). Left out when empty; restoring refuses a checkpoint that holds any.
    #[serde(default, skip_serializing_if = "KnownBy::is_empty")]
    pub learned: KnownBy,
    /// What it accumulated toward its next reflection.
    #[serde(default)]
    pub reflection: SavedReflection,
    /// What the wake rules remember of it (`on_change` only; left out when unused).
    #[serde(default, skip_serializing_if = "Attention::is_unused")]
    pub attention: Attention,
}

/// A memory a checkpoint names: in a short-term window ([`WindowEntry`]) or in the
/// evidence for a reflection ([`EvidenceEntry`]). A store saves its id alone, a number in
/// the JSON: the store keeps every memory, and a reader fills the rest back from it
/// ([`Checkpoint::fill`]) before restoring. Windows' texts were most of a big town's
/// checkpoint; evidence's sources and facts, more than half of a delta once the rumour
/// spread (the P3 town). Checkpoints written before hold whole entries (an object) and
/// read the same; restoring needs every entry whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry<T> {
    /// The memory's id: a number in the JSON.
    Id(MemoryId),
    /// The whole entry: an object.
    Whole(T),
}

/// A short-term window's entry: the memory as an observation shows it.
pub type WindowEntry = Entry<RecentMemory>;

/// An entry of a reflection's evidence: the memory's id, the NPC it was heard from and
/// the tracked facts it mentions.
pub type EvidenceEntry = Entry<Evidence>;

/// What an [`Entry`] holds whole: a memory, known by its id.
pub trait Remembered {
    /// The memory's id.
    fn memory_id(&self) -> MemoryId;
}

impl Remembered for RecentMemory {
    fn memory_id(&self) -> MemoryId {
        self.id
    }
}

impl Remembered for Evidence {
    fn memory_id(&self) -> MemoryId {
        self.id
    }
}

impl<T: Remembered> Entry<T> {
    /// The memory's id, whole or not.
    pub fn id(&self) -> MemoryId {
        match self {
            Self::Id(id) => *id,
            Self::Whole(m) => m.memory_id(),
        }
    }

    /// The entry as `saved` says a checkpoint holds it.
    fn of(whole: &T, saved: Memories) -> Self
    where
        T: Clone,
    {
        match saved {
            Memories::Whole => Self::Whole(whole.clone()),
            Memories::ById => Self::Id(whole.memory_id()),
        }
    }

    /// The whole entry, or [`CheckpointError::Unresolved`].
    fn whole(&self) -> Result<T, CheckpointError>
    where
        T: Clone,
    {
        match self {
            Self::Whole(m) => Ok(m.clone()),
            Self::Id(id) => Err(CheckpointError::Unresolved(id.0)),
        }
    }
}

/// An NPC's [`Reflection`] as a checkpoint holds it: its evidence as [`EvidenceEntry`]s.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedReflection {
    /// Importance accumulated since the last reflection.
    pub importance: u32,
    /// The most recent memories since then, oldest first.
    pub evidence: Vec<EvidenceEntry>,
    /// Set by a failed reflection ([`Reflection::retry`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<ReflectionRetry>,
}

impl SavedReflection {
    /// `r` as `saved` says a checkpoint holds it.
    fn of(r: &Reflection, saved: Memories) -> Self {
        Self {
            importance: r.importance,
            evidence: r.evidence.iter().map(|e| Entry::of(e, saved)).collect(),
            retry: r.retry,
        }
    }

    /// `r` as a store saves it, written into `self` (its evidence's buffer kept).
    fn set_by_id(&mut self, r: &Reflection) {
        self.importance = r.importance;
        self.retry = r.retry;
        self.evidence.clear();
        self.evidence
            .extend(r.evidence.iter().map(|e| Entry::Id(e.id)));
    }

    /// The component, every evidence entry whole.
    fn restored(&self) -> Result<Reflection, CheckpointError> {
        Ok(Reflection {
            importance: self.importance,
            evidence: self
                .evidence
                .iter()
                .map(Entry::whole)
                .collect::<Result<_, _>>()?,
            retry: self.retry,
        })
    }
}

/// How [`capture`] writes the memories a checkpoint names (windows and evidence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Memories {
    /// Whole: a checkpoint that restores as it is.
    Whole,
    /// Memory ids: what a store saves.
    ById,
}

/// The simulation state before `next_tick` runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The tick that runs next.
    pub next_tick: u64,
    /// The id the next memory gets.
    pub next_memory_id: u64,
    /// The rolling hash after the last completed tick (hex; zeros before tick 0).
    pub digest: String,
    /// Tracked facts and their knowers.
    pub facts: FactBook,
    /// Every NPC, by id.
    pub npcs: Vec<NpcState>,
}

/// Why a checkpoint does not fit a world.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// The checkpoint has a different number of NPCs.
    #[error("the checkpoint has {found} NPCs, the scenario {expected}")]
    NpcCount {
        /// How many NPCs the scenario defines.
        expected: usize,
        /// How many NPCs the checkpoint holds state for.
        found: usize,
    },
    /// The digest is not 64 hex digits.
    #[error("the checkpoint's digest {0:?} is not a blake3 hash")]
    Digest(String),
    /// A short-term window or a reflection's evidence names a memory by id that was never
    /// filled in.
    #[error(
        "the checkpoint names memory {0} (in a short-term window or a reflection's evidence), which the store does not have"
    )]
    Unresolved(u64),
    /// A store's whole checkpoint, holding what each NPC learned since the save before
    /// rather than what it knows, restored without its earlier checkpoints.
    #[error(
        "the checkpoint holds what each NPC learned since the checkpoint before, not what it knows: read it with the store's earlier checkpoints"
    )]
    Unassembled,
    /// A delta that does not fit the checkpoint it is applied to.
    #[error("a checkpoint delta does not fit: {0}")]
    Delta(String),
}

impl Checkpoint {
    /// The memories the short-term windows and the reflections' evidence name by id
    /// alone, ascending, each once.
    pub fn memory_ids(&self) -> Vec<MemoryId> {
        fn by_id<T>(e: &Entry<T>) -> Option<MemoryId> {
            match e {
                Entry::Id(id) => Some(*id),
                Entry::Whole(_) => None,
            }
        }
        let mut ids: Vec<MemoryId> = self
            .npcs
            .iter()
            .flat_map(|n| {
                let window = n.short_term.iter().filter_map(by_id);
                window.chain(n.reflection.evidence.iter().filter_map(by_id))
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Puts the memories `found` (sorted by id, as [`Checkpoint::memory_ids`] lists them)
    /// in place of the ids the windows and the evidence hold: a window's entry becomes
    /// `recent` of the memory, an evidence entry the memory's id, its source and the facts
    /// its text mentions by this checkpoint's fact book — what the run held
    /// ([`Evidence::of`]). An id not found stays, and restoring then fails with
    /// [`CheckpointError::Unresolved`]. (A slice searched, not a map built: a
    /// 100,000-NPC town's checkpoint names more than a million memories.)
    pub fn fill(&mut self, found: &[MemoryRecord], recent: impl Fn(&MemoryRecord) -> RecentMemory) {
        debug_assert!(found.is_sorted_by_key(|m| m.id), "found sorted by id");
        let get = |id: &MemoryId| {
            found
                .binary_search_by_key(id, |m| m.id)
                .ok()
                .map(|i| &found[i])
        };
        let facts = &self.facts;
        for npc in &mut self.npcs {
            for entry in &mut npc.short_term {
                if let Entry::Id(id) = entry
                    && let Some(m) = get(id)
                {
                    *entry = Entry::Whole(recent(m));
                }
            }
            for entry in &mut npc.reflection.evidence {
                if let Entry::Id(id) = entry
                    && let Some(m) = get(id)
                {
                    *entry = Entry::Whole(Evidence::of(m, facts));
                }
            }
        }
    }
}

/// What every NPC believes others know ([`KnownBy`]), gathered from a store's
/// checkpoints in tick order. That set only grows with the gossip, so a store's whole
/// checkpoint holds only what each NPC learned since the checkpoint saved before
/// ([`NpcState::learned`]) and a delta the pairs learned since the one before it; a whole
/// checkpoint written before holds the whole set. Each adds to what the ones before gave,
/// so a reader goes through every checkpoint of the run up to the one it restores — the
/// earlier chains' too — and then puts the sets into the chain's whole checkpoint
/// ([`KnownSoFar::into_whole`]) before applying that chain's deltas.
#[derive(Debug, Default)]
pub struct KnownSoFar(Vec<KnownBy>);

impl KnownSoFar {
    /// Adds what a whole checkpoint holds, learned or known.
    pub fn whole(&mut self, checkpoint: Checkpoint) -> Result<(), CheckpointError> {
        self.fit(checkpoint.npcs.len())?;
        for (set, npc) in self.0.iter_mut().zip(checkpoint.npcs) {
            set.0.extend(npc.known_by.0);
            set.0.extend(npc.learned.0);
        }
        Ok(())
    }

    /// Adds (and takes away) what a delta says each NPC learned.
    pub fn delta(&mut self, delta: CheckpointDelta) -> Result<(), CheckpointError> {
        for npc in delta.npcs {
            let count = self.0.len();
            if let Some(k) = npc.known_by {
                let set = self.0.get_mut(npc.npc as usize).ok_or_else(|| {
                    CheckpointError::Delta(format!("names NPC {} of {count}", npc.npc))
                })?;
                k.apply(set);
            }
        }
        Ok(())
    }

    /// Puts the sets gathered so far into `whole` (the whole checkpoint of the chain being
    /// read, not yet added): each NPC's set is them and what `whole` holds, learned or
    /// known, and nothing is left as learned.
    pub fn into_whole(mut self, whole: &mut Checkpoint) -> Result<(), CheckpointError> {
        self.fit(whole.npcs.len())?;
        for (mut set, npc) in self.0.into_iter().zip(&mut whole.npcs) {
            set.0.append(&mut npc.known_by.0);
            set.0.append(&mut npc.learned.0);
            npc.known_by = set;
        }
        Ok(())
    }

    /// Sized for `npcs` NPCs on first use; refuses another count after.
    fn fit(&mut self, npcs: usize) -> Result<(), CheckpointError> {
        if self.0.is_empty() {
            self.0 = vec![KnownBy::default(); npcs];
        }
        if self.0.len() != npcs {
            return Err(CheckpointError::NpcCount {
                expected: self.0.len(),
                found: npcs,
            });
        }
        Ok(())
    }
}

/// Captures `world` between ticks; `next_tick` is the tick that runs next.
pub(crate) fn capture(world: &World, next_tick: u64, saved: Memories) -> Checkpoint {
    let roster = world.resource::<Roster>();
    let mut learned = match saved {
        Memories::ById => learned_since_save(world),
        Memories::Whole => Vec::new(),
    }
    .into_iter();
    let npcs = roster
        .entities
        .iter()
        .map(|&e| {
            let get =
                |what| -> ! { panic!("NPC entity without {what}: build_world spawns them all") };
            NpcState {
                position: *world.get::<Position>(e).unwrap_or_else(|| get("Position")),
                target: *world.get::<Target>(e).unwrap_or_else(|| get("Target")),
                hearing: world
                    .get::<Hearing>(e)
                    .cloned()
                    .unwrap_or_else(|| get("Hearing")),
                short_term: world
                    .get::<ShortTerm>(e)
                    .unwrap_or_else(|| get("ShortTerm"))
                    .0
                    .iter()
                    .map(|m| Entry::of(m, saved))
                    .collect(),
                known_by: match saved {
                    Memories::Whole => world
                        .get::<KnownBy>(e)
                        .cloned()
                        .unwrap_or_else(|| get("KnownBy")),
                    Memories::ById => KnownBy::default(),
                },
                learned: match saved {
                    Memories::Whole => KnownBy::default(),
                    Memories::ById => KnownBy(learned.next().unwrap_or_default()),
                },
                reflection: SavedReflection::of(
                    world
                        .get::<Reflection>(e)
                        .unwrap_or_else(|| get("Reflection")),
                    saved,
                ),
                attention: world
                    .get::<Attention>(e)
                    .cloned()
                    .unwrap_or_else(|| get("Attention")),
            }
        })
        .collect();
    Checkpoint {
        next_tick,
        next_memory_id: world.resource::<MemoryLedger>().next_id,
        digest: crate::digest::hex(&world.resource::<RollingDigest>().0),
        facts: world.resource::<FactBook>().clone(),
        npcs,
    }
}

/// The pairs each NPC (by index) learned since the last save or restore: the world's
/// journal ([`crate::resources::KnownByAdded`]).
fn learned_since_save(world: &World) -> Vec<BTreeSet<(u64, crate::ids::NpcId)>> {
    let mut learned = vec![BTreeSet::new(); world.resource::<Roster>().entities.len()];
    for &(npc, pair) in &world.resource::<crate::resources::KnownByAdded>().0 {
        if let Some(set) = learned.get_mut(npc.index()) {
            set.insert(pair);
        }
    }
    learned
}

/// The changes from `base` (the state saved last) to `world`, between ticks. Every part
/// is compared with `base` except `KnownBy`, which grows with the gossip: its change is
/// the pairs the world's journal says each NPC learned since the save
/// ([`crate::resources::KnownByAdded`]), never a comparison of the sets.
pub(crate) fn capture_delta(world: &World, next_tick: u64, base: &Checkpoint) -> CheckpointDelta {
    let roster = world.resource::<Roster>();
    debug_assert_eq!(roster.entities.len(), base.npcs.len());
    let mut learned = learned_since_save(world).into_iter();
    // Each NPC's window and evidence as ids, written into one buffer each in turn rather
    // than a fresh `Vec` per NPC per tick (most are unchanged or slide by one).
    let mut window: Vec<WindowEntry> = Vec::new();
    let mut reflection = SavedReflection::default();
    let npcs = roster
        .entities
        .iter()
        .zip(&base.npcs)
        .enumerate()
        .filter_map(|(i, (&e, old))| {
            let get =
                |what| -> ! { panic!("NPC entity without {what}: build_world spawns them all") };
            let entity = world.entity(e);
            let known = KnownBy(learned.next().unwrap_or_default());
            window.clear();
            window.extend(
                entity
                    .get::<ShortTerm>()
                    .unwrap_or_else(|| get("ShortTerm"))
                    .0
                    .iter()
                    .map(|m| Entry::Id(m.id)),
            );
            reflection.set_by_id(
                entity
                    .get::<Reflection>()
                    .unwrap_or_else(|| get("Reflection")),
            );
            let view = NpcView {
                position: entity.get::<Position>().unwrap_or_else(|| get("Position")),
                target: entity.get::<Target>().unwrap_or_else(|| get("Target")),
                hearing: entity.get::<Hearing>().unwrap_or_else(|| get("Hearing")),
                short_term: &window,
                known_by: KnownByView::Added(known),
                reflection: &reflection,
                attention: entity
                    .get::<Attention>()
                    .unwrap_or_else(|| get("Attention")),
            };
            NpcDelta::between(i as u32, old, &view)
        })
        .collect();
    CheckpointDelta {
        next_tick,
        prev: base.next_tick,
        next_memory_id: world.resource::<MemoryLedger>().next_id,
        digest: crate::digest::hex(&world.resource::<RollingDigest>().0),
        facts: FactDelta::between(&base.facts, world.resource::<FactBook>()),
        npcs,
    }
}

/// Restores `checkpoint` into a world built from the same scenario (by
/// `build_world`), so that its next schedule runs are tick `next_tick`. The
/// opening log lines `build_world` queued are dropped: they belong to tick 0, which
/// already happened.
pub(crate) fn restore(world: &mut World, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
    let entities = world.resource::<Roster>().entities.clone();
    if entities.len() != checkpoint.npcs.len() {
        return Err(CheckpointError::NpcCount {
            expected: entities.len(),
            found: checkpoint.npcs.len(),
        });
    }
    let digest = parse_hex(&checkpoint.digest)
        .ok_or_else(|| CheckpointError::Digest(checkpoint.digest.clone()))?;
    for (&e, npc) in entities.iter().zip(&checkpoint.npcs) {
        let window = npc
            .short_term
            .iter()
            .map(Entry::whole)
            .collect::<Result<Vec<_>, _>>()?;
        let reflection = npc.reflection.restored()?;
        if !npc.learned.0.is_empty() {
            return Err(CheckpointError::Unassembled);
        }
        let mut entity = world.entity_mut(e);
        entity.insert((
            npc.position,
            npc.target,
            npc.hearing.clone(),
            ShortTerm(window.into()),
            npc.known_by.clone(),
            reflection,
            npc.attention.clone(),
        ));
    }
    {
        let mut ledger = world.resource_mut::<MemoryLedger>();
        ledger.next_id = checkpoint.next_memory_id;
        ledger.first_of_tick = checkpoint.next_memory_id;
        ledger.pending.clear();
    }
    world.insert_resource(checkpoint.facts.clone());
    world.insert_resource(RollingDigest(digest));
    world
        .resource_mut::<crate::resources::TickEvents>()
        .0
        .clear();
    world.resource_mut::<SimClock>().tick = checkpoint.next_tick;
    // What was learned is counted from the restored state on.
    world
        .resource_mut::<crate::resources::KnownByAdded>()
        .0
        .clear();
    Ok(())
}

fn parse_hex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}
