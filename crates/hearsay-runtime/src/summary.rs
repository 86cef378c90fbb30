//! `summary.json` and the fact-spread table printed at the end of a run.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hearsay_core::{FactBook, NpcId};
use hearsay_memory::MemoryStats;
use serde::{Deserialize, Serialize};
use unicode_width::UnicodeWidthStr;

/// How one NPC came to know a fact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnowerRow {
    /// Who.
    pub npc: String,
    /// First tick it held a matching memory.
    pub tick: u64,
    /// Whose words taught it; `null` for seed memories and things seen first-hand.
    pub from: Option<String>,
}

/// One tracked fact's spread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FactSummary {
    /// Name.
    pub name: String,
    /// Knowers by tick, then NPC id.
    pub knowers: Vec<KnowerRow>,
    /// (tick, knowers) at every tick where the count changes.
    pub curve: Vec<(u64, u32)>,
    /// Share of NPCs that know it at the end.
    pub share: f64,
    /// First tick at which at least half of the NPCs knew it.
    pub half_tick: Option<u64>,
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
}

/// Where the time went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Whole run, setup and drain included.
    pub wall_ms: f64,
    /// Ticks per second over the tick loop.
    pub ticks_per_second: f64,
    /// Milliseconds per phase, summed over ticks.
    pub phases_ms: BTreeMap<String, f64>,
    /// Waiting for the backfill to drain after the last tick.
    pub drain_ms: f64,
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Scenario name.
    pub scenario: String,
    /// Root seed.
    pub seed: u64,
    /// Ticks run.
    pub ticks: u64,
    /// Tracked facts.
    pub facts: Vec<FactSummary>,
    /// Memory counts.
    pub memories: MemoryStats,
    /// Degradations.
    pub degraded: Degraded,
    /// Number of NPCs.
    pub npcs: usize,
    /// Run directory.
    pub run_dir: String,
    /// Timing (wall clock; the only non-deterministic part of the summary).
    pub timing: Timing,
}

/// The fact summaries from the kernel's book.
pub fn facts(book: &FactBook, names: &[String]) -> Vec<FactSummary> {
    let n = names.len().max(1);
    let name = |id: NpcId| names.get(id.index()).cloned().unwrap_or_default();
    book.specs
        .iter()
        .enumerate()
        .map(|(idx, spec)| {
            let mut knowers: Vec<(u64, NpcId, Option<NpcId>)> = book.knowers[idx]
                .iter()
                .map(|(&npc, k)| (k.tick, npc, k.from))
                .collect();
            knowers.sort();
            FactSummary {
                name: spec.name.clone(),
                knowers: knowers
                    .into_iter()
                    .map(|(tick, npc, from)| KnowerRow {
                        npc: name(npc),
                        tick,
                        from: from.map(name),
                    })
                    .collect(),
                curve: book.curves[idx].clone(),
                share: book.knowers[idx].len() as f64 / n as f64,
                half_tick: book.tick_reaching(idx, n.div_ceil(2) as u32),
            }
        })
        .collect()
}

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
        "memories: {} ({}), unembedded {}",
        summary.memories.total,
        kinds.join(", "),
        summary.memories.unembedded
    );
    let d = &summary.degraded;
    let _ = writeln!(
        out,
        "degraded: recall failures {}, brain failures {}, barrier timeouts {}, embedding retries {}",
        d.recall_failures, d.brain_failures, d.barrier_timeouts, d.embed_retries
    );
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
        // Pad by display width, so Chinese names (two columns each) line up too.
        let width = fact
            .knowers
            .iter()
            .map(|k| k.npc.width())
            .max()
            .unwrap_or(3)
            .max(3);
        let pad = |name: &str| " ".repeat(width - name.width());
        let _ = writeln!(out, "  npc{}  {:>6}  from", pad("npc"), "tick");
        for k in &fact.knowers {
            let from = k.from.as_deref().unwrap_or("-");
            let _ = writeln!(out, "  {}{}  {:>6}  {from}", k.npc, pad(&k.npc), k.tick);
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
    out
}
