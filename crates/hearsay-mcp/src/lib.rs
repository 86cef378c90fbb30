//! hearsay's MCP server (`hearsay mcp`): one run's world and memories as tools any Model
//! Context Protocol client can call, over stdio, with the official Rust SDK (rmcp).
//!
//! Tools: `list_npcs`, `search_memories` (recall's own two-step search for a query),
//! `npc_timeline`, `fact_spread` (who knew a tracked fact, when, from whom — rebuilt
//! from the store with the kernel's rules, equal to `summary.json`), `ask_npc` (an
//! interview with the NPC's own brain), and, only with `--allow-writes`, `add_memory`
//! (text first, embedded by the same backfill worker as every memory).
//!
//! It owns the protocol surface only: every answer comes from `hearsay-runtime`'s readers
//! (`RunSource`, `inspect`, `ask`). It never simulates, and it is read-only unless told
//! otherwise. Bad calls are MCP errors with a plain message; nothing a client sends
//! makes it panic or exit. stdout is the protocol: logs go to stderr.

use std::sync::Arc;
use std::time::Duration;

use hearsay_core::{MemoryId, MemoryKind, MemoryRecord, NpcId, Pos};
use hearsay_memory::{Backfill, BackfillConfig, PgOptions, PgStore, SqliteStore, Store, TickWrite};
use hearsay_runtime::RunError;
use hearsay_runtime::source::{RunSource, StoreLocation, facts_from_memories};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most memories `search_memories` returns.
pub const K_MAX: u32 = 50;
/// The most entries `npc_timeline` returns.
pub const TIMELINE_MAX: usize = 2_000;
/// The longest memory `add_memory` accepts, in characters.
pub const CONTENT_MAX: usize = 4_000;

fn bad(message: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(message.into(), None)
}

fn from_run(e: RunError) -> ErrorData {
    if e.is_bad_input() {
        bad(e.to_string())
    } else {
        ErrorData::internal_error(e.to_string(), None)
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
    /// The question.
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
    /// Name.
    pub name: String,
    /// Who it is.
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
    /// The run.
    pub run: String,
    /// Scenario name.
    pub scenario: String,
    /// Ticks completed.
    pub ticks: u64,
    /// Tracked facts.
    pub facts: Vec<String>,
    /// Places: name and cell.
    pub places: Vec<(String, [i32; 2])>,
    /// Every NPC, by id.
    pub npcs: Vec<NpcInfo>,
}

/// A memory in an answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MemoryView {
    /// Id.
    pub id: u64,
    /// Tick made.
    pub tick: u64,
    /// observation, conversation, reflection or seed.
    pub kind: String,
    /// 1 to 10.
    pub importance: u8,
    /// Heard from.
    pub from: Option<String>,
    /// The text.
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
    /// The memory.
    pub memory: MemoryView,
}

/// `search_memories` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SearchResult {
    /// The NPC.
    pub npc: String,
    /// The query.
    pub query: String,
    /// The embedding model (and width) the query was embedded with: only memories
    /// embedded by it are compared.
    pub model: String,
    /// Memories not compared because another model embedded them, by model.
    pub other_models: std::collections::BTreeMap<String, usize>,
    /// Best first.
    pub memories: Vec<Found>,
}

/// `npc_timeline` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Timeline {
    /// The NPC.
    pub npc: String,
    /// First tick.
    pub from_tick: u64,
    /// Last tick.
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
    /// Who.
    pub npc: String,
    /// From when.
    pub tick: u64,
    /// From whose words (`null`: from the start, or seen first-hand).
    pub from: Option<String>,
}

/// `fact_spread` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Spread {
    /// The fact.
    pub name: String,
    /// Knowers, by tick.
    pub knowers: Vec<KnowerView>,
    /// (tick, knowers) at every tick where the count changes.
    pub curve: Vec<(u64, u32)>,
    /// Share of the NPCs that know it.
    pub share: f64,
    /// First tick at which half of the NPCs knew it.
    pub half_tick: Option<u64>,
}

/// `ask_npc` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AnswerView {
    /// Who answered.
    pub npc: String,
    /// At the start of which tick.
    pub tick: u64,
    /// `heuristic` or `openai`.
    pub provider: String,
    /// The answer.
    pub answer: String,
    /// Ids of the memories recall returned for the question, best first.
    pub recalled: Vec<u64>,
}

/// `add_memory` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Added {
    /// The new memory's id.
    pub id: u64,
    /// Whose.
    pub npc: String,
    /// The tick it is dated (the run's last).
    pub tick: u64,
    /// Its kind (`observation`).
    pub kind: String,
}

/// Refuses to add memories embedded by `model` to a store whose recall uses another
/// model's vectors: they could never be compared (a run re-embeds on fork or resume; a
/// reader adding one memory must not).
async fn same_space<S: Store>(store: &S, model: &str) -> Result<(), RunError> {
    let stats = store.stats().await?;
    match stats
        .models
        .iter()
        .find(|(m, v)| v.in_use > 0 && m.as_str() != model)
    {
        Some((other, v)) => Err(RunError::Refused(format!(
            "add_memory: the run's memories are embedded by {other:?} ({} of them) and the \
             scenario's embedder is {model:?}; a memory embedded by one could not be recalled \
             against the other. Fork the run with the embedder it has now to re-embed them",
            v.in_use
        ))),
        None => Ok(()),
    }
}

enum Writable {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PgStore>),
}

/// The store opened for `add_memory`, with its embedding worker.
struct Writer {
    store: Writable,
    backfill: Backfill,
    next: tokio::sync::Mutex<u64>,
    /// The run directory's writer lock, held while the server may write: never beside a
    /// run, a resume or another writer.
    _lock: Option<hearsay_runtime::rundir::DirLock>,
}

impl Writer {
    async fn open(source: &RunSource) -> Result<Writer, RunError> {
        let lock = source
            .dir
            .as_deref()
            .map(hearsay_runtime::rundir::DirLock::acquire)
            .transpose()?;
        let scenario = &source.scenario;
        let keys = match &scenario.memory.embedder {
            hearsay_runtime::scenario::EmbedderSpec::Hashing => {
                hearsay_runtime::providers::Keys::default()
            }
            _ => hearsay_runtime::providers::load_embedder_keys(scenario)?,
        };
        let (embedder, _) = hearsay_runtime::providers::embedder(
            &scenario.memory.embedder,
            scenario.memory.cache_entries,
            &keys,
        )?;
        let config = BackfillConfig {
            batch_size: scenario.memory.batch_size,
            concurrency: scenario.memory.embed_concurrency,
            chunking: scenario.memory.chunking,
            ..BackfillConfig::default()
        };
        let handle = tokio::runtime::Handle::current();
        let (store, backfill) = match &source.store {
            StoreLocation::Sqlite(path) => {
                let store = Arc::new(SqliteStore::open_unloaded(path, source.names.clone()).await?);
                same_space(&*store, embedder.model()).await?;
                let backfill = Backfill::spawn(&handle, store.clone(), embedder, config);
                (Writable::Sqlite(store), backfill)
            }
            StoreLocation::Postgres { url, run_id } => {
                let options = PgOptions::default();
                let pool = hearsay_memory::postgres::connect(url, &options).await?;
                source.check_row(&pool, *run_id).await?;
                let store =
                    Arc::new(PgStore::attach(pool, options, *run_id, source.names.clone()).await?);
                same_space(&*store, embedder.model()).await?;
                let backfill = Backfill::spawn(&handle, store.clone(), embedder, config);
                (Writable::Postgres(store), backfill)
            }
        };
        let last = source.metadata().await?.last().map_or(0, |m| m.memory.id.0);
        Ok(Writer {
            store,
            backfill,
            next: tokio::sync::Mutex::new(last + 1),
            _lock: lock,
        })
    }

    async fn add(
        &self,
        npc: NpcId,
        content: String,
        importance: u8,
        tick: u64,
    ) -> Result<u64, RunError> {
        let mut next = self.next.lock().await;
        let id = *next;
        let write = TickWrite {
            tick,
            memories: vec![MemoryRecord {
                id: MemoryId(id),
                npc,
                kind: MemoryKind::Observation,
                content,
                importance,
                tick,
                source: None,
                core: false,
                evidence: Vec::new(),
            }],
            ..TickWrite::default()
        };
        match &self.store {
            Writable::Sqlite(s) => s.write_tick(write).await?,
            Writable::Postgres(s) => s.write_tick(write).await?,
        }
        *next += 1;
        self.backfill.wake();
        Ok(id)
    }

    async fn close(self) {
        // Let what was added get its embedding, within reason.
        let through = *self.next.lock().await - 1;
        if !self
            .backfill
            .wait_embedded_through(through, Duration::from_secs(30))
            .await
        {
            tracing::warn!("memories added over MCP were left unembedded");
        }
        self.backfill.shutdown().await;
        match &self.store {
            Writable::Sqlite(s) => s.close().await,
            Writable::Postgres(s) => s.close().await,
        }
    }
}

/// The server: one run, its tools.
#[derive(Clone)]
pub struct HearsayMcp {
    source: Arc<RunSource>,
    writer: Option<Arc<Writer>>,
    tool_router: ToolRouter<Self>,
}

fn view(m: &hearsay_core::MemoryRecord, archived: Option<u64>, names: &[String]) -> MemoryView {
    MemoryView {
        id: m.id.0,
        tick: m.tick,
        kind: m.kind.as_str().to_owned(),
        importance: m.importance,
        from: m.source.and_then(|s| names.get(s.index()).cloned()),
        content: m.content.clone(),
        archived,
    }
}

#[tool_router]
impl HearsayMcp {
    /// A server for `source`; `add_memory` only with `allow_writes`.
    async fn new(source: RunSource, allow_writes: bool) -> Result<Self, RunError> {
        let writer = if allow_writes {
            Some(Arc::new(Writer::open(&source).await?))
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
    async fn list_npcs(&self) -> Result<Json<NpcList>, ErrorData> {
        let s = &self.source;
        let metadata = s.metadata().await.map_err(from_run)?;
        let book = facts_from_memories(&s.scenario, &metadata);
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
                .map(|p| (p.name.clone(), [p.at.x, p.at.y]))
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
    ) -> Result<Json<SearchResult>, ErrorData> {
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
        description = "What an NPC did, said, heard, saw and concluded between two ticks (both included): its memories made then, in order, forgotten ones marked."
    )]
    async fn npc_timeline(
        &self,
        Parameters(args): Parameters<TimelineArgs>,
    ) -> Result<Json<Timeline>, ErrorData> {
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
    ) -> Result<Json<Spread>, ErrorData> {
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
        let metadata = s.metadata().await.map_err(from_run)?;
        let book = facts_from_memories(&s.scenario, &metadata);
        let summary = hearsay_runtime::summary::facts(&book, &s.names)
            .into_iter()
            .nth(index)
            .ok_or_else(|| ErrorData::internal_error("the fact book lost a fact", None))?;
        Ok(Json(Spread {
            name: summary.name,
            knowers: summary
                .knowers
                .into_iter()
                .map(|k| KnowerView {
                    npc: k.npc,
                    tick: k.tick,
                    from: k.from,
                })
                .collect(),
            curve: summary.curve,
            share: summary.share,
            half_tick: summary.half_tick,
        }))
    }

    #[tool(
        description = "Interview an NPC: its own brain answers the question from its memories as they were at the start of at_tick (default: the end of the run). Changes nothing."
    )]
    async fn ask_npc(
        &self,
        Parameters(args): Parameters<AskArgs>,
    ) -> Result<Json<AnswerView>, ErrorData> {
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
    ) -> Result<Json<Added>, ErrorData> {
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
            id,
            npc: args.npc,
            tick,
            kind: "observation".into(),
        }))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for HearsayMcp {
    fn get_info(&self) -> ServerConfig {
        let s = &self.source;
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("hearsay", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "The world and memories of the hearsay run {} (scenario {:?}): {} NPCs over {} ticks. \
                 list_npcs first; then search_memories, npc_timeline, fact_spread, ask_npc{}.",
                s.label,
                s.scenario.name,
                s.names.len(),
                s.completed,
                if self.writer.is_some() { ", add_memory" } else { "" }
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
