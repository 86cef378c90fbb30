-- A memory's row keeps its content and numbers, and names what repeats by a small
-- integer: its kind (`memory_kinds`), the model and width that embedded it
-- (`vector_spaces`, NULL until embedded: the "embedding IS NULL" of the pgvector design)
-- and, through `npc`, its NPC's name (`npcs`). Those three were a third of every row
-- beside its content, and `memories` was most of `memories.db` (docs/BENCHMARKS.md,
-- the seventh round). The view `memories` gives every reader the old shape, column for
-- column; hearsay writes `memory_rows`.
CREATE TABLE memory_kinds (
    kind INTEGER PRIMARY KEY,
    name TEXT    NOT NULL UNIQUE
);
INSERT INTO memory_kinds (kind, name)
    VALUES (0, 'observation'), (1, 'conversation'), (2, 'reflection'), (3, 'seed');

CREATE TABLE vector_spaces (
    space INTEGER PRIMARY KEY,
    model TEXT    NOT NULL,
    dims  INTEGER NOT NULL,
    UNIQUE (model, dims)
);
INSERT INTO vector_spaces (model, dims)
    SELECT DISTINCT embedding_model, embedding_dims FROM memories
    WHERE embedding_model IS NOT NULL ORDER BY 1, 2;

-- The run's NPCs by id; the store adds the names it is opened with.
CREATE TABLE npcs (
    npc  INTEGER PRIMARY KEY,
    name TEXT    NOT NULL
);
INSERT INTO npcs (npc, name) SELECT npc, min(npc_name) FROM memories GROUP BY npc;

CREATE TABLE memory_rows (
    -- Assigned by the simulation in creation order, so it is the same on every backend.
    id             INTEGER PRIMARY KEY,
    npc            INTEGER NOT NULL,
    -- memory_kinds.kind (0 and 1, observations and conversations, take no bytes).
    kind           INTEGER NOT NULL CHECK (kind BETWEEN 0 AND 3),
    content        TEXT    NOT NULL,
    importance     INTEGER NOT NULL CHECK (importance BETWEEN 1 AND 10),
    tick_created   INTEGER NOT NULL,
    -- The NPC whose words this memory records, if it was heard.
    source_npc     INTEGER,
    core           INTEGER NOT NULL DEFAULT 0 CHECK (core IN (0, 1)),
    -- Archived (excluded from recall, never deleted) at this tick.
    forgotten_tick INTEGER,
    -- vector_spaces.space of the embedding; NULL until the backfill worker embeds it.
    space          INTEGER,
    -- A reflection's evidence: the ids of the memories it drew on, as a JSON array.
    evidence       TEXT
);
INSERT INTO memory_rows
    (id, npc, kind, content, importance, tick_created, source_npc, core, forgotten_tick,
     space, evidence)
    SELECT m.id, m.npc, k.kind, m.content, m.importance, m.tick_created, m.source_npc,
           m.core, m.forgotten_tick, s.space, m.evidence
    FROM memories m
    JOIN memory_kinds k ON k.name = m.kind
    LEFT JOIN vector_spaces s ON s.model = m.embedding_model AND s.dims = m.embedding_dims
    ORDER BY m.id;

-- The tables whose keys named `memories` now name `memory_rows`, their rows as they were.
DROP VIEW memories_with_embeddings;
DROP VIEW memory_vectors;

CREATE TABLE memory_recalls_new (
    id                 INTEGER PRIMARY KEY REFERENCES memory_rows (id),
    tick_last_recalled INTEGER NOT NULL,
    recall_count       INTEGER NOT NULL CHECK (recall_count > 0)
);
INSERT INTO memory_recalls_new SELECT id, tick_last_recalled, recall_count FROM memory_recalls;
DROP TABLE memory_recalls;
ALTER TABLE memory_recalls_new RENAME TO memory_recalls;

CREATE TABLE memory_chunk_vectors_new (
    id    INTEGER NOT NULL REFERENCES memory_rows (id),
    chunk INTEGER NOT NULL CHECK (chunk >= 0),
    vid   INTEGER NOT NULL,
    PRIMARY KEY (id, chunk)
) WITHOUT ROWID;
INSERT INTO memory_chunk_vectors_new SELECT id, chunk, vid FROM memory_chunk_vectors;
DROP TABLE memory_chunk_vectors;
ALTER TABLE memory_chunk_vectors_new RENAME TO memory_chunk_vectors;

CREATE TABLE memory_vectors_kept_new (
    id        INTEGER NOT NULL REFERENCES memory_rows (id),
    -- The model and original width that made the vector.
    model     TEXT    NOT NULL,
    dims      INTEGER NOT NULL,
    chunk     INTEGER NOT NULL CHECK (chunk >= 0),
    -- Little-endian f32 × 1536, or the sparse form (see memory_vectors).
    embedding BLOB    NOT NULL,
    PRIMARY KEY (model, dims, id, chunk)
);
INSERT INTO memory_vectors_kept_new SELECT id, model, dims, chunk, embedding FROM memory_vectors_kept;
DROP TABLE memory_vectors_kept;
ALTER TABLE memory_vectors_kept_new RENAME TO memory_vectors_kept;
CREATE INDEX memory_vectors_kept_by_id ON memory_vectors_kept (id);

DROP TABLE memories;
CREATE INDEX memories_unembedded ON memory_rows (id) WHERE space IS NULL;
CREATE INDEX memories_by_forgetting ON memory_rows (forgotten_tick) WHERE forgotten_tick IS NOT NULL;

-- The old shape, column for column.
CREATE VIEW memories AS
    SELECT m.id, m.npc, n.name AS npc_name, k.name AS kind, m.content, m.importance,
           m.tick_created, m.source_npc, m.core, m.forgotten_tick,
           s.model AS embedding_model, s.dims AS embedding_dims, m.evidence
    FROM memory_rows m
    JOIN memory_kinds k ON k.kind = m.kind
    LEFT JOIN npcs n ON n.npc = m.npc
    LEFT JOIN vector_spaces s ON s.space = m.space;
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
