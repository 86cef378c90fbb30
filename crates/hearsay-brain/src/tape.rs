//! The record of brain calls: one `llm.jsonl` line per call, the raw material for replay.

use hearsay_core::{Decision, Insight, MemoryId};
use serde::{Deserialize, Serialize};

use crate::openai::Usage;

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// A decision came back from the configured brain.
    Ok,
    /// The heuristic brain decided instead (budget spent or circuit open).
    Fallback,
    /// The brain failed; the NPC stayed.
    Failed,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The most of a response the tape keeps, in bytes: a decision is a few hundred bytes,
/// so anything longer is kept as a prefix with its full length beside it
/// (`response_bytes`). Replay never needs the text (the decision is on the tape).
pub const RESPONSE_KEPT_MAX: usize = 16 * 1024;

/// `raw` as the tape keeps it: whole when short, else its first [`RESPONSE_KEPT_MAX`]
/// bytes (cut between characters) and the full length.
pub fn kept_response(raw: Option<String>) -> (Option<String>, Option<u64>) {
    match raw {
        Some(mut text) if text.len() > RESPONSE_KEPT_MAX => {
            let full = text.len() as u64;
            let mut end = RESPONSE_KEPT_MAX;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            (Some(text), Some(full))
        }
        other => (other, None),
    }
}

/// One brain call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrainCall {
    /// The tick whose decision this call made.
    pub tick: u64,
    /// The deciding NPC's name, as `events.jsonl` spells it.
    pub npc: String,
    /// The brain's name in the scenario (`default` for `[brain]`).
    pub brain: String,
    /// The configured brain's implementation: `heuristic` or `openai`.
    pub provider: String,
    /// Digest of the request.
    pub request: String,
    /// The memories recalled for it, best first.
    pub recalled: Vec<MemoryId>,
    /// Recall failed, so the brain decided without memories.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recall_failed: bool,
    /// How it ended.
    pub outcome: CallOutcome,
    /// What the NPC was told to do (`stay` after a failure), before the kernel's checks.
    pub decision: Decision,
    /// The response text, when there was one (at most [`RESPONSE_KEPT_MAX`] bytes of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The response's full length in bytes, when `response` keeps only its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    /// Tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// HTTP retries after the first attempt (left out when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Why the heuristic brain decided instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// What was repaired in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<String>,
    /// What was rejected in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<String>,
    /// What was left out of the prompt so it would fit the context (`recalled 5 -> 3`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trimmed: Vec<String>,
    /// The failure, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall-clock time the call took, in milliseconds (this file is not hashed).
    pub latency_ms: f64,
    /// The text recall embedded to find `recalled`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recall_query: String,
    /// The scores `recalled` were ranked by, in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recall_scores: Vec<RecallScore>,
    /// When the NPC was due to reflect this tick: that call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflection: Option<ReflectionCall>,
}

/// How a recalled memory scored: what `hearsay inspect --query` recomputes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecallScore {
    /// Cosine similarity to the query (best chunk).
    pub relevance: f32,
    /// The recency term: decay^(ticks since last recalled).
    pub recency: f64,
    /// `w_rel·relevance + w_rec·recency + w_imp·importance/10`, what recall sorts by.
    pub score: f64,
}

/// One reflection call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReflectionCall {
    /// Digest of the request.
    pub request: String,
    /// How it ended.
    pub outcome: CallOutcome,
    /// The insights kept (empty after a failure).
    pub insights: Vec<Insight>,
    /// The response text, when there was one (at most [`RESPONSE_KEPT_MAX`] bytes of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The response's full length in bytes, when `response` keeps only its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    /// Tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// HTTP retries.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Why the heuristic brain reflected instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// What was repaired in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<String>,
    /// What was rejected in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<String>,
    /// What was left out of the prompt so it would fit the context (`recalled 5 -> 3`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trimmed: Vec<String>,
    /// The failure, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall-clock time the call took, in milliseconds.
    pub latency_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_responses_keep_a_prefix_and_their_length() {
        assert_eq!(kept_response(None), (None, None));
        assert_eq!(
            kept_response(Some("short".into())),
            (Some("short".into()), None)
        );
        let long = "鱼".repeat(RESPONSE_KEPT_MAX);
        let (kept, full) = kept_response(Some(long.clone()));
        let kept = kept.expect("a prefix");
        assert!(kept.len() <= RESPONSE_KEPT_MAX && long.starts_with(&kept));
        assert!(
            kept.len() > RESPONSE_KEPT_MAX - 3,
            "cut at the last whole character"
        );
        assert_eq!(full, Some(long.len() as u64));
    }
}
