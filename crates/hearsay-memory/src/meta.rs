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

/// How far past twice the memories loaded so far an id may lie when a store rebuilds its
/// index ([`DenseIds`]): a page of the index's rows.
const ID_JUMP_MAX: u64 = 16_384;

/// The check both stores make as they load a run's memories, in id order, into the
/// index, which keeps a row for every id up to the highest: hearsay numbers a run's
/// memories 1, 2, 3, …, so an id far past the memories loaded before it (a file or a
/// database not written by hearsay) is refused before the index grows to it.
#[derive(Debug, Default)]
pub(crate) struct DenseIds {
    loaded: u64,
}

impl DenseIds {
    /// Admits the next memory's id, or refuses it.
    pub(crate) fn admit(&mut self, id: MemoryId) -> Result<(), crate::store::StoreError> {
        let loaded = self.loaded;
        if id.0 > ID_JUMP_MAX.saturating_add(loaded.saturating_mul(2)) {
            return Err(crate::store::StoreError::Corrupt(format!(
                "memory {} comes after {loaded} memories: hearsay numbers a run's memories \
                 1, 2, 3, …; this store was not written by hearsay",
                id.0
            )));
        }
        self.loaded += 1;
        Ok(())
    }
}

#[cfg(test)]
mod dense_tests {
    use super::*;

    #[test]
    fn ids_as_hearsay_numbers_them_are_admitted_and_a_far_jump_refused() {
        let mut dense = DenseIds::default();
        for id in 1..=100_000 {
            dense.admit(MemoryId(id)).expect("dense");
        }
        // Gaps are tolerated up to twice the memories loaded and a page.
        dense
            .admit(MemoryId(200_000 + ID_JUMP_MAX))
            .expect("within");
        let e = dense.admit(MemoryId(400_000_000)).expect_err("far");
        assert!(
            e.to_string()
                .contains("memory 400000000 comes after 100001"),
            "{e}"
        );
        assert!(
            DenseIds::default()
                .admit(MemoryId(ID_JUMP_MAX + 1))
                .is_err()
        );
    }
}
