//! `hearsay ask`: interviews one NPC of a finished (or stopped) run, with its own brain
//! and its memories as they were at the start of a tick — recall for the question is
//! the same two-step search the run used ([`inspect`](mod@crate::inspect)), its latest
//! memories are its short-term window.
//!
//! It changes nothing: the store is only read, no tape line or event is written, and
//! the NPC does not remember being asked.

use std::path::PathBuf;
use std::time::Instant;

use hearsay_brain::{AskRequest, Recollection, Usage};
use hearsay_core::{MemoryId, MemoryKind, NpcId};
use serde::Serialize;

use crate::RunError;
use crate::inspect::{InspectRow, inspect_source};
use crate::providers;
use crate::source::RunSource;
use crate::think::RequestTemplate;

/// What `hearsay ask` was asked.
#[derive(Clone, Debug, Default)]
pub struct AskOptions {
    /// A directory `hearsay run` wrote; the NPC's memories are read from its store.
    pub dir: PathBuf,
    /// The NPC, by name.
    pub npc: String,
    /// Free text, trimmed before use; an empty question is refused.
    pub question: String,
    /// Its memories as they were at the start of this tick (default: after the last
    /// completed tick).
    pub at_tick: Option<u64>,
    /// PostgreSQL URL, for runs kept in PostgreSQL.
    pub database_url: Option<String>,
}

/// A memory the answer drew on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AnswerMemory {
    /// The memory id, as `memory` lines in `events.jsonl` give it.
    pub id: u64,
    /// `seed`, `observation`, `conversation` or `reflection`.
    pub kind: String,
    /// The tick it was formed (0 for seed memories).
    pub tick: u64,
    /// The name of the speaker whose words it records; `None` if not heard.
    pub from: Option<String>,
    /// Cosine relevance to the question (recalled memories only).
    pub relevance: Option<f32>,
    /// The memory's full text, as stored.
    pub content: String,
}

/// The interview.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Answer {
    /// The asked NPC's name, as the run's roster spells it.
    pub npc: String,
    /// At the start of which tick.
    pub tick: u64,
    /// The question as asked, trimmed.
    pub question: String,
    /// The brain that answered (the scenario's name for it) and its provider.
    pub brain: String,
    /// `heuristic` or `openai`.
    pub provider: String,
    /// The NPC's reply in its own words (a model's is trimmed and capped in length).
    pub answer: String,
    /// What recall returned for the question, best first.
    pub recalled: Vec<AnswerMemory>,
    /// Its short-term window, oldest first.
    pub recent: Vec<AnswerMemory>,
    /// Set when the heuristic brain answered instead of the NPC's own, and why.
    pub fallback: Option<String>,
    /// Tokens, when a model answered.
    pub usage: Option<Usage>,
    /// HTTP retries after the first attempt (0 for the heuristic brain).
    pub retries: u32,
    /// How long the brain took, ms.
    pub latency_ms: f64,
}

fn kind_of(row: &InspectRow) -> MemoryKind {
    match row.kind.as_str() {
        "seed" => MemoryKind::Seed,
        "conversation" => MemoryKind::Conversation,
        "reflection" => MemoryKind::Reflection,
        _ => MemoryKind::Observation,
    }
}

fn recollection(row: &InspectRow) -> Recollection {
    Recollection {
        id: MemoryId(row.id),
        kind: kind_of(row),
        content: row.content.as_str().into(),
        importance: row.importance,
        tick: row.tick,
        source: row.from.as_deref().map(Into::into),
        place: Default::default(),
    }
}

fn shown(row: &InspectRow, relevance: Option<f32>) -> AnswerMemory {
    AnswerMemory {
        id: row.id,
        kind: row.kind.clone(),
        tick: row.tick,
        from: row.from.clone(),
        relevance,
        content: row.content.clone(),
    }
}

/// Asks the NPC `opts.npc` of the run in `opts.dir`.
pub fn ask(opts: &AskOptions) -> Result<Answer, RunError> {
    let source = RunSource::open_dir_for(
        &opts.dir,
        opts.database_url.as_deref(),
        Some(opts.npc.as_str()),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    runtime.block_on(ask_source(&source, &opts.npc, &opts.question, opts.at_tick))
}

/// Asks NPC `npc` of `source` `question`, with its memories at the start of `at_tick`.
pub async fn ask_source(
    source: &RunSource,
    npc: &str,
    question: &str,
    at_tick: Option<u64>,
) -> Result<Answer, RunError> {
    let question = question.trim();
    if question.is_empty() {
        return Err(RunError::BadOption(
            "the question is empty: hearsay ask RUN_DIR --npc NAME \"QUESTION\"".into(),
        ));
    }
    let report = inspect_source(source, npc, Some(question), at_tick, true, None).await?;
    let mut scenario = source.scenario_at(report.tick)?;
    scenario.seed = source
        .manifest
        .as_ref()
        .map_or(scenario.seed, |m| m.seed_at(report.tick));
    let npc_index = scenario
        .npcs
        .iter()
        .position(|n| n.name == report.npc)
        .unwrap_or(0);
    let spec = &scenario.npcs[npc_index];
    let brain_spec = scenario.brains.get(&spec.brain).ok_or_else(|| {
        RunError::Refused(format!("{} has no brain {:?}", report.npc, spec.brain))
    })?;
    let keys = providers::load_keys(&scenario)?;
    let brain = providers::brain(brain_spec, &providers::vocabulary(&scenario), &keys)?;

    let by_id: std::collections::BTreeMap<u64, &InspectRow> =
        report.memories.iter().map(|r| (r.id, r)).collect();
    let recalled: Vec<(&InspectRow, f32)> = report
        .recalled
        .iter()
        .filter_map(|id| by_id.get(id))
        .map(|r| (*r, r.query.map_or(0.0, |q| q.relevance)))
        .collect();
    let mut recent: Vec<&InspectRow> = report.memories.iter().collect();
    recent.sort_by_key(|r| r.id);
    let recent: Vec<&InspectRow> = recent
        .iter()
        .rev()
        .take(scenario.memory.short_term)
        .rev()
        .copied()
        .collect();

    let template = RequestTemplate::new(&scenario);
    let request = AskRequest {
        seed: scenario.seed,
        language: scenario.language,
        npc: NpcId(npc_index as u32),
        name: report.npc.clone(),
        persona: spec.persona.clone(),
        tick: report.tick,
        places: template.places.to_vec(),
        question: question.to_owned(),
        recalled: recalled
            .iter()
            .map(|(r, rel)| (recollection(r), *rel))
            .collect(),
        recent: recent.iter().map(|r| recollection(r)).collect(),
    };
    let started = Instant::now();
    let reply = brain
        .answer(&request)
        .await
        .map_err(|f| RunError::Provider(format!("{} could not answer: {}", report.npc, f.error)))?;
    Ok(Answer {
        npc: report.npc.clone(),
        tick: report.tick,
        question: question.to_owned(),
        brain: spec.brain.clone(),
        provider: brain.provider().to_owned(),
        answer: reply.value,
        recalled: recalled
            .iter()
            .map(|(r, rel)| shown(r, Some(*rel)))
            .collect(),
        recent: recent.iter().map(|r| shown(r, None)).collect(),
        fallback: reply.carried.fallback,
        usage: reply.carried.usage,
        retries: reply.carried.retries,
        latency_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// The interview as text for a terminal: the answer, then what it drew on.
pub fn render(answer: &Answer) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let safe = crate::terminal::safe;
    let _ = writeln!(
        out,
        "{} (tick {}, {} brain {:?}): {}",
        safe(&answer.npc),
        answer.tick,
        answer.provider,
        answer.brain,
        safe(&answer.answer)
    );
    if let Some(why) = &answer.fallback {
        let _ = writeln!(out, "(answered by the heuristic brain: {})", safe(why));
    }
    if answer.recalled.is_empty() {
        let _ = writeln!(out, "recalled: nothing");
    } else {
        let _ = writeln!(out, "recalled for the question:");
        for m in &answer.recalled {
            let _ = writeln!(
                out,
                "  #{:<6} tick {:>5}  relevance {:.3}  {}",
                m.id,
                m.tick,
                m.relevance.unwrap_or(0.0),
                safe(&m.content)
            );
        }
    }
    out
}
