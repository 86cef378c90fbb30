//! What every store knows of a memory besides its vectors: the record, its recall
//! history, whether it was forgotten, whether it is embedded. Kept in memory by both
//! stores ([`crate::index::MetaTable`]) and read back by `hearsay inspect`.

use hearsay_core::{MemoryId, MemoryRecord, NpcId};

use crate::forget::Forgetting;

/// What the index knows of a memory besides its vector.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryMeta {
    /// The memory as written.
    pub memory: MemoryRecord,
    /// Tick last recalled (creation tick until first recalled).
    pub last_recalled: u64,
    /// Ticks in which it was recalled.
    pub recalls: u32,
    /// The tick it was archived (forgotten) at, if it was.
    pub forgotten: Option<u64>,
    /// Whether a vector is indexed.
    pub embedded: bool,
}

impl MemoryMeta {
    /// A memory just written: never recalled, not forgotten, not embedded.
    pub fn new(m: &MemoryRecord) -> Self {
        Self {
            memory: m.clone(),
            last_recalled: m.tick,
            recalls: 0,
            forgotten: None,
            embedded: false,
        }
    }

    /// Its retention at `tick` under `policy` (1 for memories that never fade).
    pub fn retention(&self, policy: &Forgetting, tick: u64) -> f64 {
        if self.memory.core || !policy.enabled() {
            return 1.0;
        }
        policy.retention(
            self.memory.importance,
            self.recalls,
            tick.saturating_sub(self.last_recalled),
        )
    }
}

/// A memory archived by [`crate::index::MetaTable::forget_due`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Forgotten {
    /// The archived memory's id; it stays stored but is never recalled again.
    pub id: MemoryId,
    /// The NPC that owned it, for its `forgot` line.
    pub npc: NpcId,
}
