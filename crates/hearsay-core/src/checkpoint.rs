//! Checkpoints: the whole simulation state at a tick boundary, as plain data.
//!
//! Everything a tick reads that earlier ticks wrote is here: each NPC's position, target,
//! what it heard, its short-term window, what it believes others know, what it has
//! accumulated toward its next reflection and what the wake rules remember; the next
//! memory id; the fact book; the rolling hash. Randomness needs no state (every stream is
//! derived from seed, NPC and tick). Restoring a checkpoint into a freshly built world
//! and running the next tick gives exactly what the original run's next tick gave.

use bevy_ecs::prelude::World;
use serde::{Deserialize, Serialize};

use crate::components::{Hearing, KnownBy, Position, Reflection, ShortTerm, Target};
use crate::facts::FactBook;
use crate::ids::MemoryId;
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
    /// What it believes others know.
    pub known_by: KnownBy,
    /// What it accumulated toward its next reflection.
    #[serde(default)]
    pub reflection: Reflection,
    /// What the wake rules remember of it (`on_change` only; left out when unused).
    #[serde(default, skip_serializing_if = "Attention::is_unused")]
    pub attention: Attention,
}

/// A short-term window entry as a checkpoint holds it. A store saves ids alone (the
/// store keeps every memory's text; a window's texts were most of a big town's
/// checkpoint); a reader fills them in ([`Checkpoint::fill_windows`]) before restoring.
/// Checkpoints written before hearsay 0.1.1 hold whole memories, and read the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WindowEntry {
    /// The memory's id: a number in the JSON.
    Id(MemoryId),
    /// The whole memory: an object.
    Whole(RecentMemory),
}

impl WindowEntry {
    fn id(&self) -> MemoryId {
        match self {
            Self::Id(id) => *id,
            Self::Whole(m) => m.id,
        }
    }
}

/// How [`capture`] writes the short-term windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Windows {
    /// Whole memories: a checkpoint that restores as it is.
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
    /// A short-term window names a memory by id that was never filled in.
    #[error("the checkpoint's short-term window names memory {0}, which the store does not have")]
    Unresolved(u64),
    /// A delta that does not fit the checkpoint it is applied to.
    #[error("a checkpoint delta does not fit: {0}")]
    Delta(String),
}

impl Checkpoint {
    /// The memories the short-term windows name by id alone, ascending, each once.
    pub fn window_ids(&self) -> Vec<MemoryId> {
        let mut ids: Vec<MemoryId> = self
            .npcs
            .iter()
            .flat_map(|n| &n.short_term)
            .filter_map(|e| match e {
                WindowEntry::Id(id) => Some(*id),
                WindowEntry::Whole(_) => None,
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Puts the memories `found` (by id) in place of the ids the windows hold; an id not
    /// found stays, and restoring then fails with [`CheckpointError::Unresolved`].
    pub fn fill_windows(&mut self, found: &std::collections::BTreeMap<MemoryId, RecentMemory>) {
        for entry in self.npcs.iter_mut().flat_map(|n| &mut n.short_term) {
            if let WindowEntry::Id(id) = entry
                && let Some(m) = found.get(id)
            {
                *entry = WindowEntry::Whole(m.clone());
            }
        }
    }
}

/// Captures `world` between ticks; `next_tick` is the tick that runs next.
pub(crate) fn capture(world: &World, next_tick: u64, windows: Windows) -> Checkpoint {
    let roster = world.resource::<Roster>();
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
                    .map(|m| match windows {
                        Windows::Whole => WindowEntry::Whole(m.clone()),
                        Windows::ById => WindowEntry::Id(m.id),
                    })
                    .collect(),
                known_by: world
                    .get::<KnownBy>(e)
                    .cloned()
                    .unwrap_or_else(|| get("KnownBy")),
                reflection: world
                    .get::<Reflection>(e)
                    .cloned()
                    .unwrap_or_else(|| get("Reflection")),
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

/// The changes from `base` (the state saved last) to `world`, between ticks. Every part
/// is compared with `base` except `KnownBy`, which grows with the gossip: its change is
/// the pairs the world's journal says each NPC learned since the save
/// ([`crate::resources::KnownByAdded`]), never a comparison of the sets.
pub(crate) fn capture_delta(world: &World, next_tick: u64, base: &Checkpoint) -> CheckpointDelta {
    let roster = world.resource::<Roster>();
    debug_assert_eq!(roster.entities.len(), base.npcs.len());
    let mut learned: Vec<std::collections::BTreeSet<(u64, crate::ids::NpcId)>> =
        vec![std::collections::BTreeSet::new(); base.npcs.len()];
    for &(npc, pair) in &world.resource::<crate::resources::KnownByAdded>().0 {
        if let Some(set) = learned.get_mut(npc.index()) {
            set.insert(pair);
        }
    }
    let mut learned = learned.into_iter();
    // Each NPC's window as ids, written into one buffer in turn rather than a fresh
    // `Vec` per NPC per tick (most windows are unchanged or slide by one).
    let mut window: Vec<WindowEntry> = Vec::new();
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
                    .map(|m| WindowEntry::Id(m.id)),
            );
            let view = NpcView {
                position: entity.get::<Position>().unwrap_or_else(|| get("Position")),
                target: entity.get::<Target>().unwrap_or_else(|| get("Target")),
                hearing: entity.get::<Hearing>().unwrap_or_else(|| get("Hearing")),
                short_term: &window,
                known_by: KnownByView::Added(known),
                reflection: entity
                    .get::<Reflection>()
                    .unwrap_or_else(|| get("Reflection")),
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
            .map(|entry| match entry {
                WindowEntry::Whole(m) => Ok(m.clone()),
                WindowEntry::Id(_) => Err(CheckpointError::Unresolved(entry.id().0)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut entity = world.entity_mut(e);
        entity.insert((
            npc.position,
            npc.target,
            npc.hearing.clone(),
            ShortTerm(window.into()),
            npc.known_by.clone(),
            npc.reflection.clone(),
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
