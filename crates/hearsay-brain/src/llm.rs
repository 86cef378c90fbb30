//! The LLM brain: a prompt from the templates, one chat completion through its
//! OpenAI-compatible server's [`Replicas`] (one or more), a strictly validated decision — or, when its NPC is
//! due to reflect, a second prompt (`assets/prompts/reflect.*`) and strictly validated
//! insights.
//!
//! Around each call: a token and call budget per run, and a circuit breaker. Past the
//! budget, or while the breaker is open (after `breaker_failures` consecutive failed
//! calls, for `breaker_cooldown_ticks` ticks), the brain's NPCs are decided by the
//! heuristic brain instead, and every such fallback is reported.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use serde_json::{Value, json};

use crate::context::{ContextBudget, TRIMS, TokenCounter, trim_decision, trim_reflection};
use crate::heuristic::HeuristicBrain;
use crate::openai::{CallError, ServerFacts};
use crate::parse::{parse_decision, parse_insights};
use crate::prompt::{
    Prompt, SchemaDialect, ask_prompt, decide_prompt, decision_schema, insights_schema,
    reflect_prompt,
};
use crate::replicas::Replicas;
use crate::request::{AskRequest, BrainRequest, ReflectRequest};
use crate::{
    AnswerReply, BoxFuture, Brain, BrainError, BrainFailure, BrainReply, Carried, JudgeReply,
    JudgeRequest, ReflectReply,
};

/// The longest answer to a question kept, in characters.
pub const ANSWER_CHARS_MAX: usize = 2_000;

/// The most tokens a judge's verdict may take: `{"answer": "yes"}` and some slack.
pub const JUDGE_MAX_TOKENS: u32 = 16;

/// How the answer's JSON shape is requested.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponseFormat {
    /// OpenAI's `{"type": "json_schema", "json_schema": {"name", "strict": true,
    /// "schema"}}` with the strict subset every hosted strict mode accepts (OpenAI, Azure,
    /// Gemini): the bounds are in the prompt and enforced after parsing.
    #[default]
    JsonSchema,
    /// The same with the bounds in the schema (`maxLength`, `minimum`, `maximum`), for
    /// servers that decode with them (llama.cpp, vLLM, Ollama).
    JsonSchemaFull,
    /// `{"type": "json_object", "schema": …}` (llama.cpp, some Ollama and vLLM builds).
    JsonObject,
    /// No `response_format`: the prompt alone asks for JSON.
    None,
}

impl ResponseFormat {
    /// The schema dialect it sends.
    pub fn dialect(self) -> SchemaDialect {
        match self {
            ResponseFormat::JsonSchema => SchemaDialect::Strict,
            _ => SchemaDialect::Full,
        }
    }
}

/// What one LLM brain sends and how far it may go.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    /// The model name sent with each request.
    pub model: String,
    /// Sampling temperature, 0–2, sent as `temperature`.
    pub temperature: f64,
    /// `max_tokens` per decision (and interview) answer.
    pub max_tokens: u32,
    /// `max_tokens` per reflection answer: a few insights with their evidence need more
    /// than a decision, and an answer cut off at the limit is a failed reflection.
    pub reflect_max_tokens: u32,
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
    /// The scenario's `context_tokens`: tokens per request, prompt and answer (else the
    /// server's figure, else [`crate::context::CONTEXT_TOKENS_DEFAULT`]).
    pub context_tokens: Option<u32>,
}

/// A preflight probe that went through: one real decision request, answered and valid.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// Prompt tokens (the server's count when it reported one).
    pub prompt_tokens: u64,
    /// Of those, taken from the server's prompt cache.
    pub cached_tokens: u64,
    /// What was trimmed to fit the context.
    pub trimmed: Vec<String>,
    /// Requests it took to get a valid answer.
    pub attempts: u32,
    /// The context it was held to.
    pub budget: ContextBudget,
}

/// Why a preflight probe failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The prompt does not fit the context even trimmed.
    #[error("{0}")]
    TooLong(String),
    /// The server refused the request (HTTP 4xx): its own message.
    #[error("the server refused the request (HTTP {status}): {message}")]
    Refused {
        /// The 4xx HTTP status the server answered with.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// No answer (connection, timeout, 5xx after retries).
    #[error("the server did not answer: {0}")]
    Unavailable(String),
    /// Answers came, but none was a valid decision.
    #[error("{attempts} answers, none a valid decision; the last: {last}")]
    Invalid {
        /// How many requests the probe made before giving up.
        attempts: u32,
        /// Why the last one was refused.
        last: String,
    },
}

/// How many requests a probe makes for a valid answer.
pub const PROBE_ATTEMPTS: u32 = 3;

#[derive(Debug, Default)]
struct Breaker {
    consecutive_failures: u32,
    open_until_tick: Option<u64>,
}

/// An NPC brain backed by an OpenAI-compatible chat model.
#[derive(Debug)]
pub struct LlmBrain {
    replicas: Replicas,
    config: LlmConfig,
    budget: RwLock<ContextBudget>,
    fallback: HeuristicBrain,
    breaker: Mutex<Breaker>,
    tokens_spent: AtomicU64,
    calls_made: AtomicU64,
}

impl LlmBrain {
    /// A brain calling `replicas` with `config`.
    pub fn new(replicas: Replicas, config: LlmConfig) -> Self {
        Self {
            budget: RwLock::new(ContextBudget::new(config.context_tokens, &config.model)),
            replicas,
            config,
            fallback: HeuristicBrain::default(),
            breaker: Mutex::new(Breaker::default()),
            tokens_spent: AtomicU64::new(0),
            calls_made: AtomicU64::new(0),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// The servers it calls.
    pub fn replicas(&self) -> &Replicas {
        &self.replicas
    }

    /// The context prompts are held to.
    pub fn budget(&self) -> ContextBudget {
        self.budget
            .read()
            .map(|b| b.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Takes in what the server says about itself: its context per request (unless the
    /// scenario set `context_tokens`) and whether it counts tokens.
    pub fn learn(&self, facts: &ServerFacts) {
        let mut budget = self.budget.write().unwrap_or_else(|e| e.into_inner());
        if self.config.context_tokens.is_none()
            && let Some((n, source)) = &facts.context
        {
            budget.context_tokens = *n;
            budget.source.clone_from(source);
        }
        if facts.counts_tokens {
            budget.counter = TokenCounter::Server;
        }
    }

    /// Asks the servers about themselves (see [`Replicas::facts`]) with a probe of `req`'s
    /// request, and takes the answer in.
    pub async fn discover(&self, req: &BrainRequest) -> Result<ServerFacts, BrainError> {
        let body = self.body(req)?;
        let facts = self.replicas.facts(&self.config.model, &body).await;
        self.learn(&facts);
        Ok(facts)
    }

    /// Whether chat body `body` leaves room for the answer (its own `max_tokens`): `None`
    /// when it does, `Some(tokens)` when it needs that many and does not fit. The UTF-8 bytes are
    /// checked first (an upper bound); only a prompt they do not clear is counted.
    async fn overflow(&self, body: &Value) -> Option<u64> {
        let budget = self.budget();
        let answer = body["max_tokens"]
            .as_u64()
            .unwrap_or(u64::from(self.config.max_tokens));
        let room = u64::from(budget.context_tokens).saturating_sub(answer);
        let bound = crate::context::upper_bound(body);
        if bound <= room {
            return None;
        }
        let tokens = match budget.counter.count_locally(body) {
            Some(n) => n,
            None => self.replicas.count_tokens(body).await.unwrap_or(bound),
        };
        (tokens > room).then_some(tokens)
    }

    /// `req` trimmed (in [`TRIMS`] order) until its body fits the context: the request
    /// sent, its body and what was trimmed.
    async fn fit_decision(&self, req: &BrainRequest) -> Result<(Value, Vec<String>), BrainFailure> {
        let mut r = req.clone();
        let mut trimmed = Vec::new();
        let mut next = TRIMS.iter();
        loop {
            let body = self.body(&r)?;
            let Some(tokens) = self.overflow(&body).await else {
                return Ok((body, trimmed));
            };
            match next.by_ref().find_map(|t| trim_decision(&mut r, *t)) {
                Some(step) => trimmed.push(step),
                None => return Err(self.too_long(tokens, self.config.max_tokens, trimmed)),
            }
        }
    }

    /// The reflection `req`, trimmed like [`LlmBrain::fit_decision`].
    async fn fit_reflection(
        &self,
        req: &ReflectRequest,
    ) -> Result<(Value, Vec<hearsay_core::MemoryId>, Vec<String>), BrainFailure> {
        let mut r = req.clone();
        let mut trimmed = Vec::new();
        let mut next = TRIMS.iter();
        loop {
            let body = self.reflect_body(&r)?;
            let Some(tokens) = self.overflow(&body).await else {
                let shown = r.memories.iter().map(|m| m.id).collect();
                return Ok((body, shown, trimmed));
            };
            match next.by_ref().find_map(|t| trim_reflection(&mut r, *t)) {
                Some(step) => trimmed.push(step),
                None => {
                    return Err(self.too_long(tokens, self.config.reflect_max_tokens, trimmed));
                }
            }
        }
    }

    fn too_long(&self, tokens: u64, answer: u32, trimmed: Vec<String>) -> BrainFailure {
        let budget = self.budget();
        BrainFailure {
            error: BrainError::TooLong(format!(
                "{tokens} prompt tokens ({}) and max_tokens {} need more than the {} of the context ({}){}",
                budget.counter.describe(),
                answer,
                budget.context_tokens,
                budget.source,
                if trimmed.is_empty() {
                    String::new()
                } else {
                    format!(", even trimmed ({})", trimmed.join(", "))
                }
            )),
            raw: None,
            carried: Carried {
                trimmed,
                ..Carried::default()
            },
        }
    }

    /// One real decision request for `req` (a tick-0 prompt) to replica `replica`, before
    /// a run: the budget, the breakers and the call count are left alone. Refusals come
    /// back with the server's own message; answers are parsed as a run would, up to
    /// [`PROBE_ATTEMPTS`] requests for a valid one.
    pub async fn probe(&self, req: &BrainRequest, replica: usize) -> Result<Probe, ProbeError> {
        let (body, trimmed) = self
            .fit_decision(req)
            .await
            .map_err(|f| ProbeError::TooLong(f.error.to_string()))?;
        let mut last = String::new();
        for attempt in 1..=PROBE_ATTEMPTS {
            let answer = self
                .replicas
                .chat_preflight(&body, replica)
                .await
                .map_err(|f| match f.error {
                    CallError::Status { status, body } if (400..500).contains(&status) => {
                        ProbeError::Refused {
                            status,
                            message: server_message(&body),
                        }
                    }
                    other => {
                        ProbeError::Unavailable(format!("{other} (after {} retries)", f.retries))
                    }
                })?;
            let parsed = if answer.finish_reason.as_deref() == Some("length") {
                Err(BrainError::Truncated.to_string())
            } else {
                parse_decision(
                    &answer.content,
                    req.grid,
                    &req.observation,
                    self.config.speech_max,
                )
                .map_err(|e| e.to_string())
            };
            match parsed {
                Ok(_) => {
                    let usage = answer.usage.unwrap_or_default();
                    let prompt_tokens = if usage.prompt_tokens > 0 {
                        usage.prompt_tokens
                    } else {
                        self.budget()
                            .counter
                            .count_locally(&body)
                            .unwrap_or_else(|| crate::context::upper_bound(&body))
                    };
                    return Ok(Probe {
                        prompt_tokens,
                        cached_tokens: usage.cached_tokens,
                        trimmed,
                        attempts: attempt,
                        budget: self.budget(),
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(ProbeError::Invalid {
            attempts: PROBE_ATTEMPTS,
            last,
        })
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
        let schema = decision_schema(
            req.grid.width,
            req.grid.height,
            self.config.speech_max,
            self.config.response_format.dialect(),
        );
        Ok(self.chat_body(prompt, "decision", schema))
    }

    /// The request body for a reflection.
    pub fn reflect_body(&self, req: &ReflectRequest) -> Result<Value, BrainError> {
        let prompt = reflect_prompt(req, self.config.speech_max)
            .map_err(|e| BrainError::Malformed(format!("prompt template: {e}")))?;
        let shown: Vec<u64> = req.memories.iter().map(|m| m.id.0).collect();
        let schema = insights_schema(
            req.insights_max,
            self.config.speech_max,
            &shown,
            self.config.response_format.dialect(),
        );
        let mut body = self.chat_body(prompt, "insights", schema);
        body["max_tokens"] = json!(self.config.reflect_max_tokens);
        Ok(body)
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
            ResponseFormat::JsonSchema | ResponseFormat::JsonSchemaFull => {
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
            let text = self.fallback.answer_now(req);
            return Ok(AnswerReply {
                raw: text.clone(),
                value: text,
                carried: Carried {
                    fallback: Some(reason),
                    ..Carried::default()
                },
            });
        }
        let body = self.ask_body(req)?;
        let answer = self
            .replicas
            .chat(&body, u64::from(req.npc.0) ^ req.tick.rotate_left(17))
            .await
            .map_err(unanswered)?;
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
                carried: Carried {
                    usage: answer.usage,
                    retries: answer.retries,
                    ..Carried::default()
                },
            });
        }
        Ok(AnswerReply {
            value: text,
            raw: answer.content,
            carried: Carried {
                usage: answer.usage,
                retries: answer.retries,
                ..Carried::default()
            },
        })
    }

    /// The body of a judge's question: the verdict schema when the brain asks for
    /// structured output, and a handful of tokens (a verdict is `{"answer":"yes"}`).
    pub fn judge_body(&self, req: &JudgeRequest) -> Result<Value, BrainError> {
        let prompt = crate::judge::judge_prompt(req)
            .map_err(|e| BrainError::Malformed(format!("prompt template: {e}")))?;
        let mut body = self.chat_body(prompt, "verdict", crate::judge::verdict_schema());
        body["max_tokens"] = json!(self.config.max_tokens.min(JUDGE_MAX_TOKENS));
        Ok(body)
    }

    async fn call_judge(&self, req: &JudgeRequest) -> Result<JudgeReply, BrainFailure> {
        if let Some(reason) = self.refusal(req.tick) {
            let yes = crate::judge::judge_by_words(req);
            return Ok(JudgeReply {
                value: yes,
                raw: if yes { "yes" } else { "no" }.to_owned(),
                carried: Carried {
                    fallback: Some(reason),
                    ..Carried::default()
                },
            });
        }
        let body = self.judge_body(req)?;
        let jitter = req.words.len() as u64 ^ req.tick.rotate_left(29);
        let answer = self
            .replicas
            .chat(&body, jitter)
            .await
            .map_err(unanswered)?;
        if let Some(usage) = answer.usage {
            self.tokens_spent.fetch_add(
                usage.prompt_tokens + usage.completion_tokens,
                Ordering::SeqCst,
            );
        }
        let carried = Carried {
            usage: answer.usage,
            retries: answer.retries,
            ..Carried::default()
        };
        match crate::judge::verdict(&answer.content) {
            Some(yes) => Ok(JudgeReply {
                value: yes,
                raw: answer.content,
                carried,
            }),
            None => Err(BrainFailure {
                error: BrainError::Malformed("the verdict is neither yes nor no".into()),
                raw: Some(answer.content),
                carried,
            }),
        }
    }

    async fn call_reflect(&self, req: &ReflectRequest) -> Result<ReflectReply, BrainFailure> {
        if let Some(reason) = self.refusal(req.tick) {
            let mut reply = ReflectReply::of_insights(self.fallback.reflect_now(req));
            reply.carried.fallback = Some(reason);
            return Ok(reply);
        }
        let (body, shown, trimmed) = self.fit_reflection(req).await?;
        // Another jitter stream than the same NPC's decision in the same tick.
        let jitter_key = !((u64::from(req.npc.0) << 32) ^ req.tick);
        let answer = match self.replicas.chat(&body, jitter_key).await {
            Ok(answer) => answer,
            Err(failure) => {
                self.record_failure(req.tick);
                return Err(BrainFailure {
                    error: BrainError::Unavailable(failure.error.to_string()),
                    raw: None,
                    carried: Carried {
                        retries: failure.retries,
                        trimmed,
                        ..Carried::default()
                    },
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
            carried: Carried {
                usage: answer.usage,
                retries: answer.retries,
                trimmed: trimmed.clone(),
                ..Carried::default()
            },
        };
        if answer.finish_reason.as_deref() == Some("length") {
            return Err(failure(BrainError::Truncated));
        }
        let parsed = parse_insights(
            &answer.content,
            &shown,
            req.insights_max,
            self.config.speech_max,
        )
        .map_err(|e| failure(BrainError::Malformed(e.to_string())))?;
        Ok(ReflectReply {
            value: parsed.insights,
            raw: answer.content,
            carried: Carried {
                usage: answer.usage,
                retries: answer.retries,
                fallback: None,
                repairs: parsed.repairs,
                rejections: parsed.rejections,
                trimmed,
            },
        })
    }

    async fn call(&self, req: &BrainRequest) -> Result<BrainReply, BrainFailure> {
        let obs = &req.observation;
        if let Some(reason) = self.refusal(obs.tick) {
            let decision = self.fallback.decide_now(req);
            let raw = serde_json::to_string(&decision).unwrap_or_default();
            let mut reply = BrainReply::plain(decision, raw);
            reply.carried.fallback = Some(reason);
            return Ok(reply);
        }
        let (body, trimmed) = self.fit_decision(req).await?;
        let jitter_key = (u64::from(obs.npc.0) << 32) ^ obs.tick;
        let answer = match self.replicas.chat(&body, jitter_key).await {
            Ok(answer) => answer,
            Err(failure) => {
                self.record_failure(obs.tick);
                return Err(BrainFailure {
                    error: BrainError::Unavailable(failure.error.to_string()),
                    raw: None,
                    carried: Carried {
                        retries: failure.retries,
                        trimmed,
                        ..Carried::default()
                    },
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
            carried: Carried {
                usage: answer.usage,
                retries: answer.retries,
                trimmed: trimmed.clone(),
                ..Carried::default()
            },
        };
        if answer.finish_reason.as_deref() == Some("length") {
            return Err(failure(BrainError::Truncated));
        }
        let parsed = parse_decision(&answer.content, req.grid, obs, self.config.speech_max)
            .map_err(|e| failure(BrainError::Malformed(e.to_string())))?;
        Ok(BrainReply {
            value: parsed.decision,
            raw: answer.content,
            carried: Carried {
                usage: answer.usage,
                retries: answer.retries,
                fallback: None,
                repairs: parsed.repairs,
                rejections: parsed.rejections,
                trimmed,
            },
        })
    }
}

impl Brain for LlmBrain {
    fn provider(&self) -> &str {
        "openai"
    }

    fn llm(&self) -> Option<&LlmBrain> {
        Some(self)
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

    fn judge<'a>(
        &'a self,
        request: &'a JudgeRequest,
    ) -> BoxFuture<'a, Result<JudgeReply, BrainFailure>> {
        Box::pin(self.call_judge(request))
    }
}

/// A call no answer came back for (after its retries): the brain is unavailable.
fn unanswered(failure: crate::openai::CallFailure) -> BrainFailure {
    BrainFailure {
        error: BrainError::Unavailable(failure.error.to_string()),
        raw: None,
        carried: Carried {
            retries: failure.retries,
            ..Carried::default()
        },
    }
}

/// The message of a server's error body: `error.message` (OpenAI, llama.cpp) or
/// `message`, else the body as it came.
fn server_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v["error"]["message"]
                .as_str()
                .or(v["message"].as_str())
                .or(v["error"].as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.to_owned())
}
