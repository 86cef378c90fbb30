//! `hearsay inspect`: one NPC's memories as its brain would have seen them — kind,
//! importance, when made and last recalled, how often recalled, retention, archived or
//! not — at the end of a run or at the start of any tick, and for a query the relevance,
//! recency and total score of each, with what recall would have returned.
//!
//! The state at tick T is the store's memories made before T, with "last recalled" and
//! the recall count rebuilt from the event log's recalls before T, and archived if they
//! were forgotten by the start of T. Scores come from the same functions recall uses
//! (best-chunk cosine, [`Scoring`], the two-step shortlist-then-rank), so for the query
//! an NPC recalled with (recorded as `recall_query` in `llm.jsonl`) they equal, bit for
//! bit, what its brain was given. Under `eventual` visibility a memory embedded after T
//! is scored as if it had been embedded at T.
//!
//! Over 600 lines with its tests (about 160) and its table for a terminal.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hearsay_core::events::{MoveLine, StayLine, TalkLine};
use hearsay_core::{MemoryId, NpcId, SimEvent};
use hearsay_memory::embed::dot;
use hearsay_memory::index::{best_chunk_similarities, shortlist_by_best_chunk};
use hearsay_memory::scoring::{Candidate, rank};
use hearsay_memory::{Forgetting, Scoring, StoredMemory, VECTOR_DIMS, VectorSpace, fit_dims};
use serde::Serialize;
use unicode_width::UnicodeWidthStr;

use crate::RunError;
use crate::providers;
use crate::scenario::EmbedderSpec;
use crate::source::RunSource;

/// What `hearsay inspect` was asked.
#[derive(Clone, Debug, Default)]
pub struct InspectOptions {
    /// A directory `hearsay run` wrote (`run.json`, `events.jsonl`, the store).
    pub dir: PathBuf,
    /// The NPC, by name.
    pub npc: String,
    /// Score every memory against this text.
    pub query: Option<String>,
    /// The state at the start of this tick (default: after the last completed tick).
    pub at_tick: Option<u64>,
    /// Show archived memories too.
    pub all: bool,
    /// Also list, tick by tick over this range (both ends included), whether the NPC
    /// thought and why, or carried on.
    pub thinking: Option<(u64, u64)>,
    /// PostgreSQL URL, for runs kept in PostgreSQL.
    pub database_url: Option<String>,
}

/// What an NPC did with its brain at one tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThinkRow {
    /// The tick.
    pub tick: u64,
    /// `talk`, `whisper`, `move` or `stay`: what it did.
    pub action: String,
    /// Whether its brain was asked (always under `every_tick`).
    pub thought: bool,
    /// Why it was woken (`on_change`; empty under `every_tick` and when it continued).
    pub wake: Vec<String>,
    /// Memories recalled for the decision.
    pub recalled: usize,
}

/// How a memory scores against the query.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct QueryScore {
    /// Cosine similarity of its best chunk to the query.
    pub relevance: f32,
    /// `decay^(ticks since last recalled)`.
    pub recency: f64,
    /// `importance / 10`.
    pub importance: f64,
    /// `w_rel·relevance + w_rec·recency + w_imp·importance`.
    pub score: f64,
    /// Its place in what recall would return (1 = first), if it would be returned.
    pub recalled_rank: Option<usize>,
}

/// One memory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InspectRow {
    /// The memory id, as `memory` lines in `events.jsonl` give it.
    pub id: u64,
    /// `seed`, `observation`, `conversation` or `reflection`.
    pub kind: String,
    /// 1–10.
    pub importance: u8,
    /// The tick it was formed (0 for seed memories).
    pub tick: u64,
    /// Tick last recalled (the tick made, if never).
    pub last_recalled: u64,
    /// Ticks it was recalled in.
    pub recalls: u32,
    /// Retention at the tick inspected (1 for core memories).
    pub retention: f64,
    /// A core memory never fades: its retention stays 1 and it is never archived.
    pub core: bool,
    /// The tick it was archived at, if it was by the tick inspected.
    pub archived: Option<u64>,
    /// Chunks embedded (0: not embedded).
    pub chunks: usize,
    /// The speaker it was heard from.
    pub from: Option<String>,
    /// For a reflection: the memories it cites.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<u64>,
    /// The memory's full text, as stored.
    pub content: String,
    /// Against the query, when one was given (archived memories are scored but never
    /// recalled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<QueryScore>,
}

/// The answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InspectReport {
    /// The inspected NPC's name, as the run's roster spells it.
    pub npc: String,
    /// The state shown is the one at the start of this tick.
    pub tick: u64,
    /// The query, if any.
    pub query: Option<String>,
    /// Memories recall returns per tick.
    pub recall_k: usize,
    /// What recall would return for the query, best first.
    pub recalled: Vec<u64>,
    /// Memories made before `tick`.
    pub total: usize,
    /// Of those, archived by `tick`.
    pub archived: usize,
    /// The rows shown: by score with a query, else by id; archived ones only with
    /// `--all`.
    pub memories: Vec<InspectRow>,
    /// When `tick` ran under an earlier scenario than `scenario.toml` (a fork with
    /// `--set`): until which tick it was in force, and how it differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub earlier_scenario: Option<EarlierStage>,
    /// With a query: the vector space it was embedded in (the scenario's embedder), the
    /// only one scored — see [`crate::inspect()`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
    /// With a query: memories left unscored because their vectors are of another model
    /// (or width), by model. Never compared with the query.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub other_models: BTreeMap<String, usize>,
    /// With `--thinking A..B`: the NPC's ticks in that range, thought or continued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Vec<ThinkRow>>,
}

/// A query for [`build_report`]: its text, its vector, and the space the vector is in.
#[derive(Clone, Debug)]
pub struct Query {
    /// The text that was embedded (`--query`, or the question for `ask`).
    pub text: String,
    /// Embedded and fitted to [`VECTOR_DIMS`].
    pub vector: Vec<f32>,
    /// The model that embedded it, at the width it answered with.
    pub space: VectorSpace,
}

/// A scenario that was in force before `scenario.toml` (kept in `run.json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EarlierStage {
    /// The first tick it was no longer in force.
    pub until_tick: u64,
    /// Its lines that differ from `scenario.toml` (`- …`) and theirs (`+ …`).
    pub diff: Vec<String>,
}

/// Inspects one NPC of the run in `opts.dir`.
pub fn inspect(opts: &InspectOptions) -> Result<InspectReport, RunError> {
    let source = RunSource::open_dir_for(
        &opts.dir,
        opts.database_url.as_deref(),
        Some(opts.npc.as_str()),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let mut report = runtime.block_on(inspect_source(
        &source,
        &opts.npc,
        opts.query.as_deref(),
        opts.at_tick,
        opts.all,
        None,
    ))?;
    if let Some(range) = opts.thinking {
        report.thinking = Some(thinking(&source, &report.npc, range)?);
    }
    Ok(report)
}

/// The NPC's ticks `from..=to` (cut to the ticks the run completed) from the event log:
/// what it did, whether it thought and why.
pub fn thinking(
    source: &RunSource,
    npc: &str,
    (from, to): (u64, u64),
) -> Result<Vec<ThinkRow>, RunError> {
    let Some(events) = &source.events else {
        return Err(RunError::Refused(format!(
            "{} has no event log here, and --thinking reads it; read the run directory instead",
            source.label
        )));
    };
    if from > to {
        return Err(RunError::Refused(format!(
            "--thinking {from}..{to}: the first tick comes after the last"
        )));
    }
    let mut rows = Vec::new();
    // One pass through tick `to`; the lines before `from` are only read past.
    events.each_line(to.saturating_add(1), |tick, line| -> Result<(), RunError> {
        if tick < from {
            return Ok(());
        }
        let Ok(event) = serde_json::from_str::<SimEvent>(line) else {
            return Ok(());
        };
        let (action, who, recalled, wake, continued) = match event {
            SimEvent::Talk(TalkLine {
                npc,
                recalled,
                wake,
                whisper,
                ..
            }) => (
                if whisper { "whisper" } else { "talk" },
                npc,
                recalled,
                wake,
                false,
            ),
            SimEvent::Move(MoveLine {
                npc,
                recalled,
                wake,
                continued,
                ..
            }) => ("move", npc, recalled, wake, continued),
            SimEvent::Stay(StayLine {
                npc,
                recalled,
                wake,
                continued,
                ..
            }) => ("stay", npc, recalled, wake, continued),
            _ => return Ok(()),
        };
        if who == npc {
            rows.push(ThinkRow {
                tick,
                action: action.to_owned(),
                thought: !continued,
                wake: wake.iter().map(|r| r.as_str().to_owned()).collect(),
                recalled: recalled.len(),
            });
        }
        Ok(())
    })?;
    Ok(rows)
}

/// Inspects one NPC of `source` at the start of tick `at_tick` (default: the end); `k`
/// overrides how many memories recall returns (default: the scenario's `recall_k`).
pub async fn inspect_source(
    source: &RunSource,
    npc: &str,
    query: Option<&str>,
    at_tick: Option<u64>,
    all: bool,
    k: Option<usize>,
) -> Result<InspectReport, RunError> {
    let npc = source.npc(npc)?;
    let tick = source.tick(at_tick, "--at-tick")?;
    let stored = source.memories_of(Some(npc)).await?;
    let recalls = source.recalls_at(tick, npc, &stored)?;
    // A fork with --set ran its earlier ticks under another scenario: score and fade by
    // the settings in force at the tick inspected.
    let scenario = source.scenario_at(tick)?;
    let query = match query {
        None => None,
        Some(text) => Some(embed_query(&source.scenario, text).await?),
    };
    if let Some(q) = &query {
        refuse_other_space(&source.label, &stored, &q.space)?;
    }
    let mut report = build_report(
        &source.names,
        npc,
        tick,
        stored,
        &recalls,
        &scenario.memory.forgetting,
        &scenario.memory.scoring,
        k.unwrap_or(scenario.memory.recall_k),
        query,
        all,
    );
    report.earlier_scenario = source.stage_at(tick);
    Ok(report)
}

/// Refuses to score a query against memories whose vectors are all of another model
/// than the query's: the store was embedded by another embedder than the scenario now
/// names. (Memories of several spaces — a run interrupted while re-embedding, or a store
/// from before hearsay kept one space — are scored in the query's space only, and the
/// report says how many were left out.)
fn refuse_other_space(
    label: &str,
    stored: &[StoredMemory],
    space: &VectorSpace,
) -> Result<(), RunError> {
    let mut others: BTreeMap<String, usize> = BTreeMap::new();
    let mut same = 0usize;
    for s in stored.iter().filter(|s| !s.vectors.is_empty()) {
        match &s.space {
            Some(v) if space.holds(&v.model, v.dims.unwrap_or(0)) => same += 1,
            Some(v) => *others.entry(v.to_string()).or_default() += 1,
            None => {}
        }
    }
    if same > 0 || others.is_empty() {
        return Ok(());
    }
    let found: Vec<String> = others
        .iter()
        .map(|(model, n)| format!("{n} by {model}"))
        .collect();
    Err(RunError::Refused(format!(
        "{label}: this NPC's memories were embedded by another model ({}) than the scenario's \
         embedder, {space}: \
         a query embedded by one model cannot be compared with another model's vectors. \
         Fork the run with the embedder it has now (hearsay fork RUN --at-tick T --out NEW \
         re-embeds every memory before its first tick), or use the embedder the run was \
         embedded with",
        found.join(", ")
    )))
}

async fn embed_query(scenario: &crate::Scenario, text: &str) -> Result<Query, RunError> {
    let keys = match &scenario.memory.embedder {
        EmbedderSpec::Hashing => providers::Keys::default(),
        EmbedderSpec::Openai { .. } => providers::load_embedder_keys(scenario)?,
    };
    let embedder = providers::embedder(&scenario.memory.embedder, 1, &keys)?.embedder;
    let mut vectors = embedder
        .embed(&[text.to_owned()])
        .await
        .map_err(|e| RunError::Provider(format!("embedding the query failed: {e}")))?;
    let vector = vectors
        .pop()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| RunError::Provider("the embedder returned no vector".into()))?;
    Ok(Query {
        text: text.to_owned(),
        space: VectorSpace::new(embedder.model(), Some(vector.len())),
        vector: fit_dims(vector, VECTOR_DIMS),
    })
}

/// The report from the stored memories and the recalls before `tick` (pure: the tests
/// and the command share it).
#[expect(
    clippy::too_many_arguments,
    reason = "every input of the report, spelled out"
)]
pub fn build_report(
    names: &[String],
    npc: NpcId,
    tick: u64,
    stored: Vec<StoredMemory>,
    recalls: &BTreeMap<MemoryId, (u64, u32)>,
    policy: &Forgetting,
    scoring: &Scoring,
    recall_k: usize,
    query: Option<Query>,
    all: bool,
) -> InspectReport {
    // The memories as they were at the start of `tick`.
    let mut state: Vec<StoredMemory> = stored
        .into_iter()
        .filter(|s| {
            s.meta.memory.tick < tick || s.meta.memory.kind == hearsay_core::MemoryKind::Seed
        })
        .map(|mut s| {
            let (last, count) = recalls
                .get(&s.meta.memory.id)
                .copied()
                .unwrap_or((s.meta.memory.tick, 0));
            s.meta.last_recalled = last.max(s.meta.memory.tick);
            s.meta.recalls = count;
            s.meta.forgotten = s.meta.forgotten.filter(|&f| f <= tick);
            s
        })
        .collect();
    state.sort_by_key(|s| s.meta.memory.id);
    // Only vectors of the query's space are compared: the others count as not embedded.
    let mut other_models: BTreeMap<String, usize> = BTreeMap::new();
    if let Some(q) = &query {
        for s in state.iter_mut().filter(|s| !s.vectors.is_empty()) {
            let held = s
                .space
                .as_ref()
                .is_some_and(|v| q.space.holds(&v.model, v.dims.unwrap_or(0)));
            if !held {
                let name = s
                    .space
                    .as_ref()
                    .map_or("an unknown model".into(), |v| v.to_string());
                *other_models.entry(name).or_default() += 1;
                s.vectors.clear();
            }
        }
    }

    let mut scores: BTreeMap<MemoryId, QueryScore> = BTreeMap::new();
    let mut recalled = Vec::new();
    if let Some(Query { vector: q, .. }) = &query {
        let sims = best_chunk_similarities(
            state
                .iter()
                .flat_map(|s| s.vectors.iter().map(|v| (s.meta.memory.id, dot(q, v)))),
        );
        for s in &state {
            let m = &s.meta.memory;
            let Some(&relevance) = sims.get(&m.id) else {
                continue;
            };
            let recency = scoring.recency(tick.saturating_sub(s.meta.last_recalled));
            scores.insert(
                m.id,
                QueryScore {
                    relevance,
                    recency,
                    importance: f64::from(m.importance) / 10.0,
                    score: scoring.score_with(relevance, m.importance, recency),
                    recalled_rank: None,
                },
            );
        }
        // What recall does: the live, embedded memories nearest by best chunk, then
        // ranked.
        let live = state
            .iter()
            .filter(|s| s.meta.forgotten.is_none() && !s.vectors.is_empty())
            .flat_map(|s| s.vectors.iter().map(|v| (s.meta.memory.id, dot(q, v))));
        let by_id: BTreeMap<MemoryId, &StoredMemory> =
            state.iter().map(|s| (s.meta.memory.id, s)).collect();
        let shortlist = shortlist_by_best_chunk(live, scoring.candidates.max(recall_k));
        let candidates: Vec<Candidate> = shortlist
            .into_iter()
            .filter_map(|(similarity, id)| {
                by_id.get(&id).map(|s| Candidate {
                    memory: s.meta.memory.clone(),
                    similarity,
                    last_recalled: s.meta.last_recalled,
                })
            })
            .collect();
        for (i, r) in rank(candidates, tick, recall_k, scoring).iter().enumerate() {
            recalled.push(r.memory.id.0);
            if let Some(score) = scores.get_mut(&r.memory.id) {
                score.recalled_rank = Some(i + 1);
            }
        }
    }

    let total = state.len();
    let archived = state.iter().filter(|s| s.meta.forgotten.is_some()).count();
    let mut rows: Vec<InspectRow> = state
        .into_iter()
        .filter(|s| all || s.meta.forgotten.is_none())
        .map(|s| {
            let m = s.meta.memory.clone();
            InspectRow {
                id: m.id.0,
                kind: m.kind.as_str().to_owned(),
                importance: m.importance,
                tick: m.tick,
                last_recalled: s.meta.last_recalled,
                recalls: s.meta.recalls,
                retention: s.meta.retention(policy, tick),
                core: m.core,
                archived: s.meta.forgotten,
                chunks: s.vectors.len(),
                from: m.source.and_then(|n| names.get(n.index()).cloned()),
                evidence: m.evidence.iter().map(|e| e.0).collect(),
                content: m.content.to_string(),
                query: scores.get(&m.id).copied(),
            }
        })
        .collect();
    if query.is_some() {
        rows.sort_by(|a, b| {
            let sa = a.query.map_or(f64::NEG_INFINITY, |q| q.score);
            let sb = b.query.map_or(f64::NEG_INFINITY, |q| q.score);
            sb.total_cmp(&sa).then(a.id.cmp(&b.id))
        });
    }
    InspectReport {
        npc: names.get(npc.index()).cloned().unwrap_or_default(),
        tick,
        space: query.as_ref().map(|q| q.space.to_string()),
        query: query.map(|q| q.text),
        recall_k,
        recalled,
        total,
        archived,
        memories: rows,
        earlier_scenario: None,
        other_models,
        thinking: None,
    }
}

fn cut(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut out = String::new();
    for c in text.chars() {
        if out.width() + c.to_string().width() > width.saturating_sub(1) {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// The report as a table for a terminal.
pub fn table(report: &InspectReport, path: &Path) -> String {
    let mut out = String::new();
    let hidden = if report.memories.iter().any(|m| m.archived.is_some()) || report.archived == 0 {
        String::new()
    } else {
        " (--all shows them)".to_owned()
    };
    let _ = writeln!(
        out,
        "{} in {} at the start of tick {}: {} memories, {} archived{hidden}",
        crate::terminal::safe(&report.npc),
        crate::terminal::safe(&path.display().to_string()),
        report.tick,
        report.total,
        report.archived
    );
    if let Some(stage) = &report.earlier_scenario {
        let _ = writeln!(
            out,
            "tick {} ran under an earlier scenario (kept in run.json, in force until tick {}), \
             which differs from scenario.toml:",
            report.tick, stage.until_tick
        );
        for line in &stage.diff {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(space) = &report.space {
        let _ = write!(
            out,
            "scored in the vector space of {}",
            crate::terminal::safe(space)
        );
        if report.other_models.is_empty() {
            let _ = writeln!(out);
        } else {
            let left: Vec<String> = report
                .other_models
                .iter()
                .map(|(model, n)| format!("{n} of {}", crate::terminal::safe(model)))
                .collect();
            let _ = writeln!(
                out,
                "; memories embedded by another model are not compared (unscored): {}",
                left.join(", ")
            );
        }
    }
    if let Some(q) = &report.query {
        let ids: Vec<String> = report.recalled.iter().map(|i| format!("#{i}")).collect();
        let _ = writeln!(
            out,
            "query {q:?}: recall would return {} (k = {})",
            if ids.is_empty() {
                "nothing".to_owned()
            } else {
                ids.join(", ")
            },
            report.recall_k
        );
    }
    let scored = report.query.is_some();
    let _ = write!(
        out,
        "{:>6} {:<12} {:>3} {:>5} {:>8} {:>4} {:>9} {:>8}",
        "id", "kind", "imp", "tick", "recalled", "n", "retention", "archived"
    );
    if scored {
        let _ = write!(
            out,
            " {:>9} {:>7} {:>6} {:>4}",
            "relevance", "recency", "score", "rank"
        );
    }
    let _ = writeln!(out, "  content");
    for m in &report.memories {
        let retention = if m.core {
            "core".to_owned()
        } else {
            format!("{:.3}", m.retention)
        };
        let archived = m.archived.map_or("-".to_owned(), |t| format!("@{t}"));
        let _ = write!(
            out,
            "{:>6} {:<12} {:>3} {:>5} {:>8} {:>4} {:>9} {:>8}",
            m.id, m.kind, m.importance, m.tick, m.last_recalled, m.recalls, retention, archived
        );
        if scored {
            match m.query {
                Some(q) => {
                    let _ = write!(
                        out,
                        " {:>9.4} {:>7.4} {:>6.3} {:>4}",
                        q.relevance,
                        q.recency,
                        q.score,
                        q.recalled_rank.map_or("-".to_owned(), |r| r.to_string())
                    );
                }
                None => {
                    let _ = write!(out, " {:>9} {:>7} {:>6} {:>4}", "-", "-", "-", "-");
                }
            }
        }
        let _ = writeln!(out, "  {}", crate::terminal::safe(&cut(&m.content, 60)));
    }
    if let Some(rows) = &report.thinking {
        let thought = rows.iter().filter(|r| r.thought).count();
        let _ = writeln!(
            out,
            "\nthinking: {thought} of {} ticks thought, {} carried on",
            rows.len(),
            rows.len() - thought
        );
        for r in rows {
            let how = match (r.thought, r.wake.is_empty()) {
                (false, _) => "continued".to_owned(),
                (true, true) => "thought (every tick)".to_owned(),
                (true, false) => format!("thought: {}", r.wake.join(", ")),
            };
            let _ = writeln!(
                out,
                "{:>6}  {:<5} {how}{}",
                r.tick,
                r.action,
                if r.thought {
                    format!(" (recalled {})", r.recalled)
                } else {
                    String::new()
                }
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearsay_core::{MemoryKind, MemoryRecord};
    use hearsay_memory::MemoryMeta;

    fn stored(
        id: u64,
        tick: u64,
        importance: u8,
        axis: usize,
        forgotten: Option<u64>,
    ) -> StoredMemory {
        let mut v = vec![0.0; VECTOR_DIMS];
        v[axis] = 1.0;
        StoredMemory {
            meta: MemoryMeta {
                memory: MemoryRecord {
                    id: MemoryId(id),
                    npc: NpcId(0),
                    kind: MemoryKind::Conversation,
                    content: format!("memory {id}").into(),
                    importance,
                    tick,
                    source: None,
                    core: false,
                    evidence: Vec::new(),
                    place: Default::default(),
                },
                last_recalled: 99,
                recalls: 9,
                forgotten,
                embedded: true,
            },
            vectors: vec![v],
            space: Some(VectorSpace::new("unit", Some(VECTOR_DIMS))),
        }
    }

    fn query(vector: Vec<f32>) -> Query {
        Query {
            text: "q".into(),
            vector,
            space: VectorSpace::new("unit", Some(VECTOR_DIMS)),
        }
    }

    #[test]
    fn only_the_querys_space_is_scored_and_a_store_of_another_is_refused() {
        let names = vec!["Bob".to_owned()];
        let mut other = stored(2, 0, 8, 1, None);
        other.space = Some(VectorSpace::new("hashing-v1", Some(VECTOR_DIMS)));
        let rows = vec![
            stored(1, 0, 4, 2, None),
            other.clone(),
            stored(3, 0, 4, 3, None),
        ];
        let mut q = vec![0.0; VECTOR_DIMS];
        q[1] = 1.0;
        let report = build_report(
            &names,
            NpcId(0),
            5,
            rows.clone(),
            &BTreeMap::new(),
            &Forgetting::default(),
            &Scoring::default(),
            5,
            Some(query(q)),
            false,
        );
        // Memory 2 matches the query exactly, but its vector is another model's.
        assert_eq!(report.recalled, vec![1, 3]);
        assert_eq!(
            report.other_models,
            BTreeMap::from([("hashing-v1 (1536 dimensions)".to_owned(), 1)])
        );
        let two = report.memories.iter().find(|m| m.id == 2).expect("row");
        assert_eq!((two.chunks, two.query), (0, None));
        let text = table(&report, Path::new("run"));
        assert!(
            text.contains("scored in the vector space of unit (1536 dimensions); memories embedded by another model are not compared (unscored): 1 of hashing-v1 (1536 dimensions)"),
            "{text}"
        );
        let unit = VectorSpace::new("unit", Some(VECTOR_DIMS));
        assert!(
            refuse_other_space("run", &rows, &unit).is_ok(),
            "mixed: scored apart"
        );
        let refused = refuse_other_space("run", &[other], &unit);
        assert!(
            matches!(&refused, Err(RunError::Refused(m)) if m.contains("1 by hashing-v1")),
            "{refused:?}"
        );
    }

    #[test]
    fn the_state_at_a_tick_comes_from_the_log_and_archives_hide() {
        let names = vec!["Bob".to_owned()];
        let rows = vec![
            stored(1, 0, 8, 1, None),
            stored(2, 3, 4, 1, Some(9)),
            stored(3, 8, 8, 2, None),
        ];
        let recalls: BTreeMap<MemoryId, (u64, u32)> = [(MemoryId(1), (5, 2))].into_iter().collect();
        let mut q = vec![0.0; VECTOR_DIMS];
        q[1] = 1.0;
        let policy = Forgetting::default();
        let report = build_report(
            &names,
            NpcId(0),
            8,
            rows.clone(),
            &recalls,
            &policy,
            &Scoring::default(),
            5,
            Some(query(q.clone())),
            false,
        );
        assert_eq!(report.total, 2, "memory 3 is made at tick 8");
        assert_eq!(report.archived, 0, "memory 2 is archived only at 9");
        assert_eq!(report.recalled, vec![1, 2]);
        let first = &report.memories[0];
        assert_eq!((first.id, first.last_recalled, first.recalls), (1, 5, 2));
        let expected = policy.retention(8, 2, 3);
        assert_eq!(first.retention, expected);
        assert_eq!(
            first.query.map(|s| s.score),
            Some(Scoring::default().score(1.0, 8, 3))
        );

        let later = build_report(
            &names,
            NpcId(0),
            10,
            rows,
            &recalls,
            &policy,
            &Scoring::default(),
            5,
            Some(query(q)),
            false,
        );
        assert_eq!((later.total, later.archived), (3, 1));
        assert_eq!(
            later.recalled,
            vec![1, 3],
            "archived memories are never recalled"
        );
        assert!(
            later.memories.iter().all(|m| m.id != 2),
            "hidden without --all"
        );
        let text = table(&later, Path::new("run"));
        assert!(
            text.contains(
                "Bob in run at the start of tick 10: 3 memories, 1 archived (--all shows them)"
            ),
            "{text}"
        );
    }
}
