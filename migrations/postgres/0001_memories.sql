-- hearsay on PostgreSQL + pgvector: many runs share one database.
-- Applied migrations are never edited; add a new file instead.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE runs (
    id         BIGSERIAL   PRIMARY KEY,
    name       TEXT        NOT NULL,
    seed       BIGINT      NOT NULL,
    -- The scenario file, verbatim, and the NPC names by id.
    scenario   TEXT        NOT NULL,
    npc_names  TEXT[]      NOT NULL,
    started_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- fillfactor 80 leaves room on each page, so refreshing tick_last_recalled (every recall)
-- is a HOT update: no new index entries.
CREATE TABLE memories (
    run_id             BIGINT   NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    -- Assigned by the simulation in creation order: the same ids as on SQLite.
    id                 BIGINT   NOT NULL,
    npc                INTEGER  NOT NULL,
    npc_name           TEXT     NOT NULL,
    kind               TEXT     NOT NULL
                       CHECK (kind IN ('observation', 'conversation', 'reflection', 'seed')),
    content            TEXT     NOT NULL,
    importance         SMALLINT NOT NULL CHECK (importance BETWEEN 1 AND 10),
    tick_created       BIGINT   NOT NULL,
    tick_last_recalled BIGINT   NOT NULL,
    -- The NPC whose words this memory records, if it was heard.
    source_npc         INTEGER,
    core               BOOLEAN  NOT NULL DEFAULT false,
    -- Archived (excluded from recall, never deleted) at this tick.
    forgotten_tick     BIGINT,
    -- The model and original width of the embedding; NULL until the backfill worker
    -- embeds the row (the "embedding IS NULL" of the pgvector design).
    embedding_model    TEXT,
    embedding_dims     INTEGER,
    PRIMARY KEY (run_id, id),
    CHECK ((embedding_model IS NULL) = (embedding_dims IS NULL))
) WITH (fillfactor = 80);

CREATE INDEX memories_by_npc ON memories (run_id, npc);
-- What the backfill worker claims (FOR UPDATE SKIP LOCKED), lowest id first.
CREATE INDEX memories_unembedded ON memories (run_id, id) WHERE embedding_model IS NULL;

-- The vectors, written once. They live apart from `memories` and are stored PLAIN (in
-- the row, not TOASTed): an exact per-NPC scan then reads ~1 page per vector instead of
-- de-TOASTing each one (measured: 1.5 ms against 9.8 ms for 1,000 vectors), and the
-- frequent updates of `memories` never copy a 6 KiB vector or touch the HNSW index.
CREATE TABLE memory_vectors (
    run_id    BIGINT       NOT NULL,
    id        BIGINT       NOT NULL,
    npc       INTEGER      NOT NULL,
    embedding vector(1536) NOT NULL,
    PRIMARY KEY (run_id, id),
    FOREIGN KEY (run_id, id) REFERENCES memories (run_id, id) ON DELETE CASCADE
);
ALTER TABLE memory_vectors ALTER COLUMN embedding SET STORAGE PLAIN;

CREATE INDEX memory_vectors_by_npc ON memory_vectors (run_id, npc);
CREATE INDEX memory_vectors_hnsw ON memory_vectors USING hnsw (embedding vector_cosine_ops);

-- The pgvector design's shape: one row per memory, embedding NULL until backfilled.
CREATE VIEW memories_with_embeddings AS
    SELECT m.*, v.embedding FROM memories m LEFT JOIN memory_vectors v USING (run_id, id);
