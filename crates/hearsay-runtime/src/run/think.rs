//! The Think phase: between the kernel's two schedules, every NPC embeds what it
//! perceives, recalls, and asks its brain — concurrently, with bounds — and the results
//! come back sorted by NPC id, whatever order they finished in.
//!
//! Failures degrade and never abort: an embedder or store failure means "no memories
//! this tick", a brain failure means `stay`. Both are counted.
//!
//! Over 600 lines because the Think phase's pipeline (query embedding, recall, brains,
//! reflections, their bounded concurrency) shares one context; about 160 of them are its
//! tests.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use hearsay_brain::request::KnownPlace;
use hearsay_brain::tape::{Exchange, RecallScore, taped_without_request};
use hearsay_brain::{
    Brain, BrainCall, BrainError, BrainFailure, BrainRequest, CallOutcome, Recollection,
    ReflectRequest, ReflectionCall,
};
use hearsay_core::{
    Decision, Grid, Insight, Language, MemoryId, MemoryRecord, NpcId, Observation, Thought, Wake,
};
use hearsay_memory::{DenseQuery, Embedder, Embedding, Scoring, Store};

use crate::summary::Counted;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// A brain and the bound on its calls in flight.
pub struct BrainSlot {
    /// The scenario's name for it.
    pub name: String,
    /// Shared by every NPC that uses this brain; heuristic or OpenAI-compatible.
    pub brain: Arc<dyn Brain>,
    /// At most `slots` of its calls at once.
    pub limit: Arc<Semaphore>,
    /// Its calls in flight at most: `limit`'s permits, and the tasks that take its NPCs
    /// in the Think phase (more could only wait for a permit).
    pub slots: usize,
}

impl BrainSlot {
    /// `brain`, named `name`, taking at most `slots` calls at once (at least 1).
    pub fn new(name: String, brain: Arc<dyn Brain>, slots: usize) -> Self {
        let slots = slots.max(1);
        Self {
            name,
            brain,
            limit: Arc::new(Semaphore::new(slots)),
            slots,
        }
    }
}

/// What every brain request of a run shares, and how memories become recollections.
#[derive(Clone, Debug)]
pub struct RequestTemplate {
    /// Personas, by NPC id.
    pub personas: Vec<std::sync::Arc<str>>,
    /// Names, by NPC id (copied into every recollection that names its source).
    pub names: Vec<hearsay_core::Name>,
    /// The scenario's language, which every request carries.
    pub language: Language,
    /// The map's extent: move targets must lie inside.
    pub grid: Grid,
    /// Every place in the scenario, in scenario order (NPCs know the whole town).
    pub places: std::sync::Arc<[KnownPlace]>,
}

impl RequestTemplate {
    /// The template for a scenario.
    pub fn new(scenario: &crate::Scenario) -> Self {
        Self {
            personas: scenario
                .npcs
                .iter()
                .map(|n| n.persona.as_str().into())
                .collect(),
            names: scenario
                .npcs
                .iter()
                .map(|n| n.name.as_str().into())
                .collect(),
            language: scenario.language,
            grid: scenario.grid,
            places: scenario
                .places
                .iter()
                .map(|p| KnownPlace {
                    name: p.name.to_string(),
                    at: p.at,
                })
                .collect(),
        }
    }

    /// A memory as a brain sees it.
    pub fn recollection(&self, m: MemoryRecord) -> Recollection {
        Recollection {
            id: m.id,
            kind: m.kind,
            content: m.content,
            importance: m.importance,
            tick: m.tick,
            source: m.source.and_then(|s| self.names.get(s.index()).cloned()),
            place: m.place,
        }
    }

    /// The request for one NPC's reflection on `evidence` (oldest first).
    pub fn reflect_request(
        &self,
        seed: u64,
        npc: NpcId,
        tick: u64,
        evidence: Vec<MemoryRecord>,
        insights_max: usize,
    ) -> ReflectRequest {
        ReflectRequest {
            seed,
            language: self.language,
            npc,
            name: self
                .names
                .get(npc.index())
                .map(|n| n.to_string())
                .unwrap_or_default(),
            persona: self
                .personas
                .get(npc.index())
                .map(|p| p.to_string())
                .unwrap_or_default(),
            tick,
            places: self.places.to_vec(),
            memories: evidence.into_iter().map(|m| self.recollection(m)).collect(),
            insights_max,
        }
    }

    /// The request for one NPC's decision.
    pub fn request(
        &self,
        seed: u64,
        observation: Observation,
        recalled: Vec<Recollection>,
    ) -> BrainRequest {
        BrainRequest {
            seed,
            language: self.language,
            persona: self
                .personas
                .get(observation.npc.index())
                .cloned()
                .unwrap_or_default(),
            grid: self.grid,
            places: self.places.clone(),
            observation,
            recalled,
        }
    }
}

/// Everything the Think phase needs that does not change between ticks.
pub struct ThinkContext<S> {
    /// Where recall searches; the run's SQLite or PostgreSQL store.
    pub store: Arc<S>,
    /// Embeds observations for recall.
    pub embedder: Arc<dyn Embedder>,
    /// Texts per embedding call.
    pub embed_batch: usize,
    /// Brains, by index.
    pub brains: Vec<BrainSlot>,
    /// Each NPC's brain (index into `brains`), by NPC id.
    pub npc_brain: Vec<usize>,
    /// What every request shares.
    pub template: RequestTemplate,
    /// Memories recalled per NPC.
    pub recall_k: usize,
    /// Weights of relevance, recency and importance, from the scenario's `[memory]`.
    pub scoring: Scoring,
    /// Most insights per reflection.
    pub insights_max: usize,
    /// Under `eventual` visibility: recall queries embedded in the background, never
    /// waited for (`None` under `barrier`: each tick embeds its queries and waits).
    pub queries: Option<Arc<QueryPipeline>>,
}

/// Eventual visibility's recall queries: each tick's are sent to the embedder in the
/// background as the Think phase starts (unless as many batches as the embedder takes at
/// once are still out), and every NPC recalls when its turn at its brain comes (it holds
/// the brain's concurrency slot) with the newest vector ready for it then. In an
/// LLM-bound tick only the first `max_concurrency` NPCs go before this tick's vectors can
/// be back, so nearly every recall uses this tick's observation or the previous one's
/// (P2 in docs/BENCHMARKS.md measures the share). A tick never waits for the embedder;
/// what was recalled, and with which query, is on the tape.
pub struct QueryPipeline {
    latest: std::sync::Mutex<Vec<Option<ReadyQuery>>>,
    in_flight: std::sync::atomic::AtomicUsize,
    max_in_flight: usize,
}

impl QueryPipeline {
    /// A pipeline for `npcs` NPCs, at most `max_in_flight` batches out at once.
    pub fn new(npcs: usize, max_in_flight: usize) -> Self {
        Self {
            latest: std::sync::Mutex::new(vec![None; npcs]),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            max_in_flight: max_in_flight.max(1),
        }
    }

    /// Sends this tick's queries off to be embedded, unless the embedder is still busy
    /// with as many batches as it takes.
    fn dispatch(
        self: &Arc<Self>,
        embedder: Arc<dyn Embedder>,
        batch: usize,
        tick: u64,
        queries: Vec<(NpcId, String)>,
    ) {
        use std::sync::atomic::Ordering;
        let claimed = self
            .in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max_in_flight).then_some(n + 1)
            });
        if claimed.is_err() {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let queries = Arc::new(queries);
            let n = queries.len();
            let embedded =
                embed_queries(&embedder, &queries, n, |q, i| q[i].1.clone(), batch).await;
            if let Ok(mut latest) = me.latest.lock() {
                for ((npc, _), (vector, text)) in queries.iter().zip(embedded) {
                    let Some(v) = vector else { continue };
                    if let Some(slot) = latest.get_mut(npc.index())
                        && slot.as_ref().is_none_or(|(t, _, _)| *t < tick)
                    {
                        *slot = Some((tick, text, v));
                    }
                }
            }
            me.in_flight.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// The newest query vector ready for `npc`: the tick it was sent for, its text, the
    /// vector.
    fn ready(&self, npc: NpcId) -> Option<ReadyQuery> {
        let latest = self.latest.lock().ok()?;
        latest.get(npc.index())?.clone()
    }
}

/// A query vector that came back: the tick it was sent for, its text, the vector.
type ReadyQuery = (u64, String, Embedding);

/// The vector an NPC recalls with this tick.
enum QueryVector {
    /// Embedded, from the observation of the tick it carries (this tick's, or under
    /// eventual visibility maybe an earlier one's).
    Ready(u64, Embedding),
    /// Eventual visibility, and nothing embedded for this NPC yet: no recall, no failure.
    NotYet,
    /// The embedder failed: no memories this tick (counted).
    Failed,
}

/// Where an NPC's recall query comes from.
enum QuerySource {
    /// Embedded in the NPC's own turn, from this tick's observation, by an embedder that
    /// computes in this process ([`Embedder::embeds_now`]; barrier visibility).
    Now,
    /// Embedded for this tick before any NPC thinks (barrier visibility), with its text.
    Embedded(QueryVector, String),
    /// Eventual visibility: the newest vector the pipeline holds when the NPC's turn at
    /// its brain comes.
    Newest(Arc<QueryPipeline>),
}

impl QuerySource {
    /// The vector `obs`'s NPC recalls with, and the text it came from.
    fn resolve(
        self,
        embedder: &dyn Embedder,
        language: Language,
        obs: &Observation,
    ) -> (QueryVector, String) {
        let npc = obs.npc;
        match self {
            Self::Now => embed_now(embedder, language, obs),
            Self::Embedded(v, text) => (v, text),
            Self::Newest(pipeline) => match pipeline.ready(npc) {
                Some((tick, text, v)) => (QueryVector::Ready(tick, v), text),
                None => (QueryVector::NotYet, String::new()),
            },
        }
    }
}

/// `obs`'s recall query, its text and its vector, made here by an embedder that computes
/// in this process. Never inlined, so that a profile finds it under its name
/// (`scripts/cpu_profile.py`'s stage "the recall queries' embedding").
#[inline(never)]
fn embed_now(
    embedder: &dyn Embedder,
    language: Language,
    obs: &Observation,
) -> (QueryVector, String) {
    let text = language.recall_query(obs);
    let vector = match embedder.embed_fitted_now(&text) {
        Some(v) => QueryVector::Ready(obs.tick, v),
        // An embedder that says it embeds here and then does not: a bug, which degrades
        // like a failed embedder (counted).
        None => QueryVector::Failed,
    };
    (vector, text)
}

/// One NPC's Think result.
pub struct Thinking {
    /// The NPC that thought; a tick's results come back sorted by it.
    pub npc: NpcId,
    /// What it will do and what it recalled.
    pub thought: Thought,
    /// What the run's tallies count of the call. The call itself is dropped here, by
    /// the thread that made it (see [`Counted`]).
    pub counted: Counted,
    /// The call's line for `llm.jsonl`, serialized here, in the phase's own task, so
    /// that a big town's tape is not written out one NPC at a time on the tick thread.
    pub line: String,
    /// How long its recall took (the store's search, not the query's embedding).
    pub recall_time: Duration,
    /// How many ticks old the observation its recall query came from was (0: this
    /// tick's); `None` when it had no query vector.
    pub query_age: Option<u64>,
}

/// Counts of degradations in one Think phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThinkCounts {
    /// NPCs that decided without memories because recall failed.
    pub recall_failures: u64,
    /// NPCs whose brain failed (they stayed).
    pub brain_failures: u64,
    /// NPCs decided by the heuristic brain instead of their own (budget, breaker).
    pub fallbacks: u64,
}

/// Runs the Think phase for every observation (and a reflection for every NPC in
/// `due`, alongside its decision); results by NPC id.
pub async fn think_all<S: Store>(
    ctx: Arc<ThinkContext<S>>,
    seed: u64,
    observations: Vec<Observation>,
    wakes: &[Wake],
    due: Vec<(NpcId, Vec<MemoryId>)>,
) -> (Vec<Thinking>, ThinkCounts) {
    let tick = observations.first().map_or(0, |o| o.tick);
    let language = ctx.template.language;
    let (observations, sources): (Vec<Observation>, Vec<QuerySource>) = match &ctx.queries {
        // Each NPC embeds its own query in its turn: no phase of embedding first, and each
        // vector made just before the search that reads it.
        None if ctx.embedder.embeds_now() => {
            let sources = observations.iter().map(|_| QuerySource::Now).collect();
            (observations, sources)
        }
        None => {
            // Lent to the embedding tasks, which write the queries out, and back.
            let lent = Arc::new((observations, language));
            let n = lent.0.len();
            let embedded = embed_queries(
                &ctx.embedder,
                &lent,
                n,
                |(observations, language), i| language.recall_query(&observations[i]),
                ctx.embed_batch,
            )
            .await;
            // Every task is done with it (a panicked one, too: its future was dropped).
            let observations =
                Arc::try_unwrap(lent).map_or_else(|shared| shared.0.clone(), |(o, _)| o);
            let sources = embedded
                .into_iter()
                .map(|(v, text)| {
                    let v = v.map_or(QueryVector::Failed, |v| QueryVector::Ready(tick, v));
                    QuerySource::Embedded(v, text)
                })
                .collect();
            (observations, sources)
        }
        Some(pipeline) => {
            // This tick's queries go out first, so that NPCs whose turn comes after
            // they are back recall with this tick's observation.
            pipeline.dispatch(
                ctx.embedder.clone(),
                ctx.embed_batch,
                tick,
                observations
                    .iter()
                    .map(|o| (o.npc, language.recall_query(o)))
                    .collect(),
            );
            let sources = observations
                .iter()
                .map(|_| QuerySource::Newest(pipeline.clone()))
                .collect();
            (observations, sources)
        }
    };
    let mut due: BTreeMap<NpcId, Vec<MemoryId>> = due.into_iter().collect();

    // A queue of NPCs per brain, each taken one NPC at a time by as many tasks as the
    // brain takes calls at once (more tasks could only wait for its permits): a task per
    // NPC cost the tick thread 10 ms per tick in spawning alone at 10,000 NPCs.
    let n = observations.len();
    // Each NPC's brain, looked up once: to size the queues, then to fill them.
    let brains: Vec<Option<usize>> = observations
        .iter()
        .map(|o| {
            ctx.npc_brain
                .get(o.npc.index())
                .copied()
                .filter(|&b| b < ctx.brains.len())
        })
        .collect();
    let mut sizes = vec![0usize; ctx.brains.len()];
    for &b in brains.iter().flatten() {
        sizes[b] += 1;
    }
    let mut queues: Vec<Vec<Job>> = sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
    let jobs = observations.into_iter().zip(sources).zip(brains);
    for (at, ((obs, source), brain)) in jobs.enumerate() {
        let reflect = due.remove(&obs.npc);
        let wake = wakes
            .get(obs.npc.index())
            .map_or_else(Vec::new, |w| w.reasons().to_vec());
        if let Some(b) = brain {
            queues[b].push(Job {
                at,
                obs,
                source,
                reflect,
                wake,
            });
        }
    }
    let mut tasks = JoinSet::new();
    for (slot, jobs) in ctx.brains.iter().zip(queues) {
        let workers = slot.slots.min(jobs.len()).max(1);
        let share = jobs.len().div_ceil(workers);
        let queue = Arc::new(std::sync::Mutex::new(jobs.into_iter()));
        for _ in 0..workers {
            let ctx = ctx.clone();
            let queue = queue.clone();
            tasks.spawn(async move {
                let mut done = Vec::with_capacity(share);
                // The task's recall queries are written out here, one after another.
                let mut query = DenseQuery::default();
                loop {
                    // A turn that awaits nothing of tokio's (the heuristic brain's) yields
                    // as a permit's wait did: the store's writes and the backfill, tasks
                    // of the same workers, run during Think, not after it.
                    tokio::task::coop::consume_budget().await;
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some(job) = next else { break };
                    let (at, npc) = (job.at, job.obs.npc);
                    let thinking = AssertUnwindSafe(think_one(&ctx, seed, job, &mut query))
                        .catch_unwind()
                        .await;
                    match thinking {
                        Ok(t) => done.push((at, t)),
                        // A panicking brain is a bug in hearsay; the NPC is missing from
                        // the results and will simply not act this tick. Logged loudly.
                        Err(_) => tracing::error!(npc = npc.0, "a Think task panicked"),
                    }
                }
                done
            });
        }
    }
    // Each task's results are in the order of its queue, so by place: the tick's list
    // (by NPC id) is their merge, each (large) result moved once. (A sort moved every
    // result a dozen times; a table of places to fill, of fresh pages every tick, once
    // more.)
    let mut lists = Vec::new();
    let mut counts = ThinkCounts::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(done) => {
                for (_, t) in &done {
                    counts.recall_failures += u64::from(t.thought.recall_failed);
                    counts.brain_failures += u64::from(t.thought.brain_failed);
                    counts.fallbacks += u64::from(t.counted.fell_back());
                }
                lists.push(done.into_iter().peekable());
            }
            // Each NPC's panic is caught above; this would be the queue's own.
            Err(e) => tracing::error!("a Think task panicked: {e}"),
        }
    }
    let mut results: Vec<Thinking> = Vec::with_capacity(n);
    loop {
        let first = lists
            .iter_mut()
            .enumerate()
            .filter_map(|(k, list)| list.peek().map(|(at, _)| (*at, k)))
            .min();
        let Some((_, k)) = first else { break };
        results.extend(lists[k].next().map(|(_, t)| t));
    }
    // The kernel hands observations over by id; a caller that did not still gets its
    // results by id.
    if !results.is_sorted_by_key(|t| t.npc) {
        results.sort_unstable_by_key(|t| t.npc);
    }
    (results, counts)
}

/// One NPC's turn in the Think phase, waiting in its brain's queue.
struct Job {
    /// Its place in the tick's observations (by NPC id), where its result goes.
    at: usize,
    obs: Observation,
    source: QuerySource,
    /// The memories a due reflection draws on, by id, oldest first.
    reflect: Option<Vec<MemoryId>>,
    wake: Vec<hearsay_core::WakeReason>,
}

/// Embeds `n` recall queries in batches, all batches at once (each a task of its own,
/// so an embedder that computes rather than waits uses every core). Query `i` is
/// `text(&queries, i)`, written out in its batch's own task, not all of them first on
/// the tick thread (docs/BENCHMARKS.md, the twentieth round). A batch that fails leaves
/// its NPCs without a vector. Each query comes back with its text; vectors come back
/// fitted, as recall compares them.
async fn embed_queries<Q: Send + Sync + 'static>(
    embedder: &Arc<dyn Embedder>,
    queries: &Arc<Q>,
    n: usize,
    text: fn(&Q, usize) -> String,
    batch: usize,
) -> Vec<(Option<Embedding>, String)> {
    let batch = batch.max(1);
    let mut out: Vec<(Option<Embedding>, String)> = Vec::with_capacity(n);
    out.resize_with(n, || (None, String::new()));
    let mut tasks = JoinSet::new();
    for at in (0..n).step_by(batch) {
        let (embedder, queries) = (embedder.clone(), queries.clone());
        let end = (at + batch).min(n);
        tasks.spawn(async move {
            let chunk: Vec<String> = (at..end).map(|i| text(&queries, i)).collect();
            let n = chunk.len();
            let vectors = match embedder.embed_fitted(&chunk).await {
                Ok(vectors) if vectors.len() == n => {
                    vectors.into_iter().map(|(_, v)| Some(v)).collect()
                }
                Ok(vectors) => {
                    tracing::warn!(
                        "embedder returned {} vectors for {n} queries",
                        vectors.len()
                    );
                    vec![None; n]
                }
                Err(e) => {
                    tracing::warn!("embedding recall queries failed: {e}");
                    vec![None; n]
                }
            };
            (at, vectors.into_iter().zip(chunk).collect::<Vec<_>>())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((at, embedded)) => {
                for (slot, e) in out[at..].iter_mut().zip(embedded) {
                    *slot = e;
                }
            }
            // A panicking embedder is a bug; its queries stay without vectors (or text).
            Err(e) => tracing::error!("a query embedding task panicked: {e}"),
        }
    }
    out
}

async fn think_one<S: Store>(
    ctx: &ThinkContext<S>,
    seed: u64,
    job: Job,
    query_buffer: &mut DenseQuery,
) -> Thinking {
    let Job {
        at: _,
        obs,
        source,
        reflect,
        wake,
    } = job;
    let npc = obs.npc;
    let tick = obs.tick;
    let slot = &ctx.brains[ctx.npc_brain[npc.index()]];
    // The newest query is the one there when the NPC's turn comes: take the brain's slot
    // first, and keep it through recall and the decision.
    let early_permit = match source {
        QuerySource::Newest(_) => Some(slot.limit.acquire().await),
        QuerySource::Now | QuerySource::Embedded(..) => None,
    };
    let (vector, query) = source.resolve(ctx.embedder.as_ref(), ctx.template.language, &obs);
    let query_age = match &vector {
        QueryVector::Ready(sent, _) => Some(tick.saturating_sub(*sent)),
        QueryVector::NotYet | QueryVector::Failed => None,
    };
    let recall_started = Instant::now();
    let (recalled, recall_failed) = match vector {
        QueryVector::Failed => (Vec::new(), true),
        QueryVector::NotYet => (Vec::new(), false),
        QueryVector::Ready(_, v) => match ctx
            .store
            .recall(
                npc,
                query_buffer.write(&v),
                tick,
                ctx.recall_k,
                &ctx.scoring,
            )
            .await
        {
            Ok(r) => (r, false),
            Err(e) => {
                tracing::warn!(npc = npc.0, tick, "recall failed: {e}");
                (Vec::new(), true)
            }
        },
    };
    let recall_time = recall_started.elapsed();
    let recalled_ids: Vec<MemoryId> = recalled.iter().map(|r| r.memory.id).collect();
    let recall_scores: Vec<RecallScore> = recalled
        .iter()
        .map(|r| RecallScore {
            relevance: r.similarity,
            recency: r.recency,
            score: r.score,
        })
        .collect();
    let recollections = recalled
        .into_iter()
        .map(|r| ctx.template.recollection(r.memory))
        .collect();
    let request = ctx.template.request(seed, obs, recollections);
    let digest = (!taped_without_request(slot.brain.provider())).then(|| request.digest());
    // Latency is the call's own time (rate limiting and retries included), not the wait
    // for a concurrency slot. A due reflection runs alongside the decision.
    let decide = async {
        // A brain that waits for nothing decides in the task's turn: no permit (the
        // queue's tasks are no more than its slots), no future of its own.
        let started = Instant::now();
        if let Some(reply) = slot.brain.decide_here(&request) {
            return (reply, started.elapsed().as_secs_f64() * 1000.0);
        }
        let permit = match early_permit {
            Some(permit) => permit,
            None => slot.limit.acquire().await,
        };
        match permit {
            Ok(_permit) => {
                let started = Instant::now();
                let reply = slot.brain.decide(&request).await;
                (reply, started.elapsed().as_secs_f64() * 1000.0)
            }
            // The semaphore is never closed; were it, treat it like a failed brain.
            Err(e) => (
                Err(BrainFailure::from(BrainError::Unavailable(e.to_string()))),
                0.0,
            ),
        }
    };
    // Most turns have no reflection due: the decision alone, not joined with nothing.
    let ((reply, latency_ms), reflection) = match reflect {
        None => (decide.await, None),
        Some(evidence) => {
            tokio::join!(decide, async {
                Some(reflect_one(ctx, slot, seed, npc, tick, evidence).await)
            })
        }
    };
    let (insights, reflection_call) = match reflection {
        Some((insights, call)) => (Some(insights), Some(call)),
        None => (None, None),
    };
    let reflection_failed = reflection_call
        .as_ref()
        .is_some_and(|r| r.exchange.outcome == CallOutcome::Failed);
    if let Err(f) = &reply {
        tracing::warn!(npc = npc.0, tick, "brain failed, staying: {}", f.error);
    }
    let (decided, exchange) = Exchange::of(digest, reply, latency_ms);
    let brain_failed = decided.is_none();
    let decision = decided.unwrap_or(Decision::Stay);
    let call = BrainCall {
        tick,
        npc: ctx.template.names[npc.index()].clone(),
        brain: slot.name.as_str().into(),
        provider: slot.brain.provider().into(),
        recalled: recalled_ids.clone(),
        recall_failed,
        decision: decision.clone(),
        exchange,
        recall_query: query,
        recall_scores,
        reflection: reflection_call,
        wake,
    };
    let counted = Counted::of(&call);
    let line = call.into_line();
    Thinking {
        npc,
        line,
        thought: Thought {
            decision,
            recalled: recalled_ids,
            recall_failed,
            brain_failed,
            reflection: insights,
            reflection_failed,
        },
        counted,
        recall_time,
        query_age,
    }
}

/// One reflection on the memories `evidence` names (their records read from the store's
/// metadata here, in the NPC's own turn, just before the request that holds them: on the
/// tick thread, before Think, every due reflection's records were read one after another,
/// a cache miss or more each): the insights (none after a failure) and the tape record.
async fn reflect_one<S: Store>(
    ctx: &ThinkContext<S>,
    slot: &BrainSlot,
    seed: u64,
    npc: NpcId,
    tick: u64,
    evidence: Vec<MemoryId>,
) -> (Vec<Insight>, ReflectionCall) {
    let evidence = ctx.store.memories(&evidence);
    let request = ctx
        .template
        .reflect_request(seed, npc, tick, evidence, ctx.insights_max);
    let digest = (!taped_without_request(slot.brain.provider())).then(|| request.digest());
    let (reply, latency_ms) = match slot.limit.acquire().await {
        Ok(_permit) => {
            let started = Instant::now();
            let reply = slot.brain.reflect(&request).await;
            (reply, started.elapsed().as_secs_f64() * 1000.0)
        }
        Err(e) => (
            Err(BrainFailure::from(BrainError::Unavailable(e.to_string()))),
            0.0,
        ),
    };
    if let Err(f) = &reply {
        tracing::warn!(npc = npc.0, tick, "reflection failed: {}", f.error);
    }
    let (insights, exchange) = Exchange::of(digest, reply, latency_ms);
    let mut insights = insights.unwrap_or_default();
    insights.truncate(ctx.insights_max);
    let call = ReflectionCall {
        insights: insights.clone(),
        exchange,
    };
    (insights, call)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The call as its tape line spells it (the call itself is dropped where it was made).
    fn call(t: &Thinking) -> BrainCall {
        serde_json::from_str(&t.line).expect("a tape line reads as a call")
    }
    use hearsay_brain::{BoxFuture, BrainReply, HeuristicBrain};
    use hearsay_core::{NpcId, Pos};
    use hearsay_memory::{EmbedError, HashingEmbedder, SqliteStore};

    /// An embedder whose service is down.
    struct DownEmbedder;
    impl Embedder for DownEmbedder {
        fn model(&self) -> &str {
            "down"
        }
        fn embed<'a>(
            &'a self,
            _: &'a [String],
        ) -> hearsay_memory::BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            Box::pin(async { Err(EmbedError::Unavailable("connection refused".into())) })
        }
    }

    /// A brain whose provider answers 500 to everyone.
    struct DownBrain;
    impl Brain for DownBrain {
        fn provider(&self) -> &str {
            "down"
        }
        fn decide<'a>(
            &'a self,
            _: &'a BrainRequest,
        ) -> BoxFuture<'a, Result<BrainReply, BrainFailure>> {
            Box::pin(async { Err(BrainError::Unavailable("HTTP 500".into()).into()) })
        }
        fn reflect<'a>(
            &'a self,
            _: &'a ReflectRequest,
        ) -> BoxFuture<'a, Result<hearsay_brain::ReflectReply, BrainFailure>> {
            Box::pin(async { Err(BrainError::Unavailable("HTTP 500".into()).into()) })
        }
        fn answer<'a>(
            &'a self,
            _: &'a hearsay_brain::AskRequest,
        ) -> BoxFuture<'a, Result<hearsay_brain::AnswerReply, BrainFailure>> {
            Box::pin(async { Err(BrainError::Unavailable("HTTP 500".into()).into()) })
        }
    }

    fn observation(npc: u32) -> Observation {
        Observation {
            npc: NpcId(npc),
            name: format!("npc{npc}").into(),
            tick: 3,
            at: Pos::new(npc as i32, 0),
            target: None,
            seen_npcs: vec![],
            seen_places: vec![],
            heard: vec![],
            witnessed: vec![],
            recent: Default::default(),
            known_by: vec![],
        }
    }

    async fn context(
        embedder: Arc<dyn Embedder>,
        brains: Vec<Arc<dyn Brain>>,
        dir: &std::path::Path,
    ) -> Arc<ThinkContext<SqliteStore>> {
        let names: Vec<String> = (0..4).map(|i| format!("npc{i}")).collect();
        let store = SqliteStore::create(&dir.join("m.db"), names.clone())
            .await
            .expect("store");
        Arc::new(ThinkContext {
            store: Arc::new(store),
            embedder,
            embed_batch: 3,
            brains: brains
                .into_iter()
                .enumerate()
                .map(|(i, brain)| BrainSlot::new(format!("b{i}"), brain, 2))
                .collect(),
            npc_brain: vec![0, 1, 0, 1],
            template: RequestTemplate {
                personas: vec!["".into(); 4],
                names: names.iter().map(|n| n.as_str().into()).collect(),
                language: Language::En,
                grid: Grid {
                    width: 10,
                    height: 10,
                },
                places: Vec::new().into(),
            },
            recall_k: 5,
            scoring: Scoring::default(),
            insights_max: 3,
            queries: None,
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_degrade_and_are_counted_never_abort() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = context(
            Arc::new(DownEmbedder),
            vec![Arc::new(HeuristicBrain::default()), Arc::new(DownBrain)],
            dir.path(),
        )
        .await;
        let (results, counts) =
            think_all(ctx, 1, (0..4).rev().map(observation).collect(), &[], vec![]).await;
        assert_eq!(
            results.iter().map(|t| t.npc.0).collect::<Vec<_>>(),
            vec![0, 1, 2, 3],
            "by NPC id"
        );
        assert_eq!(
            counts,
            ThinkCounts {
                recall_failures: 4,
                brain_failures: 2,
                fallbacks: 0
            }
        );
        for t in &results {
            assert!(t.thought.recall_failed && t.thought.recalled.is_empty());
            if t.npc.0 % 2 == 1 {
                assert!(t.thought.brain_failed);
                assert_eq!(t.thought.decision, Decision::Stay);
                assert_eq!(call(t).exchange.outcome, CallOutcome::Failed);
                assert_eq!(
                    call(t).exchange.error.as_deref(),
                    Some("brain unavailable: HTTP 500")
                );
            } else {
                assert!(!t.thought.brain_failed);
                assert_eq!(call(t).exchange.outcome, CallOutcome::Ok);
            }
        }
    }

    /// The hashing embedder, answering after `ms`.
    struct LateEmbedder(u64);
    impl Embedder for LateEmbedder {
        fn model(&self) -> &str {
            HashingEmbedder.model()
        }
        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> hearsay_memory::BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(self.0)).await;
                HashingEmbedder.embed(texts).await
            })
        }
    }

    /// The heuristic brain, taking `ms` per decision (an LLM's latency).
    struct SlowBrain(u64);
    impl Brain for SlowBrain {
        fn provider(&self) -> &str {
            "slow"
        }
        fn decide<'a>(
            &'a self,
            request: &'a BrainRequest,
        ) -> BoxFuture<'a, Result<BrainReply, BrainFailure>> {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(self.0)).await;
                HeuristicBrain::default().decide(request).await
            })
        }
        fn reflect<'a>(
            &'a self,
            _: &'a ReflectRequest,
        ) -> BoxFuture<'a, Result<hearsay_brain::ReflectReply, BrainFailure>> {
            Box::pin(async { Err(BrainError::Unavailable("no".into()).into()) })
        }
        fn answer<'a>(
            &'a self,
            _: &'a hearsay_brain::AskRequest,
        ) -> BoxFuture<'a, Result<hearsay_brain::AnswerReply, BrainFailure>> {
            Box::pin(async { Err(BrainError::Unavailable("no".into()).into()) })
        }
    }

    /// The heuristic brain, deciding only where it is asked (`decide_here`), counting its
    /// decisions: awaited, it fails.
    #[derive(Default)]
    struct HereBrain(std::sync::atomic::AtomicUsize);
    impl Brain for HereBrain {
        fn provider(&self) -> &str {
            "here"
        }
        fn decide<'a>(
            &'a self,
            _: &'a BrainRequest,
        ) -> BoxFuture<'a, Result<BrainReply, BrainFailure>> {
            Box::pin(async { Err(BrainError::Unavailable("awaited".into()).into()) })
        }
        fn decide_here(&self, request: &BrainRequest) -> Option<Result<BrainReply, BrainFailure>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            HeuristicBrain::default().decide_here(request)
        }
        fn reflect<'a>(
            &'a self,
            request: &'a ReflectRequest,
        ) -> BoxFuture<'a, Result<hearsay_brain::ReflectReply, BrainFailure>> {
            Box::pin(async move { HeuristicBrain::default().reflect(request).await })
        }
        fn answer<'a>(
            &'a self,
            _: &'a hearsay_brain::AskRequest,
        ) -> BoxFuture<'a, Result<hearsay_brain::AnswerReply, BrainFailure>> {
            Box::pin(async { Err(BrainError::Unavailable("no".into()).into()) })
        }
    }

    /// A brain that decides where it is asked is not awaited, decides what the same brain
    /// awaited decides, and a reflection due beside it still runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_brain_that_decides_here_is_not_awaited_and_decides_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut decided = Vec::new();
        for brain in [
            Arc::new(HereBrain::default()) as Arc<dyn Brain>,
            Arc::new(SlowBrain(0)) as Arc<dyn Brain>,
        ] {
            let run = dir.path().join(decided.len().to_string());
            std::fs::create_dir(&run).expect("a directory for each run");
            let ctx = context(Arc::new(HashingEmbedder), vec![brain.clone(), brain], &run).await;
            let due = vec![(NpcId(2), vec![])];
            let (results, counts) =
                think_all(ctx, 1, (0..4).map(observation).collect(), &[], due).await;
            assert_eq!(counts, ThinkCounts::default());
            for t in &results {
                assert_eq!(call(t).exchange.outcome, CallOutcome::Ok, "{}", t.line);
                assert_eq!(
                    call(t).reflection.is_some(),
                    t.npc == NpcId(2),
                    "{}",
                    t.line
                );
            }
            decided.push(
                results
                    .iter()
                    .map(|t| t.thought.decision.clone())
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(decided[0], decided[1]);
    }

    /// Turns that await nothing of tokio's still yield now and then: a task of the same
    /// worker (the store's queue, the backfill) runs while Think does, not only after.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn turns_that_await_nothing_let_the_workers_other_tasks_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let brain = Arc::new(HereBrain::default());
        let ctx = context(
            Arc::new(HashingEmbedder),
            vec![brain.clone(), brain.clone()],
            dir.path(),
        )
        .await;
        // Many more turns than a task's budget (128): the four NPCs, over and over.
        let turns = 2_000;
        let observations: Vec<Observation> = (0..turns).map(|i| observation(i % 4)).collect();
        // What the other task saw of Think each time it ran.
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let probe = tokio::spawn({
            let (seen, brain) = (seen.clone(), brain.clone());
            async move {
                loop {
                    let decided = brain.0.load(std::sync::atomic::Ordering::SeqCst);
                    seen.lock().expect("seen").push(decided);
                    if decided >= turns as usize {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            }
        });
        let (results, _) = think_all(ctx, 1, observations, &[], vec![]).await;
        assert_eq!(results.len(), turns as usize);
        probe.await.expect("the probe ran to its end");
        let seen = seen.lock().expect("seen");
        assert!(
            seen.iter().any(|&d| 0 < d && d < turns as usize),
            "the other task ran only before or after Think: {:?}",
            &seen[..seen.len().min(8)]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn eventual_recall_waits_for_its_turn_and_takes_the_newest_query() {
        // Two slots, 4 NPCs, 300 ms per decision, the queries back after 100 ms: the first
        // two go before they are (no vector on a first tick), the last two take this
        // tick's.
        let dir = tempfile::tempdir().expect("tempdir");
        let slow: Arc<dyn Brain> = Arc::new(SlowBrain(300));
        let ctx = context(
            Arc::new(LateEmbedder(100)),
            vec![slow.clone(), slow],
            dir.path(),
        )
        .await;
        let mut ctx = Arc::into_inner(ctx).expect("one owner");
        ctx.npc_brain = vec![0; 4];
        ctx.queries = Some(Arc::new(QueryPipeline::new(4, 1)));
        let ctx = Arc::new(ctx);
        let observations: Vec<Observation> = (0..4).map(observation).collect();
        let queries: Vec<String> = observations
            .iter()
            .map(|o| Language::En.recall_query(o))
            .collect();
        let (results, _) = think_all(ctx, 1, observations, &[], vec![]).await;
        let ages: Vec<Option<u64>> = results.iter().map(|t| t.query_age).collect();
        assert_eq!(ages.iter().filter(|a| a.is_none()).count(), 2, "{ages:?}");
        assert_eq!(
            ages.iter().filter(|a| **a == Some(0)).count(),
            2,
            "{ages:?}"
        );
        for t in &results {
            match t.query_age {
                // The tape names the query the recall used.
                Some(_) => assert_eq!(call(t).recall_query, queries[t.npc.index()]),
                None => assert!(call(t).recall_query.is_empty() && t.thought.recalled.is_empty()),
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_embedded_in_the_npcs_turn_recalls_what_one_embedded_in_a_batch_does() {
        use hearsay_core::{MemoryKind, SeenNpc};
        use hearsay_memory::store::{EmbeddedRow, TickWrite};
        // Every NPC remembers something of each of the others; each sees two of them.
        let memories: Vec<MemoryRecord> = (0..4u32)
            .flat_map(|npc| (0..4u32).map(move |other| (npc, other)))
            .enumerate()
            .map(|(i, (npc, other))| MemoryRecord {
                id: MemoryId(i as u64 + 1),
                npc: NpcId(npc),
                kind: MemoryKind::Conversation,
                content: format!("npc{other} said: the nets are torn at pier {i}").into(),
                importance: 8,
                tick: 1,
                source: Some(NpcId(other)),
                core: false,
                evidence: Vec::new(),
                place: Default::default(),
            })
            .collect();
        let observations = || -> Vec<Observation> {
            (0..4u32)
                .map(|npc| {
                    let mut o = observation(npc);
                    o.seen_npcs = [(npc + 1) % 4, (npc + 2) % 4]
                        .into_iter()
                        .map(|id| SeenNpc {
                            id: NpcId(id),
                            name: format!("npc{id}").into(),
                            at: Pos::new(id as i32, 0),
                            audible: false,
                        })
                        .collect();
                    o
                })
                .collect()
        };
        let mut runs = Vec::new();
        for embedder in [
            Arc::new(HashingEmbedder) as Arc<dyn Embedder>,
            // The hashing embedder's vectors made in batches only, as a server makes them:
            // the query path of every embedder that does not embed in this process.
            Arc::new(LateEmbedder(0)) as Arc<dyn Embedder>,
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let heuristic: Arc<dyn Brain> = Arc::new(HeuristicBrain::default());
            let ctx = context(embedder, vec![heuristic.clone(), heuristic], dir.path()).await;
            ctx.store
                .write_tick(TickWrite {
                    tick: 1,
                    memories: memories.clone(),
                    ..TickWrite::default()
                })
                .await
                .expect("written");
            let (pending, claim) = ctx.store.claim_embeddings(100).await.expect("claimed");
            let rows = pending
                .iter()
                .map(|p| EmbeddedRow {
                    id: p.id,
                    chunk: 0,
                    dims: hearsay_memory::VECTOR_DIMS,
                    vector: HashingEmbedder.embed_fitted_one(&p.content),
                })
                .collect();
            ctx.store
                .save_embeddings(claim, rows, HashingEmbedder.model())
                .await
                .expect("saved");
            let (results, counts) = think_all(ctx, 1, observations(), &[], vec![]).await;
            assert_eq!(counts, ThinkCounts::default());
            runs.push(
                results
                    .iter()
                    .map(|t| {
                        (
                            t.npc,
                            t.query_age,
                            t.thought.recalled.clone(),
                            t.line.clone(),
                        )
                    })
                    .collect::<Vec<_>>(),
            );
        }
        // The same queries, the same memories recalled in the same order, the same tape;
        // and recall found every memory each NPC has.
        assert_eq!(runs[0], runs[1]);
        for (npc, age, recalled, _) in &runs[0] {
            assert_eq!(*age, Some(0));
            assert_eq!(recalled.len(), 4, "{npc:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn healthy_parts_recall_and_decide() {
        let dir = tempfile::tempdir().expect("tempdir");
        let heuristic: Arc<dyn Brain> = Arc::new(HeuristicBrain::default());
        // The heuristic brain for NPCs 0 and 2, another provider for 1 and 3.
        let other: Arc<dyn Brain> = Arc::new(SlowBrain(0));
        let ctx = context(
            Arc::new(HashingEmbedder),
            vec![heuristic, other],
            dir.path(),
        )
        .await;
        let (results, counts) =
            think_all(ctx, 1, (0..4).map(observation).collect(), &[], vec![]).await;
        assert_eq!(counts, ThinkCounts::default());
        assert_eq!(results.len(), 4);
        for t in &results {
            let call = call(t);
            assert!(call.exchange.response.is_some());
            // The heuristic brain's calls are taped without the request's digest; the
            // other's with it, in the current form.
            let request = call.exchange.request.as_deref();
            if t.npc.index() % 2 == 0 {
                assert_eq!(call.provider.as_str(), "heuristic");
                assert_eq!(request, None);
            } else {
                let digest = request.expect("a digest");
                assert!(
                    digest.starts_with(hearsay_brain::DIGEST_PREFIX)
                        && digest.len() == hearsay_brain::DIGEST_PREFIX.len() + 32,
                    "{digest}"
                );
            }
        }
    }
}
