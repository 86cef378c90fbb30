-- Recall touches (every memory an NPC recalls, every tick) move out of the wide memory
-- rows into a narrow table: a tick then rewrites a few pages, not one page per recalled
-- memory (measured at 1,000 NPCs: about 21 of 46 ms of each tick's transaction).
CREATE TABLE memory_recalls (
    id                 INTEGER PRIMARY KEY REFERENCES memories (id),
    tick_last_recalled INTEGER NOT NULL,
    recall_count       INTEGER NOT NULL CHECK (recall_count > 0)
);
INSERT INTO memory_recalls (id, tick_last_recalled, recall_count)
    SELECT id, tick_last_recalled, recall_count FROM memories WHERE recall_count > 0;

DROP VIEW memories_with_embeddings;
ALTER TABLE memories DROP COLUMN tick_last_recalled;
ALTER TABLE memories DROP COLUMN recall_count;

-- The pgvector design's shape, recall state included: one row per memory, embedding
-- (its first chunk) NULL until backfilled.
CREATE VIEW memories_with_embeddings AS
    SELECT m.*,
           COALESCE(r.tick_last_recalled, m.tick_created) AS tick_last_recalled,
           COALESCE(r.recall_count, 0) AS recall_count,
           v.embedding
    FROM memories m
    LEFT JOIN memory_recalls r ON r.id = m.id
    LEFT JOIN memory_vectors v ON v.id = m.id AND v.chunk = 0;
