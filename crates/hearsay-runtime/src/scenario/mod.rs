//! Scenario files: TOML as written ([`raw`]), then checked into a [`Scenario`] that the
//! rest of hearsay can trust (positions on the map, names unique, references resolved).
//!
//! Every problem is reported with the file, line and column, and nothing runs until the
//! file is clean.

mod error;
pub mod raw;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hearsay_core::ReflectSettings;
use hearsay_core::resources::Place;
use hearsay_core::{
    FactSpec, Grid, Language, NpcSetup, Pos, ScheduledEvent, SeedMemory, WorldSetup,
};
use hearsay_memory::{Chunking, Forgetting, Scoring};
use toml::Spanned;

use error::Problems;
pub use error::{ScenarioError, ScenarioProblem};
use raw::{
    BrainProvider, EmbedderProvider, RawBrain, RawEmbedder, RawScenario, ResponseFormatKind,
    StoreKind, Visibility,
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

/// Connection settings of an OpenAI-compatible endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSpec {
    /// Base URL (`…/v1`).
    pub base_url: String,
    /// Sent as `model` in every request, verbatim.
    pub model: String,
    /// Environment variable with the API key, if the server needs one.
    pub api_key_env: Option<String>,
    /// Per-request timeout.
    pub timeout_ms: u64,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First retry backoff.
    pub retry_base_ms: u64,
    /// Token bucket per minute.
    pub requests_per_minute: Option<u32>,
    /// The largest answer body read; a longer one fails the call.
    pub max_response_bytes: u64,
}

/// A validated OpenAI-compatible brain.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmSpec {
    /// Where and how to call.
    pub remote: RemoteSpec,
    /// Sampling temperature, 0–2 (default 0.7).
    pub temperature: f64,
    /// Tokens per answer.
    pub max_tokens: u32,
    /// How JSON is requested.
    pub response_format: ResponseFormatKind,
    /// Token budget per run.
    pub budget_tokens: Option<u64>,
    /// Call budget per run.
    pub budget_calls: Option<u64>,
    /// Consecutive failures that open the breaker.
    pub breaker_failures: u32,
    /// Ticks the breaker stays open.
    pub breaker_cooldown_ticks: u64,
    /// Tokens per request, prompt and answer, when the scenario says.
    pub context_tokens: Option<u32>,
}

/// A validated brain definition.
#[derive(Clone, Debug, PartialEq)]
pub struct BrainSpec {
    /// `heuristic` (offline, the default) or `openai`; `llm` is set only for `openai`.
    pub provider: BrainProvider,
    /// How many of this brain's calls may run at once.
    pub max_concurrency: usize,
    /// Settings of an OpenAI-compatible brain.
    pub llm: Option<LlmSpec>,
}

/// A validated embedder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmbedderSpec {
    /// Offline feature hashing.
    Hashing,
    /// An OpenAI-compatible `/embeddings` endpoint.
    Openai {
        /// Where and how to call.
        remote: RemoteSpec,
        /// `dimensions` to ask for.
        dimensions: Option<u32>,
    },
}

/// A validated `[memory]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct MemorySpec {
    /// Where memories live: SQLite in the run directory, or PostgreSQL.
    pub store: StoreKind,
    /// Memories recalled per NPC per tick.
    pub recall_k: usize,
    /// Whether a tick waits for earlier memories to be embedded.
    pub visibility: Visibility,
    /// Weights of relevance, recency and importance in recall, and the recency decay.
    pub scoring: Scoring,
    /// What turns memory text into vectors: offline hashing or an `/embeddings` API.
    pub embedder: EmbedderSpec,
    /// Texts per embedding request.
    pub batch_size: usize,
    /// Vectors kept in the embedding cache.
    pub cache_entries: usize,
    /// Backfill requests in flight at once.
    pub embed_concurrency: usize,
    /// Short-term window length.
    pub short_term: usize,
    /// How memories fade.
    pub forgetting: Forgetting,
    /// When NPCs reflect.
    pub reflect: ReflectSettings,
    /// How long contents are split for embedding.
    pub chunking: Chunking,
    /// Longest a tick waits at the barrier before going on (and counting it).
    pub barrier_timeout_ms: u64,
    /// Longest the end of a run waits for the backfill to drain.
    pub drain_timeout_ms: u64,
}

/// A validated NPC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpcSpec {
    /// Unique among NPCs; logs, tapes and `--npc` options name the NPC by it.
    pub name: String,
    /// Free-text description, trimmed; prompts include it whole.
    pub persona: String,
    /// The cell it spawns on, checked to lie on the map.
    pub at: Pos,
    /// What it knows at tick 0; these take the first memory ids, in NPC order.
    pub memories: Vec<SeedMemory>,
    /// Brain name (`default` or a `[brains.NAME]`).
    pub brain: String,
}

/// A scenario that passed validation.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The scenario's `name`; the default run directory is `runs/<name>-seed<seed>`.
    pub name: String,
    /// The root seed every RNG stream derives from.
    pub seed: u64,
    /// Number of ticks.
    pub ticks: u64,
    /// The language memories, observations and prompts are phrased in.
    pub language: Language,
    /// The map: cells `0..width` × `0..height`.
    pub grid: Grid,
    /// Talk reaches NPCs within this many cells (Euclidean, inclusive).
    pub hearing_radius: u32,
    /// NPCs, places and events within this many cells are seen (default 2 × hearing).
    pub sight_radius: u32,
    /// The most NPCs one talk reaches (the nearest).
    pub max_listeners: u32,
    /// `[[places]]` in scenario order; events refer to them by index.
    pub places: Vec<Place>,
    /// NPCs, in id order.
    pub npcs: Vec<NpcSpec>,
    /// `[[events]]` in scenario order, with their places resolved to indices.
    pub events: Vec<ScheduledEvent>,
    /// `[[facts]]` whose spread the run tracks, in scenario order.
    pub facts: Vec<FactSpec>,
    /// Brains by name (always contains [`DEFAULT_BRAIN`]).
    pub brains: BTreeMap<String, BrainSpec>,
    /// The `[memory]` section, with defaults filled in.
    pub memory: MemorySpec,
    /// Save a checkpoint every this many ticks (and after the last); 0 = never.
    pub checkpoint_every: u64,
    /// What the run should show (`[[expect]]`), checked when it ends.
    pub expectations: Vec<Expectation>,
    /// What validation noticed that does not stop a run (`path:line:col: note: …`), for
    /// `validate` and `run` to print.
    pub notes: Vec<String>,
}

/// What one `[[expect]]` asks for.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Expect {
    /// At least `share` of the NPCs know `fact`.
    ShareAtLeast {
        /// A name from `[[facts]]`.
        fact: String,
        /// 0–1.
        share: f64,
    },
    /// At most `share` of the NPCs know `fact`.
    ShareAtMost {
        /// A name from `[[facts]]`.
        fact: String,
        /// 0–1.
        share: f64,
    },
    /// At least `knowers` NPCs know `fact`.
    KnowersAtLeast {
        /// A name from `[[facts]]`.
        fact: String,
        /// A count of NPCs, at most the scenario's NPC count.
        knowers: u32,
    },
    /// `npc` knows `fact`.
    Knows {
        /// A name from `[[npcs]]`.
        npc: String,
        /// A name from `[[facts]]`.
        fact: String,
    },
    /// `npc` stands within `within` cells of `place`.
    Reaches {
        /// A name from `[[npcs]]`.
        npc: String,
        /// A name from `[[places]]`.
        place: String,
        /// How near counts.
        within: u32,
    },
}

/// A validated `[[expect]]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Expectation {
    /// What.
    #[serde(flatten)]
    pub what: Expect,
    /// By the end of this tick; `None`: by the end of the run.
    pub by_tick: Option<u64>,
}

impl Expectation {
    /// One line saying what is expected.
    pub fn describe(&self) -> String {
        let what = match &self.what {
            Expect::ShareAtLeast { fact, share } => {
                format!("at least {:.0}% of the NPCs know {fact:?}", share * 100.0)
            }
            Expect::ShareAtMost { fact, share } => {
                format!("at most {:.0}% of the NPCs know {fact:?}", share * 100.0)
            }
            Expect::KnowersAtLeast { fact, knowers } => {
                format!("at least {knowers} NPCs know {fact:?}")
            }
            Expect::Knows { npc, fact } => format!("{npc} knows {fact:?}"),
            Expect::Reaches { npc, place, within } if *within == 0 => {
                format!("{npc} reaches the {place}")
            }
            Expect::Reaches { npc, place, within } => {
                format!("{npc} comes within {within} cells of the {place}")
            }
        };
        match self.by_tick {
            Some(t) => format!("{what} by tick {t}"),
            None => format!("{what} by the end"),
        }
    }
}

impl Scenario {
    /// The kernel's view of tick 0.
    pub fn world_setup(&self) -> WorldSetup {
        WorldSetup {
            seed: self.seed,
            language: self.language,
            grid: self.grid,
            hearing_radius: self.hearing_radius,
            sight_radius: self.sight_radius,
            max_listeners: self.max_listeners,
            short_term_len: self.memory.short_term,
            reflect: self.memory.reflect,
            places: self.places.clone(),
            npcs: self
                .npcs
                .iter()
                .map(|n| NpcSetup {
                    name: n.name.clone(),
                    persona: n.persona.clone(),
                    at: n.at,
                    memories: n.memories.clone(),
                })
                .collect(),
            events: self.events.clone(),
            facts: self.facts.clone(),
        }
    }
}

/// Reads and validates the scenario at `path`.
pub fn load(path: &Path) -> Result<(Scenario, Vec<u8>), ScenarioError> {
    let bytes = read(path)?;
    let scenario = parse(path, &bytes)?;
    Ok((scenario, bytes))
}

/// The bytes of the scenario file at `path` (at most [`FILE_BYTES_MAX`]).
pub fn read(path: &Path) -> Result<Vec<u8>, ScenarioError> {
    read_bounded(path).map_err(|source| ScenarioError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Reads at most [`FILE_BYTES_MAX`] bytes of `path`, refusing a longer file (or a device
/// that never ends) instead of reading it whole.
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    if file.metadata()?.is_dir() {
        return Err(std::io::Error::other("it is a directory"));
    }
    let mut bytes = Vec::new();
    file.take(FILE_BYTES_MAX + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > FILE_BYTES_MAX {
        return Err(std::io::Error::other(format!(
            "it is larger than {} MiB, the most a scenario may be",
            FILE_BYTES_MAX / (1024 * 1024)
        )));
    }
    Ok(bytes)
}

/// Validates scenario `bytes`; `path` is only used in messages.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Scenario, ScenarioError> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(e) => {
            let lossy = String::from_utf8_lossy(bytes).into_owned();
            // Everything before the first invalid byte is copied unchanged by the lossy
            // conversion, so the offset still points at the bad byte.
            let at = e.valid_up_to();
            let mut problems = Problems::new(path, lossy);
            problems.add(
                at..at + 1,
                "the file is not valid UTF-8",
                Some("save the scenario as UTF-8 text"),
            );
            return Err(problems.into_error());
        }
    };
    let mut problems = Problems::new(path, text.clone());
    let raw: RawScenario = match toml::from_str(&text) {
        Ok(raw) => raw,
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            problems.add(span, toml_message(e.message()), toml_help(e.message()));
            return Err(problems.into_error());
        }
    };
    let scenario = check(raw, &mut problems);
    match scenario {
        Some(mut s) if problems.is_empty() => {
            s.notes = problems.take_notes();
            Ok(s)
        }
        _ => Err(problems.into_error()),
    }
}

/// The TOML parser's message, said in the scenario's terms where it is not.
fn toml_message(message: &str) -> String {
    let message = message.trim();
    if message == "wanted string or table" {
        // What the parser says of a number or list where a name (an enum) goes.
        "invalid type: expected a name in quotes".to_owned()
    } else {
        message.to_owned()
    }
}

fn toml_help(message: &str) -> Option<&'static str> {
    if message.trim() == "wanted string or table" {
        return Some("e.g. provider = \"openai\"; the names each key takes are in README.md");
    }
    if message.contains("unknown field") {
        Some("remove the key or fix its spelling; see the scenario format in README.md")
    } else if message.contains("missing field") {
        Some("add the key; see the scenario format in README.md")
    } else if message.contains("unknown variant") {
        Some("use one of the values listed")
    } else {
        None
    }
}

fn pos_on_map(problems: &mut Problems, at: &Spanned<[i32; 2]>, grid: Grid, what: &str) -> Pos {
    let pos = Pos::from(*at.get_ref());
    if !grid.contains(pos) {
        problems.add(
            at.span(),
            format!(
                "{what} at {pos} is off the map (x must be 0..{}, y 0..{})",
                grid.width.saturating_sub(1),
                grid.height.saturating_sub(1)
            ),
            Some("move it inside [world] width × height"),
        );
    }
    pos
}

fn importance(problems: &mut Problems, value: &Spanned<i64>) -> u8 {
    let v = *value.get_ref();
    if !(1..=10).contains(&v) {
        problems.add(
            value.span(),
            format!("importance {v} is outside 1–10"),
            None,
        );
        return 1;
    }
    v as u8
}

fn non_empty(problems: &mut Problems, s: &Spanned<String>, what: &str) -> String {
    let v = s.get_ref().trim().to_owned();
    if v.is_empty() {
        problems.add(s.span(), format!("{what} is empty"), None);
    }
    v
}

/// A name (of the scenario, an NPC, a place, a fact): not empty, one line of at most
/// [`NAME_CHARS_MAX`] characters, no control characters — names are printed in tables and
/// on terminals, where a newline or an escape would forge lines or drive the terminal.
fn checked_name(problems: &mut Problems, s: &Spanned<String>, what: &str) -> String {
    let v = non_empty(problems, s, what);
    if v.chars().any(hearsay_core::is_control) {
        problems.add(
            s.span(),
            format!("{what} holds a control character ({})", shown_controls(&v)),
            Some("names are one line of visible text"),
        );
    } else if v.chars().count() > NAME_CHARS_MAX {
        problems.add(
            s.span(),
            format!(
                "{what} is {} characters long; at most {NAME_CHARS_MAX}",
                v.chars().count()
            ),
            None,
        );
    }
    v
}

/// The control characters of `text`, escaped, for a message.
fn shown_controls(text: &str) -> String {
    let mut seen: Vec<String> = text
        .chars()
        .filter(|c| hearsay_core::is_control(*c))
        .map(|c| c.escape_unicode().to_string())
        .collect();
    seen.dedup();
    seen.truncate(3);
    seen.join(", ")
}

/// Refuses `text` longer than `max` characters, at `span`.
fn bounded_text(
    problems: &mut Problems,
    span: std::ops::Range<usize>,
    text: &str,
    max: usize,
    what: &str,
) {
    let n = text.chars().count();
    if n > max {
        problems.add(
            span,
            format!("{what} is {n} characters long; at most {max}"),
            None,
        );
    }
}

/// Refuses a list longer than `max` entries, at `span`.
fn bounded_count(
    problems: &mut Problems,
    span: std::ops::Range<usize>,
    n: usize,
    max: usize,
    what: &str,
) -> bool {
    if n > max {
        problems.add(span, format!("{n} {what}; at most {max}"), None);
        return false;
    }
    true
}

fn check(raw: RawScenario, problems: &mut Problems) -> Option<Scenario> {
    let name = checked_name(problems, &raw.name, "the scenario name");
    let ticks = *raw.ticks.get_ref();
    if ticks == 0 {
        problems.add(
            raw.ticks.span(),
            "ticks = 0: the run would do nothing",
            Some("set ticks to 1 or more"),
        );
    } else if ticks > TICKS_MAX {
        problems.add(
            raw.ticks.span(),
            format!("ticks = {ticks} is more than {TICKS_MAX}"),
            None,
        );
    }

    let w = &raw.world;
    for (side, v) in [("width", &w.width), ("height", &w.height)] {
        let n = *v.get_ref();
        if n == 0 || n > MAP_SIDE_MAX {
            problems.add(
                v.span(),
                format!("world {side} {n} must be 1..={MAP_SIDE_MAX}"),
                None,
            );
        }
    }
    let grid = Grid {
        width: *w.width.get_ref(),
        height: *w.height.get_ref(),
    };
    let hearing_radius = in_range(
        problems,
        Some(&w.hearing_radius),
        0..=RADIUS_MAX,
        &format!("hearing_radius must be 0..={RADIUS_MAX} cells"),
        Some("twice the largest map side already reaches every cell"),
        0,
    );
    let sight_radius = match &w.sight_radius {
        Some(s) => in_range(
            problems,
            Some(s),
            0..=RADIUS_MAX,
            &format!("sight_radius must be 0..={RADIUS_MAX} cells"),
            Some("twice the largest map side already reaches every cell"),
            hearing_radius,
        ),
        None => hearing_radius.saturating_mul(2).min(RADIUS_MAX),
    };
    let max_listeners = in_range(
        problems,
        w.max_listeners.as_ref(),
        1..=MAX_LISTENERS_MAX,
        &format!("max_listeners must be 1..={MAX_LISTENERS_MAX}"),
        Some("the most NPCs one talk reaches, nearest first"),
        hearsay_core::MAX_LISTENERS_DEFAULT,
    );
    if let Some(s) = &w.sight_radius
        && *s.get_ref() < hearing_radius
    {
        problems.add(
            s.span(),
            format!(
                "sight_radius {} is smaller than hearing_radius {hearing_radius}",
                s.get_ref()
            ),
            Some("an NPC must see whoever it can hear"),
        );
    }

    let mut places = Vec::new();
    let mut place_names = BTreeMap::new();
    let n_places = raw.places.len();
    if !bounded_count(problems, 0..0, n_places, PLACES_MAX, "places") {
        return None;
    }
    for p in &raw.places {
        let pname = checked_name(problems, &p.name, "a place name");
        let at = pos_on_map(problems, &p.at, grid, &format!("place {pname:?}"));
        if place_names.insert(pname.clone(), places.len()).is_some() {
            problems.add(
                p.name.span(),
                format!("place {pname:?} is defined twice"),
                None,
            );
        }
        places.push(Place { name: pname, at });
    }

    let mut brains = BTreeMap::new();
    let default_brain = raw
        .brain
        .clone()
        .unwrap_or_else(|| Spanned::new(0..0, RawBrain::default()));
    brains.insert(
        DEFAULT_BRAIN.to_owned(),
        brain_spec(problems, &default_brain, "[brain]"),
    );
    for (bname, b) in &raw.brains {
        if bname.chars().any(hearsay_core::is_control) || bname.chars().count() > NAME_CHARS_MAX {
            problems.add(
                b.span(),
                format!(
                    "brain name {bname:?} must be one line of at most {NAME_CHARS_MAX} visible characters"
                ),
                None,
            );
        }
        if bname == DEFAULT_BRAIN {
            problems.add(
                b.span(),
                format!("brain name {DEFAULT_BRAIN:?} is reserved for [brain]"),
                Some("rename it"),
            );
        }
        brains.insert(
            bname.clone(),
            brain_spec(problems, b, &format!("[brains.{bname}]")),
        );
    }

    if raw.npcs.is_empty() {
        problems.add(
            0..0,
            "no NPCs: the scenario needs at least one [[npcs]] table",
            Some("add [[npcs]] with name, persona and at"),
        );
    }
    if !bounded_count(problems, 0..0, raw.npcs.len(), NPCS_MAX, "NPCs") {
        return None;
    }
    let mut npcs = Vec::new();
    let mut npc_names = BTreeSet::new();
    for n in &raw.npcs {
        let nname = checked_name(problems, &n.name, "an NPC name");
        bounded_text(
            problems,
            n.name.span(),
            &n.persona,
            TEXT_CHARS_MAX,
            &format!("the persona of {nname:?}"),
        );
        bounded_count(
            problems,
            n.name.span(),
            n.memories.len(),
            SEED_MEMORIES_MAX,
            &format!("seed memories for {nname:?}"),
        );
        if !nname.is_empty() && !npc_names.insert(nname.clone()) {
            problems.add(
                n.name.span(),
                format!("NPC name {nname:?} is used twice"),
                Some("NPC names must be unique"),
            );
        }
        let at = pos_on_map(problems, &n.at, grid, &format!("NPC {nname:?}"));
        let mut memories = Vec::new();
        for m in n.memories.iter().take(SEED_MEMORIES_MAX) {
            let content = non_empty(problems, &m.content, "a memory's content");
            bounded_text(
                problems,
                m.content.span(),
                &content,
                MEMORY_CHARS_MAX,
                "a memory's content",
            );
            memories.push(SeedMemory {
                content,
                importance: importance(problems, &m.importance),
                core: m.core.unwrap_or(true),
            });
        }
        let brain = match &n.brain {
            Some(b) => {
                if !brains.contains_key(b.get_ref()) {
                    let known: Vec<&str> = brains.keys().map(String::as_str).collect();
                    problems.add(
                        b.span(),
                        format!("unknown brain {:?}", b.get_ref()),
                        Some(&format!(
                            "define [brains.{}] or use one of: {}",
                            b.get_ref(),
                            known.join(", ")
                        )),
                    );
                }
                b.get_ref().clone()
            }
            None => DEFAULT_BRAIN.to_owned(),
        };
        npcs.push(NpcSpec {
            name: nname,
            persona: n.persona.trim().to_owned(),
            at,
            memories,
            brain,
        });
    }

    let mut events = Vec::new();
    if !bounded_count(problems, 0..0, raw.events.len(), EVENTS_MAX, "events") {
        return None;
    }
    for e in &raw.events {
        let tick = *e.tick.get_ref();
        // Not an error: `--ticks` (or `--set ticks=`) may shorten a run on purpose.
        if ticks > 0 && tick >= ticks {
            problems.note(
                e.tick.span().start,
                format_args!(
                    "note: the event at tick {tick} never fires: this run has ticks 0..{}",
                    ticks - 1
                ),
            );
        }
        let place = match place_names.get(e.place.get_ref().trim()) {
            Some(&idx) => idx,
            None => {
                let known: Vec<&str> = place_names.keys().map(String::as_str).collect();
                let hint = if known.is_empty() {
                    "define it in [[places]]".to_owned()
                } else {
                    format!("known places: {}", known.join(", "))
                };
                problems.add(
                    e.place.span(),
                    format!("unknown place {:?}", e.place.get_ref()),
                    Some(&hint),
                );
                0
            }
        };
        let text = non_empty(problems, &e.text, "an event's text");
        bounded_text(
            problems,
            e.text.span(),
            &text,
            TEXT_CHARS_MAX,
            "an event's text",
        );
        let importance = e
            .importance
            .as_ref()
            .map_or(hearsay_core::memory::WITNESS_IMPORTANCE, |i| {
                importance(problems, i)
            });
        events.push(ScheduledEvent {
            tick,
            place,
            text,
            importance,
        });
    }

    let mut facts = Vec::new();
    let mut fact_names = BTreeSet::new();
    if !bounded_count(problems, 0..0, raw.facts.len(), FACTS_MAX, "facts") {
        return None;
    }
    for f in &raw.facts {
        let fname = checked_name(problems, &f.name, "a fact name");
        if !fname.is_empty() && !fact_names.insert(fname.clone()) {
            problems.add(
                f.name.span(),
                format!("fact {fname:?} is defined twice"),
                None,
            );
        }
        let patterns: Vec<String> = f
            .patterns
            .get_ref()
            .iter()
            .map(|p| p.trim().to_owned())
            .collect();
        bounded_count(
            problems,
            f.patterns.span(),
            patterns.len(),
            PATTERNS_MAX,
            "match strings",
        );
        if let Some(long) = patterns
            .iter()
            .find(|p| p.chars().count() > PATTERN_CHARS_MAX)
        {
            bounded_text(
                problems,
                f.patterns.span(),
                long,
                PATTERN_CHARS_MAX,
                "a match string",
            );
        }
        if patterns.is_empty() || patterns.iter().any(String::is_empty) {
            problems.add(
                f.patterns.span(),
                "match needs at least one non-empty string",
                Some("match = [\"words that only this fact's memories contain\"]"),
            );
        }
        facts.push(FactSpec {
            name: fname,
            patterns,
        });
    }

    let memory = memory_spec(problems, &raw.memory);
    // The worst tick: every NPC talks to `max_listeners` others (each hears and remembers;
    // the speaker remembers saying it), witnesses an event and reflects.
    let n = npcs.len() as u64;
    let per_tick = n
        .saturating_mul(1 + u64::from(max_listeners).min(n.saturating_sub(1)))
        .saturating_add(n)
        .saturating_add(n.saturating_mul(memory.reflect.insights_max as u64));
    if per_tick > MEMORIES_PER_TICK_MAX {
        let at = w
            .max_listeners
            .as_ref()
            .map_or(w.hearing_radius.span(), Spanned::span);
        problems.add(
            at,
            format!(
                "one tick could add {per_tick} memories ({n} NPCs, each talk heard by up to \
                 {}); at most {MEMORIES_PER_TICK_MAX}",
                u64::from(max_listeners).min(n.saturating_sub(1))
            ),
            Some("lower [world] max_listeners (the most NPCs one talk reaches) or the number of NPCs"),
        );
    }
    let places_known: Vec<&str> = places.iter().map(|p| p.name.as_str()).collect();
    let npcs_known: Vec<&str> = npcs.iter().map(|n| n.name.as_str()).collect();
    let facts_known: Vec<&str> = facts.iter().map(|f| f.name.as_str()).collect();
    let names = Known {
        npcs: &npcs_known,
        places: &places_known,
        facts: &facts_known,
    };
    let expectations = raw
        .expect
        .iter()
        .filter_map(|e| expectation(problems, e, &names, ticks, grid))
        .collect();
    Some(Scenario {
        name,
        seed: raw.seed,
        ticks,
        language: raw.language,
        grid,
        hearing_radius,
        sight_radius,
        max_listeners,
        places,
        npcs,
        events,
        facts,
        brains,
        memory,
        checkpoint_every: raw.run.checkpoint_every.unwrap_or(1),
        expectations,
        notes: Vec::new(),
    })
}

/// The names an `[[expect]]` may refer to.
struct Known<'a> {
    npcs: &'a [&'a str],
    places: &'a [&'a str],
    facts: &'a [&'a str],
}

fn one_of(
    problems: &mut Problems,
    value: &Spanned<String>,
    known: &[&str],
    what: &str,
    table: &str,
) -> String {
    let v = value.get_ref().trim();
    if !known.contains(&v) {
        let shown: Vec<&str> = known.iter().take(12).copied().collect();
        let hint = if known.is_empty() {
            format!("define it in {table}")
        } else {
            format!(
                "known {what}s: {}{}",
                shown.join(", "),
                if known.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            )
        };
        problems.add(value.span(), format!("unknown {what} {v:?}"), Some(&hint));
    }
    v.to_owned()
}

fn share(problems: &mut Problems, value: &Spanned<f64>) -> f64 {
    let v = *value.get_ref();
    if !(0.0..=1.0).contains(&v) {
        problems.add(
            value.span(),
            format!("a share is a fraction of the NPCs, from 0 to 1, not {v}"),
            Some("e.g. 0.5 for half of them"),
        );
    }
    v
}

fn expectation(
    problems: &mut Problems,
    spanned: &Spanned<raw::RawExpect>,
    known: &Known<'_>,
    ticks: u64,
    grid: Grid,
) -> Option<Expectation> {
    let e = spanned.get_ref();
    let at = spanned.span();
    const FORMS: &str = "fact = \"…\" with share_at_least, share_at_most or knowers_at_least; \
                         or npc = \"…\" with knows = \"fact\" or reaches = \"place\"";
    if let Some(t) = &e.by_tick
        && ticks > 0
        && *t.get_ref() >= ticks
    {
        problems.note(
            t.span().start,
            format_args!(
                "note: by_tick = {} is never reached: this run has ticks 0..{}, so the \
                 expectation will not be checked",
                t.get_ref(),
                ticks - 1
            ),
        );
    }
    if let (Some(w), None) = (&e.within, &e.reaches) {
        problems.add(w.span(), "within only goes with reaches", None);
    }
    // No two cells are farther apart than this, however distance is measured.
    let farthest = (u64::from(grid.width) + u64::from(grid.height)).saturating_sub(2);
    if let Some(w) = &e.within
        && u64::from(*w.get_ref()) >= farthest.max(1)
    {
        problems.add(
            w.span(),
            format!(
                "within = {} covers the whole {} × {} map: the expectation always holds",
                w.get_ref(),
                grid.width,
                grid.height
            ),
            Some("within is a distance in cells from the place"),
        );
    }
    let by_tick = e.by_tick.as_ref().map(|t| *t.get_ref());
    let what = match (&e.fact, &e.npc) {
        (Some(fact), None) => {
            let fact = one_of(problems, fact, known.facts, "fact", "[[facts]]");
            if let Some(k) = e.knows.as_ref().or(e.reaches.as_ref()) {
                problems.add(
                    k.span(),
                    "knows and reaches go with npc, not with fact",
                    Some(FORMS),
                );
            }
            let conditions = [
                e.share_at_least.is_some(),
                e.share_at_most.is_some(),
                e.knowers_at_least.is_some(),
            ]
            .iter()
            .filter(|c| **c)
            .count();
            if conditions != 1 {
                problems.add(
                    at,
                    format!(
                        "an [[expect]] about a fact needs exactly one of share_at_least, share_at_most, knowers_at_least ({conditions} given)"
                    ),
                    Some("write one [[expect]] per condition"),
                );
                return None;
            }
            if let Some(s) = &e.share_at_least {
                Expect::ShareAtLeast {
                    fact,
                    share: share(problems, s),
                }
            } else if let Some(s) = &e.share_at_most {
                Expect::ShareAtMost {
                    fact,
                    share: share(problems, s),
                }
            } else {
                let n = e.knowers_at_least.as_ref()?;
                if *n.get_ref() as usize > known.npcs.len() {
                    problems.add(
                        n.span(),
                        format!(
                            "knowers_at_least = {} can never be met: the scenario has {} NPCs",
                            n.get_ref(),
                            known.npcs.len()
                        ),
                        None,
                    );
                }
                Expect::KnowersAtLeast {
                    fact,
                    knowers: *n.get_ref(),
                }
            }
        }
        (None, Some(npc)) => {
            let npc = one_of(problems, npc, known.npcs, "NPC", "[[npcs]]");
            for (name, set) in [
                (
                    "share_at_least",
                    e.share_at_least.as_ref().map(Spanned::span),
                ),
                ("share_at_most", e.share_at_most.as_ref().map(Spanned::span)),
                (
                    "knowers_at_least",
                    e.knowers_at_least.as_ref().map(Spanned::span),
                ),
            ] {
                if let Some(span) = set {
                    problems.add(
                        span,
                        format!("{name} goes with fact, not with npc"),
                        Some(FORMS),
                    );
                }
            }
            match (&e.knows, &e.reaches) {
                (Some(fact), None) => Expect::Knows {
                    npc,
                    fact: one_of(problems, fact, known.facts, "fact", "[[facts]]"),
                },
                (None, Some(place)) => Expect::Reaches {
                    npc,
                    place: one_of(problems, place, known.places, "place", "[[places]]"),
                    within: e.within.as_ref().map_or(0, |w| *w.get_ref()),
                },
                _ => {
                    problems.add(
                        at,
                        "an [[expect]] about an NPC needs exactly one of knows, reaches",
                        Some(FORMS),
                    );
                    return None;
                }
            }
        }
        (Some(_), Some(_)) => {
            problems.add(
                at,
                "an [[expect]] is about a fact or about an NPC, not both",
                Some("write two [[expect]] entries"),
            );
            return None;
        }
        (None, None) => {
            problems.add(at, "an [[expect]] needs fact or npc", Some(FORMS));
            return None;
        }
    };
    Some(Expectation { what, by_tick })
}

/// The connection fields of a `[brain]` or `[memory.embedder]` table.
struct RemoteFields<'a> {
    base_url: &'a Option<Spanned<String>>,
    model: &'a Option<Spanned<String>>,
    api_key_env: &'a Option<Spanned<String>>,
    timeout_ms: &'a Option<Spanned<u64>>,
    max_retries: &'a Option<Spanned<u32>>,
    retry_base_ms: &'a Option<Spanned<u64>>,
    requests_per_minute: &'a Option<Spanned<u32>>,
    max_response_bytes: &'a Option<Spanned<u64>>,
}

impl RemoteFields<'_> {
    /// (name, span) of every field that is set.
    fn set(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        let mut out = Vec::new();
        let mut push = |name, span: Option<std::ops::Range<usize>>| {
            if let Some(span) = span {
                out.push((name, span));
            }
        };
        push("base_url", self.base_url.as_ref().map(Spanned::span));
        push("model", self.model.as_ref().map(Spanned::span));
        push("api_key_env", self.api_key_env.as_ref().map(Spanned::span));
        push("timeout_ms", self.timeout_ms.as_ref().map(Spanned::span));
        push("max_retries", self.max_retries.as_ref().map(Spanned::span));
        push(
            "retry_base_ms",
            self.retry_base_ms.as_ref().map(Spanned::span),
        );
        push(
            "requests_per_minute",
            self.requests_per_minute.as_ref().map(Spanned::span),
        );
        push(
            "max_response_bytes",
            self.max_response_bytes.as_ref().map(Spanned::span),
        );
        out
    }
}

/// Fields that only an OpenAI-compatible provider uses are errors elsewhere: a typo in
/// `provider` should not silently run offline.
fn refuse_remote_fields(
    problems: &mut Problems,
    set: Vec<(&'static str, std::ops::Range<usize>)>,
    section: &str,
) {
    for (name, span) in set {
        problems.add(
            span,
            format!("{name} in {section} is only used with provider = \"openai\""),
            Some("set provider = \"openai\", or remove the key"),
        );
    }
}

fn remote_spec(
    problems: &mut Problems,
    f: &RemoteFields<'_>,
    at: std::ops::Range<usize>,
    section: &str,
    response_bytes_default: u64,
) -> RemoteSpec {
    let mut required = |field: &Option<Spanned<String>>, name: &str, example: &str| match field {
        Some(v) if !v.get_ref().trim().is_empty() => v.get_ref().trim().to_owned(),
        Some(v) => {
            problems.add(v.span(), format!("{name} is empty"), Some(example));
            String::new()
        }
        None => {
            problems.add(
                at.clone(),
                format!("provider = \"openai\" in {section} needs {name}"),
                Some(example),
            );
            String::new()
        }
    };
    let base_url = required(
        f.base_url,
        "base_url",
        "e.g. base_url = \"http://127.0.0.1:8080/v1\"",
    );
    let model = required(f.model, "model", "e.g. model = \"gpt-4o-mini\"");
    if let Some(url) = f.base_url
        && !url.get_ref().trim().is_empty()
        && !(url.get_ref().starts_with("http://") || url.get_ref().starts_with("https://"))
    {
        problems.add(
            url.span(),
            "base_url must start with http:// or https://",
            None,
        );
    }
    let api_key_env = f.api_key_env.as_ref().and_then(|v| {
        let name = v.get_ref().trim();
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            problems.add(
                v.span(),
                "api_key_env must name an environment variable (letters, digits, _)",
                Some("the key itself never goes in the scenario"),
            );
        }
        valid.then(|| name.to_owned())
    });
    let timeout_ms = in_range(
        problems,
        f.timeout_ms.as_ref(),
        1..=TIMEOUT_MS_MAX,
        &format!("timeout_ms must be 1..={TIMEOUT_MS_MAX} (ten minutes)"),
        Some("the longest one request may take, answer included; a slower server is down"),
        30_000,
    );
    let max_response_bytes = in_range(
        problems,
        f.max_response_bytes.as_ref(),
        RESPONSE_BYTES,
        &format!(
            "max_response_bytes must be {}..={}",
            RESPONSE_BYTES.start(),
            RESPONSE_BYTES.end()
        ),
        Some("the largest answer read; a longer one fails the call"),
        response_bytes_default,
    );
    let requests_per_minute = match f.requests_per_minute {
        Some(r) if *r.get_ref() == 0 => {
            problems.add(
                r.span(),
                "requests_per_minute must be at least 1 (leave it out for no limit)",
                None,
            );
            None
        }
        Some(r) => Some(*r.get_ref()),
        None => None,
    };
    let retry_base_ms = in_range(
        problems,
        f.retry_base_ms.as_ref(),
        0..=RETRY_BASE_MS_MAX,
        &format!("retry_base_ms must be 0..={RETRY_BASE_MS_MAX}"),
        Some("the first wait before a retry; it doubles with every retry"),
        500,
    );
    RemoteSpec {
        base_url,
        model,
        api_key_env,
        timeout_ms,
        max_retries: in_range(
            problems,
            f.max_retries.as_ref(),
            0..=RETRIES_MAX,
            &format!("max_retries must be 0..={RETRIES_MAX}"),
            Some("each retry waits longer; a dead server is better reported than waited for"),
            4,
        ),
        retry_base_ms,
        requests_per_minute,
        max_response_bytes,
    }
}

fn brain_spec(problems: &mut Problems, spanned: &Spanned<RawBrain>, section: &str) -> BrainSpec {
    let b = spanned.get_ref();
    let provider = b
        .provider
        .as_ref()
        .map_or(BrainProvider::Heuristic, |p| *p.get_ref());
    let max_concurrency = in_range(
        problems,
        b.max_concurrency.as_ref(),
        1..=CONCURRENCY_MAX,
        &format!("max_concurrency must be 1..={CONCURRENCY_MAX}"),
        Some("the brain's calls in flight at once"),
        if provider == BrainProvider::Openai {
            8
        } else {
            64
        },
    ) as usize;
    let remote = RemoteFields {
        base_url: &b.base_url,
        model: &b.model,
        api_key_env: &b.api_key_env,
        timeout_ms: &b.timeout_ms,
        max_retries: &b.max_retries,
        retry_base_ms: &b.retry_base_ms,
        requests_per_minute: &b.requests_per_minute,
        max_response_bytes: &b.max_response_bytes,
    };
    let llm = match provider {
        BrainProvider::Heuristic => {
            let mut set = remote.set();
            let mut push = |name, span: Option<std::ops::Range<usize>>| {
                if let Some(span) = span {
                    set.push((name, span));
                }
            };
            push("temperature", b.temperature.as_ref().map(Spanned::span));
            push("max_tokens", b.max_tokens.as_ref().map(Spanned::span));
            push(
                "context_tokens",
                b.context_tokens.as_ref().map(Spanned::span),
            );
            push("budget_tokens", b.budget_tokens.as_ref().map(Spanned::span));
            push("budget_calls", b.budget_calls.as_ref().map(Spanned::span));
            push(
                "breaker_failures",
                b.breaker_failures.as_ref().map(Spanned::span),
            );
            push(
                "breaker_cooldown_ticks",
                b.breaker_cooldown_ticks.as_ref().map(Spanned::span),
            );
            refuse_remote_fields(problems, set, section);
            None
        }
        BrainProvider::Openai => {
            let at = b.provider.as_ref().map_or(spanned.span(), Spanned::span);
            let remote = remote_spec(problems, &remote, at, section, BRAIN_RESPONSE_BYTES_DEFAULT);
            let temperature = match &b.temperature {
                Some(t) if !(0.0..=2.0).contains(t.get_ref()) => {
                    problems.add(t.span(), "temperature must be between 0 and 2", None);
                    0.7
                }
                Some(t) => *t.get_ref(),
                None => 0.7,
            };
            let max_tokens = match &b.max_tokens {
                Some(t) if *t.get_ref() < 16 => {
                    problems.add(t.span(), "max_tokens below 16 cannot hold a decision", None);
                    16
                }
                Some(t) => *t.get_ref(),
                None => 256,
            };
            let context_tokens = b.context_tokens.as_ref().map(|c| {
                let v = *c.get_ref();
                if v <= max_tokens || v > CONTEXT_TOKENS_MAX {
                    problems.add(
                        c.span(),
                        format!(
                            "context_tokens must be more than max_tokens ({max_tokens}) and at most {CONTEXT_TOKENS_MAX}"
                        ),
                        Some("the tokens one request may hold, prompt and answer together"),
                    );
                }
                v
            });
            Some(LlmSpec {
                remote,
                temperature,
                max_tokens,
                context_tokens,
                response_format: b.response_format.unwrap_or_default(),
                budget_tokens: b.budget_tokens.as_ref().map(|v| *v.get_ref()),
                budget_calls: b.budget_calls.as_ref().map(|v| *v.get_ref()),
                breaker_failures: in_range(
                    problems,
                    b.breaker_failures.as_ref(),
                    1..=u32::MAX,
                    "breaker_failures must be at least 1",
                    Some("the consecutive failed calls that open the circuit breaker"),
                    5,
                ),
                breaker_cooldown_ticks: b
                    .breaker_cooldown_ticks
                    .as_ref()
                    .map_or(10, |v| *v.get_ref()),
            })
        }
    };
    BrainSpec {
        provider,
        max_concurrency,
        llm,
    }
}

/// `[memory.embedder]`, validated: (spec, batch size, cache entries, concurrency).
type EmbedderSettings = (EmbedderSpec, usize, usize, usize);

fn embedder_spec(
    problems: &mut Problems,
    spanned: Option<&Spanned<RawEmbedder>>,
) -> EmbedderSettings {
    let default = Spanned::new(0..0, RawEmbedder::default());
    let spanned = spanned.unwrap_or(&default);
    let e = spanned.get_ref();
    let provider = e
        .provider
        .as_ref()
        .map_or(EmbedderProvider::Hashing, |p| *p.get_ref());
    let remote = RemoteFields {
        base_url: &e.base_url,
        model: &e.model,
        api_key_env: &e.api_key_env,
        timeout_ms: &e.timeout_ms,
        max_retries: &e.max_retries,
        retry_base_ms: &e.retry_base_ms,
        requests_per_minute: &e.requests_per_minute,
        max_response_bytes: &e.max_response_bytes,
    };
    let batch_default = if provider == EmbedderProvider::Openai {
        64
    } else {
        256
    };
    let batch_size = in_range(
        problems,
        e.batch_size.as_ref(),
        1..=BATCH_MAX,
        &format!("batch_size must be 1..={BATCH_MAX}"),
        Some("texts per embedding request"),
        batch_default,
    ) as usize;
    let spec = match provider {
        EmbedderProvider::Hashing => {
            let mut set = remote.set();
            if let Some(d) = &e.dimensions {
                set.push(("dimensions", d.span()));
            }
            refuse_remote_fields(problems, set, "[memory.embedder]");
            EmbedderSpec::Hashing
        }
        EmbedderProvider::Openai => {
            let at = e.provider.as_ref().map_or(spanned.span(), Spanned::span);
            EmbedderSpec::Openai {
                remote: remote_spec(
                    problems,
                    &remote,
                    at,
                    "[memory.embedder]",
                    (batch_size as u64)
                        .saturating_mul(EMBED_RESPONSE_BYTES_PER_TEXT)
                        .clamp(BRAIN_RESPONSE_BYTES_DEFAULT, *RESPONSE_BYTES.end()),
                ),
                dimensions: e.dimensions.as_ref().map(|d| {
                    in_range(
                        problems,
                        Some(d),
                        1..=DIMENSIONS_MAX,
                        &format!("dimensions must be 1..={DIMENSIONS_MAX}"),
                        Some("vectors are stored with that many dimensions; leave it out for the model's own"),
                        DIMENSIONS_MAX,
                    )
                }),
            }
        }
    };
    let cache_entries = in_range(
        problems,
        e.cache_entries.as_ref(),
        0..=CACHE_ENTRIES_MAX,
        &format!("cache_entries must be 0..={CACHE_ENTRIES_MAX}"),
        Some("vectors kept in memory; each costs its dimensions × 4 bytes"),
        100_000,
    ) as usize;
    // The hashing embedder is CPU work: one batch at a time leaves the cores to ticks.
    let concurrency = in_range(
        problems,
        e.max_concurrency.as_ref(),
        1..=CONCURRENCY_MAX,
        &format!("max_concurrency must be 1..={CONCURRENCY_MAX}"),
        None,
        if provider == EmbedderProvider::Openai {
            4
        } else {
            1
        },
    ) as usize;
    (spec, batch_size, cache_entries, concurrency)
}

fn forget_spec(problems: &mut Problems, f: Option<&raw::RawForget>) -> Forgetting {
    let mut forgetting = Forgetting::default();
    let Some(f) = f else {
        return forgetting;
    };
    if let Some(t) = &f.threshold {
        let v = *t.get_ref();
        if !(0.0..1.0).contains(&v) {
            problems.add(
                t.span(),
                "threshold must be in [0, 1): the retention below which a memory is archived",
                Some("0 turns forgetting off"),
            );
        } else {
            forgetting.threshold = v;
        }
    }
    if let Some(st) = &f.strength {
        let v = *st.get_ref();
        if !(v.is_finite() && v > 0.0 && v <= 1e9) {
            problems.add(
                st.span(),
                "strength must be a number of ticks > 0 (per point of importance)",
                None,
            );
        } else {
            forgetting.strength_per_importance = v;
        }
    }
    if let Some(b) = &f.recall_boost {
        let v = *b.get_ref();
        if !(v.is_finite() && (0.0..=1e6).contains(&v)) {
            problems.add(b.span(), "recall_boost must be a finite number ≥ 0", None);
        } else {
            forgetting.recall_boost = v;
        }
    }
    forgetting
}

fn reflect_spec(problems: &mut Problems, r: Option<&raw::RawReflect>) -> ReflectSettings {
    let mut reflect = ReflectSettings::default();
    let Some(r) = r else {
        return reflect;
    };
    if let Some(t) = &r.threshold {
        reflect.threshold = *t.get_ref();
    }
    if let Some(e) = &r.evidence {
        let v = *e.get_ref();
        if v == 0 || v > 500 {
            problems.add(e.span(), "evidence must be 1..=500 memories", None);
        } else {
            reflect.evidence = v as usize;
        }
    }
    if let Some(i) = &r.insights {
        let v = *i.get_ref();
        if v == 0 || v > 10 {
            problems.add(i.span(), "insights must be 1..=10", None);
        } else {
            reflect.insights_max = v as usize;
        }
    }
    reflect
}

fn chunking_spec(problems: &mut Problems, m: &raw::RawMemory) -> Chunking {
    let mut chunking = Chunking::default();
    if let Some(c) = &m.chunk_chars {
        let v = *c.get_ref();
        if !(16..=100_000).contains(&v) {
            problems.add(c.span(), "chunk_chars must be 16..=100000 characters", None);
        } else {
            chunking.chars = v as usize;
        }
    }
    if let Some(o) = &m.chunk_overlap {
        let v = *o.get_ref() as usize;
        if v >= chunking.chars / 2 {
            problems.add(
                o.span(),
                format!(
                    "chunk_overlap must be less than half of chunk_chars ({})",
                    chunking.chars
                ),
                None,
            );
        } else {
            chunking.overlap = v;
        }
    } else {
        chunking.overlap = chunking.overlap.min(chunking.chars / 8);
    }
    chunking
}

fn memory_spec(problems: &mut Problems, m: &raw::RawMemory) -> MemorySpec {
    let recall_k = match &m.recall_k {
        Some(k) if *k.get_ref() == 0 || *k.get_ref() > RECALL_K_MAX => {
            problems.add(
                k.span(),
                format!("recall_k must be 1..={RECALL_K_MAX}"),
                None,
            );
            5
        }
        Some(k) => *k.get_ref() as usize,
        None => 5,
    };
    let mut scoring = Scoring::default();
    if let Some(s) = &m.scoring {
        for (field, value, target) in [
            ("w_rel", &s.w_rel, &mut scoring.w_rel),
            ("w_rec", &s.w_rec, &mut scoring.w_rec),
            ("w_imp", &s.w_imp, &mut scoring.w_imp),
        ] {
            if let Some(v) = value {
                if !v.get_ref().is_finite() || *v.get_ref() < 0.0 {
                    problems.add(
                        v.span(),
                        format!("{field} must be a finite number ≥ 0"),
                        None,
                    );
                } else {
                    *target = *v.get_ref();
                }
            }
        }
        if let Some(c) = &s.candidates {
            let v = *c.get_ref();
            if v == 0 || v > 10_000 {
                problems.add(c.span(), "candidates must be 1..=10000", None);
            } else {
                scoring.candidates = v as usize;
            }
        }
        if let Some(d) = &s.decay {
            let v = *d.get_ref();
            if !(v > 0.0 && v <= 1.0) {
                problems.add(
                    d.span(),
                    "decay must be in (0, 1]: the recency multiplier per tick",
                    None,
                );
            } else {
                scoring.decay = v;
            }
        }
    }
    let forgetting = forget_spec(problems, m.forget.as_ref());
    let reflect = reflect_spec(problems, m.reflect.as_ref());
    let chunking = chunking_spec(problems, m);
    let (embedder, batch_size, cache_entries, embed_concurrency) =
        embedder_spec(problems, m.embedder.as_ref());
    let short_term = in_range(
        problems,
        m.short_term.as_ref(),
        0..=SHORT_TERM_MAX,
        &format!("short_term must be 0..={SHORT_TERM_MAX} memories"),
        Some("they all go into every prompt"),
        5,
    ) as usize;
    let visibility = m.visibility.unwrap_or(match embedder {
        EmbedderSpec::Hashing => Visibility::Barrier,
        EmbedderSpec::Openai { .. } => Visibility::Eventual,
    });
    MemorySpec {
        store: m.store,
        recall_k,
        visibility,
        scoring,
        embedder,
        batch_size,
        cache_entries,
        embed_concurrency,
        short_term,
        forgetting,
        reflect,
        chunking,
        barrier_timeout_ms: in_range(
            problems,
            m.barrier_timeout_ms.as_ref(),
            1..=u64::MAX,
            "barrier_timeout_ms must be at least 1",
            Some("it bounds a wait; leave it out for the default"),
            120_000,
        ),
        drain_timeout_ms: in_range(
            problems,
            m.drain_timeout_ms.as_ref(),
            1..=u64::MAX,
            "drain_timeout_ms must be at least 1",
            Some("it bounds a wait; leave it out for the default"),
            60_000,
        ),
    }
}

/// A key's value if it is in `range`; otherwise `message` at the value and `default`
/// (so checking goes on), and `default` when the key is left out.
fn in_range<T: Copy + PartialOrd>(
    problems: &mut Problems,
    value: Option<&Spanned<T>>,
    range: std::ops::RangeInclusive<T>,
    message: &str,
    help: Option<&str>,
    default: T,
) -> T {
    match value {
        Some(v) if !range.contains(v.get_ref()) => {
            problems.add(v.span(), message, help);
            default
        }
        Some(v) => *v.get_ref(),
        None => default,
    }
}

#[cfg(test)]
mod tests;
