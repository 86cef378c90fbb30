//! hearsay's MCP server (`hearsay mcp`): one run's world and memories as tools any Model
//! Context Protocol client can call, over stdio, with the official Rust SDK (rmcp).
//!
//! Tools: `list_npcs`, `search_memories` (recall's own two-step search for a query),
//! `npc_timeline`, `fact_spread` (who knew a tracked fact, when, from whom — rebuilt
//! from the store with the kernel's rules, equal to `summary.json`), `ask_npc` (an
//! interview with the NPC's own brain), and, only with `--allow-writes`, `add_memory`
//! (text first, embedded by the same backfill worker as every memory). Resources: the run
//! directory's `summary.json` and `report.html`.
//!
//! It owns the protocol surface only: every answer comes from `hearsay-runtime`'s readers
//! (`RunSource`, `inspect`, `ask`). It never simulates, and it is read-only unless told
//! otherwise. A call whose input is wrong gets a tool result with `isError` and a plain
//! message ([`ToolError`]); nothing a client sends makes it panic or exit. stdout is the
//! protocol: logs go to stderr.

use std::sync::Arc;

use hearsay_runtime::RunError;
use hearsay_runtime::annex::Annex;
use hearsay_runtime::core::{MemoryRecord, NpcId, Pos};
use hearsay_runtime::rundir;
use hearsay_runtime::source::RunSource;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, Implementation, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most memories `search_memories` returns.
pub const K_MAX: u32 = 50;
/// The most entries `npc_timeline` returns.
pub const TIMELINE_MAX: usize = 2_000;
/// The longest memory `add_memory` accepts, in characters.
pub const CONTENT_MAX: usize = 4_000;

/// Why a tool call failed. What was wrong with its input — an unknown NPC or fact, a
/// `k` out of range, a tick the run never reached — is a tool result with `isError:
/// true` and a plain message, which the model reads and can correct (the MCP
/// specification's "tool execution errors"; rmcp answers arguments that do not fit the
/// tool's schema the same way, before the tool runs). What failed on the server's side
/// is a JSON-RPC error, as is an unknown tool.
#[derive(Debug)]
pub enum ToolError {
    /// The call's input: a tool result with `isError`.
    Input(String),
    /// The server's side: a protocol error.
    Internal(ErrorData),
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        match self {
            Self::Input(message) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
            }
            Self::Internal(e) => Err(e),
        }
    }
}

fn bad(message: impl Into<String>) -> ToolError {
    ToolError::Input(message.into())
}

fn from_run(e: RunError) -> ToolError {
    if e.is_bad_input() {
        bad(e.to_string())
    } else {
        ToolError::Internal(ErrorData::internal_error(e.to_string(), None))
    }
}

/// `search_memories` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// The NPC, by name.
    pub npc: String,
    /// What to look for, in words; ranked as recall ranks (relevance + recency +
    /// importance).
    pub query: String,
    /// How many memories (1 to 50, default 5).
    #[serde(default)]
    pub k: Option<u32>,
}

/// `npc_timeline` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimelineArgs {
    /// The NPC, by name.
    pub npc: String,
    /// First tick (default 0).
    #[serde(default)]
    pub from_tick: Option<u64>,
    /// Last tick, included (default: the last tick of the run).
    #[serde(default)]
    pub to_tick: Option<u64>,
}

/// `fact_spread` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FactArgs {
    /// A tracked fact's name (the scenario's `[[facts]]`).
    pub fact: String,
}

/// `ask_npc` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskArgs {
    /// The NPC, by name.
    pub npc: String,
    /// The question, in plain words; recall also searches the NPC's memories with it.
    pub question: String,
    /// Its memories as they were at the start of this tick (default: the end).
    #[serde(default)]
    pub at_tick: Option<u64>,
}

/// `add_memory` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddArgs {
    /// The NPC, by name.
    pub npc: String,
    /// What it now remembers (at most 4000 characters).
    pub content: String,
    /// 1 to 10 (default 5).
    #[serde(default)]
    pub importance: Option<u8>,
}

/// One NPC.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NpcInfo {
    /// Unique in the run: what the other tools take as `npc`.
    pub name: String,
    /// The scenario's description of the NPC, as its brain is given it.
    pub persona: String,
    /// The brain it decides with.
    pub brain: String,
    /// Where it stood after the last checkpointed tick (`[x, y]`).
    pub position: [i32; 2],
    /// Memories it has, archived ones included.
    pub memories: u64,
    /// Of those, archived (forgotten).
    pub archived: u64,
    /// The tracked facts it knows.
    pub knows: Vec<String>,
}

/// `list_npcs` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct NpcList {
    /// The run directory, or `PostgreSQL run N` for a run read from the database.
    pub run: String,
    /// The scenario's name (not a file path).
    pub scenario: String,
    /// Ticks completed: the run's last tick is one less.
    pub ticks: u64,
    /// Names of the tracked facts: what `fact_spread` accepts.
    pub facts: Vec<String>,
    /// Places: name and cell.
    pub places: Vec<(String, [i32; 2])>,
    /// Every NPC, by id.
    pub npcs: Vec<NpcInfo>,
}

/// A memory in an answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryView {
    /// Unique in the run, dense from 1 in creation order.
    pub id: u64,
    /// The tick it was made (0 for seed memories).
    pub tick: u64,
    /// observation, conversation, reflection or seed.
    pub kind: String,
    /// 1 to 10.
    pub importance: u8,
    /// The NPC whose words it records; `null` unless it was heard.
    pub from: Option<String>,
    /// The memory's full text, in the scenario's language.
    pub content: String,
    /// The tick it was archived at, if it was.
    pub archived: Option<u64>,
}

/// A memory found by `search_memories`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Found {
    /// 1 = best.
    pub rank: usize,
    /// Cosine relevance to the query.
    pub relevance: f32,
    /// `decay^(ticks since last recalled)`.
    pub recency: f64,
    /// The total score recall ranks by.
    pub score: f64,
    /// The matched memory itself.
    pub memory: MemoryView,
}

/// `search_memories` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResult {
    /// The NPC whose memories were searched.
    pub npc: String,
    /// The query as given, before embedding.
    pub query: String,
    /// The embedding model (and width) the query was embedded with: only memories
    /// embedded by it are compared.
    pub model: String,
    /// Memories not compared because another model embedded them, by model.
    pub other_models: std::collections::BTreeMap<String, usize>,
    /// At most `k` memories, best first (`rank` 1).
    pub memories: Vec<Found>,
}

/// `npc_timeline` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Timeline {
    /// The NPC, as named in the request.
    pub npc: String,
    /// First tick covered (0 unless the request set it).
    pub from_tick: u64,
    /// Last tick covered, included (the run's last unless the request set it).
    pub to_tick: u64,
    /// Its memories made in those ticks, in order: what it did, said, heard, saw and
    /// concluded.
    pub entries: Vec<MemoryView>,
    /// More entries than the answer holds (2000): narrow the ticks.
    pub truncated: bool,
}

/// One knower.
#[derive(Debug, Serialize, JsonSchema)]
pub struct KnowerView {
    /// The knower's name.
    pub npc: String,
    /// The first tick it held a memory that mentions the fact.
    pub tick: u64,
    /// From whose words (`null`: from the start, or seen first-hand).
    pub from: Option<String>,
    /// Tellers between it and where its chain of tellers starts (0: a seed memory, an
    /// event seen, or its own words).
    pub depth: u32,
    /// How similar the words it learned from stayed to the fact (its statement, or the
    /// words its chain started from); `null` before the run has finished, or when a
    /// vector is missing.
    pub similarity: Option<f64>,
    /// The memory that taught it.
    pub memory: u64,
    /// That memory's words, exactly.
    pub words: String,
}

/// `fact_spread` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Spread {
    /// The tracked fact's name, as asked for.
    pub name: String,
    /// Knowers, by tick.
    pub knowers: Vec<KnowerView>,
    /// (tick, knowers) at every tick where the count changes.
    pub curve: Vec<(u64, u32)>,
    /// Share of the NPCs that know it.
    pub share: f64,
    /// First tick at which half of the NPCs knew it.
    pub half_tick: Option<u64>,
    /// For a fact tracked by meaning: its statement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statement: Option<String>,
    /// Knowers whose words fell below the fact's `distorted_below` (a finished run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distorted: Option<u64>,
}

/// `ask_npc` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AnswerView {
    /// The name of the NPC that answered.
    pub npc: String,
    /// At the start of which tick.
    pub tick: u64,
    /// `heuristic` or `openai`.
    pub provider: String,
    /// The NPC's reply, in its own words.
    pub answer: String,
    /// Ids of the memories recall returned for the question, best first.
    pub recalled: Vec<u64>,
}

/// `add_memory` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Added {
    /// The new memory's id.
    pub id: u64,
    /// The NPC that now has the memory, as named in the request.
    pub npc: String,
    /// The tick it is dated (the run's last).
    pub tick: u64,
    /// Its kind (`observation`).
    pub kind: String,
}

/// The server: one run, its tools.
#[derive(Clone)]
pub struct HearsayMcp {
    source: Arc<RunSource>,
    writer: Option<Arc<Annex>>,
    tool_router: ToolRouter<Self>,
}

fn view(m: &MemoryRecord, archived: Option<u64>, names: &[String]) -> MemoryView {
    MemoryView {
        id: m.id.0,
        tick: m.tick,
        kind: m.kind.as_str().to_owned(),
        importance: m.importance,
        from: m.source.and_then(|s| names.get(s.index()).cloned()),
        content: m.content.to_string(),
        archived,
    }
}

#[tool_router]
impl HearsayMcp {
    /// A server for `source`; `add_memory` only with `allow_writes`.
    async fn new(source: RunSource, allow_writes: bool) -> Result<Self, RunError> {
        let writer = if allow_writes {
            Some(Arc::new(Annex::open(&source).await?))
        } else {
            None
        };
        let mut tool_router = Self::tool_router();
        if !allow_writes {
            tool_router.remove_route("add_memory");
        }
        Ok(Self {
            source: Arc::new(source),
            writer,
            tool_router,
        })
    }

    #[tool(
        description = "The run's NPCs: name, persona, brain, where each stood at the end, how many memories it has (and how many it forgot), and which tracked facts it knows. Also the run's places and facts."
    )]
    async fn list_npcs(&self) -> Result<Json<NpcList>, ToolError> {
        let s = &self.source;
        let metadata = s.metadata().await.map_err(from_run)?;
        let book = hearsay_runtime::spread::fact_book(&s.scenario, &metadata, s.dir.as_deref())
            .map_err(from_run)?;
        let checkpoint = s.latest_checkpoint().await.map_err(from_run)?;
        let npcs = s
            .scenario
            .npcs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let mine = metadata.iter().filter(|m| m.memory.npc.index() == i);
                let position: Pos = checkpoint
                    .as_ref()
                    .and_then(|c| c.npcs.get(i))
                    .map_or(spec.at, |n| n.position.0);
                NpcInfo {
                    name: spec.name.clone(),
                    persona: spec.persona.clone(),
                    brain: spec.brain.clone(),
                    position: [position.x, position.y],
                    memories: mine.clone().count() as u64,
                    archived: mine.filter(|m| m.forgotten.is_some()).count() as u64,
                    knows: book
                        .specs
                        .iter()
                        .zip(&book.knowers)
                        .filter(|(_, k)| k.contains_key(&NpcId(i as u32)))
                        .map(|(spec, _)| spec.name.clone())
                        .collect(),
                }
            })
            .collect();
        Ok(Json(NpcList {
            run: s.label.clone(),
            scenario: s.scenario.name.clone(),
            ticks: s.completed,
            facts: s.scenario.facts.iter().map(|f| f.name.clone()).collect(),
            places: s
                .scenario
                .places
                .iter()
                .map(|p| (p.name.to_string(), [p.at.x, p.at.y]))
                .collect(),
            npcs,
        }))
    }

    #[tool(
        description = "An NPC's memories that best match a query, ranked as its recall ranks them: cosine relevance + recency (decay per tick since last recalled) + importance/10. Forgotten memories are never returned."
    )]
    async fn search_memories(
        &self,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResult>, ToolError> {
        let k = args.k.unwrap_or(5);
        if !(1..=K_MAX).contains(&k) {
            return Err(bad(format!("k must be from 1 to {K_MAX}, not {k}")));
        }
        if args.query.trim().is_empty() {
            return Err(bad("query is empty"));
        }
        self.source.npc(&args.npc).map_err(from_run)?;
        let report = hearsay_runtime::inspect::inspect_source(
            &self.source,
            &args.npc,
            Some(&args.query),
            None,
            false,
            Some(k as usize),
        )
        .await
        .map_err(from_run)?;
        let names = &self.source.names;
        let memories = report
            .recalled
            .iter()
            .enumerate()
            .filter_map(|(i, id)| {
                let row = report.memories.iter().find(|r| r.id == *id)?;
                let q = row.query?;
                Some(Found {
                    rank: i + 1,
                    relevance: q.relevance,
                    recency: q.recency,
                    score: q.score,
                    memory: MemoryView {
                        id: row.id,
                        tick: row.tick,
                        kind: row.kind.clone(),
                        importance: row.importance,
                        from: row.from.clone(),
                        content: row.content.clone(),
                        archived: row.archived,
                    },
                })
            })
            .collect();
        let _ = names;
        Ok(Json(SearchResult {
            npc: report.npc,
            query: args.query,
            model: report.space.unwrap_or_default(),
            other_models: report.other_models,
            memories,
        }))
    }

    #[tool(
        description = "What an NPC did, said, heard, saw and concluded between two ticks (both included): its memories made then, in order, forgotten ones marked. Their wording says who was addressed: 'Bob told me: …' (to this NPC), 'Bob said to Carol: …' (overheard), 'Bob whispered to me: …', 'I said to Carol: …', 'I whispered to Carol: …'."
    )]
    async fn npc_timeline(
        &self,
        Parameters(args): Parameters<TimelineArgs>,
    ) -> Result<Json<Timeline>, ToolError> {
        let s = &self.source;
        let npc = s.npc(&args.npc).map_err(from_run)?;
        let last = s.completed.saturating_sub(1);
        let from = args.from_tick.unwrap_or(0);
        let to = args.to_tick.unwrap_or(last);
        if from > to {
            return Err(bad(format!("from_tick {from} is after to_tick {to}")));
        }
        let metadata = s.metadata().await.map_err(from_run)?;
        let mut entries: Vec<MemoryView> = metadata
            .iter()
            .filter(|m| m.memory.npc == npc && (from..=to).contains(&m.memory.tick))
            .map(|m| view(&m.memory, m.forgotten, &s.names))
            .collect();
        let truncated = entries.len() > TIMELINE_MAX;
        entries.truncate(TIMELINE_MAX);
        Ok(Json(Timeline {
            npc: args.npc,
            from_tick: from,
            to_tick: to,
            entries,
            truncated,
        }))
    }

    #[tool(
        description = "How a tracked fact spread: who knows it, since which tick, told by whom; the number of knowers at every tick it changed; the share of NPCs that know it and when half of them did."
    )]
    async fn fact_spread(
        &self,
        Parameters(args): Parameters<FactArgs>,
    ) -> Result<Json<Spread>, ToolError> {
        let s = &self.source;
        let Some(index) = s.scenario.facts.iter().position(|f| f.name == args.fact) else {
            let known: Vec<&str> = s.scenario.facts.iter().map(|f| f.name.as_str()).collect();
            return Err(bad(format!(
                "no tracked fact {:?}; the run tracks: {}",
                args.fact,
                if known.is_empty() {
                    "nothing".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        };
        // A finished run's summary has every knower's hops; otherwise the store (and the
        // facts decided by meaning, when the run directory has them).
        let finished = match &s.dir {
            Some(dir) => hearsay_runtime::Summary::read(dir)
                .map_err(from_run)?
                .and_then(|sum| sum.facts.into_iter().find(|f| f.name == args.fact)),
            None => None,
        };
        let summary = match finished {
            Some(f) => f,
            None => {
                let metadata = s.metadata().await.map_err(from_run)?;
                let book =
                    hearsay_runtime::spread::fact_book(&s.scenario, &metadata, s.dir.as_deref())
                        .map_err(from_run)?;
                let mut fact =
                    hearsay_runtime::summary::facts(&book, &s.names, s.completed.saturating_sub(1))
                        .into_iter()
                        .nth(index)
                        .ok_or_else(|| {
                            ToolError::Internal(ErrorData::internal_error(
                                "the fact book lost a fact",
                                None,
                            ))
                        })?;
                // The words from the store, the depth along the tellers; no similarity
                // until the run has finished and measured it.
                let words: std::collections::BTreeMap<u64, &str> = metadata
                    .iter()
                    .map(|m| (m.memory.id.0, &*m.memory.content))
                    .collect();
                let depths: Vec<u32> = fact
                    .knowers
                    .iter()
                    .map(|k| {
                        hearsay_runtime::trace::chain(&fact, &k.npc)
                            .map_or(0, |c| c.len().saturating_sub(1) as u32)
                    })
                    .collect();
                for (k, depth) in fact.knowers.iter_mut().zip(depths) {
                    k.depth = depth;
                    k.words = words.get(&k.memory).copied().unwrap_or_default().to_owned();
                }
                // A fact by substrings: how similar the words stayed to their chain's
                // start, as the summary measures it (a fact by meaning needs its
                // statement's vector, which only a finished run directory has).
                if s.scenario.facts[index].meaning.is_none() {
                    let ids: Vec<hearsay_runtime::core::MemoryId> = fact
                        .knowers
                        .iter()
                        .map(|k| hearsay_runtime::core::MemoryId(k.memory))
                        .collect();
                    let vectors = s.vectors_of(&ids).await.map_err(from_run)?;
                    let sims = hearsay_runtime::trace::similarities(&fact, &vectors, None);
                    for (k, sim) in fact.knowers.iter_mut().zip(sims) {
                        k.similarity = sim;
                    }
                }
                fact
            }
        };
        let statement = s.scenario.facts[index]
            .meaning
            .as_ref()
            .map(|m| m.statement.clone());
        Ok(Json(Spread {
            name: summary.name,
            knowers: summary
                .knowers
                .into_iter()
                .map(|k| KnowerView {
                    npc: k.npc,
                    tick: k.tick,
                    from: k.from,
                    depth: k.depth,
                    similarity: k.similarity,
                    memory: k.memory,
                    words: k.words,
                })
                .collect(),
            curve: summary.curve,
            share: summary.share,
            half_tick: summary.half_tick,
            statement,
            distorted: (!summary.hops.is_empty()).then_some(summary.distorted),
        }))
    }

    #[tool(
        description = "Interview an NPC: its own brain answers the question from its memories as they were at the start of at_tick (default: the end of the run). Changes nothing."
    )]
    async fn ask_npc(
        &self,
        Parameters(args): Parameters<AskArgs>,
    ) -> Result<Json<AnswerView>, ToolError> {
        self.source.npc(&args.npc).map_err(from_run)?;
        let answer =
            hearsay_runtime::ask::ask_source(&self.source, &args.npc, &args.question, args.at_tick)
                .await
                .map_err(from_run)?;
        Ok(Json(AnswerView {
            npc: answer.npc,
            tick: answer.tick,
            provider: answer.provider,
            answer: answer.answer,
            recalled: answer.recalled.iter().map(|m| m.id).collect(),
        }))
    }

    #[tool(
        description = "Give an NPC a new memory (an observation, dated at the run's last tick). It is stored as text at once and embedded by the backfill worker, like every memory; search_memories finds it once embedded. Only served with --allow-writes."
    )]
    async fn add_memory(
        &self,
        Parameters(args): Parameters<AddArgs>,
    ) -> Result<Json<Added>, ToolError> {
        let Some(writer) = &self.writer else {
            return Err(bad(
                "this server is read-only (start it with --allow-writes)",
            ));
        };
        let npc = self.source.npc(&args.npc).map_err(from_run)?;
        let content = args.content.trim().to_owned();
        if content.is_empty() {
            return Err(bad("content is empty"));
        }
        let chars = content.chars().count();
        if chars > CONTENT_MAX {
            return Err(bad(format!(
                "content is {chars} characters; at most {CONTENT_MAX}"
            )));
        }
        let importance = args.importance.unwrap_or(5);
        if !(1..=10).contains(&importance) {
            return Err(bad(format!(
                "importance must be from 1 to 10, not {importance}"
            )));
        }
        // Dated at the run's last tick: part of the state the tools read, "at the end".
        let tick = self.source.completed.saturating_sub(1);
        let id = writer
            .add(npc, content, importance, tick)
            .await
            .map_err(from_run)?;
        Ok(Json(Added {
            id: id.0,
            npc: args.npc,
            tick,
            kind: "observation".into(),
        }))
    }
}

/// The run directory's files served as resources: name, file, MIME type.
const RESOURCES: [(&str, &str, &str); 2] = [
    ("summary", rundir::SUMMARY_FILE, "application/json"),
    ("report", rundir::REPORT_FILE, "text/html"),
];

/// The largest resource served, in bytes (a 100,000-NPC run's report is tens of MB).
pub const RESOURCE_MAX: u64 = 64 * 1024 * 1024;

/// A resource's URI.
fn resource_uri(file: &str) -> String {
    format!("hearsay://run/{file}")
}

impl HearsayMcp {
    /// The resources the run directory has: a regular file each (a symlink in a shared
    /// run directory is not followed), none for a run opened by its PostgreSQL id.
    fn resources(&self) -> Vec<(Resource, std::path::PathBuf, &'static str)> {
        let Some(dir) = &self.source.dir else {
            return Vec::new();
        };
        RESOURCES
            .iter()
            .filter_map(|&(name, file, mime)| {
                let path = dir.join(file);
                let meta = std::fs::symlink_metadata(&path).ok()?;
                meta.file_type().is_file().then(|| {
                    let resource = Resource::new(resource_uri(file), name)
                        .with_mime_type(mime)
                        .with_size(meta.len());
                    (resource, path, mime)
                })
            })
            .collect()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for HearsayMcp {
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(
            self.resources().into_iter().map(|(r, _, _)| r).collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let known = self.resources();
        let Some((resource, path, mime)) = known.into_iter().find(|(r, _, _)| r.uri == request.uri)
        else {
            let names: Vec<String> = self
                .resources()
                .iter()
                .map(|(r, _, _)| r.uri.clone())
                .collect();
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource {:?}; this run has: {}",
                    request.uri,
                    names.join(", ")
                ),
                None,
            ));
        };
        if resource.size.unwrap_or(0) > RESOURCE_MAX {
            return Err(ErrorData::invalid_params(
                format!(
                    "{} is {} bytes, more than the {RESOURCE_MAX} served; read it from the run directory",
                    resource.uri,
                    resource.size.unwrap_or(0)
                ),
                None,
            ));
        }
        let text = rundir::read_small(&path).map_err(|e| {
            ErrorData::internal_error(format!("cannot read {}: {e}", path.display()), None)
        })?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, resource.uri).with_mime_type(mime),
        ])
        .into())
    }

    fn get_info(&self) -> ServerConfig {
        let s = &self.source;
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("hearsay", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "The world and memories of the hearsay run {} (scenario {:?}): {} NPCs over {} ticks. \
                 list_npcs first; then search_memories, npc_timeline, fact_spread, ask_npc{}. \
                 The run's summary and report are resources, where it has a run directory.",
            s.label,
            s.scenario.name,
            s.names.len(),
            s.completed,
            if self.writer.is_some() {
                ", add_memory"
            } else {
                ""
            }
        ))
    }
}

/// Serves `source` over stdin/stdout until the client closes the connection.
pub fn serve_stdio(
    source: impl FnOnce(&tokio::runtime::Runtime) -> Result<RunSource, RunError>,
    allow_writes: bool,
) -> Result<(), RunError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let source = source(&runtime)?;
    runtime.block_on(source.check_store())?;
    runtime.block_on(async {
        let server = HearsayMcp::new(source, allow_writes).await?;
        let writer = server.writer.clone();
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| RunError::Provider(format!("MCP: the session did not start: {e}")))?;
        let ended = running.waiting().await;
        if let Some(writer) = writer.and_then(|w| Arc::try_unwrap(w).ok()) {
            writer.close().await;
        }
        ended
            .map(|_| ())
            .map_err(|e| RunError::Provider(format!("MCP: the session failed: {e}")))
    })
}
