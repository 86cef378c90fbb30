//! Building the brains and the embedder a scenario names, with their API keys — and
//! deciding which keys may go where.
//!
//! Keys are read from the environment variables the scenario names, all of them before
//! anything runs, so a missing key is a clear error before tick 0 and before a run
//! directory exists. A scenario is someone else's file, so it never decides alone where
//! a key is sent: every (variable, server) pair passes [`KeyPolicy`] first — loopback,
//! a provider's own host for its usual variable, or a pair the user allowed outside any
//! scenario (`HEARSAY_ALLOW_KEYS`, or `~/.config/hearsay/allowed-keys`) — and never plain
//! http to another machine. A refused pair stops the command before anything is sent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hearsay_brain::{
    ApiKey, Brain, Endpoint, EndpointConfig, HeuristicBrain, KeyPolicy, LlmBrain, LlmConfig,
    Replicas, ResponseFormat, Vocabulary,
};
use hearsay_core::SPEECH_CHARS_MAX;
use hearsay_memory::{
    BoxFuture, CachedEmbedder, EmbedError, Embedder, HashingEmbedder, VECTOR_DIMS, VectorSpace,
};

use crate::RunError;
use crate::scenario::raw::ResponseFormatKind;
use crate::scenario::{BrainSpec, EmbedderSpec, RemoteSpec, Scenario};

/// The environment variable holding the user's own allowances (`VAR=HOST,VAR=HOST`).
pub const ALLOW_KEYS_ENV: &str = "HEARSAY_ALLOW_KEYS";

/// The user's allowance file: `$HEARSAY_CONFIG_DIR/allowed-keys`, else
/// `$XDG_CONFIG_HOME/hearsay/allowed-keys`, else `~/.config/hearsay/allowed-keys`.
pub fn allow_file() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let dir = var("HEARSAY_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| PathBuf::from(d).join("hearsay")))
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config/hearsay")))?;
    Some(dir.join("allowed-keys"))
}

/// The key policy with the user's allowances (from the environment and the user's file,
/// never from a scenario or a run directory). Lines that cannot be read are refused: a
/// typo there must not look like a refusal of the scenario.
pub fn key_policy() -> Result<KeyPolicy, RunError> {
    let mut policy = KeyPolicy::new();
    let mut bad = Vec::new();
    if let Ok(text) = std::env::var(ALLOW_KEYS_ENV) {
        bad.extend(policy.allow(&text, ALLOW_KEYS_ENV));
    }
    if let Some(path) = allow_file()
        && let Ok(meta) = std::fs::metadata(&path)
        && meta.is_file()
        && meta.len() <= 1024 * 1024
        && let Ok(text) = std::fs::read_to_string(&path)
    {
        bad.extend(policy.allow(&text, &path.display().to_string()));
    }
    if bad.is_empty() {
        Ok(policy)
    } else {
        Err(RunError::BadOption(format!(
            "cannot read your key allowances: {}",
            bad.join("; ")
        )))
    }
}

/// One server a scenario calls: where, for what, with which key variable. A `base_url`
/// list is one `Remote` per replica, each checked and announced like a single server.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Remote {
    /// `[brain]`, `[brains.NAME]` or `[memory.embedder]`.
    pub section: String,
    /// Its `base_url` (one replica's).
    pub base_url: String,
    /// Its model.
    pub model: String,
    /// The variable its key is read from, if any.
    pub key_var: Option<String>,
}

/// Every server `scenario` calls, brains first (by name), then the embedder; every
/// replica of a `base_url` list in list order.
pub fn remotes(scenario: &Scenario) -> Vec<Remote> {
    remote_specs(scenario)
        .into_iter()
        .flat_map(|(section, spec)| {
            spec.base_urls.iter().map(move |url| Remote {
                section: section.clone(),
                base_url: url.clone(),
                model: spec.model.clone(),
                key_var: spec.api_key_env.clone(),
            })
        })
        .collect()
}

/// Every remote part of `scenario` with its section: brains by name, then the embedder.
fn remote_specs(scenario: &Scenario) -> Vec<(String, &RemoteSpec)> {
    let mut out: Vec<(String, &RemoteSpec)> = scenario
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
        out.push(("[memory.embedder]".to_owned(), remote));
    }
    out
}

/// What each server of `remotes` would be sent, as lines for the user: the model, the
/// host, the key variable and why it may go there — or why it may not.
pub fn describe(remotes: &[Remote], policy: &KeyPolicy) -> Vec<String> {
    remotes
        .iter()
        .map(|r| {
            let key = match &r.key_var {
                None => "no key".to_owned(),
                Some(var) => match policy.check(&r.section, var, &r.base_url) {
                    Ok(why) => format!("key ${var} ({why})"),
                    Err(refused) => format!("key ${var} REFUSED: {}", refused.why),
                },
            };
            format!(
                "{} model {:?} at {} with {key}",
                r.section,
                crate::terminal::safe(&r.model),
                crate::terminal::safe(&r.base_url)
            )
        })
        .collect()
}

/// Says, before the first network call, which server each part of the run calls and
/// which key variable goes to which host.
pub fn announce(remotes: &[Remote], policy: &KeyPolicy) {
    for line in describe(remotes, policy) {
        crate::notice::say(&format!("network: {line}"));
    }
}

/// API keys by environment variable name, each checked against the server it goes to.
#[derive(Debug, Default)]
pub struct Keys {
    keys: BTreeMap<String, ApiKey>,
    /// (variable, base_url) pairs the policy allowed.
    allowed: Vec<(String, String)>,
}

/// Reads every key the scenario names, after checking that each may go to its server.
pub fn load_keys(scenario: &Scenario) -> Result<Keys, RunError> {
    keys_for(&remotes(scenario))
}

/// Reads only the embedder's key (to embed a query outside a run).
pub fn load_embedder_keys(scenario: &Scenario) -> Result<Keys, RunError> {
    let embedder: Vec<Remote> = remotes(scenario)
        .into_iter()
        .filter(|r| r.section == "[memory.embedder]")
        .collect();
    keys_for(&embedder)
}

/// Checks every (variable, server) pair of `remotes` against the user's policy — all of
/// them before reading any key — then reads the keys. Every command that will call a
/// server comes through here first, so this is where the user is told which key goes to
/// which host ([`announce`]), before anything is sent.
pub fn keys_for(remotes: &[Remote]) -> Result<Keys, RunError> {
    let policy = key_policy()?;
    announce(remotes, &policy);
    let mut keys = Keys::default();
    for r in remotes {
        if let Some(var) = &r.key_var {
            policy
                .check(&r.section, var, &r.base_url)
                .map_err(RunError::KeyRefused)?;
            keys.allowed.push((var.clone(), r.base_url.clone()));
        }
    }
    for r in remotes {
        if let Some(var) = &r.key_var
            && let std::collections::btree_map::Entry::Vacant(slot) = keys.keys.entry(var.clone())
        {
            let key = ApiKey::from_env(slot.key(), &r.section)?;
            slot.insert(key);
        }
    }
    Ok(keys)
}

/// The keys of `remotes` that `policy` would refuse, and why (for `validate`).
pub fn refusals(remotes: &[Remote], policy: &KeyPolicy) -> Vec<hearsay_brain::KeyRefused> {
    remotes
        .iter()
        .filter_map(|r| {
            let var = r.key_var.as_ref()?;
            policy.check(&r.section, var, &r.base_url).err()
        })
        .collect()
}

/// The one place a key meets a server: only a pair [`keys_for`] checked gets its key.
/// `base_url` is one of `remote`'s replicas.
fn endpoint(remote: &RemoteSpec, base_url: &str, keys: &Keys) -> Result<Endpoint, RunError> {
    let api_key = match &remote.api_key_env {
        None => None,
        Some(var) => {
            let checked = keys
                .allowed
                .iter()
                .any(|(v, url)| v == var && url == base_url);
            if !checked {
                return Err(RunError::Provider(format!(
                    "the key in ${var} was not checked for {base_url}; nothing was sent"
                )));
            }
            keys.keys.get(var).cloned()
        }
    };
    Endpoint::new(EndpointConfig {
        base_url: base_url.to_owned(),
        api_key,
        timeout: Duration::from_millis(remote.timeout_ms),
        max_retries: remote.max_retries,
        backoff_base: Duration::from_millis(remote.retry_base_ms),
        backoff_max: Duration::from_millis(remote.retry_base_ms.saturating_mul(64).max(1))
            .min(Duration::from_secs(30)),
        requests_per_minute: remote.requests_per_minute,
        max_response_bytes: remote.max_response_bytes,
    })
    .map_err(|e| RunError::Provider(e.to_string()))
}

/// Every replica of `remote`, each through [`endpoint`], as one pool whose replica
/// breakers open after `breaker_failures` consecutive failed attempts.
fn replicas(remote: &RemoteSpec, keys: &Keys, breaker_failures: u32) -> Result<Replicas, RunError> {
    let endpoints = remote
        .base_urls
        .iter()
        .map(|url| endpoint(remote, url, keys))
        .collect::<Result<Vec<_>, RunError>>()?;
    if endpoints.is_empty() {
        return Err(RunError::Provider(
            "no base_url to call; nothing was sent".into(),
        ));
    }
    Ok(Replicas::new(endpoints, breaker_failures))
}

/// Checks, before a run starts, that every model server the scenario calls answers
/// (see [`Endpoint::reachable`]) — every replica of a `base_url` list — so a wrong
/// `base_url` or a server that is not running refuses the run at once, naming it, instead
/// of failing every call of every tick.
pub async fn check_reachable(scenario: &Scenario, keys: &Keys) -> Result<(), RunError> {
    let mut checked: Vec<&str> = Vec::new();
    for (section, remote) in remote_specs(scenario) {
        for url in &remote.base_urls {
            if checked.contains(&url.as_str()) {
                continue;
            }
            checked.push(url);
            endpoint(remote, url, keys)?
                .reachable()
                .await
                .map_err(|error| RunError::Unreachable {
                    section: section.clone(),
                    url: url.clone(),
                    problem: error.to_string(),
                })?;
        }
    }
    Ok(())
}

/// What of `scenario` a drifting retelling may swap in: its place names, and the
/// numbers its seed memories and events mention.
pub fn vocabulary(scenario: &Scenario) -> Vocabulary {
    Vocabulary::new(
        scenario.places.iter().map(|p| p.name.to_string()).collect(),
        scenario
            .npcs
            .iter()
            .flat_map(|n| n.memories.iter().map(|m| m.content.as_str()))
            .chain(scenario.events.iter().map(|e| e.text.as_str())),
    )
}

/// The brain for `spec`; a heuristic one with `retell_noise` gets the scenario's
/// `vocabulary` (see [`vocabulary`]).
pub fn brain(
    spec: &BrainSpec,
    vocabulary: &Vocabulary,
    keys: &Keys,
) -> Result<Arc<dyn Brain>, RunError> {
    let Some(llm) = &spec.llm else {
        return Ok(Arc::new(HeuristicBrain {
            whisper: spec.whisper,
            retell_noise: spec.retell_noise,
            vocabulary: vocabulary.clone(),
            ..HeuristicBrain::default()
        }));
    };
    let config = LlmConfig {
        model: llm.remote.model.clone(),
        temperature: llm.temperature,
        max_tokens: llm.max_tokens,
        reflect_max_tokens: llm.reflect_max_tokens,
        response_format: match llm.response_format {
            ResponseFormatKind::JsonSchema => ResponseFormat::JsonSchema,
            ResponseFormatKind::JsonSchemaFull => ResponseFormat::JsonSchemaFull,
            ResponseFormatKind::JsonObject => ResponseFormat::JsonObject,
            ResponseFormatKind::None => ResponseFormat::None,
        },
        speech_max: SPEECH_CHARS_MAX,
        budget_tokens: llm.budget_tokens,
        budget_calls: llm.budget_calls,
        breaker_failures: llm.breaker_failures,
        breaker_cooldown_ticks: llm.breaker_cooldown_ticks,
        context_tokens: llm.context_tokens,
    };
    Ok(Arc::new(LlmBrain::new(
        replicas(&llm.remote, keys, llm.breaker_failures)?,
        config,
    )))
}

/// An embedder, with its cache and its server's replicas when it has them (to read the
/// hit counts and the per-replica figures, and to probe each replica).
pub struct BuiltEmbedder {
    /// The embedder, cached when remote.
    pub embedder: Arc<dyn Embedder>,
    /// Its cache, when it has one.
    pub cache: Option<Arc<CachedEmbedder>>,
    /// Its server's replicas, when remote.
    pub replicas: Option<Arc<Replicas>>,
}

/// The embedder, with its cache and replicas when it has them.
pub fn embedder(
    spec: &EmbedderSpec,
    cache_entries: usize,
    keys: &Keys,
) -> Result<BuiltEmbedder, RunError> {
    match spec {
        EmbedderSpec::Hashing => Ok(BuiltEmbedder {
            embedder: Arc::new(HashingEmbedder),
            cache: None,
            replicas: None,
        }),
        EmbedderSpec::Openai { remote, dimensions } => {
            let pool = Arc::new(replicas(
                remote,
                keys,
                hearsay_brain::replicas::EMBEDDER_BREAKER_FAILURES,
            )?);
            let inner = Arc::new(OpenAiEmbedder {
                replicas: pool.clone(),
                model: remote.model.clone(),
                dimensions: *dimensions,
                calls: AtomicU64::new(0),
            });
            let cached = Arc::new(CachedEmbedder::new(inner, cache_entries));
            Ok(BuiltEmbedder {
                embedder: cached.clone(),
                cache: Some(cached),
                replicas: Some(pool),
            })
        }
    }
}

/// The vector space `spec` makes, named as `model` (the embedder's name for itself): the
/// hashing embedder's width is fixed, a remote one's is the `dimensions` asked for (else
/// found by the preflight's probe, or by the store).
pub fn space_of(spec: &EmbedderSpec, model: &str) -> VectorSpace {
    let dims = match spec {
        EmbedderSpec::Hashing => Some(VECTOR_DIMS),
        EmbedderSpec::Openai { dimensions, .. } => dimensions.map(|d| d as usize),
    };
    VectorSpace::new(model, dims)
}

/// An OpenAI-compatible `/embeddings` server (its replicas) as an [`Embedder`]: one
/// request per call.
pub struct OpenAiEmbedder {
    replicas: Arc<Replicas>,
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
            self.replicas
                .embeddings(&self.model, texts, self.dimensions, call, None)
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
