//! The LLM brain: a prompt from the templates, one chat completion through an
//! OpenAI-compatible [`Endpoint`], a strictly validated decision — or, when its NPC is
//! due to reflect, a second prompt (`assets/prompts/reflect.*`) and strictly validated
//! insights.
//!
//! Around each call: a token and call budget per run, and a circuit breaker. Past the
//! budget, or while the breaker is open (after `breaker_failures` consecutive failed
//! calls, for `breaker_cooldown_ticks` ticks), the brain's NPCs are decided by the
//! heuristic brain instead, and every such fallback is reported.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::heuristic::HeuristicBrain;
use crate::openai::Endpoint;
use crate::parse::{parse_decision, parse_insights};
use crate::prompt::{
    Prompt, ask_prompt, decide_prompt, decision_schema, insights_schema, reflect_prompt,
};
use crate::request::{AskRequest, BrainRequest, ReflectRequest};
use crate::{AnswerReply, BoxFuture, Brain, BrainError, BrainFailure, BrainReply, ReflectReply};

/// The longest answer to a question kept, in characters.
pub const ANSWER_CHARS_MAX: usize = 2_000;

/// How the answer's JSON shape is requested.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponseFormat {
    /// OpenAI's `{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}`
    /// (OpenAI, Gemini, vLLM, llama.cpp).
    #[default]
    JsonSchema,
    /// `{"type": "json_object", "schema": …}` (llama.cpp, some Ollama and vLLM builds).
    JsonObject,
    /// No `response_format`: the prompt alone asks for JSON.
    None,
}

/// What one LLM brain sends and how far it may go.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    /// The model name sent with each request.
    pub model: String,
    /// Sampling temperature.
    pub temperature: f64,
    /// `max_tokens` per answer.
    pub max_tokens: u32,
    /// How JSON output is requested.
    pub response_format: ResponseFormat,
    /// Longest speech asked for (`maxLength`) and accepted.
    pub speech_max: usize,
    /// Stop calling the model (heuristic fallback) once this many tokens are spent.
    pub budget_tokens: Option<u64>,
    /// Stop calling the model once this many calls are made.
    pub budget_calls: Option<u64>,
    /// Consecutive failed calls that open the circuit breaker.
    pub breaker_failures: u32,
    /// Ticks the breaker stays open.
    pub breaker_cooldown_ticks: u64,
}

#[derive(Debug, Default)]
struct Breaker {
    consecutive_failures: u32,
    open_until_tick: Option<u64>,
}

/// An NPC brain backed by an OpenAI-compatible chat model.
#[derive(Debug)]
pub struct LlmBrain {
    endpoint: Endpoint,
    config: LlmConfig,
    fallback: HeuristicBrain,
    breaker: Mutex<Breaker>,
    tokens_spent: AtomicU64,
    calls_made: AtomicU64,
}

impl LlmBrain {
    /// A brain calling `endpoint` with `config`.
    pub fn new(endpoint: Endpoint, config: LlmConfig) -> Self {
        Self {
            endpoint,
            config,
            fallback: HeuristicBrain::default(),
            breaker: Mutex::new(Breaker::default()),
            tokens_spent: AtomicU64::new(0),
            calls_made: AtomicU64::new(0),
        }
    }

    fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Why the model must not be called now, if it must not. Otherwise the call is
    /// counted against the call budget here, atomically, so concurrent callers can never
    /// overshoot it.
    fn refusal(&self, tick: u64) -> Option<String> {
        if let Some(budget) = self.config.budget_tokens
            && self.tokens_spent.load(Ordering::SeqCst) >= budget
        {
            return Some(format!("token budget of {budget} spent"));
        }
        if let Some(until) = self.breaker().open_until_tick
            && tick < until
        {
            return Some(format!("circuit breaker open until tick {until}"));
        }
        let reserved = self
            .calls_made
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |made| {
                match self.config.budget_calls {
                    Some(budget) if made >= budget => None,
                    _ => Some(made + 1),
                }
            });
        match (reserved, self.config.budget_calls) {
            (Err(_), Some(budget)) => Some(format!("call budget of {budget} spent")),
            _ => None,
        }
    }

    fn record_failure(&self, tick: u64) {
        let mut breaker = self.breaker();
        breaker.consecutive_failures += 1;
        if breaker.consecutive_failures >= self.config.breaker_failures.max(1) {
            let until = tick + self.config.breaker_cooldown_ticks;
            if breaker.open_until_tick.is_none_or(|u| u < until) {
                tracing::warn!(
                    model = %self.config.model,
                    failures = breaker.consecutive_failures,
                    until,
                    "circuit breaker opened: the heuristic brain decides for this brain's NPCs until the cool-down ends"
                );
                breaker.open_until_tick = Some(until);
            }
            breaker.consecutive_failures = 0;
        }
    }

    fn record_success(&self) {
        self.breaker().consecutive_failures = 0;
    }

    /// The request body for `req`.
    pub fn body(&self, req: &BrainRequest) -> Result<Value, BrainError> {
        let prompt = decide_prompt(req, self.config.speech_max)
            .map_err(|e| BrainError::Malformed(format!("prompt template: {e}")))?;
        let schema = decision_schema(req.grid.width, req.grid.height, self.config.speech_max);
        Ok(self.chat_body(prompt, "decision", schema))
    }

    /// The request body for a reflection.
    pub fn reflect_body(&self, req: &ReflectRequest) -> Result<Value, BrainError> {
        let prompt = reflect_prompt(req, self.config.speech_max)
            .map_err(|e| BrainError::Malformed(format!("prompt template: {e}")))?;
        let schema = insights_schema(req.insights_max, self.config.speech_max);
        Ok(self.chat_body(prompt, "insights", schema))
    }

    /// The model, the two messages and the sampling settings: every request's body.
    fn plain_body(&self, prompt: Prompt) -> Value {
        json!({
            "model": self.config.model,
            "messages": [
                { "role": "system", "content": prompt.system },
                { "role": "user", "content": prompt.user },
            ],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        })
    }

    fn chat_body(&self, prompt: Prompt, name: &str, schema: Value) -> Value {
        let mut body = self.plain_body(prompt);
        match self.config.response_format {
            ResponseFormat::JsonSchema => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": { "name": name, "strict": true, "schema": schema },
                });
            }
            ResponseFormat::JsonObject => {
                body["response_format"] = json!({ "type": "json_object", "schema": schema });
            }
            ResponseFormat::None => {}
        }
        body
    }

    /// The request body for a question (plain text, no response format).
    pub fn ask_body(&self, req: &AskRequest) -> Result<Value, BrainError> {
        let prompt =
            ask_prompt(req).map_err(|e| BrainError::Malformed(format!("prompt template: {e}")))?;
        Ok(self.plain_body(prompt))
    }

    async fn call_ask(&self, req: &AskRequest) -> Result<AnswerReply, BrainFailure> {
        if let Some(reason) = self.refusal(req.tick) {
            return Ok(AnswerReply {
                text: self.fallback.answer_now(req),
                usage: None,
                retries: 0,
                fallback: Some(reason),
            });
        }
        let body = self.ask_body(req)?;
        let answer = self
            .endpoint
            .chat(&body, u64::from(req.npc.0) ^ req.tick.rotate_left(17))
            .await
            .map_err(|failure| BrainFailure {
                error: BrainError::Unavailable(failure.error.to_string()),
                raw: None,
                usage: None,
                retries: failure.retries,
            })?;
        let text: String = answer
            .content
            .trim()
            .chars()
            .take(ANSWER_CHARS_MAX)
            .collect();
        if text.is_empty() {
            return Err(BrainFailure {
                error: BrainError::Malformed("the model answered with nothing".into()),
                raw: Some(answer.content),
                usage: answer.usage,
                retries: answer.retries,
            });
        }
        Ok(AnswerReply {
            text,
            usage: answer.usage,
            retries: answer.retries,
            fallback: None,
        })
    }

    async fn call_reflect(&self, req: &ReflectRequest) -> Result<ReflectReply, BrainFailure> {
        if let Some(reason) = self.refusal(req.tick) {
            let mut reply = ReflectReply::plain(self.fallback.reflect_now(req));
            reply.fallback = Some(reason);
            return Ok(reply);
        }
        let body = self.reflect_body(req)?;
        // Another jitter stream than the same NPC's decision in the same tick.
        let jitter_key = !((u64::from(req.npc.0) << 32) ^ req.tick);
        let answer = match self.endpoint.chat(&body, jitter_key).await {
            Ok(answer) => answer,
            Err(failure) => {
                self.record_failure(req.tick);
                return Err(BrainFailure {
                    error: BrainError::Unavailable(failure.error.to_string()),
                    raw: None,
                    usage: None,
                    retries: failure.retries,
                });
            }
        };
        self.record_success();
        if let Some(usage) = answer.usage {
            self.tokens_spent.fetch_add(
                usage.prompt_tokens + usage.completion_tokens,
                Ordering::SeqCst,
            );
        }
        let failure = |error| BrainFailure {
            error,
            raw: Some(answer.content.clone()),
            usage: answer.usage,
            retries: answer.retries,
        };
        if answer.finish_reason.as_deref() == Some("length") {
            return Err(failure(BrainError::Truncated));
        }
        let shown: Vec<_> = req.memories.iter().map(|m| m.id).collect();
        let parsed = parse_insights(
            &answer.content,
            &shown,
            req.insights_max,
            self.config.speech_max,
        )
        .map_err(|e| failure(BrainError::Malformed(e.to_string())))?;
        Ok(ReflectReply {
            insights: parsed.insights,
            raw: answer.content,
            usage: answer.usage,
            retries: answer.retries,
            fallback: None,
            repairs: parsed.repairs,
            rejections: parsed.rejections,
        })
    }

    async fn call(&self, req: &BrainRequest) -> Result<BrainReply, BrainFailure> {
        let obs = &req.observation;
        if let Some(reason) = self.refusal(obs.tick) {
            let decision = self.fallback.decide_now(req);
            let raw = serde_json::to_string(&decision).unwrap_or_default();
            let mut reply = BrainReply::plain(decision, raw);
            reply.fallback = Some(reason);
            return Ok(reply);
        }
        let body = self.body(req)?;
        let jitter_key = (u64::from(obs.npc.0) << 32) ^ obs.tick;
        let answer = match self.endpoint.chat(&body, jitter_key).await {
            Ok(answer) => answer,
            Err(failure) => {
                self.record_failure(obs.tick);
                return Err(BrainFailure {
                    error: BrainError::Unavailable(failure.error.to_string()),
                    raw: None,
                    usage: None,
                    retries: failure.retries,
                });
            }
        };
        self.record_success();
        if let Some(usage) = answer.usage {
            self.tokens_spent.fetch_add(
                usage.prompt_tokens + usage.completion_tokens,
                Ordering::SeqCst,
            );
        }
        let failure = |error| BrainFailure {
            error,
            raw: Some(answer.content.clone()),
            usage: answer.usage,
            retries: answer.retries,
        };
        if answer.finish_reason.as_deref() == Some("length") {
            return Err(failure(BrainError::Truncated));
        }
        let parsed = parse_decision(&answer.content, req.grid, obs.at, self.config.speech_max)
            .map_err(|e| failure(BrainError::Malformed(e.to_string())))?;
        Ok(BrainReply {
            decision: parsed.decision,
            raw: answer.content,
            usage: answer.usage,
            retries: answer.retries,
            fallback: None,
            repairs: parsed.repairs,
            rejections: parsed.rejections,
        })
    }
}

impl Brain for LlmBrain {
    fn provider(&self) -> &str {
        "openai"
    }

    fn decide<'a>(
        &'a self,
        request: &'a BrainRequest,
    ) -> BoxFuture<'a, Result<BrainReply, BrainFailure>> {
        Box::pin(self.call(request))
    }

    fn reflect<'a>(
        &'a self,
        request: &'a ReflectRequest,
    ) -> BoxFuture<'a, Result<ReflectReply, BrainFailure>> {
        Box::pin(self.call_reflect(request))
    }

    fn answer<'a>(
        &'a self,
        request: &'a AskRequest,
    ) -> BoxFuture<'a, Result<AnswerReply, BrainFailure>> {
        Box::pin(self.call_ask(request))
    }
}
