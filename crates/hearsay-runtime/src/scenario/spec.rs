//! The validated scenario: what the rest of hearsay trusts (every position on the map,
//! every name unique, every reference resolved).

use super::*;

/// How often a run saves the world's state unless its scenario says (`[run]
/// checkpoint_every`): every ten ticks. A resume or a fork starts from the checkpoint at
/// or before its tick and runs the ticks after it again from the tape, which costs no
/// brain calls; saving after every tick cost the 10,000-NPC town about a tenth of its
/// ticks per second (docs/BENCHMARKS.md, the thirty-eighth round), and saving less often
/// than ten gained little more.
pub const CHECKPOINT_EVERY: u64 = 10;

/// Connection settings of an OpenAI-compatible endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteSpec {
    /// Base URLs (`…/v1`): one server, or the replicas of one model (at least one, at most
    /// [`REPLICAS_MAX`], none twice).
    pub base_urls: Vec<String>,
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
    /// Tokens per reflection answer (insights are longer than a decision).
    pub reflect_max_tokens: u32,
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
    /// When its NPCs think, and how long a failed reflection waits.
    pub mind: hearsay_core::Mind,
    /// A heuristic brain's chance of whispering a gossip to a neighbour who has not heard
    /// it rather than saying it aloud, 0 to 1 (`whisper`; always 0 for `openai`, whose
    /// model chooses for itself).
    pub whisper: f64,
    /// Heuristic only: the chance (0..=1) that a retelling changes one thing; 0 for
    /// `openai` (its model words its own speech).
    pub retell_noise: f64,
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
    /// [`CHECKPOINT_EVERY`] unless the scenario says.
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
                    mind: self
                        .brains
                        .get(&n.brain)
                        .map_or_else(hearsay_core::Mind::default, |b| b.mind),
                })
                .collect(),
            events: self.events.clone(),
            facts: self.facts.clone(),
        }
    }
}

impl BrainSpec {
    /// The brain's calls in flight at once: `max_concurrency` per replica of its server.
    pub fn slots(&self) -> usize {
        let replicas = self.llm.as_ref().map_or(1, |l| l.remote.base_urls.len());
        self.max_concurrency.saturating_mul(replicas.max(1))
    }
}

impl MemorySpec {
    /// Embedding requests in flight at once: `max_concurrency` per replica of the
    /// embedder's server.
    pub fn embed_slots(&self) -> usize {
        let replicas = match &self.embedder {
            EmbedderSpec::Hashing => 1,
            EmbedderSpec::Openai { remote, .. } => remote.base_urls.len(),
        };
        self.embed_concurrency.saturating_mul(replicas.max(1))
    }
}
