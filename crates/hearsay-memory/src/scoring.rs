//! How recall ranks an NPC's memories: relevance + recency + importance.
//!
//! `score = w_rel · cosine + w_rec · decay^(ticks since last recalled) + w_imp · importance/10`
//!
//! Importance is divided by 10 rather than min-max scaled: with only a few fixed values
//! (4, 8, …), min-max scaling would turn it into an on/off signal. Recency decays per
//! *tick* and is refreshed by every recall, so what an NPC keeps thinking about stays
//! near the top while what it never recalls sinks.
//!
//! Recall is two steps, the same on every store: the `candidates` memories nearest by
//! cosine (ties by id) are over-fetched, then [`rank`] scores them and keeps the top k
//! (ties by id). Every store computes the cosine of its candidates with the same
//! [`crate::embed::dot`], so equal candidates give equal bits and equal order.

use hearsay_core::{MemoryId, MemoryRecord};
use serde::{Deserialize, Serialize};

/// Weights and decay of the recall score.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scoring {
    /// Weight of cosine similarity to the query.
    pub w_rel: f64,
    /// Weight of recency: `decay^(ticks since last recalled)`, in (0, 1].
    pub w_rec: f64,
    /// Weight of importance / 10.
    pub w_imp: f64,
    /// Recency multiplier per tick since last recalled, in (0, 1].
    pub decay: f64,
    /// How many memories, nearest by cosine, are scored (at least k are).
    pub candidates: usize,
}

impl Default for Scoring {
    /// Generative Agents' defaults: equal weights, decay 0.995 (per tick here).
    fn default() -> Self {
        Self {
            w_rel: 1.0,
            w_rec: 1.0,
            w_imp: 1.0,
            decay: 0.995,
            candidates: 30,
        }
    }
}

impl Scoring {
    /// Pure similarity: what exact cosine search would rank.
    pub const COSINE: Scoring = Scoring {
        w_rel: 1.0,
        w_rec: 0.0,
        w_imp: 0.0,
        decay: 1.0,
        candidates: 0,
    };

    /// The score of a memory with cosine `cos`, `importance`, last recalled `age` ticks ago.
    pub fn score(&self, cos: f32, importance: u8, age: u64) -> f64 {
        self.score_with(cos, importance, self.recency(age))
    }

    /// The recency term for a memory last recalled `age` ticks ago: [`pow`]`(decay, age)`.
    ///
    /// Taken from a table of this thread's, filled by `pow` itself as ages come (so the
    /// same bits): a recall scores its 30 candidates, each a `pow` of a dozen dependent
    /// multiplications and a branch on each bit of the age, and in a big town's tick the
    /// ages are a few hundred values met tens of thousands of times.
    pub fn recency(&self, age: u64) -> f64 {
        /// Ages beyond this (a memory unrecalled for longer than most runs) are computed
        /// each time, so the table stays 32 KiB a thread.
        const TABLE_AGES: u64 = 4096;
        thread_local! {
            /// The decay the table is of (its bits), and `pow(decay, age)` by age.
            static POWERS: std::cell::RefCell<(u64, Vec<f64>)> =
                const { std::cell::RefCell::new((0, Vec::new())) };
        }
        if age >= TABLE_AGES {
            return pow(self.decay, age);
        }
        POWERS.with_borrow_mut(|(decay, table)| {
            if *decay != self.decay.to_bits() {
                *decay = self.decay.to_bits();
                table.clear();
            }
            let age = age as usize;
            while table.len() <= age {
                table.push(pow(self.decay, table.len() as u64));
            }
            table[age]
        })
    }

    /// The score from its terms (`recency` from [`Scoring::recency`]).
    pub fn score_with(&self, cos: f32, importance: u8, recency: f64) -> f64 {
        self.w_rel * f64::from(cos)
            + self.w_rec * recency
            + self.w_imp * f64::from(importance) / 10.0
    }
}

/// Cosines closer to zero than this count as exactly zero. Two engines that sum the same
/// products in different orders (pgvector and hearsay) can land on either side of zero
/// when terms cancel, by ~1e-8; flooring makes both call it a tie, broken by id.
pub const SIMILARITY_FLOOR: f32 = 1e-5;

/// The similarity recall ranks by: the cosine, with noise around zero floored to zero.
pub fn similarity_key(cos: f32) -> f32 {
    if cos.abs() < SIMILARITY_FLOOR {
        0.0
    } else {
        cos
    }
}

/// A memory that made the cosine shortlist.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The shortlisted memory as stored, before final ranking.
    pub memory: MemoryRecord,
    /// Cosine similarity to the query.
    pub similarity: f32,
    /// Tick it was last recalled.
    pub last_recalled: u64,
}

/// Keeps the `n` best items of an iterator by `better` (a strict "a ranks above b"),
/// best first: a bounded insertion sort, so memory stays O(n). An item goes after those
/// it does not rank above (found by binary search: `best` is ordered, so "ranks above"
/// turns true once along it), so of equal items the first stays first.
pub fn top_n<T>(
    items: impl IntoIterator<Item = T>,
    n: usize,
    better: impl Fn(&T, &T) -> bool,
) -> Vec<T> {
    let mut best: Vec<T> = Vec::with_capacity(n + 1);
    if n == 0 {
        return best;
    }
    for item in items {
        if best.len() == n && !best.last().is_some_and(|last| better(&item, last)) {
            continue;
        }
        let at = best.partition_point(|b| !better(&item, b));
        best.insert(at, item);
        best.truncate(n);
    }
    best
}

/// Whether (similarity `a`, id `ia`) comes before (`b`, `ib`) in the cosine shortlist.
pub fn nearer(a: f32, ia: u64, b: f32, ib: u64) -> bool {
    a.total_cmp(&b).then(ib.cmp(&ia)) == std::cmp::Ordering::Greater
}

/// Cuts `rows` (similarity, id) to the `n` nearest by [`nearer`], nearest first: what
/// [`top_n`] with `nearer` keeps, in the same order, since ids are unique and `nearer` is
/// a total order on them. A selection and a sort of the `n`, not an insertion per row:
/// in a profile of the 1,000-NPC town, `top_n`'s binary searches and insertions were
/// most of its time, and it was a tenth of all the run's samples.
pub fn nearest_n(rows: &mut Vec<(f32, MemoryId)>, n: usize) {
    let order = |a: &(f32, MemoryId), b: &(f32, MemoryId)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if rows.len() > n {
        if n == 0 {
            rows.clear();
            return;
        }
        rows.select_nth_unstable_by(n - 1, order);
        rows.truncate(n);
    }
    rows.sort_unstable_by(order);
}

/// Scores the shortlist at `tick` and returns the top `k`, best first, ties by id.
pub fn rank(
    candidates: Vec<Candidate>,
    tick: u64,
    k: usize,
    scoring: &Scoring,
) -> Vec<RecalledMemory> {
    rank_refs(
        candidates
            .iter()
            .map(|c| (c.memory.id, &c.memory, c.similarity, c.last_recalled)),
        tick,
        k,
        scoring,
    )
}

/// [`rank`] over borrowed memories (id, memory, similarity, last recalled): only the `k`
/// returned are copied. The id is the memory's own, given beside it: ties between equal
/// scores (frequent: a rumour heard again is remembered again, alike) are broken by it at
/// every step of the ranking's insertions, and read from the record it was a cache miss
/// each time (a line of the memory's row that nothing else here reads; a tenth of this
/// function's time at 10,000 NPCs).
pub fn rank_refs<'a>(
    candidates: impl IntoIterator<Item = (MemoryId, &'a MemoryRecord, f32, u64)>,
    tick: u64,
    k: usize,
    scoring: &Scoring,
) -> Vec<RecalledMemory> {
    let scored = candidates
        .into_iter()
        .map(|(id, memory, similarity, last_recalled)| {
            debug_assert_eq!(id, memory.id, "a candidate's id is its memory's");
            let recency = scoring.recency(tick.saturating_sub(last_recalled));
            let score = scoring.score_with(similarity, memory.importance, recency);
            (score, id, memory, similarity, recency)
        });
    let best = top_n(scored, k, |a, b| {
        a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)) == std::cmp::Ordering::Greater
    });
    // Copying a memory counts one more holder of its text: an atomic add on the text's
    // allocation, which is cold, and atomic adds wait for each other, so the k misses
    // followed one another. The count sits just before the text, mostly on the line of its
    // first byte: those lines asked for together first, the misses overlap (recall at
    // 10,000 NPCs after 200 ticks about 5 % faster, `docs/BENCHMARKS.md`, twenty-fourth
    // round).
    for (_, _, memory, ..) in &best {
        prefetch_index::prefetch_index(memory.content.as_bytes(), 0);
    }
    best.into_iter()
        .map(|(score, _, memory, similarity, recency)| RecalledMemory {
            memory: memory.clone(),
            similarity,
            recency,
            score,
        })
        .collect()
}

/// `base^exp` by repeated squaring: plain IEEE multiplications, so every platform and
/// build computes the same bits (unlike `powf`, which defers to the platform's libm).
pub fn pow(base: f64, mut exp: u64) -> f64 {
    let mut result = 1.0;
    let mut b = base;
    while exp > 0 {
        if exp & 1 == 1 {
            result *= b;
        }
        b *= b;
        exp >>= 1;
    }
    result
}

/// A memory returned by recall, with the scores it was ranked by.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RecalledMemory {
    /// The recalled memory as stored; the fields below are how it ranked.
    pub memory: MemoryRecord,
    /// Cosine similarity to the query (of its best chunk).
    pub similarity: f32,
    /// The recency term: `decay^(ticks since last recalled)`.
    pub recency: f64,
    /// The recall score it was ranked by.
    pub score: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recency_from_the_table_is_pow_for_every_decay_and_age() {
        // Decays taken in turns (each one refills the table), ages up and down, across
        // the table's end.
        for round in 0..3u64 {
            for decay in [0.995, 0.9, 1.0, 0.5, 0.995] {
                let s = Scoring {
                    decay,
                    ..Scoring::default()
                };
                for age in
                    (0..5000u64)
                        .rev()
                        .step_by(7 + round as usize)
                        .chain([0, 4095, 4096, 1 << 40])
                {
                    assert_eq!(
                        s.recency(age).to_bits(),
                        pow(decay, age).to_bits(),
                        "{decay} {age}"
                    );
                }
            }
        }
    }

    #[test]
    fn pow_matches_the_definition() {
        assert_eq!(pow(0.5, 0), 1.0);
        assert_eq!(pow(0.5, 3), 0.125);
        assert!((pow(0.995, 100) - 0.995f64.powi(100)).abs() < 1e-12);
    }

    #[test]
    fn important_memories_outlast_recent_trivia() {
        let s = Scoring::default();
        // Gossip heard 50 ticks ago vs. a move decided this tick, both unrelated to the query.
        assert!(s.score(0.0, 8, 50) > s.score(0.0, 4, 0));
        // Relevance still dominates when it is strong.
        assert!(s.score(0.9, 4, 0) > s.score(0.0, 8, 0));
        assert_eq!(Scoring::COSINE.score(0.25, 10, 99), 0.25);
    }

    #[test]
    fn top_n_is_a_stable_sort_cut_short() {
        // Items (key, arrival): ranked by key alone, so ties keep their arrival order, as
        // a stable sort of everything, cut to n, would.
        let mut state = 3u64;
        for round in 0..300 {
            let len = (round % 60) as usize;
            let items: Vec<(u64, usize)> = (0..len)
                .map(|i| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1);
                    ((state >> 33) % 7, i)
                })
                .collect();
            for n in [0, 1, 5, 30, 100] {
                let mut sorted = items.clone();
                sorted.sort_by_key(|a| std::cmp::Reverse(a.0));
                sorted.truncate(n);
                assert_eq!(top_n(items.clone(), n, |a, b| a.0 > b.0), sorted);
            }
        }
    }

    #[test]
    fn nearest_n_keeps_what_top_n_keeps() {
        // (similarity, id) with unique ids, offered in a shuffled order, many similarities
        // equal (ties broken by id), some negative, some exactly zero.
        let mut lcg = crate::testing::lcg(11);
        let mut next = || lcg() >> 33;
        for round in 0..300 {
            let len = (round % 90) as u64;
            let mut ids: Vec<u64> = (1..=len).collect();
            for i in (1..ids.len()).rev() {
                ids.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            let rows: Vec<(f32, MemoryId)> = ids
                .into_iter()
                .map(|id| ((next() % 7) as f32 / 4.0 - 0.5, MemoryId(id)))
                .collect();
            for n in [0, 1, 5, 30, 100] {
                let expected = top_n(rows.iter().copied(), n, |a, b| {
                    nearer(a.0, a.1.0, b.0, b.1.0)
                });
                let mut got = rows.clone();
                nearest_n(&mut got, n);
                assert_eq!(got, expected, "round {round}, n {n}");
            }
        }
    }

    #[test]
    fn top_n_keeps_the_best_in_order() {
        let got = top_n([5, 1, 9, 3, 9, 7], 3, |a, b| a > b);
        assert_eq!(got, vec![9, 9, 7]);
        assert!(top_n([1, 2], 0, |a, b| a > b).is_empty());
        assert!(nearer(0.5, 9, 0.4, 1));
        assert!(nearer(0.5, 1, 0.5, 2), "ties by lower id");
        assert!(!nearer(0.5, 2, 0.5, 1));
    }
}
