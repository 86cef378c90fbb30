-- The brain that forgets: recall counts (every recall strengthens a memory), the
-- evidence a reflection cites, one vector per chunk of a long memory, and an archive
-- for the vectors of forgotten memories: out of the HNSW index, never deleted.

-- Ticks in which the memory was recalled; with tick_last_recalled and importance it
-- decides when the memory fades (forgotten_tick, from 0001, records when it did).
ALTER TABLE memories ADD COLUMN recall_count INTEGER NOT NULL DEFAULT 0;
-- For a reflection: the ids of the memories it was drawn from.
ALTER TABLE memories ADD COLUMN evidence BIGINT[];

-- Vectors keyed by (memory, chunk): content longer than `[memory] chunk_chars` is
-- embedded chunk by chunk, and recall scores a memory by its best chunk.
DROP VIEW memories_with_embeddings;
ALTER TABLE memory_vectors ADD COLUMN chunk INTEGER NOT NULL DEFAULT 0 CHECK (chunk >= 0);
ALTER TABLE memory_vectors DROP CONSTRAINT memory_vectors_pkey;
ALTER TABLE memory_vectors ADD PRIMARY KEY (run_id, id, chunk);

-- Where the vectors of archived memories go (moved by the backfill worker when idle,
-- off the tick): the live table, and its HNSW index, hold only what can be recalled.
CREATE TABLE memory_vectors_archive (
    run_id    BIGINT       NOT NULL,
    id        BIGINT       NOT NULL,
    chunk     INTEGER      NOT NULL,
    npc       INTEGER      NOT NULL,
    embedding vector(1536) NOT NULL,
    PRIMARY KEY (run_id, id, chunk),
    FOREIGN KEY (run_id, id) REFERENCES memories (run_id, id) ON DELETE CASCADE
);
CREATE INDEX memory_vectors_archive_by_npc ON memory_vectors_archive (run_id, npc);

-- The pgvector design's shape: one row per memory, embedding NULL until backfilled (the
-- first chunk's vector for a chunked memory, wherever it is kept).
CREATE VIEW memories_with_embeddings AS
    SELECT m.*, v.embedding
    FROM memories m
    LEFT JOIN (SELECT run_id, id, embedding FROM memory_vectors WHERE chunk = 0
               UNION ALL
               SELECT run_id, id, embedding FROM memory_vectors_archive WHERE chunk = 0) v
           USING (run_id, id);
