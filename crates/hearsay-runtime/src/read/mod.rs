//! The `read` wing: a recorded run read back. `source` opens a run (a run directory, or a
//! PostgreSQL run by id) and its store for reading; `inspect` shows one NPC's memories
//! and scores at any tick; `ask` interviews an NPC with its own brain; `trace` follows a fact hop by
//! hop, with the words at each. Nothing here
//! writes to a run.

pub mod ask;
pub mod inspect;
pub mod source;
pub mod trace;
