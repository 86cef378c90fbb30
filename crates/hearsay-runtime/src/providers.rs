//! Building the brains and the embedder a scenario names, with their API keys.
//!
//! Keys are read from the environment variables the scenario names, all of them before
//! anything runs, so a missing key is a clear error before tick 0 and before a run
//! directory exists.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hearsay_brain::{
    ApiKey, Brain, Endpoint, EndpointConfig, HeuristicBrain, LlmBrain, LlmConfig, ResponseFormat,
};
use hearsay_core::SPEECH_CHARS_MAX;
use hearsay_memory::{BoxFuture, CachedEmbedder, EmbedError, Embedder, HashingEmbedder};

use crate::RunError;
use crate::scenario::raw::ResponseFormatKind;
use crate::scenario::{BrainSpec, EmbedderSpec, RemoteSpec, Scenario};

/// API keys by environment variable name.
#[derive(Debug, Default)]
pub struct Keys(BTreeMap<String, ApiKey>);

/// Reads every key the scenario names.
pub fn load_keys(scenario: &Scenario) -> Result<Keys, RunError> {
    let mut wanted: Vec<(String, String)> = Vec::new();
    for (name, brain) in &scenario.brains {
        if let Some(var) = brain
            .llm
            .as_ref()
            .and_then(|l| l.remote.api_key_env.clone())
        {
            let section = if name == crate::scenario::DEFAULT_BRAIN {
                "[brain]".to_owned()
            } else {
                format!("[brains.{name}]")
            };
            wanted.push((var, section));
        }
    }
    if let EmbedderSpec::Openai { remote, .. } = &scenario.memory.embedder
        && let Some(var) = &remote.api_key_env
    {
        wanted.push((var.clone(), "[memory.embedder]".to_owned()));
    }
    let mut keys = BTreeMap::new();
    for (var, section) in wanted {
        if let std::collections::btree_map::Entry::Vacant(slot) = keys.entry(var) {
            let key = ApiKey::from_env(slot.key(), &section)?;
            slot.insert(key);
        }
    }
    Ok(Keys(keys))
}

/// Reads only the embedder's key (to embed a query outside a run).
pub fn load_embedder_keys(scenario: &Scenario) -> Result<Keys, RunError> {
    let mut keys = BTreeMap::new();
    if let EmbedderSpec::Openai { remote, .. } = &scenario.memory.embedder
        && let Some(var) = &remote.api_key_env
    {
        keys.insert(var.clone(), ApiKey::from_env(var, "[memory.embedder]")?);
    }
    Ok(Keys(keys))
}

fn endpoint(remote: &RemoteSpec, keys: &Keys) -> Result<Endpoint, RunError> {
    let api_key = remote
        .api_key_env
        .as_ref()
        .and_then(|var| keys.0.get(var).cloned());
    Endpoint::new(EndpointConfig {
        base_url: remote.base_url.clone(),
        api_key,
        timeout: Duration::from_millis(remote.timeout_ms),
        max_retries: remote.max_retries,
        backoff_base: Duration::from_millis(remote.retry_base_ms),
        backoff_max: Duration::from_millis(remote.retry_base_ms.saturating_mul(64).max(1))
            .min(Duration::from_secs(30)),
        requests_per_minute: remote.requests_per_minute,
    })
    .map_err(|e| RunError::Provider(e.to_string()))
}

/// Checks, before a run starts, that every model server the scenario calls answers
/// (see [`Endpoint::reachable`]), so a wrong `base_url` or a server that is not running
/// refuses the run at once instead of failing every call of every tick.
pub async fn check_reachable(scenario: &Scenario, keys: &Keys) -> Result<(), RunError> {
    let mut remotes: Vec<(String, &RemoteSpec)> = scenario
        .brains
        .iter()
        .filter_map(|(name, spec)| {
            let section = if name == crate::scenario::DEFAULT_BRAIN {
                "[brain]".to_owned()
            } else {
                format!("[brains.{name}]")
            };
            spec.llm.as_ref().map(|llm| (section, &llm.remote))
        })
        .collect();
    if let EmbedderSpec::Openai { remote, .. } = &scenario.memory.embedder {
        remotes.push(("[memory.embedder]".to_owned(), remote));
    }
    let mut checked: Vec<&str> = Vec::new();
    for (section, remote) in remotes {
        if checked.contains(&remote.base_url.as_str()) {
            continue;
        }
        checked.push(&remote.base_url);
        endpoint(remote, keys)?
            .reachable()
            .await
            .map_err(|error| RunError::Unreachable {
                section,
                url: remote.base_url.clone(),
                problem: error.to_string(),
            })?;
    }
    Ok(())
}

/// The brain for `spec`.
pub fn brain(spec: &BrainSpec, keys: &Keys) -> Result<Arc<dyn Brain>, RunError> {
    let Some(llm) = &spec.llm else {
        return Ok(Arc::new(HeuristicBrain::default()));
    };
    let config = LlmConfig {
        model: llm.remote.model.clone(),
        temperature: llm.temperature,
        max_tokens: llm.max_tokens,
        response_format: match llm.response_format {
            ResponseFormatKind::JsonSchema => ResponseFormat::JsonSchema,
            ResponseFormatKind::JsonObject => ResponseFormat::JsonObject,
            ResponseFormatKind::None => ResponseFormat::None,
        },
        speech_max: SPEECH_CHARS_MAX,
        budget_tokens: llm.budget_tokens,
        budget_calls: llm.budget_calls,
        breaker_failures: llm.breaker_failures,
        breaker_cooldown_ticks: llm.breaker_cooldown_ticks,
    };
    Ok(Arc::new(LlmBrain::new(
        endpoint(&llm.remote, keys)?,
        config,
    )))
}

/// An embedder, and its cache when it has one (to read the hit counts).
pub type EmbedderWithCache = (Arc<dyn Embedder>, Option<Arc<CachedEmbedder>>);

/// The embedder, and its cache when it has one.
pub fn embedder(
    spec: &EmbedderSpec,
    cache_entries: usize,
    keys: &Keys,
) -> Result<EmbedderWithCache, RunError> {
    match spec {
        EmbedderSpec::Hashing => Ok((Arc::new(HashingEmbedder), None)),
        EmbedderSpec::Openai { remote, dimensions } => {
            let inner = Arc::new(OpenAiEmbedder {
                endpoint: endpoint(remote, keys)?,
                model: remote.model.clone(),
                dimensions: *dimensions,
                calls: AtomicU64::new(0),
            });
            let cached = Arc::new(CachedEmbedder::new(inner, cache_entries));
            Ok((cached.clone(), Some(cached)))
        }
    }
}

/// An OpenAI-compatible `/embeddings` endpoint as an [`Embedder`]: one request per call.
pub struct OpenAiEmbedder {
    endpoint: Endpoint,
    model: String,
    dimensions: Option<u32>,
    calls: AtomicU64,
}

impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            let call = self.calls.fetch_add(1, Ordering::Relaxed);
            self.endpoint
                .embeddings(&self.model, texts, self.dimensions, call)
                .await
                .map(|answer| answer.vectors)
                .map_err(|f| match f.error {
                    hearsay_brain::openai::CallError::Protocol(msg) => EmbedError::Malformed(msg),
                    other => {
                        EmbedError::Unavailable(format!("{other} (after {} retries)", f.retries))
                    }
                })
        })
    }
}
