//! The kernel's one entry point: a tick in two halves, driven from outside.
//!
//! [`Sim::perceive`] runs [`SimPerceive`] and hands out what the NPCs perceive and who
//! must reflect; the runtime thinks (async, outside); [`Sim::act`] takes the decisions
//! and runs [`SimAct`], handing back the tick's event lines and new memories. Nothing
//! outside this crate touches the world's resources, so every driver — a run, a resume,
//! a fork, a replay — sets up a tick the same way, in the same order.

use std::collections::BTreeMap;

use bevy_ecs::world::World;

use crate::checkpoint::{self, Checkpoint, CheckpointDelta, CheckpointError};
use crate::facts::FactBook;
use crate::ids::{MemoryId, NpcId};
use crate::memory::MemoryRecord;
use crate::observation::Observation;
use crate::resources::{
    ArchivedMemories, Decisions, MemoryLedger, Observations, ReflectionsDeferred, ReflectionsDue,
    Roster, SimClock, SimConfig, Thought, TickLog, Wakes,
};
use crate::schedule::{SimAct, SimPerceive};
use crate::setup::{WorldSetup, build_world};
use crate::wake::Wake;

/// What the first half of a tick produced.
#[derive(Clone, Debug, Default)]
pub struct Perceived {
    /// One per NPC, in id order.
    pub observations: Vec<Observation>,
    /// NPCs due to reflect this tick, in id order, each with the ids of the memories it
    /// reflects on (oldest first).
    pub reflections_due: Vec<(NpcId, Vec<MemoryId>)>,
    /// NPCs whose reflection would be due but waits for its retry after a failure.
    pub reflections_deferred: Vec<NpcId>,
    /// Who thinks this tick and why, by NPC id: `observations` holds exactly those that
    /// think; the others continue, and [`Sim::act`] acts for them.
    pub wakes: Vec<Wake>,
}

/// What the second half of a tick produced.
#[derive(Clone, Debug, Default)]
pub struct Acted {
    /// The tick's `events.jsonl` lines, the closing `tick` line with the rolling hash
    /// included.
    pub log: TickLog,
    /// The memories the tick created, in id order, for the store.
    pub memories: Vec<MemoryRecord>,
}

/// The world and the rules of a tick.
pub struct Sim {
    world: World,
}

impl Sim {
    /// A new world; its seed memories wait in [`Sim::take_memories`].
    pub fn new(setup: WorldSetup) -> Self {
        Self {
            world: build_world(setup),
        }
    }

    /// A world set up by `setup`, then brought to the state `checkpoint` saved.
    pub fn restored(setup: WorldSetup, checkpoint: &Checkpoint) -> Result<Self, CheckpointError> {
        let mut sim = Self::new(setup);
        checkpoint::restore(&mut sim.world, checkpoint)?;
        Ok(sim)
    }

    /// The same state under another setup (a fork's stage with another scenario): the
    /// world is set up anew and this one's state carried over as a checkpoint.
    pub fn carried_to(&self, setup: WorldSetup, next_tick: u64) -> Result<Self, CheckpointError> {
        let mut sim = Self::restored(setup, &self.capture(next_tick))?;
        // What was learned since the last save is still to be saved: the journal goes on.
        sim.world.insert_resource(
            self.world
                .resource::<crate::resources::KnownByAdded>()
                .clone(),
        );
        Ok(sim)
    }

    /// Memories created and not yet taken (the seed memories, before tick 0).
    pub fn take_memories(&mut self) -> Vec<MemoryRecord> {
        std::mem::take(&mut self.world.resource_mut::<MemoryLedger>().pending)
    }

    /// The first half of `tick`, with its `seed`: the memories `archived` (forgotten at
    /// the start of the tick, by the store's schedule) are logged, scenario events fire,
    /// every NPC observes, reflections fall due.
    pub fn perceive(
        &mut self,
        tick: u64,
        seed: u64,
        archived: Vec<(MemoryId, NpcId)>,
    ) -> Perceived {
        self.world.resource_mut::<SimConfig>().seed = seed;
        self.world.resource_mut::<SimClock>().tick = tick;
        self.world.insert_resource(ArchivedMemories(archived));
        self.world.run_schedule(SimPerceive);
        Perceived {
            observations: std::mem::take(&mut self.world.resource_mut::<Observations>().0),
            reflections_due: std::mem::take(&mut self.world.resource_mut::<ReflectionsDue>().0),
            reflections_deferred: std::mem::take(
                &mut self.world.resource_mut::<ReflectionsDeferred>().0,
            ),
            wakes: self.world.resource::<Wakes>().0.clone(),
        }
    }

    /// The second half of the tick: `decisions` (one per NPC that thought; the kernel acts
    /// for those that continue) are applied in id order, memories recorded, facts
    /// tracked, the tick sealed.
    pub fn act(&mut self, decisions: BTreeMap<NpcId, Thought>) -> Acted {
        self.world.insert_resource(Decisions(decisions));
        self.world.run_schedule(SimAct);
        Acted {
            log: std::mem::take(&mut *self.world.resource_mut::<TickLog>()),
            memories: self.take_memories(),
        }
    }

    /// The state to save, with `next_tick` the tick that runs next.
    pub fn capture(&self, next_tick: u64) -> Checkpoint {
        checkpoint::capture(&self.world, next_tick, checkpoint::Memories::Whole)
    }

    /// [`Sim::capture`] as a store saves it: the short-term windows and the reflections'
    /// evidence as memory ids (the store has the memories; [`Checkpoint::fill`] puts them
    /// back), and of each NPC's `KnownBy` what it learned since the last save or restore
    /// ([`crate::checkpoint::NpcState::learned`]; a reader gathers the rest from the
    /// store's earlier checkpoints, [`crate::checkpoint::KnownSoFar`]). From the save
    /// on, the world's changes are counted from here: the next [`Sim::save_delta`] is
    /// taken against what this returns.
    pub fn save_whole(&mut self, next_tick: u64) -> Checkpoint {
        let saved = checkpoint::capture(&self.world, next_tick, checkpoint::Memories::ById);
        self.saved();
        saved
    }

    /// What changed since `base`, the state saved last (by [`Sim::save_whole`] or this),
    /// as a store saves it: `write` gets the delta and returns what is kept of it (its
    /// encoding), then `base` is brought up to date by it, so it stays the state saved
    /// last, as a store's whole checkpoint holds it (each NPC's `learned`: what the delta
    /// added to its `KnownBy`). The delta's parts are moved into `base`, not copied: what
    /// it holds of each changed NPC is needed twice, written and kept, and no more. A
    /// delta that does not fit `base` (a `base` that is not the last save) is refused.
    pub fn save_delta<W>(
        &mut self,
        next_tick: u64,
        base: &mut Checkpoint,
        write: impl FnOnce(&CheckpointDelta) -> W,
    ) -> Result<W, CheckpointError> {
        let delta = checkpoint::capture_delta(&self.world, next_tick, base);
        let written = write(&delta);
        base.learned_by_delta(delta)?;
        self.saved();
        Ok(written)
    }

    /// After a save: the world's changes are counted afresh from here.
    fn saved(&mut self) {
        self.world.clear_trackers();
        self.world
            .resource_mut::<crate::resources::KnownByAdded>()
            .0
            .clear();
    }

    /// Who knows each tracked fact.
    pub fn facts(&self) -> &FactBook {
        self.world.resource::<FactBook>()
    }

    /// NPC names, by id.
    pub fn names(&self) -> &[crate::observation::Name] {
        &self.world.resource::<Roster>().names
    }
}
