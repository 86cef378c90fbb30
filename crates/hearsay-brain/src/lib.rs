//! Brains: what decides an NPC's action from what it perceives and recalls.
//!
//! This crate owns the [`Brain`] interface (context in, [`Decision`] out; memories in,
//! insights out when an NPC reflects), the offline
//! [`HeuristicBrain`], the OpenAI-compatible [`LlmBrain`] with its HTTP client
//! ([`openai`]: retries, rate limits, timeouts), prompts from `assets/prompts/`, robust
//! decision parsing, answers to questions put to an NPC (`hearsay ask`), API keys that
//! never print, the rule for which host a key may be sent to ([`trust`]), and the record of every brain call (the tape written to `llm.jsonl`). It is the only crate that talks to model providers.
//!
//! It must never touch the world or a store: a brain sees a [`BrainRequest`] — plain data
//! assembled by the runtime — and answers for one NPC only. Randomness comes from the
//! seeded stream for (seed, NPC, tick), never from the OS.

pub mod context;
pub mod heuristic;
pub mod judge;
pub mod llm;
pub mod openai;
pub mod parse;
pub mod prompt;
pub mod replicas;
pub mod request;
pub mod retell;
pub mod secret;
pub mod tape;
pub mod trust;

pub use context::{ContextBudget, TokenCounter};
pub use hearsay_core::Decision;
pub use heuristic::HeuristicBrain;
pub use judge::{JudgeReply, JudgeRequest};
pub use llm::{LlmBrain, LlmConfig, Probe, ProbeError, ResponseFormat};
pub use openai::{Endpoint, EndpointConfig, Usage};
pub use replicas::{ReplicaStats, Replicas};
pub use request::{AskRequest, BrainRequest, DIGEST_PREFIX, Recollection, ReflectRequest};
pub use retell::Vocabulary;
pub use secret::{ApiKey, KeyError};
pub use tape::{BrainCall, CallOutcome, ReflectionCall, TickNote};
pub use trust::{Allowed, KeyPolicy, KeyRefused};

/// A boxed, sendable future: the return type of object-safe async trait methods.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Why a brain could not decide. The runtime falls back to `stay` and counts it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrainError {
    /// The provider could not be reached, refused, or timed out (after retries).
    #[error("brain unavailable: {0}")]
    Unavailable(String),
    /// The answer was cut off (`finish_reason = "length"`).
    #[error("answer cut off at max_tokens (finish_reason = length)")]
    Truncated,
    /// The answer could not be turned into a decision.
    #[error("brain answered badly: {0}")]
    Malformed(String),
    /// The prompt does not fit the model's context, even trimmed.
    #[error("the prompt does not fit the context: {0}")]
    TooLong(String),
}

/// What any exchange with a brain carried besides its result — a decision, a reflection,
/// an interview, answered or failed: the one description of a model call's bookkeeping,
/// which the tape ([`tape::Exchange`]), the per-brain stats and the summary read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// Tokens, when a model answered (and reported them).
    pub usage: Option<Usage>,
    /// HTTP retries after the first attempt.
    pub retries: u32,
    /// Set when the heuristic brain answered instead of the configured one, and why.
    pub fallback: Option<String>,
    /// What was fixed in the answer (fences, prose, trailing commas, clamps, caps).
    pub repairs: Vec<String>,
    /// What was refused in the answer (a decision is then `stay`).
    pub rejections: Vec<String>,
    /// What was left out of the prompt so it would fit the context (`recalled 5 -> 3`).
    pub trimmed: Vec<String>,
}

/// A brain's answer `T` (a decision, insights, an interview's text) and how it was
/// reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply<T> {
    /// The result.
    pub value: T,
    /// The response text as received. The heuristic brain gives a reflection's insights as
    /// JSON, an answer's text, and nothing for a decision (the decision is its response:
    /// the tape reads a heuristic decision's response back as the decision's JSON).
    pub raw: String,
    /// What the exchange carried besides.
    pub carried: Carried,
}

impl<T> Reply<T> {
    /// A result with nothing to report.
    pub fn plain(value: T, raw: String) -> Self {
        Self {
            value,
            raw,
            carried: Carried::default(),
        }
    }
}

/// A decision and how it was reached.
pub type BrainReply = Reply<Decision>;

/// A reflection's insights (at most the request's `insights_max`) and how they were
/// reached.
pub type ReflectReply = Reply<Vec<hearsay_core::Insight>>;

impl ReflectReply {
    /// Insights with nothing to report (their JSON as the raw text).
    pub fn of_insights(insights: Vec<hearsay_core::Insight>) -> Self {
        let raw = serde_json::to_string(&insights).unwrap_or_default();
        Reply::plain(insights, raw)
    }
}

/// An NPC's answer to a question, as the NPC says it.
pub type AnswerReply = Reply<String>;

/// A failed call and what is known about the attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrainFailure {
    /// What went wrong; its message goes on the tape as `error`.
    pub error: BrainError,
    /// The response text, if one came.
    pub raw: Option<String>,
    /// What the exchange carried (usage, retries, what was trimmed).
    pub carried: Carried,
}

impl From<BrainError> for BrainFailure {
    fn from(error: BrainError) -> Self {
        Self {
            error,
            raw: None,
            carried: Carried::default(),
        }
    }
}

/// Decides one NPC's action for one tick.
pub trait Brain: Send + Sync {
    /// The provider kind (`heuristic`, `openai`), recorded on the tape.
    fn provider(&self) -> &str;

    /// Decides. Must not panic on any request or answer.
    fn decide<'a>(
        &'a self,
        request: &'a BrainRequest,
    ) -> BoxFuture<'a, Result<BrainReply, BrainFailure>>;

    /// What [`Brain::decide`] answers, computed here on the caller's thread, by a brain
    /// that waits for nothing (no server, no slot to wait for); `None` from a brain that
    /// must be awaited. Why: a big town's Think phase calls the heuristic brain once per
    /// NPC per tick, and a boxed future, a concurrency permit and their moves for a
    /// decision of a microsecond were a share of it worth saving.
    fn decide_here(&self, request: &BrainRequest) -> Option<Result<BrainReply, BrainFailure>> {
        let _ = request;
        None
    }

    /// Draws up to `request.insights_max` insights from an NPC's latest memories, each
    /// citing the memories it comes from. Must not panic on any request or answer.
    fn reflect<'a>(
        &'a self,
        request: &'a ReflectRequest,
    ) -> BoxFuture<'a, Result<ReflectReply, BrainFailure>>;

    /// The brain as an OpenAI-compatible one, for what only such a brain does (the
    /// preflight probe, the server's context); `None` for the others.
    fn llm(&self) -> Option<&LlmBrain> {
        None
    }

    /// Answers a question in the NPC's voice, from what it recalls and its latest
    /// memories only. Must not panic on any request or answer.
    fn answer<'a>(
        &'a self,
        request: &'a AskRequest,
    ) -> BoxFuture<'a, Result<AnswerReply, BrainFailure>>;

    /// Says whether `request.words` state the fact `request.statement` (a fact's
    /// `judge`). Must not panic on any request or answer.
    fn judge<'a>(
        &'a self,
        request: &'a JudgeRequest,
    ) -> BoxFuture<'a, Result<JudgeReply, BrainFailure>> {
        let _ = request;
        Box::pin(async {
            Err(BrainFailure {
                error: BrainError::Unavailable("this brain does not judge".into()),
                raw: None,
                carried: Carried::default(),
            })
        })
    }
}
