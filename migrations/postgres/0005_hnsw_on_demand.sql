-- The HNSW index is kept up to date on every vector written, and that was most of what a
-- tick waited for on PostgreSQL, yet recall takes it only for NPCs with more than
-- `exact_scan_max` (20,000) embedded memories — and at 1,000 memories per NPC the planner
-- preferred the (run, npc) index even on that path. It is no longer made by default:
-- hearsay uses it where it exists. For runs whose NPCs pass 20,000 memories, create it:
--   CREATE INDEX memory_vectors_hnsw ON memory_vectors USING hnsw (embedding vector_cosine_ops);
DROP INDEX IF EXISTS memory_vectors_hnsw;
