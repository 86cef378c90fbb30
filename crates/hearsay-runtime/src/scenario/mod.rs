//! Scenario files: TOML as written ([`raw`]), then checked into a [`Scenario`] that the
//! rest of hearsay can trust (positions on the map, names unique, references resolved).
//!
//! Every problem is reported with the file, line and column, and nothing runs until the
//! file is clean.

mod brains;
mod check;
pub mod edit;
mod error;
mod expectations;
mod memory;
pub mod raw;
mod spec;
pub mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hearsay_core::ReflectSettings;
use hearsay_core::resources::Place;
use hearsay_core::{
    FactSpec, Grid, Language, Meaning, NpcSetup, Pos, ScheduledEvent, SeedMemory, WorldSetup,
};
use hearsay_memory::{Chunking, Forgetting, Scoring};
use toml::Spanned;

use error::Problems;
pub use error::{ScenarioError, ScenarioProblem};
use raw::{
    BrainProvider, EmbedderProvider, RawBaseUrl, RawBrain, RawEmbedder, RawFact, RawScenario,
    ResponseFormatKind, StoreKind, ThinkKind, Visibility,
};

/// Longest run a scenario may ask for.
pub const TICKS_MAX: u64 = 10_000_000;
/// Largest map side.
pub const MAP_SIDE_MAX: u32 = 100_000;
/// Largest `recall_k`.
pub const RECALL_K_MAX: u32 = 100;
/// Largest `short_term` window: every one of them is in every prompt.
pub const SHORT_TERM_MAX: u32 = 100;
/// Most retries of one call (brain or embedder).
pub const RETRIES_MAX: u32 = 20;
/// Longest first wait before a retry, in milliseconds.
pub const RETRY_BASE_MS_MAX: u64 = 60_000;
/// Largest `dimensions` an embedder may be asked for: the width vectors are stored at.
pub const DIMENSIONS_MAX: u32 = hearsay_memory::VECTOR_DIMS as u32;
/// Largest scenario file read, in bytes (a 100,000-NPC town is about 20 MB).
pub const FILE_BYTES_MAX: u64 = 64 * 1024 * 1024;
/// Most NPCs in one scenario.
pub const NPCS_MAX: usize = 100_000;
/// Most places, events, facts; most seed memories of one NPC; most `match` strings of
/// one fact.
pub const PLACES_MAX: usize = 100_000;
/// Most `[[events]]`.
pub const EVENTS_MAX: usize = 1_000_000;
/// Most `[[facts]]` (every memory is checked against every one).
pub const FACTS_MAX: usize = 1_000;
/// Most seed memories of one NPC.
pub const SEED_MEMORIES_MAX: usize = 10_000;
/// Most `match` strings of one fact.
pub const PATTERNS_MAX: usize = 100;
/// Longest name (scenario, NPC, place, fact, brain), in characters.
pub const NAME_CHARS_MAX: usize = 100;
/// Longest persona or event text, in characters: each goes into prompts whole.
pub const TEXT_CHARS_MAX: usize = 4_000;
/// Longest seed memory, in characters (embedded in chunks).
pub const MEMORY_CHARS_MAX: usize = 100_000;
/// Longest `match` string, in characters.
pub const PATTERN_CHARS_MAX: usize = 200;
/// A fact's `similarity` when its statement comes without one.
pub const SIMILARITY_DEFAULT: f64 = 0.8;
/// Largest hearing or sight radius: twice the largest map side already reaches every cell.
pub const RADIUS_MAX: u32 = 2 * MAP_SIDE_MAX;
/// Largest `max_listeners`.
pub const MAX_LISTENERS_MAX: u32 = 10_000;
/// The most memories one tick may add in the worst case (every NPC talks to
/// `max_listeners` others, witnesses an event and reflects): a tick that could add more is
/// refused at validation — lower `max_listeners` or the number of NPCs.
pub const MEMORIES_PER_TICK_MAX: u64 = 2_000_000;
/// Most texts in one embedding request.
pub const BATCH_MAX: u32 = 10_000;
/// Most vectors in the embedding cache.
pub const CACHE_ENTRIES_MAX: u32 = 10_000_000;
/// Most calls of one brain or embedder in flight at once.
pub const CONCURRENCY_MAX: u32 = 10_000;
/// Most replicas one `base_url` list may name.
pub const REPLICAS_MAX: usize = hearsay_brain::replicas::REPLICAS_MAX;
/// Largest `context_tokens`.
pub const CONTEXT_TOKENS_MAX: u32 = 10_000_000;
/// Longest `timeout_ms` of one request: ten minutes. A server slower than that is down.
pub const TIMEOUT_MS_MAX: u64 = 600_000;
/// Smallest and largest `max_response_bytes`.
pub const RESPONSE_BYTES: std::ops::RangeInclusive<u64> = 1024..=(256 * 1024 * 1024);
/// Default `max_response_bytes` of a brain: an answer is a few hundred bytes of JSON.
pub const BRAIN_RESPONSE_BYTES_DEFAULT: u64 = 256 * 1024;
/// Default `max_response_bytes` of an embedder, per text of a batch (a 3,072-dimension
/// vector is about 40 KB of JSON).
pub const EMBED_RESPONSE_BYTES_PER_TEXT: u64 = 64 * 1024;

/// The name of the default brain (`[brain]`).
pub const DEFAULT_BRAIN: &str = "default";

pub use check::{load, parse, read};
pub use spec::*;

use brains::{RemoteFields, brain_spec, refuse_remote_fields, remote_spec};
use check::*;
use expectations::expectation;
use memory::{in_range, memory_spec};

#[cfg(test)]
mod tests;
