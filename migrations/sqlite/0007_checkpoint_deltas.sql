-- Checkpoints may be deltas: the changes since the checkpoint before, so a tick saves
-- what changed rather than the whole world (which grows with the gossip). `base` is NULL
-- for a whole checkpoint; for a delta, the `next_tick` of the whole checkpoint its chain
-- starts from. A reader takes that one and applies the deltas after it in tick order.
ALTER TABLE checkpoints ADD COLUMN base INTEGER;
