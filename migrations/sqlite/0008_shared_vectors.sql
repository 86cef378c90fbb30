-- Identical vectors are stored once. Gossip repeats itself: the same sentence is heard,
-- remembered and embedded by many NPCs, and the same observation recurs (most memories
-- of a big town have a text an earlier memory has), so one blob per chunk stored each
-- vector many times over. A chunk now names its vector, kept once in `vector_blobs`;
-- the view `memory_vectors` gives the old shape (id, chunk, embedding) to every reader.
CREATE TABLE vector_blobs (
    vid       INTEGER PRIMARY KEY,
    -- Little-endian f32 × 1536, or the sparse form (the marker ff ff ff ff, then
    -- (u16 index, f32 value) pairs). Unique: a vector already here is shared, never
    -- written again.
    embedding BLOB    NOT NULL UNIQUE
);
-- No foreign key on `vid`: the store's statements keep it (a chunk names a blob written
-- in the same transaction, and a blob goes only when no chunk names it), and a key
-- would make every blob deletion scan this table.
CREATE TABLE memory_chunk_vectors (
    id    INTEGER NOT NULL REFERENCES memories (id),
    chunk INTEGER NOT NULL CHECK (chunk >= 0),
    vid   INTEGER NOT NULL,
    PRIMARY KEY (id, chunk)
) WITHOUT ROWID;

INSERT INTO vector_blobs (embedding)
    SELECT embedding FROM memory_vectors GROUP BY embedding ORDER BY min(id), min(chunk);
INSERT INTO memory_chunk_vectors (id, chunk, vid)
    SELECT v.id, v.chunk, b.vid FROM memory_vectors v JOIN vector_blobs b ON b.embedding = v.embedding;

DROP VIEW memories_with_embeddings;
DROP TABLE memory_vectors;
CREATE VIEW memory_vectors AS
    SELECT c.id, c.chunk, b.embedding FROM memory_chunk_vectors c JOIN vector_blobs b ON b.vid = c.vid;
-- As in 0005: one row per memory, its recall state and its first chunk's blob (NULL
-- until backfilled).
CREATE VIEW memories_with_embeddings AS
    SELECT m.*,
           COALESCE(r.tick_last_recalled, m.tick_created) AS tick_last_recalled,
           COALESCE(r.recall_count, 0) AS recall_count,
           v.embedding
    FROM memories m
    LEFT JOIN memory_recalls r ON r.id = m.id
    LEFT JOIN memory_vectors v ON v.id = m.id AND v.chunk = 0;
