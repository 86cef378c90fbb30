//! Facts by meaning, and the words of every hop.
//!
//! A fact with a `statement` is known by whoever holds a memory whose vector's cosine
//! with the statement's vector (on the run's embedder) reaches `similarity` — or, between
//! `candidate` and `similarity`, whose words the fact's `judge` brain says state it. The
//! vectors are backfilled off the tick thread, at times no seed decides, so the kernel
//! cannot decide these facts tick by tick; the run decides them when it ends, from what
//! the run directory holds, and writes the result beside the event log:
//!
//! - `facts.json` ([`FACTS_FILE`]): each statement's vector per embedding model (embedded
//!   once, before tick 0) and the `learned` lines of every fact with a statement, in the
//!   event log's format — the [`Story`] reads them in place of the
//!   kernel's lines for those facts, so the summary, the fact tables, the report,
//!   expectations, sweeps, `watch` and MCP see a fact by meaning as they see any other;
//! - `judge.jsonl` ([`JUDGE_FILE`]): the judge's tape, one answer per distinct (fact,
//!   words), asked once: every later reader (and `hearsay replay`, which recomputes the
//!   spread and compares) takes the answer from the tape, with no model.
//!
//! The words per hop are computed here too, for every fact: each knower's depth along the
//! chain of tellers and the similarity of the words it learned from to the statement (or,
//! for a fact known by substrings, to the words its chain started from).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write as _};
use std::path::Path;

use hearsay_core::events::LearnedLine;
use hearsay_core::{FactBook, FactSpec, MemoryId, MemoryKind, MemoryRecord, SimEvent};
use hearsay_memory::{MemoryMeta, StoredMemory};
use serde::{Deserialize, Serialize};

use crate::RunError;
use crate::scenario::Scenario;
use crate::story::{Root, Story};

/// Statement vectors and the `learned` lines of facts decided by meaning.
pub const FACTS_FILE: &str = "facts.json";
/// The judge's answers, one JSON line each.
pub const JUDGE_FILE: &str = "judge.jsonl";
/// Most lines of `judge.jsonl` read back (every distinct candidate of every fact once).
pub const JUDGE_LINES_MAX: usize = 1_000_000;

/// `facts.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactsFile {
    /// Format version (1).
    pub version: u32,
    /// Each fact's statement vector, per embedding model that ran.
    pub statements: Vec<StatementVector>,
    /// The embedding model whose vectors decided `learned`.
    #[serde(default)]
    pub model: String,
    /// The `learned` lines of every fact with a statement, by tick, then memory id.
    pub learned: Vec<SimEvent>,
    /// Memories of the run without a vector when the spread was decided: a fact by
    /// meaning could not see them.
    #[serde(default)]
    pub unembedded: u64,
}

/// A statement embedded by one model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatementVector {
    /// The fact's name.
    pub fact: String,
    /// The statement as embedded (a fork that changed it embeds it again).
    pub statement: String,
    /// The embedding model, as the store records it with memory vectors.
    pub model: String,
    /// The vector, fitted and normalised as memory vectors are.
    pub vector: Vec<f32>,
}

impl FactsFile {
    /// `facts.json` of `dir`, or an empty one when there is none.
    pub fn read(dir: &Path) -> Result<FactsFile, RunError> {
        let path = dir.join(FACTS_FILE);
        if !path.exists() {
            return Ok(FactsFile {
                version: 1,
                ..FactsFile::default()
            });
        }
        let text = crate::rundir::read_small(&path).map_err(|source| RunError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| RunError::RunDir {
            path,
            problem: format!("is not a facts file hearsay wrote: {e}"),
        })
    }

    /// Writes it into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), RunError> {
        let path = dir.join(FACTS_FILE);
        let json = serde_json::to_vec(self).map_err(|e| RunError::RunDir {
            path: path.clone(),
            problem: format!("cannot encode the facts file: {e}"),
        })?;
        crate::rundir::write_file(&path, &json)
    }

    /// The vector of `spec`'s statement made by `model`.
    pub fn statement(&self, spec: &FactSpec, model: &str) -> Option<&[f32]> {
        let meaning = spec.meaning.as_ref()?;
        self.statements
            .iter()
            .find(|s| s.fact == spec.name && s.model == model && s.statement == meaning.statement)
            .map(|s| s.vector.as_slice())
    }

    /// The facts of `scenario` whose statement has no vector of `model` yet, with it.
    pub fn missing<'a>(&self, scenario: &'a Scenario, model: &str) -> Vec<(&'a str, &'a str)> {
        scenario
            .facts
            .iter()
            .filter(|f| f.meaning.is_some() && self.statement(f, model).is_none())
            .filter_map(|f| Some((f.name.as_str(), f.meaning.as_ref()?.statement.as_str())))
            .collect()
    }
}

/// Whether any fact of `scenario` is given by meaning.
pub fn by_meaning(scenario: &Scenario) -> bool {
    scenario.facts.iter().any(|f| f.meaning.is_some())
}

/// One answer of a judge, as `judge.jsonl` keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judgment {
    /// The fact asked about.
    pub fact: String,
    /// The memory's words put to the judge (every memory with the same words shares it).
    pub words: String,
    /// The words' cosine with the statement, between the fact's `candidate` and
    /// `similarity`.
    pub cosine: f64,
    /// The judging brain's scenario name.
    pub brain: String,
    /// Its implementation (`heuristic`, `openai`).
    pub provider: String,
    /// The verdict; `null` when the judge failed (the words then do not teach the fact).
    pub answer: Option<bool>,
    /// The response as received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// Why the judge failed, or why another brain answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Wall-clock time of the call, in milliseconds (this file is not hashed).
    pub latency_ms: f64,
}

/// The judge's tape of a run: answers by (fact, words).
#[derive(Clone, Debug, Default)]
pub struct JudgeTape {
    answers: BTreeMap<(String, String), Option<bool>>,
    /// Every line, in file order.
    pub lines: Vec<Judgment>,
}

impl JudgeTape {
    /// `judge.jsonl` of `dir` (empty when there is none).
    pub fn read(dir: &Path) -> Result<JudgeTape, RunError> {
        let path = dir.join(JUDGE_FILE);
        let mut tape = JudgeTape::default();
        if !path.exists() {
            return Ok(tape);
        }
        let file = std::fs::File::open(&path).map_err(|source| RunError::Io {
            path: path.clone(),
            source,
        })?;
        for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|source| RunError::Io {
                path: path.clone(),
                source,
            })?;
            if i >= JUDGE_LINES_MAX {
                return Err(RunError::RunDir {
                    path,
                    problem: format!("holds more than {JUDGE_LINES_MAX} answers"),
                });
            }
            let j: Judgment = serde_json::from_str(&line).map_err(|e| RunError::RunDir {
                path: path.clone(),
                problem: format!("line {} is not a judge's answer: {e}", i + 1),
            })?;
            tape.add(j);
        }
        Ok(tape)
    }

    /// Takes an answer (the first for a (fact, words) stands).
    pub fn add(&mut self, j: Judgment) {
        self.answers
            .entry((j.fact.clone(), j.words.clone()))
            .or_insert(j.answer);
        self.lines.push(j);
    }

    /// The recorded answer for `words` about `fact`: `None` if never asked.
    pub fn answer(&self, fact: &str, words: &str) -> Option<Option<bool>> {
        self.answers
            .get(&(fact.to_owned(), words.to_owned()))
            .copied()
    }

    /// Appends `new` to `judge.jsonl` of `dir`.
    pub fn append(dir: &Path, new: &[Judgment]) -> Result<(), RunError> {
        if new.is_empty() {
            return Ok(());
        }
        let path = dir.join(JUDGE_FILE);
        let mut file = crate::rundir::open_append(&path)?;
        let mut buf = Vec::new();
        for j in new {
            serde_json::to_writer(&mut buf, j).map_err(|e| RunError::RunDir {
                path: path.clone(),
                problem: format!("cannot encode a judge's answer: {e}"),
            })?;
            buf.push(b'\n');
        }
        file.write_all(&buf)
            .and_then(|()| file.sync_data())
            .map_err(|source| RunError::Io { path, source })
    }
}

/// The largest cosine between any chunk of a memory and `target` (vectors are unit
/// length, so a dot product); `None` for a memory without vectors.
pub fn cosine(chunks: &[Vec<f32>], target: &[f32]) -> Option<f64> {
    chunks
        .iter()
        .map(|v| {
            v.iter()
                .zip(target)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum::<f64>()
        })
        .reduce(f64::max)
}

/// The largest cosine between any chunk of `a` and any chunk of `b`.
pub fn cosine_between(a: &[Vec<f32>], b: &[Vec<f32>]) -> Option<f64> {
    b.iter().filter_map(|t| cosine(a, t)).reduce(f64::max)
}

/// How each memory stands against each fact with a statement: its cosine (when it has a
/// vector) and whether it teaches the fact.
pub struct MeaningMatch<'a> {
    specs: &'a [FactSpec],
    statements: Vec<Option<&'a [f32]>>,
    judged: &'a JudgeTape,
}

impl<'a> MeaningMatch<'a> {
    /// The matcher for `specs`, with statement vectors of `model` from `facts`.
    pub fn new(
        specs: &'a [FactSpec],
        facts: &'a FactsFile,
        model: &str,
        judged: &'a JudgeTape,
    ) -> Self {
        Self {
            statements: specs.iter().map(|s| facts.statement(s, model)).collect(),
            specs,
            judged,
        }
    }

    /// Whether memory `m` (with `vectors`) teaches fact `idx`: by its substrings, by a
    /// cosine at or above `similarity`, or by the judge's recorded yes.
    pub fn teaches(&self, idx: usize, m: &MemoryRecord, vectors: &[Vec<f32>]) -> bool {
        let spec = &self.specs[idx];
        if spec.matches(&m.content) {
            return true;
        }
        let (Some(meaning), Some(statement)) = (&spec.meaning, self.statements[idx]) else {
            return false;
        };
        let Some(cos) = cosine(vectors, statement) else {
            return false;
        };
        if cos >= meaning.similarity {
            return true;
        }
        meaning.candidate.is_some_and(|c| cos >= c)
            && self.judged.answer(&spec.name, &m.content) == Some(Some(true))
    }

    /// Memories the judge has yet to answer for: (fact index, words, cosine), once per
    /// distinct (fact, words), in memory-id order.
    pub fn unjudged(&self, memories: &[StoredMemory]) -> Vec<(usize, String, f64)> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for m in memories {
            for (idx, spec) in self.specs.iter().enumerate() {
                let (Some(meaning), Some(statement)) = (&spec.meaning, self.statements[idx]) else {
                    continue;
                };
                let (Some(low), Some(_)) = (meaning.candidate, &meaning.judge) else {
                    continue;
                };
                let content = &m.meta.memory.content;
                if spec.matches(content) {
                    continue;
                }
                let Some(cos) = cosine(&m.vectors, statement) else {
                    continue;
                };
                if cos >= low
                    && cos < meaning.similarity
                    && self.judged.answer(&spec.name, content).is_none()
                    && seen.insert((idx, content.to_string()))
                {
                    out.push((idx, content.to_string(), cos));
                }
            }
        }
        out
    }
}

/// Rebuilds the fact book from memories in id order, with the kernel's rules of who
/// taught whom (the first memory that teaches a fact teaches it, by its speaker; a
/// reflection by the speaker of the first cited memory that teaches it, else of the first
/// cited memory someone said); `teaches(idx, memory)` decides what teaches what.
pub fn rebuild(
    specs: &[FactSpec],
    memories: &[&MemoryRecord],
    teaches: impl Fn(usize, &MemoryRecord) -> bool,
) -> (FactBook, Vec<(usize, MemoryId, Option<MemoryId>)>) {
    let by_id: BTreeMap<MemoryId, &MemoryRecord> = memories.iter().map(|m| (m.id, *m)).collect();
    let mut book = FactBook::new(specs.to_vec());
    let mut learned = Vec::new();
    for m in memories {
        let got = book.observe_where(
            m,
            |idx, _| teaches(idx, m),
            |idx| {
                if m.kind != MemoryKind::Reflection {
                    return (m.source, None);
                }
                let cited: Vec<&MemoryRecord> = m
                    .evidence
                    .iter()
                    .filter_map(|id| by_id.get(id).copied())
                    .collect();
                cited
                    .iter()
                    .find(|e| teaches(idx, e))
                    .or_else(|| cited.iter().find(|e| e.source.is_some()))
                    .map_or((None, None), |e| (e.source, Some(e.id)))
            },
        );
        learned.extend(got.into_iter().map(|(idx, via)| (idx, m.id, via)));
    }
    (book, learned)
}

/// Who knew each tracked fact by its substrings, from when and from whom, rebuilt from
/// the memories' metadata alone.
pub fn facts_from_memories(scenario: &Scenario, memories: &[MemoryMeta]) -> FactBook {
    let records: Vec<&MemoryRecord> = memories.iter().map(|m| &m.memory).collect();
    rebuild(&scenario.facts, &records, |idx, m| {
        scenario.facts[idx].matches(&m.content)
    })
    .0
}

/// Who knew each tracked fact: by substrings from the memories' metadata, and — for a
/// fact with a statement — from the `learned` lines the run decided when it ended
/// (`facts.json` in `dir`; none before the run ends, or without a run directory).
pub fn fact_book(
    scenario: &Scenario,
    memories: &[MemoryMeta],
    dir: Option<&Path>,
) -> Result<FactBook, RunError> {
    let mut book = facts_from_memories(scenario, memories);
    let Some(dir) = dir.filter(|_| by_meaning(scenario)) else {
        return Ok(book);
    };
    let facts = FactsFile::read(dir)?;
    let ids: BTreeMap<&str, hearsay_core::NpcId> = scenario
        .npcs
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), hearsay_core::NpcId(i as u32)))
        .collect();
    for (idx, spec) in scenario.facts.iter().enumerate() {
        if spec.meaning.is_some() {
            book.knowers[idx].clear();
            book.curves[idx].clear();
        }
    }
    for line in &facts.learned {
        let SimEvent::Learned(LearnedLine {
            tick,
            fact,
            npc,
            from,
            memory,
            ..
        }) = line
        else {
            continue;
        };
        let (Some(idx), Some(&who)) = (
            scenario.facts.iter().position(|f| &f.name == fact),
            ids.get(npc.as_str()),
        ) else {
            continue;
        };
        if scenario.facts[idx].meaning.is_none() {
            continue;
        }
        book.knowers[idx].insert(
            who,
            hearsay_core::Knower {
                tick: *tick,
                from: from.as_deref().and_then(|f| ids.get(f).copied()),
                memory: *memory,
            },
        );
        let count = book.knowers[idx].len() as u32;
        match book.curves[idx].last_mut() {
            Some((t, n)) if t == tick => *n = count,
            _ => book.curves[idx].push((*tick, count)),
        }
    }
    Ok(book)
}

/// The `learned` lines of every fact with a statement, decided from every memory of the
/// run (with its vectors in the current space) — what [`FactsFile::learned`] holds.
pub fn learned_by_meaning(
    scenario: &Scenario,
    names: &[String],
    memories: &[StoredMemory],
    matcher: &MeaningMatch<'_>,
) -> Vec<SimEvent> {
    let vectors: BTreeMap<MemoryId, &[Vec<f32>]> = memories
        .iter()
        .map(|m| (m.meta.memory.id, m.vectors.as_slice()))
        .collect();
    let records: Vec<&MemoryRecord> = memories.iter().map(|m| &m.meta.memory).collect();
    let (book, learned) = rebuild(&scenario.facts, &records, |idx, m| {
        matcher.teaches(idx, m, vectors.get(&m.id).copied().unwrap_or(&[]))
    });
    let by_id: BTreeMap<MemoryId, &MemoryRecord> = records.iter().map(|m| (m.id, *m)).collect();
    let name = |id: hearsay_core::NpcId| names.get(id.index()).cloned().unwrap_or_default();
    let mut lines: Vec<(u64, MemoryId, usize, SimEvent)> = learned
        .into_iter()
        .filter(|(idx, _, _)| scenario.facts[*idx].meaning.is_some())
        .filter_map(|(idx, id, via)| {
            let m = by_id.get(&id)?;
            let knower = book.knowers[idx].get(&m.npc)?;
            Some((
                m.tick,
                id,
                idx,
                SimEvent::Learned(LearnedLine {
                    tick: m.tick,
                    fact: scenario.facts[idx].name.clone(),
                    npc: name(m.npc),
                    from: knower.from.map(name),
                    memory: id,
                    via,
                }),
            ))
        })
        .collect();
    lines.sort_by_key(|(tick, id, idx, _)| (*tick, *id, *idx));
    lines.into_iter().map(|(_, _, _, e)| e).collect()
}

/// One knower of one fact, with the words it learned from and how far they travelled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    /// The knower's index in the scenario's NPC list.
    pub npc: usize,
    /// Tellers between it and where its chain starts (0 for a seed memory, an event
    /// seen, or its own words).
    pub depth: u32,
    /// Cosine of its words with the fact's statement (a fact by meaning) or with the
    /// words at the start of its chain (a fact by substrings); `None` when a memory of the
    /// two has no vector.
    pub similarity: Option<f64>,
    /// The memory it learned from: the exact words.
    pub memory: MemoryId,
}

/// The hops of every knower of `fact`, in the story's order (by tick, then as learned).
/// `vectors` holds the vectors of the knowers' memories (and of `statement`'s, for a
/// fact by meaning).
pub fn hops(
    story: &Story,
    fact: usize,
    vectors: &BTreeMap<MemoryId, Vec<Vec<f32>>>,
    statement: Option<&[f32]>,
) -> Vec<Hop> {
    story.knowers[fact]
        .iter()
        .map(|k| {
            let (chain, root) = story.chain(fact, k.npc);
            let start = match root {
                Root::Seed(n) | Root::Witnessed(n) | Root::Invented(n) | Root::Broken(n) => n,
            };
            let own = vectors.get(&k.memory);
            let similarity = match statement {
                Some(s) => own.and_then(|v| cosine(v, s)),
                None => {
                    let origin = story
                        .knowing(fact, start)
                        .or_else(|| chain.iter().rev().find_map(|n| story.knowing(fact, *n)));
                    match origin {
                        Some(o) if o.memory == k.memory => Some(1.0),
                        Some(o) => own
                            .zip(vectors.get(&o.memory))
                            .and_then(|(a, b)| cosine_between(a, b)),
                        None => None,
                    }
                }
            };
            Hop {
                npc: k.npc,
                depth: (chain.len() - 1) as u32,
                similarity: similarity.map(|s| s.clamp(-1.0, 1.0)),
                memory: k.memory,
            }
        })
        .collect()
}

/// The memories [`hops`] needs the vectors of: every knower's, every fact's.
pub fn hop_memories(story: &Story) -> Vec<MemoryId> {
    let ids: BTreeSet<MemoryId> = story.knowers.iter().flatten().map(|k| k.memory).collect();
    ids.into_iter().collect()
}

/// A brain a fact may name as its judge, by scenario name.
pub struct Judge {
    /// The scenario's name for it.
    pub name: String,
    /// The brain.
    pub brain: std::sync::Arc<dyn hearsay_brain::Brain>,
    /// At most this many of its questions at once.
    pub concurrency: usize,
}

/// Embeds the statements of `scenario` that `dir`'s `facts.json` has no vector of
/// `embedder`'s model for, and writes them there: before tick 0, so that an embedder
/// that cannot embed them stops the run before it starts.
pub async fn embed_statements(
    dir: &Path,
    scenario: &Scenario,
    embedder: &dyn hearsay_memory::Embedder,
) -> Result<(), RunError> {
    if !by_meaning(scenario) {
        return Ok(());
    }
    let mut facts = FactsFile::read(dir)?;
    let model = embedder.model().to_owned();
    let missing: Vec<(String, String)> = facts
        .missing(scenario, &model)
        .into_iter()
        .map(|(f, s)| (f.to_owned(), s.to_owned()))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let texts: Vec<String> = missing.iter().map(|(_, s)| s.clone()).collect();
    let vectors = embedder.embed(&texts).await.map_err(|e| {
        RunError::Provider(format!(
            "the embedder could not embed the facts' statements (a fact by meaning compares \
             memories with them): {e}"
        ))
    })?;
    if vectors.len() != texts.len() {
        return Err(RunError::Provider(format!(
            "the embedder returned {} vectors for {} statements",
            vectors.len(),
            texts.len()
        )));
    }
    for ((fact, statement), v) in missing.into_iter().zip(vectors) {
        facts.statements.push(StatementVector {
            fact,
            statement,
            model: model.clone(),
            vector: hearsay_memory::fit_dims(v, hearsay_memory::VECTOR_DIMS),
        });
    }
    facts.version = 1;
    facts.write(dir)
}

/// Decides the facts by meaning at the end of a run: reads every memory with its vectors,
/// asks each fact's judge about the candidates it has not answered for yet (appending the
/// answers to `judge.jsonl`), and writes the `learned` lines into `facts.json`. Nothing
/// to do for a scenario without statements.
pub async fn decide<S: hearsay_memory::Store>(
    store: &S,
    dir: &Path,
    scenario: &Scenario,
    names: &[String],
    judges: &[Judge],
    model: &str,
    tick: u64,
) -> Result<FactsFile, RunError> {
    let mut facts = FactsFile::read(dir)?;
    if !by_meaning(scenario) {
        return Ok(facts);
    }
    let memories = store.memories_of(None).await?;
    let mut judged = JudgeTape::read(dir)?;
    let asked = {
        let matcher = MeaningMatch::new(&scenario.facts, &facts, model, &judged);
        matcher.unjudged(&memories)
    };
    let mut new = Vec::new();
    for (fact, words, cos) in asked {
        let Some(judge_name) = scenario.facts[fact]
            .meaning
            .as_ref()
            .and_then(|m| m.judge.clone())
        else {
            continue;
        };
        let Some(judge) = judges.iter().find(|j| j.name == judge_name) else {
            return Err(RunError::Refused(format!(
                "fact {:?} names judge {judge_name:?}, which this run has no brain for",
                scenario.facts[fact].name
            )));
        };
        new.push((fact, words, cos, judge));
    }
    // Each judge answers up to its concurrency at once; answers are kept in question
    // order whatever order they come back in.
    let mut answers = Vec::with_capacity(new.len());
    for part in new.chunks(
        judges
            .iter()
            .map(|j| j.concurrency)
            .min()
            .unwrap_or(1)
            .max(1),
    ) {
        let calls = part.iter().map(|(fact, words, cos, judge)| {
            let request = hearsay_brain::JudgeRequest {
                statement: scenario.facts[*fact]
                    .meaning
                    .as_ref()
                    .map(|m| m.statement.clone())
                    .unwrap_or_default(),
                words: words.clone(),
                tick,
            };
            async move {
                let started = std::time::Instant::now();
                let result = judge.brain.judge(&request).await;
                let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
                let (answer, response, error) = match result {
                    Ok(reply) => (Some(reply.value), Some(reply.raw), reply.carried.fallback),
                    Err(f) => (None, f.raw, Some(f.error.to_string())),
                };
                Judgment {
                    fact: scenario.facts[*fact].name.clone(),
                    words: words.clone(),
                    cosine: *cos,
                    brain: judge.name.clone(),
                    provider: judge.brain.provider().to_owned(),
                    answer,
                    response: hearsay_brain::tape::kept_response(response).0,
                    error,
                    latency_ms,
                }
            }
        });
        answers.extend(futures_util::future::join_all(calls).await);
    }
    JudgeTape::append(dir, &answers)?;
    for j in answers {
        judged.add(j);
    }
    let matcher = MeaningMatch::new(&scenario.facts, &facts, model, &judged);
    facts.learned = learned_by_meaning(scenario, names, &memories, &matcher);
    facts.model = model.to_owned();
    facts.unembedded = memories.iter().filter(|m| m.vectors.is_empty()).count() as u64;
    facts.version = 1;
    facts.write(dir)?;
    Ok(facts)
}

/// What `hearsay replay` found when it decided the facts by meaning again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpreadCheck {
    /// No fact of the run has a statement.
    NoMeaning,
    /// Decided again from the store's vectors, the statements and the judge's tape (no
    /// model): the same `learned` lines, this many.
    Same(usize),
    /// Decided again, and different: what differs first.
    Differs(String),
    /// Not checked, and why (a PostgreSQL run read without a database URL).
    Unchecked(String),
}

/// Decides the facts by meaning of the run in `dir` again — from its store's vectors,
/// `facts.json`'s statement vectors and the judge's tape, asking no model — and compares
/// the result with the `learned` lines `facts.json` holds.
pub fn recheck(dir: &Path, scenario: &Scenario) -> Result<SpreadCheck, RunError> {
    if !by_meaning(scenario) {
        return Ok(SpreadCheck::NoMeaning);
    }
    let facts = FactsFile::read(dir)?;
    let source = match crate::source::RunSource::open_dir(dir, None) {
        Ok(s) => s,
        Err(RunError::NoDatabaseUrl) => {
            return Ok(SpreadCheck::Unchecked(
                "its memories are in PostgreSQL; `hearsay inspect --database-url` reads them"
                    .into(),
            ));
        }
        Err(e) => return Err(e),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let memories = runtime.block_on(source.memories_of(None))?;
    let judged = JudgeTape::read(dir)?;
    let matcher = MeaningMatch::new(&scenario.facts, &facts, &facts.model, &judged);
    if let Some((fact, words, _)) = matcher.unjudged(&memories).into_iter().next() {
        return Ok(SpreadCheck::Differs(format!(
            "{JUDGE_FILE} has no answer about fact {:?} for {words:?}",
            scenario.facts[fact].name
        )));
    }
    let again = learned_by_meaning(scenario, &source.names, &memories, &matcher);
    if again == facts.learned {
        return Ok(SpreadCheck::Same(again.len()));
    }
    let at = again
        .iter()
        .zip(&facts.learned)
        .position(|(a, b)| a != b)
        .unwrap_or(again.len().min(facts.learned.len()));
    let show = |e: Option<&SimEvent>| {
        e.and_then(|e| serde_json::to_string(e).ok())
            .unwrap_or_else(|| "(none)".into())
    };
    Ok(SpreadCheck::Differs(format!(
        "learned line {} of {FACTS_FILE}: recorded {}, decided again {}",
        at + 1,
        show(facts.learned.get(at)),
        show(again.get(at))
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearsay_core::{Meaning, NpcId};

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn mem(id: u64, npc: u32, tick: u64, content: &str, source: Option<u32>) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId(id),
            npc: NpcId(npc),
            kind: if source.is_some() {
                MemoryKind::Conversation
            } else {
                MemoryKind::Seed
            },
            content: content.into(),
            importance: 8,
            tick,
            source: source.map(NpcId),
            core: false,
            evidence: Vec::new(),
            place: Default::default(),
        }
    }

    fn stored(m: MemoryRecord, v: &[f32]) -> StoredMemory {
        StoredMemory {
            meta: MemoryMeta::new(&m),
            vectors: vec![unit(v)],
            space: None,
        }
    }

    fn meaning_fact(candidate: Option<f64>) -> FactSpec {
        FactSpec {
            name: "fish".into(),
            patterns: Vec::new(),
            meaning: Some(Meaning {
                statement: "fish is fresh".into(),
                similarity: 0.9,
                candidate,
                judge: candidate.map(|_| "default".into()),
            }),
            distorted_below: None,
        }
    }

    #[test]
    fn cosines_take_the_best_chunk() {
        let a = vec![unit(&[1.0, 0.0]), unit(&[0.0, 1.0])];
        assert!((cosine(&a, &unit(&[0.0, 1.0])).unwrap() - 1.0).abs() < 1e-9);
        assert!((cosine(&a, &unit(&[1.0, 1.0])).unwrap() - 0.5f64.sqrt()).abs() < 1e-6);
        assert_eq!(cosine(&[], &unit(&[1.0, 0.0])), None);
    }

    #[test]
    fn a_memory_teaches_by_cosine_or_by_the_judges_recorded_yes() {
        let specs = vec![meaning_fact(Some(0.5))];
        let facts = FactsFile {
            version: 1,
            statements: vec![StatementVector {
                fact: "fish".into(),
                statement: "fish is fresh".into(),
                model: "m".into(),
                vector: unit(&[1.0, 0.0]),
            }],
            ..FactsFile::default()
        };
        let mut judged = JudgeTape::default();
        let near = stored(mem(1, 0, 0, "near", None), &[1.0, 0.1]);
        let between = stored(mem(2, 1, 1, "between", Some(0)), &[1.0, 1.0]);
        let far = stored(mem(3, 2, 1, "far", Some(0)), &[0.0, 1.0]);
        let all = vec![near.clone(), between.clone(), far.clone()];
        let m = MeaningMatch::new(&specs, &facts, "m", &judged);
        assert!(m.teaches(0, &near.meta.memory, &near.vectors));
        assert!(!m.teaches(0, &between.meta.memory, &between.vectors));
        assert!(!m.teaches(0, &far.meta.memory, &far.vectors));
        // Another model's statement vector is not this run's: nothing matches by meaning.
        let other = MeaningMatch::new(&specs, &facts, "other", &judged);
        assert!(!other.teaches(0, &near.meta.memory, &near.vectors));
        let asked = m.unjudged(&all);
        assert_eq!(asked.len(), 1);
        assert_eq!((asked[0].0, asked[0].1.as_str()), (0, "between"));
        judged.add(Judgment {
            fact: "fish".into(),
            words: "between".into(),
            cosine: asked[0].2,
            brain: "default".into(),
            provider: "heuristic".into(),
            answer: Some(true),
            response: None,
            error: None,
            latency_ms: 0.0,
        });
        let m = MeaningMatch::new(&specs, &facts, "m", &judged);
        assert!(m.teaches(0, &between.meta.memory, &between.vectors));
        assert!(m.unjudged(&all).is_empty());
        let names: Vec<String> = ["A", "B", "C"].iter().map(|s| (*s).to_owned()).collect();
        let scenario_facts = specs.clone();
        let book = rebuild(
            &scenario_facts,
            &all.iter().map(|s| &s.meta.memory).collect::<Vec<_>>(),
            |idx, r| {
                let v = all
                    .iter()
                    .find(|s| s.meta.memory.id == r.id)
                    .map(|s| &s.vectors);
                m.teaches(idx, r, v.map_or(&[][..], |v| v.as_slice()))
            },
        )
        .0;
        let knowers: Vec<(u32, Option<u32>)> = book.knowers[0]
            .iter()
            .map(|(n, k)| (n.0, k.from.map(|f| f.0)))
            .collect();
        assert_eq!(knowers, vec![(0, None), (1, Some(0))]);
        let _ = names;
    }

    /// A hand-built chain Bob (seed) → Alice → Carol, and Dave told by Eve who never
    /// knew it: depths, the words at each hop and their similarity, exactly.
    #[test]
    fn hops_follow_the_chain_with_the_words_and_similarity_of_each() {
        let scenario = crate::scenario::parse(
            Path::new("t.toml"),
            br#"
name = "t"
ticks = 5
[world]
width = 9
height = 9
hearing_radius = 2
[[npcs]]
name = "Bob"
at = [0, 0]
[[npcs]]
name = "Alice"
at = [1, 0]
[[npcs]]
name = "Carol"
at = [2, 0]
[[npcs]]
name = "Dave"
at = [3, 0]
[[npcs]]
name = "Eve"
at = [4, 0]
[[facts]]
name = "fish"
match = ["fish"]
"#,
        )
        .expect("scenario");
        let cast = crate::story::Cast::new(&scenario);
        let mut story = Story::new(cast.clone());
        let ticks: [&[&str]; 3] = [
            &[
                r#"{"type":"memory","tick":0,"npc":"Bob","id":1,"kind":"seed","importance":8,"content":"fresh fish here"}"#,
                r#"{"type":"learned","tick":0,"fact":"fish","npc":"Bob","from":null,"memory":1}"#,
                r#"{"type":"tick","tick":0,"hash":"0"}"#,
            ],
            &[
                r#"{"type":"memory","tick":1,"npc":"Alice","id":2,"kind":"conversation","importance":8,"content":"Bob said: fresh fish here","from":"Bob"}"#,
                r#"{"type":"learned","tick":1,"fact":"fish","npc":"Alice","from":"Bob","memory":2}"#,
                r#"{"type":"memory","tick":1,"npc":"Dave","id":3,"kind":"conversation","importance":8,"content":"Eve said: fish","from":"Eve"}"#,
                r#"{"type":"learned","tick":1,"fact":"fish","npc":"Dave","from":"Eve","memory":3}"#,
                r#"{"type":"tick","tick":1,"hash":"1"}"#,
            ],
            &[
                r#"{"type":"memory","tick":2,"npc":"Carol","id":4,"kind":"conversation","importance":8,"content":"Alice said: fish here","from":"Alice"}"#,
                r#"{"type":"learned","tick":2,"fact":"fish","npc":"Carol","from":"Alice","memory":4}"#,
                r#"{"type":"tick","tick":2,"hash":"2"}"#,
            ],
        ];
        for lines in ticks {
            let lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
            story.apply(&crate::story::Frame::parse(&lines, &cast).expect("frame"));
        }
        let v = |x: f32, y: f32| vec![unit(&[x, y])];
        let vectors: BTreeMap<MemoryId, Vec<Vec<f32>>> = [
            (MemoryId(1), v(1.0, 0.0)),
            (MemoryId(2), v(3.0, 4.0)),
            (MemoryId(3), v(0.0, 1.0)),
            (MemoryId(4), v(0.0, 1.0)),
        ]
        .into_iter()
        .collect();
        let got = hops(&story, 0, &vectors, None);
        let shown: Vec<(usize, u32, Option<f64>, u64)> = got
            .iter()
            .map(|h| {
                (
                    h.npc,
                    h.depth,
                    h.similarity.map(|s| (s * 1e6).round() / 1e6),
                    h.memory.0,
                )
            })
            .collect();
        // Bob 0 (his own words), Alice 1 (cos 3/5 with Bob's), Dave: told by Eve, who
        // never knew it — a chain of one teller, compared with nothing that knew it, so
        // its own words start it; Carol 2 (cos 0 with Bob's words).
        assert_eq!(
            shown,
            vec![
                (0, 0, Some(1.0), 1),
                (1, 1, Some(0.6), 2),
                (3, 1, Some(1.0), 3),
                (2, 2, Some(0.0), 4),
            ]
        );
        // Against a statement instead, each knower's own words are compared with it.
        let statement = unit(&[0.0, 1.0]);
        let got = hops(&story, 0, &vectors, Some(&statement));
        let sims: Vec<f64> = got
            .iter()
            .map(|h| (h.similarity.unwrap_or(-9.0) * 1e6).round() / 1e6)
            .collect();
        assert_eq!(sims, vec![0.0, 0.8, 1.0, 1.0]);
        assert_eq!(
            hop_memories(&story),
            vec![MemoryId(1), MemoryId(2), MemoryId(3), MemoryId(4)]
        );
    }
}
