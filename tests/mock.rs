//! A scripted OpenAI-compatible server (axum) on 127.0.0.1 for the end-to-end suites and
//! the benchmarks: `/v1/chat/completions` answers what a test's script says for each
//! (model, NPC, tick, attempt); `/v1/embeddings` answers deterministic vectors. It counts
//! requests in flight and logs every call, so tests can check what hearsay did with
//! what it was served.
//!
//! Two provider behaviours can be switched on, each as the real thing documents it:
//! - **strict** (`MockOptions::strict`): a hosted strict mode (OpenAI, Azure). A
//!   `json_schema` response format with `"strict": true` whose schema uses a keyword
//!   outside the supported subset, leaves a property out of `required` or an object
//!   open, is refused with HTTP 400 and OpenAI's error shape
//!   (`invalid_request_error`, `param: response_format`, the keyword named).
//! - **small context** (`MockOptions::context_tokens`): llama.cpp with a small slot. It
//!   counts a request's tokens with a stand-in tokenizer ([`mock_tokens`]), says its
//!   context in `GET /props` and counts in `POST /v1/chat/completions/input_tokens` like
//!   llama.cpp, refuses a prompt that does not fit with llama.cpp's 400
//!   `exceed_context_size_error`, and reports cached prompt tokens the way it does
//!   (`usage.prompt_tokens_details.cached_tokens`) for a system message it has seen.
//!
//! Preflight requests (hearsay's probe, marked `x-hearsay-preflight`) pass the same
//! checks but are answered with a valid decision and logged apart (`preflight_log`),
//! unless `MockOptions::script_preflight` hands them to the script too.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One chat request as the script sees it.
#[derive(Clone, Debug)]
pub struct ChatCall {
    /// `model` of the request.
    pub model: String,
    /// The NPC, read from the prompt ("You are NAME, …").
    pub npc: String,
    /// The tick, read from the prompt ("Turn T.").
    pub tick: u64,
    /// 0 for the first request for this (model, NPC, tick, kind), then 1, 2, … for
    /// retries.
    pub attempt: u32,
    /// A reflection ("Your recent memories …"), not a decision.
    pub reflect: bool,
    /// For a reflection: the memory numbers shown (`"[12] (turn …) …"`), in order.
    pub memory_ids: Vec<u64>,
    /// The whole request body.
    pub body: Value,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// What the script answers.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A normal completion with `content`.
    Answer {
        /// `choices[0].message.content`.
        content: String,
        /// `choices[0].finish_reason`.
        finish_reason: String,
        /// Wait this long first.
        delay_ms: u64,
    },
    /// An error status (with `Retry-After` seconds when set).
    Status {
        /// The status.
        code: u16,
        /// `Retry-After` header.
        retry_after: Option<u64>,
    },
    /// Start a 200 answer and drop the connection mid-body.
    Drop,
    /// A 200 answer of this many bytes, streamed with no `Content-Length` (a server that
    /// never stops talking).
    Huge(usize),
    /// A 200 answer that never ends: one byte every this many milliseconds.
    Trickle(u64),
}

impl Reply {
    /// A prompt answer with `content`.
    pub fn answer(content: impl Into<String>) -> Reply {
        Reply::Answer {
            content: content.into(),
            finish_reason: "stop".into(),
            delay_ms: 0,
        }
    }

    /// An answer with `content` after `delay_ms`.
    pub fn slow(content: impl Into<String>, delay_ms: u64) -> Reply {
        Reply::Answer {
            content: content.into(),
            finish_reason: "stop".into(),
            delay_ms,
        }
    }
}

/// One logged chat call.
#[derive(Clone, Debug)]
pub struct Logged {
    /// The request.
    pub call: ChatCall,
    /// The reply.
    pub reply: Reply,
    /// When it arrived.
    pub received: std::time::Instant,
}

type ChatScript = dyn Fn(&ChatCall) -> Reply + Send + Sync;

struct MockState {
    script: Box<ChatScript>,
    strict: bool,
    context_tokens: Option<usize>,
    script_preflight: bool,
    preflight_log: Mutex<Vec<Logged>>,
    system_seen: Mutex<std::collections::BTreeSet<String>>,
    embed_dims: Arc<AtomicUsize>,
    embed_delay_ms: u64,
    embed_down: Arc<std::sync::atomic::AtomicBool>,
    log: Mutex<Vec<Logged>>,
    attempts: Mutex<BTreeMap<(String, String, u64, bool), u32>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    embed_requests: AtomicUsize,
    embed_texts: AtomicUsize,
    /// Every text embedded, in the order received.
    embed_log: Mutex<Vec<String>>,
}

/// A running mock server; stops when dropped.
pub struct MockServer {
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    state: Arc<MockState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Settings of a mock server.
pub struct MockOptions {
    /// Refuse schemas a hosted strict mode refuses (see the module doc).
    pub strict: bool,
    /// Behave like llama.cpp with this many tokens per slot (see the module doc).
    pub context_tokens: Option<usize>,
    /// Let the script answer preflight requests too (tick 0, attempts counted apart).
    pub script_preflight: bool,
    /// Dimensions of embedding vectors.
    pub embed_dims: usize,
    /// Latency of each embeddings request.
    pub embed_delay_ms: u64,
    /// Port (0: any free port).
    pub port: u16,
    /// While set, `/v1/embeddings` answers 503 (an embedder that is down).
    pub embed_down: Arc<std::sync::atomic::AtomicBool>,
    /// When given, the dimensions of embedding vectors from now on (overrides
    /// `embed_dims`): a server that starts serving another model under the same name.
    pub embed_dims_now: Option<Arc<AtomicUsize>>,
}

impl Default for MockOptions {
    fn default() -> Self {
        Self {
            strict: false,
            context_tokens: None,
            script_preflight: false,
            embed_dims: 384,
            embed_delay_ms: 0,
            port: 0,
            embed_down: Arc::default(),
            embed_dims_now: None,
        }
    }
}

impl MockServer {
    /// Starts a server that answers chat calls with `script`.
    pub fn start(script: impl Fn(&ChatCall) -> Reply + Send + Sync + 'static) -> MockServer {
        Self::start_with(MockOptions::default(), script)
    }

    /// Starts a server with `options`.
    pub fn start_with(
        options: MockOptions,
        script: impl Fn(&ChatCall) -> Reply + Send + Sync + 'static,
    ) -> MockServer {
        let state = Arc::new(MockState {
            script: Box::new(script),
            strict: options.strict,
            context_tokens: options.context_tokens,
            script_preflight: options.script_preflight,
            preflight_log: Mutex::new(Vec::new()),
            system_seen: Mutex::new(std::collections::BTreeSet::new()),
            embed_dims: options
                .embed_dims_now
                .clone()
                .unwrap_or_else(|| Arc::new(AtomicUsize::new(options.embed_dims))),
            embed_delay_ms: options.embed_delay_ms,
            embed_down: options.embed_down.clone(),
            log: Mutex::new(Vec::new()),
            attempts: Mutex::new(BTreeMap::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            embed_requests: AtomicUsize::new(0),
            embed_texts: AtomicUsize::new(0),
            embed_log: Mutex::new(Vec::new()),
        });
        let mut app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/embeddings", post(embeddings));
        if options.context_tokens.is_some() {
            app = app
                .route("/props", axum::routing::get(props))
                .route("/v1/chat/completions/input_tokens", post(input_tokens));
        }
        let app = app.with_state(state.clone());
        let (addr, stop, thread) = serve(app, options.port);
        MockServer {
            url: format!("http://{addr}/v1"),
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Every chat call so far.
    pub fn log(&self) -> Vec<Logged> {
        self.state.log.lock().expect("log").clone()
    }

    /// Every preflight request so far (hearsay's probe before a run).
    pub fn preflight_log(&self) -> Vec<Logged> {
        self.state.preflight_log.lock().expect("log").clone()
    }

    /// Every decision request so far (reflections left out), in arrival order.
    pub fn decisions(&self) -> Vec<Logged> {
        self.log().into_iter().filter(|l| !l.call.reflect).collect()
    }

    /// The most chat requests that were in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every text embedded so far, in the order received.
    pub fn embedded_texts(&self) -> Vec<String> {
        self.state
            .embed_log
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default()
    }

    /// (embedding requests, texts embedded).
    pub fn embedding_counts(&self) -> (usize, usize) {
        (
            self.state.embed_requests.load(Ordering::SeqCst),
            self.state.embed_texts.load(Ordering::SeqCst),
        )
    }
}

impl MockServer {
    /// Stops the server as if it died: its listener is shut and its connections closed
    /// once their requests are answered. What it logged stays readable.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serves `app` on 127.0.0.1:`port` (0: any free port) from a thread of its own: the
/// address, the switch that stops it, and the thread to join.
fn serve(
    app: Router,
    port: u16,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("server runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
                .await
                .expect("bind 127.0.0.1");
            let _ = ready_tx.send(listener.local_addr().expect("local addr"));
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
    });
    let addr = ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the server starts");
    (addr, stop, thread)
}

/// Decrements the in-flight count when a request ends, however it ends.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The NPC name and tick a hearsay prompt is about, whether it asks for a reflection, and
/// the memory numbers a reflection prompt shows.
pub fn prompt_subject(body: &Value) -> (String, u64, bool, Vec<u64>) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let text = |role: &str| {
        messages
            .iter()
            .find(|m| m["role"] == role)
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    let system = text("system");
    let npc = system
        .strip_prefix("You are ")
        .and_then(|rest| rest.split(", a person").next())
        .unwrap_or("")
        .to_owned();
    let user = text("user");
    let tick = user
        .strip_prefix("Turn ")
        .and_then(|rest| rest.split('.').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let reflect = user.contains("Your recent memories");
    let memory_ids = if reflect {
        user.lines()
            .filter_map(|l| l.strip_prefix('[')?.split(']').next()?.parse().ok())
            .collect()
    } else {
        Vec::new()
    };
    (npc, tick, reflect, memory_ids)
}

/// The mock's stand-in tokenizer: one token per 3 bytes of each message (rounded up)
/// plus 8 for its role markers.
pub fn mock_tokens(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["content"].as_str().unwrap_or("").len().div_ceil(3) + 8)
        .sum()
}

/// The keywords a hosted strict mode supports (OpenAI's structured outputs as
/// documented; what is not here is refused).
const STRICT_SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "description",
    "anyOf",
    "$ref",
    "$defs",
    "const",
];

/// The first thing a hosted strict mode refuses in `schema`: (where, what).
fn strict_refusal(schema: &Value, at: &mut Vec<String>) -> Option<(String, String)> {
    let map = schema.as_object()?;
    let place = |at: &Vec<String>| {
        format!(
            "({})",
            at.iter()
                .map(|p| format!("'{p}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    for key in map.keys() {
        if !STRICT_SUPPORTED.contains(&key.as_str()) {
            return Some((place(at), format!("'{key}' is not permitted")));
        }
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(missing) = props.keys().find(|k| !required.contains(&k.as_str())) {
            return Some((
                place(at),
                format!(
                    "'required' is required to be supplied and to be an array including every key in properties. Missing '{missing}'"
                ),
            ));
        }
        if map.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Some((
                place(at),
                "'additionalProperties' is required to be supplied and to be false".into(),
            ));
        }
        for (name, sub) in props {
            at.push("properties".into());
            at.push(name.clone());
            if let Some(found) = strict_refusal(sub, at) {
                return Some(found);
            }
            at.truncate(at.len() - 2);
        }
    }
    if let Some(items) = map.get("items") {
        at.push("items".into());
        if let Some(found) = strict_refusal(items, at) {
            return Some(found);
        }
        at.pop();
    }
    None
}

fn error_response(status: StatusCode, error: Value) -> Response {
    (status, axum::Json(json!({ "error": error }))).into_response()
}

/// What a provider refuses before the model sees the request: a schema its strict mode
/// does not take, a prompt its context does not hold.
fn provider_refusal(state: &MockState, body: &Value) -> Option<Response> {
    let format = &body["response_format"];
    if state.strict && format["type"] == "json_schema" && format["json_schema"]["strict"] == true {
        let name = format["json_schema"]["name"].as_str().unwrap_or("");
        if let Some((at, what)) = strict_refusal(&format["json_schema"]["schema"], &mut Vec::new())
        {
            return Some(error_response(
                StatusCode::BAD_REQUEST,
                json!({
                    "message": format!("Invalid schema for response_format '{name}': In context={at}, {what}."),
                    "type": "invalid_request_error",
                    "param": "response_format",
                    "code": null,
                }),
            ));
        }
    }
    if let Some(n_ctx) = state.context_tokens {
        let n = mock_tokens(body);
        if n >= n_ctx {
            return Some(error_response(
                StatusCode::BAD_REQUEST,
                json!({
                    "code": 400,
                    "message": format!("request ({n} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it"),
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": n,
                    "n_ctx": n_ctx,
                }),
            ));
        }
    }
    None
}

async fn props(State(state): State<Arc<MockState>>) -> Response {
    axum::Json(json!({
        "default_generation_settings": { "n_ctx": state.context_tokens.unwrap_or(0) },
        "total_slots": 4,
    }))
    .into_response()
}

async fn input_tokens(body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    axum::Json(json!({ "input_tokens": mock_tokens(&body), "object": "response.input_tokens" }))
        .into_response()
}

async fn chat(State(state): State<Arc<MockState>>, headers: HeaderMap, body: String) -> Response {
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let _guard = InFlight(&state.in_flight);
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let (npc, tick, reflect, memory_ids) = prompt_subject(&body);
    let model = body["model"].as_str().unwrap_or("").to_owned();
    let preflight = headers.contains_key("x-hearsay-preflight");
    if let Some(refused) = provider_refusal(&state, &body) {
        return refused;
    }
    let system = body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let cached = state.context_tokens.map_or(0, |_| {
        let seen = !state
            .system_seen
            .lock()
            .expect("seen")
            .insert(system.clone());
        if seen {
            system.len().div_ceil(3) + 8
        } else {
            0
        }
    });
    if preflight && !state.script_preflight {
        let call = ChatCall {
            model: model.clone(),
            npc,
            tick,
            attempt: 0,
            reflect,
            memory_ids,
            authorization: None,
            body: body.clone(),
        };
        let reply = Reply::answer(r#"{"action": "stay", "speech": "", "x": 0, "y": 0}"#);
        state.preflight_log.lock().expect("log").push(Logged {
            call,
            reply,
            received: std::time::Instant::now(),
        });
        return answer_json(
            &model,
            r#"{"action": "stay", "speech": "", "x": 0, "y": 0}"#,
            "stop",
            &body,
            cached,
            state.context_tokens.is_some(),
        );
    }
    let attempt = {
        let mut attempts = state.attempts.lock().expect("attempts");
        let n = attempts
            .entry((model.clone(), npc.clone(), tick, reflect))
            .or_insert(0);
        *n += 1;
        *n - 1
    };
    let call = ChatCall {
        model,
        npc,
        tick,
        attempt,
        reflect,
        memory_ids,
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body,
    };
    let reply = (state.script)(&call);
    state.log.lock().expect("log").push(Logged {
        call: call.clone(),
        reply: reply.clone(),
        received: std::time::Instant::now(),
    });
    match reply {
        Reply::Answer {
            content,
            finish_reason,
            delay_ms,
        } => {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            answer_json(
                &call.model,
                &content,
                &finish_reason,
                &call.body,
                cached,
                state.context_tokens.is_some(),
            )
        }
        Reply::Status { code, retry_after } => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            // Like some real servers, echo the credentials back in the error: hearsay
            // must scrub them from anything it writes.
            let echoed = call.authorization.clone().unwrap_or_default();
            let message = format!("mock status {code}; you sent {echoed}");
            let mut response = (
                status,
                json!({ "error": { "message": message } }).to_string(),
            )
                .into_response();
            if let Some(secs) = retry_after
                && let Ok(value) = secs.to_string().parse()
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Reply::Drop => {
            let stream = futures_util::stream::iter([
                Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"{\"choices\": [")),
                Err(std::io::Error::other("connection dropped by the mock")),
            ]);
            Response::new(Body::from_stream(stream))
        }
        Reply::Trickle(every_ms) => {
            let stream = futures_util::stream::unfold((), move |()| async move {
                tokio::time::sleep(Duration::from_millis(every_ms)).await;
                Some((
                    Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b" ")),
                    (),
                ))
            });
            Response::new(Body::from_stream(stream))
        }
        Reply::Huge(bytes) => {
            let chunk = axum::body::Bytes::from(vec![b'x'; 64 * 1024]);
            let n = bytes.div_ceil(chunk.len());
            let stream = futures_util::stream::iter(
                std::iter::once(Ok::<_, std::io::Error>(axum::body::Bytes::from_static(
                    b"{\"choices\": [{\"message\": {\"content\": \"",
                )))
                .chain((0..n).map(move |_| Ok(chunk.clone()))),
            );
            Response::new(Body::from_stream(stream))
        }
    }
}

/// A chat completion answering `content`, with usage: the stand-in tokenizer's count and
/// cached tokens when the mock plays llama.cpp, else a quarter of the prompt's bytes.
fn answer_json(
    model: &str,
    content: &str,
    finish_reason: &str,
    body: &Value,
    cached: usize,
    llama: bool,
) -> Response {
    let prompt_tokens = if llama {
        mock_tokens(body)
    } else {
        body["messages"].to_string().len() / 4
    };
    let mut usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": content.len() / 4 + 1,
        "total_tokens": prompt_tokens + content.len() / 4 + 1,
    });
    if llama {
        usage["prompt_tokens_details"] = json!({ "cached_tokens": cached });
    }
    axum::Json(json!({
        "id": "mock",
        "object": "chat.completion",
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": content },
            "finish_reason": finish_reason,
        }],
        "usage": usage,
    }))
    .into_response()
}

/// A deterministic unit vector for `text`, `dims` wide.
pub fn mock_vector(text: &str, dims: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; dims];
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        v[(h % dims as u64) as usize] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    } else {
        v[0] = 1.0;
    }
    v
}

async fn embeddings(State(state): State<Arc<MockState>>, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let inputs: Vec<String> = match &body["input"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().unwrap_or("").to_owned())
            .collect(),
        _ => Vec::new(),
    };
    state.embed_requests.fetch_add(1, Ordering::SeqCst);
    if state.embed_down.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "embedder down").into_response();
    }
    state.embed_texts.fetch_add(inputs.len(), Ordering::SeqCst);
    if let Ok(mut log) = state.embed_log.lock() {
        log.extend(inputs.iter().cloned());
    }
    tokio::time::sleep(Duration::from_millis(state.embed_delay_ms)).await;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({ "object": "embedding", "index": i, "embedding": mock_vector(t, state.embed_dims.load(Ordering::SeqCst)) }))
        .collect();
    axum::Json(json!({
        "object": "list",
        "model": body["model"],
        "data": data,
        "usage": { "prompt_tokens": inputs.len(), "total_tokens": inputs.len() },
    }))
    .into_response()
}

/// One request a [`Recorder`] received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target as sent: a path, or a whole URL when it came as a proxy request.
    pub target: String,
    /// The `Host` header.
    pub host: Option<String>,
    /// The `Authorization` header.
    pub authorization: Option<String>,
}

/// A server on 127.0.0.1 that records every request it gets — to any path, direct or as
/// an HTTP proxy (`HTTP_PROXY=http://127.0.0.1:PORT`) — and answers each with an empty
/// 200: the witness that proves where hearsay sent what.
pub struct Recorder {
    /// `127.0.0.1:PORT`.
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<Recorded>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    /// Starts one on a free port.
    pub fn start() -> Recorder {
        let log: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let seen = log.clone();
        let app = Router::new().fallback(move |request: axum::extract::Request| {
            let seen = seen.clone();
            async move {
                let header = |name: header::HeaderName| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                let record = Recorded {
                    method: request.method().to_string(),
                    target: request.uri().to_string(),
                    host: header(header::HOST),
                    authorization: header(header::AUTHORIZATION),
                };
                if let Ok(mut log) = seen.lock() {
                    log.push(record);
                }
                axum::Json(json!({ "object": "list", "data": [] }))
            }
        });
        let (addr, stop, thread) = serve(app, 0);
        Recorder {
            addr,
            log,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Every request so far.
    pub fn log(&self) -> Vec<Recorded> {
        self.log.lock().expect("log").clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
