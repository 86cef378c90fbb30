//! `[brain]` and `[brains.NAME]`, checked into [`BrainSpec`]s: the provider, the model
//! server's connection and every knob of an LLM brain.

use super::*;

/// The connection fields of a `[brain]` or `[memory.embedder]` table.
pub(super) struct RemoteFields<'a> {
    pub(super) base_url: &'a Option<Spanned<RawBaseUrl>>,
    pub(super) model: &'a Option<Spanned<String>>,
    pub(super) api_key_env: &'a Option<Spanned<String>>,
    pub(super) timeout_ms: &'a Option<Spanned<u64>>,
    pub(super) max_retries: &'a Option<Spanned<u32>>,
    pub(super) retry_base_ms: &'a Option<Spanned<u64>>,
    pub(super) requests_per_minute: &'a Option<Spanned<u32>>,
    pub(super) max_response_bytes: &'a Option<Spanned<u64>>,
}

impl RemoteFields<'_> {
    /// (name, span) of every field that is set.
    pub(super) fn set(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        let mut out = Vec::new();
        let mut push = |name, span: Option<std::ops::Range<usize>>| {
            if let Some(span) = span {
                out.push((name, span));
            }
        };
        push("base_url", self.base_url.as_ref().map(Spanned::span));
        push("model", self.model.as_ref().map(Spanned::span));
        push("api_key_env", self.api_key_env.as_ref().map(Spanned::span));
        push("timeout_ms", self.timeout_ms.as_ref().map(Spanned::span));
        push("max_retries", self.max_retries.as_ref().map(Spanned::span));
        push(
            "retry_base_ms",
            self.retry_base_ms.as_ref().map(Spanned::span),
        );
        push(
            "requests_per_minute",
            self.requests_per_minute.as_ref().map(Spanned::span),
        );
        push(
            "max_response_bytes",
            self.max_response_bytes.as_ref().map(Spanned::span),
        );
        out
    }
}

/// Fields that only an OpenAI-compatible provider uses are errors elsewhere: a typo in
/// `provider` should not silently run offline.
pub(super) fn refuse_remote_fields(
    problems: &mut Problems,
    set: Vec<(&'static str, std::ops::Range<usize>)>,
    section: &str,
) {
    for (name, span) in set {
        problems.add(
            span,
            format!("{name} in {section} is only used with provider = \"openai\""),
            Some("set provider = \"openai\", or remove the key"),
        );
    }
}

pub(super) fn remote_spec(
    problems: &mut Problems,
    f: &RemoteFields<'_>,
    at: std::ops::Range<usize>,
    section: &str,
    response_bytes_default: u64,
) -> RemoteSpec {
    let mut required = |field: &Option<Spanned<String>>, name: &str, example: &str| match field {
        Some(v) if !v.get_ref().trim().is_empty() => v.get_ref().trim().to_owned(),
        Some(v) => {
            problems.add(v.span(), format!("{name} is empty"), Some(example));
            String::new()
        }
        None => {
            problems.add(
                at.clone(),
                format!("provider = \"openai\" in {section} needs {name}"),
                Some(example),
            );
            String::new()
        }
    };
    let model = required(f.model, "model", "e.g. model = \"gpt-4o-mini\"");
    let base_urls = base_urls(problems, f.base_url.as_ref(), at.clone(), section);
    let api_key_env = f.api_key_env.as_ref().and_then(|v| {
        let name = v.get_ref().trim();
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            problems.add(
                v.span(),
                "api_key_env must name an environment variable (letters, digits, _)",
                Some("the key itself never goes in the scenario"),
            );
        }
        valid.then(|| name.to_owned())
    });
    let timeout_ms = in_range(
        problems,
        f.timeout_ms.as_ref(),
        1..=TIMEOUT_MS_MAX,
        &format!("timeout_ms must be 1..={TIMEOUT_MS_MAX} (ten minutes)"),
        Some("the longest one request may take, answer included; a slower server is down"),
        30_000,
    );
    let max_response_bytes = in_range(
        problems,
        f.max_response_bytes.as_ref(),
        RESPONSE_BYTES,
        &format!(
            "max_response_bytes must be {}..={}",
            RESPONSE_BYTES.start(),
            RESPONSE_BYTES.end()
        ),
        Some("the largest answer read; a longer one fails the call"),
        response_bytes_default,
    );
    let requests_per_minute = match f.requests_per_minute {
        Some(r) if *r.get_ref() == 0 => {
            problems.add(
                r.span(),
                "requests_per_minute must be at least 1 (leave it out for no limit)",
                None,
            );
            None
        }
        Some(r) => Some(*r.get_ref()),
        None => None,
    };
    let retry_base_ms = in_range(
        problems,
        f.retry_base_ms.as_ref(),
        0..=RETRY_BASE_MS_MAX,
        &format!("retry_base_ms must be 0..={RETRY_BASE_MS_MAX}"),
        Some("the first wait before a retry; it doubles with every retry"),
        500,
    );
    RemoteSpec {
        base_urls,
        model,
        api_key_env,
        timeout_ms,
        max_retries: in_range(
            problems,
            f.max_retries.as_ref(),
            0..=RETRIES_MAX,
            &format!("max_retries must be 0..={RETRIES_MAX}"),
            Some("each retry waits longer; a dead server is better reported than waited for"),
            4,
        ),
        retry_base_ms,
        requests_per_minute,
        max_response_bytes,
    }
}

/// `base_url`: one URL or a list of replicas (1..=[`REPLICAS_MAX`], no server twice),
/// each starting with http:// or https://, trimmed.
fn base_urls(
    problems: &mut Problems,
    field: Option<&Spanned<RawBaseUrl>>,
    at: std::ops::Range<usize>,
    section: &str,
) -> Vec<String> {
    const EXAMPLE: &str = "e.g. base_url = \"http://127.0.0.1:8080/v1\", or a list of replicas: \
                           base_url = [\"http://127.0.0.1:8080/v1\", \"http://127.0.0.1:8081/v1\"]";
    let Some(field) = field else {
        problems.add(
            at,
            format!("provider = \"openai\" in {section} needs base_url"),
            Some(EXAMPLE),
        );
        return Vec::new();
    };
    let listed: Vec<(&str, std::ops::Range<usize>)> = match field.get_ref() {
        RawBaseUrl::One(url) => vec![(url.as_str(), field.span())],
        RawBaseUrl::Many(urls) => urls
            .iter()
            .map(|u| (u.get_ref().as_str(), u.span()))
            .collect(),
    };
    if listed.is_empty() {
        problems.add(
            field.span(),
            format!("base_url in {section} is an empty list"),
            Some(EXAMPLE),
        );
        return Vec::new();
    }
    if listed.len() > REPLICAS_MAX {
        problems.add(
            field.span(),
            format!(
                "base_url in {section} lists {} servers; at most {REPLICAS_MAX}",
                listed.len()
            ),
            Some("list the replicas of one model; each takes max_concurrency requests at once"),
        );
        return Vec::new();
    }
    let mut urls: Vec<String> = Vec::new();
    for (url, span) in listed {
        let url = url.trim();
        if url.is_empty() {
            problems.add(span, "base_url is empty", Some(EXAMPLE));
            continue;
        }
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            problems.add(span, "base_url must start with http:// or https://", None);
            continue;
        }
        let same = |u: &String| u.trim_end_matches('/') == url.trim_end_matches('/');
        if urls.iter().any(same) {
            problems.add(
                span,
                format!("base_url in {section} lists {url} twice"),
                Some("each replica once: a server listed twice would take twice its share"),
            );
            continue;
        }
        urls.push(url.to_owned());
    }
    urls
}

pub(super) fn brain_spec(
    problems: &mut Problems,
    spanned: &Spanned<RawBrain>,
    section: &str,
) -> BrainSpec {
    let b = spanned.get_ref();
    let provider = b
        .provider
        .as_ref()
        .map_or(BrainProvider::Heuristic, |p| *p.get_ref());
    let max_concurrency = in_range(
        problems,
        b.max_concurrency.as_ref(),
        1..=CONCURRENCY_MAX,
        &format!("max_concurrency must be 1..={CONCURRENCY_MAX}"),
        Some("the brain's calls in flight at once"),
        if provider == BrainProvider::Openai {
            8
        } else {
            64
        },
    ) as usize;
    let remote = RemoteFields {
        base_url: &b.base_url,
        model: &b.model,
        api_key_env: &b.api_key_env,
        timeout_ms: &b.timeout_ms,
        max_retries: &b.max_retries,
        retry_base_ms: &b.retry_base_ms,
        requests_per_minute: &b.requests_per_minute,
        max_response_bytes: &b.max_response_bytes,
    };
    let llm = match provider {
        BrainProvider::Heuristic => {
            let mut set = remote.set();
            let mut push = |name, span: Option<std::ops::Range<usize>>| {
                if let Some(span) = span {
                    set.push((name, span));
                }
            };
            push("temperature", b.temperature.as_ref().map(Spanned::span));
            push("max_tokens", b.max_tokens.as_ref().map(Spanned::span));
            push(
                "context_tokens",
                b.context_tokens.as_ref().map(Spanned::span),
            );
            push("budget_tokens", b.budget_tokens.as_ref().map(Spanned::span));
            push("budget_calls", b.budget_calls.as_ref().map(Spanned::span));
            push(
                "breaker_failures",
                b.breaker_failures.as_ref().map(Spanned::span),
            );
            push(
                "breaker_cooldown_ticks",
                b.breaker_cooldown_ticks.as_ref().map(Spanned::span),
            );
            push(
                "reflect_max_tokens",
                b.reflect_max_tokens.as_ref().map(Spanned::span),
            );
            refuse_remote_fields(problems, set, section);
            None
        }
        BrainProvider::Openai => {
            let at = b.provider.as_ref().map_or(spanned.span(), Spanned::span);
            let remote = remote_spec(problems, &remote, at, section, BRAIN_RESPONSE_BYTES_DEFAULT);
            let temperature = match &b.temperature {
                Some(t) if !(0.0..=2.0).contains(t.get_ref()) => {
                    problems.add(t.span(), "temperature must be between 0 and 2", None);
                    0.7
                }
                Some(t) => *t.get_ref(),
                None => 0.7,
            };
            let max_tokens = match &b.max_tokens {
                Some(t) if *t.get_ref() < 16 => {
                    problems.add(t.span(), "max_tokens below 16 cannot hold a decision", None);
                    16
                }
                Some(t) => *t.get_ref(),
                None => 256,
            };
            let context_tokens = b.context_tokens.as_ref().map(|c| {
                let v = *c.get_ref();
                if v <= max_tokens || v > CONTEXT_TOKENS_MAX {
                    problems.add(
                        c.span(),
                        format!(
                            "context_tokens must be more than max_tokens ({max_tokens}) and at most {CONTEXT_TOKENS_MAX}"
                        ),
                        Some("the tokens one request may hold, prompt and answer together"),
                    );
                }
                v
            });
            Some(LlmSpec {
                remote,
                temperature,
                max_tokens,
                context_tokens,
                response_format: b.response_format.unwrap_or_default(),
                budget_tokens: b.budget_tokens.as_ref().map(|v| *v.get_ref()),
                budget_calls: b.budget_calls.as_ref().map(|v| *v.get_ref()),
                breaker_failures: in_range(
                    problems,
                    b.breaker_failures.as_ref(),
                    1..=u32::MAX,
                    "breaker_failures must be at least 1",
                    Some("the consecutive failed calls that open the circuit breaker"),
                    5,
                ),
                breaker_cooldown_ticks: b
                    .breaker_cooldown_ticks
                    .as_ref()
                    .map_or(10, |v| *v.get_ref()),
                reflect_max_tokens: in_range(
                    problems,
                    b.reflect_max_tokens.as_ref(),
                    16..=CONTEXT_TOKENS_MAX,
                    &format!("reflect_max_tokens must be 16..={CONTEXT_TOKENS_MAX}"),
                    Some("tokens per reflection answer: a few insights need a few hundred"),
                    REFLECT_MAX_TOKENS_DEFAULT,
                ),
            })
        }
    };
    BrainSpec {
        provider,
        max_concurrency,
        llm,
        mind: mind(problems, b, provider),
        whisper: whisper(problems, b, provider),
        retell_noise: retell_noise(problems, b, provider),
    }
}

/// `whisper`: a share in 0..=1, and a heuristic brain's knob only — a model whispers
/// when it chooses to.
fn whisper(problems: &mut Problems, b: &RawBrain, provider: BrainProvider) -> f64 {
    let Some(v) = &b.whisper else {
        return 0.0;
    };
    if provider == BrainProvider::Openai {
        problems.add(
            v.span(),
            "whisper is only used with provider = \"heuristic\"",
            Some("a model decides for itself when to whisper; remove the key"),
        );
        return 0.0;
    }
    in_range(
        problems,
        Some(v),
        0.0..=1.0,
        "whisper must be between 0 and 1",
        Some("the share of gossip whispered to a neighbour instead of said aloud"),
        0.0,
    )
}

/// `retell_noise`: the heuristic brain's chance that a retelling drifts. A model words
/// its own speech, so the key means nothing for `openai` and is refused there.
fn retell_noise(problems: &mut Problems, b: &RawBrain, provider: BrainProvider) -> f64 {
    let Some(v) = &b.retell_noise else {
        return 0.0;
    };
    if provider != BrainProvider::Heuristic {
        problems.add(
            v.span(),
            "retell_noise is only used with provider = \"heuristic\"",
            Some("a model words its own speech; remove the key"),
        );
        return 0.0;
    }
    let noise = *v.get_ref();
    if !(0.0..=1.0).contains(&noise) {
        problems.add(
            v.span(),
            format!("retell_noise must be from 0 to 1, not {noise}"),
            Some("the chance that a retelling changes one thing"),
        );
        return 0.0;
    }
    noise
}

/// Tokens per reflection answer when a scenario does not say.
pub const REFLECT_MAX_TOKENS_DEFAULT: u32 = 512;

/// The longest `max_idle_ticks` and `reflect_retry_ticks`.
const IDLE_TICKS_MAX: u64 = 1_000_000;

/// `think`, `max_idle_ticks`, `reflect_retry_ticks`: when a brain's NPCs think.
fn mind(problems: &mut Problems, b: &RawBrain, provider: BrainProvider) -> hearsay_core::Mind {
    use hearsay_core::{ThinkMode, wake};
    let think = b.think.as_ref().map_or(
        match provider {
            BrainProvider::Openai => ThinkKind::OnChange,
            BrainProvider::Heuristic => ThinkKind::EveryTick,
        },
        |t| *t.get_ref(),
    );
    let max_idle_ticks = in_range(
        problems,
        b.max_idle_ticks.as_ref(),
        1..=IDLE_TICKS_MAX,
        &format!("max_idle_ticks must be 1..={IDLE_TICKS_MAX}"),
        Some("an NPC under think = \"on_change\" thinks at least once in this many ticks"),
        wake::MAX_IDLE_TICKS_DEFAULT,
    );
    if think == ThinkKind::EveryTick
        && let Some(v) = &b.max_idle_ticks
    {
        problems.add(
            v.span(),
            "max_idle_ticks is only used with think = \"on_change\"",
            Some("set think = \"on_change\", or remove the key"),
        );
    }
    let reflect_retry_ticks = in_range(
        problems,
        b.reflect_retry_ticks.as_ref(),
        1..=IDLE_TICKS_MAX,
        &format!("reflect_retry_ticks must be 1..={IDLE_TICKS_MAX}"),
        Some("after a failed reflection, the ticks before the next try"),
        wake::REFLECT_RETRY_TICKS_DEFAULT,
    );
    hearsay_core::Mind {
        think: match think {
            ThinkKind::EveryTick => ThinkMode::EveryTick,
            ThinkKind::OnChange => ThinkMode::OnChange { max_idle_ticks },
        },
        reflect_retry_ticks,
    }
}
