//! The servers' preflight (`hearsay check`, and before every run that calls a model):
//! before anything is written, each brain some NPC uses sends one real decision request —
//! the first such NPC's tick-0 prompt — and the embedder embeds one text. A server that
//! refuses the request (HTTP 4xx, e.g. a hosted strict mode refusing a schema keyword),
//! answers that never validate, a prompt that cannot fit the context even trimmed, or a
//! vector of unexpected width stop the command (exit 2) with the server's own words and
//! what to change. A run that would otherwise "succeed" on the heuristic fallback with
//! no model ever deciding is refused instead.
//!
//! With a `base_url` list, every replica gets the probe (and the embedder's text), and
//! the first that fails stops the command naming it: a run never starts on a replica
//! that does not answer.
//!
//! Each brain also asks its server about itself first (llama.cpp's `/props` and token
//! count, Ollama's `/api/show`): the context per request and how prompts are counted.
//! Probe calls are not part of the run: not on the tape, not counted.

use std::sync::Arc;
use std::time::Instant;

use hearsay_brain::{LlmBrain, Probe, ProbeError, Recollection, Replicas};
use hearsay_core::{MemoryId, MemoryKind, Sim};
use hearsay_memory::Embedder;

use crate::RunError;
use crate::scenario::{EmbedderSpec, Scenario};
use crate::think::{BrainSlot, RequestTemplate};

/// What the preflight found for one brain.
#[derive(Clone, Debug)]
pub struct BrainCheck {
    /// `[brain]` or `[brains.NAME]`.
    pub section: String,
    /// The brain's `model`, as sent with the probe.
    pub model: String,
    /// The response format sent (`json_schema`, …).
    pub response_format: String,
    /// The NPC whose tick-0 prompt was sent.
    pub npc: String,
    /// Replicas of its server that each answered the probe.
    pub replicas: usize,
    /// How long the probe took (every attempt), ms.
    pub latency_ms: f64,
    /// What the successful probe cost: tokens, trimming, attempts, context budget.
    pub probe: Probe,
}

/// What the preflight found for the embedder.
#[derive(Clone, Debug)]
pub struct EmbedderCheck {
    /// The `[memory.embedder]` model that embedded the test text.
    pub model: String,
    /// Dimensions of the vector it returned.
    pub dims: usize,
    /// Replicas of its server that each embedded the text.
    pub replicas: usize,
    /// How long it took, ms.
    pub latency_ms: f64,
}

/// Everything the preflight found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Per brain some NPC uses, in brain-name order.
    pub brains: Vec<BrainCheck>,
    /// The remote embedder, if there is one.
    pub embedder: Option<EmbedderCheck>,
}

impl CheckReport {
    /// One line per server, for a terminal.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .brains
            .iter()
            .map(|b| {
                let p = &b.probe;
                format!(
                    "{} model {:?}: a valid tick-0 decision for {}{} in {:.0} ms ({} accepted{}); prompt {} tokens{} of {} per request ({}), counted by {}{}",
                    b.section,
                    crate::terminal::safe(&b.model),
                    crate::terminal::safe(&b.npc),
                    replicas_note(b.replicas),
                    b.latency_ms,
                    b.response_format,
                    if p.attempts > 1 {
                        format!(", {} attempts", p.attempts)
                    } else {
                        String::new()
                    },
                    p.prompt_tokens,
                    if p.cached_tokens > 0 {
                        format!(" ({} cached)", p.cached_tokens)
                    } else {
                        String::new()
                    },
                    p.budget.context_tokens,
                    p.budget.source,
                    p.budget.counter.describe(),
                    if p.trimmed.is_empty() {
                        String::new()
                    } else {
                        format!("; trimmed to fit: {}", p.trimmed.join(", "))
                    }
                )
            })
            .collect();
        if let Some(e) = &self.embedder {
            out.push(format!(
                "[memory.embedder] model {:?}: {} dimensions{} in {:.0} ms",
                crate::terminal::safe(&e.model),
                e.dims,
                replicas_note(e.replicas),
                e.latency_ms
            ));
        }
        out
    }
}

/// ` from each of N replicas`, for more than one.
fn replicas_note(n: usize) -> String {
    if n > 1 {
        format!(" from each of {n} replicas")
    } else {
        String::new()
    }
}

/// The request NPC `npc` would send at tick 0: what it perceives then, and its seed
/// memories as what it recalls (the most important first, at most `recall_k`).
fn tick0_request(scenario: &Scenario, npc: usize) -> Option<hearsay_brain::BrainRequest> {
    let observations = Sim::new(scenario.world_setup())
        .perceive(0, scenario.seed, Vec::new())
        .observations;
    let observation = observations.into_iter().find(|o| o.npc.index() == npc)?;
    let mut seeds: Vec<Recollection> = scenario.npcs[npc]
        .memories
        .iter()
        .enumerate()
        .map(|(i, m)| Recollection {
            id: MemoryId(i as u64 + 1),
            kind: MemoryKind::Seed,
            content: m.content.as_str().into(),
            importance: m.importance,
            tick: 0,
            source: None,
            place: Default::default(),
        })
        .collect();
    seeds.sort_by_key(|r| std::cmp::Reverse(r.importance));
    seeds.truncate(scenario.memory.recall_k);
    Some(RequestTemplate::new(scenario).request(scenario.seed, observation, seeds))
}

fn section(name: &str) -> String {
    if name == crate::scenario::DEFAULT_BRAIN {
        "[brain]".to_owned()
    } else {
        format!("[brains.{name}]")
    }
}

fn format_name(llm: &LlmBrain) -> &'static str {
    match llm.config().response_format {
        hearsay_brain::ResponseFormat::JsonSchema => "json_schema",
        hearsay_brain::ResponseFormat::JsonSchemaFull => "json_schema_full",
        hearsay_brain::ResponseFormat::JsonObject => "json_object",
        hearsay_brain::ResponseFormat::None => "no response_format",
    }
}

/// Asks every model server of the run about itself (context, token counting), and — with
/// `probe` — sends each brain's probe to each of its replicas and has each embedder
/// replica embed one text (`embedder_replicas`; else `embedder` embeds it). Brains no NPC
/// uses are left alone.
pub async fn check_servers(
    scenario: &Scenario,
    brains: &[BrainSlot],
    embedder: &Arc<dyn Embedder>,
    embedder_replicas: Option<&Replicas>,
    probe: bool,
) -> Result<CheckReport, RunError> {
    let mut report = CheckReport::default();
    for slot in brains {
        let Some(llm) = slot.brain.llm() else {
            continue;
        };
        let Some(npc) = scenario.npcs.iter().position(|n| n.brain == slot.name) else {
            continue;
        };
        let section = section(&slot.name);
        let request = tick0_request(scenario, npc).ok_or_else(|| RunError::Preflight {
            section: section.clone(),
            problem: "no tick-0 observation for its first NPC".into(),
            hint: String::new(),
        })?;
        llm.discover(&request)
            .await
            .map_err(|e| RunError::Preflight {
                section: section.clone(),
                problem: e.to_string(),
                hint: String::new(),
            })?;
        if !probe {
            continue;
        }
        let started = Instant::now();
        let replicas = llm.replicas();
        let mut first = None;
        for (i, endpoint) in replicas.endpoints().iter().enumerate() {
            match llm.probe(&request, i).await {
                Ok(probe) => {
                    first.get_or_insert(probe);
                }
                Err(e) => {
                    return Err(RunError::Preflight {
                        hint: hint(&e, llm),
                        section,
                        problem: format!(
                            "model {:?} at {}{}: {e}",
                            llm.config().model,
                            crate::terminal::safe(&endpoint.config().base_url),
                            replica_of(i, replicas.len()),
                        ),
                    });
                }
            }
        }
        if let Some(probe) = first {
            report.brains.push(BrainCheck {
                section,
                model: llm.config().model.clone(),
                response_format: format_name(llm).into(),
                npc: scenario.npcs[npc].name.clone(),
                replicas: replicas.len(),
                latency_ms: started.elapsed().as_secs_f64() * 1000.0,
                probe,
            });
        }
    }
    if probe && let EmbedderSpec::Openai { remote, dimensions } = &scenario.memory.embedder {
        let started = Instant::now();
        let text = vec!["hearsay preflight: is the embedder there?".to_owned()];
        let urls = &remote.base_urls;
        let mut widths = Vec::new();
        for (i, url) in urls.iter().enumerate() {
            let embedded = match embedder_replicas {
                Some(pool) => pool
                    .embeddings(&remote.model, &text, *dimensions, 0, Some(i))
                    .await
                    .map(|a| a.vectors)
                    .map_err(|f| format!("{} (after {} retries)", f.error, f.retries)),
                None => embedder.embed(&text).await.map_err(|e| e.to_string()),
            };
            let at = format!(
                "{}{}",
                crate::terminal::safe(url),
                replica_of(i, urls.len())
            );
            let vectors = embedded.map_err(|e| RunError::Preflight {
                section: "[memory.embedder]".into(),
                problem: format!("model {:?} at {at}: {e}", remote.model),
                hint: "check base_url and model; the server must answer OpenAI's /embeddings"
                    .into(),
            })?;
            let dims = vectors.first().map_or(0, Vec::len);
            let expected = dimensions
                .map(|d| d as usize)
                .or_else(|| widths.first().copied());
            if dims == 0 || expected.is_some_and(|d| d != dims) {
                return Err(RunError::Preflight {
                    section: "[memory.embedder]".into(),
                    problem: format!(
                        "model {:?} at {at} returned a vector of {dims} dimensions{}",
                        remote.model,
                        expected.map_or(String::new(), |d| format!(", not the {d} asked for"))
                    ),
                    hint: "set dimensions to what the model returns, or leave it out; every \
                           replica must serve the same model"
                        .into(),
                });
            }
            widths.push(dims);
            if embedder_replicas.is_none() {
                break;
            }
        }
        report.embedder = Some(EmbedderCheck {
            model: remote.model.clone(),
            dims: widths.first().copied().unwrap_or(0),
            replicas: widths.len(),
            latency_ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    }
    Ok(report)
}

/// ` (replica I of N)`, for a list of more than one.
fn replica_of(index: usize, of: usize) -> String {
    if of > 1 {
        format!(" (replica {} of {of})", index + 1)
    } else {
        String::new()
    }
}

/// What to change, for a probe that failed.
fn hint(error: &ProbeError, llm: &LlmBrain) -> String {
    let format = llm.config().response_format;
    match error {
        ProbeError::Refused { status, message } => {
            let lower = message.to_ascii_lowercase();
            let keyword = hearsay_brain::prompt::STRICT_REFUSES
                .iter()
                .find(|k| message.contains(**k));
            if let Some(k) = keyword.filter(|_| format != hearsay_brain::ResponseFormat::JsonSchema) {
                format!(
                    "this server refused the schema's `{k}`: use response_format = \"json_schema\" \
                     (the subset hosted strict modes accept; the bounds are then enforced after parsing)"
                )
            } else if lower.contains("schema") || lower.contains("response_format") {
                "this server refused the response format: try response_format = \"json_object\" \
                 or \"none\" (the prompt states the format and the parser enforces it)"
                    .into()
            } else if lower.contains("context") || lower.contains("too long") || lower.contains("token") {
                "the prompt is longer than the server takes: set context_tokens to the server's \
                 context per request, or give the server a larger one (llama.cpp: -c / -np)"
                    .into()
            } else if *status == 401 || *status == 403 {
                "the server refused the key: check api_key_env".into()
            } else if *status == 404 {
                "check model and base_url".into()
            } else {
                "see the server's message above".into()
            }
        }
        ProbeError::TooLong(_) => {
            "raise context_tokens (or the server's context: llama.cpp -c / -np), or lower max_tokens"
                .into()
        }
        ProbeError::Invalid { .. } => {
            "the model does not answer with a valid decision: try response_format = \
             \"json_schema_full\" (llama.cpp, vLLM, Ollama decode with it) or a stronger model"
                .into()
        }
        ProbeError::Unavailable(_) => {
            "is the server running, and is base_url right? (--no-preflight skips this check)".into()
        }
    }
}

/// Says what the preflight found, before the run starts.
pub fn announce(report: &CheckReport) {
    for line in report.lines() {
        crate::notice::say(&format!("preflight: {line}"));
    }
}
