//! Stable identities. Sorting, persistence and tapes use these, never `Entity` bits.

use bevy_ecs::component::Component;
use serde::{Deserialize, Serialize};

/// An NPC's identity: its index in the scenario's `[[npcs]]` list, dense from 0.
#[derive(
    Component, Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct NpcId(pub u32);

impl NpcId {
    /// The id as an index into per-NPC tables.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A memory's identity: assigned by the simulation in creation order, dense from 1, so the
/// same run gives the same ids on every backend.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MemoryId(pub u64);
