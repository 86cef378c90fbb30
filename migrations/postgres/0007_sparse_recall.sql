-- Recall's exact path computes the inner product of the query with every vector of the
-- NPC. The hashing embedder's vectors have a few dozen non-zero dimensions of 1,536 (35
-- on average in rumour-200, at most 54): a dense product is mostly zeros times zeros, and
-- each 6 kB row took a page of its own to read. Since this migration a vector with at
-- most 192 non-zero dimensions is kept sparse (`sparse`, `embedding` NULL): recall takes
-- the product over the non-zeros and reads a fraction of the bytes, and the backfill
-- writes them. Denser vectors (a real embedder's) stay dense, exactly one of the two is
-- set. Readers that want the dense vector take `COALESCE(embedding, sparse::vector)`: the
-- same values. The archives (`memory_vectors_archive`, `_kept`) stay dense: nothing
-- recalls from them. An HNSW index (made by a user, see 0005) indexes dense rows only, so
-- an NPC with sparse rows is always recalled exactly (cheap: its rows are small).
ALTER TABLE memory_vectors ADD COLUMN sparse sparsevec(1536);
ALTER TABLE memory_vectors ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE memory_vectors ADD CONSTRAINT memory_vectors_dense_or_sparse
    CHECK ((embedding IS NULL) <> (sparse IS NULL));

DROP VIEW memories_with_embeddings;
CREATE VIEW memories_with_embeddings AS
    SELECT m.*, v.embedding
    FROM memories m
    LEFT JOIN (SELECT run_id, id, COALESCE(embedding, sparse::vector) AS embedding
               FROM memory_vectors WHERE chunk = 0
               UNION ALL
               SELECT run_id, id, embedding FROM memory_vectors_archive WHERE chunk = 0) v
           USING (run_id, id);

-- The foreign key to `memories` is checked row by row with a plan made for whatever the
-- statistics say: for a run newer than them, PostgreSQL took `memories_by_npc` and read
-- all of the run's memories for each vector saved (measured: 640 ms for a batch of 213,
-- most of a tick). Every statement that writes here already takes its ids from
-- `memories` (`u.id IN (SELECT id FROM memories …)`), and a rewind deletes a run's vectors
-- before its memories, so the check added nothing hearsay relies on. (Deleting a run by
-- hand, `DELETE FROM runs`, no longer takes its live vectors with it: delete them first,
-- `DELETE FROM memory_vectors WHERE run_id = …`.)
ALTER TABLE memory_vectors DROP CONSTRAINT memory_vectors_run_id_id_fkey;
