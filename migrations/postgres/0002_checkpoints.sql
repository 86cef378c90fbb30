-- World state at tick boundaries, written in the same statement as the tick's memories:
-- a run can resume from the last complete tick after a crash, or be forked.
CREATE TABLE checkpoints (
    run_id    BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    -- The tick that runs next.
    next_tick BIGINT NOT NULL,
    -- hearsay_core::checkpoint::Checkpoint as JSON.
    state     TEXT   NOT NULL,
    PRIMARY KEY (run_id, next_tick)
);
