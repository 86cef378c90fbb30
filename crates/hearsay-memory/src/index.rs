//! The in-memory recall index: every memory's metadata and forgetting schedule and, once
//! embedded, its chunks' vectors, kept per NPC in one contiguous `f32` slab for exact
//! cosine search.

#[cfg(test)]
use hearsay_core::MemoryKind;
use std::collections::{BTreeMap, BTreeSet};

use hearsay_core::{MemoryId, MemoryRecord, NpcId};

use crate::embed::{Embedding, VECTOR_DIMS, dot, dot_sparse, sparse_lanes_sum};
use crate::forget::{FadeAges, Forgetting};
pub use crate::meta::{Forgotten, MemoryMeta};
use crate::scoring::{
    Candidate, RecalledMemory, Scoring, nearer, nearest_n, rank_refs, similarity_key, top_n,
};

/// A run's memory metadata by id (ids are dense from 1): what recall needs besides
/// vectors, kept in memory by every store so ranking never waits on a join — and the
/// forgetting schedule: every live memory by the tick its retention falls below the
/// threshold, so a tick's archiving pops what is due instead of scanning everything.
#[derive(Clone, Debug, Default)]
pub struct MetaTable {
    rows: Rows,
    /// The forgetting policy (none until set) and its fading ages, kept as computed.
    fades: FadeAges,
    schedule: Schedule,
    /// Every memory without a vector, archived or not: what a store whose one worker
    /// embeds its rows (SQLite's) claims from, without asking its database.
    unembedded: BTreeSet<MemoryId>,
}

/// The forgetting schedule: memory ids by the tick they fade at, in buckets, a memory's
/// move to a later tick (every recall moves one) an entry pushed onto a bucket and
/// nothing else. Its old entry stays where it was, stale: a bucket's entries are
/// checked against the memory's metadata when their tick comes ([`MetaTable::forget_due`]),
/// and a stale one is dropped then. A set of (tick, id) pairs, kept exact, paid for each
/// recall with a removal and an insertion among every live memory's pairs (a dozen
/// cache misses each): at 10,000 NPCs, 50,000 recalls a tick, most of the tick thread's
/// time in persist. Stale entries are bounded: past twice the live ones, the buckets
/// are rebuilt from the metadata.
#[derive(Clone, Debug, Default)]
struct Schedule {
    buckets: BTreeMap<u64, Vec<MemoryId>>,
    /// Entries in the buckets, stale ones included.
    entries: usize,
    /// Memories scheduled (an upper bound between rebuilds: a memory archived or
    /// replaced is taken off when it is noticed).
    live: usize,
}

/// Stale entries a schedule holds before a rebuild is considered at all.
const SCHEDULE_SLACK: usize = 1 << 16;

impl Schedule {
    fn insert(&mut self, at: u64, id: MemoryId) {
        self.buckets.entry(at).or_default().push(id);
        self.entries += 1;
        self.live += 1;
    }

    /// A scheduled memory no longer fades where its entry says (recalled, archived or
    /// replaced): the entry stays, stale, and the memory no longer counts as live.
    fn remove(&mut self) {
        self.live = self.live.saturating_sub(1);
    }

    fn clear(&mut self) {
        *self = Self::default();
    }

    /// Whether stale entries outnumber live ones enough to rebuild.
    fn bloated(&self) -> bool {
        self.entries > 2 * self.live + SCHEDULE_SLACK
    }

    /// The buckets of every tick up to `tick`, taken out.
    fn due(&mut self, tick: u64) -> Vec<(u64, Vec<MemoryId>)> {
        let later = match tick.checked_add(1) {
            Some(next) => self.buckets.split_off(&next),
            None => BTreeMap::new(),
        };
        let due: Vec<_> = std::mem::replace(&mut self.buckets, later)
            .into_iter()
            .collect();
        self.entries -= due.iter().map(|(_, ids)| ids.len()).sum::<usize>();
        due
    }
}

/// Metadata rows by id, in pages of [`PAGE`] rows: the table grows without moving the
/// rows already in it. (A single vector doubled as it grew: at 10,000 NPCs × 200 ticks,
/// 2.2 million rows of some 150 bytes, each doubling copied them all on the tick thread.)
#[derive(Clone, Debug, Default)]
struct Rows {
    pages: Vec<Box<[Row]>>,
}

/// One row, on two whole cache lines: a row of 104 bytes packed after another began
/// anywhere in a line and lay on two or three, and a hint could name only the line of its
/// first byte and the line of the next row's (in five rows of eight a memory's
/// importance, which every recall candidate is ranked by, lay on neither, and ranking
/// waited for it). Aligned, its two lines are the one it starts on and the one `second`
/// marks, both hinted ([`Rows::prefetch`]); the table is a quarter larger.
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
struct Row {
    meta: Option<MemoryMeta>,
    /// No bytes: where the row's second line is (just past `meta`, inside the row).
    second: [u8; 0],
}

const _: () = assert!(
    std::mem::size_of::<Row>() == 128 && std::mem::offset_of!(Row, second) >= 64,
    "a row is two cache lines, `second` in the second"
);

/// Rows per page of [`Rows`].
const PAGE: usize = 1 << 14;

impl Rows {
    fn get(&self, id: MemoryId) -> Option<&MemoryMeta> {
        let i = usize::try_from(id.0).ok()?;
        self.pages.get(i / PAGE)?[i % PAGE].meta.as_ref()
    }

    /// Asks the CPU to start loading `id`'s row into cache, and returns at once: a hint
    /// that reads nothing and changes nothing (an unknown id, or one past a page's end,
    /// is hinted at harmlessly or not at all).
    ///
    /// Why: the rows a tick touches, or one NPC's candidates, lie scattered over a table
    /// of millions, so each is a cache miss; asked for ahead, the misses overlap instead
    /// of following one another. Both of the row's lines are hinted ([`Row`]).
    fn prefetch(&self, id: MemoryId) {
        let Ok(i) = usize::try_from(id.0) else {
            return;
        };
        if let Some(row) = self.pages.get(i / PAGE).and_then(|page| page.get(i % PAGE)) {
            prefetch_index::prefetch_index(std::slice::from_ref(row), 0);
            prefetch_index::prefetch_index(std::slice::from_ref(&row.second), 0);
        }
    }

    fn get_mut(&mut self, id: MemoryId) -> Option<&mut MemoryMeta> {
        let i = usize::try_from(id.0).ok()?;
        self.pages.get_mut(i / PAGE)?[i % PAGE].meta.as_mut()
    }

    /// `id`'s slot, adding pages up to it (ids are dense: a page is filled before the
    /// next is needed).
    fn slot(&mut self, id: MemoryId) -> &mut Option<MemoryMeta> {
        let i = usize::try_from(id.0).unwrap_or(usize::MAX);
        while self.pages.len() <= i / PAGE {
            self.pages.push((0..PAGE).map(|_| Row::default()).collect());
        }
        &mut self.pages[i / PAGE][i % PAGE].meta
    }

    fn iter(&self) -> impl Iterator<Item = &MemoryMeta> {
        self.pages
            .iter()
            .flat_map(|p| p.iter().filter_map(|row| row.meta.as_ref()))
    }
}

impl MetaTable {
    /// Registers a memory just written.
    pub fn add(&mut self, m: &MemoryRecord) {
        self.insert(MemoryMeta::new(m));
    }

    /// Registers a memory with everything known about it (loading a run).
    pub fn insert(&mut self, meta: MemoryMeta) {
        let id = meta.memory.id;
        if let Some(old) = self.rows.slot(id).take() {
            self.unschedule(&old);
        }
        self.schedule(&meta);
        if meta.embedded {
            self.unembedded.remove(&id);
        } else {
            self.unembedded.insert(id);
        }
        *self.rows.slot(id) = Some(meta);
    }

    /// Up to `limit` memories without a vector, lowest id first, among ids up to
    /// `through`.
    pub fn unembedded(&self, through: MemoryId, limit: usize) -> Vec<&MemoryMeta> {
        self.unembedded
            .range(..=through)
            .take(limit)
            .filter_map(|&id| self.get(id))
            .collect()
    }

    /// The lowest id of a memory without a vector.
    pub fn lowest_unembedded(&self) -> Option<MemoryId> {
        self.unembedded.first().copied()
    }

    /// The tick `meta` fades at under the policy, if it ever does.
    fn fades_at(fades: &mut FadeAges, meta: &MemoryMeta) -> Option<u64> {
        if meta.forgotten.is_some() {
            return None;
        }
        fades.fades_at(
            meta.memory.importance,
            meta.recalls,
            meta.memory.core,
            meta.last_recalled,
        )
    }

    fn schedule(&mut self, meta: &MemoryMeta) {
        if let Some(at) = Self::fades_at(&mut self.fades, meta) {
            self.schedule.insert(at, meta.memory.id);
        }
    }

    fn unschedule(&mut self, meta: &MemoryMeta) {
        if Self::fades_at(&mut self.fades, meta).is_some() {
            self.schedule.remove();
        }
    }

    /// Sets how memories fade, and schedules every live memory accordingly.
    pub fn set_forgetting(&mut self, policy: Forgetting) {
        self.fades = FadeAges::new(policy);
        self.reschedule();
    }

    /// Schedules every live memory afresh, no stale entries left.
    fn reschedule(&mut self) {
        self.schedule.clear();
        let fades = &mut self.fades;
        for m in self.rows.iter() {
            if let Some(at) = Self::fades_at(fades, m) {
                self.schedule.insert(at, m.memory.id);
            }
        }
    }

    /// How memories fade (never, until set).
    pub fn forgetting(&self) -> Forgetting {
        self.fades.policy().unwrap_or(Forgetting::OFF)
    }

    /// The metadata of `id`, if known.
    pub fn get(&self, id: MemoryId) -> Option<&MemoryMeta> {
        self.rows.get(id)
    }

    /// Marks `id` embedded; returns its metadata if that changed anything.
    pub fn mark_embedded(&mut self, id: MemoryId) -> Option<&MemoryMeta> {
        let meta = self.rows.get_mut(id)?;
        if meta.embedded {
            return None;
        }
        meta.embedded = true;
        self.unembedded.remove(&id);
        Some(meta)
    }

    /// [`MetaTable::touch`] of each of `ids`, in their order, with each row asked for a
    /// dozen rows ahead of its turn.
    ///
    /// Why: a tick of the 10,000-NPC town touches some 50,000 rows on the tick thread, one
    /// cache miss each, and a touch waits for its row before the next is asked for; with
    /// the rows asked for ahead, the table's part of the Persist phase fell by a third
    /// (`docs/BENCHMARKS.md`, twenty-fourth round). What is touched, and in which order, is
    /// the same.
    pub fn touch_all(&mut self, ids: &[MemoryId], tick: u64) {
        /// Enough touches ahead for a row to arrive before its turn; a few dozen more
        /// would be hints for rows the cache has dropped again by then.
        const AHEAD: usize = 12;
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&next) = ids.get(i + AHEAD) {
                self.rows.prefetch(next);
            }
            self.touch(id, tick);
        }
    }

    /// Records that `id` was recalled in `tick`: "last recalled" moves to `tick` (never
    /// backwards), the recall count grows (once per tick), and its fading starts over,
    /// slower. Archived memories cannot be recalled and are left alone.
    pub fn touch(&mut self, id: MemoryId, tick: u64) {
        let Some(meta) = self.rows.get_mut(id) else {
            return;
        };
        if meta.forgotten.is_some() || tick <= meta.last_recalled && meta.recalls > 0 {
            return;
        }
        // In place: a tick touches every memory recalled in it, so no copy of the record
        // and no change to the unembedded set, only the schedule's entry moves.
        let before = Self::fades_at(&mut self.fades, meta);
        meta.last_recalled = meta.last_recalled.max(tick);
        meta.recalls += 1;
        let after = Self::fades_at(&mut self.fades, meta);
        if before != after {
            if before.is_some() {
                self.schedule.remove();
            }
            if let Some(at) = after {
                self.schedule.insert(at, id);
            }
            if self.schedule.bloated() {
                self.reschedule();
            }
        }
    }

    /// Archives every live memory whose retention is below the threshold at `tick`:
    /// they stop being recallable now. Returns them in id order.
    pub fn forget_due(&mut self, tick: u64) -> Vec<Forgotten> {
        let mut due = Vec::new();
        for (at, ids) in self.schedule.due(tick) {
            for id in ids {
                let Some(meta) = self.rows.get_mut(id) else {
                    continue;
                };
                // An entry counts only while the memory still fades at its tick: one
                // recalled since, archived (by an earlier entry too) or replaced has
                // moved on.
                if Self::fades_at(&mut self.fades, meta) != Some(at) {
                    continue;
                }
                meta.forgotten = Some(tick);
                self.schedule.remove();
                due.push(Forgotten {
                    id,
                    npc: meta.memory.npc,
                });
            }
        }
        due.sort_unstable();
        due
    }

    /// Memories archived so far.
    pub fn archived(&self) -> usize {
        self.rows.iter().filter(|m| m.forgotten.is_some()).count()
    }

    /// A recall candidate for `id` with cosine `similarity`, if `id` is known and live.
    pub fn candidate(&self, id: MemoryId, similarity: f32) -> Option<Candidate> {
        let meta = self.get(id)?;
        if meta.forgotten.is_some() {
            return None;
        }
        Some(Candidate {
            memory: meta.memory.clone(),
            similarity,
            last_recalled: meta.last_recalled,
        })
    }
}

/// Each memory's similarity: its best chunk's cosine, floored by [`similarity_key`].
pub fn best_chunk_similarities(
    rows: impl IntoIterator<Item = (MemoryId, f32)>,
) -> BTreeMap<MemoryId, f32> {
    let mut best: BTreeMap<MemoryId, f32> = BTreeMap::new();
    for (id, sim) in rows {
        let sim = similarity_key(sim);
        best.entry(id)
            .and_modify(|b| {
                if sim.total_cmp(b).is_gt() {
                    *b = sim;
                }
            })
            .or_insert(sim);
    }
    best
}

/// The cosine shortlist over rows of (memory, chunk vector): each memory scores its best
/// chunk, then the `n` nearest memories are kept, ties by id.
pub fn shortlist_by_best_chunk(
    rows: impl IntoIterator<Item = (MemoryId, f32)>,
    n: usize,
) -> Vec<(f32, MemoryId)> {
    top_n(
        best_chunk_similarities(rows)
            .into_iter()
            .map(|(id, s)| (s, id)),
        n,
        |a, b| nearer(a.0, a.1.0, b.0, b.1.0),
    )
}

/// A search's buffers, one set per thread, reused from one search to the next.
struct Scratch {
    /// Each postings row's eight partial sums (see [`Postings`]).
    lanes: Vec<[f32; 8]>,
    /// The postings' dimensions the query reaches: their number there, and the query's
    /// value in them.
    hits: Vec<(u32, f32)>,
    /// Each postings row's cosine.
    indexed: Vec<f32>,
    /// Every live row's (similarity, id), cut to the shortlist.
    keyed: Vec<(f32, MemoryId)>,
    /// The same as one integer each (see [`nearest_rows`]).
    packed: Vec<u64>,
}

/// `x`'s place in recall's order as an integer: ascending integers are descending
/// [`f32::total_cmp`], the order [`nearest_n`] sorts similarities in.
fn nearest_first(x: f32) -> u32 {
    let bits = x.to_bits();
    // `total_cmp`'s order as unsigned integers: negatives (sign set) reversed below the
    // positives.
    let ascending = if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits | 0x8000_0000
    };
    !ascending
}

/// The `n` nearest live rows of a slab whose sparse rows are in id order, nearest first:
/// [`nearest_n`]'s answer over every live row's (similarity, id). Each row is one `u64`,
/// its place in similarity order above its row number, so the selection compares integers
/// eight bytes wide instead of (`f32`, id) pairs of sixteen through `total_cmp`; in id
/// order, a lower row number is a lower id, the tie-break `nearest_n` uses. Only the `n`
/// kept are turned back into (similarity, id). `scores` are the distinct vectors'
/// cosines; `ids.len()` must fit in 32 bits.
fn nearest_rows(
    ids: &[MemoryId],
    of: &[u32],
    scores: &[f32],
    packed: &mut Vec<u64>,
    n: usize,
) -> Vec<(f32, MemoryId)> {
    packed.clear();
    if n == 0 {
        return Vec::new();
    }
    packed.reserve(ids.len());
    for (row, (&id, &v)) in ids.iter().zip(of).enumerate() {
        if id != TOMBSTONE {
            let place = nearest_first(similarity_key(scores[v as usize]));
            packed.push(u64::from(place) << 32 | row as u64);
        }
    }
    if packed.len() > n {
        packed.select_nth_unstable(n - 1);
        packed.truncate(n);
    }
    packed.sort_unstable();
    packed
        .iter()
        .map(|&p| {
            let row = (p & 0xFFFF_FFFF) as usize;
            (similarity_key(scores[of[row] as usize]), ids[row])
        })
        .collect()
}

/// Marks the rows of an archived memory until the slab is compacted (real ids start at 1).
const TOMBSTONE: MemoryId = MemoryId(0);

/// Tombstones the rows of `rows` whose id is in `ids` (ascending); returns how many.
///
/// Rows in id order (`ordered`; tombstones anywhere among them) are found by a binary
/// search per id: a tick archives a memory or two of each NPC, where every row of the NPC
/// was looked at before — in the 1,000-NPC town at tick 1,000, 1.6 ms of the tick thread
/// per tick, growing with the run as the NPCs' memories did. (Looking only between the
/// ids' ends saved little: what fades together spans most of an NPC's memories, moves
/// fading sooner than what was said.) Rows in any other order are all looked at, each
/// against the ids' ends first.
fn tombstone(rows: &mut [MemoryId], ordered: bool, ids: &[MemoryId]) -> usize {
    let mut dead = 0;
    if ordered {
        let mut at = 0;
        for &id in ids {
            at += first_live_at_or_above(&rows[at..], id);
            // The memory's rows (its chunks, adjacent) from there, past tombstones.
            while let Some(row) = rows.get_mut(at).filter(|r| **r == id || **r == TOMBSTONE) {
                if *row == id {
                    *row = TOMBSTONE;
                    dead += 1;
                }
                at += 1;
            }
        }
        return dead;
    }
    let (Some(&low), Some(&high)) = (ids.first(), ids.last()) else {
        return 0;
    };
    for row in rows.iter_mut() {
        if *row >= low && *row <= high && ids.binary_search(row).is_ok() {
            *row = TOMBSTONE;
            dead += 1;
        }
    }
    dead
}

/// In `rows`, ascending but for [`TOMBSTONE`]s anywhere, a place before which every live
/// row is below `low` and from which the first live row (if any) is not: a binary search
/// that steps over tombstones to the next live row.
fn first_live_at_or_above(rows: &[MemoryId], low: MemoryId) -> usize {
    // Every live row in `..lo` is below `low`; every live row in `hi..` is not.
    let (mut lo, mut hi) = (0, rows.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match (mid..hi).find(|&j| rows[j] != TOMBSTONE) {
            Some(j) if rows[j] < low => lo = j + 1,
            // The first live row from `mid` is not below `low`, or there is none before
            // `hi`: either way no live row in `mid..` is.
            _ => hi = mid,
        }
    }
    lo
}

#[derive(Clone, Debug, Default)]
struct Slab {
    /// One entry per dense chunk vector; a memory's chunks are adjacent. Archived rows
    /// hold [`TOMBSTONE`] until there are enough of them to compact.
    ids: Vec<MemoryId>,
    vectors: Vec<f32>,
    /// One entry per sparse chunk vector (at most [`crate::embed::SPARSE_MAX`] non-zero
    /// entries, as the hashing embedder's are). Tombstones as for `ids`.
    sparse_ids: Vec<MemoryId>,
    /// Each sparse row's vector: its number among the distinct vectors below.
    sparse_of: Vec<u32>,
    /// The NPC's distinct sparse vectors, each once however many of its memories have it:
    /// gossip repeats itself, and an NPC that hears the same sentence from the same
    /// neighbour, or says it again, remembers the same text (in the 10,000-NPC town
    /// after 120 ticks, fewer than half as many distinct vectors as rows). Vector
    /// `v` is `sparse_idx`/`sparse_val` over `sparse_ends[v - 1]..sparse_ends[v]`; a
    /// search scores each once.
    sparse_ends: Vec<u32>,
    sparse_idx: Vec<u16>,
    sparse_val: Vec<f32>,
    /// The distinct vectors `0..postings.rows`, by dimension. The newest ones, not in
    /// the postings yet, a search reads one by one until there are enough of them to
    /// merge.
    postings: Postings,
    /// Distinct vectors by a hash of their entries: where a new row looks for its
    /// vector (and compares the entries, so a hash that two vectors share only costs
    /// the second one its sharing). Looked up, never iterated.
    by_hash: std::collections::HashMap<u64, u32, std::hash::BuildHasherDefault<Unhashed>>,
    /// Tombstoned rows, dense and sparse.
    dead: usize,
    /// The largest id pushed as a sparse row, and whether a row was ever pushed below
    /// it. While none was, the sparse rows' order is their ids' order (tombstones and
    /// compaction keep it), so a search can break ties by row number ([`nearest_rows`]).
    sparse_max: u64,
    sparse_unordered: bool,
    /// The same for the dense rows: while none was pushed below the largest id, they are
    /// in id order, and archiving looks at the few rows around the ids it archives.
    dense_max: u64,
    dense_unordered: bool,
    /// Whether some memory has more than one chunk.
    chunked: bool,
}

/// A hasher for keys that are hashes already (`Slab::by_hash`'s, SQLite's blob digests):
/// the key is its own hash.
#[derive(Default)]
pub(crate) struct Unhashed(u64);

impl std::hash::Hasher for Unhashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else is folded in, never lost.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }

    /// A 128-bit key's halves folded together (each half of a good hash is one).
    fn write_u128(&mut self, key: u128) {
        self.0 = (key as u64) ^ ((key >> 64) as u64);
    }
}

/// Sparse rows by dimension (an inverted index): for each dimension some row has a
/// non-zero in, those rows ascending and their values. A query is non-zero in a few dozen
/// of the 1536 dimensions (the hashing embedder's recall query names who and what the
/// NPC sees); a search visits only the rows' entries in those, where scanning the rows
/// reads every entry of every row.
///
/// Exact, with [`dot_sparse`]'s bits: a search walks the dimensions in ascending order
/// and adds each product into its row's lane `d % 8`, so every lane receives the row's
/// products in index order, as `dot_sparse` adds them, and ends with the same
/// [`sparse_lanes_sum`]. The products `dot_sparse` adds and a search skips are those with
/// a zero of the query, ±0.0; a lane starts at +0.0 and never holds -0.0 (IEEE addition
/// gives +0.0 for exact cancellation and for +0.0 + -0.0), so adding ±0.0 changes no
/// lane. A row no query dimension reaches scores +0.0 either way.
#[derive(Clone, Debug, Default)]
struct Postings {
    /// Sparse rows `0..rows` are in it.
    rows: usize,
    /// The dimensions present, ascending; dimension `dims[j]`'s entries are
    /// `row`/`val` over `starts[j]..starts[j + 1]`.
    dims: Vec<u16>,
    starts: Vec<u32>,
    row: Vec<u32>,
    val: Vec<f32>,
}

/// A slab merges its newest sparse rows into the postings when there are this many of
/// them, or a quarter as many as the postings hold: few enough that reading them one by
/// one costs little, and a merge (a pass over every entry) comes once per quarter of
/// growth.
const POSTINGS_LAG_MIN: usize = 32;

impl Postings {
    /// These postings with the rows `ends`/`idx`/`val` describe (as [`Slab`] keeps its
    /// newest) after them: a counting sort by dimension; within a dimension the entries
    /// already here come first, so rows stay ascending.
    fn merged(&self, ends: &[u32], idx: &[u16], val: &[f32]) -> Postings {
        // `ends` are offsets in the slab's arrays, of which `idx`/`val` are the tail.
        let base = ends.last().map_or(0, |&last| last as usize - idx.len());
        let mut count = vec![0u32; VECTOR_DIMS];
        for (j, &d) in self.dims.iter().enumerate() {
            count[usize::from(d)] = self.starts[j + 1] - self.starts[j];
        }
        for &d in idx {
            count[usize::from(d)] += 1;
        }
        let mut dims = Vec::new();
        let mut starts = vec![0u32];
        // Where each dimension's next entry goes.
        let mut next = vec![0u32; VECTOR_DIMS];
        for (d, &n) in count.iter().enumerate() {
            if n > 0 {
                dims.push(d as u16);
                let start = *starts.last().unwrap_or(&0);
                next[d] = start;
                starts.push(start + n);
            }
        }
        let total = self.row.len() + idx.len();
        let mut rows = vec![0u32; total];
        let mut vals = vec![0f32; total];
        for (j, &d) in self.dims.iter().enumerate() {
            let (from, to) = (self.starts[j] as usize, self.starts[j + 1] as usize);
            let at = next[usize::from(d)] as usize;
            rows[at..at + (to - from)].copy_from_slice(&self.row[from..to]);
            vals[at..at + (to - from)].copy_from_slice(&self.val[from..to]);
            next[usize::from(d)] += (to - from) as u32;
        }
        let mut start = 0usize;
        for (j, &end) in ends.iter().enumerate() {
            let end = end as usize - base;
            let r = (self.rows + j) as u32;
            for (&d, &v) in idx[start..end].iter().zip(&val[start..end]) {
                let at = &mut next[usize::from(d)];
                rows[*at as usize] = r;
                vals[*at as usize] = v;
                *at += 1;
            }
            start = end;
        }
        Postings {
            rows: self.rows + ends.len(),
            dims,
            starts,
            row: rows,
            val: vals,
        }
    }

    /// These postings without the rows `renumber` maps to `None`, the others renumbered
    /// (in the same order, so rows stay ascending in each dimension).
    fn retained(&self, renumber: &[Option<u32>]) -> Postings {
        let mut kept = Postings {
            rows: renumber[..self.rows].iter().flatten().count(),
            starts: vec![0],
            ..Postings::default()
        };
        for (j, &d) in self.dims.iter().enumerate() {
            let (from, to) = (self.starts[j] as usize, self.starts[j + 1] as usize);
            for (&r, &v) in self.row[from..to].iter().zip(&self.val[from..to]) {
                if let Some(new) = renumber[r as usize] {
                    kept.row.push(new);
                    kept.val.push(v);
                }
            }
            if kept.row.len() > *kept.starts.last().unwrap_or(&0) as usize {
                kept.dims.push(d);
                kept.starts.push(kept.row.len() as u32);
            }
        }
        kept
    }

    /// Bytes held (and at most read by a search).
    fn bytes(&self) -> usize {
        self.dims.len() * 2 + self.starts.len() * 4 + self.row.len() * 8
    }

    /// Each row's [`dot_sparse`] with `query` (of [`VECTOR_DIMS`]), bit for bit, into
    /// `scores` (one per row in the postings). Returns the bytes of the postings it read:
    /// every dimension's number, and the starts and entries of those the query has.
    fn dot_all(
        &self,
        query: &[f32],
        lanes: &mut Vec<[f32; 8]>,
        scores: &mut Vec<f32>,
        hits: &mut Vec<(u32, f32)>,
    ) -> usize {
        lanes.clear();
        lanes.resize(self.rows, [0.0; 8]);
        let mut read = self.dims.len() * 2;
        // First the dimensions the query reaches, each one's entries asked for as it is
        // found, then the sums. A dimension's entries can lie anywhere in `row` and `val`,
        // so each run's first line is a cache miss: met in the sums' loop, the misses
        // followed one another; asked for while walking the dimensions, they overlap
        // (the same sums in the same order).
        hits.clear();
        for (j, &d) in self.dims.iter().enumerate() {
            let x = query[usize::from(d)];
            if x == 0.0 {
                continue;
            }
            let from = self.starts[j] as usize;
            prefetch_index::prefetch_index(&self.row, from);
            prefetch_index::prefetch_index(&self.val, from);
            hits.push((j as u32, x));
        }
        for &(j, x) in hits.iter() {
            let (j, d) = (j as usize, usize::from(self.dims[j as usize]));
            let lane = d % 8;
            let (from, to) = (self.starts[j] as usize, self.starts[j + 1] as usize);
            for (&r, &v) in self.row[from..to].iter().zip(&self.val[from..to]) {
                lanes[r as usize][lane] += x * v;
            }
            read += 8 + (to - from) * 8;
        }
        scores.clear();
        scores.extend(lanes.iter().map(sparse_lanes_sum));
        read
    }
}

/// The most lines [`Slab::prefetch_search`] hints in one of a slab's arrays (16 KiB, a
/// third of a core's first-level cache): a bound for NPCs of very many memories.
const HINTED_LINES_MAX: usize = 256;

impl Slab {
    fn len(&self) -> usize {
        self.ids.len() + self.sparse_ids.len()
    }

    /// Where distinct vector `v`'s entries start in `sparse_idx`/`sparse_val`.
    fn vector_start(&self, v: usize) -> usize {
        match v {
            0 => 0,
            v => self.sparse_ends[v - 1] as usize,
        }
    }

    /// Distinct vector `v`'s entries.
    fn vector(&self, v: usize) -> (&[u16], &[f32]) {
        let (start, end) = (self.vector_start(v), self.sparse_ends[v] as usize);
        (&self.sparse_idx[start..end], &self.sparse_val[start..end])
    }

    /// Bytes of the distinct vectors not in the postings yet (6 per entry), which a
    /// search reads one by one.
    fn lagging_bytes(&self) -> usize {
        (self.sparse_idx.len() - self.vector_start(self.postings.rows)) * 6
    }

    /// Bytes it holds: the vectors, the sparse vectors and their postings, ids, each
    /// row's vector, the vectors' ends and their hash table (its slots, each an entry
    /// and a control byte).
    fn held(&self) -> usize {
        self.vectors.len() * 4
            + self.sparse_idx.len() * 6
            + self.postings.bytes()
            + (self.ids.len() + self.sparse_ids.len()) * 8
            + self.sparse_of.len() * 4
            + self.sparse_ends.len() * 4
            + self.by_hash.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
    }

    /// Merges the newest distinct vectors into the postings once there are enough of
    /// them (32, or a quarter as many as the postings hold).
    fn index_rows(&mut self) {
        let rows = self.postings.rows;
        if self.sparse_ends.len() - rows >= POSTINGS_LAG_MIN.max(rows / 4) {
            let start = self.vector_start(rows);
            self.postings = self.postings.merged(
                &self.sparse_ends[rows..],
                &self.sparse_idx[start..],
                &self.sparse_val[start..],
            );
        }
    }

    /// The same rows with no vector in the postings: every one read one by one, as
    /// before the postings existed (what their search is compared with).
    #[cfg(test)]
    fn unindexed(&self) -> Slab {
        Slab {
            postings: Postings::default(),
            ..self.clone()
        }
    }

    /// The hash a vector's entries are found by in `by_hash`: one multiplication per
    /// entry and a final mix (the entries are compared anyway; this only has to spread
    /// them, cheaply, since the backfill inserts every row under the index's lock).
    fn hash_of(idx: &[u16], val: &[f32]) -> u64 {
        let mut h = idx.len() as u64;
        for (&i, &x) in idx.iter().zip(val) {
            let entry = u64::from(i) << 32 | u64::from(x.to_bits());
            h = (h ^ entry)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .rotate_left(29);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }

    /// Asks for the slab's own fields (a few cache lines: the arrays' lengths and where
    /// they are, the hash table's) to be loaded, and returns at once.
    fn prefetch_header(&self) {
        use prefetch_index::prefetch_index as hint;
        use std::slice::from_ref;
        hint(from_ref(&self.ids), 0);
        hint(from_ref(&self.sparse_ids), 0);
        hint(from_ref(&self.sparse_of), 0);
        hint(from_ref(&self.sparse_ends), 0);
        hint(from_ref(&self.sparse_idx), 0);
        hint(from_ref(&self.sparse_val), 0);
        hint(from_ref(&self.postings), 0);
        hint(from_ref(&self.by_hash), 0);
    }

    /// Asks for every line of what a search walks in order — the postings' dimensions
    /// and their starts, the newest distinct vectors (not in the postings yet, scored one
    /// by one), then the sparse rows' ids and vectors — to be loaded, and
    /// returns at once. Each array is its own allocation, cold in a town where every
    /// search reads another NPC's slab: walked as found, each line was a miss waited
    /// for in turn (in the 10,000-NPC town, a quarter of the search's own time was
    /// the shortlist's loop waiting on the rows' ids). At most [`HINTED_LINES_MAX`] lines
    /// of each: an NPC of tens of thousands of memories would otherwise hint more than
    /// the cache holds, the first lines gone before the walk reaches them (and past the
    /// first few kilobytes of one array, the processor's own prefetcher follows the walk).
    fn prefetch_search(&self) {
        fn every_line<T>(s: &[T]) {
            let step = (64 / std::mem::size_of::<T>()).max(1);
            for i in (0..s.len()).step_by(step).take(HINTED_LINES_MAX) {
                prefetch_index::prefetch_index(s, i);
            }
        }
        every_line(&self.postings.dims);
        every_line(&self.postings.starts);
        let lagging = self.vector_start(self.postings.rows);
        every_line(&self.sparse_ends[self.postings.rows..]);
        every_line(&self.sparse_idx[lagging..]);
        every_line(&self.sparse_val[lagging..]);
        every_line(&self.sparse_ids);
        every_line(&self.sparse_of);
    }

    /// Asks for the ends of the slab's arrays, where a new row and vector are written, to
    /// be loaded (its fields should be loaded already: [`Slab::prefetch_header`]).
    fn prefetch_ends(&self) {
        use prefetch_index::prefetch_index as hint;
        hint(&self.sparse_ids, self.sparse_ids.len());
        hint(&self.sparse_of, self.sparse_of.len());
        hint(&self.sparse_ends, self.sparse_ends.len());
        hint(&self.sparse_idx, self.sparse_idx.len());
        hint(&self.sparse_val, self.sparse_val.len());
    }

    /// Distinct vector `v` has exactly these entries (bit for bit: `-0.0` is not `0.0`).
    fn same_vector(&self, v: usize, idx: &[u16], val: &[f32]) -> bool {
        let (i, x) = self.vector(v);
        i == idx
            && x.len() == val.len()
            && x.iter().zip(val).all(|(a, b)| a.to_bits() == b.to_bits())
    }

    /// Appends a distinct vector and returns its number (not merged into the postings:
    /// the caller does that).
    fn add_vector(&mut self, hash: u64, idx: &[u16], val: &[f32]) -> u32 {
        let v = self.sparse_ends.len() as u32;
        self.sparse_idx.extend_from_slice(idx);
        self.sparse_val.extend_from_slice(val);
        self.sparse_ends.push(self.sparse_idx.len() as u32);
        self.by_hash.entry(hash).or_insert(v);
        v
    }

    fn push(&mut self, id: MemoryId, v: &Embedding) {
        match v {
            Embedding::Sparse { idx, val } => {
                let hash = Self::hash_of(idx, val);
                let known = self
                    .by_hash
                    .get(&hash)
                    .copied()
                    .filter(|&v| self.same_vector(v as usize, idx, val));
                let v = match known {
                    Some(v) => v,
                    None => {
                        let v = self.add_vector(hash, idx, val);
                        self.index_rows();
                        v
                    }
                };
                self.sparse_unordered |= id.0 < self.sparse_max;
                self.sparse_max = self.sparse_max.max(id.0);
                self.sparse_ids.push(id);
                self.sparse_of.push(v);
            }
            Embedding::Dense(v) => {
                self.dense_unordered |= id.0 < self.dense_max;
                self.dense_max = self.dense_max.max(id.0);
                self.ids.push(id);
                self.vectors.extend_from_slice(v);
            }
        }
    }

    /// Drops the tombstoned rows, keeping the order of the rest, and the sparse vectors
    /// no live row has any more.
    fn compact(&mut self) {
        let mut kept = 0;
        for i in 0..self.ids.len() {
            if self.ids[i] == TOMBSTONE {
                continue;
            }
            if kept != i {
                self.ids[kept] = self.ids[i];
                self.vectors
                    .copy_within(i * VECTOR_DIMS..(i + 1) * VECTOR_DIMS, kept * VECTOR_DIMS);
            }
            kept += 1;
        }
        self.ids.truncate(kept);
        self.vectors.truncate(kept * VECTOR_DIMS);
        // The distinct vectors a live row has, renumbered in their order: those in the
        // postings stay ahead of the newest.
        let mut live = vec![false; self.sparse_ends.len()];
        for (&id, &v) in self.sparse_ids.iter().zip(&self.sparse_of) {
            if id != TOMBSTONE {
                live[v as usize] = true;
            }
        }
        let mut next = 0u32;
        let renumber: Vec<Option<u32>> = live
            .iter()
            .map(|&l| {
                l.then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let postings = self.postings.retained(&renumber);
        let mut old = std::mem::take(self);
        let mut slab = Slab {
            ids: std::mem::take(&mut old.ids),
            vectors: std::mem::take(&mut old.vectors),
            postings,
            chunked: old.chunked,
            sparse_max: old.sparse_max,
            sparse_unordered: old.sparse_unordered,
            dense_max: old.dense_max,
            dense_unordered: old.dense_unordered,
            ..Slab::default()
        };
        for (v, &keep) in live.iter().enumerate() {
            if keep {
                let (idx, val) = old.vector(v);
                slab.add_vector(Self::hash_of(idx, val), idx, val);
            }
        }
        for (&id, &v) in old.sparse_ids.iter().zip(&old.sparse_of) {
            if let Some(new) = renumber[v as usize].filter(|_| id != TOMBSTONE) {
                slab.sparse_ids.push(id);
                slab.sparse_of.push(new);
            }
        }
        *self = slab;
        self.index_rows();
    }
}

/// What a backend keeps in memory around its [`MetaTable`] (the SQLite store: its vector
/// index; the PostgreSQL store: the table alone).
pub trait Metadata: Default + Send + Sync {
    /// The metadata.
    fn table(&self) -> &MetaTable;
    /// The metadata, to change.
    fn table_mut(&mut self) -> &mut MetaTable;
}

impl Metadata for MetaTable {
    fn table(&self) -> &MetaTable {
        self
    }

    fn table_mut(&mut self) -> &mut MetaTable {
        self
    }
}

impl Metadata for VectorIndex {
    fn table(&self) -> &MetaTable {
        &self.meta
    }

    fn table_mut(&mut self) -> &mut MetaTable {
        &mut self.meta
    }
}

/// Saved chunk rows grouped by memory, chunks in order: what
/// [`VectorIndex::add_vectors`] takes.
pub fn group_chunks(rows: &[crate::store::EmbeddedRow]) -> Vec<(MemoryId, Vec<&Embedding>)> {
    // The backfill saves its rows in (id, chunk) order: grouped as they come, without a
    // map to sort them.
    if rows
        .windows(2)
        .all(|w| (w[0].id, w[0].chunk) < (w[1].id, w[1].chunk))
    {
        let mut groups: Vec<(MemoryId, Vec<&Embedding>)> = Vec::with_capacity(rows.len());
        for r in rows {
            match groups.last_mut() {
                Some((id, chunks)) if *id == r.id => chunks.push(&r.vector),
                _ => groups.push((r.id, vec![&r.vector])),
            }
        }
        return groups;
    }
    let mut by_id: BTreeMap<MemoryId, Vec<(u32, &Embedding)>> = BTreeMap::new();
    for r in rows {
        by_id.entry(r.id).or_default().push((r.chunk, &r.vector));
    }
    by_id
        .into_iter()
        .map(|(id, mut chunks)| {
            chunks.sort_by_key(|(c, _)| *c);
            (id, chunks.into_iter().map(|(_, v)| v).collect())
        })
        .collect()
}

/// Exact cosine search over each NPC's embedded, live memories.
#[derive(Clone, Debug, Default)]
pub struct VectorIndex {
    meta: MetaTable,
    slabs: Vec<Slab>,
    /// The slabs' [`Slab::held`] bytes together, kept as they change.
    held: usize,
}

impl VectorIndex {
    /// Registers a memory (not yet recallable: it has no vector).
    pub fn add_meta(&mut self, m: &MemoryRecord) {
        self.meta.add(m);
    }

    /// Registers a memory with everything known about it (loading a run).
    pub fn insert_meta(&mut self, meta: MemoryMeta) {
        self.meta.insert(meta);
    }

    /// The metadata table.
    pub fn meta_table(&self) -> &MetaTable {
        &self.meta
    }

    /// The metadata of `id`, if known.
    pub fn meta(&self, id: MemoryId) -> Option<&MemoryMeta> {
        self.meta.get(id)
    }

    /// Makes `id` recallable with its chunks' `vectors` (each of [`VECTOR_DIMS`]).
    /// Returns false, changing nothing, if the memory is unknown, already embedded, or a
    /// vector has the wrong size. An archived memory is marked embedded but stays out of
    /// the search.
    pub fn add_vectors(&mut self, id: MemoryId, vectors: &[&Embedding]) -> bool {
        if vectors.is_empty() || vectors.iter().any(|v| !v.fits()) {
            return false;
        }
        let Some(meta) = self.meta.mark_embedded(id) else {
            return false;
        };
        if meta.forgotten.is_some() {
            return true;
        }
        let npc = meta.memory.npc.index();
        if self.slabs.len() <= npc {
            self.slabs.resize_with(npc + 1, Slab::default);
        }
        let slab = &mut self.slabs[npc];
        let before = slab.held();
        slab.chunked |= vectors.len() > 1;
        for v in vectors {
            slab.push(id, v);
        }
        self.held = self.held - before + slab.held();
        true
    }

    /// [`VectorIndex::add_vectors`] of each memory of `groups` in turn (as
    /// [`group_chunks`] gives them), with what each will read asked for ahead of its turn:
    /// its metadata row a dozen memories ahead, its NPC's slab six ahead, and the ends of
    /// the slab's arrays, where its vector goes, three ahead.
    ///
    /// Why: the backfill adds a batch of memories from all over the town at once, under
    /// the index's lock, and each waited on its row, then on its slab, then on the slab's
    /// arrays, one miss after the other; asked for ahead, the misses overlap (the
    /// thirty-sixth round, docs/BENCHMARKS.md). What is added, and in which order, is the
    /// same.
    pub fn add_all(&mut self, groups: &[(MemoryId, Vec<&Embedding>)]) {
        const AHEAD: usize = 12;
        for (i, (id, chunks)) in groups.iter().enumerate() {
            if let Some((next, _)) = groups.get(i + AHEAD) {
                self.meta.rows.prefetch(*next);
            }
            if let Some((soon, _)) = groups.get(i + AHEAD / 2)
                && let Some(slab) = self.slab_of(*soon)
            {
                slab.prefetch_header();
            }
            if let Some((sooner, _)) = groups.get(i + AHEAD / 4)
                && let Some(slab) = self.slab_of(*sooner)
            {
                slab.prefetch_ends();
            }
            self.add_vectors(*id, chunks);
        }
    }

    /// The slab of `id`'s NPC, if it has one.
    fn slab_of(&self, id: MemoryId) -> Option<&Slab> {
        self.slabs.get(self.meta.get(id)?.memory.npc.index())
    }

    /// Loads chunk vectors as a store reads them back — `(id, vector)` in (id, chunk)
    /// order, each vector as [`Embedding::of_fitted`] makes it — each memory's chunks
    /// together through [`VectorIndex::add_vectors`]. The first error stops the load and
    /// is returned.
    pub fn load_chunks<E>(
        &mut self,
        rows: impl IntoIterator<Item = Result<(MemoryId, Embedding), E>>,
    ) -> Result<(), E> {
        let mut pending: Option<(MemoryId, Vec<Embedding>)> = None;
        let flush = |index: &mut Self, done: Option<(MemoryId, Vec<Embedding>)>| {
            if let Some((id, chunks)) = done {
                let refs: Vec<&Embedding> = chunks.iter().collect();
                index.add_vectors(id, &refs);
            }
        };
        for row in rows {
            let (id, vector) = row?;
            match &mut pending {
                Some((current, chunks)) if *current == id => chunks.push(vector),
                _ => {
                    let done = pending.replace((id, vec![vector]));
                    flush(self, done);
                }
            }
        }
        flush(self, pending);
        Ok(())
    }

    /// Makes `id` recallable with one vector (a memory of one chunk).
    pub fn add_vector(&mut self, id: MemoryId, vector: &[f32]) -> bool {
        self.add_vectors(id, &[&Embedding::of_fitted(vector.to_vec())])
    }

    /// Records a recall of `id` in `tick`.
    pub fn touch(&mut self, id: MemoryId, tick: u64) {
        self.meta.touch(id, tick);
    }

    /// Sets how memories fade.
    pub fn set_forgetting(&mut self, policy: Forgetting) {
        self.meta.set_forgetting(policy);
    }

    /// Archives what is due at `tick` and drops the vectors from the search: their rows
    /// become tombstones (one pass over the ids of each NPC concerned), and a slab is
    /// compacted once a quarter of it is dead, so archiving costs little per tick.
    pub fn forget_due(&mut self, tick: u64) -> Vec<Forgotten> {
        let due = self.meta.forget_due(tick);
        // Each NPC's archived ids, ascending (`due` is sorted by id).
        let mut by_npc: BTreeMap<NpcId, Vec<MemoryId>> = BTreeMap::new();
        for f in &due {
            by_npc.entry(f.npc).or_default().push(f.id);
        }
        for (npc, ids) in by_npc {
            let Some(slab) = self.slabs.get_mut(npc.index()) else {
                continue;
            };
            debug_assert!(ids.is_sorted(), "forget_due's ids ascend");
            slab.dead += tombstone(&mut slab.ids, !slab.dense_unordered, &ids);
            slab.dead += tombstone(&mut slab.sparse_ids, !slab.sparse_unordered, &ids);
            if slab.dead * 4 > slab.len() {
                let before = slab.held();
                slab.compact();
                self.held = self.held - before + slab.held();
            }
        }
        due
    }

    /// Vector bytes held for every NPC (tombstones included), ids and row ends besides:
    /// kept as vectors come and go, so asking costs nothing.
    pub fn vector_bytes(&self) -> usize {
        self.held
    }

    /// Lets go of every vector, keeping the metadata (embedded stays embedded): for a
    /// store that recalls elsewhere from now on.
    pub fn drop_vectors(&mut self) {
        self.slabs = Vec::new();
        self.held = 0;
    }

    /// Recall for `npc`: the `scoring.candidates` live, embedded memories nearest to
    /// `query` by their best chunk's cosine (exact: every vector of the NPC is scored,
    /// its sparse ones through the postings, with the same bits), then ranked ([`crate::scoring::rank`]).
    pub fn search(
        &self,
        npc: NpcId,
        query: &[f32],
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> Vec<RecalledMemory> {
        self.search_counted(npc, query, tick, k, scoring).0
    }

    /// [`VectorIndex::search`], and the bytes of vectors it read (tombstones included):
    /// 4 per dense entry, 6 per entry of a sparse row read row by row, and what it read
    /// of the postings (`Postings::dot_all`, private).
    pub fn search_counted(
        &self,
        npc: NpcId,
        query: &[f32],
        tick: u64,
        k: usize,
        scoring: &Scoring,
    ) -> (Vec<RecalledMemory>, usize) {
        let Some(slab) = self.slabs.get(npc.index()) else {
            return (Vec::new(), 0);
        };
        if k == 0 || query.len() != VECTOR_DIMS {
            return (Vec::new(), 0);
        }
        slab.prefetch_search();
        // Think's tasks take the NPCs in order, a few at once: the next searches are most
        // likely the next NPCs', whose slabs' own fields are asked for now.
        for next in self.slabs.iter().skip(npc.index() + 1).take(2) {
            next.prefetch_header();
        }
        let mut read = slab.vectors.len() * 4 + slab.lagging_bytes();
        let dense = slab
            .ids
            .iter()
            .enumerate()
            .filter(|(_, id)| **id != TOMBSTONE)
            .map(|(i, &id)| {
                (
                    id,
                    dot(query, &slab.vectors[i * VECTOR_DIMS..(i + 1) * VECTOR_DIMS]),
                )
            });
        // The rows in the postings are scored by dimension, the newest row by row: the
        // same bits (see `Postings`).
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> = const {
                std::cell::RefCell::new(Scratch {
                    lanes: Vec::new(),
                    hits: Vec::new(),
                    indexed: Vec::new(),
                    keyed: Vec::new(),
                    packed: Vec::new(),
                })
            };
        }
        let shortlist = SCRATCH.with_borrow_mut(|scratch| {
            let Scratch {
                lanes,
                hits,
                indexed,
                keyed,
                packed,
            } = scratch;
            read += slab.postings.dot_all(query, lanes, indexed, hits);
            // The newest distinct vectors, one by one: then every vector has its score.
            indexed.extend((slab.postings.rows..slab.sparse_ends.len()).map(|v| {
                let (idx, val) = slab.vector(v);
                dot_sparse(query, idx, val)
            }));
            let sparse = slab
                .sparse_ids
                .iter()
                .zip(&slab.sparse_of)
                .filter(|(id, _)| **id != TOMBSTONE)
                .map(|(&id, &v)| (id, indexed[v as usize]));
            // Scores have the same bits either way, and the shortlist orders by (score,
            // id): where a row is kept changes nothing.
            let rows = dense.chain(sparse);
            let n = scoring.candidates.max(k);
            // Single-chunk memories (nearly all) skip the per-memory maximum.
            if slab.chunked {
                shortlist_by_best_chunk(rows, n)
            } else if slab.ids.is_empty()
                && !slab.sparse_unordered
                && u32::try_from(slab.sparse_ids.len()).is_ok()
            {
                // Every row sparse, in id order: the usual case, the hashing embedder's.
                nearest_rows(&slab.sparse_ids, &slab.sparse_of, indexed, packed, n)
            } else {
                keyed.clear();
                keyed.extend(rows.map(|(id, cos)| (similarity_key(cos), id)));
                nearest_n(keyed, n);
                keyed.clone()
            }
        });
        // Each candidate's row is likely a cache miss (an NPC's memories are spread over
        // the whole table): all of them asked for first, then read in a pass of their
        // own, so their loads overlap instead of waiting one by one between the ranking's
        // comparisons and insertions.
        for &(_, id) in &shortlist {
            self.meta.rows.prefetch(id);
        }
        // Sized to the shortlist: collected from a filter it would grow from four.
        let mut candidates: Vec<(MemoryId, &MemoryRecord, f32, u64)> =
            Vec::with_capacity(shortlist.len());
        candidates.extend(shortlist.into_iter().filter_map(|(similarity, id)| {
            let meta = self.meta.get(id)?;
            meta.forgotten
                .is_none()
                .then_some((id, &meta.memory, similarity, meta.last_recalled))
        }));
        (rank_refs(candidates, tick, k, scoring), read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archiving_rows_in_id_order_marks_what_a_scan_of_every_row_marks() {
        // Rows ascending (a memory's chunks adjacent), tombstones anywhere, in runs and
        // at both ends; the ids archived anywhere among them, some not rows at all.
        let mut lcg = crate::testing::lcg(13);
        let mut next = || lcg() >> 33;
        for round in 0..2_000 {
            let mut rows = Vec::new();
            let mut id = 0;
            for _ in 0..next() % 60 {
                id += 1 + next() % 3;
                for _ in 0..1 + u64::from(next() % 4 == 0) {
                    let dead = next() % (2 + round % 5) == 0;
                    rows.push(if dead { TOMBSTONE } else { MemoryId(id) });
                }
            }
            let mut ids: Vec<MemoryId> = (0..next() % 6)
                .map(|_| MemoryId(1 + next() % (id + 3)))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let mut scanned = rows.clone();
            let by_scan = tombstone(&mut scanned, false, &ids);
            let mut searched = rows.clone();
            let by_search = tombstone(&mut searched, true, &ids);
            assert_eq!(
                searched, scanned,
                "round {round}: rows {rows:?}, ids {ids:?}"
            );
            assert_eq!(by_search, by_scan, "round {round}");
            for low in 0..id + 2 {
                let at = first_live_at_or_above(&rows, MemoryId(low));
                assert!(rows[..at].iter().all(|&r| r == TOMBSTONE || r.0 < low));
                assert!(rows[at..].iter().all(|&r| r == TOMBSTONE || r.0 >= low));
            }
        }
    }

    fn mem(id: u64, npc: u32) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(id),
            npc: NpcId(npc),
            kind: MemoryKind::Observation,
            content: format!("memory {id}").into(),
            importance: 4,
            tick: id,
            source: None,
            core: false,
            evidence: Vec::new(),
            place: Default::default(),
        }
    }

    fn unit(i: usize) -> Vec<f32> {
        let mut v = vec![0.0; VECTOR_DIMS];
        v[i] = 1.0;
        v
    }

    #[test]
    fn the_lazy_schedule_archives_what_scanning_every_memory_finds_due() {
        // Memories written over the run, a few hundred recalls a tick moving their
        // fading on (most recalls leave a stale entry behind: enough for rebuilds), one
        // memory replaced now and then; each tick, what `forget_due` archives is every
        // live memory whose fading tick has come, found by looking at them all.
        let mut table = MetaTable::default();
        table.set_forgetting(Forgetting {
            threshold: 0.05,
            strength_per_importance: 2.0,
            recall_boost: 0.5,
        });
        let mut lcg = crate::testing::lcg(11);
        let mut next = |m: u64| (lcg() >> 33) % m;
        let mut written = 0u64;
        let mut archived = 0;
        let mut rebuilt = false;
        for tick in 1..=300u64 {
            for _ in 0..20 {
                written += 1;
                let mut m = mem(written, (written % 13) as u32);
                m.tick = tick;
                m.importance = 1 + next(10) as u8;
                table.add(&m);
            }
            if tick % 7 == 0 {
                // A memory loaded again over itself (a store reloading a row).
                let id = MemoryId(1 + next(written));
                if let Some(meta) = table.get(id).cloned() {
                    table.insert(meta);
                }
            }
            let expected: Vec<MemoryId> = table
                .rows
                .iter()
                .filter(|m| {
                    MetaTable::fades_at(&mut table.fades.clone(), m).is_some_and(|at| at <= tick)
                })
                .map(|m| m.memory.id)
                .collect();
            let due: Vec<MemoryId> = table.forget_due(tick).into_iter().map(|f| f.id).collect();
            assert_eq!(due, expected, "tick {tick}");
            archived += due.len();
            for _ in 0..600 {
                let entries = table.schedule.entries;
                table.touch(MemoryId(1 + next(written)), tick);
                rebuilt |= table.schedule.entries < entries;
            }
        }
        assert!(archived > 300, "memories faded: {archived}");
        assert!(rebuilt, "stale entries were cleared by a rebuild");
    }

    #[test]
    fn touching_a_list_is_touching_each_in_turn() {
        // Rows over two pages, forgetting on (so touches move the schedule); the list
        // crosses the page boundary, repeats ids, names unknown ids (past the table, and
        // past its last page) and ends within the look-ahead.
        let table = || {
            let mut t = MetaTable::default();
            t.set_forgetting(Forgetting {
                threshold: 0.05,
                strength_per_importance: 2.0,
                recall_boost: 0.5,
            });
            for id in 1..=(PAGE as u64 + 40) {
                let mut m = mem(id, (id % 7) as u32);
                m.tick = id % 40;
                m.importance = 1 + (id % 10) as u8;
                t.add(&m);
            }
            t
        };
        let mut ids: Vec<MemoryId> = (PAGE as u64 - 30..PAGE as u64 + 30)
            .chain([3, 3, PAGE as u64 + 41, 5 * PAGE as u64, 7])
            .chain(1..=20)
            .map(MemoryId)
            .collect();
        ids.push(MemoryId(PAGE as u64 + 40));
        let (mut one_by_one, mut listed) = (table(), table());
        for tick in [50, 50, 90] {
            for &id in &ids {
                one_by_one.touch(id, tick);
            }
            listed.touch_all(&ids, tick);
        }
        let rows = |t: &MetaTable| t.rows.iter().cloned().collect::<Vec<_>>();
        assert_eq!(rows(&listed), rows(&one_by_one));
        assert!(
            listed
                .get(MemoryId(PAGE as u64 + 40))
                .is_some_and(|m| m.recalls == 2)
        );
        for tick in [100, 400, 2_000, 20_000] {
            assert_eq!(
                listed.forget_due(tick),
                one_by_one.forget_due(tick),
                "tick {tick}"
            );
        }
    }

    #[test]
    fn nearest_first_orders_as_total_cmp_descending() {
        let xs = [
            f32::NEG_INFINITY,
            -1.0,
            -0.5,
            -1e-30,
            -0.0,
            0.0,
            1e-30,
            1e-5,
            0.25,
            0.5,
            1.0,
            f32::INFINITY,
        ];
        for a in xs {
            for b in xs {
                assert_eq!(
                    nearest_first(a).cmp(&nearest_first(b)),
                    b.total_cmp(&a),
                    "{a} against {b}"
                );
            }
        }
    }

    #[test]
    fn nearest_rows_keeps_what_nearest_n_keeps() {
        // Rows in id order sharing few distinct vectors (equal similarities, ties broken by
        // id), some tombstoned; similarities negative, zero, either side of the floor.
        let mut lcg = crate::testing::lcg(7);
        let mut next = || lcg() >> 33;
        let palette = [-0.75, -1e-6, -0.0, 0.0, 3e-6, 0.125, 0.5, 0.5, 0.875, 1.0];
        for round in 0..300 {
            let vectors = 1 + (round % 7) as usize;
            let scores: Vec<f32> = (0..vectors)
                .map(|_| palette[(next() % palette.len() as u64) as usize])
                .collect();
            let rows = (round % 80) as u64;
            let mut ids = Vec::new();
            let mut of = Vec::new();
            let mut id = 0;
            for _ in 0..rows {
                id += 1 + next() % 3;
                let dead = next() % 5 == 0;
                ids.push(if dead { TOMBSTONE } else { MemoryId(id) });
                of.push((next() % vectors as u64) as u32);
            }
            let mut packed = Vec::new();
            for n in [0, 1, 5, 30, 100] {
                let mut expected: Vec<(f32, MemoryId)> = ids
                    .iter()
                    .zip(&of)
                    .filter(|(id, _)| **id != TOMBSTONE)
                    .map(|(&id, &v)| (similarity_key(scores[v as usize]), id))
                    .collect();
                nearest_n(&mut expected, n);
                let got = nearest_rows(&ids, &of, &scores, &mut packed, n);
                let bits = |r: &[(f32, MemoryId)]| -> Vec<(u32, MemoryId)> {
                    r.iter().map(|&(s, id)| (s.to_bits(), id)).collect()
                };
                assert_eq!(bits(&got), bits(&expected), "round {round}, n {n}");
            }
        }
    }

    #[test]
    fn rows_embedded_out_of_id_order_still_tie_by_id() {
        // The backfill may embed a later memory first; then row order is not id order,
        // and the search must not break ties by row number.
        let mut index = VectorIndex::default();
        for id in 1..=4 {
            index.add_meta(&mem(id, 0));
        }
        for id in [3, 1, 4, 2] {
            assert!(index.add_vector(MemoryId(id), &unit(5)));
        }
        assert!(index.slabs[0].sparse_unordered);
        let ids: Vec<u64> = index
            .search(NpcId(0), &unit(5), 9, 3, &Scoring::COSINE)
            .into_iter()
            .map(|r| r.memory.id.0)
            .collect();
        assert_eq!(ids, vec![1, 2, 3]);
        // In order, the slab says so.
        let mut ordered = VectorIndex::default();
        for id in 1..=4 {
            ordered.add_meta(&mem(id, 0));
            assert!(ordered.add_vector(MemoryId(id), &unit(5)));
        }
        assert!(!ordered.slabs[0].sparse_unordered);
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

    #[test]
    fn forgotten_memories_leave_recall_and_recalled_ones_last() {
        let mut index = VectorIndex::default();
        index.set_forgetting(Forgetting::default());
        for id in 1..=3 {
            index.add_meta(&mem(id, 0));
            index.add_vector(MemoryId(id), &unit(id as usize));
        }
        let mut core = mem(4, 0);
        core.core = true;
        index.add_meta(&core);
        index.add_vector(MemoryId(4), &unit(4));
        // Importance 4, created at ticks 1..=3: due 300 ticks later unless recalled.
        assert!(index.forget_due(300).is_empty());
        index.touch(MemoryId(2), 200);
        assert_eq!(index.meta(MemoryId(2)).map(|m| m.recalls), Some(1));
        let gone = index.forget_due(303);
        assert_eq!(
            gone.iter().map(|f| f.id.0).collect::<Vec<_>>(),
            vec![1, 3],
            "the recalled one and the core one stay"
        );
        assert_eq!(index.meta_table().archived(), 2);
        let all = |index: &VectorIndex, tick| {
            let mut ids: Vec<u64> = index
                .search(NpcId(0), &unit(1), tick, 10, &Scoring::COSINE)
                .into_iter()
                .map(|r| r.memory.id.0)
                .collect();
            ids.sort_unstable();
            ids
        };
        assert_eq!(all(&index, 303), vec![2, 4], "archived never come back");
        // Touching an archived memory changes nothing.
        index.touch(MemoryId(1), 303);
        assert_eq!(index.meta(MemoryId(1)).map(|m| m.recalls), Some(0));
        // Recalled at 200 with strength doubled: fades 600 ticks after the recall.
        assert!(index.forget_due(799).is_empty());
        assert_eq!(index.forget_due(800).len(), 1);
        assert_eq!(all(&index, 900), vec![4], "core memories never fade");
    }

    #[test]
    fn a_chunked_memory_is_recalled_by_its_best_chunk() {
        let mut index = VectorIndex::default();
        index.add_meta(&mem(1, 0));
        index.add_meta(&mem(2, 0));
        let (a, b, c) = (unit(1), unit(2), unit(3));
        let (ea, eb) = (
            Embedding::of_fitted(a.clone()),
            Embedding::of_fitted(b.clone()),
        );
        assert!(index.add_vectors(MemoryId(1), &[&ea, &eb]));
        assert!(index.add_vector(MemoryId(2), &c));
        let top = |q: &[f32]| {
            index
                .search(NpcId(0), q, 9, 2, &Scoring::COSINE)
                .into_iter()
                .map(|r| (r.memory.id.0, r.similarity))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            top(&b),
            vec![(1, 1.0), (2, 0.0)],
            "its second chunk matches"
        );
        assert_eq!(top(&a), vec![(1, 1.0), (2, 0.0)], "so does its first");
        assert_eq!(top(&c), vec![(2, 1.0), (1, 0.0)], "one entry per memory");
    }

    #[test]
    fn tombstones_hide_archived_rows_until_the_slab_is_compacted() {
        let mut index = VectorIndex::default();
        index.set_forgetting(Forgetting::default());
        for id in 1..=12 {
            let mut m = mem(id, 0);
            m.tick = 0;
            m.core = id > 1 && id != 7;
            index.add_meta(&m);
            index.add_vector(MemoryId(id), &unit(1));
        }
        let ids = |index: &VectorIndex| {
            index
                .search(NpcId(0), &unit(1), 400, 20, &Scoring::COSINE)
                .into_iter()
                .map(|r| r.memory.id.0)
                .collect::<Vec<_>>()
        };
        // Two of twelve: tombstones, no compaction.
        assert_eq!(index.forget_due(300).len(), 2);
        assert_eq!(index.slabs[0].len(), 12);
        assert_eq!(
            index.slabs[0].sparse_ids.len(),
            12,
            "unit vectors are kept sparse"
        );
        assert_eq!(index.slabs[0].dead, 2);
        assert_eq!(ids(&index), vec![2, 3, 4, 5, 6, 8, 9, 10, 11, 12]);
        // Past a quarter dead, the slab is compacted; results do not change.
        index.add_meta(&mem(13, 0));
        index.add_vector(MemoryId(13), &unit(1));
        let mut stale = mem(14, 0);
        stale.tick = 1;
        index.add_meta(&stale);
        index.add_vector(MemoryId(14), &unit(1));
        index.touch(MemoryId(13), 400);
        assert_eq!(index.forget_due(301).len(), 1);
        assert_eq!(index.slabs[0].dead, 3);
        assert_eq!(index.forget_due(1000).len(), 1, "the recalled one, later");
        assert!(index.slabs[0].dead == 0, "compacted");
        assert!(
            index.slabs[0]
                .ids
                .iter()
                .chain(&index.slabs[0].sparse_ids)
                .all(|id| *id != TOMBSTONE)
        );
        assert_eq!(ids(&index), vec![2, 3, 4, 5, 6, 8, 9, 10, 11, 12]);
    }

    /// A deterministic stream of sparse vectors like the hashing embedder's: a few dozen
    /// entries in ascending dimensions, signed, normalised — some tiny enough that their
    /// products underflow — and queries with -0.0 among their zeros.
    struct Sparse(u64);

    impl Sparse {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }

        fn vector(&mut self, most: u64) -> Vec<f32> {
            let mut v = vec![0.0f32; VECTOR_DIMS];
            // Dimensions from a narrow band half the time, so rows share them.
            let band = if self.next().is_multiple_of(2) {
                64
            } else {
                VECTOR_DIMS as u64
            };
            for _ in 0..1 + self.next() % most {
                let d = (self.next() % band) as usize;
                let x = (self.next() % 2001) as f32 / 1000.0 - 1.0;
                v[d] += if self.next().is_multiple_of(17) {
                    x * 1e-30
                } else {
                    x
                };
            }
            crate::embed::normalise(&mut v);
            v
        }

        fn query(&mut self) -> Vec<f32> {
            let mut q = self.vector(80);
            for x in q.iter_mut().filter(|x| **x == 0.0) {
                if self.next().is_multiple_of(5) {
                    *x = -0.0;
                }
            }
            q
        }
    }

    /// Each row's score from the postings has `dot_sparse`'s bits, while rows arrive (the
    /// postings rebuilt as they lag), after archiving and compaction, and the search over
    /// postings returns what the search over rows alone returns, bit for bit.
    #[test]
    fn postings_score_every_row_with_dot_sparse_bits() {
        let mut stream = Sparse(11);
        let queries: Vec<Vec<f32>> = (0..12)
            .map(|_| stream.query())
            .chain([vec![0.0; VECTOR_DIMS]])
            .collect();
        // Every vector added, by id: the reference, apart from the index.
        let mut added: BTreeMap<MemoryId, Vec<f32>> = BTreeMap::new();
        let mut index = VectorIndex::default();
        index.set_forgetting(Forgetting::default());
        let check = |slab: &Slab, added: &BTreeMap<MemoryId, Vec<f32>>| {
            let (mut lanes, mut scores, mut hits) = (Vec::new(), Vec::new(), Vec::new());
            for q in &queries {
                slab.postings.dot_all(q, &mut lanes, &mut scores, &mut hits);
                assert_eq!(scores.len(), slab.postings.rows);
                for (r, (&id, &v)) in slab.sparse_ids.iter().zip(&slab.sparse_of).enumerate() {
                    if id == TOMBSTONE {
                        continue;
                    }
                    // Each row's distinct vector is its own, bit for bit.
                    let (idx, val) = crate::embed::sparse(&added[&id]).expect("sparse");
                    assert!(slab.same_vector(v as usize, &idx, &val), "row {r}");
                    let expected = dot_sparse(q, &idx, &val).to_bits();
                    if let Some(score) = scores.get(v as usize) {
                        assert_eq!(score.to_bits(), expected, "row {r}");
                    }
                }
            }
        };
        // A third of the memories repeat an earlier one's vector, as gossip does.
        let add = |index: &mut VectorIndex,
                   added: &mut BTreeMap<MemoryId, Vec<f32>>,
                   stream: &mut Sparse,
                   id: u64| {
            let v = match id.checked_sub(7).filter(|_| id.is_multiple_of(3)) {
                Some(earlier) => added[&MemoryId(earlier)].clone(),
                None => stream.vector(60),
            };
            index.add_meta(&mem(id, 0));
            assert!(index.add_vector(MemoryId(id), &v));
            added.insert(MemoryId(id), v);
        };
        let mut merged_at = Vec::new();
        for id in 1..=400u64 {
            add(&mut index, &mut added, &mut stream, id);
            let slab = &index.slabs[0];
            if merged_at.last() != Some(&slab.postings.rows) && slab.postings.rows > 0 {
                merged_at.push(slab.postings.rows);
                check(slab, &added);
            } else if id % 16 == 0 {
                check(slab, &added);
            }
            assert_eq!(slab.sparse_of.len(), slab.sparse_ids.len());
            let lagging = slab.sparse_ends.len() - slab.postings.rows;
            assert!(lagging < POSTINGS_LAG_MIN.max(slab.postings.rows / 4));
        }
        // Each distinct vector kept once: a row repeating an earlier vector added none.
        let distinct = index.slabs[0].sparse_ends.len();
        let repeats = (1..=400u64)
            .filter(|id| id.is_multiple_of(3) && *id > 7)
            .count();
        assert_eq!(distinct, 400 - repeats);
        // Merged each time the newest vectors reach 32 or a quarter of those in it.
        assert_eq!(merged_at, vec![32, 64, 96, 128, 160, 200, 250]);

        // The search, against the same rows all read one by one.
        let same = |index: &VectorIndex| {
            let mut rows_only = index.clone();
            rows_only.slabs[0] = index.slabs[0].unindexed();
            assert_eq!(rows_only.slabs[0].postings.rows, 0);
            for q in &queries {
                let (x, y) = (
                    index.search(NpcId(0), q, 500, 8, &Scoring::default()),
                    rows_only.search(NpcId(0), q, 500, 8, &Scoring::default()),
                );
                assert_eq!(x.len(), 8);
                let bits = |r: &[RecalledMemory]| {
                    r.iter()
                        .map(|m| (m.memory.id, m.similarity.to_bits(), m.score.to_bits()))
                        .collect::<Vec<_>>()
                };
                assert_eq!(bits(&x), bits(&y));
            }
        };
        same(&index);

        // Archive a third of the rows (in the postings and among the newest), compact:
        // the rows are renumbered, the postings keep the live ones.
        let slab = &mut index.slabs[0];
        for r in (0..slab.sparse_ids.len()).step_by(3) {
            slab.sparse_ids[r] = TOMBSTONE;
            slab.dead += 1;
        }
        let live_indexed = (0..slab.postings.rows)
            .filter(|&v| {
                slab.sparse_ids
                    .iter()
                    .zip(&slab.sparse_of)
                    .any(|(&id, &of)| id != TOMBSTONE && of as usize == v)
            })
            .count();
        same(&index);
        index.slabs[0].compact();
        let slab = &index.slabs[0];
        assert_eq!(slab.postings.rows, live_indexed);
        assert!(slab.sparse_ids.iter().all(|&id| id != TOMBSTONE));
        check(slab, &added);
        same(&index);
        // And rows keep arriving after it, merged into the renumbered postings.
        let before = index.slabs[0].postings.rows;
        for id in 401..=480u64 {
            add(&mut index, &mut added, &mut stream, id);
            if id % 8 == 0 {
                check(&index.slabs[0], &added);
            }
        }
        assert!(
            index.slabs[0].postings.rows > before,
            "merged after compaction"
        );
        same(&index);
    }

    /// Two rows share a vector only when its entries are equal bit for bit: a hash that
    /// points at another vector (as a collision would) is not taken at its word.
    #[test]
    fn rows_share_a_vector_only_when_its_entries_are_equal() {
        let sparse = |val: [f32; 2]| Embedding::Sparse {
            idx: vec![1, 5],
            val: val.to_vec(),
        };
        let mut slab = Slab::default();
        slab.push(MemoryId(1), &sparse([0.6, 0.8]));
        slab.by_hash.insert(Slab::hash_of(&[1, 5], &[0.8, 0.6]), 0);
        slab.push(MemoryId(2), &sparse([0.8, 0.6]));
        slab.push(MemoryId(3), &sparse([0.6, 0.8]));
        slab.push(MemoryId(4), &sparse([0.8, 0.6]));
        slab.push(MemoryId(5), &sparse([0.6, -0.8]));
        // The second vector of a shared hash is kept again each time (its sharing is
        // what the collision costs); an equal vector is shared; a sign is not equal.
        assert_eq!(slab.sparse_of, vec![0, 1, 0, 2, 3]);
        assert_eq!(slab.sparse_ends.len(), 4);
    }

    #[test]
    fn dense_and_sparse_rows_search_alike_and_compact() {
        // The same memories, once as sparse vectors and once spread over all dims.
        let spread = |axis: usize| {
            let mut v = vec![0.001f32; VECTOR_DIMS];
            v[axis] = 1.0;
            crate::embed::normalise(&mut v);
            v
        };
        let mut index = VectorIndex::default();
        index.set_forgetting(Forgetting::default());
        for id in 1..=8u64 {
            index.add_meta(&mem(id, 0));
            let v = if id % 2 == 0 {
                unit(id as usize)
            } else {
                spread(id as usize)
            };
            assert!(index.add_vector(MemoryId(id), &v));
        }
        let slab = &index.slabs[0];
        assert_eq!((slab.ids.len(), slab.sparse_ids.len()), (4, 4));
        assert_eq!(
            slab.vectors.len() * 4 + slab.lagging_bytes(),
            4 * VECTOR_DIMS * 4 + 4 * 6
        );
        let found = |index: &VectorIndex, axis: usize| {
            index
                .search(NpcId(0), &unit(axis), 10, 1, &Scoring::COSINE)
                .into_iter()
                .map(|r| r.memory.id.0)
                .collect::<Vec<_>>()
        };
        for axis in 1..=8 {
            assert_eq!(found(&index, axis), vec![axis as u64], "axis {axis}");
        }
        let mut slab = index.slabs[0].clone();
        slab.sparse_ids[1] = TOMBSTONE;
        slab.ids[0] = TOMBSTONE;
        slab.dead = 2;
        slab.compact();
        assert_eq!((slab.ids.len(), slab.sparse_ids.len()), (3, 3));
        assert_eq!(slab.sparse_ids, vec![MemoryId(2), MemoryId(6), MemoryId(8)]);
        assert_eq!(slab.vector(1).0, &[6u16][..]);
    }

    /// A batch added at once ([`VectorIndex::add_all`], the backfill's way) leaves the
    /// index as adding its memories one by one does: the same searches, bit for bit, and
    /// the same bytes — over several NPCs, repeated vectors, chunked memories, an unknown
    /// id and one embedded already. And rows grouped as they come, in (id, chunk) order,
    /// are grouped as the same rows in any order are.
    #[test]
    fn adding_a_batch_is_adding_each_memory_in_turn() {
        let mut next = crate::testing::lcg(11);
        let sparse = |next: &mut dyn FnMut() -> u64| {
            let mut v = vec![0.0f32; VECTOR_DIMS];
            for _ in 0..1 + next() % 20 {
                v[(next() % VECTOR_DIMS as u64) as usize] = (next() % 7) as f32 - 3.0;
            }
            v[(next() % 3) as usize] += 1.0;
            Embedding::fit(v)
        };
        let palette: Vec<Embedding> = (0..12).map(|_| sparse(&mut next)).collect();
        let mut rows: Vec<crate::store::EmbeddedRow> = Vec::new();
        for id in 1..=300u64 {
            let chunks = if id % 17 == 0 { 3 } else { 1 };
            for chunk in 0..chunks {
                let vector = if next().is_multiple_of(2) {
                    palette[(next() % palette.len() as u64) as usize].clone()
                } else {
                    sparse(&mut next)
                };
                rows.push(crate::store::EmbeddedRow {
                    id: MemoryId(id),
                    chunk,
                    vector,
                    dims: VECTOR_DIMS,
                });
            }
        }
        // Memory 400 is unknown; memory 5 is in the batch twice over (two saves).
        let fresh = || {
            let mut index = VectorIndex::default();
            for id in 1..=300u64 {
                index.add_meta(&mem(id, (id % 7) as u32));
            }
            index
        };
        let mut shuffled: Vec<&crate::store::EmbeddedRow> = rows.iter().collect();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let shuffled: Vec<crate::store::EmbeddedRow> = shuffled.into_iter().cloned().collect();
        let in_order = group_chunks(&rows);
        assert_eq!(in_order, group_chunks(&shuffled));
        assert_eq!(in_order.len(), 300);
        let (mut batch, mut each) = (fresh(), fresh());
        let mut extra = in_order.clone();
        extra.push((MemoryId(400), vec![&palette[0]]));
        extra.push(in_order[4].clone());
        batch.add_all(&extra);
        for (id, chunks) in &extra {
            each.add_vectors(*id, chunks);
        }
        assert_eq!(batch.vector_bytes(), each.vector_bytes());
        let scoring = Scoring::default();
        for npc in 0..7 {
            for v in palette.iter().take(5) {
                let query = v.to_dense();
                let a = batch.search(NpcId(npc), &query, 9, 8, &scoring);
                assert_eq!(a, each.search(NpcId(npc), &query, 9, 8, &scoring));
                assert!(!a.is_empty());
            }
        }
    }

    #[test]
    fn held_bytes_follow_the_slabs_as_vectors_come_and_go() {
        let mut index = VectorIndex::default();
        let mut dense = vec![0.0f32; VECTOR_DIMS];
        dense
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = (i % 7) as f32 + 1.0);
        let mut sparse = vec![0.0f32; VECTOR_DIMS];
        sparse[3] = 1.0;
        for id in 1..=40u64 {
            index.add_meta(&MemoryRecord {
                id: MemoryId(id),
                npc: NpcId((id % 2) as u32),
                kind: MemoryKind::Conversation,
                content: "".into(),
                importance: 1,
                tick: 0,
                source: None,
                core: false,
                evidence: Vec::new(),
                place: Default::default(),
            });
            let v = if id % 3 == 0 { &dense } else { &sparse };
            assert!(index.add_vector(MemoryId(id), v));
        }
        let summed = |index: &VectorIndex| index.slabs.iter().map(Slab::held).sum::<usize>();
        assert_eq!(index.vector_bytes(), summed(&index));
        assert!(index.vector_bytes() > 13 * VECTOR_DIMS * 4);
        // Forgetting every memory compacts the slabs; the count follows.
        index.set_forgetting(Forgetting::default());
        assert_eq!(index.forget_due(1_000_000).len(), 40);
        assert_eq!(index.vector_bytes(), summed(&index));
        assert!(index.vector_bytes() < 13 * VECTOR_DIMS * 4, "compacted");
        index.drop_vectors();
        assert_eq!(index.vector_bytes(), 0);
    }
}
