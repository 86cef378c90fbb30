//! Vectors as a SQLite store keeps them: the bytes of a blob (dense or sparse), each
//! distinct blob once in `vector_blobs` (migrations 0008 and 0011), and the store's own
//! map of the blobs the file holds, so that a save writes only the new ones and names
//! the rest without asking the file.

use super::writer::{chunk_statement, multi_row};

use crate::embed::{Embedding, VECTOR_DIMS};
use crate::store::StoreError;

/// `vector_blobs` as the store's one writer knows it: each blob's `vid` by its 128-bit
/// hash ([`digest`]), and the next free `vid`. Rebuilt from the file whenever
/// statements other than a save change the blobs (a rewind, a change of vector space);
/// a save adds its new blobs as it packs them, before they are written: the store
/// writes in order, and a failed write fails the store, so nothing is written after it
/// that could name a blob the file lacks.
#[derive(Debug, Default)]
pub(super) struct BlobIds {
    /// Keyed by [`digest`], which is a hash already: looked up without hashing it again.
    by_digest:
        std::collections::HashMap<u128, i64, std::hash::BuildHasherDefault<crate::index::Unhashed>>,
    next_vid: i64,
}

impl BlobIds {
    /// Every blob of the file, read over `conn`.
    pub(super) async fn load(conn: &mut sqlx::SqliteConnection) -> Result<BlobIds, StoreError> {
        let stored: Vec<(i64, Vec<u8>)> = sqlx::query_as("SELECT vid, embedding FROM vector_blobs")
            .fetch_all(&mut *conn)
            .await?;
        Ok(Self::of(stored.iter().map(|(vid, b)| (*vid, b.as_slice()))))
    }

    /// The map of `stored`, every blob of the file as `(vid, bytes)`.
    pub(super) fn of<'a>(stored: impl IntoIterator<Item = (i64, &'a [u8])>) -> BlobIds {
        let mut blobs = BlobIds::default();
        for (vid, bytes) in stored {
            blobs.by_digest.insert(digest(bytes), vid);
            blobs.next_vid = blobs.next_vid.max(vid + 1);
        }
        blobs
    }
}

/// A blob's XXH3-128: its key in [`BlobIds`], which only this process reads (the map is
/// rebuilt from the bytes whenever the store opens), so the hash is free to change.
///
/// Why not blake3, as before: every save hashes each memory's blob, a few hundred bytes,
/// and blake3 spreads only whole 1 KiB chunks over SIMD lanes, so a blob took it several
/// times as long as XXH3 — at 10,000 NPCs, some ten thousand blobs a tick on the
/// backfill's thread. What the key must do is tell distinct blobs apart, not resist
/// forgery: two blobs that collide would share a vector, and a run's blobs are its own
/// embedder's output. By chance, among a billion distinct blobs a 128-bit hash collides
/// with probability below 2^-68.
fn digest(blob: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(blob)
}

/// Chunks per `INSERT`: 3 parameters each.
const CHUNKS_PER_INSERT: usize = 256;

/// Vectors as the store writes them: the blobs the file lacks, end to end, with
/// `[vid, start, length]` for each (`start` 1-based, for SQLite's `substr`), and
/// `[id, chunk, vid]` for every chunk.
#[derive(Debug)]
pub(super) struct PackedVectors {
    blobs: Vec<u8>,
    new_blobs: Vec<[i64; 3]>,
    chunks: Vec<[i64; 3]>,
}

impl PackedVectors {
    /// Packs `(memory id, chunk, blob)` triples. `known` learns the new blobs' `vid`s at
    /// once (see [`BlobIds`]).
    pub(super) fn pack(
        rows: impl IntoIterator<Item = (i64, i64, Vec<u8>)>,
        known: &mut BlobIds,
    ) -> PackedVectors {
        let mut packed = PackedVectors {
            blobs: Vec::new(),
            new_blobs: Vec::new(),
            chunks: Vec::new(),
        };
        for (id, chunk, blob) in rows {
            let key = digest(&blob);
            let vid = match known.by_digest.get(&key) {
                Some(&vid) => vid,
                None => {
                    let vid = known.next_vid.max(1);
                    known.next_vid = vid + 1;
                    known.by_digest.insert(key, vid);
                    let start = packed.blobs.len() as i64 + 1;
                    packed.blobs.extend_from_slice(&blob);
                    packed.new_blobs.push([vid, start, blob.len() as i64]);
                    vid
                }
            };
            packed.chunks.push([id, chunk, vid]);
        }
        packed
    }

    /// Writes the new blobs, then every chunk naming its blob (a chunk already there is
    /// left as it is). The new blobs travel as one parameter with a JSON array of where
    /// each lies in it; the chunks as bound values, [`CHUNKS_PER_INSERT`] rows to a
    /// statement (one prepared statement for every full one): a JSON array unpacked by
    /// `jsonb_each` cost three `->>` extractions per row, more than binding the values,
    /// as the memories' rows had found (`insert_rows`).
    pub(super) async fn write(self, tx: &mut sqlx::SqliteConnection) -> Result<(), StoreError> {
        let json = |v: &[[i64; 3]]| {
            serde_json::to_string(v)
                .map_err(|e| StoreError::Corrupt(format!("cannot encode a batch of vectors: {e}")))
        };
        if !self.new_blobs.is_empty() {
            let at = json(&self.new_blobs)?;
            sqlx::query(
                "INSERT INTO vector_blobs (vid, embedding) \
                 SELECT r.value ->> 0, substr(?1, r.value ->> 1, r.value ->> 2) \
                 FROM jsonb_each(?2) r",
            )
            // Moved, not copied: sqlx copies a slice into a fresh `Vec`.
            .bind(self.blobs)
            .bind(at)
            .execute(&mut *tx)
            .await?;
        }
        static FULL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let insert = |n: usize| {
            multi_row(
                "INSERT INTO memory_chunk_vectors (id, chunk, vid) VALUES ",
                "(?,?,?)",
                n,
                " ON CONFLICT (id, chunk) DO NOTHING",
            )
        };
        for rows in self.chunks.chunks(CHUNKS_PER_INSERT) {
            let sql = chunk_statement(&FULL, CHUNKS_PER_INSERT, rows.len(), insert);
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for [id, chunk, vid] in rows {
                query = query.bind(id).bind(chunk).bind(vid);
            }
            query.execute(&mut *tx).await?;
        }
        Ok(())
    }
}

/// Encodes a vector as little-endian f32 bytes (see [`encode_embedding`]).
pub fn encode_vector(v: &[f32]) -> Vec<u8> {
    encode_embedding(&Embedding::of_fitted(v.to_vec()))
}

/// Encodes a fitted vector: a dense one as little-endian f32 bytes; a sparse one (the
/// hashing embedder's have a few dozen non-zero entries of 1536) as a marker, then
/// (u16 index, f32 value) pairs: 4 + 6·n bytes, never the 4·1536 of a dense one, so the
/// length tells them apart.
pub fn encode_embedding(v: &Embedding) -> Vec<u8> {
    match v {
        Embedding::Sparse { idx, val } => {
            let mut out = Vec::with_capacity(4 + 6 * idx.len());
            out.extend_from_slice(&SPARSE_MARKER);
            for (i, x) in idx.iter().zip(val) {
                out.extend_from_slice(&i.to_le_bytes());
                out.extend_from_slice(&x.to_le_bytes());
            }
            out
        }
        Embedding::Dense(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// The first bytes of a sparse vector blob (a NaN, which no dense vector holds).
const SPARSE_MARKER: [u8; 4] = [0xff, 0xff, 0xff, 0xff];

/// Decodes a vector blob, dense (little-endian f32s) or sparse (see [`encode_vector`]),
/// to its 1536 values.
pub fn decode_vector(bytes: &[u8]) -> Option<Vec<f32>> {
    if bytes.len() != VECTOR_DIMS * 4 && bytes.starts_with(&SPARSE_MARKER) {
        let pairs = &bytes[4..];
        if !pairs.len().is_multiple_of(6) {
            return None;
        }
        let mut v = vec![0.0f32; VECTOR_DIMS];
        for p in pairs.chunks_exact(6) {
            let i = usize::from(u16::from_le_bytes([p[0], p[1]]));
            *v.get_mut(i)? = f32::from_le_bytes([p[2], p[3], p[4], p[5]]);
        }
        return Some(v);
    }
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}
