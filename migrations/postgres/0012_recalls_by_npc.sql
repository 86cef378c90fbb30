-- A tick's recall touches, one row per NPC that recalled (0011 kept one row per tick).
--
-- Why: the view `memories` derives each memory's recall state from the rows naming it,
-- and with one row per tick it had to unnest every touch of the run even to read one
-- NPC's memories — 12.9 s for one NPC of a run with 2.2 million memories and 9.5 million
-- touches (10,000 NPCs × 200 ticks, built in SQL; the whole run 16.3 s). An NPC recalls
-- only its own memories, so keyed by (run, NPC, tick) the rows of one NPC are found by
-- the key, and the view's join carries the NPC, so a query for one NPC reads that NPC's
-- rows alone. The writer sends each recalled memory's NPC with it.
DROP VIEW memories_with_embeddings;
DROP VIEW memories;

-- No key to `runs`: it would be checked for every row, as 0010 found for `memories`
-- (200 checks a tick at 200 NPCs); deleting a run deletes its rows by 0010's trigger.
CREATE TABLE memory_recalls (
    run_id BIGINT   NOT NULL,
    npc    INTEGER  NOT NULL,
    tick   BIGINT   NOT NULL,
    -- The NPC's memories recalled in the tick, each once, ascending.
    ids    BIGINT[] NOT NULL,
    PRIMARY KEY (run_id, npc, tick)
);
INSERT INTO memory_recalls (run_id, npc, tick, ids)
    SELECT t.run_id, m.npc, t.tick, array_agg(DISTINCT u.id ORDER BY u.id)
    FROM memory_recall_ticks t
    CROSS JOIN LATERAL unnest(t.ids) AS u(id)
    JOIN memory_rows m ON m.run_id = t.run_id AND m.id = u.id
    GROUP BY t.run_id, m.npc, t.tick;
DROP TABLE memory_recall_ticks;

-- As in 0011, with the NPC in the join: `WHERE run_id = … AND npc = …` reaches the
-- aggregate through it, and the key reads that NPC's rows.
CREATE VIEW memories AS
    SELECT m.run_id, m.id, m.npc, m.npc_name, m.kind, m.content, m.importance, m.tick_created,
           GREATEST(m.tick_last_recalled_0010, r.last) AS tick_last_recalled,
           m.source_npc, m.core, m.forgotten_tick, m.embedding_model, m.embedding_dims,
           m.recall_count_0010 + COALESCE(r.n, 0) AS recall_count,
           m.evidence
    FROM memory_rows m
    LEFT JOIN (SELECT t.run_id, t.npc, u.id, max(t.tick) AS last, count(*)::integer AS n
               FROM memory_recalls t CROSS JOIN LATERAL unnest(t.ids) AS u(id)
               GROUP BY t.run_id, t.npc, u.id) r
           ON r.run_id = m.run_id AND r.npc = m.npc AND r.id = m.id;

CREATE VIEW memories_with_embeddings AS
    SELECT m.*, v.embedding
    FROM memories m
    LEFT JOIN (SELECT run_id, id, COALESCE(embedding, sparse::vector) AS embedding
               FROM memory_vectors WHERE chunk = 0
               UNION ALL
               SELECT run_id, id, embedding FROM memory_vectors_archive WHERE chunk = 0) v
           USING (run_id, id);

CREATE OR REPLACE FUNCTION hearsay_delete_run_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_recalls WHERE run_id = OLD.id;
    DELETE FROM memory_vectors WHERE run_id = OLD.id;
    DELETE FROM memory_rows WHERE run_id = OLD.id;
    RETURN OLD;
END
$$;
