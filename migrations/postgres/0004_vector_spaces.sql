-- One vector space per run: recall compares vectors of one embedding model only. When a
-- fork or a resume changes the model, the vectors of the old one move here (kept, never
-- deleted; out of the HNSW index) and their memories are embedded again; a return to the
-- old model moves them back instead of embedding anything. `memory_vectors` and
-- `memory_vectors_archive` hold only vectors of the model in memories.embedding_model,
-- the run's current one.
CREATE TABLE memory_vectors_kept (
    run_id    BIGINT       NOT NULL,
    id        BIGINT       NOT NULL,
    -- The model and original width that made the vector.
    model     TEXT         NOT NULL,
    dims      INTEGER      NOT NULL,
    chunk     INTEGER      NOT NULL CHECK (chunk >= 0),
    npc       INTEGER      NOT NULL,
    embedding vector(1536) NOT NULL,
    PRIMARY KEY (run_id, model, dims, id, chunk),
    FOREIGN KEY (run_id, id) REFERENCES memories (run_id, id) ON DELETE CASCADE
);
CREATE INDEX memory_vectors_kept_by_id ON memory_vectors_kept (run_id, id);
