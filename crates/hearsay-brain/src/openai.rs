//! The OpenAI-compatible HTTP client of one server: one attempt at a time, with a
//! per-attempt timeout, a requests-per-minute token bucket, answers read within their cap,
//! and what is worth retrying (429, 5xx, timeouts, dropped connections) and how long to
//! wait (exponential backoff with jitter, honouring `Retry-After`). The retrying itself —
//! on this server or another replica of it — is [`crate::replicas`]'s one loop.
//!
//! One client reaches OpenAI, Gemini's OpenAI-compatible endpoint, Ollama, vLLM and
//! llama.cpp's server. The key travels only in the `Authorization` header and is scrubbed
//! from every message this module produces.

use std::num::NonZeroU32;
use std::sync::{Arc, Once};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::secret::ApiKey;

/// Longest a `Retry-After` is honoured; longer asks are capped.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

/// How to reach one endpoint and how hard to try.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1` (trailing `/` optional).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when present.
    pub api_key: Option<ApiKey>,
    /// How long one attempt may take; each retry gets the full timeout again.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff; doubles per retry (with ±50 % jitter), capped at `backoff_max`.
    pub backoff_base: Duration,
    /// The cap on one backoff, before jitter (a `Retry-After` may wait longer).
    pub backoff_max: Duration,
    /// Token bucket: at most this many requests per minute, refilled evenly, holding at
    /// most one second's worth (so a tick of many NPCs cannot burst a minute's quota).
    pub requests_per_minute: Option<u32>,
    /// The largest answer body read: a longer one fails the call unread (the server is
    /// not trusted to send what it should).
    pub max_response_bytes: u64,
}

/// The context Ollama gives a model whose parameters set no `num_ctx` (its smallest
/// default across versions).
const OLLAMA_DEFAULT_CONTEXT: u64 = 2048;

/// How much of an error answer is read: only its start is ever shown.
const ERROR_BODY_MAX: u64 = 64 * 1024;

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

/// Token counts reported by the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens the request's messages took (`usage.prompt_tokens`).
    pub prompt_tokens: u64,
    /// Tokens the model generated (`usage.completion_tokens`).
    pub completion_tokens: u64,
    /// Of the prompt tokens, those the server took from its prompt cache
    /// (`usage.prompt_tokens_details.cached_tokens`: OpenAI, llama.cpp).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cached_tokens: u64,
}

/// The header that marks a preflight request (`hearsay check`, and the probe before a
/// run): servers ignore it; it says in their logs what the request was.
pub const PREFLIGHT_HEADER: &str = "x-hearsay-preflight";

/// What a server says about itself, where it says it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerFacts {
    /// Tokens per request (per slot), and where the figure came from.
    pub context: Option<(u32, String)>,
    /// Whether it counts a chat request's tokens (`POST …/chat/completions/input_tokens`).
    pub counts_tokens: bool,
}

/// Why a call failed, after retries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The server answered with an error status.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The HTTP status; 408, 429 and 5xx are retried before it is reported.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// No answer within the timeout.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// Could not connect, or the connection dropped.
    #[error("connection failed: {0}")]
    Connection(String),
    /// The answer was not what an OpenAI-compatible server sends.
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// The answer was longer than `max_response_bytes`; the rest was not read.
    #[error("the answer is longer than {0} bytes (max_response_bytes); it was not read")]
    TooLarge(u64),
}

/// A failed call and how many retries it took to give up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallFailure {
    /// The error of the final attempt (earlier ones were retried).
    pub error: CallError,
    /// Retries after the first attempt (at most `max_retries`).
    pub retries: u32,
}

/// A chat completion answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatAnswer {
    /// `choices[0].message.content`.
    pub content: String,
    /// `choices[0].finish_reason`.
    pub finish_reason: Option<String>,
    /// `usage`, if reported.
    pub usage: Option<Usage>,
    /// Retries it took.
    pub retries: u32,
}

/// An embeddings answer.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddingAnswer {
    /// One vector per input, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// Retries it took.
    pub retries: u32,
}

/// One OpenAI-compatible endpoint.
pub struct Endpoint {
    http: reqwest::Client,
    config: EndpointConfig,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

static CRYPTO: Once = Once::new();

impl Endpoint {
    /// A client for `config`.
    pub fn new(config: EndpointConfig) -> Result<Endpoint, CallError> {
        // reqwest is built without a default TLS provider (keeps the build lean); install
        // ring's once per process.
        CRYPTO.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .pool_max_idle_per_host(64)
            .build()
            .map_err(|e| CallError::Connection(format!("cannot build the HTTP client: {e}")))?;
        let limiter = config
            .requests_per_minute
            .and_then(NonZeroU32::new)
            .map(|rpm| {
                let burst = NonZeroU32::new(rpm.get().div_ceil(60)).unwrap_or(NonZeroU32::MIN);
                Arc::new(RateLimiter::direct(
                    Quota::per_minute(rpm).allow_burst(burst),
                ))
            });
        Ok(Endpoint {
            http,
            config,
            limiter,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{}", self.config.base_url.trim_end_matches('/'), path)
    }

    fn scrub(&self, text: &str) -> String {
        let text: String = text.chars().take(300).collect();
        match &self.config.api_key {
            Some(key) => key.scrub(&text),
            None => text,
        }
    }

    /// One POST of `body` to `path` (after the rate limit): the answer's body, or why it
    /// failed with the `Retry-After` the server asked for. No retries here: the one retry
    /// loop is [`crate::replicas::Replicas`]'s, which also chooses the server.
    pub(crate) async fn attempt(
        &self,
        path: &str,
        body: &Value,
        preflight: bool,
    ) -> Result<String, (CallError, Option<Duration>)> {
        if let Some(limiter) = &self.limiter {
            limiter.until_ready().await;
        }
        let mut request = self.http.post(self.url(path)).json(body);
        if preflight {
            request = request.header(PREFLIGHT_HEADER, "1");
        }
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        match request.send().await {
            Ok(response) => {
                let status = response.status();
                let retry_after = retry_after(response.headers());
                if status.is_success() {
                    self.body(response, self.config.max_response_bytes)
                        .await
                        .map_err(|e| (e, None))
                } else {
                    let text = self.error_body(response).await;
                    Err((
                        CallError::Status {
                            status: status.as_u16(),
                            body: self.scrub(&text),
                        },
                        retry_after,
                    ))
                }
            }
            Err(e) => Err((self.classify(e), None)),
        }
    }

    /// Whether the server answers at all, before a run depends on it: `GET /models`, up
    /// to three tries a little apart (a server still starting). Any HTTP answer will do
    /// (not every OpenAI-compatible server lists models) except 401 and 403, a refused
    /// key; no answer, or one of those, is the error.
    pub async fn reachable(&self) -> Result<(), CallError> {
        let url = self.url("models");
        let timeout = self.config.timeout.min(Duration::from_secs(10));
        let mut last = None;
        for attempt in 0..3u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(250 << attempt)).await;
            }
            let mut request = self.http.get(&url).timeout(timeout);
            if let Some(key) = &self.config.api_key {
                request = request.bearer_auth(key.expose());
            }
            match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    if status == 401 || status == 403 {
                        let body = self.error_body(response).await;
                        return Err(CallError::Status {
                            status,
                            body: self.scrub(&body),
                        });
                    }
                    return Ok(());
                }
                Err(e) => last = Some(self.classify(e)),
            }
        }
        Err(last.unwrap_or(CallError::Connection("no answer".into())))
    }

    /// The body of `response`, read chunk by chunk and refused past `max` bytes (a
    /// declared `Content-Length` past it is refused before anything is read): a server
    /// can neither fill memory nor the tape.
    async fn body(&self, mut response: reqwest::Response, max: u64) -> Result<String, CallError> {
        if response.content_length().is_some_and(|n| n > max) {
            return Err(CallError::TooLarge(max));
        }
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.classify(e))? {
            if body.len() as u64 + chunk.len() as u64 > max {
                return Err(CallError::TooLarge(max));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// The start of an error answer (at most [`ERROR_BODY_MAX`] bytes; the rest is
    /// dropped unread), for the message.
    async fn error_body(&self, mut response: reqwest::Response) -> String {
        let mut body: Vec<u8> = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            let room = (ERROR_BODY_MAX as usize).saturating_sub(body.len());
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if body.len() as u64 >= ERROR_BODY_MAX {
                break;
            }
        }
        String::from_utf8_lossy(&body).into_owned()
    }

    fn classify(&self, e: reqwest::Error) -> CallError {
        if e.is_timeout() {
            CallError::Timeout(self.config.timeout.as_millis() as u64)
        } else {
            // reqwest's message names the URL, never the headers.
            let mut msg = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                source = s.source();
            }
            CallError::Connection(self.scrub(&msg))
        }
    }

    /// A chat completion's body read: the answer, or a protocol failure (after `retries`).
    pub(crate) fn read_chat(&self, text: &str, retries: u32) -> Result<ChatAnswer, CallFailure> {
        let protocol = |msg: String| CallFailure {
            error: CallError::Protocol(msg),
            retries,
        };
        let parsed: ChatResponse = serde_json::from_str(text)
            .map_err(|e| protocol(format!("not a chat completion ({e}): {}", self.scrub(text))))?;
        let choice = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| protocol("no choices in the answer".into()))?;
        Ok(ChatAnswer {
            content: choice.message.content.unwrap_or_default(),
            finish_reason: choice.finish_reason,
            usage: parsed.usage.map(|u| Usage {
                prompt_tokens: u.prompt_tokens.unwrap_or(0),
                completion_tokens: u.completion_tokens.unwrap_or(0),
                cached_tokens: u
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
            }),
            retries,
        })
    }

    /// The server's root: `base_url` without its trailing `/v1` (where llama.cpp's
    /// `/props` and Ollama's `/api/show` live).
    fn root(&self) -> String {
        let base = self.config.base_url.trim_end_matches('/');
        base.strip_suffix("/v1").unwrap_or(base).to_owned()
    }

    /// A GET or POST of `url` once (no retries), its JSON when it answers 200 with JSON.
    async fn ask_once(&self, url: &str, body: Option<&Value>) -> Option<Value> {
        let mut request = match body {
            Some(b) => self.http.post(url).json(b),
            None => self.http.get(url),
        };
        request = request
            .timeout(self.config.timeout.min(Duration::from_secs(10)))
            .header(PREFLIGHT_HEADER, "1");
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let response = request.send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let text = self.body(response, 1024 * 1024).await.ok()?;
        serde_json::from_str(&text).ok()
    }

    /// What the server says about its context and token counting: llama.cpp's `/props`
    /// (`default_generation_settings.n_ctx`, per slot) and token count endpoint,
    /// Ollama's `/api/show` for `model` (`num_ctx` in its parameters, else the model's
    /// `context_length`). Servers that say nothing give empty facts.
    pub async fn facts(&self, model: &str, probe: &Value) -> ServerFacts {
        let root = self.root();
        let mut facts = ServerFacts::default();
        if let Some(props) = self.ask_once(&format!("{root}/props"), None).await
            && let Some(n) = props["default_generation_settings"]["n_ctx"].as_u64()
            && n > 0
        {
            facts.context = Some((n.min(u64::from(u32::MAX)) as u32, "llama.cpp /props".into()));
        } else if let Some(show) = self
            .ask_once(
                &format!("{root}/api/show"),
                Some(&serde_json::json!({ "model": model })),
            )
            .await
        {
            let num_ctx = show["parameters"].as_str().and_then(|p| {
                p.lines()
                    .filter_map(|l| l.trim().strip_prefix("num_ctx"))
                    .find_map(|v| v.trim().parse::<u32>().ok())
            });
            let length = show["model_info"].as_object().and_then(|info| {
                info.iter()
                    .find(|(k, _)| k.ends_with(".context_length"))
                    .and_then(|(_, v)| v.as_u64())
            });
            // Without num_ctx, Ollama runs the model at its server default (2,048 tokens
            // on older servers, more on newer ones) and silently cuts longer prompts:
            // hold to the smallest of those, never to the model's own maximum.
            facts.context = match (num_ctx, length) {
                (Some(n), _) => Some((n, "ollama /api/show num_ctx".into())),
                (None, Some(l)) => Some((
                    l.min(OLLAMA_DEFAULT_CONTEXT) as u32,
                    "ollama /api/show without num_ctx: its smallest default".into(),
                )),
                (None, None) => None,
            };
        }
        facts.counts_tokens = self.count_tokens(probe).await.is_some();
        facts
    }

    /// The tokens of chat request `body` as the server counts them (its tokenizer, its
    /// chat template): llama.cpp's `POST /v1/chat/completions/input_tokens`. `None` when
    /// the server does not count.
    pub async fn count_tokens(&self, body: &Value) -> Option<u64> {
        self.ask_once(&self.url("chat/completions/input_tokens"), Some(body))
            .await?["input_tokens"]
            .as_u64()
    }

    /// An embeddings answer's body read for `inputs` texts: one finite, non-empty vector
    /// per input, in input order, or a protocol failure (after `retries`).
    pub(crate) fn read_embeddings(
        &self,
        text: &str,
        inputs: usize,
        retries: u32,
    ) -> Result<EmbeddingAnswer, CallFailure> {
        let protocol = |msg: String| CallFailure {
            error: CallError::Protocol(msg),
            retries,
        };
        let parsed: EmbeddingResponse = serde_json::from_str(text)
            .map_err(|e| protocol(format!("not an embeddings answer ({e})")))?;
        if parsed.data.len() != inputs {
            return Err(protocol(format!(
                "{} vectors for {inputs} inputs",
                parsed.data.len(),
            )));
        }
        let mut data = parsed.data;
        data.sort_by_key(|d| d.index);
        if data.iter().enumerate().any(|(i, d)| d.index != i) {
            return Err(protocol("vector indices do not match the inputs".into()));
        }
        if data
            .iter()
            .any(|d| d.embedding.is_empty() || d.embedding.iter().any(|x| !x.is_finite()))
        {
            return Err(protocol("an empty or non-finite vector".into()));
        }
        Ok(EmbeddingAnswer {
            vectors: data.into_iter().map(|d| d.embedding).collect(),
            retries,
        })
    }
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<RawPromptDetails>,
}

#[derive(Deserialize)]
struct RawPromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingDatum>,
}

#[derive(Deserialize)]
struct EmbeddingDatum {
    embedding: Vec<f32>,
    #[serde(default)]
    index: usize,
}

pub(crate) fn retryable(e: &CallError) -> bool {
    match e {
        CallError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
        CallError::Timeout(_) | CallError::Connection(_) => true,
        CallError::Protocol(_) | CallError::TooLarge(_) => false,
    }
}

/// `Retry-After` in seconds (integer or decimal); HTTP dates are not honoured.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let secs: f64 = value.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(RETRY_AFTER_MAX))
}

/// `base · 2^retry`, capped, then scaled by a jitter factor in [0.5, 1.5) drawn from
/// (`key`, `retry`): deterministic, yet different callers do not retry in lockstep.
pub(crate) fn backoff(config: &EndpointConfig, retry: u32, key: u64) -> Duration {
    let exp = config.backoff_base.saturating_mul(1u32 << retry.min(16));
    let capped = exp.min(config.backoff_max);
    let mut hasher = blake3::Hasher::new_derive_key("hearsay retry jitter v1");
    hasher.update(&key.to_le_bytes());
    hasher.update(&retry.to_le_bytes());
    let bytes = hasher.finalize();
    let unit = f64::from(u32::from_le_bytes([
        bytes.as_bytes()[0],
        bytes.as_bytes()[1],
        bytes.as_bytes()[2],
        bytes.as_bytes()[3],
    ])) / f64::from(u32::MAX);
    capped.mul_f64(0.5 + unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EndpointConfig {
        EndpointConfig {
            base_url: "http://127.0.0.1:1/v1/".into(),
            api_key: None,
            timeout: Duration::from_millis(100),
            max_retries: 3,
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            requests_per_minute: None,
            max_response_bytes: 1024,
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let c = config();
        for retry in 0..8 {
            let nominal = (100u64 << retry).min(1000) as f64;
            let got = backoff(&c, retry, 7).as_secs_f64() * 1000.0;
            assert!(
                got >= nominal * 0.5 && got < nominal * 1.5,
                "retry {retry}: {got} ms"
            );
        }
        assert_ne!(
            backoff(&c, 2, 1),
            backoff(&c, 2, 2),
            "different callers, different jitter"
        );
        assert_eq!(backoff(&c, 2, 1), backoff(&c, 2, 1));
    }

    #[test]
    fn urls_join_without_double_slashes() {
        let e = Endpoint::new(config()).expect("client");
        assert_eq!(
            e.url("chat/completions"),
            "http://127.0.0.1:1/v1/chat/completions"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_past_the_cap_fail_unread() {
        let app = axum::Router::new()
            .route(
                "/v1/small",
                axum::routing::post(|| async { "x".repeat(1000) }),
            )
            .route(
                "/v1/big",
                axum::routing::post(|| async { "x".repeat(10_000_000) }),
            )
            .route(
                "/v1/error",
                axum::routing::post(|| async {
                    (axum::http::StatusCode::BAD_REQUEST, "e".repeat(10_000_000))
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let e = Endpoint::new(EndpointConfig {
            base_url: url,
            max_retries: 3,
            timeout: Duration::from_secs(10),
            ..config()
        })
        .expect("client");
        let body = serde_json::json!({});
        assert_eq!(
            e.attempt("small", &body, false).await.map(|t| t.len()),
            Ok(1000)
        );
        let big = e.attempt("big", &body, false).await.expect_err("too large");
        assert_eq!(big.0, CallError::TooLarge(1024));
        assert!(!retryable(&big.0), "not retried");
        let error = e.attempt("error", &body, false).await.expect_err("400");
        match error.0 {
            CallError::Status { status, body } => {
                assert_eq!(status, 400);
                assert!(body.len() <= 300, "only the start is shown");
            }
            other => panic!("{other:?}"),
        }
    }

    /// llama.cpp's `/props` and token count, and Ollama's `/api/show` (the shapes their
    /// documentation and sources give), as `facts` reads them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn servers_say_their_context_and_whether_they_count() {
        async fn serve(app: axum::Router) -> String {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
            tokio::spawn(async move { axum::serve(listener, app).await });
            url
        }
        let endpoint = |url: String| {
            Endpoint::new(EndpointConfig {
                base_url: url,
                timeout: Duration::from_secs(5),
                max_response_bytes: 1 << 20,
                ..config()
            })
            .expect("client")
        };
        let llama = serve(
            axum::Router::new()
                .route(
                    "/props",
                    axum::routing::get(|| async {
                        axum::Json(serde_json::json!({"default_generation_settings": {"n_ctx": 512}, "total_slots": 4}))
                    }),
                )
                .route(
                    "/v1/chat/completions/input_tokens",
                    axum::routing::post(|| async {
                        axum::Json(serde_json::json!({"input_tokens": 19, "object": "response.input_tokens"}))
                    }),
                ),
        )
        .await;
        let body = serde_json::json!({"messages": []});
        let facts = endpoint(llama).facts("m", &body).await;
        assert_eq!(facts.context, Some((512, "llama.cpp /props".into())));
        assert!(facts.counts_tokens);
        let ollama = |parameters: &'static str| {
            axum::Router::new().route(
                "/api/show",
                axum::routing::post(move || async move {
                    axum::Json(serde_json::json!({
                        "parameters": parameters,
                        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
                    }))
                }),
            )
        };
        let with = endpoint(
            serve(ollama(
                "num_ctx                        8192\nstop \"<|eot|>\"",
            ))
            .await,
        );
        let facts = with.facts("m", &body).await;
        assert_eq!(facts.context.map(|c| c.0), Some(8192));
        assert!(!facts.counts_tokens);
        let without = endpoint(serve(ollama("stop \"<|eot|>\"")).await);
        assert_eq!(
            without.facts("m", &body).await.context.map(|c| c.0),
            Some(2048)
        );
        let nothing = endpoint(serve(axum::Router::new()).await);
        assert_eq!(nothing.facts("m", &body).await, ServerFacts::default());
    }

    #[test]
    fn what_is_retried() {
        assert!(retryable(&CallError::Status {
            status: 429,
            body: String::new()
        }));
        assert!(retryable(&CallError::Status {
            status: 503,
            body: String::new()
        }));
        assert!(!retryable(&CallError::Status {
            status: 401,
            body: String::new()
        }));
        assert!(retryable(&CallError::Timeout(5)));
        assert!(!retryable(&CallError::Protocol(String::new())));
    }
}
