-- Sweeps recorded in the database (`hearsay sweep … --sweep NAME`), so the shards of one
-- sweep, run as separate processes on separate machines (a Slurm array, a Kubernetes
-- Indexed Job), can be collected from here alone (`hearsay sweep --collect
-- --database-url URL --sweep NAME`).

-- What makes two shards parts of one sweep: the edited scenario's digest, every seed
-- and the number of shards. A shard of another sweep under the same name is refused.
CREATE TABLE sweeps (
    name       TEXT        PRIMARY KEY,
    scenario   TEXT        NOT NULL,
    digest     TEXT        NOT NULL,
    seeds      BIGINT[]    NOT NULL,
    shards     INTEGER     NOT NULL CHECK (shards >= 1),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per shard that started; `report` (the shard's shard.json) and `timing` (its
-- wall-clock figures) are set when it finishes. A shard running now holds the session
-- advisory lock hearsay derives from (name, shard), so no two processes run one shard.
CREATE TABLE sweep_shards (
    sweep       TEXT        NOT NULL REFERENCES sweeps (name) ON DELETE CASCADE,
    shard       INTEGER     NOT NULL CHECK (shard >= 1),
    host        TEXT        NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    report      TEXT,
    timing      TEXT,
    PRIMARY KEY (sweep, shard),
    CHECK ((finished_at IS NULL) = (report IS NULL))
);
