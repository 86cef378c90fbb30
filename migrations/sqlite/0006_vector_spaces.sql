-- One vector space per run: recall compares vectors of one embedding model only. When a
-- fork or a resume changes the model, the vectors of the old one move here (kept, never
-- deleted) and their memories are embedded again; a return to the old model moves them
-- back instead of embedding anything. `memory_vectors` holds only vectors of the model in
-- memories.embedding_model, the store's current one.
CREATE TABLE memory_vectors_kept (
    id        INTEGER NOT NULL REFERENCES memories (id),
    -- The model and original width that made the vector.
    model     TEXT    NOT NULL,
    dims      INTEGER NOT NULL,
    chunk     INTEGER NOT NULL CHECK (chunk >= 0),
    -- Little-endian f32 × 1536, or the sparse form (see memory_vectors).
    embedding BLOB    NOT NULL,
    PRIMARY KEY (model, dims, id, chunk)
);
CREATE INDEX memory_vectors_kept_by_id ON memory_vectors_kept (id);
