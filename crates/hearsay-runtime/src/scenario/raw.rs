//! The scenario file exactly as written: serde types with `deny_unknown_fields`, spans
//! kept wherever validation may need to point at a value.

use std::collections::BTreeMap;

use hearsay_core::Language;
use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    /// Scenario name (used for the default run directory).
    pub name: Spanned<String>,
    /// Root seed.
    #[serde(default)]
    pub seed: u64,
    /// Number of ticks.
    pub ticks: Spanned<u64>,
    /// `en` or `zh`.
    #[serde(default)]
    pub language: Language,
    /// `[world]`.
    pub world: RawWorld,
    /// `[[places]]`.
    #[serde(default)]
    pub places: Vec<RawPlace>,
    /// `[[npcs]]`.
    #[serde(default)]
    pub npcs: Vec<RawNpc>,
    /// `[[events]]`.
    #[serde(default)]
    pub events: Vec<RawEvent>,
    /// `[[facts]]`.
    #[serde(default)]
    pub facts: Vec<RawFact>,
    /// `[brain]`: the default brain.
    #[serde(default)]
    pub brain: Option<Spanned<RawBrain>>,
    /// `[brains.NAME]`: named brains.
    #[serde(default)]
    pub brains: BTreeMap<String, Spanned<RawBrain>>,
    /// `[memory]`.
    #[serde(default)]
    pub memory: RawMemory,
    /// `[run]`.
    #[serde(default)]
    pub run: RawRun,
    /// `[[expect]]`: what the run should show, checked when it ends.
    #[serde(default)]
    pub expect: Vec<Spanned<RawExpect>>,
}

/// `[[expect]]`: a fact's spread (`fact` with `share_at_least`, `share_at_most` or
/// `knowers_at_least`), or what one NPC does (`npc` with `knows` or `reaches`), by a tick.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExpect {
    /// A tracked fact's name.
    #[serde(default)]
    pub fact: Option<Spanned<String>>,
    /// At least this share of the NPCs know it.
    #[serde(default)]
    pub share_at_least: Option<Spanned<f64>>,
    /// At most this share of the NPCs know it.
    #[serde(default)]
    pub share_at_most: Option<Spanned<f64>>,
    /// At least this many NPCs know it.
    #[serde(default)]
    pub knowers_at_least: Option<Spanned<u32>>,
    /// An NPC's name.
    #[serde(default)]
    pub npc: Option<Spanned<String>>,
    /// The NPC knows this fact.
    #[serde(default)]
    pub knows: Option<Spanned<String>>,
    /// The NPC stands at (or within `within` cells of) this place.
    #[serde(default)]
    pub reaches: Option<Spanned<String>>,
    /// For `reaches`: how near counts (cells, default 0: the place's own cell).
    #[serde(default)]
    pub within: Option<Spanned<u32>>,
    /// By the end of this tick (default: the last tick).
    #[serde(default)]
    pub by_tick: Option<Spanned<u64>>,
}

/// `[run]`: how a run keeps itself resumable.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    /// Save a checkpoint every this many ticks (and after the last); 0 = never.
    #[serde(default)]
    pub checkpoint_every: Option<u64>,
}

/// `[world]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorld {
    /// Map width in cells (x runs `0..width`), at least 1.
    pub width: Spanned<u32>,
    /// Map height in cells (y runs `0..height`), at least 1.
    pub height: Spanned<u32>,
    /// Talk reaches NPCs within this many cells (Euclidean, inclusive); 0 is allowed.
    pub hearing_radius: Spanned<u32>,
    /// Perception radius (default 2 × hearing radius).
    #[serde(default)]
    pub sight_radius: Option<Spanned<u32>>,
    /// The most NPCs one talk reaches, nearest first (default 100).
    #[serde(default)]
    pub max_listeners: Option<Spanned<u32>>,
}

/// `[[places]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlace {
    /// Unique among places; `[[events]]` and `reaches` refer to the place by it.
    pub name: Spanned<String>,
    /// `[x, y]`.
    pub at: Spanned<[i32; 2]>,
}

/// `[[npcs]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNpc {
    /// Unique among NPCs; `[[expect]]` and `--npc` refer to the NPC by it.
    pub name: Spanned<String>,
    /// Who it is.
    #[serde(default)]
    pub persona: String,
    /// `[x, y]`.
    pub at: Spanned<[i32; 2]>,
    /// Seed memories.
    #[serde(default)]
    pub memories: Vec<RawSeedMemory>,
    /// A named brain.
    #[serde(default)]
    pub brain: Option<Spanned<String>>,
}

/// `memories = [{ content = "…", importance = 8 }]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSeedMemory {
    /// What the NPC remembers (trimmed); must not be empty.
    pub content: Spanned<String>,
    /// 1–10.
    pub importance: Spanned<i64>,
    /// Never fades (default true: what a scenario gives an NPC, it keeps).
    #[serde(default)]
    pub core: Option<bool>,
}

/// `[[events]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEvent {
    /// The tick it fires on; one at or past `ticks` never fires (a note, not an error).
    pub tick: Spanned<u64>,
    /// Where (a place name).
    pub place: Spanned<String>,
    /// What witnesses see (trimmed, not empty); their memories add the place.
    pub text: Spanned<String>,
    /// Importance of the witnesses' memories (default 6).
    #[serde(default)]
    pub importance: Option<Spanned<i64>>,
}

/// `[[facts]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFact {
    /// Unique among facts; `learned` lines and `[[expect]]` refer to the fact by it.
    pub name: Spanned<String>,
    /// Case-insensitive substrings.
    #[serde(rename = "match", default)]
    pub patterns: Option<Spanned<Vec<String>>>,
    /// The fact as a sentence, matched by embedding similarity.
    pub statement: Option<Spanned<String>>,
    /// Cosine with the statement at or above which a memory teaches the fact.
    pub similarity: Option<Spanned<f64>>,
    /// Lower cosine from which memories go to `judge`.
    pub candidate: Option<Spanned<f64>>,
    /// The brain (`[brains.NAME]`, or `default` for `[brain]`) that judges candidates.
    pub judge: Option<Spanned<String>>,
    /// Similarity below which a knower's version counts as distorted.
    pub distorted_below: Option<Spanned<f64>>,
}

/// Which brain implementation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BrainProvider {
    /// The offline heuristic gossip.
    #[default]
    Heuristic,
    /// Any OpenAI-compatible chat completions API.
    Openai,
}

/// When an NPC asks its brain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkKind {
    /// Every tick (the heuristic brain's default).
    EveryTick,
    /// Only when something changed (an `openai` brain's default).
    OnChange,
}

/// How an OpenAI-compatible brain asks for JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormatKind {
    /// `{"type": "json_schema", "json_schema": {…, "strict": true}}`, the subset every
    /// hosted strict mode accepts.
    #[default]
    JsonSchema,
    /// The same with the bounds (llama.cpp, vLLM, Ollama).
    JsonSchemaFull,
    /// `{"type": "json_object", "schema": {…}}`.
    JsonObject,
    /// No `response_format`.
    None,
}

/// `base_url`: one server, or a list of replicas serving the same model, each element
/// with its own span (a duplicate is pointed at where it is).
#[derive(Clone, Debug)]
pub enum RawBaseUrl {
    /// `base_url = "http://…/v1"`.
    One(String),
    /// `base_url = ["http://…/v1", …]`.
    Many(Vec<Spanned<String>>),
}

impl<'de> Deserialize<'de> for RawBaseUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawBaseUrl;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a URL, or a list of URLs (replicas of one model)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawBaseUrl, E> {
                Ok(RawBaseUrl::One(v.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawBaseUrl, A::Error> {
                let mut urls = Vec::new();
                while let Some(url) = seq.next_element::<Spanned<String>>()? {
                    urls.push(url);
                }
                Ok(RawBaseUrl::Many(urls))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// `[brain]` and `[brains.NAME]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBrain {
    /// Implementation (default heuristic).
    #[serde(default)]
    pub provider: Option<Spanned<BrainProvider>>,
    /// Calls in flight at once.
    #[serde(default)]
    pub max_concurrency: Option<Spanned<u32>>,
    /// e.g. `http://127.0.0.1:8080/v1`, or a list of replicas (OpenAI-compatible only).
    #[serde(default)]
    pub base_url: Option<Spanned<RawBaseUrl>>,
    /// Model name.
    #[serde(default)]
    pub model: Option<Spanned<String>>,
    /// Environment variable holding the API key (none for local servers).
    #[serde(default)]
    pub api_key_env: Option<Spanned<String>>,
    /// Per-request timeout.
    #[serde(default)]
    pub timeout_ms: Option<Spanned<u64>>,
    /// Retries after the first attempt.
    #[serde(default)]
    pub max_retries: Option<Spanned<u32>>,
    /// First retry backoff (doubles, with jitter).
    #[serde(default)]
    pub retry_base_ms: Option<Spanned<u64>>,
    /// Token bucket size per minute.
    #[serde(default)]
    pub requests_per_minute: Option<Spanned<u32>>,
    /// The largest answer body read; a longer one is a failed call.
    #[serde(default)]
    pub max_response_bytes: Option<Spanned<u64>>,
    /// Sampling temperature.
    #[serde(default)]
    pub temperature: Option<Spanned<f64>>,
    /// Tokens per answer.
    #[serde(default)]
    pub max_tokens: Option<Spanned<u32>>,
    /// Tokens per request, prompt and answer (default: what the server says, else 8192).
    #[serde(default)]
    pub context_tokens: Option<Spanned<u32>>,
    /// How JSON output is requested.
    #[serde(default)]
    pub response_format: Option<ResponseFormatKind>,
    /// Heuristic fallback once this many tokens are spent.
    #[serde(default)]
    pub budget_tokens: Option<Spanned<u64>>,
    /// Heuristic fallback once this many calls are made.
    #[serde(default)]
    pub budget_calls: Option<Spanned<u64>>,
    /// Consecutive failed calls that open the circuit breaker.
    #[serde(default)]
    pub breaker_failures: Option<Spanned<u32>>,
    /// Ticks the breaker stays open.
    #[serde(default)]
    pub breaker_cooldown_ticks: Option<Spanned<u64>>,
    /// `every_tick` or `on_change` (default: `on_change` for `openai`, else `every_tick`).
    #[serde(default)]
    pub think: Option<Spanned<ThinkKind>>,
    /// Under `on_change`: an NPC thinks at least once in this many ticks (default 8).
    #[serde(default)]
    pub max_idle_ticks: Option<Spanned<u64>>,
    /// After a failed reflection, ticks before the next try (default 10).
    #[serde(default)]
    pub reflect_retry_ticks: Option<Spanned<u64>>,
    /// Tokens per reflection answer (default 512).
    #[serde(default)]
    pub reflect_max_tokens: Option<Spanned<u32>>,
    /// Heuristic brain only: the chance, 0 to 1, that a gossip is whispered to a neighbour
    /// instead of said aloud (default 0).
    #[serde(default)]
    pub whisper: Option<Spanned<f64>>,
    /// Heuristic only: chance (0..=1) that a retelling drifts (default 0).
    #[serde(default)]
    pub retell_noise: Option<Spanned<f64>>,
}

/// Which store backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// One SQLite file in the run directory.
    #[default]
    Sqlite,
    /// PostgreSQL + pgvector (`--database-url` or `DATABASE_URL`), many runs per database.
    Postgres,
}

/// When a tick may see embeddings of earlier memories.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Wait until every memory of earlier ticks is embedded (bit-identical runs).
    #[default]
    Barrier,
    /// Never wait.
    Eventual,
}

/// Which embedder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderProvider {
    /// Offline feature hashing.
    #[default]
    Hashing,
    /// Any OpenAI-compatible `/embeddings` API.
    Openai,
}

/// `[memory]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMemory {
    /// Backend.
    #[serde(default)]
    pub store: StoreKind,
    /// Memories recalled per NPC per tick (default 5).
    #[serde(default)]
    pub recall_k: Option<Spanned<u32>>,
    /// `barrier` or `eventual` (default: barrier with the hashing embedder, eventual
    /// with a remote one).
    #[serde(default)]
    pub visibility: Option<Visibility>,
    /// Short-term window length (default 5).
    #[serde(default)]
    pub short_term: Option<Spanned<u32>>,
    /// Barrier wait bound (default 120 000).
    #[serde(default)]
    pub barrier_timeout_ms: Option<Spanned<u64>>,
    /// End-of-run drain bound (default 60 000).
    #[serde(default)]
    pub drain_timeout_ms: Option<Spanned<u64>>,
    /// Content longer than this many characters is embedded in chunks (default 400).
    #[serde(default)]
    pub chunk_chars: Option<Spanned<u32>>,
    /// Characters each chunk repeats from the one before (default 50).
    #[serde(default)]
    pub chunk_overlap: Option<Spanned<u32>>,
    /// `[memory.scoring]`.
    #[serde(default)]
    pub scoring: Option<RawScoring>,
    /// `[memory.forget]`.
    #[serde(default)]
    pub forget: Option<RawForget>,
    /// `[memory.reflect]`.
    #[serde(default)]
    pub reflect: Option<RawReflect>,
    /// `[memory.embedder]`.
    #[serde(default)]
    pub embedder: Option<Spanned<RawEmbedder>>,
}

/// `[memory.scoring]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScoring {
    /// Relevance weight.
    #[serde(default)]
    pub w_rel: Option<Spanned<f64>>,
    /// Recency weight.
    #[serde(default)]
    pub w_rec: Option<Spanned<f64>>,
    /// Importance weight.
    #[serde(default)]
    pub w_imp: Option<Spanned<f64>>,
    /// Recency decay per tick.
    #[serde(default)]
    pub decay: Option<Spanned<f64>>,
    /// Memories over-fetched by cosine before re-ranking.
    #[serde(default)]
    pub candidates: Option<Spanned<u32>>,
}

/// `[memory.forget]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawForget {
    /// Retention below which a memory is archived (0 never forgets).
    #[serde(default)]
    pub threshold: Option<Spanned<f64>>,
    /// Ticks of strength per point of importance.
    #[serde(default)]
    pub strength: Option<Spanned<f64>>,
    /// Strength each recall adds, as a multiple of the first.
    #[serde(default)]
    pub recall_boost: Option<Spanned<f64>>,
}

/// `[memory.reflect]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReflect {
    /// Accumulated importance that triggers a reflection (0 never reflects).
    #[serde(default)]
    pub threshold: Option<Spanned<u32>>,
    /// Latest memories reflected on.
    #[serde(default)]
    pub evidence: Option<Spanned<u32>>,
    /// Most insights per reflection.
    #[serde(default)]
    pub insights: Option<Spanned<u32>>,
}

/// `[memory.embedder]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbedder {
    /// Implementation (default hashing).
    #[serde(default)]
    pub provider: Option<Spanned<EmbedderProvider>>,
    /// Texts per embedding request.
    #[serde(default)]
    pub batch_size: Option<Spanned<u32>>,
    /// Vectors kept in the (model, text) cache.
    #[serde(default)]
    pub cache_entries: Option<Spanned<u32>>,
    /// Ask the model for this many dimensions (OpenAI `dimensions`).
    #[serde(default)]
    pub dimensions: Option<Spanned<u32>>,
    /// Backfill requests in flight at once.
    #[serde(default)]
    pub max_concurrency: Option<Spanned<u32>>,
    /// e.g. `http://127.0.0.1:8080/v1`, or a list of replicas (OpenAI-compatible only).
    #[serde(default)]
    pub base_url: Option<Spanned<RawBaseUrl>>,
    /// Model name.
    #[serde(default)]
    pub model: Option<Spanned<String>>,
    /// Environment variable holding the API key (none for local servers).
    #[serde(default)]
    pub api_key_env: Option<Spanned<String>>,
    /// Per-request timeout.
    #[serde(default)]
    pub timeout_ms: Option<Spanned<u64>>,
    /// Retries after the first attempt.
    #[serde(default)]
    pub max_retries: Option<Spanned<u32>>,
    /// First retry backoff (doubles, with jitter).
    #[serde(default)]
    pub retry_base_ms: Option<Spanned<u64>>,
    /// Token bucket size per minute.
    #[serde(default)]
    pub requests_per_minute: Option<Spanned<u32>>,
    /// The largest answer body read; a longer one is a failed call.
    #[serde(default)]
    pub max_response_bytes: Option<Spanned<u64>>,
}
