-- Each distinct vector is still stored once, but the store keeps it so (it knows every
-- blob's vid by its digest, `BlobIds` in crates/hearsay-memory/src/sqlite.rs) instead of
-- a UNIQUE index on the blobs: that index held a copy of every blob, and each vector
-- written landed on a random page of it, a page written to the log again in every
-- transaction (docs/BENCHMARKS.md, the eighth round). `memories_unembedded` goes too:
-- the store finds the rows to embed in memory, and only the counts of a run's start and
-- end read `space IS NULL`, once each, while the index cost every insert and every
-- embedding's update.
DROP VIEW memories_with_embeddings;
DROP VIEW memory_vectors;

CREATE TABLE vector_blobs_new (
    vid       INTEGER PRIMARY KEY,
    -- Little-endian f32 × 1536, or the sparse form (the marker ff ff ff ff, then
    -- (u16 index, f32 value) pairs). Each distinct vector once: a vector already here is
    -- named again, never written again.
    embedding BLOB    NOT NULL
);
INSERT INTO vector_blobs_new (vid, embedding) SELECT vid, embedding FROM vector_blobs ORDER BY vid;
DROP TABLE vector_blobs;
ALTER TABLE vector_blobs_new RENAME TO vector_blobs;

DROP INDEX memories_unembedded;

CREATE VIEW memory_vectors AS
    SELECT c.id, c.chunk, b.embedding FROM memory_chunk_vectors c JOIN vector_blobs b ON b.vid = c.vid;
-- As in 0008: one row per memory, its recall state and its first chunk's blob (NULL
-- until backfilled).
CREATE VIEW memories_with_embeddings AS
    SELECT m.*,
           COALESCE(r.tick_last_recalled, m.tick_created) AS tick_last_recalled,
           COALESCE(r.recall_count, 0) AS recall_count,
           v.embedding
    FROM memories m
    LEFT JOIN memory_recalls r ON r.id = m.id
    LEFT JOIN memory_vectors v ON v.id = m.id AND v.chunk = 0;
