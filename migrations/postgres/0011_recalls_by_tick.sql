-- A tick's recall touches become one row: the ids of the memories recalled in it.
--
-- Why: a PostgreSQL tick waits for its writer, and the writer's largest statement updated
-- the `memories` row of every memory recalled in the tick (a new version of a ~200-byte
-- row each, found through the key: about 6 ms for 1,000 touches, measured with `\timing`
-- on a copy of rumour-200's rows; an upsert into a narrow table of (run, id, tick, count)
-- took 5 ms, one row per tick 0.3 ms). What a tick's recalls change is a function of
-- which memories it recalled, so that is what is kept; a memory's last recalled tick and
-- recall count are read from it (the view `memories`), and a rewind deletes the undone
-- ticks' rows instead of recomputing counts.
--
-- The table becomes `memory_rows` and `memories` a view with the table's columns, in
-- their order, so readers are unchanged. `memory_rows` keeps the recall state written
-- before this migration under new names (`*_0010`); rows written since carry their
-- creation tick and 0 there.
DROP VIEW memories_with_embeddings;
ALTER TABLE memories RENAME TO memory_rows;
ALTER TABLE memory_rows RENAME COLUMN tick_last_recalled TO tick_last_recalled_0010;
ALTER TABLE memory_rows RENAME COLUMN recall_count TO recall_count_0010;

CREATE TABLE memory_recall_ticks (
    run_id BIGINT   NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tick   BIGINT   NOT NULL,
    -- The memories recalled in the tick, each once, ascending.
    ids    BIGINT[] NOT NULL,
    PRIMARY KEY (run_id, tick)
);

-- A memory's recall state: the last tick whose row names it and how many rows do, over
-- what `memory_rows` kept from before. A query that reads neither column never reads
-- `memory_recall_ticks` (the join is on a unique key and PostgreSQL removes it).
CREATE VIEW memories AS
    SELECT m.run_id, m.id, m.npc, m.npc_name, m.kind, m.content, m.importance, m.tick_created,
           GREATEST(m.tick_last_recalled_0010, r.last) AS tick_last_recalled,
           m.source_npc, m.core, m.forgotten_tick, m.embedding_model, m.embedding_dims,
           m.recall_count_0010 + COALESCE(r.n, 0) AS recall_count,
           m.evidence
    FROM memory_rows m
    LEFT JOIN (SELECT t.run_id, u.id, max(t.tick) AS last, count(*)::integer AS n
               FROM memory_recall_ticks t CROSS JOIN LATERAL unnest(t.ids) AS u(id)
               GROUP BY t.run_id, u.id) r
           ON r.run_id = m.run_id AND r.id = m.id;

CREATE VIEW memories_with_embeddings AS
    SELECT m.*, v.embedding
    FROM memories m
    LEFT JOIN (SELECT run_id, id, COALESCE(embedding, sparse::vector) AS embedding
               FROM memory_vectors WHERE chunk = 0
               UNION ALL
               SELECT run_id, id, embedding FROM memory_vectors_archive WHERE chunk = 0) v
           USING (run_id, id);

-- Deleting a run (0010's trigger) deletes from the table, not the view.
CREATE OR REPLACE FUNCTION hearsay_delete_run_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_vectors WHERE run_id = OLD.id;
    DELETE FROM memory_rows WHERE run_id = OLD.id;
    RETURN OLD;
END
$$;
