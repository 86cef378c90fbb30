-- The brain that forgets: recall counts (every recall strengthens a memory), the
-- evidence a reflection cites, and one vector per chunk of a long memory.

-- Ticks in which the memory was recalled; with tick_last_recalled and importance it
-- decides when the memory fades (forgotten_tick, from 0001, records when it did).
ALTER TABLE memories ADD COLUMN recall_count INTEGER NOT NULL DEFAULT 0;
-- For a reflection: the ids of the memories it was drawn from, as a JSON array.
ALTER TABLE memories ADD COLUMN evidence TEXT;

-- Vectors keyed by (memory, chunk): content longer than `[memory] chunk_chars` is
-- embedded chunk by chunk, and recall scores a memory by its best chunk.
DROP VIEW memories_with_embeddings;
CREATE TABLE memory_chunks (
    id        INTEGER NOT NULL REFERENCES memories (id),
    chunk     INTEGER NOT NULL CHECK (chunk >= 0),
    -- Little-endian f32 × memories.embedding_dims.
    embedding BLOB    NOT NULL,
    PRIMARY KEY (id, chunk)
);
INSERT INTO memory_chunks (id, chunk, embedding) SELECT id, 0, embedding FROM memory_vectors;
DROP TABLE memory_vectors;
ALTER TABLE memory_chunks RENAME TO memory_vectors;

CREATE INDEX memories_by_forgetting ON memories (forgotten_tick) WHERE forgotten_tick IS NOT NULL;

-- The pgvector design's shape: one row per memory, embedding NULL until backfilled (the
-- first chunk's vector for a chunked memory).
CREATE VIEW memories_with_embeddings AS
    SELECT m.*, v.embedding FROM memories m LEFT JOIN memory_vectors v ON v.id = m.id AND v.chunk = 0;
