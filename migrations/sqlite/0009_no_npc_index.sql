-- No statement of the SQLite store reads memories by NPC through an index: recall is the
-- in-memory index's, and `memories_of` (inspect, ask, the end of a run with facts by
-- meaning) scans the table — its `?1 IS NULL OR m.npc = ?1` takes no index, as
-- `EXPLAIN QUERY PLAN` shows. `memories_by_npc` only cost every insert a write in a page
-- of its NPC's (a town of 1,000 NPCs dirties 1,000 scattered pages a tick) and, in the
-- P3 town, 22 of the 239 bytes per NPC-tick of `memories.db`. PostgreSQL keeps its own:
-- its recall statements read by NPC.
DROP INDEX memories_by_npc;
