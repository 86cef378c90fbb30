//! `hearsay replay`: re-runs a recorded run offline from its tape — zero network calls,
//! no embedder, no brain — and checks every tick against the recorded event log.
//!
//! Decisions and recalls come from `llm.jsonl`; everything else (perception, movement,
//! hearing, memories, facts, the rolling hash) is recomputed by the kernel. Each brain
//! request is rebuilt and its digest compared with the recorded one, so a change in what
//! an NPC perceived or recalled is caught at the tick it happens.

use std::collections::BTreeMap;
use std::path::Path;

use hearsay_core::resources::{MemoryLedger, Observations, SimConfig, TickLog};
use hearsay_core::{Decisions, MemoryId, MemoryRecord, SimAct, SimClock, SimPerceive, build_world};

use crate::RunError;
use crate::logs::{EventLog, RunManifest, Tape};
use crate::run::thought_from;
use crate::rundir::{EVENTS_FILE, LLM_FILE, SCENARIO_FILE};
use crate::scenario;
use crate::think::RequestTemplate;

/// Where a replay first differed from the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The tick.
    pub tick: u64,
    /// What differed.
    pub what: String,
    /// The recorded lines around the difference.
    pub expected: Vec<String>,
    /// The replayed lines around the difference.
    pub replayed: Vec<String>,
}

/// The result of a replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayReport {
    /// Ticks replayed (and identical, up to the divergence if any).
    pub ticks: u64,
    /// The first divergence, if any.
    pub divergence: Option<Divergence>,
}

/// Replays the run in `dir`.
pub fn replay(dir: &Path) -> Result<ReplayReport, RunError> {
    let manifest = RunManifest::read(dir)?;
    let (mut scenario, _) = scenario::load(&dir.join(SCENARIO_FILE))?;
    scenario.seed = manifest.seed_at(0);
    scenario.ticks = manifest.ticks;
    let events = EventLog::read(&dir.join(EVENTS_FILE))?;
    let tape = Tape::read(&dir.join(LLM_FILE))?;
    let completed = events.ticks.len() as u64;
    if completed == 0 {
        return Err(RunError::Refused(format!(
            "{} has no completed tick to replay",
            dir.join(EVENTS_FILE).display()
        )));
    }

    let template = RequestTemplate::new(&scenario);
    let mut world = build_world(scenario.world_setup());
    let mut memories: BTreeMap<MemoryId, MemoryRecord> = BTreeMap::new();
    for m in std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending) {
        memories.insert(m.id, m);
    }

    for tick in 0..completed {
        let seed = manifest.seed_at(tick);
        world.resource_mut::<SimConfig>().seed = seed;
        world.resource_mut::<SimClock>().tick = tick;
        world.run_schedule(SimPerceive);
        let observations = std::mem::take(&mut world.resource_mut::<Observations>().0);
        let diverged = |what: String| {
            Ok(ReplayReport {
                ticks: tick,
                divergence: Some(Divergence {
                    tick,
                    what,
                    expected: Vec::new(),
                    replayed: Vec::new(),
                }),
            })
        };
        let Some(calls) = tape.ticks.get(&tick) else {
            return diverged(format!("llm.jsonl has no brain call for tick {tick}"));
        };
        let mut thoughts = BTreeMap::new();
        for obs in observations {
            let name = template.names[obs.npc.index()].clone();
            let Some(call) = calls.get(&name) else {
                return diverged(format!(
                    "llm.jsonl has no brain call for {name} at tick {tick}"
                ));
            };
            let mut recalled = Vec::with_capacity(call.recalled.len());
            for id in &call.recalled {
                match memories.get(id) {
                    Some(m) if m.npc == obs.npc => recalled.push(template.recollection(m.clone())),
                    _ => {
                        return diverged(format!(
                            "{name} recalled memory {} at tick {tick}, which is not one of its memories at that point",
                            id.0
                        ));
                    }
                }
            }
            let npc = obs.npc;
            let request = template.request(seed, obs, recalled);
            if request.digest() != call.request {
                return diverged(format!(
                    "what {name} perceived or recalled at tick {tick} differs from the recorded request \
                     (digest {} against {})",
                    request.digest(),
                    call.request
                ));
            }
            thoughts.insert(npc, thought_from(call));
        }
        world.insert_resource(Decisions(thoughts));
        world.run_schedule(SimAct);
        let replayed = std::mem::take(&mut world.resource_mut::<TickLog>().lines);
        for m in std::mem::take(&mut world.resource_mut::<MemoryLedger>().pending) {
            memories.insert(m.id, m);
        }
        let expected = events.tick_lines(tick).unwrap_or_default();
        if replayed.as_slice() != expected {
            let at = replayed
                .iter()
                .zip(expected)
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| replayed.len().min(expected.len()));
            let window =
                |lines: &[String]| lines.iter().skip(at).take(3).cloned().collect::<Vec<_>>();
            return Ok(ReplayReport {
                ticks: tick,
                divergence: Some(Divergence {
                    tick,
                    what: format!("event {} of tick {tick} differs", at + 1),
                    expected: window(expected),
                    replayed: window(&replayed),
                }),
            });
        }
    }
    Ok(ReplayReport {
        ticks: completed,
        divergence: None,
    })
}
