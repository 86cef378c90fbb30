//! `summary.json` and the fact-spread table printed at the end of a run.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hearsay_core::{FactBook, MemoryId, NpcId};
use hearsay_memory::MemoryStats;
use serde::{Deserialize, Serialize};
use unicode_width::UnicodeWidthStr;

use crate::scenario::Scenario;
use crate::spread::{FactsFile, JudgeTape};
use crate::story::Story;

/// How one NPC came to know a fact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KnowerRow {
    /// The knowing NPC's name.
    pub npc: String,
    /// First tick it held a matching memory.
    pub tick: u64,
    /// Whose words taught it; `null` for seed memories and things seen first-hand.
    pub from: Option<String>,
    /// Tellers between it and where its chain of tellers starts (0: a seed memory, an
    /// event seen, or its own words).
    #[serde(default)]
    pub depth: u32,
    /// Cosine of the words it learned from with the fact's statement (a fact by
    /// meaning) or with the words its chain started from (by substrings); `null` when a
    /// vector is missing.
    #[serde(default)]
    pub similarity: Option<f64>,
    /// The memory that taught it (its `memory` line in `events.jsonl`).
    #[serde(default)]
    pub memory: u64,
    /// That memory's words, exactly.
    #[serde(default)]
    pub words: String,
}

/// The knowers of a fact at one hop depth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DepthRow {
    /// Tellers between these knowers and their chain's start.
    pub depth: u32,
    /// Knowers at this depth.
    pub knowers: u64,
    /// Mean similarity of their words (over those with one).
    pub mean_similarity: Option<f64>,
    /// The least similar version at this depth.
    pub min_similarity: Option<f64>,
}

/// How a fact with a statement was decided.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeaningStats {
    /// The statement memories were compared with.
    pub statement: String,
    /// The cosine that taught it outright.
    pub similarity: f64,
    /// The embedding model whose vectors decided it.
    pub model: String,
    /// Knowers by meaning alone (their memory holds none of the `match` strings).
    pub by_meaning_only: u64,
    /// Questions the judge answered over the run, yes, no, and failed (the words then do
    /// not teach the fact).
    pub judged: u64,
    /// Of them, answered yes.
    pub judged_yes: u64,
    /// Of them, failed.
    pub judge_failed: u64,
}

/// One tracked fact's spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FactSummary {
    /// The fact's name from `[[facts]]`; `[[expect]]` and the report refer to it.
    pub name: String,
    /// Knowers by tick, then NPC id.
    pub knowers: Vec<KnowerRow>,
    /// (tick, knowers) at every tick where the count changes.
    pub curve: Vec<(u64, u32)>,
    /// Share of NPCs that know it at the end.
    pub share: f64,
    /// First tick at which at least half of the NPCs knew it.
    pub half_tick: Option<u64>,
    /// Knowers by hop depth, with how similar their words stayed.
    #[serde(default)]
    pub hops: Vec<DepthRow>,
    /// Knowers whose words' similarity is below `distorted_below`.
    #[serde(default)]
    pub distorted: u64,
    /// The similarity below which a knower's version counts as distorted.
    #[serde(default)]
    pub distorted_below: f64,
    /// The longest chain of tellers, from its start to its last knower, by name.
    #[serde(default)]
    pub longest_chain: Vec<String>,
    /// For a fact with a statement: how it was decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<MeaningStats>,
    /// The logistic SI fit of `curve` (rate β and more, see [`crate::fit`]); absent when
    /// no fit means anything (the curve barely moves, or everyone knew from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<crate::fit::SpreadFit>,
}

/// Degradations: things that went wrong and were absorbed, never aborting the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degraded {
    /// NPC-ticks decided without memories because embedding or recall failed.
    pub recall_failures: u64,
    /// NPC-ticks where the brain failed and the NPC stayed.
    pub brain_failures: u64,
    /// Ticks that went on after the embedding barrier timed out.
    pub barrier_timeouts: u64,
    /// Failed backfill attempts (each retried with backoff).
    pub embed_retries: u64,
    /// NPC-ticks decided by the heuristic brain instead of their own (budget spent or
    /// circuit breaker open).
    pub fallbacks: u64,
    /// Reflections whose brain failed (the NPC drew no insight, kept what it had
    /// accumulated, and tries again after `reflect_retry_ticks`).
    #[serde(default)]
    pub reflection_failures: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One brain's calls over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BrainStats {
    /// `heuristic` or `openai`, as the brain's tape entries give it.
    pub provider: String,
    /// Decisions asked of it.
    pub calls: u64,
    /// Of those, answered by its own model (not the heuristic fallback).
    pub model_calls: u64,
    /// Prompt tokens reported by the provider.
    pub prompt_tokens: u64,
    /// Completion tokens reported by the provider.
    pub completion_tokens: u64,
    /// Median latency of calls that reached the provider, ms.
    pub latency_ms_p50: f64,
    /// 95th percentile latency of calls that reached the provider, ms.
    pub latency_ms_p95: f64,
    /// HTTP retries summed over its decisions and reflections.
    pub retries: u64,
    /// Calls that produced no usable answer (the NPC stayed).
    pub failures: u64,
    /// Decisions made by the heuristic brain instead.
    pub fallbacks: u64,
    /// Answers that needed repairs (fences, prose, commas, clamps, caps).
    pub repairs: u64,
    /// Answers whose content was refused (the NPC stayed).
    pub rejections: u64,
    /// Of the repaired answers, those whose `to` named nobody within reach (unknown, out
    /// of earshot, beyond a whisper's reach, or a whisper to nobody): made a plain talk.
    /// Left out while 0, so runs without addressed talk keep their summary.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub addressee_repairs: u64,
    /// Reflections asked of it (also counted in the token, retry, failure and fallback
    /// figures above, not in `calls`).
    #[serde(default)]
    pub reflections: u64,
    /// Insights its reflections produced.
    #[serde(default)]
    pub insights: u64,
    /// Of the prompt tokens, those the server took from its prompt cache.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// Prompts trimmed to fit the context (decisions and reflections).
    #[serde(default)]
    pub trimmed_prompts: u64,
    /// Calls that failed because the prompt did not fit the context: refused by us even
    /// trimmed, or by the server.
    #[serde(default)]
    pub context_overflows: u64,
    /// Prompt tokens per decision that reported them: median and 95th percentile.
    #[serde(default)]
    pub prompt_tokens_p50: f64,
    /// See `prompt_tokens_p50`.
    #[serde(default)]
    pub prompt_tokens_p95: f64,
    /// When its NPCs thought, and what that cost.
    #[serde(default)]
    pub thinking: Thinking,
    /// Per replica of its server (`base_url`, one or a list), in list order: where its
    /// attempts went, as this process counted them (a resumed run: since the resume).
    /// Left out for the heuristic brain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<hearsay_brain::ReplicaStats>,
}

/// One brain's NPC-ticks: how many thought and why, how many continued, what it cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Thinking {
    /// The brain's `think`: `every_tick` or `on_change`.
    pub think: String,
    /// NPC-ticks of its NPCs.
    pub npc_ticks: u64,
    /// Of those, the ones that thought: a recall and a decision asked of the brain.
    pub thoughts: u64,
    /// Of those, the ones that carried on without thinking (no recall, no call).
    pub continued: u64,
    /// Calls asked of the brain (decisions and reflections) per NPC-tick.
    pub calls_per_npc_tick: f64,
    /// Thoughts per reason they were woken for (`on_change`; an NPC-tick may have
    /// several reasons).
    pub wake: BTreeMap<String, u64>,
    /// Reflections that failed (refused, cut off, invalid): each waits for its retry.
    pub reflections_failed: u64,
    /// NPC-ticks on which a reflection was due but waited for the retry after a failure.
    pub reflections_deferred: u64,
}

/// One brain call as the summary counts it: what [`BrainTally`] and [`Tallies`] read of a
/// [`hearsay_brain::BrainCall`], taken where the call was made. The call itself (its
/// request digest, response, recall query and scores, decision) is then freed by the
/// thread that allocated it: freeing a tick's calls on the tick thread, from memory the
/// Think workers allocated, was a visible share of that thread's Think in the profile of
/// a 10,000-NPC town (docs/BENCHMARKS.md, the twentieth round).
#[derive(Clone, Debug)]
pub struct Counted {
    brain: hearsay_core::Name,
    provider: hearsay_core::Name,
    recall_failed: bool,
    decision: ExchangeCount,
    /// The reflection made beside it: its insights kept, and its exchange.
    reflection: Option<(u64, ExchangeCount)>,
    wake: Vec<hearsay_core::WakeReason>,
}

/// What the summary counts of one exchange with a brain.
#[derive(Clone, Copy, Debug)]
struct ExchangeCount {
    outcome: hearsay_brain::CallOutcome,
    usage: Option<hearsay_brain::Usage>,
    retries: u32,
    trimmed: bool,
    repaired: bool,
    addressee_repaired: bool,
    rejected: bool,
    overflow: bool,
    latency_ms: f64,
}

impl ExchangeCount {
    fn of(x: &hearsay_brain::tape::Exchange) -> Self {
        let c = &x.carried;
        Self {
            outcome: x.outcome,
            usage: c.usage,
            retries: c.retries,
            trimmed: !c.trimmed.is_empty(),
            repaired: !c.repairs.is_empty(),
            addressee_repaired: c
                .repairs
                .iter()
                .any(|r| r.starts_with(hearsay_brain::parse::ADDRESSEE_REPAIR)),
            rejected: !c.rejections.is_empty(),
            overflow: is_overflow(x.error.as_deref()),
            latency_ms: x.latency_ms,
        }
    }
}

impl Counted {
    /// What the summary counts of `call`.
    pub fn of(call: &hearsay_brain::BrainCall) -> Self {
        Self {
            brain: call.brain.clone(),
            provider: call.provider.clone(),
            recall_failed: call.recall_failed,
            decision: ExchangeCount::of(&call.exchange),
            reflection: call
                .reflection
                .as_ref()
                .map(|r| (r.insights.len() as u64, ExchangeCount::of(&r.exchange))),
            wake: call.wake.clone(),
        }
    }

    /// The decision fell back to the heuristic brain.
    pub fn fell_back(&self) -> bool {
        self.decision.outcome == hearsay_brain::CallOutcome::Fallback
    }
}

/// Accumulates [`BrainStats`] from tape entries.
#[derive(Clone, Debug, Default)]
pub struct BrainTally {
    stats: BrainStats,
    latencies_ms: Vec<f64>,
    prompt_tokens: Vec<f64>,
}

/// Whether a failure's message says the prompt did not fit the context (ours, or the
/// server's: llama.cpp's "exceeds the available context size", OpenAI's
/// "context_length_exceeded").
fn is_overflow(error: Option<&str>) -> bool {
    error.is_some_and(|e| {
        e.contains("does not fit the context")
            || e.contains("context size")
            || e.contains("context_length_exceeded")
            || e.contains("maximum context length")
    })
}

impl BrainTally {
    /// Counts one call: its decision, and the reflection made beside it.
    pub fn add(&mut self, call: &Counted) {
        use hearsay_brain::CallOutcome;
        if self.stats.provider != call.provider {
            self.stats.provider = call.provider.to_string();
        }
        self.stats.calls += 1;
        let x = &call.decision;
        if let Some(u) = x.usage
            && u.prompt_tokens > 0
        {
            self.prompt_tokens.push(u.prompt_tokens as f64);
        }
        self.count(x);
        match x.outcome {
            CallOutcome::Ok => self.stats.model_calls += 1,
            CallOutcome::Failed | CallOutcome::Fallback => {}
        }
        if x.outcome != CallOutcome::Fallback {
            self.latencies_ms.push(x.latency_ms);
        }
        if let Some((insights, r)) = &call.reflection {
            self.stats.reflections += 1;
            self.stats.insights += insights;
            self.stats.thinking.reflections_failed += u64::from(r.outcome == CallOutcome::Failed);
            self.count(r);
        }
        let t = &mut self.stats.thinking;
        t.thoughts += 1;
        for reason in &call.wake {
            *t.wake.entry(reason.as_str().to_owned()).or_default() += 1;
        }
    }

    /// Counts one tick's note: the NPCs that continued, the reflections deferred.
    pub fn note(&mut self, note: &hearsay_brain::TickNote) {
        let t = &mut self.stats.thinking;
        t.continued += note.continued.len() as u64;
        t.reflections_deferred += note.deferred.len() as u64;
    }

    /// What every exchange adds, a decision's or a reflection's.
    fn count(&mut self, x: &ExchangeCount) {
        use hearsay_brain::CallOutcome;
        let s = &mut self.stats;
        if let Some(u) = x.usage {
            s.prompt_tokens += u.prompt_tokens;
            s.completion_tokens += u.completion_tokens;
            s.cached_prompt_tokens += u.cached_tokens;
        }
        s.trimmed_prompts += u64::from(x.trimmed);
        s.context_overflows += u64::from(x.overflow);
        s.retries += u64::from(x.retries);
        s.repairs += u64::from(x.repaired);
        s.rejections += u64::from(x.rejected);
        s.addressee_repairs += u64::from(x.addressee_repaired);
        match x.outcome {
            CallOutcome::Ok => {}
            CallOutcome::Failed => s.failures += 1,
            CallOutcome::Fallback => s.fallbacks += 1,
        }
    }

    /// The totals, with latency percentiles; `think` is the brain's setting.
    pub fn finish(mut self, think: &str) -> BrainStats {
        let t = &mut self.stats.thinking;
        think.clone_into(&mut t.think);
        t.npc_ticks = t.thoughts + t.continued;
        t.calls_per_npc_tick = if t.npc_ticks == 0 {
            0.0
        } else {
            (self.stats.calls + self.stats.reflections) as f64 / t.npc_ticks as f64
        };
        self.latencies_ms.sort_by(f64::total_cmp);
        self.stats.latency_ms_p50 = percentile(&self.latencies_ms, 0.50);
        self.stats.latency_ms_p95 = percentile(&self.latencies_ms, 0.95);
        self.prompt_tokens.sort_by(f64::total_cmp);
        self.stats.prompt_tokens_p50 = percentile(&self.prompt_tokens, 0.50);
        self.stats.prompt_tokens_p95 = percentile(&self.prompt_tokens, 0.95);
        self.stats
    }
}

/// The figures of the calls before a resume's or a fork's first tick, counted as the
/// tape hands them over: a tick's calls are held until the next tick's first, then
/// counted in roster order, as [`Tallies::of_earlier`] counts them with every call held
/// (a resume of the 100,000-NPC town held a million). Calls that come out of tick order
/// (a tape not as hearsay writes it) cannot be counted so: [`EarlierCalls::finish`] says
/// so, and they are counted whole.
pub struct EarlierCalls<'a> {
    order: BTreeMap<&'a str, usize>,
    tallies: Tallies,
    /// The tick whose calls are held, and those calls by NPC name.
    tick: Option<u64>,
    calls: BTreeMap<String, Counted>,
    disordered: bool,
}

impl<'a> EarlierCalls<'a> {
    /// Nothing counted yet, for the cast `names`.
    pub fn new(names: &'a [String]) -> Self {
        EarlierCalls {
            order: crate::logs::roster_order(names),
            tallies: Tallies::default(),
            tick: None,
            calls: BTreeMap::new(),
            disordered: false,
        }
    }

    /// The next call the tape hands over: `npc`'s at `tick` (a second one of the same
    /// NPC and tick replaces the first, as a map of the calls would).
    pub fn add(&mut self, tick: u64, npc: &str, call: Counted) {
        match self.tick {
            Some(held) if tick < held => self.disordered = true,
            Some(held) if tick > held => self.count_held(),
            _ => {}
        }
        if self.disordered {
            return;
        }
        self.tick = Some(tick);
        self.calls.insert(npc.to_owned(), call);
    }

    fn count_held(&mut self) {
        for call in crate::logs::in_roster_order(&self.calls, &self.order) {
            self.tallies.call(call);
        }
        self.calls.clear();
    }

    /// The figures, with `notes` of the ticks before `until`; `None` when the calls came
    /// out of tick order.
    pub fn finish(
        mut self,
        notes: &BTreeMap<u64, Vec<hearsay_brain::TickNote>>,
        until: u64,
    ) -> Option<Tallies> {
        if self.disordered {
            return None;
        }
        self.count_held();
        // Notes add counts alone: where they come among the calls changes nothing.
        for note in notes.range(..until).flat_map(|(_, n)| n) {
            self.tallies.note(note);
        }
        Some(self.tallies)
    }
}

/// A run's brain figures, counted as its tape is written (and, for the ticks before a
/// resume or a fork, from the tape as read then): the run never reads its whole tape
/// back at the end, which at 10,000 NPCs took a good share of a short run's time.
#[derive(Debug, Default)]
pub struct Tallies {
    /// By brain name.
    pub brains: BTreeMap<String, BrainTally>,
    /// The failures [`Degraded`] reports that the calls tell (see [`Tallies::degrade`]).
    recall_failures: u64,
    brain_failures: u64,
    fallbacks: u64,
    reflection_failures: u64,
}

impl Tallies {
    /// The figures of the ticks before `until` of a tape read for a resume or a fork
    /// ([`crate::logs::Tape::read_range`]): its `notes`, and the calls it handed over,
    /// `counted` (by tick, then NPC name), tick by tick in roster order.
    pub fn of_earlier(
        notes: &BTreeMap<u64, Vec<hearsay_brain::TickNote>>,
        counted: &BTreeMap<u64, BTreeMap<String, Counted>>,
        names: &[String],
        until: u64,
    ) -> Tallies {
        let mut fold = EarlierCalls::new(names);
        for (&tick, calls) in counted.range(..until) {
            for (npc, call) in calls {
                fold.add(tick, npc, call.clone());
            }
        }
        fold.finish(notes, until)
            .unwrap_or_else(|| unreachable!("a map's ticks come in order"))
    }

    /// Counts one tick's calls, as the tape holds them (by NPC name), in roster order.
    pub fn tick(&mut self, calls: &BTreeMap<String, hearsay_brain::BrainCall>, names: &[String]) {
        self.tick_in(calls, &crate::logs::roster_order(names));
    }

    fn tick_in(
        &mut self,
        calls: &BTreeMap<String, hearsay_brain::BrainCall>,
        order: &BTreeMap<&str, usize>,
    ) {
        for call in crate::logs::in_roster_order(calls, order) {
            self.call(&Counted::of(call));
        }
    }

    /// Counts one call.
    pub fn call(&mut self, call: &Counted) {
        use hearsay_brain::CallOutcome;
        // The brain's name is cloned once per run, not once per call.
        match self.brains.get_mut(call.brain.as_str()) {
            Some(tally) => tally.add(call),
            None => self
                .brains
                .entry(call.brain.to_string())
                .or_default()
                .add(call),
        }
        self.recall_failures += u64::from(call.recall_failed);
        self.brain_failures += u64::from(call.decision.outcome == CallOutcome::Failed);
        self.fallbacks += u64::from(call.decision.outcome == CallOutcome::Fallback);
        self.reflection_failures += u64::from(
            call.reflection
                .as_ref()
                .is_some_and(|(_, r)| r.outcome == CallOutcome::Failed),
        );
    }

    /// Counts one tick's note.
    pub fn note(&mut self, note: &hearsay_brain::TickNote) {
        self.brains
            .entry(note.brain.clone())
            .or_default()
            .note(note);
    }

    /// Adds the failures the calls tell to `degraded`.
    pub fn degrade(&self, degraded: &mut Degraded) {
        degraded.recall_failures += self.recall_failures;
        degraded.brain_failures += self.brain_failures;
        degraded.fallbacks += self.fallbacks;
        degraded.reflection_failures += self.reflection_failures;
    }
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub use crate::logs::{Backend, StoreInfo};

/// The embedder over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbedderStats {
    /// Model name recorded with each vector.
    pub model: String,
    /// Texts answered from the (model, text) cache.
    pub cache_hits: u64,
    /// Texts sent to the embedder.
    pub cache_misses: u64,
    /// Set when this run changed the store's vector space (a fork or resume with another
    /// embedder than the store's vectors were made by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reembed: Option<Reembed>,
    /// Per replica of a remote embedder's server, in list order (see
    /// [`BrainStats::replicas`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<hearsay_brain::ReplicaStats>,
}

/// Per-replica figures as `summary.json` shows them: each URL with any password or
/// secret query parameter redacted.
pub fn replicas(stats: Vec<hearsay_brain::ReplicaStats>) -> Vec<hearsay_brain::ReplicaStats> {
    stats
        .into_iter()
        .map(|mut r| {
            r.url = hearsay_memory::postgres::redact_url(&r.url);
            r
        })
        .collect()
}

/// A change of vector space: what was set aside, what came back, what was embedded
/// again and how long that took.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reembed {
    /// Models whose vectors were set aside (kept, out of recall), with how many memories
    /// had them.
    pub set_aside: BTreeMap<String, u64>,
    /// Memories whose earlier vectors of the current model came back (no embedding).
    pub restored: u64,
    /// Memories embedded again with the current model.
    pub reembedded: u64,
    /// Whether every one of them was embedded by the end of the run.
    pub finished: bool,
    /// From the switch (before the first tick) until the last of them was embedded.
    pub ms: Option<f64>,
    /// Texts embedded in that time (a chunked memory is several; under `eventual`,
    /// memories the new ticks wrote meanwhile may be among them), and per second.
    pub texts: Option<u64>,
    /// `texts` per second of `ms`.
    pub texts_per_second: Option<f64>,
}

impl Reembed {
    /// The summary of `switch`, with the time and texts it took if it finished.
    pub fn new(
        switch: &hearsay_memory::SpaceSwitch,
        took: Option<(std::time::Duration, u64)>,
    ) -> Self {
        Self {
            set_aside: switch.retired.clone(),
            restored: switch.restored,
            reembedded: switch.reembed,
            finished: switch.reembed == 0 || took.is_some(),
            ms: took.map(|(d, _)| d.as_secs_f64() * 1000.0),
            texts: took.map(|(_, t)| t),
            texts_per_second: took.map(|(d, t)| t as f64 / d.as_secs_f64().max(1e-9)),
        }
    }
}

/// Where the time went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Whole run, setup and drain included.
    pub wall_ms: f64,
    /// Ticks per second over the tick loop.
    pub ticks_per_second: f64,
    /// The whole process's CPU time over the tick loop (every thread: the tick's, Think's
    /// workers, the embedding worker, the store's writer, the logs'), milliseconds per
    /// tick. Above `1000 / ticks_per_second` when more than one core worked; what a change
    /// saves shows here even where the machine's other load hides it from the wall clock.
    /// Absent from summaries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms_per_tick: Option<f64>,
    /// Milliseconds per phase, summed over ticks.
    pub phases_ms: BTreeMap<String, f64>,
    /// The whole process's CPU time in each phase of `phases_ms` but its persist parts,
    /// milliseconds summed over ticks (every thread's: the embedding worker's and the
    /// store writer's too, whatever phase they work in). Over `phases_ms`, the cores a
    /// phase kept busy: on two cores, a phase near 1 leaves one idle. Absent from
    /// summaries written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phases_cpu_ms: BTreeMap<String, f64>,
    /// Waiting for the backfill to drain after the last tick.
    pub drain_ms: f64,
    /// Time the store's own writer spent committing in the background, while the ticks
    /// went on (the SQLite store; absent where each write is waited for, inside
    /// `persist.store`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_writer_ms: Option<f64>,
    /// Mean time of one NPC's recall (the store's search), microseconds.
    #[serde(default)]
    pub recall_us_per_npc: f64,
    /// Vector bytes recall read, over the run (0 where the store does not count:
    /// PostgreSQL scans on the server).
    #[serde(default)]
    pub recall_bytes_scanned: u64,
    /// Vector bytes recall read per second of recall time (one NPC's search at a time).
    #[serde(default)]
    pub recall_gb_per_s: f64,
    /// The process's peak resident memory, MiB (Linux `VmHWM`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_mib: Option<f64>,
    /// How long the tick thread, ready to run, waited for a core over the tick loop,
    /// milliseconds per tick (Linux's `/proc/thread-self/schedstat`; absent where the
    /// kernel does not keep it, and from summaries written before it existed). The tick
    /// thread works alone in Act, Persist and a small town's Perceive, so what it waits
    /// there while the other threads (Think's workers, the embedding worker, the store's
    /// writer, the logs') hold the cores lengthens the tick by as much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick_thread_waiting_ms_per_tick: Option<f64>,
    /// How old the observation behind each NPC's recall query was (this run's ticks
    /// only; under `barrier` every query is this tick's).
    #[serde(default)]
    pub recall_queries: QueryAges,
    /// What the run's checkpoints cost, and whether that grew with the run.
    #[serde(default)]
    pub checkpoints: CheckpointCost,
    /// Each tick this process ran, phase by phase (`hearsay export`'s `ticks` table);
    /// absent from summaries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_tick: Option<PerTick>,
}

/// The time of every tick one process ran, by phase, as columns: entry `i` is tick
/// `first_tick + i`. Milliseconds rounded to the microsecond, so a long run's summary
/// stays small (about 40 bytes a tick).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PerTick {
    /// The first tick this process ran (after a resume, where it took over).
    pub first_tick: u64,
    /// Perceive, milliseconds.
    pub perceive: Vec<f64>,
    /// Waiting for the backfill (part of Think), milliseconds.
    pub barrier: Vec<f64>,
    /// Think without the barrier, milliseconds.
    pub think: Vec<f64>,
    /// Act, milliseconds.
    pub act: Vec<f64>,
    /// Persist (event log, checkpoint, store), milliseconds.
    pub persist: Vec<f64>,
    /// The checkpoint saved after the tick, encoded bytes (0: none saved).
    pub checkpoint_bytes: Vec<u64>,
}

impl PerTick {
    /// Appends one tick's phases (perceive, barrier, think, act, persist) and its
    /// checkpoint's bytes.
    pub fn push(&mut self, phases: [std::time::Duration; 5], checkpoint_bytes: usize) {
        let ms = |d: std::time::Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
        let [perceive, barrier, think, act, persist] = phases.map(ms);
        self.perceive.push(perceive);
        self.barrier.push(barrier);
        self.think.push(think);
        self.act.push(act);
        self.persist.push(persist);
        self.checkpoint_bytes.push(checkpoint_bytes as u64);
    }

    /// Ticks held.
    pub fn len(&self) -> usize {
        self.perceive.len()
    }

    /// No tick held.
    pub fn is_empty(&self) -> bool {
        self.perceive.is_empty()
    }
}

/// The checkpoints of a run (this process's ticks): how many, their bytes, and the cost
/// per tick in the first, the second and the last tenth of the ticks run — the second
/// and the last equal when a checkpoint's cost does not grow with the run's length. The
/// first tenth of a fresh run also holds the town's filling: its short-term windows and
/// reflections' evidence start empty, and the gossip has not spread yet (what is heard,
/// who is known to have heard it), so its deltas are smaller. Which checkpoints are whole
/// follows from their sizes (the runner's chain), so a tenth may hold one or none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointCost {
    /// Checkpoints written.
    pub written: u64,
    /// Their encoded bytes, together.
    pub bytes: u64,
    /// The first tenth of the ticks run (at least one tick).
    pub first_tenth: TenthCost,
    /// The second tenth (the first again in a run of fewer than 20 ticks; absent from
    /// summaries of earlier versions).
    #[serde(default)]
    pub second_tenth: TenthCost,
    /// The last tenth.
    pub last_tenth: TenthCost,
}

/// Checkpoint cost per tick over a tenth of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TenthCost {
    /// Encoding (capture and JSON), wall-clock milliseconds per tick: on a busy machine
    /// this includes the tick thread's waits for a core.
    pub ms_per_tick: f64,
    /// The same encoding in the tick thread's own CPU time, milliseconds per tick: the
    /// work alone (absent from summaries of earlier versions).
    #[serde(default)]
    pub cpu_ms_per_tick: f64,
    /// Encoded bytes per tick.
    pub bytes_per_tick: f64,
}

/// One tick's checkpoint: its encoding's wall and thread-CPU time, its bytes (0 for a
/// tick without one).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TickCheckpoint {
    /// Wall-clock time of the encoding.
    pub wall: std::time::Duration,
    /// The tick thread's CPU time in it.
    pub cpu: std::time::Duration,
    /// Encoded bytes.
    pub bytes: usize,
}

impl CheckpointCost {
    /// From each tick's checkpoint, in tick order.
    pub fn of(ticks: &[TickCheckpoint]) -> Self {
        let tenth = (ticks.len() / 10).max(1).min(ticks.len());
        let cost = |part: &[TickCheckpoint]| {
            let n = part.len().max(1) as f64;
            let ms = |f: fn(&TickCheckpoint) -> std::time::Duration| {
                part.iter().map(|t| f(t).as_secs_f64()).sum::<f64>() * 1000.0 / n
            };
            TenthCost {
                ms_per_tick: ms(|t| t.wall),
                cpu_ms_per_tick: ms(|t| t.cpu),
                bytes_per_tick: part.iter().map(|t| t.bytes as f64).sum::<f64>() / n,
            }
        };
        Self {
            written: ticks.iter().filter(|t| t.bytes > 0).count() as u64,
            bytes: ticks.iter().map(|t| t.bytes as u64).sum(),
            first_tenth: cost(&ticks[..tenth]),
            second_tenth: cost(ticks.get(tenth..2 * tenth).unwrap_or(&ticks[..tenth])),
            last_tenth: cost(&ticks[ticks.len() - tenth..]),
        }
    }
}

/// The whole process's CPU time so far, every thread's (zero where the clock is not
/// available).
pub fn process_cpu() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    std::time::Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The calling thread's CPU time so far (zero where the clock is not available).
pub fn thread_cpu() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    std::time::Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// The recall queries of a run by the age of the observation they came from: under
/// `eventual` visibility an NPC recalls with the newest vector back from the embedder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryAges {
    /// From this tick's observation.
    pub this_tick: u64,
    /// From the previous tick's.
    pub previous_tick: u64,
    /// From an older one.
    pub older: u64,
    /// No vector back yet: the NPC decided without recall.
    pub none: u64,
}

impl QueryAges {
    /// Counts one NPC's query.
    pub fn add(&mut self, age: Option<u64>) {
        match age {
            Some(0) => self.this_tick += 1,
            Some(1) => self.previous_tick += 1,
            Some(_) => self.older += 1,
            None => self.none += 1,
        }
    }

    /// The share of queries from this tick's or the previous tick's observation.
    pub fn current_share(&self) -> f64 {
        let all = self.this_tick + self.previous_tick + self.older + self.none;
        if all == 0 {
            return 1.0;
        }
        (self.this_tick + self.previous_tick) as f64 / all as f64
    }
}

/// How long the calling thread has waited, ready to run, for a core since it started:
/// the second field of `/proc/thread-self/schedstat` (Linux only; `None` where the file
/// is missing or reads otherwise).
pub fn thread_waiting() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = stat.split_whitespace().nth(1)?.parse().ok()?;
    Some(std::time::Duration::from_nanos(ns))
}

/// The process's peak resident set, MiB, from `/proc/self/status` (Linux only).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The scenario's `name` (not its file path).
    pub scenario: String,
    /// The seed in force at tick 0 (`run.json` lists any later change by a fork).
    pub seed: u64,
    /// The scenario's tick count: ticks before a resume count too.
    pub ticks: u64,
    /// Each `[[facts]]` entry's spread, in scenario order.
    pub facts: Vec<FactSummary>,
    /// The store's counts at the end: by kind, unembedded, archived.
    pub memories: MemoryStats,
    /// Failures the run absorbed instead of aborting, counted.
    pub degraded: Degraded,
    /// Per brain, by name.
    pub brains: BTreeMap<String, BrainStats>,
    /// The embedder's model, its cache hits and misses, and any re-embedding.
    pub embedder: EmbedderStats,
    /// Number of NPCs.
    pub npcs: usize,
    /// Where the memories are.
    pub store: StoreInfo,
    /// The run directory as given or defaulted, not canonicalised.
    pub run_dir: String,
    /// Timing (wall clock; the only non-deterministic part of the summary).
    pub timing: Timing,
    /// The scenario's `[[expect]]` entries, judged on the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<crate::expect::Judged>,
}

impl Summary {
    /// `summary.json` of `dir`, if the run wrote one (bounded in size).
    pub fn read(dir: &std::path::Path) -> Result<Option<Summary>, crate::RunError> {
        let path = dir.join(crate::rundir::SUMMARY_FILE);
        match crate::rundir::read_small(&path) {
            Ok(text) => {
                serde_json::from_str(&text)
                    .map(Some)
                    .map_err(|e| crate::RunError::RunDir {
                        path,
                        problem: format!("not a run summary: {e}"),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(crate::RunError::Io { path, source }),
        }
    }
}

/// The fact summaries from the kernel's book (knowers, curves and fits; no hops), for a
/// run whose last tick is `last_tick`.
pub fn facts(book: &FactBook, names: &[String], last_tick: u64) -> Vec<FactSummary> {
    let n = names.len().max(1);
    let name = |id: NpcId| names.get(id.index()).cloned().unwrap_or_default();
    book.specs
        .iter()
        .enumerate()
        .map(|(idx, spec)| {
            let mut knowers: Vec<(u64, NpcId, Option<NpcId>, u64)> = book.knowers[idx]
                .iter()
                .map(|(&npc, k)| (k.tick, npc, k.from, k.memory.0))
                .collect();
            knowers.sort();
            FactSummary {
                name: spec.name.clone(),
                knowers: knowers
                    .into_iter()
                    .map(|(tick, npc, from, memory)| KnowerRow {
                        npc: name(npc),
                        tick,
                        from: from.map(name),
                        depth: 0,
                        similarity: None,
                        memory,
                        words: String::new(),
                    })
                    .collect(),
                curve: book.curves[idx].clone(),
                share: book.knowers[idx].len() as f64 / n as f64,
                half_tick: book.tick_reaching(idx, n.div_ceil(2) as u32),
                hops: Vec::new(),
                distorted: 0,
                distorted_below: spec.distorted_below(),
                longest_chain: Vec::new(),
                meaning: None,
                fit: crate::fit::fit_si(&book.curves[idx], names.len() as u32, last_tick),
            }
        })
        .collect()
}

/// The fact summaries of a finished run, from its story (which holds the facts decided
/// by meaning too), with the words of every hop: `vectors` has the vectors of the
/// knowers' memories, `facts` the statement vectors of `model`, `judged` the judge's tape.
pub fn facts_of(
    story: &Story,
    scenario: &Scenario,
    vectors: &BTreeMap<MemoryId, Vec<Vec<f32>>>,
    facts: &FactsFile,
    judged: &JudgeTape,
    model: &str,
) -> Vec<FactSummary> {
    let names = &story.cast.npcs;
    let last_tick = story.completed.saturating_sub(1);
    let n = names.len().max(1);
    scenario
        .facts
        .iter()
        .enumerate()
        .map(|(idx, spec)| {
            let statement = facts.statement(spec, model);
            let hops = crate::spread::hops(story, idx, vectors, statement);
            let by_npc: BTreeMap<usize, &crate::spread::Hop> =
                hops.iter().map(|h| (h.npc, h)).collect();
            let mut knowers: Vec<(u64, usize, KnowerRow)> = story.knowers[idx]
                .iter()
                .map(|k| {
                    let hop = by_npc.get(&k.npc);
                    let from = match k.how {
                        crate::story::How::Told { by } => Some(names[by].clone()),
                        _ => None,
                    };
                    (
                        k.tick,
                        k.npc,
                        KnowerRow {
                            npc: names[k.npc].clone(),
                            tick: k.tick,
                            from,
                            depth: hop.map_or(0, |h| h.depth),
                            similarity: hop.and_then(|h| h.similarity),
                            memory: k.memory.0,
                            words: k.content.clone(),
                        },
                    )
                })
                .collect();
            knowers.sort_by_key(|(tick, npc, _)| (*tick, *npc));
            let rows: Vec<KnowerRow> = knowers.into_iter().map(|(_, _, r)| r).collect();
            let mut depths: BTreeMap<u32, Vec<Option<f64>>> = BTreeMap::new();
            for r in &rows {
                depths.entry(r.depth).or_default().push(r.similarity);
            }
            let by_depth = depths
                .into_iter()
                .map(|(depth, sims)| {
                    let known: Vec<f64> = sims.iter().flatten().copied().collect();
                    DepthRow {
                        depth,
                        knowers: sims.len() as u64,
                        mean_similarity: (!known.is_empty())
                            .then(|| known.iter().sum::<f64>() / known.len() as f64),
                        min_similarity: known.iter().copied().reduce(f64::min),
                    }
                })
                .collect();
            let below = spec.distorted_below();
            let deepest = rows.iter().max_by_key(|r| r.depth).and_then(|r| {
                let npc = story.cast.npc(&r.npc)?;
                let (chain, _) = story.chain(idx, npc);
                Some(chain.iter().rev().map(|i| names[*i].clone()).collect())
            });
            let curve = story.curve(idx);
            let fit = crate::fit::fit_si(&curve, names.len() as u32, last_tick);
            let half = n.div_ceil(2) as u32;
            FactSummary {
                name: spec.name.clone(),
                share: rows.len() as f64 / n as f64,
                half_tick: curve.iter().find(|(_, c)| *c >= half).map(|(t, _)| *t),
                curve,
                hops: by_depth,
                distorted: rows
                    .iter()
                    .filter(|r| r.similarity.is_some_and(|s| s < below))
                    .count() as u64,
                distorted_below: below,
                longest_chain: deepest.unwrap_or_default(),
                meaning: spec.meaning.as_ref().map(|m| {
                    let asked: Vec<&crate::spread::Judgment> = judged
                        .lines
                        .iter()
                        .filter(|j| j.fact == spec.name)
                        .collect();
                    MeaningStats {
                        statement: m.statement.clone(),
                        similarity: m.similarity,
                        model: facts.model.clone(),
                        by_meaning_only: rows.iter().filter(|r| !spec.matches(&r.words)).count()
                            as u64,
                        judged: asked.len() as u64,
                        judged_yes: asked.iter().filter(|j| j.answer == Some(true)).count() as u64,
                        judge_failed: asked.iter().filter(|j| j.answer.is_none()).count() as u64,
                    }
                }),
                knowers: rows,
                fit,
            }
        })
        .collect()
}

/// Knowers printed per fact at the end of a run (the first 15 and the last 5).
pub const KNOWERS_SHOWN: usize = 20;

/// The human-readable end-of-run report: totals, then one table per fact.
pub fn render(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: seed {}, {} ticks, {} NPCs -> {}",
        summary.scenario, summary.seed, summary.ticks, summary.npcs, summary.run_dir
    );
    let kinds: Vec<String> = summary
        .memories
        .by_kind
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        out,
        "memories: {} ({}), archived {}, unembedded {}",
        summary.memories.total,
        kinds.join(", "),
        summary.memories.archived,
        summary.memories.unembedded
    );
    let d = &summary.degraded;
    let _ = writeln!(
        out,
        "degraded: recall failures {}, brain failures {}, fallbacks {}, barrier timeouts {}, embedding retries {}",
        d.recall_failures, d.brain_failures, d.fallbacks, d.barrier_timeouts, d.embed_retries
    );
    for (name, b) in &summary.brains {
        let t = &b.thinking;
        let woken: Vec<String> = t.wake.iter().map(|(r, n)| format!("{r} {n}")).collect();
        let _ = writeln!(
            out,
            "thinking {name} ({}): {} NPC-ticks, {} thought, {} continued, {:.3} calls per NPC-tick{}{}",
            t.think,
            t.npc_ticks,
            t.thoughts,
            t.continued,
            t.calls_per_npc_tick,
            if woken.is_empty() {
                String::new()
            } else {
                format!("; woken by {}", woken.join(", "))
            },
            if b.reflections == 0 && t.reflections_deferred == 0 {
                String::new()
            } else {
                format!(
                    "; reflections {}, failed {}, deferred {}",
                    b.reflections, t.reflections_failed, t.reflections_deferred
                )
            }
        );
        if b.provider == "heuristic" {
            continue;
        }
        let _ = writeln!(
            out,
            "brain {name} ({}): {} calls, {} answered by the model, tokens {} + {} ({:.0}% of prompt tokens cached), \
             latency p50 {:.0} ms p95 {:.0} ms, retries {}, failures {}, fallbacks {}, repaired {} ({} addressee), rejected {}, \
             trimmed to fit {}, context overflows {}",
            b.provider,
            b.calls,
            b.model_calls,
            b.prompt_tokens,
            b.completion_tokens,
            if b.prompt_tokens == 0 {
                0.0
            } else {
                b.cached_prompt_tokens as f64 * 100.0 / b.prompt_tokens as f64
            },
            b.latency_ms_p50,
            b.latency_ms_p95,
            b.retries,
            b.failures,
            b.fallbacks,
            b.repairs,
            b.addressee_repairs,
            b.rejections,
            b.trimmed_prompts,
            b.context_overflows
        );
    }
    let _ = writeln!(
        out,
        "time: {:.2} s, {:.1} ticks/s",
        summary.timing.wall_ms / 1000.0,
        summary.timing.ticks_per_second
    );
    for fact in &summary.facts {
        let half = match fact.half_tick {
            Some(t) => format!("half of the NPCs knew it by tick {t}"),
            None => "never reached half of the NPCs".to_owned(),
        };
        let _ = writeln!(
            out,
            "\nfact {:?}: {} of {} NPCs know it ({:.0}%); {half}",
            fact.name,
            fact.knowers.len(),
            summary.npcs,
            fact.share * 100.0
        );
        let _ = writeln!(out, "  {}", crate::fit::describe(fact.fit.as_ref()));
        // Pad by display width, so Chinese names (two columns each) line up too.
        let width = fact
            .knowers
            .iter()
            .map(|k| k.npc.width())
            .max()
            .unwrap_or(3)
            .max(3);
        let pad = |name: &str| " ".repeat(width - name.width());
        if let Some(m) = &fact.meaning {
            let _ = writeln!(
                out,
                "  by meaning: {:?} at cosine {} on {}; {} knowers by meaning alone; judged {} (yes {}, failed {})",
                m.statement,
                m.similarity,
                m.model,
                m.by_meaning_only,
                m.judged,
                m.judged_yes,
                m.judge_failed
            );
        }
        if !fact.hops.is_empty() {
            let depths: Vec<String> = fact
                .hops
                .iter()
                .map(|d| match d.mean_similarity {
                    Some(m) => format!("{}: {} (similarity {m:.2})", d.depth, d.knowers),
                    None => format!("{}: {}", d.depth, d.knowers),
                })
                .collect();
            let _ = writeln!(
                out,
                "  by hop: {}; distorted (below {}) {}; longest chain {}",
                depths.join(", "),
                fact.distorted_below,
                fact.distorted,
                fact.longest_chain.len().saturating_sub(1)
            );
        }
        let _ = writeln!(
            out,
            "  npc{}  {:>6}  {:>3}  {:>4}  from",
            pad("npc"),
            "tick",
            "hop",
            "sim"
        );
        // A big town's table would scroll away: the first knowers and the last, the
        // rest in summary.json and report.html.
        let n = fact.knowers.len();
        for (i, k) in fact.knowers.iter().enumerate() {
            if n > KNOWERS_SHOWN && i == KNOWERS_SHOWN - 5 {
                let _ = writeln!(
                    out,
                    "  … {} more (all of them in summary.json and report.html)",
                    n - KNOWERS_SHOWN
                );
            }
            if n > KNOWERS_SHOWN && (KNOWERS_SHOWN - 5..n - 5).contains(&i) {
                continue;
            }
            let from = k.from.as_deref().unwrap_or("-");
            let sim = k
                .similarity
                .map_or_else(|| "-".to_owned(), |s| format!("{s:.2}"));
            let _ = writeln!(
                out,
                "  {}{}  {:>6}  {:>3}  {sim:>4}  {from}",
                k.npc,
                pad(&k.npc),
                k.tick,
                k.depth
            );
        }
    }
    if summary
        .facts
        .iter()
        .any(|f| f.knowers.iter().any(|k| k.from.is_none()))
    {
        let _ = writeln!(
            out,
            "\n(from \"-\": known from the start or seen first-hand)"
        );
    }
    out.push_str(&render_expectations(&summary.expectations));
    out
}

/// The expectations block: one line each, then the count (empty without expectations).
pub fn render_expectations(judged: &[crate::expect::Judged]) -> String {
    use crate::expect::Verdict;
    let mut out = String::new();
    if judged.is_empty() {
        return out;
    }
    let met = judged.iter().filter(|j| j.verdict == Verdict::Met).count();
    let _ = writeln!(out, "\nexpectations: {met} of {} met", judged.len());
    for j in judged {
        let verdict = match j.verdict {
            Verdict::Met => "met        ",
            Verdict::Unmet => "NOT MET    ",
            Verdict::Unchecked => "not checked",
        };
        let _ = writeln!(out, "  {verdict}  {}: {}", j.expect, j.detail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// On Linux the wait is read, and it never goes back; with more threads spinning
    /// than the machine has cores, this one waits some of the time.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_threads_wait_for_a_core_is_read_and_grows_under_contention() {
        let before = thread_waiting().expect("Linux keeps /proc/thread-self/schedstat");
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let spin = |until: std::time::Instant| {
            let mut x = 0u64;
            while std::time::Instant::now() < until {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        };
        let until = std::time::Instant::now() + Duration::from_millis(300);
        std::thread::scope(|s| {
            for _ in 0..cores * 2 {
                s.spawn(move || spin(until));
            }
            spin(until);
        });
        let after = thread_waiting().expect("read again");
        assert!(after > before, "waited {before:?} then {after:?}");
    }

    fn tick(ms: u64, bytes: usize) -> TickCheckpoint {
        TickCheckpoint {
            wall: Duration::from_millis(ms),
            cpu: Duration::from_millis(ms / 2),
            bytes,
        }
    }

    #[test]
    fn checkpoint_cost_splits_the_run_into_tenths() {
        // Twenty ticks: tenths of two. A whole checkpoint (9 ms) opens each tenth.
        let ticks: Vec<_> = (0..20)
            .map(|i| {
                if i % 2 == 0 {
                    tick(9, 900)
                } else {
                    tick(i, 10)
                }
            })
            .collect();
        let cost = CheckpointCost::of(&ticks);
        assert_eq!(cost.written, 20);
        assert_eq!(cost.bytes, 10 * 900 + 10 * 10);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(cost.first_tenth.ms_per_tick, (9.0 + 1.0) / 2.0));
        assert!(near(cost.second_tenth.ms_per_tick, (9.0 + 3.0) / 2.0));
        assert!(near(cost.last_tenth.ms_per_tick, (9.0 + 19.0) / 2.0));
        assert!(near(cost.last_tenth.cpu_ms_per_tick, (4.0 + 9.0) / 2.0));
        assert!(near(cost.second_tenth.bytes_per_tick, 455.0));
        // Too short for a second tenth: the first stands in; none at all, zeros.
        let one = CheckpointCost::of(&ticks[..1]);
        assert_eq!(one.second_tenth, one.first_tenth);
        assert_eq!(CheckpointCost::of(&[]).last_tenth, TenthCost::default());
    }
}
