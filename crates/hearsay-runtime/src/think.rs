//! The Think phase: between the kernel's two schedules, every NPC embeds what it
//! perceives, recalls, and asks its brain — concurrently, with bounds — and the results
//! come back sorted by NPC id, whatever order they finished in.
//!
//! Failures degrade and never abort: an embedder or store failure means "no memories
//! this tick", a brain failure means `stay`. Both are counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use hearsay_brain::request::KnownPlace;
use hearsay_brain::{Brain, BrainCall, BrainRequest, CallOutcome, Recollection};
use hearsay_core::{Decision, Grid, Language, MemoryId, NpcId, Observation, Thought};
use hearsay_memory::{Embedder, Scoring, Store};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// A brain and the bound on its calls in flight.
pub struct BrainSlot {
    /// The scenario's name for it.
    pub name: String,
    /// The implementation.
    pub brain: Arc<dyn Brain>,
    /// At most this many of its calls at once.
    pub limit: Arc<Semaphore>,
}

/// Everything the Think phase needs that does not change between ticks.
pub struct ThinkContext<S> {
    /// The memory store.
    pub store: Arc<S>,
    /// Embeds observations for recall.
    pub embedder: Arc<dyn Embedder>,
    /// Texts per embedding call.
    pub embed_batch: usize,
    /// Brains, by index.
    pub brains: Vec<BrainSlot>,
    /// Each NPC's brain (index into `brains`), by NPC id.
    pub npc_brain: Vec<usize>,
    /// Personas, by NPC id.
    pub personas: Vec<String>,
    /// Names, by NPC id.
    pub names: Vec<String>,
    /// Root seed.
    pub seed: u64,
    /// Phrasing.
    pub language: Language,
    /// Map extent.
    pub grid: Grid,
    /// All places.
    pub places: Vec<KnownPlace>,
    /// Memories recalled per NPC.
    pub recall_k: usize,
    /// Recall ranking.
    pub scoring: Scoring,
}

/// One NPC's Think result.
pub struct Thinking {
    /// Who.
    pub npc: NpcId,
    /// What it will do and what it recalled.
    pub thought: Thought,
    /// The tape entry.
    pub call: BrainCall,
}

/// Counts of degradations in one Think phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThinkCounts {
    /// NPCs that decided without memories because recall failed.
    pub recall_failures: u64,
    /// NPCs whose brain failed (they stayed).
    pub brain_failures: u64,
}

/// Runs the Think phase for every observation; results by NPC id.
pub async fn think_all<S: Store>(
    ctx: Arc<ThinkContext<S>>,
    observations: Vec<Observation>,
) -> (Vec<Thinking>, ThinkCounts) {
    let queries: Vec<String> = observations
        .iter()
        .map(|o| ctx.language.recall_query(o))
        .collect();
    let vectors = embed_queries(&*ctx.embedder, &queries, ctx.embed_batch).await;

    let mut tasks = JoinSet::new();
    for (obs, vector) in observations.into_iter().zip(vectors) {
        let ctx = ctx.clone();
        tasks.spawn(async move { think_one(&ctx, obs, vector).await });
    }
    let mut results = BTreeMap::new();
    let mut counts = ThinkCounts::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(t) => {
                counts.recall_failures += u64::from(t.thought.recall_failed);
                counts.brain_failures += u64::from(t.thought.brain_failed);
                results.insert(t.npc, t);
            }
            // A panicking brain is a bug in hearsay; the NPC is missing from the map and
            // will simply not act this tick. Logged loudly.
            Err(e) => tracing::error!("a Think task panicked: {e}"),
        }
    }
    (results.into_values().collect(), counts)
}

/// Embeds the recall queries in batches; a failed batch leaves its NPCs without a vector.
async fn embed_queries(
    embedder: &dyn Embedder,
    queries: &[String],
    batch: usize,
) -> Vec<Option<Vec<f32>>> {
    let mut out = Vec::with_capacity(queries.len());
    for chunk in queries.chunks(batch.max(1)) {
        match embedder.embed(chunk).await {
            Ok(vectors) if vectors.len() == chunk.len() => {
                out.extend(vectors.into_iter().map(Some))
            }
            Ok(vectors) => {
                tracing::warn!(
                    "embedder returned {} vectors for {} queries",
                    vectors.len(),
                    chunk.len()
                );
                out.extend(chunk.iter().map(|_| None));
            }
            Err(e) => {
                tracing::warn!("embedding recall queries failed: {e}");
                out.extend(chunk.iter().map(|_| None));
            }
        }
    }
    out
}

async fn think_one<S: Store>(
    ctx: &ThinkContext<S>,
    obs: Observation,
    vector: Option<Vec<f32>>,
) -> Thinking {
    let npc = obs.npc;
    let tick = obs.tick;
    let (recalled, recall_failed) = match vector {
        None => (Vec::new(), true),
        Some(v) => match ctx
            .store
            .recall(
                npc,
                &hearsay_memory::fit_dims(v, hearsay_memory::VECTOR_DIMS),
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
    let recalled_ids: Vec<MemoryId> = recalled.iter().map(|r| r.id).collect();
    let recollections = recalled
        .into_iter()
        .map(|r| Recollection {
            id: r.id,
            kind: r.kind,
            content: r.content,
            importance: r.importance,
            tick: r.tick,
            source: r.source.and_then(|s| ctx.names.get(s.index()).cloned()),
        })
        .collect();
    let slot = &ctx.brains[ctx.npc_brain[npc.index()]];
    let request = BrainRequest {
        seed: ctx.seed,
        language: ctx.language,
        persona: ctx.personas[npc.index()].clone(),
        grid: ctx.grid,
        places: ctx.places.clone(),
        observation: obs,
        recalled: recollections,
    };
    let digest = request.digest();
    let started = Instant::now();
    let reply = {
        // The semaphore is never closed, so acquiring only fails if it were; treat that
        // like a failed brain rather than panicking.
        match slot.limit.acquire().await {
            Ok(_permit) => slot.brain.decide(&request).await,
            Err(e) => Err(hearsay_brain::BrainError::Unavailable(e.to_string())),
        }
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (decision, brain_failed, outcome, response, error) = match reply {
        Ok(r) => (r.decision, false, CallOutcome::Ok, Some(r.raw), None),
        Err(e) => {
            tracing::warn!(npc = npc.0, tick, "brain failed, staying: {e}");
            (
                Decision::Stay,
                true,
                CallOutcome::Failed,
                None,
                Some(e.to_string()),
            )
        }
    };
    Thinking {
        npc,
        thought: Thought {
            decision,
            recalled: recalled_ids.clone(),
            recall_failed,
            brain_failed,
        },
        call: BrainCall {
            tick,
            npc: ctx.names[npc.index()].clone(),
            brain: slot.name.clone(),
            provider: slot.brain.provider().to_owned(),
            request: digest,
            recalled: recalled_ids,
            outcome,
            response,
            error,
            latency_ms,
        },
    }
}
