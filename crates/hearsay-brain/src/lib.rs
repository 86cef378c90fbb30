//! Brains: what decides an NPC's action from what it perceives and recalls.
//!
//! This crate owns the [`Brain`] interface (context in, [`Decision`] out), the offline
//! [`HeuristicBrain`], the request digest and the record of every brain call (the tape
//! written to `llm.jsonl`). It is the only crate that will ever talk to a model provider.
//!
//! It must never touch the world or a store: a brain sees a [`BrainRequest`] — plain data
//! assembled by the runtime — and answers for one NPC only. Any randomness comes from the
//! seeded stream for (seed, NPC, tick), never from the OS.

pub mod heuristic;
pub mod request;
pub mod tape;

pub use hearsay_core::Decision;
pub use heuristic::HeuristicBrain;
pub use request::{BrainRequest, Recollection};
pub use tape::{BrainCall, CallOutcome};

/// A boxed, sendable future: the return type of object-safe async trait methods.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Why a brain could not decide. The runtime falls back to `stay` and counts it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrainError {
    /// The provider could not be reached, refused, or timed out.
    #[error("brain unavailable: {0}")]
    Unavailable(String),
    /// The answer could not be turned into a decision.
    #[error("brain answered badly: {0}")]
    Malformed(String),
}

/// A brain's answer: the decision, and the raw response text recorded on the tape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrainReply {
    /// What the NPC will do.
    pub decision: Decision,
    /// The response as received (for the heuristic brain: the decision as JSON).
    pub raw: String,
}

/// Decides one NPC's action for one tick.
pub trait Brain: Send + Sync {
    /// The provider kind (`heuristic`, …), recorded on the tape.
    fn provider(&self) -> &str;

    /// Decides. Must not panic on any request; failures are errors, not panics.
    fn decide<'a>(
        &'a self,
        request: &'a BrainRequest,
    ) -> BoxFuture<'a, Result<BrainReply, BrainError>>;
}
