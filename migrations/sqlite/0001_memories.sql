-- hearsay embedded store: one SQLite file per run (memories.db in the run directory).
-- Applied migrations are never edited; add a new file instead.

CREATE TABLE run_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE memories (
    -- Assigned by the simulation in creation order, so it is the same on every backend.
    id                 INTEGER PRIMARY KEY,
    npc                INTEGER NOT NULL,
    npc_name           TEXT    NOT NULL,
    kind               TEXT    NOT NULL
                       CHECK (kind IN ('observation', 'conversation', 'reflection', 'seed')),
    content            TEXT    NOT NULL,
    importance         INTEGER NOT NULL CHECK (importance BETWEEN 1 AND 10),
    tick_created       INTEGER NOT NULL,
    tick_last_recalled INTEGER NOT NULL,
    -- The NPC whose words this memory records, if it was heard.
    source_npc         INTEGER,
    core               INTEGER NOT NULL DEFAULT 0 CHECK (core IN (0, 1)),
    -- Archived (excluded from recall, never deleted) at this tick.
    forgotten_tick     INTEGER,
    -- The model and width of the embedding; NULL until the backfill worker embeds the
    -- row (the "embedding IS NULL" of the pgvector design).
    embedding_model    TEXT,
    embedding_dims     INTEGER,
    CHECK ((embedding_model IS NULL) = (embedding_dims IS NULL))
);

-- The vectors themselves, written once. They live apart from `memories` because SQLite
-- rewrites a whole row on UPDATE: every recall refreshes tick_last_recalled, and a 6 KiB
-- vector in the same row would be rewritten with it.
CREATE TABLE memory_vectors (
    id        INTEGER PRIMARY KEY REFERENCES memories (id),
    -- Little-endian f32 × memories.embedding_dims.
    embedding BLOB    NOT NULL
);

CREATE INDEX memories_by_npc ON memories (npc, id);
CREATE INDEX memories_unembedded ON memories (id) WHERE embedding_model IS NULL;
