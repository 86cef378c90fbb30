-- The pgvector design's shape: one row per memory, embedding NULL until backfilled.
CREATE VIEW memories_with_embeddings AS
    SELECT m.*, v.embedding FROM memories m LEFT JOIN memory_vectors v USING (id);
