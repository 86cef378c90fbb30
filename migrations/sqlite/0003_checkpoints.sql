-- World state at tick boundaries, written in the same transaction as the tick's
-- memories: a run can resume from the last complete tick after a crash.
CREATE TABLE checkpoints (
    -- The tick that runs next.
    next_tick INTEGER PRIMARY KEY,
    -- hearsay_core::checkpoint::Checkpoint as JSON.
    state     TEXT    NOT NULL
);
