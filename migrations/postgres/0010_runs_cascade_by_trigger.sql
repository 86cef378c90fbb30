-- A memory's run is no longer checked row by row. The foreign key `memories.run_id →
-- runs` made PostgreSQL run a check for every memory inserted (a lookup of the run and
-- a share lock on it): 15 µs a row, about 7 of a tick write's 17 ms of server time on
-- rumour-200 (auto_explain with log_triggers: "Trigger for constraint
-- memories_run_id_fkey: time=8.747 calls=674"), and the tick write is what a
-- PostgreSQL tick waits for. Every statement that writes `memories` is hearsay's own,
-- for the run its writer created and holds (the advisory lock), so the check guarded
-- nothing hearsay could get wrong.
--
-- What the key also did — deleting a run (`DELETE FROM runs WHERE id = …`) took its
-- memories with it — a trigger on `runs` now does, once per run rather than once per
-- memory, and it takes the run's live vectors too (their own key went in 0007, which
-- left them behind). `memory_vectors_archive` and `memory_vectors_kept` still follow
-- `memories` by their keys; `checkpoints` keeps its key to `runs` (one row a tick).
CREATE FUNCTION hearsay_delete_run_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_vectors WHERE run_id = OLD.id;
    DELETE FROM memories WHERE run_id = OLD.id;
    RETURN OLD;
END
$$;

CREATE TRIGGER runs_delete_rows AFTER DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION hearsay_delete_run_rows();

ALTER TABLE memories DROP CONSTRAINT memories_run_id_fkey;
