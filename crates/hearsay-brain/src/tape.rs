//! The record of brain calls: one `llm.jsonl` line per call.

use hearsay_core::MemoryId;
use serde::{Deserialize, Serialize};

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// A decision came back.
    Ok,
    /// The brain failed; the NPC stayed.
    Failed,
}

/// One brain call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrainCall {
    /// Tick.
    pub tick: u64,
    /// NPC name.
    pub npc: String,
    /// The brain's name in the scenario (`default` for `[brain]`).
    pub brain: String,
    /// Provider kind.
    pub provider: String,
    /// Digest of the request.
    pub request: String,
    /// The memories recalled for it, best first.
    pub recalled: Vec<MemoryId>,
    /// How it ended.
    pub outcome: CallOutcome,
    /// The raw response, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The failure, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall-clock time the call took, in milliseconds (this file is not hashed).
    pub latency_ms: f64,
}
