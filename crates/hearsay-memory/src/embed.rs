//! The embedder interface and the fixed vector width of every store.

use crate::BoxFuture;

/// Every stored vector has this many dimensions (the pgvector design's `vector(1536)`).
/// Longer embeddings are truncated and re-normalised, shorter ones zero-padded.
pub const VECTOR_DIMS: usize = 1536;

/// Why an embedding call failed. Failures are expected (remote APIs misbehave) and are
/// always handled: recall degrades to "no memories", the worker retries with backoff.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum EmbedError {
    /// The embedder could not be reached or refused the request.
    #[error("embedder unavailable: {0}")]
    Unavailable(String),
    /// The embedder answered with something that is not one vector per input.
    #[error("embedder answered badly: {0}")]
    Malformed(String),
}

/// Turns texts into vectors.
pub trait Embedder: Send + Sync {
    /// Names the model, recorded with every vector it makes so that a change of model is
    /// noticed instead of mixing incomparable vectors.
    fn model(&self) -> &str;

    /// One vector per text, in order, of whatever width the model makes; callers fit
    /// them to [`VECTOR_DIMS`] with [`fit_dims`] and record the original width.
    fn embed<'a>(&'a self, texts: &'a [String])
    -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;

    /// Computes its vectors in this process, on the calling thread, without waiting for
    /// anything (the hashing embedder): then [`Embedder::embed_fitted_now`] gives one at
    /// once, and a recall query is embedded in its NPC's own Think turn, just before the
    /// search that uses it, rather than in batches before any NPC thinks (a phase of its
    /// own, every query's vector held until its NPC's turn came).
    fn embeds_now(&self) -> bool {
        false
    }

    /// `text`'s vector fitted as [`Embedder::embed_fitted`] fits it (the same bits), when
    /// [`Embedder::embeds_now`]; `None` from any other embedder.
    fn embed_fitted_now(&self, text: &str) -> Option<Embedding> {
        let _ = text;
        None
    }

    /// One vector per text, fitted as [`Embedding::fit`] fits [`Embedder::embed`]'s, with
    /// the width the model made: what the backfill stores and recall queries with. An
    /// embedder that knows its vectors are sparse overrides it to skip the dense
    /// detour, and must give the same bits.
    fn embed_fitted<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<(usize, Embedding)>, EmbedError>> {
        Box::pin(async move {
            Ok(self
                .embed(texts)
                .await?
                .into_iter()
                .map(|v| (v.len(), Embedding::fit(v)))
                .collect())
        })
    }
}

/// A vector fitted to [`VECTOR_DIMS`] and normalised, as stores keep it and recall reads
/// it: sparse when at most [`SPARSE_MAX`] entries are non-zero (the hashing embedder's
/// always are, a real model's never), dense otherwise. Either form has the same values,
/// so every product computed from it has the same bits ([`dot_sparse`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Embedding {
    /// Every entry, [`VECTOR_DIMS`] of them.
    Dense(Vec<f32>),
    /// The non-zero entries: indices ascending, each value non-zero.
    Sparse {
        /// Where the non-zero entries are.
        idx: Vec<u16>,
        /// Their values, one per index.
        val: Vec<f32>,
    },
}

impl Embedding {
    /// `v` fitted to [`VECTOR_DIMS`] ([`fit_dims`]), in its canonical form.
    pub fn fit(v: Vec<f32>) -> Self {
        Self::of_fitted(fit_dims(v, VECTOR_DIMS))
    }

    /// A vector already fitted (as read back from a store), in its canonical form: sparse
    /// when [`sparse`] finds few enough non-zero entries.
    pub fn of_fitted(v: Vec<f32>) -> Self {
        if v.len() == VECTOR_DIMS
            && let Some((idx, val)) = sparse(&v)
        {
            return Self::Sparse { idx, val };
        }
        Self::Dense(v)
    }

    /// The non-zero entries of a fitted vector, indices ascending: the sparse form if
    /// there are at most [`SPARSE_MAX`] of them, else the dense one.
    pub fn of_entries(idx: Vec<u16>, val: Vec<f32>) -> Self {
        if idx.len() <= SPARSE_MAX {
            return Self::Sparse { idx, val };
        }
        let mut v = vec![0.0f32; VECTOR_DIMS];
        for (&i, &x) in idx.iter().zip(&val) {
            if let Some(slot) = v.get_mut(usize::from(i)) {
                *slot = x;
            }
        }
        Self::Dense(v)
    }

    /// Whether it has [`VECTOR_DIMS`] entries (every store checks before it saves).
    pub fn fits(&self) -> bool {
        match self {
            Self::Dense(v) => v.len() == VECTOR_DIMS,
            Self::Sparse { idx, val } => {
                idx.len() == val.len()
                    && idx.iter().all(|&i| usize::from(i) < VECTOR_DIMS)
                    && idx.windows(2).all(|w| w[0] < w[1])
            }
        }
    }

    /// How many entries are non-zero.
    pub fn nonzeros(&self) -> usize {
        match self {
            Self::Dense(v) => v.iter().filter(|x| **x != 0.0).count(),
            Self::Sparse { val, .. } => val.iter().filter(|x| **x != 0.0).count(),
        }
    }

    /// Every entry, written out (as [`DenseQuery`] writes it, into a vector of its own).
    pub fn to_dense(&self) -> Vec<f32> {
        let mut query = DenseQuery::default();
        query.write(self);
        query.entries
    }

    /// The non-zero entries as (indices, values), indices ascending, if there are at most
    /// [`SPARSE_MAX`] of them.
    pub fn as_sparse(&self) -> Option<(&[u16], &[f32])> {
        match self {
            Self::Sparse { idx, val } => Some((idx, val)),
            Self::Dense(_) => None,
        }
    }
}

/// Fits a vector to `dims`: truncates and re-normalises a longer one, zero-pads a shorter
/// one (which leaves cosine similarity unchanged), and L2-normalises the result.
pub fn fit_dims(mut v: Vec<f32>, dims: usize) -> Vec<f32> {
    v.resize(dims, 0.0);
    normalise(&mut v);
    v
}

/// [`normalise`] of a vector given by its entries that may be non-zero, in index order
/// (`val[i]` the entry at `idx[i]`): the same sum in the same order, so the same bits
/// as normalising the vector written out. Entries that are or become zero are dropped.
pub fn normalise_entries(idx: &mut Vec<u16>, val: &mut Vec<f32>) {
    // The written-out vector's zeros add nothing to `normalise`'s sum: the entries alone
    // give its bits.
    normalise(val);
    let mut kept = 0;
    for i in 0..val.len() {
        if val[i] != 0.0 {
            idx[kept] = idx[i];
            val[kept] = val[i];
            kept += 1;
        }
    }
    idx.truncate(kept);
    val.truncate(kept);
}

/// L2-normalises in place; a zero vector stays zero.
pub fn normalise(v: &mut [f32]) {
    if unit_to_the_last_bit(v) {
        return;
    }
    // Zeros add nothing to the sum and divide to zero: skipping them (most entries of a
    // hashing vector) gives the same bits, faster.
    let norm = v
        .iter()
        .filter(|x| **x != 0.0)
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        for x in v.iter_mut().filter(|x| **x != 0.0) {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

/// Whether normalising `v` would leave every bit of it as it is: true when its squared
/// length is within 2^-26 of 1 — a vector normalised once already, as every hashing
/// vector is before [`Embedding::fit`] normalises it again, and as providers send theirs.
///
/// Why no bit moves: the sum is taken here in four lanes, which is within n·2^-53 of
/// [`normalise`]'s own sum in order (far under 2^-40 for any n it sees), so that norm N
/// has |N - 1| < 2^-27 + 2^-40. Each entry x then divides to within |x|·2^-26 of x,
/// less than half the gap from x to either f32 neighbour (at least |x|·2^-24 wide), so
/// `(x / N) as f32` is x again. Checking costs one pass of multiply-adds; the division
/// it skips is one f64 divide per entry.
fn unit_to_the_last_bit(v: &[f32]) -> bool {
    let mut lanes = [0.0f64; 4];
    let chunks = v.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        for (l, x) in lanes.iter_mut().zip(c) {
            *l += f64::from(*x) * f64::from(*x);
        }
    }
    let tail: f64 = tail.iter().map(|x| f64::from(*x) * f64::from(*x)).sum();
    let sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + tail;
    // False for NaN and infinities too: those take the exact path.
    (sum - 1.0).abs() < 1.0 / f64::from(1u32 << 26)
}

/// Dot product of two equally long vectors (cosine, for normalised ones), summed in a
/// fixed order so the same vectors always give the same score.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent lanes let the compiler vectorise without reassociating floats
    // differently from one build to the next.
    let mut acc = [0.0f32; 8];
    let chunks = a.len() / 8 * 8;
    for (ca, cb) in a[..chunks].chunks_exact(8).zip(b[..chunks].chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += ca[i] * cb[i];
        }
    }
    let mut tail = 0.0f32;
    for i in chunks..a.len().min(b.len()) {
        tail += a[i] * b[i];
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail
}

/// Vectors with at most this many non-zero entries are kept sparse (the hashing
/// embedder's have a few dozen of 1536).
pub const SPARSE_MAX: usize = VECTOR_DIMS / 8;

/// A vector's non-zero entries, as (index, value) pairs in index order, if there are at
/// most [`SPARSE_MAX`] of them.
pub fn sparse(v: &[f32]) -> Option<(Vec<u16>, Vec<f32>)> {
    if v.len() > usize::from(u16::MAX) {
        return None;
    }
    let mut idx = Vec::new();
    let mut val = Vec::new();
    for (i, &x) in v.iter().enumerate() {
        if x != 0.0 {
            if idx.len() == SPARSE_MAX {
                return None;
            }
            idx.push(i as u16);
            val.push(x);
        }
    }
    Some((idx, val))
}

/// [`dot`] of `a` with a sparse vector (`idx`, `val`, indices ascending): the same lanes,
/// the same order within each lane, the same final sum, so the result has the same bits
/// as `dot` with the vector written out — the zeros `dot` adds change no sum.
pub fn dot_sparse(a: &[f32], idx: &[u16], val: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    for (&i, &v) in idx.iter().zip(val) {
        let i = usize::from(i);
        if let Some(&x) = a.get(i) {
            acc[i % 8] += x * v;
        }
    }
    sparse_lanes_sum(&acc)
}

/// The sum [`dot_sparse`] ends with, of its eight lanes (lane `i % 8` holds the products
/// at indices `i`, added in index order): the same expression as [`dot`]'s, whose tail
/// is +0.0 since 1536 is a multiple of 8. Whoever fills the lanes in that order, by rows
/// or by dimensions, gets `dot_sparse`'s bits.
pub fn sparse_lanes_sum(acc: &[f32; 8]) -> f32 {
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + 0.0
}

/// A query written out to [`VECTOR_DIMS`] entries, in a buffer that one task uses for
/// query after query: recall reads a query by dimension.
///
/// Why not [`Embedding::to_dense`] per query: that is 6 KiB allocated, zeroed and freed
/// for every NPC at every tick, a sparse query's few dozen entries in it. Here a sparse
/// query writes only its entries, and the next write clears only those (a dense one
/// clears everything).
#[derive(Clone, Debug)]
pub struct DenseQuery {
    entries: Vec<f32>,
    /// The entries the last sparse write set; `written_all` after a dense one.
    written: Vec<u16>,
    written_all: bool,
}

impl Default for DenseQuery {
    fn default() -> Self {
        Self {
            entries: vec![0.0; VECTOR_DIMS],
            written: Vec::new(),
            written_all: false,
        }
    }
}

impl DenseQuery {
    /// `query` written out: the entries [`Embedding::to_dense`] gives.
    pub fn write(&mut self, query: &Embedding) -> &[f32] {
        if std::mem::take(&mut self.written_all) {
            self.entries.fill(0.0);
        } else {
            for &i in &self.written {
                self.entries[usize::from(i)] = 0.0;
            }
        }
        self.written.clear();
        match query {
            Embedding::Dense(v) => {
                let n = v.len().min(VECTOR_DIMS);
                self.entries[..n].copy_from_slice(&v[..n]);
                self.written_all = true;
            }
            Embedding::Sparse { idx, val } => {
                for (&i, &x) in idx.iter().zip(val) {
                    if let Some(slot) = self.entries.get_mut(usize::from(i)) {
                        *slot = x;
                        self.written.push(i);
                    }
                }
            }
        }
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;

    /// `normalise` as written before it looked for unit vectors: the sum in order, then
    /// every entry divided.
    fn normalise_by_division(v: &mut [f32]) {
        let norm = v
            .iter()
            .map(|x| f64::from(*x) * f64::from(*x))
            .sum::<f64>()
            .sqrt();
        if norm > 0.0 {
            v.iter_mut()
                .for_each(|x| *x = (f64::from(*x) / norm) as f32);
        }
    }

    #[test]
    fn a_query_buffer_used_again_holds_each_query_as_written_out() {
        // Sparse and dense queries in turns (a dense one shorter than the width, one
        // sparse query with an index past it), each read back as written out afresh, by
        // the buffer used again and by `to_dense`.
        let mut next = lcg(5);
        let mut rand = || next() >> 33;
        let mut buffer = DenseQuery::default();
        for round in 0..200 {
            let query = match round % 3 {
                0 | 1 => {
                    let mut idx: Vec<u16> = (0..1 + rand() % 40)
                        .map(|_| (rand() % (VECTOR_DIMS as u64 + 4)) as u16)
                        .collect();
                    idx.sort_unstable();
                    idx.dedup();
                    let val = idx.iter().map(|_| 1.0 + (rand() % 100) as f32).collect();
                    Embedding::Sparse { idx, val }
                }
                _ => Embedding::Dense(
                    (0..VECTOR_DIMS - (rand() % 3) as usize)
                        .map(|_| (rand() % 7) as f32 - 3.0)
                        .collect(),
                ),
            };
            // Written out afresh, entry by entry: zeros, then the query's own.
            let mut fresh = vec![0.0f32; VECTOR_DIMS];
            match &query {
                Embedding::Dense(v) => fresh[..v.len()].copy_from_slice(v),
                Embedding::Sparse { idx, val } => {
                    for (&i, &x) in idx.iter().zip(val) {
                        if usize::from(i) < VECTOR_DIMS {
                            fresh[usize::from(i)] = x;
                        }
                    }
                }
            }
            assert_eq!(buffer.write(&query), fresh.as_slice(), "{round}");
            assert_eq!(query.to_dense(), fresh, "{round}");
        }
    }

    #[test]
    fn a_vector_left_as_it_is_for_being_unit_is_what_division_gives() {
        let mut next = lcg(3);
        let mut rand = || next() >> 33;
        let (mut skipped, mut divided) = (0, 0);
        for round in 0..3_000 {
            // Sparse like a hashing vector or dense like a provider's, normalised once
            // (so unit to rounding), then nudged off unit length by up to about 2^-24:
            // both sides of the check's threshold.
            let n = if round % 2 == 0 {
                1 + rand() as usize % 200
            } else {
                VECTOR_DIMS
            };
            let mut v: Vec<f32> = (0..n)
                .map(|_| (rand() % 2_000_001) as f32 / 1_000_000.0 - 1.0)
                .collect();
            normalise_by_division(&mut v);
            let nudge = 1.0 + ((rand() % 2001) as f64 - 1000.0) * 2f64.powi(-34);
            v.iter_mut()
                .for_each(|x| *x = (f64::from(*x) * nudge) as f32);
            let mut reference = v.clone();
            normalise_by_division(&mut reference);
            if unit_to_the_last_bit(&v) {
                skipped += 1;
            } else {
                divided += 1;
            }
            normalise(&mut v);
            assert!(
                v.iter()
                    .zip(&reference)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "round {round}"
            );
        }
        // Both paths were taken.
        assert!(
            skipped > 500 && divided > 500,
            "{skipped} skipped, {divided} divided"
        );
    }

    #[test]
    fn normalising_skips_zeros_without_changing_a_bit() {
        let mut next = lcg(7);
        for _ in 0..500 {
            let mut v = vec![0.0f32; VECTOR_DIMS];
            for _ in 0..200 {
                let state = next();
                let i = (state >> 33) as usize % VECTOR_DIMS;
                v[i] += ((state >> 20) % 2001) as f32 / 1000.0 - 1.0;
            }
            let mut plain = v.clone();
            normalise_by_division(&mut plain);
            normalise(&mut v);
            assert!(
                v.iter()
                    .zip(&plain)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
    }

    #[test]
    fn a_sparse_dot_has_the_bits_of_the_dense_one() {
        // A fixed LCG: many random sparse vectors against random dense queries.
        let mut next = lcg(42);
        let mut rand = || (next() >> 33) as u32;
        for round in 0..2_000 {
            let mut q: Vec<f32> = (0..VECTOR_DIMS)
                .map(|_| (rand() % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            normalise(&mut q);
            let mut v = vec![0.0f32; VECTOR_DIMS];
            for _ in 0..(1 + rand() as usize % SPARSE_MAX) {
                v[rand() as usize % VECTOR_DIMS] += (rand() % 2001) as f32 / 1000.0 - 1.0;
            }
            if round % 7 == 0 {
                v.iter_mut().for_each(|x| *x = 0.0);
            }
            normalise(&mut v);
            let (idx, val) = sparse(&v).expect("sparse enough");
            let dense = dot(&q, &v);
            let sparse = dot_sparse(&q, &idx, &val);
            assert_eq!(
                dense.to_bits(),
                sparse.to_bits(),
                "round {round}: {dense} vs {sparse}"
            );
        }
        let full = vec![0.5f32; VECTOR_DIMS];
        assert!(sparse(&full).is_none(), "dense vectors stay dense");
    }

    #[test]
    fn fitting_truncates_pads_and_normalises() {
        let long: Vec<f32> = (0..2000).map(|i| (i % 7) as f32).collect();
        let fitted = fit_dims(long, VECTOR_DIMS);
        assert_eq!(fitted.len(), VECTOR_DIMS);
        assert!((dot(&fitted, &fitted) - 1.0).abs() < 1e-4);

        let a = fit_dims(vec![3.0, 4.0], 4);
        assert_eq!(a, vec![0.6, 0.8, 0.0, 0.0]);
        let b = fit_dims(vec![4.0, 3.0], 4);
        let short_cos = (3.0 * 4.0 + 4.0 * 3.0) / 25.0;
        assert!(
            (dot(&a, &b) - short_cos).abs() < 1e-6,
            "padding keeps cosine"
        );
        assert_eq!(fit_dims(vec![0.0; 3], 5), vec![0.0; 5]);
    }
}
