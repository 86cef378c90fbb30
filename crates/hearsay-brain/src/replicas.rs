//! Replicas: one model served by several OpenAI-compatible servers (`base_url` as a
//! list), and the one retry loop every model call goes through.
//!
//! Each attempt goes to the healthy replica with the fewest requests in flight (ties by
//! list order, so a one-server list is the plain single server). Each replica has its own
//! breaker: `breaker_failures` consecutive failed attempts (no answer, a timeout, 408,
//! 429, 5xx) open it for [`REPLICA_COOLDOWN`]; then one trial request is let through, and
//! its answer closes the breaker or opens it again. A failed attempt is tried again at
//! once on another healthy replica that has not failed this call; when none is left, the
//! call waits its backoff (jittered, exponential, at least the server's `Retry-After`) and
//! starts over on the best replica. `max_retries` bounds every attempt after the first,
//! whichever replica it goes to.
//!
//! When every replica's breaker is open, they are tried anyway (fewest in flight first),
//! so the call fails as a single server's would and the brain's own breaker and the
//! heuristic fallback take over, as they do for one server.
//!
//! Which replica answered is never part of a run: it is not on the tape, and a
//! deterministic model answers the same wherever it runs. Only the per-replica figures
//! ([`ReplicaStats`], in `summary.json`) say where calls went.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::openai::{
    CallError, CallFailure, ChatAnswer, EmbeddingAnswer, Endpoint, ServerFacts, backoff, retryable,
};

/// The most replicas one `base_url` list may name.
pub const REPLICAS_MAX: usize = 64;

/// How long an open replica breaker keeps a replica out before it gets a trial request.
/// Wall-clock, not ticks: the embedder has no tick, and a replica is judged by what it
/// does, however fast ticks go. Ten seconds is a few of a slow model's ticks; a dead
/// replica costs one fast failure (and an immediate retry elsewhere) per cool-down.
pub const REPLICA_COOLDOWN: Duration = Duration::from_secs(10);

/// Consecutive failed attempts that open an embedder replica's breaker (brains use their
/// `breaker_failures`).
pub const EMBEDDER_BREAKER_FAILURES: u32 = 5;

/// One replica's calls, as `summary.json` shows them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaStats {
    /// Its `base_url` (the summary shows it with any password redacted).
    pub url: String,
    /// Attempts sent to it: first tries and retries, preflight probes left out.
    pub calls: u64,
    /// Of those, the ones that failed (any reason).
    pub failures: u64,
    /// Of the calls, those that were retries of a call (here or elsewhere first).
    pub retries: u64,
    /// How many times its breaker opened.
    pub breaker_opened: u64,
    /// Mean time of an attempt, answer included, ms.
    pub latency_ms_mean: f64,
    /// 95th percentile of the attempts' time, ms (to within 9 %: a log histogram).
    pub latency_ms_p95: f64,
    /// The longest attempt, ms.
    pub latency_ms_max: f64,
}

/// Buckets of the latency histogram: eight per doubling, up to 2^28 ms.
const BUCKETS: usize = 8 * 28;

/// 2^(k/8): the histogram's bucket edges (plus 1 ms), without the platform's `powf`.
fn edge(k: usize) -> f64 {
    const EIGHTHS: [f64; 8] = [
        1.0,
        1.090_507_732_665_257_7,
        1.189_207_115_002_721,
        1.296_839_554_651_009_6,
        std::f64::consts::SQRT_2,
        1.542_210_825_407_940_7,
        1.681_792_830_507_429,
        1.834_008_086_409_342_4,
    ];
    let whole = u32::try_from(k / 8).unwrap_or(31).min(31);
    f64::from(1u32 << whole) * EIGHTHS[k % 8]
}

/// The wall clock, for a replica breaker's cool-down and an attempt's time. Both are
/// wall-clock by nature, like a request's timeout, and neither reaches hashed output:
/// which replica answers is on no tape, and the figures are `summary.json`'s.
#[allow(
    clippy::disallowed_methods,
    reason = "a breaker's cool-down and an attempt's time are wall-clock; neither reaches hashed output"
)]
fn clock() -> Instant {
    Instant::now()
}

/// Attempt times in a fixed log histogram (bounded memory, whatever the run's length).
#[derive(Clone, Debug)]
struct Latencies {
    count: u64,
    sum_ms: f64,
    max_ms: f64,
    buckets: [u64; BUCKETS],
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            count: 0,
            sum_ms: 0.0,
            max_ms: 0.0,
            buckets: [0; BUCKETS],
        }
    }
}

impl Latencies {
    fn bucket(ms: f64) -> usize {
        (((ms.max(0.0) + 1.0).log2() * 8.0) as usize).min(BUCKETS - 1)
    }

    fn add(&mut self, ms: f64) {
        self.count += 1;
        self.sum_ms += ms;
        self.max_ms = self.max_ms.max(ms);
        self.buckets[Self::bucket(ms)] += 1;
    }

    fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ms / self.count as f64
        }
    }

    /// The upper edge of the bucket holding the `q` quantile (nearest rank), never past
    /// the longest time seen.
    fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return (edge(i + 1) - 1.0).min(self.max_ms);
            }
        }
        self.max_ms
    }
}

/// A replica's breaker and figures.
#[derive(Debug, Default)]
struct ReplicaState {
    in_flight: usize,
    consecutive_failures: u32,
    open_until: Option<Instant>,
    /// An open breaker's trial request is in flight: no other goes until it is back.
    trial: bool,
    calls: u64,
    failures: u64,
    retries: u64,
    breaker_opened: u64,
    latencies: Latencies,
}

impl ReplicaState {
    /// Whether a request may go to it now (closed, or open with its cool-down over and no
    /// trial out), and whether that request would be the trial.
    fn admits(&self, now: Instant) -> Option<bool> {
        match self.open_until {
            None => Some(false),
            Some(until) if now >= until && !self.trial => Some(true),
            Some(_) => None,
        }
    }
}

/// The servers of one model, each with its breaker, and the retry loop.
#[derive(Debug)]
pub struct Replicas {
    endpoints: Vec<Endpoint>,
    state: Mutex<Vec<ReplicaState>>,
    breaker_failures: u32,
    cooldown: Duration,
}

/// A replica's request in flight: given back when it ends, however it ends (a dropped
/// future too).
struct Lease<'a> {
    pool: &'a Replicas,
    index: usize,
    trial: bool,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        let s = &mut state[self.index];
        s.in_flight = s.in_flight.saturating_sub(1);
        if self.trial {
            s.trial = false;
        }
    }
}

impl Replicas {
    /// A pool of `endpoints` (at least one; they differ only in `base_url`), whose
    /// breakers open after `breaker_failures` consecutive failed attempts.
    pub fn new(endpoints: Vec<Endpoint>, breaker_failures: u32) -> Replicas {
        Self::with_cooldown(endpoints, breaker_failures, REPLICA_COOLDOWN)
    }

    /// The same with another cool-down (tests).
    pub fn with_cooldown(
        endpoints: Vec<Endpoint>,
        breaker_failures: u32,
        cooldown: Duration,
    ) -> Replicas {
        let state = endpoints.iter().map(|_| ReplicaState::default()).collect();
        Replicas {
            endpoints,
            state: Mutex::new(state),
            breaker_failures: breaker_failures.max(1),
            cooldown,
        }
    }

    /// A pool of one server.
    pub fn single(endpoint: Endpoint) -> Replicas {
        Self::new(vec![endpoint], u32::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ReplicaState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many replicas.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Never: a pool has at least one replica.
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// Replica `index`'s server.
    pub fn endpoint(&self, index: usize) -> Option<&Endpoint> {
        self.endpoints.get(index)
    }

    /// Every replica's server, in list order.
    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// Every replica's figures so far, in list order.
    pub fn stats(&self) -> Vec<ReplicaStats> {
        let state = self.lock();
        self.endpoints
            .iter()
            .zip(state.iter())
            .map(|(e, s)| ReplicaStats {
                url: e.config().base_url.clone(),
                calls: s.calls,
                failures: s.failures,
                retries: s.retries,
                breaker_opened: s.breaker_opened,
                latency_ms_mean: s.latencies.mean(),
                latency_ms_p95: s.latencies.quantile(0.95),
                latency_ms_max: s.latencies.max_ms,
            })
            .collect()
    }

    /// The replica the next attempt goes to, leased: the healthy one with the fewest in
    /// flight among those not in `tried` (ties by list order); when every breaker is
    /// open, the one with the fewest in flight among those not tried. `None` when every
    /// replica not tried is open while another (tried) is healthy: back off, then start
    /// over.
    fn lease(&self, tried: &[usize], now: Instant) -> Option<Lease<'_>> {
        let mut state = self.lock();
        let untried = || (0..state.len()).filter(|i| !tried.contains(i));
        let healthy = untried()
            .filter_map(|i| state[i].admits(now).map(|trial| (i, trial)))
            .min_by_key(|(i, _)| (state[*i].in_flight, *i));
        let (index, trial) = match healthy {
            Some(pick) => pick,
            None if state.iter().all(|s| s.admits(now).is_none()) => {
                (untried().min_by_key(|i| (state[*i].in_flight, *i))?, false)
            }
            None => return None,
        };
        let s = &mut state[index];
        s.in_flight += 1;
        s.trial |= trial;
        Some(Lease {
            pool: self,
            index,
            trial,
        })
    }

    /// Counts one attempt on `index` and moves its breaker: `failed` with the error, or
    /// answered (any answer but a retryable failure proves the server is there).
    fn record(
        &self,
        index: usize,
        retry: bool,
        elapsed: Duration,
        error: Option<&CallError>,
        now: Instant,
    ) {
        let mut state = self.lock();
        let s = &mut state[index];
        s.calls += 1;
        s.retries += u64::from(retry);
        s.latencies.add(elapsed.as_secs_f64() * 1000.0);
        s.failures += u64::from(error.is_some());
        match error.filter(|e| retryable(e)) {
            None => {
                s.consecutive_failures = 0;
                s.open_until = None;
            }
            Some(e) => {
                s.consecutive_failures = s.consecutive_failures.saturating_add(1);
                let reopen = s.open_until.is_some();
                if reopen || s.consecutive_failures >= self.breaker_failures {
                    if !reopen {
                        tracing::warn!(
                            replica = %self.endpoints[index].config().base_url,
                            failures = s.consecutive_failures,
                            cooldown_s = self.cooldown.as_secs_f64(),
                            "replica breaker opened: the other replicas take its requests: {e}"
                        );
                    }
                    s.breaker_opened += u64::from(!reopen);
                    s.open_until = Some(now + self.cooldown);
                }
            }
        }
    }

    /// POSTs `body` to `path` and returns the answer's body with the retries it took:
    /// the one retry loop (see the module doc). `only` keeps every attempt on that
    /// replica (a preflight probe checks each one); `preflight` marks the requests.
    async fn post(
        &self,
        path: &str,
        body: &Value,
        jitter_key: u64,
        only: Option<usize>,
    ) -> Result<(String, u32), CallFailure> {
        let config = self.endpoints[only.unwrap_or(0)].config();
        let mut retries: u32 = 0;
        let mut tried: Vec<usize> = Vec::new();
        let mut retry_after = None;
        loop {
            let now = clock();
            let lease = match only {
                Some(i) => Some(Lease {
                    pool: self,
                    index: i,
                    trial: false,
                }),
                None => self.lease(&tried, now),
            };
            let Some(lease) = lease else {
                // Every healthy replica failed this round: wait, then start over.
                let wait = backoff(config, retries.saturating_sub(1), jitter_key)
                    .max(retry_after.unwrap_or_default());
                tracing::debug!(
                    retry = retries,
                    wait_ms = wait.as_millis() as u64,
                    "every replica failed this attempt; retrying after a backoff"
                );
                tokio::time::sleep(wait).await;
                tried.clear();
                continue;
            };
            if only.is_some() {
                self.lock()[lease.index].in_flight += 1;
            }
            let index = lease.index;
            let endpoint = &self.endpoints[index];
            let started = clock();
            let outcome = endpoint.attempt(path, body, only.is_some()).await;
            if only.is_none() {
                self.record(
                    index,
                    retries > 0,
                    started.elapsed(),
                    outcome.as_ref().err().map(|(e, _)| e),
                    clock(),
                );
            }
            drop(lease);
            let (error, after) = match outcome {
                Ok(text) => return Ok((text, retries)),
                Err(failed) => failed,
            };
            if retries >= config.max_retries || !retryable(&error) {
                return Err(CallFailure { error, retries });
            }
            tracing::debug!(
                retry = retries + 1,
                replica = %endpoint.config().base_url,
                "retrying after: {error}"
            );
            retries += 1;
            retry_after = after;
            tried.push(index);
            if only.is_some() || self.len() == 1 {
                // One server: the wait comes before the next attempt, as it always did.
                let wait =
                    backoff(config, retries - 1, jitter_key).max(retry_after.unwrap_or_default());
                tokio::time::sleep(wait).await;
                tried.clear();
            }
        }
    }

    /// `POST /chat/completions` on the best replica.
    pub async fn chat(&self, body: &Value, jitter_key: u64) -> Result<ChatAnswer, CallFailure> {
        let (text, retries) = self
            .post("chat/completions", body, jitter_key, None)
            .await?;
        self.endpoints[0].read_chat(&text, retries)
    }

    /// `POST /chat/completions` on replica `index` alone, marked as a preflight request
    /// (not counted in the figures).
    pub async fn chat_preflight(
        &self,
        body: &Value,
        index: usize,
    ) -> Result<ChatAnswer, CallFailure> {
        let index = index.min(self.len() - 1);
        let (text, retries) = self.post("chat/completions", body, 0, Some(index)).await?;
        self.endpoints[index].read_chat(&text, retries)
    }

    /// `POST /embeddings` for `texts` (one request) on the best replica, or on replica
    /// `only` alone (a preflight probe, not counted).
    pub async fn embeddings(
        &self,
        model: &str,
        texts: &[String],
        dimensions: Option<u32>,
        jitter_key: u64,
        only: Option<usize>,
    ) -> Result<EmbeddingAnswer, CallFailure> {
        let mut body = serde_json::json!({ "model": model, "input": texts });
        if let Some(d) = dimensions {
            body["dimensions"] = d.into();
        }
        let only = only.map(|i| i.min(self.len() - 1));
        let (text, retries) = self.post("embeddings", &body, jitter_key, only).await?;
        self.endpoints[only.unwrap_or(0)].read_embeddings(&text, texts.len(), retries)
    }

    /// The tokens of chat request `body` as the servers count them: the first healthy
    /// replica that counts (see [`Endpoint::count_tokens`]).
    pub async fn count_tokens(&self, body: &Value) -> Option<u64> {
        let now = clock();
        let healthy: Vec<usize> = {
            let state = self.lock();
            (0..state.len())
                .filter(|i| state[*i].admits(now).is_some())
                .collect()
        };
        for i in healthy {
            if let Some(n) = self.endpoints[i].count_tokens(body).await {
                return Some(n);
            }
        }
        None
    }

    /// What the servers say about themselves, taken together: the smallest context any
    /// replica states (a request must fit whichever it goes to), and token counting only
    /// when every replica counts.
    pub async fn facts(&self, model: &str, probe: &Value) -> ServerFacts {
        let mut all = ServerFacts {
            context: None,
            counts_tokens: true,
        };
        for endpoint in &self.endpoints {
            let facts = endpoint.facts(model, probe).await;
            all.counts_tokens &= facts.counts_tokens;
            all.context = match (all.context.take(), facts.context) {
                (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
                (a, b) => a.or(b),
            };
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::EndpointConfig;

    fn endpoint(url: &str) -> Endpoint {
        Endpoint::new(EndpointConfig {
            base_url: url.into(),
            api_key: None,
            timeout: Duration::from_secs(5),
            max_retries: 4,
            backoff_base: Duration::from_millis(1),
            backoff_max: Duration::from_millis(4),
            requests_per_minute: None,
            max_response_bytes: 1 << 20,
        })
        .expect("client")
    }

    fn pool(n: usize, breaker_failures: u32, cooldown: Duration) -> Replicas {
        Replicas::with_cooldown(
            (0..n)
                .map(|i| endpoint(&format!("http://127.0.0.1:{}/v1", 1 + i)))
                .collect(),
            breaker_failures,
            cooldown,
        )
    }

    fn down() -> CallError {
        CallError::Connection("refused".into())
    }

    #[test]
    fn the_fewest_in_flight_first_ties_by_list_order() {
        let p = pool(3, 5, REPLICA_COOLDOWN);
        let now = clock();
        let a = p.lease(&[], now).expect("a replica");
        assert_eq!(a.index, 0, "ties by list order");
        let b = p.lease(&[], now).expect("a replica");
        let c = p.lease(&[], now).expect("a replica");
        assert_eq!((b.index, c.index), (1, 2));
        let d = p.lease(&[], now).expect("a replica");
        assert_eq!(d.index, 0, "all at one: the first again");
        drop(b);
        assert_eq!(p.lease(&[], now).expect("a replica").index, 1);
        let in_flight: Vec<usize> = p.lock().iter().map(|s| s.in_flight).collect();
        assert_eq!(
            in_flight,
            vec![2, 0, 1],
            "a dropped lease gives its slot back"
        );
        assert_eq!(
            p.lease(&[1], now).expect("a replica").index,
            2,
            "a replica that failed this call is passed over"
        );
    }

    #[test]
    fn a_replica_breaker_opens_cools_down_and_takes_one_trial() {
        let cooldown = Duration::from_secs(10);
        let p = pool(2, 3, cooldown);
        let t0 = clock();
        for _ in 0..2 {
            p.record(0, false, Duration::ZERO, Some(&down()), t0);
        }
        assert_eq!(p.lease(&[], t0).expect("closed").index, 0, "2 < 3: closed");
        p.record(0, false, Duration::ZERO, Some(&down()), t0);
        assert_eq!(p.stats()[0].breaker_opened, 1);
        for _ in 0..3 {
            let l = p.lease(&[], t0).expect("the other");
            assert_eq!(l.index, 1, "open: its share goes to the other");
            std::mem::forget(l);
        }
        // A 4xx is an answer: it does not open a breaker.
        let refused = CallError::Status {
            status: 400,
            body: String::new(),
        };
        for _ in 0..5 {
            p.record(1, false, Duration::ZERO, Some(&refused), t0);
        }
        assert_eq!(p.stats()[1].breaker_opened, 0);
        // After the cool-down: one trial, and no other request while it is out.
        let later = t0 + cooldown;
        let trial = p.lease(&[], later).expect("the trial");
        assert_eq!(trial.index, 0, "fewest in flight: the cooled-down one");
        assert!(trial.trial);
        assert_eq!(p.lease(&[], later).expect("other").index, 1);
        // The trial fails: open again at once, for another cool-down.
        p.record(0, false, Duration::ZERO, Some(&down()), later);
        drop(trial);
        assert_eq!(p.lease(&[], later + cooldown / 2).expect("x").index, 1);
        // The next trial answers: closed.
        let trial = p.lease(&[1], later + cooldown).expect("the trial");
        p.record(0, false, Duration::ZERO, None, later + cooldown);
        drop(trial);
        assert!(p.lock()[0].open_until.is_none());
        assert_eq!(
            p.stats()[0].breaker_opened,
            1,
            "a re-opening is not counted again"
        );
    }

    #[test]
    fn when_every_breaker_is_open_they_are_tried_anyway() {
        let p = pool(2, 1, Duration::from_secs(60));
        let now = clock();
        p.record(0, false, Duration::ZERO, Some(&down()), now);
        p.record(1, false, Duration::ZERO, Some(&down()), now);
        let a = p.lease(&[], now).expect("tried anyway");
        assert_eq!(a.index, 0);
        assert_eq!(p.lease(&[0], now).expect("the other").index, 1);
        assert!(p.lease(&[0, 1], now).is_none(), "both tried: back off");
        // One open, the other healthy but tried this call: back off, never force the open one.
        let q = pool(2, 1, Duration::from_secs(60));
        q.record(0, false, Duration::ZERO, Some(&down()), now);
        assert!(q.lease(&[1], now).is_none());
    }

    #[test]
    fn latency_quantiles_are_within_a_bucket() {
        let mut l = Latencies::default();
        for ms in 1..=100 {
            l.add(f64::from(ms));
        }
        assert!((l.mean() - 50.5).abs() < 1e-9);
        let p95 = l.quantile(0.95);
        assert!((95.0..=95.0 * 1.1).contains(&p95), "{p95}");
        assert_eq!(l.quantile(1.0), 100.0, "never past the longest");
        assert_eq!(Latencies::default().quantile(0.95), 0.0);
    }

    async fn serve(app: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, task)
    }

    /// A dead replica's call is retried at once on a live one; its failures are counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_replica_fails_over_to_a_live_one() {
        let answer = || async {
            axum::Json(
                serde_json::json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}),
            )
        };
        let (live, _task) =
            serve(axum::Router::new().route("/v1/chat/completions", axum::routing::post(answer)))
                .await;
        // A port nothing listens on: bound, then closed.
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            format!("http://{}/v1", l.local_addr().expect("addr"))
        };
        let p = Replicas::new(vec![endpoint(&dead), endpoint(&live)], 2);
        let body = serde_json::json!({});
        for _ in 0..6 {
            let a = p.chat(&body, 0).await.expect("answered by the live one");
            assert_eq!(a.content, "ok");
        }
        let stats = p.stats();
        assert_eq!(stats[0].failures, 2, "two failures open its breaker");
        assert_eq!(stats[0].breaker_opened, 1);
        assert_eq!(stats[1].calls, 6);
        assert_eq!(stats[1].retries, 2, "two of them were failovers");
        assert_eq!(stats[1].failures, 0);
    }
}
