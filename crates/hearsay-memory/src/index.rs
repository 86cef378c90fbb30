//! The in-memory recall index: every memory's metadata and, once embedded, its vector,
//! kept per NPC in one contiguous `f32` slab for exact cosine search.

#[cfg(test)]
use hearsay_core::MemoryKind;
use hearsay_core::{MemoryId, MemoryRecord, NpcId};

use crate::embed::{VECTOR_DIMS, dot};
use crate::scoring::{Candidate, Scoring, nearer, rank, similarity_key, top_n};
use crate::store::RecalledMemory;

/// What the index knows of a memory besides its vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryMeta {
    /// The memory as written.
    pub memory: MemoryRecord,
    /// Tick last recalled (creation tick until first recalled).
    pub last_recalled: u64,
    /// Whether a vector is indexed.
    pub embedded: bool,
}

/// A run's memory metadata by id (ids are dense from 1): what recall needs besides
/// vectors, kept in memory by every store so ranking never waits on a join.
#[derive(Clone, Debug, Default)]
pub struct MetaTable {
    rows: Vec<Option<MemoryMeta>>,
}

impl MetaTable {
    /// Registers a memory, not yet embedded.
    pub fn add(&mut self, m: &MemoryRecord) {
        self.insert(MemoryMeta {
            memory: m.clone(),
            last_recalled: m.tick,
            embedded: false,
        });
    }

    /// Registers a memory with everything known about it (loading a run).
    pub fn insert(&mut self, meta: MemoryMeta) {
        let idx = meta.memory.id.0 as usize;
        if self.rows.len() <= idx {
            self.rows.resize(idx + 1, None);
        }
        self.rows[idx] = Some(meta);
    }

    /// The metadata of `id`, if known.
    pub fn get(&self, id: MemoryId) -> Option<&MemoryMeta> {
        self.rows.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// Mutable metadata of `id`, if known.
    pub fn get_mut(&mut self, id: MemoryId) -> Option<&mut MemoryMeta> {
        self.rows.get_mut(id.0 as usize).and_then(Option::as_mut)
    }

    /// Sets the last-recalled tick of `id` (never backwards).
    pub fn touch(&mut self, id: MemoryId, tick: u64) {
        if let Some(meta) = self.get_mut(id) {
            meta.last_recalled = meta.last_recalled.max(tick);
        }
    }

    /// A recall candidate for `id` with cosine `similarity`, if `id` is known.
    pub fn candidate(&self, id: MemoryId, similarity: f32) -> Option<Candidate> {
        let meta = self.get(id)?;
        Some(Candidate {
            memory: meta.memory.clone(),
            similarity,
            last_recalled: meta.last_recalled,
        })
    }
}

#[derive(Clone, Debug, Default)]
struct Slab {
    ids: Vec<MemoryId>,
    vectors: Vec<f32>,
}

/// Exact cosine search over each NPC's embedded memories.
#[derive(Clone, Debug, Default)]
pub struct VectorIndex {
    meta: MetaTable,
    slabs: Vec<Slab>,
}

impl VectorIndex {
    /// Registers a memory (not yet recallable: it has no vector).
    pub fn add_meta(&mut self, m: &MemoryRecord) {
        self.meta.add(m);
    }

    /// The metadata of `id`, if known.
    pub fn meta(&self, id: MemoryId) -> Option<&MemoryMeta> {
        self.meta.get(id)
    }

    /// Makes `id` recallable with `vector` (of [`VECTOR_DIMS`]). Returns false, changing
    /// nothing, if the memory is unknown, already embedded, or the vector has the wrong size.
    pub fn add_vector(&mut self, id: MemoryId, vector: &[f32]) -> bool {
        if vector.len() != VECTOR_DIMS {
            return false;
        }
        let Some(meta) = self.meta.get_mut(id) else {
            return false;
        };
        if meta.embedded {
            return false;
        }
        meta.embedded = true;
        let npc = meta.memory.npc.index();
        if self.slabs.len() <= npc {
            self.slabs.resize_with(npc + 1, Slab::default);
        }
        let slab = &mut self.slabs[npc];
        slab.ids.push(id);
        slab.vectors.extend_from_slice(vector);
        true
    }

    /// Sets the last-recalled tick of `id`.
    pub fn touch(&mut self, id: MemoryId, tick: u64) {
        self.meta.touch(id, tick);
    }

    /// Recall for `npc`: the `scoring.candidates` embedded memories nearest to `query` by
    /// cosine (exact: every one of the NPC's vectors is compared), then [`rank`]ed.
    pub fn search(
        &self,
        npc: NpcId,
        query: &[f32],
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> Vec<RecalledMemory> {
        let Some(slab) = self.slabs.get(npc.index()) else {
            return Vec::new();
        };
        if k == 0 || query.len() != VECTOR_DIMS {
            return Vec::new();
        }
        let shortlist = top_n(
            slab.ids.iter().enumerate().map(|(i, &id)| {
                let cos = dot(query, &slab.vectors[i * VECTOR_DIMS..(i + 1) * VECTOR_DIMS]);
                (similarity_key(cos), id)
            }),
            scoring.candidates.max(k),
            |a, b| nearer(a.0, a.1.0, b.0, b.1.0),
        );
        let candidates = shortlist
            .into_iter()
            .filter_map(|(similarity, id)| self.meta.candidate(id, similarity))
            .collect();
        rank(candidates, tick, k, scoring)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(id: u64, npc: u32) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(id),
            npc: NpcId(npc),
            kind: MemoryKind::Observation,
            content: format!("memory {id}"),
            importance: 4,
            tick: id,
            source: None,
            core: false,
        }
    }

    fn unit(i: usize) -> Vec<f32> {
        let mut v = vec![0.0; VECTOR_DIMS];
        v[i] = 1.0;
        v
    }

    #[test]
    fn search_is_exact_per_npc_with_ties_by_id() {
        let mut index = VectorIndex::default();
        for id in 1..=6 {
            index.add_meta(&mem(id, (id % 2) as u32));
        }
        // NPC 0 has ids 2, 4, 6; NPC 1 has 1, 3, 5.
        assert!(index.add_vector(MemoryId(2), &unit(0)));
        assert!(index.add_vector(MemoryId(4), &unit(1)));
        assert!(index.add_vector(MemoryId(6), &unit(1)));
        assert!(index.add_vector(MemoryId(1), &unit(1)));
        assert!(!index.add_vector(MemoryId(1), &unit(1)), "embedded once");
        assert!(!index.add_vector(MemoryId(99), &unit(1)), "unknown id");
        assert!(!index.add_vector(MemoryId(3), &[1.0]), "wrong dims");

        let ids = |r: Vec<RecalledMemory>| r.into_iter().map(|m| m.memory.id.0).collect::<Vec<_>>();
        let cos = Scoring::COSINE;
        assert_eq!(
            ids(index.search(NpcId(0), &unit(1), 9, 2, &cos)),
            vec![4, 6]
        );
        assert_eq!(
            ids(index.search(NpcId(0), &unit(1), 9, 5, &cos)),
            vec![4, 6, 2]
        );
        assert_eq!(ids(index.search(NpcId(0), &unit(0), 9, 1, &cos)), vec![2]);
        assert_eq!(
            ids(index.search(NpcId(1), &unit(0), 9, 5, &cos)),
            vec![1],
            "only embedded rows"
        );
        assert!(index.search(NpcId(7), &unit(0), 9, 5, &cos).is_empty());
        assert_eq!(
            ids(index.search(NpcId(0), &vec![0.0; VECTOR_DIMS], 9, 2, &cos)),
            vec![2, 4],
            "all ties: by id"
        );
    }

    #[test]
    fn recency_and_importance_rerank_and_recall_refreshes() {
        let mut index = VectorIndex::default();
        let mut old_gossip = mem(1, 0);
        old_gossip.importance = 8;
        old_gossip.tick = 0;
        let mut new_trivia = mem(2, 0);
        new_trivia.tick = 100;
        index.add_meta(&old_gossip);
        index.add_meta(&new_trivia);
        index.add_vector(MemoryId(1), &unit(3));
        index.add_vector(MemoryId(2), &unit(3));
        let s = Scoring::default();
        let top = |index: &VectorIndex, tick| {
            index.search(NpcId(0), &unit(0), tick, 1, &s)[0].memory.id.0
        };
        // 0.8 + 0.995^100 ≈ 1.406 beats 0.4 + 1.0.
        assert_eq!(top(&index, 100), 1);
        // Gossip unrecalled for 300 ticks (0.8 + 0.22) loses to trivia recalled just now (0.4 + 1.0).
        let mut index2 = index.clone();
        index2.touch(MemoryId(2), 300);
        assert_eq!(top(&index2, 300), 2);
        // Recalling the gossip refreshes it.
        index2.touch(MemoryId(1), 300);
        assert_eq!(top(&index2, 300), 1);
    }
}
