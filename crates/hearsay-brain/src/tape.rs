//! The record of brain calls: one `llm.jsonl` line per call, the raw material for replay.

use hearsay_core::line::{ids, int, json, pos, string};
use hearsay_core::{Decision, Insight, MemoryId, Name, WakeReason};
use serde::{Deserialize, Serialize};

use crate::openai::Usage;
use crate::{BrainFailure, Carried, Reply};

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

/// One exchange with a brain as the tape keeps it — a decision's or a reflection's: what
/// was asked (the request's digest), how it ended, what came back, what the exchange
/// carried, the failure, the time it took. The one description of a model call that the
/// tape, the per-brain stats and the summary read.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    /// Digest of the request; replay rebuilds the request and compares. `None` for the
    /// heuristic brain's calls ([`taped_without_request`]).
    pub request: Option<String>,
    /// How it ended.
    pub outcome: CallOutcome,
    /// The response text, when there was one (at most [`RESPONSE_KEPT_MAX`] bytes of it).
    pub response: Option<String>,
    /// The response's full length in bytes, when `response` keeps only its start.
    pub response_bytes: Option<u64>,
    /// Tokens, retries, fallback, repairs, rejections, trims.
    pub carried: Carried,
    /// The failure, when there was one.
    pub error: Option<String>,
    /// Wall-clock time the call took, in milliseconds (this file is not hashed).
    pub latency_ms: f64,
}

impl Exchange {
    /// The exchange of a call that asked `request` (its digest) and got `result` in
    /// `latency_ms`, with the answer's value when there was one.
    pub fn of<T>(
        request: Option<String>,
        result: Result<Reply<T>, BrainFailure>,
        latency_ms: f64,
    ) -> (Option<T>, Exchange) {
        let (value, raw, carried, error) = match result {
            Ok(reply) => (Some(reply.value), Some(reply.raw), reply.carried, None),
            Err(f) => (None, f.raw, f.carried, Some(f.error.to_string())),
        };
        let outcome = match (&error, &carried.fallback) {
            (Some(_), _) => CallOutcome::Failed,
            (None, Some(_)) => CallOutcome::Fallback,
            (None, None) => CallOutcome::Ok,
        };
        let (response, response_bytes) = kept_response(raw);
        let exchange = Exchange {
            request,
            outcome,
            response,
            response_bytes,
            carried,
            error,
            latency_ms,
        };
        (value, exchange)
    }
}

/// One brain call: a decision, with the recall it was given and the reflection made
/// beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "BrainCallLine", into = "BrainCallLine")]
pub struct BrainCall {
    /// The tick whose decision this call made.
    pub tick: u64,
    /// The deciding NPC's name, as `events.jsonl` spells it.
    pub npc: Name,
    /// The brain's name in the scenario (`default` for `[brain]`).
    pub brain: Name,
    /// The configured brain's implementation: `heuristic` or `openai`.
    pub provider: Name,
    /// The memories recalled for it, best first.
    pub recalled: Vec<MemoryId>,
    /// Recall failed, so the brain decided without memories.
    pub recall_failed: bool,
    /// What the NPC was told to do (`stay` after a failure), before the kernel's checks.
    pub decision: Decision,
    /// The exchange with the brain.
    pub exchange: Exchange,
    /// The text recall embedded to find `recalled`.
    pub recall_query: String,
    /// The scores `recalled` were ranked by, in the same order.
    pub recall_scores: Vec<RecallScore>,
    /// When the NPC was due to reflect this tick: that call.
    pub reflection: Option<ReflectionCall>,
    /// Under `think = "on_change"`: why the NPC thought this tick (empty under
    /// `every_tick`).
    pub wake: Vec<WakeReason>,
}

/// The NPC-ticks of one brain in one tick that made no call, as one `llm.jsonl` line after
/// the tick's calls: those that continued (`on_change`, nothing changed) and those whose
/// reflection was due but waited for its retry. With the calls, it accounts for every
/// NPC of the tick, so a tick is known complete on the tape; it is not written when both
/// lists are empty (an `every_tick` run's tape has none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TickNote {
    /// The tick.
    pub tick: u64,
    /// The brain the NPCs use (`default` for `[brain]`).
    pub brain: String,
    /// NPCs that did not think this tick, in id order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub continued: Vec<String>,
    /// NPCs whose reflection was held back by its retry after a failure, in id order
    /// (they may have thought or continued).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<String>,
}

/// One reflection call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "ReflectionCallLine", into = "ReflectionCallLine")]
pub struct ReflectionCall {
    /// The insights kept (empty after a failure).
    pub insights: Vec<Insight>,
    /// The exchange with the brain.
    pub exchange: Exchange,
}

/// A [`BrainCall`] as one `llm.jsonl` line spells it: every field at the top level, in
/// this order (the bytes of a tape never change with the types behind it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct BrainCallLine {
    /// The tick whose decision this call made.
    tick: u64,
    /// The deciding NPC's name, as `events.jsonl` spells it.
    npc: Name,
    /// The brain's name in the scenario (`default` for `[brain]`).
    brain: Name,
    /// The configured brain's implementation: `heuristic` or `openai`.
    provider: Name,
    /// Digest of the request (left out of the heuristic brain's lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request: Option<String>,
    /// The memories recalled for it, best first.
    recalled: Vec<MemoryId>,
    /// Recall failed, so the brain decided without memories.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    recall_failed: bool,
    /// How it ended.
    outcome: CallOutcome,
    /// What the NPC was told to do (`stay` after a failure), before the kernel's checks.
    decision: Decision,
    /// The response text, when there was one (at most [`RESPONSE_KEPT_MAX`] bytes of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<String>,
    /// The response's full length in bytes, when `response` keeps only its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response_bytes: Option<u64>,
    /// Tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    /// HTTP retries after the first attempt (left out when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    retries: u32,
    /// Why the heuristic brain decided instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fallback: Option<String>,
    /// What was repaired in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    repairs: Vec<String>,
    /// What was rejected in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rejections: Vec<String>,
    /// What was left out of the prompt so it would fit the context (`recalled 5 -> 3`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    trimmed: Vec<String>,
    /// The failure, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Wall-clock time the call took, in milliseconds (this file is not hashed); left
    /// out of a heuristic brain's lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency_ms: Option<f64>,
    /// The text recall embedded to find `recalled`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    recall_query: String,
    /// The scores `recalled` were ranked by, in the same order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    recall_scores: Vec<RecallScore>,
    /// When the NPC was due to reflect this tick: that call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reflection: Option<ReflectionCallLine>,
    /// Under `think = "on_change"`: why the NPC thought this tick.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wake: Vec<WakeReason>,
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

/// A [`ReflectionCall`] as the tape spells it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct ReflectionCallLine {
    /// Digest of the request (left out of the heuristic brain's lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request: Option<String>,
    /// How it ended.
    outcome: CallOutcome,
    /// The insights kept (empty after a failure).
    insights: Vec<Insight>,
    /// The response text, when there was one (at most [`RESPONSE_KEPT_MAX`] bytes of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<String>,
    /// The response's full length in bytes, when `response` keeps only its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response_bytes: Option<u64>,
    /// Tokens, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    /// HTTP retries.
    #[serde(default, skip_serializing_if = "is_zero")]
    retries: u32,
    /// Why the heuristic brain reflected instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fallback: Option<String>,
    /// What was repaired in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    repairs: Vec<String>,
    /// What was rejected in the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rejections: Vec<String>,
    /// What was left out of the prompt so it would fit the context (`recalled 5 -> 3`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    trimmed: Vec<String>,
    /// The failure, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Wall-clock time the call took, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency_ms: Option<f64>,
}

/// The exchange in a line type `$l` (its fields at the top level, as the tape spells them).
macro_rules! exchange_of_line {
    ($l:expr) => {
        Exchange {
            request: $l.request,
            outcome: $l.outcome,
            response: $l.response,
            response_bytes: $l.response_bytes,
            carried: Carried {
                usage: $l.usage,
                retries: $l.retries,
                fallback: $l.fallback,
                repairs: $l.repairs,
                rejections: $l.rejections,
                trimmed: $l.trimmed,
            },
            error: $l.error,
            latency_ms: $l.latency_ms.unwrap_or(0.0),
        }
    };
}

/// A line type `$ty` with the exchange `$x`'s fields at the top level, and `$rest`.
macro_rules! line_of_exchange {
    ($ty:ident, $x:expr, { $($rest:tt)* }) => {{
        let Exchange {
            request,
            outcome,
            response,
            response_bytes,
            carried,
            error,
            latency_ms,
        } = $x;
        $ty {
            request,
            outcome,
            response,
            response_bytes,
            usage: carried.usage,
            retries: carried.retries,
            fallback: carried.fallback,
            repairs: carried.repairs,
            rejections: carried.rejections,
            trimmed: carried.trimmed,
            error,
            latency_ms: Some(latency_ms),
            $($rest)*
        }
    }};
}

/// The provider whose answer is its decision, word for word: its lines leave `response`
/// out (it is `decision` as JSON, which a reader puts back), so a heuristic run's tape
/// does not carry every decision twice; and its `recall_scores` and `latency_ms` (read
/// back as none and 0). Its reflections likewise leave out the response that is their
/// `insights` as JSON, and their time, so two runs of one seed write the same tape.
/// Lines written before kept them all; they read the same.
const DECISION_IS_RESPONSE: &str = "heuristic";

/// Whether `provider`'s calls are taped without the request's digest: the heuristic
/// brain's, whose answers follow from the request and its seed alone (a model's brain,
/// its heuristic fallback included, keeps it). Replay has nothing to check such a call
/// against that the tape and the tick's rolling hash in `events.jsonl` do not already
/// settle: it takes the decision from the tape, and the tick's hash checks what the
/// world made of it. The one rule for the writer (Think) and the reader (replay).
pub fn taped_without_request(provider: &str) -> bool {
    provider == DECISION_IS_RESPONSE
}

impl From<BrainCallLine> for BrainCall {
    fn from(mut l: BrainCallLine) -> Self {
        let heuristic = l.provider == DECISION_IS_RESPONSE;
        if heuristic && l.response.is_none() && l.outcome != CallOutcome::Failed {
            l.response = serde_json::to_string(&l.decision).ok();
        }
        let reflection = l.reflection.map(|mut r| {
            if heuristic && r.response.is_none() && r.outcome != CallOutcome::Failed {
                r.response = serde_json::to_string(&r.insights).ok();
            }
            ReflectionCall::from(r)
        });
        BrainCall {
            tick: l.tick,
            npc: l.npc,
            brain: l.brain,
            provider: l.provider,
            recalled: l.recalled,
            recall_failed: l.recall_failed,
            decision: l.decision,
            recall_query: l.recall_query,
            recall_scores: l.recall_scores,
            reflection,
            wake: l.wake,
            exchange: exchange_of_line!(l),
        }
    }
}

impl BrainCall {
    /// The call as its `llm.jsonl` line, taken apart for it: the bytes serializing it
    /// gives, without first copying it whole into the line's shape (serializing borrows
    /// the call, and the line's shape owns its fields). A Think worker writes a line per
    /// NPC per tick and has no use for the call after.
    ///
    /// A line with none of its usually absent fields (the heuristic brain's, nearly
    /// every line of a big town's tape) is written field by field, as the event log's
    /// `move` and `memory` lines are ([`hearsay_core::line`]); any other goes through
    /// serde. A test compares both writers' bytes.
    pub fn into_line(self) -> String {
        let line = BrainCallLine::from(self);
        let mut out = Vec::with_capacity(LINE_CAPACITY);
        if line.is_plain() {
            line.write_plain(&mut out);
        } else {
            json(&mut out, &line);
        }
        // Both writers write UTF-8 only (the strings come from `str`s).
        String::from_utf8(out).unwrap_or_default()
    }
}

/// A plain line's usual length and some: the buffer is not grown while it is written.
const LINE_CAPACITY: usize = 256;

impl BrainCallLine {
    /// Only the fields [`BrainCallLine::write_plain`] writes are present.
    fn is_plain(&self) -> bool {
        self.response.is_none()
            && self.response_bytes.is_none()
            && self.usage.is_none()
            && self.retries == 0
            && self.fallback.is_none()
            && self.repairs.is_empty()
            && self.rejections.is_empty()
            && self.trimmed.is_empty()
            && self.error.is_none()
            && self.latency_ms.is_none()
            && self.recall_scores.is_empty()
            && self.reflection.is_none()
            && self.wake.is_empty()
    }

    /// The line as serde writes it, when [`BrainCallLine::is_plain`]: the fields in the
    /// struct's order, `recall_failed` and `recall_query` left out as serde leaves them.
    fn write_plain(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"tick":"#);
        int(out, self.tick);
        out.extend_from_slice(br#","npc":"#);
        string(out, self.npc.as_str());
        out.extend_from_slice(br#","brain":"#);
        string(out, self.brain.as_str());
        out.extend_from_slice(br#","provider":"#);
        string(out, self.provider.as_str());
        if let Some(request) = &self.request {
            out.extend_from_slice(br#","request":"#);
            string(out, request.as_str());
        }
        out.extend_from_slice(br#","recalled":"#);
        ids(out, &self.recalled);
        if self.recall_failed {
            out.extend_from_slice(br#","recall_failed":true"#);
        }
        out.extend_from_slice(match self.outcome {
            CallOutcome::Ok => br#","outcome":"ok","decision":"#.as_slice(),
            CallOutcome::Fallback => br#","outcome":"fallback","decision":"#,
            CallOutcome::Failed => br#","outcome":"failed","decision":"#,
        });
        match &self.decision {
            Decision::Talk { speech, to: None } => {
                out.extend_from_slice(br#"{"action":"talk","speech":"#);
                string(out, speech.as_str());
                out.push(b'}');
            }
            Decision::Move { to } => {
                out.extend_from_slice(br#"{"action":"move","to":"#);
                pos(out, *to);
                out.push(b'}');
            }
            Decision::Stay => out.extend_from_slice(br#"{"action":"stay"}"#),
            // Addressed talk and whispers: rare enough for serde.
            other => json(out, other),
        }
        if !self.recall_query.is_empty() {
            out.extend_from_slice(br#","recall_query":"#);
            string(out, self.recall_query.as_str());
        }
        out.push(b'}');
    }
}

impl From<BrainCall> for BrainCallLine {
    fn from(mut c: BrainCall) -> Self {
        let heuristic = c.provider == DECISION_IS_RESPONSE;
        // The heuristic brain gives no response text for a decision (its response is the
        // decision), and a call read back from a line carries the decision's JSON (the
        // reader puts it back). Either way the line leaves it out.
        if heuristic
            && c.exchange.response_bytes.is_none()
            && c.exchange.response.as_deref().is_some_and(|r| {
                r.is_empty() || Some(r) == serde_json::to_string(&c.decision).ok().as_deref()
            })
        {
            c.exchange.response = None;
        }
        if heuristic {
            // Not what replay or inspect need: `hearsay inspect --query <recall_query>`
            // computes the scores again, bit for bit, and the heuristic's time is noise
            // in microseconds. Together they were most of a big town's tape.
            c.recall_scores.clear();
        }
        let mut line = line_of_exchange!(BrainCallLine, c.exchange, {
            tick: c.tick,
            npc: c.npc,
            brain: c.brain,
            provider: c.provider,
            recalled: c.recalled,
            recall_failed: c.recall_failed,
            decision: c.decision,
            recall_query: c.recall_query,
            recall_scores: c.recall_scores,
            reflection: c.reflection.map(|r| {
                let mut r = ReflectionCallLine::from(r);
                if heuristic {
                    if r.response_bytes.is_none()
                        && r.response.is_some()
                        && r.response == serde_json::to_string(&r.insights).ok()
                    {
                        r.response = None;
                    }
                    r.latency_ms = None;
                }
                r
            }),
            wake: c.wake,
        });
        if heuristic {
            line.latency_ms = None;
        }
        line
    }
}

impl From<ReflectionCallLine> for ReflectionCall {
    fn from(l: ReflectionCallLine) -> Self {
        ReflectionCall {
            insights: l.insights,
            exchange: exchange_of_line!(l),
        }
    }
}

impl From<ReflectionCall> for ReflectionCallLine {
    fn from(c: ReflectionCall) -> Self {
        line_of_exchange!(ReflectionCallLine, c.exchange, { insights: c.insights, })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_keeps_its_line_byte_for_byte() {
        // The tape's layout, field by field, whatever types stand behind it: an old
        // llm.jsonl line reads back and writes out the same bytes.
        let line = r#"{"tick":3,"npc":"Bob","brain":"default","provider":"openai","request":"d1","recalled":[4,2],"recall_failed":true,"outcome":"fallback","decision":{"action":"stay"},"response":"{}","response_bytes":99999,"usage":{"prompt_tokens":10,"completion_tokens":2,"cached_tokens":4},"retries":1,"fallback":"budget spent","repairs":["code fence"],"rejections":["no action"],"trimmed":["recalled 5 -> 3"],"error":"x","latency_ms":12.5,"recall_query":"Bob sees Alice","recall_scores":[{"relevance":0.5,"recency":1.0,"score":1.2}],"reflection":{"request":"d2","outcome":"failed","insights":[],"retries":2,"error":"cut off","latency_ms":3.0}}"#;
        let call: BrainCall = serde_json::from_str(line).expect("reads");
        assert_eq!(
            call.exchange.carried.fallback.as_deref(),
            Some("budget spent")
        );
        assert_eq!(call.exchange.outcome, CallOutcome::Fallback);
        let reflection = call.reflection.as_ref().expect("reflection");
        assert_eq!(reflection.exchange.carried.retries, 2);
        assert_eq!(serde_json::to_string(&call).expect("writes"), line);
        assert_eq!(call.into_line(), line, "taken apart: the same bytes");
    }

    /// The field-by-field writer writes serde's bytes: thousands of random calls, plain
    /// and not (each usually absent field in turn), with strings that need escaping and
    /// numbers at their ends.
    #[test]
    fn plain_lines_are_written_as_serde_writes_them() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Mostly plain letters (most strings need no escape), now and then a character
        // serde_json escapes or one beyond ASCII.
        let text = |next: &mut dyn FnMut() -> u64| -> String {
            let len = next() % 12;
            (0..len)
                .map(|_| match next() % 24 {
                    0 => '"',
                    1 => '\\',
                    2 => '\n',
                    3 => '\u{1}',
                    4 => '\u{1f}',
                    5 => '\u{7f}',
                    6 => 'é',
                    7 => '鱼',
                    8 => '😀',
                    n => char::from(b'A' + n as u8),
                })
                .collect()
        };
        let ends = [0, 1, -1, i32::MAX, i32::MIN, 17, -400];
        let big = [0, 1, 9, 10, 99, 100, u64::MAX, u64::MAX / 3];
        let pick =
            |next: &mut dyn FnMut() -> u64, of: &[u64]| of[(next() % of.len() as u64) as usize];
        let (mut plain, mut other) = (0, 0);
        for round in 0..4_000u64 {
            let decision = match next() % 5 {
                0 => Decision::Talk {
                    speech: text(&mut next),
                    to: None,
                },
                1 => Decision::Talk {
                    speech: text(&mut next),
                    to: Some(hearsay_core::NpcId((next() % 9) as u32)),
                },
                2 => Decision::Whisper {
                    speech: text(&mut next),
                    to: hearsay_core::NpcId(u32::MAX),
                },
                3 => Decision::Move {
                    to: hearsay_core::Pos::new(
                        ends[(next() % ends.len() as u64) as usize],
                        ends[(next() % ends.len() as u64) as usize],
                    ),
                },
                _ => Decision::Stay,
            };
            let mut call = BrainCall {
                tick: pick(&mut next, &big),
                npc: text(&mut next).as_str().into(),
                brain: text(&mut next).as_str().into(),
                provider: if next() % 2 == 0 {
                    DECISION_IS_RESPONSE.into()
                } else {
                    text(&mut next).as_str().into()
                },
                recalled: (0..next() % 6)
                    .map(|_| MemoryId(pick(&mut next, &big)))
                    .collect(),
                recall_failed: next() % 3 == 0,
                decision,
                exchange: Exchange {
                    // Sometimes none, as the heuristic brain's lines have.
                    request: (next() % 4 != 0).then(|| text(&mut next)),
                    outcome: [CallOutcome::Ok, CallOutcome::Fallback, CallOutcome::Failed]
                        [(next() % 3) as usize],
                    response: None,
                    response_bytes: None,
                    carried: Carried::default(),
                    error: None,
                    latency_ms: 0.5,
                },
                recall_query: text(&mut next),
                recall_scores: Vec::new(),
                reflection: None,
                wake: Vec::new(),
            };
            // Every other round, one usually absent field (any provider keeps them).
            if round % 2 == 1 {
                match next() % 13 {
                    0 => call.exchange.response = Some(text(&mut next)),
                    1 => call.exchange.response_bytes = Some(pick(&mut next, &big)),
                    2 => {
                        call.exchange.carried.usage = Some(Usage {
                            prompt_tokens: pick(&mut next, &big),
                            completion_tokens: 3,
                            cached_tokens: next() % 2,
                        })
                    }
                    3 => call.exchange.carried.retries = 1 + (next() % 3) as u32,
                    4 => call.exchange.carried.fallback = Some(text(&mut next)),
                    5 => call.exchange.carried.repairs = vec![text(&mut next)],
                    6 => call.exchange.carried.rejections = vec![text(&mut next)],
                    7 => call.exchange.carried.trimmed = vec![text(&mut next)],
                    8 => call.exchange.error = Some(text(&mut next)),
                    9 => {
                        call.recall_scores = vec![RecallScore {
                            relevance: 0.25,
                            recency: 1.0,
                            score: 1.5,
                        }]
                    }
                    10 => {
                        call.reflection = Some(ReflectionCall {
                            insights: Vec::new(),
                            exchange: call.exchange.clone(),
                        })
                    }
                    11 => call.wake = vec![WakeReason::Heard, WakeReason::Idle],
                    _ => call.exchange.latency_ms = 7.0,
                }
            }
            let serde = serde_json::to_string(&call).expect("writes");
            if BrainCallLine::from(call.clone()).is_plain() {
                plain += 1;
            } else {
                other += 1;
            }
            assert_eq!(call.into_line(), serde);
        }
        // Both writers were compared: the heuristic lines are plain, the rest mostly not.
        assert!(
            plain > 1_000 && other > 1_000,
            "{plain} plain, {other} other"
        );
    }

    #[test]
    fn a_line_without_a_request_digest_reads_and_writes_without_one() {
        // The heuristic brain's call, as it is written now; the same with a reflection.
        let now = r#"{"tick":4,"npc":"N1","brain":"default","provider":"heuristic","recalled":[7],"outcome":"ok","decision":{"action":"stay"},"recall_query":"N2"}"#;
        let call: BrainCall = serde_json::from_str(now).expect("reads");
        assert_eq!(call.exchange.request, None);
        assert_eq!(serde_json::to_string(&call).expect("writes"), now);
        assert_eq!(call.clone().into_line(), now, "taken apart: the same bytes");
        let reflected = r#"{"tick":9,"npc":"N0","brain":"default","provider":"heuristic","recalled":[],"outcome":"ok","decision":{"action":"stay"},"reflection":{"outcome":"ok","insights":[]}}"#;
        let call: BrainCall = serde_json::from_str(reflected).expect("reads");
        let reflection = call.reflection.as_ref().expect("a reflection");
        assert_eq!(reflection.exchange.request, None);
        assert_eq!(call.into_line(), reflected);
    }

    #[test]
    fn a_heuristic_line_leaves_out_the_response_its_decision_is() {
        // Written now: no `response` (it is the decision as JSON); read, it is back.
        let now = r#"{"tick":0,"npc":"N1","brain":"default","provider":"heuristic","request":"d1","recalled":[],"outcome":"ok","decision":{"action":"move","to":[73,32]}}"#;
        let call: BrainCall = serde_json::from_str(now).expect("reads");
        assert_eq!(
            call.exchange.response.as_deref(),
            Some(r#"{"action":"move","to":[73,32]}"#)
        );
        assert_eq!(serde_json::to_string(&call).expect("writes"), now);
        assert_eq!(call.clone().into_line(), now, "taken apart: the same bytes");
        // Written before, with the response: read the same, written the new way.
        let before = now.replace(
            r#"[73,32]}}"#,
            r#"[73,32]},"response":"{\"action\":\"move\",\"to\":[73,32]}","latency_ms":0.0}"#,
        );
        let old: BrainCall = serde_json::from_str(&before).expect("reads");
        assert_eq!(old, call);
        // As the brain gives it now, with no response text: the same line, and read
        // back with the decision's JSON as its response.
        let mut given = call.clone();
        given.exchange.response = Some(String::new());
        assert_eq!(given.clone().into_line(), now);
        assert_eq!(serde_json::to_string(&given).expect("writes"), now);
        // Its scores and time are left out too (inspect computes the scores again); a
        // line written before with them reads with them.
        let mut scored = call.clone();
        scored.exchange.latency_ms = 0.25;
        scored.recall_scores = vec![RecallScore {
            relevance: 0.5,
            recency: 1.0,
            score: 1.2,
        }];
        assert_eq!(serde_json::to_string(&scored).expect("writes"), now);
        let with = now.replace(
            r#"[73,32]}}"#,
            r#"[73,32]},"latency_ms":0.25,"recall_scores":[{"relevance":0.5,"recency":1.0,"score":1.2}]}"#,
        );
        assert_eq!(
            serde_json::from_str::<BrainCall>(&with).expect("reads"),
            scored
        );
        // Another provider, or a heuristic answer that is not its decision, keeps it.
        for (provider, response) in [
            ("openai", r#"{"action":"move","to":[73,32]}"#),
            ("heuristic", "{}"),
        ] {
            let mut other = call.clone();
            other.provider = provider.into();
            other.exchange.response = Some(response.into());
            let line = serde_json::to_string(&other).expect("writes");
            assert!(line.contains(r#""response":"#), "{line}");
            assert_eq!(
                serde_json::from_str::<BrainCall>(&line).expect("reads"),
                other
            );
        }
    }

    #[test]
    fn a_heuristic_reflection_leaves_out_the_response_its_insights_are_and_its_time() {
        let now = r#"{"tick":9,"npc":"N0","brain":"default","provider":"heuristic","request":"d1","recalled":[],"outcome":"ok","decision":{"action":"stay"},"reflection":{"request":"d2","outcome":"ok","insights":[{"content":"Several people told me: x","importance":8,"evidence":[3,5]}]}}"#;
        let call: BrainCall = serde_json::from_str(now).expect("reads");
        let reflection = call.reflection.as_ref().expect("a reflection");
        assert_eq!(
            reflection.exchange.response.as_deref(),
            Some(r#"[{"content":"Several people told me: x","importance":8,"evidence":[3,5]}]"#),
            "read, the response is back"
        );
        assert_eq!(serde_json::to_string(&call).expect("writes"), now);
        // Written before, with the response and the time: read with them, written the
        // new way (so one seed's tape no longer differs from run to run by the time).
        let before = now.replace(
            r#"[3,5]}]}}"#,
            r#"[3,5]}],"response":"[{\"content\":\"Several people told me: x\",\"importance\":8,\"evidence\":[3,5]}]","latency_ms":0.0247}}"#,
        );
        let old: BrainCall = serde_json::from_str(&before).expect("reads");
        let old_reflection = old.reflection.as_ref().expect("a reflection");
        assert_eq!(old_reflection.exchange.latency_ms, 0.0247);
        assert_eq!(
            old_reflection.exchange.response,
            reflection.exchange.response
        );
        assert_eq!(serde_json::to_string(&old).expect("writes"), now);
        // A response that is not the insights kept (the brain said more than was kept),
        // or another provider's, stays on the tape; a failed one reads back without one.
        let mut cut = call.clone();
        let r = cut.reflection.as_mut().expect("a reflection");
        r.exchange.response = Some("[1,2]".into());
        let line = serde_json::to_string(&cut).expect("writes");
        assert!(line.contains(r#""response":"[1,2]""#), "{line}");
        assert_eq!(
            serde_json::from_str::<BrainCall>(&line).expect("reads"),
            cut
        );
        let mut other = call.clone();
        other.provider = "openai".into();
        let line = serde_json::to_string(&other).expect("writes");
        assert!(
            line.contains(r#""latency_ms":0.0"#) && line.contains(r#""response":"[{"#),
            "{line}"
        );
        let failed = now.replace(r#""outcome":"ok","insights":[{"content":"Several people told me: x","importance":8,"evidence":[3,5]}]"#, r#""outcome":"failed","insights":[]"#);
        let read: BrainCall = serde_json::from_str(&failed).expect("reads");
        assert_eq!(
            read.reflection.expect("a reflection").exchange.response,
            None
        );
    }

    #[test]
    fn addressed_decisions_keep_their_bytes_and_plain_talk_keeps_its_old_ones() {
        // A tape line's decision as `llm.jsonl` holds it: a plain talk has no `to` (so a
        // tape recorded before addressed talk existed reads the same), an addressed one
        // and a whisper carry the addressee's id.
        for (line, decision) in [
            (
                r#"{"action":"talk","speech":"hi"}"#,
                Decision::Talk {
                    speech: "hi".into(),
                    to: None,
                },
            ),
            (
                r#"{"action":"talk","speech":"hi","to":2}"#,
                Decision::Talk {
                    speech: "hi".into(),
                    to: Some(hearsay_core::NpcId(2)),
                },
            ),
            (
                r#"{"action":"whisper","speech":"hi","to":1}"#,
                Decision::Whisper {
                    speech: "hi".into(),
                    to: hearsay_core::NpcId(1),
                },
            ),
        ] {
            assert_eq!(serde_json::to_string(&decision).expect("writes"), line);
            let read: Decision = serde_json::from_str(line).expect("reads");
            assert_eq!(read, decision);
        }
        assert!(serde_json::from_str::<Decision>(r#"{"action":"whisper","speech":"hi"}"#).is_err());
    }

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
